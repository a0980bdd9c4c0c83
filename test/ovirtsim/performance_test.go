package ovirtsim_test

import (
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func pin(vcpu int64, set string) *ovirtsdk.VcpuPin {
	return ovirtsdk.NewVcpuPinBuilder().Vcpu(vcpu).CpuSet(set).MustBuild()
}

func placement(affinity ovirtsdk.VmAffinity, hosts ...string) *ovirtsdk.VmPlacementPolicyBuilder {
	b := ovirtsdk.NewVmPlacementPolicyBuilder().Affinity(affinity)
	for _, h := range hosts {
		b.HostsOfAny(ovirtsdk.NewHostBuilder().Name(h).MustBuild())
	}
	return b
}

// rawVM answers GET /vms/{id} on the wire.
func rawVM(t testing.TB, sim *ovirtsim.Simulator, id string) string {
	t.Helper()
	req, err := newAuthedRequest(sim, "GET", "/vms/"+id, "")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpsClient(sim).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return readAll(resp)
}

func TestPerformanceSettingsAreStoredAndAnswered(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)

	v, err := addVMWith(conn, "tuned", func(b *ovirtsdk.VmBuilder) {
		b.Type(ovirtsdk.VMTYPE_HIGH_PERFORMANCE).
			CpuBuilder(ovirtsdk.NewCpuBuilder().Mode(ovirtsdk.CPUMODE_HOST_PASSTHROUGH).
				CpuTuneBuilder(ovirtsdk.NewCpuTuneBuilder().VcpuPinsOfAny(pin(0, "1"), pin(1, "2-3,^3")))).
			PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_MIGRATABLE, "host2")).
			IoBuilder(ovirtsdk.NewIoBuilder().Threads(4)).
			MultiQueuesEnabled(false).
			MemoryPolicyBuilder(ovirtsdk.NewMemoryPolicyBuilder().Ballooning(false))
	})
	// A pinned CPU on a migratable VM and host passthrough on a migratable VM are accepted:
	// the Engine refuses neither since 4.3 (CpuPinMigrationEnabled went, commit 4805c4b2382).
	g.Expect(err).NotTo(HaveOccurred())
	h2, _ := sim.Host("host2")
	for _, got := range []*ovirtsdk.Vm{v, getVM(t, conn, v.MustId(), "")} {
		g.Expect(got.MustCpu().MustMode()).To(Equal(ovirtsdk.CPUMODE_HOST_PASSTHROUGH))
		pins := got.MustCpu().MustCpuTune().MustVcpuPins().Slice()
		g.Expect(pins).To(HaveLen(2))
		g.Expect(pins[1].MustVcpu()).To(Equal(int64(1)))
		g.Expect(pins[1].MustCpuSet()).To(Equal("2-3,^3"))
		g.Expect(got.MustPlacementPolicy().MustAffinity()).To(Equal(ovirtsdk.VMAFFINITY_MIGRATABLE))
		g.Expect(got.MustPlacementPolicy().MustHosts().Slice()[0].MustId()).To(Equal(h2.ID))
		g.Expect(got.MustIo().MustThreads()).To(Equal(int64(4)))
		g.Expect(got.MustMultiQueuesEnabled()).To(BeFalse())
		g.Expect(got.MustMemoryPolicy().MustBallooning()).To(BeFalse())
		g.Expect(got.MustStorageErrorResumeBehaviour()).To(Equal(ovirtsdk.VMSTORAGEERRORRESUMEBEHAVIOUR_AUTO_RESUME))
	}
	st, _ := sim.VM(v.MustId())
	g.Expect(st.CPUMode).To(Equal("host_passthrough"))
	g.Expect(st.CPUPinning).To(Equal("0#1_1#2-3,^3"))
	g.Expect(st.CPUPinningPolicy).To(Equal("manual")) // updateCpuPinningFields
	g.Expect(st.PinnedHosts).To(Equal([]string{"host2"}))
	g.Expect(st.IOThreads).To(Equal(4))
	body := rawVM(t, sim, v.MustId())
	g.Expect(body).To(ContainSubstring("<auto_pinning_policy>disabled</auto_pinning_policy><cpu_pinning_policy>manual</cpu_pinning_policy>"))

	// The defaults, which high_performance does not change (its settings are UI defaults).
	d, err := addVMWith(conn, "plain", func(b *ovirtsdk.VmBuilder) {
		b.Type(ovirtsdk.VMTYPE_HIGH_PERFORMANCE).CpuBuilder(ovirtsdk.NewCpuBuilder().Mode(ovirtsdk.CPUMODE_HOST_MODEL))
	})
	g.Expect(err).NotTo(HaveOccurred())
	_, hasMode := d.MustCpu().Mode() // only host_passthrough is kept (useHostCpuFlags)
	g.Expect(hasMode).To(BeFalse())
	g.Expect(d.MustIo().MustThreads()).To(Equal(int64(1)))
	g.Expect(d.MustMultiQueuesEnabled()).To(BeTrue())
	g.Expect(d.MustMemoryPolicy().MustBallooning()).To(BeTrue())
	g.Expect(d.MustPlacementPolicy().MustAffinity()).To(Equal(ovirtsdk.VMAFFINITY_MIGRATABLE))
	_, hasHosts := d.MustPlacementPolicy().Hosts()
	g.Expect(hasHosts).To(BeFalse())

	// PUT: the pinning string removed from a manual VM makes it none again.
	_, err = conn.SystemService().VmsService().VmService(v.MustId()).Update().Vm(ovirtsdk.NewVmBuilder().
		CpuBuilder(ovirtsdk.NewCpuBuilder().CpuTuneBuilder(ovirtsdk.NewCpuTuneBuilder())).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	st, _ = sim.VM(v.MustId())
	g.Expect(st.CPUPinning).To(BeEmpty())
	g.Expect(st.CPUPinningPolicy).To(Equal("none"))
}

