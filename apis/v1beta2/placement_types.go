package v1beta2

// Placement: failure domains over oVirt clusters and VM affinity groups (docs/operations.md,
// "Failure domains and anti-affinity").

// AntiAffinityPolicy says whether the VMs of one group are kept on different oVirt hosts, with a
// negative VM affinity group of oVirt.
// +kubebuilder:validation:Enum=None;Soft;Hard
type AntiAffinityPolicy string

// The anti-affinity policies.
const (
	// AntiAffinityNone: no affinity group; the oVirt scheduler may put the VMs on one host.
	AntiAffinityNone AntiAffinityPolicy = "None"
	// AntiAffinitySoft: a non-enforcing negative group. The scheduler spreads the VMs over hosts
	// as far as it can and still starts a VM on a host that already runs one of the group.
	AntiAffinitySoft AntiAffinityPolicy = "Soft"
	// AntiAffinityHard: an enforcing negative group. oVirt refuses to start a VM that would share
	// a host with another VM of the group (MachineOn False, reason AffinityRulesUnsatisfiable).
	AntiAffinityHard AntiAffinityPolicy = "Hard"
)

// OrDefault returns the policy, or def when it is empty.
func (p AntiAffinityPolicy) OrDefault(def AntiAffinityPolicy) AntiAffinityPolicy {
	if p == "" {
		return def
	}
	return p
}

// MaxFailureDomains is the most failure domains an OVirtCluster declares.
const MaxFailureDomains = 32

// OVirtFailureDomain is one Cluster API failure domain of an OVirtCluster: an oVirt cluster and,
// optionally, a storage domain for the disks of the VMs placed in it.
type OVirtFailureDomain struct {
	// name is the failure domain name that Cluster API's Machine spec.failureDomain carries
	// (KubeadmControlPlane and MachineDeployments set it).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// ovirtcluster is the oVirt cluster the VMs of this failure domain are created in. It
	// replaces the machine's spec.ovirtcluster.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	OVirtCluster string `json:"ovirtcluster"`

	// storagedomainname is the storage domain for the disks of the VMs of this failure domain.
	// It replaces the machine's spec.storagedomainname, with the same clone rules: another domain
	// than the template's requires diskclone. Empty: the machine's.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	StorageDomainName string `json:"storagedomainname,omitempty"`

	// controlPlane says whether control-plane machines may be placed in this failure domain.
	// Empty: true.
	// +optional
	ControlPlane *bool `json:"controlPlane,omitempty"`
}

// IsControlPlane returns controlPlane, true when unset.
func (d OVirtFailureDomain) IsControlPlane() bool { return d.ControlPlane == nil || *d.ControlPlane }

// AffinityGroupRoleControlPlane is the role of the control-plane affinity group of a cluster;
// the group of a MachineDeployment has the role "md/<MachineDeployment name>".
const AffinityGroupRoleControlPlane = "control-plane"

// OVirtAffinityGroup is an oVirt affinity group that the manager created for a cluster. The
// manager deletes it when no machine needs it any more, and the last ones with the cluster.
type OVirtAffinityGroup struct {
	// role is what the group keeps apart: "control-plane" or "md/<MachineDeployment name>".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Role string `json:"role"`

	// provider is the OVirtProvider of the Engine that holds the group.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Provider string `json:"provider"`

	// ovirtcluster is the name of the oVirt cluster the group belongs to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	OVirtCluster string `json:"ovirtcluster"`

	// ovirtclusterID is the id of that oVirt cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	OVirtClusterID string `json:"ovirtclusterID,omitempty"`

	// name is the name of the group in oVirt.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Name string `json:"name"`

	// id is the id of the group in oVirt.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id,omitempty"`

	// enforcing is true for a Hard policy.
	// +optional
	Enforcing bool `json:"enforcing,omitempty"`
}

// HostLabel is the Machine label that names the oVirt host of the VM; Cluster API copies the
// labels of the node.cluster.x-k8s.io domain from the Machine to the Node.
const HostLabel = "node.cluster.x-k8s.io/ovirt-host"

// Conditions of the OVirtCluster about placement.
const (
	// FailureDomainsReadyCondition is True when every failure domain of spec.failureDomains
	// names an oVirt cluster (and storage domain) that exists, and the oVirt templates of the
	// cluster's machines can be used in it. The message names each domain that is not usable.
	// Not set when the cluster declares no failure domain.
	FailureDomainsReadyCondition = "FailureDomainsReady"

	// AffinityGroupsReadyCondition is True when the affinity groups the cluster's machines need
	// exist in oVirt (status.affinityGroups). Not set when no machine needs one.
	AffinityGroupsReadyCondition = "AffinityGroupsReady"
)

// Reasons of FailureDomainsReady and AffinityGroupsReady.
const (
	// FailureDomainNotUsableReason: a failure domain's oVirt cluster or storage domain does not
	// exist, or a template of the cluster's machines is not in its data center.
	FailureDomainNotUsableReason = "FailureDomainNotUsable"
	// WaitingForProviderReason: spec.provider is empty and the cluster has no machine yet whose
	// provider the manager could use.
	WaitingForProviderReason = "WaitingForProvider"
	// AffinityGroupFailedReason: oVirt refused to create, change or delete an affinity group;
	// the message has its answer.
	AffinityGroupFailedReason = "AffinityGroupFailed"
	// AffinityGroupNameTakenReason: an affinity group with the manager's name exists in the
	// oVirt cluster but was not made for this cluster (its description carries another owner).
	// The manager does not touch it.
	AffinityGroupNameTakenReason = "AffinityGroupNameTaken"
)

// Reasons of the OVirtMachine conditions about placement.
const (
	// FailureDomainNotFoundReason (MachineCreated): the Machine's spec.failureDomain is not one
	// of the OVirtCluster's spec.failureDomains; the message lists the valid names.
	FailureDomainNotFoundReason = "FailureDomainNotFound"
	// TemplateNotInFailureDomainReason (MachineCreated): the template is in another data center
	// than the failure domain's oVirt cluster.
	TemplateNotInFailureDomainReason = "TemplateNotInFailureDomain"
	// WaitingForAffinityGroupReason (MachineOn): the VM waits for its affinity group before it
	// first starts, so that oVirt places it by the group's rule.
	WaitingForAffinityGroupReason = "WaitingForAffinityGroup"
	// AffinityGroupNotFoundReason (MachineOn): a group of spec.affinityGroups does not exist in
	// the VM's oVirt cluster.
	AffinityGroupNotFoundReason = "AffinityGroupNotFound"
	// AffinityGroupNotAllowedReason (MachineOn): a group of spec.affinityGroups is not among
	// the provider's spec.allowedAffinityGroups, or is one of CAPOV's own groups: the VM joins
	// nothing and does not start.
	AffinityGroupNotAllowedReason = "AffinityGroupNotAllowed"
	// CAPOVAffinityGroupPrefix begins the names of the affinity groups CAPOV creates
	// ("capov-<namespace>-<cluster>-<role>-<ovirt cluster>"): spec.affinityGroups cannot name
	// them.
	CAPOVAffinityGroupPrefix = "capov-"
	// AffinityRulesUnsatisfiableReason (MachineOn): oVirt refused to start the VM because no
	// host satisfies its enforcing affinity groups (a Hard anti-affinity with fewer hosts than
	// VMs); the message has the Engine's answer. CAPOV retries; a host coming up, or the policy
	// relaxed to Soft, lets the VM start.
	AffinityRulesUnsatisfiableReason = "AffinityRulesUnsatisfiable"
)
