package clusterctlupgrade

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
)

// TestHelmUpgradeFromThePreviousRelease is the upgrade scenario with Helm: cert-manager's CRDs,
// then v0.2.0's two charts (its tree's charts/, git archive of previousRelease) in the
// documented order, then `helm upgrade` of both to this tree's charts, capov-crds first.
// test/upgrade does the same from the v1beta1-only release, with the charts kept as test data.
func TestHelmUpgradeFromThePreviousRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release's components and runs a Helm install and upgrade")
	}
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("HELM is not set: run through `make unit` (HELM=$(hack/helm.sh))")
	}
	root, err := envtest.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	old, err := harness.BuildRelease(ctx, root, previousRelease)
	g.Expect(err).NotTo(HaveOccurred())
	work := t.TempDir()
	kubeconfig := filepath.Join(work, "kubeconfig")

	upgradeScenario(t, ctx, work, installation{
		install: func(ctx context.Context, env *envtest.Environment) error {
			kc, err := env.Kubeconfig("helm")
			if err != nil {
				return err
			}
			if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
				return err
			}
			cm, err := envtest.ModuleDir(ctx, "github.com/cert-manager/cert-manager")
			if err != nil {
				return err
			}
			if _, err := crenvtest.InstallCRDs(env.Config, crenvtest.CRDInstallOptions{Paths: []string{filepath.Join(cm, "deploy", "crds")}, ErrorIfPathMissing: true}); err != nil {
				return err
			}
			t.Logf("helm install capov-crds, capov (%s)", previousVersion)
			if err := runTool(ctx, helm, "install", "capov-crds", filepath.Join(old.Src, "charts", "capov-crds"), "--kubeconfig", kubeconfig, "--wait"); err != nil {
				return err
			}
			return runTool(ctx, helm, "install", "capov", filepath.Join(old.Src, "charts", "capov"),
				"--kubeconfig", kubeconfig, "-n", "capov-system", "--create-namespace")
		},
		ours: func(o client.Object) bool { return o.GetLabels()["app.kubernetes.io/managed-by"] == "Helm" },
		upgrade: func(ctx context.Context, g Gomega, _ *harness.Stack, restore func()) {
			// Helm's three-way merge keeps what the test changed beside what the charts write:
			// the Service client configurations go back first.
			restore()
			t.Logf("helm upgrade capov-crds, capov (%s)", thisVersion)
			g.Expect(runTool(ctx, helm, "upgrade", "capov-crds", filepath.Join(root, "charts", "capov-crds"), "--kubeconfig", kubeconfig, "--wait")).To(Succeed())
			g.Expect(runTool(ctx, helm, "upgrade", "capov", filepath.Join(root, "charts", "capov"), "--kubeconfig", kubeconfig, "-n", "capov-system")).To(Succeed())
		},
	})
}

func runTool(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, b.String())
	}
	return nil
}
