package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
)

// Cluster is a scenario's Cluster API cluster: a namespace of its own with a Cluster, its
// OVirtCluster and kubeconfig Secret (the stack's workload cluster), bootstrap data, an
// OVirtMachineTemplate and a MachineDeployment on it.
type Cluster struct {
	// NS is the namespace, Name the Cluster's name, MD the MachineDeployment's.
	NS, Name, MD string
	// C is the management cluster the objects live in.
	C client.Client

	w       *World
	cluster *clusterv1.Cluster
}

// machineSpec is the OVirtMachine spec of every machine: rhcos-4.14 with Ignition.
func machineSpec() infrav1.OVirtVMSpec {
	return infrav1.OVirtVMSpec{
		Provider: ProviderName, OVirtCluster: "Default", Template: "rhcos-4.14",
		VMType:       infrav1.VMTypeServer,
		CPU:          &infrav1.CPU{Sockets: 1, Cores: 2, Threads: 1},
		Memory:       &infrav1.Memory{SizeMB: 4096, GuaranteedMB: 2048},
		OSDiskSizeGB: 20,
		NICs:         []infrav1.NIC{{VnicProfile: "ovirtmgmt"}},
	}
}

// bootstrapData is an Ignition config carrying the bootstrap sentinel (as a join token would).
func (w *World) bootstrapData() string {
	return `{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","passwordHash":"` + w.BootstrapSentinel + `"}]}}`
}

// NewCluster creates a scenario's cluster in namespace ns and waits until Cluster API reports
// its infrastructure provisioned.
func (w *World) NewCluster(ctx context.Context, ns string) (*Cluster, error) {
	return newCluster(ctx, w, w.C, ns, true)
}

// workersPool is the InClusterIPPool of a chaos namespace (the in-cluster IPAM provider serves
// it): the workers' NICs take their static addresses from it.
func workersPool(ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
		"metadata": map[string]any{"namespace": ns, "name": "workers"},
		"spec":     map[string]any{"addresses": []any{"10.50.0.10-10.50.0.250"}, "prefix": int64(24), "gateway": "10.50.0.1"},
	}}
}

func newCluster(ctx context.Context, w *World, c client.Client, ns string, staticIPs bool) (*Cluster, error) {
	w.Watcher.AddNamespace(ns)
	cl := &Cluster{NS: ns, Name: "c1", MD: ns + "-md", C: c, w: w}
	cluster := harness.Cluster(ns, cl.Name)
	// The workers of the MachineDeployment are kept apart (a Soft affinity group per cluster),
	// so that every scenario also creates, joins and deletes affinity groups under its fault;
	// and they take static addresses from an IPAM pool, so that every scenario also claims and
	// releases addresses under its fault (I4 checks that no claim outlives its machine).
	workers := machineSpec()
	workers.AntiAffinity = infrav1.AntiAffinitySoft
	if staticIPs {
		workers.NICs[0].AddressesFromPools = []infrav1.IPPoolReference{{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "workers"}}
	}
	tpl := &infrav1.OVirtMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"},
		Spec:       infrav1.OVirtMachineTemplateSpec{Template: infrav1.OVirtMachineTemplateResource{Spec: workers}},
	}
	objs := []client.Object{
		harness.Namespace(ns), cluster,
		harness.KubeconfigSecret(cluster, w.Stack.WorkloadKubeconfig),
		harness.BootstrapSecret(ns, "bootstrap-data", cl.Name, w.bootstrapData(), "ignition"),
		tpl, cl.machineDeployment(0),
	}
	if staticIPs {
		objs = append(objs, workersPool(ns))
	}
	for _, o := range objs {
		if err := createRetrying(ctx, c, o); err != nil {
			return nil, err
		}
	}
	if err := createRetrying(ctx, c, harness.OVirtCluster(cluster, endpointHost, 6443)); err != nil {
		return nil, err
	}
	cl.cluster = cluster
	err := poll(ctx, time.Minute, 200*time.Millisecond, func() (bool, error) {
		got := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), got); err != nil {
			return false, err
		}
		return ptr.Deref(got.Status.Initialization.InfrastructureProvisioned, false), nil
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %s/%s: infrastructure not provisioned: %w", ns, cl.Name, err)
	}
	return cl, nil
}

