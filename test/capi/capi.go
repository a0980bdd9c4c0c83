// Package capi runs Cluster API's own core reconcilers (Cluster, Machine, MachineSet,
// MachineDeployment) against a management cluster, as the CAPI core provider would in
// production. The conformance suite runs it in-process and the demo as a separate process
// (test/capi/cmd/capi-core), so that CAPOV is driven by the real CAPI logic, contract labels
// and all, without a kind cluster.
package capi

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/util/index"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options configure the CAPI core reconcilers.
type Options struct {
	// WatchFilterValue limits them to objects with that watch-filter label ("" = all).
	WatchFilterValue string
	// Concurrency is the number of workers of each reconciler (default 10).
	Concurrency int
	// SyncPeriod is the cache resync period (default 10m).
	SyncPeriod time.Duration
	// HealthProbeBindAddress serves /healthz and /readyz ("0" or "" disables).
	HealthProbeBindAddress string
}

// NewScheme returns the scheme of the CAPI core controllers.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	return s
}

// Run starts the reconcilers and blocks until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, log logr.Logger, opts Options) error {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 10
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = 10 * time.Minute
	}
	if opts.HealthProbeBindAddress == "" {
		opts.HealthProbeBindAddress = "0"
	}
	ctx = ctrl.LoggerInto(ctx, log)
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "capi-core"
	scheme := NewScheme()
	const name = "capi-core"
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  setup.ManagerCacheOptions(scheme, name, "", opts.SyncPeriod),
		Client:                 setup.ManagerClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		Logger:                 log,
		Controller:             controllerConfig(),
	})
	if err != nil {
		return fmt.Errorf("creating the CAPI core manager: %w", err)
	}
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return fmt.Errorf("adding CAPI indexes: %w", err)
	}
	secretClient, err := setup.CreateSecretCachingClient(mgr)
	if err != nil {
		return fmt.Errorf("creating the Secret client: %w", err)
	}
	workers := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient:     secretClient,
		Cache:            setup.ClusterCacheCacheOptions(),
		Client:           setup.ClusterCacheClientOptions(name, 50, 100),
		WatchFilterValue: opts.WatchFilterValue,
	}, workers)
	if err != nil {
		return fmt.Errorf("setting up the CAPI ClusterCache: %w", err)
	}
	if err := (&cluster.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cc,
		WatchFilterValue: opts.WatchFilterValue, RemoteConnectionGracePeriod: 50 * time.Second,
	}).SetupWithManager(ctx, mgr, workers); err != nil {
		return fmt.Errorf("setting up the Cluster reconciler: %w", err)
	}
	if err := (&machine.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cc,
		WatchFilterValue: opts.WatchFilterValue, RemoteConditionsGracePeriod: 5 * time.Minute,
	}).SetupWithManager(ctx, mgr, workers); err != nil {
		return fmt.Errorf("setting up the Machine reconciler: %w", err)
	}
	if err := (&machineset.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cc,
		PreflightChecks: sets.New[clusterv1.MachineSetPreflightCheck](), WatchFilterValue: opts.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, workers); err != nil {
		return fmt.Errorf("setting up the MachineSet reconciler: %w", err)
	}
	if err := (&machinedeployment.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), WatchFilterValue: opts.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, workers); err != nil {
		return fmt.Errorf("setting up the MachineDeployment reconciler: %w", err)
	}
	log.Info("Starting Cluster API core reconcilers", "watchFilter", opts.WatchFilterValue)
	return mgr.Start(ctx)
}