func TestPerformanceRefusalsLikeTheEngine(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	h4, _ := sim.Host("host4") // in Secondary

	cases := []struct {
		name, code, detail string
		edit               func(*ovirtsdk.VmBuilder)
	}{
		{"nohost", "400", "[Cannot set host CPU pinning when a host is not selected]", func(b *ovirtsdk.VmBuilder) {
			b.CpuBuilder(ovirtsdk.NewCpuBuilder().CpuTuneBuilder(ovirtsdk.NewCpuTuneBuilder().VcpuPinsOfAny(pin(0, "1"))))
		}},
		{"vcpu", "400", "[CPU pinning validation failed - virtual CPU does not exist in vm.]", func(b *ovirtsdk.VmBuilder) {
			b.CpuBuilder(ovirtsdk.NewCpuBuilder().CpuTuneBuilder(ovirtsdk.NewCpuTuneBuilder().VcpuPinsOfAny(pin(4, "1")))).
				PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_PINNED, "host1"))
		}},
		{"twice", "400", "[Cannot configure CPU pinning twice to the same vCPU.]", func(b *ovirtsdk.VmBuilder) {
			b.CpuBuilder(ovirtsdk.NewCpuBuilder().CpuTuneBuilder(ovirtsdk.NewCpuTuneBuilder().VcpuPinsOfAny(pin(0, "1"), pin(0, "2")))).
				PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_PINNED, "host1"))
		}},
		{"nocpu", "400", "[Cannot pin a vCPU to no pCPU.]", func(b *ovirtsdk.VmBuilder) {
			b.CpuBuilder(ovirtsdk.NewCpuBuilder().CpuTuneBuilder(ovirtsdk.NewCpuTuneBuilder().VcpuPinsOfAny(pin(0, "^1")))).
				PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_PINNED, "host1"))
		}},
		{"format", "400", "[CPU pinning format invalid.]", func(b *ovirtsdk.VmBuilder) {
			b.CpuBuilder(ovirtsdk.NewCpuBuilder().CpuTuneBuilder(ovirtsdk.NewCpuTuneBuilder().VcpuPinsOfAny(pin(0, "a")))).
				PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_PINNED, "host1"))
		}},
		{"iothreads", "400", "[Cannot add VM. Num of IO Threads is not in supported limit., Attribute: vmStatic.numOfIoThreads]", func(b *ovirtsdk.VmBuilder) {
			b.IoBuilder(ovirtsdk.NewIoBuilder().Threads(128))
		}},
		{"otherhost", "409", "[Cannot add VM. VM is pinned to a specific host. The host's cluster must be the same as the selected VM cluster.]", func(b *ovirtsdk.VmBuilder) {
			b.PlacementPolicyBuilder(ovirtsdk.NewVmPlacementPolicyBuilder().HostsOfAny(ovirtsdk.NewHostBuilder().Id(h4.ID).MustBuild()))
		}},
		{"nosuchhostid", "409", "[Cannot add VM. VM is pinned to a specific host. The required host doesn't exist.]", func(b *ovirtsdk.VmBuilder) {
			b.PlacementPolicyBuilder(ovirtsdk.NewVmPlacementPolicyBuilder().HostsOfAny(ovirtsdk.NewHostBuilder().Id("00000000-0000-0000-0000-00000000abcd").MustBuild()))
		}},
		{"nosuchhostname", "404", "Entity not found: ghost", func(b *ovirtsdk.VmBuilder) {
			b.PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_PINNED, "ghost"))
		}},
		{"hostwithoutname", "400", "Host [id|name] required for validateAndUpdateHostsInPlacementPolicy", func(b *ovirtsdk.VmBuilder) {
			b.PlacementPolicyBuilder(ovirtsdk.NewVmPlacementPolicyBuilder().HostsOfAny(ovirtsdk.NewHostBuilder().Comment("x").MustBuild()))
		}},
		{"badmode", "400", "'fast' is not a valid value for CpuMode", func(b *ovirtsdk.VmBuilder) {
			b.CpuBuilder(ovirtsdk.NewCpuBuilder().Mode(ovirtsdk.CpuMode("fast")))
		}},
	}
	for _, c := range cases {
		_, err := addVMWith(conn, "bad-"+c.name, c.edit)
		g.Expect(err).To(HaveOccurred(), c.name)
		if c.code == "404" {
			_, nf := errAs[*ovirtsdk.NotFoundError](err)
			g.Expect(nf).To(BeTrue(), c.name)
		} else {
			g.Expect(err.Error()).To(ContainSubstring(`HTTP response code is "`+c.code+`"`), c.name)
		}
		g.Expect(err.Error()).To(ContainSubstring(c.detail), c.name)
	}
	g.Expect(sim.VMs()).To(BeEmpty())
}

