package sdk

import (
	"slices"
	"strings"

	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// The converters read engine objects with the (value, ok) getters only: the
// Must* getters panic on any field the engine left out, which happens for
// partial objects, down VMs and links that were not followed.

func idOf[T interface{ Id() (string, bool) }](obj T, ok bool) string {
	if !ok {
		return ""
	}
	id, _ := obj.Id()
	return id
}

func toCluster(c *ovirtsdk.Cluster) *ovirt.Cluster {
	out := &ovirt.Cluster{}
	out.ID, _ = c.Id()
	out.Name, _ = c.Name()
	dc, ok := c.DataCenter()
	out.DataCenterID = idOf(dc, ok)
	if nets, ok := c.Networks(); ok {
		out.NetworkIDs = networkIDs(nets)
	}
	return out
}

func networkIDs(nets *ovirtsdk.NetworkSlice) []string {
	var ids []string
	for _, n := range nets.Slice() {
		if id, ok := n.Id(); ok && id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// toStorageDomain converts a storage domain of the top-level collection; attachedStatus is its
// status in its data center ("" for an unattached domain, whose own status is then used).
func toStorageDomain(sd *ovirtsdk.StorageDomain, attachedStatus ovirtsdk.StorageDomainStatus) *ovirt.StorageDomain {
	out := &ovirt.StorageDomain{}
	out.ID, _ = sd.Id()
	out.Name, _ = sd.Name()
	out.Available, _ = sd.Available()
	status, _ := sd.Status()
	if attachedStatus != "" {
		status = attachedStatus
	}
	out.Status = string(status)
	typ, _ := sd.Type()
	external, _ := sd.ExternalStatus()
	out.Usable = typ == ovirtsdk.STORAGEDOMAINTYPE_DATA && status == ovirtsdk.STORAGEDOMAINSTATUS_ACTIVE &&
		external != ovirtsdk.EXTERNALSTATUS_ERROR && external != ovirtsdk.EXTERNALSTATUS_FAILURE
	return out
}

func toVnicProfile(p *ovirtsdk.VnicProfile) *ovirt.VnicProfile {
	out := &ovirt.VnicProfile{}
	out.ID, _ = p.Id()
	out.Name, _ = p.Name()
	n, ok := p.Network()
	out.NetworkID = idOf(n, ok)
	return out
}

func toTemplate(t *ovirtsdk.Template) *ovirt.Template {
	out := &ovirt.Template{}
	out.ID, _ = t.Id()
	out.Name, _ = t.Name()
	out.Version = templateVersion(t)
	c, ok := t.Cluster()
	out.ClusterID = idOf(c, ok)
	if os, ok := t.Os(); ok {
		out.OSType, _ = os.Type()
	}
	if atts, ok := t.DiskAttachments(); ok {
		out.Disks = toDisks(atts)
	}
	if cpu, ok := t.Cpu(); ok {
		if tp, ok := cpu.Topology(); ok {
			s, _ := tp.Sockets()
			c, _ := tp.Cores()
			th, _ := tp.Threads()
			out.Sockets, out.Cores, out.Threads = int(s), int(c), int(th)
		}
	}
	out.MemoryBytes, _ = t.Memory()
	return out
}

func templateVersion(t *ovirtsdk.Template) int {
	v, ok := t.Version()
	if !ok {
		return 0
	}
	n, _ := v.VersionNumber()
	return int(n)
}

func toDisks(atts *ovirtsdk.DiskAttachmentSlice) []ovirt.Disk {
	var out []ovirt.Disk
	for _, a := range atts.Slice() {
		out = append(out, toDisk(a))
	}
	return out
}

// toDisk merges an attachment with its followed disk. The attachment id is
// the disk id; attachment-level fields (bootable, interface) live on the
// attachment.
func toDisk(a *ovirtsdk.DiskAttachment) ovirt.Disk {
	var d ovirt.Disk
	d.ID, _ = a.Id()
	d.Bootable, _ = a.Bootable()
	iface, _ := a.Interface()
	d.Interface = string(iface)
	disk, ok := a.Disk()
	if !ok {
		return d
	}
	return mergeDisk(d, disk)
}

// mergeDisk fills an attachment's disk with the disk's own fields.
func mergeDisk(d ovirt.Disk, disk *ovirtsdk.Disk) ovirt.Disk {
	if id, ok := disk.Id(); ok && id != "" {
		d.ID = id
	}
	d.Alias, _ = disk.Alias()
	d.ProvisionedSize, _ = disk.ProvisionedSize()
	status, _ := disk.Status()
	d.Status = ovirt.DiskStatus(status)
	format, _ := disk.Format()
	d.Format = string(format)
	d.Sparse, _ = disk.Sparse()
	d.Description, _ = disk.Description()
	d.WipeAfterDelete, _ = disk.WipeAfterDelete()
	if sds, ok := disk.StorageDomains(); ok {
		for _, sd := range sds.Slice() {
			if id, ok := sd.Id(); ok && id != "" && !slices.Contains(d.StorageDomainIDs, id) {
				d.StorageDomainIDs = append(d.StorageDomainIDs, id)
			}
		}
	}
	if sd, ok := disk.StorageDomain(); ok {
		if id, ok := sd.Id(); ok && id != "" && !slices.Contains(d.StorageDomainIDs, id) {
			d.StorageDomainIDs = append(d.StorageDomainIDs, id)
		}
	}
	if len(d.StorageDomainIDs) > 0 {
		d.StorageDomainID = d.StorageDomainIDs[0]
	}
	return d
}

func toNIC(n *ovirtsdk.Nic) ovirt.NIC {
	var out ovirt.NIC
	out.ID, _ = n.Id()
	out.Name, _ = n.Name()
	p, ok := n.VnicProfile()
	out.VnicProfileID = idOf(p, ok)
	if mac, ok := n.Mac(); ok {
		out.MAC, _ = mac.Address()
	}
	return out
}

// toVM converts a VM; disks, NICs and addresses are filled only when the
// engine returned them (GetVM follows those links, lists do not).
func toVM(v *ovirtsdk.Vm) *ovirt.VM {
	out := &ovirt.VM{}
	out.ID, _ = v.Id()
	out.Name, _ = v.Name()
	out.Comment, _ = v.Comment()
	out.Description, _ = v.Description()
	status, _ := v.Status()
	out.Status = ovirt.VMStatus(status)
	c, ok := v.Cluster()
	out.ClusterID = idOf(c, ok)
	t, ok := v.Template()
	out.TemplateID = idOf(t, ok)
	ot, ok := v.OriginalTemplate()
	out.OriginalTemplateID = idOf(ot, ok)
	// <host> is there while the VM runs (or migrates, from its source), a reference unless a
	// follow inlined it; GetVM adds the name of a reference.
	if h, ok := v.Host(); ok {
		out.HostID, _ = h.Id()
		out.HostName, _ = h.Name()
	}
	if os, ok := v.Os(); ok {
		out.OSType, _ = os.Type()
	}
	placement(v, out)
	if in, ok := v.Initialization(); ok {
		script, _ := in.CustomScript()
		out.CustomScriptStored = script != ""
	}
	if atts, ok := v.DiskAttachments(); ok {
		out.Disks = toDisks(atts)
	}
	if nics, ok := v.Nics(); ok {
		out.NICs, out.ReportedDevices = toNICs(nics, out.ReportedDevices)
	}
	// The engine's VM-level collection holds the same devices.
	if devs, ok := v.ReportedDevices(); ok {
		out.ReportedDevices = appendDevices(out.ReportedDevices, devs)
	}
	return out
}

// toFollowedVM converts a VM read with vmFollow (GetVM, its shared search, ListVMs' pages): toVM,
// and the tags that came inline.
//
// go-ovirt cannot tell an inline <tags/> from a <link rel="tags"> alone (the Engine's LinkFollower
// keeps the link next to what it followed: both give an empty slice with an href), and a VM may
// have no tag. The tags are known when some came inline, or when the disk attachments the same
// follow asked for did (an Engine or a proxy honours or ignores follow as a whole; a VM made
// from a template always has disks): the rule ListVMs' Complete rests on.
func toFollowedVM(v *ovirtsdk.Vm) *ovirt.VM {
	out := toVM(v)
	if tags, ok := v.Tags(); ok {
		out.TagIDs = tagIDs(tags)
	}
	out.TagsKnown = len(out.TagIDs) > 0 || len(out.Disks) > 0
	return out
}

// tagIDs returns the ids of the tags, without duplicates, in a slice of their exact size (the
// inventory keeps every VM of the Engine in memory): nil for none.
func tagIDs(tags *ovirtsdk.TagSlice) []string {
	var ids []string
	for _, t := range tags.Slice() {
		if id, ok := t.Id(); ok && id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return slices.Clip(ids)
}

// toNICs converts NICs and collects their reported devices into devs. A real engine returns
// every guest interface of the VM for each NIC, so the same devices repeat: they are merged.
func toNICs(nics *ovirtsdk.NicSlice, devs []ovirt.ReportedDevice) ([]ovirt.NIC, []ovirt.ReportedDevice) {
	var out []ovirt.NIC
	for _, n := range nics.Slice() {
		out = append(out, toNIC(n))
		if rd, ok := n.ReportedDevices(); ok {
			devs = appendDevices(devs, rd)
		}
	}
	return out, devs
}

// appendDevices adds the reported devices not yet in devs (same name and MAC), merging the IPs
// of a device reported twice.
func appendDevices(devs []ovirt.ReportedDevice, in *ovirtsdk.ReportedDeviceSlice) []ovirt.ReportedDevice {
	for _, d := range in.Slice() {
		var rd ovirt.ReportedDevice
		rd.Name, _ = d.Name()
		if mac, ok := d.Mac(); ok {
			rd.MAC, _ = mac.Address()
		}
		if ips, ok := d.Ips(); ok {
			for _, ip := range ips.Slice() {
				if a, ok := ip.Address(); ok && a != "" && !slices.Contains(rd.IPs, a) {
					rd.IPs = append(rd.IPs, a)
				}
			}
		}
		i := slices.IndexFunc(devs, func(o ovirt.ReportedDevice) bool {
			return o.Name == rd.Name && strings.EqualFold(o.MAC, rd.MAC)
		})
		if i < 0 {
			devs = append(devs, rd)
			continue
		}
		for _, a := range rd.IPs {
			if !slices.Contains(devs[i].IPs, a) {
				devs[i].IPs = append(devs[i].IPs, a)
			}
		}
	}
	return devs
}

// toAffinityGroup converts an affinity group's VM rule and members. The vms_rule (4.1+) wins over
// the deprecated top-level positive/enforcing, which older Engines report alone; a disabled VM
// rule is reported as not enforcing (the scheduler ignores it). clusterID is the cluster asked
// for, used when the answer names none.
func toAffinityGroup(g *ovirtsdk.AffinityGroup, clusterID string) ovirt.AffinityGroup {
	var out ovirt.AffinityGroup
	out.ID, _ = g.Id()
	out.Name, _ = g.Name()
	out.Description, _ = g.Description()
	c, ok := g.Cluster()
	out.ClusterID = idOf(c, ok)
	if out.ClusterID == "" {
		out.ClusterID = clusterID
	}
	out.Positive, _ = g.Positive()
	out.Enforcing, _ = g.Enforcing()
	if rule, ok := g.VmsRule(); ok {
		enabled, set := rule.Enabled()
		if positive, ok := rule.Positive(); ok {
			out.Positive = positive
		}
		if enforcing, ok := rule.Enforcing(); ok {
			out.Enforcing = enforcing
		}
		if set && !enabled {
			out.Enforcing = false
		}
	}
	if vms, ok := g.Vms(); ok {
		out.VMIDs = vmIDs(vms)
	}
	return out
}

// vmIDs returns the ids of the VMs of a collection, without duplicates.
func vmIDs(vms *ovirtsdk.VmSlice) []string {
	var ids []string
	for _, v := range vms.Slice() {
		if id, ok := v.Id(); ok && id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// Deep copies for the lookup cache.

func cloneCluster(c *ovirt.Cluster) *ovirt.Cluster {
	out := *c
	out.NetworkIDs = slices.Clone(c.NetworkIDs)
	return &out
}

func cloneTemplate(t *ovirt.Template) *ovirt.Template {
	out := *t
	out.Disks = slices.Clone(t.Disks)
	for i := range out.Disks {
		out.Disks[i].StorageDomainIDs = slices.Clone(t.Disks[i].StorageDomainIDs)
	}
	return &out
}

func cloneStorageDomain(sd *ovirt.StorageDomain) *ovirt.StorageDomain {
	out := *sd
	return &out
}

func cloneVnicProfile(p *ovirt.VnicProfile) *ovirt.VnicProfile {
	out := *p
	return &out
}
