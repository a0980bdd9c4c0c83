package capi

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/reconcilers/kubeadmconfig"
	cabpksetup "sigs.k8s.io/cluster-api/bootstrap/kubeadm/setup"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/reconcilers/kubeadmcontrolplane"
	kcpsetup "sigs.k8s.io/cluster-api/controlplane/kubeadm/setup"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// kubeadmScheme is the scheme of the kubeadm bootstrap and control-plane providers.
func kubeadmScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(bootstrapv1.AddToScheme(s))
	utilruntime.Must(controlplanev1.AddToScheme(s))
	return s
}

// runKubeadmBootstrap runs Cluster API's kubeadm bootstrap provider (CABPK) as its own manager,
// with the cache and client options of its main, until ctx ends.
func runKubeadmBootstrap(ctx context.Context, cfg *rest.Config, log logr.Logger, opts Options) error {
	const name = "capi-kubeadm-bootstrap-manager"
	scheme := kubeadmScheme()
	mgr, err := ctrl.NewManager(providerConfig(cfg, name), ctrl.Options{
		Scheme: scheme, Cache: cabpksetup.ManagerCacheOptions(scheme, name, "", opts.SyncPeriod),
		Client: cabpksetup.ManagerClientOptions(), Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Logger: log, Controller: controllerConfig(),
	})
	if err != nil {
		return fmt.Errorf("creating the kubeadm bootstrap manager: %w", err)
	}
	secretClient, err := cabpksetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return fmt.Errorf("creating the kubeadm bootstrap Secret client: %w", err)
	}
	workers := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretClient, Cache: cabpksetup.ClusterCacheCacheOptions(),
		Client: cabpksetup.ClusterCacheClientOptions(name, 50, 100), WatchFilterValue: opts.WatchFilterValue,
	}, workers)
	if err != nil {
		return fmt.Errorf("setting up the kubeadm bootstrap ClusterCache: %w", err)
	}
	if err := (&kubeadmconfig.Reconciler{
		Client: mgr.GetClient(), SecretCachingClient: secretClient, APIReader: mgr.GetAPIReader(),
		ClusterCache: cc, WatchFilterValue: opts.WatchFilterValue, TokenTTL: kubeadmconfig.DefaultTokenTTL,
	}).SetupWithManager(ctx, mgr, workers); err != nil {
		return fmt.Errorf("setting up the KubeadmConfig reconciler: %w", err)
	}
	log.Info("Starting Cluster API's kubeadm bootstrap provider")
	return mgr.Start(ctx)
}

// runKubeadmControlPlane runs Cluster API's kubeadm control-plane provider (KCP) as its own
// manager, with the cache and client options of its main, until ctx ends.
func runKubeadmControlPlane(ctx context.Context, cfg *rest.Config, log logr.Logger, opts Options) error {
	const name = "capi-kubeadm-control-plane-manager"
	scheme := kubeadmScheme()
	mgr, err := ctrl.NewManager(providerConfig(cfg, name), ctrl.Options{
		Scheme: scheme, Cache: kcpsetup.ManagerCacheOptions(scheme, name, "", opts.SyncPeriod),
		Client: kcpsetup.ManagerClientOptions(), Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Logger: log, Controller: controllerConfig(),
	})
	if err != nil {
		return fmt.Errorf("creating the kubeadm control-plane manager: %w", err)
	}
	secretClient, err := kcpsetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return fmt.Errorf("creating the kubeadm control-plane Secret client: %w", err)
	}
	workers := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretClient, Cache: kcpsetup.ClusterCacheCacheOptions(),
		Client: kcpsetup.ClusterCacheClientOptions(name, 50, 100), WatchFilterValue: opts.WatchFilterValue,
	}, workers)
	if err != nil {
		return fmt.Errorf("setting up the kubeadm control-plane ClusterCache: %w", err)
	}
	if err := (&kubeadmcontrolplane.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), SecretCachingClient: secretClient,
		ClusterCache: cc, WatchFilterValue: opts.WatchFilterValue,
		// The defaults of KCP's flags.
		EtcdDialTimeout: 10 * time.Second, EtcdCallTimeout: 15 * time.Second, EtcdLogger: zap.NewNop(),
		RemoteConditionsGracePeriod: 5 * time.Minute,
	}).SetupWithManager(ctx, mgr, workers); err != nil {
		return fmt.Errorf("setting up the KubeadmControlPlane reconciler: %w", err)
	}
	log.Info("Starting Cluster API's kubeadm control-plane provider")
	return mgr.Start(ctx)
}

// providerConfig is cfg with the rate limits and user agent of a provider.
func providerConfig(cfg *rest.Config, name string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 50, 100
	c.UserAgent = name
	return c
}
