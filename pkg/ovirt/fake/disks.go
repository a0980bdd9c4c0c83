package fake

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/capov/capov/pkg/ovirt"
)

// Storage types of a storage domain (its storage.type in the Engine), for SetStorageDomainType.
// iSCSI and FCP are block storage, where the Engine refuses raw sparse disks.
const (
	StorageTypeNFS   = "nfs"
	StorageTypeISCSI = "iscsi"
	StorageTypeFCP   = "fcp"
)

// SetStorageDomainType gives the seeded storage domain with this id a storage type (one of the
// StorageType constants, or any other Engine storage type); a domain without one is file storage
// (NFS), as those of NewDefaultClient are. Only AddDisk and CreateVM read it: raw sparse disks
// are refused on block storage (iscsi, fcp), as the Engine does.
func (c *Client) SetStorageDomainType(id, storageType string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sdTypes == nil {
		c.sdTypes = map[string]string{}
	}
	c.sdTypes[id] = storageType
}

// blockDomain tells whether the storage domain is block storage. Called with c.mu held.
func (c *Client) blockDomain(id string) bool {
	t := c.sdTypes[id]
	return t == StorageTypeISCSI || t == StorageTypeFCP
}

// diskConfigurationError is the Engine's refusal of a disk format and allocation
// (ImagesHandler.checkImageConfiguration, ACTION_TYPE_FAILED_DISK_CONFIGURATION_NOT_SUPPORTED,
// 409) as the SDK client reports it: ErrInvalid, since the same request is always refused. nil
// when the Engine takes it: cow preallocated is refused everywhere (CAPOV asks for no incremental
// backup), raw sparse on block storage. what is the action's object ("Virtual Disk", "VM").
// Called with c.mu held.
func (c *Client) diskConfigurationError(op, what, format string, sparse bool, sdID string) error {
	preallocatedCow := format == ovirt.DiskFormatCow && !sparse
	rawThinOnBlock := format == ovirt.DiskFormatRaw && sparse && c.blockDomain(sdID)
	if !preallocatedCow && !rawThinOnBlock {
		return nil
	}
	volumeType := "Preallocated"
	if sparse {
		volumeType = "Sparse"
	}
	return &ovirt.Error{Op: op, Status: 409, Kinds: []error{ovirt.ErrInvalid},
		Detail: fmt.Sprintf("Operation Failed: [Cannot add %s. Disk configuration (%s %s backup-None) is incompatible with the storage domain type.]",
			what, strings.ToUpper(format), volumeType)}
}

// AddDisk implements ovirt.Client: it refuses what the SDK client refuses before any call (same
// texts), then what the Engine refuses (an unknown VM or storage domain, a VM being created, a
// disk configuration the domain does not take, see SetStorageDomainType), and attaches a new
// disk to the VM: ok at once (the fake has no image lock), not bootable, with the spec's alias,
// description, size, domain, interface (virtio_scsi by default), format (cow by default),
// allocation and wipe-after-delete (false when the spec leaves it to the domain: the fake's
// domains have no such setting).
func (c *Client) AddDisk(ctx context.Context, vmID string, spec ovirt.DiskSpec) (*ovirt.Disk, error) {
	c.mu.Lock()
	c.record("AddDisk")
	c.mu.Unlock()
	if c.AddDiskFunc != nil {
		return c.AddDiskFunc(ctx, vmID, spec)
	}
	const op = "AddDisk"
	if err := checkDiskSpec(op, vmID, spec); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[vmID]
	if !ok {
		// BackendDiskAttachmentsResource runs AddDisk, whose validate answers 400 "VM is not
		// found."; the SDK client reports it as ErrNotFound.
		return nil, &ovirt.Error{Op: op, Status: 400, Kinds: []error{ovirt.ErrNotFound},
			Detail: "Operation Failed: [Cannot add Virtual Disk. VM is not found.]"}
	}
	if !slices.ContainsFunc(c.storageDomains, func(sd ovirt.StorageDomain) bool { return sd.ID == spec.StorageDomainID }) {
		return nil, invalid(op, "Operation Failed: [Cannot add Virtual Disk. Storage Domain doesn't exist.]")
	}
	if vm.Status == ovirt.VMStatusImageLocked {
		return nil, &ovirt.Error{Op: op, Status: 409, Kinds: []error{ovirt.ErrConflict, ovirt.ErrLocked},
			Detail: "Operation Failed: [Cannot add Virtual Disk: VM is locked. Please try again in a few minutes.]"}
	}
	format := cmp.Or(spec.Format, ovirt.DiskFormatCow)
	if err := c.diskConfigurationError(op, "Virtual Disk", format, spec.Sparse, spec.StorageDomainID); err != nil {
		return nil, err
	}
	d := ovirt.Disk{ID: c.newID("disk"), Alias: spec.Alias, Description: spec.Description, ProvisionedSize: spec.SizeBytes,
		Interface: cmp.Or(spec.Interface, ovirt.DiskInterfaceVirtioSCSI), Status: ovirt.DiskStatusOK,
		StorageDomainID: spec.StorageDomainID, StorageDomainIDs: []string{spec.StorageDomainID},
		Format: format, Sparse: spec.Sparse, WipeAfterDelete: spec.WipeAfterDelete != nil && *spec.WipeAfterDelete}
	vm.Disks = append(vm.Disks, d)
	if c.diskSpecs == nil {
		c.diskSpecs = map[string]ovirt.DiskSpec{}
	}
	c.diskSpecs[d.ID] = cloneDiskSpec(spec)
	out := cloneDisk(d)
	return &out, nil
}

