package fake_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/fake"
)

func TestFakeClientRunsTheLifecycleInMemory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()

	cl, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "Default")
	g.Expect(err).NotTo(HaveOccurred())
	sd, err := c.FindStorageDomain(ctx, "data")
	g.Expect(err).NotTo(HaveOccurred())
	vp, err := c.FindVnicProfile(ctx, cl, "ovirtmgmt")
	g.Expect(err).NotTo(HaveOccurred())

	vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "m1", ClusterID: cl.ID, TemplateID: tpl.ID, Clone: true,
		StorageDomainID: sd.ID, TemplateDisks: tpl.Disks, Comment: "owner", CustomScript: "secret"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.Status).To(Equal(ovirt.VMStatusDown))
	g.Expect(vm.OriginalTemplateID).To(Equal(tpl.ID))
	_, err = c.CreateVM(ctx, ovirt.VMSpec{Name: "m1", ClusterID: cl.ID, TemplateID: tpl.ID})
	g.Expect(err).To(MatchError(ovirt.ErrConflict), "names are unique (409, as the Engine answers)")

	disk := vm.Disks[0]
	g.Expect(c.UpdateDisk(ctx, vm.ID, disk.ID, ovirt.DiskUpdate{ProvisionedSize: disk.ProvisionedSize / 2})).To(MatchError(ovirt.ErrInvalid))
	g.Expect(c.UpdateDisk(ctx, vm.ID, disk.ID, ovirt.DiskUpdate{ProvisionedSize: 2 * disk.ProvisionedSize, Alias: "m1_Disk1"})).To(Succeed())
	nic, err := c.AddNIC(ctx, vm.ID, "nic1", vp.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.UpdateNIC(ctx, vm.ID, nic.ID, vp.ID)).To(Succeed())
	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStart)).To(Succeed())

	got, err := c.GetVM(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Status).To(Equal(ovirt.VMStatusUp))
	g.Expect(got.Disks[0].Alias).To(Equal("m1_Disk1"))
	g.Expect(got.NICs).To(HaveLen(1))
	byName, err := c.FindVMsByName(ctx, "m1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byName).To(HaveLen(1))
	spec, _ := c.Spec(vm.ID)
	g.Expect(spec.CustomScript).To(Equal("secret"))

	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStop)).To(Succeed())
	g.Expect(c.RemoveNIC(ctx, vm.ID, nic.ID)).To(Succeed())
	g.Expect(c.DetachDisk(ctx, vm.ID, disk.ID)).To(Succeed())
	g.Expect(c.RemoveVM(ctx, vm.ID)).To(Succeed())
	_, err = c.GetVM(ctx, vm.ID)
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	g.Expect(c.CallCount("GetVM")).To(Equal(2))
}

func TestFakeHooksOverrideTheInMemoryBehaviour(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewDefaultClient()
	locked := &ovirt.Error{Op: "CreateVM", Status: 409, Kinds: []error{ovirt.ErrConflict, ovirt.ErrLocked}}
	c.CreateVMFunc = func(context.Context, ovirt.VMSpec) (*ovirt.VM, error) { return nil, locked }
	_, err := c.CreateVM(context.Background(), ovirt.VMSpec{Name: "m1"})
	g.Expect(errors.Is(err, ovirt.ErrLocked)).To(BeTrue())
	g.Expect(c.VMs()).To(BeEmpty())
	g.Expect(c.Calls()).To(Equal([]string{"CreateVM"}))
}

func TestFakeFactory(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClient()
	f := fake.NewFactory(c)
	cfg := ovirt.Config{Provider: "p", URL: "https://engine/ovirt-engine/api"}
	got, err := f.ForProvider(context.Background(), cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeIdenticalTo(c))
	recorded, ok := f.Config("p")
	g.Expect(ok).To(BeTrue())
	g.Expect(recorded.URL).To(Equal(cfg.URL))

	f.ForProviderFunc = func(context.Context, ovirt.Config) (ovirt.Client, error) {
		return nil, &ovirt.BreakerOpenError{}
	}
	_, err = f.ForProvider(context.Background(), cfg)
	g.Expect(err).To(MatchError(ovirt.ErrAuth))
	f.Forget("p")
	f.Close()
	g.Expect(f.Forgotten()).To(Equal([]string{"p"}))
	g.Expect(f.Closed()).To(BeTrue())
}

