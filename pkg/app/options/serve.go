package options

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The names of the sockets a supervisor can hand over (LISTEN_FDNAMES).
const (
	ListenerWebhook = "webhook"
	ListenerHealth  = "health"
)

// listenFDsStart is the first file descriptor of handed-over sockets (SD_LISTEN_FDS_START).
const listenFDsStart = 3

// Listeners are the listening sockets a supervisor handed over at start, by name, following
// the socket-activation protocol of systemd: LISTEN_FDS is their count, from file descriptor 3
// on; LISTEN_FDNAMES their colon-separated names; LISTEN_PID, when set, the process they are
// meant for. A supervisor that holds a port until the process takes it over (systemd, a test
// harness) so never races another process for it. Names other than ListenerWebhook and
// ListenerHealth are refused.
type Listeners struct {
	mu sync.Mutex
	ls map[string]net.Listener
}

// InheritedListeners reads the handed-over sockets from the environment and removes the
// variables, so that a child process never takes them for its own.
func InheritedListeners() (*Listeners, error) {
	ls, err := parseListeners(os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_FDNAMES"), os.Getenv("LISTEN_PID"), os.Getpid(), fileListener)
	for _, v := range []string{"LISTEN_FDS", "LISTEN_FDNAMES", "LISTEN_PID"} {
		_ = os.Unsetenv(v) // never fails for these names
	}
	return ls, err
}

func fileListener(fd int, name string) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), name)
	if f == nil {
		return nil, fmt.Errorf("file descriptor %d is not open", fd)
	}
	defer f.Close() // net.FileListener dups it
	return net.FileListener(f)
}

func parseListeners(count, names, pid string, self int, open func(fd int, name string) (net.Listener, error)) (*Listeners, error) {
	ls := &Listeners{ls: map[string]net.Listener{}}
	if count == "" {
		return ls, nil
	}
	if pid != "" && pid != strconv.Itoa(self) {
		return ls, nil // meant for another process (the one that exec'ed this one)
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("LISTEN_FDS=%q: not a count of sockets", count)
	}
	parts := strings.Split(names, ":")
	if names == "" || len(parts) != n {
		return nil, fmt.Errorf("LISTEN_FDNAMES=%q must name each of the %d handed-over sockets (%s or %s)", names, n, ListenerWebhook, ListenerHealth)
	}
	for i, name := range parts {
		if name != ListenerWebhook && name != ListenerHealth {
			return nil, fmt.Errorf("LISTEN_FDNAMES: socket %d is named %q; the names are %s and %s", i, name, ListenerWebhook, ListenerHealth)
		}
		if _, dup := ls.ls[name]; dup {
			return nil, fmt.Errorf("LISTEN_FDNAMES: %q is named twice", name)
		}
		l, err := open(listenFDsStart+i, name)
		if err != nil {
			return nil, fmt.Errorf("taking over the %s socket (file descriptor %d): %w", name, listenFDsStart+i, err)
		}
		ls.ls[name] = l
	}
	return ls, nil
}

// NewListeners returns Listeners holding ls by name, for a process that runs a binary's Run
// in-process (tests) and hands it listeners it holds.
func NewListeners(ls map[string]net.Listener) *Listeners {
	l := &Listeners{ls: map[string]net.Listener{}}
	for name, ln := range ls {
		l.ls[name] = ln
	}
	return l
}

// Take returns the handed-over socket of that name and forgets it, or nil.
func (l *Listeners) Take(name string) net.Listener {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := l.ls[name]
	delete(l.ls, name)
	return ln
}

// Listen returns the handed-over socket of that name, else a new TCP listener on addr; "0"
// (as controller-runtime's address flags) disables the endpoint: nil, nil.
func (l *Listeners) Listen(name, addr string) (net.Listener, error) {
	if ln := l.Take(name); ln != nil {
		return ln, nil
	}
	if addr == "0" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s for the %s endpoint: %w", addr, name, err)
	}
	return ln, nil
}

// Close closes the sockets nobody took.
func (l *Listeners) Close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, ln := range l.ls {
		_ = ln.Close() // unused; nothing to report
		delete(l.ls, name)
	}
}

