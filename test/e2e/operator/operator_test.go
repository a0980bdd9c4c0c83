package operator

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/e2e/node"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/images"
	"github.com/capov/capov/test/ovirtsim"
	"github.com/capov/capov/test/release"
)

const (
	ns         = "capov-system"
	simNS      = "ovirt"
	capiNS     = "capi-system"
	registry   = "e2e.local/capov"
	manager    = "capov-controller-manager"
	webhook    = "capov-webhook"
	webhookSvc = "capov-webhook-service"
	metricsSvc = "capov-metrics-service"
	leaseName  = "capov-controller-manager"
)

func TestMain(m *testing.M) {
	if os.Getenv("CAPOV_E2E") != "1" {
		fmt.Println("test/e2e/operator runs on a real node inside private namespaces: run it with `make e2e` (hack/e2e.sh), as root")
		os.Exit(0)
	}
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// e2e holds what the steps share.
type e2e struct {
	t        *testing.T
	ctx      context.Context
	root     string
	work     string
	cl       *node.Cluster
	c        client.Client
	cfg      *rest.Config
	helm     string
	tag      string
	simCA    []byte
	simIP    string
	simHTTP  *http.Client           // one client, so that polling reuses its connections
	wl       *crenvtest.Environment // the workload cluster's API server
	wlClient client.Client
	vars     map[string]string // the docs/examples variables
	simImage string            // the simulator's image: this tree's release's
	// installed is the release the capov charts are installed from.
	installed installation
	// capiInstalled: Cluster API's controllers run already (clusterctl installed them), the
	// cluster step does not start test/capi as a pod.
	capiInstalled bool
}

// TestInstalledAsUsersInstallIt follows docs/helm.md on a real node: the previous release's
// charts (v0.2.0, from the history) installed from its images, a cluster created from
// docs/examples, `helm upgrade` of both charts to this tree's release (`make release`: its chart
// archives and images), then the operator's day-2 actions on the upgraded installation.
func TestInstalledAsUsersInstallIt(t *testing.T) {
	g := NewWithT(t)
	SetDefaultEventuallyPollingInterval(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	t.Cleanup(cancel) // after the node's teardown (e.up), which dumps the pods with ctx
	root, err := envtest.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	work := os.Getenv("E2E_WORKDIR")
	if work == "" {
		work = t.TempDir()
	}
	helm := os.Getenv("HELM")
	g.Expect(helm).NotTo(BeEmpty(), "HELM names the helm binary (hack/e2e.sh sets it)")
	tag, err := images.ChartAppVersion(root)
	g.Expect(err).NotTo(HaveOccurred())
	e := &e2e{t: t, ctx: ctx, root: root, work: work, helm: helm, tag: tag}

	rel, old := e.releases(g)
	archives := append(e.previousImages(g, old), e.releaseArchives(g, rel)...)
	archives = append(archives, e.buildImages(g, images.Spec{Name: "capov-capi-core", Registry: registry, Tag: e.tag, Dir: e.root,
		Package: "./test/capi/cmd/capi-core", Binary: "/capi-core", Platforms: []string{e.platform()}})...)
	e.simImage = rel.Images["capov-ovirtsim"]
	e.installed = installation{version: PreviousVersion, imageTag: strings.TrimPrefix(PreviousVersion, "v"),
		charts: map[string]string{"capov": filepath.Join(old.Src, "charts", "capov"), "capov-crds": filepath.Join(old.Src, "charts", "capov-crds")}}
	thisRelease := installation{version: ThisVersion, imageTag: strings.TrimPrefix(ThisVersion, "v"), charts: map[string]string{}}
	for _, chart := range []string{"capov", "capov-crds"} {
		thisRelease.charts[chart] = filepath.Join(rel.Dir, chart+"-"+thisRelease.imageTag+".tgz")
	}

	e.up(g, archives, envtest.NewScheme())

	t.Run("1 namespace with the restricted Pod Security Standard", e.namespace)
	t.Run("2 the previous release's charts installed in the Shturval order", e.installCharts)
	if t.Failed() {
		return
	}
	t.Run("3 both Deployments Ready, PDB, leader election", e.deploymentsReady)
	if t.Failed() {
		return
	}
	t.Run("4 the simulator as a pod, an OVirtProvider with the custom-CA TLS mode", e.provider)
	if t.Failed() {
		return
	}
	t.Run("5 Cluster API as a pod, the docs/examples cluster Ready", e.cluster)
	if t.Failed() {
		return
	}
	t.Run("6 helm upgrade of both charts to this release: nothing replaced, no VM written", func(t *testing.T) { e.upgradeTo(t, thisRelease) })
	if t.Failed() {
		return
	}
	t.Run("7 bad manifests rejected through the webhook Service", e.badManifests)
	t.Run("8 metrics through the Service, with a token only", e.metrics)
	t.Run("9 the leader pod deleted: the other replica takes over", e.failover)
	t.Run("10 helm upgrade with an SSP-like change", e.upgrade)
	t.Run("11 helm uninstall keeps CRDs and objects", e.uninstall)
}

// up starts the node (kubelet, containerd, kube-proxy, CoreDNS, controller-manager, scheduler),
// imports the image archives and connects e.c with scheme; the node goes down when the test
// ends, after the pods are dumped if it failed.
func (e *e2e) up(g Gomega, archives []string, scheme *k8sruntime.Scheme) {
	e.t.Log("A single-node cluster: kubelet, containerd, kube-proxy, CoreDNS, controller-manager, scheduler")
	cl, err := node.Up(e.ctx, node.Options{WorkDir: filepath.Join(e.work, "node"), Assets: assetDirs(), Out: testWriter{e.t}})
	g.Expect(err).NotTo(HaveOccurred())
	e.cl = cl
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.dumpPods()
		}
		if e.wl != nil {
			_ = e.wl.Stop()
		}
		downCtx, c := context.WithTimeout(context.Background(), 2*time.Minute)
		defer c()
		if err := cl.Down(downCtx); err != nil {
			e.t.Errorf("taking the node down: %v", err)
		}
	})
	for _, a := range archives {
		g.Expect(cl.ImportImage(e.ctx, a)).To(Succeed(), "importing %s", a)
	}
	e.cfg = cl.RestConfig()
	e.c, err = client.New(e.cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
}

