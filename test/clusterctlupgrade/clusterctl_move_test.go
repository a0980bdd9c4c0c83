package clusterctlupgrade

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
)

// credentialsNamespace is where the examples' credentials Secret and the provider's move copy of
// it live (docs/examples/01-credentials.yaml; clusterctl's provider namespace).
const credentialsNamespace = "capov-system"

// moveAfterUpgrade runs `clusterctl move` of the examples' namespace from the upgraded management
// cluster to a second one that `clusterctl init` gave this version (ovirt:v0.3.0), with its own
// cert-manager stand-in. The target runs no CAPOV manager, webhook or Cluster API reconciler:
// clusterctl move itself needs none, it reads the source, creates the objects in the target at
// their storage version (v1beta2: no conversion is called) and deletes them in the source. No
// process serves the target's admission webhooks, so its configurations are deleted as the
// scenario does for Cluster API's in the source. What is checked: the Cluster, MachineDeployment,
// MachineSet, Machines, OVirtCluster, OVirtMachines, OVirtMachineTemplate and the Secrets linked
// to the Cluster arrive in the target, unpaused, and are gone from the source; the cluster-scoped
// OVirtProvider (its CRD has clusterctl's move-hierarchy label) arrives with the move copy of the
// credentials Secret it owns, and clusterctl leaves both in the source as it does every
// cluster-scoped hierarchy; the credentials Secret itself stays in the source only (it has no
// owner; the target's manager recreates it from the copy, pkg/controllers/provider_movecopy.go);
// no VM is written.
func moveAfterUpgrade(t *testing.T, ctx context.Context, g Gomega, stack *harness.Stack, standIn string, run func(args ...string) string) {
	start := time.Now()
	source := stack.MgmtClient()
	before := movable(ctx, g, source)
	// clusterctl moves a Secret only when a moved object owns it, its name is
	// <cluster>-<purpose> (kubeconfig, ca, ...) or it has the clusterctl.cluster.x-k8s.io/move
	// label. The examples' bootstrap data Secrets (docs/examples/04-bootstrap-data.yaml) are
	// none of these (a bootstrap provider's would be owned by its KubeadmConfig): they stay in
	// the source, and a Machine created in the target from the MachineDeployment would wait for
	// its bootstrap data. Should the examples label them for move, they go and this check changes.
	stays := []string{keyOf("Secret", harness.ExamplesNamespace, "demo-bootstrap-data"), keyOf("Secret", harness.ExamplesNamespace, "demo-bootstrap-ignition")}
	for _, key := range stays {
		g.Expect(before).To(HaveKey(key))
		delete(before, key)
	}
	g.Expect(before).To(HaveKey(keyOf("Secret", credentialsNamespace, "capovp-ovirt-demo-move")), "the upgraded manager keeps a move copy of the credentials")
	writesBefore := harness.VMWriteRequests(stack.Sim)

	target, err := envtest.Start(ctx, envtest.Options{WithoutCAPICRDs: true, WithoutOurCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = target.Stop() })
	kc, err := target.Kubeconfig("target")
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	targetKubeconfig := filepath.Join(dir, "kubeconfig")
	g.Expect(os.WriteFile(targetKubeconfig, kc, 0o600)).To(Succeed())
	t.Cleanup(startWhenCRDsExist(ctx, t, target.Client, standIn, targetKubeconfig, filepath.Join(dir, "cert-manager.log")))
	t.Logf("clusterctl init --infrastructure ovirt:%s in the target", thisVersion)
	run("init", "--infrastructure", "ovirt:"+thisVersion, "--kubeconfig", targetKubeconfig)
	expectInventory(ctx, g, target.Client, "infrastructure-ovirt", thisVersion)
	deleteAdmissionConfigurations(ctx, g, target.Client)
	initialized := time.Now()

	t.Logf("clusterctl move --namespace %s (target initialized in %s)", harness.ExamplesNamespace, initialized.Sub(start).Round(time.Second))
	out := run("move", "--namespace", harness.ExamplesNamespace, "--kubeconfig", stack.KubeconfigPath, "--to-kubeconfig", targetKubeconfig)
	t.Logf("clusterctl move took %s:\n%s", time.Since(initialized).Round(100*time.Millisecond), harness.Tail(out, 12))

	after := movable(ctx, g, target.Client)
	for key := range before {
		g.Expect(after).To(HaveKey(key), "moved to the target")
	}
	g.Expect(after[keyOf("Cluster", harness.ExamplesNamespace, "demo")]).To(Equal(false), "the Cluster is unpaused in the target")
	g.Expect(after).To(HaveLen(len(before)), "nothing else is in the target")
	// clusterctl copies a cluster-scoped object and what it owns (the OVirtProvider and its move
	// copy) and deletes neither in the source: other clusters may use them (mover.go,
	// deleteSourceObject). Everything else goes.
	copied := []string{keyOf("OVirtProvider", "", "ovirt-demo"), keyOf("Secret", credentialsNamespace, "capovp-ovirt-demo-move")}
	left := movable(ctx, g, source)
	g.Expect(left).To(HaveLen(len(stays)+len(copied)), "nothing else is left in the source: %v", left)
	for _, key := range stays {
		g.Expect(left).To(HaveKey(key), "the examples' bootstrap data Secrets are not moved")
	}
	for _, key := range copied {
		g.Expect(left).To(HaveKey(key), "a cluster-scoped object and its hierarchy are copied, not moved")
	}
	g.Expect(source.Get(ctx, client.ObjectKey{Namespace: credentialsNamespace, Name: "ovirt-demo-capov-provider-secret"}, &corev1.Secret{})).
		To(Succeed(), "the credentials Secret stays in the source")
	g.Expect(target.Client.Get(ctx, client.ObjectKey{Namespace: credentialsNamespace, Name: "ovirt-demo-capov-provider-secret"}, &corev1.Secret{})).
		To(Satisfy(apierrors.IsNotFound), "the credentials Secret itself is not carried: the target's manager recreates it from the copy")
	copyOwnedByTheMovedProvider(ctx, g, target.Client)
	g.Expect(harness.VMWriteRequests(stack.Sim)).To(Equal(writesBefore), "clusterctl move writes no VM")
	t.Logf("clusterctl move of %d objects to a freshly initialized management cluster took %s in all", len(before), time.Since(start).Round(time.Second))
}

