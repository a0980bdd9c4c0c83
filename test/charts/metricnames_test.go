package charts

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/harness"
)

// plannedMetrics are referenced by opt-in rules although no binary exports them yet; each
// names the value that must stay off by default until it does.
var plannedMetrics = map[string]string{
	// Orphaned VMs: reported by a later manager (another issue).
	"capov_orphaned_vms": "metrics.prometheusRule.orphanedVMs.enabled",
}

// TestAlertsAndDashboardUseMetricsTheBinariesExport compares every metric name of the
// PrometheusRule and of the Grafana dashboard with what the real binaries serve: the manager
// and webhook binaries are built and started (test/harness) against envtest and the oVirt
// simulator, an OVirtProvider is reconciled (so the capov_ovirt_* series exist and an admission
// request reaches the webhook), and both /metrics endpoints are scraped over HTTPS with a
// service-account token, as Prometheus does. A name is accepted when one of the binaries
// exports it, when the chart's kube-state-metrics configuration derives it, or when it is a
// planned metric whose rule is off by default; a planned metric that appears makes the test
// ask for its default to be reviewed.
func TestAlertsAndDashboardUseMetricsTheBinariesExport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the manager and webhook binaries")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	stack, err := harness.StartStack(ctx, harness.StackOptions{
		WorkDir: t.TempDir(), WithoutCAPI: true, WithoutManager: true, Log: logr.Discard(),
	})
	if err != nil {
		t.Fatalf("starting the binaries: %v", err)
	}
	t.Cleanup(stack.Stop)
	g := NewWithT(t)
	c := stack.MgmtClient()
	for _, obj := range []client.Object{
		harness.Namespace("capov-system"),
		harness.CredentialsSecret("capov-system", "sim-credentials", stack.SimUsername, stack.SimPassword),
		// Created through the webhook: the admission metrics get their first samples.
		harness.Provider("sim", stack.SimURL, "sim-credentials", stack.SimCAPEM),
	} {
		g.Expect(c.Create(ctx, obj)).To(Succeed())
	}
	token, err := stack.MetricsToken(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	mgr, managerAddr, err := stack.StartManager(ctx, "manager", []string{"--leader-elect", "--leader-election-namespace=capov-system", "--provider-check-interval=2s"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = mgr.Stop(30 * time.Second) })

	// The provider is Ready once its check ran to the end: the SSO login and the request are
	// counted and timed by then. requests_total alone could be scraped between a request's count
	// and its duration, or before the login's count (seen on a loaded machine).
	g.Eventually(func(g Gomega) {
		p := &infrav1.OVirtProvider{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "sim"}, p)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, clusterv1.ReadyCondition)).To(BeTrue(), "the provider is not Ready yet")
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), func() string { return harness.Tail(mgr.Logs(), 30) })
	exported := map[string]map[string]bool{} // metric -> its label names
	g.Eventually(func(g Gomega) {
		names, err := scrape(ctx, managerAddr, token)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(names).To(HaveKey("capov_ovirt_requests_total"), "the provider has not been reconciled yet")
		g.Expect(names).To(HaveKey("leader_election_master_status"))
		exported = names
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), func() string { return harness.Tail(mgr.Logs(), 30) })
	webhookNames, err := scrape(ctx, stack.WebhookMetricsAddr, token)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(webhookNames).To(HaveKey("controller_runtime_webhook_requests_total"))
	for n, ls := range webhookNames {
		if exported[n] == nil {
			exported[n] = map[string]bool{}
		}
		for l := range ls {
			exported[n][l] = true
		}
	}
	ksm := ksmMetricNames(t)

	r := mustRender(t, values(t, allMonitoring), apiServiceMonitor, apiPrometheusRule)
	used := map[string][]string{} // metric -> where
	exprs := map[string]string{}  // expression -> where
	for alert, rule := range rulesByAlert(t, r) {
		exprs[rule.Expr.StrVal] = "alert " + alert
	}
	_, dashboard := dashboardOf(t, r)
	for _, p := range dashboard.Panels {
		for _, tg := range p.Targets {
			exprs[tg.Expr] = "panel " + p.Title
		}
	}
	for expr, where := range exprs {
		metrics := promqlMetricNames(expr)
		for _, n := range metrics {
			used[n] = append(used[n], where)
		}
		// Every label the expression matches or groups by is one of its metrics' labels (or a
		// label Prometheus adds to every target).
		for _, l := range promqlLabelNames(expr) {
			found := targetLabels[l]
			for _, n := range metrics {
				found = found || exported[n][l] || ksm[n][l] || plannedMetrics[n] != ""
			}
			if !found {
				t.Errorf("%s: label %q is a label of none of %v", where, l, metrics)
			}
		}
	}
	for _, v := range dashboard.Templating.List {
		// label_values(<metric>, <label>): the metric is the first argument.
		if inner, ok := strings.CutPrefix(v.Definition, "label_values("); ok {
			metric, _, _ := strings.Cut(inner, ",")
			for _, n := range promqlMetricNames(metric) {
				used[n] = append(used[n], "variable "+v.Name)
			}
		}
	}
	g.Expect(used).To(HaveKey("capov_ovirt_auth_breaker_open"))
	g.Expect(used).To(HaveKey("capi_ovirtmachine_status_ready"))

	for name, where := range used {
		switch {
		case exported[name] != nil, ksm[name] != nil:
		case plannedMetrics[name] != "":
			g.Expect(exported).NotTo(HaveKey(name), "%s is exported now: review the default of %s", name, plannedMetrics[name])
		default:
			t.Errorf("%s (used by %s) is exported by neither binary nor the kube-state-metrics configuration", name, strings.Join(where, ", "))
		}
	}
	for name, value := range plannedMetrics {
		def := mustRender(t, nil, apiServiceMonitor, apiPrometheusRule)
		g.Expect(def.find("PrometheusRule", "capov-alerts")).To(BeNil())
		on := mustRender(t, values(t, `metrics: {prometheusRule: {enabled: true}, kubeStateMetrics: {enabled: true}}`), apiPrometheusRule)
		for alert, rule := range rulesByAlert(t, on) {
			g.Expect(promqlMetricNames(rule.Expr.StrVal)).NotTo(ContainElement(name), "%s uses %s without %s", alert, name, value)
		}
	}

	// The dashboard shows every oVirt call metric the manager exports.
	var ovirt []string
	for n := range exported {
		if strings.HasPrefix(n, "capov_ovirt_") && !strings.HasSuffix(n, "_sum") && !strings.HasSuffix(n, "_count") {
			ovirt = append(ovirt, strings.TrimSuffix(n, "_bucket"))
		}
	}
	sort.Strings(ovirt)
	g.Expect(ovirt).NotTo(BeEmpty())
	for _, n := range ovirt {
		g.Expect(used).To(Or(HaveKey(n), HaveKey(n+"_bucket")), "the dashboard does not show %s", n)
	}
}

