// Package bench measures CAPOV at scale: N OVirtMachines (each with its owner Machine and
// bootstrap Secret) provisioned by the manager binary, as a separate process, against the oVirt
// simulator with injected per-call latency and boot time. It measures time to Ready, oVirt calls
// per machine by endpoint, SSO logins, steady-state calls, deletion, the manager's memory and
// API-server requests, and the webhook's admission latency, and writes docs/benchmarks.md with
// charts. `make bench` runs the full set, `make bench-smoke` (part of `make test`) a small one.
package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
	"github.com/capov/capov/test/percentile"
)

// Scenario is one configuration to measure.
type Scenario struct {
	// Name labels the scenario in the report.
	Name string
	// Machines is N.
	Machines int
	// Concurrency is the manager's --max-concurrent-reconciles.
	Concurrency int
	// Clone creates VMs with cloned disks.
	Clone bool
	// Latency is the simulator's latency on every API call.
	Latency time.Duration
	// ImageLock, DiskLock and Boot are how long oVirt copies disks, extends a disk and boots.
	ImageLock, DiskLock, Boot time.Duration
	// Steady is the observation window after everything is Ready; SyncPeriod the manager's
	// --sync-period and ProviderCheck its --provider-check-interval during it.
	Steady, SyncPeriod, ProviderCheck time.Duration
	// ManagerArgs are extra manager flags.
	ManagerArgs []string
}

// MinimalCreateCalls is the shortest oVirt call sequence that creates a machine: look the name
// up, create, read (image unlocked), grow the OS disk, read (disk unlocked), start, read (up).
// Template, cluster and vNIC-profile lookups are cached per provider and not counted.
const MinimalCreateCalls = 7

// Result is what a scenario measured.
type Result struct {
	Scenario
	// AllReady is the time from the first create to the last machine Ready.
	AllReady time.Duration
	// TTR are the per-machine times from create to Ready, sorted.
	TTR []time.Duration
	// LowerBound is the least possible AllReady (see Runner.lowerBound).
	LowerBound time.Duration
	// CreateCalls are oVirt calls per machine by "METHOD /path" until all were Ready.
	CreateCalls map[string]float64
	// Logins are SSO logins during the whole scenario.
	Logins int
	// SteadyPerMachineHour is oVirt calls per machine per hour once Ready; SteadyVMReads the VM
	// reads per machine per sync period; SteadyProviderChecks the provider checks in the window.
	SteadyPerMachineHour, SteadyVMReads float64
	SteadyProviderChecks                int
	SteadyWindow                        time.Duration
	// Delete is the time to delete all machines, DeleteCalls the oVirt calls per machine.
	Delete      time.Duration
	DeleteCalls float64
	// PeakRSS and PeakHeap are the manager's peak resident memory and Go heap in bytes.
	PeakRSS, PeakHeap float64
	// KubeRequests are the manager's requests to the management API server until all Ready.
	KubeRequests float64
}

// CreateCallsPerMachine sums CreateCalls.
func (r *Result) CreateCallsPerMachine() float64 {
	total := 0.0
	for _, v := range r.CreateCalls {
		total += v
	}
	return total
}

// Percentile returns the p-th percentile (0-100, nearest rank) of the time-to-ready.
func (r *Result) Percentile(p float64) time.Duration {
	return percentile.NearestRank(r.TTR, p)
}

// Runner runs scenarios on a stack started without a manager.
type Runner struct {
	Stack *harness.Stack
	Out   io.Writer
	// QPS and Burst are the manager's oVirt rate limit (its defaults unless set).
	QPS   float64
	Burst int
	// ProfileDir, when set, receives heap profiles of each scenario's manager (all Ready, and
	// after the steady window), taken through its --profiler-address.
	ProfileDir string
	token      string
}

const (
	benchProvider = "bench"
	benchSecret   = "bench-credentials"
)

