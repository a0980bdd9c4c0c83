package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/featuregates"
	"github.com/capov/capov/pkg/ovirt"
)

// providerIndex indexes OVirtMachines by spec.provider.
const providerIndex = "spec.provider"

// vmIDIndex indexes OVirtMachines by the VM ids they name (lower-case): status.vmID and the id
// in spec.providerID (all a machine has after a move or a restore). It maps workload Nodes,
// whose SMBIOS system UUID is the VM id, to their machine, and tells the inventory that a VM
// whose marker names a gone object is still wanted.
const vmIDIndex = "status.vmID"

// machineVMIDs is vmIDIndex's extractor.
func machineVMIDs(o client.Object) []string {
	om := o.(*infrav1.OVirtMachine)
	var ids []string
	if id := om.Status.VMID; id != "" {
		ids = append(ids, strings.ToLower(id))
	}
	if id, ok := infrav1.VMIDFromProviderID(om.Spec.ProviderID); ok && !slices.Contains(ids, strings.ToLower(id)) {
		ids = append(ids, strings.ToLower(id))
	}
	return ids
}

// ClearFailureAnnotation asks the manager to clear status.deprecated.v1beta1.failureReason and
// failureMessage (the v1beta1 status.failureReason and status.failureMessage). The admission
// webhook sets it when a user removes those fields with a plain `kubectl patch` (product doc
// §4.3): the API server drops status changes sent to the main resource, so the request is
// carried to the manager through this annotation. A patch of the status subresource clears
// them directly (v1beta1: {"status":{"failureReason":null,...}}, converted by the API server;
// v1beta2: {"status":{"deprecated":{"v1beta1":{"failureReason":null,...}}}}).
const ClearFailureAnnotation = "capov.infrastructure.cluster.x-k8s.io/clear-failure"

// shutdownStartedAnnotation records when the manager asked the VM to shut down during deletion,
// so that it can stop the VM hard once Intervals.ShutdownTimeout has passed.
const shutdownStartedAnnotation = "capov.infrastructure.cluster.x-k8s.io/shutdown-started"

// deleteForMoveAnnotation marks objects that clusterctl move deletes from the source cluster:
// the VM is not deleted, it moves with the object.
const deleteForMoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"

// Intervals are the waits of the OVirtMachine lifecycle.
type Intervals struct {
	// VMPoll re-reads a VM while oVirt creates, resizes, starts or stops it.
	VMPoll time.Duration
	// NodePoll re-checks the workload cluster for the Node.
	NodePoll time.Duration
	// Retry re-tries a step that waits for a change in oVirt (missing template, vNIC profile,
	// refused request): slow enough not to storm the Engine.
	Retry time.Duration
	// NonSystemDiskRetry re-checks a VM whose deletion is blocked by a non-system disk
	// (product doc §4.4: every minute).
	NonSystemDiskRetry time.Duration
	// ShutdownTimeout is how long a graceful shutdown may take before the VM is stopped.
	ShutdownTimeout time.Duration
	// VMRefresh is the minimum time between two reads of the VM of a Ready machine: reconciles
	// triggered by Machine or Node updates in between use the last observation.
	VMRefresh time.Duration
	// LockedPatience is how long a VM may stay image_locked before the condition says
	// VMLockedTooLong and the VM is read less often (0: never).
	LockedPatience time.Duration
}

// DefaultIntervals are the production defaults.
func DefaultIntervals() Intervals {
	return Intervals{
		VMPoll: 10 * time.Second, NodePoll: 15 * time.Second, Retry: time.Minute,
		NonSystemDiskRetry: time.Minute, ShutdownTimeout: 5 * time.Minute, VMRefresh: 10 * time.Minute,
		LockedPatience: 30 * time.Minute,
	}
}

