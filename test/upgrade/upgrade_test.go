// Package upgrade tests the upgrade from the last v1beta1-only release to this one as an
// operator does it: the release's CRD chart and binaries run a cluster until it is Ready; then
// the CRD chart is upgraded with Helm and the webhook and manager are replaced by this
// version's. Everything must stay Ready, no VM may be written to, every object must read the
// same in v1beta1 and be readable in v1beta2, and the CRDs must end with storedVersions
// [v1beta2].
//
// The v1beta1-only release is commit oldRelease: its charts are kept as test data
// (testdata/v1beta1-release), its binaries are built from the repository history. envtest runs
// no pods, so the charts' Deployments never start: the binaries run as processes with the
// charts' flags, and the webhook Service is replaced by the process's URL (useChartWebhooks).
package upgrade

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// oldRelease is the last commit before v1beta2: v1beta1-only CRDs, manager and webhook.
const oldRelease = "5c1cf2a"

var ourCRDs = []string{
	"ovirtproviders.infrastructure.cluster.x-k8s.io", "ovirtclusters.infrastructure.cluster.x-k8s.io",
	"ovirtmachines.infrastructure.cluster.x-k8s.io", "ovirtmachinetemplates.infrastructure.cluster.x-k8s.io",
}

func TestUpgradeFromTheV1Beta1Release(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release and runs two stacks")
	}
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("HELM is not set: run through `make unit` (HELM=$(hack/helm.sh))")
	}
	root, err := envtest.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	work := t.TempDir()
	oldBins := buildRelease(t, ctx, root, filepath.Join(work, "old"))
	newManager, err := harness.BuildBinary(ctx, root, filepath.Join(work, "new"), "manager")
	g.Expect(err).NotTo(HaveOccurred())
	newWebhook, err := harness.BuildBinary(ctx, root, filepath.Join(work, "new"), "webhook")
	g.Expect(err).NotTo(HaveOccurred())

	seed := ovirtsim.DemoSeed()
	seed.Timings = ovirtsim.Timings{ImageLock: 300 * time.Millisecond, DiskLock: 100 * time.Millisecond, WaitForLaunch: 100 * time.Millisecond,
		PoweringUp: 200 * time.Millisecond, PoweringDown: 100 * time.Millisecond, GuestAgentDelay: 100 * time.Millisecond,
		NoAgentPoweringUp: time.Second}
	kubeconfig := filepath.Join(work, "kubeconfig")
	stack, err := harness.StartStack(ctx, harness.StackOptions{
		WorkDir: filepath.Join(work, "stack"), Seed: seed, Out: testWriter{t},
		Binaries:         map[string]string{"manager": oldBins["manager"], "webhook": oldBins["webhook"]},
		WebhookManifests: filepath.Join(oldBins["root"], "config", "webhook", "manifests.yaml"),
		// The operator installs cert-manager, then the release's two charts in the Shturval order.
		InstallCRDs: func(ctx context.Context, env *envtest.Environment) error {
			kc, err := env.Kubeconfig("upgrade")
			if err != nil {
				return err
			}
			if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
				return err
			}
			cm, err := envtest.ModuleDir(ctx, "github.com/cert-manager/cert-manager")
			if err != nil {
				return err
			}
			if _, err := crenvtest.InstallCRDs(env.Config, crenvtest.CRDInstallOptions{Paths: []string{filepath.Join(cm, "deploy", "crds")}, ErrorIfPathMissing: true}); err != nil {
				return err
			}
			if err := run(ctx, helm, "install", "capov-crds", filepath.Join("testdata", "v1beta1-release", "charts", "capov-crds"),
				"--kubeconfig", kubeconfig, "--wait"); err != nil {
				return err
			}
			return run(ctx, helm, "install", "capov", filepath.Join("testdata", "v1beta1-release", "charts", "capov"),
				"--kubeconfig", kubeconfig, "-n", "capov-system", "--create-namespace")
		},
		ManagerArgs: []string{"--vm-poll-interval=500ms", "--node-poll-interval=500ms"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer stack.Stop()
	c := stack.MgmtClient()
	// The charts' webhook configurations (and, after the upgrade, the CRDs' conversion) call the
	// webhook Service, which envtest cannot reach: point them at the webhook process, and drop
	// the configurations the harness registered, so that only the charts' remain.
	restoreChartWebhooks := useChartWebhooks(ctx, g, c, stack)

	t.Log("The v1beta1 release runs the product doc's examples until everything is Ready")
	applyExamples(t, ctx, stack)
	g.Eventually(func(g Gomega) { expectEverythingReady(ctx, g, c, "v1beta1") }).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
	before := snapshot(ctx, g, c, "v1beta1")
	vmsBefore := stack.Sim.VMs()
	writesBefore := vmWrites(stack.Sim)
	putsBefore := stack.Sim.RequestCount("PUT", "/vms/{id}")
	g.Expect(writesBefore).To(BeNumerically(">=", 4), "the old release created four VMs: the write counter must see them")

	t.Log("Upgrade: the webhook and manager stop, both charts are upgraded (capov-crds first), this version's binaries start")
	g.Expect(stack.Manager.Stop(30 * time.Second)).To(Succeed())
	g.Expect(stack.Webhook.Stop(30 * time.Second)).To(Succeed())
	g.Expect(run(ctx, helm, "upgrade", "capov-crds", filepath.Join(root, "charts", "capov-crds"), "--kubeconfig", kubeconfig, "--wait")).To(Succeed())
	restoreChartWebhooks()
	g.Expect(run(ctx, helm, "upgrade", "capov", filepath.Join(root, "charts", "capov"), "--kubeconfig", kubeconfig, "-n", "capov-system")).To(Succeed())
	pointConversionAtTheLocalWebhook(ctx, g, c, stack)
	useChartWebhooks(ctx, g, c, stack)
	g.Expect(stack.StartWebhook(ctx, newWebhook)).To(Succeed())
	stack.ManagerBin = newManager
	stack.Manager, _, err = stack.StartManager(ctx, "manager-new", []string{"--vm-poll-interval=500ms", "--node-poll-interval=500ms"})
	g.Expect(err).NotTo(HaveOccurred())

	t.Log("The CRD migrator leaves storedVersions [v1beta2]; everything stays Ready in both versions")
	g.Eventually(func(g Gomega) {
		for _, name := range ourCRDs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1beta2"}), name)
		}
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		expectEverythingReady(ctx, g, c, "v1beta1")
		expectEverythingReady(ctx, g, c, "v1beta2")
	}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
	after := snapshot(ctx, g, c, "v1beta1")
	g.Expect(after).To(HaveLen(len(before)))
	for key, spec := range before {
		g.Expect(cmp.Diff(spec, after[key])).To(BeEmpty(), "the spec of %s must read the same in v1beta1 after the upgrade", key)
	}

	t.Log("No VM was written to, except that its bootstrap data was cleared and its owner marker gained the management cluster, once each")
	// This release removes the bootstrap data (join token) from the VMs of registered Nodes
	// (docs/operations.md, "Bootstrap data in oVirt"), and writes the management-cluster id into
	// the owner marker of each VM at its machine's first read (docs/operations.md, "The
	// management cluster id"): one PUT /vms/{id} each per VM, nothing else.
	g.Eventually(func(g Gomega) {
		for _, vm := range vmsBefore {
			got, _ := stack.Sim.VM(vm.ID)
			g.Expect(got.CustomScript).To(BeEmpty(), "VM %s", vm.Name)
			g.Expect(got.Comment).To(ContainSubstring(" management-cluster="), "VM %s", vm.Name)
		}
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	// A reconcile that read the object just before the status recording the clear arrived may
	// clear it again: harmless (the same PUT), and rare.
	puts := stack.Sim.RequestCount("PUT", "/vms/{id}") - putsBefore
	g.Expect(vmWrites(stack.Sim)-writesBefore).To(Equal(puts), "only the bootstrap data of the VMs changed: %v", writeRequests(stack.Sim))
	g.Expect(puts).To(And(BeNumerically(">=", 2*len(vmsBefore)), BeNumerically("<=", 3*len(vmsBefore))))
	vmsAfter := stack.Sim.VMs()
	g.Expect(vmsAfter).To(HaveLen(len(vmsBefore)))
	for _, vm := range vmsBefore {
		got, ok := stack.Sim.VM(vm.ID)
		g.Expect(ok).To(BeTrue(), "VM %s disappeared", vm.Name)
		g.Expect(got.Status).To(Equal(vm.Status), "VM %s", vm.Name)
		g.Expect(got.Comment).To(HavePrefix(vm.Comment+" management-cluster="), "VM %s: the owner marker only gained the management cluster", vm.Name)
		g.Expect(got.HostName).To(Equal(vm.HostName), "VM %s", vm.Name)
	}
}

// buildRelease builds the manager and webhook of oldRelease from the repository history.
func buildRelease(t *testing.T, ctx context.Context, root, dir string) map[string]string {
	t.Helper()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", oldRelease)
	var tarball, stderr bytes.Buffer
	archive.Stdout, archive.Stderr = &tarball, &stderr
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s (the test needs the repository history: a full clone): %v\n%s", oldRelease, err, stderr.String())
	}
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	untar.Stdin = &tarball
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	bins := map[string]string{"root": src}
	for _, name := range []string{"manager", "webhook"} {
		out := filepath.Join(dir, "bin", name)
		build := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/"+name)
		build.Dir = src
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false -trimpath", "GOWORK="+filepath.Join(src, "go.work"))
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the %s of %s: %v\n%s", name, oldRelease, err, b)
		}
		bins[name] = out
	}
	return bins
}

func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, b.String())
	}
	return nil
}

