package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// failureDomains returns failure domains named fd-1, fd-2, ... in the oVirt clusters
// Cluster-1, Cluster-2, ...
func failureDomains(n int) []infrav1.OVirtFailureDomain {
	out := make([]infrav1.OVirtFailureDomain, n)
	for i := range out {
		out[i] = infrav1.OVirtFailureDomain{Name: fmt.Sprintf("fd-%d", i+1), OVirtCluster: fmt.Sprintf("Cluster-%d", i+1)}
	}
	return out
}

// placedCluster is an OVirtCluster with placement fields.
func placedCluster(mutate ...func(*infrav1.OVirtCluster)) *infrav1.OVirtCluster {
	c := ovirtCluster("10.0.1.100", 6443)
	c.Spec.FailureDomains = failureDomains(2)
	c.Spec.ControlPlaneAntiAffinity = infrav1.AntiAffinitySoft
	for _, m := range mutate {
		m(c)
	}
	return c
}

func TestValidateOVirtClusterPlacement(t *testing.T) {
	tests := []struct {
		name         string
		mutate       func(*infrav1.OVirtCluster)
		wantErr      []string // substrings of the causes, in order
		wantWarnings []string
	}{
		{"two failure domains and Soft are admitted", nil, nil, nil},
		{"no failure domain and no policy are admitted", func(c *infrav1.OVirtCluster) {
			c.Spec.FailureDomains, c.Spec.ControlPlaneAntiAffinity = nil, ""
		}, nil, nil},
		{"every policy is admitted", func(c *infrav1.OVirtCluster) { c.Spec.ControlPlaneAntiAffinity = infrav1.AntiAffinityNone }, nil, nil},
		{"Hard is admitted", func(c *infrav1.OVirtCluster) { c.Spec.ControlPlaneAntiAffinity = infrav1.AntiAffinityHard }, nil, nil},
		{"a failure domain with a storage domain and controlPlane false is admitted", func(c *infrav1.OVirtCluster) {
			c.Spec.FailureDomains[1].StorageDomainName, c.Spec.FailureDomains[1].ControlPlane = "fast-ssd", ptr.To(false)
		}, nil, nil},
		{"a policy in the wrong case is refused with the valid values", func(c *infrav1.OVirtCluster) { c.Spec.ControlPlaneAntiAffinity = "soft" },
			[]string{`spec.controlPlaneAntiAffinity: Invalid value: "soft": must be one of None, Soft, Hard (case-sensitive); omit it for Soft, the default`}, nil},
		{"a repeated failure domain name is refused, naming both entries", func(c *infrav1.OVirtCluster) {
			c.Spec.FailureDomains = append(c.Spec.FailureDomains, infrav1.OVirtFailureDomain{Name: "fd-1", OVirtCluster: "Cluster-3"})
		}, []string{`spec.failureDomains[2].name: Duplicate value: "fd-1": failure domain names must be unique, and spec.failureDomains[0] has this name too: rename or remove one of them`}, nil},
		{"an empty failure domain name is refused", func(c *infrav1.OVirtCluster) { c.Spec.FailureDomains[0].Name = "" },
			[]string{"spec.failureDomains[0].name: Required value: set the failure domain name that Machines carry in spec.failureDomain, e.g. name: fd-1"}, nil},
		{"a failure domain name that is no DNS label is refused", func(c *infrav1.OVirtCluster) { c.Spec.FailureDomains[1].Name = "FD_2" },
			[]string{`spec.failureDomains[1].name: Invalid value: "FD_2": must be a lower case DNS label of at most 63 characters`}, nil},
		{"a failure domain without an oVirt cluster is refused", func(c *infrav1.OVirtCluster) { c.Spec.FailureDomains[1].OVirtCluster = " " },
			[]string{"spec.failureDomains[1].ovirtcluster: Required value: set the oVirt cluster the VMs of this failure domain are created in, e.g. ovirtcluster: Default"}, nil},
		{"33 failure domains are refused", func(c *infrav1.OVirtCluster) { c.Spec.FailureDomains = failureDomains(33) },
			[]string{"spec.failureDomains: Too many: 33: must have at most 32 items"}, nil},
		{"failure domains none of which takes the control plane are a warning", func(c *infrav1.OVirtCluster) {
			for i := range c.Spec.FailureDomains {
				c.Spec.FailureDomains[i].ControlPlane = ptr.To(false)
			}
		}, nil, []string{"no failure domain of spec.failureDomains allows control-plane machines (each sets controlPlane: false)"}},
		{"several mistakes are all reported", func(c *infrav1.OVirtCluster) {
			c.Spec.ControlPlaneAntiAffinity = "Strict"
			c.Spec.FailureDomains[1] = infrav1.OVirtFailureDomain{Name: "fd-1"}
		}, []string{"spec.controlPlaneAntiAffinity: Invalid value", "spec.failureDomains[1].name: Duplicate value", "spec.failureDomains[1].ovirtcluster: Required value"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := placedCluster()
			if tt.mutate != nil {
				tt.mutate(c)
			}
			warnings, err := (&OVirtClusterWebhook{}).ValidateCreate(context.Background(), c)
			g.Expect(causes(err)).To(HaveLen(len(tt.wantErr)), "%v", err)
			for i, want := range tt.wantErr {
				g.Expect(causes(err)[i]).To(ContainSubstring(want))
			}
			g.Expect(warnings).To(HaveLen(len(tt.wantWarnings)))
			for i, want := range tt.wantWarnings {
				g.Expect(warnings[i]).To(ContainSubstring(want))
			}
		})
	}
}

