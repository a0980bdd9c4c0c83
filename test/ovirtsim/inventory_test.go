package ovirtsim_test

import (
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func names[T interface{ Name() (string, bool) }](items []T) []string {
	out := make([]string, 0, len(items))
	for _, i := range items {
		n, _ := i.Name()
		out = append(out, n)
	}
	return out
}

func listTemplates(g *WithT, conn *ovirtsdk.Connection, search string, caseSensitive *bool) []*ovirtsdk.Template {
	req := conn.SystemService().TemplatesService().List()
	if search != "" {
		req.Search(search)
	}
	if caseSensitive != nil {
		req.CaseSensitive(*caseSensitive)
	}
	r, err := req.Send()
	g.Expect(err).NotTo(HaveOccurred())
	ts, ok := r.Templates()
	g.Expect(ok).To(BeTrue())
	return ts.Slice()
}

func TestClustersNetworksAndDataCenters(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithCluster(ovirtsim.Cluster{Name: "Edge", DataCenter: "Remote", Networks: []string{"edge-net", "storage"}})
	})
	conn := connect(t, sim)
	sys := conn.SystemService()

	r, err := sys.ClustersService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(r.MustClusters().Slice())).To(Equal([]string{"Default", "Secondary", "Edge"}))

	r, err = sys.ClustersService().List().Search(`name="Edge"`).CaseSensitive(true).Send()
	g.Expect(err).NotTo(HaveOccurred())
	edge := r.MustClusters().Slice()
	g.Expect(names(edge)).To(Equal([]string{"Edge"}))
	r, err = sys.ClustersService().List().Search(`datacenter=Default`).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(r.MustClusters().Slice())).To(Equal([]string{"Default", "Secondary"}))

	nr, err := sys.ClustersService().ClusterService(edge[0].MustId()).NetworksService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(nr.MustNetworks().Slice())).To(Equal([]string{"edge-net", "storage"}))

	cr, err := sys.ClustersService().ClusterService(edge[0].MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	dcID := cr.MustCluster().MustDataCenter().MustId()
	dr, err := sys.DataCentersService().DataCenterService(dcID).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dr.MustDataCenter().MustName()).To(Equal("Remote"))

	dl, err := sys.DataCentersService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(dl.MustDataCenters().Slice())).To(Equal([]string{"Default", "Remote"}))

	// The ovirtmgmt network of the Default data center is shared by both clusters.
	all, err := sys.NetworksService().List().Search("name=ovirtmgmt").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all.MustNetworks().Slice()).To(HaveLen(1))

	_, err = sys.ClustersService().ClusterService("no-such-id").Get().Send()
	nf, ok := errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
	// The engine answers a GET of a missing entity with a bare 404: no <fault>.
	g.Expect(nf.Error()).NotTo(ContainSubstring("Fault detail"))
}

func TestVnicProfilesAreListedWithTheirNetwork(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithCluster(ovirtsim.Cluster{Name: "Edge", DataCenter: "Remote"}).
			WithVnicProfile(ovirtsim.VnicProfile{Name: "ovirtmgmt", Network: "ovirtmgmt", DataCenter: "Remote"})
	})
	conn := connect(t, sim)
	r, err := conn.SystemService().VnicProfilesService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	ps := r.MustProfiles().Slice()
	g.Expect(names(ps)).To(Equal([]string{"ovirtmgmt", "ovirtmgmt"}), "the same profile name in two data centers")
	g.Expect(ps[0].MustNetwork().MustId()).NotTo(Equal(ps[1].MustNetwork().MustId()))

	// Filter by the networks of a cluster, as clients must.
	nr, err := conn.SystemService().ClustersService().ClusterService(clusterID(t, conn, "Edge")).NetworksService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	edgeNet := nr.MustNetworks().Slice()[0].MustId()
	g.Expect(ps[1].MustNetwork().MustId()).To(Equal(edgeNet))

	pr, err := conn.SystemService().VnicProfilesService().ProfileService(ps[1].MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.MustProfile().MustName()).To(Equal("ovirtmgmt"))
}

