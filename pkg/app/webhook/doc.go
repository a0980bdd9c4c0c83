// Package webhook wires the CAPOV admission webhook server: a controller-runtime manager that
// serves the mutating and validating webhooks of every OVirt* kind and nothing else (no
// controllers, no leader election, no oVirt client).
package webhook

// The webhook reads OVirtProviders (diskclone and storage-domain defaults, allowedNamespaces)
// and Namespaces (their labels, for spec.allowedNamespaces.selector) through a read-only cache,
// and lists OVirtMachines uncached when an OVirtProvider is deleted or its allowedNamespaces
// change (to name the machines that still use it). It gets a Cluster API Cluster and the
// OVirtCluster it names uncached, for an OVirtMachine whose spec.failureDomain is set (to check
// it against the OVirtCluster's failure domains); nothing else, in particular no Secrets.
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtproviders,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtmachines,verbs=list
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtclusters,verbs=get
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get

// The metrics endpoint authenticates and authorizes scrapers through the API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
