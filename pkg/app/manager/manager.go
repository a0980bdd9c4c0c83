package manager

import (
	"context"
	"fmt"
	"io"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controllers/crdmigrator"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/app/options"
	"github.com/capov/capov/pkg/controllers"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/sdk"
)

// Component names the manager in its User-Agent (to the management and workload cluster API
// servers and to the oVirt Engine), and so in managedFields.
const Component = "capov-manager"

// NewScheme returns the scheme of the manager: both CAPOV API versions (the manager reads and
// writes only v1beta2, the hub and storage version), Cluster API v1beta2 and the CRDs the
// storage migration reads.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(ipamv1.AddToScheme(s))
	utilruntime.Must(infrav1.AddToScheme(s))
	utilruntime.Must(infrav1beta1.AddToScheme(s))
	return s
}

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions;customresourcedefinitions/status,verbs=patch;update,resourceNames=ovirtclusters.infrastructure.cluster.x-k8s.io;ovirtmachines.infrastructure.cluster.x-k8s.io;ovirtmachinetemplates.infrastructure.cluster.x-k8s.io;ovirtproviders.infrastructure.cluster.x-k8s.io
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtclusters;ovirtmachines;ovirtmachinetemplates;ovirtproviders,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ovirtclusters/status;ovirtmachines/status;ovirtmachinetemplates/status;ovirtproviders/status,verbs=patch;update

// NewCRDMigrator returns Cluster API's CRD migrator for the four CAPOV kinds, keyed by their
// hub (storage) types: once a CRD's storage version is v1beta2, it rewrites every object
// through the status endpoint (no admission webhook involved) and sets status.storedVersions
// to [v1beta2], then drops managedFields of versions no longer served. The objects are listed
// live, not from the cache: the cache strips managedFields, which the cleanup phase reads.
func NewCRDMigrator(c client.Client, reader client.Reader, skip []crdmigrator.Phase) *crdmigrator.CRDMigrator {
	cfg := crdmigrator.ByObjectConfig{UseStatusForStorageVersionMigration: true}
	return &crdmigrator.CRDMigrator{
		Client:                 c,
		APIReader:              reader,
		SkipCRDMigrationPhases: skip,
		Config: map[client.Object]crdmigrator.ByObjectConfig{
			&infrav1.OVirtCluster{}:         cfg,
			&infrav1.OVirtMachine{}:         cfg,
			&infrav1.OVirtMachineTemplate{}: cfg,
			&infrav1.OVirtProvider{}:        cfg,
		},
	}
}

// Main parses args (without the program name) and runs the manager until SIGINT/SIGTERM. It
// returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	opts := NewOptions()
	return options.Main(options.Binary{
		Name:     "manager",
		Summary:  "CAPOV controller manager: reconciles OVirtProvider, OVirtCluster, OVirtMachine and OVirtRemediation against oVirt.",
		Common:   &opts.Common,
		AddFlags: opts.AddFlags,
		Validate: opts.Validate,
		Run: func(ctx context.Context, cfg *rest.Config, log logr.Logger) error {
			return Run(ctx, opts, cfg, log)
		},
	}, args, stdout, stderr)
}

