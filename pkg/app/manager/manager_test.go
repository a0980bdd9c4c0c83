package manager

import (
	"bytes"
	"crypto/tls"
	"io"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/controllers/crdmigrator"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
)

func parseFlags(t *testing.T, args ...string) *Options {
	t.Helper()
	opts := NewOptions()
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	return opts
}

func TestMainFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"help prints the flags and exits 0", []string{"--help"}, 0, "--ovirtprovider-concurrency int"},
		{"--version prints the version and exits 0", []string{"--version"}, 0, "manager v0.0.0-dev (commit unknown, built unknown"},
		{"a zero provider concurrency exits 2", []string{"--ovirtprovider-concurrency=0"}, 2, "--ovirtprovider-concurrency must be at least 1"},
		{"a zero cluster concurrency exits 2", []string{"--ovirtcluster-concurrency=0"}, 2, "--ovirtcluster-concurrency must be at least 1"},
		{"a zero template concurrency exits 2", []string{"--ovirtmachinetemplate-concurrency=0"}, 2, "--ovirtmachinetemplate-concurrency must be at least 1"},
		{"a zero remediation concurrency exits 2", []string{"--ovirtremediation-concurrency=0"}, 2, "--ovirtremediation-concurrency must be at least 1"},
		{"a zero ClusterCache concurrency exits 2", []string{"--clustercache-concurrency=0"}, 2, "--clustercache-concurrency must be at least 1"},
		{"a zero reconcile timeout exits 2", []string{"--reconcile-timeout=0"}, 2, "--reconcile-timeout must be positive"},
		{"a zero workload-cluster QPS exits 2", []string{"--clustercache-client-qps=0"}, 2, "--clustercache-client-qps must be positive"},
		{"an unknown TLS version exits 2", []string{"--tls-min-version=VersionTLS99"}, 2, "--tls-min-version"},
		{"an unknown logging format exits 2", []string{"--logging-format=xml"}, 2, "Unsupported log format"},
		{"a negative inventory interval exits 2", []string{"--inventory-interval=-5s"}, 2, "--inventory-interval must not be negative (0 turns the inventory off)"},
		{"an inventory page of 0 exits 2", []string{"--inventory-page-size=0"}, 2, "--inventory-page-size must be between 1 and 1000"},
		{"a negative test grace period exits 2", []string{"--test-orphaned-vms-grace-period=-1s"}, 2, "--test-orphaned-vms-grace-period must not be negative"},
		{"a management-cluster id with a space exits 2", []string{"--management-cluster-id=prod cluster"}, 2,
			"--management-cluster-id may hold only letters, digits, '.', '_' and '-', at most 64 of them"},
		{"an unknown CRD migration phase exits 2 naming the flag and the valid values", []string{"--skip-crd-migration-phases=StorageVersionMigration,All"}, 2,
			`--skip-crd-migration-phases: unknown phase "All"; valid values are StorageVersionMigration, CleanupManagedFields`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var stdout, stderr bytes.Buffer
			g.Expect(Main(tt.args, &stdout, &stderr)).To(Equal(tt.wantCode))
			g.Expect(stdout.String() + stderr.String()).To(ContainSubstring(tt.wantOut))
		})
	}
}

