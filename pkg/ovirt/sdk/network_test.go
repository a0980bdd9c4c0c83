package sdk

import (
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

// engineVM reads a VM straight from the simulator's REST API with the SDK: what the Engine
// stored, independent of the client under test.
func engineVM(t *testing.T, sim *ovirtsim.Simulator, id string) *ovirtsdk.Vm {
	t.Helper()
	conn, err := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).Username(testUser).Password(testPassword).
		CertPool(x509.NewCertPool()).CACert(sim.CAPEM()).Timeout(30 * time.Second).Build()
	if err != nil {
		t.Fatal(err)
	}
	r, err := conn.SystemService().VmsService().VmService(id).Get().Send()
	if err != nil {
		t.Fatalf("getting VM %s: %v", id, err)
	}
	return r.MustVm()
}

// storedNIC is one nic_configuration as the Engine answers it.
type storedNIC struct {
	Name, Boot, IP, Mask, GW, Boot6, IP6, Mask6, GW6 string
	OnBoot                                           bool
}

func storedNetwork(t *testing.T, sim *ovirtsim.Simulator, id string) (nics []storedNIC, dns, search string) {
	t.Helper()
	in, ok := engineVM(t, sim, id).Initialization()
	if !ok {
		return nil, "", ""
	}
	if ncs, ok := in.NicConfigurations(); ok {
		for _, nc := range ncs.Slice() {
			var s storedNIC
			s.Name, _ = nc.Name()
			s.OnBoot, _ = nc.OnBoot()
			bp, _ := nc.BootProtocol()
			bp6, _ := nc.Ipv6BootProtocol()
			s.Boot, s.Boot6 = string(bp), string(bp6)
			if ip, ok := nc.Ip(); ok {
				s.IP, _ = ip.Address()
				s.Mask, _ = ip.Netmask()
				s.GW, _ = ip.Gateway()
			}
			if ip, ok := nc.Ipv6(); ok {
				s.IP6, _ = ip.Address()
				s.Mask6, _ = ip.Netmask()
				s.GW6, _ = ip.Gateway()
			}
			nics = append(nics, s)
		}
	}
	dns, _ = in.DnsServers()
	search, _ = in.DnsSearch()
	return nics, dns, search
}

// createDownVM creates a VM from template and waits until it is down.
func createDownVM(t *testing.T, ctx context.Context, c ovirt.Client, sim *ovirtsim.Simulator, name, template, script string) string {
	t.Helper()
	g := NewWithT(t)
	cluster, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, template, "")
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: name, ClusterID: cluster.ID, TemplateID: tpl.ID, HostName: name, CustomScript: script})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string { st, _ := sim.VM(vm.ID); return st.Status }, 10*time.Second, 50*time.Millisecond).Should(Equal("down"))
	return vm.ID
}

func withCloudInitTemplate(b *ovirtsim.Builder) {
	b.WithTemplate(ovirtsim.Template{Name: "ubuntu", Cluster: "Default", Version: 1, OSType: "other_linux",
		Sockets: 1, Cores: 2, Threads: 1, MemoryMB: 2048,
		Disks: []ovirtsim.TemplateDisk{{Alias: "ubuntu_Disk1", SizeGB: 10, Format: "cow", StorageDomain: "data", Bootable: true}}})
}

