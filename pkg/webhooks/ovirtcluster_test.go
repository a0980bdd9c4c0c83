package webhooks

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

func ovirtCluster(host string, port int32) *infrav1.OVirtCluster {
	return &infrav1.OVirtCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "my-cluster", Namespace: "default"},
		Spec:       infrav1.OVirtClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: host, Port: port}},
	}
}

func TestValidateOVirtClusterCreate(t *testing.T) {
	tests := []struct {
		name       string
		host       string
		port       int32
		wantErrors []string
	}{
		{"the product doc example is admitted", "10.0.1.100", 6443, nil},
		{"an empty endpoint is admitted (set later)", "", 0, nil},
		{"a host name is admitted", "api.my-cluster.example.com", 443, nil},
		{"port 65535 is admitted", "10.0.1.100", 65535, nil},
		{"port 0 with a host is refused", "10.0.1.100", 0, []string{"spec.controlPlaneEndpoint.port: Invalid value: 0: must be a TCP port between 1 and 65535, usually 6443"}},
		{"port 65536 is refused", "10.0.1.100", 65536, []string{"spec.controlPlaneEndpoint.port: Invalid value: 65536"}},
		{"a negative port is refused", "10.0.1.100", -1, []string{"spec.controlPlaneEndpoint.port"}},
		{"a port without a host is refused", "", 6443, []string{"spec.controlPlaneEndpoint.host: Required value: set the VIP or load-balancer address"}},
		{"a blank host is refused", "  ", 6443, []string{"spec.controlPlaneEndpoint.host: Required value"}},
		{"a URL as host is refused", "https://10.0.1.100", 6443, []string{`spec.controlPlaneEndpoint.host: Invalid value: "https://10.0.1.100": must be a bare host name or IP address`}},
		{"both mistakes are reported", "", 70000, []string{"spec.controlPlaneEndpoint.host", "spec.controlPlaneEndpoint.port"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			warnings, err := (&OVirtClusterWebhook{}).ValidateCreate(context.Background(), ovirtCluster(tt.host, tt.port))
			g.Expect(warnings).To(BeEmpty())
			g.Expect(causes(err)).To(HaveLen(len(tt.wantErrors)), "%v", err)
			for i, want := range tt.wantErrors {
				g.Expect(causes(err)[i]).To(ContainSubstring(want))
			}
		})
	}
}

func TestValidateOVirtClusterUpdate(t *testing.T) {
	tests := []struct {
		name     string
		old, new *infrav1.OVirtCluster
		wantErr  string
	}{
		{"setting the endpoint from empty is admitted", ovirtCluster("", 0), ovirtCluster("10.0.1.100", 6443), ""},
		{"setting an invalid endpoint from empty is refused", ovirtCluster("", 0), ovirtCluster("10.0.1.100", 0), "spec.controlPlaneEndpoint.port"},
		{"an unchanged endpoint is admitted", ovirtCluster("10.0.1.100", 6443), ovirtCluster("10.0.1.100", 6443), ""},
		{"changing the host is refused", ovirtCluster("10.0.1.100", 6443), ovirtCluster("10.0.1.101", 6443),
			"spec.controlPlaneEndpoint: Forbidden: cannot change once set (it is 10.0.1.100:6443)"},
		{"changing the port is refused", ovirtCluster("10.0.1.100", 6443), ovirtCluster("10.0.1.100", 443), "spec.controlPlaneEndpoint: Forbidden"},
		{"removing the endpoint is refused", ovirtCluster("10.0.1.100", 6443), ovirtCluster("", 0), "spec.controlPlaneEndpoint: Forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := (&OVirtClusterWebhook{}).ValidateUpdate(context.Background(), tt.old, tt.new)
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(causes(err)).To(ConsistOf(ContainSubstring(tt.wantErr)))
		})
	}
}
