// Package options holds the flags and start-up steps that the manager and the webhook binaries
// share: logging, TLS of the HTTPS servers, version, feature gates, metrics and health-probe
// addresses, Kubernetes API limits.
package options

import (
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	logsv1 "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-api/util/apiwarnings"
	capiflags "sigs.k8s.io/cluster-api/util/flags"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capov/capov/pkg/featuregates"
	"github.com/capov/capov/pkg/version"
)

// Common are the flags both binaries accept.
type Common struct {
	// MetricsBindAddress is where /metrics is served over HTTPS with Kubernetes authn/authz;
	// "0" disables the endpoint.
	MetricsBindAddress string
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint (a mounted cert-manager
	// Secret); empty means a self-signed certificate made at start.
	MetricsCertDir string
	// HealthProbeBindAddress is where /healthz and /readyz are served over HTTP.
	HealthProbeBindAddress string
	// ProfilerAddress is where net/http/pprof is served; empty disables it.
	ProfilerAddress string
	// FeatureGates is the raw --feature-gates value.
	FeatureGates featuregates.Flag
	// Debug raises the log verbosity to DebugVerbosity.
	Debug bool
	// Logs is the component-base logging configuration of --logging-format (alias --log-format),
	// --v, --vmodule and --log-flush-frequency, as in Cluster API's own binaries.
	Logs logsv1.LoggingConfiguration
	// TLSMinVersion, TLSCipherSuites and TLSCurvePreferences are Cluster API's --tls-* flags
	// (sigs.k8s.io/cluster-api/util/flags) for the HTTPS servers.
	TLSMinVersion       string
	TLSCipherSuites     []string
	TLSCurvePreferences []int32
	// ShowVersion prints the version and exits.
	ShowVersion bool
	// KubeAPIQPS and KubeAPIBurst bound the requests to the management cluster API server.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// Kubeconfig is the path of a kubeconfig file; empty means $KUBECONFIG, else the in-cluster
	// configuration.
	Kubeconfig string
	// Listeners are the sockets a supervisor handed over (Main sets them; nil: none).
	Listeners *Listeners
}

// DebugVerbosity is the verbosity --debug selects: it includes the V(4) per-call oVirt traces.
const DebugVerbosity = 5

// AddFlags registers the common flags.
func (c *Common) AddFlags(fs *pflag.FlagSet, defaultMetrics, defaultHealth string) {
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", defaultMetrics,
		`Address of the metrics endpoint, served over HTTPS with Kubernetes authentication and authorization (the scraper needs "get" on the non-resource URL /metrics). "0" disables it.`)
	fs.StringVar(&c.MetricsCertDir, "metrics-cert-dir", "",
		"Directory with tls.crt and tls.key for the metrics endpoint, e.g. a mounted cert-manager Secret (renewed certificates are picked up). Empty: a self-signed certificate made at start.")
	fs.StringVar(&c.HealthProbeBindAddress, "health-probe-bind-address", defaultHealth,
		"Address of the HTTP /healthz and /readyz endpoints.")
	fs.StringVar(&c.ProfilerAddress, "profiler-address", "",
		"Address of Go's pprof endpoints (/debug/pprof/: heap, CPU, goroutines), e.g. localhost:6060, reached with kubectl port-forward. Unauthenticated: never bind it to a Service. Empty disables it.")
	fs.Var(&c.FeatureGates, "feature-gates", featuregates.Usage())

	logsv1.SetRecommendedLoggingConfiguration(&c.Logs)
	logsv1.AddFlags(&c.Logs, fs)
	// These need component-base's LoggingAlphaOptions feature gate, which CAPOV does not expose:
	// logsv1.AddFlags always registers them, so they are hidden from --help.
	for _, name := range []string{"log-text-split-stream", "log-text-info-buffer-size", "log-json-split-stream", "log-json-info-buffer-size"} {
		_ = fs.MarkHidden(name) // only fails for a flag that does not exist
	}
	fs.StringVar(&c.Logs.Format, "log-format", c.Logs.Format, "Alias of --logging-format, kept for existing deployments.")
	fs.BoolVar(&c.Debug, "debug", false, fmt.Sprintf("Log at debug verbosity: the same as --v=%d (a higher --v wins). Per-request traces, for the manager every oVirt API call.", DebugVerbosity))

	fs.StringVar(&c.TLSMinVersion, "tls-min-version", "VersionTLS12",
		"Minimum TLS version of the HTTPS servers (metrics; admission in the webhook). Possible values are "+strings.Join(cliflag.TLSPossibleVersions(), ", ")+".")
	fs.StringSliceVar(&c.TLSCipherSuites, "tls-cipher-suites", nil,
		"Comma-separated list of cipher suites of the HTTPS servers for TLS 1.2 (Go does not make TLS 1.3 suites configurable). If omitted, Go's defaults are used. "+
			"Preferred values: "+strings.Join(cliflag.PreferredTLSCipherNames(), ", ")+". Insecure values: "+strings.Join(cliflag.InsecureTLSCipherNames(), ", ")+".")
	fs.Int32SliceVar(&c.TLSCurvePreferences, "tls-curve-preferences", nil,
		"Comma-separated list of numeric Go crypto/tls CurveID values the HTTPS servers allow for key exchange (see https://pkg.go.dev/crypto/tls#CurveID). If omitted, Go's defaults are used.")

	fs.BoolVar(&c.ShowVersion, "version", false, "Print the version, git commit and build date, and exit.")
	fs.Float32Var(&c.KubeAPIQPS, "kube-api-qps", 100, "Maximum queries per second to the management cluster API server. A machine creation costs about 18 requests (status patches, events), so 100 keeps pace with the default 20 oVirt calls per second.")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", 200, "Maximum burst of queries to the management cluster API server.")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "Path to the kubeconfig of the management cluster (default: $KUBECONFIG, else the in-cluster service account).")
}

