package sdk

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

// TestRunOnceGivesTheScriptToTheFirstRunOnly: RunOnce is one POST /vms/{id}/start whose payload
// carries the script; the VM stores none of it (reads report no stored script), and a later
// plain start attaches nothing again.
func TestRunOnceGivesTheScriptToTheFirstRunOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	cluster, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())
	// The SDK writes values into the XML as they are: a script with & or < must arrive whole
	// (CABPK's cloud-config has shell commands with &&).
	const config = `{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","gecos":"a && b <c>"}]}}`
	vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "once", ClusterID: cluster.ID, TemplateID: tpl.ID, Comment: "capov ovirtmachine=ns/once uid=a", HostName: "once"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string { st, _ := sim.VM(vm.ID); return st.Status }, 10*time.Second, 50*time.Millisecond).Should(Equal("down"))

	sim.ResetCounters()
	g.Expect(c.RunOnce(ctx, vm.ID, config)).To(Succeed())
	g.Expect(sim.TotalRequests()).To(Equal(1))
	g.Expect(sim.RequestCount("POST", "/vms/{id}/start")).To(Equal(1))
	in, err := sim.Initialization(vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in.Format).To(Equal(ovirtsim.InitFormatIgnition))
	g.Expect(in.UserData).To(ContainSubstring(`"core"`), "the script reached the run's payload")
	g.Expect(in.UserData).To(ContainSubstring(`a && b <c>`), "escaped on the wire, whole in the payload")
	g.Expect(in.UserData).To(ContainSubstring("/etc/hostname"), "with the VM's stored host name")
	st, _ := sim.VM(vm.ID)
	g.Expect(st.CustomScript).To(BeEmpty(), "nothing stored on the VM")
	got, err := c.GetVM(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.CustomScriptStored).To(BeFalse())

	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStop)).To(Succeed())
	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStart)).To(Succeed())
	again, err := sim.Initialization(vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.ComposedAt).To(Equal(in.ComposedAt), "no payload at a later start")

	stored, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "stored", ClusterID: cluster.ID, TemplateID: tpl.ID, Comment: "capov ovirtmachine=ns/stored uid=b", HostName: "stored", CustomScript: config})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool { v, err := c.GetVM(ctx, stored.ID); return err == nil && v.CustomScriptStored }, 10*time.Second, 50*time.Millisecond).Should(BeTrue(),
		"a VM created with a script reports it stored")
	g.Expect(c.RunOnce(ctx, "", config)).To(MatchError(ovirt.ErrInvalid))
}
