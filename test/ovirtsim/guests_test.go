package ovirtsim_test

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// recordingRuntime is a GuestRuntime that records what the simulator asks of it.
type recordingRuntime struct {
	mu  sync.Mutex
	ops []string
	// boots are the GuestBoots of Boot and Reboot, in order.
	boots []ovirtsim.GuestBoot
}

func (r *recordingRuntime) record(op string, b *ovirtsim.GuestBoot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	if b != nil {
		r.boots = append(r.boots, *b)
	}
}

func (r *recordingRuntime) Boot(b ovirtsim.GuestBoot) error   { r.record("boot", &b); return nil }
func (r *recordingRuntime) Reboot(b ovirtsim.GuestBoot) error { r.record("reboot", &b); return nil }
func (r *recordingRuntime) Shutdown(string)                   { r.record("shutdown", nil) }
func (r *recordingRuntime) PowerOff(string)                   { r.record("poweroff", nil) }
func (r *recordingRuntime) Remove(string)                     { r.record("remove", nil) }
func (r *recordingRuntime) Interfaces(string) []ovirtsim.GuestInterface {
	return nil
}

func (r *recordingRuntime) snapshot() ([]string, []ovirtsim.GuestBoot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ops...), append([]ovirtsim.GuestBoot(nil), r.boots...)
}

// TestARebootKeepsTheRunAndItsConfigDrive: a reboot through the Engine API is
// reboot_in_progress, then up, on the same host; the guest boots again with the run's config
// drive (the payload stays attached while qemu runs) under a new boot number, so the end of
// the old boot is not the VM's; a stop and start is a new run without the drive (the Engine
// composes the payload on the first run only); a reboot of a VM that is not running is
// refused as the Engine refuses it.
func TestARebootKeepsTheRunAndItsConfigDrive(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	rt := &recordingRuntime{}
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithTimings(ovirtsim.Timings{WaitForLaunch: 200 * time.Millisecond, PoweringUp: 200 * time.Millisecond, PoweringDown: time.Second})
	})
	sim.SetGuestRuntime(rt)
	conn := connect(t, sim)
	r, err := conn.SystemService().VmsService().Add().Vm(vmBuilder("reboot", "rhcos-4.14", "Default").InitializationBuilder(
		ovirtsdk.NewInitializationBuilder().HostName("reboot").CustomScript(`{"ignition":{"version":"3.2.0"}}`)).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	id := r.MustVm().MustId()
	g.Eventually(func() ovirtsdk.VmStatus { return vmStatus(t, conn, id) }).Should(Equal(ovirtsdk.VMSTATUS_DOWN))
	vms := conn.SystemService().VmsService().VmService(id)

	_, err = vms.Reboot().Send()
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot reboot VM. VM is not running.]")))

	_, err = vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	statusesUntil(t, conn, id, ovirtsdk.VMSTATUS_UP)
	host := getVM(t, conn, id, "").MustHost().MustId()

	_, err = vms.Reboot().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statusesUntil(t, conn, id, ovirtsdk.VMSTATUS_UP)).To(Equal([]ovirtsdk.VmStatus{ovirtsdk.VMSTATUS_REBOOT_IN_PROGRESS, ovirtsdk.VMSTATUS_UP}))
	g.Expect(getVM(t, conn, id, "").MustHost().MustId()).To(Equal(host), "a reboot stays on its host")

	// The old boot ends after the reboot: not the VM's end.
	sim.GuestExited(id, 1, nil)
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_UP))

	_, err = vms.Stop().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	statusesUntil(t, conn, id, ovirtsdk.VMSTATUS_UP)

	g.Eventually(func() []string { ops, _ := rt.snapshot(); return ops }).Should(Equal([]string{"boot", "reboot", "poweroff", "boot"}))
	_, boots := rt.snapshot()
	g.Expect(boots[0].Run).To(Equal(1))
	g.Expect(boots[0].ConfigDrive).To(HaveKey(ovirtsim.ConfigDriveUserData), "the first run attaches the payload")
	g.Expect(boots[1].Run).To(Equal(2))
	g.Expect(boots[1].ConfigDrive).To(Equal(boots[0].ConfigDrive), "a reboot keeps the run's config drive")
	g.Expect(boots[2].Run).To(Equal(3))
	g.Expect(boots[2].ConfigDrive).To(BeNil(), "a new run has no payload")
}
