package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"golang.org/x/sync/errgroup"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/ovirtsim"
)

// TestProcessesNeverRaceForAPort starts and stops the processes a stack runs (the simulator,
// the webhook and the manager) in a loop, several at a time, the way the suite's packages do
// in parallel: every start must come up on its addresses (no "address already in use"), and no
// two live processes may ever share an address. HARNESS_LOOP_STARTS sets the number of starts
// (default 200: half of them simulators, a quarter each webhooks and managers),
// HARNESS_LOOP_PARALLEL how many run at once (default 8).
func TestProcessesNeverRaceForAPort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hundreds of processes")
	}
	ctrllog.SetLogger(logr.Discard())
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	starts, parallel := envCount(t, "HARNESS_LOOP_STARTS", 200), envCount(t, "HARNESS_LOOP_PARALLEL", 8)

	dir := t.TempDir()
	s, err := StartStack(ctx, StackOptions{WorkDir: dir, WithoutManager: true, WithoutCAPI: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Stop()
	root, err := envtest.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	simBin, err := buildPackage(ctx, root, filepath.Join(dir, "bin", "ovirtsim"), "./test/ovirtsim/cmd/ovirtsim")
	g.Expect(err).NotTo(HaveOccurred())
	seed, err := json.Marshal(ovirtsim.DemoSeed())
	g.Expect(err).NotTo(HaveOccurred())
	seedPath := filepath.Join(dir, "seed.json")
	g.Expect(os.WriteFile(seedPath, seed, 0o600)).To(Succeed())
	webhookBin := filepath.Join(dir, "bin", "webhook")
	certDir := s.Mgmt.Env.WebhookInstallOptions.LocalServingCertDir

	live := &liveAddresses{owner: map[string]string{}}
	grp, gctx := errgroup.WithContext(ctx)
	grp.SetLimit(parallel)
	for i := range starts {
		grp.Go(func() error {
			name := fmt.Sprintf("loop-%d", i)
			var p *Process
			var addrs []string
			var err error
			switch i % 4 {
			case 0, 1:
				var adminHost string
				if p, _, adminHost, _, err = startSimulatorProcess(gctx, name, simBin, seedPath, dir); err == nil {
					addrs = []string{adminHost}
				}
			case 2:
				admission, herr := newHeldPort(false)
				if herr != nil {
					return herr
				}
				defer admission.close()
				var metrics string
				if p, metrics, err = startBinary(gctx, binaryStart{
					name: name, bin: webhookBin, args: []string{"--kubeconfig=" + s.KubeconfigPath, "--cert-dir=" + certDir},
					logPath: filepath.Join(dir, "logs", name+".log"), admission: admission,
				}); err == nil {
					addrs = []string{fmt.Sprintf("127.0.0.1:%d", admission.port()), metrics}
				}
			case 3:
				var metrics string
				if p, metrics, err = startBinary(gctx, binaryStart{
					name: name, bin: s.ManagerBin, args: []string{"--kubeconfig=" + s.KubeconfigPath, "--credentials-namespace=capov-system"},
					env: []string{"POD_NAMESPACE=capov-system"}, logPath: filepath.Join(dir, "logs", name+".log"),
				}); err == nil {
					addrs = []string{metrics}
				}
			}
			if p != nil {
				defer func() { _ = p.Stop(30 * time.Second) }()
			}
			if err != nil {
				return fmt.Errorf("start %d: %w", i, err)
			}
			if err := live.add(name, addrs); err != nil {
				return err
			}
			defer live.remove(addrs)
			if err := p.Stop(30 * time.Second); err != nil {
				return fmt.Errorf("start %d: stopping %s: %w\n%s", i, name, err, Tail(p.Logs(), 20))
			}
			return nil
		})
	}
	g.Expect(grp.Wait()).To(Succeed())
	g.Expect(live.max).To(BeNumerically(">", 1), "processes must have run at the same time")
	t.Logf("%d starts, up to %d processes at once, %d addresses at once", starts, parallel, live.max)
}

// liveAddresses are the addresses of the processes running now.
type liveAddresses struct {
	mu    sync.Mutex
	owner map[string]string
	max   int
}

func (l *liveAddresses) add(name string, addrs []string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range addrs {
		if a == "" {
			return fmt.Errorf("%s reported no address", name)
		}
		if other, ok := l.owner[a]; ok {
			return fmt.Errorf("%s and %s both have %s", name, other, a)
		}
		l.owner[a] = name
	}
	l.max = max(l.max, len(l.owner))
	return nil
}

func (l *liveAddresses) remove(addrs []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range addrs {
		delete(l.owner, a)
	}
}

func envCount(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
