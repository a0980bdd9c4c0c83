package options

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
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
// stop or --help, 2 for bad flags, 1 for a failure.
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
	if err := b.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", b.Name, err)
		return 2
	}
	log := b.Common.NewLogger(stderr)
	ctrl.SetLogger(log)
	cfg, err := b.Common.LoadRestConfig()
	if err != nil {
		log.Error(err, "Loading the kubeconfig")
		return 1
	}
	if err := b.Run(ctrl.SetupSignalHandler(), cfg, log); err != nil {
		log.Error(err, "Stopped with an error")
		return 1
	}
	return 0
}

// MetricsServer returns the metrics server options of --metrics-bind-address: HTTPS with
// Kubernetes authentication and authorization, or disabled with "0".
func (c *Common) MetricsServer() metricsserver.Options {
	opts := metricsserver.Options{BindAddress: c.MetricsBindAddress, TLSOpts: []func(*tls.Config){HardenTLS}}
	if c.MetricsBindAddress != "0" {
		opts.SecureServing = true
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return opts
}

// HardenTLS requires TLS 1.2 and disables HTTP/2 (CVE-2023-44487 "rapid reset" and
// CVE-2023-39325) on the servers of both binaries.
func HardenTLS(c *tls.Config) {
	c.MinVersion = tls.VersionTLS12
	c.NextProtos = []string{"http/1.1"}
}
