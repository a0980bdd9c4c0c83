package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/fake"
)

const testClusterID = "mc-1"

type inventoryFixture struct {
	inv *Inventory
	c   client.Client
	ov  *fake.Client
	rec *events.FakeRecorder
	p   *infrav1.OVirtProvider
	now time.Time
}

func newInventoryFixture(t *testing.T, machines ...string) *inventoryFixture {
	t.Helper()
	g := NewWithT(t)
	s := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	g.Expect(infrav1.AddToScheme(s)).To(Succeed())
	g.Expect(clusterv1.AddToScheme(s)).To(Succeed())
	f := &inventoryFixture{ov: fake.NewDefaultClient(), rec: events.NewFakeRecorder(100), now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	f.p = &infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: "p1"},
		Spec: infrav1.OVirtProviderSpec{Engine: "https://engine.example.com/ovirt-engine/api", CredentialsSecretName: "p1-creds"}}
	objs := []client.Object{f.p, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capov-system", Name: "p1-creds"},
		Data: map[string][]byte{"username": []byte("admin@internal"), "password": []byte("secret")}}}
	for _, name := range machines {
		objs = append(objs, &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: "p1"}}})
	}
	f.c = crfake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&infrav1.OVirtProvider{}).
		WithIndex(&infrav1.OVirtMachine{}, providerIndex, func(o client.Object) []string {
			return []string{o.(*infrav1.OVirtMachine).Spec.Provider}
		}).
		WithIndex(&infrav1.OVirtMachine{}, vmIDIndex, machineVMIDs).Build()
	f.inv = &Inventory{
		Client: f.c, APIReader: f.c, Recorder: f.rec, ManagementClusterID: testClusterID,
		Connector: &Connector{Reader: f.c, Namespace: "capov-system", Factory: fake.NewFactory(f.ov)},
		Interval:  time.Minute, Retry: time.Minute, PageSize: 2, Log: logr.Discard(),
		Now: func() time.Time { return f.now },
	}
	f.inv.init()
	f.inv.started = f.now
	return f
}

// vmFor puts a VM with the owner marker of ns/name (this management cluster unless mc says
// otherwise) into the fake Engine.
func (f *inventoryFixture) vmFor(name, mc string, status ovirt.VMStatus, disks ...ovirt.Disk) ovirt.VM {
	om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	if len(disks) == 0 {
		disks = []ovirt.Disk{{ID: "disk-" + name, Alias: name + "_Disk1", Bootable: true, Status: ovirt.DiskStatusOK}}
	}
	return f.ov.PutVM(ovirt.VM{Name: name, Comment: ownerMarker(om, mc), Status: status, Disks: disks,
		NICs:            []ovirt.NIC{{ID: "nic-" + name, Name: "nic1", MAC: "56:6f:00:00:00:01"}},
		ReportedDevices: []ovirt.ReportedDevice{{Name: "eth0", MAC: "56:6f:00:00:00:01", IPs: []string{"10.0.0.1"}}, {Name: "kube-ipvs0", MAC: "aa:bb:cc:dd:ee:ff", IPs: []string{"10.96.0.1"}}}})
}

// provenVMFor puts a VM into the fake Engine with the marker CAPOV writes now for ns/name of
// Cluster cluster through provider p1, signed with key.
func (f *inventoryFixture) provenVMFor(name, cluster string, key []byte, status ovirt.VMStatus, disks ...ovirt.Disk) ovirt.VM {
	om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: "p1"}}}
	vm := f.vmFor(name, testClusterID, status, disks...)
	vm.Comment = signed(om, testClusterID, cluster, name, key)
	return f.ov.PutVM(vm)
}

