package contract_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/contract"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capov/capov/apis/v1beta2"
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
		// v1beta2Only: a kind new in v1beta2 (no v1beta1 version, no v1beta1 contract label).
		v1beta2Only bool
	}{
		{"OVirtProvider", apiextensionsv1.ClusterScoped, false, true, false},
		{"OVirtCluster", apiextensionsv1.NamespaceScoped, true, false, false},
		{"OVirtMachine", apiextensionsv1.NamespaceScoped, true, false, false},
		{"OVirtMachineTemplate", apiextensionsv1.NamespaceScoped, true, false, false},
		// The InfraClusterTemplate of a ClusterClass: Cluster API reads its contract label.
		{"OVirtClusterTemplate", apiextensionsv1.NamespaceScoped, true, false, true},
		// The external remediation kinds a MachineHealthCheck references and creates.
		{"OVirtRemediationTemplate", apiextensionsv1.NamespaceScoped, true, false, true},
		{"OVirtRemediation", apiextensionsv1.NamespaceScoped, true, false, true},
		// CAPOV's own reservation of host devices: no Cluster API contract, never moved.
		{"OVirtHostDeviceClaim", apiextensionsv1.ClusterScoped, false, false, true},
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
			if tt.v1beta2Only {
				if tt.contractLabel {
					g.Expect(crd.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta2", "v1beta2"))
				} else {
					g.Expect(crd.Labels).NotTo(HaveKey("cluster.x-k8s.io/v1beta2"))
				}
				g.Expect(crd.Labels).NotTo(HaveKey("clusterctl.cluster.x-k8s.io/move-hierarchy"))
				g.Expect(crd.Labels).NotTo(HaveKey("cluster.x-k8s.io/v1beta1"), "no v1beta1 version to name")
				g.Expect(crd.Spec.Versions).To(HaveLen(1))
				g.Expect(crd.Spec.Versions[0].Name).To(Equal("v1beta2"))
				g.Expect(crd.Spec.Versions[0].Served && crd.Spec.Versions[0].Storage).To(BeTrue())
				return
			}
			if tt.contractLabel {
				// CAPI tries the newest contract first: with both labels it reads v1beta2 (and
				// status.initialization.provisioned); v1beta1 stays declared for older cores.
				g.Expect(crd.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta2", "v1beta2"))
				g.Expect(crd.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta1", "v1beta1"))
			} else {
				g.Expect(crd.Labels).NotTo(HaveKey("cluster.x-k8s.io/v1beta1"))
				g.Expect(crd.Labels).NotTo(HaveKey("cluster.x-k8s.io/v1beta2"))
			}
			if tt.moveHierarchy {
				g.Expect(crd.Labels).To(HaveKeyWithValue("clusterctl.cluster.x-k8s.io/move-hierarchy", ""))
			}
			g.Expect(crd.Spec.Versions).To(HaveLen(2))
			for _, v := range crd.Spec.Versions {
				g.Expect(v.Served).To(BeTrue(), v.Name)
				g.Expect(v.Storage).To(Equal(v.Name == "v1beta2"), "v1beta2 is the storage version, not %s", v.Name)
				g.Expect(v.Subresources).NotTo(BeNil())
				g.Expect(v.Subresources.Status).NotTo(BeNil())
			}
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

func version(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, v := range crd.Spec.Versions {
		if v.Name == name {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("%s has no version %s", crd.Name, name)
	return nil
}

func TestSchemasHaveTheFieldsCAPIReads(t *testing.T) {
	crds := loadCRDs(t)
	hub := func(kind string) *apiextensionsv1.JSONSchemaProps { return version(t, crds[kind], "v1beta2") }
	spoke := func(kind string) *apiextensionsv1.JSONSchemaProps { return version(t, crds[kind], "v1beta1") }
	g := NewWithT(t)
	for _, kind := range []string{"OVirtCluster", "OVirtMachine", "OVirtProvider"} {
		// v1beta2: metav1 conditions (no severity), the v1beta1 fields under deprecated.v1beta1.
		for _, f := range []string{"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"} {
			prop(t, hub(kind), "status", "conditions", "[]", f)
		}
		g.Expect(prop(t, hub(kind), "status", "conditions", "[]").Properties).NotTo(HaveKey("severity"), kind)
		g.Expect(prop(t, hub(kind), "status").Properties).NotTo(HaveKey("ready"), "%s v1beta2 has no status.ready", kind)
		if kind == "OVirtMachine" {
			// The deprecated mirror the product doc's reset removes
			// (docs/proposals/2026-12-05-failure-reset-on-v1beta2.md); Cluster API does not read it.
			g.Expect(prop(t, hub(kind), "status", "failureReason").Description).To(ContainSubstring("Deprecated"))
		} else {
			g.Expect(prop(t, hub(kind), "status").Properties).NotTo(HaveKey("failureReason"), kind)
		}
		prop(t, hub(kind), "status", "deprecated", "v1beta1", "conditions", "[]", "severity")
		g.Expect(prop(t, hub(kind), "status", "deprecated", "v1beta1", "failureReason").Type).To(Equal("string"), kind)
		g.Expect(prop(t, hub(kind), "status", "deprecated", "v1beta1", "failureMessage").Type).To(Equal("string"), kind)
		// v1beta1 keeps the shape v1beta1 clients know.
		g.Expect(prop(t, spoke(kind), "status", "ready").Type).To(Equal("boolean"), kind)
		g.Expect(prop(t, spoke(kind), "status", "failureReason").Type).To(Equal("string"), kind)
		for _, f := range []string{"type", "status", "severity", "reason", "message", "lastTransitionTime"} {
			prop(t, spoke(kind), "status", "conditions", "[]", f)
		}
	}
	for _, kind := range []string{"OVirtCluster", "OVirtMachine"} {
		g.Expect(prop(t, hub(kind), "status", "initialization", "provisioned").Type).To(Equal("boolean"), kind)
		prop(t, spoke(kind), "status", "v1beta2", "conditions", "[]", "reason")
	}
	g.Expect(prop(t, hub("OVirtProvider"), "status", "deprecated", "v1beta1", "ready").Type).To(Equal("boolean"))
	prop(t, hub("OVirtCluster"), "spec", "controlPlaneEndpoint", "host")
	g.Expect(prop(t, hub("OVirtCluster"), "spec", "controlPlaneEndpoint", "port").Type).To(Equal("integer"))
	g.Expect(prop(t, hub("OVirtMachine"), "spec", "providerID").Type).To(Equal("string"))
	prop(t, hub("OVirtMachine"), "status", "addresses", "[]", "type")
	prop(t, hub("OVirtMachine"), "status", "addresses", "[]", "address")
	prop(t, hub("OVirtMachineTemplate"), "spec", "template", "spec", "template")
	prop(t, hub("OVirtMachineTemplate"), "spec", "template", "metadata", "labels")
	prop(t, hub("OVirtMachineTemplate"), "status", "capacity")
	// The template spec is the machine spec without providerID.
	tplSpec := prop(t, hub("OVirtMachineTemplate"), "spec", "template", "spec")
	g.Expect(tplSpec.Properties).NotTo(HaveKey("providerID"))
	machineSpec := prop(t, hub("OVirtMachine"), "spec")
	for name := range tplSpec.Properties {
		g.Expect(machineSpec.Properties).To(HaveKey(name))
	}
	// The machine adds what is set per machine: providerID, and the failure domain the manager
	// copies from the Machine.
	var machineOnly []string
	for name := range machineSpec.Properties {
		if _, ok := tplSpec.Properties[name]; !ok {
			machineOnly = append(machineOnly, name)
		}
	}
	g.Expect(machineOnly).To(ConsistOf("providerID", "failureDomain"))
	// The failure domains Cluster API reads from the OVirtCluster (v1beta2 contract).
	prop(t, hub("OVirtCluster"), "status", "failureDomains", "[]", "name")
	g.Expect(prop(t, hub("OVirtCluster"), "status", "failureDomains", "[]", "controlPlane").Type).To(Equal("boolean"))
	prop(t, hub("OVirtCluster"), "status", "failureDomains", "[]", "attributes")
	g.Expect(prop(t, hub("OVirtMachine"), "status", "failureDomain").Type).To(Equal("string"))
}

// TestUnstructuredPathsCAPIReads marshals typed v1beta2 objects and reads them back with
// the paths Cluster API's contract package reads for the v1beta2 contract.
func TestUnstructuredPathsCAPIReads(t *testing.T) {
	g := NewWithT(t)
	m := &infrav1.OVirtMachine{
		Spec: infrav1.OVirtMachineSpec{ProviderID: "ovirt://1234"},
		Status: infrav1.OVirtMachineStatus{
			Initialization: infrav1.OVirtMachineInitializationStatus{Provisioned: ptr.To(true)},
			Addresses:      []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: "10.0.0.5"}},
			Conditions: []metav1.Condition{{Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse,
				Reason: infrav1.VMDeletedOutOfBandFailure, Message: "gone"}},
			Deprecated: &infrav1.DeprecatedStatus{V1Beta1: &infrav1.V1Beta1DeprecatedStatus{
				FailureReason:  ptr.To(infrav1.VMDeletedOutOfBandFailure),
				FailureMessage: ptr.To("gone"),
				Conditions: clusterv1.Conditions{{
					Type: infrav1.MachineOnCondition, Status: "False", Severity: clusterv1.ConditionSeverityInfo,
					Reason: infrav1.VMPoweringUpReason, Message: "powering up",
				}},
			}},
		},
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: raw}

	// The paths of CAPI's internal/contract for the v1beta2 contract.
	provisioned, found, err := unstructured.NestedBool(u.Object, "status", "initialization", "provisioned")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found && provisioned).To(BeTrue())
	pid, _, _ := unstructured.NestedString(u.Object, "spec", "providerID")
	g.Expect(pid).To(Equal("ovirt://1234"))
	addrs, _, _ := unstructured.NestedSlice(u.Object, "status", "addresses")
	g.Expect(addrs).To(ConsistOf(map[string]interface{}{"type": "InternalIP", "address": "10.0.0.5"}))
	_, found, _ = unstructured.NestedFieldNoCopy(u.Object, "status", "ready")
	g.Expect(found).To(BeFalse(), "no status.ready in v1beta2")
	reason, _, _ := unstructured.NestedString(u.Object, "status", "deprecated", "v1beta1", "failureReason")
	g.Expect(reason).To(Equal("VMDeletedOutOfBand"))
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "deprecated", "v1beta1", "conditions")
	g.Expect(conds).To(HaveLen(1))
	g.Expect(conds[0]).To(HaveKeyWithValue("severity", "Info"))
	ready, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	g.Expect(ready).To(ConsistOf(HaveKeyWithValue("reason", "VMDeletedOutOfBand")))

	// An OVirtCluster not provisioned yet publishes no status.initialization (MinProperties=1).
	raw, err = runtime.DefaultUnstructuredConverter.ToUnstructured(&infrav1.OVirtCluster{})
	g.Expect(err).NotTo(HaveOccurred())
	_, found, _ = unstructured.NestedFieldNoCopy(raw, "status", "initialization")
	g.Expect(found).To(BeFalse())
}
