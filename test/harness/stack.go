package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capov/capov/test/capi"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/ovirtsim"
)

// StackOptions select how the whole provider is started.
type StackOptions struct {
	// WorkDir holds binaries, kubeconfigs, certificates and logs (created if missing).
	WorkDir string
	// Out receives progress lines (nil: discarded).
	Out io.Writer
	// Seed is the simulator inventory (nil: ovirtsim.DemoSeed()).
	Seed *ovirtsim.Seed
	// SimulatorAsProcess runs the simulator as its own process (the demo) instead of in the
	// test process (where tests inspect it directly).
	SimulatorAsProcess bool
	// CAPIAsProcess runs Cluster API's core reconcilers as a process instead of in-process.
	CAPIAsProcess bool
	// WithoutCAPI does not start Cluster API's core reconcilers.
	WithoutCAPI bool
	// WithoutManager does not start the manager (StartManager starts one later).
	WithoutManager bool
	// ManagerArgs and WebhookArgs are appended to the binaries' flags.
	ManagerArgs, WebhookArgs []string
	// Log is the logger of in-process components.
	Log logr.Logger
	// Binaries are prebuilt "manager" and "webhook" binaries to run instead of building this
	// repository's (the upgrade test runs a previous release's).
	Binaries map[string]string
	// WebhookManifests is the admission webhook configuration registered in the API server
	// (default: config/webhook/manifests.yaml).
	WebhookManifests string
	// WithIPAM runs Cluster API's in-cluster IPAM provider (hack/ipam-provider.sh builds it)
	// with its CRDs, for InClusterIPPools and GlobalInClusterIPPools.
	WithIPAM bool
	// RealGuests: the simulator (a process, with SimulatorArgs naming the guests' template and
	// bridge) boots a real node for every VM that powers on, so there is no workload control
	// plane and no kubelet stand-in: the workload clusters are the ones kubeadm builds.
	RealGuests bool
	// SimulatorArgs are appended to the simulator process's flags.
	SimulatorArgs []string
	// KubeadmProviders also runs Cluster API's kubeadm bootstrap and control-plane providers
	// (in-process) and installs their CRDs.
	KubeadmProviders bool
	// InstallCRDs, when set, installs the CAPOV CRDs instead of the harness (which then starts
	// the control plane without them); it runs before the webhook and manager start.
	InstallCRDs func(ctx context.Context, env *envtest.Environment) error
	// GarbageCollector runs Kubernetes' garbage collector against the management cluster
	// (kube-controller-manager, hack/gc-assets.sh), as every real cluster has: dependents of a
	// deleted owner are deleted.
	GarbageCollector bool
	// AuditWrites makes the management API server log every write to OVirtMachines, Machines
	// and IP address claims to logs/audit.log (Stack.AuditLog; envtest.AuditEvents reads it).
	AuditWrites bool
}

// Stack is a running CAPOV installation: management and workload control planes, the oVirt
// simulator, the webhook and manager binaries, Cluster API's core reconcilers and a kubelet.
type Stack struct {
	// Mgmt is the management cluster; Workload the workload cluster its Nodes register in.
	Mgmt, Workload *envtest.Environment
	// Sim is the in-process simulator (nil when it runs as a process).
	Sim *ovirtsim.Simulator
	// SimURL, SimUsername, SimPassword and SimCAPEM reach the simulator.
	SimURL, SimUsername, SimPassword string
	SimCAPEM                         []byte
	// SimAdminURL is the base URL of the simulator's /sim admin endpoints.
	SimAdminURL string
	// Manager, Webhook and CAPI are the processes (CAPI is nil when in-process).
	Manager, Webhook, CAPI, SimProcess *Process
	// IPAM is the in-cluster IPAM provider (StackOptions.WithIPAM).
	IPAM *Process
	// GC is the garbage collector (StackOptions.GarbageCollector).
	GC *Process
	// AuditLog is the management API server's audit log (StackOptions.AuditWrites), or "".
	AuditLog string
	// KubeconfigPath reaches the management cluster; WorkloadKubeconfig is the workload's.
	KubeconfigPath     string
	WorkloadKubeconfig []byte
	// ManagerMetricsAddr and WebhookMetricsAddr are the HTTPS metrics endpoints.
	ManagerMetricsAddr, WebhookMetricsAddr string
	// WebhookAddr is the admission endpoint (host:port).
	WebhookAddr string
	// ManagerBin is the manager binary (to start more managers).
	ManagerBin string
	// ManagerEnv is added to the environment of the managers StartManager starts.
	ManagerEnv []string
	// webhookArgs are the flags every webhook start shares; webhookPort is the admission port
	// registered in the API server, held for the stack's lifetime.
	webhookArgs   []string
	webhookPort   *heldPort
	webhookStarts int

	opts    StackOptions
	cancels []context.CancelFunc
	done    []chan struct{}
}

