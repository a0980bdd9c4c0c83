package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/annotations"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// reconcileDelete powers the VM off (gracefully, then hard after ShutdownTimeout), refuses to
// remove it while a non-system disk is attached (oVirt deletes every attached disk with the VM,
// and a CSI volume is user data), removes it and drops the finalizer once oVirt no longer knows
// it.
func (r *OVirtMachineReconciler) reconcileDelete(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	om := s.om
	if !controllerutil.ContainsFinalizer(om, infrav1.MachineFinalizer) {
		return ctrl.Result{}, nil
	}
	if _, moving := om.Annotations[deleteForMoveAnnotation]; moving {
		// clusterctl move: the object is recreated in the target cluster and the VM goes with it.
		s.log.Info("Dropping the finalizer without touching the VM: the machine is being moved by clusterctl")
		controllerutil.RemoveFinalizer(om, infrav1.MachineFinalizer)
		return ctrl.Result{}, nil
	}
	deleted := func(reason string, severity clusterv1.ConditionSeverity, format string, args ...any) {
		v1beta1conditions.MarkFalse(om, infrav1.MachineDeletedCondition, reason, severity, format, args...)
	}
	id := vmIDOf(om)
	p := &infrav1.OVirtProvider{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: om.Spec.Provider}, p); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		if neverReachedOVirt(om) {
			return r.finishDeleteWithoutOVirt(ctx, s, fmt.Sprintf("OVirtProvider %q does not exist", om.Spec.Provider))
		}
		deleted(infrav1.ProviderNotFoundReason, clusterv1.ConditionSeverityWarning,
			"cannot delete VM %s: OVirtProvider %q does not exist; recreate it so that the VM can be removed", id, om.Spec.Provider)
		return ctrl.Result{RequeueAfter: r.Intervals.Retry}, nil
	}
	s.provider = p
	if ok, err := r.namespaceAllowed(ctx, s, p, infrav1.MachineDeletedCondition); err != nil || !ok {
		// Not even a deletion: in a namespace the provider refuses, spec.providerID and the
		// owner marker are the only proof, and the provider's owner decided against it.
		return r.retryLater(), err
	}
	cl, _, err := r.Connector.Connect(ctx, p)
	if err != nil {
		problem := Classify(err)
		if neverReachedOVirt(om) {
			return r.finishDeleteWithoutOVirt(ctx, s, fmt.Sprintf("OVirtProvider %s cannot be used (%s)", p.Name, problem.Reason))
		}
		deleted(problem.Reason, clusterv1.ConditionSeverityWarning, "cannot delete VM %s: OVirtProvider %s: %s", id, p.Name, problem.Message)
		return ctrl.Result{RequeueAfter: r.Intervals.Retry}, nil
	}
	s.ovirt = cl

	if id == "" {
		// The create call may have succeeded right before a crash that lost its result.
		name := vmNameOf(om)
		vms, err := cl.FindVMsByName(ctx, name)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("looking up VM %q: %w", name, err)
		}
		for _, vm := range vms {
			if ownedBy(vm, om) {
				id = vm.ID
				break
			}
		}
		if id == "" {
			return r.finishDelete(ctx, s)
		}
	}
	vm, err := cl.GetVM(ctx, id)
	if err != nil {
		if errors.Is(err, ovirt.ErrNotFound) {
			return r.vmNotFoundOnDelete(ctx, s, id)
		}
		return ctrl.Result{}, fmt.Errorf("reading VM %s: %w", id, err)
	}
	s.vm = vm
	// Nothing is written to a VM that does not prove it is this object's (spec.providerID may
	// name anybody's VM); the finalizer stays until a human decides.
	if ok, err := r.proveOwnership(ctx, s, vm, infrav1.MachineDeletedCondition, false); err != nil || !ok {
		return r.retryLater(), err
	}
	r.recordEngine(ctx, s)

	switch vm.Status {
	case ovirt.VMStatusDown:
	case ovirt.VMStatusImageLocked:
		return r.waitLocked(s, infrav1.MachineDeletedCondition, infrav1.VMDeletingReason, "waiting for oVirt to unlock VM %s", vm.ID), nil
	default:
		return r.powerOff(ctx, s)
	}

	// The disks a removal would delete are read from the VM's own disk-attachments collection,
	// never from the inline one of GetVM: an Engine or proxy that ignores follow returns no
	// inline disks, and "no disk seen" must not be taken for "no CSI disk attached".
	attached, err := cl.ListDiskAttachments(ctx, vm.ID)
	if err != nil {
		if errors.Is(err, ovirt.ErrNotFound) {
			return r.vmNotFoundOnDelete(ctx, s, vm.ID)
		}
		deleted(infrav1.VMDeleteFailedReason, clusterv1.ConditionSeverityWarning,
			"not removing VM %s: cannot confirm which disks are attached to it (%v); retrying", vm.ID, err)
		s.log.Info("Not removing the VM: its disk attachments cannot be read", "vmID", vm.ID, "error", err.Error())
		return r.retryLater(), nil
	}
	vm.Disks = attached
	if msg := systemDisksUnknown(om, vm); msg != "" {
		if v1beta1conditions.GetReason(om, infrav1.MachineDeletedCondition) != infrav1.SystemDisksUnknownReason {
			r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventDeletionBlocked, "DeleteVM", "%s", msg)
		}
		deleted(infrav1.SystemDisksUnknownReason, clusterv1.ConditionSeverityWarning, "%s", msg)
		s.log.Info("Deletion blocked: the VM's system disks are not known", "vmID", vm.ID)
		return ctrl.Result{RequeueAfter: r.Intervals.NonSystemDiskRetry}, nil
	}
	_, other := systemDisks(om, vm)
	// The machine's own data disks (their marker's proof verifies for this VM) go with it;
	// anything else attached (a CSI volume, a disk whose ownership is not proven) blocks.
	other, err = r.withoutOwnDataDisks(ctx, s, vm.ID, vm.Disks, other)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(other) > 0 {
		names := make([]string, 0, len(other))
		for _, d := range other {
			name := d.Alias
			if name == "" {
				name = d.ID
			}
			names = append(names, name)
		}
		if v1beta1conditions.GetReason(om, infrav1.MachineDeletedCondition) != infrav1.VMHasNonSystemDiskReason {
			r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventDeletionBlocked, "DeleteVM",
				"VM %s has non-system disks attached (%s); deletion waits until they are detached", vm.ID, strings.Join(names, ", "))
		}
		deleted(infrav1.VMHasNonSystemDiskReason, clusterv1.ConditionSeverityWarning, "%s", infrav1.VMHasNonSystemDiskMessage)
		s.log.Info("Deletion blocked by non-system disks", "vmID", vm.ID, "disks", names)
		return ctrl.Result{RequeueAfter: r.Intervals.NonSystemDiskRetry}, nil
	}

	if err := cl.RemoveVM(ctx, vm.ID); err != nil {
		switch {
		case errors.Is(err, ovirt.ErrNotFound):
			return r.vmNotFoundOnDelete(ctx, s, vm.ID)
		case errors.Is(err, ovirt.ErrLocked), errors.Is(err, ovirt.ErrConflict):
			deleted(infrav1.VMDeletingReason, clusterv1.ConditionSeverityInfo, "VM %s is locked by oVirt; retrying", vm.ID)
			return r.waitFor(s.om, infrav1.MachineDeletedCondition), nil
		case errors.Is(err, ovirt.ErrInvalid):
			deleted(infrav1.VMDeleteFailedReason, clusterv1.ConditionSeverityWarning, "oVirt refused to remove VM %s: %v", vm.ID, err)
			return r.retryLater(), nil
		}
		return ctrl.Result{}, fmt.Errorf("removing VM %s: %w", vm.ID, err)
	}
	s.log.Info("Removed VM", "vmID", vm.ID)
	r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventVMRemoved, "DeleteVM", "Removed VM %s", vm.ID)
	deleted(infrav1.VMDeletingReason, clusterv1.ConditionSeverityInfo, "oVirt is removing VM %s", vm.ID)
	// Confirm with a read that it is gone before dropping the finalizer.
	return r.waitFor(s.om, infrav1.MachineDeletedCondition), nil
}

