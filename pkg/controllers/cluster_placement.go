package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/provideraccess"
)

// Event reasons of OVirtCluster.
const (
	eventAffinityGroupCreated = "AffinityGroupCreated"
	eventAffinityGroupDeleted = "AffinityGroupDeleted"
	eventAffinityGroupFailed  = "AffinityGroupFailed"
	eventAffinityGroupTaken   = "AffinityGroupNameTaken"
	eventFailureDomainBroken  = "FailureDomainNotUsable"
)

// groupKey identifies a managed affinity group: a role in an oVirt cluster of a provider.
type groupKey struct{ role, provider, ovirtCluster string }

// placementState is what the cluster's machines need, computed from the OVirtMachines.
type placementState struct {
	// groups are the affinity groups needed, with whether they are enforcing.
	groups map[groupKey]bool
	// providers are the providers of the machines, sorted.
	providers []string
	// templates are the oVirt templates of the machines, sorted.
	templates []string
}

// clusterMachines lists the OVirtMachines of the Cluster (by Cluster API's cluster-name label).
// They are the cache's own objects, not copies (a copy of every machine of the cluster for each
// reconcile was 40% of all the manager allocated while 1,000 machines were created): read them,
// never change them.
func (r *OVirtClusterReconciler) clusterMachines(ctx context.Context, oc *infrav1.OVirtCluster, clusterName string) ([]infrav1.OVirtMachine, error) {
	if clusterName == "" {
		return nil, nil
	}
	list := &infrav1.OVirtMachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(oc.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the OVirtMachines of cluster %s: %w", clusterName, err)
	}
	return list.Items, nil
}

func desiredPlacement(oc *infrav1.OVirtCluster, machines []infrav1.OVirtMachine) placementState {
	st := placementState{groups: map[groupKey]bool{}}
	for i := range machines {
		om := &machines[i]
		if om.Spec.Provider != "" && !slices.Contains(st.providers, om.Spec.Provider) {
			st.providers = append(st.providers, om.Spec.Provider)
		}
		if om.Spec.Template != "" && !slices.Contains(st.templates, om.Spec.Template) {
			st.templates = append(st.templates, om.Spec.Template)
		}
		if om.Status.VMID == "" {
			// Its oVirt cluster is final once the VM exists (the failure domain is resolved at
			// creation); the VM joins its group only before its first start, after that.
			continue
		}
		role, policy := affinityRole(om, oc)
		if role == "" {
			continue
		}
		k := groupKey{role: role, provider: om.Spec.Provider, ovirtCluster: placementCluster(om, oc)}
		st.groups[k] = st.groups[k] || policy == infrav1.AntiAffinityHard
	}
	sort.Strings(st.providers)
	sort.Strings(st.templates)
	return st
}

// engines hands out oVirt clients per provider for one reconcile, connecting once each.
type engines struct {
	r       *OVirtClusterReconciler
	oc      *infrav1.OVirtCluster
	clients map[string]ovirt.Client
	errs    map[string]error
}

// errProviderGone is an OVirtProvider that no longer exists.
var errProviderGone = errors.New("OVirtProvider not found")

// errProviderRefuses is an OVirtProvider whose spec.allowedNamespaces no longer allows the
// cluster's namespace.
var errProviderRefuses = errors.New("the OVirtProvider does not allow this namespace")

// groupDeletionPatience is how long a deleted OVirtCluster waits for the Engine to remove its
// affinity groups before it reports them as left in oVirt and lets the cluster go.
const groupDeletionPatience = 30 * time.Minute

func (e *engines) get(ctx context.Context, name string) (ovirt.Client, error) {
	if c, ok := e.clients[name]; ok {
		return c, nil
	}
	if err, ok := e.errs[name]; ok {
		return nil, err
	}
	c, err := e.connect(ctx, name)
	if err != nil {
		e.errs[name] = err
		return nil, err
	}
	e.clients[name] = c
	return c, nil
}

func (e *engines) connect(ctx context.Context, name string) (ovirt.Client, error) {
	p := &infrav1.OVirtProvider{}
	if err := e.r.Client.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("OVirtProvider %q: %w", name, errProviderGone)
		}
		return nil, err
	}
	ok, why, err := provideraccess.Allowed(ctx, e.r.APIReader, p, e.oc.Namespace)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s: %w", why, errProviderRefuses)
	}
	c, _, err := e.r.Connector.Connect(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("OVirtProvider %s: %s", name, Classify(err).Message)
	}
	return c, nil
}

