package webhooks

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/featuregates"
)

func TestOVirtMachineDefault(t *testing.T) {
	cloning := provider("ovirt-prod", func(p *infrav1.OVirtProvider) {
		p.Spec.DiskClone, p.Spec.StorageDomainName = ptr.To(true), "fast-ssd"
	})
	thin := provider("ovirt-prod", func(p *infrav1.OVirtProvider) { p.Spec.StorageDomainName = "fast-ssd" })
	tests := []struct {
		name      string
		reader    *infrav1.OVirtProvider
		gates     featuregates.Gates
		obj       *infrav1.OVirtMachine
		wantClone bool
		wantSD    string
	}{
		{"a create takes diskclone and the storage domain from a cloning provider", cloning, featuregates.Gates{}, machine(), true, "fast-ssd"},
		{"a create takes diskclone from the gate and leaves the provider's storage domain without cloning", thin, featuregates.Gates{}, machine(), false, ""},
		{"a create with the gate on takes the provider's storage domain", thin, featuregates.Gates{DiskClone: true}, machine(), true, "fast-ssd"},
		{"a create whose provider does not exist takes diskclone from the gate only", nil, featuregates.Gates{DiskClone: true}, machine(), true, ""},
		{"a create keeps an explicit diskclone false", cloning, featuregates.Gates{}, machine(func(m *infrav1.OVirtMachine) { m.Spec.DiskClone = ptr.To(false) }), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := &OVirtMachineWebhook{Reader: readerWith(), Gates: tt.gates}
			if tt.reader != nil {
				w.Reader = readerWith(tt.reader)
			}
			g.Expect(w.Default(context.Background(), tt.obj)).To(Succeed())
			g.Expect(tt.obj.Spec.DiskClone).To(HaveValue(Equal(tt.wantClone)))
			g.Expect(tt.obj.Spec.StorageDomainName).To(Equal(tt.wantSD))
		})
	}
}

func TestOVirtMachineDefaultOnUpdate(t *testing.T) {
	w := &OVirtMachineWebhook{Reader: readerWith(provider("ovirt-prod", func(p *infrav1.OVirtProvider) { p.Spec.DiskClone = ptr.To(true) })), Gates: featuregates.Gates{}}
	failed := func(m *infrav1.OVirtMachine) {
		m.Spec.DiskClone, m.Spec.StorageDomainName = ptr.To(false), ""
		deprecated(m).FailureReason = ptr.To(infrav1.OVirtEngineConnectionCriticalFailure)
		deprecated(m).FailureMessage = ptr.To("OVirtProvider ovirt-prod has an invalid engine URL")
	}
	tests := []struct {
		name           string
		newObj         func(*infrav1.OVirtMachine)
		wantAnnotation bool
		wantClone      bool
	}{
		{"an update that removes failureReason and failureMessage asks the manager to clear them", func(m *infrav1.OVirtMachine) {
			deprecated(m).FailureReason, deprecated(m).FailureMessage = nil, nil
		}, true, false},
		{"an update that removes only failureMessage asks the manager too", func(m *infrav1.OVirtMachine) { deprecated(m).FailureMessage = nil }, true, false},
		{"an update that keeps the failure does not", func(*infrav1.OVirtMachine) {}, false, false},
		{"an update does not re-resolve diskclone from the provider but keeps the stored value", func(m *infrav1.OVirtMachine) { m.Spec.DiskClone = nil }, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			old := machine(failed)
			obj := old.DeepCopy()
			tt.newObj(obj)
			g.Expect(w.Default(updateContext(t, old), obj)).To(Succeed())
			if tt.wantAnnotation {
				g.Expect(obj.Annotations).To(HaveKeyWithValue(ClearFailureAnnotation, "true"))
			} else {
				g.Expect(obj.Annotations).NotTo(HaveKey(ClearFailureAnnotation))
			}
			g.Expect(obj.Spec.DiskClone).To(HaveValue(Equal(tt.wantClone)))
		})
	}
}

func TestClearFailureAnnotationMatchesTheManager(t *testing.T) {
	// pkg/controllers cannot be imported here (depguard); the value is the contract.
	NewWithT(t).Expect(ClearFailureAnnotation).To(Equal("capov.infrastructure.cluster.x-k8s.io/clear-failure"))
}

