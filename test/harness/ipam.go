package harness

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capov/capov/test/envtest"
)

// IPAMProviderDir builds (once, cached in bin/ipam) Cluster API's in-cluster IPAM provider with
// hack/ipam-provider.sh and returns its directory: the binary "manager" and the CRDs in "crds".
func IPAMProviderDir(ctx context.Context, root string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "ipam-provider.sh"))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the in-cluster IPAM provider: %w: %s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// startIPAMProvider installs the in-cluster IPAM provider's CRDs in the management cluster and
// runs the provider against it, without its webhooks (they need certificates the envtest API
// server has no configuration for; the pools of the tests are valid).
func (s *Stack) startIPAMProvider(ctx context.Context, root string) error {
	p, err := s.runIPAMProvider(ctx, root, s.Mgmt.Config, s.KubeconfigPath, "ipam-in-cluster")
	if p != nil {
		s.IPAM = p
	}
	return err
}

// StartIPAM runs the in-cluster IPAM provider for another management cluster as for the
// stack's own (StackOptions.WithIPAM), with its CRDs; Stop stops it.
func (s *Stack) StartIPAM(ctx context.Context, m *Management) error {
	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	p, err := s.runIPAMProvider(ctx, root, m.Env.Config, m.KubeconfigPath, m.Name+"-ipam-in-cluster")
	if p != nil {
		m.IPAM = p
	}
	return err
}

func (s *Stack) runIPAMProvider(ctx context.Context, root string, cfg *rest.Config, kubeconfig, name string) (*Process, error) {
	dir, err := IPAMProviderDir(ctx, root)
	if err != nil {
		return nil, err
	}
	if _, err := crenvtest.InstallCRDs(cfg, crenvtest.CRDInstallOptions{
		Paths: []string{filepath.Join(dir, "crds")}, ErrorIfPathMissing: true,
	}); err != nil {
		return nil, fmt.Errorf("installing the in-cluster IPAM provider's CRDs: %w", err)
	}
	// The provider binds its endpoints on port 0; its log line reports the health endpoint.
	p, err := Start(name, filepath.Join(dir, "manager"), []string{
		"--kubeconfig=" + kubeconfig, "--webhook-port=0",
		"--health-probe-bind-address=127.0.0.1:0",
		"--diagnostics-address=127.0.0.1:0", "--insecure-diagnostics",
	}, nil, filepath.Join(s.opts.WorkDir, "logs", name+".log"))
	if err != nil {
		return nil, err
	}
	health, err := ReportedServerAddress(ctx, p, "health probe")
	if err != nil {
		return p, err
	}
	return p, WaitReady(ctx, p, "http://"+health+"/readyz")
}
