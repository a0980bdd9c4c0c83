package fake_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/fake"
)

func boolPtr(b bool) *bool { return &b }

func TestFakeAddDiskAppliesTheEnginesRules(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()
	cl, _ := c.FindCluster(ctx, "Default")
	tpl, _ := c.FindTemplate(ctx, "rhcos-4.14", "")
	data, _ := c.FindStorageDomain(ctx, "data")
	block := c.AddStorageDomain(ovirt.StorageDomain{Name: "block", Available: 1000 << 30, Status: "active", Usable: true})
	c.SetStorageDomainType(block.ID, fake.StorageTypeISCSI)
	vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "w-1", ClusterID: cl.ID, TemplateID: tpl.ID})
	g.Expect(err).NotTo(HaveOccurred())

	spec := ovirt.DiskSpec{Alias: "w-1_data", Description: "owner", SizeBytes: 20 << 30, StorageDomainID: data.ID,
		Sparse: true, WipeAfterDelete: boolPtr(true), CorrelationID: "c-1"}
	d, err := c.AddDisk(ctx, vm.ID, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*d).To(Equal(ovirt.Disk{ID: d.ID, Alias: "w-1_data", Description: "owner", ProvisionedSize: 20 << 30,
		Interface: "virtio_scsi", Status: ovirt.DiskStatusOK, StorageDomainID: data.ID, StorageDomainIDs: []string{data.ID},
		Format: "cow", Sparse: true, WipeAfterDelete: true}), "the defaults: virtio_scsi, cow")
	got, _ := c.GetVM(ctx, vm.ID)
	g.Expect(got.Disks).To(HaveLen(2))
	g.Expect(got.Disks[1]).To(Equal(*d))
	recorded, ok := c.DiskSpec(d.ID)
	g.Expect(ok).To(BeTrue())
	g.Expect(recorded).To(Equal(spec))
	*spec.WipeAfterDelete = false
	recorded, _ = c.DiskSpec(d.ID)
	g.Expect(*recorded.WipeAfterDelete).To(BeTrue(), "a copy")
	g.Expect(c.CallCount("AddDisk")).To(Equal(1))

	// File storage takes raw sparse, block storage raw preallocated.
	_, err = c.AddDisk(ctx, vm.ID, ovirt.DiskSpec{Alias: "a", SizeBytes: 1 << 30, StorageDomainID: data.ID, Format: "raw", Sparse: true})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.AddDisk(ctx, vm.ID, ovirt.DiskSpec{Alias: "b", SizeBytes: 1 << 30, StorageDomainID: block.ID, Format: "raw",
		Interface: ovirt.DiskInterfaceVirtio})
	g.Expect(err).NotTo(HaveOccurred())

	// The Engine's refusals, as the SDK client reports them.
	refusals := []struct {
		name  string
		vmID  string
		spec  ovirt.DiskSpec
		kinds []error
		text  string
	}{
		{"cow preallocated", vm.ID, ovirt.DiskSpec{Alias: "x", SizeBytes: 1, StorageDomainID: data.ID, Format: "cow"},
			[]error{ovirt.ErrInvalid}, "Disk configuration (COW Preallocated backup-None) is incompatible with the storage domain type."},
		{"raw sparse on block storage", vm.ID, ovirt.DiskSpec{Alias: "x", SizeBytes: 1, StorageDomainID: block.ID, Format: "raw", Sparse: true},
			[]error{ovirt.ErrInvalid}, "Disk configuration (RAW Sparse backup-None)"},
		{"an unknown VM", "00000000-0000-4000-8000-00000000dead", ovirt.DiskSpec{Alias: "x", SizeBytes: 1, StorageDomainID: data.ID, Sparse: true},
			[]error{ovirt.ErrNotFound}, "VM is not found."},
		{"an unknown storage domain", vm.ID, ovirt.DiskSpec{Alias: "x", SizeBytes: 1, StorageDomainID: "sd-gone", Sparse: true},
			[]error{ovirt.ErrInvalid}, "Storage Domain doesn't exist."},
		{"an empty alias", vm.ID, ovirt.DiskSpec{SizeBytes: 1, StorageDomainID: data.ID}, []error{ovirt.ErrInvalid}, "DiskSpec.Alias"},
		{"an empty VM id", "", ovirt.DiskSpec{Alias: "x", SizeBytes: 1, StorageDomainID: data.ID}, []error{ovirt.ErrInvalid}, "VM id"},
		{"no storage domain", vm.ID, ovirt.DiskSpec{Alias: "x", SizeBytes: 1}, []error{ovirt.ErrInvalid}, "DiskSpec.StorageDomainID"},
		{"no size", vm.ID, ovirt.DiskSpec{Alias: "x", StorageDomainID: data.ID}, []error{ovirt.ErrInvalid}, "DiskSpec.SizeBytes"},
		{"an unknown interface", vm.ID, ovirt.DiskSpec{Alias: "x", SizeBytes: 1, StorageDomainID: data.ID, Interface: "ide"},
			[]error{ovirt.ErrInvalid}, "DiskSpec.Interface"},
		{"an unknown format", vm.ID, ovirt.DiskSpec{Alias: "x", SizeBytes: 1, StorageDomainID: data.ID, Format: "qcow2"},
			[]error{ovirt.ErrInvalid}, "DiskSpec.Format"},
	}
	for _, r := range refusals {
		_, err := c.AddDisk(ctx, r.vmID, r.spec)
		for _, k := range r.kinds {
			g.Expect(err).To(MatchError(k), r.name)
		}
		g.Expect(err).NotTo(MatchError(ovirt.ErrConflict), r.name)
		g.Expect(err.Error()).To(ContainSubstring(r.text), r.name)
	}
	got, _ = c.GetVM(ctx, vm.ID)
	g.Expect(got.Disks).To(HaveLen(4), "nothing refused was added")

	// A VM being created is locked.
	locked := c.PutVM(ovirt.VM{Name: "w-2", Status: ovirt.VMStatusImageLocked})
	_, err = c.AddDisk(ctx, locked.ID, ovirt.DiskSpec{Alias: "x", SizeBytes: 1, StorageDomainID: data.ID, Sparse: true})
	g.Expect(err).To(MatchError(ovirt.ErrLocked))

	// The hook replaces it all.
	c.AddDiskFunc = func(context.Context, string, ovirt.DiskSpec) (*ovirt.Disk, error) {
		return nil, &ovirt.Error{Op: "AddDisk", Kinds: []error{ovirt.ErrUnreachable}}
	}
	_, err = c.AddDisk(ctx, vm.ID, spec)
	g.Expect(err).To(MatchError(ovirt.ErrUnreachable))
}

