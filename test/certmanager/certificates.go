package certmanager

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"time"

	apiutil "github.com/cert-manager/cert-manager/pkg/api/util"
	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// cert-manager's reasons for a Certificate's conditions: the Ready reasons of its readiness
// controller and issuance policy chain (internal/controller/certificates/policies), and the
// reasons a CertificateRequest waits for its issuer (pkg/controller/certificaterequests).
const (
	reasonReady              = "Ready"
	messageReady             = "Certificate is up to date and has not expired"
	reasonDoesNotExist       = "DoesNotExist"
	reasonMissingData        = "MissingData"
	reasonInvalidKeyPair     = "InvalidKeyPair"
	reasonSecretMismatch     = "SecretMismatch"
	reasonIncorrectIssuer    = "IncorrectIssuer"
	reasonIncorrectCert      = "IncorrectCertificate"
	reasonRenewing           = "Renewing"
	reasonExpired            = "Expired"
	reasonFailed             = "Failed"
	reasonIssuerNotFound     = "IssuerNotFound"
	reasonIssuerNotReady     = "IssuerNotReady"
	reasonIssuerTypeMissing  = "IssuerTypeMissing"
	messageFailed            = "The certificate request has failed to complete and will be retried: "
	minimumDuration          = time.Hour
	minimumRenewBefore       = 5 * time.Minute
	defaultRSAKeySize        = 2048
	minRSAKeySize            = 2048
	maxRSAKeySize            = 8192
	defaultECDSAKeySize      = 256
	labelFAO                 = "controller.cert-manager.io/fao"
	annotationEmailSANs      = "cert-manager.io/email-sans"
	annotationCertificateKey = cmapi.CertificateNameKey
)

type certificateReconciler struct {
	client                   client.Client
	reader                   client.Reader // uncached, for the status that must not be lost
	clusterResourceNamespace string
	now                      func() time.Time
}

func (r *certificateReconciler) setup(mgr ctrl.Manager) error {
	// A Certificate looks again when its Secret or its issuer changes.
	secretToCerts := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.certificatesIn(ctx, o.GetNamespace(), func(c *cmapi.Certificate) bool { return c.Spec.SecretName == o.GetName() })
	})
	issuerToCerts := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.certificatesIn(ctx, o.GetNamespace(), func(c *cmapi.Certificate) bool {
			return c.Spec.IssuerRef.Name == o.GetName() && issuerKind(c) == cmapi.IssuerKind
		})
	})
	clusterIssuerToCerts := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.certificatesIn(ctx, "", func(c *cmapi.Certificate) bool {
			return c.Spec.IssuerRef.Name == o.GetName() && issuerKind(c) == cmapi.ClusterIssuerKind
		})
	})
	return ctrl.NewControllerManagedBy(mgr).Named("certificates").
		For(&cmapi.Certificate{}).
		Watches(&corev1.Secret{}, secretToCerts).
		Watches(&cmapi.Issuer{}, issuerToCerts).
		Watches(&cmapi.ClusterIssuer{}, clusterIssuerToCerts).
		Complete(r)
}

func (r *certificateReconciler) certificatesIn(ctx context.Context, namespace string, match func(*cmapi.Certificate) bool) []reconcile.Request {
	certs := &cmapi.CertificateList{}
	if err := r.client.List(ctx, certs, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range certs.Items {
		if match(&certs.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: certs.Items[i].Namespace, Name: certs.Items[i].Name}})
		}
	}
	return out
}

func issuerKind(c *cmapi.Certificate) string {
	if c.Spec.IssuerRef.Kind == "" {
		return cmapi.IssuerKind
	}
	return c.Spec.IssuerRef.Kind
}

