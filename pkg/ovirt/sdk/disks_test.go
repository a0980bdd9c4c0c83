package sdk

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

const attachmentsPath = "/vms/vm-1/diskattachments"

// attachmentAnswer is what a real Engine answers to a disk creation through the VM's
// attachments: the attachment with a reference to the disk (BackendDiskAttachmentsResource: no
// follow on a create), 202 while the image is created.
const attachmentAnswer = `<disk_attachment href="/ovirt-engine/api/vms/vm-1/diskattachments/d-9" id="d-9">` +
	`<active>true</active><bootable>false</bootable><interface>virtio</interface><pass_discard>false</pass_discard>` +
	`<read_only>false</read_only><uses_scsi_reservation>false</uses_scsi_reservation>` +
	`<disk href="/ovirt-engine/api/disks/d-9" id="d-9"/><vm href="/ovirt-engine/api/vms/vm-1" id="vm-1"/></disk_attachment>`

func boolPtr(b bool) *bool { return &b }

func TestAddDiskSendsOneAttachmentWithTheNewDisk(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
		if r.Method == "POST" && path == attachmentsPath {
			writeXML(w, 202, attachmentAnswer)
			return true
		}
		return false
	})
	e, c := front.client(t)
	front.reset() // the connection's GET /api

	spec := ovirt.DiskSpec{Alias: "w-1_data & more", Description: `capov owner=<ns/m1> uid="a"`, SizeBytes: 50 * gib,
		StorageDomainID: "sd-1", Interface: ovirt.DiskInterfaceVirtio, Format: ovirt.DiskFormatRaw, Sparse: false,
		WipeAfterDelete: boolPtr(true), CorrelationID: "disk-w-1-data"}
	d, err := c.AddDisk(ctx, "vm-1", spec)
	g.Expect(err).NotTo(HaveOccurred())
	// One request: the disk created and attached, active, not bootable, the free text escaped.
	g.Expect(front.requests()).To(Equal([]string{"POST " + attachmentsPath + "?correlation_id=disk-w-1-data"}))
	g.Expect(front.body("POST", attachmentsPath)).To(Equal(`<disk_attachment><active>true</active><bootable>false</bootable>` +
		`<disk><alias>w-1_data &amp; more</alias><description>capov owner=&lt;ns/m1&gt; uid=&#34;a&#34;</description>` +
		`<format>raw</format><provisioned_size>53687091200</provisioned_size><sparse>false</sparse>` +
		`<storage_domains><storage_domain id="sd-1"></storage_domain></storage_domains>` +
		`<wipe_after_delete>true</wipe_after_delete></disk><interface>virtio</interface></disk_attachment>`))
	// The id, bootable and interface as the Engine reported them, the rest from the spec.
	g.Expect(*d).To(Equal(ovirt.Disk{ID: "d-9", Alias: spec.Alias, ProvisionedSize: 50 * gib, Interface: "virtio",
		StorageDomainID: "sd-1", StorageDomainIDs: []string{"sd-1"}, Format: "raw", Sparse: false,
		Description: spec.Description, WipeAfterDelete: true}))
	g.Expect(counterValue(e, "requests_total", "AddDisk", "2xx")).To(Equal(1.0))

	// The defaults: virtio_scsi, cow; no description, no wipe_after_delete (the domain's), no
	// correlation id.
	front.reset()
	d, err = c.AddDisk(ctx, "vm-1", ovirt.DiskSpec{Alias: "w-1_data", SizeBytes: gib, StorageDomainID: "sd-1", Sparse: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(front.requests()).To(Equal([]string{"POST " + attachmentsPath}))
	g.Expect(front.body("POST", attachmentsPath)).To(Equal(`<disk_attachment><active>true</active><bootable>false</bootable>` +
		`<disk><alias>w-1_data</alias><format>cow</format><provisioned_size>1073741824</provisioned_size><sparse>true</sparse>` +
		`<storage_domains><storage_domain id="sd-1"></storage_domain></storage_domains></disk>` +
		`<interface>virtio_scsi</interface></disk_attachment>`))
	g.Expect(d.Format).To(Equal("cow"))
	g.Expect(d.Sparse).To(BeTrue())
	g.Expect(d.WipeAfterDelete).To(BeFalse())
	g.Expect(d.Interface).To(Equal("virtio"), "as the Engine reported it")

	// An answer that carries the disk itself is taken as reported.
	front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
		if r.Method == "POST" && path == attachmentsPath {
			writeXML(w, 201, `<disk_attachment id="d-9"><bootable>false</bootable><interface>virtio_scsi</interface>`+
				`<disk id="d-9"><alias>as-stored</alias><description>stored</description><format>cow</format>`+
				`<provisioned_size>2147483648</provisioned_size><sparse>true</sparse><status>locked</status>`+
				`<storage_domains><storage_domain id="sd-2"/></storage_domains><wipe_after_delete>true</wipe_after_delete></disk>`+
				`</disk_attachment>`)
			return true
		}
		return false
	})
	d, err = c.AddDisk(ctx, "vm-1", ovirt.DiskSpec{Alias: "w-1_data", SizeBytes: gib, StorageDomainID: "sd-1", Sparse: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*d).To(Equal(ovirt.Disk{ID: "d-9", Alias: "as-stored", Description: "stored", ProvisionedSize: 2 * gib,
		Interface: "virtio_scsi", Status: ovirt.DiskStatusLocked, StorageDomainID: "sd-2", StorageDomainIDs: []string{"sd-2"},
		Format: "cow", Sparse: true, WipeAfterDelete: true}))
}

