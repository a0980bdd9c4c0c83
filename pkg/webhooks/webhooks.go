package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	ctrlconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/featuregates"
	"github.com/capov/capov/pkg/provideraccess"
)

// ClearFailureAnnotation asks the manager to clear status.failureReason and
// status.failureMessage of an OVirtMachine. The OVirtMachine defaulter sets it when an update of
// the main resource removes those fields (the documented `kubectl patch --type=merge -p
// '{"status":{"failureReason":null,"failureMessage":null}}'`, product doc §4.3): the API server
// drops status changes sent to the main resource after the mutating webhooks ran, so the request
// reaches the manager only through this annotation.
//
// It must stay equal to controllers.ClearFailureAnnotation in pkg/controllers (the webhook does
// not import the controllers).
const ClearFailureAnnotation = "capov.infrastructure.cluster.x-k8s.io/clear-failure"

// SetupWithManager registers the defaulting and validating webhooks of every CAPOV kind with the
// manager's webhook server. OVirtProviders and Namespaces (for spec.allowedNamespaces.selector)
// are read through the manager's cache (read-only); their informers are registered here so that
// the cache can be built with ReaderFailOnMissingInformer and never starts an informer for
// anything else (no Secrets). OVirtMachines are listed uncached, only when an OVirtProvider is
// deleted or its allowedNamespaces change: caching every machine for that would cost memory for
// nothing. Cluster API Clusters and OVirtClusters are read uncached too, only for an
// OVirtMachine whose spec.failureDomain is set or set from empty; mgr's scheme must know Cluster
// API's v1beta2 Cluster.
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, gates featuregates.Gates) error {
	if _, err := mgr.GetCache().GetInformer(ctx, &infrav1.OVirtProvider{}); err != nil {
		return fmt.Errorf("registering the OVirtProvider informer: %w", err)
	}
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Namespace{}); err != nil {
		return fmt.Errorf("registering the Namespace informer: %w", err)
	}
	reader := mgr.GetCache()
	// A manifest with a value of the wrong type is answered by schema validation (typeerrors.go):
	// these handlers are registered before the builders, which then skip their paths.
	scheme, srv := mgr.GetScheme(), mgr.GetWebhookServer()
	srv.Register("/convert", LenientConversion(scheme, ctrlconversion.NewWebhookHandler(scheme, mgr.GetConverterRegistry())))
	machines := &OVirtMachineWebhook{Reader: reader, Clusters: mgr.GetAPIReader(), Gates: gates}
	templates := &OVirtMachineTemplateWebhook{Reader: reader, Gates: gates}
	machineGVK, templateGVK := infrav1.GroupVersion.WithKind("OVirtMachine"), infrav1.GroupVersion.WithKind("OVirtMachineTemplate")
	srv.Register(mutatePath(machineGVK), defaulterWithTypeErrorsToSchema[*infrav1.OVirtMachine](scheme, machineGVK, machines))
	srv.Register(mutatePath(templateGVK), defaulterWithTypeErrorsToSchema[*infrav1.OVirtMachineTemplate](scheme, templateGVK, templates))
	if err := (&OVirtProviderWebhook{Reader: reader, Machines: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&OVirtClusterWebhook{Reader: reader}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&OVirtClusterTemplateWebhook{}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := machines.SetupWithManager(mgr); err != nil {
		return err
	}
	return templates.SetupWithManager(mgr)
}

// invalid turns a non-empty error list into the Invalid status error the API server shows as
// `<Kind> "<name>" is invalid: [<path>: <type>: <detail>, ...]`; nil when errs is empty.
func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(infrav1.GroupVersion.WithKind(kind).GroupKind(), name, errs)
}

// oldObjectFromRequest decodes the object an UPDATE replaces from the admission request in ctx
// into into. Defaulters get only the new object from controller-runtime, so they read the old
// one here. It reports false for CREATE, and when ctx carries no request (Default called
// directly, as in unit tests): both mean "no previous object".
func oldObjectFromRequest(ctx context.Context, into any) (bool, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 {
		return false, nil //nolint:nilerr // no request in ctx means no old object, not a failure
	}
	if err := json.Unmarshal(req.OldObject.Raw, into); err != nil {
		return false, apierrors.NewBadRequest(fmt.Sprintf("decoding the old object of the update: %v", err))
	}
	return true, nil
}

