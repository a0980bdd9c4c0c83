package sdk

import (
	"context"
	"crypto/tls"
	"sync"
	"time"

	"github.com/go-logr/logr"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// session is one provider's connection for one set of settings (URL,
// credentials, TLS). It owns the SDK connection, the auth breaker of that
// credential and the lookup cache. A settings change replaces the session.
type session struct {
	f           *Factory
	p           *provider
	cfg         ovirt.Config
	fingerprint string
	tlsConfig   *tls.Config
	cache       *lookupCache
	// hostNames maps host ids to names, clusterDCs cluster ids to their data center ids: read
	// once per session (see idCache).
	hostNames  *idCache
	clusterDCs *idCache

	// ctx is cancelled when the session closes; background logins use it.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	conn    *ovirtsdk.Connection // warmed (logged in); nil until the first login succeeds
	pending *loginAttempt        // the login in progress, shared by all waiters
	closed  bool
	breaker breaker
	// engine is the Engine's product information, read once (engineKnown).
	engine      ovirt.EngineInfo
	engineKnown bool
	// engineRead is held while the product information is read, so that concurrent first
	// callers (every machine's first reconcile after a start) share one GET /api.
	engineRead sync.Mutex
}

// loginAttempt is a single-flight login: every caller that needs a
// connection while it runs waits for the same result.
type loginAttempt struct {
	done chan struct{}
	conn *ovirtsdk.Connection
	err  error
}

func newSession(f *Factory, p *provider, cfg ovirt.Config, fingerprint string, tlsConfig *tls.Config) *session {
	ctx, cancel := context.WithCancel(context.Background())
	return &session{
		f:           f,
		p:           p,
		cfg:         cfg,
		fingerprint: fingerprint,
		tlsConfig:   tlsConfig,
		cache:       newLookupCache(f.opts.LookupCacheTTL, f.opts.now),
		hostNames:   newIDCache(),
		clusterDCs:  newIDCache(),
		ctx:         ctx,
		cancel:      cancel,
		breaker: breaker{
			threshold: f.opts.Limits.AuthFailureThreshold,
			backoff:   f.opts.Limits.AuthBackoff,
		},
	}
}

// logger returns the caller's logger (it carries the reconciler's keys) or
// the factory's, with the provider name.
func (s *session) logger(ctx context.Context) logr.Logger {
	log, err := logr.FromContext(ctx)
	if err != nil {
		log = s.f.log
	}
	return log.WithValues("provider", s.p.name)
}

func (s *session) closedError(op string) error {
	return &ovirt.Error{
		Op:     op,
		Detail: "connection closed (provider settings changed or provider removed); get a new client",
		Kinds:  []error{ovirt.ErrClosed},
	}
}

// close stops the session: further calls fail with ErrClosed, calls in
// flight finish on their own.
func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.cancel()
	if s.conn != nil {
		s.f.closeConn(s.conn)
		s.conn = nil
	}
	s.cache.clear()
	s.hostNames.clear()
	s.clusterDCs.clear()
}

// connection returns the warmed connection, logging in first if needed.
func (s *session) connection(ctx context.Context) (*ovirtsdk.Connection, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, s.closedError("Connect")
	}
	if conn := s.conn; conn != nil {
		s.mu.Unlock()
		return conn, nil
	}
	s.mu.Unlock()
	return s.reconnect(ctx, nil)
}

// reconnect returns a connection other than stale (the one whose token the
// engine just refused), logging in at most once however many callers ask at
// the same time. It honours the auth breaker.
func (s *session) reconnect(ctx context.Context, stale *ovirtsdk.Connection) (*ovirtsdk.Connection, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, s.closedError("Connect")
	}
	if s.conn != nil && s.conn != stale {
		// Someone else already replaced it.
		conn := s.conn
		s.mu.Unlock()
		return conn, nil
	}
	if stale != nil && s.conn == stale {
		// The token is dead: stop handing this connection out, so callers
		// arriving now wait for the new login instead of collecting a 401.
		s.conn = nil
		s.f.closeConn(stale)
	}
	a := s.pending
	if a == nil {
		if remaining := s.breaker.remaining(s.f.opts.now()); remaining > 0 {
			s.mu.Unlock()
			return nil, &ovirt.BreakerOpenError{Remaining: remaining}
		}
		a = &loginAttempt{done: make(chan struct{})}
		s.pending = a
		s.f.background.Add(1)
		// Detached from ctx: a caller giving up must not waste a login that
		// other callers are waiting for.
		go s.login(a)
	}
	s.mu.Unlock()

	select {
	case <-a.done:
		return a.conn, a.err
	case <-ctx.Done():
		return nil, mapError("Connect", ctx.Err())
	}
}

