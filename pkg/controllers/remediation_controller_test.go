package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/collections"
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

// recordedEvent is an event with the kind of the object it is about.
type recordedEvent struct {
	kind, eventType, reason, note string
}

// eventLog is an events.EventRecorder that keeps the events with their object's kind.
type eventLog struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (l *eventLog) Eventf(regarding, _ runtime.Object, eventType, reason, _, note string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kind := fmt.Sprintf("%T", regarding)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	l.events = append(l.events, recordedEvent{kind: kind, eventType: eventType, reason: reason, note: fmt.Sprintf(note, args...)})
}

// reasons returns "<Kind> <type> <reason>" of each event so far.
func (l *eventLog) reasons() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.events))
	for _, e := range l.events {
		out = append(out, e.kind+" "+e.eventType+" "+e.reason)
	}
	return out
}

// remediationFixture is a Cluster with one Machine (w-1, with a Node in the workload cluster),
// its OVirtMachine, its VM in the fake Engine with a proven owner marker, and an
// OVirtRemediation created as the MachineHealthCheck creates it.
type remediationFixture struct {
	c client.Client
	// workload is the workload cluster's API, reached through a fake ClusterCache: Node w-1,
	// boot id firstBootID.
	workload client.Client
	ov       *fake.Client
	r        *OVirtRemediationReconciler
	events   *eventLog
	now      time.Time
	vmID     string
	// setupCalls is the number of fake Engine calls the fixture made itself.
	setupCalls int
}

const remediationMC = "mc-1"

// firstBootID is the boot id of the workload Node when the fixture starts.
const firstBootID = "0e6f1c2a-8d3b-4a57-9c1e-2f4b6d8a0c11"

type fixtureOption func(cluster *clusterv1.Cluster, machine *clusterv1.Machine, om *infrav1.OVirtMachine, rem *infrav1.OVirtRemediation)

func newRemediationFixture(t *testing.T, opts ...fixtureOption) *remediationFixture {
	t.Helper()
	g := NewWithT(t)
	s := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	g.Expect(clusterv1.AddToScheme(s)).To(Succeed())
	g.Expect(infrav1.AddToScheme(s)).To(Succeed())
	f := &remediationFixture{ov: fake.NewDefaultClient(), events: &eventLog{}, now: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)}

	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1", UID: "cluster-uid"}}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-1", UID: "machine-uid", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec: clusterv1.MachineSpec{ClusterName: "c1",
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "OVirtMachine", Name: "w-1"}},
	}
	machine.Status.NodeRef = clusterv1.MachineNodeReference{Name: "w-1"}
	// What the MachineHealthCheck wrote when it created the request.
	machine.Status.Conditions = []metav1.Condition{
		{Type: clusterv1.MachineHealthCheckSucceededCondition, Status: metav1.ConditionFalse, Reason: clusterv1.MachineHealthCheckUnhealthyNodeReason, LastTransitionTime: metav1.Now()},
		{Type: clusterv1.MachineExternallyRemediatedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.MachineExternallyRemediatedWaitingForRemediationReason, LastTransitionTime: metav1.Now()},
	}
	cl, err := f.ov.FindCluster(context.Background(), "Default")
	g.Expect(err).NotTo(HaveOccurred())
	om := &infrav1.OVirtMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-1", UID: "om-uid", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: "w-1", UID: "machine-uid"}}},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: "p1", OVirtCluster: "Default", Template: "rhcos-4.14"}},
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	marker := ownerFor(om, remediationMC, "c1", "w-1")
	marker.proof = marker.sign(key)
	vm := f.ov.PutVM(ovirt.VM{Name: "w-1", Status: ovirt.VMStatusUp, ClusterID: cl.ID, Comment: "managed by CAPOV\n" + marker.String()})
	f.vmID = vm.ID
	f.setupCalls = len(f.ov.Calls())
	om.Spec.ProviderID = infrav1.ProviderIDPrefix + vm.ID
	om.Status.VMID = vm.ID
	om.Status.EngineInstanceID = fake.FakeEngineInstanceID

	rem := &infrav1.OVirtRemediation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-1", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: "w-1", UID: "machine-uid"}}},
		Spec: infrav1.OVirtRemediationSpec{Strategy: &infrav1.RemediationStrategy{Type: infrav1.RemediationStrategyReboot,
			RetryLimit: ptr.To[int32](1), Timeout: &metav1.Duration{Duration: 5 * time.Minute}}},
	}
	for _, o := range opts {
		o(cluster, machine, om, rem)
	}
	keySecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: ownershipKeyName("c1")}, Data: map[string][]byte{ownershipKeyField: key}}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capov-system", Name: "p1-creds"},
		Data: map[string][]byte{"username": []byte("admin@internal"), "password": []byte("secret")}}
	provider := &infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: "p1"},
		Spec: infrav1.OVirtProviderSpec{Engine: "https://engine.example.com/ovirt-engine/api", CredentialsSecretName: "p1-creds"}}
	f.c = crfake.NewClientBuilder().WithScheme(s).
		WithObjects(cluster, machine, om, rem, keySecret, creds, provider).
		WithStatusSubresource(&infrav1.OVirtMachine{}, &infrav1.OVirtRemediation{}, &clusterv1.Cluster{}, &clusterv1.Machine{}).
		Build()
	// The manager's cache holds Machines without their status (CacheTransform): so does the
	// reconciler's Client here; APIReader reads them whole.
	strip := func(obj client.Object) {
		if m, ok := obj.(*clusterv1.Machine); ok {
			m.Status = clusterv1.MachineStatus{}
		}
	}
	cached := interceptor.NewClient(f.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			strip(obj)
			return err
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			err := c.List(ctx, list, opts...)
			if ml, ok := list.(*clusterv1.MachineList); ok {
				for i := range ml.Items {
					strip(&ml.Items[i])
				}
			}
			return err
		},
	})
	// The workload cluster, as Cluster API's ClusterCache hands it out for Cluster ns/c1.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w-1"}}
	node.Status.NodeInfo.BootID = firstBootID
	f.workload = crfake.NewClientBuilder().WithScheme(s).WithObjects(node).WithStatusSubresource(&corev1.Node{}).Build()
	f.r = &OVirtRemediationReconciler{
		Client: cached, APIReader: f.c, Recorder: f.events, ManagementClusterID: remediationMC,
		ClusterCache: clustercache.NewFakeClusterCache(f.workload, client.ObjectKey{Namespace: "ns", Name: "c1"}),
		Connector:    &Connector{Reader: f.c, Namespace: "capov-system", Factory: fake.NewFactory(f.ov)},
		VMPoll:       10 * time.Second, Retry: time.Minute,
		Now: func() time.Time { return f.now },
	}
	return f
}

