package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/fake"
)

// clusterFixture is the OVirtCluster reconciler on controller-runtime's fake client and the fake
// oVirt client: provider p1, OVirtCluster team-a/prod (no owner Cluster: only its labels name
// the cluster) and its control-plane machines.
type clusterFixture struct {
	r      *OVirtClusterReconciler
	c      client.Client
	ovirt  *fake.Client
	rec    *events.FakeRecorder
	now    time.Time
	engine string // the id of the oVirt cluster Default
}

func newClusterFixture(t *testing.T, mutate func(*infrav1.OVirtCluster), machines int) *clusterFixture {
	t.Helper()
	g := NewWithT(t)
	s := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	g.Expect(infrav1.AddToScheme(s)).To(Succeed())
	g.Expect(clusterv1.AddToScheme(s)).To(Succeed())
	g.Expect(ipamv1.AddToScheme(s)).To(Succeed())
	f := &clusterFixture{ovirt: fake.NewDefaultClient(), rec: events.NewFakeRecorder(100), now: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}
	cl, err := f.ovirt.FindCluster(context.Background(), "Default")
	g.Expect(err).NotTo(HaveOccurred())
	f.engine = cl.ID
	p := &infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: "p1", UID: "p1-uid"},
		Spec: infrav1.OVirtProviderSpec{Engine: "https://engine.example.com/ovirt-engine/api", CredentialsSecretName: "p1-creds"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capov-system", Name: "p1-creds"},
		Data: map[string][]byte{"username": []byte("admin@internal"), "password": []byte("secret")}}
	oc := &infrav1.OVirtCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "prod",
		Labels: map[string]string{clusterv1.ClusterNameLabel: "prod"}, Finalizers: []string{infrav1.ClusterFinalizer}}}
	if mutate != nil {
		mutate(oc)
	}
	objs := []client.Object{p, secret, oc, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}}
	for i := range machines {
		om := placementMachine(map[string]string{clusterv1.MachineControlPlaneLabel: "", clusterv1.ClusterNameLabel: "prod"}, nil)
		om.Name = "cp-" + string(rune('a'+i))
		om.Spec.Provider = "p1"
		om.Status.VMID = "vm-" + om.Name
		objs = append(objs, om)
	}
	f.c = crfake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&infrav1.OVirtCluster{}, &infrav1.OVirtMachine{}).Build()
	f.r = &OVirtClusterReconciler{
		Client: f.c, APIReader: f.c, Recorder: f.rec, CheckInterval: 10 * time.Minute, Now: func() time.Time { return f.now },
		Connector: &Connector{Reader: f.c, Namespace: "capov-system", Factory: fake.NewFactory(f.ovirt)},
	}
	return f
}

func (f *clusterFixture) reconcile(t *testing.T) (ctrl.Result, error) {
	t.Helper()
	return f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "prod"}})
}

func (f *clusterFixture) get(t *testing.T) (*infrav1.OVirtCluster, bool) {
	t.Helper()
	oc := &infrav1.OVirtCluster{}
	err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "prod"}, oc)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	return oc, err == nil
}

func (f *clusterFixture) events() string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

const prodGroup = "capov-team-a-prod-control-plane-Default"

// deleteMachines deletes the fixture's OVirtMachines (a cluster's deletion waits for them).
func (f *clusterFixture) deleteMachines(t *testing.T) {
	t.Helper()
	NewWithT(t).Expect(f.c.DeleteAllOf(context.Background(), &infrav1.OVirtMachine{}, client.InNamespace("team-a"))).To(Succeed())
}

