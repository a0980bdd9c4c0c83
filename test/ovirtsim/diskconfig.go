package ovirtsim

import (
	"fmt"
	"slices"
	"time"

	ovirtsdk "github.com/ovirt/go-ovirt"
)

// Disk configuration and new VM disks, as ovirt-engine 4.4/4.5 decide them (read at
// ovirt-engine-4.5.7; the code is the same in 4.4):
//
//   - ImagesHandler.checkImageConfiguration refuses, on the disk's destination domain: a COW
//     preallocated volume unless its backup is incremental, a RAW volume with incremental backup,
//     and a RAW sparse volume on a block domain (StorageType.isBlockDomain: iscsi, fcp). The
//     refusal is ACTION_TYPE_FAILED_DISK_CONFIGURATION_NOT_SUPPORTED (CONFLICT: 409), "Cannot
//     ${action} ${type}. Disk configuration (${volumeFormat} ${volumeType} backup-${backup}) is
//     incompatible with the storage domain type." with the Java enum names (COW, RAW, Sparse,
//     Preallocated, None, Incremental).
//   - AddDiskCommand (POST /disks, and POST /vms/{id}/diskattachments with a new disk) checks it
//     after the domain's status and before the domain's type and free space;
//     AddVmFromTemplateCommand (POST /vms?clone=true) checks every template disk as the request's
//     disk_attachments map it, after all of AddVmCommand's checks. AddVmCommand (clone=false)
//     does not: a thin disk is a new COW sparse volume whatever the request says
//     (CreateSnapshotCommand), and an override whose format is not COW is refused earlier
//     (isDisksVolumeFormatValid, "Thin provisioned template disks can not be defined as Raw.").
//   - The REST layer maps a <disk> onto a new DiskImage (POST /disks, diskattachments) or onto
//     the template disk (a POST /vms override, BackendVmsResource.getDisksToClone): a field left
//     out is the DiskImage default (sparse: VolumeType.Sparse, DiskImageBase; backup: None,
//     BaseDisk) or the template disk's. format and provisioned_size are required on a new disk
//     (BackendDisksResource and BackendDiskAttachmentsResource.validateDiskForCreation).

// storageTypes are the storage types a seed domain may have (StorageType.java): the file and the
// block ones; the OpenStack and Kubernetes ones are not simulated.
var storageTypes = map[string]bool{
	"nfs": false, "glusterfs": false, "posixfs": false, "localfs": false, // FILE
	"iscsi": true, "fcp": true, // BLOCK
}

// storageTypeOf is the storage type of a seed domain: nfs unless it says otherwise.
func storageTypeOf(sd StorageDomain) (string, error) {
	if sd.StorageType == "" {
		return "nfs", nil
	}
	if _, ok := storageTypes[sd.StorageType]; !ok {
		return "", invalidf("storage domain %q: unknown storage_type %q (nfs, glusterfs, posixfs, localfs, iscsi, fcp)", sd.Name, sd.StorageType)
	}
	return sd.StorageType, nil
}

func init() {
	for k, v := range map[string]string{
		"VAR__TYPE__DISK":                                     "$type Virtual Disk",
		"VAR__ACTION__ATTACH_ACTION_TO":                       "$action attach",
		"ACTION_TYPE_FAILED_DISK_CONFIGURATION_NOT_SUPPORTED": "Cannot ${action} ${type}. Disk configuration (${volumeFormat} ${volumeType} backup-${backup}) is incompatible with the storage domain type.",
		"ACTION_TYPE_FAILED_VM_IS_LOCKED":                     "Cannot ${action} ${type}: VM is locked. Please try again in a few minutes.",
		"CANNOT_PERFORM_ACTION_VIRTIO_SCSI_IS_DISABLED":       "Cannot ${action} ${type}. VirtIO-SCSI is disabled for the VM",
		"ACTION_TYPE_FAILED_DISK_BOOT_IN_USE":                 "Cannot ${action} ${type}. Disk ${DiskName} in VM ${VmName} is already marked as boot.",
	} {
		engineTexts[k] = v
	}
	for _, k := range []string{"ACTION_TYPE_FAILED_DISK_CONFIGURATION_NOT_SUPPORTED", "ACTION_TYPE_FAILED_VM_IS_LOCKED",
		"CANNOT_PERFORM_ACTION_VIRTIO_SCSI_IS_DISABLED", "ACTION_TYPE_FAILED_DISK_BOOT_IN_USE"} {
		engineErrorTypes[k] = 409 // CONFLICT (EngineMessage.java)
	}
}

