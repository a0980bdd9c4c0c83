package ovirtsim

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Builder configures and starts a Simulator. Call WithSeed first if you use
// it: it replaces everything configured before.
type Builder struct {
	seed      *Seed
	listen    string
	certHosts []string
}

// NewBuilder returns a builder with no inventory, user "admin@internal",
// password "secret", a 1h token TTL, zero timings, no latency, no faults and
// random seed 1, listening on 127.0.0.1 on a free port.
func NewBuilder() *Builder {
	return &Builder{seed: withDefaults(&Seed{}), listen: "127.0.0.1:0"}
}

func withDefaults(s *Seed) *Seed {
	if s.Username == "" {
		s.Username = "admin@internal"
	}
	if s.Password == "" {
		s.Password = "secret"
	}
	if s.TokenTTL == 0 {
		s.TokenTTL = Duration(time.Hour)
	}
	if s.RandomSeed == 0 {
		s.RandomSeed = 1
	}
	if s.MaxVMNameLength == 0 {
		s.MaxVMNameLength = defaultMaxVMNameLength
	}
	if s.Version == "" {
		s.Version = defaultVersion
	}
	return s
}

// WithSeed replaces the whole configuration with a copy of s; empty
// credentials, TTL and random seed take the defaults.
func (b *Builder) WithSeed(s *Seed) *Builder {
	if s != nil {
		b.seed = withDefaults(s.clone())
	}
	return b
}

// WithCluster adds a cluster (without Hosts it gets three default hosts).
func (b *Builder) WithCluster(c Cluster) *Builder {
	b.seed.Clusters = append(b.seed.Clusters, cloneCluster(c))
	return b
}

// WithStorageDomain adds a storage domain.
func (b *Builder) WithStorageDomain(sd StorageDomain) *Builder {
	b.seed.StorageDomains = append(b.seed.StorageDomains, sd)
	return b
}

// WithTemplate adds a template (its cluster and storage domains must be added too, in any order).
func (b *Builder) WithTemplate(t Template) *Builder {
	t.Disks = cloneTemplateDisks(t.Disks)
	b.seed.Templates = append(b.seed.Templates, t)
	return b
}

// WithVnicProfile adds a vNIC profile (and its network, if new).
func (b *Builder) WithVnicProfile(p VnicProfile) *Builder {
	b.seed.VnicProfiles = append(b.seed.VnicProfiles, p)
	return b
}

// WithCredentials sets the SSO user name and password.
func (b *Builder) WithCredentials(username, password string) *Builder {
	b.seed.Username, b.seed.Password = username, password
	return b
}

// WithUser adds an Engine account with its permissions (permissions.go).
func (b *Builder) WithUser(u User) *Builder {
	u.Grants = append([]Grant(nil), u.Grants...)
	b.seed.Users = append(b.seed.Users, u)
	return b
}

// WithTokenTTL sets how long SSO tokens stay valid (negative: forever).
func (b *Builder) WithTokenTTL(d time.Duration) *Builder {
	b.seed.TokenTTL = Duration(d)
	return b
}

// WithTimings sets the durations of the engine's asynchronous work.
func (b *Builder) WithTimings(t Timings) *Builder {
	b.seed.Timings = t
	return b
}

// WithLatency adds a latency rule; may be called repeatedly (first match wins).
func (b *Builder) WithLatency(l LatencyRule) *Builder {
	b.seed.Latency = append(b.seed.Latency, l)
	return b
}

// WithFault adds a fault rule; may be called repeatedly (tried in order).
func (b *Builder) WithFault(f FaultRule) *Builder {
	b.seed.Faults = append(b.seed.Faults, f)
	return b
}

// WithRandomSeed sets the seed of ids, MACs, fault decisions and latencies (0 means 1).
func (b *Builder) WithRandomSeed(n int64) *Builder {
	b.seed.RandomSeed = n
	return b
}

// WithoutGuestAgent makes every VM run without a guest agent: nothing is
// reported, and starting VMs stay powering_up for Timings.NoAgentPoweringUp.
func (b *Builder) WithoutGuestAgent() *Builder {
	b.seed.NoGuestAgent = true
	return b
}