// workloadCluster creates Cluster ns/name with its ownership key.
func (f *inventoryFixture) workloadCluster(t *testing.T, name string, key []byte, edit func(*clusterv1.Cluster)) {
	t.Helper()
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	if edit != nil {
		edit(c)
	}
	NewWithT(t).Expect(f.c.Create(context.Background(), c)).To(Succeed())
	NewWithT(t).Expect(f.c.Create(context.Background(), keySecret("ns", name, key))).To(Succeed())
}

func (f *inventoryFixture) run(t *testing.T) {
	t.Helper()
	NewWithT(t).Expect(f.inv.RunOnce(context.Background(), f.p)).To(BeTrue())
}

// woken returns the machines the inventory enqueued since the last call.
func (f *inventoryFixture) woken() []string {
	var out []string
	for {
		select {
		case e := <-f.inv.wake:
			out = append(out, e.Object.GetName())
		default:
			return out
		}
	}
}

func (f *inventoryFixture) provider(t *testing.T) *infrav1.OVirtProvider {
	t.Helper()
	p := &infrav1.OVirtProvider{}
	NewWithT(t).Expect(f.c.Get(context.Background(), client.ObjectKey{Name: "p1"}, p)).To(Succeed())
	return p
}

func TestTheInventoryListsTheVMsOfThisManagementClusterInPages(t *testing.T) {
	g := NewWithT(t)
	f := newInventoryFixture(t, "w-1", "w-2", "w-3")
	a, b, c := f.vmFor("w-1", testClusterID, ovirt.VMStatusUp), f.vmFor("w-2", testClusterID, ovirt.VMStatusUp), f.vmFor("w-3", testClusterID, ovirt.VMStatusUp)
	foreign := f.vmFor("w-4", "another-cluster", ovirt.VMStatusUp)

	_, _, obs := f.inv.lookup("p1", a.ID)
	g.Expect(obs).To(Equal(vmPending), "before the first inventory machines wait for it")
	f.run(t)
	g.Expect(f.ov.CallCount("ListVMs")).To(Equal(2), "three VMs in pages of two")
	g.Expect(f.ov.CallCount("GetVM")).To(BeZero())
	g.Expect(f.woken()).To(ConsistOf("w-1", "w-2", "w-3"), "the first inventory wakes every machine of the provider")
	for _, vm := range []ovirt.VM{a, b, c} {
		got, complete, obs := f.inv.lookup("p1", vm.ID)
		g.Expect(obs).To(Equal(vmPresent))
		g.Expect(complete).To(BeTrue())
		g.Expect(got.Status).To(Equal(ovirt.VMStatusUp))
		g.Expect(got.ReportedDevices).To(HaveLen(1), "only the devices of the VM's own NICs are kept")
	}
	_, _, obs = f.inv.lookup("p1", foreign.ID)
	g.Expect(obs).To(Equal(vmUnknown), "another management cluster's VM is not in this inventory")

	p := f.provider(t)
	g.Expect(p.Status.Inventory).NotTo(BeNil())
	g.Expect(*p.Status.Inventory.VMs).To(BeEquivalentTo(3))
	g.Expect(*p.Status.Inventory.OrphanedVMs).To(BeZero())
	g.Expect(conditions.GetReason(p, infrav1.OrphanedVMsCondition)).To(Equal(infrav1.NoOrphanedVMsReason))

	// Nothing changed: nobody is woken.
	f.run(t)
	g.Expect(f.woken()).To(BeEmpty())
}

func TestTheInventoryWakesAMachineWhoseVMChanged(t *testing.T) {
	g := NewWithT(t)
	f := newInventoryFixture(t, "w-1", "w-2")
	a := f.vmFor("w-1", testClusterID, ovirt.VMStatusUp)
	f.vmFor("w-2", testClusterID, ovirt.VMStatusUp)
	f.run(t)
	f.woken()

	a.Status = ovirt.VMStatusDown
	f.ov.PutVM(a)
	f.run(t)
	g.Expect(f.woken()).To(ConsistOf("w-1"))
	got, _, obs := f.inv.lookup("p1", a.ID)
	g.Expect(obs).To(Equal(vmPresent))
	g.Expect(got.Status).To(Equal(ovirt.VMStatusDown))

	a.ReportedDevices[0].IPs = []string{"10.0.0.9"}
	f.ov.PutVM(a)
	f.run(t)
	g.Expect(f.woken()).To(ConsistOf("w-1"), "a new address wakes it too")
}

