package ovirtsim_test

import (
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func boots(t testing.TB, sim *ovirtsim.Simulator, id string) int {
	t.Helper()
	g, err := sim.Guest(id)
	if err != nil {
		t.Fatal(err)
	}
	return g.Boots
}

func TestResetNeedsClusterLevel46AndARunningVM(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithCluster(ovirtsim.Cluster{Name: "Old", Version: "4.5", Hosts: []ovirtsim.Host{{Name: "old1"}}})
	})
	conn := connect(t, sim)
	old := createVMIn(t, conn, "old", "Old", false)
	g.Expect(startVM(conn, old)).To(Succeed())
	_, err := conn.SystemService().VmsService().VmService(old).Reset().Send()
	g.Expect(faultLines(t, err)).To(Equal([]string{"Cannot reset VM. Reset VM requires cluster compatibility version 4.6 or higher."}))
	g.Expect(err.Error()).To(ContainSubstring(`"400"`))
	cl := conn.SystemService().ClustersService().ClusterService(clusterID(t, conn, "Old")).Get().MustSend().MustCluster()
	g.Expect(cl.MustVersion().MustMinor()).To(BeEquivalentTo(5))

	id := createVM(t, conn, "new", false)
	_, err = conn.SystemService().VmsService().VmService(id).Reset().Send()
	g.Expect(faultLines(t, err)).To(Equal([]string{"Cannot reset VM because the VM is in Down status."}))
	_, conflict := errAs[*ovirtsdk.ConflictError](err)
	g.Expect(conflict).To(BeTrue())

	g.Expect(startVM(conn, id)).To(Succeed())
	host := vmHostOf(t, sim, id)
	before := boots(t, sim, id)
	_, err = conn.SystemService().VmsService().VmService(id).Reset().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(boots(t, sim, id)).To(Equal(before + 1))
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_UP))
	g.Expect(vmHostOf(t, sim, id)).To(Equal(host))
	g.Expect(sim.RequestCount("POST", "/vms/{id}/reset")).To(Equal(3))
}

func TestHungGuestIgnoresRebootAndShutdownButNotReset(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "hung", false)
	g.Expect(startVM(conn, id)).To(Succeed())
	g.Expect(boots(t, sim, id)).To(Equal(1))
	svc := conn.SystemService().VmsService().VmService(id)

	// A healthy guest reboots.
	_, err := svc.Reboot().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(boots(t, sim, id)).To(Equal(2))

	g.Expect(sim.SetGuestHung("hung", true)).To(Succeed())
	_, err = svc.Reboot().Send()
	g.Expect(err).NotTo(HaveOccurred()) // accepted...
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_UP))
	g.Expect(boots(t, sim, id)).To(Equal(2)) // ...but the guest did not restart
	_, err = svc.Shutdown().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_UP))

	_, err = svc.Reset().Send()
	g.Expect(err).NotTo(HaveOccurred())
	gs, err := sim.Guest(id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gs).To(Equal(ovirtsim.GuestState{Boots: 3, Hung: false}))

	// Stop works on a hung guest too.
	g.Expect(sim.SetGuestHung(id, true)).To(Succeed())
	_, err = svc.Stop().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_DOWN))

	// The admin endpoints.
	st, body := admin(t, sim, "PUT", "/sim/vms/"+id+"/guest-hung", `{"enabled": true}`)
	g.Expect(st).To(Equal(200), body)
	st, body = admin(t, sim, "GET", "/sim/vms/hung/guest", "")
	g.Expect(st).To(Equal(200))
	g.Expect(body).To(MatchJSON(`{"boots": 3, "hung": true}`))
	st, _ = admin(t, sim, "GET", "/sim/vms/nope/guest", "")
	g.Expect(st).To(Equal(404))
	g.Expect(sim.SetGuestHung("nope", true)).To(MatchError(ovirtsim.ErrNotFound))
}

func TestResetPermissions(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "r", false)
	g.Expect(startVM(conn, id)).To(Succeed())
	g.Expect(sim.AddUser(ovirtsim.User{Username: "owner@internal", Password: "pw",
		Grants: []ovirtsim.Grant{{Role: "UserVmManager", VM: "r"}}})).To(Succeed())
	g.Expect(sim.AddUser(ovirtsim.User{Username: "disks@internal", Password: "pw",
		Grants: []ovirtsim.Grant{{Role: "DiskOperator"}}})).To(Succeed())
	st, out := asUser(g, sim, "owner@internal", "pw", "POST", "/vms/"+id+"/reset", "<action/>")
	g.Expect(st).To(Equal(200), out)
	st, out = asUser(g, sim, "disks@internal", "pw", "POST", "/vms/"+id+"/reset", "<action/>")
	g.Expect(st).To(Equal(403), out)
}
