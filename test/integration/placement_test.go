package integration

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// The oVirt clusters of the placement tests (newSimulator): all in the data center of the
// templates, each with its own hosts, so that the tests do not place VMs on each other's hosts.
const (
	spreadCluster   = "Spread3"   // three hosts
	softPairCluster = "SoftPair"  // two hosts
	hardPairCluster = "HardPair"  // two hosts
	zoneACluster    = "ZoneA"     // failure domain zone-a
	zoneBCluster    = "ZoneB"     // failure domain zone-b
	otherDCCluster  = "Secondary" // another data center: the templates are not usable there
)

// placementClusters are the clusters newSimulator adds for these tests.
func placementClusters() []ovirtsim.Cluster {
	hosts := func(prefix string, n int) []ovirtsim.Host {
		out := make([]ovirtsim.Host, 0, n)
		for i := range n {
			out = append(out, ovirtsim.Host{Name: prefix + "-h" + string(rune('1'+i)), MemoryGB: 256})
		}
		return out
	}
	return []ovirtsim.Cluster{
		{Name: spreadCluster, Networks: []string{"ovirtmgmt"}, Hosts: hosts("spread", 3)},
		{Name: softPairCluster, Networks: []string{"ovirtmgmt"}, Hosts: hosts("softpair", 2)},
		{Name: hardPairCluster, Networks: []string{"ovirtmgmt"}, Hosts: hosts("hardpair", 2)},
		{Name: zoneACluster, Networks: []string{"ovirtmgmt"}, Hosts: hosts("zonea", 2)},
		// zoneb-backend is a network of ZoneB alone (its vNIC profile: newSimulator).
		{Name: zoneBCluster, Networks: []string{"ovirtmgmt", "zoneb-backend"}, Hosts: hosts("zoneb", 2)},
	}
}

// newControlPlaneMachine creates a control-plane Machine (labelled as KubeadmControlPlane labels
// its machines) with bootstrap data and its OVirtMachine in the given oVirt cluster.
func (tc *testCluster) newControlPlaneMachine(t *testing.T, ovirtCluster, failureDomain string) (*clusterv1.Machine, *infrav1.OVirtMachine) {
	t.Helper()
	return tc.newControlPlaneMachineWith(t, ovirtCluster, failureDomain, nil)
}

// newControlPlaneMachineWith is newControlPlaneMachine with a change of the VM spec.
func (tc *testCluster) newControlPlaneMachineWith(t *testing.T, ovirtCluster, failureDomain string, mutate func(*infrav1.OVirtVMSpec)) (*clusterv1.Machine, *infrav1.OVirtMachine) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name := tc.ns + "-cp-" + strings.ToLower(rand.String(4))
	secret := name + "-bootstrap"
	g.Expect(k8s.Create(ctx, harness.BootstrapSecret(tc.ns, secret, tc.cluster.Name, ignitionConfig, "ignition"))).To(Succeed())
	m := harness.Machine(tc.cluster, name, secret)
	m.Labels[clusterv1.MachineControlPlaneLabel] = ""
	m.Spec.FailureDomain = failureDomain
	for k, v := range filterLabels(tc.filter) {
		m.Labels[k] = v
	}
	g.Expect(k8s.Create(ctx, m)).To(Succeed())
	spec := vmSpec()
	spec.OVirtCluster = ovirtCluster
	spec.Memory = &infrav1.Memory{SizeMB: 4096}
	if mutate != nil {
		mutate(&spec)
	}
	om := harness.OVirtMachine(m, spec)
	om.Labels[clusterv1.MachineControlPlaneLabel] = ""
	for k, v := range filterLabels(tc.filter) {
		om.Labels[k] = v
	}
	g.Expect(k8s.Create(ctx, om)).To(Succeed())
	return m, om
}

