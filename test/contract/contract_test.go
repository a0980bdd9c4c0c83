package contract_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	"sigs.k8s.io/cluster-api/util/contract"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capov/capov/apis/v1beta1"
)

func loadCRDs(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs found in config/crd/bases: %v", err)
	}
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[crd.Spec.Names.Kind] = crd
	}
	return out
}

func TestCRDsFollowTheContract(t *testing.T) {
	crds := loadCRDs(t)
	tests := []struct {
		kind          string
		scope         apiextensionsv1.ResourceScope
		contractLabel bool
		moveHierarchy bool
	}{
		{"OVirtProvider", apiextensionsv1.ClusterScoped, false, true},
		{"OVirtCluster", apiextensionsv1.NamespaceScoped, true, false},
		{"OVirtMachine", apiextensionsv1.NamespaceScoped, true, false},
		{"OVirtMachineTemplate", apiextensionsv1.NamespaceScoped, true, false},
	}
	g := NewWithT(t)
	g.Expect(crds).To(HaveLen(len(tests)))
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			g := NewWithT(t)
			crd, ok := crds[tt.kind]
			g.Expect(ok).To(BeTrue())
			g.Expect(crd.Name).To(Equal(contract.CalculateCRDName(infrav1.GroupVersion.Group, tt.kind)))
			g.Expect(crd.Spec.Scope).To(Equal(tt.scope))
			g.Expect(crd.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/provider", "infrastructure-ovirt"))
			g.Expect(crd.Labels).To(HaveKeyWithValue("clusterctl.cluster.x-k8s.io", ""))
			if tt.contractLabel {
				g.Expect(crd.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta1", "v1beta1"))
			} else {
				g.Expect(crd.Labels).NotTo(HaveKey("cluster.x-k8s.io/v1beta1"))
			}
			// A v1beta2 label would win and make CAPI ignore status.ready.
			g.Expect(crd.Labels).NotTo(HaveKey("cluster.x-k8s.io/v1beta2"))
			if tt.moveHierarchy {
				g.Expect(crd.Labels).To(HaveKeyWithValue("clusterctl.cluster.x-k8s.io/move-hierarchy", ""))
			}
			g.Expect(crd.Spec.Versions).To(HaveLen(1))
			v := crd.Spec.Versions[0]
			g.Expect(v.Name).To(Equal("v1beta1"))
			g.Expect(v.Served && v.Storage).To(BeTrue())
			g.Expect(v.Subresources).NotTo(BeNil())
			g.Expect(v.Subresources.Status).NotTo(BeNil())
		})
	}
}

// prop walks a schema along a path of property names ("[]" descends into array items).
func prop(t *testing.T, s *apiextensionsv1.JSONSchemaProps, path ...string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, p := range path {
		if p == "[]" {
			if s.Items == nil || s.Items.Schema == nil {
				t.Fatalf("no array items at %v", path)
			}
			s = s.Items.Schema
			continue
		}
		next, ok := s.Properties[p]
		if !ok {
			t.Fatalf("schema has no %q on the path %v", p, path)
		}
		s = &next
	}
	return s
}

