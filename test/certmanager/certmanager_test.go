package certmanager_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/capov/capov/test/certmanager"
	"github.com/capov/capov/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run starts envtest with cert-manager's CRDs only and the stand-in in-process; the stand-in
// stops before the API server, whose stop would otherwise wait for its watches.
func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := envtest.Start(ctx, envtest.Options{WithoutCAPICRDs: true, WithoutOurCRDs: true, WithCertManagerCRDs: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "envtest: %v\n", err)
		return 1
	}
	env = e
	utilMust(certmanagerScheme(e))
	done := make(chan error, 1)
	go func() {
		done <- certmanager.Run(ctx, e.Config, logr.Discard(), certmanager.Options{Interceptors: &interceptor.Funcs{SubResourceUpdate: injectConflicts}})
	}()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintf(os.Stderr, "the stand-in stopped: %v\n", err)
		code = 1
	}
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "envtest: stopping: %v\n", err)
	}
	return code
}

// issuanceConflicts names the Certificates (namespace/name) whose next status update recording
// an issuance fails with a conflict, as it does when the stand-in's cache is behind the API
// server; a name is removed when its conflict has been returned.
var issuanceConflicts sync.Map

func injectConflicts(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if crt, ok := obj.(*cmapi.Certificate); ok && crt.Status.Revision != nil {
		if _, ok := issuanceConflicts.LoadAndDelete(crt.Namespace + "/" + crt.Name); ok {
			return apierrors.NewConflict(cmapi.Resource("certificates"), crt.Name, errors.New("the object has been modified"))
		}
	}
	return c.SubResource(sub).Update(ctx, obj, opts...)
}

func utilMust(err error) {
	if err != nil {
		panic(err)
	}
}

func certmanagerScheme(e *envtest.Environment) error {
	if err := cmapi.AddToScheme(e.Scheme); err != nil {
		return err
	}
	c, err := client.New(e.Config, client.Options{Scheme: e.Scheme})
	e.Client = c
	return err
}

func namespace(t *testing.T, g Gomega) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cm-"}}
	g.Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

func selfSignedIssuer(ns, name string) *cmapi.Issuer {
	return &cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}}}
}

func condition(conds []cmapi.CertificateCondition, t cmapi.CertificateConditionType) *cmapi.CertificateCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func issuerReady(g Gomega, iss cmapi.GenericIssuer) (cmmeta.ConditionStatus, string, string) {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(iss), iss)).To(Succeed())
	for _, c := range iss.GetStatus().Conditions {
		if c.Type == cmapi.IssuerConditionReady {
			return c.Status, c.Reason, c.Message
		}
	}
	return "", "", ""
}

func eventuallyReady(g *WithT, crt *cmapi.Certificate) *corev1.Secret {
	ctx := context.Background()
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(crt), crt)).To(Succeed())
		c := condition(crt.Status.Conditions, cmapi.CertificateConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(cmmeta.ConditionTrue), c.Message)
		g.Expect(c.Reason).To(Equal("Ready"))
		g.Expect(c.ObservedGeneration).To(Equal(crt.Generation))
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	s := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: crt.Namespace, Name: crt.Spec.SecretName}, s)).To(Succeed())
	return s
}

func parseLeaf(g Gomega, s *corev1.Secret) *x509.Certificate {
	_, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
	g.Expect(err).NotTo(HaveOccurred(), "tls.crt and tls.key must be a key pair")
	block, _ := pem.Decode(s.Data["tls.crt"])
	g.Expect(block).NotTo(BeNil())
	cert, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	return cert
}

