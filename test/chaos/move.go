package chaos

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlcluster "sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/harness"
)

// capiVersion is the Cluster API release the inventory names (the pinned module's).
const capiVersion = "v1.14.2"

// ipamGroup is the API group of Cluster API's IPAM types and of the in-cluster provider's pools.
const ipamGroup = "ipam.cluster.x-k8s.io"

// runMove builds a cluster (a control-plane Machine, workers from the driver), moves it with
// clusterctl's own mover to a second management cluster that shares the Engine, and deletes it
// there. The source must leave every VM alone (delete-for-move), the target must adopt every
// VM by its providerID (the marker names the same namespace/name; the uid changes) and its
// deletion must remove them all.
func runMove(ctx context.Context, r *Run) error {
	if err := r.NewDHCPCluster(ctx); err != nil {
		return err
	}
	w := r.W
	ns := r.Namespace()
	mv, err := beginMove(ctx, r, false)
	if mv == nil {
		return err
	}
	defer mv.done()
	before, target, from, to := mv.before, mv.target, mv.from, mv.to
	// Machines of the target's MachineDeployment (kubeconfig, bootstrap data) and the provider
	// come with the move.
	moveStart := time.Now()
	if err := from.ObjectMover().Move(ctx, ns, to, false); err != nil {
		return fmt.Errorf("clusterctl move: %w", err)
	}
	r.Note("clusterctl move of %d machines took %s", len(before), time.Since(moveStart).Round(100*time.Millisecond))

	// The source keeps nothing of the namespace, and no VM went with the deletion.
	if err := poll(ctx, w.Cfg.Bound, 250*time.Millisecond, func() (bool, error) {
		oms := &infrav1.OVirtMachineList{}
		if err := w.C.List(ctx, oms, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return len(oms.Items) == 0, nil
	}); err != nil {
		r.Violate("move-source", I5, fmt.Sprintf("the source management cluster still has OVirtMachines in %s after the move: %v", ns, err), "namespace "+ns)
	}
	after := vmsOf(w, ns)
	for id, name := range before {
		if _, ok := after[id]; !ok {
			r.Violate("move-lost|"+id, "clusterctl move keeps every VM", fmt.Sprintf("VM %s (%s) was removed by the move", id, name), "VM "+id)
		}
	}

	// The credentials Secret must have come along (and stayed in the source); if it did not,
	// the operator copies it, so that the rest can still be checked.
	checkMovedSecret(ctx, r, target.Env.Client)

	// The target adopts every VM (by providerID) and refreshes the marker's uid.
	tc := &Cluster{NS: ns, Name: r.Cluster.Name, MD: r.Cluster.MD, C: target.Env.Client, w: w}
	if err := poll(ctx, w.Cfg.Bound, 250*time.Millisecond, func() (bool, error) {
		ready, err := tc.ReadyMachines(ctx)
		return err == nil && len(ready) == len(before), err
	}); err != nil {
		oms, _ := tc.OVirtMachines(ctx)
		var states []string
		for i := range oms {
			states = append(states, oms[i].Name+": "+readyReason(&oms[i]))
		}
		r.Violate("move-target", Converge, fmt.Sprintf("the target management cluster did not bring the %d moved machines to Ready within %s: %v",
			len(before), w.Cfg.Bound, err), states...)
	} else {
		// Time to converge: from the start of the move until the target has every machine Ready.
		r.res.Converge = time.Since(moveStart)
		ready, _ := tc.ReadyMachines(ctx)
		var stale []string
		for _, om := range ready {
			if _, ok := before[om.Status.VMID]; !ok {
				r.Violate("move-newvm|"+om.Name, I1, fmt.Sprintf("moved OVirtMachine %s got another VM %s instead of its own", om.Name, om.Status.VMID), "OVirtMachine "+ns+"/"+om.Name)
			}
			if vm, ok := w.Sim.VM(om.Status.VMID); ok && MarkerUID(vm.Comment) != string(om.UID) {
				stale = append(stale, om.Name)
			}
		}
		sort.Strings(stale)
		if len(stale) > 0 {
			r.Note("the VM markers of %v still name the source cluster's uid (defect 1: the marker's uid is refreshed after move)", stale)
		} else {
			r.Note("the target adopted all %d VMs by providerID; their markers now carry the target's uids", len(ready))
		}
	}
	// Delete in the target: every VM removed, every finalizer dropped.
	clean, err := tc.Delete(ctx, w.Cfg.Bound)
	r.res.Clean = clean
	// The target's events go with it: read them now (I7).
	w.Watcher.ScanLogs()
	w.Watcher.ScanEventsAndMetrics(ctx)
	return err
}

// vmsOf returns the VMs whose marker names namespace ns, id -> name.
func vmsOf(w *World, ns string) map[string]string {
	out := map[string]string{}
	for _, vm := range w.Sim.VMs() {
		if o := MarkerOwner(vm.Comment); len(o) > len(ns) && o[:len(ns)+1] == ns+"/" {
			out[vm.ID] = vm.Name
		}
	}
	return out
}

// asIfClusterctlInit gives a management cluster what `clusterctl init` would leave for move:
// the inventory (core and infrastructure providers, and the in-cluster IPAM provider when it
// runs there) and the clusterctl label on the Cluster API CRDs, IPAM's included (ours carry it
// already).
func asIfClusterctlInit(ctx context.Context, c client.Client, cc clusterctlcluster.Client, withIPAM bool) error {
	inv := cc.ProviderInventory()
	if err := inv.EnsureCustomResourceDefinitions(ctx); err != nil {
		return fmt.Errorf("installing the clusterctl inventory CRD: %w", err)
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds); err != nil {
		return err
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		if crd.Spec.Group != clusterv1.GroupVersion.Group && crd.Spec.Group != ipamGroup {
			continue
		}
		if _, ok := crd.Labels[clusterctlv1.ClusterctlLabel]; ok {
			continue
		}
		base := crd.DeepCopy()
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels[clusterctlv1.ClusterctlLabel] = ""
		if err := c.Patch(ctx, crd, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("labelling CRD %s: %w", crd.Name, err)
		}
	}
	providers := []clusterctlv1.Provider{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "capi-system", Name: "cluster-api"}, ProviderName: "cluster-api",
			Type: string(clusterctlv1.CoreProviderType), Version: capiVersion},
		{ObjectMeta: metav1.ObjectMeta{Namespace: CredentialsNamespace, Name: "infrastructure-ovirt"}, ProviderName: "ovirt",
			Type: string(clusterctlv1.InfrastructureProviderType), Version: "v0.2.0"},
	}
	if withIPAM {
		providers = append(providers, clusterctlv1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "capi-ipam-in-cluster-system", Name: "ipam-in-cluster"},
			ProviderName: "in-cluster", Type: string(clusterctlv1.IPAMProviderType), Version: "v1.0.0"})
	}
	for _, p := range providers {
		if err := c.Create(ctx, harness.Namespace(p.Namespace)); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		list, err := inv.List(ctx)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(list.Items, func(q clusterctlv1.Provider) bool { return q.Namespace == p.Namespace && q.Name == p.Name }) {
			continue
		}
		if err := inv.Create(ctx, p); err != nil {
			return fmt.Errorf("registering provider %s in the inventory: %w", p.Name, err)
		}
	}
	return nil
}

