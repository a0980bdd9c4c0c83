package sdk

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

// Against the simulator: clusters by id, the data center of a template's cluster, affinity
// groups, hosts and the scheduler.

func TestGetClusterReturnsWhatFindClusterReturns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	byName, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())

	sim.ResetCounters()
	byID, err := c.GetCluster(ctx, byName.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byID).To(Equal(byName))
	g.Expect(sim.RequestCount("GET", "/clusters/{id}")).To(Equal(1))
	again, err := c.GetCluster(ctx, byName.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(byName))
	g.Expect(sim.RequestCount("GET", "/clusters/{id}")).To(Equal(1), "cached like FindCluster")
	again.NetworkIDs[0] = "changed"
	again, _ = c.GetCluster(ctx, byName.ID)
	g.Expect(again.NetworkIDs[0]).NotTo(Equal("changed"), "callers get copies")

	_, err = c.GetCluster(ctx, "00000000-0000-0000-0000-00000000dead")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	_, err = c.GetCluster(ctx, "")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	g.Expect(counterValue(e, "requests_total", "GetCluster", "2xx")).To(Equal(1.0))
}

func TestFindTemplateNamesTheDataCenterOfItsCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())

	sim.ResetCounters()
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.RequestCount("GET", "/clusters/{id}")).To(Equal(1), "the template's cluster, read for its data center")
	cluster, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tpl.ClusterID).To(Equal(cluster.ID))
	g.Expect(tpl.DataCenterID).NotTo(BeEmpty())
	g.Expect(tpl.DataCenterID).To(Equal(cluster.DataCenterID))
	remote, err := c.FindCluster(ctx, "Remote")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tpl.DataCenterID).NotTo(Equal(remote.DataCenterID))

	// Another lookup of a template of that cluster (another cache key) does not ask again: a
	// cluster never changes data center.
	sim.ResetCounters()
	inCluster, err := c.FindTemplate(ctx, "rhcos-4.14", "Default")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inCluster.DataCenterID).To(Equal(cluster.DataCenterID))
	g.Expect(sim.RequestCount("GET", "/clusters/{id}")).To(BeZero())
	g.Expect(counterValue(e, "requests_total", "GetClusterDataCenter", "2xx")).To(Equal(1.0))

	// Known from FindCluster, it costs nothing on a new connection either.
	e2 := newEnv(t, sim, Options{})
	c2, err := e2.f.ForProvider(ctx, e2.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c2.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	sim.ResetCounters()
	tpl2, err := c2.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tpl2.DataCenterID).To(Equal(cluster.DataCenterID))
	g.Expect(sim.TotalRequests()).To(Equal(1), "the template search alone")
}

// createVMs creates down VMs from rhcos-4.14 in the named cluster.
func createVMs(g Gomega, c ovirt.Client, clusterName string, names ...string) (*ovirt.Cluster, []*ovirt.VM) {
	ctx := context.Background()
	cluster, err := c.FindCluster(ctx, clusterName)
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())
	var vms []*ovirt.VM
	for _, n := range names {
		vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: n, ClusterID: cluster.ID, TemplateID: tpl.ID,
			CustomScript: `{"ignition":{"version":"3.2.0"}}`})
		g.Expect(err).NotTo(HaveOccurred())
		vms = append(vms, vm)
	}
	return cluster, vms
}

