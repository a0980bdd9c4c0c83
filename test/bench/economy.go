package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// Production intervals the steady-state calls are converted to (the manager's defaults):
// --sync-period and --inventory-interval 10 minutes, --provider-check-interval 5 minutes.
const (
	productionSyncPeriod    = 10 * time.Minute
	productionProviderCheck = 5 * time.Minute
)

// Endpoints the economy measurements tell apart ("METHOD /path template", as counted by the
// simulator). The inventory and the name lookup of a new machine are both GET /vms; Ready
// machines look no name up, so in a steady window and a restart GET /vms are inventory pages.
const (
	vmReadEndpoint        = "GET /vms/{id}"
	vmListEndpoint        = "GET /vms"
	providerCheckEndpoint = "GET /"
)

// heartbeatEndpoints are the inventory's heartbeat tag (one read and one write per provider
// per inventory, whatever N; the first inventory finds or creates the tag): like the provider
// checks they are per provider, and counted apart from what the machines cost.
var heartbeatEndpoints = []string{"GET /tags", "POST /tags", "GET /tags/{id}", "PUT /tags/{id}"}

// heartbeatCalls is the heartbeat's share of counts.
func heartbeatCalls(counts map[string]int) int {
	n := 0
	for _, e := range heartbeatEndpoints {
		n += counts[e]
	}
	return n
}

// Modes of the economy phase.
const (
	modeReads     = "per-VM reads"
	modeInventory = "inventory"
)

// Economy is what Ready machines cost the Engine in one way of observing their VMs: a restart
// of the manager and a steady window after it.
type Economy struct {
	// Mode is modeReads (--inventory-interval=0: every Ready machine reads its VM once per sync
	// period, the manager before the inventory) or modeInventory.
	Mode string
	// InventoryInterval is the manager's --inventory-interval (0: off).
	InventoryInterval time.Duration
	// RestartCalls are the Engine requests (SSO included) by "METHOD /path" from the start of
	// the manager until it settled (see Runner.settle); RestartWindow is how long that took and
	// RestartSettled is false when it timed out instead.
	RestartCalls   map[string]int
	RestartWindow  time.Duration
	RestartSettled bool
	// SteadyWindow and SteadyCalls are the observation window after the restart and the Engine
	// requests in it by "METHOD /path".
	SteadyWindow time.Duration
	SteadyCalls  map[string]int
}

// RestartTotal is the Engine requests of the restart, SSO logins included.
func (e *Economy) RestartTotal() int { return sumCounts(e.RestartCalls) }

// intervals is how many sync periods the steady window spans.
func (e *Economy) intervals(sc *Scenario) float64 {
	return e.SteadyWindow.Seconds() / sc.SyncPeriod.Seconds()
}

// MachineCallsPerInterval is the Engine requests per machine per sync period in the steady
// window that depend on the machines: per-VM reads, inventory pages and anything else except
// the provider's connection check and the inventory's heartbeat.
func (e *Economy) MachineCallsPerInterval(sc *Scenario) float64 {
	perProvider := e.SteadyCalls[providerCheckEndpoint] + heartbeatCalls(e.SteadyCalls)
	return float64(sumCounts(e.SteadyCalls)-perProvider) / float64(sc.Machines) / e.intervals(sc)
}

// ProductionHeartbeatsPerHour is the heartbeat's calls per provider per hour at the production
// inventory interval.
func (e *Economy) ProductionHeartbeatsPerHour(sc *Scenario) float64 {
	return float64(heartbeatCalls(e.SteadyCalls)) / e.intervals(sc) * (time.Hour.Seconds() / productionSyncPeriod.Seconds())
}

// ProductionPerMachineHour converts the steady window to the production intervals: calls per
// machine per sync period × (3600 s ÷ 600 s). The provider's connection checks are left out
// (see ProductionChecksPerHour): they are per provider, whatever N.
func (e *Economy) ProductionPerMachineHour(sc *Scenario) float64 {
	return e.MachineCallsPerInterval(sc) * (time.Hour.Seconds() / productionSyncPeriod.Seconds())
}