// reconcile runs one reconcile of the request.
func (f *remediationFixture) reconcile(t *testing.T) ctrl.Result {
	t.Helper()
	res, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "w-1"}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return res
}

// settle runs the preamble's reconciles (the Paused condition, the finalizer) and the first that
// acts, and returns the last result.
func (f *remediationFixture) settle(t *testing.T) ctrl.Result {
	t.Helper()
	var res ctrl.Result
	for range 3 {
		res = f.reconcile(t)
	}
	return res
}

// guestBooted does what the kubelet of a guest that restarted does: the Node reports a new boot
// id.
func (f *remediationFixture) guestBooted(t *testing.T, bootID string) {
	t.Helper()
	g := NewWithT(t)
	node := &corev1.Node{}
	g.Expect(f.workload.Get(context.Background(), client.ObjectKey{Name: "w-1"}, node)).To(Succeed())
	node.Status.NodeInfo.BootID = bootID
	g.Expect(f.workload.Status().Update(context.Background(), node)).To(Succeed())
}

func (f *remediationFixture) request(t *testing.T) *infrav1.OVirtRemediation {
	t.Helper()
	rem := &infrav1.OVirtRemediation{}
	NewWithT(t).Expect(f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "w-1"}, rem)).To(Succeed())
	return rem
}

func (f *remediationFixture) machine(t *testing.T) *clusterv1.Machine {
	t.Helper()
	m := &clusterv1.Machine{}
	NewWithT(t).Expect(f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "w-1"}, m)).To(Succeed())
	return m
}

// calls are the fake Engine's calls since the fixture was made.
func (f *remediationFixture) calls() []string { return f.ov.Calls()[f.setupCalls:] }

// writes are the Engine calls of the fake that change something.
func (f *remediationFixture) writes() []string {
	var out []string
	for _, c := range f.calls() {
		switch c {
		case "Ping", "EngineInfo", "GetVM", "FindCluster", "FindTemplate", "FindStorageDomain", "FindVnicProfile",
			"ListDiskAttachments", "FindVMsByName", "ListVMs", "GetCluster", "ListAffinityGroups", "FindTag", "GetTag",
			"ListHosts", "ListHostDevices", "ListVMHostDevices":
		default:
			out = append(out, c)
		}
	}
	return out
}

