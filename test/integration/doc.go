// Package integration tests the manager binary end to end without Cluster API's controllers:
// a real kube-apiserver (envtest) that is both the management and the workload cluster, the
// oVirt simulator reached over HTTPS by the real go-ovirt SDK, and the manager running as a
// separate process, as in production. The tests create what CAPI would (Cluster, Machine,
// bootstrap data, kubeconfig Secret) and act as kubelet by registering Nodes.
package integration
