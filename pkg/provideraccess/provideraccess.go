// Package provideraccess decides which namespaces may use an OVirtProvider
// (spec.allowedNamespaces) and words the operator-facing answers about who uses a provider.
//
// An OVirtProvider is cluster-scoped and holds the credentials of an Engine service account: any
// namespace whose OVirtMachines may name it can have VMs created and removed with that account.
// spec.allowedNamespaces restricts that, as Cluster API's identity objects do (CAPV's
// VSphereClusterIdentity, CAPA's AWSClusterStaticIdentity). The admission webhook and the
// manager ask the same function, Allowed, so that what admission refuses the manager refuses too,
// with the same sentence.
package provideraccess

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// Allowed reports whether OVirtMachines and OVirtMachineTemplates of namespace may use p.
//
// Without spec.allowedNamespaces, or with neither a non-empty list nor a selector, every
// namespace may (providers created before the field existed keep working). Otherwise a namespace
// may when it is in spec.allowedNamespaces.list or when its labels match
// spec.allowedNamespaces.selector: the union of both. The Namespace is read with r only when
// the list does not already allow it and a selector is set; a Namespace that does not exist is
// not allowed.
//
// When ok is false, why is a sentence for the operator that names the provider, the namespace
// and the fixes. err is set only when the Namespace cannot be read (the answer is unknown: retry);
// an invalid selector is a "no" with why, not an error, because only a change of the provider
// fixes it.
func Allowed(ctx context.Context, r client.Reader, p *infrav1.OVirtProvider, namespace string) (ok bool, why string, err error) {
	a := p.Spec.AllowedNamespaces
	if a == nil || (len(a.List) == 0 && a.Selector == nil) {
		return true, "", nil
	}
	if slices.Contains(a.List, namespace) {
		return true, "", nil
	}
	if a.Selector == nil {
		return false, fmt.Sprintf("OVirtProvider %s does not allow namespace %s: its spec.allowedNamespaces.list is [%s]; "+
			"add %s to that list (or give the provider a spec.allowedNamespaces.selector that matches the namespace), "+
			"or use an OVirtProvider that allows this namespace", p.Name, namespace, strings.Join(a.List, ", "), namespace), nil
	}
	selector, err := metav1.LabelSelectorAsSelector(a.Selector)
	if err != nil {
		return false, fmt.Sprintf("OVirtProvider %s does not allow namespace %s: the namespace is not in its "+
			"spec.allowedNamespaces.list and its spec.allowedNamespaces.selector is invalid (%v); fix the selector of the provider",
			p.Name, namespace, err), nil
	}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("OVirtProvider %s does not allow namespace %s: the namespace does not exist", p.Name, namespace), nil
		}
		return false, "", fmt.Errorf("reading Namespace %s to match the spec.allowedNamespaces.selector of OVirtProvider %s: %w", namespace, p.Name, err)
	}
	if selector.Matches(labels.Set(ns.Labels)) {
		return true, "", nil
	}
	listed := ""
	if len(a.List) > 0 {
		listed = fmt.Sprintf(" and it is not in spec.allowedNamespaces.list [%s]", strings.Join(a.List, ", "))
	}
	return false, fmt.Sprintf("OVirtProvider %s does not allow namespace %s: the namespace's labels do not match "+
		"spec.allowedNamespaces.selector %q%s; label the namespace to match the selector, add %s to "+
		"spec.allowedNamespaces.list of the provider, or use an OVirtProvider that allows this namespace",
		p.Name, namespace, selector.String(), listed, namespace), nil
}

// maxNamedUsers is how many machines InUseMessage names; the rest are counted.
const maxNamedUsers = 10

// InUseMessage is the sentence that explains why OVirtProvider provider cannot be deleted yet:
// the OVirtMachines users ("namespace/name") still name it. It names at most ten of them (sorted)
// and gives their count. users must not be empty.
func InUseMessage(provider string, users []string) string {
	users = slices.Clone(users)
	slices.Sort(users)
	named := users
	more := ""
	if len(users) > maxNamedUsers {
		named = users[:maxNamedUsers]
		more = fmt.Sprintf(" and %d more", len(users)-maxNamedUsers)
	}
	noun := "OVirtMachines name"
	if len(users) == 1 {
		noun = "OVirtMachine names"
	}
	return fmt.Sprintf("%d %s OVirtProvider %s in spec.provider: %s%s; their VMs are removed through this provider, "+
		"so it is deleted only once they are gone: delete them first (through their Machines, MachineDeployments or Clusters)",
		len(users), noun, provider, strings.Join(named, ", "), more)
}