// requestFromContext returns the admission request controller-runtime put into ctx, if any.
func requestFromContext(ctx context.Context) (admission.Request, bool) {
	req, err := admission.RequestFromContext(ctx)
	return req, err == nil
}

// getProvider reads the OVirtProvider named name. A missing provider is (nil, nil): GitOps tools
// apply manifests in any order, and refusing machines until their provider exists could
// deadlock a sync, so callers admit with a warning instead.
func getProvider(ctx context.Context, r client.Reader, name string) (*infrav1.OVirtProvider, error) {
	if r == nil || strings.TrimSpace(name) == "" {
		return nil, nil
	}
	p := &infrav1.OVirtProvider{}
	if err := r.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		// Without the provider the clone mode cannot be resolved; failing the request (the
		// webhook's failurePolicy is Fail anyway) is better than guessing.
		return nil, apierrors.NewInternalError(fmt.Errorf("reading OVirtProvider %q (spec.provider): %w; retry the request", name, err))
	}
	return p, nil
}

// checkProviderAccess refuses spec.provider (at path) when its OVirtProvider does not allow
// namespace (spec.allowedNamespaces, see provideraccess.Allowed). A provider that does not exist
// yet (nil) is not refused here: the manager reports it on the machine.
func checkProviderAccess(ctx context.Context, r client.Reader, provider *infrav1.OVirtProvider, namespace string, path *field.Path) (field.ErrorList, error) {
	if provider == nil {
		return nil, nil
	}
	ok, why, err := provideraccess.Allowed(ctx, r, provider, namespace)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("%w; retry the request", err))
	}
	if !ok {
		return field.ErrorList{field.Forbidden(path, why)}, nil
	}
	return nil, nil
}

// changedFields returns the paths of the fields of two structs of the same type that differ,
// named by their JSON names under path; fields of inline (embedded) structs are flattened like
// JSON does. Comparison is semantic (a nil and an empty list are equal), as they are the same
// JSON. Walking the struct instead of listing fields keeps immutability checks complete when
// the API gains a field.
func changedFields(path *field.Path, oldObj, newObj any) []*field.Path {
	ov, nv := reflect.Indirect(reflect.ValueOf(oldObj)), reflect.Indirect(reflect.ValueOf(newObj))
	if !ov.IsValid() || !nv.IsValid() || ov.Kind() != reflect.Struct || nv.Type() != ov.Type() {
		if equality.Semantic.DeepEqual(oldObj, newObj) {
			return nil
		}
		return []*field.Path{path}
	}
	var out []*field.Path
	t := ov.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" && (sf.Anonymous || strings.Contains(opts, "inline")) {
			out = append(out, changedFields(path, ov.Field(i).Interface(), nv.Field(i).Interface())...)
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if !equality.Semantic.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			out = append(out, path.Child(name))
		}
	}
	return out
}

// sentAsV1beta1 reports whether the client sent the request in v1beta1 (the API server converted
// it to v1beta2 for admission): a v1beta1 object cannot carry v1beta2-only fields, so they arrive
// empty unless its conversion-data annotation brought them back.
func sentAsV1beta1(ctx context.Context) bool {
	req, ok := requestFromContext(ctx)
	return ok && req.RequestKind != nil && req.RequestKind.Version == "v1beta1"
}

// droppedByV1beta1 words the warning of a v1beta1 update that empties v1beta2-only fields (each
// name with its path) the old object had.
func droppedByV1beta1(kind string, fields []string) string {
	return fmt.Sprintf("this v1beta1 update of the %s removes %s, which v1beta1 cannot express (its conversion-data annotation "+
		"was dropped or edited): they are gone now; set them again in v1beta2 (kubectl edit %s.v1beta2.%s <name>)",
		kind, strings.Join(fields, ", "), strings.ToLower(kind)+"s", infrav1.GroupVersion.Group)
}
