package ovirtsim_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// statusesUntil polls a VM and returns the distinct statuses seen, in order,
// until want is reached.
func statusesUntil(t testing.TB, conn *ovirtsdk.Connection, id string, want ovirtsdk.VmStatus) []ovirtsdk.VmStatus {
	t.Helper()
	var seen []ovirtsdk.VmStatus
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		st := vmStatus(t, conn, id)
		if len(seen) == 0 || seen[len(seen)-1] != st {
			seen = append(seen, st)
		}
		if st == want {
			return seen
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("VM %s never reached %s (saw %v)", id, want, seen)
	return nil
}

func TestPowerStateMachineWithTimings(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		// Each state lasts a second so that polling sees every one of them even on a loaded
		// CI machine, where one TLS round trip can take several hundred milliseconds.
		b.WithTimings(ovirtsim.Timings{WaitForLaunch: time.Second, PoweringUp: time.Second, PoweringDown: time.Second})
	})
	conn := connect(t, sim)
	id := createVM(t, conn, "power", false)
	vms := conn.SystemService().VmsService().VmService(id)

	start := time.Now()
	_, err := vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	seen := statusesUntil(t, conn, id, ovirtsdk.VMSTATUS_UP)
	g.Expect(time.Since(start)).To(BeNumerically(">=", 2*time.Second))
	g.Expect(seen).To(Equal([]ovirtsdk.VmStatus{ovirtsdk.VMSTATUS_WAIT_FOR_LAUNCH, ovirtsdk.VMSTATUS_POWERING_UP, ovirtsdk.VMSTATUS_UP}))

	_, err = vms.Start().Send()
	ce, ok := errAs[*ovirtsdk.ConflictError](err)
	g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
	g.Expect(ce.Error()).To(ContainSubstring("[Cannot run VM. VM is running.]"))
	_, err = vms.Remove().Send()
	ce, ok = errAs[*ovirtsdk.ConflictError](err)
	g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
	g.Expect(ce.Error()).To(ContainSubstring("[Cannot remove VM. VM is running.]"))

	_, err = vms.Shutdown().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statusesUntil(t, conn, id, ovirtsdk.VMSTATUS_DOWN)).To(Equal([]ovirtsdk.VmStatus{ovirtsdk.VMSTATUS_POWERING_DOWN, ovirtsdk.VMSTATUS_DOWN}))

	_, err = vms.Stop().Send()
	_, ok = errAs[*ovirtsdk.ConflictError](err)
	g.Expect(ok).To(BeTrue(), "stopping a down VM fails")
	_, err = vms.Shutdown().Send()
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot shutdown VM. VM is not running.]")))

	// stop is immediate, from any running state.
	_, err = vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_WAIT_FOR_LAUNCH))
	_, err = vms.Stop().Force(true).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_DOWN))
	_, err = vms.Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
}

func TestActionsAnswerComplete(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "act", false)
	c := httpsClient(sim)
	req, _ := newAuthedRequest(sim, "POST", "/vms/"+id+"/start", "<action><use_cloud_init>true</use_cloud_init></action>")
	resp, err := c.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	body := readAll(resp)
	g.Expect(resp.StatusCode).To(Equal(200))
	g.Expect(body).To(Equal("<action><status>complete</status></action>"))
	req, _ = newAuthedRequest(sim, "POST", "/vms/"+id+"/start", "")
	resp, err = c.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	body = readAll(resp)
	g.Expect(resp.StatusCode).To(Equal(409))
	g.Expect(body).To(Equal("<fault><detail>[Cannot run VM. VM is running.]</detail><reason>Operation Failed</reason></fault>"))
}

