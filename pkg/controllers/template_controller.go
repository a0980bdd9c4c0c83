package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/provideraccess"
)

// OVirtMachineTemplateReconciler publishes status.capacity (cpu, memory, hugepages) of each
// template so that the cluster autoscaler can scale a MachineDeployment up from zero.
type OVirtMachineTemplateReconciler struct {
	// Client reads and patches templates.
	Client client.Client
	// APIReader reads what the cache does not hold (the provider's allowed namespaces).
	APIReader client.Reader
	// Connector, when set, reads the CPU and memory of the oVirt template for a spec that
	// inherits them.
	Connector *Connector
	// Retry is how soon a template whose oVirt template could not be read is tried again.
	Retry time.Duration
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

// Reconcile sets status.capacity from spec.template.spec.cpu and memory, and, for what the spec
// inherits, from the oVirt template (one Engine call per template and change; none when the spec
// names both).
func (r *OVirtMachineTemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &infrav1.OVirtMachineTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	spec := t.Spec.Template.Spec.DeepCopy()
	var res ctrl.Result
	if (spec.CPU == nil || spec.Memory == nil) && r.Connector != nil {
		if err := r.inherit(ctx, t, spec); err != nil {
			// The capacity of the spec's own fields is published meanwhile.
			ctrl.LoggerFrom(ctx).Info("Cannot read the oVirt template's CPU and memory for status.capacity; retrying", "template", spec.Template, "error", err.Error())
			res.RequeueAfter = r.Retry
		}
	}
	capacity := spec.Capacity()
	if equality.Semantic.DeepEqual(capacity, t.Status.Capacity) {
		return res, nil
	}
	base := t.DeepCopy()
	t.Status.Capacity = capacity
	return res, r.Client.Status().Patch(ctx, t, client.MergeFrom(base))
}

// inherit fills the spec's missing CPU and memory from the oVirt template it names.
func (r *OVirtMachineTemplateReconciler) inherit(ctx context.Context, t *infrav1.OVirtMachineTemplate, spec *infrav1.OVirtVMSpec) error {
	p := &infrav1.OVirtProvider{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: spec.Provider}, p); err != nil {
		return fmt.Errorf("reading OVirtProvider %s: %w", spec.Provider, err)
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	if ok, why, err := provideraccess.Allowed(ctx, reader, p, t.Namespace); err != nil || !ok {
		if err == nil {
			err = errors.New(why)
		}
		return err
	}
	cl, _, err := r.Connector.Connect(ctx, p)
	if err != nil {
		return err
	}
	tpl, err := cl.FindTemplate(ctx, spec.Template, spec.OVirtCluster)
	if err != nil {
		return err
	}
	if spec.CPU == nil && tpl.Sockets > 0 && tpl.Cores > 0 && tpl.Threads > 0 {
		spec.CPU = &infrav1.CPU{Sockets: int32(tpl.Sockets), Cores: int32(tpl.Cores), Threads: int32(tpl.Threads)}
	}
	if spec.Memory == nil && tpl.MemoryBytes > 0 {
		spec.Memory = &infrav1.Memory{SizeMB: tpl.MemoryBytes >> 20}
	}
	return nil
}
