package options

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/capov/capov/pkg/version"
)

// Binary describes one of the CAPOV binaries for Main.
type Binary struct {
	// Name is the program name in messages and usage.
	Name string
	// Summary is the first line of --help.
	Summary string
	// Common are the binary's shared flags (part of its options).
	Common *Common
	// AddFlags registers all the binary's flags; Validate checks them after parsing.
	AddFlags func(*pflag.FlagSet)
	Validate func() error
	// Run runs the binary until ctx ends.
	Run func(ctx context.Context, cfg *rest.Config, log logr.Logger) error
}

// Main parses args (without the program name), sets up logging and the management cluster
// configuration, and runs b until SIGINT/SIGTERM. It returns the process exit code: 0 on a clean
// stop, --help or --version, 2 for bad flags, 1 for a failure.
func Main(b Binary, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet(b.Name, pflag.ContinueOnError)
	fs.SetOutput(stdout)
	b.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "%s\n\nUsage: %s [flags]\n\nFlags:\n%s", b.Summary, b.Name, fs.FlagUsages())
	}
	if err := Parse(fs, args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "%s: %v\n", b.Name, err)
		return 2
	}
	if b.Common.ShowVersion {
		fmt.Fprintf(stdout, "%s %s\n", b.Name, version.Get())
		return 0
	}
	if err := b.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", b.Name, err)
		return 2
	}
	log, err := b.Common.SetUpLogging(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", b.Name, err)
		return 1
	}
	defer klog.Flush()
	v := version.Get()
	log.Info("Starting "+b.Name, "version", v.GitVersion, "gitCommit", v.GitCommit, "buildDate", v.BuildDate, "goVersion", v.GoVersion)
	applyMemoryLimit(log, "/", os.LookupEnv, debug.SetMemoryLimit)
	cfg, err := b.Common.LoadRestConfig()
	if err != nil {
		log.Error(err, "Loading the kubeconfig")
		return 1
	}
	listeners, err := InheritedListeners()
	if err != nil {
		log.Error(err, "Taking over the handed-over sockets")
		return 1
	}
	defer listeners.Close()
	b.Common.Listeners = listeners
	if err := b.Run(ctrl.SetupSignalHandler(), cfg, log); err != nil {
		log.Error(err, "Stopped with an error")
		return 1
	}
	return 0
}

// The file names of a kubernetes.io/tls Secret, as cert-manager writes them.
const (
	metricsCertName = "tls.crt"
	metricsKeyName  = "tls.key"
)

// MetricsServer returns the metrics server options of --metrics-bind-address: HTTPS with
// Kubernetes authentication and authorization and the --tls-* settings, or disabled with "0".
func (c *Common) MetricsServer() (metricsserver.Options, error) {
	tlsOpts, err := c.TLSOptions()
	if err != nil {
		return metricsserver.Options{}, err
	}
	opts := metricsserver.Options{BindAddress: c.MetricsBindAddress, TLSOpts: tlsOpts}
	if c.MetricsBindAddress != "0" {
		opts.SecureServing = true
		opts.FilterProvider = metricsAuthFilter
	}
	if c.MetricsCertDir != "" {
		// controller-runtime watches the files and serves a renewed certificate.
		opts.CertDir, opts.CertName, opts.KeyName = c.MetricsCertDir, metricsCertName, metricsKeyName
	}
	return opts, nil
}
