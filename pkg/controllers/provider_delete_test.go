package controllers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt/fake"
)

// providerFixture is the OVirtProvider reconciler on controller-runtime's fake client (with the
// spec.provider index of OVirtMachines the machine controller registers) and the fake oVirt
// factory: provider p1 with its credentials Secret in capov-system.
type providerFixture struct {
	r       *OVirtProviderReconciler
	c       client.Client
	factory *fake.Factory
	rec     *events.FakeRecorder
	p       *infrav1.OVirtProvider
	secret  *corev1.Secret
}

func newProviderFixture(t *testing.T, objs ...client.Object) *providerFixture {
	t.Helper()
	g := NewWithT(t)
	s := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	g.Expect(infrav1.AddToScheme(s)).To(Succeed())
	f := &providerFixture{factory: fake.NewFactory(fake.NewDefaultClient()), rec: events.NewFakeRecorder(100)}
	f.p = &infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: "p1", UID: "p1-uid"},
		Spec: infrav1.OVirtProviderSpec{Engine: "https://engine.example.com/ovirt-engine/api", CredentialsSecretName: "p1-creds"}}
	f.secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capov-system", Name: "p1-creds"},
		Data: map[string][]byte{"username": []byte("admin@internal"), "password": []byte("secret")}}
	f.c = crfake.NewClientBuilder().WithScheme(s).WithObjects(append([]client.Object{f.p, f.secret}, objs...)...).
		WithStatusSubresource(&infrav1.OVirtProvider{}).
		WithIndex(&infrav1.OVirtMachine{}, providerIndex, func(o client.Object) []string { return []string{o.(*infrav1.OVirtMachine).Spec.Provider} }).
		Build()
	f.r = &OVirtProviderReconciler{
		Client: f.c, Recorder: f.rec, CheckInterval: 5 * time.Minute, Now: time.Now,
		Connector: &Connector{Reader: f.c, Namespace: "capov-system", Factory: f.factory},
	}
	return f
}

func (f *providerFixture) reconcile(t *testing.T) ctrl.Result {
	t.Helper()
	res, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "p1"}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return res
}

func (f *providerFixture) get(t *testing.T) (*infrav1.OVirtProvider, bool) {
	t.Helper()
	p := &infrav1.OVirtProvider{}
	err := f.c.Get(context.Background(), client.ObjectKey{Name: "p1"}, p)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	return p, err == nil
}

func (f *providerFixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func namingMachine(ns, name, provider string) *infrav1.OVirtMachine {
	return &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{Provider: provider}}}
}

