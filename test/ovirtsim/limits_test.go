package ovirtsim_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func TestNameAndDescriptionLimits(t *testing.T) {
	sim := startSim(t)
	conn := connect(t, sim)
	long64 := strings.Repeat("n", 64)
	cases := []struct {
		name   string
		vm     *ovirtsdk.Vm
		detail string // "" means accepted
	}{
		{"a name of 64 characters", vmBuilder(long64, "rhcos-4.14", "Default").MustBuild(), ""},
		{"a name of 65 characters", vmBuilder(long64+"x", "rhcos-4.14", "Default").MustBuild(),
			"[Cannot add VM. The given name is too long.]"},
		{"a description of 255 characters", vmBuilder("d255", "rhcos-4.14", "Default").Description(strings.Repeat("d", 255)).MustBuild(), ""},
		{"a description of 256 characters", vmBuilder("d256", "rhcos-4.14", "Default").Description(strings.Repeat("d", 256)).MustBuild(),
			"[Cannot add VM. The given description is too long.]"},
		{"a long comment is fine", vmBuilder("c", "rhcos-4.14", "Default").Comment(strings.Repeat("c", 1000)).MustBuild(), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := conn.SystemService().VmsService().Add().Vm(tc.vm).Send()
			if tc.detail == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.detail)))
			g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "400"`)))
			g.Expect(err).To(MatchError(ContainSubstring(`Fault reason is "Operation Failed"`)))
		})
	}

	t.Run("renaming and editing apply the same limits", func(t *testing.T) {
		g := NewWithT(t)
		st, _ := sim.VMByName("c")
		vms := conn.SystemService().VmsService().VmService(st.ID)
		_, err := vms.Update().Vm(ovirtsdk.NewVmBuilder().Name(long64 + "y").MustBuild()).Send()
		g.Expect(err).To(MatchError(ContainSubstring("[Cannot edit VM. The given name is too long.]")))
		_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().Description(strings.Repeat("d", 256)).MustBuild()).Send()
		g.Expect(err).To(MatchError(ContainSubstring("[Cannot edit VM. The given description is too long.]")))
		_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().Name("c2").MustBuild()).Send()
		g.Expect(err).NotTo(HaveOccurred())
	})

	t.Run("WithMaxVMNameLength changes the limit", func(t *testing.T) {
		g := NewWithT(t)
		short := startSim(t, func(b *ovirtsim.Builder) { b.WithMaxVMNameLength(8) })
		sc := connect(t, short)
		_, err := sc.SystemService().VmsService().Add().Vm(vmBuilder("ninechars", "rhcos-4.14", "Default").MustBuild()).Send()
		g.Expect(err).To(MatchError(ContainSubstring("The given name is too long.")))
		_, err = sc.SystemService().VmsService().Add().Vm(vmBuilder("eightchr", "rhcos-4.14", "Default").MustBuild()).Send()
		g.Expect(err).NotTo(HaveOccurred())
	})
}

func TestCorrelationIDLimit(t *testing.T) {
	sim := startSim(t)
	conn := connect(t, sim)
	cases := []struct {
		name, corr string
		header     bool
		detail     string // "" means accepted
	}{
		{"50 allowed characters", strings.Repeat("a", 48) + "_-", false, ""},
		{"51 characters", strings.Repeat("a", 51), false, "[Invalid correlation ID: it is longer than 50 characters.]"},
		{"a dot", "capov.1", false, "[Invalid correlation ID: only alphanumeric characters, '-' and '_' are allowed.]"},
		{"a space in the header", "capov 1", true, "only alphanumeric characters"},
		{"a long header", strings.Repeat("h", 60), true, "longer than 50 characters"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			req := conn.SystemService().VmsService().Add().Vm(vmBuilder("corr"+string(rune('a'+i)), "rhcos-4.14", "Default").MustBuild())
			if tc.header {
				req.Header("Correlation-Id", tc.corr)
			} else {
				req.Query("correlation_id", tc.corr)
			}
			_, err := req.Send()
			if tc.detail == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.detail)))
			g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "400"`)))
			_, found := sim.VMByName("corr" + string(rune('a'+i)))
			g.Expect(found).To(BeFalse(), "a refused correlation id runs no command")
		})
	}
	g := NewWithT(t)
	_, err := conn.SystemService().VmsService().List().Query("correlation_id", "not.checked.on.reads").Send()
	g.Expect(err).NotTo(HaveOccurred())
}

func TestVCPULimitPerVersion(t *testing.T) {
	topo := func(s, c, th int64) *ovirtsdk.CpuBuilder {
		return ovirtsdk.NewCpuBuilder().TopologyBuilder(ovirtsdk.NewCpuTopologyBuilder().Sockets(s).Cores(c).Threads(th))
	}
	cases := []struct {
		name, version string
		cpu           *ovirtsdk.CpuBuilder
		detail        string // "" means accepted
	}{
		{"512 on the default 4.5", "", topo(16, 16, 2), ""},
		{"544 on the default 4.5", "", topo(17, 16, 2), "[Cannot add VM. The total number of CPU cores exceeds the maximum of 512.]"},
		{"512 on 4.5", "4.5", topo(2, 16, 16), ""},
		{"384 on 4.4", "4.4", topo(12, 16, 2), ""},
		{"512 on 4.4", "4.4.10", topo(16, 16, 2), "[Cannot add VM. The total number of CPU cores exceeds the maximum of 384.]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sim := startSim(t, func(b *ovirtsim.Builder) {
				if tc.version != "" {
					b.WithVersion(tc.version)
				}
			})
			conn := connect(t, sim)
			_, err := conn.SystemService().VmsService().Add().Vm(vmBuilder("cpus", "rhcos-4.14", "Default").CpuBuilder(tc.cpu).MustBuild()).Send()
			if tc.detail == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.detail)))
			g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "400"`)))
		})
	}

	t.Run("GET /api reports the version, and updates are checked too", func(t *testing.T) {
		g := NewWithT(t)
		sim := startSim(t, func(b *ovirtsim.Builder) { b.WithVersion("4.4.10") })
		conn := connect(t, sim)
		api, err := conn.SystemService().Get().Send()
		g.Expect(err).NotTo(HaveOccurred())
		v := api.MustApi().MustProductInfo().MustVersion()
		g.Expect([]int64{v.MustMajor(), v.MustMinor(), v.MustBuild()}).To(Equal([]int64{4, 4, 10}))
		g.Expect(v.MustFullVersion()).To(Equal("4.4.10-1.el8"))
		id := createVM(t, conn, "grow", false)
		_, err = conn.SystemService().VmsService().VmService(id).Update().Vm(ovirtsdk.NewVmBuilder().CpuBuilder(topo(4, 100, 1)).MustBuild()).Send()
		g.Expect(err).To(MatchError(ContainSubstring("[Cannot edit VM. The total number of CPU cores exceeds the maximum of 384.]")))
	})

	t.Run("a bad version is refused by Build", func(t *testing.T) {
		g := NewWithT(t)
		_, err := ovirtsim.NewBuilder().WithVersion("five").Build()
		g.Expect(err).To(MatchError(ContainSubstring(`engine version "five"`)))
	})
}
