package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// OVirtClusterTemplateResource is the template of the OVirtCluster that Cluster API's topology
// controller creates for a Cluster of a ClusterClass.
type OVirtClusterTemplateResource struct {
	// metadata holds the labels and annotations copied to the OVirtCluster.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the spec of the OVirtCluster. controlPlaneEndpoint is usually left empty here:
	// ClusterClass patches set it from a variable, or controlPlaneEndpointFromPool claims it.
	// +required
	Spec OVirtClusterSpec `json:"spec"`
}

// OVirtClusterTemplateSpec is the desired state of an OVirtClusterTemplate.
type OVirtClusterTemplateSpec struct {
	// template is the cluster template. It cannot be changed: Cluster API's topology controller
	// rolls a change out through a new template referenced by the ClusterClass.
	// +required
	Template OVirtClusterTemplateResource `json:"template"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ovirtclustertemplates,scope=Namespaced,shortName=capovct,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1beta2"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-ovirt"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:printcolumn:name="Provider",type="string",JSONPath=".spec.template.spec.provider",description="OVirtProvider"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// OVirtClusterTemplate is the template of OVirtClusters, referenced by a ClusterClass in
// spec.infrastructure.templateRef (the InfraClusterTemplate contract of Cluster API). It is
// immutable.
type OVirtClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the template.
	// +required
	Spec OVirtClusterTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// OVirtClusterTemplateList is a list of OVirtClusterTemplates.
type OVirtClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the OVirtClusterTemplates.
	Items []OVirtClusterTemplate `json:"items"`
}
