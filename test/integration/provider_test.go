package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
)

// newProvider creates an OVirtProvider for the main manager (and, when password is not "",
// its credentials Secret). mutate adjusts the spec before creation.
func newProvider(t *testing.T, password string, mutate func(p *infrav1.OVirtProvider)) *infrav1.OVirtProvider {
	t.Helper()
	return newProviderAs(t, sim.Username(), password, mutate)
}

// newProviderAs is newProvider for another Engine account (ovirtsim.Simulator.AddUser).
func newProviderAs(t *testing.T, username, password string, mutate func(p *infrav1.OVirtProvider)) *infrav1.OVirtProvider {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name := "p-" + strings.ToLower(rand.String(6))
	secretName := name + "-credentials"
	if password != "" {
		g.Expect(k8s.Create(ctx, harness.CredentialsSecret(credentialsNamespace, secretName, username, password))).To(Succeed())
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

	// Fixing the provider restarts the machine by itself: the provider's settings changed since
	// the failure and it connects, so the manager clears the failure (event
	// ConnectionFailureCleared); before, every machine needed the documented patch (below in
	// TestClearFailureAnnotationClearsTheFailure, still honoured).
	base := got.DeepCopy()
	got.Spec.Engine = sim.URL()
	g.Expect(k8s.Patch(ctx, got, client.MergeFrom(base))).To(Succeed())
	eventuallyProvider(t, p, true, "", "")
	cleared := eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionTrue}, failureCleared)
	g.Expect(eventuallyEvent(t, om, "ConnectionFailureCleared")).To(ContainSubstring(p.Name))
	// Ready carries the lifecycle again, in both formats, not the failure.
	g.Expect(conditions.GetReason(cleared, infrav1.ReadyCondition)).NotTo(Equal(infrav1.OVirtEngineConnectionCriticalFailure))
	g.Expect(v1beta1conditions.GetReason(cleared, clusterv1.ReadyV1Beta1Condition)).NotTo(Equal(infrav1.OVirtEngineConnectionCriticalFailure))
	deleteAndWait(t, om)
}

// TestClearFailureAnnotationClearsTheFailure: the documented patch (product doc §4.3) clears
// failureReason whatever the provider's state: here, while the provider is still broken, so
// the manager tries again and fails again (with the same settings it then waits); the plain
// patch of the main resource reaches the manager as the clear-failure annotation. Once the
// provider is fixed, the manager clears the failure itself.
func TestClearFailureAnnotationClearsTheFailure(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	p := newProvider(t, sim.Password(), func(p *infrav1.OVirtProvider) { p.Spec.TLS = nil })
	eventuallyProvider(t, p, false, infrav1.TLSErrorReason, clusterv1.ConditionSeverityError)
	om := machineOf(t, p)
	eventuallyCondition(t, om, condition{Type: clusterv1.ReadyV1Beta1Condition, Status: corev1.ConditionFalse, Reason: infrav1.OVirtEngineConnectionCriticalFailure})

	// The v1beta2 form of the patch, on the status subresource: cleared at once ...
	clear := []byte(`{"status":{"deprecated":{"v1beta1":{"failureReason":null,"failureMessage":null}}}}`)
	patched := getOM(g, om)
	g.Expect(k8s.Status().Patch(ctx, patched, client.RawPatch(types.MergePatchType, clear))).To(Succeed())
	reason, _ := failureOf(patched)
	g.Expect(reason).To(BeNil())
	// ... and set again by the next attempt, since the provider is still broken.
	eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		reason, _ := failureOf(om)
		g.Expect(reason).To(HaveValue(Equal(infrav1.OVirtEngineConnectionCriticalFailure)))
	})

	// The annotation the webhook turns the plain patch into is acted on and removed.
	m := getOM(g, om)
	mBase := m.DeepCopy()
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations["capov.infrastructure.cluster.x-k8s.io/clear-failure"] = "true"
	g.Expect(k8s.Patch(ctx, m, client.MergeFrom(mBase))).To(Succeed())
	eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(om.Annotations).NotTo(HaveKey("capov.infrastructure.cluster.x-k8s.io/clear-failure"))
	})

	base := p.DeepCopy()
	p.Spec.TLS = &infrav1.OVirtProviderTLS{Insecure: true}
	g.Expect(k8s.Patch(ctx, p, client.MergeFrom(base))).To(Succeed())
	eventuallyProvider(t, p, true, "", "")
	eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionTrue}, failureCleared)
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
	// Port 1 (tcpmux): privileged and served by nothing, so refused on every machine.
	p := newProvider(t, sim.Password(), func(p *infrav1.OVirtProvider) {
		p.Spec.Engine = "https://127.0.0.1:1/ovirt-engine/api"
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

// ownedBy reports whether the Secret names p among its ownerReferences.
func ownedBy(s *corev1.Secret, p *infrav1.OVirtProvider) bool {
	for _, ref := range s.OwnerReferences {
		if ref.UID == p.UID {
			return true
		}
	}
	return false
}

func getSecret(g Gomega, name string) *corev1.Secret {
	s := &corev1.Secret{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: credentialsNamespace, Name: name}, s)).To(Succeed())
	return s
}

