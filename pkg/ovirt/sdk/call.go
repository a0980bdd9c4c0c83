package sdk

import (
	"context"
	"fmt"
	"time"

	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// invoke runs one Client operation: it gets the shared connection, runs fn
// under the provider's throttles and, when the engine refuses the SSO token
// (expired, revoked, engine restarted), logs in again once and retries once.
// The retry is safe for writes too: a refused token means the engine did not
// execute the request. Errors come back mapped to the ovirt sentinels.
func invoke[T any](ctx context.Context, s *session, op string, fn func(*ovirtsdk.Connection) (T, error)) (T, error) {
	var zero T
	conn, err := s.connection(ctx)
	if err != nil {
		return zero, err
	}
	v, err := exec(ctx, s, op, conn, fn)
	if err != nil && ctx.Err() == nil && s.refusedToken(ctx, conn, err) {
		s.logger(ctx).V(2).Info("Logging in again after the engine refused the SSO token", "operation", op)
		conn, err = s.reconnect(ctx, conn)
		if err != nil {
			return zero, err
		}
		v, err = exec(ctx, s, op, conn, fn)
	}
	if err != nil {
		return zero, mapError(op, err)
	}
	return v, nil
}

// refusedToken tells whether err means the connection's token is no longer
// valid. Actions hide the HTTP status of non-XML answers, so for those one
// GET /api on the same connection decides.
func (s *session) refusedToken(ctx context.Context, conn *ovirtsdk.Connection, err error) bool {
	if tokenRejected(err) {
		return true
	}
	if !ambiguousAction(err) {
		return false
	}
	_, probeErr := exec(ctx, s, "Probe", conn, func(c *ovirtsdk.Connection) (struct{}, error) {
		_, err := c.SystemService().Get().Send()
		return struct{}{}, err
	})
	return probeErr != nil && tokenRejected(probeErr)
}

// exec runs one SDK call: it waits for a rate-limit token and an in-flight
// slot, then runs fn in a goroutine so the caller can leave as soon as ctx
// is done (the SDK takes no context). An abandoned call keeps its slot until
// the SDK returns, bounded by the SDK's HTTP timeout, so the in-flight cap
// holds for what the engine actually sees. Errors are returned raw.
func exec[T any](ctx context.Context, s *session, op string, conn *ovirtsdk.Connection, fn func(*ovirtsdk.Connection) (T, error)) (T, error) {
	var zero T
	p := s.p
	log := s.logger(ctx)

	waitStart := time.Now()
	if err := p.acquire(ctx); err != nil {
		s.f.m.requests.WithLabelValues(p.name, op, resultCode(err)).Inc()
		log.V(4).Info("Gave up waiting for the oVirt rate limiter", "operation", op, "reason", err.Error())
		return zero, fmt.Errorf("waiting for the rate limiter: %w", err)
	}
	p.limiterWait.Observe(time.Since(waitStart).Seconds())
	// A fenced write (ovirt.FencedFactory) is checked again here, after the limiter's wait and
	// right before it is sent: it never starts after the fence closed.
	if err := ovirt.CheckFence(ctx, op); err != nil {
		p.release()
		log.V(2).Info("Not sending an oVirt write: fenced", "operation", op, "reason", err.Error())
		return zero, err
	}

	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	p.inFlight.Inc()
	go func() {
		start := time.Now()
		var r result
		defer func() {
			// The SDK is generated code parsing whatever the engine (or a
			// proxy) sends; never let a panic in it take the manager down.
			if rec := recover(); rec != nil {
				r = result{err: fmt.Errorf("oVirt SDK panicked: %v", rec)}
			}
			p.inFlight.Dec()
			p.release()
			d := time.Since(start)
			code := resultCode(r.err)
			s.f.m.requests.WithLabelValues(p.name, op, code).Inc()
			s.f.m.duration.WithLabelValues(p.name, op).Observe(d.Seconds())
			if r.err != nil {
				log.V(4).Info("Called oVirt", "operation", op, "duration", d, "code", code,
					"error", mapError(op, r.err).Error())
			} else {
				log.V(4).Info("Called oVirt", "operation", op, "duration", d, "code", code)
			}
			done <- r
		}()
		r.v, r.err = fn(conn)
	}()

	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		log.V(4).Info("Abandoned oVirt call", "operation", op, "reason", ctx.Err().Error())
		return zero, ctx.Err()
	}
}
