package controllers

import (
	"context"
	"encoding/json"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

func addr(s string, prefix int, gw string) allocatedAddress {
	return allocatedAddress{addr: netip.MustParseAddr(s), prefix: prefix, gateway: gw}
}

var pool = infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "nodes"}

func TestIPClaimNamesAreValidAndDistinct(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ipClaimName("worker-1", 0, 1)).To(Equal("worker-1-0-1"))
	long := strings.Repeat("a", 253)
	n1, n2 := ipClaimName(long, 0, 0), ipClaimName(long[:252]+"b", 0, 0)
	g.Expect(len(n1)).To(BeNumerically("<=", 253))
	g.Expect(n1).NotTo(Equal(n2), "two long machine names get two claims")
	g.Expect(n1).To(HaveSuffix("-0-0"))
	g.Expect(len(machineLabelValue(long))).To(BeNumerically("<=", 63))
}

func TestResolveNetworkTakesTheNICGatewayAndDHCPDefaults(t *testing.T) {
	g := NewWithT(t)
	om := &infrav1.OVirtMachine{}
	om.Spec.NICs = []infrav1.NIC{
		{VnicProfile: "ovirtmgmt", AddressesFromPools: []infrav1.IPPoolReference{pool}, Gateway: "10.0.0.254"},
		{VnicProfile: "storage", DHCP6: ptr.To(true)},
		{VnicProfile: "backup", DeviceName: "ens5", DHCP4: ptr.To(false), AddressesFromPools: []infrav1.IPPoolReference{pool}},
	}
	nets := resolveNetwork(om, [][]allocatedAddress{
		{addr("10.0.0.5", 24, "10.0.0.1"), addr("fd00::5", 64, "fd00::1")},
		nil,
		{addr("192.168.7.9", 16, "")},
	}, []string{"56:6f:00:00:00:01", "56:6f:00:00:00:02", "56:6f:00:00:00:03"})
	g.Expect(nets).To(HaveLen(3))
	g.Expect(nets[0].name).To(Equal("eth0"))
	g.Expect(nets[0].gw4).To(Equal("10.0.0.254"), "the NIC's gateway replaces the pool's of its family")
	g.Expect(nets[0].gw6).To(Equal("fd00::1"), "the pool's IPv6 gateway stays")
	g.Expect(nets[0].dhcp4).To(BeFalse(), "a NIC with an IPv4 address has no DHCPv4")
	g.Expect(nets[1].name).To(Equal("eth1"))
	g.Expect(nets[1].dhcp4).To(BeTrue(), "no IPv4 address and dhcp4 unset: DHCP")
	g.Expect(nets[1].dhcp6).To(BeTrue())
	g.Expect(nets[2].name).To(Equal("ens5"))
	g.Expect(nets[2].mac).To(Equal("56:6f:00:00:00:03"))
}

func TestCloudInitNetworkHasOneConfigurationPerNIC(t *testing.T) {
	g := NewWithT(t)
	om := &infrav1.OVirtMachine{}
	om.Spec.NICs = []infrav1.NIC{
		{VnicProfile: "ovirtmgmt", AddressesFromPools: []infrav1.IPPoolReference{pool}, Nameservers: []string{"10.0.0.53", "10.0.0.54"}, SearchDomains: []string{"example.org"}},
		{VnicProfile: "storage", Nameservers: []string{"10.0.0.53"}},
	}
	nets := resolveNetwork(om, [][]allocatedAddress{{addr("10.0.0.5", 24, "10.0.0.1")}}, nil)
	cfg, err := cloudInitNetwork(om, nets)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.DNSServers).To(Equal([]string{"10.0.0.53", "10.0.0.54"}), "the NICs' nameservers once each")
	g.Expect(cfg.DNSSearch).To(Equal([]string{"example.org"}))
	g.Expect(cfg.NICs).To(Equal([]ovirt.NICConfiguration{
		{Name: "eth0", IPv4Boot: ovirt.BootProtocolStatic, IPv4: &ovirt.IPConfig{Address: "10.0.0.5", Prefix: 24, Gateway: "10.0.0.1"}, IPv6Boot: ovirt.BootProtocolNone},
		{Name: "eth1", IPv4Boot: ovirt.BootProtocolDHCP, IPv6Boot: ovirt.BootProtocolNone},
	}))

	// oVirt's nic_configuration holds one address per family: two IPv4 pools on a cloud-init
	// template are refused with the fix.
	two := resolveNetwork(om, [][]allocatedAddress{{addr("10.0.0.5", 24, ""), addr("10.0.1.5", 24, "")}}, nil)
	_, err = cloudInitNetwork(om, two)
	g.Expect(err).To(MatchError(ContainSubstring("spec.nics[0] got 2 IPv4 and 0 IPv6 addresses")))
}

