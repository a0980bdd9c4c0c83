package ovirtsim_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

const blankID = "00000000-0000-0000-0000-000000000000"

// overrideSD builds a VM whose template disk goes to storage domain sd.
func overrideSD(name, tplDiskID, sd string, format ovirtsdk.DiskFormat) *ovirtsdk.Vm {
	return ovirtsdk.NewVmBuilder().Name(name).
		ClusterBuilder(ovirtsdk.NewClusterBuilder().Name("Default")).
		TemplateBuilder(ovirtsdk.NewTemplateBuilder().Name("rhcos-4.14")).
		DiskAttachmentsOfAny(ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(
			ovirtsdk.NewDiskBuilder().Id(tplDiskID).Format(format).Sparse(format == ovirtsdk.DISKFORMAT_COW).
				StorageDomainsOfAny(ovirtsdk.NewStorageDomainBuilder().Id(sd).MustBuild())).MustBuild()).
		MustBuild()
}

func templateDiskID(t testing.TB, conn *ovirtsdk.Connection, template string) string {
	t.Helper()
	r, err := conn.SystemService().TemplatesService().TemplateService(templateID(t, conn, template)).DiskAttachmentsService().List().Send()
	if err != nil {
		t.Fatal(err)
	}
	return r.MustAttachments().Slice()[0].MustDisk().MustId()
}

