package manager

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/cluster-api/controllers/crdmigrator"

	"github.com/capov/capov/pkg/app/options"
	"github.com/capov/capov/pkg/controllers"
)

// Options are the manager's flags.
type Options struct {
	options.Common

	// LeaderElect enables leader election so that only one replica reconciles.
	LeaderElect bool
	// LeaderElectionID names the Lease.
	LeaderElectionID string
	// LeaderElectionNamespace is where the Lease lives; empty means the pod namespace.
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// MaxConcurrentReconciles is the number of OVirtMachines reconciled at once.
	MaxConcurrentReconciles int
	// ProviderConcurrency, ClusterConcurrency, MachineTemplateConcurrency,
	// RemediationConcurrency and ClusterCacheConcurrency are the workers of the other controllers.
	ProviderConcurrency, ClusterConcurrency, MachineTemplateConcurrency, RemediationConcurrency, ClusterCacheConcurrency int
	// ReconcileTimeout bounds every reconcile of every controller (its context is cancelled).
	ReconcileTimeout time.Duration
	// ClusterCacheClientQPS and ClusterCacheClientBurst bound the requests to each workload
	// cluster's API server.
	ClusterCacheClientQPS   float32
	ClusterCacheClientBurst int
	// Namespace limits the watch to one namespace (clusterctl contract); empty watches all.
	Namespace string
	// WatchFilter only reconciles objects whose cluster.x-k8s.io/watch-filter label has this value.
	WatchFilter string
	// SyncPeriod is the resync interval of every watched object.
	SyncPeriod time.Duration
	// GracefulShutdownTimeout bounds how long running reconciles may finish on SIGTERM.
	GracefulShutdownTimeout time.Duration

	// CredentialsNamespace is the namespace of the OVirtProvider credentials Secrets.
	CredentialsNamespace string
	// ProviderCheckInterval is how often an OVirtProvider's connectivity is re-checked.
	ProviderCheckInterval time.Duration
	// VMPollInterval is how often a VM is re-read while oVirt works on it.
	VMPollInterval time.Duration
	// NodePollInterval is how often the workload cluster is checked for the Node.
	NodePollInterval time.Duration
	// ShutdownTimeout is how long a graceful shutdown may take before a VM is stopped hard.
	ShutdownTimeout time.Duration
	// KeepBootstrapData stores the bootstrap data on the VM at creation and leaves it there.
	KeepBootstrapData bool
	// LockedPatience is how long a VM may stay image_locked before it is reported and polled
	// less often.
	LockedPatience time.Duration
	// RetryInterval is how often a step waiting for a change in oVirt is retried.
	RetryInterval time.Duration
	// NonSystemDiskRetryInterval is how often a deletion blocked by a non-system disk is retried.
	NonSystemDiskRetryInterval time.Duration

	// OVirtQPS, OVirtBurst and OVirtMaxInFlight bound the calls per OVirtProvider.
	OVirtQPS         float64
	OVirtBurst       int
	OVirtMaxInFlight int
	// OVirtTimeout bounds each oVirt API call.
	OVirtTimeout time.Duration
	// OVirtAuthFailureThreshold and OVirtAuthBackoff configure the login circuit breaker.
	OVirtAuthFailureThreshold int
	OVirtAuthBackoff          time.Duration
	// OVirtLookupCacheTTL is how long names of templates, clusters, storage domains and vNIC
	// profiles are cached.
	OVirtLookupCacheTTL time.Duration

	// InventoryInterval is the time between two bulk inventories of each OVirtProvider's VMs;
	// 0 turns the inventory off (Ready machines then read their VMs one by one).
	InventoryInterval time.Duration
	// InventoryPageSize is the number of VMs per inventory request.
	InventoryPageSize int
	// TestOrphanedVMsGracePeriod, when positive, replaces every OVirtProvider's
	// spec.orphanedVMsGracePeriod (tests only: the chaos suite runs past it).
	TestOrphanedVMsGracePeriod time.Duration
	// ManagementClusterID is the id written into VM owner markers; empty means the UID of the
	// kube-system Namespace.
	ManagementClusterID string

	// SkipCRDMigrationPhases are the phases of the CRD storage migration not to run
	// (StorageVersionMigration, CleanupManagedFields).
	SkipCRDMigrationPhases []string
}

// crdMigrationPhases are the valid values of --skip-crd-migration-phases.
var crdMigrationPhases = []crdmigrator.Phase{crdmigrator.StorageVersionMigrationPhase, crdmigrator.CleanupManagedFieldsPhase}

// CRDMigrationPhasesToSkip returns --skip-crd-migration-phases as crdmigrator phases; an
// unknown value is an error that names the flag and the valid values.
func (o *Options) CRDMigrationPhasesToSkip() ([]crdmigrator.Phase, error) {
	var out []crdmigrator.Phase
	for _, v := range o.SkipCRDMigrationPhases {
		p := crdmigrator.Phase(strings.TrimSpace(v))
		if !slices.Contains(crdMigrationPhases, p) {
			valid := make([]string, 0, len(crdMigrationPhases))
			for _, vp := range crdMigrationPhases {
				valid = append(valid, string(vp))
			}
			return nil, fmt.Errorf("--skip-crd-migration-phases: unknown phase %q; valid values are %s (comma-separated)", v, strings.Join(valid, ", "))
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// NewOptions returns the defaults.
func NewOptions() *Options { return &Options{} }

// AddFlags registers the manager's flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Common.AddFlags(fs, ":8443", ":8081")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "Enable leader election: only the leader reconciles. Required with more than one replica.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "capov-controller-manager", "Name of the leader-election Lease.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease (default: the pod namespace).")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a non-leader waits before taking over an expired lease.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps retrying to renew the lease before giving up leadership.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "Interval between leader-election attempts.")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", 10, "Number of OVirtMachines reconciled in parallel.")
	fs.IntVar(&o.ProviderConcurrency, "ovirtprovider-concurrency", 2, "Number of OVirtProviders reconciled in parallel.")
	fs.IntVar(&o.ClusterConcurrency, "ovirtcluster-concurrency", 2, "Number of OVirtClusters reconciled in parallel.")
	fs.IntVar(&o.MachineTemplateConcurrency, "ovirtmachinetemplate-concurrency", 1, "Number of OVirtMachineTemplates reconciled in parallel.")
	fs.IntVar(&o.RemediationConcurrency, "ovirtremediation-concurrency", 2, "Number of OVirtRemediations (reboots a MachineHealthCheck asked for) reconciled in parallel.")
	fs.IntVar(&o.ClusterCacheConcurrency, "clustercache-concurrency", 10, "Number of workload clusters whose connection the ClusterCache checks in parallel.")
	fs.DurationVar(&o.ReconcileTimeout, "reconcile-timeout", time.Minute, "Timeout of every reconcile of every controller: its context is cancelled after this long, so that nothing can hang a worker (the default is Cluster API's). Each oVirt call is also bounded by --ovirt-timeout.")
	fs.Float32Var(&o.ClusterCacheClientQPS, "clustercache-client-qps", 20, "Maximum queries per second from the ClusterCache clients to the API server of each workload cluster.")
	fs.IntVar(&o.ClusterCacheClientBurst, "clustercache-client-burst", 30, "Maximum burst of queries from the ClusterCache clients to the API server of each workload cluster.")
	fs.StringVar(&o.Namespace, "namespace", "", "Only watch this namespace (default: all namespaces).")
	fs.StringVar(&o.WatchFilter, "watch-filter", "", "Only reconcile objects labelled cluster.x-k8s.io/watch-filter=<value> (default: all).")
	fs.DurationVar(&o.SyncPeriod, "sync-period", 10*time.Minute, "Interval at which every watched object is reconciled again; bounds how stale the status of a Ready machine can be, and how often an OVirtCluster checks its failure domains and affinity groups in oVirt.")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long running reconciles may take to finish on SIGTERM.")
	fs.StringVar(&o.CredentialsNamespace, "credentials-namespace", options.Env("POD_NAMESPACE", "capov-system"), "Namespace of the OVirtProvider credentials Secrets; the default is $POD_NAMESPACE when it is set.")
	fs.DurationVar(&o.ProviderCheckInterval, "provider-check-interval", 5*time.Minute, "How often each OVirtProvider's connection is checked.")
	fs.DurationVar(&o.VMPollInterval, "vm-poll-interval", 10*time.Second, "How often a VM is re-read while oVirt creates, resizes or starts it.")
	fs.DurationVar(&o.NodePollInterval, "node-poll-interval", 15*time.Second, "How often the workload cluster is checked for the Node of a running VM.")
	fs.DurationVar(&o.ShutdownTimeout, "vm-shutdown-timeout", 5*time.Minute, "How long a VM may take to shut down gracefully on deletion before it is powered off.")
	fs.BoolVar(&o.KeepBootstrapData, "keep-bootstrap-data", false, "Store the bootstrap data (join token; for control planes, CA keys) in the VM's initialization.custom_script in oVirt at creation and keep it there (for debugging a first boot); by default it goes to the VM's first run only (oVirt's run once) and is never stored on the VM, since the Engine shows a stored script to anyone who may read the VM.")
	fs.DurationVar(&o.LockedPatience, "vm-locked-patience", 30*time.Minute, "How long a VM may stay image_locked before its condition says VMLockedTooLong, a Warning event is emitted and it is read only every 5 minutes (0: never).")
	fs.DurationVar(&o.RetryInterval, "retry-interval", time.Minute, "How often a step that waits for a change in oVirt (missing template, vNIC profile, storage domain, refused request) is retried.")
	fs.DurationVar(&o.NonSystemDiskRetryInterval, "non-system-disk-retry-interval", time.Minute, "How often the deletion of a VM with a non-system (CSI) disk attached is retried.")
	fs.Float64Var(&o.OVirtQPS, "ovirt-qps", 20, "Maximum oVirt API calls per second per OVirtProvider (token bucket).")
	fs.IntVar(&o.OVirtBurst, "ovirt-burst", 40, "Burst of oVirt API calls per OVirtProvider.")
	fs.IntVar(&o.OVirtMaxInFlight, "ovirt-max-in-flight", 10, "Maximum concurrent oVirt API calls per OVirtProvider.")
	fs.DurationVar(&o.OVirtTimeout, "ovirt-timeout", 30*time.Second, "Timeout of each oVirt API call.")
	fs.IntVar(&o.OVirtAuthFailureThreshold, "ovirt-auth-failure-threshold", 3, "Consecutive oVirt login failures after which logins with that credential are suspended.")
	fs.DurationVar(&o.OVirtAuthBackoff, "ovirt-auth-backoff", 5*time.Minute, "How long logins stay suspended after --ovirt-auth-failure-threshold failures (protects the account from lockout).")
	fs.StringSliceVar(&o.SkipCRDMigrationPhases, "skip-crd-migration-phases", nil, "Comma-separated list of CRD storage migration phases not to run at start: StorageVersionMigration (rewrite every object in the storage version v1beta2 and set the CRDs' status.storedVersions to [v1beta2]), CleanupManagedFields (drop managedFields entries of API versions no longer served). Default: run both.")
	fs.DurationVar(&o.InventoryInterval, "inventory-interval", -1, "Time between two bulk inventories of each OVirtProvider's VMs (one paginated search per provider): Ready machines read their VM from it, out-of-band changes and orphaned VMs are noticed within it. Default: --sync-period. 0 turns the inventory off: Ready machines then read their VMs one by one, once per --sync-period.")
	fs.IntVar(&o.InventoryPageSize, "inventory-page-size", controllers.DefaultInventoryPageSize, "Number of VMs per inventory request (1-1000): a page is parsed whole, about 200 KB allocated per VM while it is read.")
	fs.DurationVar(&o.TestOrphanedVMsGracePeriod, "test-orphaned-vms-grace-period", 0, "FOR TESTS ONLY: when positive, replaces the spec.orphanedVMsGracePeriod of every OVirtProvider (whose admission minimum is 10m), so that a test can run past it. Never set it in production: a clusterctl move needs the grace period to finish.")
	fs.StringVar(&o.ManagementClusterID, "management-cluster-id", "", "Id of this management cluster, written into the owner marker of every VM it creates (management-cluster=<id>): VMs with another id belong to another management cluster sharing the Engine and are never orphans here. Default: the UID of the kube-system Namespace. Letters, digits, '.', '_' and '-', at most 64.")
	fs.DurationVar(&o.OVirtLookupCacheTTL, "ovirt-lookup-cache-ttl", 2*time.Minute, "How long template, cluster, storage-domain and vNIC-profile lookups are cached; 0 disables.")
}

// Validate checks the flag values.
func (o *Options) Validate() error {
	if err := o.Common.Validate(); err != nil {
		return err
	}
	checks := []struct {
		ok  bool
		msg string
	}{
		{o.MaxConcurrentReconciles >= 1, "--max-concurrent-reconciles must be at least 1"},
		{o.ProviderConcurrency >= 1, "--ovirtprovider-concurrency must be at least 1"},
		{o.ClusterConcurrency >= 1, "--ovirtcluster-concurrency must be at least 1"},
		{o.MachineTemplateConcurrency >= 1, "--ovirtmachinetemplate-concurrency must be at least 1"},
		{o.RemediationConcurrency >= 1, "--ovirtremediation-concurrency must be at least 1"},
		{o.ClusterCacheConcurrency >= 1, "--clustercache-concurrency must be at least 1"},
		{o.ReconcileTimeout > 0, "--reconcile-timeout must be positive"},
		{o.ClusterCacheClientQPS > 0 && o.ClusterCacheClientBurst >= 1, "--clustercache-client-qps must be positive and --clustercache-client-burst at least 1"},
		{o.SyncPeriod > 0, "--sync-period must be positive"},
		{o.ProviderCheckInterval > 0, "--provider-check-interval must be positive"},
		{o.VMPollInterval > 0, "--vm-poll-interval must be positive"},
		{o.NodePollInterval > 0, "--node-poll-interval must be positive"},
		{o.ShutdownTimeout >= 0, "--vm-shutdown-timeout must not be negative"},
		{o.LockedPatience >= 0, "--vm-locked-patience must not be negative"},
		{o.RetryInterval > 0, "--retry-interval must be positive"},
		{o.NonSystemDiskRetryInterval > 0, "--non-system-disk-retry-interval must be positive"},
		{o.OVirtQPS > 0 && o.OVirtBurst >= 1, "--ovirt-qps must be positive and --ovirt-burst at least 1"},
		{o.OVirtMaxInFlight >= 1, "--ovirt-max-in-flight must be at least 1"},
		{o.OVirtTimeout > 0, "--ovirt-timeout must be positive"},
		{o.OVirtAuthFailureThreshold >= 1, "--ovirt-auth-failure-threshold must be at least 1"},
		{o.OVirtAuthBackoff >= 0, "--ovirt-auth-backoff must not be negative"},
		{o.OVirtLookupCacheTTL >= 0, "--ovirt-lookup-cache-ttl must not be negative"},
		{o.InventoryInterval >= 0 || o.InventoryInterval == -1, "--inventory-interval must not be negative (0 turns the inventory off)"},
		{o.TestOrphanedVMsGracePeriod >= 0, "--test-orphaned-vms-grace-period must not be negative (0: the providers' own grace periods)"},
		{o.InventoryPageSize >= 1 && o.InventoryPageSize <= 1000, "--inventory-page-size must be between 1 and 1000"},
		{validClusterID(o.ManagementClusterID), "--management-cluster-id may hold only letters, digits, '.', '_' and '-', at most 64 of them"},
		{o.CredentialsNamespace != "", "--credentials-namespace must not be empty"},
		{!o.LeaderElect || o.LeaseDuration > o.RenewDeadline, "--leader-elect-lease-duration must be longer than --leader-elect-renew-deadline"},
		{!o.LeaderElect || o.RenewDeadline > fenceMargin(o.RetryPeriod)+o.RetryPeriod,
			"--leader-elect-renew-deadline must be longer than twice --leader-elect-retry-period plus 1s: oVirt writes may start only within " +
				"the renew deadline minus a retry period and 1s after each renewal (docs/reliability.md \"A stale leader\")"},
	}
	for _, c := range checks {
		if !c.ok {
			return fmt.Errorf("%s", c.msg)
		}
	}
	if _, err := o.CRDMigrationPhasesToSkip(); err != nil {
		return err
	}
	return nil
}

// validClusterID reports whether id can be written into an owner marker (empty: the default).
func validClusterID(id string) bool {
	if len(id) > 64 {
		return false
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// Inventory returns the interval of the inventory: --inventory-interval, or --sync-period when
// it was not given.
func (o *Options) Inventory() time.Duration {
	if o.InventoryInterval < 0 {
		return o.SyncPeriod
	}
	return o.InventoryInterval
}