// WithGuestInterfaces sets the interfaces guest agents report besides lo
// and one ethN per NIC (default: DefaultGuestInterfaces()).
func (b *Builder) WithGuestInterfaces(g GuestInterfaces) *Builder {
	g.Extra = cloneGuestInterfaces(g.Extra)
	b.seed.GuestInterfaces = &g
	return b
}

// WithIgnoreFollow makes the simulator ignore follow= (entities carry only links).
func (b *Builder) WithIgnoreFollow() *Builder {
	b.seed.IgnoreFollow = true
	return b
}

// WithMaxVMNameLength sets the longest VM name the engine accepts (its
// MaxVmNameLength; 0 means the default 64).
func (b *Builder) WithMaxVMNameLength(n int) *Builder {
	b.seed.MaxVMNameLength = n
	return b
}

// WithVersion sets the engine version ("4.4", "4.5.5", ...): GET /api reports
// it, and it decides version-dependent limits such as the vCPU maximum.
func (b *Builder) WithVersion(v string) *Builder {
	b.seed.Version = v
	return b
}

// WithListenAddress sets the TCP listen address (default "127.0.0.1:0").
func (b *Builder) WithListenAddress(addr string) *Builder {
	b.listen = addr
	return b
}

// WithCertHosts adds host names or IPs to the server certificate, for
// clients that reach the simulator under another name (e.g. from a kind
// cluster). 127.0.0.1, ::1, localhost and the listen host are always included.
func (b *Builder) WithCertHosts(hosts ...string) *Builder {
	b.certHosts = append(b.certHosts, hosts...)
	return b
}

// Simulator is a running oVirt Engine REST API simulator. All methods are
// safe for concurrent use.
type Simulator struct {
	built *Seed // validated configuration, what Reset returns to

	srv      *http.Server
	addr     string
	url      string
	caPEM    []byte
	certPEM  []byte // the server certificate
	done     chan struct{}
	stopOnce sync.Once
	routes   []route

	mu           sync.RWMutex // guards inv, timings, guestAgent, guestIfaces, ignoreFollow
	inv          *inventory
	timings      Timings
	guestAgent   bool
	guestIfaces  GuestInterfaces // normalised
	ignoreFollow bool
	renders      atomic.Uint64 // numbers requests, for the order of reported devices

	authMu   sync.RWMutex // guards the fields below
	username string
	password string
	ttl      time.Duration
	tokens   map[string]token    // by access token
	users    map[string]*simUser // accounts besides the administrator, by user name

	rules ruleSet
	stats stats
	bufs  sync.Pool // *xmlBuf
}

// Build validates the configuration, generates a CA and a server
// certificate, and starts serving HTTPS.
func (b *Builder) Build() (*Simulator, error) {
	cfg := withDefaults(b.seed.clone())
	tm, err := normaliseTimings(cfg.Timings)
	if err != nil {
		return nil, err
	}
	cfg.Timings = tm
	if cfg.Latency, err = validateLatency(cfg.Latency); err != nil {
		return nil, err
	}
	if cfg.Faults, err = validateFaults(cfg.Faults); err != nil {
		return nil, err
	}
	if cfg.MaxVMNameLength < 0 {
		return nil, invalidf("negative max_vm_name_length %d", cfg.MaxVMNameLength)
	}
	if _, err := parseVersion(cfg.Version); err != nil {
		return nil, err
	}
	gi, err := normaliseGuestInterfaces(cfg.GuestInterfaces)
	if err != nil {
		return nil, err
	}
	inv, err := newInventory(cfg, time.Now())
	if err != nil {
		return nil, fmt.Errorf("building inventory: %w", err)
	}
	host, _, err := net.SplitHostPort(b.listen)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", b.listen, err)
	}
	caPEM, cert, err := newTLS(append([]string{host}, b.certHosts...))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", b.listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", b.listen, err)
	}
	s := &Simulator{built: cfg, caPEM: caPEM, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), done: make(chan struct{}), inv: inv,
		timings: cfg.Timings, guestAgent: !cfg.NoGuestAgent, guestIfaces: gi, ignoreFollow: cfg.IgnoreFollow,
		username: cfg.Username, password: cfg.Password, ttl: ttlOf(cfg.TokenTTL),
		tokens: map[string]token{}}
	if s.users, err = inv.resolveUsers(cfg.Users, cfg.Username); err != nil {
		return nil, err
	}
	s.rules.seed = uint64(cfg.RandomSeed)
	s.rules.setLatency(cfg.Latency)
	s.rules.setFaults(cfg.Faults)
	s.routes = apiRoutes()
	s.bufs.New = newXMLBuf

	port := ln.Addr().(*net.TCPAddr).Port
	urlHost := host
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		urlHost = "127.0.0.1"
	}
	s.addr = net.JoinHostPort(urlHost, strconv.Itoa(port))
	s.url = "https://" + s.addr + "/ovirt-engine/api"
	s.srv = &http.Server{
		Handler:           s,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // TLS handshake failures are expected in TLS tests
	}
	go func() { _ = s.srv.Serve(expectListener{tls.NewListener(ln, s.srv.TLSConfig)}) }() // returns ErrServerClosed on Close
	return s, nil
}

