package integration

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/harness"
)

// newProvider creates an OVirtProvider for the main manager (and, when password is not "",
// its credentials Secret). mutate adjusts the spec before creation.
func newProvider(t *testing.T, password string, mutate func(p *infrav1.OVirtProvider)) *infrav1.OVirtProvider {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name := "p-" + strings.ToLower(rand.String(6))
	secretName := name + "-credentials"
	if password != "" {
		g.Expect(k8s.Create(ctx, harness.CredentialsSecret(credentialsNamespace, secretName, sim.Username(), password))).To(Succeed())
	}
	p := harness.Provider(name, sim.URL(), secretName, sim.CAPEM())
	p.Labels = filterLabels(mainFilter)
	if mutate != nil {
		mutate(p)
	}
	g.Expect(k8s.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	return p
}

func eventuallyProvider(t *testing.T, p *infrav1.OVirtProvider, ready bool, reason string, severity clusterv1.ConditionSeverity, extra ...func(g Gomega, p *infrav1.OVirtProvider)) *infrav1.OVirtProvider {
	t.Helper()
	got := &infrav1.OVirtProvider{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(providerV1Beta1(got).Ready).To(Equal(ready), describeConditions(got))
		g.Expect(conditions.IsTrue(got, infrav1.ReadyCondition)).To(Equal(ready), describeConditions(got))
		c := v1beta1conditions.Get(got, infrav1.CanConnectToOVirtCondition)
		g.Expect(c).NotTo(BeNil())
		m := conditions.Get(got, infrav1.CanConnectToOVirtCondition)
		g.Expect(m).NotTo(BeNil())
		if ready {
			g.Expect(c.Status).To(Equal(corev1.ConditionTrue))
			g.Expect(m.Status).To(Equal(metav1.ConditionTrue))
			return
		}
		g.Expect(c.Reason).To(Equal(reason), describeConditions(got))
		g.Expect(c.Severity).To(Equal(severity))
		g.Expect(m.Reason).To(Equal(reason), describeConditions(got))
		g.Expect(m.Message).To(Equal(c.Message))
		g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(reason), describeConditions(got))
		for _, check := range extra {
			check(g, got)
		}
	}, timeout, interval).Should(Succeed())
	return got
}

func machineOf(t *testing.T, p *infrav1.OVirtProvider) *infrav1.OVirtMachine {
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.Provider = p.Name
	_, om := tc.newMachine(t, spec, ignitionConfig)
	return om
}

