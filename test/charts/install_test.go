package charts

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// restGetter adapts a rest.Config to the RESTClientGetter the Helm SDK wants: no kubeconfig
// file and no discovery cache on disk (a fresh in-memory cache per Helm action, so every
// action sees the APIs the previous one installed).
type restGetter struct {
	cfg       *rest.Config
	namespace string
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(g.cfg)
	if err != nil {
		return nil, err
	}
	return memory.NewMemCacheClient(dc), nil
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	dc, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	return restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(dc), dc, nil), nil
}

// ToRawKubeConfigLoader only serves the namespace: Helm's kube client takes the default
// namespace of its objects from it.
func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(),
		&clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: g.namespace}})
}

// warnings collects the API server's warnings (for example Pod Security admission's).
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// helmInstaller runs Helm actions against the envtest API server.
type helmInstaller struct {
	t        *testing.T
	cfg      *rest.Config
	warnings *warnings
}

// newHelmInstaller runs Helm actions against cfg's API server and collects its warnings.
func newHelmInstaller(t *testing.T, cfg *rest.Config) *helmInstaller {
	w := &warnings{}
	c := rest.CopyConfig(cfg)
	c.WarningHandlerWithContext = w
	return &helmInstaller{t: t, cfg: c, warnings: w}
}

func (h *helmInstaller) config() *action.Configuration {
	h.t.Helper()
	ac := &action.Configuration{}
	getter := &restGetter{cfg: h.cfg, namespace: namespace}
	if err := ac.Init(getter, namespace, "secret", func(format string, v ...any) { h.t.Logf("helm: "+format, v...) }); err != nil {
		h.t.Fatalf("initializing Helm: %v", err)
	}
	return ac
}

func (h *helmInstaller) install(release, chartName string, vals map[string]any) (*release.Release, error) {
	h.t.Helper()
	inst := action.NewInstall(h.config())
	inst.ReleaseName = release
	inst.Namespace = namespace
	// No Wait: nothing runs pods in envtest, only API acceptance is tested.
	inst.Timeout = time.Minute
	return inst.Run(loadChart(h.t, chartName), vals)
}

func (h *helmInstaller) upgrade(release, chartName string, vals map[string]any) (*release.Release, error) {
	h.t.Helper()
	up := action.NewUpgrade(h.config())
	up.Namespace = namespace
	up.Timeout = time.Minute
	return up.Run(release, loadChart(h.t, chartName), vals)
}

func (h *helmInstaller) uninstall(release string) (*release.UninstallReleaseResponse, error) {
	h.t.Helper()
	un := action.NewUninstall(h.config())
	un.Timeout = time.Minute
	return un.Run(release)
}

// manifestObjects parses a release's manifest.
func manifestObjects(t *testing.T, rel *release.Release) []*unstructured.Unstructured {
	t.Helper()
	objs, err := splitManifest(rel.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// exists reports whether the object is in the API server.
func exists(ctx context.Context, c client.Client, o *unstructured.Unstructured) (bool, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(o.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}, u)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return false, nil
	}
	return err == nil, err
}

// helmReleases lists the Helm release Secrets of the namespace.
func helmReleases(ctx context.Context, c client.Client) ([]string, error) {
	list := &corev1.SecretList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm"}); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Name)
	}
	return out, nil
}

