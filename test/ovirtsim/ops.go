package ovirtsim

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// apiError is an engine fault: HTTP status plus <fault><reason/><detail/></fault>.
type apiError struct {
	status         int
	reason, detail string // both empty: answer with no body (the engine's bare 404)
}

func (e *apiError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.status, e.reason, e.detail)
}

// Unwrap maps the HTTP status onto the package's sentinel errors.
func (e *apiError) Unwrap() error {
	switch e.status {
	case 404:
		return ErrNotFound
	case 409:
		return ErrConflict
	default:
		return ErrInvalid
	}
}

const (
	reasonFailed     = "Operation Failed"
	reasonIncomplete = "Incomplete parameters"
	vmLockedWhy      = "VM is locked. Please try again in a few minutes."
	diskLockedWhy    = "Disk is locked. Please try again later."
	relatedOpWhy     = "Related operation is currently in progress. Please try again later."
)

// vmImageLocked refuses disk and NIC operations on an image_locked VM with
// the engine's VM_STATUS_ILLEGAL text, e.g. "[Cannot edit Virtual Disk
// because the VM is in Image Locked status.]".
func vmImageLocked(v *vm, now time.Time, action string) *apiError {
	if v.status(now) == "image_locked" {
		return &apiError{409, reasonFailed, "[Cannot " + action + " because the VM is in Image Locked status.]"}
	}
	return nil
}

// lockedDisks lists the aliases of the VM's disks that are locked now.
func lockedDisks(v *vm, now time.Time) []string {
	var out []string
	for _, d := range v.disks {
		if d.status(now) == "locked" {
			out = append(out, d.alias)
		}
	}
	return out
}

func notFound(what string) *apiError {
	return &apiError{404, reasonFailed, "Entity not found: " + what}
}

// cannot builds the engine's validation message "[Cannot <action>. <why>]".
func cannot(status int, action, why string) *apiError {
	return &apiError{status, reasonFailed, "[Cannot " + action + ". " + why + "]"}
}

func incomplete(kind string, fields []string, op string) *apiError {
	return &apiError{400, reasonIncomplete, fmt.Sprintf("%s [%s] required for %s", kind, strings.Join(fields, ", "), op)}
}

func validName(n string) bool {
	if n == "" {
		return false
	}
	for _, r := range n {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
		default:
			return false
		}
	}
	return true
}

// maxDiskBytes (1 PiB) keeps GiB arithmetic far from overflow.
const maxDiskBytes = int64(1) << 50

const badNameWhy = "The given name contains special characters. Only lower-case and upper-case letters, numbers, '_', '-', '.' are allowed."
const dupNameWhy = "The VM name is already in use, please choose a unique name and try again."

var vmTypes = []string{"server", "desktop", "high_performance"}
var diskInterfaces = []string{"virtio_scsi", "virtio", "ide", "sata", "spapr_vscsi"}
var nicInterfaces = []string{"virtio", "e1000", "e1000e", "rtl8139", "rtl8139_virtio", "pci_passthrough", "spapr_vlan"}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// vmSpec is a VM creation request, decoded from <vm> or built by Go code.
type vmSpec struct {
	name, clusterID, clusterName, templateID, templateName string
	clone                                                  bool
	sockets, cores, threads                                int
	memory, guaranteed, maxMemory                          int64
	vmType, osType                                         string
	comment, description, customScript, hostName           string
	initUser, sshKeys                                      string
	initNets                                               []initNetwork
	dnsServers, dnsSearch                                  string
	ha                                                     bool
	haPriority                                             int64
	overrides                                              []diskOverride
	corr                                                   string
	perf                                                   perfSpec // performance.go
}

type diskOverride struct {
	diskID, sdID, sdName, format string
	sparse                       *bool
	backup                       string // "none", "incremental"; "": not given
}

func (inv *inventory) resolveCluster(id, name string) (*cluster, *apiError) {
	if id != "" {
		if c := inv.cluster(id); c != nil {
			return c, nil
		}
		return nil, notFound("Cluster: id=" + id)
	}
	if c := inv.clusterByName[name]; c != nil {
		return c, nil
	}
	return nil, notFound("Cluster: name=" + name)
}

func (inv *inventory) resolveTemplate(id, name string, cl *cluster) (*template, *apiError) {
	if id != "" {
		if t := inv.template(id); t != nil {
			return t, nil
		}
		return nil, notFound("Template: id=" + id)
	}
	// By name the engine looks in the cluster's data center; with several
	// versions it takes the latest one.
	var best *template
	for _, t := range inv.templates {
		if t.name != name || (t.cluster != nil && t.cluster.dc != cl.dc) {
			continue
		}
		if best == nil || t.version > best.version {
			best = t
		}
	}
	if best == nil {
		return nil, notFound("Template: name=" + name)
	}
	return best, nil
}

