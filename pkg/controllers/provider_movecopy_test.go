package controllers

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

func (f *providerFixture) secretNamed(t *testing.T, name string) (*corev1.Secret, bool) {
	t.Helper()
	s := &corev1.Secret{}
	err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "capov-system", Name: name}, s)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return s, err == nil
}

// carried is the move copy of p1's Secret as clusterctl move leaves it in the target: the owner
// reference names the target's provider (p1-uid), the annotation the source's.
func carried(copiedFor string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capov-system", Name: "capovp-p1-move",
			Labels: map[string]string{infrav1.CredentialsMoveCopyLabel: ""},
			Annotations: map[string]string{infrav1.CredentialsCopyOfAnnotation: "p1-creds",
				infrav1.CredentialsCopiedForAnnotation: copiedFor},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtProvider", Name: "p1", UID: "p1-uid"}}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"username": []byte("admin@internal"), "password": []byte("moved")},
	}
}

// TestTheProviderKeepsAMoveCopyOfItsCredentials: clusterctl move carries a Secret only when a
// moved object owns it, and the provider must not own its credentials Secret (the garbage
// collector would delete it with the provider). The provider owns a copy instead, which follows
// the Secret: created, rotated with it, and deleted when the Secret is deleted here.
func TestTheProviderKeepsAMoveCopyOfItsCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newProviderFixture(t)
	f.reconcile(t)

	cp, ok := f.secretNamed(t, "capovp-p1-move")
	g.Expect(ok).To(BeTrue(), "the move copy exists")
	g.Expect(cp.Labels).To(HaveKey(infrav1.CredentialsMoveCopyLabel))
	g.Expect(cp.Annotations).To(HaveKeyWithValue(infrav1.CredentialsCopyOfAnnotation, "p1-creds"))
	g.Expect(cp.Annotations).To(HaveKeyWithValue(infrav1.CredentialsCopiedForAnnotation, "p1-uid"))
	g.Expect(cp.OwnerReferences).To(ConsistOf(HaveField("UID", BeEquivalentTo("p1-uid"))), "the provider owns the copy, so clusterctl move carries it")
	g.Expect(cp.Data).To(Equal(f.secret.Data))
	src, _ := f.secretNamed(t, "p1-creds")
	g.Expect(src.OwnerReferences).To(BeEmpty(), "the named Secret is never owned")

	// Rotation: the copy follows.
	src.Data["password"] = []byte("rotated")
	g.Expect(f.c.Update(ctx, src)).To(Succeed())
	f.reconcile(t)
	cp, _ = f.secretNamed(t, "capovp-p1-move")
	g.Expect(cp.Data).To(HaveKeyWithValue("password", []byte("rotated")))

	// A reconcile with nothing changed writes nothing.
	rv := cp.ResourceVersion
	f.reconcile(t)
	cp, _ = f.secretNamed(t, "capovp-p1-move")
	g.Expect(cp.ResourceVersion).To(Equal(rv))

	// Deleted here on purpose: the copy goes too, and the Secret is not brought back.
	g.Expect(f.c.Delete(ctx, src)).To(Succeed())
	f.reconcile(t)
	_, ok = f.secretNamed(t, "capovp-p1-move")
	g.Expect(ok).To(BeFalse(), "no copy outlives the Secret an operator deleted")
	_, ok = f.secretNamed(t, "p1-creds")
	g.Expect(ok).To(BeFalse(), "a Secret deleted here is not recreated")
	p, _ := f.get(t)
	g.Expect(v1beta1conditions.GetReason(p, infrav1.CanConnectToOVirtCondition)).To(Equal(infrav1.CredentialsMissingReason))
}

