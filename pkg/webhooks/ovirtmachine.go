package webhooks

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/featuregates"
	"github.com/capov/capov/pkg/webhooks/conversion"
)

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1beta2-ovirtmachine,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,timeoutSeconds=10,admissionReviewVersions=v1,groups=infrastructure.cluster.x-k8s.io,resources=ovirtmachines,versions=v1beta2,name=default.ovirtmachine.infrastructure.cluster.x-k8s.io
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1beta2-ovirtmachine,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,timeoutSeconds=10,admissionReviewVersions=v1,groups=infrastructure.cluster.x-k8s.io,resources=ovirtmachines,versions=v1beta2,name=validation.ovirtmachine.infrastructure.cluster.x-k8s.io

// OVirtMachineWebhook defaults and validates OVirtMachines.
type OVirtMachineWebhook struct {
	// Reader reads OVirtProviders (the webhook binary passes its cache).
	Reader client.Reader
	// Clusters reads Cluster API Clusters and OVirtClusters, to check spec.failureDomain; the
	// webhook binary passes an uncached reader (its cache has no informer for them). Nil
	// admits a spec.failureDomain unchecked, with a warning.
	Clusters client.Reader
	// Gates are the resolved feature gates; disk-clone is the last fallback of diskclone.
	Gates featuregates.Gates
}

var (
	_ admission.Defaulter[*infrav1.OVirtMachine] = &OVirtMachineWebhook{}
	_ admission.Validator[*infrav1.OVirtMachine] = &OVirtMachineWebhook{}
)

// SetupWithManager registers the OVirtMachine webhooks with the manager's webhook server,
// and its v1beta1 <-> v1beta2 converter with the /convert endpoint.
func (w *OVirtMachineWebhook) SetupWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.OVirtMachine{}).
		WithConverter(conversion.OVirtMachineConverter()).
		WithDefaulter(w).WithValidator(w).
		Complete(); err != nil {
		return fmt.Errorf("setting up the OVirtMachine webhooks: %w", err)
	}
	return nil
}

// Default fills spec.diskclone and spec.storagedomainname on create (see DefaultVMSpec). On
// update it keeps the create-time defaults and turns the removal of status.failureReason or
// status.failureMessage from the main resource into the ClearFailureAnnotation.
func (w *OVirtMachineWebhook) Default(ctx context.Context, m *infrav1.OVirtMachine) error {
	old := &infrav1.OVirtMachine{}
	isUpdate, err := oldObjectFromRequest(ctx, old)
	if err != nil {
		return err
	}
	// The builder's logger already carries "OVirtMachine" (klog.KRef of the request).
	log := ctrl.LoggerFrom(ctx)
	if isUpdate {
		KeepCreateDefaults(&m.Spec.OVirtVMSpec, &old.Spec.OVirtVMSpec)
		if failureCleared(old, m) {
			if m.Annotations == nil {
				m.Annotations = map[string]string{}
			}
			m.Annotations[ClearFailureAnnotation] = "true"
			log.Info("Asking the manager to clear the failure", "failureReason", ptr.Deref(failureOf(old).FailureReason, ""))
		}
		return nil
	}
	provider, err := getProvider(ctx, w.Reader, m.Spec.Provider)
	if err != nil {
		return err
	}
	DefaultVMSpec(&m.Spec.OVirtVMSpec, provider, w.Gates)
	log.V(4).Info("Defaulted the machine spec", "diskclone", ptr.Deref(m.Spec.DiskClone, false),
		"storagedomainname", m.Spec.StorageDomainName, "providerFound", provider != nil)
	return nil
}

// failureCleared reports whether an update removes a failure field that the stored object
// has: status.failureReason or status.failureMessage of v1beta2 (the mirror the product doc's
// reset removes: kubectl sends it to v1beta2, the preferred version), or
// status.deprecated.v1beta1.failureReason or failureMessage (a v1beta1 client's reset of
// status.failureReason arrives converted to v1beta2, matchPolicy Equivalent, as these). A
// request that leaves them as they are clears nothing.
func failureCleared(old, m *infrav1.OVirtMachine) bool {
	o, n := failureOf(old), failureOf(m)
	return o.FailureReason != nil && n.FailureReason == nil ||
		o.FailureMessage != nil && n.FailureMessage == nil ||
		old.Status.FailureReason != nil && m.Status.FailureReason == nil || //nolint:staticcheck // the mirror exists for this reset
		old.Status.FailureMessage != nil && m.Status.FailureMessage == nil //nolint:staticcheck // the mirror exists for this reset
}