// checkMovedSecret checks that the credentials Secret reached the target (the moved
// OVirtProvider cannot connect without it: the target's manager recreates it from the move copy
// clusterctl carried) and stayed in the source. A Secret missing in the
// target is copied there, as the operator would, so that the adoption and the deletion can still
// be checked.
func checkMovedSecret(ctx context.Context, r *Run, target client.Client) {
	w := r.W
	key := client.ObjectKey{Namespace: CredentialsNamespace, Name: SecretName}
	if err := w.C.Get(ctx, key, &corev1.Secret{}); err != nil {
		r.Violate("move-secret|source", SecretKept, fmt.Sprintf("the credentials Secret is gone from the source management cluster after the move: %v", err),
			"Secret "+CredentialsNamespace+"/"+SecretName)
	}
	// clusterctl carries the move copy the provider owns; the target's manager recreates the
	// Secret from it.
	got := &corev1.Secret{}
	err := poll(ctx, time.Minute, 250*time.Millisecond, func() (bool, error) {
		if err := target.Get(ctx, key, got); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return true, nil
	})
	if err == nil {
		if string(got.Data["password"]) != w.Password || len(got.OwnerReferences) > 0 {
			r.Violate("move-secret|target-content", SecretKept, fmt.Sprintf("the credentials Secret recreated in the target has other data or an owner (ownerReferences %v)", got.OwnerReferences),
				"Secret "+CredentialsNamespace+"/"+SecretName)
		}
		r.Note("the credentials Secret reached the target through its move copy")
		return
	}
	r.Violate("move-secret|target", SecretKept, fmt.Sprintf("clusterctl move did not carry the credentials Secret to the target with its OVirtProvider: %v", err),
		"Secret "+CredentialsNamespace+"/"+SecretName, "OVirtProvider "+ProviderName)
	if err := createRetrying(ctx, target, harness.CredentialsSecret(CredentialsNamespace, SecretName, w.Username, w.Password)); err != nil {
		r.Note("copying the Secret to the target: %v", err)
		return
	}
	r.Note("the credentials Secret was copied to the target by hand")
}

// moveRun is a provisioned cluster of the run, its VMs before the move (id -> name) and the
// second management cluster it is to be moved to.
type moveRun struct {
	before   map[string]string
	target   *harness.Management
	from, to clusterctlcluster.Client
	w        *World
}

// done stops the target and its watch.
func (m *moveRun) done() {
	m.target.Stop()
	m.w.Watcher.RemoveClient(m.target.Env.Client)
}

