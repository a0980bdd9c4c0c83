package controllers

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/capov/capov/pkg/ovirt"
)

// gatePolicy holds the numbers of the admission gate. The zero value means defaultGatePolicy.
type gatePolicy struct {
	// tokensPerAdmission are the calls a machine makes right after its admission (the name
	// lookup and the create): reserved until they show up in the limiter, so that the gate does
	// not admit more machines than the spare tokens pay for.
	tokensPerAdmission float64
	// hold is how long an admission reserves tokensPerAdmission: long enough for the first
	// reconcile of the machine to reach the limiter.
	hold time.Duration
	// releaseTTL is how long a machine woken by the gate keeps its place: one that is not
	// reconciled by then (deleted, paused, stuck behind another step) lets the next one start.
	releaseTTL time.Duration
	// lead lets machines start while the limiter is up to lead behind (Tokens down to
	// -Rate*lead): a larger lead keeps more machines in flight (a shorter tail once the queue
	// is empty) at the cost of slower steps for the machines already in flight.
	lead time.Duration
	// callsPerMachine is what creating one machine costs in oVirt calls (docs/benchmarks.md:
	// 7.1-7.8), to estimate how long a waiting machine waits.
	callsPerMachine float64
	// endgame, when positive, releases every waiting machine once a queue that was longer
	// drains to what the rate pays in endgame: the last machines then start while enough work
	// is in flight to keep the limiter busy until they finish (0: off).
	endgame time.Duration
	// tick is how often the gate looks at the budget while machines wait.
	tick time.Duration
	// backstopMin and backstopMax bound the RequeueAfter of a waiting machine, the estimate
	// of its wait: it only matters when a wake-up is lost.
	backstopMin, backstopMax time.Duration
}

// defaultGatePolicy is the policy of a zero admissionGate.
var defaultGatePolicy = gatePolicy{
	tokensPerAdmission: 2,
	hold:               time.Second,
	releaseTTL:         5 * time.Second,
	callsPerMachine:    7,
	endgame:            5 * time.Second,
	tick:               100 * time.Millisecond,
	backstopMin:        3 * time.Second,
	backstopMax:        30 * time.Second,
}

// gateWakeBuffer is the capacity of the wake-up channel. A wake-up that does not fit stays at
// the head of its queue and is sent again at the next tick.
const gateWakeBuffer = 256

// admissionGate gives the oVirt call budget of a provider to the machines furthest along.
//
// Not wired into the OVirtMachine reconciler yet: measured alone it made the total time worse
// (every status patch of a machine in flight reconciles it, and the reconcile re-reads the VM
// before its scheduled read, spending the budget the gate saves), and with the prototype of
// scheduled reads it met p50/total at N=500 (0.54) but not total <= 1.1 x the lower bound
// (docs/proposals/2026-12-02-fair-progress-under-a-rate-limit.md).
//
// When many machines are created at once, the provider's rate limit is the bottleneck. Without
// the gate every step of every machine waits in one queue (the workqueue, then the limiter), so
// that all machines finish near the end. The gate holds back only machines that have not
// started in oVirt (no VM id, no create requested; their first call is the name lookup of
// ensureVM): such a machine starts when the budget has tokens to spare beyond what the machines
// admitted in the last second will ask for. Otherwise it waits in a per-provider FIFO without
// taking a worker: its reconcile returns at once (no oVirt call, no API write) and the gate
// enqueues it again, in arrival order, as soon as tokens are spare, checking every tick while
// machines wait. The machines in flight call the Engine as before and so get the budget first;
// new machines take what they leave, so the limiter never idles while a machine waits. Once a
// long queue has drained to what the rate pays in the end game, the rest start together: the
// last machines then overlap their oVirt waits instead of leaving the limiter idle at the end.
//
// The gate pays only when machines in flight do not read their VM before its scheduled read:
// served without queueing, a machine whose every status patch triggers a reconcile (and a read)
// spends the tokens the gate saves (on the bench, 8.3 calls per machine became 12).
//
// A provider without rate limit admits every machine. The zero value is ready to use and safe
// for concurrent use; source() gives the controller the wake-ups.
type admissionGate struct {
	// policy are the gate's numbers; zero means defaultGatePolicy.
	policy gatePolicy
	// clock is the clock of the ticks (nil: time.Now); admit takes the reconciler's.
	clock func() time.Time
	// after runs f after d (nil: time.AfterFunc); tests run the ticks themselves.
	after func(d time.Duration, f func())

	wakeOnce sync.Once
	wake     chan event.TypedGenericEvent[types.NamespacedName]

	mu      sync.Mutex
	queues  map[string]*gateQueue
	ticking bool
}

