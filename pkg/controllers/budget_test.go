package controllers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/capov/capov/pkg/ovirt"
)

// gateTest drives an admissionGate with a fixed clock, a budget the test sets and ticks that
// run only when the test calls tick.
type gateTest struct {
	gate *admissionGate
	now  time.Time

	mu     sync.Mutex
	budget ovirt.Budget
}

func newGateTest(p gatePolicy) *gateTest {
	gt := &gateTest{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), budget: ovirt.Budget{Rate: 20, Burst: 40}}
	gt.gate = &admissionGate{policy: p, clock: func() time.Time { return gt.now }, after: func(time.Duration, func()) {}}
	return gt
}

// waitingGate returns a gateTest with policy p, no token and machines m0..m(n-1) waiting.
func waitingGate(g Gomega, p gatePolicy, n int) *gateTest {
	gt := newGateTest(p)
	for i := range n {
		g.Expect(gt.admit(i)).To(BeFalse(), "machine %d waits: no token", i)
	}
	return gt
}

func (gt *gateTest) tokens(n float64) {
	gt.mu.Lock()
	defer gt.mu.Unlock()
	gt.budget.Tokens = n
}

func (gt *gateTest) read() ovirt.Budget {
	gt.mu.Lock()
	defer gt.mu.Unlock()
	return gt.budget
}

// admit is the gate's admit for machine i of provider "engine".
func (gt *gateTest) admit(i int) bool {
	ok, _ := gt.gate.admit("engine", gateKey(i), gt.read, gt.now)
	return ok
}

// woken returns the machines woken since the last call, in order.
func (gt *gateTest) woken() []string {
	var names []string
	for {
		select {
		case e := <-gt.gate.channel():
			names = append(names, e.Object.Name)
		default:
			return names
		}
	}
}

func gateKey(i int) types.NamespacedName {
	return types.NamespacedName{Namespace: "default", Name: fmt.Sprintf("m%d", i)}
}

// withoutEndgame is the default policy with the end game off, so that small queues show the
// budget rule alone.
func withoutEndgame() gatePolicy {
	p := defaultGatePolicy
	p.endgame = 0
	return p
}

func TestAdmissionGateStartsMachinesAtOnceWhileTokensAreSpare(t *testing.T) {
	g := NewWithT(t)
	gt := newGateTest(withoutEndgame())
	gt.tokens(40)
	for i := range 20 {
		g.Expect(gt.admit(i)).To(BeTrue(), "machine %d: 40 tokens pay for 20 starts of 2 calls", i)
	}
	g.Expect(gt.admit(20)).To(BeFalse(), "the 40 tokens are reserved for the 20 machines that just started")
	g.Expect(gt.woken()).To(BeEmpty(), "a machine admitted in its own reconcile is not woken again")
}

func TestAdmissionGateStartsNoMachineWhileTokensDoNotExceedTheReserve(t *testing.T) {
	g := NewWithT(t)
	gt := newGateTest(withoutEndgame())
	gt.tokens(-5)
	ok, retry := gt.gate.admit("engine", gateKey(0), gt.read, gt.now)
	g.Expect(ok).To(BeFalse(), "calls wait for the limiter: the machines in flight come first")
	g.Expect(retry).To(BeNumerically(">=", defaultGatePolicy.backstopMin))

	gt.tokens(4)
	gt.gate.tick()
	g.Expect(gt.woken()).To(Equal([]string{"m0"}))
	g.Expect(gt.admit(1)).To(BeTrue(), "4 tokens: 2 for m0, woken, and 2 for m1")
	g.Expect(gt.admit(2)).To(BeFalse(), "the calls of m0 and m1 are not in the limiter yet: their 4 tokens are reserved")
	gt.gate.tick()
	g.Expect(gt.woken()).To(BeEmpty())

	gt.now = gt.now.Add(defaultGatePolicy.hold)
	gt.gate.tick()
	g.Expect(gt.woken()).To(Equal([]string{"m2"}), "the reserve of m1 expired; m0 was woken, not started: it keeps its reserve until releaseTTL")
	gt.tokens(0)
	g.Expect(gt.admit(0)).To(BeTrue(), "a woken machine starts whatever the budget")
	g.Expect(gt.admit(3)).To(BeFalse())
	gt.tokens(2)
	gt.gate.tick()
	g.Expect(gt.woken()).To(BeEmpty(), "2 tokens, 4 reserved for m0 and m2")
	gt.now = gt.now.Add(defaultGatePolicy.hold)
	gt.gate.tick()
	g.Expect(gt.woken()).To(BeEmpty(), "2 tokens, 2 reserved for m2 (woken, not come yet)")
	gt.tokens(4)
	gt.gate.tick()
	g.Expect(gt.woken()).To(Equal([]string{"m3"}))
}

