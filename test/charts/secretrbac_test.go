package charts

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capov/capov/test/harness"
)

// The manager reads two kinds of Secrets anywhere (the bootstrap data of each Machine, read
// uncached, and the <cluster>-kubeconfig of each Cluster, read by the ClusterCache's uncached
// Secret client) and caches, watches and patches only the OVirtProvider credentials Secrets of
// --credentials-namespace. Its RBAC says the same: get on Secrets in a ClusterRole, the rest in
// a Role of the credentials namespace.

// managerServiceAccount is the manager's ServiceAccount of a release in namespace ns.
func managerServiceAccount(ns string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "capov-manager", Namespace: ns}
}

// secretAccess is what a subject may do with Secrets through a set of RBAC objects: the verbs
// granted in every namespace and, per namespace, the verbs granted there (cluster-wide verbs
// included).
type secretAccess struct {
	clusterWide []string
	namespaced  map[string][]string
}

// secretVerbs returns the verbs of rules that reach every Secret (apiGroup "", resource
// secrets, no resourceNames), sorted; rules limited to some names are reported separately.
func secretVerbs(rules []rbacv1.PolicyRule) (verbs, limited []string) {
	for _, r := range rules {
		if !slices.Contains(r.APIGroups, "") && !slices.Contains(r.APIGroups, "*") {
			continue
		}
		if !slices.Contains(r.Resources, "secrets") && !slices.Contains(r.Resources, "*") {
			continue
		}
		if len(r.ResourceNames) > 0 {
			limited = append(limited, r.Verbs...)
			continue
		}
		verbs = append(verbs, r.Verbs...)
	}
	return sortedSet(verbs), sortedSet(limited)
}

func sortedSet(in []string) []string {
	out := slices.Clone(in)
	sort.Strings(out)
	return slices.Compact(out)
}

// secretAccessOf resolves the bindings of objs for subject.
func secretAccessOf(t *testing.T, objs []*unstructured.Unstructured, subject rbacv1.Subject) secretAccess {
	t.Helper()
	clusterRoles := map[string][]rbacv1.PolicyRule{}
	roles := map[string][]rbacv1.PolicyRule{} // namespace/name
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			decodeStrict(t, o, r)
			clusterRoles[r.Name] = r.Rules
		case "Role":
			r := &rbacv1.Role{}
			decodeStrict(t, o, r)
			roles[r.Namespace+"/"+r.Name] = r.Rules
		}
	}
	bound := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == subject.Kind && s.Name == subject.Name && s.Namespace == subject.Namespace
		})
	}
	var cluster []string
	namespaced := map[string][]string{}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			decodeStrict(t, o, b)
			if bound(b.Subjects) {
				verbs, limited := secretVerbs(clusterRoles[b.RoleRef.Name])
				if len(limited) > 0 {
					t.Fatalf("ClusterRole %s grants %v on Secrets of given names: not expected", b.RoleRef.Name, limited)
				}
				cluster = append(cluster, verbs...)
			}
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			decodeStrict(t, o, b)
			if !bound(b.Subjects) {
				continue
			}
			rules := roles[b.Namespace+"/"+b.RoleRef.Name]
			if b.RoleRef.Kind == "ClusterRole" {
				rules = clusterRoles[b.RoleRef.Name]
			}
			verbs, limited := secretVerbs(rules)
			if len(limited) > 0 {
				t.Fatalf("%s %s grants %v on Secrets of given names: not expected", b.RoleRef.Kind, b.RoleRef.Name, limited)
			}
			if len(verbs) > 0 {
				namespaced[b.Namespace] = append(namespaced[b.Namespace], verbs...)
			}
		}
	}
	out := secretAccess{clusterWide: sortedSet(cluster), namespaced: map[string][]string{}}
	for ns, verbs := range namespaced {
		out.namespaced[ns] = sortedSet(append(verbs, out.clusterWide...))
	}
	return out
}

