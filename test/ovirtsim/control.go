package ovirtsim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// normalisePath turns what users write in rules ("vms/{id}",
// "/ovirt-engine/api/vms", "/ovirt-engine/sso/oauth/token") into the path
// templates the simulator counts and matches.
func normalisePath(p string) string {
	p = strings.TrimSpace(p)
	if p == "" || p == "*" {
		return ""
	}
	p = strings.TrimPrefix(p, "/ovirt-engine/api")
	p = strings.TrimPrefix(p, "/ovirt-engine")
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

func ruleMatches(ruleMethod, rulePath, method, tmpl string) bool {
	if ruleMethod != "" && ruleMethod != "*" && !strings.EqualFold(ruleMethod, method) {
		return false
	}
	if rulePath == "" {
		return true
	}
	if strings.Contains(rulePath, "*") {
		return globMatch(rulePath, tmpl)
	}
	return rulePath == tmpl
}

// unit returns a deterministic number in [0, 1) for (seed, kind, rule, n),
// so that decisions depend on the seed and on the rule's own sequence of
// matching requests, not on goroutine interleaving elsewhere.
func unit(seed uint64, kind byte, rule int, n uint64) float64 {
	x := seed ^ uint64(kind)<<56 ^ uint64(rule+1)*0x9e3779b97f4a7c15 ^ (n+1)*0xbf58476d1ce4e5b9
	x = splitmix(splitmix(x))
	return float64(x>>11) / (1 << 53)
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

type latencyState struct {
	rule LatencyRule
	n    uint64
}

type faultState struct {
	rule  FaultRule
	n     uint64
	fired int
}

// ruleSet holds the latency and fault rules and their per-rule counters.
type ruleSet struct {
	mu      sync.Mutex
	seed    uint64
	latency []latencyState
	faults  []faultState
}

func validateLatency(rules []LatencyRule) ([]LatencyRule, error) {
	out := make([]LatencyRule, len(rules))
	for i, l := range rules {
		if l.Min < 0 || l.Max < 0 {
			return nil, invalidf("latency rule %d: negative duration", i)
		}
		if l.Max == 0 {
			l.Max = l.Min
		}
		if l.Max < l.Min {
			return nil, invalidf("latency rule %d: max %v < min %v", i, l.Max, l.Min)
		}
		l.Method = strings.ToUpper(l.Method)
		l.Path = normalisePath(l.Path)
		out[i] = l
	}
	return out, nil
}

func validateFaults(rules []FaultRule) ([]FaultRule, error) {
	out := make([]FaultRule, len(rules))
	for i, f := range rules {
		if f.Status != 0 && (f.Status < 100 || f.Status > 599) {
			return nil, invalidf("fault rule %d: status %d out of range", i, f.Status)
		}
		f.Mode = strings.ToLower(strings.TrimSpace(f.Mode))
		switch f.Mode {
		case "":
			if f.Status == 0 && f.Hang <= 0 {
				return nil, invalidf("fault rule %d: needs a status or a hang", i)
			}
		case FaultModeStatus:
			if f.Status == 0 {
				return nil, invalidf("fault rule %d: mode status needs a status", i)
			}
		case FaultModeHang:
			if f.Hang <= 0 {
				return nil, invalidf("fault rule %d: mode hang needs a hang duration", i)
			}
		case FaultModeDrop:
			if f.Status != 0 {
				return nil, invalidf("fault rule %d: mode drop sends no status (got %d)", i, f.Status)
			}
		default:
			return nil, invalidf("fault rule %d: unknown mode %q (status, hang, drop)", i, f.Mode)
		}
		if f.Rate < 0 || f.Rate > 1 {
			return nil, invalidf("fault rule %d: rate %v not in [0,1]", i, f.Rate)
		}
		if f.Count < 0 || f.Hang < 0 {
			return nil, invalidf("fault rule %d: negative count or hang", i)
		}
		f.Method = strings.ToUpper(f.Method)
		f.Path = normalisePath(f.Path)
		out[i] = f
	}
	return out, nil
}

func (r *ruleSet) setLatency(rules []LatencyRule) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latency = make([]latencyState, len(rules))
	for i, l := range rules {
		r.latency[i] = latencyState{rule: l}
	}
}

func (r *ruleSet) setFaults(rules []FaultRule) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = make([]faultState, len(rules))
	for i, f := range rules {
		r.faults[i] = faultState{rule: f}
	}
}