// installation is what the capov charts are installed from: a release's charts and image tag.
type installation struct {
	version  string            // v0.2.0
	imageTag string            // 0.2.0: the tag of ghcr.io/capov/capov-manager and -webhook
	charts   map[string]string // chart name: chart directory or archive
}

func (e *e2e) platform() string { return "linux/" + runtime.GOARCH }

// releases builds this tree's release for this machine's platform (`make release` with one
// platform: its chart archives, its components pinned by digest and its images) and the previous
// release's binaries from the history.
func (e *e2e) releases(g Gomega) (*release.Result, *harness.Release) {
	e.t.Logf("The release %s of this tree (make release, %s only) and %s from commit %s", ThisVersion, e.platform(), PreviousVersion, PreviousRelease)
	rel, err := release.Build(e.ctx, release.Options{Root: e.root, Out: filepath.Join(e.work, "release"), Version: ThisVersion,
		Platforms: []string{e.platform()}, Log: testWriter{e.t}})
	g.Expect(err).NotTo(HaveOccurred())
	old, err := harness.BuildRelease(e.ctx, e.root, PreviousRelease)
	g.Expect(err).NotTo(HaveOccurred())
	return rel, old
}

// releaseArchives are the image archives of this tree's release.
func (e *e2e) releaseArchives(g Gomega, rel *release.Result) []string {
	var archives []string
	for _, name := range []string{"capov-manager", "capov-webhook", "capov-ovirtsim"} {
		g.Expect(rel.Images).To(HaveKey(name))
		archives = append(archives, filepath.Join(rel.Dir, name+".oci.tar"))
	}
	return archives
}

// previousImages assembles the previous release's manager and webhook images from the binaries
// of its commit, named as its charts' and components' defaults name them
// (ghcr.io/capov/<name>:0.2.0).
func (e *e2e) previousImages(g Gomega, old *harness.Release) []string {
	var archives []string
	for name, bin := range map[string]string{"capov-manager": old.Manager, "capov-webhook": old.Webhook} {
		short := strings.TrimPrefix(name, "capov-")
		spec := images.Spec{Name: name, Registry: images.DefaultRegistry, Tag: strings.TrimPrefix(PreviousVersion, "v"),
			Package: "./cmd/" + short, Binary: "/" + short, Platforms: []string{e.platform()}, Version: PreviousVersion, GitCommit: old.Commit}
		img, err := images.Assemble(e.ctx, spec, map[string]string{e.platform(): bin})
		g.Expect(err).NotTo(HaveOccurred())
		archives = append(archives, e.writeImage(g, img, name+"-"+PreviousVersion))
	}
	return archives
}

// buildImages builds images from this module's packages and writes their archives.
func (e *e2e) buildImages(g Gomega, specs ...images.Spec) []string {
	var archives []string
	for _, s := range specs {
		e.t.Logf("Building image %s", s.Ref())
		img, err := images.Build(e.ctx, s)
		g.Expect(err).NotTo(HaveOccurred())
		archives = append(archives, e.writeImage(g, img, s.Name))
	}
	return archives
}

func (e *e2e) writeImage(g Gomega, img *images.Image, file string) string {
	p := filepath.Join(e.work, "images", file+".oci.tar")
	g.Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
	g.Expect(images.WriteOCIArchive(p, img)).To(Succeed())
	return p
}

func (e *e2e) namespace(t *testing.T) {
	g := NewWithT(t)
	g.Expect(e.c.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
	}}})).To(Succeed())
}

