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
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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
// Machine; the manager reboots the Machine's VM through the Engine, waits spec.strategy.timeout
// for the MachineHealthCheck to find the Machine healthy (it then deletes the request), tries
// again up to retryLimit times, and then hands the Machine to its owner (MachineSet or
// KubeadmControlPlane) by setting OwnerRemediated=False on it. It never deletes a Machine, never
// writes to a VM whose ownership is not proven, does nothing while paused, and neither acts nor
// hands over while the Engine cannot be read.

// RemediationFinalizer is the finalizer of every OVirtRemediation: its removal (the
// MachineHealthCheck deleting the request) clears the Machine's ExternallyRemediated condition.
const RemediationFinalizer = "ovirtremediation.infrastructure.cluster.x-k8s.io"

// Condition types of an OVirtRemediation besides Ready, CanConnectToOVirt and Paused.
const (
	// OwnershipProvenCondition is True when the VM carries the OVirtMachine's current owner
	// marker with a proof that verifies under the Cluster's key, on the Engine that recorded it.
	OwnershipProvenCondition = "OwnershipProven"
)

// Reasons of an OVirtRemediation's conditions, and of the Machine's ExternallyRemediated.
const (
	// RemediationInProgressReason (Ready True, phase Running): an attempt was made and the
	// request waits spec.strategy.timeout for the Machine to be healthy.
	RemediationInProgressReason = "RemediationInProgress"
	// WaitingForEngineReason (Ready False, phase Waiting): the Engine cannot be reached or read
	// (CanConnectToOVirt says why); no attempt and no hand-over until it can.
	WaitingForEngineReason = "WaitingForEngine"
	// WaitingForEtcdQuorumReason (Ready False, phase Waiting): rebooting this control-plane
	// machine would leave fewer than a majority of the control plane's etcd members healthy.
	WaitingForEtcdQuorumReason = "WaitingForEtcdQuorum"
	// WaitingForOVirtMachineReason (Ready False, phase Waiting): the Machine's OVirtMachine or
	// its VM id is not known (yet).
	WaitingForOVirtMachineReason = "WaitingForOVirtMachine"
	// RetryLimitReachedReason (Ready True, phase WaitingForOwner): every attempt timed out; the
	// Machine is handed to its owner.
	RetryLimitReachedReason = "RetryLimitReached"
	// MachineHasNoNodeReason (Ready True, phase WaitingForOwner): the Machine never had a Node; a
	// reboot cannot help a first boot (the VM would come back without its bootstrap data).
	MachineHasNoNodeReason = "MachineHasNoNode"
	// NotAnOVirtMachineReason (Ready True, phase WaitingForOwner): the Machine's infrastructure
	// is not an OVirtMachine.
	NotAnOVirtMachineReason = "NotAnOVirtMachine"
	// OwnerMarkerVerifiedReason goes with OwnershipProven True.
	OwnerMarkerVerifiedReason = "OwnerMarkerVerified"
	// RemediationFailedReason (the Machine's ExternallyRemediated False): the attempts did not
	// make the Machine healthy, or none could be made; the message lists them.
	RemediationFailedReason = "RemediationFailed"
)

// Event reasons of the remediation (on the OVirtRemediation and on its Machine).
const (
	eventRebootRequested          = "RebootRequested"
	eventResetRequested           = "ResetRequested"
	eventStopStartRequested       = "StopStartRequested"
	eventStartRequested           = "StartRequested"
	eventRemediationTimedOut      = "RemediationTimedOut"
	eventRemediationHandedToOwner = "RemediationHandedToOwner"
)

