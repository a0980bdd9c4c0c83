package fake_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/fake"
)

// gpuHost seeds a host of the cluster with passthrough and two GPUs, each in an IOMMU group with
// its audio function, and a USB device without a group.
func gpuHost(c *fake.Client, clusterID, name string) ovirt.Host {
	return c.AddHost(ovirt.Host{Name: name, ClusterID: clusterID, PassthroughEnabled: true, MaxSchedulingMemoryBytes: 256 << 30},
		fake.PCIDevice("pci_0000_3b_00_0", 40, "0x10DE", "0x20b5"),
		fake.PCIDevice("pci_0000_3b_00_1", 40, "10de", "1aef"),
		fake.PCIDevice("pci_0000_af_00_0", 41, "0x10de", "0x20b5"),
		fake.PCIDevice("pci_0000_af_00_1", 41, "0x10de", "0x1aef"),
		ovirt.HostDevice{Name: "usb_1_1", Capability: "usb", IOMMUGroup: -1})
}

func kindsOf(err error) (status int, detail string) {
	var e *ovirt.Error
	if errors.As(err, &e) {
		return e.Status, e.Detail
	}
	return 0, ""
}

func TestFakeHostsAndDevicesAreSeededPerCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()
	cl, _ := newVMs(g, c)
	other := c.AddCluster(ovirt.Cluster{Name: "Other"})
	h1 := gpuHost(c, cl.ID, "h1")
	h2 := c.AddHost(ovirt.Host{Name: "h2", ClusterID: cl.ID, Status: "maintenance"})
	c.AddHost(ovirt.Host{Name: "o1", ClusterID: other.ID})

	hosts, err := c.ListHosts(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hosts).To(Equal([]ovirt.Host{
		{ID: h1.ID, Name: "h1", ClusterID: cl.ID, Status: "up", PassthroughEnabled: true, MaxSchedulingMemoryBytes: 256 << 30},
		{ID: h2.ID, Name: "h2", ClusterID: cl.ID, Status: "maintenance"},
	}), "every status, only this cluster's")
	_, err = c.ListHosts(ctx, "Nowhere")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	_, err = c.ListHosts(ctx, "")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))

	devs, err := c.ListHostDevices(ctx, h1.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(devs).To(HaveLen(5))
	g.Expect(devs[0]).To(Equal(ovirt.HostDevice{ID: "7063695f303030305f33625f30305f30", Name: "pci_0000_3b_00_0", HostID: h1.ID,
		Capability: "pci", VendorID: "10de", ProductID: "20b5", IOMMUGroup: 40, Driver: "vfio-pci"}), "ids as the SDK client reports them")
	g.Expect(devs[4].IOMMUGroup).To(Equal(-1))
	devs, err = c.ListHostDevices(ctx, h2.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(devs).To(BeEmpty())
	_, err = c.ListHostDevices(ctx, "no-such-host")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	g.Expect(c.CallCount("ListHosts")).To(Equal(3))
	g.Expect(c.CallCount("ListHostDevices")).To(Equal(3))

	g.Expect(c.RemoveHostDevice(h1.ID, "usb_1_1")).To(BeTrue())
	g.Expect(c.HostDevices(h1.ID)).To(HaveLen(4))
	g.Expect(c.CallCount("ListHostDevices")).To(Equal(3), "inspection is not a call")
}

func TestFakeAttachBehavesLikeTheEngine(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()
	cl, vms := newVMs(g, c, "gpu-1", "gpu-2")
	h1 := gpuHost(c, cl.ID, "h1")
	h2 := gpuHost(c, cl.ID, "h2")
	vm := vms[0]

	// Refusals, in the Engine's order, with its texts and as the SDK client reports them.
	err := c.AttachHostDevice(ctx, vm.ID, "pci_0000_3b_00_0")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	status, detail := kindsOf(err)
	g.Expect(status).To(Equal(409))
	g.Expect(detail).To(Equal("Operation Failed: [Cannot add Host devices. VM must be pinned to a host.]"))
	c.PutVM(func() ovirt.VM { v, _ := c.VM(vm.ID); v.PinnedHostIDs = []string{h1.ID, h2.ID}; return v }())
	err = c.AttachHostDevice(ctx, vm.ID, "pci_0000_3b_00_0")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	_, detail = kindsOf(err)
	g.Expect(detail).To(ContainSubstring("VM must be pinned to a single host."))

	g.Expect(c.PinVM(ctx, vm.ID, h1.ID)).To(Succeed())
	got, err := c.GetVM(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.PinnedHostIDs).To(Equal([]string{h1.ID}))
	g.Expect(got.PlacementAffinity).To(Equal("pinned"))

	err = c.AttachHostDevice(ctx, vm.ID, "pci_0000_99_00_0")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	status, detail = kindsOf(err)
	g.Expect(status).To(Equal(400))
	g.Expect(detail).To(Equal("Operation Failed: [Cannot add Host devices. One or more of specified host devices not found.]"))
	err = c.AttachHostDevice(ctx, "00000000-0000-4000-8000-000000009999", "pci_0000_3b_00_0")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	g.Expect(c.AttachHostDevice(ctx, vm.ID, "")).To(MatchError(ovirt.ErrInvalid))
	g.Expect(c.AttachHostDevice(ctx, "", "pci_0000_3b_00_0")).To(MatchError(ovirt.ErrInvalid))

	// The whole IOMMU group, the other function as a placeholder.
	g.Expect(c.AttachHostDevice(ctx, vm.ID, "pci_0000_3b_00_0")).To(Succeed())
	devs, err := c.ListVMHostDevices(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(devs).To(HaveLen(2))
	g.Expect(devs[0].Name).To(Equal("pci_0000_3b_00_0"))
	g.Expect(devs[0].Placeholder).To(BeFalse())
	g.Expect(devs[0].VMID).To(Equal(vm.ID))
	g.Expect(devs[0].HostID).To(Equal(h1.ID))
	g.Expect(devs[1].Name).To(Equal("pci_0000_3b_00_1"))
	g.Expect(devs[1].Placeholder).To(BeTrue())
	// Asking for the placeholder makes it a device of its own; twice is no error.
	g.Expect(c.AttachHostDevice(ctx, vm.ID, "pci_0000_3b_00_1")).To(Succeed())
	g.Expect(c.AttachHostDevice(ctx, vm.ID, "pci_0000_3b_00_0")).To(Succeed())
	devs = c.VMHostDevices(vm.ID)
	g.Expect(devs).To(HaveLen(2))
	g.Expect(devs[1].Placeholder).To(BeFalse())
	_, err = c.ListVMHostDevices(ctx, "00000000-0000-4000-8000-000000009999")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))

	// A device configured on another stopped VM is accepted.
	other := vms[1]
	g.Expect(c.PinVM(ctx, other.ID, h1.ID)).To(Succeed())
	g.Expect(c.AttachHostDevice(ctx, other.ID, "pci_0000_3b_00_0")).To(Succeed())
	g.Expect(c.VMHostDevices(other.ID)).To(HaveLen(2))

	// A VM that is not down.
	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStart)).To(Succeed())
	err = c.AttachHostDevice(ctx, vm.ID, "pci_0000_af_00_0")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	status, detail = kindsOf(err)
	g.Expect(status).To(Equal(409))
	g.Expect(detail).To(Equal("Operation Failed: [Cannot add Host devices because the VM is in Up status.]"))
	err = c.DetachHostDevice(ctx, vm.ID, "pci_0000_3b_00_0")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	_, detail = kindsOf(err)
	g.Expect(detail).To(Equal("Operation Failed: [Cannot remove Host devices because the VM is in Up status.]"))
	locked := c.PutVM(ovirt.VM{Name: "locked", ClusterID: cl.ID, Status: ovirt.VMStatusImageLocked, PinnedHostIDs: []string{h1.ID}})
	err = c.AttachHostDevice(ctx, locked.ID, "pci_0000_af_00_0")
	g.Expect(err).To(MatchError(ovirt.ErrLocked), "a VM being created")
	g.Expect(err).NotTo(MatchError(ovirt.ErrInvalid))

	g.Expect(c.CallCount("AttachHostDevice")).To(Equal(12))
}

