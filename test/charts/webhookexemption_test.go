package charts

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// managerExemption is the name of the matchCondition that lets the manager's own metadata
// updates through while the webhook is down (docs/webhook.md, "The manager's own writes").
const managerExemption = "not-a-metadata-update-by-the-capov-manager"

// webhookMatchConditions returns the matchConditions of every webhook of the Mutating- and
// ValidatingWebhookConfigurations among objs, by webhook name.
func webhookMatchConditions(t *testing.T, objs []*unstructured.Unstructured) map[string][]admissionregistrationv1.MatchCondition {
	t.Helper()
	out := map[string][]admissionregistrationv1.MatchCondition{}
	for _, o := range objs {
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			decodeStrict(t, o, c)
			for _, w := range c.Webhooks {
				out["mutating "+w.Name] = w.MatchConditions
			}
		case "ValidatingWebhookConfiguration":
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			decodeStrict(t, o, c)
			for _, w := range c.Webhooks {
				out["validating "+w.Name] = w.MatchConditions
			}
		}
	}
	return out
}

// TestEveryWebhookSkipsOnlyTheManagersMetadataUpdates checks the matchCondition in every place
// that installs the webhook configurations; test/integration (TestDeletionCompletesWhileTheWebhookIsDown)
// checks what the API server makes of it.
func TestEveryWebhookSkipsOnlyTheManagersMetadataUpdates(t *testing.T) {
	tests := []struct {
		name string
		objs func(t *testing.T) []*unstructured.Unstructured
		// user is the manager's ServiceAccount as the API server authenticates it.
		user string
	}{
		{"config/webhook/manifests.yaml (make generate)", func(t *testing.T) []*unstructured.Unstructured {
			return readObjects(t, "config/webhook/manifests.yaml")
		}, "system:serviceaccount:capov-system:capov-manager"},
		{"the clusterctl components (config/default)", func(t *testing.T) []*unstructured.Unstructured {
			objs, err := parseYAMLDocs([]byte(envsubst(t, string(kustomize(t)), nil)))
			if err != nil {
				t.Fatal(err)
			}
			return objs
		}, "system:serviceaccount:capov-system:capov-manager"},
		{"the chart in the Shturval namespace", func(t *testing.T) []*unstructured.Unstructured {
			return mustRender(t, nil).objs
		}, "system:serviceaccount:" + namespace + ":capov-manager"},
		{"the chart in another namespace names that namespace's ServiceAccount", func(t *testing.T) []*unstructured.Unstructured {
			r, err := renderInto(t, "capov", kubeVersion, "capov-other", nil, prerequisites...)
			if err != nil {
				t.Fatal(err)
			}
			return r.objs
		}, "system:serviceaccount:capov-other:capov-manager"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			byWebhook := webhookMatchConditions(t, tt.objs(t))
			g.Expect(byWebhook).To(HaveLen(7), "two mutating and five validating webhooks")
			for name, conditions := range byWebhook {
				g.Expect(conditions).To(HaveLen(1), name)
				c := conditions[0]
				g.Expect(c.Name).To(Equal(managerExemption), name)
				// Only the manager's ServiceAccount, only UPDATE, only when spec stays as it is.
				g.Expect(c.Expression).To(HavePrefix("!("), name)
				g.Expect(c.Expression).To(ContainSubstring("request.userInfo.username == '"+tt.user+"'"), name)
				g.Expect(c.Expression).To(ContainSubstring("request.operation == 'UPDATE'"), name)
				g.Expect(c.Expression).To(ContainSubstring("object.spec == oldObject.spec"), name)
				g.Expect(strings.Count(c.Expression, "system:serviceaccount:")).To(Equal(1), name)
			}
		})
	}
}