func TestIgnitionKeyfilesMatchTheNICByMACAndKeepTheConfig(t *testing.T) {
	g := NewWithT(t)
	om := &infrav1.OVirtMachine{}
	om.Spec.NICs = []infrav1.NIC{{VnicProfile: "ovirtmgmt", AddressesFromPools: []infrav1.IPPoolReference{pool, pool}, Nameservers: []string{"10.0.0.53"}, SearchDomains: []string{"example.org"}}}
	nets := resolveNetwork(om, [][]allocatedAddress{{addr("10.0.0.5", 24, "10.0.0.1"), addr("10.0.1.5", 24, "")}}, []string{"56:6f:00:00:00:0a"})
	in := `{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core"}]},"storage":{"files":[{"path":"/etc/motd"}]}}`
	out, err := ignitionWithKeyfiles(om, in, nets)
	g.Expect(err).NotTo(HaveOccurred())
	var cfg struct {
		Ignition struct{ Version string } `json:"ignition"`
		Passwd   map[string]any           `json:"passwd"`
		Storage  struct {
			Files []struct {
				Path      string `json:"path"`
				Mode      int    `json:"mode"`
				Overwrite bool   `json:"overwrite"`
				Contents  struct {
					Source string `json:"source"`
				} `json:"contents"`
			} `json:"files"`
		} `json:"storage"`
	}
	g.Expect(json.Unmarshal([]byte(out), &cfg)).To(Succeed())
	g.Expect(cfg.Ignition.Version).To(Equal("3.2.0"))
	g.Expect(cfg.Passwd).To(HaveKey("users"), "the bootstrap config is kept")
	g.Expect(cfg.Storage.Files).To(HaveLen(2))
	g.Expect(cfg.Storage.Files[0].Path).To(Equal("/etc/motd"))
	f := cfg.Storage.Files[1]
	g.Expect(f.Path).To(Equal("/etc/NetworkManager/system-connections/capov-eth0.nmconnection"))
	g.Expect(f.Mode).To(Equal(0o600), "NetworkManager ignores keyfiles readable by others")
	g.Expect(f.Overwrite).To(BeTrue())
	data, err := url.PathUnescape(strings.TrimPrefix(f.Contents.Source, "data:,"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(data).To(ContainSubstring("mac-address=56:6F:00:00:00:0A\n"))
	g.Expect(data).To(ContainSubstring("[ipv4]\nmethod=manual\naddress1=10.0.0.5/24\naddress2=10.0.1.5/24\ngateway=10.0.0.1\ndns=10.0.0.53;\ndns-search=example.org;\n"))
	g.Expect(data).To(ContainSubstring("[ipv6]\nmethod=disabled\n"))

	// Applying it twice (a retried update) leaves one keyfile, not two.
	again, err := ignitionWithKeyfiles(om, out, nets)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Count(again, "capov-eth0.nmconnection")).To(Equal(1))

	// Ignition 2.x files name their filesystem.
	v2, err := ignitionWithKeyfiles(om, `{"ignition":{"version":"2.3.0"}}`, nets)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v2).To(ContainSubstring(`"filesystem":"root"`))

	_, err = ignitionWithKeyfiles(om, "#cloud-config", nets)
	g.Expect(err).To(MatchError(ContainSubstring("not a JSON Ignition config")))
}

func TestAllocatedAddressesComeFirst(t *testing.T) {
	g := NewWithT(t)
	got := withAllocated([][]allocatedAddress{{addr("10.0.0.5", 24, "")}, {addr("fd00::5", 64, "")}},
		[]clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: "10.0.0.5"}, {Type: clusterv1.MachineInternalIP, Address: "192.168.1.9"}})
	g.Expect(got).To(Equal([]clusterv1.MachineAddress{
		{Type: clusterv1.MachineInternalIP, Address: "10.0.0.5"},
		{Type: clusterv1.MachineInternalIP, Address: "fd00::5"},
		{Type: clusterv1.MachineInternalIP, Address: "192.168.1.9"},
	}))
}

// newPoolMachineFixture is newMachineFixture with the machine's NIC taking its address from pool.
func newPoolMachineFixture(t *testing.T) *machineFixture {
	t.Helper()
	f := newMachineFixture(t)
	stored := f.get(t)
	stored.Spec.NICs = []infrav1.NIC{{VnicProfile: "ovirtmgmt", AddressesFromPools: []infrav1.IPPoolReference{pool}}}
	NewWithT(t).Expect(f.c.Update(context.Background(), stored)).To(Succeed())
	return f
}

