package ovirt

// VMStatus is the engine's VM status, as reported (lower-case engine names).
type VMStatus string

// VM statuses reported by the engine.
const (
	VMStatusDown             VMStatus = "down"
	VMStatusImageLocked      VMStatus = "image_locked"
	VMStatusWaitForLaunch    VMStatus = "wait_for_launch"
	VMStatusPoweringUp       VMStatus = "powering_up"
	VMStatusUp               VMStatus = "up"
	VMStatusPoweringDown     VMStatus = "powering_down"
	VMStatusRebootInProgress VMStatus = "reboot_in_progress"
	VMStatusMigrating        VMStatus = "migrating"
	VMStatusPaused           VMStatus = "paused"
	VMStatusSuspended        VMStatus = "suspended"
	VMStatusSavingState      VMStatus = "saving_state"
	VMStatusRestoringState   VMStatus = "restoring_state"
	VMStatusNotResponding    VMStatus = "not_responding"
	VMStatusUnassigned       VMStatus = "unassigned"
	VMStatusUnknown          VMStatus = "unknown"
)

// DiskStatus is the engine's disk status.
type DiskStatus string

// Disk statuses reported by the engine.
const (
	DiskStatusOK      DiskStatus = "ok"
	DiskStatusLocked  DiskStatus = "locked"
	DiskStatusIllegal DiskStatus = "illegal"
)

// VMType is the engine's VM type (optimisation profile).
type VMType string

// VM types accepted by the engine.
const (
	VMTypeServer          VMType = "server"
	VMTypeDesktop         VMType = "desktop"
	VMTypeHighPerformance VMType = "high_performance"
)

// PowerAction is a power operation on a VM.
type PowerAction string

// Power actions.
const (
	// PowerStart boots the VM (POST /vms/{id}/start).
	PowerStart PowerAction = "start"
	// PowerShutdown asks the guest to shut down through ACPI or the guest
	// agent (POST /vms/{id}/shutdown); the guest may ignore it.
	PowerShutdown PowerAction = "shutdown"
	// PowerStop powers the VM off at once (POST /vms/{id}/stop).
	PowerStop PowerAction = "stop"
	// PowerReboot reboots the guest (POST /vms/{id}/reboot): a warm reboot, or a cold one (shut
	// down, then started as a plain run) for a VM running a volatile run once or with a next-run
	// configuration. The Engine takes it for an up or powering-up VM only.
	PowerReboot PowerAction = "reboot"
	// PowerReset resets the VM at once, as a hardware reset button does (POST /vms/{id}/reset).
	// The Engine takes it from cluster level 4.6 and for a running VM; its refusal on a lower level
	// ("Reset VM requires cluster compatibility version 4.6 or higher.") is ErrInvalid with its
	// message.
	PowerReset PowerAction = "reset"
)

// VMUpdate is what UpdateVM changes; the zero value changes nothing.
type VMUpdate struct {
	// Comment, when set, replaces the VM's comment.
	Comment *string
	// ClearCustomScript empties initialization.custom_script and keeps the rest of the
	// initialization (the host name).
	ClearCustomScript bool
	// CustomScript, when set, replaces initialization.custom_script (an Ignition config with the
	// network keyfiles merged in). It is a secret: never logged. It and ClearCustomScript are
	// exclusive.
	CustomScript *string
	// Network, when set, replaces the initialization's nic_configurations, dns_servers and
	// dns_search and keeps the rest of the initialization. oVirt gives it to cloud-init guests at
	// the first run.
	Network *NetworkConfig
}

// NetworkConfig is the network configuration oVirt gives a cloud-init guest at its first run
// (initialization.nic_configurations, dns_servers, dns_search).
type NetworkConfig struct {
	// NICs are the configurations of the guest's interfaces.
	NICs []NICConfiguration
	// DNSServers and DNSSearch are VM-wide (oVirt joins them with spaces).
	DNSServers []string
	DNSSearch  []string
}

// BootProtocol is how a guest interface gets its addresses of one IP family.
type BootProtocol string

// Boot protocols.
const (
	BootProtocolNone   BootProtocol = "none"
	BootProtocolDHCP   BootProtocol = "dhcp"
	BootProtocolStatic BootProtocol = "static"
)