func TestAVMMissingTwiceIsLeftToATargetedRead(t *testing.T) {
	g := NewWithT(t)
	f := newInventoryFixture(t, "w-1")
	a := f.vmFor("w-1", testClusterID, ovirt.VMStatusUp)
	f.run(t)
	f.woken()

	f.ov.ListVMsFunc = func(context.Context, ovirt.VMQuery) (ovirt.VMPage, error) {
		return ovirt.VMPage{Complete: true}, nil // the Engine lost it from its listing
	}
	f.run(t)
	_, _, obs := f.inv.lookup("p1", a.ID)
	g.Expect(obs).To(Equal(vmMissingOnce), "missing once proves nothing")
	g.Expect(f.woken()).To(BeEmpty())
	f.run(t)
	_, _, obs = f.inv.lookup("p1", a.ID)
	g.Expect(obs).To(Equal(vmMissing))
	g.Expect(f.woken()).To(ConsistOf("w-1"), "missing twice: the machine confirms with a read of its own")
	g.Expect(f.ov.CallCount("GetVM")).To(BeZero(), "the inventory itself never declares a VM gone")

	f.ov.ListVMsFunc = nil
	f.run(t)
	_, _, obs = f.inv.lookup("p1", a.ID)
	g.Expect(obs).To(Equal(vmPresent))
	g.Expect(f.woken()).To(ConsistOf("w-1"), "back again")
}

func TestAFailedInventoryKeepsThePreviousOne(t *testing.T) {
	g := NewWithT(t)
	f := newInventoryFixture(t, "w-1")
	a := f.vmFor("w-1", testClusterID, ovirt.VMStatusUp)
	f.run(t)
	f.ov.ListVMsFunc = func(context.Context, ovirt.VMQuery) (ovirt.VMPage, error) {
		return ovirt.VMPage{}, &ovirt.Error{Op: "ListVMs", Detail: "connection refused", Kinds: []error{ovirt.ErrUnreachable}}
	}
	g.Expect(f.inv.RunOnce(context.Background(), f.p)).To(BeFalse())
	_, _, obs := f.inv.lookup("p1", a.ID)
	g.Expect(obs).To(Equal(vmPresent), "a failed inventory proves nothing about the VMs")
}

func TestOrphanedVMsAreReportedNotDeletedByDefault(t *testing.T) {
	g := NewWithT(t)
	f := newInventoryFixture(t, "w-1")
	f.inv.Metrics = NewInventoryMetrics(prometheus.NewRegistry())
	f.vmFor("w-1", testClusterID, ovirt.VMStatusUp)
	lost := f.vmFor("lost-1", testClusterID, ovirt.VMStatusUp)
	f.vmFor("theirs", "another-cluster", ovirt.VMStatusUp)
	f.run(t)

	p := f.provider(t)
	g.Expect(*p.Status.Inventory.OrphanedVMs).To(BeEquivalentTo(1))
	c := conditions.Get(p, infrav1.OrphanedVMsCondition)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(c.Reason).To(Equal(infrav1.OrphanedVMsFoundReason))
	g.Expect(c.Message).To(ContainSubstring("lost-1 (" + lost.ID + ", for OVirtMachine ns/lost-1"))
	g.Expect(c.Message).NotTo(ContainSubstring("theirs"), "another management cluster's VMs are not orphans")
	g.Expect(<-f.rec.Events).To(ContainSubstring(eventOrphanedVMs))
	g.Expect(testutil.ToFloat64(f.inv.Metrics.orphaned.WithLabelValues("p1"))).To(BeEquivalentTo(1), "capov_orphaned_vms")
	g.Expect(testutil.ToFloat64(f.inv.Metrics.vms.WithLabelValues("p1"))).To(BeEquivalentTo(2))

	f.now = f.now.Add(30 * 24 * time.Hour)
	f.run(t)
	g.Expect(f.ov.CallCount("RemoveVM")).To(BeZero())
	g.Expect(f.ov.CallCount("Power")).To(BeZero())
	g.Expect(f.ov.CallCount("RunOnce")).To(BeZero())
	g.Expect(f.rec.Events).To(BeEmpty(), "the event is emitted when an orphan appears, not at every inventory")
}

