package v1beta2

// DiskInterface is how a disk is attached to the VM.
// +kubebuilder:validation:Enum=virtio_scsi;virtio
type DiskInterface string

// The disk interfaces CAPOV attaches data disks with.
const (
	// DiskInterfaceVirtioSCSI attaches the disk to the VM's virtio-scsi controller (the guest sees
	// /dev/sdX); the default.
	DiskInterfaceVirtioSCSI DiskInterface = "virtio_scsi"
	// DiskInterfaceVirtio attaches the disk as a virtio block device (/dev/vdX).
	DiskInterfaceVirtio DiskInterface = "virtio"
)

// DiskFormat is the image format of a disk in oVirt.
// +kubebuilder:validation:Enum=cow;raw
type DiskFormat string

// The disk formats of oVirt.
const (
	// DiskFormatCow is qcow2: thin provisioned (sparse) only, for the disks CAPOV creates.
	DiskFormatCow DiskFormat = "cow"
	// DiskFormatRaw is a raw image: preallocated, or sparse on file storage domains.
	DiskFormatRaw DiskFormat = "raw"
)

// Limits of the VM contents.
const (
	// MaxDataDisks is the largest number of data disks of one machine.
	MaxDataDisks = 16
	// MaxDataDiskSizeGB is the largest data disk CAPOV creates.
	MaxDataDiskSizeGB = 65536
	// MaxTags is the largest number of tags of one machine or cluster.
	MaxTags = 16
	// MaxTagNameLength is the Engine's limit on a tag name.
	MaxTagNameLength = 50
	// MaxCustomProperties is the largest number of custom properties of one machine.
	MaxCustomProperties = 32
)

// DataDisk is an empty disk the manager creates and attaches to the VM before its first start,
// and removes with the VM.
// +kubebuilder:validation:XValidation:rule="!(has(self.preallocated) && self.preallocated && has(self.format) && self.format == 'cow')",message="a preallocated disk cannot have format cow (oVirt refuses preallocated qcow2): use format raw, or omit format",fieldPath=".format"
type DataDisk struct {
	// name identifies the disk within the machine: it is part of the disk's alias in oVirt
	// (<vm name>_<name> with the disk-add-vm-name feature gate, else <name>) and of the
	// ownership marker the manager writes in the disk's description. Unique in the machine.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// sizeGB is the size of the disk in GiB.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	SizeGB int64 `json:"sizeGB"`

	// storageDomain is the oVirt storage domain of the disk. Empty: the storage domain of the
	// VM's disks (the failure domain's, spec.storagedomainname, the OVirtProvider's, else the
	// template disk's).
	// +optional
	// +kubebuilder:validation:MaxLength=255
	StorageDomain string `json:"storageDomain,omitempty"`

	// interface is how the disk is attached: virtio_scsi (the default) or virtio.
	// +optional
	Interface DiskInterface `json:"interface,omitempty"`

	// format is the image format: cow (qcow2) or raw. Empty: raw when preallocated, else cow.
	// oVirt refuses a preallocated cow disk, and a raw disk that is not preallocated on block
	// storage (iSCSI, FC), which the MachineDiskResized condition then reports.
	// +optional
	Format DiskFormat `json:"format,omitempty"`

	// preallocated allocates the whole disk at creation (slower to create, steadier latency:
	// what etcd wants). Default false: thin provisioned.
	// +optional
	Preallocated bool `json:"preallocated,omitempty"`

	// wipeAfterDelete makes oVirt zero the disk's blocks when it is removed. Empty: the storage
	// domain's default.
	// +optional
	WipeAfterDelete *bool `json:"wipeAfterDelete,omitempty"`
}

// OSDisk is the allocation of the disks a VM clones from its template.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!(has(self.preallocated) && self.preallocated && has(self.format) && self.format == 'cow')",message="a preallocated disk cannot have format cow (oVirt refuses preallocated qcow2): use format raw, or omit format",fieldPath=".format"
type OSDisk struct {
	// format is the image format of the cloned disks: cow (qcow2) or raw. Empty: raw when
	// preallocated, else the template disk's.
	// +optional
	Format DiskFormat `json:"format,omitempty"`

	// preallocated allocates the cloned disks in full (a thin overlay on the template is the
	// worst case for etcd's fsync). It needs cloned disks: refused with diskclone false, and
	// reported in the MachineCreated condition when the clone mode resolves to thin.
	// +optional
	Preallocated *bool `json:"preallocated,omitempty"`
}

