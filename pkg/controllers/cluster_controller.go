package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// OVirtClusterReconciler implements product doc §7.2: an OVirtCluster gets the finalizer,
// status.initialization.provisioned = true (the v1beta1 status.ready) and Ready; on deletion
// the finalizer is dropped; a paused Cluster is skipped. The VMs belong to the OVirtMachines,
// which Cluster API deletes before the OVirtCluster.
//
// It also publishes spec.failureDomains in status.failureDomains, checks them in oVirt
// (FailureDomainsReady), and keeps the affinity groups the cluster's machines need
// (status.affinityGroups, AffinityGroupsReady), which it deletes with the cluster.
type OVirtClusterReconciler struct {
	// Client reads and patches OVirtClusters and reads Clusters and OVirtMachines.
	Client client.Client
	// APIReader reads Namespaces (the providers' allowedNamespaces) and, on deletion, the
	// endpoint's IPAddressClaim (the cache may not have seen one created just before).
	APIReader client.Reader
	// Connector hands out oVirt clients per OVirtProvider; nil leaves out everything in oVirt.
	Connector *Connector
	// Recorder emits events on the OVirtCluster.
	Recorder events.EventRecorder
	// CheckInterval is how often the failure domains and the recorded affinity groups are
	// checked again in oVirt (default 10 minutes); a change of the cluster's spec, providers or
	// templates checks them at once.
	CheckInterval time.Duration
	// RetryInterval is how soon an affinity group the Engine refused or failed to create is
	// tried again (the manager's --retry-interval; default 1 minute).
	RetryInterval time.Duration
	// WatchFilterValue limits reconciliation to labelled objects.
	WatchFilterValue string
	// ManagementClusterID is written into the owner marker of the affinity groups it creates
	// (as into VM markers): another management cluster's cluster of the same namespace/name
	// never takes them for its own.
	ManagementClusterID string
	// Now returns the time; tests may fix it.
	Now func() time.Time

	checks checkTracker
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtclusters,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtclusters/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtmachines,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;create;delete

// SetupWithManager registers the reconciler; Cluster pause transitions reconcile the
// OVirtCluster again.
func (r *OVirtClusterReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.OVirtCluster{}).
		WithOptions(opts).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(util.ClusterToInfrastructureMapFunc(ctx, infrav1.GroupVersion.WithKind("OVirtCluster"), mgr.GetClient(), &infrav1.OVirtCluster{})),
			builder.WithPredicates(predicates.ClusterPausedTransitions(mgr.GetScheme(), log))).
		Watches(&infrav1.OVirtMachine{}, r.settledMachineToCluster(), builder.WithPredicates(placementChanged())).
		// The IPAM provider allocating the endpoint's address wakes the cluster up.
		Owns(&ipamv1.IPAddressClaim{}).
		// The endpoint's address left held for a deleted OVirtCluster (an IPAM provider's stale
		// write put CAPOV's finalizer back) wakes that cluster's reconcile, which releases it.
		Watches(&ipamv1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(heldAddressToCluster)).
		Named("ovirtcluster").
		Complete(r)
}

// Reconcile reconciles one OVirtCluster.
func (r *OVirtClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	oc := &infrav1.OVirtCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, oc); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, releaseAddressesOfGoneHolder(ctx, r.Client, infrav1.IPAddressClaimEndpointLabel, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	// The owner Cluster is optional: product doc §7.2 makes an OVirtCluster ready on its own;
	// with an owner, its pause is honoured.
	cluster, err := util.GetOwnerCluster(ctx, r.Client, oc.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if cluster != nil {
		if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, oc); err != nil || isPaused || requeue {
			return ctrl.Result{}, err
		}
	}
	if oc.DeletionTimestamp.IsZero() {
		if added, err := finalizers.EnsureFinalizer(ctx, r.Client, oc, infrav1.ClusterFinalizer); err != nil || added {
			return ctrl.Result{}, err
		}
	}
	helper, err := patch.NewHelper(oc, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		v1beta1conditions.SetSummary(oc, v1beta1conditions.WithConditions(infrav1.ClusterReadyCondition))
		mirrorConditions(oc, oc.Generation, ownedClusterConditions)
		patchCtx, cancel := deferredPatchContext(ctx)
		defer cancel()
		if err := helper.Patch(patchCtx, oc, patch.WithOwnedV1Beta1Conditions{Conditions: ownedClusterConditions},
			patch.WithOwnedConditions{Conditions: ownedTypes(ownedClusterConditions)}); err != nil {
			reterr = errors.Join(reterr, fmt.Errorf("patching OVirtCluster: %w", err))
		}
	}()

	clusterName := oc.Labels[clusterv1.ClusterNameLabel]
	if cluster != nil {
		clusterName = cluster.Name
	}
	if !oc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, oc, clusterName)
	}
	if oc.Spec.ControlPlaneEndpoint.Host == "" && oc.Spec.ControlPlaneEndpointFromPool != nil {
		// Not provisioned without its endpoint: Cluster API would copy an empty one.
		if claimed, err := r.claimEndpoint(ctx, oc, clusterName); err != nil || !claimed {
			// The IPAddressClaim watch reconciles again once the address is allocated.
			return ctrl.Result{RequeueAfter: r.checkInterval() / 10}, err
		}
	}
	oc.Status.Initialization.Provisioned = ptr.To(true)
	v1beta1conditions.MarkTrue(oc, infrav1.ClusterReadyCondition)
	if r.Connector == nil {
		oc.Status.FailureDomains = publishedFailureDomains(oc)
		return ctrl.Result{}, nil
	}
	return r.reconcilePlacement(ctx, oc, clusterName)
}

