package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/capov/capov/test/envtest"
)

// TestFindNodePrefersProviderIDThenSystemUUIDThenName looks Nodes up the way the manager does,
// through a cache of a real API server with the indexes the manager gives its ClusterCache.
func TestFindNodePrefersProviderIDThenSystemUUIDThenName(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := envtest.Start(ctx, envtest.Options{WithoutCAPICRDs: true, WithoutOurCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })

	node := func(name, uuid, pid string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: pid}}
		g.Expect(env.Client.Create(ctx, n)).To(Succeed())
		n.Status.NodeInfo.SystemUUID = uuid
		g.Expect(env.Client.Status().Update(ctx, n)).To(Succeed())
	}
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	for _, idx := range WorkloadClusterIndexes() {
		g.Expect(c.IndexField(ctx, idx.Object, idx.Field, idx.ExtractValue)).To(Succeed())
	}
	go func() { _ = c.Start(ctx) }()
	g.Expect(c.WaitForCacheSync(ctx)).To(BeTrue())
	find := func(vmID, vmName, pid string) string {
		n, err := findNode(ctx, c, vmID, vmName, pid)
		g.Expect(err).NotTo(HaveOccurred())
		if n == nil {
			return ""
		}
		return n.Name
	}
	// The cache sees the Nodes a moment after the API server has them.
	eventually := func(want string, vmID, vmName, pid, why string) {
		g.Eventually(func() string { return find(vmID, vmName, pid) }).WithTimeout(30*time.Second).Should(Equal(want), why)
	}

	g.Expect(find("abcd-1234", "vm-1", "ovirt://abcd-1234")).To(BeEmpty(), "no Node yet")
	node("vm-1", "other", "")
	eventually("vm-1", "abcd-1234", "vm-1", "ovirt://abcd-1234", "by name when nothing else matches")
	node("renamed", "ABCD-1234", "")
	eventually("renamed", "abcd-1234", "vm-1", "ovirt://abcd-1234", "the system UUID wins over the name, case-insensitively")
	node("x", "", "ovirt://abcd-1234")
	eventually("x", "abcd-1234", "vm-1", "ovirt://abcd-1234", "the providerID wins over everything")
	g.Expect(find("ffff-0000", "vm-2", "ovirt://ffff-0000")).To(BeEmpty(), "another VM finds none of them")
}
