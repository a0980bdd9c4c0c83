package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// ClusterFinalizer is the finalizer the manager puts on OVirtClusters (product doc §7.2).
const ClusterFinalizer = "capovmachine.infrastructure.cluster.x-k8s.io"

// OVirtClusterSpec is the desired state of an OVirtCluster.
type OVirtClusterSpec struct {
	// controlPlaneEndpoint is the address of the workload cluster API server: a VIP or the
	// address of a load balancer in front of the control-plane machines. Cluster API copies
	// it to Cluster spec.controlPlaneEndpoint. It cannot be changed once set.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// controlPlaneEndpointFromPool is the IPAM pool the manager claims the control-plane
	// endpoint's address from when controlPlaneEndpoint.host is empty (a kube-vip VIP, for
	// example). The IPAddressClaim is owned by the OVirtCluster and released with it; the port is
	// controlPlaneEndpoint.port, or 6443. Cluster API copies the endpoint into the Cluster, and
	// the kubeadm bootstrap provider into the kubeadm configuration of every control-plane
	// machine, where a kube-vip static pod reads it (the kube-vip flavor).
	// +optional
	ControlPlaneEndpointFromPool *IPPoolReference `json:"controlPlaneEndpointFromPool,omitempty"`

	// provider is the OVirtProvider the manager uses for what belongs to the cluster rather than
	// to one machine: checking the failure domains and keeping the affinity groups. Empty: the
	// provider of the cluster's machines (the checks of the failure domains then wait for the
	// first machine).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Provider string `json:"provider,omitempty"`

	// failureDomains are the Cluster API failure domains of the cluster, each an oVirt cluster
	// (and optionally a storage domain). They are published in status.failureDomains, over which
	// KubeadmControlPlane spreads the control plane; a Machine with spec.failureDomain gets its VM
	// in that domain's oVirt cluster.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	FailureDomains []OVirtFailureDomain `json:"failureDomains,omitempty"`

	// controlPlaneAntiAffinity keeps the control-plane VMs on different oVirt hosts with a
	// negative VM affinity group per oVirt cluster: Soft (the default) spreads them as far as the
	// hosts allow, Hard makes oVirt refuse to start a VM that would share a host, None creates
	// no group.
	// +optional
	// +kubebuilder:default=Soft
	ControlPlaneAntiAffinity AntiAffinityPolicy `json:"controlPlaneAntiAffinity,omitempty"`

	// tags are oVirt tags, by name, assigned to every VM of the cluster besides the machine's
	// own spec.tags (backup and inventory tools select VMs by tag). A tag added here is assigned
	// to the running VMs too, within a sync period; a tag removed here stays on the VMs that have
	// it (CAPOV never removes a tag).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=50
	Tags []string `json:"tags,omitempty"`
}

// OVirtClusterInitializationStatus reports the initial provisioning of the cluster
// infrastructure (Cluster API v1beta2 contract).
// +kubebuilder:validation:MinProperties=1
type OVirtClusterInitializationStatus struct {
	// provisioned is true once the infrastructure of the cluster is provisioned. It stays true.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// OVirtClusterStatus is the observed state of an OVirtCluster.
type OVirtClusterStatus struct {
	// conditions are Ready (mirrored by Cluster API into the Cluster's InfrastructureReady),
	// Paused, ClusterReady, FailureDomainsReady and AffinityGroupsReady.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization is the initial provisioning of the cluster infrastructure.
	// +optional
	Initialization OVirtClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// failureDomains are the failure domains of spec.failureDomains, published for Cluster API
	// (the Cluster's status.failureDomains).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// affinityGroups are the oVirt affinity groups the manager created for the cluster.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	AffinityGroups []OVirtAffinityGroup `json:"affinityGroups,omitempty"`

	// deprecated groups the fields of the v1beta1 API version that Cluster API no longer reads.
	// +optional
	Deprecated *DeprecatedStatus `json:"deprecated,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ovirtclusters,scope=Namespaced,shortName=capovc,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1beta1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1beta2"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-ovirt"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:printcolumn:name="ControlPlane Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="Control-plane endpoint host"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status",description="Infrastructure ready"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster API Cluster"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Failure Domains",type="string",JSONPath=".status.failureDomains[*].name",priority=1,description="Failure domains"
// +kubebuilder:printcolumn:name="Anti-Affinity",type="string",JSONPath=".spec.controlPlaneAntiAffinity",priority=1,description="Control-plane anti-affinity"

// OVirtCluster is the infrastructure of one Cluster API cluster in oVirt. The Cluster references
// it in spec.infrastructureRef.
type OVirtCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +optional
	Spec OVirtClusterSpec `json:"spec,omitempty"`
	// status is the observed state.
	// +optional
	Status OVirtClusterStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions (metav1.Condition).
func (c *OVirtCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the conditions.
func (c *OVirtCluster) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// GetV1Beta1Conditions returns the deprecated v1beta1 conditions.
func (c *OVirtCluster) GetV1Beta1Conditions() clusterv1.Conditions {
	if c.Status.Deprecated == nil || c.Status.Deprecated.V1Beta1 == nil {
		return nil
	}
	return c.Status.Deprecated.V1Beta1.Conditions
}

// SetV1Beta1Conditions replaces the deprecated v1beta1 conditions.
func (c *OVirtCluster) SetV1Beta1Conditions(conds clusterv1.Conditions) {
	c.Status.Deprecated = setV1Beta1Conditions(c.Status.Deprecated, conds)
}

// Hub marks v1beta2 as the conversion hub.
func (*OVirtCluster) Hub() {}

// setV1Beta1Conditions sets the deprecated v1beta1 conditions, allocating the structs on demand.
func setV1Beta1Conditions(d *DeprecatedStatus, conds clusterv1.Conditions) *DeprecatedStatus {
	if d == nil {
		d = &DeprecatedStatus{}
	}
	if d.V1Beta1 == nil {
		d.V1Beta1 = &V1Beta1DeprecatedStatus{}
	}
	d.V1Beta1.Conditions = conds
	return d
}

// +kubebuilder:object:root=true

// OVirtClusterList is a list of OVirtClusters.
type OVirtClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the OVirtClusters.
	Items []OVirtCluster `json:"items"`
}
