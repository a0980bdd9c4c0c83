package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/cluster-api/util/conditions"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/sdk"
	"github.com/capov/capov/test/ovirtsim"
)

// ovirtClient is a direct client to the simulator, to act in oVirt behind the manager's back.
func ovirtClient(t *testing.T) ovirt.Client {
	t.Helper()
	f := sdk.NewFactory(sdk.Options{})
	t.Cleanup(f.Close)
	c, err := f.ForProvider(context.Background(), ovirt.Config{
		Provider: "test", URL: sim.URL(),
		Credentials: ovirt.Credentials{Username: sim.Username(), Password: sim.Password()},
		TLS:         ovirt.TLS{CAPEM: sim.CAPEM()},
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return c
}

func setPaused(t *testing.T, cluster *clusterv1.Cluster, paused bool) {
	t.Helper()
	ctx := context.Background()
	NewWithT(t).Eventually(func() error {
		c := &clusterv1.Cluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(cluster), c); err != nil {
			return err
		}
		base := c.DeepCopy()
		c.Spec.Paused = ptr.To(paused)
		return k8s.Patch(ctx, c, client.MergeFrom(base))
	}, timeout, interval).Should(Succeed())
}

// TestCrashAfterCreateAdoptsTheVM reproduces a manager that created the VM and crashed before
// writing its id: the next reconcile finds the VM by name and owner marker and adopts it.
func TestCrashAfterCreateAdoptsTheVM(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	setPaused(t, tc.cluster, true)
	_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	om = getOM(g, om)

	// "The lost create": the manager recorded that it creates the VM (as it does before every
	// create request), the VM exists in oVirt with this machine's marker, status knows nothing.
	g.Eventually(func() error {
		cur := getOM(g, om)
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations["capov.infrastructure.cluster.x-k8s.io/vm-create-requested"] = om.Name
		return k8s.Update(ctx, cur)
	}, timeout, interval).Should(Succeed())
	oc := ovirtClient(t)
	cl, err := oc.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := oc.FindTemplate(ctx, "rhcos-4.14", "Default")
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := oc.CreateVM(ctx, ovirt.VMSpec{Name: om.Name, ClusterID: cl.ID, TemplateID: tpl.ID,
		Comment: fmt.Sprintf("capov ovirtmachine=%s/%s uid=%s", om.Namespace, om.Name, om.UID)})
	g.Expect(err).NotTo(HaveOccurred())
	creates := sim.RequestCount("POST", "/vms")

	setPaused(t, tc.cluster, false)
	got := eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(om.Status.VMID).To(Equal(vm.ID))
	})
	g.Expect(got.Spec.ProviderID).To(Equal("ovirt://" + vm.ID))
	note := eventuallyEvent(t, om, "VMAdopted")
	g.Expect(note).To(ContainSubstring(vm.ID))
	eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: corev1.ConditionTrue})
	g.Expect(sim.RequestCount("POST", "/vms")).To(Equal(creates), "no second VM was created")
	deleteAndWait(t, om)
}

func TestAForeignVMWithTheSameNameIsNeverTakenOver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	setPaused(t, tc.cluster, true)
	_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	oc := ovirtClient(t)
	cl, _ := oc.FindCluster(ctx, "Default")
	tpl, _ := oc.FindTemplate(ctx, "rhcos-4.14", "Default")
	foreign, err := oc.CreateVM(ctx, ovirt.VMSpec{Name: om.Name, ClusterID: cl.ID, TemplateID: tpl.ID, Comment: "the database team's VM"})
	g.Expect(err).NotTo(HaveOccurred())
	setPaused(t, tc.cluster, false)
	eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.VMCreateFailedReason, Severity: clusterv1.ConditionSeverityWarning, Message: "was not created for this OVirtMachine"})
	eventuallyEvent(t, om, "VMNameTaken")
	g.Expect(getOM(g, om).Status.VMID).To(BeEmpty())
	// Deleting the machine leaves the foreign VM alone.
	deleteAndWait(t, om)
	_, exists := sim.VM(foreign.ID)
	g.Expect(exists).To(BeTrue())
	// Clean up (the VM may still be image_locked for a moment: oVirt answers 409 then).
	g.Eventually(func() error { return oc.RemoveVM(ctx, foreign.ID) }, timeout, interval).Should(Succeed())
}