// installCharts: capov before capov-crds fails with the preflight's message; then capov-crds,
// the certificate Secrets (certificates.source=secret: no cert-manager here), and capov.
func (e *e2e) installCharts(t *testing.T) {
	g := NewWithT(t)
	// Cluster API's core CRDs come first, as `clusterctl init` installs them: the manager
	// watches Clusters and Machines.
	g.Expect(envtest.InstallCAPICRDs(e.ctx, e.cfg)).To(Succeed())
	out, err := e.helmRun("install", "capov", e.installed.charts["capov"], "-n", ns)
	g.Expect(err).To(HaveOccurred(), "capov before capov-crds must fail")
	g.Expect(out).To(ContainSubstring("CAPOV CRDs are not installed"), "the preflight names the missing chart")
	g.Expect(out).To(ContainSubstring("shturval-capov-crds"))

	ca, serving := newWebhookPKI(t, []string{
		webhookSvc + "." + ns + ".svc", webhookSvc + "." + ns + ".svc.cluster.local",
		metricsSvc + "." + ns + ".svc", "capov-webhook-metrics-service." + ns + ".svc",
	})
	caB64 := base64.StdEncoding.EncodeToString(ca)
	_, err = e.helmRun("install", "capov-crds", e.installed.charts["capov-crds"],
		"--set", "conversion.webhookNamespace="+ns, "--set", "conversion.caBundle="+caB64, "--wait")
	g.Expect(err).NotTo(HaveOccurred())

	for _, name := range []string{"capov-webhook-server-cert", "capov-metrics-server-cert"} {
		g.Expect(e.c.Create(e.ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": serving.cert, "tls.key": serving.key, "ca.crt": ca},
		})).To(Succeed())
	}
	values := filepath.Join(e.work, "capov-values.yaml")
	g.Expect(os.WriteFile(values, []byte(e.values(caB64, "")), 0o600)).To(Succeed())
	_, err = e.helmRun("install", "capov", e.installed.charts["capov"], "-n", ns, "-f", values)
	g.Expect(err).NotTo(HaveOccurred())
}

// values are what an operator without cert-manager gives the capov chart (Shturval: the SSC
// customvalues); extra is appended.
func (e *e2e) values(caB64, extra string) string {
	return fmt.Sprintf(`image:
  repository: %[1]s/capov-manager
  pullPolicy: Never
webhook:
  image:
    repository: %[1]s/capov-webhook
  replicas: 2
manager:
  tag: %[2]q
replicas: 2
certificates:
  source: secret
  caBundle: %[3]s
`, images.DefaultRegistry, e.installed.imageTag, caB64) + extra
}

func (e *e2e) deploymentsReady(t *testing.T) {
	g := NewWithT(t)
	for name, replicas := range map[string]int32{manager: 2, webhook: 2} {
		g.Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
			g.Expect(d.Status.ReadyReplicas).To(Equal(replicas), "%s ready replicas", name)
			g.Expect(d.Status.UpdatedReplicas).To(Equal(replicas))
		}).WithTimeout(3*time.Minute).Should(Succeed(), "Deployment %s: %s", name, e.podSummary())
	}
	pdb := &policyv1.PodDisruptionBudget{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: webhook}, pdb)).To(Succeed(), "the webhook PDB")
	g.Eventually(func(g Gomega) {
		g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(pdb), pdb)).To(Succeed())
		g.Expect(pdb.Status.CurrentHealthy).To(BeNumerically("==", 2))
		g.Expect(pdb.Status.DisruptionsAllowed).To(BeNumerically(">=", 1))
	}).WithTimeout(time.Minute).Should(Succeed())
	holder := e.leader(g)
	t.Logf("leader: %s", holder)
}

// leader waits for the manager's leader-election Lease to name a running manager pod and
// returns that pod's name.
func (e *e2e) leader(g Gomega) string {
	var holder string
	g.Eventually(func(g Gomega) {
		l := &coordinationv1.Lease{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: leaseName}, l)).To(Succeed())
		g.Expect(l.Spec.HolderIdentity).NotTo(BeNil())
		holder = *l.Spec.HolderIdentity
		pods := e.pods(g, manager)
		g.Expect(slices.ContainsFunc(pods, func(p corev1.Pod) bool { return strings.HasPrefix(holder, p.Name) })).To(BeTrue(),
			"the lease holder %s is one of the manager pods", holder)
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	return strings.SplitN(holder, "_", 2)[0]
}

// pods lists the running pods of a Deployment of the chart.
func (e *e2e) pods(g Gomega, deployment string) []corev1.Pod {
	d := &appsv1.Deployment{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: deployment}, d)).To(Succeed())
	l := &corev1.PodList{}
	g.Expect(e.c.List(e.ctx, l, client.InNamespace(ns), client.MatchingLabels(d.Spec.Selector.MatchLabels))).To(Succeed())
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out
}

