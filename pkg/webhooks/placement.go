package webhooks

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// Placement rules: the failure domains and control-plane anti-affinity of an OVirtCluster, the
// anti-affinity and affinity groups of a VM spec, and an OVirtMachine's spec.failureDomain
// against the failure domains of its OVirtCluster.

// Bounds of the placement fields, the CRD's maximums.
const (
	// MaxAffinityGroups is the largest number of a VM spec's affinityGroups.
	MaxAffinityGroups = 16
	// MaxAffinityGroupNameLength is the longest affinity group name oVirt takes.
	MaxAffinityGroupNameLength = 255
	// MaxOVirtNameLength is the longest oVirt cluster or storage domain name of a failure domain.
	MaxOVirtNameLength = 255
)

// antiAffinityPolicies are the values of an AntiAffinityPolicy besides empty.
var antiAffinityPolicies = []string{string(infrav1.AntiAffinityNone), string(infrav1.AntiAffinitySoft), string(infrav1.AntiAffinityHard)}

func isAntiAffinityPolicy(p infrav1.AntiAffinityPolicy) bool {
	for _, v := range antiAffinityPolicies {
		if string(p) == v {
			return true
		}
	}
	return false
}

// validateAntiAffinity checks that a non-empty policy is one of None, Soft, Hard; omitted says
// what an omitted value means.
func validateAntiAffinity(path *field.Path, p infrav1.AntiAffinityPolicy, omitted string) field.ErrorList {
	if p == "" || isAntiAffinityPolicy(p) {
		return nil
	}
	return field.ErrorList{field.Invalid(path, string(p),
		fmt.Sprintf("must be one of %s (case-sensitive); omit it for %s", strings.Join(antiAffinityPolicies, ", "), omitted))}
}

// validateAffinityGroups checks the affinityGroups of a VM spec: at most MaxAffinityGroups
// names, each set (not blank), at most 255 characters and listed once.
func validateAffinityGroups(path *field.Path, groups []string) field.ErrorList {
	var errs field.ErrorList
	if len(groups) > MaxAffinityGroups {
		errs = append(errs, field.TooMany(path, len(groups), MaxAffinityGroups))
	}
	seen := make(map[string]bool, len(groups))
	for i, g := range groups {
		p := path.Index(i)
		switch {
		case strings.TrimSpace(g) == "":
			errs = append(errs, field.Required(p,
				"set the name of an existing oVirt affinity group of the VM's oVirt cluster, e.g. affinityGroups: [db-spread], or remove the entry"))
		case len(g) > MaxAffinityGroupNameLength:
			errs = append(errs, field.TooLong(p, "", MaxAffinityGroupNameLength))
		case seen[g]:
			errs = append(errs, &field.Error{Type: field.ErrorTypeDuplicate, Field: p.String(), BadValue: g,
				Detail: "each affinity group is listed once: remove the repeated entry"})
		case strings.HasPrefix(g, infrav1.CAPOVAffinityGroupPrefix):
			errs = append(errs, field.Invalid(p, g, "names starting with \""+infrav1.CAPOVAffinityGroupPrefix+"\" are the anti-affinity groups CAPOV creates for clusters, "+
				"which no machine joins by name: use spec.antiAffinity (workers) or the OVirtCluster's spec.controlPlaneAntiAffinity, and remove the entry"))
		}
		seen[g] = true
	}
	return errs
}

