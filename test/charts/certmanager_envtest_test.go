package charts

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestCertManagerObjectsAreAcceptedByCertManagersCRDs creates the chart's cert-manager objects
// (Issuer, Certificates) with a server-side dry run and strict field validation on a real API
// server serving cert-manager's own CRDs (deploy/crds of the cert-manager Go module, the version
// of go.mod): a field the CRD schemas do not know, a value outside their enums or a missing
// required field fails. cert-manager's own admission webhook does not run here, so its semantic
// checks (for example duration against renewBefore) are not covered.
func TestCertManagerObjectsAreAcceptedByCertManagersCRDs(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := e.Client
	NewWithT(t).Expect(ensureOperatorNamespace(ctx, c)).To(Succeed())

	tests := []struct {
		name, values string
		want         []string
	}{
		{"defaults: self-signed Issuer, serving and metrics certificates", ``,
			[]string{"Issuer/capov-selfsigned-issuer", "Certificate/capov-serving-cert", "Certificate/capov-metrics-cert"}},
		{"an own ClusterIssuer", `certManager: {issuerRef: {kind: ClusterIssuer, name: platform-ca, group: cert-manager.io}}`,
			[]string{"Certificate/capov-serving-cert", "Certificate/capov-metrics-cert"}},
		{"metrics certificate for both Services, other lifetimes and Secret names", `
certificates: {secretName: my-webhook-tls}
certManager: {duration: 2160h, renewBefore: 360h}
metrics: {webhook: {enabled: true}, certificate: {enabled: true, secretName: my-metrics-tls}}
`, []string{"Issuer/capov-selfsigned-issuer", "Certificate/capov-serving-cert", "Certificate/capov-metrics-cert"}},
		{"metrics certificate off", `metrics: {certificate: {enabled: false}}`,
			[]string{"Issuer/capov-selfsigned-issuer", "Certificate/capov-serving-cert"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := mustRender(t, values(t, tt.values))
			var got []string
			for _, o := range certManagerObjects(r) {
				got = append(got, o.GetKind()+"/"+o.GetName())
				err := c.Create(ctx, o.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict"))
				g.Expect(err).NotTo(HaveOccurred(), "%s %s rejected by cert-manager's CRD", o.GetKind(), o.GetName())
			}
			g.Expect(got).To(ConsistOf(tt.want))
		})
	}

	t.Run("the control: cert-manager's CRDs do validate", func(t *testing.T) {
		cert := mustRender(t, nil).find("Certificate", "capov-serving-cert")
		for _, tt := range []struct {
			name   string
			mutate func(u *unstructured.Unstructured)
			want   string
		}{
			{"an unknown field", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "x", "spec", "dnsName")
			}, "dnsName"},
			{"a value outside an enum", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "DSA", "spec", "privateKey", "algorithm")
			}, "algorithm"},
			{"a missing required field", func(u *unstructured.Unstructured) {
				unstructured.RemoveNestedField(u.Object, "spec", "issuerRef", "name")
			}, "name"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				g := NewWithT(t)
				bad := cert.DeepCopy()
				tt.mutate(bad)
				err := c.Create(ctx, bad, client.DryRunAll, client.FieldValidation("Strict"))
				g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
			})
		}
	})
}