// provider runs the simulator behind Service ovirtsim.ovirt, fetches its CA as an operator
// does (pki-resource), and applies docs/examples 01-02 with the custom-CA TLS mode.
func (e *e2e) provider(t *testing.T) {
	g := NewWithT(t)
	labels := map[string]string{"app": "ovirtsim"}
	g.Expect(e.c.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: simNS}})).To(Succeed())
	g.Expect(e.c.Create(e.ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "ovirtsim", Namespace: simNS},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: restrictedPod(corev1.Container{
					Name: "ovirtsim", Image: e.simImage, ImagePullPolicy: corev1.PullNever,
					Args: []string{"--listen=0.0.0.0:8443", "--cert-host=ovirtsim." + simNS + ".svc", "--cert-host=ovirtsim." + simNS + ".svc.cluster.local",
						"--boot-delay=2s"},
					Ports: []corev1.ContainerPort{{ContainerPort: 8443, Name: "https"}},
					// Generous: a probe that times out on a busy node while the charts roll would take
					// the Service's endpoint away (kube-proxy then rejects: "no route to host").
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: "/ovirt-engine/services/pki-resource?resource=ca-certificate&format=X509-PEM-CA", Port: intstr.FromInt32(8443), Scheme: corev1.URISchemeHTTPS}},
						TimeoutSeconds: 5, PeriodSeconds: 5, FailureThreshold: 6},
				}), // a read-only root and no /tmp volume: the simulator serves its CA, writes no file
			},
		},
	})).To(Succeed())
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ovirtsim", Namespace: simNS},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}}},
	}
	g.Expect(e.c.Create(e.ctx, svc)).To(Succeed())
	e.simIP = svc.Spec.ClusterIP

	// The operator's way to the Engine CA, before any trust exists (curl -k).
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // bootstrapping trust
	g.Eventually(func(g Gomega) {
		resp, err := insecure.Get("https://" + net.JoinHostPort(e.simIP, "443") + "/ovirt-engine/services/pki-resource?resource=ca-certificate&format=X509-PEM-CA")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		e.simCA, err = io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(2*time.Minute).Should(Succeed(), "the simulator pod answers through its Service: %s", e.podSummary())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(e.simCA)).To(BeTrue(), "the simulator's CA")
	e.simHTTP = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, ServerName: "ovirtsim." + simNS + ".svc", MinVersion: tls.VersionTLS12}}}

	seed := ovirtsim.DemoSeed()
	user, pass := seed.Username, seed.Password
	if user == "" {
		user, pass = "admin@internal", "secret"
	}
	e.vars = map[string]string{
		"OVIRT_URL": "https://ovirtsim." + simNS + ".svc/ovirt-engine/api", "OVIRT_USERNAME": user, "OVIRT_PASSWORD": pass,
		"OVIRT_CA_B64": base64.StdEncoding.EncodeToString(e.simCA),
	}
	e.applyExamples(g, "01-credentials.yaml", "02-provider.yaml")
	var out string
	g.Eventually(func(g Gomega) {
		var err error
		out, err = e.kubectl("get", "capovp", "ovirt-demo")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(MatchRegexp(`(?m)^NAME\s+READY\s`))
		g.Expect(out).To(MatchRegexp(`(?m)^ovirt-demo\s+True\s`))
	}).WithTimeout(2*time.Minute).Should(Succeed(), "kubectl get capovp: READY True\n%s", e.managerLogs())
	t.Logf("kubectl get capovp:\n%s", out)
}

// cluster runs Cluster API's core reconcilers as a pod, starts the workload cluster's API server
// on the node's address (the pods reach it there) with the kubelet stand-in, and applies
// docs/examples 03-06: every machine Ready, every Node with its providerID.
func (e *e2e) cluster(t *testing.T) {
	g := NewWithT(t)
	if !e.capiInstalled {
		e.capiCore(g)
	}

	t.Log("The workload cluster: a second kube-apiserver on the node's address, and the kubelet stand-in")
	assets, err := envtest.EnsureAssets(e.ctx)
	g.Expect(err).NotTo(HaveOccurred())
	wl := &crenvtest.Environment{BinaryAssetsDirectory: assets, ControlPlaneStopTimeout: 30 * time.Second}
	wl.ControlPlane.APIServer = &crenvtest.APIServer{}
	// A fixed port beside the node's own API server (6443): the test runs in a network
	// namespace of its own, where nothing else listens on it, and the kernel never gives a port
	// below its ephemeral range to a process that binds port 0 or connects out.
	wl.ControlPlane.APIServer.SecureServing.Address = e.cl.NodeIP()
	wl.ControlPlane.APIServer.SecureServing.Port = "6444"
	wlCfg, err := wl.Start()
	g.Expect(err).NotTo(HaveOccurred())
	e.wl = wl
	e.wlClient, err = client.New(wlCfg, client.Options{Scheme: envtest.NewScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	wlKubeconfig, err := envtest.KubeconfigFor(wlCfg, "demo")
	g.Expect(err).NotTo(HaveOccurred())
	kubelet := &harness.Kubelet{Workload: e.wlClient, VMs: e.simVMs}
	go kubelet.Run(e.ctx)

	e.applyExamples(g, "03-cluster.yaml")
	g.Expect(e.c.Create(e.ctx, harness.KubeconfigSecret(harness.Cluster("demo", "demo"), wlKubeconfig))).To(Succeed())
	e.applyExamples(g, "04-bootstrap-data.yaml", "05-control-plane.yaml", "06-workers.yaml")
	e.expectMachinesReady(g, 4*time.Minute)
	out, err := e.kubectl("get", "capovm", "-A")
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("kubectl get capovm -A:\n%s", out)
}

// expectMachinesReady waits until every OVirtMachine is Ready and provisioned, its Machine
// Running with the providerID, and a Node with that providerID exists in the workload cluster.
func (e *e2e) expectMachinesReady(g Gomega, timeout time.Duration) {
	g.Eventually(func(g Gomega) {
		oms := &infrav1.OVirtMachineList{}
		g.Expect(e.c.List(e.ctx, oms)).To(Succeed())
		g.Expect(oms.Items).NotTo(BeEmpty())
		nodes := &corev1.NodeList{}
		g.Expect(e.wlClient.List(e.ctx, nodes)).To(Succeed())
		providerIDs := map[string]bool{}
		for _, n := range nodes.Items {
			providerIDs[n.Spec.ProviderID] = true
		}
		for _, om := range oms.Items {
			g.Expect(om.Status.Initialization.Provisioned).To(HaveValue(BeTrue()), "%s provisioned", om.Name)
			g.Expect(conditionTrue(om.Status.Conditions, infrav1.ReadyCondition)).To(BeTrue(), "%s Ready", om.Name)
			g.Expect(om.Spec.ProviderID).NotTo(BeEmpty())
			g.Expect(providerIDs).To(HaveKey(om.Spec.ProviderID), "a Node of the workload cluster has %s's providerID", om.Name)
		}
		machines := &clusterv1.MachineList{}
		g.Expect(e.c.List(e.ctx, machines)).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(len(oms.Items)))
		for _, m := range machines.Items {
			g.Expect(m.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)), "Machine %s", m.Name)
		}
	}).WithTimeout(timeout).Should(Succeed(), "every machine Ready:\n%s", e.managerLogs())
}

