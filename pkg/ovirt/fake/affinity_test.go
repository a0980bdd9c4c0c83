package fake_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/fake"
)

// newVMs creates and returns n down VMs of the default cluster.
func newVMs(g Gomega, c *fake.Client, names ...string) (*ovirt.Cluster, []*ovirt.VM) {
	ctx := context.Background()
	cl, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())
	var vms []*ovirt.VM
	for _, n := range names {
		vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: n, ClusterID: cl.ID, TemplateID: tpl.ID})
		g.Expect(err).NotTo(HaveOccurred())
		vms = append(vms, vm)
	}
	return cl, vms
}

func TestFakeAffinityGroupsBehaveLikeTheEngines(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()
	cl, vms := newVMs(g, c, "m1", "m2")
	other := c.AddCluster(ovirt.Cluster{Name: "Other", DataCenterID: "dc-other"})

	got, err := c.GetCluster(ctx, cl.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Name).To(Equal("Default"))
	g.Expect(got.NetworkIDs).To(Equal(cl.NetworkIDs))
	_, err = c.GetCluster(ctx, "no-such-cluster")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tpl.DataCenterID).To(Equal("dc-default"), "the data center of the template's cluster")

	groups, err := c.ListAffinityGroups(ctx, cl.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups).To(BeEmpty())
	_, err = c.ListAffinityGroups(ctx, "no-such-cluster")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))

	ag, err := c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: cl.ID, Name: "capov-cp",
		Description: "owner", Enforcing: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ag.ID).NotTo(BeEmpty())
	g.Expect(ag.Positive).To(BeFalse())
	g.Expect(ag.Enforcing).To(BeTrue())
	g.Expect(ag.ClusterID).To(Equal(cl.ID))

	_, err = c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: other.ID, Name: "capov-cp"})
	g.Expect(err).To(MatchError(ovirt.ErrConflict), "names are unique in the Engine, not per cluster")
	g.Expect(err).NotTo(MatchError(ovirt.ErrInvalid))
	_, err = c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: "no-such-cluster", Name: "x"})
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))

	g.Expect(c.AddVMToAffinityGroup(ctx, cl.ID, ag.ID, vms[0].ID)).To(Succeed())
	g.Expect(c.AddVMToAffinityGroup(ctx, cl.ID, ag.ID, vms[0].ID)).To(Succeed(), "already a member")
	g.Expect(c.AddVMToAffinityGroup(ctx, cl.ID, ag.ID, vms[1].ID)).To(Succeed())
	g.Expect(c.AddVMToAffinityGroup(ctx, cl.ID, "no-such-group", vms[1].ID)).To(MatchError(ovirt.ErrNotFound))
	g.Expect(c.AddVMToAffinityGroup(ctx, cl.ID, ag.ID, "no-such-vm")).To(MatchError(ovirt.ErrNotFound))
	stranger := c.PutVM(ovirt.VM{Name: "stranger", ClusterID: other.ID})
	g.Expect(c.AddVMToAffinityGroup(ctx, cl.ID, ag.ID, stranger.ID)).To(MatchError(ovirt.ErrInvalid))

	groups, err = c.ListAffinityGroups(ctx, cl.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups).To(HaveLen(1))
	g.Expect(groups[0].VMIDs).To(Equal([]string{vms[0].ID, vms[1].ID}))
	g.Expect(c.AffinityGroups(cl.ID)).To(Equal(groups))
	g.Expect(c.AffinityGroups(other.ID)).To(BeEmpty())
	byName, ok := c.AffinityGroupByName("capov-cp")
	g.Expect(ok).To(BeTrue())
	g.Expect(byName.ID).To(Equal(ag.ID))

	// Callers get copies.
	groups[0].VMIDs[0] = "changed"
	g.Expect(c.AffinityGroups(cl.ID)[0].VMIDs[0]).To(Equal(vms[0].ID))

	g.Expect(c.UpdateAffinityGroup(ctx, cl.ID, ag.ID, false)).To(Succeed())
	g.Expect(c.AffinityGroups(cl.ID)[0].Enforcing).To(BeFalse())
	g.Expect(c.UpdateAffinityGroup(ctx, cl.ID, "no-such-group", true)).To(MatchError(ovirt.ErrNotFound))

	g.Expect(c.RemoveVMFromAffinityGroup(ctx, cl.ID, ag.ID, vms[1].ID)).To(Succeed())
	g.Expect(c.RemoveVMFromAffinityGroup(ctx, cl.ID, ag.ID, vms[1].ID)).To(Succeed(), "not a member")
	g.Expect(c.RemoveVMFromAffinityGroup(ctx, cl.ID, "no-such-group", vms[1].ID)).To(Succeed(), "no such group")
	g.Expect(c.AffinityGroups(cl.ID)[0].VMIDs).To(Equal([]string{vms[0].ID}))

	// A removed VM leaves its groups, as in the Engine's database.
	g.Expect(c.RemoveVM(ctx, vms[0].ID)).To(Succeed())
	g.Expect(c.AffinityGroups(cl.ID)[0].VMIDs).To(BeEmpty())

	g.Expect(c.RemoveAffinityGroup(ctx, cl.ID, ag.ID)).To(Succeed())
	g.Expect(c.RemoveAffinityGroup(ctx, cl.ID, ag.ID)).To(MatchError(ovirt.ErrNotFound))
	g.Expect(c.AffinityGroups(cl.ID)).To(BeEmpty())
	_, stillThere := c.VM(vms[1].ID)
	g.Expect(stillThere).To(BeTrue(), "removing a group leaves its VMs alone")

	seeded := c.AddAffinityGroup(ovirt.AffinityGroup{Name: "by-hand", ClusterID: cl.ID, Positive: true, VMIDs: []string{vms[1].ID}})
	g.Expect(seeded.ID).NotTo(BeEmpty())
	g.Expect(c.AffinityGroups(cl.ID)).To(ConsistOf(seeded))

	g.Expect(c.CallCount("AddVMToAffinityGroup")).To(Equal(6))
}

