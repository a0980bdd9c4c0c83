package ovirtsim

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// VMState is a snapshot of one VM, for assertions in tests.
type VMState struct {
	ID string `json:"id"`
	// Name is the VM name.
	Name string `json:"name"`
	// Cluster is the cluster name.
	Cluster string `json:"cluster"`
	// NoGuestAgent is true when this VM has no guest agent (its template's
	// no_guest_agent or SetVMGuestAgent); the global switch is in Settings.
	NoGuestAgent bool `json:"no_guest_agent,omitempty"`
	// Template is the name of the source template (also after clone=true).
	Template string `json:"template"`
	// TemplateVersion is the version number of the source template.
	TemplateVersion int `json:"template_version"`
	// Status is the engine status now: image_locked, down, wait_for_launch, powering_up, up, powering_down.
	Status string `json:"status"`
	// Clone tells whether the VM was created with clone=true.
	Clone       bool   `json:"clone"`
	Comment     string `json:"comment,omitempty"`
	Description string `json:"description,omitempty"`
	// CustomScript is initialization.custom_script (e.g. the ignition config).
	CustomScript string `json:"custom_script,omitempty"`
	// HostName is initialization.host_name.
	HostName string `json:"host_name,omitempty"`
	OSType   string `json:"os_type"`
	// Type is server, desktop or high_performance.
	Type         string `json:"type"`
	Sockets      int    `json:"sockets"`
	Cores        int    `json:"cores"`
	Threads      int    `json:"threads"`
	MemoryMB     int64  `json:"memory_mb"`
	GuaranteedMB int64  `json:"guaranteed_mb"`
	// Disks are the attached disks, in attachment order.
	Disks []DiskState `json:"disks"`
	// NICs are the NICs in order.
	NICs []NICState `json:"nics"`
	// IPs are the IPv4 addresses the guest agent reports now on the NIC interfaces (empty unless
	// up and reporting): the generated (DHCP) address, or the static ones of an interface the
	// first run's initialization configured.
	IPs       []string  `json:"ips"`
	CreatedAt time.Time `json:"created_at"`
	// Host is the name of the host the VM runs on now (empty unless running).
	Host string `json:"host,omitempty"`
	// HighlyAvailable is high_availability.enabled: the VM is restarted
	// elsewhere when its host fails.
	HighlyAvailable bool `json:"highly_available,omitempty"`
	// VMSettings are its custom properties, lease and performance settings, and how its last
	// run ended (ha.go).
	VMSettings
	// Tags are the names of the tags assigned to the VM (GET /vms/{id}/tags), sorted.
	Tags []string `json:"tags"`
	// Guest is what the VM's guest did so far: its boots and whether it hangs (reset.go).
	Guest GuestState `json:"guest"`
	// HostDevices are the names of the VM's host devices (placeholders included), MDevTypes
	// the vGPU types it asks for (hostdevices.go).
	HostDevices []string `json:"host_devices,omitempty"`
	MDevTypes   []string `json:"mdev_types,omitempty"`
}

// DiskState is a snapshot of one disk.
type DiskState struct {
	ID    string `json:"id"`
	Alias string `json:"alias"`
	// SizeGB is the provisioned size in GiB (rounded up).
	SizeGB int64  `json:"size_gb"`
	Format string `json:"format"`
	Sparse bool   `json:"sparse"`
	// StorageDomain is the storage domain name.
	StorageDomain string `json:"storage_domain"`
	// CopiesOn names the further domains holding a copy (template disks only).
	CopiesOn []string `json:"copies_on,omitempty"`
	// Status is ok or locked.
	Status    string `json:"status"`
	Bootable  bool   `json:"bootable"`
	Active    bool   `json:"active"`
	Interface string `json:"interface"`
	// FromTemplate marks disks copied from the template at creation.
	FromTemplate bool `json:"from_template"`
	// Description is the disk's description.
	Description string `json:"description,omitempty"`
	// Backup is "none" or "incremental".
	Backup string `json:"backup"`
	// WipeAfterDelete is the disk's wipe_after_delete.
	WipeAfterDelete bool `json:"wipe_after_delete,omitempty"`
	// VM is the id of the VM the disk is attached to; empty for floating disks.
	VM string `json:"vm,omitempty"`
}