// Setup creates the namespace, credentials and provider the scenarios use.
func (r *Runner) Setup(ctx context.Context) error {
	c := r.Stack.MgmtClient()
	for _, obj := range []client.Object{
		harness.Namespace("capov-system"),
		harness.CredentialsSecret("capov-system", benchSecret, r.Stack.SimUsername, r.Stack.SimPassword),
		harness.Provider(benchProvider, r.Stack.SimURL, benchSecret, r.Stack.SimCAPEM),
	} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T: %w", obj, err)
		}
	}
	tok, err := r.Stack.MetricsToken(ctx)
	if err != nil {
		return err
	}
	r.token = tok
	if r.QPS == 0 {
		r.QPS, r.Burst = 20, 40
	}
	return nil
}

// saveHeap saves a heap profile if profiling is on; a failure is reported, not fatal.
func (r *Runner) saveHeap(ctx context.Context, p *profiler, moment string) {
	path, err := p.heap(ctx, moment)
	switch {
	case err != nil:
		r.say("   heap profile (%s) failed: %v", moment, err)
	case path != "":
		r.say("   heap profile (%s): %s", moment, path)
	}
}

func (r *Runner) say(format string, args ...any) {
	fmt.Fprintf(r.Out, format+"\n", args...)
}

// Run measures one scenario.
func (r *Runner) Run(ctx context.Context, sc Scenario) (*Result, error) {
	sim := r.Stack.Sim
	c := r.Stack.MgmtClient()
	res := &Result{Scenario: sc}
	r.say("== %s: %d machines, concurrency %d, clone %t, latency %s", sc.Name, sc.Machines, sc.Concurrency, sc.Clone, sc.Latency)

	sim.SetTimings(ovirtsim.Timings{ImageLock: sc.ImageLock, CloneFactor: 1, DiskLock: sc.DiskLock,
		WaitForLaunch: sc.Boot / 3, PoweringUp: sc.Boot - sc.Boot/3, PoweringDown: 200 * time.Millisecond})
	sim.SetLatency(ovirtsim.LatencyRule{Min: sc.Latency, Max: sc.Latency})
	sim.ResetCounters()

	args := append([]string{
		fmt.Sprintf("--max-concurrent-reconciles=%d", sc.Concurrency),
		"--sync-period=" + sc.SyncPeriod.String(), "--provider-check-interval=" + sc.ProviderCheck.String(),
		"--vm-shutdown-timeout=30s",
	}, sc.ManagerArgs...)
	prof, err := newProfiler(r.ProfileDir, sc.Name)
	if err != nil {
		return nil, err
	}
	args = append(args, prof.args()...)
	mgr, metricsAddr, err := r.Stack.StartManager(ctx, "manager-"+sc.Name, args)
	if err != nil {
		return nil, err
	}
	defer func() { _ = mgr.Stop(30 * time.Second) }()
	sampler := newSampler(r, mgr, metricsAddr)
	sampler.start()
	defer sampler.stop()

	ns := "bench-" + sc.Name
	cluster, err := r.createCluster(ctx, ns)
	if err != nil {
		return nil, err
	}
	spec := infrav1.OVirtVMSpec{
		Provider: benchProvider, OVirtCluster: "Default", Template: "rhcos-4.14", VMType: infrav1.VMTypeServer,
		CPU: &infrav1.CPU{Sockets: 1, Cores: 2, Threads: 1}, Memory: &infrav1.Memory{SizeMB: 4096, GuaranteedMB: 2048},
		OSDiskSizeGB: 40, NICs: []infrav1.NIC{{VnicProfile: "ovirtmgmt"}}, DiskClone: ptr.To(sc.Clone),
	}
	created, err := r.createMachines(ctx, cluster, sc.Name, sc.Machines, spec)
	if err != nil {
		return nil, err
	}
	start := earliest(created)
	readyAt, err := r.waitReady(ctx, c, ns, sc.Machines, 30*time.Minute)
	if err != nil {
		return nil, err
	}
	last := start
	for name, t := range readyAt {
		res.TTR = append(res.TTR, t.Sub(created[name]))
		if t.After(last) {
			last = t
		}
	}
	sort.Slice(res.TTR, func(i, j int) bool { return res.TTR[i] < res.TTR[j] })
	res.AllReady = last.Sub(start)
	res.CreateCalls = perMachine(sim.Requests(), sc.Machines)
	res.Logins = sim.Logins()
	res.KubeRequests = sampler.kubeRequests()
	res.LowerBound = r.lowerBound(sc)
	r.say("   all %d Ready in %s (lower bound %s, ratio %.2f); p50 %s p95 %s; %.1f oVirt calls per machine; %d logins",
		sc.Machines, res.AllReady.Round(time.Millisecond), res.LowerBound.Round(time.Millisecond),
		res.AllReady.Seconds()/res.LowerBound.Seconds(), res.Percentile(50).Round(time.Millisecond),
		res.Percentile(95).Round(time.Millisecond), res.CreateCallsPerMachine(), res.Logins)
	r.say("   oVirt calls per machine by endpoint: %s", formatCalls(res.CreateCalls))
	r.saveHeap(ctx, prof, "ready")

	// Steady state: nothing changes; count what the manager still asks oVirt.
	if sc.Steady > 0 {
		sim.ResetCounters()
		time.Sleep(sc.Steady)
		reqs := sim.Requests()
		total := 0
		reads := 0
		checks := 0
		for k, v := range reqs {
			total += v
			if k.Method == "GET" && k.Path == "/vms/{id}" {
				reads += v
			}
			if k.Method == "GET" && (k.Path == "/" || k.Path == "") {
				checks += v
			}
		}
		res.SteadyWindow = sc.Steady
		res.SteadyPerMachineHour = float64(total) / float64(sc.Machines) / sc.Steady.Hours()
		res.SteadyVMReads = float64(reads) / float64(sc.Machines) / (sc.Steady.Seconds() / sc.SyncPeriod.Seconds())
		res.SteadyProviderChecks = checks
		r.say("   steady state over %s: %.1f calls per machine per hour, %.2f VM reads per machine per sync period, %d provider checks",
			sc.Steady, res.SteadyPerMachineHour, res.SteadyVMReads, checks)
		r.saveHeap(ctx, prof, "steady")
	}

	// Deletion of everything.
	sim.ResetCounters()
	delStart := time.Now()
	if err := c.DeleteAllOf(ctx, &infrav1.OVirtMachine{}, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	if err := waitGone(ctx, c, ns, 30*time.Minute); err != nil {
		return nil, err
	}
	res.Delete = time.Since(delStart)
	res.DeleteCalls = float64(sim.TotalRequests()) / float64(sc.Machines)
	res.PeakRSS, res.PeakHeap = sampler.peaks()
	r.say("   deleted in %s, %.1f calls per machine; manager peak RSS %.0f MiB, heap %.0f MiB, %.0f API-server requests",
		res.Delete.Round(time.Millisecond), res.DeleteCalls, res.PeakRSS/(1<<20), res.PeakHeap/(1<<20), res.KubeRequests)
	// CAPI would delete the Nodes of deleted Machines; the bench does it for the next scenario.
	if err := r.Stack.Workload.Client.DeleteAllOf(ctx, &corev1.Node{}); err != nil {
		return nil, fmt.Errorf("deleting the workload Nodes: %w", err)
	}
	return res, nil
}

// lowerBound is the least possible AllReady. Every machine needs MinimalCreateCalls calls:
// at most QPS start per second after the Burst the token bucket holds, and at most
// min(concurrency, 10 in flight) run at once, each taking Latency. Besides, a machine waits for
// its image copy, disk extension and boot, which overlap with other machines' calls but add to
// the latency-bound path of one machine.
func (r *Runner) lowerBound(sc Scenario) time.Duration {
	parallel := float64(min(sc.Concurrency, 10))
	calls := float64(sc.Machines * MinimalCreateCalls)
	byLatency := calls*sc.Latency.Seconds()/parallel + (sc.ImageLock + sc.DiskLock + sc.Boot).Seconds()
	byRate := math.Max(0, calls-float64(r.Burst)) / r.QPS
	return time.Duration(math.Max(byLatency, byRate) * float64(time.Second))
}

func (r *Runner) createCluster(ctx context.Context, ns string) (*clusterv1.Cluster, error) {
	c := r.Stack.MgmtClient()
	if err := c.Create(ctx, harness.Namespace(ns)); err != nil {
		return nil, err
	}
	cluster := harness.Cluster(ns, "bench")
	if err := c.Create(ctx, cluster); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, harness.OVirtCluster(cluster, "10.0.1.100", 6443)); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, harness.KubeconfigSecret(cluster, r.Stack.WorkloadKubeconfig)); err != nil {
		return nil, err
	}
	if err := harness.SetInfrastructureProvisioned(ctx, c, cluster); err != nil {
		return nil, err
	}
	return cluster, nil
}