// Reconcile issues the Certificate into its Secret when the Secret is missing, wrong or due
// for renewal, and keeps its Ready and Issuing conditions as cert-manager does.
func (r *certificateReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	crt := &cmapi.Certificate{}
	if err := r.client.Get(ctx, req.NamespacedName, crt); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := crt.DeepCopy()
	secret := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: crt.Namespace, Name: crt.Spec.SecretName}, secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		secret = nil
	}
	now := r.now()
	if errs := ValidateCertificate(crt); len(errs) > 0 {
		// What cert-manager's webhook refuses is never issued; the spec must change.
		reason, message, _ := r.policy(crt, secret, now)
		if reason == "" {
			reason, message = reasonFailed, "The certificate spec is invalid"
		}
		apiutil.SetCertificateCondition(crt, crt.Generation, cmapi.CertificateConditionReady, cmmeta.ConditionFalse, reason, message)
		apiutil.SetCertificateCondition(crt, crt.Generation, cmapi.CertificateConditionIssuing, cmmeta.ConditionFalse, reasonFailed, messageFailed+errs.ToAggregate().Error())
		return reconcile.Result{}, r.updateStatus(ctx, before, crt)
	}
	reason, message, needsIssue := r.policy(crt, secret, now)
	if !needsIssue {
		apiutil.SetCertificateCondition(crt, crt.Generation, cmapi.CertificateConditionReady, cmmeta.ConditionTrue, reasonReady, messageReady)
		apiutil.RemoveCertificateCondition(crt, cmapi.CertificateConditionIssuing)
		if err := r.updateStatus(ctx, before, crt); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: crt.Status.RenewalTime.Sub(now)}, nil
	}
	apiutil.SetCertificateCondition(crt, crt.Generation, cmapi.CertificateConditionReady, cmmeta.ConditionFalse, reason, message)
	signer, pending, pendingMessage, err := r.signer(ctx, crt)
	if err != nil {
		return reconcile.Result{}, err
	}
	if pending != "" {
		// Waiting for the issuer: the issuer's watch brings the Certificate back.
		apiutil.SetCertificateCondition(crt, crt.Generation, cmapi.CertificateConditionIssuing, cmmeta.ConditionTrue, pending, pendingMessage)
		return reconcile.Result{}, r.updateStatus(ctx, before, crt)
	}
	log.Info("Issuing certificate", "Certificate", klogRef(crt), "reason", reason)
	issued, err := issue(crt, secret, signer, now)
	if err != nil {
		apiutil.SetCertificateCondition(crt, crt.Generation, cmapi.CertificateConditionIssuing, cmmeta.ConditionFalse, reasonFailed, messageFailed+err.Error())
		return reconcile.Result{}, r.updateStatus(ctx, before, crt)
	}
	if err := r.writeSecret(ctx, crt, secret, issued); err != nil {
		return reconcile.Result{}, err
	}
	revision := 1
	if crt.Status.Revision != nil {
		revision = *crt.Status.Revision + 1
	}
	crt.Status.Revision = &revision
	crt.Status.NotBefore = &metav1.Time{Time: issued.cert.NotBefore}
	crt.Status.NotAfter = &metav1.Time{Time: issued.cert.NotAfter}
	crt.Status.RenewalTime = &metav1.Time{Time: renewalTime(crt, issued.cert)}
	crt.Status.LastFailureTime, crt.Status.FailedIssuanceAttempts = nil, nil
	apiutil.SetCertificateCondition(crt, crt.Generation, cmapi.CertificateConditionReady, cmmeta.ConditionTrue, reasonReady, messageReady)
	apiutil.RemoveCertificateCondition(crt, cmapi.CertificateConditionIssuing)
	if err := r.recordIssuance(ctx, crt); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: crt.Status.RenewalTime.Sub(now)}, nil
}

// recordIssuance writes the status of a certificate just written into its Secret. A conflict
// (the cache behind the API server) is retried on the current object: once the Secret holds the
// certificate, the next reconcile finds nothing to issue, and a lost status would leave the
// Certificate Ready without the revision cert-manager records for each issuance.
func (r *certificateReconciler) recordIssuance(ctx context.Context, crt *cmapi.Certificate) error {
	issued := crt.Status
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := r.reader.Get(ctx, client.ObjectKeyFromObject(crt), crt); err != nil {
				return err
			}
			crt.Status = issued
		}
		first = false
		return r.client.Status().Update(ctx, crt)
	})
}

func klogRef(o client.Object) string { return o.GetNamespace() + "/" + o.GetName() }

func (r *certificateReconciler) updateStatus(ctx context.Context, before, crt *cmapi.Certificate) error {
	if equalConditions(before.Status.Conditions, crt.Status.Conditions) && before.Status.Revision == crt.Status.Revision &&
		before.Status.RenewalTime.Equal(crt.Status.RenewalTime) {
		return nil
	}
	return r.client.Status().Update(ctx, crt)
}

