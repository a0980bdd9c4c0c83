package ovirtsim_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// joinSecret stands for the join token CAPOV puts in the bootstrap data.
const joinSecret = "kubeadm-join-token-abcdef.0123456789abcdef"

// bootstrapIgnition is an Ignition config carrying joinSecret, as CAPOV sends
// it in initialization.custom_script at creation.
const bootstrapIgnition = `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/join","contents":{"source":"data:,` + joinSecret + `"}}]}}`

// createBootstrappedVM creates a rhcos VM whose initialization carries the
// bootstrap data and a host name, like the provider's CreateVM.
func createBootstrappedVM(t testing.TB, conn *ovirtsdk.Connection, name string) string {
	t.Helper()
	vm := vmBuilder(name, "rhcos-4.14", "Default").
		InitializationBuilder(ovirtsdk.NewInitializationBuilder().CustomScript(bootstrapIgnition).HostName(name)).MustBuild()
	r, err := conn.SystemService().VmsService().Add().Vm(vm).Send()
	if err != nil {
		t.Fatalf("creating VM %s: %v", name, err)
	}
	return r.MustVm().MustId()
}

// initOf returns the VM's initialization, failing the test without one (the
// SDK's Must accessor would panic and stop every other test).
func initOf(t testing.TB, v *ovirtsdk.Vm) *ovirtsdk.Initialization {
	t.Helper()
	in, ok := v.Initialization()
	if !ok {
		t.Fatalf("VM %s has no initialization", v.MustId())
	}
	return in
}

// nextRun returns next_run_configuration_exists, failing the test when the
// engine's answer lacks it.
func nextRun(t testing.TB, v *ovirtsdk.Vm) bool {
	t.Helper()
	b, ok := v.NextRunConfigurationExists()
	if !ok {
		t.Fatalf("VM %s has no next_run_configuration_exists", v.MustId())
	}
	return b
}

// clearCustomScript is the update that removes the bootstrap data and keeps
// the rest of the initialization: <initialization><custom_script></custom_script></initialization>.
func clearCustomScript() *ovirtsdk.Vm {
	return ovirtsdk.NewVmBuilder().InitializationBuilder(ovirtsdk.NewInitializationBuilder().CustomScript("")).MustBuild()
}