// ProductionChecksPerHour is the provider's connection checks per hour at the production
// --provider-check-interval.
func (e *Economy) ProductionChecksPerHour(sc *Scenario) float64 {
	perInterval := float64(e.SteadyCalls[providerCheckEndpoint]) / (e.SteadyWindow.Seconds() / sc.ProviderCheck.Seconds())
	return perInterval * time.Hour.Seconds() / productionProviderCheck.Seconds()
}

// RestartAllowed is the target for the Engine requests of a restart with n Ready machines: one
// per 50 machines, 5 for the session and the provider, and the heartbeat's first find and write
// (heartbeatRestartCalls).
func RestartAllowed(n int) float64 { return float64(n)/50 + 5 + heartbeatRestartCalls }

// heartbeatRestartCalls is what the first inventory after a restart spends on the heartbeat: it
// finds the tag by name (GET /tags) and writes it (PUT, or POST the first time ever).
const heartbeatRestartCalls = 2

// InventoryCallsAllowed is the most inventory pages per interval: one per page size of VMs, and
// one more when the interval boundary falls inside the window.
func InventoryCallsAllowed(n, pageSize int) int {
	return int(math.Ceil(float64(n)/float64(pageSize))) + 1
}

// inventoryPageSize is the manager's default --inventory-page-size.
const inventoryPageSize = 150

// managerRun is one manager process of a scenario with its sampler and profiler.
type managerRun struct {
	proc    *harness.Process
	metrics string
	sampler *sampler
	prof    *profiler
	started time.Time
}

// managerArgs are the flags of a scenario's manager; extra ones come last and win.
func managerArgs(sc *Scenario, extra ...string) []string {
	args := []string{
		fmt.Sprintf("--max-concurrent-reconciles=%d", sc.Concurrency),
		"--sync-period=" + sc.SyncPeriod.String(), "--provider-check-interval=" + sc.ProviderCheck.String(),
		"--vm-shutdown-timeout=30s",
	}
	args = append(args, sc.ManagerArgs...)
	return append(args, extra...)
}

// startManager starts a manager of the scenario and its sampler. Each start of a scenario gets
// its own log file.
func (r *Runner) startManager(ctx context.Context, sc *Scenario, extra ...string) (*managerRun, error) {
	prof, err := newProfiler(r.ProfileDir, sc.Name)
	if err != nil {
		return nil, err
	}
	r.starts[sc.Name]++
	name := "manager-" + sc.Name
	if n := r.starts[sc.Name]; n > 1 {
		name = fmt.Sprintf("%s-%d", name, n)
	}
	started := time.Now()
	proc, addr, err := r.Stack.StartManager(ctx, name, append(managerArgs(sc, extra...), prof.args()...))
	if err != nil {
		return nil, err
	}
	if err := prof.started(ctx, proc); err != nil {
		_ = proc.Stop(30 * time.Second)
		return nil, err
	}
	m := &managerRun{proc: proc, metrics: addr, sampler: newSampler(r, proc, addr), prof: prof, started: started}
	m.sampler.start()
	return m, nil
}

// stop stops the manager gracefully and folds its memory peaks into res.
func (m *managerRun) stop(res *Result) error {
	rss, heap := m.sampler.peaks()
	m.sampler.stop()
	res.PeakRSS, res.PeakHeap = max(res.PeakRSS, rss), max(res.PeakHeap, heap)
	began := time.Now()
	err := m.proc.Stop(stopTimeout)
	res.Stops = append(res.Stops, time.Since(began))
	if err != nil {
		res.StopsKilled++
	}
	return err
}

// stopTimeout is how long the bench waits for a manager to stop after SIGTERM before it kills
// it: as long as Kubernetes' default terminationGracePeriodSeconds.
const stopTimeout = 30 * time.Second

// restart stops the manager and starts one with the extra flags, resetting the simulator's
// counters in between so that they count from the new start.
func (r *Runner) restart(ctx context.Context, m *managerRun, sc *Scenario, res *Result, extra ...string) (*managerRun, error) {
	if err := m.stop(res); err != nil {
		r.say("   stopping the manager: %v", err)
	}
	r.Stack.Sim.ResetCounters()
	return r.startManager(ctx, sc, extra...)
}

