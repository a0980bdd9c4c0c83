package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

func testKey(b byte) []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = b
	}
	return k
}

// signed is the marker CAPOV writes for om on the VM named vm, signed with key.
func signed(om *infrav1.OVirtMachine, mc, cluster, vm string, key []byte) string {
	o := ownerFor(om, mc, cluster, vm)
	o.proof = o.sign(key)
	return o.String()
}

func keySecret(ns, cluster string, key []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ownershipKeyName(cluster)},
		Data: map[string][]byte{ownershipKeyField: key}}
}

func TestAnOwnershipProofVerifiesOnlyUnderItsClustersKeyForItsVM(t *testing.T) {
	g := NewWithT(t)
	om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "w-1", UID: "uid-1"},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: "p1"}}}
	key := testKey(1)
	m := signed(om, "mc-1", "c1", "w-1", key)
	g.Expect(m).To(MatchRegexp(`^capov ovirtmachine=team-a/w-1 uid=uid-1 management-cluster=mc-1 provider=p1 cluster=c1 vm=w-1 proof=[A-Za-z0-9_-]{22}$`))

	o, ok := parseOwnerMarker("kept before " + m + " kept after")
	g.Expect(ok).To(BeTrue())
	g.Expect(o.verifies(key)).To(BeTrue())
	g.Expect(o.verifies(testKey(2))).To(BeFalse(), "another cluster's key")
	g.Expect(o.verifies(nil)).To(BeFalse(), "no key")
	for field, edit := range map[string]func(*vmOwner){
		"namespace": func(o *vmOwner) { o.namespace = "team-b" }, "name": func(o *vmOwner) { o.name = "w-2" },
		"uid": func(o *vmOwner) { o.uid = "uid-2" }, "management cluster": func(o *vmOwner) { o.cluster = "mc-2" },
		"provider": func(o *vmOwner) { o.provider = "p2" }, "cluster": func(o *vmOwner) { o.workloadCluster = "c2" },
		"vm": func(o *vmOwner) { o.vm = "db-0" },
	} {
		changed := o
		edit(&changed)
		back, ok := parseOwnerMarker(changed.String())
		g.Expect(ok).To(BeTrue())
		g.Expect(back.verifies(key)).To(BeFalse(), "an edited %s", field)
	}
	// The marker is replaced in place, the text around it kept; a marker of the earlier form too.
	g.Expect(withMarker("x "+ownerMarker(om, "")+" y", m)).To(Equal("x " + m + " y"))
	g.Expect(withMarker("x "+m+" y", ownerMarker(om, "mc-1"))).To(Equal("x " + ownerMarker(om, "mc-1") + " y"))
	g.Expect(withMarker("hand-made", m)).To(Equal(m))
	_, ok = parseOwnerMarker(m + " proof=again")
	g.Expect(ok).To(BeFalse(), "a field twice proves nothing")
}

// reconcileToTheNode reconciles a machine whose VM is up: the fixture has no workload cluster, so
// the reconcile ends at the Node step, after everything done in oVirt.
func (f *machineFixture) reconcileToTheNode(t *testing.T) {
	t.Helper()
	if _, err := f.reconcile(t); err != nil {
		NewWithT(t).Expect(err.Error()).To(ContainSubstring("no workload cluster access configured"))
	}
}

// victimVM puts a Ready VM into the fixture's Engine that another management cluster's object of
// the same namespace/name created and signed with victimKey.
func victimVM(f *machineFixture, victimKey []byte) ovirt.VM {
	victim := f.om.DeepCopy()
	victim.UID = "victim-uid"
	return f.ov.PutVM(ovirt.VM{ID: "71c71000-0000-4000-8000-000000000002", Name: "w-1", Status: ovirt.VMStatusUp,
		Comment: signed(victim, "mc-victim", "c1", "w-1", victimKey), Disks: []ovirt.Disk{{ID: "d1", Bootable: true}}})
}