func TestEveryPlacementDenialSaysHowToFixIt(t *testing.T) {
	spec := infrav1.OVirtClusterSpec{ControlPlaneAntiAffinity: "x", FailureDomains: []infrav1.OVirtFailureDomain{{}, {Name: "X"}, {Name: "a"}, {Name: "a"}}}
	errs, _ := ValidateOVirtClusterPlacement(&spec, field.NewPath("spec"))
	NewWithT(t).Expect(errs).NotTo(BeEmpty())
	for _, e := range errs {
		NewWithT(t).Expect(containsAny(e.Detail, "set ", "omit", "remove", "rename", "must be")).
			To(BeTrue(), "%s has no fix: %q", e.Field, e.Detail)
	}
}

func TestValidateOVirtClusterProvider(t *testing.T) {
	tests := []struct {
		name         string
		provider     *infrav1.OVirtProvider
		spec         string
		wantErr      []string
		wantWarnings []string
	}{
		{"a provider that exists and allows the namespace is admitted", provider("ovirt-prod", allowing([]string{"default"}, nil)), "ovirt-prod", nil, nil},
		{"no provider is admitted (the machines' provider is used)", nil, "", nil, nil},
		{"a provider that does not allow the namespace is refused with the fix", provider("ovirt-prod", allowing([]string{"team-a"}, nil)), "ovirt-prod",
			[]string{"spec.provider: Forbidden: OVirtProvider ovirt-prod does not allow namespace default: its spec.allowedNamespaces.list is [team-a]; add default to that list"}, nil},
		{"a provider that does not exist yet is admitted with a warning", nil, "ovirt-new", nil,
			[]string{"OVirtProvider ovirt-new does not exist yet: the manager checks the failure domains and keeps the affinity groups of this cluster only once it does; " +
				"create the OVirtProvider (kubectl get capovp lists them), or correct spec.provider"}},
		{"a provider name with spaces is refused", nil, " ovirt-prod", []string{`spec.provider: Invalid value: " ovirt-prod": must be the name of a cluster-scoped OVirtProvider without spaces`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := []client.Object{namespace("default", nil)}
			if tt.provider != nil {
				objs = append(objs, tt.provider)
			}
			c := placedCluster(func(c *infrav1.OVirtCluster) { c.Spec.Provider = tt.spec })
			warnings, err := (&OVirtClusterWebhook{Reader: readerWithObjects(objs...)}).ValidateCreate(context.Background(), c)
			g.Expect(causes(err)).To(HaveLen(len(tt.wantErr)), "%v", err)
			for i, want := range tt.wantErr {
				g.Expect(causes(err)[i]).To(ContainSubstring(want))
			}
			g.Expect(warnings).To(HaveLen(len(tt.wantWarnings)))
			for i, want := range tt.wantWarnings {
				g.Expect(warnings[i]).To(ContainSubstring(want))
			}
		})
	}
}

