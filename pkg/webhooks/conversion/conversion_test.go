package conversion

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	utilconversion "sigs.k8s.io/cluster-api/util/conversion"
	"sigs.k8s.io/randfill"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := infrav1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := infrav1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// fuzzerFuncs normalise what both versions express the same way (an empty struct and no
// struct), so that the round trips compare meaning, not allocation.
func fuzzerFuncs(_ runtimeserializer.CodecFactory) []any {
	return []any{
		func(in *infrav1beta1.OVirtMachineSpec, c randfill.Continue) {
			c.FillNoCustom(in)
			if in.ProviderID != nil && *in.ProviderID == "" {
				in.ProviderID = nil
			}
		},
		func(in *infrav1beta1.OVirtMachineStatus, c randfill.Continue) {
			c.FillNoCustom(in)
			if in.V1Beta2 != nil && in.V1Beta2.Conditions == nil {
				in.V1Beta2 = nil
			}
		},
		func(in *infrav1beta1.OVirtClusterStatus, c randfill.Continue) {
			c.FillNoCustom(in)
			if in.V1Beta2 != nil && in.V1Beta2.Conditions == nil {
				in.V1Beta2 = nil
			}
		},
		func(in *infrav1beta1.OVirtProviderStatus, c randfill.Continue) {
			c.FillNoCustom(in)
			if in.V1Beta2 != nil && in.V1Beta2.Conditions == nil {
				in.V1Beta2 = nil
			}
		},
		func(in *infrav1.OVirtMachineStatus, c randfill.Continue) {
			c.FillNoCustom(in)
			in.Deprecated = normaliseDeprecated(in.Deprecated)
			// status.failureReason/failureMessage mirror the deprecated failure: the manager
			// writes both or neither (setMachineFailure).
			in.FailureReason, in.FailureMessage = nil, nil //nolint:staticcheck // the mirror round-trips
			if d := in.Deprecated; d != nil {
				in.FailureReason, in.FailureMessage = d.V1Beta1.FailureReason, d.V1Beta1.FailureMessage //nolint:staticcheck // the mirror round-trips
			}
		},
		func(in *infrav1.OVirtClusterStatus, c randfill.Continue) {
			c.FillNoCustom(in)
			in.Deprecated = normaliseDeprecated(in.Deprecated)
		},
		func(in *infrav1.OVirtProviderStatus, c randfill.Continue) {
			c.FillNoCustom(in)
			if d := in.Deprecated; d != nil && (d.V1Beta1 == nil || (!d.V1Beta1.Ready && d.V1Beta1.Conditions == nil && d.V1Beta1.FailureReason == nil && d.V1Beta1.FailureMessage == nil)) {
				in.Deprecated = nil
			}
			// status.inventory exists only in v1beta2 and is not carried through v1beta1 (the
			// manager rewrites it at every inventory).
			in.Inventory = nil
		},
	}
}

func normaliseDeprecated(d *infrav1.DeprecatedStatus) *infrav1.DeprecatedStatus {
	if d == nil || d.V1Beta1 == nil {
		return nil
	}
	if v := d.V1Beta1; v.Conditions == nil && v.FailureReason == nil && v.FailureMessage == nil {
		return nil
	}
	return d
}

func ptr[T any](v T) *T { return &v }

