package envtest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capov/capov/apis/v1beta1"
	"github.com/capov/capov/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(m, envtest.Options{WithCertManagerCRDs: true}, func(e *envtest.Environment) { env = e }))
}

func TestDiscoveryShowsShortNamesAndScopes(t *testing.T) {
	g := NewWithT(t)
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	list, err := dc.ServerResourcesForGroupVersion(infrav1.GroupVersion.String())
	g.Expect(err).NotTo(HaveOccurred())

	type want struct {
		short      string
		namespaced bool
	}
	wants := map[string]want{
		"ovirtproviders":        {"capovp", false},
		"ovirtclusters":         {"capovc", true},
		"ovirtmachines":         {"capovm", true},
		"ovirtmachinetemplates": {"capovmt", true},
	}
	seen := map[string]bool{}
	for _, r := range list.APIResources {
		w, ok := wants[r.Name]
		if !ok {
			continue
		}
		seen[r.Name] = true
		g.Expect(r.ShortNames).To(ContainElement(w.short), r.Name)
		g.Expect(r.Namespaced).To(Equal(w.namespaced), r.Name)
		g.Expect(r.Categories).To(ContainElement("cluster-api"), r.Name)
	}
	g.Expect(seen).To(HaveLen(len(wants)))
}

// TestPrinterColumns asks the API server for a Table, as kubectl get does, and checks the
// columns the product doc shows.
func TestPrinterColumns(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		resource    string
		namespaced  bool
		wantDefault []string
		wantWide    []string
	}{
		{"kubectl get capovp shows NAME READY", "ovirtproviders", false, []string{"Name", "Ready"}, []string{"Engine", "Version", "Reason", "Age"}},
		{"kubectl get capovc shows the control-plane endpoint", "ovirtclusters", true, []string{"Name", "ControlPlane Endpoint", "Ready"}, []string{"Cluster", "Age"}},
		{"kubectl get capovm shows NAME READY and -o wide the VM", "ovirtmachines", true, []string{"Name", "Ready"}, []string{"VM ID", "VM Name", "ProviderID", "oVirt State"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			path := "/apis/infrastructure.cluster.x-k8s.io/v1beta1/"
			if tt.namespaced {
				path += "namespaces/default/"
			}
			path += tt.resource
			rc, err := restClient(env)
			g.Expect(err).NotTo(HaveOccurred())
			table := &metav1.Table{}
			err = rc.Get().AbsPath(path).
				SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
				Do(ctx).Into(table)
			g.Expect(err).NotTo(HaveOccurred())
			var def, wide []string
			for _, c := range table.ColumnDefinitions {
				if c.Priority == 0 {
					def = append(def, c.Name)
				} else {
					wide = append(wide, c.Name)
				}
			}
			g.Expect(def).To(Equal(tt.wantDefault))
			g.Expect(wide).To(Equal(tt.wantWide))
		})
	}
}

func validMachine(name string) *infrav1.OVirtMachine {
	return &infrav1.OVirtMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{
			Provider: "ovirt-prod", OVirtCluster: "Default", Template: "rhcos-4.14",
			VMType:       infrav1.VMTypeServer,
			CPU:          &infrav1.CPU{Sockets: 1, Cores: 4, Threads: 1},
			Memory:       &infrav1.Memory{SizeMB: 8192, GuaranteedMB: 4096},
			OSDiskSizeGB: 80,
			NICs:         []infrav1.NIC{{VnicProfile: "ovirtmgmt"}},
		}},
	}
}

func TestAPIServerAcceptsTheProductDocExample(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := validMachine("worker-abc123")
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, m) })

	p := &infrav1.OVirtProvider{
		ObjectMeta: metav1.ObjectMeta{Name: "ovirt-dev"},
		Spec: infrav1.OVirtProviderSpec{
			Engine: "https://ovirt-dev.example.com/ovirt-engine/api", CredentialsSecretName: "ovirt-dev-capov-provider-secret",
			TLS: &infrav1.OVirtProviderTLS{Insecure: true},
		},
	}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, p) })
}

func TestAPIServerRejectsBadMachines(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(u *unstructured.Unstructured)
		wantField string
		wantText  string
	}{
		{"an unknown vmtype is rejected", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "gaming", "spec", "vmtype")
		}, "spec.vmtype", "Unsupported value"},
		{"a negative disk size is rejected", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(-1), "spec", "osdisksizegb")
		}, "spec.osdisksizegb", "greater than or equal to 1"},
		{"a disk above 64 TiB is rejected", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(70000), "spec", "osdisksizegb")
		}, "spec.osdisksizegb", "less than or equal to 65536"},
		{"zero sockets are rejected", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(0), "spec", "cpu", "sockets")
		}, "spec.cpu.sockets", "greater than or equal to 1"},
		{"guaranteed memory above the size is rejected", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(9000), "spec", "memory", "guaranteedmb")
		}, "spec.memory.guaranteedmb", "guaranteedmb must not exceed sizemb"},
		{"a missing template is rejected", func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "template")
		}, "spec.template", "Required value"},
		{"a missing provider is rejected", func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "provider")
		}, "spec.provider", "Required value"},
		{"a missing ovirtcluster is rejected", func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "ovirtcluster")
		}, "spec.ovirtcluster", "Required value"},
		{"an empty vnicprofile is rejected", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []interface{}{map[string]interface{}{"vnicprofile": ""}}, "spec", "nics")
		}, "spec.nics[0].vnicprofile", "at least 1 chars long"},
		{"memory without sizemb is rejected", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedMap(u.Object, map[string]interface{}{"guaranteedmb": int64(1)}, "spec", "memory")
		}, "spec.memory.sizemb", "Required value"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := validMachine("bad-" + strings.Repeat("x", i+1))
			obj, err := toUnstructured(env, m)
			g.Expect(err).NotTo(HaveOccurred())
			tt.mutate(obj)
			err = env.Client.Create(context.Background(), obj)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.wantField))
			g.Expect(err.Error()).To(ContainSubstring(tt.wantText))
		})
	}
}

func TestAPIServerRejectsBadProviders(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	p := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": infrav1.GroupVersion.String(), "kind": "OVirtProvider",
		"metadata": map[string]interface{}{"name": "no-engine"},
		"spec":     map[string]interface{}{"credentialsSecretName": "s"},
	}}
	err := env.Client.Create(ctx, p)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.engine: Required value"))

	_ = unstructured.SetNestedField(p.Object, "ftp://engine", "spec", "engine")
	err = env.Client.Create(ctx, p)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.engine"))
}

func TestStatusIsASubresource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := validMachine("status-sub")
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, m) })

	// A spec update does not write status.
	m.Status.Ready = true
	m.Spec.ProviderID = ptr.To("ovirt://x")
	g.Expect(env.Client.Update(ctx, m)).To(Succeed())
	got := &infrav1.OVirtMachine{}
	g.Expect(env.Client.Get(ctx, keyOf(m), got)).To(Succeed())
	g.Expect(got.Status.Ready).To(BeFalse())
	g.Expect(*got.Spec.ProviderID).To(Equal("ovirt://x"))

	// The status subresource does.
	got.Status.Ready = true
	got.Status.VMID = "x"
	g.Expect(env.Client.Status().Update(ctx, got)).To(Succeed())
	g.Expect(env.Client.Get(ctx, keyOf(m), got)).To(Succeed())
	g.Expect(got.Status.Ready).To(BeTrue())
	g.Expect(got.Status.VMID).To(Equal("x"))
}
