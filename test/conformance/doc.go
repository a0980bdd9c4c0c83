// Package conformance lets Cluster API drive CAPOV end to end: Cluster API's own core
// reconcilers (Cluster, Machine, MachineSet, MachineDeployment) run next to the CAPOV manager
// and webhook binaries against a real kube-apiserver, with the oVirt simulator as oVirt and a
// second kube-apiserver as the workload cluster. The specs assert what Cluster API itself
// reports, not only CAPOV's objects. Run it with `make conformance`.
package conformance
