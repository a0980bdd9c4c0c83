package provideraccess

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

func provider(allowed *infrav1.OVirtProviderAllowedNamespaces) *infrav1.OVirtProvider {
	return &infrav1.OVirtProvider{
		ObjectMeta: metav1.ObjectMeta{Name: "ovirt-prod"},
		Spec:       infrav1.OVirtProviderSpec{Engine: "https://ovirt.example.com/ovirt-engine/api", AllowedNamespaces: allowed},
	}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func selector(labels map[string]string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: labels}
}

func TestAllowed(t *testing.T) {
	prodLabel := map[string]string{"env": "prod"}
	tests := []struct {
		name      string
		allowed   *infrav1.OVirtProviderAllowedNamespaces
		namespace string
		wantOK    bool
		wantWhy   []string
	}{
		{"a provider without allowedNamespaces allows every namespace", nil, "team-a", true, nil},
		{"an empty allowedNamespaces allows every namespace", &infrav1.OVirtProviderAllowedNamespaces{}, "team-a", true, nil},
		{"an empty list without a selector allows every namespace", &infrav1.OVirtProviderAllowedNamespaces{List: []string{}}, "team-a", true, nil},
		{"a listed namespace is allowed", &infrav1.OVirtProviderAllowedNamespaces{List: []string{"team-a", "team-b"}}, "team-b", true, nil},
		{"a namespace not in the list is refused with the list and the fixes", &infrav1.OVirtProviderAllowedNamespaces{List: []string{"team-a", "team-b"}}, "team-c", false,
			[]string{"OVirtProvider ovirt-prod does not allow namespace team-c", "spec.allowedNamespaces.list is [team-a, team-b]", "add team-c to that list"}},
		{"the list compares whole names", &infrav1.OVirtProviderAllowedNamespaces{List: []string{"team-a"}}, "team-ab", false, []string{"team-ab"}},
		{"a namespace whose labels match the selector is allowed", &infrav1.OVirtProviderAllowedNamespaces{Selector: selector(prodLabel)}, "prod-1", true, nil},
		{"a namespace whose labels do not match the selector is refused", &infrav1.OVirtProviderAllowedNamespaces{Selector: selector(prodLabel)}, "dev-1", false,
			[]string{"does not allow namespace dev-1", `spec.allowedNamespaces.selector "env=prod"`, "label the namespace to match the selector"}},
		{"an empty selector matches every namespace", &infrav1.OVirtProviderAllowedNamespaces{Selector: &metav1.LabelSelector{}}, "dev-1", true, nil},
		{"with both, a listed namespace is allowed whatever its labels", &infrav1.OVirtProviderAllowedNamespaces{List: []string{"dev-1"}, Selector: selector(prodLabel)}, "dev-1", true, nil},
		{"with both, a namespace matching the selector is allowed without being listed", &infrav1.OVirtProviderAllowedNamespaces{List: []string{"dev-1"}, Selector: selector(prodLabel)}, "prod-1", true, nil},
		{"with both, a namespace in neither is refused and both are named", &infrav1.OVirtProviderAllowedNamespaces{List: []string{"dev-1"}, Selector: selector(prodLabel)}, "dev-2", false,
			[]string{`selector "env=prod" and it is not in spec.allowedNamespaces.list [dev-1]`}},
		{"a selector with match expressions is honoured", &infrav1.OVirtProviderAllowedNamespaces{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "staging"}}}}}, "prod-1", true, nil},
		{"a namespace that does not exist is refused", &infrav1.OVirtProviderAllowedNamespaces{Selector: selector(prodLabel)}, "gone", false,
			[]string{"does not allow namespace gone: the namespace does not exist"}},
		{"an invalid selector refuses every namespace outside the list and says to fix it", &infrav1.OVirtProviderAllowedNamespaces{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}}, "prod-1", false,
			[]string{"spec.allowedNamespaces.selector is invalid", "fix the selector of the provider"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
				WithObjects(namespace("prod-1", prodLabel), namespace("dev-1", map[string]string{"env": "dev"}), namespace("dev-2", nil)).Build()
			ok, why, err := Allowed(context.Background(), r, provider(tt.allowed), tt.namespace)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(Equal(tt.wantOK), why)
			if tt.wantOK {
				g.Expect(why).To(BeEmpty())
			}
			for _, w := range tt.wantWhy {
				g.Expect(why).To(ContainSubstring(w))
			}
		})
	}
}

// TestAllowedReadsTheNamespaceOnlyForASelector: the list alone decides without a read, so a
// provider restricted by names costs admission nothing and works without Namespace access.
func TestAllowedReadsTheNamespaceOnlyForASelector(t *testing.T) {
	g := NewWithT(t)
	reads := 0
	r := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(namespace("team-a", nil)).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads++
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	for _, a := range []*infrav1.OVirtProviderAllowedNamespaces{nil, {List: []string{"team-b"}}, {List: []string{"team-a"}, Selector: selector(map[string]string{"x": "y"})}} {
		_, _, err := Allowed(context.Background(), r, provider(a), "team-a")
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(reads).To(BeZero())
	_, _, err := Allowed(context.Background(), r, provider(&infrav1.OVirtProviderAllowedNamespaces{Selector: selector(map[string]string{"x": "y"})}), "team-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reads).To(Equal(1))
}

// TestAllowedFailsWhenTheNamespaceCannotBeRead: an unknown answer is an error (retry), never a
// guess in either direction.
func TestAllowedFailsWhenTheNamespaceCannotBeRead(t *testing.T) {
	g := NewWithT(t)
	r := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errors.New("connection refused")
		}}).Build()
	ok, why, err := Allowed(context.Background(), r, provider(&infrav1.OVirtProviderAllowedNamespaces{Selector: selector(map[string]string{"env": "prod"})}), "prod-1")
	g.Expect(err).To(MatchError(ContainSubstring("reading Namespace prod-1 to match the spec.allowedNamespaces.selector of OVirtProvider ovirt-prod: connection refused")))
	g.Expect(ok).To(BeFalse())
	g.Expect(why).To(BeEmpty())
}

func TestInUseMessage(t *testing.T) {
	tests := []struct {
		name  string
		users []string
		want  []string
		not   []string
	}{
		{"one machine is named in the singular", []string{"default/worker-a"},
			[]string{"1 OVirtMachine names OVirtProvider ovirt-prod in spec.provider: default/worker-a;", "delete them first"}, []string{"more"}},
		{"several machines are sorted", []string{"team-b/m", "default/worker-b", "default/worker-a"},
			[]string{"3 OVirtMachines name OVirtProvider ovirt-prod in spec.provider: default/worker-a, default/worker-b, team-b/m;"}, nil},
		{"more than ten machines are counted beyond the tenth", users(12),
			[]string{"12 OVirtMachines name", "ns/m00, ns/m01", "ns/m09 and 2 more;"}, []string{"ns/m10", "ns/m11"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := InUseMessage("ovirt-prod", tt.users)
			for _, w := range tt.want {
				g.Expect(got).To(ContainSubstring(w))
			}
			for _, n := range tt.not {
				g.Expect(got).NotTo(ContainSubstring(n))
			}
		})
	}
}

func users(n int) []string {
	out := make([]string, 0, n)
	for i := n - 1; i >= 0; i-- {
		out = append(out, fmt.Sprintf("ns/m%02d", i))
	}
	return out
}
