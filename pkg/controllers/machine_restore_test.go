package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// errNoNodeStep is what the fixture's reconcile returns once it reaches the Node step (the
// fixture has no workload cluster): everything before it is done and patched.
const errNoNodeStep = "no workload cluster access configured"

// TestAStaticIPMachineWhoseStatusWasLostKeepsItsVMsNetwork: after clusterctl move or a restore,
// an OVirtMachine with static addresses comes back with spec.providerID and no status. Before,
// the network step ran again on its VM: the whole Ignition config (with the join secrets) was
// written back into the Engine, the NICs beyond spec.nics were unplugged, and a new
// IPAddressClaim was made while the guest kept its old address (two machines, one address).
// Now a VM that is up, or whose network the object's annotation says CAPOV set, is left as it
// is: no network write, no NIC change, no new claim (the missing one is reported).
func TestAStaticIPMachineWhoseStatusWasLostKeepsItsVMsNetwork(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     ovirt.VMStatus
		annotation bool
		pools      bool
	}{
		{"a running VM with addresses from a pool", ovirt.VMStatusUp, false, true},
		{"a running VM with a static DNS setting", ovirt.VMStatusUp, false, false},
		{"a VM stopped since, whose network the moved annotation records", ovirt.VMStatusDown, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			f := newMachineFixture(t)
			g.Expect(f.c.Create(ctx, keySecret("ns", "c1", testKey(5)))).To(Succeed())
			vm := f.ov.PutVM(ovirt.VM{ID: "5a7e0000-0000-4000-8000-000000000001", Name: "w-1", Status: tc.status,
				Comment: signed(f.om, "", "c1", "w-1", testKey(5)), Disks: []ovirt.Disk{{ID: "d1", Bootable: true}},
				NICs: []ovirt.NIC{{ID: "n1", Name: "nic1", MAC: "56:6f:00:00:00:01"}, {ID: "n2", Name: "nic2", MAC: "56:6f:00:00:00:02"}}})
			stored := f.get(t)
			stored.Spec.ProviderID = infrav1.ProviderIDPrefix + vm.ID
			stored.Spec.NICs = []infrav1.NIC{{VnicProfile: "ovirtmgmt", Nameservers: []string{"10.0.0.53"}}}
			if tc.pools {
				stored.Spec.NICs[0].AddressesFromPools = []infrav1.IPPoolReference{pool}
			}
			if tc.annotation {
				stored.Annotations = map[string]string{networkSetAnnotation: vm.ID}
			}
			g.Expect(f.c.Update(ctx, stored)).To(Succeed())

			for range 5 {
				res, err := f.reconcile(t)
				g.Expect(err).To(Or(Not(HaveOccurred()), MatchError(errNoNodeStep)))
				f.now = f.now.Add(max(res.RequeueAfter, time.Minute))
			}
			for _, op := range []string{"UpdateVM", "RemoveNIC", "AddNIC", "UpdateNIC"} {
				g.Expect(f.ov.CallCount(op)).To(BeZero(), "no %s on a VM whose network was given", op)
			}
			got, _ := f.ov.VM(vm.ID)
			g.Expect(got.NICs).To(HaveLen(2), "no NIC unplugged")
			claims := &ipamv1.IPAddressClaimList{}
			g.Expect(f.c.List(ctx, claims, client.InNamespace("ns"))).To(Succeed())
			g.Expect(claims.Items).To(BeEmpty(), "no new address claimed while the guest keeps its own")
			om := f.get(t)
			g.Expect(v1beta1conditions.IsTrue(om, infrav1.MachineNetworkSetCondition)).To(BeTrue())
			g.Expect(om.Annotations).To(HaveKeyWithValue(networkSetAnnotation, vm.ID))
			if tc.pools {
				g.Expect(f.events()).To(ContainElement(ContainSubstring(eventIPAddressClaimGone)), "the missing claim is reported")
			}
		})
	}
}

// TestANetworkSetIsRecordedWhereItSurvivesAMove: the machine that configures its VM's network
// records it in an annotation (metadata travels with clusterctl move; status does not).
func TestANetworkSetIsRecordedWhereItSurvivesAMove(t *testing.T) {
	g := NewWithT(t)
	f := newMachineFixture(t)
	for range 10 {
		res, err := f.reconcile(t)
		g.Expect(err).To(Or(Not(HaveOccurred()), MatchError(errNoNodeStep)))
		f.now = f.now.Add(max(res.RequeueAfter, time.Minute))
	}
	om := f.get(t)
	g.Expect(om.Status.VMID).NotTo(BeEmpty())
	g.Expect(v1beta1conditions.IsTrue(om, infrav1.MachineNetworkSetCondition)).To(BeTrue())
	g.Expect(om.Annotations).To(HaveKeyWithValue(networkSetAnnotation, om.Status.VMID))
}