// applyExamples applies docs/examples (v1beta1 CAPOV objects, v1beta2 CAPI objects) as the demo
// does, with the kubeconfig Secret a control-plane provider would write.
func applyExamples(t *testing.T, ctx context.Context, stack *harness.Stack) {
	t.Helper()
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"OVIRT_URL": stack.SimURL, "OVIRT_USERNAME": stack.SimUsername, "OVIRT_PASSWORD": stack.SimPassword,
		"OVIRT_CA_B64": base64.StdEncoding.EncodeToString(stack.SimCAPEM),
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "examples", "0[1-6]-*.yaml"))
	if err != nil || len(files) != 6 {
		t.Fatalf("docs/examples: %v %v", files, err)
	}
	slices.Sort(files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", stack.KubeconfigPath, "apply", "-f", "-")
		cmd.Stdin = strings.NewReader(os.Expand(string(raw), func(k string) string { return vars[k] }))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", filepath.Base(f), err, out)
		}
		if strings.HasSuffix(f, "03-cluster.yaml") {
			if err := stack.MgmtClient().Create(ctx, harness.KubeconfigSecret(harness.Cluster("demo", "demo"), stack.WorkloadKubeconfig)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func list(ctx context.Context, g Gomega, c client.Client, version, kind, namespace string) []unstructured.Unstructured {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: version, Kind: kind + "List"})
	opts := []client.ListOption{}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	g.Expect(c.List(ctx, l, opts...)).To(Succeed())
	return l.Items
}

