package chaos

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/sdk"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// Names of the world's shared objects.
const (
	// CredentialsNamespace holds the credentials Secret (the manager's --credentials-namespace).
	CredentialsNamespace = "capov-system"
	// ProviderName is the OVirtProvider every scenario's machines use.
	ProviderName = "chaos"
	// SecretName is its credentials Secret.
	SecretName = "chaos-credentials"
	// endpointHost is the control-plane VIP of every cluster.
	endpointHost = "10.0.1.100"
)

// ManagerFlags are the manager's flags in the suite: every oVirt call logged (--debug, so that
// I7 reads the most talkative logs), fast polls, and an oVirt call timeout that the hang
// faults exceed.
var ManagerFlags = []string{
	"--debug", "--vm-poll-interval=250ms", "--node-poll-interval=250ms", "--retry-interval=1s",
	"--non-system-disk-retry-interval=1s", "--provider-check-interval=2s", "--vm-shutdown-timeout=2s",
	"--ovirt-timeout=" + OVirtTimeout.String(), "--ovirt-auth-backoff=10s", "--graceful-shutdown-timeout=10s",
}

// OVirtTimeout is the manager's --ovirt-timeout in the suite; hang faults last longer.
const OVirtTimeout = 3 * time.Second

// World is one seed's running stack with the objects every scenario shares: the credentials
// Secret and the OVirtProvider (which reaches the simulator through its observed listener),
// the watcher and the planted sentinels.
type World struct {
	// Cfg is the run's configuration and Seed this world's seed.
	Cfg  Config
	Seed uint64
	// Stack is the running CAPOV installation; C its management cluster client; Sim the
	// simulator.
	Stack *harness.Stack
	C     client.Client
	Sim   *ovirtsim.Simulator
	// WorkDir holds binaries, kubeconfigs and logs.
	WorkDir string
	// EngineURL is the simulator's observed API URL the OVirtProvider uses.
	EngineURL string
	// Username and Password are the Engine's credentials now.
	Username, Password string
	// BootstrapSentinel is planted in every bootstrap data Secret.
	BootstrapSentinel string
	// Watcher checks the invariants.
	Watcher *Watcher
	// Baseline holds the oVirt call rates of the fault-free phase (I6) and the manager's
	// footprint (I8).
	Baseline Baseline

	rnd          *rand.Rand
	logf         func(format string, args ...any)
	mu           sync.Mutex
	processes    []*harness.Process // every manager and webhook started, for I7
	managerN     int
	metricsToken string
	extra        []*harness.Process // managers besides Stack.Manager (leader election)
	// managerKubeconfig authenticates as the manager's ServiceAccount; managerConfig is the same
	// as a rest.Config.
	managerKubeconfig string
	managerConfig     *rest.Config
}

// Baseline is what the fault-free phase measured.
type Baseline struct {
	// PathRate is the highest number of calls per RateWindow of each "METHOD /path".
	PathRate map[string]int
	// Goroutines and FDs are the manager's, idle after the phase.
	Goroutines, FDs int
	// CallsPerMachine is oVirt API calls per machine (create and delete).
	CallsPerMachine float64
}

