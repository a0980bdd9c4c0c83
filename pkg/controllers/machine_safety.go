package controllers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/credentials"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/provideraccess"
)

// The guards of this file stand between an OVirtMachine and every write to a VM: a VM is
// written only once it has proven that it belongs to the object (owner marker), a 404 is only
// believed from the Engine the VM was found on, a create is recorded before it is sent, and
// waits that may never end back off and say so.

// createRequestedAnnotation records, before the create request is sent, that a VM may exist
// for this object (its value is the VM name). It survives a crash that loses the create's
// answer and clusterctl move; deletion skips oVirt only for objects without it and without a
// VM id.
const createRequestedAnnotation = "capov.infrastructure.cluster.x-k8s.io/vm-create-requested"

// networkSetAnnotation records the VM whose NICs and network configuration CAPOV set (its value
// is the VM id). Unlike the NetworkSet condition it travels with the object's metadata through
// clusterctl move and a restore: after one, CAPOV does not write the network again (a VM keeps
// its NICs and the addresses its guest configured, and no join secret is written back).
const networkSetAnnotation = "capov.infrastructure.cluster.x-k8s.io/network-set"

// stopRequestsAnnotation counts the stop requests sent to a VM that did not shut down in time
// and when the last was sent ("<count> <RFC3339>"), so that they back off across restarts.
const stopRequestsAnnotation = "capov.infrastructure.cluster.x-k8s.io/stop-requests"

// failedSettingsAnnotation records the OVirtProvider settings (generation and credentials
// Secret resourceVersion, no credential) with which a machine got failureReason
// OVirtEngineConnectionCritical; once they change and the provider connects, the manager
// clears the failure itself.
const failedSettingsAnnotation = "capov.infrastructure.cluster.x-k8s.io/failed-provider-settings"

// Event reasons of the guards.
const (
	eventVMNotOwned               = "VMNotOwned"
	eventOwnerMarkerUpdated       = "VMOwnerMarkerUpdated"
	eventEngineChanged            = "EngineChanged"
	eventVMNotStopping            = "VMNotStopping"
	eventVMLockedTooLong          = "VMLockedTooLong"
	eventConnectionFailureCleared = "ConnectionFailureCleared"
	eventBootstrapDataKept        = "BootstrapDataNotCleared"
	eventNamespaceNotAllowed      = "NamespaceNotAllowed"
)

const (
	// stopRequestsBeforeWarning is the number of stop requests after which a VM that is still
	// not down gets a Warning event and the VMNotStopping reason.
	stopRequestsBeforeWarning = 3
	// maxStopBackoff is the longest wait between two stop requests.
	maxStopBackoff = 5 * time.Minute
	// lockedPoll is how often a VM that has been locked for longer than Intervals.LockedPatience
	// is read.
	lockedPoll = 5 * time.Minute
)

// markerPrefix starts the owner marker CAPOV writes into the comment of every VM it creates:
// "capov ovirtmachine=<namespace>/<name> uid=<uid> management-cluster=<id> provider=<provider>
// cluster=<cluster> vm=<vm name> proof=<proof>" (ownership_proof.go).
const markerPrefix = "capov ovirtmachine="

// markerClusterField names the management cluster in the owner marker (see
// OVirtMachineReconciler.ManagementClusterID). Markers written before it existed end after uid.
const markerClusterField = "management-cluster="

// vmOwner is what an owner marker says: the OVirtMachine it names, the management cluster that
// wrote it ("" for a marker without one) and, in markers with the ownership proof
// (ownership_proof.go), the OVirtProvider, the Cluster, the VM it was written on and the proof.
type vmOwner struct {
	namespace, name, uid, cluster string
	provider, workloadCluster, vm string
	proof                         string
}

