package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// MachineFinalizer is the finalizer the manager puts on OVirtMachines: it is removed once the VM
// is gone from oVirt.
const MachineFinalizer = "capovmachine.infrastructure.cluster.x-k8s.io"

// ProviderIDPrefix starts every providerID CAPOV sets: "ovirt://<vm-id>".
const ProviderIDPrefix = "ovirt://"

// VMType is the oVirt VM type, which tunes the VM for its workload.
// +kubebuilder:validation:Enum=server;desktop;high_performance
type VMType string

// The VM types oVirt knows.
const (
	// VMTypeServer is tuned for servers (the usual choice for Kubernetes nodes).
	VMTypeServer VMType = "server"
	// VMTypeDesktop is tuned for desktops.
	VMTypeDesktop VMType = "desktop"
	// VMTypeHighPerformance pins and tunes the VM for latency-sensitive workloads.
	VMTypeHighPerformance VMType = "high_performance"
)

// Limits of the oVirt Engine (its default MaxNumOfVmSockets, MaxNumOfCpuPerSocket,
// MaxNumOfThreadsPerCpu and the largest OS disk CAPOV accepts).
const (
	MaxSockets       = 16
	MaxCoresPerSock  = 254
	MaxThreadsPerCPU = 8
	MaxOSDiskSizeGB  = 65536
)

// CPU is the virtual CPU topology of a VM. The number of vCPUs is sockets x cores x threads.
type CPU struct {
	// sockets is the number of CPU sockets.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Sockets int32 `json:"sockets"`

	// cores is the number of cores per socket.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=254
	Cores int32 `json:"cores"`

	// threads is the number of threads per core.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	Threads int32 `json:"threads"`
}

// Memory is the memory of a VM in MiB.
// +kubebuilder:validation:XValidation:rule="!has(self.guaranteedmb) || self.guaranteedmb <= self.sizemb",message="guaranteedmb must not exceed sizemb: lower memory.guaranteedmb or raise memory.sizemb",fieldPath=".guaranteedmb"
type Memory struct {
	// sizemb is the memory size in MiB.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=67108864
	SizeMB int64 `json:"sizemb"`

	// guaranteedmb is the memory oVirt guarantees to the VM (never ballooned away), in MiB.
	// It must not exceed sizemb. Empty: oVirt's default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=67108864
	GuaranteedMB int64 `json:"guaranteedmb,omitempty"`
}

// NIC is one network interface of a VM.
type NIC struct {
	// vnicprofile is the name of the oVirt vNIC profile to connect the interface to, for
	// example "ovirtmgmt". The profile must belong to a network of spec.ovirtcluster.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	VnicProfile string `json:"vnicprofile"`

	// addressesFromPools are the IPAM pools the NIC gets its static addresses from: the manager
	// creates one IPAddressClaim per pool (owned by the OVirtMachine, released with it), waits
	// for the addresses, and gives them to the VM at its first boot (through oVirt's
	// initialization for a cloud-init template, as NetworkManager keyfiles in the Ignition config
	// for an rhcos_x64 template). A cloud-init template takes at most one IPv4 and one IPv6
	// address per NIC. Empty: the NIC's addresses come from DHCP (or dhcp4/dhcp6).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	AddressesFromPools []IPPoolReference `json:"addressesFromPools,omitempty"`

	// gateway is the default gateway of the NIC. It replaces the gateway of the pool's address of
	// the same IP family. Empty: the pool's gateway, if any.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	Gateway string `json:"gateway,omitempty"`

	// nameservers are the DNS servers (IP addresses) of the VM, given with the static
	// configuration.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:MaxLength=45
	Nameservers []string `json:"nameservers,omitempty"`

	// searchDomains are the DNS search domains of the VM, given with the static configuration.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=6
	// +kubebuilder:validation:items:MaxLength=253
	SearchDomains []string `json:"searchDomains,omitempty"`

	// deviceName is the name of the interface in the guest that the configuration is for, on a
	// cloud-init template: oVirt names the interface, not its MAC address, in the network data
	// it gives cloud-init. Empty: eth0 for the first NIC, eth1 for the second, and so on. Ignition
	// templates match the interface by its MAC address and use the name only for the
	// NetworkManager connection.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`
	DeviceName string `json:"deviceName,omitempty"`

	// dhcp4 turns DHCP for IPv4 on or off on this NIC. Empty: on when the NIC has no IPv4
	// address from a pool.
	// +optional
	DHCP4 *bool `json:"dhcp4,omitempty"`

	// dhcp6 turns DHCP for IPv6 on or off on this NIC. Empty: off.
	// +optional
	DHCP6 *bool `json:"dhcp6,omitempty"`
}

// HasNetworkConfig reports whether the NIC asks for an explicit network configuration (static
// addresses, DNS, or a DHCP switch) instead of the template's.
func (n NIC) HasNetworkConfig() bool {
	return len(n.AddressesFromPools) > 0 || n.Gateway != "" || len(n.Nameservers) > 0 ||
		len(n.SearchDomains) > 0 || n.DHCP4 != nil || n.DHCP6 != nil || n.DeviceName != ""
}

// OVirtVMSpec describes the VM of an OVirtMachine. OVirtMachineTemplate spec.template.spec uses
// it as is; OVirtMachine adds providerID.
type OVirtVMSpec struct {
	// provider is the name of the cluster-scoped OVirtProvider that connects to the Engine.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Provider string `json:"provider"`

	// ovirtcluster is the name of the oVirt cluster to create the VM in, for example "Default".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	OVirtCluster string `json:"ovirtcluster"`

	// template is the name of the oVirt VM template to create the VM from. When several
	// versions share the name, the newest one is used.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Template string `json:"template"`

	// storagedomainname is the storage domain for the disks of the VM. Empty: the provider's
	// storagedomainname, else the storage domain of the template disks. Another domain than the
	// template's requires cloning (diskclone).
	// +optional
	// +kubebuilder:validation:MaxLength=255
	StorageDomainName string `json:"storagedomainname,omitempty"`

	// diskclone, when true, clones the template disks (independent disks, slower to create,
	// needed for another storage domain); false creates thin disks that depend on the template.
	// Empty: the OVirtProvider's diskclone, else the disk-clone feature gate (default false).
	// +optional
	DiskClone *bool `json:"diskclone,omitempty"`

	// vmtype is the oVirt VM type: server, desktop or high_performance. Empty: the template's.
	// +optional
	VMType VMType `json:"vmtype,omitempty"`

	// cpu is the vCPU topology. Empty: the template's.
	// +optional
	CPU *CPU `json:"cpu,omitempty"`

	// memory is the memory size. Empty: the template's.
	// +optional
	Memory *Memory `json:"memory,omitempty"`

	// osdisksizegb is the size of the bootable (OS) disk in GiB. It can only grow the template
	// disk: a smaller value than the template's disk is reported in the MachineDiskResized
	// condition. Empty: the template's size.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	OSDiskSizeGB int64 `json:"osdisksizegb,omitempty"`

	// nics are the network interfaces of the VM, in order (nic1, nic2, ...). Empty: the
	// template's interfaces are kept.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	NICs []NIC `json:"nics,omitempty"`

	// antiAffinity keeps the VMs of one MachineDeployment on different oVirt hosts with a
	// negative VM affinity group per oVirt cluster: Soft spreads them as far as the hosts allow,
	// Hard makes oVirt refuse to start a VM that would share a host. Empty or None: no group.
	// Control-plane machines follow the OVirtCluster's controlPlaneAntiAffinity instead.
	// +optional
	AntiAffinity AntiAffinityPolicy `json:"antiAffinity,omitempty"`

	// affinityGroups are existing oVirt affinity groups, by name in the VM's oVirt cluster, that
	// the VM joins when it is created (before it first starts). The manager never changes or
	// deletes these groups.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=255
	AffinityGroups []string `json:"affinityGroups,omitempty"`

	// osDisk sets the format and allocation of the disks the VM clones from its template, e.g.
	// {preallocated: true} for etcd. It needs cloned disks (diskclone true, or resolved so).
	// Empty: the template disks' format, thin provisioned.
	// +optional
	OSDisk *OSDisk `json:"osDisk,omitempty"`

	// dataDisks are empty disks the manager creates, attaches before the VM's first start and
	// removes with the VM (their ownership is recorded on each disk in oVirt and in
	// status.dataDisks). Any other disk attached to the VM still blocks its deletion.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	DataDisks []DataDisk `json:"dataDisks,omitempty"`

	// tags are oVirt tags, by name, assigned to the VM when it is created and put back when
	// removed by hand; with the OVirtCluster's spec.tags. A tag that does not exist in oVirt is
	// created when the OVirtProvider's spec.createMissingTags is true, else reported in the
	// MachineCreated condition.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=50
	Tags []string `json:"tags,omitempty"`

	// customProperties are oVirt VM custom properties (VDSM hooks, Engine knobs), passed to the
	// Engine as they are; they replace the template's.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	CustomProperties []CustomProperty `json:"customProperties,omitempty"`

	// highAvailability is oVirt's VM high availability (restart by the Engine, optionally with
	// a storage lease). Empty: the template's.
	// +optional
	HighAvailability *HighAvailability `json:"highAvailability,omitempty"`

	// performance is the performance profile of the VM (CPU mode, pinning, hugepages, I/O
	// threads, multi-queue, ballooning). Empty: the template's.
	// +optional
	Performance *Performance `json:"performance,omitempty"`

	// gpus are the VM's GPUs: vGPUs (mediated devices, placed by the Engine's scheduler) or PCI
	// devices passed through (the manager chooses a host with enough free devices, pins the VM
	// to it and attaches them before the first start). Their sum counts in the template's
	// capacity under each entry's resourceName.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="self.map(g, has(g.count) ? g.count : 1).sum() <= 16",message="a machine has at most 16 GPUs (the sum of the counts)"
	GPUs []GPU `json:"gpus,omitempty"`
}