func (inv *inventory) resolveSD(id, name string) (*storageDomain, *apiError) {
	if id != "" {
		if s := inv.storageDomain(id); s != nil {
			return s, nil
		}
		return nil, notFound("StorageDomain: id=" + id)
	}
	if s := inv.sdByName[name]; s != nil {
		return s, nil
	}
	return nil, notFound("StorageDomain: name=" + name)
}

// usableSD checks that a domain can hold new disks of a VM in data center dc.
func usableSD(sd *storageDomain, dc *dataCenter, action string) *apiError {
	if sd.dc != dc {
		return cannot(400, action, fmt.Sprintf("Storage Domain %s does not belong to the Data Center %s.", sd.name, dc.name))
	}
	if sd.typ != "data" {
		return cannot(400, action, fmt.Sprintf("Storage Domain %s is not a data domain.", sd.name))
	}
	if sd.status != "active" {
		return cannot(409, action, fmt.Sprintf("The relevant Storage Domain's status is %s.", capitalise(sd.status)))
	}
	return nil
}

func (inv *inventory) createVM(sp *vmSpec, now time.Time, tm Timings) (*vm, *apiError) {
	const action = "add VM"
	var missing []string
	if sp.name == "" {
		missing = append(missing, "name")
	}
	if sp.clusterID == "" && sp.clusterName == "" {
		missing = append(missing, "cluster.id|name")
	}
	if sp.templateID == "" && sp.templateName == "" {
		missing = append(missing, "template.id|name")
	}
	if len(missing) > 0 {
		return nil, incomplete("Vm", missing, "add")
	}
	cl, aerr := inv.resolveCluster(sp.clusterID, sp.clusterName)
	if aerr != nil {
		return nil, aerr
	}
	t, aerr := inv.resolveTemplate(sp.templateID, sp.templateName, cl)
	if aerr != nil {
		return nil, aerr
	}
	// The REST layer's placement hosts and auto_pinning_policy, the command's init and
	// validateInputs (performance.go).
	if aerr := inv.addPerfPre(sp); aerr != nil {
		return nil, aerr
	}
	if aerr := inv.checkNameAndDescription(sp.name, sp.description, action); aerr != nil {
		return nil, aerr
	}
	if !validName(sp.name) {
		return nil, cannot(400, action, badNameWhy)
	}
	if inv.vmByExactName(sp.name) != nil {
		return nil, cannot(409, action, dupNameWhy)
	}
	if t.cluster != nil && t.cluster.dc != cl.dc {
		return nil, cannot(400, action, "Template is not present in the Data Center of the Cluster.")
	}
	switch t.status {
	case "locked":
		return nil, cannot(409, action, "Template is locked. Please try again in a few minutes.")
	case "illegal":
		return nil, cannot(400, action, "Template's image is illegal.")
	}
	// AddVmCommand.validate: cloudInitHandler.validate(vmInit), whatever the OS type.
	if aerr := validateInitNetworks(sp.initNets, action); aerr != nil {
		return nil, aerr
	}

	v := &vm{name: sp.name, cluster: cl, template: t, clone: sp.clone, noAgent: t.noAgent,
		comment: sp.comment, description: sp.description, customScript: sp.customScript, hostName: sp.hostName,
		initUser: sp.initUser, sshKeys: sp.sshKeys,
		initNets: sp.initNets, dnsServers: sp.dnsServers, dnsSearch: sp.dnsSearch,
		osType: sp.osType, vmType: sp.vmType,
		sockets: sp.sockets, cores: sp.cores, thr: sp.threads,
		memory: sp.memory, guaranteed: sp.guaranteed, maxMemory: sp.maxMemory,
		ha: sp.ha, haPriority: sp.haPriority}
	if v.osType == "" {
		v.osType = t.osType
	}
	if v.vmType == "" {
		v.vmType = "server"
	}
	if v.sockets == 0 {
		v.sockets = t.sockets
	}
	if v.cores == 0 {
		v.cores = t.cores
	}
	if v.thr == 0 {
		v.thr = t.threads
	}
	if v.memory == 0 {
		v.memory = t.memoryMB * mib
	}
	if v.guaranteed == 0 {
		v.guaranteed = v.memory
	}
	if v.maxMemory == 0 {
		v.maxMemory = 4 * v.memory
	}
	if aerr := inv.validateShape(v, action); aerr != nil {
		return nil, aerr
	}
	// canAddVm: the custom properties and the dedicated hosts (performance.go).
	if aerr := inv.addPerfProps(v, sp); aerr != nil {
		return nil, aerr
	}

	// Disk placement.
	ovs := map[*disk]*diskOverride{}
	for i := range sp.overrides {
		o := &sp.overrides[i]
		var td *disk
		for _, d := range t.disks {
			if d.id == o.diskID {
				td = d
			}
		}
		if td == nil {
			// As the engine answers it (see the reference's status table): 404, no body.
			return nil, &apiError{404, "", ""}
		}
		ovs[td] = o
	}
	type placement struct {
		sd     *storageDomain
		format string
		sparse bool
		backup string
	}
	places := make([]placement, len(t.disks))
	need := map[*storageDomain]int64{}
	for i, td := range t.disks {
		p := placement{sd: td.pickDomain(), format: td.format, sparse: td.sparse}
		if o := ovs[td]; o != nil {
			if o.sdID != "" || o.sdName != "" {
				sd, aerr := inv.resolveSD(o.sdID, o.sdName)
				if aerr != nil {
					// An unknown domain in a clone override is a 400 for the engine, not a 404.
					return nil, cannot(400, action, "Storage Domain doesn't exist.")
				}
				if !sp.clone && !td.onDomain(sd) {
					return nil, cannot(400, action, "The Template that the VM is based on does not exist on the Storage Domain.")
				}
				p.sd = sd
			}
			// The REST layer maps the override onto the template disk (BackendVmsResource.getDisksToClone,
			// DiskMapper): what it leaves out stays the template disk's (diskconfig.go).
			if aerr := applyDiskOverride(o, td, sp.clone, action, &p.format, &p.sparse, &p.backup); aerr != nil {
				return nil, aerr
			}
		}
		if !sp.clone {
			// A thin disk is a new COW sparse volume on top of the template's image, whatever the
			// override says (CreateSnapshotCommand: "override volume type and volume format").
			p.format, p.sparse = "cow", true
		}
		if aerr := usableSD(p.sd, cl.dc, action); aerr != nil {
			return nil, aerr
		}
		if sp.clone {
			need[p.sd] += td.sizeGB()
		}
		places[i] = p
	}
	for _, sd := range inv.sds { // deterministic order
		if n, ok := need[sd]; ok && sd.freeGB < n {
			return nil, cannot(409, action, fmt.Sprintf("Low disk space on Storage Domain %s.", sd.name))
		}
	}
	if sp.clone {
		// AddVmFromTemplateCommand.validate, after AddVmCommand's: ImagesHandler.checkImageConfiguration
		// of every (not shareable) template disk as the request maps it, on its destination domain.
		for _, p := range places {
			if aerr := checkImageConfiguration(p.sd, p.format, p.sparse, p.backup, "VAR__TYPE__VM"); aerr != nil {
				return nil, aerr
			}
		}
	}

	// The CPU pinning, the lease and the pinning policy (performance.go, ha.go).
	if aerr := inv.addPerfRest(v, sp, now); aerr != nil {
		return nil, aerr
	}
	lock := tm.ImageLock
	if sp.clone {
		lock = time.Duration(float64(lock) * tm.CloneFactor)
	}
	v.id = inv.newID()
	inv.vmSeq++
	v.seq = inv.vmSeq
	v.created = now
	v.unlockAt = now.Add(lock)
	for i, td := range t.disks {
		p := places[i]
		d := &disk{id: inv.newID(), alias: td.alias, sizeBytes: td.sizeBytes, format: p.format, sparse: p.sparse,
			sd: p.sd, bootable: td.bootable, iface: td.iface, active: true, lockedUntil: v.unlockAt,
			vm: v, fromTemplate: true, created: now, backup: p.backup}
		if sp.clone {
			d.consumedGB = td.sizeGB()
			inv.consume(p.sd, d.consumedGB)
		}
		v.disks = append(v.disks, d)
		inv.disks[d.id] = d
	}
	for _, tn := range t.nics {
		v.nics = append(v.nics, inv.newNIC(cl, tn.name, tn.profile, "virtio", ""))
	}
	if sp.perf.mdevType != nil {
		// AddVmCommand (4.5): the removed mdev_type becomes MDEV devices (hostdevices.go).
		v.mdevs = inv.convertMdevs(*sp.perf.mdevType)
	}
	inv.vms[v.id] = v
	inv.indexVMName(v)
	inv.addJob(sp.corr, fmt.Sprintf("Creating VM %s from Template %s in Cluster %s", v.name, t.name, cl.name), now, v.unlockAt)
	return v, nil
}