// TestChartsInstallUpgradeAndUninstallInARealAPIServer walks the Shturval order on a real
// kube-apiserver: the main chart refuses to install before the CRD chart; the CRD chart installs
// CRDs that convert through the main chart's webhook Service; the main chart refuses CRDs that
// convert through another namespace's; the CRD chart, then the main chart, install; an upgrade changes the feature gates; uninstalling removes
// everything but the CRDs. The steps share the cluster, so they run in this order.
func TestChartsInstallUpgradeAndUninstallInARealAPIServer(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := e.Client
	h := newHelmInstaller(t, e.Config)
	w := h.warnings

	// The operator namespace warns about anything short of the restricted Pod Security Standard.
	g := NewWithT(t)
	g.Expect(ensureOperatorNamespace(ctx, c)).To(Succeed())

	var crdsRel, mainRel *release.Release

	ok := t.Run("the main chart without the CRDs fails with the instructions", func(t *testing.T) {
		g := NewWithT(t)
		_, err := h.install(mainRelease, "capov", nil)
		g.Expect(err).To(MatchError(ContainSubstring(
			"switch shturval-capov-crds to auto (or install the capov-crds chart) first, then shturval-capov")))
		g.Expect(helmReleases(ctx, c)).To(BeEmpty(), "nothing is recorded or created")
		g.Expect(exists(ctx, c, deploymentRef(managerDeployment))).To(BeFalse())
	})
	ok = ok && t.Run("the CRD chart installs the CRDs", func(t *testing.T) {
		g := NewWithT(t)
		var err error
		crdsRel, err = h.install(crdsRelease, "capov-crds", nil)
		g.Expect(err).NotTo(HaveOccurred())
		objs := manifestObjects(t, crdsRel)
		g.Expect(objs).To(HaveLen(len(capovCRDNames)))
		for _, o := range objs {
			g.Expect(exists(ctx, c, o)).To(BeTrue(), o.GetName())
		}
		// Helm reads the API list at install time: wait until the new kinds are served.
		g.Eventually(func() bool {
			dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
			if err != nil {
				return false
			}
			res, err := dc.ServerResourcesForGroupVersion("infrastructure.cluster.x-k8s.io/v1beta2")
			return err == nil && len(res.APIResources) >= 4
		}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(BeTrue())
		// Every CRD converts through the webhook Service of the capov release in the operator
		// namespace, with the CA of its certificate injected by cert-manager.
		for _, o := range objs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd)).To(Succeed())
			want := wantConversion(namespace, "capov-webhook-service")
			want.Webhook.ClientConfig.Service.Port = ptr.To[int32](443) // the API server's default
			g.Expect(crd.Spec.Conversion).To(Equal(want), o.GetName())
			g.Expect(crd.Annotations).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", namespace+"/capov-serving-cert"), o.GetName())
		}
	})
	ok = ok && t.Run("the main chart refuses CRDs that convert through another release's webhook", func(t *testing.T) {
		g := NewWithT(t)
		_, err := h.upgrade(crdsRelease, "capov-crds", values(t, `conversion: {webhookNamespace: capov-other}`))
		g.Expect(err).NotTo(HaveOccurred())
		_, err = h.install(mainRelease, "capov", nil)
		g.Expect(err).To(MatchError(SatisfyAll(
			ContainSubstring("converts through Service capov-other/capov-webhook-service"),
			ContainSubstring("this release serves conversion at capov-system/capov-webhook-service"),
			ContainSubstring("Set the capov-crds values conversion.webhookNamespace=capov-system"),
		)))
		g.Expect(helmReleases(ctx, c)).NotTo(ContainElement(HavePrefix("sh.helm.release.v1."+mainRelease+".v")), "nothing of the main chart is recorded")
		g.Expect(exists(ctx, c, deploymentRef(managerDeployment))).To(BeFalse())

		// Helm reuses the last values when an upgrade passes none: name the namespace again.
		rel, err := h.upgrade(crdsRelease, "capov-crds", values(t, `conversion: {webhookNamespace: `+namespace+`}`))
		g.Expect(err).NotTo(HaveOccurred())
		crdsRel = rel
	})
	ok = ok && t.Run("the cluster templates are accepted by the CRD schemas", func(t *testing.T) {
		// Before the main chart: its webhook configurations (failurePolicy Fail, no webhook pods
		// here) would reject every OVirt* request afterwards.
		for _, file := range clusterTemplates {
			generatedCluster(t, file) // strict decoding into the Go types first
			b, err := os.ReadFile(filepath.Join(root, file))
			if err != nil {
				t.Fatal(err)
			}
			objs, err := parseYAMLDocs([]byte(envsubst(t, string(b), templateVars)))
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if o.GetKind() == "InClusterIPPool" {
					continue // no IPAM CRDs here: TestEveryFlavorIsAcceptedByTheAPIServer checks it against them
				}
				if err := c.Create(ctx, o, client.DryRunAll); err != nil {
					t.Errorf("%s: %s %s rejected: %v", file, o.GetKind(), o.GetName(), err)
				}
			}
		}
		// The control: the schema does reject a bad OVirtMachineTemplate.
		g := NewWithT(t)
		bad := &unstructured.Unstructured{}
		bad.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta2")
		bad.SetKind("OVirtMachineTemplate")
		bad.SetNamespace("default")
		bad.SetName("bad")
		g.Expect(unstructured.SetNestedMap(bad.Object, map[string]any{
			"provider": "p", "ovirtcluster": "c", "template": "t", "vmtype": "mainframe",
		}, "spec", "template", "spec")).To(Succeed())
		g.Expect(c.Create(ctx, bad, client.DryRunAll)).To(MatchError(ContainSubstring("vmtype")))
	})
	ok = ok && t.Run("the main chart installs and the API server accepts every object", func(t *testing.T) {
		g := NewWithT(t)
		w.take()
		var err error
		mainRel, err = h.install(mainRelease, "capov", nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mainRel.Info.Status).To(Equal(release.StatusDeployed))
		objs := manifestObjects(t, mainRel)
		var kinds []string
		for _, o := range objs {
			g.Expect(exists(ctx, c, o)).To(BeTrue(), o.GetKind()+"/"+o.GetName())
			kinds = append(kinds, o.GetKind())
		}
		g.Expect(kinds).To(ContainElement("ServiceMonitor"), "the ServiceMonitor CRD is served here")
		g.Expect(kinds).To(ContainElements("Certificate", "Issuer", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"))
		for _, msg := range w.take() {
			g.Expect(msg).NotTo(ContainSubstring("PodSecurity"), "the Deployments violate the restricted Pod Security Standard")
		}

		sm := &unstructured.Unstructured{}
		sm.SetAPIVersion("monitoring.coreos.com/v1")
		sm.SetKind("ServiceMonitor")
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "capov-metrics-monitor"}, sm)).To(Succeed())
		g.Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "shturval-metrics"))
	})
	ok = ok && t.Run("the Pod Security warning check would catch a violation", func(t *testing.T) {
		// The control for the previous step: a Deployment without a security context warns.
		g := NewWithT(t)
		wc, err := client.New(h.cfg, client.Options{Scheme: e.Scheme})
		g.Expect(err).NotTo(HaveOccurred())
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "insecure", Namespace: namespace},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "insecure"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "insecure"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
				},
			},
		}
		w.take()
		g.Expect(wc.Create(ctx, d, client.DryRunAll)).To(Succeed())
		g.Expect(strings.Join(w.take(), "\n")).To(ContainSubstring(`would violate PodSecurity "restricted`))
	})
	ok = ok && t.Run("an upgrade with other feature gates changes the Deployment arguments", func(t *testing.T) {
		g := NewWithT(t)
		rel, err := h.upgrade(mainRelease, "capov", values(t, `
featureGates: {disk-add-vm-name: true, disk-clone: true}
manager: {tag: "2.14.0"}
`))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rel.Version).To(Equal(2))
		want := "--feature-gates=disk-add-vm-name=true,disk-clone=true,disk-keep-template-name=true"
		for _, name := range []string{managerDeployment, webhookDeployment} {
			d := &appsv1.Deployment{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d)).To(Succeed())
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement(want), name)
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(defaultGates), name)
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix(":2.14.0"), name)
		}
		mainRel = rel
	})
	ok = ok && t.Run("uninstalling removes everything but the CRDs", func(t *testing.T) {
		g := NewWithT(t)
		_, err := h.uninstall(mainRelease)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := h.uninstall(crdsRelease)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Info).To(ContainSubstring("kept due to the resource policy"))

		for _, o := range manifestObjects(t, mainRel) {
			g.Eventually(func() (bool, error) { return exists(ctx, c, o) }).WithTimeout(30*time.Second).
				Should(BeFalse(), o.GetKind()+"/"+o.GetName())
		}
		for _, o := range manifestObjects(t, crdsRel) {
			g.Expect(exists(ctx, c, o)).To(BeTrue(), "CRD %s must be kept (helm.sh/resource-policy: keep)", o.GetName())
		}
		g.Expect(helmReleases(ctx, c)).To(BeEmpty())
	})
	if !ok {
		t.Log("stopped at the first failed step: the later steps depend on it")
	}
}

// ensureOperatorNamespace creates the operator namespace, labelled to warn about and enforce
// the restricted Pod Security Standard, unless another test already did.
func ensureOperatorNamespace(ctx context.Context, c client.Client) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func deploymentRef(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}
