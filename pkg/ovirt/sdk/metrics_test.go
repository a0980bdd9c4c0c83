package sdk

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

// metricValue reads a series of the env's provider from the registry (so
// the test also proves registration): a counter or gauge value, or a
// histogram's sample count. (The client_model types are used without naming
// them: that module is only an indirect requirement.)
func metricValue(e *env, name string, labels map[string]string) float64 {
	families, err := e.reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range families {
		if mf.GetName() != "capov_ovirt_"+name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if !matches(got, e.cfg.Provider, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func matches(got map[string]string, provider string, want map[string]string) bool {
	if got["provider"] != provider {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func gaugeValue(e *env, name string) float64 { return metricValue(e, name, nil) }

// counterValue reads requests_total (operation, code) or sso_logins_total
// (result).
func counterValue(e *env, name string, values ...string) float64 {
	switch name {
	case "requests_total":
		return metricValue(e, name, map[string]string{"operation": values[0], "code": values[1]})
	case "sso_logins_total":
		return metricValue(e, name, map[string]string{"result": values[0]})
	}
	panic("unknown counter " + name)
}

// seriesFor counts the series of a provider across all our metrics.
func seriesFor(e *env, provider string) int {
	families, err := e.reg.Gather()
	if err != nil {
		panic(err)
	}
	n := 0
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "provider" && lp.GetValue() == provider {
					n++
				}
			}
		}
	}
	return n
}

func itoa(i int) string { return strconv.Itoa(i) }

func portOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(err)
	}
	return u.Port()
}

func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.Ping(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.GetVM(ctx, "missing")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))

	g.Expect(counterValue(e, "requests_total", "Login", "2xx")).To(Equal(1.0))
	g.Expect(counterValue(e, "requests_total", "Ping", "2xx")).To(Equal(1.0))
	g.Expect(counterValue(e, "requests_total", "GetVM", "404")).To(Equal(1.0))
	g.Expect(metricValue(e, "request_duration_seconds", map[string]string{"operation": "Ping"})).To(Equal(1.0))
	g.Expect(metricValue(e, "request_duration_seconds", map[string]string{"operation": "GetVM"})).To(Equal(1.0))
	g.Expect(counterValue(e, "sso_logins_total", "success")).To(Equal(1.0))
	g.Expect(metricValue(e, "ratelimiter_wait_seconds", nil)).To(Equal(3.0), "Login, Ping and GetVM each waited")
	g.Expect(gaugeValue(e, "requests_in_flight")).To(BeZero())
	g.Expect(gaugeValue(e, "auth_breaker_open")).To(BeZero())

	// The in-flight gauge counts calls while they run.
	sim.SetLatency(ovirtsim.LatencyRule{Method: "GET", Path: "/", Min: 800 * time.Millisecond})
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.Ping(ctx) })
	wg.Go(func() { _, _ = c.Ping(ctx) })
	g.Eventually(func() float64 { return gaugeValue(e, "requests_in_flight") }).Should(Equal(2.0))
	wg.Wait()
	g.Expect(gaugeValue(e, "requests_in_flight")).To(BeZero())

	// Every metric is registered under its documented name.
	names := []string{"requests_total", "request_duration_seconds", "requests_in_flight",
		"sso_logins_total", "ratelimiter_wait_seconds", "auth_breaker_open"}
	for _, n := range names {
		count, err := testutil.GatherAndCount(e.reg, "capov_ovirt_"+n)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(count).To(BeNumerically(">=", 1), n)
	}
	g.Expect(testutil.CollectAndCount(e.f.m.requests)).To(Equal(3))

	t.Run("a second factory on the same registry shares the collectors", func(t *testing.T) {
		g := NewWithT(t)
		var f2 *Factory
		g.Expect(func() { f2 = NewFactory(Options{Registerer: e.reg}) }).NotTo(Panic())
		defer f2.Close()
		g.Expect(f2.m.requests).To(BeIdenticalTo(e.f.m.requests))
	})

	t.Run("without a registerer nothing is registered and calls still work", func(t *testing.T) {
		g := NewWithT(t)
		f3 := NewFactory(Options{})
		defer f3.Close()
		c3, err := f3.ForProvider(ctx, e.cfg)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c3.Ping(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(testutil.ToFloat64(f3.m.requests.WithLabelValues(e.cfg.Provider, "Ping", "2xx"))).To(Equal(1.0))
	})

	t.Run("two new factories on one fresh registry share the collectors", func(t *testing.T) {
		g := NewWithT(t)
		reg := prometheus.NewRegistry()
		f4 := NewFactory(Options{Registerer: reg})
		defer f4.Close()
		f5 := NewFactory(Options{Registerer: reg})
		defer f5.Close()
		g.Expect(f5.m.breakerOpen).To(BeIdenticalTo(f4.m.breakerOpen))
	})
}

