package webhooks

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/topology"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta1"
	"github.com/capov/capov/pkg/featuregates"
)

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1beta1-ovirtmachinetemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,timeoutSeconds=10,admissionReviewVersions=v1,groups=infrastructure.cluster.x-k8s.io,resources=ovirtmachinetemplates,versions=v1beta1,name=default.ovirtmachinetemplate.infrastructure.cluster.x-k8s.io
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1beta1-ovirtmachinetemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,timeoutSeconds=10,admissionReviewVersions=v1,groups=infrastructure.cluster.x-k8s.io,resources=ovirtmachinetemplates,versions=v1beta1,name=validation.ovirtmachinetemplate.infrastructure.cluster.x-k8s.io

// OVirtMachineTemplateWebhook defaults and validates OVirtMachineTemplates with the same rules
// as OVirtMachine, on spec.template.spec.
type OVirtMachineTemplateWebhook struct {
	// Reader reads OVirtProviders (the webhook binary passes its cache).
	Reader client.Reader
	// Gates are the resolved feature gates; disk-clone is the last fallback of diskclone.
	Gates featuregates.Gates
}

var (
	_ admission.Defaulter[*infrav1.OVirtMachineTemplate] = &OVirtMachineTemplateWebhook{}
	_ admission.Validator[*infrav1.OVirtMachineTemplate] = &OVirtMachineTemplateWebhook{}
)

// SetupWithManager registers the OVirtMachineTemplate webhooks with the manager's webhook server.
func (w *OVirtMachineTemplateWebhook) SetupWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.OVirtMachineTemplate{}).WithDefaulter(w).WithValidator(w).Complete(); err != nil {
		return fmt.Errorf("setting up the OVirtMachineTemplate webhooks: %w", err)
	}
	return nil
}

// Default fills spec.template.spec.diskclone and storagedomainname on create (see
// DefaultVMSpec); on update it keeps the create-time defaults.
func (w *OVirtMachineTemplateWebhook) Default(ctx context.Context, t *infrav1.OVirtMachineTemplate) error {
	old := &infrav1.OVirtMachineTemplate{}
	isUpdate, err := oldObjectFromRequest(ctx, old)
	if err != nil {
		return err
	}
	if isUpdate {
		KeepCreateDefaults(&t.Spec.Template.Spec, &old.Spec.Template.Spec)
		return nil
	}
	spec := &t.Spec.Template.Spec
	provider, err := getProvider(ctx, w.Reader, spec.Provider)
	if err != nil {
		return err
	}
	DefaultVMSpec(spec, provider, w.Gates)
	// The builder's logger already carries "OVirtMachineTemplate" (klog.KRef of the request).
	ctrl.LoggerFrom(ctx).V(4).Info("Defaulted the machine template spec",
		"diskclone", ptr.Deref(spec.DiskClone, false), "storagedomainname", spec.StorageDomainName, "providerFound", provider != nil)
	return nil
}

// ValidateCreate checks spec.template.spec with the resolved clone mode and warns when the
// OVirtProvider is missing.
func (w *OVirtMachineTemplateWebhook) ValidateCreate(ctx context.Context, t *infrav1.OVirtMachineTemplate) (admission.Warnings, error) {
	return w.validateSpec(ctx, t)
}

func (w *OVirtMachineTemplateWebhook) validateSpec(ctx context.Context, t *infrav1.OVirtMachineTemplate) (admission.Warnings, error) {
	spec := &t.Spec.Template.Spec
	provider, err := getProvider(ctx, w.Reader, spec.Provider)
	if err != nil {
		return nil, err
	}
	clone := ResolveDiskClone(spec.DiskClone, provider, w.Gates)
	errs := ValidateVMSpec(spec, field.NewPath("spec", "template", "spec"), clone)
	return providerWarnings(spec, provider, clone, w.Gates), invalid("OVirtMachineTemplate", t.Name, errs)
}

// ValidateUpdate refuses every change of the spec: Cluster API rolls machines out by pointing
// at a new template, and a changed template would make existing machines differ from it
// silently. Cluster API's topology controller sends server-side-apply dry-run requests with the
// topology.cluster.x-k8s.io/dry-run annotation to compute its diffs; those are exempt from
// immutability (they change nothing), as the InfraMachineTemplate contract asks, but their spec
// is still validated.
func (w *OVirtMachineTemplateWebhook) ValidateUpdate(ctx context.Context, oldT, t *infrav1.OVirtMachineTemplate) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(oldT.Spec, t.Spec) {
		return nil, nil
	}
	if req, ok := requestFromContext(ctx); ok && topology.IsDryRunRequest(req, t) {
		return w.validateSpec(ctx, t)
	}
	var errs field.ErrorList
	changed := changedFields(field.NewPath("spec", "template", "spec"), &oldT.Spec.Template.Spec, &t.Spec.Template.Spec)
	if !equality.Semantic.DeepEqual(oldT.Spec.Template.ObjectMeta, t.Spec.Template.ObjectMeta) {
		changed = append(changed, field.NewPath("spec", "template", "metadata"))
	}
	if len(changed) == 0 {
		changed = append(changed, field.NewPath("spec")) // a field outside spec.template
	}
	for _, p := range changed {
		errs = append(errs, field.Forbidden(p,
			"an OVirtMachineTemplate cannot change: create a new OVirtMachineTemplate with the change and point "+
				"the MachineDeployment or KubeadmControlPlane spec.template.spec.infrastructureRef at it (Cluster API then rolls the machines)"))
	}
	return nil, invalid("OVirtMachineTemplate", t.Name, errs)
}

// ValidateDelete allows every deletion.
func (w *OVirtMachineTemplateWebhook) ValidateDelete(context.Context, *infrav1.OVirtMachineTemplate) (admission.Warnings, error) {
	return nil, nil
}