func TestCommentAndCustomScriptEditableOnEveryStatusWithoutNextRun(t *testing.T) {
	t.Parallel()
	const hold = time.Hour
	cases := []struct {
		status  ovirtsdk.VmStatus
		timings ovirtsim.Timings
		// shutdown asks for a graceful shutdown once the VM is up.
		start, shutdown bool
	}{
		{status: ovirtsdk.VMSTATUS_DOWN},
		{status: ovirtsdk.VMSTATUS_WAIT_FOR_LAUNCH, timings: ovirtsim.Timings{WaitForLaunch: hold}, start: true},
		{status: ovirtsdk.VMSTATUS_POWERING_UP, timings: ovirtsim.Timings{PoweringUp: hold}, start: true},
		{status: ovirtsdk.VMSTATUS_UP, start: true},
		{status: ovirtsdk.VMSTATUS_POWERING_DOWN, timings: ovirtsim.Timings{PoweringDown: hold}, start: true, shutdown: true},
	}
	for _, tc := range cases {
		t.Run(string(tc.status), func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(tc.timings) })
			conn := connect(t, sim)
			id := createBootstrappedVM(t, conn, "w-"+strings.ReplaceAll(string(tc.status), "_", "-"))
			vms := conn.SystemService().VmsService().VmService(id)
			if tc.start {
				_, err := vms.Start().Send()
				g.Expect(err).NotTo(HaveOccurred())
			}
			if tc.shutdown {
				_, err := vms.Shutdown().Send()
				g.Expect(err).NotTo(HaveOccurred())
			}
			before := getVM(t, conn, id, "")
			g.Expect(before.MustStatus()).To(Equal(tc.status))
			composed, composedErr := sim.Initialization(id)

			// UpdateVmCommand: comment and vmInit are @EditableVmField without onStatuses,
			// so they are editable in every status and never need a next-run configuration.
			r, err := vms.Update().Vm(ovirtsdk.NewVmBuilder().Comment("capov-owner=ns/m1").MustBuild()).Send()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.MustVm().MustComment()).To(Equal("capov-owner=ns/m1"))
			r, err = vms.Update().Vm(clearCustomScript()).Send()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.MustVm().MustComment()).To(Equal("capov-owner=ns/m1"), "an update of the initialization keeps the comment")

			after := getVM(t, conn, id, "")
			g.Expect(after.MustStatus()).To(Equal(tc.status), "no reboot, no power change")
			g.Expect(after.MustComment()).To(Equal("capov-owner=ns/m1"))
			g.Expect(nextRun(t, after)).To(BeFalse(), "applied now, no pending changes")
			in := initOf(t, after)
			script, _ := in.CustomScript()
			g.Expect(script).To(BeEmpty(), "the bootstrap data is gone from the engine")
			g.Expect(in.MustHostName()).To(Equal(initOf(t, before).MustHostName()), "the other initialization fields stay")
			if st, ok := before.StartTime(); ok {
				g.Expect(after.MustStartTime()).To(Equal(st), "the VM was not restarted")
			}
			vm, _ := sim.VM(id)
			g.Expect(vm.CustomScript).To(BeEmpty())

			// What the first run gave the guest stays with the running VM: the engine does
			// not touch the payload device of a VM that runs (UpdateVmCommand updates devices
			// only when the VM is not running; VDSM removes the payload image on releaseVm).
			now, nowErr := sim.Initialization(id)
			g.Expect(fmt.Sprint(nowErr)).To(Equal(fmt.Sprint(composedErr)))
			g.Expect(now).To(Equal(composed))
			if tc.start {
				g.Expect(now.UserData).To(ContainSubstring(joinSecret))
			}
		})
	}
}

func TestUpdateWhileCreatingIsARelatedOperationInProgress(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{ImageLock: time.Hour}) })
	conn := connect(t, sim)
	id := createBootstrappedVM(t, conn, "creating")
	vms := conn.SystemService().VmsService().VmService(id)
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_IMAGE_LOCKED))

	// AddVmCommand holds its exclusive VM_NAME lock (ACTION_TYPE_FAILED_OBJECT_LOCKED) until
	// its disks are made; UpdateVmCommand takes the same lock and gets the holder's message.
	for name, body := range map[string]*ovirtsdk.Vm{
		"comment":       ovirtsdk.NewVmBuilder().Comment("x").MustBuild(),
		"custom_script": clearCustomScript(),
	} {
		_, err := vms.Update().Vm(body).Send()
		ce, ok := errAs[*ovirtsdk.ConflictError](err)
		g.Expect(ok).To(BeTrue(), "%s: got %T %v", name, err, err)
		g.Expect(ce.Code).To(Equal(409))
		g.Expect(ce.Error()).To(ContainSubstring("[Cannot edit VM. Related operation is currently in progress. Please try again later.]"))
	}
	vm, _ := sim.VM(id)
	g.Expect(vm.Comment).To(BeEmpty())
	g.Expect(vm.CustomScript).To(Equal(bootstrapIgnition), "a refused update changes nothing")
}