// createMachines creates N bootstrap Secrets, Machines and OVirtMachines with 16 workers and
// returns each OVirtMachine's creation time.
func (r *Runner) createMachines(ctx context.Context, cluster *clusterv1.Cluster, prefix string, n int, spec infrav1.OVirtVMSpec) (map[string]time.Time, error) {
	c := r.Stack.MgmtClient()
	created := make(map[string]time.Time, n)
	var mu sync.Mutex
	var firstErr error
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				// Names are unique across scenarios, as VM and Node names are in real life.
				name := fmt.Sprintf("%s-%04d", prefix, i)
				err := func() error {
					if err := c.Create(ctx, harness.BootstrapSecret(cluster.Namespace, name+"-bootstrap", cluster.Name, `{"ignition":{"version":"3.2.0"}}`, "ignition")); err != nil {
						return err
					}
					m := harness.Machine(cluster, name, name+"-bootstrap")
					if err := c.Create(ctx, m); err != nil {
						return err
					}
					if err := c.Create(ctx, harness.OVirtMachine(m, spec)); err != nil {
						return err
					}
					mu.Lock()
					created[name] = time.Now()
					mu.Unlock()
					return nil
				}()
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("creating machine %s: %w", name, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	return created, firstErr
}

// waitReady lists the OVirtMachines until all n are Ready and returns when each was first seen
// Ready (within the list period).
func (r *Runner) waitReady(ctx context.Context, c client.Client, ns string, n int, timeout time.Duration) (map[string]time.Time, error) {
	readyAt := map[string]time.Time{}
	deadline := time.Now().Add(timeout)
	period := 200 * time.Millisecond
	if n > 200 {
		period = time.Second
	}
	for len(readyAt) < n {
		oms := &infrav1.OVirtMachineList{}
		if err := c.List(ctx, oms, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		now := time.Now()
		for _, om := range oms.Items {
			if ptr.Deref(om.Status.Initialization.Provisioned, false) {
				if _, seen := readyAt[om.Name]; !seen {
					readyAt[om.Name] = now
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("only %d of %d machines Ready after %s", len(readyAt), n, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(period):
		}
	}
	return readyAt, nil
}

func waitGone(ctx context.Context, c client.Client, ns string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		oms := &infrav1.OVirtMachineList{}
		if err := c.List(ctx, oms, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(oms.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d machines still exist after %s", len(oms.Items), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func earliest(ts map[string]time.Time) time.Time {
	var first time.Time
	for _, t := range ts {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first
}

// perMachine turns the simulator's request counters into calls per machine by endpoint.
func perMachine(reqs map[ovirtsim.RequestKey]int, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range reqs {
		out[k.Method+" "+k.Path] += float64(v) / float64(n)
	}
	return out
}

// readVMHWM returns the peak resident set size of a process in bytes.
func readVMHWM(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// formatCalls lists calls per machine by endpoint, most frequent first.
func formatCalls(calls map[string]float64) string {
	keys := slices.Collect(maps.Keys(calls))
	sort.Slice(keys, func(i, j int) bool {
		if calls[keys[i]] != calls[keys[j]] {
			return calls[keys[i]] > calls[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, calls[k]))
	}
	return strings.Join(parts, ", ")
}