func (inv *inventory) validateShape(v *vm, action string) *apiError {
	if v.sockets < 1 || v.cores < 1 || v.thr < 1 {
		return cannot(400, action, "CPU topology values must be positive.")
	}
	if mx := inv.version.maxVCPUs(); int64(v.sockets)*int64(v.cores)*int64(v.thr) > int64(mx) {
		return cannot(400, action, fmt.Sprintf("The total number of CPU cores exceeds the maximum of %d.", mx))
	}
	if v.memory <= 0 {
		return cannot(400, action, "Memory size must be positive.")
	}
	if v.guaranteed < 0 || v.maxMemory < 0 {
		return cannot(400, action, "Memory values must not be negative.")
	}
	if v.guaranteed > v.memory {
		return cannot(400, action, "Physical Memory Guaranteed cannot exceed Memory Size.")
	}
	if v.maxMemory < v.memory {
		return cannot(400, action, "Maximum memory size must be greater than or equal to the memory size.")
	}
	if !slices.Contains(vmTypes, v.vmType) {
		return &apiError{400, reasonFailed, fmt.Sprintf("Invalid value '%s' for VM type (%s).", v.vmType, strings.Join(vmTypes, ", "))}
	}
	return nil
}

func (inv *inventory) newNIC(cl *cluster, name string, p *vnicProfile, iface, mac string) *nic {
	if mac == "" {
		mac = inv.newMAC()
	}
	return &nic{id: inv.newID(), name: name, mac: mac, iface: iface, profile: p, plugged: true, linked: true,
		ipv4: inv.newIPv4(cl), rdID: inv.newID()}
}