func TestFakeDetachDropsAGroupWhenOnlyPlaceholdersRemain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()
	cl, vms := newVMs(g, c, "gpu-1")
	h1 := gpuHost(c, cl.ID, "h1")
	vm := vms[0]
	g.Expect(c.PinVM(ctx, vm.ID, h1.ID)).To(Succeed())
	for _, d := range []string{"pci_0000_3b_00_0", "pci_0000_3b_00_1", "usb_1_1"} {
		g.Expect(c.AttachHostDevice(ctx, vm.ID, d)).To(Succeed())
	}
	names := func() []string {
		var out []string
		for _, d := range c.VMHostDevices(vm.ID) {
			out = append(out, d.Name)
		}
		return out
	}
	g.Expect(names()).To(Equal([]string{"pci_0000_3b_00_0", "pci_0000_3b_00_1", "usb_1_1"}))

	g.Expect(c.DetachHostDevice(ctx, vm.ID, "pci_0000_3b_00_0")).To(Succeed())
	g.Expect(names()).To(Equal([]string{"pci_0000_3b_00_0", "pci_0000_3b_00_1", "usb_1_1"}), "its group still has a wanted device")
	g.Expect(c.VMHostDevices(vm.ID)[0].Placeholder).To(BeTrue())
	g.Expect(c.DetachHostDevice(ctx, vm.ID, "pci_0000_3b_00_1")).To(Succeed())
	g.Expect(names()).To(Equal([]string{"usb_1_1"}), "only placeholders were left")
	g.Expect(c.DetachHostDevice(ctx, vm.ID, "usb_1_1")).To(Succeed())
	g.Expect(names()).To(BeEmpty(), "a device without a group goes at once")

	g.Expect(c.DetachHostDevice(ctx, vm.ID, "pci_0000_3b_00_0")).To(Succeed(), "not attached is no error")
	g.Expect(c.DetachHostDevice(ctx, "00000000-0000-4000-8000-000000009999", "pci_0000_3b_00_0")).To(Succeed(), "no VM, no device")
	g.Expect(c.DetachHostDevice(ctx, vm.ID, "")).To(MatchError(ovirt.ErrInvalid))
	g.Expect(c.CallCount("DetachHostDevice")).To(Equal(6))
}