func TestFakeCreateVMRecordsAndAppliesTheNewSpecFields(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()
	cl, _ := c.FindCluster(ctx, "Default")
	tpl, _ := c.FindTemplate(ctx, "rhcos-4.14", "")
	block := c.AddStorageDomain(ovirt.StorageDomain{Name: "block", Status: "active", Usable: true})
	c.SetStorageDomainType(block.ID, fake.StorageTypeFCP)

	spec := ovirt.VMSpec{Name: "m1", ClusterID: cl.ID, TemplateID: tpl.ID, Clone: true, TemplateDisks: tpl.Disks,
		DiskFormat: "raw", DiskSparse: boolPtr(false),
		CustomProperties: []ovirt.CustomProperty{{Name: "sap_agent", Value: "true"}},
		HighAvailability: &ovirt.HighAvailability{Enabled: true, Priority: 50, LeaseStorageDomainID: block.ID, ResumeBehaviour: "kill"},
		Performance: ovirt.Performance{CPUMode: ovirt.CPUModeHostPassthrough, AutoPinningPolicy: ovirt.AutoPinningExisting,
			IOThreads: 2, MultiQueues: boolPtr(true), Ballooning: boolPtr(false)}}
	vm, err := c.CreateVM(ctx, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.Disks).To(HaveLen(1))
	g.Expect(vm.Disks[0].Format).To(Equal("raw"))
	g.Expect(vm.Disks[0].Sparse).To(BeFalse())
	g.Expect(vm.Disks[0].StorageDomainID).To(Equal(tpl.Disks[0].StorageDomainID), "the template disk's own domain")

	recorded, ok := c.Spec(vm.ID)
	g.Expect(ok).To(BeTrue())
	g.Expect(recorded).To(Equal(spec))
	// Copies: what the caller changes afterwards is not what was created.
	*spec.DiskSparse = true
	spec.HighAvailability.Priority = 1
	*spec.Performance.Ballooning = true
	spec.CustomProperties[0].Value = "false"
	recorded, _ = c.Spec(vm.ID)
	g.Expect(*recorded.DiskSparse).To(BeFalse())
	g.Expect(recorded.HighAvailability.Priority).To(Equal(50))
	g.Expect(*recorded.Performance.Ballooning).To(BeFalse())
	g.Expect(recorded.CustomProperties[0].Value).To(Equal("true"))

	// The domain's rules and the SDK client's checks.
	refused := []struct {
		name   string
		change func(*ovirt.VMSpec)
		kind   error
		text   string
	}{
		{"cow preallocated", func(s *ovirt.VMSpec) { s.DiskFormat, s.DiskSparse = "cow", boolPtr(false) },
			ovirt.ErrInvalid, "Cannot add VM. Disk configuration (COW Preallocated backup-None)"},
		{"raw sparse on block storage", func(s *ovirt.VMSpec) { s.StorageDomainID, s.DiskFormat, s.DiskSparse = block.ID, "raw", boolPtr(true) },
			ovirt.ErrInvalid, "Disk configuration (RAW Sparse backup-None)"},
		{"auto pinning with a topology", func(s *ovirt.VMSpec) { s.Performance.AutoPinningPolicy, s.Cores = "adjust", 2 },
			ovirt.ErrInvalid, "Performance.AutoPinningPolicy"},
		{"a bad custom property", func(s *ovirt.VMSpec) { s.CustomProperties = []ovirt.CustomProperty{{Name: "a b"}} },
			ovirt.ErrInvalid, "CustomProperties[0].Name"},
		{"overrides without the template's disks", func(s *ovirt.VMSpec) { s.TemplateDisks, s.DiskFormat = nil, "raw" },
			ovirt.ErrInvalid, "TemplateDisks"},
		{"an unknown resume behaviour", func(s *ovirt.VMSpec) { s.HighAvailability = &ovirt.HighAvailability{ResumeBehaviour: "x"} },
			ovirt.ErrInvalid, "HighAvailability.ResumeBehaviour"},
	}
	for i, r := range refused {
		s := ovirt.VMSpec{Name: "bad-" + string(rune('a'+i)), ClusterID: cl.ID, TemplateID: tpl.ID, Clone: true, TemplateDisks: tpl.Disks}
		r.change(&s)
		_, err := c.CreateVM(ctx, s)
		g.Expect(err).To(MatchError(r.kind), r.name)
		g.Expect(err.Error()).To(ContainSubstring(r.text), r.name)
	}
	g.Expect(c.VMs()).To(HaveLen(1), "nothing refused was created")

	// A thin VM keeps the template's disks as they are.
	thin, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "thin", ClusterID: cl.ID, TemplateID: tpl.ID, DiskFormat: "raw", TemplateDisks: tpl.Disks})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(thin.Disks[0].Format).To(Equal("cow"))
}