func conditionTrue(conds []metav1.Condition, t string) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// capiCore runs test/capi (Cluster API's own core reconcilers) as a Deployment.
func (e *e2e) capiCore(g Gomega) {
	g.Expect(e.c.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: capiNS}})).To(Succeed())
	g.Expect(e.c.Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "capi-core", Namespace: capiNS}})).To(Succeed())
	g.Expect(e.c.Create(e.ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-capi-core"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "capi-core", Namespace: capiNS}},
	})).To(Succeed())
	labels := map[string]string{"app": "capi-core"}
	pod := restrictedPod(corev1.Container{Name: "capi-core", Image: registry + "/capov-capi-core:" + e.tag, ImagePullPolicy: corev1.PullNever})
	pod.ServiceAccountName = "capi-core"
	g.Expect(e.c.Create(e.ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-core", Namespace: capiNS},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod}},
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: capiNS, Name: "capi-core"}, d)).To(Succeed())
		g.Expect(d.Status.ReadyReplicas).To(BeNumerically("==", 1))
	}).WithTimeout(2*time.Minute).Should(Succeed(), "Cluster API's core reconcilers as a pod: %s", e.podSummary())
}

// badManifests: docs/examples/bad through the webhook Service (and the API server's schema).
func (e *e2e) badManifests(t *testing.T) {
	g := NewWithT(t)
	for file, want := range map[string][]string{
		// Only the webhook knows these two rules (the schema cannot express them).
		"capov-affinity-group.yaml":    {"spec.template.spec.affinityGroups[0]", `names starting with "capov-"`},
		"provider-without-secret.yaml": {"credentialsSecretName"},
		"guaranteed-above-size.yaml":   {"guaranteedmb"},
	} {
		out, err := e.kubectl("apply", "-f", filepath.Join(e.root, "docs", "examples", "bad", file))
		g.Expect(err).To(HaveOccurred(), "%s must be rejected", file)
		for _, w := range want {
			g.Expect(out).To(ContainSubstring(w), file)
		}
	}
}

// metrics: /metrics of the manager through its Service, with a service-account token allowed
// by docs/examples/07-metrics-reader.yaml, and refused without a token.
func (e *e2e) metrics(t *testing.T) {
	g := NewWithT(t)
	e.applyExamples(g, "07-metrics-reader.yaml")
	svc := &corev1.Service{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: metricsSvc}, svc)).To(Succeed())
	g.Expect(svc.Spec.Ports).NotTo(BeEmpty())
	token, err := e.kubectl("create", "token", "metrics-scraper", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred(), token)
	ca, err := e.secretCA()
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
	// A new connection per request: the Service balances connections over both manager pods,
	// and only the leader has reconciled anything (the standby's registry has no capov_ series
	// yet). Prometheus scrapes every pod; this check only needs to reach the leader once.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{
		RootCAs: pool, ServerName: metricsSvc + "." + ns + ".svc", MinVersion: tls.VersionTLS12}}}
	url := fmt.Sprintf("https://%s/metrics", net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port)))
	get := func(g Gomega, bearer string) (int, string) {
		req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, url, nil)
		g.Expect(err).NotTo(HaveOccurred())
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	g.Eventually(func(g Gomega) {
		code, body := get(g, strings.TrimSpace(token))
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring("capov_"), "CAPOV's own metrics")
	}).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
	code, _ := get(g, "")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "no token, no metrics")
	code, _ = get(g, "not-a-token")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "an invalid token: 401 as from the API server, not a 500")
}

// secretCA is the CA of the certificate Secrets the test created.
func (e *e2e) secretCA() ([]byte, error) {
	s := &corev1.Secret{}
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "capov-metrics-server-cert"}, s); err != nil {
		return nil, err
	}
	return s.Data["ca.crt"], nil
}

// failover deletes the leader pod: the other replica takes the lease, and a new machine still
// comes up (the workers' MachineDeployment scaled by one).
func (e *e2e) failover(t *testing.T) {
	g := NewWithT(t)
	old := e.leader(g)
	g.Expect(e.c.Delete(e.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: old}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(e.leader(g)).NotTo(Equal(old))
	}).WithTimeout(2*time.Minute).Should(Succeed(), "another manager pod takes the lease")
	mds := &clusterv1.MachineDeploymentList{}
	g.Expect(e.c.List(e.ctx, mds)).To(Succeed())
	g.Expect(mds.Items).NotTo(BeEmpty())
	md := &mds.Items[0]
	before := ptrInt(md.Spec.Replicas)
	oms := &infrav1.OVirtMachineList{}
	g.Expect(e.c.List(e.ctx, oms)).To(Succeed())
	count := len(oms.Items)
	_, err := e.kubectl("scale", "machinedeployment", md.Name, "-n", md.Namespace, fmt.Sprintf("--replicas=%d", before+1))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		oms := &infrav1.OVirtMachineList{}
		g.Expect(e.c.List(e.ctx, oms)).To(Succeed())
		g.Expect(oms.Items).To(HaveLen(count + 1))
	}).WithTimeout(time.Minute).Should(Succeed())
	e.expectMachinesReady(g, 3*time.Minute)
}

