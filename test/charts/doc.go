// Package charts tests the Helm charts (charts/capov-crds, charts/capov) and the clusterctl
// assets (metadata.yaml, config/default, templates/): helm lint, rendering with the Helm SDK,
// installation into a real API server (envtest), drift against the generated manifests in
// config/, and clusterctl generate. Everything runs offline: helm and clusterctl are built from
// the pinned Go modules by hack/helm.sh and hack/clusterctl.sh, the cert-manager and
// ServiceMonitor CRDs come from their Go modules.
package charts
