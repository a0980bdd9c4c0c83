package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// runPausedMidDelete deletes the Cluster, pauses it as soon as the first VM is being powered
// off or removed, checks that nothing is written to its VMs while it is paused, and unpauses
// it: every finalizer must then drop within the bound.
func runPausedMidDelete(ctx context.Context, r *Run) error {
	if err := r.NewCluster(ctx); err != nil {
		return err
	}
	w := r.W
	r.Start = time.Now()
	r.Driver.Run(ctx, w.Cfg.Duration)
	if plain, replicas := r.Driver.Wanted(); len(plain)+int(replicas) == 0 {
		// The seeded steps may end with no machine wanted (how many steps fit in the duration
		// depends on the machine's speed): the scenario needs one to delete.
		if err := r.Driver.CreatePlain(ctx); err != nil {
			return fmt.Errorf("creating a machine to delete: %w", err)
		}
	}
	if _, err := waitReady(ctx, r, 1, w.Cfg.Bound); err != nil {
		return fmt.Errorf("no Ready machine to delete: %w", err)
	}
	ns := r.Namespace()
	midDelete := w.Watcher.Next(func(o ovirtsim.ObservedRequest) bool {
		return isDelete(o) && strings.HasPrefix(MarkerOwner(o.VM.Comment), ns+"/")
	})
	deleting := time.Now()
	if err := w.C.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.Cluster.Name}}); err != nil {
		return fmt.Errorf("deleting the Cluster: %w", err)
	}
	select {
	case o := <-midDelete:
		r.Note("Cluster paused when %s %s was sent", o.Method, o.Path)
	case <-time.After(w.Cfg.Bound):
		return fmt.Errorf("no VM of %s was powered off or removed within %s of deleting the Cluster", ns, w.Cfg.Bound)
	}
	if err := r.Cluster.SetPaused(ctx, true); err != nil {
		return fmt.Errorf("pausing the Cluster: %w", err)
	}
	paused := time.Now()
	// Reconciles already running when the pause landed may finish their step.
	const grace = 2 * time.Second
	window := max(5*time.Second, w.Cfg.Duration/2)
	sleep(ctx, window)
	for _, wr := range w.Watcher.Writes(paused.Add(grace)) {
		if strings.HasPrefix(wr.Owner, ns+"/") {
			r.Violate("paused|"+wr.VMID+"|"+wr.Method+wr.Template, "nothing changes in oVirt while the Cluster is paused",
				fmt.Sprintf("%s %s to VM %s (%s) %s after the Cluster was paused", wr.Method, wr.Template, wr.VMID, wr.VMName, wr.Time.Sub(paused).Round(10*time.Millisecond)),
				"Cluster "+ns+"/"+r.Cluster.Name, "VM "+wr.VMID)
		}
	}
	if err := r.Cluster.SetPaused(ctx, false); err != nil {
		return fmt.Errorf("unpausing the Cluster: %w", err)
	}
	r.Healed = time.Now()
	err := r.Cluster.WaitGone(ctx, r.Healed, w.Cfg.Bound)
	r.res.Clean = time.Since(deleting) - window
	return err
}