// DiskSpec returns the DiskSpec AddDisk created the disk with (its CorrelationID included).
func (c *Client) DiskSpec(diskID string) (ovirt.DiskSpec, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.diskSpecs[diskID]
	return cloneDiskSpec(s), ok
}

// cloneDiskSpec deep-copies a DiskSpec.
func cloneDiskSpec(s ovirt.DiskSpec) ovirt.DiskSpec {
	if s.WipeAfterDelete != nil {
		v := *s.WipeAfterDelete
		s.WipeAfterDelete = &v
	}
	return s
}

// checkDiskSpec refuses what the SDK client refuses before any call (pkg/ovirt/sdk
// buildDiskAttachment), with the same texts.
func checkDiskSpec(op, vmID string, spec ovirt.DiskSpec) error {
	iface := cmp.Or(spec.Interface, ovirt.DiskInterfaceVirtioSCSI)
	format := cmp.Or(spec.Format, ovirt.DiskFormatCow)
	switch {
	case vmID == "":
		return invalid(op, "VM id is empty")
	case spec.Alias == "":
		return invalid(op, "DiskSpec.Alias is empty")
	case spec.StorageDomainID == "":
		return invalid(op, "DiskSpec.StorageDomainID is empty")
	case spec.SizeBytes < 1:
		return invalid(op, "DiskSpec.SizeBytes %d is below 1", spec.SizeBytes)
	case iface != ovirt.DiskInterfaceVirtioSCSI && iface != ovirt.DiskInterfaceVirtio:
		return invalid(op, "DiskSpec.Interface %q is neither %q nor %q", spec.Interface, ovirt.DiskInterfaceVirtioSCSI, ovirt.DiskInterfaceVirtio)
	case format != ovirt.DiskFormatCow && format != ovirt.DiskFormatRaw:
		return invalid(op, "DiskSpec.Format %q is neither %q nor %q", spec.Format, ovirt.DiskFormatCow, ovirt.DiskFormatRaw)
	}
	return nil
}

var customPropertyName = regexp.MustCompile(`^[a-zA-Z0-9_]+$`)

