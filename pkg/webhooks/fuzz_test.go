package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/engineconfig"
	"github.com/capov/capov/pkg/featuregates"
)

// The fuzz targets feed arbitrary JSON (seeded with valid and invalid manifests) to the typed
// webhooks. Besides "never panic" they check what an admitted object guarantees, so that a rule
// that silently stops applying is caught too. Seed corpora live in testdata/fuzz/<FuzzName>/;
// make fuzz (hack/fuzz.sh) explores beyond them for a few seconds each.

// fuzzProvider builds the OVirtProvider "ovirt-prod" from fuzz inputs: mode 0 = missing,
// 1 = diskclone unset, 2 = false, 3 = true.
func fuzzProvider(mode uint8, sd string) *infrav1.OVirtProvider {
	switch mode % 4 {
	case 0:
		return nil
	case 1:
		return provider("ovirt-prod", func(p *infrav1.OVirtProvider) { p.Spec.StorageDomainName = sd })
	default:
		return provider("ovirt-prod", func(p *infrav1.OVirtProvider) {
			p.Spec.StorageDomainName, p.Spec.DiskClone = sd, ptr.To(mode%4 == 3)
		})
	}
}

// referencedProvider is p when spec.provider names it, else nil: what the webhook reads for a
// spec (a fuzzed spec names another provider as often as ovirt-prod).
func referencedProvider(p *infrav1.OVirtProvider, name string) *infrav1.OVirtProvider {
	if p == nil || p.Name != name {
		return nil
	}
	return p
}

func readerFor(p *infrav1.OVirtProvider) *OVirtMachineWebhook {
	if p == nil {
		return &OVirtMachineWebhook{Reader: readerWith()}
	}
	return &OVirtMachineWebhook{Reader: readerWith(p)}
}

// checkDenial fails unless err is nil or an Invalid error whose causes all name a field under
// spec with a message.
func checkDenial(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("denial is not an Invalid status error: %v", err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		t.Fatalf("denial has no causes: %v", err)
	}
	for _, c := range status.Status().Details.Causes {
		if !strings.HasPrefix(c.Field, "spec") || c.Message == "" {
			t.Fatalf("cause without a spec field path or message: %+v", c)
		}
	}
}

// checkAdmittedVMSpec fails when an admitted spec breaks a rule ValidateVMSpec guarantees.
// A storage domain without cloning is not checked: admission cannot decide it (storagerule).
func checkAdmittedVMSpec(t *testing.T, s *infrav1.OVirtVMSpec) {
	t.Helper()
	switch {
	case strings.TrimSpace(s.Provider) == "" || strings.TrimSpace(s.Template) == "" || strings.TrimSpace(s.OVirtCluster) == "":
		t.Fatalf("admitted without provider/template/ovirtcluster: %+v", s)
	case s.OSDiskSizeGB < 0 || s.OSDiskSizeGB > infrav1.MaxOSDiskSizeGB:
		t.Fatalf("admitted osdisksizegb %d", s.OSDiskSizeGB)
	case s.CPU != nil && (s.CPU.Sockets < 1 || s.CPU.Cores < 1 || s.CPU.Threads < 1 ||
		s.CPU.Sockets > infrav1.MaxSockets || s.CPU.Cores > infrav1.MaxCoresPerSock || s.CPU.Threads > infrav1.MaxThreadsPerCPU):
		t.Fatalf("admitted cpu %+v", *s.CPU)
	case s.Memory != nil && (s.Memory.GuaranteedMB > s.Memory.SizeMB || s.Memory.GuaranteedMB < 0 || s.Memory.SizeMB < 1):
		t.Fatalf("admitted memory %+v", *s.Memory)
	case s.VMType != "" && !isVMType(s.VMType):
		t.Fatalf("admitted vmtype %q", s.VMType)
	case s.AntiAffinity != "" && !isAntiAffinityPolicy(s.AntiAffinity):
		t.Fatalf("admitted antiAffinity %q", s.AntiAffinity)
	case len(s.AffinityGroups) > MaxAffinityGroups:
		t.Fatalf("admitted %d affinity groups", len(s.AffinityGroups))
	}
	for _, n := range s.NICs {
		if strings.TrimSpace(n.VnicProfile) == "" {
			t.Fatalf("admitted an empty vnicprofile: %+v", s.NICs)
		}
	}
	seen := map[string]bool{}
	for _, g := range s.AffinityGroups {
		if strings.TrimSpace(g) == "" || seen[g] {
			t.Fatalf("admitted affinity groups %q", s.AffinityGroups)
		}
		seen[g] = true
	}
}

