package ovirtsim

import (
	"crypto/sha1" //nolint:gosec // ids and MACs derived from names, not security
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"

	ovirtsdk "github.com/ovirt/go-ovirt"
)

// defaultServiceIPs is how many Service IPs kube-ipvs0 carries by default:
// enough that a naive merge of every reported address exceeds the 64
// addresses a Machine's status can hold.
const defaultServiceIPs = 100

// GuestInterfaces configures what the qemu guest agent of a running VM
// reports besides lo and one ethN per NIC (VDSM's qemuguestagent.py reports
// every interface of the guest, in no stable order).
type GuestInterfaces struct {
	// Kubernetes adds the interfaces of a Kubernetes node: cni0 (10.244.x.1),
	// flannel.1 (10.244.x.0), docker0 (172.17.0.1) and kube-ipvs0 with
	// ServiceIPs Service addresses. It is true in DefaultGuestInterfaces()
	// (a seed without guest_interfaces) and in JSON without the key; the Go
	// zero value is false, so set it when building a GuestInterfaces in Go.
	Kubernetes bool `json:"kubernetes"`
	// ServiceIPs is the number of addresses on kube-ipvs0 (10.96.0.1,
	// 10.96.0.10, ...). 0 means 100; negative means none.
	ServiceIPs int `json:"service_ips,omitempty"`
	// Extra are further interfaces every running VM with an agent reports.
	Extra []GuestInterface `json:"extra,omitempty"`
}

// GuestInterface is one extra guest interface.
type GuestInterface struct {
	// Name is the interface name, e.g. "cali1234".
	Name string `json:"name"`
	// MAC is its MAC address; empty derives one from the VM and the name.
	MAC string `json:"mac,omitempty"`
	// IPs are its addresses, IPv4 or IPv6.
	IPs []string `json:"ips,omitempty"`
}

// UnmarshalJSON defaults kubernetes to true when the key is absent.
func (g *GuestInterfaces) UnmarshalJSON(b []byte) error {
	type plain GuestInterfaces
	p := plain{Kubernetes: true}
	if err := strictUnmarshal(b, &p); err != nil {
		return fmt.Errorf("guest_interfaces: %w", err)
	}
	*g = GuestInterfaces(p)
	return nil
}

// MarshalJSON writes the fields with lower_snake keys (kubernetes always).
func (g GuestInterfaces) MarshalJSON() ([]byte, error) {
	type plain GuestInterfaces
	b, err := json.Marshal(plain(g))
	if err != nil {
		return nil, fmt.Errorf("guest_interfaces: %w", err)
	}
	return b, nil
}

// DefaultGuestInterfaces is what a seed without guest_interfaces gets: a
// Kubernetes node with 100 Service IPs.
func DefaultGuestInterfaces() GuestInterfaces {
	return GuestInterfaces{Kubernetes: true, ServiceIPs: defaultServiceIPs}
}

func normaliseGuestInterfaces(g *GuestInterfaces) (GuestInterfaces, error) {
	if g == nil {
		return DefaultGuestInterfaces(), nil
	}
	out := *g
	if out.ServiceIPs == 0 {
		out.ServiceIPs = defaultServiceIPs
	}
	out.Extra = nil
	for _, e := range g.Extra {
		if e.Name == "" {
			return out, invalidf("guest interface without a name")
		}
		if e.MAC != "" && !validMAC(e.MAC) {
			return out, invalidf("guest interface %q: invalid MAC %q", e.Name, e.MAC)
		}
		for _, ip := range e.IPs {
			if net.ParseIP(ip) == nil {
				return out, invalidf("guest interface %q: invalid IP %q", e.Name, ip)
			}
		}
		e.IPs = append([]string(nil), e.IPs...)
		out.Extra = append(out.Extra, e)
	}
	return out, nil
}

// derived returns 20 bytes derived from a VM id and an interface name.
func derived(vmID, name string) [20]byte {
	return sha1.Sum([]byte(vmID + "/" + name)) //nolint:gosec // not security
}