// TestAnObjectOfAnotherManagementClusterCannotTakeOverAVM: a tenant of another management cluster
// on the same Engine creates an OVirtMachine with the victim's namespace/name and
// spec.providerID, then deletes it. Before, the marker matched by namespace/name: CAPOV rewrote it
// to the tenant's object and removed the VM with its disks. Now the marker's proof must verify
// under the key of the tenant's Cluster, which it does not: nothing is written to the VM.
func TestAnObjectOfAnotherManagementClusterCannotTakeOverAVM(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	f.r.ManagementClusterID = "mc-tenant"
	vm := victimVM(f, testKey(7))
	// The tenant's Cluster has a key of its own (it created machines before).
	g.Expect(f.c.Create(ctx, keySecret("ns", "c1", testKey(9)))).To(Succeed())
	stored := f.get(t)
	stored.Spec.ProviderID = infrav1.ProviderIDPrefix + vm.ID
	g.Expect(f.c.Update(ctx, stored)).To(Succeed())
	for i := 0; i < 3; i++ {
		res, err := f.reconcile(t)
		g.Expect(err).NotTo(HaveOccurred())
		f.now = f.now.Add(max(res.RequeueAfter, 10*time.Minute))
	}
	om := f.get(t)
	g.Expect(v1beta1conditions.GetReason(om, infrav1.MachineCreatedCondition)).To(Equal(infrav1.VMNotOwnedReason))
	g.Expect(v1beta1conditions.GetMessage(om, infrav1.MachineCreatedCondition)).To(ContainSubstring("does not verify"))

	g.Expect(f.c.Delete(ctx, om)).To(Succeed())
	for i := 0; i < 3; i++ {
		res, err := f.reconcile(t)
		g.Expect(err).NotTo(HaveOccurred())
		f.now = f.now.Add(max(res.RequeueAfter, 10*time.Minute))
	}
	g.Expect(f.ov.CallCount("UpdateVM")).To(BeZero(), "the victim's marker is never rewritten")
	g.Expect(f.ov.CallCount("Power")).To(BeZero())
	g.Expect(f.ov.CallCount("RunOnce")).To(BeZero())
	g.Expect(f.ov.CallCount("RemoveVM")).To(BeZero())
	got, _ := f.ov.VM(vm.ID)
	g.Expect(got.Status).To(Equal(ovirt.VMStatusUp))
	g.Expect(got.Comment).To(ContainSubstring("uid=victim-uid"))
	om = f.get(t)
	g.Expect(om.Finalizers).To(ContainElement(infrav1.MachineFinalizer), "a human decides")
	g.Expect(v1beta1conditions.GetReason(om, infrav1.MachineDeletedCondition)).To(Equal(infrav1.VMNotOwnedReason))
}

// TestAMovedMachineAdoptsItsVMWithTheKeyThatMovedWithIt: after clusterctl move the object has
// another UID and another management cluster; the Cluster's key Secret moved with it, so the
// marker's proof verifies and the marker is rewritten to this object, signed again.
func TestAMovedMachineAdoptsItsVMWithTheKeyThatMovedWithIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	f.r.ManagementClusterID = "mc-target"
	key := testKey(7)
	vm := victimVM(f, key)
	g.Expect(f.c.Create(ctx, keySecret("ns", "c1", key))).To(Succeed())
	stored := f.get(t)
	stored.Spec.ProviderID = infrav1.ProviderIDPrefix + vm.ID
	g.Expect(f.c.Update(ctx, stored)).To(Succeed())
	f.reconcileToTheNode(t)

	got, _ := f.ov.VM(vm.ID)
	o, ok := parseOwnerMarker(got.Comment)
	g.Expect(ok).To(BeTrue())
	g.Expect(o.uid).To(Equal("om-uid"))
	g.Expect(o.cluster).To(Equal("mc-target"))
	g.Expect(o.verifies(key)).To(BeTrue(), "signed again with the cluster's key")
	g.Expect(strings.Join(f.events(), "\n")).To(ContainSubstring(eventOwnerMarkerUpdated))
	g.Expect(f.get(t).Status.VMID).To(Equal(vm.ID))
}

