package sdk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// sdkFault builds the error the SDK returns for a <fault> answer.
func sdkFault(status int, detail string) error {
	fault, err := ovirtsdk.NewFaultBuilder().Reason("Operation Failed").Detail(detail).Build()
	if err != nil {
		panic(err)
	}
	return ovirtsdk.BuildError(&http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status))}, fault)
}

// ssoError builds the error the SDK returns for an SSO error answer: an
// *AuthError without status, with the SDK's message format.
func ssoError(code, msg string) error {
	e := &ovirtsdk.AuthError{}
	e.Msg = msg
	if code != "" {
		e.Msg = fmt.Sprintf("Error during SSO authentication %s : %s", code, msg)
	}
	return e
}

// sdkNonXML builds the error the SDK returns for a non-XML answer.
func sdkNonXML(status int, body string) error {
	return ovirtsdk.CheckFault([]byte(body), &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status))})
}

func TestMapError(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://engine/ovirt-engine/api", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	unknownCA := &url.Error{Op: "Get", URL: "https://engine/ovirt-engine/api",
		Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}
	tests := []struct {
		name      string
		err       error
		status    int
		kinds     []error
		notKinds  []error
		inMessage string
	}{
		{"a 404 fault is ErrNotFound", sdkFault(404, "Entity not found"), 404,
			[]error{ovirt.ErrNotFound}, []error{ovirt.ErrInvalid}, "Entity not found"},
		{"a 409 fault naming a lock is ErrConflict and ErrLocked", sdkFault(409, "[Cannot stop VM. VM is locked. Please try again in a few minutes.]"), 409,
			[]error{ovirt.ErrConflict, ovirt.ErrLocked}, nil, "VM is locked"},
		{"a 409 fault without a lock is only ErrConflict", sdkFault(409, "[Cannot add VM. Duplicate.]"), 409,
			[]error{ovirt.ErrConflict}, []error{ovirt.ErrLocked}, "Duplicate"},
		{"a 400 fault naming a lock is ErrLocked", sdkFault(400, "[Cannot edit VM. Related operation is currently in progress. Please try again later.]"), 400,
			[]error{ovirt.ErrLocked}, []error{ovirt.ErrInvalid}, "currently in progress"},
		{"a 400 fault about locked disks is ErrLocked", sdkFault(400, "[Cannot remove VM. The following disks are locked: d1. Please try again in a few minutes.]"), 400,
			[]error{ovirt.ErrLocked}, []error{ovirt.ErrInvalid}, "disks are locked"},
		{"a 409 about an image-locked VM is ErrLocked", sdkFault(409, "[Cannot edit Virtual Disk because the VM is in Image Locked status.]"), 409,
			[]error{ovirt.ErrConflict, ovirt.ErrLocked}, nil, "Image Locked status"},
		{"a 409 about a locked disk is ErrLocked", sdkFault(409, "[Cannot edit Virtual Disk. Disk is locked. Please try again later.]"), 409,
			[]error{ovirt.ErrConflict, ovirt.ErrLocked}, nil, "Disk is locked"},
		{"a 409 about an operation in progress is ErrLocked", sdkFault(409, "[Cannot stop VM. Related operation is currently in progress. Please try again later.]"), 409,
			[]error{ovirt.ErrConflict, ovirt.ErrLocked}, nil, "currently in progress"},
		{"a 409 about locked disks on start is ErrLocked", sdkFault(409, "[Cannot run VM. The following disks are locked: w1_Disk1. Please try again in a few minutes.]"), 409,
			[]error{ovirt.ErrConflict, ovirt.ErrLocked}, nil, "disks are locked"},
		{"a 409 about low disk space is not a lock", sdkFault(409, "[Cannot add VM. Low disk space on Storage Domain data.]"), 409,
			[]error{ovirt.ErrConflict}, []error{ovirt.ErrLocked}, "Low disk space"},
		{"a 409 about an illegal storage-domain status is not a lock", sdkFault(409, "[Cannot add VM. The relevant Storage Domain's status is Maintenance.]"), 409,
			[]error{ovirt.ErrConflict}, []error{ovirt.ErrLocked}, "status is Maintenance"},
		{"a 409 about a NIC name in use is not a lock", sdkFault(409, "[Cannot add Interface. The VM already has an interface with the same name.]"), 409,
			[]error{ovirt.ErrConflict}, []error{ovirt.ErrLocked}, "same name"},
		{"a 409 about a network not in the cluster is not a lock", sdkFault(409, "[Cannot add Interface. The Network is not attached to the VM's Cluster.]"), 409,
			[]error{ovirt.ErrConflict}, []error{ovirt.ErrLocked}, "not attached"},
		{"a 409 about a running VM is not a lock", sdkFault(409, "[Cannot remove VM. VM is running.]"), 409,
			[]error{ovirt.ErrConflict}, []error{ovirt.ErrLocked}, "VM is running"},
		{"another 400 fault is ErrInvalid with the engine's detail", sdkFault(400, "[Cannot add VM. The requested name is already in use.]"), 400,
			[]error{ovirt.ErrInvalid}, []error{ovirt.ErrLocked}, "Operation Failed: [Cannot add VM. The requested name is already in use.]"},
		{"a scheduling refusal is ErrConflict and ErrNoHost", sdkFault(409, "[Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:, "+
			"The host h1 did not satisfy internal filter VmAffinityGroups because it matched negative affinity rules ., "+
			"The host h1 did not satisfy internal filter VmAffinityGroups because it matched negative affinity rules .]"), 409,
			[]error{ovirt.ErrConflict, ovirt.ErrNoHost}, []error{ovirt.ErrLocked, ovirt.ErrInvalid}, "matched negative affinity rules ."},
		{"a scheduling refusal is no lock, whatever a host's explanation says", sdkFault(409, "[Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:, "+
			"The host locked-1 did not satisfy internal filter X because the host is locked. Please try again in a few minutes.]"), 409,
			[]error{ovirt.ErrConflict, ovirt.ErrNoHost}, []error{ovirt.ErrLocked}, "no host that satisfies"},
		{"no host up (400 on a real Engine) is ErrConflict and ErrNoHost", sdkFault(400, "[There are no hosts to use. Check that the cluster contains at least one host in Up state.]"), 400,
			[]error{ovirt.ErrConflict, ovirt.ErrNoHost}, []error{ovirt.ErrInvalid, ovirt.ErrLocked}, "at least one host in Up state"},
		{"an older Engine's refusal for want of a running host is ErrNoHost", sdkFault(409, "[Cannot run VM. There are no available running Hosts in the Host Cluster.]"), 409,
			[]error{ovirt.ErrConflict, ovirt.ErrNoHost}, []error{ovirt.ErrLocked}, "no available running Hosts"},
		{"a locked VM on start is no ErrNoHost", sdkFault(409, "[Cannot run VM: VM is locked. Please try again in a few minutes.]"), 409,
			[]error{ovirt.ErrConflict, ovirt.ErrLocked}, []error{ovirt.ErrNoHost}, "VM is locked"},
		{"a 401 fault is ErrAuth", sdkFault(401, "Unauthorized"), 401, []error{ovirt.ErrAuth}, nil, "Unauthorized"},
		{"a 403 fault is ErrAuth", sdkFault(403, "Forbidden"), 403, []error{ovirt.ErrAuth}, nil, "Forbidden"},
		{"an HTML 401 (expired token) is ErrAuth", sdkNonXML(401, "<html><body>invalid_grant: expired</body></html>"), 401, []error{ovirt.ErrAuth}, nil, "invalid_grant"},
		{"an HTML 404 from a proxy is not ErrNotFound", sdkNonXML(404, "<html>no such page</html>"), 404, nil, []error{ovirt.ErrNotFound}, "no such page"},
		{"an HTML 503 from a proxy is ErrUnreachable", sdkNonXML(503, "<html>down</html>"), 503, []error{ovirt.ErrUnreachable}, nil, "down"},
		{"a 500 fault matches no sentinel", sdkFault(500, "boom"), 500, nil,
			[]error{ovirt.ErrInvalid, ovirt.ErrUnreachable, ovirt.ErrNotFound, ovirt.ErrAuth, ovirt.ErrLocked, ovirt.ErrConflict}, "boom"},
		{"an SSO refusal is ErrAuth", ssoError("access_denied", "Cannot authenticate user 'admin@internal'"), 0, []error{ovirt.ErrAuth}, nil, "Cannot authenticate"},
		{"an SSO 401 is ErrAuth", ssoError("", "authentication failed (response was: nope)"), 0, []error{ovirt.ErrAuth}, nil, "nope"},
		{"an SSO server error is ErrUnreachable", ssoError("server_error", "database down"), 0, []error{ovirt.ErrUnreachable}, []error{ovirt.ErrAuth}, "database down"},
		{"a refused connection is ErrUnreachable", refused, 0, []error{ovirt.ErrUnreachable}, []error{ovirt.ErrTLS}, "connection refused"},
		{"an unknown CA is ErrTLS and ErrUnreachable", unknownCA, 0, []error{ovirt.ErrTLS, ovirt.ErrUnreachable}, nil, "unknown authority"},
		{"a deadline is ErrUnreachable and DeadlineExceeded", context.DeadlineExceeded, 0,
			[]error{ovirt.ErrUnreachable, context.DeadlineExceeded}, nil, "timed out"},
		{"a cancellation is only context.Canceled", context.Canceled, 0, []error{context.Canceled}, []error{ovirt.ErrUnreachable}, "canceled"},
		{"a non-JSON SSO answer is ErrUnreachable", fmt.Errorf("failed to parse non-array sso with response <html> (%w)", errors.New("invalid character")), 0,
			[]error{ovirt.ErrUnreachable}, nil, "sso"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := mapError("Op", tt.err)
			var e *ovirt.Error
			g.Expect(errors.As(err, &e)).To(BeTrue())
			g.Expect(e.Status).To(Equal(tt.status))
			for _, k := range tt.kinds {
				g.Expect(errors.Is(err, k)).To(BeTrue(), "should match %v: %v", k, err)
			}
			for _, k := range tt.notKinds {
				g.Expect(errors.Is(err, k)).To(BeFalse(), "should not match %v: %v", k, err)
			}
			g.Expect(err.Error()).To(ContainSubstring(tt.inMessage))
			// Mapping is idempotent.
			g.Expect(mapError("Other", err)).To(BeIdenticalTo(err))
		})
	}
}

func TestResultCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code string
	}{
		{"success is 2xx", nil, "2xx"},
		{"a typed fault keeps its status", sdkFault(404, "x"), "404"},
		{"an untyped fault keeps its status", sdkFault(400, "x"), "400"},
		{"a non-XML answer keeps its status", sdkNonXML(401, "<html/>"), "401"},
		{"an SSO refusal has no status", ssoError("access_denied", "x"), "error"},
		{"a deadline is a timeout", fmt.Errorf("x: %w", context.DeadlineExceeded), "timeout"},
		{"a cancellation is canceled", context.Canceled, "canceled"},
		{"a network error is error", &url.Error{Op: "Get", URL: "u", Err: errors.New("refused")}, "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(resultCode(tt.err)).To(Equal(tt.code))
		})
	}
}

func TestTokenRejectionIsToldApartFromBadCredentials(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		rejected bool
		refused  bool
	}{
		{"an HTML 401 invalid_grant page means the token expired", sdkNonXML(401, "<html>invalid_grant</html>"), true, false},
		{"a 401 fault means the token expired", sdkFault(401, "x"), true, false},
		{"an SSO refusal means bad credentials", ssoError("access_denied", "x"), false, true},
		{"an SSO server error is not about the credentials", ssoError("server_error", "x"), false, false},
		{"a 403 is neither", sdkFault(403, "x"), false, false},
		{"a 404 is neither", sdkFault(404, "x"), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tokenRejected(tt.err)).To(Equal(tt.rejected))
			g.Expect(loginRefused(tt.err)).To(Equal(tt.refused))
		})
	}
	g := NewWithT(t)
	g.Expect(ambiguousAction(ovirtsdk.XMLTagNotMatchError{ActualTag: "html", ExpectedTag: "action"})).To(BeTrue())
	g.Expect(ambiguousAction(sdkNonXML(401, "<html/>"))).To(BeFalse())
}