// newPlacementCluster is newTestCluster whose machines and OVirtCluster are deleted when the
// test ends (and waited for): machines left polling would spend the manager's oVirt call budget,
// which every other test of the suite shares, and the deletion of the OVirtCluster deletes its
// affinity groups.
func newPlacementCluster(t *testing.T, mutate ...func(*infrav1.OVirtCluster)) *testCluster {
	t.Helper()
	var m func(*infrav1.OVirtCluster)
	if len(mutate) > 0 {
		m = mutate[0]
	}
	tc := newTestClusterWith(t, mainFilter, m)
	t.Cleanup(func() {
		ctx := context.Background()
		g := NewWithT(t)
		oms := &infrav1.OVirtMachineList{}
		g.Expect(k8s.List(ctx, oms, client.InNamespace(tc.ns))).To(Succeed())
		for i := range oms.Items {
			g.Expect(client.IgnoreNotFound(k8s.Delete(ctx, &oms.Items[i]))).To(Succeed())
		}
		g.Eventually(func(g Gomega) {
			left := &infrav1.OVirtMachineList{}
			g.Expect(k8s.List(ctx, left, client.InNamespace(tc.ns))).To(Succeed())
			g.Expect(left.Items).To(BeEmpty())
		}, timeout, interval).Should(Succeed())
		oc := &infrav1.OVirtCluster{}
		oc.Namespace, oc.Name = tc.ns, tc.cluster.Name
		g.Expect(client.IgnoreNotFound(k8s.Delete(ctx, oc))).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(oc), &infrav1.OVirtCluster{}))
		}, timeout, interval).Should(BeTrue())
	})
	return tc
}

// updateOVirtCluster changes the test cluster's OVirtCluster.
func (tc *testCluster) updateOVirtCluster(t *testing.T, mutate func(*infrav1.OVirtCluster)) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() error {
		oc := &infrav1.OVirtCluster{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: tc.ns, Name: tc.cluster.Name}, oc); err != nil {
			return err
		}
		mutate(oc)
		return k8s.Update(context.Background(), oc)
	}, timeout, interval).Should(Succeed())
}

func (tc *testCluster) getOVirtCluster(g Gomega) *infrav1.OVirtCluster {
	oc := &infrav1.OVirtCluster{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: tc.ns, Name: tc.cluster.Name}, oc)).To(Succeed())
	return oc
}

// groupOf returns the simulator's affinity group of that name in the oVirt cluster.
func groupOf(ovirtCluster, name string) (ovirtsim.AffinityGroupState, bool) {
	for _, g := range sim.AffinityGroups(ovirtCluster) {
		if g.Name == name {
			return g, true
		}
	}
	return ovirtsim.AffinityGroupState{}, false
}

// addAdminGroup creates a positive, non-enforcing affinity group in the oVirt cluster, as an
// administrator would in the oVirt UI.
func addAdminGroup(t *testing.T, ovirtCluster, name string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	c := ovirtClient(t)
	cl, err := c.FindCluster(ctx, ovirtCluster)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: cl.ID, Name: name, Description: "made by an administrator", Positive: true})
	g.Expect(err).NotTo(HaveOccurred())
}

// hostRecorded is an eventuallyCondition check: status.host names the VM's host (written with
// MachineOn True, after it).
func hostRecorded(g Gomega, om *infrav1.OVirtMachine) {
	g.Expect(om.Status.Host).NotTo(BeEmpty(), "status.host names the VM's host")
}

func controlPlaneGroupName(tc *testCluster, ovirtCluster string) string {
	return "capov-" + tc.ns + "-" + tc.cluster.Name + "-control-plane-" + ovirtCluster
}

