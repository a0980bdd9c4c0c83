package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPUType is how a GPU reaches the VM.
// +kubebuilder:validation:Enum=VGPU;Passthrough
type GPUType string

// The kinds of GPU a machine can have.
const (
	// GPUTypeVGPU is a mediated device (a slice of a host GPU), asked of the Engine through the
	// VM's mdev_type custom property; the Engine's scheduler picks a host that offers the type.
	GPUTypeVGPU GPUType = "VGPU"
	// GPUTypePassthrough is a whole PCI device of a host given to the VM (with its IOMMU group):
	// the manager picks a host that has enough free devices, pins the VM to it and attaches them
	// before the first start.
	GPUTypePassthrough GPUType = "Passthrough"
)

// Limits of the GPUs of one machine.
const (
	// MaxGPUEntries is the largest number of entries of spec.gpus.
	MaxGPUEntries = 4
	// MaxGPUCount is the largest count of one entry.
	MaxGPUCount = 8
	// MaxGPUsPerMachine is the largest sum of the counts of spec.gpus.
	MaxGPUsPerMachine = 16
	// DefaultGPUResourceName is the extended resource a GPU counts as in the template's capacity.
	DefaultGPUResourceName = "nvidia.com/gpu"
	// MaxHostDevices is the largest number of host devices recorded in status.hostDevices.
	MaxHostDevices = 32
)

// GPU is a GPU of the VM: a vGPU (type VGPU, mdevType) or PCI devices passed through (type
// Passthrough, vendorID and deviceID).
// +kubebuilder:validation:XValidation:rule="self.type != 'VGPU' || (has(self.mdevType) && !has(self.vendorID) && !has(self.deviceID))",message="a VGPU needs mdevType and takes neither vendorID nor deviceID"
// +kubebuilder:validation:XValidation:rule="self.type != 'Passthrough' || (has(self.vendorID) && has(self.deviceID) && !has(self.mdevType) && !has(self.display))",message="a Passthrough GPU needs vendorID and deviceID and takes neither mdevType nor display"
type GPU struct {
	// type is VGPU (a mediated device of a host GPU) or Passthrough (whole PCI devices of one
	// host; the VM is pinned to that host and cannot migrate).
	// +required
	Type GPUType `json:"type"`

	// mdevType is the mediated device type of a VGPU as the host's driver names it (for example
	// nvidia-22); the Engine's hosts list the types they offer under their devices.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9A-Za-z_-]{1,64}$`
	MdevType string `json:"mdevType,omitempty"`

	// display gives a VGPU a display (oVirt's console on the vGPU). Default false (the Engine's
	// nodisplay): Kubernetes nodes are headless. The same for every VGPU entry of the machine.
	// +optional
	Display *bool `json:"display,omitempty"`

	// vendorID is the PCI vendor id of a Passthrough device, four hex digits (10de for NVIDIA).
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{4}$`
	VendorID string `json:"vendorID,omitempty"`

	// deviceID is the PCI device (product) id of a Passthrough device, four hex digits.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{4}$`
	DeviceID string `json:"deviceID,omitempty"`

	// count is the number of such GPUs, 1 to 8. Default 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	Count int32 `json:"count,omitempty"`

	// resourceName is the extended resource the GPUs count as in the OVirtMachineTemplate's
	// status.capacity (for the cluster autoscaler's scale from zero). Default nvidia.com/gpu.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	ResourceName string `json:"resourceName,omitempty"`
}

// GPUCount returns the count of the entry (1 when unset).
func (g GPU) GPUCount() int {
	if g.Count <= 0 {
		return 1
	}
	return int(g.Count)
}

// GPUResourceName returns the entry's extended resource name (nvidia.com/gpu when unset).
func (g GPU) GPUResourceName() string {
	if g.ResourceName == "" {
		return DefaultGPUResourceName
	}
	return g.ResourceName
}

// HasPassthrough reports whether the spec asks for a Passthrough GPU.
func (s *OVirtVMSpec) HasPassthrough() bool {
	for _, g := range s.GPUs {
		if g.Type == GPUTypePassthrough {
			return true
		}
	}
	return false
}

// HostDeviceStatus is a host device the manager chose for the machine's VM.
type HostDeviceStatus struct {
	// host is the name of the oVirt host that has the device; the VM is pinned to it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Host string `json:"host"`

	// hostID is the oVirt id of the host.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	HostID string `json:"hostID"`

	// name is the device's name on the host, for example pci_0000_3b_00_0.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`

	// vendorID and deviceID are the device's PCI ids.
	// +optional
	// +kubebuilder:validation:MaxLength=8
	VendorID string `json:"vendorID,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=8
	DeviceID string `json:"deviceID,omitempty"`

	// iommuGroup is the device's IOMMU group on the host (the Engine attaches a group whole).
	// +optional
	IOMMUGroup *int32 `json:"iommuGroup,omitempty"`

	// claim is the name of the OVirtHostDeviceClaim that reserves the device for this machine.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Claim string `json:"claim,omitempty"`
}

// OVirtHostDeviceClaimSpec is the reservation of one unit of host devices (an IOMMU group, or a
// device without one) of one Engine's host for one machine.
type OVirtHostDeviceClaimSpec struct {
	// engineInstanceID identifies the Engine (its instance id): two OVirtProviders of one Engine
	// claim the same devices.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	EngineInstanceID string `json:"engineInstanceID"`

	// hostID and host are the oVirt host's id and name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	HostID string `json:"hostID"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Host string `json:"host,omitempty"`

	// iommuGroup is the IOMMU group claimed; empty when the unit is a device without one.
	// +optional
	IOMMUGroup *int32 `json:"iommuGroup,omitempty"`

	// devices are the names of the devices of the unit.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=128
	Devices []string `json:"devices"`

	// holder is the OVirtMachine the devices are reserved for.
	// +required
	Holder HostDeviceClaimHolder `json:"holder"`

	// vmID is the holder's VM once it exists.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	VMID string `json:"vmID,omitempty"`
}

// HostDeviceClaimHolder names the OVirtMachine a claim is held for.
type HostDeviceClaimHolder struct {
	// namespace and name of the OVirtMachine.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid of the OVirtMachine: a new object of the same name does not inherit the claim.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ovirthostdeviceclaims,scope=Cluster,shortName=capovhdc
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-ovirt"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:printcolumn:name="Host",type="string",JSONPath=".spec.host",description="oVirt host"
// +kubebuilder:printcolumn:name="Devices",type="string",JSONPath=".spec.devices",description="Host devices"
// +kubebuilder:printcolumn:name="Namespace",type="string",JSONPath=".spec.holder.namespace",description="Holder's namespace"
// +kubebuilder:printcolumn:name="Holder",type="string",JSONPath=".spec.holder.name",description="OVirtMachine holding the devices"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// OVirtHostDeviceClaim reserves host devices (one IOMMU group of one host of one Engine) for one
// OVirtMachine, so that two machines, of any namespace or manager, never get the same device:
// the Engine itself accepts a device configured on two VMs and refuses only the second start.
// The manager creates it before it attaches the devices and deletes it with the machine's VM.
// Its name is derived from the Engine, the host and the group; creating it is the reservation.
type OVirtHostDeviceClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the reservation.
	// +required
	Spec OVirtHostDeviceClaimSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// OVirtHostDeviceClaimList is a list of OVirtHostDeviceClaims.
type OVirtHostDeviceClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the OVirtHostDeviceClaims.
	Items []OVirtHostDeviceClaim `json:"items"`
}
