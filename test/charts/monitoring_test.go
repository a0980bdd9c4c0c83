package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// API versions of the monitoring pack.
const (
	apiPrometheusRule = "monitoring.coreos.com/v1/PrometheusRule"
	metricsCertDir    = "/tmp/k8s-metrics-server/metrics-certs"
)

// allMonitoring turns every option of the monitoring pack on.
const allMonitoring = `
metrics:
  webhook: {enabled: true}
  certificate: {enabled: true}
  kubeStateMetrics: {enabled: true}
  prometheusRule: {enabled: true, orphanedVMs: {enabled: true}}
  grafanaDashboard: {enabled: true}
networkPolicy:
  enabled: true
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
  egress: [{ports: [{port: 443, protocol: TCP}, {port: 6443, protocol: TCP}]}]
`

func TestMonitoringPackIsOffByDefault(t *testing.T) {
	g := NewWithT(t)
	r := mustRender(t, nil, apiServiceMonitor, apiPrometheusRule)
	for _, o := range []struct{ kind, name string }{
		{"Service", "capov-webhook-metrics-service"},
		{"ServiceMonitor", "capov-webhook-metrics-monitor"},
		{"ConfigMap", "capov-kube-state-metrics-config"},
		{"ClusterRole", "capov-kube-state-metrics"},
		{"PrometheusRule", "capov-alerts"},
		{"ConfigMap", "capov-grafana-dashboard"},
		{"NetworkPolicy", managerDeployment},
		{"NetworkPolicy", webhookDeployment},
	} {
		g.Expect(r.find(o.kind, o.name)).To(BeNil(), "%s %s is opt-in", o.kind, o.name)
	}
	g.Expect(r.find("ServiceMonitor", "capov-metrics-monitor")).NotTo(BeNil(), "the product doc's ServiceMonitor stays on")
	g.Expect(r.find("Certificate", "capov-metrics-cert")).NotTo(BeNil(), "its scrape is TLS-verified by default")
}

func TestMetricsCertificateIsVerifiedByTheServiceMonitors(t *testing.T) {
	g := NewWithT(t)
	r := mustRender(t, values(t, `metrics: {certificate: {enabled: true}, webhook: {enabled: true}}`), apiServiceMonitor)

	cert := get[cmv1.Certificate](t, r, "Certificate", "capov-metrics-cert")
	serving := get[cmv1.Certificate](t, r, "Certificate", "capov-serving-cert")
	g.Expect(cert.Spec.IssuerRef).To(Equal(serving.Spec.IssuerRef), "the same issuer as the webhook certificate")
	g.Expect(cert.Spec.DNSNames).To(ContainElements(
		"capov-metrics-service."+namespace+".svc", "capov-webhook-metrics-service."+namespace+".svc"))

	// Both binaries get the certificate at --metrics-cert-dir, read-only.
	for _, name := range []string{managerDeployment, webhookDeployment} {
		d := get[appsv1.Deployment](t, r, "Deployment", name)
		c := d.Spec.Template.Spec.Containers[0]
		g.Expect(c.Args).To(ContainElement("--metrics-cert-dir="+metricsCertDir), name)
		g.Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "metrics-cert", MountPath: metricsCertDir, ReadOnly: true}), name)
		var secret string
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == "metrics-cert" && v.Secret != nil {
				secret = v.Secret.SecretName
			}
		}
		g.Expect(secret).To(Equal(cert.Spec.SecretName), name)
	}

	// Each ServiceMonitor verifies the scrape against that certificate's CA, for its Service.
	for monitor, svc := range map[string]string{
		"capov-metrics-monitor":         "capov-metrics-service",
		"capov-webhook-metrics-monitor": "capov-webhook-metrics-service",
	} {
		sm := get[monitoringv1.ServiceMonitor](t, r, "ServiceMonitor", monitor)
		g.Expect(sm.Spec.Endpoints).To(HaveLen(1), monitor)
		tls := sm.Spec.Endpoints[0].TLSConfig
		g.Expect(tls).NotTo(BeNil(), monitor)
		g.Expect(tls.InsecureSkipVerify).To(BeNil(), monitor)
		g.Expect(tls.CA.Secret).NotTo(BeNil(), monitor)
		g.Expect(tls.CA.Secret.Name).To(Equal(cert.Spec.SecretName), monitor)
		g.Expect(tls.CA.Secret.Key).To(Equal("ca.crt"), monitor)
		g.Expect(tls.ServerName).To(HaveValue(Equal(svc+"."+namespace+".svc")), monitor)
		g.Expect(cert.Spec.DNSNames).To(ContainElement(*tls.ServerName), monitor)
	}
}