// TestAMarkerWrittenBeforeTheProofIsSignedOnce: the VM of this very object carries the marker of
// an earlier release (no proof): it is rewritten once, with the proof under the Cluster's key,
// which CAPOV creates (owned by the Cluster) when the Cluster has none.
func TestAMarkerWrittenBeforeTheProofIsSignedOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	vm := f.ov.PutVM(ovirt.VM{ID: "0e1d0000-0000-4000-8000-000000000001", Name: "w-1", Status: ovirt.VMStatusUp,
		Comment: "team notes " + ownerMarker(f.om, ""), Disks: []ovirt.Disk{{ID: "d1", Bootable: true}}})
	stored := f.get(t)
	stored.Spec.ProviderID = infrav1.ProviderIDPrefix + vm.ID
	g.Expect(f.c.Update(ctx, stored)).To(Succeed())
	for i := 0; i < 4; i++ {
		f.reconcileToTheNode(t)
		f.now = f.now.Add(11 * time.Minute)
	}
	g.Expect(f.ov.CallCount("UpdateVM")).To(Equal(1), "signed once")
	secret := &corev1.Secret{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "c1" + OwnershipKeySecretSuffix}, secret)).To(Succeed())
	g.Expect(secret.OwnerReferences).To(ConsistOf(HaveField("UID", BeEquivalentTo("cluster-uid"))), "deleted with its Cluster, moved with it")
	g.Expect(secret.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "c1"))
	got, _ := f.ov.VM(vm.ID)
	g.Expect(got.Comment).To(HavePrefix("team notes capov ovirtmachine=ns/w-1 uid=om-uid"))
	o, _ := parseOwnerMarker(got.Comment)
	g.Expect(o.verifies(secret.Data[ownershipKeyField])).To(BeTrue())
	g.Expect(markerCurrent(&got, f.get(t), "", "c1")).To(BeTrue())
}

// TestANewVMIsSignedFromItsCreation: the create request carries the signed marker (no extra
// Engine call), and the key exists before it.
func TestANewVMIsSignedFromItsCreation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	var comment string
	f.ov.CreateVMFunc = func(ctx context.Context, spec ovirt.VMSpec) (*ovirt.VM, error) {
		f.ov.CreateVMFunc = nil
		comment = spec.Comment
		return f.ov.CreateVM(ctx, spec)
	}
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(comment).NotTo(BeEmpty())
	secret := &corev1.Secret{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "c1" + OwnershipKeySecretSuffix}, secret)).To(Succeed())
	o, ok := parseOwnerMarker(comment)
	g.Expect(ok).To(BeTrue())
	g.Expect([]string{o.provider, o.workloadCluster, o.vm}).To(Equal([]string{"p1", "c1", "w-1"}))
	g.Expect(o.verifies(secret.Data[ownershipKeyField])).To(BeTrue())
	g.Expect(f.ov.CallCount("UpdateVM")).To(BeZero())
}

// ownerMarker is the marker of om as CAPOV wrote it before the ownership proof existed (the
// tests' stand-in for VMs created by an earlier release). CAPOV now writes ownerFor(...) with
// its proof; a VM of its own object that carries this form is rewritten once.
func ownerMarker(om *infrav1.OVirtMachine, mc string) string {
	return vmOwner{namespace: om.Namespace, name: om.Name, uid: string(om.UID), cluster: mc}.String()
}

// withOwnerMarker returns comment with its owner marker replaced by om's marker in the form
// written before the ownership proof (tests).
func withOwnerMarker(comment string, om *infrav1.OVirtMachine, mc string) string {
	return withMarker(comment, ownerMarker(om, mc))
}
