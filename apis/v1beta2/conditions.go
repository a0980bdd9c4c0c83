package v1beta2

// Condition types (status.conditions, metav1.Condition). Each OVirtMachine lifecycle step
// reports one condition (product doc §4.3, §5.3) with the same type and reasons as in v1beta1;
// Ready summarises them and Paused says whether CAPOV acts. The same steps are also kept in the
// v1beta1 format, with a severity, under status.deprecated.v1beta1.conditions.
const (
	// CanConnectToOVirtCondition is True when the Engine of the OVirtProvider answered with the
	// configured credentials. Set on OVirtProvider and on every OVirtMachine that uses it.
	CanConnectToOVirtCondition = "CanConnectToOVirt"

	// MachineCreatedCondition is True once the VM exists in oVirt and has left image_locked.
	// False while the Cluster infrastructure or the bootstrap data is not ready, while oVirt
	// creates the VM, or when the template, oVirt cluster or storage domain cannot be found.
	MachineCreatedCondition = "MachineCreated"

	// MachineDiskResizedCondition is True once the OS disk has spec.osdisksizegb (or the
	// template size) and the disk aliases follow the disk feature gates.
	// False while oVirt extends the disk, or when the requested size is smaller than the
	// template disk (disks cannot shrink).
	MachineDiskResizedCondition = "MachineDiskResized"

	// MachineNetworkSetCondition is True once the VM NICs match spec.nics.
	// False when a vNIC profile of spec.nics[].vnicprofile does not exist in the oVirt cluster.
	MachineNetworkSetCondition = "MachineNetworkSet"

	// MachineOnCondition is True once the VM is up. False with reason VMPoweringUp (severity
	// Info) while it boots.
	MachineOnCondition = "MachineOn"

	// K8sProviderIDSetupCondition is True once the workload-cluster Node of the VM carries
	// spec.providerID. False while the Node has not registered or the workload cluster cannot
	// be reached.
	K8sProviderIDSetupCondition = "K8sProviderIDSetup"

	// MachineDeletedCondition is set during deletion. False with reason VMHasNonSystemDisk while
	// a non-system (CSI) disk is attached to the VM; CAPOV retries every minute.
	MachineDeletedCondition = "MachineDeleted"

	// ClusterReadyCondition is set on OVirtCluster once its infrastructure is ready.
	ClusterReadyCondition = "ClusterReady"
)

// Reasons of CanConnectToOVirt (OVirtProvider and OVirtMachine).
const (
	// ProviderNotFoundReason: spec.provider names an OVirtProvider that does not exist.
	ProviderNotFoundReason = "ProviderNotFound"
	// InvalidEngineURLReason: OVirtProvider spec.engine is not a usable https URL.
	InvalidEngineURLReason = "InvalidEngineURL"
	// CredentialsMissingReason: neither the credentials Secret nor spec.user/spec.pass give a
	// username and password.
	CredentialsMissingReason = "CredentialsMissing"
	// InvalidTLSConfigReason: spec.tls.certs is not base64 PEM with at least one certificate.
	InvalidTLSConfigReason = "InvalidTLSConfig"
	// AuthenticationFailedReason: the Engine refused the username or password.
	AuthenticationFailedReason = "AuthenticationFailed"
	// AuthBreakerOpenReason: logins are suspended after repeated authentication failures, so
	// that the account is not locked in LDAP/IdM; they resume after the back-off in the message.
	AuthBreakerOpenReason = "AuthBreakerOpen"
	// TLSErrorReason: the Engine certificate could not be verified (try spec.tls).
	TLSErrorReason = "TLSError"
	// EngineUnreachableReason: the network between the manager and the Engine failed, or the
	// Engine did not answer in time.
	EngineUnreachableReason = "EngineUnreachable"
	// EngineErrorReason: the Engine answered with an unexpected error.
	EngineErrorReason = "EngineError"
)