func ptrInt(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// upgrade: helm upgrade with what an SSP changes (feature gates, resources, a nodeSelector):
// both Deployments roll, the manager logs the new gates, both set their Go soft memory limit from
// their container's new limit, and no VM is written to.
func (e *e2e) upgrade(t *testing.T) {
	g := NewWithT(t)
	oldPods := map[string]bool{}
	for _, d := range []string{manager, webhook} {
		for _, p := range e.pods(g, d) {
			oldPods[p.Name] = true
		}
	}
	vmsBefore, writesBefore := e.simVMIDs(g), e.simWrites(g)
	values := filepath.Join(e.work, "capov-values-ssp.yaml")
	caB64 := base64.StdEncoding.EncodeToString(e.mustSecretCA(g))
	g.Expect(os.WriteFile(values, []byte(e.values(caB64, `featureGates:
  disk-add-vm-name: true
resources:
  requests:
    cpu: 60m
    memory: 160Mi
  limits:
    cpu: "1"
    memory: 640Mi
nodeSelector:
  kubernetes.io/hostname: `+e.cl.NodeName()+`
`)), 0o600)).To(Succeed())
	_, err := e.helmRun("upgrade", "capov", e.installed.charts["capov"], "-n", ns, "-f", values, "--wait", "--timeout", "5m")
	g.Expect(err).NotTo(HaveOccurred())
	for _, d := range []string{manager, webhook} {
		g.Eventually(func(g Gomega) {
			dep := &appsv1.Deployment{}
			g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: d}, dep)).To(Succeed())
			g.Expect(dep.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("kubernetes.io/hostname", e.cl.NodeName()))
			g.Expect(dep.Status.UpdatedReplicas).To(Equal(ptrInt(dep.Spec.Replicas)))
			g.Expect(dep.Status.ReadyReplicas).To(Equal(ptrInt(dep.Spec.Replicas)))
			g.Expect(dep.Status.Replicas).To(Equal(ptrInt(dep.Spec.Replicas)), "old pods gone")
			for _, p := range e.pods(g, d) {
				g.Expect(oldPods).NotTo(HaveKey(p.Name), "%s rolled", d)
			}
		}).WithTimeout(3*time.Minute).Should(Succeed(), "%s rolls: %s", d, e.podSummary())
	}
	dep := &appsv1.Deployment{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: manager}, dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Spec.Containers[0].Resources.Requests.Memory().String()).To(Equal("160Mi"))
	// The Go soft memory limit follows the container's limit: 640Mi less 64Mi for the manager,
	// the webhook's default 128Mi less 64Mi.
	memoryLimit := map[string]string{manager: `containerLimit=671088640 softLimit=603979776`, webhook: `containerLimit=134217728 softLimit=67108864`}
	for _, d := range []string{manager, webhook} {
		g.Eventually(func(g Gomega) {
			for _, p := range e.pods(g, d) {
				logs, err := e.kubectl("logs", "-n", ns, p.Name)
				g.Expect(err).NotTo(HaveOccurred(), logs)
				g.Expect(logs).To(MatchRegexp(`Resolved feature gates.*disk-add-vm-name=true`), "%s logs the new gates", p.Name)
				g.Expect(logs).To(MatchRegexp(`Set the Go soft memory limit from the container's memory limit.* `+memoryLimit[d]),
					"%s sets its soft memory limit from its container's", p.Name)
			}
		}).WithTimeout(time.Minute).Should(Succeed())
	}
	e.expectMachinesReady(g, 2*time.Minute)
	g.Consistently(func(g Gomega) {
		g.Expect(e.simVMIDs(g)).To(Equal(vmsBefore), "the same VMs")
		g.Expect(e.simWrites(g)).To(Equal(writesBefore), "no oVirt write: the machines are untouched")
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

// upgradeTo upgrades both charts to a release as docs/helm.md says (capov-crds first, then
// capov with the same values but the new tag): both Deployments then run only the release's
// images, every Machine stays Running and Ready, none is replaced (UIDs, providerIDs), no VM is
// written (CHANGELOG.md: the upgrade writes none) and every object reads the same in v1beta1 and
// v1beta2.
func (e *e2e) upgradeTo(t *testing.T, to installation) {
	g := NewWithT(t)
	machinesBefore := e.machineIdentities(g)
	specsBefore, err := harness.SpecSnapshot(e.ctx, e.c, "v1beta1")
	g.Expect(err).NotTo(HaveOccurred())
	vmsBefore, writesBefore := e.simVMIDs(g), e.simWrites(g)
	start := time.Now()
	e.installed = to
	caB64 := base64.StdEncoding.EncodeToString(e.mustSecretCA(g))
	_, err = e.helmRun("upgrade", "capov-crds", to.charts["capov-crds"],
		"--set", "conversion.webhookNamespace="+ns, "--set", "conversion.caBundle="+caB64, "--wait")
	g.Expect(err).NotTo(HaveOccurred())
	values := filepath.Join(e.work, "capov-values-"+to.version+".yaml")
	g.Expect(os.WriteFile(values, []byte(e.values(caB64, "")), 0o600)).To(Succeed())
	_, err = e.helmRun("upgrade", "capov", to.charts["capov"], "-n", ns, "-f", values, "--wait", "--timeout", "5m")
	g.Expect(err).NotTo(HaveOccurred())
	e.expectImages(g, to.imageTag)
	t.Logf("Both Deployments run %s's images %s after the upgrade began", to.version, time.Since(start).Round(time.Second))
	e.expectUnchanged(g, machinesBefore, specsBefore, vmsBefore, writesBefore)
}

// expectImages waits until the manager and webhook Deployments are rolled out and every pod of
// them runs ghcr.io/capov/<name>:<tag> (optionally pinned by digest) and is Ready.
func (e *e2e) expectImages(g Gomega, tag string) {
	g.Eventually(func(g Gomega) {
		for name, image := range map[string]string{manager: "capov-manager", webhook: "capov-webhook"} {
			d := &appsv1.Deployment{}
			g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
			g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation), name)
			g.Expect(d.Status.UpdatedReplicas).To(Equal(ptrInt(d.Spec.Replicas)), name)
			g.Expect(d.Status.AvailableReplicas).To(Equal(ptrInt(d.Spec.Replicas)), name)
			g.Expect(d.Status.Replicas).To(Equal(ptrInt(d.Spec.Replicas)), "%s: old pods gone", name)
			pods := e.pods(g, name)
			g.Expect(pods).To(HaveLen(int(ptrInt(d.Spec.Replicas))), name)
			for _, p := range pods {
				g.Expect(p.Spec.Containers[0].Image).To(HavePrefix(images.DefaultRegistry+"/"+image+":"+tag), "%s runs the release's image", p.Name)
				g.Expect(podReady(p)).To(BeTrue(), "%s Ready", p.Name)
			}
		}
	}).WithTimeout(5*time.Minute).Should(Succeed(), "the upgraded Deployments: %s", e.podSummary())
}

