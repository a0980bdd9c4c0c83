package operator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/clusterctl"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/images"
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
	t.Cleanup(cancel) // after the node's teardown (e.up), which dumps the pods with ctx
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
	this, err := clusterctl.DirRelease(ThisVersion, rel.Dir)
	g.Expect(err).NotTo(HaveOccurred())
	previous, err := clusterctl.TreeRelease(ctx, PreviousVersion, old.Src)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"capov-manager", "capov-webhook"} {
		g.Expect(string(previous.Components)).To(ContainSubstring("image: "+images.DefaultRegistry+"/"+name+":"+strings.TrimPrefix(PreviousVersion, "v")+"\n"),
			"%s's components run the images previousImages assembles", PreviousVersion)
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

	scheme := envtest.NewScheme()
	g.Expect(cmapi.AddToScheme(scheme)).To(Succeed())
	e.up(g, archives, scheme)
	run := func(g Gomega, args ...string) string {
		out, err := clusterctl.Run(ctx, bin, work, append(args, "--config", repo.Config, "--kubeconfig", e.cl.Kubeconfig())...)
		g.Expect(err).NotTo(HaveOccurred(), e.podSummary())
		t.Logf("clusterctl %s:\n%s", args[0], tail(out, 15))
		return out
	}

	t.Run("1 clusterctl init of the previous release: cert-manager, Cluster API, CAPOV as pods", func(t *testing.T) {
		g := NewWithT(t)
		out := run(g, "init", "--infrastructure", "ovirt:"+PreviousVersion, "--wait-providers", "--wait-provider-timeout", "600")
		g.Expect(out).To(ContainSubstring("Waiting for cert-manager to be available"))
		e.expectProviders(g, PreviousVersion, nil)
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
		run(g, "upgrade", "apply", "--infrastructure", ns+"/ovirt:"+ThisVersion, "--wait-providers", "--wait-provider-timeout", "600")
		e.expectProviders(g, ThisVersion, rel.Images)
		t.Logf("CAPOV %s runs the release's images %s after the upgrade began", ThisVersion, time.Since(upgraded).Round(time.Second))
		e.expectUnchanged(g, machinesBefore, specsBefore, vmsBefore, writesBefore)
	})
	if t.Failed() {
		return
	}
	t.Run("5 clusterctl move to a second management cluster: everything arrives, no VM written", func(t *testing.T) { e.move(t, bin, repo) })
	t.Logf("The upgrade scenario on the node took %s", time.Since(start).Round(time.Second))
}

// credentialsNamespace is where the examples' credentials Secret and the provider's move copy of
// it live (docs/examples/01-credentials.yaml; clusterctl's provider namespace).
const credentialsNamespace = "capov-system"

