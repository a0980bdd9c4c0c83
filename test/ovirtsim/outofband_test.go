package ovirtsim_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func TestCSIDiskAttachedThroughGo(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{ImageLock: time.Hour}) })
	conn := connect(t, sim)
	id := createVM(t, conn, "node", true)
	diskID, err := sim.AttachCSIDisk(id, 10)
	g.Expect(err).NotTo(HaveOccurred(), "works even while the VM is locked")

	r, err := conn.SystemService().VmsService().VmService(id).DiskAttachmentsService().List().Follow("disk").Send()
	g.Expect(err).NotTo(HaveOccurred())
	atts := r.MustAttachments().Slice()
	g.Expect(atts).To(HaveLen(2))
	csi := atts[1]
	g.Expect(csi.MustId()).To(Equal(diskID))
	g.Expect(csi.MustBootable()).To(BeFalse())
	g.Expect(csi.MustActive()).To(BeTrue())
	g.Expect(csi.MustInterface()).To(Equal(ovirtsdk.DISKINTERFACE_VIRTIO_SCSI))
	g.Expect(csi.MustDisk().MustAlias()).To(MatchRegexp(`^pvc-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`))
	g.Expect(csi.MustDisk().MustProvisionedSize()).To(Equal(int64(10) << 30))

	g.Expect(sim.DetachDisk(id, diskID)).To(Succeed())
	st, _ := sim.VM(id)
	g.Expect(st.Disks).To(HaveLen(1))
	g.Expect(sim.Dump().FloatingDisks[0].ID).To(Equal(diskID))

	_, err = sim.AttachCSIDisk("nope", 1)
	g.Expect(errors.Is(err, ovirtsim.ErrNotFound)).To(BeTrue())
	_, err = sim.AttachCSIDisk(id, 0)
	g.Expect(errors.Is(err, ovirtsim.ErrInvalid)).To(BeTrue())
	g.Expect(errors.Is(sim.DetachDisk(id, "nope"), ovirtsim.ErrNotFound)).To(BeTrue())
}

func TestOutOfBandDeleteAndTemplates(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "victim", true)
	_, err := conn.SystemService().VmsService().VmService(id).Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.DeleteVM(id)).To(Succeed(), "even a running VM")
	_, err = conn.SystemService().VmsService().VmService(id).Get().Send()
	_, ok := errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue())
	g.Expect(sim.StorageDomainFreeGB("data")).To(Equal(int64(1000)))
	g.Expect(errors.Is(sim.DeleteVM(id), ovirtsim.ErrNotFound)).To(BeTrue())

	// Templates come and go at run time.
	g.Expect(sim.AddTemplate(ovirtsim.Template{Name: "late", Cluster: "Secondary",
		Disks: []ovirtsim.TemplateDisk{{SizeGB: 4, StorageDomain: "fast", Bootable: true}}})).To(Succeed())
	g.Expect(templateID(t, conn, "late")).NotTo(BeEmpty())
	_, err = conn.SystemService().VmsService().Add().Vm(vmBuilder("thin", "late", "Default").MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred(), "a template is usable in every cluster of its data center")
	g.Expect(errors.Is(sim.RemoveTemplate("late"), ovirtsim.ErrConflict)).To(BeTrue(), "a thin VM still uses it")
	thin, _ := sim.VMByName("thin")
	g.Expect(sim.DeleteVM(thin.ID)).To(Succeed())
	g.Expect(sim.RemoveTemplate("late")).To(Succeed())
	r, err := conn.SystemService().TemplatesService().List().Search("name=late").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustTemplates().Slice()).To(BeEmpty())
	g.Expect(errors.Is(sim.RemoveTemplate("late"), ovirtsim.ErrNotFound)).To(BeTrue())
	g.Expect(errors.Is(sim.AddTemplate(ovirtsim.Template{Name: "x", Cluster: "nope"}), ovirtsim.ErrInvalid)).To(BeTrue())

	g.Expect(sim.AddStorageDomain(ovirtsim.StorageDomain{Name: "new", FreeGB: 7})).To(Succeed())
	g.Expect(sim.StorageDomainFreeGB("new")).To(Equal(int64(7)))
	g.Expect(sim.AddVnicProfile(ovirtsim.VnicProfile{Name: "extra", Network: "ovirtmgmt"})).To(Succeed())
	g.Expect(sim.AddVnicProfile(ovirtsim.VnicProfile{Name: "extra", Network: "ovirtmgmt"})).To(MatchError(ovirtsim.ErrInvalid))
}

func TestJobsByCorrelationID(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithTimings(ovirtsim.Timings{ImageLock: 2 * time.Second}) })
	conn := connect(t, sim)
	vm := vmBuilder("jobbed", "rhcos-4.14", "Default").MustBuild()
	r, err := conn.SystemService().VmsService().Add().Vm(vm).Query("correlation_id", "create-jobbed").Send()
	g.Expect(err).NotTo(HaveOccurred())
	id := r.MustVm().MustId()
	jobs := func(cid string) []*ovirtsdk.Job {
		r, err := conn.SystemService().JobsService().List().Search("correlation_id=" + cid).Send()
		g.Expect(err).NotTo(HaveOccurred())
		return r.MustJobs().Slice()
	}
	js := jobs("create-jobbed")
	g.Expect(js).To(HaveLen(1))
	g.Expect(js[0].MustStatus()).To(Equal(ovirtsdk.JOBSTATUS_STARTED), "running while the VM is image_locked")
	g.Expect(js[0].MustDescription()).To(Equal("Creating VM jobbed from Template rhcos-4.14 in Cluster Default"))
	g.Eventually(func() ovirtsdk.JobStatus { return jobs("create-jobbed")[0].MustStatus() }).WithTimeout(5 * time.Second).
		WithPolling(20 * time.Millisecond).Should(Equal(ovirtsdk.JOBSTATUS_FINISHED))
	jr, err := conn.SystemService().JobsService().JobService(js[0].MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jr.MustJob().MustEndTime()).NotTo(BeZero())

	// The Correlation-Id header works too; failed requests record nothing.
	_, err = conn.SystemService().VmsService().VmService(id).Start().Header("Correlation-Id", "start-1").Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = conn.SystemService().VmsService().VmService(id).Start().Query("correlation_id", "start-2").Send()
	g.Expect(err).To(HaveOccurred())
	g.Expect(jobs("start-1")).To(HaveLen(1))
	g.Expect(jobs("start-2")).To(BeEmpty())
	g.Expect(jobs("nothing")).To(BeEmpty())
	all, err := conn.SystemService().JobsService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all.MustJobs().Slice()).To(HaveLen(2))
	b, err := json.Marshal(sim.Dump().Jobs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring(`"correlation_id":"start-1"`))
}
