package webhook

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/capov/capov/pkg/app/options"
)

// Options are the webhook server's flags.
type Options struct {
	options.Common

	// Port is the HTTPS port of the admission webhook server.
	Port int
	// CertDir holds tls.crt and tls.key (the cert-manager Secret mount); the files are
	// reloaded when they change.
	CertDir string
	// CertName and KeyName are the file names in CertDir.
	CertName, KeyName string
}

// NewOptions returns the defaults.
func NewOptions() *Options { return &Options{} }

// AddFlags registers the webhook server's flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Common.AddFlags(fs, ":8443", ":8081")
	fs.IntVar(&o.Port, "webhook-port", 9443, "HTTPS port of the admission webhook server.")
	fs.StringVar(&o.CertDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory with the serving certificate and key (reloaded on rotation).")
	fs.StringVar(&o.CertName, "cert-name", "tls.crt", "Certificate file name in --cert-dir.")
	fs.StringVar(&o.KeyName, "key-name", "tls.key", "Key file name in --cert-dir.")
}

// Validate checks the flag values.
func (o *Options) Validate() error {
	if err := o.Common.Validate(); err != nil {
		return err
	}
	if o.Port < 1 || o.Port > 65535 {
		return fmt.Errorf("--webhook-port: %d is not a TCP port (1-65535)", o.Port)
	}
	if o.CertDir == "" {
		return fmt.Errorf("--cert-dir must not be empty")
	}
	if o.CertName == "" || o.KeyName == "" {
		return fmt.Errorf("--cert-name and --key-name must not be empty")
	}
	return nil
}