func TestPausedClusterChangesNothingInOVirt(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	setPaused(t, tc.cluster, true)
	_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(conditions.IsTrue(om, infrav1.PausedCondition)).To(BeTrue())
	})
	g.Consistently(func() bool { _, ok := sim.VMByName(om.Name); return ok }, "2s", "200ms").Should(BeFalse())

	setPaused(t, tc.cluster, false)
	eventuallyVM(t, om.Name, nil)
	eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(conditions.IsFalse(om, infrav1.PausedCondition)).To(BeTrue())
	})

	// The paused annotation on the object also stops everything, deletion included.
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	cur := getOM(g, om)
	base := cur.DeepCopy()
	cur.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	g.Expect(k8s.Patch(context.Background(), cur, client.MergeFrom(base))).To(Succeed())
	eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(conditions.IsTrue(om, infrav1.PausedCondition)).To(BeTrue())
	})
	g.Expect(k8s.Delete(context.Background(), cur)).To(Succeed())
	g.Consistently(func() string { s, _ := sim.VM(vm.ID); return s.Status }, "2s", "200ms").Should(Equal("up"))

	cur = getOM(g, om)
	base = cur.DeepCopy()
	delete(cur.Annotations, clusterv1.PausedAnnotation)
	g.Expect(k8s.Patch(context.Background(), cur, client.MergeFrom(base))).To(Succeed())
	deleteAndWait(t, om)
	_, exists := sim.VM(vm.ID)
	g.Expect(exists).To(BeFalse())
}

// TestLeaderElectionLetsOneManagerAct runs two managers with leader election: only the leader
// touches oVirt, and the other takes over when the leader dies.
func TestLeaderElectionLetsOneManagerAct(t *testing.T) {
	g := NewWithT(t)
	const filter = "leader"
	args := []string{"--leader-elect", "--leader-election-id=capov-integration", "--leader-election-namespace=" + credentialsNamespace,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}
	a, err := startManager("leader-a", filter, args...)
	g.Expect(err).NotTo(HaveOccurred())
	defer a.Kill()
	b, err := startManager("leader-b", filter, args...)
	g.Expect(err).NotTo(HaveOccurred())
	defer b.Kill()

	tc := newTestCluster(t, filter)
	_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: corev1.ConditionTrue})
	// The message as klog's text (and JSON) format quotes it.
	created := func(p interface{ Logs() string }) bool { return strings.Contains(p.Logs(), `"Created VM"`) }
	leader, follower := a, b
	if created(b) {
		leader, follower = b, a
	}
	g.Expect(created(leader)).To(BeTrue())
	g.Expect(created(follower)).To(BeFalse(), "only the leader acts")
	g.Expect(leader.LogContains("Successfully acquired lease")).To(BeTrue())

	// The leader dies: the follower takes over within the lease duration.
	leader.Kill()
	_, om2 := tc.newMachine(t, vmSpec(), ignitionConfig)
	NewWithT(t).Eventually(func() bool { return follower.LogContains("Successfully acquired lease") }, 30*time.Second, interval).Should(BeTrue())
	eventuallyCondition(t, om2, condition{Type: infrav1.MachineOnCondition, Status: corev1.ConditionTrue})
	g.Expect(created(follower)).To(BeTrue())
	deleteAndWait(t, om)
	deleteAndWait(t, om2)
	g.Expect(follower.Stop(20*time.Second)).To(Succeed(), "graceful shutdown exits 0")
}

// TestManagerLogsItsFeatureGatesAndNoSecrets reads the debug log of the main manager, which has
// by now logged in, created VMs with bootstrap data and read credentials Secrets.
func TestManagerLogsItsFeatureGatesAndNoSecrets(t *testing.T) {
	g := NewWithT(t)
	p, err := startManager("gates-log", "gates-log", "--feature-gates=disk-clone=true,disk-magic=true,disk-add-vm-name=maybe")
	g.Expect(err).NotTo(HaveOccurred())
	defer p.Kill()
	tc := newTestCluster(t, "gates-log")
	secretScript := `{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","passwordHash":"s3cr3t-bootstrap-` + tc.ns + `"}]}}`
	_, om := tc.newMachine(t, vmSpec(), secretScript)
	eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: corev1.ConditionTrue})
	deleteAndWait(t, om)

	logs := p.Logs()
	var gatesLine string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "feature gates") {
			gatesLine = l
			break
		}
	}
	g.Expect(gatesLine).To(ContainSubstring("disk-add-vm-name=false,disk-clone=true,disk-keep-template-name=true"))
	g.Expect(logs).To(ContainSubstring(`ignoring unknown feature gate "disk-magic"`))
	g.Expect(logs).To(ContainSubstring(`invalid value "maybe"`))
	g.Expect(logs).To(ContainSubstring("Called oVirt"), "the log is at debug verbosity")
	g.Expect(logs).NotTo(ContainSubstring(sim.Password()))
	g.Expect(logs).NotTo(ContainSubstring("s3cr3t-bootstrap"))
	g.Expect(strings.ToLower(logs)).NotTo(ContainSubstring("bearer"))
	// The API server warns about finalizer names without a path; Cluster API's warning
	// handler drops those, as in CAPI's own binaries.
	g.Expect(logs).NotTo(ContainSubstring("prefer a domain-qualified finalizer name"))
}