func TestFakePinVMDropsDevicesWhenTheHostChanges(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()
	cl, vms := newVMs(g, c, "gpu-1")
	other := c.AddCluster(ovirt.Cluster{Name: "Other"})
	h1 := gpuHost(c, cl.ID, "h1")
	h2 := gpuHost(c, cl.ID, "h2")
	o1 := c.AddHost(ovirt.Host{Name: "o1", ClusterID: other.ID})
	vm := vms[0]

	g.Expect(c.PinVM(ctx, vm.ID, h1.ID)).To(Succeed())
	g.Expect(c.AttachHostDevice(ctx, vm.ID, "pci_0000_3b_00_0")).To(Succeed())
	g.Expect(c.PinVM(ctx, vm.ID, h1.ID)).To(Succeed())
	g.Expect(c.VMHostDevices(vm.ID)).To(HaveLen(2), "the same host keeps them")
	g.Expect(c.PinVM(ctx, vm.ID, h2.ID)).To(Succeed())
	g.Expect(c.VMHostDevices(vm.ID)).To(BeEmpty(), "another host drops them")

	err := c.PinVM(ctx, vm.ID, "no-such-host")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	status, detail := kindsOf(err)
	g.Expect(status).To(Equal(409))
	g.Expect(detail).To(Equal("Operation Failed: [Cannot edit VM. VM is pinned to a specific host. The required host doesn't exist.]"))
	err = c.PinVM(ctx, vm.ID, o1.ID)
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	_, detail = kindsOf(err)
	g.Expect(detail).To(ContainSubstring("The host's cluster must be the same as the selected VM cluster."))
	g.Expect(c.PinVM(ctx, "00000000-0000-4000-8000-000000009999", h1.ID)).To(MatchError(ovirt.ErrNotFound))
	g.Expect(c.PinVM(ctx, vm.ID, "")).To(MatchError(ovirt.ErrInvalid))
	got, _ := c.VM(vm.ID)
	g.Expect(got.PinnedHostIDs).To(Equal([]string{h2.ID}), "a refused pin changes nothing")

	// CreateVM pins as POST /vms with a placement policy does, with the same checks.
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())
	pinned, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "gpu-2", ClusterID: cl.ID, TemplateID: tpl.ID, PinnedHostID: h2.ID})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pinned.PinnedHostIDs).To(Equal([]string{h2.ID}))
	g.Expect(pinned.PlacementAffinity).To(Equal("pinned"))
	spec, _ := c.Spec(pinned.ID)
	g.Expect(spec.PinnedHostID).To(Equal(h2.ID))
	_, err = c.CreateVM(ctx, ovirt.VMSpec{Name: "gpu-3", ClusterID: cl.ID, TemplateID: tpl.ID, PinnedHostID: o1.ID})
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	_, detail = kindsOf(err)
	g.Expect(detail).To(HavePrefix("Operation Failed: [Cannot add VM. VM is pinned to a specific host."))
	plain, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "plain", ClusterID: cl.ID, TemplateID: tpl.ID})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plain.PinnedHostIDs).To(BeNil())
	g.Expect(plain.PlacementAffinity).To(Equal("migratable"))
}

