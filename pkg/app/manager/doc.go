// Package manager wires the CAPOV controller manager: flags, logging, the controller-runtime
// manager with metrics and health endpoints, leader election, the oVirt client factory, the
// Cluster API ClusterCache and the OVirtProvider, OVirtCluster and OVirtMachine reconcilers.
package manager

// The metrics endpoint authenticates and authorizes scrapers through the API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Secrets. Everywhere get: the bootstrap data Secret of a Machine is read with the uncached
// API reader, the <cluster>-kubeconfig Secret by the ClusterCache's uncached Secret client, one
// named Secret at a time. The rest only in --credentials-namespace ("system" becomes the
// operator namespace in config/default; the chart renders the same Role there): the manager's
// cache of Secrets is limited to that namespace (list, watch), and there the OVirtProvider
// reconciler removes an earlier release's owner reference from a credentials Secret (patch),
// keeps the move copy of each (create, update, delete) and recreates a credentials Secret from
// the copy that came with clusterctl move (create). Outside that namespace one write: the
// ownership key of a workload cluster, "<cluster>-capov-ownership" in the cluster's namespace,
// created once before the cluster's first VM (create; docs/operations.md "The ownership proof").
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;list;watch;create;patch;update;delete
