package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/engineconfig"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/provideraccess"
)

// credentialsSecretIndex indexes OVirtProviders by spec.credentialsSecretName.
const credentialsSecretIndex = "spec.credentialsSecretName"

// Event reasons of OVirtProvider.
const (
	eventConnected    = "Connected"
	eventDisconnected = "ConnectionFailed"
	// eventSecretReleased: the ownerReference of an earlier release was removed from the
	// credentials Secret, so that deleting the provider no longer deletes the Secret.
	eventSecretReleased = "CredentialsSecretReleased"
)

// OVirtProviderReconciler checks that each OVirtProvider can reach its Engine and reports it
// in the CanConnectToOVirt and Ready conditions (and, for v1beta1 readers, in
// status.deprecated.v1beta1: ready, conditions, failureReason, failureMessage), reports in
// TLSVerified how the Engine certificate is verified, and holds the deletion of a provider that
// OVirtMachines still name (infrav1.ProviderFinalizer, condition Deleting with reason InUse).
//
// It never deletes, changes or owns the credentials Secret: the Secret survives the provider (the
// garbage collector would delete a Secret whose only owner is gone). clusterctl move carries a
// copy the provider owns instead, and the manager recreates the Secret from it in the target
// (syncMoveCopy; docs/operations.md, "clusterctl move").
type OVirtProviderReconciler struct {
	// Client reads and patches OVirtProviders and credentials Secrets, and lists OVirtMachines
	// through the spec.provider index that OVirtMachineReconciler.SetupWithManager registers.
	Client client.Client
	// Connector resolves credentials and hands out oVirt clients.
	Connector *Connector
	// Recorder emits events on connection transitions.
	Recorder events.EventRecorder
	// CheckInterval is how often connectivity is checked again.
	CheckInterval time.Duration
	// WatchFilterValue limits reconciliation to labelled objects.
	WatchFilterValue string
	// Now returns the time; tests may fix it.
	Now func() time.Time

	checks checkTracker
}

// checkTracker remembers the last successful check of each provider and the fingerprint of
// the settings it was made with.
type checkTracker struct {
	mu   sync.Mutex
	last map[string]lastCheck
}

type lastCheck struct {
	fingerprint string
	at          time.Time
}

func (t *checkTracker) fresh(provider, fingerprint string, now time.Time, interval time.Duration) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.last[provider]
	if !ok || c.fingerprint != fingerprint {
		return 0, false
	}
	age := now.Sub(c.at)
	if age < 0 || age >= interval {
		return 0, false
	}
	return interval - age, true
}

func (t *checkTracker) record(provider, fingerprint string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[string]lastCheck{}
	}
	t.last[provider] = lastCheck{fingerprint: fingerprint, at: now}
}

// forget drops what is known of a key.
func (t *checkTracker) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.last, key)
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtproviders,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtproviders/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtproviders/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler. It indexes providers by Secret name so that a
// change of the credentials Secret reconciles the providers that use it, and watches the creation
// and deletion of OVirtMachines, so that a provider whose deletion waits for its machines goes as
// soon as the last one is gone.
func (r *OVirtProviderReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &infrav1.OVirtProvider{}, credentialsSecretIndex, func(o client.Object) []string {
		p := o.(*infrav1.OVirtProvider)
		if p.Spec.CredentialsSecretName == "" {
			return nil
		}
		return []string{p.Spec.CredentialsSecretName}
	}); err != nil {
		return fmt.Errorf("indexing OVirtProviders by credentials Secret: %w", err)
	}
	log := ctrl.LoggerFrom(ctx)
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.OVirtProvider{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.secretToProviders),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == r.Connector.Namespace }))).
		Watches(&infrav1.OVirtMachine{}, handler.EnqueueRequestsFromMapFunc(r.machineToProvider),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return true },
				DeleteFunc:  func(event.DeleteEvent) bool { return true },
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		WithOptions(opts).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Named("ovirtprovider").
		Complete(r)
}

func (r *OVirtProviderReconciler) secretToProviders(ctx context.Context, o client.Object) []reconcile.Request {
	if _, ok := o.GetLabels()[infrav1.CredentialsMoveCopyLabel]; ok {
		// A move copy wakes its owner: the one clusterctl move brings recreates the Secret.
		var out []reconcile.Request
		for _, ref := range o.GetOwnerReferences() {
			if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && gv.Group == infrav1.GroupVersion.Group && ref.Kind == "OVirtProvider" {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: ref.Name}})
			}
		}
		return out
	}
	list := &infrav1.OVirtProviderList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{credentialsSecretIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing OVirtProviders of a credentials Secret", "Secret", klog.KObj(o))
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return out
}