func TestWebhookMetricsHaveTheirOwnServiceAndMonitor(t *testing.T) {
	g := NewWithT(t)
	r := mustRender(t, values(t, `metrics: {webhook: {enabled: true}}`), apiServiceMonitor)
	svc := get[corev1.Service](t, r, "Service", "capov-webhook-metrics-service")
	managerSvc := get[corev1.Service](t, r, "Service", "capov-metrics-service")
	wd, wc := webhookOf(t, r)
	md, _ := managerOf(t, r)

	sel := labels.SelectorFromSet(svc.Spec.Selector)
	g.Expect(sel.Matches(labels.Set(wd.Spec.Template.Labels))).To(BeTrue())
	g.Expect(sel.Matches(labels.Set(md.Spec.Template.Labels))).To(BeFalse(), "only the webhook pods")
	g.Expect(svc.Spec.Ports).To(ConsistOf(corev1.ServicePort{Name: "https", Port: 8443, TargetPort: intstr.FromString("https-metrics"), Protocol: corev1.ProtocolTCP}))
	g.Expect(wc.Ports).To(ContainElement(HaveField("Name", "https-metrics")))

	sm := get[monitoringv1.ServiceMonitor](t, r, "ServiceMonitor", "capov-webhook-metrics-monitor")
	monSel := labels.SelectorFromSet(sm.Spec.Selector.MatchLabels)
	g.Expect(monSel.Matches(labels.Set(svc.Labels))).To(BeTrue())
	g.Expect(monSel.Matches(labels.Set(managerSvc.Labels))).To(BeFalse())
	managerSM := get[monitoringv1.ServiceMonitor](t, r, "ServiceMonitor", "capov-metrics-monitor")
	g.Expect(labels.SelectorFromSet(managerSM.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels))).To(BeFalse(),
		"no target is scraped twice")
	g.Expect(sm.Labels).To(HaveKeyWithValue("release", "shturval-metrics"))
	g.Expect(sm.Spec.Endpoints[0].Authorization.Credentials.Name).To(Equal("capov-metrics-scraper-token"))
}

// ksmConfig is kube-state-metrics' CustomResourceStateMetrics configuration, as far as the
// chart uses it (decoded strictly: an unknown field is a typo kube-state-metrics would reject).
type ksmConfig struct {
	Kind string `json:"kind"`
	Spec struct {
		Resources []struct {
			GroupVersionKind struct {
				Group   string `json:"group"`
				Version string `json:"version"`
				Kind    string `json:"kind"`
			} `json:"groupVersionKind"`
			MetricNamePrefix string              `json:"metricNamePrefix"`
			LabelsFromPath   map[string][]string `json:"labelsFromPath"`
			Metrics          []struct {
				Name string `json:"name"`
				Help string `json:"help"`
				Each struct {
					Type string `json:"type"`
					Info *struct {
						Path           []string            `json:"path,omitempty"`
						LabelsFromPath map[string][]string `json:"labelsFromPath,omitempty"`
					} `json:"info,omitempty"`
					Gauge *struct {
						Path           []string            `json:"path,omitempty"`
						LabelsFromPath map[string][]string `json:"labelsFromPath,omitempty"`
						ValueFrom      []string            `json:"valueFrom,omitempty"`
						NilIsZero      bool                `json:"nilIsZero,omitempty"`
					} `json:"gauge,omitempty"`
					StateSet *struct {
						Path           []string            `json:"path,omitempty"`
						LabelsFromPath map[string][]string `json:"labelsFromPath,omitempty"`
						ValueFrom      []string            `json:"valueFrom,omitempty"`
						LabelName      string              `json:"labelName"`
						List           []string            `json:"list"`
					} `json:"stateSet,omitempty"`
				} `json:"each"`
			} `json:"metrics"`
		} `json:"resources"`
	} `json:"spec"`
}