// Reasons of MachineCreated.
const (
	// WaitingForOwnerMachineReason: Cluster API has not yet set the owner Machine.
	WaitingForOwnerMachineReason = "WaitingForOwnerMachine"
	// WaitingForClusterInfrastructureReason: the Cluster infrastructure is not provisioned yet.
	WaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"
	// WaitingForBootstrapDataReason: the bootstrap provider has not produced the data Secret yet.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	// BootstrapDataInvalidReason: the bootstrap data Secret is unusable (missing key, unknown
	// format, or an ignition payload that is not a JSON Ignition config).
	BootstrapDataInvalidReason = "BootstrapDataInvalid"
	// BootstrapFormatMismatchReason: the bootstrap data format does not fit the template's OS
	// type: oVirt treats the custom script of an rhcos_x64 VM as an Ignition config and refuses
	// to start it otherwise, and gives every other OS type cloud-init. No VM is created.
	BootstrapFormatMismatchReason = "BootstrapFormatMismatch"
	// TemplateNotFoundReason: spec.template does not exist in oVirt.
	TemplateNotFoundReason = "TemplateNotFound"
	// OVirtClusterNotFoundReason: spec.ovirtcluster does not exist in oVirt.
	OVirtClusterNotFoundReason = "OVirtClusterNotFound"
	// StorageDomainNotFoundReason: the storage domain does not exist or cannot host disks.
	StorageDomainNotFoundReason = "StorageDomainNotFound"
	// StorageDomainRequiresCloneReason: another storage domain than the template's was asked
	// for without cloning.
	StorageDomainRequiresCloneReason = "StorageDomainRequiresClone"
	// VMCreatingReason: oVirt is creating the VM (image_locked).
	VMCreatingReason = "VMCreating"
	// VMCreateFailedReason: oVirt refused to create the VM; the message has its answer.
	VMCreateFailedReason = "VMCreateFailed"
	// DuplicateVMsReason: several VMs carry this machine's name and owner marker; CAPOV does
	// not guess which is right. Remove the extra VMs in oVirt.
	DuplicateVMsReason = "DuplicateVMs"
	// VMNotFoundReason: the VM recorded in status.vmID / spec.providerID disappeared from oVirt.
	VMNotFoundReason = "VMNotFound"
	// OSDiskNeedsCloneReason: spec.osDisk sets a format or preallocation but the clone mode
	// resolves to thin (diskclone false from the OVirtProvider or the gate): a thin overlay on the
	// template cannot be preallocated.
	OSDiskNeedsCloneReason = "OSDiskNeedsClone"
	// TagNotFoundReason: a tag of spec.tags (or the OVirtCluster's) does not exist in oVirt and
	// the OVirtProvider does not create missing tags.
	TagNotFoundReason = "TagNotFound"
	// TagAssignFailedReason: oVirt refused to assign a tag to the VM.
	TagAssignFailedReason = "TagAssignFailed"
	// NoHostWithFreeDeviceReason: no host of the machine's oVirt cluster (or failure domain) has
	// enough free host devices for spec.gpus of type Passthrough; the message says what each
	// host has (severity Warning, retried).
	NoHostWithFreeDeviceReason = "NoHostWithFreeDevice"
	// HostDeviceClaimConflictReason: another machine claimed a chosen host device first (an
	// OVirtHostDeviceClaim); the manager chooses again.
	HostDeviceClaimConflictReason = "HostDeviceClaimConflict"
)

// Reasons of MachineDiskResized.
const (
	// DiskSmallerThanTemplateReason: spec.osdisksizegb is smaller than the template disk;
	// disks cannot shrink.
	DiskSmallerThanTemplateReason = "DiskSmallerThanTemplate"
	// DiskResizingReason: oVirt is extending the disk or the disk is locked.
	DiskResizingReason = "DiskResizing"
	// DiskUpdateFailedReason: oVirt refused to resize or rename a disk.
	DiskUpdateFailedReason = "DiskUpdateFailed"
	// NoOSDiskReason: the VM has no bootable disk to resize.
	NoOSDiskReason = "NoOSDisk"
	// DataDiskCreatingReason: oVirt is creating a data disk (spec.dataDisks).
	DataDiskCreatingReason = "DataDiskCreating"
	// DataDiskCreateFailedReason: oVirt refused to create a data disk (its message says why, e.g.
	// raw and thin on a block storage domain), or the disk's creation failed.
	DataDiskCreateFailedReason = "DataDiskCreateFailed"
)

// Reasons of MachineNetworkSet.
const (
	// VnicProfileNotFoundReason: a spec.nics[].vnicprofile does not exist in the oVirt cluster.
	VnicProfileNotFoundReason = "VnicProfileNotFound"
	// NetworkSetupFailedReason: oVirt refused to change a NIC.
	NetworkSetupFailedReason = "NetworkSetupFailed"
)