// OVirtMachineReconciler drives the VM of each OVirtMachine through the lifecycle of
// DESIGN.md §5: create from template, disks, NICs, power, Node providerID; and deletion.
type OVirtMachineReconciler struct {
	// Client reads cached objects and patches OVirtMachines.
	Client client.Client
	// APIReader reads bootstrap data Secrets without caching every Secret of the cluster, and a
	// deleted machine's IPAddressClaims (the cache may not have seen one created just before).
	APIReader client.Reader
	// Connector hands out oVirt clients per OVirtProvider.
	Connector *Connector
	// ClusterCache reaches workload clusters to set Node providerIDs.
	ClusterCache clustercache.ClusterCache
	// Recorder emits events on the OVirtMachine.
	Recorder events.EventRecorder
	// Gates are the resolved feature gates.
	Gates featuregates.Gates
	// Intervals are the waits of the lifecycle.
	Intervals Intervals
	// KeepBootstrapData stores the bootstrap data in the VM's initialization.custom_script at
	// creation and leaves it there (by default it goes to the VM's first run only, run once).
	KeepBootstrapData bool
	// WatchFilterValue limits reconciliation to labelled objects.
	WatchFilterValue string
	// ManagementClusterID is written into the owner marker of every VM (management-cluster=):
	// it tells this management cluster's VMs from those of another sharing the Engine.
	ManagementClusterID string
	// Inventory, when set, gives Ready machines their VM from the per-provider bulk inventory
	// instead of a read of their own, and wakes them when their VM changed.
	Inventory *Inventory
	// Now returns the time; tests may fix it.
	Now func() time.Time

	reads      readTracker
	scheduled  readSchedule
	waits      waitEstimator
	tags       tagCache
	controller controller.Controller
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtmachines,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtmachines/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtmachines/finalizers,verbs=update
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirthostdeviceclaims,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch;patch;update

// SetupWithManager registers the reconciler and its watches: Machines (bootstrap data,
// deletion), Clusters (pause, infrastructure provisioned), OVirtProviders (a provider that is
// created or becomes ready again) and workload cluster connection changes.
func (r *OVirtMachineReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	log := ctrl.LoggerFrom(ctx)
	if err := mgr.GetFieldIndexer().IndexField(ctx, &infrav1.OVirtMachine{}, providerIndex, func(o client.Object) []string {
		return []string{o.(*infrav1.OVirtMachine).Spec.Provider}
	}); err != nil {
		return fmt.Errorf("indexing OVirtMachines by provider: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &infrav1.OVirtMachine{}, vmIDIndex, machineVMIDs); err != nil {
		return fmt.Errorf("indexing OVirtMachines by VM id: %w", err)
	}
	clusterToMachines, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &infrav1.OVirtMachineList{}, mgr.GetScheme())
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.OVirtMachine{}).
		WithOptions(opts).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Machine{},
			handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("OVirtMachine")))).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToMachines),
			builder.WithPredicates(predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(mgr.GetScheme(), log))).
		Watches(&infrav1.OVirtProvider{}, handler.EnqueueRequestsFromMapFunc(r.providerToMachines),
			builder.WithPredicates(providerBecameUsable())).
		Watches(&infrav1.OVirtCluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToPlacementMachines),
			builder.WithPredicates(groupsOrDomainsChanged())).
		// An IPAM provider allocating an address (status.addressRef) wakes the machine up.
		Owns(&ipamv1.IPAddressClaim{}).
		// An address left held for a deleted machine (an IPAM provider's stale write put
		// CAPOV's finalizer back) wakes that machine's reconcile, which releases it.
		Watches(&ipamv1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(heldAddressToMachine)).
		// The For watch queues the machines of the initial list at low priority; those
		// that are not Ready go before them (unfinishedFirst).
		Watches(&infrav1.OVirtMachine{}, unfinishedFirst())
	if r.ClusterCache != nil {
		b = b.WatchesRawSource(r.ClusterCache.GetClusterSource("ovirtmachine", clusterToMachines))
	}
	if r.Inventory != nil {
		b = b.WatchesRawSource(r.Inventory.Source())
	}
	c, err := b.Named("ovirtmachine").Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	return nil
}

