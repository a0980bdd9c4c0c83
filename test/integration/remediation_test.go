package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/collections"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/ovirtsim"
)

// remediationTimeout is each attempt's timeout in these tests: the CRD's minimum.
const remediationTimeout = 10 * time.Second

// remediatedMachine is a Ready machine whose Node registered and whose Machine a
// MachineHealthCheck found unhealthy (as the MachineHealthCheck marks it).
func remediatedMachine(t *testing.T, tc *testCluster) (*clusterv1.Machine, *infrav1.OVirtMachine, ovirtsim.VMState) {
	t.Helper()
	return remediatedMachineWith(t, tc, vmSpec())
}

// remediatedMachineWith is remediatedMachine with the machine's VM spec.
func remediatedMachineWith(t *testing.T, tc *testCluster, spec infrav1.OVirtVMSpec) (*clusterv1.Machine, *infrav1.OVirtMachine, ovirtsim.VMState) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	m, om := tc.newMachine(t, spec, ignitionConfig)
	node := registerNode(t, om)
	eventuallyCondition(t, om, condition{Type: clusterv1.ReadyV1Beta1Condition, Status: corev1.ConditionTrue})
	eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(om.Status.EngineInstanceID).NotTo(BeEmpty(), "the Engine the VM was found on")
	})
	vm, _ := sim.VMByName(om.Name)

	// Cluster API's Machine controller records the Node; the MachineHealthCheck finds it
	// unhealthy and hands it to the external remediation.
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	base := m.DeepCopy()
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node.Name}
	conditions.Set(m, metav1.Condition{Type: clusterv1.MachineHealthCheckSucceededCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.MachineHealthCheckUnhealthyNodeReason, Message: "Condition Ready on Node is reporting status Unknown for more than 5m0s"})
	conditions.Set(m, metav1.Condition{Type: clusterv1.MachineExternallyRemediatedCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.MachineExternallyRemediatedWaitingForRemediationReason})
	g.Expect(k8s.Status().Patch(ctx, m, client.MergeFrom(base))).To(Succeed())
	return m, om, vm
}

// remediationRequest creates the OVirtRemediation as Cluster API's MachineHealthCheck does
// (external.GenerateTemplate): named after the Machine, owned by it, with the cluster-name label
// and the template's labels.
func remediationRequest(t *testing.T, tc *testCluster, m *clusterv1.Machine, retryLimit int32) *infrav1.OVirtRemediation {
	t.Helper()
	rem := &infrav1.OVirtRemediation{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: tc.cluster.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID}}},
		Spec: infrav1.OVirtRemediationSpec{Strategy: &infrav1.RemediationStrategy{Type: infrav1.RemediationStrategyReboot,
			RetryLimit: ptr.To(retryLimit), Timeout: &metav1.Duration{Duration: remediationTimeout}}},
	}
	for k, v := range filterLabels(tc.filter) {
		rem.Labels[k] = v
	}
	NewWithT(t).Expect(k8s.Create(context.Background(), rem)).To(Succeed())
	return rem
}

// emulateKubelet does for the stand-in Node of a VM what a kubelet does after each boot of its
// guest: it reports a new status.nodeInfo.bootID (the simulator counts the guest's boots). It
// stops when the test ends.
func emulateKubelet(t *testing.T, nodeName, vmID string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	first, err := sim.Guest(vmID)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	wg.Add(1)
	go func() {
		defer wg.Done()
		seen := first.Boots
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			guest, err := sim.Guest(vmID)
			if err != nil || guest.Boots == seen {
				continue
			}
			node := &corev1.Node{}
			if err := k8s.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
				continue
			}
			base := node.DeepCopy()
			node.Status.NodeInfo.BootID = fmt.Sprintf("b0070000-0000-4000-8000-%012d", guest.Boots)
			if err := k8s.Status().Patch(ctx, node, client.MergeFrom(base)); err == nil {
				seen = guest.Boots
			}
		}
	}()
}

func getRemediation(g Gomega, rem *infrav1.OVirtRemediation) *infrav1.OVirtRemediation {
	out := &infrav1.OVirtRemediation{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rem), out)).To(Succeed())
	return out
}

