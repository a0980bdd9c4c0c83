package webhooks

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1beta2-ovirtclustertemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,timeoutSeconds=10,admissionReviewVersions=v1,groups=infrastructure.cluster.x-k8s.io,resources=ovirtclustertemplates,versions=v1beta2,name=validation.ovirtclustertemplate.infrastructure.cluster.x-k8s.io

// OVirtClusterTemplateWebhook validates OVirtClusterTemplates, the InfraClusterTemplate of a
// ClusterClass: spec.template.spec gets the creation-time checks of an OVirtCluster spec, and
// the spec never changes afterwards. It reads nothing: spec.template.spec.provider is checked
// against the OVirtProvider's allowedNamespaces when the topology controller creates the
// OVirtCluster (in the Cluster's namespace, which need not be the template's).
type OVirtClusterTemplateWebhook struct{}

var _ admission.Validator[*infrav1.OVirtClusterTemplate] = &OVirtClusterTemplateWebhook{}

// SetupWithManager registers the OVirtClusterTemplate webhook with the manager's webhook
// server. The kind has one API version (v1beta2), so there is no converter.
func (w *OVirtClusterTemplateWebhook) SetupWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.OVirtClusterTemplate{}).
		WithValidator(w).
		Complete(); err != nil {
		return fmt.Errorf("setting up the OVirtClusterTemplate webhook: %w", err)
	}
	return nil
}

// ValidateCreate checks spec.template.spec as the OVirtCluster webhook checks a new
// OVirtCluster's spec (ValidateOVirtClusterSpec): the endpoint when it is set, the endpoint
// pool reference and the placement fields. An empty controlPlaneEndpoint is the usual case in a
// template: a ClusterClass patch sets it, or controlPlaneEndpointFromPool claims it.
func (w *OVirtClusterTemplateWebhook) ValidateCreate(_ context.Context, t *infrav1.OVirtClusterTemplate) (admission.Warnings, error) {
	errs, warnings := ValidateOVirtClusterSpec(&t.Spec.Template.Spec, field.NewPath("spec", "template", "spec"))
	return warnings, invalid("OVirtClusterTemplate", t.Name, errs)
}

// ValidateUpdate refuses every change of the spec: the topology controller creates each
// OVirtCluster from the template once, and a ClusterClass rolls a change out by pointing
// spec.infrastructure.templateRef at a new template. Changes of the object's own metadata
// (labels, annotations, finalizers, owner references) are allowed.
func (w *OVirtClusterTemplateWebhook) ValidateUpdate(_ context.Context, oldT, t *infrav1.OVirtClusterTemplate) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(oldT.Spec, t.Spec) {
		return nil, nil
	}
	changed := changedFields(field.NewPath("spec", "template", "spec"), &oldT.Spec.Template.Spec, &t.Spec.Template.Spec)
	if !equality.Semantic.DeepEqual(oldT.Spec.Template.ObjectMeta, t.Spec.Template.ObjectMeta) {
		changed = append(changed, field.NewPath("spec", "template", "metadata"))
	}
	if len(changed) == 0 {
		changed = append(changed, field.NewPath("spec")) // a field outside spec.template
	}
	var errs field.ErrorList
	for _, p := range changed {
		errs = append(errs, field.Forbidden(p,
			"an OVirtClusterTemplate cannot change: create a new OVirtClusterTemplate with the change and point "+
				"the ClusterClass spec.infrastructure.templateRef at it"))
	}
	return nil, invalid("OVirtClusterTemplate", t.Name, errs)
}

// ValidateDelete allows every deletion.
func (w *OVirtClusterTemplateWebhook) ValidateDelete(context.Context, *infrav1.OVirtClusterTemplate) (admission.Warnings, error) {
	return nil, nil
}