func TestOrphanedVMsAreRemovedAfterTheGracePeriodWhenOptedIn(t *testing.T) {
	g := NewWithT(t)
	f := newInventoryFixture(t)
	f.p.Spec.OrphanedVMs = infrav1.OrphanedVMsDelete
	f.p.Spec.OrphanedVMsGracePeriod = &metav1.Duration{Duration: time.Hour}
	g.Expect(f.c.Update(context.Background(), f.p)).To(Succeed())
	f.workloadCluster(t, "c1", testKey(3), nil)
	down := f.provenVMFor("lost-down", "c1", testKey(3), ovirt.VMStatusDown)
	withCSI := f.provenVMFor("lost-csi", "c1", testKey(3), ovirt.VMStatusDown,
		ovirt.Disk{ID: "os", Alias: "lost-csi_Disk1", Bootable: true}, ovirt.Disk{ID: "pvc", Alias: "pvc-1234"})
	f.run(t)
	g.Expect(f.ov.CallCount("RemoveVM")).To(BeZero(), "not before the grace period")
	g.Expect(conditions.GetReason(f.provider(t), infrav1.OrphanedVMsCondition)).To(Equal(infrav1.OrphanedVMsDeletingReason))

	f.now = f.now.Add(time.Hour)
	f.run(t)
	_, ok := f.ov.VM(down.ID)
	g.Expect(ok).To(BeFalse(), "down for the whole grace period: removed")
	_, ok = f.ov.VM(withCSI.ID)
	g.Expect(ok).To(BeTrue(), "a VM with a CSI disk attached is never removed")
	p := f.provider(t)
	g.Expect(conditions.GetReason(p, infrav1.OrphanedVMsCondition)).To(Equal(infrav1.OrphanedVMsNotDeletableReason))
	g.Expect(conditions.GetMessage(p, infrav1.OrphanedVMsCondition)).To(ContainSubstring("pvc-1234"))
	g.Expect(*p.Status.Inventory.OrphanedVMs).To(BeEquivalentTo(1))
	g.Expect(f.ov.CallCount("Power")).To(BeZero(), "CAPOV never stops an orphan")
	g.Expect(f.ov.CallCount("RunOnce")).To(BeZero(), "CAPOV never stops an orphan")
	var removed bool
	for len(f.rec.Events) > 0 {
		if strings.Contains(<-f.rec.Events, eventOrphanedVMRemoved) {
			removed = true
		}
	}
	g.Expect(removed).To(BeTrue())
}

