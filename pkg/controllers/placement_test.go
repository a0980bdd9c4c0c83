package controllers

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

func placementCluster3() *infrav1.OVirtCluster {
	return &infrav1.OVirtCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "prod"},
		Spec: infrav1.OVirtClusterSpec{FailureDomains: []infrav1.OVirtFailureDomain{
			{Name: "fd-a", OVirtCluster: "ClusterA", StorageDomainName: "data-a"},
			{Name: "fd-b", OVirtCluster: "ClusterB", ControlPlane: ptr.To(false)},
		}},
	}
}

func placementMachine(labels map[string]string, mutate func(*infrav1.OVirtMachine)) *infrav1.OVirtMachine {
	om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "m", Labels: labels}}
	om.Spec.Provider, om.Spec.OVirtCluster, om.Spec.Template = "engine", "Default", "rhcos"
	om.Status.VMID = "vm-" + om.Name
	if mutate != nil {
		mutate(om)
	}
	return om
}

func TestTheControlPlaneIsKeptApartByDefaultAndWorkersOnlyOnRequest(t *testing.T) {
	g := NewWithT(t)
	oc := placementCluster3()
	cp := placementMachine(map[string]string{clusterv1.MachineControlPlaneLabel: ""}, nil)
	role, policy := affinityRole(cp, oc)
	g.Expect(role).To(Equal(infrav1.AffinityGroupRoleControlPlane))
	g.Expect(policy).To(Equal(infrav1.AntiAffinitySoft), "Soft is the default")

	oc.Spec.ControlPlaneAntiAffinity = infrav1.AntiAffinityNone
	role, _ = affinityRole(cp, oc)
	g.Expect(role).To(BeEmpty(), "None: no group")

	worker := placementMachine(map[string]string{clusterv1.MachineDeploymentNameLabel: "md-0", clusterv1.MachineSetNameLabel: "md-0-abc"}, nil)
	role, _ = affinityRole(worker, oc)
	g.Expect(role).To(BeEmpty(), "workers have no group unless their template asks")
	worker.Spec.AntiAffinity = infrav1.AntiAffinityHard
	role, policy = affinityRole(worker, oc)
	g.Expect(role).To(Equal("md/md-0"))
	g.Expect(policy).To(Equal(infrav1.AntiAffinityHard))

	set := placementMachine(map[string]string{clusterv1.MachineSetNameLabel: "ms-1"}, func(om *infrav1.OVirtMachine) { om.Spec.AntiAffinity = infrav1.AntiAffinitySoft })
	role, _ = affinityRole(set, oc)
	g.Expect(role).To(Equal("ms/ms-1"), "a MachineSet without a MachineDeployment gets its own group")
}

func TestTheGroupsOfTheMachinesAreOnePerRoleAndOVirtCluster(t *testing.T) {
	g := NewWithT(t)
	oc := placementCluster3()
	oc.Spec.ControlPlaneAntiAffinity = infrav1.AntiAffinityHard
	cpLabels := map[string]string{clusterv1.MachineControlPlaneLabel: ""}
	machines := []infrav1.OVirtMachine{
		*placementMachine(cpLabels, func(om *infrav1.OVirtMachine) { om.Spec.FailureDomain = "fd-a" }),
		*placementMachine(cpLabels, func(om *infrav1.OVirtMachine) { om.Status.FailureDomain = "fd-a" }),
		*placementMachine(cpLabels, func(om *infrav1.OVirtMachine) { om.Spec.FailureDomain = "fd-b" }),
		*placementMachine(cpLabels, nil),
		*placementMachine(map[string]string{clusterv1.MachineDeploymentNameLabel: "md-0"}, func(om *infrav1.OVirtMachine) {
			om.Spec.AntiAffinity = infrav1.AntiAffinitySoft
			om.Spec.Template = "ubuntu"
		}),
		// Not created yet: its failure domain (and so its oVirt cluster) is not resolved.
		*placementMachine(cpLabels, func(om *infrav1.OVirtMachine) {
			om.Spec.OVirtCluster = "NotYet"
			om.Status.VMID = ""
		}),
	}
	st := desiredPlacement(oc, machines)
	g.Expect(st.groups).To(Equal(map[groupKey]bool{
		{role: "control-plane", provider: "engine", ovirtCluster: "ClusterA"}: true,
		{role: "control-plane", provider: "engine", ovirtCluster: "ClusterB"}: true,
		{role: "control-plane", provider: "engine", ovirtCluster: "Default"}:  true,
		{role: "md/md-0", provider: "engine", ovirtCluster: "Default"}:        false,
	}))
	g.Expect(st.templates).To(Equal([]string{"rhcos", "ubuntu"}))
	g.Expect(st.providers).To(Equal([]string{"engine"}))
}

