package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/diskalias"
	"github.com/capov/capov/pkg/ovirt"
)

// GiB is the unit of osdisksizegb.
const GiB = int64(1) << 30

// Event reasons of OVirtMachine.
const (
	eventVMCreated         = "VMCreated"
	eventVMAdopted         = "VMAdopted"
	eventDuplicateVMs      = "DuplicateVMs"
	eventVMNameTaken       = "VMNameTaken"
	eventDisksUpdated      = "DisksUpdated"
	eventNICsUpdated       = "NICsUpdated"
	eventNetworkKept       = "NetworkKept"
	eventVMStarted         = "VMStarted"
	eventProviderIDSet     = "ProviderIDSet"
	eventConnectionFailed  = "ConnectionFailed"
	eventVMDeletedOOB      = "VMDeletedOutOfBand"
	eventVMShuttingDown    = "VMShuttingDown"
	eventVMStopped         = "VMStopped"
	eventDeletionBlocked   = "DeletionBlocked"
	eventVMRemoved         = "VMRemoved"
	eventCreateFailed      = "VMCreateFailed"
	eventDiskTooSmall      = "DiskSmallerThanTemplate"
	eventVnicProfileAbsent = "VnicProfileNotFound"
)

// phase is one step of the lifecycle. It returns done=false to stop the reconcile with res and
// err (waiting or failing); the steps after it do not run.
type phase func(ctx context.Context, s *machineScope) (done bool, res ctrl.Result, err error)

