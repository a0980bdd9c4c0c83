package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// cloneFollowFilter is the watch filter of this file's manager; the webhook binary this file
// starts is registered for the objects carrying it only, so the rest of the suite keeps running
// without admission.
const cloneFollowFilter = "clone-follow"

// webhookServer is the webhook binary serving the suite's API server, as the chart deploys it,
// for the objects labelled cluster.x-k8s.io/watch-filter=<filter>.
type webhookServer struct {
	t       *testing.T
	bin     string
	filter  string
	opts    crenvtest.WebhookInstallOptions
	process *harness.Process
	// admission is the registered port, held here and handed to each webhook process.
	admission *net.TCPListener
}

// startWebhook builds the webhook binary, registers config/webhook/manifests.yaml with the
// API server (each webhook limited to the filter's objects) and starts the binary with gates.
// The configurations are removed and the binary stopped when the test ends.
func startWebhook(t *testing.T, filter, gates string) *webhookServer {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	root, err := envtest.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	bin, err := harness.BuildBinary(ctx, root, filepath.Join(workDir, "bin"), "webhook")
	g.Expect(err).NotTo(HaveOccurred())
	admission, err := harness.Listen()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = admission.Close() })
	w := &webhookServer{t: t, bin: bin, filter: filter, admission: admission, opts: crenvtest.WebhookInstallOptions{
		Paths:            []string{filepath.Join(root, "config", "webhook", "manifests.yaml")},
		LocalServingHost: "127.0.0.1",
		LocalServingPort: admission.Addr().(*net.TCPAddr).Port,
	}}
	// A CA, a serving certificate for 127.0.0.1, the URLs and caBundles.
	g.Expect(w.opts.PrepWithoutInstalling()).To(Succeed())
	t.Cleanup(func() { _ = w.opts.Cleanup() })
	selector := &metav1.LabelSelector{MatchLabels: filterLabels(filter)}
	for _, c := range w.opts.MutatingWebhooks {
		c.Name = "capov-" + filter + "-" + c.Name
		for i := range c.Webhooks {
			c.Webhooks[i].ObjectSelector = selector
		}
	}
	for _, c := range w.opts.ValidatingWebhooks {
		c.Name = "capov-" + filter + "-" + c.Name
		for i := range c.Webhooks {
			c.Webhooks[i].ObjectSelector = selector
		}
	}
	w.restart(gates)
	t.Cleanup(func() { _ = w.process.Stop(20 * time.Second) })
	g.Expect(w.opts.Install(env.Config)).To(Succeed())
	// With failurePolicy Fail, the configurations must go before the server does (cleanups run
	// last-in first-out).
	t.Cleanup(func() {
		for _, c := range w.opts.MutatingWebhooks {
			_ = k8s.Delete(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metaName(c.Name)})
		}
		for _, c := range w.opts.ValidatingWebhooks {
			_ = k8s.Delete(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metaName(c.Name)})
		}
	})
	return w
}

// restart stops the running binary, if any, and starts it with --feature-gates=gates, as the
// platform recreates the pod after a ShturvalServicePatch; it returns once /readyz passes.
func (w *webhookServer) restart(gates string) {
	w.t.Helper()
	g := NewWithT(w.t)
	if w.process != nil {
		if err := w.process.Stop(20 * time.Second); err != nil {
			w.t.Logf("stopping %s: %v", w.process.Name, err)
		}
	}
	health, err := harness.Listen()
	g.Expect(err).NotTo(HaveOccurred())
	defer health.Close() // the process has its own copy
	name := "webhook-" + w.filter + "-" + strings.ToLower(rand.String(4))
	w.process, err = harness.StartWith(name, w.bin, []string{
		"--kubeconfig=" + kubeconfigPath,
		fmt.Sprintf("--webhook-port=%d", w.opts.LocalServingPort), "--cert-dir=" + w.opts.LocalServingCertDir,
		"--health-probe-bind-address=" + health.Addr().String(), "--metrics-bind-address=0",
		"--feature-gates=" + gates, "--debug",
	}, nil, filepath.Join(workDir, "logs", name+".log"),
		harness.Handover{Name: "webhook", Listener: w.admission}, harness.Handover{Name: "health", Listener: health})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(harness.WaitReady(context.Background(), w.process, "http://"+health.Addr().String()+"/readyz")).To(Succeed())
}