// movable returns what clusterctl move is to carry, by kind/namespace/name: the examples'
// Cluster API and CAPOV objects, the Secrets of their namespace, the OVirtProviders and the
// move copies of credentials in the provider namespace. A Cluster's value is spec.paused.
func movable(ctx context.Context, g Gomega, c client.Client) map[string]bool {
	out := map[string]bool{}
	in := client.InNamespace(harness.ExamplesNamespace)
	clusters := &clusterv1.ClusterList{}
	g.Expect(c.List(ctx, clusters, in)).To(Succeed())
	for _, o := range clusters.Items {
		out[keyOf("Cluster", o.Namespace, o.Name)] = o.Spec.Paused != nil && *o.Spec.Paused
	}
	lists := map[string]client.ObjectList{
		"Machine": &clusterv1.MachineList{}, "MachineSet": &clusterv1.MachineSetList{}, "MachineDeployment": &clusterv1.MachineDeploymentList{},
		"OVirtCluster": &infrav1.OVirtClusterList{}, "OVirtMachine": &infrav1.OVirtMachineList{}, "OVirtMachineTemplate": &infrav1.OVirtMachineTemplateList{},
		"Secret": &corev1.SecretList{},
	}
	for kind, l := range lists {
		g.Expect(c.List(ctx, l, in)).To(Succeed(), kind)
		items, err := meta.ExtractList(l)
		g.Expect(err).NotTo(HaveOccurred())
		for _, item := range items {
			o, err := meta.Accessor(item)
			g.Expect(err).NotTo(HaveOccurred())
			out[keyOf(kind, o.GetNamespace(), o.GetName())] = false
		}
	}
	providers := &infrav1.OVirtProviderList{}
	g.Expect(c.List(ctx, providers)).To(Succeed())
	for _, o := range providers.Items {
		out[keyOf("OVirtProvider", "", o.Name)] = false
	}
	copies := &corev1.SecretList{}
	g.Expect(c.List(ctx, copies, client.InNamespace(credentialsNamespace), client.HasLabels{infrav1.CredentialsMoveCopyLabel})).To(Succeed())
	for _, o := range copies.Items {
		out[keyOf("Secret", o.Namespace, o.Name)] = false
	}
	return out
}

// copyOwnedByTheMovedProvider: the move copy in the target names the target's OVirtProvider as
// its owner (clusterctl rewrote the UID), so the target's manager can recreate the Secret from it.
func copyOwnedByTheMovedProvider(ctx context.Context, g Gomega, c client.Client) {
	p := &infrav1.OVirtProvider{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "ovirt-demo"}, p)).To(Succeed())
	copies := &corev1.SecretList{}
	g.Expect(c.List(ctx, copies, client.InNamespace(credentialsNamespace), client.HasLabels{infrav1.CredentialsMoveCopyLabel})).To(Succeed())
	g.Expect(copies.Items).To(HaveLen(1))
	g.Expect(slices.ContainsFunc(copies.Items[0].OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == p.UID })).
		To(BeTrue(), "the move copy is owned by the moved OVirtProvider: %v", copies.Items[0].OwnerReferences)
	g.Expect(copies.Items[0].Data).To(HaveKey("password"))
}

// deleteAdmissionConfigurations deletes every admission webhook configuration: no process serves
// them in a management cluster that only receives a move.
func deleteAdmissionConfigurations(ctx context.Context, g Gomega, c client.Client) {
	g.Expect(c.DeleteAllOf(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{})).To(Succeed())
	g.Expect(c.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Succeed())
}

func keyOf(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }
