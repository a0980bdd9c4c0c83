package sdk

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

const metricsNamespace = "capov"
const metricsSubsystem = "ovirt"

// metrics are the collectors of one Factory. They are built per Factory (no
// package globals) and registered on the Registerer from Options.
type metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	inFlight    *prometheus.GaugeVec
	logins      *prometheus.CounterVec
	limiterWait *prometheus.HistogramVec
	breakerOpen *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "requests_total",
			Help: "oVirt engine calls by provider, Client operation and result code " +
				"(HTTP status, 2xx for success, error, timeout or canceled).",
		}, []string{"provider", "operation", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "request_duration_seconds",
			Help:    "Duration of oVirt engine calls, excluding client-side throttling.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"provider", "operation"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "requests_in_flight",
			Help: "oVirt engine calls currently running, including calls whose caller gave up.",
		}, []string{"provider"}),
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "sso_logins_total",
			Help: "SSO logins (new connections) by provider and result " +
				"(success, failure = credentials refused, error = engine unreachable or broken).",
		}, []string{"provider", "result"}),
		limiterWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "ratelimiter_wait_seconds",
			Help:    "Time a call waited for client-side throttling (rate-limit token and in-flight slot).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"provider"}),
		breakerOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "auth_breaker_open",
			Help: "1 while logins for the provider's credential are suspended after repeated authentication failures, else 0.",
		}, []string{"provider"}),
	}
	if reg == nil {
		return m
	}
	m.requests = register(reg, m.requests)
	m.duration = register(reg, m.duration)
	m.inFlight = register(reg, m.inFlight)
	m.logins = register(reg, m.logins)
	m.limiterWait = register(reg, m.limiterWait)
	m.breakerOpen = register(reg, m.breakerOpen)
	return m
}

// register registers c, or returns the identical collector already
// registered: several Factories (tests, a restarted manager component) may
// share one registry, and they must then share the series too.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing
			}
		}
		// A conflicting collector with the same name is a programming error;
		// keep the unregistered collector so the client still works.
	}
	return c
}

// forget drops every series of a provider (it was deleted).
func (m *metrics) forget(provider string) {
	l := prometheus.Labels{"provider": provider}
	m.requests.DeletePartialMatch(l)
	m.duration.DeletePartialMatch(l)
	m.inFlight.DeletePartialMatch(l)
	m.logins.DeletePartialMatch(l)
	m.limiterWait.DeletePartialMatch(l)
	m.breakerOpen.DeletePartialMatch(l)
}
