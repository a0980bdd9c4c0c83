package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// TestTheFinalizerStaysWhenTheClusterWasPausedDuringTheDeletion: the reconcile read the Cluster
// unpaused from the cache, and by the time the VM is known gone the Cluster is paused (the chaos
// scenario cluster-paused-mid-delete, under load). Dropping the finalizer then hands Cluster API's
// paused Machine controller its only event, which the unpause never repeats: the Cluster's
// deletion waited for a resync. The finalizer stays until the Cluster is unpaused.
func TestTheFinalizerStaysWhenTheClusterWasPausedDuringTheDeletion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	// The API server's Cluster is paused; the cache has not seen it yet.
	f.r.APIReader = interceptor.NewClient(f.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if cl, ok := obj.(*clusterv1.Cluster); ok {
				cl.Spec.Paused = ptr.To(true)
			}
			return nil
		},
	})
	g.Expect(f.c.Delete(ctx, f.get(t))).To(Succeed())
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.get(t).Finalizers).To(ContainElement(infrav1.MachineFinalizer), "paused: the finalizer stays")

	// Unpaused: the next reconcile drops it.
	f.r.APIReader = f.c
	_, err = f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	err = f.c.Get(ctx, client.ObjectKeyFromObject(f.om), &infrav1.OVirtMachine{})
	g.Expect(err).To(HaveOccurred(), "the OVirtMachine is gone once its finalizer is dropped")
}
