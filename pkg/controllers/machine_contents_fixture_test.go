package controllers

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// withSpec changes the fixture's OVirtMachine spec (admission is not in the way here).
func (f *machineFixture) withSpec(t *testing.T, mutate func(*infrav1.OVirtVMSpec)) {
	t.Helper()
	om := f.get(t)
	mutate(&om.Spec.OVirtVMSpec)
	NewWithT(t).Expect(f.c.Update(context.Background(), om)).To(Succeed())
}

// reconcileUntil reconciles (moving the clock by each requeue) until done says so, at most n
// times.
func (f *machineFixture) reconcileUntil(t *testing.T, n int, done func() bool) {
	t.Helper()
	for i := 0; i < n && !done(); i++ {
		res, err := f.reconcile(t)
		if err != nil {
			NewWithT(t).Expect(err.Error()).To(ContainSubstring("no workload cluster access configured"))
		}
		f.now = f.now.Add(max(res.RequeueAfter, time.Second))
	}
	NewWithT(t).Expect(done()).To(BeTrue(), "not reached after %d reconciles; calls %v", n, f.ov.Calls())
}

// TestTheVMGetsItsContentsBeforeItsFirstStart: the create request carries the OS disk
// allocation, custom properties (with hugepages), high availability with its lease and the
// performance profile; the data disk (with its proven marker) and the tags are there before the
// VM's first start; the data disk is recorded apart from the template's disks; and the deletion
// removes the VM with its own data disk.
func TestTheVMGetsItsContentsBeforeItsFirstStart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	tag := f.ov.AddTag(ovirt.Tag{Name: "backup-daily"})
	f.withSpec(t, func(s *infrav1.OVirtVMSpec) {
		s.DiskClone = ptr.To(true)
		s.OSDisk = &infrav1.OSDisk{Preallocated: ptr.To(true)}
		s.DataDisks = []infrav1.DataDisk{{Name: "etcd", SizeGB: 20, Preallocated: true}}
		s.Tags = []string{"backup-daily"}
		s.CustomProperties = []infrav1.CustomProperty{{Name: "viodiskcache", Value: "writeback"}}
		s.HighAvailability = &infrav1.HighAvailability{Enabled: true, Priority: 50, LeaseStorageDomain: "data", ResumeBehaviour: infrav1.ResumeBehaviourKill}
		s.Memory = &infrav1.Memory{SizeMB: 8192}
		s.Performance = &infrav1.Performance{CPUMode: infrav1.CPUModeHostPassthrough, AutoPinning: infrav1.AutoPinningExisting,
			HugePagesKiB: infrav1.HugePages2Mi, IOThreads: 2, MultiQueues: ptr.To(true), Ballooning: ptr.To(false)}
	})
	f.reconcileUntil(t, 30, func() bool { return f.ov.CallCount("RunOnce")+f.ov.CallCount("Power") > 0 })

	om := f.get(t)
	vm, ok := f.ov.VM(om.Status.VMID)
	g.Expect(ok).To(BeTrue())
	spec, _ := f.ov.Spec(vm.ID)
	g.Expect(spec.DiskFormat).To(Equal("raw"))
	g.Expect(spec.DiskSparse).To(HaveValue(BeFalse()))
	g.Expect(spec.CustomProperties).To(Equal([]ovirt.CustomProperty{{Name: "viodiskcache", Value: "writeback"}, {Name: "hugepages", Value: "2048"}}))
	sd, err := f.ov.FindStorageDomain(ctx, "data")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(spec.HighAvailability).To(Equal(&ovirt.HighAvailability{Enabled: true, Priority: 50, LeaseStorageDomainID: sd.ID, ResumeBehaviour: "kill"}))
	g.Expect(spec.Performance).To(Equal(ovirt.Performance{CPUMode: "host_passthrough", AutoPinningPolicy: "existing", IOThreads: 2,
		MultiQueues: ptr.To(true), Ballooning: ptr.To(false)}))

	g.Expect(vm.Disks).To(HaveLen(2))
	data := vm.Disks[1]
	g.Expect(om.Status.DataDisks).To(Equal([]infrav1.DataDiskStatus{{Name: "etcd", ID: data.ID}}))
	g.Expect(om.Status.SystemDiskIDs).To(Equal([]string{vm.Disks[0].ID}), "the data disk is not a template disk")
	ds, _ := f.ov.DiskSpec(data.ID)
	g.Expect(ds.Alias).To(Equal("etcd"))
	g.Expect(ds.Format).To(Equal("raw"))
	g.Expect(ds.Sparse).To(BeFalse())
	g.Expect(ds.SizeBytes).To(Equal(20 * GiB))
	key, err := readOwnershipKey(ctx, f.c, "ns", "c1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ownDataDisks(vm.Disks, vm.ID, key)).To(Equal(map[string]string{data.ID: "etcd"}), "its marker proves it is this VM's")
	g.Expect(vm.TagIDs).To(ConsistOf(tag.ID))

	calls := f.ov.Calls()
	start := slices.IndexFunc(calls, func(c string) bool { return c == "RunOnce" || c == "Power" })
	g.Expect(slices.Index(calls, "AddDisk")).To(BeNumerically("<", start), "the data disk exists before the first start: %v", calls)
	g.Expect(slices.Index(calls, "AssignTag")).To(BeNumerically("<", start), "the tag is there before the first start: %v", calls)
	g.Expect(v1beta1conditions.IsTrue(om, infrav1.MachineCreatedCondition)).To(BeTrue())
	g.Expect(v1beta1conditions.IsTrue(om, infrav1.MachineDiskResizedCondition)).To(BeTrue())

	// A reconcile later creates nothing again.
	before := f.ov.CallCount("AddDisk") + f.ov.CallCount("AssignTag")
	f.now = f.now.Add(time.Hour)
	f.reconcileToTheNode(t)
	g.Expect(f.ov.CallCount("AddDisk") + f.ov.CallCount("AssignTag")).To(Equal(before))

	// Deletion: the VM goes with its own data disk.
	g.Expect(f.c.Delete(ctx, f.get(t))).To(Succeed())
	f.reconcileUntil(t, 30, func() bool { _, ok := f.ov.VM(vm.ID); return !ok })
}

