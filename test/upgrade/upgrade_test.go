// Package upgrade tests the upgrade from the last v1beta1-only release to this one as an
// operator does it: the release's CRD chart and binaries run a cluster until it is Ready; then
// the CRD chart is upgraded with Helm and the webhook and manager are replaced by this
// version's. Everything must stay Ready, no VM may be written to, every object must read the
// same in v1beta1 and be readable in v1beta2, and the CRDs must end with storedVersions
// [v1beta2].
//
// The v1beta1-only release is commit oldRelease: its charts are kept as test data
// (testdata/v1beta1-release), its binaries are built from the repository history. envtest runs
// no pods, so the charts' Deployments never start: the binaries run as processes with the
// charts' flags, and the webhook Service is replaced by the process's URL (useChartWebhooks).
package upgrade

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

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// oldRelease is the last commit before v1beta2: v1beta1-only CRDs, manager and webhook.
const oldRelease = "5c1cf2a"

var ourCRDs = []string{
	"ovirtproviders.infrastructure.cluster.x-k8s.io", "ovirtclusters.infrastructure.cluster.x-k8s.io",
	"ovirtmachines.infrastructure.cluster.x-k8s.io", "ovirtmachinetemplates.infrastructure.cluster.x-k8s.io",
}

func TestUpgradeFromTheV1Beta1Release(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release and runs two stacks")
	}
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("HELM is not set: run through `make unit` (HELM=$(hack/helm.sh))")
	}
	root, err := envtest.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	work := t.TempDir()
	old, err := harness.BuildRelease(ctx, root, oldRelease)
	g.Expect(err).NotTo(HaveOccurred())
	newManager, err := harness.BuildBinary(ctx, root, filepath.Join(work, "new"), "manager")
	g.Expect(err).NotTo(HaveOccurred())
	newWebhook, err := harness.BuildBinary(ctx, root, filepath.Join(work, "new"), "webhook")
	g.Expect(err).NotTo(HaveOccurred())

	seed := ovirtsim.DemoSeed()
	seed.Timings = ovirtsim.Timings{ImageLock: 300 * time.Millisecond, DiskLock: 100 * time.Millisecond, WaitForLaunch: 100 * time.Millisecond,
		PoweringUp: 200 * time.Millisecond, PoweringDown: 100 * time.Millisecond, GuestAgentDelay: 100 * time.Millisecond,
		NoAgentPoweringUp: time.Second}
	kubeconfig := filepath.Join(work, "kubeconfig")
	stack, err := harness.StartStack(ctx, harness.StackOptions{
		WorkDir: filepath.Join(work, "stack"), Seed: seed, Out: testWriter{t},
		Binaries:         map[string]string{"manager": old.Manager, "webhook": old.Webhook},
		WebhookManifests: filepath.Join(old.Src, "config", "webhook", "manifests.yaml"),
		// The operator installs cert-manager, then the release's two charts in the Shturval order.
		InstallCRDs: func(ctx context.Context, env *envtest.Environment) error {
			kc, err := env.Kubeconfig("upgrade")
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
			if err := run(ctx, helm, "install", "capov-crds", filepath.Join("testdata", "v1beta1-release", "charts", "capov-crds"),
				"--kubeconfig", kubeconfig, "--wait"); err != nil {
				return err
			}
			return run(ctx, helm, "install", "capov", filepath.Join("testdata", "v1beta1-release", "charts", "capov"),
				"--kubeconfig", kubeconfig, "-n", "capov-system", "--create-namespace")
		},
		ManagerArgs: []string{"--vm-poll-interval=500ms", "--node-poll-interval=500ms"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer stack.Stop()
	c := stack.MgmtClient()
	// The charts' webhook configurations (and, after the upgrade, the CRDs' conversion) call the
	// webhook Service, which envtest cannot reach: point them at the webhook process, and drop
	// the configurations the harness registered, so that only the charts' remain.
	restoreChartWebhooks := useChartWebhooks(ctx, g, c, stack)

	t.Log("The v1beta1 release runs the product doc's examples until everything is Ready")
	g.Expect(harness.ApplyExamples(ctx, stack)).To(Succeed())
	g.Eventually(func() error { return harness.ExamplesReady(ctx, c, "v1beta1") }).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
	before, err := harness.SpecSnapshot(ctx, c, "v1beta1")
	g.Expect(err).NotTo(HaveOccurred())
	vmsBefore := stack.Sim.VMs()
	writesBefore := harness.VMWrites(stack.Sim)
	putsBefore := stack.Sim.RequestCount("PUT", "/vms/{id}")
	g.Expect(writesBefore).To(BeNumerically(">=", 4), "the old release created four VMs: the write counter must see them")

	t.Log("Upgrade: the webhook and manager stop, both charts are upgraded (capov-crds first), this version's binaries start")
	g.Expect(stack.Manager.Stop(30 * time.Second)).To(Succeed())
	g.Expect(stack.Webhook.Stop(30 * time.Second)).To(Succeed())
	g.Expect(run(ctx, helm, "upgrade", "capov-crds", filepath.Join(root, "charts", "capov-crds"), "--kubeconfig", kubeconfig, "--wait")).To(Succeed())
	g.Expect(restoreChartWebhooks()).To(Succeed())
	g.Expect(run(ctx, helm, "upgrade", "capov", filepath.Join(root, "charts", "capov"), "--kubeconfig", kubeconfig, "-n", "capov-system")).To(Succeed())
	_, err = harness.PointConversionAtWebhookProcess(ctx, c, stack, ourCRDs)
	g.Expect(err).NotTo(HaveOccurred())
	useChartWebhooks(ctx, g, c, stack)
	g.Expect(stack.StartWebhook(ctx, newWebhook)).To(Succeed())
	stack.ManagerBin = newManager
	stack.Manager, _, err = stack.StartManager(ctx, "manager-new", []string{"--vm-poll-interval=500ms", "--node-poll-interval=500ms"})
	g.Expect(err).NotTo(HaveOccurred())

	t.Log("The CRD migrator leaves storedVersions [v1beta2]; everything stays Ready in both versions")
	g.Eventually(func(g Gomega) {
		for _, name := range ourCRDs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1beta2"}), name)
		}
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(harness.ExamplesReady(ctx, c, "v1beta1")).To(Succeed())
		g.Expect(harness.ExamplesReady(ctx, c, "v1beta2")).To(Succeed())
	}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
	after, err := harness.SpecSnapshot(ctx, c, "v1beta1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(HaveLen(len(before)))
	for key, spec := range before {
		g.Expect(cmp.Diff(spec, after[key])).To(BeEmpty(), "the spec of %s must read the same in v1beta1 after the upgrade", key)
	}

	t.Log("No VM was written to, except that its bootstrap data was cleared and its owner marker gained the management cluster, once each")
	// This release removes the bootstrap data (join token) from the VMs of registered Nodes
	// (docs/operations.md, "Bootstrap data in oVirt"), and writes the management-cluster id into
	// the owner marker of each VM at its machine's first read (docs/operations.md, "The
	// management cluster id"): one PUT /vms/{id} each per VM, nothing else.
	g.Eventually(func(g Gomega) {
		for _, vm := range vmsBefore {
			got, _ := stack.Sim.VM(vm.ID)
			g.Expect(got.CustomScript).To(BeEmpty(), "VM %s", vm.Name)
			g.Expect(got.Comment).To(ContainSubstring(" management-cluster="), "VM %s", vm.Name)
		}
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	// A reconcile that read the object just before the status recording the clear arrived may
	// clear it again: harmless (the same PUT), and rare.
	puts := stack.Sim.RequestCount("PUT", "/vms/{id}") - putsBefore
	g.Expect(harness.VMWrites(stack.Sim)-writesBefore).To(Equal(puts), "only the bootstrap data of the VMs changed: %v", harness.VMWriteRequests(stack.Sim))
	g.Expect(puts).To(And(BeNumerically(">=", 2*len(vmsBefore)), BeNumerically("<=", 3*len(vmsBefore))))
	vmsAfter := stack.Sim.VMs()
	g.Expect(vmsAfter).To(HaveLen(len(vmsBefore)))
	for _, vm := range vmsBefore {
		got, ok := stack.Sim.VM(vm.ID)
		g.Expect(ok).To(BeTrue(), "VM %s disappeared", vm.Name)
		g.Expect(got.Status).To(Equal(vm.Status), "VM %s", vm.Name)
		g.Expect(got.Comment).To(HavePrefix(vm.Comment+" management-cluster="), "VM %s: the owner marker only gained the management cluster", vm.Name)
		g.Expect(got.HostName).To(Equal(vm.HostName), "VM %s", vm.Name)
	}
}

func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, b.String())
	}
	return nil
}

// useChartWebhooks points the charts' webhook configurations at the webhook process and
// deletes the others (harness.UseWebhookProcess); the returned function puts the charts' Service
// client configurations back before a Helm upgrade.
func useChartWebhooks(ctx context.Context, g Gomega, c client.Client, stack *harness.Stack) (restore func() error) {
	pointed, restore, err := harness.UseWebhookProcess(ctx, c, stack, func(o client.Object) bool {
		return o.GetLabels()["app.kubernetes.io/managed-by"] == "Helm"
	})
	g.Expect(err).NotTo(HaveOccurred())
	kinds := map[string]int{}
	for _, cfg := range pointed {
		kinds[fmt.Sprintf("%T", cfg)]++
	}
	g.Expect(kinds).To(Equal(map[string]int{
		"*v1.MutatingWebhookConfiguration": 1, "*v1.ValidatingWebhookConfiguration": 1,
	}), "the capov chart installs one mutating and one validating configuration")
	return restore
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
