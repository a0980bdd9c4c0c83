package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/go-logr/logr"

	"github.com/capov/capov/pkg/app/options"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
	"github.com/capov/capov/test/webhookload"
)

// Realistic oVirt waits of the full set: a thin disk image created in 2 s, a disk extended in
// 1 s, a VM booted in 5 s, 20 ms per API call.
const (
	realLatency   = 20 * time.Millisecond
	realImageLock = 2 * time.Second
	realDiskLock  = time.Second
	realBoot      = 5 * time.Second
)

func real(name string, n, concurrency int, clone bool) Scenario {
	return Scenario{Name: name, Machines: n, Concurrency: concurrency, Clone: clone, Latency: realLatency,
		ImageLock: realImageLock, DiskLock: realDiskLock, Boot: realBoot, SyncPeriod: 30 * time.Second, ProviderCheck: 30 * time.Second}
}

// Names of the scenarios the report's targets refer to.
const (
	scenarioN1000 = "n1000-c10"
	scenarioN5000 = "n5000-c10-50clusters"
)

// FullSet is what `make bench` measures. The steady windows compare the per-VM reads of Ready
// machines with the inventory on the same machines; the 5,000-machine scenario (50 Clusters of
// 100) runs last and leaves its machines in place (deleting them would take another 25 minutes).
func FullSet() []Scenario {
	economy := Scenario{Name: "economy-100", Machines: 100, Concurrency: 10, SyncPeriod: 30 * time.Second, ProviderCheck: 30 * time.Second}
	n100 := real("n100-c10", 100, 10, false)
	n100.Steady, n100.CompareReads = time.Minute, true
	n1000 := real(scenarioN1000, 1000, 10, false)
	n1000.Steady, n1000.CompareReads = time.Minute, true
	n5000 := real(scenarioN5000, 5000, 10, false)
	n5000.Steady, n5000.Clusters, n5000.RestartCreate, n5000.SkipDelete = time.Minute, 50, true, true
	out := []Scenario{economy}
	for _, opt := range ContentOptions {
		out = append(out, optionScenario(opt))
	}
	return append(out, []Scenario{
		n100,
		real("n100-c1", 100, 1, false), real("n100-c50", 100, 50, false), real("n100-c10-clone", 100, 10, true),
		real("n500-c10", 500, 10, false), n1000, n5000,
	}...)
}

// webhookWarmUp is the number of requests per client of the admission load test that are sent
// before measuring and not counted.
const webhookWarmUp = 50

// SmokeSet is what `make bench-smoke` (and `make test`) measures in seconds: ten machines, with
// restarts and steady windows of both ways of observing Ready machines at 3-second intervals.
func SmokeSet() []Scenario {
	return []Scenario{{Name: "economy-10", Machines: 10, Concurrency: 10, Steady: 6 * time.Second,
		SyncPeriod: 3 * time.Second, ProviderCheck: 3 * time.Second, CompareReads: true}}
}

// Options configure RunAll.
type Options struct {
	WorkDir string
	Out     io.Writer
	// WebhookRequests is the per-client request count of the admission load test (0 skips it).
	WebhookRequests int
	// WebhookClients is the number of concurrent clients of the admission load test (default 4:
	// twice the cores of the reference machine, which also runs the load generator).
	WebhookClients int
	// ProfileDir, when set, receives the heap profiles of every scenario's manager (see Runner).
	ProfileDir string
	// ManagerMemoryLimit, when not 0, is the container memory limit (bytes) the managers run as
	// if under: they get GOMEMLIMIT at the soft limit the binaries set for it.
	ManagerMemoryLimit int64
}

// RunAll starts the stack (without Cluster API's controllers: the bench creates Machines
// itself), runs the scenarios one after the other and the admission load test.
func RunAll(ctx context.Context, scenarios []Scenario, opts Options) (*Report, error) {
	rep := &Report{Started: time.Now()}
	seed := ovirtsim.DemoSeed()
	for i := range seed.StorageDomains {
		// Room for 5,000 VMs of 40 GiB in either domain, many times over.
		seed.StorageDomains[i].FreeGB = 1 << 20
	}
	for i := range seed.Clusters {
		for j := range seed.Clusters[i].Hosts {
			// 16 TiB per host: 5,000 VMs of 4 GiB run on the three hosts of the Default cluster.
			seed.Clusters[i].Hosts[j].MemoryGB = 16 << 10
		}
	}
	stack, err := harness.StartStack(ctx, harness.StackOptions{
		WorkDir: opts.WorkDir, Out: opts.Out, Seed: seed, WithoutCAPI: true, WithoutManager: true, Log: logr.Discard(),
	})
	if err != nil {
		return nil, err
	}
	defer stack.Stop()
	if opts.ManagerMemoryLimit > 0 {
		soft := options.SoftMemoryLimit(opts.ManagerMemoryLimit)
		if soft == 0 {
			return nil, fmt.Errorf("a memory limit of %d bytes leaves the manager no room (at least 128Mi)", opts.ManagerMemoryLimit)
		}
		stack.ManagerEnv = append(stack.ManagerEnv, "GOMEMLIMIT="+strconv.FormatInt(soft, 10))
		rep.ManagerMemoryLimit, rep.ManagerSoftMemoryLimit = opts.ManagerMemoryLimit, soft
	}
	r := &Runner{Stack: stack, Out: opts.Out, ProfileDir: opts.ProfileDir}
	if err := r.Setup(ctx); err != nil {
		return nil, err
	}
	for i, sc := range scenarios {
		res, err := r.Run(ctx, sc, i == len(scenarios)-1)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		rep.Results = append(rep.Results, res)
	}
	if opts.WebhookRequests > 0 {
		if opts.WebhookClients <= 0 {
			opts.WebhookClients = 4
		}
		fmt.Fprintf(opts.Out, "== admission load test: %d clients x %d requests\n", opts.WebhookClients, opts.WebhookRequests)
		url, ca := "https://"+stack.WebhookAddr, stack.Mgmt.Env.WebhookInstallOptions.LocalServingCAData
		// Warm up the connections and the server's code paths (and its informer cache) first:
		// with -set=webhook the server has not seen a request before.
		if _, err := webhookload.Run(ctx, url, ca, opts.WebhookClients, webhookWarmUp); err != nil {
			return nil, fmt.Errorf("admission load test warm-up: %w", err)
		}
		lr, err := webhookload.Run(ctx, url, ca, opts.WebhookClients, opts.WebhookRequests)
		if err != nil {
			return nil, fmt.Errorf("admission load test: %w", err)
		}
		fmt.Fprintf(opts.Out, "   %s\n", lr)
		rep.WebhookP50, rep.WebhookP99, rep.WebhookThroughput = lr.P50, lr.P99, lr.Throughput
		rep.WebhookRequests, rep.WebhookErrors, rep.WebhookClients = lr.Requests, lr.Errors, opts.WebhookClients
	}
	rep.Elapsed = time.Since(rep.Started)
	return rep, nil
}
