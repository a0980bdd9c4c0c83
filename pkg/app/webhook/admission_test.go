package webhook

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/webhooks"
	"github.com/capov/capov/pkg/webhooks/conversion"
)

// warningRecorder collects the admission warnings the API server returns, as kubectl prints
// them ("Warning: ...").
type warningRecorder struct {
	mu   sync.Mutex
	list []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// take returns the warnings recorded so far and forgets them.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// newClient returns an admin client whose warnings go to the returned recorder.
func newClient(t *testing.T) (client.Client, *warningRecorder) {
	t.Helper()
	cfg := rest.CopyConfig(suite.env.Config)
	rec := &warningRecorder{}
	cfg.WarningHandlerWithContext = rec
	c, err := client.New(cfg, client.Options{Scheme: suite.env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

var nameSeq atomic.Int64

// uniqueName keeps objects of different tests apart in the shared API server.
func uniqueName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, nameSeq.Add(1)) }

func newProvider(name string, mutate ...func(*infrav1.OVirtProvider)) *infrav1.OVirtProvider {
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

func vmSpec(providerName string) infrav1.OVirtVMSpec {
	return infrav1.OVirtVMSpec{
		Provider: providerName, OVirtCluster: "Default", Template: "rhcos-4.14", VMType: infrav1.VMTypeServer,
		CPU:          &infrav1.CPU{Sockets: 1, Cores: 4, Threads: 1},
		Memory:       &infrav1.Memory{SizeMB: 8192, GuaranteedMB: 4096},
		OSDiskSizeGB: 80,
		NICs:         []infrav1.NIC{{VnicProfile: "ovirtmgmt"}},
	}
}

func newMachine(providerName string, mutate ...func(*infrav1.OVirtMachine)) *infrav1.OVirtMachine {
	m := &infrav1.OVirtMachine{
		ObjectMeta: metav1.ObjectMeta{Name: uniqueName("worker"), Namespace: "default"},
		Spec:       infrav1.OVirtMachineSpec{OVirtVMSpec: vmSpec(providerName)},
	}
	for _, f := range mutate {
		f(m)
	}
	return m
}

func newTemplate(providerName string, mutate ...func(*infrav1.OVirtMachineTemplate)) *infrav1.OVirtMachineTemplate {
	t := &infrav1.OVirtMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: uniqueName("worker-template"), Namespace: "default"},
		Spec:       infrav1.OVirtMachineTemplateSpec{Template: infrav1.OVirtMachineTemplateResource{Spec: vmSpec(providerName)}},
	}
	for _, f := range mutate {
		f(t)
	}
	return t
}

// createProviders creates OVirtProviders and waits until the webhook's cache sees them.
func createProviders(t *testing.T, ps ...*infrav1.OVirtProvider) {
	t.Helper()
	g := NewWithT(t)
	c, _ := newClient(t)
	for _, p := range ps {
		g.Expect(c.Create(context.Background(), p)).To(Succeed())
	}
	// The webhook reads providers from its informer; a machine created right after its
	// provider could race the watch event. A machine with diskclone left empty shows when the
	// provider's value arrived.
	for _, p := range ps {
		if p.Spec.DiskClone == nil || !*p.Spec.DiskClone {
			continue
		}
		g.Eventually(func() *bool {
			m := newMachine(p.Name)
			if err := c.Create(context.Background(), m, client.DryRunAll); err != nil {
				return nil
			}
			return m.Spec.DiskClone
		}).WithTimeout(10 * time.Second).Should(HaveValue(BeTrue()))
	}
}

// expectResult checks the outcome of a write: wantErr substrings in an Invalid (422) error, or
// success; and the warnings.
func expectResult(g Gomega, err error, warnings []string, wantErr, wantWarnings []string) {
	if len(wantErr) == 0 {
		g.Expect(err).NotTo(HaveOccurred())
	} else {
		g.Expect(err).To(HaveOccurred())
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want 422 Invalid, got %v", err)
		for _, want := range wantErr {
			g.Expect(err.Error()).To(ContainSubstring(want))
		}
	}
	g.Expect(warnings).To(HaveLen(len(wantWarnings)), "%q", warnings)
	for i, want := range wantWarnings {
		g.Expect(warnings[i]).To(ContainSubstring(want))
	}
}

func caBase64(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "engine-ca"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestOVirtProviderAdmission(t *testing.T) {
	tests := []struct {
		name         string
		provider     *infrav1.OVirtProvider
		wantErr      []string
		wantWarnings []string
	}{
		{"the product doc example with a credentials Secret is admitted", newProvider(uniqueName("prov")), nil, nil},
		{"a provider with only user and pass is admitted with a deprecation warning", newProvider(uniqueName("prov"), func(p *infrav1.OVirtProvider) {
			p.Spec.CredentialsSecretName, p.Spec.User, p.Spec.Pass = "", "admin@internal", "change-me"
		}), nil, []string{"spec.user and spec.pass are deprecated and will be removed: create a Secret in the capov-system namespace"}},
		{"an http engine URL is refused by the webhook", newProvider(uniqueName("prov"), func(p *infrav1.OVirtProvider) {
			p.Spec.Engine = "http://ovirt.example.com/ovirt-engine/api"
		}), []string{`spec.engine: Invalid value: "http://ovirt.example.com/ovirt-engine/api": uses http, which would send the oVirt password in clear text, and is refused`}, nil},
		{"an http engine URL with tls.insecure is refused too", newProvider(uniqueName("prov"), func(p *infrav1.OVirtProvider) {
			p.Spec.Engine, p.Spec.TLS = "http://ovirt.example.com/ovirt-engine/api", &infrav1.OVirtProviderTLS{Insecure: true}
		}), []string{"uses http, which would send the oVirt password in clear text, and is refused (also with spec.tls.insecure: true, which only skips certificate verification)"}, []string{"spec.tls.insecure is true"}},
		{"tls.insecure alone is admitted with a warning that names the field and the fix", newProvider(uniqueName("prov"), func(p *infrav1.OVirtProvider) {
			p.Spec.TLS = &infrav1.OVirtProviderTLS{Insecure: true}
		}), nil, []string{"spec.tls.insecure is true: the Engine certificate is not verified, so anyone on the network path can pose as the Engine and receive the oVirt password; " +
			"for development and diagnosis only: remove spec.tls.insecure and set spec.tls.certs"}},
		{"allowedNamespaces with a list and a selector is admitted", newProvider(uniqueName("prov"), func(p *infrav1.OVirtProvider) {
			p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{List: []string{"team-a"},
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"capov.example.com/ovirt": "true"}}}
		}), nil, nil},
		{"an allowedNamespaces entry that is no namespace name is refused", newProvider(uniqueName("prov"), func(p *infrav1.OVirtProvider) {
			p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{List: []string{"Team_A"}}
		}), []string{`spec.allowedNamespaces.list[0]: Invalid value: "Team_A": must be the name of a namespace`}, nil},
		{"an invalid allowedNamespaces selector is refused", newProvider(uniqueName("prov"), func(p *infrav1.OVirtProvider) {
			p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{Selector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn}}}}
		}), []string{"spec.allowedNamespaces.selector.matchExpressions[0].values: Required value"}, nil},
		{"an ftp engine URL is refused by the CRD schema", newProvider(uniqueName("prov"), func(p *infrav1.OVirtProvider) {
			p.Spec.Engine = "ftp://ovirt.example.com"
		}), []string{"spec.engine"}, nil},
		{"an engine URL with a trailing slash is admitted", newProvider(uniqueName("prov"), func(p *infrav1.OVirtProvider) {
			p.Spec.Engine = "https://ovirt.example.com/ovirt-engine/api/"
		}), nil, nil},
		{"certs that are not base64 PEM are refused", newProvider(uniqueName("prov"), func(p *infrav1.OVirtProvider) {
			p.Spec.TLS = &infrav1.OVirtProviderTLS{Certs: "-----BEGIN CERTIFICATE-----"}
		}), []string{"spec.tls.certs: Invalid value: the value is not valid base64; encode the CA PEM file with `base64 -w0 ca.pem`"}, nil},
		{"a base64 PEM CA is admitted", newProvider(uniqueName("prov"), func(p *infrav1.OVirtProvider) {
			p.Spec.TLS = &infrav1.OVirtProviderTLS{Certs: caBase64(t)}
		}), nil, nil},
		{"insecure together with certs is admitted with a warning", newProvider(uniqueName("prov"), func(p *infrav1.OVirtProvider) {
			p.Spec.TLS = &infrav1.OVirtProviderTLS{Insecure: true, Certs: caBase64(t)}
		}), nil, []string{"spec.tls.insecure is true: the Engine certificate is not verified (spec.tls.certs / spec.tls.cert are ignored while it is set)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c, rec := newClient(t)
			err := c.Create(context.Background(), tt.provider)
			expectResult(g, err, rec.take(), tt.wantErr, tt.wantWarnings)
		})
	}
}

