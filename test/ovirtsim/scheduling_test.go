package ovirtsim_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// withPair adds the cluster "Pair" (data center Default) with two hosts,
// pair-a and pair-b.
func withPair(b *ovirtsim.Builder) {
	b.WithCluster(ovirtsim.Cluster{Name: "Pair", Hosts: []ovirtsim.Host{{Name: "pair-a"}, {Name: "pair-b"}}})
}

// createVMIn creates a VM from rhcos-4.14 (8 GiB) in a cluster.
func createVMIn(t testing.TB, conn *ovirtsdk.Connection, name, cluster string, ha bool) string {
	t.Helper()
	b := vmBuilder(name, "rhcos-4.14", cluster)
	if ha {
		b.HighAvailabilityBuilder(ovirtsdk.NewHighAvailabilityBuilder().Enabled(true).Priority(50))
	}
	r, err := conn.SystemService().VmsService().Add().Vm(b.MustBuild()).Send()
	if err != nil {
		t.Fatalf("creating VM %s: %v", name, err)
	}
	return r.MustVm().MustId()
}

func startVM(conn *ovirtsdk.Connection, id string) error {
	_, err := conn.SystemService().VmsService().VmService(id).Start().Send()
	return err
}

// addGroup creates an affinity group with a VM rule and returns its id.
func addGroup(t testing.TB, conn *ovirtsdk.Connection, clusterID, name string, positive, enforcing bool, vmIDs ...string) string {
	t.Helper()
	b := ovirtsdk.NewAffinityGroupBuilder().Name(name).
		VmsRuleBuilder(ovirtsdk.NewAffinityRuleBuilder().Enabled(true).Positive(positive).Enforcing(enforcing))
	for _, id := range vmIDs {
		b.VmsOfAny(ovirtsdk.NewVmBuilder().Id(id).MustBuild())
	}
	r, err := conn.SystemService().ClustersService().ClusterService(clusterID).AffinityGroupsService().Add().Group(b.MustBuild()).Send()
	if err != nil {
		t.Fatalf("adding affinity group %s: %v", name, err)
	}
	return r.MustGroup().MustId()
}

func vmHostOf(t testing.TB, sim *ovirtsim.Simulator, id string) string {
	t.Helper()
	h, ok := sim.VMHost(id)
	if !ok {
		t.Fatalf("VM %s runs nowhere", id)
	}
	return h
}

// faultLines splits a scheduling fault detail "[a, b, c]" into its messages.
func faultLines(t testing.TB, err error) []string {
	t.Helper()
	m := regexp.MustCompile(`Fault detail is "\[(.*)\]"`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("no fault detail in %v", err)
	}
	return strings.Split(m[1], ", ")
}

