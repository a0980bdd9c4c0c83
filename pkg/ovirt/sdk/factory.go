// Package sdk implements ovirt.Client and ovirt.Factory on top of the oVirt
// Go SDK (github.com/ovirt/go-ovirt). It is the only package allowed to
// import the SDK.
//
// The SDK has sharp edges this package exists to hide: no context support,
// a data race on the first call of a connection, no re-login when the SSO
// token expires, panicking Must* helpers, blocking WaitFor* helpers and
// request logging that prints tokens and cloud-init payloads. See
// docs/ovirt-client.md.
package sdk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	ovirtsdk "github.com/ovirt/go-ovirt"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/capov/capov/pkg/ovirt"
)

// Defaults applied by NewFactory to zero-valued options.
const (
	DefaultTimeout              = 30 * time.Second
	DefaultLookupCacheTTL       = 2 * time.Minute
	DefaultQPS                  = 20
	DefaultBurst                = 40
	DefaultMaxInFlight          = 10
	DefaultAuthFailureThreshold = 3
	DefaultAuthBackoff          = 5 * time.Minute
)

// Limits protect one engine from one manager. They apply per OVirtProvider:
// every provider gets its own token bucket, in-flight cap and breakers.
type Limits struct {
	// QPS is the sustained rate of engine calls; 0 means DefaultQPS, a
	// negative value disables rate limiting.
	QPS float64
	// Burst is the token bucket size; 0 means DefaultBurst.
	Burst int
	// MaxInFlight caps concurrent engine calls; 0 means DefaultMaxInFlight,
	// a negative value disables the cap.
	MaxInFlight int
	// AuthFailureThreshold is the number of consecutive SSO refusals of one
	// credential after which logins stop for AuthBackoff; 0 means
	// DefaultAuthFailureThreshold, a negative value disables the breaker.
	AuthFailureThreshold int
	// AuthBackoff is how long logins stay suspended; 0 means
	// DefaultAuthBackoff.
	AuthBackoff time.Duration
}

// Options configure a Factory.
type Options struct {
	Limits Limits
	// Registerer receives the metrics (controller-runtime's metrics.Registry
	// in the manager); nil means no metrics.
	Registerer prometheus.Registerer
	// Logger is used when a call's context carries no logger. Per-call
	// traces are logged at V(4).
	Logger logr.Logger
	// Timeout bounds every HTTP exchange with the engine (the SDK's own
	// http.Client timeout, since it takes no context); 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// LookupCacheTTL is how long FindCluster/FindTemplate/FindStorageDomain/
	// FindVnicProfile results are reused; 0 means DefaultLookupCacheTTL, a
	// negative value disables the cache.
	LookupCacheTTL time.Duration
	// UserAgent names CAPOV to the engine (its access log and audit), e.g.
	// "capov-manager/v0.4.0 (linux/amd64) capov/1a2b3c4"; the SDK's own
	// "GoSDK/<version>" is appended. Empty leaves the SDK's alone.
	UserAgent string

	// now is the clock for the breaker and the lookup cache (tests).
	now func() time.Time
}

// Factory is the SDK-backed ovirt.Factory. It owns one connection per
// provider and shares it among all reconcilers.
type Factory struct {
	opts Options
	log  logr.Logger
	m    *metrics

	mu        sync.Mutex
	providers map[string]*provider
	closed    bool

	// background tracks logins and SDK Close calls running detached from
	// any caller, so Close can wait for them.
	background sync.WaitGroup
}

var _ ovirt.Factory = (*Factory)(nil)

