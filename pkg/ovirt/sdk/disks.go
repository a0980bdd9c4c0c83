package sdk

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// AddDisk implements ovirt.Client with one request that creates the disk and attaches it:
//
//	POST /vms/{id}/diskattachments[?correlation_id=...]
//	<disk_attachment>
//	  <active>true</active><bootable>false</bootable><interface>virtio_scsi</interface>
//	  <disk>
//	    <alias/><description/><format>cow</format><provisioned_size/><sparse/>
//	    <storage_domains><storage_domain id=""/></storage_domains>
//	    [<wipe_after_delete/>]
//	  </disk>
//	</disk_attachment>
//
// A disk without an id is a new one (BackendDiskAttachmentsResource.add runs AddDisk with the
// attachment). description is sent when set, wipe_after_delete when WipeAfterDelete is set:
// without it AddDiskCommand takes the storage domain's setting.
//
// The Engine answers with the attachment and a reference to the disk (no follow on a create):
// the Disk returned has the attachment's id, bootable and interface as reported, and the disk's
// fields the answer leaves out are those of the spec (the Engine created the disk with them or
// refused the request). Its Status is empty unless the Engine reported one, and WipeAfterDelete
// is false when the spec left it to the domain (whose setting may be true): GetVM or
// ListDiskAttachments read the disk as it is.
//
// Refusals: a disk configuration the storage domain does not take (cow preallocated, or raw
// sparse on block storage: 409 "... Disk configuration (RAW Sparse backup-None) is incompatible
// with the storage domain type.") is ErrInvalid, not ErrConflict: the same request will always
// be refused. A VM that does not exist is ErrNotFound (the Engine's 400 "VM is not found."). A
// locked VM (being created) is ErrLocked. Low disk space or a domain that is not active is
// ErrConflict and drops the lookup cache (its domain status is stale), as an unknown domain (400
// "Storage Domain doesn't exist.", ErrInvalid) does.
func (c *client) AddDisk(ctx context.Context, vmID string, spec ovirt.DiskSpec) (*ovirt.Disk, error) {
	const op = "AddDisk"
	att, err := buildDiskAttachment(op, vmID, spec)
	if err != nil {
		return nil, err
	}
	added, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (*ovirt.Disk, error) {
		req := conn.SystemService().VmsService().VmService(vmID).DiskAttachmentsService().Add().Attachment(att)
		if spec.CorrelationID != "" {
			req.Query("correlation_id", spec.CorrelationID)
		}
		resp, err := req.Send()
		if err != nil {
			return nil, err
		}
		a, ok := resp.Attachment()
		if !ok {
			return nil, fmt.Errorf("engine answered without the disk attachment")
		}
		d := toDisk(a)
		return &d, nil
	})
	switch {
	case engineSays(err, phraseDiskConfiguration):
		return nil, withKinds(err, ovirt.ErrInvalid)
	case engineSays(err, phraseVMNotFound):
		return nil, withKinds(err, ovirt.ErrNotFound)
	}
	if err != nil {
		c.dropLookupsIfNotFound(err)
		if errors.Is(err, ovirt.ErrConflict) {
			c.s.cache.clear()
		}
		return nil, err
	}
	fillFromSpec(added, spec)
	return added, nil
}

// phraseVMNotFound is ACTION_TYPE_FAILED_VM_NOT_FOUND's text, in lower case: AddDiskCommand's
// answer (400, BAD_PARAMETERS) for a VM that does not exist, "Cannot add Virtual Disk. VM is not
// found." (the REST layer does not look the VM up first).
const phraseVMNotFound = "vm is not found"

// buildDiskAttachment validates a DiskSpec (ErrInvalid naming the field, before any call) and
// builds the attachment AddDisk sends.
func buildDiskAttachment(op, vmID string, spec ovirt.DiskSpec) (*ovirtsdk.DiskAttachment, error) {
	iface := cmp.Or(spec.Interface, ovirt.DiskInterfaceVirtioSCSI)
	format := cmp.Or(spec.Format, ovirt.DiskFormatCow)
	switch {
	case vmID == "":
		return nil, invalid(op, "VM id is empty")
	case spec.Alias == "":
		return nil, invalid(op, "DiskSpec.Alias is empty")
	case spec.StorageDomainID == "":
		return nil, invalid(op, "DiskSpec.StorageDomainID is empty")
	case spec.SizeBytes < 1:
		return nil, invalid(op, "DiskSpec.SizeBytes %d is below 1", spec.SizeBytes)
	case iface != ovirt.DiskInterfaceVirtioSCSI && iface != ovirt.DiskInterfaceVirtio:
		return nil, invalid(op, "DiskSpec.Interface %q is neither %q nor %q", spec.Interface, ovirt.DiskInterfaceVirtioSCSI, ovirt.DiskInterfaceVirtio)
	case format != ovirt.DiskFormatCow && format != ovirt.DiskFormatRaw:
		return nil, invalid(op, "DiskSpec.Format %q is neither %q nor %q", spec.Format, ovirt.DiskFormatCow, ovirt.DiskFormatRaw)
	}
	db := ovirtsdk.NewDiskBuilder().
		Alias(xmlText(spec.Alias)).
		ProvisionedSize(spec.SizeBytes).
		Format(ovirtsdk.DiskFormat(format)).
		Sparse(spec.Sparse).
		StorageDomainsBuilderOfAny(*ovirtsdk.NewStorageDomainBuilder().Id(spec.StorageDomainID))
	if spec.Description != "" {
		db.Description(xmlText(spec.Description))
	}
	if spec.WipeAfterDelete != nil {
		db.WipeAfterDelete(*spec.WipeAfterDelete)
	}
	att, err := ovirtsdk.NewDiskAttachmentBuilder().
		Active(true).
		Bootable(false).
		Interface(ovirtsdk.DiskInterface(iface)).
		DiskBuilder(db).
		Build()
	if err != nil {
		return nil, invalid(op, "building the disk attachment: %v", err)
	}
	return att, nil
}

// fillFromSpec completes the disk of an AddDisk answer with the spec's values for what the answer
// left out (a real Engine returns a reference to the disk only).
func fillFromSpec(d *ovirt.Disk, spec ovirt.DiskSpec) {
	if d.Alias != "" || d.ProvisionedSize != 0 || d.Status != "" {
		return // the Engine returned the disk itself: as reported
	}
	d.Alias = spec.Alias
	d.Description = spec.Description
	d.ProvisionedSize = spec.SizeBytes
	d.StorageDomainID = spec.StorageDomainID
	d.StorageDomainIDs = []string{spec.StorageDomainID}
	d.Format = cmp.Or(spec.Format, ovirt.DiskFormatCow)
	d.Sparse = spec.Sparse
	d.WipeAfterDelete = spec.WipeAfterDelete != nil && *spec.WipeAfterDelete
	if d.Interface == "" {
		d.Interface = cmp.Or(spec.Interface, ovirt.DiskInterfaceVirtioSCSI)
	}
}
