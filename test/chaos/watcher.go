package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/ovirtsim"
)

// The invariants (see the package documentation).
const (
	I1 = "I1 at most one VM per machine"
	I2 = "I2 no write to a VM without our marker"
	I3 = "I3 no out-of-band disk deleted"
	I4 = "I4 no VM without an OVirtMachine"
	I5 = "I5 finalizers drop after the fault heals"
	I6 = "I6 oVirt call-rate ceilings"
	I7 = "I7 no sentinel in logs, events, conditions or metrics"
	I8 = "I8 goroutines, file descriptors and in-flight calls back to baseline"
	// Converge is not an invariant but liveness: once the fault heals, the machines the driver
	// wants become Ready.
	Converge = "converge: machines Ready after the fault heals"
	// SecretKept is the data-safety check of the provider and Secret scenarios: the credentials
	// Secret is never lost.
	SecretKept = "the credentials Secret is never lost"
)

// Violation is one broken invariant.
type Violation struct {
	// Invariant is one of I1..I8, Converge, SecretKept or a scenario's own check.
	Invariant string
	// Scenario is the scenario that ran when it was seen.
	Scenario string
	// Time is when it was seen.
	Time time.Time
	// Message says what happened; Objects names the objects and VMs involved.
	Message string
	Objects []string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s [%s] at %s: %s (objects: %s)", v.Invariant, v.Scenario, v.Time.Format("15:04:05.000"), v.Message, strings.Join(v.Objects, ", "))
}

// Write is a non-GET request to a VM's path, as the observed listener saw it.
type Write struct {
	Time             time.Time
	Method, Template string
	VMID, VMName     string
	// Owner is the namespace/name the VM's marker named at that moment ("" without a marker).
	Owner string
}

// markerRE matches the owner marker the manager writes into the VM comment.
var markerRE = regexp.MustCompile(`capov ovirtmachine=([^/\s]+)/(\S+) uid=(\S*)`)

// MarkerOwner returns the namespace/name a VM comment's owner marker names ("" if none).
func MarkerOwner(comment string) string {
	m := markerRE.FindStringSubmatch(comment)
	if m == nil {
		return ""
	}
	return m[1] + "/" + m[2]
}

// MarkerUID returns the uid of a VM comment's owner marker.
func MarkerUID(comment string) string {
	m := markerRE.FindStringSubmatch(comment)
	if m == nil {
		return ""
	}
	return m[3]
}

type hook struct {
	match func(ovirtsim.ObservedRequest) bool
	ch    chan ovirtsim.ObservedRequest
}

// Watcher checks the invariants while scenarios run: I2 on every request of the observed
// listener, I1, I3 and I7 in a poll loop, the others when a scenario ends.
type Watcher struct {
	w *World

	mu             sync.Mutex
	scenario       string
	violations     []Violation
	reported       map[string]bool
	namespaces     map[string]bool   // namespaces the suite's machines live in
	foreignVMs     map[string]string // VM id -> why it is not ours
	foreignMarkers map[string]bool   // namespace/name markers planted on foreign VMs
	csi            map[string]string // out-of-band disk id -> VM it was attached to
	sentinels      map[string]string // value -> what it is
	writes         []Write
	hooks          []*hook
	logOffsets     map[string]int64
	logTail        map[string]string
	clients        []client.Client // more management clusters whose statuses I7 reads

	cancel context.CancelFunc
	done   chan struct{}
}

func newWatcher(w *World) *Watcher {
	return &Watcher{w: w, reported: map[string]bool{}, namespaces: map[string]bool{}, foreignVMs: map[string]string{},
		foreignMarkers: map[string]bool{}, csi: map[string]string{}, sentinels: map[string]string{},
		logOffsets: map[string]int64{}, logTail: map[string]string{}}
}

// Begin starts attributing violations to scenario.
func (wa *Watcher) Begin(scenario string) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	wa.scenario = scenario
}

// Violations returns the violations seen while scenario ran.
func (wa *Watcher) Violations(scenario string) []Violation {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	var out []Violation
	for _, v := range wa.violations {
		if v.Scenario == scenario {
			out = append(out, v)
		}
	}
	return out
}

