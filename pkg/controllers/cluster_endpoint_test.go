package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// TestAnEndpointClaimTheCacheHasNotSeenIsReleasedWithTheCluster: the OVirtCluster is deleted
// before the manager's cache has seen the IPAddressClaim of its control-plane endpoint. Before,
// the release read the claim from the cache, found none and dropped the finalizer, leaving the
// claim and its address; now it reads the API server.
func TestAnEndpointClaimTheCacheHasNotSeenIsReleasedWithTheCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newClusterFixture(t, func(oc *infrav1.OVirtCluster) {
		oc.Spec.ControlPlaneEndpointFromPool = &infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "GlobalInClusterIPPool", Name: "vips"}
	}, 0)
	api := f.c.(client.WithWatch)
	f.r.Client = claimsUnseen(api)
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	oc, _ := f.get(t)
	claim := &ipamv1.IPAddressClaim{}
	g.Expect(api.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: endpointClaimName(oc)}, claim)).To(Succeed())

	g.Expect(api.Delete(ctx, oc)).To(Succeed())
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	_, exists := f.get(t)
	g.Expect(exists).To(BeFalse(), "the OVirtCluster is gone")
	err = api.Get(ctx, client.ObjectKeyFromObject(claim), claim)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the endpoint's claim is deleted before the finalizer drops (err %v)", err)
}