// scaleFrom creates one more machine of the group the way Cluster API's MachineSet does: a
// Machine, and an OVirtMachine whose spec is the stored template's spec.template.spec (CAPI's
// external.CreateFromTemplate copies it as is, with the cloned-from annotations), which the
// OVirtMachine webhooks then default and validate.
func (tc *testCluster) scaleFrom(t *testing.T, tpl *infrav1.OVirtMachineTemplate) *infrav1.OVirtMachine {
	t.Helper()
	stored := &infrav1.OVirtMachineTemplate{}
	NewWithT(t).Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(tpl), stored)).To(Succeed())
	_, om := tc.newMachine(t, *stored.Spec.Template.Spec.DeepCopy(), ignitionConfig)
	return om
}

// eventuallyAdmittedClone waits until the webhook's OVirtProvider cache has caught up: a
// server-side dry-run of a new machine of the template gets diskclone want.
func (tc *testCluster) eventuallyAdmittedClone(t *testing.T, tpl *infrav1.OVirtMachineTemplate, want bool) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		probe := harness.OVirtMachine(harness.Machine(tc.cluster, "probe-"+strings.ToLower(rand.String(5)), ""), tpl.Spec.Template.Spec)
		for k, v := range filterLabels(tc.filter) {
			probe.Labels[k] = v
		}
		g.Expect(k8s.Create(context.Background(), probe, client.DryRunAll)).To(Succeed())
		g.Expect(probe.Spec.DiskClone).To(HaveValue(Equal(want)))
	}, timeout, interval).Should(Succeed())
}

func patchProvider(t *testing.T, p *infrav1.OVirtProvider, mutate func(*infrav1.OVirtProviderSpec)) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(p), p)).To(Succeed())
	base := p.DeepCopy()
	mutate(&p.Spec)
	g.Expect(k8s.Patch(context.Background(), p, client.MergeFrom(base))).To(Succeed())
}