// runForeignVMs plants VMs that are not CAPOV's and objects that point at them or at another
// machine's VM (defect 1), then deletes those objects: no write may reach the foreign VMs
// (I2), and the other machine's VM must stay untouched.
func runForeignVMs(ctx context.Context, r *Run) error {
	if err := r.NewCluster(ctx); err != nil {
		return err
	}
	w := r.W
	ns := r.Namespace()
	oob, closeOOB, err := w.OutOfBand(ctx)
	if err != nil {
		return err
	}
	defer closeOOB()
	cl, err := oob.FindCluster(ctx, "Default")
	if err != nil {
		return err
	}
	tpl, err := oob.FindTemplate(ctx, "rhcos-4.14", "Default")
	if err != nil {
		return err
	}
	plant := func(name, comment, why string) (string, error) {
		vm, err := oob.CreateVM(ctx, ovirt.VMSpec{Name: name, ClusterID: cl.ID, TemplateID: tpl.ID, Comment: comment})
		if err != nil {
			return "", fmt.Errorf("planting VM %s: %w", name, err)
		}
		w.Watcher.AddForeignVM(vm.ID, why)
		return vm.ID, nil
	}
	var foreign []string
	defer func() {
		for _, id := range foreign {
			_ = poll(context.WithoutCancel(ctx), 10*time.Second, 200*time.Millisecond, func() (bool, error) { return w.Sim.DeleteVM(id) == nil, nil })
		}
	}()
	// (a) a VM with the name the driver's next plain machine will have, without a marker.
	id, err := plant(fmt.Sprintf("%s-m%d", ns, 1), "the database team's VM", "same name as a machine, no marker")
	if err != nil {
		return err
	}
	foreign = append(foreign, id)
	// (b) a VM with a marker naming an object that never existed.
	ghost := ns + "/ghost"
	w.Watcher.AddForeignMarker(ghost)
	id, err = plant(ns+"-ghost", "capov ovirtmachine="+ghost+" uid=00000000-0000-0000-0000-000000000000", "a marker of an object that never existed")
	if err != nil {
		return err
	}
	foreign = append(foreign, id)
	// (c) a VM without a marker, named by a crafted providerID.
	crafted, err := plant(ns+"-crafted", "not a Kubernetes node", "named by a crafted spec.providerID")
	if err != nil {
		return err
	}
	foreign = append(foreign, crafted)

	r.Start = time.Now()
	r.Driver.Run(ctx, w.Cfg.Duration)
	ready, err := waitReady(ctx, r, 1, w.Cfg.Bound)
	if err != nil {
		return fmt.Errorf("no Ready machine to copy: %w", err)
	}
	victim := ready[0]

	// An OVirtMachine whose providerID names the crafted VM, and a copy (as `kubectl get -o
	// yaml | kubectl apply` into another namespace, or a restore) of a Ready machine with its
	// providerID. Both get deleted.
	copyCl, err := w.NewCluster(ctx, ns+"-copy")
	if err != nil {
		return err
	}
	copied := time.Now()
	for i, target := range []string{crafted, victim.Status.VMID} {
		name := []string{"crafted", "copied"}[i]
		m := harness.Machine(copyCl.cluster, ns+"-"+name, "bootstrap-data")
		if err := createRetrying(ctx, w.C, m); err != nil {
			return err
		}
		om := harness.OVirtMachine(m, machineSpec())
		om.Spec.ProviderID = infrav1.ProviderIDPrefix + target
		controllerutil.AddFinalizer(om, infrav1.MachineFinalizer)
		if err := w.C.Create(ctx, om); err != nil {
			r.Note("creating an OVirtMachine with providerID %s was refused: %v", om.Spec.ProviderID, err)
			_ = w.C.Delete(ctx, m)
			continue
		}
		r.Note("OVirtMachine %s/%s created with spec.providerID %s (%s)", om.Namespace, om.Name, om.Spec.ProviderID,
			map[int]string{0: "a foreign VM", 1: "the VM of " + victim.Name}[i])
	}
	sleep(ctx, 3*time.Second)
	start := time.Now()
	if err := w.C.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: copyCl.NS, Name: copyCl.Name}}); err != nil {
		return fmt.Errorf("deleting the copies' Cluster: %w", err)
	}
	if err := copyCl.waitGone(ctx, start, 10*time.Second, false); err != nil {
		// A VM that does not prove it is the object's is never written, and the finalizer
		// waits for a human decision (docs/operations.md): take it, to clean up.
		r.Note("the copies kept their finalizers (%v); removed by hand", err)
		removeFinalizers(ctx, w.C, copyCl.NS)
		if err := copyCl.WaitGone(ctx, time.Now(), w.Cfg.Bound); err != nil {
			return err
		}
	}
	for _, wr := range w.Watcher.Writes(copied) {
		if wr.VMID == victim.Status.VMID {
			r.Violate("copied|"+wr.Method+wr.Template, I2,
				fmt.Sprintf("after a copy of %s with its providerID was created in %s, %s %s reached its VM %s", victim.Name, copyCl.NS, wr.Method, wr.Template, wr.VMID),
				"OVirtMachine "+copyCl.NS+"/"+ns+"-copied", "OVirtMachine "+victim.Namespace+"/"+victim.Name, "VM "+wr.VMID)
		}
	}
	if vm, ok := w.Sim.VM(victim.Status.VMID); !ok || vm.Status != "up" {
		r.Violate("copied-vm", I2, fmt.Sprintf("the VM %s of %s is not up any more after a copy of the object was deleted (exists %t, status %q)",
			victim.Status.VMID, victim.Name, ok, vm.Status), "OVirtMachine "+victim.Namespace+"/"+victim.Name, "VM "+victim.Status.VMID)
	}
	// The driver's machine that ran into the planted VM's name cannot get a VM: the user
	// deletes it (its deletion must leave the planted VM alone, I2).
	if plain, _ := r.Driver.Wanted(); slices.Contains(plain, fmt.Sprintf("%s-m%d", ns, 1)) {
		if err := r.Driver.DeletePlain(ctx, fmt.Sprintf("%s-m%d", ns, 1)); err != nil {
			return err
		}
	}
	r.Healed = time.Now()
	return r.Finish(ctx)
}

