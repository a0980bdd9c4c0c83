package webhooks

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/topology"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/featuregates"
	"github.com/capov/capov/pkg/webhooks/conversion"
)

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1beta2-ovirtmachinetemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,timeoutSeconds=10,admissionReviewVersions=v1,groups=infrastructure.cluster.x-k8s.io,resources=ovirtmachinetemplates,versions=v1beta2,name=default.ovirtmachinetemplate.infrastructure.cluster.x-k8s.io
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1beta2-ovirtmachinetemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,timeoutSeconds=10,admissionReviewVersions=v1,groups=infrastructure.cluster.x-k8s.io,resources=ovirtmachinetemplates,versions=v1beta2,name=validation.ovirtmachinetemplate.infrastructure.cluster.x-k8s.io

// OVirtMachineTemplateWebhook validates OVirtMachineTemplates with the same rules as
// OVirtMachine, on spec.template.spec. It does not default diskclone or storagedomainname: the
// OVirtMachine defaulter does, when a machine (a node) is created from the template.
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

// SetupWithManager registers the OVirtMachineTemplate webhooks with the manager's webhook server,
// and its v1beta1 <-> v1beta2 converter with the /convert endpoint.
func (w *OVirtMachineTemplateWebhook) SetupWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.OVirtMachineTemplate{}).
		WithConverter(conversion.OVirtMachineTemplateConverter()).
		WithDefaulter(w).WithValidator(w).
		Complete(); err != nil {
		return fmt.Errorf("setting up the OVirtMachineTemplate webhooks: %w", err)
	}
	return nil
}

// Default leaves spec.template.spec as the user wrote it on create: an empty diskclone or
// storagedomainname means Default (product doc §6), which every new OVirtMachine of the template
// resolves when it is created, against the OVirtProvider and the disk-clone gate in force then
// (the OVirtMachine defaulter writes the result). Writing the resolved values into the template
// would freeze the group's mode: later changes of the provider or the gate would never reach the
// group's new nodes. On update it keeps the values a template created under the older rules had
// defaulted, so that re-applying its original manifest is not refused as a change.
func (w *OVirtMachineTemplateWebhook) Default(ctx context.Context, t *infrav1.OVirtMachineTemplate) error {
	old := &infrav1.OVirtMachineTemplate{}
	isUpdate, err := oldObjectFromRequest(ctx, old)
	if err != nil {
		return err
	}
	if isUpdate {
		KeepCreateDefaults(&t.Spec.Template.Spec, &old.Spec.Template.Spec)
	}
	return nil
}

// ValidateCreate checks spec.template.spec with the clone mode that the OVirtProvider and the
// gates give it now, and warns when the provider is missing or when the combination holds only
// because of the provider or the gate (see templateWarnings). Each new OVirtMachine of the
// template is checked again when it is created.
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
	path := field.NewPath("spec", "template", "spec")
	errs := ValidateVMSpec(spec, path)
	access, err := checkProviderAccess(ctx, w.Reader, provider, t.Namespace, path.Child("provider"))
	if err != nil {
		return nil, err
	}
	errs = append(errs, access...)
	warnings := append(templateWarnings(spec, provider, clone, w.Gates), storageDomainWarnings(spec, path, clone)...)
	warnings = append(warnings, contentsWarnings(spec, path, clone)...)
	return warnings, invalid("OVirtMachineTemplate", t.Name, errs)
}

// templateWarnings are providerWarnings worded for a template, whose diskclone is resolved again
// for each new machine, plus a warning when spec.template.spec.storagedomainname is admitted only
// because the provider's diskclone or the disk-clone gate turns cloning on: if either changes,
// the template's new machines are refused (by the OVirtMachine validator) until it changes back.
func templateWarnings(spec *infrav1.OVirtVMSpec, provider *infrav1.OVirtProvider, clone *bool, gates featuregates.Gates) admission.Warnings {
	if strings.TrimSpace(spec.Provider) == "" {
		return nil
	}
	if provider == nil {
		return admission.Warnings{fmt.Sprintf("OVirtProvider %s does not exist yet: "+
			"each new machine of this template resolves an empty diskclone and storagedomainname when its VM is created, from the OVirtProvider, else the disk-clone feature gate (now %t) "+
			"(the manager waits for the provider before it creates the VM)", spec.Provider, gates.DiskClone)}
	}
	var warnings admission.Warnings
	if sd := provider.Spec.StorageDomainName; sd != "" && spec.StorageDomainName == "" && !ptr.Deref(clone, true) {
		warnings = append(warnings, fmt.Sprintf("OVirtProvider %s sets storagedomainname %s, but diskclone resolves to false for this template now: "+
			"its new machines can only be created if %s is the template's storage domain (otherwise MachineCreated reports StorageDomainRequiresClone); "+
			"to place the disks in %s, %s", provider.Name, sd, sd, sd, featuregates.EnableDiskCloneHint(provider.Name)))
	}
	if spec.StorageDomainName != "" && spec.DiskClone == nil && ptr.Deref(clone, false) {
		source := "the disk-clone feature gate is on and OVirtProvider " + provider.Name + " leaves diskclone empty"
		if provider.Spec.DiskClone != nil {
			source = "OVirtProvider " + provider.Name + " sets diskclone: true"
		}
		warnings = append(warnings, fmt.Sprintf("spec.template.spec.storagedomainname %s requires disk cloning and spec.template.spec.diskclone is empty (Default): "+
			"it works only because %s; each new machine of this template resolves diskclone when it is created, and if cloning is off then, its VM is created only if that domain holds a copy of every template disk (otherwise MachineCreated reports StorageDomainRequiresClone); "+
			"to keep this template usable whatever the provider and the gate say, set spec.template.spec.diskclone: true (it may change in place)",
			spec.StorageDomainName, source))
	}
	return warnings
}