// TestADiskWithoutAVerifiedMarkerBlocksTheDeletion: a disk that claims to be the VM's data disk
// without a proof under the Cluster's key (a hand-written or copied description) is user data:
// the VM is not removed.
func TestADiskWithoutAVerifiedMarkerBlocksTheDeletion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	f.withSpec(t, func(s *infrav1.OVirtVMSpec) { s.DataDisks = []infrav1.DataDisk{{Name: "etcd", SizeGB: 20}} })
	f.reconcileUntil(t, 30, func() bool { return f.ov.CallCount("RunOnce")+f.ov.CallCount("Power") > 0 })
	om := f.get(t)
	vm, _ := f.ov.VM(om.Status.VMID)
	forged := dataDiskMarker{name: "etcd2", vmID: vm.ID}
	forged.proof = forged.sign(testKey(3))
	vm.Disks = append(vm.Disks, ovirt.Disk{ID: "forged", Alias: "etcd2", Description: forged.String()})
	vm.Status = ovirt.VMStatusDown
	f.ov.PutVM(vm)

	g.Expect(f.c.Delete(ctx, om)).To(Succeed())
	for i := 0; i < 5; i++ {
		res, err := f.reconcile(t)
		g.Expect(err).NotTo(HaveOccurred())
		f.now = f.now.Add(max(res.RequeueAfter, time.Second))
	}
	got := f.get(t)
	g.Expect(v1beta1conditions.GetReason(got, infrav1.MachineDeletedCondition)).To(Equal(infrav1.VMHasNonSystemDiskReason))
	g.Expect(controllerutil.ContainsFinalizer(got, infrav1.MachineFinalizer)).To(BeTrue())
	_, exists := f.ov.VM(vm.ID)
	g.Expect(exists).To(BeTrue())
	g.Expect(f.ov.CallCount("RemoveVM")).To(BeZero())
}

// TestAMissingTagHoldsTheCreation: a tag oVirt does not have stops the machine before its VM is
// created, naming the tag; with the provider's createMissingTags the manager creates it.
func TestAMissingTagHoldsTheCreation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	f.withSpec(t, func(s *infrav1.OVirtVMSpec) { s.Tags = []string{"team-a"} })
	for i := 0; i < 3; i++ {
		f.reconcileToTheNode(t)
	}
	om := f.get(t)
	g.Expect(v1beta1conditions.GetReason(om, infrav1.MachineCreatedCondition)).To(Equal(infrav1.TagNotFoundReason))
	g.Expect(v1beta1conditions.GetMessage(om, infrav1.MachineCreatedCondition)).To(And(ContainSubstring("team-a"), ContainSubstring("createMissingTags")))
	g.Expect(f.ov.CallCount("CreateVM")).To(BeZero())

	p := &infrav1.OVirtProvider{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Name: "p1"}, p)).To(Succeed())
	p.Spec.CreateMissingTags = ptr.To(true)
	g.Expect(f.c.Update(ctx, p)).To(Succeed())
	f.reconcileUntil(t, 30, func() bool { return f.ov.CallCount("RunOnce")+f.ov.CallCount("Power") > 0 })
	tag, ok := f.ov.TagByName("team-a")
	g.Expect(ok).To(BeTrue())
	vm, _ := f.ov.VM(f.get(t).Status.VMID)
	g.Expect(vm.TagIDs).To(ConsistOf(tag.ID))
}

// TestAPreallocatedOSDiskNeedsClonedDisks: with the clone mode resolved to thin (the provider
// and the gate leave it false), the VM is not created and MachineCreated says why.
func TestAPreallocatedOSDiskNeedsClonedDisks(t *testing.T) {
	g := NewWithT(t)
	f := newMachineFixture(t)
	f.withSpec(t, func(s *infrav1.OVirtVMSpec) { s.OSDisk = &infrav1.OSDisk{Preallocated: ptr.To(true)} })
	f.reconcileToTheNode(t)
	om := f.get(t)
	g.Expect(v1beta1conditions.GetReason(om, infrav1.MachineCreatedCondition)).To(Equal(infrav1.OSDiskNeedsCloneReason))
	g.Expect(v1beta1conditions.GetMessage(om, infrav1.MachineCreatedCondition)).To(ContainSubstring("diskclone: true"))
	g.Expect(f.ov.CallCount("CreateVM")).To(BeZero())
}
