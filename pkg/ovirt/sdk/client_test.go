package sdk

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

// TestEveryClientMethodAgainstTheSimulator walks the whole machine lifecycle
// through the real SDK over HTTPS.
func TestEveryClientMethodAgainstTheSimulator(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())

	info, err := c.Ping(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.ProductName).NotTo(BeEmpty())
	g.Expect(info.Version).NotTo(BeEmpty())

	// Lookups.
	sim.ResetCounters()
	cluster, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	// The simulator does not follow a cluster's networks link, so the
	// client's fallback asks for them separately.
	g.Expect(sim.RequestCount("GET", "/clusters")).To(Equal(1))
	g.Expect(sim.RequestCount("GET", "/clusters/{id}/networks")).To(BeNumerically("<=", 1))
	g.Expect(cluster.ID).NotTo(BeEmpty())
	g.Expect(cluster.DataCenterID).NotTo(BeEmpty())
	g.Expect(cluster.NetworkIDs).To(HaveLen(2))
	remote, err := c.FindCluster(ctx, "Remote")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.FindCluster(ctx, "Defaul")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))

	sim.ResetCounters()
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.TotalRequests()).To(Equal(1), "disks come with follow=disk_attachments.disk")
	g.Expect(tpl.Version).To(Equal(2), "the highest version wins")
	g.Expect(tpl.OSType).To(Equal("rhcos_x64"))
	g.Expect(tpl.ClusterID).To(Equal(cluster.ID))
	g.Expect(tpl.Disks).To(HaveLen(1))
	g.Expect(tpl.Disks[0].ID).NotTo(BeEmpty())
	g.Expect(tpl.Disks[0].Alias).To(Equal("rhcos-4.14_Disk1"))
	g.Expect(tpl.Disks[0].ProvisionedSize).To(Equal(16 * gib))
	g.Expect(tpl.Disks[0].Bootable).To(BeTrue())
	inCluster, err := c.FindTemplate(ctx, "rhcos-4.14", "Default")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inCluster.ID).To(Equal(tpl.ID))
	_, err = c.FindTemplate(ctx, "rhcos-4.14", "Remote")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound), "the cluster clause restricts the search")
	_, err = c.FindTemplate(ctx, "rhcos-4.1", "")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound), "names match exactly")
	_, err = c.FindTemplate(ctx, "being-built", "")
	g.Expect(err).To(MatchError(ovirt.ErrLocked), "a locked template is worth waiting for")
	_, err = c.FindTemplate(ctx, `bad"name`, "")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))

	fast, err := c.FindStorageDomain(ctx, "fast")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fast.ID).NotTo(BeEmpty())
	g.Expect(fast.Available).To(Equal(1000 * gib))
	g.Expect(fast.Usable).To(BeTrue())
	_, err = c.FindStorageDomain(ctx, "slow")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))

	mgmt, err := c.FindVnicProfile(ctx, cluster, "ovirtmgmt")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster.NetworkIDs).To(ContainElement(mgmt.NetworkID))
	remoteMgmt, err := c.FindVnicProfile(ctx, remote, "ovirtmgmt")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remoteMgmt.ID).NotTo(Equal(mgmt.ID), "same name, other data center")
	storage, err := c.FindVnicProfile(ctx, cluster, "storage")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.FindVnicProfile(ctx, remote, "storage")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound), "profiles of other clusters' networks do not count")

	// Create a cloned VM in another storage domain.
	spec := ovirt.VMSpec{
		Name: "m1", ClusterID: cluster.ID, TemplateID: tpl.ID,
		Clone: true, StorageDomainID: fast.ID, TemplateDisks: tpl.Disks,
		Sockets: 2, Cores: 4, Threads: 1, MemoryBytes: 8 * gib, GuaranteedMemoryBytes: 4 * gib,
		Type: ovirt.VMTypeHighPerformance, Comment: "capov-owner=uid-1", Description: "machine m1",
		CustomScript: `{"ignition":{"version":"3.2.0"}}`, OSType: "rhcos_x64", HostName: "m1",
		CorrelationID: "create-m1",
	}
	vm, err := c.CreateVM(ctx, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.ID).NotTo(BeEmpty())
	g.Expect(vm.Name).To(Equal("m1"))
	st, ok := sim.VM(vm.ID)
	g.Expect(ok).To(BeTrue())
	g.Expect(st.Clone).To(BeTrue())
	g.Expect(st.Comment).To(Equal(spec.Comment))
	g.Expect(st.Description).To(Equal(spec.Description))
	g.Expect(st.CustomScript).To(Equal(spec.CustomScript))
	g.Expect(st.HostName).To(Equal("m1"))
	g.Expect(st.OSType).To(Equal("rhcos_x64"))
	g.Expect(st.Type).To(Equal("high_performance"))
	g.Expect([]int{st.Sockets, st.Cores, st.Threads}).To(Equal([]int{2, 4, 1}))
	g.Expect(st.MemoryMB).To(Equal(int64(8192)))
	g.Expect(st.GuaranteedMB).To(Equal(int64(4096)))
	g.Expect(st.Disks).To(HaveLen(1))
	g.Expect(st.Disks[0].StorageDomain).To(Equal("fast"))
	g.Expect(st.Disks[0].Format).To(Equal("cow"))

	_, err = c.CreateVM(ctx, ovirt.VMSpec{Name: "m1", ClusterID: cluster.ID, TemplateID: tpl.ID})
	g.Expect(err).To(MatchError(ovirt.ErrConflict), "names are unique (409, as a real Engine): %v", err)
	g.Expect(err).NotTo(MatchError(ovirt.ErrLocked), "a name in use is no lock")

	// A thin VM keeps its disks with the template's, whatever the override.
	thin, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "m10", ClusterID: cluster.ID, TemplateID: tpl.ID,
		StorageDomainID: fast.ID, TemplateDisks: tpl.Disks})
	g.Expect(err).NotTo(HaveOccurred())
	thinState, _ := sim.VM(thin.ID)
	g.Expect(thinState.Clone).To(BeFalse())
	g.Expect(thinState.Disks[0].StorageDomain).To(Equal("data"))
	g.Expect(thinState.Type).NotTo(BeEmpty(), "inherited from the template")

	// Exact-name search.
	found, err := c.FindVMsByName(ctx, "m1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(HaveLen(1))
	g.Expect(found[0].ID).To(Equal(vm.ID))
	g.Expect(found[0].Comment).To(Equal(spec.Comment))
	wild, err := c.FindVMsByName(ctx, "m*")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wild).To(BeEmpty(), "a wildcard only matches a VM literally named so")

	// GetVM: one call with disks and NICs.
	sim.ResetCounters()
	got, err := c.GetVM(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.TotalRequests()).To(Equal(1))
	g.Expect(got.Status).To(BeElementOf(ovirt.VMStatusImageLocked, ovirt.VMStatusDown))
	g.Expect(got.ClusterID).To(Equal(cluster.ID))
	g.Expect(got.OriginalTemplateID).To(Equal(tpl.ID))
	g.Expect(got.OSType).To(Equal("rhcos_x64"))
	g.Expect(got.Disks).To(HaveLen(1))
	osDisk := got.Disks[0]
	g.Expect(osDisk.ID).To(Equal(st.Disks[0].ID))
	g.Expect(osDisk.Alias).To(Equal("rhcos-4.14_Disk1"))
	g.Expect(osDisk.ProvisionedSize).To(Equal(16 * gib))
	g.Expect(osDisk.Bootable).To(BeTrue())
	g.Expect(osDisk.StorageDomainID).To(Equal(fast.ID))
	g.Expect(osDisk.Format).To(Equal("cow"))
	g.Expect(osDisk.Status).To(BeElementOf(ovirt.DiskStatusOK, ovirt.DiskStatusLocked))
	templateNICs := len(got.NICs)

	// Disks: grow and rename in one PUT; shrinking is refused.
	sim.ResetCounters()
	g.Expect(c.UpdateDisk(ctx, vm.ID, osDisk.ID, ovirt.DiskUpdate{ProvisionedSize: 20 * gib, Alias: "m1_Disk1"})).To(Succeed())
	g.Expect(sim.RequestCount("PUT", "/vms/{id}/diskattachments/{id}")).To(Equal(1))
	st, _ = sim.VM(vm.ID)
	g.Expect(st.Disks[0].SizeGB).To(Equal(int64(20)))
	g.Expect(st.Disks[0].Alias).To(Equal("m1_Disk1"))
	err = c.UpdateDisk(ctx, vm.ID, osDisk.ID, ovirt.DiskUpdate{ProvisionedSize: 10 * gib})
	g.Expect(err).To(MatchError(ovirt.ErrInvalid), "shrinking: %v", err)
	g.Expect(c.UpdateDisk(ctx, vm.ID, osDisk.ID, ovirt.DiskUpdate{})).To(Succeed(), "nothing to change, no call")

	// NICs.
	nic, err := c.AddNIC(ctx, vm.ID, "nic9", storage.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nic.ID).NotTo(BeEmpty())
	g.Expect(nic.Name).To(Equal("nic9"))
	g.Expect(nic.VnicProfileID).To(Equal(storage.ID))
	g.Expect(c.UpdateNIC(ctx, vm.ID, nic.ID, mgmt.ID)).To(Succeed())
	got, err = c.GetVM(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.NICs).To(HaveLen(templateNICs + 1))
	idx := slices.IndexFunc(got.NICs, func(n ovirt.NIC) bool { return n.ID == nic.ID })
	g.Expect(idx).NotTo(Equal(-1))
	g.Expect(got.NICs[idx].VnicProfileID).To(Equal(mgmt.ID))
	g.Expect(got.NICs[idx].MAC).NotTo(BeEmpty())

	// Power and addresses.
	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStart)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got, err := c.GetVM(ctx, vm.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status).To(Equal(ovirt.VMStatusUp))
		g.Expect(got.ReportedDevices).NotTo(BeEmpty())
		st, _ := sim.VM(vm.ID)
		// As reported, unfiltered: the guest's IPv6 link-local addresses too.
		var ips []string
		for _, d := range got.ReportedDevices {
			ips = append(ips, d.IPs...)
		}
		g.Expect(ips).To(ContainElements(st.IPs))
	}).WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerShutdown)).To(Succeed())
	g.Eventually(func() ovirt.VMStatus {
		got, _ := c.GetVM(ctx, vm.ID)
		return got.Status
	}).WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal(ovirt.VMStatusDown))
	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStart)).To(Succeed())
	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStop)).To(Succeed())
	g.Eventually(func() ovirt.VMStatus {
		got, _ := c.GetVM(ctx, vm.ID)
		return got.Status
	}).WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal(ovirt.VMStatusDown))
	g.Expect(c.Power(ctx, vm.ID, "suspend")).To(MatchError(ovirt.ErrInvalid), "an action the client does not know")
	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerReboot)).To(MatchError(ovirt.ErrConflict), "a VM that does not run")

	g.Expect(c.RemoveNIC(ctx, vm.ID, nic.ID)).To(Succeed())
	got, _ = c.GetVM(ctx, vm.ID)
	g.Expect(got.NICs).To(HaveLen(templateNICs))

	// A CSI disk is detached, not deleted, before the VM goes.
	csiID, err := sim.AttachCSIDisk(vm.ID, 5)
	g.Expect(err).NotTo(HaveOccurred())
	got, _ = c.GetVM(ctx, vm.ID)
	g.Expect(got.Disks).To(HaveLen(2))
	g.Expect(c.DetachDisk(ctx, vm.ID, csiID)).To(Succeed())
	g.Expect(sim.RequestCount("DELETE", "/vms/{id}/diskattachments/{id}")).To(Equal(1))
	st, _ = sim.VM(vm.ID)
	g.Expect(st.Disks).To(HaveLen(1))
	g.Expect(sim.Dump().FloatingDisks).To(ContainElement(HaveField("ID", csiID)))

	g.Expect(c.RemoveVM(ctx, vm.ID)).To(Succeed())
	g.Eventually(func() error {
		_, err := c.GetVM(ctx, vm.ID)
		return err
	}).WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(MatchError(ovirt.ErrNotFound))
	err = c.RemoveVM(ctx, vm.ID)
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	var oe *ovirt.Error
	g.Expect(errors.As(err, &oe)).To(BeTrue())
	g.Expect(oe.Status).To(Equal(404))
	g.Expect(oe.Op).To(Equal("RemoveVM"))
	found, err = c.FindVMsByName(ctx, "m1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeEmpty())
}

