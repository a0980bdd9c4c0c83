package integration

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

// ensureTag creates an oVirt tag through the API unless it exists.
func ensureTag(t *testing.T, name string) {
	t.Helper()
	_, err := ovirtClient(t).CreateTag(context.Background(), name, "")
	if err != nil && !errors.Is(err, ovirt.ErrConflict) {
		t.Fatalf("creating tag %s: %v", name, err)
	}
}

// dataDiskOf returns the disk of the VM whose description carries the data-disk marker of name.
func dataDiskOf(vm ovirtsim.VMState, name string) (ovirtsim.DiskState, bool) {
	for _, d := range vm.Disks {
		if strings.HasPrefix(d.Description, "capov datadisk="+name+" vm="+vm.ID+" ") {
			return d, true
		}
	}
	return ovirtsim.DiskState{}, false
}

// allDiskIDs are the ids of every disk of the simulator, attached or floating.
func allDiskIDs(st ovirtsim.State) []string {
	var out []string
	for _, vm := range st.VMs {
		for _, d := range vm.Disks {
			out = append(out, d.ID)
		}
	}
	for _, d := range st.FloatingDisks {
		out = append(out, d.ID)
	}
	return out
}

// TestDataDisksAndTagsComeBeforeTheFirstStartAndDataDisksGoWithTheVM: the VM gets its data
// disks (preallocated raw for etcd, thin cow for scratch, each with its ownership marker) and
// its own and its OVirtCluster's tags before it starts; a CSI disk attached next to them still
// blocks the deletion; once it is detached the VM goes with its data disks, and the CSI disk
// stays.
func TestDataDisksAndTagsComeBeforeTheFirstStartAndDataDisksGoWithTheVM(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ensureTag(t, "backup-daily")
	ensureTag(t, "cluster-prod")
	tc := newTestClusterWith(t, mainFilter, func(oc *infrav1.OVirtCluster) { oc.Spec.Tags = []string{"cluster-prod"} })
	spec := vmSpec()
	spec.DataDisks = []infrav1.DataDisk{
		{Name: "etcd", SizeGB: 5, Preallocated: true},
		{Name: "scratch", SizeGB: 3, Interface: infrav1.DiskInterfaceVirtio, WipeAfterDelete: ptr.To(true)},
	}
	spec.Tags = []string{"backup-daily"}
	_, om := tc.newMachine(t, spec, ignitionConfig)

	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	g.Expect(vm.Disks).To(HaveLen(3))
	etcd, ok := dataDiskOf(vm, "etcd")
	g.Expect(ok).To(BeTrue(), "the etcd disk carries its marker: %+v", vm.Disks)
	g.Expect(etcd.Format).To(Equal("raw"))
	g.Expect(etcd.Sparse).To(BeFalse())
	g.Expect(etcd.SizeGB).To(BeEquivalentTo(5))
	g.Expect(etcd.Bootable).To(BeFalse())
	g.Expect(etcd.Alias).To(Equal("etcd"), "default gates: the name alone")
	g.Expect(etcd.StorageDomain).To(Equal("data"), "the OS disk's storage domain")
	scratch, ok := dataDiskOf(vm, "scratch")
	g.Expect(ok).To(BeTrue())
	g.Expect(scratch.Format).To(Equal("cow"))
	g.Expect(scratch.Sparse).To(BeTrue())
	g.Expect(scratch.Interface).To(Equal("virtio"))
	g.Expect(scratch.WipeAfterDelete).To(BeTrue())
	g.Expect(vm.Tags).To(ConsistOf("backup-daily", "cluster-prod"))

	got := eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(om.Status.DataDisks).To(ConsistOf(infrav1.DataDiskStatus{Name: "etcd", ID: etcd.ID}, infrav1.DataDiskStatus{Name: "scratch", ID: scratch.ID}))
	})
	g.Expect(got.Status.SystemDiskIDs).NotTo(ContainElements(etcd.ID, scratch.ID), "data disks are not template disks")
	g.Expect(eventuallyEvent(t, om, "DataDiskCreated")).To(ContainSubstring("etcd"))
	eventuallyEvent(t, om, "TagsAssigned")

	registerNode(t, om)
	eventuallyCondition(t, om, condition{Type: clusterv1.ReadyV1Beta1Condition, Status: corev1.ConditionTrue})
	csi, err := sim.AttachCSIDisk(vm.ID, 2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8s.Delete(ctx, om)).To(Succeed())
	eventuallyCondition(t, om, condition{Type: infrav1.MachineDeletedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.VMHasNonSystemDiskReason, Message: infrav1.VMHasNonSystemDiskMessage})
	g.Expect(eventuallyEvent(t, om, "DeletionBlocked")).NotTo(Or(ContainSubstring("etcd"), ContainSubstring("scratch")),
		"only the CSI disk blocks: the data disks are provably the VM's own")
	g.Expect(sim.DetachDisk(vm.ID, csi)).To(Succeed())
	deleteAndWait(t, om)
	_, exists := sim.VM(vm.ID)
	g.Expect(exists).To(BeFalse())
	aliases := strings.Join(diskAliases(sim.Dump()), ",")
	g.Expect(aliases).To(ContainSubstring("pvc-"), "the CSI disk survives")
	g.Expect(allDiskIDs(sim.Dump())).NotTo(ContainElements(etcd.ID, scratch.ID), "the data disks went with the VM")
}

