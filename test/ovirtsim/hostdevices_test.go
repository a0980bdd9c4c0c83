package ovirtsim_test

import (
	"encoding/hex"
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func intp(n int) *int { return &n }

// withGPUs adds the cluster "GPU" (data center Default): gpu1 supports passthrough and has an
// A100 in IOMMU group 30 with its audio function, and a vGPU card offering one nvidia-22; gpu2
// has no passthrough and a vGPU card whose nvidia-22 are all taken.
func withGPUs(b *ovirtsim.Builder) {
	b.WithCluster(ovirtsim.Cluster{Name: "GPU", Hosts: []ovirtsim.Host{
		{Name: "gpu1", DevicePassthrough: true, Devices: []ovirtsim.HostDeviceSeed{
			{Name: "pci_0000_3b_00_0", VendorID: "10de", ProductID: "20b5", VendorName: "NVIDIA Corporation",
				ProductName: "GA100 [A100 PCIe 80GB]", IOMMUGroup: intp(30), Parent: "pci_0000_3a_00_0", Driver: "vfio-pci"},
			{Name: "pci_0000_3b_00_1", VendorID: "10de", ProductID: "1aef", IOMMUGroup: intp(30), Parent: "pci_0000_3a_00_0"},
			{Name: "pci_0000_5e_00_0", VendorID: "10de", ProductID: "1eb8", IOMMUGroup: intp(40), Driver: "nvidia",
				MDevTypes: []ovirtsim.MDevTypeSeed{{Name: "nvidia-22", AvailableInstances: 1, HumanReadableName: "GRID T4-16Q"}}},
		}},
		{Name: "gpu2", Devices: []ovirtsim.HostDeviceSeed{
			{Name: "pci_0000_af_00_0", VendorID: "10de", ProductID: "1eb8", IOMMUGroup: intp(7),
				MDevTypes: []ovirtsim.MDevTypeSeed{{Name: "nvidia-22", AvailableInstances: 0}}},
		}},
	}})
}

// createPinned creates a VM in GPU pinned to the given hosts.
func createPinned(t testing.TB, conn *ovirtsdk.Connection, name string, hosts ...string) string {
	t.Helper()
	b := vmBuilder(name, "rhcos-4.14", "GPU").PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_PINNED, hosts...))
	r, err := conn.SystemService().VmsService().Add().Vm(b.MustBuild()).Send()
	if err != nil {
		t.Fatalf("creating VM %s: %v", name, err)
	}
	return r.MustVm().MustId()
}

func hostIDByName(t testing.TB, sim *ovirtsim.Simulator, name string) string {
	t.Helper()
	h, ok := sim.Host(name)
	if !ok {
		t.Fatalf("no host %s", name)
	}
	return h.ID
}

func attach(conn *ovirtsdk.Connection, vmID, device string) (*ovirtsdk.HostDevice, error) {
	r, err := conn.SystemService().VmsService().VmService(vmID).HostDevicesService().Add().
		Device(ovirtsdk.NewHostDeviceBuilder().Name(device).MustBuild()).Send()
	if err != nil {
		return nil, err
	}
	return r.MustDevice(), nil
}

func vmDevices(g Gomega, conn *ovirtsdk.Connection, vmID string) map[string]bool {
	r, err := conn.SystemService().VmsService().VmService(vmID).HostDevicesService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]bool{}
	for _, d := range r.MustDevice().Slice() {
		p, _ := d.Placeholder()
		out[d.MustName()] = p
	}
	return out
}

func hostDevice(g Gomega, conn *ovirtsdk.Connection, hostID, name string) *ovirtsdk.HostDevice {
	r, err := conn.SystemService().HostsService().HostService(hostID).DevicesService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	for _, d := range r.MustDevices().Slice() {
		if d.MustName() == name {
			return d
		}
	}
	return nil
}