func TestThreeControlPlaneMachinesLandOnThreeHosts(t *testing.T) {
	g := NewWithT(t)
	tc := newPlacementCluster(t)
	var oms []*infrav1.OVirtMachine
	var machines []*clusterv1.Machine
	for range 3 {
		m, om := tc.newControlPlaneMachine(t, spreadCluster, "")
		machines, oms = append(machines, m), append(oms, om)
	}
	hosts := map[string]string{}
	for _, om := range oms {
		got := eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: "True"}, hostRecorded)
		simHost, ok := sim.VMHost(got.Status.VMID)
		g.Expect(ok).To(BeTrue())
		g.Expect(got.Status.Host).To(Equal(simHost))
		hosts[got.Status.Host] = got.Name
		g.Expect(got.Status.AffinityGroups).To(ConsistOf(controlPlaneGroupName(tc, spreadCluster)))
	}
	g.Expect(hosts).To(HaveLen(3), "three control-plane VMs on three hosts: %v", hosts)

	// The group in oVirt: negative, not enforcing (Soft, the default), with the three VMs.
	grp, ok := groupOf(spreadCluster, controlPlaneGroupName(tc, spreadCluster))
	g.Expect(ok).To(BeTrue(), "the control-plane group exists in %s: %+v", spreadCluster, sim.AffinityGroups(spreadCluster))
	g.Expect(grp.VMRule).To(Equal("negative"))
	g.Expect(grp.VMEnforcing).To(BeFalse())
	g.Expect(grp.VMs).To(HaveLen(3))
	oc := tc.getOVirtCluster(g)
	g.Expect(oc.Status.AffinityGroups).To(ConsistOf(HaveField("Name", controlPlaneGroupName(tc, spreadCluster))))
	g.Expect(v1beta1conditions.IsTrue(oc, infrav1.AffinityGroupsReadyCondition)).To(BeTrue(), describeConditions(oc))

	// The Machine carries the host as a label that Cluster API copies to the Node.
	for i, m := range machines {
		g.Eventually(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(m), got)).To(Succeed())
			g.Expect(got.Labels).To(HaveKeyWithValue(infrav1.HostLabel, getOM(g, oms[i]).Status.Host))
		}, timeout, interval).Should(Succeed())
	}

	// Deleting the machines removes the VMs from the group (with the VMs); deleting the cluster
	// deletes the group.
	for _, om := range oms {
		deleteAndWait(t, om)
	}
	grp, ok = groupOf(spreadCluster, controlPlaneGroupName(tc, spreadCluster))
	g.Expect(ok).To(BeTrue(), "the control-plane group stays while the cluster exists")
	g.Expect(grp.VMs).To(BeEmpty())
	g.Expect(k8s.Delete(context.Background(), oc)).To(Succeed())
	g.Eventually(func() bool {
		_, ok := groupOf(spreadCluster, controlPlaneGroupName(tc, spreadCluster))
		return ok
	}, timeout, interval).Should(BeFalse(), "the group is deleted with the cluster")
	g.Eventually(func() bool {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(oc), &infrav1.OVirtCluster{})
		return err != nil
	}, timeout, interval).Should(BeTrue(), "the OVirtCluster's finalizer drops once its groups are gone")
}

// TestSoftAntiAffinityIsBestEffortWhenItsGroupCannotBeCreated: the Engine refuses to create the
// control-plane group (here a 403 as for an account without the permission; issue 33, item 6).
// Soft is best effort: the control-plane VM starts without the group, with a Warning event
// naming the problem and the OVirtCluster's AffinityGroupsReady=False; once the Engine creates
// groups again, the running VM joins it. Before, the VM waited for the group forever.
func TestSoftAntiAffinityIsBestEffortWhenItsGroupCannotBeCreated(t *testing.T) {
	g := NewWithT(t)
	// An Engine account that may create VMs but not manipulate affinity groups (VmCreator, not
	// ClusterAdmin, on the cluster): the simulator refuses its groups as the Engine does (403,
	// "User is not authorized to perform this action."); the VM is its own, as its creator.
	user := ovirtsim.User{Username: "no-groups@internal", Password: "no-groups-pw", Grants: []ovirtsim.Grant{
		{Role: "VmCreator", Cluster: spreadCluster}, {Role: "UserTemplateBasedVm", Template: "rhcos-4.14"}}}
	g.Expect(sim.AddUser(user)).To(Succeed())
	p := newProviderAs(t, user.Username, user.Password, nil)
	tc := newPlacementCluster(t, func(oc *infrav1.OVirtCluster) { oc.Spec.Provider = p.Name })
	_, om := tc.newControlPlaneMachineWith(t, spreadCluster, "", func(s *infrav1.OVirtVMSpec) { s.Provider = p.Name })
	got := eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: "True"})
	g.Expect(got.Status.AffinityGroups).To(BeEmpty())
	g.Expect(eventuallyEvent(t, om, "AffinityGroupUnavailable")).To(And(ContainSubstring(controlPlaneGroupName(tc, spreadCluster)),
		ContainSubstring("Soft is best effort")))
	oc := tc.getOVirtCluster(g)
	g.Expect(v1beta1conditions.GetReason(oc, infrav1.AffinityGroupsReadyCondition)).To(Equal(infrav1.AffinityGroupFailedReason), describeConditions(oc))

	g.Expect(v1beta1conditions.GetMessage(oc, infrav1.AffinityGroupsReadyCondition)).To(And(ContainSubstring("User is not authorized to perform this action"),
		ContainSubstring("needs MANIPULATE_AFFINITY_GROUPS on oVirt cluster "+spreadCluster)))

	// The account may create VMs in no other oVirt cluster: the machine says what it lacks.
	_, other := tc.newControlPlaneMachineWith(t, "Default", "", func(s *infrav1.OVirtVMSpec) { s.Provider = p.Name })
	eventuallyCondition(t, other, condition{Type: infrav1.MachineCreatedCondition, Status: "False", Reason: infrav1.VMCreateFailedReason,
		Severity: clusterv1.ConditionSeverityWarning, Message: "needs CREATE_VM on oVirt cluster Default and on template rhcos-4.14"})
	g.Expect(eventuallyEvent(t, other, "VMCreateFailed")).To(ContainSubstring("User is not authorized to perform this action"))

	// The Engine's administrator grants the account ClusterAdmin on the cluster: the group is
	// created, the VM joins it.
	user.Grants = append(user.Grants, ovirtsim.Grant{Role: "ClusterAdmin", Cluster: spreadCluster})
	g.Expect(sim.AddUser(user)).To(Succeed())
	eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(om.Status.AffinityGroups).To(ConsistOf(controlPlaneGroupName(tc, spreadCluster)))
	})
}