// modeArgs are the manager flags of an economy mode.
func modeArgs(sc *Scenario, mode string) []string {
	if mode == modeReads {
		return []string{"--inventory-interval=0"}
	}
	return []string{"--inventory-interval=" + sc.SyncPeriod.String()}
}

// measureEconomy restarts the manager in each mode (per-VM reads first when the scenario
// compares them), counts the Engine requests of the restart and of a steady window after it,
// and returns the manager left running (in the inventory mode).
func (r *Runner) measureEconomy(ctx context.Context, m *managerRun, sc *Scenario, res *Result) (*managerRun, error) {
	modes := []string{modeInventory}
	if sc.CompareReads {
		modes = []string{modeReads, modeInventory}
	}
	sim := r.Stack.Sim
	for _, mode := range modes {
		var err error
		if m, err = r.restart(ctx, m, sc, res, modeArgs(sc, mode)...); err != nil {
			return nil, err
		}
		e := Economy{Mode: mode}
		if mode == modeInventory {
			e.InventoryInterval = sc.SyncPeriod
		}
		e.RestartWindow, e.RestartSettled = r.settle(ctx, m, sc, e.InventoryInterval > 0)
		e.RestartCalls = byEndpoint(sim.Requests())
		note := ""
		if !e.RestartSettled {
			note = " (not settled: timed out)"
		}
		r.say("   restart with %s: %d Engine requests until settled in %s%s: %s", mode, e.RestartTotal(),
			e.RestartWindow.Round(100*time.Millisecond), note, formatCounts(e.RestartCalls))

		sim.ResetCounters()
		time.Sleep(sc.Steady)
		e.SteadyWindow = sc.Steady
		e.SteadyCalls = byEndpoint(sim.Requests())
		r.say("   steady state with %s over %s: %.3f calls per machine per sync period, %.3f per machine per hour at production intervals (+%.1f provider checks per hour): %s",
			mode, sc.Steady, e.MachineCallsPerInterval(sc), e.ProductionPerMachineHour(sc), e.ProductionChecksPerHour(sc), formatCounts(e.SteadyCalls))
		r.saveHeap(ctx, m.prof, "steady-"+map[string]string{modeReads: "reads", modeInventory: "inventory"}[mode])
		res.Economy = append(res.Economy, e)
	}
	return m, nil
}