// markerSpan returns where the owner marker starts and ends in comment: from markerPrefix over
// the tokens that carry a marker field. ok is false without exactly one marker.
func markerSpan(comment string) (start, end int, ok bool) {
	if strings.Count(comment, markerPrefix) != 1 {
		return 0, 0, false
	}
	start = strings.Index(comment, markerPrefix)
	i := start + len(markerPrefix)
	// The ovirtmachine field itself.
	for i < len(comment) && !isSpace(comment[i]) {
		i++
	}
	end = i
	for {
		j := end
		for j < len(comment) && (comment[j] == ' ' || comment[j] == '\t') {
			j++
		}
		k := j
		for k < len(comment) && !isSpace(comment[k]) {
			k++
		}
		tok := comment[j:k]
		known := false
		for _, f := range markerFields {
			if strings.HasPrefix(tok, f) {
				known = true
				break
			}
		}
		if j == end || !known {
			return start, end, true
		}
		end = k
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// parseOwnerMarker reads the owner marker out of a VM comment (other text around it is kept by
// whoever wrote it). A comment with no marker, a malformed one or several is no proof.
func parseOwnerMarker(comment string) (vmOwner, bool) {
	start, end, ok := markerSpan(comment)
	if !ok {
		return vmOwner{}, false
	}
	fields := strings.Fields(comment[start+len(markerPrefix) : end])
	if len(fields) < 2 || !strings.HasPrefix(fields[1], "uid=") {
		return vmOwner{}, false
	}
	ns, name, ok := strings.Cut(fields[0], "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return vmOwner{}, false
	}
	o := vmOwner{namespace: ns, name: name}
	seen := map[string]bool{}
	for _, f := range fields[1:] {
		key, value, _ := strings.Cut(f, "=")
		if seen[key] {
			return vmOwner{}, false // a field twice: no proof of anything
		}
		seen[key] = true
		switch key + "=" {
		case "uid=":
			o.uid = value
		case markerClusterField:
			o.cluster = value
		case "provider=":
			o.provider = value
		case "cluster=":
			o.workloadCluster = value
		case "vm=":
			o.vm = value
		case "proof=":
			o.proof = value
		}
	}
	return o, true
}

// withMarker returns comment with its owner marker replaced by marker (or marker alone when it
// had none).
func withMarker(comment, marker string) string {
	start, end, ok := markerSpan(comment)
	if !ok {
		return marker
	}
	return comment[:start] + marker + comment[end:]
}

// ownedBy reports whether vm was created for exactly this object (namespace, name and UID):
// the proof needed to adopt a VM found by name, when no VM id was recorded.
func ownedBy(vm ovirt.VM, om *infrav1.OVirtMachine) bool {
	o, ok := parseOwnerMarker(vm.Comment)
	return ok && o.namespace == om.Namespace && o.name == om.Name && o.uid == string(om.UID)
}

// markerCurrent reports whether vm's owner marker is the one this object writes now: its
// namespace, name, UID, this management cluster, its provider and Cluster (cluster), the VM's own name,
// and a proof (checked when it was written or adopted; the inventory checks it again before it
// acts on a VM).
func markerCurrent(vm *ovirt.VM, om *infrav1.OVirtMachine, mc, cluster string) bool {
	o, ok := parseOwnerMarker(vm.Comment)
	if !ok || o.proof == "" {
		return false
	}
	want := ownerFor(om, mc, cluster, vm.Name)
	want.proof = o.proof
	return o == want
}

// proveOwnership checks, before any write to vm, that its owner marker names this object. A
// marker of this very object (namespace, name, UID and management cluster) proves it; a marker
// of an earlier object of the same namespace/name, or written by another management cluster
// (clusterctl move, a restore), proves it only with an ownership proof that verifies under the
// key of this object's Cluster, written for this VM. A VM that does not prove it is never
// written: cond says why with the VM id, a Warning event is emitted once, and the caller stops.
// When refresh is set, a marker that is not the current one (another UID or management cluster,
// or written before the proof) is rewritten for this object, with the proof.
func (r *OVirtMachineReconciler) proveOwnership(ctx context.Context, s *machineScope, vm *ovirt.VM, cond clusterv1.ConditionType, refresh bool) (bool, error) {
	om := s.om
	owner, ok := parseOwnerMarker(vm.Comment)
	notOwned := func(carries string) (bool, error) {
		msg := fmt.Sprintf("VM %s named by spec.providerID carries %s: CAPOV does not touch it; "+
			"see docs/operations.md \"A VM that is not ours\"", vm.ID, carries)
		if v1beta1conditions.GetReason(om, cond) != infrav1.VMNotOwnedReason {
			r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventVMNotOwned, "CheckOwner", "%s", msg)
		}
		v1beta1conditions.MarkFalse(om, cond, infrav1.VMNotOwnedReason, clusterv1.ConditionSeverityError, "%s", msg)
		s.log.Info("Not touching a VM that does not prove it is this object's", "vmID", vm.ID, "markedFor", owner.namespace+"/"+owner.name)
		return false, nil
	}
	if !ok {
		return notOwned("no CAPOV owner marker")
	}
	if owner.namespace != om.Namespace || owner.name != om.Name {
		return notOwned(fmt.Sprintf("the owner marker of OVirtMachine %s/%s, not this OVirtMachine's", owner.namespace, owner.name))
	}
	cluster := clusterOf(s)
	// The same object: its UID (which nobody chooses) and this management cluster, or no
	// management cluster at all (a marker written before that field existed).
	sameObject := owner.uid == string(om.UID) && (owner.cluster == r.ManagementClusterID || owner.cluster == "")
	if !sameObject {
		// Adoption: the marker was written for another object of this name, here or in another
		// management cluster. Only the key of this object's Cluster, which clusterctl move and a
		// restore carry with it, proves that this is the same machine.
		key, err := readOwnershipKey(ctx, r.APIReader, om.Namespace, cluster)
		if err != nil {
			return false, err
		}
		switch {
		case owner.proof == "":
			return notOwned(fmt.Sprintf("the owner marker of an earlier OVirtMachine %s/%s (UID %s, management cluster %q) without an ownership proof "+
				"(written before CAPOV signed its markers): it is adopted only by the object that wrote it",
				owner.namespace, owner.name, owner.uid, owner.cluster))
		case key == nil:
			return notOwned(fmt.Sprintf("the owner marker of another OVirtMachine %s/%s (UID %s, management cluster %q), and Cluster %q has no ownership key "+
				"(Secret %s) to verify its proof", owner.namespace, owner.name, owner.uid, owner.cluster, cluster, ownershipKeyName(cluster)))
		case !owner.provenFor(om, cluster, vm.Name, key):
			return notOwned(fmt.Sprintf("the owner marker of another OVirtMachine %s/%s (UID %s, management cluster %q) whose ownership proof "+
				"does not verify under the key of Cluster %q for this VM and provider", owner.namespace, owner.name, owner.uid, owner.cluster, cluster))
		}
	}
	if !refresh || (sameObject && markerCurrent(vm, om, r.ManagementClusterID, clusterOf(s))) || vm.Status == ovirt.VMStatusImageLocked {
		// While oVirt creates the VM it refuses every edit: the marker is updated on a later
		// read.
		return true, nil
	}
	if s.cluster == nil {
		// The key is made for a Cluster: without one there is nothing to sign with.
		return true, nil
	}
	key, err := ensureOwnershipKey(ctx, r.Client, r.APIReader, s.cluster)
	if err != nil {
		return false, err
	}
	marker := ownerFor(om, r.ManagementClusterID, s.cluster.Name, vm.Name)
	marker.proof = marker.sign(key)
	comment := withMarker(vm.Comment, marker.String())
	if err := s.ovirt.UpdateVM(ctx, vm.ID, ovirt.VMUpdate{Comment: &comment}); err != nil {
		return false, fmt.Errorf("updating the owner marker of VM %s: %w", vm.ID, err)
	}
	vm.Comment = comment
	switch {
	case sameObject:
		s.log.Info("Updated the VM's owner marker to the current form, with its ownership proof", "vmID", vm.ID,
			"previousManagementCluster", owner.cluster)
	case owner.uid == string(om.UID):
		// Same object: written by another management cluster before clusterctl move (which keeps
		// UIDs only when the objects are restored with them).
		s.log.Info("Updated the VM's owner marker to this management cluster", "vmID", vm.ID,
			"previousManagementCluster", owner.cluster, "managementCluster", r.ManagementClusterID)
	default:
		s.log.Info("Updated the VM's owner marker to this object's UID (recreated by clusterctl move or a restore)", "vmID", vm.ID, "previousUID", owner.uid)
		r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventOwnerMarkerUpdated, "CheckOwner",
			"VM %s carried the owner marker of an earlier object of the same name (UID %s), with a proof this cluster's key verifies; updated to this one", vm.ID, owner.uid)
	}
	return true, nil
}

