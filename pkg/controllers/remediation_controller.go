package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/provideraccess"
)

// The remediation of docs/proposals/2026-12-06-gpus-and-reboot-remediation.md ("Remediation
// flow"): Cluster API's MachineHealthCheck creates an OVirtRemediation named after an unhealthy
// Machine; the manager reboots the Machine's VM through the Engine, resets it within the same
// attempt when the guest shows no sign of a restart (a hung guest ignores the Engine's reboot),
// waits spec.strategy.timeout for the MachineHealthCheck to find the Machine healthy (it then
// deletes the request), tries again up to retryLimit times, and then hands the Machine to its
// owner (MachineSet or KubeadmControlPlane) by setting OwnerRemediated=False on it. It never deletes a Machine, never
// writes to a VM whose ownership is not proven, does nothing while paused, and neither acts nor
// hands over while the Engine cannot be read.

// RemediationFinalizer is the finalizer of every OVirtRemediation: its removal (the
// MachineHealthCheck deleting the request) clears the Machine's ExternallyRemediated condition.
const RemediationFinalizer = "ovirtremediation.infrastructure.cluster.x-k8s.io"

// Event reasons of the remediation (on the OVirtRemediation and on its Machine).
const (
	eventRebootRequested          = "RebootRequested"
	eventResetRequested           = "ResetRequested"
	eventStopStartRequested       = "StopStartRequested"
	eventStartRequested           = "StartRequested"
	eventRemediationTimedOut      = "RemediationTimedOut"
	eventRemediationHandedToOwner = "RemediationHandedToOwner"
	eventGuestDidNotAnswer        = "GuestDidNotAnswer"
)

// What an attempt's result records of a stop and start, and of its timeout.
const (
	resultStopRequested = "stop requested"
	resultStarted       = "started once down"
	resultTimedOut      = "timed out"
)

// restartProofWindow is how long after a reboot the guest has, at most, to show a sign that it
// restarted (the Node's boot id changed, the VM seen down, wait_for_launch or powering_up)
// before the same attempt resets the VM: min(restartProofWindow, timeout/2), so that the reset
// keeps at least half of the attempt's timeout. A guest that hangs ignores the Engine's warm
// reboot (ACPI or the guest agent): the VM stays up, nothing restarts.
const restartProofWindow = 2 * time.Minute

// maxResultLength is the MaxLength of status.attempts[].result.
const maxResultLength = 1024

// OVirtRemediationReconciler reboots the VM of the Machine an OVirtRemediation names and hands the
// Machine to its owner when reboots do not make it healthy.
type OVirtRemediationReconciler struct {
	// Client reads cached objects (OVirtRemediations, OVirtMachines, Clusters, OVirtProviders)
	// and patches OVirtRemediations and Machines.
	Client client.Client
	// APIReader reads Machines with their status (the cache keeps only their metadata and spec,
	// CacheTransform) and the Cluster's ownership key.
	APIReader client.Reader
	// Connector hands out oVirt clients per OVirtProvider.
	Connector *Connector
	// ClusterCache reaches workload clusters: the Machine's Node tells by its boot id whether
	// the guest restarted after a reboot. nil, or a workload cluster that cannot be reached:
	// only the VM's status can tell.
	ClusterCache clustercache.ClusterCache
	// Recorder emits events on the OVirtRemediation and its Machine.
	Recorder events.EventRecorder
	// ManagementClusterID is the management cluster's id in the owner markers (the
	// OVirtMachineReconciler's): only a marker of this management cluster proves ownership.
	ManagementClusterID string
	// WatchFilterValue limits reconciliation to labelled objects.
	WatchFilterValue string
	// VMPoll is how often a VM being stopped for a stop/start is read.
	VMPoll time.Duration
	// Retry is how soon a request that cannot act (the Engine unreachable, etcd quorum) tries
	// again.
	Retry time.Duration
	// Now returns the time; tests may fix it.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtremediations,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtremediations/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtremediations/finalizers,verbs=update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtremediationtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch

// SetupWithManager registers the reconciler and its watches: its Machines (deletion, pause, the
// owner's OwnerRemediated) and Clusters (pause).
func (r *OVirtRemediationReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.VMPoll <= 0 {
		r.VMPoll = 10 * time.Second
	}
	if r.Retry <= 0 {
		r.Retry = time.Minute
	}
	log := ctrl.LoggerFrom(ctx)
	clusterToRequests, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &infrav1.OVirtRemediationList{}, mgr.GetScheme())
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.OVirtRemediation{}).
		WithOptions(opts).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToRequest)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToRequests),
			builder.WithPredicates(predicates.ClusterPausedTransitions(mgr.GetScheme(), log))).
		Named("ovirtremediation").
		Complete(r)
}

