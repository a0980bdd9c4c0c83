package sdk

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

func TestTLSModes(t *testing.T) {
	sim := newSim(t)
	tests := []struct {
		name  string
		tls   func() ovirt.TLS
		works bool
	}{
		{"the engine's own CA works", func() ovirt.TLS { return ovirt.TLS{CAPEM: sim.CAPEM()} }, true},
		{"insecure works without any CA", func() ovirt.TLS { return ovirt.TLS{Insecure: true} }, true},
		{"the system pool does not trust the engine's CA", func() ovirt.TLS { return ovirt.TLS{} }, false},
		{"a different CA fails", func() ovirt.TLS { return ovirt.TLS{CAPEM: otherCAPEM(t)} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t, sim, Options{})
			e.cfg.TLS = tt.tls()
			c, err := e.f.ForProvider(context.Background(), e.cfg)
			if tt.works {
				g.Expect(err).NotTo(HaveOccurred())
				_, err = c.Ping(context.Background())
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ovirt.ErrTLS))
			g.Expect(err).To(MatchError(ovirt.ErrUnreachable))
			g.Expect(err.Error()).To(ContainSubstring("certificate"))
			g.Expect(errors.Is(err, ovirt.ErrAuth)).To(BeFalse())
		})
	}

	t.Run("a custom CA gets a pool of its own", func(t *testing.T) {
		g := NewWithT(t)
		_, tlsConfig, err := validate(ovirt.Config{Provider: "p", URL: sim.URL(),
			Credentials: ovirt.Credentials{Username: "u", Password: "p"}, TLS: ovirt.TLS{CAPEM: sim.CAPEM()}})
		g.Expect(err).NotTo(HaveOccurred())
		//nolint:staticcheck // Subjects is only unreliable for system pools; this one must not be one.
		g.Expect(tlsConfig.RootCAs.Subjects()).To(HaveLen(1), "only the custom CA, nothing from the system pool")
	})
}

func TestColdConnectionLogsInOnceForFiftyGoroutines(t *testing.T) {
	g := NewWithT(t)
	sim := newSim(t)
	e := newEnv(t, sim, Options{Limits: Limits{QPS: -1, MaxInFlight: 50}})

	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			c, err := e.f.ForProvider(context.Background(), e.cfg)
			if err != nil {
				errs <- err
				return
			}
			if _, err := c.Ping(context.Background()); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(sim.Logins()).To(Equal(1))
	g.Expect(sim.RequestCount("POST", "/sso/oauth/token")).To(Equal(1))
}

