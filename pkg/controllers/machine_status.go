package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// lifecycleConditions are the OVirtMachine steps in the order they run (product doc §5.3).
var lifecycleConditions = []clusterv1.ConditionType{
	infrav1.MachineCreatedCondition, infrav1.MachineDiskResizedCondition, infrav1.MachineNetworkSetCondition,
	infrav1.MachineOnCondition, infrav1.K8sProviderIDSetupCondition,
}

// provisioned reports status.initialization.provisioned: the machine was Ready once. It never
// goes back to false (Cluster API v1beta2 contract); what happens afterwards shows in Ready.
func provisioned(om *infrav1.OVirtMachine) bool {
	return ptr.Deref(om.Status.Initialization.Provisioned, false)
}

// machineFailure returns status.deprecated.v1beta1.failureReason and failureMessage (the
// v1beta1 status.failureReason/failureMessage) of a terminal failure, or nil.
func machineFailure(om *infrav1.OVirtMachine) (reason, message *string) {
	if d := om.Status.Deprecated; d != nil && d.V1Beta1 != nil {
		return d.V1Beta1.FailureReason, d.V1Beta1.FailureMessage
	}
	return nil, nil
}

// setMachineFailure records a terminal failure in status.deprecated.v1beta1; Ready becomes
// False with the same reason (updateMachineStatus).
func setMachineFailure(om *infrav1.OVirtMachine, reason, message string) {
	if om.Status.Deprecated == nil {
		om.Status.Deprecated = &infrav1.DeprecatedStatus{}
	}
	if om.Status.Deprecated.V1Beta1 == nil {
		om.Status.Deprecated.V1Beta1 = &infrav1.V1Beta1DeprecatedStatus{}
	}
	om.Status.Deprecated.V1Beta1.FailureReason = ptr.To(reason)
	om.Status.Deprecated.V1Beta1.FailureMessage = ptr.To(message)
	// The mirror the documented reset removes (status.failureReason of v1beta2).
	om.Status.FailureReason, om.Status.FailureMessage = ptr.To(reason), ptr.To(message) //nolint:staticcheck // the deprecated mirror is written here, and only here
}

// clearMachineFailure removes a terminal failure.
func clearMachineFailure(om *infrav1.OVirtMachine) {
	if d := om.Status.Deprecated; d != nil && d.V1Beta1 != nil {
		d.V1Beta1.FailureReason, d.V1Beta1.FailureMessage = nil, nil
	}
	om.Status.FailureReason, om.Status.FailureMessage = nil, nil //nolint:staticcheck // and cleared here
}

// updateMachineStatus derives the Ready summary of an OVirtMachine from the conditions the
// phases recorded, in both formats. It is the one place that decides Ready:
//   - a failureReason makes Ready False with that reason (CAPI no longer acts on
//     failureReason, so it must show in the condition CAPI mirrors);
//   - while deleting, MachineDeleted decides, and once it is True Ready is False with reason
//     Deleting (status.initialization.provisioned never goes back to false);
//   - before the machine is first provisioned, the connection is part of readiness;
//     afterwards a connection problem of the management plane does not make a running
//     machine unhealthy (a MachineHealthCheck on InfrastructureReady would otherwise replace
//     every machine of a provider whose password expired);
//   - otherwise the first step that is not True, in lifecycle order, gives reason, severity
//     and message; steps not reached yet are listed False without a reason, as in the product
//     doc's example.
//
// The phases record v1beta1-format conditions (they carry the severity v1beta1 readers see in
// status.conditions); mirrorConditions copies them, with the Ready summary, into
// status.conditions.
func updateMachineStatus(s *machineScope) {
	om := s.om
	if s.vm != nil {
		om.Status.VMState = string(s.vm.Status)
	}
	steps := lifecycleConditions
	if !provisioned(om) {
		steps = append([]clusterv1.ConditionType{infrav1.CanConnectToOVirtCondition}, steps...)
	}
	if om.DeletionTimestamp.IsZero() {
		for _, t := range steps {
			if !v1beta1conditions.Has(om, t) {
				v1beta1conditions.Set(om, &clusterv1.Condition{Type: t, Status: corev1.ConditionFalse, Severity: clusterv1.ConditionSeverityInfo})
			}
		}
	} else {
		steps = []clusterv1.ConditionType{infrav1.MachineDeletedCondition}
	}

	reason, message := machineFailure(om)
	switch {
	case reason != nil:
		v1beta1conditions.MarkFalse(om, clusterv1.ReadyV1Beta1Condition, *reason, clusterv1.ConditionSeverityError, "%s", ptr.Deref(message, ""))
	case !om.DeletionTimestamp.IsZero() && v1beta1conditions.IsTrue(om, infrav1.MachineDeletedCondition):
		// The VM is removed and the finalizer released: the machine is not Ready any more
		// (status.initialization.provisioned stays true, the contract never resets it).
		v1beta1conditions.MarkFalse(om, clusterv1.ReadyV1Beta1Condition, infrav1.DeletingReason, clusterv1.ConditionSeverityInfo,
			"the VM was removed from oVirt; the OVirtMachine is being deleted")
	default:
		setReadyFromSteps(om, steps)
	}
	mirrorConditions(om, om.Generation, ownedMachineConditions)
}

// setReadyFromSteps sets Ready to True when every step is True. Otherwise it copies the first
// step that is not True and has a reason (the step that failed or waits), else the first step
// that is not True.
func setReadyFromSteps(om *infrav1.OVirtMachine, steps []clusterv1.ConditionType) {
	var pending, reasoned *clusterv1.Condition
	var pendingType clusterv1.ConditionType
	for _, t := range steps {
		c := v1beta1conditions.Get(om, t)
		if c != nil && c.Status == corev1.ConditionTrue {
			continue
		}
		if c != nil && c.Reason != "" {
			reasoned = c
			break
		}
		if pending == nil {
			pending, pendingType = c, t
			if pending == nil {
				pending = &clusterv1.Condition{Type: t, Severity: clusterv1.ConditionSeverityInfo}
			}
		}
	}
	switch {
	case reasoned != nil:
		v1beta1conditions.MarkFalse(om, clusterv1.ReadyV1Beta1Condition, reasoned.Reason, reasoned.Severity, "%s", reasoned.Message)
	case pending != nil:
		v1beta1conditions.MarkFalse(om, clusterv1.ReadyV1Beta1Condition, "WaitingFor"+string(pendingType), pending.Severity,
			"waiting for %s", pendingType)
	default:
		v1beta1conditions.MarkTrue(om, clusterv1.ReadyV1Beta1Condition)
	}
}