// machineToRequest maps a Machine to the OVirtRemediation of the same name, when there is one.
func (r *OVirtRemediationReconciler) machineToRequest(ctx context.Context, o client.Object) []reconcile.Request {
	key := client.ObjectKeyFromObject(o)
	if err := r.Client.Get(ctx, key, &infrav1.OVirtRemediation{}); err != nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// remediationScope is what one reconcile of an OVirtRemediation works on.
type remediationScope struct {
	log     logr.Logger
	rem     *infrav1.OVirtRemediation
	machine *clusterv1.Machine
	cluster *clusterv1.Cluster
	om      *infrav1.OVirtMachine
	ovirt   ovirt.Client
	vm      *ovirt.VM
	// helper patches rem; persist replaces it after a patch in the middle of a reconcile.
	helper *patch.Helper
}

// ownedRemediationConditions are the conditions the manager owns on OVirtRemediations.
var ownedRemediationConditions = []string{
	infrav1.ReadyCondition, infrav1.CanConnectToOVirtCondition, infrav1.OwnershipProvenCondition, infrav1.PausedCondition,
}

// Reconcile runs the preamble (request, Machine, Cluster, pause, finalizer, patch helper) and then
// the remediation; the status is patched in a deferred call (and once before each Engine write).
func (r *OVirtRemediationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	rem := &infrav1.OVirtRemediation{}
	if err := r.Client.Get(ctx, req.NamespacedName, rem); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	machine, err := r.machineOf(ctx, rem)
	if err != nil {
		return ctrl.Result{}, err
	}
	if machine == nil {
		if !rem.DeletionTimestamp.IsZero() {
			return ctrl.Result{}, r.removeFinalizer(ctx, rem)
		}
		// The Machine is gone: the garbage collector deletes this request, its dependent.
		log.V(2).Info("The Machine of the request does not exist; waiting for the garbage collector")
		return ctrl.Result{}, nil
	}
	log = log.WithValues("Machine", klog.KObj(machine))
	ctx = ctrl.LoggerInto(ctx, log)

	if _, moving := rem.Annotations[deleteForMoveAnnotation]; moving && !rem.DeletionTimestamp.IsZero() {
		// clusterctl move deletes the source copy: the Machine moves with it, nothing to clear.
		return ctrl.Result{}, r.removeFinalizer(ctx, rem)
	}
	cluster, err := util.GetClusterFromMetadata(ctx, r.Client, machine.ObjectMeta)
	if err != nil {
		if !rem.DeletionTimestamp.IsZero() {
			return ctrl.Result{}, r.finalize(ctx, rem, machine)
		}
		log.Info("Waiting for the Machine's Cluster", "reason", err.Error())
		return ctrl.Result{RequeueAfter: r.Retry}, nil
	}
	log = log.WithValues("Cluster", klog.KObj(cluster))
	ctx = ctrl.LoggerInto(ctx, log)

	om, err := r.ovirtMachineOf(ctx, machine)
	if err != nil {
		return ctrl.Result{}, err
	}
	if isPaused, requeue, err := r.ensurePaused(ctx, cluster, machine, om, rem); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	if !rem.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, rem, machine)
	}
	if added, err := finalizers.EnsureFinalizer(ctx, r.Client, rem, RemediationFinalizer); err != nil || added {
		return ctrl.Result{}, err
	}

	helper, err := patch.NewHelper(rem, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	s := &remediationScope{log: log, rem: rem, machine: machine, cluster: cluster, om: om, helper: helper}
	defer func() {
		patchCtx, cancel := deferredPatchContext(ctx)
		defer cancel()
		if err := s.helper.Patch(patchCtx, rem, patch.WithOwnedConditions{Conditions: ownedRemediationConditions}); err != nil {
			reterr = errors.Join(reterr, fmt.Errorf("patching OVirtRemediation: %w", err))
		}
	}()
	return r.reconcileNormal(ctx, s)
}

// machineOf returns the request's Machine with its status (read from the API server: the cache
// strips Machine status): its owner Machine, else the Machine of its name (the
// MachineHealthCheck names the request after the Machine). nil when there is none.
func (r *OVirtRemediationReconciler) machineOf(ctx context.Context, rem *infrav1.OVirtRemediation) (*clusterv1.Machine, error) {
	name := rem.Name
	for _, ref := range rem.OwnerReferences {
		if ref.Kind == "Machine" && strings.HasPrefix(ref.APIVersion, clusterv1.GroupVersion.Group+"/") {
			name = ref.Name
			break
		}
	}
	m := &clusterv1.Machine{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: rem.Namespace, Name: name}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Machine %s/%s: %w", rem.Namespace, name, err)
	}
	return m, nil
}

// ovirtMachineOf returns the Machine's OVirtMachine; nil when its infrastructure is not an
// OVirtMachine or does not exist (yet).
func (r *OVirtRemediationReconciler) ovirtMachineOf(ctx context.Context, machine *clusterv1.Machine) (*infrav1.OVirtMachine, error) {
	ref := machine.Spec.InfrastructureRef
	if ref.Kind != "OVirtMachine" || ref.APIGroup != infrav1.GroupVersion.Group || ref.Name == "" {
		return nil, nil
	}
	om := &infrav1.OVirtMachine{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: machine.Namespace, Name: ref.Name}, om); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading OVirtMachine %s/%s: %w", machine.Namespace, ref.Name, err)
	}
	return om, nil
}

// ensurePaused sets the request's Paused condition, as paused.EnsurePausedCondition does, from
// the Cluster, the Machine, the OVirtMachine and the request itself (the paused annotation, or
// clusterctl's delete-for-move on any of them), and patches it when it changed.
func (r *OVirtRemediationReconciler) ensurePaused(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine,
	om *infrav1.OVirtMachine, rem *infrav1.OVirtRemediation) (isPaused, requeue bool, err error) {
	var why []string
	if cluster.Spec.Paused != nil && *cluster.Spec.Paused {
		why = append(why, "Cluster spec.paused is true")
	}
	type object struct {
		kind string
		obj  client.Object
	}
	objs := []object{{"Machine", machine}, {"OVirtRemediation", rem}}
	if om != nil {
		objs = append(objs, object{"OVirtMachine", om})
	}
	for _, ko := range objs {
		kind, o := ko.kind, ko.obj
		if annotations.HasPaused(o) {
			why = append(why, fmt.Sprintf("%s has the %s annotation", kind, clusterv1.PausedAnnotation))
		}
		if _, ok := o.GetAnnotations()[deleteForMoveAnnotation]; ok {
			why = append(why, fmt.Sprintf("%s is being moved by clusterctl (%s)", kind, deleteForMoveAnnotation))
		}
	}
	want := metav1.Condition{Type: infrav1.PausedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotPausedReason, ObservedGeneration: rem.Generation}
	if len(why) > 0 {
		want.Status, want.Reason, want.Message = metav1.ConditionTrue, clusterv1.PausedReason, strings.Join(why, "; ")
	}
	isPaused = want.Status == metav1.ConditionTrue
	if old := conditions.Get(rem, infrav1.PausedCondition); old != nil && conditions.HasSameState(old, &want) {
		return isPaused, false, nil
	}
	helper, err := patch.NewHelper(rem, r.Client)
	if err != nil {
		return isPaused, false, err
	}
	conditions.Set(rem, want)
	if err := helper.Patch(ctx, rem, patch.WithOwnedConditions{Conditions: []string{infrav1.PausedCondition}}); err != nil {
		return isPaused, false, fmt.Errorf("patching the Paused condition: %w", err)
	}
	if isPaused {
		ctrl.LoggerFrom(ctx).V(4).Info("Pausing the remediation", "reason", want.Message)
	}
	return isPaused, true, nil
}

