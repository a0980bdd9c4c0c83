package ovirtsim_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func firstDiskID(t testing.TB, conn *ovirtsdk.Connection, vmID string) string {
	t.Helper()
	r, err := conn.SystemService().VmsService().VmService(vmID).DiskAttachmentsService().List().Send()
	if err != nil {
		t.Fatal(err)
	}
	return r.MustAttachments().Slice()[0].MustId()
}

func resize(conn *ovirtsdk.Connection, vmID, diskID string, size int64) error {
	_, err := conn.SystemService().VmsService().VmService(vmID).DiskAttachmentsService().AttachmentService(diskID).Update().
		DiskAttachment(ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(ovirtsdk.NewDiskBuilder().ProvisionedSize(size)).MustBuild()).Send()
	return err
}

func TestDiskAttachmentGrowShrinkAndAlias(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "disky", true)
	did := firstDiskID(t, conn, id)
	att := conn.SystemService().VmsService().VmService(id).DiskAttachmentsService().AttachmentService(did)

	g.Expect(resize(conn, id, did, 40<<30)).To(Succeed())
	st, _ := sim.VM(id)
	g.Expect(st.Disks[0].SizeGB).To(Equal(int64(40)))
	g.Expect(sim.StorageDomainFreeGB("data")).To(Equal(int64(1000 - 40)))

	err := resize(conn, id, did, 20<<30)
	g.Expect(err).To(MatchError(ContainSubstring(`[Cannot edit Virtual Disk. New disk size cannot be smaller than the current disk size.]`)))
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "400"`)))

	r, err := att.Update().DiskAttachment(ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(ovirtsdk.NewDiskBuilder().Alias("disky-os")).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustDiskAttachment().MustId()).To(Equal(did))
	dr, err := conn.SystemService().DisksService().DiskService(did).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dr.MustDisk().MustAlias()).To(Equal("disky-os"))
	g.Expect(dr.MustDisk().MustProvisionedSize()).To(Equal(int64(40) << 30))

	// The same through PUT /disks/{id} (4.4+ engines, go-ovirt-client style).
	pr, err := conn.SystemService().DisksService().DiskService(did).Update().Disk(ovirtsdk.NewDiskBuilder().ProvisionedSize(50 << 30).Alias("os").MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.MustDisk().MustAlias()).To(Equal("os"))
	g.Expect(pr.MustDisk().MustProvisionedSize()).To(Equal(int64(50) << 30))
	_, err = conn.SystemService().DisksService().DiskService(did).Update().Disk(ovirtsdk.NewDiskBuilder().ProvisionedSize(1 << 30).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring("New disk size cannot be smaller")))
	_, err = conn.SystemService().DisksService().DiskService(templateDiskID(t, conn, "rhcos-4.14")).Update().Disk(ovirtsdk.NewDiskBuilder().Alias("x").MustBuild()).Send()
	_, ok := errAs[*ovirtsdk.ConflictError](err)
	g.Expect(ok).To(BeTrue(), "template disks are not editable")

	g.Expect(resize(conn, id, did, 5000<<30)).To(MatchError(ContainSubstring("Low disk space on Storage Domain data.")))
}

func TestResizedDisksAreLockedForDiskLock(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{DiskLock: 2 * time.Second}) })
	conn := connect(t, sim)
	id := createVM(t, conn, "locky", false)
	did := firstDiskID(t, conn, id)
	g.Expect(resize(conn, id, did, 30<<30)).To(Succeed())
	disk := func() ovirtsdk.DiskStatus {
		r, err := conn.SystemService().DisksService().DiskService(did).Get().Send()
		g.Expect(err).NotTo(HaveOccurred())
		return r.MustDisk().MustStatus()
	}
	g.Expect(disk()).To(Equal(ovirtsdk.DISKSTATUS_LOCKED))
	err := resize(conn, id, did, 31<<30)
	ce, ok := errAs[*ovirtsdk.ConflictError](err)
	g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
	g.Expect(ce.Error()).To(ContainSubstring("[Cannot edit Virtual Disk. Disk is locked. Please try again later.]"))
	_, err = conn.SystemService().VmsService().VmService(id).Remove().Send()
	_, ok = errAs[*ovirtsdk.ConflictError](err)
	g.Expect(ok).To(BeTrue(), "a VM with a locked disk cannot be removed")
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot remove VM. Related operation is currently in progress. Please try again later.]")))
	g.Eventually(disk).WithTimeout(5 * time.Second).WithPolling(20 * time.Millisecond).Should(Equal(ovirtsdk.DISKSTATUS_OK))
	g.Expect(resize(conn, id, did, 31<<30)).To(Succeed())
}

func TestDetachReattachAndDeleteDisks(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	a := createVM(t, conn, "a", true)
	b := createVM(t, conn, "b", true)
	dataFree := sim.StorageDomainFreeGB("data")
	osDisk := firstDiskID(t, conn, a)
	atts := func(vm string) *ovirtsdk.DiskAttachmentsService {
		return conn.SystemService().VmsService().VmService(vm).DiskAttachmentsService()
	}

	// detach_only=true: the disk survives as a floating disk.
	_, err := atts(a).AttachmentService(osDisk).Remove().DetachOnly(true).Query("correlation_id", "detach-1").Send()
	g.Expect(err).NotTo(HaveOccurred())
	st, _ := sim.VM(a)
	g.Expect(st.Disks).To(BeEmpty())
	dr, err := conn.SystemService().DisksService().DiskService(osDisk).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dr.MustDisk().MustAlias()).To(Equal("rhcos-4.14_Disk1"))
	g.Expect(sim.Dump().FloatingDisks).To(HaveLen(1))

	// Attach the floating disk to another VM by id, as the CSI driver does.
	ar, err := atts(b).Add().Attachment(ovirtsdk.NewDiskAttachmentBuilder().
		DiskBuilder(ovirtsdk.NewDiskBuilder().Id(osDisk)).Interface(ovirtsdk.DISKINTERFACE_VIRTIO_SCSI).Active(true).Bootable(false).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ar.MustAttachment().MustId()).To(Equal(osDisk))
	st, _ = sim.VM(b)
	g.Expect(st.Disks).To(HaveLen(2))
	_, err = atts(a).Add().Attachment(ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(ovirtsdk.NewDiskBuilder().Id(osDisk)).MustBuild()).Send()
	_, ok := errAs[*ovirtsdk.ConflictError](err)
	g.Expect(ok).To(BeTrue(), "a disk attached elsewhere cannot be attached again")
	_, err = atts(b).Add().Attachment(ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(ovirtsdk.NewDiskBuilder().Id(osDisk)).MustBuild()).Send()
	_, ok = errAs[*ovirtsdk.ConflictError](err)
	g.Expect(ok).To(BeTrue())

	// Without detach_only the engine's default is also to detach.
	_, err = atts(b).AttachmentService(osDisk).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = conn.SystemService().DisksService().DiskService(osDisk).Get().Send()
	g.Expect(err).NotTo(HaveOccurred(), "still there")

	// detach_only=false deletes the disk and frees its space.
	bDisk := firstDiskID(t, conn, b)
	_, err = atts(b).AttachmentService(bDisk).Remove().DetachOnly(false).Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = conn.SystemService().DisksService().DiskService(bDisk).Get().Send()
	_, ok = errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue())
	g.Expect(sim.StorageDomainFreeGB("data")).To(Equal(dataFree + 16))

	// A floating disk can be deleted with DELETE /disks/{id}.
	_, err = conn.SystemService().DisksService().DiskService(osDisk).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.StorageDomainFreeGB("data")).To(Equal(dataFree + 32))
	g.Expect(sim.Dump().FloatingDisks).To(BeEmpty())
}

func TestNewDisksThroughTheAPI(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "csi-like", false)
	// POST /disks then attach: the CSI driver's flow.
	r, err := conn.SystemService().DisksService().Add().Disk(ovirtsdk.NewDiskBuilder().Name("pvc-0001").
		ProvisionedSize(5 << 30).Format(ovirtsdk.DISKFORMAT_COW).
		StorageDomainsOfAny(ovirtsdk.NewStorageDomainBuilder().Name("fast").MustBuild()).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	d := r.MustDisk()
	g.Expect(d.MustAlias()).To(Equal("pvc-0001"))
	g.Expect(sim.StorageDomainFreeGB("fast")).To(Equal(int64(495)))
	att := ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(ovirtsdk.NewDiskBuilder().Id(d.MustId())).
		Interface(ovirtsdk.DISKINTERFACE_VIRTIO_SCSI).Active(true).MustBuild()
	// go-ovirt's AddProvidingDiskId() is a generator artifact: it POSTs an
	// <action> to .../diskattachments/providingdiskid, which the engine does
	// not serve. Add() with a disk reference is the working call.
	_, err = conn.SystemService().VmsService().VmService(id).DiskAttachmentsService().AddProvidingDiskId().Attachment(att).Send()
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "405"`)))
	_, err = conn.SystemService().VmsService().VmService(id).DiskAttachmentsService().Add().Attachment(att).Send()
	g.Expect(err).NotTo(HaveOccurred())

	// A full disk in the attachment creates and attaches it in one call.
	ar, err := conn.SystemService().VmsService().VmService(id).DiskAttachmentsService().Add().Attachment(
		ovirtsdk.NewDiskAttachmentBuilder().Interface(ovirtsdk.DISKINTERFACE_VIRTIO).Active(true).
			DiskBuilder(ovirtsdk.NewDiskBuilder().Alias("data2").ProvisionedSize(3 << 30).Format(ovirtsdk.DISKFORMAT_COW).
				StorageDomainsOfAny(ovirtsdk.NewStorageDomainBuilder().Id(sdID(t, conn, "data")).MustBuild())).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	st, _ := sim.VM(id)
	g.Expect(st.Disks).To(HaveLen(3))
	g.Expect(st.Disks[2]).To(And(HaveField("Alias", "data2"), HaveField("Interface", "virtio"), HaveField("ID", ar.MustAttachment().MustId())))

	_, err = conn.SystemService().VmsService().VmService(id).DiskAttachmentsService().Add().Attachment(
		ovirtsdk.NewDiskAttachmentBuilder().Bootable(true).DiskBuilder(ovirtsdk.NewDiskBuilder().ProvisionedSize(1 << 30).Format(ovirtsdk.DISKFORMAT_COW).
			StorageDomainsOfAny(ovirtsdk.NewStorageDomainBuilder().Name("data").MustBuild())).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot add Virtual Disk. Disk rhcos-4.14_Disk1 in VM csi-like is already marked as boot.]")))
	g.Expect(sim.Dump().FloatingDisks).To(BeEmpty(), "a failed attach does not leave the new disk behind")

	dl, err := conn.SystemService().DisksService().List().Search("name=pvc-*").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(dl.MustDisks().Slice())).To(Equal([]string{"pvc-0001"}))
}

