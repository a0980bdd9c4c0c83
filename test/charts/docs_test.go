package charts

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// shturvalServicePatch is the part of a ShturvalServicePatch the docs examples use.
type shturvalServicePatch struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		ShturvalServiceConfigName string         `json:"shturvalServiceConfigName"`
		CustomValues              map[string]any `json:"customvalues"`
	} `json:"spec"`
}

// docsYAMLBlocks returns the ```yaml blocks of a docs page.
func docsYAMLBlocks(t *testing.T, page string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestShturvalServicePatchExamplesRender renders the SSP examples of docs/shturval.md (those of
// the product documentation) and checks their effect on the Deployments.
func TestShturvalServicePatchExamplesRender(t *testing.T) {
	ssps := map[string]shturvalServicePatch{}
	for _, block := range docsYAMLBlocks(t, "shturval.md") {
		if !strings.Contains(block, "kind: ShturvalServicePatch") {
			continue
		}
		var ssp shturvalServicePatch
		if err := yaml.UnmarshalStrict([]byte(block), &ssp); err != nil {
			t.Fatalf("docs/shturval.md: %v in\n%s", err, block)
		}
		ssps[ssp.Metadata.Name] = ssp
	}
	g := NewWithT(t)
	g.Expect(ssps).To(HaveKey("shturval-capov-resources"))
	g.Expect(ssps).To(HaveKey("shturval-capov-featuregates"))
	g.Expect(ssps).To(HaveKey("shturval-capov-disk-clone"))
	g.Expect(ssps).To(HaveKey("shturval-capov-issuer"))
	g.Expect(ssps).To(HaveKey("shturval-capov-certificates"))
	g.Expect(ssps).To(HaveKey("shturval-capov-crds-certificates"))
	for name, ssp := range ssps {
		g.Expect(ssp.APIVersion).To(Equal("ops.shturval.tech/v1beta2"), name)
		g.Expect(ssp.Spec.ShturvalServiceConfigName).To(BeElementOf(mainRelease, crdsRelease), name)
		g.Expect(ssp.Metadata.Labels).To(HaveKeyWithValue("ops.shturval.tech/ssc", ssp.Spec.ShturvalServiceConfigName), name)
	}
	g.Expect(ssps["shturval-capov-crds-certificates"].Spec.ShturvalServiceConfigName).To(Equal(crdsRelease))

	t.Run("resources, nodeSelector and manager.tag", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, ssps["shturval-capov-resources"].Spec.CustomValues)
		md, m := managerOf(t, r)
		wd, w := webhookOf(t, r)
		g.Expect(m.Image).To(HaveSuffix(":2.14.0"))
		g.Expect(w.Image).To(HaveSuffix(":2.14.0"))
		g.Expect(m.Resources.Limits.Cpu().Equal(resource.MustParse("1000m"))).To(BeTrue())
		g.Expect(m.Resources.Limits.Memory().Equal(resource.MustParse("256Mi"))).To(BeTrue())
		g.Expect(m.Resources.Requests.Cpu().Equal(resource.MustParse("50m"))).To(BeTrue())
		g.Expect(m.Resources.Requests.Memory().Equal(resource.MustParse("128Mi"))).To(BeTrue())
		g.Expect(md.Spec.Template.Spec.NodeSelector).To(Equal(map[string]string{"node-role.kubernetes.io/infra": ""}))
		g.Expect(wd.Spec.Template.Spec.NodeSelector).To(Equal(md.Spec.Template.Spec.NodeSelector))
		g.Expect(m.Args).To(ContainElement(defaultGates))
	})
	t.Run("feature gates disk-add-vm-name and disk-clone", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, ssps["shturval-capov-featuregates"].Spec.CustomValues)
		_, m := managerOf(t, r)
		g.Expect(m.Args).To(ContainElement("--feature-gates=disk-add-vm-name=true,disk-clone=false,disk-keep-template-name=true"))
	})
	t.Run("an own cert-manager issuer", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, ssps["shturval-capov-issuer"].Spec.CustomValues)
		g.Expect(r.find("Issuer", "capov-selfsigned-issuer")).To(BeNil())
		cert := get[cmv1.Certificate](t, r, "Certificate", "capov-serving-cert")
		g.Expect(cert.Spec.IssuerRef.Kind).To(Equal("ClusterIssuer"))
	})
	t.Run("certificates without cert-manager, on both services", func(t *testing.T) {
		g := NewWithT(t)
		// The docs leave the CA as a placeholder; the test puts a real one in its place.
		withCA := func(vals map[string]any, key string) map[string]any {
			b, err := yaml.Marshal(vals)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(b)).To(ContainSubstring("<output of base64 -w0 ca.crt>"), key)
			out := values(t, strings.ReplaceAll(string(b), "<output of base64 -w0 ca.crt>", sharedPKI(t).caBundle()))
			return out
		}
		main, err := render(t, "capov", withCA(ssps["shturval-capov-certificates"].Spec.CustomValues, "certificates.caBundle"), apiOVirtMachine)
		g.Expect(err).NotTo(HaveOccurred(), "no cert-manager API needed")
		g.Expect(certManagerObjects(main)).To(BeEmpty())
		crds, err := render(t, "capov-crds", withCA(ssps["shturval-capov-crds-certificates"].Spec.CustomValues, "conversion.caBundle"))
		g.Expect(err).NotTo(HaveOccurred())
		for _, o := range append(append([]*unstructured.Unstructured{}, main.objs...), crds.objs...) {
			g.Expect(o.GetAnnotations()).NotTo(HaveKey(injectCAFrom), o.GetKind()+"/"+o.GetName())
		}
		vwc := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, main, "ValidatingWebhookConfiguration", "capov-validating-webhook-configuration")
		crd := get[apiextensionsv1.CustomResourceDefinition](t, crds, "CustomResourceDefinition", "ovirtmachines.infrastructure.cluster.x-k8s.io")
		g.Expect(vwc.Webhooks[0].ClientConfig.CABundle).To(Equal(sharedPKI(t).caPEM))
		g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).To(Equal(sharedPKI(t).caPEM))
	})
	t.Run("disk-clone for another storage domain", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, ssps["shturval-capov-disk-clone"].Spec.CustomValues)
		_, m := managerOf(t, r)
		_, w := webhookOf(t, r)
		want := "--feature-gates=disk-add-vm-name=false,disk-clone=true,disk-keep-template-name=true"
		g.Expect(m.Args).To(ContainElement(want))
		g.Expect(w.Args).To(ContainElement(want))
	})
}

