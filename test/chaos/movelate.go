package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// moveLateGrace is the orphan grace period the source manager runs with in
// runMoveTargetLate (--test-orphaned-vms-grace-period), and moveLateWait how long the target
// stays frozen: several inventories past the grace period.
const (
	moveLateGrace = 2 * time.Second
	moveLateWait  = 15 * time.Second
)

// runMoveTargetLate moves a cluster with clusterctl while the source's OVirtProvider has
// spec.orphanedVMs: Delete, and the target's manager is frozen (SIGSTOP) for longer than the
// source's grace period, so that nothing adopts the moved VMs: to the source they are VMs of
// this management cluster whose OVirtMachines are gone, one of them down. The source must
// remove none (their Cluster left with the move); once the target's manager resumes it adopts
// them all, and its deletion removes them (issue 32, defect 1).
func runMoveTargetLate(ctx context.Context, r *Run) error {
	if err := r.NewDHCPCluster(ctx); err != nil {
		return err
	}
	w := r.W
	ns := r.Namespace()
	restore, err := removeOrphansSoon(ctx, r)
	defer restore()
	if err != nil {
		return err
	}
	mv, err := beginMove(ctx, r, false)
	if mv == nil {
		return err
	}
	defer mv.done()
	before, target, from, to := mv.before, mv.target, mv.from, mv.to

	// The target's manager is down (frozen) through the move and past the grace period.
	if err := Signal(target.Manager, syscall.SIGSTOP); err != nil {
		return err
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = Signal(target.Manager, syscall.SIGCONT)
		}
	}()
	moved := time.Now()
	if err := from.ObjectMover().Move(ctx, ns, to, false); err != nil {
		return fmt.Errorf("clusterctl move: %w", err)
	}
	r.Note("clusterctl move of %d machines took %s, the target's manager frozen", len(before), time.Since(moved).Round(100*time.Millisecond))
	// One of the moved VMs goes down: an orphan down for the whole grace period is what Delete
	// removes.
	if err := powerOffOne(ctx, r, before); err != nil {
		return err
	}
	sleep(ctx, moveLateWait)

	for _, wr := range w.Watcher.Writes(moved) {
		if _, ok := before[wr.VMID]; ok && wr.Method == "DELETE" {
			r.Violate("move-late|"+wr.VMID, I2, fmt.Sprintf("while the target of clusterctl move was late, %s %s removed moved VM %s (%s)",
				wr.Method, wr.Template, wr.VMID, before[wr.VMID]), "VM "+wr.VMID)
		}
	}
	for id, name := range before {
		if _, ok := w.Sim.VM(id); !ok {
			r.Violate("move-late-lost|"+id, "clusterctl move keeps every VM", fmt.Sprintf("VM %s (%s) was removed while the target was late", id, name), "VM "+id)
		}
	}
	p := &infrav1.OVirtProvider{}
	if err := w.C.Get(ctx, client.ObjectKey{Name: ProviderName}, p); err == nil {
		msg := conditions.GetMessage(p, infrav1.OrphanedVMsCondition)
		if strings.Contains(msg, "not in this management cluster") {
			r.Note("the source reports the moved VMs as orphans it never removes: their Cluster is not in this management cluster")
		} else {
			r.Note("the source's OrphanedVMs condition: %s", conditions.GetReason(p, infrav1.OrphanedVMsCondition))
		}
	}

	// The target's manager resumes: it adopts every VM, and its deletion removes them.
	if err := Signal(target.Manager, syscall.SIGCONT); err != nil {
		return err
	}
	resumed = true
	tc := &Cluster{NS: ns, Name: r.Cluster.Name, MD: r.Cluster.MD, C: target.Env.Client, w: w}
	if err := poll(ctx, w.Cfg.Bound, 250*time.Millisecond, func() (bool, error) {
		ready, err := tc.ReadyMachines(ctx)
		return err == nil && len(ready) == len(before), err
	}); err != nil {
		r.Violate("move-late-target", Converge, fmt.Sprintf("the target did not bring the %d moved machines to Ready within %s once its manager resumed: %v",
			len(before), w.Cfg.Bound, err), "namespace "+ns)
	} else {
		r.Note("the target adopted all %d VMs once its manager resumed", len(before))
	}
	clean, err := tc.Delete(ctx, w.Cfg.Bound)
	r.res.Clean = clean
	w.Watcher.ScanLogs()
	w.Watcher.ScanEventsAndMetrics(ctx)
	return err
}

// removeOrphansSoon makes the source remove orphans: its manager with an inventory every second
// and a grace period of moveLateGrace, its OVirtProvider with spec.orphanedVMs: Delete. restore
// (never nil) puts both back.
func removeOrphansSoon(ctx context.Context, r *Run) (restore func(), _ error) {
	w := r.W
	var undo []func()
	restore = func() {
		for _, f := range slices.Backward(undo) {
			f()
		}
	}
	if err := w.ReplaceManager(ctx, "--inventory-interval=1s", "--test-orphaned-vms-grace-period="+moveLateGrace.String()); err != nil {
		return restore, err
	}
	undo = append(undo, func() {
		if err := w.ReplaceManager(context.WithoutCancel(ctx)); err != nil {
			r.Note("restoring the manager's flags: %v", err)
		}
	})
	if err := setOrphanPolicy(ctx, w, infrav1.OrphanedVMsDelete); err != nil {
		return restore, err
	}
	undo = append(undo, func() {
		if err := setOrphanPolicy(context.WithoutCancel(ctx), w, infrav1.OrphanedVMsReport); err != nil {
			r.Note("restoring the provider's orphan policy: %v", err)
		}
	})
	return restore, nil
}

// powerOffOne powers off the first of the moved VMs (by id) out of band: an orphan down for the
// whole grace period is what Delete removes.
func powerOffOne(ctx context.Context, r *Run, before map[string]string) error {
	oob, closeOOB, err := r.W.OutOfBand(ctx)
	if err != nil {
		return err
	}
	defer closeOOB()
	ids := slices.Sorted(maps.Keys(before))
	if err := oob.Power(ctx, ids[0], ovirt.PowerStop); err != nil {
		r.Note("powering off %s (%s) out of band: %v", ids[0], before[ids[0]], err)
	} else {
		r.Note("VM %s (%s) powered off out of band", ids[0], before[ids[0]])
	}
	return nil
}

// setOrphanPolicy sets the suite's OVirtProvider's spec.orphanedVMs (with the minimum grace
// period admission allows; the manager's --test-orphaned-vms-grace-period replaces it).
func setOrphanPolicy(ctx context.Context, w *World, policy infrav1.OrphanedVMsPolicy) error {
	p := &infrav1.OVirtProvider{}
	if err := w.C.Get(ctx, client.ObjectKey{Name: ProviderName}, p); err != nil {
		return err
	}
	base := p.DeepCopy()
	p.Spec.OrphanedVMs = policy
	p.Spec.OrphanedVMsGracePeriod = &metav1.Duration{Duration: infrav1.MinOrphanedVMsGracePeriod}
	if policy == infrav1.OrphanedVMsReport {
		p.Spec.OrphanedVMsGracePeriod = base.Spec.OrphanedVMsGracePeriod
	}
	return w.C.Patch(ctx, p, client.MergeFrom(base))
}