func TestAddDiskRefusesBadInputBeforeAnyCall(t *testing.T) {
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	good := ovirt.DiskSpec{Alias: "d", SizeBytes: gib, StorageDomainID: "sd-1"}
	tests := []struct {
		name   string
		vmID   string
		change func(*ovirt.DiskSpec)
		field  string
	}{
		{"a VM id", "", func(*ovirt.DiskSpec) {}, "VM id"},
		{"an alias", "vm-1", func(s *ovirt.DiskSpec) { s.Alias = "" }, "DiskSpec.Alias"},
		{"a storage domain", "vm-1", func(s *ovirt.DiskSpec) { s.StorageDomainID = "" }, "DiskSpec.StorageDomainID"},
		{"a size", "vm-1", func(s *ovirt.DiskSpec) { s.SizeBytes = 0 }, "DiskSpec.SizeBytes"},
		{"a positive size", "vm-1", func(s *ovirt.DiskSpec) { s.SizeBytes = -1 }, "DiskSpec.SizeBytes"},
		{"a known interface", "vm-1", func(s *ovirt.DiskSpec) { s.Interface = "ide" }, "DiskSpec.Interface"},
		{"a known format", "vm-1", func(s *ovirt.DiskSpec) { s.Format = "qcow2" }, "DiskSpec.Format"},
	}
	sim.ResetCounters()
	for _, tt := range tests {
		t.Run("needs "+tt.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := good
			tt.change(&spec)
			_, err := c.AddDisk(ctx, tt.vmID, spec)
			g.Expect(err).To(MatchError(ovirt.ErrInvalid))
			g.Expect(err.Error()).To(ContainSubstring(tt.field))
		})
	}
	if n := sim.TotalRequests(); n != 0 {
		t.Errorf("%d requests reached the Engine", n)
	}
}

