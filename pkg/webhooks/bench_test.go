package webhooks

import (
	"context"
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// mapReader serves OVirtProviders from a map with a deep copy per read, which is what the
// informer cache of the webhook binary does (the fake client is much slower and would
// dominate the numbers).
type mapReader struct {
	client.Reader
	providers map[string]*infrav1.OVirtProvider
}

func (r mapReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	p, ok := r.providers[key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: infrav1.GroupVersion.Group, Resource: "ovirtproviders"}, key.Name)
	}
	p.DeepCopyInto(obj.(*infrav1.OVirtProvider))
	return nil
}

// benchHandler measures one admission handler on req: ns/op from the framework, plus the p50
// and p99 of the individual calls.
func benchHandler(b *testing.B, h *admission.Webhook, req admission.Request) {
	b.Helper()
	ctx := context.Background()
	if resp := h.Handle(ctx, req); !resp.Allowed {
		b.Fatalf("the benchmark request is refused: %+v", resp.Result)
	}
	var lat []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		h.Handle(ctx, req)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
	}
}

func benchMachineWebhook() *OVirtMachineWebhook {
	return &OVirtMachineWebhook{Reader: mapReader{providers: map[string]*infrav1.OVirtProvider{
		"ovirt-prod": provider("ovirt-prod", func(p *infrav1.OVirtProvider) {
			p.Spec.DiskClone, p.Spec.StorageDomainName = ptr.To(true), "fast-ssd"
		}),
	}}}
}

// BenchmarkAdmissionOVirtMachineDefaultCreate is the defaulting webhook on the create of the
// product doc's example machine: decode, provider read, defaulting, JSON patch.
func BenchmarkAdmissionOVirtMachineDefaultCreate(b *testing.B) {
	h := admission.WithDefaulter(testScheme(), admission.Defaulter[*infrav1.OVirtMachine](benchMachineWebhook()))
	benchHandler(b, h, request(b, admissionv1.Create, machine(), nil, false))
}

// BenchmarkAdmissionOVirtMachineValidateCreate is the validating webhook on the same create,
// after defaulting (diskclone and storage domain set).
func BenchmarkAdmissionOVirtMachineValidateCreate(b *testing.B) {
	h := admission.WithValidator(testScheme(), admission.Validator[*infrav1.OVirtMachine](benchMachineWebhook()))
	m := machine(func(m *infrav1.OVirtMachine) { m.Spec.DiskClone, m.Spec.StorageDomainName = ptr.To(true), "fast-ssd" })
	benchHandler(b, h, request(b, admissionv1.Create, m, nil, false))
}

// BenchmarkAdmissionOVirtMachineValidateUpdate is the validating webhook on the manager's
// providerID update (immutability check of the whole spec).
func BenchmarkAdmissionOVirtMachineValidateUpdate(b *testing.B) {
	h := admission.WithValidator(testScheme(), admission.Validator[*infrav1.OVirtMachine](benchMachineWebhook()))
	old := machine(func(m *infrav1.OVirtMachine) { m.Spec.DiskClone = ptr.To(true) })
	m := old.DeepCopy()
	m.Spec.ProviderID = "ovirt://0b9c3c5e-3f2a-4b8e-9a57-2d1e6f0c1a11"
	benchHandler(b, h, request(b, admissionv1.Update, m, old, false))
}

// BenchmarkAdmissionOVirtMachineDefaultUpdate is the defaulting webhook on an update (old
// object decoded from the request, clear-failure check).
func BenchmarkAdmissionOVirtMachineDefaultUpdate(b *testing.B) {
	h := admission.WithDefaulter(testScheme(), admission.Defaulter[*infrav1.OVirtMachine](benchMachineWebhook()))
	old := machine(func(m *infrav1.OVirtMachine) { m.Spec.DiskClone = ptr.To(true) })
	m := old.DeepCopy()
	m.Labels = map[string]string{"cluster.x-k8s.io/cluster-name": "c1"}
	benchHandler(b, h, request(b, admissionv1.Update, m, old, false))
}

// BenchmarkAdmissionOVirtProviderValidateCreate is the OVirtProvider validator with a CA bundle
// to decode and parse.
func BenchmarkAdmissionOVirtProviderValidateCreate(b *testing.B) {
	h := admission.WithValidator(testScheme(), admission.Validator[*infrav1.OVirtProvider](&OVirtProviderWebhook{}))
	p := provider("ovirt-prod", func(p *infrav1.OVirtProvider) {
		p.Spec.TLS = &infrav1.OVirtProviderTLS{Certs: b64(caPEM(b))}
	})
	benchHandler(b, h, request(b, admissionv1.Create, p, nil, false))
}