func TestBreaker(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	b := breaker{threshold: 3, backoff: time.Minute}

	g.Expect(b.failed(now)).To(BeFalse())
	g.Expect(b.failed(now)).To(BeFalse())
	g.Expect(b.remaining(now)).To(BeZero(), "closed below the threshold")
	g.Expect(b.failed(now)).To(BeTrue(), "opens at the threshold")
	g.Expect(b.remaining(now.Add(10 * time.Second))).To(Equal(50 * time.Second))

	later := now.Add(time.Minute)
	g.Expect(b.remaining(later)).To(BeZero(), "half-open after the back-off: one login may try")
	g.Expect(b.failed(later)).To(BeTrue(), "one more refusal re-opens at once")
	g.Expect(b.remaining(later)).To(Equal(time.Minute))

	g.Expect(b.succeeded()).To(BeTrue())
	g.Expect(b.remaining(later)).To(BeZero())
	g.Expect(b.failures).To(BeZero())
	g.Expect(b.succeeded()).To(BeFalse())

	disabled := breaker{threshold: -1, backoff: time.Minute}
	for range 10 {
		g.Expect(disabled.failed(now)).To(BeFalse())
	}
	g.Expect(disabled.remaining(now)).To(BeZero())
}

func TestLookupCacheUnit(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := newLookupCache(time.Minute, clock)
	loads := 0
	load := func() (*ovirt.Cluster, error) {
		loads++
		return &ovirt.Cluster{ID: "c1", NetworkIDs: []string{"n1"}}, nil
	}

	first, err := cachedLookup(ctx, c, "k", cloneCluster, load)
	g.Expect(err).NotTo(HaveOccurred())
	first.NetworkIDs[0] = "mutated by the caller"
	second, err := cachedLookup(ctx, c, "k", cloneCluster, load)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loads).To(Equal(1), "the second lookup is a hit")
	g.Expect(second.NetworkIDs).To(Equal([]string{"n1"}), "callers cannot mutate the cache")

	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	_, _ = cachedLookup(ctx, c, "k", cloneCluster, load)
	g.Expect(loads).To(Equal(2), "expired entries are reloaded")

	c.clear()
	_, _ = cachedLookup(ctx, c, "k", cloneCluster, load)
	g.Expect(loads).To(Equal(3), "cleared entries are reloaded")

	_, err = cachedLookup(ctx, c, "missing", cloneCluster, func() (*ovirt.Cluster, error) {
		loads++
		return nil, notFound("FindCluster", "none")
	})
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	_, _ = cachedLookup(ctx, c, "missing", cloneCluster, func() (*ovirt.Cluster, error) { loads++; return &ovirt.Cluster{}, nil })
	g.Expect(loads).To(Equal(5), "not-found results are not cached")

	off := newLookupCache(-1, clock)
	_, _ = cachedLookup(ctx, off, "k", cloneCluster, load)
	_, _ = cachedLookup(ctx, off, "k", cloneCluster, load)
	g.Expect(loads).To(Equal(7), "a negative TTL disables the cache")
}