// TestFuzzyConversion round-trips every kind 10,000 times each way (spoke-hub-spoke and
// hub-spoke-hub) with Cluster API's spoke-converter fuzz test: nothing may be lost.
func TestFuzzyConversion(t *testing.T) {
	s := testScheme(t)
	t.Run("OVirtMachine", utilconversion.SpokeConverterFuzzTestFunc(utilconversion.SpokeConverterFuzzTestFuncInput[*infrav1.OVirtMachine, *infrav1beta1.OVirtMachine]{
		Scheme: s, FuzzerFuncs: []fuzzer.FuzzerFuncs{fuzzerFuncs},
		ConvertHubToSpokeFunc: ConvertOVirtMachineHubToSpoke, ConvertSpokeToHubFunc: ConvertOVirtMachineSpokeToHub,
	}))
	t.Run("OVirtCluster", utilconversion.SpokeConverterFuzzTestFunc(utilconversion.SpokeConverterFuzzTestFuncInput[*infrav1.OVirtCluster, *infrav1beta1.OVirtCluster]{
		Scheme: s, FuzzerFuncs: []fuzzer.FuzzerFuncs{fuzzerFuncs},
		ConvertHubToSpokeFunc: ConvertOVirtClusterHubToSpoke, ConvertSpokeToHubFunc: ConvertOVirtClusterSpokeToHub,
	}))
	t.Run("OVirtMachineTemplate", utilconversion.SpokeConverterFuzzTestFunc(utilconversion.SpokeConverterFuzzTestFuncInput[*infrav1.OVirtMachineTemplate, *infrav1beta1.OVirtMachineTemplate]{
		Scheme: s, FuzzerFuncs: []fuzzer.FuzzerFuncs{fuzzerFuncs},
		ConvertHubToSpokeFunc: ConvertOVirtMachineTemplateHubToSpoke, ConvertSpokeToHubFunc: ConvertOVirtMachineTemplateSpokeToHub,
	}))
	t.Run("OVirtProvider", utilconversion.SpokeConverterFuzzTestFunc(utilconversion.SpokeConverterFuzzTestFuncInput[*infrav1.OVirtProvider, *infrav1beta1.OVirtProvider]{
		Scheme: s, FuzzerFuncs: []fuzzer.FuzzerFuncs{fuzzerFuncs},
		ConvertHubToSpokeFunc: ConvertOVirtProviderHubToSpoke, ConvertSpokeToHubFunc: ConvertOVirtProviderSpokeToHub,
		// OVirtProviders carry no conversion-data annotation: the round trip must hold without it.
		SkipSpokeAnnotationCleanup: true,
	}))
}

var when = metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))

// TestMachineConversionSemantics pins the meaning of the mapping, not just its reversibility.
func TestMachineConversionSemantics(t *testing.T) {
	ctx := context.Background()
	spoke := &infrav1beta1.OVirtMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"},
		Spec:       infrav1beta1.OVirtMachineSpec{ProviderID: ptr("ovirt://0b0e6c1a-2f4e-4d38-9d51-0c5d1b1f6e01")},
		Status: infrav1beta1.OVirtMachineStatus{
			Ready:          true,
			Addresses:      []infrav1beta1.MachineAddress{{Type: infrav1beta1.MachineInternalIP, Address: "10.0.0.5"}},
			FailureReason:  ptr(infrav1beta1.VMDeletedOutOfBandFailure),
			FailureMessage: ptr("the VM was removed"),
			Conditions: infrav1beta1.Conditions{{
				Type: infrav1beta1.MachineOnCondition, Status: corev1.ConditionFalse, Severity: infrav1beta1.ConditionSeverityInfo,
				LastTransitionTime: when, Reason: infrav1beta1.VMPoweringUpReason, Message: "powering up",
			}},
			V1Beta2: &infrav1beta1.OVirtV1Beta2Status{Conditions: []metav1.Condition{{
				Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse, Reason: infrav1.VMDeletedOutOfBandFailure, LastTransitionTime: when,
			}}},
		},
	}
	hub := &infrav1.OVirtMachine{}
	if err := ConvertOVirtMachineSpokeToHub(ctx, spoke.DeepCopy(), hub); err != nil {
		t.Fatal(err)
	}
	if hub.Spec.ProviderID != *spoke.Spec.ProviderID {
		t.Errorf("providerID: got %q", hub.Spec.ProviderID)
	}
	if p := hub.Status.Initialization.Provisioned; p == nil || !*p {
		t.Errorf("ready=true must become initialization.provisioned=true, got %v", p)
	}
	if len(hub.Status.Conditions) != 1 || hub.Status.Conditions[0].Type != infrav1.ReadyCondition {
		t.Errorf("status.v1beta2.conditions must become status.conditions, got %+v", hub.Status.Conditions)
	}
	d := hub.Status.Deprecated
	if d == nil || d.V1Beta1 == nil || len(d.V1Beta1.Conditions) != 1 || d.V1Beta1.Conditions[0].Severity != clusterv1.ConditionSeverityInfo {
		t.Fatalf("status.conditions must move to status.deprecated.v1beta1.conditions with their severity, got %+v", d)
	}
	if *d.V1Beta1.FailureReason != infrav1beta1.VMDeletedOutOfBandFailure || *d.V1Beta1.FailureMessage != "the VM was removed" {
		t.Errorf("failure fields must move to status.deprecated.v1beta1, got %+v", d.V1Beta1)
	}
	if hub.Status.Addresses[0].Address != "10.0.0.5" || hub.Status.Addresses[0].Type != clusterv1.MachineInternalIP {
		t.Errorf("addresses: got %+v", hub.Status.Addresses)
	}
	if _, ok := hub.Annotations[DataAnnotation]; ok {
		t.Error("a hub object must never carry the conversion-data annotation")
	}

	// Down: provisioned=false is not expressible in v1beta1 (ready=false is "unset"); the
	// annotation keeps it, and a clear-failure patch made in v1beta1 is not undone by it.
	hub.Status.Initialization.Provisioned = ptr(false)
	back := &infrav1beta1.OVirtMachine{}
	if err := ConvertOVirtMachineHubToSpoke(ctx, hub.DeepCopy(), back); err != nil {
		t.Fatal(err)
	}
	if back.Status.Ready {
		t.Error("provisioned=false must read as ready=false")
	}
	if _, ok := back.Annotations[DataAnnotation]; !ok {
		t.Fatal("a v1beta1 OVirtMachine must carry the conversion-data annotation")
	}
	back.Status.FailureReason, back.Status.FailureMessage = nil, nil // the documented v1beta1 clear-failure patch
	again := &infrav1.OVirtMachine{}
	if err := ConvertOVirtMachineSpokeToHub(ctx, back, again); err != nil {
		t.Fatal(err)
	}
	if p := again.Status.Initialization.Provisioned; p == nil || *p {
		t.Errorf("the explicit provisioned=false must survive the v1beta1 round trip, got %v", p)
	}
	if again.Status.Deprecated != nil && again.Status.Deprecated.V1Beta1 != nil && again.Status.Deprecated.V1Beta1.FailureReason != nil {
		t.Error("clearing failureReason in v1beta1 must clear it in v1beta2; the annotation must not bring it back")
	}
}