// machineToProvider maps an OVirtMachine to the OVirtProvider it names, when that provider is
// being deleted: only then does a machine coming or going change anything for it, and creating
// a thousand machines must not reconcile their provider a thousand times.
func (r *OVirtProviderReconciler) machineToProvider(ctx context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*infrav1.OVirtMachine)
	if !ok || m.Spec.Provider == "" {
		return nil
	}
	p := &infrav1.OVirtProvider{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: m.Spec.Provider}, p); err != nil || p.DeletionTimestamp.IsZero() {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: m.Spec.Provider}}}
}

// Reconcile checks the connection of one OVirtProvider, or continues its deletion.
func (r *OVirtProviderReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	p := &infrav1.OVirtProvider{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted: close its connection and forget its limiter and breaker.
			r.Connector.Factory.Forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !p.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(p, infrav1.ProviderFinalizer) {
		// Being deleted without our finalizer (removed already): nothing left to hold.
		r.Connector.Factory.Forget(p.Name)
		return ctrl.Result{}, nil
	}
	helper, err := patch.NewHelper(p, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	wasReady := p.Status.Deprecated != nil && p.Status.Deprecated.V1Beta1 != nil && p.Status.Deprecated.V1Beta1.Ready &&
		v1beta1conditions.IsTrue(p, infrav1.CanConnectToOVirtCondition)
	defer func() {
		p.Status.ObservedGeneration = p.Generation
		v1beta1conditions.SetSummary(p, v1beta1conditions.WithConditions(infrav1.CanConnectToOVirtCondition))
		mirrorConditions(p, p.Generation, ownedProviderConditions)
		patchCtx, cancel := deferredPatchContext(ctx)
		defer cancel()
		if err := helper.Patch(patchCtx, p, patch.WithOwnedV1Beta1Conditions{Conditions: ownedProviderConditions},
			patch.WithOwnedConditions{Conditions: ownedTypes(ownedProviderConditions)}); err != nil {
			reterr = errors.Join(reterr, fmt.Errorf("patching OVirtProvider status: %w", err))
		}
		if !p.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(p, infrav1.ProviderFinalizer) {
			r.Connector.Factory.Forget(p.Name)
		}
	}()

	// The finalizer first (the deferred patch writes it): the provider must stay while
	// OVirtMachines name it, because deleting them removes their VMs through it.
	if p.DeletionTimestamp.IsZero() {
		controllerutil.AddFinalizer(p, infrav1.ProviderFinalizer)
	}
	markTLSVerified(p)
	// Before anything can let the provider go: a Secret that still names it as owner would be
	// deleted by the garbage collector with it.
	if err := r.releaseSecret(ctx, p); err != nil {
		return ctrl.Result{}, err
	}
	if !p.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, p)
	}
	// The copy clusterctl move carries, or the Secret recreated from it after a move.
	if err := r.syncMoveCopy(ctx, p); err != nil {
		return ctrl.Result{}, err
	}
	v1beta1conditions.Delete(p, infrav1.DeletingCondition)

	cl, resolved, err := r.Connector.Connect(ctx, p)
	if err == nil && wasReady {
		// Reconciles also come from resyncs and unrelated updates: the Engine is asked at most
		// once per CheckInterval for unchanged settings. A changed URL, credential or TLS
		// setting has another fingerprint and is checked at once.
		if wait, fresh := r.checks.fresh(p.Name, resolved.Config.Fingerprint(), r.Now(), r.CheckInterval); fresh {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	now := metav1.NewTime(r.Now())
	p.Status.LastCheckTime = &now
	if err == nil {
		var engine ovirt.EngineInfo
		if engine, err = cl.Ping(ctx); err == nil {
			p.Status.EngineVersion = engine.Version
		}
	}
	if err != nil {
		problem := Classify(err)
		severity := clusterv1.ConditionSeverityWarning
		if problem.Critical {
			severity = clusterv1.ConditionSeverityError
			providerV1Beta1(p).FailureReason = ptr.To(infrav1.OVirtEngineConnectionCriticalFailure)
			providerV1Beta1(p).FailureMessage = ptr.To(problem.Message)
		} else {
			providerV1Beta1(p).FailureReason, providerV1Beta1(p).FailureMessage = nil, nil
		}
		// The v1beta1 status.ready; v1beta2 readers see Ready=False.
		providerV1Beta1(p).Ready = false
		v1beta1conditions.MarkFalse(p, infrav1.CanConnectToOVirtCondition, problem.Reason, severity, "%s", problem.Message)
		if wasReady || !v1beta1conditions.Has(p, clusterv1.ReadyV1Beta1Condition) {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventDisconnected, "Connect", "Cannot connect to oVirt: %s", problem.Message)
		}
		log.Info("Cannot connect to oVirt", "reason", problem.Reason, "message", problem.Message)
		// Keep checking: a network problem heals itself, and a fixed Secret also triggers a
		// reconcile through the watch.
		return ctrl.Result{RequeueAfter: r.retryInterval(problem)}, nil
	}

	r.checks.record(p.Name, resolved.Config.Fingerprint(), r.Now())
	providerV1Beta1(p).Ready = true
	providerV1Beta1(p).FailureReason, providerV1Beta1(p).FailureMessage = nil, nil
	v1beta1conditions.MarkTrue(p, infrav1.CanConnectToOVirtCondition)
	if !wasReady {
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, eventConnected, "Connect", "Connected to oVirt Engine %s (credentials from %s)", p.Status.EngineVersion, resolved.Source)
	}
	return ctrl.Result{RequeueAfter: r.CheckInterval}, nil
}