func TestHostsLikeTheEngine(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithCluster(ovirtsim.Cluster{Name: "Edge", DataCenter: "Remote"}) })
	conn := connect(t, sim)

	r, err := conn.SystemService().HostsService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, h := range r.MustHosts().Slice() {
		names = append(names, h.MustName())
	}
	g.Expect(names).To(Equal([]string{"edge-host1", "edge-host2", "edge-host3", "host1", "host2", "host3", "host4", "host5"}),
		"the demo seed's hosts, and three default hosts for a cluster without any")

	r, err = conn.SystemService().HostsService().List().Search(`cluster=Default`).Send()
	g.Expect(err).NotTo(HaveOccurred())
	hs := r.MustHosts().Slice()
	g.Expect(hs).To(HaveLen(3))
	h := hs[0]
	g.Expect(h.MustName()).To(Equal("host1"))
	g.Expect(h.MustStatus()).To(Equal(ovirtsdk.HOSTSTATUS_UP))
	g.Expect(h.MustCluster().MustId()).To(Equal(clusterID(t, conn, "Default")))
	g.Expect(h.MustMemory()).To(Equal(int64(2048) << 30))
	g.Expect(h.MustMaxSchedulingMemory()).To(Equal(int64(2048) << 30))
	g.Expect(h.MustHref()).To(Equal("/ovirt-engine/api/hosts/" + h.MustId()))
	g.Expect(h.MustCluster().MustHref()).To(HavePrefix("/ovirt-engine/api/clusters/"))
	g.Expect(h.MustSummary().MustTotal()).To(BeZero())
	nics, _ := h.MustNics().Href()
	g.Expect(nics).To(Equal("/ovirt-engine/api/hosts/"+h.MustId()+"/nics"), "links as the engine's")

	one, err := conn.SystemService().HostsService().HostService(h.MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(one.MustHost().MustName()).To(Equal("host1"))
	_, err = conn.SystemService().HostsService().HostService("nope").Get().Send()
	_, ok := errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue(), "got %v", err)

	api, err := conn.SystemService().Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.MustApi().MustSummary().MustHosts().MustTotal()).To(Equal(int64(8)))
	g.Expect(api.MustApi().MustSummary().MustHosts().MustActive()).To(Equal(int64(8)))

	// The Go API and /sim.
	id, err := sim.AddHost("Default", "host9", 64<<30)
	g.Expect(err).NotTo(HaveOccurred())
	st, found := sim.Host("host9")
	g.Expect(found).To(BeTrue())
	g.Expect(st).To(And(HaveField("ID", id), HaveField("Cluster", "Default"), HaveField("Status", "up"),
		HaveField("MemoryBytes", int64(64)<<30)))
	_, err = sim.AddHost("Default", "host9", 0)
	g.Expect(err).To(MatchError(ovirtsim.ErrConflict))
	_, err = sim.AddHost("Nowhere", "host10", 0)
	g.Expect(err).To(MatchError(ovirtsim.ErrNotFound))
	code, body := admin(t, sim, "POST", "/sim/hosts", `{"cluster": "Edge", "name": "edge-host4", "memory_gb": 512}`)
	g.Expect(code).To(Equal(201), body)
	code, body = admin(t, sim, "PUT", "/sim/hosts/edge-host4/status", `{"status": "maintenance"}`)
	g.Expect(code).To(Equal(200), body)
	g.Expect(body).To(ContainSubstring(`"status":"maintenance"`))
	code, _ = admin(t, sim, "PUT", "/sim/hosts/edge-host4/status", `{"status": "sleepy"}`)
	g.Expect(code).To(Equal(400))
	code, _ = admin(t, sim, "PUT", "/sim/hosts/nope/status", `{"status": "up"}`)
	g.Expect(code).To(Equal(404))
	code, body = admin(t, sim, "GET", "/sim/hosts", "")
	g.Expect(code).To(Equal(200))
	g.Expect(body).To(ContainSubstring(`"name":"edge-host4"`))
	g.Expect(sim.Dump().Hosts).To(HaveLen(10))

	sim.Reset()
	_, found = sim.Host("host9")
	g.Expect(found).To(BeFalse(), "Reset drops hosts added at run time")
	st, _ = sim.Host("edge-host1")
	g.Expect(st.Status).To(Equal("up"))
}

