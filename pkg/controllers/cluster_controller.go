package controllers

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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
	"sigs.k8s.io/controller-runtime/pkg/handler"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// OVirtClusterReconciler implements product doc §7.2: an OVirtCluster gets the finalizer,
// status.initialization.provisioned = true (the v1beta1 status.ready) and Ready; on deletion
// the finalizer is dropped; a paused Cluster is skipped. The VMs belong to the OVirtMachines,
// which Cluster API deletes before the OVirtCluster.
type OVirtClusterReconciler struct {
	// Client reads and patches OVirtClusters and reads Clusters.
	Client client.Client
	// WatchFilterValue limits reconciliation to labelled objects.
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtclusters,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtclusters/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch

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
		controllerutil.RemoveFinalizer(oc, infrav1.ClusterFinalizer)
		return ctrl.Result{}, nil
	}
	oc.Status.Initialization.Provisioned = ptr.To(true)
	v1beta1conditions.MarkTrue(oc, infrav1.ClusterReadyCondition)
	return ctrl.Result{}, nil
}

// ownedClusterConditions are the v1beta1-format conditions the manager owns on OVirtClusters;
// with Ready they are also its status.conditions.
var ownedClusterConditions = []clusterv1.ConditionType{clusterv1.ReadyV1Beta1Condition, infrav1.ClusterReadyCondition}