// Reasons of MachineOn.
const (
	// VMPoweringUpReason: the VM is starting (severity Info, message "powering up").
	VMPoweringUpReason = "VMPoweringUp"
	// VMPowerOnFailedReason: oVirt refused to start the VM.
	VMPowerOnFailedReason = "VMPowerOnFailed"
	// VMNotRunningReason: the VM was up and is not any more.
	VMNotRunningReason = "VMNotRunning"
	// NoGuestAddressesReason goes with MachineOn True: the VM is up but its guest agent reports
	// no address on the VM's NICs (no qemu-guest-agent in the image, or not started yet). The
	// machine still becomes Ready once its Node registers; its addresses are then the Node's
	// (status.addresses), as the message says.
	NoGuestAddressesReason = "NoGuestAddresses"
	// HostDeviceAttachFailedReason: oVirt refused to attach a chosen host device to the VM
	// before its first start (its message says why); retried.
	HostDeviceAttachFailedReason = "HostDeviceAttachFailed"
	// NoHostWithFreeMediatedDeviceReason: the Engine's scheduler found no host with a free
	// mediated device of a type of spec.gpus (its filter MDevice); retried.
	NoHostWithFreeMediatedDeviceReason = "NoHostWithFreeMediatedDevice"
	// HostDeviceUnavailableReason: the Engine's scheduler refused the start because a host
	// device of the VM is in use by another running VM or its host cannot pass it through (its
	// filter HostDevice); retried.
	HostDeviceUnavailableReason = "HostDeviceUnavailable"
	// RemediationInProgressReason: an OVirtRemediation is rebooting the VM; the manager leaves its
	// power alone until the attempt ends. Also the reason of an OVirtRemediation's Ready True in
	// phase Running: an attempt was made and the request waits spec.strategy.timeout for the
	// Machine to be healthy.
	RemediationInProgressReason = "RemediationInProgress"
)

// Reasons of K8sProviderIDSetup.
const (
	// WaitingForNodeReason: the VM has not registered as a Node of the workload cluster yet.
	WaitingForNodeReason = "WaitingForNode"
	// WorkloadClusterUnreachableReason: the workload cluster API cannot be reached.
	WorkloadClusterUnreachableReason = "WorkloadClusterUnreachable"
	// ProviderIDMismatchReason: the Node already carries another providerID.
	ProviderIDMismatchReason = "ProviderIDMismatch"
)

// Reasons of MachineDeleted.
const (
	// VMHasNonSystemDiskReason: a non-system (CSI) disk is attached; deletion waits until it is
	// detached and is retried every minute.
	VMHasNonSystemDiskReason = "VMHasNonSystemDisk"
	// VMHasNonSystemDiskMessage is the message of VMHasNonSystemDisk (product doc §4.4).
	VMHasNonSystemDiskMessage = "VM has non system disk, cannot delete"
	// VMPoweringOffReason: the VM is being shut down before removal.
	VMPoweringOffReason = "VMPoweringOff"
	// VMDeletingReason: oVirt is removing the VM.
	VMDeletingReason = "VMDeleting"
	// VMDeleteFailedReason: oVirt refused to remove the VM.
	VMDeleteFailedReason = "VMDeleteFailed"
	// VMNotStoppingReason: the VM is still not down after several stop requests; CAPOV keeps
	// asking, less and less often (docs/operations.md, "Deletion").
	VMNotStoppingReason = "VMNotStopping"
	// SystemDisksUnknownReason: systemDiskIDs was never recorded (status lost) and CAPOV cannot
	// tell which of the VM's disks came from the template; it does not remove the VM.
	SystemDisksUnknownReason = "SystemDisksUnknown"
)

// Condition types of an OVirtRemediation besides Ready, CanConnectToOVirt and Paused.
const (
	// OwnershipProvenCondition is True when the VM carries the OVirtMachine's current owner
	// marker with a proof that verifies under the Cluster's key, on the Engine that recorded it.
	// False with VMNotOwnedReason: the remediation writes nothing to the VM and hands the Machine
	// over.
	OwnershipProvenCondition = "OwnershipProven"
)

// Reasons of an OVirtRemediation's conditions (Ready, OwnershipProven) and of the Machine's
// ExternallyRemediated condition at the hand-over; RemediationInProgressReason (Ready True, phase
// Running) is among the reasons of MachineOn.
const (
	// WaitingForEngineReason (Ready False, phase Waiting): the Engine cannot be reached or read
	// (CanConnectToOVirt says why); no attempt and no hand-over until it can.
	WaitingForEngineReason = "WaitingForEngine"
	// WaitingForEtcdQuorumReason (Ready False, phase Waiting): rebooting this control-plane
	// machine would leave fewer than a majority of the control plane's etcd members healthy.
	WaitingForEtcdQuorumReason = "WaitingForEtcdQuorum"
	// WaitingForOVirtMachineReason (Ready False, phase Waiting): the Machine's OVirtMachine or
	// its VM id is not known (yet).
	WaitingForOVirtMachineReason = "WaitingForOVirtMachine"
	// RetryLimitReachedReason (Ready True, phase WaitingForOwner): every attempt timed out; the
	// Machine is handed to its owner.
	RetryLimitReachedReason = "RetryLimitReached"
	// MachineHasNoNodeReason (Ready True, phase WaitingForOwner): the Machine never had a Node; a
	// reboot cannot help a first boot (the VM would come back without its bootstrap data).
	MachineHasNoNodeReason = "MachineHasNoNode"
	// NotAnOVirtMachineReason (Ready True, phase WaitingForOwner): the Machine's infrastructure
	// is not an OVirtMachine.
	NotAnOVirtMachineReason = "NotAnOVirtMachine"
	// OwnerMarkerVerifiedReason goes with OwnershipProven True.
	OwnerMarkerVerifiedReason = "OwnerMarkerVerified"
	// RemediationFailedReason (the Machine's ExternallyRemediated False): the attempts did not
	// make the Machine healthy, or none could be made; the message lists them.
	RemediationFailedReason = "RemediationFailed"
)

