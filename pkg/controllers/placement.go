package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// groupMarkerPrefix starts the owner marker CAPOV writes into the description of every affinity
// group it creates: "capov ovirtcluster=<namespace>/<name> management-cluster=<id> proof=<proof>".
// A group whose description does not carry the marker of the OVirtCluster is never changed or
// deleted.
const groupMarkerPrefix = "capov ovirtcluster="

// groupMarker is the owner marker of the affinity group named group of an OVirtCluster of the
// management cluster mc, with its ownership proof under key (none without a key).
func groupMarker(oc *infrav1.OVirtCluster, mc string, key []byte, group string) string {
	m := groupMarkerPrefix + oc.Namespace + "/" + oc.Name
	if mc != "" {
		m += " " + markerClusterField + mc
	}
	if key != nil {
		m += " proof=" + groupProof(key, oc, group)
	}
	return m
}

// groupProof is the ownership proof of a group's marker: an HMAC under the key of the cluster's
// Cluster (ownership_proof.go) over the cluster's namespace/name and the group's name. It does
// not name the management cluster, so that the target of a clusterctl move, which holds the
// moved key, can prove the group its own (a group's description is never rewritten).
func groupProof(key []byte, oc *infrav1.OVirtCluster, group string) string {
	return vmOwner{namespace: oc.Namespace, name: oc.Name, uid: "affinity-group", vm: group}.sign(key)
}

// ownsGroup reports whether the description of the affinity group named group carries exactly
// the marker of this OVirtCluster, and no other, for this management cluster mc: its own id, no
// id (a group made before the field existed), or another management cluster's id with a proof
// that verifies under key, the key of this cluster's Cluster (the group came with clusterctl
// move). A cluster of the same namespace/name in another management cluster that does not hold
// the key never takes the group for its own.
func ownsGroup(description string, oc *infrav1.OVirtCluster, mc string, key []byte, group string) bool {
	if strings.Count(description, groupMarkerPrefix) != 1 {
		return false
	}
	fields := strings.Fields(description[strings.Index(description, groupMarkerPrefix)+len(groupMarkerPrefix):])
	if len(fields) == 0 || fields[0] != oc.Namespace+"/"+oc.Name {
		return false
	}
	var id, proof string
	hasID := false
	for _, f := range fields[1:] {
		if v, ok := strings.CutPrefix(f, markerClusterField); ok {
			id, hasID = v, true
			continue
		}
		if v, ok := strings.CutPrefix(f, "proof="); ok {
			proof = v
			continue
		}
		break
	}
	switch {
	case !hasID || id == mc:
		return true
	case proof == "" || key == nil:
		return false
	}
	o := vmOwner{namespace: oc.Namespace, name: oc.Name, uid: "affinity-group", vm: group, proof: proof}
	return o.verifies(key)
}

// maxGroupName is the longest affinity group name CAPOV writes (the Engine accepts 255).
const maxGroupName = 120

