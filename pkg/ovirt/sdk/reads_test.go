package sdk

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
)

// readVMsEnv creates n VMs (one of them running, so that its host is in the answer) through an
// unthrottled client, and returns them with a client limited to one call per two seconds whose burst
// is spent: every read from then on waits for a token.
func readVMsEnv(t *testing.T, n int) (throttled, free ovirt.Client, vms []*ovirt.VM, e *env) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	fe := newEnv(t, sim, Options{Limits: Limits{QPS: -1}})
	free, err := fe.f.ForProvider(ctx, fe.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	cluster, err := free.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := free.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())
	for i := range n {
		name := fmt.Sprintf("read-%d", i)
		vm, err := free.CreateVM(ctx, ovirt.VMSpec{Name: name, ClusterID: cluster.ID, TemplateID: tpl.ID,
			Comment: "capov ovirtmachine=ns/" + name + " uid=" + name, HostName: name})
		g.Expect(err).NotTo(HaveOccurred())
		vms = append(vms, vm)
	}
	for _, vm := range vms {
		g.Eventually(func() string { st, _ := sim.VM(vm.ID); return st.Status }, 10*time.Second, 20*time.Millisecond).Should(Equal("down"))
	}
	g.Expect(free.Power(ctx, vms[0].ID, ovirt.PowerStart)).To(Succeed())
	g.Eventually(func() string { st, _ := sim.VM(vms[0].ID); return st.Status }, 10*time.Second, 20*time.Millisecond).Should(Equal("up"))

	e = newEnv(t, sim, Options{Limits: Limits{QPS: 0.5, Burst: 1}})
	throttled, err = e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = throttled.Ping(ctx) // the login and the burst
	g.Expect(err).NotTo(HaveOccurred())
	sim.ResetCounters()
	return throttled, free, vms, e
}

// pendingReads is how many reads wait in the provider's open batch.
func pendingReads(e *env) int {
	e.f.mu.Lock()
	p := e.f.providers[e.cfg.Provider]
	e.f.mu.Unlock()
	p.reads.mu.Lock()
	defer p.reads.mu.Unlock()
	if p.reads.pending == nil {
		return 0
	}
	return len(p.reads.pending.ids)
}

// TestReadsWaitingForOneTokenShareOneCall: under a saturated rate limit, the VM reads that wait
// for the same token are one search by id, and each caller gets what a GET /vms/{id} of its VM
// answers (disks, NICs, host, comment, status).
func TestReadsWaitingForOneTokenShareOneCall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, free, vms, e := readVMsEnv(t, 6)

	got := make([]*ovirt.VM, len(vms))
	errs := make([]error, len(vms))
	var wg sync.WaitGroup
	for i, vm := range vms {
		wg.Go(func() { got[i], errs[i] = c.GetVM(ctx, vm.ID) })
	}
	wg.Wait()
	g.Expect(e.sim.RequestCount("GET", "/vms")).To(Equal(1), "one search for the reads that waited together")
	g.Expect(e.sim.RequestCount("GET", "/vms/{id}")).To(BeZero())
	g.Expect(e.sim.RequestCount("GET", "/hosts/{id}")).To(BeZero(), "the host came inline")

	for i, vm := range vms {
		g.Expect(errs[i]).NotTo(HaveOccurred())
		alone, err := free.GetVM(ctx, vm.ID)
		g.Expect(err).NotTo(HaveOccurred())
		// The order of the reported devices is the guest agent's, not the Engine's.
		for _, v := range []*ovirt.VM{got[i], alone} {
			slices.SortFunc(v.ReportedDevices, func(a, b ovirt.ReportedDevice) int { return strings.Compare(a.Name, b.Name) })
		}
		g.Expect(got[i]).To(Equal(alone), "the shared read of %s answers what its own GET does", vm.Name)
	}
	g.Expect(got[0].HostName).NotTo(BeEmpty())
	g.Expect(got[0].Status).To(Equal(ovirt.VMStatusUp))
	g.Expect(got[1].Disks).NotTo(BeEmpty())
}

// TestASharedReadLeavesAGoneVMToItsOwnGET: a VM missing from a shared answer is not taken for
// gone: its own GET /vms/{id} decides (404: ErrNotFound), and the others are served.
func TestASharedReadLeavesAGoneVMToItsOwnGET(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, free, vms, e := readVMsEnv(t, 3)
	g.Expect(free.RemoveVM(ctx, vms[2].ID)).To(Succeed())
	g.Eventually(func() bool { _, ok := e.sim.VM(vms[2].ID); return ok }, 10*time.Second, 20*time.Millisecond).Should(BeFalse())
	e.sim.ResetCounters()

	errs := make([]error, len(vms))
	var wg sync.WaitGroup
	for i, vm := range vms {
		wg.Go(func() { _, errs[i] = c.GetVM(ctx, vm.ID) })
	}
	wg.Wait()
	g.Expect(errs[0]).NotTo(HaveOccurred())
	g.Expect(errs[1]).NotTo(HaveOccurred())
	g.Expect(errs[2]).To(MatchError(ovirt.ErrNotFound))
	g.Expect(e.sim.RequestCount("GET", "/vms")).To(Equal(1))
	g.Expect(e.sim.RequestCount("GET", "/vms/{id}")).To(Equal(1), "the missing VM read on its own")
}

// TestReadsThatJoinedALeaderWhoGaveUpReadAgain: the read that opened a batch is cancelled while
// others wait in it; they are read all the same, in one call.
func TestReadsThatJoinedALeaderWhoGaveUpReadAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, _, vms, e := readVMsEnv(t, 4)

	leaderCtx, cancel := context.WithCancel(ctx)
	leaderDone := make(chan error, 1)
	go func() { _, err := c.GetVM(leaderCtx, vms[0].ID); leaderDone <- err }()
	g.Eventually(func() int { return pendingReads(e) }, 5*time.Second, time.Millisecond).Should(Equal(1))
	errs := make([]error, len(vms))
	var wg sync.WaitGroup
	for i, vm := range vms[1:] {
		wg.Go(func() { _, errs[i+1] = c.GetVM(ctx, vm.ID) })
	}
	g.Eventually(func() int { return pendingReads(e) }, 5*time.Second, time.Millisecond).Should(Equal(len(vms)))
	cancel()
	g.Expect(<-leaderDone).To(MatchError(context.Canceled))
	wg.Wait()
	for _, err := range errs[1:] {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(e.sim.RequestCount("GET", "/vms")).To(Equal(1), "the reads left behind share one call")
	g.Expect(e.sim.RequestCount("GET", "/vms/{id}")).To(BeZero())
}
