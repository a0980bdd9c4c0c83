package crdmigration

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/app/manager"
	"github.com/capov/capov/test/envtest"
)

const (
	timeout  = 60 * time.Second
	interval = 200 * time.Millisecond
	ns       = "default"
)

// objects are one object of each kind as a v1beta1 client wrote them before v1beta2 existed:
// what the migration must keep.
var objects = []string{`
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OVirtProvider
metadata: {name: prod}
spec:
  engine: https://engine.example.com/ovirt-engine/api
  credentialsSecretName: prod-credentials
  storagedomainname: data
  tls: {insecure: true}
`, `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OVirtCluster
metadata: {name: c1, namespace: default}
spec:
  controlPlaneEndpoint: {host: 10.0.0.10, port: 6443}
`, `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OVirtMachine
metadata: {name: m1, namespace: default}
spec:
  provider: prod
  template: rhcos-4.14
  ovirtcluster: Default
  osdisksizegb: 80
  providerID: ovirt://6f1c2a3e-0000-4000-8000-000000000001
  cpu: {sockets: 1, cores: 4, threads: 1}
  memory: {sizemb: 8192, guaranteedmb: 4096}
  nics: [{vnicprofile: ovirtmgmt}]
`, `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OVirtMachineTemplate
metadata: {name: t1, namespace: default}
spec:
  template:
    metadata:
      labels: {pool: workers}
    spec:
      provider: prod
      template: rhcos-4.14
      ovirtcluster: Default
      cpu: {sockets: 2, cores: 2, threads: 1}
`}

// TestStorageMigrationLeavesOnlyV1Beta2Stored installs the v1beta1-only CRDs of the last
// release before v1beta2 (testdata, from commit 5c1cf2a), creates one object of each kind,
// upgrades the CRDs to the current ones (storedVersions [v1beta1 v1beta2]) and runs the CRD
// migrator as the manager wires it. Afterwards every CRD has storedVersions [v1beta2] and
// every object reads as v1beta2 with its spec intact.
//
// envtest runs no conversion webhook here: the API server reads v1beta1-stored objects as
// v1beta2 by swapping the apiVersion (conversion strategy None). The spec fields compared
// below have the same JSON in both versions, so the comparison holds; the conversion itself is
// tested with the conversion webhook elsewhere.
func TestStorageMigrationLeavesOnlyV1Beta2Stored(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := envtest.Start(ctx, envtest.Options{
		WithoutOurCRDs: true, WithoutCAPICRDs: true,
		ExtraCRDPaths: []string{filepath.Join("testdata", "v1beta1-crds")},
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = env.Stop() }()
	c := env.Client

	var created []*unstructured.Unstructured
	for _, doc := range objects {
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
		g.Expect(c.Create(ctx, u)).To(Succeed(), "creating %s as v1beta1", u.GetKind())
		created = append(created, u)
	}

	// Upgrade: the current CRDs (v1beta1 served, v1beta2 served and stored).
	root, err := envtest.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(HaveLen(8), "the four original kinds and OVirtClusterTemplate, OVirtHostDeviceClaim, OVirtRemediation, OVirtRemediationTemplate")
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		next := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(yaml.Unmarshal(b, next)).To(Succeed())
		if len(next.Spec.Versions) == 1 {
			// A kind new in v1beta2 (OVirtClusterTemplate, the GPU and remediation kinds): the
			// upgrade installs it; it has nothing stored in v1beta1 to migrate.
			g.Expect(next.Spec.Versions[0].Name).To(Equal("v1beta2"), next.Name)
			g.Expect(c.Create(ctx, next)).To(Succeed())
			continue
		}
		names = append(names, next.Name)
		g.Eventually(func() error {
			cur := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: next.Name}, cur); err != nil {
				return err
			}
			cur.Spec = next.Spec
			cur.Labels = next.Labels
			return c.Update(ctx, cur)
		}, timeout, interval).Should(Succeed())
	}
	for _, name := range names {
		g.Eventually(func(g Gomega) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1beta1", "v1beta2"}), name)
			g.Expect(crd.Status.AcceptedNames.Kind).NotTo(BeEmpty())
		}, timeout, interval).Should(Succeed())
	}

	// The migrator as the manager runs it (its scheme, its wiring, its RBAC-relevant calls).
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: manager.NewScheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(manager.NewCRDMigrator(mgr.GetClient(), mgr.GetAPIReader(), nil).
		SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: ptr.To(true)})).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	for _, name := range names {
		g.Eventually(func(g Gomega) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1beta2"}), name)
		}, timeout, interval).Should(Succeed())
	}

	// Every object reads as v1beta2 with the spec it was created with.
	for _, want := range created {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(schema.GroupVersionKind{Group: infrav1.GroupVersion.Group, Version: "v1beta2", Kind: want.GetKind()})
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(want), got)).To(Succeed())
		g.Expect(got.GetAPIVersion()).To(Equal(infrav1.GroupVersion.String()))
		wantSpec := want.Object["spec"]
		if want.GetKind() == "OVirtCluster" {
			// The v1beta2 schema defaults controlPlaneAntiAffinity: the API server adds it when
			// it reads (and so rewrites) the object; nothing else changes.
			spec := maps.Clone(wantSpec.(map[string]any))
			spec["controlPlaneAntiAffinity"] = "Soft"
			wantSpec = spec
		}
		g.Expect(got.Object["spec"]).To(Equal(wantSpec), "spec of %s %s", want.GetKind(), want.GetName())
	}
	typed := &infrav1.OVirtMachine{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m1"}, typed)).To(Succeed())
	g.Expect(typed.Spec.ProviderID).To(Equal("ovirt://6f1c2a3e-0000-4000-8000-000000000001"))
	g.Expect(typed.Spec.OSDiskSizeGB).To(BeEquivalentTo(80))
	tpl := &infrav1.OVirtMachineTemplate{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "t1"}, tpl)).To(Succeed())
	g.Expect(tpl.Spec.Template.ObjectMeta.Labels).To(HaveKeyWithValue("pool", "workers"))
	p := &infrav1.OVirtProvider{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "prod"}, p)).To(Succeed())
	g.Expect(p.Spec.Engine).To(Equal("https://engine.example.com/ovirt-engine/api"))
}