// eventuallyGone waits until the OVirtProvider no longer exists.
func eventuallyGone(t *testing.T, p *infrav1.OVirtProvider) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(p), &infrav1.OVirtProvider{}))
	}, timeout, interval).Should(BeTrue(), "the OVirtProvider is deleted")
}

// TestDeletingAProviderKeepsItsSecret: earlier releases made the OVirtProvider an owner of its
// credentials Secret, so Kubernetes' garbage collector deleted the Secret with the provider. The
// manager now never adds the reference, removes the one an earlier release added (an upgrade),
// and the Secret survives the deletion of its provider. With the garbage collector running
// (kube-controller-manager from the node assets, when they are built), the deletion is real.
func TestDeletingAProviderKeepsItsSecret(t *testing.T) {
	stopGC, gcRunning := startGarbageCollector(t)
	defer stopGC()
	g := NewWithT(t)
	ctx := context.Background()

	// A provider of this release: its Secret never gets the reference.
	fresh := newProvider(t, sim.Password(), nil)
	got := eventuallyProvider(t, fresh, true, "", "")
	g.Consistently(func(g Gomega) {
		g.Expect(ownedBy(getSecret(g, fresh.Spec.CredentialsSecretName), got)).To(BeFalse(), "the provider must not own its Secret")
	}, "3s", "250ms").Should(Succeed())

	// A provider of an earlier release: its Secret carries the reference; the manager removes it.
	upgraded := newProvider(t, sim.Password(), nil)
	up := eventuallyProvider(t, upgraded, true, "", "")
	s := getSecret(g, upgraded.Spec.CredentialsSecretName)
	base := s.DeepCopy()
	s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{
		APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "OVirtProvider", Name: up.Name, UID: up.UID})
	g.Expect(k8s.Patch(ctx, s, client.MergeFrom(base))).To(Succeed())
	// The Secret watch reconciles the provider at once.
	g.Eventually(func(g Gomega) {
		g.Expect(ownedBy(getSecret(g, upgraded.Spec.CredentialsSecretName), up)).To(BeFalse())
	}, timeout, interval).Should(Succeed())
	eventuallyEvent(t, up, "CredentialsSecretReleased")

	for _, p := range []*infrav1.OVirtProvider{fresh, upgraded} {
		g.Expect(k8s.Delete(ctx, p)).To(Succeed())
		eventuallyGone(t, p)
	}
	// Give the garbage collector (when it runs) the time it needs to act on a dependent.
	g.Consistently(func(g Gomega) {
		for _, p := range []*infrav1.OVirtProvider{fresh, upgraded} {
			s := getSecret(g, p.Spec.CredentialsSecretName)
			g.Expect(s.DeletionTimestamp).To(BeNil())
			g.Expect(s.Data).To(HaveKey("password"))
		}
	}, "5s", "250ms").Should(Succeed(), "the Secrets survive their providers")
	if gcRunning {
		// The move copies (owned by their providers) go with them.
		g.Eventually(func(g Gomega) {
			for _, p := range []*infrav1.OVirtProvider{fresh, upgraded} {
				err := k8s.Get(ctx, client.ObjectKey{Namespace: credentialsNamespace, Name: "capovp-" + p.Name + "-move"}, &corev1.Secret{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the move copy of %s: %v", p.Name, err)
			}
		}, timeout, interval).Should(Succeed())
	}
}

// TestTheCredentialsTravelAsAMoveCopy: clusterctl move carries a Secret only when a moved object
// owns it. The provider owns a copy of its credentials (never the Secret itself) that follows the
// Secret; in the target of a move, where only the copy arrived, the manager recreates the Secret
// from it and the provider connects. The chaos suite's clusterctl-move scenario runs the real
// mover between two management clusters.
func TestTheCredentialsTravelAsAMoveCopy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	p := newProvider(t, sim.Password(), nil)
	got := eventuallyProvider(t, p, true, "", "")
	copyKey := client.ObjectKey{Namespace: credentialsNamespace, Name: "capovp-" + p.Name + "-move"}
	cp := &corev1.Secret{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, copyKey, cp)).To(Succeed())
		g.Expect(cp.OwnerReferences).To(ConsistOf(HaveField("UID", got.UID)))
		g.Expect(cp.Data).To(Equal(getSecret(g, p.Spec.CredentialsSecretName).Data))
	}, timeout, interval).Should(Succeed(), "the provider owns a copy of its credentials")
	g.Expect(getSecret(g, p.Spec.CredentialsSecretName).OwnerReferences).To(BeEmpty(), "and not the Secret")

	// As clusterctl move leaves the target: the copy's owner reference names this provider, its
	// annotation the source's provider; the named Secret does not exist.
	g.Expect(k8s.Delete(ctx, getSecret(g, p.Spec.CredentialsSecretName))).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, copyKey, &corev1.Secret{})) }, timeout, interval).
		Should(BeTrue(), "a Secret deleted here takes its copy with it")
	moved := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: credentialsNamespace, Name: copyKey.Name,
			Labels:          map[string]string{infrav1.CredentialsMoveCopyLabel: ""},
			Annotations:     map[string]string{infrav1.CredentialsCopyOfAnnotation: p.Spec.CredentialsSecretName, infrav1.CredentialsCopiedForAnnotation: "uid-in-the-source"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtProvider", Name: p.Name, UID: got.UID}}},
		Data: cp.Data,
	}
	g.Expect(k8s.Create(ctx, moved)).To(Succeed())
	g.Eventually(func(g Gomega) {
		s := getSecret(g, p.Spec.CredentialsSecretName)
		g.Expect(s.Data).To(Equal(cp.Data))
		g.Expect(s.OwnerReferences).To(BeEmpty())
	}, timeout, interval).Should(Succeed(), "the Secret is recreated from the copy that came with the provider")
	eventuallyEvent(t, got, "CredentialsSecretRestored")
	eventuallyProvider(t, p, true, "", "")
}

