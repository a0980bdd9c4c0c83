package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// Event reasons of OVirtMachine about placement.
const (
	eventAffinityGroupJoined      = "AffinityGroupJoined"
	eventAffinityGroupUnavailable = "AffinityGroupUnavailable"
	eventNoHost                   = "NoHostForVM"
)

// ovirtCluster returns the OVirtCluster of the machine's Cluster (its infrastructureRef), nil
// when the Cluster has none of that kind or it does not exist yet.
func (r *OVirtMachineReconciler) ovirtCluster(ctx context.Context, s *machineScope) (*infrav1.OVirtCluster, error) {
	if s.oc != nil || s.cluster == nil {
		return s.oc, nil
	}
	ref := s.cluster.Spec.InfrastructureRef
	if ref.Kind != "OVirtCluster" || ref.APIGroup != infrav1.GroupVersion.Group || ref.Name == "" {
		return nil, nil
	}
	oc := &infrav1.OVirtCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: ref.Name}, oc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading OVirtCluster %s: %w", ref.Name, err)
	}
	s.oc = oc
	return oc, nil
}

// placement is where a new VM goes.
type placement struct {
	failureDomain string
	ovirtCluster  string
	// storageDomain is the failure domain's storage domain, "" for the machine's.
	storageDomain string
}

// resolvePlacement returns where the machine's VM is created: the failure domain's oVirt
// cluster (and storage domain) when the Machine or the OVirtMachine names a failure domain,
// else spec.ovirtcluster. A miss is a failure domain the OVirtCluster does not define.
func (r *OVirtMachineReconciler) resolvePlacement(ctx context.Context, s *machineScope) (placement, *lookupMiss, error) {
	om := s.om
	fd := om.Spec.FailureDomain
	if s.machine != nil && s.machine.Spec.FailureDomain != "" {
		if fd != "" && fd != s.machine.Spec.FailureDomain {
			return placement{}, &lookupMiss{infrav1.FailureDomainNotFoundReason, fmt.Sprintf(
				"the Machine's spec.failureDomain %q differs from the OVirtMachine's spec.failureDomain %q: they must agree (the OVirtMachine's cannot change once set)",
				s.machine.Spec.FailureDomain, fd)}, nil
		}
		fd = s.machine.Spec.FailureDomain
	}
	if fd == "" {
		return placement{ovirtCluster: om.Spec.OVirtCluster}, nil, nil
	}
	oc, err := r.ovirtCluster(ctx, s)
	if err != nil {
		return placement{}, nil, err
	}
	d, ok := failureDomain(oc, fd)
	if !ok {
		where := "the Cluster has no OVirtCluster"
		if oc != nil {
			where = fmt.Sprintf("OVirtCluster %s defines: %s", oc.Name, failureDomainNames(oc))
		}
		return placement{}, &lookupMiss{infrav1.FailureDomainNotFoundReason, fmt.Sprintf(
			"failure domain %q (the Machine's spec.failureDomain) is not a failure domain of the cluster (%s): add it to the OVirtCluster's spec.failureDomains or choose one of those",
			fd, where)}, nil
	}
	om.Spec.FailureDomain = fd
	return placement{failureDomain: fd, ovirtCluster: d.OVirtCluster, storageDomain: d.StorageDomainName}, nil, nil
}

// neededGroup is an affinity group the machine's VM joins.
type neededGroup struct {
	name string
	// managed groups are the cluster's (status.affinityGroups); the others are spec.affinityGroups.
	managed   bool
	role      string
	enforcing bool
}

// neededGroups are the affinity groups of the machine: its managed group, then spec.affinityGroups.
func neededGroups(om *infrav1.OVirtMachine, oc *infrav1.OVirtCluster) []neededGroup {
	var out []neededGroup
	if oc != nil {
		if role, policy := affinityRole(om, oc); role != "" {
			out = append(out, neededGroup{name: groupName(oc, role, placementCluster(om, oc)), managed: true, role: role, enforcing: policy == infrav1.AntiAffinityHard})
		}
	}
	for _, n := range om.Spec.AffinityGroups {
		out = append(out, neededGroup{name: n})
	}
	return out
}

