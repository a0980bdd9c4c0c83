package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/deprecated/v1beta1/conditions"
	v1beta2conditions "sigs.k8s.io/cluster-api/util/deprecated/v1beta1/conditions/v1beta2"

	infrav1 "github.com/capov/capov/apis/v1beta1"
)

// v1beta2Object has both condition formats.
type v1beta2Object interface {
	v1beta1conditions.Setter
	v1beta2conditions.Setter
}

// syncV1Beta2Ready mirrors the v1beta1 Ready summary into status.v1beta2.conditions, which
// Cluster API reads first when it builds the Machine's InfrastructureReady condition: the
// reason and message of the failing step reach the Machine unchanged.
func syncV1Beta2Ready(obj v1beta2Object, generation int64) {
	ready := v1beta1conditions.Get(obj, clusterv1beta1.ReadyCondition)
	c := metav1.Condition{Type: infrav1.ReadyV1Beta2Condition, ObservedGeneration: generation}
	switch {
	case ready == nil:
		c.Status, c.Reason = metav1.ConditionUnknown, "ReadyUnknown"
	case ready.Status == corev1.ConditionTrue:
		c.Status, c.Reason = metav1.ConditionTrue, "Ready"
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionStatus(ready.Status), ready.Reason, ready.Message
		if c.Reason == "" {
			c.Reason = "NotReady"
		}
	}
	v1beta2conditions.Set(obj, c)
}

// deferredPatchTimeout bounds the status patch at the end of a reconcile.
const deferredPatchTimeout = 15 * time.Second

// deferredPatchContext returns the context of the deferred status patch: not cancelled with the
// reconcile's context (a reconcile cut short by --reconcile-timeout or a shutdown must still
// record what it did, such as the id of a VM it just created) but bounded on its own.
func deferredPatchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), deferredPatchTimeout)
}