func (r *OVirtMachineReconciler) reconcileNormal(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	om := s.om
	if reason, _ := machineFailure(om); reason != nil && *reason == infrav1.OVirtEngineConnectionCriticalFailure {
		if _, err := r.clearStaleConnectionFailure(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	if reason, message := machineFailure(om); reason != nil {
		// A failure recorded before v1beta2 mirrored it (an earlier release) gets the mirror,
		// so that the documented reset, which removes status.failureReason, works for it too.
		if om.Status.FailureReason == nil { //nolint:staticcheck // the deprecated mirror
			setMachineFailure(om, *reason, ptr.Deref(message, ""))
		}
		// Product doc §5.4: nothing is retried until a human clears the failure
		// (status.deprecated.v1beta1.failureReason, the v1beta1 status.failureReason).
		s.log.Info("Not reconciling: status.deprecated.v1beta1.failureReason (v1beta1 status.failureReason) is set; fix the cause, then clear it",
			"failureReason", *reason)
		return ctrl.Result{}, nil
	}
	key := client.ObjectKeyFromObject(om)
	phases := []phase{
		r.waitForClusterInfrastructure,
		r.reconcileIPAddresses,
		r.connect,
		r.ensureVM,
		r.ensureHostDeviceClaims,
		r.reconcileTags,
		r.reconcileVMAddresses,
		r.reconcileDisks,
		r.reconcileNICs,
		r.reconcileAffinity,
		r.reconcilePower,
		r.reconcileNode,
		r.clearBootstrapData,
	}
	// A Ready machine re-reads its VM once per VMRefresh; one that waits for its Node (or for the
	// guest agent's addresses) once per four Node polls, to notice a VM that went away or got
	// its addresses.
	refresh := r.Intervals.VMRefresh
	settled := provisioned(om) && len(om.Status.Addresses) > 0
	if !settled {
		refresh = min(refresh, 4*r.Intervals.NodePoll)
	}
	// statusOnly is what is left for a machine whose VM is up as last observed (waiting for the
	// Node, or nothing for a Ready machine): it needs no oVirt call.
	cleared := r.KeepBootstrapData || ptr.Deref(om.Status.BootstrapDataCleared, false)
	statusOnly := func() {
		s.vm = &ovirt.VM{ID: om.Status.VMID, Name: vmNameOf(om), Status: ovirt.VMStatus(om.Status.VMState)}
		s.vmFromStatus = true
		phases = []phase{r.waitForClusterInfrastructure, r.reconcileNode}
		if !cleared {
			// Waiting for its Node: once it registers, the bootstrap data is cleared (the
			// client comes from the provider's cache, no Engine call).
			phases = []phase{r.waitForClusterInfrastructure, r.connect, r.reconcileNode, r.clearBootstrapData}
		}
	}
	observed := false
	if vmStepsDone(om) {
		if r.Inventory != nil && settled && cleared {
			// A Ready machine takes its VM from the provider's inventory: no call of its own.
			vm, complete, obs := r.Inventory.lookup(om.Spec.Provider, om.Status.VMID)
			s.log.V(4).Info("Ready machine: the inventory's view of its VM", "observation", obs, "complete", complete)
			switch {
			case obs == vmPending:
				// After a start or a leader change: the first inventory wakes the machine.
				return ctrl.Result{RequeueAfter: r.Inventory.pendingWait()}, nil
			case obs == vmMissingOnce || obs == vmPresent && vm.Status == ovirt.VMStatusUp && !complete && markerCurrent(vm, om, r.ManagementClusterID, clusterOf(s)):
				// Missing once proves nothing yet; an inventory without devices cannot refresh
				// the addresses: keep the last observation.
				statusOnly()
				observed = true
			case obs == vmPresent && vm.Status == ovirt.VMStatusUp && markerCurrent(vm, om, r.ManagementClusterID, clusterOf(s)):
				// Up as listed, and provably ours: the steps after ensureVM only refresh what is
				// recorded (addresses, host) and write nothing to oVirt.
				s.listed = vm
				observed = true
			case obs == vmPresent, obs == vmMissing:
				// Changed (down, another status, a marker to rewrite) or missing twice: act on a
				// read of its own (ensureVM), never on the listing.
				observed = true
			}
		}
		if !observed {
			if wait, fresh := r.reads.fresh(key, r.Now(), refresh); fresh {
				// The VM is up and was read less than VMRefresh ago. Reconciles triggered by
				// Machine or Node updates in between cost the Engine nothing.
				statusOnly()
				refresh = wait
			}
		}
	}
	for _, p := range phases {
		done, res, err := p(ctx, s)
		if s.vmRead {
			r.reads.record(key, r.Now())
			s.vmRead = false
		}
		if !done {
			return res, err
		}
	}
	if !provisioned(om) {
		s.log.Info("OVirtMachine is provisioned", "vmID", om.Status.VMID, "node", om.Status.NodeName)
	}
	om.Status.Initialization.Provisioned = ptr.To(true)
	return ctrl.Result{RequeueAfter: refresh}, nil
}

// vmStepsDone reports whether every step in oVirt is done and the VM was up when last read.
func vmStepsDone(om *infrav1.OVirtMachine) bool {
	for _, t := range []clusterv1.ConditionType{infrav1.MachineCreatedCondition, infrav1.MachineDiskResizedCondition,
		infrav1.MachineNetworkSetCondition, infrav1.MachineOnCondition} {
		if !v1beta1conditions.IsTrue(om, t) {
			return false
		}
	}
	return om.Status.VMID != "" && om.Status.VMState == string(ovirt.VMStatusUp)
}

func stop(res ctrl.Result, err error) (bool, ctrl.Result, error) { return false, res, err }

func next() (bool, ctrl.Result, error) { return true, ctrl.Result{}, nil }

// waitFor returns when to look again at a VM on which oVirt works (image copy, disk extension,
// boot, shutdown). When earlier machines taught how long the step takes, the VM is read once
// that time has passed since the wait began, with a small margin (a tenth of it, between 50ms
// and half the shortest wait) so that the read does not come early; otherwise (or once past
// it) the wait grows with the time already waited (a third of it). Waits stay between a tenth
// of VMPoll (at least 100ms) and VMPoll: short operations are noticed within a second, long
// ones cost few reads, and under a rate limit the Engine is not asked uselessly.
func (r *OVirtMachineReconciler) waitFor(om *infrav1.OVirtMachine, step clusterv1.ConditionType) ctrl.Result {
	lowest := r.recentRead()
	wait := lowest
	key := client.ObjectKeyFromObject(om)
	if ltt := v1beta1conditions.GetLastTransitionTime(om, step); ltt != nil && v1beta1conditions.IsFalse(om, step) {
		now, reason := r.Now(), v1beta1conditions.GetReason(om, step)
		ws := r.waits.begin(key, step, reason, now, ltt.Time)
		elapsed := now.Sub(ws.at)
		wait = max(lowest, elapsed/3)
		if expected, ok := r.waits.expected(step, reason); ok {
			margin := min(max(expected/10, 50*time.Millisecond), lowest/2)
			if expected+margin > elapsed {
				wait = max(expected-elapsed+margin, 10*time.Millisecond)
				r.waits.aimed(key, expected, margin)
			}
		}
	}
	wait = min(wait, r.Intervals.VMPoll)
	if waitingOnOVirt(om, step) {
		r.scheduled.set(key, r.Now().Add(wait))
	}
	return ctrl.Result{RequeueAfter: wait}
}

// recentRead is how long a VM read stays the truth for a machine's next reconcile: the shortest
// wait (a tenth of --vm-poll-interval, at least 100ms).
func (r *OVirtMachineReconciler) recentRead() time.Duration {
	return max(r.Intervals.VMPoll/10, 100*time.Millisecond)
}

// waitingOnOVirt reports whether the step waits for work oVirt does on its own (the disks being
// made or extended, the boot): nothing in the management cluster can end that wait sooner.
func waitingOnOVirt(om *infrav1.OVirtMachine, step clusterv1.ConditionType) bool {
	reason := v1beta1conditions.GetReason(om, step)
	switch step {
	case infrav1.MachineCreatedCondition:
		return reason == infrav1.VMCreatingReason
	case infrav1.MachineDiskResizedCondition:
		return reason == infrav1.DiskResizingReason
	case infrav1.MachineOnCondition:
		return reason == infrav1.VMPoweringUpReason
	}
	return false
}

func (r *OVirtMachineReconciler) retryLater() ctrl.Result {
	return ctrl.Result{RequeueAfter: r.Intervals.Retry}
}

func (r *OVirtMachineReconciler) waitForClusterInfrastructure(_ context.Context, s *machineScope) (bool, ctrl.Result, error) {
	if ptr.Deref(s.cluster.Status.Initialization.InfrastructureProvisioned, false) {
		return next()
	}
	if s.om.Status.VMID == "" {
		v1beta1conditions.MarkFalse(s.om, infrav1.MachineCreatedCondition, infrav1.WaitingForClusterInfrastructureReason,
			clusterv1.ConditionSeverityInfo, "waiting for the infrastructure of Cluster %s to be provisioned", s.cluster.Name)
	}
	// The Cluster watch reconciles again once it is provisioned.
	return stop(ctrl.Result{}, nil)
}

// connect gets the OVirtProvider and an oVirt client for it.
func (r *OVirtMachineReconciler) connect(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	om := s.om
	p := &infrav1.OVirtProvider{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: om.Spec.Provider}, p); err != nil {
		if !apierrors.IsNotFound(err) {
			return stop(ctrl.Result{}, err)
		}
		v1beta1conditions.MarkFalse(om, infrav1.CanConnectToOVirtCondition, infrav1.ProviderNotFoundReason, clusterv1.ConditionSeverityWarning,
			"OVirtProvider %q named by spec.provider does not exist; create it (kubectl get capovp lists the existing ones)", om.Spec.Provider)
		// The OVirtProvider watch reconciles again when it is created.
		return stop(ctrl.Result{}, nil)
	}
	s.provider = p
	if ok, err := r.namespaceAllowed(ctx, s, p, infrav1.CanConnectToOVirtCondition); err != nil || !ok {
		return stop(r.retryLater(), err)
	}
	cl, resolved, err := r.Connector.Connect(ctx, p)
	if err != nil {
		problem := Classify(err)
		severity := clusterv1.ConditionSeverityWarning
		if problem.Critical {
			severity = clusterv1.ConditionSeverityError
		}
		v1beta1conditions.MarkFalse(om, infrav1.CanConnectToOVirtCondition, problem.Reason, severity,
			"OVirtProvider %s: %s", p.Name, problem.Message)
		if problem.Critical && !provisioned(om) && vmIDOf(om) == "" && !createRequested(om) {
			// Product doc §4.3: a machine that cannot be created because its provider is
			// misconfigured stops here until a human fixed the provider and cleared the failure.
			// A machine with a VM (or a create in flight) never gets it: its VM must stay
			// manageable, and deletable, once the provider works again.
			setMachineFailure(om, infrav1.OVirtEngineConnectionCriticalFailure, fmt.Sprintf("OVirtProvider %s: %s (%s)", p.Name, problem.Message, problem.Reason))
			if om.Annotations == nil {
				om.Annotations = map[string]string{}
			}
			om.Annotations[failedSettingsAnnotation] = providerSettings(p, resolved)
			r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventConnectionFailed, "Connect",
				"Cannot use OVirtProvider %s (%s): fix it, then clear status.failureReason", p.Name, problem.Reason)
			return stop(ctrl.Result{}, nil)
		}
		s.log.Info("Cannot connect to oVirt; retrying", "OVirtProvider", p.Name, "reason", problem.Reason)
		return stop(ctrl.Result{RequeueAfter: min(r.Intervals.Retry, r.Intervals.VMPoll*3)}, nil)
	}
	v1beta1conditions.MarkTrue(om, infrav1.CanConnectToOVirtCondition)
	s.ovirt = cl
	return next()
}