// reconcilePlacement publishes the failure domains, checks them in oVirt and keeps the affinity
// groups the cluster's machines need.
func (r *OVirtClusterReconciler) reconcilePlacement(ctx context.Context, oc *infrav1.OVirtCluster, clusterName string) (ctrl.Result, error) {
	oc.Status.FailureDomains = publishedFailureDomains(oc)
	machines, err := r.clusterMachines(ctx, oc, clusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	st := desiredPlacement(oc, machines)
	e := &engines{r: r, oc: oc, clients: map[string]ovirt.Client{}, errs: map[string]error{}}
	key := client.ObjectKeyFromObject(oc)
	now := r.now()
	fingerprint := fmt.Sprintf("%d|%s|%s|%s", oc.Generation, oc.Spec.Provider, strings.Join(st.providers, ","), strings.Join(st.templates, ","))
	var res ctrl.Result
	if len(oc.Spec.FailureDomains) > 0 || len(oc.Status.AffinityGroups) > 0 {
		// Checked again every CheckInterval (a domain fixed in oVirt, a group deleted there).
		res.RequeueAfter = r.checkInterval()
	}
	if _, fresh := r.checks.fresh(key.String(), fingerprint, now, r.checkInterval()); !fresh {
		checked, err := r.checkFailureDomains(ctx, e, oc, st)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.verifyGroups(ctx, e, oc); err != nil {
			return ctrl.Result{}, err
		}
		if checked {
			r.checks.record(key.String(), fingerprint, now)
		} else {
			// The Engine could not be asked: again soon rather than in CheckInterval.
			res.RequeueAfter = min(r.checkInterval(), time.Minute)
		}
	}
	if len(oc.Spec.FailureDomains) == 0 {
		v1beta1conditions.Delete(oc, infrav1.FailureDomainsReadyCondition)
	}
	if err := r.reconcileGroups(ctx, e, oc, st); err != nil {
		return ctrl.Result{}, err
	}
	if v1beta1conditions.IsFalse(oc, infrav1.AffinityGroupsReadyCondition) {
		// A group the Engine refused or failed to create is tried again: machines with Soft
		// anti-affinity started without it and join it once it exists.
		retry := r.RetryInterval
		if retry <= 0 {
			retry = time.Minute
		}
		if res.RequeueAfter == 0 || retry < res.RequeueAfter {
			res.RequeueAfter = retry
		}
	}
	return res, nil
}

// checkFailureDomains sets FailureDomainsReady: every domain's oVirt cluster and storage domain
// exist, and each template of the cluster's machines is in the domain's data center.
// checked is false when the Engine could not be asked.
func (r *OVirtClusterReconciler) checkFailureDomains(ctx context.Context, e *engines, oc *infrav1.OVirtCluster, st placementState) (checked bool, _ error) {
	if len(oc.Spec.FailureDomains) == 0 {
		return true, nil
	}
	provider := oc.Spec.Provider
	if provider == "" && len(st.providers) > 0 {
		provider = st.providers[0]
	}
	if provider == "" {
		v1beta1conditions.MarkFalse(oc, infrav1.FailureDomainsReadyCondition, infrav1.WaitingForProviderReason, clusterv1.ConditionSeverityInfo,
			"the failure domains are checked in oVirt once spec.provider is set or the cluster has a machine")
		return true, nil
	}
	c, err := e.get(ctx, provider)
	if err != nil {
		v1beta1conditions.MarkFalse(oc, infrav1.FailureDomainsReadyCondition, infrav1.FailureDomainNotUsableReason, clusterv1.ConditionSeverityWarning,
			"cannot check the failure domains in oVirt: %v", err)
		return false, nil
	}
	templates := map[string]*ovirt.Template{}
	var problems []string
	for _, name := range st.templates {
		tpl, err := c.FindTemplate(ctx, name, "")
		switch {
		case errors.Is(err, ovirt.ErrNotFound):
			problems = append(problems, fmt.Sprintf("template %q not found in oVirt", name))
		case err != nil:
			return false, fmt.Errorf("finding template %q: %w", name, err)
		default:
			templates[name] = tpl
		}
	}
	for _, d := range oc.Spec.FailureDomains {
		var bad []string
		cl, err := c.FindCluster(ctx, d.OVirtCluster)
		switch {
		case errors.Is(err, ovirt.ErrNotFound):
			bad = append(bad, fmt.Sprintf("oVirt cluster %q not found", d.OVirtCluster))
		case err != nil:
			return false, fmt.Errorf("finding oVirt cluster %q: %w", d.OVirtCluster, err)
		}
		if d.StorageDomainName != "" {
			sd, err := c.FindStorageDomain(ctx, d.StorageDomainName)
			switch {
			case errors.Is(err, ovirt.ErrNotFound):
				bad = append(bad, fmt.Sprintf("storage domain %q not found", d.StorageDomainName))
			case err != nil:
				return false, fmt.Errorf("finding storage domain %q: %w", d.StorageDomainName, err)
			case !sd.Usable:
				bad = append(bad, fmt.Sprintf("storage domain %q cannot host disks (status %q)", d.StorageDomainName, sd.Status))
			}
		}
		if cl != nil {
			for _, name := range st.templates {
				if tpl := templates[name]; tpl != nil && tpl.DataCenterID != "" && cl.DataCenterID != "" && tpl.DataCenterID != cl.DataCenterID {
					bad = append(bad, fmt.Sprintf("template %q is in another data center than oVirt cluster %q", name, d.OVirtCluster))
				}
			}
		}
		if len(bad) > 0 {
			problems = append(problems, fmt.Sprintf("%s: %s", d.Name, strings.Join(bad, "; ")))
		}
	}
	if len(problems) == 0 {
		v1beta1conditions.MarkTrue(oc, infrav1.FailureDomainsReadyCondition)
		return true, nil
	}
	msg := "failure domains not usable: " + strings.Join(problems, "; ")
	if v1beta1conditions.GetMessage(oc, infrav1.FailureDomainsReadyCondition) != msg {
		r.Recorder.Eventf(oc, nil, corev1.EventTypeWarning, eventFailureDomainBroken, "CheckFailureDomains", "%s", msg)
	}
	v1beta1conditions.MarkFalse(oc, infrav1.FailureDomainsReadyCondition, infrav1.FailureDomainNotUsableReason, clusterv1.ConditionSeverityWarning, "%s", msg)
	return true, nil
}

// verifyGroups drops the recorded groups that no longer exist in oVirt (deleted there), so that
// reconcileGroups creates them again.
func (r *OVirtClusterReconciler) verifyGroups(ctx context.Context, e *engines, oc *infrav1.OVirtCluster) error {
	type place struct{ provider, clusterID string }
	listed := map[place][]ovirt.AffinityGroup{}
	kept := oc.Status.AffinityGroups[:0:0]
	for _, g := range oc.Status.AffinityGroups {
		c, err := e.get(ctx, g.Provider)
		if err != nil || g.OVirtClusterID == "" {
			kept = append(kept, g)
			continue
		}
		p := place{g.Provider, g.OVirtClusterID}
		groups, ok := listed[p]
		if !ok {
			groups, err = c.ListAffinityGroups(ctx, g.OVirtClusterID)
			if err != nil && !errors.Is(err, ovirt.ErrNotFound) {
				return fmt.Errorf("listing the affinity groups of oVirt cluster %s: %w", g.OVirtCluster, err)
			}
			listed[p] = groups
		}
		if slices.ContainsFunc(groups, func(a ovirt.AffinityGroup) bool { return a.ID == g.ID }) {
			kept = append(kept, g)
			continue
		}
		ctrl.LoggerFrom(ctx).Info("An affinity group of the cluster is gone from oVirt; creating it again", "group", g.Name, "ovirtCluster", g.OVirtCluster)
	}
	oc.Status.AffinityGroups = kept
	return nil
}

// reconcileGroups creates the affinity groups the machines need, adjusts their enforcement, and
// deletes the groups of MachineDeployments that no longer have machines. The control-plane
// group stays until the cluster is deleted.
func (r *OVirtClusterReconciler) reconcileGroups(ctx context.Context, e *engines, oc *infrav1.OVirtCluster, st placementState) error {
	log := ctrl.LoggerFrom(ctx)
	var problems []string
	reason := infrav1.AffinityGroupFailedReason
	keys := make([]groupKey, 0, len(st.groups))
	for k := range st.groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].role+"/"+keys[i].provider+"/"+keys[i].ovirtCluster < keys[j].role+"/"+keys[j].provider+"/"+keys[j].ovirtCluster
	})
	for _, k := range keys {
		enforcing := st.groups[k]
		i := slices.IndexFunc(oc.Status.AffinityGroups, func(g infrav1.OVirtAffinityGroup) bool {
			return g.Role == k.role && g.Provider == k.provider && g.OVirtCluster == k.ovirtCluster
		})
		if i >= 0 && oc.Status.AffinityGroups[i].Enforcing == enforcing {
			continue
		}
		c, err := e.get(ctx, k.provider)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s in oVirt cluster %s: %v", k.role, k.ovirtCluster, err))
			continue
		}
		if i >= 0 {
			g := &oc.Status.AffinityGroups[i]
			if err := c.UpdateAffinityGroup(ctx, g.OVirtClusterID, g.ID, enforcing); err != nil {
				if errors.Is(err, ovirt.ErrNotFound) {
					oc.Status.AffinityGroups = slices.Delete(oc.Status.AffinityGroups, i, i+1)
					problems = append(problems, fmt.Sprintf("group %s was deleted in oVirt; creating it again", g.Name))
					continue
				}
				problems = append(problems, fmt.Sprintf("changing group %s: %v", g.Name, err))
				continue
			}
			log.Info("Changed the enforcement of an affinity group", "group", g.Name, "enforcing", enforcing)
			g.Enforcing = enforcing
			continue
		}
		g, taken, err := r.ensureGroup(ctx, c, oc, k, enforcing)
		switch {
		case err != nil:
			if errors.Is(err, ovirt.ErrUnreachable) || errors.Is(err, ovirt.ErrLocked) {
				return err
			}
			problem := fmt.Sprintf("%s in oVirt cluster %s: %v", k.role, k.ovirtCluster, err)
			if ovirt.PermissionDenied(err) {
				problem += "; " + missingPermission("MANIPULATE_AFFINITY_GROUPS on oVirt cluster "+k.ovirtCluster+" (ClusterAdmin has it)")
			}
			problems = append(problems, problem)
			r.Recorder.Eventf(oc, nil, corev1.EventTypeWarning, eventAffinityGroupFailed, "CreateAffinityGroup", "affinity group for %s", problem)
		case taken:
			reason = infrav1.AffinityGroupNameTakenReason
			msg := fmt.Sprintf("an affinity group named %q exists in oVirt cluster %s but was not made for OVirtCluster %s/%s of this management cluster "+
				"(its description lacks %q, or names another management cluster without a proof this cluster's key verifies); CAPOV does not touch it: rename or delete it in oVirt",
				g.Name, k.ovirtCluster, oc.Namespace, oc.Name, groupMarker(oc, r.ManagementClusterID, nil, ""))
			problems = append(problems, msg)
			if !strings.Contains(v1beta1conditions.GetMessage(oc, infrav1.AffinityGroupsReadyCondition), g.Name) {
				r.Recorder.Eventf(oc, nil, corev1.EventTypeWarning, eventAffinityGroupTaken, "CreateAffinityGroup", "%s", msg)
			}
		default:
			oc.Status.AffinityGroups = append(oc.Status.AffinityGroups, *g)
		}
	}
	// Groups no machine needs any more: those of MachineDeployments are deleted.
	kept := oc.Status.AffinityGroups[:0:0]
	for _, g := range oc.Status.AffinityGroups {
		if _, needed := st.groups[groupKey{g.Role, g.Provider, g.OVirtCluster}]; needed || g.Role == infrav1.AffinityGroupRoleControlPlane {
			kept = append(kept, g)
			continue
		}
		gone, err := r.deleteGroup(ctx, e, oc, g)
		if err != nil {
			problems = append(problems, fmt.Sprintf("deleting group %s: %v", g.Name, err))
		}
		if !gone {
			kept = append(kept, g)
		}
	}
	oc.Status.AffinityGroups = kept
	switch {
	case len(problems) > 0:
		v1beta1conditions.MarkFalse(oc, infrav1.AffinityGroupsReadyCondition, reason, clusterv1.ConditionSeverityWarning, "%s", strings.Join(problems, "; "))
	case len(st.groups) > 0:
		v1beta1conditions.MarkTrue(oc, infrav1.AffinityGroupsReadyCondition)
	default:
		v1beta1conditions.Delete(oc, infrav1.AffinityGroupsReadyCondition)
	}
	return nil
}