// namespaceAllowed enforces the OVirtProvider's spec.allowedNamespaces, as admission does: a
// machine in a namespace the provider does not allow gets nothing done in oVirt (cond says why,
// with a Warning event once).
func (r *OVirtMachineReconciler) namespaceAllowed(ctx context.Context, s *machineScope, p *infrav1.OVirtProvider, cond clusterv1.ConditionType) (bool, error) {
	ok, why, err := provideraccess.Allowed(ctx, r.APIReader, p, s.om.Namespace)
	if err != nil || ok {
		return ok, err
	}
	if v1beta1conditions.GetReason(s.om, cond) != infrav1.NamespaceNotAllowedReason {
		r.Recorder.Eventf(s.om, nil, corev1.EventTypeWarning, eventNamespaceNotAllowed, "CheckNamespace", "%s", why)
		s.log.Info("The OVirtProvider does not allow this namespace; doing nothing in oVirt", "OVirtProvider", p.Name)
	}
	v1beta1conditions.MarkFalse(s.om, cond, infrav1.NamespaceNotAllowedReason, clusterv1.ConditionSeverityError, "%s", why)
	return false, nil
}

// recordEngine notes the identity of the Engine on which the machine's VM was found.
func (r *OVirtMachineReconciler) recordEngine(ctx context.Context, s *machineScope) {
	info, err := s.ovirt.EngineInfo(ctx)
	if err != nil || info.InstanceID == "" {
		// Not recorded this time: a later read records it.
		return
	}
	if prev := s.om.Status.EngineInstanceID; prev != info.InstanceID {
		if prev != "" {
			s.log.Info("The machine's VM is now found on another Engine", "engineInstanceID", info.InstanceID, "previousEngineInstanceID", prev)
		}
		s.om.Status.EngineInstanceID = info.InstanceID
	}
}

