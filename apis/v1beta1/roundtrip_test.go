package v1beta1

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capov/capov/apis/v1beta2"
)

func ptrTo[T any](v T) *T { return &v }

func fullVMSpec() OVirtVMSpec {
	return OVirtVMSpec{
		Provider: "ovirt-prod", OVirtCluster: "Default", Template: "rhcos-4.14", StorageDomainName: "fast",
		DiskClone: ptrTo(true), VMType: VMTypeHighPerformance,
		CPU:          &CPU{Sockets: 2, Cores: 4, Threads: 2},
		Memory:       &Memory{SizeMB: 8192, GuaranteedMB: 4096},
		OSDiskSizeGB: 80,
		NICs:         []NIC{{VnicProfile: "ovirtmgmt"}, {VnicProfile: "storage"}},
	}
}

func fullConditions() Conditions {
	return Conditions{{
		Type: MachineOnCondition, Status: corev1.ConditionFalse, Severity: ConditionSeverityInfo,
		LastTransitionTime: metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)),
		Reason:             VMPoweringUpReason, Message: "powering up",
	}}
}

func fullV1Beta2() *OVirtV1Beta2Status {
	return &OVirtV1Beta2Status{Conditions: []metav1.Condition{{
		Type: ReadyV1Beta2Condition, Status: metav1.ConditionFalse, Reason: VMPoweringUpReason, Message: "powering up",
		LastTransitionTime: metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)), ObservedGeneration: 3,
	}}}
}

// fullObjects returns one object of every kind with every field set, so that a field whose JSON
// tag or type breaks the round trip is caught.
func fullObjects() []runtime.Object {
	meta := metav1.ObjectMeta{Name: "n", Namespace: "ns", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}}
	return []runtime.Object{
		&OVirtProvider{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: OVirtProviderSpec{
				Engine: "https://e/ovirt-engine/api", CredentialsSecretName: "s", User: "u", Pass: "p",
				TLS:       &OVirtProviderTLS{Insecure: true, Cert: true, Certs: "Y2VydA=="},
				DiskClone: ptrTo(false), StorageDomainName: "data",
			},
			Status: OVirtProviderStatus{
				Ready: true, EngineVersion: "4.5.6", LastCheckTime: ptrTo(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))),
				FailureReason: ptrTo("r"), FailureMessage: ptrTo("m"), Conditions: fullConditions(), ObservedGeneration: 2,
			},
		},
		&OVirtCluster{
			ObjectMeta: meta,
			Spec:       OVirtClusterSpec{ControlPlaneEndpoint: APIEndpoint{Host: "10.0.1.100", Port: 6443}},
			Status: OVirtClusterStatus{
				Ready: true, FailureReason: ptrTo("r"), FailureMessage: ptrTo("m"),
				Conditions: fullConditions(), V1Beta2: fullV1Beta2(),
			},
		},
		&OVirtMachine{
			ObjectMeta: meta,
			Spec:       OVirtMachineSpec{OVirtVMSpec: fullVMSpec(), ProviderID: ptrTo("ovirt://abc")},
			Status: OVirtMachineStatus{
				Ready: true, Addresses: []MachineAddress{{Type: MachineInternalIP, Address: "10.0.0.1"}},
				VMID: "abc", VMState: "up", SystemDiskIDs: []string{"d1"}, DiskClone: ptrTo(true), NodeName: "node-1",
				FailureReason: ptrTo(OVirtEngineConnectionCriticalFailure), FailureMessage: ptrTo("m"),
				Conditions: fullConditions(), V1Beta2: fullV1Beta2(),
			},
		},
		&OVirtMachineTemplate{
			ObjectMeta: meta,
			Spec: OVirtMachineTemplateSpec{Template: OVirtMachineTemplateResource{
				ObjectMeta: ObjectMeta{Labels: map[string]string{"node.kubernetes.io/instance-type": "standard"}},
				Spec:       fullVMSpec(),
			}},
			Status: OVirtMachineTemplateStatus{Capacity: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("8Gi"),
			}},
		},
	}
}

