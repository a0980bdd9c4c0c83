// Package clusterctlupgrade tests installing and upgrading CAPOV as an operator does it with
// clusterctl, modelled on Cluster API's test/e2e/clusterctl_upgrade.go: a local clusterctl
// repository holds Cluster API's core and kubeadm components (built with kustomize from the
// module go.mod pins), CAPOV's previous release v0.2.0 (config/default and metadata.yaml at
// commit previousRelease) and this tree's version, and cert-manager's manifest, which is
// cert-manager's own CRDs plus the tests' stand-in (test/certmanager). `clusterctl init`
// installs cert-manager and the providers into an envtest API server, where the stand-in runs
// as a process and issues the components' Certificates and injects their CA bundles; then
// `clusterctl upgrade apply` moves the infrastructure provider to this version.
//
// envtest runs no pods: the components' Deployments never start, so what is checked is what
// clusterctl and cert-manager do to the management cluster (inventory, CRDs, certificates,
// CA injection), not the controllers' behaviour after the upgrade (test/upgrade does that for
// the charts with the binaries as processes).
package clusterctlupgrade
