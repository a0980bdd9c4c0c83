package controllers

import (
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/storagerule"
)

func TestResolveCloneFollowsMachineThenProviderThenGate(t *testing.T) {
	g := NewWithT(t)
	g.Expect(storagerule.Clone(ptr.To(true), ptr.To(false), true, false)).To(HaveValue(BeTrue()))
	g.Expect(storagerule.Clone(ptr.To(false), ptr.To(true), true, true)).To(HaveValue(BeFalse()))
	g.Expect(storagerule.Clone(nil, ptr.To(true), true, false)).To(HaveValue(BeTrue()))
	g.Expect(storagerule.Clone(nil, ptr.To(false), true, true)).To(HaveValue(BeFalse()))
	g.Expect(storagerule.Clone(nil, nil, true, true)).To(HaveValue(BeTrue()))
	g.Expect(storagerule.Clone(nil, nil, true, false)).To(HaveValue(BeFalse()))
	g.Expect(storagerule.Clone(nil, ptr.To(true), false, true)).To(BeNil(), "the provider is not known yet: the manager decides later")
	g.Expect(ResolveStorageDomain("fast", "data")).To(Equal("fast"))
	g.Expect(ResolveStorageDomain("", "data")).To(Equal("data"))
	g.Expect(ResolveStorageDomain("", "")).To(BeEmpty())
}

func TestWaitForGrowsWithTheWaitBetweenBounds(t *testing.T) {
	g := NewWithT(t)
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := start
	r := &OVirtMachineReconciler{Intervals: Intervals{VMPoll: 10 * time.Second}, Now: func() time.Time { return now }}
	om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}}
	g.Expect(r.waitFor(om, infrav1.MachineOnCondition).RequeueAfter).To(Equal(time.Second), "no condition yet: the shortest wait")
	om.SetV1Beta1Conditions(clusterv1.Conditions{{Type: infrav1.MachineOnCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.VMPoweringUpReason, LastTransitionTime: metav1.NewTime(start.Truncate(time.Second))}})
	g.Expect(r.waitFor(om, infrav1.MachineOnCondition).RequeueAfter).To(Equal(time.Second))
	now = start.Add(9 * time.Second)
	g.Expect(r.waitFor(om, infrav1.MachineOnCondition).RequeueAfter).To(Equal(3 * time.Second))
	now = start.Add(10 * time.Minute)
	g.Expect(r.waitFor(om, infrav1.MachineOnCondition).RequeueAfter).To(Equal(10*time.Second), "never longer than VMPoll")

	// Another process (after a restart) measures a wait that began before it from the
	// condition's LastTransitionTime.
	restarted := &OVirtMachineReconciler{Intervals: r.Intervals, Now: r.Now}
	now = start.Add(9 * time.Second)
	g.Expect(restarted.waitFor(om, infrav1.MachineOnCondition).RequeueAfter).To(Equal(3 * time.Second))
}

