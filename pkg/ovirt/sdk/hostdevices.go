package sdk

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"

	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// Hosts, host devices (PCI passthrough) and pinning.
//
// What the Engine does (ovirt-engine 4.4 and 4.5: BackendHostDevicesResource,
// BackendVmHostDevicesResource, BackendVmHostDeviceResource, HostDeviceMapper, HexUtils, the
// AddVmHostDevices and RemoveVmHostDevices commands and AbstractVmHostDevicesCommand, VmBaseMapper,
// UpdateVmCommand.updateVmHostDevices, VmHandler.validateDedicatedVdsExistOnSameCluster):
//   - A host device's id is the hex of its name's UTF-8 bytes (pci_0000_3b_00_0 is
//     7063695f303030305f33625f30305f30); vendor and product ids are stored as the host reports
//     them (0x10de); iommu_group is absent for a device without one. Its <vm> is the VM running
//     with it (host_device.vm_id, set at run, cleared at down); in GET /vms/{id}/hostdevices every
//     device's <vm> is that VM, and <placeholder>true</placeholder> marks a device added only for
//     the IOMMU group of a requested one.
//   - GET /hosts/{id}/devices and GET /vms/{id}/hostdevices do not look the host or the VM up:
//     an unknown one answers an empty collection. A host always has devices (at least its
//     "computer" root), a VM often none, so an empty answer is confirmed with GET /hosts/{id} or
//     GET /vms/{id} (one more call): a 404 there is ErrNotFound.
//   - POST /vms/{id}/hostdevices takes <host_device> with a name (or an id); the Engine adds the
//     device's whole IOMMU group and answers 201 with the device. Its validation: VM not found (400
//     "Cannot add Host devices. VM is not found."), VM not down (409 "Cannot add Host devices
//     because the VM is in Up status."), not pinned (409 "... VM must be pinned to a host."),
//     pinned to several hosts (409 "... VM must be pinned to a single host."), the device not on
//     the pinned host (400 "... One or more of specified host devices not found."). Another VM
//     having the device configured is no refusal.
//   - DELETE /vms/{id}/hostdevices/{hexid} first reads the VM's devices: one not there (or a VM
//     that does not exist) is a 404. The command then refuses a VM that is not down (409 "Cannot
//     remove Host devices because the VM is in Up status.").
//   - PUT /vms/{id} with placement_policy replaces the affinity and the dedicated hosts (hosts by
//     id; an empty list unpins); a changed host list drops every configured host device. A host
//     that does not exist or is in another cluster is 409 "Cannot edit VM. VM is pinned to a
//     specific host. The required host doesn't exist." / "... The host's cluster must be the same
//     as the selected VM cluster.", as it is on POST /vms ("Cannot add VM. ...").

// Engine texts, in lower case, of the refusals reported as ErrInvalid: the request as sent will
// never be taken while the VM and its placement stay as they are.
const (
	// ACTION_TYPE_FAILED_VM_STATUS_ILLEGAL: "Cannot add Host devices because the VM is in Up
	// status." (409).
	phraseVMStatusIllegal = "because the vm is in"
	// ACTION_TYPE_FAILED_VM_NOT_PINNED_TO_HOST and _PINNED_TO_MULTIPLE_HOSTS (409).
	phraseNotPinned      = "vm must be pinned to a host"
	phrasePinnedToMany   = "vm must be pinned to a single host"
	phraseDedicatedHost  = "vm is pinned to a specific host"
	phraseDeviceNotFound = "one or more of specified host devices not found"
)

// deviceID is the Engine's id of a host device: the hex of its name (HexUtils.string2hex).
func deviceID(name string) string {
	return hex.EncodeToString([]byte(name))
}

// normalizeID writes a vendor or product id as CAPOV compares them: lower case, without 0x.
func normalizeID(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	return strings.TrimPrefix(id, "0x")
}

func toHost(h *ovirtsdk.Host) ovirt.Host {
	var out ovirt.Host
	out.ID, _ = h.Id()
	out.Name, _ = h.Name()
	cl, ok := h.Cluster()
	out.ClusterID = idOf(cl, ok)
	status, _ := h.Status()
	out.Status = string(status)
	if dp, ok := h.DevicePassthrough(); ok {
		out.PassthroughEnabled, _ = dp.Enabled()
	}
	out.MaxSchedulingMemoryBytes, _ = h.MaxSchedulingMemory()
	return out
}

