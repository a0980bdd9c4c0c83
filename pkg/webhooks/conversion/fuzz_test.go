package conversion

import (
	"context"
	"encoding/json"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// FuzzConvertV1Beta1JSON feeds the conversion what a client can send: any JSON that decodes
// into a v1beta1 OVirtMachine. It must convert without panicking, and converting the result
// back must give the same object (the conversion webhook answers every request, and loses
// nothing a v1beta1 client wrote).
func FuzzConvertV1Beta1JSON(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OVirtMachine","metadata":{"name":"m","namespace":"ns"},"spec":{"provider":"p","ovirtcluster":"Default","template":"rhcos-4.14","providerID":"ovirt://0b0e6c1a-2f4e-4d38-9d51-0c5d1b1f6e01"},"status":{"ready":true,"addresses":[{"type":"InternalIP","address":"10.0.0.5"}],"failureReason":"VMDeletedOutOfBand","conditions":[{"type":"Ready","status":"False","severity":"Error","lastTransitionTime":"2026-12-01T10:00:00Z","reason":"VMDeletedOutOfBand"}],"v1beta2":{"conditions":[{"type":"Ready","status":"False","reason":"VMDeletedOutOfBand","message":"","lastTransitionTime":"2026-12-01T10:00:00Z"}]}}}`,
		`{"metadata":{"annotations":{"cluster.x-k8s.io/conversion-data":"{\"status\":{\"initialization\":{\"provisioned\":false}}}"}},"spec":{"providerID":""}}`,
		`{"metadata":{"annotations":{"cluster.x-k8s.io/conversion-data":"not json"}}}`,
		`{"status":{"conditions":[],"v1beta2":{}}}`,
		`{"metadata":{"annotations":{"cluster.x-k8s.io/conversion-data":"{\"spec\":{\"failureDomain\":\"fd-1\",\"antiAffinity\":\"Hard\",\"affinityGroups\":[\"db-spread\"]},\"status\":{\"failureDomain\":\"fd-1\",\"host\":\"host-7\",\"affinityGroups\":[\"g\"]}}"}},"spec":{"provider":"p"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		in := &infrav1beta1.OVirtMachine{}
		if err := json.Unmarshal(data, in); err != nil {
			return
		}
		hub := &infrav1.OVirtMachine{}
		if err := ConvertOVirtMachineSpokeToHub(ctx, in.DeepCopy(), hub); err != nil {
			return // a broken conversion-data annotation is refused, not guessed
		}
		if _, ok := hub.Annotations[DataAnnotation]; ok {
			t.Fatal("the hub object kept the conversion-data annotation")
		}
		back := &infrav1beta1.OVirtMachine{}
		if err := ConvertOVirtMachineHubToSpoke(ctx, hub.DeepCopy(), back); err != nil {
			t.Fatalf("hub to v1beta1: %v", err)
		}
		again := &infrav1.OVirtMachine{}
		if err := ConvertOVirtMachineSpokeToHub(ctx, back, again); err != nil {
			t.Fatalf("v1beta1 to hub, second time: %v", err)
		}
		if !apiequality.Semantic.DeepEqual(hub, again) {
			t.Fatalf("the hub changed on a v1beta1 round trip:\n%+v\n%+v", hub, again)
		}
	})
}