func TestAdmissionGateWakesWaitingMachinesInArrivalOrder(t *testing.T) {
	g := NewWithT(t)
	gt := waitingGate(g, withoutEndgame(), 5)
	g.Expect(gt.admit(3)).To(BeFalse(), "a machine reconciled again keeps its place")

	gt.tokens(4)
	gt.gate.tick()
	g.Expect(gt.woken()).To(Equal([]string{"m0", "m1"}))
	g.Expect(gt.admit(1)).To(BeTrue())
	g.Expect(gt.admit(0)).To(BeTrue())

	gt.now = gt.now.Add(defaultGatePolicy.hold)
	gt.tokens(2)
	g.Expect(gt.admit(5)).To(BeFalse(), "a new machine does not overtake those waiting")
	g.Expect(gt.woken()).To(Equal([]string{"m2"}), "the tokens it found went to the first waiting machine")

	gt.now = gt.now.Add(defaultGatePolicy.hold)
	gt.tokens(6)
	g.Expect(gt.admit(4)).To(BeTrue(), "room for three: m3, woken, then m4 itself")
	g.Expect(gt.woken()).To(Equal([]string{"m3"}))
	gt.now = gt.now.Add(defaultGatePolicy.releaseTTL)
	gt.gate.tick()
	g.Expect(gt.woken()).To(Equal([]string{"m5"}))
}

func TestAdmissionGateExpiresWakeUpsThatAreNotUsed(t *testing.T) {
	g := NewWithT(t)
	gt := waitingGate(g, withoutEndgame(), 2)
	gt.tokens(2)
	gt.gate.tick()
	g.Expect(gt.woken()).To(Equal([]string{"m0"}))

	gt.now = gt.now.Add(defaultGatePolicy.releaseTTL - time.Millisecond)
	gt.gate.tick()
	g.Expect(gt.woken()).To(BeEmpty(), "m0 may still come: its tokens stay reserved")
	gt.now = gt.now.Add(time.Millisecond)
	gt.gate.tick()
	g.Expect(gt.woken()).To(Equal([]string{"m1"}), "m0 did not come within releaseTTL: the next machine gets its tokens")

	gt.tokens(0)
	g.Expect(gt.admit(0)).To(BeFalse(), "a machine whose wake-up expired waits again")
}

func TestAdmissionGateAlwaysAdmitsWithoutRateLimit(t *testing.T) {
	g := NewWithT(t)
	gt := newGateTest(withoutEndgame())
	gt.tokens(-100)
	g.Expect(gt.admit(0)).To(BeFalse())
	g.Expect(gt.admit(1)).To(BeFalse())

	gt.mu.Lock()
	gt.budget = ovirt.Budget{Unlimited: true}
	gt.mu.Unlock()
	g.Expect(gt.admit(2)).To(BeTrue())
	g.Expect(gt.woken()).To(Equal([]string{"m0", "m1"}), "the limit was lifted: every waiting machine starts")
	for i := 3; i < 1000; i++ {
		g.Expect(gt.admit(i)).To(BeTrue())
	}
	g.Expect(gt.woken()).To(BeEmpty())
}

func TestAdmissionGateForgetsDeletedMachines(t *testing.T) {
	g := NewWithT(t)
	gt := waitingGate(g, withoutEndgame(), 3)
	gt.gate.forget(gateKey(0))
	gt.tokens(2)
	gt.gate.tick()
	g.Expect(gt.woken()).To(Equal([]string{"m1"}), "m0 was deleted: its place goes to the next machine")

	gt.gate.forget(gateKey(1))
	gt.gate.tick()
	g.Expect(gt.woken()).To(Equal([]string{"m2"}), "a deleted machine that was woken gives its reserve back")
}

func TestAdmissionGateReleasesTheTailOnceTheQueueDrains(t *testing.T) {
	g := NewWithT(t)
	// At 20 calls/s, the 5 s of the end game pay for 14 machines of 7 calls.
	gt := waitingGate(g, defaultGatePolicy, 40)
	gt.tokens(2 * 25)
	gt.gate.tick()
	g.Expect(gt.woken()).To(HaveLen(25), "15 machines still wait: more than the end game")
	gt.now = gt.now.Add(defaultGatePolicy.releaseTTL)
	gt.tokens(2)
	gt.gate.tick()
	g.Expect(gt.woken()).To(Equal([]string{"m25"}), "15 machines wait: the budget decides")
	gt.tokens(0)
	gt.gate.tick()
	g.Expect(gt.woken()).To(HaveLen(14), "14 wait: they all start, so that enough work is in flight until they finish")
	g.Expect(gt.admit(40)).To(BeFalse(), "the queue was empty: a small queue waits for tokens again")
}

func TestAdmissionGateDoesNotPlayTheEndgameForASmallQueue(t *testing.T) {
	g := NewWithT(t)
	gt := waitingGate(g, defaultGatePolicy, 10)
	gt.gate.tick()
	g.Expect(gt.woken()).To(BeEmpty())
}

func TestAdmissionGateBackstopGrowsWithThePlaceInTheQueue(t *testing.T) {
	g := NewWithT(t)
	gt := newGateTest(withoutEndgame())
	for i := range 100 {
		ok, retry := gt.gate.admit("engine", gateKey(i), gt.read, gt.now)
		g.Expect(ok).To(BeFalse())
		// Place i+1 at 7 calls each and 20 calls/s, between the bounds, plus up to a quarter.
		want := min(max(time.Duration(float64(i+1)*7/20*float64(time.Second)), defaultGatePolicy.backstopMin), defaultGatePolicy.backstopMax)
		g.Expect(retry).To(BeNumerically(">=", want), "machine %d", i)
		g.Expect(retry).To(BeNumerically("<=", want+want/4), "machine %d", i)
	}
}