// vmIDOf returns the VM id recorded in status or, after clusterctl move (which does not
// restore status), in spec.providerID; "" for a providerID that is not ovirt://<uuid> (see
// invalidProviderID: such an id would become part of Engine request paths).
func vmIDOf(om *infrav1.OVirtMachine) string {
	if om.Status.VMID != "" {
		return om.Status.VMID
	}
	id, _ := infrav1.VMIDFromProviderID(om.Spec.ProviderID)
	return id
}

// invalidProviderID reports a spec.providerID the admission webhook would have refused (written
// while it was down, or by a release without the check).
func invalidProviderID(om *infrav1.OVirtMachine) string {
	if om.Spec.ProviderID == "" || om.Status.VMID != "" {
		return ""
	}
	if _, ok := infrav1.VMIDFromProviderID(om.Spec.ProviderID); ok {
		return ""
	}
	return fmt.Sprintf("spec.providerID %q is not %s<vm-id> with a UUID; CAPOV does not act on it: remove spec.providerID (the manager sets it) or correct it", om.Spec.ProviderID, infrav1.ProviderIDPrefix)
}

// ensureVM finds the VM of the machine (by recorded id, else by name and owner marker) or
// creates it, and waits until oVirt has unlocked it.
func (r *OVirtMachineReconciler) ensureVM(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	om := s.om
	if msg := invalidProviderID(om); msg != "" {
		// The spec is immutable once providerID is set: nothing to retry.
		v1beta1conditions.MarkFalse(om, infrav1.MachineCreatedCondition, infrav1.InvalidProviderIDReason, clusterv1.ConditionSeverityError, "%s", msg)
		return stop(ctrl.Result{}, nil)
	}
	if s.listed != nil {
		// From the inventory, up and with this object's marker (reconcileNormal).
		return r.recordVM(ctx, s, s.listed)
	}
	if id := vmIDOf(om); id != "" {
		if wait, ok := r.scheduled.ahead(client.ObjectKeyFromObject(om), r.Now()); ok {
			// oVirt is making its disks or booting it, and its next read is scheduled: a
			// reconcile in between costs the Engine nothing (docs/operations.md, "Work-queue
			// order and scheduled reads").
			return stop(ctrl.Result{RequeueAfter: wait}, nil)
		}
		if wait, ok := r.reads.fresh(client.ObjectKeyFromObject(om), r.Now(), r.recentRead()); ok {
			// Read less than that ago: a reconcile this soon comes from an event that raced the
			// status patch of that read (the Node registering as its VM came up), and runs on a
			// cache without it. Another read would tell nothing new; the patch's own event
			// brings the machine back with what the read found.
			return stop(ctrl.Result{RequeueAfter: wait}, nil)
		}
		vm, err := s.ovirt.GetVM(ctx, id)
		if err != nil {
			if errors.Is(err, ovirt.ErrNotFound) {
				if other, err := r.otherEngine(ctx, s, infrav1.MachineCreatedCondition, id); err != nil || other {
					return stop(r.retryLater(), err)
				}
				return r.vmGone(s, id)
			}
			return stop(ctrl.Result{}, fmt.Errorf("reading VM %s: %w", id, err))
		}
		// spec.providerID may have been written by anyone who may write this object, or copied
		// with it: the VM must prove that it is this object's before anything is written to it.
		if ok, err := r.proveOwnership(ctx, s, vm, infrav1.MachineCreatedCondition, true); err != nil || !ok {
			return stop(r.retryLater(), err)
		}
		return r.recordVM(ctx, s, vm)
	}

	if createRequested(om) {
		// A create may have been sent (and its answer lost): the VM is looked up by name.
		// Without the annotation, written before every create request and kept by moves and
		// restores, no VM of this object exists; one of another is the Engine's to refuse (a
		// name in use), and createVM looks the name up then.
		if found, cont, res, err := r.adoptByName(ctx, s, true); found {
			return cont, res, err
		}
	}
	return r.createVM(ctx, s)
}

