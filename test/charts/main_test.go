package charts

import (
	"bytes"
	"context"
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

// monitoringAPIPackage holds the Prometheus Operator's monitoring.coreos.com/v1 types (a
// requirement of go.mod, used for typed decoding too). The module ships no CRD files: the
// tests generate the ServiceMonitor and PrometheusRule CRDs from these types with the pinned
// controller-gen, so the schemas the API server enforces are those of the types the tests
// decode with.
const monitoringAPIPackage = "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

// controllerGenVersion is the controller-gen the Makefile pins (CONTROLLER_GEN_VERSION).
const controllerGenVersion = "v0.21.0"

var (
	// root is the repository root.
	root string

	// The envtest control plane is started by the first test that needs it and stopped by
	// TestMain, so the rendering tests run without it.
	envOnce sync.Once
	env     *envtest.Environment
	envErr  error

	// tempDirs are removed by TestMain.
	tempDirs []string
)

func TestMain(m *testing.M) {
	var err error
	root, err = envtest.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	for _, d := range tempDirs {
		_ = os.RemoveAll(d)
	}
	for _, e := range []*envtest.Environment{env, flavorEnv} {
		if e != nil {
			if err := e.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
			}
		}
	}
	os.Exit(code)
}

// startEnv returns the shared control plane: kube-apiserver and etcd with the Cluster API
// core, kubeadm bootstrap and control-plane, cert-manager, ServiceMonitor and PrometheusRule
// CRDs, but without the CAPOV CRDs, which the capov-crds chart installs.
func startEnv(t *testing.T) *envtest.Environment {
	t.Helper()
	envOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		var monitoringCRDs []string
		if monitoringCRDs, envErr = generateMonitoringCRDs(ctx, "servicemonitors", "prometheusrules"); envErr != nil {
			return
		}
		var capiDir string
		if capiDir, envErr = envtest.ModuleDir(ctx, "sigs.k8s.io/cluster-api"); envErr != nil {
			return
		}
		env, envErr = envtest.Start(ctx, envtest.Options{
			WithoutOurCRDs:      true,
			WithCertManagerCRDs: true,
			ExtraCRDPaths: append(monitoringCRDs,
				filepath.Join(capiDir, "bootstrap", "kubeadm", "config", "crd", "bases"),
				filepath.Join(capiDir, "controlplane", "kubeadm", "config", "crd", "bases"),
			),
		})
	})
	if envErr != nil {
		t.Fatalf("starting envtest: %v", envErr)
	}
	return env
}

// generateMonitoringCRDs runs controller-gen on the monitoring.coreos.com/v1 types into a
// temporary directory and returns the CRD files of the given plurals.
func generateMonitoringCRDs(ctx context.Context, plurals ...string) ([]string, error) {
	// The Makefile's CONTROLLER_GEN: built in CAPOV's module set, once for make generate and this.
	gen := filepath.Join(root, "bin", "tools", "controller-gen-"+controllerGenVersion+"-modset")
	if st, err := os.Stat(gen); err != nil || st.Mode()&0o111 == 0 {
		cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "go-install-tool.sh"), gen,
			"sigs.k8s.io/controller-tools/cmd/controller-gen", controllerGenVersion, "sigs.k8s.io/controller-tools")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building controller-gen: %w: %s", err, out)
		}
	}
	dir, err := os.MkdirTemp("", "capov-monitoring-crds-")
	if err != nil {
		return nil, err
	}
	tempDirs = append(tempDirs, dir)
	cmd := exec.CommandContext(ctx, gen, "crd", "paths="+monitoringAPIPackage, "output:crd:artifacts:config="+dir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("controller-gen crd paths=%s: %w: %s", monitoringAPIPackage, err, out)
	}
	var files []string
	for _, p := range plurals {
		f := filepath.Join(dir, "monitoring.coreos.com_"+p+".yaml")
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("controller-gen did not write the %s CRD: %w", p, err)
		}
		files = append(files, f)
	}
	return files, nil
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
