package webhooks

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/webhooks/conversion"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1beta2-ovirtcluster,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,timeoutSeconds=10,admissionReviewVersions=v1,groups=infrastructure.cluster.x-k8s.io,resources=ovirtclusters,versions=v1beta2,name=validation.ovirtcluster.infrastructure.cluster.x-k8s.io

// OVirtClusterWebhook validates OVirtClusters.
type OVirtClusterWebhook struct {
	// Reader reads OVirtProviders and Namespaces, for spec.provider and its
	// spec.allowedNamespaces (the webhook binary passes its cache). Nil skips the provider checks.
	Reader client.Reader
}

var _ admission.Validator[*infrav1.OVirtCluster] = &OVirtClusterWebhook{}

// SetupWithManager registers the OVirtCluster webhook with the manager's webhook server,
// and its v1beta1 <-> v1beta2 converter with the /convert endpoint.
func (w *OVirtClusterWebhook) SetupWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.OVirtCluster{}).
		WithConverter(conversion.OVirtClusterConverter()).
		WithValidator(w).
		Complete(); err != nil {
		return fmt.Errorf("setting up the OVirtCluster webhook: %w", err)
	}
	return nil
}

// ValidateCreate checks spec.controlPlaneEndpoint when it is set (or only its port, when
// spec.controlPlaneEndpointFromPool claims the host), the pool reference, the placement fields
// (spec.failureDomains, spec.controlPlaneAntiAffinity, see ValidateOVirtClusterPlacement) and
// spec.provider: an OVirtProvider that does not allow the namespace is refused, one that does
// not exist yet is a warning (GitOps applies objects in any order).
func (w *OVirtClusterWebhook) ValidateCreate(ctx context.Context, c *infrav1.OVirtCluster) (admission.Warnings, error) {
	path := field.NewPath("spec")
	errs, warnings := ValidateOVirtClusterSpec(&c.Spec, path)
	access, providerWarnings, err := w.checkProvider(ctx, c, path.Child("provider"))
	if err != nil {
		return nil, err
	}
	errs = append(errs, access...)
	return append(warnings, providerWarnings...), invalid("OVirtCluster", c.Name, errs)
}

// ValidateUpdate allows setting spec.controlPlaneEndpoint once (from empty) and refuses any
// change afterwards: Cluster API copies it into the Cluster and the workload kubeconfig, and
// the certificates of the control plane are issued for it. The placement fields and
// spec.provider may change; they are checked again only when they do, so that a cluster
// admitted under older rules can still get its finalizer removed and be deleted.
func (w *OVirtClusterWebhook) ValidateUpdate(ctx context.Context, oldC, c *infrav1.OVirtCluster) (admission.Warnings, error) {
	path := field.NewPath("spec")
	var errs field.ErrorList
	var warnings admission.Warnings
	epPath := path.Child("controlPlaneEndpoint")
	oldEP, ep := oldC.Spec.ControlPlaneEndpoint, c.Spec.ControlPlaneEndpoint
	switch {
	case oldEP == ep:
	case oldEP.Host != "":
		errs = append(errs, field.Forbidden(epPath,
			fmt.Sprintf("cannot change once set (it is %s:%d): Cluster API copied it into the Cluster and the control-plane certificates; "+
				"restore it, or create a new cluster for another endpoint", oldEP.Host, oldEP.Port)))
	case c.Spec.ControlPlaneEndpointFromPool != nil && ep.Host == "":
		// The manager sets the host from the pool's address; only the port may be set first.
	default:
		errs = append(errs, ValidateControlPlaneEndpoint(ep, epPath)...)
	}
	if !equality.Semantic.DeepEqual(oldC.Spec.ControlPlaneEndpointFromPool, c.Spec.ControlPlaneEndpointFromPool) {
		if oldC.Spec.ControlPlaneEndpointFromPool != nil && oldEP.Host != "" {
			errs = append(errs, field.Forbidden(path.Child("controlPlaneEndpointFromPool"),
				"cannot change once the endpoint was claimed from it: the address is in the Cluster and the control-plane certificates; restore it"))
		} else {
			errs = append(errs, ValidateOVirtClusterAddressing(&c.Spec, path)...)
		}
	}
	if oldC.Spec.ControlPlaneAntiAffinity != c.Spec.ControlPlaneAntiAffinity ||
		!equality.Semantic.DeepEqual(oldC.Spec.FailureDomains, c.Spec.FailureDomains) {
		placement, placementWarnings := ValidateOVirtClusterPlacement(&c.Spec, path)
		errs = append(errs, placement...)
		warnings = append(warnings, placementWarnings...)
	}
	if !equality.Semantic.DeepEqual(oldC.Spec.Tags, c.Spec.Tags) {
		// The tags apply to the machines created afterwards; they may change.
		errs = append(errs, ValidateTags(c.Spec.Tags, path.Child("tags"))...)
	}
	if sentAsV1beta1(ctx) {
		var dropped []string
		if oldC.Spec.Provider != "" && c.Spec.Provider == "" {
			dropped = append(dropped, "spec.provider")
		}
		if len(oldC.Spec.FailureDomains) > 0 && len(c.Spec.FailureDomains) == 0 {
			dropped = append(dropped, "spec.failureDomains")
		}
		if oldC.Spec.ControlPlaneAntiAffinity != "" && c.Spec.ControlPlaneAntiAffinity == "" {
			dropped = append(dropped, "spec.controlPlaneAntiAffinity")
		}
		if oldC.Spec.ControlPlaneEndpointFromPool != nil && c.Spec.ControlPlaneEndpointFromPool == nil {
			dropped = append(dropped, "spec.controlPlaneEndpointFromPool")
		}
		if len(oldC.Spec.Tags) > 0 && len(c.Spec.Tags) == 0 {
			dropped = append(dropped, "spec.tags")
		}
		if len(dropped) > 0 {
			warnings = append(warnings, droppedByV1beta1("OVirtCluster", dropped))
		}
	}
	if oldC.Spec.Provider != c.Spec.Provider {
		access, providerWarnings, err := w.checkProvider(ctx, c, path.Child("provider"))
		if err != nil {
			return nil, err
		}
		errs = append(errs, access...)
		warnings = append(warnings, providerWarnings...)
	}
	return warnings, invalid("OVirtCluster", c.Name, errs)
}