func TestOVirtMachineValidateCreate(t *testing.T) {
	cloning := provider("ovirt-prod", func(p *infrav1.OVirtProvider) { p.Spec.DiskClone = ptr.To(true) })
	thinSD := provider("ovirt-prod", func(p *infrav1.OVirtProvider) { p.Spec.StorageDomainName = "fast-ssd" })
	sd := func(m *infrav1.OVirtMachine) { m.Spec.StorageDomainName = "fast-ssd" }
	tests := []struct {
		name         string
		provider     *infrav1.OVirtProvider
		gates        featuregates.Gates
		obj          *infrav1.OVirtMachine
		wantErr      []string
		wantWarnings []string
	}{
		{"a valid machine of an existing provider is admitted without warnings", provider("ovirt-prod"), featuregates.Gates{}, machine(), nil, nil},
		{"a storage domain is admitted when the provider clones", cloning, featuregates.Gates{}, machine(sd), nil, nil},
		{"a storage domain is admitted when the gate clones", provider("ovirt-prod"), featuregates.Gates{DiskClone: true}, machine(sd), nil, nil},
		{"a storage domain without cloning is refused with the three ways to enable it", provider("ovirt-prod"), featuregates.Gates{}, machine(sd),
			[]string{"spec.storagedomainname: Invalid value: \"fast-ssd\"", "set spec.diskclone: true on OVirtProvider ovirt-prod", "customvalues.featureGates.disk-clone: true"}, nil},
		{"an explicit diskclone false wins over a cloning provider", cloning, featuregates.Gates{}, machine(sd, func(m *infrav1.OVirtMachine) { m.Spec.DiskClone = ptr.To(false) }),
			[]string{"spec.storagedomainname"}, nil},
		{"a missing provider is admitted with a warning", nil, featuregates.Gates{}, machine(), nil,
			[]string{"OVirtProvider ovirt-prod does not exist yet: an empty spec.diskclone defaults to the disk-clone feature gate (false)"}},
		{"a provider storage domain that cloning cannot use is a warning", thinSD, featuregates.Gates{}, machine(), nil,
			[]string{"OVirtProvider ovirt-prod sets storagedomainname fast-ssd, but diskclone resolves to false here"}},
		{"a providerID carried over by clusterctl move is admitted", provider("ovirt-prod"), featuregates.Gates{}, machine(func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "ovirt://1234" }), nil, nil},
		{"a providerID of another form is refused", provider("ovirt-prod"), featuregates.Gates{}, machine(func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "vsphere://1234" }),
			[]string{`spec.providerID: Invalid value: "vsphere://1234": must be ovirt://<vm-id>`}, nil},
		{"a providerID without a VM id is refused", provider("ovirt-prod"), featuregates.Gates{}, machine(func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "ovirt://" }),
			[]string{"spec.providerID"}, nil},
		{"the spec rules apply", provider("ovirt-prod"), featuregates.Gates{}, machine(func(m *infrav1.OVirtMachine) { m.Spec.CPU.Threads = 9 }),
			[]string{"spec.cpu.threads: Invalid value: 9"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := &OVirtMachineWebhook{Reader: readerWith(), Gates: tt.gates}
			if tt.provider != nil {
				w.Reader = readerWith(tt.provider)
			}
			warnings, err := w.ValidateCreate(context.Background(), tt.obj)
			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
				for _, want := range tt.wantErr {
					g.Expect(err.Error()).To(ContainSubstring(want))
				}
			}
			g.Expect(warnings).To(HaveLen(len(tt.wantWarnings)))
			for i, want := range tt.wantWarnings {
				g.Expect(warnings[i]).To(ContainSubstring(want))
			}
		})
	}
}

