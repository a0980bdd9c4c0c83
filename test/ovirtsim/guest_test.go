package ovirtsim_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// deviceNamed returns the reported device with that name, or nil.
func deviceNamed(devs []*ovirtsdk.ReportedDevice, name string) *ovirtsdk.ReportedDevice {
	for _, d := range devs {
		if n, _ := d.Name(); n == name {
			return d
		}
	}
	return nil
}

// deviceKeys renders each device as "name mac ip,ip,..." (IPs sorted), so
// that lists from different endpoints compare as sets.
func deviceKeys(devs []*ovirtsdk.ReportedDevice) []string {
	out := make([]string, 0, len(devs))
	for _, d := range devs {
		var ips []string
		if sl, ok := d.Ips(); ok {
			for _, ip := range sl.Slice() {
				ips = append(ips, ip.MustAddress()+"/"+string(ip.MustVersion()))
			}
		}
		slices.Sort(ips)
		out = append(out, fmt.Sprintf("%s %s %s", d.MustName(), d.MustMac().MustAddress(), strings.Join(ips, ",")))
	}
	slices.Sort(out)
	return out
}

func deviceIPs(d *ovirtsdk.ReportedDevice) []string {
	var out []string
	for _, ip := range d.MustIps().Slice() {
		out = append(out, ip.MustAddress())
	}
	return out
}

