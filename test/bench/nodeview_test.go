package bench

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capov/capov/test/envtest"
)

// TestNodeViewsShowEachClusterOnlyItsOwnNodes guards the 5,000-machine scenario: a Cluster's
// view of the shared workload API server lists and watches its own Nodes only, and still reads
// any Node by name.
func TestNodeViewsShowEachClusterOnlyItsOwnNodes(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := envtest.Start(ctx, envtest.Options{WithoutCAPICRDs: true, WithoutOurCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = env.Env.Stop() }()
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	}
	for _, n := range []string{"a-0000", "a-0001", "b-0002"} {
		g.Expect(env.Client.Create(ctx, node(n))).To(Succeed())
	}
	views, err := startNodeViews(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	defer views.close()
	kc, err := views.kubeconfig("bench-a", []string{"a-0000", "a-0001", "a-0003"})
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.NewWithWatch(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())

	nodes := &corev1.NodeList{}
	g.Expect(c.List(ctx, nodes)).To(Succeed())
	g.Expect(names(nodes)).To(ConsistOf("a-0000", "a-0001"))
	g.Expect(c.List(ctx, nodes, client.MatchingLabels{"kubernetes.io/hostname": "a-0001"})).To(Succeed())
	g.Expect(names(nodes)).To(ConsistOf("a-0001"), "the client's own selector still applies")
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "b-0002"}, &corev1.Node{})).To(Succeed(), "a Node read by name passes")

	w, err := c.Watch(ctx, &corev1.NodeList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: nodes.ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	g.Expect(env.Client.Create(ctx, node("b-0004"))).To(Succeed())
	g.Expect(env.Client.Create(ctx, node("a-0003"))).To(Succeed())
	var ev watch.Event
	g.Eventually(w.ResultChan()).Should(Receive(&ev))
	g.Expect(ev.Type).To(Equal(watch.Added))
	g.Expect(ev.Object.(*corev1.Node).Name).To(Equal("a-0003"), "the watch skips another cluster's Node")
}

func names(nodes *corev1.NodeList) []string {
	out := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		out = append(out, n.Name)
	}
	return out
}