func TestInvalidEngineURLIsCriticalUntilFixedAndCleared(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	p := newProvider(t, sim.Password(), func(p *infrav1.OVirtProvider) {
		p.Spec.Engine = strings.Replace(sim.URL(), "https://", "http://", 1)
	})
	got := eventuallyProvider(t, p, false, infrav1.InvalidEngineURLReason, clusterv1.ConditionSeverityError,
		func(g Gomega, p *infrav1.OVirtProvider) {
			g.Expect(providerV1Beta1(p).FailureReason).To(HaveValue(Equal(infrav1.OVirtEngineConnectionCriticalFailure)))
		})
	g.Expect(v1beta1conditions.GetMessage(got, infrav1.CanConnectToOVirtCondition)).To(ContainSubstring("https"))
	eventuallyEvent(t, p, "ConnectionFailed")

	om := machineOf(t, p)
	eventuallyCondition(t, om, condition{Type: clusterv1.ReadyV1Beta1Condition, Status: corev1.ConditionFalse,
		Reason: infrav1.OVirtEngineConnectionCriticalFailure, Severity: clusterv1.ConditionSeverityError})
	m := eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		reason, message := failureOf(om)
		g.Expect(reason).To(HaveValue(Equal(infrav1.OVirtEngineConnectionCriticalFailure)))
		g.Expect(message).To(HaveValue(ContainSubstring(infrav1.InvalidEngineURLReason)))
		g.Expect(conditions.Get(om, infrav1.ReadyCondition)).To(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.OVirtEngineConnectionCriticalFailure), HaveField("Message", *message)))
	})
	g.Expect(v1beta1conditions.GetReason(m, infrav1.CanConnectToOVirtCondition)).To(Equal(infrav1.InvalidEngineURLReason))
	eventuallyEvent(t, om, "ConnectionFailed")

	// Fixing the provider alone does not restart the machine (product doc §4.3) ...
	base := got.DeepCopy()
	got.Spec.Engine = sim.URL()
	g.Expect(k8s.Patch(ctx, got, client.MergeFrom(base))).To(Succeed())
	eventuallyProvider(t, p, true, "", "")
	g.Consistently(func(g Gomega) {
		reason, _ := failureOf(getOM(g, om))
		g.Expect(reason).NotTo(BeNil())
	}, "2s", "250ms").Should(Succeed())
	_, exists := sim.VMByName(om.Name)
	g.Expect(exists).To(BeFalse())

	// ... clearing failureReason does: here with the v1beta2 form of the documented patch, on
	// the status subresource (the v1beta1 form, {"status":{"failureReason":null,...}}, is
	// converted into it by the API server through the conversion webhook; the webhook turns the
	// plain patch of the main resource into the clear-failure annotation, see the webhook tests).
	clear := []byte(`{"status":{"deprecated":{"v1beta1":{"failureReason":null,"failureMessage":null}}}}`)
	g.Expect(k8s.Status().Patch(ctx, getOM(g, om), client.RawPatch(types.MergePatchType, clear))).To(Succeed())
	cleared := eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionTrue})
	reason, message := failureOf(cleared)
	g.Expect(reason).To(BeNil())
	g.Expect(message).To(BeNil())
	// Ready carries the lifecycle again, in both formats, not the failure.
	g.Expect(conditions.GetReason(cleared, infrav1.ReadyCondition)).NotTo(Equal(infrav1.OVirtEngineConnectionCriticalFailure))
	g.Expect(v1beta1conditions.GetReason(cleared, clusterv1.ReadyV1Beta1Condition)).NotTo(Equal(infrav1.OVirtEngineConnectionCriticalFailure))
	deleteAndWait(t, om)
}

func TestClearFailureAnnotationClearsTheFailure(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	p := newProvider(t, sim.Password(), func(p *infrav1.OVirtProvider) { p.Spec.TLS = nil })
	eventuallyProvider(t, p, false, infrav1.TLSErrorReason, clusterv1.ConditionSeverityError)
	om := machineOf(t, p)
	eventuallyCondition(t, om, condition{Type: clusterv1.ReadyV1Beta1Condition, Status: corev1.ConditionFalse, Reason: infrav1.OVirtEngineConnectionCriticalFailure})

	base := p.DeepCopy()
	p.Spec.TLS = &infrav1.OVirtProviderTLS{Insecure: true}
	g.Expect(k8s.Patch(ctx, p, client.MergeFrom(base))).To(Succeed())
	eventuallyProvider(t, p, true, "", "")
	m := getOM(g, om)
	mBase := m.DeepCopy()
	m.Annotations = map[string]string{"capov.infrastructure.cluster.x-k8s.io/clear-failure": "true"}
	g.Expect(k8s.Patch(ctx, m, client.MergeFrom(mBase))).To(Succeed())
	got := eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionTrue})
	g.Expect(got.Annotations).NotTo(HaveKey("capov.infrastructure.cluster.x-k8s.io/clear-failure"))
	reason, _ := failureOf(got)
	g.Expect(reason).To(BeNil())
	deleteAndWait(t, om)
}