func TestOVirtProviderUpdateRequiresCredentialsSecretName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, rec := newClient(t)
	legacy := newProvider(uniqueName("legacy"), func(p *infrav1.OVirtProvider) {
		p.Spec.CredentialsSecretName, p.Spec.User, p.Spec.Pass = "", "admin@internal", "change-me"
	})
	g.Expect(c.Create(ctx, legacy)).To(Succeed())
	rec.take()

	changed := legacy.DeepCopy()
	changed.Spec.Engine = "https://ovirt2.example.com/ovirt-engine/api"
	err := c.Update(ctx, changed)
	expectResult(g, err, rec.take(), []string{
		"spec.credentialsSecretName: Required value: an OVirtProvider cannot be updated without a credentials Secret",
	}, []string{"spec.user and spec.pass are deprecated"})

	labelled := legacy.DeepCopy()
	labelled.Labels = map[string]string{"team": "infra"}
	g.Expect(c.Update(ctx, labelled)).To(Succeed(), "metadata-only updates (clusterctl move, GC) stay possible")

	fixed := labelled.DeepCopy()
	fixed.Spec.CredentialsSecretName = legacy.Name + "-capov-provider-secret"
	g.Expect(c.Update(ctx, fixed)).To(Succeed())
	g.Expect(rec.take()).To(ConsistOf(ContainSubstring("they are used only while the Secret")))
}