// powerOff asks the guest to shut down, and stops the VM once ShutdownTimeout has passed since
// the first request.
func (r *OVirtMachineReconciler) powerOff(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	om, vm := s.om, s.vm
	now := r.Now()
	started, err := time.Parse(time.RFC3339, om.Annotations[shutdownStartedAnnotation])
	requested := err == nil
	if !requested {
		started = now
		if om.Annotations == nil {
			om.Annotations = map[string]string{}
		}
		om.Annotations[shutdownStartedAnnotation] = now.UTC().Format(time.RFC3339)
	}
	action, reason := ovirt.PowerShutdown, "shutting down"
	stops, lastStop := stopRequests(om)
	if now.Sub(started) >= r.Intervals.ShutdownTimeout {
		action, reason = ovirt.PowerStop, "powering off (graceful shutdown did not finish in time)"
		if stops > 0 {
			if wait := r.stopBackoff(stops) - now.Sub(lastStop); wait > 0 {
				// Asked to stop already: wait before asking again, longer each time.
				if stops >= stopRequestsBeforeWarning {
					// The condition set with the last request stays.
					return ctrl.Result{RequeueAfter: wait}, nil
				}
				v1beta1conditions.MarkFalse(om, infrav1.MachineDeletedCondition, infrav1.VMPoweringOffReason, clusterv1.ConditionSeverityInfo, "VM %s is %s", vm.ID, reason)
				return ctrl.Result{RequeueAfter: min(wait, r.waitFor(s.om, infrav1.MachineDeletedCondition).RequeueAfter)}, nil
			}
		}
	} else if requested || vm.Status == ovirt.VMStatusPoweringDown {
		// Asked once already: give the guest time instead of repeating the request.
		v1beta1conditions.MarkFalse(om, infrav1.MachineDeletedCondition, infrav1.VMPoweringOffReason, clusterv1.ConditionSeverityInfo, "VM %s is %s", vm.ID, reason)
		return r.waitFor(s.om, infrav1.MachineDeletedCondition), nil
	}
	if action == ovirt.PowerStop {
		// Counted before it is sent: a stop the Engine refuses or fails counts as much as one
		// it accepts and that does nothing.
		stops++
		setStopRequests(om, stops, now)
	}
	if err := s.ovirt.Power(ctx, vm.ID, action); err != nil && !errors.Is(err, ovirt.ErrNotFound) {
		if action == ovirt.PowerStop && stops >= stopRequestsBeforeWarning {
			msg := fmt.Sprintf("VM %s is still %s after %d stop requests since %s (the last: %v); CAPOV asks again at most every %s: check the VM and its host in oVirt",
				vm.ID, vm.Status, stops, started.UTC().Format(time.RFC3339), err, maxStopBackoff)
			if stops == stopRequestsBeforeWarning {
				r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventVMNotStopping, "PowerOff", "%s", msg)
			}
			v1beta1conditions.MarkFalse(om, infrav1.MachineDeletedCondition, infrav1.VMNotStoppingReason, clusterv1.ConditionSeverityWarning, "%s", msg)
			return ctrl.Result{RequeueAfter: r.stopBackoff(stops)}, nil
		}
		if errors.Is(err, ovirt.ErrLocked) || errors.Is(err, ovirt.ErrConflict) || errors.Is(err, ovirt.ErrInvalid) {
			v1beta1conditions.MarkFalse(om, infrav1.MachineDeletedCondition, infrav1.VMPoweringOffReason, clusterv1.ConditionSeverityInfo,
				"VM %s: %s refused (%v); retrying", vm.ID, action, err)
			return r.waitFor(s.om, infrav1.MachineDeletedCondition), nil
		}
		return ctrl.Result{}, fmt.Errorf("%s VM %s: %w", action, vm.ID, err)
	}
	ev := eventVMShuttingDown
	if action == ovirt.PowerStop {
		ev = eventVMStopped
		if stops >= stopRequestsBeforeWarning {
			msg := fmt.Sprintf("VM %s is still %s after %d stop requests since %s; CAPOV asks again at most every %s: check the VM and its host in oVirt",
				vm.ID, vm.Status, stops, started.UTC().Format(time.RFC3339), maxStopBackoff)
			if stops == stopRequestsBeforeWarning {
				r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventVMNotStopping, "PowerOff", "%s", msg)
				s.log.Info("The VM does not stop", "vmID", vm.ID, "stopRequests", stops)
			}
			v1beta1conditions.MarkFalse(om, infrav1.MachineDeletedCondition, infrav1.VMNotStoppingReason, clusterv1.ConditionSeverityWarning, "%s", msg)
			return ctrl.Result{RequeueAfter: r.stopBackoff(stops)}, nil
		}
		if stops > 1 {
			// A repeat is not news: the first stop request and the warning are.
			v1beta1conditions.MarkFalse(om, infrav1.MachineDeletedCondition, infrav1.VMPoweringOffReason, clusterv1.ConditionSeverityInfo, "VM %s is %s", vm.ID, reason)
			return ctrl.Result{RequeueAfter: r.stopBackoff(stops)}, nil
		}
	}
	r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, ev, "PowerOff", "VM %s: %s", vm.ID, reason)
	v1beta1conditions.MarkFalse(om, infrav1.MachineDeletedCondition, infrav1.VMPoweringOffReason, clusterv1.ConditionSeverityInfo, "VM %s is %s", vm.ID, reason)
	return r.waitFor(s.om, infrav1.MachineDeletedCondition), nil
}

