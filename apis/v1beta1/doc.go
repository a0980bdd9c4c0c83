// Package v1beta1 contains the CAPOV API: the OVirtProvider, OVirtCluster, OVirtMachine and
// OVirtMachineTemplate kinds of the infrastructure.cluster.x-k8s.io group, version v1beta1.
//
// The types implement the Cluster API v1beta1 infrastructure-provider contract: status.ready,
// status.failureReason/failureMessage and CAPI conditions with a severity, plus
// status.v1beta2.conditions so that CAPI mirrors the Ready reason losslessly.
//
// This package imports only Kubernetes API machinery and the Cluster API api module; it never
// imports controller-runtime, so that consumers of the types do not pull in a controller stack.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1beta1
