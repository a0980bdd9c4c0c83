package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/engineconfig"
	"github.com/capov/capov/pkg/provideraccess"
	"github.com/capov/capov/pkg/webhooks/conversion"
)

// +kubebuilder:webhook:verbs=create;update;delete,path=/validate-infrastructure-cluster-x-k8s-io-v1beta2-ovirtprovider,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,timeoutSeconds=10,admissionReviewVersions=v1,groups=infrastructure.cluster.x-k8s.io,resources=ovirtproviders,versions=v1beta2,name=validation.ovirtprovider.infrastructure.cluster.x-k8s.io

// credentialsHowTo says how to move to a credentials Secret (product doc §7.1).
const credentialsHowTo = "create a Secret in the capov-system namespace with the keys username and password " +
	"and set spec.credentialsSecretName to its name"

// deleteForMoveAnnotation marks the objects clusterctl move deletes from the source cluster
// after copying them; such a deletion is never refused. It must stay equal to the annotation of
// the same name in pkg/controllers (the webhook does not import the controllers).
const deleteForMoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"

// ovirtProviders is the resource of OVirtProvider, for Forbidden answers.
var ovirtProviders = infrav1.GroupVersion.WithResource("ovirtproviders").GroupResource()

// OVirtProviderWebhook validates OVirtProviders and refuses to delete one that OVirtMachines
// still name. It never reads the credentials Secret (the webhook has no RBAC for Secrets).
type OVirtProviderWebhook struct {
	// Reader reads Namespaces (for spec.allowedNamespaces.selector); the webhook binary passes
	// its cache. Nil skips the checks that need it.
	Reader client.Reader
	// Machines lists OVirtMachines, to find those that name a provider; the webhook binary
	// passes an uncached reader: deletions and allowedNamespaces changes are rare, and the
	// answer must include a machine created a moment ago. Nil skips the checks that need it.
	Machines client.Reader
}

var _ admission.Validator[*infrav1.OVirtProvider] = &OVirtProviderWebhook{}

// SetupWithManager registers the OVirtProvider webhook with the manager's webhook server,
// and its v1beta1 <-> v1beta2 converter with the /convert endpoint.
func (w *OVirtProviderWebhook) SetupWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.OVirtProvider{}).
		WithConverter(conversion.OVirtProviderConverter()).
		WithValidator(w).
		Complete(); err != nil {
		return fmt.Errorf("setting up the OVirtProvider webhook: %w", err)
	}
	return nil
}

// ValidateCreate checks the engine URL, TLS settings and allowedNamespaces; deprecated or missing
// credentials and an unverified Engine certificate are warnings on create, as legacy manifests
// with spec.user/spec.pass must still apply.
func (w *OVirtProviderWebhook) ValidateCreate(_ context.Context, p *infrav1.OVirtProvider) (admission.Warnings, error) {
	errs, warnings := ValidateProviderSpec(&p.Spec, field.NewPath("spec"))
	return warnings, invalid("OVirtProvider", p.Name, errs)
}

