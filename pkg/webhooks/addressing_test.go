package webhooks

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

var nodesPool = infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "nodes"}

func TestValidateNICAddressing(t *testing.T) {
	tests := []struct {
		name    string
		nics    []infrav1.NIC
		wantErr string // substring of the error list, "" for valid
	}{
		{"static IPv4 with DNS is valid", []infrav1.NIC{{VnicProfile: "ovirtmgmt", AddressesFromPools: []infrav1.IPPoolReference{nodesPool},
			Gateway: "10.0.0.1", Nameservers: []string{"10.0.0.53", "fd00::53"}, SearchDomains: []string{"example.org"}, DHCP6: ptr.To(true)}}, ""},
		{"a plain NIC is valid", []infrav1.NIC{{VnicProfile: "ovirtmgmt"}}, ""},
		{"a pool without kind", []infrav1.NIC{{VnicProfile: "a", AddressesFromPools: []infrav1.IPPoolReference{{APIGroup: "ipam.cluster.x-k8s.io", Name: "nodes"}}}},
			"spec.nics[0].addressesFromPools[0].kind: Required value"},
		{"a pool with an invalid name", []infrav1.NIC{{VnicProfile: "a", AddressesFromPools: []infrav1.IPPoolReference{{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "Nodes_1"}}}},
			"spec.nics[0].addressesFromPools[0].name: Invalid value"},
		{"the same pool twice", []infrav1.NIC{{VnicProfile: "a", AddressesFromPools: []infrav1.IPPoolReference{nodesPool, nodesPool}}},
			"spec.nics[0].addressesFromPools[1]: Duplicate value"},
		{"a gateway with a prefix", []infrav1.NIC{{VnicProfile: "a", Gateway: "10.0.0.1/24"}}, "spec.nics[0].gateway: Invalid value"},
		{"a nameserver that is a name", []infrav1.NIC{{VnicProfile: "a", Nameservers: []string{"dns.example.org"}}}, "spec.nics[0].nameservers[0]: Invalid value"},
		{"a search domain with a space", []infrav1.NIC{{VnicProfile: "a", SearchDomains: []string{"example org"}}}, "spec.nics[0].searchDomains[0]: Invalid value"},
		{"no address at all", []infrav1.NIC{{VnicProfile: "a", DHCP4: ptr.To(false)}}, "spec.nics[0].dhcp4: Invalid value"},
		{"two NICs for one guest interface", []infrav1.NIC{{VnicProfile: "a", DeviceName: "eth1"}, {VnicProfile: "b"}},
			"spec.nics[1].deviceName: Duplicate value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			errs := validateNICsAddressing(tt.nics, field.NewPath("spec", "nics"))
			if tt.wantErr == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs.ToAggregate()).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

func TestValidateOVirtClusterSpecWithAnEndpointPool(t *testing.T) {
	g := NewWithT(t)
	path := field.NewPath("spec")
	spec := &infrav1.OVirtClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Port: 6443}}
	errs, _ := ValidateOVirtClusterSpec(spec, path)
	g.Expect(errs.ToAggregate()).To(MatchError(ContainSubstring("spec.controlPlaneEndpoint.host: Required value")),
		"a port without a host or a pool is incomplete")

	spec.ControlPlaneEndpointFromPool = &infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "GlobalInClusterIPPool", Name: "vips"}
	errs, _ = ValidateOVirtClusterSpec(spec, path)
	g.Expect(errs).To(BeEmpty(), "the pool gives the host")

	spec.ControlPlaneEndpointFromPool.Kind = ""
	errs, _ = ValidateOVirtClusterSpec(spec, path)
	g.Expect(errs.ToAggregate()).To(MatchError(ContainSubstring("spec.controlPlaneEndpointFromPool.kind: Required value")))
}

func TestOVirtClusterEndpointPoolUpdates(t *testing.T) {
	ctx := t.Context()
	w := &OVirtClusterWebhook{}
	pool := &infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "GlobalInClusterIPPool", Name: "vips"}
	withPool := func(host string, p *infrav1.IPPoolReference) *infrav1.OVirtCluster {
		c := &infrav1.OVirtCluster{}
		c.Name = "c"
		c.Spec.ControlPlaneEndpointFromPool = p
		c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: host, Port: 6443}
		return c
	}
	g := NewWithT(t)
	_, err := w.ValidateUpdate(ctx, withPool("", pool), withPool("10.0.1.7", pool))
	g.Expect(err).NotTo(HaveOccurred(), "the manager sets the host from the claimed address")
	other := &infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "GlobalInClusterIPPool", Name: "other"}
	_, err = w.ValidateUpdate(ctx, withPool("10.0.1.7", pool), withPool("10.0.1.7", other))
	g.Expect(err).To(MatchError(ContainSubstring("spec.controlPlaneEndpointFromPool: Forbidden")), "the pool cannot change once the address is claimed")
	_, err = w.ValidateUpdate(ctx, withPool("", pool), withPool("", other))
	g.Expect(err).NotTo(HaveOccurred(), "before the claim the pool may change")
}
