package charts

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestEveryMonitoringObjectIsAcceptedByTheAPIServer renders the chart with every option of
// the monitoring pack on and creates each object with a server-side dry run and strict field
// validation on a real API server that serves the ServiceMonitor and PrometheusRule CRDs
// (generated from the Prometheus Operator's Go types) and the cert-manager CRDs: a field the
// CRD schemas do not know, or a value they refuse, fails the test.
func TestEveryMonitoringObjectIsAcceptedByTheAPIServer(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := &warnings{}
	cfg := rest.CopyConfig(e.Config)
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	g := NewWithT(t)
	g.Expect(ensureOperatorNamespace(ctx, c)).To(Succeed())

	r := mustRender(t, values(t, allMonitoring), apiServiceMonitor, apiPrometheusRule)
	var kinds []string
	for _, o := range r.objs {
		kinds = append(kinds, o.GetKind())
	}
	g.Expect(kinds).To(ContainElements("ServiceMonitor", "PrometheusRule", "Certificate", "NetworkPolicy", "ConfigMap", "Secret"))
	w.take()
	for _, o := range r.objs {
		err := c.Create(ctx, o.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict"))
		g.Expect(err).NotTo(HaveOccurred(), "%s %s rejected", o.GetKind(), o.GetName())
	}
	for _, msg := range w.take() {
		g.Expect(msg).NotTo(Or(ContainSubstring("PodSecurity"), ContainSubstring("unknown field")), msg)
	}

	t.Run("the control: the generated CRDs do validate", func(t *testing.T) {
		g := NewWithT(t)
		sm := r.find("ServiceMonitor", "capov-metrics-monitor").DeepCopy()
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		ep := endpoints[0].(map[string]any)
		ep["bearerTokenFiel"] = "/token"
		g.Expect(unstructured.SetNestedSlice(sm.Object, endpoints, "spec", "endpoints")).To(Succeed())
		err := c.Create(ctx, sm, client.DryRunAll, client.FieldValidation("Strict"))
		g.Expect(err).To(MatchError(ContainSubstring("bearerTokenFiel")))

		pr := r.find("PrometheusRule", "capov-alerts").DeepCopy()
		groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
		rules := groups[0].(map[string]any)["rules"].([]any)
		rules[0].(map[string]any)["for"] = "10 minutes"
		g.Expect(unstructured.SetNestedSlice(pr.Object, groups, "spec", "groups")).To(Succeed())
		err = c.Create(ctx, pr, client.DryRunAll)
		g.Expect(err).To(HaveOccurred())
		g.Expect(strings.Contains(err.Error(), "for")).To(BeTrue(), err.Error())
	})
}