// nodeToMachines maps a workload-cluster Node to the OVirtMachine of its VM, so that a Node
// registering is handled at once rather than at the next poll.
func (r *OVirtMachineReconciler) nodeToMachines(ctx context.Context, o client.Object) []reconcile.Request {
	node, ok := o.(*corev1.Node)
	if !ok {
		return nil
	}
	id := strings.ToLower(node.Status.NodeInfo.SystemUUID)
	if pid, found := strings.CutPrefix(node.Spec.ProviderID, infrav1.ProviderIDPrefix); found {
		id = strings.ToLower(pid)
	}
	if id == "" {
		return nil
	}
	list := &infrav1.OVirtMachineList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{vmIDIndex: id}); err != nil {
		return nil
	}
	return requestsFor(list.Items, nil)
}

// providerBecameUsable passes OVirtProvider creations and updates that make it ready, so that
// machines waiting for their provider continue at once, without reacting to the periodic
// connectivity checks.
func providerBecameUsable() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldP, ok1 := e.ObjectOld.(*infrav1.OVirtProvider)
			newP, ok2 := e.ObjectNew.(*infrav1.OVirtProvider)
			return ok1 && ok2 && (!conditions.IsTrue(oldP, infrav1.ReadyCondition) && conditions.IsTrue(newP, infrav1.ReadyCondition) ||
				oldP.Generation != newP.Generation)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

func (r *OVirtMachineReconciler) providerToMachines(ctx context.Context, o client.Object) []reconcile.Request {
	list := &infrav1.OVirtMachineList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{providerIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing OVirtMachines of an OVirtProvider", "OVirtProvider", klog.KObj(o))
		return nil
	}
	return requestsFor(list.Items, nil)
}

// machineScope is what one reconcile of an OVirtMachine works on.
type machineScope struct {
	log      logr.Logger
	om       *infrav1.OVirtMachine
	machine  *clusterv1.Machine
	cluster  *clusterv1.Cluster
	provider *infrav1.OVirtProvider
	// oc is the Cluster's OVirtCluster, read on demand (ovirtCluster).
	oc    *infrav1.OVirtCluster
	ovirt ovirt.Client
	vm    *ovirt.VM
	// vmRead is set when vm was just read from oVirt (it then counts as an observation).
	vmRead bool
	// vmFromStatus is set when vm stands for the VM as status last recorded it, without a read:
	// its fields beyond id, name and status are unknown.
	vmFromStatus bool
	// listed is the VM as the provider's inventory listed it, when the machine takes it from
	// there instead of reading it (ensureVM).
	listed *ovirt.VM
	// allocated are the addresses the IPAM pools allocated to each NIC (reconcileIPAddresses).
	allocated [][]allocatedAddress
}