func TestHostDevicesAsTheEngineMapsThem(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, withGPUs)
	conn := connect(t, sim)
	gpu1 := hostIDByName(t, sim, "gpu1")

	h1 := conn.SystemService().HostsService().HostService(gpu1).Get().MustSend().MustHost()
	g.Expect(h1.MustDevicePassthrough().MustEnabled()).To(BeTrue())
	h2 := conn.SystemService().HostsService().HostService(hostIDByName(t, sim, "gpu2")).Get().MustSend().MustHost()
	g.Expect(h2.MustDevicePassthrough().MustEnabled()).To(BeFalse())

	d := hostDevice(g, conn, gpu1, "pci_0000_3b_00_0")
	g.Expect(d.MustId()).To(Equal(hex.EncodeToString([]byte("pci_0000_3b_00_0")))) // HexUtils.string2hex
	g.Expect(d.MustCapability()).To(Equal("pci"))
	g.Expect(d.MustVendor().MustId()).To(Equal("0x10de"))
	g.Expect(d.MustVendor().MustName()).To(Equal("NVIDIA Corporation"))
	g.Expect(d.MustProduct().MustId()).To(Equal("0x20b5"))
	g.Expect(d.MustIommuGroup()).To(BeEquivalentTo(30))
	g.Expect(d.MustParentDevice().MustName()).To(Equal("pci_0000_3a_00_0"))
	g.Expect(d.MustDriver()).To(Equal("vfio-pci"))
	g.Expect(d.MustHost().MustId()).To(Equal(gpu1))
	_, held := d.Vm()
	g.Expect(held).To(BeFalse())
	v := hostDevice(g, conn, gpu1, "pci_0000_5e_00_0")
	mt := v.MustMDevTypes().Slice()
	g.Expect(mt).To(HaveLen(1))
	g.Expect(mt[0].MustName()).To(Equal("nvidia-22"))
	g.Expect(mt[0].MustAvailableInstances()).To(BeEquivalentTo(1))
	g.Expect(mt[0].MustHumanReadableName()).To(Equal("GRID T4-16Q"))
	g.Expect(hostDevice(g, conn, gpu1, "pci_0000_af_00_0")).To(BeNil())

	one, err := conn.SystemService().HostsService().HostService(gpu1).DevicesService().DeviceService(d.MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(one.MustDevice().MustName()).To(Equal("pci_0000_3b_00_0"))
	_, err = conn.SystemService().HostsService().HostService(gpu1).DevicesService().DeviceService(hex.EncodeToString([]byte("nope"))).Get().Send()
	g.Expect(err).To(HaveOccurred())
	g.Expect(sim.RequestCount("GET", "/hosts/{id}/devices")).To(Equal(3))
	g.Expect(sim.RequestCount("GET", "/hosts/{id}/devices/{id}")).To(Equal(2))
}