// targetLabels are the labels Prometheus adds to every series of a ServiceMonitor target.
var targetLabels = map[string]bool{"job": true, "instance": true, "namespace": true, "pod": true, "service": true, "endpoint": true, "container": true}

// scrape GETs /metrics over HTTPS with a bearer token and returns the sample names (histogram
// series as <name>_bucket, _sum, _count), as Prometheus stores them, with their label names.
func scrape(ctx context.Context, addr, token string) (map[string]map[string]bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	// The binaries serve a self-signed certificate here (no --metrics-cert-dir in the harness).
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback test server
	}}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	names := map[string]map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.IndexAny(line, "{ ")
		if i <= 0 {
			continue
		}
		ls := names[line[:i]]
		if ls == nil {
			ls = map[string]bool{}
			names[line[:i]] = ls
		}
		if line[i] == '{' {
			for _, m := range sampleLabel.FindAllStringSubmatch(line[i:], -1) {
				ls[m[1]] = true
			}
		}
	}
	return names, sc.Err()
}

var (
	sampleLabel    = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)="(?:[^"\\]|\\.)*"`)
	promqlMatcher  = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)`)
	promqlStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promqlMatchers = regexp.MustCompile(`\{[^{}]*\}|\[[^\[\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promqlIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promqlKeywords = map[string]bool{
		"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true, "ignoring": true,
		"group_left": true, "group_right": true, "bool": true, "offset": true, "inf": true, "nan": true,
	}
)

// promqlMetricNames returns the metric names a PromQL expression selects: identifiers that
// are neither functions, aggregations, keywords, label names (in matchers and grouping
// clauses), strings nor durations.
func promqlMetricNames(expr string) []string {
	s := promqlStrings.ReplaceAllString(expr, `""`)
	s = promqlMatchers.ReplaceAllString(s, " ")
	s = promqlGrouping.ReplaceAllString(s, " ")
	seen := map[string]bool{}
	var out []string
	for _, loc := range promqlIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if loc[0] > 0 && (s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9' || s[loc[0]-1] == '.' || s[loc[0]-1] == '$') {
			continue // 1e3, 0.95, $variable
		}
		rest := strings.TrimLeft(s[loc[1]:], " \t\n")
		if strings.HasPrefix(rest, "(") || promqlKeywords[strings.ToLower(name)] || seen[name] {
			continue
		}
		// "sum by (x) (...)" was reduced to "sum   (...)": the aggregation is followed by "(".
		seen[name] = true
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// promqlLabelNames returns the label names an expression matches on (in selectors) or groups
// by (by, without, on, ignoring, group_left, group_right).
func promqlLabelNames(expr string) []string {
	s := promqlStrings.ReplaceAllString(expr, `""`)
	seen := map[string]bool{}
	for _, sel := range regexp.MustCompile(`\{[^{}]*\}`).FindAllString(s, -1) {
		for _, m := range promqlMatcher.FindAllStringSubmatch(sel, -1) {
			seen[m[1]] = true
		}
	}
	for _, grp := range promqlGrouping.FindAllString(s, -1) {
		inner := grp[strings.Index(grp, "(")+1 : len(grp)-1]
		for _, l := range strings.Split(inner, ",") {
			if l = strings.TrimSpace(l); l != "" {
				seen[l] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for l := range seen {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

func TestPromQLLabelNames(t *testing.T) {
	g := NewWithT(t)
	g.Expect(promqlLabelNames(`sum by (provider, code) (rate(capov_ovirt_requests_total{job=~"$job",code!~"2xx|a,b"}[5m])) / on(provider) group_left() x`)).
		To(Equal([]string{"code", "job", "provider"}))
}

func TestPromQLMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`max by (provider) (capov_ovirt_auth_breaker_open) == 1`, []string{"capov_ovirt_auth_breaker_open"}},
		{`sum by (provider) (rate(capov_ovirt_requests_total{code!~"2xx|404"}[5m])) / sum by (provider) (rate(capov_ovirt_requests_total[5m])) > 0.1`,
			[]string{"capov_ovirt_requests_total"}},
		{`histogram_quantile(0.95, sum by (le, operation) (rate(capov_ovirt_request_duration_seconds_bucket{job=~"$job"}[5m])))`,
			[]string{"capov_ovirt_request_duration_seconds_bucket"}},
		{`(time() - max by (namespace, name) (capi_ovirtmachine_deletion_timestamp)) > 3600`, []string{"capi_ovirtmachine_deletion_timestamp"}},
		{`a_total and on (pod) b_info unless ignoring(x) c offset 5m`, []string{"a_total", "b_info", "c"}},
		{`sum(rate(x_total[5m])) by (job)`, []string{"x_total"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(promqlMetricNames(tt.expr)).To(Equal(tt.want))
		})
	}
}