func vmLocked(v *vm, now time.Time, action string) *apiError {
	if v.status(now) == "image_locked" {
		return cannot(409, action, vmLockedWhy)
	}
	return nil
}

// vmUpdate carries the fields of a PUT /vms/{id}; nil means unchanged.
type vmUpdate struct {
	name, comment, description, vmType, osType, customScript, hostName *string
	initUser, sshKeys                                                  *string
	dnsServers, dnsSearch                                              *string
	initNets                                                           *[]initNetwork // nic_configurations given (maybe empty)
	sockets, cores, threads                                            *int
	memory, guaranteed, maxMemory                                      *int64
	ha                                                                 *bool    // high_availability.enabled
	haPriority                                                         *int64   // high_availability.priority
	perf                                                               perfSpec // performance.go
}

func (inv *inventory) updateVM(v *vm, u *vmUpdate, now time.Time) *apiError {
	const action = "edit VM"
	if aerr := vmLocked(v, now, action); aerr != nil {
		return aerr
	}
	n := *v
	setStr(&n.name, u.name)
	setStr(&n.comment, u.comment)
	setStr(&n.description, u.description)
	setStr(&n.vmType, u.vmType)
	setStr(&n.osType, u.osType)
	u.applyInit(&n)
	if u.sockets != nil {
		n.sockets = *u.sockets
	}
	if u.cores != nil {
		n.cores = *u.cores
	}
	if u.threads != nil {
		n.thr = *u.threads
	}
	if u.memory != nil {
		n.memory = *u.memory
	}
	if u.guaranteed != nil {
		n.guaranteed = *u.guaranteed
	}
	if u.maxMemory != nil {
		n.maxMemory = *u.maxMemory
	} else if u.memory != nil && n.maxMemory < n.memory {
		n.maxMemory = 4 * n.memory
	}
	if aerr := inv.checkNameAndDescription(n.name, n.description, action); aerr != nil {
		return aerr
	}
	if n.name != v.name {
		if !validName(n.name) {
			return cannot(400, action, badNameWhy)
		}
		if inv.vmByExactName(n.name) != nil {
			return cannot(409, action, dupNameWhy)
		}
	}
	if aerr := inv.validateShape(&n, action); aerr != nil {
		return aerr
	}
	// UpdateVmCommand.validate: cloudInitHandler.validate of the merged vm_init.
	if aerr := validateInitNetworks(n.initNets, action); aerr != nil {
		return aerr
	}
	perf, aerr := inv.updateVMPerf(v, &n, u, now) // performance.go
	if aerr != nil {
		return aerr
	}
	if n.name != v.name {
		inv.unindexVMName(v)
		v.name = n.name
		inv.indexVMName(v)
	}
	v.comment, v.description, v.vmType, v.osType = n.comment, n.description, n.vmType, n.osType
	v.customScript, v.hostName, v.initUser, v.sshKeys = n.customScript, n.hostName, n.initUser, n.sshKeys
	v.initNets, v.dnsServers, v.dnsSearch = n.initNets, n.dnsServers, n.dnsSearch
	v.sockets, v.cores, v.thr = n.sockets, n.cores, n.thr
	v.memory, v.guaranteed, v.maxMemory = n.memory, n.guaranteed, n.maxMemory
	if pinnedHostsChanged(v.perf.pinnedHosts, perf.pinnedHosts) {
		v.hostDevs = nil // UpdateVmCommand.updateVmHostDevices (hostdevices.go)
	}
	if u.perf.mdevType != nil {
		v.mdevs = inv.convertMdevs(*u.perf.mdevType) // UpdateVmCommand.updateMdevDevices (4.5)
	}
	v.perf = perf
	if u.ha != nil {
		v.ha = *u.ha
	}
	if u.haPriority != nil {
		v.haPriority = *u.haPriority
	}
	return nil
}