func TestControllerConcurrency(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want map[string]int
	}{
		{"the defaults", nil, map[string]int{
			providerController: 2, clusterController: 2, machineController: 10, machineTemplateController: 1, remediationController: 2,
			clusterCacheController: 10, crdMigratorController: 1,
		}},
		{"each controller has its flag", []string{
			"--ovirtprovider-concurrency=3", "--ovirtcluster-concurrency=4", "--max-concurrent-reconciles=25",
			"--ovirtmachinetemplate-concurrency=5", "--clustercache-concurrency=6", "--ovirtremediation-concurrency=7",
		}, map[string]int{
			providerController: 3, clusterController: 4, machineController: 25, machineTemplateController: 5, clusterCacheController: 6,
			remediationController: 7, crdMigratorController: 1,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := map[string]int{}
			for name, o := range controllerOptions(parseFlags(t, tt.args...)) {
				got[name] = o.MaxConcurrentReconciles
				g.Expect(o.ReconciliationTimeout).To(BeZero(), "%s inherits the manager's timeout", name)
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestManagerOptions(t *testing.T) {
	tests := []struct {
		name           string
		args           []string
		wantTimeout    time.Duration
		wantMinVersion uint16
		wantSuites     []uint16
		wantPprof      string
	}{
		{"Cluster API's defaults: a one-minute reconcile timeout, TLS 1.2, no profiler", nil, time.Minute, tls.VersionTLS12, nil, ""},
		{"the flags", []string{"--reconcile-timeout=90s", "--tls-min-version=VersionTLS13", "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "--profiler-address=localhost:6060"},
			90 * time.Second, tls.VersionTLS13, []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}, "localhost:6060"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			opts := parseFlags(t, tt.args...)
			o, err := managerOptions(opts, NewScheme(), logr.Discard())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(o.Controller.ReconciliationTimeout).To(Equal(tt.wantTimeout))
			g.Expect(o.Controller.RecoverPanic).To(Equal(ptr.To(true)))
			g.Expect(o.PprofBindAddress).To(Equal(tt.wantPprof))
			// The metrics and probe servers are CAPOV's own (options.RunMetrics, ServeProbes):
			// controller-runtime's stay off.
			g.Expect(o.Metrics.BindAddress).To(Equal("0"))
			g.Expect(o.HealthProbeBindAddress).To(Equal("0"))
			metrics, err := opts.MetricsServer()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(metrics.SecureServing).To(BeTrue())
			g.Expect(metrics.BindAddress).To(Equal(":8443"))
			cfg := &tls.Config{}
			for _, f := range metrics.TLSOpts {
				f(cfg)
			}
			g.Expect(cfg.MinVersion).To(Equal(tt.wantMinVersion))
			g.Expect(cfg.CipherSuites).To(Equal(tt.wantSuites))
			g.Expect(cfg.NextProtos).To(Equal([]string{"http/1.1"}), "HTTP/2 is off")
		})
	}
}

func TestClusterCacheClients(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantQPS   float32
		wantBurst int
	}{
		{"Cluster API's defaults", nil, 20, 30},
		{"the flags", []string{"--clustercache-client-qps=50", "--clustercache-client-burst=80", "--kube-api-qps=5"}, 50, 80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o := clusterCacheOptions(parseFlags(t, tt.args...), nil, "capov-manager/v1.2.3 (linux/amd64) capov/1a2b3c4")
			g.Expect(o.Client.QPS).To(Equal(tt.wantQPS))
			g.Expect(o.Client.Burst).To(Equal(tt.wantBurst))
			g.Expect(o.Client.UserAgent).To(Equal("capov-manager/v1.2.3 (linux/amd64) capov/1a2b3c4"))
		})
	}
}

func TestInventoryIntervalDefaultsToTheSyncPeriod(t *testing.T) {
	g := NewWithT(t)
	g.Expect(parseFlags(t).Inventory()).To(Equal(10 * time.Minute))
	g.Expect(parseFlags(t, "--sync-period=3m").Inventory()).To(Equal(3 * time.Minute))
	g.Expect(parseFlags(t, "--sync-period=3m", "--inventory-interval=1m").Inventory()).To(Equal(time.Minute))
	g.Expect(parseFlags(t, "--inventory-interval=0").Inventory()).To(BeZero(), "0 turns it off")
	g.Expect(parseFlags(t, "--management-cluster-id=prod-eu.1_a").ManagementClusterID).To(Equal("prod-eu.1_a"))
}

func TestSkipCRDMigrationPhases(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []crdmigrator.Phase
	}{
		{"both phases run by default", nil, nil},
		{"one phase", []string{"--skip-crd-migration-phases=CleanupManagedFields"}, []crdmigrator.Phase{crdmigrator.CleanupManagedFieldsPhase}},
		{"a comma-separated list", []string{"--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields"},
			[]crdmigrator.Phase{crdmigrator.StorageVersionMigrationPhase, crdmigrator.CleanupManagedFieldsPhase}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := parseFlags(t, tt.args...).CRDMigrationPhasesToSkip()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestTheSchemeServesBothVersions(t *testing.T) {
	g := NewWithT(t)
	s := NewScheme()
	for _, kind := range []string{"OVirtMachine", "OVirtCluster", "OVirtMachineTemplate", "OVirtProvider"} {
		g.Expect(s.Recognizes(infrav1.GroupVersion.WithKind(kind))).To(BeTrue(), "v1beta2 %s", kind)
		g.Expect(s.Recognizes(infrav1beta1.GroupVersion.WithKind(kind))).To(BeTrue(), "v1beta1 %s", kind)
	}
	m := NewCRDMigrator(nil, nil, nil)
	for obj := range m.Config {
		gvks, _, err := s.ObjectKinds(obj)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gvks[0].GroupVersion()).To(Equal(infrav1.GroupVersion), "the migrator is keyed by hub types")
	}
	g.Expect(m.Config).To(HaveLen(4))
}