func (r *ruleSet) snapshot() ([]LatencyRule, []FaultRule) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ls := make([]LatencyRule, len(r.latency))
	for i, l := range r.latency {
		ls[i] = l.rule
	}
	fs := make([]FaultRule, len(r.faults))
	for i, f := range r.faults {
		fs[i] = f.rule
	}
	return ls, fs
}

// delay picks the latency of a request from the first matching rule.
func (r *ruleSet) delay(method, tmpl string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.latency {
		l := &r.latency[i]
		if !ruleMatches(l.rule.Method, l.rule.Path, method, tmpl) {
			continue
		}
		n := l.n
		l.n++
		span := l.rule.Max - l.rule.Min
		if span <= 0 {
			return l.rule.Min
		}
		return l.rule.Min + time.Duration(unit(r.seed, 'L', i, n)*float64(span+1))
	}
	return 0
}

// fault decides whether a request fires a fault rule.
func (r *ruleSet) fault(method, tmpl string) (FaultRule, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.faults {
		f := &r.faults[i]
		if !ruleMatches(f.rule.Method, f.rule.Path, method, tmpl) {
			continue
		}
		if f.rule.Count > 0 && f.fired >= f.rule.Count {
			continue
		}
		n := f.n
		f.n++
		rate := f.rule.Rate
		if rate <= 0 {
			rate = 1
		}
		if rate >= 1 || unit(r.seed, 'F', i, n) < rate {
			f.fired++
			return f.rule, true
		}
	}
	return FaultRule{}, false
}

// ParseFaultRule parses the command-line fault syntax
// METHOD:PATH:STATUS[:RATE[:COUNT[:HANG[:MODE]]]], e.g. "POST:/vms:500:0.1",
// "*:*:503:0.05", "GET:/vms/{id}:0:1:0:30s" (a 30 s hang, then a normal
// answer). MODE is status, hang or drop, optionally prefixed "after-" for
// execute-then-fail ("after" alone infers the mode): "POST:/vms:503:1:1::after",
// "PUT:/vms/{id}/diskattachments/{id}:0:1:1::after-drop",
// "DELETE:/vms/{id}:0:1:1:30s:after-hang". An empty or "*" method or path
// matches anything.
func ParseFaultRule(s string) (FaultRule, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 3 || len(parts) > 7 {
		return FaultRule{}, invalidf("fault %q: want METHOD:PATH:STATUS[:RATE[:COUNT[:HANG[:MODE]]]]", s)
	}
	f := FaultRule{Method: parts[0], Path: parts[1]}
	if f.Method == "*" {
		f.Method = ""
	}
	var err error
	if f.Status, err = strconv.Atoi(parts[2]); err != nil {
		return FaultRule{}, fmt.Errorf("fault %q: status: %w", s, err)
	}
	if len(parts) > 3 && parts[3] != "" {
		if f.Rate, err = strconv.ParseFloat(parts[3], 64); err != nil {
			return FaultRule{}, fmt.Errorf("fault %q: rate: %w", s, err)
		}
	}
	if len(parts) > 4 && parts[4] != "" {
		if f.Count, err = strconv.Atoi(parts[4]); err != nil {
			return FaultRule{}, fmt.Errorf("fault %q: count: %w", s, err)
		}
	}
	if len(parts) > 5 && parts[5] != "" {
		if f.Hang, err = time.ParseDuration(parts[5]); err != nil {
			return FaultRule{}, fmt.Errorf("fault %q: hang: %w", s, err)
		}
	}
	if len(parts) > 6 && parts[6] != "" {
		m := parts[6]
		if m == "after" {
			f.After = true
		} else if rest, ok := strings.CutPrefix(m, "after-"); ok {
			f.After, f.Mode = true, rest
		} else {
			f.Mode = m
		}
	}
	if _, err := validateFaults([]FaultRule{f}); err != nil {
		return FaultRule{}, fmt.Errorf("fault %q: %w", s, err)
	}
	return f, nil
}

// ParseLatency parses "20ms" (fixed) or "10ms-30ms" (uniform range) into a
// rule that applies to every endpoint.
func ParseLatency(s string) (LatencyRule, error) {
	loText, hiText, isRange := strings.Cut(s, "-")
	lo, err := time.ParseDuration(strings.TrimSpace(loText))
	if err != nil {
		return LatencyRule{}, fmt.Errorf("latency %q: %w", s, err)
	}
	hi := lo
	if isRange {
		if hi, err = time.ParseDuration(strings.TrimSpace(hiText)); err != nil {
			return LatencyRule{}, fmt.Errorf("latency %q: %w", s, err)
		}
	}
	l := LatencyRule{Min: lo, Max: hi}
	if _, err := validateLatency([]LatencyRule{l}); err != nil {
		return LatencyRule{}, fmt.Errorf("latency %q: %w", s, err)
	}
	return l, nil
}