// expectUnchanged: after an upgrade, every Machine stays Running and Ready for 20 s in both API
// versions, with the same identity, VMs and spec, and no VM was written.
func (e *e2e) expectUnchanged(g Gomega, machines map[string]string, specs map[string]any, vms []string, writes int) {
	e.expectMachinesReady(g, 2*time.Minute)
	g.Consistently(func(g Gomega) {
		g.Expect(harness.ExamplesReady(e.ctx, e.c, "v1beta1")).To(Succeed())
		g.Expect(harness.ExamplesReady(e.ctx, e.c, "v1beta2")).To(Succeed())
	}).WithTimeout(20*time.Second).WithPolling(2*time.Second).Should(Succeed(), "every Machine stays Running and Ready")
	g.Expect(e.machineIdentities(g)).To(Equal(machines), "no Machine was replaced: the same UIDs and providerIDs")
	g.Expect(e.simVMIDs(g)).To(Equal(vms), "the same VMs")
	g.Expect(e.simWrites(g)).To(Equal(writes), "no VM was written (CHANGELOG.md, v0.3.0 upgrade notes)")
	for _, version := range []string{"v1beta1", "v1beta2"} {
		now, err := harness.SpecSnapshot(e.ctx, e.c, version)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(now).To(HaveLen(len(specs)), version)
		for key, spec := range specs {
			g.Expect(cmp.Diff(spec, now[key])).To(BeEmpty(), "the spec of %s must read the same in %s after the upgrade", key, version)
		}
	}
}

// uninstall: helm uninstall capov, then capov-crds: the CRDs and the objects stay (resource
// policy keep), no pod is left in the release namespace.
func (e *e2e) uninstall(t *testing.T) {
	g := NewWithT(t)
	before := &infrav1.OVirtMachineList{}
	g.Expect(e.c.List(e.ctx, before)).To(Succeed())
	_, err := e.helmRun("uninstall", "capov", "-n", ns, "--wait")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = e.helmRun("uninstall", "capov-crds", "--wait")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(e.c.List(e.ctx, pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty(), "no pod left in %s", ns)
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	for _, crd := range []string{"ovirtmachines", "ovirtclusters", "ovirtmachinetemplates", "ovirtproviders"} {
		g.Expect(e.c.Get(e.ctx, client.ObjectKey{Name: crd + ".infrastructure.cluster.x-k8s.io"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed(), "CRD %s kept", crd)
	}
	after := &infrav1.OVirtMachineList{}
	g.Expect(e.c.List(e.ctx, after)).To(Succeed())
	g.Expect(after.Items).To(HaveLen(len(before.Items)), "every OVirtMachine kept")
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Name: "ovirt-demo"}, &infrav1.OVirtProvider{})).To(Succeed(), "the OVirtProvider kept")
}

func (e *e2e) mustSecretCA(g Gomega) []byte {
	ca, err := e.secretCA()
	g.Expect(err).NotTo(HaveOccurred())
	return ca
}

// simGet reads a JSON admin endpoint of the simulator through its Service, trusting its CA.
func (e *e2e) simGet(g Gomega, path string, out any) {
	g.Expect(e.simGetErr(path, out)).To(Succeed())
}