// Results of a stop/start attempt: resultStartOnceDown ends the result while the VM is being
// stopped (the start follows once it is down); resultStarted replaces it after the start.
const (
	resultStartOnceDown = "stop requested, start once down"
	resultStarted       = "stopped, then started"
	resultTimedOut      = "timed out"
)

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
	infrav1.ReadyCondition, infrav1.CanConnectToOVirtCondition, OwnershipProvenCondition, infrav1.PausedCondition,
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
		(c.Reason == RemediationFailedReason || c.Reason == clusterv1.MachineExternallyRemediatedWaitingForRemediationReason) {
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
			return ctrl.Result{}, r.handOver(ctx, s, NotAnOVirtMachineReason, fmt.Sprintf(
				"the Machine's infrastructure is a %s (%s), not an OVirtMachine: CAPOV cannot reboot it", ref.Kind, ref.APIGroup))
		}
		r.waiting(s, WaitingForOVirtMachineReason, fmt.Sprintf("OVirtMachine %s does not exist", ref.Name))
		return ctrl.Result{RequeueAfter: r.Retry}, nil
	}
	if !machine.Status.NodeRef.IsDefined() && len(rem.Status.Attempts) == 0 {
		return ctrl.Result{}, r.handOver(ctx, s, MachineHasNoNodeReason,
			"the Machine never had a Node: a reboot cannot help a first boot (the VM would restart without its bootstrap data)")
	}
	vmID := vmIDOf(s.om)
	if vmID == "" {
		r.waiting(s, WaitingForOVirtMachineReason, fmt.Sprintf("OVirtMachine %s has no VM id yet", s.om.Name))
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
		if conditions.GetReason(rem, OwnershipProvenCondition) != infrav1.VMNotOwnedReason {
			r.event(s, corev1.EventTypeWarning, eventVMNotOwned, "CheckOwner", "%s", msg)
		}
		conditions.Set(rem, metav1.Condition{Type: OwnershipProvenCondition, Status: metav1.ConditionFalse, Reason: infrav1.VMNotOwnedReason, Message: msg})
		s.log.Info("Not rebooting a VM that does not prove it is the Machine's", "vmID", vm.ID, "why", why)
		return ctrl.Result{}, r.handOver(ctx, s, infrav1.VMNotOwnedReason, msg)
	}
	conditions.Set(rem, metav1.Condition{Type: OwnershipProvenCondition, Status: metav1.ConditionTrue, Reason: OwnerMarkerVerifiedReason})

	now := r.Now()
	if n := len(rem.Status.Attempts); n > 0 {
		last := &rem.Status.Attempts[n-1]
		if strings.HasSuffix(last.Result, resultStartOnceDown) {
			if res, done, err := r.continueStopStart(ctx, s, last); done || err != nil {
				return res, err
			}
		}
		started := last.RequestedAt.Time
		if rem.Status.LastRemediated != nil {
			started = rem.Status.LastRemediated.Time
		}
		if left := started.Add(rem.Spec.Timeout()).Sub(now); left > 0 {
			r.running(s)
			if strings.HasSuffix(last.Result, resultStartOnceDown) {
				return ctrl.Result{RequeueAfter: min(left, r.VMPoll)}, nil
			}
			return ctrl.Result{RequeueAfter: left}, nil
		}
		if !strings.HasSuffix(last.Result, resultTimedOut) {
			last.Result = appendResult(last.Result, resultTimedOut)
			r.event(s, corev1.EventTypeWarning, eventRemediationTimedOut, "Remediate",
				"Attempt %d (%s) did not make Machine %s healthy within %s", n, last.Action, machine.Name, rem.Spec.Timeout())
		}
		if int(rem.Status.RetryCount) >= rem.Spec.RetryLimit() || n >= infrav1.MaxRemediationAttempts {
			return ctrl.Result{}, r.handOver(ctx, s, RetryLimitReachedReason, fmt.Sprintf(
				"%d attempt(s) did not make the Machine healthy within %s each (retryLimit %d)", n, rem.Spec.Timeout(), rem.Spec.RetryLimit()))
		}
	}
	if ok, msg, err := r.etcdQuorumAllows(ctx, s); err != nil || !ok {
		if err != nil {
			return ctrl.Result{}, err
		}
		r.waiting(s, WaitingForEtcdQuorumReason, msg)
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
	r.waiting(s, WaitingForEngineReason, "the Engine cannot be read ("+reason+"): no reboot and no hand-over until it can; "+
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
	}
	conditions.Set(rem, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionTrue, Reason: RemediationInProgressReason, Message: msg})
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
	case infrav1.RemediationActionStopStart:
		a.Result = "VM " + string(vm.Status) + ": " + resultStartOnceDown
	case infrav1.RemediationActionNone:
		a.Result = "VM " + string(vm.Status) + ": no power action helps; waiting"
	}
	rem.Status.Attempts = append(rem.Status.Attempts, a)
	rem.Status.LastRemediated = &a.RequestedAt
	r.running(s)
	if err := r.persist(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	last := &rem.Status.Attempts[len(rem.Status.Attempts)-1]
	n := len(rem.Status.Attempts)
	switch action {
	case infrav1.RemediationActionReboot:
		if err := s.ovirt.Power(ctx, vm.ID, ovirt.PowerReboot); err != nil {
			return r.refused(s, last, err)
		}
		r.event(s, corev1.EventTypeNormal, eventRebootRequested, "Remediate", "Attempt %d: asked oVirt to reboot VM %s", n, vm.ID)
	case infrav1.RemediationActionReset:
		if err := s.ovirt.Power(ctx, vm.ID, ovirt.PowerReset); err != nil {
			if !errors.Is(err, ovirt.ErrInvalid) || ovirt.PermissionDenied(err) {
				return r.refused(s, last, err)
			}
			// The Engine cannot reset here (cluster level below 4.6): stop, then start.
			last.Action = infrav1.RemediationActionStopStart
			last.Result = truncateResult("reset refused (" + err.Error() + "): " + resultStartOnceDown)
			if err := r.persist(ctx, s); err != nil {
				return ctrl.Result{}, err
			}
			return r.stop(ctx, s, last, n)
		}
		r.event(s, corev1.EventTypeNormal, eventResetRequested, "Remediate", "Attempt %d: asked oVirt to reset VM %s", n, vm.ID)
	case infrav1.RemediationActionStopStart:
		return r.stop(ctx, s, last, n)
	case infrav1.RemediationActionStart:
		if err := s.ovirt.Power(ctx, vm.ID, ovirt.PowerStart); err != nil {
			return r.refused(s, last, err)
		}
		r.event(s, corev1.EventTypeNormal, eventStartRequested, "Remediate", "Attempt %d: VM %s was down; asked oVirt to start it", n, vm.ID)
	}
	r.running(s)
	return ctrl.Result{RequeueAfter: rem.Spec.Timeout()}, nil
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
	last.Result = truncateResult(strings.TrimSuffix(strings.TrimSuffix(last.Result, resultStartOnceDown), ": ") + ": " + resultStarted)
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
	return ctrl.Result{RequeueAfter: s.rem.Spec.Timeout()}, nil
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
		Reason: RemediationFailedReason, Message: why + "; attempts: " + describeAttempts(rem.Status.Attempts)})
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