func TestVMRepresentationCarriesItsHostWhileRunning(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithTimings(ovirtsim.Timings{WaitForLaunch: time.Second, PoweringDown: time.Second})
	})
	conn := connect(t, sim)
	id := createVM(t, conn, "placed", false)
	_, has := getVM(t, conn, id, "").Host()
	g.Expect(has).To(BeFalse(), "a down VM has no host")
	_, running := sim.VMHost(id)
	g.Expect(running).To(BeFalse())

	g.Expect(startVM(conn, id)).To(Succeed())
	v := getVM(t, conn, id, "")
	g.Expect(v.MustStatus()).To(BeElementOf(ovirtsdk.VMSTATUS_WAIT_FOR_LAUNCH, ovirtsdk.VMSTATUS_POWERING_UP, ovirtsdk.VMSTATUS_UP))
	h := v.MustHost()
	g.Expect(h.MustHref()).To(Equal("/ovirt-engine/api/hosts/" + h.MustId()))
	_, named := h.Name()
	g.Expect(named).To(BeFalse(), "without follow the host is a reference")
	name := vmHostOf(t, sim, id)
	g.Expect(name).To(Equal("host1"), "the emptiest host, then the name")
	st, _ := sim.VM(id)
	g.Expect(st.Host).To(Equal(name))

	followed := getVM(t, conn, id, "host")
	g.Expect(followed.MustHost().MustName()).To(Equal(name), "follow=host embeds the host")
	g.Expect(followed.MustHost().MustSummary().MustActive()).To(Equal(int64(1)))
	hostState, _ := sim.Host(name)
	g.Expect(hostState.VMs).To(Equal([]string{"placed"}))
	g.Expect(hostState.FreeMemoryBytes).To(Equal(int64(2048)<<30 - 8192<<20))

	r, err := conn.SystemService().VmsService().List().Search("host=" + name).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustVms().Slice()).To(HaveLen(1), "VMs can be searched by the host they run on")

	g.Eventually(func() ovirtsdk.VmStatus { return vmStatus(t, conn, id) }).WithTimeout(10 * time.Second).Should(Equal(ovirtsdk.VMSTATUS_UP))
	_, err = conn.SystemService().VmsService().VmService(id).Shutdown().Send()
	g.Expect(err).NotTo(HaveOccurred())
	v = getVM(t, conn, id, "")
	if v.MustStatus() == ovirtsdk.VMSTATUS_POWERING_DOWN {
		_, has = v.Host()
		g.Expect(has).To(BeTrue(), "still on its host while powering down")
	}
	g.Eventually(func() bool { _, has := getVM(t, conn, id, "").Host(); return has }).WithTimeout(10 * time.Second).Should(BeFalse())
	hostState, _ = sim.Host(name)
	g.Expect(hostState.VMs).To(BeEmpty())
}

func TestNegativeEnforcingGroupSpreadsVMsOverHosts(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	var ids []string
	for _, n := range []string{"cp-0", "cp-1", "cp-2", "cp-3"} {
		ids = append(ids, createVMIn(t, conn, n, "Default", false))
	}
	addGroup(t, conn, clusterID(t, conn, "Default"), "control-plane", false, true, ids...)

	seen := map[string]bool{}
	for _, id := range ids[:3] {
		g.Expect(startVM(conn, id)).To(Succeed())
		seen[vmHostOf(t, sim, id)] = true
	}
	g.Expect(seen).To(HaveLen(3), "three VMs of a negative enforcing group on three hosts")

	err := startVM(conn, ids[3])
	_, ok := errAs[*ovirtsdk.ConflictError](err)
	g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
	lines := faultLines(t, err)
	g.Expect(lines).To(HaveLen(4))
	g.Expect(lines[0]).To(Equal("Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:"))
	// One line per filtered host; the engine's translator keeps the first value of each
	// variable, so every line names the first host of its HashMap.
	g.Expect(lines[1]).To(MatchRegexp(`^The host host[123] did not satisfy internal filter VmAffinityGroups because it matched negative affinity rules \.$`))
	g.Expect(lines[2:]).To(HaveEach(lines[1]))
	g.Expect(vmStatus(t, conn, ids[3])).To(Equal(ovirtsdk.VMSTATUS_DOWN))

	// Stopping one member frees its host for the fourth.
	_, err = conn.SystemService().VmsService().VmService(ids[0]).Stop().Send()
	g.Expect(err).NotTo(HaveOccurred())
	freed := ""
	for h := range seen {
		if st, _ := sim.Host(h); len(st.VMs) == 0 {
			freed = h
		}
	}
	g.Expect(startVM(conn, ids[3])).To(Succeed())
	g.Expect(vmHostOf(t, sim, ids[3])).To(Equal(freed))
}