func (e *e2e) simGetErr(path string, out any) error {
	hc := e.simHTTP
	if hc == nil {
		return fmt.Errorf("the simulator's CA is not known yet")
	}
	req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, "https://"+net.JoinHostPort(e.simIP, "443")+path, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// simVMs lists the simulator's VMs for the kubelet stand-in (none while it cannot be read).
func (e *e2e) simVMs() []harness.VMInfo {
	var st ovirtsim.State
	if err := e.simGetErr("/sim/state", &st); err != nil {
		return nil
	}
	out := make([]harness.VMInfo, 0, len(st.VMs))
	for _, vm := range st.VMs {
		var ips []string
		for _, n := range vm.NICs {
			if n.Plugged && n.IP != "" {
				ips = append(ips, n.IP)
			}
		}
		out = append(out, harness.VMInfo{ID: vm.ID, Name: vm.Name, Status: vm.Status, IPs: ips})
	}
	return out
}

func (e *e2e) simVMIDs(g Gomega) []string {
	var st ovirtsim.State
	e.simGet(g, "/sim/state", &st)
	ids := make([]string, 0, len(st.VMs))
	for _, vm := range st.VMs {
		ids = append(ids, vm.ID)
	}
	slices.Sort(ids)
	return ids
}

// simWrites counts the simulator's non-GET VM requests.
func (e *e2e) simWrites(g Gomega) int {
	var c ovirtsim.Counters
	e.simGet(g, "/sim/counters", &c)
	n := 0
	for _, r := range c.Requests {
		if r.Method != http.MethodGet && strings.HasPrefix(r.Path, "/vms") {
			n += r.Count
		}
	}
	return n
}

// applyExamples applies docs/examples files with the variables of the simulator.
func (e *e2e) applyExamples(g Gomega, files ...string) {
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(e.root, "docs", "examples", f))
		g.Expect(err).NotTo(HaveOccurred())
		cmd := exec.CommandContext(e.ctx, "kubectl", "--kubeconfig", e.cl.Kubeconfig(), "apply", "-f", "-")
		cmd.Stdin = strings.NewReader(os.Expand(string(raw), func(k string) string { return e.vars[k] }))
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "kubectl apply -f %s:\n%s", f, out)
	}
}

func (e *e2e) kubectl(args ...string) (string, error) {
	out, err := exec.CommandContext(e.ctx, "kubectl", append([]string{"--kubeconfig", e.cl.Kubeconfig()}, args...)...).CombinedOutput()
	return string(out), err
}

func (e *e2e) helmRun(args ...string) (string, error) {
	cmd := exec.CommandContext(e.ctx, e.helm, append(args, "--kubeconfig", e.cl.Kubeconfig())...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	e.t.Logf("helm %s:\n%s", strings.Join(args[:min(2, len(args))], " "), tail(buf.String(), 30))
	if err != nil {
		return buf.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, buf.String())
	}
	return buf.String(), nil
}

// podSummary lists every pod with its phase and container states, for failure messages.
func (e *e2e) podSummary() string {
	l := &corev1.PodList{}
	if err := e.c.List(e.ctx, l); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range l.Items {
		fmt.Fprintf(&b, "\n%s/%s %s", p.Namespace, p.Name, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " %s ready=%v restarts=%d", cs.Name, cs.Ready, cs.RestartCount)
			if w := cs.State.Waiting; w != nil {
				fmt.Fprintf(&b, " waiting=%s: %s", w.Reason, w.Message)
			}
			if t := cs.LastTerminationState.Terminated; t != nil {
				fmt.Fprintf(&b, " last exit %d %s", t.ExitCode, t.Reason)
			}
		}
	}
	return b.String()
}

// managerLogs is the tail of the manager pods' logs.
func (e *e2e) managerLogs() string {
	out, _ := e.kubectl("logs", "-n", ns, "deploy/"+manager, "--tail=40")
	return out
}

// dumpPods logs every pod and the last lines of every container (and its previous run), on
// failure.
func (e *e2e) dumpPods() {
	e.t.Logf("pods:%s", e.podSummary())
	l := &corev1.PodList{}
	if err := e.c.List(e.ctx, l); err == nil {
		for _, p := range l.Items {
			if p.Namespace == "kube-system" {
				continue
			}
			out, _ := e.kubectl("logs", "-n", p.Namespace, p.Name, "--all-containers", "--tail=40")
			e.t.Logf("logs of %s/%s:\n%s", p.Namespace, p.Name, out)
			if out, err := e.kubectl("logs", "-n", p.Namespace, p.Name, "--previous", "--tail=30"); err == nil {
				e.t.Logf("previous logs of %s/%s:\n%s", p.Namespace, p.Name, out)
			}
		}
	}
	out, _ := e.kubectl("get", "events", "-A", "--sort-by=.lastTimestamp")
	e.t.Logf("events:\n%s", tail(out, 60))
}

// restrictedPod is a pod spec that the restricted Pod Security Standard admits, running c as
// the images' nonroot user.
func restrictedPod(c corev1.Container) corev1.PodSpec {
	f := false
	tr := true
	c.SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: &f, ReadOnlyRootFilesystem: &tr, RunAsNonRoot: &tr,
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	return corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &tr, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers:      []corev1.Container{c},
	}
}

// assetDirs are the binaries' directories that hack/e2e.sh exports.
func assetDirs() []string {
	var dirs []string
	for _, v := range []string{"KUBEBUILDER_ASSETS", "NODE_ASSETS"} {
		if d := os.Getenv(v); d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
