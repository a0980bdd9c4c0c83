package ovirtsim_test

import (
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func profileID(t testing.TB, sim *ovirtsim.Simulator, name, dc string) string {
	t.Helper()
	for _, p := range sim.Dump().VnicProfiles {
		if p.Name == name && p.DataCenter == dc {
			return p.ID
		}
	}
	t.Fatalf("no profile %s in %s", name, dc)
	return ""
}

func TestNICCrud(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithCluster(ovirtsim.Cluster{Name: "Default2", Networks: []string{"ovirtmgmt", "storage"}}).
			WithVnicProfile(ovirtsim.VnicProfile{Name: "storage", Network: "storage"}).
			WithCluster(ovirtsim.Cluster{Name: "Far", DataCenter: "Remote"}).
			WithVnicProfile(ovirtsim.VnicProfile{Name: "far", Network: "ovirtmgmt", DataCenter: "Remote"})
	})
	conn := connect(t, sim)
	id := createVM(t, conn, "nicy", false)
	nics := conn.SystemService().VmsService().VmService(id).NicsService()
	mgmt := profileID(t, sim, "ovirtmgmt", "Default")

	l, err := nics.List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(l.MustNics().Slice())).To(Equal([]string{"nic1"}))
	nic1 := l.MustNics().Slice()[0]
	g.Expect(nic1.MustVnicProfile().MustId()).To(Equal(mgmt))
	g.Expect(nic1.MustInterface()).To(Equal(ovirtsdk.NICINTERFACE_VIRTIO))
	g.Expect(nic1.MustPlugged()).To(BeTrue())

	// OpenShift-style: remove the template NICs, add ours.
	_, err = nics.NicService(nic1.MustId()).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	a, err := nics.Add().Nic(ovirtsdk.NewNicBuilder().Name("nic1").Interface(ovirtsdk.NICINTERFACE_VIRTIO).
		VnicProfileBuilder(ovirtsdk.NewVnicProfileBuilder().Id(mgmt)).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	added := a.MustNic()
	g.Expect(added.MustMac().MustAddress()).To(HavePrefix("56:6f:"))
	g.Expect(added.MustVm().MustId()).To(Equal(id))

	_, err = nics.Add().Nic(ovirtsdk.NewNicBuilder().Name("nic1").VnicProfileBuilder(ovirtsdk.NewVnicProfileBuilder().Id(mgmt)).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot add Interface. Interface name is already in use.]")))
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "409"`)))
	_, err = nics.Add().Nic(ovirtsdk.NewNicBuilder().Name("nic2").VnicProfileBuilder(ovirtsdk.NewVnicProfileBuilder().Id("00000000-1111-4222-8333-444444444444")).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot add Interface. The specified vNIC profile doesn't exist.]")))
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "400"`)))
	_, err = nics.Add().Nic(ovirtsdk.NewNicBuilder().Name("nic2").VnicProfileBuilder(ovirtsdk.NewVnicProfileBuilder().Id(profileID(t, sim, "far", "Remote"))).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring("is not attached to the Cluster Default of the VM")), "a profile of another data center")
	_, err = nics.Add().Nic(ovirtsdk.NewNicBuilder().Name("nic2").VnicProfileBuilder(ovirtsdk.NewVnicProfileBuilder().Id(profileID(t, sim, "storage", "Default"))).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring("Network storage is not attached to the Cluster Default")))

	// Update: rename, fixed MAC, unplug.
	u, err := nics.NicService(added.MustId()).Update().Nic(ovirtsdk.NewNicBuilder().Name("eth-main").
		MacBuilder(ovirtsdk.NewMacBuilder().Address("56:6F:00:AA:BB:CC")).Plugged(false).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.MustNic().MustName()).To(Equal("eth-main"))
	g.Expect(u.MustNic().MustMac().MustAddress()).To(Equal("56:6f:00:aa:bb:cc"))
	g.Expect(u.MustNic().MustPlugged()).To(BeFalse())
	got, err := nics.NicService(added.MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.MustNic().MustVnicProfile().MustId()).To(Equal(mgmt))
	_, err = nics.NicService(added.MustId()).Update().Nic(ovirtsdk.NewNicBuilder().MacBuilder(ovirtsdk.NewMacBuilder().Address("zz")).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring("MAC Address zz is invalid")))

	_, err = nics.NicService("nope").Remove().Send()
	_, ok := errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue())
	st, _ := sim.VM(id)
	g.Expect(st.NICs).To(HaveLen(1))
	g.Expect(st.NICs[0]).To(And(HaveField("Name", "eth-main"), HaveField("VnicProfile", "ovirtmgmt"), HaveField("Plugged", false)))
}

func TestNICHotPlugWhileUp(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "hot", false)
	vms := conn.SystemService().VmsService().VmService(id)
	_, err := vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_UP))
	_, err = vms.NicsService().Add().Nic(ovirtsdk.NewNicBuilder().Name("nic2").
		VnicProfileBuilder(ovirtsdk.NewVnicProfileBuilder().Id(profileID(t, sim, "ovirtmgmt", "Default"))).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	r, err := vms.ReportedDevicesService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(r.MustReportedDevice().Slice())).To(ConsistOf("lo", "eth0", "eth1", "cni0", "flannel.1", "docker0", "kube-ipvs0"),
		"the hot-plugged NIC shows up as eth1 among the guest's interfaces")
}