// Violate records a violation once per key.
func (wa *Watcher) Violate(key, invariant, message string, objects ...string) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	if key != "" {
		if wa.reported[wa.scenario+"|"+key] {
			return
		}
		wa.reported[wa.scenario+"|"+key] = true
	}
	v := Violation{Invariant: invariant, Scenario: wa.scenario, Time: time.Now(), Message: message, Objects: objects}
	wa.violations = append(wa.violations, v)
	wa.w.Logf("VIOLATION %s", v)
}

// AddClient adds a management cluster whose object statuses I7 reads too.
func (wa *Watcher) AddClient(c client.Client) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	wa.clients = append(wa.clients, c)
}

// RemoveClient undoes AddClient.
func (wa *Watcher) RemoveClient(c client.Client) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	wa.clients = slices.DeleteFunc(wa.clients, func(x client.Client) bool { return x == c })
}

// AddNamespace declares a namespace whose machines are the suite's.
func (wa *Watcher) AddNamespace(ns string) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	wa.namespaces[ns] = true
}

// AddForeignVM declares a VM that is not CAPOV's (planted by a scenario): no write to it is
// ever allowed.
func (wa *Watcher) AddForeignVM(id, why string) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	wa.foreignVMs[id] = why
}

// IsForeign reports whether a VM was planted as foreign.
func (wa *Watcher) IsForeign(id string) bool {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	return wa.foreignVMs[id] != ""
}

// AddForeignMarker declares a namespace/name marker planted on a VM that no OVirtMachine owns.
func (wa *Watcher) AddForeignMarker(owner string) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	wa.foreignMarkers[owner] = true
}

// TrackCSIDisk declares an out-of-band disk that must never be deleted (I3).
func (wa *Watcher) TrackCSIDisk(diskID, vmID string) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	wa.csi[diskID] = vmID
}

// ForgetCSIDisk stops tracking a disk (the suite deletes it itself, e.g. with its VM out of band).
func (wa *Watcher) ForgetCSIDisk(diskID string) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	delete(wa.csi, diskID)
}

// CSIDisksOf returns the tracked disks attached to a VM.
func (wa *Watcher) CSIDisksOf(vmID string) []string {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	var out []string
	for d, vm := range wa.csi {
		if vm == vmID {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// AddSentinel plants a value that must never appear in logs, events, conditions or metrics.
func (wa *Watcher) AddSentinel(value, what string) {
	if len(value) < 8 {
		return // too short to be meaningful
	}
	wa.mu.Lock()
	defer wa.mu.Unlock()
	if _, ok := wa.sentinels[value]; !ok {
		wa.sentinels[value] = what
	}
}

func (wa *Watcher) sentinelList() map[string]string {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	out := make(map[string]string, len(wa.sentinels))
	for k, v := range wa.sentinels {
		out[k] = v
	}
	return out
}

// Next returns a channel that receives the next observed request matching match.
func (wa *Watcher) Next(match func(ovirtsim.ObservedRequest) bool) <-chan ovirtsim.ObservedRequest {
	h := &hook{match: match, ch: make(chan ovirtsim.ObservedRequest, 1)}
	wa.mu.Lock()
	defer wa.mu.Unlock()
	wa.hooks = append(wa.hooks, h)
	return h.ch
}

// Writes returns the writes to VMs seen since t.
func (wa *Watcher) Writes(since time.Time) []Write {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	var out []Write
	for _, wr := range wa.writes {
		if !wr.Time.Before(since) {
			out = append(out, wr)
		}
	}
	return out
}

// diskOf returns the disk id a path names: /disks/{id}[/...] or /vms/{id}/diskattachments/{id}
// (an attachment has the id of its disk).
func diskOf(path string) string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case len(segs) >= 2 && segs[0] == "disks":
		return segs[1]
	case len(segs) >= 4 && segs[0] == "vms" && segs[2] == "diskattachments":
		return segs[3]
	}
	return ""
}

// IsWrite reports whether an observed request changes something.
func IsWrite(o ovirtsim.ObservedRequest) bool { return o.Method != "GET" && o.Method != "HEAD" }

// observe runs for every request of the observed listener, before the simulator serves it.
func (wa *Watcher) observe(o ovirtsim.ObservedRequest) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	kept := wa.hooks[:0]
	for _, h := range wa.hooks {
		if h.match(o) {
			h.ch <- o
			continue
		}
		kept = append(kept, h)
	}
	wa.hooks = kept
	if !IsWrite(o) {
		return
	}
	// A write to an out-of-band disk (its attachment or the disk itself) is a step towards
	// losing it: the manager has no business detaching, resizing or deleting user data.
	if d := diskOf(o.Path); d != "" && wa.csi[d] != "" {
		key := "I3|write|" + d + "|" + o.Method + " " + o.Template
		if !wa.reported[wa.scenario+"|"+key] {
			wa.reported[wa.scenario+"|"+key] = true
			v := Violation{Invariant: I3, Scenario: wa.scenario, Time: o.Time,
				Message: fmt.Sprintf("%s %s changes out-of-band disk %s", o.Method, o.Path, d), Objects: []string{"disk " + d, "VM " + wa.csi[d]}}
			wa.violations = append(wa.violations, v)
			wa.w.Logf("VIOLATION %s", v)
		}
	}
	if o.VMID == "" {
		return
	}
	owner := MarkerOwner(o.VM.Comment)
	wa.writes = append(wa.writes, Write{Time: o.Time, Method: o.Method, Template: o.Template, VMID: o.VMID, VMName: o.VM.Name, Owner: owner})
	if !o.VMExists {
		return // the Engine answers 404: nothing is written
	}
	why := ""
	switch {
	case wa.foreignVMs[o.VMID] != "":
		why = "a VM planted as foreign (" + wa.foreignVMs[o.VMID] + ")"
	case owner == "":
		why = fmt.Sprintf("a VM without an owner marker (comment %q)", o.VM.Comment)
	case wa.foreignMarkers[owner]:
		why = fmt.Sprintf("a VM whose marker names %s, which no OVirtMachine ever was", owner)
	case !wa.namespaces[strings.SplitN(owner, "/", 2)[0]]:
		why = fmt.Sprintf("a VM whose marker names %s, outside the suite's namespaces", owner)
	}
	if why == "" {
		return
	}
	key := "I2|" + o.VMID + "|" + o.Method + " " + o.Template
	if wa.reported[wa.scenario+"|"+key] {
		return
	}
	wa.reported[wa.scenario+"|"+key] = true
	v := Violation{Invariant: I2, Scenario: wa.scenario, Time: o.Time,
		Message: fmt.Sprintf("%s %s reached %s", o.Method, o.Path, why),
		Objects: []string{"VM " + o.VMID + " (" + o.VM.Name + ")"}}
	wa.violations = append(wa.violations, v)
	wa.w.Logf("VIOLATION %s", v)
}

