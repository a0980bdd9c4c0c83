package ovirtsim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	ovirtsdk "github.com/ovirt/go-ovirt"
)

// initNetwork is one entry of a VM's vm_init networks (VmInitNetwork): a
// nic_configuration as the engine stores it. The IPv4 netmask is kept verbatim
// (the engine does not check it); the IPv6 prefix is the integer the mapper
// parsed, as a decimal string ("" when not given).
type initNetwork struct {
	name                   string
	onBoot                 bool
	boot4, boot6           string // boot protocols, "" when not given (the engine's NONE)
	ip, netmask, gateway   string
	ip6, prefix6, gateway6 string
}

// Texts of the engine's cloud-init network validation (CloudInitHandler.validate
// through VmInitToOpenStackMetadataAdapter.validate, AppErrors.properties
// VALIDATION_CLOUD_INIT_*). The first is the engine's wording; the other three
// are close to it.
const (
	startOnBootWhy    = "Start On Boot selection in cloud-init configuration is invalid. Only 'true' is supported."
	staticIPv4MissWhy = "Static IPv4 address is missing in cloud-init configuration."
	staticIPv6MissWhy = "Static IPv6 address is missing in cloud-init configuration."
	ipv6AutoconfWhy   = "IPv6 autoconf is not supported in cloud-init configuration."
	reasonInvalid     = "Invalid value"
)

// initNetworksOf maps initialization.nic_configurations like the engine's
// InitializationMapper and VmInitNetworkMapper. set is false when the tag is
// absent (an empty <nic_configurations/> is set and empty: it clears the
// list). The mapping fails like the engine's: an IPv4 boot protocol other than
// none, dhcp or static is 400 "Invalid value" (Ipv4BootProtocolMapper), and a
// non-numeric IPv6 netmask escapes the mapper as a MappingException (500).
func initNetworksOf(in *ovirtsdk.Initialization) (nets []initNetwork, set bool, aerr *apiError) {
	sl, ok := in.NicConfigurations()
	if !ok {
		return nil, false, nil
	}
	nets = []initNetwork{}
	for _, nc := range sl.Slice() {
		n := initNetwork{}
		n.name, _ = nc.Name()
		n.onBoot, _ = nc.OnBoot()
		if bp, ok := nc.BootProtocol(); ok {
			switch bp {
			case ovirtsdk.BOOTPROTOCOL_NONE, ovirtsdk.BOOTPROTOCOL_DHCP, ovirtsdk.BOOTPROTOCOL_STATIC:
				n.boot4 = string(bp)
			case ovirtsdk.BOOTPROTOCOL_AUTOCONF, ovirtsdk.BOOTPROTOCOL_POLY_DHCP_AUTOCONF:
				return nil, true, &apiError{400, reasonInvalid,
					fmt.Sprintf("Boot protocol = '%s' is not applicable for IPv4.", strings.ToUpper(string(bp)))}
			default:
				return nil, true, &apiError{400, reasonInvalid, fmt.Sprintf("Invalid value '%s' for boot protocol.", bp)}
			}
		}
		if ip, ok := nc.Ip(); ok {
			n.ip, _ = ip.Address()
			n.netmask, _ = ip.Netmask()
			n.gateway, _ = ip.Gateway()
		}
		if bp, ok := nc.Ipv6BootProtocol(); ok {
			switch bp {
			case ovirtsdk.BOOTPROTOCOL_NONE, ovirtsdk.BOOTPROTOCOL_DHCP, ovirtsdk.BOOTPROTOCOL_STATIC,
				ovirtsdk.BOOTPROTOCOL_AUTOCONF, ovirtsdk.BOOTPROTOCOL_POLY_DHCP_AUTOCONF:
				n.boot6 = string(bp)
			default:
				return nil, true, &apiError{400, reasonInvalid, fmt.Sprintf("Invalid value '%s' for boot protocol.", bp)}
			}
		}
		if ip, ok := nc.Ipv6(); ok {
			n.ip6, _ = ip.Address()
			n.gateway6, _ = ip.Gateway()
			if mask, ok := ip.Netmask(); ok && mask != "" {
				p, err := strconv.ParseUint(strings.TrimSpace(mask), 10, 31)
				if err != nil {
					// IntegerParser.parseUnsignedInt throws inside the mapper:
					// MappingExceptionMapper answers 500.
					return nil, true, &apiError{500, reasonFailed, fmt.Sprintf("For input string: \"%s\"", mask)}
				}
				n.prefix6 = strconv.FormatUint(p, 10)
			}
		}
		nets = append(nets, n)
	}
	return nets, true, nil
}