// checkImageConfiguration is ImagesHandler.checkImageConfiguration on sd; typeKey is the
// command's VAR__TYPE__ (VAR__TYPE__DISK for AddDisk, VAR__TYPE__VM for AddVmFromTemplate), the
// action is add.
func checkImageConfiguration(sd *storageDomain, format string, sparse bool, backup, typeKey string) *apiError {
	incremental := backup == "incremental"
	refused := !sparse && format == "cow" && !incremental ||
		format == "raw" && incremental ||
		storageTypes[sd.storageType] && sparse && format == "raw"
	if !refused {
		return nil
	}
	volumeFormat, volumeType, diskBackup := "COW", "Sparse", "None"
	if format == "raw" {
		volumeFormat = "RAW"
	}
	if !sparse {
		volumeType = "Preallocated"
	}
	if incremental {
		diskBackup = "Incremental"
	}
	return engineFault("VAR__ACTION__ADD", typeKey, "ACTION_TYPE_FAILED_DISK_CONFIGURATION_NOT_SUPPORTED",
		"$volumeFormat "+volumeFormat, "$volumeType "+volumeType, "$backup "+diskBackup)
}

// validFormat and validBackup are the REST layer's enum mapping of <format> and <backup>.
func validFormat(f string) *apiError {
	if f != "cow" && f != "raw" {
		return &apiError{400, reasonFailed, fmt.Sprintf("Invalid value '%s' for disk format (cow, raw).", f)}
	}
	return nil
}

func validBackup(b string) *apiError {
	if b != "" && b != "none" && b != "incremental" {
		return &apiError{400, reasonFailed, fmt.Sprintf("Invalid value '%s' for disk backup (incremental, none).", b)}
	}
	return nil
}

// applyDiskOverride maps a POST /vms disk override onto the template disk td's format, sparse
// and backup (DiskMapper.map(disk, templateDisk): what the override leaves out stays the
// template disk's). With clone=false, AddVmCommand.isDisksVolumeFormatValid refuses any mapped
// disk that is not COW: one whose override gives no format is the template disk's, so a raw
// template disk cannot be named in a thin VM's overrides at all.
func applyDiskOverride(o *diskOverride, td *disk, clone bool, action string, format *string, sparse *bool, backup *string) *apiError {
	f := td.format
	if o.format != "" {
		if aerr := validFormat(o.format); aerr != nil {
			return aerr
		}
		f = o.format
	}
	if aerr := validBackup(o.backup); aerr != nil {
		return aerr
	}
	if !clone && f != "cow" {
		return cannot(400, action, "Thin provisioned template disks can not be defined as Raw.")
	}
	*format = f
	if o.sparse != nil {
		*sparse = *o.sparse
	}
	if o.backup != "" {
		*backup = o.backup
	}
	return nil
}

// diskPlan is a new disk that passed AddDiskCommand's checks.
type diskPlan struct {
	sp             *diskSpec
	sd             *storageDomain
	format, backup string
	sparse, wipe   bool
	gb             int64
}

