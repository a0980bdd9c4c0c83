package ovirtsim

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// serveAdmin implements the /sim/ endpoints: JSON, no authentication, not
// counted. See docs/ovirtsim.md.
func (s *Simulator) serveAdmin(w http.ResponseWriter, r *http.Request) {
	segs := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/sim/"), "/"), "/")
	route := r.Method + " " + strings.Join(adminShape(segs), "/")
	ok := func(v any) { writeJSON(w, http.StatusOK, v) }
	fail := func(err error) { writeAdminError(w, err) }
	switch route {
	case "GET healthz":
		ok(map[string]string{"status": "ok"})
	case "GET state":
		ok(s.Dump())
	case "POST reset":
		s.Reset()
		ok(map[string]string{"status": "reset"})
	case "GET counters":
		ok(s.Counters())
	case "POST counters/reset":
		s.ResetCounters()
		ok(map[string]string{"status": "reset"})
	case "GET requests":
		log := s.RequestLog()
		if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n >= 0 && n < len(log) {
			log = log[len(log)-n:]
		}
		ok(log)
	case "POST restart":
		s.RestartEngine()
		ok(map[string]string{"status": "restarted"})
	case "GET faults":
		_, f := s.rules.snapshot()
		ok(f)
	case "PUT faults":
		var rules []FaultRule
		if err := decodeJSON(r, &rules); err != nil {
			fail(err)
		} else if err := s.setFaults(rules); err != nil {
			fail(err)
		} else {
			_, f := s.rules.snapshot()
			ok(f)
		}
	case "GET latency":
		l, _ := s.rules.snapshot()
		ok(l)
	case "PUT latency":
		var rules []LatencyRule
		if err := decodeJSON(r, &rules); err != nil {
			fail(err)
		} else if err := s.setLatency(rules); err != nil {
			fail(err)
		} else {
			l, _ := s.rules.snapshot()
			ok(l)
		}
	case "PUT timings":
		var t Timings
		if err := decodeJSON(r, &t); err != nil {
			fail(err)
		} else if t, err = normaliseTimings(t); err != nil {
			fail(err)
		} else {
			s.SetTimings(t)
			ok(t)
		}
	case "PUT guest-agent":
		if on, err := decodeSwitch(r, "enabled"); err != nil {
			fail(err)
		} else {
			s.SetGuestAgent(on)
			ok(map[string]bool{"enabled": on})
		}
	case "PUT vms/{id}/guest-agent":
		if on, err := decodeSwitch(r, "enabled"); err != nil {
			fail(err)
		} else if err := s.SetVMGuestAgent(segs[1], on); err != nil {
			fail(err)
		} else {
			ok(map[string]any{"id": segs[1], "enabled": on})
		}
	case "PUT guest-interfaces":
		var g GuestInterfaces
		if err := decodeJSON(r, &g); err != nil {
			fail(err)
		} else if err := s.SetGuestInterfaces(g); err != nil {
			fail(err)
		} else {
			ok(g)
		}
	case "PUT follow":
		if ignore, err := decodeSwitch(r, "ignore"); err != nil {
			fail(err)
		} else {
			s.SetIgnoreFollow(ignore)
			ok(map[string]bool{"ignore": ignore})
		}
	case "PUT credentials":
		var body struct {
			Username string `json:"username"`
			Password string `json:"password"`
		}
		if err := decodeJSON(r, &body); err != nil {
			fail(err)
		} else if body.Username == "" || body.Password == "" {
			fail(invalidf("username and password are required"))
		} else {
			s.SetCredentials(body.Username, body.Password)
			ok(map[string]string{"username": body.Username})
		}
	case "PUT token-ttl":
		var body struct {
			TTL *Duration `json:"ttl"`
		}
		if err := decodeJSON(r, &body); err != nil {
			fail(err)
		} else if body.TTL == nil {
			fail(invalidf(`want {"ttl": "5m"}`))
		} else {
			s.SetTokenTTL(body.TTL.Std())
			ok(map[string]Duration{"ttl": *body.TTL})
		}
	case "PUT users":
		var u User
		if err := decodeJSON(r, &u); err != nil {
			fail(err)
		} else if err := s.AddUser(u); err != nil {
			fail(err)
		} else {
			writeJSON(w, http.StatusCreated, map[string]string{"username": u.Username})
		}
	case "PUT templates":
		var t Template
		if err := decodeJSON(r, &t); err != nil {
			fail(err)
		} else if err := s.AddTemplate(t); err != nil {
			fail(err)
		} else {
			writeJSON(w, http.StatusCreated, map[string]string{"name": t.Name})
		}
	case "DELETE templates/{name}":
		if err := s.RemoveTemplate(segs[1]); err != nil {
			fail(err)
		} else {
			ok(map[string]string{"removed": segs[1]})
		}
	case "PUT storagedomains":
		var sd StorageDomain
		if err := decodeJSON(r, &sd); err != nil {
			fail(err)
		} else if err := s.AddStorageDomain(sd); err != nil {
			fail(err)
		} else {
			writeJSON(w, http.StatusCreated, map[string]string{"name": sd.Name})
		}
	case "PUT storagedomains/{name}/status":
		var body struct {
			Status string `json:"status"`
		}
		if err := decodeJSON(r, &body); err != nil {
			fail(err)
		} else if err := s.SetStorageDomainStatus(segs[1], body.Status); err != nil {
			fail(err)
		} else {
			ok(map[string]string{"name": segs[1], "status": body.Status})
		}
	case "PUT vnicprofiles":
		var p VnicProfile
		if err := decodeJSON(r, &p); err != nil {
			fail(err)
		} else if err := s.AddVnicProfile(p); err != nil {
			fail(err)
		} else {
			writeJSON(w, http.StatusCreated, map[string]string{"name": p.Name})
		}
	case "POST vms/{id}/csi-disks":
		var body struct {
			SizeGB int64 `json:"size_gb"`
		}
		if err := decodeJSON(r, &body); err != nil {
			fail(err)
		} else if id, err := s.AttachCSIDisk(segs[1], body.SizeGB); err != nil {
			fail(err)
		} else {
			writeJSON(w, http.StatusCreated, map[string]string{"id": id})
		}
	case "DELETE vms/{id}/disks/{id}":
		if err := s.DetachDisk(segs[1], segs[3]); err != nil {
			fail(err)
		} else {
			ok(map[string]string{"detached": segs[3]})
		}
	case "DELETE vms/{id}/tags/{name}":
		if err := s.UntagVM(segs[1], segs[3]); err != nil {
			fail(err)
		} else {
			ok(map[string]string{"untagged": segs[3]})
		}
	case "PUT vms/{id}/ignores-acpi":
		if on, err := decodeSwitch(r, "enabled"); err != nil {
			fail(err)
		} else if err := s.SetVMIgnoresACPI(segs[1], on); err != nil {
			fail(err)
		} else {
			ok(map[string]bool{"enabled": on})
		}
	case "PUT vms/{id}/guest-hung":
		if on, err := decodeSwitch(r, "enabled"); err != nil {
			fail(err)
		} else if err := s.SetGuestHung(segs[1], on); err != nil {
			fail(err)
		} else {
			ok(map[string]bool{"enabled": on})
		}
	case "GET vms/{id}/guest":
		if g, err := s.Guest(segs[1]); err != nil {
			fail(err)
		} else {
			ok(g)
		}
	case "GET vms/{id}/initialization":
		if in, err := s.Initialization(segs[1]); err != nil {
			fail(err)
		} else {
			ok(in)
		}
	case "GET hosts":
		ok(s.Hosts())
	case "POST hosts":
		var body struct {
			Cluster  string `json:"cluster"`
			Name     string `json:"name"`
			MemoryGB int64  `json:"memory_gb"`
		}
		if err := decodeJSON(r, &body); err != nil {
			fail(err)
		} else if body.MemoryGB < 0 {
			fail(invalidf("negative memory_gb"))
		} else if id, err := s.AddHost(body.Cluster, body.Name, body.MemoryGB*gib); err != nil {
			fail(err)
		} else {
			writeJSON(w, http.StatusCreated, map[string]string{"id": id, "name": body.Name})
		}
	case "PUT hosts/{name}/status":
		var body struct {
			Status string `json:"status"`
		}
		if err := decodeJSON(r, &body); err != nil {
			fail(err)
		} else if err := s.SetHostStatus(segs[1], body.Status); err != nil {
			fail(err)
		} else if h, found := s.Host(segs[1]); found {
			ok(h)
		}
	case "GET affinitygroups":
		ok(s.AffinityGroups(r.URL.Query().Get("cluster")))
	case "GET tags":
		ok(s.Tags())
	case "DELETE vms/{id}":
		if err := s.DeleteVM(segs[1]); err != nil {
			fail(err)
		} else {
			ok(map[string]string{"deleted": segs[1]})
		}
	default:
		if s.serveAdminHA(w, r, route, segs) { // crash, guest shutdown, huge pages (ha.go)
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown admin endpoint " + r.Method + " " + r.URL.Path})
	}
}

// adminShape replaces the variable segments of an admin path by placeholders.
func adminShape(segs []string) []string {
	out := append([]string(nil), segs...)
	if len(out) >= 2 {
		switch out[0] {
		case "vms":
			out[1] = "{id}"
			if len(out) == 4 && out[2] == "disks" {
				out[3] = "{id}"
			}
			if len(out) == 4 && out[2] == "tags" {
				out[3] = "{name}"
			}
		case "templates":
			out[1] = "{name}"
		case "storagedomains", "hosts":
			out[1] = "{name}"
		}
	}
	return out
}

func decodeJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%w: reading body: %w", ErrInvalid, err)
	}
	if err := strictUnmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// decodeSwitch reads a body {"<key>": true|false}; the key is required.
func decodeSwitch(r *http.Request, key string) (bool, error) {
	var body map[string]*bool
	if err := decodeJSON(r, &body); err != nil {
		return false, err
	}
	v, found := body[key]
	if !found || v == nil || len(body) != 1 {
		return false, invalidf(`want {"%s": true|false}`, key)
	}
	return *v, nil
}

func writeAdminError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, ErrConflict):
		status = http.StatusConflict
	case errors.Is(err, ErrInvalid):
		status = http.StatusBadRequest
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}
