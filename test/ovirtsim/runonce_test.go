package ovirtsim_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// runOnce starts a VM with a run-once initialization carrying script, as `POST /vms/{id}/start`
// with <vm><initialization><custom_script> and <volatile>.
func runOnce(vms *ovirtsdk.VmService, script string, volatile bool) error {
	_, err := vms.Start().Vm(ovirtsdk.NewVmBuilder().
		InitializationBuilder(ovirtsdk.NewInitializationBuilder().CustomScript(script)).MustBuild()).
		Volatile(volatile).Send()
	return err
}

// The Engine's run once (BackendVmResource.start with a <vm>: RunVmOnceCommand) builds the
// payload of that run from the stored vm_init with the action's initialization mapped onto it,
// and stores none of it on the VM; a later plain start of a VM that ran attaches nothing.
func TestRunOnceGivesTheBootstrapDataToThatRunOnly(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	const script = "runcmd:\n- kubeadm join --token abcdef.0123456789abcdef\n"
	id := createWithInit(t, conn, "once", "ubuntu-22.04", "", "", "once.example.com")
	g.Expect(sim.SetVMGuestAgent(id, true)).To(Succeed())
	vms := conn.SystemService().VmsService().VmService(id)

	g.Expect(runOnce(vms, script, true)).To(Succeed())
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_UP))
	in, err := sim.Initialization(id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in.Format).To(Equal(ovirtsim.InitFormatCloudInit))
	g.Expect(in.UserData).To(HaveSuffix(script), "the action's custom script is the run's")
	g.Expect(in.MetaData).To(ContainSubstring("once.example.com"), "the stored host name stays")

	v := getVM(t, conn, id, "")
	if init, ok := v.Initialization(); ok {
		s, _ := init.CustomScript()
		g.Expect(s).To(BeEmpty(), "nothing of a run once is stored on the VM")
		h, _ := init.HostName()
		g.Expect(h).To(Equal("once.example.com"))
	}
	g.Expect(v.MustRunOnce()).To(BeTrue(), "the Engine marks a VM that runs once")

	_, err = vms.Stop().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getVM(t, conn, id, "").MustRunOnce()).To(BeFalse(), "the mark ends with the run")

	// A plain start of a VM that ran: no payload (RunVmCommand.updateVmInit: !is_initialized).
	before, _ := sim.Initialization(id)
	_, err = vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	after, _ := sim.Initialization(id)
	g.Expect(after.ComposedAt).To(Equal(before.ComposedAt), "no new payload at a later plain start")

	// Nor at a run once of a VM that ran, unless a use_* switch asks for it.
	_, err = vms.Stop().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(runOnce(vms, "runcmd: [second]\n", true)).To(Succeed())
	after, _ = sim.Initialization(id)
	g.Expect(after.ComposedAt).To(Equal(before.ComposedAt), "is_initialized: the Engine decides no payload")
	_, err = vms.Stop().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = vms.Start().Vm(ovirtsdk.NewVmBuilder().
		InitializationBuilder(ovirtsdk.NewInitializationBuilder().CustomScript("runcmd: [third]\n")).MustBuild()).
		UseCloudInit(true).Send()
	g.Expect(err).NotTo(HaveOccurred())
	after, _ = sim.Initialization(id)
	g.Expect(after.UserData).To(HaveSuffix("runcmd: [third]\n"), "use_cloud_init initializes a VM that ran")
}

