package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/envtest"
)

// TestTheGarbageCollectorDeletesTheClaimsOfAVanishedMachine: in every real cluster the garbage
// collector deletes an IPAddressClaim whose OVirtMachine is gone (CAPOV makes the machine its
// controller), so that its IPAM provider gives the address back. Without a collector the chaos
// suite saw such claims outlive their machines (its I4 "IPAddressClaim outlived its
// OVirtMachine", in the fault-free baseline): a leak no user has, and one that hid what the
// collector does. The stand-in now runs the real collector.
func TestTheGarbageCollectorDeletesTheClaimsOfAVanishedMachine(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err := envtest.Start(ctx, envtest.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Env.Stop() })
	dir := t.TempDir()
	kubeconfig, err := env.Kubeconfig("gc-test")
	g.Expect(err).NotTo(HaveOccurred())
	s := &Stack{Mgmt: env, opts: StackOptions{WorkDir: dir}, KubeconfigPath: filepath.Join(dir, "kubeconfig")}
	g.Expect(os.MkdirAll(filepath.Join(dir, "logs"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(s.KubeconfigPath, kubeconfig, 0o600)).To(Succeed())
	root, err := envtest.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.startGarbageCollector(ctx, root)).To(Succeed())
	t.Cleanup(func() { _ = s.GC.Stop(10 * time.Second) })

	c := env.Client
	om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "m1"},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: "p1", OVirtCluster: "Default", Template: "rhcos-4.14"}}}
	g.Expect(c.Create(ctx, om)).To(Succeed())
	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "m1-0-0"},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "workers"}}}
	g.Expect(controllerutil.SetControllerReference(om, claim, c.Scheme())).To(Succeed())
	g.Expect(c.Create(ctx, claim)).To(Succeed())

	g.Expect(c.Delete(ctx, om)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(claim), &ipamv1.IPAddressClaim{}))
	}, time.Minute, 200*time.Millisecond).Should(BeTrue(), "the claim of the deleted OVirtMachine is collected")
}
