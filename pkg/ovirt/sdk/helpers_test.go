package sdk

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

const (
	testUser     = "admin@internal"
	testPassword = "S3cr3t-Pa55word-for-tests"
	gib          = int64(1) << 30
)

// newSim starts a simulator with an inventory that exercises the lookups:
// two template versions, a locked template, vNIC profiles of the same name in
// two data centers, two storage domains.
func newSim(t *testing.T, opts ...func(*ovirtsim.Builder)) *ovirtsim.Simulator {
	t.Helper()
	disk := func(sd string) []ovirtsim.TemplateDisk {
		return []ovirtsim.TemplateDisk{{Alias: "rhcos-4.14_Disk1", SizeGB: 16, Format: "cow", StorageDomain: sd, Bootable: true}}
	}
	b := ovirtsim.NewBuilder().
		WithCluster(ovirtsim.Cluster{Name: "Default", Networks: []string{"ovirtmgmt", "storage"}}).
		WithCluster(ovirtsim.Cluster{Name: "Remote", DataCenter: "Remote"}).
		WithStorageDomain(ovirtsim.StorageDomain{Name: "data", FreeGB: 1000}).
		WithStorageDomain(ovirtsim.StorageDomain{Name: "fast", FreeGB: 1000}).
		WithStorageDomain(ovirtsim.StorageDomain{Name: "remote-data", DataCenter: "Remote", FreeGB: 1000}).
		WithTemplate(ovirtsim.Template{Name: "rhcos-4.14", Cluster: "Default", Version: 1, OSType: "rhcos_x64",
			Sockets: 1, Cores: 2, Threads: 1, MemoryMB: 4096, Disks: disk("data")}).
		WithTemplate(ovirtsim.Template{Name: "rhcos-4.14", Cluster: "Default", Version: 2, OSType: "rhcos_x64",
			Sockets: 1, Cores: 2, Threads: 1, MemoryMB: 4096, Disks: disk("data")}).
		WithTemplate(ovirtsim.Template{Name: "being-built", Cluster: "Default", Status: "locked", Disks: disk("data")}).
		WithVnicProfile(ovirtsim.VnicProfile{Name: "ovirtmgmt", Network: "ovirtmgmt"}).
		WithVnicProfile(ovirtsim.VnicProfile{Name: "storage", Network: "storage"}).
		WithVnicProfile(ovirtsim.VnicProfile{Name: "ovirtmgmt", Network: "ovirtmgmt", DataCenter: "Remote"}).
		WithCredentials(testUser, testPassword).
		WithTokenTTL(time.Hour)
	for _, o := range opts {
		o(b)
	}
	sim, err := b.Build()
	if err != nil {
		t.Fatalf("starting the simulator: %v", err)
	}
	t.Cleanup(sim.Close)
	return sim
}

// env is a Factory wired to a simulator, with its own registry and log.
type env struct {
	sim  *ovirtsim.Simulator
	f    *Factory
	reg  *prometheus.Registry
	logs *logBuffer
	cfg  ovirt.Config
}

func newEnv(t *testing.T, sim *ovirtsim.Simulator, opts Options) *env {
	t.Helper()
	e := &env{sim: sim, reg: prometheus.NewRegistry(), logs: &logBuffer{}}
	opts.Registerer = e.reg
	if opts.Logger.GetSink() == nil {
		opts.Logger = e.logs.logger(10)
	}
	e.f = NewFactory(opts)
	t.Cleanup(e.f.Close)
	e.cfg = ovirt.Config{
		Provider:    "test-provider",
		URL:         sim.URL(),
		Credentials: ovirt.Credentials{Username: testUser, Password: testPassword},
		TLS:         ovirt.TLS{CAPEM: sim.CAPEM()},
	}
	return e
}

// logBuffer collects log lines from any goroutine.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) logger(verbosity int) logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.lines = append(b.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: verbosity})
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// tokenOf reads the SSO token of a client's live connection, for the test
// that proves tokens never reach the logs. The SDK keeps it unexported.
func tokenOf(c ovirt.Client) string {
	s := c.(*client).s
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	if conn == nil {
		return ""
	}
	return reflect.ValueOf(conn).Elem().FieldByName("ssoToken").String()
}

// otherCAPEM returns a freshly generated CA that signed nothing.
func otherCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(42),
		Subject:               pkix.Name{CommonName: "some other CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// fakeClock is an adjustable clock for the breaker and the lookup cache.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// blackHole listens on a local port and accepts connections without ever
// reading or writing: an engine that hangs before even the TLS handshake.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}