func TestAutoPinningPolicyPerVersion(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	add := func(conn *ovirtsdk.Connection, name string, p ovirtsdk.AutoPinningPolicy, edit func(*ovirtsdk.VmBuilder)) (*ovirtsdk.Vm, error) {
		b := vmBuilder(name, "rhcos-4.14", "Default")
		if edit != nil {
			edit(b)
		}
		r, err := conn.SystemService().VmsService().Add().Vm(b.MustBuild()).AutoPinningPolicy(p).Send()
		if err != nil {
			return nil, err
		}
		return r.MustVm(), nil
	}

	// 4.5: adjust is the resize_and_pin_numa policy, applied at run time on any host.
	sim := startSim(t)
	conn := connect(t, sim)
	v, err := add(conn, "adjusted", ovirtsdk.AUTOPINNINGPOLICY_ADJUST, nil)
	g.Expect(err).NotTo(HaveOccurred())
	st, _ := sim.VM(v.MustId())
	g.Expect(st.CPUPinningPolicy).To(Equal("resize_and_pin_numa"))
	g.Expect(rawVM(t, sim, v.MustId())).To(ContainSubstring("<auto_pinning_policy>adjust</auto_pinning_policy><cpu_pinning_policy>resize_and_pin_numa</cpu_pinning_policy>"))
	v, err = add(conn, "existing", ovirtsdk.AUTOPINNINGPOLICY_EXISTING, nil)
	g.Expect(err).NotTo(HaveOccurred())
	st, _ = sim.VM(v.MustId())
	g.Expect(st.CPUPinningPolicy).To(Equal("none"))
	_, err = add(conn, "sized", ovirtsdk.AUTOPINNINGPOLICY_ADJUST, func(b *ovirtsdk.VmBuilder) {
		b.CpuBuilder(ovirtsdk.NewCpuBuilder().TopologyBuilder(ovirtsdk.NewCpuTopologyBuilder().Sockets(2)))
	})
	g.Expect(err).To(MatchError(ContainSubstring("Attempt to automatically configure CPU topology or pinning while CPU topology or pinning is also specified.")))
	_, conflict := errAs[*ovirtsdk.ConflictError](err)
	g.Expect(conflict).To(BeTrue())
	_, err = add(conn, "bogus", ovirtsdk.AutoPinningPolicy("bogus"), nil)
	g.Expect(err).To(MatchError(ContainSubstring(`Fault detail is "Invalid value"`)))

	// The 4.5 model's body fields (go-ovirt cannot write them): they win over the parameter.
	post := func(name, extra, query string) (int, string) {
		req, err := newAuthedRequest(sim, "POST", "/vms"+query, `<vm><name>`+name+`</name><cluster><name>Default</name></cluster>`+
			`<template><name>rhcos-4.14</name></template><cpu><topology><sockets>2</sockets></topology></cpu>`+extra+`</vm>`)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := httpsClient(sim).Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, readAll(resp)
	}
	code, body := post("dedicated", `<cpu_pinning_policy>dedicated</cpu_pinning_policy>`, "?auto_pinning_policy=adjust")
	g.Expect(code).To(Equal(202), body)
	g.Expect(body).To(ContainSubstring("<cpu_pinning_policy>dedicated</cpu_pinning_policy>"))
	code, body = post("manual", `<cpu_pinning_policy>manual</cpu_pinning_policy>`, "")
	g.Expect(code).To(Equal(400))
	g.Expect(body).To(ContainSubstring("[Cannot add VM. The CPU Pinning policy is set to 'Manual' but no cpu pinning string is provided.]"))
	code, body = post("odd", `<auto_pinning_policy>sometimes</auto_pinning_policy>`, "")
	g.Expect(code).To(Equal(400))
	g.Expect(body).To(ContainSubstring("<reason>Invalid value</reason>"))

	// 4.4: a parameter of the command only; adjust needs a dedicated host, existing is refused.
	sim44 := startSim(t, func(b *ovirtsim.Builder) { b.WithVersion("4.4.10") })
	conn44 := connect(t, sim44)
	_, err = add(conn44, "adjusted", ovirtsdk.AUTOPINNINGPOLICY_ADJUST, nil)
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot add VM. Can not pin CPU and NUMA without a dedicated host.]")))
	_, err = add(conn44, "existing", ovirtsdk.AUTOPINNINGPOLICY_EXISTING, nil)
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot add VM. The Auto Pinning policy Existing is currently unsupported.]")))
	v, err = add(conn44, "pinned", ovirtsdk.AUTOPINNINGPOLICY_ADJUST, func(b *ovirtsdk.VmBuilder) {
		b.PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_PINNED, "host1"))
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rawVM(t, sim44, v.MustId())).NotTo(ContainSubstring("pinning_policy"))
}

