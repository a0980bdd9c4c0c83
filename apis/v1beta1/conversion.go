package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apimachineryconversion "k8s.io/apimachinery/pkg/conversion"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capov/capov/apis/v1beta2"
)

// The hand-written half of the v1beta1 <-> v1beta2 conversion; conversion-gen writes the rest
// (zz_generated.conversion.go) and calls these for what it cannot map field by field:
//
//   - spec.providerID: *string in v1beta1, string in v1beta2 ("" <-> nil);
//   - status.ready <-> status.initialization.provisioned (false <-> unset);
//   - status.conditions (v1beta1, with a severity) <-> status.deprecated.v1beta1.conditions;
//   - status.v1beta2.conditions <-> status.conditions;
//   - status.failureReason/failureMessage <-> status.deprecated.v1beta1;
//   - OVirtProvider status.ready <-> status.deprecated.v1beta1.ready;
//   - OVirtProvider spec.allowedNamespaces (v1beta2 only: dropped here, kept by the webhook);
//   - the placement fields (v1beta2 only: dropped here, kept by the webhook): OVirtCluster
//     spec.provider, spec.failureDomains, spec.controlPlaneAntiAffinity, status.failureDomains
//     and status.affinityGroups; the VM spec's antiAffinity and affinityGroups (OVirtMachine
//     and OVirtMachineTemplate); OVirtMachine spec.failureDomain, status.failureDomain,
//     status.host and status.affinityGroups;
//   - the addressing fields (v1beta2 only: dropped here, kept by the webhook): a NIC's
//     addressesFromPools, gateway, nameservers, searchDomains, deviceName, dhcp4 and dhcp6, and OVirtCluster
//     spec.controlPlaneEndpointFromPool;
//   - the VM contents (v1beta2 only: dropped here, kept by the webhook): the VM spec's osDisk,
//     dataDisks, tags, customProperties, highAvailability and performance, OVirtMachine
//     status.dataDisks, OVirtCluster spec.tags and OVirtProvider spec.createMissingTags;
//   - the Cluster API types of v1beta1 (local copies) <-> Cluster API's v1beta2 types.
//
// What v1beta1 cannot express (provisioned *false, providerID "", the v1beta2-only fields) is
// restored by the conversion webhook from the conversion-data annotation
// (pkg/webhooks/conversion). Up-conversion here leaves the v1beta2-only fields unset.

// Convert_v1beta1_OVirtMachineSpec_To_v1beta2_OVirtMachineSpec converts the machine spec.
func Convert_v1beta1_OVirtMachineSpec_To_v1beta2_OVirtMachineSpec(in *OVirtMachineSpec, out *v1beta2.OVirtMachineSpec, s apimachineryconversion.Scope) error {
	if err := autoConvert_v1beta1_OVirtMachineSpec_To_v1beta2_OVirtMachineSpec(in, out, s); err != nil {
		return err
	}
	out.ProviderID = ""
	if in.ProviderID != nil {
		out.ProviderID = *in.ProviderID
	}
	return nil
}

// Convert_v1beta2_OVirtMachineSpec_To_v1beta1_OVirtMachineSpec converts the machine spec.
func Convert_v1beta2_OVirtMachineSpec_To_v1beta1_OVirtMachineSpec(in *v1beta2.OVirtMachineSpec, out *OVirtMachineSpec, s apimachineryconversion.Scope) error {
	if err := autoConvert_v1beta2_OVirtMachineSpec_To_v1beta1_OVirtMachineSpec(in, out, s); err != nil {
		return err
	}
	out.ProviderID = nil
	if in.ProviderID != "" {
		id := in.ProviderID
		out.ProviderID = &id
	}
	return nil
}

// Convert_v1beta2_OVirtVMSpec_To_v1beta1_OVirtVMSpec converts the VM spec of a machine or
// template. antiAffinity and affinityGroups have no v1beta1 field and are dropped (the
// conversion webhook keeps them in the conversion-data annotation).
func Convert_v1beta2_OVirtVMSpec_To_v1beta1_OVirtVMSpec(in *v1beta2.OVirtVMSpec, out *OVirtVMSpec, s apimachineryconversion.Scope) error {
	return autoConvert_v1beta2_OVirtVMSpec_To_v1beta1_OVirtVMSpec(in, out, s)
}

// Convert_v1beta2_OVirtClusterSpec_To_v1beta1_OVirtClusterSpec converts the cluster spec.
// provider, failureDomains and controlPlaneAntiAffinity have no v1beta1 field and are dropped
// (the conversion webhook keeps them in the conversion-data annotation).
func Convert_v1beta2_OVirtClusterSpec_To_v1beta1_OVirtClusterSpec(in *v1beta2.OVirtClusterSpec, out *OVirtClusterSpec, s apimachineryconversion.Scope) error {
	return autoConvert_v1beta2_OVirtClusterSpec_To_v1beta1_OVirtClusterSpec(in, out, s)
}

// Convert_v1beta1_OVirtMachineStatus_To_v1beta2_OVirtMachineStatus converts the machine status.
func Convert_v1beta1_OVirtMachineStatus_To_v1beta2_OVirtMachineStatus(in *OVirtMachineStatus, out *v1beta2.OVirtMachineStatus, s apimachineryconversion.Scope) error {
	if err := autoConvert_v1beta1_OVirtMachineStatus_To_v1beta2_OVirtMachineStatus(in, out, s); err != nil {
		return err
	}
	out.Initialization = v1beta2.OVirtMachineInitializationStatus{Provisioned: provisionedFromReady(in.Ready)}
	out.Conditions = conditionsFromV1Beta2Status(in.V1Beta2)
	out.Deprecated = deprecatedFromV1Beta1(in.Conditions, in.FailureReason, in.FailureMessage)
	// v1beta2 mirrors the failure in status.failureReason/failureMessage (set by the generated
	// conversion from the fields of the same name), for the documented reset.
	return nil
}

// Convert_v1beta2_OVirtMachineStatus_To_v1beta1_OVirtMachineStatus converts the machine status.
// The failure comes from status.deprecated.v1beta1, where the manager keeps it; the v1beta2
// mirror (status.failureReason) fills in only when that has none.
func Convert_v1beta2_OVirtMachineStatus_To_v1beta1_OVirtMachineStatus(in *v1beta2.OVirtMachineStatus, out *OVirtMachineStatus, s apimachineryconversion.Scope) error {
	if err := autoConvert_v1beta2_OVirtMachineStatus_To_v1beta1_OVirtMachineStatus(in, out, s); err != nil {
		return err
	}
	out.Ready = in.Initialization.Provisioned != nil && *in.Initialization.Provisioned
	out.V1Beta2 = v1beta2StatusFromConditions(in.Conditions)
	conds, reason, message := v1beta1FromDeprecated(in.Deprecated)
	out.Conditions = conds
	if reason != nil || message != nil {
		out.FailureReason, out.FailureMessage = reason, message
	}
	return nil
}

// Convert_v1beta1_OVirtClusterStatus_To_v1beta2_OVirtClusterStatus converts the cluster status.
func Convert_v1beta1_OVirtClusterStatus_To_v1beta2_OVirtClusterStatus(in *OVirtClusterStatus, out *v1beta2.OVirtClusterStatus, s apimachineryconversion.Scope) error {
	if err := autoConvert_v1beta1_OVirtClusterStatus_To_v1beta2_OVirtClusterStatus(in, out, s); err != nil {
		return err
	}
	out.Initialization = v1beta2.OVirtClusterInitializationStatus{Provisioned: provisionedFromReady(in.Ready)}
	out.Conditions = conditionsFromV1Beta2Status(in.V1Beta2)
	out.Deprecated = deprecatedFromV1Beta1(in.Conditions, in.FailureReason, in.FailureMessage)
	return nil
}

// Convert_v1beta2_OVirtClusterStatus_To_v1beta1_OVirtClusterStatus converts the cluster status.
func Convert_v1beta2_OVirtClusterStatus_To_v1beta1_OVirtClusterStatus(in *v1beta2.OVirtClusterStatus, out *OVirtClusterStatus, s apimachineryconversion.Scope) error {
	if err := autoConvert_v1beta2_OVirtClusterStatus_To_v1beta1_OVirtClusterStatus(in, out, s); err != nil {
		return err
	}
	out.Ready = in.Initialization.Provisioned != nil && *in.Initialization.Provisioned
	out.V1Beta2 = v1beta2StatusFromConditions(in.Conditions)
	out.Conditions, out.FailureReason, out.FailureMessage = v1beta1FromDeprecated(in.Deprecated)
	return nil
}

// Convert_v1beta2_OVirtProviderSpec_To_v1beta1_OVirtProviderSpec converts the provider spec.
// spec.allowedNamespaces has no v1beta1 field: the conversion webhook keeps it in the
// conversion-data annotation of the v1beta1 object (pkg/webhooks/conversion).
func Convert_v1beta2_OVirtProviderSpec_To_v1beta1_OVirtProviderSpec(in *v1beta2.OVirtProviderSpec, out *OVirtProviderSpec, s apimachineryconversion.Scope) error {
	return autoConvert_v1beta2_OVirtProviderSpec_To_v1beta1_OVirtProviderSpec(in, out, s)
}