// derivedMAC is a locally administered unicast MAC that is never one of the
// simulator's NIC MACs (56:6f:...).
func derivedMAC(vmID, name string) string {
	h := derived(vmID, name)
	b0 := h[0]&0xfc | 0x02
	if b0 == 0x56 {
		b0 = 0x5a
	}
	return net.HardwareAddr{b0, h[1], h[2], h[3], h[4], h[5]}.String()
}

// derivedID is a stable UUID-shaped id of a non-NIC reported device.
func derivedID(vmID, name string) string {
	h := derived(vmID, name)
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	s := hex.EncodeToString(h[:16])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}

// guestIface is one interface as the guest agent reports it.
type guestIface struct {
	id, name, mac string
	ips           []string
}

// guestIfaces lists every interface the guest of v reports (before shuffling).
func guestIfaces(v *vm, cfg *GuestInterfaces) []guestIface {
	out := []guestIface{{id: derivedID(v.id, "lo"), name: "lo", mac: "00:00:00:00:00:00", ips: []string{"127.0.0.1", "::1"}}}
	idx := 0
	for _, n := range v.nics {
		if !n.plugged {
			continue
		}
		name := fmt.Sprintf("eth%d", idx)
		out = append(out, guestIface{id: n.rdID, name: name, mac: n.mac, ips: v.nicIPs(name, n)})
		idx++
	}
	if cfg.Kubernetes {
		x := byte(v.seq % 250)
		k8s := func(name, ip string) guestIface {
			m := derivedMAC(v.id, name)
			return guestIface{id: derivedID(v.id, name), name: name, mac: m, ips: []string{ip, linkLocal(m)}}
		}
		out = append(out,
			k8s("cni0", fmt.Sprintf("10.244.%d.1", x)),
			k8s("flannel.1", fmt.Sprintf("10.244.%d.0", x)),
			k8s("docker0", "172.17.0.1"))
		if cfg.ServiceIPs > 0 {
			ipvs := guestIface{id: derivedID(v.id, "kube-ipvs0"), name: "kube-ipvs0", mac: derivedMAC(v.id, "kube-ipvs0")}
			ipvs.ips = serviceIPs(cfg.ServiceIPs)
			out = append(out, ipvs)
		}
	}
	for _, e := range cfg.Extra {
		m := e.MAC
		if m == "" {
			m = derivedMAC(v.id, e.Name)
		}
		out = append(out, guestIface{id: derivedID(v.id, e.Name), name: e.Name, mac: m, ips: e.IPs})
	}
	return out
}

// serviceIPs returns n distinct Service addresses: 10.96.0.1 (kubernetes),
// 10.96.0.10 (kube-dns), then 10.96.0.11, 10.96.0.12, ...
func serviceIPs(n int) []string {
	out := make([]string, 0, n)
	for c := 0; len(out) < n; c++ {
		var lo int
		switch c {
		case 0:
			lo = 1
		case 1:
			lo = 10
		default:
			lo = 9 + c
		}
		out = append(out, fmt.Sprintf("10.96.%d.%d", lo/256, lo%256))
	}
	return out
}

func renderGuestIface(v *vm, g *guestIface) *ovirtsdk.ReportedDevice {
	o := &ovirtsdk.ReportedDevice{}
	o.SetId(g.id)
	o.SetName(esc(g.name))
	o.SetType(ovirtsdk.REPORTEDDEVICETYPE_NETWORK)
	o.SetMac(mac(g.mac))
	ips := make([]*ovirtsdk.Ip, 0, len(g.ips))
	for _, a := range g.ips {
		ip := &ovirtsdk.Ip{}
		ip.SetAddress(a)
		if p := net.ParseIP(a); p != nil && p.To4() != nil {
			ip.SetVersion(ovirtsdk.IPVERSION_V4)
		} else {
			ip.SetVersion(ovirtsdk.IPVERSION_V6)
		}
		ips = append(ips, ip)
	}
	sl := &ovirtsdk.IpSlice{}
	sl.SetSlice(ips)
	o.SetIps(sl)
	o.SetVm(vmRef(v.id))
	return o
}

// shuffleRand is a random source from the simulator's random seed and a
// request number.
func shuffleRand(seed, n uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, splitmix(n^0x9e3779b97f4a7c15)))
}