func TestSoftAndHardGroupsOnTwoHosts(t *testing.T) {
	t.Parallel()
	sim := startSim(t, withPair)
	conn := connect(t, sim)
	pair := clusterID(t, conn, "Pair")

	t.Run("a soft negative group still starts the third VM", func(t *testing.T) {
		g := NewWithT(t)
		var ids []string
		for _, n := range []string{"soft-0", "soft-1", "soft-2"} {
			ids = append(ids, createVMIn(t, conn, n, "Pair", false))
		}
		addGroup(t, conn, pair, "soft", false, false, ids...)
		for _, id := range ids {
			g.Expect(startVM(conn, id)).To(Succeed())
		}
		g.Expect(vmHostOf(t, sim, ids[0])).NotTo(Equal(vmHostOf(t, sim, ids[1])), "the preference spreads the first two")
		g.Expect(sim.AffinityGroups("Pair")[0].Broken).To(BeTrue(), "three running VMs on two hosts break the rule")
		for _, id := range ids {
			_, err := conn.SystemService().VmsService().VmService(id).Stop().Send()
			g.Expect(err).NotTo(HaveOccurred())
		}
	})

	t.Run("a hard negative group refuses the third start", func(t *testing.T) {
		g := NewWithT(t)
		var ids []string
		for _, n := range []string{"hard-0", "hard-1", "hard-2"} {
			ids = append(ids, createVMIn(t, conn, n, "Pair", false))
		}
		addGroup(t, conn, pair, "hard", false, true, ids...)
		g.Expect(startVM(conn, ids[0])).To(Succeed())
		g.Expect(startVM(conn, ids[1])).To(Succeed())
		err := startVM(conn, ids[2])
		ce, ok := errAs[*ovirtsdk.ConflictError](err)
		g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
		g.Expect(ce.Code).To(Equal(409))
		g.Expect(err).To(MatchError(MatchRegexp(`Fault reason is "Operation Failed"\. Fault detail is "\[Cannot run VM\. There is no host that satisfies current scheduling constraints\. See below for details:, ` +
			`The host (pair-a|pair-b) did not satisfy internal filter VmAffinityGroups because it matched negative affinity rules \., ` +
			`The host (pair-a|pair-b) did not satisfy internal filter VmAffinityGroups because it matched negative affinity rules \.\]"\. HTTP response code is "409"`)))
		lines := faultLines(t, err)
		g.Expect(lines[1]).To(Equal(lines[2]))
		g.Expect(sim.AffinityGroups("Pair")[1].Broken).To(BeFalse())
		for _, id := range ids[:2] {
			_, err := conn.SystemService().VmsService().VmService(id).Stop().Send()
			g.Expect(err).NotTo(HaveOccurred())
		}
	})

	t.Run("a positive enforcing group keeps VMs together", func(t *testing.T) {
		g := NewWithT(t)
		a := createVMIn(t, conn, "pos-0", "Pair", false)
		b := createVMIn(t, conn, "pos-1", "Pair", false)
		other := createVMIn(t, conn, "pos-other", "Pair", false)
		g.Expect(startVM(conn, other)).To(Succeed()) // pair-a
		g.Expect(startVM(conn, a)).To(Succeed())     // pair-b, the emptier one
		addGroup(t, conn, pair, "together", true, true, a, b)
		g.Expect(startVM(conn, b)).To(Succeed())
		g.Expect(vmHostOf(t, sim, b)).To(Equal(vmHostOf(t, sim, a)))
		g.Expect(sim.SetHostStatus(vmHostOf(t, sim, a), "maintenance")).To(MatchError(ovirtsim.ErrConflict),
			"the enforcing positive group does not let one VM migrate without the other")
	})
}

func TestMemoryFilterAndNoHosts(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithCluster(ovirtsim.Cluster{Name: "Tiny", Hosts: []ovirtsim.Host{{Name: "tiny", MemoryGB: 12}}})
		b.WithCluster(ovirtsim.Cluster{Name: "Empty", NoHosts: true})
	})
	conn := connect(t, sim)
	a := createVMIn(t, conn, "mem-0", "Tiny", false)
	b := createVMIn(t, conn, "mem-1", "Tiny", false)
	g.Expect(startVM(conn, a)).To(Succeed())
	err := startVM(conn, b)
	_, ok := errAs[*ovirtsdk.ConflictError](err)
	g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
	g.Expect(faultLines(t, err)).To(Equal([]string{
		"Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:",
		"The host tiny did not satisfy internal filter Memory because its available memory is too low (4096 MB) to run the VM.",
	}))

	e := createVMIn(t, conn, "homeless", "Empty", false)
	err = startVM(conn, e)
	g.Expect(err).To(MatchError(ContainSubstring(`Fault detail is "[There are no hosts to use. Check that the cluster contains at least one host in Up state.]". HTTP response code is "400"`)))
	_, isConflict := errAs[*ovirtsdk.ConflictError](err)
	g.Expect(isConflict).To(BeFalse(), "SCHEDULING_NO_HOSTS has no error type: 400")
	_, err = sim.AddHost("Empty", "late", 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmStatus(t, conn, e)).To(Equal(ovirtsdk.VMSTATUS_DOWN), "a new host starts nothing by itself")
	g.Expect(startVM(conn, e)).To(Succeed())
	g.Expect(vmHostOf(t, sim, e)).To(Equal("late"))
}