// NICConfiguration is one nic_configuration: the guest interface Name (oVirt gives no MAC
// address; the guest matches the name), on_boot true.
type NICConfiguration struct {
	// Name is the interface name in the guest, e.g. "eth0".
	Name string
	// IPv4Boot and IPv6Boot are the boot protocols per family ("" is none).
	IPv4Boot, IPv6Boot BootProtocol
	// IPv4 and IPv6 are the static addresses, with IPv4Boot/IPv6Boot static.
	IPv4, IPv6 *IPConfig
}

// IPConfig is a static address of a guest interface.
type IPConfig struct {
	// Address is the address without prefix, e.g. "10.0.0.5".
	Address string
	// Prefix is the prefix length, e.g. 24 (sent to oVirt as the dotted netmask for IPv4).
	Prefix int
	// Gateway is the default gateway, "" for none.
	Gateway string
}

// EngineInfo describes the engine answering at the API URL.
type EngineInfo struct {
	// ProductName is e.g. "oVirt Engine".
	ProductName string
	// Version is the engine's full version string, e.g. "4.5.4".
	Version string
	// InstanceID is product_info.instance_id: the installation's own UUID, the same across
	// restarts and upgrades, different on every other Engine. Empty when the Engine does not
	// report one.
	InstanceID string
}

// Cluster is an oVirt cluster.
type Cluster struct {
	ID           string
	Name         string
	DataCenterID string
	// NetworkIDs are the ids of the logical networks attached to the cluster;
	// vNIC profiles are resolved within them.
	NetworkIDs []string
}

// StorageDomain is an oVirt storage domain.
type StorageDomain struct {
	ID   string
	Name string
	// Available is the free space in bytes.
	Available int64
	// Status is the engine's status (active, maintenance, inactive, ...),
	// read under the data center for an attached domain: the top-level
	// collection leaves it empty for those.
	Status string
	// Usable is true for a data domain that is active and whose external
	// status is not error/failure.
	Usable bool
}

// Template is an oVirt VM template (one version of it).
type Template struct {
	ID        string
	Name      string
	Version   int
	ClusterID string
	// DataCenterID is the data center of the template's cluster: a template can be used by
	// every cluster of that data center (empty when the template has no cluster, as Blank).
	DataCenterID string
	OSType       string
	// Disks are the template's disks; their ids are what a storage-domain
	// override at creation refers to.
	Disks []Disk
	// Sockets, Cores and Threads are the template's CPU topology, MemoryBytes its memory (0 when
	// the Engine did not say): what a VM that inherits them gets.
	Sockets, Cores, Threads int
	MemoryBytes             int64
}

// VnicProfile is an oVirt vNIC profile.
type VnicProfile struct {
	ID        string
	Name      string
	NetworkID string
}

// Disk is a disk, as attached to a VM or a template.
type Disk struct {
	// ID is the disk id (equal to the disk attachment id).
	ID    string
	Alias string
	// ProvisionedSize is the virtual size in bytes.
	ProvisionedSize int64
	Bootable        bool
	// Interface is the attachment interface, e.g. "virtio_scsi".
	Interface       string
	Status          DiskStatus
	StorageDomainID string
	// StorageDomainIDs are every storage domain holding a copy of the disk (a template's disk may
	// be copied to several); StorageDomainID is the first of them.
	StorageDomainIDs []string
	// Format is "cow" or "raw".
	Format string
	// Sparse is true for a thin-provisioned disk, false for a preallocated one.
	Sparse bool
	// Description is the disk's free text; CAPOV's data disks carry their ownership marker here.
	Description string
	// WipeAfterDelete is true when the Engine zeroes the disk's blocks when it removes it.
	WipeAfterDelete bool
}

// Disk interfaces the Engine accepts for the disks CAPOV creates.
const (
	DiskInterfaceVirtioSCSI = "virtio_scsi"
	DiskInterfaceVirtio     = "virtio"
)

// Disk formats.
const (
	DiskFormatCow = "cow"
	DiskFormatRaw = "raw"
)