// Run starts the manager with the given options and stops when ctx is done.
func Run(ctx context.Context, opts *Options, restConfig *rest.Config, log logr.Logger) error {
	ctx = ctrl.LoggerInto(ctx, log)
	gates := opts.ResolveFeatureGates(log)
	userAgent := options.UserAgent(Component)
	cfg := opts.RestConfig(restConfig, userAgent, log)
	scheme := NewScheme()

	if err := checkRequiredAPIs(ctx, cfg); err != nil {
		return err
	}
	mgrOpts, err := managerOptions(opts, scheme, log)
	if err != nil {
		return err
	}
	// The health listener is opened before the manager (a port in use fails the start at once);
	// a socket a supervisor handed over is taken instead of binding the flag's address.
	healthLn, err := opts.Listeners.Listen(options.ListenerHealth, opts.HealthProbeBindAddress)
	if err != nil {
		return err
	}
	if healthLn != nil {
		defer healthLn.Close()
	}
	// With leader election, oVirt writes are fenced on the lease (leasefence.go).
	var fence ovirt.Fence
	if opts.LeaderElect {
		lf, err := newLeaseFence(cfg, opts)
		if err != nil {
			return err
		}
		mgrOpts.LeaderElectionResourceLockInterface = lf
		fence = lf.Check
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating the controller manager: %w", err)
	}

	lookupTTL := opts.OVirtLookupCacheTTL
	if lookupTTL == 0 {
		lookupTTL = -1 // the flag's 0 disables the cache; the factory's 0 means its default
	}
	factory := sdk.NewFactory(sdk.Options{
		Limits: sdk.Limits{
			QPS: opts.OVirtQPS, Burst: opts.OVirtBurst, MaxInFlight: opts.OVirtMaxInFlight,
			AuthFailureThreshold: opts.OVirtAuthFailureThreshold, AuthBackoff: opts.OVirtAuthBackoff,
		},
		Registerer:     ctrlmetrics.Registry,
		Logger:         log.WithName("ovirt"),
		UserAgent:      userAgent,
		Timeout:        opts.OVirtTimeout,
		LookupCacheTTL: lookupTTL,
	})
	defer factory.Close()

	concurrency := controllerOptions(opts)
	// The ClusterCache reads kubeconfig Secrets of every cluster namespace: an uncached
	// client does that without caching every Secret.
	secretClient, err := client.New(cfg, client.Options{Scheme: scheme, HTTPClient: mgr.GetHTTPClient(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("creating the Secret client: %w", err)
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clusterCacheOptions(opts, secretClient, userAgent), concurrency[clusterCacheController])
	if err != nil {
		return fmt.Errorf("setting up the ClusterCache: %w", err)
	}

	skipPhases, err := opts.CRDMigrationPhasesToSkip()
	if err != nil {
		return err
	}
	if err := NewCRDMigrator(mgr.GetClient(), mgr.GetAPIReader(), skipPhases).
		SetupWithManager(ctx, mgr, concurrency[crdMigratorController]); err != nil {
		return fmt.Errorf("setting up the CRD migrator: %w", err)
	}

	connector := &controllers.Connector{Reader: mgr.GetClient(), Namespace: opts.CredentialsNamespace, Factory: ovirt.FencedFactory(factory, fence)}
	if err := (&controllers.OVirtProviderReconciler{
		Client: mgr.GetClient(), Connector: connector, Recorder: mgr.GetEventRecorder("ovirtprovider-controller"),
		CheckInterval: opts.ProviderCheckInterval, WatchFilterValue: opts.WatchFilter,
	}).SetupWithManager(ctx, mgr, concurrency[providerController]); err != nil {
		return fmt.Errorf("setting up the OVirtProvider controller: %w", err)
	}
	clusterID, err := managementClusterID(ctx, mgr.GetAPIReader(), opts.ManagementClusterID)
	if err != nil {
		return err
	}
	if err := (&controllers.OVirtClusterReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connector: connector,
		Recorder: mgr.GetEventRecorder("ovirtcluster-controller"), CheckInterval: opts.SyncPeriod, RetryInterval: opts.RetryInterval,
		WatchFilterValue:    opts.WatchFilter,
		ManagementClusterID: clusterID,
	}).SetupWithManager(ctx, mgr, concurrency[clusterController]); err != nil {
		return fmt.Errorf("setting up the OVirtCluster controller: %w", err)
	}
	intervals := controllers.DefaultIntervals()
	intervals.VMPoll = opts.VMPollInterval
	intervals.NodePoll = opts.NodePollInterval
	intervals.ShutdownTimeout = opts.ShutdownTimeout
	intervals.LockedPatience = opts.LockedPatience
	intervals.VMRefresh = opts.SyncPeriod
	intervals.Retry = opts.RetryInterval
	intervals.NonSystemDiskRetry = opts.NonSystemDiskRetryInterval
	var inventory *controllers.Inventory
	if every := opts.Inventory(); every > 0 {
		inventory = &controllers.Inventory{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connector: connector,
			Recorder: mgr.GetEventRecorder("ovirtprovider-inventory"), ManagementClusterID: clusterID,
			Interval: every, Retry: opts.RetryInterval, PageSize: opts.InventoryPageSize, WatchFilterValue: opts.WatchFilter,
			Metrics: controllers.NewInventoryMetrics(ctrlmetrics.Registry), Log: log.WithName("inventory"),
			GracePeriodOverride: opts.TestOrphanedVMsGracePeriod,
		}
		if err := mgr.Add(inventory); err != nil {
			return fmt.Errorf("adding the inventory: %w", err)
		}
	}
	if err := (&controllers.OVirtMachineReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connector: connector, ClusterCache: clusterCache,
		Recorder: mgr.GetEventRecorder("ovirtmachine-controller"), Gates: gates, Intervals: intervals, KeepBootstrapData: opts.KeepBootstrapData,
		WatchFilterValue: opts.WatchFilter, ManagementClusterID: clusterID, Inventory: inventory,
	}).SetupWithManager(ctx, mgr, concurrency[machineController]); err != nil {
		return fmt.Errorf("setting up the OVirtMachine controller: %w", err)
	}
	if err := (&controllers.OVirtMachineTemplateReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Connector: connector, Retry: opts.RetryInterval, WatchFilterValue: opts.WatchFilter}).
		SetupWithManager(ctx, mgr, concurrency[machineTemplateController]); err != nil {
		return fmt.Errorf("setting up the OVirtMachineTemplate controller: %w", err)
	}
	if err := (&controllers.OVirtRemediationReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connector: connector, ClusterCache: clusterCache,
		Recorder: mgr.GetEventRecorder("ovirtremediation-controller"), ManagementClusterID: clusterID,
		WatchFilterValue: opts.WatchFilter, VMPoll: opts.VMPollInterval, Retry: opts.RetryInterval,
	}).SetupWithManager(ctx, mgr, concurrency[remediationController]); err != nil {
		return fmt.Errorf("setting up the OVirtRemediation controller: %w", err)
	}

	probes := &options.Probes{}
	if err := probes.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := probes.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	if err := options.ServeProbes(mgr, probes, healthLn, log); err != nil {
		return err
	}
	metrics, err := opts.MetricsServer()
	if err != nil {
		return err
	}
	runMetrics, err := options.RunMetrics(ctx, metrics, cfg, mgr.GetHTTPClient(), log.WithName("metrics"))
	if err != nil {
		return err
	}
	log.Info("Starting the CAPOV manager", "managementClusterID", clusterID, "inventoryInterval", opts.Inventory(), "credentialsNamespace", opts.CredentialsNamespace,
		"namespace", opts.Namespace, "leaderElect", opts.LeaderElect, "maxConcurrentReconciles", opts.MaxConcurrentReconciles,
		"reconcileTimeout", opts.ReconcileTimeout, "userAgent", userAgent)
	if err := options.RunAll(ctx, mgr.Start, runMetrics); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	log.Info("Manager stopped")
	return nil
}