// fuzzClusters reads the Cluster my-cluster of namespace default and its OVirtCluster
// my-ovirtcluster, whose failure domains are fd-1 and fd-2.
func fuzzClusters() client.Reader {
	return readerWithObjects(capiCluster("my-ovirtcluster"), infraCluster("my-ovirtcluster"))
}

// checkAdmittedFailureDomain fails when a failure domain checked against fuzzClusters was
// admitted although my-ovirtcluster does not define it.
func checkAdmittedFailureDomain(t *testing.T, m *infrav1.OVirtMachine) {
	t.Helper()
	if fd := m.Spec.FailureDomain; fd != "" && m.Namespace == "default" && m.Labels[clusterv1.ClusterNameLabel] == "my-cluster" && fd != "fd-1" && fd != "fd-2" {
		t.Fatalf("admitted failure domain %q, which my-ovirtcluster does not define", fd)
	}
}

func FuzzOVirtMachineCreate(f *testing.F) {
	for _, m := range []*infrav1.OVirtMachine{
		machine(),
		machine(func(m *infrav1.OVirtMachine) { m.Spec.StorageDomainName = "fast-ssd" }),
		machine(func(m *infrav1.OVirtMachine) { m.Spec.CPU.Sockets, m.Spec.Memory.GuaranteedMB = 0, 1<<40 }),
		machine(func(m *infrav1.OVirtMachine) { m.Spec.NICs, m.Spec.ProviderID = []infrav1.NIC{{}}, "ovirt://" }),
		machine(inCluster("my-cluster", "fd-1"), func(m *infrav1.OVirtMachine) {
			m.Spec.AntiAffinity, m.Spec.AffinityGroups = infrav1.AntiAffinitySoft, []string{"db-spread"}
		}),
		machine(inCluster("my-cluster", "fd-x"), func(m *infrav1.OVirtMachine) {
			m.Spec.AntiAffinity, m.Spec.AffinityGroups = "hard", []string{"a", "a", ""}
		}),
	} {
		f.Add(mustJSON(f, m), uint8(1), "fast-ssd", false)
	}
	f.Add([]byte(`{"spec":{"cpu":null,"memory":{},"nics":[{}],"osdisksizegb":-1}}`), uint8(0), "", true)
	f.Fuzz(func(t *testing.T, data []byte, mode uint8, providerSD string, gate bool) {
		m := &infrav1.OVirtMachine{}
		if json.Unmarshal(data, m) != nil {
			return
		}
		p := fuzzProvider(mode, providerSD)
		w := readerFor(p)
		w.Gates, w.Clusters = featuregates.Gates{DiskClone: gate}, fuzzClusters()
		ctx := context.Background()
		if err := w.Default(ctx, m); err != nil {
			t.Fatalf("Default failed on a create: %v", err)
		}
		if m.Spec.DiskClone == nil && referencedProvider(p, m.Spec.Provider) != nil {
			t.Fatal("Default left diskclone empty although the provider exists")
		}
		again := m.DeepCopy()
		if err := w.Default(ctx, again); err != nil || !equality.Semantic.DeepEqual(again, m) {
			t.Fatalf("Default is not idempotent: %v", err)
		}
		_, err := w.ValidateCreate(ctx, m)
		checkDenial(t, err)
		if err == nil {
			checkAdmittedVMSpec(t, &m.Spec.OVirtVMSpec)
			checkAdmittedFailureDomain(t, m)
		}
	})
}