// gateQueue is the state of one provider.
type gateQueue struct {
	// budget reads the provider's budget, from the client of the latest admit.
	budget func() ovirt.Budget
	// waiting are the machines waiting to start, in arrival order.
	waiting []types.NamespacedName
	// admitted are the machines that started (or were woken to start) recently: each reserves
	// tokensPerAdmission until it expires.
	admitted map[types.NamespacedName]gateAdmission
	// peak is the longest the queue was since it was last empty (for the end game).
	peak int
}

// gateAdmission is a machine the gate let through.
type gateAdmission struct {
	at time.Time
	// started is set once the machine was reconciled past the gate; until then it was woken
	// and is expected.
	started bool
}

func (g *admissionGate) pol() gatePolicy {
	if g.policy == (gatePolicy{}) {
		return defaultGatePolicy
	}
	return g.policy
}

// admit tells whether the machine key of provider may start its first oVirt calls now. budget
// reads the provider's budget (ovirt.Client.Budget). When it may not, retry is the backstop
// RequeueAfter for the reconcile (the gate wakes the machine itself once tokens are spare).
// Only machines without a VM id and without a create requested may be passed: the others must
// never wait.
func (g *admissionGate) admit(provider string, key types.NamespacedName, budget func() ovirt.Budget, now time.Time) (ok bool, retry time.Duration) {
	b := budget()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.queues == nil {
		g.queues = map[string]*gateQueue{}
	}
	q := g.queues[provider]
	if b.Unlimited && (q == nil || len(q.waiting) == 0) {
		return true, 0
	}
	if q == nil {
		q = &gateQueue{admitted: map[types.NamespacedName]gateAdmission{}}
		g.queues[provider] = q
	}
	q.budget = budget
	g.expire(q, now)
	if a, ok := q.admitted[key]; ok {
		// Woken (or started a moment ago and reconciled again): its tokens are reserved.
		if !a.started {
			q.admitted[key] = gateAdmission{at: now, started: true}
		}
		return true, 0
	}
	waiting := slices.Contains(q.waiting, key)
	if !waiting {
		q.waiting = append(q.waiting, key)
		q.peak = max(q.peak, len(q.waiting))
	}
	if g.release(q, b, now, key) {
		return true, 0
	}
	g.scheduleLocked()
	return false, g.backstop(q, b, key)
}

// forget drops a machine that is deleted (or being deleted) from every queue.
func (g *admissionGate) forget(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, q := range g.queues {
		q.waiting = slices.DeleteFunc(q.waiting, func(k types.NamespacedName) bool { return k == key })
		delete(q.admitted, key)
		if len(q.waiting) == 0 {
			q.waiting, q.peak = nil, 0
		}
	}
}

// source returns the wake-ups of the gate as a source for the OVirtMachine controller.
func (g *admissionGate) source() source.Source {
	return source.TypedChannel(g.channel(), handler.TypedFuncs[types.NamespacedName, reconcile.Request]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[types.NamespacedName], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(reconcile.Request{NamespacedName: e.Object})
		},
	})
}

func (g *admissionGate) channel() chan event.TypedGenericEvent[types.NamespacedName] {
	g.wakeOnce.Do(func() { g.wake = make(chan event.TypedGenericEvent[types.NamespacedName], gateWakeBuffer) })
	return g.wake
}

