package clusterctlupgrade

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capov/capov/test/clusterctl"
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
	bin, err := clusterctl.Binary(root)
	g.Expect(err).NotTo(HaveOccurred())
	old, err := harness.BuildRelease(ctx, root, previousRelease)
	g.Expect(err).NotTo(HaveOccurred())
	previous, err := clusterctl.TreeRelease(ctx, previousVersion, old.Src)
	g.Expect(err).NotTo(HaveOccurred())
	this, err := clusterctl.TreeRelease(ctx, thisVersion, root)
	g.Expect(err).NotTo(HaveOccurred())
	repo, err := clusterctl.WriteRepository(ctx, root, filepath.Join(work, "repository"), standInImage, previous, this)
	g.Expect(err).NotTo(HaveOccurred())
	standIn, err := clusterctl.BuildStandIn(ctx, root, filepath.Join(work, "bin"))
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig := filepath.Join(work, "kubeconfig")
	run := func(args ...string) string {
		t.Helper()
		out, err := clusterctl.Run(ctx, bin, work, append(args, "--config", repo.Config)...)
		g.Expect(err).NotTo(HaveOccurred())
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

// expectInventory checks clusterctl's record of the installed provider.
func expectInventory(ctx context.Context, g Gomega, c client.Client, name, version string) {
	versions, err := clusterctl.Inventory(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions).To(HaveKeyWithValue(name, version))
	g.Expect(versions).To(HaveKey("cluster-api"))
}

// expectCertificatesAndInjection: every provider's Certificates are Ready and every annotated
// CRD (Cluster API's and CAPOV's) and validating webhook configuration carries its
// Certificate's CA.
func expectCertificatesAndInjection(ctx context.Context, g Gomega, c client.Client) {
	g.Eventually(func() error { return clusterctl.CertificatesIssued(ctx, c, 4+8, "capov-system", "capi-system") }).
		WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
}

// startWhenCRDsExist starts the stand-in once clusterctl has installed cert-manager's CRDs; the
// returned function stops it.
func startWhenCRDsExist(ctx context.Context, t *testing.T, c client.Client, bin, kubeconfig, logPath string) func() {
	stop := clusterctl.StartStandInWhenCRDsExist(ctx, c, bin, kubeconfig, logPath, func(err error) { t.Error(err) })
	return func() {
		if logs := stop(); t.Failed() {
			t.Logf("cert-manager stand-in log:\n%s", harness.Tail(logs, 40))
		}
	}
}