func TestRebootThenResetThenHandOver(t *testing.T) {
	g := NewWithT(t)
	f := newRemediationFixture(t)

	// Attempt 1: a reboot, recorded before the call.
	res := f.settle(t)
	g.Expect(f.ov.PowerActions(f.vmID)).To(Equal([]ovirt.PowerAction{ovirt.PowerReboot}))
	rem := f.request(t)
	g.Expect(rem.Finalizers).To(ContainElement(RemediationFinalizer))
	g.Expect(rem.Status.Phase).To(Equal(infrav1.RemediationPhaseRunning))
	g.Expect(rem.Status.RetryCount).To(BeZero())
	g.Expect(rem.Status.Attempts).To(HaveLen(1))
	g.Expect(rem.Status.Attempts[0].Action).To(Equal(infrav1.RemediationActionReboot))
	g.Expect(rem.Status.Attempts[0].VMStatus).To(Equal(string(ovirt.VMStatusUp)))
	g.Expect(rem.Status.Attempts[0].NodeBootID).To(Equal(firstBootID))
	g.Expect(rem.Status.Attempts[0].Stage).To(Equal(infrav1.RemediationStageAwaitingRestart))
	g.Expect(conditions.GetReason(rem, infrav1.ReadyCondition)).To(Equal(infrav1.RemediationInProgressReason))
	g.Expect(conditions.IsTrue(rem, infrav1.OwnershipProvenCondition)).To(BeTrue())
	g.Expect(conditions.IsTrue(rem, infrav1.CanConnectToOVirtCondition)).To(BeTrue())
	g.Expect(conditions.IsFalse(rem, infrav1.PausedCondition)).To(BeTrue())
	g.Expect(res.RequeueAfter).To(Equal(10*time.Second), "looks every VMPoll for a sign that the guest restarted")
	g.Expect(f.events.reasons()).To(ContainElements("OVirtRemediation Normal RebootRequested", "Machine Normal RebootRequested"))
	g.Expect(remediationInProgress(context.Background(), f.c, &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-1"}}, f.machine(t))).To(BeTrue())

	// The guest restarted (its kubelet reports a new boot id): within the timeout nothing more
	// happens.
	f.guestBooted(t, "5b7d2e4f-0000-4000-8000-000000000002")
	f.now = f.now.Add(4 * time.Minute)
	res = f.reconcile(t)
	g.Expect(res.RequeueAfter).To(Equal(time.Minute))
	g.Expect(f.ov.PowerActions(f.vmID)).To(HaveLen(1))
	g.Expect(f.request(t).Status.Attempts[0].Stage).To(BeEmpty())

	// Attempt 2 (the one retry): a reset.
	f.now = f.now.Add(time.Minute)
	f.reconcile(t)
	g.Expect(f.ov.PowerActions(f.vmID)).To(Equal([]ovirt.PowerAction{ovirt.PowerReboot, ovirt.PowerReset}))
	rem = f.request(t)
	g.Expect(rem.Status.RetryCount).To(BeEquivalentTo(1))
	g.Expect(rem.Status.Attempts).To(HaveLen(2))
	g.Expect(rem.Status.Attempts[0].Result).To(ContainSubstring(resultTimedOut))
	g.Expect(rem.Status.Attempts[1].Action).To(Equal(infrav1.RemediationActionReset))
	g.Expect(f.events.reasons()).To(ContainElements("OVirtRemediation Warning RemediationTimedOut", "Machine Warning RemediationTimedOut",
		"OVirtRemediation Normal ResetRequested", "Machine Normal ResetRequested"))
	g.Expect(conditions.Has(f.machine(t), clusterv1.MachineOwnerRemediatedCondition)).To(BeFalse(), "not handed over yet")

	// retryLimit reached: handed to the owner, nothing deleted, no more Engine writes.
	f.now = f.now.Add(5 * time.Minute)
	f.reconcile(t)
	g.Expect(f.ov.PowerActions(f.vmID)).To(HaveLen(2))
	rem = f.request(t)
	g.Expect(rem.Status.Phase).To(Equal(infrav1.RemediationPhaseWaitingForOwner))
	g.Expect(conditions.GetReason(rem, infrav1.ReadyCondition)).To(Equal(infrav1.RetryLimitReachedReason))
	m := f.machine(t)
	g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "CAPOV never deletes a Machine")
	owner := conditions.Get(m, clusterv1.MachineOwnerRemediatedCondition)
	g.Expect(owner).NotTo(BeNil())
	g.Expect(owner.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(owner.Reason).To(Equal(clusterv1.MachineOwnerRemediatedWaitingForRemediationReason))
	g.Expect(v1beta1conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedV1Beta1Condition)).To(BeTrue())
	g.Expect(v1beta1conditions.GetReason(m, clusterv1.MachineOwnerRemediatedV1Beta1Condition)).To(Equal(clusterv1.WaitingForRemediationV1Beta1Reason))
	ext := conditions.Get(m, clusterv1.MachineExternallyRemediatedCondition)
	g.Expect(ext.Reason).To(Equal(infrav1.RemediationFailedReason))
	g.Expect(ext.Message).To(And(ContainSubstring("1. Reboot"), ContainSubstring("2. Reset")))
	g.Expect(collections.IsUnhealthyAndOwnerRemediated(m)).To(BeTrue(), "what MachineSet and KubeadmControlPlane select")
	g.Expect(f.events.reasons()).To(ContainElements("OVirtRemediation Warning RemediationHandedToOwner", "Machine Warning RemediationHandedToOwner"))
	g.Expect(remediationInProgress(context.Background(), f.c, &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-1"}}, m)).To(BeFalse())

	// The owner's word is mirrored; nothing else happens.
	conditions.Set(m, metav1.Condition{Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse,
		Reason: controlplanev1.KubeadmControlPlaneMachineRemediationDeferredReason, Message: "waiting for control plane Machine provisioning"})
	g.Expect(f.c.Status().Update(context.Background(), m)).To(Succeed())
	f.now = f.now.Add(time.Hour)
	f.reconcile(t)
	g.Expect(f.ov.PowerActions(f.vmID)).To(HaveLen(2))
	g.Expect(conditions.GetMessage(f.request(t), infrav1.ReadyCondition)).To(ContainSubstring("waiting for control plane Machine provisioning"))
}

func TestRemediationEndsWhenTheMHCDeletesIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newRemediationFixture(t)
	f.settle(t)
	g.Expect(f.ov.PowerActions(f.vmID)).To(HaveLen(1))

	// The Machine is healthy again: the MachineHealthCheck deletes the request, while the Engine
	// happens to be unreachable (the finalizer never waits for it).
	f.r.Connector.Factory = &fake.Factory{ForProviderFunc: func(context.Context, ovirt.Config) (ovirt.Client, error) {
		return nil, &ovirt.Error{Op: "Connect", Detail: "dial tcp: connection refused", Kinds: []error{ovirt.ErrUnreachable}}
	}}
	g.Expect(f.c.Delete(ctx, f.request(t))).To(Succeed())
	f.reconcile(t)
	err := f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w-1"}, &infrav1.OVirtRemediation{})
	g.Expect(err).To(HaveOccurred(), "the finalizer is gone and so is the request")
	m := f.machine(t)
	g.Expect(conditions.Has(m, clusterv1.MachineExternallyRemediatedCondition)).To(BeFalse(), "ExternallyRemediated cleared")
	g.Expect(conditions.Has(m, clusterv1.MachineOwnerRemediatedCondition)).To(BeFalse(), "never handed over")
	g.Expect(f.ov.PowerActions(f.vmID)).To(HaveLen(1), "no further attempt")
}

func TestNoWriteToAnUnprovenVM(t *testing.T) {
	otherKey := []byte("fedcba9876543210fedcba9876543210")
	for _, tc := range []struct {
		name  string
		setup func(*remediationFixture)
	}{
		{"no owner marker", func(f *remediationFixture) {
			vm, _ := f.ov.VM(f.vmID)
			vm.Comment = "a VM somebody made"
			f.ov.PutVM(vm)
		}},
		{"another object's marker", func(f *remediationFixture) {
			vm, _ := f.ov.VM(f.vmID)
			other := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-2", UID: "other-uid"},
				Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: "p1"}}}
			o := ownerFor(other, remediationMC, "c1", vm.Name)
			o.proof = o.sign([]byte("0123456789abcdef0123456789abcdef"))
			vm.Comment = o.String()
			f.ov.PutVM(vm)
		}},
		{"a proof under another key", func(f *remediationFixture) {
			vm, _ := f.ov.VM(f.vmID)
			om := &infrav1.OVirtMachine{}
			NewWithT(t).Expect(f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "w-1"}, om)).To(Succeed())
			o := ownerFor(om, remediationMC, "c1", vm.Name)
			o.proof = o.sign(otherKey)
			vm.Comment = o.String()
			f.ov.PutVM(vm)
		}},
		{"the marker of another management cluster", func(f *remediationFixture) {
			f.r.ManagementClusterID = "mc-other"
		}},
		{"another Engine", func(f *remediationFixture) {
			om := &infrav1.OVirtMachine{}
			NewWithT(t).Expect(f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "w-1"}, om)).To(Succeed())
			om.Status.EngineInstanceID = "00000000-0000-4000-8000-0000000000ee"
			NewWithT(t).Expect(f.c.Status().Update(context.Background(), om)).To(Succeed())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newRemediationFixture(t)
			tc.setup(f)
			f.settle(t)
			g.Expect(f.writes()).To(BeEmpty(), "not one write to the Engine")
			g.Expect(f.ov.PowerActions(f.vmID)).To(BeEmpty())
			rem := f.request(t)
			g.Expect(rem.Status.Attempts).To(BeEmpty())
			g.Expect(conditions.IsFalse(rem, infrav1.OwnershipProvenCondition)).To(BeTrue())
			g.Expect(conditions.GetReason(rem, infrav1.OwnershipProvenCondition)).To(Equal(infrav1.VMNotOwnedReason))
			g.Expect(rem.Status.Phase).To(Equal(infrav1.RemediationPhaseWaitingForOwner))
			g.Expect(f.events.reasons()).To(ContainElements("OVirtRemediation Warning VMNotOwned", "Machine Warning VMNotOwned"))
			g.Expect(conditions.IsFalse(f.machine(t), clusterv1.MachineOwnerRemediatedCondition)).To(BeTrue(), "handed over")
		})
	}
}

