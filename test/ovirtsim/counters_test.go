package ovirtsim_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func TestCountersUsePathTemplates(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "counted", false)
	did := firstDiskID(t, conn, id)
	g.Expect(resize(conn, id, did, 20<<30)).To(Succeed())
	g.Expect(resize(conn, id, did, 10<<30)).NotTo(Succeed())
	_, err := conn.SystemService().VmsService().VmService("missing").Get().Send()
	g.Expect(err).To(HaveOccurred())

	g.Expect(sim.Requests()).To(Equal(map[ovirtsim.RequestKey]int{
		{Method: "POST", Path: "/sso/oauth/token", Status: 200}:              1,
		{Method: "GET", Path: "/", Status: 200}:                              1,
		{Method: "POST", Path: "/vms", Status: 202}:                          1,
		{Method: "GET", Path: "/vms/{id}/diskattachments", Status: 200}:      1,
		{Method: "PUT", Path: "/vms/{id}/diskattachments/{id}", Status: 200}: 1,
		{Method: "PUT", Path: "/vms/{id}/diskattachments/{id}", Status: 400}: 1,
		{Method: "GET", Path: "/vms/{id}", Status: 404}:                      1,
	}))
	g.Expect(sim.RequestCount("PUT", "/vms/{id}/diskattachments/{id}")).To(Equal(2))
	g.Expect(sim.RequestCount("", "vms/{id}")).To(Equal(1))
	g.Expect(sim.TotalRequests()).To(Equal(6), "SSO is not an API request")
	g.Expect(sim.Logins()).To(Equal(1))
	log := sim.RequestLog()
	g.Expect(log).To(HaveLen(7))
	g.Expect(log[0].Path).To(Equal("/sso/oauth/token"))
	g.Expect(log[6]).To(And(HaveField("Method", "GET"), HaveField("Path", "/vms/{id}"), HaveField("Status", 404)))

	// Admin requests are not counted.
	admin(t, sim, "GET", "/sim/state", "")
	g.Expect(sim.TotalRequests()).To(Equal(6))

	sim.ResetCounters()
	g.Expect(sim.Requests()).To(BeEmpty())
	g.Expect(sim.TotalRequests()).To(Equal(0))
	g.Expect(sim.Logins()).To(Equal(0))
	g.Expect(sim.MaxInFlight()).To(Equal(0))
	g.Expect(sim.RequestLog()).To(BeEmpty())
	_, ok := sim.VM(id)
	g.Expect(ok).To(BeTrue(), "ResetCounters keeps the VMs")
}

func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		// Each request is held long enough for all six to arrive, whatever the load: the
		// first is answered only after the deadline by which the sixth must have come (a
		// TLS handshake each, on two busy cores under -race; 300 ms was once too short).
		b.WithLatency(ovirtsim.LatencyRule{Path: "/clusters", Min: 3 * time.Second})
	})
	conn := connect(t, sim)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			_, err := conn.SystemService().ClustersService().List().Send()
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
	wg.Wait()
	g.Expect(sim.MaxInFlight()).To(Equal(6))
	g.Expect(sim.Counters().InFlight).To(Equal(0))
}

func TestResetReturnsToTheBuiltState(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithFault(ovirtsim.FaultRule{Path: "/datacenters", Status: 500}) })
	conn := connect(t, sim)
	first := createVM(t, conn, "again", true)
	g.Expect(sim.AddTemplate(ovirtsim.Template{Name: "temporary", Disks: []ovirtsim.TemplateDisk{{SizeGB: 1}}})).To(Succeed())
	sim.SetFaults()
	sim.SetTimings(ovirtsim.Timings{ImageLock: time.Hour})
	tplBefore := templateID(t, conn, "rhcos-4.14")

	sim.Reset()
	_, err := conn.SystemService().VmsService().List().Send()
	rpe, ok := errAs[*ovirtsdk.ResponseParseError](err)
	g.Expect(ok).To(BeTrue(), "tokens are invalid after Reset: got %T %v", err, err)
	g.Expect(rpe.Code).To(Equal(401))
	g.Expect(sim.VMs()).To(BeEmpty())
	g.Expect(sim.TotalRequests()).To(Equal(1))
	g.Expect(sim.StorageDomainFreeGB("data")).To(Equal(int64(1000)))

	conn = connect(t, sim)
	g.Expect(templateID(t, conn, "rhcos-4.14")).To(Equal(tplBefore), "the built inventory keeps its ids")
	r, err := conn.SystemService().TemplatesService().List().Search("name=temporary").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustTemplates().Slice()).To(BeEmpty(), "run-time additions are gone")
	_, err = conn.SystemService().DataCentersService().List().Send()
	g.Expect(err).To(HaveOccurred(), "the built fault rules are back")
	again := createVM(t, conn, "again", true)
	g.Expect(again).To(Equal(first), "same seed, same sequence, same ids")
	g.Expect(vmStatus(t, conn, again)).To(Equal(ovirtsdk.VMSTATUS_DOWN), "the built timings are back")
}

func TestDumpIsJSON(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "dumped", true)
	_, err := conn.SystemService().VmsService().VmService(id).Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	d := sim.Dump()
	g.Expect(d.URL).To(Equal(sim.URL()))
	g.Expect(d.Clusters).To(HaveLen(2))
	g.Expect(d.Templates).To(HaveLen(3))
	g.Expect(d.VMs).To(HaveLen(1))
	g.Expect(d.VMs[0].IPs).To(Equal([]string{"10.1.1.2"}))
	g.Expect(d.Settings.ActiveTokens).To(Equal(1))
	g.Expect(d.Settings.Username).To(Equal("admin@internal"))
	b, err := json.Marshal(d)
	g.Expect(err).NotTo(HaveOccurred())
	var back ovirtsim.State
	g.Expect(json.Unmarshal(b, &back)).To(Succeed())
	g.Expect(back.VMs[0].Name).To(Equal("dumped"))
	g.Expect(back.StorageDomains[0].FreeGB).To(Equal(int64(984)))
	g.Expect(back.Settings.TokenTTL.Std()).To(Equal(time.Hour))
	g.Expect(back.Counters.Logins).To(Equal(1))
}