// ensureGroup finds the group by name in the oVirt cluster or creates it. taken is true when a
// group of that name exists without this cluster's marker.
func (r *OVirtClusterReconciler) ensureGroup(ctx context.Context, c ovirt.Client, oc *infrav1.OVirtCluster, k groupKey, enforcing bool) (*infrav1.OVirtAffinityGroup, bool, error) {
	cl, err := c.FindCluster(ctx, k.ovirtCluster)
	if err != nil {
		return nil, false, fmt.Errorf("finding oVirt cluster %q: %w", k.ovirtCluster, err)
	}
	name := groupName(oc, k.role, k.ovirtCluster)
	rec := &infrav1.OVirtAffinityGroup{Role: k.role, Provider: k.provider, OVirtCluster: k.ovirtCluster, OVirtClusterID: cl.ID, Name: name, Enforcing: enforcing}
	groups, err := c.ListAffinityGroups(ctx, cl.ID)
	if err != nil {
		return nil, false, fmt.Errorf("listing the affinity groups of oVirt cluster %q: %w", k.ovirtCluster, err)
	}
	i := slices.IndexFunc(groups, func(g ovirt.AffinityGroup) bool { return g.Name == name })
	// The key of the cluster's Cluster signs a new group's marker and proves a moved one's.
	key, err := r.ownershipKey(ctx, oc, i < 0)
	if err != nil {
		return nil, false, err
	}
	if i >= 0 {
		g := groups[i]
		if !ownsGroup(g.Description, oc, r.ManagementClusterID, key, name) || g.Positive {
			return rec, true, nil
		}
		// Ours, created before the status recorded it (a lost patch, a move).
		if g.Enforcing != enforcing {
			if err := c.UpdateAffinityGroup(ctx, cl.ID, g.ID, enforcing); err != nil {
				return nil, false, fmt.Errorf("changing affinity group %q: %w", name, err)
			}
		}
		rec.ID = g.ID
		return rec, false, nil
	}
	g, err := c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{
		ClusterID: cl.ID, Name: name, Positive: false, Enforcing: enforcing,
		Description: groupMarker(oc, r.ManagementClusterID, key, name) + " " + fmt.Sprintf("keeps the %s VMs of cluster %s on different hosts (managed by CAPOV)", k.role, oc.Name),
	})
	if err != nil {
		return nil, false, fmt.Errorf("creating affinity group %q: %w", name, err)
	}
	rec.ID = g.ID
	ctrl.LoggerFrom(ctx).Info("Created an affinity group", "group", name, "ovirtCluster", k.ovirtCluster, "enforcing", enforcing)
	r.Recorder.Eventf(oc, nil, corev1.EventTypeNormal, eventAffinityGroupCreated, "CreateAffinityGroup",
		"Created affinity group %s in oVirt cluster %s for the %s VMs (enforcing=%t)", name, k.ovirtCluster, k.role, enforcing)
	return rec, false, nil
}

