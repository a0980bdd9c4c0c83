package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The few Cluster API v1beta1 types this frozen API version uses, kept here with the same JSON
// and schema so that the v1beta1 spoke does not depend on sigs.k8s.io/cluster-api/api/core/v1beta1,
// which Cluster API removes after v1.16. The hub (v1beta2) uses Cluster API's current types.

// ConditionSeverity classifies the reason of a False condition: Error, Warning or Info.
// +kubebuilder:validation:MaxLength=32
type ConditionSeverity string

// The condition severities.
const (
	// ConditionSeverityError: CAPOV gave up; a user has to act.
	ConditionSeverityError ConditionSeverity = "Error"
	// ConditionSeverityWarning: a user should act.
	ConditionSeverityWarning ConditionSeverity = "Warning"
	// ConditionSeverityInfo: CAPOV waits for something that resolves itself.
	ConditionSeverityInfo ConditionSeverity = "Info"
	// ConditionSeverityNone: no severity (the condition is True or Unknown).
	ConditionSeverityNone ConditionSeverity = ""
)

// ConditionType is the type of a condition, in CamelCase.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=256
type ConditionType string

// ReadyCondition is the summary condition of every kind.
const ReadyCondition ConditionType = "Ready"

// Condition is one observation of the state of an object, in the Cluster API v1beta1 format
// (with a severity).
type Condition struct {
	// type of condition in CamelCase.
	// +required
	Type ConditionType `json:"type"`

	// status of the condition, one of True, False, Unknown.
	// +required
	Status corev1.ConditionStatus `json:"status"`

	// severity classifies a False condition: Error, Warning or Info. Set only when status is False.
	// +optional
	Severity ConditionSeverity `json:"severity,omitempty"`

	// lastTransitionTime is when the condition last changed status.
	// +required
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`

	// reason is why the condition last changed, in CamelCase.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`

	// message explains the condition for a human.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=10240
	Message string `json:"message,omitempty"`
}

// Conditions is a list of conditions.
type Conditions []Condition

// Get returns the condition of the given type, or nil.
func (c Conditions) Get(t ConditionType) *Condition {
	for i := range c {
		if c[i].Type == t {
			return &c[i]
		}
	}
	return nil
}

// MachineAddressType is the type of a machine address.
// +kubebuilder:validation:Enum=Hostname;ExternalIP;InternalIP;ExternalDNS;InternalDNS
type MachineAddressType string

// The machine address types.
const (
	MachineHostName    MachineAddressType = "Hostname"
	MachineExternalIP  MachineAddressType = "ExternalIP"
	MachineInternalIP  MachineAddressType = "InternalIP"
	MachineExternalDNS MachineAddressType = "ExternalDNS"
	MachineInternalDNS MachineAddressType = "InternalDNS"
)

// MachineAddress is one address of a machine.
type MachineAddress struct {
	// type is the machine address type, one of Hostname, ExternalIP, InternalIP, ExternalDNS or InternalDNS.
	// +required
	Type MachineAddressType `json:"type"`

	// address is the machine address.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Address string `json:"address"`
}

// APIEndpoint is the address of an API server.
type APIEndpoint struct {
	// host is the hostname on which the API server is serving.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Host string `json:"host"`

	// port is the port on which the API server is serving.
	// +optional
	Port int32 `json:"port"`
}

// IsZero reports whether neither host nor port is set.
func (v APIEndpoint) IsZero() bool { return v.Host == "" && v.Port == 0 }

// ObjectMeta is the metadata a template copies to the objects made from it.
type ObjectMeta struct {
	// labels are copied to each object made from the template.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are copied to each object made from the template.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}