// freeForm are objects documented as one value although the schema lists their fields.
var freeForm = map[string]bool{"resources": true, "webhook.resources": true, "certManager.issuerRef": true}

// schemaPaths lists the dotted paths of every value the schema describes, down to the objects
// whose content is free-form (resources, affinity, labels, ...).
func schemaPaths(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "charts", "capov", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := yaml.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(prefix string, node map[string]any)
	walk = func(prefix string, node map[string]any) {
		props, _ := node["properties"].(map[string]any)
		for name, p := range props {
			path := strings.TrimPrefix(prefix+"."+name, ".")
			if path == "global" {
				continue
			}
			child, _ := p.(map[string]any)
			if _, nested := child["properties"]; nested && !freeForm[path] {
				walk(path, child)
				continue
			}
			out = append(out, path)
		}
	}
	walk("", schema)
	sort.Strings(out)
	return out
}

// TestEveryValueIsDocumented keeps the values tables of the docs complete.
func TestEveryValueIsDocumented(t *testing.T) {
	paths := schemaPaths(t)
	g := NewWithT(t)
	g.Expect(paths).To(ContainElements("manager.tag", "featureGates.disk-clone", "metrics.serviceMonitor.labels", "webhook.replicas"))
	for _, page := range []string{"shturval.md", "helm.md"} {
		b, err := os.ReadFile(filepath.Join(root, "docs", page))
		g.Expect(err).NotTo(HaveOccurred())
		for _, p := range paths {
			g.Expect(string(b)).To(ContainSubstring("`"+p+"`"), "docs/%s does not document the value %s", page, p)
		}
	}
	// values.yaml has a comment for each top-level key and the schema knows every key.
	vb, err := os.ReadFile(filepath.Join(root, "charts", "capov", "values.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var vals map[string]any
	g.Expect(yaml.Unmarshal(vb, &vals)).To(Succeed())
	for k := range vals {
		g.Expect(paths).To(ContainElement(HavePrefix(k)), "values.yaml key %s is missing from the schema", k)
	}
}
