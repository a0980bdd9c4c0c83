package integration

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/ovirtsim"
)

// TestProviderBecomesReadyAndLeavesItsSecretUnowned: the provider connects; it never owns its
// credentials Secret (an owner reference lets the garbage collector delete the Secret with the
// provider).
func TestProviderBecomesReadyAndLeavesItsSecretUnowned(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Eventually(func(g Gomega) {
		p := &infrav1.OVirtProvider{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: mainProvider}, p)).To(Succeed())
		g.Expect(providerV1Beta1(p).Ready).To(BeTrue(), "v1beta1 status.ready")
		g.Expect(v1beta1conditions.IsTrue(p, infrav1.CanConnectToOVirtCondition)).To(BeTrue())
		g.Expect(conditions.IsTrue(p, infrav1.CanConnectToOVirtCondition)).To(BeTrue())
		g.Expect(conditions.IsTrue(p, infrav1.ReadyCondition)).To(BeTrue())
		g.Expect(p.Status.EngineVersion).NotTo(BeEmpty())
		g.Expect(providerV1Beta1(p).FailureReason).To(BeNil())
		s := &corev1.Secret{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: credentialsNamespace, Name: credentialsSecret}, s)).To(Succeed())
		g.Expect(s.OwnerReferences).NotTo(ContainElement(HaveField("UID", p.UID)))
	}, timeout, interval).Should(Succeed())
	p := &infrav1.OVirtProvider{ObjectMeta: metaName(mainProvider)}
	eventuallyEvent(t, p, "Connected")
}

func TestOVirtClusterGetsFinalizerAndReady(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	g.Eventually(func(g Gomega) {
		oc := &infrav1.OVirtCluster{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: tc.ns, Name: tc.cluster.Name}, oc)).To(Succeed())
		g.Expect(ptr.Deref(oc.Status.Initialization.Provisioned, false)).To(BeTrue())
		g.Expect(controllerutil.ContainsFinalizer(oc, infrav1.ClusterFinalizer)).To(BeTrue())
		g.Expect(v1beta1conditions.IsTrue(oc, clusterv1.ReadyV1Beta1Condition)).To(BeTrue())
		g.Expect(v1beta1conditions.IsTrue(oc, infrav1.ClusterReadyCondition)).To(BeTrue())
		g.Expect(conditions.IsTrue(oc, infrav1.ReadyCondition)).To(BeTrue())
		g.Expect(conditions.IsTrue(oc, infrav1.ClusterReadyCondition)).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	// On deletion the finalizer is dropped and the object goes away.
	oc := &infrav1.OVirtCluster{ObjectMeta: metaNS(tc.ns, tc.cluster.Name)}
	g.Expect(k8s.Delete(context.Background(), oc)).To(Succeed())
	g.Eventually(func() bool {
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(oc), oc) != nil
	}, timeout, interval).Should(BeTrue())
}

