package integration

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/ovirtsim"
)

// The IPAM pool of these tests. The tests play the IPAM provider (they allocate by writing the
// IPAddress and the claim's status, as any provider does); the conformance suite runs the real
// in-cluster provider.
var testPool = infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "nodes"}

// eventuallyClaim waits for the IPAddressClaim the manager creates for spec.nics[nic], pool 0.
func eventuallyClaim(t *testing.T, om *infrav1.OVirtMachine, nic int) *ipamv1.IPAddressClaim {
	t.Helper()
	claim := &ipamv1.IPAddressClaim{}
	NewWithT(t).Eventually(func(g Gomega) {
		list := &ipamv1.IPAddressClaimList{}
		g.Expect(k8s.List(context.Background(), list, client.InNamespace(om.Namespace),
			client.MatchingLabels{infrav1.IPAddressClaimMachineLabel: om.Name, infrav1.IPAddressClaimNICLabel: strconv.Itoa(nic)})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		*claim = list.Items[0]
	}, timeout, interval).Should(Succeed())
	return claim
}

// allocate plays the IPAM provider: it creates the IPAddress of a claim and points the claim's
// status at it.
func allocate(t *testing.T, claim *ipamv1.IPAddressClaim, address string, prefix int32, gateway string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ip := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name},
		Spec: ipamv1.IPAddressSpec{ClaimRef: ipamv1.IPAddressClaimReference{Name: claim.Name}, PoolRef: claim.Spec.PoolRef,
			Address: address, Prefix: ptr.To(prefix), Gateway: gateway},
	}
	g.Expect(k8s.Create(ctx, ip)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := &ipamv1.IPAddressClaim{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(claim), c)).To(Succeed())
		c.Status.AddressRef = ipamv1.IPAddressReference{Name: ip.Name}
		g.Expect(k8s.Status().Update(ctx, c)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// eventuallyReleased waits for the claim to be deleted (the integration API server has no
// garbage collector: the manager deletes it itself).
func eventuallyReleased(t *testing.T, claim *ipamv1.IPAddressClaim) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(claim), &ipamv1.IPAddressClaim{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "IPAddressClaim %s still exists (err %v)", claim.Name, err)
	}, timeout, interval).Should(Succeed())
}

func staticNIC() infrav1.NIC {
	return infrav1.NIC{VnicProfile: "ovirtmgmt", AddressesFromPools: []infrav1.IPPoolReference{testPool},
		Nameservers: []string{"10.20.0.53"}, SearchDomains: []string{"lab.example.org"}}
}

// TestStaticIPMachineOnACloudInitTemplate: the machine waits for its address before any VM
// exists, gives it to oVirt's initialization as a nic_configuration, reports it at once, and the
// guest comes up with it; deleting the machine releases the claim after the VM is gone.
func TestStaticIPMachineOnACloudInitTemplate(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.Template = "ubuntu-22.04"
	spec.NICs = []infrav1.NIC{staticNIC(), {VnicProfile: "storage"}}
	_, om := tc.newMachine(t, spec, cloudConfig)

	claim := eventuallyClaim(t, om, 0)
	g.Expect(metav1.IsControlledBy(claim, om)).To(BeTrue(), "the claim is owned by the OVirtMachine: released with it")
	g.Expect(claim.Spec.PoolRef).To(Equal(ipamv1.IPPoolReference{APIGroup: testPool.APIGroup, Kind: testPool.Kind, Name: testPool.Name}))
	g.Expect(claim.Spec.ClusterName).To(Equal(tc.cluster.Name))
	g.Expect(claim.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, tc.cluster.Name))
	eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: "False", Reason: infrav1.WaitingForIPAddressReason})
	g.Expect(slices.ContainsFunc(sim.VMs(), func(vm ovirtsim.VMState) bool { return vm.Name == om.Name })).To(BeFalse(),
		"no VM is created before its address is allocated")

	allocate(t, claim, "10.20.0.5", 24, "10.20.0.1")
	eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: "True"})
	registerNode(t, om)
	got := eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(provisioned(om)).To(BeTrue(), describeConditions(om))
	})
	g.Expect(got.Status.Addresses).NotTo(BeEmpty())
	g.Expect(got.Status.Addresses[0]).To(Equal(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "10.20.0.5"}),
		"the allocated address comes first")

	in, err := sim.Initialization(got.Status.VMID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in).NotTo(BeNil())
	g.Expect(in.Network).To(HaveLen(2))
	g.Expect(in.Network[0]).To(MatchFields(IgnoreExtras, Fields{
		"Name": Equal("eth0"), "Configured": BeTrue(), "DHCP4": BeFalse(),
		"Addresses": Equal([]string{"10.20.0.5/24"}), "Gateways": Equal([]string{"10.20.0.1"}),
		"DNSServers": Equal([]string{"10.20.0.53"}), "DNSSearch": Equal([]string{"lab.example.org"}),
	}))
	g.Expect(in.Network[1].DHCP4).To(BeTrue(), "the second NIC keeps DHCP")
	// The guest agent reports the static address on the first NIC (not a DHCP one).
	g.Expect(got.Status.Addresses).To(HaveLen(2), "eth0's static address and eth1's DHCP one: %v", got.Status.Addresses)
	vm := eventuallyVM(t, got.Status.VMName, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.IPs).To(ContainElement("10.20.0.5")) })
	g.Expect(vm.Status).To(Equal("up"))
	eventuallyEvent(t, got, "NetworkConfigured")

	deleteAndWait(t, got)
	eventuallyReleased(t, claim)
	g.Expect(slices.ContainsFunc(sim.VMs(), func(vm ovirtsim.VMState) bool { return vm.ID == got.Status.VMID })).To(BeFalse())
}