// adoptByName looks the machine's VM up by name. found is false when no VM has the name;
// otherwise the lookup decided the step, whose result is cont, res and err: a VM of this object
// adopted and recorded, duplicates or another's VM of that name reported, or an error.
// mayBeOurCreate tells whether a create request of this object may have made the VM (then a
// down VM has only the template's disks); false after the Engine refused this object's create.
func (r *OVirtMachineReconciler) adoptByName(ctx context.Context, s *machineScope, mayBeOurCreate bool) (found, cont bool, res ctrl.Result, err error) {
	om := s.om
	name := vmNameOf(om)
	vms, err := s.ovirt.FindVMsByName(ctx, name)
	if err != nil {
		return true, false, ctrl.Result{}, fmt.Errorf("looking up VM %q: %w", name, err)
	}
	var ours []ovirt.VM
	for _, vm := range vms {
		if ownedBy(vm, om) {
			ours = append(ours, vm)
		}
	}
	switch {
	case len(ours) > 1:
		ids := make([]string, 0, len(ours))
		for _, vm := range ours {
			ids = append(ids, vm.ID)
		}
		v1beta1conditions.MarkFalse(om, infrav1.MachineCreatedCondition, infrav1.DuplicateVMsReason, clusterv1.ConditionSeverityError,
			"%d VMs named %q carry this OVirtMachine's owner marker (%s); remove all but one in oVirt", len(ours), name, strings.Join(ids, ", "))
		r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventDuplicateVMs, "FindVM", "Found %d VMs for this machine: %s", len(ours), strings.Join(ids, ", "))
		return true, false, r.retryLater(), nil
	case len(ours) == 1:
		s.log.Info("Adopting the VM created for this OVirtMachine", "vmID", ours[0].ID)
		r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventVMAdopted, "FindVM", "Adopted VM %s created earlier for this machine", ours[0].ID)
		om.Status.VMID = ours[0].ID
		om.Spec.ProviderID = infrav1.ProviderIDPrefix + ours[0].ID
		vm, err := s.ovirt.GetVM(ctx, ours[0].ID)
		if err != nil {
			return true, false, ctrl.Result{}, fmt.Errorf("reading VM %s: %w", ours[0].ID, err)
		}
		if mayBeOurCreate && (vm.Status == ovirt.VMStatusDown || vm.Status == ovirt.VMStatusImageLocked) {
			// Created for this very object (same UID) and never started: no disk other than
			// the template's can be attached yet.
			om.Status.SystemDisksPending = ptr.To(true)
		}
		cont, res, err = r.recordVM(ctx, s, vm)
		return true, cont, res, err
	case len(vms) > 0:
		v1beta1conditions.MarkFalse(om, infrav1.MachineCreatedCondition, infrav1.VMCreateFailedReason, clusterv1.ConditionSeverityWarning,
			"a VM named %q already exists in oVirt (id %s) and was not created for this OVirtMachine; rename or remove it", name, vms[0].ID)
		r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventVMNameTaken, "FindVM", "VM name %q is used by VM %s", name, vms[0].ID)
		return true, false, r.retryLater(), nil
	}
	return false, false, ctrl.Result{}, nil
}

// vmGone handles a recorded VM that oVirt does not know any more.
func (r *OVirtMachineReconciler) vmGone(s *machineScope, id string) (bool, ctrl.Result, error) {
	om := s.om
	msg := fmt.Sprintf("VM %s of this machine no longer exists in oVirt (removed outside Cluster API); delete the Machine so that Cluster API replaces it", id)
	v1beta1conditions.MarkFalse(om, infrav1.MachineCreatedCondition, infrav1.VMNotFoundReason, clusterv1.ConditionSeverityError, "%s", msg)
	setMachineFailure(om, infrav1.VMDeletedOutOfBandFailure, msg)
	om.Status.VMState = ""
	r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventVMDeletedOOB, "FindVM", "%s", msg)
	return stop(ctrl.Result{}, nil)
}

// recordVM stores what the machine needs to know about its VM and waits for image_locked to
// clear.
func (r *OVirtMachineReconciler) recordVM(ctx context.Context, s *machineScope, vm *ovirt.VM) (bool, ctrl.Result, error) {
	om := s.om
	s.vm = vm
	s.vmRead = true
	r.recordEngine(ctx, s)
	om.Status.VMID = vm.ID
	if vm.Name != "" {
		om.Status.VMName = vm.Name
	}
	om.Status.Host = vm.HostName
	if om.Spec.ProviderID == "" {
		om.Spec.ProviderID = infrav1.ProviderIDPrefix + vm.ID
	}
	if vm.Status == ovirt.VMStatusImageLocked {
		return stop(r.waitLocked(s, infrav1.MachineCreatedCondition, infrav1.VMCreatingReason, "oVirt is creating the disks of VM %s", vm.ID), nil)
	}
	// The disks of a VM this object created (or adopted by owner marker before its first boot)
	// are the template's: remember them, so that any other disk (a CSI volume attached later)
	// blocks deletion instead of being deleted with the VM. Only then: a VM first seen after a
	// status loss (clusterctl move, a restore), even a down one, may have a CSI disk attached,
	// and gets the conservative rule of systemDisks instead.
	if ptr.Deref(om.Status.SystemDisksPending, false) && vm.Status == ovirt.VMStatusDown && len(vm.Disks) > 0 {
		om.Status.SystemDiskIDs = nil
		for _, d := range vm.Disks {
			if isDataDiskOf(d, vm.ID) {
				// A data disk created before the record was persisted (a failed status
				// patch): it is recorded in status.dataDisks, never as a template disk.
				continue
			}
			om.Status.SystemDiskIDs = append(om.Status.SystemDiskIDs, d.ID)
		}
		om.Status.SystemDisksPending = nil
	}
	r.waits.finished(om, infrav1.MachineCreatedCondition, infrav1.VMCreatingReason, r.Now())
	if !tagProblem(om) {
		// reconcileTags, the rest of the creation step, says when the tags are there.
		v1beta1conditions.MarkTrue(om, infrav1.MachineCreatedCondition)
	}
	return next()
}