func TestNothingWhilePaused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pause fixtureOption
	}{
		{"Cluster spec.paused", func(c *clusterv1.Cluster, _ *clusterv1.Machine, _ *infrav1.OVirtMachine, _ *infrav1.OVirtRemediation) {
			c.Spec.Paused = ptr.To(true)
		}},
		{"paused Machine", func(_ *clusterv1.Cluster, m *clusterv1.Machine, _ *infrav1.OVirtMachine, _ *infrav1.OVirtRemediation) {
			m.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
		}},
		{"paused OVirtMachine", func(_ *clusterv1.Cluster, _ *clusterv1.Machine, om *infrav1.OVirtMachine, _ *infrav1.OVirtRemediation) {
			om.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
		}},
		{"paused request", func(_ *clusterv1.Cluster, _ *clusterv1.Machine, _ *infrav1.OVirtMachine, r *infrav1.OVirtRemediation) {
			r.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
		}},
		{"Machine being moved by clusterctl", func(_ *clusterv1.Cluster, m *clusterv1.Machine, _ *infrav1.OVirtMachine, _ *infrav1.OVirtRemediation) {
			m.Annotations = map[string]string{deleteForMoveAnnotation: ""}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newRemediationFixture(t, tc.pause)
			for range 3 {
				f.reconcile(t)
			}
			f.now = f.now.Add(time.Hour)
			f.reconcile(t)
			g.Expect(f.calls()).To(BeEmpty(), "not even a read of the Engine")
			rem := f.request(t)
			g.Expect(conditions.IsTrue(rem, infrav1.PausedCondition)).To(BeTrue())
			g.Expect(rem.Status.Attempts).To(BeEmpty())
			g.Expect(conditions.Has(f.machine(t), clusterv1.MachineOwnerRemediatedCondition)).To(BeFalse())
		})
	}
	t.Run("unpaused, it acts", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		f := newRemediationFixture(t, func(c *clusterv1.Cluster, _ *clusterv1.Machine, _ *infrav1.OVirtMachine, _ *infrav1.OVirtRemediation) {
			c.Spec.Paused = ptr.To(true)
		})
		f.settle(t)
		g.Expect(f.ov.PowerActions(f.vmID)).To(BeEmpty())
		c := &clusterv1.Cluster{}
		g.Expect(f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "c1"}, c)).To(Succeed())
		c.Spec.Paused = nil
		g.Expect(f.c.Update(ctx, c)).To(Succeed())
		f.settle(t)
		g.Expect(f.ov.PowerActions(f.vmID)).To(Equal([]ovirt.PowerAction{ovirt.PowerReboot}))
		g.Expect(conditions.IsFalse(f.request(t), infrav1.PausedCondition)).To(BeTrue())
	})
}

