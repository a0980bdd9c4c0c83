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

	infrav1 "github.com/capov/capov/apis/v1beta2"
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
// headers kubectl prints (it upper-cases the column names): the product doc's columns first,
// then the ones of issue 17; -o wide adds the priority-1 columns (capovp: the inventory's counts).
func TestPrinterColumns(t *testing.T) {
	tests := []struct {
		name        string
		resource    string
		namespaced  bool
		wantDefault []string
		wantWide    []string
	}{
		{"kubectl get capovp", "ovirtproviders", false,
			[]string{"NAME", "READY", "ENGINE", "VERSION", "REASON", "AGE"}, []string{"VMS", "ORPHANS"}},
		{"kubectl get capovc", "ovirtclusters", true,
			[]string{"NAME", "CONTROLPLANE ENDPOINT", "READY", "CLUSTER", "AGE"}, []string{"FAILURE DOMAINS", "ANTI-AFFINITY"}},
		{"kubectl get capovm", "ovirtmachines", true,
			[]string{"NAME", "READY", "CLUSTER", "OVIRT STATE", "AGE"}, []string{"VM ID", "VM NAME", "PROVIDERID", "NODE", "HOST", "FAILURE DOMAIN"}},
		{"kubectl get capovmt", "ovirtmachinetemplates", true,
			[]string{"NAME", "TEMPLATE", "PROVIDER", "AGE"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			path := "/apis/infrastructure.cluster.x-k8s.io/v1beta2/"
			if tt.namespaced {
				path += "namespaces/default/"
			}
			table, err := getTable(path + tt.resource)
			g.Expect(err).NotTo(HaveOccurred())
			var def, wide []string
			for _, c := range table.ColumnDefinitions {
				if c.Priority == 0 {
					def = append(def, strings.ToUpper(c.Name))
				} else {
					wide = append(wide, strings.ToUpper(c.Name))
				}
			}
			g.Expect(def).To(Equal(tt.wantDefault))
			g.Expect(wide).To(Equal(tt.wantWide))
		})
	}
}

// TestMachineColumnsShowTheirFields checks that each OVirtMachine column reads the field it
// is named after (a wrong JSONPath prints an empty cell, not an error).
func TestMachineColumnsShowTheirFields(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := validMachine("columns")
	m.Labels = map[string]string{"cluster.x-k8s.io/cluster-name": "prod-a"}
	m.Spec.ProviderID = "ovirt://0f6d3c1e"
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, m) })
	m.Status = infrav1.OVirtMachineStatus{
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}},
		VMID:       "0f6d3c1e", VMName: "columns-vm", VMState: "up", NodeName: "node-columns",
		Host: "host-7", FailureDomain: "rack-b",
	}
	g.Expect(env.Client.Status().Update(ctx, m)).To(Succeed())

	table, err := getTable("/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/default/ovirtmachines/columns")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(table.Rows).To(HaveLen(1))
	cells := map[string]any{}
	for i, c := range table.ColumnDefinitions {
		cells[strings.ToUpper(c.Name)] = table.Rows[0].Cells[i]
	}
	g.Expect(cells).To(HaveKeyWithValue("NAME", "columns"))
	g.Expect(cells).To(HaveKeyWithValue("READY", "True"))
	g.Expect(cells).To(HaveKeyWithValue("CLUSTER", "prod-a"))
	g.Expect(cells).To(HaveKeyWithValue("OVIRT STATE", "up"))
	g.Expect(cells).To(HaveKeyWithValue("AGE", Not(BeEmpty())))
	g.Expect(cells).To(HaveKeyWithValue("VM ID", "0f6d3c1e"))
	g.Expect(cells).To(HaveKeyWithValue("VM NAME", "columns-vm"))
	g.Expect(cells).To(HaveKeyWithValue("PROVIDERID", "ovirt://0f6d3c1e"))
	g.Expect(cells).To(HaveKeyWithValue("NODE", "node-columns"))
	g.Expect(cells).To(HaveKeyWithValue("HOST", "host-7"))
	g.Expect(cells).To(HaveKeyWithValue("FAILURE DOMAIN", "rack-b"))
}

// getTable GETs a path as a meta.k8s.io/v1 Table, the way kubectl get asks for it.
func getTable(path string) (*metav1.Table, error) {
	rc, err := restClient(env)
	if err != nil {
		return nil, err
	}
	table := &metav1.Table{}
	err = rc.Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		Do(context.Background()).Into(table)
	return table, err
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
		{"a preallocated cow data disk is rejected", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []interface{}{map[string]interface{}{
				"name": "etcd", "sizeGB": int64(20), "format": "cow", "preallocated": true}}, "spec", "dataDisks")
		}, "spec.dataDisks[0].format", "use format raw"},
		{"two data disks of one name are rejected", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []interface{}{
				map[string]interface{}{"name": "etcd", "sizeGB": int64(20)},
				map[string]interface{}{"name": "etcd", "sizeGB": int64(30)}}, "spec", "dataDisks")
		}, "spec.dataDisks[1]", "Duplicate value"},
		{"a hugepage size oVirt does not offer is rejected", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(4), "spec", "performance", "hugePagesKiB")
		}, "spec.performance.hugePagesKiB", "Unsupported value"},
		{"a custom property value with oVirt's separator is rejected", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []interface{}{map[string]interface{}{"name": "viodiskcache", "value": "a;b"}}, "spec", "customProperties")
		}, "spec.customProperties[0].value", "should match"},
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
	m.Status.Initialization.Provisioned = ptr.To(true)
	m.Spec.ProviderID = "ovirt://x"
	g.Expect(env.Client.Update(ctx, m)).To(Succeed())
	got := &infrav1.OVirtMachine{}
	g.Expect(env.Client.Get(ctx, keyOf(m), got)).To(Succeed())
	g.Expect(got.Status.Initialization.Provisioned).To(BeNil())
	g.Expect(got.Spec.ProviderID).To(Equal("ovirt://x"))

	// The status subresource does.
	got.Status.Initialization.Provisioned = ptr.To(true)
	got.Status.VMID = "x"
	g.Expect(env.Client.Status().Update(ctx, got)).To(Succeed())
	g.Expect(env.Client.Get(ctx, keyOf(m), got)).To(Succeed())
	g.Expect(got.Status.Initialization.Provisioned).To(HaveValue(BeTrue()))
	g.Expect(got.Status.VMID).To(Equal("x"))
}
