package v1beta2

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// RemediationStrategyType is how an OVirtRemediation remediates.
// +kubebuilder:validation:Enum=Reboot
type RemediationStrategyType string

// RemediationStrategyReboot reboots the VM through the Engine (reboot, then, within the same
// attempt, reset or stop and start when the guest shows no sign of a restart) and hands the
// Machine to its owner after the retries.
const RemediationStrategyReboot RemediationStrategyType = "Reboot"

// Defaults and limits of the remediation strategy.
const (
	// DefaultRemediationRetryLimit is the default number of attempts after the first.
	DefaultRemediationRetryLimit = 1
	// MaxRemediationRetryLimit is the largest retryLimit.
	MaxRemediationRetryLimit = 10
	// MaxRemediationAttempts is the largest number of attempts recorded in status.attempts.
	MaxRemediationAttempts = MaxRemediationRetryLimit + 1
)

// RemediationStrategy is how and how often a Machine is remediated before it is handed to its
// owner.
// +kubebuilder:validation:XValidation:rule="!has(self.timeout) || (duration(self.timeout) >= duration('10s') && duration(self.timeout) <= duration('1h'))",message="timeout must be between 10s and 1h (a reboot of a node takes minutes: 5m is the default)",fieldPath=".timeout"
type RemediationStrategy struct {
	// type is the remediation: Reboot (the only one, the default).
	// +optional
	Type RemediationStrategyType `json:"type,omitempty"`

	// retryLimit is how many attempts follow the first when the Machine is still unhealthy after
	// timeout, 0 to 10 (default 1). After the last one the Machine is handed to its owner
	// (MachineSet or KubeadmControlPlane), which replaces it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	RetryLimit *int32 `json:"retryLimit,omitempty"`

	// timeout is how long an attempt waits for the Machine to become healthy again (the
	// MachineHealthCheck then deletes this request) before the next attempt, from 10s to 1h
	// (default 5m; give it the time a node needs to boot and its kubelet to post Ready).
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// OVirtRemediationSpec is the desired remediation of one Machine.
type OVirtRemediationSpec struct {
	// strategy is how the Machine is remediated. Empty: reboot, one retry, 5 minutes each.
	// +optional
	Strategy *RemediationStrategy `json:"strategy,omitempty"`
}

// RetryLimit returns the strategy's retry limit with its default.
func (s *OVirtRemediationSpec) RetryLimit() int {
	if s.Strategy == nil || s.Strategy.RetryLimit == nil {
		return DefaultRemediationRetryLimit
	}
	return int(*s.Strategy.RetryLimit)
}

// DefaultRemediationTimeout is the default time an attempt waits for the Machine to be healthy.
const DefaultRemediationTimeout = 5 * time.Minute

// Timeout returns the strategy's timeout with its default.
func (s *OVirtRemediationSpec) Timeout() time.Duration {
	if s.Strategy == nil || s.Strategy.Timeout == nil || s.Strategy.Timeout.Duration <= 0 {
		return DefaultRemediationTimeout
	}
	return s.Strategy.Timeout.Duration
}

// RemediationPhase is the phase of an OVirtRemediation.
type RemediationPhase string

// The phases of an OVirtRemediation.
const (
	// RemediationPhaseRunning: an attempt is under way (the VM is being rebooted or the request
	// waits the timeout for the Machine to become healthy).
	RemediationPhaseRunning RemediationPhase = "Running"
	// RemediationPhaseWaiting: no attempt can be made now (the Engine is unreachable, the
	// Cluster is paused, or rebooting this control-plane machine would lose etcd quorum).
	RemediationPhaseWaiting RemediationPhase = "Waiting"
	// RemediationPhaseWaitingForOwner: the attempts are spent (or a reboot cannot help): the
	// Machine is marked for its owner to replace (OwnerRemediated=False).
	RemediationPhaseWaitingForOwner RemediationPhase = "WaitingForOwner"
)

// RemediationAction is what an attempt did to the VM.
type RemediationAction string

// The actions of a remediation attempt.
const (
	// RemediationActionReboot is the Engine's reboot (through the guest: ACPI or the agent); a
	// guest that shows no sign of a restart is then reset within the same attempt (escalatedAt).
	RemediationActionReboot RemediationAction = "Reboot"
	// RemediationActionReset is the Engine's reset (a hard reset of the virtual hardware).
	RemediationActionReset RemediationAction = "Reset"
	// RemediationActionStopStart powers the VM off and on (when the Engine cannot reset).
	RemediationActionStopStart RemediationAction = "StopStart"
	// RemediationActionStart starts a VM found down.
	RemediationActionStart RemediationAction = "Start"
	// RemediationActionNone: the VM was in a state no power action helps (not responding,
	// unknown, migrating, locked): the attempt only waited.
	RemediationActionNone RemediationAction = "None"
)

// RemediationStage is what an attempt still does before it only waits for its timeout.
// +kubebuilder:validation:Enum=AwaitingRestart;Stopping
type RemediationStage string

// The stages of a remediation attempt.
const (
	// RemediationStageAwaitingRestart: the Engine was asked to reboot the VM, and the attempt
	// waits for a sign that the guest restarted (the Node's boot id changed, or the VM seen
	// down, wait_for_launch or powering_up). Without one within min(2m, timeout/2) of the
	// request, the same attempt resets the VM (or stops and starts it): a hung guest ignores the
	// Engine's reboot.
	RemediationStageAwaitingRestart RemediationStage = "AwaitingRestart"
	// RemediationStageStopping: the VM of a stop and start is being stopped; it is started once
	// down.
	RemediationStageStopping RemediationStage = "Stopping"
)

// RemediationAttempt records one attempt.
type RemediationAttempt struct {
	// action is what was done.
	// +required
	Action RemediationAction `json:"action"`
	// requestedAt is when it was asked of the Engine.
	// +required
	RequestedAt metav1.Time `json:"requestedAt"`
	// vmStatus is the VM's status in oVirt when the attempt started.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	VMStatus string `json:"vmStatus,omitempty"`
	// result is what came of it: the Engine's refusal, a fallback, the sign that the guest
	// restarted or its absence, or the timeout.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Result string `json:"result,omitempty"`
	// stage is what the attempt still does before it only waits for its timeout:
	// AwaitingRestart (a reboot waits for a sign that the guest restarted, else the attempt
	// resets the VM) or Stopping (the VM of a stop and start is started once down). Empty:
	// nothing more.
	// +optional
	Stage RemediationStage `json:"stage,omitempty"`
	// nodeBootID is the boot id (status.nodeInfo.bootID) of the Machine's workload Node when the
	// attempt was requested; another boot id later proves that the guest restarted. Empty when
	// the workload cluster or the Node could not be read: then only the VM's status can prove it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	NodeBootID string `json:"nodeBootID,omitempty"`
	// escalatedAt is when the attempt went on with a reset (or a stop and start) because the
	// guest showed no sign of a restart within min(2m, timeout/2) of the reboot. The attempt's
	// timeout still counts from requestedAt.
	// +optional
	EscalatedAt *metav1.Time `json:"escalatedAt,omitempty"`
}

// OVirtRemediationStatus is the observed state of an OVirtRemediation.
type OVirtRemediationStatus struct {
	// phase is Running, Waiting or WaitingForOwner.
	// +optional
	Phase RemediationPhase `json:"phase,omitempty"`

	// retryCount is the number of attempts made after the first.
	// +optional
	RetryCount int32 `json:"retryCount,omitempty"`

	// lastRemediated is when the last attempt started.
	// +optional
	LastRemediated *metav1.Time `json:"lastRemediated,omitempty"`

	// attempts are the attempts made, oldest first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=11
	Attempts []RemediationAttempt `json:"attempts,omitempty"`

	// conditions: Ready (the Machine is being remediated or was handed over), CanConnectToOVirt,
	// OwnershipProven (the VM carries this machine's proven owner marker), Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ovirtremediations,scope=Namespaced,shortName=capovr,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1beta2"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-ovirt"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase",description="Remediation phase"
// +kubebuilder:printcolumn:name="Retries",type="integer",JSONPath=".status.retryCount",description="Attempts after the first"
// +kubebuilder:printcolumn:name="Last",type="date",JSONPath=".status.lastRemediated",description="Last attempt"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// OVirtRemediation is an external remediation request of Cluster API's MachineHealthCheck for
// one Machine (of the same name): the manager reboots the Machine's VM through the Engine, up to
// retryLimit more times, and then hands the Machine to its owner. The MachineHealthCheck
// creates it from an OVirtRemediationTemplate and deletes it when the Machine is healthy again.
type OVirtRemediation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the remediation asked for.
	// +optional
	Spec OVirtRemediationSpec `json:"spec,omitempty"`
	// status is the progress of the remediation.
	// +optional
	Status OVirtRemediationStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions (Cluster API's conditions utilities).
func (r *OVirtRemediation) GetConditions() []metav1.Condition { return r.Status.Conditions }

// SetConditions replaces the conditions.
func (r *OVirtRemediation) SetConditions(c []metav1.Condition) { r.Status.Conditions = c }

// +kubebuilder:object:root=true

// OVirtRemediationList is a list of OVirtRemediations.
type OVirtRemediationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the OVirtRemediations.
	Items []OVirtRemediation `json:"items"`
}

// OVirtRemediationTemplateResource is the template of the OVirtRemediations a
// MachineHealthCheck creates.
type OVirtRemediationTemplateResource struct {
	// metadata holds labels and annotations copied to each OVirtRemediation.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec is the spec of each OVirtRemediation.
	// +required
	Spec OVirtRemediationSpec `json:"spec"`
}

// OVirtRemediationTemplateSpec is the desired state of an OVirtRemediationTemplate.
type OVirtRemediationTemplateSpec struct {
	// template is the remediation template.
	// +required
	Template OVirtRemediationTemplateResource `json:"template"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ovirtremediationtemplates,scope=Namespaced,shortName=capovrt,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1beta2"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-ovirt"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:printcolumn:name="Strategy",type="string",JSONPath=".spec.template.spec.strategy.type",description="Remediation strategy"
// +kubebuilder:printcolumn:name="Retry Limit",type="integer",JSONPath=".spec.template.spec.strategy.retryLimit",description="Attempts after the first"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// OVirtRemediationTemplate is referenced by a MachineHealthCheck's
// spec.remediation.templateRef: the MachineHealthCheck creates an OVirtRemediation from it for
// each unhealthy Machine instead of having the Machine replaced at once.
type OVirtRemediationTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the template.
	// +required
	Spec OVirtRemediationTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// OVirtRemediationTemplateList is a list of OVirtRemediationTemplates.
type OVirtRemediationTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the OVirtRemediationTemplates.
	Items []OVirtRemediationTemplate `json:"items"`
}