// failureOf returns the deprecated v1beta1 failure fields of m (zero when there are none).
func failureOf(m *infrav1.OVirtMachine) infrav1.V1Beta1DeprecatedStatus {
	if m.Status.Deprecated == nil || m.Status.Deprecated.V1Beta1 == nil {
		return infrav1.V1Beta1DeprecatedStatus{}
	}
	return *m.Status.Deprecated.V1Beta1
}

// ValidateCreate checks the spec (ValidateVMSpec with the resolved clone mode, providerID,
// which clusterctl move carries over, and failureDomain against the OVirtCluster's failure
// domains), refuses a namespace the OVirtProvider does not allow (spec.allowedNamespaces) and
// warns when the OVirtProvider, or what spec.failureDomain is checked against, is missing.
func (w *OVirtMachineWebhook) ValidateCreate(ctx context.Context, m *infrav1.OVirtMachine) (admission.Warnings, error) {
	provider, err := getProvider(ctx, w.Reader, m.Spec.Provider)
	if err != nil {
		return nil, err
	}
	clone := ResolveDiskClone(m.Spec.DiskClone, provider, w.Gates)
	path := field.NewPath("spec")
	errs := ValidateVMSpec(&m.Spec.OVirtVMSpec, path)
	errs = append(errs, validateProviderID(path.Child("providerID"), m.Spec.ProviderID)...)
	access, err := checkProviderAccess(ctx, w.Reader, provider, m.Namespace, path.Child("provider"))
	if err != nil {
		return nil, err
	}
	errs = append(errs, access...)
	fd, fdWarnings, err := checkMachineFailureDomain(ctx, w.Clusters, m, path.Child("failureDomain"))
	if err != nil {
		return nil, err
	}
	errs = append(errs, fd...)
	warnings := append(providerWarnings(&m.Spec.OVirtVMSpec, provider, clone, w.Gates), storageDomainWarnings(&m.Spec.OVirtVMSpec, path, clone)...)
	warnings = append(warnings, fdWarnings...)
	warnings = append(warnings, contentsWarnings(&m.Spec.OVirtVMSpec, path, clone)...)
	return warnings, invalid("OVirtMachine", m.Name, errs)
}

