package clusterctlupgrade

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capov/capov/test/certmanager"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
)

const (
	// previousRelease is the commit of CAPOV v0.2.0 (v1beta2 stored, v1beta1 served).
	previousRelease = "6a209b9"
	previousVersion = "v0.2.0"
	// thisVersion is the version this tree is released as.
	thisVersion = "v0.3.0"
	// standInImage is the image the cert-manager manifest names (envtest never pulls it).
	standInImage = "ghcr.io/capov/cert-manager-stand-in:test"
)

// originalKinds are the CAPOV kinds of the v1beta1 API, which must stay served in both versions.
var originalKinds = []string{"ovirtproviders", "ovirtclusters", "ovirtmachines", "ovirtmachinetemplates"}

func TestClusterctlInitAndUpgradeFromThePreviousRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release's components and runs clusterctl init and upgrade")
	}
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root, err := envtest.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	work := t.TempDir()
	clusterctl := tool(t, root, "CLUSTERCTL", "clusterctl.sh")
	config := repository(t, ctx, root, filepath.Join(work, "repository"))
	standIn, err := buildStandIn(ctx, root, filepath.Join(work, "bin"))
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig := filepath.Join(work, "kubeconfig")
	run := func(args ...string) string {
		t.Helper()
		out, err := runClusterctl(ctx, clusterctl, work, append(args, "--config", config)...)
		g.Expect(err).NotTo(HaveOccurred(), out)
		return out
	}

	upgradeScenario(t, ctx, work, installation{
		withoutCAPICRDs: true,
		install: func(ctx context.Context, env *envtest.Environment) error {
			if err := cmapi.AddToScheme(env.Scheme); err != nil {
				return err
			}
			kc, err := env.Kubeconfig("mgmt")
			if err != nil {
				return err
			}
			if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
				return err
			}
			// The stand-in starts once clusterctl has installed cert-manager's CRDs, as
			// cert-manager's Deployment would start once created.
			t.Cleanup(startWhenCRDsExist(ctx, t, env.Client, standIn, kubeconfig, filepath.Join(work, "cert-manager.log")))
			t.Logf("clusterctl init --infrastructure ovirt:%s", previousVersion)
			out := run("init", "--infrastructure", "ovirt:"+previousVersion, "--kubeconfig", kubeconfig)
			g.Expect(out).To(ContainSubstring("Installing cert-manager"))
			g.Expect(out).To(ContainSubstring("Waiting for cert-manager to be available"))
			expectInventory(ctx, g, env.Client, "infrastructure-ovirt", previousVersion)
			expectCertificatesAndInjection(ctx, g, env.Client)
			return nil
		},
		ours: func(o client.Object) bool {
			return o.GetLabels()[clusterv1.ProviderNameLabel] == "infrastructure-ovirt"
		},
		upgrade: func(ctx context.Context, g Gomega, stack *harness.Stack, restore func()) {
			// clusterctl patches the CRDs (a patch would keep the process's URL beside the
			// Service) and re-creates every other object of the provider: the CRDs get their
			// Service and cert-manager's CA injection back first, as they were installed.
			restore()
			t.Logf("clusterctl upgrade apply --infrastructure capov-system/ovirt:%s", thisVersion)
			out := run("upgrade", "apply", "--infrastructure", "capov-system/ovirt:"+thisVersion, "--kubeconfig", kubeconfig)
			g.Expect(out).NotTo(ContainSubstring("Deleting cert-manager"), "the same cert-manager version is not reinstalled")
			expectInventory(ctx, g, stack.MgmtClient(), "infrastructure-ovirt", thisVersion)
			expectCertificatesAndInjection(ctx, g, stack.MgmtClient())
			expectServedVersions(ctx, g, stack.MgmtClient())
		},
		afterUpgrade: func(ctx context.Context, g Gomega, stack *harness.Stack) {
			moveAfterUpgrade(t, ctx, g, stack, standIn, run)
		},
	})
}