func TestReadyCopiesTheFirstStepThatIsNotDone(t *testing.T) {
	g := NewWithT(t)
	om := &infrav1.OVirtMachine{}
	v1beta1conditions.MarkTrue(om, infrav1.CanConnectToOVirtCondition)
	v1beta1conditions.MarkTrue(om, infrav1.MachineCreatedCondition)
	v1beta1conditions.MarkFalse(om, infrav1.MachineDiskResizedCondition, infrav1.DiskSmallerThanTemplateReason, clusterv1.ConditionSeverityWarning, "too small")
	updateMachineStatus(&machineScope{om: om})
	ready := v1beta1conditions.Get(om, clusterv1.ReadyV1Beta1Condition)
	g.Expect(ready.Status).To(Equal(corev1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(infrav1.DiskSmallerThanTemplateReason))
	g.Expect(ready.Severity).To(Equal(clusterv1.ConditionSeverityWarning))
	g.Expect(ready.Message).To(Equal("too small"))
	// The later steps are listed, False and without a reason (product doc §5.3).
	g.Expect(v1beta1conditions.Get(om, infrav1.K8sProviderIDSetupCondition).Reason).To(BeEmpty())
	// status.conditions holds Ready with the reason and message of the failing step, and every
	// lifecycle condition with the same status, reason and message as its v1beta1 twin.
	g.Expect(conditions.Get(om, infrav1.ReadyCondition)).To(PointTo(MatchFields(IgnoreExtras, Fields{
		"Status": Equal(metav1.ConditionFalse), "Reason": Equal(infrav1.DiskSmallerThanTemplateReason), "Message": Equal("too small"),
	})))
	g.Expect(conditions.Get(om, infrav1.MachineDiskResizedCondition)).To(PointTo(MatchFields(IgnoreExtras, Fields{
		"Status": Equal(metav1.ConditionFalse), "Reason": Equal(infrav1.DiskSmallerThanTemplateReason), "Message": Equal("too small"),
	})))
	g.Expect(conditions.Get(om, infrav1.MachineCreatedCondition)).To(PointTo(MatchFields(IgnoreExtras, Fields{
		"Status": Equal(metav1.ConditionTrue), "Reason": Equal(reasonDone),
	})))
	g.Expect(conditions.Get(om, infrav1.K8sProviderIDSetupCondition)).To(PointTo(MatchFields(IgnoreExtras, Fields{
		"Status": Equal(metav1.ConditionFalse), "Reason": Equal(reasonPending),
	})))
	for _, t := range append([]clusterv1.ConditionType{infrav1.CanConnectToOVirtCondition}, lifecycleConditions...) {
		g.Expect(conditions.Has(om, string(t))).To(BeTrue(), "status.conditions has %s", t)
	}

	// A failureReason wins.
	setMachineFailure(om, infrav1.OVirtEngineConnectionCriticalFailure, "bad password")
	updateMachineStatus(&machineScope{om: om})
	g.Expect(v1beta1conditions.GetReason(om, clusterv1.ReadyV1Beta1Condition)).To(Equal(infrav1.OVirtEngineConnectionCriticalFailure))
	g.Expect(*v1beta1conditions.GetSeverity(om, clusterv1.ReadyV1Beta1Condition)).To(Equal(clusterv1.ConditionSeverityError))
	g.Expect(conditions.Get(om, infrav1.ReadyCondition)).To(PointTo(MatchFields(IgnoreExtras, Fields{
		"Status": Equal(metav1.ConditionFalse), "Reason": Equal(infrav1.OVirtEngineConnectionCriticalFailure), "Message": Equal("bad password"),
	})))
	clearMachineFailure(om)
	reason, message := machineFailure(om)
	g.Expect(reason).To(BeNil())
	g.Expect(message).To(BeNil())
}

func TestADeletedMachineIsNotReadyButStaysProvisioned(t *testing.T) {
	g := NewWithT(t)
	om := &infrav1.OVirtMachine{}
	om.Status.Initialization.Provisioned = ptr.To(true)
	now := metav1.Now()
	om.DeletionTimestamp = &now
	for _, c := range lifecycleConditions {
		v1beta1conditions.MarkTrue(om, c)
	}
	v1beta1conditions.MarkFalse(om, infrav1.MachineDeletedCondition, infrav1.VMDeletingReason, clusterv1.ConditionSeverityInfo, "removing")
	updateMachineStatus(&machineScope{om: om})
	g.Expect(conditions.GetReason(om, infrav1.ReadyCondition)).To(Equal(infrav1.VMDeletingReason))
	v1beta1conditions.MarkTrue(om, infrav1.MachineDeletedCondition)
	updateMachineStatus(&machineScope{om: om})
	g.Expect(conditions.IsFalse(om, infrav1.ReadyCondition)).To(BeTrue())
	g.Expect(conditions.GetReason(om, infrav1.ReadyCondition)).To(Equal(infrav1.DeletingReason))
	g.Expect(v1beta1conditions.IsFalse(om, clusterv1.ReadyV1Beta1Condition)).To(BeTrue())
	g.Expect(conditions.IsTrue(om, infrav1.MachineDeletedCondition)).To(BeTrue())
	g.Expect(provisioned(om)).To(BeTrue(), "status.initialization.provisioned never goes back to false")
}

func TestAConnectionProblemDoesNotUnreadyARunningMachine(t *testing.T) {
	g := NewWithT(t)
	om := &infrav1.OVirtMachine{}
	om.Status.Initialization.Provisioned = ptr.To(true)
	for _, c := range lifecycleConditions {
		v1beta1conditions.MarkTrue(om, c)
	}
	v1beta1conditions.MarkFalse(om, infrav1.CanConnectToOVirtCondition, infrav1.AuthenticationFailedReason, clusterv1.ConditionSeverityError, "expired")
	updateMachineStatus(&machineScope{om: om})
	g.Expect(v1beta1conditions.IsTrue(om, clusterv1.ReadyV1Beta1Condition)).To(BeTrue())
	g.Expect(conditions.IsTrue(om, infrav1.ReadyCondition)).To(BeTrue())
	g.Expect(conditions.GetReason(om, infrav1.ReadyCondition)).To(Equal(infrav1.ReadyReason))
	g.Expect(conditions.GetReason(om, infrav1.CanConnectToOVirtCondition)).To(Equal(infrav1.AuthenticationFailedReason))
}

func TestOwnerMarkerIdentifiesTheMachine(t *testing.T) {
	g := NewWithT(t)
	om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: types.UID("1234")}}
	vm := ovirt.VM{Comment: ownerMarker(om, "")}
	g.Expect(ownedBy(vm, om)).To(BeTrue())
	other := om.DeepCopy()
	other.UID = "5678"
	g.Expect(ownedBy(vm, other)).To(BeFalse())
	const id = "0f6c1c8e-3b1a-4c2e-9d7f-2a5b8c9d0e1f"
	g.Expect(vmIDOf(&infrav1.OVirtMachine{Spec: infrav1.OVirtMachineSpec{ProviderID: "ovirt://" + id}})).To(Equal(id))
	bad := &infrav1.OVirtMachine{Spec: infrav1.OVirtMachineSpec{ProviderID: "ovirt://../../disks/abc"}}
	g.Expect(vmIDOf(bad)).To(BeEmpty(), "only a UUID is ever used as an id")
	g.Expect(invalidProviderID(bad)).To(ContainSubstring("spec.providerID"))
}