// reconcileDelete lets a provider being deleted go once no OVirtMachine names it: machines being
// deleted still remove their VMs through it. Until then the Deleting condition (reason InUse)
// names them, and an event says so whenever the list changes. A deletion by clusterctl move
// (annotation clusterctl.cluster.x-k8s.io/delete-for-move) is never held: the machines move
// with their VMs, and the provider exists in the target cluster.
func (r *OVirtProviderReconciler) reconcileDelete(ctx context.Context, p *infrav1.OVirtProvider) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if _, moving := p.Annotations[deleteForMoveAnnotation]; !moving {
		users, err := r.machinesNaming(ctx, p.Name)
		if err != nil {
			return ctrl.Result{}, err
		}
		if len(users) > 0 {
			// eventDeletionBlocked (DeletionBlocked) is the machines' reason for the same thing.
			msg := provideraccess.InUseMessage(p.Name, users)
			if v1beta1conditions.GetMessage(p, infrav1.DeletingCondition) != msg {
				r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventDeletionBlocked, "Delete", "%s", msg)
				log.Info("Waiting for the OVirtMachines that name the OVirtProvider before deleting it", "machines", len(users))
			}
			v1beta1conditions.Set(p, &clusterv1.Condition{
				Type: infrav1.DeletingCondition, Status: corev1.ConditionTrue, Reason: infrav1.InUseReason, Message: msg,
			})
			// The OVirtMachine watch wakes the provider when a machine goes; this is a backstop.
			return ctrl.Result{RequeueAfter: min(r.CheckInterval, time.Minute)}, nil
		}
	}
	log.Info("Removing the finalizer of the OVirtProvider: no OVirtMachine names it")
	controllerutil.RemoveFinalizer(p, infrav1.ProviderFinalizer)
	return ctrl.Result{}, nil
}

// machinesNaming returns "namespace/name" of the OVirtMachines whose spec.provider is provider.
func (r *OVirtProviderReconciler) machinesNaming(ctx context.Context, provider string) ([]string, error) {
	list := &infrav1.OVirtMachineList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{providerIndex: provider}); err != nil {
		return nil, fmt.Errorf("listing the OVirtMachines of OVirtProvider %s: %w", provider, err)
	}
	out := make([]string, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, list.Items[i].Namespace+"/"+list.Items[i].Name)
	}
	return out, nil
}

// releaseSecret removes from the credentials Secret the ownerReference to p that releases before
// this one added (for clusterctl move). With it the garbage collector deletes the Secret once
// the provider is gone, and a copy of the Secret in another cluster, where no owner with that
// UID exists, at once. Only a reference to this provider is removed (group, kind and UID): other
// owners are someone else's.
func (r *OVirtProviderReconciler) releaseSecret(ctx context.Context, p *infrav1.OVirtProvider) error {
	name := p.Spec.CredentialsSecretName
	if name == "" || p.UID == "" {
		return nil
	}
	s := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Connector.Namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading credentials Secret %s/%s: %w", r.Connector.Namespace, name, err)
	}
	kept := slices.DeleteFunc(slices.Clone(s.OwnerReferences), func(ref metav1.OwnerReference) bool { return ownedByProvider(ref, p) })
	if len(kept) == len(s.OwnerReferences) {
		return nil
	}
	base := s.DeepCopy()
	s.OwnerReferences = kept
	if err := r.Client.Patch(ctx, s, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("removing the ownerReference of OVirtProvider %s from Secret %s: %w", p.Name, klog.KObj(s), err)
	}
	ctrl.LoggerFrom(ctx).Info("Removed the ownerReference of the OVirtProvider from its credentials Secret", "Secret", klog.KObj(s))
	r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, eventSecretReleased, "ReleaseSecret",
		"Removed this OVirtProvider from the ownerReferences of Secret %s: deleting the provider no longer deletes the Secret", klog.KObj(s))
	return nil
}