func TestRemoveVMDeletesAttachedDisksButNotDetachedOnes(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "doomed", true)
	csi, err := sim.AttachCSIDisk(id, 8)
	g.Expect(err).NotTo(HaveOccurred())
	keep, err := sim.AttachCSIDisk(id, 2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.StorageDomainFreeGB("data")).To(Equal(int64(1000 - 16 - 8 - 2)))
	_, err = conn.SystemService().VmsService().VmService(id).DiskAttachmentsService().AttachmentService(keep).Remove().DetachOnly(true).Send()
	g.Expect(err).NotTo(HaveOccurred())

	_, err = conn.SystemService().VmsService().VmService(id).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = conn.SystemService().VmsService().VmService(id).Get().Send()
	_, ok := errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue())
	for _, gone := range []string{csi} {
		_, err = conn.SystemService().DisksService().DiskService(gone).Get().Send()
		_, ok = errAs[*ovirtsdk.NotFoundError](err)
		g.Expect(ok).To(BeTrue(), "attached disks go with the VM")
	}
	_, err = conn.SystemService().DisksService().DiskService(keep).Get().Send()
	g.Expect(err).NotTo(HaveOccurred(), "the detached disk survives")
	g.Expect(sim.StorageDomainFreeGB("data")).To(Equal(int64(1000 - 2)))

	// DELETE /vms/{id}?detach_only=true keeps every disk.
	id = createVM(t, conn, "keeper", true)
	_, err = conn.SystemService().VmsService().VmService(id).Remove().DetachOnly(true).Send()
	g.Expect(err).NotTo(HaveOccurred())
	fl := sim.Dump().FloatingDisks
	g.Expect(fl).To(HaveLen(2))
	g.Expect(strings.HasPrefix(fl[0].Alias, "pvc-")).To(BeTrue())
	g.Expect(fl[1].Alias).To(Equal("rhcos-4.14_Disk1"))
}