// TestUpdateVMSendsTheNetworkConfiguration: the Engine stores one nic_configuration per NIC with
// on_boot true, the IPv4 netmask dotted and the IPv6 one a prefix length, the DNS lists joined
// with spaces, and keeps the rest of the initialization; a cloud-init guest then comes up with the
// static address on the named interface. A DNS-only update clears the NIC list.
func TestUpdateVMSendsTheNetworkConfiguration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t, withCloudInitTemplate)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	const script = "#cloud-config\nruncmd: [true]\n"
	id := createDownVM(t, ctx, c, sim, "w1", "ubuntu", script)

	net := &ovirt.NetworkConfig{
		NICs: []ovirt.NICConfiguration{
			{Name: "eth0", IPv4Boot: ovirt.BootProtocolStatic, IPv4: &ovirt.IPConfig{Address: "10.0.0.5", Prefix: 24, Gateway: "10.0.0.1"},
				IPv6Boot: ovirt.BootProtocolStatic, IPv6: &ovirt.IPConfig{Address: "fd00::5", Prefix: 64, Gateway: "fd00::1"}},
			{Name: "eth1", IPv4Boot: ovirt.BootProtocolDHCP},
			{Name: "eth2"},
		},
		DNSServers: []string{"10.0.0.53", "10.0.0.54"},
		DNSSearch:  []string{"a.example", "b.example"},
	}
	sim.ResetCounters()
	g.Expect(c.UpdateVM(ctx, id, ovirt.VMUpdate{Network: net})).To(Succeed())
	g.Expect(sim.RequestCount("PUT", "/vms/{id}")).To(Equal(1))
	nics, dns, search := storedNetwork(t, sim, id)
	g.Expect(nics).To(Equal([]storedNIC{
		{Name: "eth0", OnBoot: true, Boot: "static", IP: "10.0.0.5", Mask: "255.255.255.0", GW: "10.0.0.1",
			Boot6: "static", IP6: "fd00::5", Mask6: "64", GW6: "fd00::1"},
		{Name: "eth1", OnBoot: true, Boot: "dhcp", Boot6: "none"},
		{Name: "eth2", OnBoot: true, Boot: "none", Boot6: "none"},
	}))
	g.Expect(dns).To(Equal("10.0.0.53 10.0.0.54"))
	g.Expect(search).To(Equal("a.example b.example"))
	st, _ := sim.VM(id)
	g.Expect(st.HostName).To(Equal("w1"), "the rest of the initialization stays")
	g.Expect(st.CustomScript).To(Equal(script))

	g.Expect(c.Power(ctx, id, ovirt.PowerStart)).To(Succeed())
	init, err := sim.Initialization(id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(init.Network).NotTo(BeEmpty())
	g.Expect(init.Network[0].Name).To(Equal("eth0"))
	g.Expect(init.Network[0].Addresses).To(Equal([]string{"10.0.0.5/24", "fd00::5/64"}))
	g.Expect(init.Network[0].Gateways).To(Equal([]string{"10.0.0.1", "fd00::1"}))
	g.Expect(init.Network[0].DNSServers).To(Equal([]string{"10.0.0.53", "10.0.0.54"}))
	g.Eventually(func() []string { st, _ := sim.VM(id); return st.IPs }, 10*time.Second, 50*time.Millisecond).
		Should(Equal([]string{"10.0.0.5"}), "the guest agent reports the static address")

	// DNS only: the NIC list is replaced by an empty one.
	g.Expect(c.UpdateVM(ctx, id, ovirt.VMUpdate{Network: &ovirt.NetworkConfig{DNSServers: []string{"1.1.1.1"}}})).To(Succeed())
	nics, dns, search = storedNetwork(t, sim, id)
	g.Expect(nics).To(BeEmpty())
	g.Expect(dns).To(Equal("1.1.1.1"))
	g.Expect(search).To(BeEmpty())
}

// TestUpdateVMReplacesTheCustomScript: the script reaches the Engine byte for byte (XML
// specials escaped on the wire), the host name stays, and the script never reaches the log.
func TestUpdateVMReplacesTheCustomScript(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	id := createDownVM(t, ctx, c, sim, "r1", "rhcos-4.14", `{"ignition":{"version":"3.2.0"}}`)

	const secret = "S3CRET-keyfile-payload"
	ign := `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/NetworkManager/system-connections/eth0.nmconnection",` +
		`"mode":384,"contents":{"source":"data:,%5Bconnection%5D%0Aid%3D` + secret + `%0A"}}]},"x":"a && b <c>"}`
	g.Expect(c.UpdateVM(ctx, id, ovirt.VMUpdate{CustomScript: &ign})).To(Succeed())
	st, _ := sim.VM(id)
	g.Expect(st.CustomScript).To(Equal(ign))
	g.Expect(st.HostName).To(Equal("r1"))
	g.Expect(e.logs.String()).NotTo(ContainSubstring(secret))

	err = c.UpdateVM(ctx, id, ovirt.VMUpdate{CustomScript: &ign, ClearCustomScript: true})
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	g.Expect(err.Error()).NotTo(ContainSubstring(secret))
	g.Expect(e.logs.String()).NotTo(ContainSubstring(secret))
}

