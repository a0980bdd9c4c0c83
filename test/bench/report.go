package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/capov/capov/pkg/ovirt/sdk"
	"github.com/capov/capov/test/harness"
)

// Report is the outcome of a benchmark run.
type Report struct {
	// Results of every scenario, in run order.
	Results []*Result
	// Webhook is the admission load-test result line and its numbers.
	WebhookP50, WebhookP99 time.Duration
	WebhookThroughput      float64
	WebhookRequests        int
	WebhookErrors          int
	WebhookClients         int
	// ManagerMemoryLimit is the container memory limit the managers ran as if under (0: none),
	// ManagerSoftMemoryLimit the GOMEMLIMIT they got for it.
	ManagerMemoryLimit, ManagerSoftMemoryLimit int64
	// Started and Elapsed time the run.
	Started time.Time
	Elapsed time.Duration
}

// Save writes the report as JSON, so that the documentation can be rendered again without
// running the benchmark (bench -from).
func (rep *Report) Save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// LoadReport reads a report saved by Save.
func LoadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	if err := json.Unmarshal(b, rep); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return rep, nil
}

// Target is one of the published goals with its measured value.
type Target struct {
	Goal, Measured string
	Met            bool
}

func (rep *Report) find(name string) *Result {
	for _, r := range rep.Results {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Targets evaluates the goals of the benchmark issue against the results.
func (rep *Report) Targets() []Target {
	var out []Target
	if r := rep.find("economy-100"); r != nil {
		out = append(out, Target{"≤ 12 oVirt calls per machine creation, status polling included (zero-latency boot)",
			fmt.Sprintf("%.2f", r.CreateCallsPerMachine()), r.CreateCallsPerMachine() <= 12})
	}
	if len(rep.Results) > 0 {
		maxLogins := 0
		for _, r := range rep.Results {
			maxLogins = max(maxLogins, r.Logins)
		}
		out = append(out, Target{"one SSO login per provider per token lifetime, whatever N",
			fmt.Sprintf("at most %d per run (one provider, token lifetime 1h)", maxLogins), maxLogins == 1})
	}
	for _, r := range rep.Results {
		if r.Concurrency == 10 && r.Latency > 0 && !r.Clone {
			ratio := r.AllReady.Seconds() / r.LowerBound.Seconds()
			out = append(out, Target{fmt.Sprintf("time until all Ready ≤ 1.5 × lower bound at concurrency 10 (N=%d)", r.Machines),
				fmt.Sprintf("%s vs %s = %.2f×", r.AllReady.Round(100*time.Millisecond), r.LowerBound.Round(100*time.Millisecond), ratio), ratio <= 1.5})
		}
	}
	for _, r := range rep.Results {
		if r.SteadyWindow > 0 {
			allowedChecks := int(r.SteadyWindow/r.ProviderCheck) + 1
			out = append(out, Target{fmt.Sprintf("steady state: ≤ 1 VM read per machine per sync period, ≤ 1 health check per provider per interval (N=%d)", r.Machines),
				fmt.Sprintf("%.2f reads per machine per %s; %d checks in %s (interval %s)", r.SteadyVMReads, r.SyncPeriod, r.SteadyProviderChecks, r.SteadyWindow, r.ProviderCheck),
				r.SteadyVMReads <= 1.0 && r.SteadyProviderChecks <= allowedChecks})
		}
	}
	if r := rep.find(scenarioN1000); r != nil {
		out = append(out, Target{"manager RSS ≤ 100 MiB with 1,000 machines", fmt.Sprintf("%.0f MiB peak RSS (Go heap %.0f MiB)", r.PeakRSS/(1<<20), r.PeakHeap/(1<<20)), r.PeakRSS <= 100*(1<<20)})
	}
	out = append(out, rep.inventoryTargets()...)
	if rep.WebhookRequests > 0 {
		out = append(out, Target{"webhook admission p99 ≤ 5 ms", fmt.Sprintf("p99 %s (p50 %s, %.0f req/s)", rep.WebhookP99.Round(10*time.Microsecond), rep.WebhookP50.Round(10*time.Microsecond), rep.WebhookThroughput), rep.WebhookP99 <= 5*time.Millisecond})
	}
	return out
}

// orphanSlack is what orphan detection may take beyond one inventory interval: the listing
// itself and the status write.
const orphanSlack = 2 * time.Second

// inventoryTargets are the goals of the inventory: steady state and restarts of Ready machines,
// time to Ready under load, orphans, and the 5,000-machine scale.
func (rep *Report) inventoryTargets() []Target {
	var out []Target
	for _, r := range rep.Results {
		inv, reads := r.economy(modeInventory), r.economy(modeReads)
		if inv == nil {
			continue
		}
		sc := &r.Scenario
		v := inv.ProductionPerMachineHour(sc)
		measured := fmt.Sprintf("%.3f with the inventory", v)
		if reads != nil {
			measured += fmt.Sprintf(" vs %.2f with per-VM reads", reads.ProductionPerMachineHour(sc))
		}
		measured += fmt.Sprintf("; besides, %.0f provider checks and %.0f heartbeat calls per provider per hour, whatever N", inv.ProductionChecksPerHour(sc), inv.ProductionHeartbeatsPerHour(sc))
		out = append(out, Target{fmt.Sprintf("steady state at production intervals: ≤ 0.1 Engine calls per Ready machine per hour (N=%d)", r.Machines), measured, v <= 0.1})
	}
	for _, r := range rep.Results {
		inv, reads := r.economy(modeInventory), r.economy(modeReads)
		if inv == nil {
			continue
		}
		allowed := RestartAllowed(r.Machines)
		measured := fmt.Sprintf("%d with the inventory", inv.RestartTotal())
		if reads != nil {
			measured += fmt.Sprintf(" vs %d with per-VM reads", reads.RestartTotal())
		}
		out = append(out, Target{fmt.Sprintf("manager restart with N Ready machines: ≤ N/50 + 7 = %.0f Engine calls (N=%d; 2 of them the heartbeat)", math.Floor(allowed), r.Machines),
			measured, inv.RestartSettled && float64(inv.RestartTotal()) <= allowed})
	}
	if r := rep.find(scenarioN1000); r != nil && r.AllReady > 0 {
		p50 := r.Percentile(50).Seconds() / r.AllReady.Seconds()
		total := r.AllReady.Seconds() / r.LowerBound.Seconds()
		out = append(out, Target{"N=1,000 created at once: time-to-Ready p50 ≤ 0.6 × the total, total ≤ 1.1 × lower bound",
			fmt.Sprintf("p50 %s of %s = %.2f; total %.2f × lower bound", r.Percentile(50).Round(100*time.Millisecond), r.AllReady.Round(100*time.Millisecond), p50, total),
			p50 <= 0.6 && total <= 1.1})
		out = append(out, Target{fmt.Sprintf("N=1,000: ≤ %d Engine calls per created machine (the declared minimal sequence)", MinimalCreateCalls),
			fmt.Sprintf("%.2f", r.CreateCallsPerMachine()), r.CreateCallsPerMachine() <= MinimalCreateCalls})
	}
	for _, r := range rep.Results {
		if r.RestartCreateTTR > 0 && r.IdleCreateTTR > 0 {
			ratio := r.RestartCreateTTR.Seconds() / r.IdleCreateTTR.Seconds()
			out = append(out, Target{fmt.Sprintf("a machine created during a restart of a %d-machine manager: time to Ready ≤ 1.2 × on the idle manager", r.Machines),
				fmt.Sprintf("%s vs %s = %.2f×", r.RestartCreateTTR.Round(100*time.Millisecond), r.IdleCreateTTR.Round(100*time.Millisecond), ratio), ratio <= 1.2})
		}
	}
	for _, r := range rep.Results {
		if r.OrphanDetect > 0 || r.OrphanError != "" {
			measured := r.OrphanDetect.Round(100 * time.Millisecond).String()
			if r.OrphanError != "" {
				measured = "not reported: " + r.OrphanError
			}
			out = append(out, Target{fmt.Sprintf("orphan detection: from a VM losing its OVirtMachine to the provider's report ≤ one inventory interval, %s (N=%d)", r.SyncPeriod, r.Machines),
				measured, r.OrphanError == "" && r.OrphanDetect <= r.SyncPeriod+orphanSlack})
		}
	}
	if r := rep.find(scenarioN5000); r != nil {
		ratio := r.AllReady.Seconds() / r.LowerBound.Seconds()
		out = append(out, Target{fmt.Sprintf("N=%d over %d clusters: all Ready ≤ 1.1 × lower bound", r.Machines, r.clusters()),
			fmt.Sprintf("%s vs %s = %.2f×", r.AllReady.Round(time.Second), r.LowerBound.Round(time.Second), ratio), ratio <= 1.1})
		if len(r.Stops) > 0 {
			out = append(out, Target{fmt.Sprintf("graceful stop of a %d-machine manager within %s", r.Machines, stopTimeout),
				fmt.Sprintf("longest %s, %d killed", slices.Max(r.Stops).Round(100*time.Millisecond), r.StopsKilled), r.StopsKilled == 0})
		}
		out = append(out, Target{fmt.Sprintf("manager RSS ≤ 250 MiB with %d machines", r.Machines),
			fmt.Sprintf("%.0f MiB peak RSS (Go heap %.0f MiB)", r.PeakRSS/(1<<20), r.PeakHeap/(1<<20)), r.PeakRSS <= 250*(1<<20)})
	}
	return out
}

// Markdown renders the generated section of docs/benchmarks.md.
func (rep *Report) Markdown(chartDir string) string {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Provisioning, oVirt API economy and footprint (`make bench`)\n\n")
	w("Generated by `make bench` on %s in %s. Machine: %s. Reproduce with `make bench` (about 70 minutes); `make bench-smoke` runs a seconds-long version in `make test`.\n\n",
		rep.Started.UTC().Format("2006-01-02 15:04 MST"), rep.Elapsed.Round(time.Second), harness.MachineDescription())
	w("Setup: the manager binary as its own process with its production defaults (oVirt rate limit 20 calls/s, burst 40, 10 in flight, VM poll 10 s) except the flags below; the oVirt simulator with a fixed latency on every call, image copy, disk extension and boot times as listed; kube-apiserver and etcd (envtest) as management and workload cluster; a kubelet stand-in registering each Node once its VM is up. Each machine is an OVirtMachine with its owner Machine and its bootstrap Secret.\n\n")
	if rep.ManagerMemoryLimit > 0 {
		w("The managers ran as in a container with a memory limit of %d MiB: with the Go soft memory limit the binaries set for it, %d MiB (GOMEMLIMIT).\n\n",
			rep.ManagerMemoryLimit>>20, rep.ManagerSoftMemoryLimit>>20)
	}

	w("### Targets\n\n| goal | measured | met |\n|---|---|---|\n")
	for _, t := range rep.Targets() {
		mark := "yes"
		if !t.Met {
			mark = "**no**"
		}
		w("| %s | %s | %s |\n", t.Goal, t.Measured, mark)
	}

	w("\n### Scenarios\n\n")
	w("| scenario | N | concurrency | clone | latency | image/disk/boot | all Ready | lower bound | ratio | every read shared | %d-call bound (before) | p50 | p95 | oVirt calls / machine | logins | API-server requests | delete | calls / machine (delete) | peak RSS | peak heap |\n", PreviousMinimalCreateCalls)
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Results {
		del, delCalls := r.Delete.Round(100*time.Millisecond).String(), fmt.Sprintf("%.2f", r.DeleteCalls)
		if r.DeleteSkipped {
			del, delCalls = "not measured", "not measured"
		}
		w("| %s | %d | %d | %t | %s | %s/%s/%s | %s | %s | %.2f | %s (%.2f) | %s (%.2f) | %s | %s | %.2f | %d | %.0f | %s | %s | %.0f MiB | %.0f MiB |\n",
			r.Name, r.Machines, r.Concurrency, r.Clone, r.Latency, r.ImageLock, r.DiskLock, r.Boot,
			r.AllReady.Round(100*time.Millisecond), r.LowerBound.Round(100*time.Millisecond), r.AllReady.Seconds()/r.LowerBound.Seconds(),
			r.SharedBound.Round(100*time.Millisecond), r.AllReady.Seconds()/r.SharedBound.Seconds(),
			r.PreviousBound.Round(100*time.Millisecond), r.AllReady.Seconds()/r.PreviousBound.Seconds(),
			r.Percentile(50).Round(100*time.Millisecond), r.Percentile(95).Round(100*time.Millisecond),
			r.CreateCallsPerMachine(), r.Logins, r.KubeRequests, del, delCalls,
			r.PeakRSS/(1<<20), r.PeakHeap/(1<<20))
	}
	w("%s", rep.optionsMarkdown())
	if r := rep.find(scenarioN5000); r != nil {
		w("\n%s spreads its machines over %d Clusters of %d, each in its own namespace with its own view of the workload API server that lists only its own Nodes, as separate workload clusters would; it runs last and leaves its machines in place (deleting 5,000 at 20 calls/s would take another 25 minutes).\n",
			r.Name, r.clusters(), r.Machines/r.clusters())
	}
	w("\nLower bound = the larger of (N × %d calls − the 40-call burst) ÷ 20 calls/s (the oVirt rate limit) and N × %d calls × latency ÷ min(concurrency, 10 in flight) + one machine's image copy, disk extension and boot. %d calls is the declared minimal sequence: the %d writes a creation needs (create, grow disk, start with the bootstrap data as run once) and the %d reads the Engine forces (image unlocked, disk unlocked, up), each a call; template, cluster and vNIC-profile lookups are cached. The manager beats it under a saturated rate limit (a ratio below 1): reads of VMs that wait for the same token are one search. \"Every read shared\" is the same bound with each forced read shared by min(concurrency, %d) machines (one search names up to %d VMs, and at most `concurrency` reconciles wait at once): %d + %d ÷ 10 = 3.3 calls at concurrency 10. The %d-call bound is the one of the releases that stored the bootstrap data on the VM and cleared it with a `PUT /vms/{id}` once the Node registered (before 2026-12-05 its 7 calls were name lookup, create, read, grow disk, read, start, read).\n\n",
		MinimalCreateCalls, MinimalCreateCalls, MinimalCreateCalls, MinimalCreateWrites, ForcedCreateReads, sdk.MaxVMReadBatch, sdk.MaxVMReadBatch, MinimalCreateWrites, ForcedCreateReads, PreviousMinimalCreateCalls)

	for _, r := range rep.Results {
		if len(r.Stops) > 0 {
			var parts []string
			for _, d := range r.Stops {
				parts = append(parts, d.Round(100*time.Millisecond).String())
			}
			w("Graceful stops (%s): %s from SIGTERM to exit; %d killed after %s.\n\n", r.Name, strings.Join(parts, ", "), r.StopsKilled, stopTimeout)
		}
	}
	for _, r := range rep.Results {
		if r.SteadyWindow > 0 {
			w("Steady state (%s, N=%d, `--sync-period=%s`, `--provider-check-interval=%s`): %.1f oVirt calls per machine per hour, %.2f VM reads per machine per sync period, %d provider health checks.\n\n",
				r.Name, r.Machines, r.SyncPeriod, r.ProviderCheck, r.SteadyPerMachineHour, r.SteadyVMReads, r.SteadyProviderChecks)
		}
	}
	rep.economyMarkdown(w)

	if ref := rep.reference(); ref != nil {
		w("### oVirt calls per machine by endpoint (%s)\n\n| endpoint | calls per machine |\n|---|---|\n", ref.Name)
		for _, k := range sortedKeys(ref.CreateCalls) {
			w("| `%s` | %.2f |\n", k, ref.CreateCalls[k])
		}
		w("\n![oVirt calls per machine by endpoint](%s)\n\n", filepath.ToSlash(filepath.Join(chartDir, "calls-per-machine.png")))
	}
	if big := rep.largest(); big != nil {
		w("### Time to Ready (%s)\n\n![time to Ready distribution](%s)\n\n", big.Name, filepath.ToSlash(filepath.Join(chartDir, "time-to-ready.png")))
		w("All machines are created at once and the oVirt rate limit is the bottleneck. Since 2026-12-05 a machine whose VM exists goes before new ones in the controller's priority queue, and its reconciles before a scheduled read cost no Engine call, so started machines finish first (p50 well below the total); the total is what the rate limit allows with the calls the manager makes (see \"Work-queue order, scheduled reads and the first create\" below).\n\n")
	}
	if rep.WebhookRequests > 0 {
		w("### Admission webhook under load\n\nThe webhook binary (TLS with keep-alive, loopback) under a bounded load of %d AdmissionReviews (OVirtMachine create, defaulting and validation alternately) from %d concurrent clients on the same 2-core machine: p50 %s, p99 %s, %.0f requests/s, %d errors. A management cluster sends a few requests per second; the handler-level numbers are below.\n\n",
			rep.WebhookRequests, rep.WebhookClients, rep.WebhookP50.Round(10*time.Microsecond), rep.WebhookP99.Round(10*time.Microsecond), rep.WebhookThroughput, rep.WebhookErrors)
	}
	return b.String()
}

// economyMarkdown renders the side-by-side table of per-VM reads and the inventory.
func (rep *Report) economyMarkdown(w func(string, ...any)) {
	var rows []*Result
	for _, r := range rep.Results {
		if len(r.Economy) > 0 {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	w("### Ready machines: per-VM reads and the inventory, side by side\n\n")
	w("| scenario | N | mode | restart: Engine calls | allowed (N/50 + 7) | restart settled in | steady: calls / machine / sync period | calls / machine / hour at production intervals | provider checks / hour (production) | steady calls by endpoint |\n")
	w("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		for i := range r.Economy {
			e := &r.Economy[i]
			settled := e.RestartWindow.Round(100 * time.Millisecond).String()
			if !e.RestartSettled {
				settled = "not settled after " + settled
			}
			w("| %s | %d | %s | %d | %.0f | %s | %.3f | %.3f | %.0f | %s |\n", r.Name, r.Machines, e.Mode, e.RestartTotal(), math.Floor(RestartAllowed(r.Machines)),
				settled, e.MachineCallsPerInterval(&r.Scenario), e.ProductionPerMachineHour(&r.Scenario), e.ProductionChecksPerHour(&r.Scenario), formatCounts(e.SteadyCalls))
		}
	}
	r := rows[0]
	w("\nMethod: both modes run in the same scenario on the same Ready machines, each after a graceful restart of the manager: first `--inventory-interval=0` (every Ready machine reads its VM with `GET /vms/{id}` once per sync period, the manager before the inventory), then `--inventory-interval=%s` (one paginated `GET /vms` search per provider, %d VMs per page). "+
		"**Restart**: the Engine requests (SSO login included) from the new manager's start until it caught up with the Ready machines (with the inventory: its first inventory finished, the OVirtMachine controller reconciled once per machine and had nothing left queued or running; with per-VM reads: every machine read its VM and was reconciled) and then saw no Engine request for a third of the shortest interval (1-5 s; the count stops that long after catching up when requests never stop), which ends the count before any periodic read of the next interval. "+
		"**Steady state**: the Engine requests of a %s window after that, at `--sync-period=%s` (and the same inventory interval) and `--provider-check-interval=%s`, converted to the production intervals: calls per machine per sync period × (3600 s ÷ 600 s) for the 10-minute sync period and inventory interval; the provider's connection checks (`GET /`, per provider whatever N) are counted apart, at the 5-minute `--provider-check-interval`. "+
		"With per-VM reads, N above 600 reads exceed the 20 calls/s budget in a 30 s sync period, so fewer than one read per machine per period is measured at N=1,000; at 10 minutes every machine is read once.\n\n",
		r.SyncPeriod, inventoryPageSize, r.Steady, r.SyncPeriod, r.ProviderCheck)
	for _, r := range rep.Results {
		if r.OrphanDetect > 0 {
			w("Orphan detection (%s): one Ready machine's OVirtMachine was paused, its finalizer removed and the object deleted (its VM stays, as after a restore or a hand-edited finalizer); the provider's `status.inventory.orphanedVMs` counted the VM %s after the object was gone, with an inventory interval of %s. The VM was then removed in the simulator.\n\n",
				r.Name, r.OrphanDetect.Round(100*time.Millisecond), r.SyncPeriod)
		}
	}
	for _, r := range rep.Results {
		if r.RestartCreateTTR > 0 {
			w("A machine created during a restart (%s): with all %d machines Ready, one more machine (Machine, bootstrap Secret, OVirtMachine) created on the idle manager was Ready in %s; after a graceful restart of the manager, one created right after the new process started, in the last Cluster (so that it comes last in the new manager's initial list), was Ready in %s (%.2f×), while the manager caught up with the %d Ready machines.\n\n",
				r.Name, r.Machines, r.IdleCreateTTR.Round(100*time.Millisecond), r.RestartCreateTTR.Round(100*time.Millisecond),
				r.RestartCreateTTR.Seconds()/r.IdleCreateTTR.Seconds(), r.Machines)
		}
	}
}

// reference is the scenario whose calls per endpoint are charted.
func (rep *Report) reference() *Result {
	if r := rep.find("economy-100"); r != nil {
		return r
	}
	if len(rep.Results) > 0 {
		return rep.Results[0]
	}
	return nil
}

func (rep *Report) largest() *Result {
	var big *Result
	for _, r := range rep.Results {
		if r.Concurrency == 10 && (big == nil || r.Machines > big.Machines) {
			big = r
		}
	}
	return big
}

// WriteCharts renders the PNG charts into dir.
func (rep *Report) WriteCharts(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if ref := rep.reference(); ref != nil {
		keys := sortedKeys(ref.CreateCalls)
		vals := make([]float64, len(keys))
		for i, k := range keys {
			vals[i] = ref.CreateCalls[k]
		}
		img := horizontalBars(fmt.Sprintf("oVirt calls per machine by endpoint (%s, N=%d): %.2f in all", ref.Name, ref.Machines, ref.CreateCallsPerMachine()), keys, vals, "%.2f")
		if err := writePNG(filepath.Join(dir, "calls-per-machine.png"), img); err != nil {
			return err
		}
	}
	if big := rep.largest(); big != nil {
		img := histogram(fmt.Sprintf("Time from create to Ready, %d machines, concurrency %d, %s latency", big.Machines, big.Concurrency, big.Latency),
			big.TTR, 40, map[string]time.Duration{"p50": big.Percentile(50), "p95": big.Percentile(95)})
		if err := writePNG(filepath.Join(dir, "time-to-ready.png"), img); err != nil {
			return err
		}
	}
	return nil
}

// docSection is the generated section of docs/benchmarks.md.
var docSection = harness.GeneratedSection{
	Begin: "<!-- BEGIN GENERATED BY make bench -->",
	End:   "<!-- END GENERATED BY make bench -->",
	Title: "Benchmarks",
}

// UpdateDoc replaces the generated section of the markdown file (or inserts it after the title).
func UpdateDoc(path, section string) error { return docSection.Write(path, section) }

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}
