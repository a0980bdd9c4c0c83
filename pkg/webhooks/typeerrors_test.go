package webhooks

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrlconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/webhooks/conversion"
)

func typeErrorScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	NewWithT(t).Expect(infrav1.AddToScheme(s)).To(Succeed())
	NewWithT(t).Expect(infrav1beta1.AddToScheme(s)).To(Succeed())
	return s
}

// TestLenientConversionPassesTypeErrorsThroughInOrder: in one review, a well-typed object is
// converted by controller-runtime's handler and an object with a value of the wrong type is
// passed through with only its apiVersion changed, each in its place.
func TestLenientConversionPassesTypeErrorsThroughInOrder(t *testing.T) {
	g := NewWithT(t)
	s := typeErrorScheme(t)
	registry := ctrlconversion.NewRegistry()
	conv, err := conversion.OVirtMachineConverter()(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(registry.RegisterConverter(infrav1.GroupVersion.WithKind("OVirtMachine").GroupKind(), conv)).To(Succeed())
	h := LenientConversion(s, ctrlconversion.NewWebhookHandler(s, registry))

	good := `{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OVirtMachine","metadata":{"name":"a","namespace":"ns"},"spec":{"provider":"p","ovirtcluster":"Default","template":"t","diskclone":true}}`
	bad := `{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OVirtMachine","metadata":{"name":"b","namespace":"ns"},"spec":{"provider":"p","ovirtcluster":"Default","template":"t","diskclone":"Yes"}}`
	review := apiextensionsv1.ConversionReview{Request: &apiextensionsv1.ConversionRequest{UID: types.UID("u1"), DesiredAPIVersion: infrav1.GroupVersion.String(),
		Objects: []runtime.RawExtension{{Raw: []byte(bad)}, {Raw: []byte(good)}}}}
	review.APIVersion, review.Kind = apiextensionsv1.SchemeGroupVersion.String(), "ConversionReview"
	body, _ := json.Marshal(review)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body)))
	out := &apiextensionsv1.ConversionReview{}
	g.Expect(json.Unmarshal(rec.Body.Bytes(), out)).To(Succeed(), rec.Body.String())
	g.Expect(out.Response.Result.Status).To(Equal("Success"), out.Response.Result.Message)
	g.Expect(out.Response.UID).To(Equal(types.UID("u1")))
	g.Expect(out.Response.ConvertedObjects).To(HaveLen(2))
	var first, second map[string]any
	g.Expect(json.Unmarshal(out.Response.ConvertedObjects[0].Raw, &first)).To(Succeed())
	g.Expect(json.Unmarshal(out.Response.ConvertedObjects[1].Raw, &second)).To(Succeed())
	g.Expect(first).To(HaveKeyWithValue("apiVersion", infrav1.GroupVersion.String()))
	g.Expect(first["spec"]).To(HaveKeyWithValue("diskclone", "Yes"), "passed through for schema validation")
	g.Expect(second).To(HaveKeyWithValue("apiVersion", infrav1.GroupVersion.String()))
	g.Expect(second["metadata"]).To(HaveKeyWithValue("name", "a"))
	g.Expect(second["spec"]).To(HaveKeyWithValue("diskclone", true))
}

// TestTypeErrorsToSchemaAdmitsUnchanged: a mutating request whose object has a value of the
// wrong type is admitted without a patch (schema validation refuses it next); any other request
// reaches the defaulter.
func TestTypeErrorsToSchemaAdmitsUnchanged(t *testing.T) {
	g := NewWithT(t)
	s := typeErrorScheme(t)
	reached := false
	h := TypeErrorsToSchema(s, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached = true; w.WriteHeader(http.StatusTeapot) }))
	send := func(obj string) *httptest.ResponseRecorder {
		review := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: "u2", Object: runtime.RawExtension{Raw: []byte(obj)}}}
		review.APIVersion, review.Kind = admissionv1.SchemeGroupVersion.String(), "AdmissionReview"
		body, _ := json.Marshal(review)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body)))
		return rec
	}
	rec := send(`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"OVirtMachine","spec":{"osdisksizegb":"80"}}`)
	g.Expect(reached).To(BeFalse())
	out := &admissionv1.AdmissionReview{}
	g.Expect(json.Unmarshal(rec.Body.Bytes(), out)).To(Succeed())
	g.Expect(out.Response.Allowed).To(BeTrue())
	g.Expect(out.Response.UID).To(Equal(types.UID("u2")))
	g.Expect(out.Response.Patch).To(BeEmpty())

	rec = send(`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"OVirtMachine","spec":{"osdisksizegb":80}}`)
	g.Expect(reached).To(BeTrue())
	g.Expect(rec.Code).To(Equal(http.StatusTeapot))
}
