package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/webhooks/conversion"
)

// createNamespace creates a namespace with labels and waits until the webhook's cache sees it
// with them (admission reads Namespaces from its informer).
func createNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	name := uniqueName("ns")
	NewWithT(t).Expect(suite.env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})).To(Succeed())
	return name
}

// TestOVirtProviderDeletionIsRefusedWhileMachinesNameIt: `kubectl delete capovp` of a provider
// that OVirtMachines name is refused by the webhook with their names, in either API version; it
// succeeds once they are gone, and clusterctl move's deletion is never refused.
func TestOVirtProviderDeletionIsRefusedWhileMachinesNameIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, _ := newClient(t)
	p := newProvider(uniqueName("in-use"))
	createProviders(t, p)
	other := createNamespace(t, nil)
	m1, m2 := newMachine(p.Name), newMachine(p.Name, func(m *infrav1.OVirtMachine) { m.Namespace = other })
	g.Expect(c.Create(ctx, m1)).To(Succeed())
	g.Expect(c.Create(ctx, m2)).To(Succeed())
	unrelated := newMachine(uniqueName("other-prov"))
	g.Expect(c.Create(ctx, unrelated)).To(Succeed())

	err := c.Delete(ctx, &infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: p.Name}})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(`admission webhook "validation.ovirtprovider.infrastructure.cluster.x-k8s.io" denied the request: ` +
		`ovirtproviders.infrastructure.cluster.x-k8s.io "` + p.Name + `" is forbidden: 2 OVirtMachines name OVirtProvider ` + p.Name + ` in spec.provider: `))
	g.Expect(err.Error()).To(ContainSubstring("default/" + m1.Name))
	g.Expect(err.Error()).To(ContainSubstring(other + "/" + m2.Name))
	g.Expect(err.Error()).To(ContainSubstring("delete them first"))
	g.Expect(err.Error()).NotTo(ContainSubstring(unrelated.Name))

	err = c.Delete(ctx, &infrav1beta1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: p.Name}})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a v1beta1 client gets the same answer: %v", err)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), &infrav1.OVirtProvider{})).To(Succeed(), "the provider is still there")

	g.Expect(c.Delete(ctx, m1)).To(Succeed())
	err = c.Delete(ctx, p.DeepCopy())
	g.Expect(err).To(MatchError(ContainSubstring("1 OVirtMachine names OVirtProvider " + p.Name + " in spec.provider: " + other + "/" + m2.Name + ";")))
	g.Expect(c.Delete(ctx, m2)).To(Succeed())
	g.Expect(c.Delete(ctx, p.DeepCopy())).To(Succeed(), "no machine names it any more")
}

func TestOVirtProviderDeletionByClusterctlMoveIsNotRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, _ := newClient(t)
	p := newProvider(uniqueName("moved"))
	createProviders(t, p)
	g.Expect(c.Create(ctx, newMachine(p.Name))).To(Succeed())
	// What clusterctl move does to each source object before deleting it.
	g.Expect(c.Patch(ctx, p.DeepCopy(), client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/delete-for-move":""}}}`)))).To(Succeed())
	g.Expect(c.Delete(ctx, p.DeepCopy())).To(Succeed())
}

// TestAllowedNamespacesAreEnforcedAtAdmission: OVirtMachines and OVirtMachineTemplates of a
// namespace the provider does not allow are refused, in the list or by labels, with the fix; a
// provider that does not exist yet refuses nothing (the manager reports it).
func TestAllowedNamespacesAreEnforcedAtAdmission(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, rec := newClient(t)
	labelKey := "capov.example.com/" + uniqueName("ovirt")
	listed, labelled, outside := createNamespace(t, nil), createNamespace(t, map[string]string{labelKey: "true"}), createNamespace(t, map[string]string{labelKey: "false"})
	p := newProvider(uniqueName("restricted"), func(p *infrav1.OVirtProvider) {
		p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{List: []string{listed},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelKey: "true"}}}
	})
	createProviders(t, p)
	in := func(ns string) func(*infrav1.OVirtMachine) { return func(m *infrav1.OVirtMachine) { m.Namespace = ns } }

	// The webhook's informers may lag the creations above by a moment.
	g.Eventually(func() error { return c.Create(ctx, newMachine(p.Name, in(listed))) }).WithTimeout(10*time.Second).Should(Succeed(), "a listed namespace")
	g.Eventually(func() error { return c.Create(ctx, newMachine(p.Name, in(labelled))) }).WithTimeout(10*time.Second).Should(Succeed(), "a namespace matching the selector")
	var err error
	g.Eventually(func() string {
		err = c.Create(ctx, newMachine(p.Name, in(outside)))
		if err == nil {
			return "admitted"
		}
		return err.Error()
	}).WithTimeout(10 * time.Second).Should(ContainSubstring("the namespace's labels do not match"))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("spec.provider: Forbidden: OVirtProvider " + p.Name + " does not allow namespace " + outside +
		`: the namespace's labels do not match spec.allowedNamespaces.selector "` + labelKey + `=true" and it is not in spec.allowedNamespaces.list [` + listed + `]; ` +
		"label the namespace to match the selector, add " + outside + " to spec.allowedNamespaces.list of the provider, or use an OVirtProvider that allows this namespace"))

	tplErr := c.Create(ctx, newTemplate(p.Name, func(t *infrav1.OVirtMachineTemplate) { t.Namespace = outside }))
	g.Expect(apierrors.IsInvalid(tplErr)).To(BeTrue(), "%v", tplErr)
	g.Expect(tplErr.Error()).To(ContainSubstring("spec.template.spec.provider: Forbidden: OVirtProvider " + p.Name + " does not allow namespace " + outside))
	g.Expect(c.Create(ctx, newTemplate(p.Name, func(t *infrav1.OVirtMachineTemplate) { t.Namespace = listed }))).To(Succeed())

	// The same answer for a v1beta1 client (the request is converted first).
	m1, err := toV1Beta1(newMachine(p.Name, in(outside)))
	g.Expect(err).NotTo(HaveOccurred())
	err = c.Create(ctx, m1)
	g.Expect(err).To(MatchError(ContainSubstring("spec.provider: Forbidden: OVirtProvider " + p.Name + " does not allow namespace " + outside)))

	// A provider that does not exist yet refuses nothing.
	rec.take()
	g.Expect(c.Create(ctx, newMachine(uniqueName("not-yet"), in(outside)))).To(Succeed())
	g.Expect(rec.take()).To(ConsistOf(ContainSubstring("does not exist yet")))
}

