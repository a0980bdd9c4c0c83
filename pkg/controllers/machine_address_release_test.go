package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// protectAddress is the finalizer the in-cluster IPAM provider puts on the IPAddresses it
// allocates (and removes when their claim goes).
const protectAddress = "ipam.cluster.x-k8s.io/ProtectAddress"

// TestAnAddressReHeldByTheIPAMProvidersStaleWriteIsReleased is the conformance flake of
// 2026-12-06 (an IPAddress left for good, being deleted, with CAPOV's finalizer): the machine's
// deletion released its address and deleted its claim; the real in-cluster IPAM provider
// (v1.1.0, ipamutil.ClaimReconciler.reconcileDelete) then removed its own finalizer with a merge
// patch computed from its cache, which had not seen the release yet: the patch wrote the
// finalizer list back with CAPOV's in it, and the provider deleted the address. The machine was
// gone, nothing released it again, and the address never went back to its pool. Now the
// deleted machine's reconcile (its removal, or the address's deletion, wakes it) releases what
// is left held for it.
func TestAnAddressReHeldByTheIPAMProvidersStaleWriteIsReleased(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newPoolMachineFixture(t)
	api := f.c.(client.WithWatch)

	// The machine claims its address; the provider allocates it; CAPOV holds it.
	claimKey := client.ObjectKey{Namespace: "ns", Name: ipClaimName("w-1", 0, 0)}
	claim := &ipamv1.IPAddressClaim{}
	f.reconcileUntil(t, 5, func() bool { return api.Get(ctx, claimKey, claim) == nil })
	ip := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: claimKey.Name, Finalizers: []string{protectAddress}},
		Spec: ipamv1.IPAddressSpec{ClaimRef: ipamv1.IPAddressClaimReference{Name: claimKey.Name},
			PoolRef: ipamv1.IPPoolReference{APIGroup: pool.APIGroup, Kind: pool.Kind, Name: pool.Name},
			Address: "10.30.0.10", Prefix: ptr.To[int32](24), Gateway: "10.30.0.1"},
	}
	g.Expect(api.Create(ctx, ip)).To(Succeed())
	claim.Status.AddressRef.Name = ip.Name
	g.Expect(api.Update(ctx, claim)).To(Succeed()) // the fake serves no status subresource for claims
	f.reconcileUntil(t, 10, func() bool {
		held := &ipamv1.IPAddress{}
		g.Expect(api.Get(ctx, client.ObjectKeyFromObject(ip), held)).To(Succeed())
		return controllerutil.ContainsFinalizer(held, infrav1.IPAddressInUseFinalizer)
	})
	// The IPAM provider's cache, from before the release.
	stale := &ipamv1.IPAddress{}
	g.Expect(api.Get(ctx, client.ObjectKeyFromObject(ip), stale)).To(Succeed())

	// The machine is deleted. When CAPOV deletes the claim, the provider releases the address
	// from its stale copy, as reconcileDelete does, and deletes it.
	providerWrote := false
	f.r.Client = interceptor.NewClient(api, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := c.Delete(ctx, obj, opts...); err != nil {
				return err
			}
			if _, ok := obj.(*ipamv1.IPAddressClaim); ok {
				address := stale.DeepCopy()
				p := client.MergeFrom(address.DeepCopy())
				controllerutil.RemoveFinalizer(address, protectAddress)
				g.Expect(c.Patch(ctx, address, p)).To(Succeed())
				g.Expect(c.Delete(ctx, address)).To(Succeed())
				providerWrote = true
			}
			return nil
		},
	})
	g.Expect(api.Delete(ctx, f.get(t))).To(Succeed())
	gone := func() bool {
		return apierrors.IsNotFound(api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w-1"}, &infrav1.OVirtMachine{}))
	}
	f.reconcileUntil(t, 20, gone)
	g.Expect(providerWrote).To(BeTrue(), "the claim was deleted and the provider released the address")

	// What wakes the deleted machine's reconcile: the address's deletion (the watch below) or
	// the machine's removal.
	left := &ipamv1.IPAddress{}
	if err := api.Get(ctx, client.ObjectKeyFromObject(ip), left); err == nil {
		g.Expect(heldAddressToMachine(ctx, left)).To(ConsistOf(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "w-1"}}))
	}
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	err = api.Get(ctx, client.ObjectKeyFromObject(ip), left)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the address goes back to its pool once its machine is gone (err %v, finalizers %v)", err, left.Finalizers)
}

