package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// The inventory's safety rules for orphans (issue "Safety, third round", defects 1 and 11).

// deleteOrphansAfter opts the fixture's provider into orphan removal with the given grace.
func (f *inventoryFixture) deleteOrphansAfter(t *testing.T, grace time.Duration) {
	t.Helper()
	f.p.Spec.OrphanedVMs = infrav1.OrphanedVMsDelete
	f.p.Spec.OrphanedVMsGracePeriod = &metav1.Duration{Duration: grace}
	NewWithT(t).Expect(f.c.Update(context.Background(), f.p)).To(Succeed())
}

// events drains the recorder.
func (f *inventoryFixture) events() []string {
	var out []string
	for len(f.rec.Events) > 0 {
		out = append(out, <-f.rec.Events)
	}
	return out
}

// TestARunningOrphanIsReportedNotStopped: defect 1. Before, an orphan past its grace period
// was hard-stopped whatever it ran; a VM moved to another management cluster whose manager is
// late is such an "orphan".
func TestARunningOrphanIsReportedNotStopped(t *testing.T) {
	g := NewWithT(t)
	f := newInventoryFixture(t)
	f.deleteOrphansAfter(t, time.Hour)
	f.workloadCluster(t, "c1", testKey(3), nil)
	up := f.provenVMFor("lost-up", "c1", testKey(3), ovirt.VMStatusUp)
	f.run(t)
	f.now = f.now.Add(30 * 24 * time.Hour)
	f.run(t)
	f.run(t)
	g.Expect(f.ov.CallCount("Power")).To(BeZero(), "a running orphan is never stopped")
	g.Expect(f.ov.CallCount("RunOnce")).To(BeZero(), "a running orphan is never stopped")
	g.Expect(f.ov.CallCount("RemoveVM")).To(BeZero())
	vm, ok := f.ov.VM(up.ID)
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Status).To(Equal(ovirt.VMStatusUp))
	p := f.provider(t)
	g.Expect(*p.Status.Inventory.OrphanedVMs).To(BeEquivalentTo(1))
	g.Expect(conditions.GetMessage(p, infrav1.OrphanedVMsCondition)).To(ContainSubstring("lost-up"))
	g.Expect(conditions.GetMessage(p, infrav1.OrphanedVMsCondition)).To(ContainSubstring("not down"))
}

// TestAnOrphanIsRemovedOnlyAfterBeingDownForTheWholeGracePeriod: defect 1. The grace period
// counts from when the orphan was seen down, not from when it became an orphan.
func TestAnOrphanIsRemovedOnlyAfterBeingDownForTheWholeGracePeriod(t *testing.T) {
	g := NewWithT(t)
	f := newInventoryFixture(t)
	f.deleteOrphansAfter(t, time.Hour)
	f.workloadCluster(t, "c1", testKey(3), nil)
	vm := f.provenVMFor("lost-1", "c1", testKey(3), ovirt.VMStatusUp)
	f.run(t)
	f.now = f.now.Add(2 * time.Hour)
	f.run(t) // an orphan for two hours, running all along
	vm.Status = ovirt.VMStatusDown
	f.ov.PutVM(vm)
	f.now = f.now.Add(time.Minute)
	f.run(t)
	f.now = f.now.Add(30 * time.Minute)
	f.run(t)
	_, ok := f.ov.VM(vm.ID)
	g.Expect(ok).To(BeTrue(), "down for 31 minutes of a one-hour grace period")
	f.now = f.now.Add(30 * time.Minute)
	f.run(t)
	_, ok = f.ov.VM(vm.ID)
	g.Expect(ok).To(BeFalse(), "down for the whole grace period: removed")
}

// TestAVMThatAnOVirtMachineReferencesIsNeverAnOrphan: defect 1. The marker names an object
// that is gone, but another OVirtMachine of this management cluster names the VM by its id
// (spec.providerID after a move or a restore, or status.vmID): the VM is wanted.
func TestAVMThatAnOVirtMachineReferencesIsNeverAnOrphan(t *testing.T) {
	for _, by := range []string{"providerID", "vmID"} {
		t.Run(by, func(t *testing.T) {
			g := NewWithT(t)
			f := newInventoryFixture(t)
			f.deleteOrphansAfter(t, time.Hour)
			f.workloadCluster(t, "c1", testKey(3), nil)
			vm := f.provenVMFor("old-name", "c1", testKey(3), ovirt.VMStatusDown)
			om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "restored"},
				Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: "p1"}}}
			if by == "providerID" {
				om.Spec.ProviderID = infrav1.ProviderIDPrefix + strings.ToUpper(vm.ID)
			} else {
				om.Status.VMID = vm.ID
			}
			g.Expect(f.c.Create(context.Background(), om)).To(Succeed())
			f.run(t)
			f.now = f.now.Add(30 * 24 * time.Hour)
			f.run(t)
			f.run(t)
			_, ok := f.ov.VM(vm.ID)
			g.Expect(ok).To(BeTrue())
			g.Expect(f.ov.CallCount("RemoveVM")).To(BeZero())
			g.Expect(*f.provider(t).Status.Inventory.OrphanedVMs).To(BeZero())
		})
	}
}