func TestCreateVMFromTemplateWithEverySetting(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	ignition := `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,m1"}}]}}`
	vm := ovirtsdk.NewVmBuilder().Name("m1").
		ClusterBuilder(ovirtsdk.NewClusterBuilder().Id(clusterID(t, conn, "Default"))).
		TemplateBuilder(ovirtsdk.NewTemplateBuilder().Id(templateID(t, conn, "rhcos-4.14"))).
		Type(ovirtsdk.VMTYPE_HIGH_PERFORMANCE).
		CpuBuilder(ovirtsdk.NewCpuBuilder().TopologyBuilder(ovirtsdk.NewCpuTopologyBuilder().Sockets(2).Cores(3).Threads(1))).
		Memory(6 << 30).
		MemoryPolicyBuilder(ovirtsdk.NewMemoryPolicyBuilder().Guaranteed(4 << 30).Max(12 << 30)).
		Comment("owner=uid-123").Description("worker of cluster x").
		InitializationBuilder(ovirtsdk.NewInitializationBuilder().CustomScript(ignition).HostName("m1")).
		OsBuilder(ovirtsdk.NewOperatingSystemBuilder().Type("rhcos_x64")).
		MustBuild()
	r, err := conn.SystemService().VmsService().Add().Vm(vm).Clone(true).Query("correlation_id", "c-1").Send()
	g.Expect(err).NotTo(HaveOccurred())
	v := r.MustVm()
	g.Expect(v.MustStatus()).To(Equal(ovirtsdk.VMSTATUS_IMAGE_LOCKED), "the engine answers before the disks exist")
	id := v.MustId()
	g.Expect(id).To(MatchRegexp(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`))
	g.Expect(v.MustTemplate().MustId()).To(Equal(blankID), "clone=true: the template becomes Blank")
	g.Expect(v.MustOriginalTemplate().MustId()).To(Equal(templateID(t, conn, "rhcos-4.14")))

	got, err := conn.SystemService().VmsService().VmService(id).Get().AllContent(true).Send()
	g.Expect(err).NotTo(HaveOccurred())
	v = got.MustVm()
	g.Expect(v.MustStatus()).To(Equal(ovirtsdk.VMSTATUS_DOWN), "zero ImageLock: unlocked on the next read")
	g.Expect(v.MustType()).To(Equal(ovirtsdk.VMTYPE_HIGH_PERFORMANCE))
	g.Expect(v.MustCpu().MustTopology().MustSockets()).To(BeEquivalentTo(2))
	g.Expect(v.MustCpu().MustTopology().MustCores()).To(BeEquivalentTo(3))
	g.Expect(v.MustMemory()).To(Equal(int64(6) << 30))
	g.Expect(v.MustMemoryPolicy().MustGuaranteed()).To(Equal(int64(4) << 30))
	g.Expect(v.MustMemoryPolicy().MustMax()).To(Equal(int64(12) << 30))
	g.Expect(v.MustComment()).To(Equal("owner=uid-123"))
	g.Expect(v.MustDescription()).To(Equal("worker of cluster x"))
	g.Expect(v.MustOs().MustType()).To(Equal("rhcos_x64"))
	g.Expect(v.MustInitialization().MustCustomScript()).To(Equal(ignition))
	g.Expect(v.MustInitialization().MustHostName()).To(Equal("m1"))

	// Without all_content too: the Engine's VmMapper always maps the initialization.
	plain := getVM(t, conn, id, "")
	g.Expect(plain.MustInitialization().MustCustomScript()).To(Equal(ignition))

	st, ok := sim.VM(id)
	g.Expect(ok).To(BeTrue())
	g.Expect(st.Name).To(Equal("m1"))
	g.Expect(st.Template).To(Equal("rhcos-4.14"))
	g.Expect(st.Clone).To(BeTrue())
	g.Expect(st.CustomScript).To(Equal(ignition))
	g.Expect(st.MemoryMB).To(Equal(int64(6144)))
	g.Expect(st.GuaranteedMB).To(Equal(int64(4096)))
	g.Expect(st.Disks).To(HaveLen(1))
	g.Expect(st.Disks[0]).To(And(
		HaveField("Alias", "rhcos-4.14_Disk1"), HaveField("SizeGB", int64(16)), HaveField("Format", "cow"),
		HaveField("StorageDomain", "data"), HaveField("Bootable", true), HaveField("FromTemplate", true),
		HaveField("Interface", "virtio_scsi"), HaveField("Status", "ok")))
	g.Expect(sim.StorageDomainFreeGB("data")).To(Equal(int64(1000-16)), "clone=true consumes space")
}

func TestCreatedVMInheritsTheTemplate(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "inherit", false)
	v := getVM(t, conn, id, "nics")
	g.Expect(v.MustTemplate().MustId()).To(Equal(templateID(t, conn, "rhcos-4.14")), "clone=false keeps the template")
	g.Expect(v.MustOriginalTemplate().MustId()).To(Equal(v.MustTemplate().MustId()))
	g.Expect(v.MustCpu().MustTopology().MustCores()).To(BeEquivalentTo(4))
	g.Expect(v.MustMemory()).To(Equal(int64(8192) << 20))
	g.Expect(v.MustMemoryPolicy().MustGuaranteed()).To(Equal(int64(8192) << 20))
	g.Expect(v.MustOs().MustType()).To(Equal("rhcos_x64"))
	g.Expect(v.MustType()).To(Equal(ovirtsdk.VMTYPE_SERVER))
	nics := v.MustNics().Slice()
	g.Expect(names(nics)).To(Equal([]string{"nic1"}))
	g.Expect(nics[0].MustMac().MustAddress()).To(MatchRegexp(`^56:6f:[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$`))
	st, _ := sim.VM(id)
	g.Expect(st.NICs[0].VnicProfile).To(Equal("ovirtmgmt"))
	g.Expect(st.Disks[0].StorageDomain).To(Equal("data"))
	g.Expect(sim.StorageDomainFreeGB("data")).To(Equal(int64(1000)), "thin disks consume nothing")
}

func TestStorageDomainOverride(t *testing.T) {
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithStorageDomain(ovirtsim.StorageDomain{Name: "tiny", FreeGB: 10}).
			WithStorageDomain(ovirtsim.StorageDomain{Name: "parked", FreeGB: 1000, Status: "maintenance"}).
			WithStorageDomain(ovirtsim.StorageDomain{Name: "isos", FreeGB: 1000, Type: "iso"})
	})
	conn := connect(t, sim)
	tpl := templateDiskID(t, conn, "rhcos-4.14")
	add := func(vm *ovirtsdk.Vm, clone bool) error {
		_, err := conn.SystemService().VmsService().Add().Vm(vm).Clone(clone).Send()
		return err
	}

	t.Run("clone=true honours the override and consumes its space", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(add(overrideSD("o1", tpl, sdID(t, conn, "fast"), ovirtsdk.DISKFORMAT_RAW), true)).To(Succeed())
		st, _ := sim.VMByName("o1")
		g.Expect(st.Disks[0].StorageDomain).To(Equal("fast"))
		g.Expect(st.Disks[0].Format).To(Equal("raw"))
		g.Expect(st.Disks[0].Alias).To(Equal("rhcos-4.14_Disk1"))
		g.Expect(sim.StorageDomainFreeGB("fast")).To(Equal(int64(500 - 16)))
		g.Expect(sim.StorageDomainFreeGB("data")).To(Equal(int64(1000)))
	})
	t.Run("clone=false to the template's own domain is fine", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(add(overrideSD("o2", tpl, sdID(t, conn, "data"), ovirtsdk.DISKFORMAT_COW), false)).To(Succeed())
		st, _ := sim.VMByName("o2")
		g.Expect(st.Disks[0].StorageDomain).To(Equal("data"))
	})
	t.Run("clone=false to another domain is a 400", func(t *testing.T) {
		g := NewWithT(t)
		err := add(overrideSD("o3", tpl, sdID(t, conn, "fast"), ovirtsdk.DISKFORMAT_COW), false)
		g.Expect(err).To(MatchError(ContainSubstring(`[Cannot add VM. The Template that the VM is based on does not exist on the Storage Domain.]`)))
		g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "400"`)))
		_, found := sim.VMByName("o3")
		g.Expect(found).To(BeFalse())
	})
	t.Run("clone=false with a raw disk is a 400", func(t *testing.T) {
		g := NewWithT(t)
		err := add(overrideSD("o4", tpl, sdID(t, conn, "data"), ovirtsdk.DISKFORMAT_RAW), false)
		g.Expect(err).To(MatchError(ContainSubstring("Thin provisioned template disks can not be defined as Raw.")))
	})
	t.Run("not enough free space is a 409", func(t *testing.T) {
		g := NewWithT(t)
		err := add(overrideSD("o5", tpl, sdID(t, conn, "tiny"), ovirtsdk.DISKFORMAT_COW), true)
		g.Expect(err).To(MatchError(ContainSubstring(`[Cannot add VM. Low disk space on Storage Domain tiny.]`)))
		_, ok := errAs[*ovirtsdk.ConflictError](err)
		g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
		g.Expect(sim.StorageDomainFreeGB("tiny")).To(Equal(int64(10)))
	})
	t.Run("a domain in maintenance is a 409", func(t *testing.T) {
		g := NewWithT(t)
		err := add(overrideSD("o6", tpl, sdID(t, conn, "parked"), ovirtsdk.DISKFORMAT_COW), true)
		g.Expect(err).To(MatchError(ContainSubstring("[Cannot add VM. The relevant Storage Domain's status is Maintenance.]")))
		g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "409"`)))
	})
	t.Run("a non-data domain is a 400", func(t *testing.T) {
		g := NewWithT(t)
		err := add(overrideSD("o7", tpl, sdID(t, conn, "isos"), ovirtsdk.DISKFORMAT_COW), true)
		g.Expect(err).To(MatchError(ContainSubstring("is not a data domain")))
	})
	t.Run("an unknown domain is a 400", func(t *testing.T) {
		g := NewWithT(t)
		err := add(overrideSD("o8", tpl, "d0d0d0d0-0000-4000-8000-000000000000", ovirtsdk.DISKFORMAT_COW), true)
		g.Expect(err).To(MatchError(ContainSubstring("[Cannot add VM. Storage Domain doesn't exist.]")))
		g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "400"`)))
	})
	t.Run("a disk that is not the template's is a bare 404", func(t *testing.T) {
		g := NewWithT(t)
		err := add(overrideSD("o9", templateDiskID(t, conn, "ubuntu-22.04"), sdID(t, conn, "data"), ovirtsdk.DISKFORMAT_COW), true)
		nf, ok := errAs[*ovirtsdk.NotFoundError](err)
		g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
		g.Expect(nf.Error()).NotTo(ContainSubstring("Fault detail"))
	})
	t.Run("the template's domain in maintenance blocks thin VMs", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(sim.SetStorageDomainStatus("data", "maintenance")).To(Succeed())
		defer func() { g.Expect(sim.SetStorageDomainStatus("data", "active")).To(Succeed()) }()
		err := add(vmBuilder("o10", "rhcos-4.14", "Default").MustBuild(), false)
		g.Expect(err).To(MatchError(ContainSubstring("The relevant Storage Domain's status is Maintenance.")))
	})
}

