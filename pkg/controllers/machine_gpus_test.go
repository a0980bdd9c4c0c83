package controllers

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/fake"
)

// gpuHost seeds a host of the Default cluster with two NVIDIA GPUs, each in its IOMMU group with
// its audio function.
func gpuHost(t *testing.T, f *machineFixture, name string, passthrough bool) ovirt.Host {
	t.Helper()
	cl, err := f.ov.FindCluster(context.Background(), "Default")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return f.ov.AddHost(ovirt.Host{Name: name, ClusterID: cl.ID, PassthroughEnabled: passthrough, MaxSchedulingMemoryBytes: 64 << 30},
		fake.PCIDevice("pci_0000_3b_00_0", 12, "10de", "20b5"), fake.PCIDevice("pci_0000_3b_00_1", 12, "10de", "1aef"),
		fake.PCIDevice("pci_0000_5e_00_0", 13, "10de", "20b5"), fake.PCIDevice("pci_0000_5e_00_1", 13, "10de", "1aef"),
		fake.PCIDevice("pci_0000_00_1f_0", 1, "8086", "a1c1"))
}

func passthroughGPU(count int32) []infrav1.GPU {
	return []infrav1.GPU{{Type: infrav1.GPUTypePassthrough, VendorID: "10DE", DeviceID: "20b5", Count: count}}
}

// TestVGPUMachineSendsNodisplayMdevType: a vGPU machine's create request carries the Engine's
// mdev_type property, nodisplay first and one item per instance, beside the user's properties;
// nothing is pinned.
func TestVGPUMachineSendsNodisplayMdevType(t *testing.T) {
	g := NewWithT(t)
	f := newMachineFixture(t)
	f.withSpec(t, func(s *infrav1.OVirtVMSpec) {
		s.CustomProperties = []infrav1.CustomProperty{{Name: "viodiskcache", Value: "writeback"}}
		s.GPUs = []infrav1.GPU{{Type: infrav1.GPUTypeVGPU, MdevType: "nvidia-22", Count: 2}}
	})
	f.reconcileUntil(t, 30, func() bool { return f.ov.CallCount("CreateVM") > 0 })
	spec, _ := f.ov.Spec(f.get(t).Status.VMID)
	g.Expect(spec.CustomProperties).To(Equal([]ovirt.CustomProperty{{Name: "viodiskcache", Value: "writeback"}, {Name: "mdev_type", Value: "nodisplay,nvidia-22,nvidia-22"}}))
	g.Expect(spec.PinnedHostID).To(BeEmpty())
	g.Expect(mdevTypeValue([]infrav1.GPU{{Type: infrav1.GPUTypeVGPU, MdevType: "a", Display: ptr.To(true)}, {Type: infrav1.GPUTypeVGPU, MdevType: "b"}})).To(Equal("a,b"))
}

// TestPassthroughPinsAndAttachesBeforeFirstStart: the machine claims a free GPU (with its IOMMU
// group's audio function) of a passthrough host, is created pinned to that host, gets the devices
// attached while down, and only then starts; its deletion releases the claim.
func TestPassthroughPinsAndAttachesBeforeFirstStart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	gpuHost(t, f, "h0-nopassthrough", false)
	h := gpuHost(t, f, "h1", true)
	f.withSpec(t, func(s *infrav1.OVirtVMSpec) { s.GPUs = passthroughGPU(1) })
	f.reconcileUntil(t, 40, func() bool { return f.ov.CallCount("RunOnce")+f.ov.CallCount("Power") > 0 })

	om := f.get(t)
	spec, _ := f.ov.Spec(om.Status.VMID)
	g.Expect(spec.PinnedHostID).To(Equal(h.ID))
	g.Expect(om.Status.HostDevices).To(HaveLen(2))
	g.Expect(om.Status.HostDevices[0]).To(Equal(infrav1.HostDeviceStatus{Host: "h1", HostID: h.ID, Name: "pci_0000_3b_00_0",
		VendorID: "10de", DeviceID: "20b5", IOMMUGroup: ptr.To[int32](12), Claim: om.Status.HostDevices[0].Claim}))
	g.Expect(om.Status.HostDevices[1].Name).To(Equal("pci_0000_3b_00_1"))

	claims := &infrav1.OVirtHostDeviceClaimList{}
	g.Expect(f.c.List(ctx, claims)).To(Succeed())
	g.Expect(claims.Items).To(HaveLen(1))
	c := claims.Items[0]
	g.Expect(c.Name).To(Equal(om.Status.HostDevices[0].Claim))
	g.Expect(c.Spec.Devices).To(ConsistOf("pci_0000_3b_00_0", "pci_0000_3b_00_1"))
	g.Expect(c.Spec.Holder).To(Equal(infrav1.HostDeviceClaimHolder{Namespace: "ns", Name: "w-1", UID: "om-uid"}))

	names := []string{}
	for _, d := range f.ov.VMHostDevices(om.Status.VMID) {
		names = append(names, d.Name)
	}
	g.Expect(names).To(ConsistOf("pci_0000_3b_00_0", "pci_0000_3b_00_1"))
	calls := f.ov.Calls()
	start := slices.IndexFunc(calls, func(c string) bool { return c == "RunOnce" || c == "Power" })
	g.Expect(slices.Index(calls, "ListHosts")).To(BeNumerically("<", slices.Index(calls, "CreateVM")), "%v", calls)
	g.Expect(slices.Index(calls, "AttachHostDevice")).To(BeNumerically("<", start), "the devices are there before the first start: %v", calls)
	g.Expect(f.ov.CallCount("AttachHostDevice")).To(Equal(1), "the Engine adds the rest of the IOMMU group itself")

	// Deletion releases the claim.
	g.Expect(f.c.Delete(ctx, f.get(t))).To(Succeed())
	f.reconcileUntil(t, 30, func() bool {
		l := &infrav1.OVirtHostDeviceClaimList{}
		g.Expect(f.c.List(ctx, l)).To(Succeed())
		_, ok := f.ov.VM(om.Status.VMID)
		return len(l.Items) == 0 && !ok
	})
}

