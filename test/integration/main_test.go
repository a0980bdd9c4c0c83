package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// The suite's shared world. Each test works in namespaces and on objects of its own.
var (
	env            *envtest.Environment
	k8s            client.Client
	sim            *ovirtsim.Simulator
	managerBin     string
	kubeconfig     []byte
	kubeconfigPath string
	workDir        string
)

const (
	credentialsNamespace = "capov-system"
	credentialsSecret    = "sim-credentials"
	// mainFilter is the watch filter of the suite's main manager; tests that start managers
	// of their own use other values so that managers never compete for an object.
	mainFilter   = "main"
	mainProvider = "sim"
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	var err error
	workDir, err = os.MkdirTemp("", "capov-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if os.Getenv("CAPOV_KEEP_LOGS") == "" {
			_ = os.RemoveAll(workDir)
		} else {
			fmt.Fprintf(os.Stderr, "integration: logs kept in %s\n", workDir)
		}
	}()

	env, err = envtest.Start(ctx, envtest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client

	root, err := envtest.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if managerBin, err = harness.BuildBinary(ctx, root, filepath.Join(workDir, "bin"), "manager"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if kubeconfig, err = env.Kubeconfig("envtest"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubeconfigPath = filepath.Join(workDir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	sim, err = newSimulator()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sim.Close()

	if err := setupProvider(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := startManager("main", mainFilter)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	stopGateManagers()
	if err := mgr.Stop(30 * time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "integration: main manager: %v\n", err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "integration: last lines of the main manager log:\n%s\n", harness.Tail(mgr.Logs(), 60))
	}
	return code
}

// newSimulator builds the oVirt inventory the tests use.
func newSimulator() (*ovirtsim.Simulator, error) {
	b := ovirtsim.NewBuilder()
	for _, c := range placementClusters() {
		b = b.WithCluster(c)
	}
	for _, c := range gpuClusters() {
		b = b.WithCluster(c)
	}
	return b.
		WithCluster(ovirtsim.Cluster{Name: "Default", Networks: []string{"ovirtmgmt", "storage"}}).
		WithCluster(ovirtsim.Cluster{Name: "Secondary", DataCenter: "DC2", Networks: []string{"ovirtmgmt"}}).
		WithStorageDomain(ovirtsim.StorageDomain{Name: "data", FreeGB: 10000}).
		WithStorageDomain(ovirtsim.StorageDomain{Name: "fast", FreeGB: 5000}).
		WithStorageDomain(ovirtsim.StorageDomain{Name: "offline", FreeGB: 5000, Status: "maintenance"}).
		// Block storage: the Engine refuses raw thin disks there.
		WithStorageDomain(ovirtsim.StorageDomain{Name: "san", FreeGB: 5000, StorageType: "iscsi"}).
		WithTemplate(ovirtsim.Template{Name: "rhcos-4.14", Cluster: "Default", OSType: "rhcos_x64", Sockets: 1, Cores: 2, Threads: 1, MemoryMB: 4096,
			Disks: []ovirtsim.TemplateDisk{{Alias: "rhcos-4.14_Disk1", SizeGB: 16, Format: "cow", StorageDomain: "data", Bootable: true}}}).
		WithTemplate(ovirtsim.Template{Name: "ubuntu-22.04", Cluster: "Default", OSType: "other_linux", Sockets: 1, Cores: 1, Threads: 1, MemoryMB: 2048,
			Disks: []ovirtsim.TemplateDisk{
				{Alias: "ubuntu-22.04_Disk1", SizeGB: 10, Format: "cow", StorageDomain: "data", Bootable: true},
				{Alias: "ubuntu-22.04_Disk2", SizeGB: 5, Format: "cow", StorageDomain: "data"},
			}}).
		WithTemplate(ovirtsim.Template{Name: "rhcos-4.14-replicated", Cluster: "Default", OSType: "rhcos_x64", Sockets: 1, Cores: 2, Threads: 1, MemoryMB: 4096,
			Disks: []ovirtsim.TemplateDisk{{Alias: "rhcos-4.14-replicated_Disk1", SizeGB: 16, Format: "cow", StorageDomain: "data", StorageDomains: []string{"fast"}, Bootable: true}}}).
		WithTemplate(ovirtsim.Template{Name: noAgentTemplate, Cluster: "Default", OSType: "debian_12", Sockets: 1, Cores: 1, Threads: 1, MemoryMB: 1024, NoGuestAgent: true,
			Disks: []ovirtsim.TemplateDisk{{Alias: noAgentTemplate + "_Disk1", SizeGB: 8, Format: "cow", StorageDomain: "data", Bootable: true}}}).
		WithVnicProfile(ovirtsim.VnicProfile{Name: "ovirtmgmt", Network: "ovirtmgmt"}).
		WithVnicProfile(ovirtsim.VnicProfile{Name: "storage", Network: "storage"}).
		WithVnicProfile(ovirtsim.VnicProfile{Name: "zoneb-backend", Network: "zoneb-backend"}).
		WithTimings(ovirtsim.Timings{
			ImageLock: 300 * time.Millisecond, DiskLock: 200 * time.Millisecond,
			WaitForLaunch: 100 * time.Millisecond, PoweringUp: 200 * time.Millisecond, PoweringDown: 200 * time.Millisecond,
			// VDSM keeps a VM without guest agent powering_up for about 60 s; shortened here.
			NoAgentPoweringUp: 2 * time.Second,
		}).
		Build()
}

func setupProvider(ctx context.Context) error {
	if err := k8s.Create(ctx, harness.Namespace(credentialsNamespace)); err != nil {
		return err
	}
	if err := k8s.Create(ctx, harness.CredentialsSecret(credentialsNamespace, credentialsSecret, sim.Username(), sim.Password())); err != nil {
		return err
	}
	p := harness.Provider(mainProvider, sim.URL(), credentialsSecret, sim.CAPEM())
	p.Labels = map[string]string{"cluster.x-k8s.io/watch-filter": mainFilter}
	// The administrators' groups the suite's machines may join by name (spec.affinityGroups).
	p.Spec.AllowedAffinityGroups = []string{"admins-*"}
	return k8s.Create(ctx, p)
}

// startManager runs the manager binary with the suite's fast intervals.
func startManager(name, filter string, extraArgs ...string) (*harness.Process, error) {
	args := append([]string{
		"--kubeconfig=" + kubeconfigPath,
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--watch-filter=" + filter,
		"--credentials-namespace=" + credentialsNamespace,
		"--vm-poll-interval=250ms", "--node-poll-interval=250ms",
		"--retry-interval=1s", "--non-system-disk-retry-interval=1s",
		"--provider-check-interval=2s", "--vm-shutdown-timeout=3s",
		"--ovirt-auth-backoff=30s",
		"--debug",
	}, extraArgs...)
	return harness.Start(name, managerBin, args, nil, filepath.Join(workDir, "logs", name+".log"))
}