func TestFakeAssignTagAndTheTagsOfVMs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()
	vm := c.PutVM(ovirt.VM{Name: "w-1", Comment: "capov ovirtmachine=ns/w-1", Status: ovirt.VMStatusDown})
	other := c.PutVM(ovirt.VM{Name: "w-2", Comment: "capov ovirtmachine=ns/w-2", Status: ovirt.VMStatusDown})
	ha, err := c.CreateTag(ctx, "capov-ha", "")
	g.Expect(err).NotTo(HaveOccurred())
	spread := c.AddTag(ovirt.Tag{Name: "capov-spread"})

	got, _ := c.GetVM(ctx, vm.ID)
	g.Expect(got.TagsKnown).To(BeTrue())
	g.Expect(got.TagIDs).To(BeEmpty())

	g.Expect(c.AssignTag(ctx, vm.ID, ha.ID)).To(Succeed())
	g.Expect(c.AssignTag(ctx, vm.ID, ha.ID)).To(Succeed(), "assigned already: no error")
	g.Expect(c.AssignTag(ctx, vm.ID, spread.ID)).To(Succeed())
	got, _ = c.GetVM(ctx, vm.ID)
	g.Expect(got.TagIDs).To(Equal([]string{ha.ID, spread.ID}))
	got.TagIDs[0] = "changed"
	again, _ := c.GetVM(ctx, vm.ID)
	g.Expect(again.TagIDs[0]).To(Equal(ha.ID), "callers get copies")

	page, err := c.ListVMs(ctx, ovirt.VMQuery{CommentContains: "capov ovirtmachine=", Page: 1, PageSize: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.VMs).To(HaveLen(2))
	g.Expect(page.VMs[0].TagsKnown).To(BeTrue())
	g.Expect(page.VMs[0].TagIDs).To(Equal([]string{ha.ID, spread.ID}))
	g.Expect(page.VMs[1].TagsKnown).To(BeTrue())
	g.Expect(page.VMs[1].TagIDs).To(BeEmpty())
	byName, _ := c.FindVMsByName(ctx, "w-1")
	g.Expect(byName[0].TagsKnown).To(BeFalse(), "no follow in a search by name")
	g.Expect(byName[0].TagIDs).To(BeNil())

	// Refusals, as the SDK client reports them.
	err = c.AssignTag(ctx, other.ID, "tag-gone")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	g.Expect(err.Error()).To(ContainSubstring("tag tag-gone does not exist"))
	err = c.AssignTag(ctx, "00000000-0000-4000-8000-00000000dead", ha.ID)
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	g.Expect(err.Error()).To(ContainSubstring("does not exist"))
	err = c.AssignTag(ctx, other.ID, fake.RootTagID)
	g.Expect(err).To(MatchError(ovirt.ErrInvalid), "the root tag is no database row")
	g.Expect(c.AssignTag(ctx, "", ha.ID)).To(MatchError(ovirt.ErrInvalid))
	g.Expect(c.AssignTag(ctx, other.ID, "")).To(MatchError(ovirt.ErrInvalid))

	// A tag removed out of band leaves its VMs.
	g.Expect(c.DeleteTag(spread.ID)).To(BeTrue())
	got, _ = c.GetVM(ctx, vm.ID)
	g.Expect(got.TagIDs).To(Equal([]string{ha.ID}))

	// The hook.
	c.AssignTagFunc = func(context.Context, string, string) error { return errors.New("boom") }
	g.Expect(c.AssignTag(ctx, vm.ID, ha.ID)).To(MatchError("boom"))
	g.Expect(c.CallCount("AssignTag")).To(Equal(9))
}
