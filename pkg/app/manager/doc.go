// Package manager wires the CAPOV controller manager: flags, logging, the controller-runtime
// manager with metrics and health endpoints, leader election, the oVirt client factory, the
// Cluster API ClusterCache and the OVirtProvider, OVirtCluster and OVirtMachine reconcilers.
package manager

// The metrics endpoint authenticates and authorizes scrapers through the API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Secrets: bootstrap data, kubeconfigs and credentials (see the chart's RBAC for how far each
// verb reaches).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;patch;update