// release lets the waiting machines of q start, in order, as far as the budget allows, and
// wakes them; it tells whether self (being reconciled, so not woken) is among them.
func (g *admissionGate) release(q *gateQueue, b ovirt.Budget, now time.Time, self types.NamespacedName) (selfStarted bool) {
	for room := g.room(q, b); room > 0 && len(q.waiting) > 0; room-- {
		key := q.waiting[0]
		started := key == self
		if !started && !g.notify(key) {
			// The channel is full: this machine stays first and is woken at the next tick.
			break
		}
		q.waiting = q.waiting[1:]
		q.admitted[key] = gateAdmission{at: now, started: started}
		selfStarted = selfStarted || started
	}
	if len(q.waiting) == 0 {
		q.waiting, q.peak = nil, 0
	}
	return selfStarted
}

// room returns how many of the waiting machines of q may start now.
func (g *admissionGate) room(q *gateQueue, b ovirt.Budget) int {
	p := g.pol()
	n := len(q.waiting)
	if b.Unlimited {
		return n
	}
	if p.endgame > 0 && q.peak > 0 && float64(q.peak)*p.callsPerMachine > b.Rate*p.endgame.Seconds() &&
		float64(n)*p.callsPerMachine <= b.Rate*p.endgame.Seconds() {
		return n
	}
	spare := b.Tokens + b.Rate*p.lead.Seconds() - float64(len(q.admitted))*p.tokensPerAdmission
	if spare < p.tokensPerAdmission {
		return 0
	}
	return int(min(spare/p.tokensPerAdmission, float64(n)))
}

// expire drops the admissions of q that no longer reserve tokens.
func (g *admissionGate) expire(q *gateQueue, now time.Time) {
	p := g.pol()
	for key, a := range q.admitted {
		ttl := p.hold
		if !a.started {
			ttl = p.releaseTTL
		}
		if now.Sub(a.at) >= ttl {
			delete(q.admitted, key)
		}
	}
}

// backstop is the RequeueAfter of a waiting machine: about when its turn comes if the budget
// went to new machines only, with up to a quarter more of jitter, so that lost wake-ups are
// recovered without every waiting machine coming back at once.
func (g *admissionGate) backstop(q *gateQueue, b ovirt.Budget, key types.NamespacedName) time.Duration {
	p := g.pol()
	wait := p.backstopMax
	if b.Rate > 0 {
		position := float64(slices.Index(q.waiting, key) + 1)
		wait = time.Duration(math.Min(position*p.callsPerMachine/b.Rate, p.backstopMax.Seconds()) * float64(time.Second))
	}
	wait = max(wait, p.backstopMin)
	return wait + rand.N(wait/4+1)
}

// notify wakes a machine, without blocking.
func (g *admissionGate) notify(key types.NamespacedName) bool {
	select {
	case g.channel() <- event.TypedGenericEvent[types.NamespacedName]{Object: key}:
		return true
	default:
		return false
	}
}

// scheduleLocked arranges the next tick while machines wait.
func (g *admissionGate) scheduleLocked() {
	if g.ticking {
		return
	}
	g.ticking = true
	after := g.after
	if after == nil {
		after = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	after(g.pol().tick, g.tick)
}

// tick wakes the waiting machines the budgets have room for, and schedules the next tick
// while machines still wait. Providers with nothing left to track are dropped.
func (g *admissionGate) tick() {
	now := time.Now
	if g.clock != nil {
		now = g.clock
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ticking = false
	t, waiting := now(), false
	for name, q := range g.queues {
		g.expire(q, t)
		if len(q.waiting) > 0 {
			g.release(q, q.budget(), t, types.NamespacedName{})
		}
		switch {
		case len(q.waiting) > 0:
			waiting = true
		case len(q.admitted) == 0:
			delete(g.queues, name)
		}
	}
	if waiting {
		g.scheduleLocked()
	}
}
