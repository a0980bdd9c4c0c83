package controllers

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// bothFormats is an object with status.conditions (metav1) and
// status.deprecated.v1beta1.conditions (the v1beta1 format, with a severity).
type bothFormats interface {
	conditions.Setter
	v1beta1conditions.Setter
}

// Reasons of a status.conditions entry whose v1beta1 counterpart has none (a metav1.Condition
// needs one).
const (
	// reasonDone goes with a lifecycle condition that is True.
	reasonDone = "Done"
	// reasonPending goes with a lifecycle condition not reached yet (False without a reason in
	// the v1beta1 format, as in the product doc's example).
	reasonPending = "Pending"
	// reasonReadyUnknown goes with Ready before anything was recorded.
	reasonReadyUnknown = "ReadyUnknown"
	// reasonNotReady goes with Ready False whose v1beta1 summary has no reason.
	reasonNotReady = "NotReady"
)

// mirrorConditions copies the v1beta1-format conditions the phases recorded (types, in this
// order) into status.conditions with the same status, reason and message, and derives Ready
// there from the v1beta1 Ready summary: Cluster API mirrors status.conditions Ready into the
// Machine's (or Cluster's) InfrastructureReady, so the reason and message of the failing step
// reach the Machine unchanged. A type without a v1beta1 condition is removed from
// status.conditions. Paused is left alone (util/paused owns it).
func mirrorConditions(obj bothFormats, generation int64, types []clusterv1.ConditionType) {
	for _, t := range types {
		if t == clusterv1.ReadyV1Beta1Condition {
			continue
		}
		c := v1beta1conditions.Get(obj, t)
		if c == nil {
			conditions.Delete(obj, string(t))
			continue
		}
		m := metav1.Condition{Type: string(t), Status: metav1.ConditionStatus(c.Status), Reason: c.Reason, Message: c.Message, ObservedGeneration: generation}
		if m.Reason == "" {
			m.Reason = reasonPending
			if c.Status == corev1.ConditionTrue {
				m.Reason = reasonDone
			}
		}
		conditions.Set(obj, m)
	}
	ready := v1beta1conditions.Get(obj, clusterv1.ReadyV1Beta1Condition)
	c := metav1.Condition{Type: infrav1.ReadyCondition, ObservedGeneration: generation}
	switch {
	case ready == nil:
		c.Status, c.Reason = metav1.ConditionUnknown, reasonReadyUnknown
	case ready.Status == corev1.ConditionTrue:
		c.Status, c.Reason = metav1.ConditionTrue, infrav1.ReadyReason
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionStatus(ready.Status), ready.Reason, ready.Message
		if c.Reason == "" {
			c.Reason = reasonNotReady
		}
	}
	conditions.Set(obj, c)
}

// ownedTypes returns the status.conditions types of the v1beta1 types, plus Ready.
func ownedTypes(types []clusterv1.ConditionType) []string {
	out := make([]string, 0, len(types)+1)
	for _, t := range types {
		out = append(out, string(t))
	}
	if !slices.Contains(out, infrav1.ReadyCondition) {
		out = append(out, infrav1.ReadyCondition)
	}
	return out
}

// deferredPatchTimeout bounds the status patch at the end of a reconcile.
const deferredPatchTimeout = 15 * time.Second

// deferredPatchContext returns the context of the deferred status patch: not cancelled with the
// reconcile's context (a reconcile cut short by --reconcile-timeout or a shutdown must still
// record what it did, such as the id of a VM it just created) but bounded on its own.
func deferredPatchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), deferredPatchTimeout)
}
