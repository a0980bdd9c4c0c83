package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// runHostileManagement starts a second management cluster on the same Engine whose tenant tries
// to take over the first one's VMs and affinity groups: a Cluster of the same namespace and name,
// OVirtMachines with the victims' namespace/name and spec.providerID (with the finalizer), a
// worker of the victims' MachineDeployment (so that it wants the victims' anti-affinity group)
// and one naming that group in spec.affinityGroups; then it deletes everything. Nothing of the
// first management cluster may be touched: no write to its VMs, its markers unchanged, its
// groups unchanged (issue 32, defects 2, 7 and 14).
func runHostileManagement(ctx context.Context, r *Run) error {
	if err := r.NewCluster(ctx); err != nil {
		return err
	}
	w := r.W
	ns := r.Namespace()
	r.Start = time.Now()
	r.Driver.Run(ctx, w.Cfg.Duration)
	if _, err := r.Driver.WaitConverged(ctx, w.Cfg.Bound); err != nil {
		r.Violate("converge", Converge, fmt.Sprintf("not converged before the hostile management cluster started: %v", err), "namespace "+ns)
		return r.Finish(ctx)
	}
	victims, err := waitReady(ctx, r, 2, w.Cfg.Bound)
	if err != nil {
		return fmt.Errorf("no Ready machines to aim at: %w", err)
	}
	victims = victims[:2]
	comments := map[string]string{}
	for _, om := range victims {
		if vm, ok := w.Sim.VM(om.Status.VMID); ok {
			comments[vm.ID] = vm.Comment
		}
	}
	groupsBefore := groupsOf(w.Sim, ns)

	hostile, err := w.Stack.StartManagement(ctx, "hostile", logr.Discard(), ManagerFlags, []string{"--debug"})
	if err != nil {
		return fmt.Errorf("starting the hostile management cluster: %w", err)
	}
	defer hostile.Stop()
	w.addProcess(hostile.Manager, hostile.Webhook)
	// Not watched like the first one's (the watcher keys machines by namespace/name, and these
	// share the victims'): what the hostile objects may do is checked below.
	hc := hostile.Env.Client
	for _, o := range []client.Object{
		harness.Namespace(CredentialsNamespace),
		harness.CredentialsSecret(CredentialsNamespace, SecretName, w.Username, w.Password),
		harness.Provider(ProviderName, w.EngineURL, SecretName, w.Sim.CAPEM()),
	} {
		if err := createRetrying(ctx, hc, o); err != nil {
			return fmt.Errorf("hostile management cluster: %w", err)
		}
	}
	hcl, err := newCluster(ctx, w, hc, ns, false)
	if err != nil {
		return fmt.Errorf("the hostile Cluster %s/c1: %w", ns, err)
	}
	attacked := time.Now()
	var hostileMachines []string
	create := func(name, vmID string, edit func(*clusterv1.Machine, *infrav1.OVirtMachine)) {
		m := harness.Machine(hcl.cluster, name, "bootstrap-data")
		om := harness.OVirtMachine(m, machineSpec())
		if vmID != "" {
			om.Spec.ProviderID = infrav1.ProviderIDPrefix + vmID
		}
		controllerutil.AddFinalizer(om, infrav1.MachineFinalizer)
		if edit != nil {
			edit(m, om)
		}
		if err := createRetrying(ctx, hc, m); err != nil {
			r.Note("hostile Machine %s: %v", name, err)
			return
		}
		if err := hc.Create(ctx, om); err != nil {
			r.Note("the hostile OVirtMachine %s was refused: %v", name, err)
			_ = hc.Delete(ctx, m)
			return
		}
		hostileMachines = append(hostileMachines, name)
	}
	// The victims' names and VMs.
	for _, v := range victims {
		create(v.Name, v.Status.VMID, nil)
	}
	// A worker of the victims' MachineDeployment: it wants the group the victims' workers share.
	create(ns+"-intruder", "", func(m *clusterv1.Machine, om *infrav1.OVirtMachine) {
		if om.Labels == nil {
			om.Labels = map[string]string{}
		}
		m.Labels[clusterv1.MachineDeploymentNameLabel] = r.Cluster.MD
		om.Labels[clusterv1.MachineDeploymentNameLabel] = r.Cluster.MD
		om.Spec.AntiAffinity = infrav1.AntiAffinitySoft
	})
	// One that names the victims' groups outright (admission refuses CAPOV's own group names).
	var names []string
	for _, g := range groupsBefore {
		names = append(names, g.Name)
	}
	slices.Sort(names)
	if len(names) > 0 {
		create(ns+"-joiner", "", func(_ *clusterv1.Machine, om *infrav1.OVirtMachine) {
			om.Spec.AffinityGroups = names
		})
	}
	r.Note("the hostile management cluster created OVirtMachines %v in %s", hostileMachines, ns)

	// Its manager reconciles them for a while, then the tenant deletes everything.
	sleep(ctx, 10*time.Second)
	for _, v := range victims {
		om := &infrav1.OVirtMachine{}
		if err := hc.Get(ctx, client.ObjectKey{Namespace: ns, Name: v.Name}, om); err == nil {
			if reason := readyReason(om); !strings.Contains(reason, infrav1.VMNotOwnedReason) {
				r.Note("the hostile OVirtMachine %s with the providerID of the victim's VM reports %q, not %s", v.Name, reason, infrav1.VMNotOwnedReason)
			}
		}
	}
	// The tenant deletes its Cluster. Cluster.WaitGone is not used: its check of the namespace's
	// VMs would count the victims', which share the namespace and must stay.
	if err := hc.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hcl.Name}}); err != nil {
		return fmt.Errorf("deleting the hostile Cluster: %w", err)
	}
	hostileGone := func(d time.Duration) error {
		return poll(ctx, d, 250*time.Millisecond, func() (bool, error) {
			oms, err := hcl.OVirtMachines(ctx)
			return err == nil && len(oms) == 0, err
		})
	}
	if err := hostileGone(15 * time.Second); err != nil {
		// VMs that do not prove they are the hostile objects' are never written, and their
		// finalizers wait for a human decision: the tenant's admin takes them.
		oms, _ := hcl.OVirtMachines(ctx)
		var held []string
		for i := range oms {
			held = append(held, oms[i].Name+": "+deletedReason(&oms[i]))
		}
		r.Note("the hostile OVirtMachines kept their finalizers (%s); removed by hand", strings.Join(held, "; "))
		removeFinalizers(ctx, hc, ns)
		if err := hostileGone(w.Cfg.Bound); err != nil {
			return fmt.Errorf("the hostile OVirtMachines: %w", err)
		}
	}

	victimIDs := map[string]string{}
	for _, v := range victims {
		victimIDs[v.Status.VMID] = v.Name
	}
	writes, reached := w.Watcher.Writes(attacked), 0
	for _, wr := range writes {
		if name, ok := victimIDs[wr.VMID]; ok {
			reached++
			r.Violate("hostile|"+wr.Method+wr.Template, I2,
				fmt.Sprintf("after a hostile management cluster created an object named like %s with its providerID, %s %s reached its VM %s", name, wr.Method, wr.Template, wr.VMID),
				"OVirtMachine "+ns+"/"+name, "VM "+wr.VMID)
		}
	}
	for id, before := range comments {
		vm, ok := w.Sim.VM(id)
		switch {
		case !ok || vm.Status != "up":
			r.Violate("hostile-vm|"+id, I2, fmt.Sprintf("VM %s of %s is not up any more after the hostile management cluster's objects were deleted (exists %t, status %q)",
				id, victimIDs[id], ok, vm.Status), "VM "+id)
		case vm.Comment != before:
			r.Violate("hostile-marker|"+id, I2, fmt.Sprintf("the owner marker of VM %s changed from %q to %q", id, before, vm.Comment), "VM "+id)
		}
	}
	after := groupsOf(w.Sim, ns)
	for id, g := range groupsBefore {
		a, ok := after[id]
		if !ok || a.VMEnforcing != g.VMEnforcing || !slices.Equal(a.VMs, g.VMs) {
			r.Violate("hostile-group|"+g.Name, "no write to another management cluster's affinity group",
				fmt.Sprintf("affinity group %s of %s/c1 was changed by a cluster of the same name in another management cluster (exists %t, enforcing %t -> %t, VMs %v -> %v)",
					g.Name, ns, ok, g.VMEnforcing, a.VMEnforcing, g.VMs, a.VMs), "affinity group "+g.Name)
		}
	}
	r.Note("of %d writes to oVirt VMs after the hostile management cluster started, %d reached the %d victim VMs; %d affinity groups of the victims' cluster checked",
		len(writes), reached, len(victims), len(groupsBefore))
	r.Healed = time.Now()
	return r.Finish(ctx)
}

// groupsOf returns the affinity groups made for the clusters of namespace ns, by id.
func groupsOf(sim *ovirtsim.Simulator, ns string) map[string]ovirtsim.AffinityGroupState {
	out := map[string]ovirtsim.AffinityGroupState{}
	for _, g := range sim.AffinityGroups("") {
		if strings.HasPrefix(g.Name, infrav1.CAPOVAffinityGroupPrefix+ns+"-") {
			out[g.ID] = g
		}
	}
	return out
}