// createRetrying creates obj, retrying while the API server or the webhook fail (a scenario may
// have just stopped the webhook).
func createRetrying(ctx context.Context, c client.Client, obj client.Object) error {
	var last error
	for range 60 {
		err := c.Create(ctx, obj)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		last = err
		sleep(ctx, 500*time.Millisecond)
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("creating %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), last)
}

func (cl *Cluster) machineDeployment(replicas int32) *clusterv1.MachineDeployment {
	labels := map[string]string{clusterv1.ClusterNameLabel: cl.Name, "pool": cl.MD}
	return &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: cl.NS, Name: cl.MD, Labels: map[string]string{clusterv1.ClusterNameLabel: cl.Name}},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: cl.Name,
			Replicas:    ptr.To(replicas),
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			// What CAPI's defaulting webhook would set (its webhooks do not run here).
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{
					ClusterName: cl.Name,
					Version:     "v1.31.0",
					Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap-data")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: "OVirtMachineTemplate", Name: "workers",
					},
				},
			},
		},
	}
}

// Scale sets the MachineDeployment's replicas.
func (cl *Cluster) Scale(ctx context.Context, replicas int32) error {
	md := &clusterv1.MachineDeployment{}
	if err := cl.C.Get(ctx, client.ObjectKey{Namespace: cl.NS, Name: cl.MD}, md); err != nil {
		return err
	}
	base := md.DeepCopy()
	md.Spec.Replicas = ptr.To(replicas)
	return cl.C.Patch(ctx, md, client.MergeFrom(base))
}

// SetPaused sets the Cluster's spec.paused.
func (cl *Cluster) SetPaused(ctx context.Context, paused bool) error {
	return poll(ctx, 30*time.Second, 200*time.Millisecond, func() (bool, error) {
		c := &clusterv1.Cluster{}
		if err := cl.C.Get(ctx, client.ObjectKey{Namespace: cl.NS, Name: cl.Name}, c); err != nil {
			return false, err
		}
		base := c.DeepCopy()
		c.Spec.Paused = ptr.To(paused)
		return cl.C.Patch(ctx, c, client.MergeFrom(base)) == nil, nil
	})
}