// TestDeletingAProviderWaitsForItsMachines: a provider whose machines still exist is not deleted
// (the finalizer holds it, the Deleting condition and an event name them); machines being
// deleted still remove their VMs through it; once the last is gone the provider goes too.
func TestDeletingAProviderWaitsForItsMachines(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	p := newProvider(t, sim.Password(), nil)
	got := eventuallyProvider(t, p, true, "", "")
	g.Expect(got.Finalizers).To(ContainElement(infrav1.ProviderFinalizer), "the manager holds every provider")
	om := machineOf(t, p)
	eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionTrue})
	vm := eventuallyVM(t, om.Name, nil)

	g.Expect(k8s.Delete(ctx, p)).To(Succeed())
	want := "1 OVirtMachine names OVirtProvider " + p.Name + " in spec.provider: " + om.Namespace + "/" + om.Name + ";"
	g.Eventually(func(g Gomega) {
		got := &infrav1.OVirtProvider{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.DeletionTimestamp).NotTo(BeNil())
		g.Expect(conditions.Get(got, infrav1.DeletingCondition)).To(And(HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", infrav1.InUseReason), HaveField("Message", ContainSubstring(want))), describeConditions(got))
		g.Expect(conditions.IsTrue(got, infrav1.ReadyCondition)).To(BeTrue(), "Ready still reports the Engine")
	}, timeout, interval).Should(Succeed())
	g.Expect(eventuallyEvent(t, p, "DeletionBlocked")).To(ContainSubstring(want))
	g.Consistently(func() error {
		return k8s.Get(ctx, client.ObjectKeyFromObject(p), &infrav1.OVirtProvider{})
	}, "2s", "250ms").Should(Succeed(), "the provider stays while the machine exists")

	// The machine is deleted through the provider being deleted: its VM is removed.
	deleteAndWait(t, om)
	_, exists := sim.VM(vm.ID)
	g.Expect(exists).To(BeFalse(), "the VM was removed through the provider")
	eventuallyGone(t, p)
}

// TestPlainHTTPIsRefusedAndInsecureTLSIsShown: an http:// engine, which earlier releases
// accepted with spec.tls.insecure, is refused with a clear condition (no crash, no silent skip);
// an https engine with spec.tls.insecure works and says in TLSVerified that it is not verified,
// while READY keeps its meaning.
func TestPlainHTTPIsRefusedAndInsecureTLSIsShown(t *testing.T) {
	g := NewWithT(t)
	plain := newProvider(t, sim.Password(), func(p *infrav1.OVirtProvider) {
		p.Spec.Engine = strings.Replace(sim.URL(), "https://", "http://", 1)
		p.Spec.TLS = &infrav1.OVirtProviderTLS{Insecure: true}
	})
	got := eventuallyProvider(t, plain, false, infrav1.InvalidEngineURLReason, clusterv1.ConditionSeverityError)
	g.Expect(conditions.GetMessage(got, infrav1.CanConnectToOVirtCondition)).To(ContainSubstring(
		"uses http, which would send the oVirt password in clear text, and is refused (also with spec.tls.insecure: true"))
	g.Expect(conditions.Get(got, infrav1.TLSVerifiedCondition)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.PlainHTTPReason)))
	g.Expect(v1beta1conditions.GetSeverity(got, infrav1.TLSVerifiedCondition)).To(HaveValue(Equal(clusterv1.ConditionSeverityError)))
	eventuallyEvent(t, plain, "ConnectionFailed")

	insecure := newProvider(t, sim.Password(), func(p *infrav1.OVirtProvider) { p.Spec.TLS = &infrav1.OVirtProviderTLS{Insecure: true} })
	got = eventuallyProvider(t, insecure, true, "", "")
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(insecure), got)).To(Succeed())
		g.Expect(conditions.Get(got, infrav1.TLSVerifiedCondition)).To(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.InsecureSkipVerifyReason), HaveField("Message", ContainSubstring("spec.tls.insecure is true"))))
	}, timeout, interval).Should(Succeed())
	g.Expect(providerV1Beta1(got).Ready).To(BeTrue(), "v1beta1 status.ready (kubectl get capovp.v1beta1 READY) unchanged")
	g.Expect(conditions.IsTrue(got, infrav1.ReadyCondition)).To(BeTrue(), "kubectl get capovp READY unchanged")

	verified := newProvider(t, sim.Password(), nil)
	got = eventuallyProvider(t, verified, true, "", "")
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(verified), got)).To(Succeed())
		g.Expect(conditions.Get(got, infrav1.TLSVerifiedCondition)).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", infrav1.CustomCAReason)))
	}, timeout, interval).Should(Succeed())
}