// TestNoHostWithFreeDeviceSaysWhatItSaw: with every GPU claimed by another machine or on a host
// without passthrough, no VM is created and MachineCreated says, per host, what it saw.
func TestNoHostWithFreeDeviceSaysWhatItSaw(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	gpuHost(t, f, "h0", false)
	h := gpuHost(t, f, "h1", true)
	info, err := f.ov.EngineInfo(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	engine := info.InstanceID
	if engine == "" {
		engine = "url:https://engine.example.com/ovirt-engine/api"
	}
	other := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gpu-x"},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: "p1", OVirtCluster: "Default", Template: "t"}}}
	g.Expect(f.c.Create(ctx, other)).To(Succeed())
	for _, group := range []string{"iommu-12", "iommu-13"} {
		g.Expect(f.c.Create(ctx, &infrav1.OVirtHostDeviceClaim{ObjectMeta: metav1.ObjectMeta{Name: hostDeviceClaimName(engine, h.ID, group)},
			Spec: infrav1.OVirtHostDeviceClaimSpec{EngineInstanceID: engine, HostID: h.ID, Devices: []string{"x"},
				Holder: infrav1.HostDeviceClaimHolder{Namespace: "team-a", Name: "gpu-x", UID: string(other.UID)}}})).To(Succeed())
	}
	f.withSpec(t, func(s *infrav1.OVirtVMSpec) { s.GPUs = passthroughGPU(1) })
	f.reconcileUntil(t, 30, func() bool {
		return v1beta1conditions.GetReason(f.get(t), infrav1.MachineCreatedCondition) == infrav1.NoHostWithFreeDeviceReason
	})
	om := f.get(t)
	msg := v1beta1conditions.GetMessage(om, infrav1.MachineCreatedCondition)
	g.Expect(msg).To(ContainSubstring("h0: device passthrough disabled"))
	g.Expect(msg).To(ContainSubstring("h1: 0 of 2 10de:20b5 free (1 claimed by team-a/gpu-x, 1 claimed by team-a/gpu-x)"))
	g.Expect(v1beta1conditions.GetSeverity(om, infrav1.MachineCreatedCondition)).To(HaveValue(Equal(clusterv1.ConditionSeverityWarning)))
	g.Expect(f.ov.CallCount("CreateVM")).To(BeZero())

	// A claim whose machine is gone is stale: it is removed and its devices taken.
	g.Expect(f.c.Delete(ctx, other)).To(Succeed())
	f.reconcileUntil(t, 30, func() bool { return f.ov.CallCount("CreateVM") > 0 })
}

// TestHardGroupExcludesHostsOfPinnedDownPeers: a machine of a Hard anti-affinity group is never
// pinned to a host where a peer of its group is pinned, even while that peer is down (the
// Engine's filter counts only running VMs: both could never run).
func TestHardGroupExcludesHostsOfPinnedDownPeers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	h1 := gpuHost(t, f, "h1", true)
	h2 := gpuHost(t, f, "h2", true)
	oc := &infrav1.OVirtCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"}}
	g.Expect(f.c.Create(ctx, oc)).To(Succeed())
	cluster := &clusterv1.Cluster{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "c1"}, cluster)).To(Succeed())
	cluster.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "OVirtCluster", Name: "c1"}
	g.Expect(f.c.Update(ctx, cluster)).To(Succeed())
	labels := map[string]string{clusterv1.ClusterNameLabel: "c1", clusterv1.MachineDeploymentNameLabel: "gpu"}
	peer := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-0", Labels: labels},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: "p1", OVirtCluster: "Default", Template: "t", AntiAffinity: infrav1.AntiAffinityHard}}}
	g.Expect(f.c.Create(ctx, peer)).To(Succeed())
	peer.Status.HostDevices = []infrav1.HostDeviceStatus{{Host: "h1", HostID: h1.ID, Name: "pci_0000_3b_00_0"}}
	g.Expect(f.c.Status().Update(ctx, peer)).To(Succeed())

	om := f.get(t)
	om.Labels = labels
	om.Spec.AntiAffinity = infrav1.AntiAffinityHard
	om.Spec.GPUs = passthroughGPU(1)
	g.Expect(f.c.Update(ctx, om)).To(Succeed())
	f.reconcileUntil(t, 40, func() bool { return f.ov.CallCount("CreateVM") > 0 })
	spec, _ := f.ov.Spec(f.get(t).Status.VMID)
	g.Expect(spec.PinnedHostID).To(Equal(h2.ID), "h1 holds a pinned peer of the Hard group")
}