func TestOVirtMachineAdmission(t *testing.T) {
	cloning, thin, plain := uniqueName("clone-prov"), uniqueName("thin-prov"), uniqueName("plain-prov")
	createProviders(t,
		newProvider(cloning, func(p *infrav1.OVirtProvider) { p.Spec.DiskClone, p.Spec.StorageDomainName = ptr.To(true), "fast-ssd" }),
		newProvider(thin, func(p *infrav1.OVirtProvider) { p.Spec.StorageDomainName = "fast-ssd" }),
		newProvider(plain),
	)
	tests := []struct {
		name         string
		machine      *infrav1.OVirtMachine
		wantErr      []string
		wantWarnings []string
		wantClone    bool
		wantSD       string
	}{
		{"a machine of a cloning provider gets diskclone true and the provider's storage domain", newMachine(cloning), nil, nil, true, "fast-ssd"},
		{"a machine of a provider without diskclone gets the gate's false and no storage domain, with a warning", newMachine(thin), nil,
			[]string{fmt.Sprintf("OVirtProvider %s sets storagedomainname fast-ssd, but diskclone resolves to false here", thin)}, false, ""},
		{"an explicit diskclone false wins over the provider, with a warning about its storage domain", newMachine(cloning, func(m *infrav1.OVirtMachine) { m.Spec.DiskClone = ptr.To(false) }), nil,
			[]string{fmt.Sprintf("OVirtProvider %s sets storagedomainname fast-ssd, but diskclone resolves to false here", cloning)}, false, ""},
		{"a storage domain with an explicit diskclone true is admitted", newMachine(plain, func(m *infrav1.OVirtMachine) {
			m.Spec.StorageDomainName, m.Spec.DiskClone = "fast-ssd", ptr.To(true)
		}), nil, nil, true, "fast-ssd"},
		{"a storage domain without cloning is admitted with a warning naming the three ways to enable it (only the Engine knows the template's disks)",
			newMachine(plain, func(m *infrav1.OVirtMachine) { m.Spec.StorageDomainName = "fast-ssd" }), nil,
			[]string{"spec.storagedomainname fast-ssd: diskclone resolves to false, so the disks stay where the template's are"}, false, "fast-ssd"},
		{"a blank vNIC profile is refused by the webhook", newMachine(plain, func(m *infrav1.OVirtMachine) {
			m.Spec.NICs = append(m.Spec.NICs, infrav1.NIC{VnicProfile: " "})
		}), []string{"spec.nics[1].vnicprofile: Required value: set the name of the oVirt vNIC profile"}, nil, false, ""},
		{"a blank provider is refused by the webhook", newMachine("  "), []string{"spec.provider: Required value"}, nil, false, ""},
		{"a malformed providerID is refused by the webhook", newMachine(plain, func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "vsphere://42" }),
			[]string{`spec.providerID: Invalid value: "vsphere://42": must be ovirt://<vm-id> with the oVirt VM id, a UUID (8-4-4-4-12 hex digits`,
				"the manager sets it itself once it has created the VM: remove spec.providerID from the manifest"}, nil, false, ""},
		{"a providerID whose VM id is no UUID is refused by the webhook", newMachine(plain, func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "ovirt://42" }),
			[]string{`spec.providerID: Invalid value: "ovirt://42": must be ovirt://<vm-id>`}, nil, false, ""},
		// The CRD schema checks these before the validating webhook is called; the webhook
		// checks them too (defense in depth, see the unit tests), here the schema answers.
		{"an OS disk above 65536 GiB is refused", newMachine(plain, func(m *infrav1.OVirtMachine) { m.Spec.OSDiskSizeGB = 70000 }),
			[]string{"spec.osdisksizegb"}, nil, false, ""},
		{"zero sockets are refused", newMachine(plain, func(m *infrav1.OVirtMachine) { m.Spec.CPU.Sockets = 0 }), []string{"spec.cpu.sockets"}, nil, false, ""},
		{"255 cores are refused", newMachine(plain, func(m *infrav1.OVirtMachine) { m.Spec.CPU.Cores = 255 }), []string{"spec.cpu.cores"}, nil, false, ""},
		{"guaranteed memory above the size is refused", newMachine(plain, func(m *infrav1.OVirtMachine) { m.Spec.Memory.GuaranteedMB = 9000 }),
			[]string{"spec.memory.guaranteedmb", "lower memory.guaranteedmb or raise memory.sizemb"}, nil, false, ""},
		{"an unknown VM type is refused", newMachine(plain, func(m *infrav1.OVirtMachine) { m.Spec.VMType = "workstation" }), []string{"spec.vmtype"}, nil, false, ""},
		{"an empty vNIC profile is refused", newMachine(plain, func(m *infrav1.OVirtMachine) { m.Spec.NICs[0].VnicProfile = "" }),
			[]string{"spec.nics[0].vnicprofile"}, nil, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c, rec := newClient(t)
			err := c.Create(context.Background(), tt.machine)
			expectResult(g, err, rec.take(), tt.wantErr, tt.wantWarnings)
			if err != nil {
				return
			}
			got := &infrav1.OVirtMachine{}
			g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(tt.machine), got)).To(Succeed())
			g.Expect(got.Spec.DiskClone).To(HaveValue(Equal(tt.wantClone)))
			g.Expect(got.Spec.StorageDomainName).To(Equal(tt.wantSD))
		})
	}
	// Issue 33 (3): GitOps applies the machine before its provider; the gate is not written into
	// it for good: the manager resolves group -> provider -> gate when it creates the VM.
	t.Run("a machine whose provider does not exist yet is admitted with a warning and diskclone left to the manager", func(t *testing.T) {
		g := NewWithT(t)
		c, rec := newClient(t)
		m := newMachine("not-yet-there")
		err := c.Create(context.Background(), m)
		expectResult(g, err, rec.take(), nil, []string{"OVirtProvider not-yet-there does not exist yet: the manager waits for it before it creates the VM"})
		got := &infrav1.OVirtMachine{}
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(got.Spec.DiskClone).To(BeNil())
		g.Expect(got.Spec.StorageDomainName).To(BeEmpty())
	})
}

