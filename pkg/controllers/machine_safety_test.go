package controllers

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/fake"
)

func TestOwnerMarkerProvesOnlyTheObjectItNames(t *testing.T) {
	om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "w-1", UID: "uid-1"}}
	for _, tc := range []struct {
		name, comment string
		want          vmOwner
		ok            bool
	}{
		{"the marker CAPOV writes", ownerMarker(om, ""), vmOwner{namespace: "team-a", name: "w-1", uid: "uid-1"}, true},
		{"a marker inside text an admin added", "keep me " + ownerMarker(om, "") + " (prod)", vmOwner{namespace: "team-a", name: "w-1", uid: "uid-1"}, true},
		{"no marker", "created by hand", vmOwner{}, false},
		{"an empty comment", "", vmOwner{}, false},
		{"two markers", ownerMarker(om, "") + " " + ownerMarker(om, ""), vmOwner{}, false},
		{"a marker without uid", "capov ovirtmachine=team-a/w-1", vmOwner{}, false},
		{"a marker without namespace", "capov ovirtmachine=w-1 uid=uid-1", vmOwner{}, false},
		{"a name with a slash", "capov ovirtmachine=a/b/c uid=x", vmOwner{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, ok := parseOwnerMarker(tc.comment)
			g.Expect(ok).To(Equal(tc.ok))
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestOwnedByNeedsNamespaceNameAndUID(t *testing.T) {
	g := NewWithT(t)
	om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "w-1", UID: "uid-1"}}
	g.Expect(ownedBy(ovirt.VM{Comment: ownerMarker(om, "")}, om)).To(BeTrue())
	other := om.DeepCopy()
	other.UID = "uid-2"
	g.Expect(ownedBy(ovirt.VM{Comment: ownerMarker(other, "")}, om)).To(BeFalse(), "an earlier object of the same name")
	other = om.DeepCopy()
	other.Namespace = "team-b"
	g.Expect(ownedBy(ovirt.VM{Comment: ownerMarker(other, "")}, om)).To(BeFalse(), "another namespace, same UID")
	// The marker of earlier releases, "uid=<uid>" anywhere, is not enough any more.
	g.Expect(ownedBy(ovirt.VM{Comment: "uid=uid-1"}, om)).To(BeFalse())
}

func TestWithOwnerMarkerReplacesOnlyTheMarker(t *testing.T) {
	g := NewWithT(t)
	old := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: "old-uid"}}
	moved := old.DeepCopy()
	moved.UID = "new-uid"
	g.Expect(withOwnerMarker(ownerMarker(old, ""), moved, "")).To(Equal(ownerMarker(moved, "")))
	g.Expect(withOwnerMarker("before "+ownerMarker(old, "")+" after", moved, "")).To(Equal("before " + ownerMarker(moved, "") + " after"))
	g.Expect(withOwnerMarker("hand-made", moved, "")).To(Equal(ownerMarker(moved, "")))
}

func TestStopRequestsBackOffToFiveMinutes(t *testing.T) {
	g := NewWithT(t)
	r := &OVirtMachineReconciler{Intervals: Intervals{VMPoll: 10 * time.Second}}
	var waits []time.Duration
	for n := 1; n <= 8; n++ {
		waits = append(waits, r.stopBackoff(n))
	}
	g.Expect(waits).To(Equal([]time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute}))
	om := &infrav1.OVirtMachine{}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	setStopRequests(om, 4, at)
	n, last := stopRequests(om)
	g.Expect(n).To(Equal(4))
	g.Expect(last).To(BeTemporally("==", at))
	om.Annotations[stopRequestsAnnotation] = "garbage"
	n, _ = stopRequests(om)
	g.Expect(n).To(BeZero(), "a hand-edited annotation starts over instead of failing")
}

func TestSystemDisksUnknownOnlyWhenUnsure(t *testing.T) {
	g := NewWithT(t)
	vm := &ovirt.VM{ID: "vm-1", Disks: []ovirt.Disk{{ID: "d1", Bootable: true}, {ID: "d2", Bootable: true}}}
	om := &infrav1.OVirtMachine{}
	g.Expect(systemDisksUnknown(om, vm)).To(ContainSubstring("2 bootable disks (d1, d2)"))
	om.Status.SystemDiskIDs = []string{"d1"}
	g.Expect(systemDisksUnknown(om, vm)).To(BeEmpty(), "recorded disks decide")
	om.Status.SystemDiskIDs = nil
	om.Status.SystemDisksPending = ptr.To(true)
	g.Expect(systemDisksUnknown(om, vm)).To(BeEmpty(), "a VM created by this object and never started has only template disks")
	om.Status.SystemDisksPending = nil
	vm.Disks = vm.Disks[:1]
	g.Expect(systemDisksUnknown(om, vm)).To(BeEmpty(), "one bootable disk: the conservative rule applies")
}