// policy is cert-manager's issuance policy chain as far as the stand-in's features go: the
// first reason the Secret does not hold a current certificate for the spec, or "" when it does.
func (r *certificateReconciler) policy(crt *cmapi.Certificate, secret *corev1.Secret, now time.Time) (reason, message string, issue bool) {
	if secret == nil {
		return reasonDoesNotExist, "Issuing certificate as Secret does not exist", true
	}
	if len(secret.Data[corev1.TLSCertKey]) == 0 {
		return reasonMissingData, "Issuing certificate as Secret does not contain a certificate", true
	}
	if len(secret.Data[corev1.TLSPrivateKeyKey]) == 0 {
		return reasonMissingData, "Issuing certificate as Secret does not contain a private key", true
	}
	pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return reasonInvalidKeyPair, fmt.Sprintf("Issuing certificate as Secret contains an invalid key-pair: %v", err), true
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return reasonInvalidKeyPair, fmt.Sprintf("Issuing certificate as Secret contains an invalid certificate: %v", err), true
	}
	if v := keyMismatch(crt, pair.PrivateKey); v != "" {
		return reasonSecretMismatch, "Existing private key is not up to date for spec: " + v, true
	}
	a := secret.Annotations
	if a[cmapi.IssuerNameAnnotationKey] != crt.Spec.IssuerRef.Name || a[cmapi.IssuerKindAnnotationKey] != issuerKind(crt) ||
		!sameGroup(a[cmapi.IssuerGroupAnnotationKey], crt.Spec.IssuerRef.Group) {
		return reasonIncorrectIssuer, fmt.Sprintf("Issuing certificate as Secret was previously issued by %q",
			a[cmapi.IssuerNameAnnotationKey]+"."+a[cmapi.IssuerKindAnnotationKey]+"."+a[cmapi.IssuerGroupAnnotationKey]), true
	}
	if name := a[annotationCertificateKey]; name != crt.Name {
		return reasonIncorrectCert, fmt.Sprintf("Secret was issued for %q. If this message is not transient, you might have two conflicting Certificates pointing to the same secret.", name), true
	}
	if v := specMismatch(crt, cert); v != "" {
		return reasonSecretMismatch, "Issuing certificate as Existing issued Secret is not up to date for spec: " + v, true
	}
	if crt.Status.RenewalTime == nil || crt.Status.NotAfter == nil || !crt.Status.NotAfter.Time.Equal(cert.NotAfter) {
		// The status does not describe this Secret (restored or copied): record it.
		crt.Status.NotBefore = &metav1.Time{Time: cert.NotBefore}
		crt.Status.NotAfter = &metav1.Time{Time: cert.NotAfter}
		crt.Status.RenewalTime = &metav1.Time{Time: renewalTime(crt, cert)}
	}
	if !now.Before(cert.NotAfter) {
		return reasonExpired, fmt.Sprintf("Certificate expired on %s", cert.NotAfter.Format(time.RFC1123)), true
	}
	if !now.Before(crt.Status.RenewalTime.Time) {
		return reasonRenewing, fmt.Sprintf("Renewing certificate as renewal was scheduled at %s", crt.Status.RenewalTime), true
	}
	return "", "", false
}

func sameGroup(a, b string) bool {
	norm := func(g string) string {
		if g == "" {
			return "cert-manager.io"
		}
		return g
	}
	return norm(a) == norm(b)
}

// keyMismatch tells how a private key differs from the spec's algorithm and size ("" if not).
func keyMismatch(crt *cmapi.Certificate, key crypto.PrivateKey) string {
	alg, size := keySpec(crt)
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if alg != cmapi.RSAKeyAlgorithm {
			return "spec.privateKey.algorithm: " + string(alg) + " != RSA"
		}
		if k.N.BitLen() != size {
			return fmt.Sprintf("spec.privateKey.size: %d != %d", size, k.N.BitLen())
		}
	case *ecdsa.PrivateKey:
		if alg != cmapi.ECDSAKeyAlgorithm {
			return "spec.privateKey.algorithm: " + string(alg) + " != ECDSA"
		}
		if k.Curve.Params().BitSize != size {
			return fmt.Sprintf("spec.privateKey.size: %d != %d", size, k.Curve.Params().BitSize)
		}
	case ed25519.PrivateKey:
		if alg != cmapi.Ed25519KeyAlgorithm {
			return "spec.privateKey.algorithm: " + string(alg) + " != Ed25519"
		}
	default:
		return fmt.Sprintf("unknown private key type %T", key)
	}
	return ""
}