// TestFailureDomainLimitsTheHosts: a passthrough machine of a failure domain is pinned only to a
// host of the failure domain's oVirt cluster, even when another cluster has free GPUs; with
// none free there, it waits and says so.
func TestFailureDomainLimitsTheHosts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	gpuHost(t, f, "default-h1", true)
	zb := f.ov.AddCluster(ovirt.Cluster{Name: "Zone-B", DataCenterID: "dc-default", NetworkIDs: []string{"net-ovirtmgmt"}})
	sd, err := f.ov.FindStorageDomain(ctx, "data")
	g.Expect(err).NotTo(HaveOccurred())
	f.ov.AddTemplate(ovirt.Template{Name: "rhcos-4.14", Version: 1, ClusterID: zb.ID, OSType: "rhcos_x64",
		Disks: []ovirt.Disk{{Alias: "rhcos-4.14_Disk1", ProvisionedSize: 16 << 30, Bootable: true,
			Interface: "virtio_scsi", Status: ovirt.DiskStatusOK, StorageDomainID: sd.ID, Format: "cow"}}})
	zbHost := f.ov.AddHost(ovirt.Host{Name: "zoneb-h1", ClusterID: zb.ID, PassthroughEnabled: true},
		fake.PCIDevice("pci_0000_3b_00_0", 3, "10de", "20b5"))

	oc := &infrav1.OVirtCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"},
		Spec: infrav1.OVirtClusterSpec{FailureDomains: []infrav1.OVirtFailureDomain{{Name: "b", OVirtCluster: "Zone-B"}}}}
	g.Expect(f.c.Create(ctx, oc)).To(Succeed())
	cluster := &clusterv1.Cluster{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "c1"}, cluster)).To(Succeed())
	cluster.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "OVirtCluster", Name: "c1"}
	g.Expect(f.c.Update(ctx, cluster)).To(Succeed())
	om := f.get(t)
	om.Spec.FailureDomain = "b"
	om.Spec.GPUs = passthroughGPU(2)
	g.Expect(f.c.Update(ctx, om)).To(Succeed())

	f.reconcileUntil(t, 30, func() bool {
		return v1beta1conditions.GetReason(f.get(t), infrav1.MachineCreatedCondition) == infrav1.NoHostWithFreeDeviceReason
	})
	msg := v1beta1conditions.GetMessage(f.get(t), infrav1.MachineCreatedCondition)
	g.Expect(msg).To(ContainSubstring("no host of oVirt cluster Zone-B"))
	g.Expect(msg).To(ContainSubstring("zoneb-h1: 1 of 1 10de:20b5 free"))
	g.Expect(msg).NotTo(ContainSubstring("default-h1"), "hosts of another oVirt cluster are never considered")

	g.Expect(f.ov.AddHostDevices(zbHost.ID, fake.PCIDevice("pci_0000_5e_00_0", 4, "10de", "20b5"))).To(BeTrue())
	f.now = f.now.Add(time.Minute)
	f.reconcileUntil(t, 30, func() bool { return f.ov.CallCount("CreateVM") > 0 })
	spec, _ := f.ov.Spec(f.get(t).Status.VMID)
	g.Expect(spec.PinnedHostID).To(Equal(zbHost.ID))
	g.Expect(spec.ClusterID).To(Equal(zb.ID))
}