// TestAddDiskMapsTheEnginesRefusals: the texts and statuses of ovirt-engine's AddDiskCommand
// (AppErrors.properties, EngineMessage error types).
func TestAddDiskMapsTheEnginesRefusals(t *testing.T) {
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	tests := []struct {
		name     string
		status   int
		detail   string
		kinds    []error
		notKinds []error
	}{
		{"cow preallocated is ErrInvalid, though the Engine answers 409", 409,
			"[Cannot add Virtual Disk. Disk configuration (COW Preallocated backup-None) is incompatible with the storage domain type.]",
			[]error{ovirt.ErrInvalid}, []error{ovirt.ErrConflict, ovirt.ErrLocked}},
		{"raw sparse on block storage is ErrInvalid", 409,
			"[Cannot add Virtual Disk. Disk configuration (RAW Sparse backup-None) is incompatible with the storage domain type.]",
			[]error{ovirt.ErrInvalid}, []error{ovirt.ErrConflict}},
		{"a VM that does not exist is ErrNotFound", 400, "[Cannot add Virtual Disk. VM is not found.]",
			[]error{ovirt.ErrNotFound}, []error{ovirt.ErrInvalid}},
		{"a VM being created is ErrLocked", 409, "[Cannot add Virtual Disk: VM is locked. Please try again in a few minutes.]",
			[]error{ovirt.ErrConflict, ovirt.ErrLocked}, []error{ovirt.ErrInvalid}},
		{"low disk space is ErrConflict", 409, "[Cannot add Virtual Disk. Low disk space on Storage Domain data.]",
			[]error{ovirt.ErrConflict}, []error{ovirt.ErrLocked, ovirt.ErrInvalid}},
		{"an unknown storage domain is ErrInvalid", 400, "[Cannot add Virtual Disk. Storage Domain doesn't exist.]",
			[]error{ovirt.ErrInvalid}, []error{ovirt.ErrNotFound}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
				if r.Method == "POST" && path == attachmentsPath {
					writeFault(w, tt.status, tt.detail)
					return true
				}
				return false
			})
			_, c := front.client(t)
			_, err := c.AddDisk(ctx, "vm-1", ovirt.DiskSpec{Alias: "d", SizeBytes: gib, StorageDomainID: "sd-1"})
			var oe *ovirt.Error
			g.Expect(errors.As(err, &oe)).To(BeTrue())
			g.Expect(oe.Op).To(Equal("AddDisk"))
			g.Expect(oe.Status).To(Equal(tt.status))
			g.Expect(oe.Detail).To(ContainSubstring(strings.Trim(tt.detail, "[]")))
			for _, k := range tt.kinds {
				g.Expect(err).To(MatchError(k))
			}
			for _, k := range tt.notKinds {
				g.Expect(err).NotTo(MatchError(k))
			}
		})
	}
}

// simDiskVM creates a VM from rhcos-4.14 and waits until it is down.
func simDiskVM(t *testing.T, c ovirt.Client, sim *ovirtsim.Simulator, name string) string {
	t.Helper()
	return createDownVM(t, context.Background(), c, sim, name, "rhcos-4.14", "")
}

// withBlockDomain adds an iSCSI storage domain "block" (raw sparse disks refused there).
func withBlockDomain(b *ovirtsim.Builder) {
	b.WithStorageDomain(ovirtsim.StorageDomain{Name: "block", FreeGB: 1000, StorageType: "iscsi"})
}