func TestAnOrphanWhoseMachineCameBackIsNotRemoved(t *testing.T) {
	g := NewWithT(t)
	f := newInventoryFixture(t)
	f.p.Spec.OrphanedVMs = infrav1.OrphanedVMsDelete
	g.Expect(f.c.Update(context.Background(), f.p)).To(Succeed())
	vm := f.vmFor("w-1", testClusterID, ovirt.VMStatusDown)
	f.run(t)
	// clusterctl move brings the object back (another UID) before the grace period ends.
	g.Expect(f.c.Create(context.Background(), &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-1"},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: "p1"}}})).To(Succeed())
	f.now = f.now.Add(2 * time.Hour)
	f.run(t)
	_, ok := f.ov.VM(vm.ID)
	g.Expect(ok).To(BeTrue())
	g.Expect(*f.provider(t).Status.Inventory.OrphanedVMs).To(BeZero())
}

func TestTheOwnerMarkerNamesTheManagementCluster(t *testing.T) {
	g := NewWithT(t)
	om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "w-1", UID: "uid-1"}}
	m := ownerMarker(om, "mc-1")
	g.Expect(m).To(Equal("capov ovirtmachine=team-a/w-1 uid=uid-1 management-cluster=mc-1"))
	o, ok := parseOwnerMarker("before " + m + " after")
	g.Expect(ok).To(BeTrue())
	g.Expect(o).To(Equal(vmOwner{namespace: "team-a", name: "w-1", uid: "uid-1", cluster: "mc-1"}))
	g.Expect(markerCurrent(&ovirt.VM{Name: "w-1", Comment: m}, om, "mc-1", "c1")).To(BeFalse(), "a marker from before the proof")
	om.Labels = map[string]string{clusterv1.ClusterNameLabel: "c1"}
	current := signed(om, "mc-1", "c1", "w-1", testKey(1))
	g.Expect(markerCurrent(&ovirt.VM{Name: "w-1", Comment: current}, om, "mc-1", "c1")).To(BeTrue())
	g.Expect(markerCurrent(&ovirt.VM{Name: "w-1", Comment: current}, om, "mc-2", "c1")).To(BeFalse())
	g.Expect(markerCurrent(&ovirt.VM{Name: "w-2", Comment: current}, om, "mc-1", "c1")).To(BeFalse(), "written for another VM")
	g.Expect(markerCurrent(&ovirt.VM{Name: "w-1", Comment: ownerMarker(om, "")}, om, "mc-1", "c1")).To(BeFalse(), "a marker from before the field")
	g.Expect(ownedBy(ovirt.VM{Comment: m}, om)).To(BeTrue(), "adoption by name does not depend on it")

	g.Expect(withOwnerMarker("x "+ownerMarker(om, "")+" y", om, "mc-1")).To(Equal("x "+m+" y"), "an old marker gains the field")
	g.Expect(withOwnerMarker("x "+ownerMarker(om, "old")+" y", om, "mc-1")).To(Equal("x " + m + " y"))
	g.Expect(withOwnerMarker(ownerMarker(om, "old"), om, "mc-1")).To(Equal(m))
}

// TestAMachineOfAnotherWatchFilterIsNotReconciled: a Node of a workload cluster shared by the
// clusters of several managers maps to machines by VM id, past the event filter. Such a machine
// is another manager's: nothing is done, nothing is written (before, both managers acted on it,
// and with owner markers naming their management clusters they rewrote each other's).
func TestAMachineOfAnotherWatchFilterIsNotReconciled(t *testing.T) {
	g := NewWithT(t)
	f := newMachineFixture(t)
	before := f.get(t)
	f.r.WatchFilterValue = "other-manager"
	res, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(ctrl.Result{}))
	g.Expect(f.ov.Calls()).To(BeEmpty())
	g.Expect(f.get(t).ResourceVersion).To(Equal(before.ResourceVersion), "nothing written")
}

