package ovirtsim_test

import (
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

const api = "/ovirt-engine/api"

// hrefOf returns the href of anything go-ovirt gives one.
func hrefOf(o interface{ Href() (string, bool) }) string {
	h, _ := o.Href()
	return h
}

func TestLinksAndHrefs(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	sys := conn.SystemService()
	id, vms := startedVM(t, sim, conn, "linked", "rhcos-4.14", false)

	v := getVM(t, conn, id, "")
	g.Expect(hrefOf(v)).To(Equal(api + "/vms/" + id))
	g.Expect(hrefOf(v.MustDiskAttachments())).To(Equal(api + "/vms/" + id + "/diskattachments"))
	g.Expect(hrefOf(v.MustNics())).To(Equal(api + "/vms/" + id + "/nics"))
	g.Expect(hrefOf(v.MustReportedDevices())).To(Equal(api + "/vms/" + id + "/reporteddevices"))
	g.Expect(hrefOf(v.MustPermissions())).To(Equal(api + "/vms/" + id + "/permissions"))
	g.Expect(hrefOf(v.MustSnapshots())).To(Equal(api + "/vms/" + id + "/snapshots"))
	g.Expect(v.MustDiskAttachments().Slice()).To(BeEmpty(), "a link is not an inline collection")
	cid := v.MustCluster().MustId()
	g.Expect(hrefOf(v.MustCluster())).To(Equal(api + "/clusters/" + cid))
	g.Expect(hrefOf(v.MustTemplate())).To(Equal(api + "/templates/" + v.MustTemplate().MustId()))

	// go-ovirt's FollowLink works on the links.
	got, err := conn.FollowLink(v.MustNics())
	g.Expect(err).NotTo(HaveOccurred())
	nics := got.(*ovirtsdk.NicSlice).Slice()
	g.Expect(nics).To(HaveLen(1))
	nid := nics[0].MustId()
	g.Expect(hrefOf(nics[0])).To(Equal(api + "/vms/" + id + "/nics/" + nid))
	g.Expect(hrefOf(nics[0].MustReportedDevices())).To(Equal(api + "/vms/" + id + "/nics/" + nid + "/reporteddevices"))
	g.Expect(hrefOf(nics[0].MustVnicProfile())).To(HavePrefix(api + "/vnicprofiles/"))

	// Followed collections carry their own hrefs.
	f := getVM(t, conn, id, "disk_attachments.disk,nics.reported_devices")
	da := f.MustDiskAttachments().Slice()[0]
	did := da.MustDisk().MustId()
	g.Expect(hrefOf(da)).To(Equal(api + "/vms/" + id + "/diskattachments/" + did))
	g.Expect(hrefOf(da.MustDisk())).To(Equal(api + "/disks/" + did))
	g.Expect(hrefOf(da.MustDisk().MustPermissions())).To(Equal(api + "/disks/" + did + "/permissions"))
	sdRef := da.MustDisk().MustStorageDomains().Slice()[0]
	g.Expect(hrefOf(sdRef)).To(Equal(api + "/storagedomains/" + sdRef.MustId()))
	rd := f.MustNics().Slice()[0].MustReportedDevices().Slice()[0]
	g.Expect(hrefOf(rd)).To(Equal(api + "/vms/" + id + "/nics/" + nid + "/reporteddevices/" + rd.MustId()))
	vrd, err := vms.ReportedDevicesService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	r0 := vrd.MustReportedDevice().Slice()[0]
	g.Expect(hrefOf(r0)).To(Equal(api + "/vms/" + id + "/reporteddevices/" + r0.MustId()))

	// Templates, clusters, data centers, disks, storage domains, profiles.
	tid := templateID(t, conn, "rhcos-4.14")
	tr, err := sys.TemplatesService().TemplateService(tid).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hrefOf(tr.MustTemplate())).To(Equal(api + "/templates/" + tid))
	g.Expect(hrefOf(tr.MustTemplate().MustDiskAttachments())).To(Equal(api + "/templates/" + tid + "/diskattachments"))
	g.Expect(hrefOf(tr.MustTemplate().MustNics())).To(Equal(api + "/templates/" + tid + "/nics"))
	tn, err := sys.TemplatesService().TemplateService(tid).NicsService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hrefOf(tn.MustNics().Slice()[0])).To(Equal(api + "/templates/" + tid + "/nics/" + tn.MustNics().Slice()[0].MustId()))

	cr, err := sys.ClustersService().ClusterService(cid).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hrefOf(cr.MustCluster())).To(Equal(api + "/clusters/" + cid))
	g.Expect(hrefOf(cr.MustCluster().MustNetworks())).To(Equal(api + "/clusters/" + cid + "/networks"))
	dcID := cr.MustCluster().MustDataCenter().MustId()
	g.Expect(hrefOf(cr.MustCluster().MustDataCenter())).To(Equal(api + "/datacenters/" + dcID))
	cn, err := sys.ClustersService().ClusterService(cid).NetworksService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hrefOf(cn.MustNetworks().Slice()[0])).To(Equal(api + "/clusters/" + cid + "/networks/" + cn.MustNetworks().Slice()[0].MustId()))

	dr, err := sys.DataCentersService().DataCenterService(dcID).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hrefOf(dr.MustDataCenter().MustStorageDomains())).To(Equal(api + "/datacenters/" + dcID + "/storagedomains"))
	g.Expect(hrefOf(dr.MustDataCenter().MustClusters())).To(Equal(api + "/datacenters/" + dcID + "/clusters"))

	dk, err := sys.DisksService().DiskService(did).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hrefOf(dk.MustDisk())).To(Equal(api + "/disks/" + did))
	sid := sdID(t, conn, "data")
	sr, err := sys.StorageDomainsService().StorageDomainService(sid).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hrefOf(sr.MustStorageDomain())).To(Equal(api + "/storagedomains/" + sid))
	g.Expect(hrefOf(sr.MustStorageDomain().MustDisks())).To(Equal(api + "/storagedomains/" + sid + "/disks"))
	pr, err := sys.VnicProfilesService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	p := pr.MustProfiles().Slice()[0]
	g.Expect(hrefOf(p)).To(Equal(api + "/vnicprofiles/" + p.MustId()))
	g.Expect(hrefOf(p.MustNetwork())).To(Equal(api + "/networks/" + p.MustNetwork().MustId()))

	// On the wire: <link href="..." rel="..."/> children.
	req, err := newAuthedRequest(sim, "GET", "/vms/"+id, "")
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := httpsClient(sim).Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	body := readAll(resp)
	g.Expect(body).To(HavePrefix(`<vm id="` + id + `" href="` + api + `/vms/` + id + `">`))
	g.Expect(body).To(ContainSubstring(`<link href="` + api + `/vms/` + id + `/nics" rel="nics"/>`))
	g.Expect(body).To(ContainSubstring(`<link href="` + api + `/vms/` + id + `/diskattachments" rel="diskattachments"/>`))
}