// expectEverythingReady: the provider, the cluster and the four machines Ready in the given
// version's terms, and their CAPI Machines Running.
func expectEverythingReady(ctx context.Context, g Gomega, c client.Client, version string) {
	ready := func(o unstructured.Unstructured) bool {
		if version == "v1beta1" {
			r, _, _ := unstructured.NestedBool(o.Object, "status", "ready")
			return r && conditionTrue(o, "Ready", "status", "conditions")
		}
		if o.GetKind() != "OVirtProvider" {
			p, _, _ := unstructured.NestedBool(o.Object, "status", "initialization", "provisioned")
			if !p {
				return false
			}
		}
		return conditionTrue(o, "Ready", "status", "conditions")
	}
	providers := list(ctx, g, c, version, "OVirtProvider", "")
	g.Expect(providers).NotTo(BeEmpty())
	for _, kind := range []string{"OVirtProvider", "OVirtCluster", "OVirtMachine"} {
		items := list(ctx, g, c, version, kind, namespaceOf(kind))
		g.Expect(items).NotTo(BeEmpty(), kind)
		for _, o := range items {
			g.Expect(ready(o)).To(BeTrue(), "%s %s is not Ready in %s: %v", kind, o.GetName(), version, o.Object["status"])
			if version == "v1beta2" || kind == "OVirtProvider" {
				// Only a v1beta1 view of a contract kind carries the conversion data.
				g.Expect(o.GetAnnotations()).NotTo(HaveKey("cluster.x-k8s.io/conversion-data"), "%s %s", kind, o.GetName())
			}
		}
		if kind == "OVirtMachine" {
			g.Expect(items).To(HaveLen(4))
		}
	}
	machines := &clusterv1.MachineList{}
	g.Expect(c.List(ctx, machines, client.InNamespace("demo"))).To(Succeed())
	g.Expect(machines.Items).To(HaveLen(4))
	for _, m := range machines.Items {
		g.Expect(m.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)), m.Name)
	}
}