func TestTheControlPlaneGroupIsCreatedOnceAndFollowsThePolicy(t *testing.T) {
	g := NewWithT(t)
	f := newClusterFixture(t, nil, 3)
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	grp, ok := f.ovirt.AffinityGroupByName(prodGroup)
	g.Expect(ok).To(BeTrue())
	g.Expect(grp.Positive).To(BeFalse())
	g.Expect(grp.Enforcing).To(BeFalse(), "Soft by default")
	g.Expect(grp.Description).To(HavePrefix("capov ovirtcluster=team-a/prod "))
	oc, _ := f.get(t)
	g.Expect(oc.Status.AffinityGroups).To(Equal([]infrav1.OVirtAffinityGroup{{Role: "control-plane", Provider: "p1",
		OVirtCluster: "Default", OVirtClusterID: f.engine, Name: prodGroup, ID: grp.ID}}))
	g.Expect(v1beta1conditions.IsTrue(oc, infrav1.AffinityGroupsReadyCondition)).To(BeTrue())
	g.Expect(f.events()).To(ContainSubstring("AffinityGroupCreated"))

	// Reconciles with nothing changed cost the Engine nothing.
	calls := len(f.ovirt.Calls())
	for range 3 {
		_, err = f.reconcile(t)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(f.ovirt.Calls()[calls:]).To(BeEmpty())

	// Hard: the same group becomes enforcing, in place.
	oc.Spec.ControlPlaneAntiAffinity = infrav1.AntiAffinityHard
	oc.Generation++
	g.Expect(f.c.Update(context.Background(), oc)).To(Succeed())
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	grp2, _ := f.ovirt.AffinityGroupByName(prodGroup)
	g.Expect(grp2.ID).To(Equal(grp.ID))
	g.Expect(grp2.Enforcing).To(BeTrue())
	g.Expect(f.ovirt.AffinityGroups(f.engine)).To(HaveLen(1), "never a second group")
}

func TestAGroupOfThatNameWithoutOurMarkerIsNeverTouched(t *testing.T) {
	g := NewWithT(t)
	f := newClusterFixture(t, nil, 1)
	foreign := f.ovirt.AddAffinityGroup(ovirt.AffinityGroup{ClusterID: f.engine, Name: prodGroup, Description: "the DBA's", Positive: false, Enforcing: true})
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	oc, _ := f.get(t)
	c := v1beta1conditions.Get(oc, infrav1.AffinityGroupsReadyCondition)
	g.Expect(c.Reason).To(Equal(infrav1.AffinityGroupNameTakenReason))
	g.Expect(c.Message).To(ContainSubstring(`an affinity group named "` + prodGroup + `" exists`))
	g.Expect(oc.Status.AffinityGroups).To(BeEmpty(), "not adopted")
	g.Expect(f.events()).To(ContainSubstring("AffinityGroupNameTaken"))

	// Deleting the cluster leaves it alone too.
	f.deleteMachines(t)
	g.Expect(f.c.Delete(context.Background(), oc)).To(Succeed())
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	_, ok := f.get(t)
	g.Expect(ok).To(BeFalse())
	got, ok := f.ovirt.AffinityGroupByName(prodGroup)
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(Equal(foreign))
}

func TestOurGroupFoundByNameIsAdoptedNotDuplicated(t *testing.T) {
	g := NewWithT(t)
	f := newClusterFixture(t, nil, 1)
	// Created before a lost status patch, or by the source of a clusterctl move.
	ours := f.ovirt.AddAffinityGroup(ovirt.AffinityGroup{ClusterID: f.engine, Name: prodGroup, Description: "capov ovirtcluster=team-a/prod keeps"})
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	oc, _ := f.get(t)
	g.Expect(oc.Status.AffinityGroups).To(ConsistOf(HaveField("ID", ours.ID)))
	g.Expect(f.ovirt.AffinityGroups(f.engine)).To(HaveLen(1))
}

func TestAGroupDeletedInOVirtIsCreatedAgainAtTheNextCheck(t *testing.T) {
	g := NewWithT(t)
	f := newClusterFixture(t, nil, 1)
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	grp, _ := f.ovirt.AffinityGroupByName(prodGroup)
	g.Expect(f.ovirt.RemoveAffinityGroup(context.Background(), f.engine, grp.ID)).To(Succeed())
	f.now = f.now.Add(11 * time.Minute)
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	again, ok := f.ovirt.AffinityGroupByName(prodGroup)
	g.Expect(ok).To(BeTrue())
	g.Expect(again.ID).NotTo(Equal(grp.ID))
	oc, _ := f.get(t)
	g.Expect(oc.Status.AffinityGroups).To(ConsistOf(HaveField("ID", again.ID)))
}

func TestDeletingTheClusterDeletesItsGroupsAndWaitsForTheEngine(t *testing.T) {
	g := NewWithT(t)
	f := newClusterFixture(t, nil, 1)
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	oc, _ := f.get(t)
	f.deleteMachines(t)
	g.Expect(f.c.Delete(context.Background(), oc)).To(Succeed())

	// The Engine is down: the finalizer stays.
	f.ovirt.RemoveAffinityGroupFunc = func(context.Context, string, string) error {
		return &ovirt.Error{Op: "RemoveAffinityGroup", Detail: "connection refused", Kinds: []error{ovirt.ErrUnreachable}}
	}
	_, err = f.reconcile(t)
	g.Expect(err).To(MatchError(ovirt.ErrUnreachable))
	oc, ok := f.get(t)
	g.Expect(ok).To(BeTrue(), "the finalizer holds while the group may still exist")
	g.Expect(oc.Status.AffinityGroups).To(HaveLen(1))

	f.ovirt.RemoveAffinityGroupFunc = nil
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	_, ok = f.get(t)
	g.Expect(ok).To(BeFalse())
	_, ok = f.ovirt.AffinityGroupByName(prodGroup)
	g.Expect(ok).To(BeFalse())
	g.Expect(f.events()).To(ContainSubstring("AffinityGroupDeleted"))
}

func TestAClusterDeletedForAMoveKeepsItsGroups(t *testing.T) {
	g := NewWithT(t)
	f := newClusterFixture(t, nil, 1)
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	oc, _ := f.get(t)
	oc.Annotations = map[string]string{deleteForMoveAnnotation: ""}
	g.Expect(f.c.Update(context.Background(), oc)).To(Succeed())
	g.Expect(f.c.Delete(context.Background(), oc)).To(Succeed())
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	_, ok := f.get(t)
	g.Expect(ok).To(BeFalse())
	_, ok = f.ovirt.AffinityGroupByName(prodGroup)
	g.Expect(ok).To(BeTrue(), "the group moves with the cluster")
}

func TestAGoneProviderDoesNotHoldTheClusterForever(t *testing.T) {
	g := NewWithT(t)
	f := newClusterFixture(t, nil, 1)
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.c.Delete(context.Background(), &infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: "p1"}})).To(Succeed())
	f.deleteMachines(t)
	oc, _ := f.get(t)
	g.Expect(f.c.Delete(context.Background(), oc)).To(Succeed())
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	_, ok := f.get(t)
	g.Expect(ok).To(BeFalse())
	g.Expect(f.events()).To(ContainSubstring("is left in oVirt"))
}

