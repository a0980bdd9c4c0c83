package charts

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

const (
	// namespace is the operator namespace of the product documentation.
	namespace = "capov-system"
	// Release names the Shturval platform uses.
	crdsRelease = "shturval-capov-crds"
	mainRelease = "shturval-capov"

	// kubeVersion is what rendering tests pretend to run against (the envtest version); without
	// it the Helm SDK assumes Kubernetes v1.20 and the charts' kubeVersion rejects it.
	kubeVersion = "v1.36.3"
)

// API versions the capov chart checks for.
const (
	apiOVirtMachine   = "infrastructure.cluster.x-k8s.io/v1beta2/OVirtMachine"
	apiCertificate    = "cert-manager.io/v1/Certificate"
	apiServiceMonitor = "monitoring.coreos.com/v1/ServiceMonitor"
)

// prerequisites are the APIs whose absence the capov chart's preflight refuses.
var prerequisites = []string{apiOVirtMachine, apiCertificate}

// loadChart loads charts/<name>.
func loadChart(t *testing.T, name string) *chart.Chart {
	t.Helper()
	c, err := loader.Load(filepath.Join(root, "charts", name))
	if err != nil {
		t.Fatalf("loading chart %s: %v", name, err)
	}
	return c
}

// rendered is the output of one client-side rendering.
type rendered struct {
	objs  []*unstructured.Unstructured
	notes string
}

// render renders a chart as `helm template` does, with the given values and the given API
// versions in .Capabilities (nothing else than the built-in ones is assumed to exist).
func render(t *testing.T, chartName string, vals map[string]any, apiVersions ...string) (*rendered, error) {
	t.Helper()
	return renderOn(t, chartName, kubeVersion, vals, apiVersions...)
}

// renderOn renders like render, pretending the cluster runs Kubernetes version kv.
func renderOn(t *testing.T, chartName, kv string, vals map[string]any, apiVersions ...string) (*rendered, error) {
	t.Helper()
	return renderInto(t, chartName, kv, namespace, vals, apiVersions...)
}

// renderInto renders like renderOn, into release namespace ns.
func renderInto(t *testing.T, chartName, kv, ns string, vals map[string]any, apiVersions ...string) (*rendered, error) {
	t.Helper()
	inst := action.NewInstall(&action.Configuration{})
	inst.ClientOnly = true
	inst.DryRun = true
	inst.Replace = true
	inst.ReleaseName = mainRelease
	if chartName == "capov-crds" {
		inst.ReleaseName = crdsRelease
	}
	inst.Namespace = ns
	parsed, err := chartutil.ParseKubeVersion(kv)
	if err != nil {
		t.Fatal(err)
	}
	inst.KubeVersion = parsed
	inst.APIVersions = apiVersions
	rel, err := inst.Run(loadChart(t, chartName), vals)
	if err != nil {
		return nil, err
	}
	objs, err := splitManifest(rel.Manifest)
	if err != nil {
		t.Fatalf("parsing the rendered manifest: %v\n%s", err, rel.Manifest)
	}
	return &rendered{objs: objs, notes: rel.Info.Notes}, nil
}

// mustRender renders the capov chart with its prerequisites present (plus extra API versions)
// and fails the test on an error.
func mustRender(t *testing.T, vals map[string]any, extraAPIVersions ...string) *rendered {
	t.Helper()
	r, err := render(t, "capov", vals, append(append([]string{}, prerequisites...), extraAPIVersions...)...)
	if err != nil {
		t.Fatalf("rendering capov: %v", err)
	}
	return r
}

// splitManifest parses a multi-document manifest in Helm's install order.
func splitManifest(manifest string) ([]*unstructured.Unstructured, error) {
	docs := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var out []*unstructured.Unstructured
	for _, k := range keys {
		doc := strings.TrimSpace(docs[k])
		if doc == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, fmt.Errorf("%w in\n%s", err, doc)
		}
		if len(u.Object) == 0 {
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

// find returns the rendered object of a kind and name, or nil.
func (r *rendered) find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// kinds lists the rendered objects as "Kind/name".
func (r *rendered) kinds() []string {
	var out []string
	for _, o := range r.objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	sort.Strings(out)
	return out
}

// get returns the rendered object of a kind and name converted to a typed object; unknown
// fields fail the test (they would be typos in a template).
func get[T any, PT interface {
	*T
	runtime.Object
}](t *testing.T, r *rendered, kind, name string) PT {
	t.Helper()
	u := r.find(kind, name)
	if u == nil {
		t.Fatalf("%s %s not rendered; rendered: %v", kind, name, r.kinds())
	}
	var obj PT = new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
		t.Fatalf("%s %s does not decode strictly: %v", kind, name, err)
	}
	return obj
}

// values parses YAML into chart values.
func values(t *testing.T, y string) map[string]any {
	t.Helper()
	out := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &out); err != nil {
		t.Fatalf("parsing values: %v", err)
	}
	return out
}
