package ovirtsim_test

import (
	"crypto/x509"
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
	impatient, err := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).Username(sim.Username()).Password(sim.Password()).
		CertPool(x509.NewCertPool()).CACert(sim.CAPEM()).Timeout(time.Second).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := impatient.Test(); err != nil {
		t.Fatal(err)
	}

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
		id := createVM(t, conn, "vanishing", false)
		sim.SetFaults(ovirtsim.FaultRule{Method: "DELETE", Path: "/vms/{id}", After: true, Mode: ovirtsim.FaultModeHang, Hang: 30 * time.Second, Count: 1})
		defer sim.SetFaults()
		_, err := impatient.SystemService().VmsService().VmService(id).Remove().Send()
		ue, ok := errAs[*url.Error](err)
		g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
		g.Expect(ue.Timeout()).To(BeTrue())
		_, found := sim.VM(id)
		g.Expect(found).To(BeFalse(), "removed before the hang")
		g.Eventually(func() int {
			return sim.Requests()[ovirtsim.RequestKey{Method: "DELETE", Path: "/vms/{id}", Status: 499}]
		}).WithTimeout(10*time.Second).Should(Equal(1), "the hang ends when the client goes away")
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