func TestOVirtMachineSpecIsImmutableExceptProviderIDOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, _ := newClient(t)
	prov := uniqueName("any-prov")
	createProviders(t, newProvider(prov))
	m := newMachine(prov)
	g.Expect(c.Create(ctx, m)).To(Succeed())

	changed := m.DeepCopy()
	changed.Spec.Template = "rhcos-4.15"
	changed.Spec.CPU.Cores = 8
	err := c.Update(ctx, changed)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("spec.template: Forbidden: the spec of an OVirtMachine cannot change after create"))
	g.Expect(err.Error()).To(ContainSubstring("spec.cpu: Forbidden"))

	// Server-side apply of the original manifest, which never named diskclone: the defaulter
	// keeps the create-time value, so the re-apply is not refused as a change.
	reapplied := m.DeepCopy()
	reapplied.Spec.DiskClone = nil
	g.Expect(c.Update(ctx, reapplied)).To(Succeed())
	g.Expect(reapplied.Spec.DiskClone).To(HaveValue(BeFalse()))

	withID := reapplied.DeepCopy()
	withID.Spec.ProviderID = "ovirt://0b9c3c5e-3f2a-4b8e-9a57-2d1e6f0c1a11"
	g.Expect(c.Update(ctx, withID)).To(Succeed(), "the manager sets providerID once")

	otherID := withID.DeepCopy()
	otherID.Spec.ProviderID = "ovirt://6f1c2a3e-0000-4000-8000-000000000001"
	err = c.Update(ctx, otherID)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring(`spec.providerID: Forbidden: is set once by the manager and cannot be changed or removed afterwards; keep "ovirt://0b9c3c5e-3f2a-4b8e-9a57-2d1e6f0c1a11"`))

	err = c.Patch(ctx, withID.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"providerID":null}}`)))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "removing providerID is refused: %v", err)
}

// TestClearFailureWithThePlainKubectlPatch runs the command of product doc §4.3 (a v1beta1
// client) against the main resource: the API server converts the patched v1beta1 object to
// v1beta2, where status.failureReason is status.deprecated.v1beta1.failureReason, and drops the
// status change (status is a subresource), but the mutating webhook sees the converted object
// first and leaves the annotation for the manager.
func TestClearFailureWithThePlainKubectlPatch(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, _ := newClient(t)
	prov := uniqueName("any-prov")
	createProviders(t, newProvider(prov))
	m := newMachine(prov)
	g.Expect(c.Create(ctx, m)).To(Succeed())
	m.Status.Deprecated = &infrav1.DeprecatedStatus{V1Beta1: &infrav1.V1Beta1DeprecatedStatus{
		FailureReason:  ptr.To(string(infrav1beta1.OVirtEngineConnectionCriticalFailure)),
		FailureMessage: ptr.To("OVirtProvider has an invalid engine URL"),
	}}
	g.Expect(c.Status().Update(ctx, m)).To(Succeed())
	key := client.ObjectKeyFromObject(m)

	// kubectl patch capovm X --type=merge -p '{"status":{"failureReason":null,"failureMessage":null}}'
	clearFailure := client.RawPatch(types.MergePatchType, []byte(`{"status":{"failureReason":null,"failureMessage":null}}`))
	g.Expect(c.Patch(ctx, &infrav1beta1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace}}, clearFailure)).To(Succeed())

	got := &infrav1.OVirtMachine{}
	g.Expect(c.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Annotations).To(HaveKeyWithValue(webhooks.ClearFailureAnnotation, "true"))
	g.Expect(got.Status.Deprecated.V1Beta1.FailureReason).To(HaveValue(BeEquivalentTo(infrav1beta1.OVirtEngineConnectionCriticalFailure)),
		"the API server keeps status on the main resource: the manager clears it")

	// With --subresource=status the fields go at once and the webhook is not involved.
	g.Expect(c.Status().Patch(ctx, &infrav1beta1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace}}, clearFailure)).To(Succeed())
	g.Expect(c.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Status.Deprecated).To(SatisfyAny(BeNil(), HaveField("V1Beta1", SatisfyAny(BeNil(), HaveField("FailureReason", BeNil())))))
	g.Expect(got.Annotations).NotTo(HaveKey(conversion.DataAnnotation), "the stored (v1beta2) object never carries the conversion data")

	// An ordinary update of a machine without a failure does not get the annotation.
	other := newMachine(uniqueName("any-prov"))
	g.Expect(c.Create(ctx, other)).To(Succeed())
	otherV1beta1 := &infrav1beta1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Name: other.Name, Namespace: other.Namespace}}
	g.Expect(c.Patch(ctx, otherV1beta1, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}},"status":{"failureReason":null}}`)))).To(Succeed())
	g.Expect(otherV1beta1.Annotations).NotTo(HaveKey(webhooks.ClearFailureAnnotation))
}