// ownedByProvider reports whether ref points at p: an OVirtProvider of CAPOV's API group (any
// version) with p's UID.
func ownedByProvider(ref metav1.OwnerReference, p *infrav1.OVirtProvider) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == infrav1.GroupVersion.Group && ref.Kind == "OVirtProvider" && ref.UID == p.UID
}

// markTLSVerified records in TLSVerified how the manager verifies the Engine certificate. It is
// derived from the spec alone: the verification happens on every connection, and its failure is
// CanConnectToOVirt=False, TLSError. An http:// engine (refused since this release) gets its own
// reason, so that a provider that worked before the upgrade says plainly why it stopped.
func markTLSVerified(p *infrav1.OVirtProvider) {
	tls := p.Spec.TLS
	u, err := url.Parse(strings.TrimSpace(p.Spec.Engine))
	switch {
	case err == nil && u.Scheme == "http":
		v1beta1conditions.MarkFalse(p, infrav1.TLSVerifiedCondition, infrav1.PlainHTTPReason, clusterv1.ConditionSeverityError,
			"spec.engine is an http:// URL: nothing would be encrypted and the oVirt password would travel in clear text, so CAPOV "+
				"does not connect (CanConnectToOVirt: InvalidEngineURL); change spec.engine to the https:// URL of the Engine API")
	case tls != nil && tls.Insecure:
		v1beta1conditions.MarkFalse(p, infrav1.TLSVerifiedCondition, infrav1.InsecureSkipVerifyReason, clusterv1.ConditionSeverityWarning,
			"spec.tls.insecure is true: the Engine certificate is not verified, so anyone on the network path can pose as the Engine "+
				"and receive the oVirt password; remove spec.tls.insecure and set spec.tls.certs (the base64 PEM of the Engine's CA) "+
				"or spec.tls.cert: true (a publicly trusted certificate)")
	case tls != nil && tls.Certs != "":
		if _, err := engineconfig.DecodeCerts(tls.Certs); err != nil {
			v1beta1conditions.MarkFalse(p, infrav1.TLSVerifiedCondition, infrav1.InvalidTLSConfigReason, clusterv1.ConditionSeverityError,
				"spec.tls.certs %s", err.Error())
			return
		}
		v1beta1conditions.Set(p, &clusterv1.Condition{Type: infrav1.TLSVerifiedCondition, Status: corev1.ConditionTrue, Reason: infrav1.CustomCAReason,
			Message: "the Engine certificate is verified against the CA certificates of spec.tls.certs only"})
	default:
		v1beta1conditions.Set(p, &clusterv1.Condition{Type: infrav1.TLSVerifiedCondition, Status: corev1.ConditionTrue, Reason: infrav1.SystemCAReason,
			Message: "the Engine certificate is verified against the system CA pool"})
	}
}

// retryInterval re-checks an unreachable Engine sooner than a misconfigured one.
func (r *OVirtProviderReconciler) retryInterval(p ConnectionProblem) time.Duration {
	if p.Critical {
		return r.CheckInterval
	}
	return min(r.CheckInterval, time.Minute)
}

// ownedProviderConditions are the v1beta1-format conditions the manager owns on
// OVirtProviders; with Ready they are also its status.conditions.
var ownedProviderConditions = []clusterv1.ConditionType{
	clusterv1.ReadyV1Beta1Condition, infrav1.CanConnectToOVirtCondition, infrav1.TLSVerifiedCondition, infrav1.DeletingCondition,
}

// providerV1Beta1 returns status.deprecated.v1beta1 of p, creating it.
func providerV1Beta1(p *infrav1.OVirtProvider) *infrav1.OVirtProviderV1Beta1DeprecatedStatus {
	if p.Status.Deprecated == nil {
		p.Status.Deprecated = &infrav1.OVirtProviderDeprecatedStatus{}
	}
	if p.Status.Deprecated.V1Beta1 == nil {
		p.Status.Deprecated.V1Beta1 = &infrav1.OVirtProviderV1Beta1DeprecatedStatus{}
	}
	return p.Status.Deprecated.V1Beta1
}