func TestManagerReadsSecretsEverywhereAndWritesOnlyItsCredentials(t *testing.T) {
	fromChart := func(vals string) func(t *testing.T) []*unstructured.Unstructured {
		return func(t *testing.T) []*unstructured.Unstructured { return mustRender(t, values(t, vals)).objs }
	}
	tests := []struct {
		name        string
		objs        func(t *testing.T) []*unstructured.Unstructured
		credentials string
	}{
		{"the chart: credentials in the release namespace", fromChart(``), namespace},
		{"the chart: --credentials-namespace in extraArgs moves the Role", fromChart(`extraArgs: ["--debug=true", "--credentials-namespace=ovirt-credentials"]`), "ovirt-credentials"},
		{"the clusterctl components (config/default)", func(t *testing.T) []*unstructured.Unstructured {
			objs, err := parseYAMLDocs([]byte(envsubst(t, string(kustomize(t)), nil)))
			if err != nil {
				t.Fatal(err)
			}
			return objs
		}, namespace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := tt.objs(t)
			access := secretAccessOf(t, objs, managerServiceAccount(namespace))
			g.Expect(access.clusterWide).To(Equal([]string{"create", "get"}),
				"cluster-wide the manager reads single Secrets (bootstrap data, kubeconfigs) and creates each workload cluster's ownership key")
			g.Expect(access.namespaced).To(Equal(map[string][]string{
				tt.credentials: {"create", "delete", "get", "list", "patch", "update", "watch"},
			}), "the credentials namespace, and only it, lets the manager cache, watch and write Secrets (the move copies)")
			// No ClusterRole of the release, bound or not, grants more than get and create on
			// Secrets, and only the manager's creates.
			for _, o := range objs {
				if o.GetKind() != "ClusterRole" {
					continue
				}
				r := &rbacv1.ClusterRole{}
				decodeStrict(t, o, r)
				verbs, limited := secretVerbs(r.Rules)
				g.Expect(limited).To(BeEmpty(), r.Name)
				if strings.HasSuffix(r.Name, "manager-role") {
					g.Expect(verbs).To(Equal([]string{"create", "get"}), "ClusterRole %s", r.Name)
					continue
				}
				g.Expect(verbs).To(Or(BeEmpty(), Equal([]string{"get"})), "ClusterRole %s", r.Name)
			}
		})
	}
}