// move runs `clusterctl move` of the examples' namespace from the upgraded node to a second
// management cluster that `clusterctl init` gave this version: an API server of the test process
// (envtest) where nothing runs but the cert-manager stand-in as a process. clusterctl move itself
// needs no controller in the target: it pauses the Cluster in the source (the source's
// controllers, which run, must then leave the VMs alone), creates the objects in the target at
// their storage version (v1beta2: no conversion is called), and deletes them in the source. No
// process serves the target's admission webhooks: their configurations are deleted first.
// Checked: the Cluster, MachineDeployment, MachineSet, Machines, OVirtCluster, OVirtMachines,
// OVirtMachineTemplate and the Secrets linked to the Cluster arrive, unpaused, and are gone from
// the source; the cluster-scoped OVirtProvider (its CRD has clusterctl's move-hierarchy label)
// arrives with the move copy of the credentials Secret it owns, and clusterctl leaves both in
// the source, as it does every cluster-scoped hierarchy; the credentials Secret itself stays in
// the source only (it has no owner: the target's manager recreates it from the copy,
// pkg/controllers/provider_movecopy.go); no VM is written, no VM is deleted.
func (e *e2e) move(t *testing.T, bin string, repo *clusterctl.Repository) {
	g := NewWithT(t)
	start := time.Now()
	before := e.movable(g, e.c)
	// clusterctl moves a Secret only when a moved object owns it, its name is
	// <cluster>-<purpose> (kubeconfig, ca, ...) or it has the clusterctl.cluster.x-k8s.io/move
	// label: the examples' bootstrap data Secrets (docs/examples/04-bootstrap-data.yaml) have the
	// label, so a Machine the target creates from the MachineDeployment finds its bootstrap data.
	for _, name := range []string{"demo-bootstrap-data", "demo-bootstrap-ignition"} {
		g.Expect(before).To(HaveKey(keyOf("Secret", harness.ExamplesNamespace, name)))
	}
	g.Expect(before).To(HaveKey(keyOf("Secret", credentialsNamespace, "capovp-ovirt-demo-move")), "the upgraded manager keeps a move copy of the credentials")
	vmsBefore, writesBefore := e.simVMIDs(g), e.simWrites(g)

	target, err := envtest.Start(e.ctx, envtest.Options{WithoutCAPICRDs: true, WithoutOurCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = target.Stop() })
	g.Expect(cmapi.AddToScheme(target.Scheme)).To(Succeed())
	kc, err := target.Kubeconfig("target")
	g.Expect(err).NotTo(HaveOccurred())
	dir := filepath.Join(e.work, "target")
	g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	kubeconfig := filepath.Join(dir, "kubeconfig")
	g.Expect(os.WriteFile(kubeconfig, kc, 0o600)).To(Succeed())
	standIn, err := clusterctl.BuildStandIn(e.ctx, e.root, dir)
	g.Expect(err).NotTo(HaveOccurred())
	stop := clusterctl.StartStandInWhenCRDsExist(e.ctx, target.Client, standIn, kubeconfig, filepath.Join(dir, "cert-manager.log"), func(err error) { t.Error(err) })
	t.Cleanup(func() {
		if logs := stop(); t.Failed() {
			t.Logf("the target's cert-manager stand-in:\n%s", tail(logs, 40))
		}
	})
	run := func(args ...string) string {
		t.Helper()
		out, err := clusterctl.Run(e.ctx, bin, e.work, append(args, "--config", repo.Config)...)
		g.Expect(err).NotTo(HaveOccurred())
		return out
	}
	run("init", "--infrastructure", "ovirt:"+ThisVersion, "--kubeconfig", kubeconfig)
	versions, err := clusterctl.Inventory(e.ctx, target.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions).To(HaveKeyWithValue("infrastructure-ovirt", ThisVersion))
	g.Expect(target.Client.DeleteAllOf(e.ctx, &admissionregistrationv1.MutatingWebhookConfiguration{})).To(Succeed())
	g.Expect(target.Client.DeleteAllOf(e.ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Succeed())
	initialized := time.Now()

	out := run("move", "--namespace", harness.ExamplesNamespace, "--kubeconfig", e.cl.Kubeconfig(), "--to-kubeconfig", kubeconfig)
	t.Logf("clusterctl move took %s (the target initialized in %s):\n%s", time.Since(initialized).Round(100*time.Millisecond),
		initialized.Sub(start).Round(time.Second), tail(out, 12))

	after := e.movable(g, target.Client)
	for key := range before {
		g.Expect(after).To(HaveKey(key), "moved to the target")
	}
	g.Expect(after[keyOf("Cluster", harness.ExamplesNamespace, "demo")]).To(BeFalse(), "the Cluster is unpaused in the target")
	g.Expect(after).To(HaveLen(len(before)), "nothing else is in the target")
	// clusterctl copies a cluster-scoped object and what it owns (the OVirtProvider and its move
	// copy) and deletes neither in the source: other clusters may use them (mover.go,
	// deleteSourceObject). Everything else goes.
	copied := []string{keyOf("OVirtProvider", "", "ovirt-demo"), keyOf("Secret", credentialsNamespace, "capovp-ovirt-demo-move")}
	left := e.movable(g, e.c)
	g.Expect(left).To(HaveLen(len(copied)), "nothing else is left in the source: %v", left)
	for _, key := range copied {
		g.Expect(left).To(HaveKey(key))
	}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: credentialsNamespace, Name: "ovirt-demo-capov-provider-secret"}, &corev1.Secret{})).
		To(Succeed(), "the credentials Secret stays in the source")
	g.Expect(target.Client.Get(e.ctx, client.ObjectKey{Namespace: credentialsNamespace, Name: "ovirt-demo-capov-provider-secret"}, &corev1.Secret{})).
		To(Satisfy(apierrors.IsNotFound), "the credentials Secret itself is not carried: the target's manager recreates it from the copy")
	p := &infrav1.OVirtProvider{}
	g.Expect(target.Client.Get(e.ctx, client.ObjectKey{Name: "ovirt-demo"}, p)).To(Succeed())
	copies := &corev1.SecretList{}
	g.Expect(target.Client.List(e.ctx, copies, client.InNamespace(credentialsNamespace), client.HasLabels{infrav1.CredentialsMoveCopyLabel})).To(Succeed())
	g.Expect(copies.Items).To(HaveLen(1))
	g.Expect(slices.ContainsFunc(copies.Items[0].OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == p.UID })).
		To(BeTrue(), "the move copy is owned by the moved OVirtProvider (clusterctl rewrote the UID): %v", copies.Items[0].OwnerReferences)
	g.Consistently(func(g Gomega) {
		g.Expect(e.simVMIDs(g)).To(Equal(vmsBefore), "the source's controllers, which still run, delete no VM")
		g.Expect(e.simWrites(g)).To(Equal(writesBefore), "clusterctl move writes no VM")
	}).WithTimeout(15 * time.Second).Should(Succeed())
	t.Logf("clusterctl move of %d objects to a freshly initialized management cluster took %s in all", len(before), time.Since(start).Round(time.Second))
}