// TestOnlyAnAddressLeftHeldForAMachineWakesIt: the IPAddress watch maps to its machine only an
// address that is being deleted with CAPOV's finalizer on it.
func TestOnlyAnAddressLeftHeldForAMachineWakesIt(t *testing.T) {
	g := NewWithT(t)
	now := metav1.NewTime(time.Now())
	address := func(mutate func(*ipamv1.IPAddress)) *ipamv1.IPAddress {
		ip := &ipamv1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-1-0-0", DeletionTimestamp: &now,
				Finalizers: []string{infrav1.IPAddressInUseFinalizer},
				Labels:     map[string]string{infrav1.IPAddressClaimMachineLabel: "w-1"}},
			Spec: ipamv1.IPAddressSpec{ClaimRef: ipamv1.IPAddressClaimReference{Name: "w-1-0-0"}},
		}
		mutate(ip)
		return ip
	}
	want := []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "w-1"}}}
	g.Expect(heldAddressToMachine(context.Background(), address(func(*ipamv1.IPAddress) {}))).To(Equal(want))
	g.Expect(heldAddressToMachine(context.Background(), address(func(ip *ipamv1.IPAddress) {
		ip.Spec.ClaimRef.Name = "w-1-2-1"
		ip.Name = "other"
	}))).To(Equal(want), "the machine is named by the claim")
	for what, mutate := range map[string]func(*ipamv1.IPAddress){
		"not being deleted":       func(ip *ipamv1.IPAddress) { ip.DeletionTimestamp = nil },
		"not held":                func(ip *ipamv1.IPAddress) { ip.Finalizers = []string{protectAddress} },
		"no machine label":        func(ip *ipamv1.IPAddress) { ip.Labels = nil },
		"another machine's":       func(ip *ipamv1.IPAddress) { ip.Labels[infrav1.IPAddressClaimMachineLabel] = "w-2" },
		"a claim of another name": func(ip *ipamv1.IPAddress) { ip.Spec.ClaimRef.Name = "w-1" },
	} {
		g.Expect(heldAddressToMachine(context.Background(), address(mutate))).To(BeEmpty(), what)
	}
}

// TestAnEndpointAddressLeftHeldForADeletedClusterIsReleased: the same stale write after an
// OVirtCluster's deletion leaves its control-plane endpoint's address held; the deleted
// cluster's reconcile, which the address's deletion wakes, releases it.
func TestAnEndpointAddressLeftHeldForADeletedClusterIsReleased(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newClusterFixture(t, nil, 0)
	held := func(name, cluster string) *ipamv1.IPAddress {
		return &ipamv1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Finalizers: []string{infrav1.IPAddressInUseFinalizer},
				Labels: map[string]string{infrav1.IPAddressClaimEndpointLabel: cluster}},
			Spec: ipamv1.IPAddressSpec{ClaimRef: ipamv1.IPAddressClaimReference{Name: name},
				PoolRef: ipamv1.IPPoolReference{APIGroup: pool.APIGroup, Kind: pool.Kind, Name: pool.Name}, Address: "10.30.0.5"},
		}
	}
	left := held("gone-control-plane-endpoint", "gone")
	other := held("prod-control-plane-endpoint", "prod") // its cluster exists: its own to release
	for _, ip := range []*ipamv1.IPAddress{left, other} {
		g.Expect(f.c.Create(ctx, ip)).To(Succeed())
		g.Expect(f.c.Delete(ctx, ip)).To(Succeed())
		g.Expect(f.c.Get(ctx, client.ObjectKeyFromObject(ip), ip)).To(Succeed())
		g.Expect(ip.DeletionTimestamp).NotTo(BeNil())
	}
	g.Expect(heldAddressToCluster(ctx, left)).To(ConsistOf(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "gone"}}))
	_, err := f.r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "gone"}})
	g.Expect(err).NotTo(HaveOccurred())
	err = f.c.Get(ctx, client.ObjectKeyFromObject(left), &ipamv1.IPAddress{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "released once its cluster is gone (err %v)", err)
	g.Expect(f.c.Get(ctx, client.ObjectKeyFromObject(other), &ipamv1.IPAddress{})).To(Succeed(), "another cluster's address is left to it")
}
