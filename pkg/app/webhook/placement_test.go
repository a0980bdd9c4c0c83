package webhook

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/webhooks/conversion"
)

// placedOVirtCluster returns an OVirtCluster in default with the failure domains fd-1 and fd-2.
func placedOVirtCluster(mutate ...func(*infrav1.OVirtCluster)) *infrav1.OVirtCluster {
	c := &infrav1.OVirtCluster{
		ObjectMeta: metav1.ObjectMeta{Name: uniqueName("placed"), Namespace: "default"},
		Spec: infrav1.OVirtClusterSpec{FailureDomains: []infrav1.OVirtFailureDomain{
			{Name: "fd-1", OVirtCluster: "Cluster-1"},
			{Name: "fd-2", OVirtCluster: "Cluster-2", StorageDomainName: "fast-2", ControlPlane: ptr.To(false)},
		}},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

// TestFailureDomainIsCheckedAgainstTheOVirtCluster runs the check of spec.failureDomain through
// the real server, as the user of config/rbac/webhook/role.yaml: the machine's cluster-name
// label leads to the Cluster, its infrastructureRef to the OVirtCluster (both read uncached).
func TestFailureDomainIsCheckedAgainstTheOVirtCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, rec := newClient(t)
	oc := placedOVirtCluster()
	g.Expect(c.Create(ctx, oc)).To(Succeed())
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: uniqueName("capi"), Namespace: "default"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "OVirtCluster", Name: oc.Name,
		}},
	}
	g.Expect(c.Create(ctx, cluster)).To(Succeed())
	prov := uniqueName("fd-prov")
	createProviders(t, newProvider(prov))
	in := func(clusterName, fd string) func(*infrav1.OVirtMachine) {
		return func(m *infrav1.OVirtMachine) {
			m.Labels = map[string]string{clusterv1.ClusterNameLabel: clusterName}
			m.Spec.FailureDomain = fd
		}
	}

	err := c.Create(ctx, newMachine(prov, in(cluster.Name, "fd-x")))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(`spec.failureDomain: Invalid value: "fd-x": is not a failure domain of OVirtCluster default/` + oc.Name + `; valid: fd-1, fd-2; `))

	spoke, err := toV1Beta1(newMachine(prov, in(cluster.Name, "fd-x")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, spoke)).To(MatchError(ContainSubstring(`spec.failureDomain: Invalid value: "fd-x"`)),
		"a v1beta1 request whose conversion data names a failure domain is checked too")

	rec.take()
	g.Expect(c.Create(ctx, newMachine(prov, in(cluster.Name, "fd-2")))).To(Succeed())
	g.Expect(rec.take()).To(BeEmpty())

	g.Expect(c.Create(ctx, newMachine(prov, in(uniqueName("no-such-cluster"), "fd-1")))).To(Succeed())
	g.Expect(rec.take()).To(ConsistOf(ContainSubstring(`spec.failureDomain "fd-1" is not checked: Cluster default/no-such-cluster-`)))

	// The manager sets it once, from the Machine; afterwards it cannot change.
	m := newMachine(prov, in(cluster.Name, ""))
	g.Expect(c.Create(ctx, m)).To(Succeed())
	patch := func(fd string) error {
		return c.Patch(ctx, &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"failureDomain":"`+fd+`"}}`)))
	}
	g.Expect(patch("fd-x")).To(MatchError(ContainSubstring(`spec.failureDomain: Invalid value: "fd-x": is not a failure domain`)))
	g.Expect(patch("fd-1")).To(Succeed())
	g.Expect(patch("fd-2")).To(MatchError(ContainSubstring(`spec.failureDomain: Forbidden: cannot change or be removed once set (it is "fd-1")`)))

	// The OVirtCluster losing the failure domain does not block the machine's other updates.
	g.Expect(c.Patch(ctx, &infrav1.OVirtCluster{ObjectMeta: metav1.ObjectMeta{Name: oc.Name, Namespace: oc.Namespace}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"failureDomains":null}}`)))).To(Succeed())
	g.Expect(c.Patch(ctx, &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`)))).To(Succeed())
}

// TestOVirtClusterPlacementAdmission: what a user sees for the placement fields of an
// OVirtCluster, the schema's answers included (they come before the webhook's).
func TestOVirtClusterPlacementAdmission(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	restricted := uniqueName("restricted")
	createProviders(t, newProvider(restricted, func(p *infrav1.OVirtProvider) {
		p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{List: []string{"team-a"}}
	}))
	tests := []struct {
		name    string
		obj     *infrav1.OVirtCluster
		wantErr []string
	}{
		{"failure domains and a policy are admitted", placedOVirtCluster(func(c *infrav1.OVirtCluster) { c.Spec.ControlPlaneAntiAffinity = infrav1.AntiAffinityHard }), nil},
		{"a repeated failure domain name is refused by the schema's map list", placedOVirtCluster(func(c *infrav1.OVirtCluster) {
			c.Spec.FailureDomains[1].Name = "fd-1"
		}), []string{`spec.failureDomains[1]: Duplicate value: {"name":"fd-1"}`}},
		{"an unknown policy is refused by the schema's enum", placedOVirtCluster(func(c *infrav1.OVirtCluster) { c.Spec.ControlPlaneAntiAffinity = "soft" }),
			[]string{`spec.controlPlaneAntiAffinity: Unsupported value: "soft": supported values: "None", "Soft", "Hard"`}},
		{"a provider that does not allow the namespace is refused by the webhook", placedOVirtCluster(func(c *infrav1.OVirtCluster) { c.Spec.Provider = restricted }),
			[]string{"spec.provider: Forbidden: OVirtProvider " + restricted + " does not allow namespace default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var err error
			if len(tt.wantErr) == 0 {
				g.Expect(c.Create(ctx, tt.obj)).To(Succeed())
				return
			}
			// The webhook's informer may lag the provider's creation by a moment.
			g.Eventually(func() error { err = c.Create(ctx, tt.obj.DeepCopy()); return err }).WithTimeout(10 * time.Second).Should(HaveOccurred())
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			for _, want := range tt.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}
}

// TestPlacementSurvivesV1Beta1Clients: the placement fields are v1beta2 only. A v1beta1 client
// does not see them and keeps them on a read-modify-write; an OVirtCluster created as v1beta1
// reads back with the CRD's default controlPlaneAntiAffinity Soft.
func TestPlacementSurvivesV1Beta1Clients(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, _ := newClient(t)

	oc := placedOVirtCluster(func(c *infrav1.OVirtCluster) { c.Spec.ControlPlaneAntiAffinity = infrav1.AntiAffinityNone })
	g.Expect(c.Create(ctx, oc)).To(Succeed())
	oc.Status.FailureDomains = []clusterv1.FailureDomain{{Name: "fd-1", ControlPlane: ptr.To(true)}, {Name: "fd-2", ControlPlane: ptr.To(false)}}
	oc.Status.AffinityGroups = []infrav1.OVirtAffinityGroup{{Role: infrav1.AffinityGroupRoleControlPlane, Provider: "p", OVirtCluster: "Cluster-1", Name: "g", Enforcing: true}}
	g.Expect(c.Status().Update(ctx, oc)).To(Succeed())

	oc1 := &infrav1beta1.OVirtCluster{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(oc), oc1)).To(Succeed())
	g.Expect(oc1.Annotations).To(HaveKey(conversion.DataAnnotation))
	oc1.Labels = map[string]string{"team": "a"}
	g.Expect(c.Update(ctx, oc1)).To(Succeed())
	got := &infrav1.OVirtCluster{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(oc), got)).To(Succeed())
	g.Expect(got.Labels).To(HaveKeyWithValue("team", "a"))
	g.Expect(got.Spec.FailureDomains).To(Equal(oc.Spec.FailureDomains))
	g.Expect(got.Spec.ControlPlaneAntiAffinity).To(Equal(infrav1.AntiAffinityNone))
	g.Expect(got.Status.FailureDomains).To(Equal(oc.Status.FailureDomains))
	g.Expect(got.Status.AffinityGroups).To(Equal(oc.Status.AffinityGroups))
	g.Expect(got.Annotations).NotTo(HaveKey(conversion.DataAnnotation))

	fresh := &infrav1beta1.OVirtCluster{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("v1beta1"), Namespace: "default"}}
	g.Expect(c.Create(ctx, fresh)).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(fresh), got)).To(Succeed())
	g.Expect(got.Spec.ControlPlaneAntiAffinity).To(Equal(infrav1.AntiAffinitySoft), "the CRD default applies to an object created as v1beta1")
	g.Expect(got.Spec.FailureDomains).To(BeEmpty())

	m := newMachine(uniqueName("any-prov"), func(m *infrav1.OVirtMachine) {
		m.Spec.AntiAffinity, m.Spec.AffinityGroups = infrav1.AntiAffinitySoft, []string{"db-spread"}
	})
	g.Expect(c.Create(ctx, m)).To(Succeed())
	m.Status.Host, m.Status.AffinityGroups = "host-7", []string{"g"}
	g.Expect(c.Status().Update(ctx, m)).To(Succeed())
	m1 := &infrav1beta1.OVirtMachine{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(m), m1)).To(Succeed())
	m1.Labels = map[string]string{"team": "a"}
	g.Expect(c.Update(ctx, m1)).To(Succeed(), "the v1beta1 update sends the placement back in the conversion data: no immutability refusal")
	gotM := &infrav1.OVirtMachine{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(m), gotM)).To(Succeed())
	g.Expect(gotM.Spec.AntiAffinity).To(Equal(infrav1.AntiAffinitySoft))
	g.Expect(gotM.Spec.AffinityGroups).To(Equal([]string{"db-spread"}))
	g.Expect(gotM.Status.Host).To(Equal("host-7"))
}
