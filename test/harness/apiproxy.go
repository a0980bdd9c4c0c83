package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// APIFaultRule makes an APIFaultProxy answer a share of matching requests itself, with an
// error, instead of forwarding them to the API server.
type APIFaultRule struct {
	// Method matches the HTTP method ("" matches any).
	Method string
	// PathSuffix matches the end of the URL path, e.g. "/status" for status subresource
	// writes ("" matches any).
	PathSuffix string
	// Status is the HTTP status answered: 500 (an internal error) or 429 (API priority and
	// fairness rejecting the request), or any other error status.
	Status int
	// Rate is the probability that a matching request fails (0 means 1).
	Rate float64
	// RetryAfter adds "Retry-After: 1", as the API server sends with 429 (client-go then waits
	// and retries by itself before the caller sees an error).
	RetryAfter bool
}

// APIFaultProxy is a reverse proxy in front of a kube-apiserver that fails a share of chosen
// requests, so that a client (the manager) sees the errors of an overloaded or failing
// management cluster while everything else passes through, watches included. It listens on
// plain HTTP on 127.0.0.1 and authenticates to the API server with the rest.Config it was
// started with; Kubeconfig renders a kubeconfig that reaches it.
type APIFaultProxy struct {
	// URL is the proxy's address, e.g. "http://127.0.0.1:40123".
	URL string

	srv *http.Server

	mu       sync.Mutex
	rules    []APIFaultRule
	rnd      *rand.Rand
	injected map[int]int
	passed   int
}

// StartAPIFaultProxy starts a proxy to the API server of cfg. seed fixes its fault decisions
// for a given sequence of matching requests.
func StartAPIFaultProxy(cfg *rest.Config, seed uint64) (*APIFaultProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("parsing the API server URL %q: %w", cfg.Host, err)
	}
	if target.Scheme == "" {
		target.Scheme = "https"
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the API server transport: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	p := &APIFaultProxy{URL: "http://" + ln.Addr().String(), rnd: rand.New(rand.NewPCG(seed, 0x6170697072)), injected: map[int]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport: transport,
		// Watches stream: pass every chunk on at once.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if rule, ok := p.fault(r); ok {
				writeAPIStatus(w, rule)
				return
			}
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() { _ = p.srv.Serve(ln) }() // ErrServerClosed after Close
	return p, nil
}

// SetRules replaces the fault rules (none: every request passes).
func (p *APIFaultProxy) SetRules(rules ...APIFaultRule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append([]APIFaultRule(nil), rules...)
}

// Injected returns how many requests the proxy failed, by status.
func (p *APIFaultProxy) Injected() map[int]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int]int, len(p.injected))
	for k, v := range p.injected {
		out[k] = v
	}
	return out
}

// Passed returns how many requests matched no rule (or were not chosen) and were forwarded.
func (p *APIFaultProxy) Passed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.passed
}

func (p *APIFaultProxy) fault(r *http.Request) (APIFaultRule, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rule := range p.rules {
		if (rule.Method != "" && !strings.EqualFold(rule.Method, r.Method)) || !strings.HasSuffix(r.URL.Path, rule.PathSuffix) {
			continue
		}
		rate := rule.Rate
		if rate <= 0 {
			rate = 1
		}
		if p.rnd.Float64() < rate {
			p.injected[rule.Status]++
			return rule, true
		}
	}
	p.passed++
	return APIFaultRule{}, false
}

// writeAPIStatus answers like the API server: a metav1.Status body with the reason of the code.
func writeAPIStatus(w http.ResponseWriter, rule APIFaultRule) {
	reason, msg := "InternalError", "Internal error occurred: injected by the test's API fault proxy"
	if rule.Status == http.StatusTooManyRequests {
		reason, msg = "TooManyRequests", "The API server is overloaded (injected by the test's API fault proxy), please try again later."
	}
	if rule.RetryAfter {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rule.Status)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`, msg, reason, rule.Status)
}

// Kubeconfig renders a kubeconfig whose server is the proxy (no credentials: the proxy
// authenticates to the API server itself).
func (p *APIFaultProxy) Kubeconfig(clusterName string) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[clusterName] = &clientcmdapi.Cluster{Server: p.URL}
	kc.AuthInfos[clusterName] = &clientcmdapi.AuthInfo{}
	kc.Contexts[clusterName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: clusterName}
	kc.CurrentContext = clusterName
	out, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("rendering the proxy kubeconfig: %w", err)
	}
	return out, nil
}

// Close stops the proxy, ending open watches.
func (p *APIFaultProxy) Close() {
	_ = p.srv.Close() // only reports listener close errors
}
