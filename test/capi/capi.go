// Package capi runs Cluster API's own core reconcilers (Cluster, Machine, MachineSet,
// MachineDeployment, MachineHealthCheck, ClusterResourceSet, and the ClusterClass and managed
// topology reconcilers behind the ClusterTopology feature gate), and on request its kubeadm
// bootstrap and control-plane providers, against a management cluster, as the CAPI core provider would
// in production. The conformance suite runs it in-process and the demo as a separate process
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
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterresourceset"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterresourcesetbinding"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinehealthcheck"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	topologycluster "sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster"
	topologymachinedeployment "sigs.k8s.io/cluster-api/core/reconcilers/topology/machinedeployment"
	topologymachineset "sigs.k8s.io/cluster-api/core/reconcilers/topology/machineset"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/cluster-api/util/index"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
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
	// Kubeadm also runs Cluster API's kubeadm bootstrap provider (CABPK) and kubeadm
	// control-plane provider (KCP), each as its own manager as in production, with the
	// KubeadmBootstrapFormatIgnition feature gate on.
	Kubeadm bool
}

// NewScheme returns the scheme of the CAPI core controllers.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(addonsv1.AddToScheme(s))
	// The ClusterClass reconciler watches ExtensionConfigs (even with RuntimeSDK off).
	utilruntime.Must(runtimev1.AddToScheme(s))
	return s
}

// Run starts the reconcilers (and, with Options.Kubeadm, the kubeadm providers) and blocks
// until ctx ends or one of them fails. It enables CAPI's ClusterTopology
// feature gate. The gate is process-wide (CAPI keeps its gates in a package variable): a test
// process that calls Run has managed topologies on everywhere, as a CAPI installation with
// ClusterTopology=true does; Clusters without spec.topology behave as before.
func Run(ctx context.Context, cfg *rest.Config, log logr.Logger, opts Options) error {
	// Before the indexes: AddDefaultIndexes adds the ClusterClass index only with the gate on.
	if err := feature.MutableGates.Set(string(feature.ClusterTopology) + "=true"); err != nil {
		return fmt.Errorf("enabling the CAPI %s feature gate: %w", feature.ClusterTopology, err)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 10
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = 10 * time.Minute
	}
	if opts.HealthProbeBindAddress == "" {
		opts.HealthProbeBindAddress = "0"
	}
	if !opts.Kubeadm {
		return runCore(ctx, cfg, log, opts)
	}
	// The kubeadm providers as the ignition flavor asks them to be installed
	// (EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION=true): CABPK renders format: ignition.
	if err := feature.MutableGates.Set(string(feature.KubeadmBootstrapFormatIgnition) + "=true"); err != nil {
		return fmt.Errorf("enabling the CAPI %s feature gate: %w", feature.KubeadmBootstrapFormatIgnition, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 3)
	for _, run := range []func(context.Context, *rest.Config, logr.Logger, Options) error{runCore, runKubeadmBootstrap, runKubeadmControlPlane} {
		go func() { errs <- run(ctx, cfg, log, opts) }()
	}
	err := <-errs
	cancel()
	// The others end because of the cancel: the first error is the one to report.
	<-errs //nolint:errcheck // drained, not reported
	<-errs //nolint:errcheck // drained, not reported
	return err
}

// runCore runs the core manager: Cluster, Machine, MachineSet, MachineDeployment,
// MachineHealthCheck, ClusterResourceSet and the topology reconcilers.
func runCore(ctx context.Context, cfg *rest.Config, log logr.Logger, opts Options) error {
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
	if err := setupTopology(ctx, mgr, cc, opts.WatchFilterValue, workers); err != nil {
		return err
	}
	if err := setupHealthAndAddons(ctx, mgr, cc, opts.WatchFilterValue, workers); err != nil {
		return err
	}
	log.Info("Starting Cluster API core reconcilers", "watchFilter", opts.WatchFilterValue)
	return mgr.Start(ctx)
}

// setupHealthAndAddons adds the MachineHealthCheck reconciler and the ClusterResourceSet
// reconcilers (with the metadata-only Secret cache of CAPI's core main).
func setupHealthAndAddons(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache, filter string, workers controller.Options) error {
	if err := (&machinehealthcheck.Reconciler{
		Client: mgr.GetClient(), ClusterCache: cc, WatchFilterValue: filter,
	}).SetupWithManager(ctx, mgr, workers); err != nil {
		return fmt.Errorf("setting up the MachineHealthCheck reconciler: %w", err)
	}
	secrets, err := ctrlcache.New(mgr.GetConfig(), ctrlcache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		DefaultTransform: ctrlcache.TransformStripManagedFields(),
	})
	if err != nil {
		return fmt.Errorf("creating the metadata-only Secret cache: %w", err)
	}
	if err := mgr.Add(secrets); err != nil {
		return fmt.Errorf("adding the metadata-only Secret cache: %w", err)
	}
	if err := (&clusterresourceset.Reconciler{
		Client: mgr.GetClient(), ClusterCache: cc, WatchFilterValue: filter,
	}).SetupWithManager(ctx, mgr, workers, secrets); err != nil {
		return fmt.Errorf("setting up the ClusterResourceSet reconciler: %w", err)
	}
	if err := (&clusterresourcesetbinding.Reconciler{
		Client: mgr.GetClient(), WatchFilterValue: filter,
	}).SetupWithManager(ctx, mgr, workers); err != nil {
		return fmt.Errorf("setting up the ClusterResourceSetBinding reconciler: %w", err)
	}
	return nil
}

// setupTopology adds the reconcilers of ClusterClass and managed topologies, as CAPI's core
// main does with ClusterTopology on and RuntimeSDK off (no runtime client: no runtime
// extensions, so no external patches and no lifecycle hooks).
func setupTopology(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache, filter string, workers controller.Options) error {
	if err := (&clusterclass.Reconciler{
		Client: mgr.GetClient(), WatchFilterValue: filter,
	}).SetupWithManager(ctx, mgr, workers); err != nil {
		return fmt.Errorf("setting up the ClusterClass reconciler: %w", err)
	}
	if err := (&topologycluster.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cc, WatchFilterValue: filter,
	}).SetupWithManager(ctx, mgr, workers); err != nil {
		return fmt.Errorf("setting up the Cluster topology reconciler: %w", err)
	}
	// These two only clean up the templates of the topology's MachineDeployments and
	// MachineSets when those are deleted.
	if err := (&topologymachinedeployment.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), WatchFilterValue: filter,
	}).SetupWithManager(ctx, mgr, workers); err != nil {
		return fmt.Errorf("setting up the MachineDeployment topology reconciler: %w", err)
	}
	if err := (&topologymachineset.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), WatchFilterValue: filter,
	}).SetupWithManager(ctx, mgr, workers); err != nil {
		return fmt.Errorf("setting up the MachineSet topology reconciler: %w", err)
	}
	return nil
}
