package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"time"

	"github.com/capov/capov/test/harness"
)

// Scenario is one fault (or, for "mixed", several) applied to the stack while the driver works.
type Scenario struct {
	// Name is the subtest name (the fault, in kebab case).
	Name string
	// Fault describes what is injected, for the matrix.
	Fault string
	// Short puts the scenario into the short run of `make test`.
	Short bool
	// Defects are the numbers of the defects the scenario exercises.
	Defects []int
	// Run applies the fault and checks what the watcher cannot check alone.
	Run func(ctx context.Context, r *Run) error
}

// Fault is applied when the fault window opens; the returned heal ends it.
type Fault func(ctx context.Context, r *Run) (heal func(ctx context.Context) error, err error)

// Run is one execution of a scenario.
type Run struct {
	// W is the world, S the scenario, Rnd its seeded random source.
	W   *World
	S   Scenario
	Rnd *rand.Rand
	// Cluster and Driver are the scenario's (NewCluster sets them).
	Cluster *Cluster
	Driver  *Driver
	// Start opens the fault window, Healed closes it.
	Start, Healed time.Time

	res *Result
}

// Logf prints a progress line prefixed with the scenario.
func (r *Run) Logf(format string, args ...any) {
	r.W.Logf("[%s seed %d] "+format, append([]any{r.S.Name, r.W.Seed}, args...)...)
}

// Note adds a line to the scenario's result (what it did, what product support is missing).
func (r *Run) Note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.res.Notes = append(r.res.Notes, msg)
	r.Logf("note: %s", msg)
}

// Violate records a violation of the scenario's own check.
func (r *Run) Violate(key, invariant, message string, objects ...string) {
	r.W.Watcher.Violate(key, invariant, message, objects...)
}

// Namespace is the scenario's namespace.
func (r *Run) Namespace() string {
	ns := fmt.Sprintf("chaos-%d-%s", r.W.Seed, r.S.Name)
	if len(ns) > 50 {
		ns = ns[:50]
	}
	return strings.TrimRight(ns, "-")
}

// NewCluster creates the scenario's cluster and driver.
func (r *Run) NewCluster(ctx context.Context) error {
	return r.newCluster(ctx, true)
}

// NewDHCPCluster is NewCluster with workers on DHCP (no IPAM pool): for the clusterctl move
// scenario, whose target management cluster runs no IPAM provider.
func (r *Run) NewDHCPCluster(ctx context.Context) error {
	return r.newCluster(ctx, false)
}

func (r *Run) newCluster(ctx context.Context, staticIPs bool) error {
	cl, err := newCluster(ctx, r.W, r.W.C, r.Namespace(), staticIPs)
	if err != nil {
		return err
	}
	r.Cluster, r.Driver = cl, NewDriver(cl, r.Rnd, r.W.Cfg.Machines)
	return nil
}

// Standard is the common shape of a scenario: the cluster, the fault on while the driver
// creates and deletes machines for Config.Duration, the fault healed, I6 over the window, the
// machines the driver wants Ready (Converge), then the Cluster deleted with every finalizer
// dropping within Config.Bound (I5) and no VM left (I4).
func (r *Run) Standard(ctx context.Context, fault Fault) error {
	if r.Cluster == nil {
		if err := r.NewCluster(ctx); err != nil {
			return err
		}
	}
	r.Start = time.Now()
	heal := func(context.Context) error { return nil }
	if fault != nil {
		h, err := fault(ctx, r)
		if err != nil {
			return fmt.Errorf("applying the fault: %w", err)
		}
		if h != nil {
			heal = h
		}
	}
	r.Driver.Run(ctx, r.W.Cfg.Duration)
	if err := heal(ctx); err != nil {
		return fmt.Errorf("healing the fault: %w", err)
	}
	return r.Finish(ctx)
}

// Finish closes the fault window (if still open) and checks convergence, I6, I5 and I4.
func (r *Run) Finish(ctx context.Context) error {
	if r.Healed.IsZero() {
		r.Healed = time.Now()
	}
	if r.S.Name != baselineName {
		r.W.Watcher.CheckRates(r.Start, r.Healed)
	}
	conv, err := r.Driver.WaitConverged(ctx, r.W.Cfg.Bound)
	r.res.Converge = conv
	if err != nil {
		r.Violate("converge", Converge, fmt.Sprintf("not converged %s after the fault healed: %v", r.W.Cfg.Bound, err), "namespace "+r.Namespace())
	}
	clean, err := r.Cluster.Delete(ctx, r.W.Cfg.Bound)
	r.res.Clean = clean
	return err
}

// Result is what one run of a scenario found.
type Result struct {
	// Seed and Scenario identify the run; Fault describes it.
	Seed     uint64
	Scenario string
	Fault    string
	// Violations are the invariants it broke (none: it passed).
	Violations []Violation
	// Converge is the time from healing the fault to every wanted machine Ready; Clean the
	// time the Cluster's deletion took.
	Converge, Clean time.Duration
	// Machines is how many machines the driver created; Calls the oVirt API calls of the run.
	Machines, Calls int
	// Err is an error of the scenario itself (not an invariant), e.g. a failed setup.
	Err string
	// Notes are remarks of the scenario (what it injected, product support missing).
	Notes []string
	// Elapsed is the run's duration.
	Elapsed time.Duration
}