func (s *Stack) say(format string, args ...any) {
	if s.opts.Out != nil {
		fmt.Fprintf(s.opts.Out, format+"\n", args...)
	}
}

// StartStack starts everything and returns once the webhook serves and the manager runs.
func StartStack(ctx context.Context, opts StackOptions) (_ *Stack, reterr error) {
	if opts.Seed == nil {
		opts.Seed = ovirtsim.DemoSeed()
	}
	s := &Stack{opts: opts}
	defer func() {
		if reterr != nil {
			s.Stop()
		}
	}()
	if err := os.MkdirAll(filepath.Join(opts.WorkDir, "logs"), 0o755); err != nil {
		return nil, err
	}
	root, err := envtest.RepoRoot()
	if err != nil {
		return nil, err
	}

	s.say("Building the manager, webhook and helper binaries")
	bins := map[string]string{}
	for _, name := range []string{"manager", "webhook"} {
		if prebuilt := opts.Binaries[name]; prebuilt != "" {
			bins[name] = prebuilt
			continue
		}
		if bins[name], err = BuildBinary(ctx, root, filepath.Join(opts.WorkDir, "bin"), name); err != nil {
			return nil, err
		}
	}
	s.ManagerBin = bins["manager"]
	for name, pkg := range map[string]string{"ovirtsim": "./test/ovirtsim/cmd/ovirtsim", "capi-core": "./test/capi/cmd/capi-core"} {
		if (name == "ovirtsim" && !opts.SimulatorAsProcess) || (name == "capi-core" && (!opts.CAPIAsProcess || opts.WithoutCAPI)) {
			continue
		}
		if bins[name], err = buildPackage(ctx, root, filepath.Join(opts.WorkDir, "bin", name), pkg); err != nil {
			return nil, err
		}
	}

	s.say("Starting the management cluster (kube-apiserver + etcd) with the CAPOV, Cluster API and webhook configuration")
	if s.webhookPort, err = newHeldPort(opts.Binaries["webhook"] != ""); err != nil {
		return nil, err
	}
	webhookPort := s.webhookPort.port()
	manifests := opts.WebhookManifests
	if manifests == "" {
		manifests = filepath.Join(root, "config", "webhook", "manifests.yaml")
	}
	if opts.AuditWrites {
		s.AuditLog = filepath.Join(opts.WorkDir, "logs", "audit.log")
	}
	if s.Mgmt, err = envtest.Start(ctx, envtest.Options{WithoutOurCRDs: opts.InstallCRDs != nil, WithKubeadmCRDs: opts.KubeadmProviders, AuditLogPath: s.AuditLog, Webhooks: crenvtest.WebhookInstallOptions{
		Paths:            []string{manifests},
		LocalServingHost: "127.0.0.1",
		LocalServingPort: webhookPort,
	}}); err != nil {
		return nil, err
	}
	if opts.InstallCRDs != nil {
		if err := opts.InstallCRDs(ctx, s.Mgmt); err != nil {
			return nil, fmt.Errorf("installing the CAPOV CRDs: %w", err)
		}
	}
	// envtest generated a CA and a serving certificate for 127.0.0.1 and registered the
	// webhook configurations with that CA; the webhook serves its certificate.
	certDir := s.Mgmt.Env.WebhookInstallOptions.LocalServingCertDir
	if !opts.RealGuests {
		s.say("Starting the workload cluster (a second kube-apiserver + etcd)")
		if s.Workload, err = envtest.Start(ctx, envtest.Options{WithoutOurCRDs: true, WithoutCAPICRDs: true}); err != nil {
			return nil, err
		}
	}
	mgmtKubeconfig, err := s.Mgmt.Kubeconfig("capov-management")
	if err != nil {
		return nil, err
	}
	s.KubeconfigPath = filepath.Join(opts.WorkDir, "kubeconfig")
	if err := os.WriteFile(s.KubeconfigPath, mgmtKubeconfig, 0o600); err != nil {
		return nil, err
	}
	if s.Workload != nil {
		if s.WorkloadKubeconfig, err = s.Workload.Kubeconfig("workload"); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(opts.WorkDir, "workload.kubeconfig"), s.WorkloadKubeconfig, 0o600); err != nil {
			return nil, err
		}
	}

	if err := s.startSimulator(ctx, bins["ovirtsim"]); err != nil {
		return nil, err
	}

	s.say("Starting the webhook server on 127.0.0.1:%d", webhookPort)
	s.WebhookAddr = fmt.Sprintf("127.0.0.1:%d", webhookPort)
	s.webhookArgs = append([]string{"--kubeconfig=" + s.KubeconfigPath, "--cert-dir=" + certDir}, opts.WebhookArgs...)
	if err := s.StartWebhook(ctx, bins["webhook"]); err != nil {
		return nil, err
	}

	if !opts.WithoutManager {
		s.say("Starting the CAPOV manager")
		if s.Manager, s.ManagerMetricsAddr, err = s.StartManager(ctx, "manager", opts.ManagerArgs); err != nil {
			return nil, err
		}
	}

	if !opts.WithoutCAPI {
		s.say("Starting Cluster API's core reconcilers")
		if opts.CAPIAsProcess {
			if s.CAPI, err = Start("capi-core", bins["capi-core"], []string{"--kubeconfig=" + s.KubeconfigPath},
				nil, filepath.Join(opts.WorkDir, "logs", "capi-core.log")); err != nil {
				return nil, err
			}
		} else {
			s.goRun(func(ctx context.Context) {
				if err := capi.Run(ctx, s.Mgmt.Config, opts.Log.WithName("capi"), capi.Options{Kubeadm: opts.KubeadmProviders}); err != nil && ctx.Err() == nil {
					opts.Log.Error(err, "Cluster API core reconcilers stopped")
				}
			})
		}
	}

	if opts.GarbageCollector {
		s.say("Starting Kubernetes' garbage collector (kube-controller-manager)")
		if err := s.startGarbageCollector(ctx, root); err != nil {
			return nil, err
		}
	}
	if opts.WithIPAM {
		s.say("Starting Cluster API's in-cluster IPAM provider")
		if err := s.startIPAMProvider(ctx, root); err != nil {
			return nil, err
		}
	}

	if s.Workload != nil {
		s.say("Starting the kubelet stand-in: it registers a Node in the workload cluster for every VM that is up")
		k := &Kubelet{Workload: s.Workload.Client, VMs: s.listVMs}
		if !opts.WithoutCAPI {
			k.KubeletVersion = s.machineVersion
		}
		s.goRun(k.Run)
	}
	return s, nil
}