// Reasons of several steps that guard writes to a VM (MachineCreated, MachineDeleted).
const (
	// VMNotOwnedReason: the VM named by spec.providerID does not carry this OVirtMachine's
	// owner marker (namespace/name) in its comment. CAPOV writes nothing to it and keeps the
	// finalizer until a human decides (docs/operations.md, "A VM that is not ours").
	VMNotOwnedReason = "VMNotOwned"
	// EngineChangedReason: oVirt does not know the machine's VM, but the Engine that answers is
	// not the one on which the VM was found (another product_info.instance_id): the
	// OVirtProvider was pointed at another Engine. The VM is not taken for deleted.
	EngineChangedReason = "EngineChanged"
	// NamespaceNotAllowedReason (CanConnectToOVirt, MachineDeleted): the OVirtProvider's
	// spec.allowedNamespaces does not allow the machine's namespace; nothing is done in oVirt.
	NamespaceNotAllowedReason = "NamespaceNotAllowed"
	// InvalidProviderIDReason: spec.providerID is not ovirt://<uuid>; CAPOV does not act on it
	// (a deletion looks the VM up by name and full owner marker instead).
	InvalidProviderIDReason = "InvalidProviderID"
	// VMLockedTooLongReason: oVirt has kept the VM image_locked for longer than CAPOV expects;
	// CAPOV polls less often and keeps waiting.
	VMLockedTooLongReason = "VMLockedTooLong"
)

// Reasons shared by several conditions.
const (
	// PausedReason: the Cluster or the object is paused; CAPOV changes nothing in oVirt.
	PausedReason = "Paused"
	// DeletingReason: the object is being deleted.
	DeletingReason = "Deleting"
)

// Failure reasons of the Ready condition. OVirtEngineConnectionCritical, VMDeletedOutOfBand,
// DiskSmallerThanTemplate and NoOSDisk are terminal: Ready=False with the reason, the same value in
// status.deprecated.v1beta1.failureReason (the v1beta1 status.failureReason), and no change in
// oVirt until the failure is cleared by a patch (docs/api-versions.md, "Clearing a terminal
// failure"). DuplicateVMs is Ready=False too but retried: it clears once the extra VMs are gone.
const (
	// OVirtEngineConnectionCriticalFailure: the OVirtProvider of the machine cannot be used as
	// configured (missing provider, invalid URL, TLS settings or credentials). Fix the
	// OVirtProvider, then clear the failure (docs/operations.md, "Clearing a terminal failure").
	OVirtEngineConnectionCriticalFailure = "OVirtEngineConnectionCritical"
	// VMDeletedOutOfBandFailure: the VM was removed from oVirt behind CAPOV's back; Cluster API
	// should replace the machine.
	VMDeletedOutOfBandFailure = "VMDeletedOutOfBand"
	// DiskSmallerThanTemplateFailure: spec.osdisksizegb is smaller than the template's OS disk,
	// which cannot shrink; the spec cannot change, so retrying cannot help (product doc §5.4).
	// Delete the Machine after pointing its group at a template with a large enough size.
	DiskSmallerThanTemplateFailure = "DiskSmallerThanTemplate"
	// NoOSDiskFailure: spec.osdisksizegb is set but the VM has no bootable disk from its
	// template to resize; retrying cannot help.
	NoOSDiskFailure = "NoOSDisk"
	// DuplicateVMsFailure: several VMs carry the identity of this machine; remove the extra
	// VMs in oVirt.
	DuplicateVMsFailure = "DuplicateVMs"
)

// Summary conditions of every kind, and their reasons.
const (
	// ReadyCondition summarises the lifecycle conditions. On OVirtMachine and OVirtCluster,
	// Cluster API mirrors it into the Machine's InfrastructureReady / the Cluster's
	// InfrastructureReady condition. A terminal failure is Ready=False with the reason
	// OVirtEngineConnectionCritical, VMDeletedOutOfBand or DuplicateVMs.
	ReadyCondition = "Ready"
	// PausedCondition is True while the Cluster or the object is paused.
	PausedCondition = "Paused"

	// ReadyReason: every lifecycle condition is True.
	ReadyReason = "Ready"
	// NotPausedReason goes with Paused False.
	NotPausedReason = "NotPaused"
)