// TestStaticIPMachineOnAnIgnitionTemplate: for rhcos_x64 the Engine ignores nic_configurations,
// so the address goes into the Ignition config as a NetworkManager keyfile matched by the NIC's
// MAC address.
func TestStaticIPMachineOnAnIgnitionTemplate(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	nic := staticNIC()
	nic.DHCP6 = ptr.To(true)
	spec.NICs = []infrav1.NIC{nic}
	_, om := tc.newMachine(t, spec, ignitionConfig)
	claim := eventuallyClaim(t, om, 0)
	allocate(t, claim, "10.20.1.7", 23, "10.20.0.1")
	eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: "True"})
	registerNode(t, om)
	got := eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(provisioned(om)).To(BeTrue(), describeConditions(om))
	})
	in, err := sim.Initialization(got.Status.VMID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in.Format).To(Equal(ovirtsim.InitFormatIgnition))
	g.Expect(in.UserData).To(ContainSubstring(`"users":[{"name":"core"}]`), "the bootstrap config is kept")
	vm := eventuallyVM(t, got.Status.VMName, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.IPs).To(ContainElement("10.20.1.7")) })
	g.Expect(vm.NICs).To(HaveLen(1))
	g.Expect(in.Network).To(HaveLen(1))
	g.Expect(in.Network[0]).To(MatchFields(IgnoreExtras, Fields{
		"MAC": Equal(strings.ToLower(vm.NICs[0].MAC)), "Configured": BeTrue(), "DHCP6": BeTrue(),
		"Addresses": Equal([]string{"10.20.1.7/23"}), "Gateways": Equal([]string{"10.20.0.1"}),
		"Source": Equal("/etc/NetworkManager/system-connections/capov-eth0.nmconnection"),
	}))
	g.Expect(got.Status.Addresses[0].Address).To(Equal("10.20.1.7"))
	deleteAndWait(t, got)
	eventuallyReleased(t, claim)
}

// TestAllocatedAddressesStandInWithoutAGuestAgent: an image without qemu-guest-agent reports
// nothing, but the allocated address is the machine's address at once (no NoGuestAddresses
// wait for the Node).
func TestAllocatedAddressesStandInWithoutAGuestAgent(t *testing.T) {
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.Template = noAgentTemplate
	spec.NICs = []infrav1.NIC{staticNIC()}
	_, om := tc.newMachine(t, spec, cloudConfig)
	claim := eventuallyClaim(t, om, 0)
	allocate(t, claim, "10.20.2.9", 24, "")
	got := eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(om.Status.Addresses).To(Equal([]clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: "10.20.2.9"}}))
		on := v1beta1conditions.Get(om, infrav1.MachineOnCondition)
		g.Expect(on).NotTo(BeNil())
		g.Expect(on.Status).To(BeEquivalentTo("True"))
		g.Expect(on.Reason).NotTo(Equal(infrav1.NoGuestAddressesReason), "the allocated address stands in for the guest agent")
	})
	deleteAndWait(t, got)
	eventuallyReleased(t, claim)
}

// TestMachineDeletedWhileWaitingForItsAddress: a machine deleted before its address was
// allocated creates no VM and releases its claim.
func TestMachineDeletedWhileWaitingForItsAddress(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.NICs = []infrav1.NIC{staticNIC()}
	_, om := tc.newMachine(t, spec, ignitionConfig)
	claim := eventuallyClaim(t, om, 0)
	eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: "False", Reason: infrav1.WaitingForIPAddressReason})
	deleteAndWait(t, om)
	eventuallyReleased(t, claim)
	g.Expect(slices.ContainsFunc(sim.VMs(), func(vm ovirtsim.VMState) bool { return strings.HasPrefix(vm.Name, om.Name) })).To(BeFalse())
}

// TestControlPlaneEndpointFromAPool: an OVirtCluster without an endpoint host claims it from its
// pool, is not provisioned before, and releases the claim when deleted.
func TestControlPlaneEndpointFromAPool(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestClusterWith(t, mainFilter, func(oc *infrav1.OVirtCluster) {
		oc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{}
		oc.Spec.ControlPlaneEndpointFromPool = &infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "GlobalInClusterIPPool", Name: "vips"}
	})
	ns, oc := tc.ns, tc.oc

	claim := &ipamv1.IPAddressClaim{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: oc.Name + "-control-plane-endpoint"}, claim)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	g.Expect(metav1.IsControlledBy(claim, oc)).To(BeTrue())
	g.Expect(claim.Spec.PoolRef.Kind).To(Equal("GlobalInClusterIPPool"))
	g.Eventually(func(g Gomega) {
		got := &infrav1.OVirtCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(oc), got)).To(Succeed())
		g.Expect(got.Status.Initialization.Provisioned).To(BeNil(), "not provisioned without its endpoint")
		c := v1beta1conditions.Get(got, infrav1.ClusterReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(infrav1.WaitingForIPAddressReason))
	}, timeout, interval).Should(Succeed())

	allocate(t, claim, "10.20.9.100", 24, "10.20.9.1")
	g.Eventually(func(g Gomega) {
		got := &infrav1.OVirtCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(oc), got)).To(Succeed())
		g.Expect(got.Spec.ControlPlaneEndpoint).To(Equal(clusterv1.APIEndpoint{Host: "10.20.9.100", Port: 6443}))
		g.Expect(got.Status.Initialization.Provisioned).To(HaveValue(BeTrue()))
	}, timeout, interval).Should(Succeed())

	g.Expect(k8s.Delete(ctx, oc)).To(Succeed())
	eventuallyReleased(t, claim)
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(oc), &infrav1.OVirtCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
}