// Reconcile runs the preamble of every CAPI reconciler (object, owner Machine, Cluster, pause,
// finalizer, patch helper) and then the normal or the deletion branch. The status is patched
// once, in a deferred call, with the conditions derived by updateMachineStatus.
func (r *OVirtMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	om := &infrav1.OVirtMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, om); err != nil {
		if apierrors.IsNotFound(err) {
			r.reads.forget(req.NamespacedName)
			r.scheduled.forget(req.NamespacedName)
			r.waits.forget(req.NamespacedName)
			return ctrl.Result{}, releaseAddressesOfGoneHolder(ctx, r.Client, infrav1.IPAddressClaimMachineLabel, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if r.WatchFilterValue != "" && om.Labels[clusterv1.WatchLabel] != r.WatchFilterValue {
		// Another manager's machine, woken by a source the event filter does not see (a Node of
		// a workload cluster shared by clusters of several managers maps to it by VM id).
		log.V(4).Info("Not reconciling: the object does not carry this manager's watch filter")
		return ctrl.Result{}, nil
	}

	machine, err := util.GetOwnerMachine(ctx, r.Client, om.ObjectMeta)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		if om.DeletionTimestamp.IsZero() {
			// The Machine went before it was ready (deleted within a moment of its creation,
			// before Cluster API's finalizer was on it): the garbage collector deletes this
			// object, its dependent, and that deletion reconciles it. Nothing to retry meanwhile.
			log.Info("The owner Machine is gone; waiting for the garbage collector to delete this OVirtMachine")
			return ctrl.Result{}, nil
		}
		// Being deleted and the owner Machine is already gone (deleted with --cascade=orphan,
		// or its finalizer removed by hand): nothing else will ever delete the VM, and waiting
		// for the Machine would keep the finalizer forever. Delete it as usual.
		log.Info("The owner Machine is gone; deleting the VM all the same")
		machine = nil
	}
	if machine == nil && om.DeletionTimestamp.IsZero() {
		log.V(2).Info("Waiting for the Machine controller to set the owner reference")
		return ctrl.Result{}, nil
	}
	var cluster *clusterv1.Cluster
	switch {
	case machine != nil:
		log = log.WithValues("Machine", klog.KObj(machine))
		cluster, err = util.GetClusterFromMetadata(ctx, r.Client, machine.ObjectMeta)
		if err != nil && om.DeletionTimestamp.IsZero() {
			log.Info("Waiting for the Machine's Cluster", "reason", err.Error())
			return ctrl.Result{}, nil
		}
	default:
		// Deleting without a Machine: the Cluster's pause still holds, found by the object's own
		// cluster-name label; without one (or without the Cluster) nothing pauses the deletion.
		cluster, _ = util.GetClusterFromMetadata(ctx, r.Client, om.ObjectMeta)
	}
	if cluster != nil {
		log = log.WithValues("Cluster", klog.KObj(cluster))
		ctx = ctrl.LoggerInto(ctx, log)
		if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, om); err != nil || isPaused || requeue {
			return ctrl.Result{}, err
		}
	}
	if om.DeletionTimestamp.IsZero() {
		if added, err := finalizers.EnsureFinalizer(ctx, r.Client, om, infrav1.MachineFinalizer); err != nil || added {
			return ctrl.Result{}, err
		}
	}

	helper, err := patch.NewHelper(om, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	s := &machineScope{log: log, om: om, machine: machine, cluster: cluster}
	defer func() {
		updateMachineStatus(s)
		patchCtx, cancel := deferredPatchContext(ctx)
		defer cancel()
		if err := helper.Patch(patchCtx, om, patch.WithOwnedV1Beta1Conditions{Conditions: ownedMachineConditions},
			patch.WithOwnedConditions{Conditions: ownedTypes(ownedMachineConditions)}); err != nil {
			// A machine whose finalizer was just removed is gone: nothing left to patch.
			if !apierrors.IsNotFound(err) || om.DeletionTimestamp.IsZero() {
				reterr = errors.Join(reterr, fmt.Errorf("patching OVirtMachine: %w", err))
			}
		}
	}()

	if _, ok := om.Annotations[ClearFailureAnnotation]; ok {
		reason, _ := machineFailure(om)
		log.Info("Clearing status.deprecated.v1beta1.failureReason on request", "failureReason", ptr.Deref(reason, ""))
		clearMachineFailure(om)
		delete(om.Annotations, ClearFailureAnnotation)
	}

	if !om.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	res, err := r.reconcileNormal(ctx, s)
	if vmIDOf(om) != "" && !provisioned(om) {
		// In flight: its next reconcile goes before new machines' (the queue's default
		// priority), so that under a saturated oVirt rate limit the machines that have started
		// in oVirt finish before new ones start. Its reconciles before a scheduled read cost no
		// Engine call (readSchedule), so serving it first spends no budget.
		res.Priority = ptr.To(inFlightPriority)
	}
	return res, err
}

// unfinishedFirst queues the OVirtMachines of a start's initial list that are not Ready yet
// (being created, in flight, being deleted) at the priority their events have while the manager
// runs, so that a restart does not put them behind every Ready machine: the For watch queues the
// whole initial list at handler.LowPriority, and the queue keeps an item's highest priority.
func unfinishedFirst() handler.TypedFuncs[client.Object, reconcile.Request] {
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			om, ok := e.Object.(*infrav1.OVirtMachine)
			if !ok || !e.IsInInitialList || (provisioned(om) && om.DeletionTimestamp.IsZero()) {
				return
			}
			pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
			if !ok {
				return // without a priority queue the For watch's add is all there is
			}
			priority := 0
			if vmIDOf(om) != "" && om.DeletionTimestamp.IsZero() {
				priority = inFlightPriority
			}
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(priority)}, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(om)})
		},
	}
}

