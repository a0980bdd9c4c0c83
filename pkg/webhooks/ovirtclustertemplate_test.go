package webhooks

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// clusterTemplate is an OVirtClusterTemplate as a ClusterClass uses it: no endpoint (a patch or
// the pool sets it), two failure domains, Soft anti-affinity.
func clusterTemplate(mutate ...func(*infrav1.OVirtClusterTemplate)) *infrav1.OVirtClusterTemplate {
	t := &infrav1.OVirtClusterTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtClusterTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: "ovirt", Namespace: "default"},
		Spec: infrav1.OVirtClusterTemplateSpec{Template: infrav1.OVirtClusterTemplateResource{Spec: infrav1.OVirtClusterSpec{
			Provider:                 "ovirt-prod",
			FailureDomains:           failureDomains(2),
			ControlPlaneAntiAffinity: infrav1.AntiAffinitySoft,
		}}},
	}
	for _, m := range mutate {
		m(t)
	}
	return t
}

func withEndpointPool(ref infrav1.IPPoolReference) func(*infrav1.OVirtClusterTemplate) {
	return func(t *infrav1.OVirtClusterTemplate) { t.Spec.Template.Spec.ControlPlaneEndpointFromPool = &ref }
}

func TestOVirtClusterTemplateValidateCreate(t *testing.T) {
	pool := infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "vips"}
	tests := []struct {
		name         string
		template     *infrav1.OVirtClusterTemplate
		wantErr      []string // substrings of the causes, in order
		wantWarnings []string
	}{
		{"a template without an endpoint is admitted (a ClusterClass patch sets it)", clusterTemplate(), nil, nil},
		{"a template with an endpoint is admitted", clusterTemplate(func(t *infrav1.OVirtClusterTemplate) {
			t.Spec.Template.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.1.100", Port: 6443}
		}), nil, nil},
		{"a template claiming the endpoint from a pool is admitted", clusterTemplate(withEndpointPool(pool)), nil, nil},
		{"a template claiming the endpoint from a pool with a port only is admitted", clusterTemplate(withEndpointPool(pool), func(t *infrav1.OVirtClusterTemplate) {
			t.Spec.Template.Spec.ControlPlaneEndpoint.Port = 443
		}), nil, nil},
		{"an endpoint port without a host is refused at the template path", clusterTemplate(func(t *infrav1.OVirtClusterTemplate) {
			t.Spec.Template.Spec.ControlPlaneEndpoint.Port = 6443
		}), []string{"spec.template.spec.controlPlaneEndpoint.host: Required value: set the VIP or load-balancer address"}, nil},
		{"a failure domain without an oVirt cluster is refused, naming the field", clusterTemplate(func(t *infrav1.OVirtClusterTemplate) {
			t.Spec.Template.Spec.FailureDomains[1].OVirtCluster = ""
		}), []string{"spec.template.spec.failureDomains[1].ovirtcluster: Required value: set the oVirt cluster"}, nil},
		{"a repeated failure domain is refused, naming the field", clusterTemplate(func(t *infrav1.OVirtClusterTemplate) {
			t.Spec.Template.Spec.FailureDomains[1].Name = "fd-1"
		}), []string{`spec.template.spec.failureDomains[1].name: Duplicate value: "fd-1"`}, nil},
		{"an unknown anti-affinity policy is refused, naming the field", clusterTemplate(func(t *infrav1.OVirtClusterTemplate) {
			t.Spec.Template.Spec.ControlPlaneAntiAffinity = "soft"
		}), []string{`spec.template.spec.controlPlaneAntiAffinity: Invalid value: "soft"`}, nil},
		{"a pool reference without a kind is refused, naming the field", clusterTemplate(withEndpointPool(infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Name: "vips"})),
			[]string{"spec.template.spec.controlPlaneEndpointFromPool.kind: Required value: set the kind of the IPAM pool"}, nil},
		{"a pool reference with an invalid name is refused, naming the field", clusterTemplate(withEndpointPool(infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "VIPs"})),
			[]string{`spec.template.spec.controlPlaneEndpointFromPool.name: Invalid value: "VIPs"`}, nil},
		{"failure domains none of which takes the control plane are a warning", clusterTemplate(func(t *infrav1.OVirtClusterTemplate) {
			for i := range t.Spec.Template.Spec.FailureDomains {
				t.Spec.Template.Spec.FailureDomains[i].ControlPlane = ptr.To(false)
			}
		}), nil, []string{"no failure domain of spec.failureDomains allows control-plane machines"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			warnings, err := (&OVirtClusterTemplateWebhook{}).ValidateCreate(context.Background(), tt.template)
			g.Expect(causes(err)).To(HaveLen(len(tt.wantErr)), "%v", err)
			for i, want := range tt.wantErr {
				g.Expect(causes(err)[i]).To(ContainSubstring(want))
			}
			if len(tt.wantErr) > 0 {
				g.Expect(err.Error()).To(ContainSubstring(`OVirtClusterTemplate.infrastructure.cluster.x-k8s.io "ovirt" is invalid`))
			}
			g.Expect(warnings).To(HaveLen(len(tt.wantWarnings)))
			for i, want := range tt.wantWarnings {
				g.Expect(warnings[i]).To(ContainSubstring(want))
			}
		})
	}
}