// TestAfterAStatusLossDataDisksAreKnownByTheirProofOnly: restored without its status (a move, a
// backup), the machine knows its data disks by their proven markers alone and removes them with
// the VM; a disk that copies a data disk's description (two disks then claim one name) proves
// nothing and blocks the deletion.
func TestAfterAStatusLossDataDisksAreKnownByTheirProofOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.DataDisks = []infrav1.DataDisk{{Name: "etcd", SizeGB: 4, Preallocated: true}}
	_, om := tc.newMachine(t, spec, ignitionConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	etcd, ok := dataDiskOf(vm, "etcd")
	g.Expect(ok).To(BeTrue())
	registerNode(t, om)
	eventuallyCondition(t, om, condition{Type: clusterv1.ReadyV1Beta1Condition, Status: corev1.ConditionTrue})

	// Someone attaches a disk whose description copies the etcd disk's marker.
	sd := sim.Dump()
	var sdID string
	for _, d := range sd.StorageDomains {
		if d.Name == "data" {
			sdID = d.ID
		}
	}
	copied, err := ovirtClient(t).AddDisk(ctx, vm.ID, ovirt.DiskSpec{Alias: "copy", Description: etcd.Description, SizeBytes: 1 << 30,
		StorageDomainID: sdID, Format: ovirt.DiskFormatCow, Sparse: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ovirtClient(t).Power(ctx, vm.ID, ovirt.PowerStop)).To(Succeed())
	eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("down")) })
	restored := restoreWithoutStatus(t, om)
	eventuallyOM(t, restored, func(g Gomega, om *infrav1.OVirtMachine) { g.Expect(om.Status.VMID).To(Equal(vm.ID)) })
	// Before its next start the machine checks its data disks: two claim etcd, so it neither
	// creates a third nor starts the VM.
	eventuallyCondition(t, restored, condition{Type: infrav1.MachineDiskResizedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.DataDiskCreateFailedReason, Message: "does not prove it"})
	state, _ := sim.VM(vm.ID)
	g.Expect(state.Disks).To(HaveLen(3), "the OS disk, etcd and the copy: nothing created")
	g.Expect(state.Status).To(Equal("down"))

	g.Expect(k8s.Delete(ctx, restored)).To(Succeed())
	eventuallyCondition(t, restored, condition{Type: infrav1.MachineDeletedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.VMHasNonSystemDiskReason})
	g.Consistently(func() bool { _, ok := sim.VM(vm.ID); return ok }, "2s", "200ms").Should(BeTrue(), "two disks claim etcd: neither is proven")

	// The copy is detached: the etcd disk proves itself again and goes with the VM.
	g.Expect(sim.DetachDisk(vm.ID, copied.ID)).To(Succeed())
	deleteAndWait(t, restored)
	g.Expect(allDiskIDs(sim.Dump())).NotTo(ContainElement(etcd.ID), "the data disk went with the VM")
	g.Expect(strings.Join(diskAliases(sim.Dump()), ",")).To(ContainSubstring("copy"), "the detached copy survives")
}