func namespaceOf(kind string) string {
	if kind == "OVirtProvider" {
		return ""
	}
	return "demo"
}

func conditionTrue(o unstructured.Unstructured, t string, path ...string) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, path...)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == t {
			return m["status"] == "True"
		}
	}
	return false
}

// snapshot returns the spec of every CAPOV object read in a version, decoded into the v1beta1
// types, by kind/namespace/name. Typed, because conversion goes through the types: a field
// written with its zero value (tls.insecure: false) reads back as absent, which means the same.
func snapshot(ctx context.Context, g Gomega, c client.Client, version string) map[string]any {
	out := map[string]any{}
	for _, kind := range []string{"OVirtProvider", "OVirtCluster", "OVirtMachine", "OVirtMachineTemplate"} {
		for _, o := range list(ctx, g, c, version, kind, namespaceOf(kind)) {
			var typed any
			switch kind {
			case "OVirtProvider":
				typed = &infrav1beta1.OVirtProvider{}
			case "OVirtCluster":
				typed = &infrav1beta1.OVirtCluster{}
			case "OVirtMachine":
				typed = &infrav1beta1.OVirtMachine{}
			default:
				typed = &infrav1beta1.OVirtMachineTemplate{}
			}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, typed)).To(Succeed())
			out[kind+"/"+o.GetNamespace()+"/"+o.GetName()] = reflect.ValueOf(typed).Elem().FieldByName("Spec").Interface()
		}
	}
	return out
}

// vmWrites counts the requests that change VMs (every method but GET on /vms...).
// writeRequests lists the counts of the requests that change VMs, for failure messages.
func writeRequests(sim *ovirtsim.Simulator) map[string]int {
	out := map[string]int{}
	for k, v := range sim.Requests() {
		if k.Method != "GET" && strings.HasPrefix(k.Path, "/vms") {
			out[k.Method+" "+k.Path] += v
		}
	}
	return out
}

func vmWrites(sim *ovirtsim.Simulator) int {
	n := 0
	for k, v := range sim.Requests() {
		if k.Method != "GET" && strings.HasPrefix(k.Path, "/vms") {
			n += v
		}
	}
	return n
}

// pointConversionAtTheLocalWebhook does for the test what the webhook Service and cert-manager's
// CA injection do in a cluster: the API server of envtest reaches the webhook at a local URL.
func pointConversionAtTheLocalWebhook(ctx context.Context, g Gomega, c client.Client, stack *harness.Stack) {
	url := "https://" + stack.WebhookAddr + "/convert"
	for _, name := range ourCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
		g.Expect(crd.Spec.Conversion).NotTo(BeNil(), "the chart's %s must configure conversion", name)
		g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.WebhookConverter), name)
		crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{
			URL: &url, CABundle: stack.Mgmt.Env.WebhookInstallOptions.LocalServingCAData,
		}
		g.Expect(c.Update(ctx, crd)).To(Succeed())
	}
}