// OVirtMachineSpec is the desired state of an OVirtMachine.
type OVirtMachineSpec struct {
	OVirtVMSpec `json:",inline"`

	// providerID is "ovirt://<vm-id>", set by the manager once the VM exists. Cluster API
	// matches it with the Node of the workload cluster.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	// failureDomain is the failure domain of the OVirtCluster the VM is created in: its oVirt
	// cluster and storage domain replace spec.ovirtcluster and spec.storagedomainname. The
	// manager copies the Machine's spec.failureDomain (set by KubeadmControlPlane and
	// MachineDeployments) here before it creates the VM. Admission refuses a name that the
	// OVirtCluster does not define, and a change once set.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	FailureDomain string `json:"failureDomain,omitempty"`
}

// OVirtMachineInitializationStatus reports the initial provisioning of the machine (Cluster API
// v1beta2 contract).
// +kubebuilder:validation:MinProperties=1
type OVirtMachineInitializationStatus struct {
	// provisioned is true once the VM runs and its Node carries the providerID. It stays true
	// afterwards: a VM that stops, or a machine being deleted, is reported by the Ready condition.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// OVirtMachineStatus is the observed state of an OVirtMachine.
type OVirtMachineStatus struct {
	// conditions report each lifecycle step: CanConnectToOVirt, MachineCreated,
	// MachineDiskResized, MachineNetworkSet, MachineOn, K8sProviderIDSetup, MachineDeleted, the
	// Ready summary (mirrored by Cluster API into the Machine's InfrastructureReady) and Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization is the initial provisioning of the machine (Cluster API contract).
	// +optional
	Initialization OVirtMachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// addresses are the IP addresses the guest agent reports on the VM's NICs, without the
	// control-plane endpoint; when the guest reports none, the addresses of the Node.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// vmID is the id of the VM in oVirt, recorded right after it was created.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	VMID string `json:"vmID,omitempty"`

	// vmName is the name of the VM in oVirt: the OVirtMachine's name or, when that is longer
	// than the 64 characters the Engine accepts, a prefix of it, a dash and 8 hex digits of a
	// hash of namespace/name (63 characters, also the guest host name).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	VMName string `json:"vmName,omitempty"`

	// vmState is the last VM status read from oVirt (down, image_locked, powering_up, up, ...).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	VMState string `json:"vmState,omitempty"`

	// systemDiskIDs are the ids of the disks the VM got from its template. Any other attached
	// disk (a CSI volume) blocks deletion, so that deleting the VM never deletes user data.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	SystemDiskIDs []string `json:"systemDiskIDs,omitempty"`

	// dataDisks are the data disks (spec.dataDisks) the manager created for the VM. Each also
	// carries an ownership marker in its description in oVirt, so that it is known for this
	// VM's own after a status loss.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	DataDisks []DataDiskStatus `json:"dataDisks,omitempty"`

	// hostDevices are the host devices chosen for the VM's Passthrough GPUs (with the host the VM
	// is pinned to and the claims that reserve them), recorded before they are attached.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	HostDevices []HostDeviceStatus `json:"hostDevices,omitempty"`

	// systemDisksPending is true from the creation of the VM (or its adoption by owner marker
	// before its first boot) until its disks are recorded in systemDiskIDs. Disks are recorded
	// only then: a VM first seen after a status loss (clusterctl move, a backup restore) never
	// gets an out-of-band (CSI) disk recorded as a system disk.
	// +optional
	SystemDisksPending *bool `json:"systemDisksPending,omitempty"`

	// bootstrapDataCleared is true once the VM in oVirt holds no bootstrap data (join token, for
	// control planes CA keys): the manager gives it to the VM's run only (oVirt's run once,
	// never stored on the VM), or clears it from the VM's initialization.custom_script once the
	// Node registered when the VM stores it (created by an earlier release, or an Ignition guest
	// with static addresses). The manager's --keep-bootstrap-data stores it at creation and
	// leaves it there.
	// +optional
	BootstrapDataCleared *bool `json:"bootstrapDataCleared,omitempty"`

	// engineInstanceID is the product_info.instance_id of the oVirt Engine on which the VM
	// was found. A VM that another Engine does not know is not taken for deleted: the
	// OVirtProvider may have been pointed at a different Engine.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	EngineInstanceID string `json:"engineInstanceID,omitempty"`

	// diskClone is the clone mode resolved and sent to oVirt when the VM was created.
	// +optional
	DiskClone *bool `json:"diskClone,omitempty"`

	// nodeName is the workload-cluster Node that received the providerID.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName,omitempty"`

	// failureDomain is the failure domain the VM was created in (the Machine's
	// spec.failureDomain).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	FailureDomain string `json:"failureDomain,omitempty"`

	// host is the name of the oVirt host that runs the VM, as last read; empty while it is down.
	// The Machine carries it as the label node.cluster.x-k8s.io/ovirt-host, which Cluster API
	// copies to the Node.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Host string `json:"host,omitempty"`

	// affinityGroups are the names of the oVirt affinity groups the VM was added to.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	AffinityGroups []string `json:"affinityGroups,omitempty"`

	// deprecated groups the fields of the v1beta1 API version that Cluster API no longer reads.
	// They are kept so that v1beta1 clients see them; they will be removed with v1beta1.
	// +optional
	Deprecated *DeprecatedStatus `json:"deprecated,omitempty"`

	// failureReason mirrors status.deprecated.v1beta1.failureReason, for one purpose: the
	// documented reset, `kubectl patch capovm <m> --type=merge -p
	// '{"status":{"failureReason":null,"failureMessage":null}}'`, which kubectl sends to this
	// version, removes it, and removing it clears the failure. Cluster API does not read it
	// (the v1beta2 contract's terminal failure is status.deprecated.v1beta1); it goes with
	// v1beta1. See docs/proposals/2026-12-05-failure-reset-on-v1beta2.md.
	//
	// Deprecated: read status.deprecated.v1beta1.failureReason and the Ready condition.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	FailureReason *string `json:"failureReason,omitempty"`

	// failureMessage mirrors status.deprecated.v1beta1.failureMessage (see failureReason).
	//
	// Deprecated: read status.deprecated.v1beta1.failureMessage and the Ready condition.
	// +optional
	// +kubebuilder:validation:MaxLength=10240
	FailureMessage *string `json:"failureMessage,omitempty"`
}

// DeprecatedStatus groups the deprecated status fields of OVirtMachine and OVirtCluster.
type DeprecatedStatus struct {
	// v1beta1 holds the status fields of the v1beta1 API version.
	// +optional
	V1Beta1 *V1Beta1DeprecatedStatus `json:"v1beta1,omitempty"`
}

// V1Beta1DeprecatedStatus holds the status fields of the v1beta1 API version that v1beta2
// replaced: the conditions with a severity and the terminal failure fields.
type V1Beta1DeprecatedStatus struct {
	// conditions are the conditions in the Cluster API v1beta1 format (with a severity), the
	// status.conditions of v1beta1.
	// +optional
	Conditions clusterv1.Conditions `json:"conditions,omitempty"`

	// failureReason is the v1beta1 status.failureReason: set with a terminal failure, together
	// with Ready=False and the same reason.
	// +optional
	FailureReason *string `json:"failureReason,omitempty"`

	// failureMessage explains failureReason for a human.
	// +optional
	// +kubebuilder:validation:MaxLength=10240
	FailureMessage *string `json:"failureMessage,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ovirtmachines,scope=Namespaced,shortName=capovm,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1beta1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1beta2"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-ovirt"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status",description="VM running and Node registered"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster API Cluster"
// +kubebuilder:printcolumn:name="oVirt State",type="string",JSONPath=".status.vmState",description="VM status in oVirt"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="VM ID",type="string",JSONPath=".status.vmID",priority=1,description="oVirt VM id"
// +kubebuilder:printcolumn:name="VM Name",type="string",JSONPath=".status.vmName",priority=1,description="oVirt VM name"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID",priority=1,description="Provider ID"
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.nodeName",priority=1,description="Workload cluster Node"
// +kubebuilder:printcolumn:name="Host",type="string",JSONPath=".status.host",priority=1,description="oVirt host"
// +kubebuilder:printcolumn:name="Failure Domain",type="string",JSONPath=".status.failureDomain",priority=1,description="Failure domain"

// OVirtMachine is one virtual machine in oVirt. Cluster API creates it from an
// OVirtMachineTemplate when a MachineDeployment or KubeadmControlPlane scales.
type OVirtMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired VM.
	// +required
	Spec OVirtMachineSpec `json:"spec"`
	// status is the observed VM.
	// +optional
	Status OVirtMachineStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions (metav1.Condition).
func (m *OVirtMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the conditions.
func (m *OVirtMachine) SetConditions(conds []metav1.Condition) { m.Status.Conditions = conds }

// GetV1Beta1Conditions returns the deprecated v1beta1 conditions.
func (m *OVirtMachine) GetV1Beta1Conditions() clusterv1.Conditions {
	if m.Status.Deprecated == nil || m.Status.Deprecated.V1Beta1 == nil {
		return nil
	}
	return m.Status.Deprecated.V1Beta1.Conditions
}

// SetV1Beta1Conditions replaces the deprecated v1beta1 conditions.
func (m *OVirtMachine) SetV1Beta1Conditions(conds clusterv1.Conditions) {
	m.Status.Deprecated = setV1Beta1Conditions(m.Status.Deprecated, conds)
}

// Hub marks v1beta2 as the conversion hub (sigs.k8s.io/controller-runtime/pkg/conversion.Hub).
func (*OVirtMachine) Hub() {}

// +kubebuilder:object:root=true

// OVirtMachineList is a list of OVirtMachines.
type OVirtMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the OVirtMachines.
	Items []OVirtMachine `json:"items"`
}