func TestSoftAntiAffinityStartsAThirdVMOnTwoHosts(t *testing.T) {
	g := NewWithT(t)
	tc := newPlacementCluster(t)
	hosts := map[string]int{}
	for range 3 {
		_, om := tc.newControlPlaneMachine(t, softPairCluster, "")
		got := eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: "True"}, hostRecorded)
		hosts[got.Status.Host]++
	}
	g.Expect(hosts).To(HaveLen(2), "Soft spreads over both hosts and still starts the third VM: %v", hosts)
}

func TestHardAntiAffinityRefusesTheThirdVMUntilAHostComesUp(t *testing.T) {
	g := NewWithT(t)
	tc := newPlacementCluster(t)
	tc.updateOVirtCluster(t, func(oc *infrav1.OVirtCluster) { oc.Spec.ControlPlaneAntiAffinity = infrav1.AntiAffinityHard })
	g.Eventually(func(g Gomega) {
		g.Expect(tc.getOVirtCluster(g).Spec.ControlPlaneAntiAffinity).To(Equal(infrav1.AntiAffinityHard))
	}, timeout, interval).Should(Succeed())
	for range 2 {
		_, om := tc.newControlPlaneMachine(t, hardPairCluster, "")
		eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: "True"})
	}
	grp, ok := groupOf(hardPairCluster, controlPlaneGroupName(tc, hardPairCluster))
	g.Expect(ok).To(BeTrue())
	g.Expect(grp.VMEnforcing).To(BeTrue(), "Hard is an enforcing group")

	_, third := tc.newControlPlaneMachine(t, hardPairCluster, "")
	got := eventuallyCondition(t, third, condition{Type: infrav1.MachineOnCondition, Status: "False",
		Reason: infrav1.AffinityRulesUnsatisfiableReason, Severity: clusterv1.ConditionSeverityWarning,
		Message: "There is no host that satisfies current scheduling constraints"})
	// The Engine's answer, as it words it: a line per filtered host (a real Engine repeats the
	// first host's name and reason on every line, and names no group).
	g.Expect(v1beta1conditions.GetMessage(got, infrav1.MachineOnCondition)).To(ContainSubstring("did not satisfy internal filter VmAffinityGroups"))
	eventuallyEvent(t, third, "NoHostForVM")
	_, running := sim.VMHost(got.Status.VMID)
	g.Expect(running).To(BeFalse())

	// A third host: the retry starts the VM there.
	_, err := sim.AddHost(hardPairCluster, "hardpair-h3", 256<<30)
	g.Expect(err).NotTo(HaveOccurred())
	got = eventuallyCondition(t, third, condition{Type: infrav1.MachineOnCondition, Status: "True"}, hostRecorded)
	g.Expect(got.Status.Host).To(Equal("hardpair-h3"))
}