// startedVM creates a VM from template in Default, gives it a second NIC
// when twoNICs, starts it and returns its service.
func startedVM(t *testing.T, sim *ovirtsim.Simulator, conn *ovirtsdk.Connection, name, template string, twoNICs bool) (string, *ovirtsdk.VmService) {
	t.Helper()
	g := NewWithT(t)
	r, err := conn.SystemService().VmsService().Add().Vm(vmBuilder(name, template, "Default").MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	id := r.MustVm().MustId()
	vms := conn.SystemService().VmsService().VmService(id)
	if twoNICs {
		_, err = vms.NicsService().Add().Nic(ovirtsdk.NewNicBuilder().Name("nic2").
			VnicProfileBuilder(ovirtsdk.NewVnicProfileBuilder().Id(profileID(t, sim, "ovirtmgmt", "Default"))).MustBuild()).Send()
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err = vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	return id, vms
}

func TestReportedDevicesAreVMWide(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id, vms := startedVM(t, sim, conn, "node-1", "rhcos-4.14", true)
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_UP))

	vmWide := func() []*ovirtsdk.ReportedDevice {
		r, err := vms.ReportedDevicesService().List().Send()
		g.Expect(err).NotTo(HaveOccurred())
		return r.MustReportedDevice().Slice()
	}
	all := vmWide()
	g.Expect(names(all)).To(ConsistOf("lo", "eth0", "eth1", "cni0", "flannel.1", "docker0", "kube-ipvs0"))
	want := deviceKeys(all)

	// Every NIC's reporteddevices is the same VM-wide list, and so is follow.
	nics, err := vms.NicsService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nics.MustNics().Slice()).To(HaveLen(2))
	for _, n := range nics.MustNics().Slice() {
		r, err := vms.NicsService().NicService(n.MustId()).ReportedDevicesService().List().Send()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(deviceKeys(r.MustReportedDevice().Slice())).To(Equal(want), "NIC %s", n.MustName())
	}
	v := getVM(t, conn, id, "nics.reported_devices,reported_devices")
	g.Expect(deviceKeys(v.MustReportedDevices().Slice())).To(Equal(want))
	for _, n := range v.MustNics().Slice() {
		g.Expect(deviceKeys(n.MustReportedDevices().Slice())).To(Equal(want), "follow, NIC %s", n.MustName())
	}

	// The model: lo, ethN with the NIC's MAC, the Kubernetes interfaces.
	lo := deviceNamed(all, "lo")
	g.Expect(lo.MustMac().MustAddress()).To(Equal("00:00:00:00:00:00"))
	g.Expect(deviceIPs(lo)).To(ConsistOf("127.0.0.1", "::1"))
	nicMACs := map[string]string{}
	for _, n := range nics.MustNics().Slice() {
		nicMACs[n.MustName()] = n.MustMac().MustAddress()
	}
	eth0, eth1 := deviceNamed(all, "eth0"), deviceNamed(all, "eth1")
	g.Expect(eth0.MustMac().MustAddress()).To(Equal(nicMACs["nic1"]))
	g.Expect(eth1.MustMac().MustAddress()).To(Equal(nicMACs["nic2"]))
	g.Expect(deviceIPs(eth0)).To(ConsistOf("10.1.1.2", HavePrefix("fe80::")))
	g.Expect(deviceIPs(eth1)).To(ConsistOf("10.1.1.3", HavePrefix("fe80::")))
	g.Expect(deviceIPs(deviceNamed(all, "cni0"))).To(ContainElement(MatchRegexp(`^10\.244\.\d+\.1$`)))
	g.Expect(deviceIPs(deviceNamed(all, "flannel.1"))).To(ContainElement(MatchRegexp(`^10\.244\.\d+\.0$`)))
	g.Expect(deviceIPs(deviceNamed(all, "docker0"))).To(ContainElement("172.17.0.1"))
	ipvs := deviceIPs(deviceNamed(all, "kube-ipvs0"))
	g.Expect(ipvs).To(HaveLen(100))
	g.Expect(ipvs).To(ContainElements("10.96.0.1", "10.96.0.10"))
	total := 0
	for _, d := range all {
		total += len(deviceIPs(d))
		if n := d.MustName(); n != "eth0" && n != "eth1" {
			g.Expect(nicMACs).NotTo(ContainElement(d.MustMac().MustAddress()), "%s has its own MAC", n)
		}
	}
	g.Expect(total).To(BeNumerically(">", 64), "a naive merge exceeds a Machine's 64 addresses")

	// No stable order: the order changes between requests.
	orders := map[string]bool{}
	for range 12 {
		orders[strings.Join(names(vmWide()), " ")] = true
	}
	g.Expect(len(orders)).To(BeNumerically(">", 1), "orders seen: %v", orders)

	// Configuration at run time: no Kubernetes, one extra interface.
	g.Expect(sim.SetGuestInterfaces(ovirtsim.GuestInterfaces{Extra: []ovirtsim.GuestInterface{
		{Name: "cali0", MAC: "ee:ee:ee:ee:ee:ee", IPs: []string{"192.168.7.7", "fd00::7"}}}})).To(Succeed())
	all = vmWide()
	g.Expect(names(all)).To(ConsistOf("lo", "eth0", "eth1", "cali0"))
	g.Expect(deviceIPs(deviceNamed(all, "cali0"))).To(Equal([]string{"192.168.7.7", "fd00::7"}))
	g.Expect(deviceNamed(all, "cali0").MustIps().Slice()[1].MustVersion()).To(Equal(ovirtsdk.IPVERSION_V6))
	g.Expect(sim.SetGuestInterfaces(ovirtsim.GuestInterfaces{Kubernetes: true, ServiceIPs: 3})).To(Succeed())
	g.Expect(deviceIPs(deviceNamed(vmWide(), "kube-ipvs0"))).To(HaveLen(3))
	err = sim.SetGuestInterfaces(ovirtsim.GuestInterfaces{Extra: []ovirtsim.GuestInterface{{Name: "x", IPs: []string{"nope"}}}})
	g.Expect(errors.Is(err, ovirtsim.ErrInvalid)).To(BeTrue(), "got %v", err)
	st, b := admin(t, sim, "PUT", "/sim/guest-interfaces", `{"service_ips": 2}`)
	g.Expect(st).To(Equal(200), b)
	g.Expect(deviceIPs(deviceNamed(vmWide(), "kube-ipvs0"))).To(Equal([]string{"10.96.0.1", "10.96.0.10"}),
		"kubernetes defaults to true when the key is absent")
	st, _ = admin(t, sim, "PUT", "/sim/guest-interfaces", `{"extra": [{"name": "x", "ips": ["nope"]}]}`)
	g.Expect(st).To(Equal(400))
	sim.Reset()
	g.Expect(sim.Dump().Settings.GuestInterfaces).To(Equal(ovirtsim.DefaultGuestInterfaces()), "Reset returns to the built interfaces")
}

func TestReportedDeviceOrderIsDeterministicForASeed(t *testing.T) {
	g := NewWithT(t)
	run := func(seed int64) []string {
		sim := startSim(t, func(b *ovirtsim.Builder) { b.WithRandomSeed(seed) })
		conn := connect(t, sim)
		_, vms := startedVM(t, sim, conn, "det", "rhcos-4.14", false)
		var out []string
		for range 3 {
			r, err := vms.ReportedDevicesService().List().Send()
			g.Expect(err).NotTo(HaveOccurred())
			out = append(out, strings.Join(names(r.MustReportedDevice().Slice()), " "))
		}
		return out
	}
	g.Expect(run(7)).To(Equal(run(7)))
}