func TestClusterctlsReadinessObjectsAreIssued(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	// clusterctl's cert-manager-test-resources.yaml: a selfSigned Issuer and a Certificate.
	iss := selfSignedIssuer(ns, "test-selfsigned")
	g.Expect(env.Client.Create(ctx, iss)).To(Succeed())
	crt := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "selfsigned-cert"}, Spec: cmapi.CertificateSpec{
		DNSNames: []string{"example.com"}, SecretName: "selfsigned-cert-tls", IssuerRef: cmmeta.IssuerReference{Name: "test-selfsigned"},
	}}
	g.Expect(env.Client.Create(ctx, crt)).To(Succeed())
	s := eventuallyReady(g, crt)
	g.Eventually(func(g Gomega) {
		status, reason, _ := issuerReady(g, iss)
		g.Expect(status).To(Equal(cmmeta.ConditionTrue))
		g.Expect(reason).To(Equal("IsReady"))
	}).WithTimeout(10 * time.Second).Should(Succeed())
	g.Expect(s.Type).To(Equal(corev1.SecretTypeTLS))
	g.Expect(s.Data).To(HaveKey("ca.crt"))
	cert := parseLeaf(g, s)
	g.Expect(cert.DNSNames).To(Equal([]string{"example.com"}))
	g.Expect(s.Data["ca.crt"]).To(Equal(s.Data["tls.crt"]), "a self-signed certificate is its own CA")
	g.Expect(s.Annotations).To(HaveKeyWithValue("cert-manager.io/certificate-name", "selfsigned-cert"))
	g.Expect(s.Annotations).To(HaveKeyWithValue("cert-manager.io/issuer-name", "test-selfsigned"))
	g.Expect(s.Annotations).To(HaveKeyWithValue("cert-manager.io/issuer-kind", "Issuer"))
	g.Expect(s.Annotations).To(HaveKeyWithValue("cert-manager.io/alt-names", "example.com"))
	g.Expect(crt.Status.Revision).To(Equal(ptr.To(1)))
	g.Expect(crt.Status.NotAfter.Sub(crt.Status.NotBefore.Time)).To(Equal(90 * 24 * time.Hour))
	g.Expect(crt.Status.RenewalTime.Time).To(BeTemporally("==", crt.Status.NotAfter.Add(-30*24*time.Hour)))
}

// TestAnIssuanceIsRecordedWhenItsStatusUpdateConflicts: the Secret is written, then the status
// update conflicts (a cache behind the API server, as after the Issuer's pending status). The
// next reconcile finds a current Secret; the issuance must still be recorded (revision 1), as
// cert-manager's issuing controller records it.
func TestAnIssuanceIsRecordedWhenItsStatusUpdateConflicts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	g.Expect(env.Client.Create(ctx, selfSignedIssuer(ns, "self"))).To(Succeed())
	issuanceConflicts.Store(ns+"/conflicted", struct{}{})
	crt := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conflicted"}, Spec: cmapi.CertificateSpec{
		DNSNames: []string{"example.com"}, SecretName: "conflicted-tls", IssuerRef: cmmeta.IssuerReference{Name: "self"},
	}}
	g.Expect(env.Client.Create(ctx, crt)).To(Succeed())
	eventuallyReady(g, crt)
	_, pending := issuanceConflicts.Load(ns + "/conflicted")
	g.Expect(pending).To(BeFalse(), "the conflict was returned to the stand-in")
	g.Expect(crt.Status.Revision).To(Equal(ptr.To(1)), "the issuance is recorded despite the conflict")
	g.Expect(crt.Status.NotAfter).NotTo(BeNil())
}