// claimsUnseen is the reconciler's cached client before its IPAddressClaim informer has caught
// up: every claim, whatever the API server holds, is not found and not listed.
func claimsUnseen(c client.WithWatch) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*ipamv1.IPAddressClaim); ok {
				return apierrors.NewNotFound(ipamv1.GroupVersion.WithResource("ipaddressclaims").GroupResource(), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*ipamv1.IPAddressClaimList); ok {
				return nil
			}
			return c.List(ctx, list, opts...)
		},
	})
}

// TestAClaimCreatedAsTheDeletionStartsIsReleasedBeforeTheFinalizerDrops: the reconcile that
// creates a machine's IPAddressClaim read the machine just before its deletion started, and
// the next one, the deletion, runs before the manager's cache has seen the claim. Before, the
// deletion listed the claims from the cache, found none, dropped the finalizer and left the
// claim (and its address) behind for good where no garbage collector runs, and until one runs
// elsewhere; now the claims are looked up in the API server and the finalizer stays until every
// one of them is deleted.
func TestAClaimCreatedAsTheDeletionStartsIsReleasedBeforeTheFinalizerDrops(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newPoolMachineFixture(t)

	api := f.c.(client.WithWatch)
	created := 0
	f.r.Client = interceptor.NewClient(claimsUnseen(api).(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := c.Create(ctx, obj, opts...); err != nil {
				return err
			}
			if _, ok := obj.(*ipamv1.IPAddressClaim); ok {
				created++
				// The Machine controller deletes the OVirtMachine meanwhile.
				g.Expect(api.Delete(ctx, &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-1"}})).To(Succeed())
			}
			return nil
		},
	})
	_, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(Equal(1))
	claim := &ipamv1.IPAddressClaim{}
	g.Expect(api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: ipClaimName("w-1", 0, 0)}, claim)).To(Succeed())
	g.Expect(f.get(t).DeletionTimestamp.IsZero()).To(BeFalse(), "the machine is being deleted")

	for range 5 {
		res, err := f.reconcile(t)
		g.Expect(err).NotTo(HaveOccurred())
		om := &infrav1.OVirtMachine{}
		if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w-1"}, om); apierrors.IsNotFound(err) {
			break
		}
		f.now = f.now.Add(max(res.RequeueAfter, time.Second))
	}
	g.Expect(api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w-1"}, &infrav1.OVirtMachine{})).
		To(MatchError(apierrors.IsNotFound, "IsNotFound"), "the machine is gone")
	err = api.Get(ctx, client.ObjectKeyFromObject(claim), claim)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the claim is deleted before the OVirtMachine's finalizer drops (err %v)", err)
	g.Expect(created).To(Equal(1), "the deletion claims nothing")
}

// TestNoClaimForAMachineTheCacheHasNotSeenLeave is the chaos suite's fault-free baseline leak
// (I4: an IPAddressClaim outlived its OVirtMachine): a MachineSet scaled up and at once down,
// and the reconcile that claimed the new machine's address worked from a cached copy older
// than the object's removal. The claim, owned by a machine that was gone, kept its address for
// good where no garbage collector runs. Now a claim is created only while the API server's
// copy holds the finalizer and is not being deleted.
func TestNoClaimForAMachineTheCacheHasNotSeenLeave(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		leave func(g Gomega, api client.Client)
	}{
		{"gone from the API server", func(g Gomega, api client.Client) {
			om := &infrav1.OVirtMachine{}
			g.Expect(api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w-1"}, om)).To(Succeed())
			om.Finalizers = nil
			g.Expect(api.Update(ctx, om)).To(Succeed())
			g.Expect(api.Delete(ctx, om)).To(Succeed())
		}},
		{"being deleted", func(g Gomega, api client.Client) {
			g.Expect(api.Delete(ctx, &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-1"}})).To(Succeed())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newPoolMachineFixture(t)
			stale := f.get(t)

			api := f.c.(client.WithWatch)
			tc.leave(g, api)
			// The reconciler's cache still serves the copy from before.
			f.r.Client = interceptor.NewClient(api, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if om, ok := obj.(*infrav1.OVirtMachine); ok && key.Name == "w-1" {
						stale.DeepCopyInto(om)
						return nil
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
			_, _ = f.reconcile(t)
			claims := &ipamv1.IPAddressClaimList{}
			g.Expect(api.List(ctx, claims, client.InNamespace("ns"))).To(Succeed())
			g.Expect(claims.Items).To(BeEmpty(), "no address is claimed for a machine that is leaving")
		})
	}
}