// managerOptions are the controller-runtime manager options the flags select. Every controller
// inherits Controller's settings: panics are recovered and each reconcile's context ends after
// --reconcile-timeout.
func managerOptions(opts *Options, scheme *runtime.Scheme, log logr.Logger) (ctrl.Options, error) {
	if _, err := opts.MetricsServer(); err != nil {
		return ctrl.Options{}, err
	}
	cacheOpts := cache.Options{
		SyncPeriod: &opts.SyncPeriod,
		// managedFields are never read and are a large part of every cached object; of Cluster
		// API Machines only metadata and spec are read (controllers.CacheTransform).
		DefaultTransform: controllers.CacheTransform(),
		ByObject: map[client.Object]cache.ByObject{
			// Only the credentials Secrets are cached; bootstrap data is read directly, and
			// caching every Secret of a management cluster costs memory for nothing.
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{opts.CredentialsNamespace: {}}},
		},
	}
	if opts.Namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{opts.Namespace: {}}
	}
	return ctrl.Options{
		Scheme: scheme,
		Cache:  cacheOpts,
		// Metrics and probes are served by RunMetrics and ServeProbes (they report the
		// addresses they bound, and the probes can take a handed-over socket).
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		PprofBindAddress:              opts.ProfilerAddress,
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(opts.LeaseDuration),
		RenewDeadline:                 ptr.To(opts.RenewDeadline),
		RetryPeriod:                   ptr.To(opts.RetryPeriod),
		GracefulShutdownTimeout:       ptr.To(opts.GracefulShutdownTimeout),
		Controller:                    config.Controller{RecoverPanic: ptr.To(true), ReconciliationTimeout: opts.ReconcileTimeout},
		Logger:                        log,
	}, nil
}

