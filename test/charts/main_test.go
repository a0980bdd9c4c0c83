package charts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capov/capov/test/envtest"
)

// Versions of modules that are not in go.mod but whose files the tests need.
const (
	// prometheusOperatorModule carries the ServiceMonitor CRD in
	// example/prometheus-operator-crd/.
	prometheusOperatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
)

var (
	// root is the repository root.
	root string

	// The envtest control plane is started by the first test that needs it and stopped by
	// TestMain, so the rendering tests run without it.
	envOnce sync.Once
	env     *envtest.Environment
	envErr  error
)

func TestMain(m *testing.M) {
	var err error
	root, err = envtest.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}
	os.Exit(code)
}

// startEnv returns the shared control plane: kube-apiserver and etcd with the Cluster API
// core, kubeadm bootstrap and control-plane, cert-manager and ServiceMonitor CRDs, but without
// the CAPOV CRDs, which the capov-crds chart installs.
func startEnv(t *testing.T) *envtest.Environment {
	t.Helper()
	envOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		var smDir, capiDir string
		if smDir, envErr = moduleDownloadDir(ctx, prometheusOperatorModule); envErr != nil {
			return
		}
		if capiDir, envErr = envtest.ModuleDir(ctx, "sigs.k8s.io/cluster-api"); envErr != nil {
			return
		}
		env, envErr = envtest.Start(ctx, envtest.Options{
			WithoutOurCRDs:      true,
			WithCertManagerCRDs: true,
			ExtraCRDPaths: []string{
				filepath.Join(smDir, "example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml"),
				filepath.Join(capiDir, "bootstrap", "kubeadm", "config", "crd", "bases"),
				filepath.Join(capiDir, "controlplane", "kubeadm", "config", "crd", "bases"),
			},
		})
	})
	if envErr != nil {
		t.Fatalf("starting envtest: %v", envErr)
	}
	return env
}

// moduleDownloadDir downloads a module that is not in the build list through the module proxy
// (or finds it in the module cache) and returns its directory.
func moduleDownloadDir(ctx context.Context, moduleAtVersion string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", moduleAtVersion)
	cmd.Dir = os.TempDir() // outside the workspace: the module is not ours to require
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w: %s%s", moduleAtVersion, err, out, stderr.String())
	}
	var info struct {
		Dir   string
		Error string
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", moduleAtVersion, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", moduleAtVersion, info.Error)
	}
	return info.Dir, nil
}

// tool builds (once, cached in bin/tools) a CLI with one of the hack scripts and returns its
// path. An environment variable (HELM, CLUSTERCTL) naming an executable wins.
func tool(t *testing.T, envVar, script string) string {
	t.Helper()
	if p := os.Getenv(envVar); p != "" {
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", script))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/%s: %v\n%s", script, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// run executes a command and returns its combined output.
func run(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