// ownershipKey returns the ownership key of the OVirtCluster's Cluster (ownership_proof.go),
// created when create is set and the Cluster has none; nil when there is none (or no Cluster).
func (r *OVirtClusterReconciler) ownershipKey(ctx context.Context, oc *infrav1.OVirtCluster, create bool) ([]byte, error) {
	if r.APIReader == nil {
		return nil, nil
	}
	cluster, err := util.GetOwnerCluster(ctx, r.Client, oc.ObjectMeta)
	if err != nil || cluster == nil {
		return nil, client.IgnoreNotFound(err)
	}
	if create {
		return ensureOwnershipKey(ctx, r.Client, r.APIReader, cluster)
	}
	return readOwnershipKey(ctx, r.APIReader, cluster.Namespace, cluster.Name)
}

// deleteGroup deletes a recorded group in oVirt if it is still ours. gone is true when the
// record can be dropped: deleted, already gone, not ours any more, or its provider deleted.
func (r *OVirtClusterReconciler) deleteGroup(ctx context.Context, e *engines, oc *infrav1.OVirtCluster, g infrav1.OVirtAffinityGroup) (bool, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("group", g.Name, "ovirtCluster", g.OVirtCluster)
	c, err := e.get(ctx, g.Provider)
	if errors.Is(err, errProviderGone) {
		log.Info("The OVirtProvider of an affinity group is gone; forgetting the group (delete it in oVirt by hand)", "OVirtProvider", g.Provider)
		r.Recorder.Eventf(oc, nil, corev1.EventTypeWarning, eventAffinityGroupFailed, "DeleteAffinityGroup",
			"OVirtProvider %s is gone: affinity group %s in oVirt cluster %s is left in oVirt", g.Provider, g.Name, g.OVirtCluster)
		return true, nil
	}
	if errors.Is(err, errProviderRefuses) {
		log.Info("The OVirtProvider of an affinity group no longer serves this namespace; forgetting the group (delete it in oVirt by hand)",
			"OVirtProvider", g.Provider, "reason", err.Error())
		r.Recorder.Eventf(oc, nil, corev1.EventTypeWarning, eventAffinityGroupFailed, "DeleteAffinityGroup",
			"%v: affinity group %s in oVirt cluster %s is left in oVirt", err, g.Name, g.OVirtCluster)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if g.ID == "" || g.OVirtClusterID == "" {
		return true, nil
	}
	groups, err := c.ListAffinityGroups(ctx, g.OVirtClusterID)
	if errors.Is(err, ovirt.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(groups, func(a ovirt.AffinityGroup) bool { return a.ID == g.ID })
	if i < 0 {
		return true, nil
	}
	key, err := r.ownershipKey(ctx, oc, false)
	if err != nil {
		return false, err
	}
	if !ownsGroup(groups[i].Description, oc, r.ManagementClusterID, key, groups[i].Name) {
		log.Info("Not deleting an affinity group that no longer carries the cluster's marker")
		return true, nil
	}
	if err := c.RemoveAffinityGroup(ctx, g.OVirtClusterID, g.ID); err != nil && !errors.Is(err, ovirt.ErrNotFound) {
		return false, err
	}
	log.Info("Deleted an affinity group")
	r.Recorder.Eventf(oc, nil, corev1.EventTypeNormal, eventAffinityGroupDeleted, "DeleteAffinityGroup",
		"Deleted affinity group %s in oVirt cluster %s", g.Name, g.OVirtCluster)
	return true, nil
}

// deleteGroups deletes every recorded group (the cluster is being deleted). done is true once
// none is left.
func (r *OVirtClusterReconciler) deleteGroups(ctx context.Context, oc *infrav1.OVirtCluster) (bool, error) {
	e := &engines{r: r, oc: oc, clients: map[string]ovirt.Client{}, errs: map[string]error{}}
	kept := oc.Status.AffinityGroups[:0:0]
	var errs []error
	for _, g := range oc.Status.AffinityGroups {
		gone, err := r.deleteGroup(ctx, e, oc, g)
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting affinity group %s: %w", g.Name, err))
		}
		if !gone {
			kept = append(kept, g)
		}
	}
	if len(kept) > 0 && oc.DeletionTimestamp != nil && r.now().Sub(oc.DeletionTimestamp.Time) >= groupDeletionPatience {
		// Best effort: the cluster does not wait for the Engine forever.
		for _, g := range kept {
			r.Recorder.Eventf(oc, nil, corev1.EventTypeWarning, eventAffinityGroupFailed, "DeleteAffinityGroup",
				"Gave up deleting affinity group %s in oVirt cluster %s after %s (%v): it is left in oVirt; delete it there by hand",
				g.Name, g.OVirtCluster, groupDeletionPatience, errors.Join(errs...))
		}
		ctrl.LoggerFrom(ctx).Info("Gave up deleting the cluster's affinity groups; they are left in oVirt", "groups", len(kept), "error", errors.Join(errs...))
		oc.Status.AffinityGroups = nil
		return true, nil
	}
	oc.Status.AffinityGroups = kept
	if len(kept) > 0 {
		v1beta1conditions.MarkFalse(oc, infrav1.AffinityGroupsReadyCondition, infrav1.AffinityGroupFailedReason, clusterv1.ConditionSeverityWarning,
			"deleting the affinity groups (given up %s after the deletion): %v", groupDeletionPatience, errors.Join(errs...))
	}
	return len(kept) == 0, errors.Join(errs...)
}

func (r *OVirtClusterReconciler) checkInterval() time.Duration {
	if r.CheckInterval > 0 {
		return r.CheckInterval
	}
	return 10 * time.Minute
}

func (r *OVirtClusterReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