// The controllers, by their names in metrics and logs.
const (
	providerController        = "ovirtprovider"
	clusterController         = "ovirtcluster"
	machineController         = "ovirtmachine"
	machineTemplateController = "ovirtmachinetemplate"
	remediationController     = "ovirtremediation"
	clusterCacheController    = "clustercache"
	crdMigratorController     = "crdmigrator"
)

// controllerOptions are each controller's options: its workers. The reconcile timeout and panic
// recovery come from the manager's defaults (managerOptions).
func controllerOptions(opts *Options) map[string]controller.Options {
	return map[string]controller.Options{
		providerController:        {MaxConcurrentReconciles: opts.ProviderConcurrency},
		clusterController:         {MaxConcurrentReconciles: opts.ClusterConcurrency},
		machineController:         {MaxConcurrentReconciles: opts.MaxConcurrentReconciles},
		machineTemplateController: {MaxConcurrentReconciles: opts.MachineTemplateConcurrency},
		remediationController:     {MaxConcurrentReconciles: opts.RemediationConcurrency},
		clusterCacheController:    {MaxConcurrentReconciles: opts.ClusterCacheConcurrency},
		crdMigratorController:     {MaxConcurrentReconciles: 1},
	}
}

// clusterCacheOptions are the ClusterCache's options: its clients to the workload clusters
// identify as the manager and have their own limits (--clustercache-client-qps/burst).
func clusterCacheOptions(opts *Options, secretClient client.Client, userAgent string) clustercache.Options {
	return clustercache.Options{
		SecretClient:     secretClient,
		WatchFilterValue: opts.WatchFilter,
		// The workload cluster's Nodes (the only kind read there) without managedFields and
		// with only the status the machines read (controllers.CacheTransform).
		// Indexes: a machine finds its Node by providerID or system UUID without listing all.
		Cache:  clustercache.CacheOptions{DefaultTransform: controllers.CacheTransform(), Indexes: controllers.WorkloadClusterIndexes()},
		Client: clustercache.ClientOptions{UserAgent: userAgent, QPS: opts.ClusterCacheClientQPS, Burst: opts.ClusterCacheClientBurst},
	}
}

// managementClusterID returns --management-cluster-id or, without it, the UID of the kube-system
// Namespace: it exists in every cluster from its creation, is never recreated, and differs
// between clusters, so that it survives restarts, upgrades and reinstalls of CAPOV.
func managementClusterID(ctx context.Context, r client.Reader, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, ns); err != nil {
		return "", fmt.Errorf("reading Namespace kube-system for the management cluster id (or set --management-cluster-id): %w", err)
	}
	return string(ns.UID), nil
}
