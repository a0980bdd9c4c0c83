//go:build linux

package initd

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// An Ignition image (RHCOS, Fedora CoreOS) configures its NICs with NetworkManager: a keyfile
// in /etc/NetworkManager/system-connections (matched by interface name or MAC address) decides
// a NIC's addresses; a NIC without one gets NetworkManager's default wired connection, DHCP.
// The lab's image has ifupdown instead, so guest-init translates, on every boot of an Ignition
// guest, the keyfiles' IPv4 settings into ifupdown stanzas for networking.service.

// nmInterfacesFile is the ifupdown file guest-init writes for an Ignition guest's NICs.
const nmInterfacesFile = "/etc/network/interfaces.d/60-networkmanager-keyfiles"

// nmKeyfile is what guest-init reads of a NetworkManager keyfile.
type nmKeyfile struct {
	path, iface, mac string
	method           string   // ipv4.method: auto, manual, disabled, link-local, ...
	addresses        []string // ipv4.address1..N, "ip/prefix" (a ",gateway" suffix split off)
	gateway          string
	dns              []string
	ipv6Method       string
}

func readKeyfiles(dir string) ([]nmKeyfile, error) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.nmconnection"))
	sort.Strings(paths)
	var out []nmKeyfile
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		k := nmKeyfile{path: p, method: "auto"}
		section := ""
		var addrKeys []string
		values := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
				section = strings.Trim(line, "[]")
				continue
			}
			key, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			key = section + "." + strings.TrimSpace(key)
			values[key] = strings.TrimSpace(v)
			if strings.HasPrefix(key, "ipv4.address") {
				addrKeys = append(addrKeys, key)
			}
		}
		k.iface = values["connection.interface-name"]
		k.mac = strings.ToLower(values["ethernet.mac-address"])
		if m := values["ipv4.method"]; m != "" {
			k.method = m
		}
		k.ipv6Method = values["ipv6.method"]
		k.gateway = values["ipv4.gateway"]
		sort.Strings(addrKeys)
		for _, key := range addrKeys {
			addr, gw, _ := strings.Cut(values[key], ",")
			k.addresses = append(k.addresses, addr)
			if k.gateway == "" && gw != "" {
				k.gateway = gw
			}
		}
		for _, s := range strings.Split(values["ipv4.dns"], ";") {
			if s = strings.TrimSpace(s); s != "" {
				k.dns = append(k.dns, s)
			}
		}
		out = append(out, k)
	}
	return out, nil
}

// writeNMInterfaces writes the ifupdown stanzas of an Ignition guest's NICs.
func writeNMInterfaces(nics []NIC, l *log.Logger) error {
	kfs, err := readKeyfiles("/etc/NetworkManager/system-connections")
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# Written by guest-init on every boot of an Ignition guest: NetworkManager's\n# keyfiles (IPv4) in ifupdown's words; DHCP for a NIC without one.\n")
	var dns []string
	for _, n := range nics {
		var k *nmKeyfile
		for i := range kfs {
			if kfs[i].iface == n.Name || (kfs[i].mac != "" && kfs[i].mac == strings.ToLower(n.MAC)) {
				k = &kfs[i]
				break
			}
		}
		switch {
		case k == nil || k.method == "auto":
			fmt.Fprintf(&b, "\nauto %s\niface %s inet dhcp\n", n.Name, n.Name)
		case k.method == "manual":
			if len(k.addresses) == 0 {
				return fmt.Errorf("keyfile %s: ipv4.method=manual without an address", k.path)
			}
			fmt.Fprintf(&b, "\nauto %s\niface %s inet static\n    address %s\n", n.Name, n.Name, k.addresses[0])
			if k.gateway != "" {
				fmt.Fprintf(&b, "    gateway %s\n", k.gateway)
			}
			for _, a := range k.addresses[1:] {
				fmt.Fprintf(&b, "    up ip addr add %s dev %s\n", a, n.Name)
			}
			dns = append(dns, k.dns...)
		case k.method == "disabled":
			fmt.Fprintf(&b, "\nauto %s\niface %s inet manual\n", n.Name, n.Name)
		default:
			return fmt.Errorf("keyfile %s: ipv4.method=%s is not translated by guest-init (auto, manual, disabled)", k.path, k.method)
		}
		if k != nil && k.ipv6Method != "" && k.ipv6Method != "disabled" && k.ipv6Method != "ignore" {
			l.Printf("NetworkManager keyfile %s: ipv6.method=%s is not applied (the lab's network is IPv4)", k.path, k.ipv6Method)
		}
	}
	if err := writeFile(nmInterfacesFile, b.String(), 0o644); err != nil {
		return err
	}
	if len(dns) > 0 {
		var r strings.Builder
		for _, s := range dns {
			fmt.Fprintf(&r, "nameserver %s\n", s)
		}
		return os.WriteFile("/etc/resolv.conf", []byte(r.String()), 0o644)
	}
	return nil
}