func TestFakeStartHoldsDevicesAndRefusesWhileAnotherRunningVMHoldsThem(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()
	cl, vms := newVMs(g, c, "gpu-1", "gpu-2", "plain")
	h1 := gpuHost(c, cl.ID, "h1")
	h2 := gpuHost(c, cl.ID, "h2")
	a, b := vms[0], vms[1]
	for _, vm := range []*ovirt.VM{a, b} {
		g.Expect(c.PinVM(ctx, vm.ID, h1.ID)).To(Succeed())
		g.Expect(c.AttachHostDevice(ctx, vm.ID, "pci_0000_3b_00_0")).To(Succeed())
	}

	g.Expect(c.RunOnce(ctx, a.ID, "ignition")).To(Succeed())
	hostID, _ := c.HostOf(a.ID)
	g.Expect(hostID).To(Equal(h1.ID), "on its pinned host")
	devs, err := c.ListHostDevices(ctx, h1.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(devs[0].VMID).To(Equal(a.ID))
	g.Expect(devs[1].VMID).To(Equal(a.ID), "placeholders are held too")
	g.Expect(devs[2].VMID).To(BeEmpty())

	// The second VM with the same device: the Engine's HostDevice filter.
	err = c.Power(ctx, b.ID, ovirt.PowerStart)
	g.Expect(err).To(MatchError(ovirt.ErrNoHost))
	g.Expect(err).To(MatchError(ovirt.ErrConflict))
	g.Expect(err).NotTo(MatchError(ovirt.ErrLocked))
	status, detail := kindsOf(err)
	g.Expect(status).To(Equal(409))
	const unavailable = "The host h1 did not satisfy internal filter HostDevice because some of the required host devices are unavailable."
	g.Expect(detail).To(Equal("Operation Failed: [Cannot run VM. There is no host that satisfies current scheduling constraints. "+
		"See below for details:, "+unavailable+", "+unavailable+"]"), "h2 is not the pinned host, but the Engine repeats the first line")
	g.Expect(c.SetHostStatus(h2.ID, "maintenance")).To(BeTrue())
	err = c.Power(ctx, b.ID, ovirt.PowerStart)
	g.Expect(err).To(MatchError(ovirt.ErrNoHost))
	_, detail = kindsOf(err)
	g.Expect(detail).To(HaveSuffix("See below for details:, " + unavailable + "]"))
	g.Expect(c.PowerActions(b.ID)).To(BeEmpty())

	// Once the first stops, the second starts and takes the devices.
	g.Expect(c.Power(ctx, a.ID, ovirt.PowerStop)).To(Succeed())
	g.Expect(c.HostDevices(h1.ID)[0].VMID).To(BeEmpty(), "freed at down")
	g.Expect(c.Power(ctx, b.ID, ovirt.PowerStart)).To(Succeed())
	g.Expect(c.HostDevices(h1.ID)[0].VMID).To(Equal(b.ID))
	g.Expect(c.PowerActions(a.ID)).To(Equal([]ovirt.PowerAction{ovirt.PowerStart, ovirt.PowerStop}))

	// Passthrough disabled on the pinned host; the other hosts are not the pinned one.
	g.Expect(c.Power(ctx, b.ID, ovirt.PowerShutdown)).To(Succeed())
	c.AddHost(ovirt.Host{ID: "h3", Name: "h3", ClusterID: cl.ID}, fake.PCIDevice("pci_0000_3b_00_0", 40, "10de", "20b5"))
	g.Expect(c.PinVM(ctx, b.ID, "h3")).To(Succeed())
	g.Expect(c.AttachHostDevice(ctx, b.ID, "pci_0000_3b_00_0")).To(Succeed())
	err = c.Power(ctx, b.ID, ovirt.PowerStart)
	g.Expect(err).To(MatchError(ovirt.ErrNoHost))
	_, detail = kindsOf(err)
	g.Expect(detail).To(ContainSubstring("The host h1 did not satisfy internal filter PinToHost because the host is not present in the pinning list.."))
	g.Expect(c.SetHostStatus(h1.ID, "maintenance")).To(BeTrue())
	err = c.Power(ctx, b.ID, ovirt.PowerStart)
	g.Expect(err).To(MatchError(ovirt.ErrNoHost))
	_, detail = kindsOf(err)
	g.Expect(detail).To(HaveSuffix("See below for details:, The host h3 did not satisfy internal filter HostDevice because it does not support host device passthrough.]"))
	g.Expect(c.SetHostStatus("h3", "maintenance")).To(BeTrue())
	err = c.Power(ctx, b.ID, ovirt.PowerStart)
	g.Expect(err).To(MatchError(ovirt.ErrNoHost))
	status, detail = kindsOf(err)
	g.Expect(status).To(Equal(400), "no host up at all")
	g.Expect(detail).To(ContainSubstring("There are no hosts to use."))

	// A VM without devices nor pinning runs on any seeded host that is up.
	g.Expect(c.SetHostStatus(h2.ID, "up")).To(BeTrue())
	g.Expect(c.Power(ctx, vms[2].ID, ovirt.PowerStart)).To(Succeed())
	hostID, _ = c.HostOf(vms[2].ID)
	g.Expect(hostID).To(Equal(h2.ID))
}

func TestFakeRebootAndReset(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()
	cl, vms := newVMs(g, c, "w-1")
	vm := vms[0]

	err := c.Power(ctx, vm.ID, ovirt.PowerReboot)
	g.Expect(err).To(MatchError(ovirt.ErrConflict))
	g.Expect(err).NotTo(MatchError(ovirt.ErrInvalid))
	_, detail := kindsOf(err)
	g.Expect(detail).To(Equal("Operation Failed: [Cannot restart VM because the VM is in Down status.]"))
	err = c.Power(ctx, vm.ID, ovirt.PowerReset)
	g.Expect(err).To(MatchError(ovirt.ErrConflict))
	_, detail = kindsOf(err)
	g.Expect(detail).To(Equal("Operation Failed: [Cannot reset VM because the VM is in Down status.]"))

	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStart)).To(Succeed())
	hostID, _ := c.HostOf(vm.ID)
	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerReboot)).To(Succeed())
	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerReset)).To(Succeed())
	got, _ := c.VM(vm.ID)
	g.Expect(got.Status).To(Equal(ovirt.VMStatusUp))
	g.Expect(got.HostID).To(Equal(hostID), "a reboot or a reset keeps the host")
	g.Expect(c.PowerActions(vm.ID)).To(Equal([]ovirt.PowerAction{ovirt.PowerStart, ovirt.PowerReboot, ovirt.PowerReset}))

	c.SetClusterLevel(cl.ID, 4, 5)
	err = c.Power(ctx, vm.ID, ovirt.PowerReset)
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	status, detail := kindsOf(err)
	g.Expect(status).To(Equal(400))
	g.Expect(detail).To(Equal("Operation Failed: [Cannot reset VM. Reset VM requires cluster compatibility version 4.6 or higher.]"))
	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerReboot)).To(Succeed(), "a reboot needs no cluster level")
	g.Expect(c.CallCount("Power")).To(Equal(7))
}
