// Package options holds the flags and start-up steps that the manager and the webhook binaries
// share: logging, feature gates, metrics and health-probe addresses, Kubernetes API limits.
package options

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/capov/capov/pkg/featuregates"
)

// Common are the flags both binaries accept.
type Common struct {
	// MetricsBindAddress is where /metrics is served over HTTPS with Kubernetes authn/authz;
	// "0" disables the endpoint.
	MetricsBindAddress string
	// HealthProbeBindAddress is where /healthz and /readyz are served over HTTP.
	HealthProbeBindAddress string
	// FeatureGates is the raw --feature-gates value.
	FeatureGates featuregates.Flag
	// Debug raises the log verbosity to DebugVerbosity.
	Debug bool
	// Verbosity is the logr verbosity (V level) to log at.
	Verbosity int
	// LogFormat is "text" or "json".
	LogFormat string
	// KubeAPIQPS and KubeAPIBurst bound the requests to the management cluster API server.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// Kubeconfig is the path of a kubeconfig file; empty means $KUBECONFIG, else the in-cluster
	// configuration.
	Kubeconfig string
}

// DebugVerbosity is the verbosity --debug selects: it includes the V(4) per-call oVirt traces.
const DebugVerbosity = 5

// AddFlags registers the common flags.
func (c *Common) AddFlags(fs *pflag.FlagSet, defaultMetrics, defaultHealth string) {
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", defaultMetrics,
		`Address of the metrics endpoint, served over HTTPS with Kubernetes authentication and authorization (the scraper needs "get" on the non-resource URL /metrics). "0" disables it.`)
	fs.StringVar(&c.HealthProbeBindAddress, "health-probe-bind-address", defaultHealth,
		"Address of the HTTP /healthz and /readyz endpoints.")
	fs.Var(&c.FeatureGates, "feature-gates", featuregates.Usage())
	fs.BoolVar(&c.Debug, "debug", false, fmt.Sprintf("Log at debug verbosity (V(%d)): per-request traces, for the manager every oVirt API call.", DebugVerbosity))
	fs.IntVar(&c.Verbosity, "v", 0, "Log verbosity (logr V level); --debug raises it.")
	fs.StringVar(&c.LogFormat, "log-format", "text", `Log format: "text" or "json".`)
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
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("--log-format: %q is not supported, use text or json", c.LogFormat)
	}
	if c.Verbosity < 0 {
		return fmt.Errorf("--v: %d is negative, use 0 or more", c.Verbosity)
	}
	if c.KubeAPIQPS <= 0 || c.KubeAPIBurst <= 0 {
		return fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive (got %v and %d)", c.KubeAPIQPS, c.KubeAPIBurst)
	}
	return nil
}

// NewLogger builds the logger the flags describe, writing to w.
func (c *Common) NewLogger(w io.Writer) logr.Logger {
	v := c.Verbosity
	if c.Debug && v < DebugVerbosity {
		v = DebugVerbosity
	}
	opts := zap.Options{
		Development:     false,
		DestWriter:      w,
		Level:           zapcore.Level(-v),
		StacktraceLevel: zapcore.PanicLevel,
		TimeEncoder:     zapcore.ISO8601TimeEncoder,
	}
	if c.LogFormat == "text" {
		opts.Encoder = zapcore.NewConsoleEncoder(consoleEncoderConfig())
	}
	return zap.New(zap.UseFlagOptions(&opts))
}

func consoleEncoderConfig() zapcore.EncoderConfig {
	cfg := zapcore.EncoderConfig{
		TimeKey:        "ts",
		LevelKey:       "level",
		NameKey:        "logger",
		MessageKey:     "msg",
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeLevel:    zapcore.CapitalLevelEncoder,
		EncodeTime:     zapcore.ISO8601TimeEncoder,
		EncodeDuration: zapcore.StringDurationEncoder,
	}
	return cfg
}

// ResolveFeatureGates parses --feature-gates and logs, in one line containing "feature gates",
// the resolved set; each ignored key or value is logged as a separate warning line.
func (c *Common) ResolveFeatureGates(log logr.Logger) featuregates.Gates {
	gates, warnings := c.FeatureGates.Resolve()
	for _, w := range warnings {
		log.Info("WARNING: "+w, "flag", "--feature-gates")
	}
	log.Info("Resolved feature gates", "featureGates", gates.String(), "flag", c.FeatureGates.String())
	return gates
}

// RestConfig applies the API-server limits to cfg and names the client.
func (c *Common) RestConfig(cfg *rest.Config, userAgent string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = c.KubeAPIQPS
	cfg.Burst = c.KubeAPIBurst
	cfg.UserAgent = userAgent
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