// removeVM deletes a VM. Attached disks are deleted too unless detachOnly
// (they become floating disks). force is the API's force=true: like
// RemoveVmCommand it skips the check of locked disks, not the running check.
// outOfBand skips every validation (Simulator.DeleteVM).
func (inv *inventory) removeVM(v *vm, detachOnly, force, outOfBand bool, now time.Time) *apiError {
	const action = "remove VM"
	if !outOfBand {
		if aerr := vmLocked(v, now, action); aerr != nil {
			return aerr
		}
		if v.status(now) != "down" {
			return cannot(409, action, "VM is running.")
		}
		if detachOnly && !v.clone && v.template != inv.blank {
			// RemoveVmCommand.canRemoveVmWithDetachDisks: VM_CANNOT_REMOVE_WITH_DETACH_DISKS_BASED_ON_TEMPLATE.
			return cannot(400, action, "The VM is based on a template: its disks cannot be detached.")
		}
		for _, d := range v.disks {
			if d.status(now) != "locked" {
				continue
			}
			if d.oldSize > 0 {
				// An update of the disk still holds the VM's lock (ACTION_TYPE_FAILED_OBJECT_LOCKED).
				return cannot(409, action, relatedOpWhy)
			}
			if !force {
				return cannot(409, action, diskLockedWhy)
			}
		}
	}
	for _, d := range v.disks {
		if detachOnly {
			d.vm = nil
			d.active = false
		} else {
			inv.releaseDisk(d)
		}
	}
	v.disks = nil
	delete(inv.vms, v.id)
	inv.unindexVMName(v)
	// affinity_group_members.vm_id references vm_static ON DELETE CASCADE:
	// a removed VM leaves its affinity groups.
	inv.dropFromGroups(v)
	// tags_vm_map.vm_id too (tags_vm_map_vm): it loses its tags (vmtags.go).
	inv.dropVMTags(v)
	v.leaveHost()
	inv.guestOp(v, guestRemove)
	return nil
}

func (inv *inventory) startVM(v *vm, now time.Time, tm Timings, p startParams) *apiError {
	const action = "run VM"
	if aerr := vmLocked(v, now, action); aerr != nil {
		return aerr
	}
	if v.status(now) != "down" {
		return cannot(409, action, "VM is running.")
	}
	if l := lockedDisks(v, now); len(l) > 0 {
		return cannot(409, action, "The following disks are locked: "+strings.Join(l, ", ")+". Please try again in a few minutes.")
	}
	// RunVmValidator.canRunVm ends with the scheduler (canSchedule); the
	// payload is built later, when the VM is sent to the host.
	h, aerr := inv.scheduleVM(v, now, nil, "VAR__ACTION__RUN")
	if aerr != nil {
		return aerr
	}
	payload, aerr := runPayload(v, now, p)
	if aerr != nil {
		return aerr
	}
	if payload != nil {
		v.init = payload
	}
	v.initialized = true
	v.runOnce, v.volatileRun = p.runOnce, p.runOnce && p.volatile
	v.power, v.phaseAt = phaseStarting, now
	v.wfl, v.pu, v.gaDelay = tm.WaitForLaunch, tm.PoweringUp, tm.GuestAgentDelay
	v.startTime = now
	h.place(v)
	inv.bootGuest(v, payload)
	return nil
}

// runPayload is the initialization payload of a start (RunVmCommand.updateVmInit and
// buildCreateVmParameters), nil for none:
//   - the Engine decides (no use_* switch): a payload only on a VM that never ran
//     (!is_initialized) and has a stored vm_init, or with use_initialization; its format follows
//     the OS type;
//   - use_cloud_init, use_ignition or use_sysprep: a payload whether the VM ran before or not,
//     but only when the OS type takes that format (osRepository.isCloudInit/isIgnition/
//     isSysprep), else none; a use_* switch given as false: none;
//   - run once (RunVmOnceCommand: initVm and buildCreateVmParameters put the action's VmInit on
//     the VM of this run): the payload is built from the stored vm_init with the action's
//     sub-tags mapped onto it, and nothing of it is stored on the VM.
func runPayload(v *vm, now time.Time, p startParams) (*VMInitialization, *apiError) {
	switch p.initType {
	case initNone:
		return nil, nil
	case "":
		firstRun := !v.initialized && v.hasStoredInit()
		if !firstRun && !p.initialize {
			return nil, nil
		}
	default:
		if osInitFormat(v.osType) != p.initType {
			return nil, nil
		}
	}
	run := *v
	if p.init != nil {
		p.init.applyInit(&run)
	}
	return composeInit(&run, now)
}

// hasStoredInit reports whether the VM has a vm_init row (any initialization field).
func (v *vm) hasStoredInit() bool {
	return v.customScript != "" || v.hostName != "" || v.initUser != "" || v.sshKeys != "" || v.hasNetworkInit()
}

// osInitFormat is the initialization format an OS type takes (osinfo's vmInitType).
func osInitFormat(osType string) string {
	switch _, ignition := ignitionOSTypes[osType]; {
	case ignition:
		return InitFormatIgnition
	case strings.HasPrefix(osType, "windows"):
		return InitFormatSysprep
	}
	return InitFormatCloudInit
}

// setStr sets *dst to *src unless src is nil (a field the update left out).
func setStr(dst, src *string) {
	if src != nil {
		*dst = *src
	}
}

