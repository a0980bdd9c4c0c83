package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	infrav1 "github.com/capov/capov/apis/v1beta1"
	"github.com/capov/capov/pkg/app/options"
	"github.com/capov/capov/pkg/webhooks"
)

// UserAgent identifies the webhook server to the API server.
const UserAgent = "capov-webhook"

// cacheSyncCheckTimeout bounds one readiness probe's wait for the OVirtProvider cache.
const cacheSyncCheckTimeout = time.Second

// NewScheme returns the scheme of the webhook server: the admission decoder needs the CAPOV
// kinds; the Kubernetes kinds are there for the manager's own objects.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(infrav1.AddToScheme(s))
	return s
}

// Main parses args (without the program name) and runs the webhook server until SIGINT/SIGTERM.
// It returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	opts := NewOptions()
	fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
	fs.SetOutput(stdout)
	opts.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "CAPOV admission webhook server: defaults and validates OVirtProvider, OVirtCluster, OVirtMachine and OVirtMachineTemplate objects.\n\nUsage: webhook [flags]\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := options.Parse(fs, args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "webhook: %v\n", err)
		return 2
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(stderr, "webhook: %v\n", err)
		return 2
	}
	log := opts.NewLogger(stderr)
	ctrl.SetLogger(log)
	cfg, err := opts.LoadRestConfig()
	if err != nil {
		log.Error(err, "Loading the kubeconfig")
		return 1
	}
	if err := Run(ctrl.SetupSignalHandler(), opts, cfg, log); err != nil {
		log.Error(err, "Webhook server stopped with an error")
		return 1
	}
	return 0
}

// Run starts the webhook server with the given options and stops when ctx is done. It runs no
// controllers and no leader election: every replica serves admission requests.
func Run(ctx context.Context, opts *Options, restConfig *rest.Config, log logr.Logger) error {
	ctx = ctrl.LoggerInto(ctx, log)
	gates := opts.ResolveFeatureGates(log)
	cfg := opts.RestConfig(restConfig, UserAgent)

	metricsOpts := metricsserver.Options{BindAddress: opts.MetricsBindAddress, TLSOpts: []func(*tls.Config){hardenTLS}}
	if opts.MetricsBindAddress != "0" {
		metricsOpts.SecureServing = true
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: NewScheme(),
		Cache: cache.Options{
			// Reads of a kind without a registered informer fail instead of starting one:
			// the only informer is the OVirtProvider one webhooks.SetupWithManager registers,
			// so the webhook never lists Secrets or anything else by accident.
			ReaderFailOnMissingInformer: true,
		},
		Metrics:                metricsOpts,
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		LeaderElection:         false,
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{
			Port:     opts.Port,
			CertDir:  opts.CertDir,
			CertName: opts.CertName,
			KeyName:  opts.KeyName,
			// Without GetCertificate in TLSOpts the server reads the files through
			// controller-runtime's certwatcher, which reloads them when cert-manager
			// rotates the Secret (fsnotify, plus a poll every 10 s for symlink swaps).
			TLSOpts: []func(*tls.Config){hardenTLS},
		}),
		Logger: log,
	})
	if err != nil {
		return fmt.Errorf("creating the webhook manager: %w", err)
	}
	if err := webhooks.SetupWithManager(ctx, mgr, gates); err != nil {
		return err
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	// Ready only once the TLS server accepts connections: a pod that is Ready before would get
	// admission requests it cannot answer, and failurePolicy Fail turns that into refusals.
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("adding the webhook readiness check: %w", err)
	}
	// And only once the OVirtProvider cache has synced: before that, defaulting would wait
	// for it inside the 10 s admission timeout.
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		syncCtx, cancel := context.WithTimeout(req.Context(), cacheSyncCheckTimeout)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(syncCtx) {
			return errors.New("the OVirtProvider cache has not synced yet")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("adding the cache readiness check: %w", err)
	}

	log.Info("Starting the CAPOV webhook server", "port", opts.Port, "certDir", opts.CertDir,
		"metricsBindAddress", opts.MetricsBindAddress, "healthProbeBindAddress", opts.HealthProbeBindAddress)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the webhook server: %w", err)
	}
	log.Info("Webhook server stopped")
	return nil
}

// hardenTLS requires TLS 1.2 and serves HTTP/1.1 only: HTTP/2 is turned off as Kubernetes
// projects do since the HTTP/2 rapid-reset and stream-cancellation CVEs (CVE-2023-44487,
// CVE-2023-39325); the API server talks HTTP/1.1 to webhooks just as well.
func hardenTLS(c *tls.Config) {
	c.MinVersion = tls.VersionTLS12
	c.NextProtos = []string{"http/1.1"}
}