// defaultNoAgentPoweringUp is how long VDSM keeps a VM without a guest
// agent powering_up (its guest agent timeout) before it reports Up.
const defaultNoAgentPoweringUp = 60 * time.Second

func ttlOf(d Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d.Std()
}

func normaliseTimings(t Timings) (Timings, error) {
	for _, d := range []time.Duration{t.ImageLock, t.DiskLock, t.WaitForLaunch, t.PoweringUp, t.PoweringDown, t.GuestAgentDelay, t.NoAgentPoweringUp} {
		if d < 0 {
			return t, invalidf("negative timing %v", d)
		}
	}
	if t.NoAgentPoweringUp == 0 {
		t.NoAgentPoweringUp = defaultNoAgentPoweringUp
	}
	if t.CloneFactor < 0 {
		return t, invalidf("negative clone factor %v", t.CloneFactor)
	}
	if t.CloneFactor == 0 {
		t.CloneFactor = 1
	}
	return t, nil
}

// URL returns the API URL, e.g. "https://127.0.0.1:40123/ovirt-engine/api" (no trailing slash).
func (s *Simulator) URL() string { return s.url }

// Addr returns host:port of the listener.
func (s *Simulator) Addr() string { return s.addr }

// Username returns the SSO user name.
func (s *Simulator) Username() string {
	s.authMu.RLock()
	defer s.authMu.RUnlock()
	return s.username
}

// Password returns the SSO password.
func (s *Simulator) Password() string {
	s.authMu.RLock()
	defer s.authMu.RUnlock()
	return s.password
}

// CAPEM returns the PEM of the CA that signed the server certificate.
func (s *Simulator) CAPEM() []byte { return append([]byte(nil), s.caPEM...) }

// Handler returns the simulator's HTTP handler, for in-process use (e.g.
// with httptest) without TLS or the network.
func (s *Simulator) Handler() http.Handler { return s }

// Close stops the server immediately, ending hanging requests.
func (s *Simulator) Close() {
	s.stopOnce.Do(func() { close(s.done); s.inv.guests.close() })
	_ = s.srv.Close() // only reports listener close errors, nothing to act on
}

// Shutdown stops accepting requests and waits for in-flight ones (hangs and
// latencies are cut short) until ctx ends.
func (s *Simulator) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.done); s.inv.guests.close() })
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}

// SetLatency replaces the latency rules. Invalid rules (negative or
// inverted ranges) are ignored; PUT /sim/latency reports them instead.
func (s *Simulator) SetLatency(rules ...LatencyRule) {
	var ok []LatencyRule
	for _, r := range rules {
		if v, err := validateLatency([]LatencyRule{r}); err == nil {
			ok = append(ok, v...)
		}
	}
	s.rules.setLatency(ok)
}

func (s *Simulator) setLatency(rules []LatencyRule) error {
	v, err := validateLatency(rules)
	if err != nil {
		return err
	}
	s.rules.setLatency(v)
	return nil
}