// TestTheProviderNoLongerOwnsItsSecret: before, the reconciler made the provider an owner of its
// credentials Secret, and the garbage collector deleted the Secret with the provider. Now it adds
// nothing, and removes the reference an earlier release added, and only that one.
func TestTheProviderNoLongerOwnsItsSecret(t *testing.T) {
	g := NewWithT(t)
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep-me", UID: "cm-uid"}
	sameNameOtherUID := metav1.OwnerReference{APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtProvider", Name: "p1", UID: "p1-of-another-cluster"}
	f := newProviderFixture(t)
	base := f.secret.DeepCopy()
	f.secret.OwnerReferences = []metav1.OwnerReference{
		other,
		{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "OVirtProvider", Name: "p1", UID: "p1-uid"},
		sameNameOtherUID,
	}
	g.Expect(f.c.Patch(context.Background(), f.secret, client.MergeFrom(base))).To(Succeed())

	f.reconcile(t)
	s := &corev1.Secret{}
	g.Expect(f.c.Get(context.Background(), client.ObjectKeyFromObject(f.secret), s)).To(Succeed())
	g.Expect(s.OwnerReferences).To(ConsistOf(other, sameNameOtherUID), "only this provider's reference goes")
	g.Expect(f.events()).To(ContainElement(ContainSubstring("CredentialsSecretReleased")))

	// A fresh provider whose Secret carries no reference never gets one.
	f2 := newProviderFixture(t)
	f2.reconcile(t)
	g.Expect(f2.c.Get(context.Background(), client.ObjectKeyFromObject(f2.secret), s)).To(Succeed())
	g.Expect(s.OwnerReferences).To(BeEmpty())
	p, _ := f2.get(t)
	g.Expect(v1beta1conditions.IsTrue(p, infrav1.CanConnectToOVirtCondition)).To(BeTrue(), "the check itself still runs")
	g.Expect(f2.events()).NotTo(ContainElement(ContainSubstring("CredentialsSecretReleased")))
}

// TestTheSecretIsReleasedEvenWhenTheProviderCannotConnect: an http:// provider of an earlier
// release never reads its Secret any more (the URL is refused first), yet its Secret must not
// be deleted with it.
func TestTheSecretIsReleasedEvenWhenTheProviderCannotConnect(t *testing.T) {
	g := NewWithT(t)
	f := newProviderFixture(t)
	base := f.p.DeepCopy()
	f.p.Spec.Engine = "http://engine.example.com/ovirt-engine/api"
	g.Expect(f.c.Patch(context.Background(), f.p, client.MergeFrom(base))).To(Succeed())
	sBase := f.secret.DeepCopy()
	f.secret.OwnerReferences = []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtProvider", Name: "p1", UID: "p1-uid"}}
	g.Expect(f.c.Patch(context.Background(), f.secret, client.MergeFrom(sBase))).To(Succeed())

	f.reconcile(t)
	s := &corev1.Secret{}
	g.Expect(f.c.Get(context.Background(), client.ObjectKeyFromObject(f.secret), s)).To(Succeed())
	g.Expect(s.OwnerReferences).To(BeEmpty())
}

func TestTheFinalizerHoldsAProviderWhileMachinesNameIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newProviderFixture(t, namingMachine("team-a", "worker-1", "p1"), namingMachine("team-b", "cp-0", "p1"), namingMachine("team-a", "other", "p2"))

	f.reconcile(t)
	p, _ := f.get(t)
	g.Expect(controllerutil.ContainsFinalizer(p, infrav1.ProviderFinalizer)).To(BeTrue(), "the first reconcile adds the finalizer")
	g.Expect(conditions.Has(p, infrav1.DeletingCondition)).To(BeFalse())

	g.Expect(f.c.Delete(ctx, p)).To(Succeed())
	f.events()
	res := f.reconcile(t)
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	p, exists := f.get(t)
	g.Expect(exists).To(BeTrue(), "the provider stays while machines name it")
	want := "2 OVirtMachines name OVirtProvider p1 in spec.provider: team-a/worker-1, team-b/cp-0; " +
		"their VMs are removed through this provider, so it is deleted only once they are gone: delete them first"
	g.Expect(conditions.Get(p, infrav1.DeletingCondition)).To(And(HaveField("Status", metav1.ConditionTrue),
		HaveField("Reason", infrav1.InUseReason), HaveField("Message", ContainSubstring(want))))
	g.Expect(v1beta1conditions.Get(p, infrav1.DeletingCondition)).To(And(HaveField("Status", corev1.ConditionTrue),
		HaveField("Reason", infrav1.InUseReason), HaveField("Message", ContainSubstring(want))), "v1beta1 readers see it too")
	g.Expect(conditions.IsTrue(p, infrav1.ReadyCondition)).To(BeTrue(), "Ready still says whether the Engine answers")
	evs := f.events()
	g.Expect(evs).To(ConsistOf(And(ContainSubstring("Warning DeletionBlocked"), ContainSubstring(want))))
	g.Expect(f.factory.Forgotten()).To(BeEmpty(), "the machines being deleted still need the connection")

	// Nothing changed: no second event.
	f.reconcile(t)
	g.Expect(f.events()).To(BeEmpty())

	// One machine goes: the list shrinks and the event says so.
	g.Expect(f.c.Delete(ctx, namingMachine("team-b", "cp-0", "p1"))).To(Succeed())
	f.reconcile(t)
	p, _ = f.get(t)
	g.Expect(conditions.GetMessage(p, infrav1.DeletingCondition)).To(HavePrefix("1 OVirtMachine names OVirtProvider p1 in spec.provider: team-a/worker-1;"))
	g.Expect(f.events()).To(HaveLen(1))

	// The last one goes: the finalizer is removed, the provider is gone, its connection too.
	g.Expect(f.c.Delete(ctx, namingMachine("team-a", "worker-1", "p1"))).To(Succeed())
	f.reconcile(t)
	_, exists = f.get(t)
	g.Expect(exists).To(BeFalse())
	g.Expect(f.factory.Forgotten()).To(ContainElement("p1"))
	s := &corev1.Secret{}
	g.Expect(f.c.Get(ctx, client.ObjectKeyFromObject(f.secret), s)).To(Succeed(), "the Secret stays")
}

