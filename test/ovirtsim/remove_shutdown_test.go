package ovirtsim_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func TestShutdownSemantics(t *testing.T) {
	t.Parallel()
	sim := startSim(t, func(b *ovirtsim.Builder) {
		// Windows of 2 s so that polling under CI load lands in each state.
		b.WithTimings(ovirtsim.Timings{WaitForLaunch: 2 * time.Second, PoweringUp: 2 * time.Second, PoweringDown: 2 * time.Second})
	})
	conn := connect(t, sim)
	cases := []struct {
		name        string
		from        ovirtsdk.VmStatus
		ignoresACPI bool
		want        []ovirtsdk.VmStatus // statuses after the shutdown, until the last one
	}{
		{"from up it is graceful", ovirtsdk.VMSTATUS_UP, false,
			[]ovirtsdk.VmStatus{ovirtsdk.VMSTATUS_POWERING_DOWN, ovirtsdk.VMSTATUS_DOWN}},
		{"from wait_for_launch it is a hard stop", ovirtsdk.VMSTATUS_WAIT_FOR_LAUNCH, false,
			[]ovirtsdk.VmStatus{ovirtsdk.VMSTATUS_DOWN}},
		{"from powering_up it is a hard stop", ovirtsdk.VMSTATUS_POWERING_UP, false,
			[]ovirtsdk.VmStatus{ovirtsdk.VMSTATUS_DOWN}},
		{"a guest that ignores ACPI comes back up", ovirtsdk.VMSTATUS_UP, true,
			[]ovirtsdk.VmStatus{ovirtsdk.VMSTATUS_POWERING_DOWN, ovirtsdk.VMSTATUS_UP}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			id := createVM(t, conn, "sd"+string(rune('a'+i)), false)
			vms := conn.SystemService().VmsService().VmService(id)
			if tc.ignoresACPI {
				st, body := admin(t, sim, "PUT", "/sim/vms/"+id+"/ignores-acpi", `{"enabled":true}`)
				g.Expect(st).To(Equal(200), body)
			}
			_, err := vms.Start().Send()
			g.Expect(err).NotTo(HaveOccurred())
			statusesUntil(t, conn, id, tc.from)
			_, err = vms.Shutdown().Send()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(statusesUntil(t, conn, id, tc.want[len(tc.want)-1])).To(Equal(tc.want))
			if tc.ignoresACPI {
				st, _ := sim.VM(id)
				g.Expect(st.IPs).NotTo(BeEmpty(), "the guest agent kept running")
				_, err = vms.Stop().Send()
				g.Expect(err).NotTo(HaveOccurred(), "stop always works")
				g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_DOWN))
			}
		})
	}
	t.Run("unknown VM", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(sim.SetVMIgnoresACPI("nope", true)).To(MatchError(ovirtsim.ErrNotFound))
		st, _ := admin(t, sim, "PUT", "/sim/vms/nope/ignores-acpi", `{"enabled":true}`)
		g.Expect(st).To(Equal(404))
	})
}

func TestRemoveRunningVMRefused(t *testing.T) {
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "running", true)
	vms := conn.SystemService().VmsService().VmService(id)
	_, err := vms.Start().Send()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		req  *ovirtsdk.VmServiceRemoveRequest
	}{
		{"plain", vms.Remove()},
		{"force=true", vms.Remove().Force(true)},
		{"detach_only=true", vms.Remove().DetachOnly(true)},
		{"force and detach_only", vms.Remove().Force(true).DetachOnly(true)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := tc.req.Send()
			ce, ok := errAs[*ovirtsdk.ConflictError](err)
			g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
			g.Expect(ce.Error()).To(ContainSubstring("[Cannot remove VM. VM is running.]"))
		})
	}
	g := NewWithT(t)
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_UP))
}

func TestRemoveDetachOnly(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)

	thin := createVM(t, conn, "thin", false)
	_, err := conn.SystemService().VmsService().VmService(thin).Remove().DetachOnly(true).Send()
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot remove VM. The VM is based on a template: its disks cannot be detached.]")))
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "400"`)))
	_, found := sim.VMByName("thin")
	g.Expect(found).To(BeTrue())

	cloned := createVM(t, conn, "cloned", true)
	free := sim.StorageDomainFreeGB("data")
	_, err = conn.SystemService().VmsService().VmService(cloned).Remove().DetachOnly(true).Send()
	g.Expect(err).NotTo(HaveOccurred(), "a clone is based on Blank")
	fl := sim.Dump().FloatingDisks
	g.Expect(fl).To(HaveLen(1))
	g.Expect(fl[0].Alias).To(Equal("rhcos-4.14_Disk1"))
	g.Expect(sim.StorageDomainFreeGB("data")).To(Equal(free), "floating disks keep their space")

	_, err = conn.SystemService().VmsService().VmService(thin).Remove().DetachOnly(false).Send()
	g.Expect(err).NotTo(HaveOccurred())
}

func TestRemoveForce(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{DiskLock: time.Hour}) })
	conn := connect(t, sim)

	// A new disk is locked while it is created: force=true skips that check.
	id := createVM(t, conn, "newdisk", true)
	vms := conn.SystemService().VmsService().VmService(id)
	_, err := vms.DiskAttachmentsService().Add().Attachment(ovirtsdk.NewDiskAttachmentBuilder().Active(true).
		DiskBuilder(ovirtsdk.NewDiskBuilder().Alias("extra").ProvisionedSize(1 << 30).Format(ovirtsdk.DISKFORMAT_COW).
			StorageDomainsOfAny(ovirtsdk.NewStorageDomainBuilder().Name("data").MustBuild())).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = vms.Remove().Send()
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot remove VM. Disk is locked. Please try again later.]")))
	_, err = vms.Remove().Force(true).Send()
	g.Expect(err).NotTo(HaveOccurred())

	// An update in progress holds the VM's lock: force does not help.
	id = createVM(t, conn, "resizing", true)
	vms = conn.SystemService().VmsService().VmService(id)
	g.Expect(resize(conn, id, firstDiskID(t, conn, id), 30<<30)).To(Succeed())
	for _, force := range []bool{false, true} {
		_, err = vms.Remove().Force(force).Send()
		ce, ok := errAs[*ovirtsdk.ConflictError](err)
		g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
		g.Expect(ce.Error()).To(ContainSubstring("[Cannot remove VM. Related operation is currently in progress. Please try again later.]"))
	}
}
