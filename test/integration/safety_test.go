package integration

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// restoreWithoutStatus does what a backup restore or clusterctl move does to an OVirtMachine:
// the object is deleted without touching its VM (clusterctl's delete-for-move annotation) and
// created again with its metadata and spec (spec.providerID included) but a new UID and no
// status.
func restoreWithoutStatus(t *testing.T, om *infrav1.OVirtMachine) *infrav1.OVirtMachine {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	stored := getOM(g, om)
	base := stored.DeepCopy()
	stored.Annotations["clusterctl.cluster.x-k8s.io/delete-for-move"] = ""
	g.Expect(k8s.Patch(ctx, stored, client.MergeFrom(base))).To(Succeed())
	deleteAndWait(t, stored)

	restored := &infrav1.OVirtMachine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: stored.Namespace, Name: stored.Name, Labels: stored.Labels,
			Annotations: map[string]string{}, OwnerReferences: stored.OwnerReferences,
		},
		Spec: stored.Spec,
	}
	for k, v := range stored.Annotations {
		if k != "clusterctl.cluster.x-k8s.io/delete-for-move" {
			restored.Annotations[k] = v
		}
	}
	g.Expect(k8s.Create(ctx, restored)).To(Succeed())
	g.Expect(restored.UID).NotTo(Equal(stored.UID))
	return restored
}

// TestARestoredMachineNeverTakesACSIDiskForASystemDisk: a machine with a CSI volume attached
// whose VM is down (powered off in oVirt) is restored without its status. Before, the first
// reconcile recorded every disk of the down VM, the CSI disk too, as a system disk, and the
// deletion then removed the VM with the user's data. Now disks are recorded only at creation:
// the deletion stays blocked by the CSI disk. The restored object's new UID is written into
// the VM's owner marker (namespace/name proves the VM is its own).
func TestARestoredMachineNeverTakesACSIDiskForASystemDisk(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	registerNode(t, om)
	eventuallyCondition(t, om, condition{Type: clusterv1.ReadyV1Beta1Condition, Status: corev1.ConditionTrue})
	g.Expect(getOM(g, om).Status.SystemDiskIDs).To(HaveLen(1), "the template's disk, recorded at creation")

	csi, err := sim.AttachCSIDisk(vm.ID, 5)
	g.Expect(err).NotTo(HaveOccurred())
	// Powered off in oVirt (an admin, a host failure) and then restored.
	g.Expect(ovirtClient(t).Power(ctx, vm.ID, ovirt.PowerStop)).To(Succeed())
	eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("down")) })
	restored := restoreWithoutStatus(t, om)

	got := eventuallyOM(t, restored, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(om.Status.VMID).To(Equal(vm.ID))
		g.Expect(om.Status.EngineInstanceID).To(Equal(sim.InstanceID()))
	})
	g.Expect(got.Status.SystemDiskIDs).NotTo(ContainElement(csi))
	eventuallyEvent(t, restored, "VMOwnerMarkerUpdated")
	state, _ := sim.VM(vm.ID)
	g.Expect(state.Comment).To(ContainSubstring("uid=" + string(restored.UID)))

	g.Expect(k8s.Delete(ctx, restored)).To(Succeed())
	eventuallyCondition(t, restored, condition{Type: infrav1.MachineDeletedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.VMHasNonSystemDiskReason, Severity: clusterv1.ConditionSeverityWarning, Message: infrav1.VMHasNonSystemDiskMessage})
	g.Consistently(func() bool { _, ok := sim.VM(vm.ID); return ok }, "2s", "200ms").Should(BeTrue(), "the VM and its CSI disk stay")

	g.Expect(sim.DetachDisk(vm.ID, csi)).To(Succeed())
	deleteAndWait(t, restored)
	g.Expect(strings.Join(diskAliases(sim.Dump()), ",")).To(ContainSubstring("pvc-"), "the CSI disk survives")
}

// TestAProviderIDNamingAnotherMachinesVMIsNeverTouched: anyone who may create an OVirtMachine
// can write spec.providerID and the finalizer. An OVirtMachine in another namespace naming a
// running machine's VM is deleted: before, the manager shut that VM down and removed it with its
// disks; now nothing is written to it, the intruder keeps its finalizer with reason VMNotOwned
// and a Warning event, until a human removes the finalizer.
func TestAProviderIDNamingAnotherMachinesVMIsNeverTouched(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })

	other := newTestCluster(t, mainFilter)
	intruder := &infrav1.OVirtMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: other.ns, Name: "intruder", Labels: filterLabels(mainFilter),
			Finalizers: []string{infrav1.MachineFinalizer}},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: vmSpec(), ProviderID: infrav1.ProviderIDPrefix + vm.ID},
	}
	intruder.Labels[clusterv1.ClusterNameLabel] = other.cluster.Name
	g.Expect(k8s.Create(ctx, intruder)).To(Succeed())
	g.Expect(k8s.Delete(ctx, intruder)).To(Succeed())

	got := eventuallyCondition(t, intruder, condition{Type: infrav1.MachineDeletedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.VMNotOwnedReason, Severity: clusterv1.ConditionSeverityError})
	g.Expect(got.Finalizers).To(ContainElement(infrav1.MachineFinalizer))
	g.Expect(eventuallyEvent(t, intruder, "VMNotOwned")).To(ContainSubstring(vm.ID))
	g.Consistently(func(g Gomega) {
		state, ok := sim.VM(vm.ID)
		g.Expect(ok).To(BeTrue())
		g.Expect(state.Status).To(Equal("up"))
	}, "3s", "200ms").Should(Succeed())
	state, _ := sim.VM(vm.ID)
	g.Expect(state.Comment).To(Equal(vm.Comment), "the owner marker is not rewritten")

	// The human decision of docs/operations.md: the object is not the VM's, drop the finalizer.
	base := got.DeepCopy()
	got.Finalizers = nil
	g.Expect(k8s.Patch(ctx, got, client.MergeFrom(base))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(intruder), &infrav1.OVirtMachine{}))
	}, timeout, interval).Should(BeTrue())
	_, ok := sim.VM(vm.ID)
	g.Expect(ok).To(BeTrue())
}

