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
	g.Expect(err).To(MatchError(ovirt.ErrInvalid), "names are unique")

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