// inFlightPriority is the work-queue priority of a machine whose VM exists and that is not Ready
// yet; a new object's event has priority 0, the initial list's and the inventory's wakes
// handler.LowPriority.
const inFlightPriority = 10

// machineTimes is a time per machine, shared by concurrent reconciles (reconciles of one machine
// never run at the same time).
type machineTimes struct {
	mu sync.Mutex
	at map[types.NamespacedName]time.Time
}

func (m *machineTimes) set(key types.NamespacedName, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		m.at = map[types.NamespacedName]time.Time{}
	}
	m.at[key] = t
}

func (m *machineTimes) get(key types.NamespacedName) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.at[key]
	return t, ok
}

func (m *machineTimes) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.at, key)
}

// readSchedule remembers, for each machine waiting on oVirt work (its disks being created or
// extended, its boot), when it reads its VM next: a reconcile in between (its own status patch, a
// Machine or Cluster update) would read the VM again for nothing.
type readSchedule struct{ machineTimes }

// ahead returns how long until the scheduled read of key, when there is one still ahead; a due
// read is forgotten (it happens now).
func (s *readSchedule) ahead(key types.NamespacedName, now time.Time) (time.Duration, bool) {
	at, ok := s.get(key)
	if !ok {
		return 0, false
	}
	if !now.Before(at) {
		s.forget(key)
		return 0, false
	}
	return at.Sub(now), true
}

// readTracker remembers when the VM of each Ready machine was last read from oVirt, so that
// reconciles triggered by unrelated updates do not cost an Engine call each.
type readTracker struct{ machineTimes }

func (t *readTracker) fresh(key types.NamespacedName, now time.Time, maxAge time.Duration) (time.Duration, bool) {
	last, ok := t.get(key)
	if !ok {
		return 0, false
	}
	age := now.Sub(last)
	if age < 0 || age >= maxAge {
		return 0, false
	}
	return maxAge - age, true
}

func (t *readTracker) record(key types.NamespacedName, now time.Time) { t.set(key, now) }

// waitEstimator learns how long oVirt takes for each step (image copy, disk extension, boot)
// from the machines that finished it: an exponentially weighted average per step and reason.
// It also remembers when each machine began its current wait, as this process saw it (the
// condition's LastTransitionTime, read back from the API server, has a one-second resolution:
// a read aimed from it comes up to a second early, and finds the step unfinished).
type waitEstimator struct {
	mu     sync.Mutex
	est    map[string]time.Duration
	starts map[types.NamespacedName]waitStart
}

// waitStart is the wait of one machine for one step: when it began, the margin its first read
// was aimed after the expected end, and whether a read found the step still unfinished.
type waitStart struct {
	step   clusterv1.ConditionType
	reason string
	at     time.Time
	margin time.Duration
	// expected is the estimate the first read was aimed with (0: none).
	expected time.Duration
	early    bool
	// fresh: recorded by began, not yet looked at by begin.
	fresh bool
}