// reconcileDelete deletes the cluster in one order: every OVirtMachine of the cluster gone (their
// VMs still use the control-plane endpoint and sit in the affinity groups), then the affinity
// groups (best effort: what the Engine refuses, or a provider that no longer serves the
// namespace, is reported and left in oVirt, never waited on forever), then the endpoint's
// IPAddressClaim (its address is free once no machine answers on it), then the finalizer. An
// OVirtCluster deleted for clusterctl move keeps both: they move with the cluster.
func (r *OVirtClusterReconciler) reconcileDelete(ctx context.Context, oc *infrav1.OVirtCluster, clusterName string) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	v1beta1conditions.MarkFalse(oc, infrav1.ClusterReadyCondition, infrav1.DeletingReason, clusterv1.ConditionSeverityInfo, "deleting")
	if _, moving := oc.Annotations[deleteForMoveAnnotation]; moving {
		// clusterctl move deletes the source objects: the groups and the endpoint's claim move
		// with the cluster (the target's OVirtCluster adopts them by name and marker).
		log.Info("Deleted for clusterctl move: keeping the affinity groups in oVirt and the endpoint's claim", "groups", len(oc.Status.AffinityGroups))
	} else {
		left, err := r.machinesLeft(ctx, oc, clusterName)
		if err != nil {
			return ctrl.Result{}, err
		}
		if len(left) > 0 {
			v1beta1conditions.MarkFalse(oc, infrav1.ClusterReadyCondition, infrav1.DeletingReason, clusterv1.ConditionSeverityInfo,
				"waiting for %d OVirtMachines of the cluster to be deleted (%s) before its affinity groups and control-plane endpoint are released",
				len(left), strings.Join(left[:min(len(left), 5)], ", "))
			// Their deletions wake the cluster (the OVirtMachine watch); the requeue is a backstop.
			return ctrl.Result{RequeueAfter: r.checkInterval() / 10}, nil
		}
		if r.Connector != nil {
			if done, err := r.deleteGroups(ctx, oc); err != nil || !done {
				return ctrl.Result{RequeueAfter: r.checkInterval() / 10}, err
			}
		}
		if oc.Spec.ControlPlaneEndpointFromPool != nil {
			if err := r.releaseEndpoint(ctx, oc); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	r.checks.forget(client.ObjectKeyFromObject(oc).String())
	controllerutil.RemoveFinalizer(oc, infrav1.ClusterFinalizer)
	return ctrl.Result{}, nil
}

// machinesLeft names the OVirtMachines of the cluster that still exist, read from the API server
// (the cache may not hold a machine just created).
func (r *OVirtClusterReconciler) machinesLeft(ctx context.Context, oc *infrav1.OVirtCluster, clusterName string) ([]string, error) {
	if clusterName == "" {
		return nil, nil
	}
	list := &infrav1.OVirtMachineList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(oc.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName}); err != nil {
		return nil, fmt.Errorf("listing the OVirtMachines of cluster %s: %w", clusterName, err)
	}
	names := make([]string, 0, len(list.Items))
	for i := range list.Items {
		names = append(names, list.Items[i].Name)
	}
	slices.Sort(names)
	return names, nil
}

// machineToCluster maps an OVirtMachine to the OVirtClusters of its Cluster.
func (r *OVirtClusterReconciler) machineToCluster(ctx context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return nil
	}
	list := &infrav1.OVirtClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the OVirtClusters of a machine", "OVirtMachine", klog.KObj(o))
		return nil
	}
	return requestsFor(list.Items, nil)
}

// placementSettle is how long an OVirtMachine event waits before it reconciles the OVirtClusters
// of its Cluster: the events of many machines created or deleted together then reconcile each
// cluster once (every reconcile reads all the cluster's machines), and a VM waits at most this
// long longer for a new affinity group.
const placementSettle = time.Second

// settledMachineToCluster enqueues the OVirtClusters of an OVirtMachine's Cluster (of the old and
// the new object on an update) placementSettle after the event; events within that time are
// one reconcile.
func (r *OVirtClusterReconciler) settledMachineToCluster() handler.EventHandler {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		for _, o := range objs {
			for _, req := range r.machineToCluster(ctx, o) {
				q.AddAfter(req, placementSettle)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
	}
}

// placementChanged passes the OVirtMachine events that change what the cluster keeps for its
// machines: a machine created or deleted, its VM created, or a change of its labels, provider,
// template, oVirt cluster, failure domain or anti-affinity. Status updates of the lifecycle do not
// reconcile the OVirtCluster.
func placementChanged() predicate.Funcs {
	key := func(o client.Object) string {
		om, ok := o.(*infrav1.OVirtMachine)
		if !ok {
			return ""
		}
		l := om.Labels
		_, cp := l[clusterv1.MachineControlPlaneLabel]
		return fmt.Sprintf("%s|%t|%s|%s|%s|%s|%s|%s|%s|%t", l[clusterv1.ClusterNameLabel], cp,
			l[clusterv1.MachineDeploymentNameLabel], l[clusterv1.MachineSetNameLabel], om.Spec.Provider, om.Spec.Template,
			om.Spec.OVirtCluster, machineFailureDomain(om), om.Spec.AntiAffinity, om.Status.VMID != "")
	}
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool { return key(e.ObjectOld) != key(e.ObjectNew) },
	}
}

// ownedClusterConditions are the v1beta1-format conditions the manager owns on OVirtClusters;
// with Ready they are also its status.conditions.
var ownedClusterConditions = []clusterv1.ConditionType{clusterv1.ReadyV1Beta1Condition, infrav1.ClusterReadyCondition,
	infrav1.FailureDomainsReadyCondition, infrav1.AffinityGroupsReadyCondition}