// TestTheProvidersCertificatesAreIssuedFromACAIssuer: the serving certificate as CAPOV's and
// CAPI's config/certmanager ask for it (ECDSA P-256, a rotation policy), from a CA Issuer whose
// CA a selfSigned Issuer made, as a user with their own CA has it.
func TestTheProvidersCertificatesAreIssuedFromACAIssuer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	g.Expect(env.Client.Create(ctx, selfSignedIssuer(ns, "bootstrap"))).To(Succeed())
	ca := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "root"}, Spec: cmapi.CertificateSpec{
		CommonName: "test root", IsCA: true, SecretName: "root-ca", IssuerRef: cmmeta.IssuerReference{Name: "bootstrap", Kind: "Issuer"},
		PrivateKey: &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 384},
	}}
	g.Expect(env.Client.Create(ctx, ca)).To(Succeed())
	caIssuer := &cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"},
		Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "root-ca"}}}}
	g.Expect(env.Client.Create(ctx, caIssuer)).To(Succeed())
	serving := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serving-cert"}, Spec: cmapi.CertificateSpec{
		DNSNames:   []string{"capov-webhook-service.capov-system.svc", "capov-webhook-service.capov-system.svc.cluster.local"},
		SecretName: "capov-webhook-server-cert", IssuerRef: cmmeta.IssuerReference{Name: "ca", Kind: "Issuer"},
		Duration: &metav1.Duration{Duration: 8760 * time.Hour}, RenewBefore: &metav1.Duration{Duration: 720 * time.Hour},
		PrivateKey: &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256, RotationPolicy: cmapi.RotationPolicyAlways},
	}}
	g.Expect(env.Client.Create(ctx, serving)).To(Succeed())
	caSecret := eventuallyReady(g, ca)
	s := eventuallyReady(g, serving)
	g.Eventually(func(g Gomega) {
		status, reason, message := issuerReady(g, caIssuer)
		g.Expect(status).To(Equal(cmmeta.ConditionTrue))
		g.Expect(reason).To(Equal("KeyPairVerified"))
		g.Expect(message).To(Equal("Signing CA verified"))
	}).WithTimeout(10 * time.Second).Should(Succeed())
	leaf := parseLeaf(g, s)
	g.Expect(leaf.PublicKey).To(BeAssignableToTypeOf(&ecdsa.PublicKey{}))
	g.Expect(leaf.PublicKey.(*ecdsa.PublicKey).Curve.Params().BitSize).To(Equal(256))
	g.Expect(leaf.NotAfter.Sub(leaf.NotBefore)).To(Equal(8760 * time.Hour))
	g.Expect(s.Data["ca.crt"]).To(Equal(caSecret.Data["tls.crt"]), "ca.crt is the CA that signed")
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(s.Data["ca.crt"])).To(BeTrue())
	_, err := leaf.Verify(x509.VerifyOptions{DNSName: "capov-webhook-service.capov-system.svc", Roots: pool})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(serving.Status.RenewalTime.Time).To(BeTemporally("==", leaf.NotAfter.Add(-720*time.Hour)))
	keyBlock, _ := pem.Decode(s.Data["tls.key"])
	g.Expect(keyBlock.Type).To(Equal("EC PRIVATE KEY"), "PKCS#1 (SEC 1 for ECDSA) is cert-manager's default encoding")
}

func TestACertificateIsReissuedWhenItsSecretIsMissingWrongOrDue(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	g.Expect(env.Client.Create(ctx, selfSignedIssuer(ns, "self"))).To(Succeed())
	crt := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}, Spec: cmapi.CertificateSpec{
		DNSNames: []string{"a.example"}, SecretName: "c-tls", IssuerRef: cmmeta.IssuerReference{Name: "self"},
	}}
	g.Expect(env.Client.Create(ctx, crt)).To(Succeed())
	first := eventuallyReady(g, crt)
	revisionAfter := func(want int) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(crt), crt)).To(Succeed())
			g.Expect(crt.Status.Revision).NotTo(BeNil())
			g.Expect(*crt.Status.Revision).To(BeNumerically(">=", want))
			g.Expect(condition(crt.Status.Conditions, cmapi.CertificateConditionReady).Status).To(Equal(cmmeta.ConditionTrue))
		}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	}

	t.Log("The Secret is deleted: a new one is issued")
	g.Expect(env.Client.Delete(ctx, first)).To(Succeed())
	revisionAfter(2)
	s := eventuallyReady(g, crt)
	g.Expect(s.UID).NotTo(Equal(first.UID))

	t.Log("The key no longer matches the certificate: re-issued")
	other := &corev1.Secret{}
	*other = *s
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), other)).To(Succeed())
	other.Data["tls.key"] = first.Data["tls.key"]
	g.Expect(env.Client.Update(ctx, other)).To(Succeed())
	revisionAfter(3)
	s = eventuallyReady(g, crt)
	parseLeaf(g, s)

	t.Log("The spec changes: re-issued for the new names")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(crt), crt)).To(Succeed())
	crt.Spec.DNSNames = []string{"a.example", "b.example"}
	g.Expect(env.Client.Update(ctx, crt)).To(Succeed())
	revisionAfter(4)
	s = eventuallyReady(g, crt)
	g.Expect(parseLeaf(g, s).DNSNames).To(ConsistOf("a.example", "b.example"))

	t.Log("Due for renewal: a certificate renewed one second after issue is issued again and again")
	due := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "due"}, Spec: cmapi.CertificateSpec{
		CommonName: "due", SecretName: "due-tls", IssuerRef: cmmeta.IssuerReference{Name: "self"},
		Duration: &metav1.Duration{Duration: time.Hour}, RenewBefore: &metav1.Duration{Duration: time.Hour - time.Second},
	}}
	g.Expect(env.Client.Create(ctx, due)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(due), due)).To(Succeed())
		g.Expect(due.Status.Revision).NotTo(BeNil())
		g.Expect(*due.Status.Revision).To(BeNumerically(">=", 3))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// TestTheStandInIsAsStrictAsCertManager: what cert-manager's CRD schema or webhook refuses,