func TestReadTrackerExpires(t *testing.T) {
	g := NewWithT(t)
	var rt readTracker
	key := types.NamespacedName{Namespace: "a", Name: "b"}
	now := time.Now()
	_, fresh := rt.fresh(key, now, time.Minute)
	g.Expect(fresh).To(BeFalse())
	rt.record(key, now)
	wait, fresh := rt.fresh(key, now.Add(20*time.Second), time.Minute)
	g.Expect(fresh).To(BeTrue())
	g.Expect(wait).To(Equal(40 * time.Second))
	_, fresh = rt.fresh(key, now.Add(time.Minute), time.Minute)
	g.Expect(fresh).To(BeFalse())
	rt.forget(key)
	_, fresh = rt.fresh(key, now, time.Minute)
	g.Expect(fresh).To(BeFalse())
}

func TestWaitForAimsAtTheLearnedDuration(t *testing.T) {
	g := NewWithT(t)
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := start
	r := &OVirtMachineReconciler{Intervals: Intervals{VMPoll: 10 * time.Second}, Now: func() time.Time { return now }}
	booting := func(name string, ago time.Duration) *infrav1.OVirtMachine {
		om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		om.SetV1Beta1Conditions(clusterv1.Conditions{{
			Type: infrav1.MachineOnCondition, Status: corev1.ConditionFalse, Reason: infrav1.VMPoweringUpReason,
			LastTransitionTime: metav1.NewTime(now.Add(-ago))}})
		return om
	}
	// A first machine took 6s to boot (measured from its condition: this process did not see
	// its wait begin).
	r.waits.finished(booting("first", 6*time.Second), infrav1.MachineOnCondition, infrav1.VMPoweringUpReason, now)
	d, ok := r.waits.expected(infrav1.MachineOnCondition, infrav1.VMPoweringUpReason)
	g.Expect(ok).To(BeTrue())
	g.Expect(d).To(Equal(6 * time.Second))

	// The next one starts booting now: it is read once, 6s and a margin of a tenth of it (at
	// most half the shortest wait) later. Its LastTransitionTime, read back, lost the
	// sub-second part: the wait counts from when this process saw it begin.
	now = start.Add(700 * time.Millisecond)
	second := booting("second", 0)
	second.GetV1Beta1Conditions()[0].LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	g.Expect(r.waitFor(second, infrav1.MachineOnCondition).RequeueAfter).To(Equal(6*time.Second + 500*time.Millisecond))
	// Done at that read, even one that came 10s late (a busy work queue, the rate limiter): it
	// took no longer than the 6s aimed at, and counts as a sixteenth less (5.625s), so that an
	// estimate too long shrinks; the estimate moves to 5.90625s.
	now = now.Add(16*time.Second + 500*time.Millisecond)
	r.waits.finished(second, infrav1.MachineOnCondition, infrav1.VMPoweringUpReason, now)
	d, _ = r.waits.expected(infrav1.MachineOnCondition, infrav1.VMPoweringUpReason)
	g.Expect(d).To(Equal((3*6*time.Second + 5625*time.Millisecond) / 4))

	// A machine whose read came early: the wait grows with the time waited, and its whole wait
	// counts (6.90625s here: the estimate moves to 6.15625s).
	third := booting("third", 0)
	g.Expect(r.waitFor(third, infrav1.MachineOnCondition).RequeueAfter).To(Equal(d + 500*time.Millisecond))
	now = now.Add(d + 500*time.Millisecond)
	g.Expect(r.waitFor(third, infrav1.MachineOnCondition).RequeueAfter).To(Equal((d+500*time.Millisecond)/3), "past the expectation: a third of the time waited")
	now = now.Add(500 * time.Millisecond)
	whole := d + time.Second
	r.waits.finished(third, infrav1.MachineOnCondition, infrav1.VMPoweringUpReason, now)
	prev := d
	d, _ = r.waits.expected(infrav1.MachineOnCondition, infrav1.VMPoweringUpReason)
	g.Expect(d).To(Equal((3*prev + whole) / 4))

	// Another reason of the same step is not mixed in.
	_, ok = r.waits.expected(infrav1.MachineOnCondition, infrav1.VMPowerOnFailedReason)
	g.Expect(ok).To(BeFalse())
	// A condition that was False already keeps its LastTransitionTime when the action happens
	// (MachineOn waited a minute for its disks): the wait counts from the start itself.
	fifth := booting("fifth", time.Minute)
	r.waits.began(fifth, infrav1.MachineOnCondition, infrav1.VMPoweringUpReason, now)
	d, _ = r.waits.expected(infrav1.MachineOnCondition, infrav1.VMPoweringUpReason)
	g.Expect(r.waitFor(fifth, infrav1.MachineOnCondition).RequeueAfter).To(Equal(d+500*time.Millisecond), "not a third of the minute")
	r.waits.forget(types.NamespacedName{Namespace: "ns", Name: "fifth"})

	// Averages move slowly: a 2.25s boot (measured from its condition: no wait recorded here)
	// moves the estimate a quarter of the way.
	prev, _ = r.waits.expected(infrav1.MachineOnCondition, infrav1.VMPoweringUpReason)
	r.waits.finished(booting("fourth", 2250*time.Millisecond), infrav1.MachineOnCondition, infrav1.VMPoweringUpReason, now)
	d, _ = r.waits.expected(infrav1.MachineOnCondition, infrav1.VMPoweringUpReason)
	g.Expect(d).To(Equal((3*prev + 2250*time.Millisecond) / 4))
}

