package ovirtsim_test

import (
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// nicConf builds a nic_configuration as a client would send it (on_boot true).
func nicConf(name string, boot ovirtsdk.BootProtocol, ip, mask, gw string) *ovirtsdk.NicConfigurationBuilder {
	b := ovirtsdk.NewNicConfigurationBuilder().Name(name).OnBoot(true).BootProtocol(boot)
	if ip != "" {
		b.IpBuilder(ovirtsdk.NewIpBuilder().Address(ip).Netmask(mask).Gateway(gw).Version(ovirtsdk.IPVERSION_V4))
	}
	return b
}

// createWithNetwork creates a VM from template with the given initialization.
func createWithNetwork(t *testing.T, conn *ovirtsdk.Connection, name, template string, in *ovirtsdk.InitializationBuilder) (string, error) {
	t.Helper()
	r, err := conn.SystemService().VmsService().Add().Vm(vmBuilder(name, template, "Default").InitializationBuilder(in).MustBuild()).Send()
	if err != nil {
		return "", err
	}
	return r.MustVm().MustId(), nil
}

// nicsOf returns the nic_configurations the engine answers for a VM, rendered for comparison.
type nicView struct {
	Name, Boot, Boot6, IP, Mask, GW, IP6, Mask6, GW6 string
	OnBoot                                           bool
}

func nicViews(g *WithT, conn *ovirtsdk.Connection, id string) ([]nicView, string, string) {
	r, err := conn.SystemService().VmsService().VmService(id).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	in, ok := r.MustVm().Initialization()
	if !ok {
		return nil, "", ""
	}
	var out []nicView
	if ncs, ok := in.NicConfigurations(); ok {
		for _, nc := range ncs.Slice() {
			v := nicView{}
			v.Name, _ = nc.Name()
			v.OnBoot, _ = nc.OnBoot()
			bp, _ := nc.BootProtocol()
			bp6, _ := nc.Ipv6BootProtocol()
			v.Boot, v.Boot6 = string(bp), string(bp6)
			ip := nc.MustIp() // the engine always answers ip and ipv6
			v.IP, _ = ip.Address()
			v.Mask, _ = ip.Netmask()
			v.GW, _ = ip.Gateway()
			ip6 := nc.MustIpv6()
			v.IP6, _ = ip6.Address()
			v.Mask6, _ = ip6.Netmask()
			v.GW6, _ = ip6.Gateway()
			out = append(out, v)
		}
	}
	dns, _ := in.DnsServers()
	search, _ := in.DnsSearch()
	return out, dns, search
}

func TestNicConfigurationsRoundTripOnPostAndPut(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	in := ovirtsdk.NewInitializationBuilder().HostName("n1").
		NicConfigurationsBuilderOfAny(
			*nicConf("eth0", ovirtsdk.BOOTPROTOCOL_STATIC, "10.0.0.5", "255.255.255.0", "10.0.0.1").
				Ipv6BootProtocol(ovirtsdk.BOOTPROTOCOL_STATIC).
				Ipv6Builder(ovirtsdk.NewIpBuilder().Address("fd00::5").Netmask("64").Gateway("fd00::1").Version(ovirtsdk.IPVERSION_V6)),
			*nicConf("eth1", ovirtsdk.BOOTPROTOCOL_DHCP, "", "", "")).
		DnsServers("10.0.0.53 10.0.0.54").DnsSearch("example.com corp.example.com")
	id, err := createWithNetwork(t, conn, "netty", "ubuntu-22.04", in)
	g.Expect(err).NotTo(HaveOccurred())

	nics, dns, search := nicViews(g, conn, id)
	g.Expect(nics).To(Equal([]nicView{
		{Name: "eth0", OnBoot: true, Boot: "static", Boot6: "static", IP: "10.0.0.5", Mask: "255.255.255.0", GW: "10.0.0.1",
			IP6: "fd00::5", Mask6: "64", GW6: "fd00::1"},
		{Name: "eth1", OnBoot: true, Boot: "dhcp", Boot6: "none"},
	}), "boot protocols default to none, ip and ipv6 always present")
	g.Expect(dns).To(Equal("10.0.0.53 10.0.0.54"))
	g.Expect(search).To(Equal("example.com corp.example.com"))

	// PUT replaces the list and keeps the rest of the initialization.
	vms := conn.SystemService().VmsService().VmService(id)
	_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().InitializationBuilder(ovirtsdk.NewInitializationBuilder().
		NicConfigurationsBuilderOfAny(*nicConf("eth0", ovirtsdk.BOOTPROTOCOL_STATIC, "10.0.1.7", "255.255.0.0", ""))).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	nics, dns, _ = nicViews(g, conn, id)
	g.Expect(nics).To(Equal([]nicView{{Name: "eth0", OnBoot: true, Boot: "static", Boot6: "none", IP: "10.0.1.7", Mask: "255.255.0.0"}}))
	g.Expect(dns).To(Equal("10.0.0.53 10.0.0.54"), "dns_servers not sent: kept")
	g.Expect(getVM(t, conn, id, "").MustInitialization().MustHostName()).To(Equal("n1"))

	// Empty nic_configurations and dns_servers clear them.
	_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().InitializationBuilder(ovirtsdk.NewInitializationBuilder().
		NicConfigurations(&ovirtsdk.NicConfigurationSlice{}).DnsServers("").DnsSearch("")).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	nics, dns, search = nicViews(g, conn, id)
	g.Expect(nics).To(BeEmpty())
	g.Expect(dns + search).To(BeEmpty())

	// A VM with only a network configuration has an initialization.
	id2, err := createWithNetwork(t, conn, "dnsonly", "ubuntu-22.04", ovirtsdk.NewInitializationBuilder().DnsServers("1.1.1.1"))
	g.Expect(err).NotTo(HaveOccurred())
	_, dns, _ = nicViews(g, conn, id2)
	g.Expect(dns).To(Equal("1.1.1.1"))
}

func TestNicConfigurationsAreValidatedLikeTheEngine(t *testing.T) {
	sim := startSim(t)
	conn := connect(t, sim)
	cases := []struct {
		name   string
		nic    *ovirtsdk.NicConfigurationBuilder
		status string
		detail string
	}{
		{"on_boot false", nicConf("eth0", ovirtsdk.BOOTPROTOCOL_DHCP, "", "", "").OnBoot(false), "400",
			"[Cannot add VM. Start On Boot selection in cloud-init configuration is invalid. Only 'true' is supported.]"},
		{"on_boot missing", ovirtsdk.NewNicConfigurationBuilder().Name("eth0").BootProtocol(ovirtsdk.BOOTPROTOCOL_DHCP), "400",
			"Start On Boot selection"},
		{"static IPv4 without address", nicConf("eth0", ovirtsdk.BOOTPROTOCOL_STATIC, "", "", ""), "400",
			"[Cannot add VM. Static IPv4 address is missing"},
		{"static IPv6 without address", nicConf("eth0", ovirtsdk.BOOTPROTOCOL_DHCP, "", "", "").Ipv6BootProtocol(ovirtsdk.BOOTPROTOCOL_STATIC), "400",
			"Static IPv6 address is missing"},
		{"IPv6 autoconf", nicConf("eth0", ovirtsdk.BOOTPROTOCOL_DHCP, "", "", "").Ipv6BootProtocol(ovirtsdk.BOOTPROTOCOL_AUTOCONF), "400",
			"IPv6 autoconf is not supported"},
		{"IPv4 autoconf", nicConf("eth0", ovirtsdk.BOOTPROTOCOL_AUTOCONF, "", "", ""), "400",
			`Fault reason is "Invalid value". Fault detail is "Boot protocol = 'AUTOCONF' is not applicable for IPv4."`},
		{"a non-numeric IPv6 netmask", nicConf("eth0", ovirtsdk.BOOTPROTOCOL_DHCP, "", "", "").Ipv6BootProtocol(ovirtsdk.BOOTPROTOCOL_STATIC).
			Ipv6Builder(ovirtsdk.NewIpBuilder().Address("fd00::5").Netmask("ffff:ffff:ffff:ffff::")), "500", `Fault reason is "Operation Failed"`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			before := len(sim.Dump().VMs)
			_, err := createWithNetwork(t, conn, "bad"+string(rune('a'+i)), "ubuntu-22.04",
				ovirtsdk.NewInitializationBuilder().NicConfigurationsBuilderOfAny(*tc.nic))
			g.Expect(err).To(MatchError(ContainSubstring(tc.detail)))
			g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "` + tc.status + `"`)))
			g.Expect(sim.Dump().VMs).To(HaveLen(before), "nothing created")

			// The same on PUT, whatever the OS type; the stored configuration stays.
			id := createVM(t, conn, "put"+string(rune('a'+i)), false)
			vms := conn.SystemService().VmsService().VmService(id)
			_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().InitializationBuilder(ovirtsdk.NewInitializationBuilder().
				NicConfigurationsBuilderOfAny(*nicConf("eth0", ovirtsdk.BOOTPROTOCOL_DHCP, "", "", ""))).MustBuild()).Send()
			g.Expect(err).NotTo(HaveOccurred())
			_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().InitializationBuilder(ovirtsdk.NewInitializationBuilder().
				NicConfigurationsBuilderOfAny(*tc.nic)).MustBuild()).Send()
			g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "` + tc.status + `"`)))
			if tc.status == "400" && tc.name != "IPv4 autoconf" {
				g.Expect(err).To(MatchError(ContainSubstring("[Cannot edit VM. ")))
			}
			nics, _, _ := nicViews(g, conn, id)
			g.Expect(nics).To(HaveLen(1))
			g.Expect(nics[0].Boot).To(Equal("dhcp"))
		})
	}
	t.Run("address formats are not checked", func(t *testing.T) {
		g := NewWithT(t)
		id, err := createWithNetwork(t, conn, "garbage", "ubuntu-22.04", ovirtsdk.NewInitializationBuilder().
			NicConfigurationsBuilderOfAny(*nicConf("eth0", ovirtsdk.BOOTPROTOCOL_STATIC, "not-an-ip", "24", "x")))
		g.Expect(err).NotTo(HaveOccurred())
		nics, _, _ := nicViews(g, conn, id)
		g.Expect(nics[0].IP).To(Equal("not-an-ip"))
		g.Expect(nics[0].Mask).To(Equal("24"))
	})
}