func TestIgnoreFollowReturnsOnlyLinks(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithIgnoreFollow() })
	conn := connect(t, sim)
	id, vms := startedVM(t, sim, conn, "proxied", "rhcos-4.14", false)
	const follow = "disk_attachments.disk,nics.reported_devices"

	v := getVM(t, conn, id, follow)
	g.Expect(v.MustDiskAttachments().Slice()).To(BeEmpty(), "follow ignored: only the link")
	g.Expect(hrefOf(v.MustDiskAttachments())).To(Equal(api + "/vms/" + id + "/diskattachments"))
	g.Expect(v.MustNics().Slice()).To(BeEmpty())
	g.Expect(hrefOf(v.MustNics())).To(Equal(api + "/vms/" + id + "/nics"))
	l, err := conn.SystemService().VmsService().List().Search("name=proxied").Follow(follow).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.MustVms().Slice()[0].MustNics().Slice()).To(BeEmpty())

	// The sub-collections still answer fully.
	das, err := vms.DiskAttachmentsService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(das.MustAttachments().Slice()).To(HaveLen(1))
	nics, err := vms.NicsService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nics.MustNics().Slice()).To(HaveLen(1))
	rd, err := vms.ReportedDevicesService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rd.MustReportedDevice().Slice()).To(HaveLen(6))

	sim.SetIgnoreFollow(false)
	g.Expect(getVM(t, conn, id, follow).MustNics().Slice()).To(HaveLen(1))
	code, body := admin(t, sim, "PUT", "/sim/follow", `{"ignore": true}`)
	g.Expect(code).To(Equal(200), body)
	g.Expect(sim.Dump().Settings.IgnoreFollow).To(BeTrue())
	g.Expect(getVM(t, conn, id, follow).MustNics().Slice()).To(BeEmpty())
	code, _ = admin(t, sim, "PUT", "/sim/follow", `{}`)
	g.Expect(code).To(Equal(400))
	sim.Reset()
	g.Expect(sim.Dump().Settings.IgnoreFollow).To(BeTrue(), "Reset returns to the built setting")
}