// LoadRestConfig returns the management cluster configuration the flags select.
func (c *Common) LoadRestConfig() (*rest.Config, error) {
	if c.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading --kubeconfig %s: %w", c.Kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the cluster configuration ($KUBECONFIG or in-cluster): %w", err)
	}
	return cfg, nil
}

// Validate checks the common flags.
func (c *Common) Validate() error {
	if errs := logsv1.Validate(c.LoggingConfiguration(), nil, nil); len(errs) > 0 {
		return fmt.Errorf("--logging-format, --v or --vmodule: %w", errs.ToAggregate())
	}
	if _, err := c.TLSOptions(); err != nil {
		return err
	}
	if c.MetricsCertDir != "" {
		for _, f := range []string{metricsCertName, metricsKeyName} {
			if _, err := os.Stat(filepath.Join(c.MetricsCertDir, f)); err != nil {
				return fmt.Errorf("--metrics-cert-dir %s must hold %s and %s (a kubernetes.io/tls Secret mounted there): %w",
					c.MetricsCertDir, metricsCertName, metricsKeyName, err)
			}
		}
	}
	if c.KubeAPIQPS <= 0 || c.KubeAPIBurst <= 0 {
		return fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive (got %v and %d)", c.KubeAPIQPS, c.KubeAPIBurst)
	}
	return nil
}

// LoggingConfiguration returns the logging configuration the flags select: --debug raises the
// verbosity to DebugVerbosity.
func (c *Common) LoggingConfiguration() *logsv1.LoggingConfiguration {
	cfg := c.Logs.DeepCopy()
	if c.Debug && cfg.Verbosity < DebugVerbosity {
		cfg.Verbosity = DebugVerbosity
	}
	return cfg
}

// SetUpLogging applies the logging flags to the process, writing to w, and returns the logger:
// component-base's ValidateAndApply installs the selected format as klog's global logger
// (klog.SetLoggerWithOptions), and controller-runtime logs through klog too
// (ctrl.SetLogger(klog.Background())), so client-go, controller-runtime, Cluster API and CAPOV
// all log in one format. It may be called once per process.
func (c *Common) SetUpLogging(w io.Writer) (logr.Logger, error) {
	if err := logsv1.ValidateAndApplyWithOptions(c.LoggingConfiguration(), &logsv1.LoggingOptions{ErrorStream: w, InfoStream: w}, nil); err != nil {
		return logr.Discard(), fmt.Errorf("applying the logging flags: %w", err)
	}
	log := klog.Background()
	ctrl.SetLogger(log)
	return log, nil
}

// TLSOptions returns the TLS settings of the HTTPS servers (metrics; admission in the webhook):
// HTTP/2 off (CVE-2023-44487 "rapid reset" and CVE-2023-39325, as in Kubernetes' own
// components), then --tls-min-version, --tls-cipher-suites and --tls-curve-preferences with
// Cluster API's semantics (its util/flags does the parsing).
func (c *Common) TLSOptions() ([]func(*tls.Config), error) {
	capiTLS, _, err := capiflags.GetManagerOptions(capiflags.ManagerOptions{
		TLSMinVersion:       c.TLSMinVersion,
		TLSCipherSuites:     c.TLSCipherSuites,
		TLSCurvePreferences: c.TLSCurvePreferences,
		// CAPOV keeps its own --metrics-bind-address; this only stops GetManagerOptions from
		// building metrics options with pprof handlers that are not used.
		InsecureDiagnostics: true,
	})
	if err != nil {
		return nil, fmt.Errorf("--tls-min-version, --tls-cipher-suites or --tls-curve-preferences: %w", err)
	}
	return append([]func(*tls.Config){disableHTTP2}, capiTLS...), nil
}

// disableHTTP2 offers only HTTP/1.1 in ALPN.
func disableHTTP2(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
}

// ResolveFeatureGates parses --feature-gates and logs, in one line containing "feature gates",
// the resolved set; each ignored key or value is logged as a separate warning line.
func (c *Common) ResolveFeatureGates(log logr.Logger) featuregates.Gates {
	gates, warnings := c.FeatureGates.Resolve()
	for _, w := range warnings {
		// klog's printf form, at its warning severity: the structured form would quote the
		// message and escape the gate name's quotes, and `grep 'feature gate "disk-magic"'`
		// is what people type. In JSON the line is a plain "msg".
		klog.Warning("WARNING: " + w + " (--feature-gates)")
	}
	log.Info("Resolved feature gates", "featureGates", gates.String(), "flag", c.FeatureGates.String())
	return gates
}

// RestConfig applies the API-server limits to cfg, names the client and drops the API server
// warnings Cluster API drops (finalizer names without a path, deprecations); others are logged.
func (c *Common) RestConfig(cfg *rest.Config, userAgent string, log logr.Logger) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = c.KubeAPIQPS
	cfg.Burst = c.KubeAPIBurst
	cfg.UserAgent = userAgent
	cfg.WarningHandler = apiwarnings.DefaultHandler(log.WithName("API Server Warning"))
	cfg.WarningHandlerWithContext = nil
	return cfg
}

// Parse parses args into fs, printing usage on --help. It returns pflag.ErrHelp for --help.
func Parse(fs *pflag.FlagSet, args []string) error {
	fs.SortFlags = true
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return nil
}

// Env returns the value of an environment variable or def.
func Env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// UserAgent is the User-Agent of a binary's clients, e.g. "capov-manager/v0.4.0 (linux/amd64)
// capov/1a2b3c4"; the API server names the field manager after the part before the slash.
func UserAgent(component string) string {
	return version.Get().UserAgent(component)
}