func TestExpiredTokenMeansOneNewLogin(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		expire func(*ovirtsim.Simulator)
		// fifty concurrent callers need the new token to outlive every
		// retry, which a short TTL cannot promise on a loaded machine.
		fifty bool
	}{
		{"after the token TTL passed", func(sim *ovirtsim.Simulator) {
			// The TTL applies to issued tokens too: the first token is
			// older than it, the next one lives long enough for one call.
			time.Sleep(1200 * time.Millisecond)
			sim.SetTokenTTL(time.Second)
		}, false},
		{"after an engine restart", func(sim *ovirtsim.Simulator) { sim.RestartEngine() }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name+", for one caller", func(t *testing.T) {
			g := NewWithT(t)
			sim := newSim(t)
			e := newEnv(t, sim, Options{})
			c, err := e.f.ForProvider(ctx, e.cfg)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sim.Logins()).To(Equal(1))
			tt.expire(sim)
			_, err = c.FindVMsByName(ctx, "nothing")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sim.Logins()).To(Equal(2))
			g.Expect(sim.Requests()).To(HaveKeyWithValue(ovirtsim.RequestKey{Method: "GET", Path: "/vms", Status: 401}, 1))
		})
		if !tt.fifty {
			continue
		}
		t.Run(tt.name+", for fifty concurrent callers", func(t *testing.T) {
			g := NewWithT(t)
			sim := newSim(t)
			e := newEnv(t, sim, Options{Limits: Limits{QPS: -1, MaxInFlight: 50}})
			c, err := e.f.ForProvider(ctx, e.cfg)
			g.Expect(err).NotTo(HaveOccurred())
			sim.SetLatency(ovirtsim.LatencyRule{Path: "/vms", Min: 20 * time.Millisecond})
			tt.expire(sim)
			var wg sync.WaitGroup
			errs := make(chan error, 50)
			for range 50 {
				wg.Go(func() {
					if _, err := c.FindVMsByName(ctx, "nothing"); err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(sim.Logins()).To(Equal(2), "one initial login, one re-login")
		})
	}

	t.Run("an action hides the 401 status, a probe finds the expiry", func(t *testing.T) {
		g := NewWithT(t)
		sim := newSim(t)
		e := newEnv(t, sim, Options{})
		c, err := e.f.ForProvider(ctx, e.cfg)
		g.Expect(err).NotTo(HaveOccurred())
		cl, _ := c.FindCluster(ctx, "Default")
		tpl, _ := c.FindTemplate(ctx, "rhcos-4.14", "")
		vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "a1", ClusterID: cl.ID, TemplateID: tpl.ID})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() ovirt.VMStatus { v, _ := c.GetVM(ctx, vm.ID); return v.Status }).Should(Equal(ovirt.VMStatusDown))
		sim.RestartEngine()
		g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStart)).To(Succeed())
		g.Expect(sim.Logins()).To(Equal(2))
		g.Expect(sim.RequestCount("POST", "/vms/{id}/start")).To(Equal(2))
	})

	t.Run("a 401 that survives the re-login is ErrAuth", func(t *testing.T) {
		g := NewWithT(t)
		sim := newSim(t)
		e := newEnv(t, sim, Options{})
		c, err := e.f.ForProvider(ctx, e.cfg)
		g.Expect(err).NotTo(HaveOccurred())
		sim.SetFaults(ovirtsim.FaultRule{Method: "GET", Path: "/vms", Status: 401})
		_, err = c.FindVMsByName(ctx, "x")
		g.Expect(err).To(MatchError(ovirt.ErrAuth))
		g.Expect(sim.Logins()).To(Equal(2), "exactly one retry")
		g.Expect(sim.RequestCount("GET", "/vms")).To(Equal(2))
	})
}

func TestRateLimitSpacesCalls(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{Limits: Limits{QPS: 20, Burst: 1, MaxInFlight: 40}})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	sim.ResetCounters()

	start := time.Now()
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() { _, _ = c.FindVMsByName(ctx, "x") })
	}
	wg.Wait()
	g.Expect(time.Since(start)).To(BeNumerically(">=", 1900*time.Millisecond))

	var arrivals []time.Time
	for _, r := range sim.RequestLog() {
		if r.Method == "GET" && r.Path == "/vms" {
			arrivals = append(arrivals, r.Start)
		}
	}
	g.Expect(arrivals).To(HaveLen(40))
	// A request reaches the engine after its token was granted (TLS
	// handshakes only delay it), so these bounds hold however loaded the
	// machine is: the last one cannot arrive before 39 token intervals, and
	// no more than burst + rate x elapsed can have arrived at any time.
	g.Expect(slices.MaxFunc(arrivals, func(a, b time.Time) int { return a.Compare(b) }).Sub(start)).
		To(BeNumerically(">=", 1950*time.Millisecond))
	for _, window := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		n := 0
		for _, a := range arrivals {
			if a.Before(start.Add(window)) {
				n++
			}
		}
		g.Expect(n).To(BeNumerically("<=", 1+int(window.Seconds()*20)), "arrivals in the first %v", window)
	}
}

func TestInFlightCap(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{Limits: Limits{QPS: -1, MaxInFlight: 3}})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	sim.SetLatency(ovirtsim.LatencyRule{Min: 50 * time.Millisecond})
	sim.ResetCounters()

	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { _, _ = c.Ping(ctx) })
	}
	wg.Wait()
	g.Expect(sim.TotalRequests()).To(Equal(20))
	g.Expect(sim.MaxInFlight()).To(BeNumerically("<=", 3))
	g.Expect(sim.MaxInFlight()).To(BeNumerically(">=", 1))

	// Abandoned calls keep their slot until the SDK returns: the cap holds
	// for what the engine sees even when callers give up.
	sim.ResetCounters()
	for range 10 {
		wg.Go(func() {
			short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
			defer cancel()
			_, _ = c.Ping(short)
		})
	}
	wg.Wait()
	g.Eventually(func() float64 { return gaugeValue(e, "requests_in_flight") }).Should(BeZero())
	g.Expect(sim.MaxInFlight()).To(BeNumerically("<=", 3))
}