func FuzzOVirtMachineUpdate(f *testing.F) {
	base := machine(func(m *infrav1.OVirtMachine) {
		m.Spec.DiskClone = ptr.To(true)
		deprecated(m).FailureReason = ptr.To("OVirtEngineConnectionCritical")
	})
	f.Add(mustJSON(f, base), mustJSON(f, machine(func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "ovirt://1" })))
	f.Add(mustJSON(f, machine(func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "ovirt://1" })), mustJSON(f, machine()))
	f.Add(mustJSON(f, base), []byte(`{"spec":{"template":"other"},"status":{"failureReason":null}}`))
	f.Add(mustJSON(f, machine(inCluster("my-cluster", ""))), mustJSON(f, machine(inCluster("my-cluster", "fd-2"))))
	f.Add(mustJSON(f, machine(inCluster("my-cluster", ""))), mustJSON(f, machine(inCluster("my-cluster", "fd-x"))))
	f.Add(mustJSON(f, machine(inCluster("my-cluster", "fd-1"))), mustJSON(f, machine(inCluster("my-cluster", "fd-2"))))
	f.Add(mustJSON(f, machine()), mustJSON(f, machine(func(m *infrav1.OVirtMachine) { m.Spec.AffinityGroups = []string{"a"} })))
	f.Fuzz(func(t *testing.T, oldData, newData []byte) {
		old, m := &infrav1.OVirtMachine{}, &infrav1.OVirtMachine{}
		if json.Unmarshal(oldData, old) != nil || json.Unmarshal(newData, m) != nil {
			return
		}
		w := readerFor(provider("ovirt-prod"))
		w.Clusters = fuzzClusters()
		ctx := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Update, Object: runtime.RawExtension{Raw: newData}, OldObject: runtime.RawExtension{Raw: oldData},
		}})
		_, sentAnnotation := m.Annotations[ClearFailureAnnotation]
		cleared := failureCleared(old, m)
		if err := w.Default(ctx, m); err != nil {
			t.Fatalf("Default failed on an update: %v", err)
		}
		_, hasAnnotation := m.Annotations[ClearFailureAnnotation]
		if cleared && m.Annotations[ClearFailureAnnotation] != "true" || !cleared && hasAnnotation != sentAnnotation {
			t.Fatalf("clear-failure annotation %v for a request that cleared the failure: %v", m.Annotations, cleared)
		}
		_, err := w.ValidateUpdate(ctx, old, m)
		checkDenial(t, err)
		if err != nil {
			return
		}
		oldSpec, newSpec := old.Spec.DeepCopy(), m.Spec.DeepCopy()
		oldSpec.ProviderID, newSpec.ProviderID = "", ""
		oldSpec.FailureDomain, newSpec.FailureDomain = "", ""
		if !equality.Semantic.DeepEqual(oldSpec, newSpec) {
			t.Fatalf("admitted a spec change:\n%+v\n%+v", old.Spec, m.Spec)
		}
		if o := old.Spec.ProviderID; o != "" && o != m.Spec.ProviderID {
			t.Fatalf("admitted a providerID change from %q", o)
		}
		if o := old.Spec.FailureDomain; o != "" && o != m.Spec.FailureDomain {
			t.Fatalf("admitted a failureDomain change from %q", o)
		}
		if old.Spec.FailureDomain == "" {
			checkAdmittedFailureDomain(t, m)
		}
	})
}