// OVirtMachines lists the cluster's OVirtMachines.
func (cl *Cluster) OVirtMachines(ctx context.Context) ([]infrav1.OVirtMachine, error) {
	list := &infrav1.OVirtMachineList{}
	if err := cl.C.List(ctx, list, client.InNamespace(cl.NS)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// ReadyMachines returns the OVirtMachines that are Ready, provisioned, have a VM and are not
// being deleted, sorted by name.
func (cl *Cluster) ReadyMachines(ctx context.Context) ([]infrav1.OVirtMachine, error) {
	oms, err := cl.OVirtMachines(ctx)
	if err != nil {
		return nil, err
	}
	var out []infrav1.OVirtMachine
	for _, om := range oms {
		if om.DeletionTimestamp.IsZero() && om.Status.VMID != "" && ptr.Deref(om.Status.Initialization.Provisioned, false) &&
			conditions.IsTrue(&om, infrav1.ReadyCondition) {
			out = append(out, om)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteMachineOf deletes the Machine that owns an OVirtMachine (as a user or a
// MachineHealthCheck does; Cluster API then deletes the OVirtMachine).
func (cl *Cluster) DeleteMachineOf(ctx context.Context, om *infrav1.OVirtMachine) error {
	for _, ref := range om.OwnerReferences {
		if ref.Kind == "Machine" {
			m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: om.Namespace, Name: ref.Name}}
			return client.IgnoreNotFound(cl.C.Delete(ctx, m))
		}
	}
	return client.IgnoreNotFound(cl.C.Delete(ctx, om))
}

// Driver creates and deletes a cluster's machines, seeded: plain Machines with an OVirtMachine
// and a bootstrap Secret of their own, and MachineDeployment replicas. It keeps at most Max
// machines, tolerates refused requests (a fault may be on) and retries what is left over.
type Driver struct {
	cl  *Cluster
	rnd *rand.Rand
	// Max is the most machines alive at once.
	Max int

	mu       sync.Mutex
	plain    []string          // plain machines the driver wants
	pending  map[string]string // plain machine -> what is still to create ("machine", "infra")
	replicas int32
	n        int
	created  int
	deleted  int
	refused  int
}

// NewDriver returns a driver for the cluster; rnd fixes its decisions.
func NewDriver(cl *Cluster, rnd *rand.Rand, maxMachines int) *Driver {
	return &Driver{cl: cl, rnd: rnd, Max: maxMachines, pending: map[string]string{}}
}

// Stats returns the machines the driver created and deleted and the requests refused.
func (d *Driver) Stats() (created, deleted, refused int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.created, d.deleted, d.refused
}

// Wanted returns the plain machines the driver wants and the MachineDeployment's replicas.
func (d *Driver) Wanted() ([]string, int32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.plain), d.replicas
}

// Run steps until d passes or ctx ends, every 0.3 to 1.5 s (seeded).
func (d *Driver) Run(ctx context.Context, dur time.Duration) {
	end := time.Now().Add(dur)
	for time.Now().Before(end) && ctx.Err() == nil {
		d.Step(ctx)
		sleep(ctx, time.Duration(300+d.rnd.IntN(1200))*time.Millisecond)
	}
}

// Step does one seeded action: create or delete a plain machine, or scale the
// MachineDeployment up or down; then it retries what earlier refused requests left undone.
func (d *Driver) Step(ctx context.Context) {
	d.mu.Lock()
	live := len(d.plain) + int(d.replicas)
	p := d.rnd.IntN(100)
	plain := d.rnd.IntN(2) == 0
	pick := d.rnd.IntN(1 << 20)
	victim := ""
	if len(d.plain) > 0 && (plain || d.replicas == 0) {
		victim = d.plain[pick%len(d.plain)]
	}
	d.mu.Unlock()
	var err error
	switch {
	case live < d.Max && (p < 65 || live == 0):
		if plain {
			err = d.CreatePlain(ctx)
		} else {
			err = d.scaleBy(ctx, 1)
		}
	case victim != "":
		err = d.DeletePlain(ctx, victim)
	case live > 0:
		err = d.scaleBy(ctx, -1)
	}
	if err != nil {
		d.mu.Lock()
		d.refused++
		d.mu.Unlock()
	}
	d.Settle(ctx)
}

func (d *Driver) scaleBy(ctx context.Context, delta int32) error {
	d.mu.Lock()
	n := max(0, d.replicas+delta)
	d.mu.Unlock()
	if err := d.cl.Scale(ctx, n); err != nil {
		return err
	}
	d.mu.Lock()
	if delta > 0 {
		d.created++
	} else {
		d.deleted++
	}
	d.replicas = n
	d.mu.Unlock()
	return nil
}

// CreatePlain creates a plain Machine with its bootstrap Secret and OVirtMachine.
func (d *Driver) CreatePlain(ctx context.Context) error {
	d.mu.Lock()
	d.n++
	name := fmt.Sprintf("%s-m%d", d.cl.NS, d.n)
	d.plain = append(d.plain, name)
	d.pending[name] = "machine"
	d.created++
	d.mu.Unlock()
	return d.ensurePlain(ctx, name)
}

// ensurePlain creates what is still missing of a plain machine.
func (d *Driver) ensurePlain(ctx context.Context, name string) error {
	c := d.cl.C
	secret := name + "-bootstrap"
	if err := c.Create(ctx, harness.BootstrapSecret(d.cl.NS, secret, d.cl.Name, d.cl.w.bootstrapData(), "ignition")); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	m := harness.Machine(d.cl.cluster, name, secret)
	if err := c.Create(ctx, m); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
	}
	if !m.DeletionTimestamp.IsZero() {
		return nil
	}
	om := harness.OVirtMachine(m, machineSpec())
	if err := c.Create(ctx, om); err != nil && !apierrors.IsAlreadyExists(err) {
		d.mu.Lock()
		d.pending[name] = "infra"
		d.mu.Unlock()
		return err
	}
	d.mu.Lock()
	delete(d.pending, name)
	d.mu.Unlock()
	return nil
}

// DeletePlain deletes a plain Machine (Cluster API deletes its OVirtMachine).
func (d *Driver) DeletePlain(ctx context.Context, name string) error {
	err := client.IgnoreNotFound(d.cl.C.Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: d.cl.NS, Name: name}}))
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.plain = slices.DeleteFunc(d.plain, func(s string) bool { return s == name })
	delete(d.pending, name)
	d.deleted++
	return nil
}

