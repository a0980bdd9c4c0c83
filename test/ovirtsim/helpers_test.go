package ovirtsim_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// startSim builds a simulator from the demo seed (zero timings except the
// 20s powering_up of VMs without a guest agent) after applying opts, and
// closes it when the test ends.
func startSim(t testing.TB, opts ...func(*ovirtsim.Builder)) *ovirtsim.Simulator {
	t.Helper()
	b := ovirtsim.NewBuilder().WithSeed(ovirtsim.DemoSeed())
	for _, o := range opts {
		o(b)
	}
	sim, err := b.Build()
	if err != nil {
		t.Fatalf("building simulator: %v", err)
	}
	t.Cleanup(sim.Close)
	return sim
}

// connect returns an SDK connection that trusts only the simulator's CA,
// warmed up with Test() so that it can be shared between goroutines.
func connect(t testing.TB, sim *ovirtsim.Simulator) *ovirtsdk.Connection {
	t.Helper()
	conn := rawConn(t, sim)
	if err := conn.Test(); err != nil {
		t.Fatalf("conn.Test: %v", err)
	}
	return conn
}

func rawConn(t testing.TB, sim *ovirtsim.Simulator) *ovirtsdk.Connection {
	t.Helper()
	conn, err := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).
		Username(sim.Username()).Password(sim.Password()).
		CertPool(x509.NewCertPool()).CACert(sim.CAPEM()).
		Timeout(30 * time.Second).Build()
	if err != nil {
		t.Fatalf("building connection: %v", err)
	}
	return conn
}

// lookup helpers -------------------------------------------------------

func templateID(t testing.TB, conn *ovirtsdk.Connection, name string) string {
	t.Helper()
	r, err := conn.SystemService().TemplatesService().List().Search(`name="` + name + `"`).Send()
	if err != nil {
		t.Fatalf("listing templates: %v", err)
	}
	ts, _ := r.Templates()
	if ts == nil || len(ts.Slice()) == 0 {
		t.Fatalf("template %q not found", name)
	}
	id, _ := ts.Slice()[0].Id()
	return id
}

func clusterID(t testing.TB, conn *ovirtsdk.Connection, name string) string {
	t.Helper()
	r, err := conn.SystemService().ClustersService().List().Search(`name="` + name + `"`).Send()
	if err != nil {
		t.Fatalf("listing clusters: %v", err)
	}
	cs, _ := r.Clusters()
	if cs == nil || len(cs.Slice()) == 0 {
		t.Fatalf("cluster %q not found", name)
	}
	id, _ := cs.Slice()[0].Id()
	return id
}

func sdID(t testing.TB, conn *ovirtsdk.Connection, name string) string {
	t.Helper()
	r, err := conn.SystemService().StorageDomainsService().List().Search(`name="` + name + `"`).Send()
	if err != nil {
		t.Fatalf("listing storage domains: %v", err)
	}
	sds, _ := r.StorageDomains()
	if sds == nil || len(sds.Slice()) == 0 {
		t.Fatalf("storage domain %q not found", name)
	}
	id, _ := sds.Slice()[0].Id()
	return id
}

// vmBuilder starts a VM definition from a template in a cluster, by name.
func vmBuilder(name, template, cluster string) *ovirtsdk.VmBuilder {
	return ovirtsdk.NewVmBuilder().Name(name).
		ClusterBuilder(ovirtsdk.NewClusterBuilder().Name(cluster)).
		TemplateBuilder(ovirtsdk.NewTemplateBuilder().Name(template))
}

// createVM creates a VM from rhcos-4.14 in Default and returns its id.
func createVM(t testing.TB, conn *ovirtsdk.Connection, name string, clone bool) string {
	t.Helper()
	vm, err := vmBuilder(name, "rhcos-4.14", "Default").Build()
	if err != nil {
		t.Fatal(err)
	}
	r, err := conn.SystemService().VmsService().Add().Vm(vm).Clone(clone).Send()
	if err != nil {
		t.Fatalf("creating VM %s: %v", name, err)
	}
	v, ok := r.Vm()
	if !ok {
		t.Fatalf("no VM in the answer")
	}
	id, _ := v.Id()
	return id
}

func getVM(t testing.TB, conn *ovirtsdk.Connection, id string, follow string) *ovirtsdk.Vm {
	t.Helper()
	req := conn.SystemService().VmsService().VmService(id).Get()
	if follow != "" {
		req.Follow(follow)
	}
	r, err := req.Send()
	if err != nil {
		t.Fatalf("getting VM %s: %v", id, err)
	}
	v, _ := r.Vm()
	return v
}

func vmStatus(t testing.TB, conn *ovirtsdk.Connection, id string) ovirtsdk.VmStatus {
	t.Helper()
	st, _ := getVM(t, conn, id, "").Status()
	return st
}

// errAs is errors.As returning the target, for gomega assertions.
func errAs[T error](err error) (T, bool) {
	var target T
	ok := errors.As(err, &target)
	return target, ok
}

var _ = Equal // keep the dot import used when a file only uses helpers

// admin calls an admin endpoint over HTTPS (trusting only the simulator CA)
// and returns the status and body.
func admin(t testing.TB, sim *ovirtsim.Simulator, method, path, body string) (int, string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(sim.CAPEM())
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequest(method, "https://"+sim.Addr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// newAuthedRequest builds an API request with basic authentication.
func newAuthedRequest(sim *ovirtsim.Simulator, method, path, body string) (*http.Request, error) {
	req, err := http.NewRequest(method, sim.URL()+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(sim.Username(), sim.Password())
	req.Header.Set("Content-Type", "application/xml")
	return req, nil
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