// ksmMetricNames renders the kube-state-metrics configuration and returns the metric names
// kube-state-metrics derives from it (<prefix>_<name>) with their label names, after checking
// every path against the CRD schemas of config/crd/bases.
func ksmMetricNames(t *testing.T) map[string]map[string]bool {
	t.Helper()
	g := NewWithT(t)
	r := mustRender(t, values(t, `metrics: {kubeStateMetrics: {enabled: true}}`))
	cm := get[corev1.ConfigMap](t, r, "ConfigMap", "capov-kube-state-metrics-config")
	g.Expect(cm.Labels).To(HaveKeyWithValue("kube-state-metrics/custom-resource", "true"))
	cfg := &ksmConfig{}
	g.Expect(yaml.UnmarshalStrict([]byte(cm.Data["capov.yaml"]), cfg)).To(Succeed())
	g.Expect(cfg.Kind).To(Equal("CustomResourceStateMetrics"))

	schemas := crdSchemas(t)
	names := map[string]map[string]bool{}
	kinds := map[string]bool{}
	for _, res := range cfg.Spec.Resources {
		gvk := res.GroupVersionKind
		g.Expect(gvk.Group).To(Equal("infrastructure.cluster.x-k8s.io"))
		g.Expect(gvk.Version).To(Equal("v1beta1"))
		schema, ok := schemas[gvk.Kind]
		g.Expect(ok).To(BeTrue(), "no CRD for %s", gvk.Kind)
		kinds[gvk.Kind] = true
		g.Expect(res.MetricNamePrefix).To(Equal("capi_" + strings.ToLower(gvk.Kind)))
		for label, path := range res.LabelsFromPath {
			g.Expect(resolves(schema, path)).To(BeTrue(), "%s: labelsFromPath %s: %v is not a field", gvk.Kind, label, path)
		}
		for _, m := range res.Metrics {
			name := res.MetricNamePrefix + "_" + m.Name
			g.Expect(names).NotTo(HaveKey(name))
			labelSet := map[string]bool{}
			for l := range res.LabelsFromPath {
				labelSet[l] = true
			}
			names[name] = labelSet
			g.Expect(m.Help).NotTo(BeEmpty(), name)
			var path []string
			var sub map[string][]string
			var valueFrom []string
			switch m.Each.Type {
			case "Info":
				g.Expect(m.Each.Info).NotTo(BeNil(), name)
				path, sub = m.Each.Info.Path, m.Each.Info.LabelsFromPath
			case "Gauge":
				g.Expect(m.Each.Gauge).NotTo(BeNil(), name)
				path, sub, valueFrom = m.Each.Gauge.Path, m.Each.Gauge.LabelsFromPath, m.Each.Gauge.ValueFrom
			case "StateSet":
				g.Expect(m.Each.StateSet).NotTo(BeNil(), name)
				path, sub, valueFrom = m.Each.StateSet.Path, m.Each.StateSet.LabelsFromPath, m.Each.StateSet.ValueFrom
				g.Expect(m.Each.StateSet.LabelName).NotTo(BeEmpty(), name)
				labelSet[m.Each.StateSet.LabelName] = true
				g.Expect(m.Each.StateSet.List).NotTo(BeEmpty(), name)
			default:
				t.Errorf("%s: unknown metric type %q", name, m.Each.Type)
				continue
			}
			g.Expect(resolves(schema, path)).To(BeTrue(), "%s: path %v is not a field", name, path)
			for label, p := range sub {
				labelSet[label] = true
				g.Expect(resolves(schema, append(append([]string{}, path...), p...))).To(BeTrue(),
					"%s: label %s: %v under %v is not a field", name, label, p, path)
			}
			if len(valueFrom) > 0 {
				g.Expect(resolves(schema, append(append([]string{}, path...), valueFrom...))).To(BeTrue(),
					"%s: valueFrom %v under %v is not a field", name, valueFrom, path)
			}
		}
	}
	g.Expect(kinds).To(HaveLen(4), "OVirtProvider, OVirtCluster, OVirtMachine and OVirtMachineTemplate")
	return names
}

