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

// OrphanedVMsCondition reports the orphaned VMs of the provider's Engine (VMs with this
// management cluster's owner marker and no OVirtMachine; see spec.orphanedVMs). False with
// reason NoOrphanedVMs; True with reason OrphanedVMsFound (Report), OrphanedVMsDeleting (Delete:
// the message says when each will be removed) or OrphanedVMsNotDeletable (Delete, but a VM
// carries a non-system disk, is not down, or removal waits for the heartbeat); with reason
// ManagementClusterIDConflict (True or False) while another live management cluster uses this
// id. The message gives the count and names the first VMs. Unknown with
// reason InventoryPending until the first inventory finished. It is not part of the Ready
// summary.
const OrphanedVMsCondition = "OrphanedVMs"

// Reasons of OrphanedVMs.
const (
	// NoOrphanedVMsReason: every VM with this management cluster's owner marker has its
	// OVirtMachine.
	NoOrphanedVMsReason = "NoOrphanedVMs"
	// OrphanedVMsFoundReason: orphaned VMs exist and spec.orphanedVMs is Report.
	OrphanedVMsFoundReason = "OrphanedVMsFound"
	// OrphanedVMsDeletingReason: orphaned VMs exist and spec.orphanedVMs is Delete: each is
	// removed once its grace period has passed.
	OrphanedVMsDeletingReason = "OrphanedVMsDeleting"
	// OrphanedVMsNotDeletableReason: spec.orphanedVMs is Delete, but an orphaned VM has a disk
	// that is not a system disk attached (a CSI volume): it is left alone until the disk is
	// detached.
	OrphanedVMsNotDeletableReason = "OrphanedVMsNotDeletable"
	// ManagementClusterIDConflictReason: another live management cluster uses this one's
	// management cluster id (it writes the heartbeat tag of this id in the Engine): orphaned VMs
	// are not removed, whatever spec.orphanedVMs says, until ten inventories in a row see no such
	// write. The status is True when orphaned VMs exist.
	ManagementClusterIDConflictReason = "ManagementClusterIDConflict"
	// InventoryPendingReason: the first inventory of the Engine has not finished.
	InventoryPendingReason = "InventoryPending"
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

// The move copy of a credentials Secret. clusterctl move carries a Secret only when a moved
// object owns it, and the garbage collector deletes an owned Secret with its owner: so the
// manager never owns the Secret that spec.credentialsSecretName names, and keeps beside it a copy
// that the provider owns. clusterctl copies that one with the provider (cluster-scoped, its CRD
// carries clusterctl.cluster.x-k8s.io/move-hierarchy) and leaves it in the source; in the target
// the manager recreates the named Secret from it. The copy goes with its provider.
const (
	// CredentialsMoveCopyLabel marks a Secret as the move copy of the credentials of the
	// OVirtProvider that owns it; its value is empty.
	CredentialsMoveCopyLabel = "capov.infrastructure.cluster.x-k8s.io/credentials-move-copy"
	// CredentialsCopyOfAnnotation names the Secret (spec.credentialsSecretName) the copy was made
	// from.
	CredentialsCopyOfAnnotation = "capov.infrastructure.cluster.x-k8s.io/copy-of"
	// CredentialsCopiedForAnnotation is the UID of the OVirtProvider the copy was written for.
	// A copy whose owner has another UID was carried here (clusterctl move rewrites the owner
	// reference, not this annotation): only such a copy recreates a missing Secret.
	CredentialsCopiedForAnnotation = "capov.infrastructure.cluster.x-k8s.io/copied-for-uid"
)