func TestRunOnceSwitchesAsTheEngineReadsThem(t *testing.T) {
	sim := startSim(t)
	conn := connect(t, sim)

	t.Run("two initialization switches at once are a 409", func(t *testing.T) {
		g := NewWithT(t)
		id := createWithInit(t, conn, "mixed", "ubuntu-22.04", "", "", "mixed")
		_, err := conn.SystemService().VmsService().VmService(id).Start().UseCloudInit(true).UseIgnition(true).Send()
		g.Expect(err).To(MatchError(ContainSubstring("Cannot use multiple initialization tags simultaneously when running VM.")))
		g.Expect(err).To(MatchError(ContainSubstring(`"409"`)))
		g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_DOWN))
	})
	t.Run("a switch for another OS's format gives no payload", func(t *testing.T) {
		g := NewWithT(t)
		id := createWithInit(t, conn, "wrongfmt", "ubuntu-22.04", "", "", "wrongfmt")
		_, err := conn.SystemService().VmsService().VmService(id).Start().Vm(ovirtsdk.NewVmBuilder().
			InitializationBuilder(ovirtsdk.NewInitializationBuilder().CustomScript(`{"ignition":{"version":"3.2.0"}}`)).MustBuild()).
			UseIgnition(true).Send()
		g.Expect(err).NotTo(HaveOccurred(), "the Engine starts it")
		_, err = sim.Initialization(id)
		g.Expect(err).To(MatchError(ovirtsim.ErrConflict), "osRepository.isIgnition(ubuntu) is false: no payload at all")
	})
	t.Run("a switch given as false gives no payload, even at the first run", func(t *testing.T) {
		g := NewWithT(t)
		id := createWithInit(t, conn, "nopayload", "ubuntu-22.04", "", "runcmd: [x]\n", "nopayload")
		_, err := conn.SystemService().VmsService().VmService(id).Start().UseCloudInit(false).Send()
		g.Expect(err).NotTo(HaveOccurred())
		_, err = sim.Initialization(id)
		g.Expect(err).To(MatchError(ovirtsim.ErrConflict))
	})
	t.Run("an Ignition run once on rhcos", func(t *testing.T) {
		g := NewWithT(t)
		id := createWithInit(t, conn, "ignonce", "rhcos-4.14", "", "", "ignonce.example.com")
		g.Expect(runOnce(conn.SystemService().VmsService().VmService(id), `{"ignition":{"version":"3.2.0"},"passwd":{}}`, true)).To(Succeed())
		in, err := sim.Initialization(id)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(in.Format).To(Equal(ovirtsim.InitFormatIgnition))
		g.Expect(in.UserData).To(ContainSubstring(`"passwd"`))
		g.Expect(in.UserData).To(ContainSubstring("/etc/hostname"), "the stored host name is merged in")
	})
	t.Run("a run once without initialization is a plain first run", func(t *testing.T) {
		g := NewWithT(t)
		id := createWithInit(t, conn, "bare", "ubuntu-22.04", "", "runcmd: [stored]\n", "bare")
		_, err := conn.SystemService().VmsService().VmService(id).Start().Vm(ovirtsdk.NewVmBuilder().MustBuild()).Send()
		g.Expect(err).NotTo(HaveOccurred())
		in, err := sim.Initialization(id)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.HasSuffix(in.UserData, "runcmd: [stored]\n")).To(BeTrue(), "the stored script")
	})
}

// A reboot of a volatile run once is cold (RebootVmCommand: isRunOnce() && isVolatileRun()): the
// VM comes back as a plain run of its stored configuration.
func TestAVolatileRunOnceEndsAtItsReboot(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	vms := func(id string) *ovirtsdk.VmService { return conn.SystemService().VmsService().VmService(id) }
	for _, volatile := range []bool{true, false} {
		id := createWithInit(t, conn, map[bool]string{true: "volatile", false: "kept"}[volatile], "ubuntu-22.04", "", "", "h")
		g.Expect(sim.SetVMGuestAgent(id, true)).To(Succeed())
		g.Expect(runOnce(vms(id), "runcmd: [x]\n", volatile)).To(Succeed())
		g.Eventually(func() ovirtsdk.VmStatus { return vmStatus(t, conn, id) }).Should(Equal(ovirtsdk.VMSTATUS_UP))
		_, err := vms(id).Reboot().Send()
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() ovirtsdk.VmStatus { return vmStatus(t, conn, id) }).Should(Equal(ovirtsdk.VMSTATUS_UP))
		g.Expect(getVM(t, conn, id, "").MustRunOnce()).To(Equal(!volatile), "volatile %v", volatile)
	}
}
