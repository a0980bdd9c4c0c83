package sdk

import (
	"bytes"
	"context"
	"encoding/pem"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

// engineFront is a TLS front end before the simulator. It answers the requests its answer
// function takes (returns true for) itself, with what a real Engine sends — texts and shapes of
// Engine versions the simulator does not reproduce — and passes every other request (the SSO
// login, lookups) on to the simulator. It records every API request it sees.
type engineFront struct {
	srv *httptest.Server
	sim *ovirtsim.Simulator

	mu     sync.Mutex
	answer func(w http.ResponseWriter, r *http.Request, path, body string) bool
	seen   []string          // "METHOD /path?query", relative to /ovirt-engine/api
	bodies map[string]string // "METHOD /path" -> the last request body
}

const apiPath = "/ovirt-engine/api"

func newEngineFront(t *testing.T, sim *ovirtsim.Simulator) *engineFront {
	t.Helper()
	f := &engineFront{sim: sim, bodies: map[string]string{}}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		path, isAPI := strings.CutPrefix(r.URL.Path, apiPath)
		f.mu.Lock()
		answer := f.answer
		if isAPI {
			key := r.Method + " " + path
			if r.URL.RawQuery != "" {
				key += "?" + r.URL.RawQuery
			}
			f.seen = append(f.seen, key)
			f.bodies[r.Method+" "+path] = string(body)
		}
		f.mu.Unlock()
		if isAPI && answer != nil && answer(w, r, path, string(body)) {
			return
		}
		sim.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// set replaces the answer function (nil passes everything on).
func (f *engineFront) set(answer func(w http.ResponseWriter, r *http.Request, path, body string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = answer
}

// client returns a connected Client of a new Factory that talks to the front.
func (f *engineFront) client(t *testing.T) (*env, ovirt.Client) {
	t.Helper()
	e := newEnv(t, f.sim, Options{})
	e.cfg.URL = f.srv.URL + apiPath
	e.cfg.TLS = ovirt.TLS{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})}
	c, err := e.f.ForProvider(context.Background(), e.cfg)
	if err != nil {
		t.Fatalf("connecting through the front: %v", err)
	}
	return e, c
}

// reset forgets the requests seen so far.
func (f *engineFront) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = nil
	clear(f.bodies)
}

// count returns how many requests had this method and path (query ignored).
func (f *engineFront) count(method, path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.seen {
		p, _, _ := strings.Cut(s, "?")
		if p == method+" "+path {
			n++
		}
	}
	return n
}

// requests returns the requests seen, "METHOD /path?query".
func (f *engineFront) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// body returns the last body sent with this method and path.
func (f *engineFront) body(method, path string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[method+" "+path]
}

// writeXML answers with an XML body.
func writeXML(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// writeFault answers like the Engine's BackendFailureException mapper.
func writeFault(w http.ResponseWriter, status int, detail string) {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(detail))
	writeXML(w, status, fmt.Sprintf("<fault><reason>Operation Failed</reason><detail>%s</detail></fault>", b.String()))
}

// writeEmpty answers with a status and no body (a real Engine's 404 for a missing entity).
func writeEmpty(w http.ResponseWriter, status int) {
	w.WriteHeader(status)
}