func TestSchemasHaveTheFieldsCAPIReads(t *testing.T) {
	crds := loadCRDs(t)
	schema := func(kind string) *apiextensionsv1.JSONSchemaProps {
		return crds[kind].Spec.Versions[0].Schema.OpenAPIV3Schema
	}
	g := NewWithT(t)
	for _, kind := range []string{"OVirtCluster", "OVirtMachine", "OVirtProvider"} {
		g.Expect(prop(t, schema(kind), "status", "ready").Type).To(Equal("boolean"), kind)
		g.Expect(prop(t, schema(kind), "status", "failureReason").Type).To(Equal("string"), kind)
		g.Expect(prop(t, schema(kind), "status", "failureMessage").Type).To(Equal("string"), kind)
		for _, f := range []string{"type", "status", "severity", "reason", "message", "lastTransitionTime"} {
			prop(t, schema(kind), "status", "conditions", "[]", f)
		}
	}
	for _, kind := range []string{"OVirtCluster", "OVirtMachine"} {
		prop(t, schema(kind), "status", "v1beta2", "conditions", "[]", "reason")
	}
	prop(t, schema("OVirtCluster"), "spec", "controlPlaneEndpoint", "host")
	g.Expect(prop(t, schema("OVirtCluster"), "spec", "controlPlaneEndpoint", "port").Type).To(Equal("integer"))
	g.Expect(prop(t, schema("OVirtMachine"), "spec", "providerID").Type).To(Equal("string"))
	prop(t, schema("OVirtMachine"), "status", "addresses", "[]", "type")
	prop(t, schema("OVirtMachine"), "status", "addresses", "[]", "address")
	prop(t, schema("OVirtMachineTemplate"), "spec", "template", "spec", "template")
	prop(t, schema("OVirtMachineTemplate"), "spec", "template", "metadata", "labels")
	prop(t, schema("OVirtMachineTemplate"), "status", "capacity")
	// The template spec is the machine spec without providerID.
	tplSpec := prop(t, schema("OVirtMachineTemplate"), "spec", "template", "spec")
	g.Expect(tplSpec.Properties).NotTo(HaveKey("providerID"))
	machineSpec := prop(t, schema("OVirtMachine"), "spec")
	for name := range tplSpec.Properties {
		g.Expect(machineSpec.Properties).To(HaveKey(name))
	}
	g.Expect(len(machineSpec.Properties)).To(Equal(len(tplSpec.Properties) + 1))
}

// TestUnstructuredPathsCAPIReads marshals typed objects and reads them back along the paths
// that Cluster API's contract package reads.
func TestUnstructuredPathsCAPIReads(t *testing.T) {
	g := NewWithT(t)
	m := &infrav1.OVirtMachine{
		Spec: infrav1.OVirtMachineSpec{ProviderID: ptr.To("ovirt://1234")},
		Status: infrav1.OVirtMachineStatus{
			Ready:          true,
			Addresses:      []clusterv1beta1.MachineAddress{{Type: clusterv1beta1.MachineInternalIP, Address: "10.0.0.5"}},
			FailureReason:  ptr.To(infrav1.OVirtEngineConnectionCriticalFailure),
			FailureMessage: ptr.To("cannot log in"),
			Conditions: clusterv1beta1.Conditions{{
				Type: infrav1.MachineOnCondition, Status: "False", Severity: clusterv1beta1.ConditionSeverityInfo,
				Reason: infrav1.VMPoweringUpReason, Message: "powering up",
			}},
		},
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: raw}

	ready, found, err := unstructured.NestedBool(u.Object, "status", "ready")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found && ready).To(BeTrue())
	pid, _, _ := unstructured.NestedString(u.Object, "spec", "providerID")
	g.Expect(pid).To(Equal("ovirt://1234"))
	addrs, _, _ := unstructured.NestedSlice(u.Object, "status", "addresses")
	g.Expect(addrs).To(ConsistOf(map[string]interface{}{"type": "InternalIP", "address": "10.0.0.5"}))
	reason, _, _ := unstructured.NestedString(u.Object, "status", "failureReason")
	g.Expect(reason).To(Equal("OVirtEngineConnectionCritical"))
	msg, _, _ := unstructured.NestedString(u.Object, "status", "failureMessage")
	g.Expect(msg).To(Equal("cannot log in"))
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	g.Expect(conds).To(HaveLen(1))
	g.Expect(conds[0]).To(HaveKeyWithValue("severity", "Info"))
	g.Expect(conds[0]).To(HaveKeyWithValue("reason", "VMPoweringUp"))

	// An unready machine still publishes ready=false (the contract reads the field).
	raw, err = runtime.DefaultUnstructuredConverter.ToUnstructured(&infrav1.OVirtCluster{})
	g.Expect(err).NotTo(HaveOccurred())
	r, found, _ := unstructured.NestedBool(raw, "status", "ready")
	g.Expect(found).To(BeTrue())
	g.Expect(r).To(BeFalse())
}
