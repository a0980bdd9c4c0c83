package clusterctlupgrade

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// releaseFlags are the flags the manager and webhook Deployments of both v0.2.0 and v0.3.0 pass
// (config/manager, the charts' defaults) that mean something outside a pod; the harness adds the
// kubeconfig, certificate directory and endpoints, and the Lease namespace a pod takes from its
// service account. The poll intervals are the tests' (seconds
// instead of minutes).
var (
	releaseFlags = []string{"--feature-gates=disk-add-vm-name=false,disk-clone=false,disk-keep-template-name=true", "--v=0"}
	managerFlags = append([]string{"--leader-elect", "--leader-election-namespace=capov-system", "--vm-poll-interval=500ms", "--node-poll-interval=500ms"}, releaseFlags...)
)

// installation is how a scenario installs and upgrades CAPOV: clusterctl or Helm.
type installation struct {
	// install installs cert-manager, Cluster API's CRDs when withoutCAPICRDs, and CAPOV's
	// previous release into the management cluster.
	install         func(ctx context.Context, env *envtest.Environment) error
	withoutCAPICRDs bool
	// ours selects CAPOV's admission configurations among those installed.
	ours func(client.Object) bool
	// afterInstall runs once the stack runs (before the webhooks are pointed at the process).
	afterInstall func(ctx context.Context, g Gomega, stack *harness.Stack)
	// upgrade upgrades CAPOV to this tree while its processes are stopped; restore puts the
	// installed client configurations of the webhooks and conversion back first when needed.
	upgrade func(ctx context.Context, g Gomega, stack *harness.Stack, restore func())
	// afterUpgrade, when set, runs once the upgraded installation passed every check.
	afterUpgrade func(ctx context.Context, g Gomega, stack *harness.Stack)
}

// machineIdentity is what must not change in an upgrade: the Machine object and its VM.
type machineIdentity struct{ UID, ProviderID string }

// upgradeScenario runs step 2 of the upgrade scenario on envtest with processes: the previous
// release's manager and webhook (built from the history) run a cluster of the product doc's
// examples until every Machine is Running with a Node; the installation is upgraded to this
// tree and the processes are replaced by this tree's; then every Machine must stay Running and
// Ready for 30 s of reconciles, no Machine replaced, no VM written (CHANGELOG.md, v0.3.0 upgrade
// notes: "No VM is written by the upgrade") and every object readable in v1beta1 and v1beta2
// with the same spec.
func upgradeScenario(t *testing.T, ctx context.Context, work string, in installation) {
	g := NewWithT(t)
	start := time.Now()
	root, err := envtest.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	old, err := harness.BuildRelease(ctx, root, previousRelease)
	g.Expect(err).NotTo(HaveOccurred())
	newManager, err := harness.BuildBinary(ctx, root, filepath.Join(work, "new"), "manager")
	g.Expect(err).NotTo(HaveOccurred())
	newWebhook, err := harness.BuildBinary(ctx, root, filepath.Join(work, "new"), "webhook")
	g.Expect(err).NotTo(HaveOccurred())

	seed := ovirtsim.DemoSeed()
	seed.Timings = ovirtsim.Timings{ImageLock: 300 * time.Millisecond, DiskLock: 100 * time.Millisecond, WaitForLaunch: 100 * time.Millisecond,
		PoweringUp: 200 * time.Millisecond, PoweringDown: 100 * time.Millisecond, GuestAgentDelay: 100 * time.Millisecond,
		NoAgentPoweringUp: time.Second}
	stack, err := harness.StartStack(ctx, harness.StackOptions{
		WorkDir: filepath.Join(work, "stack"), Seed: seed, Out: testWriter{t},
		Binaries:         map[string]string{"manager": old.Manager, "webhook": old.Webhook},
		WebhookManifests: filepath.Join(old.Src, "config", "webhook", "manifests.yaml"),
		InstallCRDs:      in.install, WithoutCAPICRDs: in.withoutCAPICRDs,
		CAPIAsProcess: true,
		ManagerArgs:   managerFlags, WebhookArgs: releaseFlags,
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []*harness.Process{stack.Manager, stack.Webhook, stack.CAPI} {
				if p != nil {
					t.Logf("%s log:\n%s", p.Name, harness.Tail(p.Logs(), 40))
				}
			}
		}
		stack.Stop()
	})
	c := stack.MgmtClient()
	if in.afterInstall != nil {
		in.afterInstall(ctx, g, stack)
	}
	restore := pointWebhooks(ctx, g, c, stack, in.ours)

	t.Logf("%s runs the product doc's examples until every Machine is Running with a Node (%s so far)", previousVersion, time.Since(start).Round(time.Second))
	g.Expect(harness.ApplyExamples(ctx, stack)).To(Succeed())
	g.Eventually(func() error { return harness.ExamplesReady(ctx, c, "v1beta2") }).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	machinesBefore := machineIdentities(ctx, g, c)
	specsBefore, err := harness.SpecSnapshot(ctx, c, "v1beta1")
	g.Expect(err).NotTo(HaveOccurred())
	writesBefore := harness.VMWriteRequests(stack.Sim)
	g.Expect(harness.VMWrites(stack.Sim)).To(BeNumerically(">=", harness.ExampleMachines), "the previous release created the VMs: the write counter must see them")

	t.Logf("Upgrade: the webhook and manager stop, CAPOV is upgraded to %s, this tree's binaries start (%s so far)", thisVersion, time.Since(start).Round(time.Second))
	g.Expect(stack.Manager.Stop(30 * time.Second)).To(Succeed())
	g.Expect(stack.Webhook.Stop(30 * time.Second)).To(Succeed())
	in.upgrade(ctx, g, stack, restore)
	pointWebhooks(ctx, g, c, stack, in.ours)
	g.Expect(stack.StartWebhook(ctx, newWebhook)).To(Succeed())
	stack.ManagerBin = newManager
	stack.Manager, _, err = stack.StartManager(ctx, "manager-"+thisVersion, managerFlags)
	g.Expect(err).NotTo(HaveOccurred())

	t.Logf("Every Machine stays Running and Ready for 30 s of reconciles, in v1beta1 and v1beta2 (%s so far)", time.Since(start).Round(time.Second))
	g.Consistently(func(g Gomega) {
		g.Expect(harness.ExamplesReady(ctx, c, "v1beta1")).To(Succeed())
		g.Expect(harness.ExamplesReady(ctx, c, "v1beta2")).To(Succeed())
	}).WithTimeout(30 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	g.Expect(machineIdentities(ctx, g, c)).To(Equal(machinesBefore), "no Machine was replaced: the same UIDs and providerIDs")
	g.Expect(harness.VMWriteRequests(stack.Sim)).To(Equal(writesBefore), "no VM was written (CHANGELOG.md, v0.3.0 upgrade notes)")
	for _, version := range []string{"v1beta1", "v1beta2"} {
		specs, err := harness.SpecSnapshot(ctx, c, version)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(specs).To(HaveLen(len(specsBefore)), version)
		for key, spec := range specsBefore {
			g.Expect(cmp.Diff(spec, specs[key])).To(BeEmpty(), "the spec of %s must read the same in %s after the upgrade", key, version)
		}
	}
	t.Logf("The upgrade scenario took %s", time.Since(start).Round(time.Second))
	if in.afterUpgrade != nil {
		in.afterUpgrade(ctx, g, stack)
	}
}

