package controllers

import (
	corev1 "k8s.io/api/core/v1"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/deprecated/v1beta1/conditions"

	infrav1 "github.com/capov/capov/apis/v1beta1"
)

// lifecycleConditions are the OVirtMachine steps in the order they run (product doc §5.3).
var lifecycleConditions = []clusterv1beta1.ConditionType{
	infrav1.MachineCreatedCondition, infrav1.MachineDiskResizedCondition, infrav1.MachineNetworkSetCondition,
	infrav1.MachineOnCondition, infrav1.K8sProviderIDSetupCondition,
}

// updateMachineStatus derives the Ready summary of an OVirtMachine from the conditions the
// phases recorded. It is the one place that decides Ready:
//   - a failureReason makes Ready False with that reason (CAPI no longer acts on
//     failureReason, so it must show in the condition CAPI mirrors);
//   - while deleting, MachineDeleted decides;
//   - before the machine is first ready, the connection is part of readiness; afterwards a
//     connection problem of the management plane does not make a running machine unhealthy
//     (a MachineHealthCheck on InfrastructureReady would otherwise replace every machine of a
//     provider whose password expired);
//   - otherwise the first step that is not True, in lifecycle order, gives reason, severity
//     and message; steps not reached yet are listed False without a reason, as in the product
//     doc's example.
func updateMachineStatus(s *machineScope) {
	om := s.om
	if s.vm != nil {
		om.Status.VMState = string(s.vm.Status)
	}
	steps := lifecycleConditions
	if !om.Status.Ready {
		steps = append([]clusterv1beta1.ConditionType{infrav1.CanConnectToOVirtCondition}, steps...)
	}
	if om.DeletionTimestamp.IsZero() {
		for _, t := range steps {
			if !v1beta1conditions.Has(om, t) {
				v1beta1conditions.Set(om, &clusterv1beta1.Condition{Type: t, Status: corev1.ConditionFalse, Severity: clusterv1beta1.ConditionSeverityInfo})
			}
		}
	} else {
		steps = []clusterv1beta1.ConditionType{infrav1.MachineDeletedCondition}
	}

	switch {
	case om.Status.FailureReason != nil:
		msg := ""
		if om.Status.FailureMessage != nil {
			msg = *om.Status.FailureMessage
		}
		v1beta1conditions.MarkFalse(om, clusterv1beta1.ReadyCondition, *om.Status.FailureReason, clusterv1beta1.ConditionSeverityError, "%s", msg)
	default:
		setReadyFromSteps(om, steps)
	}
	syncV1Beta2Ready(om, om.Generation)
}

// setReadyFromSteps sets Ready to True when every step is True. Otherwise it copies the first
// step that is not True and has a reason (the step that failed or waits), else the first step
// that is not True.
func setReadyFromSteps(om *infrav1.OVirtMachine, steps []clusterv1beta1.ConditionType) {
	var pending, reasoned *clusterv1beta1.Condition
	var pendingType clusterv1beta1.ConditionType
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
				pending = &clusterv1beta1.Condition{Type: t, Severity: clusterv1beta1.ConditionSeverityInfo}
			}
		}
	}
	switch {
	case reasoned != nil:
		v1beta1conditions.MarkFalse(om, clusterv1beta1.ReadyCondition, reasoned.Reason, reasoned.Severity, "%s", reasoned.Message)
	case pending != nil:
		v1beta1conditions.MarkFalse(om, clusterv1beta1.ReadyCondition, "WaitingFor"+string(pendingType), pending.Severity,
			"waiting for %s", pendingType)
	default:
		v1beta1conditions.MarkTrue(om, clusterv1beta1.ReadyCondition)
	}
}