func TestValidateOVirtClusterProviderFailsWhenItCannotBeRead(t *testing.T) {
	g := NewWithT(t)
	c := placedCluster(func(c *infrav1.OVirtCluster) { c.Spec.Provider = "ovirt-prod" })
	_, err := (&OVirtClusterWebhook{Reader: failingReader{}}).ValidateCreate(context.Background(), c)
	g.Expect(apierrors.IsInternalError(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(`reading OVirtProvider "ovirt-prod" (spec.provider): connection refused; retry the request`))
}

func TestValidateOVirtClusterUpdatePlacement(t *testing.T) {
	restricted := provider("ovirt-restricted", allowing([]string{"team-a"}, nil))
	tests := []struct {
		name         string
		old          func(*infrav1.OVirtCluster)
		update       func(*infrav1.OVirtCluster)
		wantErr      []string
		wantWarnings int
	}{
		{"adding a failure domain is admitted", nil, func(c *infrav1.OVirtCluster) { c.Spec.FailureDomains = failureDomains(3) }, nil, 0},
		{"removing the failure domains is admitted", nil, func(c *infrav1.OVirtCluster) { c.Spec.FailureDomains = nil }, nil, 0},
		{"changing the policy to Hard is admitted", nil, func(c *infrav1.OVirtCluster) { c.Spec.ControlPlaneAntiAffinity = infrav1.AntiAffinityHard }, nil, 0},
		{"a repeated failure domain name is refused on update too", nil, func(c *infrav1.OVirtCluster) {
			c.Spec.FailureDomains = append(c.Spec.FailureDomains, infrav1.OVirtFailureDomain{Name: "fd-2", OVirtCluster: "Cluster-3"})
		}, []string{`spec.failureDomains[2].name: Duplicate value: "fd-2"`}, 0},
		{"an invalid policy is refused on update", nil, func(c *infrav1.OVirtCluster) { c.Spec.ControlPlaneAntiAffinity = "hard" },
			[]string{`spec.controlPlaneAntiAffinity: Invalid value: "hard"`}, 0},
		{"placement admitted under older rules is not checked again while it does not change", func(c *infrav1.OVirtCluster) {
			c.Spec.FailureDomains[1].Name = "fd-1"
			c.Finalizers = []string{"x"}
		}, func(c *infrav1.OVirtCluster) { c.Finalizers = nil }, nil, 0},
		{"changing the provider to one that does not allow the namespace is refused", nil, func(c *infrav1.OVirtCluster) { c.Spec.Provider = "ovirt-restricted" },
			[]string{"spec.provider: Forbidden: OVirtProvider ovirt-restricted does not allow namespace default"}, 0},
		{"a provider that stopped allowing the namespace does not block other updates", func(c *infrav1.OVirtCluster) { c.Spec.Provider = "ovirt-restricted" },
			func(c *infrav1.OVirtCluster) { c.Labels = map[string]string{"a": "b"} }, nil, 0},
		{"changing the provider to one that does not exist yet is a warning", nil, func(c *infrav1.OVirtCluster) { c.Spec.Provider = "ovirt-new" }, nil, 1},
		{"the endpoint rule still holds next to a placement change", nil, func(c *infrav1.OVirtCluster) {
			c.Spec.ControlPlaneEndpoint.Port = 443
			c.Spec.FailureDomains = failureDomains(1)
		}, []string{"spec.controlPlaneEndpoint: Forbidden: cannot change once set"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			old := placedCluster()
			if tt.old != nil {
				tt.old(old)
			}
			obj := old.DeepCopy()
			tt.update(obj)
			w := &OVirtClusterWebhook{Reader: readerWithObjects(namespace("default", nil), restricted)}
			warnings, err := w.ValidateUpdate(context.Background(), old, obj)
			g.Expect(warnings).To(HaveLen(tt.wantWarnings))
			g.Expect(causes(err)).To(HaveLen(len(tt.wantErr)), "%v", err)
			for i, want := range tt.wantErr {
				g.Expect(causes(err)[i]).To(ContainSubstring(want))
			}
		})
	}
}

// capiCluster is the Cluster API Cluster my-cluster in default, whose infrastructure is the
// OVirtCluster infra.
func capiCluster(infra string, mutate ...func(*clusterv1.Cluster)) *clusterv1.Cluster {
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "my-cluster", Namespace: "default"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "OVirtCluster", Name: infra,
		}},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