func TestOVirtMachineTemplateAdmission(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cloning, plain := uniqueName("clone-prov"), uniqueName("plain-prov")
	createProviders(t,
		newProvider(cloning, func(p *infrav1.OVirtProvider) { p.Spec.DiskClone, p.Spec.StorageDomainName = ptr.To(true), "fast-ssd" }),
		newProvider(plain),
	)
	c, rec := newClient(t)

	tpl := newTemplate(cloning)
	g.Expect(c.Create(ctx, tpl)).To(Succeed())
	// A template is not defaulted: its machines resolve diskclone when they are created.
	g.Expect(tpl.Spec.Template.Spec.DiskClone).To(BeNil())
	g.Expect(tpl.Spec.Template.Spec.StorageDomainName).To(BeEmpty())

	warned := newTemplate(plain, func(t *infrav1.OVirtMachineTemplate) { t.Spec.Template.Spec.StorageDomainName = "fast-ssd" })
	g.Expect(c.Create(ctx, warned)).To(Succeed())
	g.Expect(rec.take()).To(ConsistOf(ContainSubstring("spec.template.spec.storagedomainname fast-ssd: diskclone resolves to false")))

	missing := newTemplate("no-such-provider")
	g.Expect(c.Create(ctx, missing)).To(Succeed())
	g.Expect(rec.take()).To(ConsistOf(ContainSubstring("OVirtProvider no-such-provider does not exist yet")))

	changed := tpl.DeepCopy()
	changed.Spec.Template.Spec.OSDiskSizeGB = 120
	err := c.Update(ctx, changed)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("spec.template.spec.osdisksizegb: Forbidden: an OVirtMachineTemplate cannot change, except spec.template.spec.diskclone and spec.template.spec.storagedomainname: create a new OVirtMachineTemplate"))

	labelled := tpl.DeepCopy()
	labelled.Labels = map[string]string{"cluster.x-k8s.io/cluster-name": "c1"}
	g.Expect(c.Update(ctx, labelled)).To(Succeed())

	// Cluster API's topology controller computes diffs with server-side-apply dry-runs of the
	// changed template, marked with the topology dry-run annotation.
	applyConfig := func(annotations map[string]string) runtime.ApplyConfiguration {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(changed)
		g.Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{Object: obj}
		u.SetGroupVersionKind(infrav1.GroupVersion.WithKind("OVirtMachineTemplate"))
		u.SetManagedFields(nil)
		u.SetResourceVersion("")
		u.SetAnnotations(annotations)
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		return client.ApplyConfigurationFromUnstructured(u)
	}
	g.Expect(c.Apply(ctx, applyConfig(map[string]string{clusterv1.TopologyDryRunAnnotation: ""}), client.FieldOwner("capi-topology"), client.ForceOwnership, client.DryRunAll)).
		To(Succeed(), "a topology dry-run may change the spec")
	err = c.Apply(ctx, applyConfig(nil), client.FieldOwner("capi-topology"), client.ForceOwnership, client.DryRunAll)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a dry-run without the annotation is not exempt: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.template.spec.osdisksizegb: Forbidden"))

	stored := &infrav1.OVirtMachineTemplate{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(tpl), stored)).To(Succeed())
	g.Expect(stored.Spec.Template.Spec.OSDiskSizeGB).To(BeEquivalentTo(80), "dry-runs change nothing")
}