// StartManager starts a manager process with the stack's kubeconfig, a health endpoint it
// waits on and a metrics endpoint whose address it returns; args are appended to the flags.
func (s *Stack) StartManager(ctx context.Context, name string, args []string) (*Process, string, error) {
	return startBinary(ctx, binaryStart{
		name: name, bin: s.ManagerBin, legacy: s.ManagerBin == s.opts.Binaries["manager"],
		args: append([]string{"--kubeconfig=" + s.KubeconfigPath, "--credentials-namespace=capov-system"}, args...),
		env:  append([]string{"POD_NAMESPACE=capov-system"}, s.ManagerEnv...), logPath: filepath.Join(s.opts.WorkDir, "logs", name+".log"),
	})
}

// StartWebhook starts the webhook binary bin with the stack's webhook flags (admission port,
// certificate, health and metrics endpoints) and waits until it is ready. The previous webhook
// process must have been stopped.
func (s *Stack) StartWebhook(ctx context.Context, bin string) error {
	s.webhookStarts++
	logName := "webhook.log"
	if s.webhookStarts > 1 {
		logName = fmt.Sprintf("webhook-%d.log", s.webhookStarts)
	}
	p, metrics, err := startBinary(ctx, binaryStart{
		name: "webhook", bin: bin, legacy: bin == s.opts.Binaries["webhook"], args: s.webhookArgs,
		logPath: filepath.Join(s.opts.WorkDir, "logs", logName), admission: s.webhookPort,
	})
	if p != nil {
		s.Webhook = p
	}
	if err != nil {
		return err
	}
	s.WebhookMetricsAddr = metrics
	return nil
}

