package ovirtsim

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	ovirtsdk "github.com/ovirt/go-ovirt"
)

// Host devices, PCI passthrough and mediated devices (vGPUs), as the Engine models them:
//   - a host's devices are the rows of host_device VDSM reported (GetHostDevicesByHostId);
//     REST names a device by the hex of its name (HexUtils.string2hex) and shows <vm> only while
//     a VM holding it runs: host_device.vm_id is set by RunVmCommand
//     (HostDeviceManager.allocateVmHostDevices) and cleared when the VM goes down
//     (FreeHostDevicesUsedByVmId). The simulator derives it from the VMs running now.
//   - a VM's host devices are HOSTDEV vm_device rows (AddVmHostDevicesCommand): the VM must be
//     down and pinned to exactly one host, the whole IOMMU group is added (the devices not asked
//     for as placeholders), and a PCI device configured on another VM is accepted: only the start
//     is refused (HostDeviceFilterPolicyUnit) while that other VM runs.
//   - a VM's vGPUs are its mdev_type custom property (4.4) or its MDEV vm_device rows (4.5,
//     converted from the property by AddVmCommand/UpdateVmCommand). MDevicePolicyUnit checks the
//     available_instances the Engine last stored for the host, which it refreshes only at host
//     events or when a VM with host devices starts or stops there (VdsEventListener), so they may
//     be stale; VDSM's real count decides whether the VM can start.

// hostDevice is a row of host_device.
type hostDevice struct {
	name, capability, parent, driver             string
	vendorID, productID, vendorName, productName string
	iommu                                        *int
	mdevTypes                                    []*mdevType
}

// mdevType is a mediated device type a host device offers.
type mdevType struct {
	name, human, desc string
	capacity          int // instances when no VM uses the device
	reported          int // available_instances as the Engine last stored it
}

// vmHostDev is a HOSTDEV vm_device row of a VM.
type vmHostDev struct {
	host        *host
	dev         *hostDevice
	placeholder bool // iommuPlaceholder: added only because it shares the IOMMU group
}

// vmMdev is an MDEV vm_device row of a VM (4.5).
type vmMdev struct {
	id, mdevType string
	nodisplay    bool
}

var pciIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{4}$`)

// newHostDevices checks a seed host's devices and builds its rows.
func newHostDevices(h Host) ([]*hostDevice, error) {
	var out []*hostDevice
	seen := map[string]bool{}
	for _, d := range h.Devices {
		switch {
		case d.Name == "" || !validName(d.Name):
			return nil, invalidf("host %q: device name %q: want letters, digits, '_', '-' and '.'", h.Name, d.Name)
		case seen[d.Name]:
			return nil, invalidf("host %q: duplicate device %q", h.Name, d.Name)
		case d.VendorID != "" && !pciIDPattern.MatchString(d.VendorID):
			return nil, invalidf("host %q: device %q: vendor_id %q: want 4 hex digits", h.Name, d.Name, d.VendorID)
		case d.ProductID != "" && !pciIDPattern.MatchString(d.ProductID):
			return nil, invalidf("host %q: device %q: product_id %q: want 4 hex digits", h.Name, d.Name, d.ProductID)
		case d.IOMMUGroup != nil && *d.IOMMUGroup < 0:
			return nil, invalidf("host %q: device %q: negative iommu_group", h.Name, d.Name)
		}
		seen[d.Name] = true
		o := &hostDevice{name: d.Name, capability: d.Capability, parent: d.Parent, driver: d.Driver,
			vendorID: d.VendorID, productID: d.ProductID, vendorName: d.VendorName, productName: d.ProductName}
		if o.capability == "" {
			o.capability = "pci"
		}
		if o.parent == "" {
			o.parent = "computer"
		}
		if d.IOMMUGroup != nil {
			g := *d.IOMMUGroup
			o.iommu = &g
		}
		for _, t := range d.MDevTypes {
			if t.Name == "" || t.AvailableInstances < 0 {
				return nil, invalidf("host %q: device %q: an mdev type needs a name and available_instances >= 0", h.Name, d.Name)
			}
			o.mdevTypes = append(o.mdevTypes, &mdevType{name: t.Name, human: t.HumanReadableName, desc: t.Description,
				capacity: t.AvailableInstances, reported: t.AvailableInstances})
		}
		out = append(out, o)
	}
	return out, nil
}

// clusterLevel checks a seed cluster's compatibility level (4.2 to the engine's highest).
func (inv *inventory) clusterLevel(c Cluster) (int, error) {
	top := inv.version.maxClusterLevel()
	if c.Version == "" {
		return top, nil
	}
	v, err := parseVersion(c.Version)
	if err != nil || v.major != 4 || v.minor < 2 || v.minor > top || v.build != 0 {
		return 0, invalidf("cluster %q: version %q: want 4.2 to 4.%d", c.Name, c.Version, top)
	}
	return v.minor, nil
}

// maxClusterLevel is the engine's highest cluster level: 4.6 on 4.4, 4.7 from 4.5.
func (v engineVersion) maxClusterLevel() int {
	if v.major == 4 && v.minor <= 4 {
		return 6
	}
	return 7
}

// hexID is HexUtils.string2hex: the REST id of a host device.
func hexID(name string) string { return hex.EncodeToString([]byte(name)) }

// deviceNameOf is HexUtils.hex2string; false for a string that is not hex.
func deviceNameOf(id string) (string, bool) {
	b, err := hex.DecodeString(id)
	if err != nil {
		return "", false
	}
	return string(b), true
}

func (h *host) device(name string) *hostDevice {
	for _, d := range h.devices {
		if d.name == name {
			return d
		}
	}
	return nil
}

// group is getDeviceAtomicGroup: a PCI device with an IOMMU group comes with every device of the
// group (GetHostDevicesByHostIdAndIommuGroup), any other alone.
func (h *host) group(d *hostDevice) []*hostDevice {
	if d.capability != "pci" || d.iommu == nil {
		return []*hostDevice{d}
	}
	var out []*hostDevice
	for _, o := range h.devices {
		if o.iommu != nil && *o.iommu == *d.iommu {
			out = append(out, o)
		}
	}
	return out
}

// holder is host_device.vm_id: the running VM on h that has d configured, nil when none.
func (h *host) holder(d *hostDevice, now time.Time) *vm {
	for _, v := range h.runningVMs(now) {
		if v.hostDev(h, d) != nil {
			return v
		}
	}
	return nil
}

func (v *vm) hostDev(h *host, d *hostDevice) *vmHostDev {
	for _, hd := range v.hostDevs {
		if hd.host == h && hd.dev == d {
			return hd
		}
	}
	return nil
}

// mdevTypes are the vGPU types a VM asks for, one per instance: on 4.4 the items of its
// mdev_type custom property (MDevTypesUtils honours nodisplay only as the first item), from 4.5
// its MDEV devices.
func (inv *inventory) mdevTypes(v *vm) []string {
	if inv.version.minor > 4 {
		out := make([]string, 0, len(v.mdevs))
		for _, m := range v.mdevs {
			out = append(out, m.mdevType)
		}
		return out
	}
	val, ok := propValue(v.perf.props, mdevTypeProperty)
	if !ok || val == "" {
		return nil
	}
	items := strings.Split(val, ",")
	if items[0] == "nodisplay" {
		items = items[1:]
	}
	return items
}

// convertMdevs is MDevTypesUtils.convertDeprecatedCustomPropertyToVmDevices: one MDEV device per
// item, nodisplay for the items after a "nodisplay" item.
func (inv *inventory) convertMdevs(value string) []vmMdev {
	var out []vmMdev
	nodisplay := false
	for _, t := range javaSplit(value, ",") {
		if t == "nodisplay" {
			nodisplay = true
			continue
		}
		out = append(out, vmMdev{id: inv.newID(), mdevType: t, nodisplay: nodisplay})
	}
	return out
}

// mdevUsed is how many instances of type t the VMs running on h use now (VDSM's view).
func (inv *inventory) mdevUsed(h *host, t string, now time.Time) int {
	n := 0
	for _, v := range h.runningVMs(now) {
		for _, m := range inv.mdevTypes(v) {
			if m == t {
				n++
			}
		}
	}
	return n
}

// realAvailable is VDSM's available_instances of each device type of h: the instances in use
// are taken from the devices in their order.
func (inv *inventory) realAvailable(h *host, now time.Time) map[*mdevType]int {
	out := map[*mdevType]int{}
	used := map[string]int{}
	for _, d := range h.devices {
		for _, mt := range d.mdevTypes {
			if _, seen := used[mt.name]; !seen {
				used[mt.name] = inv.mdevUsed(h, mt.name, now)
			}
			take := min(used[mt.name], mt.capacity)
			used[mt.name] -= take
			out[mt] = mt.capacity - take
		}
	}
	return out
}

// mdevsFit reports whether the vGPUs of the VMs running on h fit the host's real capacity.
func (inv *inventory) mdevsFit(h *host, now time.Time) bool {
	total := map[string]int{}
	for _, d := range h.devices {
		for _, mt := range d.mdevTypes {
			total[mt.name] += mt.capacity
		}
	}
	for _, v := range h.runningVMs(now) {
		for _, t := range inv.mdevTypes(v) {
			total[t]--
			if total[t] < 0 {
				return false
			}
		}
	}
	return true
}

// refreshHostDevices is RefreshHostDevices: the Engine stores what VDSM reports now.
func (inv *inventory) refreshHostDevices(h *host, now time.Time) {
	for mt, n := range inv.realAvailable(h, now) {
		mt.reported = n
	}
	h.refreshAt = nil
}

// settleHost applies the refreshes due by now (a VM with host devices that went down at the end
// of a graceful shutdown). Call with the write lock.
func (inv *inventory) settleHost(h *host, now time.Time) {
	for _, t := range h.refreshAt {
		if !now.Before(t) {
			inv.refreshHostDevices(h, now)
			return
		}
	}
}

// afterLaunch is what follows the placement of v on h for a run: the Engine refreshes the host's
// devices when v has host devices (refreshHostIfAnyVmHasHostDevices), and VDSM fails to create a
// VM whose vGPUs exceed the free instances: the VM goes down (ExitStatus.Error). Call with the
// write lock.
func (s *Simulator) afterLaunch(v *vm, h *host, now time.Time) {
	if !s.inv.mdevsFit(h, now) {
		v.power, v.phaseAt, v.stopTime = phaseDown, now, now
		v.leaveHost()
		v.recordExit(exitError, exitLostQEMU)
		s.inv.guestOp(v, guestPowerOff)
	}
	if len(v.hostDevs) > 0 {
		s.inv.refreshHostDevices(h, now)
	}
}

// vmWentDown notes that v, which ran on h, is down or will be at t: a VM with host devices makes
// the Engine refresh the host's devices then.
func (inv *inventory) vmWentDown(v *vm, h *host, t, now time.Time) {
	if h == nil || len(v.hostDevs) == 0 {
		return
	}
	if !now.Before(t) {
		inv.refreshHostDevices(h, now)
		return
	}
	h.refreshAt = append(h.refreshAt, t)
}

// ---- scheduling

// hostDeviceFilter is HostDeviceFilterPolicyUnit (mandatory): a VM with host devices runs only
// on its one dedicated host, which must support passthrough when a device is PCI, and whose
// devices no other running VM holds (CheckVmHostDeviceAvailability).
func hostDeviceFilter(v *vm, hosts []*host, run *schedRun, now time.Time) []*host {
	if len(v.hostDevs) == 0 {
		return hosts
	}
	pci := false
	for _, hd := range v.hostDevs {
		pci = pci || hd.dev.capability == "pci"
	}
	var kept []*host
	for _, h := range hosts {
		switch {
		case pci && !h.passthrough:
			run.addDetail(h, "VAR__DETAIL__HOSTDEV_DISABLED")
		case len(v.perf.pinnedHosts) == 0 || v.perf.pinnedHosts[0] != h:
			run.addDetail(h, "VAR__DETAIL__WRONG_HOST_FOR_REQUESTED_HOST_DEVICES")
		case !hostDevicesFree(v, h, now):
			run.addDetail(h, "VAR__DETAIL__HOST_DEVICE_UNAVAILABLE")
		default:
			kept = append(kept, h)
		}
	}
	return kept
}

// hostDevicesFree is CheckVmHostDeviceAvailability: none of v's devices on h is held by another
// VM that runs.
func hostDevicesFree(v *vm, h *host, now time.Time) bool {
	for _, hd := range v.hostDevs {
		if hd.host != h {
			continue
		}
		if o := h.holder(hd.dev, now); o != nil && o != v {
			return false
		}
	}
	return true
}

// mdevFilter is MDevicePolicyUnit (mandatory): per vGPU type the VM asks for (repeated as often
// as asked), a host must have a device offering it ("missing") with available_instances above 0
// as the Engine last stored them ("unavailable"); the number asked is not counted.
func (inv *inventory) mdevFilter(v *vm, hosts []*host, run *schedRun) []*host {
	want := inv.mdevTypes(v)
	if len(want) == 0 {
		return hosts
	}
	var kept []*host
	for _, h := range hosts {
		offered := map[string]bool{}
		available := map[string]bool{}
		for _, d := range h.devices {
			for _, mt := range d.mdevTypes {
				offered[mt.name] = true
				available[mt.name] = available[mt.name] || mt.reported > 0
			}
		}
		var missing, unavailable []string
		for _, t := range want {
			switch {
			case !offered[t]:
				missing = append(missing, t)
			case !available[t]:
				unavailable = append(unavailable, t)
			}
		}
		switch {
		case len(missing) > 0:
			run.addDetail(h, "$missingMDevs "+strings.Join(missing, ","), "VAR__DETAIL__HOST_MDEV_DEVICE_MISSING")
		case len(unavailable) > 0:
			run.addDetail(h, "$unavailableMDevs "+strings.Join(unavailable, ","), "VAR__DETAIL__HOST_MDEV_DEVICE_UNAVAILABLE")
		default:
			kept = append(kept, h)
		}
	}
	return kept
}

// ---- attaching and detaching (AddVmHostDevicesCommand, RemoveVmHostDevicesCommand)

const (
	actionAddHostDevices    = "VAR__ACTION__ADD"
	actionRemoveHostDevices = "VAR__ACTION__REMOVE"
)

// hostDevicesValidate is AbstractVmHostDevicesCommand.validate: it returns the dedicated host
// and the named device.
func (inv *inventory) hostDevicesValidate(v *vm, name string, now time.Time, action string) (*host, *hostDevice, *apiError) {
	fail := func(msgs ...string) *apiError {
		return engineFault(append([]string{action, "VAR__TYPE__HOST_DEVICES"}, msgs...)...)
	}
	if st := v.status(now); st != "down" {
		return nil, nil, fail("ACTION_TYPE_FAILED_VM_STATUS_ILLEGAL", "$vmStatus "+localizedVMStatus(st))
	}
	switch len(v.perf.pinnedHosts) {
	case 0:
		return nil, nil, fail("ACTION_TYPE_FAILED_VM_NOT_PINNED_TO_HOST")
	case 1:
	default:
		return nil, nil, fail("ACTION_TYPE_FAILED_VM_PINNED_TO_MULTIPLE_HOSTS")
	}
	h := v.perf.pinnedHosts[0]
	d := h.device(name)
	if d == nil {
		return nil, nil, fail("ACTION_TYPE_FAILED_HOST_DEVICE_NOT_FOUND")
	}
	return h, d, nil
}

// localizedVMStatus is LocalizedVmStatus: the status as AppErrors words it.
func localizedVMStatus(st string) string {
	switch st {
	case "image_locked":
		return "Image Locked"
	case "wait_for_launch":
		return "Wait for Launch"
	case "reboot_in_progress":
		return "Reboot in Progress"
	}
	words := strings.Split(st, "_")
	for i, w := range words {
		words[i] = capitalise(w)
	}
	return strings.Join(words, " ")
}

// addHostDevice is AddVmHostDevicesCommand: the device's whole group, the others as
// placeholders; a device already configured as a placeholder becomes a real one.
func (inv *inventory) addHostDevice(v *vm, name string, now time.Time) *apiError {
	h, d, aerr := inv.hostDevicesValidate(v, name, now, actionAddHostDevices)
	if aerr != nil {
		return aerr
	}
	for _, o := range h.group(d) {
		if hd := v.hostDev(h, o); hd != nil {
			if o == d {
				hd.placeholder = false
			}
			continue
		}
		v.hostDevs = append(v.hostDevs, &vmHostDev{host: h, dev: o, placeholder: o != d})
	}
	return nil
}

// removeHostDevice is RemoveVmHostDevicesCommand: the device becomes a placeholder, and a group
// left with placeholders only (or a device without a group) is removed.
func (inv *inventory) removeHostDevice(v *vm, name string, now time.Time) *apiError {
	h, d, aerr := inv.hostDevicesValidate(v, name, now, actionRemoveHostDevices)
	if aerr != nil {
		return aerr
	}
	group := h.group(d)
	var configured []*vmHostDev
	for _, o := range group {
		if hd := v.hostDev(h, o); hd != nil {
			if o == d {
				hd.placeholder = true
			}
			configured = append(configured, hd)
		}
	}
	drop := d.iommu == nil || d.capability != "pci"
	if !drop {
		drop = true
		for _, hd := range configured {
			drop = drop && hd.placeholder
		}
	}
	if drop {
		v.hostDevs = slices.DeleteFunc(v.hostDevs, func(hd *vmHostDev) bool { return slices.Contains(configured, hd) })
	}
	return nil
}

// pinnedHostsChanged is UpdateVmCommand.isDedicatedVmForVdsChanged.
func pinnedHostsChanged(a, b []*host) bool {
	if len(a) != len(b) {
		return true
	}
	for _, h := range a {
		if !slices.Contains(b, h) {
			return true
		}
	}
	return false
}

// ---- REST

// renderHostDevice is HostDeviceMapper.map; vmID is the VM of a VM's listing (its addParents),
// "" for a host's listing, where <vm> is the VM holding the device now.
func renderHostDevice(h *host, d *hostDevice, now time.Time, vmID string, placeholder bool) *ovirtsdk.HostDevice {
	o := &ovirtsdk.HostDevice{}
	o.SetId(hexID(d.name))
	o.SetName(esc(d.name))
	o.SetHost(hostRef(h.id))
	o.SetCapability(d.capability)
	parent := &ovirtsdk.HostDevice{}
	parent.SetId(hexID(d.parent))
	parent.SetName(esc(d.parent))
	parent.SetHost(hostRef(h.id))
	o.SetParentDevice(parent)
	if d.driver != "" {
		o.SetDriver(esc(d.driver))
	}
	if len(d.mdevTypes) > 0 {
		ts := make([]*ovirtsdk.MDevType, 0, len(d.mdevTypes))
		for _, mt := range d.mdevTypes {
			t := &ovirtsdk.MDevType{}
			t.SetName(esc(mt.name))
			if mt.human != "" {
				t.SetHumanReadableName(esc(mt.human))
			}
			t.SetAvailableInstances(int64(mt.reported))
			if mt.desc != "" {
				t.SetDescription(esc(mt.desc))
			}
			ts = append(ts, t)
		}
		sl := &ovirtsdk.MDevTypeSlice{}
		sl.SetSlice(ts)
		o.SetMDevTypes(sl)
	}
	if d.productID != "" || d.productName != "" {
		p := &ovirtsdk.Product{}
		if d.productID != "" {
			p.SetId("0x" + d.productID)
		}
		if d.productName != "" {
			p.SetName(esc(d.productName))
		}
		o.SetProduct(p)
	}
	if d.vendorID != "" || d.vendorName != "" {
		vd := &ovirtsdk.Vendor{}
		if d.vendorID != "" {
			vd.SetId("0x" + d.vendorID)
		}
		if d.vendorName != "" {
			vd.SetName(esc(d.vendorName))
		}
		o.SetVendor(vd)
	}
	if d.iommu != nil {
		o.SetIommuGroup(int64(*d.iommu))
	}
	switch {
	case vmID != "":
		o.SetVm(vmRef(vmID))
	default:
		if v := h.holder(d, now); v != nil {
			o.SetVm(vmRef(v.id))
		}
	}
	if placeholder {
		o.SetPlaceholder(true)
	}
	return o
}

// adminQuery is QueriesCommandBase.validatePermissions for a query of QueryAuthType.Admin
// (GetHostDevicesByHostId, GetExtendedVmHostDevicesByVmId): never with "Filter: true", and
// without it only for a user with an administrator role somewhere.
func (s *Simulator) adminQuery(rq *apiReq) *apiError {
	filtered := strings.EqualFold(rq.r.Header.Get("Filter"), "true")
	if !filtered && rq.user == "" {
		return nil
	}
	if !filtered {
		s.authMu.RLock()
		u := s.users[rq.user]
		admin := u != nil && u.admin
		s.authMu.RUnlock()
		if admin {
			return nil
		}
	}
	return &apiError{400, reasonFailed, "Query execution failed due to insufficient permissions."}
}

// hHostDevices is GET /hosts/{id}/devices (BackendHostDevicesResource.list): an unknown host
// has no devices.
func hHostDevices(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/hosts/" + rq.ids[0], "host"}
	s.mu.Lock()
	aerr := s.adminQuery(rq)
	out := []*ovirtsdk.HostDevice{}
	if h := s.inv.hostByID(rq.ids[0]); h != nil && aerr == nil {
		now := time.Now()
		s.inv.settleHost(h, now)
		for _, d := range h.devices {
			out = append(out, renderHostDevice(h, d, now, "", false))
		}
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	sl := &ovirtsdk.HostDeviceSlice{}
	sl.SetSlice(out)
	rq.writeXML(http.StatusOK, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLHostDeviceWriteMany(w, sl, "", "") })
}

// hHostDevice is GET /hosts/{id}/devices/{id} (BackendHostDeviceResource.get).
func hHostDevice(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/hosts/" + rq.ids[0], "host"}
	s.mu.Lock()
	aerr := s.adminQuery(rq)
	var o *ovirtsdk.HostDevice
	if aerr == nil {
		h := s.inv.hostByID(rq.ids[0])
		name, ok := deviceNameOf(rq.ids[1])
		if h != nil && ok {
			if d := h.device(name); d != nil {
				now := time.Now()
				s.inv.settleHost(h, now)
				o = renderHostDevice(h, d, now, "", false)
			}
		}
		if o == nil {
			aerr = &apiError{404, "", ""}
		}
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	writeOne(rq, http.StatusOK, o, ovirtsdk.XMLHostDeviceWriteOne)
}

// vmHostDevices renders a VM's host devices (GetExtendedVmHostDevicesByVmId, mapped with the
// VM as parent).
func vmHostDevices(v *vm, now time.Time) []*ovirtsdk.HostDevice {
	out := []*ovirtsdk.HostDevice{}
	for _, hd := range v.hostDevs {
		out = append(out, renderHostDevice(hd.host, hd.dev, now, v.id, hd.placeholder))
	}
	return out
}

func hVMHostDevices(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	s.mu.RLock()
	aerr := s.adminQuery(rq)
	out := []*ovirtsdk.HostDevice{}
	if v := s.inv.vms[rq.ids[0]]; v != nil && aerr == nil {
		out = vmHostDevices(v, time.Now())
	}
	s.mu.RUnlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	sl := &ovirtsdk.HostDeviceSlice{}
	sl.SetSlice(out)
	rq.writeXML(http.StatusOK, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLHostDeviceWriteMany(w, sl, "", "") })
}

// vmHostDeviceOf is BackendVmHostDeviceResource.get: the device of the VM's listing with the
// path's id, a bare 404 without one.
func vmHostDeviceOf(v *vm, id string, now time.Time) (*ovirtsdk.HostDevice, *apiError) {
	if v != nil {
		for _, o := range vmHostDevices(v, now) {
			if o.MustId() == id {
				return o, nil
			}
		}
	}
	return nil, &apiError{404, "", ""}
}

func hVMHostDevice(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	s.mu.RLock()
	aerr := s.adminQuery(rq)
	var o *ovirtsdk.HostDevice
	if aerr == nil {
		o, aerr = vmHostDeviceOf(s.inv.vms[rq.ids[0]], rq.ids[1], time.Now())
	}
	s.mu.RUnlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	writeOne(rq, http.StatusOK, o, ovirtsdk.XMLHostDeviceWriteOne)
}

// hAddVMHostDevice is POST /vms/{id}/hostdevices (BackendVmHostDevicesResource.add): by id (the
// hex of the name; it wins over a name) or by name; the answer is the device as the VM lists it.
func hAddVMHostDevice(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	body, aerr := parseBody(rq, "host_device", ovirtsdk.XMLHostDeviceReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	name, hasName := body.Name()
	if id, ok := body.Id(); ok {
		if name, ok = deviceNameOf(id); !ok {
			rq.fault(&apiError{400, reasonFailed, fmt.Sprintf("The string \"%s\" isn't a valid hexadecimal value", id)})
			return
		}
		hasName = true
	}
	if !hasName {
		rq.fault(incomplete("HostDevice", []string{"id|name"}, "add"))
		return
	}
	s.mu.Lock()
	now := time.Now()
	v := s.inv.vms[rq.ids[0]]
	var o *ovirtsdk.HostDevice
	if v == nil {
		aerr = notFound(rq.ids[0])
	} else if aerr = s.authorize(rq, need{group: ActionEditAdminVMProperties, object: s.inv.vmObject(v)}); aerr == nil {
		if aerr = s.inv.addHostDevice(v, name, now); aerr == nil {
			o, aerr = vmHostDeviceOf(v, hexID(name), now)
		}
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.w.Header().Set("Location", apiPrefix+"/vms/"+rq.ids[0]+"/hostdevices/"+hexID(name))
	writeOne(rq, http.StatusCreated, o, ovirtsdk.XMLHostDeviceWriteOne)
}

// hRemoveVMHostDevice is DELETE /vms/{id}/hostdevices/{id} (BackendVmHostDeviceResource.remove):
// the device must be in the VM's listing, then RemoveVmHostDevices runs.
func hRemoveVMHostDevice(s *Simulator, rq *apiReq) {
	s.mu.Lock()
	now := time.Now()
	v := s.inv.vms[rq.ids[0]]
	_, aerr := vmHostDeviceOf(v, rq.ids[1], now)
	if aerr == nil {
		aerr = s.authorize(rq, need{group: ActionEditAdminVMProperties, object: s.inv.vmObject(v)})
	}
	if aerr == nil {
		name, _ := deviceNameOf(rq.ids[1])
		aerr = s.inv.removeHostDevice(v, name, now)
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.removed()
}

// hVMMediatedDevices is GET /vms/{id}/mediateddevices (BackendVmMediatedDevicesResource.list,
// VmMapper.map(VmMdevType)): the VM's MDEV devices with their spec params (a HashMap: mdevType,
// then nodisplay). go-ovirt has no vm_mediated_device, so the XML is written here.
func hVMMediatedDevices(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	s.mu.RLock()
	v := s.inv.vms[rq.ids[0]]
	var mdevs []vmMdev
	if v != nil {
		mdevs = slices.Clone(v.mdevs)
	}
	s.mu.RUnlock()
	vmID := rq.ids[0]
	rq.writeXML(http.StatusOK, func(w *ovirtsdk.XMLWriter) error { return writeMdevs(w, vmID, mdevs) })
}

// writeMdevs writes <vm_mediated_devices> as the Engine's JAXB model does.
func writeMdevs(w *ovirtsdk.XMLWriter, vmID string, mdevs []vmMdev) error {
	var err error
	check := func(e error) {
		if err == nil && e != nil {
			err = fmt.Errorf("writing mediated devices: %w", e)
		}
	}
	check(w.WriteStart("", "vm_mediated_devices", nil))
	for _, m := range mdevs {
		check(w.WriteStart("", "vm_mediated_device", map[string]string{"id": m.id}))
		check(w.WriteStart("", "spec_params", nil))
		props := []customProp{{MDevSpecType, m.mdevType}, {MDevSpecNodisplay, fmt.Sprint(m.nodisplay)}}
		for _, p := range javaHashMapPropOrder(props) {
			check(w.WriteStart("", "property", nil))
			check(w.WriteCharacter("name", esc(p.name)))
			check(w.WriteCharacter("value", esc(p.value)))
			check(w.WriteEnd("property"))
		}
		check(w.WriteEnd("spec_params"))
		check(w.WriteStart("", "vm", map[string]string{"id": vmID}))
		check(w.WriteEnd("vm"))
		check(w.WriteEnd("vm_mediated_device"))
	}
	check(w.WriteEnd("vm_mediated_devices"))
	return err
}

// The spec params of an MDEV device (MDevTypesUtils.MDEV_TYPE and NODISPLAY).
const (
	MDevSpecType      = "mdevType"
	MDevSpecNodisplay = "nodisplay"
)

func init() {
	for k, t := range map[string]struct {
		text   string
		status int
	}{
		"VAR__TYPE__HOST_DEVICES":                            {"$type Host devices", 0},
		"ACTION_TYPE_FAILED_VM_STATUS_ILLEGAL":               {"Cannot ${action} ${type} because the VM is in ${vmStatus} status.", 409},
		"ACTION_TYPE_FAILED_VM_NOT_PINNED_TO_HOST":           {"Cannot ${action} ${type}. VM must be pinned to a host.", 409},
		"ACTION_TYPE_FAILED_VM_PINNED_TO_MULTIPLE_HOSTS":     {"Cannot ${action} ${type}. VM must be pinned to a single host.", 409},
		"ACTION_TYPE_FAILED_HOST_DEVICE_NOT_FOUND":           {"Cannot ${action} ${type}. One or more of specified host devices not found.", 400},
		"VAR__DETAIL__HOSTDEV_DISABLED":                      {"$detailMessage it does not support host device passthrough", 0},
		"VAR__DETAIL__WRONG_HOST_FOR_REQUESTED_HOST_DEVICES": {"$detailMessage the host does not provide requested host devices", 0},
		"VAR__DETAIL__HOST_DEVICE_UNAVAILABLE":               {"$detailMessage some of the required host devices are unavailable", 0},
		"VAR__DETAIL__HOST_MDEV_DEVICE_MISSING":              {"$detailMessage some of the required mDev devices are missing (${missingMDevs})", 0},
		"VAR__DETAIL__HOST_MDEV_DEVICE_UNAVAILABLE":          {"$detailMessage some of the required mDev devices are unavailable (${unavailableMDevs})", 0},
	} {
		engineTexts[k] = t.text
		if t.status != 0 {
			engineErrorTypes[k] = t.status
		}
	}
}
