package webhookload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/webhooks/conversion"
)

// ConvertPath is where the webhook server answers ConversionReviews.
const ConvertPath = "/convert"

// Direction is the conversion a ConversionReview asks for.
type Direction string

const (
	// ToV1Beta2 converts v1beta1 objects to the hub, as the API server does for every v1beta1
	// write.
	ToV1Beta2 Direction = "v1beta1->v1beta2"
	// ToV1Beta1 converts hub objects to v1beta1, as the API server does for every v1beta1 read.
	ToV1Beta1 Direction = "v1beta2->v1beta1"
)

// RunConversion drives /convert of a running webhook server at baseURL like Run drives
// admission: clients concurrent connections each send requests ConversionReviews of batch
// OVirtMachines (a list or watch of batch objects is one review) in direction dir, and every
// answer must convert every object to the desired version.
func RunConversion(ctx context.Context, baseURL string, caPEM []byte, dir Direction, clients, requests, batch int) (Result, error) {
	if clients < 1 || requests < 1 || batch < 1 {
		return Result{}, fmt.Errorf("clients (%d), requests (%d) and batch (%d) must be at least 1", clients, requests, batch)
	}
	httpClient, closeIdle, err := newHTTPClient(caPEM, clients)
	if err != nil {
		return Result{}, err
	}
	defer closeIdle()
	body, desired, err := conversionReview(dir, batch)
	if err != nil {
		return Result{}, err
	}
	url := strings.TrimRight(baseURL, "/") + ConvertPath
	return drive(ctx, clients, requests, func(c, i int, buf *bytes.Buffer) bool {
		uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", c, i)
		buf.Write(body.prefix)
		buf.WriteString(uid)
		buf.Write(body.suffix)
		return postConversion(ctx, httpClient, url, buf.Bytes(), uid, desired, batch)
	})
}

// postConversion sends one ConversionReview and reports whether the answer converted all batch
// objects to desired.
func postConversion(ctx context.Context, c *http.Client, url string, body []byte, uid, desired string, batch int) bool {
	out, ok := post(ctx, c, url, body)
	if !ok {
		return false
	}
	review := apiextensionsv1.ConversionReview{}
	if err := json.Unmarshal(out, &review); err != nil || review.Response == nil {
		return false
	}
	r := review.Response
	if string(r.UID) != uid || r.Result.Status != metav1.StatusSuccess || len(r.ConvertedObjects) != batch {
		return false
	}
	for _, o := range r.ConvertedObjects {
		var tm metav1.TypeMeta
		if err := json.Unmarshal(o.Raw, &tm); err != nil || tm.APIVersion != desired || tm.Kind != "OVirtMachine" {
			return false
		}
	}
	return true
}

// conversionReview builds a ConversionReview of batch OVirtMachines in the source version of
// dir, split around its UID, and returns the desired apiVersion.
func conversionReview(dir Direction, batch int) (reviewBody, string, error) {
	var objects []runtime.RawExtension
	var desired string
	for i := range batch {
		hub := RealisticMachine(fmt.Sprintf("prod-a-md-0-%05d", i))
		var obj any = hub
		switch dir {
		case ToV1Beta1:
			desired = infrav1beta1.GroupVersion.String()
		case ToV1Beta2:
			desired = infrav1.GroupVersion.String()
			// What a v1beta1 client writes back: the object as it read it, with the hub in the
			// conversion-data annotation.
			spoke := &infrav1beta1.OVirtMachine{}
			if err := conversion.ConvertOVirtMachineHubToSpoke(context.Background(), hub, spoke); err != nil {
				return reviewBody{}, "", err
			}
			spoke.TypeMeta = metav1.TypeMeta{APIVersion: infrav1beta1.GroupVersion.String(), Kind: "OVirtMachine"}
			obj = spoke
		default:
			return reviewBody{}, "", fmt.Errorf("unknown direction %q", dir)
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			return reviewBody{}, "", fmt.Errorf("encoding the OVirtMachine: %w", err)
		}
		objects = append(objects, runtime.RawExtension{Raw: raw})
	}
	review := apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: uidMarker, DesiredAPIVersion: desired, Objects: objects},
	}
	out, err := json.Marshal(review)
	if err != nil {
		return reviewBody{}, "", fmt.Errorf("encoding the ConversionReview: %w", err)
	}
	prefix, suffix, ok := bytes.Cut(out, []byte(uidMarker))
	if !ok {
		return reviewBody{}, "", errors.New("the request UID is not in the encoded ConversionReview")
	}
	return reviewBody{prefix: prefix, suffix: suffix}, desired, nil
}