func TestAuthBreaker(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	clock := newFakeClock()
	e := newEnv(t, sim, Options{Limits: Limits{AuthFailureThreshold: 3, AuthBackoff: time.Minute}, now: clock.Now})
	e.cfg.Credentials.Password = "wrong-password"

	for i := range 3 {
		_, err := e.f.ForProvider(ctx, e.cfg)
		g.Expect(err).To(MatchError(ovirt.ErrAuth))
		var boe *ovirt.BreakerOpenError
		g.Expect(errors.As(err, &boe)).To(BeFalse(), "attempt %d really tried", i+1)
	}
	g.Expect(sim.FailedLogins()).To(Equal(3))
	g.Expect(gaugeValue(e, "auth_breaker_open")).To(Equal(1.0))

	clock.Advance(20 * time.Second)
	for range 5 {
		_, err := e.f.ForProvider(ctx, e.cfg)
		var boe *ovirt.BreakerOpenError
		g.Expect(errors.As(err, &boe)).To(BeTrue(), "%v", err)
		g.Expect(boe.Remaining).To(Equal(40 * time.Second))
		g.Expect(err).To(MatchError(ovirt.ErrAuth))
	}
	g.Expect(sim.FailedLogins()).To(Equal(3), "no login while open")

	// After the back-off one attempt may try; it fails and re-opens at once.
	clock.Advance(40 * time.Second)
	_, err := e.f.ForProvider(ctx, e.cfg)
	var boe *ovirt.BreakerOpenError
	g.Expect(errors.As(err, &boe)).To(BeFalse())
	g.Expect(sim.FailedLogins()).To(Equal(4))
	_, err = e.f.ForProvider(ctx, e.cfg)
	g.Expect(errors.As(err, &boe)).To(BeTrue())
	g.Expect(sim.FailedLogins()).To(Equal(4))

	// The account is fixed on the engine side: the breaker closes on the
	// next successful login.
	sim.SetCredentials(testUser, "wrong-password")
	clock.Advance(time.Minute)
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.Ping(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gaugeValue(e, "auth_breaker_open")).To(BeZero())
	g.Expect(counterValue(e, "sso_logins_total", "failure")).To(Equal(4.0))
	g.Expect(counterValue(e, "sso_logins_total", "success")).To(Equal(1.0))

	t.Run("a new password for the provider starts with a closed breaker", func(t *testing.T) {
		g := NewWithT(t)
		sim.SetCredentials(testUser, testPassword)
		bad := e.cfg
		bad.Credentials.Password = "another-wrong-one"
		for range 4 {
			_, _ = e.f.ForProvider(ctx, bad)
		}
		good := e.cfg
		good.Credentials.Password = testPassword
		_, err := e.f.ForProvider(ctx, good)
		g.Expect(err).NotTo(HaveOccurred())
	})
}