// TestProviderConversionCarriesNoAnnotation: an OVirtProvider's spec may hold a password and a
// CA bundle larger than the 256 KiB annotation limit; it is never copied into an annotation.
func TestProviderConversionCarriesNoAnnotation(t *testing.T) {
	ctx := context.Background()
	hub := &infrav1.OVirtProvider{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: infrav1.OVirtProviderSpec{
			Engine: "https://engine/ovirt-engine/api", User: "admin@internal", Pass: "s3cret-password",
			TLS: &infrav1.OVirtProviderTLS{Certs: strings.Repeat("QUJD", 200000)},
		},
		Status: infrav1.OVirtProviderStatus{
			Conditions: []metav1.Condition{{Type: infrav1.ReadyCondition, Status: metav1.ConditionTrue, Reason: infrav1.ReadyReason, LastTransitionTime: when}},
			Deprecated: &infrav1.OVirtProviderDeprecatedStatus{V1Beta1: &infrav1.OVirtProviderV1Beta1DeprecatedStatus{Ready: true}},
		},
	}
	spoke := &infrav1beta1.OVirtProvider{}
	if err := ConvertOVirtProviderHubToSpoke(ctx, hub, spoke); err != nil {
		t.Fatal(err)
	}
	if len(spoke.Annotations) != 0 {
		t.Fatalf("OVirtProvider got annotations %v", keys(spoke.Annotations))
	}
	if !spoke.Status.Ready || spoke.Status.V1Beta2 == nil || spoke.Status.V1Beta2.Conditions[0].Type != infrav1.ReadyCondition {
		t.Errorf("ready and the metav1 conditions must reach v1beta1, got %+v", spoke.Status)
	}
	back := &infrav1.OVirtProvider{}
	if err := ConvertOVirtProviderSpokeToHub(ctx, spoke, back); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(hub, back) {
		t.Error("OVirtProvider did not round-trip")
	}
}