func TestKubeStateMetricsConfigurationCoversTheFourKinds(t *testing.T) {
	g := NewWithT(t)
	names := ksmMetricNames(t)
	// Readiness, conditions (with their reason), the VM state and the deletion time.
	g.Expect(names).To(HaveKey("capi_ovirtprovider_status_ready"))
	g.Expect(names).To(HaveKey("capi_ovirtprovider_status_condition"))
	g.Expect(names).To(HaveKey("capi_ovirtcluster_status_ready"))
	g.Expect(names).To(HaveKey("capi_ovirtmachine_status_ready"))
	g.Expect(names).To(HaveKey("capi_ovirtmachine_status_condition"))
	g.Expect(names).To(HaveKey("capi_ovirtmachine_status_condition_last_transition_time"))
	g.Expect(names).To(HaveKey("capi_ovirtmachine_status_vm_state"))
	g.Expect(names).To(HaveKey("capi_ovirtmachine_deletion_timestamp"))
	g.Expect(names).To(HaveKey("capi_ovirtmachinetemplate_info"))

	r := mustRender(t, values(t, `metrics: {kubeStateMetrics: {enabled: true}}`))
	cm := get[corev1.ConfigMap](t, r, "ConfigMap", "capov-kube-state-metrics-config")
	g.Expect(cm.Data["capov.yaml"]).To(ContainSubstring("reason: [reason]"), "conditions carry their reason")
	role := get[rbacv1.ClusterRole](t, r, "ClusterRole", "capov-kube-state-metrics")
	g.Expect(role.Labels).To(HaveKeyWithValue("kube-state-metrics/aggregate-to-manager", "true"))
	g.Expect(permissions(role.Rules)).To(Equal([]string{
		"infrastructure.cluster.x-k8s.io/ovirtclusters  get", "infrastructure.cluster.x-k8s.io/ovirtclusters  list", "infrastructure.cluster.x-k8s.io/ovirtclusters  watch",
		"infrastructure.cluster.x-k8s.io/ovirtmachines  get", "infrastructure.cluster.x-k8s.io/ovirtmachines  list", "infrastructure.cluster.x-k8s.io/ovirtmachines  watch",
		"infrastructure.cluster.x-k8s.io/ovirtmachinetemplates  get", "infrastructure.cluster.x-k8s.io/ovirtmachinetemplates  list", "infrastructure.cluster.x-k8s.io/ovirtmachinetemplates  watch",
		"infrastructure.cluster.x-k8s.io/ovirtproviders  get", "infrastructure.cluster.x-k8s.io/ovirtproviders  list", "infrastructure.cluster.x-k8s.io/ovirtproviders  watch",
	}), "read-only")

	// The VM states listed are the ones the CRD documents for status.vmState (and oVirt has).
	cfg := &ksmConfig{}
	g.Expect(yaml.UnmarshalStrict([]byte(cm.Data["capov.yaml"]), cfg)).To(Succeed())
	var states []string
	for _, res := range cfg.Spec.Resources {
		for _, m := range res.Metrics {
			if m.Name == "status_vm_state" {
				states = m.Each.StateSet.List
			}
		}
	}
	g.Expect(states).To(ContainElements("down", "image_locked", "powering_up", "up", "powering_down", "not_responding"))
}

