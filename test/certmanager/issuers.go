package certmanager

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	apiutil "github.com/cert-manager/cert-manager/pkg/api/util"
	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// cert-manager's reasons for an issuer's Ready condition (pkg/controller/issuers/sync.go,
// pkg/issuer/selfsigned/setup.go, pkg/issuer/ca/setup.go).
const (
	reasonErrInitIssuer      = "ErrInitIssuer"
	reasonIsReady            = "IsReady"
	reasonKeyPairVerified    = "KeyPairVerified"
	reasonErrGetKeyPair      = "ErrGetKeyPair"
	reasonErrInvalidKeyPair  = "ErrInvalidKeyPair"
	messageKeyPairVerified   = "Signing CA verified"
	messageErrorInitIssuer   = "Error initializing issuer: "
	messageErrorGetKeyPair   = "Error getting keypair for CA issuer: "
	messageErrorInvalidPair  = "Error parsing keypair for CA issuer: "
	issuerTypeSelfSigned     = "selfSigned"
	issuerTypeCA             = "ca"
	unsupportedIssuerMessage = "the cert-manager stand-in of the CAPOV tests signs only with selfSigned and ca issuers"
)

type issuerReconciler struct {
	client                   client.Client
	clusterResourceNamespace string
}

func (r *issuerReconciler) setup(mgr ctrl.Manager) error {
	// A CA Secret that appears or changes makes the issuers that name it look again.
	secretToIssuers := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var out []reconcile.Request
		issuers := &cmapi.IssuerList{}
		if err := r.client.List(ctx, issuers, client.InNamespace(o.GetNamespace())); err == nil {
			for _, i := range issuers.Items {
				if i.Spec.CA != nil && i.Spec.CA.SecretName == o.GetName() {
					out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: i.Namespace, Name: i.Name}})
				}
			}
		}
		return out
	})
	secretToClusterIssuers := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var out []reconcile.Request
		if o.GetNamespace() != r.clusterResourceNamespace {
			return nil
		}
		issuers := &cmapi.ClusterIssuerList{}
		if err := r.client.List(ctx, issuers); err == nil {
			for _, i := range issuers.Items {
				if i.Spec.CA != nil && i.Spec.CA.SecretName == o.GetName() {
					out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: i.Name}})
				}
			}
		}
		return out
	})
	if err := ctrl.NewControllerManagedBy(mgr).Named("issuers").
		For(&cmapi.Issuer{}).
		Watches(&corev1.Secret{}, secretToIssuers).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			return r.reconcile(ctx, req, &cmapi.Issuer{})
		})); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("clusterissuers").
		For(&cmapi.ClusterIssuer{}).
		Watches(&corev1.Secret{}, secretToClusterIssuers).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			return r.reconcile(ctx, req, &cmapi.ClusterIssuer{})
		}))
}

// reconcile sets the issuer's Ready condition, as cert-manager's issuer controllers do.
func (r *issuerReconciler) reconcile(ctx context.Context, req reconcile.Request, iss cmapi.GenericIssuer) (reconcile.Result, error) {
	if err := r.client.Get(ctx, req.NamespacedName, iss); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := iss.DeepCopyObject().(cmapi.GenericIssuer)
	status, reason, message := r.readiness(ctx, iss)
	apiutil.SetIssuerCondition(iss, iss.GetGeneration(), cmapi.IssuerConditionReady, status, reason, message)
	if equalConditions(before.GetStatus().Conditions, iss.GetStatus().Conditions) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.client.Status().Update(ctx, iss)
}

// readiness is the issuer's Ready condition: the issuer's type, and for a CA its key pair.
func (r *issuerReconciler) readiness(ctx context.Context, iss cmapi.GenericIssuer) (cmmeta.ConditionStatus, string, string) {
	typ, err := issuerType(iss.GetSpec())
	if err != nil {
		return cmmeta.ConditionFalse, reasonErrInitIssuer, messageErrorInitIssuer + err.Error()
	}
	if typ == issuerTypeSelfSigned {
		return cmmeta.ConditionTrue, reasonIsReady, ""
	}
	ns := iss.GetNamespace()
	if iss.GetObjectKind().GroupVersionKind().Kind == cmapi.ClusterIssuerKind || ns == "" {
		ns = r.clusterResourceNamespace
	}
	if _, _, err := loadCA(ctx, r.client, ns, iss.GetSpec().CA.SecretName); err != nil {
		var invalid invalidKeyPairError
		if errors.As(err, &invalid) {
			return cmmeta.ConditionFalse, reasonErrInvalidKeyPair, messageErrorInvalidPair + err.Error()
		}
		return cmmeta.ConditionFalse, reasonErrGetKeyPair, messageErrorGetKeyPair + err.Error()
	}
	return cmmeta.ConditionTrue, reasonKeyPairVerified, messageKeyPairVerified
}

// issuerType is the one configured issuer type, refusing none, more than one, and the types
// the stand-in cannot sign with (as cert-manager's webhook and issuer factory refuse).
func issuerType(spec *cmapi.IssuerSpec) (string, error) {
	var set []string
	if spec.ACME != nil {
		set = append(set, "acme")
	}
	if spec.CA != nil {
		set = append(set, issuerTypeCA)
	}
	if spec.SelfSigned != nil {
		set = append(set, issuerTypeSelfSigned)
	}
	if spec.Vault != nil {
		set = append(set, "vault")
	}
	if spec.Venafi != nil {
		set = append(set, "venafi")
	}
	switch {
	case len(set) == 0:
		return "", errors.New("no issuer type configured: at least one issuer must be configured")
	case len(set) > 1:
		return "", fmt.Errorf("may not specify more than one issuer type: %v", set)
	case set[0] != issuerTypeSelfSigned && set[0] != issuerTypeCA:
		return "", fmt.Errorf("issuer type %s: %s", set[0], unsupportedIssuerMessage)
	case set[0] == issuerTypeCA && spec.CA.SecretName == "":
		return "", errors.New("spec.ca.secretName: Required value: must be specified")
	}
	return set[0], nil
}

// invalidKeyPairError is a CA Secret that exists but does not hold a usable CA key pair.
type invalidKeyPairError struct{ err error }

func (e invalidKeyPairError) Error() string { return e.err.Error() }

// loadCA reads a CA issuer's key pair (tls.crt, tls.key) from its Secret.
func loadCA(ctx context.Context, c client.Client, namespace, name string) ([]*x509.Certificate, crypto.Signer, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("secret %q not found", namespace+"/"+name)
		}
		return nil, nil, err
	}
	pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, nil, invalidKeyPairError{err}
	}
	var chain []*x509.Certificate
	for _, der := range pair.Certificate {
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, nil, invalidKeyPairError{err}
		}
		chain = append(chain, cert)
	}
	if !chain[0].IsCA {
		return nil, nil, invalidKeyPairError{fmt.Errorf("the certificate of secret %q is not a CA (isCA false)", namespace+"/"+name)}
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, nil, invalidKeyPairError{errors.New("the private key cannot sign")}
	}
	return chain, signer, nil
}