// RequestKey identifies a counter: method, path template and status.
type RequestKey struct {
	// Method is the HTTP method.
	Method string `json:"method"`
	// Path is the path template, e.g. "/vms/{id}/diskattachments/{id}" or "/sso/oauth/token".
	Path string `json:"path"`
	// Status is the HTTP status answered (499 when the client went away first).
	Status int `json:"status"`
}

// RequestRecord is one entry of the request log.
type RequestRecord struct {
	// Start is when the request arrived.
	Start time.Time `json:"start"`
	// End is when the answer was written.
	End time.Time `json:"end"`
	// Method is the HTTP method.
	Method string `json:"method"`
	// Path is the path template; ID the first id in the path (the VM's, for /vms/{id}/...).
	Path string `json:"path"`
	ID   string `json:"id,omitempty"`
	// Status is the HTTP status answered.
	Status int `json:"status"`
}

const requestLogSize = 100_000

// stats are the request counters and the request log.
type stats struct {
	mu           sync.Mutex
	requests     map[RequestKey]int
	total        int
	logins       int
	failedLogins int
	log          []RequestRecord
	logNext      int

	inflight    atomic.Int64
	maxInflight atomic.Int64
}

func (st *stats) enter() {
	n := st.inflight.Add(1)
	for {
		m := st.maxInflight.Load()
		if n <= m || st.maxInflight.CompareAndSwap(m, n) {
			return
		}
	}
}

func (st *stats) leave() { st.inflight.Add(-1) }

func (st *stats) record(rec RequestRecord, api bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.requests == nil {
		st.requests = map[RequestKey]int{}
	}
	st.requests[RequestKey{rec.Method, rec.Path, rec.Status}]++
	if api {
		st.total++
	}
	if len(st.log) < requestLogSize {
		st.log = append(st.log, rec)
	} else {
		st.log[st.logNext] = rec
		st.logNext = (st.logNext + 1) % requestLogSize
	}
}

func (st *stats) login(ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if ok {
		st.logins++
	} else {
		st.failedLogins++
	}
}

func (st *stats) reset() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.requests = map[RequestKey]int{}
	st.total, st.logins, st.failedLogins = 0, 0, 0
	st.log, st.logNext = nil, 0
	st.maxInflight.Store(0)
}

// Counters is a snapshot of the request counters.
type Counters struct {
	// Requests counts requests by method, path template and status, sorted.
	Requests []RequestCount `json:"requests"`
	// TotalRequests counts API requests (SSO excluded).
	TotalRequests int `json:"total_requests"`
	// Logins counts successful SSO token grants.
	Logins int `json:"logins"`
	// FailedLogins counts refused SSO token requests.
	FailedLogins int `json:"failed_logins"`
	// MaxInFlight is the highest number of concurrent API requests seen.
	MaxInFlight int `json:"max_in_flight"`
	// InFlight is the number of API requests being served now.
	InFlight int `json:"in_flight"`
}

// RequestCount is one counter of Counters.Requests.
type RequestCount struct {
	RequestKey
	// Count is the number of requests with this key.
	Count int `json:"count"`
}

func (st *stats) snapshot() Counters {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := Counters{TotalRequests: st.total, Logins: st.logins, FailedLogins: st.failedLogins,
		MaxInFlight: int(st.maxInflight.Load()), InFlight: int(st.inflight.Load()),
		Requests: make([]RequestCount, 0, len(st.requests))}
	for k, n := range st.requests {
		c.Requests = append(c.Requests, RequestCount{k, n})
	}
	slices.SortFunc(c.Requests, func(a, b RequestCount) int {
		if x := strings.Compare(a.Path, b.Path); x != 0 {
			return x
		}
		if x := strings.Compare(a.Method, b.Method); x != 0 {
			return x
		}
		return a.Status - b.Status
	})
	return c
}

func (st *stats) logCopy() []RequestRecord {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]RequestRecord, 0, len(st.log))
	out = append(out, st.log[st.logNext:]...)
	return append(out, st.log[:st.logNext]...)
}