// crdSchemas reads the CRDs of config/crd/bases and returns their v1beta1 schemas by kind.
func crdSchemas(t *testing.T) map[string]*apiextensionsv1.JSONSchemaProps {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	out := map[string]*apiextensionsv1.JSONSchemaProps{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1beta1" && v.Schema != nil {
				out[crd.Spec.Names.Kind] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	return out
}

// resolves reports whether a kube-state-metrics path names a field of the schema: object
// properties by name, list items transparently (kube-state-metrics iterates lists), metadata
// fields and map keys (labels, annotations) as free-form.
func resolves(schema *apiextensionsv1.JSONSchemaProps, path []string) bool {
	if len(path) == 0 {
		return true
	}
	if path[0] == "metadata" {
		switch {
		case len(path) == 1:
			return true
		case path[1] == "labels" || path[1] == "annotations":
			return len(path) <= 3
		case path[1] == "ownerReferences":
			return len(path) == 2 || (len(path) == 3 && (path[2] == "kind" || path[2] == "name" || path[2] == "uid" || path[2] == "apiVersion"))
		default:
			return len(path) == 2 && map[string]bool{"name": true, "namespace": true, "uid": true, "creationTimestamp": true, "deletionTimestamp": true, "generation": true}[path[1]]
		}
	}
	node := schema
	for _, p := range path {
		for node.Type == "array" && node.Items != nil && node.Items.Schema != nil {
			node = node.Items.Schema
		}
		child, ok := node.Properties[p]
		if !ok {
			return false
		}
		node = &child
	}
	return true
}

func TestPrometheusRuleIsRenderedOnlyWhenEnabledAndServed(t *testing.T) {
	alerts := func(r *rendered) []string {
		t.Helper()
		if r.find("PrometheusRule", "capov-alerts") == nil {
			return nil
		}
		pr := get[monitoringv1.PrometheusRule](t, r, "PrometheusRule", "capov-alerts")
		var out []string
		for _, grp := range pr.Spec.Groups {
			for _, rule := range grp.Rules {
				out = append(out, rule.Alert)
			}
		}
		sort.Strings(out)
		return out
	}
	t.Run("off by default", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(alerts(mustRender(t, nil, apiPrometheusRule))).To(BeEmpty())
	})
	t.Run("enabled without the API renders nothing", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `metrics: {prometheusRule: {enabled: true}}`), apiServiceMonitor)
		g.Expect(alerts(r)).To(BeEmpty())
		g.Expect(r.notes).To(ContainSubstring("no PrometheusRule was created"))
	})
	t.Run("enabled: the manager's alerts, labelled for the Prometheus", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `metrics: {prometheusRule: {enabled: true}}`), apiPrometheusRule)
		g.Expect(alerts(r)).To(Equal([]string{"CAPOVAuthBreakerOpen", "CAPOVEngineErrorRate"}),
			"the resource alerts need the kube-state-metrics series")
		pr := get[monitoringv1.PrometheusRule](t, r, "PrometheusRule", "capov-alerts")
		g.Expect(pr.Labels).To(HaveKeyWithValue("release", "shturval-metrics"))
		g.Expect(pr.Namespace).To(Equal(namespace))
	})
	t.Run("with kube-state-metrics: provider, machine readiness and blocked deletion", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `metrics: {prometheusRule: {enabled: true}, kubeStateMetrics: {enabled: true}}`), apiPrometheusRule)
		g.Expect(alerts(r)).To(Equal([]string{"CAPOVAuthBreakerOpen", "CAPOVEngineErrorRate",
			"CAPOVMachineDeletionBlocked", "CAPOVMachineNotReady", "CAPOVProviderNotReady"}))
		rules := rulesByAlert(t, r)
		g.Expect(rules["CAPOVMachineNotReady"].For).To(HaveValue(BeEquivalentTo("30m")))
		g.Expect(rules["CAPOVMachineDeletionBlocked"].Expr.StrVal).To(ContainSubstring("> 3600"))
		for name, rule := range rules {
			g.Expect(rule.Labels).To(HaveKey("severity"), name)
			g.Expect(rule.Annotations).To(HaveKey("summary"), name)
			g.Expect(rule.Annotations).To(HaveKey("description"), name)
		}
	})
	t.Run("the orphaned-VM alert has its own toggle", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `metrics: {prometheusRule: {enabled: true, orphanedVMs: {enabled: true}}}`), apiPrometheusRule)
		g.Expect(alerts(r)).To(ContainElement("CAPOVOrphanedVMs"))
		g.Expect(rulesByAlert(t, r)["CAPOVOrphanedVMs"].Expr.StrVal).To(ContainSubstring("capov_orphaned_vms"))
	})
	t.Run("the error ratio is a value", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `metrics: {prometheusRule: {enabled: true, engineErrorRatio: 0.25}}`), apiPrometheusRule)
		g.Expect(rulesByAlert(t, r)["CAPOVEngineErrorRate"].Expr.StrVal).To(HaveSuffix("> 0.25"))
	})
}

func rulesByAlert(t *testing.T, r *rendered) map[string]monitoringv1.Rule {
	t.Helper()
	pr := get[monitoringv1.PrometheusRule](t, r, "PrometheusRule", "capov-alerts")
	out := map[string]monitoringv1.Rule{}
	for _, grp := range pr.Spec.Groups {
		for _, rule := range grp.Rules {
			out[rule.Alert] = rule
		}
	}
	return out
}