// validateInitNetworks is CloudInitHandler.validate as AddVmCommand and
// UpdateVmCommand call it, whatever the OS type: one message per failed check
// and NIC, all in one 400.
func validateInitNetworks(nets []initNetwork, action string) *apiError {
	var msgs []string
	add := func(why string) { msgs = append(msgs, "Cannot "+action+". "+why) }
	for _, n := range nets {
		if !n.onBoot {
			add(startOnBootWhy)
		}
		if n.boot4 == string(ovirtsdk.BOOTPROTOCOL_STATIC) && n.ip == "" {
			add(staticIPv4MissWhy)
		}
		if n.boot6 == string(ovirtsdk.BOOTPROTOCOL_STATIC) && n.ip6 == "" {
			add(staticIPv6MissWhy)
		}
		if n.boot6 == string(ovirtsdk.BOOTPROTOCOL_AUTOCONF) || n.boot6 == string(ovirtsdk.BOOTPROTOCOL_POLY_DHCP_AUTOCONF) {
			add(ipv6AutoconfWhy)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return &apiError{400, reasonFailed, "[" + strings.Join(msgs, ", ") + "]"}
}

// renderNicConfigurations renders the stored networks as VmMapper does: the
// boot protocols always (none when not given), ip and ipv6 always, with only
// their set fields, and no ip version.
func renderNicConfigurations(nets []initNetwork) *ovirtsdk.NicConfigurationSlice {
	out := make([]*ovirtsdk.NicConfiguration, 0, len(nets))
	for _, n := range nets {
		nc := &ovirtsdk.NicConfiguration{}
		nc.SetName(esc(n.name))
		nc.SetOnBoot(n.onBoot)
		nc.SetBootProtocol(ovirtsdk.BootProtocol(orNone(n.boot4)))
		nc.SetIpv6BootProtocol(ovirtsdk.BootProtocol(orNone(n.boot6)))
		nc.SetIp(renderIP(n.ip, n.netmask, n.gateway))
		nc.SetIpv6(renderIP(n.ip6, n.prefix6, n.gateway6))
		out = append(out, nc)
	}
	s := &ovirtsdk.NicConfigurationSlice{}
	s.SetSlice(out)
	return s
}

func renderIP(addr, mask, gw string) *ovirtsdk.Ip {
	ip := &ovirtsdk.Ip{}
	if addr != "" {
		ip.SetAddress(esc(addr))
	}
	if mask != "" {
		ip.SetNetmask(esc(mask))
	}
	if gw != "" {
		ip.SetGateway(esc(gw))
	}
	return ip
}

func orNone(bp string) string {
	if bp == "" {
		return string(ovirtsdk.BOOTPROTOCOL_NONE)
	}
	return bp
}

// GuestNetwork is how the guest configured one interface from its first-run
// initialization: cloud-init from the nic_configurations (matched by
// interface name), Ignition guests from the NetworkManager keyfiles of the
// Ignition config (matched by MAC address or interface name). Interfaces the
// initialization does not configure use DHCP for IPv4 (the simulator's
// generated address).
type GuestNetwork struct {
	// Name is the guest interface name: eth0, eth1, ... for the VM's plugged NICs in order.
	Name string `json:"name"`
	// MAC is the MAC address of the VM NIC behind the interface.
	MAC string `json:"mac,omitempty"`
	// Configured is true when the initialization configured the interface, false when it
	// kept the guest's default (DHCP for IPv4).
	Configured bool `json:"configured"`
	// DHCP4 and DHCP6 tell whether the interface asks DHCP for an address of that family.
	DHCP4 bool `json:"dhcp4"`
	DHCP6 bool `json:"dhcp6"`
	// Addresses are the static addresses, "ip/prefix".
	Addresses []string `json:"addresses,omitempty"`
	// Gateways are the default gateways of the static addresses.
	Gateways []string `json:"gateways,omitempty"`
	// DNSServers and DNSSearch are the interface's name servers and search domains.
	DNSServers []string `json:"dns_servers,omitempty"`
	DNSSearch  []string `json:"dns_search,omitempty"`
	// Source tells where the configuration came from: "nic_configuration", a keyfile's
	// path, or "" for an interface the initialization did not configure.
	Source string `json:"source,omitempty"`
}

// staticIPs returns the addresses of the static configuration, without prefixes.
func (g *GuestNetwork) staticIPs(v6 bool) []string {
	var out []string
	for _, a := range g.Addresses {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			continue
		}
		if p.Addr().Is4() != v6 {
			out = append(out, p.Addr().String())
		}
	}
	return out
}

// nicIface is a guest NIC interface: its name and the MAC of the VM NIC.
type nicIface struct{ name, mac string }

// nicIfaces lists the guest's NIC interfaces: eth0, eth1, ... for the plugged
// NICs in order.
func nicIfaces(v *vm) []nicIface {
	var out []nicIface
	for _, n := range v.nics {
		if n.plugged {
			out = append(out, nicIface{name: fmt.Sprintf("eth%d", len(out)), mac: n.mac})
		}
	}
	return out
}

// hasNetworkInit reports whether the VM's initialization carries a network
// configuration for the engine (nic_configurations or DNS).
func (v *vm) hasNetworkInit() bool {
	return len(v.initNets) > 0 || v.dnsServers != "" || v.dnsSearch != ""
}

// cloudInitGuestNetwork is what cloud-init makes of the engine's OpenStack
// network_data.json: it configures the interfaces named by the links (no MAC
// is given); a link naming no interface configures nothing.
func cloudInitGuestNetwork(v *vm) []GuestNetwork {
	if !v.hasNetworkInit() {
		return nil
	}
	dns, search := splitSpaces(v.dnsServers), splitSpaces(v.dnsSearch)
	out := []GuestNetwork{}
	for _, ifc := range nicIfaces(v) {
		g := GuestNetwork{Name: ifc.name, MAC: ifc.mac, DHCP4: true}
		i := slices.IndexFunc(v.initNets, func(n initNetwork) bool { return n.name == ifc.name })
		if i >= 0 {
			n := v.initNets[i]
			g = GuestNetwork{Name: ifc.name, MAC: ifc.mac, Configured: true, Source: "nic_configuration",
				DHCP4: n.boot4 == "dhcp", DHCP6: n.boot6 == "dhcp"}
			if n.boot4 == "static" {
				g.Addresses = append(g.Addresses, n.ip+"/"+maskPrefix(n.netmask))
				if n.gateway != "" {
					g.Gateways = append(g.Gateways, n.gateway)
				}
			}
			if n.boot6 == "static" {
				p := n.prefix6
				if p == "" {
					p = "64"
				}
				g.Addresses = append(g.Addresses, n.ip6+"/"+p)
				if n.gateway6 != "" {
					g.Gateways = append(g.Gateways, n.gateway6)
				}
			}
			if orNone(n.boot4) != "none" || orNone(n.boot6) != "none" {
				// Every network entry of the link carries the VM-wide DNS.
				g.DNSServers, g.DNSSearch = dns, search
			}
		}
		out = append(out, g)
	}
	return out
}

// maskPrefix turns a dotted IPv4 netmask (or a prefix length) into a prefix
// length; cloud-init accepts both. Anything else is kept as given.
func maskPrefix(mask string) string {
	if _, err := strconv.Atoi(mask); err == nil {
		return mask
	}
	a, err := netip.ParseAddr(mask)
	if err != nil || !a.Is4() {
		return mask
	}
	b := a.As4()
	bits := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	n := 0
	for bits&0x80000000 != 0 {
		n++
		bits <<= 1
	}
	if bits != 0 {
		return mask // not a contiguous mask
	}
	return strconv.Itoa(n)
}

func splitSpaces(s string) []string { return strings.Fields(s) }

// openStackNetworkData composes the network_data.json the engine writes next to
// the user data when the VM has nic_configurations or DNS servers
// (VmInitToOpenStackMetadataAdapter.asMap), for cloud-init and Ignition VMs
// alike; "" when there is nothing to write.
func openStackNetworkData(v *vm) string {
	if !v.hasNetworkInit() {
		return ""
	}
	type entry = map[string]any
	links, networks, services := []entry{}, []entry{}, []entry{}
	dns, search := splitSpaces(v.dnsServers), splitSpaces(v.dnsSearch)
	withDNS := func(e entry) entry {
		if len(dns) > 0 {
			e["dns_nameservers"] = dns
		}
		if len(search) > 0 {
			e["dns_search"] = search
		}
		return e
	}
	for _, n := range v.initNets {
		before := len(networks)
		switch n.boot4 {
		case "dhcp":
			networks = append(networks, withDNS(entry{"id": n.name, "link": n.name, "type": "ipv4_dhcp"}))
		case "static":
			e := entry{"id": n.name, "link": n.name, "type": "ipv4", "ip_address": n.ip, "netmask": n.netmask}
			if n.gateway != "" {
				e["gateway"] = n.gateway
			}
			networks = append(networks, withDNS(e))
		}
		switch n.boot6 {
		case "dhcp":
			networks = append(networks, withDNS(entry{"id": n.name, "link": n.name, "type": "ipv6_dhcp"}))
		case "static":
			e := entry{"id": n.name, "link": n.name, "type": "ipv6", "ip_address": n.ip6, "netmask": n.prefix6}
			if n.gateway6 != "" {
				e["gateway"] = n.gateway6
			}
			networks = append(networks, withDNS(e))
		}
		if len(networks) > before {
			links = append(links, entry{"id": n.name, "name": n.name, "type": "vif"})
		}
	}
	for _, d := range dns {
		services = append(services, entry{"type": "dns", "address": d})
	}
	out := entry{}
	if len(links) > 0 {
		out["links"] = links
		out["networks"] = networks
	}
	if len(services) > 0 {
		out["services"] = services
	}
	if len(out) == 0 {
		return ""
	}
	b, err := json.Marshal(out)
	if err != nil {
		return ""
	}
	return string(b)
}

// keyfileDir is where NetworkManager reads its connection profiles.
const keyfileDir = "/etc/NetworkManager/system-connections/"

// keyfile is a NetworkManager connection profile written by Ignition.
type keyfile struct {
	path                string
	ifaceName, mac      string
	ipv4, ipv6          keyfileIP
	hasIPv4, hasIPv6    bool
	dnsServers, dnsSrch []string
}

type keyfileIP struct {
	method    string
	addresses []string // "ip/prefix"
	gateways  []string
}

// ignitionGuestNetwork is what NetworkManager on an Ignition guest makes of
// the keyfiles in the Ignition config's storage.files: a profile applies to
// the interface whose MAC address (any case) and/or name it names; the other
// interfaces get NetworkManager's default (DHCP). The engine's
// nic_configurations do not reach the guest (IgnitionHandler ignores them).
func ignitionGuestNetwork(v *vm, config string) []GuestNetwork {
	kfs := ignitionKeyfiles(config)
	if len(kfs) == 0 && !v.hasNetworkInit() {
		return nil
	}
	out := []GuestNetwork{}
	for _, ifc := range nicIfaces(v) {
		g := GuestNetwork{Name: ifc.name, MAC: ifc.mac, DHCP4: true}
		for _, kf := range kfs {
			if kf.mac == "" && kf.ifaceName == "" {
				continue // binds to no particular interface: not modelled
			}
			if (kf.mac != "" && !strings.EqualFold(kf.mac, ifc.mac)) || (kf.ifaceName != "" && kf.ifaceName != ifc.name) {
				continue
			}
			g = GuestNetwork{Name: ifc.name, MAC: ifc.mac, Configured: true, Source: kf.path,
				DNSServers: kf.dnsServers, DNSSearch: kf.dnsSrch}
			// NetworkManager's defaults without a section: auto for both families.
			m4, m6 := "auto", "auto"
			if kf.hasIPv4 {
				m4 = kf.ipv4.method
			}
			if kf.hasIPv6 {
				m6 = kf.ipv6.method
			}
			g.DHCP4 = m4 == "auto"
			g.DHCP6 = m6 == "auto" || m6 == "dhcp"
			if m4 == "manual" {
				g.Addresses = append(g.Addresses, kf.ipv4.addresses...)
				g.Gateways = append(g.Gateways, kf.ipv4.gateways...)
			}
			if m6 == "manual" {
				g.Addresses = append(g.Addresses, kf.ipv6.addresses...)
				g.Gateways = append(g.Gateways, kf.ipv6.gateways...)
			}
			break
		}
		out = append(out, g)
	}
	return out
}

// ignitionKeyfiles extracts the NetworkManager keyfiles of an Ignition config:
// storage.files under /etc/NetworkManager/system-connections/ whose contents
// are a data: URL and whose mode gives no access to group or others
// (NetworkManager ignores a keyfile with insecure permissions; Ignition's
// default mode 0644 is one). Others are skipped.
func ignitionKeyfiles(config string) []keyfile {
	var cfg struct {
		Storage struct {
			Files []struct {
				Path     string `json:"path"`
				Mode     *int   `json:"mode"`
				Contents struct {
					Source      string `json:"source"`
					Compression string `json:"compression"`
				} `json:"contents"`
			} `json:"files"`
		} `json:"storage"`
	}
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		return nil
	}
	var out []keyfile
	for _, f := range cfg.Storage.Files {
		if !strings.HasPrefix(f.Path, keyfileDir) || strings.Contains(strings.TrimPrefix(f.Path, keyfileDir), "/") {
			continue
		}
		if f.Mode == nil || *f.Mode&0o077 != 0 || f.Contents.Compression != "" {
			continue
		}
		data, ok := decodeDataURL(f.Contents.Source)
		if !ok {
			continue
		}
		kf := parseKeyfile(data)
		kf.path = f.Path
		out = append(out, kf)
	}
	return out
}