func TestMemoryValidationHappensBeforeAnyCall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	sim.ResetCounters()
	_, err = c.CreateVM(ctx, ovirt.VMSpec{Name: "m", ClusterID: "c", TemplateID: "t", MemoryBytes: gib, GuaranteedMemoryBytes: 2 * gib})
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	g.Expect(sim.TotalRequests()).To(BeZero())
}

func TestLookupCache(t *testing.T) {
	ctx := context.Background()
	sim := newSim(t)
	clock := newFakeClock()
	e := newEnv(t, sim, Options{LookupCacheTTL: time.Minute, now: clock.Now})
	c, err := e.f.ForProvider(ctx, e.cfg)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cluster, err := c.FindCluster(ctx, "Default")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	lookups := []struct {
		name   string
		lookup func() error
	}{
		{"a second FindCluster is served from the cache", func() error { _, err := c.FindCluster(ctx, "Default"); return err }},
		{"a second FindTemplate is served from the cache", func() error { _, err := c.FindTemplate(ctx, "rhcos-4.14", "Default"); return err }},
		{"a second FindStorageDomain is served from the cache", func() error { _, err := c.FindStorageDomain(ctx, "data"); return err }},
		{"a second FindVnicProfile is served from the cache", func() error { _, err := c.FindVnicProfile(ctx, cluster, "ovirtmgmt"); return err }},
	}
	for _, tt := range lookups {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tt.lookup()).To(Succeed())
			before := sim.TotalRequests()
			g.Expect(tt.lookup()).To(Succeed())
			g.Expect(sim.TotalRequests()).To(Equal(before))
		})
	}

	t.Run("callers cannot change cached values", func(t *testing.T) {
		g := NewWithT(t)
		tpl, _ := c.FindTemplate(ctx, "rhcos-4.14", "Default")
		tpl.Disks[0].ID = "changed"
		again, _ := c.FindTemplate(ctx, "rhcos-4.14", "Default")
		g.Expect(again.Disks[0].ID).NotTo(Equal("changed"))
	})

	t.Run("not-found lookups are not cached", func(t *testing.T) {
		g := NewWithT(t)
		_, err := c.FindTemplate(ctx, "rhcos-4.15", "")
		g.Expect(err).To(MatchError(ovirt.ErrNotFound))
		g.Expect(sim.AddTemplate(ovirtsim.Template{Name: "rhcos-4.15", Cluster: "Default",
			Disks: []ovirtsim.TemplateDisk{{Alias: "d", SizeGB: 1}}})).To(Succeed())
		tpl, err := c.FindTemplate(ctx, "rhcos-4.15", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tpl.Name).To(Equal("rhcos-4.15"))
	})

	t.Run("entries expire after the TTL", func(t *testing.T) {
		g := NewWithT(t)
		_, _ = c.FindStorageDomain(ctx, "data")
		clock.Advance(time.Minute)
		before := sim.TotalRequests()
		_, err := c.FindStorageDomain(ctx, "data")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sim.TotalRequests()).To(Equal(before+2), "the search and the status under the data center")
	})

	t.Run("an unknown id at creation drops the cache", func(t *testing.T) {
		g := NewWithT(t)
		_, _ = c.FindStorageDomain(ctx, "data")
		_, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "x", ClusterID: cluster.ID, TemplateID: "no-such-template"})
		g.Expect(err).To(MatchError(ovirt.ErrNotFound))
		before := sim.TotalRequests()
		_, err = c.FindStorageDomain(ctx, "data")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sim.TotalRequests()).To(Equal(before + 2))
	})

	t.Run("an unknown profile id on a NIC drops the cache", func(t *testing.T) {
		g := NewWithT(t)
		tpl, _ := c.FindTemplate(ctx, "rhcos-4.14", "")
		vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "nic-test", ClusterID: cluster.ID, TemplateID: tpl.ID})
		g.Expect(err).NotTo(HaveOccurred())
		_, _ = c.FindStorageDomain(ctx, "data")
		_, err = c.AddNIC(ctx, vm.ID, "nic5", "no-such-profile")
		g.Expect(err).To(MatchError(ovirt.ErrInvalid), "the engine answers 400 for an unknown profile")
		before := sim.TotalRequests()
		_, _ = c.FindStorageDomain(ctx, "data")
		g.Expect(sim.TotalRequests()).To(Equal(before + 2))
	})

	t.Run("a negative TTL disables the cache", func(t *testing.T) {
		g := NewWithT(t)
		off := newEnv(t, sim, Options{LookupCacheTTL: -1})
		c2, err := off.f.ForProvider(ctx, off.cfg)
		g.Expect(err).NotTo(HaveOccurred())
		_, _ = c2.FindCluster(ctx, "Default")
		before := sim.TotalRequests()
		_, _ = c2.FindCluster(ctx, "Default")
		g.Expect(sim.TotalRequests()).To(BeNumerically(">", before))
	})
}