// removeFinalizers drops CAPOV's finalizer from every OVirtMachine of a namespace, as an
// operator does after deciding that their VMs are not theirs.
func removeFinalizers(ctx context.Context, c client.Client, ns string) {
	list := &infrav1.OVirtMachineList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return
	}
	for i := range list.Items {
		om := &list.Items[i]
		base := om.DeepCopy()
		if controllerutil.RemoveFinalizer(om, infrav1.MachineFinalizer) {
			_ = c.Patch(ctx, om, client.MergeFrom(base))
		}
	}
}

// runOwnerMachineGone removes the finalizer of a Ready machine's Machine and deletes it, then
// deletes the OVirtMachine as the world's garbage collector does (whichever comes first): the VM
// must be removed and the finalizer dropped (defect 5).
func runOwnerMachineGone(ctx context.Context, r *Run) error {
	if err := r.NewCluster(ctx); err != nil {
		return err
	}
	w := r.W
	r.Start = time.Now()
	for range w.Cfg.Machines {
		if err := r.Driver.CreatePlain(ctx); err != nil {
			return err
		}
	}
	ready, err := waitReady(ctx, r, 1, w.Cfg.Bound)
	if err != nil {
		return fmt.Errorf("no Ready machine: %w", err)
	}
	om := ready[0]
	mName := ownerName(&om)
	r.Driver.Forget(mName)
	m := &clusterv1.Machine{}
	if err := w.C.Get(ctx, client.ObjectKey{Namespace: om.Namespace, Name: mName}, m); err != nil {
		return err
	}
	base := m.DeepCopy()
	m.Finalizers = nil
	if err := w.C.Patch(ctx, m, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("removing the Machine's finalizers: %w", err)
	}
	if err := w.C.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := poll(ctx, 20*time.Second, 200*time.Millisecond, func() (bool, error) {
		return apierrors.IsNotFound(w.C.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{})), nil
	}); err != nil {
		return fmt.Errorf("the Machine did not go: %w", err)
	}
	r.Note("Machine %s deleted without its finalizers; OVirtMachine %s deleted as the garbage collector would", mName, om.Name)
	start := time.Now()
	if err := w.C.Delete(ctx, &om); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := poll(ctx, w.Cfg.Bound, 250*time.Millisecond, func() (bool, error) {
		return apierrors.IsNotFound(w.C.Get(ctx, client.ObjectKeyFromObject(&om), &infrav1.OVirtMachine{})), nil
	}); err != nil {
		cur := &infrav1.OVirtMachine{}
		_ = w.C.Get(ctx, client.ObjectKeyFromObject(&om), cur)
		r.Violate("owner-gone", I5, fmt.Sprintf("OVirtMachine %s/%s, whose Machine is gone, still has finalizers %v after %s: %s",
			om.Namespace, om.Name, cur.Finalizers, w.Cfg.Bound, deletedReason(cur)), "OVirtMachine "+om.Namespace+"/"+om.Name, "VM "+om.Status.VMID)
	} else if _, ok := w.Sim.VM(om.Status.VMID); ok {
		r.Violate("owner-gone-vm", I4, fmt.Sprintf("VM %s outlived OVirtMachine %s/%s (its Machine was gone)", om.Status.VMID, om.Namespace, om.Name),
			"OVirtMachine "+om.Namespace+"/"+om.Name, "VM "+om.Status.VMID)
	}
	r.res.Clean = time.Since(start)
	r.Healed = time.Now()
	return r.Finish(ctx)
}

