package ovirtsim_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// withBlockDomains adds an iSCSI domain "san", an FC domain "fc" and a GlusterFS domain "gluster"
// to the demo seed's NFS domains.
func withBlockDomains(b *ovirtsim.Builder) {
	b.WithStorageDomain(ovirtsim.StorageDomain{Name: "san", FreeGB: 100, StorageType: "iscsi"}).
		WithStorageDomain(ovirtsim.StorageDomain{Name: "fc", FreeGB: 100, StorageType: "fcp"}).
		WithStorageDomain(ovirtsim.StorageDomain{Name: "gluster", FreeGB: 100, StorageType: "glusterfs"})
}

// diskOn builds a floating disk of 1 GiB on a domain (by name); sparse nil leaves it out.
func diskOn(alias, sd string, format ovirtsdk.DiskFormat, sparse *bool) *ovirtsdk.DiskBuilder {
	b := ovirtsdk.NewDiskBuilder().Alias(alias).ProvisionedSize(1 << 30).
		StorageDomainsOfAny(ovirtsdk.NewStorageDomainBuilder().Name(sd).MustBuild())
	if format != "" {
		b.Format(format)
	}
	if sparse != nil {
		b.Sparse(*sparse)
	}
	return b
}

func diskBool(v bool) *bool { return &v }

func TestDiskConfigurationRulesOnFileAndBlockDomains(t *testing.T) {
	t.Parallel()
	sim := startSim(t, withBlockDomains)
	conn := connect(t, sim)
	add := func(b *ovirtsdk.DiskBuilder) error {
		_, err := conn.SystemService().DisksService().Add().Disk(b.MustBuild()).Send()
		return err
	}
	refused := func(g Gomega, err error, config string) {
		g.Expect(err).To(MatchError(ContainSubstring(
			"[Cannot add Virtual Disk. Disk configuration (" + config + ") is incompatible with the storage domain type.]")))
		_, conflict := errAs[*ovirtsdk.ConflictError](err)
		g.Expect(conflict).To(BeTrue(), "ACTION_TYPE_FAILED_DISK_CONFIGURATION_NOT_SUPPORTED is CONFLICT: %v", err)
	}
	cases := []struct {
		name, sd, config string
		format           ovirtsdk.DiskFormat
		sparse           *bool
		backup           ovirtsdk.DiskBackup
	}{
		{"cow preallocated, nfs", "data", "COW Preallocated backup-None", ovirtsdk.DISKFORMAT_COW, diskBool(false), ""},
		{"cow preallocated, iscsi", "san", "COW Preallocated backup-None", ovirtsdk.DISKFORMAT_COW, diskBool(false), ""},
		{"cow preallocated with incremental backup", "san", "", ovirtsdk.DISKFORMAT_COW, diskBool(false), ovirtsdk.DISKBACKUP_INCREMENTAL},
		{"cow sparse, iscsi", "san", "", ovirtsdk.DISKFORMAT_COW, diskBool(true), ""},
		{"raw sparse, iscsi", "san", "RAW Sparse backup-None", ovirtsdk.DISKFORMAT_RAW, diskBool(true), ""},
		{"raw sparse, fcp", "fc", "RAW Sparse backup-None", ovirtsdk.DISKFORMAT_RAW, diskBool(true), ""},
		{"raw without sparse is sparse, iscsi", "san", "RAW Sparse backup-None", ovirtsdk.DISKFORMAT_RAW, nil, ""},
		{"raw preallocated, iscsi", "san", "", ovirtsdk.DISKFORMAT_RAW, diskBool(false), ""},
		{"raw sparse, nfs", "data", "", ovirtsdk.DISKFORMAT_RAW, diskBool(true), ""},
		{"raw sparse, glusterfs", "gluster", "", ovirtsdk.DISKFORMAT_RAW, nil, ""},
		{"raw with incremental backup", "data", "RAW Preallocated backup-Incremental", ovirtsdk.DISKFORMAT_RAW, diskBool(false), ovirtsdk.DISKBACKUP_INCREMENTAL},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			free := sim.StorageDomainFreeGB(c.sd)
			b := diskOn("d"+string(rune('a'+i)), c.sd, c.format, c.sparse)
			if c.backup != "" {
				b.Backup(c.backup)
			}
			err := add(b)
			if c.config != "" {
				refused(g, err, c.config)
				g.Expect(sim.StorageDomainFreeGB(c.sd)).To(Equal(free), "nothing was created")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sim.StorageDomainFreeGB(c.sd)).To(Equal(free - 1))
		})
	}

	t.Run("format is required, sparse defaults to true", func(t *testing.T) {
		g := NewWithT(t)
		err := add(diskOn("noformat", "data", "", nil))
		g.Expect(err).To(MatchError(ContainSubstring(`Fault reason is "Incomplete parameters". Fault detail is "Disk [format] required for add"`)))
		r, err := conn.SystemService().DisksService().Add().Disk(diskOn("rawfile", "data", ovirtsdk.DISKFORMAT_RAW, nil).MustBuild()).Send()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.MustDisk().MustSparse()).To(BeTrue(), "DiskImageBase: VolumeType.Sparse")
		g.Expect(r.MustDisk().MustBackup()).To(Equal(ovirtsdk.DISKBACKUP_NONE))
	})

	t.Run("the domains show their storage type", func(t *testing.T) {
		g := NewWithT(t)
		r, err := conn.SystemService().StorageDomainsService().StorageDomainService(sdID(t, conn, "san")).Get().Send()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.MustStorageDomain().MustStorage().MustType()).To(Equal(ovirtsdk.STORAGETYPE_ISCSI))
		r, err = conn.SystemService().StorageDomainsService().StorageDomainService(sdID(t, conn, "data")).Get().Send()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.MustStorageDomain().MustStorage().MustType()).To(Equal(ovirtsdk.STORAGETYPE_NFS), "the default")
		types := map[string]string{}
		for _, sd := range sim.Dump().StorageDomains {
			types[sd.Name] = sd.StorageType
		}
		g.Expect(types).To(Equal(map[string]string{"data": "nfs", "fast": "nfs", "san": "iscsi", "fc": "fcp", "gluster": "glusterfs"}))
	})
}