// TestProviderAllowedNamespacesRoundTripThroughV1Beta1: spec.allowedNamespaces exists only in
// v1beta2. A v1beta1 reader gets it in the conversion-data annotation, alone: never the
// password or the CA bundle of the same spec; writing the object back restores it.
func TestProviderAllowedNamespacesRoundTripThroughV1Beta1(t *testing.T) {
	ctx := context.Background()
	hub := &infrav1.OVirtProvider{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"team": "infra"}},
		Spec: infrav1.OVirtProviderSpec{
			Engine: "https://engine/ovirt-engine/api", User: "admin@internal", Pass: "s3cret-password",
			TLS: &infrav1.OVirtProviderTLS{Certs: strings.Repeat("QUJD", 200000)},
			AllowedNamespaces: &infrav1.OVirtProviderAllowedNamespaces{
				List:     []string{"team-a", "team-b"},
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"capov/ovirt-prod": "true"}},
			},
			OrphanedVMs:            infrav1.OrphanedVMsDelete,
			OrphanedVMsGracePeriod: &metav1.Duration{Duration: 36 * time.Hour},
		},
	}
	spoke := &infrav1beta1.OVirtProvider{}
	if err := ConvertOVirtProviderHubToSpoke(ctx, hub.DeepCopy(), spoke); err != nil {
		t.Fatal(err)
	}
	data, ok := spoke.Annotations[DataAnnotation]
	if !ok {
		t.Fatal("a v1beta1 OVirtProvider with spec.allowedNamespaces must carry the conversion-data annotation")
	}
	for _, secret := range []string{"s3cret-password", "admin@internal", "QUJDQUJD"} {
		if strings.Contains(data, secret) {
			t.Errorf("the annotation must hold only spec.allowedNamespaces, it holds %q", secret)
		}
	}
	if !strings.Contains(data, "team-a") || !strings.Contains(data, "capov/ovirt-prod") || !strings.Contains(data, `"orphanedVMs":"Delete"`) {
		t.Errorf("the annotation must hold spec.allowedNamespaces, got %s", data)
	}
	if len(data) > 1024 {
		t.Errorf("the annotation is %d bytes; it should be a small object", len(data))
	}
	if spoke.Annotations["team"] != "infra" || hub.Annotations[DataAnnotation] != "" {
		t.Error("the annotation goes into the v1beta1 object only, next to its own annotations")
	}
	back := &infrav1.OVirtProvider{}
	if err := ConvertOVirtProviderSpokeToHub(ctx, spoke, back); err != nil {
		t.Fatal(err)
	}
	if _, ok := back.Annotations[DataAnnotation]; ok {
		t.Error("a hub object must never carry the conversion-data annotation")
	}
	if !apiequality.Semantic.DeepEqual(hub, back) {
		t.Errorf("OVirtProvider did not round-trip: got %+v", back.Spec.AllowedNamespaces)
	}
	if _, ok := spoke.Annotations[DataAnnotation]; !ok {
		t.Error("up-conversion must not modify its input's annotations")
	}
}

