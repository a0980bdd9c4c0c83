package ovirtsim_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// TestConcurrentClients runs 50 goroutines that each create, read, resize,
// start, stop and delete VMs through one shared SDK connection, while others
// list and search. Run with -race.
func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithFault(ovirtsim.FaultRule{Method: "GET", Path: "/vms/{id}", Status: 503, Rate: 0.05})
	})
	conn := connect(t, sim)
	const workers, rounds = 50, 2
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Go(func() {
			vms := conn.SystemService().VmsService()
			for r := range rounds {
				name := fmt.Sprintf("w%02d-r%d", w, r)
				clone := (w+r)%2 == 0
				res, err := vms.Add().Vm(vmBuilder(name, "ubuntu-22.04", "Default").MustBuild()).Clone(clone).Send()
				if err != nil {
					errs <- fmt.Errorf("create %s: %w", name, err)
					continue
				}
				id := res.MustVm().MustId()
				vs := vms.VmService(id)
				if _, err := vs.Get().Follow("disk_attachments.disk,nics").Send(); err != nil && !strings.Contains(err.Error(), `"503"`) {
					errs <- fmt.Errorf("get %s: %w", name, err)
				}
				if _, err := vms.List().Search("name=" + name).Send(); err != nil {
					errs <- fmt.Errorf("search %s: %w", name, err)
				}
				if _, err := vs.Start().Send(); err != nil {
					errs <- fmt.Errorf("start %s: %w", name, err)
				}
				if _, err := vs.Stop().Send(); err != nil {
					errs <- fmt.Errorf("stop %s: %w", name, err)
				}
				if _, err := vs.Remove().Send(); err != nil {
					errs <- fmt.Errorf("remove %s: %w", name, err)
				}
			}
		})
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			_ = sim.Dump()
			_ = sim.Requests()
			_, _ = conn.SystemService().VmsService().List().Send()
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	g.Expect(sim.VMs()).To(BeEmpty())
	g.Expect(sim.StorageDomainFreeGB("data")).To(Equal(int64(1000)), "every cloned GiB came back")
	g.Expect(sim.RequestCount("POST", "/vms")).To(Equal(workers * rounds))
	g.Expect(sim.MaxInFlight()).To(BeNumerically(">", 1))
	g.Expect(sim.Logins()).To(Equal(1), "one warmed-up connection logs in once")
	t.Logf("requests=%d max in flight=%d", sim.TotalRequests(), sim.MaxInFlight())
}

// inProcess drives the handler without TLS, with one token: fast enough to
// populate thousands of VMs.
type inProcess struct {
	h     http.Handler
	token string
}

func newInProcess(t testing.TB, sim *ovirtsim.Simulator) *inProcess {
	t.Helper()
	req := httptest.NewRequest("POST", "/ovirt-engine/sso/oauth/token",
		strings.NewReader("grant_type=password&scope=ovirt-app-api&username=admin%40internal&password=secret"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	sim.Handler().ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("SSO: %d %s", rec.Code, rec.Body)
	}
	tok := strings.Split(strings.Split(rec.Body.String(), `"access_token":"`)[1], `"`)[0]
	return &inProcess{h: sim.Handler(), token: tok}
}

func (p *inProcess) do(method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "/ovirt-engine/api"+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/xml")
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, req)
	return rec
}

func populate(t testing.TB, p *inProcess, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for i := range n {
		body := fmt.Sprintf(`<vm><name>vm-%05d</name><cluster><name>Default</name></cluster><template><name>rhcos-4.14</name></template></vm>`, i)
		rec := p.do("POST", "/vms?clone=false", body)
		if rec.Code != 202 {
			t.Fatalf("creating VM %d: %d %s", i, rec.Code, rec.Body)
		}
		s := rec.Body.String()
		ids = append(ids, s[len(`<vm id="`):strings.IndexByte(s[len(`<vm id="`):], '"')+len(`<vm id="`)])
	}
	return ids
}

func TestFiveThousandVMsInMemory(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{ImageLock: time.Hour}) })
	p := newInProcess(t, sim)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ids := populate(t, p, 5000)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	perVM := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / 5000
	t.Logf("heap per VM: %d bytes", perVM)
	g.Expect(perVM).To(BeNumerically("<", 8<<10))
	g.Expect(sim.VMs()).To(HaveLen(5000))

	// The real SDK over HTTPS still finds one by name among 5,000 quickly.
	conn := connect(t, sim)
	start := time.Now()
	r, err := conn.SystemService().VmsService().List().Search(`name="vm-04321"`).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustVms().Slice()).To(HaveLen(1))
	g.Expect(r.MustVms().Slice()[0].MustId()).To(Equal(ids[4321]))
	vm := getVM(t, conn, ids[4999], "disk_attachments.disk")
	g.Expect(vm.MustStatus()).To(Equal(ovirtsdk.VMSTATUS_IMAGE_LOCKED), "no goroutine per VM: state is computed on read")
	t.Logf("search + get among 5,000 VMs via the SDK: %v", time.Since(start))
	rec := p.do("GET", "/vms?search=cluster%3DDefault&max=10", "")
	g.Expect(rec.Code).To(Equal(200))
	g.Expect(strings.Count(rec.Body.String(), "<vm id=")).To(Equal(10))
	rec = p.do("GET", "/vms", "")
	g.Expect(strings.Count(rec.Body.String(), "<vm id=")).To(Equal(5000))
}