func TestAttachingHostDevicesFollowsTheEnginesRules(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, withGPUs)
	conn := connect(t, sim)

	free := createVMIn(t, conn, "free", "GPU", false)
	_, err := attach(conn, free, "pci_0000_3b_00_0")
	g.Expect(faultLines(t, err)).To(Equal([]string{"Cannot add Host devices. VM must be pinned to a host."}))
	two := createPinned(t, conn, "two", "gpu1", "gpu2")
	_, err = attach(conn, two, "pci_0000_3b_00_0")
	g.Expect(faultLines(t, err)).To(Equal([]string{"Cannot add Host devices. VM must be pinned to a single host."}))

	a := createPinned(t, conn, "a", "gpu1")
	_, err = attach(conn, a, "pci_0000_99_00_0")
	g.Expect(faultLines(t, err)).To(Equal([]string{"Cannot add Host devices. One or more of specified host devices not found."}))
	g.Expect(err.Error()).To(ContainSubstring(`"400"`))

	// The whole IOMMU group: the audio function comes as a placeholder.
	d, err := attach(conn, a, "pci_0000_3b_00_0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.MustName()).To(Equal("pci_0000_3b_00_0"))
	g.Expect(d.MustVm().MustId()).To(Equal(a))
	g.Expect(vmDevices(g, conn, a)).To(Equal(map[string]bool{"pci_0000_3b_00_0": false, "pci_0000_3b_00_1": true}))
	st, body := asUser(g, sim, sim.Username(), sim.Password(), "GET", "/vms/"+a+"/hostdevices", "")
	g.Expect(st).To(Equal(200))
	g.Expect(body).To(ContainSubstring("<placeholder>true</placeholder>"))
	g.Expect(body).To(ContainSubstring(`/vms/` + a + `/hostdevices/` + hex.EncodeToString([]byte("pci_0000_3b_00_1"))))

	// A second, stopped VM may configure the same GPU (E2).
	b := createPinned(t, conn, "b", "gpu1")
	_, err = attach(conn, b, "pci_0000_3b_00_0")
	g.Expect(err).NotTo(HaveOccurred())

	// vm only while a holder runs (E1).
	gpu1 := hostIDByName(t, sim, "gpu1")
	_, held := hostDevice(g, conn, gpu1, "pci_0000_3b_00_0").Vm()
	g.Expect(held).To(BeFalse())
	g.Expect(startVM(conn, a)).To(Succeed())
	g.Expect(hostDevice(g, conn, gpu1, "pci_0000_3b_00_0").MustVm().MustId()).To(Equal(a))
	g.Expect(hostDevice(g, conn, gpu1, "pci_0000_3b_00_1").MustVm().MustId()).To(Equal(a))
	g.Expect(vmHostOf(t, sim, a)).To(Equal("gpu1"))

	// Not while the VM runs.
	_, err = attach(conn, a, "pci_0000_5e_00_0")
	g.Expect(faultLines(t, err)).To(Equal([]string{"Cannot add Host devices because the VM is in Up status."}))

	// The second start is refused while the first runs (E3), in the filters' words (gpu2 out
	// of the way: the Engine words every host with the first host's variables).
	g.Expect(sim.SetHostStatus("gpu2", "maintenance")).To(Succeed())
	err = startVM(conn, b)
	g.Expect(err).To(HaveOccurred())
	lines := faultLines(t, err)
	g.Expect(lines[0]).To(Equal("Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:"))
	g.Expect(lines).To(ContainElement("The host gpu1 did not satisfy internal filter HostDevice because some of the required host devices are unavailable."))

	_, err = conn.SystemService().VmsService().VmService(a).Stop().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, held = hostDevice(g, conn, gpu1, "pci_0000_3b_00_0").Vm()
	g.Expect(held).To(BeFalse())
	g.Expect(startVM(conn, b)).To(Succeed())
	g.Expect(hostDevice(g, conn, gpu1, "pci_0000_3b_00_0").MustVm().MustId()).To(Equal(b))

	g.Expect(sim.RequestCount("POST", "/vms/{id}/hostdevices")).To(Equal(6))
	g.Expect(sim.RequestCount("GET", "/vms/{id}/hostdevices")).To(Equal(2))
}

func TestHostDeviceFilterWordsEveryReason(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, withGPUs)
	conn := connect(t, sim)
	// Pinned to gpu1 but migratable: the other host of the cluster is tried and refused.
	id := createVMIn(t, conn, "m", "GPU", false)
	_, err := conn.SystemService().VmsService().VmService(id).Update().Vm(ovirtsdk.NewVmBuilder().
		PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_USER_MIGRATABLE, "gpu1")).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = attach(conn, id, "pci_0000_3b_00_0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.SetHostStatus("gpu1", "maintenance")).To(Succeed())
	err = startVM(conn, id)
	g.Expect(faultLines(t, err)).To(ContainElement("The host gpu2 did not satisfy internal filter HostDevice because it does not support host device passthrough."))
	g.Expect(sim.SetHostStatus("gpu1", "up")).To(Succeed())
	g.Expect(startVM(conn, id)).To(Succeed())
	g.Expect(vmHostOf(t, sim, id)).To(Equal("gpu1"))
}

