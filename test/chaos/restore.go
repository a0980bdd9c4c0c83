package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// A restore keeps what a backup holds (spec, labels, annotations) and loses the status, and an
// IPAddressClaim that was not in the backup (or not restored) is gone.
const restoredInvariant = "a restored static-IP machine keeps its VM's network"

// runRestoreStaticIP restores a running static-IP Ignition worker the way a backup restore
// leaves it: with the Cluster paused (as restore guides ask), its OVirtMachine's status lost
// and its IPAddressClaim gone, then the Cluster unpaused. The VM has run with its address and
// its Ignition config: CAPOV must not write the configuration again (it carries the join
// secrets), change its NICs or claim another address for it, and the address must not be given
// to another machine (issue 32, defect 8).
func runRestoreStaticIP(ctx context.Context, r *Run) error {
	if err := r.NewCluster(ctx); err != nil {
		return err
	}
	w := r.W
	ns := r.Namespace()
	r.Start = time.Now()
	for range 2 {
		if err := r.Driver.scaleBy(ctx, 1); err != nil {
			return err
		}
	}
	var victim infrav1.OVirtMachine
	if err := poll(ctx, w.Cfg.Bound, 250*time.Millisecond, func() (bool, error) {
		ready, err := r.Cluster.ReadyMachines(ctx)
		if err != nil {
			return false, err
		}
		for _, om := range ready {
			if len(om.Spec.NICs) > 0 && len(om.Spec.NICs[0].AddressesFromPools) > 0 && len(om.Status.Addresses) > 0 &&
				strings.HasPrefix(om.Status.Addresses[0].Address, "10.50.0.") {
				victim = om
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		r.Violate("restore-ready", Converge, fmt.Sprintf("no Ready static-IP worker before the restore: %v", err), "namespace "+ns)
		return r.Finish(ctx)
	}
	address, vmID := victim.Status.Addresses[0].Address, victim.Status.VMID
	vm, _ := w.Sim.VM(vmID)
	nics := len(vm.NICs)
	r.Note("restoring %s (VM %s, address %s, %d NICs) without its status and its claim", victim.Name, vmID, address, nics)

	if err := r.Cluster.SetPaused(ctx, true); err != nil {
		return err
	}
	// Let the manager see the pause before the restore changes the objects.
	sleep(ctx, 2*time.Second)
	restored := time.Now()
	cur := &infrav1.OVirtMachine{}
	if err := w.C.Get(ctx, client.ObjectKeyFromObject(&victim), cur); err != nil {
		return err
	}
	cur.Status = infrav1.OVirtMachineStatus{}
	if err := w.C.Status().Update(ctx, cur); err != nil {
		return fmt.Errorf("dropping the status of %s: %w", victim.Name, err)
	}
	claims := &ipamv1.IPAddressClaimList{}
	if err := w.C.List(ctx, claims, client.InNamespace(ns), client.MatchingLabels{infrav1.IPAddressClaimMachineLabel: victim.Name}); err != nil {
		return err
	}
	for i := range claims.Items {
		if err := w.C.Delete(ctx, &claims.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if err := r.Cluster.SetPaused(ctx, false); err != nil {
		return err
	}

	// The machine is Ready again with its status rebuilt from the VM.
	if err := poll(ctx, w.Cfg.Bound, 250*time.Millisecond, func() (bool, error) {
		om := &infrav1.OVirtMachine{}
		if err := w.C.Get(ctx, client.ObjectKeyFromObject(&victim), om); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return om.Status.VMID == vmID && len(om.Status.Addresses) > 0, nil
	}); err != nil {
		r.Violate("restore-status", restoredInvariant, fmt.Sprintf("%s did not find its VM %s again within %s of the restore: %v", victim.Name, vmID, w.Cfg.Bound, err),
			"OVirtMachine "+ns+"/"+victim.Name)
	}
	// Another worker, created after the restore, must not get the restored machine's address.
	if err := r.Driver.scaleBy(ctx, 1); err != nil {
		return err
	}
	if _, err := r.Driver.WaitConverged(ctx, w.Cfg.Bound); err != nil {
		r.Violate("converge", Converge, fmt.Sprintf("not converged after the restore: %v", err), "namespace "+ns)
	}

	// The one write a restored machine may make to its VM is PUT /vms/{id} clearing the
	// bootstrap data (its record of having cleared it was in the lost status); the network
	// configuration is the same request with the Ignition config and its secrets, told apart
	// by the machine's events and by what the VM holds afterwards.
	var wrote []string
	for _, wr := range w.Watcher.Writes(restored) {
		if wr.VMID == vmID && wr.Method+" "+wr.Template != "PUT /vms/{id}" {
			wrote = append(wrote, wr.Method+" "+wr.Template)
		}
	}
	if len(wrote) > 0 {
		r.Violate("restore-writes", restoredInvariant, fmt.Sprintf("after the restore CAPOV changed the running VM %s of %s: %s (its NICs, power and disks must be left as they are)",
			vmID, victim.Name, strings.Join(wrote, ", ")), "VM "+vmID, "OVirtMachine "+ns+"/"+victim.Name)
	}
	if at, ok := lastEvent(ctx, w.C, ns, victim.Name, "NetworkConfigured"); ok && at.After(restored) {
		r.Violate("restore-network", restoredInvariant, fmt.Sprintf("after the restore CAPOV gave the running VM %s of %s its network configuration again (event NetworkConfigured at %s): "+
			"the Ignition config, with its secrets, went back into the Engine", vmID, victim.Name, at.UTC().Format(time.RFC3339Nano)), "VM "+vmID, "OVirtMachine "+ns+"/"+victim.Name)
	}
	vm, ok := w.Sim.VM(vmID)
	switch {
	case !ok || len(vm.NICs) != nics || vm.Status != "up":
		r.Violate("restore-vm", restoredInvariant, fmt.Sprintf("the restored machine's VM %s changed: exists %t, %d NICs (had %d), status %q", vmID, ok, len(vm.NICs), nics, vm.Status),
			"VM "+vmID)
	case strings.Contains(vm.CustomScript, w.BootstrapSentinel):
		r.Violate("restore-secret", restoredInvariant, fmt.Sprintf("after the restore the VM %s of %s holds its bootstrap data in the Engine again", vmID, victim.Name), "VM "+vmID)
	}
	oms, err := r.Cluster.OVirtMachines(ctx)
	if err != nil {
		return err
	}
	for _, om := range oms {
		has := slices.ContainsFunc(om.Status.Addresses, func(a clusterv1.MachineAddress) bool { return a.Address == address })
		switch {
		case om.Name == victim.Name && !has:
			r.Violate("restore-address", restoredInvariant, fmt.Sprintf("%s lost its address %s after the restore: addresses %v", om.Name, address, om.Status.Addresses),
				"OVirtMachine "+ns+"/"+om.Name)
		case om.Name != victim.Name && has:
			r.Violate("restore-conflict", restoredInvariant, fmt.Sprintf("%s got %s, the address of the restored machine %s, whose VM still runs with it", om.Name, address, victim.Name),
				"OVirtMachine "+ns+"/"+om.Name, "OVirtMachine "+ns+"/"+victim.Name)
		}
	}
	r.Note("after the restore: no NIC, power or disk write to the restored VM, no network configuration, its address %s kept by it alone", address)
	r.Healed = time.Now()
	return r.Finish(ctx)
}

// lastEvent returns when the last event of reason about the named object of ns happened.
func lastEvent(ctx context.Context, c client.Client, ns, name, reason string) (time.Time, bool) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return time.Time{}, false
	}
	var last time.Time
	for _, e := range list.Items {
		if e.Regarding.Name != name || e.Reason != reason {
			continue
		}
		at := e.EventTime.Time
		if e.Series != nil && e.Series.LastObservedTime.After(at) {
			at = e.Series.LastObservedTime.Time
		}
		if at.After(last) {
			last = at
		}
	}
	return last, !last.IsZero()
}
