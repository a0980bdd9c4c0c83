package ovirtsim

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
)

// ObservedRequest is an API request that arrived on a listener of ServeObserved, as it was
// before the simulator served it.
type ObservedRequest struct {
	// Time is when the request arrived.
	Time time.Time
	// Method is the HTTP method.
	Method string
	// Path is the path relative to /ovirt-engine/api, with its ids ("/vms/<id>/stop").
	Path string
	// Template is the path template the counters use ("/vms/{id}/stop"; "/{unknown}").
	Template string
	// VMID is the VM id of a path under /vms/{id} (empty otherwise).
	VMID string
	// VM is the state of that VM when the request arrived; VMExists is false when there was
	// no such VM.
	VM       VMState
	VMExists bool
}

// ServeObserved serves the simulator on a further HTTPS listener (same certificate, same
// state, faults and counters) that calls observe with every API request before it is served,
// and returns that listener's API URL. Point a client at it to see which VM each of its
// requests names and what that VM looked like at that moment: the request log only keeps path
// templates. observe runs on the request's goroutine and must be quick. The listener stops with
// Close or Shutdown.
func (s *Simulator) ServeObserved(observe func(ObservedRequest)) (string, error) {
	host, _, err := net.SplitHostPort(s.addr)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", s.addr, err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("listening for the observed API: %w", err)
	}
	cfg := &tls.Config{Certificates: s.srv.TLSConfig.Certificates, MinVersion: tls.VersionTLS12}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if p := r.URL.Path; p == apiPrefix || strings.HasPrefix(p, apiPrefix+"/") {
				observe(s.observe(r.Method, p[len(apiPrefix):]))
			}
			s.ServeHTTP(w, r)
		}),
		TLSConfig:         cfg,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = srv.Serve(expectListener{tls.NewListener(ln, cfg)}) }() // ends with Close below
	go func() {
		<-s.done
		_ = srv.Close() // only reports listener close errors
	}()
	return "https://" + ln.Addr().String() + apiPrefix, nil
}

func (s *Simulator) observe(method, rest string) ObservedRequest {
	_, _, tmpl, _ := s.match(method, rest)
	o := ObservedRequest{Time: time.Now(), Method: method, Path: rest, Template: tmpl}
	if segs := strings.Split(strings.TrimPrefix(rest, "/"), "/"); len(segs) >= 2 && segs[0] == "vms" && segs[1] != "" {
		o.VMID = segs[1]
		o.VM, o.VMExists = s.VM(o.VMID)
	}
	return o
}

// IssuedTokens returns the SSO access tokens that are valid now, sorted (tests plant them as
// sentinels that must never show up in logs).
func (s *Simulator) IssuedTokens() []string {
	s.authMu.RLock()
	defer s.authMu.RUnlock()
	out := make([]string, 0, len(s.tokens))
	for tok := range s.tokens {
		out = append(out, tok)
	}
	slices.Sort(out)
	return out
}
