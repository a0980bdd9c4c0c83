package charts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/release"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// capovCRDNames are the CRDs of the capov-crds chart.
var capovCRDNames = []string{
	"ovirtproviders.infrastructure.cluster.x-k8s.io",
	"ovirtclusters.infrastructure.cluster.x-k8s.io",
	"ovirtclustertemplates.infrastructure.cluster.x-k8s.io",
	"ovirtmachines.infrastructure.cluster.x-k8s.io",
	"ovirtmachinetemplates.infrastructure.cluster.x-k8s.io",
	"ovirthostdeviceclaims.infrastructure.cluster.x-k8s.io",
	"ovirtremediations.infrastructure.cluster.x-k8s.io",
	"ovirtremediationtemplates.infrastructure.cluster.x-k8s.io",
}

// servesCAPOV reports whether discovery lists every CAPOV kind in infrastructure.cluster.x-k8s.io
// v1beta2, read from the aggregated discovery Helm takes its capabilities from (the API server
// updates it a moment after the group's own endpoint). The CRDs become Established one by one,
// so counting the group's resources is not enough: a count of four was met by two kinds and
// their status subresources while OVirtMachine was not served yet, and the install that
// followed failed the chart's preflight under load.
func servesCAPOV(cfg *rest.Config) bool {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		return false
	}
	kinds := map[string]bool{}
	for _, l := range lists {
		if l.GroupVersion != "infrastructure.cluster.x-k8s.io/v1beta2" {
			continue
		}
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") {
				kinds[r.Kind] = true
			}
		}
	}
	for _, k := range []string{"OVirtProvider", "OVirtCluster", "OVirtClusterTemplate", "OVirtMachine", "OVirtMachineTemplate",
		"OVirtHostDeviceClaim", "OVirtRemediation", "OVirtRemediationTemplate"} {
		if !kinds[k] {
			return false
		}
	}
	return true
}