// TestNarrowingAllowedNamespacesWarnsAboutTheirMachines: revoking a namespace is admitted (it is
// how access is revoked), with a warning naming the namespaces whose machines lose the provider.
func TestNarrowingAllowedNamespacesWarnsAboutTheirMachines(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, rec := newClient(t)
	kept, revoked := createNamespace(t, nil), createNamespace(t, nil)
	p := newProvider(uniqueName("narrowed"))
	createProviders(t, p)
	for _, ns := range []string{kept, revoked, revoked} {
		g.Expect(c.Create(ctx, newMachine(p.Name, func(m *infrav1.OVirtMachine) { m.Namespace = ns }))).To(Succeed())
	}
	rec.take()
	got := &infrav1.OVirtProvider{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
	got.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{List: []string{kept}}
	g.Expect(c.Update(ctx, got)).To(Succeed())
	g.Expect(rec.take()).To(ConsistOf(ContainSubstring("spec.allowedNamespaces no longer allows namespaces in which OVirtMachines name OVirtProvider " +
		p.Name + ": " + revoked + " (2 OVirtMachines)")))
}

// TestAllowedNamespacesSurviveV1Beta1Clients: the field exists only in v1beta2. A v1beta1 reader
// gets it in the conversion-data annotation (never the password or the CAs of the same spec), and
// a v1beta1 update or patch keeps it.
func TestAllowedNamespacesSurviveV1Beta1Clients(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, _ := newClient(t)
	allowed := &infrav1.OVirtProviderAllowedNamespaces{List: []string{"team-a", "team-b"},
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"capov.example.com/ovirt": "true"}}}
	p := newProvider(uniqueName("v1beta1-reader"), func(p *infrav1.OVirtProvider) {
		p.Spec.User, p.Spec.Pass = "admin@internal", "s3cret-password"
		p.Spec.AllowedNamespaces = allowed.DeepCopy()
	})
	g.Expect(c.Create(ctx, p)).To(Succeed())

	p1 := &infrav1beta1.OVirtProvider{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), p1)).To(Succeed())
	data := p1.Annotations[conversion.DataAnnotation]
	g.Expect(data).To(And(ContainSubstring("team-a"), ContainSubstring("capov.example.com/ovirt")))
	g.Expect(data).NotTo(Or(ContainSubstring("s3cret-password"), ContainSubstring("admin@internal")))

	// Read-modify-write by a v1beta1 client.
	p1.Labels = map[string]string{"team": "infra"}
	p1.Spec.DiskClone = new(bool)
	g.Expect(c.Update(ctx, p1)).To(Succeed())
	got := &infrav1.OVirtProvider{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
	g.Expect(got.Spec.AllowedNamespaces).To(Equal(allowed))
	g.Expect(got.Spec.DiskClone).To(HaveValue(BeFalse()))
	g.Expect(got.Annotations).NotTo(HaveKey(conversion.DataAnnotation), "the stored object never carries it")

	// A v1beta1 merge patch of another field.
	g.Expect(c.Patch(ctx, &infrav1beta1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: p.Name}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"storagedomainname":"fast"}}`)))).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
	g.Expect(got.Spec.StorageDomainName).To(Equal("fast"))
	g.Expect(got.Spec.AllowedNamespaces).To(Equal(allowed))

	// A provider without the field carries no annotation at all, as before.
	plain := newProvider(uniqueName("plain"))
	g.Expect(c.Create(ctx, plain)).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(plain), p1)).To(Succeed())
	g.Expect(p1.Annotations).NotTo(HaveKey(conversion.DataAnnotation))
	g.Expect(strings.Contains(p1.Spec.Engine, "https://")).To(BeTrue())
}