func toHostDevice(d *ovirtsdk.HostDevice) ovirt.HostDevice {
	out := ovirt.HostDevice{IOMMUGroup: -1}
	out.Name, _ = d.Name()
	out.ID, _ = d.Id()
	if out.ID == "" && out.Name != "" {
		out.ID = deviceID(out.Name)
	}
	h, ok := d.Host()
	out.HostID = idOf(h, ok)
	out.Capability, _ = d.Capability()
	if v, ok := d.Vendor(); ok {
		id, _ := v.Id()
		out.VendorID = normalizeID(id)
		out.VendorName, _ = v.Name()
	}
	if p, ok := d.Product(); ok {
		id, _ := p.Id()
		out.ProductID = normalizeID(id)
		out.ProductName, _ = p.Name()
	}
	if g, ok := d.IommuGroup(); ok {
		out.IOMMUGroup = int(g)
	}
	if p, ok := d.ParentDevice(); ok {
		out.ParentName, _ = p.Name()
		if out.ParentName == "" {
			// A reference with its id only: the id is the hex of the name.
			if id, ok := p.Id(); ok {
				if b, err := hex.DecodeString(id); err == nil {
					out.ParentName = string(b)
				}
			}
		}
	}
	out.Driver, _ = d.Driver()
	vm, ok := d.Vm()
	out.VMID = idOf(vm, ok)
	if types, ok := d.MDevTypes(); ok {
		for _, t := range types.Slice() {
			var m ovirt.MDevType
			m.Name, _ = t.Name()
			n, _ := t.AvailableInstances()
			m.AvailableInstances = int(n)
			out.MDevTypes = append(out.MDevTypes, m)
		}
	}
	out.Placeholder, _ = d.Placeholder()
	return out
}

func toHostDevices(list *ovirtsdk.HostDeviceSlice) []ovirt.HostDevice {
	out := make([]ovirt.HostDevice, 0, len(list.Slice()))
	for _, d := range list.Slice() {
		out = append(out, toHostDevice(d))
	}
	return out
}

// ListHosts implements ovirt.Client with GET /hosts?search=cluster="<name>"&case_sensitive=true,
// keeping the hosts of the cluster FindCluster (cached) names.
func (c *client) ListHosts(ctx context.Context, clusterName string) ([]ovirt.Host, error) {
	const op = "ListHosts"
	q, err := searchValue(op, "cluster", clusterName)
	if err != nil {
		return nil, err
	}
	cl, err := c.FindCluster(ctx, clusterName)
	if err != nil {
		return nil, err
	}
	hosts, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) ([]ovirt.Host, error) {
		resp, err := conn.SystemService().HostsService().List().Search("cluster=" + q).CaseSensitive(true).Send()
		if err != nil {
			return nil, err
		}
		var out []ovirt.Host
		if list, ok := resp.Hosts(); ok {
			for _, h := range list.Slice() {
				out = append(out, toHost(h))
			}
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	out := hosts[:0]
	for _, h := range hosts {
		// A '*' in the name is a wildcard to the search; a host whose cluster the answer does not
		// name is kept (the search asked for the cluster).
		if h.ClusterID == "" || h.ClusterID == cl.ID {
			out = append(out, h)
		}
	}
	return out, nil
}

// ListHostDevices implements ovirt.Client with GET /hosts/{id}/devices; an empty answer is
// confirmed with GET /hosts/{id}.
func (c *client) ListHostDevices(ctx context.Context, hostID string) ([]ovirt.HostDevice, error) {
	const op = "ListHostDevices"
	if err := ovirt.RequireArgs(op, "host id", hostID); err != nil {
		return nil, err
	}
	devices, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) ([]ovirt.HostDevice, error) {
		resp, err := conn.SystemService().HostsService().HostService(hostID).DevicesService().List().Send()
		if err != nil {
			return nil, err
		}
		list, ok := resp.Devices()
		if !ok {
			return nil, nil
		}
		return toHostDevices(list), nil
	})
	if err != nil || len(devices) > 0 {
		return devices, err
	}
	_, err = invoke(ctx, c.s, "GetHost", func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().HostsService().HostService(hostID).Get().Send()
		return struct{}{}, err
	})
	if err != nil {
		return nil, err
	}
	return []ovirt.HostDevice{}, nil
}

