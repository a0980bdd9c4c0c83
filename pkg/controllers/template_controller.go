package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// OVirtMachineTemplateReconciler publishes status.capacity (cpu, memory) of each template so
// that the cluster autoscaler can scale a MachineDeployment up from zero.
type OVirtMachineTemplateReconciler struct {
	// Client reads and patches templates.
	Client client.Client
	// WatchFilterValue limits reconciliation to labelled objects.
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtmachinetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtmachinetemplates/status,verbs=get;patch;update

// SetupWithManager registers the reconciler.
func (r *OVirtMachineTemplateReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.OVirtMachineTemplate{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(opts).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), ctrl.LoggerFrom(ctx), r.WatchFilterValue)).
		Named("ovirtmachinetemplate").
		Complete(r)
}

// Reconcile sets status.capacity from spec.template.spec.cpu and memory.
func (r *OVirtMachineTemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &infrav1.OVirtMachineTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	capacity := t.Spec.Template.Spec.Capacity()
	if equality.Semantic.DeepEqual(capacity, t.Status.Capacity) {
		return ctrl.Result{}, nil
	}
	base := t.DeepCopy()
	t.Status.Capacity = capacity
	return ctrl.Result{}, r.Client.Status().Patch(ctx, t, client.MergeFrom(base))
}
