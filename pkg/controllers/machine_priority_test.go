package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// TestAtAStartTheMachinesNotReadyGoBeforeTheReadyOnes: the initial list of a (re)started
// manager queues every OVirtMachine at low priority through the For watch; a machine created
// while the manager started, one whose VM is being made and one being deleted must not wait
// behind the Ready ones listed before them (with the For watch alone, the queue hands out the
// Ready machines first).
func TestAtAStartTheMachinesNotReadyGoBeforeTheReadyOnes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	q := priorityqueue.New[reconcile.Request]("ovirtmachine")
	defer q.ShutDown()

	machine := func(name, vmID string, ready, deleting bool) *infrav1.OVirtMachine {
		om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		om.Status.VMID = vmID
		if ready {
			om.Status.Initialization.Provisioned = ptr.To(true)
		}
		if deleting {
			om.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			om.Finalizers = []string{infrav1.MachineFinalizer}
		}
		return om
	}
	// In the order of the initial list (by namespace and name): the Ready machines first.
	listed := []*infrav1.OVirtMachine{
		machine("a-ready-0", "vm-0", true, false),
		machine("a-ready-1", "vm-1", true, false),
		machine("a-ready-2", "vm-2", true, false),
		machine("b-deleting", "vm-3", true, true),
		machine("c-in-flight", "vm-4", false, false),
		machine("d-new", "", false, false),
	}
	forWatch, ours := &handler.EnqueueRequestForObject{}, unfinishedFirst()
	for _, om := range listed {
		e := event.CreateEvent{Object: om, IsInInitialList: true}
		forWatch.Create(ctx, e, q)
		ours.Create(ctx, e, q)
	}
	g.Eventually(q.Len).Should(Equal(len(listed)))

	got := map[string]int{}
	var order []string
	for range listed {
		item, priority, _ := q.GetWithPriority()
		got[item.Name] = priority
		order = append(order, item.Name)
		q.Done(item)
	}
	g.Expect(got).To(Equal(map[string]int{
		"c-in-flight": inFlightPriority,
		"d-new":       0, "b-deleting": 0,
		"a-ready-0": handler.LowPriority, "a-ready-1": handler.LowPriority, "a-ready-2": handler.LowPriority,
	}))
	g.Expect(order[0]).To(Equal("c-in-flight"))
	g.Expect(order[1:3]).To(ConsistOf("d-new", "b-deleting"))

	// Events after the start are the For watch's alone (a new machine's creation has priority 0
	// there already).
	later := machine("e-later", "", false, false)
	ours.Create(ctx, event.CreateEvent{Object: later}, q)
	g.Consistently(q.Len).WithTimeout(100 * time.Millisecond).Should(BeZero())
}
