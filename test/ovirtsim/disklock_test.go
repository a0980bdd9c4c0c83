package ovirtsim_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func TestEveryDiskUpdateLocks(t *testing.T) {
	t.Parallel()
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{DiskLock: 4 * time.Second}) })
	conn := connect(t, sim)
	cases := []struct {
		name   string
		update *ovirtsdk.DiskBuilder
		size   int64 // GiB after the lock
	}{
		{"alias only", ovirtsdk.NewDiskBuilder().Alias("renamed"), 16},
		{"a resize", ovirtsdk.NewDiskBuilder().ProvisionedSize(40 << 30), 40},
		{"alias and size", ovirtsdk.NewDiskBuilder().Alias("both").ProvisionedSize(20 << 30), 20},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			id := createVM(t, conn, "lock"+string(rune('a'+i)), false)
			did := firstDiskID(t, conn, id)
			vms := conn.SystemService().VmsService().VmService(id)
			att := vms.DiskAttachmentsService().AttachmentService(did)
			start := time.Now()
			r, err := att.Update().DiskAttachment(ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(tc.update).MustBuild()).Send()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.MustDiskAttachment().MustId()).To(Equal(did))
			disk := func() *ovirtsdk.Disk {
				dr, err := conn.SystemService().DisksService().DiskService(did).Get().Send()
				g.Expect(err).NotTo(HaveOccurred())
				return dr.MustDisk()
			}
			// A loaded machine may have passed the lock already: check inside it only,
			// leaving 2 s of margin for the call itself.
			inLock := func() bool { return time.Since(start) < 2*time.Second }
			if inLock() {
				d := disk()
				g.Expect(d.MustStatus()).To(Equal(ovirtsdk.DISKSTATUS_LOCKED), "every update locks the image")
				g.Expect(d.MustProvisionedSize()).To(Equal(int64(16)<<30), "the old size while the image is locked")
			}
			if inLock() {
				_, err = att.Update().DiskAttachment(ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(ovirtsdk.NewDiskBuilder().Alias("again")).MustBuild()).Send()
				ce, ok := errAs[*ovirtsdk.ConflictError](err)
				g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
				g.Expect(ce.Error()).To(ContainSubstring("[Cannot edit Virtual Disk. Disk is locked. Please try again later.]"))
			}
			if inLock() {
				_, err = vms.Start().Send()
				ce, ok := errAs[*ovirtsdk.ConflictError](err)
				g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
				alias := disk().MustAlias()
				g.Expect(ce.Error()).To(ContainSubstring("[Cannot run VM. The following disks are locked: " + alias + ". Please try again in a few minutes.]"))
			}
			g.Eventually(func() ovirtsdk.DiskStatus { return disk().MustStatus() }).WithTimeout(10 * time.Second).
				WithPolling(50 * time.Millisecond).Should(Equal(ovirtsdk.DISKSTATUS_OK))
			g.Expect(disk().MustProvisionedSize()).To(Equal(tc.size<<30), "the new size once the lock ends")
			st, _ := sim.VM(id)
			g.Expect(st.Disks[0].SizeGB).To(Equal(tc.size))
			_, err = vms.Start().Send()
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}

func TestImageLockedVMRefusesDiskAndNICOps(t *testing.T) {
	t.Parallel()
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{ImageLock: time.Hour}) })
	conn := connect(t, sim)
	id := createVM(t, conn, "imagelocked", false)
	vms := conn.SystemService().VmsService().VmService(id)
	diskID := firstDiskID(t, conn, id)
	nic := getVM(t, conn, id, "nics").MustNics().Slice()[0]
	floating, err := conn.SystemService().DisksService().Add().Disk(ovirtsdk.NewDiskBuilder().Alias("spare").ProvisionedSize(1 << 30).Format(ovirtsdk.DISKFORMAT_COW).
		StorageDomainsOfAny(ovirtsdk.NewStorageDomainBuilder().Name("data").MustBuild()).MustBuild()).Send()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, detail string
		call         func() error
	}{
		{"update disk", "[Cannot edit Virtual Disk because the VM is in Image Locked status.]", func() error {
			_, err := vms.DiskAttachmentsService().AttachmentService(diskID).Update().DiskAttachment(
				ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(ovirtsdk.NewDiskBuilder().Alias("x")).MustBuild()).Send()
			return err
		}},
		{"attach disk", "[Cannot attach Virtual Disk to VM because the VM is in Image Locked status.]", func() error {
			_, err := vms.DiskAttachmentsService().Add().Attachment(ovirtsdk.NewDiskAttachmentBuilder().
				DiskBuilder(ovirtsdk.NewDiskBuilder().Id(floating.MustDisk().MustId())).MustBuild()).Send()
			return err
		}},
		{"detach disk", "[Cannot detach Virtual Disk from VM because the VM is in Image Locked status.]", func() error {
			_, err := vms.DiskAttachmentsService().AttachmentService(diskID).Remove().Send()
			return err
		}},
		{"add NIC", "[Cannot add Interface because the VM is in Image Locked status.]", func() error {
			_, err := vms.NicsService().Add().Nic(ovirtsdk.NewNicBuilder().Name("nic2").
				VnicProfileBuilder(ovirtsdk.NewVnicProfileBuilder().Id(nic.MustVnicProfile().MustId())).MustBuild()).Send()
			return err
		}},
		{"update NIC", "[Cannot edit Interface because the VM is in Image Locked status.]", func() error {
			_, err := vms.NicsService().NicService(nic.MustId()).Update().Nic(ovirtsdk.NewNicBuilder().Name("eth9").MustBuild()).Send()
			return err
		}},
		{"remove NIC", "[Cannot remove Interface because the VM is in Image Locked status.]", func() error {
			_, err := vms.NicsService().NicService(nic.MustId()).Remove().Send()
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.call()
			ce, ok := errAs[*ovirtsdk.ConflictError](err)
			g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
			g.Expect(ce.Code).To(Equal(409))
			g.Expect(ce.Error()).To(ContainSubstring(tc.detail))
		})
	}
	g := NewWithT(t)
	st, _ := sim.VM(id)
	g.Expect(st.Disks).To(HaveLen(1))
	g.Expect(st.NICs).To(HaveLen(1))
	_, err = vms.Start().Send()
	g.Expect(err).To(MatchError(ContainSubstring("[Cannot run VM. VM is locked. Please try again in a few minutes.]")), "VM operations keep the VM-locked text")
}