// expectServedVersions: the original kinds are served in v1beta1 and v1beta2 and stored in
// v1beta2; the kinds new in this version exist.
func expectServedVersions(ctx context.Context, g Gomega, c client.Client) {
	for _, plural := range originalKinds {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: plural + ".infrastructure.cluster.x-k8s.io"}, crd)).To(Succeed())
		served := map[string]bool{}
		for _, v := range crd.Spec.Versions {
			served[v.Name] = v.Served
			if v.Storage {
				g.Expect(v.Name).To(Equal("v1beta2"), plural)
			}
		}
		g.Expect(served).To(Equal(map[string]bool{"v1beta1": true, "v1beta2": true}), plural)
	}
	for _, plural := range []string{"ovirthostdeviceclaims", "ovirtremediations", "ovirtremediationtemplates"} {
		g.Expect(c.Get(ctx, client.ObjectKey{Name: plural + ".infrastructure.cluster.x-k8s.io"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed(), plural)
	}
}

// repository lays out the local clusterctl repository and writes its configuration.
func repository(t *testing.T, ctx context.Context, root, dir string) string {
	t.Helper()
	capiDir, err := envtest.ModuleDir(ctx, "sigs.k8s.io/cluster-api")
	if err != nil {
		t.Fatal(err)
	}
	capiVersion := moduleVersion(t, ctx, root, "sigs.k8s.io/cluster-api")
	capiMetadata := readFile(t, filepath.Join(capiDir, "metadata.yaml"))
	old := filepath.Join(dir, "src-"+previousRelease)
	extract(t, ctx, root, previousRelease, old)
	manifest, err := certmanager.Manifest(ctx, standInImage)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct{ name, typ, label, version, file string }
	providers := []struct {
		entry
		files map[string][]byte
	}{
		{entry{"cluster-api", "CoreProvider", "cluster-api", capiVersion, "core-components.yaml"},
			map[string][]byte{"core-components.yaml": kustomize(t, ctx, filepath.Join(capiDir, "core", "config", "default")), "metadata.yaml": capiMetadata}},
		{entry{"kubeadm", "BootstrapProvider", "bootstrap-kubeadm", capiVersion, "bootstrap-components.yaml"},
			map[string][]byte{"bootstrap-components.yaml": kustomize(t, ctx, filepath.Join(capiDir, "bootstrap", "kubeadm", "config", "default")), "metadata.yaml": capiMetadata}},
		{entry{"kubeadm", "ControlPlaneProvider", "control-plane-kubeadm", capiVersion, "control-plane-components.yaml"},
			map[string][]byte{"control-plane-components.yaml": kustomize(t, ctx, filepath.Join(capiDir, "controlplane", "kubeadm", "config", "default")), "metadata.yaml": capiMetadata}},
		{entry{"ovirt", "InfrastructureProvider", "infrastructure-ovirt", previousVersion, "infrastructure-components.yaml"},
			map[string][]byte{"infrastructure-components.yaml": kustomize(t, ctx, filepath.Join(old, "config", "default")), "metadata.yaml": readFile(t, filepath.Join(old, "metadata.yaml")),
				"cluster-template.yaml": readFile(t, filepath.Join(old, "templates", "cluster-template.yaml"))}},
		{entry{"ovirt", "InfrastructureProvider", "infrastructure-ovirt", thisVersion, "infrastructure-components.yaml"},
			map[string][]byte{"infrastructure-components.yaml": kustomize(t, ctx, filepath.Join(root, "config", "default")), "metadata.yaml": readFile(t, filepath.Join(root, "metadata.yaml")),
				"cluster-template.yaml": readFile(t, filepath.Join(root, "templates", "cluster-template.yaml"))}},
		{entry{"cert-manager", "", "cert-manager", certmanager.Version, "cert-manager.yaml"}, map[string][]byte{"cert-manager.yaml": manifest}},
	}
	var config strings.Builder
	config.WriteString("providers:\n")
	urls := map[string]string{}
	for _, p := range providers {
		rel := filepath.Join(dir, p.label, p.version)
		if err := os.MkdirAll(rel, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range p.files {
			if err := os.WriteFile(filepath.Join(rel, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// The newest version's URL; clusterctl finds the others beside it.
		urls[p.name+"/"+p.typ] = filepath.Join(rel, p.file)
	}
	for _, p := range providers {
		key := p.name + "/" + p.typ
		if p.typ == "" || urls[key] == "" {
			continue
		}
		fmt.Fprintf(&config, "  - name: %s\n    type: %s\n    url: %s\n", p.name, p.typ, urls[key])
		delete(urls, key)
	}
	fmt.Fprintf(&config, "cert-manager:\n  url: %s\n  version: %s\n", urls["cert-manager/"], certmanager.Version)
	path := filepath.Join(dir, "clusterctl.yaml")
	if err := os.WriteFile(path, []byte(config.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// expectInventory checks clusterctl's record of the installed provider.
func expectInventory(ctx context.Context, g Gomega, c client.Client, name, version string) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "ProviderList"})
	g.Expect(c.List(ctx, l)).To(Succeed())
	versions := map[string]string{}
	for _, p := range l.Items {
		v, _, _ := unstructured.NestedString(p.Object, "version")
		versions[p.GetName()] = v
	}
	g.Expect(versions).To(HaveKeyWithValue(name, version))
	g.Expect(versions).To(HaveKey("cluster-api"))
}

// expectCertificatesAndInjection: every provider's Certificates are Ready and every annotated
// CRD and webhook configuration carries its Certificate's CA.
func expectCertificatesAndInjection(ctx context.Context, g Gomega, c client.Client) {
	g.Eventually(func(g Gomega) {
		certs := &cmapi.CertificateList{}
		g.Expect(c.List(ctx, certs)).To(Succeed())
		namespaces := map[string]bool{}
		for _, crt := range certs.Items {
			namespaces[crt.Namespace] = true
			ready := false
			for _, cond := range crt.Status.Conditions {
				if cond.Type == cmapi.CertificateConditionReady && cond.Status == cmmeta.ConditionTrue && cond.ObservedGeneration == crt.Generation {
					ready = true
				}
			}
			g.Expect(ready).To(BeTrue(), "Certificate %s/%s: %v", crt.Namespace, crt.Name, crt.Status.Conditions)
		}
		g.Expect(namespaces).To(HaveKey("capov-system"))
		g.Expect(namespaces).To(HaveKey("capi-system"))
		crds := &apiextensionsv1.CustomResourceDefinitionList{}
		g.Expect(c.List(ctx, crds)).To(Succeed())
		injected := 0
		for _, crd := range crds.Items {
			ref := crd.Annotations[certmanager.AnnotationInjectFrom]
			if ref == "" || crd.Spec.Conversion == nil || crd.Spec.Conversion.Webhook == nil {
				continue
			}
			g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).To(Equal(caOf(ctx, g, c, ref)), crd.Name)
			injected++
		}
		g.Expect(injected).To(BeNumerically(">=", 4+8), "CAPI's and CAPOV's CRDs")
		vwcs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		g.Expect(c.List(ctx, vwcs)).To(Succeed())
		for _, w := range vwcs.Items {
			if ref := w.Annotations[certmanager.AnnotationInjectFrom]; ref != "" {
				for _, h := range w.Webhooks {
					g.Expect(h.ClientConfig.CABundle).To(Equal(caOf(ctx, g, c, ref)), w.Name+" "+h.Name)
				}
			}
		}
	}).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
}

func caOf(ctx context.Context, g Gomega, c client.Client, ref string) []byte {
	ns, name, _ := strings.Cut(ref, "/")
	crt := &cmapi.Certificate{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, crt)).To(Succeed())
	s := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: crt.Spec.SecretName}, s)).To(Succeed())
	g.Expect(s.Data["ca.crt"]).NotTo(BeEmpty())
	return s.Data["ca.crt"]
}