func TestJSONRoundTripOfEveryKind(t *testing.T) {
	for _, obj := range fullObjects() {
		name := reflect.TypeOf(obj).Elem().Name()
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			back := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
			if err := json.Unmarshal(b, back); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(obj, back) {
				t.Fatalf("round trip changed the object:\n%s\n%+v", b, back)
			}
			// DeepCopy yields an equal, independent object.
			cp := obj.DeepCopyObject()
			if !equality.Semantic.DeepEqual(obj, cp) {
				t.Fatalf("DeepCopy differs")
			}
		})
	}
}

func TestJSONNamesMatchTheProductDoc(t *testing.T) {
	b, err := json.Marshal(fullVMSpec())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"provider"`, `"ovirtcluster"`, `"template"`, `"storagedomainname"`, `"diskclone"`, `"vmtype"`,
		`"cpu"`, `"sockets"`, `"cores"`, `"threads"`, `"memory"`, `"sizemb"`, `"guaranteedmb"`, `"osdisksizegb"`, `"nics"`, `"vnicprofile"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("OVirtMachine spec JSON lacks %s: %s", key, b)
		}
	}
	b, err = json.Marshal(fullObjects()[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"engine"`, `"credentialsSecretName"`, `"user"`, `"pass"`, `"tls"`, `"insecure"`, `"cert"`, `"certs"`, `"diskclone"`, `"storagedomainname"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("OVirtProvider JSON lacks %s: %s", key, b)
		}
	}
}

func TestSchemeKnowsEveryKind(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"OVirtProvider", "OVirtCluster", "OVirtMachine", "OVirtMachineTemplate",
		"OVirtProviderList", "OVirtClusterList", "OVirtMachineList", "OVirtMachineTemplateList"} {
		if !s.Recognizes(GroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not know %s", kind)
		}
	}
}

func TestCapacity(t *testing.T) {
	s := fullVMSpec()
	c := s.Capacity()
	if got := c.Cpu().Value(); got != 16 {
		t.Errorf("cpu = %d, want 2 sockets x 4 cores x 2 threads = 16", got)
	}
	if got := c.Memory().Value(); got != 8192*1024*1024 {
		t.Errorf("memory = %d, want 8 GiB", got)
	}
	if got := (&OVirtVMSpec{}).Capacity(); got != nil {
		t.Errorf("capacity of a spec that inherits cpu and memory = %v, want nil", got)
	}
}

func TestConditionAccessors(t *testing.T) {
	m := &OVirtMachine{}
	if m.GetV1Beta2Conditions() != nil {
		t.Fatal("empty machine has v1beta2 conditions")
	}
	m.SetV1Beta2Conditions(fullV1Beta2().Conditions)
	m.SetConditions(fullConditions())
	if len(m.GetV1Beta2Conditions()) != 1 || len(m.GetConditions()) != 1 {
		t.Fatal("accessors lost conditions")
	}
	c := &OVirtCluster{}
	c.SetV1Beta2Conditions(fullV1Beta2().Conditions)
	c.SetConditions(fullConditions())
	if len(c.GetV1Beta2Conditions()) != 1 || len(c.GetConditions()) != 1 {
		t.Fatal("accessors lost conditions")
	}
	p := &OVirtProvider{}
	p.SetConditions(fullConditions())
	if len(p.GetConditions()) != 1 {
		t.Fatal("accessors lost conditions")
	}
}

