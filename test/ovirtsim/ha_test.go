package ovirtsim_test

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func lease(sdID string) *ovirtsdk.StorageDomainLeaseBuilder {
	return ovirtsdk.NewStorageDomainLeaseBuilder().StorageDomainBuilder(ovirtsdk.NewStorageDomainBuilder().Id(sdID))
}

func haOn(b *ovirtsdk.VmBuilder) *ovirtsdk.VmBuilder {
	return b.HighAvailabilityBuilder(ovirtsdk.NewHighAvailabilityBuilder().Enabled(true).Priority(1))
}

func TestVMLeaseIsValidatedLikeTheEngine(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithStorageDomain(ovirtsim.StorageDomain{Name: "isos", Type: "iso", FreeGB: 10}).
			WithStorageDomain(ovirtsim.StorageDomain{Name: "remote", DataCenter: "Remote", FreeGB: 10})
	})
	conn := connect(t, sim)
	data, fast := sdID(t, conn, "data"), sdID(t, conn, "fast")
	g.Expect(sim.SetStorageDomainStatus("fast", "preparing_for_maintenance")).To(Succeed())

	cases := []struct {
		name, code, detail string
		edit               func(*ovirtsdk.VmBuilder)
	}{
		{"noha", "409", "[Cannot add VM. A VM lease was defined but high availability option is set to false.]",
			func(b *ovirtsdk.VmBuilder) { b.LeaseBuilder(lease(data)) }},
		{"unknown", "400", "[Cannot add VM. Storage Domain doesn't exist.]",
			func(b *ovirtsdk.VmBuilder) { haOn(b).LeaseBuilder(lease("00000000-0000-0000-0000-00000000beef")) }},
		{"otherdc", "400", "[Cannot add VM. Storage Domain doesn't exist.]",
			func(b *ovirtsdk.VmBuilder) { haOn(b).LeaseBuilder(lease(sdID(t, conn, "remote"))) }},
		{"inactive", "409", "[Cannot add VM. The relevant Storage Domain's status is PreparingForMaintenance.]",
			func(b *ovirtsdk.VmBuilder) { haOn(b).LeaseBuilder(lease(fast)) }},
		{"iso", "400", "[Cannot add VM. Action is only applicable for Data domains.]",
			func(b *ovirtsdk.VmBuilder) { haOn(b).LeaseBuilder(lease(sdID(t, conn, "isos"))) }},
		{"resume", "400", "'pause' is not a valid value for VmStorageErrorResumeBehaviour",
			func(b *ovirtsdk.VmBuilder) { b.StorageErrorResumeBehaviour("pause") }},
	}
	for _, c := range cases {
		_, err := addVMWith(conn, "bad-"+c.name, c.edit)
		g.Expect(err).To(HaveOccurred(), c.name)
		g.Expect(err.Error()).To(ContainSubstring(`HTTP response code is "`+c.code+`"`), c.name)
		g.Expect(err.Error()).To(ContainSubstring(c.detail), c.name)
	}

	// HA with a lease: the resume behaviour is kill, whatever was asked
	// (VmHandler.autoSelectResumeBehavior); without a lease it is kept.
	v, err := addVMWith(conn, "leased", func(b *ovirtsdk.VmBuilder) {
		haOn(b).LeaseBuilder(lease(data)).StorageErrorResumeBehaviour(ovirtsdk.VMSTORAGEERRORRESUMEBEHAVIOUR_LEAVE_PAUSED)
	})
	g.Expect(err).NotTo(HaveOccurred())
	got := getVM(t, conn, v.MustId(), "")
	g.Expect(got.MustLease().MustStorageDomain().MustId()).To(Equal(data))
	g.Expect(got.MustStorageErrorResumeBehaviour()).To(Equal(ovirtsdk.VMSTORAGEERRORRESUMEBEHAVIOUR_KILL))
	st, _ := sim.VM(v.MustId())
	g.Expect(st.Lease).To(Equal("data"))
	g.Expect(st.StorageErrorResumeBehaviour).To(Equal("kill"))
	p, err := addVMWith(conn, "paused", func(b *ovirtsdk.VmBuilder) {
		haOn(b).StorageErrorResumeBehaviour(ovirtsdk.VMSTORAGEERRORRESUMEBEHAVIOUR_LEAVE_PAUSED)
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.MustStorageErrorResumeBehaviour()).To(Equal(ovirtsdk.VMSTORAGEERRORRESUMEBEHAVIOUR_LEAVE_PAUSED))
	_, hasLease := p.Lease()
	g.Expect(hasLease).To(BeFalse())
	// A lease naming its domain without an id is no lease (StorageDomainLeaseMapper maps the id).
	n, err := addVMWith(conn, "byname", func(b *ovirtsdk.VmBuilder) {
		haOn(b).LeaseBuilder(ovirtsdk.NewStorageDomainLeaseBuilder().StorageDomainBuilder(ovirtsdk.NewStorageDomainBuilder().Name("data")))
	})
	g.Expect(err).NotTo(HaveOccurred())
	_, hasLease = n.Lease()
	g.Expect(hasLease).To(BeFalse())
}