// settle waits until a manager just started has caught up with the Ready machines and returns
// the time from its start and whether that happened before the timeout. Caught up means, with
// the inventory, that its first inventory finished and the OVirtMachine controller reconciled at
// least once per machine and then has nothing queued or running (the inventory wakes every
// machine when it finishes); without it, that every machine was reconciled once (each of those
// reconciles read its VM). The count then ends once the Engine saw no request for a third of
// the shortest interval (1-5 s), or that long after catching up when requests never stop
// (per-VM reads of more machines than the rate limit reads in a sync period): before any
// periodic read of the next interval.
func (r *Runner) settle(ctx context.Context, m *managerRun, sc *Scenario, inventory bool) (time.Duration, bool) {
	sim := r.Stack.Sim
	quiet := min(max(min(sc.SyncPeriod, sc.ProviderCheck)/3, time.Second), 5*time.Second)
	timeout := 2*time.Minute + time.Duration(float64(sc.Machines)/r.QPS*2*float64(time.Second))
	deadline := m.started.Add(timeout)
	var caughtUp, lastChange time.Time
	last := -1
	for {
		now := time.Now()
		if n := sim.TotalRequests() + sim.Logins(); n != last {
			last, lastChange = n, now
		}
		if caughtUp.IsZero() {
			p := r.managerProgress(ctx, m)
			reconciled := p.reconciles >= float64(sc.Machines)
			// With per-VM reads every reconcile of a Ready machine reads its VM, alone or in a
			// shared search (so the GET /vms/{id} count alone says nothing).
			if inventory && p.inventoried && reconciled && p.queued == 0 || !inventory && reconciled {
				caughtUp = now
			}
		}
		if !caughtUp.IsZero() && (now.Sub(lastChange) >= quiet || now.Sub(caughtUp) >= quiet) {
			return now.Sub(m.started), true
		}
		if now.After(deadline) {
			return now.Sub(m.started), false
		}
		select {
		case <-ctx.Done():
			return time.Since(m.started), false
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// progress is what a manager's metrics say about its OVirtMachine controller and inventory.
type progress struct {
	// inventoried is set once an inventory finished.
	inventoried bool
	// reconciles counts OVirtMachine reconciles; queued the machines waiting in the work queue
	// or being reconciled.
	reconciles, queued float64
}

// managerProgress scrapes the manager's metrics (nothing known when that fails).
func (r *Runner) managerProgress(ctx context.Context, m *managerRun) progress {
	families, err := scrape(ctx, m.metrics, r.token)
	if err != nil {
		return progress{queued: -1}
	}
	// sum adds up a family's series of the OVirtMachine controller.
	sum := func(name string) float64 {
		total := 0.0
		f, ok := families[name]
		if !ok {
			return 0
		}
		for _, mt := range f.Metric {
			for _, l := range mt.Label {
				if l.GetName() == "controller" && l.GetValue() == "ovirtmachine" {
					total += mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
				}
			}
		}
		return total
	}
	f, inventoried := families["capov_inventory_last_success_timestamp_seconds"]
	return progress{
		inventoried: inventoried && len(f.Metric) > 0,
		reconciles:  sum("controller_runtime_reconcile_total"),
		queued:      sum("workqueue_depth") + sum("controller_runtime_active_workers"),
	}
}

// restartCreateName is the name of a RestartCreate machine ("idle" or "restart").
func restartCreateName(sc *Scenario, moment string) string {
	return fmt.Sprintf("%s-%s-0000", sc.Name, moment)
}

// measureRestartCreate times a machine created on the idle manager, then restarts the manager
// and at once creates another: the time to Ready of a machine that arrives while the manager
// catches up with all the Ready ones. It returns the manager left running.
func (r *Runner) measureRestartCreate(ctx context.Context, m *managerRun, sc *Scenario, res *Result, cluster *clusterv1.Cluster) (*managerRun, error) {
	spec := benchVMSpec(sc.Clone)
	timeout := 10 * time.Minute
	one := func(moment string) (time.Duration, error) {
		name := restartCreateName(sc, moment)
		created, err := r.createMachines(ctx, []machineItem{{cluster: cluster, name: name}}, spec)
		if err != nil {
			return 0, err
		}
		readyAt, err := r.waitReady(ctx, cluster.Namespace, created, timeout)
		if err != nil {
			return 0, fmt.Errorf("machine created on the %s manager: %w", moment, err)
		}
		return readyAt[name].Sub(created[name]), nil
	}
	var err error
	if res.IdleCreateTTR, err = one("idle"); err != nil {
		return nil, err
	}
	if m, err = r.restart(ctx, m, sc, res, modeArgs(sc, modeInventory)...); err != nil {
		return nil, err
	}
	if res.RestartCreateTTR, err = one("restart"); err != nil {
		return nil, err
	}
	r.say("   a machine created on the idle manager was Ready in %s, one created at a restart in %s (%.2f×)",
		res.IdleCreateTTR.Round(100*time.Millisecond), res.RestartCreateTTR.Round(100*time.Millisecond),
		res.RestartCreateTTR.Seconds()/res.IdleCreateTTR.Seconds())
	return m, nil
}

// byEndpoint merges the simulator's counters into requests by "METHOD /path", all statuses.
func byEndpoint(reqs map[ovirtsim.RequestKey]int) map[string]int {
	out := map[string]int{}
	for k, v := range reqs {
		out[k.Method+" "+k.Path] += v
	}
	return out
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// formatCounts lists requests by endpoint, most frequent first.
func formatCounts(m map[string]int) string {
	f := make(map[string]float64, len(m))
	for k, v := range m {
		f[k] = float64(v)
	}
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(f) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