func TestNoAttemptNorHandoverWhileEngineUnreachable(t *testing.T) {
	unreachable := &ovirt.Error{Op: "GetVM", Detail: "dial tcp 10.0.0.1:443: connect: connection refused", Kinds: []error{ovirt.ErrUnreachable}}
	t.Run("before the first attempt", func(t *testing.T) {
		g := NewWithT(t)
		f := newRemediationFixture(t)
		f.r.Connector.Factory = &fake.Factory{ForProviderFunc: func(context.Context, ovirt.Config) (ovirt.Client, error) { return nil, unreachable }}
		for range 5 {
			f.reconcile(t)
			f.now = f.now.Add(time.Hour)
		}
		rem := f.request(t)
		g.Expect(rem.Status.Attempts).To(BeEmpty())
		g.Expect(rem.Status.Phase).To(Equal(infrav1.RemediationPhaseWaiting))
		g.Expect(conditions.GetReason(rem, infrav1.CanConnectToOVirtCondition)).To(Equal(infrav1.EngineUnreachableReason))
		g.Expect(conditions.GetReason(rem, infrav1.ReadyCondition)).To(Equal(infrav1.WaitingForEngineReason))
		g.Expect(conditions.Has(f.machine(t), clusterv1.MachineOwnerRemediatedCondition)).To(BeFalse(), "no hand-over")
		g.Expect(f.calls()).To(BeEmpty())
	})
	t.Run("after an attempt, past the timeout and the retry limit", func(t *testing.T) {
		g := NewWithT(t)
		f := newRemediationFixture(t, func(_ *clusterv1.Cluster, _ *clusterv1.Machine, _ *infrav1.OVirtMachine, r *infrav1.OVirtRemediation) {
			r.Spec.Strategy.RetryLimit = ptr.To[int32](0)
		})
		f.settle(t)
		g.Expect(f.ov.PowerActions(f.vmID)).To(HaveLen(1))
		f.ov.GetVMFunc = func(context.Context, string) (*ovirt.VM, error) { return nil, unreachable }
		for range 5 {
			f.now = f.now.Add(time.Hour)
			res := f.reconcile(t)
			g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
		}
		rem := f.request(t)
		g.Expect(rem.Status.Phase).To(Equal(infrav1.RemediationPhaseWaiting))
		g.Expect(rem.Status.Attempts).To(HaveLen(1))
		g.Expect(conditions.Has(f.machine(t), clusterv1.MachineOwnerRemediatedCondition)).To(BeFalse(), "an Engine outage never hands a Machine over")
		g.Expect(f.ov.PowerActions(f.vmID)).To(HaveLen(1))

		// The Engine answers again: the expired timeout is acted on (here: the hand-over).
		f.ov.GetVMFunc = nil
		f.reconcile(t)
		g.Expect(f.request(t).Status.Phase).To(Equal(infrav1.RemediationPhaseWaitingForOwner))
		g.Expect(conditions.IsFalse(f.machine(t), clusterv1.MachineOwnerRemediatedCondition)).To(BeTrue())
	})
}

