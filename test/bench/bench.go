// Package bench measures CAPOV at scale: N OVirtMachines (each with its owner Machine and
// bootstrap Secret) provisioned by the manager binary, as a separate process, against the oVirt
// simulator with injected per-call latency and boot time. It measures time to Ready, oVirt calls
// per machine by endpoint, SSO logins, the Engine calls of Ready machines after a manager restart
// and in steady state (per-VM reads and the bulk inventory side by side), orphan detection,
// deletion, the manager's memory and API-server requests, and the webhook's admission latency,
// and writes docs/benchmarks.md with charts. `make bench` runs the full set, `make bench-smoke`
// (part of `make test`) a small one.
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt/sdk"
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
	// Steady is the observation window after everything is Ready (0: none); SyncPeriod the
	// manager's --sync-period (and --inventory-interval during the window) and ProviderCheck its
	// --provider-check-interval.
	Steady, SyncPeriod, ProviderCheck time.Duration
	// CompareReads measures the restart and the steady window first with the inventory off
	// (--inventory-interval=0: every Ready machine reads its VM, as before the inventory), then
	// with it; without it only with the inventory.
	CompareReads bool
	// Clusters spreads the machines evenly over this many Clusters, each in its own namespace
	// with its own view of the workload cluster's Nodes (0 or 1: one Cluster).
	Clusters int
	// RestartCreate times one machine created on the idle manager (all Ready) and one created
	// right after a restart of the manager.
	RestartCreate bool
	// SkipDelete leaves the machines in place when the scenario is the last of the run: its
	// deletion columns then say "not measured".
	SkipDelete bool
	// ManagerArgs are extra manager flags.
	ManagerArgs []string
	// Contents is the VM-contents option (ContentOptions) every machine of the scenario has; "" none.
	Contents string `json:",omitempty"`
}

// clusters is the number of Clusters the machines are spread over.
func (sc *Scenario) clusters() int { return max(sc.Clusters, 1) }

// MinimalCreateWrites are the writes a machine's creation needs: create, grow the OS disk, start
// with the bootstrap data as run once. Template, cluster and vNIC-profile lookups are cached per
// provider and not counted.
const MinimalCreateWrites = 3

// ForcedCreateReads are the reads the Engine forces on a creation: image unlocked, disk
// unlocked, up.
const ForcedCreateReads = 3

// MinimalCreateCalls is the declared minimal sequence of a machine's creation, the lower bound's:
// the writes it needs and the reads the Engine forces, each a call.
const MinimalCreateCalls = MinimalCreateWrites + ForcedCreateReads

// PreviousMinimalCreateCalls is the bound of the releases that stored the bootstrap data on the
// VM at creation and cleared it with a PUT /vms/{id} once the Node registered.
const PreviousMinimalCreateCalls = 7

// sharedCreateCalls is the declared minimal sequence when every forced read is shared by the
// reads of other machines that wait with it for a rate-limit token (one search names up to
// sdk.MaxVMReadBatch VMs): at most `concurrency` reconciles wait at once, so that many machines
// at most share a read. The manager's shared reads can beat the lower bound; this one they
// cannot.
func sharedCreateCalls(concurrency int) float64 {
	shared := max(1, min(concurrency, sdk.MaxVMReadBatch))
	return MinimalCreateWrites + float64(ForcedCreateReads)/float64(shared)
}