func TestOVirtClusterTemplateValidateUpdate(t *testing.T) {
	const fix = "an OVirtClusterTemplate cannot change: create a new OVirtClusterTemplate with the change and point the ClusterClass spec.infrastructure.templateRef at it"
	tests := []struct {
		name    string
		mutate  func(*infrav1.OVirtClusterTemplate)
		wantErr []string // substrings of the causes, in order
	}{
		{"re-applying the same spec is admitted", func(*infrav1.OVirtClusterTemplate) {}, nil},
		{"a label change is admitted", func(t *infrav1.OVirtClusterTemplate) { t.Labels = map[string]string{"team": "platform"} }, nil},
		{"an annotation, owner reference and finalizer change is admitted", func(t *infrav1.OVirtClusterTemplate) {
			t.Annotations = map[string]string{"argocd.argoproj.io/sync-wave": "1"}
			t.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "ClusterClass", Name: "ovirt", UID: "u1"}}
			t.Finalizers = []string{"example.com/keep"}
		}, nil},
		{"a provider change is refused, naming the field and the fix", func(t *infrav1.OVirtClusterTemplate) { t.Spec.Template.Spec.Provider = "ovirt-dr" },
			[]string{"spec.template.spec.provider: Forbidden: " + fix}},
		{"a new failure domain is refused", func(t *infrav1.OVirtClusterTemplate) {
			t.Spec.Template.Spec.FailureDomains = failureDomains(3)
		}, []string{"spec.template.spec.failureDomains: Forbidden"}},
		{"setting the endpoint is refused", func(t *infrav1.OVirtClusterTemplate) {
			t.Spec.Template.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.1.100", Port: 6443}
		}, []string{"spec.template.spec.controlPlaneEndpoint: Forbidden"}},
		{"a template metadata change is refused", func(t *infrav1.OVirtClusterTemplate) {
			t.Spec.Template.ObjectMeta.Labels = map[string]string{"a": "b"}
		}, []string{"spec.template.metadata: Forbidden: " + fix}},
		{"every changed field is reported", func(t *infrav1.OVirtClusterTemplate) {
			t.Spec.Template.Spec.ControlPlaneAntiAffinity = infrav1.AntiAffinityHard
			withEndpointPool(infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "vips"})(t)
		}, []string{"spec.template.spec.controlPlaneEndpointFromPool: Forbidden", "spec.template.spec.controlPlaneAntiAffinity: Forbidden"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			old, obj := clusterTemplate(), clusterTemplate()
			tt.mutate(obj)
			warnings, err := (&OVirtClusterTemplateWebhook{}).ValidateUpdate(context.Background(), old, obj)
			g.Expect(warnings).To(BeEmpty())
			g.Expect(causes(err)).To(HaveLen(len(tt.wantErr)), "%v", err)
			for i, want := range tt.wantErr {
				g.Expect(causes(err)[i]).To(ContainSubstring(want))
			}
		})
	}
}

func TestOVirtClusterTemplateValidateDeleteAllowsEveryDeletion(t *testing.T) {
	g := NewWithT(t)
	warnings, err := (&OVirtClusterTemplateWebhook{}).ValidateDelete(context.Background(), clusterTemplate())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(warnings).To(BeEmpty())
}