func TestFailureDomainsPlaceVMsInTheirOVirtCluster(t *testing.T) {
	g := NewWithT(t)
	tc := newPlacementCluster(t)
	tc.updateOVirtCluster(t, func(oc *infrav1.OVirtCluster) {
		oc.Spec.Provider = mainProvider
		oc.Spec.ControlPlaneAntiAffinity = infrav1.AntiAffinityNone
		oc.Spec.FailureDomains = []infrav1.OVirtFailureDomain{
			{Name: "zone-a", OVirtCluster: zoneACluster},
			{Name: "zone-b", OVirtCluster: zoneBCluster, StorageDomainName: "data"},
			{Name: "workers-only", OVirtCluster: zoneBCluster, ControlPlane: ptr.To(false)},
			{Name: "zone-fast", OVirtCluster: zoneACluster, StorageDomainName: "fast"},
		}
	})
	g.Eventually(func(g Gomega) {
		oc := tc.getOVirtCluster(g)
		g.Expect(oc.Status.FailureDomains).To(HaveLen(4))
		g.Expect(oc.Status.FailureDomains[0]).To(Equal(clusterv1.FailureDomain{Name: "zone-a", ControlPlane: ptr.To(true),
			Attributes: map[string]string{"ovirtcluster": zoneACluster}}))
		g.Expect(oc.Status.FailureDomains[2].ControlPlane).To(HaveValue(BeFalse()))
		g.Expect(v1beta1conditions.IsTrue(oc, infrav1.FailureDomainsReadyCondition)).To(BeTrue(), describeConditions(oc))
	}, timeout, interval).Should(Succeed())

	// A control-plane Machine in zone-b: its spec says Default, the failure domain wins.
	_, om := tc.newControlPlaneMachine(t, "Default", "zone-b")
	got := eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: "True"})
	g.Expect(got.Spec.FailureDomain).To(Equal("zone-b"))
	g.Expect(got.Status.FailureDomain).To(Equal("zone-b"))
	vm, ok := sim.VM(got.Status.VMID)
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Cluster).To(Equal(zoneBCluster))
	g.Expect(got.Status.Host).To(HavePrefix("zoneb-"))
	g.Expect(got.Status.AffinityGroups).To(BeEmpty(), "None: no group")

	// A NIC on a vNIC profile whose network only the failure domain's oVirt cluster has: the
	// profile is looked up there, not in spec.ovirtcluster.
	_, backend := tc.newControlPlaneMachineWith(t, "Default", "zone-b", func(s *infrav1.OVirtVMSpec) {
		s.NICs = []infrav1.NIC{{VnicProfile: "zoneb-backend"}}
	})
	got = eventuallyCondition(t, backend, condition{Type: infrav1.MachineOnCondition, Status: "True"})
	vm, ok = sim.VM(got.Status.VMID)
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Cluster).To(Equal(zoneBCluster))
	g.Expect(vm.NICs).To(ConsistOf(HaveField("VnicProfile", "zoneb-backend")))

	// A domain the OVirtCluster does not define: nothing is created, the valid names are listed.
	_, bad := tc.newControlPlaneMachine(t, "Default", "zone-x")
	eventuallyCondition(t, bad, condition{Type: infrav1.MachineCreatedCondition, Status: "False",
		Reason: infrav1.FailureDomainNotFoundReason, Message: `failure domain "zone-x"`})
	got = eventuallyCondition(t, bad, condition{Type: infrav1.MachineCreatedCondition, Status: "False",
		Reason: infrav1.FailureDomainNotFoundReason, Message: "zone-a, zone-b, workers-only, zone-fast"})
	g.Expect(got.Status.VMID).To(BeEmpty())

	// The domain's storage domain replaces the machine's, with the clone rule: the template's
	// disks are only on "data", so thin disks cannot go to "fast"; cloned ones do.
	_, thin := tc.newControlPlaneMachineWith(t, "Default", "zone-fast", func(s *infrav1.OVirtVMSpec) { s.DiskClone = ptr.To(false) })
	eventuallyCondition(t, thin, condition{Type: infrav1.MachineCreatedCondition, Status: "False",
		Reason: infrav1.StorageDomainRequiresCloneReason, Message: `storage domain "fast"`})
	_, cloned := tc.newControlPlaneMachineWith(t, "Default", "zone-fast", func(s *infrav1.OVirtVMSpec) { s.DiskClone = ptr.To(true) })
	got = eventuallyCondition(t, cloned, condition{Type: infrav1.MachineOnCondition, Status: "True"})
	vm, ok = sim.VM(got.Status.VMID)
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Cluster).To(Equal(zoneACluster))
	g.Expect(vm.Disks).NotTo(BeEmpty())
	for _, d := range vm.Disks {
		g.Expect(d.StorageDomain).To(Equal("fast"), "the failure domain's storage domain")
	}

	// A domain in another data center is reported by the OVirtCluster, naming the domain.
	tc.updateOVirtCluster(t, func(oc *infrav1.OVirtCluster) {
		oc.Spec.FailureDomains = append(oc.Spec.FailureDomains, infrav1.OVirtFailureDomain{Name: "far", OVirtCluster: otherDCCluster},
			infrav1.OVirtFailureDomain{Name: "ghost", OVirtCluster: "NoSuchCluster"})
	})
	g.Eventually(func(g Gomega) {
		oc := tc.getOVirtCluster(g)
		c := v1beta1conditions.Get(oc, infrav1.FailureDomainsReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(infrav1.FailureDomainNotUsableReason))
		g.Expect(c.Message).To(ContainSubstring(`far: template "rhcos-4.14" is in another data center than oVirt cluster "Secondary"`))
		g.Expect(c.Message).To(ContainSubstring(`ghost: oVirt cluster "NoSuchCluster" not found`))
	}, timeout, interval).Should(Succeed())
}