func TestAddDiskAgainstTheSimulator(t *testing.T) {
	ctx := context.Background()
	sim := newSim(t, withBlockDomain)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := c.FindStorageDomain(ctx, "fast")
	if err != nil {
		t.Fatal(err)
	}
	block, err := c.FindStorageDomain(ctx, "block")
	if err != nil {
		t.Fatal(err)
	}
	vmID := simDiskVM(t, c, sim, "w-1")

	t.Run("the disk is created and attached as asked", func(t *testing.T) {
		g := NewWithT(t)
		sim.ResetCounters()
		spec := ovirt.DiskSpec{Alias: "w-1_data", Description: "capov owner=ns/w-1 & more", SizeBytes: 20 * gib,
			StorageDomainID: fast.ID, Interface: ovirt.DiskInterfaceVirtio, Format: ovirt.DiskFormatCow, Sparse: true,
			CorrelationID: "add-disk-w-1"}
		d, err := c.AddDisk(ctx, vmID, spec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.ID).NotTo(BeEmpty())
		g.Expect(sim.RequestCount("POST", "/vms/{id}/diskattachments")).To(Equal(1))
		g.Expect(sim.TotalRequests()).To(Equal(1), "one request")

		st, _ := sim.VM(vmID)
		g.Expect(st.Disks).To(HaveLen(2))
		got := st.Disks[1]
		g.Expect(got.ID).To(Equal(d.ID))
		g.Expect(got.Alias).To(Equal("w-1_data"))
		g.Expect(got.SizeGB).To(Equal(int64(20)))
		g.Expect(got.Format).To(Equal("cow"))
		g.Expect(got.Sparse).To(BeTrue())
		g.Expect(got.StorageDomain).To(Equal("fast"))
		g.Expect(got.Interface).To(Equal("virtio"))
		g.Expect(got.Bootable).To(BeFalse())
		g.Expect(got.FromTemplate).To(BeFalse())
		g.Expect(sim.Dump().Jobs).To(ContainElement(HaveField("CorrelationID", "add-disk-w-1")))

		// Read back through the client: the conversion keeps the new fields.
		g.Eventually(func(g Gomega) {
			vm, err := c.GetVM(ctx, vmID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(vm.Disks).To(ContainElement(And(HaveField("ID", d.ID), HaveField("Alias", "w-1_data"),
				HaveField("Description", "capov owner=ns/w-1 & more"), HaveField("Sparse", true),
				HaveField("Format", "cow"), HaveField("StorageDomainID", fast.ID), HaveField("Bootable", false),
				HaveField("Status", ovirt.DiskStatusOK))))
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	})

	t.Run("raw preallocated and wipe-after-delete are stored", func(t *testing.T) {
		g := NewWithT(t)
		d, err := c.AddDisk(ctx, vmID, ovirt.DiskSpec{Alias: "w-1_raw", SizeBytes: gib, StorageDomainID: block.ID,
			Format: ovirt.DiskFormatRaw, Sparse: false, WipeAfterDelete: boolPtr(true)})
		g.Expect(err).NotTo(HaveOccurred())
		disks, err := c.ListDiskAttachments(ctx, vmID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(disks).To(ContainElement(And(HaveField("ID", d.ID), HaveField("Format", "raw"), HaveField("Sparse", false),
			HaveField("StorageDomainID", block.ID))))
		for _, got := range disks {
			if got.ID == d.ID && !got.WipeAfterDelete {
				t.Skip("the simulator does not store wipe_after_delete yet (it renders false)")
			}
		}
	})

	t.Run("cow preallocated is refused", func(t *testing.T) {
		g := NewWithT(t)
		_, err := c.AddDisk(ctx, vmID, ovirt.DiskSpec{Alias: "w-1_bad", SizeBytes: gib, StorageDomainID: fast.ID,
			Format: ovirt.DiskFormatCow, Sparse: false})
		if err == nil {
			t.Skip("the simulator does not apply ImagesHandler.checkImageConfiguration to new disks yet")
		}
		g.Expect(err).To(MatchError(ovirt.ErrInvalid))
		g.Expect(err).NotTo(MatchError(ovirt.ErrConflict))
		g.Expect(err.Error()).To(ContainSubstring("is incompatible with the storage domain type"))
	})

	t.Run("raw sparse is refused on block storage only", func(t *testing.T) {
		g := NewWithT(t)
		_, err := c.AddDisk(ctx, vmID, ovirt.DiskSpec{Alias: "w-1_file", SizeBytes: gib, StorageDomainID: fast.ID,
			Format: ovirt.DiskFormatRaw, Sparse: true})
		g.Expect(err).NotTo(HaveOccurred(), "file storage takes raw sparse")
		_, err = c.AddDisk(ctx, vmID, ovirt.DiskSpec{Alias: "w-1_block", SizeBytes: gib, StorageDomainID: block.ID,
			Format: ovirt.DiskFormatRaw, Sparse: true})
		if err == nil {
			t.Skip("the simulator does not refuse raw sparse disks on block domains yet")
		}
		g.Expect(err).To(MatchError(ovirt.ErrInvalid))
		g.Expect(err.Error()).To(ContainSubstring("RAW Sparse"))
	})

	t.Run("a VM that does not exist", func(t *testing.T) {
		g := NewWithT(t)
		_, err := c.AddDisk(ctx, "00000000-0000-0000-0000-00000000dead", ovirt.DiskSpec{Alias: "x", SizeBytes: gib, StorageDomainID: fast.ID})
		g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	})
}