func TestGroupNamesAreValidAndCarryTheMarker(t *testing.T) {
	g := NewWithT(t)
	oc := placementCluster3()
	g.Expect(groupName(oc, "control-plane", "ClusterA")).To(Equal("capov-team-a-prod-control-plane-ClusterA"))
	g.Expect(groupName(oc, "md/md.0", "Rack 1")).To(Equal("capov-team-a-prod-md-md.0-Rack-1"), "only characters the Engine accepts")
	g.Expect(groupName(oc, "control-plane", "ClusterB")).NotTo(Equal(groupName(oc, "control-plane", "ClusterA")), "names are unique across the Engine")
	long := &infrav1.OVirtCluster{ObjectMeta: metav1.ObjectMeta{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("c", 63)}}
	a, b := groupName(long, "md/"+strings.Repeat("x", 60), "C"), groupName(long, "md/"+strings.Repeat("x", 59)+"y", "C")
	g.Expect(len(a)).To(BeNumerically("<=", maxGroupName))
	g.Expect(a).NotTo(Equal(b), "truncated names stay distinct")

	key := testKey(1)
	const group = "capov-team-a-prod-control-plane-Default"
	marker := groupMarker(oc, "mc-1", key, group)
	g.Expect(marker).To(MatchRegexp(`^capov ovirtcluster=team-a/prod management-cluster=mc-1 proof=[A-Za-z0-9_-]{22}$`))
	owns := func(description, mc string, key []byte) bool { return ownsGroup(description, oc, mc, key, group) }
	g.Expect(owns(marker+" keeps the control-plane VMs apart", "mc-1", key)).To(BeTrue())
	g.Expect(owns(marker+" keeps the control-plane VMs apart", "mc-1", nil)).To(BeTrue(), "its own management cluster needs no key")
	g.Expect(owns("made by hand", "mc-1", key)).To(BeFalse())
	g.Expect(owns("capov ovirtcluster=team-a/prod-2 x", "mc-1", key)).To(BeFalse(), "another cluster whose name starts the same")
	g.Expect(owns(marker+" "+"capov ovirtcluster=team-b/prod", "mc-1", key)).To(BeFalse(), "two markers prove nothing")
	// A cluster of the same namespace/name in another management cluster on the same Engine
	// (a tenant's, or a second installation's) never takes this one's groups for its own: before,
	// it changed their enforcement and deleted them with its own cluster.
	g.Expect(owns(marker, "mc-2", testKey(2))).To(BeFalse(), "another management cluster without the key")
	g.Expect(owns(marker, "mc-2", nil)).To(BeFalse())
	g.Expect(owns(groupMarker(oc, "mc-1", nil, group), "mc-2", key)).To(BeFalse(), "another management cluster's group without a proof")
	// The target of clusterctl move holds the moved key: the group is its own.
	g.Expect(owns(marker, "mc-2", key)).To(BeTrue(), "moved with its key")
	g.Expect(ownsGroup(marker, oc, "mc-2", key, "capov-team-a-prod-md-x-Default")).To(BeFalse(), "the proof names its group")
	g.Expect(owns("capov ovirtcluster=team-a/prod keeps the control-plane VMs apart", "mc-1", nil)).To(BeTrue(),
		"a group made before the marker named the management cluster")
}

func TestFailureDomainsArePublishedForClusterAPI(t *testing.T) {
	g := NewWithT(t)
	fds := publishedFailureDomains(placementCluster3())
	g.Expect(fds).To(Equal([]clusterv1.FailureDomain{
		{Name: "fd-a", ControlPlane: ptr.To(true), Attributes: map[string]string{"ovirtcluster": "ClusterA", "storagedomainname": "data-a"}},
		{Name: "fd-b", ControlPlane: ptr.To(false), Attributes: map[string]string{"ovirtcluster": "ClusterB"}},
	}))
	g.Expect(publishedFailureDomains(&infrav1.OVirtCluster{})).To(BeNil())
}

func TestHostNamesBecomeValidLabelValues(t *testing.T) {
	g := NewWithT(t)
	g.Expect(labelValue("host-1.example.com")).To(Equal("host-1.example.com"))
	g.Expect(labelValue("Host 2 (rack/3)")).To(Equal("Host-2--rack-3"))
	v := labelValue(strings.Repeat("h", 70) + ".example.com")
	g.Expect(len(v)).To(Equal(63))
	g.Expect(labelValue("-.-")).To(BeEmpty())
}