// StartWorld starts a stack for one seed, plants the sentinels and creates the provider.
func StartWorld(ctx context.Context, cfg Config, seed uint64, workDir string, logf func(string, ...any)) (_ *World, reterr error) {
	w := &World{Cfg: cfg, Seed: seed, WorkDir: workDir, logf: logf, rnd: rand.New(rand.NewPCG(seed, 0x776f726c64))}
	w.Username = "admin@internal"
	w.Password = fmt.Sprintf("chaos-engine-pw-%d-%08x", seed, w.rnd.Uint32())
	w.BootstrapSentinel = fmt.Sprintf("chaos-bootstrap-%d-%08x", seed, w.rnd.Uint32())
	w.Watcher = newWatcher(w)
	w.Watcher.AddSentinel(w.Password, "the Engine password")
	w.Watcher.AddSentinel(w.BootstrapSentinel, "bootstrap data")

	seedCfg := simSeed(seed, w.Username, w.Password)
	s, err := harness.StartStack(ctx, harness.StackOptions{
		WorkDir: workDir, Out: writerFunc(func(p []byte) { logf("%s", strings.TrimRight(string(p), "\n")) }), Seed: seedCfg, Log: logr.Discard(),
		ManagerArgs: ManagerFlags, WebhookArgs: []string{"--debug"},
		// As a process, Cluster API's reconcilers neither compete with the watcher for the test
		// process nor hold its stop for their 30 s graceful shutdown.
		CAPIAsProcess: true,
		// The workers take static addresses from an InClusterIPPool (newCluster).
		WithIPAM: true,
		// A violation about an object that changed or went names who wrote it (auditTrail).
		AuditWrites: true,
		// As in every real cluster: an OVirtMachine whose Machine went before Cluster API's
		// finalizer was on it, or a claim whose OVirtMachine went, is collected.
		GarbageCollector: true,
	})
	if err != nil {
		return nil, err
	}
	w.Stack, w.C, w.Sim = s, s.MgmtClient(), s.Sim
	defer func() {
		if reterr != nil {
			w.Stop()
		}
	}()
	w.processes = append(w.processes, s.Manager, s.Webhook)
	if w.EngineURL, err = w.Sim.ServeObserved(w.Watcher.observe); err != nil {
		return nil, err
	}
	if err := w.C.Create(ctx, harness.Namespace(CredentialsNamespace)); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if w.metricsToken, err = s.MetricsToken(ctx); err != nil {
		return nil, err
	}
	// The manager runs as a real installation's: ServiceAccount capov-system/capov-manager with
	// the RBAC of config/default, so that the API server checks its rights and the webhooks'
	// matchConditions see its name (the stack's first manager is the envtest admin).
	if err := w.useManagerIdentity(ctx); err != nil {
		return nil, err
	}
	for _, o := range []client.Object{
		harness.CredentialsSecret(CredentialsNamespace, SecretName, w.Username, w.Password),
		harness.Provider(ProviderName, w.EngineURL, SecretName, w.Sim.CAPEM()),
	} {
		if err := w.C.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	if err := w.WaitProviderReady(ctx, time.Minute); err != nil {
		return nil, err
	}
	w.Watcher.start()
	return w, nil
}

// useManagerIdentity installs the manager's RBAC from config/default, writes a kubeconfig of
// its ServiceAccount and replaces the stack's manager by one that uses it.
func (w *World) useManagerIdentity(ctx context.Context) error {
	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	if err := harness.InstallRBAC(ctx, w.C, root); err != nil {
		return err
	}
	kc, err := harness.ServiceAccountKubeconfig(ctx, w.C, w.Stack.Mgmt.Config, harness.ManagerNamespace, harness.ManagerServiceAccount)
	if err != nil {
		return err
	}
	if w.managerConfig, err = clientcmd.RESTConfigFromKubeConfig(kc); err != nil {
		return fmt.Errorf("reading the manager's kubeconfig: %w", err)
	}
	w.managerKubeconfig = filepath.Join(w.WorkDir, "kubeconfig-manager")
	if err := os.WriteFile(w.managerKubeconfig, kc, 0o600); err != nil {
		return err
	}
	return w.ReplaceManager(ctx)
}

// simSeed is the simulator inventory of the suite: the demo's, with the given credentials,
// short engine timings and the seed deciding ids, faults and latencies.
func simSeed(seed uint64, user, password string) *ovirtsim.Seed {
	s := ovirtsim.DemoSeed()
	s.Username, s.Password = user, password
	s.RandomSeed = int64(seed%(1<<62)) + 1
	s.Timings = ovirtsim.Timings{ImageLock: 300 * time.Millisecond, DiskLock: 200 * time.Millisecond,
		WaitForLaunch: 100 * time.Millisecond, PoweringUp: 200 * time.Millisecond, PoweringDown: 200 * time.Millisecond}
	return s
}

// Logf prints a progress line.
func (w *World) Logf(format string, args ...any) { w.logf(format, args...) }

// Rand returns a random source for a scenario, derived from the seed and the scenario's name
// only, so that each scenario makes the same decisions whichever scenarios ran before it.
func (w *World) Rand(scenario string) *rand.Rand {
	h := uint64(14695981039346656037)
	for _, c := range []byte(scenario) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return rand.New(rand.NewPCG(w.Seed, h))
}

// Stop stops the stack.
func (w *World) Stop() {
	if w.Watcher != nil {
		w.Watcher.stop()
	}
	w.mu.Lock()
	extra := w.extra
	w.extra = nil
	w.mu.Unlock()
	for _, p := range extra {
		_ = p.Stop(10 * time.Second)
	}
	if w.Stack != nil {
		start := time.Now()
		// The processes' graceful shutdown proves nothing at this point: kill them, so that the
		// stack's stop only waits for the in-process parts.
		for _, p := range []*harness.Process{w.Stack.Manager, w.Stack.Webhook, w.Stack.CAPI} {
			if p != nil {
				p.Kill()
			}
		}
		w.Stack.Stop()
		w.logf("stack stopped in %s", time.Since(start).Round(100*time.Millisecond))
	}
}

// LastLogLine returns the last line of the stack manager's log that contains every one of
// words (shortened), for violation messages.
func (w *World) LastLogLine(words ...string) string {
	m := w.Stack.Manager
	if m == nil {
		return ""
	}
	lines := strings.Split(m.Logs(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		ok := true
		for _, wd := range words {
			if !strings.Contains(lines[i], wd) {
				ok = false
				break
			}
		}
		if ok {
			l := lines[i]
			if len(l) > 500 {
				l = l[:500] + "..."
			}
			return l
		}
	}
	return "(nothing)"
}

// Processes returns every manager and webhook process started so far.
func (w *World) Processes() []*harness.Process {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*harness.Process(nil), w.processes...)
}

// StartManager starts another manager process with the suite's flags plus extra ones (a later
// flag wins), registering it for I7. It does not replace Stack.Manager.
func (w *World) StartManager(ctx context.Context, extra ...string) (*harness.Process, string, error) {
	w.mu.Lock()
	w.managerN++
	name := fmt.Sprintf("manager-%d", w.managerN)
	w.mu.Unlock()
	args := append([]string(nil), ManagerFlags...)
	if w.managerKubeconfig != "" {
		args = append(args, "--kubeconfig="+w.managerKubeconfig)
	}
	p, addr, err := w.Stack.StartManager(ctx, name, append(args, extra...))
	if p != nil {
		w.mu.Lock()
		w.processes = append(w.processes, p)
		w.mu.Unlock()
	}
	return p, addr, err
}

// ReplaceManager stops (SIGTERM) the stack's manager, if it runs, and starts a new one with
// extra flags as Stack.Manager.
func (w *World) ReplaceManager(ctx context.Context, extra ...string) error {
	if m := w.Stack.Manager; m != nil {
		if exited, _ := m.Exited(); !exited {
			_ = m.Stop(20 * time.Second)
		}
	}
	p, addr, err := w.StartManager(ctx, extra...)
	if err != nil {
		return err
	}
	w.Stack.Manager, w.Stack.ManagerMetricsAddr = p, addr
	return nil
}

// Signal sends sig to a process (SIGKILL, SIGTERM, SIGSTOP, SIGCONT).
func Signal(p *harness.Process, sig syscall.Signal) error {
	if err := syscall.Kill(p.PID(), sig); err != nil {
		return fmt.Errorf("sending %s to %s (%d): %w", sig, p.Name, p.PID(), err)
	}
	return nil
}

// WaitExited waits until p exited.
func WaitExited(ctx context.Context, p *harness.Process, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if exited, _ := p.Exited(); exited {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not exit within %s", p.Name, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StopWebhook stops the webhook (SIGTERM).
func (w *World) StopWebhook() error {
	return w.Stack.Webhook.Stop(10 * time.Second)
}

// StartWebhook starts the webhook again after StopWebhook.
func (w *World) StartWebhook(ctx context.Context) error {
	if err := w.Stack.StartWebhook(ctx, filepath.Join(w.WorkDir, "bin", "webhook")); err != nil {
		return err
	}
	w.mu.Lock()
	w.processes = append(w.processes, w.Stack.Webhook)
	w.mu.Unlock()
	return nil
}

// addProcess registers processes whose logs I7 reads.
func (w *World) addProcess(ps ...*harness.Process) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.processes = append(w.processes, ps...)
}

// addExtra registers a manager the world must stop at the end.
func (w *World) addExtra(p *harness.Process) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.extra = append(w.extra, p)
}

// WaitProviderReady waits until the OVirtProvider is Ready.
func (w *World) WaitProviderReady(ctx context.Context, d time.Duration) error {
	return poll(ctx, d, 200*time.Millisecond, func() (bool, error) {
		p := &infrav1.OVirtProvider{}
		if err := w.C.Get(ctx, client.ObjectKey{Name: ProviderName}, p); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return conditions.IsTrue(p, infrav1.ReadyCondition), nil
	})
}

// UpdateSecretPassword writes a new password into the credentials Secret (creating it when
// missing).
func (w *World) UpdateSecretPassword(ctx context.Context, password string) error {
	sec := &corev1.Secret{}
	err := w.C.Get(ctx, client.ObjectKey{Namespace: CredentialsNamespace, Name: SecretName}, sec)
	if apierrors.IsNotFound(err) {
		return w.C.Create(ctx, harness.CredentialsSecret(CredentialsNamespace, SecretName, w.Username, password))
	}
	if err != nil {
		return err
	}
	base := sec.DeepCopy()
	sec.Data = map[string][]byte{"username": []byte(w.Username), "password": []byte(password)}
	return w.C.Patch(ctx, sec, client.MergeFrom(base))
}

// RotatePassword changes the Engine's password (SetCredentials) and plants it as a sentinel;
// the Secret keeps the old one until UpdateSecretPassword.
func (w *World) RotatePassword(r *rand.Rand) string {
	pw := fmt.Sprintf("chaos-engine-pw-%d-%08x", w.Seed, r.Uint32())
	w.Watcher.AddSentinel(pw, "the rotated Engine password")
	w.Sim.SetCredentials(w.Username, pw)
	w.mu.Lock()
	w.Password = pw
	w.mu.Unlock()
	return pw
}

// OutOfBand returns an oVirt client on the simulator's own (not observed) listener: what an
// administrator or another tool does behind the manager's back. The caller closes it.
func (w *World) OutOfBand(ctx context.Context) (ovirt.Client, func(), error) {
	f := sdk.NewFactory(sdk.Options{Timeout: 10 * time.Second})
	w.mu.Lock()
	pw := w.Password
	w.mu.Unlock()
	c, err := f.ForProvider(ctx, ovirt.Config{Provider: "out-of-band", URL: w.Sim.URL(),
		Credentials: ovirt.Credentials{Username: w.Username, Password: pw}, TLS: ovirt.TLS{CAPEM: w.Sim.CAPEM()}})
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("connecting out of band: %w", err)
	}
	return c, f.Close, nil
}