func TestCheckTrackerChecksAgainWhenSettingsChange(t *testing.T) {
	g := NewWithT(t)
	var ct checkTracker
	now := time.Now()
	ct.record("p", "fp1", now)
	wait, fresh := ct.fresh("p", "fp1", now.Add(10*time.Second), time.Minute)
	g.Expect(fresh).To(BeTrue())
	g.Expect(wait).To(Equal(50 * time.Second))
	_, fresh = ct.fresh("p", "fp2", now.Add(10*time.Second), time.Minute)
	g.Expect(fresh).To(BeFalse(), "a rotated password is checked at once")
	_, fresh = ct.fresh("p", "fp1", now.Add(time.Minute), time.Minute)
	g.Expect(fresh).To(BeFalse())
	_, fresh = ct.fresh("other", "fp1", now, time.Minute)
	g.Expect(fresh).To(BeFalse())
}

func TestOnlyANodeRegisteringWakesItsMachine(t *testing.T) {
	g := NewWithT(t)
	registered := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	registered.Status.NodeInfo.SystemUUID = "ABCD-1234"
	p := nodeRegistered()
	g.Expect(p.Create(event.CreateEvent{Object: registered})).To(BeTrue(), "a Node registering")

	early := registered.DeepCopy()
	early.Status.NodeInfo.SystemUUID = ""
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: early, ObjectNew: registered})).To(BeTrue(), "the system UUID appearing")

	withID := registered.DeepCopy()
	withID.Spec.ProviderID = "ovirt://abcd-1234"
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: registered, ObjectNew: withID})).To(BeFalse(), "the providerID the controller set itself")
	heartbeat := withID.DeepCopy()
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: withID, ObjectNew: heartbeat})).To(BeFalse(), "a status heartbeat")
	g.Expect(p.Delete(event.DeleteEvent{Object: registered})).To(BeFalse())
}