// groupNameChars are the characters kept in a group name; others become '-'.
var groupNameChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// groupName is the name of the affinity group of a role in an oVirt cluster:
// "capov-<namespace>-<cluster>-<role>-<ovirt cluster>" ("md/x" becomes "md-x", characters the
// Engine refuses become "-"), or a prefix of it, a dash and 8 hex digits of a hash of the full
// name when longer than maxGroupName. The Engine wants affinity group names unique across all
// its clusters, so the oVirt cluster is part of the name.
func groupName(oc *infrav1.OVirtCluster, role, ovirtCluster string) string {
	full := infrav1.CAPOVAffinityGroupPrefix + oc.Namespace + "-" + oc.Name + "-" + groupNameChars.ReplaceAllString(role, "-") + "-" + groupNameChars.ReplaceAllString(ovirtCluster, "-")
	if len(full) <= maxGroupName {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	return full[:maxGroupName-9] + "-" + hex.EncodeToString(sum[:4])
}

// affinityRole returns the managed affinity group role of a machine and its policy; "" when the
// machine needs no managed group. Control-plane machines follow the OVirtCluster's
// controlPlaneAntiAffinity (default Soft); the others their own spec.antiAffinity (default
// None), one group per MachineDeployment (or MachineSet without one). The labels are those
// Cluster API puts on the OVirtMachine.
func affinityRole(om *infrav1.OVirtMachine, oc *infrav1.OVirtCluster) (string, infrav1.AntiAffinityPolicy) {
	if _, ok := om.Labels[clusterv1.MachineControlPlaneLabel]; ok {
		p := oc.Spec.ControlPlaneAntiAffinity.OrDefault(infrav1.AntiAffinitySoft)
		if p == infrav1.AntiAffinityNone {
			return "", p
		}
		return infrav1.AffinityGroupRoleControlPlane, p
	}
	p := om.Spec.AntiAffinity.OrDefault(infrav1.AntiAffinityNone)
	if p == infrav1.AntiAffinityNone {
		return "", p
	}
	if md := om.Labels[clusterv1.MachineDeploymentNameLabel]; md != "" {
		return "md/" + md, p
	}
	if ms := om.Labels[clusterv1.MachineSetNameLabel]; ms != "" {
		return "ms/" + ms, p
	}
	return "", infrav1.AntiAffinityNone
}

// failureDomain returns the failure domain of the OVirtCluster with this name.
func failureDomain(oc *infrav1.OVirtCluster, name string) (infrav1.OVirtFailureDomain, bool) {
	if oc == nil {
		return infrav1.OVirtFailureDomain{}, false
	}
	i := slices.IndexFunc(oc.Spec.FailureDomains, func(d infrav1.OVirtFailureDomain) bool { return d.Name == name })
	if i < 0 {
		return infrav1.OVirtFailureDomain{}, false
	}
	return oc.Spec.FailureDomains[i], true
}

// failureDomainNames lists the failure domain names of the OVirtCluster, for messages.
func failureDomainNames(oc *infrav1.OVirtCluster) string {
	if oc == nil || len(oc.Spec.FailureDomains) == 0 {
		return "none defined"
	}
	names := make([]string, 0, len(oc.Spec.FailureDomains))
	for _, d := range oc.Spec.FailureDomains {
		names = append(names, d.Name)
	}
	return strings.Join(names, ", ")
}

// machineFailureDomain is the failure domain of a machine: recorded at creation, else its
// spec.failureDomain.
func machineFailureDomain(om *infrav1.OVirtMachine) string {
	if om.Status.FailureDomain != "" {
		return om.Status.FailureDomain
	}
	return om.Spec.FailureDomain
}

// placementCluster is the oVirt cluster of a machine's VM: its failure domain's, else
// spec.ovirtcluster.
func placementCluster(om *infrav1.OVirtMachine, oc *infrav1.OVirtCluster) string {
	if fd := machineFailureDomain(om); fd != "" {
		if d, ok := failureDomain(oc, fd); ok {
			return d.OVirtCluster
		}
	}
	return om.Spec.OVirtCluster
}

// publishedFailureDomains are the failure domains as Cluster API reads them.
func publishedFailureDomains(oc *infrav1.OVirtCluster) []clusterv1.FailureDomain {
	if len(oc.Spec.FailureDomains) == 0 {
		return nil
	}
	out := make([]clusterv1.FailureDomain, 0, len(oc.Spec.FailureDomains))
	for _, d := range oc.Spec.FailureDomains {
		attrs := map[string]string{"ovirtcluster": d.OVirtCluster}
		if d.StorageDomainName != "" {
			attrs["storagedomainname"] = d.StorageDomainName
		}
		cp := d.IsControlPlane()
		out = append(out, clusterv1.FailureDomain{Name: d.Name, ControlPlane: &cp, Attributes: attrs})
	}
	return out
}

// findGroup returns the recorded affinity group of a role in an oVirt cluster of a provider.
func findGroup(oc *infrav1.OVirtCluster, role, provider, ovirtCluster string) (infrav1.OVirtAffinityGroup, bool) {
	if oc == nil {
		return infrav1.OVirtAffinityGroup{}, false
	}
	for _, g := range oc.Status.AffinityGroups {
		if g.Role == role && g.Provider == provider && g.OVirtCluster == ovirtCluster && g.ID != "" {
			return g, true
		}
	}
	return infrav1.OVirtAffinityGroup{}, false
}

// labelValue turns an oVirt host name into a valid label value: at most 63 characters of
// [A-Za-z0-9._-], starting and ending with an alphanumeric character. Host names are usually
// valid as they are (short names or FQDNs under 63 characters).
func labelValue(s string) string {
	v := groupNameChars.ReplaceAllString(s, "-")
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.TrimFunc(v, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	})
}

// requestsFor returns a reconcile request for each object that keep passes (nil: all).
func requestsFor[T any, PT interface {
	*T
	client.Object
}](items []T, keep func(PT) bool) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(items))
	for i := range items {
		o := PT(&items[i])
		if keep == nil || keep(o) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return out
}
