package fake

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/capov/capov/pkg/ovirt"
)

// Hosts, host devices, pinning, reboot and reset of the fake Client. Errors carry the status,
// sentinels and Engine texts the SDK client reports for the same refusal (see
// pkg/ovirt/sdk/hostdevices.go; the texts are ovirt-engine's AppErrors.properties).
//
// Seeded hosts (AddHost) replace a cluster's implicit hosts (SetHostCount): once a cluster has
// one, VMs start only on its hosts that are up (none up: the Engine's 400 "There are no hosts to
// use"). A VM pinned with affinity "pinned" (PinVM, VMSpec.PinnedHostID, or PutVM with
// PinnedHostIDs and PlacementAffinity) starts only on its pinned host (the PinToHost filter). A VM
// with host devices starts only on their host, with passthrough enabled, while no other running
// VM holds one of them (the HostDevice filter); it then holds them (their VMID) until it stops.
// The refusals are the Engine's 409 with one line per host up, in seeding order, every line
// repeating the first host's, as the Engine's translator does.

// Affinities of a VM's placement policy (placement_policy.affinity).
const (
	AffinityPinned         = "pinned"
	AffinityMigratable     = "migratable"
	AffinityUserMigratable = "user_migratable"
)

// vmHostDevice is a host device configured on a VM: its name on the VM's pinned host, and
// whether the Engine added it only for its IOMMU group.
type vmHostDevice struct {
	hostID, name string
	placeholder  bool
}

// DeviceID is the Engine's id of a host device: the hex of its name's bytes (HexUtils.string2hex).
func DeviceID(name string) string {
	return hex.EncodeToString([]byte(name))
}

// PCIDevice is a PCI host device of IOMMU group iommuGroup (-1 for none) with these vendor and
// product ids, for AddHost and AddHostDevices.
func PCIDevice(name string, iommuGroup int, vendorID, productID string) ovirt.HostDevice {
	return ovirt.HostDevice{Name: name, Capability: "pci", IOMMUGroup: iommuGroup, VendorID: vendorID, ProductID: productID,
		Driver: "vfio-pci"}
}

// AddHost seeds a host of the cluster whose id is h.ClusterID (seeded with AddCluster) with its
// devices, and returns it. An empty ID is generated, an empty Status is "up". Devices get the
// host's id, the Engine's id (DeviceID) when theirs is empty, and vendor and product ids in lower
// case without 0x; their IOMMUGroup is taken as given (-1 for none: 0 is a group) and their VMID
// is dropped (a running VM takes its devices when it starts).
func (c *Client) AddHost(h ovirt.Host, devices ...ovirt.HostDevice) ovirt.Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.ID == "" {
		h.ID = c.newID("host")
	}
	if h.Status == "" {
		h.Status = "up"
	}
	c.hosts = append(c.hosts, &h)
	c.addHostDevices(h.ID, devices)
	return h
}

// AddHostDevices adds devices to a seeded host, as AddHost does. It returns false when there is no
// host with this id.
func (c *Client) AddHostDevices(hostID string, devices ...ovirt.HostDevice) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hostByID(hostID) == nil {
		return false
	}
	c.addHostDevices(hostID, devices)
	return true
}

// addHostDevices stores devices of a host. Called with c.mu held.
func (c *Client) addHostDevices(hostID string, devices []ovirt.HostDevice) {
	if c.hostDevices == nil {
		c.hostDevices = map[string][]*ovirt.HostDevice{}
	}
	for _, d := range devices {
		d.HostID = hostID
		if d.ID == "" {
			d.ID = DeviceID(d.Name)
		}
		d.VendorID, d.ProductID = normalizeID(d.VendorID), normalizeID(d.ProductID)
		d.VMID, d.Placeholder = "", false
		d.MDevTypes = slices.Clone(d.MDevTypes)
		c.hostDevices[hostID] = append(c.hostDevices[hostID], &d)
	}
}