// systemDisks returns the VM disks that came from the template: the recorded ones, or, when
// nothing was recorded, the bootable ones (CSI disks are never bootable).
func systemDisks(om *infrav1.OVirtMachine, vm *ovirt.VM) (system, other []ovirt.Disk) {
	for _, d := range vm.Disks {
		isSystem := d.Bootable
		if len(om.Status.SystemDiskIDs) > 0 {
			isSystem = slices.Contains(om.Status.SystemDiskIDs, d.ID)
		}
		if isSystem {
			system = append(system, d)
		} else {
			other = append(other, d)
		}
	}
	return system, other
}

// reconcileDisks grows the OS disk to spec.osdisksizegb and renames the template disks per the
// disk gates, in one request per disk, then waits for oVirt to unlock them.
func (r *OVirtMachineReconciler) reconcileDisks(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	om, vm := s.om, s.vm
	if v1beta1conditions.IsTrue(om, infrav1.MachineDiskResizedCondition) {
		return next()
	}
	disks, _ := systemDisks(om, vm)
	for _, d := range disks {
		if d.Status == ovirt.DiskStatusLocked {
			v1beta1conditions.MarkFalse(om, infrav1.MachineDiskResizedCondition, infrav1.DiskResizingReason, clusterv1.ConditionSeverityInfo,
				"disk %s is locked by oVirt", d.Alias)
			return stop(r.waitFor(s.om, infrav1.MachineDiskResizedCondition), nil)
		}
	}
	want := om.Spec.OSDiskSizeGB * GiB
	var osDisk *ovirt.Disk
	for i := range disks {
		if disks[i].Bootable {
			osDisk = &disks[i]
			break
		}
	}
	if want > 0 {
		if osDisk == nil {
			msg := fmt.Sprintf("spec.osdisksizegb is %d but VM %s has no bootable disk from template %q to resize", om.Spec.OSDiskSizeGB, vm.ID, om.Spec.Template)
			v1beta1conditions.MarkFalse(om, infrav1.MachineDiskResizedCondition, infrav1.NoOSDiskReason, clusterv1.ConditionSeverityWarning, "%s", msg)
			// Product doc §5.4: retrying cannot help, so it is a terminal failure.
			setMachineFailure(om, infrav1.NoOSDiskFailure, msg)
			return stop(ctrl.Result{}, reconcile.TerminalError(errors.New("no OS disk to resize")))
		}
		if want < osDisk.ProvisionedSize {
			tplGiB := (osDisk.ProvisionedSize + GiB - 1) / GiB
			msg := fmt.Sprintf("spec.osdisksizegb is %d GiB, smaller than the %d GiB disk of template %q: disks cannot shrink; use osdisksizegb >= %d (or omit it) in a new OVirtMachineTemplate",
				om.Spec.OSDiskSizeGB, tplGiB, om.Spec.Template, tplGiB)
			if !v1beta1conditions.IsFalse(om, infrav1.MachineDiskResizedCondition) || v1beta1conditions.GetReason(om, infrav1.MachineDiskResizedCondition) != infrav1.DiskSmallerThanTemplateReason {
				r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventDiskTooSmall, "ResizeDisk", "%s", msg)
			}
			v1beta1conditions.MarkFalse(om, infrav1.MachineDiskResizedCondition, infrav1.DiskSmallerThanTemplateReason, clusterv1.ConditionSeverityWarning, "%s", msg)
			// The spec is immutable: retrying cannot help, so do not (no retry storm); product doc
			// §5.4 makes it a terminal failure.
			setMachineFailure(om, infrav1.DiskSmallerThanTemplateFailure, msg)
			return stop(ctrl.Result{}, reconcile.TerminalError(errors.New(msg)))
		}
	}

	var changed []string
	resizing := false
	for i, d := range disks {
		u := ovirt.DiskUpdate{}
		if alias, rename := diskalias.For(r.Gates, vm.Name, d.Alias, i+1); rename {
			u.Alias = alias
		}
		if osDisk != nil && d.ID == osDisk.ID && want > d.ProvisionedSize {
			u.ProvisionedSize = want
			resizing = true
		}
		if u == (ovirt.DiskUpdate{}) {
			continue
		}
		if err := s.ovirt.UpdateDisk(ctx, vm.ID, d.ID, u); err != nil {
			switch {
			case errors.Is(err, ovirt.ErrLocked):
				v1beta1conditions.MarkFalse(om, infrav1.MachineDiskResizedCondition, infrav1.DiskResizingReason, clusterv1.ConditionSeverityInfo,
					"disk %s is locked by oVirt", d.Alias)
				return stop(r.waitFor(s.om, infrav1.MachineDiskResizedCondition), nil)
			case engineRefused(err):
				v1beta1conditions.MarkFalse(om, infrav1.MachineDiskResizedCondition, infrav1.DiskUpdateFailedReason, clusterv1.ConditionSeverityWarning,
					"oVirt refused to update disk %s: %v", d.Alias, err)
				return stop(r.retryLater(), nil)
			}
			return stop(ctrl.Result{}, fmt.Errorf("updating disk %s of VM %s: %w", d.ID, vm.ID, err))
		}
		desc := d.Alias
		if u.Alias != "" {
			desc += " -> " + u.Alias
		}
		if u.ProvisionedSize > 0 {
			desc += fmt.Sprintf(" (%d GiB)", u.ProvisionedSize/GiB)
		}
		changed = append(changed, desc)
	}
	if len(changed) > 0 {
		r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventDisksUpdated, "UpdateDisks", "Updated disks: %s", strings.Join(changed, ", "))
	}
	if resizing {
		// oVirt extends the image asynchronously; the next read shows the disk locked, then ok.
		v1beta1conditions.MarkFalse(om, infrav1.MachineDiskResizedCondition, infrav1.DiskResizingReason, clusterv1.ConditionSeverityInfo,
			"extending disk %s to %d GiB", osDisk.Alias, om.Spec.OSDiskSizeGB)
		r.waits.began(om, infrav1.MachineDiskResizedCondition, infrav1.DiskResizingReason, r.Now())
		return stop(r.waitFor(s.om, infrav1.MachineDiskResizedCondition), nil)
	}
	r.waits.finished(om, infrav1.MachineDiskResizedCondition, infrav1.DiskResizingReason, r.Now())
	if done, res, err := r.reconcileDataDisks(ctx, s); !done {
		return done, res, err
	}
	v1beta1conditions.MarkTrue(om, infrav1.MachineDiskResizedCondition)
	return next()
}