// machineFixture is a reconciler on controller-runtime's fake client with the fake oVirt
// client: one provisioned Cluster, a Machine with bootstrap data, its OVirtMachine (with the
// finalizer), an OVirtProvider and its Secret.
type machineFixture struct {
	r      *OVirtMachineReconciler
	c      client.Client
	ov     *fake.Client
	rec    *events.FakeRecorder
	om     *infrav1.OVirtMachine
	now    time.Time
	failed atomic.Bool // when set, every write of the OVirtMachine fails (a crash)
}

func newMachineFixture(t *testing.T) *machineFixture {
	t.Helper()
	s := runtime.NewScheme()
	NewWithT(t).Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	NewWithT(t).Expect(clusterv1.AddToScheme(s)).To(Succeed())
	NewWithT(t).Expect(infrav1.AddToScheme(s)).To(Succeed())
	NewWithT(t).Expect(ipamv1.AddToScheme(s)).To(Succeed())
	f := &machineFixture{ov: fake.NewDefaultClient(), rec: events.NewFakeRecorder(1000), now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}

	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1", UID: "cluster-uid"}}
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-1", UID: "machine-uid", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec: clusterv1.MachineSpec{ClusterName: "c1", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("w-1-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "OVirtMachine", Name: "w-1"}},
	}
	f.om = &infrav1.OVirtMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-1", UID: "om-uid", Finalizers: []string{infrav1.MachineFinalizer},
			Labels:          map[string]string{clusterv1.ClusterNameLabel: "c1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: "w-1", UID: "machine-uid"}}},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: "p1", OVirtCluster: "Default", Template: "rhcos-4.14"}},
	}
	bootstrap := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-1-bootstrap"},
		Data: map[string][]byte{"value": []byte(`{"ignition":{"version":"3.2.0"}}`), "format": []byte("ignition")}}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capov-system", Name: "p1-creds"},
		Data: map[string][]byte{"username": []byte("admin@internal"), "password": []byte("secret")}}
	provider := &infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: "p1"},
		Spec: infrav1.OVirtProviderSpec{Engine: "https://engine.example.com/ovirt-engine/api", CredentialsSecretName: "p1-creds"}}

	isOM := func(obj client.Object) bool { _, ok := obj.(*infrav1.OVirtMachine); return ok }
	f.c = crfake.NewClientBuilder().WithScheme(s).
		WithObjects(cluster, machine, f.om, bootstrap, creds, provider).
		WithStatusSubresource(&infrav1.OVirtMachine{}, &infrav1.OVirtProvider{}, &clusterv1.Cluster{}, &clusterv1.Machine{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				if isOM(obj) && f.failed.Load() {
					return errors.New("connection refused (the manager crashed)")
				}
				return c.Patch(ctx, obj, p, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				if isOM(obj) && f.failed.Load() {
					return errors.New("connection refused (the manager crashed)")
				}
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
		}).Build()
	f.r = &OVirtMachineReconciler{
		Client: f.c, APIReader: f.c, Recorder: f.rec,
		Connector: &Connector{Reader: f.c, Namespace: "capov-system", Factory: fake.NewFactory(f.ov)},
		Intervals: Intervals{VMPoll: 10 * time.Second, NodePoll: 15 * time.Second, Retry: time.Minute,
			NonSystemDiskRetry: time.Minute, ShutdownTimeout: 5 * time.Minute, VMRefresh: 10 * time.Minute, LockedPatience: 30 * time.Minute},
		Now: func() time.Time { return f.now },
	}
	// The first reconcile only records the Paused condition (Cluster API's preamble).
	_, err := f.reconcile(t)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(f.ov.Calls()).To(BeEmpty())
	return f
}

func (f *machineFixture) reconcile(t *testing.T) (ctrl.Result, error) {
	t.Helper()
	return f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "w-1"}})
}

func (f *machineFixture) get(t *testing.T) *infrav1.OVirtMachine {
	t.Helper()
	om := &infrav1.OVirtMachine{}
	NewWithT(t).Expect(f.c.Get(context.Background(), client.ObjectKeyFromObject(f.om), om)).To(Succeed())
	return om
}