// runVMNeverStops deletes a machine whose guest ignores ACPI while every stop request fails:
// the manager must not ask every few seconds forever, and must say why the deletion waits
// (defect 9: back off, an event after some tries, a condition). Then the VM stops again and the
// deletion finishes.
func runVMNeverStops(ctx context.Context, r *Run) error {
	if err := r.NewCluster(ctx); err != nil {
		return err
	}
	w := r.W
	r.Start = time.Now()
	for range 2 {
		if err := r.Driver.CreatePlain(ctx); err != nil {
			return err
		}
	}
	ready, err := waitReady(ctx, r, 1, w.Cfg.Bound)
	if err != nil {
		return fmt.Errorf("no Ready machine: %w", err)
	}
	om := ready[0]
	vmID := om.Status.VMID
	if err := w.Sim.SetVMIgnoresACPI(vmID, true); err != nil {
		return err
	}
	w.Sim.SetFaults(ovirtsim.FaultRule{Method: "POST", Path: "/vms/{id}/stop", Status: 500, Detail: "[Cannot stop VM. VDSM is not responding.]"})
	r.Driver.Forget(ownerName(&om))
	deleted := time.Now()
	if err := r.Cluster.DeleteMachineOf(ctx, &om); err != nil {
		return err
	}
	window := max(20*time.Second, w.Cfg.Duration)
	r.Note("VM %s ignores ACPI and every stop fails for %s after its Machine was deleted", vmID, window)
	sleep(ctx, window)
	var stops []time.Time
	for _, wr := range w.Watcher.Writes(deleted) {
		if wr.VMID == vmID && wr.Template == "/vms/{id}/stop" {
			stops = append(stops, wr.Time)
		}
	}
	half := deleted.Add(window / 2)
	first, second := 0, 0
	for _, t := range stops {
		if t.Before(half) {
			first++
		} else {
			second++
		}
	}
	r.Note("%d stop requests in the first %s, %d in the second", first, window/2, second)
	if second > 3 && second >= first {
		r.Violate("never-stops-backoff", "retries of a VM that does not stop back off (defect 9)",
			fmt.Sprintf("VM %s got %d stop requests in the first half of %s and %d in the second: no back-off", vmID, first, window, second),
			"OVirtMachine "+om.Namespace+"/"+om.Name, "VM "+vmID)
	}
	cur := &infrav1.OVirtMachine{}
	if err := w.C.Get(ctx, client.ObjectKeyFromObject(&om), cur); err == nil {
		if c := conditions.Get(cur, infrav1.MachineDeletedCondition); c == nil || c.Reason != infrav1.VMNotStoppingReason {
			r.Violate("never-stops-condition", "a VM that does not stop is surfaced in a condition (defect 9)",
				fmt.Sprintf("after %d stop requests the Engine refused (500), %s/%s says %s instead of %s", len(stops), om.Namespace, om.Name, deletedReason(cur), infrav1.VMNotStoppingReason),
				"OVirtMachine "+om.Namespace+"/"+om.Name, "VM "+vmID)
		}
	}
	w.Sim.SetFaults()
	_ = w.Sim.SetVMIgnoresACPI(vmID, false)
	r.Healed = time.Now()
	if err := poll(ctx, w.Cfg.Bound, 250*time.Millisecond, func() (bool, error) {
		return apierrors.IsNotFound(w.C.Get(ctx, client.ObjectKeyFromObject(&om), &infrav1.OVirtMachine{})), nil
	}); err != nil {
		r.Violate("never-stops-delete", I5, fmt.Sprintf("OVirtMachine %s/%s still there %s after its VM could stop again: %s",
			om.Namespace, om.Name, w.Cfg.Bound, deletedReason(cur)), "OVirtMachine "+om.Namespace+"/"+om.Name, "VM "+vmID)
	}
	return r.Finish(ctx)
}

