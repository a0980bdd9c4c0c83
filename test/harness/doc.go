// Package harness starts and drives CAPOV for integration tests, the conformance suite, the
// demo and the benchmarks: it builds the binaries, runs them as separate processes against a
// kubeconfig, and creates the Cluster API objects a real installation would get from CAPI's
// controllers (Cluster, Machine, bootstrap data, kubeconfig Secret) plus a tiny "kubelet" that
// registers Nodes for running VMs.
package harness