func TestOVirtMachineValidateCreateFailsWhenTheProviderCannotBeRead(t *testing.T) {
	g := NewWithT(t)
	w := &OVirtMachineWebhook{Reader: failingReader{}}
	_, err := w.ValidateCreate(context.Background(), machine())
	g.Expect(apierrors.IsInternalError(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring(`reading OVirtProvider "ovirt-prod"`))
	g.Expect(w.Default(context.Background(), machine())).To(MatchError(ContainSubstring("retry the request")))
}

func TestOVirtMachineValidateUpdate(t *testing.T) {
	tests := []struct {
		name    string
		old     func(*infrav1.OVirtMachine)
		update  func(*infrav1.OVirtMachine)
		wantErr []string
	}{
		{"a metadata-only update is admitted", nil, func(m *infrav1.OVirtMachine) { m.Labels = map[string]string{"a": "b"} }, nil},
		{"setting providerID once is admitted", nil, func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "ovirt://vm-1" }, nil},
		{"setting providerID from an empty string is admitted", func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "" },
			func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "ovirt://vm-1" }, nil},
		{"setting a malformed providerID is refused", nil, func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "vm-1" }, []string{"spec.providerID: Invalid value"}},
		{"changing providerID is refused", func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "ovirt://vm-1" },
			func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "ovirt://vm-2" },
			[]string{`spec.providerID: Forbidden: is set once by the manager and cannot be changed or removed afterwards; keep "ovirt://vm-1"`}},
		{"removing providerID is refused", func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "ovirt://vm-1" },
			func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "" }, []string{"spec.providerID: Forbidden"}},
		{"changing the template is refused", nil, func(m *infrav1.OVirtMachine) { m.Spec.Template = "rhcos-4.15" },
			[]string{"spec.template: Forbidden: the spec of an OVirtMachine cannot change after create: change the OVirtMachineTemplate instead"}},
		{"changing several fields names each", nil, func(m *infrav1.OVirtMachine) {
			m.Spec.CPU.Cores, m.Spec.NICs = 8, nil
			m.Spec.DiskClone = ptr.To(true)
		}, []string{"spec.diskclone: Forbidden", "spec.cpu: Forbidden", "spec.nics: Forbidden"}},
		{"an empty and an omitted NIC list are the same", func(m *infrav1.OVirtMachine) { m.Spec.NICs = nil },
			func(m *infrav1.OVirtMachine) { m.Spec.NICs = []infrav1.NIC{} }, nil},
		{"an object admitted under older rules can still lose its finalizer", func(m *infrav1.OVirtMachine) {
			m.Spec.StorageDomainName, m.Spec.DiskClone = "fast-ssd", ptr.To(false)
			m.Finalizers = []string{infrav1.MachineFinalizer}
		}, func(m *infrav1.OVirtMachine) { m.Finalizers = nil }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			old := machine()
			if tt.old != nil {
				tt.old(old)
			}
			obj := old.DeepCopy()
			tt.update(obj)
			warnings, err := (&OVirtMachineWebhook{Reader: readerWith()}).ValidateUpdate(context.Background(), old, obj)
			g.Expect(warnings).To(BeEmpty())
			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(causes(err)).To(HaveLen(len(tt.wantErr)), "%v", err)
			for i, want := range tt.wantErr {
				g.Expect(causes(err)[i]).To(ContainSubstring(want))
			}
		})
	}
}

func TestOVirtMachineHandlers(t *testing.T) {
	// Through controller-runtime's handlers, as the server runs them: the defaulter answers with
	// a JSON patch, the validator with the status the API server shows.
	w := &OVirtMachineWebhook{Reader: readerWith(provider("ovirt-prod", func(p *infrav1.OVirtProvider) {
		p.Spec.DiskClone, p.Spec.StorageDomainName = ptr.To(true), "fast-ssd"
	}))}
	mutate := admission.WithDefaulter(testScheme(), admission.Defaulter[*infrav1.OVirtMachine](w))
	validate := admission.WithValidator(testScheme(), admission.Validator[*infrav1.OVirtMachine](w))

	t.Run("a create is patched with diskclone and the storage domain", func(t *testing.T) {
		g := NewWithT(t)
		resp := mutate.Handle(context.Background(), request(t, admissionv1.Create, machine(), nil, false))
		g.Expect(resp.Allowed).To(BeTrue())
		ops := map[string]any{}
		for _, p := range resp.Patches {
			ops[p.Operation+" "+p.Path] = p.Value
		}
		g.Expect(ops).To(HaveKeyWithValue("add /spec/diskclone", true))
		g.Expect(ops).To(HaveKeyWithValue("add /spec/storagedomainname", "fast-ssd"))
	})
	t.Run("a kubectl-style failure clear is patched with the annotation", func(t *testing.T) {
		g := NewWithT(t)
		old := machine(func(m *infrav1.OVirtMachine) {
			m.Spec.DiskClone = ptr.To(true)
			deprecated(m).FailureReason = ptr.To("OVirtEngineConnectionCritical")
		})
		obj := old.DeepCopy()
		deprecated(obj).FailureReason = nil
		resp := mutate.Handle(context.Background(), request(t, admissionv1.Update, obj, old, false))
		g.Expect(resp.Allowed).To(BeTrue())
		g.Expect(resp.Patches).To(ContainElement(HaveField("Path", "/metadata/annotations")))
	})
	t.Run("a denial carries the field path and a 422", func(t *testing.T) {
		g := NewWithT(t)
		bad := machine(func(m *infrav1.OVirtMachine) { m.Spec.OSDiskSizeGB = -5 })
		resp := validate.Handle(context.Background(), request(t, admissionv1.Create, bad, nil, false))
		g.Expect(resp.Allowed).To(BeFalse())
		g.Expect(resp.Result.Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
		g.Expect(resp.Result.Message).To(ContainSubstring("spec.osdisksizegb: Invalid value: -5"))
	})
	t.Run("a delete is allowed", func(t *testing.T) {
		resp := validate.Handle(context.Background(), request(t, admissionv1.Delete, nil, machine(), false))
		NewWithT(t).Expect(resp.Allowed).To(BeTrue())
	})
}