// runEngineSwitched points the OVirtProvider at another Engine (a second simulator with the
// same inventory and credentials but its own instance id) and deletes Ready machines: that
// Engine answers 404 for their VMs, which must not be taken for "already deleted" (defect 11):
// the finalizers stay and the VMs are not leaked. Pointed back, the deletions finish.
func runEngineSwitched(ctx context.Context, r *Run) error {
	if err := r.NewCluster(ctx); err != nil {
		return err
	}
	w := r.W
	r.Start = time.Now()
	for range max(2, w.Cfg.Machines-1) {
		if err := r.Driver.CreatePlain(ctx); err != nil {
			return err
		}
	}
	if _, err := r.Driver.WaitConverged(ctx, w.Cfg.Bound); err != nil {
		return fmt.Errorf("machines not Ready before the switch: %w", err)
	}
	ready, err := r.Cluster.ReadyMachines(ctx)
	if err != nil {
		return err
	}
	other, err := ovirtsim.NewBuilder().WithSeed(simSeed(w.Seed+1000, w.Username, w.Password)).Build()
	if err != nil {
		return fmt.Errorf("starting the other Engine: %w", err)
	}
	defer other.Close()
	if err := pointProvider(ctx, w.C, other.URL(), other.CAPEM()); err != nil {
		return fmt.Errorf("pointing the OVirtProvider at the other Engine: %w", err)
	}
	r.Note("OVirtProvider pointed at another Engine (instance id %s instead of %s)", other.InstanceID(), w.Sim.InstanceID())
	// Let the provider reconnect, then delete the machines.
	sleep(ctx, 3*time.Second)
	for i := range ready {
		r.Driver.Forget(ownerName(&ready[i]))
		if err := r.Cluster.DeleteMachineOf(ctx, &ready[i]); err != nil {
			return err
		}
	}
	sleep(ctx, max(8*time.Second, w.Cfg.Duration/2))
	for i := range ready {
		om := &ready[i]
		cur := &infrav1.OVirtMachine{}
		err := w.C.Get(ctx, client.ObjectKeyFromObject(om), cur)
		_, vmExists := w.Sim.VM(om.Status.VMID)
		switch {
		case apierrors.IsNotFound(err) && vmExists:
			r.Violate("switched|"+om.Name, I4, fmt.Sprintf("OVirtMachine %s/%s was deleted while the OVirtProvider pointed at another Engine, which does not know its VM %s: the VM is left in the real Engine",
				om.Namespace, om.Name, om.Status.VMID), "OVirtMachine "+om.Namespace+"/"+om.Name, "VM "+om.Status.VMID)
		case err == nil:
			r.Note("%s waits: %s", om.Name, deletedReason(cur))
		}
	}
	if err := pointProvider(ctx, w.C, w.EngineURL, w.Sim.CAPEM()); err != nil {
		return fmt.Errorf("pointing the OVirtProvider back: %w", err)
	}
	r.Healed = time.Now()
	return r.Finish(ctx)
}