// validateAllowedAffinityGroups checks an OVirtProvider's spec.allowedAffinityGroups: names or
// prefixes ending in "*", none of CAPOV's own groups.
func validateAllowedAffinityGroups(path *field.Path, allowed []string) field.ErrorList {
	var errs field.ErrorList
	for i, a := range allowed {
		p := path.Index(i)
		prefix, pattern := strings.CutSuffix(a, "*")
		switch {
		case strings.TrimSpace(a) == "":
			errs = append(errs, field.Required(p, "set the name of an oVirt affinity group machines may join, or a prefix ending in \"*\" (\"team-a-*\"), or remove the entry"))
		case len(a) > MaxAffinityGroupNameLength:
			errs = append(errs, field.TooLong(p, "", MaxAffinityGroupNameLength))
		case strings.Contains(prefix, "*"):
			errs = append(errs, field.Invalid(p, a, "\"*\" may only end an entry (a prefix: \"team-a-*\"); write the group names otherwise"))
		case strings.HasPrefix(prefix, infrav1.CAPOVAffinityGroupPrefix) || pattern && strings.HasPrefix(infrav1.CAPOVAffinityGroupPrefix, prefix) && prefix != "":
			errs = append(errs, field.Invalid(p, a, "matches the anti-affinity groups CAPOV creates for clusters (\""+infrav1.CAPOVAffinityGroupPrefix+"...\"), "+
				"which no machine may join by name: allow the administrators' groups only"))
		}
	}
	return errs
}

// ValidateOVirtClusterPlacement checks the placement fields of an OVirtCluster spec (path
// "spec"): spec.failureDomains (at most 32, each with a unique DNS-label name and an oVirt
// cluster) and spec.controlPlaneAntiAffinity. The warnings are findings that do not block
// admission.
func ValidateOVirtClusterPlacement(spec *infrav1.OVirtClusterSpec, path *field.Path) (field.ErrorList, admission.Warnings) {
	var errs field.ErrorList
	var warnings admission.Warnings
	errs = append(errs, validateAntiAffinity(path.Child("controlPlaneAntiAffinity"), spec.ControlPlaneAntiAffinity, "Soft, the default")...)
	fdPath := path.Child("failureDomains")
	if len(spec.FailureDomains) > infrav1.MaxFailureDomains {
		errs = append(errs, field.TooMany(fdPath, len(spec.FailureDomains), infrav1.MaxFailureDomains))
	}
	first := make(map[string]int, len(spec.FailureDomains))
	controlPlane := 0
	for i, d := range spec.FailureDomains {
		p := fdPath.Index(i)
		namePath := p.Child("name")
		switch {
		case d.Name == "":
			errs = append(errs, field.Required(namePath,
				"set the failure domain name that Machines carry in spec.failureDomain, e.g. name: fd-1 (lower case letters, digits and '-')"))
		case len(validation.IsDNS1123Label(d.Name)) > 0:
			errs = append(errs, field.Invalid(namePath, d.Name,
				"must be a lower case DNS label of at most 63 characters (letters, digits and '-', starting and ending with a letter or digit), e.g. fd-1"))
		default:
			if j, dup := first[d.Name]; dup {
				errs = append(errs, &field.Error{Type: field.ErrorTypeDuplicate, Field: namePath.String(), BadValue: d.Name,
					Detail: fmt.Sprintf("failure domain names must be unique, and spec.failureDomains[%d] has this name too: rename or remove one of them", j)})
			} else {
				first[d.Name] = i
			}
		}
		switch {
		case strings.TrimSpace(d.OVirtCluster) == "":
			errs = append(errs, field.Required(p.Child("ovirtcluster"),
				"set the oVirt cluster the VMs of this failure domain are created in, e.g. ovirtcluster: Default"))
		case len(d.OVirtCluster) > MaxOVirtNameLength:
			errs = append(errs, field.TooLong(p.Child("ovirtcluster"), "", MaxOVirtNameLength))
		}
		if len(d.StorageDomainName) > MaxOVirtNameLength {
			errs = append(errs, field.TooLong(p.Child("storagedomainname"), "", MaxOVirtNameLength))
		}
		if d.IsControlPlane() {
			controlPlane++
		}
	}
	if len(spec.FailureDomains) > 0 && controlPlane == 0 {
		warnings = append(warnings, "no failure domain of spec.failureDomains allows control-plane machines (each sets controlPlane: false): "+
			"KubeadmControlPlane then creates its machines without a failure domain, in the oVirt cluster of its OVirtMachineTemplate; "+
			"remove controlPlane: false from the failure domains the control plane may use")
	}
	return errs, warnings
}