// Adopt adds a plain machine the scenario created itself to what the driver wants (it may
// then delete it too).
func (d *Driver) Adopt(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !slices.Contains(d.plain, name) {
		d.plain = append(d.plain, name)
	}
}

// Forget drops a plain machine from what the driver wants (a scenario deleted it itself).
func (d *Driver) Forget(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.plain = slices.DeleteFunc(d.plain, func(s string) bool { return s == name })
	delete(d.pending, name)
}

// Settle retries the creations that refused requests left undone; it reports whether nothing
// is left.
func (d *Driver) Settle(ctx context.Context) bool {
	d.mu.Lock()
	var names []string
	for n := range d.pending {
		names = append(names, n)
	}
	d.mu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		_ = d.ensurePlain(ctx, n)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pending) == 0
}

// WaitConverged waits until the cluster has what the driver wants: the plain machines and the
// MachineDeployment's replicas, each with a Ready OVirtMachine, and nothing being deleted. It
// retries undone creations meanwhile and returns how long it took.
func (d *Driver) WaitConverged(ctx context.Context, bound time.Duration) (time.Duration, error) {
	start := time.Now()
	var last string
	err := poll(ctx, bound, 250*time.Millisecond, func() (bool, error) {
		if !d.Settle(ctx) {
			last = "creations still refused"
			return false, nil
		}
		plain, replicas := d.Wanted()
		ms := &clusterv1.MachineList{}
		if err := d.cl.C.List(ctx, ms, client.InNamespace(d.cl.NS)); err != nil {
			return false, err
		}
		oms, err := d.cl.OVirtMachines(ctx)
		if err != nil {
			return false, err
		}
		byName := map[string]*infrav1.OVirtMachine{}
		for i := range oms {
			byName[oms[i].Name] = &oms[i]
		}
		pool := 0
		var problems []string
		for _, m := range ms.Items {
			if !m.DeletionTimestamp.IsZero() {
				problems = append(problems, "Machine "+m.Name+" still deleting")
				continue
			}
			if m.Labels["pool"] == d.cl.MD {
				pool++
			} else if !slices.Contains(plain, m.Name) {
				problems = append(problems, "Machine "+m.Name+" not wanted")
			}
			om := byName[m.Spec.InfrastructureRef.Name]
			switch {
			case om == nil:
				problems = append(problems, "Machine "+m.Name+" has no OVirtMachine")
			case !ptr.Deref(om.Status.Initialization.Provisioned, false) || !conditions.IsTrue(om, infrav1.ReadyCondition):
				problems = append(problems, "OVirtMachine "+om.Name+" not Ready: "+readyReason(om))
			}
		}
		for _, om := range oms {
			if !om.DeletionTimestamp.IsZero() {
				problems = append(problems, "OVirtMachine "+om.Name+" still deleting: "+readyReason(&om))
			}
		}
		for _, n := range plain {
			if !slices.ContainsFunc(ms.Items, func(m clusterv1.Machine) bool { return m.Name == n }) {
				problems = append(problems, "Machine "+n+" missing")
			}
		}
		if pool != int(replicas) {
			problems = append(problems, fmt.Sprintf("MachineDeployment has %d machines, wants %d", pool, replicas))
		}
		last = strings.Join(problems, "; ")
		return len(problems) == 0, nil
	})
	if err != nil {
		return time.Since(start), fmt.Errorf("%w: %s", err, last)
	}
	return time.Since(start), nil
}