// inPlaceFields are the fields of spec.template.spec that may change in place (product doc §6:
// Clone disk and the Storage Domain of a node group, "in a cluster that is already running",
// "VMs that already exist are not changed. New nodes are created with the mode you selected").
// Nothing is rolled out: a MachineDeployment or KubeadmControlPlane rolls out only when its
// infrastructureRef changes, and each new OVirtMachine copies the template as it is then.
var inPlaceFields = map[string]bool{"spec.template.spec.diskclone": true, "spec.template.spec.storagedomainname": true}

// ValidateUpdate refuses every change of the spec except spec.template.spec.diskclone and
// spec.template.spec.storagedomainname (inPlaceFields), which are checked with the rules of a
// create: Cluster API rolls machines out by pointing at a new template, and any other change
// would make existing machines differ from their template silently. Cluster API's topology
// controller sends server-side-apply dry-run requests with the topology.cluster.x-k8s.io/dry-run
// annotation to compute its diffs; those are exempt from immutability (they change nothing), as
// the InfraMachineTemplate contract asks, but their spec is still validated.
func (w *OVirtMachineTemplateWebhook) ValidateUpdate(ctx context.Context, oldT, t *infrav1.OVirtMachineTemplate) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(oldT.Spec, t.Spec) {
		return nil, nil
	}
	if req, ok := requestFromContext(ctx); ok && topology.IsDryRunRequest(req, t) {
		return w.validateSpec(ctx, t)
	}
	var errs field.ErrorList
	if oldT.Spec.Template.Spec.Provider != t.Spec.Template.Spec.Provider {
		// Refused below anyway; the answer also says whether the new provider would allow it.
		provider, err := getProvider(ctx, w.Reader, t.Spec.Template.Spec.Provider)
		if err != nil {
			return nil, err
		}
		access, err := checkProviderAccess(ctx, w.Reader, provider, t.Namespace, field.NewPath("spec", "template", "spec", "provider"))
		if err != nil {
			return nil, err
		}
		errs = append(errs, access...)
	}
	changed := changedFields(field.NewPath("spec", "template", "spec"), &oldT.Spec.Template.Spec, &t.Spec.Template.Spec)
	if !equality.Semantic.DeepEqual(oldT.Spec.Template.ObjectMeta, t.Spec.Template.ObjectMeta) {
		changed = append(changed, field.NewPath("spec", "template", "metadata"))
	}
	if len(changed) == 0 {
		changed = append(changed, field.NewPath("spec")) // a field outside spec.template
	}
	var inPlace []string
	for _, p := range changed {
		if inPlaceFields[p.String()] {
			inPlace = append(inPlace, p.String())
			continue
		}
		errs = append(errs, field.Forbidden(p,
			"an OVirtMachineTemplate cannot change, except spec.template.spec.diskclone and spec.template.spec.storagedomainname: "+
				"create a new OVirtMachineTemplate with the change and point "+
				"the MachineDeployment or KubeadmControlPlane spec.template.spec.infrastructureRef at it (Cluster API then rolls the machines)"))
	}
	if len(errs) > 0 {
		return nil, invalid("OVirtMachineTemplate", t.Name, errs)
	}
	// Only the in-place fields changed: the rules of a create apply to the new spec.
	warnings, err := w.validateSpec(ctx, t)
	if err != nil {
		return warnings, err
	}
	return append(warnings, fmt.Sprintf("%s changed in place: machines that exist and their VMs are not changed, nothing is rolled out; "+
		"new machines of this template use the new value. In a cluster whose templates come from a ClusterClass, the topology controller "+
		"puts its own template back (a change there rolls the group out): change the OVirtProvider's diskclone or storagedomainname instead "+
		"(docs/operations.md, \"Clone disk and storage domain of a running group\")", strings.Join(inPlace, " and "))), nil
}

// ValidateDelete allows every deletion.
func (w *OVirtMachineTemplateWebhook) ValidateDelete(context.Context, *infrav1.OVirtMachineTemplate) (admission.Warnings, error) {
	return nil, nil
}
