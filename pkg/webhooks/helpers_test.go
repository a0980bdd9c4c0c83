package webhooks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

func TestMain(m *testing.M) {
	// controller-runtime's handlers log through its global logger; without one it complains
	// after 30 s in long benchmark and fuzz runs.
	ctrl.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := infrav1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := clusterv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// readerWith returns a reader that knows the given OVirtProviders.
func readerWith(providers ...*infrav1.OVirtProvider) client.Reader {
	objs := make([]client.Object, 0, len(providers))
	for _, p := range providers {
		objs = append(objs, p.DeepCopy())
	}
	return readerWithObjects(objs...)
}

// readerWithObjects returns a reader that knows the given objects (OVirt* kinds, Namespaces).
func readerWithObjects(objs ...client.Object) client.Reader {
	copies := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		copies = append(copies, o.DeepCopyObject().(client.Object))
	}
	return fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(copies...).Build()
}

// namespace returns a Namespace with labels.
func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// allowing restricts a provider to the listed namespaces and those matching selector labels.
func allowing(list []string, selector map[string]string) func(*infrav1.OVirtProvider) {
	return func(p *infrav1.OVirtProvider) {
		p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{List: list}
		if selector != nil {
			p.Spec.AllowedNamespaces.Selector = &metav1.LabelSelector{MatchLabels: selector}
		}
	}
}

// failingReader fails every read, like a cache that cannot reach the API server.
type failingReader struct{ client.Reader }

func (failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("connection refused")
}

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("connection refused")
}

func provider(name string, mutate ...func(*infrav1.OVirtProvider)) *infrav1.OVirtProvider {
	p := &infrav1.OVirtProvider{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: infrav1.OVirtProviderSpec{
			Engine:                "https://ovirt.example.com/ovirt-engine/api",
			CredentialsSecretName: name + "-capov-provider-secret",
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// vmSpec is the spec of the product doc's example machine (§7.3).
func vmSpec() infrav1.OVirtVMSpec {
	return infrav1.OVirtVMSpec{
		Provider:     "ovirt-prod",
		OVirtCluster: "Default",
		Template:     "rhcos-4.14",
		VMType:       infrav1.VMTypeServer,
		CPU:          &infrav1.CPU{Sockets: 1, Cores: 4, Threads: 1},
		Memory:       &infrav1.Memory{SizeMB: 8192, GuaranteedMB: 4096},
		OSDiskSizeGB: 80,
		NICs:         []infrav1.NIC{{VnicProfile: "ovirtmgmt"}},
	}
}

func machine(mutate ...func(*infrav1.OVirtMachine)) *infrav1.OVirtMachine {
	m := &infrav1.OVirtMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: "worker-abc123", Namespace: "default"},
		Spec:       infrav1.OVirtMachineSpec{OVirtVMSpec: vmSpec()},
	}
	for _, f := range mutate {
		f(m)
	}
	return m
}

func machineTemplate(mutate ...func(*infrav1.OVirtMachineTemplate)) *infrav1.OVirtMachineTemplate {
	t := &infrav1.OVirtMachineTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtMachineTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: "worker-template", Namespace: "default"},
		Spec:       infrav1.OVirtMachineTemplateSpec{Template: infrav1.OVirtMachineTemplateResource{Spec: vmSpec()}},
	}
	for _, f := range mutate {
		f(t)
	}
	return t
}

// updateContext is the context controller-runtime hands a defaulter for an UPDATE of old.
func updateContext(t testing.TB, old runtime.Object) context.Context {
	t.Helper()
	return admission.NewContextWithRequest(context.Background(), request(t, admissionv1.Update, old, old, false))
}

// request builds an admission request for obj (and old, for UPDATE).
func request(t testing.TB, op admissionv1.Operation, obj, old runtime.Object, dryRun bool) admission.Request {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: types.UID("test-" + strings.ToLower(string(op))), Operation: op, DryRun: ptr.To(dryRun),
	}}
	if obj != nil {
		req.Object = runtime.RawExtension{Raw: mustJSON(t, obj)}
	}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: mustJSON(t, old)}
	}
	return req
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// causes returns "<field>: <message>" of each cause of an Invalid error, or the error text.
func causes(err error) []string {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return []string{err.Error()}
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		out = append(out, c.Field+": "+c.Message)
	}
	return out
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// deprecated returns m's status.deprecated.v1beta1, allocating it: the v1beta1 failure fields
// live there in the hub.
func deprecated(m *infrav1.OVirtMachine) *infrav1.V1Beta1DeprecatedStatus {
	if m.Status.Deprecated == nil {
		m.Status.Deprecated = &infrav1.DeprecatedStatus{}
	}
	if m.Status.Deprecated.V1Beta1 == nil {
		m.Status.Deprecated.V1Beta1 = &infrav1.V1Beta1DeprecatedStatus{}
	}
	return m.Status.Deprecated.V1Beta1
}