func FuzzOVirtMachineTemplateCreate(f *testing.F) {
	f.Add(mustJSON(f, machineTemplate()), uint8(3), "fast-ssd", false)
	f.Add(mustJSON(f, machineTemplate(func(t *infrav1.OVirtMachineTemplate) { t.Spec.Template.Spec.StorageDomainName = "x" })), uint8(1), "", false)
	f.Add([]byte(`{"spec":{"template":{"spec":{"cpu":{"sockets":-3},"vmtype":"x"}}}}`), uint8(0), "", true)
	f.Fuzz(func(t *testing.T, data []byte, mode uint8, providerSD string, gate bool) {
		tpl := &infrav1.OVirtMachineTemplate{}
		if json.Unmarshal(data, tpl) != nil {
			return
		}
		p := fuzzProvider(mode, providerSD)
		w := &OVirtMachineTemplateWebhook{Reader: readerFor(p).Reader, Gates: featuregates.Gates{DiskClone: gate}}
		ctx := context.Background()
		if err := w.Default(ctx, tpl); err != nil {
			t.Fatalf("Default failed on a create: %v", err)
		}
		_, err := w.ValidateCreate(ctx, tpl)
		checkDenial(t, err)
		if err == nil {
			spec := &tpl.Spec.Template.Spec
			checkAdmittedVMSpec(t, spec)
		}
	})
}

func FuzzOVirtMachineTemplateUpdate(f *testing.F) {
	annotated := machineTemplate(func(t *infrav1.OVirtMachineTemplate) {
		t.Annotations = map[string]string{"topology.cluster.x-k8s.io/dry-run": ""}
	})
	f.Add(mustJSON(f, machineTemplate()), mustJSON(f, annotated), true)
	f.Add(mustJSON(f, machineTemplate()), []byte(`{"spec":{"template":{"metadata":{"labels":{"a":"b"}}}}}`), false)
	f.Fuzz(func(t *testing.T, oldData, newData []byte, dryRun bool) {
		old, tpl := &infrav1.OVirtMachineTemplate{}, &infrav1.OVirtMachineTemplate{}
		if json.Unmarshal(oldData, old) != nil || json.Unmarshal(newData, tpl) != nil {
			return
		}
		w := &OVirtMachineTemplateWebhook{Reader: readerWith(provider("ovirt-prod"))}
		ctx := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Update, DryRun: ptr.To(dryRun), OldObject: runtime.RawExtension{Raw: oldData},
		}})
		if err := w.Default(ctx, tpl); err != nil {
			t.Fatalf("Default failed on an update: %v", err)
		}
		_, err := w.ValidateUpdate(ctx, old, tpl)
		checkDenial(t, err)
		_, topologyDryRun := tpl.Annotations["topology.cluster.x-k8s.io/dry-run"]
		if err == nil && (!dryRun || !topologyDryRun) && !equality.Semantic.DeepEqual(old.Spec, tpl.Spec) {
			t.Fatalf("admitted a template change outside a topology dry-run")
		}
	})
}

func FuzzOVirtProvider(f *testing.F) {
	f.Add(mustJSON(f, provider("ovirt-prod")), mustJSON(f, provider("ovirt-prod")))
	f.Add(mustJSON(f, provider("p", func(p *infrav1.OVirtProvider) {
		p.Spec.Engine, p.Spec.CredentialsSecretName, p.Spec.User = "http://x/", "", "u"
		p.Spec.TLS = &infrav1.OVirtProviderTLS{Insecure: true, Certs: "!!"}
	})), []byte(`{"spec":{"engine":"https://[::1]:8443/ovirt-engine/api/","tls":{"certs":"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="}}}`))
	f.Fuzz(func(t *testing.T, oldData, newData []byte) {
		old, p := &infrav1.OVirtProvider{}, &infrav1.OVirtProvider{}
		if json.Unmarshal(oldData, old) != nil || json.Unmarshal(newData, p) != nil {
			return
		}
		w := &OVirtProviderWebhook{}
		_, err := w.ValidateCreate(context.Background(), p)
		checkDenial(t, err)
		if err == nil {
			if _, uerr := engineconfig.EngineURL(p.Spec.Engine); uerr != nil {
				t.Fatalf("admitted an engine the manager refuses: %v", uerr)
			}
			if p.Spec.TLS != nil && p.Spec.TLS.Certs != "" {
				if _, cerr := engineconfig.DecodeCerts(p.Spec.TLS.Certs); cerr != nil {
					t.Fatalf("admitted certs the manager refuses: %v", cerr)
				}
			}
		}
		_, err = w.ValidateUpdate(context.Background(), old, p)
		checkDenial(t, err)
		if err == nil && p.DeletionTimestamp.IsZero() && !equality.Semantic.DeepEqual(old.Spec, p.Spec) &&
			strings.TrimSpace(p.Spec.CredentialsSecretName) == "" {
			t.Fatal("admitted a spec update without credentialsSecretName")
		}
	})
}