func TestVMLeaseUpdatesAndStart(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	data, fast := sdID(t, conn, "data"), sdID(t, conn, "fast")
	v, err := addVMWith(conn, "ha", func(b *ovirtsdk.VmBuilder) { haOn(b) })
	g.Expect(err).NotTo(HaveOccurred())
	id := v.MustId()
	vs := conn.SystemService().VmsService().VmService(id)
	update := func(b *ovirtsdk.VmBuilder) error {
		_, err := vs.Update().Vm(b.MustBuild()).Send()
		return err
	}
	g.Expect(startVM(conn, id)).To(Succeed())
	// A lease hot plugged to a running VM, but not swapped for another.
	g.Expect(update(ovirtsdk.NewVmBuilder().LeaseBuilder(lease(data)))).To(Succeed())
	g.Expect(update(ovirtsdk.NewVmBuilder().LeaseBuilder(lease(fast)))).To(MatchError(ContainSubstring(
		"[Cannot edit VM. Hot swapping of VM leases is not supported, please remove the current lease and then set a new one.]")))
	// HA off with the same lease: not checked again (shouldAddLease is only for a new lease).
	g.Expect(update(ovirtsdk.NewVmBuilder().HighAvailabilityBuilder(ovirtsdk.NewHighAvailabilityBuilder().Enabled(false)))).To(Succeed())
	st, _ := sim.VM(id)
	g.Expect(st.Lease).To(Equal("data"))
	g.Expect(st.HighlyAvailable).To(BeFalse())
	// <lease/> removes it.
	g.Expect(update(ovirtsdk.NewVmBuilder().LeaseBuilder(ovirtsdk.NewStorageDomainLeaseBuilder()))).To(Succeed())
	st, _ = sim.VM(id)
	g.Expect(st.Lease).To(BeEmpty())

	// A lease on a domain that is no longer active: VmLeasesReadyFilterPolicyUnit refuses every host.
	w, err := addVMWith(conn, "leased", func(b *ovirtsdk.VmBuilder) { haOn(b).LeaseBuilder(lease(fast)) })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.SetStorageDomainStatus("fast", "maintenance")).To(Succeed())
	err = startVM(conn, w.MustId())
	g.Expect(err).To(MatchError(ContainSubstring("did not satisfy internal filter VM leases ready because VM lease is not ready yet.")))
	_, conflict := errAs[*ovirtsdk.ConflictError](err)
	g.Expect(conflict).To(BeTrue())
}