// specMismatch tells how an issued certificate differs from the spec ("" if not).
func specMismatch(crt *cmapi.Certificate, cert *x509.Certificate) string {
	var v []string
	if cert.Subject.CommonName != crt.Spec.CommonName {
		v = append(v, "spec.commonName")
	}
	if !sameSet(cert.DNSNames, crt.Spec.DNSNames) {
		v = append(v, "spec.dnsNames")
	}
	var ips []string
	for _, ip := range cert.IPAddresses {
		ips = append(ips, ip.String())
	}
	var want []string
	for _, ip := range crt.Spec.IPAddresses {
		want = append(want, net.ParseIP(ip).String())
	}
	if !sameSet(ips, want) {
		v = append(v, "spec.ipAddresses")
	}
	var uris []string
	for _, u := range cert.URIs {
		uris = append(uris, u.String())
	}
	if !sameSet(uris, crt.Spec.URIs) {
		v = append(v, "spec.uris")
	}
	if !sameSet(cert.EmailAddresses, crt.Spec.EmailAddresses) {
		v = append(v, "spec.emailAddresses")
	}
	if cert.IsCA != crt.Spec.IsCA {
		v = append(v, "spec.isCA")
	}
	if d := duration(crt); !cert.NotAfter.Equal(cert.NotBefore.Add(d)) {
		v = append(v, "spec.duration")
	}
	return strings.Join(v, ", ")
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func keySpec(crt *cmapi.Certificate) (cmapi.PrivateKeyAlgorithm, int) {
	alg, size := cmapi.RSAKeyAlgorithm, 0
	if pk := crt.Spec.PrivateKey; pk != nil {
		if pk.Algorithm != "" {
			alg = pk.Algorithm
		}
		size = pk.Size
	}
	if size == 0 {
		switch alg {
		case cmapi.RSAKeyAlgorithm:
			size = defaultRSAKeySize
		case cmapi.ECDSAKeyAlgorithm:
			size = defaultECDSAKeySize
		}
	}
	return alg, size
}

func duration(crt *cmapi.Certificate) time.Duration {
	if crt.Spec.Duration != nil {
		return crt.Spec.Duration.Duration
	}
	return cmapi.DefaultCertificateDuration
}

// renewalTime is notAfter minus renewBefore (default: a third of the duration), as cert-manager.
func renewalTime(crt *cmapi.Certificate, cert *x509.Certificate) time.Time {
	d := cert.NotAfter.Sub(cert.NotBefore)
	before := d / 3
	switch {
	case crt.Spec.RenewBefore != nil:
		before = crt.Spec.RenewBefore.Duration
	case crt.Spec.RenewBeforePercentage != nil:
		before = d * time.Duration(*crt.Spec.RenewBeforePercentage) / 100
	}
	return cert.NotAfter.Add(-before)
}

// issuerSigner signs a certificate: itself (selfSigned) or with a CA's key pair.
type issuerSigner struct {
	kind, name, group string
	chain             []*x509.Certificate // nil: self-signed
	key               crypto.Signer
}

// signer resolves the Certificate's issuer; pending names why it must wait (cert-manager's
// CertificateRequest reasons IssuerNotFound, IssuerTypeMissing, IssuerNotReady).
func (r *certificateReconciler) signer(ctx context.Context, crt *cmapi.Certificate) (s *issuerSigner, pending, message string, err error) {
	ref := crt.Spec.IssuerRef
	kind := issuerKind(crt)
	if !sameGroup(ref.Group, "") {
		return nil, reasonIssuerNotFound, fmt.Sprintf("Referenced issuer of group %q: %s (external issuers are not signed for)", ref.Group, unsupportedIssuerMessage), nil
	}
	var iss cmapi.GenericIssuer = &cmapi.Issuer{}
	key := client.ObjectKey{Namespace: crt.Namespace, Name: ref.Name}
	caNamespace := crt.Namespace
	if kind == cmapi.ClusterIssuerKind {
		iss, key, caNamespace = &cmapi.ClusterIssuer{}, client.ObjectKey{Name: ref.Name}, r.clusterResourceNamespace
	}
	if err := r.client.Get(ctx, key, iss); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, reasonIssuerNotFound, fmt.Sprintf("Referenced %q not found: %v", kind, err), nil
		}
		return nil, "", "", err
	}
	typ, err := issuerType(iss.GetSpec())
	if err != nil {
		return nil, reasonIssuerTypeMissing, "Missing issuer type: " + err.Error(), nil //nolint:nilerr // a wait, reported in the Issuing condition; the issuer's watch retries
	}
	if !apiutil.IssuerHasCondition(iss, cmapi.IssuerCondition{Type: cmapi.IssuerConditionReady, Status: cmmeta.ConditionTrue}) {
		return nil, reasonIssuerNotReady, "Referenced issuer does not have a Ready status condition", nil
	}
	s = &issuerSigner{kind: kind, name: ref.Name, group: ref.Group}
	if typ == issuerTypeCA {
		s.chain, s.key, err = loadCA(ctx, r.client, caNamespace, iss.GetSpec().CA.SecretName)
		if err != nil {
			return nil, reasonIssuerNotReady, "Referenced CA issuer's key pair: " + err.Error(), nil //nolint:nilerr // a wait, reported in the Issuing condition; the Secret's watch retries
		}
	}
	return s, "", "", nil
}