// TestPlacementIsV1Beta2Only: the placement fields of v1beta2 (failure domains, anti-affinity,
// affinity groups, the host) have no v1beta1 field. The conversion functions of this package
// drop them on the way down, leaving everything v1beta1 has as it was, and leave them unset on
// the way up; the conversion webhook (pkg/webhooks/conversion) restores them from the
// conversion-data annotation.
func TestPlacementIsV1Beta2Only(t *testing.T) {
	objs := fullObjects()
	cluster, machine, template := objs[1].(*OVirtCluster), objs[2].(*OVirtMachine), objs[3].(*OVirtMachineTemplate)
	placeVM := func(s *v1beta2.OVirtVMSpec) {
		s.AntiAffinity, s.AffinityGroups = v1beta2.AntiAffinityHard, []string{"db-spread"}
	}

	t.Run("OVirtCluster", func(t *testing.T) {
		hub := &v1beta2.OVirtCluster{}
		if err := Convert_v1beta1_OVirtCluster_To_v1beta2_OVirtCluster(cluster.DeepCopy(), hub, nil); err != nil {
			t.Fatal(err)
		}
		if hub.Spec.Provider != "" || hub.Spec.FailureDomains != nil || hub.Spec.ControlPlaneAntiAffinity != "" ||
			hub.Status.FailureDomains != nil || hub.Status.AffinityGroups != nil {
			t.Fatalf("up-conversion set placement fields: %+v %+v", hub.Spec, hub.Status)
		}
		hub.Spec.Provider, hub.Spec.ControlPlaneAntiAffinity = "ovirt-prod", v1beta2.AntiAffinityNone
		hub.Spec.FailureDomains = []v1beta2.OVirtFailureDomain{{Name: "fd-1", OVirtCluster: "Cluster-1", ControlPlane: ptrTo(true)}}
		hub.Status.FailureDomains = []clusterv1.FailureDomain{{Name: "fd-1", ControlPlane: ptrTo(true)}}
		hub.Status.AffinityGroups = []v1beta2.OVirtAffinityGroup{{Role: v1beta2.AffinityGroupRoleControlPlane, Provider: "ovirt-prod", OVirtCluster: "Cluster-1", Name: "g"}}
		down := &OVirtCluster{}
		if err := Convert_v1beta2_OVirtCluster_To_v1beta1_OVirtCluster(hub, down, nil); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(cluster, down) {
			t.Errorf("down-conversion changed what v1beta1 has:\n%+v\n%+v", cluster, down)
		}
	})
	t.Run("OVirtMachine", func(t *testing.T) {
		hub := &v1beta2.OVirtMachine{}
		if err := Convert_v1beta1_OVirtMachine_To_v1beta2_OVirtMachine(machine.DeepCopy(), hub, nil); err != nil {
			t.Fatal(err)
		}
		if hub.Spec.FailureDomain != "" || hub.Spec.AntiAffinity != "" || hub.Spec.AffinityGroups != nil ||
			hub.Status.FailureDomain != "" || hub.Status.Host != "" || hub.Status.AffinityGroups != nil {
			t.Fatalf("up-conversion set placement fields: %+v %+v", hub.Spec, hub.Status)
		}
		placeVM(&hub.Spec.OVirtVMSpec)
		hub.Spec.FailureDomain, hub.Status.FailureDomain, hub.Status.Host, hub.Status.AffinityGroups = "fd-1", "fd-1", "host-7", []string{"g"}
		down := &OVirtMachine{}
		if err := Convert_v1beta2_OVirtMachine_To_v1beta1_OVirtMachine(hub, down, nil); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(machine, down) {
			t.Errorf("down-conversion changed what v1beta1 has:\n%+v\n%+v", machine, down)
		}
	})
	t.Run("OVirtMachineTemplate", func(t *testing.T) {
		hub := &v1beta2.OVirtMachineTemplate{}
		if err := Convert_v1beta1_OVirtMachineTemplate_To_v1beta2_OVirtMachineTemplate(template.DeepCopy(), hub, nil); err != nil {
			t.Fatal(err)
		}
		if s := hub.Spec.Template.Spec; s.AntiAffinity != "" || s.AffinityGroups != nil {
			t.Fatalf("up-conversion set placement fields: %+v", s)
		}
		placeVM(&hub.Spec.Template.Spec)
		down := &OVirtMachineTemplate{}
		if err := Convert_v1beta2_OVirtMachineTemplate_To_v1beta1_OVirtMachineTemplate(hub, down, nil); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(template, down) {
			t.Errorf("down-conversion changed what v1beta1 has:\n%+v\n%+v", template, down)
		}
	})
}