// planDisk runs the checks of a new image disk in the Engine's order: the REST layer's (enum
// values; provisioned_size and format required), then AddDiskCommand.checkIfImageDiskCanBeAdded's
// (the domain exists and is active, checkImageConfiguration, the domain is a data domain, free
// space).
func (inv *inventory) planDisk(sp *diskSpec) (*diskPlan, *apiError) {
	const action = "add Virtual Disk"
	if sp.format != "" {
		if aerr := validFormat(sp.format); aerr != nil {
			return nil, aerr
		}
	}
	if aerr := validBackup(sp.backup); aerr != nil {
		return nil, aerr
	}
	var missing []string
	if sp.sizeBytes <= 0 {
		missing = append(missing, "provisionedSize")
	}
	if sp.format == "" {
		missing = append(missing, "format")
	}
	if sp.sdID == "" && sp.sdName == "" {
		missing = append(missing, "storageDomains.id|name")
	}
	if len(missing) > 0 {
		return nil, incomplete("Disk", missing, "add")
	}
	if sp.sizeBytes > maxDiskBytes {
		return nil, cannot(400, action, "The disk size is too large.")
	}
	sd, aerr := inv.resolveSD(sp.sdID, sp.sdName)
	if aerr != nil {
		return nil, aerr
	}
	if sd.status != "active" { // StorageDomainValidator.isDomainExistAndActive
		return nil, cannot(409, action, fmt.Sprintf("The relevant Storage Domain's status is %s.", capitalise(sd.status)))
	}
	pl := &diskPlan{sp: sp, sd: sd, format: sp.format, sparse: true, backup: "none", wipe: sd.wipe, gb: ceilGiB(sp.sizeBytes)}
	if sp.sparse != nil {
		pl.sparse = *sp.sparse
	}
	if sp.backup != "" {
		pl.backup = sp.backup
	}
	if sp.wipe != nil { // AddDiskCommand.createDiskBasedOnImage: else the domain's
		pl.wipe = *sp.wipe
	}
	if aerr := checkImageConfiguration(sd, pl.format, pl.sparse, pl.backup, "VAR__TYPE__DISK"); aerr != nil {
		return nil, aerr
	}
	if aerr := usableSD(sd, sd.dc, action); aerr != nil { // domainIsValidDestination
		return nil, aerr
	}
	if sd.freeGB < pl.gb {
		return nil, cannot(409, action, fmt.Sprintf("Low disk space on Storage Domain %s.", sd.name))
	}
	return pl, nil
}

// makeDisk creates a planned disk, locked for DiskLock (AddImageFromScratch), floating.
func (inv *inventory) makeDisk(pl *diskPlan, now time.Time, tm Timings) *disk {
	d := &disk{id: inv.newID(), alias: pl.sp.alias, description: pl.sp.description, sizeBytes: pl.sp.sizeBytes,
		format: pl.format, sparse: pl.sparse, backup: pl.backup, wipe: pl.wipe, sd: pl.sd, iface: "virtio_scsi",
		consumedGB: pl.gb, lockedUntil: now.Add(tm.DiskLock), created: now}
	if d.alias == "" {
		d.alias = "disk_" + d.id[:8]
	}
	inv.consume(pl.sd, pl.gb)
	inv.disks[d.id] = d
	return d
}

// newAttachment is the <disk_attachment> of a new VM disk.
type newAttachment struct {
	bootable bool
	iface    string
	active   *bool // nil: not given
}

// addVMDisk is POST /vms/{id}/diskattachments with a new disk (AddDiskCommand with a VM), in the
// Engine's order: the interface value (REST mapping), a second boot disk
// (DiskValidator.isVmNotContainsBootDisk), the new disk's checks (planDisk), virtio-scsi
// (DiskVmElementValidator.isVirtIoScsiValid), the domain in the VM's data center, then the VM's
// image lock (VmValidator.vmNotLocked: ACTION_TYPE_FAILED_VM_IS_LOCKED). Nothing is created when
// a check fails.
//
// The disk is plugged as AddDiskCommand does it: on a VM that is down at once, unless active is
// false (shouldDiskBePlugged); on a VM in any other status the disk is added unplugged, and
// hot-plugged when its image is made (endSuccessfully: plugDiskToVmIfNeeded) only if active was
// given as true and the VM is up then (VMStatus.isUpOrPaused).
func (inv *inventory) addVMDisk(v *vm, sp *diskSpec, a newAttachment, now time.Time, tm Timings) (*disk, *apiError) {
	const action = "add Virtual Disk"
	iface := a.iface
	if iface == "" {
		iface = "virtio_scsi"
	}
	if !slices.Contains(diskInterfaces, iface) {
		return nil, &apiError{400, reasonFailed, fmt.Sprintf("Invalid value '%s' for disk interface.", iface)}
	}
	if a.bootable {
		if aerr := bootDiskInUse(v, now, "VAR__ACTION__ADD"); aerr != nil {
			return nil, aerr
		}
	}
	pl, aerr := inv.planDisk(sp)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := virtioScsiValid(v, iface, "VAR__ACTION__ADD"); aerr != nil {
		return nil, aerr
	}
	if pl.sd.dc != v.cluster.dc { // isStoragePoolMatching
		return nil, cannot(400, action, "The disk's Storage Domain is not in the Data Center of the VM.")
	}
	if v.status(now) == "image_locked" {
		return nil, engineFault("VAR__ACTION__ADD", "VAR__TYPE__DISK", "ACTION_TYPE_FAILED_VM_IS_LOCKED")
	}
	d := inv.makeDisk(pl, now, tm)
	d.vm, d.bootable, d.iface = v, a.bootable, iface
	if v.status(now) == "down" {
		d.active = a.active == nil || *a.active
	} else if a.active != nil && *a.active {
		d.plugAt = d.lockedUntil
	}
	v.disks = append(v.disks, d)
	return d, nil
}