// decodeDataURL decodes an RFC 2397 data: URL ("data:[<media type>][;base64],<data>").
func decodeDataURL(src string) (string, bool) {
	rest, ok := strings.CutPrefix(src, "data:")
	if !ok {
		return "", false
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", false
	}
	if strings.HasSuffix(meta, ";base64") {
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	s, err := url.PathUnescape(data)
	if err != nil {
		return "", false
	}
	return s, true
}

// parseKeyfile reads the parts of a NetworkManager keyfile the simulator
// models: [connection] interface-name, [ethernet] mac-address, [ipv4] and
// [ipv6] method, addressN ("ip/prefix[,gateway]"), gateway, dns, dns-search.
func parseKeyfile(data string) keyfile {
	kf := keyfile{}
	section := ""
	for line := range strings.SplitSeq(data, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.TrimSpace(line[1 : len(line)-1])
			switch section {
			case "ipv4":
				kf.hasIPv4 = true
			case "ipv6":
				kf.hasIPv6 = true
			}
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch section {
		case "connection":
			if key == "interface-name" {
				kf.ifaceName = val
			}
		case "ethernet", "802-3-ethernet":
			if key == "mac-address" {
				kf.mac = val
			}
		case "ipv4", "ipv6":
			ip := &kf.ipv4
			if section == "ipv6" {
				ip = &kf.ipv6
			}
			switch {
			case key == "method":
				ip.method = val
			case key == "gateway":
				ip.gateways = append(ip.gateways, val)
			case key == "dns":
				kf.dnsServers = append(kf.dnsServers, splitList(val)...)
			case key == "dns-search":
				kf.dnsSrch = append(kf.dnsSrch, splitList(val)...)
			case strings.HasPrefix(key, "address"):
				for _, a := range splitList(val) {
					addr, gw, _ := strings.Cut(a, ",")
					ip.addresses = append(ip.addresses, addr)
					if gw != "" {
						ip.gateways = append(ip.gateways, gw)
					}
				}
			}
		}
	}
	return kf
}

// splitList splits a keyfile list ("a;b;").
func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// guestNetworkFor returns the first run's configuration of a guest NIC
// interface, nil when it has none (DHCP).
func (v *vm) guestNetworkFor(name, macAddr string) *GuestNetwork {
	if v.init == nil {
		return nil
	}
	for i := range v.init.Network {
		g := &v.init.Network[i]
		if !g.Configured {
			continue
		}
		if (g.MAC != "" && strings.EqualFold(g.MAC, macAddr)) || (g.MAC == "" && g.Name == name) {
			return g
		}
	}
	return nil
}

// nicIPs is what the guest reports on a NIC interface: the generated address
// (DHCP) unless the first run configured the interface, then its static
// addresses (and the generated one when it also asked DHCP for IPv4); the
// link-local IPv6 address always.
func (v *vm) nicIPs(name string, n *nic) []string {
	g := v.guestNetworkFor(name, n.mac)
	if g == nil {
		return []string{n.ipString(), linkLocal(n.mac)}
	}
	var ips []string
	ips = append(ips, g.staticIPs(false)...)
	if g.DHCP4 {
		ips = append(ips, n.ipString())
	}
	ips = append(ips, g.staticIPs(true)...)
	return append(ips, linkLocal(n.mac))
}

// nicIPv4s is the IPv4 part of nicIPs.
func (v *vm) nicIPv4s(name string, n *nic) []string {
	var out []string
	for _, ip := range v.nicIPs(name, n) {
		if a, err := netip.ParseAddr(ip); err == nil && a.Is4() {
			out = append(out, ip)
		}
	}
	return out
}