// checkVMSpec refuses the new-style VMSpec fields the SDK client refuses before any call
// (pkg/ovirt/sdk validateVMSpec), with the same texts.
func checkVMSpec(op string, spec ovirt.VMSpec) error {
	perf := spec.Performance
	overrides := spec.StorageDomainID != "" || spec.DiskFormat != "" || spec.DiskSparse != nil
	switch {
	case spec.DiskFormat != "" && spec.DiskFormat != ovirt.DiskFormatCow && spec.DiskFormat != ovirt.DiskFormatRaw:
		return invalid(op, "DiskFormat %q is neither %q nor %q", spec.DiskFormat, ovirt.DiskFormatCow, ovirt.DiskFormatRaw)
	case spec.Clone && overrides && len(spec.TemplateDisks) == 0:
		return invalid(op, "a disk override (StorageDomainID, DiskFormat, DiskSparse) needs the template's disks (TemplateDisks)")
	case perf.CPUMode != "" && !slices.Contains([]string{ovirt.CPUModeHostPassthrough, ovirt.CPUModeHostModel, ovirt.CPUModeCustom}, perf.CPUMode):
		return invalid(op, "Performance.CPUMode %q is not one of host_passthrough, host_model, custom", perf.CPUMode)
	case perf.AutoPinningPolicy != "" && !slices.Contains([]string{ovirt.AutoPinningDisabled, ovirt.AutoPinningExisting, ovirt.AutoPinningAdjust}, perf.AutoPinningPolicy):
		return invalid(op, "Performance.AutoPinningPolicy %q is not one of disabled, existing, adjust", perf.AutoPinningPolicy)
	case perf.AutoPinningPolicy != "" && (spec.Sockets > 0 || spec.Cores > 0 || spec.Threads > 0):
		return invalid(op, "Performance.AutoPinningPolicy %q cannot be combined with a CPU topology (Sockets, Cores, Threads): the Engine refuses both at once", perf.AutoPinningPolicy)
	case perf.IOThreads < 0:
		return invalid(op, "Performance.IOThreads %d is negative", perf.IOThreads)
	}
	if ha := spec.HighAvailability; ha != nil {
		switch {
		case ha.Priority < 0:
			return invalid(op, "HighAvailability.Priority %d is negative", ha.Priority)
		case ha.ResumeBehaviour != "" && !slices.Contains([]string{"auto_resume", "leave_paused", "kill"}, ha.ResumeBehaviour):
			return invalid(op, "HighAvailability.ResumeBehaviour %q is not one of auto_resume, leave_paused, kill", ha.ResumeBehaviour)
		}
	}
	seen := map[string]bool{}
	for i, p := range spec.CustomProperties {
		switch {
		case !customPropertyName.MatchString(p.Name):
			return invalid(op, "CustomProperties[%d].Name %q is not a custom property name (letters, digits, '_')", i, p.Name)
		case strings.Contains(p.Value, ";"):
			return invalid(op, "CustomProperties[%d].Value of %q holds a ';' (the Engine's separator)", i, p.Name)
		case seen[p.Name]:
			return invalid(op, "CustomProperties[%d].Name %q is given twice", i, p.Name)
		}
		seen[p.Name] = true
	}
	if spec.Clone && overrides {
		for _, td := range spec.TemplateDisks {
			if td.ID == "" {
				return invalid(op, "template disk without id")
			}
			if spec.StorageDomainID == "" && td.StorageDomainID == "" {
				return invalid(op, "template disk %s has no storage domain and StorageDomainID is empty: a disk override must name one", td.ID)
			}
		}
	}
	return nil
}

// cloneDisk deep-copies a disk.
func cloneDisk(d ovirt.Disk) ovirt.Disk {
	d.StorageDomainIDs = slices.Clone(d.StorageDomainIDs)
	return d
}

// cloneSpec deep-copies a VMSpec, so that what Spec returns is what CreateVM was given, whatever
// the caller did with its pointers and slices since.
func cloneSpec(s ovirt.VMSpec) ovirt.VMSpec {
	s.TemplateDisks = slices.Clone(s.TemplateDisks)
	for i := range s.TemplateDisks {
		s.TemplateDisks[i] = cloneDisk(s.TemplateDisks[i])
	}
	s.CustomProperties = slices.Clone(s.CustomProperties)
	if s.DiskSparse != nil {
		v := *s.DiskSparse
		s.DiskSparse = &v
	}
	if s.HighAvailability != nil {
		ha := *s.HighAvailability
		s.HighAvailability = &ha
	}
	if s.Performance.MultiQueues != nil {
		v := *s.Performance.MultiQueues
		s.Performance.MultiQueues = &v
	}
	if s.Performance.Ballooning != nil {
		v := *s.Performance.Ballooning
		s.Performance.Ballooning = &v
	}
	return s
}