// TestTheEnginesRefusalsOfTheContentsAreConditions: each refusal only the Engine can make
// becomes the step's condition with the Engine's own message.
func TestTheEnginesRefusalsOfTheContentsAreConditions(t *testing.T) {
	tc := newTestCluster(t, mainFilter)
	t.Run("a raw thin data disk on block storage", func(t *testing.T) {
		spec := vmSpec()
		spec.DataDisks = []infrav1.DataDisk{{Name: "raw", SizeGB: 2, Format: infrav1.DiskFormatRaw, StorageDomain: "san"}}
		_, om := tc.newMachine(t, spec, ignitionConfig)
		eventuallyCondition(t, om, condition{Type: infrav1.MachineDiskResizedCondition, Status: corev1.ConditionFalse,
			Reason: infrav1.DataDiskCreateFailedReason, Severity: clusterv1.ConditionSeverityWarning,
			Message: "is incompatible with the storage domain type"})
		vm, _ := sim.VMByName(om.Name)
		NewWithT(t).Expect(vm.Status).To(Equal("down"), "not started without its data disk")
		deleteAndWait(t, om)
	})
	t.Run("a custom property the Engine does not know", func(t *testing.T) {
		spec := vmSpec()
		spec.CustomProperties = []infrav1.CustomProperty{{Name: "no_such_hook", Value: "on"}}
		_, om := tc.newMachine(t, spec, ignitionConfig)
		eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
			Reason: infrav1.VMCreateFailedReason, Severity: clusterv1.ConditionSeverityWarning,
			Message: "custom properties are not configured by the system. The keys are: no_such_hook"})
		deleteAndWait(t, om)
	})
	t.Run("hugepages no host has", func(t *testing.T) {
		spec := vmSpec()
		spec.Performance = &infrav1.Performance{HugePagesKiB: infrav1.HugePages1Gi, Ballooning: ptr.To(false)}
		_, om := tc.newMachine(t, spec, ignitionConfig)
		eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: corev1.ConditionFalse,
			Reason: infrav1.VMPowerOnFailedReason, Message: "Huge"})
		deleteAndWait(t, om)
	})
	t.Run("a lease on a storage domain in maintenance", func(t *testing.T) {
		spec := vmSpec()
		spec.HighAvailability = &infrav1.HighAvailability{Enabled: true, LeaseStorageDomain: "offline"}
		_, om := tc.newMachine(t, spec, ignitionConfig)
		eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
			Reason: infrav1.VMCreateFailedReason, Severity: clusterv1.ConditionSeverityWarning, Message: "Storage Domain's status is Maintenance"})
		_, exists := sim.VMByName(om.Name)
		NewWithT(t).Expect(exists).To(BeFalse())
		deleteAndWait(t, om)
	})
	t.Run("a tag oVirt does not have holds the creation", func(t *testing.T) {
		spec := vmSpec()
		spec.Tags = []string{"never-created"}
		_, om := tc.newMachine(t, spec, ignitionConfig)
		eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
			Reason: infrav1.TagNotFoundReason, Severity: clusterv1.ConditionSeverityWarning, Message: "never-created"})
		_, exists := sim.VMByName(om.Name)
		NewWithT(t).Expect(exists).To(BeFalse(), "no VM without its tags")
		deleteAndWait(t, om)
	})
}

// TestAHighlyAvailableMachineIsDeletedWithoutAnHARestart: oVirt restarts a highly available VM
// whose QEMU died (the simulator does as the Engine), but the shutdown and stop of a deletion are
// asked for: the VM is never started again while it is removed.
func TestAHighlyAvailableMachineIsDeletedWithoutAnHARestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.HighAvailability = &infrav1.HighAvailability{Enabled: true, Priority: 100, LeaseStorageDomain: "data"}
	_, om := tc.newMachine(t, spec, ignitionConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	g.Expect(vm.HighlyAvailable).To(BeTrue())
	g.Expect(vm.Lease).To(Equal("data"))
	g.Expect(vm.StorageErrorResumeBehaviour).To(Equal("kill"), "the Engine's only choice with a lease")
	registerNode(t, om)
	eventuallyCondition(t, om, condition{Type: clusterv1.ReadyV1Beta1Condition, Status: corev1.ConditionTrue})

	g.Expect(sim.CrashVM(vm.ID)).To(Succeed())
	eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })

	// Watch every status the VM goes through from the deletion on.
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			st, ok := sim.VM(vm.ID)
			if !ok {
				return
			}
			mu.Lock()
			if len(seen) == 0 || seen[len(seen)-1] != st.Status {
				seen = append(seen, st.Status)
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	g.Expect(k8s.Delete(ctx, om)).To(Succeed())
	deleteAndWait(t, om)
	<-done
	mu.Lock()
	defer mu.Unlock()
	down := -1
	for i, s := range seen {
		if s == "down" {
			down = i
			break
		}
	}
	g.Expect(down).To(BeNumerically(">=", 0), "the VM went down before its removal: %v", seen)
	g.Expect(seen[down:]).To(HaveEach("down"), "never started again after it went down: %v", seen)
}