// Convert_v1beta1_OVirtProviderStatus_To_v1beta2_OVirtProviderStatus converts the provider
// status. The status round trip is lossless on its own: an OVirtProvider's conversion-data
// annotation, when it has one, holds only spec.allowedNamespaces (never its password or CA
// bundles).
func Convert_v1beta1_OVirtProviderStatus_To_v1beta2_OVirtProviderStatus(in *OVirtProviderStatus, out *v1beta2.OVirtProviderStatus, s apimachineryconversion.Scope) error {
	if err := autoConvert_v1beta1_OVirtProviderStatus_To_v1beta2_OVirtProviderStatus(in, out, s); err != nil {
		return err
	}
	out.Conditions = conditionsFromV1Beta2Status(in.V1Beta2)
	out.Deprecated = nil
	if in.Ready || in.Conditions != nil || in.FailureReason != nil || in.FailureMessage != nil {
		out.Deprecated = &v1beta2.OVirtProviderDeprecatedStatus{V1Beta1: &v1beta2.OVirtProviderV1Beta1DeprecatedStatus{
			Ready:          in.Ready,
			Conditions:     conditionsToHub(in.Conditions),
			FailureReason:  in.FailureReason,
			FailureMessage: in.FailureMessage,
		}}
	}
	return nil
}

// Convert_v1beta2_OVirtProviderStatus_To_v1beta1_OVirtProviderStatus converts the provider status.
func Convert_v1beta2_OVirtProviderStatus_To_v1beta1_OVirtProviderStatus(in *v1beta2.OVirtProviderStatus, out *OVirtProviderStatus, s apimachineryconversion.Scope) error {
	if err := autoConvert_v1beta2_OVirtProviderStatus_To_v1beta1_OVirtProviderStatus(in, out, s); err != nil {
		return err
	}
	out.V1Beta2 = v1beta2StatusFromConditions(in.Conditions)
	out.Ready, out.Conditions, out.FailureReason, out.FailureMessage = false, nil, nil, nil
	if in.Deprecated != nil && in.Deprecated.V1Beta1 != nil {
		d := in.Deprecated.V1Beta1
		out.Ready, out.Conditions, out.FailureReason, out.FailureMessage = d.Ready, conditionsFromHub(d.Conditions), d.FailureReason, d.FailureMessage
	}
	return nil
}

// Convert_v1beta1_APIEndpoint_To_v1beta2_APIEndpoint converts the control-plane endpoint.
func Convert_v1beta1_APIEndpoint_To_v1beta2_APIEndpoint(in *APIEndpoint, out *clusterv1.APIEndpoint, _ apimachineryconversion.Scope) error {
	out.Host, out.Port = in.Host, in.Port
	return nil
}

// Convert_v1beta2_APIEndpoint_To_v1beta1_APIEndpoint converts the control-plane endpoint.
func Convert_v1beta2_APIEndpoint_To_v1beta1_APIEndpoint(in *clusterv1.APIEndpoint, out *APIEndpoint, _ apimachineryconversion.Scope) error {
	out.Host, out.Port = in.Host, in.Port
	return nil
}

// Convert_v1beta1_ObjectMeta_To_v1beta2_ObjectMeta converts template metadata.
func Convert_v1beta1_ObjectMeta_To_v1beta2_ObjectMeta(in *ObjectMeta, out *clusterv1.ObjectMeta, _ apimachineryconversion.Scope) error {
	out.Labels, out.Annotations = in.Labels, in.Annotations
	return nil
}

// Convert_v1beta2_ObjectMeta_To_v1beta1_ObjectMeta converts template metadata.
func Convert_v1beta2_ObjectMeta_To_v1beta1_ObjectMeta(in *clusterv1.ObjectMeta, out *ObjectMeta, _ apimachineryconversion.Scope) error {
	out.Labels, out.Annotations = in.Labels, in.Annotations
	return nil
}

// Convert_v1beta1_MachineAddress_To_v1beta2_MachineAddress converts one machine address.
func Convert_v1beta1_MachineAddress_To_v1beta2_MachineAddress(in *MachineAddress, out *clusterv1.MachineAddress, _ apimachineryconversion.Scope) error {
	out.Type, out.Address = clusterv1.MachineAddressType(in.Type), in.Address
	return nil
}

// Convert_v1beta2_MachineAddress_To_v1beta1_MachineAddress converts one machine address.
func Convert_v1beta2_MachineAddress_To_v1beta1_MachineAddress(in *clusterv1.MachineAddress, out *MachineAddress, _ apimachineryconversion.Scope) error {
	out.Type, out.Address = MachineAddressType(in.Type), in.Address
	return nil
}