// infraCluster is the OVirtCluster name in default with the failure domains fd-1 and fd-2.
func infraCluster(name string, mutate ...func(*infrav1.OVirtCluster)) *infrav1.OVirtCluster {
	c := placedCluster(func(c *infrav1.OVirtCluster) { c.Name = name })
	for _, m := range mutate {
		m(c)
	}
	return c
}

// inCluster labels a machine with the Cluster API cluster name and sets its failure domain.
func inCluster(cluster, fd string) func(*infrav1.OVirtMachine) {
	return func(m *infrav1.OVirtMachine) {
		if cluster != "" {
			m.Labels = map[string]string{clusterv1.ClusterNameLabel: cluster}
		}
		m.Spec.FailureDomain = fd
	}
}

const fdNotChecked = `spec.failureDomain "fd-1" is not checked: `

func TestOVirtMachineFailureDomainOnCreate(t *testing.T) {
	standard := []client.Object{capiCluster("my-ovirtcluster"), infraCluster("my-ovirtcluster")}
	tests := []struct {
		name         string
		objs         []client.Object
		obj          *infrav1.OVirtMachine
		wantErr      []string
		wantWarnings []string
	}{
		{"a failure domain of the OVirtCluster is admitted", standard, machine(inCluster("my-cluster", "fd-1")), nil, nil},
		{"a machine without a failure domain is admitted without lookups", nil, machine(inCluster("my-cluster", "")), nil, nil},
		{"a name the OVirtCluster does not define is refused with the valid names", standard, machine(inCluster("my-cluster", "fd-x")),
			[]string{`spec.failureDomain: Invalid value: "fd-x": is not a failure domain of OVirtCluster default/my-ovirtcluster; valid: fd-1, fd-2; ` +
				"use one of them in the Machine's spec.failureDomain (KubeadmControlPlane and MachineDeployments take them from the Cluster's status.failureDomains), " +
				"or add the failure domain to the OVirtCluster's spec.failureDomains"}, nil},
		{"a failure domain of an OVirtCluster without failure domains is refused", []client.Object{
			capiCluster("my-ovirtcluster"), infraCluster("my-ovirtcluster", func(c *infrav1.OVirtCluster) { c.Spec.FailureDomains = nil }),
		}, machine(inCluster("my-cluster", "fd-1")),
			[]string{`spec.failureDomain: Invalid value: "fd-1": is not a failure domain of OVirtCluster default/my-ovirtcluster; valid: none (the OVirtCluster declares no spec.failureDomains)`}, nil},
		{"a machine without the cluster-name label is admitted with a warning", standard, machine(inCluster("", "fd-1")), nil,
			[]string{fdNotChecked + "the OVirtMachine has no cluster.x-k8s.io/cluster-name label to find its Cluster by (Cluster API sets it on the machines it creates); " +
				"the manager checks it before it creates the VM (MachineCreated reports FailureDomainNotFound when the OVirtCluster does not define it)"}},
		{"a machine whose Cluster does not exist yet is admitted with a warning", standard, machine(inCluster("other", "fd-1")), nil,
			[]string{fdNotChecked + "Cluster default/other does not exist (yet)"}},
		{"the Cluster is looked up in the machine's namespace", standard, machine(inCluster("my-cluster", "fd-1"), func(m *infrav1.OVirtMachine) { m.Namespace = "team-b" }), nil,
			[]string{fdNotChecked + "Cluster team-b/my-cluster does not exist (yet)"}},
		{"a Cluster without an infrastructureRef is admitted with a warning", []client.Object{
			capiCluster("", func(c *clusterv1.Cluster) { c.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{} }),
		}, machine(inCluster("my-cluster", "fd-1")), nil,
			[]string{fdNotChecked + "Cluster default/my-cluster does not name an OVirtCluster in spec.infrastructureRef (yet)"}},
		{"a Cluster of another infrastructure provider is admitted with a warning", []client.Object{
			capiCluster("x", func(c *clusterv1.Cluster) { c.Spec.InfrastructureRef.Kind = "DockerCluster" }),
		}, machine(inCluster("my-cluster", "fd-1")), nil,
			[]string{fdNotChecked + "Cluster default/my-cluster does not name an OVirtCluster"}},
		{"a machine whose OVirtCluster does not exist yet is admitted with a warning", []client.Object{capiCluster("my-ovirtcluster")},
			machine(inCluster("my-cluster", "fd-1")), nil, []string{fdNotChecked + "OVirtCluster default/my-ovirtcluster does not exist (yet)"}},
		{"the VM spec rules still apply next to the failure domain", standard, machine(inCluster("my-cluster", "fd-x"), func(m *infrav1.OVirtMachine) {
			m.Spec.AntiAffinity = "soft"
		}), []string{`spec.antiAffinity: Invalid value: "soft"`, `spec.failureDomain: Invalid value: "fd-x"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := &OVirtMachineWebhook{Reader: readerWith(provider("ovirt-prod")), Clusters: readerWithObjects(tt.objs...)}
			if tt.objs == nil {
				w.Clusters = failingReader{}
			}
			warnings, err := w.ValidateCreate(context.Background(), tt.obj)
			g.Expect(causes(err)).To(HaveLen(len(tt.wantErr)), "%v", err)
			for i, want := range tt.wantErr {
				g.Expect(causes(err)[i]).To(ContainSubstring(want))
			}
			g.Expect(warnings).To(HaveLen(len(tt.wantWarnings)), "%v", warnings)
			for i, want := range tt.wantWarnings {
				g.Expect(warnings[i]).To(ContainSubstring(want))
			}
		})
	}
}

func TestOVirtMachineFailureDomainLookupErrors(t *testing.T) {
	m := machine(inCluster("my-cluster", "fd-1"))
	t.Run("a Cluster that cannot be read fails the request with a retry hint", func(t *testing.T) {
		g := NewWithT(t)
		w := &OVirtMachineWebhook{Reader: readerWith(provider("ovirt-prod")), Clusters: failingReader{}}
		_, err := w.ValidateCreate(context.Background(), m.DeepCopy())
		g.Expect(apierrors.IsInternalError(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("reading Cluster default/my-cluster to check spec.failureDomain: connection refused; retry the request"))
	})
	t.Run("an OVirtCluster that cannot be read fails the request with a retry hint", func(t *testing.T) {
		g := NewWithT(t)
		r := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(capiCluster("my-ovirtcluster")).
			WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*infrav1.OVirtCluster); ok {
					return errors.New("connection refused")
				}
				return c.Get(ctx, key, obj, opts...)
			}}).Build()
		w := &OVirtMachineWebhook{Reader: readerWith(provider("ovirt-prod")), Clusters: r}
		_, err := w.ValidateCreate(context.Background(), m.DeepCopy())
		g.Expect(apierrors.IsInternalError(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("reading OVirtCluster default/my-ovirtcluster to check spec.failureDomain: connection refused; retry the request"))
	})
	t.Run("a management cluster without the Cluster API CRDs admits with a warning", func(t *testing.T) {
		g := NewWithT(t)
		r := fake.NewClientBuilder().WithScheme(testScheme()).
			WithInterceptorFuncs(interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: clusterv1.GroupVersion.Group, Kind: "Cluster"}, SearchedVersions: []string{"v1beta2"}}
			}}).Build()
		w := &OVirtMachineWebhook{Reader: readerWith(provider("ovirt-prod")), Clusters: r}
		warnings, err := w.ValidateCreate(context.Background(), m.DeepCopy())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(warnings).To(ConsistOf(ContainSubstring(fdNotChecked + "Cluster default/my-cluster does not exist (yet)")))
	})
	t.Run("a webhook without a Cluster reader admits with a warning", func(t *testing.T) {
		g := NewWithT(t)
		w := &OVirtMachineWebhook{Reader: readerWith(provider("ovirt-prod"))}
		warnings, err := w.ValidateCreate(context.Background(), m.DeepCopy())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(warnings).To(ConsistOf(ContainSubstring(fdNotChecked + "the webhook has no reader for Clusters and OVirtClusters")))
	})
}

func TestOVirtMachineFailureDomainOnUpdate(t *testing.T) {
	tests := []struct {
		name         string
		old          func(*infrav1.OVirtMachine)
		update       func(*infrav1.OVirtMachine)
		reader       client.Reader // default: my-cluster -> my-ovirtcluster with fd-1, fd-2
		wantErr      []string
		wantWarnings int
	}{
		{"the manager setting it from empty is admitted", inCluster("my-cluster", ""), inCluster("my-cluster", "fd-2"), nil, nil, 0},
		{"the manager setting it with the providerID is admitted", inCluster("my-cluster", ""), func(m *infrav1.OVirtMachine) {
			inCluster("my-cluster", "fd-1")(m)
			withProviderID(vmUUID)(m)
		}, nil, nil, 0},
		{"setting it from empty to a name the OVirtCluster does not define is refused", inCluster("my-cluster", ""), inCluster("my-cluster", "fd-x"), nil,
			[]string{`spec.failureDomain: Invalid value: "fd-x": is not a failure domain of OVirtCluster default/my-ovirtcluster; valid: fd-1, fd-2`}, 0},
		{"setting it from empty while the OVirtCluster is missing is admitted with a warning", inCluster("my-cluster", ""), inCluster("my-cluster", "fd-1"),
			readerWithObjects(capiCluster("my-ovirtcluster")), nil, 1},
		{"changing it is refused", inCluster("my-cluster", "fd-1"), inCluster("my-cluster", "fd-2"), nil,
			[]string{`spec.failureDomain: Forbidden: cannot change or be removed once set (it is "fd-1"): the VM is placed in that failure domain; keep "fd-1", ` +
				"or delete this machine so that Cluster API replaces it in another failure domain"}, 0},
		{"removing it is refused", inCluster("my-cluster", "fd-1"), inCluster("my-cluster", ""), nil, []string{"spec.failureDomain: Forbidden: cannot change or be removed once set"}, 0},
		{"an unchanged failure domain is not looked up again (the finalizer can go)", inCluster("my-cluster", "fd-gone"),
			func(m *infrav1.OVirtMachine) { m.Finalizers = nil }, failingReader{}, nil, 0},
		{"changing antiAffinity is refused", nil, func(m *infrav1.OVirtMachine) { m.Spec.AntiAffinity = infrav1.AntiAffinityHard }, nil,
			[]string{"spec.antiAffinity: Forbidden: the spec of an OVirtMachine cannot change after create: change the OVirtMachineTemplate instead"}, 0},
		{"changing affinityGroups is refused", func(m *infrav1.OVirtMachine) { m.Spec.AffinityGroups = []string{"a"} },
			func(m *infrav1.OVirtMachine) { m.Spec.AffinityGroups = []string{"a", "b"} }, nil,
			[]string{"spec.affinityGroups: Forbidden: the spec of an OVirtMachine cannot change after create"}, 0},
		{"an empty and an omitted affinity group list are the same", func(m *infrav1.OVirtMachine) { m.Spec.AffinityGroups = nil },
			func(m *infrav1.OVirtMachine) { m.Spec.AffinityGroups = []string{} }, nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			old := machine()
			if tt.old != nil {
				tt.old(old)
			}
			old.Finalizers = []string{infrav1.MachineFinalizer}
			obj := old.DeepCopy()
			tt.update(obj)
			r := tt.reader
			if r == nil {
				r = readerWithObjects(capiCluster("my-ovirtcluster"), infraCluster("my-ovirtcluster"))
			}
			warnings, err := (&OVirtMachineWebhook{Reader: readerWith(provider("ovirt-prod")), Clusters: r}).ValidateUpdate(context.Background(), old, obj)
			g.Expect(warnings).To(HaveLen(tt.wantWarnings))
			g.Expect(causes(err)).To(HaveLen(len(tt.wantErr)), "%v", err)
			for i, want := range tt.wantErr {
				g.Expect(causes(err)[i]).To(ContainSubstring(want))
			}
		})
	}
}

func TestOVirtMachineTemplatePlacement(t *testing.T) {
	w := &OVirtMachineTemplateWebhook{Reader: readerWith(provider("ovirt-prod"))}
	t.Run("valid placement is admitted", func(t *testing.T) {
		g := NewWithT(t)
		_, err := w.ValidateCreate(context.Background(), machineTemplate(func(t *infrav1.OVirtMachineTemplate) {
			t.Spec.Template.Spec.AntiAffinity, t.Spec.Template.Spec.AffinityGroups = infrav1.AntiAffinitySoft, []string{"db-spread"}
		}))
		g.Expect(err).NotTo(HaveOccurred())
	})
	t.Run("invalid placement is refused under spec.template.spec", func(t *testing.T) {
		g := NewWithT(t)
		_, err := w.ValidateCreate(context.Background(), machineTemplate(func(t *infrav1.OVirtMachineTemplate) {
			t.Spec.Template.Spec.AntiAffinity, t.Spec.Template.Spec.AffinityGroups = "Always", []string{"a", "a"}
		}))
		g.Expect(causes(err)).To(ConsistOf(
			ContainSubstring(`spec.template.spec.antiAffinity: Invalid value: "Always": must be one of None, Soft, Hard`),
			ContainSubstring(`spec.template.spec.affinityGroups[1]: Duplicate value: "a"`)))
	})
	t.Run("a group in CAPOV's own naming pattern is refused: another cluster's anti-affinity group is never joined by name", func(t *testing.T) {
		g := NewWithT(t)
		_, err := w.ValidateCreate(context.Background(), machineTemplate(func(t *infrav1.OVirtMachineTemplate) {
			t.Spec.Template.Spec.AffinityGroups = []string{"db-spread", "capov-payments-prod-control-plane-Default"}
		}))
		g.Expect(causes(err)).To(ConsistOf(ContainSubstring(
			`spec.template.spec.affinityGroups[1]: Invalid value: "capov-payments-prod-control-plane-Default": names starting with "capov-" are the anti-affinity groups CAPOV creates for clusters`)))
	})
	t.Run("a change of the placement is refused like every change", func(t *testing.T) {
		g := NewWithT(t)
		old := machineTemplate()
		obj := old.DeepCopy()
		obj.Spec.Template.Spec.AntiAffinity, obj.Spec.Template.Spec.AffinityGroups = infrav1.AntiAffinityHard, []string{"a"}
		ctx := admission.NewContextWithRequest(context.Background(), request(t, admissionv1.Update, obj, old, false))
		_, err := w.ValidateUpdate(ctx, old, obj)
		g.Expect(causes(err)).To(ConsistOf(
			ContainSubstring("spec.template.spec.antiAffinity: Forbidden: an OVirtMachineTemplate cannot change"),
			ContainSubstring("spec.template.spec.affinityGroups: Forbidden: an OVirtMachineTemplate cannot change")))
	})
}

func TestOVirtMachineFailureDomainThroughTheHandler(t *testing.T) {
	w := &OVirtMachineWebhook{Reader: readerWith(provider("ovirt-prod")), Clusters: readerWithObjects(capiCluster("my-ovirtcluster"), infraCluster("my-ovirtcluster"))}
	validate := admission.WithValidator(testScheme(), admission.Validator[*infrav1.OVirtMachine](w))
	t.Run("a denial is a 422 naming the field and the valid names", func(t *testing.T) {
		g := NewWithT(t)
		resp := validate.Handle(context.Background(), request(t, admissionv1.Create, machine(inCluster("my-cluster", "fd-x")), nil, false))
		g.Expect(resp.Allowed).To(BeFalse())
		g.Expect(resp.Result.Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
		g.Expect(resp.Result.Message).To(ContainSubstring(`spec.failureDomain: Invalid value: "fd-x": is not a failure domain of OVirtCluster default/my-ovirtcluster; valid: fd-1, fd-2`))
	})
	t.Run("an unchecked failure domain is admitted with the warning", func(t *testing.T) {
		g := NewWithT(t)
		resp := validate.Handle(context.Background(), request(t, admissionv1.Create, machine(inCluster("other", "fd-1")), nil, false))
		g.Expect(resp.Allowed).To(BeTrue())
		g.Expect(strings.Join(resp.Warnings, "\n")).To(ContainSubstring(fdNotChecked + "Cluster default/other does not exist (yet)"))
	})
}