func TestConcurrentMissesOfOneKeyShareOneLoad(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newLookupCache(time.Minute, time.Now)
	var mu sync.Mutex
	loads := 0
	release := make(chan struct{})
	slow := func() (*ovirt.Cluster, error) {
		mu.Lock()
		loads++
		mu.Unlock()
		<-release
		return &ovirt.Cluster{ID: "c1", NetworkIDs: []string{"n1"}}, nil
	}
	results := make(chan *ovirt.Cluster, 10)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			cl, err := cachedLookup(ctx, c, "k", cloneCluster, slow)
			if err == nil {
				results <- cl
			}
		})
	}
	// Every caller is either loading or waiting before the load finishes.
	g.Eventually(func() int { mu.Lock(); defer mu.Unlock(); return loads }).Should(Equal(1))
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	close(results)
	var got []*ovirt.Cluster
	for cl := range results {
		got = append(got, cl)
	}
	g.Expect(got).To(HaveLen(10))
	g.Expect(loads).To(Equal(1), "one engine search for ten concurrent lookups")
	got[0].NetworkIDs[0] = "mutated"
	g.Expect(got[1].NetworkIDs).To(Equal([]string{"n1"}), "each caller has its own copy")

	// A failed load is shared with the callers that waited for it, and not cached.
	release = make(chan struct{})
	failing := func() (*ovirt.Cluster, error) {
		<-release
		return nil, notFound("FindCluster", "none")
	}
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			_, err := cachedLookup(ctx, c, "missing", cloneCluster, failing)
			errs <- err
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	}
	_, ok := c.get("missing")
	g.Expect(ok).To(BeFalse())

	// A waiter whose own context ends stops waiting; a leader that gave up for its own
	// context's sake does not fail the others: they load again.
	release = make(chan struct{})
	leaderDone := make(chan error, 1)
	go func() {
		_, err := cachedLookup(ctx, c, "k2", cloneCluster, func() (*ovirt.Cluster, error) {
			<-release
			return nil, context.Canceled
		})
		leaderDone <- err
	}()
	g.Eventually(func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.loading["k2"] != nil }).Should(BeTrue())
	short, cancel := context.WithCancel(ctx)
	cancel()
	_, err := cachedLookup(short, c, "k2", cloneCluster, slow)
	g.Expect(err).To(MatchError(context.Canceled))
	waiter := make(chan *ovirt.Cluster, 1)
	go func() {
		cl, _ := cachedLookup(ctx, c, "k2", cloneCluster, func() (*ovirt.Cluster, error) { return &ovirt.Cluster{ID: "c2"}, nil })
		waiter <- cl
	}()
	time.Sleep(50 * time.Millisecond)
	close(release)
	g.Expect(<-leaderDone).To(MatchError(context.Canceled))
	g.Eventually(waiter).Should(Receive(HaveField("ID", "c2")))

	// A load that panics still releases the callers waiting for it.
	release = make(chan struct{})
	go func() {
		defer func() { _ = recover() }()
		_, _ = cachedLookup(ctx, c, "k3", cloneCluster, func() (*ovirt.Cluster, error) { <-release; panic("boom") })
	}()
	g.Eventually(func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.loading["k3"] != nil }).Should(BeTrue())
	waitErr := make(chan error, 1)
	go func() {
		_, err := cachedLookup(ctx, c, "k3", cloneCluster, slow)
		waitErr <- err
	}()
	time.Sleep(50 * time.Millisecond)
	close(release)
	g.Eventually(waitErr).Should(Receive(MatchError(ContainSubstring("lookup did not finish"))))
}