func TestStorageTypeOfASeedDomain(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	_, err := ovirtsim.NewBuilder().WithSeed(ovirtsim.DemoSeed()).
		WithStorageDomain(ovirtsim.StorageDomain{Name: "odd", StorageType: "cinder"}).Build()
	g.Expect(err).To(MatchError(ContainSubstring(`unknown storage_type "cinder"`)))
	sim := startSim(t)
	g.Expect(sim.AddStorageDomain(ovirtsim.StorageDomain{Name: "lun", FreeGB: 10, StorageType: "fcp"})).To(Succeed())
	status, body := admin(t, sim, "PUT", "/sim/storagedomains", `{"name": "san2", "free_gb": 10, "storage_type": "iscsi"}`)
	g.Expect(status).To(Equal(201), body)
	types := map[string]string{}
	for _, sd := range sim.Dump().StorageDomains {
		types[sd.Name] = sd.StorageType
	}
	g.Expect(types).To(HaveKeyWithValue("lun", "fcp"))
	g.Expect(types).To(HaveKeyWithValue("san2", "iscsi"))
}

func TestCloneOverridesAreCheckedOnTheirDestination(t *testing.T) {
	t.Parallel()
	sim := startSim(t, withBlockDomains, func(b *ovirtsim.Builder) {
		b.WithStorageDomain(ovirtsim.StorageDomain{Name: "tinysan", FreeGB: 1, StorageType: "iscsi"})
	})
	conn := connect(t, sim)
	tpl := templateDiskID(t, conn, "rhcos-4.14") // cow, sparse
	add := func(name, sd string, format ovirtsdk.DiskFormat, sparse *bool, clone bool) error {
		db := ovirtsdk.NewDiskBuilder().Id(tpl).StorageDomainsOfAny(ovirtsdk.NewStorageDomainBuilder().Id(sdID(t, conn, sd)).MustBuild())
		if format != "" {
			db.Format(format)
		}
		if sparse != nil {
			db.Sparse(*sparse)
		}
		vm := vmBuilder(name, "rhcos-4.14", "Default").
			DiskAttachmentsOfAny(ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(db).MustBuild()).MustBuild()
		_, err := conn.SystemService().VmsService().Add().Vm(vm).Clone(clone).Send()
		return err
	}
	config := func(c string) string {
		return "[Cannot add VM. Disk configuration (" + c + ") is incompatible with the storage domain type.]"
	}

	t.Run("raw without sparse keeps the template disk's sparse: refused on iscsi", func(t *testing.T) {
		g := NewWithT(t)
		err := add("c1", "san", ovirtsdk.DISKFORMAT_RAW, nil, true)
		g.Expect(err).To(MatchError(ContainSubstring(config("RAW Sparse backup-None"))))
		_, conflict := errAs[*ovirtsdk.ConflictError](err)
		g.Expect(conflict).To(BeTrue())
		_, found := sim.VMByName("c1")
		g.Expect(found).To(BeFalse())
		g.Expect(sim.StorageDomainFreeGB("san")).To(Equal(int64(100)))
	})
	t.Run("cow preallocated is refused anywhere", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(add("c2", "data", ovirtsdk.DISKFORMAT_COW, diskBool(false), true)).To(MatchError(ContainSubstring(config("COW Preallocated backup-None"))))
	})
	t.Run("raw preallocated on iscsi and raw sparse on nfs are fine", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(add("c3", "san", ovirtsdk.DISKFORMAT_RAW, diskBool(false), true)).To(Succeed())
		st, _ := sim.VMByName("c3")
		g.Expect(st.Disks[0]).To(And(HaveField("Format", "raw"), HaveField("Sparse", false), HaveField("StorageDomain", "san")))
		g.Expect(add("c4", "fast", ovirtsdk.DISKFORMAT_RAW, nil, true)).To(Succeed())
		st, _ = sim.VMByName("c4")
		g.Expect(st.Disks[0]).To(And(HaveField("Format", "raw"), HaveField("Sparse", true)))
	})
	t.Run("free space is checked first", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(add("c5", "tinysan", ovirtsdk.DISKFORMAT_RAW, diskBool(true), true)).To(MatchError(ContainSubstring("[Cannot add VM. Low disk space on Storage Domain tinysan.]")))
	})
	t.Run("clone=false: the override's sparse is ignored, the thin disk is cow sparse", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(add("t1", "data", ovirtsdk.DISKFORMAT_COW, diskBool(false), false)).To(Succeed())
		st, _ := sim.VMByName("t1")
		g.Expect(st.Disks[0]).To(And(HaveField("Format", "cow"), HaveField("Sparse", true), HaveField("StorageDomain", "data")))
	})
}

