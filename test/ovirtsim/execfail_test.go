package ovirtsim_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func TestExecuteThenFail(t *testing.T) {
	t.Parallel()
	sim := startSim(t)
	conn := connect(t, sim)

	t.Run("status: POST /vms answers 503 but the VM exists", func(t *testing.T) {
		g := NewWithT(t)
		rule, err := ovirtsim.ParseFaultRule("POST:/vms:503:1:1::after")
		g.Expect(err).NotTo(HaveOccurred())
		sim.SetFaults(rule)
		defer sim.SetFaults()
		_, err = conn.SystemService().VmsService().Add().Vm(vmBuilder("ghost", "rhcos-4.14", "Default").MustBuild()).Send()
		g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "503"`)))
		_, found := sim.VMByName("ghost")
		g.Expect(found).To(BeTrue(), "the engine did the work")
		// Counted once the handler returns, which may be just after the client has its answer.
		g.Eventually(sim.Requests).WithTimeout(10 * time.Second).
			Should(HaveKeyWithValue(ovirtsim.RequestKey{Method: "POST", Path: "/vms", Status: 503}, 1))
		// A retry that does not look first hits the name the first call took.
		_, err = conn.SystemService().VmsService().Add().Vm(vmBuilder("ghost", "rhcos-4.14", "Default").MustBuild()).Send()
		g.Expect(err).To(MatchError(ContainSubstring("The VM name is already in use")))
	})

	t.Run("drop: the disk update is applied, the connection is closed", func(t *testing.T) {
		g := NewWithT(t)
		id := createVM(t, conn, "dropped", false)
		did := firstDiskID(t, conn, id)
		sim.SetFaults(ovirtsim.FaultRule{Method: "PUT", Path: "/vms/{id}/diskattachments/{id}", After: true, Mode: ovirtsim.FaultModeDrop, Count: 1})
		defer sim.SetFaults()
		_, err := conn.SystemService().VmsService().VmService(id).DiskAttachmentsService().AttachmentService(did).Update().
			DiskAttachment(ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(ovirtsdk.NewDiskBuilder().Alias("os").ProvisionedSize(32 << 30)).MustBuild()).Send()
		g.Expect(err).To(HaveOccurred(), "no answer at all")
		st, _ := sim.VM(id)
		g.Expect(st.Disks[0]).To(And(HaveField("Alias", "os"), HaveField("SizeGB", int64(32))), "the update was applied")
		g.Eventually(sim.Requests).WithTimeout(10*time.Second).
			Should(HaveKeyWithValue(ovirtsim.RequestKey{Method: "PUT", Path: "/vms/{id}/diskattachments/{id}", Status: 0}, 1), "dropped: status 0")
		g.Expect(conn.Test()).To(Succeed(), "the next call works")
	})

	t.Run("hang: DELETE times out on the client, the VM is gone", func(t *testing.T) {
		g := NewWithT(t)
		// The client gives up long before the hang ends, yet late enough for a loaded machine
		// to deliver the request: with one second the timeout could expire during the TLS
		// handshakes, before the engine had even received the DELETE.
		const patience = 5 * time.Second
		impatient, err := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).Username(sim.Username()).Password(sim.Password()).
			CertPool(x509.NewCertPool()).CACert(sim.CAPEM()).Timeout(patience).Build()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(impatient.Test()).To(Succeed())
		id := createVM(t, conn, "vanishing", false)
		sim.SetFaults(ovirtsim.FaultRule{Method: "DELETE", Path: "/vms/{id}", After: true, Mode: ovirtsim.FaultModeHang, Hang: 10 * patience, Count: 1})
		defer sim.SetFaults()
		_, err = impatient.SystemService().VmsService().VmService(id).Remove().Send()
		ue, ok := errAs[*url.Error](err)
		g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
		g.Expect(ue.Timeout()).To(BeTrue(), "the client gave up: %v", err)
		// The engine got the DELETE and held the answer until the client went away: counted
		// 499 once, and never answered (no other status)...
		g.Eventually(func() int {
			return sim.Requests()[ovirtsim.RequestKey{Method: "DELETE", Path: "/vms/{id}", Status: 499}]
		}).WithTimeout(30*time.Second).Should(Equal(1), "the hang ends when the client goes away")
		g.Expect(sim.RequestCount("DELETE", "/vms/{id}")).To(Equal(1), "one DELETE, answered with nothing")
		// ... after it had removed the VM: the work comes before the hang.
		_, found := sim.VM(id)
		g.Expect(found).To(BeFalse(), "removed before the hang")
	})

	t.Run("hang with a status: the work, a delay, then the fault", func(t *testing.T) {
		g := NewWithT(t)
		id := createVM(t, conn, "slowstart", false)
		sim.SetFaults(ovirtsim.FaultRule{Method: "POST", Path: "/vms/{id}/start", After: true, Hang: 100 * time.Millisecond, Status: 502})
		defer sim.SetFaults()
		_, err := conn.SystemService().VmsService().VmService(id).Start().Send()
		g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "502"`)))
		g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_UP))
	})

	t.Run("drop before the work: nothing happens", func(t *testing.T) {
		g := NewWithT(t)
		rule, err := ovirtsim.ParseFaultRule("POST:/vms:0:1:1::drop")
		g.Expect(err).NotTo(HaveOccurred())
		sim.SetFaults(rule)
		defer sim.SetFaults()
		_, err = conn.SystemService().VmsService().Add().Vm(vmBuilder("never", "rhcos-4.14", "Default").MustBuild()).Send()
		g.Expect(err).To(HaveOccurred())
		_, found := sim.VMByName("never")
		g.Expect(found).To(BeFalse())
	})
}

// A request whose client goes away during an execute-then-fail hang must not
// end with a readable answer. Returning from the handler without writing
// would make net/http send an implicit "200 OK" with an empty body: a client
// still reading the connection (the context can end for other reasons than a
// closed connection) would take the timed-out DELETE for a success. The
// simulator aborts the connection instead.
func TestAbandonedRequestGetsNoAnswer(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	for _, rule := range []ovirtsim.FaultRule{
		{Method: "DELETE", Path: "/vms/{id}", After: true, Mode: ovirtsim.FaultModeHang, Hang: time.Minute},
		{Method: "DELETE", Path: "/vms/{id}", Hang: time.Minute}, // a hang before the work
		{Method: "DELETE", Path: "/vms/{id}", Hang: time.Minute, Status: 503},
	} {
		id := createVM(t, conn, "abandoned", false)
		sim.SetFaults(rule)
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequest("DELETE", "/ovirt-engine/api/vms/"+id, nil).WithContext(ctx)
		req.SetBasicAuth(sim.Username(), sim.Password())
		rec := httptest.NewRecorder()
		time.AfterFunc(50*time.Millisecond, cancel)
		var aborted any
		func() {
			defer func() { aborted = recover() }()
			sim.Handler().ServeHTTP(rec, req)
		}()
		g.Expect(aborted).To(Equal(http.ErrAbortHandler), "the connection is aborted (%+v)", rule)
		g.Expect(rec.Header()).To(BeEmpty(), "nothing was written (%+v)", rule)
		g.Expect(rec.Body.Len()).To(BeZero())
		_, found := sim.VM(id)
		g.Expect(found).To(Equal(rule.Status != 0), "the work is done unless a fault replaced it (%+v)", rule)
		sim.SetFaults()
		if found {
			g.Expect(sim.DeleteVM(id)).To(Succeed())
		}
	}
	g.Expect(sim.Requests()).To(HaveKeyWithValue(ovirtsim.RequestKey{Method: "DELETE", Path: "/vms/{id}", Status: 499}, 3))
}