func TestMachineWithoutNodeIsHandedOverWithoutReboot(t *testing.T) {
	g := NewWithT(t)
	f := newRemediationFixture(t, func(_ *clusterv1.Cluster, m *clusterv1.Machine, _ *infrav1.OVirtMachine, _ *infrav1.OVirtRemediation) {
		m.Status.NodeRef = clusterv1.MachineNodeReference{}
	})
	f.settle(t)
	g.Expect(f.calls()).To(BeEmpty(), "no Engine call at all")
	rem := f.request(t)
	g.Expect(rem.Status.Phase).To(Equal(infrav1.RemediationPhaseWaitingForOwner))
	g.Expect(conditions.GetReason(rem, infrav1.ReadyCondition)).To(Equal(infrav1.MachineHasNoNodeReason))
	g.Expect(rem.Status.Attempts).To(BeEmpty())
	m := f.machine(t)
	g.Expect(conditions.GetReason(m, clusterv1.MachineOwnerRemediatedCondition)).To(Equal(clusterv1.MachineOwnerRemediatedWaitingForRemediationReason))
	g.Expect(collections.IsUnhealthyAndOwnerRemediated(m)).To(BeTrue())
	g.Expect(f.events.reasons()).To(ContainElement("Machine Warning RemediationHandedToOwner"))
}

func TestResetUnsupportedFallsBackToStopStart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newRemediationFixture(t)
	vm, _ := f.ov.VM(f.vmID)
	f.ov.SetClusterLevel(vm.ClusterID, 4, 5)
	f.settle(t)
	g.Expect(f.ov.PowerActions(f.vmID)).To(Equal([]ovirt.PowerAction{ovirt.PowerReboot}))
	f.guestBooted(t, "5b7d2e4f-0000-4000-8000-000000000002")

	// The second attempt's reset is refused below cluster level 4.6: the VM is stopped...
	f.now = f.now.Add(5 * time.Minute)
	res := f.reconcile(t)
	g.Expect(f.ov.PowerActions(f.vmID)).To(Equal([]ovirt.PowerAction{ovirt.PowerReboot, ovirt.PowerStop}))
	g.Expect(res.RequeueAfter).To(Equal(10*time.Second), "polls the stop")
	rem := f.request(t)
	g.Expect(rem.Status.Attempts).To(HaveLen(2))
	g.Expect(rem.Status.Attempts[1].Action).To(Equal(infrav1.RemediationActionStopStart))
	g.Expect(rem.Status.Attempts[1].Stage).To(Equal(infrav1.RemediationStageStopping))
	g.Expect(rem.Status.Attempts[1].Result).To(ContainSubstring("4.6"))
	g.Expect(f.events.reasons()).To(ContainElements("OVirtRemediation Normal StopStartRequested", "Machine Normal StopStartRequested"))
	// ...and while it is down, the OVirtMachine controller must leave its power alone.
	om := &infrav1.OVirtMachine{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w-1"}, om)).To(Succeed())
	g.Expect(remediationInProgress(ctx, f.c, om, f.machine(t))).To(BeTrue())

	// Once down, a plain start (not a run once: the VM ran before).
	f.now = f.now.Add(10 * time.Second)
	f.reconcile(t)
	g.Expect(f.ov.PowerActions(f.vmID)).To(Equal([]ovirt.PowerAction{ovirt.PowerReboot, ovirt.PowerStop, ovirt.PowerStart}))
	g.Expect(f.ov.CallCount("RunOnce")).To(BeZero())
	rem = f.request(t)
	g.Expect(rem.Status.Attempts[1].Result).To(HaveSuffix(resultStarted))
	g.Expect(rem.Status.Attempts[1].Stage).To(BeEmpty())
	got, _ := f.ov.VM(f.vmID)
	g.Expect(got.Status).To(Equal(ovirt.VMStatusUp))
	// Nothing more until the timeout.
	f.now = f.now.Add(time.Minute)
	f.reconcile(t)
	g.Expect(f.ov.PowerActions(f.vmID)).To(HaveLen(3))
}