// NICState is a snapshot of one NIC.
type NICState struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// VnicProfile is the profile name (empty: no network).
	VnicProfile string `json:"vnic_profile"`
	MAC         string `json:"mac"`
	Interface   string `json:"interface"`
	Plugged     bool   `json:"plugged"`
	// IP is the IPv4 address the guest agent reports for this NIC once the VM is up.
	IP string `json:"ip"`
}

// State is the JSON-serialisable full state returned by Dump and GET /sim/state.
type State struct {
	Time           time.Time            `json:"time"`
	URL            string               `json:"url"`
	DataCenters    []NamedObject        `json:"data_centers"`
	Clusters       []ClusterState       `json:"clusters"`
	Hosts          []HostState          `json:"hosts"`
	AffinityGroups []AffinityGroupState `json:"affinity_groups"`
	Tags           []TagState           `json:"tags"`
	Networks       []NetworkState       `json:"networks"`
	VnicProfiles   []VnicProfileState   `json:"vnic_profiles"`
	StorageDomains []StorageDomainState `json:"storage_domains"`
	Templates      []TemplateState      `json:"templates"`
	VMs            []VMState            `json:"vms"`
	FloatingDisks  []DiskState          `json:"floating_disks"`
	Jobs           []JobState           `json:"jobs"`
	Settings       Settings             `json:"settings"`
	Counters       Counters             `json:"counters"`
}

// NamedObject is an id and a name.
type NamedObject struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// ClusterState describes a cluster.
type ClusterState struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	DataCenter string   `json:"data_center"`
	Networks   []string `json:"networks"`
}

// NetworkState describes a logical network.
type NetworkState struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	DataCenter string `json:"data_center"`
}

// VnicProfileState describes a vNIC profile.
type VnicProfileState struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Network    string `json:"network"`
	NetworkID  string `json:"network_id"`
	DataCenter string `json:"data_center"`
}

// StorageDomainState describes a storage domain.
type StorageDomainState struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	DataCenter string `json:"data_center"`
	Type       string `json:"type"`
	Status     string `json:"status"`
	FreeGB     int64  `json:"free_gb"`
	UsedGB     int64  `json:"used_gb"`
	// StorageType is nfs, glusterfs, posixfs, localfs (file) or iscsi, fcp (block).
	StorageType string `json:"storage_type"`
}

// TemplateState describes a template version.
type TemplateState struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version int    `json:"version"`
	Cluster string `json:"cluster,omitempty"`
	OSType  string `json:"os_type"`
	Status  string `json:"status"`
	// NoGuestAgent is true when the template's image has no guest agent.
	NoGuestAgent bool        `json:"no_guest_agent,omitempty"`
	Disks        []DiskState `json:"disks"`
}