func TestReportedDevicesAndGuestAgent(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithTimings(ovirtsim.Timings{GuestAgentDelay: 2 * time.Second})
	})
	conn := connect(t, sim)
	id := createVM(t, conn, "ips", false)
	vms := conn.SystemService().VmsService().VmService(id)
	devices := func() []*ovirtsdk.ReportedDevice {
		r, err := vms.ReportedDevicesService().List().Send()
		g.Expect(err).NotTo(HaveOccurred())
		return r.MustReportedDevice().Slice()
	}
	g.Expect(devices()).To(BeEmpty(), "down: nothing reported")
	_, err := vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_UP))
	g.Expect(devices()).To(BeEmpty(), "up, but the agent has not reported yet")
	// lo, eth0 and the interfaces of a Kubernetes node.
	g.Eventually(devices).WithTimeout(5 * time.Second).WithPolling(20 * time.Millisecond).Should(HaveLen(6))

	d := deviceNamed(devices(), "eth0")
	g.Expect(d.MustName()).To(Equal("eth0"))
	g.Expect(d.MustType()).To(Equal(ovirtsdk.REPORTEDDEVICETYPE_NETWORK))
	ips := d.MustIps().Slice()
	g.Expect(ips).To(HaveLen(2))
	g.Expect(ips[0].MustAddress()).To(Equal("10.1.1.2"), "10.<cluster index>.x.y in creation order")
	g.Expect(ips[0].MustVersion()).To(Equal(ovirtsdk.IPVERSION_V4))
	g.Expect(ips[1].MustAddress()).To(HavePrefix("fe80::"), "link-local: clients must filter it")
	g.Expect(ips[1].MustVersion()).To(Equal(ovirtsdk.IPVERSION_V6))
	nic := getVM(t, conn, id, "nics").MustNics().Slice()[0]
	g.Expect(d.MustMac().MustAddress()).To(Equal(nic.MustMac().MustAddress()))
	g.Expect(deviceNamed(devices(), "eth0").MustId()).To(Equal(d.MustId()), "stable across reads")

	nr, err := vms.NicsService().NicService(nic.MustId()).ReportedDevicesService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nr.MustReportedDevice().Slice()).To(HaveLen(6), "a NIC's reported devices are the VM's")
	st, _ := sim.VM(id)
	g.Expect(st.IPs).To(Equal([]string{"10.1.1.2"}))

	sim.SetGuestAgent(false)
	g.Expect(devices()).To(BeEmpty())
	st, _ = sim.VM(id)
	g.Expect(st.IPs).To(BeEmpty())
	sim.SetGuestAgent(true)
	g.Expect(devices()).To(HaveLen(6))
}

func TestNoGuestAgentMeansNoIPsButShutdownStillWorks(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithoutGuestAgent().WithTimings(ovirtsim.Timings{NoAgentPoweringUp: time.Nanosecond})
	})
	conn := connect(t, sim)
	id := createVM(t, conn, "silent", false)
	vms := conn.SystemService().VmsService().VmService(id)
	_, err := vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	v := getVM(t, conn, id, "nics.reported_devices,reported_devices")
	g.Expect(v.MustStatus()).To(Equal(ovirtsdk.VMSTATUS_UP))
	g.Expect(v.MustReportedDevices().Slice()).To(BeEmpty())
	g.Expect(v.MustNics().Slice()[0].MustReportedDevices().Slice()).To(BeEmpty())
	_, err = vms.Shutdown().Send()
	g.Expect(err).NotTo(HaveOccurred(), "ACPI shutdown without a guest agent")
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_DOWN))
}

// A run of requests against a fresh simulator, returning everything that
// should be deterministic.
func deterministicRun(t *testing.T, seed int64) []string {
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithRandomSeed(seed) })
	conn := connect(t, sim)
	var out []string
	for _, n := range []string{"d1", "d2", "d3"} {
		id := createVM(t, conn, n, n != "d2")
		_, err := conn.SystemService().VmsService().VmService(id).Start().Send()
		if err != nil {
			t.Fatal(err)
		}
		st, _ := sim.VM(id)
		out = append(out, id, st.Disks[0].ID, st.NICs[0].ID, st.NICs[0].MAC, strings.Join(st.IPs, ","))
	}
	return out
}

func TestSameSeedSameIDsMACsAndIPs(t *testing.T) {
	g := NewWithT(t)
	a, b, c := deterministicRun(t, 42), deterministicRun(t, 42), deterministicRun(t, 43)
	g.Expect(a).To(Equal(b))
	g.Expect(a[0]).NotTo(Equal(c[0]), "another seed, other ids")
	g.Expect(a[3:5]).To(Equal(c[3:5]), "MACs and IPs follow creation order")
}