// normalizeID is how the SDK client reports a vendor or product id: lower case, without 0x.
func normalizeID(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	return strings.TrimPrefix(id, "0x")
}

// RemoveHostDevice removes a device from its host out of band (a card taken out, a host
// reinstalled); VMs that have it configured keep it, as in the Engine's database. False when the
// host has no device of that name.
func (c *Client) RemoveHostDevice(hostID, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.hostDevices[hostID])
	c.hostDevices[hostID] = slices.DeleteFunc(c.hostDevices[hostID], func(d *ovirt.HostDevice) bool { return d.Name == name })
	return len(c.hostDevices[hostID]) < n
}

// SetHostStatus changes a seeded host's status ("up", "maintenance", "non_responsive", ...): only
// hosts that are up run VMs started from now on. False when there is no host with this id.
func (c *Client) SetHostStatus(hostID, status string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hostByID(hostID)
	if h == nil {
		return false
	}
	h.Status = status
	return true
}

// Hosts returns copies of the hosts seeded in the cluster with this id, in seeding order.
func (c *Client) Hosts(clusterID string) []ovirt.Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ovirt.Host
	for _, h := range c.hosts {
		if h.ClusterID == clusterID {
			out = append(out, *h)
		}
	}
	return out
}

// HostDevices returns copies of the host's devices, as ListHostDevices does (unrecorded).
func (c *Client) HostDevices(hostID string) []ovirt.HostDevice {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.devicesOfHost(hostID)
}

// VMHostDevices returns the host devices configured on the VM, as ListVMHostDevices does
// (unrecorded): nil for none or no such VM.
func (c *Client) VMHostDevices(vmID string) []ovirt.HostDevice {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.devicesOfVM(vmID)
}

// SetClusterLevel sets the compatibility version of the cluster with this id (default 4.7): below
// 4.6 the Engine refuses a reset.
func (c *Client) SetClusterLevel(clusterID string, major, minor int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clusterLevels == nil {
		c.clusterLevels = map[string][2]int{}
	}
	c.clusterLevels[clusterID] = [2]int{major, minor}
}

// PowerActions returns the power actions the fake accepted for the VM, in order (Power and
// RunOnce; a refused one is not there).
func (c *Client) PowerActions(vmID string) []ovirt.PowerAction {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.powerActions[vmID])
}

// hostByID returns the seeded host with this id. Called with c.mu held.
func (c *Client) hostByID(id string) *ovirt.Host {
	for _, h := range c.hosts {
		if h.ID == id {
			return h
		}
	}
	return nil
}

