package v1beta2

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// OVirtMachineTemplateResource is the template of the OVirtMachines Cluster API creates.
type OVirtMachineTemplateResource struct {
	// metadata holds the labels and annotations copied to each new OVirtMachine (and by
	// Cluster API rules further to the Machine and Node).
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the spec of each new OVirtMachine: every OVirtMachine field except providerID.
	// +required
	Spec OVirtVMSpec `json:"spec"`
}

// OVirtMachineTemplateSpec is the desired state of an OVirtMachineTemplate.
type OVirtMachineTemplateSpec struct {
	// template is the machine template. It cannot be changed: to roll out a change, create a
	// new OVirtMachineTemplate and point the MachineDeployment or KubeadmControlPlane at it.
	// +required
	Template OVirtMachineTemplateResource `json:"template"`
}

// OVirtMachineTemplateStatus is the observed state of an OVirtMachineTemplate.
type OVirtMachineTemplateStatus struct {
	// capacity is the cpu, memory, hugepages and GPUs of one machine of this template, used by
	// the cluster autoscaler to scale a MachineDeployment up from zero. Set from
	// spec.template.spec (cpu and memory read from the oVirt template when the spec inherits
	// them; GPUs under each entry's resourceName).
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ovirtmachinetemplates,scope=Namespaced,shortName=capovmt,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1beta1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1beta2"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-ovirt"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:printcolumn:name="Template",type="string",JSONPath=".spec.template.spec.template",description="oVirt template"
// +kubebuilder:printcolumn:name="Provider",type="string",JSONPath=".spec.template.spec.provider",description="OVirtProvider"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// OVirtMachineTemplate is the template of OVirtMachines, referenced by MachineDeployments and
// KubeadmControlPlanes in spec.template.spec.infrastructureRef. Changing it does not change
// existing machines; it is immutable.
type OVirtMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the template.
	// +required
	Spec OVirtMachineTemplateSpec `json:"spec"`
	// status carries the capacity for autoscaling from zero.
	// +optional
	Status OVirtMachineTemplateStatus `json:"status,omitempty"`
}

// Hub marks v1beta2 as the conversion hub.
func (*OVirtMachineTemplate) Hub() {}

// Capacity returns the cpu and memory of one machine of the spec, or nil when the spec
// inherits them from the oVirt template (then they are unknown without asking oVirt).
func (s *OVirtVMSpec) Capacity() corev1.ResourceList {
	out := corev1.ResourceList{}
	if s.CPU != nil {
		vcpus := int64(s.CPU.Sockets) * int64(s.CPU.Cores) * int64(s.CPU.Threads)
		out[corev1.ResourceCPU] = *resource.NewQuantity(vcpus, resource.DecimalSI)
	}
	if s.Memory != nil {
		out[corev1.ResourceMemory] = *resource.NewQuantity(s.Memory.SizeMB*1024*1024, resource.BinarySI)
		if p := s.Performance; p != nil {
			// The VM's memory is backed by host hugepages of that size: the guest can reserve
			// hugepages of it up to its memory.
			switch p.HugePagesKiB {
			case HugePages2Mi:
				out[corev1.ResourceHugePagesPrefix+"2Mi"] = *resource.NewQuantity(s.Memory.SizeMB*1024*1024, resource.BinarySI)
			case HugePages1Gi:
				out[corev1.ResourceHugePagesPrefix+"1Gi"] = *resource.NewQuantity(s.Memory.SizeMB*1024*1024, resource.BinarySI)
			}
		}
	}
	for _, g := range s.GPUs {
		name := corev1.ResourceName(g.GPUResourceName())
		q := out[name]
		q.Add(*resource.NewQuantity(int64(g.GPUCount()), resource.DecimalSI))
		out[name] = q
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// +kubebuilder:object:root=true

// OVirtMachineTemplateList is a list of OVirtMachineTemplates.
type OVirtMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the OVirtMachineTemplates.
	Items []OVirtMachineTemplate `json:"items"`
}