func TestMoreThanTenMachinesAreCounted(t *testing.T) {
	g := NewWithT(t)
	var objs []client.Object
	for i := range 13 {
		objs = append(objs, namingMachine("ns", fmt.Sprintf("m%02d", i), "p1"))
	}
	f := newProviderFixture(t, objs...)
	f.reconcile(t)
	p, _ := f.get(t)
	g.Expect(f.c.Delete(context.Background(), p)).To(Succeed())
	f.reconcile(t)
	p, _ = f.get(t)
	msg := conditions.GetMessage(p, infrav1.DeletingCondition)
	g.Expect(msg).To(HavePrefix("13 OVirtMachines name OVirtProvider p1 in spec.provider: ns/m00, ns/m01, ns/m02, ns/m03, ns/m04, ns/m05, ns/m06, ns/m07, ns/m08, ns/m09 and 3 more;"))
}

func TestAProviderMovedByClusterctlIsNotHeld(t *testing.T) {
	g := NewWithT(t)
	f := newProviderFixture(t, namingMachine("team-a", "worker-1", "p1"))
	f.reconcile(t)
	p, _ := f.get(t)
	base := p.DeepCopy()
	p.Annotations = map[string]string{deleteForMoveAnnotation: ""}
	g.Expect(f.c.Patch(context.Background(), p, client.MergeFrom(base))).To(Succeed())
	g.Expect(f.c.Delete(context.Background(), p)).To(Succeed())
	f.reconcile(t)
	_, exists := f.get(t)
	g.Expect(exists).To(BeFalse())
}

func TestTLSVerifiedSaysHowTheEngineIsVerified(t *testing.T) {
	tests := []struct {
		name       string
		engine     string
		tls        *infrav1.OVirtProviderTLS
		wantStatus metav1.ConditionStatus
		wantReason string
		severity   clusterv1.ConditionSeverity
	}{
		{"no tls settings verify against the system pool", "https://e/ovirt-engine/api", nil, metav1.ConditionTrue, infrav1.SystemCAReason, ""},
		{"cert true verifies against the system pool", "https://e/ovirt-engine/api", &infrav1.OVirtProviderTLS{Cert: true}, metav1.ConditionTrue, infrav1.SystemCAReason, ""},
		{"certs verify against the given CAs", "https://e/ovirt-engine/api", &infrav1.OVirtProviderTLS{Certs: testCA}, metav1.ConditionTrue, infrav1.CustomCAReason, ""},
		{"invalid certs are reported", "https://e/ovirt-engine/api", &infrav1.OVirtProviderTLS{Certs: "!!"}, metav1.ConditionFalse, infrav1.InvalidTLSConfigReason, clusterv1.ConditionSeverityError},
		{"insecure is a warning", "https://e/ovirt-engine/api", &infrav1.OVirtProviderTLS{Insecure: true, Certs: testCA}, metav1.ConditionFalse, infrav1.InsecureSkipVerifyReason, clusterv1.ConditionSeverityWarning},
		{"http is an error, with or without insecure", "http://e/ovirt-engine/api", &infrav1.OVirtProviderTLS{Insecure: true}, metav1.ConditionFalse, infrav1.PlainHTTPReason, clusterv1.ConditionSeverityError},
		{"HTTP in capitals is http", "HTTP://e/ovirt-engine/api", nil, metav1.ConditionFalse, infrav1.PlainHTTPReason, clusterv1.ConditionSeverityError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := &infrav1.OVirtProvider{Spec: infrav1.OVirtProviderSpec{Engine: tt.engine, TLS: tt.tls}}
			markTLSVerified(p)
			mirrorConditions(p, 1, ownedProviderConditions)
			c := conditions.Get(p, infrav1.TLSVerifiedCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(tt.wantStatus))
			g.Expect(c.Reason).To(Equal(tt.wantReason))
			g.Expect(c.Message).NotTo(BeEmpty())
			if tt.severity != "" {
				g.Expect(*v1beta1conditions.GetSeverity(p, infrav1.TLSVerifiedCondition)).To(Equal(tt.severity))
			}
		})
	}
}

