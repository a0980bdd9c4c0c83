package sdk

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

// What a real Engine answers, through the real SDK against the simulator's faithful defaults.

// startedVM creates a VM from rhcos-4.14 with one NIC, starts it and waits until it is up.
func startedVM(t *testing.T, g Gomega, c ovirt.Client) *ovirt.VM {
	t.Helper()
	ctx := context.Background()
	cluster, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "Default")
	g.Expect(err).NotTo(HaveOccurred())
	profile, err := c.FindVnicProfile(ctx, cluster, "ovirtmgmt")
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "real-" + t.Name()[len(t.Name())-8:], ClusterID: cluster.ID, TemplateID: tpl.ID,
		CustomScript: `{"ignition":{"version":"3.2.0"}}`})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.AddNIC(ctx, vm.ID, "nic7", profile.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Power(ctx, vm.ID, ovirt.PowerStart)).To(Succeed())
	var got *ovirt.VM
	g.Eventually(func(g Gomega) {
		got, err = c.GetVM(ctx, vm.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status).To(Equal(ovirt.VMStatusUp))
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	return got
}

// settle waits until the simulator has counted every request answered so far (it counts a
// request once its answer is written, which may lag the client).
func settle(g Gomega, sim *ovirtsim.Simulator) {
	prev := -1
	g.Eventually(func() bool {
		n := sim.TotalRequests()
		stable := n == prev
		prev = n
		return stable
	}).WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(BeTrue())
}

func TestGetVMReportsEveryGuestInterfaceOnce(t *testing.T) {
	g := NewWithT(t)
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(context.Background(), e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	vm := startedVM(t, g, c)

	// Every device once, though the Engine repeats the list for each NIC and for the VM.
	names := map[string]int{}
	for _, d := range vm.ReportedDevices {
		names[d.Name]++
	}
	g.Expect(names).To(HaveKeyWithValue("lo", 1))
	g.Expect(names).To(HaveKeyWithValue("eth0", 1))
	g.Expect(names).To(HaveKey("kube-ipvs0"))
	g.Expect(names).To(HaveKey("cni0"))
	g.Expect(vm.NICs).NotTo(BeEmpty())
	st, _ := sim.VM(vm.ID)
	var eth0 ovirt.ReportedDevice
	for _, d := range vm.ReportedDevices {
		if d.Name == "eth0" {
			eth0 = d
		}
	}
	g.Expect(strings.ToLower(eth0.MAC)).To(Equal(strings.ToLower(vm.NICs[0].MAC)), "the first NIC's device carries its MAC")
	g.Expect(eth0.IPs).To(ContainElement(st.IPs[0]))
}

func TestGetVMWhenTheEngineIgnoresFollow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	vm := startedVM(t, g, c)
	followed, err := c.GetVM(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())

	sim.SetIgnoreFollow(true)
	settle(g, sim)
	sim.ResetCounters()
	got, err := c.GetVM(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Disks).To(HaveLen(1), "disks read from /vms/{id}/diskattachments")
	g.Expect(got.Disks[0].ID).To(Equal(followed.Disks[0].ID))
	g.Expect(got.Disks[0].Bootable).To(BeTrue())
	g.Expect(got.Disks[0].Alias).To(Equal(followed.Disks[0].Alias), "each disk read from /disks/{id}")
	g.Expect(got.Disks[0].ProvisionedSize).To(Equal(followed.Disks[0].ProvisionedSize))
	g.Expect(got.Disks[0].Status).To(Equal(followed.Disks[0].Status))
	g.Expect(got.NICs).To(HaveLen(len(followed.NICs)), "NICs read from /vms/{id}/nics")
	g.Expect(got.NICs).To(ConsistOf(followed.NICs))
	g.Expect(got.ReportedDevices).To(HaveLen(len(followed.ReportedDevices)), "devices read from /vms/{id}/reporteddevices")
	// The simulator counts a request once its answer is written: the last may lag the client.
	g.Eventually(func(g Gomega) {
		g.Expect(sim.RequestCount("GET", "/vms/{id}/diskattachments")).To(Equal(1))
		g.Expect(sim.RequestCount("GET", "/vms/{id}/nics")).To(Equal(1))
		g.Expect(sim.RequestCount("GET", "/vms/{id}/reporteddevices")).To(Equal(1))
		g.Expect(sim.RequestCount("GET", "/disks/{id}")).To(Equal(1))
	}).WithTimeout(5 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())

	// The disk check before a removal never rests on an inline collection.
	disks, err := c.ListDiskAttachments(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(disks).To(HaveLen(1))
	csi, err := sim.AttachCSIDisk(vm.ID, 5)
	g.Expect(err).NotTo(HaveOccurred())
	disks, err = c.ListDiskAttachments(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(disks).To(HaveLen(2))
	g.Expect([]string{disks[0].ID, disks[1].ID}).To(ContainElement(csi))

	// With follow honoured it is one call.
	sim.SetIgnoreFollow(false)
	settle(g, sim)
	sim.ResetCounters()
	_, err = c.GetVM(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(sim.TotalRequests).WithTimeout(5 * time.Second).WithPolling(20 * time.Millisecond).Should(Equal(1))
	g.Consistently(sim.TotalRequests).WithTimeout(200 * time.Millisecond).WithPolling(20 * time.Millisecond).Should(Equal(1))
	_, err = c.ListDiskAttachments(ctx, "no-such-vm")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
}

func TestStorageDomainStatusComesFromItsDataCenter(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t, func(b *ovirtsim.Builder) {
		b.WithStorageDomain(ovirtsim.StorageDomain{Name: "offline", FreeGB: 100, Status: "maintenance"})
	})
	e := newEnv(t, sim, Options{LookupCacheTTL: -1})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())

	sd, err := c.FindStorageDomain(ctx, "offline")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sd.Status).To(Equal("maintenance"), "the top-level list leaves it empty")
	g.Expect(sd.Usable).To(BeFalse())
	sd, err = c.FindStorageDomain(ctx, "data")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sd.Status).To(Equal("active"))
	g.Expect(sd.Usable).To(BeTrue())
	g.Expect(sim.SetStorageDomainStatus("data", "inactive")).To(Succeed())
	sd, err = c.FindStorageDomain(ctx, "data")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sd.Usable).To(BeFalse())
}

func TestTemplateDisksListEveryStorageDomainWithACopy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t, func(b *ovirtsim.Builder) {
		b.WithTemplate(ovirtsim.Template{Name: "replicated", Cluster: "Default", OSType: "rhcos_x64",
			Disks: []ovirtsim.TemplateDisk{{Alias: "replicated_Disk1", SizeGB: 10, StorageDomain: "data", StorageDomains: []string{"fast"}, Bootable: true}}})
	})
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "replicated", "Default")
	g.Expect(err).NotTo(HaveOccurred())
	data, err := c.FindStorageDomain(ctx, "data")
	g.Expect(err).NotTo(HaveOccurred())
	fast, err := c.FindStorageDomain(ctx, "fast")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tpl.Disks[0].StorageDomainIDs).To(ConsistOf(data.ID, fast.ID))
	g.Expect(tpl.Disks[0].StorageDomainID).To(BeElementOf(data.ID, fast.ID))
}