// grafanaDashboard is the part of a Grafana dashboard the tests read.
type grafanaDashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// dashboardOf renders the dashboard ConfigMap and parses its JSON.
func dashboardOf(t *testing.T, r *rendered) (*corev1.ConfigMap, *grafanaDashboard) {
	t.Helper()
	cm := get[corev1.ConfigMap](t, r, "ConfigMap", "capov-grafana-dashboard")
	d := &grafanaDashboard{}
	if err := json.Unmarshal([]byte(cm.Data["capov.json"]), d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	return cm, d
}

func TestGrafanaDashboardIsAConfigMapForTheSidecar(t *testing.T) {
	g := NewWithT(t)
	r := mustRender(t, values(t, `metrics: {grafanaDashboard: {enabled: true, annotations: {grafana_folder: CAPOV}}}`))
	cm, d := dashboardOf(t, r)
	g.Expect(cm.Labels).To(HaveKeyWithValue("grafana_dashboard", "1"))
	g.Expect(cm.Namespace).To(Equal(namespace))
	g.Expect(cm.Annotations).To(HaveKeyWithValue("grafana_folder", "CAPOV"))
	g.Expect(d.Title).To(Equal("CAPOV"))
	g.Expect(d.UID).NotTo(BeEmpty())
	var exprs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	joined := strings.Join(exprs, "\n")
	g.Expect(joined).To(ContainSubstring("capov_ovirt_requests_total"))
	g.Expect(joined).To(ContainSubstring("controller_runtime_reconcile_total"))
	g.Expect(joined).To(ContainSubstring("controller_runtime_webhook_requests_total"))

	r = mustRender(t, values(t, `metrics: {grafanaDashboard: {enabled: true, namespace: grafana}}`))
	cm, _ = dashboardOf(t, r)
	g.Expect(cm.Namespace).To(Equal("grafana"))
}

func TestNetworkPoliciesAdmitOnlyTheServedPorts(t *testing.T) {
	t.Run("both Deployments, their own ports", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `networkPolicy: {enabled: true}`))
		for _, name := range []string{managerDeployment, webhookDeployment} {
			np := get[networkingv1.NetworkPolicy](t, r, "NetworkPolicy", name)
			d := get[appsv1.Deployment](t, r, "Deployment", name)
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			g.Expect(err).NotTo(HaveOccurred())
			for _, other := range []string{managerDeployment, webhookDeployment} {
				od := get[appsv1.Deployment](t, r, "Deployment", other)
				g.Expect(sel.Matches(labels.Set(od.Spec.Template.Labels))).To(Equal(other == name), "%s selects %s", name, other)
			}
			g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}), "egress is open unless networkPolicy.egress is set")
			containerPorts := map[string]bool{}
			for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
				containerPorts[p.Name] = true
			}
			var ports []string
			for _, rule := range np.Spec.Ingress {
				g.Expect(rule.From).To(BeEmpty(), name)
				for _, p := range rule.Ports {
					g.Expect(containerPorts).To(HaveKey(p.Port.String()), "%s admits a port its pods do not serve", name)
					ports = append(ports, p.Port.String())
				}
			}
			want := []string{"https-metrics", "health"}
			if name == webhookDeployment {
				want = append([]string{"webhook-server"}, want...)
			}
			g.Expect(ports).To(Equal(want), name)
		}
	})
	t.Run("scrapers and egress are restricted on request", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, allMonitoring))
		for _, name := range []string{managerDeployment, webhookDeployment} {
			np := get[networkingv1.NetworkPolicy](t, r, "NetworkPolicy", name)
			g.Expect(np.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress))
			for _, rule := range np.Spec.Ingress {
				if rule.Ports[0].Port.String() == "https-metrics" {
					g.Expect(rule.From).To(HaveLen(1), name)
					g.Expect(rule.From[0].NamespaceSelector.MatchLabels).To(HaveKeyWithValue("kubernetes.io/metadata.name", "monitoring"))
				} else {
					g.Expect(rule.From).To(BeEmpty(), name)
				}
			}
			g.Expect(np.Spec.Egress).To(HaveLen(2), "DNS and the configured rule")
			g.Expect(np.Spec.Egress[0].Ports).To(ContainElement(HaveField("Port", HaveValue(Equal(intstr.FromInt32(53))))))
		}
	})
}

func TestChartsRequireKubernetes133(t *testing.T) {
	for _, name := range []string{"capov-crds", "capov"} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(loadChart(t, name).Metadata.KubeVersion).To(Equal(">=1.33.0-0"))
			_, err := renderOn(t, name, "v1.32.9", nil, prerequisites...)
			g.Expect(err).To(MatchError(ContainSubstring("incompatible with Kubernetes v1.32.9")))
			_, err = renderOn(t, name, "v1.33.0", nil, prerequisites...)
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}
