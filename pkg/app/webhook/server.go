package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// admissionServer is controller-runtime's webhook server (its mux, with the per-path metrics of
// Register) served on a listener the binary opens before the manager starts: the --webhook-port
// one, or the socket a supervisor handed over (options.ListenerWebhook), which a test harness
// holds until the process takes it so that no other process can bind the port in between.
type admissionServer struct {
	*ctrlwebhook.DefaultServer
	opts    ctrlwebhook.Options
	ln      net.Listener
	log     logr.Logger
	started atomic.Bool
}

var _ ctrlwebhook.Server = (*admissionServer)(nil)

func newAdmissionServer(opts ctrlwebhook.Options, ln net.Listener, log logr.Logger) (*admissionServer, error) {
	def, ok := ctrlwebhook.NewServer(opts).(*ctrlwebhook.DefaultServer)
	if !ok {
		return nil, errors.New("controller-runtime's webhook server is not a *DefaultServer")
	}
	return &admissionServer{DefaultServer: def, opts: opts, ln: ln, log: log}, nil
}

// Start serves the admission endpoints over TLS until ctx ends, with the certificate of
// --cert-dir reloaded on rotation, as controller-runtime's server does.
func (s *admissionServer) Start(ctx context.Context) error {
	cfg := &tls.Config{NextProtos: []string{"h2"}}
	for _, op := range s.opts.TLSOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		w, err := certwatcher.New(filepath.Join(s.opts.CertDir, s.opts.CertName), filepath.Join(s.opts.CertDir, s.opts.KeyName))
		if err != nil {
			return fmt.Errorf("loading the serving certificate: %w", err)
		}
		cfg.GetCertificate = w.GetCertificate
		go func() {
			if err := w.Start(ctx); err != nil {
				s.log.Error(err, "Watching the serving certificate")
			}
		}()
	}
	srv := &http.Server{
		Handler:           s.WebhookMux(),
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       90 * time.Second,
		ReadHeaderTimeout: 32 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			s.log.Error(err, "Shutting down the admission server")
		}
	}()
	s.log.Info("Serving", "endpoint", "webhook", "address", s.ln.Addr().String())
	s.started.Store(true)
	if err := srv.Serve(tls.NewListener(s.ln, cfg)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving admission requests: %w", err)
	}
	<-closed
	return nil
}

// StartedChecker is ready once the server accepts TLS connections on its address.
func (s *admissionServer) StartedChecker() healthz.Checker {
	return func(req *http.Request) error {
		if !s.started.Load() {
			return errors.New("the admission server has not started yet")
		}
		d := &net.Dialer{Timeout: 10 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", s.ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a reachability probe of our own listener
		if err != nil {
			return fmt.Errorf("the admission server is not reachable: %w", err)
		}
		return conn.Close()
	}
}