// otherEngine reports whether the Engine answering now is not the one on which the VM was found
// (its product_info.instance_id differs), in which case its 404 for the VM proves nothing. It
// asks the Engine (no cached answer): it runs only when a recorded VM is not found.
func (r *OVirtMachineReconciler) otherEngine(ctx context.Context, s *machineScope, cond clusterv1.ConditionType, vmID string) (bool, error) {
	recorded := s.om.Status.EngineInstanceID
	if recorded == "" {
		return false, nil
	}
	info, err := s.ovirt.Ping(ctx)
	if err != nil {
		return false, fmt.Errorf("reading the identity of the Engine that does not know VM %s: %w", vmID, err)
	}
	if info.InstanceID == recorded {
		return false, nil
	}
	current := info.InstanceID
	if current == "" {
		current = "an Engine that reports no instance_id"
	}
	msg := fmt.Sprintf("oVirt does not know VM %s, but OVirtProvider %s now answers from Engine %s and the VM was found on Engine %s: "+
		"the VM is not taken for deleted; point the OVirtProvider back at its Engine (docs/operations.md, \"Another Engine\")",
		vmID, s.om.Spec.Provider, current, recorded)
	if v1beta1conditions.GetReason(s.om, cond) != infrav1.EngineChangedReason {
		r.Recorder.Eventf(s.om, nil, corev1.EventTypeWarning, eventEngineChanged, "CheckEngine", "%s", msg)
	}
	v1beta1conditions.MarkFalse(s.om, cond, infrav1.EngineChangedReason, clusterv1.ConditionSeverityError, "%s", msg)
	s.log.Info("Not taking the VM for deleted: another Engine answers", "vmID", vmID, "engineInstanceID", info.InstanceID, "recordedEngineInstanceID", recorded)
	return true, nil
}

