// Package clusterctlupgrade tests installing and upgrading CAPOV as an operator does it, with
// clusterctl and with Helm, modelled on Cluster API's test/e2e/clusterctl_upgrade.go. A local
// clusterctl repository holds Cluster API's core and kubeadm components (built with kustomize
// from the module go.mod pins), CAPOV's previous release v0.2.0 (config/default and
// metadata.yaml at commit previousRelease) and this tree's version, and cert-manager's manifest,
// which is cert-manager's own CRDs plus the tests' stand-in (test/certmanager). `clusterctl
// init` installs cert-manager and the providers into an envtest API server, where the stand-in
// runs as a process and issues the components' Certificates and injects their CA bundles.
//
// envtest runs no pods, so what the Deployments would run runs as processes with their flags:
// v0.2.0's manager and webhook (built from the history, harness.BuildRelease), Cluster API's
// core reconcilers (test/capi), the oVirt simulator and the kubelet stand-in. CAPOV's webhook
// configurations and CRD conversion are pointed at the webhook process
// (harness.UseWebhookProcess); Cluster API's webhook configurations are deleted after init: no
// process serves them, the tests' objects are valid, and its conversion webhooks are never
// called because everything is read at the stored v1beta2. No kubeadm provider runs: the
// bootstrap data comes from Secrets (docs/examples). A cluster runs until every Machine is
// Running with a Node; then `clusterctl upgrade apply` (or `helm upgrade` of both charts) moves
// CAPOV to this tree and this tree's binaries replace the processes, and nothing may change:
// no Machine replaced, no VM written, everything Ready and readable in v1beta1 and v1beta2.
// The clusterctl run then moves the cluster with `clusterctl move` to a second envtest API
// server that `clusterctl init` gave this version, where nothing runs: the objects must arrive,
// leave the source (but for the cluster-scoped OVirtProvider and its hierarchy, which clusterctl
// copies) and no VM may be written.
//
// Not covered here: pods, Cluster API's webhooks, a manager adopting the moved cluster, the real
// node (docs/architecture.md, "The install and upgrade scenario on envtest").
package clusterctlupgrade