// applyInit sets the initialization fields of u on v.
func (u *vmUpdate) applyInit(v *vm) {
	setStr(&v.customScript, u.customScript)
	setStr(&v.hostName, u.hostName)
	setStr(&v.initUser, u.initUser)
	setStr(&v.sshKeys, u.sshKeys)
	setStr(&v.dnsServers, u.dnsServers)
	setStr(&v.dnsSearch, u.dnsSearch)
	if u.initNets != nil {
		v.initNets = *u.initNets
	}
}

func (inv *inventory) stopVM(v *vm, now time.Time) *apiError {
	const action = "stop VM"
	if aerr := vmLocked(v, now, action); aerr != nil {
		return aerr
	}
	if v.status(now) == "down" {
		return cannot(409, action, "VM is not running.")
	}
	v.power, v.phaseAt, v.stopTime = phaseDown, now, now
	inv.vmWentDown(v, v.host, now, now)
	v.leaveHost()
	inv.guestOp(v, guestPowerOff)
	return nil
}

// leaveHost forgets the host of a VM that went down.
func (v *vm) leaveHost() {
	if v.host != nil {
		delete(v.host.vms, v)
		v.host = nil
	}
}

// shutdownVM is graceful only from up: powering_down, then down (or back to
// up when the guest ignores ACPI). From wait_for_launch or powering_up the
// engine stops the VM hard. It reports when the operation ends.
func (inv *inventory) shutdownVM(v *vm, now time.Time, tm Timings) (*apiError, time.Time) {
	const action = "shutdown VM"
	if aerr := vmLocked(v, now, action); aerr != nil {
		return aerr, now
	}
	switch v.status(now) {
	case "down":
		return cannot(409, action, "VM is not running."), now
	case "powering_down":
		return nil, v.phaseAt.Add(v.pd)
	case "up":
		// With or without a guest agent: the engine falls back to ACPI.
		if v.ignoresACPI || v.hung {
			up, _ := v.upSince(now)
			v.power, v.phaseAt, v.pd, v.upAt = phaseRefusing, now, tm.PoweringDown, up
			return nil, now.Add(tm.PoweringDown)
		}
		pd := tm.PoweringDown
		if inv.guests != nil {
			// A real guest: powering_down until it has powered off (GuestExited).
			pd = guestShutdownLimit
			inv.guestOp(v, guestShutdown)
		}
		v.power, v.phaseAt, v.pd, v.stopTime = phaseStopping, now, pd, now.Add(pd)
		inv.vmWentDown(v, v.host, v.stopTime, now)
		return nil, now.Add(pd)
	}
	// wait_for_launch, powering_up: no guest to ask yet, a hard stop.
	v.power, v.phaseAt, v.stopTime = phaseDown, now, now
	inv.vmWentDown(v, v.host, now, now)
	v.leaveHost()
	inv.guestOp(v, guestPowerOff)
	return nil, now
}

// rebootVM reboots a VM that is up or powering up (RebootVmCommand.validate: any other status
// is ACTION_TYPE_FAILED_VM_STATUS_ILLEGAL): reboot_in_progress while the guest restarts, then
// up again, on the same host, in the same run (no new payload: the run's config drive stays).
// A volatile run once is rebooted cold (RebootVmCommand.isColdReboot: isRunOnce() &&
// isVolatileRun()): the VM comes back as a plain run of its stored configuration, and a VM that
// ran before gets no payload, so its guest boots without the config drive.
func (inv *inventory) rebootVM(v *vm, now time.Time, tm Timings) (*apiError, time.Time) {
	const action = "reboot VM"
	if aerr := vmLocked(v, now, action); aerr != nil {
		return aerr, now
	}
	switch st := v.status(now); st {
	case "up", "powering_up":
	default:
		return cannot(409, action, "VM is not running."), now
	}
	v.power, v.phaseAt, v.rb = phaseRebooting, now, tm.PoweringDown+tm.PoweringUp
	if v.hung && !v.volatileRun {
		// A warm reboot asks the guest (agent or ACPI) to reboot; a hung guest never does, and
		// the VM is back up in the same boot (reset.go). A cold one is modelled as before.
		return nil, now.Add(v.rb)
	}
	if v.volatileRun {
		v.runOnce, v.volatileRun, v.runDrive = false, false, nil
	}
	v.boots++
	inv.rebootGuest(v)
	return nil, now.Add(v.rb)
}

// diskEdit carries the editable disk fields; nil means unchanged.
type diskEdit struct {
	alias     *string
	sizeBytes *int64
	bootable  *bool
	active    *bool
	iface     *string
}