// ValidateUpdate refuses a spec change that leaves spec.credentialsSecretName empty (product doc
// §7.1: an update without it is blocked until it is set) and checks the new spec like create.
//
// Updates that do not touch the spec (labels, annotations, finalizers, owner references, as
// clusterctl move and garbage collection make them) and updates of an object being deleted are
// admitted as they are: refusing them would make a legacy provider impossible to move or delete.
//
// A change of spec.allowedNamespaces that shuts out namespaces in which OVirtMachines name the
// provider is admitted with a warning naming them: it is how an operator revokes access.
func (w *OVirtProviderWebhook) ValidateUpdate(ctx context.Context, oldP, p *infrav1.OVirtProvider) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(oldP.Spec, p.Spec) || !p.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	path := field.NewPath("spec")
	errs, warnings := ValidateProviderSpec(&p.Spec, path)
	if strings.TrimSpace(p.Spec.CredentialsSecretName) == "" {
		errs = append(errs, field.Required(path.Child("credentialsSecretName"),
			"an OVirtProvider cannot be updated without a credentials Secret: "+credentialsHowTo+
				" in the same update (spec.user and spec.pass are deprecated)"))
	}
	if sentAsV1beta1(ctx) {
		if oldP.Spec.AllowedNamespaces != nil && p.Spec.AllowedNamespaces == nil {
			// Silently opening the provider to every namespace is not a side effect a v1beta1
			// client may have by not knowing the field.
			errs = append(errs, field.Forbidden(path.Child("allowedNamespaces"),
				"this v1beta1 update would remove spec.allowedNamespaces, which v1beta1 cannot express (the conversion-data annotation "+
					"was dropped or edited), and open the provider to every namespace: make this change in v1beta2 "+
					"(kubectl edit ovirtproviders.v1beta2."+infrav1.GroupVersion.Group+" "+p.Name+"), or keep the annotation"))
		}
		var dropped []string
		if oldP.Spec.OrphanedVMs != "" && p.Spec.OrphanedVMs == "" {
			dropped = append(dropped, "spec.orphanedVMs ("+string(oldP.Spec.OrphanedVMs)+", now Report)")
		}
		if oldP.Spec.OrphanedVMsGracePeriod != nil && p.Spec.OrphanedVMsGracePeriod == nil {
			dropped = append(dropped, "spec.orphanedVMsGracePeriod ("+oldP.Spec.OrphanedVMsGracePeriod.Duration.String()+")")
		}
		if len(oldP.Spec.AllowedAffinityGroups) > 0 && len(p.Spec.AllowedAffinityGroups) == 0 {
			dropped = append(dropped, "spec.allowedAffinityGroups (new machines may join no group by name)")
		}
		if len(dropped) > 0 {
			warnings = append(warnings, droppedByV1beta1("OVirtProvider", dropped))
		}
	}
	if len(errs) == 0 && !equality.Semantic.DeepEqual(oldP.Spec.AllowedNamespaces, p.Spec.AllowedNamespaces) {
		shutOut, err := w.shutOutMachines(ctx, p)
		if err != nil {
			return warnings, err
		}
		if shutOut != "" {
			warnings = append(warnings, shutOut)
		}
	}
	return warnings, invalid("OVirtProvider", p.Name, errs)
}

// shutOutMachines words the warning for OVirtMachines that name p from namespaces p's new
// spec.allowedNamespaces no longer allows ("" when there are none).
func (w *OVirtProviderWebhook) shutOutMachines(ctx context.Context, p *infrav1.OVirtProvider) (string, error) {
	if w.Machines == nil || w.Reader == nil {
		return "", nil
	}
	users, err := machinesNaming(ctx, w.Machines, p.Name)
	if err != nil {
		return "", apierrors.NewInternalError(fmt.Errorf("listing the OVirtMachines that name OVirtProvider %s: %w; retry the request", p.Name, err))
	}
	perNamespace := map[string]int{}
	for _, u := range users {
		ns, _, _ := strings.Cut(u, "/")
		perNamespace[ns]++
	}
	var refused []string
	for ns, n := range perNamespace {
		ok, _, err := provideraccess.Allowed(ctx, w.Reader, p, ns)
		if err != nil {
			return "", apierrors.NewInternalError(fmt.Errorf("%w; retry the request", err))
		}
		if !ok {
			refused = append(refused, fmt.Sprintf("%s (%d %s)", ns, n, plural(n, "OVirtMachine", "OVirtMachines")))
		}
	}
	if len(refused) == 0 {
		return "", nil
	}
	sort.Strings(refused)
	return fmt.Sprintf("spec.allowedNamespaces no longer allows namespaces in which OVirtMachines name OVirtProvider %s: %s; "+
		"the manager stops using the provider for them and reports it on each machine; allow the namespaces again, "+
		"or move those machines to another OVirtProvider (new machines: a new OVirtMachineTemplate)", p.Name, strings.Join(refused, ", ")), nil
}

