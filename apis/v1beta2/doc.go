// Package v1beta2 contains the CAPOV API version v1beta2 of the infrastructure.cluster.x-k8s.io
// group: the OVirtProvider, OVirtCluster, OVirtMachine and OVirtMachineTemplate kinds.
//
// v1beta2 is the storage version and the conversion hub; the manager and the webhooks work on
// it. The types implement the Cluster API v1beta2 infrastructure-provider contract:
// status.initialization.provisioned, status.conditions in the metav1.Condition format (Ready,
// Paused and the lifecycle conditions) and, under status.deprecated.v1beta1, the v1beta1
// conditions and failure fields that v1beta1 clients still read. The spec JSON field names are
// those of v1beta1 and the product documentation.
//
// This package imports only Kubernetes API machinery and the Cluster API api module; it never
// imports controller-runtime.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1beta2