// SetFaults replaces the fault rules; their counters restart. Invalid rules
// (bad status or rate, neither status nor hang) are ignored; PUT /sim/faults
// reports them instead.
func (s *Simulator) SetFaults(rules ...FaultRule) {
	var ok []FaultRule
	for _, r := range rules {
		if v, err := validateFaults([]FaultRule{r}); err == nil {
			ok = append(ok, v...)
		}
	}
	s.rules.setFaults(ok)
}

func (s *Simulator) setFaults(rules []FaultRule) error {
	v, err := validateFaults(rules)
	if err != nil {
		return err
	}
	s.rules.setFaults(v)
	return nil
}

// SetTimings replaces the timings; operations already in progress keep
// theirs. Negative durations count as zero.
func (s *Simulator) SetTimings(t Timings) {
	for _, d := range []*time.Duration{&t.ImageLock, &t.DiskLock, &t.WaitForLaunch, &t.PoweringUp, &t.PoweringDown, &t.GuestAgentDelay, &t.NoAgentPoweringUp} {
		*d = max(*d, 0)
	}
	t.CloneFactor = max(t.CloneFactor, 0)
	t, _ = normaliseTimings(t) // cannot fail after clamping
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timings = t
}

// SetGuestAgent turns the guest agent of every VM on or off (a VM switched
// off by its template or SetVMGuestAgent stays off).
func (s *Simulator) SetGuestAgent(enabled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.guestAgent = enabled
}

// SetVMGuestAgent installs (on) or removes the guest agent of one VM. It
// applies to reporting at once and to the powering_up time of the next start.
func (s *Simulator) SetVMGuestAgent(vmID string, on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.lookupVM(vmID)
	if err != nil {
		return err
	}
	v.noAgent = !on
	return nil
}

// SetGuestInterfaces replaces the interfaces guest agents report besides lo
// and ethN; it fails (ErrInvalid) on an extra interface without a name or
// with a bad MAC or IP.
func (s *Simulator) SetGuestInterfaces(g GuestInterfaces) error {
	gi, err := normaliseGuestInterfaces(&g)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.guestIfaces = gi
	return nil
}

// SetIgnoreFollow makes the simulator ignore (true) or honour follow=.
func (s *Simulator) SetIgnoreFollow(ignore bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ignoreFollow = ignore
}

// SetCredentials changes the SSO credentials; issued tokens stay valid.
func (s *Simulator) SetCredentials(username, password string) {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	s.username, s.password = username, password
}

// SetTokenTTL changes the token lifetime, for issued tokens too (d <= 0: forever).
func (s *Simulator) SetTokenTTL(d time.Duration) {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	s.ttl = max(d, 0)
}

// RestartEngine invalidates every issued token, as an engine restart does:
// the next API call with an old token gets 401.
func (s *Simulator) RestartEngine() {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	s.tokens = map[string]token{}
}

func (s *Simulator) lookupVM(id string) (*vm, error) {
	v := s.inv.vms[id]
	if v == nil {
		return nil, fmt.Errorf("VM %s: %w", id, ErrNotFound)
	}
	return v, nil
}

