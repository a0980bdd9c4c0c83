package webhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// A manifest with a value of the wrong type (`diskclone: "Yes"`, `osdisksizegb: "80"`) must be
// answered by the CRD's schema validation, 422 Invalid with the field and what it accepts, as for
// any other invalid manifest. The API server runs the mutating webhooks before schema validation,
// and ours are registered for v1beta2: a v1beta1 object is converted first. A typed decode of such
// an object fails, so the conversion webhook answered with an error (the API server turns every
// conversion failure into a 500 InternalError) and the defaulter with a 400 that names no field.
// These two wrappers let such an object through untouched instead (issue 33, item 10): it cannot
// be stored, since schema validation refuses it right after.

// maxReviewBytes bounds the body of a review the wrappers read (the API server's own limit for
// an object is 3 MiB; a review may carry an old and a new object).
const maxReviewBytes = 7 << 20

// isTypeError reports whether err is a JSON value of the wrong type.
func isTypeError(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te)
}

// typedDecodeFails reports whether raw, a JSON object of a kind the scheme knows, has a value
// of the wrong type for its Go type.
func typedDecodeFails(scheme *runtime.Scheme, raw []byte) bool {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		return false
	}
	obj, err := scheme.New(schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind))
	if err != nil {
		return false
	}
	return isTypeError(json.Unmarshal(raw, obj))
}

// LenientConversion is the /convert handler: objects whose values all have their types are
// converted by inner (controller-runtime's conversion handler), an object with a value of the
// wrong type is passed through with only its apiVersion changed, for schema validation to refuse.
func LenientConversion(scheme *runtime.Scheme, inner http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		review := &apiextensionsv1.ConversionReview{}
		if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
			forward(w, r, inner, body)
			return
		}
		passed := map[int]bool{}
		var typed []runtime.RawExtension
		for i, o := range review.Request.Objects {
			if typedDecodeFails(scheme, o.Raw) {
				passed[i] = true
				continue
			}
			typed = append(typed, o)
		}
		if len(passed) == 0 {
			forward(w, r, inner, body)
			return
		}
		converted := []runtime.RawExtension{}
		if len(typed) > 0 {
			sub := review.DeepCopy()
			sub.Request.Objects = typed
			resp, err := serve(r, inner, sub)
			if err != nil || resp.Response == nil || resp.Response.Result.Status != "Success" {
				writeJSON(w, resp, err)
				return
			}
			converted = resp.Response.ConvertedObjects
		}
		out := make([]runtime.RawExtension, 0, len(review.Request.Objects))
		next := 0
		for i, o := range review.Request.Objects {
			if !passed[i] {
				if next >= len(converted) {
					writeJSON(w, nil, errors.New("the conversion returned fewer objects than it was given"))
					return
				}
				out = append(out, converted[next])
				next++
				continue
			}
			moved, err := withAPIVersion(o.Raw, review.Request.DesiredAPIVersion)
			if err != nil {
				writeJSON(w, nil, err)
				return
			}
			out = append(out, runtime.RawExtension{Raw: moved})
		}
		review.Response = &apiextensionsv1.ConversionResponse{UID: review.Request.UID, ConvertedObjects: out}
		review.Response.Result.Status = "Success"
		review.Request = nil
		writeJSON(w, review, nil)
	})
}

// withAPIVersion returns the JSON object raw with apiVersion set, everything else as it is.
func withAPIVersion(raw []byte, apiVersion string) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("passing an object through the conversion: %w", err)
	}
	m["apiVersion"] = apiVersion
	return json.Marshal(m)
}

// TypeErrorsToSchema wraps a mutating admission webhook: a request whose object has a value of
// the wrong type is admitted unchanged, so that the CRD's schema validation, which runs next,
// answers it with the field and what it accepts.
func TypeErrorsToSchema(scheme *runtime.Scheme, inner http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		review := &admissionv1.AdmissionReview{}
		if err := json.Unmarshal(body, review); err != nil || review.Request == nil || !typedDecodeFails(scheme, review.Request.Object.Raw) {
			forward(w, r, inner, body)
			return
		}
		writeJSON(w, &admissionv1.AdmissionReview{TypeMeta: review.TypeMeta,
			Response: &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}}, nil)
	})
}

// forward hands the request with its body to inner.
func forward(w http.ResponseWriter, r *http.Request, inner http.Handler, body []byte) {
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	inner.ServeHTTP(w, r2)
}

// serve runs review through inner and decodes its answer.
func serve(r *http.Request, inner http.Handler, review *apiextensionsv1.ConversionReview) (*apiextensionsv1.ConversionReview, error) {
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	forward(rec, r, inner, body)
	out := &apiextensionsv1.ConversionReview{}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		return nil, fmt.Errorf("reading the conversion's answer (HTTP %d): %w", rec.Code, err)
	}
	return out, nil
}

// writeJSON writes v, or a failed conversion review for err.
func writeJSON(w http.ResponseWriter, v any, err error) {
	if err != nil {
		failed := &apiextensionsv1.ConversionReview{Response: &apiextensionsv1.ConversionResponse{}}
		failed.APIVersion, failed.Kind = apiextensionsv1.SchemeGroupVersion.String(), "ConversionReview"
		failed.Response.Result.Status = "Failure"
		failed.Response.Result.Message = err.Error()
		v = failed
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// defaulterWithTypeErrorsToSchema is the mutating webhook of a kind as the controller-runtime
// builder makes it (the same log keys), behind TypeErrorsToSchema.
func defaulterWithTypeErrorsToSchema[T runtime.Object](scheme *runtime.Scheme, gvk schema.GroupVersionKind, d admission.Defaulter[T]) http.Handler {
	wh := admission.WithDefaulter(scheme, d)
	wh.LogConstructor = func(base logr.Logger, req *admission.Request) logr.Logger {
		log := base.WithValues("webhookGroup", gvk.Group, "webhookKind", gvk.Kind)
		if req == nil {
			return log
		}
		return log.WithValues(gvk.Kind, klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name,
			"resource", req.Resource, "user", req.UserInfo.Username, "requestID", req.UID)
	}
	return TypeErrorsToSchema(scheme, wh)
}

// mutatePath is the path controller-runtime's builder (and controller-gen's manifests) give the
// mutating webhook of gvk.
func mutatePath(gvk schema.GroupVersionKind) string {
	return "/mutate-" + strings.ReplaceAll(gvk.Group, ".", "-") + "-" + gvk.Version + "-" + strings.ToLower(gvk.Kind)
}
