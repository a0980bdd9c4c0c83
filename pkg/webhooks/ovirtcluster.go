package webhooks

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/webhooks/conversion"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1beta2-ovirtcluster,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,timeoutSeconds=10,admissionReviewVersions=v1,groups=infrastructure.cluster.x-k8s.io,resources=ovirtclusters,versions=v1beta2,name=validation.ovirtcluster.infrastructure.cluster.x-k8s.io

// OVirtClusterWebhook validates OVirtClusters.
type OVirtClusterWebhook struct{}

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

// ValidateCreate checks spec.controlPlaneEndpoint when it is set.
func (w *OVirtClusterWebhook) ValidateCreate(_ context.Context, c *infrav1.OVirtCluster) (admission.Warnings, error) {
	return nil, invalid("OVirtCluster", c.Name, ValidateControlPlaneEndpoint(c.Spec.ControlPlaneEndpoint, field.NewPath("spec", "controlPlaneEndpoint")))
}

// ValidateUpdate allows setting spec.controlPlaneEndpoint once (from empty) and refuses any
// change afterwards: Cluster API copies it into the Cluster and the workload kubeconfig, and
// the certificates of the control plane are issued for it.
func (w *OVirtClusterWebhook) ValidateUpdate(_ context.Context, oldC, c *infrav1.OVirtCluster) (admission.Warnings, error) {
	path := field.NewPath("spec", "controlPlaneEndpoint")
	oldEP, ep := oldC.Spec.ControlPlaneEndpoint, c.Spec.ControlPlaneEndpoint
	if oldEP == ep {
		return nil, nil
	}
	if oldEP.Host != "" {
		return nil, invalid("OVirtCluster", c.Name, field.ErrorList{field.Forbidden(path,
			fmt.Sprintf("cannot change once set (it is %s:%d): Cluster API copied it into the Cluster and the control-plane certificates; "+
				"restore it, or create a new cluster for another endpoint", oldEP.Host, oldEP.Port))})
	}
	return nil, invalid("OVirtCluster", c.Name, ValidateControlPlaneEndpoint(ep, path))
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