// readyReason describes an OVirtMachine's Ready condition and failure for messages.
func readyReason(om *infrav1.OVirtMachine) string {
	s := "no Ready condition"
	if c := conditions.Get(om, infrav1.ReadyCondition); c != nil {
		s = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	if d := om.Status.Deprecated; d != nil && d.V1Beta1 != nil && d.V1Beta1.FailureReason != nil {
		s += " failureReason=" + *d.V1Beta1.FailureReason
	}
	return s
}

// Delete deletes the Cluster (Cluster API deletes its machines, CAPOV their VMs) and waits
// until every OVirtMachine and the Cluster are gone, at most bound (I5). Then no VM may be left
// whose marker names the namespace (I4). It returns how long the deletion took.
func (cl *Cluster) Delete(ctx context.Context, bound time.Duration) (time.Duration, error) {
	cl.logStaticAddresses(ctx)
	start := time.Now()
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: cl.NS, Name: cl.Name}}
	var err error
	for range 20 {
		if err = client.IgnoreNotFound(cl.C.Delete(ctx, c)); err == nil {
			break
		}
		sleep(ctx, 500*time.Millisecond)
	}
	if err != nil {
		return 0, fmt.Errorf("deleting Cluster %s/%s: %w", cl.NS, cl.Name, err)
	}
	err = cl.WaitGone(ctx, start, bound)
	return time.Since(start), err
}

// WaitGone waits until the namespace has no OVirtMachine and no Cluster left, at most bound
// from start; it records I5 and I4 violations.
func (cl *Cluster) WaitGone(ctx context.Context, start time.Time, bound time.Duration) error {
	return cl.waitGone(ctx, start, bound, true)
}

// waitGone is WaitGone; record false only returns the error.
func (cl *Cluster) waitGone(ctx context.Context, start time.Time, bound time.Duration, record bool) error {
	var left []string
	err := poll(ctx, time.Until(start.Add(bound)), 250*time.Millisecond, func() (bool, error) {
		left = left[:0]
		oms, err := cl.OVirtMachines(ctx)
		if err != nil {
			return false, err
		}
		for i := range oms {
			left = append(left, fmt.Sprintf("OVirtMachine %s/%s finalizers=%v %s", oms[i].Namespace, oms[i].Name, oms[i].Finalizers, deletedReason(&oms[i])))
		}
		got := &clusterv1.Cluster{}
		if err := cl.C.Get(ctx, client.ObjectKey{Namespace: cl.NS, Name: cl.Name}, got); err == nil {
			left = append(left, fmt.Sprintf("Cluster %s/%s finalizers=%v", cl.NS, cl.Name, got.Finalizers))
		} else if !apierrors.IsNotFound(err) {
			return false, err
		}
		ocs := &infrav1.OVirtClusterList{}
		if err := cl.C.List(ctx, ocs, client.InNamespace(cl.NS)); err != nil {
			return false, err
		}
		for _, oc := range ocs.Items {
			left = append(left, fmt.Sprintf("OVirtCluster %s/%s finalizers=%v", oc.Namespace, oc.Name, oc.Finalizers))
		}
		return len(left) == 0, nil
	})
	if err != nil && !record {
		return fmt.Errorf("%w: %s", err, strings.Join(left, "; "))
	}
	if err != nil {
		cl.w.Watcher.Violate("I5|"+cl.NS, I5, fmt.Sprintf("%d objects of namespace %s still there %s after the deletion started: %v",
			len(left), cl.NS, bound, err), left...)
		return errors.New("finalizers did not drop")
	}
	cl.CheckNoVMs(cl.NS)
	return nil
}

// CheckNoVMs records an I4 violation for every VM whose marker names namespace ns, and for
// every affinity group the manager made for a cluster of that namespace (named
// "capov-<namespace>-<cluster>-..."): the OVirtCluster deletes its groups before its finalizer drops.
func (cl *Cluster) CheckNoVMs(ns string) {
	cl.checkNoClaims(ns)
	for _, g := range cl.w.Sim.AffinityGroups("") {
		if strings.HasPrefix(g.Name, "capov-"+ns+"-"+cl.Name+"-") {
			cl.w.Watcher.Violate("I4|group|"+g.ID, I4, fmt.Sprintf("affinity group %s (oVirt cluster %s, VMs %v) outlived the OVirtCluster of namespace %s", g.Name, g.Cluster, g.VMs, ns),
				"affinity group "+g.Name)
		}
	}
	for _, vm := range cl.w.Sim.VMs() {
		if owner := MarkerOwner(vm.Comment); strings.HasPrefix(owner, ns+"/") && !cl.w.Watcher.IsForeign(vm.ID) {
			cl.w.Watcher.Violate("I4|"+vm.ID, I4, fmt.Sprintf("VM %s (%s, %s) outlived OVirtMachine %s", vm.ID, vm.Name, vm.Status, owner),
				"VM "+vm.ID, "OVirtMachine "+owner)
		}
	}
}

