package webhooks

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// v1beta1Update is the context of an UPDATE that a client sent as v1beta1 (kubectl replace of a
// v1beta1 manifest): the API server converted it to v1beta2 before admission, and RequestKind
// keeps the version the client used.
func v1beta1Update(t *testing.T, kind string, old, obj any) context.Context {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "test-v1beta1-update", Operation: admissionv1.Update,
		Kind:        metav1.GroupVersionKind{Group: infrav1.GroupVersion.Group, Version: "v1beta2", Kind: kind},
		RequestKind: &metav1.GroupVersionKind{Group: infrav1.GroupVersion.Group, Version: "v1beta1", Kind: kind},
	}}
	req.Object.Raw, req.OldObject.Raw = mustJSON(t, obj), mustJSON(t, old)
	return admission.NewContextWithRequest(context.Background(), req)
}

// TestAV1beta1UpdateCannotWidenAProviderToEveryNamespace: defect 10 of "Safety, third round".
// v1beta1 has no spec.allowedNamespaces; a v1beta1 replace without the conversion-data
// annotation arrives with it gone, which opens the provider to every namespace. Before, that was
// admitted without a word.
func TestAV1beta1UpdateCannotWidenAProviderToEveryNamespace(t *testing.T) {
	g := NewWithT(t)
	old := provider("ovirt-prod")
	old.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{List: []string{"team-a"}}
	old.Spec.OrphanedVMs = infrav1.OrphanedVMsDelete
	old.Spec.OrphanedVMsGracePeriod = &metav1.Duration{Duration: 24 * time.Hour}
	obj := old.DeepCopy()
	obj.Spec.AllowedNamespaces, obj.Spec.OrphanedVMs, obj.Spec.OrphanedVMsGracePeriod = nil, "", nil
	obj.Spec.Engine = "https://engine2.example.com/ovirt-engine/api"

	_, err := (&OVirtProviderWebhook{}).ValidateUpdate(v1beta1Update(t, "OVirtProvider", old, obj), old, obj)
	g.Expect(causes(err)).To(ContainElement(And(ContainSubstring("spec.allowedNamespaces"), ContainSubstring("v1beta2"))))

	// The same change made in v1beta2 is the operator's decision (warned about elsewhere).
	_, err = (&OVirtProviderWebhook{}).ValidateUpdate(context.Background(), old, obj)
	g.Expect(err).NotTo(HaveOccurred())

	// Without allowedNamespaces to lose, the v1beta1 update is admitted, with a warning for
	// each v1beta2-only field it drops.
	old.Spec.AllowedNamespaces = nil
	warnings, err := (&OVirtProviderWebhook{}).ValidateUpdate(v1beta1Update(t, "OVirtProvider", old, obj), old, obj)
	g.Expect(err).NotTo(HaveOccurred())
	all := strings.Join(warnings, "\n")
	g.Expect(all).To(ContainSubstring("spec.orphanedVMs"))
	g.Expect(all).To(ContainSubstring("spec.orphanedVMsGracePeriod"))
}

// TestAV1beta1UpdateOfAnOVirtClusterWarnsAboutWhatItDrops: defect 10, OVirtCluster's
// v1beta2-only fields.
func TestAV1beta1UpdateOfAnOVirtClusterWarnsAboutWhatItDrops(t *testing.T) {
	g := NewWithT(t)
	old := &infrav1.OVirtCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c1"}}
	old.Spec.Provider = "ovirt-prod"
	old.Spec.FailureDomains = []infrav1.OVirtFailureDomain{{Name: "fd-a", OVirtCluster: "Default"}}
	obj := old.DeepCopy()
	obj.Spec.Provider, obj.Spec.FailureDomains = "", nil
	warnings, err := (&OVirtClusterWebhook{}).ValidateUpdate(v1beta1Update(t, "OVirtCluster", old, obj), old, obj)
	g.Expect(err).NotTo(HaveOccurred())
	all := strings.Join(warnings, "\n")
	g.Expect(all).To(ContainSubstring("spec.provider"))
	g.Expect(all).To(ContainSubstring("spec.failureDomains"))
	g.Expect(all).To(ContainSubstring("v1beta2"))
}