// TestRemediationRebootsThenResetsThenHandsOver: the manager binary, against the simulator over
// the real SDK, reboots the VM of an unhealthy Machine (POST /vms/{id}/reboot), sees its guest
// restart (the Node's boot id changes), resets it after the timeout (POST /vms/{id}/reset), and
// after retryLimit hands the Machine to its owner: OwnerRemediated False in both condition
// formats, what MachineSet and KubeadmControlPlane act on.
func TestRemediationRebootsThenResetsThenHandsOver(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	m, om, vm := remediatedMachine(t, tc)
	emulateKubelet(t, om.Name, vm.ID)
	reboots, resets := settledRequestCount(t, "POST", "/vms/{id}/reboot"), sim.RequestCount("POST", "/vms/{id}/reset")
	rem := remediationRequest(t, tc, m, 1)

	g.Eventually(func() int { return sim.RequestCount("POST", "/vms/{id}/reboot") }, timeout, interval).Should(Equal(reboots + 1))
	g.Eventually(func(g Gomega) {
		got := getRemediation(g, rem)
		g.Expect(got.Status.Phase).To(Equal(infrav1.RemediationPhaseRunning))
		g.Expect(got.Status.Attempts).To(HaveLen(1))
		g.Expect(got.Status.Attempts[0].Action).To(Equal(infrav1.RemediationActionReboot))
		g.Expect(conditions.IsTrue(got, infrav1.OwnershipProvenCondition)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	// The emulated kubelet reports the guest's new boot: the attempt saw it, and only waits.
	g.Eventually(func(g Gomega) {
		got := getRemediation(g, rem)
		g.Expect(got.Status.Attempts).NotTo(BeEmpty())
		first := got.Status.Attempts[0]
		g.Expect(first.NodeBootID).NotTo(BeEmpty(), "read through the ClusterCache: %+v", first)
		g.Expect(first.Result).To(ContainSubstring("the guest restarted"), "%+v", first)
		g.Expect(first.EscalatedAt).To(BeNil(), "%+v", first)
	}, timeout, interval).Should(Succeed())
	eventuallyEvent(t, rem, "RebootRequested")
	eventuallyEvent(t, m, "RebootRequested")
	g.Expect(sim.RequestCount("POST", "/vms/{id}/reset")).To(Equal(resets), "no reset within the timeout")

	// The timeout passes: the one retry is a reset.
	g.Eventually(func() int { return sim.RequestCount("POST", "/vms/{id}/reset") }, remediationTimeout+timeout, interval).Should(Equal(resets + 1))
	eventuallyEvent(t, rem, "RemediationTimedOut")
	eventuallyEvent(t, rem, "ResetRequested")

	// The retry limit is reached: the Machine is handed to its owner, never deleted.
	g.Eventually(func(g Gomega) {
		got := getRemediation(g, rem)
		g.Expect(got.Status.Phase).To(Equal(infrav1.RemediationPhaseWaitingForOwner))
		g.Expect(got.Status.RetryCount).To(BeEquivalentTo(1))
		g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(infrav1.RetryLimitReachedReason))
	}, remediationTimeout+timeout, interval).Should(Succeed())
	machine := &clusterv1.Machine{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(m), machine)).To(Succeed())
	g.Expect(machine.DeletionTimestamp.IsZero()).To(BeTrue())
	g.Expect(conditions.GetReason(machine, clusterv1.MachineOwnerRemediatedCondition)).To(Equal(clusterv1.MachineOwnerRemediatedWaitingForRemediationReason))
	g.Expect(v1beta1conditions.IsFalse(machine, clusterv1.MachineOwnerRemediatedV1Beta1Condition)).To(BeTrue())
	g.Expect(conditions.GetReason(machine, clusterv1.MachineExternallyRemediatedCondition)).To(Equal(infrav1.RemediationFailedReason))
	g.Expect(collections.IsUnhealthyAndOwnerRemediated(machine)).To(BeTrue())
	eventuallyEvent(t, m, "RemediationHandedToOwner")
	g.Expect(sim.RequestCount("POST", "/vms/{id}/reboot")).To(Equal(reboots + 1))
	g.Expect(sim.RequestCount("POST", "/vms/{id}/reset")).To(Equal(resets + 1))
}

// TestRemediationDoesNothingWhileTheEngineIsUnreachable: with every Engine request dropped, the
// request waits (CanConnectToOVirt False) without a power action and without handing the Machine
// over; once the Engine answers it reboots, and the MachineHealthCheck deleting the request
// (the Machine healthy again) ends it and clears ExternallyRemediated.
func TestRemediationDoesNothingWhileTheEngineIsUnreachable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	m, _, _ := remediatedMachine(t, tc)
	powerPosts := func() int {
		n := 0
		for _, a := range []string{"reboot", "reset", "stop", "start", "shutdown"} {
			n += sim.RequestCount("POST", "/vms/{id}/"+a)
		}
		return n
	}
	t.Cleanup(func() { sim.SetFaults() })
	sim.SetFaults(ovirtsim.FaultRule{Mode: ovirtsim.FaultModeDrop})
	before := powerPosts()
	rem := remediationRequest(t, tc, m, 0)

	g.Eventually(func(g Gomega) {
		got := getRemediation(g, rem)
		g.Expect(got.Status.Phase).To(Equal(infrav1.RemediationPhaseWaiting))
		g.Expect(conditions.GetReason(got, infrav1.CanConnectToOVirtCondition)).To(Equal(infrav1.EngineUnreachableReason))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(powerPosts()).To(Equal(before), "no power action")
		got := getRemediation(g, rem)
		g.Expect(got.Status.Attempts).To(BeEmpty())
		machine := &clusterv1.Machine{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), machine)).To(Succeed())
		g.Expect(conditions.Has(machine, clusterv1.MachineOwnerRemediatedCondition)).To(BeFalse(), "no hand-over")
	}, "5s", "500ms").Should(Succeed())

	// The Engine answers again: the reboot goes out.
	sim.SetFaults()
	g.Eventually(func() int { return sim.RequestCount("POST", "/vms/{id}/reboot") }, timeout, interval).Should(BeNumerically(">", 0))
	g.Eventually(func(g Gomega) {
		g.Expect(getRemediation(g, rem).Status.Attempts).To(HaveLen(1))
	}, timeout, interval).Should(Succeed())

	// The Machine is healthy again: the MachineHealthCheck deletes the request.
	g.Expect(k8s.Delete(ctx, rem)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(rem), &infrav1.OVirtRemediation{}))
	}, timeout, interval).Should(BeTrue())
	machine := &clusterv1.Machine{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), machine)).To(Succeed())
	g.Expect(conditions.Has(machine, clusterv1.MachineExternallyRemediatedCondition)).To(BeFalse())
	g.Expect(conditions.Has(machine, clusterv1.MachineOwnerRemediatedCondition)).To(BeFalse())
}