func TestPinnedVMRunsOnlyOnItsHostsAndBlocksMaintenance(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	v, err := addVMWith(conn, "pinned", func(b *ovirtsdk.VmBuilder) {
		b.PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_PINNED, "host3"))
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(startVM(conn, v.MustId())).To(Succeed())
	g.Expect(vmHostOf(t, sim, v.MustId())).To(Equal("host3"))

	err = sim.SetHostStatus("host3", "maintenance")
	g.Expect(err).To(MatchError(ContainSubstring("Cannot switch the following Hosts to Maintenance mode: host3.\nOne or more running VMs are indicated as non-migratable. The non-migratable VMs are: pinned.")))
	h3, _ := sim.Host("host3")
	g.Expect(h3.Status).To(Equal("up"))
	// Re-pinning the running VM elsewhere is refused.
	_, err = conn.SystemService().VmsService().VmService(v.MustId()).Update().
		Vm(ovirtsdk.NewVmBuilder().PlacementPolicyBuilder(placement(ovirtsdk.VMAFFINITY_PINNED, "host1")).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot edit VM. Running VM is hosted on host3. Include host3 in dedicated hosts, or migrate VM to dedicated host prior to pinning.]")))

	// Its host down: PinToHost filters every other host out.
	g.Expect(conn.SystemService().VmsService().VmService(v.MustId()).Stop().Send()).Error().NotTo(HaveOccurred())
	g.Expect(sim.SetHostStatus("host3", "non_responsive")).To(Succeed())
	err = startVM(conn, v.MustId())
	g.Expect(err).To(MatchError(ContainSubstring("filter PinToHost because the host is not present in the pinning list..")))
}

