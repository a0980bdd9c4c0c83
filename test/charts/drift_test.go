package charts

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/capov/capov/test/release"
)

// readObjects parses a multi-document YAML file of the repository.
func readObjects(t *testing.T, rel string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("reading %s: %v", rel, err)
	}
	objs, err := parseYAMLDocs(b)
	if err != nil {
		t.Fatalf("parsing %s: %v", rel, err)
	}
	return objs
}

// parseYAMLDocs parses "---"-separated YAML documents, skipping empty ones.
func parseYAMLDocs(b []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, fmt.Errorf("%w in\n%s", err, doc)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

// decodeStrict converts an unstructured object to a typed one, failing on unknown fields.
func decodeStrict(t *testing.T, u *unstructured.Unstructured, into runtime.Object) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// permissions flattens RBAC rules into one sorted line per permission, so two rule lists
// compare equal when they grant the same, whatever their grouping and order.
func permissions(rules []rbacv1.PolicyRule) []string {
	set := map[string]bool{}
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, verb := range r.Verbs {
			for _, url := range r.NonResourceURLs {
				set["url "+url+" "+verb] = true
			}
			for _, group := range r.APIGroups {
				for _, res := range r.Resources {
					for _, name := range names {
						set[fmt.Sprintf("%s/%s %s %s", group, res, name, verb)] = true
					}
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestChartRBACMatchesTheGeneratedRoles(t *testing.T) {
	r := mustRender(t, nil)
	tests := []struct {
		file, kind, chartName string
	}{
		{"config/rbac/role.yaml", "ClusterRole", "capov-manager-role"},
		{"config/rbac/role.yaml", "Role", "capov-manager-role"},
		{"config/rbac/leader_election_role.yaml", "Role", "capov-leader-election-role"},
		{"config/rbac/metrics_reader_role.yaml", "ClusterRole", "capov-metrics-reader"},
		{"config/rbac/webhook/role.yaml", "ClusterRole", "capov-webhook-role"},
	}
	for _, tt := range tests {
		t.Run(tt.kind+"/"+tt.chartName, func(t *testing.T) {
			g := NewWithT(t)
			var objs []*unstructured.Unstructured
			for _, o := range readObjects(t, tt.file) {
				if o.GetKind() == tt.kind {
					objs = append(objs, o)
				}
			}
			g.Expect(objs).To(HaveLen(1), "one %s in %s", tt.kind, tt.file)
			var want []rbacv1.PolicyRule
			if tt.kind == "Role" {
				role := &rbacv1.Role{}
				decodeStrict(t, objs[0], role)
				want = role.Rules
			} else {
				role := &rbacv1.ClusterRole{}
				decodeStrict(t, objs[0], role)
				want = role.Rules
			}
			var got []rbacv1.PolicyRule
			if tt.kind == "Role" {
				got = get[rbacv1.Role](t, r, "Role", tt.chartName).Rules
			} else {
				got = get[rbacv1.ClusterRole](t, r, "ClusterRole", tt.chartName).Rules
			}
			g.Expect(permissions(got)).To(Equal(permissions(want)),
				"charts/capov drifted from %s (make generate): copy its rules into the chart template", tt.file)
		})
	}
}

func TestRBACIsLeastPrivilege(t *testing.T) {
	r := mustRender(t, values(t, `metrics: {readerSubjects: [{kind: Group, name: monitoring}]}`))
	byRole := map[string][]string{}
	for _, o := range r.objs {
		var rules []rbacv1.PolicyRule
		switch o.GetKind() {
		case "Role":
			role := &rbacv1.Role{}
			decodeStrict(t, o, role)
			rules = role.Rules
		case "ClusterRole":
			role := &rbacv1.ClusterRole{}
			decodeStrict(t, o, role)
			g := NewWithT(t)
			g.Expect(role.AggregationRule).To(BeNil(), o.GetName())
			rules = role.Rules
		default:
			continue
		}
		byRole[o.GetKind()+"/"+o.GetName()] = permissions(rules)
	}
	g := NewWithT(t)
	g.Expect(byRole).To(HaveLen(5))
	for name, perms := range byRole {
		for _, p := range perms {
			g.Expect(p).NotTo(ContainSubstring("*"), "%s grants a wildcard: %s", name, p)
			g.Expect(p).NotTo(MatchRegexp(` (escalate|bind|impersonate)$`), "%s: %s", name, p)
		}
	}
	g.Expect(byRole["ClusterRole/capov-webhook-role"]).To(Equal([]string{
		"/namespaces  get",
		"/namespaces  list",
		"/namespaces  watch",
		"authentication.k8s.io/tokenreviews  create",
		"authorization.k8s.io/subjectaccessreviews  create",
		"cluster.x-k8s.io/clusters  get",
		"infrastructure.cluster.x-k8s.io/ovirtclusters  get",
		"infrastructure.cluster.x-k8s.io/ovirtmachines  list",
		"infrastructure.cluster.x-k8s.io/ovirtproviders  get",
		"infrastructure.cluster.x-k8s.io/ovirtproviders  list",
		"infrastructure.cluster.x-k8s.io/ovirtproviders  watch",
	}), "the webhook reads OVirtProviders, Namespaces (spec.allowedNamespaces), lists OVirtMachines (a provider in use is not deleted), "+
		"gets a Cluster and its OVirtCluster (an OVirtMachine's spec.failureDomain) and checks metrics callers, nothing else (no Secrets)")
	g.Expect(byRole["ClusterRole/capov-metrics-reader"]).To(Equal([]string{"url /metrics get"}))
	for _, p := range byRole["ClusterRole/capov-manager-role"] {
		g.Expect(p).NotTo(MatchRegexp(`^/secrets .*delete$`), "the manager never deletes Secrets outside the credentials namespace")
	}
	// Cluster-wide the manager reads Secrets and creates one per workload cluster, its ownership
	// key; TestManagerReadsSecretsEverywhereAndWritesOnlyItsCredentials follows the bindings.
	g.Expect(byRole["ClusterRole/capov-manager-role"]).To(ContainElements("/secrets  get", "/secrets  create"))
	g.Expect(byRole["ClusterRole/capov-manager-role"]).NotTo(ContainElement(MatchRegexp(`^/secrets  (list|watch|patch|update)$`)))
	g.Expect(byRole["Role/capov-manager-role"]).To(Equal([]string{
		"/secrets  create", "/secrets  delete", "/secrets  get", "/secrets  list", "/secrets  patch", "/secrets  update", "/secrets  watch",
	}), "the Role of the credentials namespace holds the Secrets the manager caches and patches, and the move copies it creates and deletes")

	// Each ServiceAccount is bound to its own roles only.
	subjects := map[string][]string{}
	for _, o := range r.objs {
		switch o.GetKind() {
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			decodeStrict(t, o, b)
			for _, s := range b.Subjects {
				subjects[b.RoleRef.Kind+"/"+b.RoleRef.Name] = append(subjects[b.RoleRef.Kind+"/"+b.RoleRef.Name], s.Kind+"/"+s.Namespace+"/"+s.Name)
			}
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			decodeStrict(t, o, b)
			for _, s := range b.Subjects {
				subjects[b.RoleRef.Kind+"/"+b.RoleRef.Name] = append(subjects[b.RoleRef.Kind+"/"+b.RoleRef.Name], s.Kind+"/"+s.Namespace+"/"+s.Name)
			}
		}
	}
	g.Expect(subjects).To(Equal(map[string][]string{
		"ClusterRole/capov-manager-role":   {"ServiceAccount/" + namespace + "/capov-manager"},
		"Role/capov-manager-role":          {"ServiceAccount/" + namespace + "/capov-manager"},
		"Role/capov-leader-election-role":  {"ServiceAccount/" + namespace + "/capov-manager"},
		"ClusterRole/capov-webhook-role":   {"ServiceAccount/" + namespace + "/capov-webhook"},
		"ClusterRole/capov-metrics-reader": {"Group//monitoring"},
	}))
}

func TestChartWebhooksMatchTheGeneratedConfigurations(t *testing.T) {
	g := NewWithT(t)
	r := mustRender(t, nil)
	objs := readObjects(t, "config/webhook/manifests.yaml")

	var checked int
	for _, o := range objs {
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			want := &admissionregistrationv1.MutatingWebhookConfiguration{}
			decodeStrict(t, o, want)
			got := get[admissionregistrationv1.MutatingWebhookConfiguration](t, r, o.GetKind(), "capov-"+o.GetName())
			expectSameWebhooks(g, want.Webhooks, got.Webhooks, func(w *admissionregistrationv1.MutatingWebhook) (string, *admissionregistrationv1.WebhookClientConfig) {
				return w.Name, &w.ClientConfig
			})
			checked++
		case "ValidatingWebhookConfiguration":
			want := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			decodeStrict(t, o, want)
			got := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, r, o.GetKind(), "capov-"+o.GetName())
			expectSameWebhooks(g, want.Webhooks, got.Webhooks, func(w *admissionregistrationv1.ValidatingWebhook) (string, *admissionregistrationv1.WebhookClientConfig) {
				return w.Name, &w.ClientConfig
			})
			checked++
		}
	}
	g.Expect(checked).To(Equal(2))
}

func TestCRDChartIsInSyncWithTheGeneratedCRDs(t *testing.T) {
	g := NewWithT(t)
	bases, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bases).To(HaveLen(len(capovCRDNames)))
	templates, err := filepath.Glob(filepath.Join(root, "charts", "capov-crds", "templates", "infrastructure.cluster.x-k8s.io_*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(templates).To(HaveLen(len(bases)), "run hack/sync-chart-crds.sh (make generate)")

	r, err := render(t, "capov-crds", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.objs).To(HaveLen(len(bases)))
	for _, f := range bases {
		want := &apiextensionsv1.CustomResourceDefinition{}
		b, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(yaml.UnmarshalStrict(b, want)).To(Succeed())
		got := get[apiextensionsv1.CustomResourceDefinition](t, r, "CustomResourceDefinition", want.Name)

		g.Expect(got.Annotations).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"), want.Name)
		delete(got.Annotations, "helm.sh/resource-policy")
		// The chart adds the conversion webhook of the capov release (default values: Shturval's
		// capov-system) and cert-manager's CA injection; the rest is the generated CRD.
		g.Expect(got.Annotations).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", namespace+"/capov-serving-cert"), want.Name)
		delete(got.Annotations, "cert-manager.io/inject-ca-from")
		g.Expect(got.Spec.Conversion).To(Equal(wantConversion(namespace, "capov-webhook-service")), want.Name)
		got.Spec.Conversion = nil
		g.Expect(got).To(Equal(want), "%s: charts/capov-crds is stale; run hack/sync-chart-crds.sh (make generate)", want.Name)

		g.Expect(got.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/provider", "infrastructure-ovirt"), want.Name)
		g.Expect(got.Labels).To(HaveKey("clusterctl.cluster.x-k8s.io"), want.Name)
		switch got.Spec.Names.Kind {
		case "OVirtProvider":
			g.Expect(got.Labels).To(HaveKey("clusterctl.cluster.x-k8s.io/move-hierarchy"))
		case "OVirtClusterTemplate", "OVirtRemediation", "OVirtRemediationTemplate":
			// v1beta2 only: the v1beta2 InfraClusterTemplate and external remediation contracts.
			g.Expect(got.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta2", "v1beta2"), want.Name)
			g.Expect(got.Labels).NotTo(HaveKey("cluster.x-k8s.io/v1beta1"), want.Name)
		case "OVirtHostDeviceClaim":
			// v1beta2 only and no Cluster API contract: no contract label at all.
			g.Expect(got.Labels).NotTo(HaveKey("cluster.x-k8s.io/v1beta1"), want.Name)
			g.Expect(got.Labels).NotTo(HaveKey("cluster.x-k8s.io/v1beta2"), want.Name)
			g.Expect(got.Spec.Scope).To(Equal(apiextensionsv1.ClusterScoped), want.Name)
		default:
			g.Expect(got.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta1", "v1beta1"), want.Name)
		}
	}
}

// wantConversion is the conversion stanza of a CAPOV CRD that calls Service ns/name.
func wantConversion(ns, name string) *apiextensionsv1.CustomResourceConversion {
	return &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
				Namespace: ns, Name: name, Path: ptr.To("/convert"),
			}},
		},
	}
}

func TestVersionsAgreeAcrossChartsAndClusterctlAssets(t *testing.T) {
	g := NewWithT(t)
	main, crds := loadChart(t, "capov").Metadata, loadChart(t, "capov-crds").Metadata
	g.Expect(crds.Version).To(Equal(main.Version))
	g.Expect(crds.AppVersion).To(Equal(main.AppVersion))

	// metadata.yaml covers the release with the v1beta2 contract and keeps the v1beta1 series.
	var meta struct {
		APIVersion    string `json:"apiVersion"`
		Kind          string `json:"kind"`
		ReleaseSeries []struct {
			Major    int32  `json:"major"`
			Minor    int32  `json:"minor"`
			Contract string `json:"contract"`
		} `json:"releaseSeries"`
	}
	b, err := os.ReadFile(filepath.Join(root, "metadata.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.UnmarshalStrict(b, &meta)).To(Succeed())
	g.Expect(meta.APIVersion).To(Equal("clusterctl.cluster.x-k8s.io/v1alpha3"))
	g.Expect(meta.Kind).To(Equal("Metadata"))
	var major, minor int32
	_, err = fmt.Sscanf(main.AppVersion, "%d.%d.", &major, &minor)
	g.Expect(err).NotTo(HaveOccurred())
	contracts := map[string]string{}
	for _, s := range meta.ReleaseSeries {
		g.Expect(s.Contract).To(BeElementOf("v1beta1", "v1beta2"))
		contracts[fmt.Sprintf("%d.%d", s.Major, s.Minor)] = s.Contract
	}
	g.Expect(contracts).To(HaveKeyWithValue(fmt.Sprintf("%d.%d", major, minor), "v1beta2"),
		"metadata.yaml needs a release series for %s with the v1beta2 contract (the storage version)", main.AppVersion)
	g.Expect(contracts).To(HaveKeyWithValue("0.1", "v1beta1"), "the older series stay listed")

	// The clusterctl components use the same images as the chart's defaults.
	for _, f := range []string{"config/manager/manager.yaml", "config/manager/webhook.yaml"} {
		d := &appsv1.Deployment{}
		decodeStrict(t, readObjects(t, f)[0], d)
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix(":"+main.AppVersion), f)
	}
}

// TestMetadataCoversEveryReleaseOfTheChangelog keeps metadata.yaml and CHANGELOG.md in step:
// every release of the changelog has its series with the contract it shipped (v1beta1 for the
// v1beta1-only 0.1, v1beta2 from 0.2 on), the series are listed oldest first without
// duplicates, and none is newer than the next minor of the newest release (a series like the
// 2.14 listed until v0.3.0 would make clusterctl take a v2.14.x tag for the newest release).
func TestMetadataCoversEveryReleaseOfTheChangelog(t *testing.T) {
	g := NewWithT(t)
	b, err := os.ReadFile(filepath.Join(root, "metadata.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	meta, err := release.ParseMetadata(b)
	g.Expect(err).NotTo(HaveOccurred())
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	g.Expect(err).NotTo(HaveOccurred())
	versions := regexp.MustCompile(`(?m)^## \[v?([0-9][^\]]*)\]`).FindAllSubmatch(changelog, -1)
	g.Expect(len(versions)).To(BeNumerically(">=", 3), "CHANGELOG.md has the sections 0.1.0, 0.2.0 and 0.3.0 at least")

	var newestMajor, newestMinor int32 = -1, -1
	for _, v := range versions {
		version := "v" + string(v[1])
		contract, err := release.ContractOf(b, version)
		g.Expect(err).NotTo(HaveOccurred(), "CHANGELOG.md's %s", version)
		major, minor, err := release.SeriesOf(version)
		g.Expect(err).NotTo(HaveOccurred())
		want := "v1beta2"
		if major == 0 && minor < 2 {
			want = "v1beta1"
		}
		g.Expect(contract).To(Equal(want), "the contract of %s", version)
		if major > newestMajor || (major == newestMajor && minor > newestMinor) {
			newestMajor, newestMinor = major, minor
		}
	}
	// The charts' version is a release of the changelog.
	main := loadChart(t, "capov").Metadata
	_, _, err = release.ChangelogSection(changelog, "v"+main.Version)
	g.Expect(err).NotTo(HaveOccurred(), "the charts' version %s has a CHANGELOG.md section", main.Version)

	seen := map[[2]int32]bool{}
	for i, s := range meta.ReleaseSeries {
		key := [2]int32{s.Major, s.Minor}
		g.Expect(seen).NotTo(HaveKey(key), "series %d.%d listed twice", s.Major, s.Minor)
		seen[key] = true
		if i > 0 {
			p := meta.ReleaseSeries[i-1]
			g.Expect(s.Major > p.Major || (s.Major == p.Major && s.Minor > p.Minor)).To(BeTrue(), "series listed oldest first: %d.%d after %d.%d", s.Major, s.Minor, p.Major, p.Minor)
		}
		g.Expect(s.Major == newestMajor && s.Minor <= newestMinor+1 || s.Major < newestMajor).To(BeTrue(),
			"series %d.%d is newer than the next minor of the newest release %d.%d", s.Major, s.Minor, newestMajor, newestMinor)
	}
}

// kustomize builds config/default like `make release-manifests` does.
func kustomize(t *testing.T) []byte {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is needed to build config/default: %v", err)
	}
	cmd := exec.Command(kubectl, "kustomize", filepath.Join(root, "config", "default"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v\n%s", err, stderr.String())
	}
	return out
}

func TestClusterctlComponentsMatchTheChart(t *testing.T) {
	g := NewWithT(t)
	objs, err := parseYAMLDocs([]byte(envsubst(t, string(kustomize(t)), nil)))
	g.Expect(err).NotTo(HaveOccurred())
	r := mustRender(t, nil)

	// The same objects under the same names, plus the namespace and the CRDs.
	bases, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var crds int
	var got []string
	for _, o := range objs {
		g.Expect(o.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/provider", "infrastructure-ovirt"), o.GetName())
		switch o.GetKind() {
		case "Namespace":
			g.Expect(o.GetName()).To(Equal(namespace))
			continue
		case "CustomResourceDefinition":
			crds++
			continue
		}
		if o.GetNamespace() != "" {
			g.Expect(o.GetNamespace()).To(Equal(namespace), o.GetKind()+"/"+o.GetName())
		}
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	sort.Strings(got)
	g.Expect(got).To(Equal(r.kinds()))
	g.Expect(crds).To(Equal(len(bases)), "config/crd/kustomization.yaml must list every CRD of config/crd/bases")

	// The same pods, apart from Helm's labels.
	for _, name := range []string{managerDeployment, webhookDeployment} {
		want := get[appsv1.Deployment](t, r, "Deployment", name)
		var u *unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "Deployment" && o.GetName() == name {
				u = o
			}
		}
		g.Expect(u).NotTo(BeNil(), name)
		have := &appsv1.Deployment{}
		decodeStrict(t, u, have)
		g.Expect(have.Spec.Replicas).To(Equal(want.Spec.Replicas), name)
		g.Expect(have.Spec.Selector).To(Equal(want.Spec.Selector), name)
		wantPod, havePod := want.Spec.Template.Spec, have.Spec.Template.Spec
		wantC, haveC := wantPod.Containers[0], havePod.Containers[0]
		haveC.Args = withoutFlag(haveC.Args, "--v") // a clusterctl variable the chart leaves to extraArgs
		g.Expect(haveC).To(Equal(wantC), name)
		wantPod.Containers, havePod.Containers = nil, nil
		g.Expect(havePod).To(Equal(wantPod), name)
	}
}

func withoutFlag(args []string, flag string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, flag+"=") {
			out = append(out, a)
		}
	}
	return out
}

// envsubstPattern matches ${VAR}, ${VAR:=default} and ${VAR:-default}, the forms clusterctl's
// variable processor handles.
var envsubstPattern = regexp.MustCompile(`\$\{([A-Z0-9_]+)(?::[=-]([^}]*))?\}`)

// envsubst substitutes variables like clusterctl does; a variable without a value and without
// a default fails the test.
func envsubst(t *testing.T, s string, vars map[string]string) string {
	t.Helper()
	var missing []string
	out := envsubstPattern.ReplaceAllStringFunc(s, func(m string) string {
		sub := envsubstPattern.FindStringSubmatch(m)
		if v, ok := vars[sub[1]]; ok {
			return v
		}
		if strings.Contains(m, ":") {
			return sub[2]
		}
		missing = append(missing, sub[1])
		return m
	})
	if len(missing) > 0 {
		t.Fatalf("variables without a value: %v", missing)
	}
	return out
}

// variables lists the variables a clusterctl asset uses and whether each has a default.
func variables(s string) map[string]bool {
	out := map[string]bool{}
	for _, m := range envsubstPattern.FindAllStringSubmatch(s, -1) {
		out[m[1]] = out[m[1]] || strings.Contains(m[0], ":")
	}
	return out
}

// expectSameWebhooks compares the webhooks of a generated configuration with the chart's, in
// name order and apart from the Service they call (the chart's fixed names, kustomize's prefix).
func expectSameWebhooks[W any](g Gomega, want, got []W, parts func(*W) (string, *admissionregistrationv1.WebhookClientConfig)) {
	prepare := func(ws []W) {
		for i := range ws {
			_, cfg := parts(&ws[i])
			g.Expect(cfg.Service).NotTo(BeNil())
			cfg.Service.Name, cfg.Service.Namespace = "", ""
		}
		sort.Slice(ws, func(i, j int) bool {
			a, _ := parts(&ws[i])
			b, _ := parts(&ws[j])
			return a < b
		})
	}
	prepare(want)
	prepare(got)
	g.Expect(got).To(Equal(want), "charts/capov drifted from config/webhook/manifests.yaml (make generate)")
}