// DiskSpec is what AddDisk creates: a new, empty, non-bootable disk attached (active) to a VM.
type DiskSpec struct {
	// Alias is the disk's name in oVirt.
	Alias string
	// Description is free text; CAPOV's ownership marker of the disk goes here.
	Description string
	// SizeBytes is the virtual size (provisioned_size), above 0.
	SizeBytes int64
	// StorageDomainID is the storage domain the disk is created in (required).
	StorageDomainID string
	// Interface is DiskInterfaceVirtioSCSI or DiskInterfaceVirtio ("" is virtio_scsi).
	Interface string
	// Format is DiskFormatCow or DiskFormatRaw ("" is cow).
	Format string
	// Sparse is true for a thin-provisioned disk, false for a preallocated one.
	Sparse bool
	// WipeAfterDelete, when set, says whether the Engine zeroes the disk's blocks when it is
	// removed; nil sends nothing (the storage domain's default).
	WipeAfterDelete *bool
	// CorrelationID tags the Engine's jobs for this request.
	CorrelationID string
}

// CustomProperty is one VM custom property (name=value), passed to the Engine as is.
type CustomProperty struct {
	Name  string
	Value string
}

// HighAvailability is oVirt's VM high availability: the Engine restarts the VM (on another host
// when its host failed) when it went down without being asked to.
type HighAvailability struct {
	// Enabled turns high availability on.
	Enabled bool
	// Priority orders restarts (higher first); 0 keeps the Engine's default.
	Priority int
	// LeaseStorageDomainID, when set, gives the VM a storage lease on that domain, so that the
	// Engine can restart it elsewhere even when its host is unreachable.
	LeaseStorageDomainID string
	// ResumeBehaviour is what the VM does after a storage I/O error pause: "auto_resume",
	// "leave_paused" or "kill" ("" is the Engine's default). The Engine makes it "kill" for a
	// highly available VM with a lease, whatever is sent.
	ResumeBehaviour string
}

// CPU modes (cpu.mode).
const (
	CPUModeHostPassthrough = "host_passthrough"
	CPUModeHostModel       = "host_model"
	CPUModeCustom          = "custom"
)

// Auto pinning policies of the VM add request (auto_pinning_policy).
const (
	AutoPinningDisabled = "disabled"
	AutoPinningExisting = "existing"
	AutoPinningAdjust   = "adjust"
)

// Performance is the performance profile of a VM; zero values keep the template's.
type Performance struct {
	// CPUMode is one of the CPUMode constants; "" keeps the template's.
	CPUMode string
	// AutoPinningPolicy is one of the AutoPinning constants, sent with the add request only; ""
	// sends none. The Engine refuses it with a CPU topology (Sockets, Cores, Threads): ErrInvalid
	// before any call.
	AutoPinningPolicy string
	// IOThreads is io.threads; 0 keeps the template's.
	IOThreads int
	// MultiQueues is multi_queues_enabled; nil keeps the template's.
	MultiQueues *bool
	// Ballooning is memory_policy.ballooning; nil keeps the template's.
	Ballooning *bool
}

// NIC is a VM network interface.
type NIC struct {
	ID            string
	Name          string
	VnicProfileID string
	MAC           string
}

