// Package chaos runs faults against the whole CAPOV stack and checks its safety invariants
// while they happen. The stack is test/harness's: the manager and webhook binaries as
// processes, kube-apiserver and etcd (envtest) as management and workload clusters, Cluster
// API's own core reconcilers, and the oVirt simulator (test/ovirtsim) in the test process, where
// the suite injects faults and inspects every VM, disk and request.
//
// A seeded Driver creates and deletes Clusters, Machines (with bootstrap data Secrets) and
// MachineDeployment replicas while a Scenario applies one fault (or, in "mixed", several); a
// Watcher checks the invariants continuously:
//
//	I1 at most one VM per machine (by the owner marker in the VM comment)
//	I2 no write to a VM that does not carry our marker at that moment
//	I3 no out-of-band (CSI) disk ever deleted
//	I4 no VM left without an OVirtMachine at the end (except a moved one), no affinity
//	   group left without its OVirtCluster, and no IPAddressClaim left without its machine
//	I5 every finalizer drops within a bound after the fault heals
//	I6 per-path oVirt call-rate ceilings hold during the fault
//	I7 planted sentinels (Engine password, SSO tokens, bootstrap data) never appear in logs,
//	   events, conditions or /metrics
//	I8 goroutines, open file descriptors and in-flight oVirt calls return to baseline
//
// `make chaos` runs every scenario for CHAOS_SEEDS seeds and rewrites docs/reliability.md;
// `make chaos-short` (part of `make test`) runs a subset for one seed. Without CHAOS set the
// test skips. See docs/reliability.md for the knobs and how to reproduce a seed.
package chaos