// TestACarriedMoveCopyRecreatesTheSecret: in the target of clusterctl move the provider and its
// copy exist but the named Secret does not; the manager recreates it from the copy, once, and
// the provider connects.
func TestACarriedMoveCopyRecreatesTheSecret(t *testing.T) {
	g := NewWithT(t)
	f := newProviderFixture(t)
	g.Expect(f.c.Delete(context.Background(), f.secret)).To(Succeed())
	g.Expect(f.c.Create(context.Background(), carried("uid-in-the-source"))).To(Succeed())

	f.reconcile(t)
	src, ok := f.secretNamed(t, "p1-creds")
	g.Expect(ok).To(BeTrue(), "the Secret is recreated from the copy")
	g.Expect(src.Data).To(HaveKeyWithValue("password", []byte("moved")))
	g.Expect(src.OwnerReferences).To(BeEmpty())
	g.Expect(src.Labels).NotTo(HaveKey(infrav1.CredentialsMoveCopyLabel))
	g.Expect(f.events()).To(ContainElement(ContainSubstring("CredentialsSecretRestored")))
	cp, _ := f.secretNamed(t, "capovp-p1-move")
	g.Expect(cp.Annotations).To(HaveKeyWithValue(infrav1.CredentialsCopiedForAnnotation, "p1-uid"), "the copy is this provider's now")

	f.reconcile(t)
	p, _ := f.get(t)
	g.Expect(v1beta1conditions.IsTrue(p, infrav1.CanConnectToOVirtCondition)).To(BeTrue(), "the provider connects with the recreated Secret")
}

// TestASecretCreatedMeanwhileIsKept: the Secret appears in the API server (an operator, a
// replicator) before the manager's cache has it; the recreation finds it there and leaves it:
// no event claims a restore, and the copy is not rewritten from its own data.
func TestASecretCreatedMeanwhileIsKept(t *testing.T) {
	g := NewWithT(t)
	f := newProviderFixture(t)
	g.Expect(f.c.Delete(context.Background(), f.secret)).To(Succeed())
	g.Expect(f.c.Create(context.Background(), carried("uid-in-the-source"))).To(Succeed())
	inner := f.r.Client
	f.r.Client = interceptor.NewClient(inner.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if obj.GetName() == "p1-creds" {
				return apierrors.NewAlreadyExists(corev1.Resource("secrets"), obj.GetName())
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	f.reconcile(t)
	g.Expect(f.events()).NotTo(ContainElement(ContainSubstring("CredentialsSecretRestored")))
	cp, _ := f.secretNamed(t, "capovp-p1-move")
	g.Expect(cp.Annotations).To(HaveKeyWithValue(infrav1.CredentialsCopiedForAnnotation, "uid-in-the-source"), "the copy waits for the Secret's own data")
}

// TestOnlyACopyOfThisProviderRecreatesTheSecret: a copy owned by another provider UID (a stale
// copy of a provider of the same name), one of another Secret, and a Secret of the copy's name
// that is no copy never bring a credential back, and the last is never touched.
func TestOnlyACopyOfThisProviderRecreatesTheSecret(t *testing.T) {
	otherOwner := carried("uid-in-the-source")
	otherOwner.OwnerReferences[0].UID = "an-older-p1"
	otherSecret := carried("uid-in-the-source")
	otherSecret.Annotations[infrav1.CredentialsCopyOfAnnotation] = "another-secret"
	notACopy := carried("uid-in-the-source")
	delete(notACopy.Labels, infrav1.CredentialsMoveCopyLabel)
	for name, cp := range map[string]*corev1.Secret{"owned by another UID": otherOwner, "of another Secret": otherSecret, "not a copy": notACopy} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			f := newProviderFixture(t)
			g.Expect(f.c.Delete(context.Background(), f.secret)).To(Succeed())
			g.Expect(f.c.Create(context.Background(), cp)).To(Succeed())
			f.reconcile(t)
			_, ok := f.secretNamed(t, "p1-creds")
			g.Expect(ok).To(BeFalse(), "no Secret is recreated")
			if name == "not a copy" {
				got, ok := f.secretNamed(t, "capovp-p1-move")
				g.Expect(ok).To(BeTrue())
				g.Expect(got.Data).To(Equal(cp.Data), "a Secret that is no copy is never touched")
				g.Expect(f.events()).To(ContainElement(ContainSubstring("CredentialsMoveCopyNameTaken")))
			}
		})
	}
}

// TestALongProviderNameGetsAValidCopyName: the copy's name stays a valid Secret name.
func TestALongProviderNameGetsAValidCopyName(t *testing.T) {
	g := NewWithT(t)
	long := &infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("a", 253)}}
	other := &infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("a", 252) + "b"}}
	g.Expect(len(moveCopyName(long))).To(BeNumerically("<=", 253))
	g.Expect(moveCopyName(long)).NotTo(Equal(moveCopyName(other)))
	g.Expect(moveCopyName(&infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: "ovirt-prod"}})).To(Equal("capovp-ovirt-prod-move"))
}