// TestAnotherEngineNeverMakesAVMLookDeleted: an OVirtProvider is pointed at another Engine
// (a typo, a DR site, a test Engine). That Engine does not know the machine's VM: before, the
// deletion took the 404 for "already gone", dropped the finalizer and leaked the real VM on
// the first Engine; now the Engine's identity (product_info.instance_id) is recorded with the
// VM, the deletion waits with reason EngineChanged, and it completes once the provider points
// back.
func TestAnotherEngineNeverMakesAVMLookDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	second, err := newSimulator()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(second.Close)
	g.Expect(second.InstanceID()).NotTo(Equal(sim.InstanceID()))

	const name = "sim-engine-id"
	g.Expect(k8s.Create(ctx, harness.CredentialsSecret(credentialsNamespace, name, sim.Username(), sim.Password()))).To(Succeed())
	p := harness.Provider(name, sim.URL(), name, sim.CAPEM())
	p.Labels = filterLabels(mainFilter)
	g.Expect(k8s.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })

	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.Provider = name
	_, om := tc.newMachine(t, spec, ignitionConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(om.Status.EngineInstanceID).To(Equal(sim.InstanceID()))
	})

	repoint := func(s *ovirtsim.Simulator) {
		g.Eventually(func() error {
			secret := &corev1.Secret{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: credentialsNamespace, Name: name}, secret); err != nil {
				return err
			}
			secret.StringData = map[string]string{"username": s.Username(), "password": s.Password()}
			if err := k8s.Update(ctx, secret); err != nil {
				return err
			}
			cur := &infrav1.OVirtProvider{}
			if err := k8s.Get(ctx, client.ObjectKey{Name: name}, cur); err != nil {
				return err
			}
			want := harness.Provider(name, s.URL(), name, s.CAPEM())
			cur.Spec.Engine, cur.Spec.TLS = want.Spec.Engine, want.Spec.TLS
			return k8s.Update(ctx, cur)
		}, timeout, interval).Should(Succeed())
	}
	repoint(second)
	g.Expect(k8s.Delete(ctx, om)).To(Succeed())
	got := eventuallyCondition(t, om, condition{Type: infrav1.MachineDeletedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.EngineChangedReason, Severity: clusterv1.ConditionSeverityError})
	g.Expect(got.Finalizers).To(ContainElement(infrav1.MachineFinalizer))
	g.Expect(eventuallyEvent(t, om, "EngineChanged")).To(ContainSubstring(sim.InstanceID()))
	_, ok := sim.VM(vm.ID)
	g.Expect(ok).To(BeTrue(), "the VM on the first Engine is not leaked")

	repoint(sim)
	deleteAndWait(t, om)
	_, ok = sim.VM(vm.ID)
	g.Expect(ok).To(BeFalse(), "back on its Engine, the VM is removed")
}

// TestBootstrapDataNeverRestsInOVirt: the Engine returns a VM's initialization.custom_script to
// anyone who may read the VM and keeps it in its database. The bootstrap data (a join token,
// for control planes the CA keys) goes to the VM's first run only (run once): the guest gets it
// on its config drive, the VM never stores it, and there is nothing to clear (no PUT /vms/{id})
// when the Node registers; the host name stays on the VM.
func TestBootstrapDataNeverRestsInOVirt(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	in, err := sim.Initialization(vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in.UserData).To(ContainSubstring(`"version":"3.2.0"`), "the guest got it")
	g.Consistently(func() string { st, _ := sim.VM(vm.ID); return st.CustomScript }, "1s", "100ms").Should(BeEmpty(),
		"never stored on the VM")
	puts := sim.RequestCount("PUT", "/vms/{id}")
	registerNode(t, om)
	eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(provisioned(om)).To(BeTrue())
		g.Expect(om.Status.BootstrapDataCleared).To(HaveValue(BeTrue()))
	})
	g.Expect(sim.RequestCount("PUT", "/vms/{id}")).To(Equal(puts), "nothing to clear")
	st, _ := sim.VM(vm.ID)
	g.Expect(st.CustomScript).To(BeEmpty())
	g.Expect(st.HostName).To(Equal(vm.HostName))
}