func TestErrorMappingAgainstTheSimulator(t *testing.T) {
	ctx := context.Background()
	sim := newSim(t)
	tests := []struct {
		name    string
		fault   ovirtsim.FaultRule
		status  int
		kinds   []error
		notKind []error
		detail  string
	}{
		{"404 is ErrNotFound", ovirtsim.FaultRule{Status: 404, Detail: "Entity not found: x"}, 404,
			[]error{ovirt.ErrNotFound}, []error{ovirt.ErrInvalid}, "Entity not found"},
		{"409 naming a lock is ErrConflict and ErrLocked", ovirtsim.FaultRule{Status: 409, Detail: "Cannot edit VM. VM is locked. Please try again in a few minutes."}, 409,
			[]error{ovirt.ErrConflict, ovirt.ErrLocked}, nil, "VM is locked"},
		{"400 naming a lock is ErrLocked", ovirtsim.FaultRule{Status: 400, Detail: "Cannot edit VM. Related operation is currently in progress. Please try again later."}, 400,
			[]error{ovirt.ErrLocked}, []error{ovirt.ErrInvalid}, "in progress"},
		{"another 400 is ErrInvalid", ovirtsim.FaultRule{Status: 400, Detail: "Cannot add VM. The requested name is already in use."}, 400,
			[]error{ovirt.ErrInvalid}, []error{ovirt.ErrLocked}, "already in use"},
		{"a lasting 401 is ErrAuth", ovirtsim.FaultRule{Status: 401}, 401, []error{ovirt.ErrAuth}, nil, "invalid_grant"},
		{"403 is ErrAuth", ovirtsim.FaultRule{Status: 403, Detail: "User is not authorized"}, 403, []error{ovirt.ErrAuth}, nil, "not authorized"},
		{"500 matches no sentinel but keeps the detail", ovirtsim.FaultRule{Status: 500, Detail: "boom"}, 500, nil,
			[]error{ovirt.ErrNotFound, ovirt.ErrInvalid, ovirt.ErrLocked, ovirt.ErrAuth, ovirt.ErrUnreachable, ovirt.ErrConflict}, "boom"},
		{"503 is ErrUnreachable", ovirtsim.FaultRule{Status: 503, Detail: "down for maintenance"}, 503, []error{ovirt.ErrUnreachable}, nil, "maintenance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t, sim, Options{})
			c, err := e.f.ForProvider(ctx, e.cfg)
			g.Expect(err).NotTo(HaveOccurred())
			fault := tt.fault
			fault.Method, fault.Path = "GET", "/vms/{id}"
			sim.SetFaults(fault)
			defer sim.SetFaults()

			_, err = c.GetVM(ctx, "some-id")
			g.Expect(err).To(HaveOccurred())
			var oe *ovirt.Error
			g.Expect(errors.As(err, &oe)).To(BeTrue())
			g.Expect(oe.Status).To(Equal(tt.status))
			g.Expect(oe.Op).To(Equal("GetVM"))
			g.Expect(err.Error()).To(ContainSubstring(tt.detail))
			for _, k := range tt.kinds {
				g.Expect(errors.Is(err, k)).To(BeTrue(), "want %v in %v", k, err)
			}
			for _, k := range tt.notKind {
				g.Expect(errors.Is(err, k)).To(BeFalse(), "do not want %v in %v", k, err)
			}
			g.Expect(counterValue(e, "requests_total", "GetVM", itoa(tt.status))).To(BeNumerically(">=", 1))
		})
	}

	t.Run("a single 401 is absorbed by one re-login", func(t *testing.T) {
		g := NewWithT(t)
		sim.ResetCounters()
		e := newEnv(t, sim, Options{})
		c, err := e.f.ForProvider(ctx, e.cfg)
		g.Expect(err).NotTo(HaveOccurred())
		sim.SetFaults(ovirtsim.FaultRule{Method: "GET", Path: "/vms", Status: 401, Count: 1})
		defer sim.SetFaults()
		_, err = c.FindVMsByName(ctx, "x")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sim.Logins()).To(Equal(2))
	})

	t.Run("a refused connection is ErrUnreachable", func(t *testing.T) {
		g := NewWithT(t)
		// Port 1 (tcpmux): privileged and served by nothing, so refused on every machine; a port
		// freed after a probe could be taken by another process in between.
		e := newEnv(t, sim, Options{})
		e.cfg.URL = "https://127.0.0.1:1/ovirt-engine/api"
		_, err := e.f.ForProvider(ctx, e.cfg)
		g.Expect(err).To(MatchError(ovirt.ErrUnreachable))
		g.Expect(errors.Is(err, ovirt.ErrTLS)).To(BeFalse())
		g.Expect(err.Error()).To(ContainSubstring("refused"))
		g.Expect(counterValue(e, "sso_logins_total", "error")).To(Equal(1.0))
	})

	t.Run("a hanging engine times out as ErrUnreachable and DeadlineExceeded", func(t *testing.T) {
		// The caller's deadline decides here: the simulator ends a hang as
		// soon as the client goes away and answers at once, and net/http
		// may still hand that answer to a client whose own timeout just
		// fired, so the SDK timeout is tested against a black hole below.
		g := NewWithT(t)
		e := newEnv(t, sim, Options{})
		c, err := e.f.ForProvider(ctx, e.cfg)
		g.Expect(err).NotTo(HaveOccurred())
		sim.SetFaults(ovirtsim.FaultRule{Method: "GET", Path: "/vms/{id}", Status: 500, Hang: 2 * time.Second})
		defer sim.SetFaults()
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = c.GetVM(short, "x")
		g.Expect(time.Since(start)).To(BeNumerically("<", 1500*time.Millisecond), "well before the 2 s hang")
		g.Expect(err).To(MatchError(ovirt.ErrUnreachable))
		g.Expect(err).To(MatchError(context.DeadlineExceeded))
	})

	t.Run("an engine that never answers hits the SDK timeout", func(t *testing.T) {
		g := NewWithT(t)
		addr := blackHole(t)
		e := newEnv(t, sim, Options{Timeout: 300 * time.Millisecond})
		e.cfg.URL = "https://" + addr + "/ovirt-engine/api"
		start := time.Now()
		_, err := e.f.ForProvider(ctx, e.cfg)
		g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
		g.Expect(err).To(MatchError(ovirt.ErrUnreachable))
		g.Expect(err).To(MatchError(context.DeadlineExceeded))
		g.Expect(err.Error()).To(ContainSubstring("timed out"))
		g.Expect(counterValue(e, "requests_total", "Login", "timeout")).To(Equal(1.0))
		g.Expect(counterValue(e, "sso_logins_total", "error")).To(Equal(1.0))
	})

	t.Run("a broken SSO endpoint is ErrUnreachable, not a bad password", func(t *testing.T) {
		g := NewWithT(t)
		e := newEnv(t, sim, Options{})
		sim.SetFaults(ovirtsim.FaultRule{Method: "POST", Path: "/sso/oauth/token", Status: 502})
		defer sim.SetFaults()
		_, err := e.f.ForProvider(ctx, e.cfg)
		g.Expect(err).To(MatchError(ovirt.ErrUnreachable))
		g.Expect(errors.Is(err, ovirt.ErrAuth)).To(BeFalse(), "an SSO server error must not trip the auth breaker")
		g.Expect(counterValue(e, "sso_logins_total", "error")).To(Equal(1.0))
		g.Expect(sim.FailedLogins()).To(BeZero())
	})
}