func TestThinVMOfARawTemplate(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithTemplate(ovirtsim.Template{Name: "rawtpl", Cluster: "Default",
			Disks: []ovirtsim.TemplateDisk{{SizeGB: 2, Format: "raw", StorageDomain: "data", Bootable: true}}})
	})
	conn := connect(t, sim)
	tpl := templateDiskID(t, conn, "rawtpl")

	// Without overrides the thin disk is a COW sparse layer over the raw image.
	_, err := conn.SystemService().VmsService().Add().Vm(vmBuilder("thin", "rawtpl", "Default").MustBuild()).Clone(false).Send()
	g.Expect(err).NotTo(HaveOccurred())
	st, _ := sim.VMByName("thin")
	g.Expect(st.Disks[0]).To(And(HaveField("Format", "cow"), HaveField("Sparse", true)))

	// An override maps onto the template disk: without a format it is the template disk's raw.
	vm := vmBuilder("thin2", "rawtpl", "Default").DiskAttachmentsOfAny(ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(
		ovirtsdk.NewDiskBuilder().Id(tpl).StorageDomainsOfAny(ovirtsdk.NewStorageDomainBuilder().Name("data").MustBuild())).MustBuild()).MustBuild()
	_, err = conn.SystemService().VmsService().Add().Vm(vm).Clone(false).Send()
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot add VM. Thin provisioned template disks can not be defined as Raw.]")))
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "400"`)))
}

// addDiskTo adds a new disk to a VM through its disk attachments.
func addDiskTo(conn *ovirtsdk.Connection, vmID string, att *ovirtsdk.DiskAttachmentBuilder, disk *ovirtsdk.DiskBuilder) (*ovirtsdk.DiskAttachment, error) {
	r, err := conn.SystemService().VmsService().VmService(vmID).DiskAttachmentsService().Add().
		Attachment(att.DiskBuilder(disk).MustBuild()).Send()
	if err != nil {
		return nil, err
	}
	return r.MustAttachment(), nil
}

func TestNewVMDisksKeepTheirSettings(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, withBlockDomains, func(b *ovirtsim.Builder) {
		b.WithTimings(ovirtsim.Timings{DiskLock: 2 * time.Second}).
			WithStorageDomain(ovirtsim.StorageDomain{Name: "wiped", FreeGB: 100, StorageType: "iscsi", WipeAfterDelete: true})
	})
	conn := connect(t, sim)
	id := createVM(t, conn, "withdisks", true)
	vms := conn.SystemService().VmsService().VmService(id)

	a, err := addDiskTo(conn, id, ovirtsdk.NewDiskAttachmentBuilder().Bootable(false).Active(true).Interface(ovirtsdk.DISKINTERFACE_VIRTIO_SCSI),
		diskOn("data1", "data", ovirtsdk.DISKFORMAT_COW, diskBool(true)).Description("etcd data").WipeAfterDelete(true))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.MustActive()).To(BeTrue(), "the VM is down: plugged at once")
	g.Expect(a.MustBootable()).To(BeFalse())
	b, err := addDiskTo(conn, id, ovirtsdk.NewDiskAttachmentBuilder().Bootable(false).Active(true).Interface(ovirtsdk.DISKINTERFACE_VIRTIO),
		diskOn("data2", "san", ovirtsdk.DISKFORMAT_RAW, diskBool(false)))
	g.Expect(err).NotTo(HaveOccurred())
	c, err := addDiskTo(conn, id, ovirtsdk.NewDiskAttachmentBuilder().Interface(ovirtsdk.DISKINTERFACE_VIRTIO),
		diskOn("data3", "wiped", ovirtsdk.DISKFORMAT_COW, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.MustActive()).To(BeTrue(), "no active on a down VM: plugged (shouldDiskBePlugged)")

	// GET /disks/{id}: description, wipe_after_delete (the domain's when not given), locked.
	d, err := conn.SystemService().DisksService().DiskService(a.MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.MustDisk().MustDescription()).To(Equal("etcd data"))
	g.Expect(d.MustDisk().MustWipeAfterDelete()).To(BeTrue())
	g.Expect(d.MustDisk().MustStatus()).To(Equal(ovirtsdk.DISKSTATUS_LOCKED), "locked while the image is made")
	d, err = conn.SystemService().DisksService().DiskService(c.MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.MustDisk().MustWipeAfterDelete()).To(BeTrue(), "the domain's wipe_after_delete")
	d, err = conn.SystemService().DisksService().DiskService(b.MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.MustDisk().MustWipeAfterDelete()).To(BeFalse())

	// The attachment as the SDK reads it, with follow=disk, and the VM's attachments.
	ar, err := vms.DiskAttachmentsService().AttachmentService(a.MustId()).Get().Follow("disk").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ar.MustAttachment().MustInterface()).To(Equal(ovirtsdk.DISKINTERFACE_VIRTIO_SCSI))
	g.Expect(ar.MustAttachment().MustDisk().MustDescription()).To(Equal("etcd data"))
	vm := getVM(t, conn, id, "disk_attachments.disk")
	byAlias := map[string]*ovirtsdk.DiskAttachment{}
	for _, at := range vm.MustDiskAttachments().Slice() {
		byAlias[at.MustDisk().MustAlias()] = at
	}
	g.Expect(byAlias).To(HaveLen(4))
	g.Expect(byAlias["data1"].MustDisk().MustWipeAfterDelete()).To(BeTrue())
	g.Expect(byAlias["data2"].MustInterface()).To(Equal(ovirtsdk.DISKINTERFACE_VIRTIO))
	g.Expect(byAlias["data2"].MustDisk().MustFormat()).To(Equal(ovirtsdk.DISKFORMAT_RAW))
	g.Expect(byAlias["data2"].MustDisk().MustSparse()).To(BeFalse())

	st, _ := sim.VM(id)
	g.Expect(st.Disks[1]).To(And(HaveField("Alias", "data1"), HaveField("Description", "etcd data"),
		HaveField("WipeAfterDelete", true), HaveField("Format", "cow"), HaveField("Sparse", true),
		HaveField("Backup", "none"), HaveField("Status", "locked"), HaveField("Active", true), HaveField("Bootable", false)))
	g.Eventually(func() string { st, _ := sim.VM(id); return st.Disks[1].Status }, 5*time.Second, 100*time.Millisecond).
		Should(Equal("ok"), "then ok after DiskLock")

	// Removing the VM removes every attached disk, wiped or not, once none is locked (the
	// Engine refuses to remove a VM with a locked disk; data2 and data3 were added after data1).
	g.Eventually(func() []string {
		st, _ := sim.VM(id)
		var locked []string
		for _, d := range st.Disks {
			if d.Status != "ok" {
				locked = append(locked, d.Alias)
			}
		}
		return locked
	}, 10*time.Second, 100*time.Millisecond).Should(BeEmpty())
	_, err = vms.Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	for _, did := range []string{a.MustId(), b.MustId(), c.MustId()} {
		_, err = conn.SystemService().DisksService().DiskService(did).Get().Send()
		_, gone := errAs[*ovirtsdk.NotFoundError](err)
		g.Expect(gone).To(BeTrue(), "disk %s goes with the VM", did)
	}
	g.Expect(sim.StorageDomainFreeGB("wiped")).To(Equal(int64(100)))
	g.Expect(sim.Dump().FloatingDisks).To(BeEmpty())
}

func TestNewVMDiskRefusals(t *testing.T) {
	t.Parallel()
	sim := startSim(t, withBlockDomains, func(b *ovirtsim.Builder) {
		b.WithUser(ovirtsim.User{Username: "vmmgr@internal", Password: "pw",
			Grants: []ovirtsim.Grant{{Role: "UserVmManager", Cluster: "Default"}}})
	})
	conn := connect(t, sim)
	id := createVM(t, conn, "refuser", true)
	sparseDisk := func() *ovirtsdk.DiskBuilder { return diskOn("x", "data", ovirtsdk.DISKFORMAT_COW, diskBool(true)) }

	t.Run("raw sparse on block storage", func(t *testing.T) {
		g := NewWithT(t)
		_, err := addDiskTo(conn, id, ovirtsdk.NewDiskAttachmentBuilder().Interface(ovirtsdk.DISKINTERFACE_VIRTIO_SCSI),
			diskOn("rs", "san", ovirtsdk.DISKFORMAT_RAW, diskBool(true)))
		g.Expect(err).To(MatchError(ContainSubstring("[Cannot add Virtual Disk. Disk configuration (RAW Sparse backup-None) is incompatible with the storage domain type.]")))
		st, _ := sim.VM(id)
		g.Expect(st.Disks).To(HaveLen(1))
		g.Expect(sim.Dump().FloatingDisks).To(BeEmpty())
	})
	t.Run("a second boot disk", func(t *testing.T) {
		g := NewWithT(t)
		_, err := addDiskTo(conn, id, ovirtsdk.NewDiskAttachmentBuilder().Bootable(true), sparseDisk())
		g.Expect(err).To(MatchError(ContainSubstring("[Cannot add Virtual Disk. Disk rhcos-4.14_Disk1 in VM refuser is already marked as boot.]")))
		_, conflict := errAs[*ovirtsdk.ConflictError](err)
		g.Expect(conflict).To(BeTrue())
	})
	t.Run("format is required", func(t *testing.T) {
		g := NewWithT(t)
		_, err := addDiskTo(conn, id, ovirtsdk.NewDiskAttachmentBuilder(), diskOn("nf", "data", "", nil))
		g.Expect(err).To(MatchError(ContainSubstring("Disk [format] required for add")))
	})
	t.Run("virtio_scsi needs the VM's virtio-scsi controller", func(t *testing.T) {
		g := NewWithT(t)
		vm := vmBuilder("novscsi", "rhcos-4.14", "Default").
			VirtioScsiBuilder(ovirtsdk.NewVirtioScsiBuilder().Enabled(false)).MustBuild()
		r, err := conn.SystemService().VmsService().Add().Vm(vm).Clone(true).Send()
		g.Expect(err).NotTo(HaveOccurred())
		nv := r.MustVm().MustId()
		_, err = addDiskTo(conn, nv, ovirtsdk.NewDiskAttachmentBuilder().Interface(ovirtsdk.DISKINTERFACE_VIRTIO_SCSI), sparseDisk())
		g.Expect(err).To(MatchError(ContainSubstring("[Cannot add Virtual Disk. VirtIO-SCSI is disabled for the VM]")))
		_, err = addDiskTo(conn, nv, ovirtsdk.NewDiskAttachmentBuilder().Interface(ovirtsdk.DISKINTERFACE_VIRTIO), sparseDisk())
		g.Expect(err).NotTo(HaveOccurred(), "virtio needs no controller")
		_, err = addDiskTo(conn, id, ovirtsdk.NewDiskAttachmentBuilder().Interface(ovirtsdk.DISKINTERFACE_VIRTIO_SCSI), sparseDisk())
		g.Expect(err).NotTo(HaveOccurred(), "a VM has the controller unless created without it")
	})
	t.Run("an image_locked VM", func(t *testing.T) {
		g := NewWithT(t)
		sim.SetTimings(ovirtsim.Timings{ImageLock: time.Hour})
		locked := createVM(t, conn, "beingmade", false)
		sim.SetTimings(ovirtsim.Timings{})
		_, err := addDiskTo(conn, locked, ovirtsdk.NewDiskAttachmentBuilder(), sparseDisk())
		g.Expect(err).To(MatchError(ContainSubstring("[Cannot add Virtual Disk: VM is locked. Please try again in a few minutes.]")))
		_, conflict := errAs[*ovirtsdk.ConflictError](err)
		g.Expect(conflict).To(BeTrue())
	})
	t.Run("CREATE_DISK on the storage domain", func(t *testing.T) {
		g := NewWithT(t)
		// UserVmManager on the cluster holds CREATE_DISK there, not on the storage domain.
		body := `<disk_attachment><interface>virtio</interface><disk><alias>p</alias><format>cow</format>` +
			`<provisioned_size>1073741824</provisioned_size><storage_domains><storage_domain id="` +
			sdID(t, conn, "data") + `"/></storage_domains></disk></disk_attachment>`
		status, out := asUser(g, sim, "vmmgr@internal", "pw", "POST", "/vms/"+id+"/diskattachments", body)
		g.Expect(status).To(Equal(403), out)
		g.Expect(sim.AddUser(ovirtsim.User{Username: "vmmgr@internal", Password: "pw", Grants: []ovirtsim.Grant{
			{Role: "UserVmManager", Cluster: "Default"}, {Role: "DiskCreator", StorageDomain: "data"}}})).To(Succeed())
		status, out = asUser(g, sim, "vmmgr@internal", "pw", "POST", "/vms/"+id+"/diskattachments", body)
		g.Expect(status).To(Equal(201), out)
	})
}