func (f *machineFixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestACrashRightAfterTheCreateRequestNeverLeaksTheVM: the create request succeeds in oVirt and
// the manager dies before it records anything (VM id, CanConnectToOVirt). Then the
// OVirtProvider is deleted and so is the machine. Before, the machine looked as if it had never
// reached oVirt and lost its finalizer at once, leaking the VM; now the create request was
// recorded first, so the deletion waits for the provider and then removes the VM it finds by
// name and owner marker.
func TestACrashRightAfterTheCreateRequestNeverLeaksTheVM(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	created := ""
	f.ov.CreateVMFunc = func(ctx context.Context, spec ovirt.VMSpec) (*ovirt.VM, error) {
		f.ov.CreateVMFunc = nil
		vm, err := f.ov.CreateVM(ctx, spec)
		if err == nil {
			created = vm.ID
			f.failed.Store(true) // the manager dies with the answer
		}
		return vm, err
	}
	_, err := f.reconcile(t)
	g.Expect(err).To(HaveOccurred(), "nothing after the create could be written")
	g.Expect(created).NotTo(BeEmpty())
	f.failed.Store(false)
	stored := f.get(t)
	g.Expect(stored.Status.VMID).To(BeEmpty(), "the VM id was lost")
	g.Expect(v1beta1conditions.IsTrue(stored, infrav1.CanConnectToOVirtCondition)).To(BeFalse(), "so was CanConnectToOVirt")

	// The provider goes away, then the machine is deleted.
	g.Expect(f.c.Delete(ctx, &infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: "p1"}})).To(Succeed())
	g.Expect(f.c.Delete(ctx, stored)).To(Succeed())
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	got := f.get(t)
	g.Expect(got.Finalizers).To(ContainElement(infrav1.MachineFinalizer), "a VM may exist: the finalizer stays")
	g.Expect(v1beta1conditions.GetReason(got, infrav1.MachineDeletedCondition)).To(Equal(infrav1.ProviderNotFoundReason))
	_, exists := f.ov.VM(created)
	g.Expect(exists).To(BeTrue())

	// The provider is back: the VM is found by name and owner marker and removed.
	g.Expect(f.c.Create(ctx, &infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: "p1"},
		Spec: infrav1.OVirtProviderSpec{Engine: "https://engine.example.com/ovirt-engine/api", CredentialsSecretName: "p1-creds"}})).To(Succeed())
	for i := 0; i < 20; i++ {
		res, err := f.reconcile(t)
		g.Expect(err).NotTo(HaveOccurred())
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(f.om), &infrav1.OVirtMachine{}); err != nil {
			break
		}
		f.now = f.now.Add(max(res.RequeueAfter, time.Second))
	}
	_, exists = f.ov.VM(created)
	g.Expect(exists).To(BeFalse(), "the VM created before the crash is removed")
	g.Expect(f.c.Get(ctx, client.ObjectKeyFromObject(f.om), &infrav1.OVirtMachine{})).NotTo(Succeed(), "and the finalizer dropped")
}

// TestAVMThatNeverStopsIsAskedLessAndLessOften: a VM that ignores stop requests was asked to stop
// on every reconcile, every few seconds, forever. Over two hours it is now asked at most a few
// dozen times, with one Warning event and the VMNotStopping reason.
func TestAVMThatNeverStopsIsAskedLessAndLessOften(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	vm := f.ov.PutVM(ovirt.VM{ID: "5a1e0000-0000-4000-8000-00000000057c", Name: "w-1", Status: ovirt.VMStatusUp, Comment: ownerMarker(f.om, ""),
		Disks: []ovirt.Disk{{ID: "d1", Bootable: true}}})
	stored := f.get(t)
	stored.Spec.ProviderID = infrav1.ProviderIDPrefix + vm.ID
	g.Expect(f.c.Update(ctx, stored)).To(Succeed())
	stored.Status.VMID = vm.ID
	g.Expect(f.c.Status().Update(ctx, stored)).To(Succeed())
	stops := 0
	f.ov.PowerFunc = func(_ context.Context, _ string, action ovirt.PowerAction) error {
		if action == ovirt.PowerStop {
			stops++
		}
		return nil // accepted, and nothing happens
	}
	g.Expect(f.c.Delete(ctx, stored)).To(Succeed())
	end := f.now.Add(2 * time.Hour)
	for f.now.Before(end) {
		res, err := f.reconcile(t)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
		f.now = f.now.Add(res.RequeueAfter)
	}
	g.Expect(stops).To(And(BeNumerically(">=", 10), BeNumerically("<=", 40)), "stop requests in two hours")
	got := f.get(t)
	g.Expect(v1beta1conditions.GetReason(got, infrav1.MachineDeletedCondition)).To(Equal(infrav1.VMNotStoppingReason))
	g.Expect(v1beta1conditions.GetMessage(got, infrav1.MachineDeletedCondition)).To(ContainSubstring("5a1e0000-0000-4000-8000-00000000057c is still up"))
	warnings := 0
	for _, e := range f.events() {
		if strings.Contains(e, eventVMNotStopping) {
			warnings++
		}
	}
	g.Expect(warnings).To(Equal(1))
	g.Expect(got.Finalizers).To(ContainElement(infrav1.MachineFinalizer))
}