// finalize ends a request the MachineHealthCheck deleted (the Machine is healthy again) or the
// garbage collector deleted (the Machine is gone): it clears the Machine's ExternallyRemediated
// condition, left by the MachineHealthCheck or by the hand-over, and drops the finalizer. It
// never waits for the Engine.
func (r *OVirtRemediationReconciler) finalize(ctx context.Context, rem *infrav1.OVirtRemediation, machine *clusterv1.Machine) error {
	if c := conditions.Get(machine, clusterv1.MachineExternallyRemediatedCondition); c != nil && machine.DeletionTimestamp.IsZero() &&
		(c.Reason == infrav1.RemediationFailedReason || c.Reason == clusterv1.MachineExternallyRemediatedWaitingForRemediationReason) {
		helper, err := patch.NewHelper(machine, r.machineWriter())
		if err != nil {
			return err
		}
		conditions.Delete(machine, clusterv1.MachineExternallyRemediatedCondition)
		if err := helper.Patch(ctx, machine, patch.WithOwnedConditions{Conditions: []string{clusterv1.MachineExternallyRemediatedCondition}}); err != nil &&
			!apierrors.IsNotFound(err) {
			return fmt.Errorf("clearing the ExternallyRemediated condition of Machine %s: %w", machine.Name, err)
		}
	}
	if len(rem.Status.Attempts) > 0 && rem.Status.Phase == infrav1.RemediationPhaseRunning {
		ctrl.LoggerFrom(ctx).Info("The remediation request was deleted: the Machine is healthy again or gone", "attempts", len(rem.Status.Attempts))
	}
	return r.removeFinalizer(ctx, rem)
}

// machineWriter is the client of the Machines' patch helpers: Cluster API's helper applies
// condition changes to the object it reads back, and the cache holds Machines without their
// status (CacheTransform), so that a patch computed there would replace the Machine's whole
// condition list with ours. It reads through APIReader and writes through Client.
func (r *OVirtRemediationReconciler) machineWriter() client.Client {
	return liveReads{Client: r.Client, reader: r.APIReader}
}

// liveReads is a client whose reads bypass the cache.
type liveReads struct {
	client.Client
	reader client.Reader
}

func (c liveReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reader.Get(ctx, key, obj, opts...)
}

func (c liveReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.reader.List(ctx, list, opts...)
}

// removeFinalizer drops the request's finalizer.
func (r *OVirtRemediationReconciler) removeFinalizer(ctx context.Context, rem *infrav1.OVirtRemediation) error {
	if !controllerutil.ContainsFinalizer(rem, RemediationFinalizer) {
		return nil
	}
	base := rem.DeepCopy()
	controllerutil.RemoveFinalizer(rem, RemediationFinalizer)
	if err := r.Client.Patch(ctx, rem, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizer of OVirtRemediation %s: %w", rem.Name, err)
	}
	return nil
}

// reconcileNormal is the remediation flow, one step per reconcile.
func (r *OVirtRemediationReconciler) reconcileNormal(ctx context.Context, s *remediationScope) (ctrl.Result, error) {
	rem, machine := s.rem, s.machine
	if !machine.DeletionTimestamp.IsZero() {
		// Its owner (or a human) is replacing it: nothing left to remediate.
		return ctrl.Result{}, nil
	}
	if rem.Status.Phase == infrav1.RemediationPhaseWaitingForOwner {
		r.mirrorOwner(s)
		return ctrl.Result{}, nil
	}
	if s.om == nil {
		ref := machine.Spec.InfrastructureRef
		if ref.Kind != "OVirtMachine" || ref.APIGroup != infrav1.GroupVersion.Group {
			return ctrl.Result{}, r.handOver(ctx, s, infrav1.NotAnOVirtMachineReason, fmt.Sprintf(
				"the Machine's infrastructure is a %s (%s), not an OVirtMachine: CAPOV cannot reboot it", ref.Kind, ref.APIGroup))
		}
		r.waiting(s, infrav1.WaitingForOVirtMachineReason, fmt.Sprintf("OVirtMachine %s does not exist", ref.Name))
		return ctrl.Result{RequeueAfter: r.Retry}, nil
	}
	if !machine.Status.NodeRef.IsDefined() && len(rem.Status.Attempts) == 0 {
		return ctrl.Result{}, r.handOver(ctx, s, infrav1.MachineHasNoNodeReason,
			"the Machine never had a Node: a reboot cannot help a first boot (the VM would restart without its bootstrap data)")
	}
	vmID := vmIDOf(s.om)
	if vmID == "" {
		r.waiting(s, infrav1.WaitingForOVirtMachineReason, fmt.Sprintf("OVirtMachine %s has no VM id yet", s.om.Name))
		return ctrl.Result{RequeueAfter: r.Retry}, nil
	}

	// The Engine: nothing is decided, not even that a timeout expired, without a read.
	if ok, res, err := r.connect(ctx, s); !ok {
		return res, err
	}
	vm, err := s.ovirt.GetVM(ctx, vmID)
	if err != nil {
		if errors.Is(err, ovirt.ErrNotFound) {
			return ctrl.Result{}, r.handOver(ctx, s, infrav1.VMNotFoundReason, fmt.Sprintf("VM %s does not exist in oVirt", vmID))
		}
		return r.engineProblem(s, err)
	}
	s.vm = vm
	engine, err := s.ovirt.EngineInfo(ctx)
	if err != nil {
		return r.engineProblem(s, err)
	}
	proven, why, err := r.proveOwnership(ctx, s, engine)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !proven {
		msg := fmt.Sprintf("VM %s: %s; CAPOV does not touch it (docs/operations.md, \"A VM that is not ours\")", vm.ID, why)
		if conditions.GetReason(rem, infrav1.OwnershipProvenCondition) != infrav1.VMNotOwnedReason {
			r.event(s, corev1.EventTypeWarning, eventVMNotOwned, "CheckOwner", "%s", msg)
		}
		conditions.Set(rem, metav1.Condition{Type: infrav1.OwnershipProvenCondition, Status: metav1.ConditionFalse, Reason: infrav1.VMNotOwnedReason, Message: msg})
		s.log.Info("Not rebooting a VM that does not prove it is the Machine's", "vmID", vm.ID, "why", why)
		return ctrl.Result{}, r.handOver(ctx, s, infrav1.VMNotOwnedReason, msg)
	}
	conditions.Set(rem, metav1.Condition{Type: infrav1.OwnershipProvenCondition, Status: metav1.ConditionTrue, Reason: infrav1.OwnerMarkerVerifiedReason})

	now := r.Now()
	if n := len(rem.Status.Attempts); n > 0 {
		last := &rem.Status.Attempts[n-1]
		switch last.Stage {
		case infrav1.RemediationStageStopping:
			if res, done, err := r.continueStopStart(ctx, s, last); done || err != nil {
				return res, err
			}
		case infrav1.RemediationStageAwaitingRestart:
			if res, done, err := r.awaitRestart(ctx, s, last, n, now); done || err != nil {
				return res, err
			}
		}
		if now.Before(attemptEnd(rem)) {
			r.running(s)
			return ctrl.Result{RequeueAfter: r.untilNextLook(s, now)}, nil
		}
		// Timed out: the attempt does nothing more (a VM it stopped and that is still not down
		// is the next attempt's, by its status).
		last.Stage = ""
		if !strings.HasSuffix(last.Result, resultTimedOut) {
			last.Result = appendResult(last.Result, resultTimedOut)
			r.event(s, corev1.EventTypeWarning, eventRemediationTimedOut, "Remediate",
				"Attempt %d (%s) did not make Machine %s healthy within %s", n, last.Action, machine.Name, rem.Spec.Timeout())
		}
		if int(rem.Status.RetryCount) >= rem.Spec.RetryLimit() || n >= infrav1.MaxRemediationAttempts {
			return ctrl.Result{}, r.handOver(ctx, s, infrav1.RetryLimitReachedReason, fmt.Sprintf(
				"%d attempt(s) did not make the Machine healthy within %s each (retryLimit %d)", n, rem.Spec.Timeout(), rem.Spec.RetryLimit()))
		}
	}
	if ok, msg, err := r.etcdQuorumAllows(ctx, s); err != nil || !ok {
		if err != nil {
			return ctrl.Result{}, err
		}
		r.waiting(s, infrav1.WaitingForEtcdQuorumReason, msg)
		return ctrl.Result{RequeueAfter: r.Retry}, nil
	}
	return r.attempt(ctx, s, now)
}

