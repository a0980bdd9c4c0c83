package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// TestAMachineJoinsOnlyTheGroupsItsProviderAllows: spec.affinityGroups joined any affinity group
// of the oVirt cluster by name, another tenant's CAPOV-managed Hard group (which then keeps that
// tenant's VMs from starting) or an administrator's positive group among them. Now a group must
// be allowed by the provider's spec.allowedAffinityGroups and must not be one CAPOV manages; a
// refused one is AffinityGroupNotAllowed, naming the group, and nothing is written: the VM
// neither joins nor starts.
func TestAMachineJoinsOnlyTheGroupsItsProviderAllows(t *testing.T) {
	for _, tc := range []struct {
		name        string
		allowed     []string
		description string
		joined      bool
	}{
		{"a group the provider does not allow", nil, "made by an administrator", false},
		{"another cluster's CAPOV group, even where the provider allows every group", []string{"*"}, "capov ovirtcluster=payments/prod", false},
		{"a group the provider allows by prefix", []string{"team-*"}, "made by an administrator", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			f := newMachineFixture(t)
			cl, err := f.ov.FindCluster(ctx, "Default")
			g.Expect(err).NotTo(HaveOccurred())
			grp := f.ov.AddAffinityGroup(ovirt.AffinityGroup{Name: "team-spread", ClusterID: cl.ID, Description: tc.description, Enforcing: true})
			p := &infrav1.OVirtProvider{}
			g.Expect(f.c.Get(ctx, client.ObjectKey{Name: "p1"}, p)).To(Succeed())
			p.Spec.AllowedAffinityGroups = tc.allowed
			g.Expect(f.c.Update(ctx, p)).To(Succeed())
			om := f.get(t)
			om.Spec.AffinityGroups = []string{"team-spread"}
			g.Expect(f.c.Update(ctx, om)).To(Succeed())

			for range 10 {
				res, err := f.reconcile(t)
				g.Expect(err).To(Or(Not(HaveOccurred()), MatchError(errNoNodeStep)))
				f.now = f.now.Add(max(res.RequeueAfter, time.Minute))
			}
			got := f.get(t)
			members, _ := f.ov.AffinityGroupByName(grp.Name)
			if tc.joined {
				g.Expect(members.VMIDs).To(ConsistOf(got.Status.VMID))
				g.Expect(f.ov.CallCount("RunOnce")).NotTo(BeZero(), "started with its bootstrap data")
				return
			}
			g.Expect(f.ov.CallCount("AddVMToAffinityGroup")).To(BeZero(), "nothing written")
			g.Expect(members.VMIDs).To(BeEmpty())
			g.Expect(f.ov.CallCount("Power")).To(BeZero(), "the VM does not start outside its group")
			g.Expect(f.ov.CallCount("RunOnce")).To(BeZero(), "the VM does not start outside its group")
			g.Expect(v1beta1conditions.GetReason(got, infrav1.MachineOnCondition)).To(Equal(infrav1.AffinityGroupNotAllowedReason))
			g.Expect(v1beta1conditions.GetMessage(got, infrav1.MachineOnCondition)).To(ContainSubstring(`"team-spread"`))
			g.Expect(v1beta1conditions.GetMessage(got, infrav1.MachineOnCondition)).NotTo(ContainSubstring("payments"), "another tenant's cluster is not named")
		})
	}
}