// startGarbageCollector runs Kubernetes' garbage collector (kube-controller-manager with only
// that controller) against the suite's API server, when the node assets of make e2e are built
// (NODE_ASSETS, or bin/node/*/kube-controller-manager); without them the caller's checks still
// hold, only without a collector that could delete anything. It returns the stop function and
// whether a collector runs.
func startGarbageCollector(t *testing.T) (stop func(), running bool) {
	t.Helper()
	bin := ""
	if dir := os.Getenv("NODE_ASSETS"); dir != "" {
		bin = filepath.Join(dir, "kube-controller-manager")
	} else if root, err := envtest.RepoRoot(); err == nil {
		if found, _ := filepath.Glob(filepath.Join(root, "bin", "node", "*", "kube-controller-manager")); len(found) > 0 {
			bin = found[0]
		}
	}
	if _, err := os.Stat(bin); bin == "" || err != nil {
		t.Log("kube-controller-manager not built (make node-assets): checking the Secrets without a garbage collector")
		return func() {}, false
	}
	gc, err := harness.Start("garbage-collector", bin, []string{
		"--kubeconfig=" + kubeconfigPath, "--controllers=garbagecollector", "--leader-elect=false",
		"--secure-port=0", "--concurrent-gc-syncs=5",
	}, nil, filepath.Join(workDir, "logs", "garbage-collector.log"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	// Prove that the collector works before relying on it: a ConfigMap owned by a deleted one goes.
	g := NewWithT(t)
	ctx := context.Background()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: credentialsNamespace, Name: "gc-owner-" + strings.ToLower(rand.String(5))}}
	g.Expect(k8s.Create(ctx, owner)).To(Succeed())
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: credentialsNamespace, Name: owner.Name + "-dependent",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
	g.Expect(k8s.Create(ctx, dependent)).To(Succeed())
	g.Expect(k8s.Delete(ctx, owner)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(dependent), &corev1.ConfigMap{}))
	}, 2*timeout, interval).Should(BeTrue(), "the garbage collector deletes dependents:\n%s", harness.Tail(gc.Logs(), 30))
	return func() { _ = gc.Stop(10 * time.Second) }, true
}