func TestCancellationReturnsPromptly(t *testing.T) {
	ctx := context.Background()
	sim := newSim(t)
	sim.SetLatency(ovirtsim.LatencyRule{Method: "GET", Path: "/vms/{id}", Min: 3 * time.Second})
	tests := []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		want    error
		notWant error
	}{
		{"a deadline gives ErrUnreachable and DeadlineExceeded", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 100*time.Millisecond)
		}, context.DeadlineExceeded, nil},
		{"a cancellation gives context.Canceled only", func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(ctx)
			time.AfterFunc(100*time.Millisecond, cancel)
			return c, cancel
		}, context.Canceled, ovirt.ErrUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t, sim, Options{Timeout: 500 * time.Millisecond})
			c, err := e.f.ForProvider(ctx, e.cfg)
			g.Expect(err).NotTo(HaveOccurred())
			callCtx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			_, err = c.GetVM(callCtx, "x")
			g.Expect(time.Since(start)).To(BeNumerically("<", time.Second), "well before the 3 s latency")
			g.Expect(err).To(MatchError(tt.want))
			if tt.notWant != nil {
				g.Expect(errors.Is(err, tt.notWant)).To(BeFalse())
			}
			// The abandoned SDK call ends at the SDK timeout (or when the
			// simulator answers the departed client) and is counted then.
			g.Eventually(func() float64 { return gaugeValue(e, "requests_in_flight") }).Should(BeZero())
			g.Eventually(func() float64 {
				return metricValue(e, "request_duration_seconds", map[string]string{"operation": "GetVM"})
			}).Should(Equal(1.0))
		})
	}

	t.Run("a caller waiting for the rate limiter leaves on cancellation", func(t *testing.T) {
		g := NewWithT(t)
		e := newEnv(t, sim, Options{Limits: Limits{QPS: 0.1, Burst: 1}})
		c, err := e.f.ForProvider(ctx, e.cfg) // takes the only token
		g.Expect(err).NotTo(HaveOccurred())
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = c.Ping(short)
		g.Expect(time.Since(start)).To(BeNumerically("<", 100*time.Millisecond), "the limiter refuses at once, without waiting for the deadline it cannot meet")
		g.Expect(err).To(MatchError(context.DeadlineExceeded))
	})
}