// VM is an oVirt virtual machine.
type VM struct {
	ID          string
	Name        string
	Comment     string
	Description string
	Status      VMStatus
	ClusterID   string
	// TemplateID is the template the VM is based on; the Blank template
	// (all zeros) for cloned VMs, whose source is OriginalTemplateID.
	TemplateID         string
	OriginalTemplateID string
	OSType             string
	// HostID and HostName name the host that runs the VM; empty while it is down. HostName is
	// filled by GetVM and ListVMs only (host names are read once per connection and cached).
	HostID   string
	HostName string
	// PinnedHostIDs are the hosts the VM may run on only (placement_policy.hosts), filled by GetVM
	// when the Engine returns the placement policy; nil when it has none or it was not returned.
	PinnedHostIDs []string
	// PlacementAffinity is placement_policy.affinity as GetVM read it: "pinned", "migratable",
	// "user_migratable", or "" when unknown.
	PlacementAffinity string
	// Disks and NICs are filled by GetVM (read from their own endpoints when the engine
	// did not return them inline) and by ListVMs (inline only, see VMPage.Complete).
	Disks []Disk
	NICs  []NIC
	// ReportedDevices are the guest interfaces the guest agent reported, unfiltered: a real
	// engine returns every interface of the guest (lo, eth0, cni0, kube-ipvs0, ...) for every
	// NIC, in no stable order. Deduplicated by name and MAC; empty without a guest agent.
	// Filled by GetVM and ListVMs only.
	ReportedDevices []ReportedDevice
	// CustomScriptStored is true when the VM stores an initialization.custom_script (bootstrap
	// data given at creation, as releases before run once did). Its content is never kept.
	CustomScriptStored bool
	// TagIDs are the ids of the tags assigned to the VM, filled by GetVM and ListVMs (followed
	// inline; TagsKnown says whether they were), nil for none.
	TagIDs []string
	// TagsKnown is true when TagIDs were read: an Engine that ignores follow leaves them out, and
	// GetVM does not read them on their own then. The SDK client knows them when some came
	// inline or when the VM's disks did (the same follow: an Engine honours or ignores it as a
	// whole), so a VM without any disk and without tags has TagsKnown false.
	TagsKnown bool
}

// MaxVMPageSize is the largest page ListVMs asks for.
const MaxVMPageSize = 1000

// VMQuery selects a page of VMs for ListVMs.
type VMQuery struct {
	// CommentContains selects the VMs whose comment contains this text, case and all (the SDK
	// client asks the engine for a case-sensitive match and filters the page again; callers
	// still check the whole marker themselves). Required; it must not hold any of " ' ; \ *
	// (the engine's search cannot take them as plain text).
	CommentContains string
	// Page is the page number, from 1.
	Page int
	// PageSize is the number of VMs per page, 1..MaxVMPageSize.
	PageSize int
}

// VMPage is one page of ListVMs.
type VMPage struct {
	// VMs are the VMs of the page, ordered by name. Fewer than the page size means it is the
	// last page.
	VMs []VM
	// Complete is true when the engine returned the disks, NICs, reported devices and tags of
	// every VM inline. When false only the id, name, comment, status, cluster and host of each VM
	// are facts: its Disks, NICs, ReportedDevices and TagIDs are empty whatever the VM has, and
	// TagsKnown is false.
	Complete bool
}

// ReportedDevice is one guest network interface as the guest agent reports it.
type ReportedDevice struct {
	// Name is the guest's interface name, e.g. "eth0" or "cni0".
	Name string
	// MAC is the interface's MAC address as reported (any case); 00:00:00:00:00:00 for lo.
	MAC string
	// IPs are the interface's addresses, as reported.
	IPs []string
}

// VMSpec is what CreateVM creates.
type VMSpec struct {
	// Name is the VM name; it must be unique in the engine.
	Name       string
	ClusterID  string
	TemplateID string
	// Clone copies the template's disks (independent VM) instead of creating
	// thin overlays on them. It is always sent explicitly (clone=true|false).
	Clone bool
	// StorageDomainID places every template disk of a cloned VM in this
	// storage domain. Only honoured with Clone (thin disks must live where the
	// template's disks are); ignored otherwise.
	StorageDomainID string
	// TemplateDisks are the template's disks; required with StorageDomainID,
	// DiskFormat or DiskSparse (and Clone) since the override addresses the
	// template's disk ids.
	TemplateDisks []Disk
	// Sockets, Cores and Threads set the CPU topology; 0 inherits the
	// template's value.
	Sockets, Cores, Threads int
	// MemoryBytes sets the memory (and the hot-plug ceiling memory_policy.max
	// to the same value); 0 inherits.
	MemoryBytes int64
	// GuaranteedMemoryBytes sets memory_policy.guaranteed; 0 inherits. It must
	// not exceed MemoryBytes.
	GuaranteedMemoryBytes int64
	// Type is the VM type; "" inherits.
	Type VMType
	// Comment and Description are free text; the owner marker goes here.
	Comment     string
	Description string
	// CustomScript is the cloud-init or ignition payload. It is a secret: it
	// is sent to the engine and never logged.
	CustomScript string
	// OSType is the operating system type, e.g. "rhcos_x64" (required on 4.4+
	// for ignition); "" inherits.
	OSType string
	// HostName is the guest host name passed through initialization.
	HostName string
	// CorrelationID tags the engine's jobs for this request.
	CorrelationID string
	// DiskFormat and DiskSparse set the format and allocation of every template disk of a cloned
	// VM (with Clone only: a thin VM's disks are overlays on the template's); "" and nil keep
	// the template disk's format and the current rule (cow is sparse, raw preallocated). With
	// either, every template disk gets an override naming StorageDomainID or, without it, the
	// template disk's own StorageDomainID. The Engine refuses cow preallocated, and raw sparse
	// on block storage (ErrInvalid).
	DiskFormat string
	DiskSparse *bool
	// CustomProperties replace the template's custom properties when not empty.
	CustomProperties []CustomProperty
	// HighAvailability, when set, replaces the template's high availability settings.
	HighAvailability *HighAvailability
	// Performance tunes the VM; the zero value keeps the template's.
	Performance Performance
	// PinnedHostID pins the VM to this host: placement_policy {affinity: pinned, hosts: [host]} in
	// POST /vms. "" keeps the template's placement.
	PinnedHostID string
}