// NewFactory returns a Factory; zero-valued options take the defaults.
func NewFactory(opts Options) *Factory {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.LookupCacheTTL == 0 {
		opts.LookupCacheTTL = DefaultLookupCacheTTL
	}
	if opts.Limits.QPS == 0 {
		opts.Limits.QPS = DefaultQPS
	}
	if opts.Limits.Burst <= 0 {
		opts.Limits.Burst = DefaultBurst
	}
	if opts.Limits.MaxInFlight == 0 {
		opts.Limits.MaxInFlight = DefaultMaxInFlight
	}
	if opts.Limits.AuthFailureThreshold == 0 {
		opts.Limits.AuthFailureThreshold = DefaultAuthFailureThreshold
	}
	if opts.Limits.AuthBackoff <= 0 {
		opts.Limits.AuthBackoff = DefaultAuthBackoff
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	return &Factory{
		opts:      opts,
		log:       log,
		m:         newMetrics(opts.Registerer),
		providers: map[string]*provider{},
	}
}

// provider is the state kept per OVirtProvider across credential rotations:
// the throttles protect the engine, whatever the credential.
type provider struct {
	name        string
	limiter     *rate.Limiter
	slots       chan struct{} // nil: no in-flight cap
	inFlight    prometheus.Gauge
	limiterWait prometheus.Observer
	breakerOpen prometheus.Gauge
	session     *session
	// reads shares one call among the VM reads that wait for the same token.
	reads vmReads
}

func (f *Factory) newProvider(name string) *provider {
	limit := rate.Limit(f.opts.Limits.QPS)
	if f.opts.Limits.QPS < 0 {
		limit = rate.Inf
	}
	p := &provider{
		name:        name,
		limiter:     rate.NewLimiter(limit, f.opts.Limits.Burst),
		inFlight:    f.m.inFlight.WithLabelValues(name),
		limiterWait: f.m.limiterWait.WithLabelValues(name),
		breakerOpen: f.m.breakerOpen.WithLabelValues(name),
	}
	if f.opts.Limits.MaxInFlight > 0 {
		p.slots = make(chan struct{}, f.opts.Limits.MaxInFlight)
	}
	p.breakerOpen.Set(0)
	return p
}

// acquire waits for a rate-limit token and an in-flight slot.
func (p *provider) acquire(ctx context.Context) error {
	if err := p.limiter.Wait(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The limiter refuses up front when the deadline would pass first.
		return context.DeadlineExceeded
	}
	if p.slots == nil {
		return nil
	}
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release frees the in-flight slot taken by acquire.
func (p *provider) release() {
	if p.slots != nil {
		<-p.slots
	}
}

// ForProvider implements ovirt.Factory.
func (f *Factory) ForProvider(ctx context.Context, cfg ovirt.Config) (ovirt.Client, error) {
	cfg, tlsConfig, err := validate(cfg)
	if err != nil {
		return nil, err
	}
	fingerprint := cfg.Fingerprint()

	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, &ovirt.Error{Op: "Connect", Detail: "factory closed", Kinds: []error{ovirt.ErrClosed}}
	}
	p := f.providers[cfg.Provider]
	if p == nil {
		p = f.newProvider(cfg.Provider)
		f.providers[cfg.Provider] = p
	}
	s := p.session
	if s == nil || s.fingerprint != fingerprint {
		if s != nil {
			// Logged without values: which setting changed is not
			// interesting enough to risk logging a credential.
			f.log.Info("Replacing oVirt connection after a change of URL, credentials or TLS settings", "provider", cfg.Provider)
			s.close()
		}
		s = newSession(f, p, cfg, fingerprint, tlsConfig)
		p.session = s
		// The breaker belongs to the credential: a new one starts closed.
		p.breakerOpen.Set(0)
	}
	f.mu.Unlock()

	if _, err := s.connection(ctx); err != nil {
		return nil, err
	}
	return &client{s: s}, nil
}

// Forget implements ovirt.Factory.
func (f *Factory) Forget(providerName string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.providers[providerName]
	if p == nil {
		return
	}
	delete(f.providers, providerName)
	if p.session != nil {
		p.session.close()
	}
	f.m.forget(providerName)
}

// Close implements ovirt.Factory. It waits for background logins and SDK
// Close calls (each bounded by Options.Timeout).
func (f *Factory) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	for _, p := range f.providers {
		if p.session != nil {
			p.session.close()
		}
	}
	f.mu.Unlock()
	f.background.Wait()
}

// closeConn closes an SDK connection in the background. The SDK's Close
// posts an SSO logout (with an empty token, so it revokes nothing) and may
// take up to the timeout; nobody should wait for that.
func (f *Factory) closeConn(conn *ovirtsdk.Connection) {
	f.background.Add(1)
	go func() {
		defer f.background.Done()
		_ = conn.Close()
	}()
}

// validate checks cfg and builds its TLS configuration. It normalises the URL
// (a trailing slash makes the SDK request "api//vms").
func validate(cfg ovirt.Config) (ovirt.Config, *tls.Config, error) {
	const op = "Connect"
	if cfg.Provider == "" {
		return cfg, nil, invalid(op, "provider name is empty")
	}
	cfg.URL = strings.TrimRight(strings.TrimSpace(cfg.URL), "/")
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" {
		return cfg, nil, invalid(op, "engine URL %q is not an absolute URL", cfg.URL)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && cfg.TLS.Insecure:
	default:
		return cfg, nil, invalid(op, "engine URL %q must use https (http only with insecure TLS)", cfg.URL)
	}
	if cfg.Credentials.Username == "" || cfg.Credentials.Password == "" {
		return cfg, nil, invalid(op, "username and password must not be empty")
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case cfg.TLS.Insecure:
		tlsConfig.InsecureSkipVerify = true //nolint:gosec // explicitly requested by the OVirtProvider (development only)
	case len(cfg.TLS.CAPEM) > 0:
		// Our own pool: the SDK's CACert would append the CA to the system
		// pool, trusting every public CA for this engine as well.
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.TLS.CAPEM) {
			return cfg, nil, invalid(op, "CA bundle contains no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	default:
		// RootCAs nil: crypto/tls uses the system pool.
	}
	return cfg, tlsConfig, nil
}

// headers are the custom headers of every connection: the User-Agent. The SDK adds custom
// headers to each API request before its own "GoSDK/<version>", and net/http sends the first
// User-Agent value, so ours wins. The SSO token requests (one per login) are built without
// custom headers, and the SDK creates its own http.Transport (no client or RoundTripper can be
// injected), so those still say "GoSDK/<version>".
func (f *Factory) headers() map[string]string {
	if f.opts.UserAgent == "" {
		return nil
	}
	return map[string]string{"User-Agent": f.opts.UserAgent + " GoSDK/" + ovirtsdk.SDK_VERSION}
}
