package ovirtsim_test

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func TestAdminEndpoints(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "adm", true)
	call := func(method, path, body string, wantStatus int) string {
		t.Helper()
		st, b := admin(t, sim, method, path, body)
		g.Expect(st).To(Equal(wantStatus), "%s %s: %s", method, path, b)
		return b
	}

	g.Expect(call("GET", "/sim/healthz", "", 200)).To(MatchJSON(`{"status":"ok"}`))

	var state ovirtsim.State
	g.Expect(json.Unmarshal([]byte(call("GET", "/sim/state", "", 200)), &state)).To(Succeed())
	g.Expect(state.VMs).To(HaveLen(1))
	g.Expect(state.VMs[0].ID).To(Equal(id))

	var counters ovirtsim.Counters
	g.Expect(json.Unmarshal([]byte(call("GET", "/sim/counters", "", 200)), &counters)).To(Succeed())
	g.Expect(counters.Logins).To(Equal(1))
	g.Expect(counters.TotalRequests).To(Equal(2))
	g.Expect(counters.Requests).To(ContainElement(ovirtsim.RequestCount{
		RequestKey: ovirtsim.RequestKey{Method: "POST", Path: "/vms", Status: 202}, Count: 1}))
	var log []ovirtsim.RequestRecord
	g.Expect(json.Unmarshal([]byte(call("GET", "/sim/requests?limit=1", "", 200)), &log)).To(Succeed())
	g.Expect(log).To(HaveLen(1))
	g.Expect(log[0].Path).To(Equal("/vms"))
	call("POST", "/sim/counters/reset", "", 200)
	g.Expect(sim.TotalRequests()).To(Equal(0))

	// Faults and latency.
	call("PUT", "/sim/faults", `[{"method":"GET","path":"/clusters","status":503,"count":1,"detail":"maintenance"}]`, 200)
	_, err := conn.SystemService().ClustersService().List().Send()
	g.Expect(err).To(MatchError(ContainSubstring(`"maintenance"`)))
	g.Expect(call("GET", "/sim/faults", "", 200)).To(MatchJSON(`[{"method":"GET","path":"/clusters","status":503,"count":1,"detail":"maintenance"}]`))
	call("PUT", "/sim/faults", `[{"path":"/clusters","status":7}]`, 400)
	call("PUT", "/sim/faults", `[{"path":"/clusters","statuz":500}]`, 400)
	call("PUT", "/sim/faults", `[]`, 200)
	call("PUT", "/sim/latency", `[{"path":"/templates","min":"50ms","max":"60ms"}]`, 200)
	start := time.Now()
	_, err = conn.SystemService().TemplatesService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(time.Since(start)).To(BeNumerically(">=", 50*time.Millisecond))
	g.Expect(call("GET", "/sim/latency", "", 200)).To(MatchJSON(`[{"path":"/templates","min":"50ms","max":"60ms"}]`))
	call("PUT", "/sim/latency", `[{"min":"-1s"}]`, 400)
	call("PUT", "/sim/latency", `[]`, 200)

	// CSI disks, detach, out-of-band delete.
	var csi struct{ ID string }
	g.Expect(json.Unmarshal([]byte(call("POST", "/sim/vms/"+id+"/csi-disks", `{"size_gb":3}`, 201)), &csi)).To(Succeed())
	st, _ := sim.VM(id)
	g.Expect(st.Disks).To(HaveLen(2))
	g.Expect(st.Disks[1].ID).To(Equal(csi.ID))
	g.Expect(st.Disks[1].Alias).To(HavePrefix("pvc-"))
	call("POST", "/sim/vms/nope/csi-disks", `{"size_gb":3}`, 404)
	call("DELETE", "/sim/vms/"+id+"/disks/"+csi.ID, "", 200)
	call("DELETE", "/sim/vms/"+id+"/disks/"+csi.ID, "", 404)
	st, _ = sim.VM(id)
	g.Expect(st.Disks).To(HaveLen(1))

	// Guest agent, timings, credentials, token TTL, restart.
	_, err = conn.SystemService().VmsService().VmService(id).Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	call("PUT", "/sim/guest-agent", `{"enabled":false}`, 200)
	st, _ = sim.VM(id)
	g.Expect(st.IPs).To(BeEmpty())
	call("PUT", "/sim/guest-agent", `{"enabled":true}`, 200)
	st, _ = sim.VM(id)
	g.Expect(st.IPs).To(HaveLen(1))
	call("PUT", "/sim/guest-agent", `{}`, 400)
	call("PUT", "/sim/timings", `{"image_lock":"1h","clone_factor":2}`, 200)
	g.Expect(sim.Dump().Settings.Timings.ImageLock).To(Equal(time.Hour))
	call("PUT", "/sim/timings", `{"image_lock":"-1s"}`, 400)
	call("PUT", "/sim/timings", `{}`, 200)
	call("PUT", "/sim/token-ttl", `{"ttl":"30m"}`, 200)
	g.Expect(sim.Dump().Settings.TokenTTL.Std()).To(Equal(30 * time.Minute))
	call("POST", "/sim/restart", "", 200)
	_, err = conn.SystemService().VmsService().List().Send()
	_, ok := errAs[*ovirtsdk.ResponseParseError](err)
	g.Expect(ok).To(BeTrue())
	call("PUT", "/sim/credentials", `{"username":"u@internal","password":"p"}`, 200)
	g.Expect(sim.Username()).To(Equal("u@internal"))
	conn = connect(t, sim)

	// Inventory at run time.
	call("PUT", "/sim/templates", `{"name":"extra","cluster":"Secondary","os_type":"rhcos_x64","disks":[{"alias":"extra_Disk1","size_gb":8,"bootable":true}]}`, 201)
	g.Expect(templateID(t, conn, "extra")).NotTo(BeEmpty())
	call("PUT", "/sim/templates", `{"name":"broken","cluster":"nope"}`, 400)
	call("DELETE", "/sim/templates/extra", "", 200)
	call("DELETE", "/sim/templates/extra", "", 404)
	call("PUT", "/sim/storagedomains", `{"name":"nfs2","free_gb":50}`, 201)
	g.Expect(sim.StorageDomainFreeGB("nfs2")).To(Equal(int64(50)))
	call("PUT", "/sim/storagedomains/nfs2/status", `{"status":"maintenance"}`, 200)
	call("PUT", "/sim/storagedomains/nope/status", `{"status":"maintenance"}`, 404)
	call("PUT", "/sim/vnicprofiles", `{"name":"storage","network":"storage"}`, 201)

	// Out-of-band delete refuses nothing.
	call("DELETE", "/sim/vms/"+id, "", 200)
	call("DELETE", "/sim/vms/"+id, "", 404)
	_, err = conn.SystemService().VmsService().VmService(id).Get().Send()
	_, ok = errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue())

	call("POST", "/sim/reset", "", 200)
	g.Expect(sim.Username()).To(Equal("admin@internal"))
	g.Expect(sim.StorageDomainFreeGB("nfs2")).To(Equal(int64(-1)))
	call("GET", "/sim/nothing", "", 404)
	g.Expect(sim.TotalRequests()).To(Equal(0), "admin requests are not counted")
}