// AttachCSIDisk creates a disk like the oVirt CSI driver does (alias
// "pvc-<uuid>", virtio_scsi, not bootable, active, thin) on the storage
// domain of the VM's first disk (or the first active data domain of its data
// center) and attaches it to the VM. It bypasses the engine's lock checks.
func (s *Simulator) AttachCSIDisk(vmID string, sizeGB int64) (string, error) {
	if sizeGB <= 0 {
		return "", invalidf("CSI disk size %d GiB", sizeGB)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.lookupVM(vmID)
	if err != nil {
		return "", err
	}
	var sd *storageDomain
	if len(v.disks) > 0 {
		sd = v.disks[0].sd
	} else {
		for _, c := range s.inv.sds {
			if c.dc == v.cluster.dc && c.typ == "data" && c.status == "active" {
				sd = c
				break
			}
		}
	}
	if sd == nil {
		return "", fmt.Errorf("no storage domain for a CSI disk of VM %s: %w", v.name, ErrConflict)
	}
	now := time.Now()
	sparse := true
	d, aerr := s.inv.createDisk(&diskSpec{sizeBytes: sizeGB * gib, sdID: sd.id, format: "cow", sparse: &sparse}, now, Timings{})
	if aerr != nil {
		return "", fmt.Errorf("creating CSI disk: %w", aerr)
	}
	d.alias = "pvc-" + s.inv.newID()
	d.vm, d.iface, d.active, d.bootable = v, "virtio_scsi", true, false
	v.disks = append(v.disks, d)
	return d.id, nil
}

// DetachDisk detaches a disk from a VM out of band (like an administrator
// in the oVirt UI); the disk survives as a floating disk.
func (s *Simulator) DetachDisk(vmID, diskID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.lookupVM(vmID)
	if err != nil {
		return err
	}
	d := v.attachment(diskID)
	if d == nil {
		return fmt.Errorf("disk %s of VM %s: %w", diskID, vmID, ErrNotFound)
	}
	if aerr := s.inv.detachDisk(v, d, true, time.Now()); aerr != nil {
		return aerr
	}
	return nil
}

// DeleteVM removes a VM out of band, whatever its state, with its attached
// disks (like the engine does).
func (s *Simulator) DeleteVM(vmID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.lookupVM(vmID)
	if err != nil {
		return err
	}
	if aerr := s.inv.removeVM(v, false, false, true, time.Now()); aerr != nil {
		return aerr
	}
	return nil
}

// SetVMIgnoresACPI makes the guest of a VM ignore (on) or honour (off) ACPI
// shutdown requests: a graceful shutdown then goes powering_down and back to up.
func (s *Simulator) SetVMIgnoresACPI(vmID string, on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.lookupVM(vmID)
	if err != nil {
		return err
	}
	v.ignoresACPI = on
	return nil
}

// AddTemplate adds a template at run time (Reset removes it again).
func (s *Simulator) AddTemplate(t Template) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inv.addTemplate(t, time.Now(), true)
}

// RemoveTemplate removes every version of the named template; it fails
// like the engine when thin (clone=false) VMs still use it.
func (s *Simulator) RemoveTemplate(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inv.removeTemplates(name)
}

// AddVnicProfile adds a vNIC profile at run time.
func (s *Simulator) AddVnicProfile(p VnicProfile) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inv.addVnicProfile(p)
}

// AddStorageDomain adds a storage domain at run time.
func (s *Simulator) AddStorageDomain(sd StorageDomain) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inv.addStorageDomain(sd)
}

// SetStorageDomainStatus changes a storage domain's status ("active",
// "maintenance", ...); a domain that is not active cannot take new disks.
func (s *Simulator) SetStorageDomainStatus(name, status string) error {
	if status == "" {
		return invalidf("empty storage domain status")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sd := s.inv.sdByName[name]
	if sd == nil {
		return fmt.Errorf("storage domain %q: %w", name, ErrNotFound)
	}
	sd.status = status
	return nil
}

// Reset returns the simulator to the state right after Build: the built
// inventory (run-time additions are dropped, ids are the same), no VMs,
// no jobs, the built timings, credentials, latency and fault rules, zero
// counters and no valid tokens.
func (s *Simulator) Reset() {
	inv, err := newInventory(s.built, time.Now())
	if err != nil {
		return // cannot happen: the same seed built fine in Build
	}
	s.mu.Lock()
	// Real guests (guests.go) outlive a reset's inventory: the old VMs' guests are removed.
	inv.guests, inv.guestRuntime = s.inv.guests, s.inv.guestRuntime
	for _, v := range s.inv.vms {
		s.inv.guestOp(v, guestRemove)
	}
	s.inv, s.timings, s.guestAgent = inv, s.built.Timings, !s.built.NoGuestAgent
	s.guestIfaces, _ = normaliseGuestInterfaces(s.built.GuestInterfaces) // validated in Build
	s.ignoreFollow = s.built.IgnoreFollow
	s.renders.Store(0)
	s.mu.Unlock()
	s.authMu.Lock()
	s.tokens = map[string]token{}
	s.username, s.password, s.ttl = s.built.Username, s.built.Password, ttlOf(s.built.TokenTTL)
	s.users, _ = inv.resolveUsers(s.built.Users, s.built.Username) // resolved fine in Build
	s.authMu.Unlock()
	s.rules.setLatency(s.built.Latency)
	s.rules.setFaults(s.built.Faults)
	s.stats.reset()
}