func FuzzOVirtCluster(f *testing.F) {
	f.Add("", int32(0), "10.0.1.100", int32(6443))
	f.Add("10.0.1.100", int32(6443), "10.0.1.101", int32(6443))
	f.Add("", int32(0), "https://x", int32(-1))
	f.Fuzz(func(t *testing.T, oldHost string, oldPort int32, host string, port int32) {
		w := &OVirtClusterWebhook{}
		old := &infrav1.OVirtCluster{Spec: infrav1.OVirtClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: oldHost, Port: oldPort}}}
		c := &infrav1.OVirtCluster{Spec: infrav1.OVirtClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: host, Port: port}}}
		_, err := w.ValidateCreate(context.Background(), c)
		checkDenial(t, err)
		if err == nil && !c.Spec.ControlPlaneEndpoint.IsZero() && (strings.TrimSpace(host) == "" || port < 1 || port > 65535) {
			t.Fatalf("admitted endpoint %q:%d", host, port)
		}
		_, err = w.ValidateUpdate(context.Background(), old, c)
		checkDenial(t, err)
		if err == nil && oldHost != "" && old.Spec.ControlPlaneEndpoint != c.Spec.ControlPlaneEndpoint {
			t.Fatalf("admitted a change of the endpoint %q:%d", oldHost, oldPort)
		}
	})
}

// checkAdmittedClusterPlacement fails when an admitted OVirtCluster spec breaks a rule
// ValidateOVirtClusterPlacement guarantees.
func checkAdmittedClusterPlacement(t *testing.T, s *infrav1.OVirtClusterSpec) {
	t.Helper()
	if p := s.ControlPlaneAntiAffinity; p != "" && !isAntiAffinityPolicy(p) {
		t.Fatalf("admitted controlPlaneAntiAffinity %q", p)
	}
	if len(s.FailureDomains) > infrav1.MaxFailureDomains {
		t.Fatalf("admitted %d failure domains", len(s.FailureDomains))
	}
	seen := map[string]bool{}
	for _, d := range s.FailureDomains {
		if d.Name == "" || len(d.Name) > 63 || seen[d.Name] || strings.TrimSpace(d.OVirtCluster) == "" {
			t.Fatalf("admitted failure domains %+v", s.FailureDomains)
		}
		seen[d.Name] = true
	}
}

