package webhooks

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/engineconfig"
	"github.com/capov/capov/pkg/webhooks/conversion"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1beta2-ovirtprovider,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,timeoutSeconds=10,admissionReviewVersions=v1,groups=infrastructure.cluster.x-k8s.io,resources=ovirtproviders,versions=v1beta2,name=validation.ovirtprovider.infrastructure.cluster.x-k8s.io

// credentialsHowTo says how to move to a credentials Secret (product doc §7.1).
const credentialsHowTo = "create a Secret in the capov-system namespace with the keys username and password " +
	"and set spec.credentialsSecretName to its name"

// OVirtProviderWebhook validates OVirtProviders. It reads nothing: in particular it never reads
// the credentials Secret (the webhook has no RBAC for Secrets).
type OVirtProviderWebhook struct{}

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

// ValidateCreate checks the engine URL and TLS settings; deprecated or missing credentials are
// warnings on create, as legacy manifests with spec.user/spec.pass must still apply.
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
func (w *OVirtProviderWebhook) ValidateUpdate(_ context.Context, oldP, p *infrav1.OVirtProvider) (admission.Warnings, error) {
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
	return warnings, invalid("OVirtProvider", p.Name, errs)
}

// ValidateDelete allows every deletion.
func (w *OVirtProviderWebhook) ValidateDelete(context.Context, *infrav1.OVirtProvider) (admission.Warnings, error) {
	return nil, nil
}

// ValidateProviderSpec checks an OVirtProvider spec: spec.engine must be an absolute https URL
// (http only with spec.tls.insecure; a trailing slash is fine, the manager trims it) and
// spec.tls.certs base64 of PEM CA certificates. The checks and messages are those of the
// manager (pkg/engineconfig), so that what admission accepts the manager can use. Findings that
// do not stop the manager are returned as warnings: deprecated or missing credentials, insecure
// together with a CA, an engine path that is not the API path.
func ValidateProviderSpec(spec *infrav1.OVirtProviderSpec, path *field.Path) (field.ErrorList, admission.Warnings) {
	var errs field.ErrorList
	var warnings admission.Warnings
	insecure := spec.TLS != nil && spec.TLS.Insecure

	if engine, err := engineconfig.EngineURL(spec.Engine, insecure); err != nil {
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
		if insecure && (spec.TLS.Certs != "" || spec.TLS.Cert) {
			warnings = append(warnings, "spec.tls.insecure is true, so the Engine certificate is not verified and "+
				"spec.tls.certs / spec.tls.cert are ignored; remove spec.tls.insecure to verify the Engine")
		}
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