func TestStopAndShutdownThroughTheAPIAreNeverRestartedByHA(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	stopped := createVMIn(t, conn, "stopped", "Default", true)
	shut := createVMIn(t, conn, "shut", "Default", true)
	inside := createVMIn(t, conn, "inside", "Default", true)
	for _, id := range []string{stopped, shut, inside} {
		g.Expect(startVM(conn, id)).To(Succeed())
	}
	vms := conn.SystemService().VmsService()
	_, err := vms.VmService(stopped).Stop().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = vms.VmService(shut).Shutdown().Send()
	g.Expect(err).NotTo(HaveOccurred())
	// A shutdown from inside the guest counts as a user's (ExitStatus.Normal, UserShutdown).
	g.Expect(sim.ShutdownVMFromGuest(inside)).To(Succeed())

	time.Sleep(10 * time.Millisecond)
	for id, reason := range map[string]string{stopped: "AdminShutdown", shut: "AdminShutdown", inside: "UserShutdown"} {
		st, _ := sim.VM(id)
		g.Expect(st.Status).To(Equal("down"), st.Name)
		g.Expect(st.ExitStatus).To(Equal("normal"), st.Name)
		g.Expect(st.ExitReason).To(Equal(reason), st.Name)
	}
	// Not even a host failure brings them back: they are down, not the failed host's.
	for _, h := range []string{"host1", "host2", "host3"} {
		g.Expect(sim.SetHostStatus(h, "non_responsive")).To(Succeed())
		g.Expect(sim.SetHostStatus(h, "up")).To(Succeed())
	}
	for _, id := range []string{stopped, shut, inside} {
		st, _ := sim.VM(id)
		g.Expect(st.Status).To(Equal("down"), st.Name)
	}
	g.Expect(sim.ShutdownVMFromGuest(inside)).To(MatchError(ovirtsim.ErrConflict))
}

func TestACrashRestartsAnHAVMAndLeavesOthersDown(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	ha := createVMIn(t, conn, "ha", "Default", true)
	plain := createVMIn(t, conn, "plain", "Default", false)
	for _, id := range []string{ha, plain} {
		g.Expect(startVM(conn, id)).To(Succeed())
	}

	g.Expect(sim.CrashVM(plain)).To(Succeed())
	st, _ := sim.VM(plain)
	g.Expect(st.Status).To(Equal("down"))
	g.Expect(st.ExitStatus).To(Equal("error"))
	g.Expect(st.ExitReason).To(Equal("LostQEMUConnection"))

	// HaAutoStartVmsRunner starts it again through RunVm, the same host allowed.
	code, body := admin(t, sim, "POST", "/sim/vms/"+ha+"/crash", "")
	g.Expect(code).To(Equal(200), body)
	g.Expect(body).To(ContainSubstring(`"status":"up"`))
	st, _ = sim.VM(ha)
	g.Expect(st.Status).To(Equal("up"))
	g.Expect(st.Host).NotTo(BeEmpty())
	g.Expect(st.ExitStatus).To(BeEmpty()) // running again

	// The same through GuestExited: a real guest that crashed, and one that powered itself off.
	g.Expect(startVM(conn, plain)).To(Succeed())
	sim.GuestExited(ha, 0, errors.New("qemu: killed"))
	sim.GuestExited(plain, 0, nil)
	st, _ = sim.VM(ha)
	g.Expect(st.Status).To(Equal("up"))
	st, _ = sim.VM(plain)
	g.Expect(st.Status).To(Equal("down"))
	g.Expect(st.ExitReason).To(Equal("UserShutdown"))

	code, _ = admin(t, sim, "POST", "/sim/vms/"+plain+"/crash", "")
	g.Expect(code).To(Equal(409))
	code, _ = admin(t, sim, "POST", "/sim/vms/nope/guest-shutdown", "")
	g.Expect(code).To(Equal(404))
	g.Expect(sim.RequestCount("POST", "/vms/{id}/start")).To(Equal(3)) // restarts are the Engine's, not API calls
}

func TestACrashWhileStartingIsRerunOnAnotherHost(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{WaitForLaunch: time.Hour}) })
	conn := connect(t, sim)
	id := createVMIn(t, conn, "starting", "Default", false) // HA or not: a rerun is RunVm's
	g.Expect(startVM(conn, id)).To(Succeed())
	seen := map[string]bool{vmHostOf(t, sim, id): true}
	for range 2 {
		g.Expect(sim.CrashVM(id)).To(Succeed())
		h := vmHostOf(t, sim, id)
		g.Expect(seen).NotTo(HaveKey(h))
		seen[h] = true
	}
	// Three hosts tried (MaxRerunVmOnVdsCount): the run fails, the VM stays down.
	g.Expect(sim.CrashVM(id)).To(Succeed())
	st, _ := sim.VM(id)
	g.Expect(st.Status).To(Equal("down"))
	g.Expect(st.ExitStatus).To(Equal("error"))
	// A new start may use any host again.
	g.Expect(startVM(conn, id)).To(Succeed())
}