// connect connects to the OVirtMachine's OVirtProvider as the OVirtMachineReconciler does;
// a failure is CanConnectToOVirt False with Classify's reason and the phase Waiting.
func (r *OVirtRemediationReconciler) connect(ctx context.Context, s *remediationScope) (bool, ctrl.Result, error) {
	p := &infrav1.OVirtProvider{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: s.om.Spec.Provider}, p); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, ctrl.Result{}, err
		}
		r.cannotConnect(s, infrav1.ProviderNotFoundReason, fmt.Sprintf("OVirtProvider %q named by the OVirtMachine's spec.provider does not exist", s.om.Spec.Provider))
		return false, ctrl.Result{RequeueAfter: r.Retry}, nil
	}
	ok, why, err := provideraccess.Allowed(ctx, r.APIReader, p, s.rem.Namespace)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	if !ok {
		r.cannotConnect(s, infrav1.NamespaceNotAllowedReason, why)
		return false, ctrl.Result{RequeueAfter: r.Retry}, nil
	}
	cl, _, err := r.Connector.Connect(ctx, p)
	if err != nil {
		problem := Classify(err)
		r.cannotConnect(s, problem.Reason, fmt.Sprintf("OVirtProvider %s: %s", p.Name, problem.Message))
		s.log.Info("Cannot connect to oVirt; not remediating until it can", "OVirtProvider", p.Name, "reason", problem.Reason)
		return false, ctrl.Result{RequeueAfter: min(r.Retry, r.VMPoll*3)}, nil
	}
	conditions.Set(s.rem, metav1.Condition{Type: infrav1.CanConnectToOVirtCondition, Status: metav1.ConditionTrue, Reason: reasonDone})
	s.ovirt = cl
	return true, ctrl.Result{}, nil
}

// engineProblem records an Engine error other than a 404 as a connection problem: no attempt,
// no hand-over.
func (r *OVirtRemediationReconciler) engineProblem(s *remediationScope, err error) (ctrl.Result, error) {
	problem := Classify(err)
	r.cannotConnect(s, problem.Reason, problem.Message)
	s.log.Info("Cannot read the VM from oVirt; not remediating until it can", "reason", problem.Reason)
	return ctrl.Result{RequeueAfter: min(r.Retry, r.VMPoll*3)}, nil
}