// createRequested reports whether a create request may have been sent for this object.
func createRequested(om *infrav1.OVirtMachine) bool {
	_, ok := om.Annotations[createRequestedAnnotation]
	return ok
}

// persistCreateRequested records createRequestedAnnotation in the API server before the create
// request is sent: a crash after the request then still finds (and deletes) the VM by name and
// owner marker. The patch carries the resourceVersion the reconcile read (optimistic lock), also
// when the annotation is there already: a manager that lost its lease while frozen, or read a
// stale cache, gets a conflict (or NotFound for an object deleted meanwhile) instead of creating
// a VM for an object another manager already deleted. It patches a copy: the object of the
// reconcile keeps its in-memory status for the deferred patch.
func (r *OVirtMachineReconciler) persistCreateRequested(ctx context.Context, om *infrav1.OVirtMachine, vmName string) error {
	cp := om.DeepCopy()
	before := cp.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[createRequestedAnnotation] = vmName
	if err := r.Client.Patch(ctx, cp, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording that a VM is being created before creating it: %w", err)
	}
	if om.Annotations == nil {
		om.Annotations = map[string]string{}
	}
	om.Annotations[createRequestedAnnotation] = vmName
	return nil
}

// stopRequests returns how many stop requests were sent and when the last one was.
func stopRequests(om *infrav1.OVirtMachine) (int, time.Time) {
	count, at, ok := strings.Cut(om.Annotations[stopRequestsAnnotation], " ")
	if !ok {
		return 0, time.Time{}
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 {
		return 0, time.Time{}
	}
	last, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return 0, time.Time{}
	}
	return n, last
}

func setStopRequests(om *infrav1.OVirtMachine, n int, at time.Time) {
	if om.Annotations == nil {
		om.Annotations = map[string]string{}
	}
	om.Annotations[stopRequestsAnnotation] = fmt.Sprintf("%d %s", n, at.UTC().Format(time.RFC3339))
}

// stopBackoff is the wait after the n-th stop request before the next one: VMPoll, doubling,
// at most maxStopBackoff.
func (r *OVirtMachineReconciler) stopBackoff(n int) time.Duration {
	wait := r.Intervals.VMPoll
	for i := 1; i < n && wait < maxStopBackoff; i++ {
		wait *= 2
	}
	return min(max(wait, time.Second), maxStopBackoff)
}

// waitLocked waits for oVirt to unlock a VM (image_locked). Past Intervals.LockedPatience the
// condition says so with VMLockedTooLong (a Warning event, once), and the VM is read only every
// lockedPoll.
func (r *OVirtMachineReconciler) waitLocked(s *machineScope, cond clusterv1.ConditionType, reason, format string, args ...any) ctrl.Result {
	om := s.om
	if v1beta1conditions.GetReason(om, cond) == infrav1.VMLockedTooLongReason {
		return ctrl.Result{RequeueAfter: lockedPoll}
	}
	msg := fmt.Sprintf(format, args...)
	since := v1beta1conditions.GetLastTransitionTime(om, cond)
	if since == nil || v1beta1conditions.GetReason(om, cond) != reason || v1beta1conditions.GetMessage(om, cond) != msg ||
		r.Intervals.LockedPatience <= 0 || r.Now().Sub(since.Time) < r.Intervals.LockedPatience {
		v1beta1conditions.MarkFalse(om, cond, reason, clusterv1.ConditionSeverityInfo, "%s", msg)
		return r.waitFor(om, cond)
	}
	long := fmt.Sprintf("oVirt has kept VM %s locked since %s (%s): check its tasks in oVirt (Tasks tab, or the Engine's async tasks); CAPOV keeps waiting and reads it every %s",
		s.om.Status.VMID, since.UTC().Format(time.RFC3339), msg, lockedPoll)
	r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventVMLockedTooLong, "WaitForUnlock", "%s", long)
	v1beta1conditions.MarkFalse(om, cond, infrav1.VMLockedTooLongReason, clusterv1.ConditionSeverityWarning, "%s", long)
	s.log.Info("The VM stays locked in oVirt for longer than expected", "vmID", s.om.Status.VMID, "since", since.Time)
	return ctrl.Result{RequeueAfter: lockedPoll}
}