// capovAPIGone returns nil once no CAPOV CRD exists and discovery no longer serves their group.
func capovAPIGone(ctx context.Context, c client.Client, cfg *rest.Config) error {
	for _, name := range capovCRDNames {
		err := c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
		if err == nil {
			return fmt.Errorf("CRD %s still exists", name)
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = dc.ServerResourcesForGroupVersion("infrastructure.cluster.x-k8s.io/v1beta2")
	if err == nil {
		return errors.New("infrastructure.cluster.x-k8s.io/v1beta2 is still served")
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// TestSecretSourceInstallsWithoutCertManagerInARealAPIServer installs both charts with
// certificates from Secrets, as an air-gapped cluster without cert-manager would: the capov
// chart refuses CRDs that still wait for cert-manager's CA injection, then each missing Secret
// and key, naming what to set; once they exist, it installs without any cert-manager object and
// the API server holds the CA bundle in the webhook configurations and the CRDs' conversion.
// A CA rotation (old and new CA in the bundle) upgrades both charts. The cluster is left as it
// was found: the steps share it with the other install test.
func TestSecretSourceInstallsWithoutCertManagerInARealAPIServer(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := e.Client
	h := newHelmInstaller(t, e.Config)
	w := h.warnings
	g := NewWithT(t)
	g.Expect(ensureOperatorNamespace(ctx, c)).To(Succeed())

	p := sharedPKI(t)
	secretMode := values(t, secretModeValues(t))
	crdsSecretMode := values(t, `conversion: {caBundle: `+p.caBundle()+`}`)
	secretNames := []string{"capov-webhook-server-cert", "capov-metrics-server-cert"}

	hadCRDs := true
	if err := c.Get(ctx, client.ObjectKey{Name: capovCRDNames[0]}, &apiextensionsv1.CustomResourceDefinition{}); apierrors.IsNotFound(err) {
		hadCRDs = false
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _ = h.uninstall(mainRelease)
		// Back to the default values before the uninstall keeps the CRDs: no caBundle left behind.
		_, _ = h.upgrade(crdsRelease, "capov-crds", values(t, `conversion: {caBundle: ""}`))
		_, _ = h.uninstall(crdsRelease)
		for _, name := range secretNames {
			_ = c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
		}
		if hadCRDs {
			return
		}
		for _, name := range capovCRDNames {
			_ = c.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
		NewWithT(t).Eventually(func() error { return capovAPIGone(ctx, c, e.Config) }).WithTimeout(time.Minute).
			WithPolling(200*time.Millisecond).Should(Succeed(), "the CAPOV CRDs this test installed must be gone")
	})

	installFails := func(g Gomega, vals map[string]any, want ...string) {
		_, err := h.install(mainRelease, "capov", vals)
		g.Expect(err).To(HaveOccurred())
		for _, s := range want {
			g.Expect(err.Error()).To(ContainSubstring(s))
		}
		g.Expect(helmReleases(ctx, c)).NotTo(ContainElement(HavePrefix("sh.helm.release.v1."+mainRelease+".v")), "nothing of the main chart is recorded")
		g.Expect(exists(ctx, c, deploymentRef(webhookDeployment))).To(BeFalse())
	}
	createSecret := func(g Gomega, name string, data map[string][]byte) {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Type:       corev1.SecretTypeTLS,
			Data:       data,
		}
		g.Expect(client.IgnoreAlreadyExists(c.Create(ctx, s))).To(Succeed())
		g.Expect(c.Update(ctx, s)).To(Succeed())
	}

	ok := t.Run("CRDs waiting for cert-manager's CA injection are refused", func(t *testing.T) {
		g := NewWithT(t)
		_, err := h.install(crdsRelease, "capov-crds", nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() bool { return servesCAPOV(e.Config) }).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(BeTrue())
		installFails(g, secretMode,
			"takes its conversion CA from cert-manager (cert-manager.io/inject-ca-from: capov-system/capov-serving-cert)",
			"set the capov-crds value conversion.caBundle")
	})
	ok = ok && t.Run("capov-crds with conversion.caBundle: the CRDs carry the CA, no injection annotation", func(t *testing.T) {
		g := NewWithT(t)
		_, err := h.upgrade(crdsRelease, "capov-crds", crdsSecretMode)
		g.Expect(err).NotTo(HaveOccurred())
		for _, name := range capovCRDNames {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			g.Expect(crd.Annotations).NotTo(HaveKey(injectCAFrom), name)
			g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).To(Equal(p.caPEM), name)
		}
	})
	ok = ok && t.Run("each missing Secret or key is named", func(t *testing.T) {
		g := NewWithT(t)
		installFails(g, secretMode, "Secret capov-system/capov-webhook-server-cert does not exist", "tls.crt, tls.key")
		createSecret(g, "capov-webhook-server-cert", map[string][]byte{"tls.crt": p.certPEM, "tls.key": p.keyPEM})
		installFails(g, secretMode, "Secret capov-system/capov-metrics-server-cert does not exist")
		// The ServiceMonitor CRD is served here, so the metrics Secret needs the CA the scrape verifies against.
		createSecret(g, "capov-metrics-server-cert", map[string][]byte{"tls.crt": p.certPEM, "tls.key": p.keyPEM})
		installFails(g, secretMode, "Secret capov-system/capov-metrics-server-cert has no key ca.crt")
	})
	var rel *release.Release
	ok = ok && t.Run("with the Secrets the chart installs without any cert-manager object", func(t *testing.T) {
		g := NewWithT(t)
		createSecret(g, "capov-metrics-server-cert", map[string][]byte{"tls.crt": p.certPEM, "tls.key": p.keyPEM, "ca.crt": p.caPEM})
		w.take()
		var err error
		rel, err = h.install(mainRelease, "capov", secretMode)
		g.Expect(err).NotTo(HaveOccurred())
		for _, o := range manifestObjects(t, rel) {
			g.Expect(o.GetAPIVersion()).NotTo(HavePrefix("cert-manager.io/"), o.GetKind()+"/"+o.GetName())
			g.Expect(exists(ctx, c, o)).To(BeTrue(), o.GetKind()+"/"+o.GetName())
		}
		for _, msg := range w.take() {
			g.Expect(msg).NotTo(ContainSubstring("PodSecurity"), msg)
		}
		expectCABundle(ctx, g, c, p.caPEM)
	})
	ok = ok && t.Run("a CA rotation: both charts upgraded with the old and the new CA", func(t *testing.T) {
		g := NewWithT(t)
		next := newTestPKI(t, "capov-test-ca-2", webhookDNSNames(namespace)...)
		both := append(append([]byte{}, p.caPEM...), next.caPEM...)
		bundle := (&testPKI{caPEM: both}).caBundle()
		_, err := h.upgrade(crdsRelease, "capov-crds", values(t, `conversion: {caBundle: `+bundle+`}`))
		g.Expect(err).NotTo(HaveOccurred())
		_, err = h.upgrade(mainRelease, "capov", values(t, "certificates: {source: secret, caBundle: "+bundle+"}"))
		g.Expect(err).NotTo(HaveOccurred())
		expectCABundle(ctx, g, c, both)
		for _, name := range capovCRDNames {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).To(Equal(both), name)
			g.Expect(bytes.Count(crd.Spec.Conversion.Webhook.ClientConfig.CABundle, []byte("BEGIN CERTIFICATE"))).To(Equal(2))
		}
	})
	if !ok {
		t.Log("stopped at the first failed step: the later steps depend on it")
	}
}

// expectCABundle checks the caBundle of every webhook of the capov webhook configurations.
func expectCABundle(ctx context.Context, g Gomega, c client.Client, want []byte) {
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "capov-mutating-webhook-configuration"}, mwc)).To(Succeed())
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "capov-validating-webhook-configuration"}, vwc)).To(Succeed())
	g.Expect(mwc.Annotations).NotTo(HaveKey(injectCAFrom))
	g.Expect(vwc.Annotations).NotTo(HaveKey(injectCAFrom))
	var n int
	for _, wh := range mwc.Webhooks {
		g.Expect(wh.ClientConfig.CABundle).To(Equal(want), wh.Name)
		n++
	}
	for _, wh := range vwc.Webhooks {
		g.Expect(wh.ClientConfig.CABundle).To(Equal(want), wh.Name)
		n++
	}
	g.Expect(n).To(Equal(7))
	g.Expect(strings.Count(string(want), "BEGIN CERTIFICATE")).To(BeNumerically(">", 0))
}