type issuedCert struct {
	cert                *x509.Certificate
	keyPEM, certPEM, ca []byte
}

// issue makes a new key (or keeps the Secret's with rotationPolicy Never) and signs a
// certificate for the spec.
func issue(crt *cmapi.Certificate, secret *corev1.Secret, s *issuerSigner, now time.Time) (*issuedCert, error) {
	var key crypto.Signer
	if pk := crt.Spec.PrivateKey; pk != nil && pk.RotationPolicy == cmapi.RotationPolicyNever && secret != nil {
		if block, _ := pem.Decode(secret.Data[corev1.TLSPrivateKeyKey]); block != nil {
			if k, err := parseKey(block); err == nil && keyMismatch(crt, k) == "" {
				key = k
			}
		}
	}
	if key == nil {
		var err error
		if key, err = generateKey(crt); err != nil {
			return nil, err
		}
	}
	keyPEM, err := encodeKey(crt, key)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	notBefore := now.Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject(crt),
		DNSNames:              crt.Spec.DNSNames,
		EmailAddresses:        crt.Spec.EmailAddresses,
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(duration(crt)),
		IsCA:                  crt.Spec.IsCA,
		BasicConstraintsValid: true,
	}
	for _, ip := range crt.Spec.IPAddresses {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	for _, u := range crt.Spec.URIs {
		parsed, err := url.Parse(u)
		if err != nil {
			return nil, err
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	tmpl.KeyUsage, tmpl.ExtKeyUsage = keyUsages(crt)
	parent, signer := tmpl, key
	if s.chain != nil {
		parent, signer = s.chain[0], s.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	out := &issuedCert{cert: cert, keyPEM: keyPEM, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	if s.chain == nil {
		out.ca = out.certPEM
		return out, nil
	}
	// The leaf, then the CA's chain up to (not including a self-signed) root; ca.crt is the root.
	var chainPEM bytes.Buffer
	chainPEM.Write(out.certPEM)
	for i, c := range s.chain {
		if i == len(s.chain)-1 && len(s.chain) > 1 && bytes.Equal(c.RawIssuer, c.RawSubject) {
			break
		}
		chainPEM.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
	}
	out.certPEM = chainPEM.Bytes()
	out.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.chain[len(s.chain)-1].Raw})
	return out, nil
}

func subject(crt *cmapi.Certificate) pkix.Name {
	n := pkix.Name{CommonName: crt.Spec.CommonName}
	if s := crt.Spec.Subject; s != nil {
		n.Organization, n.OrganizationalUnit, n.Country = s.Organizations, s.OrganizationalUnits, s.Countries
		n.Province, n.Locality, n.StreetAddress, n.PostalCode = s.Provinces, s.Localities, s.StreetAddresses, s.PostalCodes
		n.SerialNumber = s.SerialNumber
	}
	return n
}

func generateKey(crt *cmapi.Certificate) (crypto.Signer, error) {
	alg, size := keySpec(crt)
	switch alg {
	case cmapi.RSAKeyAlgorithm:
		return rsa.GenerateKey(rand.Reader, size)
	case cmapi.ECDSAKeyAlgorithm:
		curve := map[int]elliptic.Curve{256: elliptic.P256(), 384: elliptic.P384(), 521: elliptic.P521()}[size]
		return ecdsa.GenerateKey(curve, rand.Reader)
	case cmapi.Ed25519KeyAlgorithm:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("unsupported private key algorithm %q", alg)
}

// encodeKey writes the key as spec.privateKey.encoding asks (PKCS1, the default, or PKCS8).
func encodeKey(crt *cmapi.Certificate, key crypto.Signer) ([]byte, error) {
	pkcs8 := crt.Spec.PrivateKey != nil && crt.Spec.PrivateKey.Encoding == cmapi.PKCS8
	var block *pem.Block
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if !pkcs8 {
			block = &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}
		}
	case *ecdsa.PrivateKey:
		if !pkcs8 {
			der, err := x509.MarshalECPrivateKey(k)
			if err != nil {
				return nil, err
			}
			block = &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
		}
	}
	if block == nil {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, err
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	}
	return pem.EncodeToMemory(block), nil
}

func parseKey(block *pem.Block) (crypto.Signer, error) {
	switch block.Type {
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(block.Bytes)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key type %T cannot sign", k)
	}
	return s, nil
}

var keyUsageNames = map[cmapi.KeyUsage]x509.KeyUsage{
	cmapi.UsageSigning: x509.KeyUsageDigitalSignature, cmapi.UsageDigitalSignature: x509.KeyUsageDigitalSignature,
	cmapi.UsageContentCommitment: x509.KeyUsageContentCommitment, cmapi.UsageKeyEncipherment: x509.KeyUsageKeyEncipherment,
	cmapi.UsageKeyAgreement: x509.KeyUsageKeyAgreement, cmapi.UsageDataEncipherment: x509.KeyUsageDataEncipherment,
	cmapi.UsageCertSign: x509.KeyUsageCertSign, cmapi.UsageCRLSign: x509.KeyUsageCRLSign,
	cmapi.UsageEncipherOnly: x509.KeyUsageEncipherOnly, cmapi.UsageDecipherOnly: x509.KeyUsageDecipherOnly,
}

var extKeyUsageNames = map[cmapi.KeyUsage]x509.ExtKeyUsage{
	cmapi.UsageAny: x509.ExtKeyUsageAny, cmapi.UsageServerAuth: x509.ExtKeyUsageServerAuth,
	cmapi.UsageClientAuth: x509.ExtKeyUsageClientAuth, cmapi.UsageCodeSigning: x509.ExtKeyUsageCodeSigning,
	cmapi.UsageEmailProtection: x509.ExtKeyUsageEmailProtection, cmapi.UsageSMIME: x509.ExtKeyUsageEmailProtection,
	cmapi.UsageIPsecEndSystem: x509.ExtKeyUsageIPSECEndSystem, cmapi.UsageIPsecTunnel: x509.ExtKeyUsageIPSECTunnel,
	cmapi.UsageIPsecUser: x509.ExtKeyUsageIPSECUser, cmapi.UsageTimestamping: x509.ExtKeyUsageTimeStamping,
	cmapi.UsageOCSPSigning: x509.ExtKeyUsageOCSPSigning, cmapi.UsageMicrosoftSGC: x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	cmapi.UsageNetscapeSGC: x509.ExtKeyUsageNetscapeServerGatedCrypto,
}

// keyUsages: the spec's usages, default digital signature and key encipherment (cert-manager's
// default), plus cert sign for a CA.
func keyUsages(crt *cmapi.Certificate) (x509.KeyUsage, []x509.ExtKeyUsage) {
	usages := crt.Spec.Usages
	if len(usages) == 0 {
		usages = []cmapi.KeyUsage{cmapi.UsageDigitalSignature, cmapi.UsageKeyEncipherment}
	}
	var ku x509.KeyUsage
	var ext []x509.ExtKeyUsage
	for _, u := range usages {
		if k, ok := keyUsageNames[u]; ok {
			ku |= k
		}
		if e, ok := extKeyUsageNames[u]; ok {
			ext = append(ext, e)
		}
	}
	if crt.Spec.IsCA {
		ku |= x509.KeyUsageCertSign
	}
	return ku, ext
}

// writeSecret stores the key pair with cert-manager's annotations and the secret template.
func (r *certificateReconciler) writeSecret(ctx context.Context, crt *cmapi.Certificate, existing *corev1.Secret, issued *issuedCert) error {
	s := existing
	if s == nil {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: crt.Namespace, Name: crt.Spec.SecretName}, Type: corev1.SecretTypeTLS}
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	if t := crt.Spec.SecretTemplate; t != nil {
		for k, v := range t.Annotations {
			s.Annotations[k] = v
		}
		for k, v := range t.Labels {
			s.Labels[k] = v
		}
	}
	s.Labels[labelFAO] = "true"
	var ips []string
	for _, ip := range issued.cert.IPAddresses {
		ips = append(ips, ip.String())
	}
	var uris []string
	for _, u := range issued.cert.URIs {
		uris = append(uris, u.String())
	}
	for k, v := range map[string]string{
		annotationCertificateKey:               crt.Name,
		cmapi.IssuerNameAnnotationKey:          crt.Spec.IssuerRef.Name,
		cmapi.IssuerKindAnnotationKey:          issuerKind(crt),
		cmapi.IssuerGroupAnnotationKey:         crt.Spec.IssuerRef.Group,
		cmapi.CommonNameAnnotationKey:          issued.cert.Subject.CommonName,
		cmapi.AltNamesAnnotationKey:            strings.Join(issued.cert.DNSNames, ","),
		cmapi.IPSANAnnotationKey:               strings.Join(ips, ","),
		cmapi.URISANAnnotationKey:              strings.Join(uris, ","),
		annotationEmailSANs:                    strings.Join(issued.cert.EmailAddresses, ","),
		cmapi.SubjectSerialNumberAnnotationKey: issued.cert.Subject.SerialNumber,
	} {
		s.Annotations[k] = v
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], s.Data[cmmeta.TLSCAKey] = issued.certPEM, issued.keyPEM, issued.ca
	if existing == nil {
		return r.client.Create(ctx, s)
	}
	return r.client.Update(ctx, s)
}