// useChartWebhooks points every webhook of the charts' admission configurations at the
// webhook process (URL and envtest's CA instead of the Service and cert-manager's CA injection)
// and deletes the configurations the harness registered from config/webhook. The returned
// function puts the charts' Service client configurations back, as Helm applied them: Helm's
// three-way merge of an upgrade would otherwise remove the URL and leave neither.
func useChartWebhooks(ctx context.Context, g Gomega, c client.Client, stack *harness.Stack) (restore func()) {
	ca := stack.Mgmt.Env.WebhookInstallOptions.LocalServingCAData
	saved := map[string]admissionregistrationv1.WebhookClientConfig{}
	kinds := map[string]int{}
	for _, cfg := range chartWebhookConfigurations(ctx, g, c) {
		kinds[fmt.Sprintf("%T", cfg)]++
		for name, cc := range webhookClientConfigs(cfg) {
			if cc.Service == nil {
				continue
			}
			saved[webhookKey(cfg, name)] = *cc.DeepCopy()
			url := "https://" + stack.WebhookAddr
			if cc.Service.Path != nil {
				url += *cc.Service.Path
			}
			cc.Service, cc.URL, cc.CABundle = nil, &url, ca
		}
		g.Expect(c.Update(ctx, cfg)).To(Succeed())
	}
	g.Expect(kinds).To(Equal(map[string]int{
		"*v1.MutatingWebhookConfiguration": 1, "*v1.ValidatingWebhookConfiguration": 1,
	}), "the capov chart installs one mutating and one validating configuration")
	g.Expect(saved).NotTo(BeEmpty(), "the chart's webhooks call the webhook Service")
	return func() {
		for _, cfg := range chartWebhookConfigurations(ctx, g, c) {
			for name, cc := range webhookClientConfigs(cfg) {
				if orig, ok := saved[webhookKey(cfg, name)]; ok {
					*cc = orig
				}
			}
			g.Expect(c.Update(ctx, cfg)).To(Succeed())
		}
	}
}

// chartWebhookConfigurations lists the mutating and validating webhook configurations the
// charts installed, and deletes the others (envtest's, of the previous binaries).
func chartWebhookConfigurations(ctx context.Context, g Gomega, c client.Client) []client.Object {
	mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	g.Expect(c.List(ctx, mutating)).To(Succeed())
	g.Expect(c.List(ctx, validating)).To(Succeed())
	var all, out []client.Object
	for i := range mutating.Items {
		all = append(all, &mutating.Items[i])
	}
	for i := range validating.Items {
		all = append(all, &validating.Items[i])
	}
	for _, o := range all {
		if o.GetLabels()["app.kubernetes.io/managed-by"] == "Helm" {
			out = append(out, o)
			continue
		}
		g.Expect(c.Delete(ctx, o)).To(Succeed())
	}
	return out
}

// webhookClientConfigs returns the client configuration of each webhook of a mutating or
// validating webhook configuration, by webhook name, for changing in place.
func webhookClientConfigs(o client.Object) map[string]*admissionregistrationv1.WebhookClientConfig {
	out := map[string]*admissionregistrationv1.WebhookClientConfig{}
	switch cfg := o.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for j := range cfg.Webhooks {
			out[cfg.Webhooks[j].Name] = &cfg.Webhooks[j].ClientConfig
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for j := range cfg.Webhooks {
			out[cfg.Webhooks[j].Name] = &cfg.Webhooks[j].ClientConfig
		}
	}
	return out
}

func webhookKey(cfg client.Object, webhook string) string {
	return fmt.Sprintf("%T/%s/%s", cfg, cfg.GetName(), webhook)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