// and issuers it cannot sign with, never give a Secret.
func TestTheStandInIsAsStrictAsCertManager(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := namespace(t, g)
	g.Expect(env.Client.Create(ctx, selfSignedIssuer(ns, "self"))).To(Succeed())

	t.Run("the API server refuses a Certificate without secretName or issuerRef (cert-manager's CRD schema)", func(t *testing.T) {
		g := NewWithT(t)
		for _, spec := range []string{`{"dnsNames":["x"],"issuerRef":{"name":"self"}}`, `{"dnsNames":["x"],"secretName":"s"}`} {
			u := &unstructured.Unstructured{}
			g.Expect(yaml.Unmarshal([]byte(`{"apiVersion":"cert-manager.io/v1","kind":"Certificate","metadata":{"generateName":"c-","namespace":"`+ns+`"},"spec":`+spec+`}`), &u.Object)).To(Succeed())
			err := env.Client.Create(ctx, u)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", spec, err)
		}
	})

	cases := []struct {
		name          string
		spec          cmapi.CertificateSpec
		reason, field string
	}{
		{"a Certificate without any name is refused", cmapi.CertificateSpec{IssuerRef: cmmeta.IssuerReference{Name: "self"}}, "Failed", "at least one of commonName"},
		{"an issuerRef kind other than Issuer or ClusterIssuer is refused", cmapi.CertificateSpec{DNSNames: []string{"x"}, IssuerRef: cmmeta.IssuerReference{Name: "self", Kind: "Foo"}}, "Failed", "spec.issuerRef.kind"},
		{"an RSA key smaller than 2048 bits is refused", cmapi.CertificateSpec{DNSNames: []string{"x"}, IssuerRef: cmmeta.IssuerReference{Name: "self"}, PrivateKey: &cmapi.CertificatePrivateKey{Algorithm: cmapi.RSAKeyAlgorithm, Size: 1024}}, "Failed", "spec.privateKey.size"},
		{"a duration under an hour is refused", cmapi.CertificateSpec{DNSNames: []string{"x"}, IssuerRef: cmmeta.IssuerReference{Name: "self"}, Duration: &metav1.Duration{Duration: time.Minute}}, "Failed", "spec.duration"},
		{"renewBefore not shorter than the duration is refused", cmapi.CertificateSpec{DNSNames: []string{"x"}, IssuerRef: cmmeta.IssuerReference{Name: "self"}, Duration: &metav1.Duration{Duration: 2 * time.Hour}, RenewBefore: &metav1.Duration{Duration: 3 * time.Hour}}, "Failed", "spec.renewBefore"},
		{"cert-manager.io annotations in the secret template are refused", cmapi.CertificateSpec{DNSNames: []string{"x"}, IssuerRef: cmmeta.IssuerReference{Name: "self"}, SecretTemplate: &cmapi.CertificateSecretTemplate{Annotations: map[string]string{"cert-manager.io/issuer-name": "x"}}}, "Failed", "secretTemplate"},
		{"an invalid IP address is refused", cmapi.CertificateSpec{IPAddresses: []string{"10.0.0.300"}, IssuerRef: cmmeta.IssuerReference{Name: "self"}}, "Failed", "spec.ipAddresses[0]"},
		{"keystores the stand-in cannot write are refused", cmapi.CertificateSpec{DNSNames: []string{"x"}, IssuerRef: cmmeta.IssuerReference{Name: "self"}, Keystores: &cmapi.CertificateKeystores{PKCS12: &cmapi.PKCS12Keystore{Create: true, Password: ptr.To("p")}}}, "Failed", "spec.keystores"},
		{"a missing Issuer waits", cmapi.CertificateSpec{DNSNames: []string{"x"}, IssuerRef: cmmeta.IssuerReference{Name: "nope"}}, "IssuerNotFound", "not found"},
		{"a missing ClusterIssuer waits", cmapi.CertificateSpec{DNSNames: []string{"x"}, IssuerRef: cmmeta.IssuerReference{Name: "nope", Kind: "ClusterIssuer"}}, "IssuerNotFound", "not found"},
		{"an external issuer is never signed for", cmapi.CertificateSpec{DNSNames: []string{"x"}, IssuerRef: cmmeta.IssuerReference{Name: "x", Kind: "AWSPCAIssuer", Group: "awspca.cert-manager.io"}}, "IssuerNotFound", "external issuers"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.spec.SecretName = "refused-" + string(rune('a'+i))
			crt := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "refused-"}, Spec: tc.spec}
			g.Expect(env.Client.Create(ctx, crt)).To(Succeed())
			g.Eventually(func(g Gomega) {
				g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(crt), crt)).To(Succeed())
				ready := condition(crt.Status.Conditions, cmapi.CertificateConditionReady)
				g.Expect(ready).NotTo(BeNil())
				g.Expect(ready.Status).To(Equal(cmmeta.ConditionFalse))
				g.Expect(ready.Reason).To(Equal("DoesNotExist"))
				issuing := condition(crt.Status.Conditions, cmapi.CertificateConditionIssuing)
				g.Expect(issuing).NotTo(BeNil())
				g.Expect(issuing.Reason).To(Equal(tc.reason))
				g.Expect(issuing.Message).To(ContainSubstring(tc.field))
			}).WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
			g.Consistently(func() bool {
				err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.spec.SecretName}, &corev1.Secret{})
				return apierrors.IsNotFound(err)
			}).WithTimeout(time.Second).Should(BeTrue(), "nothing is issued")
		})
	}

	t.Run("issuers it cannot sign with are not Ready, with cert-manager's reasons", func(t *testing.T) {
		g := NewWithT(t)
		issuers := map[string]cmapi.IssuerConfig{
			"ErrInitIssuer/no issuer type":                                  {},
			"ErrInitIssuer/vault":                                           {Vault: &cmapi.VaultIssuer{Server: "https://vault", Path: "pki/sign/x"}},
			"ErrInitIssuer/more than one":                                   {SelfSigned: &cmapi.SelfSignedIssuer{}, CA: &cmapi.CAIssuer{SecretName: "x"}},
			"ErrGetKeyPair/not found":                                       {CA: &cmapi.CAIssuer{SecretName: "missing"}},
			"ErrInvalidKeyPair/not a CA (the Secret of a leaf certificate)": {CA: &cmapi.CAIssuer{SecretName: "leaf-tls"}},
		}
		leaf := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leaf"}, Spec: cmapi.CertificateSpec{
			DNSNames: []string{"leaf"}, SecretName: "leaf-tls", IssuerRef: cmmeta.IssuerReference{Name: "self"},
		}}
		g.Expect(env.Client.Create(ctx, leaf)).To(Succeed())
		eventuallyReady(g, leaf)
		i := 0
		for want, cfg := range issuers {
			i++
			iss := &cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-" + string(rune('a'+i))}, Spec: cmapi.IssuerSpec{IssuerConfig: cfg}}
			g.Expect(env.Client.Create(ctx, iss)).To(Succeed())
			reason, what, _ := strings.Cut(want, "/")
			g.Eventually(func(g Gomega) {
				status, got, _ := issuerReady(g, iss)
				g.Expect(status).To(Equal(cmmeta.ConditionFalse), what)
				g.Expect(got).To(Equal(reason), what)
			}).WithTimeout(10 * time.Second).Should(Succeed())
		}
	})
}

