package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// The order of an OVirtCluster's deletion (issue "Safety, third round", defects 6 and 13).

// endpointClaim creates the control-plane endpoint's IPAddressClaim of the fixture's cluster,
// controlled by it, as claimEndpoint makes it.
func (f *clusterFixture) endpointClaim(t *testing.T) *ipamv1.IPAddressClaim {
	t.Helper()
	oc, _ := f.get(t)
	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: oc.Namespace, Name: endpointClaimName(oc),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtCluster", Name: oc.Name, UID: oc.UID,
			Controller: ptr.To(true)}}},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "vips"}}}
	NewWithT(t).Expect(f.c.Create(context.Background(), claim)).To(Succeed())
	return claim
}

// TestAClusterIsDeletedAfterItsMachinesThenGroupsThenEndpoint: defect 6. Before, the endpoint's
// claim and the affinity groups were released as soon as the OVirtCluster was deleted, while
// its control plane still answered on the address: the pool could give it to another cluster.
func TestAClusterIsDeletedAfterItsMachinesThenGroupsThenEndpoint(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newClusterFixture(t, func(oc *infrav1.OVirtCluster) {
		oc.Spec.ControlPlaneEndpointFromPool = &infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "vips"}
		oc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.0.100", Port: 6443}
	}, 1)
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	claim := f.endpointClaim(t)
	oc, _ := f.get(t)
	g.Expect(oc.Status.AffinityGroups).To(HaveLen(1))
	g.Expect(f.c.Delete(ctx, oc)).To(Succeed())

	for range 2 {
		res, err := f.reconcile(t)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	}
	oc, ok := f.get(t)
	g.Expect(ok).To(BeTrue(), "the finalizer holds while a machine of the cluster exists")
	g.Expect(f.c.Get(ctx, client.ObjectKeyFromObject(claim), &ipamv1.IPAddressClaim{})).To(Succeed(), "the endpoint's address stays claimed")
	_, ok = f.ovirt.AffinityGroupByName(prodGroup)
	g.Expect(ok).To(BeTrue(), "the group its VM sits in stays")
	g.Expect(f.ovirt.CallCount("RemoveAffinityGroup")).To(BeZero())
	ready := v1beta1conditions.Get(oc, infrav1.ClusterReadyCondition)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Message).To(ContainSubstring("waiting for 1 OVirtMachines of the cluster to be deleted (cp-a)"))

	g.Expect(f.c.Delete(ctx, &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "cp-a"}})).To(Succeed())
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	_, ok = f.get(t)
	g.Expect(ok).To(BeFalse(), "then the groups, the claim and the finalizer go")
	_, ok = f.ovirt.AffinityGroupByName(prodGroup)
	g.Expect(ok).To(BeFalse())
	g.Expect(apierrors.IsNotFound(f.c.Get(ctx, client.ObjectKeyFromObject(claim), &ipamv1.IPAddressClaim{}))).To(BeTrue())
}

// TestAClusterWhoseNamespaceItsProviderNoLongerAllowsIsStillDeleted: defect 13. Before, the
// finalizer stayed for good once the provider's allowedNamespaces shut the namespace out.
func TestAClusterWhoseNamespaceItsProviderNoLongerAllowsIsStillDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newClusterFixture(t, nil, 1)
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	f.deleteMachines(t)
	p := &infrav1.OVirtProvider{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Name: "p1"}, p)).To(Succeed())
	p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{List: []string{"team-b"}}
	g.Expect(f.c.Update(ctx, p)).To(Succeed())
	oc, _ := f.get(t)
	g.Expect(f.c.Delete(ctx, oc)).To(Succeed())
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	_, ok := f.get(t)
	g.Expect(ok).To(BeFalse(), "the deletion completes")
	g.Expect(f.events()).To(ContainSubstring("is left in oVirt"), "what it could not clean up is reported")
	_, ok = f.ovirt.AffinityGroupByName(prodGroup)
	g.Expect(ok).To(BeTrue(), "nothing is done through a provider that refuses the namespace")
}

// TestAnEngineThatKeepsRefusingTheGroupDeletionDoesNotHoldTheClusterForever: defect 6 (best
// effort: a refusal is reported, never waited on forever).
func TestAnEngineThatKeepsRefusingTheGroupDeletionDoesNotHoldTheClusterForever(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newClusterFixture(t, nil, 1)
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	f.deleteMachines(t)
	f.ovirt.RemoveAffinityGroupFunc = func(context.Context, string, string) error {
		return &ovirt.Error{Op: "RemoveAffinityGroup", Status: 409, Detail: "[Cannot remove Affinity Group. Related operation is currently in progress.]", Kinds: []error{ovirt.ErrConflict}}
	}
	oc, _ := f.get(t)
	g.Expect(f.c.Delete(ctx, oc)).To(Succeed())
	oc, _ = f.get(t)
	f.now = oc.DeletionTimestamp.Add(time.Minute)
	_, err = f.reconcile(t)
	g.Expect(err).To(HaveOccurred())
	_, ok := f.get(t)
	g.Expect(ok).To(BeTrue(), "within its patience the cluster waits for the Engine")

	f.now = oc.DeletionTimestamp.Add(groupDeletionPatience)
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	_, ok = f.get(t)
	g.Expect(ok).To(BeFalse(), "then it lets the cluster go")
	g.Expect(f.events()).To(ContainSubstring("it is left in oVirt"))
}