func TestStorageDomainsReportFreeSpace(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithStorageDomain(ovirtsim.StorageDomain{Name: "iso", Type: "iso", FreeGB: 5}).
			WithStorageDomain(ovirtsim.StorageDomain{Name: "old", FreeGB: 100, Status: "maintenance"})
	})
	conn := connect(t, sim)
	r, err := conn.SystemService().StorageDomainsService().List().Search(`name="data"`).Send()
	g.Expect(err).NotTo(HaveOccurred())
	sds := r.MustStorageDomains().Slice()
	g.Expect(sds).To(HaveLen(1))
	g.Expect(sds[0].MustAvailable()).To(Equal(int64(1000) << 30))
	g.Expect(sds[0].MustType()).To(Equal(ovirtsdk.STORAGEDOMAINTYPE_DATA))
	_, hasStatus := sds[0].Status()
	g.Expect(hasStatus).To(BeFalse(), "an attached domain has its status only under its data center")

	r, err = conn.SystemService().StorageDomainsService().List().Search("status=maintenance").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(r.MustStorageDomains().Slice())).To(Equal([]string{"old"}))
	r, err = conn.SystemService().StorageDomainsService().List().Search("type=data and status=active").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(r.MustStorageDomains().Slice())).To(Equal([]string{"data", "fast"}))
	g.Expect(sim.StorageDomainFreeGB("fast")).To(Equal(int64(500)))
	g.Expect(sim.StorageDomainFreeGB("nope")).To(Equal(int64(-1)))
}

func TestTemplateSearchByNameClusterAndCase(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithTemplate(ovirtsim.Template{Name: "RHCOS-4.14", Cluster: "Secondary", Disks: []ovirtsim.TemplateDisk{{SizeGB: 16, Bootable: true}}})
	})
	conn := connect(t, sim)
	yes, no := true, false

	all := listTemplates(g, conn, "", nil)
	g.Expect(names(all)).To(Equal([]string{"Blank", "RHCOS-4.14", "rhcos-4.14", "ubuntu-22.04"}))

	// The engine's default is case-insensitive.
	g.Expect(names(listTemplates(g, conn, `name="rhcos-4.14"`, nil))).To(ConsistOf("rhcos-4.14", "RHCOS-4.14"))
	g.Expect(names(listTemplates(g, conn, `name="rhcos-4.14"`, &no))).To(ConsistOf("rhcos-4.14", "RHCOS-4.14"))
	g.Expect(names(listTemplates(g, conn, `name="rhcos-4.14"`, &yes))).To(Equal([]string{"rhcos-4.14"}))
	g.Expect(names(listTemplates(g, conn, `name=rhcos-4.14 and cluster="Secondary"`, nil))).To(Equal([]string{"RHCOS-4.14"}))
	g.Expect(names(listTemplates(g, conn, `name="rhcos-4.14" and cluster=Default`, &yes))).To(Equal([]string{"rhcos-4.14"}))
	g.Expect(listTemplates(g, conn, `name="rhcos-4.14" and cluster=Secondary`, &yes)).To(BeEmpty())
	g.Expect(names(listTemplates(g, conn, `name=rh*`, &yes))).To(Equal([]string{"rhcos-4.14"}))
	g.Expect(names(listTemplates(g, conn, `name=*04`, nil))).To(Equal([]string{"ubuntu-22.04"}))
	g.Expect(names(listTemplates(g, conn, `name=ubuntu-22.04 or name=Blank`, nil))).To(Equal([]string{"Blank", "ubuntu-22.04"}))
	g.Expect(names(listTemplates(g, conn, `os=rhcos_x64`, nil))).To(Equal([]string{"rhcos-4.14"}))
	g.Expect(names(listTemplates(g, conn, `name!=*u* and status=ok`, nil))).To(Equal([]string{"Blank", "RHCOS-4.14", "rhcos-4.14"}))
	g.Expect(names(listTemplates(g, conn, `datacenter=Default sortby name desc`, nil))).To(Equal([]string{"ubuntu-22.04", "rhcos-4.14", "RHCOS-4.14"}))

	// Unknown search fields are a 400 fault, like the engine.
	_, err := conn.SystemService().TemplatesService().List().Search(`colour=red`).Send()
	g.Expect(err).To(MatchError(ContainSubstring(`unknown field 'colour'`)))
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "400"`)))
	_, err = conn.SystemService().TemplatesService().List().Search(`name="unterminated`).Send()
	g.Expect(err).To(MatchError(ContainSubstring("unterminated quote")))
	_, err = conn.SystemService().TemplatesService().List().Search(`name="x"`).CaseSensitive(true).Max(1).Query("case_sensitive", "maybe").Send()
	g.Expect(err).To(MatchError(ContainSubstring("Invalid value 'maybe' for boolean parameter 'case_sensitive'")))
}