func TestMirrorConditionsFollowsTheV1Beta1RecordAndLeavesPausedAlone(t *testing.T) {
	g := NewWithT(t)
	p := &infrav1.OVirtProvider{}
	p.Generation = 3
	conditions.Set(p, metav1.Condition{Type: infrav1.PausedCondition, Status: metav1.ConditionFalse, Reason: infrav1.NotPausedReason})
	conditions.Set(p, metav1.Condition{Type: infrav1.CanConnectToOVirtCondition, Status: metav1.ConditionTrue, Reason: reasonDone})
	mirrorConditions(p, p.Generation, ownedProviderConditions)
	g.Expect(conditions.Has(p, infrav1.CanConnectToOVirtCondition)).To(BeFalse(), "no v1beta1 twin: removed")
	g.Expect(conditions.GetReason(p, infrav1.ReadyCondition)).To(Equal(reasonReadyUnknown))
	g.Expect(conditions.Has(p, infrav1.PausedCondition)).To(BeTrue())

	v1beta1conditions.MarkFalse(p, infrav1.CanConnectToOVirtCondition, infrav1.TLSErrorReason, clusterv1.ConditionSeverityError, "x509: %s", "unknown authority")
	v1beta1conditions.SetSummary(p, v1beta1conditions.WithConditions(infrav1.CanConnectToOVirtCondition))
	mirrorConditions(p, p.Generation, ownedProviderConditions)
	for _, typ := range []string{infrav1.CanConnectToOVirtCondition, infrav1.ReadyCondition} {
		c := conditions.Get(p, typ)
		g.Expect(c).NotTo(BeNil(), typ)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse), typ)
		g.Expect(c.Reason).To(Equal(infrav1.TLSErrorReason), typ)
		g.Expect(c.Message).To(Equal("x509: unknown authority"), typ)
		g.Expect(c.ObservedGeneration).To(BeEquivalentTo(3), typ)
	}
	g.Expect(ownedTypes(ownedProviderConditions)).To(ConsistOf(infrav1.ReadyCondition, infrav1.CanConnectToOVirtCondition,
		infrav1.TLSVerifiedCondition, infrav1.DeletingCondition))
}