// reconcileNICs makes the VM NICs match spec.nics: nic1..nicN on the named vNIC profiles.
// Without spec.nics the template's NICs are kept.
func (r *OVirtMachineReconciler) reconcileNICs(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	om, vm := s.om, s.vm
	if v1beta1conditions.IsTrue(om, infrav1.MachineNetworkSetCondition) || len(om.Spec.NICs) == 0 {
		markNetworkSet(om, vm)
		return next()
	}
	if why := networkKept(om, vm); why != "" {
		// Status lost (clusterctl move, a restore): the NICs, the addresses the guest configured
		// and the join secrets a network write would carry back into the Engine stay as they are.
		s.log.Info("Keeping the VM's NICs and network as they are", "vmID", vm.ID, "why", why)
		r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventNetworkKept, "SetNICs",
			"Kept the NICs and network configuration of VM %s as they are: %s", vm.ID, why)
		markNetworkSet(om, vm)
		return next()
	}
	// The profiles are looked up on the networks of the VM's own oVirt cluster: its failure
	// domain's, which may not be spec.ovirtcluster.
	var ocl *ovirt.Cluster
	var err error
	if vm.ClusterID != "" {
		ocl, err = s.ovirt.GetCluster(ctx, vm.ClusterID)
	} else {
		ocl, err = s.ovirt.FindCluster(ctx, om.Spec.OVirtCluster)
	}
	if err != nil {
		if errors.Is(err, ovirt.ErrNotFound) {
			v1beta1conditions.MarkFalse(om, infrav1.MachineNetworkSetCondition, infrav1.OVirtClusterNotFoundReason, clusterv1.ConditionSeverityWarning,
				"the oVirt cluster of VM %s (spec.ovirtcluster %q, or the failure domain's) not found", vm.ID, om.Spec.OVirtCluster)
			return stop(r.retryLater(), nil)
		}
		return stop(ctrl.Result{}, fmt.Errorf("finding the oVirt cluster of VM %s: %w", vm.ID, err))
	}
	profiles := make([]*ovirt.VnicProfile, len(om.Spec.NICs))
	for i, n := range om.Spec.NICs {
		p, err := s.ovirt.FindVnicProfile(ctx, ocl, n.VnicProfile)
		if err != nil {
			if errors.Is(err, ovirt.ErrNotFound) {
				msg := fmt.Sprintf("vNIC profile %q (spec.nics[%d].vnicprofile) not found on the networks of oVirt cluster %q; create it or fix the name", n.VnicProfile, i, ocl.Name)
				if v1beta1conditions.GetReason(om, infrav1.MachineNetworkSetCondition) != infrav1.VnicProfileNotFoundReason {
					r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventVnicProfileAbsent, "SetNICs", "%s", msg)
				}
				v1beta1conditions.MarkFalse(om, infrav1.MachineNetworkSetCondition, infrav1.VnicProfileNotFoundReason, clusterv1.ConditionSeverityWarning, "%s", msg)
				return stop(r.retryLater(), nil)
			}
			return stop(ctrl.Result{}, fmt.Errorf("finding vNIC profile %q: %w", n.VnicProfile, err))
		}
		profiles[i] = p
	}
	current := slices.Clone(vm.NICs)
	sort.Slice(current, func(i, j int) bool { return current[i].Name < current[j].Name })
	var changes []string
	// macs are the MAC addresses of spec.nics, in order, for the network configuration.
	macs := make([]string, len(profiles))
	fail := func(err error, what string) (bool, ctrl.Result, error) {
		if errors.Is(err, ovirt.ErrLocked) {
			v1beta1conditions.MarkFalse(om, infrav1.MachineNetworkSetCondition, infrav1.NetworkSetupFailedReason, clusterv1.ConditionSeverityInfo,
				"%s: VM %s is locked by oVirt; retrying", what, vm.ID)
			return stop(r.waitFor(s.om, infrav1.MachineNetworkSetCondition), nil)
		}
		if engineRefused(err) {
			v1beta1conditions.MarkFalse(om, infrav1.MachineNetworkSetCondition, infrav1.NetworkSetupFailedReason, clusterv1.ConditionSeverityWarning,
				"oVirt refused %s: %v", what, err)
			return stop(r.retryLater(), nil)
		}
		return stop(ctrl.Result{}, fmt.Errorf("%s: %w", what, err))
	}
	for i, p := range profiles {
		if i < len(current) {
			macs[i] = current[i].MAC
			if current[i].VnicProfileID == p.ID {
				continue
			}
			if err := s.ovirt.UpdateNIC(ctx, vm.ID, current[i].ID, p.ID); err != nil {
				return fail(err, fmt.Sprintf("moving NIC %s to vNIC profile %q", current[i].Name, p.Name))
			}
			changes = append(changes, fmt.Sprintf("%s -> %s", current[i].Name, p.Name))
			continue
		}
		name := fmt.Sprintf("nic%d", i+1)
		added, err := s.ovirt.AddNIC(ctx, vm.ID, name, p.ID)
		if err != nil {
			return fail(err, fmt.Sprintf("adding NIC %s on vNIC profile %q", name, p.Name))
		}
		if added != nil {
			macs[i] = added.MAC
		}
		changes = append(changes, fmt.Sprintf("+%s on %s", name, p.Name))
	}
	for _, extra := range current[min(len(profiles), len(current)):] {
		if err := s.ovirt.RemoveNIC(ctx, vm.ID, extra.ID); err != nil {
			return fail(err, fmt.Sprintf("removing NIC %s", extra.Name))
		}
		changes = append(changes, "-"+extra.Name)
	}
	if len(changes) > 0 {
		r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventNICsUpdated, "SetNICs", "NICs: %s", strings.Join(changes, ", "))
	}
	// The static addresses, DNS and DHCP switches, once the NICs (and their MACs) exist and before
	// the first start: oVirt applies the initialization at the first run only.
	if done, res, err := r.configureNetwork(ctx, s, macs); !done {
		return done, res, err
	}
	markNetworkSet(om, vm)
	return next()
}