func TestBadCredentialsInTheSecretOpenTheBreakerAndRecover(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	loginsBefore := sim.FailedLogins()
	p := newProvider(t, "wrong-password", nil)
	got := eventuallyProvider(t, p, false, infrav1.AuthenticationFailedReason, clusterv1.ConditionSeverityError)
	g.Expect(v1beta1conditions.GetMessage(got, infrav1.CanConnectToOVirtCondition)).To(ContainSubstring("username and password"))
	g.Expect(v1beta1conditions.GetMessage(got, infrav1.CanConnectToOVirtCondition)).NotTo(ContainSubstring("wrong-password"))
	// Repeated checks end in the breaker: no more logins with that password for a while.
	eventuallyProvider(t, p, false, infrav1.AuthBreakerOpenReason, clusterv1.ConditionSeverityError)
	g.Expect(sim.FailedLogins() - loginsBefore).To(BeNumerically("<=", 3))

	// Rotating the Secret takes effect without a restart.
	s := &corev1.Secret{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: credentialsNamespace, Name: p.Spec.CredentialsSecretName}, s)).To(Succeed())
	base := s.DeepCopy()
	s.Data["password"] = []byte(sim.Password())
	g.Expect(k8s.Patch(ctx, s, client.MergeFrom(base))).To(Succeed())
	eventuallyProvider(t, p, true, "", "")
}

func TestDeprecatedUserAndPassAreTheFallback(t *testing.T) {
	g := NewWithT(t)
	p := newProvider(t, "", func(p *infrav1.OVirtProvider) {
		p.Spec.CredentialsSecretName = "does-not-exist"
		p.Spec.User, p.Spec.Pass = sim.Username(), sim.Password()
	})
	eventuallyProvider(t, p, true, "", "")
	note := eventuallyEvent(t, p, "Connected")
	g.Expect(note).To(ContainSubstring("DeprecatedSpecFields"))

	bad := newProvider(t, "", func(p *infrav1.OVirtProvider) {
		p.Spec.CredentialsSecretName = ""
		p.Spec.User, p.Spec.Pass = sim.Username(), "not-it"
	})
	eventuallyProvider(t, bad, false, infrav1.AuthenticationFailedReason, clusterv1.ConditionSeverityError)

	none := newProvider(t, "", func(p *infrav1.OVirtProvider) { p.Spec.CredentialsSecretName = "" })
	got := eventuallyProvider(t, none, false, infrav1.CredentialsMissingReason, clusterv1.ConditionSeverityError)
	g.Expect(v1beta1conditions.GetMessage(got, infrav1.CanConnectToOVirtCondition)).To(ContainSubstring("credentialsSecretName"))
}

func TestUnreachableEngineIsRetriedNotFatal(t *testing.T) {
	g := NewWithT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())
	p := newProvider(t, sim.Password(), func(p *infrav1.OVirtProvider) {
		p.Spec.Engine = fmt.Sprintf("https://%s/ovirt-engine/api", addr)
	})
	got := eventuallyProvider(t, p, false, infrav1.EngineUnreachableReason, clusterv1.ConditionSeverityWarning)
	g.Expect(providerV1Beta1(got).FailureReason).To(BeNil())

	om := machineOf(t, p)
	m := eventuallyCondition(t, om, condition{Type: infrav1.CanConnectToOVirtCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.EngineUnreachableReason, Severity: clusterv1.ConditionSeverityWarning})
	reason, _ := failureOf(m)
	g.Expect(reason).To(BeNil(), "a network problem heals itself: no failureReason")
	deleteAndWait(t, om)
}

func TestMissingProviderWaitsWithoutFailure(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.Provider = "later-" + tc.ns
	_, om := tc.newMachine(t, spec, ignitionConfig)
	m := eventuallyCondition(t, om, condition{Type: infrav1.CanConnectToOVirtCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.ProviderNotFoundReason, Severity: clusterv1.ConditionSeverityWarning, Message: spec.Provider})
	reason, _ := failureOf(m)
	g.Expect(reason).To(BeNil())

	// GitOps applies the provider later: the machine proceeds without a retry timer.
	p := harness.Provider(spec.Provider, sim.URL(), credentialsSecret, sim.CAPEM())
	p.Labels = filterLabels(mainFilter)
	g.Expect(k8s.Create(context.Background(), p)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionTrue})
	deleteAndWait(t, om)
}