func FuzzOVirtClusterPlacement(f *testing.F) {
	f.Add(mustJSON(f, placedCluster()), mustJSON(f, placedCluster(func(c *infrav1.OVirtCluster) { c.Spec.FailureDomains = failureDomains(3) })))
	f.Add(mustJSON(f, placedCluster()), []byte(`{"spec":{"controlPlaneAntiAffinity":"soft","failureDomains":[{"name":"fd-1","ovirtcluster":"a"},{"name":"fd-1"}],"provider":"ovirt-restricted"}}`))
	f.Add([]byte(`{"metadata":{"namespace":"team-a"},"spec":{"provider":"ovirt-restricted","failureDomains":[{"name":"A_1","ovirtcluster":" "}]}}`), []byte(`{}`))
	reader := readerWithObjects(provider("ovirt-prod"), provider("ovirt-restricted", allowing([]string{"team-a"}, nil)), namespace("default", nil), namespace("team-a", nil))
	f.Fuzz(func(t *testing.T, oldData, newData []byte) {
		old, c := &infrav1.OVirtCluster{}, &infrav1.OVirtCluster{}
		if json.Unmarshal(oldData, old) != nil || json.Unmarshal(newData, c) != nil {
			return
		}
		w := &OVirtClusterWebhook{Reader: reader}
		ctx := context.Background()
		_, err := w.ValidateCreate(ctx, c)
		checkDenial(t, err)
		if err == nil {
			checkAdmittedClusterPlacement(t, &c.Spec)
			if c.Spec.Provider == "ovirt-restricted" && c.Namespace != "team-a" {
				t.Fatalf("admitted provider ovirt-restricted in namespace %q", c.Namespace)
			}
		}
		_, err = w.ValidateUpdate(ctx, old, c)
		checkDenial(t, err)
		if err == nil && (old.Spec.ControlPlaneAntiAffinity != c.Spec.ControlPlaneAntiAffinity || !equality.Semantic.DeepEqual(old.Spec.FailureDomains, c.Spec.FailureDomains)) {
			checkAdmittedClusterPlacement(t, &c.Spec)
		}
	})
}

// FuzzAdmissionHandlers feeds raw bytes to every handler as controller-runtime would receive
// them, with panic recovery off so that a panic fails instead of becoming a 500 answer.
func FuzzAdmissionHandlers(f *testing.F) {
	f.Add(mustJSON(f, machine()), mustJSON(f, machine()), uint8(0))
	f.Add(mustJSON(f, machineTemplate()), []byte(`{}`), uint8(1))
	f.Add(mustJSON(f, provider("p")), []byte(`null`), uint8(2))
	f.Add([]byte(`{"spec":{"controlPlaneEndpoint":{"port":1}}}`), []byte(`[`), uint8(3))
	scheme := testScheme()
	// A machine names the provider (its deletion is refused), and a restricted provider makes
	// the namespace checks read Namespaces.
	reader := readerWithObjects(provider("ovirt-prod"), provider("ovirt-restricted", allowing([]string{"team-a"}, map[string]string{"env": "prod"})),
		namespace("default", nil), machine(), capiCluster("my-ovirtcluster"), infraCluster("my-ovirtcluster"))
	m := &OVirtMachineWebhook{Reader: reader, Clusters: reader}
	tpl := &OVirtMachineTemplateWebhook{Reader: reader}
	hooks := []*admission.Webhook{
		admission.WithDefaulter(scheme, admission.Defaulter[*infrav1.OVirtMachine](m)),
		admission.WithValidator(scheme, admission.Validator[*infrav1.OVirtMachine](m)),
		admission.WithDefaulter(scheme, admission.Defaulter[*infrav1.OVirtMachineTemplate](tpl)),
		admission.WithValidator(scheme, admission.Validator[*infrav1.OVirtMachineTemplate](tpl)),
		admission.WithValidator(scheme, admission.Validator[*infrav1.OVirtProvider](&OVirtProviderWebhook{Reader: reader, Machines: reader})),
		admission.WithValidator(scheme, admission.Validator[*infrav1.OVirtCluster](&OVirtClusterWebhook{Reader: reader})),
	}
	for _, h := range hooks {
		h.WithRecoverPanic(false)
	}
	ops := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete}
	f.Fuzz(func(t *testing.T, obj, old []byte, sel uint8) {
		h := hooks[int(sel)%len(hooks)]
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "fuzz", Operation: ops[int(sel/8)%len(ops)],
			Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: old},
		}}
		resp := h.Handle(context.Background(), req)
		if resp.Result == nil && !resp.Allowed {
			t.Fatalf("a denial without a status: %+v", resp)
		}
	})
}