// markNetworkSet records that the VM has its NICs and network: the condition, and the
// annotation that survives a move or a restore.
func markNetworkSet(om *infrav1.OVirtMachine, vm *ovirt.VM) {
	v1beta1conditions.MarkTrue(om, infrav1.MachineNetworkSetCondition)
	if vm == nil || vm.ID == "" || om.Annotations[networkSetAnnotation] == vm.ID {
		return
	}
	if om.Annotations == nil {
		om.Annotations = map[string]string{}
	}
	om.Annotations[networkSetAnnotation] = vm.ID
}

// networkKept says why the NICs and network of a VM whose NetworkSet condition is not true
// must not be written, or "" when they may: only a VM that is down and never had its network
// given gets NICs plugged or unplugged and a network configuration (which, for Ignition, is the
// whole config with its secrets). After a status loss, the annotation, or the VM running,
// tells that it is too late.
func networkKept(om *infrav1.OVirtMachine, vm *ovirt.VM) string {
	switch {
	case om.Annotations[networkSetAnnotation] == vm.ID:
		return "CAPOV set them before (its record of it was lost, as in a clusterctl move or a restore)"
	case vm.Status != ovirt.VMStatusDown:
		return fmt.Sprintf("the VM is %s; CAPOV changes NICs and network only before a VM's first start", vm.Status)
	}
	return ""
}

// reconcilePower starts the VM and waits until it is up, then records its addresses.
func (r *OVirtMachineReconciler) reconcilePower(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	om, vm := s.om, s.vm
	switch vm.Status {
	case ovirt.VMStatusUp:
		r.waits.finished(om, infrav1.MachineOnCondition, infrav1.VMPoweringUpReason, r.Now())
		if err := r.syncHostLabel(ctx, s); err != nil {
			return stop(ctrl.Result{}, err)
		}
		if addrs := withAllocated(s.allocated, machineAddresses(vm, s.cluster.Spec.ControlPlaneEndpoint.Host)); len(addrs) > 0 {
			// The addresses the IPAM pools allocated come first, then those the guest reports.
			v1beta1conditions.MarkTrue(om, infrav1.MachineOnCondition)
			om.Status.Addresses = addrs
		} else {
			// Not an error: an image without qemu-guest-agent reports nothing. The Node's
			// addresses stand in once it registers (reconcileNode).
			v1beta1conditions.Set(om, &clusterv1.Condition{Type: infrav1.MachineOnCondition, Status: corev1.ConditionTrue,
				Reason: infrav1.NoGuestAddressesReason, Severity: clusterv1.ConditionSeverityInfo,
				Message: fmt.Sprintf("VM %s is up; its guest agent reports no address on the VM's NICs (is qemu-guest-agent in the image?): addresses come from the Node once it registers", vm.ID)})
		}
		return next()
	case ovirt.VMStatusDown:
		if remediationInProgress(ctx, r.Client, om, s.machine) {
			// An OVirtRemediation is power-cycling the VM: starting it here would race its stop.
			v1beta1conditions.MarkFalse(om, infrav1.MachineOnCondition, infrav1.RemediationInProgressReason, clusterv1.ConditionSeverityInfo,
				"VM %s is down while an OVirtRemediation of the Machine restarts it", vm.ID)
			return stop(r.waitFor(s.om, infrav1.MachineOnCondition), nil)
		}
		if cont, res, err := r.attachHostDevices(ctx, s); !cont {
			return stop(res, err)
		}
		script, once, done, res, err := r.runOnceScript(ctx, s)
		if done {
			return stop(res, err)
		}
		start := func() error { return s.ovirt.Power(ctx, vm.ID, ovirt.PowerStart) }
		if once {
			start = func() error { return s.ovirt.RunOnce(ctx, vm.ID, script) }
		}
		if err := start(); err != nil {
			switch {
			case errors.Is(err, ovirt.ErrLocked):
				return stop(r.waitFor(s.om, infrav1.MachineOnCondition), nil)
			case errors.Is(err, ovirt.ErrNoHost):
				reason, what := infrav1.VMPowerOnFailedReason, "no host in the oVirt cluster can run it"
				if gr, gw := startRefusal(err); gr != "" {
					reason, what = gr, gw
				} else if len(om.Status.AffinityGroups) > 0 {
					reason, what = infrav1.AffinityRulesUnsatisfiableReason, "no host satisfies its affinity groups "+fmt.Sprintf("%q", om.Status.AffinityGroups)
				}
				if v1beta1conditions.GetReason(om, infrav1.MachineOnCondition) != reason {
					r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventNoHost, "PowerOn", "oVirt cannot start VM %s: %s: %v", vm.ID, what, err)
				}
				v1beta1conditions.MarkFalse(om, infrav1.MachineOnCondition, reason, clusterv1.ConditionSeverityWarning,
					"oVirt cannot start VM %s: %s; retrying (a host coming up, or a Soft policy, lets it start): %v", vm.ID, what, err)
				return stop(r.retryLater(), nil)
			case engineRefused(err):
				v1beta1conditions.MarkFalse(om, infrav1.MachineOnCondition, infrav1.VMPowerOnFailedReason, clusterv1.ConditionSeverityWarning,
					"oVirt refused to start VM %s: %v", vm.ID, err)
				return stop(r.retryLater(), nil)
			}
			return stop(ctrl.Result{}, fmt.Errorf("starting VM %s: %w", vm.ID, err))
		}
		if once {
			// Nothing of the bootstrap data is stored on the VM: there is nothing to clear.
			om.Status.BootstrapDataCleared = ptr.To(true)
		}
		r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventVMStarted, "PowerOn", "Started VM %s", vm.ID)
		v1beta1conditions.MarkFalse(om, infrav1.MachineOnCondition, infrav1.VMPoweringUpReason, clusterv1.ConditionSeverityInfo, "powering up")
		r.waits.began(om, infrav1.MachineOnCondition, infrav1.VMPoweringUpReason, r.Now())
		return stop(r.waitFor(s.om, infrav1.MachineOnCondition), nil)
	case ovirt.VMStatusWaitForLaunch, ovirt.VMStatusPoweringUp, ovirt.VMStatusRebootInProgress:
		v1beta1conditions.MarkFalse(om, infrav1.MachineOnCondition, infrav1.VMPoweringUpReason, clusterv1.ConditionSeverityInfo, "powering up")
		return stop(r.waitFor(s.om, infrav1.MachineOnCondition), nil)
	default:
		v1beta1conditions.MarkFalse(om, infrav1.MachineOnCondition, infrav1.VMNotRunningReason, clusterv1.ConditionSeverityWarning,
			"VM %s is %s in oVirt", vm.ID, vm.Status)
		return stop(r.waitFor(s.om, infrav1.MachineOnCondition), nil)
	}
}