// Probes are the /healthz and /readyz checks of a binary, served on a listener of its own
// (ServeProbes) so that a handed-over socket or port 0 can serve them. The endpoints behave as
// controller-runtime's: /readyz and /healthz answer 200 when every check passes, and
// /readyz/<check> reports one check.
type Probes struct {
	mu             sync.Mutex
	healthz, ready map[string]healthz.Checker
}

// AddHealthzCheck adds a liveness check.
func (p *Probes) AddHealthzCheck(name string, check healthz.Checker) error {
	return p.add(&p.healthz, name, check)
}

// AddReadyzCheck adds a readiness check.
func (p *Probes) AddReadyzCheck(name string, check healthz.Checker) error {
	return p.add(&p.ready, name, check)
}

func (p *Probes) add(m *map[string]healthz.Checker, name string, check healthz.Checker) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if *m == nil {
		*m = map[string]healthz.Checker{}
	}
	if _, dup := (*m)[name]; dup {
		return fmt.Errorf("check %q is added twice", name)
	}
	(*m)[name] = check
	return nil
}

// Handler serves /healthz and /readyz (and one check under each).
func (p *Probes) Handler() http.Handler {
	p.mu.Lock()
	defer p.mu.Unlock()
	mux := http.NewServeMux()
	for path, checks := range map[string]map[string]healthz.Checker{"/healthz": p.healthz, "/readyz": p.ready} {
		if checks == nil {
			checks = map[string]healthz.Checker{}
		}
		h := http.StripPrefix(path, &healthz.Handler{Checks: checks})
		mux.Handle(path, h)
		mux.Handle(path+"/", h)
	}
	return mux
}

// ServeProbes adds to mgr the HTTP server of the probes on ln (started before the caches, as
// controller-runtime's own health server is) and logs its address; a nil ln (disabled) adds
// nothing.
func ServeProbes(mgr manager.Manager, p *Probes, ln net.Listener, log logr.Logger) error {
	if ln == nil {
		return nil
	}
	srv := &manager.Server{
		Name:     "health probe",
		Server:   &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 10 * time.Second},
		Listener: ln,
	}
	if err := mgr.Add(srv); err != nil {
		return fmt.Errorf("adding the health probe server: %w", err)
	}
	log.Info("Serving", "endpoint", "health", "address", ln.Addr().String())
	return nil
}

// bindAddresser is the controller-runtime metrics server's accessor of its bound address.
type bindAddresser interface{ GetBindAddr() string }

// RunMetrics runs the metrics server of opts until ctx ends, beside the manager (metrics are
// served before the caches sync and by every replica), and logs the address it bound once it
// listens: with port 0 that line is how a supervisor learns it. With metrics disabled ("0") the
// returned function only waits for ctx.
func RunMetrics(ctx context.Context, opts metricsserver.Options, cfg *rest.Config, httpClient *http.Client, log logr.Logger) (func(context.Context) error, error) {
	if opts.BindAddress == "0" || opts.BindAddress == "" {
		return func(ctx context.Context) error { <-ctx.Done(); return nil }, nil
	}
	srv, err := metricsserver.NewServer(opts, cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the metrics server: %w", err)
	}
	return func(ctx context.Context) error {
		ctx = logr.NewContext(ctx, log)
		errs := make(chan error, 1)
		go func() { errs <- srv.Start(ctx) }()
		if ba, ok := srv.(bindAddresser); ok {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
		wait:
			for {
				select {
				case err := <-errs:
					return err
				case <-ctx.Done():
					break wait
				case <-tick.C:
					if a := ba.GetBindAddr(); a != "" {
						log.Info("Serving", "endpoint", "metrics", "address", a)
						break wait
					}
				}
			}
		}
		return <-errs
	}, nil
}

// RunAll runs fns until ctx ends or one of them fails, then stops the others and returns the
// first error.
func RunAll(ctx context.Context, fns ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(fns))
	for _, fn := range fns {
		go func() {
			err := fn(ctx)
			cancel()
			errs <- err
		}()
	}
	var first error
	for range fns {
		if err := <-errs; err != nil && first == nil && !errors.Is(err, context.Canceled) {
			first = err
		}
	}
	return first
}