// failureDomainNames lists the names of the failure domains, for messages.
func failureDomainNames(domains []infrav1.OVirtFailureDomain) string {
	if len(domains) == 0 {
		return "none (the OVirtCluster declares no spec.failureDomains)"
	}
	names := make([]string, len(domains))
	for i, d := range domains {
		names[i] = d.Name
	}
	return strings.Join(names, ", ")
}

// checkMachineFailureDomain checks an OVirtMachine's spec.failureDomain (when set) against the
// spec.failureDomains of its OVirtCluster, found through the machine's cluster-name label, the
// Cluster API Cluster of that name and its spec.infrastructureRef. r must read uncached (the
// webhook binary passes its API reader: its cache has informers for OVirtProviders and
// Namespaces only). When the label, the Cluster or the OVirtCluster is missing (GitOps applies
// objects in any order) the machine is admitted with a warning: the manager checks the failure
// domain again before it creates the VM and reports FailureDomainNotFound. A read that fails
// otherwise fails the request, with a retry hint.
func checkMachineFailureDomain(ctx context.Context, r client.Reader, m *infrav1.OVirtMachine, path *field.Path) (field.ErrorList, admission.Warnings, error) {
	fd := m.Spec.FailureDomain
	if fd == "" {
		return nil, nil, nil
	}
	notChecked := func(why string) admission.Warnings {
		return admission.Warnings{fmt.Sprintf("spec.failureDomain %q is not checked: %s; the manager checks it before it creates the VM "+
			"(MachineCreated reports FailureDomainNotFound when the OVirtCluster does not define it)", fd, why)}
	}
	if r == nil {
		return nil, notChecked("the webhook has no reader for Clusters and OVirtClusters"), nil
	}
	clusterName := m.Labels[clusterv1.ClusterNameLabel]
	if clusterName == "" {
		return nil, notChecked("the OVirtMachine has no " + clusterv1.ClusterNameLabel + " label to find its Cluster by " +
			"(Cluster API sets it on the machines it creates)"), nil
	}
	cluster := &clusterv1.Cluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: clusterName}, cluster); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, notChecked(fmt.Sprintf("Cluster %s/%s does not exist (yet)", m.Namespace, clusterName)), nil
		}
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("reading Cluster %s/%s to check spec.failureDomain: %w; retry the request", m.Namespace, clusterName, err))
	}
	ref := cluster.Spec.InfrastructureRef
	if ref.Name == "" || ref.Kind != "OVirtCluster" || (ref.APIGroup != "" && ref.APIGroup != infrav1.GroupVersion.Group) {
		return nil, notChecked(fmt.Sprintf("Cluster %s/%s does not name an OVirtCluster in spec.infrastructureRef (yet)", m.Namespace, clusterName)), nil
	}
	oc := &infrav1.OVirtCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, oc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notChecked(fmt.Sprintf("OVirtCluster %s/%s does not exist (yet)", m.Namespace, ref.Name)), nil
		}
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("reading OVirtCluster %s/%s to check spec.failureDomain: %w; retry the request", m.Namespace, ref.Name, err))
	}
	for _, d := range oc.Spec.FailureDomains {
		if d.Name == fd {
			return nil, nil, nil
		}
	}
	return field.ErrorList{field.Invalid(path, fd,
		fmt.Sprintf("is not a failure domain of OVirtCluster %s/%s; valid: %s; use one of them in the Machine's spec.failureDomain "+
			"(KubeadmControlPlane and MachineDeployments take them from the Cluster's status.failureDomains), "+
			"or add the failure domain to the OVirtCluster's spec.failureDomains",
			m.Namespace, oc.Name, failureDomainNames(oc.Spec.FailureDomains)))}, nil, nil
}
