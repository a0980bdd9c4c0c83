package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// Every reconcile of an OVirtCluster reads all the machines of its cluster: the events of a
// scale-up (each machine created, then its VM) must not reconcile it once per event.
func TestTheMachineEventsOfAScaleUpReconcileTheClusterOnce(t *testing.T) {
	g := NewWithT(t)
	f := newClusterFixture(t, nil, 0)
	clock := clocktesting.NewFakeClock(f.now)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Clock: clock})
	defer q.ShutDown()
	h := f.r.settledMachineToCluster()
	ctx := context.Background()
	for i := range 50 {
		om := placementMachine(map[string]string{clusterv1.ClusterNameLabel: "prod"}, func(om *infrav1.OVirtMachine) {
			om.Name, om.Status.VMID = fmt.Sprintf("w-%d", i), ""
		})
		h.Create(ctx, event.CreateEvent{Object: om}, q)
		created := om.DeepCopy()
		om.Status.VMID = "vm-" + om.Name
		h.Update(ctx, event.UpdateEvent{ObjectOld: created, ObjectNew: om}, q)
	}
	g.Expect(q.Len()).To(BeZero(), "the cluster is reconciled once the events settle, not per event")

	clock.Step(placementSettle)
	g.Eventually(q.Len, 10*time.Second, 10*time.Millisecond).Should(Equal(1))
	req, _ := q.Get()
	g.Expect(req.NamespacedName).To(Equal(types.NamespacedName{Namespace: "team-a", Name: "prod"}))
	q.Done(req)
	g.Expect(q.Len()).To(BeZero(), "100 events, one reconcile")
}