func TestCredentialRotation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	old, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = old.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())

	same, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same.(*client).s).To(BeIdenticalTo(old.(*client).s), "an unchanged config shares the connection")
	g.Expect(sim.Logins()).To(Equal(1))

	sim.SetCredentials(testUser, "rotated-password")
	rotated := e.cfg
	rotated.Credentials.Password = "rotated-password"
	c, err := e.f.ForProvider(ctx, rotated)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.Logins()).To(Equal(2), "the new password logged in")
	_, err = c.Ping(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	_, err = old.Ping(ctx)
	g.Expect(err).To(MatchError(ovirt.ErrClosed), "the old connection is closed")
	g.Eventually(func() int { return sim.RequestCount("POST", "/services/sso-logout") }).Should(Equal(1))

	t.Run("a rotation during a login tells the waiting caller to start again", func(t *testing.T) {
		g := NewWithT(t)
		other := newEnv(t, sim, Options{})
		other.cfg.Credentials.Password = "rotated-password"
		sim.SetLatency(ovirtsim.LatencyRule{Method: "POST", Path: "/sso/oauth/token", Min: 300 * time.Millisecond})
		defer sim.SetLatency()
		errc := make(chan error, 1)
		go func() {
			_, err := other.f.ForProvider(ctx, other.cfg)
			errc <- err
		}()
		// Wait until that login is under way.
		g.Eventually(func() bool {
			other.f.mu.Lock()
			defer other.f.mu.Unlock()
			p := other.f.providers[other.cfg.Provider]
			if p == nil || p.session == nil {
				return false
			}
			p.session.mu.Lock()
			defer p.session.mu.Unlock()
			return p.session.pending != nil
		}).Should(BeTrue())
		newer := other.cfg
		newer.Credentials.Password = "yet-another"
		go func() { _, _ = other.f.ForProvider(ctx, newer) }()
		g.Eventually(errc).Should(Receive(MatchError(ovirt.ErrClosed)))
	})

	t.Run("a new URL replaces the connection too", func(t *testing.T) {
		g := NewWithT(t)
		moved := rotated
		moved.URL = "https://localhost:" + portOf(sim.URL()) + "/ovirt-engine/api"
		c2, err := e.f.ForProvider(ctx, moved)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c2.(*client).s).NotTo(BeIdenticalTo(c.(*client).s))
		_, err = c.Ping(ctx)
		g.Expect(err).To(MatchError(ovirt.ErrClosed))
	})

	t.Run("Forget closes the connection and drops the metrics", func(t *testing.T) {
		g := NewWithT(t)
		c3, err := e.f.ForProvider(ctx, rotated)
		g.Expect(err).NotTo(HaveOccurred())
		e.f.Forget(e.cfg.Provider)
		_, err = c3.Ping(ctx)
		g.Expect(err).To(MatchError(ovirt.ErrClosed))
		g.Expect(seriesFor(e, e.cfg.Provider)).To(BeZero())
		e.f.Forget("never-seen")
	})

	t.Run("Close closes everything", func(t *testing.T) {
		g := NewWithT(t)
		c4, err := e.f.ForProvider(ctx, rotated)
		g.Expect(err).NotTo(HaveOccurred())
		e.f.Close()
		_, err = c4.Ping(ctx)
		g.Expect(err).To(MatchError(ovirt.ErrClosed))
		_, err = e.f.ForProvider(ctx, rotated)
		g.Expect(err).To(MatchError(ovirt.ErrClosed))
		e.f.Close()
	})
}