func TestStatusCodes(t *testing.T) {
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithStorageDomain(ovirtsim.StorageDomain{Name: "tiny", FreeGB: 5}).
			WithStorageDomain(ovirtsim.StorageDomain{Name: "parked", FreeGB: 1000, Status: "maintenance"}).
			WithStorageDomain(ovirtsim.StorageDomain{Name: "gone", FreeGB: 1000, Status: "inactive"}).
			WithVnicProfile(ovirtsim.VnicProfile{Name: "storage", Network: "storage"}) // not on any cluster
	})
	conn := connect(t, sim)
	sys := conn.SystemService()
	id := createVM(t, conn, "taken", false)
	vms := sys.VmsService().VmService(id)
	tpl := templateDiskID(t, conn, "rhcos-4.14")
	add := func(vm *ovirtsdk.Vm, clone bool) func() error {
		return func() error {
			_, err := sys.VmsService().Add().Vm(vm).Clone(clone).Send()
			return err
		}
	}
	addNIC := func(name, profile string) func() error {
		return func() error {
			_, err := vms.NicsService().Add().Nic(ovirtsdk.NewNicBuilder().Name(name).
				VnicProfileBuilder(ovirtsdk.NewVnicProfileBuilder().Id(profile)).MustBuild()).Send()
			return err
		}
	}
	mgmt := profileID(t, sim, "ovirtmgmt", "Default")
	cases := []struct {
		name   string
		call   func() error
		status string
		detail string // "" means an empty body: no <fault>
	}{
		{"VM name already used", add(vmBuilder("taken", "rhcos-4.14", "Default").MustBuild(), false), "409",
			"[Cannot add VM. The VM name is already in use, please choose a unique name and try again.]"},
		{"low disk space", add(overrideSD("big", tpl, sdID(t, conn, "tiny"), ovirtsdk.DISKFORMAT_COW), true), "409",
			"[Cannot add VM. Low disk space on Storage Domain tiny.]"},
		{"storage domain in maintenance", add(overrideSD("m", tpl, sdID(t, conn, "parked"), ovirtsdk.DISKFORMAT_COW), true), "409",
			"[Cannot add VM. The relevant Storage Domain's status is Maintenance.]"},
		{"storage domain inactive", add(overrideSD("i", tpl, sdID(t, conn, "gone"), ovirtsdk.DISKFORMAT_COW), true), "409",
			"[Cannot add VM. The relevant Storage Domain's status is Inactive.]"},
		{"NIC name already in use", addNIC("nic1", mgmt), "409", "[Cannot add Interface. Interface name is already in use.]"},
		{"network not in cluster", addNIC("nic9", profileID(t, sim, "storage", "Default")), "409",
			"[Cannot add Interface. Network storage is not attached to the Cluster Default of the VM.]"},
		{"unknown vNIC profile", addNIC("nic8", "99999999-0000-4000-8000-000000000000"), "400",
			"[Cannot add Interface. The specified vNIC profile doesn't exist.]"},
		{"unknown storage domain in a clone override",
			add(overrideSD("u", tpl, "d0d0d0d0-0000-4000-8000-000000000000", ovirtsdk.DISKFORMAT_COW), true), "400",
			"[Cannot add VM. Storage Domain doesn't exist.]"},
		{"disk id not of the template", add(overrideSD("n", templateDiskID(t, conn, "ubuntu-22.04"), sdID(t, conn, "data"), ovirtsdk.DISKFORMAT_COW), true),
			"404", ""},
		{"template named in POST /vms not found", add(vmBuilder("x", "no-such-template", "Default").MustBuild(), false), "404",
			"Entity not found: Template: name=no-such-template"},
		{"cluster named in POST /vms not found", add(vmBuilder("x", "rhcos-4.14", "no-such-cluster").MustBuild(), false), "404",
			"Entity not found: Cluster: name=no-such-cluster"},
		{"GET of a missing VM", func() error { _, err := sys.VmsService().VmService("nope").Get().Send(); return err }, "404", ""},
		{"GET of a missing NIC", func() error { _, err := vms.NicsService().NicService("nope").Get().Send(); return err }, "404", ""},
		{"GET of a missing disk", func() error { _, err := sys.DisksService().DiskService("nope").Get().Send(); return err }, "404", ""},
		{"GET of a missing template", func() error {
			_, err := sys.TemplatesService().TemplateService("nope").Get().Send()
			return err
		}, "404", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.call()
			g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "` + tc.status + `"`)))
			if tc.detail == "" {
				g.Expect(err.Error()).NotTo(ContainSubstring("Fault"), "an empty body")
			} else {
				g.Expect(err).To(MatchError(ContainSubstring(`Fault detail is "` + tc.detail + `"`)))
			}
			switch tc.status {
			case "404":
				_, ok := errAs[*ovirtsdk.NotFoundError](err)
				g.Expect(ok).To(BeTrue(), "got %T", err)
			case "409":
				_, ok := errAs[*ovirtsdk.ConflictError](err)
				g.Expect(ok).To(BeTrue(), "got %T", err)
			}
		})
	}
}

func TestCreateAndDeleteEnvelopes(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{ImageLock: time.Second}) })
	conn := connect(t, sim)
	c := httpsClient(sim)
	do := func(method, path, body string, hdr ...string) (int, string) {
		req, err := newAuthedRequest(sim, method, path, body)
		g.Expect(err).NotTo(HaveOccurred())
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, readAll(resp)
	}
	vmXML := func(name string) string {
		return `<vm><name>` + name + `</name><cluster><name>Default</name></cluster><template><name>rhcos-4.14</name></template></vm>`
	}

	// 202 Accepted with the creation status: the disks are async tasks.
	st, body := do("POST", "/vms", vmXML("accepted"))
	g.Expect(st).To(Equal(http.StatusAccepted))
	g.Expect(body).To(ContainSubstring("<creation_status>pending</creation_status>"))
	g.Expect(body).To(ContainSubstring("<status>image_locked</status>"))
	// The SDK takes the 202 and still parses the VM.
	r, err := conn.SystemService().VmsService().Add().Vm(vmBuilder("sdk", "rhcos-4.14", "Default").MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustVm().MustName()).To(Equal("sdk"))
	g.Expect(r.MustVm().MustStatus()).To(Equal(ovirtsdk.VMSTATUS_IMAGE_LOCKED))

	// Expect: 201-created waits for the tasks and answers 201 (also through the SDK).
	start := time.Now()
	r, err = conn.SystemService().VmsService().Add().Vm(vmBuilder("blocking", "rhcos-4.14", "Default").MustBuild()).
		Header("Expect", "201-created").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(time.Since(start)).To(BeNumerically(">=", 900*time.Millisecond), "waited for the image lock")
	g.Expect(r.MustVm().MustStatus()).To(Equal(ovirtsdk.VMSTATUS_DOWN))
	g.Expect(sim.Counters().Requests).To(ContainElement(ovirtsim.RequestCount{
		RequestKey: ovirtsim.RequestKey{Method: "POST", Path: "/vms", Status: 201}, Count: 1}))
	st, body = do("POST", "/vms", vmXML("raw201"), "Expect", "201-created")
	g.Expect(st).To(Equal(http.StatusCreated))
	g.Expect(body).NotTo(ContainSubstring("creation_status"))

	// A VM without disks (Blank) has no async task: 201.
	st, _ = do("POST", "/vms", `<vm><name>blank</name><cluster><name>Default</name></cluster><template><name>Blank</name></template></vm>`)
	g.Expect(st).To(Equal(http.StatusCreated))

	// DELETE answers 200 with a completed action.
	v, _ := sim.VMByName("raw201")
	st, body = do("DELETE", "/vms/"+v.ID, "")
	g.Expect(st).To(Equal(http.StatusOK))
	g.Expect(body).To(Equal("<action><status>complete</status></action>"))
	_, err = conn.SystemService().VmsService().VmService(r.MustVm().MustId()).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred(), "the SDK accepts the action body")
}

func TestStorageDomainStatusOnlyUnderDataCenter(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	sys := conn.SystemService()
	g.Expect(sim.SetStorageDomainStatus("fast", "maintenance")).To(Succeed())

	l, err := sys.StorageDomainsService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.MustStorageDomains().Slice()).To(HaveLen(2))
	for _, sd := range l.MustStorageDomains().Slice() {
		_, ok := sd.Status()
		g.Expect(ok).To(BeFalse(), "top-level %s: no status for an attached domain", sd.MustName())
	}
	fast := sdID(t, conn, "fast")
	one, err := sys.StorageDomainsService().StorageDomainService(fast).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, ok := one.MustStorageDomain().Status()
	g.Expect(ok).To(BeFalse())

	dcs, err := sys.DataCentersService().List().Search("name=Default").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dcs.MustDataCenters().Slice()).To(HaveLen(1))
	dc := sys.DataCentersService().DataCenterService(dcs.MustDataCenters().Slice()[0].MustId())
	att, err := dc.StorageDomainsService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	status := map[string]ovirtsdk.StorageDomainStatus{}
	for _, sd := range att.MustStorageDomains().Slice() {
		status[sd.MustName()] = sd.MustStatus()
	}
	g.Expect(status).To(Equal(map[string]ovirtsdk.StorageDomainStatus{
		"data": ovirtsdk.STORAGEDOMAINSTATUS_ACTIVE, "fast": ovirtsdk.STORAGEDOMAINSTATUS_MAINTENANCE}))
	a, err := dc.StorageDomainsService().StorageDomainService(fast).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.MustStorageDomain().MustStatus()).To(Equal(ovirtsdk.STORAGEDOMAINSTATUS_MAINTENANCE))
	g.Expect(hrefOf(a.MustStorageDomain())).To(HaveSuffix("/datacenters/" + dcs.MustDataCenters().Slice()[0].MustId() + "/storagedomains/" + fast))

	g.Expect(sim.SetStorageDomainStatus("fast", "active")).To(Succeed())
	a, err = dc.StorageDomainsService().StorageDomainService(fast).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.MustStorageDomain().MustStatus()).To(Equal(ovirtsdk.STORAGEDOMAINSTATUS_ACTIVE))
	_, err = dc.StorageDomainsService().StorageDomainService("nope").Get().Send()
	_, ok = errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue())
}

func TestTemplateDiskCopiesOnSeveralDomains(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithStorageDomain(ovirtsim.StorageDomain{Name: "third", FreeGB: 100}).
			WithTemplate(ovirtsim.Template{Name: "multi", Cluster: "Default", Disks: []ovirtsim.TemplateDisk{
				{Alias: "multi_Disk1", SizeGB: 8, StorageDomain: "data", StorageDomains: []string{"fast", "third"}, Bootable: true}}})
	})
	conn := connect(t, sim)
	sys := conn.SystemService()
	want := []string{sdID(t, conn, "data"), sdID(t, conn, "fast"), sdID(t, conn, "third")}
	sdIDs := func(d *ovirtsdk.Disk) []string {
		var out []string
		for _, s := range d.MustStorageDomains().Slice() {
			out = append(out, s.MustId())
		}
		return out
	}
	tid := templateID(t, conn, "multi")
	das, err := sys.TemplatesService().TemplateService(tid).DiskAttachmentsService().List().Follow("disk").Send()
	g.Expect(err).NotTo(HaveOccurred())
	td := das.MustAttachments().Slice()[0].MustDisk()
	g.Expect(sdIDs(td)).To(Equal(want))
	dr, err := sys.DisksService().DiskService(td.MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sdIDs(dr.MustDisk())).To(Equal(want))
	for _, ts := range sim.Dump().Templates {
		if ts.Name == "multi" {
			g.Expect(ts.Disks[0].CopiesOn).To(Equal([]string{"fast", "third"}))
		}
	}

	over := func(name, sd string) *ovirtsdk.Vm {
		return ovirtsdk.NewVmBuilder().Name(name).
			ClusterBuilder(ovirtsdk.NewClusterBuilder().Name("Default")).
			TemplateBuilder(ovirtsdk.NewTemplateBuilder().Name("multi")).
			DiskAttachmentsOfAny(ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(
				ovirtsdk.NewDiskBuilder().Id(td.MustId()).StorageDomainsOfAny(ovirtsdk.NewStorageDomainBuilder().Id(sd).MustBuild())).MustBuild()).
			MustBuild()
	}
	// A thin VM may go to any domain with a copy, not to one without.
	for _, tc := range []struct{ vm, sd string }{{"on-fast", "fast"}, {"on-third", "third"}} {
		_, err := sys.VmsService().Add().Vm(over(tc.vm, sdID(t, conn, tc.sd))).Clone(false).Send()
		g.Expect(err).NotTo(HaveOccurred(), tc.vm)
		st, _ := sim.VMByName(tc.vm)
		g.Expect(st.Disks[0].StorageDomain).To(Equal(tc.sd))
	}
	g.Expect(sim.AddStorageDomain(ovirtsim.StorageDomain{Name: "empty", FreeGB: 100})).To(Succeed())
	_, err = sys.VmsService().Add().Vm(over("nowhere", sdID(t, conn, "empty"))).Clone(false).Send()
	g.Expect(err).To(MatchError(ContainSubstring("The Template that the VM is based on does not exist on the Storage Domain.")))

	// Without an override the engine picks the first active domain with a copy.
	g.Expect(sim.SetStorageDomainStatus("data", "maintenance")).To(Succeed())
	_, err = sys.VmsService().Add().Vm(vmBuilder("picked", "multi", "Default").MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	st, _ := sim.VMByName("picked")
	g.Expect(st.Disks[0].StorageDomain).To(Equal("fast"))
}

func TestBuildRejectsBadTemplateCopiesAndGuestInterfaces(t *testing.T) {
	base := func() *ovirtsim.Builder {
		return ovirtsim.NewBuilder().WithCluster(ovirtsim.Cluster{Name: "c"}).
			WithStorageDomain(ovirtsim.StorageDomain{Name: "d", FreeGB: 10}).
			WithStorageDomain(ovirtsim.StorageDomain{Name: "far", DataCenter: "Other", FreeGB: 10})
	}
	cases := []struct {
		name string
		b    *ovirtsim.Builder
		want string
	}{
		{"a copy on an unknown domain", base().WithTemplate(ovirtsim.Template{Name: "t", Disks: []ovirtsim.TemplateDisk{
			{SizeGB: 1, StorageDomain: "d", StorageDomains: []string{"x"}}}}), `unknown storage domain "x"`},
		{"a copy in another data center", base().WithTemplate(ovirtsim.Template{Name: "t", Disks: []ovirtsim.TemplateDisk{
			{SizeGB: 1, StorageDomain: "d", StorageDomains: []string{"far"}}}}), `is not in data center`},
		{"a copy named twice", base().WithTemplate(ovirtsim.Template{Name: "t", Disks: []ovirtsim.TemplateDisk{
			{SizeGB: 1, StorageDomain: "d", StorageDomains: []string{"d"}}}}), `named twice`},
		{"a guest interface without a name", base().WithGuestInterfaces(ovirtsim.GuestInterfaces{
			Extra: []ovirtsim.GuestInterface{{IPs: []string{"1.2.3.4"}}}}), "without a name"},
		{"a guest interface with a bad MAC", base().WithGuestInterfaces(ovirtsim.GuestInterfaces{
			Extra: []ovirtsim.GuestInterface{{Name: "x", MAC: "zz"}}}), "invalid MAC"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sim, err := tc.b.Build()
			if sim != nil {
				sim.Close()
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}