func TestFakeStartHonoursEnforcingNegativeGroups(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()
	cl, vms := newVMs(g, c, "cp-0", "cp-1", "cp-2", "loner")
	ag, err := c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: cl.ID, Name: "cp", Enforcing: true})
	g.Expect(err).NotTo(HaveOccurred())
	for _, vm := range vms[:3] {
		g.Expect(c.AddVMToAffinityGroup(ctx, cl.ID, ag.ID, vm.ID)).To(Succeed())
	}

	t.Run("by default there are as many hosts as needed", func(t *testing.T) {
		g := NewWithT(t)
		hosts := map[string]bool{}
		for _, vm := range vms[:3] {
			g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStart)).To(Succeed())
			got, err := c.GetVM(ctx, vm.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Status).To(Equal(ovirt.VMStatusUp))
			g.Expect(got.HostID).NotTo(BeEmpty())
			g.Expect(got.HostName).NotTo(BeEmpty())
			hosts[got.HostID] = true
		}
		g.Expect(hosts).To(HaveLen(3), "one host each")
		for _, vm := range vms[:3] {
			g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStop)).To(Succeed())
			got, _ := c.GetVM(ctx, vm.ID)
			g.Expect(got.HostID).To(BeEmpty(), "a down VM runs nowhere")
			g.Expect(got.HostName).To(BeEmpty())
		}
	})

	t.Run("with two hosts the third member cannot start", func(t *testing.T) {
		g := NewWithT(t)
		c.SetHostCount(cl.ID, 2)
		g.Expect(c.Power(ctx, vms[0].ID, ovirt.PowerStart)).To(Succeed())
		g.Expect(c.Power(ctx, vms[1].ID, ovirt.PowerStart)).To(Succeed())
		h0, _ := c.HostOf(vms[0].ID)
		h1, _ := c.HostOf(vms[1].ID)
		g.Expect(h0).NotTo(Equal(h1))

		err := c.Power(ctx, vms[2].ID, ovirt.PowerStart)
		g.Expect(err).To(MatchError(ovirt.ErrNoHost))
		g.Expect(err).To(MatchError(ovirt.ErrConflict))
		g.Expect(err).NotTo(MatchError(ovirt.ErrLocked), "nothing to wait out")
		var oe *ovirt.Error
		g.Expect(errors.As(err, &oe)).To(BeTrue())
		g.Expect(oe.Status).To(Equal(409))
		g.Expect(oe.Detail).To(ContainSubstring("There is no host that satisfies current scheduling constraints"))
		g.Expect(oe.Detail).To(ContainSubstring("did not satisfy internal filter VmAffinityGroups because it matched negative affinity rules ."),
			"the Engine names no group there")
		got, _ := c.GetVM(ctx, vms[2].ID)
		g.Expect(got.Status).To(Equal(ovirt.VMStatusDown))
		g.Expect(got.HostID).To(BeEmpty())

		// A VM outside the group shares a host.
		g.Expect(c.Power(ctx, vms[3].ID, ovirt.PowerStart)).To(Succeed())

		// A soft group lets the scheduler break the rule.
		g.Expect(c.UpdateAffinityGroup(ctx, cl.ID, ag.ID, false)).To(Succeed())
		g.Expect(c.Power(ctx, vms[2].ID, ovirt.PowerStart)).To(Succeed())
		g.Expect(c.UpdateAffinityGroup(ctx, cl.ID, ag.ID, true)).To(Succeed())
		g.Expect(c.Power(ctx, vms[2].ID, ovirt.PowerStop)).To(Succeed())

		// A member going down frees its host.
		g.Expect(c.Power(ctx, vms[1].ID, ovirt.PowerShutdown)).To(Succeed())
		g.Expect(c.Power(ctx, vms[2].ID, ovirt.PowerStart)).To(Succeed())
		h2, _ := c.HostOf(vms[2].ID)
		g.Expect(h2).To(Equal(h1))
	})

	t.Run("without hosts nothing starts", func(t *testing.T) {
		g := NewWithT(t)
		c.SetHostCount(cl.ID, 0)
		g.Expect(c.Power(ctx, vms[1].ID, ovirt.PowerStart)).To(MatchError(ovirt.ErrNoHost))
		c.SetHostCount(cl.ID, -1)
		g.Expect(c.Power(ctx, vms[1].ID, ovirt.PowerStart)).To(Succeed())
	})
}