// TestRemediationResetsAHungGuestWithinTheAttempt: a guest that hangs ignores the Engine's warm
// reboot (the simulator's SetGuestHung: reboot_in_progress, then up, the same boot). With no
// sign of a restart (the stand-in Node keeps its boot id: nothing emulates a kubelet here, and
// the VM is never seen down or powering up) within min(2m, timeout/2) of the reboot, the same
// attempt resets the VM. retryLimit is 0: the reset can only come from that escalation.
func TestRemediationResetsAHungGuestWithinTheAttempt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.HighAvailability = &infrav1.HighAvailability{Enabled: true, Priority: 100, LeaseStorageDomain: "data"}
	m, om, vm := remediatedMachineWith(t, tc, spec)

	// CAPOV starts a VM first with a volatile run once, which the Engine reboots cold (that
	// works on a hung guest). The VM is highly available: after a crash the Engine runs it
	// again, a plain run, whose reboot is a warm one.
	g.Expect(sim.CrashVM(vm.ID)).To(Succeed())
	eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })

	g.Expect(sim.SetGuestHung(vm.ID, true)).To(Succeed())
	hung, err := sim.Guest(vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	reboots, resets := settledRequestCount(t, "POST", "/vms/{id}/reboot"), sim.RequestCount("POST", "/vms/{id}/reset")
	rem := remediationRequest(t, tc, m, 0)

	// The Engine accepts the reboot; the guest does not restart.
	g.Eventually(func() int { return sim.RequestCount("POST", "/vms/{id}/reboot") }, timeout, interval).Should(Equal(reboots + 1))
	guest, err := sim.Guest(vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(guest.Boots).To(Equal(hung.Boots), "a hung guest ignores the reboot")
	g.Expect(guest.Hung).To(BeTrue())

	// Within the attempt's timeout: the reset, and the guest boots again.
	g.Eventually(func() int { return sim.RequestCount("POST", "/vms/{id}/reset") }, remediationTimeout, interval).Should(Equal(resets + 1))
	g.Eventually(func(g Gomega) {
		guest, err := sim.Guest(vm.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(guest.Boots).To(BeNumerically(">", hung.Boots))
		g.Expect(guest.Hung).To(BeFalse())
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := getRemediation(g, rem)
		g.Expect(got.Status.RetryCount).To(BeZero())
		g.Expect(got.Status.Attempts).To(HaveLen(1), "the same attempt")
		a := got.Status.Attempts[0]
		g.Expect(a.Action).To(Equal(infrav1.RemediationActionReboot))
		g.Expect(a.NodeBootID).NotTo(BeEmpty())
		g.Expect(a.EscalatedAt).NotTo(BeNil())
		g.Expect(a.EscalatedAt.Sub(a.RequestedAt.Time)).To(BeNumerically(">=", remediationTimeout/2-time.Second))
		g.Expect(a.Result).To(ContainSubstring("no sign of a restart within 5s: reset"))
	}, timeout, interval).Should(Succeed())
	eventuallyEvent(t, rem, "GuestDidNotAnswer")
	eventuallyEvent(t, rem, "ResetRequested")

	// The Machine is healthy again: the MachineHealthCheck deletes the request.
	g.Expect(k8s.Delete(ctx, rem)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(rem), &infrav1.OVirtRemediation{}))
	}, timeout, interval).Should(BeTrue())
	g.Expect(sim.RequestCount("POST", "/vms/{id}/reset")).To(Equal(resets+1), "one reset")
}
