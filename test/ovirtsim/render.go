package ovirtsim

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"time"
	"unicode/utf8"

	ovirtsdk "github.com/ovirt/go-ovirt"
)

// esc XML-escapes text. go-ovirt's XMLWriter.WriteCharacter writes element
// text verbatim (it escapes attributes only), so every free-text value must
// be escaped before it goes into an SDK object that the SDK writer renders.
func esc(s string) string {
	clean := utf8.ValidString(s)
	for i := 0; clean && i < len(s); i++ {
		c := s[i]
		if c == '&' || c == '<' || c == '>' || c == '\r' || (c < 0x20 && c != '\t' && c != '\n') {
			clean = false
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	return b.String()
}

// renderCtx holds what a rendering needs beyond the inventory.
type renderCtx struct {
	now        time.Time
	guestAgent bool
	follow     map[string]bool
	guest      *GuestInterfaces // what guest agents report besides lo and ethN; nil renders no devices
	seed, n    uint64           // random seed and request number: the order of reported devices
	rng        *rand.Rand       // made from seed and n on first use
	inv        *inventory       // for follow=host; nil renders host references only
}

// shuffler returns the request's random source, made on first use.
func (rc *renderCtx) shuffler() *rand.Rand {
	if rc.rng == nil {
		rc.rng = shuffleRand(rc.seed, rc.n)
	}
	return rc.rng
}

func (rc *renderCtx) follows(k string) bool { return rc.follow[k] }

func vmRef(id string) *ovirtsdk.Vm {
	v := &ovirtsdk.Vm{}
	v.SetId(id)
	return v
}

func templateRef(id string) *ovirtsdk.Template {
	t := &ovirtsdk.Template{}
	t.SetId(id)
	return t
}

func clusterRef(id string) *ovirtsdk.Cluster {
	c := &ovirtsdk.Cluster{}
	c.SetId(id)
	return c
}

func dcRef(id string) *ovirtsdk.DataCenter {
	d := &ovirtsdk.DataCenter{}
	d.SetId(id)
	return d
}

func sdRef(id string) *ovirtsdk.StorageDomain {
	s := &ovirtsdk.StorageDomain{}
	s.SetId(id)
	return s
}

func networkRef(id string) *ovirtsdk.Network {
	n := &ovirtsdk.Network{}
	n.SetId(id)
	return n
}

func diskRef(id string) *ovirtsdk.Disk {
	d := &ovirtsdk.Disk{}
	d.SetId(id)
	return d
}

// clusterVersion is a compatibility level 4.<minor>.
func clusterVersion(minor int) *ovirtsdk.Version {
	v := &ovirtsdk.Version{}
	v.SetMajor(4)
	v.SetMinor(int64(minor))
	return v
}

func topology(s, c, t int) *ovirtsdk.Cpu {
	tp := &ovirtsdk.CpuTopology{}
	tp.SetSockets(int64(s))
	tp.SetCores(int64(c))
	tp.SetThreads(int64(t))
	cpu := &ovirtsdk.Cpu{}
	cpu.SetTopology(tp)
	cpu.SetArchitecture(ovirtsdk.ARCHITECTURE_X86_64)
	return cpu
}

func memPolicy(guaranteed, maxMem int64) *ovirtsdk.MemoryPolicy {
	mp := &ovirtsdk.MemoryPolicy{}
	mp.SetGuaranteed(guaranteed)
	mp.SetMax(maxMem)
	mp.SetBallooning(true)
	return mp
}

func osType(t string) *ovirtsdk.OperatingSystem {
	o := &ovirtsdk.OperatingSystem{}
	o.SetType(esc(t))
	return o
}

// renderAPI renders GET /api. instanceID is left out when empty, as engines
// before 4.4.3 do (BackendApiResource.addSystemVersion sets it from the
// InstanceId option).
func renderAPI(inv *inventory, instanceID string, now time.Time) *ovirtsdk.Api {
	api := &ovirtsdk.Api{}
	pi := &ovirtsdk.ProductInfo{}
	pi.SetName("oVirt Engine")
	pi.SetVendor("ovirt.org")
	if instanceID != "" {
		pi.SetInstanceId(instanceID)
	}
	v := &ovirtsdk.Version{}
	ev := inv.version
	v.SetMajor(int64(ev.major))
	v.SetMinor(int64(ev.minor))
	v.SetBuild(int64(ev.build))
	v.SetRevision(1)
	v.SetFullVersion(fmt.Sprintf("%d.%d.%d-1.el8", ev.major, ev.minor, ev.build))
	pi.SetVersion(v)
	api.SetProductInfo(pi)
	var up int64
	for _, vm := range inv.vms {
		if vm.status(now) == "up" {
			up++
		}
	}
	var sdActive int64
	for _, sd := range inv.sds {
		if sd.status == "active" {
			sdActive++
		}
	}
	item := func(active, total int64) *ovirtsdk.ApiSummaryItem {
		i := &ovirtsdk.ApiSummaryItem{}
		i.SetActive(active)
		i.SetTotal(total)
		return i
	}
	sum := &ovirtsdk.ApiSummary{}
	sum.SetVms(item(up, int64(len(inv.vms))))
	var hostsUp int64
	for _, h := range inv.hosts {
		if h.status == "up" {
			hostsUp++
		}
	}
	sum.SetHosts(item(hostsUp, int64(len(inv.hosts))))
	sum.SetStorageDomains(item(sdActive, int64(len(inv.sds))))
	sum.SetUsers(item(1, 1))
	api.SetSummary(sum)
	so := &ovirtsdk.SpecialObjects{}
	so.SetBlankTemplate(templateRef(blankTemplateID))
	api.SetSpecialObjects(so)
	api.SetTime(now)
	return api
}

func renderDC(dc *dataCenter) *ovirtsdk.DataCenter {
	d := &ovirtsdk.DataCenter{}
	d.SetId(dc.id)
	d.SetName(esc(dc.name))
	d.SetStatus(ovirtsdk.DATACENTERSTATUS_UP)
	d.SetLocal(false)
	d.SetStorageFormat(ovirtsdk.STORAGEFORMAT_V5)
	d.SetVersion(clusterVersion(dc.level))
	return d
}

func renderCluster(c *cluster) *ovirtsdk.Cluster {
	o := &ovirtsdk.Cluster{}
	o.SetId(c.id)
	o.SetName(esc(c.name))
	o.SetDataCenter(dcRef(c.dc.id))
	o.SetVersion(clusterVersion(c.level))
	cpu := &ovirtsdk.Cpu{}
	cpu.SetArchitecture(ovirtsdk.ARCHITECTURE_X86_64)
	cpu.SetType("Secure Intel Cascadelake Server Family")
	o.SetCpu(cpu)
	if len(c.networks) > 0 {
		o.SetManagementNetwork(networkRef(c.networks[0].id))
	}
	return o
}

func renderNetwork(n *network, cl *cluster) *ovirtsdk.Network {
	o := &ovirtsdk.Network{}
	o.SetId(n.id)
	o.SetName(esc(n.name))
	o.SetDataCenter(dcRef(n.dc.id))
	o.SetMtu(0)
	o.SetStp(false)
	if cl != nil {
		o.SetCluster(clusterRef(cl.id))
		o.SetStatus(ovirtsdk.NETWORKSTATUS_OPERATIONAL)
		o.SetRequired(true)
	}
	return o
}

func renderProfile(p *vnicProfile) *ovirtsdk.VnicProfile {
	o := &ovirtsdk.VnicProfile{}
	o.SetId(p.id)
	o.SetName(esc(p.name))
	o.SetNetwork(networkRef(p.net.id))
	o.SetPortMirroring(false)
	return o
}

// renderSD renders a storage domain. Like the engine, the top-level
// /storagedomains collection shows no status for a domain attached to a
// data center (the status is per data center, BackendStorageDomainResource);
// underDC renders it as /datacenters/{id}/storagedomains does, with status.
func renderSD(sd *storageDomain, underDC bool) *ovirtsdk.StorageDomain {
	o := &ovirtsdk.StorageDomain{}
	o.SetId(sd.id)
	o.SetName(esc(sd.name))
	o.SetType(ovirtsdk.StorageDomainType(sd.typ))
	if underDC || sd.dc == nil {
		o.SetStatus(ovirtsdk.StorageDomainStatus(esc(sd.status)))
	}
	o.SetExternalStatus(ovirtsdk.EXTERNALSTATUS_OK)
	o.SetAvailable(max(sd.freeGB, 0) * gib)
	o.SetUsed(sd.usedGB * gib)
	o.SetCommitted(sd.usedGB * gib)
	o.SetStorageFormat(ovirtsdk.STORAGEFORMAT_V5)
	o.SetMaster(false)
	dcs := &ovirtsdk.DataCenterSlice{}
	dcs.SetSlice([]*ovirtsdk.DataCenter{dcRef(sd.dc.id)})
	o.SetDataCenters(dcs)
	o.SetWarningLowSpaceIndicator(10)
	o.SetCriticalSpaceActionBlocker(5)
	hs := &ovirtsdk.HostStorage{}
	hs.SetType(ovirtsdk.StorageType(sd.storageType))
	o.SetStorage(hs)
	o.SetWipeAfterDelete(sd.wipe)
	return o
}

func renderDisk(d *disk, now time.Time) *ovirtsdk.Disk {
	o := &ovirtsdk.Disk{}
	o.SetId(d.id)
	o.SetName(esc(d.alias))
	o.SetAlias(esc(d.alias))
	if d.description != "" {
		o.SetDescription(esc(d.description))
	}
	o.SetProvisionedSize(d.visibleSize(now))
	actual := d.consumedGB * gib
	if actual == 0 {
		actual = 200 * mib
	}
	o.SetActualSize(actual)
	o.SetTotalSize(actual)
	o.SetFormat(ovirtsdk.DiskFormat(d.format))
	if d.format == "cow" {
		o.SetQcowVersion(ovirtsdk.QCOWVERSION_QCOW2_V3)
	}
	o.SetSparse(d.sparse)
	o.SetStatus(ovirtsdk.DiskStatus(d.status(now)))
	o.SetStorageType(ovirtsdk.DISKSTORAGETYPE_IMAGE)
	o.SetContentType(ovirtsdk.DISKCONTENTTYPE_DATA)
	o.SetShareable(false)
	o.SetWipeAfterDelete(d.wipe)
	o.SetBackup(ovirtsdk.DiskBackup(cmp.Or(d.backup, "none")))
	o.SetPropagateErrors(false)
	refs := []*ovirtsdk.StorageDomain{sdRef(d.sd.id)}
	for _, c := range d.copies {
		refs = append(refs, sdRef(c.id))
	}
	sds := &ovirtsdk.StorageDomainSlice{}
	sds.SetSlice(refs)
	o.SetStorageDomains(sds)
	return o
}

func renderAttachment(d *disk, withDisk bool, now time.Time) *ovirtsdk.DiskAttachment {
	o := &ovirtsdk.DiskAttachment{}
	o.SetId(d.id)
	o.SetActive(d.isActive(now))
	o.SetBootable(d.bootable)
	o.SetInterface(ovirtsdk.DiskInterface(d.iface))
	o.SetPassDiscard(false)
	o.SetReadOnly(false)
	o.SetUsesScsiReservation(false)
	if withDisk {
		o.SetDisk(renderDisk(d, now))
	} else {
		o.SetDisk(diskRef(d.id))
	}
	switch {
	case d.vm != nil:
		o.SetVm(vmRef(d.vm.id))
	case d.template != nil:
		o.SetTemplate(templateRef(d.template.id))
	}
	return o
}

func renderAttachments(ds []*disk, withDisk bool, now time.Time) *ovirtsdk.DiskAttachmentSlice {
	out := make([]*ovirtsdk.DiskAttachment, 0, len(ds))
	for _, d := range ds {
		out = append(out, renderAttachment(d, withDisk, now))
	}
	s := &ovirtsdk.DiskAttachmentSlice{}
	s.SetSlice(out)
	return s
}

func mac(addr string) *ovirtsdk.Mac {
	m := &ovirtsdk.Mac{}
	m.SetAddress(addr)
	return m
}

// linkLocal derives the EUI-64 IPv6 link-local address of a MAC.
func linkLocal(macAddr string) string {
	hw, err := net.ParseMAC(macAddr)
	if err != nil || len(hw) != 6 {
		return "fe80::1"
	}
	ip := net.IP{0xfe, 0x80, 0, 0, 0, 0, 0, 0, hw[0] ^ 0x02, hw[1], hw[2], 0xff, 0xfe, hw[3], hw[4], hw[5]}
	return ip.String()
}

// reportedDevices lists what the guest agent reports: every interface of
// the guest (lo, ethN per plugged NIC, the Kubernetes ones, extras), in a
// new random order each time, once the VM has been up for GuestAgentDelay
// and has an agent; nothing otherwise. The engine returns this same VM-wide
// list for every NIC (BackendVmNicResource.getReportedDevicesResource).
func reportedDevices(v *vm, rc *renderCtx) *ovirtsdk.ReportedDeviceSlice {
	var out []*ovirtsdk.ReportedDevice
	if rc.guest != nil && v.reportsIPs(rc.now, rc.guestAgent) {
		ifs := guestIfaces(v, rc.guest)
		if rc.inv != nil {
			if real, ok := rc.inv.realGuestIfaces(v); ok {
				ifs = real
			}
		}
		rc.shuffler().Shuffle(len(ifs), func(i, j int) { ifs[i], ifs[j] = ifs[j], ifs[i] })
		out = make([]*ovirtsdk.ReportedDevice, 0, len(ifs))
		for i := range ifs {
			out = append(out, renderGuestIface(v, &ifs[i]))
		}
	}
	s := &ovirtsdk.ReportedDeviceSlice{}
	s.SetSlice(out)
	return s
}

func (n *nic) ipString() string { return net.IP(n.ipv4[:]).String() }

func renderNIC(v *vm, n *nic, rc *renderCtx, withRD bool) *ovirtsdk.Nic {
	o := &ovirtsdk.Nic{}
	o.SetId(n.id)
	o.SetName(esc(n.name))
	o.SetInterface(ovirtsdk.NicInterface(n.iface))
	o.SetLinked(n.linked)
	o.SetPlugged(n.plugged)
	o.SetMac(mac(n.mac))
	if n.profile != nil {
		p := &ovirtsdk.VnicProfile{}
		p.SetId(n.profile.id)
		o.SetVnicProfile(p)
	}
	o.SetVm(vmRef(v.id))
	if withRD {
		o.SetReportedDevices(reportedDevices(v, rc))
	}
	return o
}

func renderNICs(v *vm, rc *renderCtx, withRD bool) *ovirtsdk.NicSlice {
	out := make([]*ovirtsdk.Nic, 0, len(v.nics))
	for _, n := range v.nics {
		out = append(out, renderNIC(v, n, rc, withRD))
	}
	s := &ovirtsdk.NicSlice{}
	s.SetSlice(out)
	return s
}

// renderInitialization renders the VM's vm_init as VmMapper does on every GET
// of a VM, the list included (GetVmByVmIdQuery and GetVmsInit load it;
// all_content is not needed), or nil when it has none. The engine writes
// every non-null field, so after <custom_script></custom_script> it answers
// an empty custom_script; the simulator stores no null and leaves empty
// fields out: a client must take an empty and a missing one alike.
func renderInitialization(v *vm) *ovirtsdk.Initialization {
	if v.customScript == "" && v.hostName == "" && v.initUser == "" && v.sshKeys == "" && !v.hasNetworkInit() {
		return nil
	}
	in := &ovirtsdk.Initialization{}
	if v.hostName != "" {
		in.SetHostName(esc(v.hostName))
	}
	if v.sshKeys != "" {
		in.SetAuthorizedSshKeys(esc(v.sshKeys))
	}
	if v.customScript != "" {
		in.SetCustomScript(esc(v.customScript))
	}
	if v.initUser != "" {
		in.SetUserName(esc(v.initUser))
	}
	if len(v.initNets) > 0 {
		in.SetNicConfigurations(renderNicConfigurations(v.initNets))
	}
	if v.dnsServers != "" {
		in.SetDnsServers(esc(v.dnsServers))
	}
	if v.dnsSearch != "" {
		in.SetDnsSearch(esc(v.dnsSearch))
	}
	return in
}

// renderVM renders a VM; status overrides the computed status when not empty.
func renderVM(v *vm, rc *renderCtx, status string) *ovirtsdk.Vm {
	o := &ovirtsdk.Vm{}
	o.SetId(v.id)
	o.SetName(esc(v.name))
	if status == "" {
		status = v.status(rc.now)
	}
	o.SetStatus(ovirtsdk.VmStatus(status))
	o.SetCluster(clusterRef(v.cluster.id))
	if v.clone {
		o.SetTemplate(templateRef(blankTemplateID))
	} else {
		o.SetTemplate(templateRef(v.template.id))
	}
	o.SetOriginalTemplate(templateRef(v.template.id))
	o.SetComment(esc(v.comment))
	o.SetDescription(esc(v.description))
	o.SetCpu(topology(v.sockets, v.cores, v.thr))
	o.SetMemory(v.memory)
	o.SetMemoryPolicy(memPolicy(v.guaranteed, v.maxMemory))
	o.SetType(ovirtsdk.VmType(v.vmType))
	o.SetOs(osType(v.osType))
	o.SetCreationTime(v.created)
	o.SetOrigin("ovirt")
	o.SetStateless(false)
	o.SetDeleteProtected(false)
	// vm_dynamic.is_run_once: set by a run once, gone when the VM is down (VmMapper).
	o.SetRunOnce(v.runOnce && status != "down")
	if !v.startTime.IsZero() {
		o.SetStartTime(v.startTime)
	}
	if !v.stopTime.IsZero() && status == "down" {
		o.SetStopTime(v.stopTime)
	}
	// run_on_vds: only while the VM runs (VmMapper maps it when set).
	if h := v.runningOn(rc.now); h != nil && status != "image_locked" {
		if rc.follows("host") && rc.inv != nil {
			o.SetHost(renderHost(rc.inv, h, rc.now))
		} else {
			o.SetHost(hostRef(h.id))
		}
	}
	ha := &ovirtsdk.HighAvailability{}
	ha.SetEnabled(v.ha)
	ha.SetPriority(v.haPriority)
	o.SetHighAvailability(ha)
	renderPerf(o, v) // custom properties, lease, resume behaviour, performance (performance.go)
	if in := renderInitialization(v); in != nil {
		o.SetInitialization(in)
	}
	// Updates are applied at once here (the comment and the initialization
	// need no restart on the engine either), so nothing is ever pending;
	// VmMapper always writes the flag.
	o.SetNextRunConfigurationExists(false)
	if rc.follows("disk_attachments") || rc.follows("disk_attachments.disk") {
		o.SetDiskAttachments(renderAttachments(v.disks, rc.follows("disk_attachments.disk"), rc.now))
	}
	if rc.follows("nics") || rc.follows("nics.reported_devices") {
		o.SetNics(renderNICs(v, rc, rc.follows("nics.reported_devices")))
	}
	if rc.follows("reported_devices") {
		o.SetReportedDevices(reportedDevices(v, rc))
	}
	if rc.follows("tags") {
		o.SetTags(renderVMTags(v, rc)) // vmtags.go
	}
	return o
}

func renderTemplate(inv *inventory, t *template, rc *renderCtx) *ovirtsdk.Template {
	o := &ovirtsdk.Template{}
	o.SetId(t.id)
	o.SetName(esc(t.name))
	o.SetStatus(ovirtsdk.TemplateStatus(t.status))
	if t.cluster != nil {
		o.SetCluster(clusterRef(t.cluster.id))
	}
	tv := &ovirtsdk.TemplateVersion{}
	tv.SetBaseTemplate(templateRef(inv.baseTemplate(t).id))
	tv.SetVersionNumber(int64(t.version))
	if t.version == 1 {
		tv.SetVersionName("base version")
	}
	o.SetVersion(tv)
	o.SetCpu(topology(t.sockets, t.cores, t.threads))
	o.SetMemory(t.memoryMB * mib)
	o.SetMemoryPolicy(memPolicy(t.memoryMB*mib, 4*t.memoryMB*mib))
	o.SetOs(osType(t.osType))
	o.SetType(ovirtsdk.VMTYPE_SERVER)
	o.SetCreationTime(t.created)
	o.SetOrigin("ovirt")
	if t == inv.blank {
		o.SetDescription("Blank template")
	}
	if rc.follows("disk_attachments") || rc.follows("disk_attachments.disk") {
		o.SetDiskAttachments(renderAttachments(t.disks, rc.follows("disk_attachments.disk"), rc.now))
	}
	if rc.follows("nics") {
		o.SetNics(renderTemplateNICs(t))
	}
	return o
}

func renderTemplateNICs(t *template) *ovirtsdk.NicSlice {
	out := make([]*ovirtsdk.Nic, 0, len(t.nics))
	for _, n := range t.nics {
		o := &ovirtsdk.Nic{}
		o.SetId(n.id)
		o.SetName(esc(n.name))
		o.SetInterface(ovirtsdk.NICINTERFACE_VIRTIO)
		o.SetLinked(true)
		o.SetPlugged(true)
		p := &ovirtsdk.VnicProfile{}
		p.SetId(n.profile.id)
		o.SetVnicProfile(p)
		o.SetTemplate(templateRef(t.id))
		out = append(out, o)
	}
	s := &ovirtsdk.NicSlice{}
	s.SetSlice(out)
	return s
}

func renderJob(j *job, now time.Time) *ovirtsdk.Job {
	o := &ovirtsdk.Job{}
	o.SetId(j.id)
	o.SetDescription(esc(j.description))
	st := j.status(now)
	o.SetStatus(ovirtsdk.JobStatus(st))
	o.SetStartTime(j.start)
	if st == "finished" {
		o.SetEndTime(j.end)
		o.SetLastUpdated(j.end)
	} else {
		o.SetLastUpdated(j.start)
	}
	o.SetExternal(false)
	o.SetAutoCleared(true)
	return o
}