// TestAnOrphanIsRemovedOnlyWithAVerifiedProofWhileItsClusterIsHere: with spec.orphanedVMs Delete,
// a VM down for the whole grace period whose OVirtMachine is gone was removed on the strength of
// its comment alone. Now it is removed only when its marker's proof verifies under the key of
// the Cluster it names, written for that VM, and that Cluster is here, not paused, not being
// deleted and not being moved. Every other one is reported with the reason, never touched.
func TestAnOrphanIsRemovedOnlyWithAVerifiedProofWhileItsClusterIsHere(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newInventoryFixture(t)
	f.deleteOrphansAfter(t, time.Hour)
	key := testKey(3)
	f.workloadCluster(t, "here", key, nil)
	f.workloadCluster(t, "moving", key, func(c *clusterv1.Cluster) {
		c.Annotations = map[string]string{deleteForMoveAnnotation: ""}
	})
	f.workloadCluster(t, "paused", key, func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) })

	due := f.provenVMFor("due", "here", key, ovirt.VMStatusDown)
	kept := map[string]string{}
	keep := func(vm ovirt.VM, why string) { kept[vm.ID] = why }
	keep(f.vmFor("legacy", testClusterID, ovirt.VMStatusDown), "without an ownership proof")
	keep(f.provenVMFor("moved-away", "gone", key, ovirt.VMStatusDown), "not in this management cluster")
	keep(f.provenVMFor("in-move", "moving", key, ovirt.VMStatusDown), "clusterctl is moving")
	keep(f.provenVMFor("on-hold", "paused", key, ovirt.VMStatusDown), "paused")
	keep(f.provenVMFor("forged", "here", testKey(4), ovirt.VMStatusDown), "does not verify")
	// A marker copied onto another VM (oVirt's Clone VM): it names the VM it was written for.
	copied := f.provenVMFor("original", "here", key, ovirt.VMStatusDown)
	g.Expect(f.ov.RemoveVM(ctx, copied.ID)).To(Succeed())
	clone := f.vmFor("clone-of-original", testClusterID, ovirt.VMStatusDown)
	clone.Comment = copied.Comment
	keep(f.ov.PutVM(clone), `written for VM "original"`)

	f.run(t)
	f.now = f.now.Add(time.Hour)
	f.run(t)
	_, ok := f.ov.VM(due.ID)
	g.Expect(ok).To(BeFalse(), "proven, its Cluster here: removed after the grace period")
	p := f.provider(t)
	g.Expect(*p.Status.Inventory.OrphanedVMs).To(BeEquivalentTo(len(kept)))
	msg := conditions.GetMessage(p, infrav1.OrphanedVMsCondition)
	for id, why := range kept {
		_, ok := f.ov.VM(id)
		g.Expect(ok).To(BeTrue(), "%s: %s", id, why)
		g.Expect(msg).To(ContainSubstring(why))
	}
	g.Expect(f.ov.CallCount("RemoveVM")).To(Equal(2), "the proven one, and the test's own removal of the original")
	g.Expect(f.ov.CallCount("Power")).To(BeZero())
	g.Expect(f.ov.CallCount("RunOnce")).To(BeZero())
}

// TestAProviderReportsOnlyItsOwnOrphansInNamespacesItAllows: every orphan of the management
// cluster was reported, and with Delete removed, by every OVirtProvider of the Engine, also those
// created through another provider and in namespaces the provider does not allow.
func TestAProviderReportsOnlyItsOwnOrphansInNamespacesItAllows(t *testing.T) {
	g := NewWithT(t)
	f := newInventoryFixture(t)
	f.p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{List: []string{"ns"}}
	f.deleteOrphansAfter(t, time.Hour)
	key := testKey(3)
	f.workloadCluster(t, "c1", key, nil)
	mine := f.provenVMFor("mine", "c1", key, ovirt.VMStatusDown)
	// Through another provider of the same Engine.
	other := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "theirs", UID: "uid-theirs"},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: "p2"}}}
	theirs := f.vmFor("theirs", testClusterID, ovirt.VMStatusDown)
	theirs.Comment = signed(other, testClusterID, "c1", "theirs", key)
	f.ov.PutVM(theirs)
	// In a namespace p1 does not allow.
	outside := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-z", Name: "elsewhere", UID: "uid-elsewhere"},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: "p1"}}}
	elsewhere := f.vmFor("elsewhere", testClusterID, ovirt.VMStatusDown)
	elsewhere.Comment = signed(outside, testClusterID, "c1", "elsewhere", key)
	f.ov.PutVM(elsewhere)

	f.run(t)
	f.now = f.now.Add(time.Hour)
	f.run(t)
	_, ok := f.ov.VM(mine.ID)
	g.Expect(ok).To(BeFalse())
	for _, id := range []string{theirs.ID, elsewhere.ID} {
		_, ok := f.ov.VM(id)
		g.Expect(ok).To(BeTrue())
	}
	p := f.provider(t)
	g.Expect(*p.Status.Inventory.OrphanedVMs).To(BeZero())
	g.Expect(conditions.GetMessage(p, infrav1.OrphanedVMsCondition)).NotTo(Or(ContainSubstring("theirs"), ContainSubstring("elsewhere")))
}