// TestDefaultGroupFollowsTheProviderAndTheGate is product doc §6 in a running cluster: a group
// (OVirtMachineTemplate) left at Default uses the provider instance's diskclone, else the
// disk-clone gate, as they are when each new node is created; VMs that already exist are not
// changed. The webhook and the manager are the real binaries; a gate change restarts both, as
// the platform does after a ShturvalServicePatch.
func TestDefaultGroupFollowsTheProviderAndTheGate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	wh := startWebhook(t, cloneFollowFilter, "disk-clone=false")
	mgr, err := startManager("clone-follow-gate-off", cloneFollowFilter, "--feature-gates=disk-clone=false")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = mgr.Stop(20 * time.Second) })

	p := harness.Provider("clone-follow-provider", sim.URL(), credentialsSecret, sim.CAPEM())
	g.Expect(k8s.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })

	tc := newTestCluster(t, cloneFollowFilter)
	spec := vmSpec()
	spec.Provider = p.Name
	tpl := &infrav1.OVirtMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "workers-v1", Labels: filterLabels(cloneFollowFilter)},
		Spec:       infrav1.OVirtMachineTemplateSpec{Template: infrav1.OVirtMachineTemplateResource{Spec: spec}},
	}
	g.Expect(k8s.Create(ctx, tpl)).To(Succeed())
	g.Expect(tpl.Spec.Template.Spec.DiskClone).To(BeNil(), "the group stays at Default")
	g.Expect(tpl.Spec.Template.Spec.StorageDomainName).To(BeEmpty(), "the provider's storage domain is not copied into the group")

	type node struct {
		om    *infrav1.OVirtMachine
		vm    ovirtsim.VMState
		clone bool
	}
	var nodes []node
	scale := func(step string, wantClone bool, wantDomain string) {
		t.Helper()
		om := tc.scaleFrom(t, tpl)
		vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Disks).NotTo(BeEmpty()) })
		g.Expect(vm.Clone).To(Equal(wantClone), step)
		g.Expect(vm.Disks[0].StorageDomain).To(Equal(wantDomain), step)
		got := eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
			g.Expect(om.Status.DiskClone).To(HaveValue(Equal(wantClone)))
		})
		g.Expect(got.Spec.DiskClone).To(HaveValue(Equal(wantClone)), "%s: the mode is recorded when the node is created", step)
		nodes = append(nodes, node{om: om, vm: vm, clone: wantClone})
	}

	// 1. Provider Default, gate off: thin disks in the template's domain.
	scale("provider Default, gate off", false, "data")

	// 2. The provider instance turns cloning on, with another storage domain.
	patchProvider(t, p, func(s *infrav1.OVirtProviderSpec) { s.DiskClone, s.StorageDomainName = ptr.To(true), "fast" })
	tc.eventuallyAdmittedClone(t, tpl, true)
	scale("provider Yes with storage domain fast", true, "fast")
	// A second group names the storage domain itself and leaves Clone disk at Default: admitted
	// (with a warning) because the provider clones now; its machines are checked again when
	// they are created.
	fastSpec := spec
	fastSpec.StorageDomainName = "fast"
	fastTpl := &infrav1.OVirtMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "workers-fast-v1", Labels: filterLabels(cloneFollowFilter)},
		Spec:       infrav1.OVirtMachineTemplateSpec{Template: infrav1.OVirtMachineTemplateResource{Spec: fastSpec}},
	}
	g.Expect(k8s.Create(ctx, fastTpl)).To(Succeed())
	g.Expect(fastTpl.Spec.Template.Spec.DiskClone).To(BeNil())
	om := tc.scaleFrom(t, fastTpl)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Disks).NotTo(BeEmpty()) })
	g.Expect(vm.Clone).To(BeTrue())
	g.Expect(vm.Disks[0].StorageDomain).To(Equal("fast"))
	nodes = append(nodes, node{om: om, vm: vm, clone: true})

	// 3. The provider goes back to Default; the disk-clone gate is enabled (both binaries
	// restart with the new flag).
	patchProvider(t, p, func(s *infrav1.OVirtProviderSpec) { s.DiskClone, s.StorageDomainName = nil, "" })
	if err := mgr.Stop(20 * time.Second); err != nil {
		t.Logf("stopping %s: %v", mgr.Name, err)
	}
	mgr, err = startManager("clone-follow-gate-on", cloneFollowFilter, "--feature-gates=disk-clone=true")
	g.Expect(err).NotTo(HaveOccurred())
	wh.restart("disk-clone=true")
	tc.eventuallyAdmittedClone(t, tpl, true)
	scale("provider Default, gate on", true, "data")

	// 4. The provider's No wins over the gate.
	patchProvider(t, p, func(s *infrav1.OVirtProviderSpec) { s.DiskClone = ptr.To(false) })
	tc.eventuallyAdmittedClone(t, tpl, false)
	scale("provider No, gate on", false, "data")
	// The group with its own storage domain cannot get new nodes now: "fast" holds no copy of
	// the template's disks. Admission cannot see that (it warns, naming the fix); the manager,
	// with the Engine's facts, creates no VM and says why (one rule, pkg/storagerule).
	refused := tc.scaleFrom(t, fastTpl)
	eventuallyCondition(t, refused, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse, Reason: infrav1.StorageDomainRequiresCloneReason})
	_, ok := sim.VMByName(refused.Name)
	g.Expect(ok).To(BeFalse(), "no VM for a storage domain that requires cloning")
	deleteAndWait(t, refused)

	// The group never changed, and the VMs that existed before each change were left alone.
	stored := &infrav1.OVirtMachineTemplate{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tpl), stored)).To(Succeed())
	g.Expect(stored.Spec.Template.Spec.DiskClone).To(BeNil())
	for _, n := range nodes {
		vm, ok := sim.VMByName(n.om.Name)
		g.Expect(ok).To(BeTrue(), n.om.Name)
		g.Expect(vm.ID).To(Equal(n.vm.ID), "%s was not recreated", n.om.Name)
		g.Expect(vm.Clone).To(Equal(n.clone))
		got := getOM(g, n.om)
		g.Expect(got.Spec.DiskClone).To(HaveValue(Equal(n.clone)))
		g.Expect(got.Status.DiskClone).To(HaveValue(Equal(n.clone)))
	}
	for _, n := range nodes {
		deleteAndWait(t, n.om)
	}
}