// TestAnOddMarkerIsSkippedAndTheInventoryGoesOn: defect 11. A marker naming an object that
// cannot exist, or one this manager cannot read, is skipped and reported; the other VMs are
// still counted and their orphans reported.
func TestAnOddMarkerIsSkippedAndTheInventoryGoesOn(t *testing.T) {
	g := NewWithT(t)
	f := newInventoryFixture(t, "w-1")
	f.deleteOrphansAfter(t, time.Hour)
	f.vmFor("w-1", testClusterID, ovirt.VMStatusUp)
	lost := f.vmFor("lost-1", testClusterID, ovirt.VMStatusUp)
	for i, name := range []string{"%41", "..", "UPPER"} {
		f.ov.PutVM(ovirt.VM{Name: "odd-" + string(rune('a'+i)), Status: ovirt.VMStatusDown,
			Comment: markerPrefix + "ns/" + name + " uid=u" + " " + markerClusterField + testClusterID})
	}
	hidden := f.ov.PutVM(ovirt.VM{Name: "hidden", Status: ovirt.VMStatusDown,
		Comment: markerPrefix + "elsewhere/w-9 uid=u " + markerClusterField + testClusterID})
	f.c = interceptor.NewClient(f.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if key.Namespace == "elsewhere" {
				return errors.New(`unable to get: elsewhere/w-9 because of unknown namespace for the cache`)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	f.inv.Client, f.inv.APIReader = f.c, f.c
	f.run(t)
	f.now = f.now.Add(30 * 24 * time.Hour)
	f.run(t)
	f.run(t)

	p := f.provider(t)
	g.Expect(p.Status.Inventory).NotTo(BeNil(), "the status is written")
	g.Expect(*p.Status.Inventory.OrphanedVMs).To(BeEquivalentTo(1))
	g.Expect(conditions.GetMessage(p, infrav1.OrphanedVMsCondition)).To(ContainSubstring(lost.ID))
	g.Expect(f.ov.CallCount("RemoveVM")).To(BeZero(), "no odd VM is removed (the running orphan is not either)")
	_, ok := f.ov.VM(hidden.ID)
	g.Expect(ok).To(BeTrue())
	evs := strings.Join(f.events(), "\n")
	g.Expect(evs).To(ContainSubstring(eventOddMarker))
	g.Expect(evs).To(ContainSubstring("odd-a"))
	g.Expect(evs).To(ContainSubstring("hidden"))
}

// TestAnEngineThatIgnoresPagingDoesNotLoopTheInventory: defect 11. An Engine or proxy that
// answers every page with the first one would keep the inventory paging forever.
func TestAnEngineThatIgnoresPagingDoesNotLoopTheInventory(t *testing.T) {
	g := NewWithT(t)
	f := newInventoryFixture(t, "w-1", "w-2")
	a, b := f.vmFor("w-1", testClusterID, ovirt.VMStatusUp), f.vmFor("w-2", testClusterID, ovirt.VMStatusUp)
	f.ov.ListVMsFunc = func(context.Context, ovirt.VMQuery) (ovirt.VMPage, error) {
		return ovirt.VMPage{VMs: []ovirt.VM{a, b}, Complete: true}, nil
	}
	done := make(chan bool, 1)
	go func() { done <- f.inv.RunOnce(context.Background(), f.p) }()
	g.Eventually(done, 10*time.Second).Should(Receive(BeTrue()))
	g.Expect(f.ov.CallCount("ListVMs")).To(Equal(2), "the repeated page ends the paging")
	_, _, obs := f.inv.lookup("p1", a.ID)
	g.Expect(obs).To(Equal(vmPresent))
}

// TestTheTestGracePeriodReplacesTheProvidersOwn: --test-orphaned-vms-grace-period (tests only)
// lets the chaos suite run past a grace period that admission keeps at 10 minutes or more.
func TestTheTestGracePeriodReplacesTheProvidersOwn(t *testing.T) {
	g := NewWithT(t)
	f := newInventoryFixture(t)
	f.deleteOrphansAfter(t, 24*time.Hour)
	f.inv.GracePeriodOverride = 30 * time.Second
	f.workloadCluster(t, "c1", testKey(3), nil)
	vm := f.provenVMFor("lost-1", "c1", testKey(3), ovirt.VMStatusDown)
	f.run(t)
	f.now = f.now.Add(29 * time.Second)
	f.run(t)
	_, ok := f.ov.VM(vm.ID)
	g.Expect(ok).To(BeTrue(), "not before the overriding grace period")
	f.now = f.now.Add(time.Second)
	f.run(t)
	_, ok = f.ov.VM(vm.ID)
	g.Expect(ok).To(BeFalse(), "down for the overriding grace period: removed, a day before the provider's own")
}