func TestOVirtClusterAdmission(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, _ := newClient(t)

	bad := &infrav1.OVirtCluster{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("cluster"), Namespace: "default"},
		Spec: infrav1.OVirtClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.1.100", Port: 70000}}}
	err := c.Create(ctx, bad)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("spec.controlPlaneEndpoint.port: Invalid value: 70000: spec.controlPlaneEndpoint.port in body should be less than or equal to 65535"),
		"the v1beta2 schema (Cluster API's APIEndpoint) answers first")
	// The v1beta1 schema has no bound: the webhook, called with the converted object, answers.
	badV1beta1, err := toV1Beta1(bad)
	g.Expect(err).NotTo(HaveOccurred())
	err = c.Create(ctx, badV1beta1)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("spec.controlPlaneEndpoint.port: Invalid value: 70000: must be a TCP port between 1 and 65535, usually 6443"))

	noHost := bad.DeepCopy()
	noHost.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Port: 6443}
	err = c.Create(ctx, noHost)
	g.Expect(err).To(MatchError(ContainSubstring("spec.controlPlaneEndpoint.host: Required value")))

	oc := &infrav1.OVirtCluster{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("cluster"), Namespace: "default"}}
	g.Expect(c.Create(ctx, oc)).To(Succeed(), "an empty endpoint is set later")
	oc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.1.100", Port: 6443}
	g.Expect(c.Update(ctx, oc)).To(Succeed(), "setting it once is allowed")
	moved := oc.DeepCopy()
	moved.Spec.ControlPlaneEndpoint.Host = "10.0.1.101"
	err = c.Update(ctx, moved)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("spec.controlPlaneEndpoint: Forbidden: cannot change once set (it is 10.0.1.100:6443)"))
}