func TestValidate(t *testing.T) {
	good := ovirt.Config{Provider: "p", URL: "https://engine/ovirt-engine/api/",
		Credentials: ovirt.Credentials{Username: "u", Password: "p"}}
	tests := []struct {
		name   string
		change func(*ovirt.Config)
		ok     bool
	}{
		{"a complete https config is valid", func(*ovirt.Config) {}, true},
		{"an empty provider is refused", func(c *ovirt.Config) { c.Provider = "" }, false},
		{"a relative URL is refused", func(c *ovirt.Config) { c.URL = "engine/api" }, false},
		{"plain http is refused", func(c *ovirt.Config) { c.URL = "http://engine/ovirt-engine/api" }, false},
		{"plain http is accepted with insecure", func(c *ovirt.Config) { c.URL = "http://engine/ovirt-engine/api"; c.TLS.Insecure = true }, true},
		{"an empty password is refused", func(c *ovirt.Config) { c.Credentials.Password = "" }, false},
		{"an empty username is refused", func(c *ovirt.Config) { c.Credentials.Username = "" }, false},
		{"a CA bundle without certificates is refused", func(c *ovirt.Config) { c.TLS.CAPEM = []byte("not pem") }, false},
		{"a bad CA bundle does not matter with insecure", func(c *ovirt.Config) { c.TLS.CAPEM = []byte("not pem"); c.TLS.Insecure = true }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := good
			tt.change(&cfg)
			out, tlsConfig, err := validate(cfg)
			if !tt.ok {
				g.Expect(err).To(MatchError(ovirt.ErrInvalid))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.URL).NotTo(HaveSuffix("/"), "a trailing slash would make the SDK request api//vms")
			g.Expect(tlsConfig.InsecureSkipVerify).To(Equal(cfg.TLS.Insecure))
		})
	}
}