// TestAProviderIDNamingAForeignVMIsNeverWritten: an OVirtMachine whose spec.providerID names a
// VM that is not its own (another machine's, or any VM in oVirt) is deleted. Before, that VM
// was shut down and removed with its disks; now nothing is written to it and the finalizer
// stays with the reason VMNotOwned.
func TestAProviderIDNamingAForeignVMIsNeverWritten(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	victim := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "db-0", UID: "victim-uid"}}
	vm := f.ov.PutVM(ovirt.VM{ID: "71c71000-0000-4000-8000-000000000001", Name: "db-0", Status: ovirt.VMStatusUp, Comment: ownerMarker(victim, ""),
		Disks: []ovirt.Disk{{ID: "d1", Bootable: true}}})
	stored := f.get(t)
	stored.Spec.ProviderID = infrav1.ProviderIDPrefix + vm.ID
	g.Expect(f.c.Update(ctx, stored)).To(Succeed())
	g.Expect(f.c.Delete(ctx, stored)).To(Succeed())
	for i := 0; i < 5; i++ {
		res, err := f.reconcile(t)
		g.Expect(err).NotTo(HaveOccurred())
		f.now = f.now.Add(max(res.RequeueAfter, 10*time.Minute))
	}
	g.Expect(f.ov.CallCount("Power")).To(BeZero())
	g.Expect(f.ov.CallCount("RunOnce")).To(BeZero())
	g.Expect(f.ov.CallCount("RemoveVM")).To(BeZero())
	g.Expect(f.ov.CallCount("UpdateVM")).To(BeZero())
	got, _ := f.ov.VM(vm.ID)
	g.Expect(got.Status).To(Equal(ovirt.VMStatusUp))
	om := f.get(t)
	g.Expect(om.Finalizers).To(ContainElement(infrav1.MachineFinalizer))
	g.Expect(v1beta1conditions.GetReason(om, infrav1.MachineDeletedCondition)).To(Equal(infrav1.VMNotOwnedReason))
	g.Expect(v1beta1conditions.GetMessage(om, infrav1.MachineDeletedCondition)).To(ContainSubstring("71c71000-0000-4000-8000-000000000001"))
	g.Expect(v1beta1conditions.GetMessage(om, infrav1.MachineDeletedCondition)).To(ContainSubstring("payments/db-0"))
}

// TestAMachineThatHasAVMNeverGetsAConnectionFailure: a machine whose VM exists but which is
// not provisioned yet (waiting for its Node) while the credentials are wrong. Before, it got
// failureReason OVirtEngineConnectionCritical and stopped for good, VM and all; now it only
// reports the connection problem and goes on once the provider works.
func TestAMachineThatHasAVMNeverGetsAConnectionFailure(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	stored := f.get(t)
	stored.Spec.ProviderID = infrav1.ProviderIDPrefix + "00000000-0000-4000-8000-000000000099"
	g.Expect(f.c.Update(ctx, stored)).To(Succeed())
	f.r.Connector.Factory = &fake.Factory{ForProviderFunc: func(context.Context, ovirt.Config) (ovirt.Client, error) {
		return nil, &ovirt.Error{Op: "Connect", Detail: "access_denied", Kinds: []error{ovirt.ErrAuth}}
	}}
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	om := f.get(t)
	reason, _ := machineFailure(om)
	g.Expect(reason).To(BeNil())
	g.Expect(v1beta1conditions.GetReason(om, infrav1.CanConnectToOVirtCondition)).To(Equal(infrav1.AuthenticationFailedReason))
}

// TestAConnectionFailureClearsItselfOnceTheProviderIsFixed: a machine created while the
// password was wrong gets failureReason OVirtEngineConnectionCritical (product doc §4.3). Once
// the credentials Secret is fixed and the provider connects, the manager clears it itself;
// before, every machine needed a kubectl patch.
func TestAConnectionFailureClearsItselfOnceTheProviderIsFixed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	good := fake.NewFactory(f.ov)
	f.r.Connector.Factory = &fake.Factory{ForProviderFunc: func(_ context.Context, cfg ovirt.Config) (ovirt.Client, error) {
		if cfg.Credentials.Password != "fixed" {
			return nil, &ovirt.Error{Op: "Connect", Detail: "access_denied", Kinds: []error{ovirt.ErrAuth}}
		}
		return good.ForProvider(ctx, cfg)
	}}
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	reason, _ := machineFailure(f.get(t))
	g.Expect(reason).To(HaveValue(Equal(infrav1.OVirtEngineConnectionCriticalFailure)))

	// Reconciled again with the same settings: still failed, and oVirt is not asked.
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	reason, _ = machineFailure(f.get(t))
	g.Expect(reason).NotTo(BeNil())
	g.Expect(f.ov.CallCount("CreateVM")).To(BeZero())

	creds := &corev1.Secret{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Namespace: "capov-system", Name: "p1-creds"}, creds)).To(Succeed())
	creds.Data["password"] = []byte("fixed")
	g.Expect(f.c.Update(ctx, creds)).To(Succeed())
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	om := f.get(t)
	reason, _ = machineFailure(om)
	g.Expect(reason).To(BeNil())
	g.Expect(om.Annotations).NotTo(HaveKey(failedSettingsAnnotation))
	g.Expect(f.ov.CallCount("CreateVM")).To(Equal(1), "and the machine goes on")
	g.Expect(strings.Join(f.events(), "\n")).To(ContainSubstring(eventConnectionFailureCleared))
}