func TestAWorkerPoolWithAntiAffinityGetsAGroupThatGoesWithIt(t *testing.T) {
	g := NewWithT(t)
	tc := newPlacementCluster(t)
	spec := vmSpec()
	spec.OVirtCluster = spreadCluster
	spec.Memory = &infrav1.Memory{SizeMB: 4096}
	spec.AntiAffinity = infrav1.AntiAffinityHard
	var oms []*infrav1.OVirtMachine
	for range 2 {
		_, om := tc.newMachineWithLabels(t, spec, map[string]string{clusterv1.MachineDeploymentNameLabel: "pool-a"})
		oms = append(oms, om)
	}
	name := "capov-" + tc.ns + "-" + tc.cluster.Name + "-md-pool-a-" + spreadCluster
	hosts := map[string]bool{}
	for _, om := range oms {
		got := eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: "True"}, hostRecorded)
		g.Expect(got.Status.AffinityGroups).To(ConsistOf(name))
		hosts[got.Status.Host] = true
	}
	g.Expect(hosts).To(HaveLen(2))
	grp, ok := groupOf(spreadCluster, name)
	g.Expect(ok).To(BeTrue())
	g.Expect(grp.VMEnforcing).To(BeTrue())
	for _, om := range oms {
		deleteAndWait(t, om)
	}
	g.Eventually(func() bool {
		_, ok := groupOf(spreadCluster, name)
		return ok
	}, timeout, interval).Should(BeFalse(), "the group of a MachineDeployment without machines is deleted")
}

func TestAnAffinityGroupNamedInTheSpecIsJoinedAndAMissingOneReported(t *testing.T) {
	g := NewWithT(t)
	tc := newPlacementCluster(t)
	admins := "admins-" + tc.ns // the suite's provider allows "admins-*"
	addAdminGroup(t, spreadCluster, admins)
	spec := vmSpec()
	spec.OVirtCluster = spreadCluster
	spec.Memory = &infrav1.Memory{SizeMB: 4096}
	spec.AffinityGroups = []string{admins}
	_, om := tc.newMachine(t, spec, ignitionConfig)
	got := eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: "True"})
	g.Expect(got.Status.AffinityGroups).To(ConsistOf(admins))
	grp, ok := groupOf(spreadCluster, admins)
	g.Expect(ok).To(BeTrue())
	g.Expect(grp.VMs).To(ConsistOf(got.Status.VMName))

	spec.AffinityGroups = []string{"admins-nowhere-" + tc.ns}
	_, missing := tc.newMachine(t, spec, ignitionConfig)
	got = eventuallyCondition(t, missing, condition{Type: infrav1.MachineOnCondition, Status: "False",
		Reason: infrav1.AffinityGroupNotFoundReason, Message: "admins-nowhere-" + tc.ns})
	_, running := sim.VMHost(got.Status.VMID)
	g.Expect(running).To(BeFalse(), "the VM does not start outside its group")

	// A group that exists but that the provider does not allow is not joined.
	other := "others-" + tc.ns
	addAdminGroup(t, spreadCluster, other)
	spec.AffinityGroups = []string{other}
	_, refused := tc.newMachine(t, spec, ignitionConfig)
	got = eventuallyCondition(t, refused, condition{Type: infrav1.MachineOnCondition, Status: "False",
		Reason: infrav1.AffinityGroupNotAllowedReason, Message: other})
	_, running = sim.VMHost(got.Status.VMID)
	g.Expect(running).To(BeFalse(), "the VM does not start")
	grp, ok = groupOf(spreadCluster, other)
	g.Expect(ok).To(BeTrue())
	g.Expect(grp.VMs).To(BeEmpty(), "nothing joined the group")
}
