package ovirtsim

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	ovirtsdk "github.com/ovirt/go-ovirt"
)

const (
	apiPrefix     = "/ovirt-engine/api"
	ssoTokenPath  = "/ovirt-engine/sso/oauth/token"
	ssoLogoutPath = "/ovirt-engine/services/sso-logout"
	ssoTokenTmpl  = "/sso/oauth/token"
	ssoLogoutTmpl = "/services/sso-logout"
	unknownTmpl   = "/{unknown}"
	maxBodyBytes  = 16 << 20

	// invalidGrantHTML is what the engine answers to a missing, expired or
	// revoked token. The SDK cannot parse it as a <fault> and returns a
	// *ResponseParseError with Code 401.
	invalidGrantHTML = "<html><head><title>Error</title></head><body>invalid_grant: The provided authorization grant for the auth code has expired.</body></html>"
)

// ServeHTTP dispatches engine API, SSO and admin requests.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == apiPrefix || strings.HasPrefix(p, apiPrefix+"/"):
		s.serveAPI(w, r, p[len(apiPrefix):])
	case p == ssoTokenPath:
		s.serveSSO(w, r, ssoTokenTmpl, s.ssoToken)
	case p == ssoLogoutPath:
		s.serveSSO(w, r, ssoLogoutTmpl, s.ssoLogout)
	case p == pkiResourcePath:
		s.servePKIResource(w, r)
	case strings.HasPrefix(p, "/sim/"):
		s.serveAdmin(w, r)
	default:
		http.NotFound(w, r)
	}
}

// pause waits for d, or until the client goes away or the simulator stops.
func (s *Simulator) pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.done:
	}
}

// apiReq is one API request being served.
type apiReq struct {
	w       http.ResponseWriter
	r       *http.Request
	ids     []string
	q       url.Values
	corr    string
	status  int
	body    []byte
	bodyErr error
	user    string     // who sent it: "" for the administrator
	bufs    *sync.Pool // response buffers of the simulator
	owner   linkOwner  // owner of the listed sub-collection, for hrefs
	extra   string     // raw XML added to the top-level entity (creation_status)
	// extraFor gives raw XML for full entities by kind and id (fields go-ovirt lacks).
	extraFor func(kind, id string) string
	plain    bool // answer without hrefs and links (an entity echoed as it was posted)
}

func (s *Simulator) serveAPI(w http.ResponseWriter, r *http.Request, rest string) {
	start := time.Now()
	s.stats.enter()
	defer s.stats.leave()
	rt, ids, tmpl, known := s.match(r.Method, rest)
	rq := &apiReq{w: w, r: r, ids: ids, bufs: &s.bufs}
	gone := false
	defer func() {
		rec := recover()
		if rec != nil && !isAbort(rec) && rq.status == 0 {
			rq.fault(&apiError{500, reasonFailed, fmt.Sprintf("simulator error: %v", rec)})
		}
		status := rq.status
		if gone {
			status = 499
		}
		var first string
		if len(ids) > 0 {
			first = ids[0]
		}
		s.stats.record(RequestRecord{Start: start, End: time.Now(), Method: r.Method, Path: tmpl, ID: first, Status: status}, true)
		if isAbort(rec) {
			panic(rec) // a dropped connection: net/http closes it without an answer
		}
		if gone {
			// The request's context ended (its client went away) and the answer
			// went nowhere. Returning normally would let net/http finish the
			// response with an implicit "200 OK" and an empty body, which a
			// client still reading the connection takes for a success: abort
			// the connection instead, so that no answer is ever readable.
			panic(http.ErrAbortHandler)
		}
	}()

	// Read the body first: net/http notices a client that goes away (and
	// cancels the context that ends latencies and hangs) only once the
	// request body has been consumed.
	rq.body, rq.bodyErr = io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	ctx := r.Context()
	s.pause(ctx, s.rules.delay(r.Method, tmpl))
	f, fire := s.rules.fault(r.Method, tmpl)
	if fire && !f.After {
		s.pause(ctx, f.Hang)
		gone = ctx.Err() != nil
		switch {
		case gone && (f.mode() == FaultModeDrop || f.Status != 0):
			return // the fault replaces the work, and nobody is left to answer
		case f.mode() == FaultModeDrop:
			rq.drop()
			return
		case f.Status != 0:
			rq.injected(f)
			return
		}
	}
	if fire && f.After {
		// Execute-then-fail: serve the request into a buffer, then answer as the rule says.
		real, c := rq.w, &capture{h: http.Header{}}
		rq.w = c
		defer func() {
			rq.w = real
			s.pause(ctx, f.Hang)
			gone = ctx.Err() != nil
			switch {
			case gone:
				// The client went away during the hang. Writing the answer now
				// would race with its close: it could still read an answer it
				// had given up on. A real Engine's answer goes nowhere.
			case f.mode() == FaultModeDrop:
				rq.drop()
			case f.Status != 0:
				rq.injected(f)
			default:
				c.flushTo(real)
			}
		}()
	}
	if gone = ctx.Err() != nil; gone {
		// Gone during a latency or a hang before the work: the work is done
		// (the Engine received the request), the answer is discarded.
		rq.w = &capture{h: http.Header{}}
	}
	user, ok := s.authorised(r)
	if !ok {
		rq.unauthorized()
		return
	}
	rq.user = user
	if rt == nil {
		if known {
			rq.fault(&apiError{405, "Method Not Allowed", fmt.Sprintf("%s is not supported on %s", r.Method, tmpl)})
		} else {
			rq.fault(&apiError{404, "Not Found", "Resource not found: " + r.URL.Path})
		}
		return
	}
	rq.q = r.URL.Query()
	rq.corr = rq.q.Get("correlation_id")
	if rq.corr == "" {
		rq.corr = r.Header.Get("Correlation-Id")
	}
	if rq.corr != "" && r.Method != http.MethodGet {
		if aerr := checkCorrelationID(rq.corr); aerr != nil {
			rq.fault(aerr)
			return
		}
	}
	rt.h(s, rq)
	if rq.status == 0 {
		rq.fault(&apiError{500, reasonFailed, "simulator error: handler wrote no answer"})
	}
}

