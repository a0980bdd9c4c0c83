package sdk

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode"

	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// maxIfaceName is the longest Linux interface name (IFNAMSIZ 16, with the NUL).
const maxIfaceName = 15

// buildNetwork adds a network configuration to an initialization: one nic_configuration per
// NIC, dns_servers and dns_search. The Engine checks almost nothing of it (no address format;
// only on_boot, a static address's presence and the boot protocols) and hands it to the guest
// verbatim at the first run, so it is checked here, before any call.
//
// What the Engine expects on the wire (its InitializationMapper and the OpenStack network
// data it builds from it): the IPv4 netmask dotted (the mapper copies it as is), the IPv6
// netmask a prefix length (it is parsed as an integer), on_boot true (anything else is a 400),
// the DNS lists joined with single spaces (it splits them on " "). The NICs list is always
// sent, empty too, so that it replaces the stored one.
func buildNetwork(op string, ib *ovirtsdk.InitializationBuilder, n *ovirt.NetworkConfig) error {
	seen := map[string]bool{}
	nics := make([]*ovirtsdk.NicConfiguration, 0, len(n.NICs))
	for i, nic := range n.NICs {
		nc, err := nicConfiguration(op, i, nic)
		if err != nil {
			return err
		}
		if seen[nic.Name] {
			return invalid(op, "network: two NIC configurations for interface %q", nic.Name)
		}
		seen[nic.Name] = true
		nics = append(nics, nc)
	}
	for _, s := range n.DNSServers {
		if a, err := netip.ParseAddr(s); err != nil || a.Zone() != "" {
			return invalid(op, "network: DNS server %q is not an IP address", s)
		}
	}
	for _, d := range n.DNSSearch {
		if d == "" || strings.IndexFunc(d, unicode.IsSpace) >= 0 || !printable(d) {
			return invalid(op, "network: DNS search domain %q is empty or contains a space or a control character", d)
		}
	}
	sl := &ovirtsdk.NicConfigurationSlice{}
	sl.SetSlice(nics)
	ib.NicConfigurations(sl).
		DnsServers(strings.Join(n.DNSServers, " ")).
		DnsSearch(xmlText(strings.Join(n.DNSSearch, " ")))
	return nil
}

// nicConfiguration validates and builds the i-th NIC configuration.
func nicConfiguration(op string, i int, nic ovirt.NICConfiguration) (*ovirtsdk.NicConfiguration, error) {
	switch {
	case nic.Name == "":
		return nil, invalid(op, "network: NIC configuration %d has no interface name", i)
	case len(nic.Name) > maxIfaceName:
		return nil, invalid(op, "network: interface name %q is longer than %d characters", nic.Name, maxIfaceName)
	case strings.ContainsAny(nic.Name, "/") || strings.IndexFunc(nic.Name, unicode.IsSpace) >= 0 || !printable(nic.Name):
		return nil, invalid(op, "network: interface name %q contains a space, '/' or a control character", nic.Name)
	}
	b := ovirtsdk.NewNicConfigurationBuilder().Name(xmlText(nic.Name)).OnBoot(true)
	boot4, err := bootProtocol(op, nic.Name, "IPv4", nic.IPv4Boot, nic.IPv4)
	if err != nil {
		return nil, err
	}
	boot6, err := bootProtocol(op, nic.Name, "IPv6", nic.IPv6Boot, nic.IPv6)
	if err != nil {
		return nil, err
	}
	b.BootProtocol(boot4).Ipv6BootProtocol(boot6)
	if nic.IPv4 != nil {
		ip, err := ipv4(op, nic.Name, nic.IPv4)
		if err != nil {
			return nil, err
		}
		b.IpBuilder(ip)
	}
	if nic.IPv6 != nil {
		ip, err := ipv6(op, nic.Name, nic.IPv6)
		if err != nil {
			return nil, err
		}
		b.Ipv6Builder(ip)
	}
	nc, err := b.Build()
	if err != nil {
		return nil, invalid(op, "building the NIC configuration: %v", err)
	}
	return nc, nil
}

// bootProtocol maps a boot protocol ("" is none) and checks that a static one has an address
// and that only a static one has one (the Engine would store it and the guest ignore it).
func bootProtocol(op, name, family string, bp ovirt.BootProtocol, ip *ovirt.IPConfig) (ovirtsdk.BootProtocol, error) {
	var out ovirtsdk.BootProtocol
	switch bp {
	case "", ovirt.BootProtocolNone:
		out = ovirtsdk.BOOTPROTOCOL_NONE
	case ovirt.BootProtocolDHCP:
		out = ovirtsdk.BOOTPROTOCOL_DHCP
	case ovirt.BootProtocolStatic:
		out = ovirtsdk.BOOTPROTOCOL_STATIC
	default:
		return "", invalid(op, "network: interface %q: unknown %s boot protocol %q (none, dhcp or static)", name, family, bp)
	}
	switch {
	case out == ovirtsdk.BOOTPROTOCOL_STATIC && (ip == nil || ip.Address == ""):
		return "", invalid(op, "network: interface %q: static %s needs an address", name, family)
	case out != ovirtsdk.BOOTPROTOCOL_STATIC && ip != nil:
		return "", invalid(op, "network: interface %q: an %s address needs the static boot protocol, not %s", name, family, out)
	}
	return out, nil
}

func ipv4(op, name string, c *ovirt.IPConfig) (*ovirtsdk.IpBuilder, error) {
	a, err := netip.ParseAddr(c.Address)
	if err != nil || !a.Is4() {
		return nil, invalid(op, "network: interface %q: %q is not an IPv4 address", name, c.Address)
	}
	if c.Prefix < 1 || c.Prefix > 32 {
		return nil, invalid(op, "network: interface %q: IPv4 prefix %d is not between 1 and 32", name, c.Prefix)
	}
	b := ovirtsdk.NewIpBuilder().Address(a.String()).
		Netmask(net.IP(net.CIDRMask(c.Prefix, 32)).String()).Version(ovirtsdk.IPVERSION_V4)
	if c.Gateway != "" {
		gw, err := netip.ParseAddr(c.Gateway)
		if err != nil || !gw.Is4() {
			return nil, invalid(op, "network: interface %q: gateway %q is not an IPv4 address", name, c.Gateway)
		}
		b.Gateway(gw.String())
	}
	return b, nil
}

func ipv6(op, name string, c *ovirt.IPConfig) (*ovirtsdk.IpBuilder, error) {
	a, err := netip.ParseAddr(c.Address)
	if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
		return nil, invalid(op, "network: interface %q: %q is not an IPv6 address", name, c.Address)
	}
	if c.Prefix < 1 || c.Prefix > 128 {
		return nil, invalid(op, "network: interface %q: IPv6 prefix %d is not between 1 and 128", name, c.Prefix)
	}
	b := ovirtsdk.NewIpBuilder().Address(a.String()).
		Netmask(strconv.Itoa(c.Prefix)).Version(ovirtsdk.IPVERSION_V6)
	if c.Gateway != "" {
		gw, err := netip.ParseAddr(c.Gateway)
		if err != nil || !gw.Is6() || gw.Is4In6() || gw.Zone() != "" {
			return nil, invalid(op, "network: interface %q: gateway %q is not an IPv6 address", name, c.Gateway)
		}
		b.Gateway(gw.String())
	}
	return b, nil
}

// printable reports whether s has no control characters.
func printable(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) < 0
}