func TestGetReturnsCustomScriptWithoutAllContent(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createBootstrappedVM(t, conn, "reader")
	vms := conn.SystemService().VmsService()

	// VmMapper maps vm_init into initialization on every GET (GetVmByVmIdQuery loads it;
	// the list loads it with GetVmsInit); all_content only adds console, the OVF,
	// rng_source, soundcard and virtio_scsi.
	plain := getVM(t, conn, id, "")
	g.Expect(initOf(t, plain).MustCustomScript()).To(Equal(bootstrapIgnition))
	g.Expect(initOf(t, plain).MustHostName()).To(Equal("reader"))
	all, err := vms.VmService(id).Get().AllContent(true).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(initOf(t, all.MustVm()).MustCustomScript()).To(Equal(bootstrapIgnition))
	list, err := vms.List().Search("name=reader").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.MustVms().Slice()).To(HaveLen(1))
	g.Expect(initOf(t, list.MustVms().Slice()[0]).MustCustomScript()).To(Equal(bootstrapIgnition))

	_, err = vms.VmService(id).Update().Vm(clearCustomScript()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	script, _ := initOf(t, getVM(t, conn, id, "")).CustomScript()
	g.Expect(script).To(BeEmpty())
	list, err = vms.List().Search("name=reader").Send()
	g.Expect(err).NotTo(HaveOccurred())
	script, _ = initOf(t, list.MustVms().Slice()[0]).CustomScript()
	g.Expect(script).To(BeEmpty())
}

func TestInitializationUpdatesMergeAndAnEmptyOneRemovesIt(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createBootstrappedVM(t, conn, "merge")
	vms := conn.SystemService().VmsService().VmService(id)
	_, err := vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())

	// No <initialization> in the body: VmMapper leaves vm_init as it is.
	_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().Description("d").MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(initOf(t, getVM(t, conn, id, "")).MustCustomScript()).To(Equal(bootstrapIgnition))

	// Sub-tags are mapped onto the stored vm_init (InitializationMapper.map with the
	// stored one as template): the others are kept.
	_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().InitializationBuilder(ovirtsdk.NewInitializationBuilder().HostName("renamed")).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	in := initOf(t, getVM(t, conn, id, ""))
	g.Expect(in.MustHostName()).To(Equal("renamed"))
	g.Expect(in.MustCustomScript()).To(Equal(bootstrapIgnition))

	// <initialization/> with no sub-tag maps to null and VmHandler.updateVmInitToDB
	// removes the whole vm_init: host name included.
	_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().InitializationBuilder(ovirtsdk.NewInitializationBuilder()).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	after := getVM(t, conn, id, "")
	_, ok := after.Initialization()
	g.Expect(ok).To(BeFalse(), "no vm_init left")
	g.Expect(after.MustStatus()).To(Equal(ovirtsdk.VMSTATUS_UP))
	g.Expect(nextRun(t, after)).To(BeFalse())
	vm, _ := sim.VM(id)
	g.Expect(vm.CustomScript).To(BeEmpty())
	g.Expect(vm.HostName).To(BeEmpty())
}

func TestClearingCustomScriptOnTheWire(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`<vm><initialization><custom_script></custom_script></initialization></vm>`,
		`<vm><initialization><custom_script/></initialization></vm>`,
	} {
		t.Run(body, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			sim := startSim(t)
			conn := connect(t, sim)
			id := createBootstrappedVM(t, conn, "wire")
			_, err := conn.SystemService().VmsService().VmService(id).Start().Send()
			g.Expect(err).NotTo(HaveOccurred())

			req, err := newAuthedRequest(sim, "PUT", "/vms/"+id, body)
			g.Expect(err).NotTo(HaveOccurred())
			resp, err := httpsClient(sim).Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			answer := readAll(resp)
			g.Expect(resp.StatusCode).To(Equal(200), answer)
			g.Expect(answer).NotTo(ContainSubstring(joinSecret))
			g.Expect(answer).To(ContainSubstring("<next_run_configuration_exists>false</next_run_configuration_exists>"))
			g.Expect(answer).To(ContainSubstring("<status>up</status>"))

			req, err = newAuthedRequest(sim, "GET", "/vms/"+id, "")
			g.Expect(err).NotTo(HaveOccurred())
			resp, err = httpsClient(sim).Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			got := readAll(resp)
			g.Expect(got).NotTo(ContainSubstring(joinSecret))
			g.Expect(got).To(ContainSubstring("<host_name>wire</host_name>"))
		})
	}
}