// capture buffers an answer for an execute-then-fail rule.
type capture struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (c *capture) Header() http.Header { return c.h }

func (c *capture) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.body.Write(b)
	if err != nil {
		return n, fmt.Errorf("buffering the answer: %w", err)
	}
	return n, nil
}

// flushTo sends the buffered answer.
func (c *capture) flushTo(w http.ResponseWriter) {
	for k, v := range c.h {
		w.Header()[k] = v
	}
	w.WriteHeader(cmp.Or(c.status, http.StatusOK))
	_, _ = w.Write(c.body.Bytes()) // the client may be gone; nothing to do
}

// isAbort tells whether a recovered panic value is http.ErrAbortHandler.
func isAbort(rec any) bool {
	err, ok := rec.(error)
	return ok && errors.Is(err, http.ErrAbortHandler)
}

// drop closes the connection without an answer (status 0 in the counters).
func (rq *apiReq) drop() {
	rq.status = 0
	dropConnection(rq.w)
}

// dropConnection hijacks and closes the connection; where that is not
// possible (HTTP/2, an in-process recorder) it aborts the handler, which
// makes net/http reset the stream or close the connection.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close() // nothing to report: the point is to drop it
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func (rq *apiReq) injected(f FaultRule) {
	if f.Status == http.StatusUnauthorized {
		rq.unauthorized()
		return
	}
	detail := f.Detail
	if detail == "" {
		detail = fmt.Sprintf("Injected fault: HTTP %d %s", f.Status, http.StatusText(f.Status))
	}
	rq.writeFault(&apiError{f.Status, reasonFailed, detail})
}

func (rq *apiReq) unauthorized() {
	h := rq.w.Header()
	h.Set("Content-Type", "text/html;charset=UTF-8")
	h.Set("WWW-Authenticate", `Bearer realm="RESTAPI"`)
	rq.status = http.StatusUnauthorized
	rq.w.WriteHeader(rq.status)
	_, _ = rq.w.Write([]byte(invalidGrantHTML)) // the client may be gone; nothing to do
}

type xmlBuf struct {
	buf bytes.Buffer
	out bytes.Buffer // buf with hrefs and links
	w   *ovirtsdk.XMLWriter
}

func newXMLBuf() any {
	b := &xmlBuf{}
	b.w = ovirtsdk.NewXMLWriter(&b.buf)
	return b
}