// neverReachedOVirt reports whether no VM can exist for the machine: no VM id was recorded, no
// create was ever requested (the annotation is persisted before the request is sent) and the
// machine never had a working connection (objects of earlier releases, which had no
// annotation).
func neverReachedOVirt(om *infrav1.OVirtMachine) bool {
	return vmIDOf(om) == "" && !createRequested(om) && !v1beta1conditions.IsTrue(om, infrav1.CanConnectToOVirtCondition)
}

// vmNotFoundOnDelete finishes the deletion of a machine whose VM oVirt does not know, unless
// the Engine that answers is not the one the VM was found on.
func (r *OVirtMachineReconciler) vmNotFoundOnDelete(ctx context.Context, s *machineScope, vmID string) (ctrl.Result, error) {
	if other, err := r.otherEngine(ctx, s, infrav1.MachineDeletedCondition, vmID); err != nil || other {
		return r.retryLater(), err
	}
	return r.finishDelete(ctx, s)
}

// systemDisksUnknown returns why the VM cannot be removed safely when its system disks were
// never recorded ("" when it can): with nothing recorded only a bootable disk counts as the
// template's, and a VM with several bootable disks leaves CAPOV unsure which one is.
func systemDisksUnknown(om *infrav1.OVirtMachine, vm *ovirt.VM) string {
	if len(om.Status.SystemDiskIDs) > 0 || ptr.Deref(om.Status.SystemDisksPending, false) {
		return ""
	}
	var bootable []string
	for _, d := range vm.Disks {
		if d.Bootable {
			bootable = append(bootable, d.ID)
		}
	}
	if len(bootable) <= 1 {
		return ""
	}
	return fmt.Sprintf("not removing VM %s: status.systemDiskIDs was never recorded (status lost, e.g. by a restore) and the VM has %d bootable disks (%s), "+
		"so CAPOV cannot tell the template's from a volume; detach the disks that must survive, or list the template's in status.systemDiskIDs (docs/operations.md, \"Deletion\")",
		vm.ID, len(bootable), strings.Join(bootable, ", "))
}