// movable returns what clusterctl move is to carry, by kind/namespace/name: the examples'
// Cluster API and CAPOV objects, the Secrets of their namespace, the OVirtProviders and the
// move copies of credentials in the provider namespace. A Cluster's value is spec.paused.
func (e *e2e) movable(g Gomega, c client.Client) map[string]bool {
	out := map[string]bool{}
	in := client.InNamespace(harness.ExamplesNamespace)
	clusters := &clusterv1.ClusterList{}
	g.Expect(c.List(e.ctx, clusters, in)).To(Succeed())
	for _, o := range clusters.Items {
		out[keyOf("Cluster", o.Namespace, o.Name)] = o.Spec.Paused != nil && *o.Spec.Paused
	}
	lists := map[string]client.ObjectList{
		"Machine": &clusterv1.MachineList{}, "MachineSet": &clusterv1.MachineSetList{}, "MachineDeployment": &clusterv1.MachineDeploymentList{},
		"OVirtCluster": &infrav1.OVirtClusterList{}, "OVirtMachine": &infrav1.OVirtMachineList{}, "OVirtMachineTemplate": &infrav1.OVirtMachineTemplateList{},
		"Secret": &corev1.SecretList{},
	}
	for kind, l := range lists {
		g.Expect(c.List(e.ctx, l, in)).To(Succeed(), kind)
		items, err := meta.ExtractList(l)
		g.Expect(err).NotTo(HaveOccurred())
		for _, item := range items {
			o, err := meta.Accessor(item)
			g.Expect(err).NotTo(HaveOccurred())
			out[keyOf(kind, o.GetNamespace(), o.GetName())] = false
		}
	}
	providers := &infrav1.OVirtProviderList{}
	g.Expect(c.List(e.ctx, providers)).To(Succeed())
	for _, o := range providers.Items {
		out[keyOf("OVirtProvider", "", o.Name)] = false
	}
	copies := &corev1.SecretList{}
	g.Expect(c.List(e.ctx, copies, client.InNamespace(credentialsNamespace), client.HasLabels{infrav1.CredentialsMoveCopyLabel})).To(Succeed())
	for _, o := range copies.Items {
		out[keyOf("Secret", o.Namespace, o.Name)] = false
	}
	return out
}

func keyOf(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

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
