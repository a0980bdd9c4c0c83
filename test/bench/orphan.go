package bench

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// measureOrphan makes the VM of one Ready machine an orphan and times its detection: the
// OVirtMachine is paused (so that the manager neither re-adds its finalizer nor deletes the VM),
// its finalizer removed and the object deleted, as a restore or a hand-edited finalizer would
// leave it. It returns the time from the object being gone until the provider's
// status.inventory.orphanedVMs counts the VM, then removes the VM in the simulator.
func (r *Runner) measureOrphan(ctx context.Context, ns, name string, interval time.Duration) (_ time.Duration, reterr error) {
	c := r.Stack.MgmtClient()
	wait := 3*interval + 30*time.Second
	// Start from a report without orphans (a previous scenario's would count at once).
	if err := waitOrphans(ctx, c, func(n int32) bool { return n == 0 }, wait); err != nil {
		return 0, err
	}
	key := client.ObjectKey{Namespace: ns, Name: name}
	om := &infrav1.OVirtMachine{}
	if err := c.Get(ctx, key, om); err != nil {
		return 0, err
	}
	vmID := om.Status.VMID
	base := om.DeepCopy()
	if om.Annotations == nil {
		om.Annotations = map[string]string{}
	}
	om.Annotations[clusterv1.PausedAnnotation] = "true"
	if err := c.Patch(ctx, om, client.MergeFrom(base)); err != nil {
		return 0, fmt.Errorf("pausing %s: %w", key, err)
	}
	if err := poll(ctx, 30*time.Second, func() (bool, error) {
		if err := c.Get(ctx, key, om); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(om.Status.Conditions, clusterv1.PausedCondition), nil
	}); err != nil {
		return 0, fmt.Errorf("waiting for the manager to see %s paused: %w", key, err)
	}
	base = om.DeepCopy()
	om.Finalizers = nil
	if err := c.Patch(ctx, om, client.MergeFrom(base)); err != nil {
		return 0, fmt.Errorf("removing the finalizer of %s: %w", key, err)
	}
	if err := c.Delete(ctx, om); client.IgnoreNotFound(err) != nil {
		return 0, err
	}
	defer func() {
		// The VM leaves too, detected or not, so that the deletion phase and the next scenario
		// find none.
		if err := r.Stack.Sim.DeleteVM(vmID); err != nil && reterr == nil {
			reterr = fmt.Errorf("removing the orphaned VM %s: %w", vmID, err)
		}
	}()
	if err := poll(ctx, 30*time.Second, func() (bool, error) {
		err := c.Get(ctx, key, &infrav1.OVirtMachine{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return 0, err
	}
	gone := time.Now()
	if err := waitOrphans(ctx, c, func(n int32) bool { return n >= 1 }, wait); err != nil {
		return 0, fmt.Errorf("the orphan was not reported: %w", err)
	}
	return time.Since(gone), nil
}

// waitOrphans waits until the bench provider's status.inventory.orphanedVMs satisfies ok.
func waitOrphans(ctx context.Context, c client.Client, ok func(int32) bool, timeout time.Duration) error {
	p := &infrav1.OVirtProvider{}
	err := poll(ctx, timeout, func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: benchProvider}, p); err != nil {
			return false, err
		}
		return p.Status.Inventory != nil && ok(ptr.Deref(p.Status.Inventory.OrphanedVMs, 0)), nil
	})
	if err != nil {
		now := "none"
		if inv := p.Status.Inventory; inv != nil {
			now = fmt.Sprintf("%d orphaned VMs of %d at %s", ptr.Deref(inv.OrphanedVMs, 0), ptr.Deref(inv.VMs, 0), inv.LastTime)
		}
		return fmt.Errorf("waiting for the provider's status.inventory (now %s): %w", now, err)
	}
	return nil
}

// poll calls done every 100 ms until it reports true, fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