// checkProvider refuses a spec.provider whose OVirtProvider does not allow the cluster's
// namespace (spec.allowedNamespaces) and warns when it does not exist yet.
func (w *OVirtClusterWebhook) checkProvider(ctx context.Context, c *infrav1.OVirtCluster, path *field.Path) (field.ErrorList, admission.Warnings, error) {
	name := c.Spec.Provider
	if w.Reader == nil || name == "" {
		return nil, nil, nil
	}
	if strings.TrimSpace(name) != name {
		return field.ErrorList{field.Invalid(path, name,
			"must be the name of a cluster-scoped OVirtProvider without spaces, e.g. provider: ovirt-prod (see kubectl get capovp), or omit it to use the provider of the cluster's machines")}, nil, nil
	}
	provider, err := getProvider(ctx, w.Reader, name)
	if err != nil {
		return nil, nil, err
	}
	if provider == nil {
		return nil, admission.Warnings{fmt.Sprintf("OVirtProvider %s does not exist yet: the manager checks the failure domains and keeps the affinity groups "+
			"of this cluster only once it does; create the OVirtProvider (kubectl get capovp lists them), or correct spec.provider", name)}, nil
	}
	access, err := checkProviderAccess(ctx, w.Reader, provider, c.Namespace, path)
	return access, nil, err
}

// ValidateDelete allows every deletion.
func (w *OVirtClusterWebhook) ValidateDelete(context.Context, *infrav1.OVirtCluster) (admission.Warnings, error) {
	return nil, nil
}

// ValidateControlPlaneEndpoint checks an endpoint that is set (host or port non-zero): the host
// must be a bare host name or IP and the port 1-65535.
func ValidateControlPlaneEndpoint(ep clusterv1.APIEndpoint, path *field.Path) field.ErrorList {
	if ep.IsZero() {
		return nil
	}
	var errs field.ErrorList
	host := strings.TrimSpace(ep.Host)
	switch {
	case host == "":
		errs = append(errs, field.Required(path.Child("host"),
			"set the VIP or load-balancer address of the control plane, e.g. host: 10.0.1.100, or remove controlPlaneEndpoint"))
	case host != ep.Host || strings.ContainsAny(host, "/ \t\n") || strings.Contains(host, "://"):
		errs = append(errs, field.Invalid(path.Child("host"), ep.Host,
			"must be a bare host name or IP address without scheme, path or spaces, e.g. 10.0.1.100 (the port goes into port)"))
	}
	if ep.Port < 1 || ep.Port > 65535 {
		errs = append(errs, field.Invalid(path.Child("port"), ep.Port,
			"must be a TCP port between 1 and 65535, usually 6443"))
	}
	return errs
}
