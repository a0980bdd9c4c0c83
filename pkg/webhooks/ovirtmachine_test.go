package webhooks

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
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
	// Issue 33 (3): applied before its provider (GitOps applies everything at once), a machine
	// keeps an empty diskclone; the gate is not written into it for good.
	t.Run("a create whose provider does not exist leaves diskclone to the manager", func(t *testing.T) {
		g := NewWithT(t)
		m := machine()
		w := &OVirtMachineWebhook{Reader: readerWith(), Gates: featuregates.Gates{DiskClone: true}}
		g.Expect(w.Default(context.Background(), m)).To(Succeed())
		g.Expect(m.Spec.DiskClone).To(BeNil())
		g.Expect(m.Spec.StorageDomainName).To(BeEmpty())
	})
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
		{"a storage domain without cloning is admitted with a warning naming the three ways to enable it (only the Engine knows whether the template's disks are there)",
			provider("ovirt-prod"), featuregates.Gates{}, machine(sd), nil,
			[]string{"spec.storagedomainname fast-ssd: diskclone resolves to false, so the disks stay where the template's are: the VM can be created only if fast-ssd holds a copy of every template disk " +
				"(the manager checks it in oVirt; otherwise MachineCreated reports StorageDomainRequiresClone); to place the disks in fast-ssd whatever the template, " +
				"set spec.diskclone: true on the OVirtMachine/OVirtMachineTemplate (the node group's Clone disk = Yes), set spec.diskclone: true on OVirtProvider ovirt-prod, " +
				"or enable the disk-clone feature gate of shturval-capov (customvalues.featureGates.disk-clone: true); or remove storagedomainname"}},
		{"an explicit diskclone false wins over a cloning provider", cloning, featuregates.Gates{}, machine(sd, func(m *infrav1.OVirtMachine) { m.Spec.DiskClone = ptr.To(false) }),
			nil, []string{"spec.storagedomainname fast-ssd: diskclone resolves to false"}},
		{"a missing provider is admitted with a warning", nil, featuregates.Gates{}, machine(), nil,
			[]string{"OVirtProvider ovirt-prod does not exist yet: the manager waits for it before it creates the VM, and then resolves an empty spec.diskclone from the provider's diskclone, " +
				"else the disk-clone feature gate (now false), and an empty spec.storagedomainname from the provider's"}},
		{"a storage domain with a missing provider is admitted: the provider may clone", nil, featuregates.Gates{}, machine(sd), nil,
			[]string{"OVirtProvider ovirt-prod does not exist yet"}},
		{"a provider storage domain that cloning cannot use is a warning", thinSD, featuregates.Gates{}, machine(), nil,
			[]string{"OVirtProvider ovirt-prod sets storagedomainname fast-ssd, but diskclone resolves to false here"}},
		{"a providerID carried over by clusterctl move is admitted", provider("ovirt-prod"), featuregates.Gates{}, machine(withProviderID(vmUUID)), nil, nil},
		{"a providerID with an upper-case VM id is admitted", provider("ovirt-prod"), featuregates.Gates{}, machine(withProviderID(strings.ToUpper(vmUUID))), nil, nil},
		{"a providerID of another scheme is refused with the expected form", provider("ovirt-prod"), featuregates.Gates{}, machine(withProviderID("vsphere://" + vmUUID)),
			[]string{`spec.providerID: Invalid value: "vsphere://` + vmUUID + `": must be ovirt://<vm-id> with the oVirt VM id, a UUID (8-4-4-4-12 hex digits, ` +
				`e.g. ovirt://0b0e6c1a-2f4e-4d38-9d51-0c5d1b1f6e01); the manager sets it itself once it has created the VM: remove spec.providerID from the manifest`}, nil},
		{"a providerID without a VM id is refused", provider("ovirt-prod"), featuregates.Gates{}, machine(withProviderID("ovirt://")),
			[]string{"spec.providerID: Invalid value"}, nil},
		{"a providerID whose VM id is no UUID is refused", provider("ovirt-prod"), featuregates.Gates{}, machine(withProviderID("ovirt://1234")),
			[]string{`spec.providerID: Invalid value: "ovirt://1234": must be ovirt://<vm-id> with the oVirt VM id, a UUID`}, nil},
		{"a providerID with a VM name is refused", provider("ovirt-prod"), featuregates.Gates{}, machine(withProviderID("ovirt://worker-abc123")),
			[]string{"spec.providerID: Invalid value"}, nil},
		{"a providerID with a UUID and more is refused", provider("ovirt-prod"), featuregates.Gates{}, machine(withProviderID("ovirt://" + vmUUID + "/x")),
			[]string{"spec.providerID: Invalid value"}, nil},
		{"a providerID with a UUID without dashes is refused", provider("ovirt-prod"), featuregates.Gates{}, machine(withProviderID("ovirt://" + strings.ReplaceAll(vmUUID, "-", ""))),
			[]string{"spec.providerID: Invalid value"}, nil},
		{"a providerID with spaces around the UUID is refused", provider("ovirt-prod"), featuregates.Gates{}, machine(withProviderID("ovirt:// " + vmUUID)),
			[]string{"spec.providerID: Invalid value"}, nil},
		{"a machine in a namespace its provider lists is admitted", provider("ovirt-prod", allowing([]string{"default"}, nil)), featuregates.Gates{}, machine(), nil, nil},
		{"a machine in a namespace its provider does not allow is refused with the fix", provider("ovirt-prod", allowing([]string{"team-a"}, nil)), featuregates.Gates{}, machine(),
			[]string{"spec.provider: Forbidden: OVirtProvider ovirt-prod does not allow namespace default: its spec.allowedNamespaces.list is [team-a]; add default to that list"}, nil},
		{"a machine in a namespace whose labels match the provider's selector is admitted", provider("ovirt-prod", allowing(nil, map[string]string{"capov/ovirt-prod": "true"})),
			featuregates.Gates{}, machine(func(m *infrav1.OVirtMachine) { m.Namespace = "team-b" }), nil, nil},
		{"a machine in a namespace whose labels do not match the provider's selector is refused", provider("ovirt-prod", allowing(nil, map[string]string{"capov/ovirt-prod": "true"})),
			featuregates.Gates{}, machine(), []string{"spec.provider: Forbidden: OVirtProvider ovirt-prod does not allow namespace default: the namespace's labels do not match"}, nil},
		{"the spec rules apply", provider("ovirt-prod"), featuregates.Gates{}, machine(func(m *infrav1.OVirtMachine) { m.Spec.CPU.Threads = 9 }),
			[]string{"spec.cpu.threads: Invalid value: 9"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := []client.Object{namespace("default", nil), namespace("team-b", map[string]string{"capov/ovirt-prod": "true"})}
			if tt.provider != nil {
				objs = append(objs, tt.provider)
			}
			w := &OVirtMachineWebhook{Reader: readerWithObjects(objs...), Gates: tt.gates}
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

const (
	vmUUID    = "0b9c3c5e-3f2a-4b8e-9a57-2d1e6f0c1a11"
	otherUUID = "6f1c2a3e-0000-4000-8000-000000000001"
)

// withProviderID sets spec.providerID: to ovirt://<id> for a bare UUID, else to v as given.
func withProviderID(v string) func(*infrav1.OVirtMachine) {
	return func(m *infrav1.OVirtMachine) {
		if infrav1.IsUUID(v) {
			v = infrav1.ProviderIDPrefix + v
		}
		m.Spec.ProviderID = v
	}
}

// TestOVirtMachineValidateCreateFailsWhenTheNamespaceCannotBeRead: a provider with a selector
// needs the Namespace's labels; without them the request fails with a retry hint, never guessed.
func TestOVirtMachineValidateCreateFailsWhenTheNamespaceCannotBeRead(t *testing.T) {
	g := NewWithT(t)
	p := provider("ovirt-prod", allowing(nil, map[string]string{"capov/ovirt-prod": "true"}))
	w := &OVirtMachineWebhook{Reader: fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(p).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Namespace); ok {
				return errors.New("connection refused")
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()}
	_, err := w.ValidateCreate(context.Background(), machine())
	g.Expect(apierrors.IsInternalError(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("reading Namespace default to match the spec.allowedNamespaces.selector of OVirtProvider ovirt-prod: connection refused; retry the request"))
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
		{"setting providerID once is admitted", nil, withProviderID(vmUUID), nil},
		{"setting providerID from an empty string is admitted", withProviderID(""), withProviderID(vmUUID), nil},
		{"setting a malformed providerID is refused", nil, withProviderID("vm-1"), []string{"spec.providerID: Invalid value"}},
		{"setting a providerID whose VM id is no UUID is refused", nil, withProviderID("ovirt://vm-1"), []string{"spec.providerID: Invalid value: \"ovirt://vm-1\": must be ovirt://<vm-id>"}},
		{"changing providerID is refused", withProviderID(vmUUID), withProviderID(otherUUID),
			[]string{`spec.providerID: Forbidden: is set once by the manager and cannot be changed or removed afterwards; keep "ovirt://` + vmUUID + `"`}},
		{"removing providerID is refused", withProviderID(vmUUID), withProviderID(""), []string{"spec.providerID: Forbidden"}},
		{"a providerID admitted under older rules stays admitted while it does not change", withProviderID("ovirt://vm-1"),
			func(m *infrav1.OVirtMachine) { m.Finalizers = nil }, nil},
		{"changing the provider is refused, and so is a provider that does not allow the namespace", nil, func(m *infrav1.OVirtMachine) { m.Spec.Provider = "ovirt-restricted" },
			[]string{"spec.provider: Forbidden: OVirtProvider ovirt-restricted does not allow namespace default", "spec.provider: Forbidden: the spec of an OVirtMachine cannot change after create"}},
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
			r := readerWith(provider("ovirt-restricted", allowing([]string{"team-a"}, nil)))
			warnings, err := (&OVirtMachineWebhook{Reader: r}).ValidateUpdate(context.Background(), old, obj)
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