// binaryStart is one start of a CAPOV binary (manager or webhook).
type binaryStart struct {
	name, bin string
	// legacy: a previous release's binary, which cannot take a listener over and does not
	// report its metrics address (that address stays empty).
	legacy    bool
	args, env []string
	logPath   string
	admission *heldPort // the webhook's admission port
}

// startBinary starts a CAPOV binary with its health endpoint on a listener the harness hands
// over (a legacy binary binds port 0 and reports it) and its metrics endpoint on port 0, waits
// until it is ready and returns the metrics address it reported.
func startBinary(ctx context.Context, b binaryStart) (*Process, string, error) {
	args := append([]string{"--metrics-bind-address=127.0.0.1:0"}, b.args...)
	var handovers []Handover
	var health *net.TCPListener
	if b.legacy {
		args = append(args, "--health-probe-bind-address=127.0.0.1:0")
	} else {
		var err error
		if health, err = Listen(); err != nil {
			return nil, "", err
		}
		defer health.Close() // the process has its own copy
		args = append(args, "--health-probe-bind-address="+health.Addr().String())
		handovers = append(handovers, Handover{Name: "health", Listener: health})
	}
	if b.admission != nil {
		args = append(args, "--webhook-port="+strconv.Itoa(b.admission.port()))
		if err := b.admission.stopRefusing(); err != nil {
			return nil, "", err
		}
		if b.admission.ln != nil && !b.legacy {
			handovers = append(handovers, Handover{Name: "webhook", Listener: b.admission.ln})
		}
	}
	p, err := StartWith(b.name, b.bin, args, b.env, b.logPath, handovers...)
	if err != nil {
		return nil, "", err
	}
	if b.admission != nil {
		// Once this webhook is gone, its port refuses connections until the next one starts.
		b.admission.serving(p)
	}
	healthAddr := ""
	if health != nil {
		healthAddr = health.Addr().String()
	} else if healthAddr, err = ReportedServerAddress(ctx, p, "health probe"); err != nil {
		_ = p.Stop(10 * time.Second)
		return p, "", err
	}
	if err := WaitReady(ctx, p, "http://"+healthAddr+"/readyz"); err != nil {
		_ = p.Stop(10 * time.Second)
		return p, "", err
	}
	if b.legacy {
		return p, "", nil
	}
	metrics, err := ReportedAddress(ctx, p, "metrics")
	if err != nil {
		_ = p.Stop(10 * time.Second)
		return p, "", err
	}
	return p, metrics, nil
}

