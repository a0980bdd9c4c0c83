package v1beta2

// ProviderFinalizer is the finalizer the manager puts on every OVirtProvider: it stays while an
// OVirtMachine names the provider (spec.provider), because deleting those machines removes their
// VMs through it, and is removed once none does. An OVirtProvider annotated
// clusterctl.cluster.x-k8s.io/delete-for-move loses it at once.
const ProviderFinalizer = "capov.infrastructure.cluster.x-k8s.io/provider-in-use"

// Conditions of OVirtProvider besides CanConnectToOVirt and Ready. Neither is part of the Ready
// summary: `kubectl get capovp` READY still says only whether the Engine answers.
const (
	// TLSVerifiedCondition says whether the manager verifies the Engine's certificate. True with
	// reason SystemCA or CustomCA; False with reason InsecureSkipVerify (spec.tls.insecure: true,
	// severity Warning), PlainHTTP (an http:// spec.engine, refused) or InvalidTLSConfig.
	TLSVerifiedCondition = "TLSVerified"

	// DeletingCondition is True while an OVirtProvider is being deleted and its deletion waits,
	// with reason InUse while OVirtMachines still name it.
	DeletingCondition = "Deleting"
)

// Reasons of TLSVerified.
const (
	// SystemCAReason: the Engine certificate is verified against the system CA pool (no
	// spec.tls.certs).
	SystemCAReason = "SystemCA"
	// CustomCAReason: the Engine certificate is verified against the CAs of spec.tls.certs only.
	CustomCAReason = "CustomCA"
	// InsecureSkipVerifyReason: spec.tls.insecure is true, so the Engine certificate is not
	// verified and anyone on the network path can pose as the Engine and read the password.
	InsecureSkipVerifyReason = "InsecureSkipVerify"
	// PlainHTTPReason: spec.engine is an http:// URL. It is refused (CanConnectToOVirt reports
	// InvalidEngineURL): the password would travel in clear text.
	PlainHTTPReason = "PlainHTTP"
)

// Reasons of Deleting.
const (
	// InUseReason: OVirtMachines still name the OVirtProvider; the message names up to ten of
	// them and gives their count. The deletion continues once they are gone.
	InUseReason = "InUse"
)
