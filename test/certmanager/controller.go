package certmanager

import (
	"context"
	"fmt"
	"net/http"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options configure the stand-in.
type Options struct {
	// ClusterResourceNamespace holds the CA Secrets of ClusterIssuers (default Namespace).
	ClusterResourceNamespace string
	// HealthProbeBindAddress serves /healthz and /readyz ("" or "0" disables).
	HealthProbeBindAddress string
	// Now is the clock (default time.Now); tests move it to see renewals.
	Now func() time.Time
	// Interceptors, when set, sit between the reconcilers and the API server: tests inject
	// the conflicts and failures a busy API server returns.
	Interceptors *interceptor.Funcs
}

// NewScheme returns the scheme of the stand-in: Kubernetes, CRDs and cert-manager's types.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(cmapi.AddToScheme(s))
	return s
}

// Run runs the issuer, certificate and CA injection reconcilers until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, log logr.Logger, opts Options) error {
	if opts.ClusterResourceNamespace == "" {
		opts.ClusterResourceNamespace = Namespace
	}
	if opts.HealthProbeBindAddress == "" {
		opts.HealthProbeBindAddress = "0"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "cert-manager-stand-in"
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 NewScheme(),
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		// Several stand-ins may run in one test process (one per management cluster).
		Controller: config.Controller{SkipNameValidation: ptr.To(true), RecoverPanic: ptr.To(true)},
		NewClient: func(cfg *rest.Config, o client.Options) (client.Client, error) {
			if opts.Interceptors == nil {
				return client.New(cfg, o)
			}
			c, err := client.NewWithWatch(cfg, o)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, *opts.Interceptors), nil
		},
	})
	if err != nil {
		return fmt.Errorf("creating the cert-manager stand-in's manager: %w", err)
	}
	if opts.HealthProbeBindAddress != "0" {
		if err := mgr.AddHealthzCheck("ping", func(*http.Request) error { return nil }); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("ping", func(*http.Request) error { return nil }); err != nil {
			return err
		}
	}
	issuers := &issuerReconciler{client: mgr.GetClient(), clusterResourceNamespace: opts.ClusterResourceNamespace}
	if err := issuers.setup(mgr); err != nil {
		return err
	}
	certs := &certificateReconciler{client: mgr.GetClient(), reader: mgr.GetAPIReader(), clusterResourceNamespace: opts.ClusterResourceNamespace, now: opts.Now}
	if err := certs.setup(mgr); err != nil {
		return err
	}
	for _, target := range injectionTargets() {
		inj := &injector{client: mgr.GetClient(), target: target}
		if err := inj.setup(mgr); err != nil {
			return err
		}
	}
	log.Info("Starting the cert-manager stand-in", "clusterResourceNamespace", opts.ClusterResourceNamespace)
	return mgr.Start(ctx)
}
