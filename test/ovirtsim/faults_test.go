package ovirtsim_test

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// faultPattern creates n VMs and returns which creations failed.
func faultPattern(t *testing.T, seed int64, rule ovirtsim.FaultRule, n int) string {
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithRandomSeed(seed).WithFault(rule) })
	conn := connect(t, sim)
	out := make([]byte, n)
	for i := range n {
		vm := vmBuilder(fmt.Sprintf("f%d", i), "rhcos-4.14", "Default").MustBuild()
		_, err := conn.SystemService().VmsService().Add().Vm(vm).Send()
		out[i] = '.'
		if err != nil {
			out[i] = 'X'
		}
	}
	return string(out)
}

func TestFaultRateIsDeterministicFromTheSeed(t *testing.T) {
	g := NewWithT(t)
	rule := ovirtsim.FaultRule{Method: "POST", Path: "/vms", Status: 500, Rate: 0.5}
	a, b, c := faultPattern(t, 7, rule, 24), faultPattern(t, 7, rule, 24), faultPattern(t, 8, rule, 24)
	t.Logf("seed 7: %s, seed 8: %s", a, c)
	g.Expect(a).To(Equal(b))
	g.Expect(a).NotTo(Equal(c))
	g.Expect(a).To(ContainSubstring("X"))
	g.Expect(a).To(ContainSubstring("."))
}

func TestInjectedFaultsLookLikeTheEngine(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "target", false)
	vms := conn.SystemService().VmsService().VmService(id)

	sim.SetFaults(ovirtsim.FaultRule{Method: "GET", Path: "/vms/{id}", Status: 503, Count: 2, Detail: "engine is busy"})
	for range 2 {
		_, err := vms.Get().Send()
		g.Expect(err).To(MatchError(ContainSubstring(`Fault detail is "engine is busy". HTTP response code is "503"`)))
	}
	_, err := vms.Get().Send()
	g.Expect(err).NotTo(HaveOccurred(), "Count exhausted")

	sim.SetFaults(ovirtsim.FaultRule{Method: "POST", Path: "/vms/{id}/start", Status: 409})
	_, err = vms.Start().Send()
	_, ok := errAs[*ovirtsdk.ConflictError](err)
	g.Expect(ok).To(BeTrue(), "got %T %v", err, err)

	sim.SetFaults(ovirtsim.FaultRule{Path: "/vms/{id}", Status: 404})
	_, err = vms.Get().Send()
	_, ok = errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue())

	sim.SetFaults(ovirtsim.FaultRule{Path: "/vms*", Status: 401})
	_, err = vms.NicsService().List().Send()
	rpe, ok := errAs[*ovirtsdk.ResponseParseError](err)
	g.Expect(ok).To(BeTrue(), "an injected 401 looks like an expired token: got %T %v", err, err)
	g.Expect(rpe.Code).To(Equal(401))
	_, err = conn.SystemService().ClustersService().List().Send()
	g.Expect(err).NotTo(HaveOccurred(), "the glob matches VM paths only")

	sim.SetFaults(ovirtsim.FaultRule{Status: 500, Rate: 1})
	_, err = conn.SystemService().ClustersService().List().Send()
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "500"`)))
	sim.SetFaults()
	g.Expect(conn.Test()).To(Succeed())

	// Invalid rules are ignored by SetFaults.
	sim.SetFaults(ovirtsim.FaultRule{Path: "/vms", Status: 42})
	g.Expect(sim.Dump().Settings.Faults).To(BeEmpty())
}

func TestSSOFaults(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithFault(ovirtsim.FaultRule{Path: "/sso/oauth/token", Status: 500, Count: 1}).
			WithFault(ovirtsim.FaultRule{Path: "/ovirt-engine/sso/oauth/token", Status: 401, Count: 1})
	})
	_, ok := errAs[*ovirtsdk.AuthError](rawConn(t, sim).Test())
	g.Expect(ok).To(BeTrue())
	err := rawConn(t, sim).Test()
	_, ok = errAs[*ovirtsdk.AuthError](err)
	g.Expect(ok).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring("authentication failed")))
	g.Expect(rawConn(t, sim).Test()).To(Succeed())
	g.Expect(sim.Requests()).To(HaveKeyWithValue(ovirtsim.RequestKey{Method: "POST", Path: "/sso/oauth/token", Status: 500}, 1))
}

func TestHangsAndClientTimeouts(t *testing.T) {
	t.Parallel()
	sim := startSim(t)
	conn := connect(t, sim)
	impatient, err := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).Username(sim.Username()).Password(sim.Password()).
		CertPool(x509.NewCertPool()).CACert(sim.CAPEM()).Timeout(300 * time.Millisecond).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := impatient.Test(); err != nil {
		t.Fatal(err)
	}

	t.Run("the SDK timeout fires during a hang, and the engine still does the work", func(t *testing.T) {
		g := NewWithT(t)
		sim.SetFaults(ovirtsim.FaultRule{Method: "POST", Path: "/vms", Hang: 5 * time.Second})
		defer sim.SetFaults()
		start := time.Now()
		_, err := impatient.SystemService().VmsService().Add().Vm(vmBuilder("slow", "rhcos-4.14", "Default").MustBuild()).Send()
		ue, ok := errAs[*url.Error](err)
		g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
		g.Expect(ue.Timeout()).To(BeTrue())
		g.Expect(time.Since(start)).To(BeNumerically("<", 3*time.Second), "the hang ends when the client goes away")
		g.Eventually(func() bool { _, ok := sim.VMByName("slow"); return ok }).WithTimeout(5 * time.Second).Should(BeTrue())
		g.Eventually(func() int {
			return sim.Requests()[ovirtsim.RequestKey{Method: "POST", Path: "/vms", Status: 499}]
		}).WithTimeout(5*time.Second).Should(Equal(1), "counted as 499: the client went away first")
	})
	t.Run("a short hang then answers normally", func(t *testing.T) {
		g := NewWithT(t)
		sim.SetFaults(ovirtsim.FaultRule{Method: "GET", Path: "/clusters", Hang: 150 * time.Millisecond})
		defer sim.SetFaults()
		start := time.Now()
		_, err := conn.SystemService().ClustersService().List().Send()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(time.Since(start)).To(BeNumerically(">=", 150*time.Millisecond))
	})
	t.Run("a hang with a status answers the fault afterwards", func(t *testing.T) {
		g := NewWithT(t)
		sim.SetFaults(ovirtsim.FaultRule{Method: "GET", Path: "/clusters", Hang: 100 * time.Millisecond, Status: 502})
		defer sim.SetFaults()
		start := time.Now()
		_, err := conn.SystemService().ClustersService().List().Send()
		g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "502"`)))
		g.Expect(time.Since(start)).To(BeNumerically(">=", 100*time.Millisecond))
	})
}

