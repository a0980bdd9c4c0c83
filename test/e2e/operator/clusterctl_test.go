package operator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capov/capov/test/clusterctl"
	"github.com/capov/capov/test/e2e/node"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/images"
)

const (
	// previousRelease is the commit of CAPOV v0.2.0, the release before this tree's (charts and
	// components name its images ghcr.io/capov/<name>:0.2.0).
	previousRelease = "6a209b9"
	previousVersion = "v0.2.0"
	// thisVersion is the version this tree is released as (CHANGELOG.md).
	thisVersion = "v0.3.0"
)

// TestInstalledAndUpgradedWithClusterctl is the upgrade scenario on a real node, as an operator
// runs it (Cluster API's test/e2e/clusterctl_upgrade.go is the model): a local clusterctl
// repository holds Cluster API's own core and kubeadm components and images (its managers built
// from the module), CAPOV v0.2.0 (config/default of its commit, its images built from the
// history) and this tree released by `make release` (the components pinned by digest, the
// release's own image archives), and cert-manager's manifest with the tests' stand-in
// (test/certmanager) as cert-manager. `clusterctl init --infrastructure ovirt:v0.2.0` runs every
// controller as a pod; the product doc's example cluster runs on the simulator pod until every
// Machine is Running with a Node; `clusterctl upgrade apply` moves CAPOV to v0.3.0; then the
// Deployments run the release's images, every Machine stays Running and Ready, none is replaced
// (UIDs, providerIDs), no VM is written (the simulator's counters; CHANGELOG.md: the upgrade
// writes none) and every object reads the same in v1beta1 and v1beta2.
func TestInstalledAndUpgradedWithClusterctl(t *testing.T) {
	g := NewWithT(t)
	SetDefaultEventuallyPollingInterval(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	start := time.Now()
	root, err := envtest.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	work := os.Getenv("E2E_WORKDIR")
	if work == "" {
		work = t.TempDir()
	} else {
		work = filepath.Join(work, "clusterctl")
	}
	tag, err := images.ChartAppVersion(root)
	g.Expect(err).NotTo(HaveOccurred())
	e := &e2e{t: t, ctx: ctx, root: root, work: work, tag: tag, capiInstalled: true}
	bin, err := clusterctl.Binary(root)
	g.Expect(err).NotTo(HaveOccurred())

	rel, old := e.releases(g)
	this, err := clusterctl.DirRelease(thisVersion, rel.Dir)
	g.Expect(err).NotTo(HaveOccurred())
	previous, err := clusterctl.TreeRelease(ctx, previousVersion, old.Src)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"capov-manager", "capov-webhook"} {
		g.Expect(string(previous.Components)).To(ContainSubstring("image: "+images.DefaultRegistry+"/"+name+":"+strings.TrimPrefix(previousVersion, "v")+"\n"),
			"%s's components run the images previousImages assembles", previousVersion)
	}
	standIn := images.Spec{Name: "cert-manager-stand-in", Registry: registry, Tag: tag, Dir: root,
		Package: "./test/certmanager/cmd/cert-manager", Binary: "/cert-manager", Platforms: []string{e.platform()}}
	repo, err := clusterctl.WriteRepository(ctx, root, filepath.Join(work, "repository"), standIn.Ref(), previous, this)
	g.Expect(err).NotTo(HaveOccurred())

	// The release's images, v0.2.0's, the stand-in and Cluster API's managers under the names
	// its release gives them.
	archives := append(e.previousImages(g, old), e.releaseArchives(g, rel)...)
	specs := []images.Spec{standIn}
	for _, c := range repo.CAPIImages {
		registry, nameTag, _ := strings.Cut(c.Ref, "/cluster-api/")
		name, tag, _ := strings.Cut(nameTag, ":")
		specs = append(specs, images.Spec{Name: name, Registry: registry + "/cluster-api", Tag: tag, Dir: root, Package: c.Package,
			Binary: "/manager", Platforms: []string{e.platform()}, Version: repo.CAPIVersion})
	}
	archives = append(archives, e.buildImages(g, specs...)...)
	e.simImage = rel.Images["capov-ovirtsim"]
	t.Logf("Images ready (%s so far)", time.Since(start).Round(time.Second))

	cl, err := node.Up(ctx, node.Options{WorkDir: filepath.Join(work, "node"), Assets: assetDirs(), Out: testWriter{t}})
	g.Expect(err).NotTo(HaveOccurred())
	e.cl = cl
	defer func() {
		if t.Failed() {
			e.dumpPods()
		}
		if e.wl != nil {
			_ = e.wl.Stop()
		}
		downCtx, c := context.WithTimeout(context.Background(), 2*time.Minute)
		defer c()
		g.Expect(cl.Down(downCtx)).To(Succeed())
	}()
	for _, a := range archives {
		g.Expect(cl.ImportImage(ctx, a)).To(Succeed(), "importing %s", a)
	}
	e.cfg = cl.RestConfig()
	scheme := envtest.NewScheme()
	g.Expect(cmapi.AddToScheme(scheme)).To(Succeed())
	e.c, err = client.New(e.cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	run := func(args ...string) string {
		t.Helper()
		out, err := clusterctl.Run(ctx, bin, work, append(args, "--config", repo.Config, "--kubeconfig", cl.Kubeconfig())...)
		g.Expect(err).NotTo(HaveOccurred(), e.podSummary())
		t.Logf("clusterctl %s:\n%s", args[0], tail(out, 15))
		return out
	}

	t.Run("1 clusterctl init of the previous release: cert-manager, Cluster API, CAPOV as pods", func(t *testing.T) {
		g := NewWithT(t)
		out := run("init", "--infrastructure", "ovirt:"+previousVersion, "--wait-providers", "--wait-provider-timeout", "600")
		g.Expect(out).To(ContainSubstring("Waiting for cert-manager to be available"))
		e.expectProviders(g, previousVersion, nil)
	})
	if t.Failed() {
		return
	}
	t.Run("2 the simulator as a pod, the docs/examples provider Ready", e.provider)
	if t.Failed() {
		return
	}
	t.Run("3 the docs/examples cluster Ready under the previous release", e.cluster)
	if t.Failed() {
		return
	}
	t.Run("4 clusterctl upgrade apply: the release's images, nothing replaced, no VM written", func(t *testing.T) {
		g := NewWithT(t)
		machinesBefore := e.machineIdentities(g)
		specsBefore, err := harness.SpecSnapshot(ctx, e.c, "v1beta1")
		g.Expect(err).NotTo(HaveOccurred())
		vmsBefore, writesBefore := e.simVMIDs(g), e.simWrites(g)
		upgraded := time.Now()
		run("upgrade", "apply", "--infrastructure", ns+"/ovirt:"+thisVersion, "--wait-providers", "--wait-provider-timeout", "600")
		e.expectProviders(g, thisVersion, rel.Images)
		t.Logf("CAPOV %s runs the release's images %s after the upgrade began", thisVersion, time.Since(upgraded).Round(time.Second))
		e.expectUnchanged(g, machinesBefore, specsBefore, vmsBefore, writesBefore)
	})
	t.Logf("The upgrade scenario on the node took %s", time.Since(start).Round(time.Second))
}

// expectProviders: clusterctl's inventory names CAPOV at version and Cluster API's three
// providers; every Certificate is issued and injected; every Deployment of the providers and of
// cert-manager is rolled out and available; CAPOV's run images (when given: the release's refs
// pinned by digest).
func (e *e2e) expectProviders(g Gomega, version string, images map[string]string) {
	versions, err := clusterctl.Inventory(e.ctx, e.c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions).To(HaveKeyWithValue("infrastructure-ovirt", version))
	for _, p := range []string{"cluster-api", "bootstrap-kubeadm", "control-plane-kubeadm"} {
		g.Expect(versions).To(HaveKey(p))
	}
	g.Eventually(func() error { return clusterctl.CertificatesIssued(e.ctx, e.c, 4+8, ns, capiNS) }).
		WithTimeout(2*time.Minute).Should(Succeed(), "the stand-in issues the providers' certificates and injects their CA")
	g.Eventually(func(g Gomega) {
		deployments := &appsv1.DeploymentList{}
		g.Expect(e.c.List(e.ctx, deployments)).To(Succeed())
		seen := map[string]bool{}
		for _, d := range deployments.Items {
			if d.Namespace == "kube-system" || d.Namespace == simNS {
				continue
			}
			seen[d.Namespace+"/"+d.Name] = true
			g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation), d.Name)
			g.Expect(d.Status.UpdatedReplicas).To(Equal(ptrInt(d.Spec.Replicas)), d.Name)
			g.Expect(d.Status.AvailableReplicas).To(Equal(ptrInt(d.Spec.Replicas)), d.Name)
			g.Expect(d.Status.Replicas).To(Equal(ptrInt(d.Spec.Replicas)), "%s: old pods gone", d.Name)
		}
		for _, want := range []string{ns + "/" + manager, ns + "/" + webhook, capiNS + "/capi-controller-manager",
			"capi-kubeadm-bootstrap-system/capi-kubeadm-bootstrap-controller-manager",
			"capi-kubeadm-control-plane-system/capi-kubeadm-control-plane-controller-manager", "cert-manager/cert-manager"} {
			g.Expect(seen).To(HaveKey(want))
		}
		for name, ref := range map[string]string{manager: images["capov-manager"], webhook: images["capov-webhook"]} {
			if ref == "" {
				continue
			}
			pods := e.pods(g, name)
			g.Expect(pods).NotTo(BeEmpty())
			for _, p := range pods {
				g.Expect(p.Spec.Containers[0].Image).To(Equal(ref), "%s runs the release's image", p.Name)
				g.Expect(podReady(p)).To(BeTrue(), "%s Ready", p.Name)
			}
		}
	}).WithTimeout(5*time.Minute).Should(Succeed(), "the providers' Deployments: %s", e.podSummary())
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// machineIdentities is what an upgrade must not change: each Machine's UID and providerID.
func (e *e2e) machineIdentities(g Gomega) map[string]string {
	machines := &clusterv1.MachineList{}
	g.Expect(e.c.List(e.ctx, machines, client.InNamespace(harness.ExamplesNamespace))).To(Succeed())
	out := map[string]string{}
	for _, m := range machines.Items {
		g.Expect(m.Spec.ProviderID).NotTo(BeEmpty(), m.Name)
		out[m.Name] = fmt.Sprintf("%s %s", m.UID, m.Spec.ProviderID)
	}
	g.Expect(out).To(HaveLen(harness.ExampleMachines))
	return out
}
