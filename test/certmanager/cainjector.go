package certmanager

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// cainjector's annotations (pkg/apis/certmanager/v1 and pkg/controller/cainjector).
const (
	// AnnotationInjectFrom names the Certificate (namespace/name) whose Secret's ca.crt is injected.
	AnnotationInjectFrom = "cert-manager.io/inject-ca-from"
	// AnnotationInjectFromSecret names a Secret (namespace/name) whose ca.crt is injected; the
	// Secret must carry AnnotationAllowDirectInjection "true".
	AnnotationInjectFromSecret = "cert-manager.io/inject-ca-from-secret"
	// AnnotationAllowDirectInjection on a Secret allows AnnotationInjectFromSecret to name it.
	AnnotationAllowDirectInjection = "cert-manager.io/allow-direct-injection"
)

// injectionTarget is a kind cainjector writes CA bundles into, and where.
type injectionTarget struct {
	gvk schema.GroupVersionKind
	// bundles are the paths of the caBundle fields to set (a path per webhook).
	bundles func(o *unstructured.Unstructured) [][]string
}

func injectionTargets() []injectionTarget {
	webhooks := func(o *unstructured.Unstructured) [][]string {
		list, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		var out [][]string
		for i := range list {
			out = append(out, []string{"webhooks", fmt.Sprint(i), "clientConfig", "caBundle"})
		}
		return out
	}
	return []injectionTarget{
		{gvk: schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
			bundles: func(o *unstructured.Unstructured) [][]string {
				// Only a webhook conversion has a client to trust (cainjector does the same).
				if s, _, _ := unstructured.NestedString(o.Object, "spec", "conversion", "strategy"); s != "Webhook" {
					return nil
				}
				return [][]string{{"spec", "conversion", "webhook", "clientConfig", "caBundle"}}
			}},
		{gvk: schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"}, bundles: webhooks},
		{gvk: schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"}, bundles: webhooks},
		{gvk: schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"},
			bundles: func(*unstructured.Unstructured) [][]string { return [][]string{{"spec", "caBundle"}} }},
	}
}

type injector struct {
	client client.Client
	target injectionTarget
}

func annotated(o client.Object) bool {
	a := o.GetAnnotations()
	return a[AnnotationInjectFrom] != "" || a[AnnotationInjectFromSecret] != ""
}

func (r *injector) setup(mgr ctrl.Manager) error {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.target.gvk)
	// A Secret that changes (issued, renewed) is injected again into every object naming it.
	secretToTargets := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, s client.Object) []reconcile.Request {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(r.target.gvk.GroupVersion().WithKind(r.target.gvk.Kind + "List"))
		if err := r.client.List(ctx, list); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, o := range list.Items {
			if annotated(&o) {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: o.GetName(), Namespace: o.GetNamespace()}})
			}
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).Named("cainjector-"+strings.ToLower(r.target.gvk.Kind)).
		For(obj, builder.WithPredicates(predicate.NewPredicateFuncs(annotated))).
		Watches(&corev1.Secret{}, secretToTargets).
		Complete(r)
}

// Reconcile writes the CA bundle named by the object's annotation into its caBundle fields.
func (r *injector) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.target.gvk)
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if !annotated(obj) {
		return reconcile.Result{}, nil
	}
	ca, err := r.caFor(ctx, obj.GetAnnotations())
	if err != nil || len(ca) == 0 {
		// Not there yet (or not allowed): the Secret's watch brings the object back.
		ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the CA to inject", "object", req.NamespacedName, "reason", err)
		return reconcile.Result{}, nil
	}
	want := base64.StdEncoding.EncodeToString(ca)
	patch := client.MergeFrom(obj.DeepCopy())
	changed := false
	for _, path := range r.target.bundles(obj) {
		if setBundle(obj.Object, path, want) {
			changed = true
		}
	}
	if !changed {
		return reconcile.Result{}, nil
	}
	ctrl.LoggerFrom(ctx).Info("Injecting CA bundle", r.target.gvk.Kind, req.NamespacedName)
	// A merge patch of a list replaces it: the webhooks are written whole, with their bundles.
	return reconcile.Result{}, r.client.Patch(ctx, obj, patch)
}

// setBundle sets a caBundle at path, whose numeric elements index lists; false if unchanged.
func setBundle(obj map[string]any, path []string, value string) bool {
	var cur any = obj
	for i, p := range path {
		last := i == len(path)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				if c[p] == value {
					return false
				}
				c[p] = value
				return true
			}
			next, ok := c[p]
			if !ok || next == nil {
				next = map[string]any{}
				c[p] = next
			}
			cur = next
		case []any:
			var idx int
			if _, err := fmt.Sscan(p, &idx); err != nil || idx >= len(c) {
				return false
			}
			cur = c[idx]
		default:
			return false
		}
	}
	return false
}

// caFor reads the ca.crt the annotations name, with cainjector's checks: the Secret of an
// inject-ca-from Certificate must have been issued for it, an inject-ca-from-secret Secret
// must allow direct injection.
func (r *injector) caFor(ctx context.Context, annotations map[string]string) ([]byte, error) {
	if ref := annotations[AnnotationInjectFrom]; ref != "" {
		key, err := splitRef(ref)
		if err != nil {
			return nil, err
		}
		crt := &cmapi.Certificate{}
		if err := r.client.Get(ctx, key, crt); err != nil {
			return nil, err
		}
		s := &corev1.Secret{}
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: crt.Spec.SecretName}, s); err != nil {
			return nil, err
		}
		if s.Annotations[cmapi.CertificateNameKey] != crt.Name {
			return nil, fmt.Errorf("secret %s/%s was not issued for Certificate %s", s.Namespace, s.Name, ref)
		}
		return s.Data[cmmeta.TLSCAKey], nil
	}
	key, err := splitRef(annotations[AnnotationInjectFromSecret])
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{}
	if err := r.client.Get(ctx, key, s); err != nil {
		return nil, err
	}
	if s.Annotations[AnnotationAllowDirectInjection] != "true" {
		return nil, fmt.Errorf("secret %s does not allow direct injection (%s)", key, AnnotationAllowDirectInjection)
	}
	return s.Data[cmmeta.TLSCAKey], nil
}

func splitRef(ref string) (client.ObjectKey, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" {
		return client.ObjectKey{}, fmt.Errorf("invalid reference %q: want namespace/name", ref)
	}
	return client.ObjectKey{Namespace: ns, Name: name}, nil
}