func TestFakeUpdateVMRecordsTheNetworkAndTheCustomScript(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()
	cl, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "m1", ClusterID: cl.ID, TemplateID: tpl.ID, CustomScript: "first"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Network(vm.ID)).To(BeNil(), "no Network update yet")

	net := &ovirt.NetworkConfig{
		NICs: []ovirt.NICConfiguration{{Name: "eth0", IPv4Boot: ovirt.BootProtocolStatic,
			IPv4: &ovirt.IPConfig{Address: "10.0.0.5", Prefix: 24, Gateway: "10.0.0.1"}}},
		DNSServers: []string{"10.0.0.53"},
	}
	script := "ignition with keyfiles"
	g.Expect(c.UpdateVM(ctx, vm.ID, ovirt.VMUpdate{Network: net, CustomScript: &script})).To(Succeed())
	net.NICs[0].IPv4.Address = "changed by the caller"
	got := c.Network(vm.ID)
	g.Expect(got.NICs).To(HaveLen(1))
	g.Expect(got.NICs[0].IPv4.Address).To(Equal("10.0.0.5"), "a copy is kept")
	g.Expect(got.DNSServers).To(Equal([]string{"10.0.0.53"}))
	spec, _ := c.Spec(vm.ID)
	g.Expect(spec.CustomScript).To(Equal(script), "the spec follows the update")
	s, ok := c.CustomScript(vm.ID)
	g.Expect(ok).To(BeTrue())
	g.Expect(s).To(Equal(script))

	g.Expect(c.UpdateVM(ctx, vm.ID, ovirt.VMUpdate{ClearCustomScript: true, CustomScript: &script})).To(MatchError(ovirt.ErrInvalid))
	g.Expect(c.UpdateVM(ctx, vm.ID, ovirt.VMUpdate{ClearCustomScript: true})).To(Succeed())
	s, _ = c.CustomScript(vm.ID)
	g.Expect(s).To(BeEmpty())
	g.Expect(c.Network(vm.ID)).NotTo(BeNil(), "a script update leaves the network")

	// A VM seeded with PutVM has no spec; its script is still recorded.
	seeded := c.PutVM(ovirt.VM{Name: "seeded"})
	_, ok = c.CustomScript(seeded.ID)
	g.Expect(ok).To(BeFalse())
	g.Expect(c.UpdateVM(ctx, seeded.ID, ovirt.VMUpdate{CustomScript: &script})).To(Succeed())
	s, ok = c.CustomScript(seeded.ID)
	g.Expect(ok).To(BeTrue())
	g.Expect(s).To(Equal(script))
	_, ok = c.Spec(seeded.ID)
	g.Expect(ok).To(BeFalse())

	g.Expect(c.RemoveVM(ctx, vm.ID)).To(Succeed())
	g.Expect(c.Network(vm.ID)).To(BeNil())
}

func TestFakeListVMsPagesTheOwnedVMsByName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewClient()
	const marker = "capov ovirtmachine="
	for _, n := range []string{"m-4", "m-2", "m-5", "m-1", "m-3"} {
		c.PutVM(ovirt.VM{Name: n, Comment: marker + "default/" + n + " uid=u-" + n, HostID: "host-" + n, HostName: "h-" + n,
			Disks: []ovirt.Disk{{ID: "d-" + n}}, NICs: []ovirt.NIC{{ID: "n-" + n}}})
	}
	c.PutVM(ovirt.VM{Name: "m-0", Comment: "someone else's"})
	c.PutVM(ovirt.VM{Name: "m-9", Comment: "CAPOV OVIRTMACHINE=default/m-9"})

	// The exact text (not m-9's upper case), by name, each VM once; the last page is short.
	for i, want := range [][]string{{"m-1", "m-2"}, {"m-3", "m-4"}, {"m-5"}} {
		p, err := c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: i + 1, PageSize: 2})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Complete).To(BeTrue())
		g.Expect(p.VMs).To(HaveLen(len(want)))
		for j, vm := range p.VMs {
			g.Expect(vm.Name).To(Equal(want[j]))
			g.Expect(vm.Disks).To(Equal([]ovirt.Disk{{ID: "d-" + vm.Name}}))
			g.Expect(vm.NICs).To(Equal([]ovirt.NIC{{ID: "n-" + vm.Name}}))
			g.Expect(vm.HostName).To(Equal("h-" + vm.Name))
		}
	}
	g.Expect(c.CallCount("ListVMs")).To(Equal(3))

	p, err := c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: 1 << 62, PageSize: ovirt.MaxVMPageSize})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.VMs).To(BeEmpty(), "far past the end")
	g.Expect(p.VMs).NotTo(BeNil())

	// The page holds copies.
	p, _ = c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: 1, PageSize: 1})
	p.VMs[0].Disks[0].ID = "changed"
	stored, _ := c.VM(p.VMs[0].ID)
	g.Expect(stored.Disks[0].ID).To(Equal("d-m-1"))

	c.ListVMsFunc = func(context.Context, ovirt.VMQuery) (ovirt.VMPage, error) {
		return ovirt.VMPage{}, ovirt.ErrUnreachable
	}
	_, err = c.ListVMs(ctx, ovirt.VMQuery{})
	g.Expect(err).To(MatchError(ovirt.ErrUnreachable), "the hook runs before any validation")
	g.Expect(c.CallCount("ListVMs")).To(Equal(6))
}

// TestFakeListVMsRefusesInvalidQueries spot-checks the validation; pkg/ovirt/sdk's
// TestListVMsRefusesInvalidQueriesBeforeAnyRequest checks that the fake refuses every query the
// SDK client refuses, with the same text.
func TestFakeListVMsRefusesInvalidQueries(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewDefaultClient()
	_, err := c.ListVMs(context.Background(), ovirt.VMQuery{CommentContains: `say "hi"`, Page: 1, PageSize: 10})
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	g.Expect(err.Error()).To(ContainSubstring("CommentContains"))
	_, err = c.ListVMs(context.Background(), ovirt.VMQuery{CommentContains: "a", Page: 1, PageSize: ovirt.MaxVMPageSize + 1})
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	g.Expect(err.Error()).To(ContainSubstring("PageSize 1001"))
}