func TestFakeStartKeepsEnforcingPositiveGroupsTogether(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()
	cl, vms := newVMs(g, c, "a", "b", "c")
	c.SetHostCount(cl.ID, 3)
	// Two VMs already apart, then tied together by hand.
	apart, err := c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: cl.ID, Name: "apart", Enforcing: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.AddVMToAffinityGroup(ctx, cl.ID, apart.ID, vms[0].ID)).To(Succeed())
	g.Expect(c.AddVMToAffinityGroup(ctx, cl.ID, apart.ID, vms[1].ID)).To(Succeed())
	g.Expect(c.Power(ctx, vms[0].ID, ovirt.PowerStart)).To(Succeed())
	g.Expect(c.Power(ctx, vms[1].ID, ovirt.PowerStart)).To(Succeed())

	together, err := c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: cl.ID, Name: "together", Positive: true, Enforcing: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.AddVMToAffinityGroup(ctx, cl.ID, together.ID, vms[1].ID)).To(Succeed())
	g.Expect(c.AddVMToAffinityGroup(ctx, cl.ID, together.ID, vms[2].ID)).To(Succeed())
	g.Expect(c.Power(ctx, vms[2].ID, ovirt.PowerStart)).To(Succeed())
	h1, _ := c.HostOf(vms[1].ID)
	h2, _ := c.HostOf(vms[2].ID)
	g.Expect(h2).To(Equal(h1), "with the running member")

	// c must also stay away from a: make it impossible.
	g.Expect(c.Power(ctx, vms[2].ID, ovirt.PowerStop)).To(Succeed())
	g.Expect(c.AddVMToAffinityGroup(ctx, cl.ID, together.ID, vms[0].ID)).To(Succeed())
	err = c.Power(ctx, vms[2].ID, ovirt.PowerStart)
	g.Expect(err).To(MatchError(ovirt.ErrNoHost))
	g.Expect(err.Error()).To(ContainSubstring("did not match positive affinity rules ."))
}