func TestControlPlaneRebootKeepsEtcdQuorum(t *testing.T) {
	ctx := context.Background()
	etcd := func(healthy bool) []metav1.Condition {
		s := metav1.ConditionFalse
		if healthy {
			s = metav1.ConditionTrue
		}
		return []metav1.Condition{{Type: controlplanev1.KubeadmControlPlaneMachineEtcdMemberHealthyCondition, Status: s, Reason: "X", LastTransitionTime: metav1.Now()}}
	}
	controlPlane := func(thisHealthy bool) fixtureOption {
		return func(_ *clusterv1.Cluster, m *clusterv1.Machine, _ *infrav1.OVirtMachine, _ *infrav1.OVirtRemediation) {
			m.Labels[clusterv1.MachineControlPlaneLabel] = ""
			m.Status.Conditions = append(m.Status.Conditions, etcd(thisHealthy)...)
		}
	}
	peer := func(name string, healthy bool) *clusterv1.Machine {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: "c1", clusterv1.MachineControlPlaneLabel: ""}},
			Spec: clusterv1.MachineSpec{ClusterName: "c1"}}
		m.Status.Conditions = etcd(healthy)
		return m
	}
	t.Run("a healthy member waits while a peer is unhealthy", func(t *testing.T) {
		g := NewWithT(t)
		f := newRemediationFixture(t, controlPlane(true))
		g.Expect(f.c.Create(ctx, peer("cp-2", true))).To(Succeed())
		sick := peer("cp-3", false)
		g.Expect(f.c.Create(ctx, sick)).To(Succeed())
		res := f.settle(t)
		g.Expect(f.ov.PowerActions(f.vmID)).To(BeEmpty(), "2 of 3 healthy: a reboot would leave 1, below the quorum of 2")
		rem := f.request(t)
		g.Expect(rem.Status.Phase).To(Equal(infrav1.RemediationPhaseWaiting))
		g.Expect(conditions.GetReason(rem, infrav1.ReadyCondition)).To(Equal(infrav1.WaitingForEtcdQuorumReason))
		g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
		g.Expect(conditions.Has(f.machine(t), clusterv1.MachineOwnerRemediatedCondition)).To(BeFalse())

		// The peer's member recovers: 3 of 3, a reboot leaves 2.
		g.Expect(f.c.Get(ctx, client.ObjectKeyFromObject(sick), sick)).To(Succeed())
		sick.Status.Conditions = etcd(true)
		g.Expect(f.c.Status().Update(ctx, sick)).To(Succeed())
		f.reconcile(t)
		g.Expect(f.ov.PowerActions(f.vmID)).To(Equal([]ovirt.PowerAction{ovirt.PowerReboot}))
	})
	t.Run("an unhealthy member is rebooted: it takes nothing from the quorum", func(t *testing.T) {
		g := NewWithT(t)
		f := newRemediationFixture(t, controlPlane(false))
		g.Expect(f.c.Create(ctx, peer("cp-2", true))).To(Succeed())
		g.Expect(f.c.Create(ctx, peer("cp-3", true))).To(Succeed())
		f.settle(t)
		g.Expect(f.ov.PowerActions(f.vmID)).To(Equal([]ovirt.PowerAction{ovirt.PowerReboot}))
	})
	t.Run("a worker is never held by etcd", func(t *testing.T) {
		g := NewWithT(t)
		f := newRemediationFixture(t)
		g.Expect(f.c.Create(ctx, peer("cp-2", false))).To(Succeed())
		f.settle(t)
		g.Expect(slices.Contains(f.ov.PowerActions(f.vmID), ovirt.PowerReboot)).To(BeTrue())
	})
}