// beginMove provisions the run's cluster for clusterctl move and starts the target (with the
// in-cluster IPAM provider when withIPAM). A nil moveRun ends the scenario with the error
// returned (the run's result when it did not converge).
func beginMove(ctx context.Context, r *Run, withIPAM bool) (*moveRun, error) {
	if ok, err := provisionForMove(ctx, r); err != nil || !ok {
		if err == nil {
			return nil, r.Finish(ctx)
		}
		return nil, err
	}
	before := vmsOf(r.W, r.Namespace())
	target, from, to, err := startMoveTarget(ctx, r.W, withIPAM)
	if err != nil {
		return nil, err
	}
	return &moveRun{before: before, target: target, from: from, to: to, w: r.W}, nil
}

// provisionForMove gives the run's cluster a control-plane Machine and the driver's workers,
// waits until it converged and clusterctl would move it (every Machine with a Node, the control
// plane initialized). ok is false when it did not converge (recorded).
func provisionForMove(ctx context.Context, r *Run) (ok bool, _ error) {
	w := r.W
	ns := r.Namespace()
	cp := harness.Machine(r.Cluster.cluster, ns+"-cp", "bootstrap-data")
	cp.Labels[clusterv1.MachineControlPlaneLabel] = ""
	cp.Spec.Version = "v1.31.0"
	if err := createRetrying(ctx, w.C, cp); err != nil {
		return false, err
	}
	if err := createRetrying(ctx, w.C, harness.OVirtMachine(cp, machineSpec())); err != nil {
		return false, err
	}
	r.Start = time.Now()
	r.Driver.Run(ctx, w.Cfg.Duration)
	// Move at least a worker of each kind with the control plane.
	if plain, replicas := r.Driver.Wanted(); len(plain) == 0 || replicas == 0 {
		if len(plain) == 0 {
			if err := r.Driver.CreatePlain(ctx); err != nil {
				return false, err
			}
		}
		if replicas == 0 {
			if err := r.Driver.scaleBy(ctx, 1); err != nil {
				return false, err
			}
		}
	}
	r.Driver.Adopt(cp.Name)
	r.Healed = time.Now()
	if _, err := r.Driver.WaitConverged(ctx, w.Cfg.Bound); err != nil {
		r.Violate("converge", Converge, fmt.Sprintf("not converged before the move: %v", err), "namespace "+ns)
		return false, nil
	}
	return true, waitMovable(ctx, r)
}

// waitMovable waits until clusterctl would move the run's cluster: every Machine with a Node,
// the control plane initialized.
func waitMovable(ctx context.Context, r *Run) error {
	w := r.W
	ns := r.Namespace()
	if err := poll(ctx, w.Cfg.Bound, 250*time.Millisecond, func() (bool, error) {
		ms := &clusterv1.MachineList{}
		if err := w.C.List(ctx, ms, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, m := range ms.Items {
			if !m.Status.NodeRef.IsDefined() {
				return false, nil
			}
		}
		c := &clusterv1.Cluster{}
		if err := w.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.Cluster.Name}, c); err != nil {
			return false, err
		}
		return conditions.IsTrue(c, clusterv1.ClusterControlPlaneInitializedCondition), nil
	}); err != nil {
		return fmt.Errorf("the cluster is not provisioned for clusterctl move: %w", err)
	}
	return nil
}

// startMoveTarget starts a second management cluster sharing the Engine, watched like the first
// (with the in-cluster IPAM provider when withIPAM), and gives both what clusterctl init would
// leave for move. The caller stops it and removes its client from the watcher.
func startMoveTarget(ctx context.Context, w *World, withIPAM bool) (*harness.Management, clusterctlcluster.Client, clusterctlcluster.Client, error) {
	target, err := w.Stack.StartManagement(ctx, "mgmt2", logr.Discard(), ManagerFlags, []string{"--debug"})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("starting the second management cluster: %w", err)
	}
	w.addProcess(target.Manager, target.Webhook)
	w.Watcher.AddClient(target.Env.Client)
	fail := func(err error) (*harness.Management, clusterctlcluster.Client, clusterctlcluster.Client, error) {
		w.Watcher.RemoveClient(target.Env.Client)
		target.Stop()
		return nil, nil, nil, err
	}
	if withIPAM {
		if err := w.Stack.StartIPAM(ctx, target); err != nil {
			return fail(fmt.Errorf("starting the second management cluster's IPAM provider: %w", err))
		}
	}
	cfg, err := clusterctlconfig.New(ctx, "", clusterctlconfig.InjectReader(clusterctlconfig.NewMemoryReader()))
	if err != nil {
		return fail(fmt.Errorf("clusterctl configuration: %w", err))
	}
	from := clusterctlcluster.New(clusterctlcluster.Kubeconfig{Path: w.Stack.KubeconfigPath}, cfg)
	to := clusterctlcluster.New(clusterctlcluster.Kubeconfig{Path: target.KubeconfigPath}, cfg)
	// The IPAM provider is registered in the target's inventory only: the source's world is
	// shared with later moves to targets without one (clusterctl checks that a target has every
	// provider of its source).
	for _, side := range []struct {
		c    client.Client
		cc   clusterctlcluster.Client
		ipam bool
	}{{w.C, from, false}, {target.Env.Client, to, withIPAM}} {
		if err := asIfClusterctlInit(ctx, side.c, side.cc, side.ipam); err != nil {
			return fail(err)
		}
	}
	return target, from, to, nil
}