// provisionedFromReady maps ready to provisioned: true stays true, false is "not provisioned
// yet" (unset). The conversion webhook restores an explicit false from its annotation.
func provisionedFromReady(ready bool) *bool {
	if !ready {
		return nil
	}
	t := true
	return &t
}

func conditionsFromV1Beta2Status(in *OVirtV1Beta2Status) []metav1.Condition {
	if in == nil {
		return nil
	}
	return in.Conditions
}

func v1beta2StatusFromConditions(in []metav1.Condition) *OVirtV1Beta2Status {
	if in == nil {
		return nil
	}
	return &OVirtV1Beta2Status{Conditions: in}
}

func deprecatedFromV1Beta1(conds Conditions, reason, message *string) *v1beta2.DeprecatedStatus {
	if conds == nil && reason == nil && message == nil {
		return nil
	}
	return &v1beta2.DeprecatedStatus{V1Beta1: &v1beta2.V1Beta1DeprecatedStatus{
		Conditions: conditionsToHub(conds), FailureReason: reason, FailureMessage: message,
	}}
}

func v1beta1FromDeprecated(in *v1beta2.DeprecatedStatus) (Conditions, *string, *string) {
	if in == nil || in.V1Beta1 == nil {
		return nil, nil, nil
	}
	return conditionsFromHub(in.V1Beta1.Conditions), in.V1Beta1.FailureReason, in.V1Beta1.FailureMessage
}

// conditionsToHub converts v1beta1 conditions to Cluster API's v1beta1-format condition type of
// the v1beta2 API (the type of status.deprecated.v1beta1.conditions).
func conditionsToHub(in Conditions) clusterv1.Conditions {
	if in == nil {
		return nil
	}
	out := make(clusterv1.Conditions, len(in))
	for i, c := range in {
		out[i] = clusterv1.Condition{
			Type: clusterv1.ConditionType(c.Type), Status: c.Status, Severity: clusterv1.ConditionSeverity(c.Severity),
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		}
	}
	return out
}

func conditionsFromHub(in clusterv1.Conditions) Conditions {
	if in == nil {
		return nil
	}
	out := make(Conditions, len(in))
	for i, c := range in {
		out[i] = Condition{
			Type: ConditionType(c.Type), Status: c.Status, Severity: ConditionSeverity(c.Severity),
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		}
	}
	return out
}

// The three functions below exist because conversion-gen pairs the local Cluster API copies
// with the metav1 types of the same name. The generated code calls the Condition pair on its
// way; the status conversions above then replace what they produced with the right mapping.

// Convert_v1beta1_Condition_To_v1_Condition converts a v1beta1 condition to a metav1 one
// (the severity is dropped).
func Convert_v1beta1_Condition_To_v1_Condition(in *Condition, out *metav1.Condition, _ apimachineryconversion.Scope) error {
	out.Type, out.Status, out.LastTransitionTime = string(in.Type), metav1.ConditionStatus(in.Status), in.LastTransitionTime
	out.Reason, out.Message = in.Reason, in.Message
	return nil
}

// Convert_v1_Condition_To_v1beta1_Condition converts a metav1 condition to a v1beta1 one.
func Convert_v1_Condition_To_v1beta1_Condition(in *metav1.Condition, out *Condition, _ apimachineryconversion.Scope) error {
	out.Type, out.Status, out.LastTransitionTime = ConditionType(in.Type), corev1.ConditionStatus(in.Status), in.LastTransitionTime
	out.Reason, out.Message = in.Reason, in.Message
	return nil
}

// Convert_v1_ObjectMeta_To_v1beta1_ObjectMeta keeps the labels and annotations of an object's
// metadata.
func Convert_v1_ObjectMeta_To_v1beta1_ObjectMeta(in *metav1.ObjectMeta, out *ObjectMeta, _ apimachineryconversion.Scope) error {
	out.Labels, out.Annotations = in.Labels, in.Annotations
	return nil
}

// Convert_v1beta2_NIC_To_v1beta1_NIC converts a NIC. Its addressing (addressesFromPools,
// gateway, nameservers, searchDomains, dhcp4, dhcp6) has no v1beta1 field and is dropped (the
// conversion webhook keeps it in the conversion-data annotation).
func Convert_v1beta2_NIC_To_v1beta1_NIC(in *v1beta2.NIC, out *NIC, s apimachineryconversion.Scope) error {
	return autoConvert_v1beta2_NIC_To_v1beta1_NIC(in, out, s)
}
