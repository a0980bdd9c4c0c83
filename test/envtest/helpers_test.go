package envtest_test

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/capov/capov/test/envtest"
)

func restClient(e *envtest.Environment) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(e.Config)
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(e.Scheme).WithoutConversion()
	cfg.GroupVersion = nil
	return rest.UnversionedRESTClientFor(cfg)
}

func toUnstructured(e *envtest.Environment, obj client.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, e.Scheme)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

func keyOf(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }
