package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
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
	// WatchFilterValue limits reconciliation to labelled objects.
	WatchFilterValue string
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
		Watches(&infrav1.OVirtMachine{}, handler.EnqueueRequestsFromMapFunc(r.machineToCluster),
			builder.WithPredicates(placementChanged())).
		// The IPAM provider allocating the endpoint's address wakes the cluster up.
		Owns(&ipamv1.IPAddressClaim{}).
		Named("ovirtcluster").
		Complete(r)
}

// Reconcile reconciles one OVirtCluster.
func (r *OVirtClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	oc := &infrav1.OVirtCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, oc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
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

	if !oc.DeletionTimestamp.IsZero() {
		v1beta1conditions.MarkFalse(oc, infrav1.ClusterReadyCondition, infrav1.DeletingReason, clusterv1.ConditionSeverityInfo, "deleting")
		if _, moving := oc.Annotations[deleteForMoveAnnotation]; moving {
			// clusterctl move deletes the source objects: the groups move with the cluster (the
			// target's OVirtCluster adopts them by name and marker).
			ctrl.LoggerFrom(ctx).Info("Deleted for clusterctl move: keeping the affinity groups in oVirt", "groups", len(oc.Status.AffinityGroups))
		} else if r.Connector != nil {
			// The affinity groups go with the cluster; the finalizer stays until they are gone.
			if done, err := r.deleteGroups(ctx, oc); err != nil || !done {
				return ctrl.Result{RequeueAfter: r.checkInterval() / 10}, err
			}
		}
		if _, moving := oc.Annotations[deleteForMoveAnnotation]; !moving && oc.Spec.ControlPlaneEndpointFromPool != nil {
			if err := r.releaseEndpoint(ctx, oc); err != nil {
				return ctrl.Result{}, err
			}
		}
		r.checks.forget(req.String())
		controllerutil.RemoveFinalizer(oc, infrav1.ClusterFinalizer)
		return ctrl.Result{}, nil
	}
	clusterName := oc.Labels[clusterv1.ClusterNameLabel]
	if cluster != nil {
		clusterName = cluster.Name
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