func (wa *Watcher) start() {
	ctx, cancel := context.WithCancel(context.Background())
	wa.cancel, wa.done = cancel, make(chan struct{})
	go func() {
		defer close(wa.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			wa.pollSimulator()
			if i%8 == 0 {
				wa.ScanLogs()
				wa.scanStatuses(ctx)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

func (wa *Watcher) stop() {
	if wa.cancel != nil {
		wa.cancel()
		<-wa.done
		wa.cancel = nil
	}
}

// pollSimulator checks I1 and I3 and collects the SSO tokens the Engine issued (I7).
func (wa *Watcher) pollSimulator() {
	sim := wa.w.Sim
	for _, tok := range sim.IssuedTokens() {
		wa.AddSentinel(tok, "an SSO token the Engine issued")
	}
	st := sim.Dump()
	owners := map[string][]string{}
	disks := map[string]bool{}
	for _, vm := range st.VMs {
		if o := MarkerOwner(vm.Comment); o != "" {
			owners[o] = append(owners[o], vm.ID+" ("+vm.Name+")")
		}
		for _, d := range vm.Disks {
			disks[d.ID] = true
		}
	}
	for _, d := range st.FloatingDisks {
		disks[d.ID] = true
	}
	for owner, vms := range owners {
		if len(vms) > 1 {
			slices.Sort(vms)
			wa.Violate("I1|"+owner, I1, fmt.Sprintf("%d VMs carry the marker of %s", len(vms), owner), append([]string{"OVirtMachine " + owner}, vms...)...)
		}
	}
	wa.mu.Lock()
	var lost []string
	for d, vm := range wa.csi {
		if !disks[d] {
			lost = append(lost, d+"|"+vm)
		}
	}
	wa.mu.Unlock()
	for _, l := range lost {
		d, vm, _ := strings.Cut(l, "|")
		wa.Violate("I3|"+d, I3, fmt.Sprintf("out-of-band disk %s (attached to VM %s) no longer exists in oVirt", d, vm), "disk "+d, "VM "+vm)
		wa.ForgetCSIDisk(d)
	}
}

// ScanLogs reads what every manager and webhook process logged since the last scan and
// looks for the sentinels (I7).
func (wa *Watcher) ScanLogs() {
	sentinels := wa.sentinelList()
	for _, p := range wa.w.Processes() {
		if p == nil {
			continue
		}
		f, err := os.Open(p.LogPath)
		if err != nil {
			continue
		}
		wa.mu.Lock()
		off, tail := wa.logOffsets[p.LogPath], wa.logTail[p.LogPath]
		wa.mu.Unlock()
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			f.Close()
			continue
		}
		b, _ := io.ReadAll(f)
		f.Close()
		// Keep the end of the previous read, so that a sentinel split across two reads is found.
		text := tail + string(b)
		for s, what := range sentinels {
			if i := strings.Index(text, s); i >= 0 {
				wa.Violate("I7|log|"+p.LogPath+"|"+s, I7, fmt.Sprintf("%s appears in the log of %s: %q", what, p.Name, lineAround(text, i)), "process "+p.Name, "log "+p.LogPath)
			}
		}
		keep := 512
		if len(text) < keep {
			keep = len(text)
		}
		wa.mu.Lock()
		wa.logOffsets[p.LogPath] = off + int64(len(b))
		wa.logTail[p.LogPath] = text[len(text)-keep:]
		wa.mu.Unlock()
	}
}

// lineAround returns the log line around index i, with the sentinel left in (the log is the
// suite's own, in a temporary directory).
func lineAround(text string, i int) string {
	start := strings.LastIndexByte(text[:i], '\n') + 1
	end := strings.IndexByte(text[i:], '\n')
	if end < 0 {
		end = len(text)
	} else {
		end += i
	}
	line := text[start:end]
	if len(line) > 400 {
		line = line[:400] + "..."
	}
	return line
}

// scanStatuses looks for the sentinels in the status (conditions, failure messages) of every
// CAPOV object and Machine (I7).
func (wa *Watcher) scanStatuses(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	wa.mu.Lock()
	clients := append([]client.Client{wa.w.C}, wa.clients...)
	wa.mu.Unlock()
	for _, c := range clients {
		wa.scanStatusesOf(ctx, c)
	}
}

func (wa *Watcher) scanStatusesOf(ctx context.Context, c client.Client) {
	check := func(kind, name string, status any) {
		b, err := json.Marshal(status)
		if err != nil {
			return
		}
		wa.scanText("status|"+kind, fmt.Sprintf("the status of %s %s", kind, name), string(b), kind+" "+name)
	}
	oms := &infrav1.OVirtMachineList{}
	if err := c.List(ctx, oms); err == nil {
		for i := range oms.Items {
			om := &oms.Items[i]
			check("OVirtMachine", om.Namespace+"/"+om.Name, om.Status)
		}
	}
	ps := &infrav1.OVirtProviderList{}
	if err := c.List(ctx, ps); err == nil {
		for i := range ps.Items {
			check("OVirtProvider", ps.Items[i].Name, ps.Items[i].Status)
		}
	}
	ocs := &infrav1.OVirtClusterList{}
	if err := c.List(ctx, ocs); err == nil {
		for i := range ocs.Items {
			check("OVirtCluster", ocs.Items[i].Namespace+"/"+ocs.Items[i].Name, ocs.Items[i].Status)
		}
	}
	ms := &clusterv1.MachineList{}
	if err := c.List(ctx, ms); err == nil {
		for i := range ms.Items {
			check("Machine", ms.Items[i].Namespace+"/"+ms.Items[i].Name, ms.Items[i].Status)
		}
	}
}

func (wa *Watcher) scanText(keyPrefix, where, text string, objects ...string) {
	for s, what := range wa.sentinelList() {
		if i := strings.Index(text, s); i >= 0 {
			lo, hi := max(0, i-120), min(len(text), i+len(s)+120)
			wa.Violate("I7|"+keyPrefix+"|"+s, I7, fmt.Sprintf("%s appears in %s: %q", what, where, text[lo:hi]), objects...)
		}
	}
}

// ScanEventsAndMetrics looks for the sentinels in every event of the management cluster and
// in the manager's and webhook's /metrics (I7).
func (wa *Watcher) ScanEventsAndMetrics(ctx context.Context) {
	wa.mu.Lock()
	clients := append([]client.Client{wa.w.C}, wa.clients...)
	wa.mu.Unlock()
	for _, c := range clients {
		wa.scanEvents(ctx, c)
	}
	if m, err := wa.w.ManagerMetrics(ctx); err == nil {
		wa.scanText("metrics|manager", "the manager's /metrics", m, "process manager")
	}
	if m, err := wa.w.WebhookMetrics(ctx); err == nil {
		wa.scanText("metrics|webhook", "the webhook's /metrics", m, "process webhook")
	}
}

func (wa *Watcher) scanEvents(ctx context.Context, c client.Client) {
	evs := &eventsv1.EventList{}
	if err := c.List(ctx, evs); err == nil {
		for _, e := range evs.Items {
			wa.scanText("event", "event "+e.Namespace+"/"+e.Name+" ("+e.Reason+")", e.Reason+" "+e.Note+" "+e.Action,
				e.Regarding.Kind+" "+e.Regarding.Namespace+"/"+e.Regarding.Name)
		}
	}
	cevs := &corev1.EventList{}
	if err := c.List(ctx, cevs); err == nil {
		for _, e := range cevs.Items {
			wa.scanText("event", "event "+e.Namespace+"/"+e.Name+" ("+e.Reason+")", e.Reason+" "+e.Message,
				e.InvolvedObject.Kind+" "+e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name)
		}
	}
}

// PathRates counts the oVirt API calls ("METHOD /path") of the request log between from and
// to in windows of d and returns each path's highest count.
func PathRates(log []ovirtsim.RequestRecord, from, to time.Time, d time.Duration) map[string]int {
	buckets := map[string]map[int64]int{}
	for _, r := range log {
		if r.Start.Before(from) || r.Start.After(to) {
			continue
		}
		k := r.Method + " " + r.Path
		if buckets[k] == nil {
			buckets[k] = map[int64]int{}
		}
		buckets[k][int64(r.Start.Sub(from)/d)]++
	}
	out := map[string]int{}
	for k, b := range buckets {
		for _, n := range b {
			out[k] = max(out[k], n)
		}
	}
	return out
}

// CheckRates compares the call rates between from and to with the baseline's ceilings (I6).
func (wa *Watcher) CheckRates(from, to time.Time) {
	cfg := wa.w.Cfg
	rates := PathRates(wa.w.Sim.RequestLog(), from, to, cfg.RateWindow)
	for k, n := range rates {
		ceiling := int(cfg.RateFactor*float64(wa.w.Baseline.PathRate[k])) + cfg.RateFloor
		if n > ceiling {
			wa.Violate("I6|"+k, I6, fmt.Sprintf("%s was called %d times in %s; the ceiling is %d (%.0f x the fault-free %d + %d)",
				k, n, cfg.RateWindow, ceiling, cfg.RateFactor, wa.w.Baseline.PathRate[k], cfg.RateFloor), "oVirt "+k)
		}
	}
}

// CheckFootprint waits (up to d) for the manager's goroutines and open file descriptors and
// the simulator's in-flight calls to return to the baseline (I8).
func (wa *Watcher) CheckFootprint(ctx context.Context, d time.Duration) {
	b := wa.w.Baseline
	maxG := b.Goroutines + max(60, b.Goroutines/2)
	maxFD := b.FDs + max(20, b.FDs/4)
	var g, fds, inflight int
	err := poll(ctx, d, 500*time.Millisecond, func() (bool, error) {
		inflight = wa.w.Sim.Counters().InFlight
		m, err := wa.w.ManagerMetrics(ctx)
		if err != nil {
			return false, err
		}
		v, _ := MetricValue(m, "go_goroutines")
		g = int(v)
		if fds, err = OpenFDs(wa.w.Stack.Manager.PID()); err != nil {
			return false, err
		}
		return g <= maxG && fds <= maxFD && inflight == 0, nil
	})
	if err != nil {
		wa.Violate("I8", I8, fmt.Sprintf("after %s: manager goroutines %d (baseline %d, limit %d), open fds %d (baseline %d, limit %d), simulator in-flight calls %d (limit 0): %v",
			d, g, b.Goroutines, maxG, fds, b.FDs, maxFD, inflight, err), "process "+wa.w.Stack.Manager.Name)
	}
}