func TestDiskAddedToARunningVMIsHotPluggedWhenItsImageIsMade(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	// The disk lock is long enough that the stop below comes before it ends even on a loaded
	// machine.
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{DiskLock: 6 * time.Second}) })
	conn := connect(t, sim)
	id := createVM(t, conn, "running", true)
	_, err := conn.SystemService().VmsService().VmService(id).Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_UP))

	disk := func(alias string) *ovirtsdk.DiskBuilder {
		return diskOn(alias, "data", ovirtsdk.DISKFORMAT_COW, diskBool(true))
	}
	hot, err := addDiskTo(conn, id, ovirtsdk.NewDiskAttachmentBuilder().Active(true).Interface(ovirtsdk.DISKINTERFACE_VIRTIO_SCSI), disk("hot"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hot.MustActive()).To(BeFalse(), "added unplugged to a VM that is not down")
	cold, err := addDiskTo(conn, id, ovirtsdk.NewDiskAttachmentBuilder().Interface(ovirtsdk.DISKINTERFACE_VIRTIO_SCSI), disk("cold"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cold.MustActive()).To(BeFalse())

	active := func(diskID string) bool {
		r, err := conn.SystemService().VmsService().VmService(id).DiskAttachmentsService().AttachmentService(diskID).Get().Send()
		g.Expect(err).NotTo(HaveOccurred())
		return r.MustAttachment().MustActive()
	}
	g.Expect(active(hot.MustId())).To(BeFalse(), "still locked")
	g.Eventually(func() bool { return active(hot.MustId()) }, 15*time.Second, 100*time.Millisecond).Should(BeTrue(),
		"hot-plugged once made (plugDiskToVmIfNeeded: active true, VM up)")
	g.Expect(active(cold.MustId())).To(BeFalse(), "without active=true it stays unplugged")

	// A VM stopped before the image is made gets no hot plug.
	late, err := addDiskTo(conn, id, ovirtsdk.NewDiskAttachmentBuilder().Active(true).Interface(ovirtsdk.DISKINTERFACE_VIRTIO_SCSI), disk("late"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = conn.SystemService().VmsService().VmService(id).Stop().Send()
	g.Expect(err).NotTo(HaveOccurred())
	time.Sleep(6500 * time.Millisecond)
	g.Expect(active(late.MustId())).To(BeFalse())
	st, _ := sim.VM(id)
	g.Expect(st.Disks[1]).To(And(HaveField("Alias", "hot"), HaveField("Active", true)))
	g.Expect(st.Disks[3]).To(And(HaveField("Alias", "late"), HaveField("Active", false)))
}