// CustomProperty is one oVirt VM custom property, passed to the Engine as is: the Engine checks
// the name against its PredefinedVMProperties and UserDefinedVMProperties, and the value
// against the property's regular expression, and refuses the VM otherwise (reported in the
// MachineCreated condition with the Engine's message).
type CustomProperty struct {
	// name is the property's name, e.g. "viodiskcache" or a property of a VDSM hook.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_]+$`
	Name string `json:"name"`

	// value is the property's value; it cannot contain ';' (oVirt's separator).
	// +required
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[^;]*$`
	Value string `json:"value"`
}

// ResumeBehaviour is what a VM paused by a storage I/O error does once the storage is back.
// +kubebuilder:validation:Enum=AutoResume;LeavePaused;Kill
type ResumeBehaviour string

// The resume behaviours of oVirt.
const (
	// ResumeBehaviourAutoResume resumes the VM.
	ResumeBehaviourAutoResume ResumeBehaviour = "AutoResume"
	// ResumeBehaviourLeavePaused leaves it paused for a human.
	ResumeBehaviourLeavePaused ResumeBehaviour = "LeavePaused"
	// ResumeBehaviourKill kills it, so that high availability restarts it (oVirt's only choice
	// for a VM with a lease).
	ResumeBehaviourKill ResumeBehaviour = "Kill"
)

// HighAvailability is oVirt's own VM high availability: the Engine restarts the VM, on another
// host when its host failed, whenever it went down without being asked to. A shutdown or stop
// by CAPOV (deletion) is asked for and never triggers a restart.
type HighAvailability struct {
	// enabled turns oVirt's high availability on for the VM.
	// +required
	Enabled bool `json:"enabled"`

	// priority orders the Engine's restarts, higher first: 1 (low), 50 (medium), 100 (high).
	// Empty: oVirt's default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Priority int32 `json:"priority,omitempty"`

	// leaseStorageDomain gives the VM a storage lease on this oVirt storage domain, so that the
	// Engine can restart it on another host even when its own host is unreachable (without a
	// lease it waits until the host is fenced). Needs enabled.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	LeaseStorageDomain string `json:"leaseStorageDomain,omitempty"`

	// resumeBehaviour is what the VM does after a pause on a storage I/O error: AutoResume,
	// LeavePaused or Kill. Empty: oVirt's default (Kill for a VM with a lease).
	// +optional
	ResumeBehaviour ResumeBehaviour `json:"resumeBehaviour,omitempty"`
}

// CPUMode is how the VM's CPU model relates to its host's.
// +kubebuilder:validation:Enum=HostPassthrough;HostModel;Custom
type CPUMode string

// The CPU modes of oVirt.
const (
	// CPUModeHostPassthrough gives the guest the host's CPU as it is (best performance; the VM
	// migrates only between identical hosts).
	CPUModeHostPassthrough CPUMode = "HostPassthrough"
	// CPUModeHostModel gives the guest the host's CPU model.
	CPUModeHostModel CPUMode = "HostModel"
	// CPUModeCustom gives the guest the cluster's CPU type.
	CPUModeCustom CPUMode = "Custom"
)

// AutoPinning is the Engine's automatic CPU and NUMA pinning policy at creation.
// +kubebuilder:validation:Enum=Disabled;Existing;Adjust
type AutoPinning string

// The auto-pinning policies of the pinned go-ovirt SDK.
const (
	// AutoPinningDisabled pins nothing.
	AutoPinningDisabled AutoPinning = "Disabled"
	// AutoPinningExisting pins the VM's CPUs to the host's, keeping its topology.
	AutoPinningExisting AutoPinning = "Existing"
	// AutoPinningAdjust adjusts the VM's topology to the host's and pins it.
	AutoPinningAdjust AutoPinning = "Adjust"
)

// Hugepage sizes oVirt backs VM memory with, in KiB.
const (
	HugePages2Mi = 2048
	HugePages1Gi = 1048576
)

// Performance is the performance profile of the VM: what makes vmtype high_performance worth
// its name. Every field left empty keeps the template's setting.
type Performance struct {
	// cpuMode is HostPassthrough, HostModel or Custom.
	// +optional
	CPUMode CPUMode `json:"cpuMode,omitempty"`

	// autoPinning asks the Engine to pin the VM's CPUs (and NUMA nodes) at creation: Disabled,
	// Existing (keep the VM's topology) or Adjust (fit the topology to the host). oVirt pins
	// only VMs that cannot migrate.
	// +optional
	AutoPinning AutoPinning `json:"autoPinning,omitempty"`

	// hugePagesKiB backs the VM's memory with host hugepages of this size: 2048 (2 MiB) or
	// 1048576 (1 GiB), through oVirt's hugepages custom property. The memory size must be a
	// multiple of it, and a host must have enough free hugepages of that size to start the VM.
	// +optional
	// +kubebuilder:validation:Enum=2048;1048576
	HugePagesKiB int64 `json:"hugePagesKiB,omitempty"`

	// ioThreads is the number of I/O threads of the VM's disks. Empty: the template's.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	IOThreads int32 `json:"ioThreads,omitempty"`

	// multiQueues gives the VM's virtio NICs one queue per vCPU. Empty: the template's.
	// +optional
	MultiQueues *bool `json:"multiQueues,omitempty"`

	// ballooning lets oVirt's memory balloon reclaim the guest's memory. Empty: the template's.
	// Hugepage-backed memory cannot be ballooned.
	// +optional
	Ballooning *bool `json:"ballooning,omitempty"`
}

// DataDiskStatus is a data disk the manager created for the VM.
type DataDiskStatus struct {
	// name is spec.dataDisks[].name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	Name string `json:"name"`

	// id is the disk's id in oVirt.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`
}