// ValidateDelete refuses to delete an OVirtProvider while OVirtMachines name it, including
// machines being deleted: their VMs are removed through the provider. The answer names up to ten
// of them and gives their count. A deletion by clusterctl move (annotation
// clusterctl.cluster.x-k8s.io/delete-for-move) is always admitted. The manager's finalizer
// (infrav1.ProviderFinalizer) holds a deletion that got past this check (webhook bypassed, or a
// machine created concurrently) until the machines are gone.
func (w *OVirtProviderWebhook) ValidateDelete(ctx context.Context, p *infrav1.OVirtProvider) (admission.Warnings, error) {
	if _, moving := p.Annotations[deleteForMoveAnnotation]; moving || w.Machines == nil {
		return nil, nil
	}
	users, err := machinesNaming(ctx, w.Machines, p.Name)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing the OVirtMachines that name OVirtProvider %s: %w; retry the deletion", p.Name, err))
	}
	if len(users) == 0 {
		return nil, nil
	}
	return nil, apierrors.NewForbidden(ovirtProviders, p.Name, errors.New(provideraccess.InUseMessage(p.Name, users)))
}

// machinesListPage bounds one page of the OVirtMachine list: a management cluster with thousands
// of machines is read in pages, not in one answer.
const machinesListPage = 500

// machinesNaming returns "namespace/name" of every OVirtMachine whose spec.provider is provider.
func machinesNaming(ctx context.Context, r client.Reader, provider string) ([]string, error) {
	var out []string
	list := &infrav1.OVirtMachineList{}
	opts := []client.ListOption{client.Limit(machinesListPage)}
	for {
		if err := r.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			if m := &list.Items[i]; m.Spec.Provider == provider {
				out = append(out, m.Namespace+"/"+m.Name)
			}
		}
		if list.Continue == "" {
			return out, nil
		}
		opts = []client.ListOption{client.Limit(machinesListPage), client.Continue(list.Continue)}
	}
}