func TestFailureDomainsAreCheckedAndEachProblemNamed(t *testing.T) {
	g := NewWithT(t)
	f := newClusterFixture(t, func(oc *infrav1.OVirtCluster) {
		oc.Spec.Provider = "p1"
		oc.Spec.ControlPlaneAntiAffinity = infrav1.AntiAffinityNone
		oc.Spec.FailureDomains = []infrav1.OVirtFailureDomain{
			{Name: "fd-1", OVirtCluster: "Default"},
			{Name: "fd-2", OVirtCluster: "Nowhere", StorageDomainName: "missing"},
		}
	}, 0)
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	oc, _ := f.get(t)
	g.Expect(oc.Status.FailureDomains).To(HaveLen(2))
	c := v1beta1conditions.Get(oc, infrav1.FailureDomainsReadyCondition)
	g.Expect(c.Reason).To(Equal(infrav1.FailureDomainNotUsableReason))
	g.Expect(c.Message).To(Equal(`failure domains not usable: fd-2: oVirt cluster "Nowhere" not found; storage domain "missing" not found`))
	g.Expect(oc.Status.AffinityGroups).To(BeEmpty(), "None: no group")

	// An Engine that cannot answer is an error, retried with backoff.
	f.ovirt.FindClusterFunc = func(context.Context, string) (*ovirt.Cluster, error) {
		return nil, &ovirt.Error{Op: "FindCluster", Kinds: []error{ovirt.ErrUnreachable}}
	}
	oc.Spec.FailureDomains = oc.Spec.FailureDomains[:1]
	oc.Generation++
	g.Expect(f.c.Update(context.Background(), oc)).To(Succeed())
	_, err = f.reconcile(t)
	g.Expect(err).To(MatchError(ovirt.ErrUnreachable))
}