func TestSeveralTemplateVersionsShareAName(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithTemplate(ovirtsim.Template{Name: "rhcos-4.14", Cluster: "Default", Version: 2, OSType: "rhcos_x64",
			Disks: []ovirtsim.TemplateDisk{{Alias: "rhcos-4.14-v2_Disk1", SizeGB: 20, StorageDomain: "fast", Bootable: true}}})
	})
	conn := connect(t, sim)
	ts := listTemplates(g, conn, `name="rhcos-4.14"`, nil)
	g.Expect(ts).To(HaveLen(2))
	v1, v2 := ts[0], ts[1]
	g.Expect(v1.MustVersion().MustVersionNumber()).To(BeEquivalentTo(1))
	g.Expect(v2.MustVersion().MustVersionNumber()).To(BeEquivalentTo(2))
	g.Expect(v2.MustVersion().MustBaseTemplate().MustId()).To(Equal(v1.MustId()))
	g.Expect(v1.MustVersion().MustBaseTemplate().MustId()).To(Equal(v1.MustId()))

	// Creating by name picks the latest version; by id, the given one.
	vm, _ := vmBuilder("by-name", "rhcos-4.14", "Default").Build()
	r, err := conn.SystemService().VmsService().Add().Vm(vm).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustVm().MustTemplate().MustId()).To(Equal(v2.MustId()))
	st, _ := sim.VMByName("by-name")
	g.Expect(st.TemplateVersion).To(Equal(2))
	g.Expect(st.Disks[0].Alias).To(Equal("rhcos-4.14-v2_Disk1"))
	g.Expect(st.Disks[0].StorageDomain).To(Equal("fast"))

	vm, _ = ovirtsdk.NewVmBuilder().Name("by-id").ClusterBuilder(ovirtsdk.NewClusterBuilder().Name("Default")).
		TemplateBuilder(ovirtsdk.NewTemplateBuilder().Id(v1.MustId())).Build()
	_, err = conn.SystemService().VmsService().Add().Vm(vm).Send()
	g.Expect(err).NotTo(HaveOccurred())
	st, _ = sim.VMByName("by-id")
	g.Expect(st.TemplateVersion).To(Equal(1))
}

func TestTemplateDiskAttachmentsAndDisks(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	tid := templateID(t, conn, "rhcos-4.14")
	ts := conn.SystemService().TemplatesService().TemplateService(tid)
	r, err := ts.DiskAttachmentsService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	atts := r.MustAttachments().Slice()
	g.Expect(atts).To(HaveLen(1))
	g.Expect(atts[0].MustBootable()).To(BeTrue())
	g.Expect(atts[0].MustInterface()).To(Equal(ovirtsdk.DISKINTERFACE_VIRTIO_SCSI))
	diskID := atts[0].MustDisk().MustId()
	g.Expect(atts[0].MustId()).To(Equal(diskID), "the attachment id is the disk id")

	dr, err := conn.SystemService().DisksService().DiskService(diskID).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	d := dr.MustDisk()
	g.Expect(d.MustAlias()).To(Equal("rhcos-4.14_Disk1"))
	g.Expect(d.MustProvisionedSize()).To(Equal(int64(16) << 30))
	g.Expect(d.MustFormat()).To(Equal(ovirtsdk.DISKFORMAT_COW))
	g.Expect(d.MustStatus()).To(Equal(ovirtsdk.DISKSTATUS_OK))
	g.Expect(d.MustStorageDomains().Slice()[0].MustId()).To(Equal(sdID(t, conn, "data")))

	// follow embeds the disks, as the engine does.
	tr, err := ts.Get().Follow("disk_attachments.disk,nics").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tr.MustTemplate().MustDiskAttachments().Slice()[0].MustDisk().MustAlias()).To(Equal("rhcos-4.14_Disk1"))
	nics := tr.MustTemplate().MustNics().Slice()
	g.Expect(names(nics)).To(Equal([]string{"nic1"}))

	ar, err := ts.DiskAttachmentsService().AttachmentService(diskID).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ar.MustAttachment().MustTemplate().MustId()).To(Equal(tid))
}