// bootDiskInUse is DiskValidator.isVmNotContainsBootDisk: the VM has an active (plugged) boot
// disk already (DiskDao.getVmBootActiveDisk).
func bootDiskInUse(v *vm, now time.Time, actionKey string) *apiError {
	for _, o := range v.disks {
		if o.bootable && o.isActive(now) {
			return engineFault(actionKey, "VAR__TYPE__DISK", "ACTION_TYPE_FAILED_DISK_BOOT_IN_USE",
				"$VmName "+v.name, "$DiskName "+o.alias)
		}
	}
	return nil
}

// virtioScsiValid is DiskVmElementValidator.isVirtIoScsiValid: a virtio_scsi disk needs the VM's
// virtio-scsi controller (the OS's support of the interface, isDiskInterfaceSupported, is not
// simulated: every simulated OS takes virtio and virtio-scsi).
func virtioScsiValid(v *vm, iface, actionKey string) *apiError {
	if iface == "virtio_scsi" && v.noVirtioScsi {
		return engineFault(actionKey, "VAR__TYPE__DISK", "CANNOT_PERFORM_ACTION_VIRTIO_SCSI_IS_DISABLED")
	}
	return nil
}

// virtioScsiDisabled reads <virtio_scsi><enabled>false</enabled></virtio_scsi> of a POST /vms
// (BackendVmsResource.addDevicesToParams: AddVmParameters.virtioScsiEnabled). Without it the VM
// gets the controller: the template has one (AddVmFromTemplate) or the OS supports it (AddVm).
func virtioScsiDisabled(body *ovirtsdk.Vm) bool {
	if vs, ok := body.VirtioScsi(); ok {
		if on, ok := vs.Enabled(); ok {
			return !on
		}
	}
	return false
}

// isActive reports whether the disk is plugged now: plugged when attached, or hot-plugged when
// its image was made (plugAt) if the VM was up then. The VM's status at plugAt is computed from
// its current power phase; settleHotplugs fixes the outcome before an API power action changes
// the phase, so only out-of-band changes (a host failure, a guest powering off by itself) during
// the lock can make it differ from the Engine's.
func (d *disk) isActive(now time.Time) bool {
	if d.active {
		return true
	}
	return d.vm != nil && !d.plugAt.IsZero() && !now.Before(d.plugAt) && d.vm.status(d.plugAt) == "up"
}

// settleHotplugs decides the hot plugs whose time has come, before the VM's power phase changes.
func (v *vm) settleHotplugs(now time.Time) {
	for _, d := range v.disks {
		if !d.plugAt.IsZero() && !now.Before(d.plugAt) {
			d.active, d.plugAt = d.isActive(now), time.Time{}
		}
	}
}

// addDiskNeeds is AddDiskCommand.getPermissionCheckSubjects with a VM: CONFIGURE_VM_STORAGE on
// the VM (the action's group) and CREATE_DISK on the disk's storage domain (on the system when
// the request names none). A domain that does not resolve is left to the REST layer's 404.
func (inv *inventory) addDiskNeeds(v *vm, sp *diskSpec) []need {
	needs := []need{{group: ActionConfigureVMStorage, object: inv.vmObject(v)}}
	switch sd, aerr := inv.resolveSD(sp.sdID, sp.sdName); {
	case aerr == nil:
		needs = append(needs, need{group: ActionCreateDisk, object: inv.sdObject(sd)})
	case sp.sdID == "" && sp.sdName == "":
		needs = append(needs, need{group: ActionCreateDisk, object: []string{systemID}})
	}
	return needs
}