func TestHugePagesNeedFreePagesOnAHost(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithCluster(ovirtsim.Cluster{Name: "Huge", Hosts: []ovirtsim.Host{
			{Name: "huge-a"}, {Name: "huge-b", HugePages: []ovirtsim.HugePages{{SizeKB: 1048576, Count: 12}}}}})
	})
	conn := connect(t, sim)
	mk := func(name string, memMiB int64) string {
		r, err := conn.SystemService().VmsService().Add().Vm(vmBuilder(name, "rhcos-4.14", "Huge").
			Memory(memMiB << 20).MemoryPolicyBuilder(ovirtsdk.NewMemoryPolicyBuilder().Guaranteed(memMiB << 20)).
			CustomPropertiesOfAny(prop("hugepages", "1048576")).MustBuild()).Send()
		g.Expect(err).NotTo(HaveOccurred())
		return r.MustVm().MustId()
	}
	// 8193 MiB is not a multiple of the 1 GiB page: accepted, it takes 9 pages
	// (HugePageUtils.getHugePages rounds up; only vNUMA nodes must be multiples).
	first := mk("first", 8193)
	g.Expect(startVM(conn, first)).To(Succeed())
	g.Expect(vmHostOf(t, sim, first)).To(Equal("huge-b"))
	hb, _ := sim.Host("huge-b")
	g.Expect(hb.HugePages).To(Equal([]ovirtsim.HugePagesState{{SizeKB: 1048576, Count: 12, Free: 3}}))
	g.Expect(hb.FreeMemoryBytes).To(Equal(hb.MemoryBytes)) // huge pages are no ordinary memory

	second := mk("second", 4096)
	err := startVM(conn, second)
	g.Expect(err).To(HaveOccurred())
	_, conflict := errAs[*ovirtsdk.ConflictError](err)
	g.Expect(conflict).To(BeTrue())
	lines := faultLines(t, err)
	g.Expect(lines[0]).To(Equal("Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:"))
	g.Expect(lines[1]).To(MatchRegexp(`^The host huge-[ab] did not satisfy internal filter HugePages because there are not enough free huge pages to run the VM\.$`))

	// More pages on huge-a (admin endpoint) and the second one fits.
	code, _ := admin(t, sim, "PUT", "/sim/hosts/huge-a/hugepages", `[{"size_kb": 1048576, "count": 4}]`)
	g.Expect(code).To(Equal(200))
	g.Expect(startVM(conn, second)).To(Succeed())
	g.Expect(vmHostOf(t, sim, second)).To(Equal("huge-a"))

	// A memory hot plug of a running VM backed by huge pages is refused.
	_, err = conn.SystemService().VmsService().VmService(first).Update().Vm(ovirtsdk.NewVmBuilder().Memory(9 << 30).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot edit VM. Memory hot set is not supported for virtual machines with huge pages.]")))
	g.Expect(sim.SetHostHugePages("nope")).To(MatchError(ovirtsim.ErrNotFound))
	g.Expect(sim.SetHostHugePages("huge-a", ovirtsim.HugePages{SizeKB: 0, Count: 1})).To(MatchError(ovirtsim.ErrInvalid))
}