// finishDeleteWithoutOVirt drops the finalizer of a machine that never reached oVirt, so that a
// cluster whose provider was never usable can still be deleted.
func (r *OVirtMachineReconciler) finishDeleteWithoutOVirt(ctx context.Context, s *machineScope, why string) (ctrl.Result, error) {
	s.log.Info("Deleting without contacting oVirt: no VM was ever created for this machine", "why", why)
	r.Recorder.Eventf(s.om, nil, corev1.EventTypeNormal, eventVMRemoved, "DeleteVM",
		"No VM was created for this machine (%s); nothing to remove in oVirt", why)
	return r.finishDelete(ctx, s)
}

func (r *OVirtMachineReconciler) finishDelete(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	// The VM is gone: its addresses go back to their pools and its host devices are free again
	// before the finalizer is dropped.
	if err := r.releaseIPAddresses(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.releaseHostDeviceClaims(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	// status.initialization.provisioned stays true (the v1beta1 status.ready used to become
	// false here): Ready says that the machine is gone (updateMachineStatus).
	v1beta1conditions.MarkTrue(s.om, infrav1.MachineDeletedCondition)
	if paused, err := r.clusterPausedSince(ctx, s); err != nil || paused {
		return ctrl.Result{RequeueAfter: r.Intervals.Retry}, err
	}
	controllerutil.RemoveFinalizer(s.om, infrav1.MachineFinalizer)
	r.reads.forget(client.ObjectKeyFromObject(s.om))
	r.scheduled.forget(client.ObjectKeyFromObject(s.om))
	r.waits.forget(client.ObjectKeyFromObject(s.om))
	return ctrl.Result{}, nil
}

// clusterPausedSince reads the machine's Cluster from the API server before the finalizer is
// dropped: a reconcile of a deletion spends Engine calls after reading the Cluster from the
// cache, and the Cluster may have been paused meanwhile. The finalizer's removal is the only
// event that tells Cluster API's Machine controller the infrastructure is gone; paused, that
// controller drops the event, and the unpause does not wake it again (its Cluster watch fires
// when the control plane is initialized), so the Machine, and the Cluster's deletion, would wait
// for its resync (minutes). Kept until the unpause, which wakes this machine (the Cluster watch),
// the finalizer goes when Cluster API listens.
func (r *OVirtMachineReconciler) clusterPausedSince(ctx context.Context, s *machineScope) (bool, error) {
	if s.cluster == nil || r.APIReader == nil {
		return false, nil
	}
	c := &clusterv1.Cluster{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.cluster), c); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading Cluster %s before dropping the finalizer: %w", s.cluster.Name, err)
	}
	if !annotations.IsPaused(c, s.om) {
		return false, nil
	}
	s.log.Info("The VM is gone; keeping the finalizer until the Cluster is unpaused (it was paused during this reconcile)", "Cluster", klog.KObj(c))
	return true, nil
}