// ListVMHostDevices implements ovirt.Client with GET /vms/{id}/hostdevices; an empty answer is
// confirmed with GET /vms/{id} (no follow).
func (c *client) ListVMHostDevices(ctx context.Context, vmID string) ([]ovirt.HostDevice, error) {
	const op = "ListVMHostDevices"
	if err := ovirt.RequireArgs(op, "VM id", vmID); err != nil {
		return nil, err
	}
	devices, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) ([]ovirt.HostDevice, error) {
		resp, err := conn.SystemService().VmsService().VmService(vmID).HostDevicesService().List().Send()
		if err != nil {
			return nil, err
		}
		list, ok := resp.Device()
		if !ok {
			return nil, nil
		}
		return toHostDevices(list), nil
	})
	if err != nil || len(devices) > 0 {
		return devices, err
	}
	_, err = invoke(ctx, c.s, "GetVM", func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().VmsService().VmService(vmID).Get().Send()
		return struct{}{}, err
	})
	if err != nil {
		return nil, err
	}
	return nil, nil
}

// AttachHostDevice implements ovirt.Client with POST /vms/{id}/hostdevices
// <host_device><name/></host_device>.
func (c *client) AttachHostDevice(ctx context.Context, vmID, deviceName string) error {
	const op = "AttachHostDevice"
	if err := ovirt.RequireArgs(op, "VM id", vmID, "device name", deviceName); err != nil {
		return err
	}
	dev, err := ovirtsdk.NewHostDeviceBuilder().Name(xmlText(deviceName)).Build()
	if err != nil {
		return invalid(op, "building the host device: %v", err)
	}
	_, err = invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().VmsService().VmService(vmID).HostDevicesService().Add().Device(dev).Send()
		return struct{}{}, err
	})
	return refusal(err)
}

// DetachHostDevice implements ovirt.Client with DELETE /vms/{id}/hostdevices/{hex of the name}.
func (c *client) DetachHostDevice(ctx context.Context, vmID, deviceName string) error {
	const op = "DetachHostDevice"
	if err := ovirt.RequireArgs(op, "VM id", vmID, "device name", deviceName); err != nil {
		return err
	}
	_, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().VmsService().VmService(vmID).HostDevicesService().
			DeviceService(deviceID(deviceName)).Remove().Send()
		return struct{}{}, err
	})
	if errors.Is(err, ovirt.ErrNotFound) {
		// Not attached (or no such VM): what the caller wanted.
		return nil
	}
	return refusal(err)
}

// PinVM implements ovirt.Client with PUT /vms/{id}
// <vm><placement_policy><affinity>pinned</affinity><hosts><host id=""/></hosts></placement_policy></vm>.
func (c *client) PinVM(ctx context.Context, vmID, hostID string) error {
	const op = "PinVM"
	if err := ovirt.RequireArgs(op, "VM id", vmID, "host id", hostID); err != nil {
		return err
	}
	vm, err := ovirtsdk.NewVmBuilder().PlacementPolicyBuilder(pinnedPlacement(hostID)).Build()
	if err != nil {
		return invalid(op, "building the VM update: %v", err)
	}
	_, err = invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().VmsService().VmService(vmID).Update().Vm(vm).Send()
		return struct{}{}, err
	})
	return refusal(err)
}

// pinnedPlacement is placement_policy {affinity: pinned, hosts: [hostID]}.
func pinnedPlacement(hostID string) *ovirtsdk.VmPlacementPolicyBuilder {
	return ovirtsdk.NewVmPlacementPolicyBuilder().Affinity(ovirtsdk.VMAFFINITY_PINNED).
		HostsBuilderOfAny(*ovirtsdk.NewHostBuilder().Id(hostID))
}

// refusal reports the Engine's refusals of host devices and pinning as ErrInvalid (see the
// phrases); a VM being created (its status Image Locked) stays ErrLocked, a VM the attach did not
// find is ErrNotFound. Other errors pass as mapped.
func refusal(err error) error {
	switch {
	case err == nil:
		return nil
	case engineSays(err, phraseVMNotFound):
		return withKinds(err, ovirt.ErrNotFound)
	case errors.Is(err, ovirt.ErrLocked):
		return err
	case engineSays(err, phraseVMStatusIllegal, phraseNotPinned, phrasePinnedToMany, phraseDedicatedHost, phraseDeviceNotFound):
		return withKinds(err, ovirt.ErrInvalid)
	}
	return err
}

// placement reads the VM's placement policy (GetVM, ListVMs).
func placement(v *ovirtsdk.Vm, out *ovirt.VM) {
	pp, ok := v.PlacementPolicy()
	if !ok {
		return
	}
	if a, ok := pp.Affinity(); ok {
		out.PlacementAffinity = string(a)
	}
	if hosts, ok := pp.Hosts(); ok {
		for _, h := range hosts.Slice() {
			if id, ok := h.Id(); ok && id != "" {
				out.PinnedHostIDs = append(out.PinnedHostIDs, id)
			}
		}
	}
}