func TestCreateVMValidation(t *testing.T) {
	sim := startSim(t)
	conn := connect(t, sim)
	createVM(t, conn, "taken", false)
	cases := []struct {
		name   string
		vm     *ovirtsdk.Vm
		status string
		detail string
	}{
		{"a duplicate name", vmBuilder("taken", "rhcos-4.14", "Default").MustBuild(), "409",
			"[Cannot add VM. The VM name is already in use, please choose a unique name and try again.]"},
		{"guaranteed memory above memory", vmBuilder("g", "rhcos-4.14", "Default").Memory(2 << 30).
			MemoryPolicyBuilder(ovirtsdk.NewMemoryPolicyBuilder().Guaranteed(3 << 30)).MustBuild(), "400",
			"[Cannot add VM. Physical Memory Guaranteed cannot exceed Memory Size.]"},
		{"an unknown template", vmBuilder("x", "no-such-template", "Default").MustBuild(), "404",
			"Entity not found: Template: name=no-such-template"},
		{"an unknown cluster", vmBuilder("x", "rhcos-4.14", "no-such-cluster").MustBuild(), "404",
			"Entity not found: Cluster: name=no-such-cluster"},
		{"an unknown template id", ovirtsdk.NewVmBuilder().Name("x").ClusterBuilder(ovirtsdk.NewClusterBuilder().Name("Default")).
			TemplateBuilder(ovirtsdk.NewTemplateBuilder().Id("11111111-2222-4333-8444-555555555555")).MustBuild(), "404",
			"Entity not found: Template: id=11111111-2222-4333-8444-555555555555"},
		{"a name with special characters", vmBuilder("bad name!", "rhcos-4.14", "Default").MustBuild(), "400",
			"The given name contains special characters"},
		{"no name, cluster or template", ovirtsdk.NewVmBuilder().Comment("c").MustBuild(), "400",
			"Vm [name, cluster.id|name, template.id|name] required for add"},
		{"an unknown VM type", vmBuilder("x", "rhcos-4.14", "Default").Type("tiny").MustBuild(), "400",
			"Invalid value 'tiny' for VM type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := conn.SystemService().VmsService().Add().Vm(tc.vm).Send()
			g.Expect(err).To(MatchError(ContainSubstring(tc.detail)))
			g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "` + tc.status + `"`)))
		})
	}
	g := NewWithT(t)
	g.Expect(sim.VMs()).To(HaveLen(1))
}

func TestImageLockThenDown(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithTimings(ovirtsim.Timings{ImageLock: time.Second, CloneFactor: 2})
	})
	conn := connect(t, sim)
	thinAt := time.Now()
	thin := createVM(t, conn, "thin", false)
	start := time.Now()
	cloned := createVM(t, conn, "cloned", true)
	v := getVM(t, conn, thin, "disk_attachments.disk")
	if time.Since(thinAt) < 900*time.Millisecond { // on a loaded machine the lock may be over already
		g.Expect(v.MustStatus()).To(Equal(ovirtsdk.VMSTATUS_IMAGE_LOCKED))
		g.Expect(v.MustDiskAttachments().Slice()[0].MustDisk().MustStatus()).To(Equal(ovirtsdk.DISKSTATUS_LOCKED))
	}

	g.Eventually(func() ovirtsdk.VmStatus { return vmStatus(t, conn, thin) }).WithTimeout(5 * time.Second).
		WithPolling(20 * time.Millisecond).Should(Equal(ovirtsdk.VMSTATUS_DOWN))
	if time.Since(start) < 1900*time.Millisecond {
		g.Expect(vmStatus(t, conn, cloned)).To(Equal(ovirtsdk.VMSTATUS_IMAGE_LOCKED), "clone takes CloneFactor x ImageLock")
	}
	g.Eventually(func() ovirtsdk.VmStatus { return vmStatus(t, conn, cloned) }).WithTimeout(5 * time.Second).
		WithPolling(20 * time.Millisecond).Should(Equal(ovirtsdk.VMSTATUS_DOWN))
	g.Expect(time.Since(start)).To(BeNumerically(">=", 2*time.Second))
	v = getVM(t, conn, cloned, "disk_attachments.disk")
	g.Expect(v.MustDiskAttachments().Slice()[0].MustDisk().MustStatus()).To(Equal(ovirtsdk.DISKSTATUS_OK))
}

func TestOperationsOnALockedVMAreConflicts(t *testing.T) {
	t.Parallel()
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{ImageLock: time.Hour}) })
	conn := connect(t, sim)
	id := createVM(t, conn, "locked", false)
	vms := conn.SystemService().VmsService().VmService(id)
	diskID := getVM(t, conn, id, "disk_attachments").MustDiskAttachments().Slice()[0].MustId()
	nicID := getVM(t, conn, id, "nics").MustNics().Slice()[0].MustId()
	profile := getVM(t, conn, id, "nics").MustNics().Slice()[0].MustVnicProfile().MustId()
	ops := map[string]struct {
		call   func() error
		detail string
	}{
		"start":    {func() error { _, err := vms.Start().Send(); return err }, "[Cannot run VM. VM is locked. Please try again in a few minutes.]"},
		"stop":     {func() error { _, err := vms.Stop().Send(); return err }, "[Cannot stop VM. VM is locked."},
		"shutdown": {func() error { _, err := vms.Shutdown().Send(); return err }, "[Cannot shutdown VM. VM is locked."},
		"remove":   {func() error { _, err := vms.Remove().Send(); return err }, "[Cannot remove VM. VM is locked."},
		"update": {func() error {
			_, err := vms.Update().Vm(ovirtsdk.NewVmBuilder().Comment("x").MustBuild()).Send()
			return err
		}, "[Cannot edit VM. Related operation is currently in progress. Please try again later.]"},
		"resize disk": {func() error {
			_, err := vms.DiskAttachmentsService().AttachmentService(diskID).Update().DiskAttachment(
				ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(ovirtsdk.NewDiskBuilder().ProvisionedSize(40 << 30)).MustBuild()).Send()
			return err
		}, "[Cannot edit Virtual Disk because the VM is in Image Locked status.]"},
		"add nic": {func() error {
			_, err := vms.NicsService().Add().Nic(ovirtsdk.NewNicBuilder().Name("nic2").
				VnicProfileBuilder(ovirtsdk.NewVnicProfileBuilder().Id(profile)).MustBuild()).Send()
			return err
		}, "[Cannot add Interface because the VM is in Image Locked status.]"},
		"remove nic": {func() error { _, err := vms.NicsService().NicService(nicID).Remove().Send(); return err }, "[Cannot remove Interface because the VM is in Image Locked status.]"},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := op.call()
			ce, ok := errAs[*ovirtsdk.ConflictError](err)
			g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
			g.Expect(ce.Code).To(Equal(409))
			g.Expect(ce.Error()).To(ContainSubstring(op.detail))
			g.Expect(ce.Error()).To(ContainSubstring(`Fault reason is "Operation Failed".`))
		})
	}
	g := NewWithT(t)
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_IMAGE_LOCKED), "reads work while locked")
}

func TestUpdateVM(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "before", false)
	createVM(t, conn, "other", false)
	vms := conn.SystemService().VmsService().VmService(id)
	r, err := vms.Update().Vm(ovirtsdk.NewVmBuilder().Name("after").Comment("c2").Memory(16 << 30).
		CpuBuilder(ovirtsdk.NewCpuBuilder().TopologyBuilder(ovirtsdk.NewCpuTopologyBuilder().Sockets(2).Cores(2).Threads(2))).
		MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustVm().MustName()).To(Equal("after"))
	st, _ := sim.VMByName("after")
	g.Expect(st).To(And(HaveField("Comment", "c2"), HaveField("MemoryMB", int64(16384)), HaveField("Sockets", 2), HaveField("Threads", 2)))
	_, found := sim.VMByName("before")
	g.Expect(found).To(BeFalse())

	_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().Name("other").MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot edit VM. The VM name is already in use")))
	_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().MemoryPolicyBuilder(ovirtsdk.NewMemoryPolicyBuilder().Guaranteed(32 << 30)).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot edit VM. Physical Memory Guaranteed cannot exceed Memory Size.]")))
}

func TestVMSearchAndFollow(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	a := createVM(t, conn, "web-1", false)
	createVM(t, conn, "web-2", true)
	vm := vmBuilder("DB-1", "ubuntu-22.04", "Secondary").Comment("owner=x").MustBuild()
	_, err := conn.SystemService().VmsService().Add().Vm(vm).Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = conn.SystemService().VmsService().VmService(a).Start().Send()
	g.Expect(err).NotTo(HaveOccurred())

	list := func(search string, cs *bool) []string {
		req := conn.SystemService().VmsService().List().Search(search)
		if cs != nil {
			req.CaseSensitive(*cs)
		}
		r, err := req.Send()
		g.Expect(err).NotTo(HaveOccurred())
		return names(r.MustVms().Slice())
	}
	yes := true
	g.Expect(list(`name="web-1"`, nil)).To(Equal([]string{"web-1"}))
	g.Expect(list(`name="db-1"`, nil)).To(Equal([]string{"DB-1"}))
	g.Expect(list(`name="db-1"`, &yes)).To(BeEmpty())
	g.Expect(list(`name=web-*`, nil)).To(Equal([]string{"web-1", "web-2"}))
	g.Expect(list(`cluster=Secondary`, nil)).To(Equal([]string{"DB-1"}))
	g.Expect(list(`status=up`, nil)).To(Equal([]string{"web-1"}))
	g.Expect(list(`comment="owner=x"`, nil)).To(Equal([]string{"DB-1"}))
	g.Expect(list(`datacenter=Default and status=down`, nil)).To(Equal([]string{"DB-1", "web-2"}))
	g.Expect(list(`name="web-1" and cluster="Secondary"`, nil)).To(BeEmpty())
	r, err := conn.SystemService().VmsService().List().Max(2).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(r.MustVms().Slice())).To(Equal([]string{"DB-1", "web-1"}))

	// follow embeds sub-collections in lists and in single GETs.
	r, err = conn.SystemService().VmsService().List().Search(`name=web-1`).Follow("disk_attachments.disk,nics.reported_devices,reported_devices").Send()
	g.Expect(err).NotTo(HaveOccurred())
	v := r.MustVms().Slice()[0]
	g.Expect(v.MustDiskAttachments().Slice()[0].MustDisk().MustAlias()).To(Equal("rhcos-4.14_Disk1"))
	g.Expect(v.MustNics().Slice()[0].MustReportedDevices().Slice()).To(HaveLen(6), "the VM-wide list")
	g.Expect(v.MustReportedDevices().Slice()).To(HaveLen(6))
	plain := getVM(t, conn, a, "")
	das, ok := plain.DiskAttachments()
	g.Expect(ok).To(BeTrue(), "the link makes go-ovirt create an empty slice")
	g.Expect(das.Slice()).To(BeEmpty(), "without follow there are no embedded attachments")
	href, _ := das.Href()
	g.Expect(href).To(Equal("/ovirt-engine/api/vms/" + a + "/diskattachments"))
	onlyAtt := getVM(t, conn, a, "disk_attachments")
	_, hasAlias := onlyAtt.MustDiskAttachments().Slice()[0].MustDisk().Alias()
	g.Expect(hasAlias).To(BeFalse(), "disk_attachments without .disk gives disk references")

	_, err = conn.SystemService().VmsService().List().Search(`hostess=h1`).Send()
	g.Expect(err).To(MatchError(ContainSubstring("unknown field 'hostess'")))
	_, err = conn.SystemService().VmsService().VmService("nope").Get().Send()
	_, ok = errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue())
}

func TestMalformedBodiesAreFaultsNotPanics(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	connect(t, sim)
	c := httpsClient(sim)
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, sim.URL()+path, strings.NewReader(body))
		req.SetBasicAuth(sim.Username(), sim.Password())
		resp, err := c.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, body := range []string{"", "<vm><name>x</name", "not xml at all", "<template><name>x</name></template>", "<vm><memory>lots</memory></vm>"} {
		st, b := do("POST", "/vms", body)
		g.Expect(st).To(Equal(400), body)
		g.Expect(b).To(HavePrefix("<fault><detail>"), body)
	}
	st, _ := do("POST", "/vms/nope/start", "<action>")
	g.Expect(st).To(Equal(400))
	st, _ = do("PATCH", "/vms", "")
	g.Expect(st).To(Equal(405))
	st, b := do("GET", "/bookmarks", "")
	g.Expect(st).To(Equal(404))
	g.Expect(b).To(BeEmpty(), "a GET that finds nothing is a bare 404")
	g.Expect(sim.RequestCount("GET", "/{unknown}")).To(Equal(1))
}

func TestTextIsEscapedBothWays(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	// go-ovirt writes element text without escaping it: a raw '&' or '<'
	// makes the request body malformed, and the engine (and the simulator)
	// answer 400. Clients must escape such text themselves.
	_, err := conn.SystemService().VmsService().Add().Vm(vmBuilder("amp", "rhcos-4.14", "Default").Comment("a && b").MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "400"`)))
	// Pre-escaped text arrives intact and comes back escaped, so the SDK reads the original.
	var esc bytes.Buffer
	esc.WriteString("a &amp;&amp; b &lt;x&gt;")
	_, err = conn.SystemService().VmsService().Add().Vm(vmBuilder("amp", "rhcos-4.14", "Default").Comment(esc.String()).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	st, _ := sim.VMByName("amp")
	g.Expect(st.Comment).To(Equal("a && b <x>"))
	r, err := conn.SystemService().VmsService().List().Search("name=amp").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustVms().Slice()[0].MustComment()).To(Equal("a && b <x>"))
}
