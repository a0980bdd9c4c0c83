package charts

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/test/envtest"
)

// TestTheMainChartRefusesAClusterWithoutClusterAPI: on a cluster without Cluster API core the
// manager cannot start (it watches Clusters and Machines; on a real node it crash-looped). The
// chart refuses at install, before anything is created, and says what to install; once Cluster
// API's CRDs are there the same install goes through. The test runs its own API server: the
// shared one has Cluster API installed.
func TestTheMainChartRefusesAClusterWithoutClusterAPI(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, err := envtest.Start(ctx, envtest.Options{WithoutCAPICRDs: true, WithoutOurCRDs: true, WithCertManagerCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = e.Stop() })
	h := newHelmInstaller(t, e.Config)
	g.Expect(ensureOperatorNamespace(ctx, e.Client)).To(Succeed())

	_, err = h.install(crdsRelease, "capov-crds", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool { return servesCAPOV(e.Config) }).WithTimeout(time.Minute).Should(BeTrue())

	_, err = h.install(mainRelease, "capov", nil)
	g.Expect(err).To(MatchError(And(
		ContainSubstring("Cluster API core is not installed, or is older than v1.11 (cluster.x-k8s.io/v1beta2 clusters, machines not served)"),
		ContainSubstring("Install Cluster API core first (clusterctl init"),
	)))
	g.Expect(helmReleases(ctx, e.Client)).To(ConsistOf(HavePrefix("sh.helm.release.v1."+crdsRelease+".")),
		"nothing of the main release is recorded")

	g.Expect(envtest.InstallCAPICRDs(ctx, e.Config)).To(Succeed())
	_, err = h.install(mainRelease, "capov", nil)
	g.Expect(err).NotTo(HaveOccurred(), "with Cluster API installed the same install goes through")
}