func TestNoGuestAgentReportsNothingAndPowersUpSlowly(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const slow = 1500 * time.Millisecond
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{NoAgentPoweringUp: slow}) })
	conn := connect(t, sim)
	reported := func(vms *ovirtsdk.VmService) func() int {
		return func() int {
			r, err := vms.ReportedDevicesService().List().Send()
			g.Expect(err).NotTo(HaveOccurred())
			n := len(r.MustReportedDevice().Slice())
			nics, err := vms.NicsService().List().Send()
			g.Expect(err).NotTo(HaveOccurred())
			for _, nic := range nics.MustNics().Slice() {
				r, err := vms.NicsService().NicService(nic.MustId()).ReportedDevicesService().List().Send()
				g.Expect(err).NotTo(HaveOccurred())
				n += len(r.MustReportedDevice().Slice())
			}
			return n
		}
	}

	// ubuntu-22.04 of the demo seed has no guest agent.
	start := time.Now()
	id, vms := startedVM(t, sim, conn, "no-agent", "ubuntu-22.04", false)
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_POWERING_UP))
	g.Eventually(func() ovirtsdk.VmStatus { return vmStatus(t, conn, id) }).
		WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal(ovirtsdk.VMSTATUS_UP))
	g.Expect(time.Since(start)).To(BeNumerically(">=", slow), "powering_up lasts NoAgentPoweringUp")
	g.Expect(reported(vms)()).To(BeZero(), "no agent, nothing reported")
	st, _ := sim.VM(id)
	g.Expect(st.NoGuestAgent).To(BeTrue())
	g.Expect(st.IPs).To(BeEmpty())

	// A VM whose agent is removed reports nothing; installed again, everything.
	id2, vms2 := startedVM(t, sim, conn, "agent", "rhcos-4.14", false)
	g.Expect(vmStatus(t, conn, id2)).To(Equal(ovirtsdk.VMSTATUS_UP), "with an agent: PoweringUp (0)")
	g.Expect(reported(vms2)()).To(Equal(2 * 6))
	g.Expect(sim.SetVMGuestAgent(id2, false)).To(Succeed())
	g.Expect(reported(vms2)()).To(BeZero())
	code, body := admin(t, sim, "PUT", "/sim/vms/"+id2+"/guest-agent", `{"enabled": true}`)
	g.Expect(code).To(Equal(200), body)
	g.Expect(reported(vms2)()).To(Equal(2 * 6))
	code, _ = admin(t, sim, "PUT", "/sim/vms/nope/guest-agent", `{"enabled": true}`)
	g.Expect(code).To(Equal(404))
	g.Expect(errors.Is(sim.SetVMGuestAgent("nope", true), ovirtsim.ErrNotFound)).To(BeTrue())

	// The agent of the template's VMs can be installed later too.
	g.Expect(sim.SetVMGuestAgent(id, true)).To(Succeed())
	g.Expect(reported(vms)()).To(Equal(2 * 6))
}

func TestNoAgentPoweringUpDefaultsToSixtySeconds(t *testing.T) {
	g := NewWithT(t)
	sim, err := ovirtsim.NewBuilder().Build()
	g.Expect(err).NotTo(HaveOccurred())
	defer sim.Close()
	g.Expect(sim.Dump().Settings.Timings.NoAgentPoweringUp).To(Equal(60*time.Second), "VDSM's timeout is the faithful default")
	g.Expect(ovirtsim.DemoSeed().Timings.NoAgentPoweringUp).To(Equal(20*time.Second), "the demo is kept fast")
	g.Expect(ovirtsim.DemoSeed().Templates[1]).To(And(HaveField("Name", "ubuntu-22.04"), HaveField("NoGuestAgent", true)))

	// The global switch: every VM without an agent.
	demo := startSim(t, func(b *ovirtsim.Builder) {
		b.WithoutGuestAgent().WithTimings(ovirtsim.Timings{NoAgentPoweringUp: time.Hour})
	})
	conn := connect(t, demo)
	id, _ := startedVM(t, demo, conn, "slow", "rhcos-4.14", false)
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_POWERING_UP))
}