// Result is what a scenario measured.
type Result struct {
	Scenario
	// AllReady is the time from the first create to the last machine Ready.
	AllReady time.Duration
	// TTR are the per-machine times from create to Ready, sorted.
	TTR []time.Duration
	// LowerBound is the time of the declared minimal sequence (see Runner.lowerBound);
	// SharedBound the same with every read shared (sharedCreateCalls), PreviousBound with
	// PreviousMinimalCreateCalls.
	LowerBound, SharedBound, PreviousBound time.Duration
	// CreateCalls are oVirt calls per machine by "METHOD /path" until all were Ready.
	CreateCalls map[string]float64
	// Logins are SSO logins during the whole scenario.
	Logins int
	// SteadyPerMachineHour is oVirt calls per machine per hour once Ready; SteadyVMReads the VM
	// reads per machine per sync period; SteadyProviderChecks the provider checks in the window
	// (all in the steady window with the inventory, the manager's default).
	SteadyPerMachineHour, SteadyVMReads float64
	SteadyProviderChecks                int
	SteadyWindow                        time.Duration
	// Economy are the restarts and steady windows of each way of observing Ready machines, in
	// the order measured (per-VM reads first when compared).
	Economy []Economy `json:",omitempty"`
	// OrphanDetect is the time from an OVirtMachine gone (its VM left behind) until the
	// provider's status counted the orphan (0: not measured); OrphanError says why it failed.
	OrphanDetect time.Duration `json:",omitempty"`
	OrphanError  string        `json:",omitempty"`
	// IdleCreateTTR and RestartCreateTTR are the times to Ready of one machine created on the
	// idle manager and of one created right after a restart (0: not measured).
	IdleCreateTTR, RestartCreateTTR time.Duration `json:",omitempty"`
	// Stops are how long each graceful stop of the scenario's managers took (SIGTERM to exit);
	// StopsKilled counts those killed after the 30 s the bench waits.
	Stops       []time.Duration `json:",omitempty"`
	StopsKilled int             `json:",omitempty"`
	// Delete is the time to delete all machines, DeleteCalls the oVirt calls per machine;
	// DeleteSkipped is set when the scenario left them in place.
	Delete        time.Duration
	DeleteCalls   float64
	DeleteSkipped bool `json:",omitempty"`
	// PeakRSS and PeakHeap are the peak resident memory and Go heap in bytes of the scenario's
	// managers (the highest of every start).
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

// economy returns the measurement of a mode (nil if not measured).
func (r *Result) economy(mode string) *Economy {
	for i := range r.Economy {
		if r.Economy[i].Mode == mode {
			return &r.Economy[i]
		}
	}
	return nil
}

// Runner runs scenarios on a stack started without a manager.
type Runner struct {
	Stack *harness.Stack
	Out   io.Writer
	// QPS and Burst are the manager's oVirt rate limit (its defaults unless set).
	QPS   float64
	Burst int
	// ProfileDir, when set, receives heap profiles of each scenario's manager (all Ready, and
	// after each steady window), taken through its --profiler-address.
	ProfileDir string
	token      string
	// starts counts the manager starts of each scenario (log file names).
	starts map[string]int
}

const (
	benchProvider = "bench"
	benchSecret   = "bench-credentials"
)

// benchProviderObject is the scenarios' OVirtProvider: it creates the tags the tags option names.
func benchProviderObject(url string, ca []byte) *infrav1.OVirtProvider {
	p := harness.Provider(benchProvider, url, benchSecret, ca)
	p.Spec.CreateMissingTags = ptr.To(true)
	return p
}

// Setup creates the namespace, credentials and provider the scenarios use.
func (r *Runner) Setup(ctx context.Context) error {
	c := r.Stack.MgmtClient()
	for _, obj := range []client.Object{
		harness.Namespace("capov-system"),
		harness.CredentialsSecret("capov-system", benchSecret, r.Stack.SimUsername, r.Stack.SimPassword),
		benchProviderObject(r.Stack.SimURL, r.Stack.SimCAPEM),
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
	r.starts = map[string]int{}
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

// benchOVirtCluster is the oVirt cluster of every bench machine.
const benchOVirtCluster = "Default"

// benchVMSpec is the VM of every bench machine.
func benchVMSpec(clone bool) infrav1.OVirtVMSpec {
	return infrav1.OVirtVMSpec{
		Provider: benchProvider, OVirtCluster: benchOVirtCluster, Template: "rhcos-4.14", VMType: infrav1.VMTypeServer,
		CPU: &infrav1.CPU{Sockets: 1, Cores: 2, Threads: 1}, Memory: &infrav1.Memory{SizeMB: 4096, GuaranteedMB: 2048},
		OSDiskSizeGB: 40, NICs: []infrav1.NIC{{VnicProfile: "ovirtmgmt"}}, DiskClone: ptr.To(clone),
	}
}

// Run measures one scenario; last is set for the last scenario of the run (SkipDelete).
func (r *Runner) Run(ctx context.Context, sc Scenario, lastOfRun bool) (_ *Result, reterr error) {
	sim, c := r.Stack.Sim, r.Stack.MgmtClient()
	res := &Result{Scenario: sc}
	r.say("== %s: %d machines over %d clusters, concurrency %d, clone %t, latency %s", sc.Name, sc.Machines, sc.clusters(), sc.Concurrency, sc.Clone, sc.Latency)

	sim.SetTimings(ovirtsim.Timings{ImageLock: sc.ImageLock, CloneFactor: 1, DiskLock: sc.DiskLock,
		WaitForLaunch: sc.Boot / 3, PoweringUp: sc.Boot - sc.Boot/3, PoweringDown: 200 * time.Millisecond})
	sim.SetLatency(ovirtsim.LatencyRule{Min: sc.Latency, Max: sc.Latency})
	sim.ResetCounters()

	mgr, err := r.startManager(ctx, &sc)
	if err != nil {
		return nil, err
	}
	defer func() {
		// The manager of the last phase (none when a restart failed to start one).
		if mgr == nil {
			return
		}
		if err := mgr.stop(res); err != nil && reterr == nil {
			r.say("   stopping the manager: %v", err)
		}
	}()

	clusters, views, err := r.createClusters(ctx, &sc)
	if err != nil {
		return nil, err
	}
	if views != nil {
		defer views.close()
	}
	items := make([]machineItem, sc.Machines)
	perCluster := (sc.Machines + len(clusters) - 1) / len(clusters)
	for i := range items {
		items[i] = machineItem{cluster: clusters[i/perCluster], name: fmt.Sprintf("%s-%04d", sc.Name, i)}
	}
	spec := benchVMSpec(sc.Clone)
	applyContents(&spec, sc.Contents)
	if err := prepareContents(sim, sc.Contents); err != nil {
		return nil, err
	}
	created, err := r.createMachines(ctx, items, spec)
	if err != nil {
		return nil, err
	}
	start := earliest(created)
	var readyAt map[string]time.Time
	if timeout := max(30*time.Minute, 2*r.lowerBound(sc)+10*time.Minute); len(clusters) == 1 && sc.Machines <= 1000 {
		readyAt, err = r.waitReady(ctx, clusters[0].Namespace, created, timeout)
	} else {
		readyAt, err = r.watchReady(ctx, created, timeout)
	}
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
	res.KubeRequests = mgr.sampler.kubeRequests()
	res.LowerBound = r.lowerBound(sc)
	res.SharedBound, res.PreviousBound = r.lowerBoundOf(sc, sharedCreateCalls(sc.Concurrency)), r.lowerBoundOf(sc, PreviousMinimalCreateCalls)
	r.say("   all %d Ready in %s (lower bound %s, ratio %.2f); p50 %s p95 %s; %.1f oVirt calls per machine; %d logins",
		sc.Machines, res.AllReady.Round(time.Millisecond), res.LowerBound.Round(time.Millisecond),
		res.AllReady.Seconds()/res.LowerBound.Seconds(), res.Percentile(50).Round(time.Millisecond),
		res.Percentile(95).Round(time.Millisecond), res.CreateCallsPerMachine(), res.Logins)
	r.say("   oVirt calls per machine by endpoint: %s", formatCalls(res.CreateCalls))
	r.saveHeap(ctx, mgr.prof, "ready")

	deleted := sc.Machines
	if sc.Steady > 0 {
		if mgr, err = r.measureReadyMachines(ctx, mgr, &sc, res, clusters[0].Namespace, items[0].name); err != nil {
			return nil, err
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: clusters[0].Namespace, Name: items[0].name}, &infrav1.OVirtMachine{}); apierrors.IsNotFound(err) {
			deleted-- // the orphan's
		}
	}
	if sc.RestartCreate {
		// In the last Cluster: they come last in a restart's initial list (by namespace and
		// name), where a queue that serves the list in its order serves them last.
		if mgr, err = r.measureRestartCreate(ctx, mgr, &sc, res, clusters[len(clusters)-1]); err != nil {
			return nil, err
		}
		deleted += 2
	}
	if sc.SkipDelete && lastOfRun {
		res.DeleteSkipped = true
		rss, heap := mgr.sampler.peaks()
		res.PeakRSS, res.PeakHeap = max(res.PeakRSS, rss), max(res.PeakHeap, heap)
		r.say("   deletion skipped (last scenario): %d machines left in place; manager peak RSS %.0f MiB, heap %.0f MiB, %.0f API-server requests",
			deleted, res.PeakRSS/(1<<20), res.PeakHeap/(1<<20), res.KubeRequests)
		return res, nil
	}
	return res, r.deleteAll(ctx, mgr, res, clusters, deleted)
}

// measureReadyMachines measures what Ready machines cost (restarts and steady windows, see
// measureEconomy) and the detection of an orphan (the VM of machine name in namespace ns). It
// returns the manager left running.
func (r *Runner) measureReadyMachines(ctx context.Context, mgr *managerRun, sc *Scenario, res *Result, ns, name string) (*managerRun, error) {
	mgr, err := r.measureEconomy(ctx, mgr, sc, res)
	if err != nil {
		return nil, err
	}
	if e := res.economy(modeInventory); e != nil {
		res.SteadyWindow = e.SteadyWindow
		res.SteadyPerMachineHour = float64(sumCounts(e.SteadyCalls)) / float64(sc.Machines) / e.SteadyWindow.Hours()
		res.SteadyVMReads = float64(e.SteadyCalls[vmReadEndpoint]) / float64(sc.Machines) / e.intervals(sc)
		res.SteadyProviderChecks = e.SteadyCalls[providerCheckEndpoint]
	}
	// With the inventory of the last economy mode. A failure is reported, not fatal.
	if res.OrphanDetect, err = r.measureOrphan(ctx, ns, name, sc.SyncPeriod); err != nil {
		res.OrphanError = err.Error()
		r.say("   orphan detection failed: %v", err)
	} else {
		r.say("   orphan detection: the provider counted the VM of a deleted OVirtMachine %s after it was gone (inventory interval %s)",
			res.OrphanDetect.Round(100*time.Millisecond), sc.SyncPeriod)
	}
	return mgr, nil
}

// deleteAll deletes the OVirtMachines of the clusters (n of them) and times it; then, as Cluster
// API would, their Machines, bootstrap Secrets and workload Nodes, so that the next scenario's
// manager caches only its own objects (it caches every Machine of the management cluster).
func (r *Runner) deleteAll(ctx context.Context, mgr *managerRun, res *Result, clusters []*clusterv1.Cluster, n int) error {
	sim, c := r.Stack.Sim, r.Stack.MgmtClient()
	sim.ResetCounters()
	start := time.Now()
	for _, cl := range clusters {
		if err := c.DeleteAllOf(ctx, &infrav1.OVirtMachine{}, client.InNamespace(cl.Namespace)); err != nil {
			return err
		}
	}
	if err := waitGone(ctx, c, clusters, max(30*time.Minute, time.Duration(n)*time.Second)); err != nil {
		return err
	}
	res.Delete = time.Since(start)
	res.DeleteCalls = float64(sim.TotalRequests()) / float64(n)
	rss, heap := mgr.sampler.peaks()
	res.PeakRSS, res.PeakHeap = max(res.PeakRSS, rss), max(res.PeakHeap, heap)
	r.say("   deleted in %s, %.1f calls per machine; manager peak RSS %.0f MiB, heap %.0f MiB, %.0f API-server requests",
		res.Delete.Round(time.Millisecond), res.DeleteCalls, res.PeakRSS/(1<<20), res.PeakHeap/(1<<20), res.KubeRequests)
	for _, cl := range clusters {
		for _, o := range []client.Object{&clusterv1.Machine{}, &corev1.Secret{}} {
			if err := c.DeleteAllOf(ctx, o, client.InNamespace(cl.Namespace)); err != nil {
				return fmt.Errorf("deleting the %T objects of namespace %s: %w", o, cl.Namespace, err)
			}
		}
	}
	if err := r.Stack.Workload.Client.DeleteAllOf(ctx, &corev1.Node{}); err != nil {
		return fmt.Errorf("deleting the workload Nodes: %w", err)
	}
	return nil
}

// lowerBound is the least possible AllReady with one call per step. Every machine needs
// MinimalCreateCalls calls:
// at most QPS start per second after the Burst the token bucket holds, and at most
// min(concurrency, 10 in flight) run at once, each taking Latency. Besides, a machine waits for
// its image copy, disk extension and boot, which overlap with other machines' calls but add to
// the latency-bound path of one machine.
func (r *Runner) lowerBound(sc Scenario) time.Duration {
	return r.lowerBoundOf(sc, MinimalCreateCalls)
}

// lowerBoundOf is lowerBound for perMachine calls per machine.
func (r *Runner) lowerBoundOf(sc Scenario, perMachine float64) time.Duration {
	parallel := float64(min(sc.Concurrency, 10))
	calls := float64(sc.Machines) * perMachine
	byLatency := calls*sc.Latency.Seconds()/parallel + (sc.ImageLock + sc.DiskLock + sc.Boot).Seconds()
	byRate := math.Max(0, calls-float64(r.Burst)) / r.QPS
	return time.Duration(math.Max(byLatency, byRate) * float64(time.Second))
}

// createClusters creates the scenario's Clusters, each in its own namespace bench-<scenario>
// (bench-<scenario>-<i> with several), with the Node views they need when there are several.
func (r *Runner) createClusters(ctx context.Context, sc *Scenario) ([]*clusterv1.Cluster, *nodeViews, error) {
	n := sc.clusters()
	if n == 1 {
		cl, err := r.createCluster(ctx, "bench-"+sc.Name, r.Stack.WorkloadKubeconfig)
		if err != nil {
			return nil, nil, err
		}
		return []*clusterv1.Cluster{cl}, nil, nil
	}
	views, err := startNodeViews(r.Stack.Workload.Config)
	if err != nil {
		return nil, nil, err
	}
	perCluster := (sc.Machines + n - 1) / n
	var clusters []*clusterv1.Cluster
	for k := range n {
		ns := fmt.Sprintf("bench-%s-%02d", sc.Name, k)
		var nodes []string
		for i := k * perCluster; i < min((k+1)*perCluster, sc.Machines); i++ {
			nodes = append(nodes, fmt.Sprintf("%s-%04d", sc.Name, i))
		}
		if k == n-1 {
			// The machines of RestartCreate join the last Cluster.
			nodes = append(nodes, restartCreateName(sc, "idle"), restartCreateName(sc, "restart"))
		}
		kc, err := views.kubeconfig(ns, nodes)
		if err == nil {
			var cl *clusterv1.Cluster
			if cl, err = r.createCluster(ctx, ns, kc); err == nil {
				clusters = append(clusters, cl)
			}
		}
		if err != nil {
			views.close()
			return nil, nil, err
		}
	}
	return clusters, views, nil
}

func (r *Runner) createCluster(ctx context.Context, ns string, kubeconfig []byte) (*clusterv1.Cluster, error) {
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
	if err := c.Create(ctx, harness.KubeconfigSecret(cluster, kubeconfig)); err != nil {
		return nil, err
	}
	if err := harness.SetInfrastructureProvisioned(ctx, c, cluster); err != nil {
		return nil, err
	}
	return cluster, nil
}

// machineItem is one machine to create: its name and its Cluster.
type machineItem struct {
	cluster *clusterv1.Cluster
	name    string
}

// createMachines creates the bootstrap Secrets, Machines and OVirtMachines of items with 16
// workers and returns each OVirtMachine's creation time by name.
func (r *Runner) createMachines(ctx context.Context, items []machineItem, spec infrav1.OVirtVMSpec) (map[string]time.Time, error) {
	c := r.Stack.MgmtClient()
	created := make(map[string]time.Time, len(items))
	var mu sync.Mutex
	var firstErr error
	work := make(chan machineItem)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				// Names are unique across scenarios, as VM and Node names are in real life.
				name, cluster := it.name, it.cluster
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
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	return created, firstErr
}

// waitReady lists the OVirtMachines of namespace ns until all of created are Ready and returns
// when each was first seen Ready (within the list period: 200 ms, 1 s above 200 machines; see
// watchReady for thousands).
func (r *Runner) waitReady(ctx context.Context, ns string, created map[string]time.Time, timeout time.Duration) (map[string]time.Time, error) {
	c := r.Stack.MgmtClient()
	n := len(created)
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
			if _, ours := created[om.Name]; ours && ptr.Deref(om.Status.Initialization.Provisioned, false) {
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

func waitGone(ctx context.Context, c client.Client, clusters []*clusterv1.Cluster, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := 0
		for _, cl := range clusters {
			oms := &infrav1.OVirtMachineList{}
			if err := c.List(ctx, oms, client.InNamespace(cl.Namespace)); err != nil {
				return err
			}
			left += len(oms.Items)
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d machines still exist after %s", left, timeout)
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
