package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/app/options"
	"github.com/capov/capov/pkg/webhooks"
)

// Component names the webhook server in its User-Agent to the API server, and so in
// managedFields.
const Component = "capov-webhook"

// cacheSyncCheckTimeout bounds one readiness probe's wait for the OVirtProvider cache.
const cacheSyncCheckTimeout = time.Second

// NewScheme returns the scheme of the webhook server: the admission decoder needs the CAPOV
// hub kinds (v1beta2), the /convert endpoint both versions; the Kubernetes kinds are there for
// the manager's own objects, Cluster API's v1beta2 Cluster for the check of an OVirtMachine's
// spec.failureDomain (its OVirtCluster is found through it).
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(infrav1.AddToScheme(s))
	utilruntime.Must(infrav1beta1.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	return s
}

// Main parses args (without the program name) and runs the webhook server until SIGINT/SIGTERM.
// It returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	opts := NewOptions()
	return options.Main(options.Binary{
		Name:     "webhook",
		Summary:  "CAPOV webhook server: defaults and validates OVirtProvider, OVirtCluster, OVirtMachine and OVirtMachineTemplate objects and converts them between v1beta1 and v1beta2 (/convert).",
		Common:   &opts.Common,
		AddFlags: opts.AddFlags,
		Validate: opts.Validate,
		Run: func(ctx context.Context, cfg *rest.Config, log logr.Logger) error {
			return Run(ctx, opts, cfg, log)
		},
	}, args, stdout, stderr)
}

// Run starts the webhook server with the given options and stops when ctx is done. It runs no
// controllers and no leader election: every replica serves admission requests.
func Run(ctx context.Context, opts *Options, restConfig *rest.Config, log logr.Logger) error {
	ctx = ctrl.LoggerInto(ctx, log)
	gates := opts.ResolveFeatureGates(log)
	cfg := opts.RestConfig(restConfig, options.UserAgent(Component), log)
	metrics, err := opts.MetricsServer()
	if err != nil {
		return err
	}
	tlsOpts, err := opts.TLSOptions()
	if err != nil {
		return err
	}

	// The listeners are opened before the manager: a port in use fails the start at once, and a
	// socket handed over by a supervisor is taken instead of binding the flags' address.
	admissionLn, err := opts.Listeners.Listen(options.ListenerWebhook, net.JoinHostPort("", strconv.Itoa(opts.Port)))
	if err != nil {
		return err
	}
	defer admissionLn.Close()
	healthLn, err := opts.Listeners.Listen(options.ListenerHealth, opts.HealthProbeBindAddress)
	if err != nil {
		return err
	}
	if healthLn != nil {
		defer healthLn.Close()
	}
	admission, err := newAdmissionServer(ctrlwebhook.Options{
		Port:     opts.Port,
		CertDir:  opts.CertDir,
		CertName: opts.CertName,
		KeyName:  opts.KeyName,
		// Without GetCertificate in TLSOpts the server reads the files through
		// controller-runtime's certwatcher, which reloads them when cert-manager
		// rotates the Secret (fsnotify, plus a poll every 10 s for symlink swaps).
		TLSOpts: tlsOpts,
	}, admissionLn, log.WithName("admission"))
	if err != nil {
		return err
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: NewScheme(),
		Cache: cache.Options{
			// Reads of a kind without a registered informer fail instead of starting one:
			// the only informers are the OVirtProvider and Namespace ones
			// webhooks.SetupWithManager registers, so the webhook never lists Secrets or
			// anything else by accident.
			ReaderFailOnMissingInformer: true,
			// managedFields are never read; without them a Namespace costs a fraction.
			DefaultTransform: cache.TransformStripManagedFields(),
		},
		// Metrics and probes are served by RunMetrics and ServeProbes (they report the
		// addresses they bound, and the probes can take a handed-over socket).
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		PprofBindAddress:       opts.ProfilerAddress,
		LeaderElection:         false,
		WebhookServer:          admission,
		Logger:                 log,
	})
	if err != nil {
		return fmt.Errorf("creating the webhook manager: %w", err)
	}
	if err := webhooks.SetupWithManager(ctx, mgr, gates); err != nil {
		return err
	}

	probes := &options.Probes{}
	if err := probes.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	// Ready only once the TLS server accepts connections: a pod that is Ready before would get
	// admission requests it cannot answer, and failurePolicy Fail turns that into refusals.
	if err := probes.AddReadyzCheck("webhook", admission.StartedChecker()); err != nil {
		return fmt.Errorf("adding the webhook readiness check: %w", err)
	}
	// And only once the OVirtProvider and Namespace caches have synced: before that, defaulting
	// and validation would wait for them inside the 10 s admission timeout.
	if err := probes.AddReadyzCheck("informers", func(req *http.Request) error {
		syncCtx, cancel := context.WithTimeout(req.Context(), cacheSyncCheckTimeout)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(syncCtx) {
			return errors.New("the OVirtProvider and Namespace caches have not synced yet")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("adding the cache readiness check: %w", err)
	}

	log.Info("Starting the CAPOV webhook server", "port", opts.Port, "certDir", opts.CertDir, "tlsMinVersion", opts.TLSMinVersion,
		"metricsBindAddress", opts.MetricsBindAddress, "healthProbeBindAddress", opts.HealthProbeBindAddress)
	if err := options.ServeProbes(mgr, probes, healthLn, log); err != nil {
		return err
	}
	runMetrics, err := options.RunMetrics(ctx, metrics, cfg, mgr.GetHTTPClient(), log.WithName("metrics"))
	if err != nil {
		return err
	}
	if err := options.RunAll(ctx, mgr.Start, runMetrics); err != nil {
		return fmt.Errorf("running the webhook server: %w", err)
	}
	log.Info("Webhook server stopped")
	return nil
}
