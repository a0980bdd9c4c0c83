package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/fake"
)

// sharingEngine makes g's inventory take its inventories of the Engine f's inventory uses.
func (g *inventoryFixture) sharingEngine(f *inventoryFixture) {
	g.ov = f.ov
	g.inv.Connector.Factory = fake.NewFactory(f.ov)
}

// TestTwoLiveManagementClustersWithOneIDRemoveNoOrphans: a backup of a management cluster
// restored while the original still runs (or a cloned control-plane VM) has the same management
// cluster id; a machine created after the backup has no object in the copy, so the copy took its
// VM for an orphan and, with spec.orphanedVMs Delete, removed it once it had been down for the
// grace period. The heartbeat tag in the Engine shows each that another live cluster uses its
// id: nothing is removed, both say why, and removal resumes once only one writes.
func TestTwoLiveManagementClustersWithOneIDRemoveNoOrphans(t *testing.T) {
	g := NewWithT(t)
	key := testKey(7)
	original := newInventoryFixture(t, "late")
	restored := newInventoryFixture(t) // the backup was taken before "late" was created
	restored.sharingEngine(original)
	restored.now = original.now
	for _, f := range []*inventoryFixture{original, restored} {
		f.deleteOrphansAfter(t, time.Hour)
		f.workloadCluster(t, "c1", key, nil)
	}
	// Down (stopped by its user, or not started yet): the only kind of orphan ever removed.
	late := original.provenVMFor("late", "c1", key, ovirt.VMStatusDown)

	pass := func() {
		for _, f := range []*inventoryFixture{original, restored} {
			f.run(t)
		}
	}
	pass()
	for _, f := range []*inventoryFixture{original, restored} {
		f.now = f.now.Add(time.Hour)
	}
	pass()
	_, ok := original.ov.VM(late.ID)
	g.Expect(ok).To(BeTrue(), "the restored copy removed a VM the original still has an OVirtMachine for")
	g.Expect(original.ov.CallCount("RemoveVM")).To(BeZero())
	p := restored.provider(t)
	g.Expect(conditions.GetMessage(p, infrav1.OrphanedVMsCondition)).To(ContainSubstring("another manager with this management cluster's id wrote the heartbeat tag"))

	pass()
	for _, f := range []*inventoryFixture{original, restored} {
		p := f.provider(t)
		g.Expect(conditions.GetReason(p, infrav1.OrphanedVMsCondition)).To(Equal(infrav1.ManagementClusterIDConflictReason))
		g.Expect(conditions.GetMessage(p, infrav1.OrphanedVMsCondition)).To(ContainSubstring("--management-cluster-id"))
		g.Expect(strings.Join(f.events(), "\n")).To(ContainSubstring(eventManagementClusterIDConflict))
	}
	g.Expect(conditions.IsTrue(restored.provider(t), infrav1.OrphanedVMsCondition)).To(BeTrue(), "the copy has an orphan")
	g.Expect(conditions.IsFalse(original.provider(t), infrav1.OrphanedVMsCondition)).To(BeTrue(), "the original has none")

	// The original is shut down: once ten inventories of the copy saw no other writer, the copy
	// is the management cluster of this id and acts on what it takes for orphans again.
	for range heartbeatWindow - 1 {
		restored.run(t)
		_, ok := original.ov.VM(late.ID)
		g.Expect(ok).To(BeTrue())
	}
	restored.run(t)
	_, ok = original.ov.VM(late.ID)
	g.Expect(ok).To(BeFalse(), "alone again, the copy removes its orphan")
	g.Expect(strings.Join(restored.events(), "\n")).To(ContainSubstring(eventManagementClusterIDConflictEnded))
	g.Expect(conditions.GetReason(restored.provider(t), infrav1.OrphanedVMsCondition)).To(Equal(infrav1.NoOrphanedVMsReason))
}

// TestARestartedManagerIsNotAnotherManagementCluster: a restart (or a new leader) finds the last
// write of the previous process in the heartbeat tag; that is not another live cluster.
func TestARestartedManagerIsNotAnotherManagementCluster(t *testing.T) {
	g := NewWithT(t)
	key := testKey(8)
	f := newInventoryFixture(t)
	f.deleteOrphansAfter(t, time.Hour)
	f.workloadCluster(t, "c1", key, nil)
	due := f.provenVMFor("gone", "c1", key, ovirt.VMStatusDown)
	f.run(t)
	before := f.inv.heartbeatWriter

	old := f.inv
	f.inv = &Inventory{Client: old.Client, APIReader: old.APIReader, Recorder: old.Recorder, ManagementClusterID: old.ManagementClusterID,
		Connector: old.Connector, Interval: old.Interval, Retry: old.Retry, PageSize: old.PageSize, Log: old.Log, Now: old.Now}
	f.inv.init()
	f.inv.started = f.now
	g.Expect(f.inv.heartbeatWriter).NotTo(Equal(before))
	f.run(t)
	f.now = f.now.Add(time.Hour)
	f.run(t)
	_, ok := f.ov.VM(due.ID)
	g.Expect(ok).To(BeFalse(), "removed after its grace period, the restart notwithstanding")
	g.Expect(f.events()).NotTo(ContainElement(ContainSubstring(eventManagementClusterIDConflict)))

	tag, ok := f.ov.TagByName(heartbeatTagName(testClusterID, ""))
	g.Expect(ok).To(BeTrue())
	g.Expect(tag.Description).To(ContainSubstring("writer=" + f.inv.heartbeatWriter))
}

// TestAHeartbeatThatCannotBeKeptHoldsRemoval: without the heartbeat (an Engine account that may
// not create tags), another live cluster could not be seen: orphans are reported, not removed.
func TestAHeartbeatThatCannotBeKeptHoldsRemoval(t *testing.T) {
	g := NewWithT(t)
	key := testKey(9)
	f := newInventoryFixture(t)
	f.deleteOrphansAfter(t, time.Hour)
	f.workloadCluster(t, "c1", key, nil)
	due := f.provenVMFor("gone", "c1", key, ovirt.VMStatusDown)
	// What an Engine answers an account without the permission to manipulate tags.
	forbidden := &ovirt.Error{Op: "CreateTag", Status: 403, Detail: "Operation Failed: [User is not authorized to perform this action.]"}
	f.ov.CreateTagFunc = func(context.Context, string, string) (*ovirt.Tag, error) { return nil, forbidden }
	f.run(t)
	f.now = f.now.Add(time.Hour)
	f.run(t)
	_, ok := f.ov.VM(due.ID)
	g.Expect(ok).To(BeTrue())
	p := f.provider(t)
	g.Expect(conditions.GetReason(p, infrav1.OrphanedVMsCondition)).To(Equal(infrav1.OrphanedVMsNotDeletableReason))
	g.Expect(conditions.GetMessage(p, infrav1.OrphanedVMsCondition)).To(ContainSubstring("permission to create and edit tags"))
}