// TestMachineLifecycle walks an OVirtMachine from creation to Ready with its Node carrying the
// providerID, and through deletion, checking what operators and CAPI read at each step.
func TestMachineLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	bootstrap := ignitionConfig
	_, om := tc.newMachine(t, vmSpec(), bootstrap)

	// While it boots, MachineOn reports VMPoweringUp as in product doc §5.3.
	eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.VMPoweringUpReason, Severity: clusterv1.ConditionSeverityInfo, Message: "powering up"})

	// Up, but no Node yet: waiting for the Node, not ready.
	got := eventuallyCondition(t, om, condition{Type: infrav1.K8sProviderIDSetupCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.WaitingForNodeReason, Severity: clusterv1.ConditionSeverityInfo})
	g.Expect(provisioned(got)).To(BeFalse())
	for _, c := range []clusterv1.ConditionType{infrav1.CanConnectToOVirtCondition, infrav1.MachineCreatedCondition,
		infrav1.MachineDiskResizedCondition, infrav1.MachineNetworkSetCondition, infrav1.MachineOnCondition} {
		g.Expect(v1beta1conditions.IsTrue(got, c)).To(BeTrue(), "%s: %s", c, describeConditions(got))
		g.Expect(conditions.IsTrue(got, string(c))).To(BeTrue(), "%s: %s", c, describeConditions(got))
	}
	ready := v1beta1conditions.Get(got, clusterv1.ReadyV1Beta1Condition)
	g.Expect(ready.Reason).To(Equal(infrav1.WaitingForNodeReason))
	g.Expect(conditions.Get(got, infrav1.ReadyCondition)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.WaitingForNodeReason)))

	// The VM in oVirt is what the spec asked for.
	vm, ok := sim.VM(got.Status.VMID)
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Name).To(Equal(om.Name))
	g.Expect(vm.Clone).To(BeFalse(), "disk-clone gate defaults to false")
	g.Expect(vm.Template).To(Equal("rhcos-4.14"))
	g.Expect([]int{vm.Sockets, vm.Cores, vm.Threads}).To(Equal([]int{1, 4, 1}))
	g.Expect(vm.MemoryMB).To(BeEquivalentTo(8192))
	g.Expect(vm.GuaranteedMB).To(BeEquivalentTo(4096))
	g.Expect(vm.Type).To(Equal("server"))
	g.Expect(vm.CustomScript).To(BeEmpty(), "the bootstrap data is never stored on the VM")
	payload, err := sim.Initialization(vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(payload.Format).To(Equal(ovirtsim.InitFormatIgnition))
	g.Expect(payload.UserData).To(ContainSubstring(`"version":"3.2.0"`), "it went to the VM's first run (run once)")
	g.Expect(vm.OSType).To(Equal("rhcos_x64"))
	g.Expect(vm.HostName).To(Equal(om.Name), "the Engine writes it into the Ignition config; kubeadm names the Node after it")
	g.Expect(got.Status.VMName).To(Equal(om.Name))
	g.Expect(vm.Comment).To(ContainSubstring(string(got.UID)))
	g.Expect(vm.Disks).To(HaveLen(1))
	g.Expect(vm.Disks[0].SizeGB).To(BeEquivalentTo(80))
	g.Expect(vm.Disks[0].Alias).To(Equal("rhcos-4.14_Disk1"), "default gates rename nothing")
	g.Expect(vm.NICs).To(HaveLen(1))
	g.Expect(vm.NICs[0].VnicProfile).To(Equal("ovirtmgmt"))
	g.Expect(got.Status.SystemDiskIDs).To(ConsistOf(vm.Disks[0].ID))
	g.Expect(got.Spec.ProviderID).To(Equal("ovirt://" + vm.ID))

	// kubelet registers the Node; the manager sets its providerID and the machine is ready.
	node := registerNode(t, om)
	eventuallyCondition(t, om, condition{Type: clusterv1.ReadyV1Beta1Condition, Status: corev1.ConditionTrue})
	got = eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(provisioned(om)).To(BeTrue())
		g.Expect(om.Status.Addresses).NotTo(BeEmpty())
	})
	g.Expect(got.Status.NodeName).To(Equal(node.Name))
	g.Expect(got.Status.VMState).To(Equal("up"))
	reason, _ := failureOf(got)
	g.Expect(reason).To(BeNil())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
	g.Expect(node.Spec.ProviderID).To(Equal("ovirt://" + vm.ID))
	// Only the address of the VM's NIC: a real Engine also reports lo, cni0, docker0 and
	// kube-ipvs0 with every Service IP (the simulator does too).
	upVM, _ := sim.VM(vm.ID)
	g.Expect(got.Status.Addresses).To(Equal([]clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: upVM.IPs[0]}}))
	g.Expect(conditions.Get(got, infrav1.ReadyCondition)).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", infrav1.ReadyReason)))
	for _, c := range append([]clusterv1.ConditionType{infrav1.CanConnectToOVirtCondition}, infrav1.MachineCreatedCondition,
		infrav1.MachineDiskResizedCondition, infrav1.MachineNetworkSetCondition, infrav1.MachineOnCondition, infrav1.K8sProviderIDSetupCondition) {
		g.Expect(conditions.IsTrue(got, string(c))).To(BeTrue(), "%s: %s", c, describeConditions(got))
	}
	for _, reason := range []string{"VMCreated", "DisksUpdated", "VMStarted", "ProviderIDSet"} {
		eventuallyEvent(t, om, reason)
	}

	// Deletion: shutdown, removal, finalizer dropped, VM and its disks gone from oVirt.
	deleteAndWait(t, om)
	_, exists := sim.VM(vm.ID)
	g.Expect(exists).To(BeFalse())
}

func TestDeletionIsBlockedByACSIDiskUntilItIsDetached(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	registerNode(t, om)
	eventuallyCondition(t, om, condition{Type: clusterv1.ReadyV1Beta1Condition, Status: corev1.ConditionTrue})

	diskID, err := sim.AttachCSIDisk(vm.ID, 5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8s.Delete(ctx, om)).To(Succeed())

	got := eventuallyCondition(t, om, condition{Type: infrav1.MachineDeletedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.VMHasNonSystemDiskReason, Severity: clusterv1.ConditionSeverityWarning,
		Message: "VM has non system disk, cannot delete"})
	g.Expect(got.Finalizers).To(ContainElement(infrav1.MachineFinalizer))
	// A deleting machine stays provisioned (the contract never resets it) and is not Ready.
	g.Expect(provisioned(got)).To(BeTrue())
	g.Expect(conditions.Get(got, infrav1.ReadyCondition)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.VMHasNonSystemDiskReason)))
	note := eventuallyEvent(t, om, "DeletionBlocked")
	g.Expect(note).To(ContainSubstring("pvc-"))
	// The VM and the user's data are still there, the VM is down.
	state, ok := sim.VM(vm.ID)
	g.Expect(ok).To(BeTrue())
	g.Expect(state.Status).To(Equal("down"))
	g.Expect(state.Disks).To(HaveLen(2))
	// Retried, still blocked.
	g.Consistently(func() bool { _, ok := sim.VM(vm.ID); return ok }, "2s", "200ms").Should(BeTrue())

	// The CSI driver (or an admin) detaches the disk: the next retry removes the VM.
	g.Expect(sim.DetachDisk(vm.ID, diskID)).To(Succeed())
	deleteAndWait(t, om)
	_, ok = sim.VM(vm.ID)
	g.Expect(ok).To(BeFalse())
	g.Expect(strings.Join(diskAliases(sim.Dump()), ",")).To(ContainSubstring("pvc-"), "the detached CSI disk survives")
}

