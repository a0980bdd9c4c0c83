package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// webhookOutageFilter is the watch filter of this file's manager and webhook.
const webhookOutageFilter = "webhook-outage"

// webhookUnreachable is the API server's message when a failurePolicy Fail webhook cannot be
// called.
const webhookUnreachable = "failed calling webhook"

// TestDeletionCompletesWhileTheWebhookIsDown runs the manager as a real installation does:
// authenticated as its ServiceAccount capov-system/capov-manager (a TokenRequest token) with
// exactly the RBAC of the clusterctl components, next to the webhook binary registered with
// config/webhook/manifests.yaml. With the webhook process gone (its configurations, with
// failurePolicy Fail, still registered), the deletion of an OVirtMachine still completes: the
// VM is removed and the manager's finalizer patch is admitted, because the configurations skip
// the manager's own updates that leave the spec alone (matchConditions). Everybody else's
// writes, and a spec change by the manager, are still refused while the webhook is down.
func TestDeletionCompletesWhileTheWebhookIsDown(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root, err := envtest.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())

	// The manager's identity and RBAC, as `clusterctl init` installs them.
	g.Expect(harness.InstallRBAC(ctx, k8s, root)).To(Succeed())
	kc, err := harness.ServiceAccountKubeconfig(ctx, k8s, env.Config, harness.ManagerNamespace, harness.ManagerServiceAccount)
	g.Expect(err).NotTo(HaveOccurred())
	saKubeconfig := filepath.Join(workDir, "capov-manager.kubeconfig")
	g.Expect(os.WriteFile(saKubeconfig, kc, 0o600)).To(Succeed())
	saConfig, err := clientcmd.RESTConfigFromKubeConfig(kc)
	g.Expect(err).NotTo(HaveOccurred())
	asManager, err := client.New(saConfig, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	// A provider of this test's manager, with credentials of its own in the credentials
	// namespace. Created before the webhook so that it is deleted after the webhook
	// configurations are gone (cleanups run last-in first-out).
	secret := harness.CredentialsSecret(credentialsNamespace, "webhook-outage-credentials", sim.Username(), sim.Password())
	g.Expect(k8s.Create(ctx, secret)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), secret) })
	p := harness.Provider("webhook-outage", sim.URL(), secret.Name, sim.CAPEM())
	p.Labels = filterLabels(webhookOutageFilter)
	g.Expect(k8s.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })

	wh := startWebhook(t, webhookOutageFilter, "disk-clone=false")
	// A later --kubeconfig wins over startManager's admin kubeconfig.
	mgr, err := startManager("webhook-outage", webhookOutageFilter, "--kubeconfig="+saKubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = mgr.Stop(20 * time.Second) })

	// The provider connects: the manager reads its credentials through its cache of the
	// credentials namespace (list and watch there only).
	g.Eventually(func(g Gomega) {
		got := &infrav1.OVirtProvider{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(providerV1Beta1(got).Ready).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	tc := newTestCluster(t, webhookOutageFilter)
	spec := vmSpec()
	spec.Provider = p.Name
	_, deleted := tc.newMachine(t, spec, ignitionConfig)
	_, probed := tc.newMachine(t, spec, ignitionConfig)
	var vm ovirtsim.VMState
	for _, om := range []*infrav1.OVirtMachine{deleted, probed} {
		v := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
		eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
			g.Expect(om.Spec.ProviderID).To(Equal(infrav1.ProviderIDPrefix + v.ID))
			g.Expect(controllerutil.ContainsFinalizer(om, infrav1.MachineFinalizer)).To(BeTrue())
		})
		if om == deleted {
			vm = v
		}
	}

	// The outage: the webhook process stops, its configurations stay.
	_ = wh.process.Stop(20 * time.Second)
	exited, _ := wh.process.Exited()
	g.Expect(exited).To(BeTrue())

	t.Run("the deletion completes: VM removed, finalizer dropped", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8s.Delete(ctx, deleted)).To(Succeed())
		g.Eventually(func(g Gomega) {
			for _, v := range sim.VMs() {
				g.Expect(v.ID).NotTo(Equal(vm.ID), "VM %s is still in oVirt", vm.ID)
			}
			err := k8s.Get(ctx, client.ObjectKeyFromObject(deleted), &infrav1.OVirtMachine{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the OVirtMachine is still there (finalizer kept?): %v", err)
		}, timeout, interval).Should(Succeed())
	})

	t.Run("everybody else's writes are still refused", func(t *testing.T) {
		g := NewWithT(t)
		om := getOM(g, probed)
		base := om.DeepCopy()
		om.Labels["team"] = "a"
		err := k8s.Patch(ctx, om, client.MergeFrom(base))
		g.Expect(err).To(MatchError(ContainSubstring(webhookUnreachable)), "an admin's label change goes through the webhook")
	})

	t.Run("the manager's metadata updates are admitted, its spec changes are not", func(t *testing.T) {
		g := NewWithT(t)
		om := getOM(g, probed)
		base := om.DeepCopy()
		om.Annotations = map[string]string{"test.capov.io/probe": "metadata"}
		g.Expect(asManager.Patch(ctx, om, client.MergeFrom(base))).To(Succeed())

		om = getOM(g, probed)
		base = om.DeepCopy()
		om.Spec.ProviderID = infrav1.ProviderIDPrefix + "00000000-0000-0000-0000-000000000001"
		err := asManager.Patch(ctx, om, client.MergeFrom(base))
		g.Expect(err).To(MatchError(ContainSubstring(webhookUnreachable)), "a spec change by the manager is still validated")
		g.Expect(getOM(g, probed).Spec.ProviderID).To(Equal(base.Spec.ProviderID))
	})

	t.Run("after the outage", func(t *testing.T) {
		g := NewWithT(t)
		wh.restart("disk-clone=false")
		deleteAndWait(t, probed)
		g.Expect(client.IgnoreNotFound(k8s.Delete(ctx, p))).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(p), &infrav1.OVirtProvider{}))
		}, timeout, interval).Should(BeTrue(), "the manager releases its provider")
		// The manager's RBAC was enough for the whole lifecycle.
		g.Expect(mgr.Logs()).NotTo(ContainSubstring("is forbidden: User"))
	})
}