// JobState describes a job recorded for a correlation id.
type JobState struct {
	ID            string    `json:"id"`
	CorrelationID string    `json:"correlation_id"`
	Description   string    `json:"description"`
	Status        string    `json:"status"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
}

// Settings are the current run-time settings.
type Settings struct {
	Username     string   `json:"username"`
	TokenTTL     Duration `json:"token_ttl"`
	ActiveTokens int      `json:"active_tokens"`
	GuestAgent   bool     `json:"guest_agent"`
	// IgnoreFollow is true while follow= is ignored.
	IgnoreFollow bool `json:"ignore_follow"`
	// GuestInterfaces is what guest agents report besides lo and ethN.
	GuestInterfaces GuestInterfaces `json:"guest_interfaces"`
	RandomSeed      int64           `json:"random_seed"`
	Timings         Timings         `json:"timings"`
	Latency         []LatencyRule   `json:"latency"`
	Faults          []FaultRule     `json:"faults"`
}

func diskState(d *disk, now time.Time) DiskState {
	ds := DiskState{ID: d.id, Alias: d.alias, SizeGB: ceilGiB(d.visibleSize(now)), Format: d.format, Sparse: d.sparse,
		StorageDomain: d.sd.name, CopiesOn: sdNames(d.copies), Status: d.status(now), Bootable: d.bootable, Active: d.isActive(now),
		Interface: d.iface, FromTemplate: d.fromTemplate,
		Description: d.description, Backup: cmp.Or(d.backup, "none"), WipeAfterDelete: d.wipe}
	if d.vm != nil {
		ds.VM = d.vm.id
	}
	return ds
}

func vmState(inv *inventory, v *vm, now time.Time, guestAgent bool) VMState {
	st := VMState{ID: v.id, Name: v.name, Cluster: v.cluster.name, NoGuestAgent: v.noAgent, Template: v.template.name,
		TemplateVersion: v.template.version, Status: v.status(now), Clone: v.clone,
		Comment: v.comment, Description: v.description, CustomScript: v.customScript, HostName: v.hostName,
		OSType: v.osType, Type: v.vmType, Sockets: v.sockets, Cores: v.cores, Threads: v.thr,
		MemoryMB: v.memory / mib, GuaranteedMB: v.guaranteed / mib, CreatedAt: v.created,
		Disks: []DiskState{}, NICs: []NICState{}, IPs: []string{}, HighlyAvailable: v.ha}
	st.VMSettings = vmSettings(v, now) // ha.go
	if h := v.runningOn(now); h != nil {
		st.Host = h.name
	}
	st.Tags = vmTagNames(v)
	st.Guest = GuestState{Boots: v.boots, Hung: v.hung}
	st.MDevTypes = inv.mdevTypes(v)
	for _, hd := range v.hostDevs {
		st.HostDevices = append(st.HostDevices, hd.dev.name)
	}
	for _, d := range v.disks {
		st.Disks = append(st.Disks, diskState(d, now))
	}
	reports := v.reportsIPs(now, guestAgent)
	idx := 0
	for _, n := range v.nics {
		ns := NICState{ID: n.id, Name: n.name, MAC: n.mac, Interface: n.iface, Plugged: n.plugged, IP: n.ipString()}
		if n.profile != nil {
			ns.VnicProfile = n.profile.name
		}
		st.NICs = append(st.NICs, ns)
		if n.plugged {
			if reports {
				st.IPs = append(st.IPs, v.nicIPv4s(fmt.Sprintf("eth%d", idx), n)...)
			}
			idx++
		}
	}
	return st
}

// VM returns the state of a VM by id.
func (s *Simulator) VM(id string) (VMState, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := s.inv.vms[id]
	if v == nil {
		return VMState{}, false
	}
	return vmState(s.inv, v, time.Now(), s.guestAgent), true
}

// VMByName returns the state of a VM by exact name.
func (s *Simulator) VMByName(name string) (VMState, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := s.inv.vmByExactName(name)
	if v == nil {
		return VMState{}, false
	}
	return vmState(s.inv, v, time.Now(), s.guestAgent), true
}

// VMs returns the state of every VM, sorted by name.
func (s *Simulator) VMs() []VMState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.vmStates(time.Now())
}

func (s *Simulator) vmStates(now time.Time) []VMState {
	out := make([]VMState, 0, len(s.inv.vms))
	for _, v := range s.inv.vms {
		out = append(out, vmState(s.inv, v, now, s.guestAgent))
	}
	slices.SortFunc(out, func(a, b VMState) int { return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID)) })
	return out
}

// StorageDomainFreeGB returns the free space of a storage domain in GiB (-1 if unknown).
func (s *Simulator) StorageDomainFreeGB(name string) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if sd := s.inv.sdByName[name]; sd != nil {
		return sd.freeGB
	}
	return -1
}

// Requests returns a copy of the request counters by method, path template and status.
func (s *Simulator) Requests() map[RequestKey]int {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	out := make(map[RequestKey]int, len(s.stats.requests))
	for k, v := range s.stats.requests {
		out[k] = v
	}
	return out
}

// RequestCount counts requests for a method and path template, all statuses.
// An empty method counts every method.
func (s *Simulator) RequestCount(method, pathTemplate string) int {
	p := normalisePath(pathTemplate)
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	n := 0
	for k, v := range s.stats.requests {
		if (method == "" || strings.EqualFold(k.Method, method)) && k.Path == p {
			n += v
		}
	}
	return n
}

// TotalRequests counts API requests (SSO requests excluded).
func (s *Simulator) TotalRequests() int {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return s.stats.total
}

// Logins counts successful SSO token grants.
func (s *Simulator) Logins() int {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return s.stats.logins
}

// FailedLogins counts refused SSO token requests.
func (s *Simulator) FailedLogins() int {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return s.stats.failedLogins
}

// MaxInFlight is the highest number of concurrent API requests seen since
// the last ResetCounters.
func (s *Simulator) MaxInFlight() int { return int(s.stats.maxInflight.Load()) }

// Counters returns a snapshot of all counters (what GET /sim/counters serves).
func (s *Simulator) Counters() Counters { return s.stats.snapshot() }

// RequestLog returns the last 100,000 requests, oldest first.
func (s *Simulator) RequestLog() []RequestRecord { return s.stats.logCopy() }

// ResetCounters zeroes the counters, the login counts, MaxInFlight and the request log.
func (s *Simulator) ResetCounters() { s.stats.reset() }

// Dump returns the full state.
func (s *Simulator) Dump() State {
	now := time.Now()
	st := State{Time: now, URL: s.url}
	s.mu.RLock()
	inv := s.inv
	for _, dc := range inv.dcs {
		st.DataCenters = append(st.DataCenters, NamedObject{dc.id, dc.name})
	}
	for _, c := range inv.clusters {
		cs := ClusterState{ID: c.id, Name: c.name, DataCenter: c.dc.name}
		for _, n := range c.networks {
			cs.Networks = append(cs.Networks, n.name)
		}
		st.Clusters = append(st.Clusters, cs)
	}
	st.Hosts = []HostState{}
	for _, h := range inv.hosts {
		st.Hosts = append(st.Hosts, hostState(h, now))
	}
	st.AffinityGroups = s.groupStates("", now)
	st.Tags = s.tagStates()
	for _, n := range inv.networks {
		st.Networks = append(st.Networks, NetworkState{n.id, n.name, n.dc.name})
	}
	for _, p := range inv.profiles {
		st.VnicProfiles = append(st.VnicProfiles, VnicProfileState{p.id, p.name, p.net.name, p.net.id, p.net.dc.name})
	}
	for _, sd := range inv.sds {
		st.StorageDomains = append(st.StorageDomains, StorageDomainState{sd.id, sd.name, sd.dc.name, sd.typ, sd.status, sd.freeGB, sd.usedGB, sd.storageType})
	}
	for _, t := range inv.templates {
		ts := TemplateState{ID: t.id, Name: t.name, Version: t.version, OSType: t.osType, Status: t.status,
			NoGuestAgent: t.noAgent, Disks: []DiskState{}}
		if t.cluster != nil {
			ts.Cluster = t.cluster.name
		}
		for _, d := range t.disks {
			ts.Disks = append(ts.Disks, diskState(d, now))
		}
		st.Templates = append(st.Templates, ts)
	}
	st.VMs = s.vmStates(now)
	st.FloatingDisks = []DiskState{}
	for _, d := range inv.disks {
		if d.vm == nil {
			st.FloatingDisks = append(st.FloatingDisks, diskState(d, now))
		}
	}
	slices.SortFunc(st.FloatingDisks, func(a, b DiskState) int {
		return cmp.Or(strings.Compare(a.Alias, b.Alias), strings.Compare(a.ID, b.ID))
	})
	st.Jobs = []JobState{}
	for _, j := range inv.jobs {
		st.Jobs = append(st.Jobs, JobState{j.id, j.corr, j.description, j.status(now), j.start, j.end})
	}
	st.Settings.Timings, st.Settings.GuestAgent = s.timings, s.guestAgent
	st.Settings.IgnoreFollow, st.Settings.GuestInterfaces = s.ignoreFollow, s.guestIfaces
	s.mu.RUnlock()

	s.authMu.RLock()
	st.Settings.Username, st.Settings.TokenTTL = s.username, Duration(s.ttl)
	for _, t := range s.tokens {
		if s.ttl <= 0 || now.Sub(t.issued) < s.ttl {
			st.Settings.ActiveTokens++
		}
	}
	s.authMu.RUnlock()
	st.Settings.RandomSeed = s.built.RandomSeed
	st.Settings.Latency, st.Settings.Faults = s.rules.snapshot()
	st.Counters = s.stats.snapshot()
	return st
}

func sdNames(sds []*storageDomain) []string {
	var out []string
	for _, sd := range sds {
		out = append(out, sd.name)
	}
	return out
}
