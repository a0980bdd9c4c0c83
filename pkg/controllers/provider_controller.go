package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/credentials"
	"github.com/capov/capov/pkg/ovirt"
)

// credentialsSecretIndex indexes OVirtProviders by spec.credentialsSecretName.
const credentialsSecretIndex = "spec.credentialsSecretName"

// Event reasons of OVirtProvider.
const (
	eventConnected    = "Connected"
	eventDisconnected = "ConnectionFailed"
)

// OVirtProviderReconciler checks that each OVirtProvider can reach its Engine and reports it
// in the CanConnectToOVirt and Ready conditions (and, for v1beta1 readers, in
// status.deprecated.v1beta1: ready, conditions, failureReason, failureMessage).
type OVirtProviderReconciler struct {
	// Client reads and patches OVirtProviders and credentials Secrets.
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

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtproviders,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtproviders/status,verbs=get;patch;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler. It indexes providers by Secret name so that a
// change of the credentials Secret reconciles the providers that use it.
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
		WithOptions(opts).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Named("ovirtprovider").
		Complete(r)
}

func (r *OVirtProviderReconciler) secretToProviders(ctx context.Context, o client.Object) []reconcile.Request {
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

// Reconcile checks the connection of one OVirtProvider.
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
	if !p.DeletionTimestamp.IsZero() {
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
	}()

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
	if err := r.ensureSecretOwnerRef(ctx, p, resolved); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.CheckInterval}, nil
}

// retryInterval re-checks an unreachable Engine sooner than a misconfigured one.
func (r *OVirtProviderReconciler) retryInterval(p ConnectionProblem) time.Duration {
	if p.Critical {
		return r.CheckInterval
	}
	return min(r.CheckInterval, time.Minute)
}

// ensureSecretOwnerRef makes the OVirtProvider an owner of its credentials Secret, so that
// clusterctl move (which follows the provider through its move-hierarchy label) carries the
// Secret along. The Secret is not deleted with the provider: the reference is not a controller
// reference and blocks nothing.
func (r *OVirtProviderReconciler) ensureSecretOwnerRef(ctx context.Context, p *infrav1.OVirtProvider, resolved *credentials.Resolved) error {
	if resolved == nil || resolved.Secret == nil {
		return nil
	}
	s := resolved.Secret
	for _, ref := range s.OwnerReferences {
		if ref.UID == p.UID {
			return nil
		}
	}
	base := s.DeepCopy()
	s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{
		APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtProvider", Name: p.Name, UID: p.UID,
	})
	if err := r.Client.Patch(ctx, s, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("adding the OVirtProvider as owner of Secret %s: %w", klog.KObj(s), err)
	}
	return nil
}

// ownedProviderConditions are the v1beta1-format conditions the manager owns on
// OVirtProviders; with Ready they are also its status.conditions.
var ownedProviderConditions = []clusterv1.ConditionType{clusterv1.ReadyV1Beta1Condition, infrav1.CanConnectToOVirtCondition}

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