func deletedReason(om *infrav1.OVirtMachine) string {
	if c := conditions.Get(om, infrav1.MachineDeletedCondition); c != nil {
		return fmt.Sprintf("MachineDeleted=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return readyReason(om)
}

// checkNoClaims records an I4 violation for every IPAddressClaim of a machine of namespace ns
// that is still there (beyond the moment its IPAM provider takes to drop its finalizer): the
// manager releases a machine's addresses once its VM is gone.
func (cl *Cluster) checkNoClaims(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var left []ipamv1.IPAddressClaim
	_ = poll(ctx, 30*time.Second, 500*time.Millisecond, func() (bool, error) {
		list := &ipamv1.IPAddressClaimList{}
		if err := cl.C.List(ctx, list, client.InNamespace(ns), client.HasLabels{infrav1.IPAddressClaimMachineLabel}); err != nil {
			return false, nil //nolint:nilerr // the API server may be briefly down in a scenario: retry
		}
		left = list.Items
		return len(left) == 0, nil
	})
	for _, c := range left {
		machine := c.Labels[infrav1.IPAddressClaimMachineLabel]
		cl.w.Watcher.Violate("I4|claim|"+ns+"/"+c.Name, I4, fmt.Sprintf("IPAddressClaim %s/%s (machine %s) outlived its OVirtMachine: its address is never given back",
			ns, c.Name, machine), "IPAddressClaim "+c.Name)
		cl.w.auditTrail(ns, machine, c.Name)
	}
}

// auditTrail logs every write the API server recorded to the named objects of a namespace
// (OVirtMachines, Machines, IP address claims of those names): who created, changed and
// deleted them, to find the cause of a violation about them.
func (w *World) auditTrail(ns string, names ...string) {
	if w.Stack.AuditLog == "" {
		return
	}
	events, err := envtest.AuditEvents(w.Stack.AuditLog, func(e envtest.AuditEvent) bool {
		return e.Namespace == ns && slices.ContainsFunc(names, func(n string) bool { return n != "" && strings.HasPrefix(e.Name, n) })
	})
	if err != nil {
		w.Logf("[%s] reading the audit log: %v", ns, err)
		return
	}
	w.Logf("[%s] the API server's writes to %v:", ns, names)
	for _, e := range events {
		w.Logf("[%s]   %s", ns, e)
	}
}

// logStaticAddresses logs how many machines of the cluster hold an address claimed from the
// workers' pool before the cluster is deleted (so that a run shows the claims it released), and
// records an I4 violation for a provisioned machine whose first address is not its claimed one.
func (cl *Cluster) logStaticAddresses(ctx context.Context) {
	list := &infrav1.OVirtMachineList{}
	if err := cl.C.List(ctx, list, client.InNamespace(cl.NS)); err != nil {
		return
	}
	static := 0
	for _, om := range list.Items {
		if len(om.Spec.NICs) == 0 || len(om.Spec.NICs[0].AddressesFromPools) == 0 || !ptr.Deref(om.Status.Initialization.Provisioned, false) {
			continue
		}
		static++
		if len(om.Status.Addresses) == 0 || !strings.HasPrefix(om.Status.Addresses[0].Address, "10.50.0.") {
			cl.w.Watcher.Violate("I4|address|"+om.Namespace+"/"+om.Name, I4, fmt.Sprintf("provisioned OVirtMachine %s/%s has addresses %v, not the one claimed from pool workers (10.50.0.0/24)",
				om.Namespace, om.Name, om.Status.Addresses), "OVirtMachine "+om.Name)
		}
	}
	cl.w.Logf("[%s] %d provisioned machines with static addresses from pool workers before the deletion", cl.NS, static)
}