// CallsPerMachine is the oVirt API calls of the run per machine the driver created.
func (res *Result) CallsPerMachine() float64 {
	if res.Machines == 0 {
		return 0
	}
	return float64(res.Calls) / float64(res.Machines)
}

// Passed reports whether the run broke nothing.
func (res *Result) Passed() bool { return len(res.Violations) == 0 && res.Err == "" }

// Execute runs a scenario on the world and returns its result; violations carry the log tails
// of the processes in Describe.
func Execute(ctx context.Context, w *World, s Scenario) *Result {
	start := time.Now()
	res := &Result{Seed: w.Seed, Scenario: s.Name, Fault: s.Fault}
	r := &Run{W: w, S: s, Rnd: w.Rand(s.Name), res: res}
	w.Watcher.Begin(s.Name)
	calls0 := w.Sim.TotalRequests()
	r.Logf("starting: %s", s.Fault)
	if err := s.Run(ctx, r); err != nil {
		res.Err = err.Error()
		r.Logf("error: %v", err)
	}
	// Whatever the scenario did to the stack, the next one needs the standard manager and
	// webhook, no faults.
	w.Sim.SetFaults()
	w.Sim.SetLatency()
	if err := w.Restore(ctx); err != nil {
		res.Err = strings.TrimSpace(res.Err + "; restoring the stack: " + err.Error())
	}
	w.Watcher.ScanLogs()
	w.Watcher.ScanEventsAndMetrics(ctx)
	w.Watcher.CheckFootprint(ctx, 45*time.Second)
	if r.Driver != nil {
		res.Machines, _, _ = r.Driver.Stats()
	}
	res.Calls = w.Sim.TotalRequests() - calls0
	res.Violations = w.Watcher.Violations(s.Name)
	res.Elapsed = time.Since(start)
	r.Logf("done in %s: %d violations, converge %s, clean-up %s, %d machines, %.1f oVirt calls per machine",
		res.Elapsed.Round(time.Second), len(res.Violations), res.Converge.Round(100*time.Millisecond), res.Clean.Round(100*time.Millisecond),
		res.Machines, res.CallsPerMachine())
	return res
}

// Restore brings the stack back to the standard shape: the manager and webhook running,
// the provider with its Secret, Ready.
func (w *World) Restore(ctx context.Context) error {
	if exited, _ := w.Stack.Webhook.Exited(); exited {
		if err := w.StartWebhook(ctx); err != nil {
			return err
		}
	}
	if m := w.Stack.Manager; m == nil {
		if err := w.ReplaceManager(ctx); err != nil {
			return err
		}
	} else if exited, _ := m.Exited(); exited {
		if err := w.ReplaceManager(ctx); err != nil {
			return err
		}
	}
	if err := w.EnsureProvider(ctx); err != nil {
		return err
	}
	return w.WaitProviderReady(ctx, time.Minute)
}

// withoutTraces drops the lines a --debug log has for every reconcile and oVirt call.
func withoutTraces(logs string) string {
	var keep []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"Reconciling"`) || strings.Contains(l, `"Reconcile successful"`) || strings.Contains(l, `"Reconcile done`) ||
			strings.Contains(l, `"workqueue_items"`) || strings.Contains(l, `"Called oVirt"`) || strings.Contains(l, `"received request"`) ||
			strings.Contains(l, `"wrote response"`) {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// Describe renders a failed run for the test log: seed, invariant, objects and the log tails
// of the processes.
func (w *World) Describe(res *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s, seed %d (reproduce: CHAOS=long CHAOS_SEED=%d go test ./test/chaos -run 'TestChaos/seed-%d/%s$' -v)\n",
		res.Scenario, res.Seed, res.Seed, res.Seed, res.Scenario)
	if res.Err != "" {
		fmt.Fprintf(&b, "error: %s\n", res.Err)
	}
	for _, v := range res.Violations {
		fmt.Fprintf(&b, "VIOLATION %s\n", v)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	// The tails of the current manager and webhook and of the two processes started last.
	ps := w.Processes()
	show := []*harness.Process{w.Stack.Manager, w.Stack.Webhook}
	if len(ps) > 2 {
		show = append(show, ps[len(ps)-2:]...)
	}
	seen := map[string]bool{}
	for _, p := range show {
		if p == nil || seen[p.LogPath] {
			continue
		}
		seen[p.LogPath] = true
		n := 40
		if strings.Contains(p.Name, "webhook") {
			n = 10
		}
		fmt.Fprintf(&b, "--- %s (%s), last %d lines without per-reconcile traces:\n%s\n", p.Name, p.LogPath, n, harness.Tail(withoutTraces(p.Logs()), n))
	}
	fmt.Fprintf(&b, "(every log is in %s)\n", filepath.Join(w.WorkDir, "logs"))
	return b.String()
}