func (inv *inventory) editDisk(d *disk, e *diskEdit, now time.Time, tm Timings) *apiError {
	const action = "edit Virtual Disk"
	if d.template != nil {
		return cannot(409, action, "The disk belongs to a template.")
	}
	if d.vm != nil {
		if aerr := vmImageLocked(d.vm, now, action); aerr != nil {
			return aerr
		}
	}
	if d.status(now) == "locked" {
		return cannot(409, action, diskLockedWhy)
	}
	var delta int64
	if e.sizeBytes != nil {
		if *e.sizeBytes > maxDiskBytes {
			return cannot(400, action, "The disk size is too large.")
		}
		if *e.sizeBytes < d.sizeBytes {
			return cannot(400, action, "New disk size cannot be smaller than the current disk size.")
		}
		delta = ceilGiB(*e.sizeBytes) - d.sizeGB()
		if delta > d.sd.freeGB {
			return cannot(409, action, fmt.Sprintf("Low disk space on Storage Domain %s.", d.sd.name))
		}
	}
	if e.iface != nil && !slices.Contains(diskInterfaces, *e.iface) {
		return &apiError{400, reasonFailed, fmt.Sprintf("Invalid value '%s' for disk interface.", *e.iface)}
	}
	if e.bootable != nil && *e.bootable && d.vm != nil {
		for _, o := range d.vm.disks {
			if o != d && o.bootable {
				return cannot(400, action, "The VM already has a bootable disk.")
			}
		}
	}
	if e.alias != nil {
		d.alias = *e.alias
	}
	if e.bootable != nil {
		d.bootable = *e.bootable
	}
	if e.active != nil {
		d.active = *e.active
	}
	if e.iface != nil {
		d.iface = *e.iface
	}
	// UpdateDiskCommand.lockImageInDb: every update locks the image, alias-only
	// too; a new size shows once the lock ends (ExtendImageSize finished).
	d.oldSize = d.sizeBytes
	if e.sizeBytes != nil && *e.sizeBytes != d.sizeBytes {
		d.sizeBytes = *e.sizeBytes
		inv.consume(d.sd, delta)
		d.consumedGB += delta
	}
	d.lockedUntil = now.Add(tm.DiskLock)
	return nil
}

// attachDisk attaches a floating disk (a new disk is added by addVMDisk, diskconfig.go).
func (inv *inventory) attachDisk(v *vm, d *disk, bootable bool, iface string, active bool, now time.Time) *apiError {
	const action = "attach Virtual Disk to VM"
	if aerr := vmImageLocked(v, now, action); aerr != nil {
		return aerr
	}
	if d.template != nil {
		return cannot(409, action, "The disk belongs to a template.")
	}
	if d.vm != nil {
		return cannot(409, action, fmt.Sprintf("The disk is already attached to VM %s.", d.vm.name))
	}
	if d.status(now) == "locked" {
		return cannot(409, action, diskLockedWhy)
	}
	if iface == "" {
		iface = "virtio_scsi"
	}
	if !slices.Contains(diskInterfaces, iface) {
		return &apiError{400, reasonFailed, fmt.Sprintf("Invalid value '%s' for disk interface.", iface)}
	}
	if bootable {
		if aerr := bootDiskInUse(v, now, "VAR__ACTION__ATTACH_ACTION_TO"); aerr != nil {
			return aerr
		}
	}
	if d.sd.dc != v.cluster.dc {
		return cannot(400, action, "The disk's Storage Domain is not in the Data Center of the VM.")
	}
	if aerr := virtioScsiValid(v, iface, "VAR__ACTION__ATTACH_ACTION_TO"); aerr != nil {
		return aerr
	}
	d.vm, d.bootable, d.iface, d.active, d.plugAt = v, bootable, iface, active, time.Time{}
	v.disks = append(v.disks, d)
	return nil
}

// diskSpec describes a new disk (POST /disks or a full disk in POST diskattachments).
type diskSpec struct {
	alias, description, format string
	sparse                     *bool
	sizeBytes                  int64
	sdID, sdName               string
	wipe                       *bool  // wipe_after_delete; nil: the domain's
	backup                     string // "none", "incremental"; "": not given (none)
}

func (inv *inventory) createDisk(sp *diskSpec, now time.Time, tm Timings) (*disk, *apiError) {
	// AddDiskCommand's checks, then the disk (diskconfig.go).
	pl, aerr := inv.planDisk(sp)
	if aerr != nil {
		return nil, aerr
	}
	return inv.makeDisk(pl, now, tm), nil
}

// detachDisk makes an attached disk floating; force skips the lock checks.
func (inv *inventory) detachDisk(v *vm, d *disk, force bool, now time.Time) *apiError {
	const action = "detach Virtual Disk from VM"
	if !force {
		if aerr := vmImageLocked(v, now, action); aerr != nil {
			return aerr
		}
		if d.status(now) == "locked" {
			return cannot(409, action, diskLockedWhy)
		}
	}
	v.disks = slices.DeleteFunc(v.disks, func(e *disk) bool { return e == d })
	d.vm, d.active, d.plugAt = nil, false, time.Time{}
	return nil
}