func TestAffinityGroupsAgainstTheSimulator(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	cluster, vms := createVMs(g, c, "Default", "cp-0", "cp-1")
	remote, err := c.FindCluster(ctx, "Remote")
	g.Expect(err).NotTo(HaveOccurred())

	groups, err := c.ListAffinityGroups(ctx, cluster.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups).To(BeEmpty())

	ag, err := c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: cluster.ID, Name: "capov-prod-cp",
		Description: "capov-owner=uid-1 & more", Enforcing: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ag.ID).NotTo(BeEmpty())
	g.Expect(*ag).To(Equal(ovirt.AffinityGroup{ID: ag.ID, Name: "capov-prod-cp", Description: "capov-owner=uid-1 & more",
		ClusterID: cluster.ID, Positive: false, Enforcing: true}))
	states := sim.AffinityGroups("Default")
	g.Expect(states).To(HaveLen(1))
	g.Expect(states[0].VMRule).To(Equal("negative"))
	g.Expect(states[0].VMEnforcing).To(BeTrue())
	g.Expect(states[0].HostRule).To(Equal("disabled"))
	g.Expect(states[0].HostEnforcing).To(BeFalse())

	_, err = c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: remote.ID, Name: "capov-prod-cp"})
	g.Expect(err).To(MatchError(ovirt.ErrConflict), "names are unique in the whole Engine: %v", err)
	g.Expect(err).NotTo(MatchError(ovirt.ErrInvalid))

	for _, vm := range vms {
		g.Expect(c.AddVMToAffinityGroup(ctx, cluster.ID, ag.ID, vm.ID)).To(Succeed())
	}
	g.Expect(c.AddVMToAffinityGroup(ctx, cluster.ID, ag.ID, vms[0].ID)).To(Succeed(), "already a member")
	g.Expect(c.AddVMToAffinityGroup(ctx, cluster.ID, "00000000-0000-0000-0000-00000000dead", vms[0].ID)).To(MatchError(ovirt.ErrNotFound))
	g.Expect(c.AddVMToAffinityGroup(ctx, cluster.ID, ag.ID, "00000000-0000-0000-0000-00000000beef")).To(MatchError(ovirt.ErrNotFound))

	sim.ResetCounters()
	groups, err = c.ListAffinityGroups(ctx, cluster.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups).To(HaveLen(1))
	g.Expect(groups[0].ID).To(Equal(ag.ID))
	g.Expect(groups[0].Enforcing).To(BeTrue())
	g.Expect(groups[0].Positive).To(BeFalse())
	g.Expect(groups[0].VMIDs).To(ConsistOf(vms[0].ID, vms[1].ID))
	g.Expect(sim.TotalRequests()).To(Equal(1), "members come inline")

	// With follow ignored the members still come inline (the mapper puts them there).
	sim.SetIgnoreFollow(true)
	settle(g, sim)
	sim.ResetCounters()
	groups, err = c.ListAffinityGroups(ctx, cluster.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups[0].VMIDs).To(ConsistOf(vms[0].ID, vms[1].ID))
	g.Expect(sim.TotalRequests()).To(Equal(1))
	sim.SetIgnoreFollow(false)

	// An empty group is asked for its members.
	empty, err := c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: cluster.ID, Name: "capov-prod-md-0", Enforcing: false})
	g.Expect(err).NotTo(HaveOccurred())
	settle(g, sim)
	sim.ResetCounters()
	groups, err = c.ListAffinityGroups(ctx, cluster.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups).To(HaveLen(2))
	g.Expect(groups[1].ID).To(Equal(empty.ID))
	g.Expect(groups[1].VMIDs).To(BeEmpty())
	g.Eventually(func() int { return sim.RequestCount("GET", "/clusters/{id}/affinitygroups/{id}/vms") }).Should(Equal(1))

	g.Expect(c.UpdateAffinityGroup(ctx, cluster.ID, ag.ID, false)).To(Succeed())
	states = sim.AffinityGroups("Default")
	g.Expect(states[0].VMRule).To(Equal("negative"), "the polarity stays")
	g.Expect(states[0].VMEnforcing).To(BeFalse())
	g.Expect(states[0].VMs).To(Equal([]string{"cp-0", "cp-1"}), "the members stay")
	g.Expect(c.UpdateAffinityGroup(ctx, cluster.ID, "00000000-0000-0000-0000-00000000dead", true)).To(MatchError(ovirt.ErrNotFound))

	g.Expect(c.RemoveVMFromAffinityGroup(ctx, cluster.ID, ag.ID, vms[1].ID)).To(Succeed())
	g.Expect(c.RemoveVMFromAffinityGroup(ctx, cluster.ID, ag.ID, vms[1].ID)).To(Succeed(), "not a member")
	g.Expect(c.RemoveVMFromAffinityGroup(ctx, cluster.ID, "00000000-0000-0000-0000-00000000dead", vms[1].ID)).To(Succeed(), "no such group")
	g.Expect(sim.AffinityGroups("Default")[0].VMs).To(Equal([]string{"cp-0"}))

	g.Expect(c.RemoveAffinityGroup(ctx, cluster.ID, ag.ID)).To(Succeed())
	g.Expect(c.RemoveAffinityGroup(ctx, cluster.ID, ag.ID)).To(MatchError(ovirt.ErrNotFound))
	_, stillThere := sim.VM(vms[0].ID)
	g.Expect(stillThere).To(BeTrue(), "a group's removal leaves its VMs")
	g.Expect(sim.AffinityGroups("Default")).To(HaveLen(1))

	_, err = c.ListAffinityGroups(ctx, "00000000-0000-0000-0000-00000000dead")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound), "the Engine lists an unknown cluster as empty")

	for _, op := range []string{"ListAffinityGroups", "CreateAffinityGroup", "UpdateAffinityGroup", "RemoveAffinityGroup",
		"AddVMToAffinityGroup", "RemoveVMFromAffinityGroup", "ListAffinityGroupVMs"} {
		g.Expect(counterValue(e, "requests_total", op, "2xx")).To(BeNumerically(">=", 1), op)
	}
}