func TestBuildVMValidation(t *testing.T) {
	base := ovirt.VMSpec{Name: "m1", ClusterID: "c", TemplateID: "t"}
	tests := []struct {
		name   string
		change func(*ovirt.VMSpec)
		ok     bool
	}{
		{"a minimal spec is valid", func(*ovirt.VMSpec) {}, true},
		{"a name is required", func(s *ovirt.VMSpec) { s.Name = "" }, false},
		{"a cluster is required", func(s *ovirt.VMSpec) { s.ClusterID = "" }, false},
		{"a template is required", func(s *ovirt.VMSpec) { s.TemplateID = "" }, false},
		{"guaranteed memory above memory is refused", func(s *ovirt.VMSpec) { s.MemoryBytes = 1 << 30; s.GuaranteedMemoryBytes = 2 << 30 }, false},
		{"negative CPU counts are refused", func(s *ovirt.VMSpec) { s.Cores = -1 }, false},
		{"a storage domain override without template disks is refused", func(s *ovirt.VMSpec) { s.Clone = true; s.StorageDomainID = "sd" }, false},
		{"a storage domain without clone is ignored", func(s *ovirt.VMSpec) { s.StorageDomainID = "sd" }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := base
			tt.change(&spec)
			vm, err := buildVM("CreateVM", spec)
			if !tt.ok {
				g.Expect(err).To(MatchError(ovirt.ErrInvalid))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			_, hasDisks := vm.DiskAttachments()
			g.Expect(hasDisks).To(BeFalse())
		})
	}
}

func TestBuildVMSetsOnlyWhatTheSpecSets(t *testing.T) {
	g := NewWithT(t)
	vm, err := buildVM("CreateVM", ovirt.VMSpec{
		Name: "m1", ClusterID: "c", TemplateID: "t", Clone: true, StorageDomainID: "sd2",
		Cores: 4, MemoryBytes: 8 << 30, Type: ovirt.VMTypeHighPerformance, OSType: "rhcos_x64",
		Comment: "owner", CustomScript: "{}", HostName: "m1",
		TemplateDisks: []ovirt.Disk{{ID: "td1", Format: "cow"}, {ID: "td2", Format: "raw"}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	cpu, _ := vm.Cpu()
	topo, _ := cpu.Topology()
	_, hasSockets := topo.Sockets()
	cores, _ := topo.Cores()
	g.Expect(hasSockets).To(BeFalse(), "unset topology fields are inherited")
	g.Expect(cores).To(Equal(int64(4)))
	mp, _ := vm.MemoryPolicy()
	maxMem, _ := mp.Max()
	_, hasGuaranteed := mp.Guaranteed()
	g.Expect(maxMem).To(Equal(int64(8 << 30)))
	g.Expect(hasGuaranteed).To(BeFalse())
	atts, _ := vm.DiskAttachments()
	g.Expect(atts.Slice()).To(HaveLen(2))
	for i, want := range []struct {
		id     string
		format ovirtsdk.DiskFormat
		sparse bool
	}{{"td1", ovirtsdk.DISKFORMAT_COW, true}, {"td2", ovirtsdk.DISKFORMAT_RAW, false}} {
		d, _ := atts.Slice()[i].Disk()
		id, _ := d.Id()
		format, _ := d.Format()
		sparse, _ := d.Sparse()
		sds, _ := d.StorageDomains()
		sdID, _ := sds.Slice()[0].Id()
		g.Expect([]any{id, format, sparse, sdID}).To(Equal([]any{want.id, want.format, want.sparse, "sd2"}))
	}
}

// TestNoPanickingBlockingOrLeakyHelpers guards the rules the SDK forces on
// us: Must* panics on missing fields, WaitFor* blocks for minutes without a
// context, and LogFunc dumps tokens and custom scripts.
func TestNoPanickingBlockingOrLeakyHelpers(t *testing.T) {
	g := NewWithT(t)
	forbidden := regexp.MustCompile(`\.(Must\w+|WaitFor\w+|LogFunc)\(`)
	files, err := filepath.Glob("*.go")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).NotTo(BeEmpty())
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range forbidden.FindAllString(line, -1) {
				if m != ".MustCompile(" { // regexp, at package init
					t.Errorf("%s:%d uses %s", f, i+1, m)
				}
			}
		}
	}
}