// startWhenCRDsExist starts the stand-in once cert-manager's Certificate CRD is established;
// the returned function stops it.
func startWhenCRDsExist(ctx context.Context, t *testing.T, c client.Client, bin, kubeconfig, logPath string) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan *harness.Process, 1)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if c.Get(ctx, client.ObjectKey{Name: "certificates.cert-manager.io"}, crd) == nil {
				for _, cond := range crd.Status.Conditions {
					if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
						p, err := harness.Start("cert-manager", bin, []string{"--kubeconfig", kubeconfig}, nil, logPath)
						if err != nil {
							t.Errorf("starting the cert-manager stand-in: %v", err)
							return
						}
						done <- p
						return
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() {
		cancel()
		if p, ok := <-done; ok && p != nil {
			_ = p.Stop(10 * time.Second)
			if t.Failed() {
				t.Logf("cert-manager stand-in log:\n%s", harness.Tail(p.Logs(), 40))
			}
		}
	}
}

func buildStandIn(ctx context.Context, root, dir string) (string, error) {
	out := filepath.Join(dir, "cert-manager")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./test/certmanager/cmd/cert-manager")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the cert-manager stand-in: %w\n%s", err, b)
	}
	return out, nil
}

// runClusterctl runs clusterctl offline: no version check, a throw-away home.
func runClusterctl(ctx context.Context, bin, work string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, append(args, "-v", "2")...)
	home := filepath.Join(work, "home")
	_ = os.MkdirAll(home, 0o755)
	cmd.Env = append(os.Environ(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "HOME="+home, "GITHUB_TOKEN=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func tool(t *testing.T, root, envVar, script string) string {
	t.Helper()
	if p := os.Getenv(envVar); p != "" {
		return p
	}
	cmd := exec.Command(filepath.Join(root, "hack", script))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/%s: %v\n%s", script, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func moduleVersion(t *testing.T, ctx context.Context, root, module string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", module)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	return strings.TrimSpace(string(out))
}

// extract writes the tree of a commit into dir (git archive: the test needs the history).
func extract(t *testing.T, ctx context.Context, root, commit, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", commit)
	var tarball, stderr bytes.Buffer
	archive.Stdout, archive.Stderr = &tarball, &stderr
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s (the test needs the repository history: a full clone): %v\n%s", commit, err, stderr.String())
	}
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	untar.Stdin = &tarball
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
}

func kustomize(t *testing.T, ctx context.Context, dir string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, "kubectl", "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