// DiskUpdate changes a disk through its attachment, in a single PUT.
type DiskUpdate struct {
	// ProvisionedSize is the new virtual size in bytes; 0 leaves it
	// unchanged. The engine refuses to shrink (ErrInvalid).
	ProvisionedSize int64
	// Alias is the new alias; "" leaves it unchanged.
	Alias string
}

// AffinityGroup is a VM affinity group of an oVirt cluster (its VM rule; CAPOV does not use host
// rules).
type AffinityGroup struct {
	ID          string
	Name        string
	Description string
	ClusterID   string
	// Positive is true when the group's VMs should run together, false when they should run
	// apart.
	Positive bool
	// Enforcing is true when the scheduler must honour the rule (it refuses to start a VM
	// otherwise), false when it is best effort.
	Enforcing bool
	// VMIDs are the ids of the member VMs.
	VMIDs []string
}

// AffinityGroupSpec is what CreateAffinityGroup creates.
type AffinityGroupSpec struct {
	ClusterID string
	// Name must be unique in the cluster.
	Name string
	// Description is free text; CAPOV writes its owner marker there.
	Description string
	Positive    bool
	Enforcing   bool
}

// Tag is an Engine tag (GET /tags): a name, unique in the Engine, and a free-text description.
type Tag struct {
	ID          string
	Name        string
	Description string
}

// Host is an oVirt host.
type Host struct {
	ID, Name, ClusterID string
	// Status is the host status as the Engine reports it ("up", "maintenance", ...).
	Status string
	// PassthroughEnabled is device_passthrough.enabled.
	PassthroughEnabled bool
	// MaxSchedulingMemoryBytes is max_scheduling_memory.
	MaxSchedulingMemoryBytes int64
}

// MDevType is a mediated device type a host device offers.
type MDevType struct {
	Name               string
	AvailableInstances int
}

// HostDevice is a device of a host (GET /hosts/{id}/devices) or a host device of a VM (GET
// /vms/{id}/hostdevices).
type HostDevice struct {
	// ID is the Engine's id (the hex of the name's bytes).
	ID string
	// Name is the device's name on its host, e.g. pci_0000_3b_00_0.
	Name   string
	HostID string
	// Capability is "pci", "usb", "scsi", ...
	Capability string
	// VendorID and ProductID are lower-case hex without 0x, e.g. "10de", "20b5".
	VendorID, ProductID     string
	VendorName, ProductName string
	// IOMMUGroup is the device's IOMMU group, -1 when it has none.
	IOMMUGroup int
	// ParentName is the parent device's name.
	ParentName string
	Driver     string
	// VMID is the VM that holds the device: for host devices, the running VM it is allocated to
	// ("" when free); for a VM's host devices, that VM.
	VMID      string
	MDevTypes []MDevType
	// Placeholder is true for a VM's host device the Engine added only because it shares the
	// IOMMU group of a requested one.
	Placeholder bool
}