func TestAdmissionGateKeepsWakeUpsThatDoNotFitForTheNextTick(t *testing.T) {
	g := NewWithT(t)
	gt := waitingGate(g, withoutEndgame(), gateWakeBuffer+10)
	gt.tokens(1000)
	gt.gate.tick()
	first := gt.woken()
	g.Expect(first).To(HaveLen(gateWakeBuffer))
	g.Expect(first[0]).To(Equal("m0"))
	gt.gate.tick()
	g.Expect(gt.woken()).To(Equal([]string{"m256", "m257", "m258", "m259", "m260", "m261", "m262", "m263", "m264", "m265"}))
}

func TestAdmissionGateKeepsProvidersApart(t *testing.T) {
	g := NewWithT(t)
	gt := waitingGate(g, withoutEndgame(), 1)
	ok, _ := gt.gate.admit("other", gateKey(1), func() ovirt.Budget { return ovirt.Budget{Tokens: 40, Rate: 20, Burst: 40} }, gt.now)
	g.Expect(ok).To(BeTrue(), "another provider has its own limiter")
}

func TestAdmissionGateSourceEnqueuesWokenMachines(t *testing.T) {
	g := NewWithT(t)
	gt := newGateTest(withoutEndgame())
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.Expect(gt.gate.source().Start(ctx, q)).To(Succeed())

	g.Expect(gt.admit(7)).To(BeFalse())
	gt.tokens(2)
	gt.gate.tick()
	req, _ := q.Get()
	g.Expect(req).To(Equal(reconcile.Request{NamespacedName: gateKey(7)}))
}

// TestAdmissionGateIsSafeForConcurrentUse runs machines that start against a real token bucket
// with real ticks, wake-ups and backstops, from several workers at once, some deleted while
// they wait: every machine that is not deleted starts, once.
func TestAdmissionGateIsSafeForConcurrentUse(t *testing.T) {
	g := NewWithT(t)
	const machines, workers = 400, 10
	limiter := rate.NewLimiter(2000, 40)
	budget := func() ovirt.Budget {
		return ovirt.Budget{Tokens: limiter.Tokens(), Rate: float64(limiter.Limit()), Burst: limiter.Burst()}
	}
	gate := &admissionGate{policy: gatePolicy{tokensPerAdmission: 2, hold: 20 * time.Millisecond, releaseTTL: 100 * time.Millisecond,
		callsPerMachine: 7, endgame: 50 * time.Millisecond, tick: 2 * time.Millisecond, backstopMin: 20 * time.Millisecond, backstopMax: 50 * time.Millisecond}}

	// The workqueue stand-in: keys to reconcile, deduplicated.
	var mu sync.Mutex
	pending := map[types.NamespacedName]bool{}
	work := make(chan types.NamespacedName, machines*4)
	enqueue := func(key types.NamespacedName) {
		mu.Lock()
		defer mu.Unlock()
		if !pending[key] {
			pending[key] = true
			work <- key
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		for {
			select {
			case e := <-gate.channel():
				enqueue(e.Object)
			case <-ctx.Done():
				return
			}
		}
	}()

	var started, deleted, reconciling sync.Map
	var done atomic.Int64
	reconcileOne := func(key types.NamespacedName) {
		// Like the workqueue, never two reconciles of one machine at once.
		l, _ := reconciling.LoadOrStore(key, &sync.Mutex{})
		l.(*sync.Mutex).Lock()
		defer l.(*sync.Mutex).Unlock()
		if _, ok := deleted.Load(key); ok {
			return
		}
		if _, ok := started.Load(key); ok {
			return
		}
		ok, retry := gate.admit("engine", key, budget, time.Now())
		if !ok {
			time.AfterFunc(retry, func() { enqueue(key) })
			return
		}
		// The name lookup and the create.
		_ = limiter.WaitN(ctx, 2)
		started.Store(key, true)
		if key.Name[len(key.Name)-1] != '9' {
			done.Add(1)
		}
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case key := <-work:
					mu.Lock()
					delete(pending, key)
					mu.Unlock()
					reconcileOne(key)
				case <-ctx.Done():
					return
				}
			}
		})
	}
	for i := range machines {
		enqueue(gateKey(i))
	}
	// Every tenth machine is deleted while the others start.
	for i := 9; i < machines; i += 10 {
		deleted.Store(gateKey(i), true)
		gate.forget(gateKey(i))
	}
	g.Eventually(done.Load, 20*time.Second, 10*time.Millisecond).Should(BeNumerically("==", machines-machines/10))
	cancel()
	wg.Wait()
	for i := range machines {
		if i%10 == 9 {
			continue
		}
		_, ok := started.Load(gateKey(i))
		g.Expect(ok).To(BeTrue(), "machine %d", i)
	}
}
