package charts

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/strvals"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capov/capov/test/testpki"
)

// injectCAFrom is cert-manager's CA injection annotation: <namespace>/<Certificate>.
const injectCAFrom = "cert-manager.io/inject-ca-from"

// testPKI is a CA and a serving certificate it signed, as a user of certificates.source secret
// would make them.
type testPKI struct {
	caPEM, certPEM, keyPEM []byte
}

// caBundle is the CA as the certificates.caBundle and conversion.caBundle values take it.
func (p *testPKI) caBundle() string { return base64.StdEncoding.EncodeToString(p.caPEM) }

// webhookDNSNames are the names the API server and Prometheus use for the capov Services in ns.
func webhookDNSNames(ns string) []string {
	var out []string
	for _, svc := range []string{"capov-webhook-service", "capov-metrics-service", "capov-webhook-metrics-service"} {
		out = append(out, svc+"."+ns+".svc", svc+"."+ns+".svc.cluster.local")
	}
	return out
}

// newTestPKI makes an ECDSA CA named cn and a serving certificate for dnsNames.
func newTestPKI(t *testing.T, cn string, dnsNames ...string) *testPKI {
	t.Helper()
	s, err := testpki.New(cn, dnsNames...)
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{caPEM: s.CAPEM, certPEM: s.CertPEM, keyPEM: s.KeyPEM}
}

var (
	pkiOnce sync.Once
	pki     *testPKI
)

// sharedPKI is one CA and serving certificate for the capov Services in the operator namespace.
func sharedPKI(t *testing.T) *testPKI {
	t.Helper()
	pkiOnce.Do(func() { pki = newTestPKI(t, "capov-test-ca", webhookDNSNames(namespace)...) })
	return pki
}

// secretModeValues are the capov values of certificates.source secret with sharedPKI's CA; the
// certificates block comes last, so a caller may append more certificates.* keys.
func secretModeValues(t *testing.T) string {
	t.Helper()
	return "certificates:\n  source: secret\n  caBundle: " + sharedPKI(t).caBundle() + "\n"
}

// certManagerObjects are the rendered objects of the cert-manager.io group.
func certManagerObjects(r *rendered) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objs {
		if strings.HasPrefix(o.GetAPIVersion(), "cert-manager.io/") {
			out = append(out, o)
		}
	}
	return out
}

func volumeSecret(d *appsv1.Deployment, volume string) string {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == volume && v.Secret != nil {
			return v.Secret.SecretName
		}
	}
	return ""
}

func TestSecretSourceServesYourSecretsAndTrustsYourCA(t *testing.T) {
	p := sharedPKI(t)

	t.Run("no cert-manager object, no cert-manager API needed, caBundle in every webhook", func(t *testing.T) {
		g := NewWithT(t)
		r, err := render(t, "capov", values(t, secretModeValues(t)), apiOVirtMachine)
		g.Expect(err).NotTo(HaveOccurred(), "the preflight must not ask for cert-manager")
		g.Expect(certManagerObjects(r)).To(BeEmpty())
		mwc := get[admissionregistrationv1.MutatingWebhookConfiguration](t, r, "MutatingWebhookConfiguration", "capov-mutating-webhook-configuration")
		vwc := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, r, "ValidatingWebhookConfiguration", "capov-validating-webhook-configuration")
		g.Expect(mwc.Annotations).NotTo(HaveKey(injectCAFrom), "no CA injector runs")
		g.Expect(vwc.Annotations).NotTo(HaveKey(injectCAFrom), "no CA injector runs")
		var n int
		for _, w := range mwc.Webhooks {
			g.Expect(w.ClientConfig.CABundle).To(Equal(p.caPEM), w.Name)
			n++
		}
		for _, w := range vwc.Webhooks {
			g.Expect(w.ClientConfig.CABundle).To(Equal(p.caPEM), w.Name)
			n++
		}
		g.Expect(n).To(Equal(7))

		web, _ := webhookOf(t, r)
		mgr, _ := managerOf(t, r)
		g.Expect(volumeSecret(web, "serving-cert")).To(Equal("capov-webhook-server-cert"), "the Secret name of the cert-manager mode")
		g.Expect(volumeSecret(web, "metrics-cert")).To(Equal("capov-metrics-server-cert"))
		g.Expect(volumeSecret(mgr, "metrics-cert")).To(Equal("capov-metrics-server-cert"))
		g.Expect(r.notes).To(ContainSubstring("certificates.source is secret"))
		g.Expect(r.notes).To(ContainSubstring("conversion.caBundle"))
	})
	t.Run("Secrets of other names, also in the ServiceMonitors", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, secretModeValues(t)+"  secretName: my-webhook-tls\n"+
			"metrics: {certificate: {secretName: my-metrics-tls}, webhook: {enabled: true}}\n"), apiServiceMonitor)
		web, _ := webhookOf(t, r)
		mgr, _ := managerOf(t, r)
		g.Expect(volumeSecret(web, "serving-cert")).To(Equal("my-webhook-tls"))
		g.Expect(volumeSecret(web, "metrics-cert")).To(Equal("my-metrics-tls"))
		g.Expect(volumeSecret(mgr, "metrics-cert")).To(Equal("my-metrics-tls"))
		for _, name := range []string{"capov-metrics-monitor", "capov-webhook-metrics-monitor"} {
			sm := get[monitoringv1.ServiceMonitor](t, r, "ServiceMonitor", name)
			g.Expect(sm.Spec.Endpoints[0].TLSConfig.CA.Secret.Name).To(Equal("my-metrics-tls"), name)
		}
	})
	t.Run("a wrapped base64 bundle (plain base64 output) is accepted", func(t *testing.T) {
		g := NewWithT(t)
		b := p.caBundle()
		var wrapped strings.Builder
		for len(b) > 76 {
			wrapped.WriteString(b[:76] + "\n")
			b = b[76:]
		}
		wrapped.WriteString(b)
		r := mustRender(t, map[string]any{"certificates": map[string]any{"source": "secret", "caBundle": wrapped.String()}})
		vwc := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, r, "ValidatingWebhookConfiguration", "capov-validating-webhook-configuration")
		g.Expect(vwc.Webhooks[0].ClientConfig.CABundle).To(Equal(p.caPEM))
	})
	t.Run("the cert-manager mode is the default and renders no caBundle", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, nil)
		g.Expect(certManagerObjects(r)).NotTo(BeEmpty())
		vwc := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, r, "ValidatingWebhookConfiguration", "capov-validating-webhook-configuration")
		g.Expect(vwc.Annotations).To(HaveKeyWithValue(injectCAFrom, namespace+"/capov-serving-cert"))
		for _, w := range vwc.Webhooks {
			g.Expect(w.ClientConfig.CABundle).To(BeEmpty())
		}
	})
}