// deleteDisk removes a disk, detaching it first if attached.
func (inv *inventory) deleteDisk(d *disk, now time.Time) *apiError {
	const action = "remove Virtual Disk"
	if d.template != nil {
		return cannot(409, action, "The disk belongs to a template.")
	}
	if d.status(now) == "locked" {
		return cannot(409, action, diskLockedWhy)
	}
	if v := d.vm; v != nil {
		if aerr := vmImageLocked(v, now, action); aerr != nil {
			return aerr
		}
		if d.isActive(now) && v.status(now) != "down" {
			return cannot(409, action, "Disk is plugged to a running VM.")
		}
		v.disks = slices.DeleteFunc(v.disks, func(e *disk) bool { return e == d })
	}
	inv.releaseDisk(d)
	return nil
}

// nicSpec is a NIC add or update; empty fields mean "not given".
type nicSpec struct {
	name, profileID, iface, mac string
	hasProfile                  bool
	plugged, linked             *bool
}

func (inv *inventory) nicProfile(v *vm, sp *nicSpec, action string) (*vnicProfile, *apiError) {
	if sp.profileID == "" {
		return nil, nil // an empty profile: the NIC is unplugged from any network
	}
	p := inv.profile(sp.profileID)
	if p == nil {
		return nil, cannot(400, action, "The specified vNIC profile doesn't exist.")
	}
	if !slices.Contains(v.cluster.networks, p.net) {
		return nil, cannot(409, action, fmt.Sprintf("Network %s is not attached to the Cluster %s of the VM.", p.net.name, v.cluster.name))
	}
	return p, nil
}

func validMAC(s string) bool {
	hw, err := net.ParseMAC(s)
	return err == nil && len(hw) == 6
}

func (inv *inventory) addNIC(v *vm, sp *nicSpec, now time.Time) (*nic, *apiError) {
	const action = "add Interface"
	if sp.name == "" {
		return nil, incomplete("Nic", []string{"name"}, "add")
	}
	if aerr := vmImageLocked(v, now, action); aerr != nil {
		return nil, aerr
	}
	for _, n := range v.nics {
		if n.name == sp.name {
			return nil, cannot(409, action, "Interface name is already in use.")
		}
	}
	p, aerr := inv.nicProfile(v, sp, action)
	if aerr != nil {
		return nil, aerr
	}
	iface := sp.iface
	if iface == "" {
		iface = "virtio"
	}
	if !slices.Contains(nicInterfaces, iface) {
		return nil, &apiError{400, reasonFailed, fmt.Sprintf("Invalid value '%s' for NIC interface.", iface)}
	}
	if sp.mac != "" && !validMAC(sp.mac) {
		return nil, cannot(400, action, "MAC Address "+sp.mac+" is invalid.")
	}
	n := inv.newNIC(v.cluster, sp.name, p, iface, strings.ToLower(sp.mac))
	if sp.plugged != nil {
		n.plugged = *sp.plugged
	}
	if sp.linked != nil {
		n.linked = *sp.linked
	}
	v.nics = append(v.nics, n)
	return n, nil
}

func (inv *inventory) updateNIC(v *vm, n *nic, sp *nicSpec, now time.Time) *apiError {
	const action = "edit Interface"
	if aerr := vmImageLocked(v, now, action); aerr != nil {
		return aerr
	}
	if sp.name != "" && sp.name != n.name {
		for _, o := range v.nics {
			if o.name == sp.name {
				return cannot(409, action, "Interface name is already in use.")
			}
		}
	}
	p := n.profile
	if sp.hasProfile {
		var aerr *apiError
		if p, aerr = inv.nicProfile(v, sp, action); aerr != nil {
			return aerr
		}
	}
	if sp.iface != "" && !slices.Contains(nicInterfaces, sp.iface) {
		return &apiError{400, reasonFailed, fmt.Sprintf("Invalid value '%s' for NIC interface.", sp.iface)}
	}
	if sp.mac != "" && !validMAC(sp.mac) {
		return cannot(400, action, "MAC Address "+sp.mac+" is invalid.")
	}
	if sp.name != "" {
		n.name = sp.name
	}
	if sp.iface != "" {
		n.iface = sp.iface
	}
	if sp.mac != "" {
		n.mac = strings.ToLower(sp.mac)
	}
	if sp.plugged != nil {
		n.plugged = *sp.plugged
	}
	if sp.linked != nil {
		n.linked = *sp.linked
	}
	n.profile = p
	return nil
}

func (inv *inventory) removeNIC(v *vm, n *nic, now time.Time) *apiError {
	if aerr := vmImageLocked(v, now, "remove Interface"); aerr != nil {
		return aerr
	}
	v.nics = slices.DeleteFunc(v.nics, func(e *nic) bool { return e == n })
	return nil
}

// onDomain reports whether a template disk has a copy on sd.
func (d *disk) onDomain(sd *storageDomain) bool {
	return d.sd == sd || slices.Contains(d.copies, sd)
}

// pickDomain is where the engine puts a VM disk made from template disk d
// without an override: the first active domain holding a copy (the disk's
// own domain if none is active, so that validation reports its status).
func (d *disk) pickDomain() *storageDomain {
	for _, sd := range append([]*storageDomain{d.sd}, d.copies...) {
		if sd.status == "active" {
			return sd
		}
	}
	return d.sd
}