// runOnceScript decides how a VM that is down starts: with run once and the bootstrap data as
// the custom script of that run (once), unless the Node registered already (the guest needs
// nothing more), the VM stores a custom script of its own (created by an earlier release, or an
// Ignition guest whose network keyfiles were merged into it: the Engine builds the payload from
// that one) or --keep-bootstrap-data stores it at creation. With done the reconcile stops
// with res and err (the bootstrap data cannot be read).
func (r *OVirtMachineReconciler) runOnceScript(ctx context.Context, s *machineScope) (script string, once, done bool, res ctrl.Result, err error) {
	om := s.om
	if r.KeepBootstrapData || s.vm.CustomScriptStored || provisioned(om) || v1beta1conditions.IsTrue(om, infrav1.K8sProviderIDSetupCondition) {
		return "", false, false, ctrl.Result{}, nil
	}
	fail := func(reason string, format string, args ...any) (string, bool, bool, ctrl.Result, error) {
		v1beta1conditions.MarkFalse(om, infrav1.MachineOnCondition, reason, clusterv1.ConditionSeverityWarning, format, args...)
		return "", false, true, r.retryLater(), nil
	}
	if s.machine == nil || s.machine.Spec.Bootstrap.DataSecretName == nil {
		return fail(infrav1.WaitingForBootstrapDataReason, "waiting for the bootstrap data to start VM %s with it", s.vm.ID)
	}
	boot, err := r.readBootstrapData(ctx, s)
	if err != nil {
		var invalid *bootstrapInvalidError
		switch {
		case apierrors.IsNotFound(err):
			return fail(infrav1.WaitingForBootstrapDataReason, "waiting for bootstrap data Secret %s/%s to start VM %s with it",
				s.machine.Namespace, *s.machine.Spec.Bootstrap.DataSecretName, s.vm.ID)
		case errors.As(err, &invalid):
			return fail(infrav1.BootstrapDataInvalidReason, "%v", err)
		}
		return "", false, true, ctrl.Result{}, fmt.Errorf("reading bootstrap data: %w", err)
	}
	script, err = bootstrapScript(boot, hostNameFor(om.Namespace, om.Name))
	if err != nil {
		return fail(infrav1.BootstrapDataInvalidReason, "bootstrap data Secret %s/%s: %v", s.machine.Namespace, *s.machine.Spec.Bootstrap.DataSecretName, err)
	}
	return script, true, false, ctrl.Result{}, nil
}

// clearBootstrapData removes the bootstrap data from the VM's initialization.custom_script once
// the Node registered, when the VM stores it (a VM started with run once does not): the Engine returns it on every read of the VM to anyone who may see the
// VM, and keeps it in its database and backups, while the guest has no more use for it (the
// Engine attaches a payload only before the VM's first Up). The host name stays. A failure is
// reported and retried; it never makes the machine unready.
func (r *OVirtMachineReconciler) clearBootstrapData(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	om := s.om
	if r.KeepBootstrapData || ptr.Deref(om.Status.BootstrapDataCleared, false) || !v1beta1conditions.IsTrue(om, infrav1.K8sProviderIDSetupCondition) {
		return true, ctrl.Result{}, nil
	}
	if !s.vm.CustomScriptStored && !s.vmFromStatus {
		// Read just now: the VM stores no custom script (it ran once with the bootstrap data).
		om.Status.BootstrapDataCleared = ptr.To(true)
		return true, ctrl.Result{}, nil
	}
	if err := s.ovirt.UpdateVM(ctx, s.vm.ID, ovirt.VMUpdate{ClearCustomScript: true}); err != nil {
		if errors.Is(err, ovirt.ErrNotFound) {
			// The next read reports the VM gone.
			return true, ctrl.Result{}, nil
		}
		s.log.Info("Cannot clear the bootstrap data from the VM in oVirt yet; retrying", "vmID", s.vm.ID, "error", err.Error())
		if engineRefused(err) && !errors.Is(err, ovirt.ErrLocked) {
			r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventBootstrapDataKept, "ClearBootstrapData",
				"oVirt refused to clear the bootstrap data of VM %s (%v); it stays readable in oVirt until this succeeds", s.vm.ID, err)
		}
		return false, ctrl.Result{RequeueAfter: r.Intervals.Retry}, nil
	}
	om.Status.BootstrapDataCleared = ptr.To(true)
	s.log.Info("Cleared the bootstrap data from the VM in oVirt", "vmID", s.vm.ID)
	return true, ctrl.Result{}, nil
}

