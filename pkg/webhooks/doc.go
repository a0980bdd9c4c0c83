// Package webhooks holds CAPOV's admission rules: one typed defaulter/validator per kind
// (OVirtProvider, OVirtCluster, OVirtMachine, OVirtMachineTemplate) built on controller-runtime's
// admission.Defaulter[T] and admission.Validator[T], and the pure functions they call.
//
// The rules never talk to oVirt: everything they decide is a function of the admitted object,
// the object it replaces, the feature gates, the OVirtProvider that machines, templates and
// clusters name (read from a cache) and, for a machine's spec.failureDomain, its Cluster API
// Cluster and OVirtCluster (read uncached). Every denial is an apierrors.NewInvalid whose causes
// carry the full field path and say how to fix the value; non-fatal findings are admission
// warnings.
//
// The +kubebuilder:webhook markers in this package generate config/webhook/manifests.yaml
// (make generate).
package webhooks
