// Package v1beta1 contains the CAPOV API version v1beta1 of the infrastructure.cluster.x-k8s.io
// group: the OVirtProvider, OVirtCluster, OVirtMachine and OVirtMachineTemplate kinds in the
// shape of the product documentation.
//
// v1beta1 is still served and converted losslessly to and from v1beta2, the storage version and
// conversion hub (zz_generated.conversion.go, conversion.go). It implements the Cluster API
// v1beta1 contract: status.ready, status.failureReason/failureMessage, conditions with a severity
// and status.v1beta2.conditions. It is frozen: new fields go to v1beta2.
//
// This package imports only Kubernetes API machinery and the v1beta2 package: the few Cluster API
// v1beta1 types it uses are local copies (capi_types.go), so that it keeps building after Cluster
// API removes its v1beta1 API (v1.16).
//
// +kubebuilder:object:generate=true
// +k8s:conversion-gen=github.com/capov/capov/apis/v1beta2
// +groupName=infrastructure.cluster.x-k8s.io
package v1beta1