// ValidateProviderSpec checks an OVirtProvider spec: spec.engine must be an absolute https URL
// (never http, which would carry the password in clear text; a trailing slash is fine, the
// manager trims it), spec.tls.certs base64 of PEM CA certificates, and spec.allowedNamespaces
// namespace names and a valid label selector. The URL and CA checks and messages are those of
// the manager (pkg/engineconfig), so that what admission accepts the manager can use. Findings
// that do not stop the manager are returned as warnings: deprecated or missing credentials,
// spec.tls.insecure (the Engine certificate is not verified), an engine path that is not the API
// path.
func ValidateProviderSpec(spec *infrav1.OVirtProviderSpec, path *field.Path) (field.ErrorList, admission.Warnings) {
	var errs field.ErrorList
	var warnings admission.Warnings
	insecure := spec.TLS != nil && spec.TLS.Insecure

	if engine, err := engineconfig.EngineURL(spec.Engine); err != nil {
		// The path and value are already in the field error: keep engineconfig's explanation.
		detail := strings.TrimPrefix(err.Error(), fmt.Sprintf("spec.engine %q ", spec.Engine))
		errs = append(errs, field.Invalid(path.Child("engine"), spec.Engine, detail))
	} else if u, err := url.Parse(engine); err == nil && !strings.HasSuffix(u.Path, "/api") {
		warnings = append(warnings, fmt.Sprintf("spec.engine %q does not end in /api: CAPOV talks to the oVirt REST API, "+
			"usually https://<engine-fqdn>/ovirt-engine/api", spec.Engine))
	}

	if spec.TLS != nil {
		tlsPath := path.Child("tls")
		if spec.TLS.Certs != "" {
			if _, err := engineconfig.DecodeCerts(spec.TLS.Certs); err != nil {
				// The value can be a megabyte of base64: do not echo it.
				errs = append(errs, field.Invalid(tlsPath.Child("certs"), field.OmitValueType{},
					"the value "+err.Error()))
			}
		}
		if insecure {
			ignored := ""
			if spec.TLS.Certs != "" || spec.TLS.Cert {
				ignored = " (spec.tls.certs / spec.tls.cert are ignored while it is set)"
			}
			warnings = append(warnings, "spec.tls.insecure is true: the Engine certificate is not verified"+ignored+", so anyone on the "+
				"network path can pose as the Engine and receive the oVirt password; for development and diagnosis only: "+
				"remove spec.tls.insecure and set spec.tls.certs to the base64 PEM of the Engine's CA "+
				"(https://<engine-fqdn>/ovirt-engine/services/pki-resource?resource=ca-certificate&format=X509-PEM-CA), "+
				"or spec.tls.cert: true for a publicly trusted certificate; the provider reports TLSVerified=False (InsecureSkipVerify) meanwhile")
		}
	}

	errs = append(errs, validateAllowedNamespaces(spec.AllowedNamespaces, path.Child("allowedNamespaces"))...)
	errs = append(errs, validateAllowedAffinityGroups(path.Child("allowedAffinityGroups"), spec.AllowedAffinityGroups)...)
	if g := spec.OrphanedVMsGracePeriod; g != nil && g.Duration < infrav1.MinOrphanedVMsGracePeriod {
		errs = append(errs, field.Invalid(path.Child("orphanedVMsGracePeriod"), g.Duration.String(),
			fmt.Sprintf("must be at least %s, so that a clusterctl move can finish before its VMs could be taken for orphans; for example \"1h\"", infrav1.MinOrphanedVMsGracePeriod)))
	}
	if spec.OrphanedVMs == infrav1.OrphanedVMsDelete {
		warnings = append(warnings, "spec.orphanedVMs is Delete: VMs of this Engine with this management cluster's owner marker and no OVirtMachine are "+
			"removed once they have been orphans for spec.orphanedVMsGracePeriod (VMs with a non-system disk attached are only reported)")
	}

	switch {
	case spec.User != "" || spec.Pass != "":
		if strings.TrimSpace(spec.CredentialsSecretName) == "" {
			warnings = append(warnings, "spec.user and spec.pass are deprecated and will be removed: "+credentialsHowTo+
				"; updates of this OVirtProvider are refused until spec.credentialsSecretName is set")
		} else {
			warnings = append(warnings, "spec.user and spec.pass are deprecated and will be removed; they are used only "+
				"while the Secret "+spec.CredentialsSecretName+" does not exist: remove them")
		}
	case strings.TrimSpace(spec.CredentialsSecretName) == "":
		warnings = append(warnings, "no credentials: "+credentialsHowTo+"; until then the provider reports CredentialsMissing")
	}
	return errs, warnings
}

// validateAllowedNamespaces checks that spec.allowedNamespaces.list holds namespace names and
// spec.allowedNamespaces.selector is a valid label selector: a typo must be refused, not silently
// shut every namespace out.
func validateAllowedNamespaces(a *infrav1.OVirtProviderAllowedNamespaces, path *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	// Duplicates are refused by the schema (listType=set).
	var errs field.ErrorList
	for i, ns := range a.List {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Child("list").Index(i), ns, "must be the name of a namespace ("+strings.Join(msgs, "; ")+")"))
		}
	}
	if a.Selector != nil {
		for _, e := range metav1validation.ValidateLabelSelector(a.Selector, metav1validation.LabelSelectorValidationOptions{}, path.Child("selector")) {
			e.Detail += "; write a label selector as for a Deployment (matchLabels, or matchExpressions with In, NotIn, Exists, DoesNotExist)"
			errs = append(errs, e)
		}
	}
	return errs
}

// plural picks the word for n things.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
