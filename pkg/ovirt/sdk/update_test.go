package sdk

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

// TestUpdateVMChangesTheCommentAndClearsOnlyTheScript: the owner marker is rewritten and the
// bootstrap data cleared on a running VM in one PUT each; the host name stays; while the VM is
// being created the Engine refuses with a lock (409).
func TestUpdateVMChangesTheCommentAndClearsOnlyTheScript(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{ImageLock: time.Second}) })
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	cluster, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "m1", ClusterID: cluster.ID, TemplateID: tpl.ID, Comment: "capov ovirtmachine=ns/m1 uid=a",
		CustomScript: `{"ignition":{"version":"3.2.0"}}`, HostName: "m1"})
	g.Expect(err).NotTo(HaveOccurred())

	err = c.UpdateVM(ctx, vm.ID, ovirt.VMUpdate{Comment: strPtr("x")})
	g.Expect(err).To(MatchError(ovirt.ErrLocked), "refused while image_locked: %v", err)

	g.Eventually(func() string { st, _ := sim.VM(vm.ID); return st.Status }, 10*time.Second, 100*time.Millisecond).Should(Equal("down"))
	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStart)).To(Succeed())
	sim.ResetCounters()
	g.Expect(c.UpdateVM(ctx, vm.ID, ovirt.VMUpdate{Comment: strPtr("capov ovirtmachine=ns/m1 uid=b & <more>")})).To(Succeed())
	g.Expect(c.UpdateVM(ctx, vm.ID, ovirt.VMUpdate{ClearCustomScript: true})).To(Succeed())
	g.Expect(sim.RequestCount("PUT", "/vms/{id}")).To(Equal(2))
	g.Expect(c.UpdateVM(ctx, vm.ID, ovirt.VMUpdate{})).To(Succeed())
	g.Expect(sim.TotalRequests()).To(Equal(2), "an empty update sends nothing")
	st, _ := sim.VM(vm.ID)
	g.Expect(st.Comment).To(Equal("capov ovirtmachine=ns/m1 uid=b & <more>"))
	g.Expect(st.CustomScript).To(BeEmpty())
	g.Expect(st.HostName).To(Equal("m1"), "only the script is cleared")

	g.Expect(c.UpdateVM(ctx, "00000000-0000-0000-0000-000000000000", ovirt.VMUpdate{ClearCustomScript: true})).To(MatchError(ovirt.ErrNotFound))
}

// TestEngineInfoIsReadOncePerConnection: the Engine's identity costs one GET /api per
// connection; a change of settings is a new connection and reads it again.
func TestEngineInfoIsReadOncePerConnection(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	sim.ResetCounters()
	for range 3 {
		info, err := c.EngineInfo(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info.InstanceID).To(Equal(sim.InstanceID()))
		g.Expect(info.InstanceID).NotTo(BeEmpty())
	}
	g.Expect(sim.RequestCount("GET", "/")).To(Equal(1))
	info, err := c.Ping(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.InstanceID).To(Equal(sim.InstanceID()))
	g.Expect(sim.RequestCount("GET", "/")).To(Equal(2), "Ping always asks")
}

// TestConcurrentFirstEngineInfoCallsShareOneRead: after a manager start every machine's first
// reconcile asks for the Engine's identity at once; before, each sent its own GET /api (12 of
// the 17 calls of a restart with the inventory).
func TestConcurrentFirstEngineInfoCallsShareOneRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	sim.SetLatency(ovirtsim.LatencyRule{Min: 50 * time.Millisecond, Max: 50 * time.Millisecond})
	sim.ResetCounters()
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			info, err := c.EngineInfo(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(info.InstanceID).To(Equal(sim.InstanceID()))
		})
	}
	wg.Wait()
	g.Eventually(func() int { return sim.RequestCount("GET", "/") }).Should(Equal(1))
	g.Consistently(func() int { return sim.RequestCount("GET", "/") }).WithTimeout(200 * time.Millisecond).Should(Equal(1))
}

func strPtr(s string) *string { return &s }