// guestIPs returns the addresses the guest agent reports on a guest interface.
func guestIPs(g *WithT, vms *ovirtsdk.VmService, iface string) []string {
	r, err := vms.ReportedDevicesService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	d := deviceNamed(r.MustReportedDevice().Slice(), iface)
	g.Expect(d).NotTo(BeNil(), "interface %s", iface)
	return deviceIPs(d)
}

// addNIC adds a NIC on the ovirtmgmt profile and returns its MAC.
func addNIC(t *testing.T, sim *ovirtsim.Simulator, vms *ovirtsdk.VmService, name string) string {
	t.Helper()
	r, err := vms.NicsService().Add().Nic(ovirtsdk.NewNicBuilder().Name(name).
		VnicProfileBuilder(ovirtsdk.NewVnicProfileBuilder().Id(profileID(t, sim, "ovirtmgmt", "Default"))).MustBuild()).Send()
	if err != nil {
		t.Fatalf("adding NIC %s: %v", name, err)
	}
	return r.MustNic().MustMac().MustAddress()
}

func TestCloudInitGuestGetsTheStaticAddressOnTheNamedInterface(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	in := ovirtsdk.NewInitializationBuilder().HostName("w0").
		NicConfigurationsBuilderOfAny(
			*nicConf("eth1", ovirtsdk.BOOTPROTOCOL_STATIC, "192.168.10.20", "255.255.255.0", "192.168.10.1").
				Ipv6BootProtocol(ovirtsdk.BOOTPROTOCOL_STATIC).
				Ipv6Builder(ovirtsdk.NewIpBuilder().Address("fd00:10::20").Netmask("64")),
			*nicConf("ens3", ovirtsdk.BOOTPROTOCOL_STATIC, "192.168.99.9", "255.255.255.0", "")).
		DnsServers("192.168.10.53").DnsSearch("lab.example")
	id, err := createWithNetwork(t, conn, "w0", "ubuntu-22.04", in)
	g.Expect(err).NotTo(HaveOccurred())
	vms := conn.SystemService().VmsService().VmService(id)
	mac2 := addNIC(t, sim, vms, "nic2")
	g.Expect(sim.SetVMGuestAgent(id, true)).To(Succeed())
	_, err = vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())

	st, _ := sim.VM(id)
	dhcp0 := st.NICs[0].IP
	mac0 := st.NICs[0].MAC
	// eth1 is the second NIC: static; eth0 matches no configuration ("ens3" names no interface): DHCP.
	g.Expect(guestIPs(g, vms, "eth1")).To(ConsistOf("192.168.10.20", "fd00:10::20", Not(BeEmpty())))
	g.Expect(guestIPs(g, vms, "eth1")).NotTo(ContainElement(st.NICs[1].IP), "the generated address is not used")
	g.Expect(guestIPs(g, vms, "eth0")).To(ContainElement(dhcp0))
	g.Expect(guestIPs(g, vms, "eth0")).NotTo(ContainElement("192.168.99.9"))
	st, _ = sim.VM(id)
	g.Expect(st.IPs).To(Equal([]string{dhcp0, "192.168.10.20"}))

	init, err := sim.Initialization(id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(init.Format).To(Equal(ovirtsim.InitFormatCloudInit))
	g.Expect(init.Network).To(Equal([]ovirtsim.GuestNetwork{
		{Name: "eth0", MAC: mac0, DHCP4: true},
		{Name: "eth1", MAC: mac2, Configured: true, Source: "nic_configuration",
			Addresses: []string{"192.168.10.20/24", "fd00:10::20/64"}, Gateways: []string{"192.168.10.1"},
			DNSServers: []string{"192.168.10.53"}, DNSSearch: []string{"lab.example"}},
	}))
	var nd struct {
		Links    []map[string]any `json:"links"`
		Networks []map[string]any `json:"networks"`
		Services []map[string]any `json:"services"`
	}
	g.Expect(json.Unmarshal([]byte(init.NetworkData), &nd)).To(Succeed())
	g.Expect(nd.Links).To(HaveLen(2), "one link per configured name, matched or not")
	g.Expect(nd.Networks[0]).To(HaveKeyWithValue("netmask", "255.255.255.0"))
	g.Expect(nd.Networks[0]).To(HaveKeyWithValue("type", "ipv4"))
	g.Expect(nd.Services).To(ConsistOf(map[string]any{"type": "dns", "address": "192.168.10.53"}))

	// Also on /sim.
	code, body := admin(t, sim, "GET", "/sim/vms/"+id+"/initialization", "")
	g.Expect(code).To(Equal(200))
	var viaAdmin ovirtsim.VMInitialization
	g.Expect(json.Unmarshal([]byte(body), &viaAdmin)).To(Succeed())
	g.Expect(viaAdmin.Network).To(Equal(init.Network))
}