// maxAddresses is the MaxItems of status.addresses: a longer list would make the status patch
// fail and the machine never Ready.
const maxAddresses = 64

// zeroMAC is what the guest agent reports for interfaces without hardware (lo).
const zeroMAC = "00:00:00:00:00:00"

// machineAddresses returns the machine's InternalIP addresses from the devices the guest agent
// reported. A real Engine reports every guest interface (lo, cni0, flannel.1, docker0,
// kube-ipvs0 with one address per Service, ...) for every NIC, in no stable order: only the
// devices whose MAC is one of the VM's NIC MACs count. Loopback, link-local, multicast and
// unspecified addresses and the control-plane endpoint (a VIP that moves between control-plane
// machines) are dropped. The order is stable: by NIC name, then IPv4 before IPv6, then by
// address; at most maxAddresses.
func machineAddresses(vm *ovirt.VM, endpointHost string) []clusterv1.MachineAddress {
	nics := slices.Clone(vm.NICs)
	sort.Slice(nics, func(i, j int) bool { return nics[i].Name < nics[j].Name })
	var out []clusterv1.MachineAddress
	seen := map[string]bool{}
	for _, nic := range nics {
		mac := strings.ToLower(strings.TrimSpace(nic.MAC))
		if mac == "" || mac == zeroMAC {
			continue
		}
		var ips []net.IP
		for _, d := range vm.ReportedDevices {
			if strings.ToLower(strings.TrimSpace(d.MAC)) != mac {
				continue
			}
			for _, raw := range d.IPs {
				if ip := usableIP(raw, endpointHost); ip != nil && !seen[ip.String()] {
					seen[ip.String()] = true
					ips = append(ips, ip)
				}
			}
		}
		sort.Slice(ips, func(i, j int) bool {
			a4, b4 := ips[i].To4() != nil, ips[j].To4() != nil
			if a4 != b4 {
				return a4
			}
			return bytes.Compare(ips[i].To16(), ips[j].To16()) < 0
		})
		for _, ip := range ips {
			out = append(out, clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: ip.String()})
		}
	}
	if len(out) > maxAddresses {
		out = out[:maxAddresses]
	}
	return out
}

// usableIP parses a reported or Node address; nil for loopback, link-local, multicast,
// unspecified, unparsable addresses and the control-plane endpoint.
func usableIP(raw, endpointHost string) net.IP {
	ip := net.ParseIP(strings.TrimSpace(raw))
	if ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return nil
	}
	if ip.String() == endpointHost {
		return nil
	}
	return ip
}

// nodeAddresses returns the IP addresses of a Node's status (InternalIP and ExternalIP), with
// the filter of machineAddresses: the fallback for a VM whose guest agent reports nothing.
func nodeAddresses(node *corev1.Node, endpointHost string) []clusterv1.MachineAddress {
	var out []clusterv1.MachineAddress
	seen := map[string]bool{}
	for _, a := range node.Status.Addresses {
		var typ clusterv1.MachineAddressType
		switch a.Type {
		case corev1.NodeInternalIP:
			typ = clusterv1.MachineInternalIP
		case corev1.NodeExternalIP:
			typ = clusterv1.MachineExternalIP
		default:
			continue
		}
		ip := usableIP(a.Address, endpointHost)
		if ip == nil || seen[ip.String()] {
			continue
		}
		seen[ip.String()] = true
		out = append(out, clusterv1.MachineAddress{Type: typ, Address: ip.String()})
		if len(out) == maxAddresses {
			break
		}
	}
	return out
}

// engineRefused reports an answer of the Engine that refuses the request (400-499 other than a
// lock): low disk space, an illegal storage-domain status, a NIC name in use, a network not in
// the cluster, an invalid value. A retry does not help until something changes, so it becomes a
// condition with the Engine's message and a retry later, never a bare reconcile error.
func engineRefused(err error) bool {
	if errors.Is(err, ovirt.ErrLocked) {
		return false
	}
	if errors.Is(err, ovirt.ErrInvalid) || errors.Is(err, ovirt.ErrNotFound) || errors.Is(err, ovirt.ErrConflict) {
		return true
	}
	var e *ovirt.Error
	return errors.As(err, &e) && e.Status >= 400 && e.Status < 500
}