// TestAConnectionFailureClearsItselfOnceTheProviderIsReadyAgain: the Engine locked the account
// (nothing in the OVirtProvider or its Secret changes); a machine created meanwhile gets
// failureReason OVirtEngineConnectionCritical. Once the account is unlocked on the Engine the
// provider becomes Ready again, and the machine clears its failure by itself (issue 33: before,
// only a change of the provider's settings or Secret did). While the provider is not Ready
// again, the machine does not try.
func TestAConnectionFailureClearsItselfOnceTheProviderIsReadyAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	good := fake.NewFactory(f.ov)
	locked, attempts := true, 0
	f.r.Connector.Factory = &fake.Factory{ForProviderFunc: func(_ context.Context, cfg ovirt.Config) (ovirt.Client, error) {
		attempts++
		if locked {
			return nil, &ovirt.Error{Op: "Connect", Detail: "access_denied: the account is locked", Kinds: []error{ovirt.ErrAuth}}
		}
		return good.ForProvider(ctx, cfg)
	}}
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	om := f.get(t)
	reason, _ := machineFailure(om)
	g.Expect(reason).To(HaveValue(Equal(infrav1.OVirtEngineConnectionCriticalFailure)))
	g.Expect(om.Status.FailureReason).To(HaveValue(Equal(infrav1.OVirtEngineConnectionCriticalFailure)), "v1beta2 mirrors it for the documented reset") //nolint:staticcheck // the mirror

	// Unlocked on the Engine; the provider has not seen it yet: the machine does not try.
	locked = false
	before := attempts
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	reason, _ = machineFailure(f.get(t))
	g.Expect(reason).NotTo(BeNil())
	g.Expect(attempts).To(Equal(before))

	// The provider's own check connects: it is Ready again.
	p := &infrav1.OVirtProvider{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Name: "p1"}, p)).To(Succeed())
	conditions.Set(p, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Connected",
		LastTransitionTime: metav1.NewTime(time.Now().Add(time.Minute))})
	g.Expect(f.c.Status().Update(ctx, p)).To(Succeed())
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	om = f.get(t)
	reason, _ = machineFailure(om)
	g.Expect(reason).To(BeNil())
	g.Expect(om.Status.FailureReason).To(BeNil()) //nolint:staticcheck // the mirror
	g.Expect(om.Annotations).NotTo(HaveKey(failedSettingsAnnotation))
	g.Expect(f.ov.CallCount("CreateVM")).To(Equal(1), "and the machine goes on")
	g.Expect(strings.Join(f.events(), "\n")).To(ContainSubstring(eventConnectionFailureCleared))
}

// TestAVMLockedForTooLongIsReportedAndPolledLessOften: oVirt keeps a new VM image_locked (a
// stuck copy task). Before, it was read every VMPoll forever with an Info condition; now, past
// LockedPatience, the condition says VMLockedTooLong (Warning, with the time it started), one
// Warning event is emitted, and the VM is read every five minutes.
func TestAVMLockedForTooLongIsReportedAndPolledLessOften(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	// Conditions carry the wall clock's transition times: the fake clock starts from it.
	f.now = time.Now()
	vm := f.ov.PutVM(ovirt.VM{ID: "10c6ed00-0000-4000-8000-000000000001", Name: "w-1", Status: ovirt.VMStatusImageLocked, Comment: ownerMarker(f.om, ""),
		Disks: []ovirt.Disk{{ID: "d1", Bootable: true}}})
	stored := f.get(t)
	stored.Spec.ProviderID = infrav1.ProviderIDPrefix + vm.ID
	g.Expect(f.c.Update(ctx, stored)).To(Succeed())

	reads := func() int { return f.ov.CallCount("GetVM") }
	end := f.now.Add(2 * time.Hour)
	var lastWait time.Duration
	for f.now.Before(end) {
		res, err := f.reconcile(t)
		g.Expect(err).NotTo(HaveOccurred())
		lastWait = res.RequeueAfter
		f.now = f.now.Add(res.RequeueAfter)
	}
	// 30 minutes at VMPoll or faster (about 190 reads), then every five minutes (18); before,
	// every VMPoll for two hours (720).
	g.Expect(reads()).To(BeNumerically("<=", 240))
	g.Expect(lastWait).To(Equal(lockedPoll))
	got := f.get(t)
	g.Expect(v1beta1conditions.GetReason(got, infrav1.MachineCreatedCondition)).To(Equal(infrav1.VMLockedTooLongReason))
	g.Expect(v1beta1conditions.GetSeverity(got, infrav1.MachineCreatedCondition)).To(HaveValue(Equal(clusterv1.ConditionSeverityWarning)))
	g.Expect(v1beta1conditions.GetMessage(got, infrav1.MachineCreatedCondition)).To(ContainSubstring("10c6ed00-0000-4000-8000-000000000001"))
	warnings := 0
	for _, e := range f.events() {
		if strings.Contains(e, eventVMLockedTooLong) {
			warnings++
		}
	}
	g.Expect(warnings).To(Equal(1))
}