// TestManagerServiceAccountReadsButCannotWriteOtherSecrets installs the chart's RBAC into a real
// API server and acts as the manager's ServiceAccount with a token of its own: it reads a
// Secret of a workload cluster's namespace and creates one there (a cluster's ownership key) but
// may neither list, watch, change nor delete Secrets there, and it lists, watches, patches, creates and deletes those of its
// credentials namespace (the move copies of the credentials).
func TestManagerServiceAccountReadsButCannotWriteOtherSecrets(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g := NewWithT(t)
	c := e.Client

	// A release namespace of its own, and the cluster-scoped objects renamed after it, so that
	// nothing collides with the Helm install tests sharing this API server.
	releaseNS, workloadNS := "capov-rbac-test", "rbac-test-workload"
	for _, ns := range []string{releaseNS, workloadNS} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	r, err := renderInto(t, "capov", kubeVersion, releaseNS, nil, prerequisites...)
	g.Expect(err).NotTo(HaveOccurred())
	var applied []*unstructured.Unstructured
	t.Cleanup(func() {
		for _, o := range applied {
			_ = c.Delete(context.Background(), o)
		}
		for _, ns := range []string{releaseNS, workloadNS} {
			_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	})
	suffix := "-" + releaseNS
	for _, o := range r.objs {
		switch o.GetKind() {
		case "ClusterRole":
			o.SetName(o.GetName() + suffix)
		case "ClusterRoleBinding":
			o.SetName(o.GetName() + suffix)
			g.Expect(unstructured.SetNestedField(o.Object, o.Object["roleRef"].(map[string]any)["name"].(string)+suffix, "roleRef", "name")).To(Succeed())
		case "RoleBinding":
			if o.Object["roleRef"].(map[string]any)["kind"] == "ClusterRole" {
				g.Expect(unstructured.SetNestedField(o.Object, o.Object["roleRef"].(map[string]any)["name"].(string)+suffix, "roleRef", "name")).To(Succeed())
			}
		case "ServiceAccount", "Role":
		default:
			continue
		}
		g.Expect(c.Create(ctx, o)).To(Succeed(), o.GetKind()+"/"+o.GetName())
		applied = append(applied, o)
	}

	secret := func(ns, name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"value": "x"}}
	}
	g.Expect(c.Create(ctx, secret(workloadNS, "w1-bootstrap"))).To(Succeed())
	g.Expect(c.Create(ctx, secret(releaseNS, "ovirt-credentials"))).To(Succeed())

	kc, err := harness.ServiceAccountKubeconfig(ctx, c, e.Config, releaseNS, "capov-manager")
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	g.Expect(err).NotTo(HaveOccurred())
	sa, err := client.NewWithWatch(cfg, client.Options{Scheme: e.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	patch := func(ns, name string) error {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		return sa.Patch(ctx, s, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"touched":"true"}}}`)))
	}
	update := func(ns, name string) error {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return err
		}
		s.Annotations = map[string]string{"updated": "true"}
		return sa.Update(ctx, s)
	}
	watch := func(opts ...client.ListOption) error {
		w, err := sa.Watch(ctx, &corev1.SecretList{}, opts...)
		if err == nil {
			w.Stop()
		}
		return err
	}

	// What the manager needs. RBAC takes effect shortly after the objects are created, so wait
	// for every grant before checking the refusals (which would pass before it anyway).
	g.Eventually(func(g Gomega) {
		g.Expect(sa.Get(ctx, client.ObjectKey{Namespace: workloadNS, Name: "w1-bootstrap"}, &corev1.Secret{})).To(Succeed(),
			"bootstrap data and kubeconfigs are read in the workload clusters' namespaces")
		g.Expect(sa.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: "ovirt-credentials"}, &corev1.Secret{})).To(Succeed())
		g.Expect(sa.List(ctx, &corev1.SecretList{}, client.InNamespace(releaseNS))).To(Succeed(), "the credentials cache lists")
		g.Expect(watch(client.InNamespace(releaseNS))).To(Succeed(), "and watches the credentials namespace")
		g.Expect(patch(releaseNS, "ovirt-credentials")).To(Succeed(), "the provider patches its credentials Secret")
		g.Expect(update(releaseNS, "ovirt-credentials")).To(Succeed())
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())

	// What it must not do.
	forbidden := func(what string, err error) {
		t.Helper()
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: want Forbidden, got %v", what, err)
	}
	forbidden("list Secrets of a workload namespace", sa.List(ctx, &corev1.SecretList{}, client.InNamespace(workloadNS)))
	forbidden("list Secrets of all namespaces", sa.List(ctx, &corev1.SecretList{}))
	forbidden("watch Secrets of a workload namespace", watch(client.InNamespace(workloadNS)))
	forbidden("watch Secrets of all namespaces", watch())
	forbidden("patch a Secret of a workload namespace", patch(workloadNS, "w1-bootstrap"))
	forbidden("update a Secret of a workload namespace", update(workloadNS, "w1-bootstrap"))
	forbidden("delete a Secret of a workload namespace", sa.Delete(ctx, secret(workloadNS, "w1-bootstrap")))
	// The ownership key of a workload cluster is created once; the manager can neither replace
	// nor remove it afterwards.
	g.Expect(sa.Create(ctx, secret(workloadNS, "c1-capov-ownership"))).To(Succeed(), "a workload cluster's ownership key")
	forbidden("patch the ownership key", patch(workloadNS, "c1-capov-ownership"))
	forbidden("delete the ownership key", sa.Delete(ctx, secret(workloadNS, "c1-capov-ownership")))
	// In the credentials namespace it keeps the move copies of the credentials Secrets.
	g.Expect(sa.Create(ctx, secret(releaseNS, "capovp-p1-move"))).To(Succeed(), "the move copy is created in the credentials namespace")
	g.Expect(sa.Delete(ctx, secret(releaseNS, "capovp-p1-move"))).To(Succeed(), "and deleted there")
}