// writeXML renders with go-ovirt's own writer and answers with status.
func (rq *apiReq) writeXML(status int, render func(*ovirtsdk.XMLWriter) error) {
	b := rq.bufs.Get().(*xmlBuf)
	defer rq.bufs.Put(b)
	b.buf.Reset()
	if err := render(b.w); err != nil {
		b.w.Reset(&b.buf)
		rq.fault(&apiError{500, reasonFailed, "simulator error: rendering: " + err.Error()})
		return
	}
	if err := b.w.Flush(); err != nil {
		rq.fault(&apiError{500, reasonFailed, "simulator error: rendering: " + err.Error()})
		return
	}
	body := b.buf.Bytes()
	if status < 300 && !rq.plain {
		b.out.Reset()
		addLinks(&b.out, body, rq.owner, rq.extra, rq.extraFor)
		body = b.out.Bytes()
	}
	h := rq.w.Header()
	h.Set("Content-Type", "application/xml;charset=UTF-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	rq.status = status
	rq.w.WriteHeader(status)
	_, _ = rq.w.Write(body) // the client may be gone; nothing to do
}

// fault answers an engine error. A GET of a missing entity is a 404 with an
// empty body, as the engine's BackendResource answers it (no <fault>).
func (rq *apiReq) fault(e *apiError) {
	if (e.reason == "" && e.detail == "") || (e.status == http.StatusNotFound && rq.r.Method == http.MethodGet) {
		rq.status = e.status
		rq.w.Header().Set("Content-Length", "0")
		rq.w.WriteHeader(e.status)
		return
	}
	rq.writeFault(e)
}

// writeFault answers <fault><reason/><detail/></fault> with e's status.
func (rq *apiReq) writeFault(e *apiError) {
	f := &ovirtsdk.Fault{}
	f.SetReason(esc(e.reason))
	f.SetDetail(esc(e.detail))
	rq.writeXML(e.status, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLFaultWriteOne(w, f, "") })
}

// actionDone answers a successful action the way the engine does.
func (rq *apiReq) actionDone() {
	a := &ovirtsdk.Action{}
	a.SetStatus("complete")
	rq.writeXML(http.StatusOK, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLActionWriteOne(w, a, "") })
}

// removed answers a successful DELETE: 200 with no body.
// removed answers a DELETE like the engine: 200 with <action><status>complete</status></action>.
func (rq *apiReq) removed() { rq.actionDone() }

// token is an issued SSO access token.
type token struct {
	issued time.Time
	user   string // "" for the administrator
}

// authorised reports whether the request carries a valid token (or basic credentials), and
// whose: "" for the administrator, else a user's name.
func (s *Simulator) authorised(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	s.authMu.RLock()
	defer s.authMu.RUnlock()
	if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
		t, found := s.tokens[tok]
		return t.user, found && (s.ttl <= 0 || time.Since(t.issued) < s.ttl)
	}
	// The engine also accepts HTTP basic authentication (handy with curl).
	if u, p, ok := r.BasicAuth(); ok {
		return s.login(u, p)
	}
	return "", false
}

// login checks credentials; it returns "" for the administrator. Called with authMu held.
func (s *Simulator) login(user, pass string) (string, bool) {
	if user == "" {
		return "", false
	}
	if user == s.username {
		return "", pass == s.password
	}
	u := s.users[user]
	return user, u != nil && pass == u.password
}

// serveSSO runs latency, faults and counting around an SSO endpoint.
func (s *Simulator) serveSSO(w http.ResponseWriter, r *http.Request, tmpl string, h func(http.ResponseWriter, *http.Request) int) {
	start := time.Now()
	ctx := r.Context()
	s.pause(ctx, s.rules.delay(r.Method, tmpl))
	status := 0
	if f, fire := s.rules.fault(r.Method, tmpl); fire {
		// After is not modelled on SSO endpoints: the fault replaces the work.
		s.pause(ctx, f.Hang)
		if f.mode() == FaultModeDrop {
			s.stats.record(RequestRecord{Start: start, End: time.Now(), Method: r.Method, Path: tmpl, Status: 0}, false)
			dropConnection(w)
			return
		}
		if f.Status != 0 {
			detail := f.Detail
			if detail == "" {
				detail = fmt.Sprintf("Injected fault: HTTP %d %s", f.Status, http.StatusText(f.Status))
			}
			if f.Status == http.StatusUnauthorized {
				status = writeText(w, f.Status, "text/html;charset=UTF-8", "<html><body>"+detail+"</body></html>")
			} else {
				status = writeJSON(w, f.Status, map[string]string{"error_code": "server_error", "error": detail})
			}
		}
	}
	if status == 0 {
		status = h(w, r)
	}
	s.stats.record(RequestRecord{Start: start, End: time.Now(), Method: r.Method, Path: tmpl, Status: status}, false)
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding failed"}`)
	}
	return writeText(w, status, "application/json", string(b))
}