func TestSchedulerAgainstTheSimulator(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t, func(b *ovirtsim.Builder) {
		b.WithCluster(ovirtsim.Cluster{Name: "Empty", NoHosts: true})
	})
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	// The Default cluster has three hosts.
	cluster, vms := createVMs(g, c, "Default", "cp-0", "cp-1", "cp-2", "cp-3")
	ag, err := c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: cluster.ID, Name: "capov-prod-cp", Enforcing: true})
	g.Expect(err).NotTo(HaveOccurred())
	for _, vm := range vms {
		g.Expect(c.AddVMToAffinityGroup(ctx, cluster.ID, ag.ID, vm.ID)).To(Succeed())
	}
	// Wait until the VMs are no longer image_locked.
	g.Eventually(func(g Gomega) {
		for _, vm := range vms {
			got, err := c.GetVM(ctx, vm.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Status).To(Equal(ovirt.VMStatusDown))
		}
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())

	hosts := map[string]string{}
	for _, vm := range vms[:3] {
		g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStart)).To(Succeed())
	}
	for _, vm := range vms[:3] {
		var got *ovirt.VM
		g.Eventually(func(g Gomega) {
			got, err = c.GetVM(ctx, vm.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.HostID).NotTo(BeEmpty())
		}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
		name, ok := sim.VMHost(vm.ID)
		g.Expect(ok).To(BeTrue())
		g.Expect(got.HostName).To(Equal(name))
		hosts[got.HostID] = got.HostName
	}
	g.Expect(hosts).To(HaveLen(3), "one host each")
	g.Expect(sim.RequestCount("GET", "/hosts/{id}")).To(Equal(3), "each host's name read once")
	for _, vm := range vms[:3] {
		_, err := c.GetVM(ctx, vm.ID)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(sim.RequestCount("GET", "/hosts/{id}")).To(Equal(3), "and not again")
	listed, err := c.FindVMsByName(ctx, "cp-0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listed[0].HostID).NotTo(BeEmpty(), "a list names the host too")

	err = c.Power(ctx, vms[3].ID, ovirt.PowerStart)
	g.Expect(err).To(MatchError(ovirt.ErrNoHost), "%v", err)
	g.Expect(err).To(MatchError(ovirt.ErrConflict))
	g.Expect(err).NotTo(MatchError(ovirt.ErrLocked))
	var oe *ovirt.Error
	g.Expect(errors.As(err, &oe)).To(BeTrue())
	g.Expect(oe.Op).To(Equal("StartVM"))
	g.Expect(oe.Status).To(Equal(409))
	g.Expect(oe.Detail).To(ContainSubstring("There is no host that satisfies current scheduling constraints"))
	g.Expect(oe.Detail).To(ContainSubstring("did not satisfy internal filter VmAffinityGroups because it matched negative affinity rules"))

	// A soft group lets the fourth start.
	g.Expect(c.UpdateAffinityGroup(ctx, cluster.ID, ag.ID, false)).To(Succeed())
	g.Expect(c.Power(ctx, vms[3].ID, ovirt.PowerStart)).To(Succeed())

	// No host at all.
	_, empty := createVMs(g, c, "Empty", "lonely")
	g.Eventually(func(g Gomega) {
		got, err := c.GetVM(ctx, empty[0].ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status).To(Equal(ovirt.VMStatusDown))
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	err = c.Power(ctx, empty[0].ID, ovirt.PowerStart)
	g.Expect(err).To(MatchError(ovirt.ErrNoHost), "%v", err)
	g.Expect(err).To(MatchError(ovirt.ErrConflict))
	g.Expect(err).NotTo(MatchError(ovirt.ErrInvalid))
	g.Expect(errors.As(err, &oe)).To(BeTrue())
	g.Expect(oe.Status).To(Equal(400), "SCHEDULING_NO_HOSTS has no error type")
	g.Expect(oe.Detail).To(ContainSubstring("There are no hosts to use"))
}