// TestDeletionRunsWhenTheOwnerMachineIsGone: a Machine whose finalizer was removed by hand is
// gone at once, and the garbage collector then deletes its OVirtMachine (envtest runs no
// garbage collector: the test deletes it). Deleting that object must still remove the VM and
// drop the finalizer; before, the reconcile failed on the missing Machine forever and the VM
// and the object stayed.
func TestDeletionRunsWhenTheOwnerMachineIsGone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	m, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })

	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	m.Finalizers = nil
	g.Expect(k8s.Update(ctx, m)).To(Succeed())
	g.Expect(k8s.Delete(ctx, m)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{}))
	}, timeout, interval).Should(BeTrue(), "the Machine is gone")

	deleteAndWait(t, om)
	_, ok := sim.VM(vm.ID)
	g.Expect(ok).To(BeFalse(), "the VM of the orphaned OVirtMachine is removed")
}

func diskAliases(st ovirtsim.State) []string {
	var out []string
	for _, d := range st.FloatingDisks {
		out = append(out, d.Alias)
	}
	return out
}

// TestTemplateCapacityForAutoscalingFromZero checks status.capacity, which the cluster
// autoscaler reads to scale a MachineDeployment up from zero.
func TestTemplateCapacityForAutoscalingFromZero(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	tpl := &infrav1.OVirtMachineTemplate{
		ObjectMeta: metaNS(tc.ns, "workers"),
		Spec:       infrav1.OVirtMachineTemplateSpec{Template: infrav1.OVirtMachineTemplateResource{Spec: vmSpec()}},
	}
	tpl.Labels = filterLabels(mainFilter)
	tpl.Spec.Template.Spec.CPU = &infrav1.CPU{Sockets: 2, Cores: 4, Threads: 1}
	g.Expect(k8s.Create(ctx, tpl)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &infrav1.OVirtMachineTemplate{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tpl), got)).To(Succeed())
		g.Expect(got.Status.Capacity.Cpu().Value()).To(BeEquivalentTo(8))
		g.Expect(got.Status.Capacity.Memory().Value()).To(BeEquivalentTo(8192 << 20))
	}, timeout, interval).Should(Succeed())
}

// TestTemplateCapacityInheritsFromTheOVirtTemplate: a spec that inherits its CPU and memory gets
// the oVirt template's in status.capacity (the suite's rhcos-4.14: 1 socket x 2 cores, 4 GiB), and
// hugepage-backed memory is published as hugepages of that size.
func TestTemplateCapacityInheritsFromTheOVirtTemplate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.CPU, spec.Memory = nil, nil
	tpl := &infrav1.OVirtMachineTemplate{
		ObjectMeta: metaNS(tc.ns, "inherits"),
		Spec:       infrav1.OVirtMachineTemplateSpec{Template: infrav1.OVirtMachineTemplateResource{Spec: spec}},
	}
	tpl.Labels = filterLabels(mainFilter)
	g.Expect(k8s.Create(ctx, tpl)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &infrav1.OVirtMachineTemplate{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tpl), got)).To(Succeed())
		g.Expect(got.Status.Capacity.Cpu().Value()).To(BeEquivalentTo(2))
		g.Expect(got.Status.Capacity.Memory().Value()).To(BeEquivalentTo(4096 << 20))
	}, timeout, interval).Should(Succeed())

	huge := vmSpec()
	huge.Memory = &infrav1.Memory{SizeMB: 16384}
	huge.Performance = &infrav1.Performance{HugePagesKiB: infrav1.HugePages1Gi, Ballooning: ptr.To(false)}
	tpl2 := &infrav1.OVirtMachineTemplate{
		ObjectMeta: metaNS(tc.ns, "hugepages"),
		Spec:       infrav1.OVirtMachineTemplateSpec{Template: infrav1.OVirtMachineTemplateResource{Spec: huge}},
	}
	tpl2.Labels = filterLabels(mainFilter)
	g.Expect(k8s.Create(ctx, tpl2)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &infrav1.OVirtMachineTemplate{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tpl2), got)).To(Succeed())
		q := got.Status.Capacity[corev1.ResourceName("hugepages-1Gi")]
		g.Expect(q.Value()).To(BeEquivalentTo(int64(16384) << 20))
	}, timeout, interval).Should(Succeed())
}