// TestConvertersCoverEveryVersion: controller-runtime refuses a hub/spoke converter that misses
// a version of the scheme; this is what the webhook binary registers.
func TestConvertersCoverEveryVersion(t *testing.T) {
	s := testScheme(t)
	for name, c := range map[string]func(*runtime.Scheme) (any, error){
		"OVirtMachine":         wrap(OVirtMachineConverter()),
		"OVirtCluster":         wrap(OVirtClusterConverter()),
		"OVirtMachineTemplate": wrap(OVirtMachineTemplateConverter()),
		"OVirtProvider":        wrap(OVirtProviderConverter()),
	} {
		if _, err := c(s); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func wrap[T any](f func(*runtime.Scheme) (T, error)) func(*runtime.Scheme) (any, error) {
	return func(s *runtime.Scheme) (any, error) { return f(s) }
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// placedHub returns hub objects of the three contract kinds with every placement and addressing
// field set (v1beta2 only: failure domains, anti-affinity, affinity groups, the host, the NICs'
// IPAM pools and network settings, the endpoint's pool).
func placedHub() (*infrav1.OVirtCluster, *infrav1.OVirtMachine, *infrav1.OVirtMachineTemplate) {
	meta := metav1.ObjectMeta{Name: "n", Namespace: "ns", Annotations: map[string]string{"team": "infra"}}
	vm := infrav1.OVirtVMSpec{
		Provider: "ovirt-prod", OVirtCluster: "Default", Template: "rhcos-4.14",
		AntiAffinity: infrav1.AntiAffinityHard, AffinityGroups: []string{"db-spread", "rack-a"},
		// Addressing (v1beta2 only) on the first NIC; the second keeps DHCP.
		NICs: []infrav1.NIC{{
			VnicProfile:        "ovirtmgmt",
			AddressesFromPools: []infrav1.IPPoolReference{{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "nodes"}},
			Gateway:            "10.0.0.1", Nameservers: []string{"10.0.0.53"}, SearchDomains: []string{"example.org"},
			DeviceName: "ens3", DHCP4: ptr(false), DHCP6: ptr(true),
		}, {VnicProfile: "storage"}},
	}
	c := &infrav1.OVirtCluster{
		ObjectMeta: meta,
		Spec: infrav1.OVirtClusterSpec{
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.1.100", Port: 6443},
			Provider:             "ovirt-prod",
			FailureDomains: []infrav1.OVirtFailureDomain{
				{Name: "fd-1", OVirtCluster: "Cluster-1", StorageDomainName: "fast-1"},
				{Name: "fd-2", OVirtCluster: "Cluster-2", ControlPlane: ptr(false)},
			},
			ControlPlaneAntiAffinity:     infrav1.AntiAffinityNone,
			ControlPlaneEndpointFromPool: &infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "GlobalInClusterIPPool", Name: "vips"},
		},
		Status: infrav1.OVirtClusterStatus{
			FailureDomains: []clusterv1.FailureDomain{{Name: "fd-1", ControlPlane: ptr(true)}, {Name: "fd-2", ControlPlane: ptr(false)}},
			AffinityGroups: []infrav1.OVirtAffinityGroup{{
				Role: infrav1.AffinityGroupRoleControlPlane, Provider: "ovirt-prod", OVirtCluster: "Cluster-1", OVirtClusterID: "c1",
				Name: "capov-ns-n-control-plane", ID: "g1", Enforcing: true,
			}},
		},
	}
	m := &infrav1.OVirtMachine{
		ObjectMeta: meta,
		Spec:       infrav1.OVirtMachineSpec{OVirtVMSpec: vm, FailureDomain: "fd-1"},
		Status:     infrav1.OVirtMachineStatus{FailureDomain: "fd-1", Host: "host-7", AffinityGroups: []string{"capov-ns-n-control-plane", "db-spread"}},
	}
	tpl := &infrav1.OVirtMachineTemplate{
		ObjectMeta: meta,
		Spec:       infrav1.OVirtMachineTemplateSpec{Template: infrav1.OVirtMachineTemplateResource{Spec: *vm.DeepCopy()}},
	}
	return c, m, tpl
}

// TestPlacementRoundTripsThroughV1Beta1: the placement fields exist only in v1beta2. A v1beta1
// reader does not see them (they are not in its JSON), the conversion-data annotation carries
// them, and writing the object back as v1beta1 restores every one of them.
func TestPlacementRoundTripsThroughV1Beta1(t *testing.T) {
	ctx := context.Background()
	c, m, tpl := placedHub()
	hidden := []string{`"failureDomains"`, `"failureDomain"`, `"controlPlaneAntiAffinity"`, `"antiAffinity"`, `"affinityGroups"`, `"host-7"`, `"provider":"ovirt-prod","failureDomains"`}
	checkSpoke := func(t *testing.T, spoke any, annotations map[string]string, inAnnotation ...string) {
		t.Helper()
		cp := map[string]any{}
		b, err := json.Marshal(spoke)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &cp); err != nil {
			t.Fatal(err)
		}
		delete(cp, "metadata") // the annotation holds them, on purpose
		b, _ = json.Marshal(cp)
		for _, key := range hidden {
			if strings.Contains(string(b), key) {
				t.Errorf("the v1beta1 view shows %s: %s", key, b)
			}
		}
		data := annotations[DataAnnotation]
		for _, want := range inAnnotation {
			if !strings.Contains(data, want) {
				t.Errorf("the conversion-data annotation lacks %s: %s", want, data)
			}
		}
		if annotations["team"] != "infra" {
			t.Error("the object's own annotations must stay")
		}
	}

	t.Run("OVirtCluster", func(t *testing.T) {
		spoke := &infrav1beta1.OVirtCluster{}
		if err := ConvertOVirtClusterHubToSpoke(ctx, c.DeepCopy(), spoke); err != nil {
			t.Fatal(err)
		}
		checkSpoke(t, spoke, spoke.Annotations, `"failureDomains":[{"name":"fd-1"`, `"controlPlaneAntiAffinity":"None"`, `"provider":"ovirt-prod"`,
			`"failureDomains":[{"name":"fd-1","controlPlane":true}`, `"capov-ns-n-control-plane"`)
		back := &infrav1.OVirtCluster{}
		if err := ConvertOVirtClusterSpokeToHub(ctx, spoke, back); err != nil {
			t.Fatal(err)
		}
		if _, ok := back.Annotations[DataAnnotation]; ok {
			t.Error("a hub object must never carry the conversion-data annotation")
		}
		if !apiequality.Semantic.DeepEqual(c, back) {
			t.Errorf("OVirtCluster did not round-trip:\nwant %+v\ngot  %+v", c.Spec, back.Spec)
		}
	})
	t.Run("OVirtMachine", func(t *testing.T) {
		spoke := &infrav1beta1.OVirtMachine{}
		if err := ConvertOVirtMachineHubToSpoke(ctx, m.DeepCopy(), spoke); err != nil {
			t.Fatal(err)
		}
		checkSpoke(t, spoke, spoke.Annotations, `"failureDomain":"fd-1"`, `"antiAffinity":"Hard"`, `"affinityGroups":["db-spread","rack-a"]`, `"host":"host-7"`)
		back := &infrav1.OVirtMachine{}
		if err := ConvertOVirtMachineSpokeToHub(ctx, spoke, back); err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(m, back) {
			t.Errorf("OVirtMachine did not round-trip:\nwant %+v %+v\ngot  %+v %+v", m.Spec, m.Status, back.Spec, back.Status)
		}
	})
	t.Run("OVirtMachineTemplate", func(t *testing.T) {
		spoke := &infrav1beta1.OVirtMachineTemplate{}
		if err := ConvertOVirtMachineTemplateHubToSpoke(ctx, tpl.DeepCopy(), spoke); err != nil {
			t.Fatal(err)
		}
		checkSpoke(t, spoke, spoke.Annotations, `"antiAffinity":"Hard"`, `"affinityGroups":["db-spread","rack-a"]`)
		back := &infrav1.OVirtMachineTemplate{}
		if err := ConvertOVirtMachineTemplateSpokeToHub(ctx, spoke, back); err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(tpl, back) {
			t.Errorf("OVirtMachineTemplate did not round-trip:\nwant %+v\ngot  %+v", tpl.Spec, back.Spec)
		}
	})
}

// TestV1Beta1ObjectsWithoutAnnotationHaveNoPlacement: an object written by a v1beta1 client only
// (no conversion-data annotation) converts up with every placement field unset. An empty
// controlPlaneAntiAffinity means Soft to the manager (OrDefault), which is also what the CRD
// default gives the stored object when the API server reads it.
func TestV1Beta1ObjectsWithoutAnnotationHaveNoPlacement(t *testing.T) {
	ctx := context.Background()
	c := &infrav1.OVirtCluster{}
	if err := ConvertOVirtClusterSpokeToHub(ctx, &infrav1beta1.OVirtCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "ns"},
		Spec:       infrav1beta1.OVirtClusterSpec{ControlPlaneEndpoint: infrav1beta1.APIEndpoint{Host: "10.0.1.100", Port: 6443}},
	}, c); err != nil {
		t.Fatal(err)
	}
	if c.Spec.ControlPlaneAntiAffinity != "" || c.Spec.ControlPlaneAntiAffinity.OrDefault(infrav1.AntiAffinitySoft) != infrav1.AntiAffinitySoft {
		t.Errorf("controlPlaneAntiAffinity of a v1beta1 object: got %q, want empty (Soft)", c.Spec.ControlPlaneAntiAffinity)
	}
	if c.Spec.Provider != "" || c.Spec.FailureDomains != nil || c.Status.FailureDomains != nil || c.Status.AffinityGroups != nil {
		t.Errorf("a v1beta1 OVirtCluster got placement: %+v %+v", c.Spec, c.Status)
	}
	m := &infrav1.OVirtMachine{}
	if err := ConvertOVirtMachineSpokeToHub(ctx, &infrav1beta1.OVirtMachine{Spec: infrav1beta1.OVirtMachineSpec{OVirtVMSpec: infrav1beta1.OVirtVMSpec{Provider: "p"}}}, m); err != nil {
		t.Fatal(err)
	}
	if m.Spec.FailureDomain != "" || m.Spec.AntiAffinity != "" || m.Spec.AffinityGroups != nil ||
		m.Status.FailureDomain != "" || m.Status.Host != "" || m.Status.AffinityGroups != nil {
		t.Errorf("a v1beta1 OVirtMachine got placement: %+v %+v", m.Spec, m.Status)
	}
	tpl := &infrav1.OVirtMachineTemplate{}
	if err := ConvertOVirtMachineTemplateSpokeToHub(ctx, &infrav1beta1.OVirtMachineTemplate{}, tpl); err != nil {
		t.Fatal(err)
	}
	if tpl.Spec.Template.Spec.AntiAffinity != "" || tpl.Spec.Template.Spec.AffinityGroups != nil {
		t.Errorf("a v1beta1 OVirtMachineTemplate got placement: %+v", tpl.Spec.Template.Spec)
	}
}