// ManagerMetrics scrapes the stack manager's /metrics (as a Prometheus with a token would).
func (w *World) ManagerMetrics(ctx context.Context) (string, error) {
	return w.scrape(ctx, w.Stack.ManagerMetricsAddr)
}

// WebhookMetrics scrapes the webhook's /metrics.
func (w *World) WebhookMetrics(ctx context.Context) (string, error) {
	return w.scrape(ctx, w.Stack.WebhookMetricsAddr)
}

func (w *World) scrape(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+w.metricsToken)
	// The metrics endpoint serves a certificate it made itself at start.
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // self-signed test endpoint
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("scraping %s: %w", addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("scraping %s: %s", addr, resp.Status)
	}
	return string(b), nil
}

// MetricValue returns the value of an unlabelled sample in a /metrics text.
func MetricValue(text, name string) (float64, bool) {
	for _, l := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(l, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// OpenFDs counts the open file descriptors of a process.
func OpenFDs(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the file descriptors of %d: %w", pid, err)
	}
	return len(ents), nil
}

// poll calls check every interval until it returns true, an error, or d passes.
func poll(ctx context.Context, d, interval time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(d)
	var last error
	for {
		ok, err := check()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("not done within %s: %w", d, last)
			}
			return fmt.Errorf("not done within %s", d)
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		case <-time.After(interval):
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }
