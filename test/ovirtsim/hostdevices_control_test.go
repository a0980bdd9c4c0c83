package ovirtsim_test

import (
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func TestSetHostDevicesGivesAHostGPUsAtRunTime(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	host4 := hostIDByName(t, sim, "host4")
	hostsSvc := conn.SystemService().HostsService()
	passthrough := func() bool {
		return hostsSvc.HostService(host4).Get().MustSend().MustHost().MustDevicePassthrough().MustEnabled()
	}
	listed := func() []string {
		r, err := hostsSvc.HostService(host4).DevicesService().List().Send()
		g.Expect(err).NotTo(HaveOccurred())
		var out []string
		for _, d := range r.MustDevices().Slice() {
			out = append(out, d.MustName())
		}
		return out
	}
	available := func() int64 {
		return hostDevice(g, conn, host4, "pci_0000_5e_00_0").MustMDevTypes().Slice()[0].MustAvailableInstances()
	}
	devices := func(instances int) []ovirtsim.HostDeviceSeed {
		return []ovirtsim.HostDeviceSeed{
			{Name: "pci_0000_3b_00_0", VendorID: "10de", ProductID: "20b5", IOMMUGroup: intp(30), Driver: "vfio-pci"},
			{Name: "pci_0000_3b_00_1", VendorID: "10de", ProductID: "1aef", IOMMUGroup: intp(30)},
			{Name: "pci_0000_5e_00_0", VendorID: "10de", ProductID: "1eb8", IOMMUGroup: intp(40), Driver: "nvidia",
				MDevTypes: []ovirtsim.MDevTypeSeed{{Name: "nvidia-22", AvailableInstances: instances}}},
		}
	}

	// The seed's checks.
	g.Expect(sim.SetHostDevices("nope", true)).To(MatchError(ovirtsim.ErrNotFound))
	g.Expect(sim.SetHostDevices("host4", true, ovirtsim.HostDeviceSeed{Name: "pci_0000_3b_00_0", VendorID: "nvidia"})).To(MatchError(ovirtsim.ErrInvalid))
	g.Expect(sim.SetHostDevices("host4", true, ovirtsim.HostDeviceSeed{Name: "a"}, ovirtsim.HostDeviceSeed{Name: "a"})).To(MatchError(ovirtsim.ErrInvalid))
	g.Expect(passthrough()).To(BeFalse())
	g.Expect(listed()).To(BeEmpty())

	g.Expect(sim.SetHostDevices("host4", true, devices(1)...)).To(Succeed())
	g.Expect(passthrough()).To(BeTrue())
	g.Expect(listed()).To(Equal([]string{"pci_0000_3b_00_0", "pci_0000_3b_00_1", "pci_0000_5e_00_0"}))
	d := hostDevice(g, conn, host4, "pci_0000_3b_00_0")
	g.Expect(d.MustCapability()).To(Equal("pci")) // the seed's defaults
	g.Expect(d.MustParentDevice().MustName()).To(Equal("computer"))
	g.Expect(d.MustIommuGroup()).To(BeEquivalentTo(30))
	g.Expect(available()).To(BeEquivalentTo(1))

	// The devices are the host's as if seeded: attached with their group, the VM runs there.
	pr, err := conn.SystemService().VmsService().Add().Vm(vmBuilder("a", "rhcos-4.14", "Secondary").
		PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_PINNED, "host4")).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	a := pr.MustVm().MustId()
	_, err = attach(conn, a, "pci_0000_3b_00_0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmDevices(g, conn, a)).To(Equal(map[string]bool{"pci_0000_3b_00_0": false, "pci_0000_3b_00_1": true}))
	g.Expect(startVM(conn, a)).To(Succeed())
	g.Expect(vmHostOf(t, sim, a)).To(Equal("host4"))

	// Not while a VM has some of them configured (running or not).
	g.Expect(sim.SetHostDevices("host4", true)).To(MatchError(ovirtsim.ErrConflict))
	_, err = conn.SystemService().VmsService().VmService(a).Stop().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.SetHostDevices("host4", true)).To(MatchError(ovirtsim.ErrConflict))
	_, err = conn.SystemService().VmsService().VmService(a).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())

	// A vGPU VM runs on host4 (host5 offers no nvidia-22); new devices are stored with the
	// instances it takes.
	r, err := conn.SystemService().VmsService().Add().Vm(vmBuilder("v", "rhcos-4.14", "Secondary").CustomPropertiesOfAny(
		ovirtsdk.NewCustomPropertyBuilder().Name("mdev_type").Value("nvidia-22").MustBuild()).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	v := r.MustVm().MustId()
	g.Expect(startVM(conn, v)).To(Succeed())
	g.Expect(vmHostOf(t, sim, v)).To(Equal("host4"))
	g.Expect(sim.SetHostDevices("host4", true, devices(4)...)).To(Succeed())
	g.Expect(available()).To(BeEquivalentTo(3))

	// None: no device, no passthrough.
	g.Expect(sim.SetHostDevices("host4", false)).To(Succeed())
	g.Expect(passthrough()).To(BeFalse())
	g.Expect(listed()).To(BeEmpty())
}