func writeText(w http.ResponseWriter, status int, contentType, body string) int {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body)) // the client may be gone; nothing to do
	return status
}

func ssoError(w http.ResponseWriter, status int, code, msg string) int {
	return writeJSON(w, status, map[string]string{"error_code": code, "error": msg})
}

// ssoToken implements the engine's OAuth password grant.
func (s *Simulator) ssoToken(w http.ResponseWriter, r *http.Request) int {
	if r.Method != http.MethodPost {
		return ssoError(w, http.StatusMethodNotAllowed, "invalid_request", "The token endpoint requires POST.")
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		s.stats.login(false)
		return ssoError(w, http.StatusBadRequest, "invalid_request", "Malformed request: "+err.Error())
	}
	if gt := r.Form.Get("grant_type"); gt != "password" {
		s.stats.login(false)
		return ssoError(w, http.StatusBadRequest, "unsupported_grant_type", fmt.Sprintf("The grant type '%s' is not supported.", gt))
	}
	if !strings.Contains(r.Form.Get("scope"), "ovirt-app-api") {
		s.stats.login(false)
		return ssoError(w, http.StatusBadRequest, "invalid_scope", "The requested scope is invalid: "+r.Form.Get("scope"))
	}
	user, pass := r.Form.Get("username"), r.Form.Get("password")
	s.authMu.Lock()
	who, ok := s.login(user, pass)
	if !ok {
		s.authMu.Unlock()
		s.stats.login(false)
		return ssoError(w, http.StatusBadRequest, "access_denied",
			fmt.Sprintf("Cannot authenticate user '%s': The username or password is incorrect..", user))
	}
	tok := newToken()
	now := time.Now()
	if len(s.tokens) > 10000 && s.ttl > 0 { // drop expired tokens now and then
		for k, t := range s.tokens {
			if now.Sub(t.issued) >= s.ttl {
				delete(s.tokens, k)
			}
		}
	}
	s.tokens[tok] = token{issued: now, user: who}
	exp := now.Add(100 * 365 * 24 * time.Hour)
	if s.ttl > 0 {
		exp = now.Add(s.ttl)
	}
	s.authMu.Unlock()
	s.stats.login(true)
	return writeJSON(w, http.StatusOK, map[string]string{
		"access_token": tok, "scope": "ovirt-app-api", "token_type": "bearer",
		"exp": strconv.FormatInt(exp.UnixMilli(), 10),
	})
}

// ssoLogout revokes the named token, if any.
func (s *Simulator) ssoLogout(w http.ResponseWriter, r *http.Request) int {
	if r.Method != http.MethodPost {
		return ssoError(w, http.StatusMethodNotAllowed, "invalid_request", "The logout endpoint requires POST.")
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		return ssoError(w, http.StatusBadRequest, "invalid_request", "Malformed request: "+err.Error())
	}
	if tok := r.Form.Get("token"); tok != "" {
		s.authMu.Lock()
		delete(s.tokens, tok)
		s.authMu.Unlock()
	}
	return writeText(w, http.StatusOK, "application/json", "{}")
}

func newToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// route is one API endpoint: method and path template relative to /ovirt-engine/api.
type route struct {
	method string
	tmpl   string
	segs   []string
	h      func(*Simulator, *apiReq)
}

// match finds the route of a request. It returns the path template (for
// counters and rules) and whether the path exists with another method.
func (s *Simulator) match(method, rest string) (*route, []string, string, bool) {
	if len(rest) > 1 {
		rest = strings.TrimSuffix(rest, "/")
	}
	if rest == "" || rest == "/" {
		rest = "/"
	}
	var segs []string
	if rest != "/" {
		segs = strings.Split(rest[1:], "/")
	}
	tmpl, known := unknownTmpl, false
	for i := range s.routes {
		rt := &s.routes[i]
		if len(rt.segs) != len(segs) {
			continue
		}
		var ids []string
		ok := true
		for j, seg := range rt.segs {
			if seg == "{id}" {
				if segs[j] == "" {
					ok = false
					break
				}
				ids = append(ids, segs[j])
			} else if seg != segs[j] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		tmpl, known = rt.tmpl, true
		if rt.method == method {
			return rt, ids, tmpl, true
		}
	}
	return nil, nil, tmpl, known
}

func newRoute(method, tmpl string, h func(*Simulator, *apiReq)) route {
	var segs []string
	if tmpl != "/" {
		segs = strings.Split(tmpl[1:], "/")
	}
	return route{method: method, tmpl: tmpl, segs: segs, h: h}
}