func TestRemovingHostDevicesAndRepinning(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, withGPUs)
	conn := connect(t, sim)
	a := createPinned(t, conn, "a", "gpu1")
	_, err := attach(conn, a, "pci_0000_3b_00_0")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = attach(conn, a, "pci_0000_3b_00_1") // the placeholder becomes a real device
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmDevices(g, conn, a)).To(Equal(map[string]bool{"pci_0000_3b_00_0": false, "pci_0000_3b_00_1": false}))

	devs := conn.SystemService().VmsService().VmService(a).HostDevicesService()
	_, err = devs.DeviceService(hex.EncodeToString([]byte("pci_0000_3b_00_1"))).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmDevices(g, conn, a)).To(Equal(map[string]bool{"pci_0000_3b_00_0": false, "pci_0000_3b_00_1": true}))
	// The last real device of the group goes, and its placeholders with it.
	_, err = devs.DeviceService(hex.EncodeToString([]byte("pci_0000_3b_00_0"))).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmDevices(g, conn, a)).To(BeEmpty())
	_, err = devs.DeviceService(hex.EncodeToString([]byte("pci_0000_3b_00_0"))).Remove().Send()
	_, notFound := errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(notFound).To(BeTrue())

	// A new pinned host drops every host device (UpdateVmCommand.updateVmHostDevices).
	_, err = attach(conn, a, "pci_0000_5e_00_0")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = conn.SystemService().VmsService().VmService(a).Update().Vm(ovirtsdk.NewVmBuilder().
		PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_PINNED, "gpu1")).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmDevices(g, conn, a)).To(HaveLen(1)) // same host: kept
	_, err = conn.SystemService().VmsService().VmService(a).Update().Vm(ovirtsdk.NewVmBuilder().
		PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_PINNED, "gpu2")).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmDevices(g, conn, a)).To(BeEmpty())
	g.Expect(sim.RequestCount("DELETE", "/vms/{id}/hostdevices/{id}")).To(Equal(3))
}

func TestMDeviceFilterAndStaleInstances(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, withGPUs)
	conn := connect(t, sim)
	vgpu := func(name, value string) string {
		t.Helper()
		b := vmBuilder(name, "rhcos-4.14", "GPU").CustomPropertiesOfAny(
			ovirtsdk.NewCustomPropertyBuilder().Name("mdev_type").Value(value).MustBuild())
		r, err := conn.SystemService().VmsService().Add().Vm(b.MustBuild()).Send()
		g.Expect(err).NotTo(HaveOccurred())
		return r.MustVm().MustId()
	}
	// 4.5: the property becomes MDEV devices, one per item.
	a := vgpu("a", "nodisplay,nvidia-22,nvidia-22")
	_, has := getVM(t, conn, a, "").CustomProperties()
	g.Expect(has).To(BeFalse())
	st, body := asUser(g, sim, sim.Username(), sim.Password(), "GET", "/vms/"+a+"/mediateddevices", "")
	g.Expect(st).To(Equal(200))
	g.Expect(body).To(ContainSubstring("<property><name>mdevType</name><value>nvidia-22</value></property>"))
	g.Expect(body).To(ContainSubstring("<property><name>nodisplay</name><value>true</value></property>"))
	vs, _ := sim.VMByName("a")
	g.Expect(vs.MDevTypes).To(Equal([]string{"nvidia-22", "nvidia-22"}))

	g.Expect(sim.SetHostStatus("gpu2", "maintenance")).To(Succeed())
	// The filter does not count instances: two asked, one offered, the start is accepted, but
	// VDSM has only one: the VM ends down.
	g.Expect(startVM(conn, a)).To(Succeed())
	g.Expect(vmStatus(t, conn, a)).To(Equal(ovirtsdk.VMSTATUS_DOWN))
	vs, _ = sim.VMByName("a")
	g.Expect(vs.ExitStatus).To(Equal("error"))

	b := vgpu("b", "nvidia-22")
	g.Expect(startVM(conn, b)).To(Succeed())
	g.Expect(vmStatus(t, conn, b)).To(Equal(ovirtsdk.VMSTATUS_UP))
	gpu1 := hostIDByName(t, sim, "gpu1")
	// An mdev-only VM does not refresh the host: the Engine still says 1 (E6).
	g.Expect(hostDevice(g, conn, gpu1, "pci_0000_5e_00_0").MustMDevTypes().Slice()[0].MustAvailableInstances()).To(BeEquivalentTo(1))
	c := vgpu("c", "nvidia-22")
	g.Expect(startVM(conn, c)).To(Succeed()) // the stale count lets it through, VDSM fails it
	g.Expect(vmStatus(t, conn, c)).To(Equal(ovirtsdk.VMSTATUS_DOWN))
	// A host event refreshes the count: now the filter refuses.
	g.Expect(sim.SetHostStatus("gpu1", "up")).To(Succeed())
	g.Expect(hostDevice(g, conn, gpu1, "pci_0000_5e_00_0").MustMDevTypes().Slice()[0].MustAvailableInstances()).To(BeEquivalentTo(0))
	err := startVM(conn, c)
	g.Expect(faultLines(t, err)).To(ContainElement("The host gpu1 did not satisfy internal filter MDevice because some of the required mDev devices are unavailable (nvidia-22)."))

	m := vgpu("m", "nvidia-63")
	err = startVM(conn, m)
	g.Expect(faultLines(t, err)).To(ContainElement("The host gpu1 did not satisfy internal filter MDevice because some of the required mDev devices are missing (nvidia-63)."))
	g.Expect(sim.RequestCount("GET", "/vms/{id}/mediateddevices")).To(Equal(1))
}