// TestFreeTextReachesTheEngineUnchanged sends the characters the SDK's writer does not escape in
// element text: a typical cloud-init script has "&&", heredocs and quotes.
func TestFreeTextReachesTheEngineUnchanged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	cluster, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())

	script := "#cloud-config\nruncmd:\n  - [sh, -c, \"test -f /a && echo 'ok' > /b\"]\n  - cat <<EOF > /etc/x\n<tag attr=\"v\">&amp;</tag>\nEOF\n"
	comment := `owner <team> & "friends"`
	vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "escapes", ClusterID: cluster.ID, TemplateID: tpl.ID,
		CustomScript: script, Comment: comment, Description: "a & b < c", HostName: "escapes"})
	g.Expect(err).NotTo(HaveOccurred())
	state, ok := sim.VM(vm.ID)
	g.Expect(ok).To(BeTrue())
	g.Expect(state.CustomScript).To(Equal(script))
	g.Expect(state.Comment).To(Equal(comment))
	g.Expect(state.Description).To(Equal("a & b < c"))

	// Disk aliases too.
	g.Expect(c.UpdateDisk(ctx, vm.ID, state.Disks[0].ID, ovirt.DiskUpdate{Alias: "db & <logs>"})).To(Succeed())
	state, _ = sim.VM(vm.ID)
	g.Expect(state.Disks[0].Alias).To(Equal("db & <logs>"))
}