// newHeldPort opens the admission port of a stack: a held listener, or for a legacy webhook
// binary (which binds it itself) a reserved port.
func newHeldPort(legacy bool) (*heldPort, error) {
	if legacy {
		r, err := ReservePort()
		if err != nil {
			return nil, err
		}
		return &heldPort{reservation: r}, nil
	}
	ln, err := Listen()
	if err != nil {
		return nil, err
	}
	return &heldPort{ln: ln}, nil
}

func (s *Stack) goRun(f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.cancels = append(s.cancels, cancel)
	s.done = append(s.done, done)
	go func() {
		defer close(done)
		f(ctx)
	}()
}

func (s *Stack) startSimulator(ctx context.Context, bin string) error {
	if !s.opts.SimulatorAsProcess {
		sim, err := ovirtsim.NewBuilder().WithSeed(s.opts.Seed).Build()
		if err != nil {
			return fmt.Errorf("starting the oVirt simulator: %w", err)
		}
		s.Sim = sim
		s.SimURL, s.SimUsername, s.SimPassword, s.SimCAPEM = sim.URL(), sim.Username(), sim.Password(), sim.CAPEM()
		s.SimAdminURL = "https://" + sim.Addr()
		s.say("oVirt simulator at %s", s.SimURL)
		return nil
	}
	seedPath := filepath.Join(s.opts.WorkDir, "ovirtsim-seed.json")
	b, err := json.MarshalIndent(s.opts.Seed, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(seedPath, b, 0o600); err != nil {
		return err
	}
	var adminHost string
	if s.SimProcess, s.SimURL, adminHost, s.SimCAPEM, err = startSimulatorProcess(ctx, "ovirtsim", bin, seedPath, s.opts.WorkDir, s.opts.SimulatorArgs...); err != nil {
		return err
	}
	s.SimUsername, s.SimPassword = s.opts.Seed.Username, s.opts.Seed.Password
	if s.SimUsername == "" {
		s.SimUsername, s.SimPassword = "admin@internal", "secret"
	}
	s.SimAdminURL = "https://" + adminHost
	s.say("oVirt simulator (process %d) at %s", s.SimProcess.PID(), s.SimURL)
	return nil
}

// startSimulatorProcess starts the simulator binary on a port it binds itself (port 0) and
// returns once its --url-file reports where: the process, its API URL, the host:port of its
// admin endpoints and its CA. Its files are <name>-ca.pem, <name>-url and logs/<name>.log in dir.
func startSimulatorProcess(ctx context.Context, name, bin, seedPath, dir string, extra ...string) (p *Process, apiURL, adminHost string, caPEM []byte, err error) {
	caPath := filepath.Join(dir, name+"-ca.pem")
	urlPath := filepath.Join(dir, name+"-url")
	if err := os.Remove(urlPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, "", "", nil, err
	}
	if p, err = Start(name, bin, append([]string{
		"--listen=127.0.0.1:0", "--seed=" + seedPath, "--ca-out=" + caPath, "--url-file=" + urlPath,
	}, extra...), nil, filepath.Join(dir, "logs", name+".log")); err != nil {
		return nil, "", "", nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if u, err := os.ReadFile(urlPath); err == nil && len(u) > 0 {
			apiURL = strings.TrimSpace(string(u))
			break
		}
		if exited, err := p.Exited(); exited {
			return p, "", "", nil, fmt.Errorf("the oVirt simulator exited: %w\n%s", err, Tail(p.Logs(), 20))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return p, "", "", nil, errors.New("the oVirt simulator did not start in 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if caPEM, err = os.ReadFile(caPath); err != nil {
		return p, "", "", nil, err
	}
	u, err := url.Parse(apiURL)
	if err != nil {
		return p, "", "", nil, fmt.Errorf("the oVirt simulator reported the URL %q: %w", apiURL, err)
	}
	if u.Host == "" {
		return p, "", "", nil, fmt.Errorf("the oVirt simulator reported the URL %q, which has no host", apiURL)
	}
	return p, apiURL, u.Host, caPEM, nil
}

// listVMs returns the simulator's VMs, in-process or through its admin API.
func (s *Stack) listVMs() []VMInfo {
	var vms []ovirtsim.VMState
	if s.Sim != nil {
		vms = s.Sim.VMs()
	} else {
		st, err := s.SimState(context.Background())
		if err != nil {
			return nil
		}
		vms = st.VMs
	}
	out := make([]VMInfo, 0, len(vms))
	for _, vm := range vms {
		// A kubelet reports the addresses of the guest's own interfaces, whether or not a guest
		// agent reports them to oVirt.
		var ips []string
		for _, n := range vm.NICs {
			if n.Plugged && n.IP != "" {
				ips = append(ips, n.IP)
			}
		}
		out = append(out, VMInfo{ID: vm.ID, Name: vm.Name, Status: vm.Status, IPs: ips})
	}
	return out
}

// SimState reads the simulator's state dump.
func (s *Stack) SimState(ctx context.Context) (*ovirtsim.State, error) {
	if s.Sim != nil {
		st := s.Sim.Dump()
		return &st, nil
	}
	st := &ovirtsim.State{}
	if err := s.simAdmin(ctx, http.MethodGet, "/sim/state", nil, st); err != nil {
		return nil, err
	}
	return st, nil
}

// simAdmin calls an admin endpoint of the simulator.
func (s *Stack) simAdmin(ctx context.Context, method, path string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, s.SimAdminURL+path, body)
	if err != nil {
		return err
	}
	resp, err := simHTTPClient(s.SimCAPEM).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// MgmtClient is a client of the management cluster.
func (s *Stack) MgmtClient() client.Client { return s.Mgmt.Client }

// Stop stops everything in reverse order.
func (s *Stack) Stop() {
	for _, c := range s.cancels {
		c()
	}
	for _, d := range s.done {
		<-d
	}
	for _, p := range []*Process{s.IPAM, s.GC, s.CAPI, s.Manager, s.Webhook, s.SimProcess} {
		if p != nil {
			if err := p.Stop(30 * time.Second); err != nil {
				s.say("%s: %v", p.Name, err)
			}
		}
	}
	if s.Sim != nil {
		s.Sim.Close()
	}
	for _, e := range []*envtest.Environment{s.Workload, s.Mgmt} {
		if e != nil {
			_ = e.Stop()
		}
	}
	if s.webhookPort != nil {
		s.webhookPort.close()
	}
}

// WaitReady waits (at most 90 s) until url answers 200, failing at once if the process exits;
// the error carries the tail of its log.
func WaitReady(ctx context.Context, p *Process, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	err := WaitForHTTP(ctx, func(ctx context.Context) (int, error) {
		if exited, err := p.Exited(); exited {
			return 0, fmt.Errorf("%w: %s exited: %w", ErrGaveUp, p.Name, err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	})
	if err != nil {
		return fmt.Errorf("%s did not become ready: %w\n%s", p.Name, err, Tail(p.Logs(), 30))
	}
	return nil
}

// machineVersion is the Kubernetes version of the Machine whose infrastructure is the VM (VMs
// are named after their OVirtMachines), which the guest's image would carry; a VM of no
// Machine runs DefaultKubeletVersion.
func (s *Stack) machineVersion(ctx context.Context, vm VMInfo) (string, error) {
	machines := &clusterv1.MachineList{}
	if err := s.Mgmt.Client.List(ctx, machines); err != nil {
		return "", fmt.Errorf("listing Machines: %w", err)
	}
	for _, m := range machines.Items {
		if m.Spec.InfrastructureRef.Name == vm.Name && m.Spec.Version != "" {
			return m.Spec.Version, nil
		}
	}
	return DefaultKubeletVersion, nil
}