// TestUpdateVMRefusesABadNetworkBeforeAnyCall: what the Engine would store without a check and
// hand to the guest is refused with ErrInvalid, and nothing is sent.
func TestUpdateVMRefusesABadNetworkBeforeAnyCall(t *testing.T) {
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	static4 := func(addr string, prefix int, gw string) ovirt.NICConfiguration {
		return ovirt.NICConfiguration{Name: "eth0", IPv4Boot: ovirt.BootProtocolStatic, IPv4: &ovirt.IPConfig{Address: addr, Prefix: prefix, Gateway: gw}}
	}
	static6 := func(addr string, prefix int, gw string) ovirt.NICConfiguration {
		return ovirt.NICConfiguration{Name: "eth0", IPv6Boot: ovirt.BootProtocolStatic, IPv6: &ovirt.IPConfig{Address: addr, Prefix: prefix, Gateway: gw}}
	}
	cases := []struct {
		name string
		nics []ovirt.NICConfiguration
		dns  []string
		srch []string
		want string
	}{
		{"an empty interface name", []ovirt.NICConfiguration{{IPv4Boot: ovirt.BootProtocolDHCP}}, nil, nil, "no interface name"},
		{"an interface name with a space", []ovirt.NICConfiguration{{Name: "eth 0"}}, nil, nil, "contains a space"},
		{"an interface name over 15 characters", []ovirt.NICConfiguration{{Name: "enp1s0f0np0abcde"}}, nil, nil, "longer than 15"},
		{"two configurations for one interface", []ovirt.NICConfiguration{{Name: "eth0"}, {Name: "eth0"}}, nil, nil, "two NIC configurations"},
		{"an unknown boot protocol", []ovirt.NICConfiguration{{Name: "eth0", IPv4Boot: "autoconf"}}, nil, nil, "unknown IPv4 boot protocol"},
		{"static without an address", []ovirt.NICConfiguration{{Name: "eth0", IPv4Boot: ovirt.BootProtocolStatic}}, nil, nil, "needs an address"},
		{"an address with dhcp", []ovirt.NICConfiguration{{Name: "eth0", IPv4Boot: ovirt.BootProtocolDHCP, IPv4: &ovirt.IPConfig{Address: "10.0.0.5", Prefix: 24}}}, nil, nil, "needs the static boot protocol"},
		{"an IPv4 prefix of 0", []ovirt.NICConfiguration{static4("10.0.0.5", 0, "")}, nil, nil, "IPv4 prefix 0"},
		{"an IPv4 prefix of 33", []ovirt.NICConfiguration{static4("10.0.0.5", 33, "")}, nil, nil, "IPv4 prefix 33"},
		{"an IPv6 address as IPv4", []ovirt.NICConfiguration{static4("fd00::5", 24, "")}, nil, nil, "not an IPv4 address"},
		{"an address with a prefix", []ovirt.NICConfiguration{static4("10.0.0.5/24", 24, "")}, nil, nil, "not an IPv4 address"},
		{"an IPv6 gateway for IPv4", []ovirt.NICConfiguration{static4("10.0.0.5", 24, "fd00::1")}, nil, nil, "gateway"},
		{"an IPv6 prefix of 129", []ovirt.NICConfiguration{static6("fd00::5", 129, "")}, nil, nil, "IPv6 prefix 129"},
		{"an IPv4 address as IPv6", []ovirt.NICConfiguration{static6("10.0.0.5", 64, "")}, nil, nil, "not an IPv6 address"},
		{"a DNS server that is a name", nil, []string{"dns.example"}, nil, "DNS server"},
		{"a search domain with a space", nil, nil, []string{"a b"}, "search domain"},
		{"an empty search domain", nil, nil, []string{""}, "search domain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sim.ResetCounters()
			err := c.UpdateVM(ctx, "00000000-0000-0000-0000-000000000001",
				ovirt.VMUpdate{Network: &ovirt.NetworkConfig{NICs: tc.nics, DNSServers: tc.dns, DNSSearch: tc.srch}})
			g.Expect(err).To(MatchError(ovirt.ErrInvalid))
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(sim.TotalRequests()).To(BeZero(), "refused before any call")
		})
	}
	t.Run("the exclusive script fields", func(t *testing.T) {
		g := NewWithT(t)
		s := ""
		err := c.UpdateVM(ctx, "00000000-0000-0000-0000-000000000001", ovirt.VMUpdate{CustomScript: &s, ClearCustomScript: true})
		g.Expect(err).To(MatchError(ovirt.ErrInvalid))
		g.Expect(strings.Contains(err.Error(), "exclusive")).To(BeTrue())
	})
}
