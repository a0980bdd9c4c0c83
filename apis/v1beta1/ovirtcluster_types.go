package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterFinalizer is the finalizer the manager puts on OVirtClusters (product doc §7.2).
const ClusterFinalizer = "capovmachine.infrastructure.cluster.x-k8s.io"

// OVirtClusterSpec is the desired state of an OVirtCluster.
type OVirtClusterSpec struct {
	// controlPlaneEndpoint is the address of the workload cluster API server: a VIP or the
	// address of a load balancer in front of the control-plane machines. Cluster API copies
	// it to Cluster spec.controlPlaneEndpoint. It cannot be changed once set.
	// +optional
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitzero"`
}

// OVirtClusterStatus is the observed state of an OVirtCluster.
type OVirtClusterStatus struct {
	// ready is true once the infrastructure of the cluster is provisioned (Cluster API contract).
	// +optional
	Ready bool `json:"ready"`

	// failureReason is a short machine-readable reason for a terminal problem.
	// +optional
	FailureReason *string `json:"failureReason,omitempty"`

	// failureMessage explains failureReason for a human.
	// +optional
	FailureMessage *string `json:"failureMessage,omitempty"`

	// conditions are the CAPI v1beta1 conditions of the cluster.
	// +optional
	Conditions Conditions `json:"conditions,omitempty"`

	// v1beta2 groups the conditions in the metav1.Condition format that Cluster API v1beta2
	// consumers read first.
	// +optional
	V1Beta2 *OVirtV1Beta2Status `json:"v1beta2,omitempty"`
}

// OVirtV1Beta2Status holds conditions in the metav1.Condition format (CAPI v1beta2 conditions).
type OVirtV1Beta2Status struct {
	// conditions represent the observations of the object in the metav1.Condition format.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ovirtclusters,scope=Namespaced,shortName=capovc,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1beta1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-ovirt"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:printcolumn:name="ControlPlane Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="Control-plane endpoint host"
// +kubebuilder:printcolumn:name="Ready",type="boolean",JSONPath=".status.ready",description="Infrastructure ready"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster API Cluster"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

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

// GetConditions returns the CAPI v1beta1 conditions.
func (c *OVirtCluster) GetConditions() Conditions { return c.Status.Conditions }

// SetConditions replaces the CAPI v1beta1 conditions.
func (c *OVirtCluster) SetConditions(conds Conditions) { c.Status.Conditions = conds }

// GetV1Beta2Conditions returns the metav1 conditions.
func (c *OVirtCluster) GetV1Beta2Conditions() []metav1.Condition {
	if c.Status.V1Beta2 == nil {
		return nil
	}
	return c.Status.V1Beta2.Conditions
}

// SetV1Beta2Conditions replaces the metav1 conditions.
func (c *OVirtCluster) SetV1Beta2Conditions(conds []metav1.Condition) {
	if c.Status.V1Beta2 == nil {
		c.Status.V1Beta2 = &OVirtV1Beta2Status{}
	}
	c.Status.V1Beta2.Conditions = conds
}

// +kubebuilder:object:root=true

// OVirtClusterList is a list of OVirtClusters.
type OVirtClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the OVirtClusters.
	Items []OVirtCluster `json:"items"`
}
