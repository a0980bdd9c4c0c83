package controllers

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/webhooks/conversion"
)

// toV1Beta1 is what a v1beta1 client reads: the conversion webhook's hub-to-spoke conversion.
func toV1Beta1(t *testing.T, om *infrav1.OVirtMachine) *infrav1beta1.OVirtMachine {
	t.Helper()
	out := &infrav1beta1.OVirtMachine{}
	if err := conversion.ConvertOVirtMachineHubToSpoke(context.Background(), om.DeepCopy(), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAV1Beta1ReaderSeesTodaysFailureAndClearsItWithTheDocumentedPatch follows the documented
// v1beta1 status patch through the conversion the API server runs: the stored v1beta2 object is
// converted to v1beta1, the merge patch {"status":{"failureReason":null,"failureMessage":null}}
// removes both fields, and the result is converted back to v1beta2, where the manager no longer
// sees a failure.
func TestAV1Beta1ReaderSeesTodaysFailureAndClearsItWithTheDocumentedPatch(t *testing.T) {
	g := NewWithT(t)
	om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}}
	v1beta1conditions.MarkFalse(om, infrav1.CanConnectToOVirtCondition, infrav1.TLSErrorReason, clusterv1.ConditionSeverityError, "x509")
	setMachineFailure(om, infrav1.OVirtEngineConnectionCriticalFailure, "OVirtProvider p: x509 (TLSError)")
	updateMachineStatus(&machineScope{om: om})

	v1 := toV1Beta1(t, om)
	g.Expect(v1.Status.FailureReason).To(HaveValue(Equal(infrav1.OVirtEngineConnectionCriticalFailure)))
	g.Expect(v1.Status.FailureMessage).To(HaveValue(Equal("OVirtProvider p: x509 (TLSError)")))
	g.Expect(v1.Status.Ready).To(BeFalse())
	raw, err := json.Marshal(v1)
	g.Expect(err).NotTo(HaveOccurred())
	var view map[string]any
	g.Expect(json.Unmarshal(raw, &view)).To(Succeed())
	status := view["status"].(map[string]any)
	g.Expect(status["conditions"]).To(ContainElement(And(HaveKeyWithValue("type", "Ready"), HaveKeyWithValue("severity", "Error"),
		HaveKeyWithValue("reason", infrav1.OVirtEngineConnectionCriticalFailure))), "v1beta1 status.conditions, with severities")
	g.Expect(status["conditions"]).To(ContainElement(And(HaveKeyWithValue("type", infrav1.CanConnectToOVirtCondition), HaveKeyWithValue("severity", "Error"))))

	// The JSON merge patch: null removes the field (RFC 7386).
	delete(status, "failureReason")
	delete(status, "failureMessage")
	raw, err = json.Marshal(view)
	g.Expect(err).NotTo(HaveOccurred())
	patched := &infrav1beta1.OVirtMachine{}
	g.Expect(json.Unmarshal(raw, patched)).To(Succeed())
	back := &infrav1.OVirtMachine{}
	g.Expect(conversion.ConvertOVirtMachineSpokeToHub(context.Background(), patched, back)).To(Succeed())
	reason, message := machineFailure(back)
	g.Expect(reason).To(BeNil(), "the manager resumes: status.deprecated.v1beta1.failureReason is gone")
	g.Expect(message).To(BeNil())
	g.Expect(v1beta1conditions.GetSeverity(back, infrav1.CanConnectToOVirtCondition)).To(HaveValue(Equal(clusterv1.ConditionSeverityError)), "the v1beta1 conditions survive")
}

// TestAV1Beta1ReaderSeesReadyStayTrueOnceProvisioned: status.ready is the down-converted
// status.initialization.provisioned, which never goes back to false; the v1beta1 Ready
// condition says that the machine is being deleted.
func TestAV1Beta1ReaderSeesReadyStayTrueOnceProvisioned(t *testing.T) {
	g := NewWithT(t)
	om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", DeletionTimestamp: ptr.To(metav1.Now())}}
	om.Status.Initialization.Provisioned = ptr.To(true)
	v1beta1conditions.MarkTrue(om, infrav1.MachineDeletedCondition)
	updateMachineStatus(&machineScope{om: om})
	v1 := toV1Beta1(t, om)
	g.Expect(v1.Status.Ready).To(BeTrue())
	var ready *infrav1beta1.Condition
	for i := range v1.Status.Conditions {
		if v1.Status.Conditions[i].Type == "Ready" {
			ready = &v1.Status.Conditions[i]
		}
	}
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(corev1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(infrav1.DeletingReason))
	g.Expect(v1.Status.V1Beta2).NotTo(BeNil())
	g.Expect(v1.Status.V1Beta2.Conditions).To(ContainElement(And(HaveField("Type", "Ready"), HaveField("Reason", infrav1.DeletingReason))))
}