// login builds a new SDK connection and warms it with one Test() before
// anyone else may use it: the SDK stores the SSO token without a lock on the
// first call, so sharing a cold connection is a data race (and one login per
// goroutine).
func (s *session) login(a *loginAttempt) {
	defer s.f.background.Done()
	log := s.f.log.WithValues("provider", s.p.name)

	// Throttle wait plus the SSO and GET /api exchanges, each bounded by the
	// SDK timeout.
	ctx, cancel := context.WithTimeout(s.ctx, 3*s.f.opts.Timeout)
	defer cancel()

	conn, err := ovirtsdk.NewConnectionBuilder().
		URL(s.cfg.URL).
		Username(s.cfg.Credentials.Username).
		Password(s.cfg.Credentials.Password).
		TLSConfig(s.tlsConfig.Clone()).
		Timeout(s.f.opts.Timeout).
		Headers(s.f.headers()).
		Build()
	if err == nil {
		_, err = exec(ctx, s, "Login", conn, func(c *ovirtsdk.Connection) (struct{}, error) {
			return struct{}{}, c.Test()
		})
	}

	result := "success"
	s.mu.Lock()
	s.pending = nil
	closed := s.closed
	switch {
	case closed:
		// Closed while logging in (which also cancels the login): nobody
		// may use this connection, and the waiters learn why.
		if err == nil {
			s.f.closeConn(conn)
		}
		result = "error"
		conn, err = nil, s.closedError("Connect")
	case err == nil:
		s.conn = conn
		if s.breaker.succeeded() {
			s.p.breakerOpen.Set(0)
			log.Info("Closed the oVirt auth breaker after a successful login")
		}
	case loginRefused(err):
		result = "failure"
		if opened := s.breaker.failed(s.f.opts.now()); opened {
			s.p.breakerOpen.Set(1)
			log.Info("Suspending oVirt logins after repeated authentication failures",
				"failures", s.breaker.failures, "backoff", s.breaker.backoff)
		}
		conn = nil
	default:
		result = "error"
		conn = nil
	}
	s.mu.Unlock()

	if !closed {
		// A closed session may belong to a forgotten provider, whose
		// series must stay deleted.
		s.f.m.logins.WithLabelValues(s.p.name, result).Inc()
	}
	if err != nil {
		err = mapError("Connect", err)
		log.V(2).Info("Logging in to oVirt failed", "result", result, "error", err.Error())
	} else {
		log.V(2).Info("Logged in to oVirt")
	}
	a.conn, a.err = conn, err
	close(a.done)
}

// breaker is the per-credential auth circuit breaker. It protects directory
// accounts (LDAP/IdM lock an account after a few bad passwords) from a
// manager retrying a wrong password on every reconcile. Guarded by
// session.mu.
type breaker struct {
	threshold int // <0: disabled
	backoff   time.Duration

	failures  int       // consecutive SSO refusals
	openUntil time.Time // no login before this instant
	open      bool      // the gauge's view: opened and not yet closed by a success
}

// remaining is how long logins stay suspended; 0 means a login may be
// attempted (closed, or half-open after the back-off).
func (b *breaker) remaining(now time.Time) time.Duration {
	if b.threshold < 0 || !now.Before(b.openUntil) {
		return 0
	}
	return b.openUntil.Sub(now)
}

// failed records an SSO refusal; it reports whether the breaker (re)opened.
// After the back-off, one more refusal re-opens it at once.
func (b *breaker) failed(now time.Time) bool {
	b.failures++
	if b.threshold < 0 || b.failures < b.threshold {
		return false
	}
	b.openUntil = now.Add(b.backoff)
	b.open = true
	return true
}

// succeeded resets the breaker; it reports whether it was open.
func (b *breaker) succeeded() bool {
	wasOpen := b.open
	b.failures = 0
	b.openUntil = time.Time{}
	b.open = false
	return wasOpen
}