// pointWebhooks points CAPOV's admission webhooks and CRD conversion at the webhook process and
// deletes every other admission configuration (Cluster API's: no process serves them, and the
// tests' objects are valid); it returns a function that puts the installed configurations back.
func pointWebhooks(ctx context.Context, g Gomega, c client.Client, stack *harness.Stack, ours func(client.Object) bool) func() {
	pointed, restoreAdmission, err := harness.UseWebhookProcess(ctx, c, stack, ours)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pointed).To(HaveLen(2), "CAPOV installs one mutating and one validating configuration")
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	g.Expect(c.List(ctx, crds)).To(Succeed())
	var converted []string
	for _, crd := range crds.Items {
		if crd.Spec.Group == "infrastructure.cluster.x-k8s.io" && strings.HasPrefix(crd.Name, "ovirt") &&
			crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
			converted = append(converted, crd.Name)
		}
	}
	g.Expect(len(converted)).To(BeNumerically(">=", len(originalKinds)), "CAPOV's CRDs convert through its webhook")
	restoreConversion, err := harness.PointConversionAtWebhookProcess(ctx, c, stack, converted)
	g.Expect(err).NotTo(HaveOccurred())
	return func() {
		g.Expect(restoreConversion()).To(Succeed())
		g.Expect(restoreAdmission()).To(Succeed())
	}
}

func machineIdentities(ctx context.Context, g Gomega, c client.Client) map[string]machineIdentity {
	machines := &clusterv1.MachineList{}
	g.Expect(c.List(ctx, machines, client.InNamespace(harness.ExamplesNamespace))).To(Succeed())
	out := map[string]machineIdentity{}
	for _, m := range machines.Items {
		g.Expect(m.Spec.ProviderID).NotTo(BeEmpty(), m.Name)
		out[m.Name] = machineIdentity{UID: string(m.UID), ProviderID: m.Spec.ProviderID}
	}
	g.Expect(out).To(HaveLen(harness.ExampleMachines))
	return out
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