// TestBootstrapDataIsClearedOnceTheNodeRegistered: bootstrap data stored on a VM (by an earlier
// release, or merged with an Ignition guest's network keyfiles) stays in oVirt (and is returned
// on every read of the VM) until the Node registered; then it is cleared once, unless the
// manager keeps it.
func TestBootstrapDataIsClearedOnceTheNodeRegistered(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	vm := f.ov.PutVM(ovirt.VM{ID: "vm-1", Status: ovirt.VMStatusUp, CustomScriptStored: true})
	s := &machineScope{log: ctrl.Log, om: f.om.DeepCopy(), ovirt: f.ov, vm: &vm}

	done, _, err := f.r.clearBootstrapData(ctx, s)
	g.Expect(done, err).To(BeTrue())
	g.Expect(f.ov.CallCount("UpdateVM")).To(BeZero(), "no Node yet: the guest may still need it")

	v1beta1conditions.MarkTrue(s.om, infrav1.K8sProviderIDSetupCondition)
	f.r.KeepBootstrapData = true
	done, _, err = f.r.clearBootstrapData(ctx, s)
	g.Expect(done, err).To(BeTrue())
	g.Expect(f.ov.CallCount("UpdateVM")).To(BeZero(), "--keep-bootstrap-data")

	f.r.KeepBootstrapData = false
	var sent []ovirt.VMUpdate
	f.ov.UpdateVMFunc = func(_ context.Context, _ string, u ovirt.VMUpdate) error {
		sent = append(sent, u)
		if len(sent) == 1 {
			return &ovirt.Error{Op: "UpdateVM", Status: 409, Kinds: []error{ovirt.ErrLocked}}
		}
		return nil
	}
	done, res, err := f.r.clearBootstrapData(ctx, s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done).To(BeFalse())
	g.Expect(res.RequeueAfter).To(Equal(f.r.Intervals.Retry), "a lock is retried later")
	done, _, err = f.r.clearBootstrapData(ctx, s)
	g.Expect(done, err).To(BeTrue())
	g.Expect(sent).To(HaveEach(ovirt.VMUpdate{ClearCustomScript: true}))
	g.Expect(s.om.Status.BootstrapDataCleared).To(HaveValue(BeTrue()))
	done, _, err = f.r.clearBootstrapData(ctx, s)
	g.Expect(done, err).To(BeTrue())
	g.Expect(sent).To(HaveLen(2), "cleared once")
}

// TestAVMThatRanOnceNeedsNoClearing: a VM started with run once stores no bootstrap data, so
// nothing is cleared (no PUT /vms/{id}) when its Node registers; one known only from status
// (not read in this reconcile) is cleared as before, since its script cannot be seen.
func TestAVMThatRanOnceNeedsNoClearing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	vm := f.ov.PutVM(ovirt.VM{ID: "vm-1", Status: ovirt.VMStatusUp})
	s := &machineScope{log: ctrl.Log, om: f.om.DeepCopy(), ovirt: f.ov, vm: &vm}
	v1beta1conditions.MarkTrue(s.om, infrav1.K8sProviderIDSetupCondition)
	done, _, err := f.r.clearBootstrapData(ctx, s)
	g.Expect(done, err).To(BeTrue())
	g.Expect(f.ov.CallCount("UpdateVM")).To(BeZero(), "nothing stored, nothing to clear")
	g.Expect(s.om.Status.BootstrapDataCleared).To(HaveValue(BeTrue()))

	s = &machineScope{log: ctrl.Log, om: f.om.DeepCopy(), ovirt: f.ov, vm: &ovirt.VM{ID: "vm-1", Status: ovirt.VMStatusUp}, vmFromStatus: true}
	v1beta1conditions.MarkTrue(s.om, infrav1.K8sProviderIDSetupCondition)
	done, _, err = f.r.clearBootstrapData(ctx, s)
	g.Expect(done, err).To(BeTrue())
	g.Expect(f.ov.CallCount("UpdateVM")).To(Equal(1), "a VM not read now is cleared")
}

// TestTheManagerEnforcesAllowedNamespacesToo: admission refuses an OVirtMachine in a namespace
// the OVirtProvider does not allow, but an object admitted before the provider was restricted
// (or while the webhook was down) reaches the manager: it does nothing in oVirt, not even a
// deletion, and says why.
func TestTheManagerEnforcesAllowedNamespacesToo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	vm := f.ov.PutVM(ovirt.VM{Name: "w-1", Status: ovirt.VMStatusUp, Comment: ownerMarker(f.om, ""), Disks: []ovirt.Disk{{ID: "d1", Bootable: true}}})
	p := &infrav1.OVirtProvider{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Name: "p1"}, p)).To(Succeed())
	p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{List: []string{"team-a"}}
	g.Expect(f.c.Update(ctx, p)).To(Succeed())

	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	om := f.get(t)
	g.Expect(v1beta1conditions.GetReason(om, infrav1.CanConnectToOVirtCondition)).To(Equal(infrav1.NamespaceNotAllowedReason))
	g.Expect(v1beta1conditions.GetMessage(om, infrav1.CanConnectToOVirtCondition)).To(ContainSubstring("team-a"))
	g.Expect(f.ov.Calls()).To(BeEmpty())

	om.Spec.ProviderID = infrav1.ProviderIDPrefix + vm.ID
	g.Expect(f.c.Update(ctx, om)).To(Succeed())
	g.Expect(f.c.Delete(ctx, om)).To(Succeed())
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	om = f.get(t)
	g.Expect(v1beta1conditions.GetReason(om, infrav1.MachineDeletedCondition)).To(Equal(infrav1.NamespaceNotAllowedReason))
	g.Expect(om.Finalizers).To(ContainElement(infrav1.MachineFinalizer))
	g.Expect(f.ov.Calls()).To(BeEmpty())
	g.Expect(strings.Join(f.events(), "\n")).To(ContainSubstring(eventNamespaceNotAllowed))
}