func TestSecretSourceFailsWithTheValueToSet(t *testing.T) {
	notPEM := base64.StdEncoding.EncodeToString([]byte("not a certificate"))
	tests := []struct {
		name, chart, values string
		want                []string
	}{
		{"capov without a caBundle", "capov", `certificates: {source: secret}`,
			[]string{"set certificates.caBundle", "Secret capov-system/capov-webhook-server-cert", "conversion.caBundle of the capov-crds chart"}},
		{"capov with base64 that is not a PEM certificate", "capov", `certificates: {source: secret, caBundle: ` + notPEM + `}`,
			[]string{"certificates.caBundle must be base64 of PEM CA certificates"}},
		{"capov with the PEM itself instead of its base64", "capov", "certificates:\n  source: secret\n  caBundle: |\n    -----BEGIN CERTIFICATE-----\n    MIIB\n",
			[]string{"values don't meet the specifications of the schema", "'/certificates/caBundle"}},
		{"capov with an unknown source", "capov", `certificates: {source: vault}`,
			[]string{"values don't meet the specifications of the schema", "'/certificates/source"}},
		{"capov with an invalid Secret name", "capov", `metrics: {certificate: {secretName: My_Secret}}`,
			[]string{"values don't meet the specifications of the schema", "'/metrics/certificate/secretName"}},
		{"capov-crds with base64 that is not a PEM certificate", "capov-crds", `conversion: {caBundle: ` + notPEM + `}`,
			[]string{"conversion.caBundle must be base64 of PEM CA certificates", "certificates.caBundle of the capov chart"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := render(t, tt.chart, values(t, tt.values), prerequisites...)
			g.Expect(err).To(HaveOccurred())
			for _, w := range tt.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

func TestCertManagerCertificatesWriteTheSecretsThePodsMount(t *testing.T) {
	g := NewWithT(t)
	r := mustRender(t, values(t, `
certificates: {secretName: my-webhook-tls}
metrics: {certificate: {secretName: my-metrics-tls}}
`), apiServiceMonitor)
	serving := get[cmv1.Certificate](t, r, "Certificate", "capov-serving-cert")
	metrics := get[cmv1.Certificate](t, r, "Certificate", "capov-metrics-cert")
	g.Expect(serving.Spec.SecretName).To(Equal("my-webhook-tls"))
	g.Expect(metrics.Spec.SecretName).To(Equal("my-metrics-tls"))
	web, _ := webhookOf(t, r)
	mgr, _ := managerOf(t, r)
	g.Expect(volumeSecret(web, "serving-cert")).To(Equal(serving.Spec.SecretName))
	g.Expect(volumeSecret(web, "metrics-cert")).To(Equal(metrics.Spec.SecretName))
	g.Expect(volumeSecret(mgr, "metrics-cert")).To(Equal(metrics.Spec.SecretName))
	sm := get[monitoringv1.ServiceMonitor](t, r, "ServiceMonitor", "capov-metrics-monitor")
	g.Expect(sm.Spec.Endpoints[0].TLSConfig.CA.Secret.Name).To(Equal(metrics.Spec.SecretName))
}

func TestCRDChartTakesACABundleInsteadOfCAInjection(t *testing.T) {
	g := NewWithT(t)
	p := sharedPKI(t)
	r, err := render(t, "capov-crds", values(t, `conversion: {caBundle: `+p.caBundle()+`}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.objs).To(HaveLen(len(capovCRDNames)))
	for _, o := range r.objs {
		crd := get[apiextensionsv1.CustomResourceDefinition](t, r, "CustomResourceDefinition", o.GetName())
		g.Expect(crd.Annotations).NotTo(HaveKey(injectCAFrom), "the CA injector would overwrite the caBundle")
		g.Expect(crd.Annotations).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"))
		want := wantConversion(namespace, "capov-webhook-service")
		want.Webhook.ClientConfig.CABundle = p.caPEM
		g.Expect(crd.Spec.Conversion).To(Equal(want), crd.Name)
	}
}

// caInjectionProblems checks every object with cert-manager's CA injection annotation: it must
// name a Certificate among certs ("<namespace>/<name>" -> Certificate), and that Certificate must
// cover the Service the object's webhooks call (<service>.<namespace>.svc), or the API server
// would reject the served certificate although the CA is right.
func caInjectionProblems(objs []*unstructured.Unstructured, certs map[string]*cmv1.Certificate) (problems []string, annotated int) {
	for _, o := range objs {
		ref, ok := o.GetAnnotations()[injectCAFrom]
		if !ok {
			continue
		}
		annotated++
		id := o.GetKind() + "/" + o.GetName()
		cert, ok := certs[ref]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: %s names %s, which the capov chart does not render (it renders %v)", id, injectCAFrom, ref, slices.Sorted(maps.Keys(certs))))
			continue
		}
		var services []map[string]any
		if o.GetKind() == "CustomResourceDefinition" {
			svc, _, _ := unstructured.NestedMap(o.Object, "spec", "conversion", "webhook", "clientConfig", "service")
			services = append(services, svc)
		} else {
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, h := range hooks {
				svc, _, _ := unstructured.NestedMap(h.(map[string]any), "clientConfig", "service")
				services = append(services, svc)
			}
		}
		if len(services) == 0 {
			problems = append(problems, id+": calls no Service")
		}
		for _, svc := range services {
			host := fmt.Sprintf("%v.%v.svc", svc["name"], svc["namespace"])
			if !slices.Contains(cert.Spec.DNSNames, host) {
				problems = append(problems, fmt.Sprintf("%s calls %s, which Certificate %s does not cover (%v)", id, host, ref, cert.Spec.DNSNames))
			}
		}
	}
	return problems, annotated
}

func TestCAInjectionNamesACertificateTheChartRenders(t *testing.T) {
	tests := []struct {
		name, ns, capovValues, crdsValues string
	}{
		{"defaults in capov-system", namespace, ``, ``},
		{"another namespace named on both charts", "capov-other", ``, `conversion: {webhookNamespace: capov-other}`},
		{"an own issuer", namespace, `certManager: {issuerRef: {kind: ClusterIssuer, name: platform-ca}}`, ``},
		{"metrics certificate off", namespace, `metrics: {certificate: {enabled: false}}`, ``},
		{"webhook metrics on", namespace, `metrics: {webhook: {enabled: true}}`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			main, err := renderInto(t, "capov", kubeVersion, tt.ns, values(t, tt.capovValues), prerequisites...)
			g.Expect(err).NotTo(HaveOccurred())
			crds, err := renderInto(t, "capov-crds", kubeVersion, tt.ns, values(t, tt.crdsValues))
			g.Expect(err).NotTo(HaveOccurred())

			certs := map[string]*cmv1.Certificate{}
			for _, o := range main.objs {
				if o.GetKind() == "Certificate" {
					c := &cmv1.Certificate{}
					decodeStrict(t, o, c)
					g.Expect(c.Namespace).To(Equal(tt.ns), "the Certificate lives in the release namespace")
					certs[c.Namespace+"/"+c.Name] = c
				}
			}
			problems, annotated := caInjectionProblems(append(append([]*unstructured.Unstructured{}, main.objs...), crds.objs...), certs)
			g.Expect(problems).To(BeEmpty())
			g.Expect(annotated).To(Equal(2+len(capovCRDNames)), "the two webhook configurations and every CRD get their CA injected")

			// The injected CA is that of the certificate the webhook pods actually serve.
			web := get[appsv1.Deployment](t, main, "Deployment", webhookDeployment)
			g.Expect(volumeSecret(web, "serving-cert")).To(Equal(certs[tt.ns+"/capov-serving-cert"].Spec.SecretName))
		})
	}

	t.Run("the control: a CRD chart naming another Certificate or namespace is caught", func(t *testing.T) {
		g := NewWithT(t)
		main := mustRender(t, nil)
		certs := map[string]*cmv1.Certificate{}
		for _, o := range main.objs {
			if o.GetKind() == "Certificate" {
				c := &cmv1.Certificate{}
				decodeStrict(t, o, c)
				certs[c.Namespace+"/"+c.Name] = c
			}
		}
		for _, v := range []string{`conversion: {certificateName: capov-metrics-cert}`, `conversion: {webhookNamespace: capov-other}`} {
			crds, err := render(t, "capov-crds", values(t, v))
			g.Expect(err).NotTo(HaveOccurred())
			problems, _ := caInjectionProblems(crds.objs, certs)
			g.Expect(problems).To(HaveLen(len(capovCRDNames)), v)
		}
	})
}

// docsShellBlocks returns the ```sh blocks of a docs page, continuation lines joined.
func docsShellBlocks(t *testing.T, page string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		out = append(out, strings.ReplaceAll(m[1], "\\\n", " "))
	}
	return out
}

// TestTheDocumentedSecretModeWorks runs the openssl commands of docs/helm.md ("Without
// cert-manager") and renders both charts with the --set flags of its helm install commands:
// the certificate must be valid for every Service name the API server and Prometheus use, its
// key must match, and the charts must take the CA as documented.
func TestTheDocumentedSecretModeWorks(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed")
	}
	var gen, install string
	for _, b := range docsShellBlocks(t, "helm.md") {
		switch {
		case strings.Contains(b, "openssl req -x509"):
			gen = b
		case strings.Contains(b, "helm install capov-crds"):
			install = b
		}
	}
	g := NewWithT(t)
	g.Expect(gen).NotTo(BeEmpty(), "docs/helm.md has no openssl example")
	g.Expect(install).NotTo(BeEmpty(), "docs/helm.md has no secret-mode install example")

	dir := t.TempDir()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", gen)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, f))
		g.Expect(err).NotTo(HaveOccurred())
		return b
	}
	caPEM, certPEM, keyPEM := read("ca.crt"), read("tls.crt"), read("tls.key")
	_, err = tls.X509KeyPair(certPEM, keyPEM)
	g.Expect(err).NotTo(HaveOccurred(), "tls.crt and tls.key must be a pair the binaries load")
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(caPEM)).To(BeTrue())
	block, _ := pem.Decode(certPEM)
	g.Expect(block).NotTo(BeNil())
	leaf, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range webhookDNSNames(namespace) {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		g.Expect(err).NotTo(HaveOccurred(), name)
	}

	// The --set flags of each documented helm install, with CA_BUNDLE as the example computes it.
	bundle := base64.StdEncoding.EncodeToString(caPEM)
	sets := map[string]map[string]any{}
	for _, line := range strings.Split(install, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "helm" || f[1] != "install" {
			continue
		}
		vals := map[string]any{}
		for i := range f {
			if f[i] == "--set" && i+1 < len(f) {
				g.Expect(strvals.ParseInto(strings.ReplaceAll(f[i+1], "${CA_BUNDLE}", bundle), vals)).To(Succeed())
			}
		}
		sets[filepath.Base(f[3])] = vals
	}
	g.Expect(sets).To(HaveKey("capov-crds"))
	g.Expect(sets).To(HaveKey("capov"))
	main, err := render(t, "capov", sets["capov"], apiOVirtMachine)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(certManagerObjects(main)).To(BeEmpty())
	crds, err := render(t, "capov-crds", sets["capov-crds"])
	g.Expect(err).NotTo(HaveOccurred())
	vwc := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, main, "ValidatingWebhookConfiguration", "capov-validating-webhook-configuration")
	g.Expect(vwc.Webhooks[0].ClientConfig.CABundle).To(Equal(caPEM))
	crd := get[apiextensionsv1.CustomResourceDefinition](t, crds, "CustomResourceDefinition", "ovirtclusters.infrastructure.cluster.x-k8s.io")
	g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).To(Equal(caPEM))
	web, _ := webhookOf(t, main)
	g.Expect(install).To(ContainSubstring(volumeSecret(web, "serving-cert")), "the example creates the Secret the webhook mounts")
	g.Expect(install).To(ContainSubstring(volumeSecret(web, "metrics-cert")), "the example creates the Secret of the metrics certificate")
}
