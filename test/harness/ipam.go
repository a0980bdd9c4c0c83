package harness

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
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
	dir, err := IPAMProviderDir(ctx, root)
	if err != nil {
		return err
	}
	if _, err := crenvtest.InstallCRDs(s.Mgmt.Config, crenvtest.CRDInstallOptions{
		Paths: []string{filepath.Join(dir, "crds")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing the in-cluster IPAM provider's CRDs: %w", err)
	}
	// The provider binds its endpoints on port 0; its log line reports the health endpoint.
	p, err := Start("ipam-in-cluster", filepath.Join(dir, "manager"), []string{
		"--kubeconfig=" + s.KubeconfigPath, "--webhook-port=0",
		"--health-probe-bind-address=127.0.0.1:0",
		"--diagnostics-address=127.0.0.1:0", "--insecure-diagnostics",
	}, nil, filepath.Join(s.opts.WorkDir, "logs", "ipam-in-cluster.log"))
	if err != nil {
		return err
	}
	s.IPAM = p
	health, err := ReportedServerAddress(ctx, p, "health probe")
	if err != nil {
		return err
	}
	return WaitReady(ctx, p, "http://"+health+"/readyz")
}