// TestAStopThatAlwaysFailsBacksOffAndSaysSo: the Engine answers 500 to every stop request (the
// chaos suite's vm-never-stops). Failed requests count like ignored ones: they back off and the
// condition says VMNotStopping with the Engine's answer.
func TestAStopThatAlwaysFailsBacksOffAndSaysSo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	vm := f.ov.PutVM(ovirt.VM{Name: "w-1", Status: ovirt.VMStatusUp, Comment: ownerMarker(f.om, ""), Disks: []ovirt.Disk{{ID: "d1", Bootable: true}}})
	stored := f.get(t)
	stored.Spec.ProviderID = infrav1.ProviderIDPrefix + vm.ID
	g.Expect(f.c.Update(ctx, stored)).To(Succeed())
	stops := 0
	f.ov.PowerFunc = func(_ context.Context, _ string, action ovirt.PowerAction) error {
		if action == ovirt.PowerStop {
			stops++
			return &ovirt.Error{Op: "StopVM", Status: 500, Detail: "internal error"}
		}
		return nil
	}
	g.Expect(f.c.Delete(ctx, stored)).To(Succeed())
	end := f.now.Add(2 * time.Hour)
	for f.now.Before(end) {
		res, err := f.reconcile(t)
		wait := res.RequeueAfter
		if err != nil {
			wait = 5 * time.Second // controller-runtime's backoff, at its shortest
		}
		f.now = f.now.Add(max(wait, time.Second))
	}
	g.Expect(stops).To(And(BeNumerically(">=", 10), BeNumerically("<=", 40)))
	got := f.get(t)
	g.Expect(v1beta1conditions.GetReason(got, infrav1.MachineDeletedCondition)).To(Equal(infrav1.VMNotStoppingReason))
	g.Expect(v1beta1conditions.GetMessage(got, infrav1.MachineDeletedCondition)).To(ContainSubstring("internal error"))
}

// TestAFailureOfAnEarlierReleaseGetsItsMirror: a machine that failed before v1beta2 mirrored the
// failure in status.failureReason has it in status.deprecated.v1beta1 only, so the product doc's
// reset (which removes status.failureReason) would change nothing for it. Its next reconcile
// writes the mirror, and nothing else is retried.
func TestAFailureOfAnEarlierReleaseGetsItsMirror(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	om := f.get(t)
	om.Status.Deprecated = &infrav1.DeprecatedStatus{V1Beta1: &infrav1.V1Beta1DeprecatedStatus{
		FailureReason: ptr.To(infrav1.VMDeletedOutOfBandFailure), FailureMessage: ptr.To("the VM was removed in oVirt")}}
	g.Expect(f.c.Status().Update(ctx, om)).To(Succeed())
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	got := f.get(t)
	g.Expect(got.Status.FailureReason).To(HaveValue(Equal(infrav1.VMDeletedOutOfBandFailure))) //nolint:staticcheck // the mirror
	g.Expect(got.Status.FailureMessage).To(HaveValue(Equal("the VM was removed in oVirt")))    //nolint:staticcheck // the mirror
	g.Expect(f.ov.CallCount("CreateVM")).To(BeZero(), "a failed machine is not reconciled further")
}

// TestAFirstCreateSendsNoNameLookup: a machine for which no create was ever requested (no
// create-requested annotation: it is written before every create request and moves with the
// object) has no VM of its own in oVirt, so the search by name before the create is a call
// spent for nothing (issue 34: one of the reads a creation does not need).
func TestAFirstCreateSendsNoNameLookup(t *testing.T) {
	g := NewWithT(t)
	f := newMachineFixture(t)
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.ov.CallCount("CreateVM")).To(Equal(1))
	g.Expect(f.ov.CallCount("FindVMsByName")).To(BeZero(), "calls: %v", f.ov.Calls())
}

// TestANameInUseAtTheFirstCreateIsLookedUpAtOnce: without the lookup, the Engine's refusal of a
// name in use (409) is what tells; the same reconcile then looks the name up, and either says
// whose VM it is (another's: rename or remove it) or adopts this object's own (created by a
// release that did not record the create request, then its status lost).
func TestANameInUseAtTheFirstCreateIsLookedUpAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		comment func(om *infrav1.OVirtMachine) string
		adopted bool
	}{
		{"another's VM", func(*infrav1.OVirtMachine) string { return "made by hand" }, false},
		{"this object's own VM", func(om *infrav1.OVirtMachine) string { return ownerFor(om, "", "c1", VMNameFor("ns", "w-1")).String() }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newMachineFixture(t)
			tpl, err := f.ov.FindTemplate(context.Background(), "rhcos-4.14", "")
			g.Expect(err).NotTo(HaveOccurred())
			existing := f.ov.PutVM(ovirt.VM{Name: VMNameFor("ns", "w-1"), Comment: tc.comment(f.om), Status: ovirt.VMStatusDown,
				OriginalTemplateID: tpl.ID, Disks: []ovirt.Disk{{ID: "os-disk", Bootable: true}, {ID: "pvc-disk", Alias: "pvc-1"}}})
			_, err = f.reconcile(t)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(f.ov.CallCount("CreateVM")).To(Equal(1))
			g.Expect(f.ov.CallCount("FindVMsByName")).To(Equal(1), "looked up after the refusal, in the same reconcile")
			got := f.get(t)
			if tc.adopted {
				g.Expect(got.Status.VMID).To(Equal(existing.ID))
				// This create did not make the VM: a disk besides the template's may be
				// attached, and is never taken for a system disk (it would be deleted with
				// the VM).
				g.Expect(got.Status.SystemDisksPending).To(BeNil())
				g.Expect(got.Status.SystemDiskIDs).NotTo(ContainElement("pvc-disk"))
				return
			}
			g.Expect(got.Status.VMID).To(BeEmpty())
			g.Expect(v1beta1conditions.GetMessage(got, infrav1.MachineCreatedCondition)).To(
				ContainSubstring("already exists in oVirt (id " + existing.ID + ") and was not created for this OVirtMachine"))
		})
	}
}