func TestASilentGuestIsResetWithinTheAttempt(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup runs before the first reconcile; during runs after the reboot, before the
		// deadline.
		setup, during func(*testing.T, *remediationFixture)
		// want are the power actions at the deadline.
		want []ovirt.PowerAction
	}{
		{name: "the Node keeps its boot id and the VM stays up", want: []ovirt.PowerAction{ovirt.PowerReboot, ovirt.PowerReset}},
		{name: "reboot_in_progress, then up again, is no sign of a restart",
			during: func(t *testing.T, f *remediationFixture) {
				vm, _ := f.ov.VM(f.vmID)
				vm.Status = ovirt.VMStatusRebootInProgress
				f.ov.PutVM(vm)
				f.now = f.now.Add(10 * time.Second)
				f.reconcile(t)
				vm.Status = ovirt.VMStatusUp
				f.ov.PutVM(vm)
			},
			want: []ovirt.PowerAction{ovirt.PowerReboot, ovirt.PowerReset}},
		{name: "an unreachable workload cluster proves nothing",
			setup: func(_ *testing.T, f *remediationFixture) { f.r.ClusterCache = clustercache.NewFakeEmptyClusterCache() },
			want:  []ovirt.PowerAction{ovirt.PowerReboot, ovirt.PowerReset}},
		{name: "without reset (cluster level 4.5), a stop and then a start",
			setup: func(_ *testing.T, f *remediationFixture) {
				vm, _ := f.ov.VM(f.vmID)
				f.ov.SetClusterLevel(vm.ClusterID, 4, 5)
			},
			want: []ovirt.PowerAction{ovirt.PowerReboot, ovirt.PowerStop}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newRemediationFixture(t)
			if tc.setup != nil {
				tc.setup(t, f)
			}
			start := f.now
			f.settle(t)
			g.Expect(f.ov.PowerActions(f.vmID)).To(Equal([]ovirt.PowerAction{ovirt.PowerReboot}))
			if tc.during != nil {
				tc.during(t, f)
			}

			// Before the deadline (min(2m, 5m/2) after the reboot) the attempt only looks.
			f.now = start.Add(time.Minute)
			res := f.reconcile(t)
			g.Expect(f.ov.PowerActions(f.vmID)).To(HaveLen(1))
			g.Expect(res.RequeueAfter).To(Equal(10 * time.Second))
			g.Expect(conditions.GetMessage(f.request(t), infrav1.ReadyCondition)).To(ContainSubstring("the VM is reset at 2026-12-06T10:02:00Z"))

			// At the deadline, no sign of a restart: the same attempt goes on.
			f.now = start.Add(2 * time.Minute)
			f.reconcile(t)
			g.Expect(f.ov.PowerActions(f.vmID)).To(Equal(tc.want))
			rem := f.request(t)
			g.Expect(rem.Status.RetryCount).To(BeZero(), "no new attempt")
			g.Expect(rem.Status.Attempts).To(HaveLen(1))
			a := rem.Status.Attempts[0]
			g.Expect(a.Action).To(Equal(infrav1.RemediationActionReboot))
			g.Expect(a.EscalatedAt).NotTo(BeNil())
			g.Expect(a.EscalatedAt.Time).To(BeTemporally("==", f.now))
			g.Expect(a.Result).To(ContainSubstring("no sign of a restart within 2m0s"))
			g.Expect(f.events.reasons()).To(ContainElements("OVirtRemediation Warning GuestDidNotAnswer", "Machine Warning GuestDidNotAnswer"))
			if slices.Contains(tc.want, ovirt.PowerStop) {
				g.Expect(a.Stage).To(Equal(infrav1.RemediationStageStopping))
				g.Expect(a.Result).To(ContainSubstring("4.6"))
				f.now = f.now.Add(10 * time.Second)
				f.reconcile(t)
				g.Expect(f.ov.PowerActions(f.vmID)).To(Equal([]ovirt.PowerAction{ovirt.PowerReboot, ovirt.PowerStop, ovirt.PowerStart}))
				g.Expect(f.request(t).Status.Attempts[0].Result).To(HaveSuffix(resultStarted))
			} else {
				g.Expect(a.Stage).To(BeEmpty())
				g.Expect(f.events.reasons()).To(ContainElements("OVirtRemediation Normal ResetRequested", "Machine Normal ResetRequested"))
			}

			// Once: nothing more until the timeout, which counts from the reboot.
			before := len(f.ov.PowerActions(f.vmID))
			f.now = start.Add(4 * time.Minute)
			res = f.reconcile(t)
			g.Expect(f.ov.PowerActions(f.vmID)).To(HaveLen(before))
			g.Expect(res.RequeueAfter).To(Equal(time.Minute))
			f.now = start.Add(5 * time.Minute)
			f.reconcile(t)
			g.Expect(f.request(t).Status.RetryCount).To(BeEquivalentTo(1), "the retry after the timeout")
		})
	}
}

func TestARestartedGuestIsNotReset(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup runs before the first reconcile; restart shows the restart after the reboot.
		setup, restart func(*testing.T, *remediationFixture)
		sign           string
	}{
		{name: "the Node's boot id changed",
			restart: func(t *testing.T, f *remediationFixture) { f.guestBooted(t, "5b7d2e4f-0000-4000-8000-000000000002") },
			sign:    "Node w-1 has a new boot id"},
		{name: "the VM seen powering_up, the workload cluster unreachable",
			setup: func(_ *testing.T, f *remediationFixture) { f.r.ClusterCache = clustercache.NewFakeEmptyClusterCache() },
			restart: func(t *testing.T, f *remediationFixture) {
				vm, _ := f.ov.VM(f.vmID)
				vm.Status = ovirt.VMStatusPoweringUp
				f.ov.PutVM(vm)
				f.now = f.now.Add(10 * time.Second)
				f.reconcile(t)
				vm.Status = ovirt.VMStatusUp
				f.ov.PutVM(vm)
			},
			sign: "VM seen powering_up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newRemediationFixture(t)
			if tc.setup != nil {
				tc.setup(t, f)
			}
			start := f.now
			f.settle(t)
			g.Expect(f.ov.PowerActions(f.vmID)).To(Equal([]ovirt.PowerAction{ovirt.PowerReboot}))
			tc.restart(t, f)

			f.now = start.Add(time.Minute)
			res := f.reconcile(t)
			g.Expect(res.RequeueAfter).To(Equal(4*time.Minute), "with a sign of the restart, only the timeout")
			for _, at := range []time.Duration{2 * time.Minute, 4 * time.Minute} {
				f.now = start.Add(at)
				f.reconcile(t)
			}
			g.Expect(f.ov.PowerActions(f.vmID)).To(Equal([]ovirt.PowerAction{ovirt.PowerReboot}), "no reset before the timeout")
			a := f.request(t).Status.Attempts[0]
			g.Expect(a.Stage).To(BeEmpty())
			g.Expect(a.EscalatedAt).To(BeNil())
			g.Expect(a.Result).To(ContainSubstring("the guest restarted (" + tc.sign + ")"))
			g.Expect(f.events.reasons()).NotTo(ContainElement(ContainSubstring("GuestDidNotAnswer")))
		})
	}
}