// TestNoSecretInAnyLogLine runs a full lifecycle, a re-login, a failed login
// and some faults with logging at V(10) and checks that no password, SSO
// token or custom script reaches a log line or an error message.
func TestNoSecretInAnyLogLine(t *testing.T) {
	g := NewWithT(t)
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	ctx := logr.NewContext(context.Background(), e.logs.logger(10).WithValues("OVirtMachine", "default/m1"))
	const script = `{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","passwordHash":"IGNITION-SECRET-7f3a"}]}}`
	const wrongPassword = "Wr0ng-Pa55word-9c1e"
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}

	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	tokens := []string{tokenOf(c)}
	cl, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "Default")
	g.Expect(err).NotTo(HaveOccurred())
	sd, err := c.FindStorageDomain(ctx, "fast")
	g.Expect(err).NotTo(HaveOccurred())
	vp, err := c.FindVnicProfile(ctx, cl, "ovirtmgmt")
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "m1", ClusterID: cl.ID, TemplateID: tpl.ID, Clone: true,
		StorageDomainID: sd.ID, TemplateDisks: tpl.Disks, CustomScript: script, OSType: "rhcos_x64"})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.CreateVM(ctx, ovirt.VMSpec{Name: "m1", ClusterID: cl.ID, TemplateID: tpl.ID, CustomScript: script})
	note(err)
	got, err := c.GetVM(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	note(c.UpdateDisk(ctx, vm.ID, got.Disks[0].ID, ovirt.DiskUpdate{ProvisionedSize: 20 * gib, Alias: "m1_Disk1"}))
	note(c.UpdateDisk(ctx, vm.ID, got.Disks[0].ID, ovirt.DiskUpdate{ProvisionedSize: gib}))
	nic, err := c.AddNIC(ctx, vm.ID, "nic2", vp.ID)
	g.Expect(err).NotTo(HaveOccurred())
	note(c.UpdateNIC(ctx, vm.ID, nic.ID, vp.ID))

	sim.RestartEngine()
	note(c.Power(ctx, vm.ID, ovirt.PowerStart))
	tokens = append(tokens, tokenOf(c))
	sim.SetTokenTTL(time.Nanosecond)
	time.Sleep(time.Millisecond)
	_, err = c.GetVM(ctx, vm.ID)
	note(err)
	sim.SetTokenTTL(time.Hour)
	_, err = c.GetVM(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	tokens = append(tokens, tokenOf(c))

	sim.SetFaults(ovirtsim.FaultRule{Method: "GET", Path: "/vms/{id}", Status: 500, Count: 1})
	_, err = c.GetVM(ctx, vm.ID)
	note(err)
	note(c.Power(ctx, vm.ID, ovirt.PowerStop))
	note(c.RemoveNIC(ctx, vm.ID, nic.ID))
	g.Eventually(func() ovirt.VMStatus { v, _ := c.GetVM(ctx, vm.ID); return v.Status }).Should(Equal(ovirt.VMStatusDown))
	note(c.RemoveVM(ctx, vm.ID))

	bad := e.cfg
	bad.Provider = "bad-password"
	bad.Credentials.Password = wrongPassword
	for range 4 {
		_, err = e.f.ForProvider(ctx, bad)
		g.Expect(err).To(MatchError(ovirt.ErrAuth))
		note(err)
	}

	logs := e.logs.String()
	g.Expect(logs).To(ContainSubstring("Called oVirt"))
	g.Expect(logs).To(ContainSubstring(`"operation"="CreateVM"`))
	g.Expect(logs).To(ContainSubstring(`"provider"="test-provider"`))
	g.Expect(logs).To(ContainSubstring(`"OVirtMachine"="default/m1"`))
	g.Expect(logs).To(ContainSubstring("Suspending oVirt logins"))
	g.Expect(errs).NotTo(BeEmpty())
	everything := logs + "\n" + strings.Join(errs, "\n")
	secrets := map[string]string{
		"password":          testPassword,
		"wrong password":    wrongPassword,
		"custom script":     script,
		"script secret":     "IGNITION-SECRET-7f3a",
		"ignition document": `"passwd"`,
	}
	for i, tok := range tokens {
		g.Expect(tok).NotTo(BeEmpty())
		secrets["token "+itoa(i)] = tok
	}
	g.Expect(tokens[0]).NotTo(Equal(tokens[1]), "the re-login got a new token")
	for what, secret := range secrets {
		g.Expect(everything).NotTo(ContainSubstring(secret), "the %s leaked", what)
	}
}