func TestLatencyRules(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithLatency(ovirtsim.LatencyRule{Method: "GET", Path: "/clusters", Min: 100 * time.Millisecond, Max: 150 * time.Millisecond}).
			WithLatency(ovirtsim.LatencyRule{Min: 0})
	})
	conn := connect(t, sim)
	for range 3 {
		start := time.Now()
		_, err := conn.SystemService().ClustersService().List().Send()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(time.Since(start)).To(BeNumerically(">=", 100*time.Millisecond))
	}
	_, err := conn.SystemService().TemplatesService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	// Measured in the simulator (the request log), not around the client call: a loaded CI
	// machine can take longer than 100ms for the TLS round trip alone.
	var served []time.Duration
	for _, r := range sim.RequestLog() {
		if r.Path == "/templates" {
			served = append(served, r.End.Sub(r.Start))
		}
	}
	g.Expect(served).To(HaveLen(1))
	g.Expect(served[0]).To(BeNumerically("<", 100*time.Millisecond), "the first matching rule wins: /templates gets no latency")

	sim.SetLatency(ovirtsim.LatencyRule{Path: "/templates", Min: 80 * time.Millisecond})
	start := time.Now()
	_, err = conn.SystemService().TemplatesService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(time.Since(start)).To(BeNumerically(">=", 80*time.Millisecond))
	for _, r := range sim.RequestLog() {
		if r.Path == "/templates" && r.Status == 200 && r.End.Sub(r.Start) >= 80*time.Millisecond {
			return
		}
	}
	t.Fatal("the request log should show the delayed request")
}