// hostDevice returns the device of the host with this name. Called with c.mu held.
func (c *Client) hostDevice(hostID, name string) *ovirt.HostDevice {
	for _, d := range c.hostDevices[hostID] {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// devicesOfHost copies a host's devices. Called with c.mu held.
func (c *Client) devicesOfHost(hostID string) []ovirt.HostDevice {
	out := make([]ovirt.HostDevice, 0, len(c.hostDevices[hostID]))
	for _, d := range c.hostDevices[hostID] {
		out = append(out, cloneHostDevice(d))
	}
	return out
}

// devicesOfVM lists a VM's configured host devices as GET /vms/{id}/hostdevices does: the host
// device's data, the VM as its vm, the placeholder flag. Called with c.mu held.
func (c *Client) devicesOfVM(vmID string) []ovirt.HostDevice {
	var out []ovirt.HostDevice
	for _, vd := range c.vmHostDevices[vmID] {
		d := ovirt.HostDevice{ID: DeviceID(vd.name), Name: vd.name, HostID: vd.hostID, IOMMUGroup: -1}
		if hd := c.hostDevice(vd.hostID, vd.name); hd != nil {
			d = cloneHostDevice(hd)
		}
		d.VMID, d.Placeholder = vmID, vd.placeholder
		out = append(out, d)
	}
	return out
}

func cloneHostDevice(d *ovirt.HostDevice) ovirt.HostDevice {
	out := *d
	out.MDevTypes = slices.Clone(d.MDevTypes)
	return out
}

// iommuUnit is the devices the Engine attaches for one requested device: its whole IOMMU group
// for a PCI device that has one, else the device alone (AbstractVmHostDevicesCommand
// getDeviceAtomicGroup). Called with c.mu held.
func (c *Client) iommuUnit(d *ovirt.HostDevice) []*ovirt.HostDevice {
	if d.Capability != "pci" || d.IOMMUGroup < 0 {
		return []*ovirt.HostDevice{d}
	}
	var out []*ovirt.HostDevice
	for _, o := range c.hostDevices[d.HostID] {
		if o.Capability == "pci" && o.IOMMUGroup == d.IOMMUGroup {
			out = append(out, o)
		}
	}
	return out
}

// localizedStatus is how the Engine names a VM status in its messages (LocalizedVmStatus).
func localizedStatus(s ovirt.VMStatus) string {
	words := strings.Split(string(s), "_")
	for i, w := range words {
		if w != "" {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, " ")
}

// statusIllegal is ACTION_TYPE_FAILED_VM_STATUS_ILLEGAL (409) as the SDK client reports it for
// op: ErrLocked (and ErrConflict) for a VM being created, else kinds.
func statusIllegal(op, action, what string, status ovirt.VMStatus, kinds ...error) error {
	if status == ovirt.VMStatusImageLocked {
		kinds = []error{ovirt.ErrConflict, ovirt.ErrLocked}
	}
	return &ovirt.Error{Op: op, Status: 409, Kinds: kinds,
		Detail: fmt.Sprintf("Operation Failed: [Cannot %s %s because the VM is in %s status.]", action, what, localizedStatus(status))}
}

// pinError is the Engine's refusal of a dedicated host (VmHandler
// validateDedicatedVdsExistOnSameCluster, 409), as the SDK client reports it: ErrInvalid.
// action is "add" or "edit". Called with c.mu held.
func (c *Client) pinError(op, action, clusterID, hostID string) error {
	h := c.hostByID(hostID)
	switch {
	case h == nil:
		return &ovirt.Error{Op: op, Status: 409, Kinds: []error{ovirt.ErrInvalid},
			Detail: fmt.Sprintf("Operation Failed: [Cannot %s VM. VM is pinned to a specific host. The required host doesn't exist.]", action)}
	case h.ClusterID != clusterID:
		return &ovirt.Error{Op: op, Status: 409, Kinds: []error{ovirt.ErrInvalid},
			Detail: fmt.Sprintf("Operation Failed: [Cannot %s VM. VM is pinned to a specific host. The host's cluster must be the same as the selected VM cluster.]", action)}
	}
	return nil
}

// ListHosts implements ovirt.Client: the hosts seeded in the cluster with this name, in seeding
// order, whatever their status (none when the cluster runs on implicit hosts).
func (c *Client) ListHosts(ctx context.Context, clusterName string) ([]ovirt.Host, error) {
	c.mu.Lock()
	c.record("ListHosts")
	c.mu.Unlock()
	if c.ListHostsFunc != nil {
		return c.ListHostsFunc(ctx, clusterName)
	}
	const op = "ListHosts"
	if err := ovirt.RequireArgs(op, "cluster name", clusterName); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	clusterID := ""
	for _, cl := range c.clusters {
		if cl.Name == clusterName {
			clusterID = cl.ID
		}
	}
	if clusterID == "" {
		return nil, notFound(op, "no cluster named %q", clusterName)
	}
	var out []ovirt.Host
	for _, h := range c.hosts {
		if h.ClusterID == clusterID {
			out = append(out, *h)
		}
	}
	return out, nil
}

// ListHostDevices implements ovirt.Client. A device's VMID is the running VM that holds it.
func (c *Client) ListHostDevices(ctx context.Context, hostID string) ([]ovirt.HostDevice, error) {
	c.mu.Lock()
	c.record("ListHostDevices")
	c.mu.Unlock()
	if c.ListHostDevicesFunc != nil {
		return c.ListHostDevicesFunc(ctx, hostID)
	}
	const op = "ListHostDevices"
	if err := ovirt.RequireArgs(op, "host id", hostID); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hostByID(hostID) == nil {
		return nil, notFound(op, "no host with id %q", hostID)
	}
	return c.devicesOfHost(hostID), nil
}

// ListVMHostDevices implements ovirt.Client: the VM's host devices, placeholders included, each
// with the VM as its VMID.
func (c *Client) ListVMHostDevices(ctx context.Context, vmID string) ([]ovirt.HostDevice, error) {
	c.mu.Lock()
	c.record("ListVMHostDevices")
	c.mu.Unlock()
	if c.ListVMHostDevicesFunc != nil {
		return c.ListVMHostDevicesFunc(ctx, vmID)
	}
	const op = "ListVMHostDevices"
	if err := ovirt.RequireArgs(op, "VM id", vmID); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.vms[vmID]; !ok {
		return nil, notFound(op, "no VM with id %q", vmID)
	}
	return c.devicesOfVM(vmID), nil
}

// AttachHostDevice implements ovirt.Client as the Engine's AddVmHostDevicesCommand does: the VM
// down and pinned to exactly one host that has the device, then the device's whole IOMMU group
// configured (the others as placeholders; a placeholder asked for becomes a device of its own). A
// device configured on another VM, or held by a running one, is accepted.
func (c *Client) AttachHostDevice(ctx context.Context, vmID, deviceName string) error {
	c.mu.Lock()
	c.record("AttachHostDevice")
	c.mu.Unlock()
	if c.AttachHostDeviceFunc != nil {
		return c.AttachHostDeviceFunc(ctx, vmID, deviceName)
	}
	const op = "AttachHostDevice"
	if err := ovirt.RequireArgs(op, "VM id", vmID, "device name", deviceName); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[vmID]
	switch {
	case !ok:
		return &ovirt.Error{Op: op, Status: 400, Kinds: []error{ovirt.ErrNotFound},
			Detail: "Operation Failed: [Cannot add Host devices. VM is not found.]"}
	case vm.Status != ovirt.VMStatusDown:
		return statusIllegal(op, "add", "Host devices", vm.Status, ovirt.ErrInvalid)
	case len(vm.PinnedHostIDs) == 0:
		return &ovirt.Error{Op: op, Status: 409, Kinds: []error{ovirt.ErrInvalid},
			Detail: "Operation Failed: [Cannot add Host devices. VM must be pinned to a host.]"}
	case len(vm.PinnedHostIDs) > 1:
		return &ovirt.Error{Op: op, Status: 409, Kinds: []error{ovirt.ErrInvalid},
			Detail: "Operation Failed: [Cannot add Host devices. VM must be pinned to a single host.]"}
	}
	d := c.hostDevice(vm.PinnedHostIDs[0], deviceName)
	if d == nil {
		return invalid(op, "Operation Failed: [Cannot add Host devices. One or more of specified host devices not found.]")
	}
	if c.vmHostDevices == nil {
		c.vmHostDevices = map[string][]vmHostDevice{}
	}
	configured := c.vmHostDevices[vmID]
	for _, member := range c.iommuUnit(d) {
		i := slices.IndexFunc(configured, func(v vmHostDevice) bool { return v.hostID == member.HostID && v.name == member.Name })
		switch {
		case i < 0:
			configured = append(configured, vmHostDevice{hostID: member.HostID, name: member.Name, placeholder: member.Name != deviceName})
		case member.Name == deviceName:
			configured[i].placeholder = false
		}
	}
	c.vmHostDevices[vmID] = configured
	return nil
}

// DetachHostDevice implements ovirt.Client as the Engine's RemoveVmHostDevicesCommand does: the
// device becomes a placeholder, and its IOMMU group goes when only placeholders remain (a device
// without a group goes at once). A device not configured, or a VM that does not exist, is no
// error (the Engine's 404); a VM that is not down is refused (ErrInvalid).
func (c *Client) DetachHostDevice(ctx context.Context, vmID, deviceName string) error {
	c.mu.Lock()
	c.record("DetachHostDevice")
	c.mu.Unlock()
	if c.DetachHostDeviceFunc != nil {
		return c.DetachHostDeviceFunc(ctx, vmID, deviceName)
	}
	const op = "DetachHostDevice"
	if err := ovirt.RequireArgs(op, "VM id", vmID, "device name", deviceName); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	configured := c.vmHostDevices[vmID]
	i := slices.IndexFunc(configured, func(v vmHostDevice) bool { return v.name == deviceName })
	vm, ok := c.vms[vmID]
	if i < 0 || !ok {
		return nil
	}
	if vm.Status != ovirt.VMStatusDown {
		return statusIllegal(op, "remove", "Host devices", vm.Status, ovirt.ErrInvalid)
	}
	configured[i].placeholder = true
	group := -1
	if hd := c.hostDevice(configured[i].hostID, deviceName); hd != nil && hd.Capability == "pci" {
		group = hd.IOMMUGroup
	}
	inGroup := func(v vmHostDevice) bool {
		if group < 0 {
			return v.name == deviceName
		}
		hd := c.hostDevice(v.hostID, v.name)
		return hd != nil && hd.Capability == "pci" && hd.IOMMUGroup == group
	}
	allPlaceholders := true
	for _, v := range configured {
		if inGroup(v) && !v.placeholder {
			allPlaceholders = false
		}
	}
	if allPlaceholders {
		configured = slices.DeleteFunc(configured, inGroup)
	}
	c.vmHostDevices[vmID] = configured
	return nil
}

// PinVM implements ovirt.Client: the VM's placement becomes affinity pinned to the host, which
// must be a seeded host of the VM's cluster (else ErrInvalid, the Engine's 409). A change of the
// pinned host drops the VM's host devices, as the Engine's UpdateVmCommand does.
func (c *Client) PinVM(ctx context.Context, vmID, hostID string) error {
	c.mu.Lock()
	c.record("PinVM")
	c.mu.Unlock()
	if c.PinVMFunc != nil {
		return c.PinVMFunc(ctx, vmID, hostID)
	}
	const op = "PinVM"
	if err := ovirt.RequireArgs(op, "VM id", vmID, "host id", hostID); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[vmID]
	switch {
	case !ok:
		return notFound(op, "no VM with id %q", vmID)
	case vm.Status == ovirt.VMStatusImageLocked:
		return &ovirt.Error{Op: op, Status: 409, Kinds: []error{ovirt.ErrConflict, ovirt.ErrLocked},
			Detail: "Operation Failed: [Cannot edit VM. VM is locked. Please try again in a few minutes.]"}
	}
	if err := c.pinError(op, "edit", vm.ClusterID, hostID); err != nil {
		return err
	}
	if !slices.Equal(vm.PinnedHostIDs, []string{hostID}) {
		delete(c.vmHostDevices, vmID)
	}
	vm.PinnedHostIDs, vm.PlacementAffinity = []string{hostID}, AffinityPinned
	return nil
}

// clusterLevel is the cluster's compatibility version (4.7 unless SetClusterLevel changed it).
// Called with c.mu held.
func (c *Client) clusterLevel(clusterID string) [2]int {
	if l, ok := c.clusterLevels[clusterID]; ok {
		return l
	}
	return [2]int{4, 7}
}

// reboot and reset are Power's reboot and reset, as the Engine's RebootVmCommand and
// ResetVmCommand validate them; the VM stays up on its host (the fake's statuses change at once).
// Called with c.mu held.
func (c *Client) reboot(vm *ovirt.VM) error {
	if vm.Status != ovirt.VMStatusUp && vm.Status != ovirt.VMStatusPoweringUp {
		return statusIllegal("Power", "restart", "VM", vm.Status, ovirt.ErrConflict)
	}
	vm.Status = ovirt.VMStatusUp
	return nil
}

func (c *Client) reset(vm *ovirt.VM) error {
	if l := c.clusterLevel(vm.ClusterID); l[0] < 4 || (l[0] == 4 && l[1] < 6) {
		return invalid("Power", "Operation Failed: [Cannot reset VM. Reset VM requires cluster compatibility version 4.6 or higher.]")
	}
	switch vm.Status {
	case ovirt.VMStatusUp, ovirt.VMStatusPoweringUp, ovirt.VMStatusPoweringDown, ovirt.VMStatusMigrating, ovirt.VMStatusRebootInProgress:
	default:
		return statusIllegal("Power", "reset", "VM", vm.Status, ovirt.ErrConflict)
	}
	vm.Status = ovirt.VMStatusUp
	return nil
}

// holdDevices makes the VM's host devices (placeholders included) held by it, as the Engine's
// RunVmCommand does; releaseDevices frees them, as ProcessDownVmCommand does. Called with c.mu
// held.
func (c *Client) holdDevices(vmID string) {
	for _, vd := range c.vmHostDevices[vmID] {
		if hd := c.hostDevice(vd.hostID, vd.name); hd != nil {
			hd.VMID = vmID
		}
	}
}

func (c *Client) releaseDevices(vmID string) {
	for _, devices := range c.hostDevices {
		for _, hd := range devices {
			if hd.VMID == vmID {
				hd.VMID = ""
			}
		}
	}
}

// hostDeviceFilter is the Engine's HostDevice filter for a VM with host devices on the host:
// "" when the host passes, else the reason (VAR__DETAIL__*). Called with c.mu held.
func (c *Client) hostDeviceFilter(vm *ovirt.VM, hostID string) string {
	configured := c.vmHostDevices[vm.ID]
	if len(configured) == 0 {
		return ""
	}
	h := c.hostByID(hostID)
	if h == nil || !h.PassthroughEnabled {
		return "it does not support host device passthrough"
	}
	for _, vd := range configured {
		if vd.hostID != hostID {
			return "the host does not provide requested host devices"
		}
	}
	for _, vd := range configured {
		hd := c.hostDevice(vd.hostID, vd.name)
		if hd == nil {
			return "the host does not provide requested host devices"
		}
		if hd.VMID != "" && hd.VMID != vm.ID {
			if o, ok := c.vms[hd.VMID]; ok && o.HostID != "" {
				return "some of the required host devices are unavailable"
			}
		}
	}
	return ""
}

// seededCandidates are the hosts a VM of a cluster with seeded hosts may start on: those up, in
// seeding order. ok is false when the cluster has no seeded host (implicit hosts). Called with
// c.mu held.
func (c *Client) seededCandidates(vm *ovirt.VM) (candidates [][2]string, ok bool) {
	for _, h := range c.hosts {
		if h.ClusterID != vm.ClusterID {
			continue
		}
		ok = true
		if h.Status == "up" {
			candidates = append(candidates, [2]string{h.ID, h.Name})
		}
	}
	return candidates, ok
}

// pinFilter is the Engine's PinToHost filter: "" when the VM may run on the host, else the
// refusal's line (a VM pinned with affinity pinned runs on its pinned hosts only). Called with
// c.mu held.
func pinFilter(vm *ovirt.VM, hostID, hostName string) string {
	if vm.PlacementAffinity != AffinityPinned || len(vm.PinnedHostIDs) == 0 || slices.Contains(vm.PinnedHostIDs, hostID) {
		return ""
	}
	// VAR__DETAIL__NOT_PINNED_TO_HOST ends with a period of its own.
	return fmt.Sprintf("The host %s did not satisfy internal filter PinToHost because the host is not present in the pinning list..", hostName)
}