// providerSettings identifies the settings a connection attempt used, and the provider's state
// then, without revealing any of them: the OVirtProvider's generation, its credentials Secret's
// resourceVersion ("-" when there is none) and since when it has been Ready (Unix seconds of
// its Ready condition's last transition, "-" while it is not Ready). A provider that becomes
// Ready again after a failure has changed settings in this sense, whatever was fixed (an
// account unlocked on the Engine, its certificate replaced): the machine tries once more.
func providerSettings(p *infrav1.OVirtProvider, resolved *credentials.Resolved) string {
	rv := "-"
	if resolved != nil && resolved.Secret != nil {
		rv = resolved.Secret.ResourceVersion
	}
	ready := "-"
	if c := conditions.Get(p, infrav1.ReadyCondition); c != nil && c.Status == metav1.ConditionTrue {
		ready = strconv.FormatInt(c.LastTransitionTime.Unix(), 10)
	}
	return fmt.Sprintf("%d/%s/%s", p.Generation, rv, ready)
}

// clearStaleConnectionFailure clears failureReason OVirtEngineConnectionCritical once the
// OVirtProvider's settings changed since the failure, or it became Ready again, and it connects
// (providerSettings): the operator fixed the provider or the Engine and should not have to patch
// every machine (the documented patch still works). Each change is tried once. It reports
// whether the machine may go on.
func (r *OVirtMachineReconciler) clearStaleConnectionFailure(ctx context.Context, s *machineScope) (bool, error) {
	om := s.om
	p := &infrav1.OVirtProvider{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: om.Spec.Provider}, p); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	resolved, _ := credentials.Resolve(ctx, r.Connector.Reader, r.Connector.Namespace, p)
	settings := providerSettings(p, resolved)
	if recorded, ok := om.Annotations[failedSettingsAnnotation]; ok && recorded == settings {
		return false, nil
	}
	if _, _, err := r.Connector.Connect(ctx, p); err != nil {
		// Still failing with the new settings: remember them, so that the next reconcile does
		// not try again until they change once more.
		if om.Annotations == nil {
			om.Annotations = map[string]string{}
		}
		om.Annotations[failedSettingsAnnotation] = settings
		return false, nil
	}
	clearMachineFailure(om)
	delete(om.Annotations, failedSettingsAnnotation)
	s.log.Info("Clearing failureReason OVirtEngineConnectionCritical: the OVirtProvider changed or became Ready again, and connects", "OVirtProvider", p.Name)
	r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventConnectionFailureCleared, "Connect",
		"OVirtProvider %s changed or became Ready again, and connects: cleared failureReason %s", p.Name, infrav1.OVirtEngineConnectionCriticalFailure)
	return true, nil
}

// invalidOwner says why no OVirtMachine can have the namespace and name an owner marker names
// ("" when one can): an oVirt user edited the comment, or it was written by hand.
func invalidOwner(o vmOwner) string {
	if errs := validation.IsDNS1123Label(o.namespace); len(errs) > 0 {
		return fmt.Sprintf("its owner marker names namespace %q, which cannot exist (%s)", o.namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(o.name); len(errs) > 0 {
		return fmt.Sprintf("its owner marker names OVirtMachine %q, which cannot exist (%s)", o.name, strings.Join(errs, "; "))
	}
	return ""
}