func TestHostFailureRestartsHighlyAvailableVMs(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, withPair)
	conn := connect(t, sim)
	ha := createVMIn(t, conn, "ha", "Pair", true)
	plain := createVMIn(t, conn, "plain", "Pair", false)
	v := getVM(t, conn, ha, "")
	g.Expect(v.MustHighAvailability().MustEnabled()).To(BeTrue())
	g.Expect(v.MustHighAvailability().MustPriority()).To(Equal(int64(50)))
	g.Expect(getVM(t, conn, plain, "").MustHighAvailability().MustEnabled()).To(BeFalse())

	// Both on pair-a: keep pair-b out of the way while they start.
	g.Expect(sim.SetHostStatus("pair-b", "maintenance")).To(Succeed())
	g.Expect(startVM(conn, ha)).To(Succeed())
	g.Expect(startVM(conn, plain)).To(Succeed())
	g.Expect(sim.SetHostUp("pair-b", true)).To(Succeed())
	g.Expect(vmHostOf(t, sim, plain)).To(Equal("pair-a"))

	g.Expect(sim.SetHostUp("pair-a", false)).To(Succeed())
	st, _ := sim.Host("pair-a")
	g.Expect(st.Status).To(Equal("non_responsive"))
	g.Expect(vmStatus(t, conn, plain)).To(Equal(ovirtsdk.VMSTATUS_DOWN), "a VM that is not highly available goes down with its host")
	_, has := getVM(t, conn, plain, "").Host()
	g.Expect(has).To(BeFalse())
	g.Expect(vmStatus(t, conn, ha)).To(Equal(ovirtsdk.VMSTATUS_UP), "restarted (zero timings: up at once)")
	g.Expect(vmHostOf(t, sim, ha)).To(Equal("pair-b"))

	// The other host fails too: nothing fits, the HA VM stays down; a host coming back runs nothing.
	code, body := admin(t, sim, "PUT", "/sim/hosts/pair-b/status", `{"status": "down"}`)
	g.Expect(code).To(Equal(200), body)
	g.Expect(vmStatus(t, conn, ha)).To(Equal(ovirtsdk.VMSTATUS_DOWN))
	g.Expect(sim.SetHostUp("pair-a", true)).To(Succeed())
	g.Expect(vmStatus(t, conn, ha)).To(Equal(ovirtsdk.VMSTATUS_DOWN))

	// HA can be switched on later, as on the engine.
	_, err := conn.SystemService().VmsService().VmService(plain).Update().
		Vm(ovirtsdk.NewVmBuilder().HighAvailabilityBuilder(ovirtsdk.NewHighAvailabilityBuilder().Enabled(true)).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	st2, _ := sim.VM(plain)
	g.Expect(st2.HighlyAvailable).To(BeTrue())
}

func TestMaintenanceMigratesVMs(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "mover", false)
	g.Expect(startVM(conn, id)).To(Succeed())
	from := vmHostOf(t, sim, id)
	g.Expect(sim.SetHostStatus(from, "maintenance")).To(Succeed())
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_UP), "migrated, still up")
	g.Expect(vmHostOf(t, sim, id)).NotTo(Equal(from))
	g.Expect(startVM(conn, createVM(t, conn, "newcomer", false))).To(Succeed())
	st, _ := sim.Host(from)
	g.Expect(st.VMs).To(BeEmpty(), "a host in maintenance takes no VMs")
}