// RealisticMachine is a provisioned worker OVirtMachine as the manager leaves it: labels and
// owner of a MachineDeployment, finalizer, defaulted spec, providerID, the conditions of a
// running VM in both formats, addresses and the VM facts.
func RealisticMachine(name string) *infrav1.OVirtMachine {
	now := metav1.NewTime(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	conds := []metav1.Condition{}
	// The deprecated v1beta1 conditions are part of the v1beta2 status until v1beta1 goes.
	v1beta1Conds := clusterv1.Conditions{} //nolint:staticcheck // status.deprecated.v1beta1.conditions
	for _, t := range []string{"Ready", "Paused", "CanConnectToOVirt", "MachineCreated", "MachineDiskResized", "MachineNetworkSet", "MachineOn", "K8sProviderIDSetup"} {
		status, reason := metav1.ConditionTrue, t
		if t == "Paused" {
			status, reason = metav1.ConditionFalse, "NotPaused"
		}
		conds = append(conds, metav1.Condition{Type: t, Status: status, Reason: reason, ObservedGeneration: 1, LastTransitionTime: now})
		v1beta1Conds = append(v1beta1Conds, clusterv1.Condition{Type: clusterv1.ConditionType(t), Status: "True", LastTransitionTime: now}) //nolint:staticcheck // as above
	}
	return &infrav1.OVirtMachine{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtMachine"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "prod-a", UID: "5c1b7d0e-2a3f-4c5d-8e9f-0a1b2c3d4e5f", ResourceVersion: "123456", Generation: 1,
			CreationTimestamp: now,
			Labels: map[string]string{
				"cluster.x-k8s.io/cluster-name": "prod-a", "cluster.x-k8s.io/deployment-name": "prod-a-md-0",
				"cluster.x-k8s.io/set-name": "prod-a-md-0-7d9f8", "machine-template-hash": "3859411232",
			},
			Annotations: map[string]string{"cluster.x-k8s.io/cloned-from-name": "prod-a-md-0", "cluster.x-k8s.io/cloned-from-groupkind": "OVirtMachineTemplate.infrastructure.cluster.x-k8s.io"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name,
				UID: "0d9c8b7a-6f5e-4d3c-2b1a-0f9e8d7c6b5a", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			Finalizers: []string{"ovirtmachine.infrastructure.cluster.x-k8s.io"},
		},
		Spec: infrav1.OVirtMachineSpec{
			OVirtVMSpec: infrav1.OVirtVMSpec{
				Provider: "ovirt-prod", OVirtCluster: "Default", Template: "rhcos-4.14", VMType: infrav1.VMTypeServer,
				DiskClone: ptr.To(true), StorageDomainName: "fast-ssd",
				CPU:          &infrav1.CPU{Sockets: 1, Cores: 4, Threads: 1},
				Memory:       &infrav1.Memory{SizeMB: 8192, GuaranteedMB: 4096},
				OSDiskSizeGB: 80,
				NICs:         []infrav1.NIC{{VnicProfile: "ovirtmgmt"}},
			},
			ProviderID: "ovirt://0b9c3c5e-3f2a-4b8e-9a57-2d1e6f0c1a11",
		},
		Status: infrav1.OVirtMachineStatus{
			Conditions:     conds,
			Initialization: infrav1.OVirtMachineInitializationStatus{Provisioned: ptr.To(true)},
			Addresses: []clusterv1.MachineAddress{
				{Type: clusterv1.MachineInternalIP, Address: "10.0.1.21"}, {Type: clusterv1.MachineHostName, Address: name},
			},
			VMID: "0b9c3c5e-3f2a-4b8e-9a57-2d1e6f0c1a11", VMName: name, VMState: "up", NodeName: name,
			Deprecated: &infrav1.DeprecatedStatus{V1Beta1: &infrav1.V1Beta1DeprecatedStatus{Conditions: v1beta1Conds}},
		},
	}
}