// TestV1Beta1ChangesWinOverTheAnnotation: a v1beta1 client that changes what it can see
// changes it; the annotation restores only the fields v1beta1 has no place for.
func TestV1Beta1ChangesWinOverTheAnnotation(t *testing.T) {
	ctx := context.Background()
	_, m, _ := placedHub()
	spoke := &infrav1beta1.OVirtMachine{}
	if err := ConvertOVirtMachineHubToSpoke(ctx, m.DeepCopy(), spoke); err != nil {
		t.Fatal(err)
	}
	spoke.Spec.Template = "rhcos-4.15"
	back := &infrav1.OVirtMachine{}
	if err := ConvertOVirtMachineSpokeToHub(ctx, spoke, back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.Template != "rhcos-4.15" {
		t.Errorf("the v1beta1 change was undone: template %q", back.Spec.Template)
	}
	if back.Spec.FailureDomain != "fd-1" || back.Spec.AntiAffinity != infrav1.AntiAffinityHard || len(back.Spec.AffinityGroups) != 2 || back.Status.Host != "host-7" {
		t.Errorf("the v1beta2-only fields were lost: %+v %+v", back.Spec, back.Status)
	}
}

// vmContents is a VM spec with every field of the VM contents set.
func vmContents() infrav1.OVirtVMSpec {
	return infrav1.OVirtVMSpec{
		Provider: "ovirt-prod", OVirtCluster: "Default", Template: "rhcos-4.14",
		OSDisk: &infrav1.OSDisk{Format: infrav1.DiskFormatRaw, Preallocated: ptr(true)},
		DataDisks: []infrav1.DataDisk{{Name: "etcd", SizeGB: 20, StorageDomain: "fast", Interface: infrav1.DiskInterfaceVirtio,
			Format: infrav1.DiskFormatRaw, Preallocated: true, WipeAfterDelete: ptr(true)}},
		Tags:             []string{"backup-daily", "team-a"},
		CustomProperties: []infrav1.CustomProperty{{Name: "viodiskcache", Value: "writeback"}},
		HighAvailability: &infrav1.HighAvailability{Enabled: true, Priority: 50, LeaseStorageDomain: "fast",
			ResumeBehaviour: infrav1.ResumeBehaviourKill},
		Performance: &infrav1.Performance{CPUMode: infrav1.CPUModeHostPassthrough, AutoPinning: infrav1.AutoPinningAdjust,
			HugePagesKiB: infrav1.HugePages1Gi, IOThreads: 2, MultiQueues: ptr(true), Ballooning: ptr(false)},
		GPUs: []infrav1.GPU{{Type: infrav1.GPUTypeVGPU, MdevType: "nvidia-22", Count: 2}},
	}
}

// TestVMContentsRoundTripThroughV1Beta1: every field of the VM contents (v1beta2 only) survives
// a read and write by a v1beta1 client, and the v1beta1 view does not show it.
func TestVMContentsRoundTripThroughV1Beta1(t *testing.T) {
	ctx := context.Background()
	inAnnotation := []string{`"osDisk":{"format":"raw","preallocated":true}`, `"dataDisks":[{"name":"etcd"`, `"tags":["backup-daily","team-a"]`,
		`"customProperties":[{"name":"viodiskcache","value":"writeback"}]`, `"highAvailability":{"enabled":true,"priority":50`,
		`"performance":{"cpuMode":"HostPassthrough"`, `"gpus":[{"type":"VGPU","mdevType":"nvidia-22","count":2}]`}
	check := func(t *testing.T, spoke any, annotations map[string]string, want []string) {
		t.Helper()
		b, err := json.Marshal(spoke)
		if err != nil {
			t.Fatal(err)
		}
		view := map[string]any{}
		if err := json.Unmarshal(b, &view); err != nil {
			t.Fatal(err)
		}
		delete(view, "metadata")
		b, _ = json.Marshal(view)
		for _, key := range []string{`"osDisk"`, `"dataDisks"`, `"tags"`, `"customProperties"`, `"highAvailability"`, `"performance"`, `"createMissingTags"`, `"gpus"`, `"hostDevices"`} {
			if strings.Contains(string(b), key) {
				t.Errorf("the v1beta1 view shows %s: %s", key, b)
			}
		}
		for _, w := range want {
			if !strings.Contains(annotations[DataAnnotation], w) {
				t.Errorf("the conversion-data annotation lacks %s: %s", w, annotations[DataAnnotation])
			}
		}
	}
	t.Run("OVirtMachine", func(t *testing.T) {
		m := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"},
			Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: vmContents()},
			Status: infrav1.OVirtMachineStatus{DataDisks: []infrav1.DataDiskStatus{{Name: "etcd", ID: "d-1"}},
				HostDevices: []infrav1.HostDeviceStatus{{Host: "h1", HostID: "h-1", Name: "pci_0000_3b_00_0", Claim: "hdc-1"}}}}
		spoke := &infrav1beta1.OVirtMachine{}
		if err := ConvertOVirtMachineHubToSpoke(ctx, m.DeepCopy(), spoke); err != nil {
			t.Fatal(err)
		}
		check(t, spoke, spoke.Annotations, append(inAnnotation, `"dataDisks":[{"name":"etcd","id":"d-1"}]`, `"hostDevices":[{"host":"h1"`))
		back := &infrav1.OVirtMachine{}
		if err := ConvertOVirtMachineSpokeToHub(ctx, spoke, back); err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(m, back) {
			t.Errorf("OVirtMachine did not round-trip:\nwant %+v %+v\ngot  %+v %+v", m.Spec, m.Status, back.Spec, back.Status)
		}
	})
	t.Run("OVirtMachineTemplate", func(t *testing.T) {
		tpl := &infrav1.OVirtMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t"}}
		tpl.Spec.Template.Spec = vmContents()
		spoke := &infrav1beta1.OVirtMachineTemplate{}
		if err := ConvertOVirtMachineTemplateHubToSpoke(ctx, tpl.DeepCopy(), spoke); err != nil {
			t.Fatal(err)
		}
		check(t, spoke, spoke.Annotations, inAnnotation)
		back := &infrav1.OVirtMachineTemplate{}
		if err := ConvertOVirtMachineTemplateSpokeToHub(ctx, spoke, back); err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(tpl, back) {
			t.Errorf("OVirtMachineTemplate did not round-trip:\nwant %+v\ngot  %+v", tpl.Spec, back.Spec)
		}
	})
	t.Run("OVirtCluster", func(t *testing.T) {
		c := &infrav1.OVirtCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
			Spec: infrav1.OVirtClusterSpec{Tags: []string{"prod"}}}
		spoke := &infrav1beta1.OVirtCluster{}
		if err := ConvertOVirtClusterHubToSpoke(ctx, c.DeepCopy(), spoke); err != nil {
			t.Fatal(err)
		}
		check(t, spoke, spoke.Annotations, []string{`"tags":["prod"]`})
		back := &infrav1.OVirtCluster{}
		if err := ConvertOVirtClusterSpokeToHub(ctx, spoke, back); err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(c, back) {
			t.Errorf("OVirtCluster did not round-trip:\nwant %+v\ngot  %+v", c.Spec, back.Spec)
		}
	})
	t.Run("OVirtProvider", func(t *testing.T) {
		p := &infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: infrav1.OVirtProviderSpec{CreateMissingTags: ptr(true)}}
		spoke := &infrav1beta1.OVirtProvider{}
		if err := ConvertOVirtProviderHubToSpoke(ctx, p.DeepCopy(), spoke); err != nil {
			t.Fatal(err)
		}
		check(t, spoke, spoke.Annotations, []string{`"createMissingTags":true`})
		back := &infrav1.OVirtProvider{}
		if err := ConvertOVirtProviderSpokeToHub(ctx, spoke, back); err != nil {
			t.Fatal(err)
		}
		if back.Spec.CreateMissingTags == nil || !*back.Spec.CreateMissingTags {
			t.Errorf("spec.createMissingTags did not round-trip: %+v", back.Spec)
		}
	})
}