// reconcileAffinity adds the VM to its affinity groups before it first starts, so that oVirt
// places it by their rules. A VM that already runs (a machine created before the groups
// existed) joins them as soon as they exist, without waiting.
func (r *OVirtMachineReconciler) reconcileAffinity(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	om, vm := s.om, s.vm
	oc, err := r.ovirtCluster(ctx, s)
	if err != nil {
		return stop(ctrl.Result{}, err)
	}
	needed := neededGroups(om, oc)
	if len(needed) == 0 {
		return next()
	}
	firstStart := vm.Status == ovirt.VMStatusDown && !provisioned(om) && !v1beta1conditions.IsTrue(om, infrav1.MachineOnCondition)
	wait := func(reason, format string, args ...any) (bool, ctrl.Result, error) {
		if !firstStart {
			s.log.V(2).Info("Not in an affinity group yet", "reason", reason, "detail", fmt.Sprintf(format, args...))
			return next()
		}
		v1beta1conditions.MarkFalse(om, infrav1.MachineOnCondition, reason, clusterv1.ConditionSeverityInfo, format, args...)
		return stop(ctrl.Result{RequeueAfter: r.Intervals.VMPoll}, nil)
	}
	var listed []ovirt.AffinityGroup
	listedOK := false
	for _, g := range needed {
		if slices.Contains(om.Status.AffinityGroups, g.name) {
			continue
		}
		var groupID string
		if g.managed {
			rec, ok := findGroup(oc, g.role, om.Spec.Provider, placementCluster(om, oc))
			if !ok && !g.enforcing && groupsFailed(oc) {
				// Soft is best effort: a group the OVirtCluster could not create (the Engine
				// refused it, for example an account without the permission) does not keep the
				// VM from starting; it joins the group once it exists.
				if firstStart {
					msg := fmt.Sprintf("affinity group %s could not be created (OVirtCluster %s, AffinityGroupsReady: %s); anti-affinity Soft is best effort: "+
						"the VM starts without it and joins it once it exists. If the Engine refused for lack of permission, the Engine account needs "+
						"MANIPULATE_AFFINITY_GROUPS on the VM's oVirt cluster (docs/operations.md, \"The Engine account's permissions\"), or set the policy to None",
						g.name, oc.Name, v1beta1conditions.GetMessage(oc, infrav1.AffinityGroupsReadyCondition))
					s.log.Info("Starting the VM without its Soft anti-affinity group", "group", g.name)
					r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventAffinityGroupUnavailable, "JoinAffinityGroup", "%s", msg)
				}
				continue
			}
			if !ok || rec.Enforcing != g.enforcing {
				return wait(infrav1.WaitingForAffinityGroupReason, "waiting for the OVirtCluster to create affinity group %s before the VM first starts (see its AffinityGroupsReady condition)", g.name)
			}
			groupID = rec.ID
		} else {
			notAllowed := func(why string) (bool, ctrl.Result, error) {
				msg := fmt.Sprintf("affinity group %q (spec.affinityGroups) %s; the VM joins no group and does not start", g.name, why)
				if !firstStart {
					s.log.Info("Not joining an affinity group of spec.affinityGroups", "group", g.name, "why", why)
					return next()
				}
				if v1beta1conditions.GetReason(om, infrav1.MachineOnCondition) != infrav1.AffinityGroupNotAllowedReason {
					r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, infrav1.AffinityGroupNotAllowedReason, "JoinAffinityGroup", "%s", msg)
				}
				v1beta1conditions.MarkFalse(om, infrav1.MachineOnCondition, infrav1.AffinityGroupNotAllowedReason, clusterv1.ConditionSeverityWarning, "%s", msg)
				return stop(r.retryLater(), nil)
			}
			if s.provider == nil || !s.provider.Spec.AffinityGroupAllowed(g.name) {
				provider := om.Spec.Provider
				return notAllowed(fmt.Sprintf("is not allowed by OVirtProvider %s: its administrator lists the groups machines may join in spec.allowedAffinityGroups", provider))
			}
			if !listedOK {
				listed, err = s.ovirt.ListAffinityGroups(ctx, vm.ClusterID)
				if err != nil {
					return stop(ctrl.Result{}, fmt.Errorf("listing the affinity groups of the VM's oVirt cluster: %w", err))
				}
				listedOK = true
			}
			i := slices.IndexFunc(listed, func(a ovirt.AffinityGroup) bool { return a.Name == g.name })
			if i < 0 {
				if firstStart {
					v1beta1conditions.MarkFalse(om, infrav1.MachineOnCondition, infrav1.AffinityGroupNotFoundReason, clusterv1.ConditionSeverityWarning,
						"affinity group %q (spec.affinityGroups) does not exist in the VM's oVirt cluster: create it in oVirt (Compute > Clusters > Affinity Groups) or remove it from the OVirtMachineTemplate", g.name)
					return stop(r.retryLater(), nil)
				}
				s.log.Info("An affinity group of spec.affinityGroups does not exist in oVirt", "group", g.name)
				continue
			}
			if strings.Contains(listed[i].Description, groupMarkerPrefix) {
				// A group CAPOV manages for a cluster (this one's are joined through antiAffinity).
				return notAllowed("is an anti-affinity group CAPOV manages for a cluster, which no machine joins by name")
			}
			groupID = listed[i].ID
		}
		if err := s.ovirt.AddVMToAffinityGroup(ctx, vm.ClusterID, groupID, vm.ID); err != nil {
			if errors.Is(err, ovirt.ErrNotFound) {
				return wait(infrav1.WaitingForAffinityGroupReason, "affinity group %s is gone from oVirt; waiting for it to be created again", g.name)
			}
			return stop(ctrl.Result{}, fmt.Errorf("adding VM %s to affinity group %s: %w", vm.ID, g.name, err))
		}
		om.Status.AffinityGroups = append(om.Status.AffinityGroups, g.name)
		s.log.Info("Added the VM to an affinity group", "vmID", vm.ID, "group", g.name)
		r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventAffinityGroupJoined, "JoinAffinityGroup", "Added VM %s to affinity group %s", vm.ID, g.name)
	}
	return next()
}