// TestAMachineCreatedWhileTheInventoryWakesOthersGoesFirst: after a restart the first inventory
// wakes every machine whose VM it had not seen; a machine created meanwhile must not wait behind
// them (issue 34: 2.32 times its idle time to Ready at N=5,000). The inventory's wakes go to the
// controller's priority queue at low priority, below a new object's event.
func TestAMachineCreatedWhileTheInventoryWakesOthersGoesFirst(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inv := &Inventory{}
	q := priorityqueue.New[reconcile.Request]("ovirtmachine")
	defer q.ShutDown()
	g.Expect(inv.Source().Start(ctx, q)).To(Succeed())
	for i := range 3 {
		inv.wakeMachine(ctx, &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("ready-%d", i)}})
	}
	g.Eventually(q.Len).Should(Equal(3))

	created := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}}
	(&handler.EnqueueRequestForObject{}).Create(ctx, event.CreateEvent{Object: created}, q)
	g.Eventually(q.Len).Should(Equal(4))
	first, priority, _ := q.GetWithPriority()
	g.Expect(first.Name).To(Equal("new"))
	g.Expect(priority).To(BeZero())
	next, priority, _ := q.GetWithPriority()
	g.Expect(next.Name).To(HavePrefix("ready-"))
	g.Expect(priority).To(Equal(handler.LowPriority))
}

// TestAManagerWithAWatchFilterTakesTheInventoryOnlyOfProvidersItsMachinesUse: several managers
// share a management cluster, each with its --watch-filter; a manager listed the VMs of every
// Ready provider, also of those none of its machines use (issue 34: several managers). It takes
// the inventory of a provider that carries its watch label or that one of its machines names.
func TestAManagerWithAWatchFilterTakesTheInventoryOnlyOfProvidersItsMachinesUse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newInventoryFixture(t, "w-1")
	f.inv.WatchFilterValue = "team-a"
	conditions.Set(f.p, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready"})
	g.Expect(f.c.Status().Update(ctx, f.p)).To(Succeed())
	runDue := func() {
		var wg sync.WaitGroup
		f.inv.runDue(ctx, &wg)
		wg.Wait()
	}

	runDue()
	g.Expect(f.ov.CallCount("ListVMs")).To(BeZero(), "no machine of this manager uses p1")

	om := &infrav1.OVirtMachine{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w-1"}, om)).To(Succeed())
	om.Labels = map[string]string{clusterv1.WatchLabel: "team-a"}
	g.Expect(f.c.Update(ctx, om)).To(Succeed())
	f.now = f.now.Add(2 * time.Minute)
	runDue()
	g.Expect(f.ov.CallCount("ListVMs")).To(BeNumerically(">", 0), "a machine of this manager uses p1")

	// A manager without a watch filter takes every Ready provider's inventory.
	f2 := newInventoryFixture(t)
	conditions.Set(f2.p, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready"})
	g.Expect(f2.c.Status().Update(ctx, f2.p)).To(Succeed())
	var wg sync.WaitGroup
	f2.inv.runDue(ctx, &wg)
	wg.Wait()
	g.Expect(f2.ov.CallCount("ListVMs")).To(BeNumerically(">", 0))
}