// cannotConnect sets CanConnectToOVirt False and the phase Waiting.
func (r *OVirtRemediationReconciler) cannotConnect(s *remediationScope, reason, msg string) {
	conditions.Set(s.rem, metav1.Condition{Type: infrav1.CanConnectToOVirtCondition, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
	r.waiting(s, infrav1.WaitingForEngineReason, "the Engine cannot be read ("+reason+"): no reboot and no hand-over until it can; "+
		"a Machine unhealthy because oVirt is down is not rebooted")
}

// waiting sets the phase Waiting with Ready False.
func (r *OVirtRemediationReconciler) waiting(s *remediationScope, reason, msg string) {
	s.rem.Status.Phase = infrav1.RemediationPhaseWaiting
	conditions.Set(s.rem, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
}

// running sets the phase Running with Ready True, describing the current attempt.
func (r *OVirtRemediationReconciler) running(s *remediationScope) {
	rem := s.rem
	rem.Status.Phase = infrav1.RemediationPhaseRunning
	msg := ""
	if n := len(rem.Status.Attempts); n > 0 {
		last := rem.Status.Attempts[n-1]
		msg = fmt.Sprintf("attempt %d of %d (%s) requested at %s; waiting until %s for the Machine to be healthy",
			n, rem.Spec.RetryLimit()+1, last.Action, last.RequestedAt.UTC().Format(time.RFC3339),
			last.RequestedAt.Add(rem.Spec.Timeout()).UTC().Format(time.RFC3339))
		if last.Result != "" {
			msg += " (" + last.Result + ")"
		}
		if last.Stage == infrav1.RemediationStageAwaitingRestart {
			msg += fmt.Sprintf("; the VM is reset at %s unless the guest shows a sign of a restart before",
				restartDeadline(rem, &last).UTC().Format(time.RFC3339))
		}
	}
	conditions.Set(rem, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionTrue, Reason: infrav1.RemediationInProgressReason, Message: msg})
}

// proveOwnership checks that the VM is the OVirtMachine's: its current owner marker, with a
// proof that verifies under the Cluster's key, read from the Engine on which the machine found
// it. It never rewrites a marker.
func (r *OVirtRemediationReconciler) proveOwnership(ctx context.Context, s *remediationScope, info ovirt.EngineInfo) (bool, string, error) {
	if recorded := s.om.Status.EngineInstanceID; recorded == "" || info.InstanceID != recorded {
		return false, fmt.Sprintf("the Engine answering (instance %q) is not the one the OVirtMachine recorded its VM on (%q)", info.InstanceID, recorded), nil
	}
	key, err := readOwnershipKey(ctx, r.APIReader, s.om.Namespace, s.cluster.Name)
	if err != nil {
		return false, "", err
	}
	if key == nil {
		return false, fmt.Sprintf("Cluster %s has no ownership key (Secret %s) to verify the VM's owner marker", s.cluster.Name, ownershipKeyName(s.cluster.Name)), nil
	}
	if !ownershipProven(s.vm, s.om, r.ManagementClusterID, s.cluster.Name, key) {
		return false, fmt.Sprintf("it does not carry OVirtMachine %s/%s's current owner marker with a proof that verifies under the key of Cluster %s",
			s.om.Namespace, s.om.Name, s.cluster.Name), nil
	}
	return true, "", nil
}

// etcdQuorumAllows reports whether the Machine may be rebooted as far as etcd is concerned: a
// control-plane Machine whose etcd member is healthy (EtcdMemberHealthy, set by
// KubeadmControlPlane) is rebooted only if the other healthy members are still a majority of
// all control-plane Machines of the Cluster.
func (r *OVirtRemediationReconciler) etcdQuorumAllows(ctx context.Context, s *remediationScope) (bool, string, error) {
	if _, ok := s.machine.Labels[clusterv1.MachineControlPlaneLabel]; !ok {
		return true, "", nil
	}
	if !conditions.IsTrue(s.machine, controlplanev1.KubeadmControlPlaneMachineEtcdMemberHealthyCondition) {
		return true, "", nil // its member is not healthy: the reboot takes nothing from the quorum
	}
	list := &clusterv1.MachineList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(s.machine.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: s.cluster.Name}, client.HasLabels{clusterv1.MachineControlPlaneLabel}); err != nil {
		return false, "", fmt.Errorf("listing the control-plane Machines of Cluster %s: %w", s.cluster.Name, err)
	}
	total, healthy := 0, 0
	for i := range list.Items {
		m := &list.Items[i]
		total++
		if m.DeletionTimestamp.IsZero() && conditions.IsTrue(m, controlplanev1.KubeadmControlPlaneMachineEtcdMemberHealthyCondition) {
			healthy++
		}
	}
	quorum := total/2 + 1
	if healthy-1 >= quorum {
		return true, "", nil
	}
	return false, fmt.Sprintf("rebooting this control-plane Machine would leave %d of %d etcd members healthy, fewer than the quorum of %d; "+
		"waiting for the others to be healthy", healthy-1, total, quorum), nil
}

// attempt makes the next attempt: recorded in status before the Engine call, then the power
// action the VM's status calls for.
func (r *OVirtRemediationReconciler) attempt(ctx context.Context, s *remediationScope, now time.Time) (ctrl.Result, error) {
	rem, vm := s.rem, s.vm
	first := len(rem.Status.Attempts) == 0
	var action infrav1.RemediationAction
	switch vm.Status {
	case ovirt.VMStatusUp, ovirt.VMStatusPoweringUp:
		action = infrav1.RemediationActionReset
		if first {
			action = infrav1.RemediationActionReboot
		}
	case ovirt.VMStatusRebootInProgress:
		action = infrav1.RemediationActionReset
	case ovirt.VMStatusPaused:
		action = infrav1.RemediationActionStopStart
	case ovirt.VMStatusDown:
		action = infrav1.RemediationActionStart
	default:
		// not_responding, unknown, migrating, image_locked...: no power action helps; the timeout
		// runs (a dead host is the owner's to replace).
		action = infrav1.RemediationActionNone
	}
	if !first {
		rem.Status.RetryCount++
	}
	a := infrav1.RemediationAttempt{Action: action, RequestedAt: metav1.NewTime(now), VMStatus: string(vm.Status)}
	switch action {
	case infrav1.RemediationActionReboot:
		// The boot id before the reboot: another one later proves the guest restarted.
		a.Stage, a.NodeBootID = infrav1.RemediationStageAwaitingRestart, r.nodeBootID(ctx, s)
	case infrav1.RemediationActionStopStart:
		a.Stage, a.Result = infrav1.RemediationStageStopping, "VM "+string(vm.Status)+": "+resultStopRequested
	case infrav1.RemediationActionNone:
		a.Result = "VM " + string(vm.Status) + ": no power action helps; waiting"
	}
	rem.Status.Attempts = append(rem.Status.Attempts, a)
	rem.Status.LastRemediated = &a.RequestedAt
	r.running(s)
	if err := r.persist(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	last := lastAttempt(rem)
	n := len(rem.Status.Attempts)
	switch action {
	case infrav1.RemediationActionReboot:
		if err := s.ovirt.Power(ctx, vm.ID, ovirt.PowerReboot); err != nil {
			// Refused or not, the guest has until the deadline to show it restarted.
			return r.refused(s, last, err)
		}
		r.event(s, corev1.EventTypeNormal, eventRebootRequested, "Remediate", "Attempt %d: asked oVirt to reboot VM %s", n, vm.ID)
	case infrav1.RemediationActionReset:
		return r.reset(ctx, s, n)
	case infrav1.RemediationActionStopStart:
		return r.stop(ctx, s, last, n)
	case infrav1.RemediationActionStart:
		if err := s.ovirt.Power(ctx, vm.ID, ovirt.PowerStart); err != nil {
			return r.refused(s, last, err)
		}
		r.event(s, corev1.EventTypeNormal, eventStartRequested, "Remediate", "Attempt %d: VM %s was down; asked oVirt to start it", n, vm.ID)
	}
	r.running(s)
	return ctrl.Result{RequeueAfter: r.untilNextLook(s, now)}, nil
}

// reset asks the Engine to reset the VM of attempt n (recorded and persisted by the caller).
// When the Engine cannot (cluster level below 4.6: ErrInvalid), the attempt stops the VM, to
// start it once down.
func (r *OVirtRemediationReconciler) reset(ctx context.Context, s *remediationScope, n int) (ctrl.Result, error) {
	last := lastAttempt(s.rem)
	if err := s.ovirt.Power(ctx, s.vm.ID, ovirt.PowerReset); err != nil {
		if !errors.Is(err, ovirt.ErrInvalid) || ovirt.PermissionDenied(err) {
			return r.refused(s, last, err)
		}
		// The Engine cannot reset here (cluster level below 4.6): stop, then start.
		if last.Action == infrav1.RemediationActionReset {
			last.Action = infrav1.RemediationActionStopStart
		}
		last.Stage = infrav1.RemediationStageStopping
		last.Result = truncateResult(appendResult(last.Result, "reset refused ("+err.Error()+"): "+resultStopRequested))
		if err := r.persist(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		return r.stop(ctx, s, lastAttempt(s.rem), n)
	}
	r.event(s, corev1.EventTypeNormal, eventResetRequested, "Remediate", "Attempt %d: asked oVirt to reset VM %s", n, s.vm.ID)
	r.running(s)
	return ctrl.Result{RequeueAfter: r.untilNextLook(s, r.Now())}, nil
}

// awaitRestart looks, after the reboot of attempt n, for a sign that the guest restarted
// (restartSign). With one, the attempt only waits for its timeout. Without one at the deadline
// (restartProofWindow) and before the timeout, the guest did not answer: the same attempt
// resets the VM (escalate). done is false when the caller goes on.
func (r *OVirtRemediationReconciler) awaitRestart(ctx context.Context, s *remediationScope, last *infrav1.RemediationAttempt, n int, now time.Time) (ctrl.Result, bool, error) {
	if sign := r.restartSign(ctx, s, last); sign != "" {
		last.Stage = ""
		last.Result = truncateResult(appendResult(last.Result, "the guest restarted ("+sign+")"))
		s.log.Info("The guest restarted after the reboot", "vmID", s.vm.ID, "sign", sign)
		return ctrl.Result{}, false, nil
	}
	if now.Before(restartDeadline(s.rem, last)) || !now.Before(attemptEnd(s.rem)) {
		// Still time for a sign; or none came before the timeout, which then decides (the
		// manager was not running, or the Engine could not be read, at the deadline).
		return ctrl.Result{}, false, nil
	}
	res, err := r.escalate(ctx, s, n, now)
	return res, true, err
}

// restartSign returns what shows that the guest restarted since the attempt's reboot, or "":
// the VM seen down, wait_for_launch or powering_up (a cold reboot passes through them; not
// when the VM was already in that status at the request), or the workload Node's boot id no
// longer the one recorded at the request. The Engine's reboot_in_progress is no sign: the
// Engine shows it for a guest that ignores the reboot too. A workload cluster that cannot be
// read proves nothing.
func (r *OVirtRemediationReconciler) restartSign(ctx context.Context, s *remediationScope, last *infrav1.RemediationAttempt) string {
	switch st := s.vm.Status; st {
	case ovirt.VMStatusDown, ovirt.VMStatusWaitForLaunch, ovirt.VMStatusPoweringUp:
		if string(st) != last.VMStatus {
			return "VM seen " + string(st)
		}
	}
	if last.NodeBootID == "" {
		return ""
	}
	if id := r.nodeBootID(ctx, s); id != "" && id != last.NodeBootID {
		return fmt.Sprintf("Node %s has a new boot id", s.machine.Status.NodeRef.Name)
	}
	return ""
}

// escalate goes on with attempt n, whose reboot the guest did not answer: a reset (or, when the
// Engine cannot reset, a stop and start; a paused VM is stopped and started), recorded and
// persisted before the Engine call. A VM in a status no power action helps (not responding,
// migrating, locked...) is left to the timeout.
func (r *OVirtRemediationReconciler) escalate(ctx context.Context, s *remediationScope, n int, now time.Time) (ctrl.Result, error) {
	rem, vm := s.rem, s.vm
	last := lastAttempt(rem)
	window := min(restartProofWindow, rem.Spec.Timeout()/2)
	noSign := fmt.Sprintf("no sign of a restart within %s", window)
	why := fmt.Sprintf("Attempt %d: the guest of VM %s showed no sign of a restart within %s of the reboot (VM %s", n, vm.ID, window, vm.Status)
	if last.NodeBootID != "" {
		why += fmt.Sprintf(", no new boot id from Node %s", s.machine.Status.NodeRef.Name)
	}
	why += ")"
	last.Stage = ""
	switch vm.Status {
	case ovirt.VMStatusUp, ovirt.VMStatusPoweringUp, ovirt.VMStatusRebootInProgress, ovirt.VMStatusPoweringDown:
		last.EscalatedAt = ptr.To(metav1.NewTime(now))
		last.Result = truncateResult(appendResult(last.Result, noSign+": reset"))
		if err := r.persist(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		r.event(s, corev1.EventTypeWarning, eventGuestDidNotAnswer, "Remediate", "%s; resetting it", why)
		s.log.Info("The guest did not answer the reboot; resetting the VM", "vmID", vm.ID, "vmStatus", vm.Status)
		return r.reset(ctx, s, n)
	case ovirt.VMStatusPaused:
		last.EscalatedAt = ptr.To(metav1.NewTime(now))
		last.Stage = infrav1.RemediationStageStopping
		last.Result = truncateResult(appendResult(last.Result, noSign+": VM paused: "+resultStopRequested))
		if err := r.persist(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		r.event(s, corev1.EventTypeWarning, eventGuestDidNotAnswer, "Remediate", "%s; stopping and starting it", why)
		s.log.Info("The guest did not answer the reboot; stopping and starting the VM", "vmID", vm.ID, "vmStatus", vm.Status)
		return r.stop(ctx, s, lastAttempt(rem), n)
	default:
		last.Result = truncateResult(appendResult(last.Result, noSign+": VM "+string(vm.Status)+": no power action helps; waiting"))
		r.event(s, corev1.EventTypeWarning, eventGuestDidNotAnswer, "Remediate", "%s; no power action helps while it is %s", why, vm.Status)
		r.running(s)
		return ctrl.Result{RequeueAfter: r.untilNextLook(s, now)}, nil
	}
}

// nodeBootID returns the boot id (status.nodeInfo.bootID) of the Machine's workload Node, read
// live through the ClusterCache (its Node cache keeps no boot id, CacheTransform; a remediation
// reads one Node a few times). "" when there is no ClusterCache, the workload cluster is not
// connected or the Node cannot be read: an unreachable workload cluster is no sign of anything.
func (r *OVirtRemediationReconciler) nodeBootID(ctx context.Context, s *remediationScope) string {
	name := s.machine.Status.NodeRef.Name
	if r.ClusterCache == nil || name == "" {
		return ""
	}
	log := s.log.WithValues("Node", klog.KRef("", name))
	remote, err := r.ClusterCache.GetUncachedClient(ctx, util.ObjectKey(s.cluster))
	if err != nil {
		log.V(4).Info("Cannot reach the workload cluster to read the Node's boot id", "error", err.Error())
		return ""
	}
	node := &corev1.Node{}
	if err := remote.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		log.V(4).Info("Cannot read the Node's boot id", "error", err.Error())
		return ""
	}
	if id := node.Status.NodeInfo.BootID; len(id) <= maxBootIDLength {
		return id
	}
	return "" // not a boot id status.attempts can hold (a UUID)
}

// maxBootIDLength is the MaxLength of status.attempts[].nodeBootID.
const maxBootIDLength = 64

// lastAttempt returns the request's last attempt (there is one). Taken again after each
// persist: a patch decodes the answer into the request.
func lastAttempt(rem *infrav1.OVirtRemediation) *infrav1.RemediationAttempt {
	return &rem.Status.Attempts[len(rem.Status.Attempts)-1]
}

// attemptEnd is when the last attempt times out: timeout after it was requested.
func attemptEnd(rem *infrav1.OVirtRemediation) time.Time {
	started := lastAttempt(rem).RequestedAt.Time
	if rem.Status.LastRemediated != nil {
		started = rem.Status.LastRemediated.Time
	}
	return started.Add(rem.Spec.Timeout())
}

// restartDeadline is when an attempt that rebooted the VM resets it without a sign of a
// restart: min(restartProofWindow, timeout/2) after the request.
func restartDeadline(rem *infrav1.OVirtRemediation, a *infrav1.RemediationAttempt) time.Time {
	return a.RequestedAt.Add(min(restartProofWindow, rem.Spec.Timeout()/2))
}

// untilNextLook is when the last attempt is looked at again: every VMPoll while it waits for a
// sign of the guest's restart (until the deadline) or for the VM it stopped to be down, else at
// its timeout.
func (r *OVirtRemediationReconciler) untilNextLook(s *remediationScope, now time.Time) time.Duration {
	last := lastAttempt(s.rem)
	wait := attemptEnd(s.rem).Sub(now)
	switch last.Stage {
	case infrav1.RemediationStageStopping:
		wait = min(wait, r.VMPoll)
	case infrav1.RemediationStageAwaitingRestart:
		wait = min(wait, r.VMPoll)
		if d := restartDeadline(s.rem, last).Sub(now); d > 0 {
			wait = min(wait, d)
		}
	}
	if wait <= 0 {
		return r.VMPoll
	}
	return wait
}

// stop asks the Engine to stop the VM of a stop/start attempt; the start follows once it is down.
func (r *OVirtRemediationReconciler) stop(ctx context.Context, s *remediationScope, last *infrav1.RemediationAttempt, n int) (ctrl.Result, error) {
	if err := s.ovirt.Power(ctx, s.vm.ID, ovirt.PowerStop); err != nil {
		return r.refused(s, last, err)
	}
	r.event(s, corev1.EventTypeNormal, eventStopStartRequested, "Remediate", "Attempt %d: asked oVirt to stop VM %s; it is started once down", n, s.vm.ID)
	r.running(s)
	return ctrl.Result{RequeueAfter: r.VMPoll}, nil
}

// continueStopStart starts the VM of a stop/start attempt once it is down. done is false when
// the caller goes on (the VM was started, or the attempt's timeout decides).
func (r *OVirtRemediationReconciler) continueStopStart(ctx context.Context, s *remediationScope, last *infrav1.RemediationAttempt) (ctrl.Result, bool, error) {
	if s.vm.Status != ovirt.VMStatusDown {
		return ctrl.Result{}, false, nil
	}
	// A plain start: the VM ran before, its bootstrap data is not needed again.
	if err := s.ovirt.Power(ctx, s.vm.ID, ovirt.PowerStart); err != nil {
		if errors.Is(err, ovirt.ErrUnreachable) {
			res, err := r.engineProblem(s, err)
			return res, true, err
		}
		if errors.Is(err, ovirt.ErrLocked) || errors.Is(err, ovirt.ErrConflict) {
			r.running(s)
			return ctrl.Result{RequeueAfter: r.VMPoll}, true, nil
		}
		return ctrl.Result{}, true, fmt.Errorf("starting VM %s after its stop: %w", s.vm.ID, err)
	}
	last.Stage = ""
	last.Result = truncateResult(appendResult(last.Result, resultStarted))
	s.log.Info("Started the VM after its stop", "vmID", s.vm.ID)
	return ctrl.Result{}, false, nil
}

// refused records an Engine error of an attempt's power action. A connection problem makes the
// request wait; a refusal is the attempt's result, and its timeout runs.
func (r *OVirtRemediationReconciler) refused(s *remediationScope, last *infrav1.RemediationAttempt, err error) (ctrl.Result, error) {
	last.Result = truncateResult(appendResult(last.Result, "the Engine refused: "+err.Error()))
	if ovirt.PermissionDenied(err) {
		last.Result = truncateResult(appendResult(last.Result, missingPermission("REBOOT_VM, RESET_VM, STOP_VM and RUN_VM on the VM (UserVmManager)")))
	}
	if errors.Is(err, ovirt.ErrUnreachable) {
		return r.engineProblem(s, err)
	}
	s.log.Info("oVirt refused the remediation's power action; the attempt's timeout runs", "vmID", s.vm.ID, "action", last.Action, "error", err.Error())
	r.running(s)
	return ctrl.Result{RequeueAfter: r.untilNextLook(s, r.Now())}, nil
}

// persist patches the request's status now (before an Engine write) and renews the patch
// helper, so that the deferred patch sends only what follows.
func (r *OVirtRemediationReconciler) persist(ctx context.Context, s *remediationScope) error {
	if err := s.helper.Patch(ctx, s.rem, patch.WithOwnedConditions{Conditions: ownedRemediationConditions}); err != nil {
		return fmt.Errorf("recording the remediation attempt before the Engine call: %w", err)
	}
	h, err := patch.NewHelper(s.rem, r.Client)
	if err != nil {
		return err
	}
	s.helper = h
	return nil
}

// handOver marks the Machine for its owner: OwnerRemediated False (WaitingForRemediation, both
// condition formats: what MachineSet and KubeadmControlPlane act on) unless the owner already
// wrote it, and ExternallyRemediated False (RemediationFailed) listing the attempts; the request
// goes to WaitingForOwner.
func (r *OVirtRemediationReconciler) handOver(ctx context.Context, s *remediationScope, reason, why string) error {
	rem, machine := s.rem, s.machine
	helper, err := patch.NewHelper(machine, r.machineWriter())
	if err != nil {
		return err
	}
	msg := "CAPOV's reboot remediation ended: " + why + "; the Machine's owner replaces it"
	if c := conditions.Get(machine, clusterv1.MachineOwnerRemediatedCondition); c == nil || c.Status == metav1.ConditionTrue {
		conditions.Set(machine, metav1.Condition{Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse,
			Reason: clusterv1.MachineOwnerRemediatedWaitingForRemediationReason, Message: msg})
	}
	if !v1beta1conditions.Has(machine, clusterv1.MachineOwnerRemediatedV1Beta1Condition) || v1beta1conditions.IsTrue(machine, clusterv1.MachineOwnerRemediatedV1Beta1Condition) {
		v1beta1conditions.MarkFalse(machine, clusterv1.MachineOwnerRemediatedV1Beta1Condition, clusterv1.WaitingForRemediationV1Beta1Reason,
			clusterv1.ConditionSeverityWarning, "%s", msg)
	}
	conditions.Set(machine, metav1.Condition{Type: clusterv1.MachineExternallyRemediatedCondition, Status: metav1.ConditionFalse,
		Reason: infrav1.RemediationFailedReason, Message: why + "; attempts: " + describeAttempts(rem.Status.Attempts)})
	if err := helper.Patch(ctx, machine,
		patch.WithOwnedV1Beta1Conditions{Conditions: []clusterv1.ConditionType{clusterv1.MachineOwnerRemediatedV1Beta1Condition}},
		patch.WithOwnedConditions{Conditions: []string{clusterv1.MachineOwnerRemediatedCondition, clusterv1.MachineExternallyRemediatedCondition}}); err != nil {
		return fmt.Errorf("marking Machine %s for its owner's remediation: %w", machine.Name, err)
	}
	rem.Status.Phase = infrav1.RemediationPhaseWaitingForOwner
	conditions.Set(rem, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionTrue, Reason: reason, Message: msg})
	r.event(s, corev1.EventTypeWarning, eventRemediationHandedToOwner, "HandOver", "%s", msg)
	s.log.Info("Handed the Machine to its owner", "reason", reason, "attempts", len(rem.Status.Attempts))
	r.mirrorOwner(s)
	return nil
}

// mirrorOwner adds to Ready's message what the owner wrote into the Machine's OwnerRemediated
// (KubeadmControlPlane's refusals, a MachineSet's deferral).
func (r *OVirtRemediationReconciler) mirrorOwner(s *remediationScope) {
	ready := conditions.Get(s.rem, infrav1.ReadyCondition)
	owner := conditions.Get(s.machine, clusterv1.MachineOwnerRemediatedCondition)
	if ready == nil || owner == nil || owner.Reason == clusterv1.MachineOwnerRemediatedWaitingForRemediationReason {
		return
	}
	base, _, _ := strings.Cut(ready.Message, " | owner: ")
	ready.Message = base + " | owner: " + owner.Reason
	if owner.Message != "" {
		ready.Message += ": " + owner.Message
	}
	conditions.Set(s.rem, *ready)
}

// event emits an event on the request and the same on its Machine.
func (r *OVirtRemediationReconciler) event(s *remediationScope, eventType, reason, action, format string, args ...any) {
	r.Recorder.Eventf(s.rem, s.machine, eventType, reason, action, format, args...)
	r.Recorder.Eventf(s.machine, s.rem, eventType, reason, action, format, args...)
}

// describeAttempts lists the attempts for a condition message.
func describeAttempts(attempts []infrav1.RemediationAttempt) string {
	if len(attempts) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(attempts))
	for i, a := range attempts {
		p := fmt.Sprintf("%d. %s at %s (VM %s)", i+1, a.Action, a.RequestedAt.UTC().Format(time.RFC3339), a.VMStatus)
		if a.Result != "" {
			p += ": " + a.Result
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

func appendResult(result, more string) string {
	if result == "" {
		return more
	}
	return result + "; " + more
}

func truncateResult(s string) string {
	if len(s) <= maxResultLength {
		return s
	}
	return s[:maxResultLength-3] + "..."
}

// remediationInProgress reports whether an OVirtRemediation of the machine's Machine (named
// like it, in its namespace) is running an attempt: the OVirtMachine controller then leaves the
// VM's power alone (a VM its stop/start has just stopped must not be started by anyone else). A
// cache read; false when there is no such request or it cannot be read.
func remediationInProgress(ctx context.Context, c client.Reader, om *infrav1.OVirtMachine, machine *clusterv1.Machine) bool {
	if om == nil || machine == nil {
		return false
	}
	rem := &infrav1.OVirtRemediation{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: om.Namespace, Name: machine.Name}, rem); err != nil {
		return false
	}
	return rem.DeletionTimestamp.IsZero() && rem.Status.Phase == infrav1.RemediationPhaseRunning
}