// ValidateUpdate enforces immutability: the spec cannot change after create, except that
// spec.providerID and spec.failureDomain may be set once (by the manager; a failure domain set
// from empty is checked against the OVirtCluster like on create). The rest of the spec is not
// validated again, so that objects admitted under older rules can still get finalizers removed
// and be deleted; only an update that changes spec.provider (refused anyway) is also checked
// against the new provider's spec.allowedNamespaces, so that the answer names every problem.
func (w *OVirtMachineWebhook) ValidateUpdate(ctx context.Context, oldM, m *infrav1.OVirtMachine) (admission.Warnings, error) {
	path := field.NewPath("spec")
	var errs field.ErrorList
	var warnings admission.Warnings
	if m.Spec.Provider != oldM.Spec.Provider {
		provider, err := getProvider(ctx, w.Reader, m.Spec.Provider)
		if err != nil {
			return nil, err
		}
		access, err := checkProviderAccess(ctx, w.Reader, provider, m.Namespace, path.Child("provider"))
		if err != nil {
			return nil, err
		}
		errs = append(errs, access...)
	}
	providerIDPath, failureDomainPath := path.Child("providerID"), path.Child("failureDomain")
	for _, p := range changedFields(path, &oldM.Spec, &m.Spec) {
		if p.String() == providerIDPath.String() || p.String() == failureDomainPath.String() {
			continue // checked below
		}
		errs = append(errs, field.Forbidden(p,
			"the spec of an OVirtMachine cannot change after create: change the OVirtMachineTemplate instead "+
				"(create a new one and point the MachineDeployment or KubeadmControlPlane at it), "+
				"or delete this machine so that Cluster API replaces it"))
	}
	oldID, newID := oldM.Spec.ProviderID, m.Spec.ProviderID
	switch {
	case oldID == "":
		// Setting it once is how the manager records the VM; an empty value changes nothing.
		errs = append(errs, validateProviderID(providerIDPath, m.Spec.ProviderID)...)
	case newID != oldID:
		errs = append(errs, field.Forbidden(providerIDPath,
			fmt.Sprintf("is set once by the manager and cannot be changed or removed afterwards; keep %q", oldID)))
	}
	if oldFD := oldM.Spec.FailureDomain; oldFD == "" && m.Spec.FailureDomain != "" {
		// The manager copies the Machine's spec.failureDomain here before it creates the VM.
		fd, fdWarnings, err := checkMachineFailureDomain(ctx, w.Clusters, m, failureDomainPath)
		if err != nil {
			return nil, err
		}
		errs = append(errs, fd...)
		warnings = append(warnings, fdWarnings...)
	} else if oldFD != m.Spec.FailureDomain {
		errs = append(errs, field.Forbidden(failureDomainPath,
			fmt.Sprintf("cannot change or be removed once set (it is %q): the VM is placed in that failure domain; keep %q, "+
				"or delete this machine so that Cluster API replaces it in another failure domain", oldFD, oldFD)))
	}
	return warnings, invalid("OVirtMachine", m.Name, errs)
}

// ValidateDelete allows every deletion: the manager's finalizer protects the VM and its data.
func (w *OVirtMachineWebhook) ValidateDelete(context.Context, *infrav1.OVirtMachine) (admission.Warnings, error) {
	return nil, nil
}

// validateProviderID checks that a non-empty spec.providerID has the form the manager writes:
// ovirt:// and the VM id, which oVirt makes a UUID (infrav1.VMIDFromProviderID, the manager's
// own parser). Anything else (another scheme, a VM name, spaces, a path) names no oVirt VM, and a
// mistyped id must not reach the manager, which acts on the VM a providerID names.
func validateProviderID(path *field.Path, v string) field.ErrorList {
	if _, ok := infrav1.VMIDFromProviderID(v); v == "" || ok {
		return nil
	}
	return field.ErrorList{field.Invalid(path, v,
		"must be "+infrav1.ProviderIDPrefix+"<vm-id> with the oVirt VM id, a UUID (8-4-4-4-12 hex digits, "+
			"e.g. ovirt://0b0e6c1a-2f4e-4d38-9d51-0c5d1b1f6e01); the manager sets it itself once it has created the VM: "+
			"remove spec.providerID from the manifest")}
}

// providerWarnings are the findings about the OVirtProvider of a VM spec that must not block
// admission: GitOps applies objects in any order, so a provider may appear after its machines.
func providerWarnings(spec *infrav1.OVirtVMSpec, provider *infrav1.OVirtProvider, clone *bool, gates featuregates.Gates) admission.Warnings {
	if strings.TrimSpace(spec.Provider) == "" {
		return nil
	}
	if provider == nil {
		return admission.Warnings{fmt.Sprintf("OVirtProvider %s does not exist yet: the manager waits for it before it creates the VM, and then resolves "+
			"an empty spec.diskclone from the provider's diskclone, else the disk-clone feature gate (now %t), and an empty spec.storagedomainname from the provider's",
			spec.Provider, gates.DiskClone)}
	}
	if sd := provider.Spec.StorageDomainName; sd != "" && spec.StorageDomainName == "" && !ptr.Deref(clone, true) {
		return admission.Warnings{fmt.Sprintf("OVirtProvider %s sets storagedomainname %s, but diskclone resolves to false here: "+
			"the VM can only be created if %s is the template's storage domain (otherwise MachineCreated reports StorageDomainRequiresClone); "+
			"to place the disks in %s, %s", provider.Name, sd, sd, sd, featuregates.EnableDiskCloneHint(provider.Name))}
	}
	return nil
}