func TestNetworkConfigurationAppliesAtTheFirstRunOnly(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id, err := createWithNetwork(t, conn, "once", "ubuntu-22.04", ovirtsdk.NewInitializationBuilder().
		NicConfigurationsBuilderOfAny(*nicConf("eth0", ovirtsdk.BOOTPROTOCOL_STATIC, "10.1.0.5", "255.255.255.0", "")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.SetVMGuestAgent(id, true)).To(Succeed())
	vms := conn.SystemService().VmsService().VmService(id)
	_, err = vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	first, err := sim.Initialization(id)
	g.Expect(err).NotTo(HaveOccurred())

	// A PUT after the first run changes what GET answers, not what the guest got.
	_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().InitializationBuilder(ovirtsdk.NewInitializationBuilder().
		NicConfigurationsBuilderOfAny(*nicConf("eth0", ovirtsdk.BOOTPROTOCOL_STATIC, "10.1.0.99", "255.255.255.0", ""))).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	nics, _, _ := nicViews(g, conn, id)
	g.Expect(nics[0].IP).To(Equal("10.1.0.99"))
	_, err = vms.Stop().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	again, err := sim.Initialization(id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(first))
	g.Expect(guestIPs(g, vms, "eth0")).To(ContainElement("10.1.0.5"))
	g.Expect(guestIPs(g, vms, "eth0")).NotTo(ContainElement("10.1.0.99"))
}

// keyfileFile is an Ignition storage.files entry with a NetworkManager keyfile.
func keyfileFile(name, contents string, mode int, b64 bool) map[string]any {
	src := "data:," + url.PathEscape(contents)
	if b64 {
		src = "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte(contents))
	}
	return map[string]any{"path": "/etc/NetworkManager/system-connections/" + name + ".nmconnection",
		"mode": mode, "contents": map[string]any{"source": src}}
}

func ignitionWith(files ...map[string]any) string {
	b, _ := json.Marshal(map[string]any{"ignition": map[string]any{"version": "3.2.0"}, "storage": map[string]any{"files": files}})
	return string(b)
}

func TestIgnitionGuestReadsItsKeyfilesAndIgnoresNicConfigurations(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)

	// Created first, then the keyfile is written for the MAC the NIC got.
	id, err := createWithNetwork(t, conn, "rhcos-static", "rhcos-4.14", ovirtsdk.NewInitializationBuilder().HostName("rhcos-static"))
	g.Expect(err).NotTo(HaveOccurred())
	vms := conn.SystemService().VmsService().VmService(id)
	mac2 := addNIC(t, sim, vms, "nic2")
	st, _ := sim.VM(id)
	mac0 := st.NICs[0].MAC
	kf := "[connection]\nid=static0\ntype=ethernet\n[ethernet]\nmac-address=" + strings.ToUpper(mac2) + "\n" +
		"[ipv4]\nmethod=manual\naddress1=172.16.5.10/24,172.16.5.1\ndns=172.16.5.53;172.16.5.54;\ndns-search=lab.example;\n" +
		"[ipv6]\nmethod=disabled\n"
	insecure := "[connection]\nid=bad\ninterface-name=eth0\n[ipv4]\nmethod=manual\naddress1=172.16.9.9/24\n"
	script := ignitionWith(keyfileFile("static0", kf, 0o600, false), keyfileFile("bad", insecure, 0o644, true))
	_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().InitializationBuilder(ovirtsdk.NewInitializationBuilder().
		CustomScript(xmlEsc(script))).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(guestIPs(g, vms, "eth1")).To(ConsistOf("172.16.5.10", Not(BeEmpty())), "the static address and the link-local one")
	g.Expect(guestIPs(g, vms, "eth0")).To(ContainElement(st.NICs[0].IP), "a keyfile of mode 0644 is ignored: DHCP")
	init, err := sim.Initialization(id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(init.Network).To(Equal([]ovirtsim.GuestNetwork{
		{Name: "eth0", MAC: mac0, DHCP4: true},
		{Name: "eth1", MAC: mac2, Configured: true, Source: "/etc/NetworkManager/system-connections/static0.nmconnection",
			Addresses: []string{"172.16.5.10/24"}, Gateways: []string{"172.16.5.1"},
			DNSServers: []string{"172.16.5.53", "172.16.5.54"}, DNSSearch: []string{"lab.example"}},
	}))

	// nic_configurations on an Ignition VM: validated and stored, written to network_data.json,
	// never applied by the guest.
	id2, err := createWithNetwork(t, conn, "rhcos-nicconf", "rhcos-4.14", ovirtsdk.NewInitializationBuilder().
		CustomScript(`{"ignition":{"version":"3.2.0"}}`).
		NicConfigurationsBuilderOfAny(*nicConf("eth0", ovirtsdk.BOOTPROTOCOL_STATIC, "10.9.9.9", "255.255.255.0", "")))
	g.Expect(err).NotTo(HaveOccurred())
	vms2 := conn.SystemService().VmsService().VmService(id2)
	_, err = vms2.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	st2, _ := sim.VM(id2)
	g.Expect(guestIPs(g, vms2, "eth0")).To(ContainElement(st2.NICs[0].IP))
	g.Expect(guestIPs(g, vms2, "eth0")).NotTo(ContainElement("10.9.9.9"))
	init2, err := sim.Initialization(id2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(init2.Format).To(Equal(ovirtsim.InitFormatIgnition))
	g.Expect(init2.NetworkData).To(ContainSubstring(`"ip_address":"10.9.9.9"`))
	g.Expect(init2.Network).To(Equal([]ovirtsim.GuestNetwork{{Name: "eth0", MAC: st2.NICs[0].MAC, DHCP4: true}}))

	// By interface name, IPv4 disabled: no IPv4 address at all.
	v6only := "[connection]\nid=v6\ninterface-name=eth0\n[ipv4]\nmethod=disabled\n[ipv6]\nmethod=manual\naddress1=fd00:7::7/64\ngateway=fd00:7::1\n"
	id3, err := createWithNetwork(t, conn, "rhcos-v6", "rhcos-4.14", ovirtsdk.NewInitializationBuilder().
		CustomScript(xmlEsc(ignitionWith(keyfileFile("v6", v6only, 0o600, true)))))
	g.Expect(err).NotTo(HaveOccurred())
	vms3 := conn.SystemService().VmsService().VmService(id3)
	_, err = vms3.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(guestIPs(g, vms3, "eth0")).To(ConsistOf("fd00:7::7", HavePrefix("fe80::")))
	st3, _ := sim.VM(id3)
	g.Expect(st3.IPs).To(BeEmpty())

	_, err = createWithNetwork(t, conn, "rhcos-onboot", "rhcos-4.14", ovirtsdk.NewInitializationBuilder().
		NicConfigurationsBuilderOfAny(*nicConf("eth0", ovirtsdk.BOOTPROTOCOL_DHCP, "", "", "").OnBoot(false)))
	g.Expect(err).To(MatchError(ContainSubstring("Start On Boot")), "validated whatever the OS type")
}

// xmlEsc XML-escapes text for the SDK's writer, which writes element text verbatim.
func xmlEsc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