func TestMdevTypeStaysACustomPropertyOn44(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, withGPUs, func(b *ovirtsim.Builder) { b.WithVersion("4.4.10") })
	conn := connect(t, sim)
	b := vmBuilder("v", "rhcos-4.14", "GPU").CustomPropertiesOfAny(
		ovirtsdk.NewCustomPropertyBuilder().Name("mdev_type").Value("nodisplay,nvidia-63").MustBuild())
	r, err := conn.SystemService().VmsService().Add().Vm(b.MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	id := r.MustVm().MustId()
	g.Expect(sim.SetHostStatus("gpu2", "maintenance")).To(Succeed())
	props := getVM(t, conn, id, "").MustCustomProperties().Slice()
	g.Expect(props).To(HaveLen(1))
	g.Expect(props[0].MustValue()).To(Equal("nodisplay,nvidia-63"))
	st, body := asUser(g, sim, sim.Username(), sim.Password(), "GET", "/vms/"+id+"/mediateddevices", "")
	g.Expect(st).To(Equal(200))
	g.Expect(body).NotTo(ContainSubstring("vm_mediated_device>"))
	err = startVM(conn, id)
	g.Expect(faultLines(t, err)).To(ContainElement("The host gpu1 did not satisfy internal filter MDevice because some of the required mDev devices are missing (nvidia-63)."))

	bad := vmBuilder("bad", "rhcos-4.14", "GPU").CustomPropertiesOfAny(
		ovirtsdk.NewCustomPropertyBuilder().Name("mdev_type").Value(",nvidia-22").MustBuild())
	_, err = conn.SystemService().VmsService().Add().Vm(bad.MustBuild()).Send()
	g.Expect(faultLines(t, err)).To(Equal([]string{"Cannot add VM if some of the specified custom properties have illegal values. The keys are: mdev_type"}))
}

func TestHostDevicePermissions(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, withGPUs)
	conn := connect(t, sim)
	a := createPinned(t, conn, "a", "gpu1")
	g.Expect(sim.AddUser(ovirtsim.User{Username: "owner@internal", Password: "pw",
		Grants: []ovirtsim.Grant{{Role: "UserVmManager", VM: "a"}}})).To(Succeed())
	g.Expect(sim.AddUser(ovirtsim.User{Username: "ops@internal", Password: "pw",
		Grants: []ovirtsim.Grant{{Role: "ClusterAdmin", Cluster: "GPU"}}})).To(Succeed())
	body := `<host_device><name>pci_0000_3b_00_0</name></host_device>`
	st, out := asUser(g, sim, "owner@internal", "pw", "POST", "/vms/"+a+"/hostdevices", body)
	g.Expect(st).To(Equal(403), out)
	g.Expect(out).To(ContainSubstring("User is not authorized to perform this action."))
	st, out = asUser(g, sim, "owner@internal", "pw", "GET", "/hosts/"+hostIDByName(t, sim, "gpu1")+"/devices", "")
	g.Expect(st).To(Equal(400), out)
	g.Expect(out).To(ContainSubstring("Query execution failed due to insufficient permissions."))
	st, out = asUser(g, sim, "ops@internal", "pw", "POST", "/vms/"+a+"/hostdevices",
		`<host_device id="`+hex.EncodeToString([]byte("pci_0000_3b_00_0"))+`"/>`)
	g.Expect(st).To(Equal(201), out)
	st, _ = asUser(g, sim, "ops@internal", "pw", "GET", "/hosts/"+hostIDByName(t, sim, "gpu1")+"/devices", "")
	g.Expect(st).To(Equal(200))
}