func TestCABundlesAreInjectedAsCAInjectorDoes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	g.Expect(env.Client.Create(ctx, selfSignedIssuer(ns, "self"))).To(Succeed())
	crt := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serving-cert"}, Spec: cmapi.CertificateSpec{
		DNSNames: []string{"svc." + ns + ".svc"}, SecretName: "serving-tls", IssuerRef: cmmeta.IssuerReference{Name: "self"},
	}}
	g.Expect(env.Client.Create(ctx, crt)).To(Succeed())
	ca := eventuallyReady(g, crt).Data["ca.crt"]
	inject := map[string]string{certmanager.AnnotationInjectFrom: ns + "/serving-cert"}

	url := "https://127.0.0.1:1/x"
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + ns + ".example.com", Annotations: inject},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: ns + ".example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url}, ConversionReviewVersions: []string{"v1"}}},
		},
	}
	g.Expect(env.Client.Create(ctx, crd)).To(Succeed())
	none := admissionregistrationv1.SideEffectClassNone
	hook := func(name string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			// Matches nothing: the test's webhooks must not get in anybody's way.
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"never": ns}}}
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ns + "-v", Annotations: inject},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{hook("a.example.com"), hook("b.example.com")}}
	g.Expect(env.Client.Create(ctx, vwc)).To(Succeed())
	m := hook("m.example.com")
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ns + "-m", Annotations: inject},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: m.Name, ClientConfig: m.ClientConfig, SideEffects: m.SideEffects,
			AdmissionReviewVersions: m.AdmissionReviewVersions, ObjectSelector: m.ObjectSelector}}}
	g.Expect(env.Client.Create(ctx, mwc)).To(Succeed())
	api := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal([]byte(`apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1.`+ns+`.example.org
  annotations:
    cert-manager.io/inject-ca-from: `+ns+`/serving-cert
spec:
  group: `+ns+`.example.org
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {name: svc, namespace: `+ns+`, port: 443}
`), &api.Object)).To(Succeed())
	g.Expect(env.Client.Create(ctx, api)).To(Succeed())
	defer func() {
		_ = env.Client.Delete(ctx, api)
		_ = env.Client.Delete(ctx, crd)
		_ = env.Client.Delete(ctx, vwc)
		_ = env.Client.Delete(ctx, mwc)
	}()

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
		g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).To(Equal(ca))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(vwc), vwc)).To(Succeed())
		for _, w := range vwc.Webhooks {
			g.Expect(w.ClientConfig.CABundle).To(Equal(ca), w.Name)
		}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mwc), mwc)).To(Succeed())
		g.Expect(mwc.Webhooks[0].ClientConfig.CABundle).To(Equal(ca))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(api), api)).To(Succeed())
		got, _, _ := unstructured.NestedString(api.Object, "spec", "caBundle")
		g.Expect(got).To(Equal(base64.StdEncoding.EncodeToString(ca)))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	t.Log("A renewed CA is injected again")
	s := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "serving-tls"}, s)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "serving-tls"}, s)).To(Succeed())
		g.Expect(s.Data["ca.crt"]).NotTo(Equal(ca))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(vwc), vwc)).To(Succeed())
		g.Expect(vwc.Webhooks[1].ClientConfig.CABundle).To(Equal(s.Data["ca.crt"]))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	t.Log("A Secret named directly is injected only when it allows direct injection")
	direct := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ns + "-direct",
		Annotations: map[string]string{certmanager.AnnotationInjectFromSecret: ns + "/serving-tls"}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{hook("d.example.com")}}
	g.Expect(env.Client.Create(ctx, direct)).To(Succeed())
	defer func() { _ = env.Client.Delete(ctx, direct) }()
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(direct), direct)).To(Succeed())
		g.Expect(direct.Webhooks[0].ClientConfig.CABundle).To(BeEmpty())
	}).WithTimeout(2 * time.Second).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "serving-tls"}, s)).To(Succeed())
	s.Annotations[certmanager.AnnotationAllowDirectInjection] = "true"
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(direct), direct)).To(Succeed())
		g.Expect(direct.Webhooks[0].ClientConfig.CABundle).To(Equal(s.Data["ca.crt"]))
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

// TestTheStandInLinksNoTestFramework: the stand-in runs as a pod with a read-only root file
// system; controller-runtime's envtest packages create /tmp/kubebuilder-envtest when they load,
// so the command must not link them (it crash-looped on the real node when it did).
func TestTheStandInLinksNoTestFramework(t *testing.T) {
	g := NewWithT(t)
	out, err := exec.Command("go", "list", "-deps", "github.com/capov/capov/test/certmanager/cmd/cert-manager").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	for _, pkg := range strings.Fields(string(out)) {
		g.Expect(pkg).NotTo(SatisfyAny(HavePrefix("sigs.k8s.io/controller-runtime/pkg/envtest"), HavePrefix("sigs.k8s.io/controller-runtime/pkg/internal/testing"),
			HavePrefix("github.com/capov/capov/test/envtest")), "the stand-in's command links %s", pkg)
	}
}