// TestAnInsecureOrHTTPProviderKeepsItsReadySemantics: TLSVerified is not part of Ready, so
// `kubectl get capovp` READY still says only whether the Engine answers.
func TestAnInsecureOrHTTPProviderKeepsItsReadySemantics(t *testing.T) {
	g := NewWithT(t)
	f := newProviderFixture(t)
	base := f.p.DeepCopy()
	f.p.Spec.TLS = &infrav1.OVirtProviderTLS{Insecure: true}
	g.Expect(f.c.Patch(context.Background(), f.p, client.MergeFrom(base))).To(Succeed())
	f.reconcile(t)
	p, _ := f.get(t)
	g.Expect(conditions.IsTrue(p, infrav1.ReadyCondition)).To(BeTrue())
	g.Expect(p.Status.Deprecated.V1Beta1.Ready).To(BeTrue())
	g.Expect(conditions.GetReason(p, infrav1.TLSVerifiedCondition)).To(Equal(infrav1.InsecureSkipVerifyReason))

	// An http:// engine (accepted with insecure by earlier releases) is refused with a clear
	// reason in both conditions; nothing crashes and the provider keeps its Secret.
	base = p.DeepCopy()
	p.Spec.Engine = "http://engine.example.com/ovirt-engine/api"
	g.Expect(f.c.Patch(context.Background(), p, client.MergeFrom(base))).To(Succeed())
	f.reconcile(t)
	p, _ = f.get(t)
	g.Expect(conditions.IsFalse(p, infrav1.ReadyCondition)).To(BeTrue())
	g.Expect(conditions.Get(p, infrav1.CanConnectToOVirtCondition)).To(And(HaveField("Reason", infrav1.InvalidEngineURLReason),
		HaveField("Message", ContainSubstring("uses http, which would send the oVirt password in clear text, and is refused (also with spec.tls.insecure: true"))))
	g.Expect(conditions.GetReason(p, infrav1.TLSVerifiedCondition)).To(Equal(infrav1.PlainHTTPReason))
	g.Expect(*p.Status.Deprecated.V1Beta1.FailureReason).To(Equal(infrav1.OVirtEngineConnectionCriticalFailure))
}

// testCA is the base64 PEM of a self-signed CA certificate, as spec.tls.certs holds it.
var testCA = func() string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "engine-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}()

// TestMachinesWakeOnlyAProviderBeingDeleted: machine events reconcile their provider only while
// it waits for them, not on every creation.
func TestMachinesWakeOnlyAProviderBeingDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newProviderFixture(t)
	m := namingMachine("ns", "w-1", "p1")
	g.Expect(f.r.machineToProvider(ctx, m)).To(BeEmpty(), "a provider in use is not woken")
	g.Expect(f.r.machineToProvider(ctx, namingMachine("ns", "w-2", "gone"))).To(BeEmpty())
	f.reconcile(t) // adds the finalizer
	p, _ := f.get(t)
	g.Expect(f.c.Delete(ctx, p)).To(Succeed())
	g.Expect(f.r.machineToProvider(ctx, m)).To(ConsistOf(ctrl.Request{NamespacedName: types.NamespacedName{Name: "p1"}}))
}