// TestAnEventWhileTheVMIsBeingMadeCostsNoRead: a machine waiting on oVirt (its disks being
// created or extended, its boot) reads its VM when the wait it scheduled is over; a reconcile in
// between (its own status patch, a Machine or Cluster update) read the VM again for nothing
// (issue 34: GET /vms/{id} 3 times per created machine, 8 when machines in flight are served
// first). It now returns with the rest of the wait and no Engine call.
func TestAnEventWhileTheVMIsBeingMadeCostsNoRead(t *testing.T) {
	g := NewWithT(t)
	f := newMachineFixture(t)
	res, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.get(t).Status.VMID).NotTo(BeEmpty())
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	calls := len(f.ov.Calls())

	// An event right after: no call, the rest of the wait.
	f.now = f.now.Add(res.RequeueAfter / 2)
	again, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.ov.Calls()[calls:]).To(BeEmpty())
	g.Expect(again.RequeueAfter).To(BeNumerically("~", res.RequeueAfter-res.RequeueAfter/2, time.Millisecond))

	// The scheduled read.
	f.now = f.now.Add(again.RequeueAfter)
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.ov.Calls()[calls:]).To(ContainElement("GetVM"))
}

// TestAMachineWaitingForItsNodeDoesNotReadItsVMOnEveryEvent: once its VM is up and every step
// in oVirt is done, a machine waits for its Node; each reconcile in that wait (Node polls,
// Machine updates, its own status patches) read its VM again, although nothing in oVirt is
// pending (issue 34). It now reads it at most once per four Node polls, as a Ready machine
// without addresses does.
func TestAMachineWaitingForItsNodeDoesNotReadItsVMOnEveryEvent(t *testing.T) {
	g := NewWithT(t)
	f := newMachineFixture(t)
	var err error
	for range 20 {
		var res ctrl.Result
		res, err = f.reconcile(t)
		if err != nil {
			break
		}
		f.now = f.now.Add(max(res.RequeueAfter, time.Second))
	}
	g.Expect(err).To(MatchError(ContainSubstring("no workload cluster access")), "the machine waits for its Node")
	g.Expect(vmStepsDone(f.get(t))).To(BeTrue())
	reads := f.ov.CallCount("GetVM")

	for range 3 {
		f.now = f.now.Add(5 * time.Second)
		_, _ = f.reconcile(t)
	}
	g.Expect(f.ov.CallCount("GetVM")).To(Equal(reads), "nothing pending in oVirt: no read")

	f.now = f.now.Add(4 * f.r.Intervals.NodePoll)
	_, _ = f.reconcile(t)
	g.Expect(f.ov.CallCount("GetVM")).To(Equal(reads+1), "read again after four Node polls")
}

// TestAMachineWhoseVMExistsGoesBeforeNewOnes: under a saturated oVirt rate limit, the machines
// that have a VM in oVirt finish before new ones start (issue 34: fair progress, p50/total ≤ 0.6):
// the reconcile of a machine with a VM that is not Ready yet asks the controller's priority queue
// for a higher priority than a new object's event (its reconciles before a scheduled read cost
// no Engine call, so serving it first spends no budget).
func TestAMachineWhoseVMExistsGoesBeforeNewOnes(t *testing.T) {
	g := NewWithT(t)
	f := newMachineFixture(t)
	res, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.get(t).Status.VMID).NotTo(BeEmpty(), "the first reconcile creates the VM")
	g.Expect(res.Priority).To(HaveValue(BeNumerically(">", 0)), "in flight: ahead of new machines")

	// Without bootstrap data nothing is created: no priority of its own.
	f2 := newMachineFixture(t)
	m := &clusterv1.Machine{}
	g.Expect(f2.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "w-1"}, m)).To(Succeed())
	m.Spec.Bootstrap.DataSecretName = nil
	g.Expect(f2.c.Update(context.Background(), m)).To(Succeed())
	res, err = f2.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f2.get(t).Status.VMID).To(BeEmpty())
	g.Expect(res.Priority).To(BeNil())
}