// groupsFailed reports whether the OVirtCluster could not create or keep its affinity groups
// (the Engine refused or failed), as opposed to not having got to them yet.
func groupsFailed(oc *infrav1.OVirtCluster) bool {
	if oc == nil || !v1beta1conditions.IsFalse(oc, infrav1.AffinityGroupsReadyCondition) {
		return false
	}
	r := v1beta1conditions.GetReason(oc, infrav1.AffinityGroupsReadyCondition)
	return r == infrav1.AffinityGroupFailedReason || r == infrav1.AffinityGroupNameTakenReason
}

// syncHostLabel puts the VM's host on the Machine as node.cluster.x-k8s.io/ovirt-host, which
// Cluster API copies to the Node.
func (r *OVirtMachineReconciler) syncHostLabel(ctx context.Context, s *machineScope) error {
	if s.machine == nil || s.om.Status.Host == "" {
		return nil
	}
	want := labelValue(s.om.Status.Host)
	if want == "" || s.machine.Labels[infrav1.HostLabel] == want {
		return nil
	}
	base := s.machine.DeepCopy()
	if s.machine.Labels == nil {
		s.machine.Labels = map[string]string{}
	}
	s.machine.Labels[infrav1.HostLabel] = want
	if err := r.Client.Patch(ctx, s.machine, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("labelling Machine %s with its oVirt host: %w", s.machine.Name, err)
	}
	s.log.V(2).Info("Labelled the Machine with its oVirt host", "host", want)
	return nil
}

// clusterToPlacementMachines maps an OVirtCluster whose failure domains or affinity groups changed
// to the OVirtMachines of its Cluster, so that machines waiting for a group start at once.
func (r *OVirtMachineReconciler) clusterToPlacementMachines(ctx context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return nil
	}
	list := &infrav1.OVirtMachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return nil
	}
	return requestsFor(list.Items, func(om *infrav1.OVirtMachine) bool { return om.Status.VMID == "" || !provisioned(om) })
}

// groupsOrDomainsChanged passes OVirtCluster updates of status.affinityGroups or
// spec.failureDomains.
func groupsOrDomainsChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		DeleteFunc: func(event.DeleteEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*infrav1.OVirtCluster)
			n, ok2 := e.ObjectNew.(*infrav1.OVirtCluster)
			return ok1 && ok2 && (!slices.Equal(o.Status.AffinityGroups, n.Status.AffinityGroups) ||
				!slices.EqualFunc(o.Spec.FailureDomains, n.Spec.FailureDomains, func(a, b infrav1.OVirtFailureDomain) bool {
					return a.Name == b.Name && a.OVirtCluster == b.OVirtCluster && a.StorageDomainName == b.StorageDomainName
				}))
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