// ValidateCertificate refuses what cert-manager's admission webhook refuses
// (internal/apis/certmanager/validation/certificate.go) and what the stand-in cannot issue.
func ValidateCertificate(crt *cmapi.Certificate) field.ErrorList {
	var el field.ErrorList
	spec := crt.Spec
	p := field.NewPath("spec")
	if spec.SecretName == "" {
		el = append(el, field.Required(p.Child("secretName"), "must be specified"))
	} else if errs := validation.IsDNS1123Subdomain(spec.SecretName); len(errs) > 0 {
		el = append(el, field.Invalid(p.Child("secretName"), spec.SecretName, strings.Join(errs, ", ")))
	}
	if spec.IssuerRef.Name == "" {
		el = append(el, field.Required(p.Child("issuerRef", "name"), "must be specified"))
	}
	if sameGroup(spec.IssuerRef.Group, "") {
		switch spec.IssuerRef.Kind {
		case "", cmapi.IssuerKind, cmapi.ClusterIssuerKind:
		default:
			el = append(el, field.Invalid(p.Child("issuerRef", "kind"), spec.IssuerRef.Kind, "must be one of Issuer or ClusterIssuer"))
		}
	}
	if spec.LiteralSubject != "" {
		el = append(el, field.Forbidden(p.Child("literalSubject"), "not supported by the cert-manager stand-in"))
	}
	if spec.CommonName == "" && len(spec.DNSNames) == 0 && len(spec.URIs) == 0 && len(spec.EmailAddresses) == 0 &&
		len(spec.IPAddresses) == 0 && len(spec.OtherNames) == 0 {
		el = append(el, field.Invalid(p, "", "at least one of commonName (from the commonName field or from a literalSubject), dnsNames, emailSANs, ipAddresses, otherNames, or uriSANs must be set"))
	}
	if len(spec.OtherNames) > 0 {
		el = append(el, field.Forbidden(p.Child("otherNames"), "Feature gate OtherNames must be enabled on both webhook and controller to use the alpha `otherNames` field"))
	}
	if pk := spec.PrivateKey; pk != nil {
		switch pk.Algorithm {
		case "", cmapi.RSAKeyAlgorithm:
			if pk.Size != 0 && (pk.Size < minRSAKeySize || pk.Size > maxRSAKeySize) {
				el = append(el, field.Invalid(p.Child("privateKey", "size"), pk.Size, fmt.Sprintf("must be between %d and %d for rsa keyAlgorithm", minRSAKeySize, maxRSAKeySize)))
			}
		case cmapi.ECDSAKeyAlgorithm:
			if pk.Size != 0 && pk.Size != 256 && pk.Size != 384 && pk.Size != 521 {
				el = append(el, field.NotSupported(p.Child("privateKey", "size"), pk.Size, []string{"256", "384", "521"}))
			}
		case cmapi.Ed25519KeyAlgorithm:
		default:
			el = append(el, field.Invalid(p.Child("privateKey", "algorithm"), pk.Algorithm, "must be either empty or one of rsa, ecdsa or ed25519"))
		}
		switch pk.Encoding {
		case "", cmapi.PKCS1, cmapi.PKCS8:
		default:
			el = append(el, field.NotSupported(p.Child("privateKey", "encoding"), pk.Encoding, []string{string(cmapi.PKCS1), string(cmapi.PKCS8)}))
		}
		switch pk.RotationPolicy {
		case "", cmapi.RotationPolicyAlways, cmapi.RotationPolicyNever:
		default:
			el = append(el, field.NotSupported(p.Child("privateKey", "rotationPolicy"), pk.RotationPolicy, []string{string(cmapi.RotationPolicyAlways), string(cmapi.RotationPolicyNever)}))
		}
	}
	for i, ip := range spec.IPAddresses {
		if net.ParseIP(ip) == nil {
			el = append(el, field.Invalid(p.Child("ipAddresses").Index(i), ip, "invalid IP address"))
		}
	}
	for i, e := range spec.EmailAddresses {
		a, err := mail.ParseAddress(e)
		if err != nil {
			el = append(el, field.Invalid(p.Child("emailAddresses").Index(i), e, fmt.Sprintf("invalid email address: %s", err)))
		} else if a.Address != e {
			el = append(el, field.Invalid(p.Child("emailAddresses").Index(i), e, "invalid email address: make sure the supplied value only contains the email address itself"))
		}
	}
	for i, u := range spec.URIs {
		if parsed, err := url.Parse(u); err != nil || parsed.Scheme == "" {
			el = append(el, field.Invalid(p.Child("uris").Index(i), u, "invalid URI"))
		}
	}
	for i, u := range spec.Usages {
		_, k := keyUsageNames[u]
		_, e := extKeyUsageNames[u]
		if !k && !e {
			el = append(el, field.Invalid(p.Child("usages").Index(i), u, "unknown keyusage"))
		}
	}
	if t := spec.SecretTemplate; t != nil {
		for a := range t.Annotations {
			if strings.HasPrefix(a, "cert-manager.io/") {
				el = append(el, field.Invalid(p.Child("secretTemplate", "annotations"), a, "cert-manager.io/* annotations are not allowed"))
			}
		}
	}
	d := duration(crt)
	if d < minimumDuration {
		el = append(el, field.Invalid(p.Child("duration"), d, fmt.Sprintf("certificate duration must be greater than %s", minimumDuration)))
	}
	if spec.RenewBefore != nil && spec.RenewBeforePercentage != nil {
		el = append(el, field.Invalid(p.Child("renewBefore"), spec.RenewBefore.Duration, "renewBefore and renewBeforePercentage are mutually exclusive and cannot both be set"))
	}
	if rb := spec.RenewBefore; rb != nil {
		if rb.Duration < minimumRenewBefore {
			el = append(el, field.Invalid(p.Child("renewBefore"), rb.Duration, fmt.Sprintf("certificate renewBefore must be greater than %s", minimumRenewBefore)))
		}
		if rb.Duration >= d {
			el = append(el, field.Invalid(p.Child("renewBefore"), rb.Duration, fmt.Sprintf("certificate duration %s must be greater than renewBefore %s", d, rb.Duration)))
		}
	}
	if pct := spec.RenewBeforePercentage; pct != nil {
		rb := d * time.Duration(*pct) / 100
		if rb < minimumRenewBefore {
			el = append(el, field.Invalid(p.Child("renewBeforePercentage"), *pct, fmt.Sprintf("certificate renewBeforePercentage must result in a renewBefore greater than %s", minimumRenewBefore)))
		}
		if rb >= d {
			el = append(el, field.Invalid(p.Child("renewBeforePercentage"), *pct, "certificate renewBeforePercentage must result in a renewBefore less than duration"))
		}
	}
	if spec.RevisionHistoryLimit != nil && *spec.RevisionHistoryLimit < 1 {
		el = append(el, field.Invalid(p.Child("revisionHistoryLimit"), *spec.RevisionHistoryLimit, "must not be less than 1"))
	}
	// What cert-manager can do and the stand-in cannot: refused rather than silently ignored.
	if spec.Keystores != nil {
		el = append(el, field.Forbidden(p.Child("keystores"), "not supported by the cert-manager stand-in"))
	}
	if len(spec.AdditionalOutputFormats) > 0 {
		el = append(el, field.Forbidden(p.Child("additionalOutputFormats"), "not supported by the cert-manager stand-in"))
	}
	if spec.NameConstraints != nil {
		el = append(el, field.Forbidden(p.Child("nameConstraints"), "feature gate NameConstraints must be enabled"))
	}
	if spec.SignatureAlgorithm != "" {
		el = append(el, field.Forbidden(p.Child("signatureAlgorithm"), "not supported by the cert-manager stand-in"))
	}
	return el
}

// equalConditions compares conditions without their transition times.
func equalConditions[T any](a, b []T) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}
