package manager

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"

	"github.com/capov/capov/test/envtest"
)

// TestTheManagerNamesTheAPIsItLacks: started against an API server without Cluster API's CRDs
// (on a real node it waited for its caches and crash-looped after 2 minutes, saying only
// "timed out waiting for cache to be synced"), the manager stops at once and says what to
// install; with the CRDs installed the check passes.
func TestTheManagerNamesTheAPIsItLacks(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err := envtest.Start(ctx, envtest.Options{WithoutCAPICRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer env.Stop()

	opts := parseFlags(t, "--metrics-bind-address=0", "--health-probe-bind-address=0", "--leader-elect=false")
	start := time.Now()
	err = Run(ctx, opts, env.Config, logr.Discard())
	g.Expect(err).To(MatchError(And(
		ContainSubstring("cluster.x-k8s.io/v1beta2 Cluster, Machine not served"),
		ContainSubstring("install Cluster API core v1.11 or newer first (clusterctl init"),
	)))
	g.Expect(err).NotTo(MatchError(ContainSubstring("infrastructure.cluster.x-k8s.io")), "our CRDs are there")
	g.Expect(time.Since(start)).To(BeNumerically("<", time.Minute), "refused before waiting for any cache")

	g.Expect(envtest.InstallCAPICRDs(ctx, env.Config)).To(Succeed())
	g.Eventually(func() error { return checkRequiredAPIs(ctx, env.Config) }).WithTimeout(time.Minute).Should(Succeed())
}