// begin returns the wait of key for step and reason: the one recorded, a read having found it
// unfinished since (early), or a new one from now (from fallback, the condition's
// LastTransitionTime, when that is older than a second: a wait that began before this process).
func (e *waitEstimator) begin(key types.NamespacedName, step clusterv1.ConditionType, reason string, now, fallback time.Time) waitStart {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ws, ok := e.starts[key]; ok && ws.step == step && ws.reason == reason {
		if ws.fresh {
			ws.fresh = false // the waitFor right after the action
		} else {
			ws.early = true // a read found the step unfinished
		}
		e.starts[key] = ws
		return ws
	}
	at := now
	if !fallback.IsZero() && now.Sub(fallback) > time.Second {
		at = fallback
	}
	if e.starts == nil {
		e.starts = map[types.NamespacedName]waitStart{}
	}
	ws := waitStart{step: step, reason: reason, at: at}
	e.starts[key] = ws
	return ws
}

// began records that key's wait for step and reason begins now: the action that oVirt now
// works on (a create, a disk extension, a start) was just accepted. The condition's
// LastTransitionTime cannot say so: a condition that was False already keeps it.
func (e *waitEstimator) began(om *infrav1.OVirtMachine, step clusterv1.ConditionType, reason string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.starts == nil {
		e.starts = map[types.NamespacedName]waitStart{}
	}
	e.starts[client.ObjectKeyFromObject(om)] = waitStart{step: step, reason: reason, at: now, fresh: true}
}

// aimed records that the next read of key's wait is aimed at the expected end plus margin.
func (e *waitEstimator) aimed(key types.NamespacedName, expected, margin time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ws, ok := e.starts[key]; ok {
		ws.expected, ws.margin = expected, margin
		e.starts[key] = ws
	}
}

// forget drops the wait of a machine that is gone.
func (e *waitEstimator) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.starts, key)
}

// finished records the wait of a step that was False with reason and is done now. The wait is
// measured from when it began in this process when known (else from LastTransitionTime). A step
// found done at the first read, aimed a margin after the expected end, says only that it took no
// longer than that: the read may have come late (the work queue and the rate limiter delay it
// under load), and counting that delay would make every later read later still. It counts as
// a sixteenth less than the estimate it was aimed with, so that an estimate too long shrinks
// until a read comes early, which counts the whole wait.
func (e *waitEstimator) finished(om *infrav1.OVirtMachine, step clusterv1.ConditionType, reason string, now time.Time) {
	c := v1beta1conditions.Get(om, step)
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != reason {
		return
	}
	key := client.ObjectKeyFromObject(om)
	e.mu.Lock()
	defer e.mu.Unlock()
	start := c.LastTransitionTime.Time
	var aimed time.Duration
	if ws, ok := e.starts[key]; ok && ws.step == step && ws.reason == reason {
		start = ws.at
		if !ws.early {
			aimed = ws.expected
		}
		delete(e.starts, key)
	}
	d := now.Sub(start)
	if d <= 0 || d > time.Hour {
		return
	}
	if aimed > 0 {
		d = min(d, aimed-aimed/16)
	}
	if e.est == nil {
		e.est = map[string]time.Duration{}
	}
	k := string(step) + "/" + reason
	if old, ok := e.est[k]; ok {
		d = (3*old + d) / 4
	}
	e.est[k] = d
}

// expected returns the learned duration of a step.
func (e *waitEstimator) expected(step clusterv1.ConditionType, reason string) (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.est[string(step)+"/"+reason]
	return d, ok
}

// ownedMachineConditions are the conditions the manager owns on OVirtMachines.
var ownedMachineConditions = []clusterv1.ConditionType{
	clusterv1.ReadyV1Beta1Condition,
	infrav1.CanConnectToOVirtCondition, infrav1.MachineCreatedCondition, infrav1.MachineDiskResizedCondition,
	infrav1.MachineNetworkSetCondition, infrav1.MachineOnCondition, infrav1.K8sProviderIDSetupCondition,
	infrav1.MachineDeletedCondition,
}
