package ovirtsim

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Sentinel errors returned (wrapped) by the runtime-control methods.
var (
	// ErrNotFound means the named VM, disk, template or other object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the object is in a state that forbids the operation (locked, running, in use).
	ErrConflict = errors.New("conflict")
	// ErrInvalid means the input is invalid.
	ErrInvalid = errors.New("invalid")
)

const (
	blankTemplateID = "00000000-0000-0000-0000-000000000000"
	gib             = int64(1) << 30
	mib             = int64(1) << 20
	maxJobs         = 10000

	// RNG streams: inventory ids and runtime ids are separate so that the
	// runtime sequence does not depend on the inventory size.
	streamInventory = 0x1a2b3c4d
	streamRuntime   = 0x5e6f7a8b
	// Hosts have their own stream, so that adding them left every other id as it was.
	streamHosts = 0x2c3d4e5f
)

type dataCenter struct {
	id, name string
	level    int // compatibility level 4.<level>: the lowest of its clusters'
}

type network struct {
	id, name string
	dc       *dataCenter
}

type cluster struct {
	id, name string
	dc       *dataCenter
	networks []*network
	index    int // 1-based, used for IP addresses
	level    int // compatibility level 4.<level> (Cluster.Version)
}

type storageDomain struct {
	id, name       string
	dc             *dataCenter
	typ, status    string
	freeGB, usedGB int64
	storageType    string // nfs, iscsi, fcp, ... (diskconfig.go)
	wipe           bool   // wipe_after_delete: the default of the domain's new disks
}

type vnicProfile struct {
	id, name string
	net      *network
	private  bool // Everyone has no VnicProfileUser role on it
}

type template struct {
	id, name                string
	version                 int
	cluster                 *cluster // nil for Blank
	osType                  string
	sockets, cores, threads int
	memoryMB                int64
	status                  string
	disks                   []*disk
	nics                    []*templateNIC
	created                 time.Time
	runtime                 bool         // added after Build via AddTemplate
	noAgent                 bool         // the image has no guest agent
	customProps             []customProp // custom_properties, as stored (customprops.go)
}

type templateNIC struct {
	id, name string
	profile  *vnicProfile
}

type disk struct {
	id, alias    string
	description  string
	sizeBytes    int64 // the size the disk has, or will have once the lock ends
	oldSize      int64 // the size shown while locked by an update; 0: none
	format       string
	sparse       bool
	sd           *storageDomain
	copies       []*storageDomain // template disks: further domains holding a copy
	bootable     bool
	iface        string
	active       bool
	lockedUntil  time.Time
	vm           *vm       // attached to, nil when floating
	template     *template // owner when this is a template disk
	fromTemplate bool
	consumedGB   int64
	created      time.Time
	backup       string    // "none" or "incremental" (DiskBackup); "" is none
	wipe         bool      // wipe_after_delete
	plugAt       time.Time // a hot plug pending until then (diskconfig.go); zero: none
}

func (d *disk) status(now time.Time) string {
	if now.Before(d.lockedUntil) {
		return "locked"
	}
	return "ok"
}

func (d *disk) sizeGB() int64 { return ceilGiB(d.sizeBytes) }

// visibleSize is the provisioned size clients see: during the lock of an
// update the old one (ExtendImageSize has not finished), then the new one.
func (d *disk) visibleSize(now time.Time) int64 {
	if d.oldSize > 0 && now.Before(d.lockedUntil) {
		return d.oldSize
	}
	return d.sizeBytes
}

func ceilGiB(b int64) int64 { return (b + gib - 1) / gib }

type nic struct {
	id, name, mac, iface string
	profile              *vnicProfile
	plugged, linked      bool
	ipv4                 [4]byte
	rdID                 string // id of the reported device
}

type powerPhase int

const (
	phaseDown powerPhase = iota
	phaseStarting
	phaseStopping
	phaseRefusing  // a guest that ignores ACPI: powering_down, then up again
	phaseRebooting // reboot_in_progress for rb, then up
)

type vm struct {
	id, name             string
	seq                  int
	cluster              *cluster
	template             *template
	clone                bool
	comment, description string
	customScript         string
	hostName             string
	initUser, sshKeys    string            // initialization.user_name, authorized_ssh_keys
	initNets             []initNetwork     // initialization.nic_configurations
	dnsServers           string            // initialization.dns_servers (space-separated)
	dnsSearch            string            // initialization.dns_search (space-separated)
	initialized          bool              // has run once: initialization is not applied again
	init                 *VMInitialization // the last payload a start composed, nil without one
	runOnce, volatileRun bool              // this run was started with run once (volatile: a reboot is cold)
	osType, vmType       string
	sockets, cores, thr  int
	memory, guaranteed   int64
	maxMemory            int64
	disks                []*disk
	nics                 []*nic
	created, unlockAt    time.Time
	power                powerPhase
	phaseAt              time.Time
	wfl, pu, pd, gaDelay time.Duration
	rb                   time.Duration // with phaseRebooting: how long reboot_in_progress lasts
	startTime, stopTime  time.Time
	noAgent              bool              // no guest agent (template or SetVMGuestAgent)
	ignoresACPI          bool              // the guest ignores ACPI shutdown requests
	upAt                 time.Time         // with phaseRefusing: when the VM first came up
	host                 *host             // where the VM runs or last ran (see runningOn)
	ha                   bool              // high_availability.enabled (VmBase.autoStartup)
	guestRun             int               // numbers the boots of a real guest (guests.go)
	runDrive             map[string]string // the config drive attached for this run (real guests)
	haPriority           int64             // high_availability.priority
	perf                 vmPerf            // performance, lease, custom properties, exit (performance.go)
	noVirtioScsi         bool              // created with virtio_scsi.enabled false (diskconfig.go)
	tags                 []*tag            // assigned tags, tags_vm_map (vmtags.go)
	hostDevs             []*vmHostDev      // HOSTDEV devices (hostdevices.go)
	mdevs                []vmMdev          // MDEV devices, 4.5 (hostdevices.go)
	boots                int               // boots of the guest so far (reset.go)
	hung                 bool              // the guest hangs until its next boot (reset.go)
}

// running reports whether the engine counts the VM as running on its host
// (run_on_vds is set): every status but down and image_locked.
func (v *vm) running(now time.Time) bool {
	st := v.status(now)
	return st != "down" && st != "image_locked"
}

// runningOn is the host the VM runs on now, nil when it is not running.
func (v *vm) runningOn(now time.Time) *host {
	if v.host != nil && v.running(now) {
		return v.host
	}
	return nil
}

// status computes the engine status from the recorded timestamps: no
// goroutine per VM, so idle VMs cost nothing.
func (v *vm) status(now time.Time) string {
	if now.Before(v.unlockAt) {
		return "image_locked"
	}
	switch v.power {
	case phaseStarting:
		e := now.Sub(v.phaseAt)
		if e < v.wfl {
			return "wait_for_launch"
		}
		if e < v.wfl+v.pu {
			return "powering_up"
		}
		return "up"
	case phaseStopping:
		if now.Sub(v.phaseAt) < v.pd {
			return "powering_down"
		}
	case phaseRefusing:
		if now.Sub(v.phaseAt) < v.pd {
			return "powering_down"
		}
		return "up"
	case phaseRebooting:
		if now.Sub(v.phaseAt) < v.rb {
			return "reboot_in_progress"
		}
		return "up"
	}
	return "down"
}

// upSince reports when the VM reached "up", if it is up now.
func (v *vm) upSince(now time.Time) (time.Time, bool) {
	if v.status(now) != "up" {
		return time.Time{}, false
	}
	if v.power == phaseRefusing {
		return v.upAt, true
	}
	if v.power == phaseRebooting {
		return v.phaseAt.Add(v.rb), true
	}
	return v.phaseAt.Add(v.wfl + v.pu), true
}

func (v *vm) reportsIPs(now time.Time, guestAgent bool) bool {
	t, ok := v.upSince(now)
	return ok && guestAgent && !v.noAgent && !now.Before(t.Add(v.gaDelay))
}

func (v *vm) attachment(diskID string) *disk {
	for _, d := range v.disks {
		if d.id == diskID {
			return d
		}
	}
	return nil
}

func (v *vm) nicByID(id string) *nic {
	for _, n := range v.nics {
		if n.id == id {
			return n
		}
	}
	return nil
}

type job struct {
	id, corr, description string
	start, end            time.Time
}

func (j *job) status(now time.Time) string {
	if now.Before(j.end) {
		return "started"
	}
	return "finished"
}

// inventory is the whole mutable engine state. It is guarded by Simulator.mu.
type inventory struct {
	rng *rand.Rand
	// guests and guestRuntime are set when the VMs boot real guests (guests.go).
	guests       *guestQueue
	guestRuntime GuestRuntime

	dcs           []*dataCenter
	dcByName      map[string]*dataCenter
	networks      []*network
	clusters      []*cluster
	clusterByName map[string]*cluster
	sds           []*storageDomain
	sdByName      map[string]*storageDomain
	profiles      []*vnicProfile
	templates     []*template
	blank         *template
	vms           map[string]*vm
	vmsByName     map[string][]*vm // lower-cased name
	disks         map[string]*disk // VM and floating disks
	tdisks        map[string]*disk // template disks
	jobs          []*job
	jobsByCorr    map[string][]*job
	hosts         []*host
	hostByName    map[string]*host
	hostRng       *rand.Rand
	groups        []*affinityGroup // affinity groups, in creation order
	// tags are the tags' database rows in creation order (the root is not one), rootTag the
	// root, tagNames TagsDirector's by-name map (tags.go).
	tags     []*tag
	rootTag  *tag
	tagNames map[string]*tag

	byID map[string]any // every inventory object except VMs, disks and jobs

	vmSeq, macSeq int
	ipSeq         map[*cluster]int

	version    engineVersion     // reported by GET /api, decides the vCPU maximum
	maxNameLen int               // MaxVmNameLength
	vmProps    *vmPropertyConfig // PredefinedVMProperties and UserDefinedVMProperties (customprops.go)
}

func newInventory(seed *Seed, now time.Time) (*inventory, error) {
	rs := uint64(seed.RandomSeed)
	inv := &inventory{
		rng:           rand.New(rand.NewPCG(rs, streamInventory)),
		dcByName:      map[string]*dataCenter{},
		clusterByName: map[string]*cluster{},
		sdByName:      map[string]*storageDomain{},
		vms:           map[string]*vm{},
		vmsByName:     map[string][]*vm{},
		disks:         map[string]*disk{},
		tdisks:        map[string]*disk{},
		jobsByCorr:    map[string][]*job{},
		byID:          map[string]any{},
		ipSeq:         map[*cluster]int{},
		maxNameLen:    seed.MaxVMNameLength,
		hostByName:    map[string]*host{},
		hostRng:       rand.New(rand.NewPCG(rs, streamHosts)),
		rootTag:       newRootTag(),
	}
	inv.tagNames = map[string]*tag{inv.rootTag.name: inv.rootTag}
	if inv.maxNameLen <= 0 {
		inv.maxNameLen = defaultMaxVMNameLength
	}
	ver := seed.Version
	if ver == "" {
		ver = defaultVersion
	}
	v, err := parseVersion(ver)
	if err != nil {
		return nil, err
	}
	inv.version = v
	if inv.vmProps, err = newVMPropertyConfig(seed.PredefinedVMProperties, seed.UserDefinedVMProperties, v); err != nil {
		return nil, err
	}
	inv.blank = &template{id: blankTemplateID, name: "Blank", version: 1, osType: "other",
		sockets: 1, cores: 1, threads: 1, memoryMB: 1024, status: "ok", created: now}
	inv.templates = append(inv.templates, inv.blank)
	inv.byID[blankTemplateID] = inv.blank
	for _, c := range seed.Clusters {
		if err := inv.addCluster(c); err != nil {
			return nil, err
		}
	}
	for _, sd := range seed.StorageDomains {
		if err := inv.addStorageDomain(sd); err != nil {
			return nil, err
		}
	}
	for _, p := range seed.VnicProfiles {
		if err := inv.addVnicProfile(p); err != nil {
			return nil, err
		}
	}
	for _, t := range seed.Templates {
		if err := inv.addTemplate(t, now, false); err != nil {
			return nil, err
		}
	}
	for i, c := range seed.Clusters {
		if err := inv.addSeedHosts(inv.clusters[i], c); err != nil {
			return nil, err
		}
	}
	// Runtime ids come from their own stream so that they do not depend on
	// how many ids the inventory used.
	inv.rng = rand.New(rand.NewPCG(rs, streamRuntime))
	return inv, nil
}

// newID returns a random (version 4 format) UUID from the seeded RNG.
func (inv *inventory) newID() string { return uuid4(inv.rng) }

// uuid4 returns a random (version 4 format) UUID from r.
func uuid4(r *rand.Rand) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], r.Uint64())
	binary.BigEndian.PutUint64(b[8:], r.Uint64())
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

func (inv *inventory) newMAC() string {
	inv.macSeq++
	n := inv.macSeq
	return fmt.Sprintf("56:6f:%02x:%02x:%02x:%02x", byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// newIPv4 hands out 10.<cluster index>.<hi>.<lo>, in order of NIC creation per cluster.
func (inv *inventory) newIPv4(c *cluster) [4]byte {
	n := inv.ipSeq[c]
	inv.ipSeq[c] = n + 1
	return [4]byte{10, byte(c.index), byte(1 + n/250), byte(2 + n%250)}
}

func (inv *inventory) dataCenter(name string) *dataCenter {
	if dc, ok := inv.dcByName[name]; ok {
		return dc
	}
	dc := &dataCenter{id: inv.newID(), name: name, level: inv.version.maxClusterLevel()}
	inv.dcs = append(inv.dcs, dc)
	inv.dcByName[name] = dc
	inv.byID[dc.id] = dc
	return dc
}

func (inv *inventory) network(dc *dataCenter, name string) *network {
	for _, n := range inv.networks {
		if n.dc == dc && n.name == name {
			return n
		}
	}
	n := &network{id: inv.newID(), name: name, dc: dc}
	inv.networks = append(inv.networks, n)
	inv.byID[n.id] = n
	return n
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func (inv *inventory) addCluster(c Cluster) error {
	if c.Name == "" {
		return invalidf("cluster without a name")
	}
	if _, dup := inv.clusterByName[c.Name]; dup {
		return invalidf("duplicate cluster %q", c.Name)
	}
	if c.DataCenter == "" {
		c.DataCenter = "Default"
	}
	if len(c.Networks) == 0 {
		c.Networks = []string{"ovirtmgmt"}
	}
	level, err := inv.clusterLevel(c)
	if err != nil {
		return err
	}
	dc := inv.dataCenter(c.DataCenter)
	dc.level = min(dc.level, level)
	cl := &cluster{id: inv.newID(), name: c.Name, dc: dc, index: len(inv.clusters) + 1, level: level}
	for _, n := range c.Networks {
		if n == "" {
			return invalidf("cluster %q: empty network name", c.Name)
		}
		nw := inv.network(dc, n)
		if !slices.Contains(cl.networks, nw) {
			cl.networks = append(cl.networks, nw)
		}
	}
	inv.clusters = append(inv.clusters, cl)
	inv.clusterByName[cl.name] = cl
	inv.byID[cl.id] = cl
	return nil
}

func (inv *inventory) addStorageDomain(sd StorageDomain) error {
	if sd.Name == "" {
		return invalidf("storage domain without a name")
	}
	if _, dup := inv.sdByName[sd.Name]; dup {
		return invalidf("duplicate storage domain %q", sd.Name)
	}
	if sd.DataCenter == "" {
		sd.DataCenter = "Default"
	}
	if sd.Type == "" {
		sd.Type = "data"
	}
	if !slices.Contains([]string{"data", "iso", "export", "image", "volume", "managed_block_storage"}, sd.Type) {
		return invalidf("storage domain %q: unknown type %q", sd.Name, sd.Type)
	}
	if sd.Status == "" {
		sd.Status = "active"
	}
	if sd.FreeGB < 0 {
		return invalidf("storage domain %q: negative free_gb", sd.Name)
	}
	st, err := storageTypeOf(sd)
	if err != nil {
		return err
	}
	s := &storageDomain{id: inv.newID(), name: sd.Name, dc: inv.dataCenter(sd.DataCenter),
		typ: sd.Type, status: sd.Status, freeGB: sd.FreeGB, storageType: st, wipe: sd.WipeAfterDelete}
	inv.sds = append(inv.sds, s)
	inv.sdByName[s.name] = s
	inv.byID[s.id] = s
	return nil
}

func (inv *inventory) addVnicProfile(p VnicProfile) error {
	if p.Name == "" || p.Network == "" {
		return invalidf("vNIC profile needs a name and a network (got %+v)", p)
	}
	if p.DataCenter == "" {
		p.DataCenter = "Default"
	}
	nw := inv.network(inv.dataCenter(p.DataCenter), p.Network)
	for _, e := range inv.profiles {
		if e.name == p.Name && e.net == nw {
			return invalidf("duplicate vNIC profile %q on network %q", p.Name, p.Network)
		}
	}
	vp := &vnicProfile{id: inv.newID(), name: p.Name, net: nw, private: p.Private}
	inv.profiles = append(inv.profiles, vp)
	inv.byID[vp.id] = vp
	return nil
}

func (inv *inventory) addTemplate(t Template, now time.Time, runtime bool) error {
	if t.Name == "" {
		return invalidf("template without a name")
	}
	var cl *cluster
	switch {
	case t.Cluster != "":
		cl = inv.clusterByName[t.Cluster]
		if cl == nil {
			return invalidf("template %q: unknown cluster %q", t.Name, t.Cluster)
		}
	case len(inv.clusters) > 0:
		cl = inv.clusters[0]
	default:
		return invalidf("template %q: no cluster to put it in", t.Name)
	}
	if t.Version == 0 {
		t.Version = 1
	}
	if t.Version < 0 {
		return invalidf("template %q: negative version", t.Name)
	}
	for _, e := range inv.templates {
		if e.name == t.Name && e.version == t.Version && e.cluster != nil && e.cluster.dc == cl.dc {
			return invalidf("duplicate template %q version %d", t.Name, t.Version)
		}
	}
	if t.OSType == "" {
		t.OSType = "other_linux"
	}
	t.Sockets, t.Cores, t.Threads = max(t.Sockets, 1), max(t.Cores, 1), max(t.Threads, 1)
	if t.MemoryMB <= 0 {
		t.MemoryMB = 1024
	}
	if t.Status == "" {
		t.Status = "ok"
	}
	if !slices.Contains([]string{"ok", "locked", "illegal"}, t.Status) {
		return invalidf("template %q: unknown status %q", t.Name, t.Status)
	}
	tp := &template{id: inv.newID(), name: t.Name, version: t.Version, cluster: cl, osType: t.OSType,
		sockets: t.Sockets, cores: t.Cores, threads: t.Threads, memoryMB: t.MemoryMB, status: t.Status,
		created: now, runtime: runtime, noAgent: t.NoGuestAgent}
	if len(t.CustomProperties) > 0 {
		props, err := inv.vmProps.templateProps(t.Name, t.CustomProperties)
		if err != nil {
			return err
		}
		tp.customProps = props
	}
	for i, td := range t.Disks {
		if td.Alias == "" {
			td.Alias = fmt.Sprintf("%s_Disk%d", t.Name, i+1)
		}
		if td.SizeGB <= 0 {
			return invalidf("template %q disk %q: size_gb must be positive", t.Name, td.Alias)
		}
		if td.Format == "" {
			td.Format = "cow"
		}
		if td.Format != "cow" && td.Format != "raw" {
			return invalidf("template %q disk %q: format must be cow or raw", t.Name, td.Alias)
		}
		if td.Interface == "" {
			td.Interface = "virtio_scsi"
		}
		var sd *storageDomain
		if td.StorageDomain != "" {
			sd = inv.sdByName[td.StorageDomain]
			if sd == nil {
				return invalidf("template %q disk %q: unknown storage domain %q", t.Name, td.Alias, td.StorageDomain)
			}
		} else {
			for _, s := range inv.sds {
				if s.dc == cl.dc && s.typ == "data" && s.status == "active" {
					sd = s
					break
				}
			}
			if sd == nil {
				return invalidf("template %q disk %q: no active data storage domain in data center %q", t.Name, td.Alias, cl.dc.name)
			}
		}
		if sd.dc != cl.dc {
			return invalidf("template %q disk %q: storage domain %q is not in data center %q", t.Name, td.Alias, sd.name, cl.dc.name)
		}
		d := &disk{id: inv.newID(), alias: td.Alias, sizeBytes: td.SizeGB * gib, format: td.Format,
			sparse: td.Format == "cow", sd: sd, bootable: td.Bootable, iface: td.Interface, active: true,
			template: tp, created: now}
		for _, name := range td.StorageDomains {
			c := inv.sdByName[name]
			switch {
			case c == nil:
				return invalidf("template %q disk %q: unknown storage domain %q", t.Name, td.Alias, name)
			case c.dc != cl.dc:
				return invalidf("template %q disk %q: storage domain %q is not in data center %q", t.Name, td.Alias, name, cl.dc.name)
			case c == sd || slices.Contains(d.copies, c):
				return invalidf("template %q disk %q: storage domain %q named twice", t.Name, td.Alias, name)
			}
			d.copies = append(d.copies, c)
		}
		tp.disks = append(tp.disks, d)
		inv.tdisks[d.id] = d
	}
	// Like a template sealed from a VM with one NIC on the management network.
	if len(cl.networks) > 0 {
		for _, p := range inv.profiles {
			if p.net == cl.networks[0] {
				tp.nics = append(tp.nics, &templateNIC{id: inv.newID(), name: "nic1", profile: p})
				break
			}
		}
	}
	inv.templates = append(inv.templates, tp)
	inv.byID[tp.id] = tp
	return nil
}

// removeTemplates removes every version of the named template.
func (inv *inventory) removeTemplates(name string) error {
	var victims []*template
	for _, t := range inv.templates {
		if t.name == name && t != inv.blank {
			victims = append(victims, t)
		}
	}
	if len(victims) == 0 {
		return fmt.Errorf("template %q: %w", name, ErrNotFound)
	}
	for _, v := range inv.vms {
		if !v.clone && slices.Contains(victims, v.template) {
			return fmt.Errorf("template %q is used by thin VM %q: %w", name, v.name, ErrConflict)
		}
	}
	inv.templates = slices.DeleteFunc(inv.templates, func(t *template) bool { return slices.Contains(victims, t) })
	for _, t := range victims {
		delete(inv.byID, t.id)
		for _, d := range t.disks {
			delete(inv.tdisks, d.id)
		}
	}
	return nil
}

// baseTemplate is the lowest version sharing t's name (and data center).
func (inv *inventory) baseTemplate(t *template) *template {
	base := t
	for _, e := range inv.templates {
		if e.name == t.name && e.cluster != nil && t.cluster != nil && e.cluster.dc == t.cluster.dc && e.version < base.version {
			base = e
		}
	}
	return base
}

func (inv *inventory) template(id string) *template {
	t, _ := inv.byID[id].(*template)
	return t
}

func (inv *inventory) cluster(id string) *cluster {
	c, _ := inv.byID[id].(*cluster)
	return c
}

func (inv *inventory) storageDomain(id string) *storageDomain {
	s, _ := inv.byID[id].(*storageDomain)
	return s
}

func (inv *inventory) profile(id string) *vnicProfile {
	p, _ := inv.byID[id].(*vnicProfile)
	return p
}

func (inv *inventory) networkByID(id string) *network {
	n, _ := inv.byID[id].(*network)
	return n
}

func (inv *inventory) dcByID(id string) *dataCenter {
	d, _ := inv.byID[id].(*dataCenter)
	return d
}

// anyDisk finds a VM, floating or template disk.
func (inv *inventory) anyDisk(id string) *disk {
	if d, ok := inv.disks[id]; ok {
		return d
	}
	return inv.tdisks[id]
}

func (inv *inventory) indexVMName(v *vm) {
	k := strings.ToLower(v.name)
	inv.vmsByName[k] = append(inv.vmsByName[k], v)
}

func (inv *inventory) unindexVMName(v *vm) {
	k := strings.ToLower(v.name)
	l := slices.DeleteFunc(inv.vmsByName[k], func(e *vm) bool { return e == v })
	if len(l) == 0 {
		delete(inv.vmsByName, k)
	} else {
		inv.vmsByName[k] = l
	}
}

func (inv *inventory) vmByExactName(name string) *vm {
	for _, v := range inv.vmsByName[strings.ToLower(name)] {
		if v.name == name {
			return v
		}
	}
	return nil
}

func (inv *inventory) addJob(corr, description string, now, end time.Time) {
	if corr == "" {
		return
	}
	j := &job{id: inv.newID(), corr: corr, description: description, start: now, end: end}
	inv.jobs = append(inv.jobs, j)
	inv.jobsByCorr[corr] = append(inv.jobsByCorr[corr], j)
	if len(inv.jobs) > 2*maxJobs {
		inv.jobs = slices.Clone(inv.jobs[len(inv.jobs)-maxJobs:])
		inv.jobsByCorr = map[string][]*job{}
		for _, j := range inv.jobs {
			inv.jobsByCorr[j.corr] = append(inv.jobsByCorr[j.corr], j)
		}
	}
}

func (inv *inventory) jobByID(id string) *job {
	for _, j := range inv.jobs {
		if j.id == id {
			return j
		}
	}
	return nil
}

// releaseDisk deletes a disk and returns its space.
func (inv *inventory) releaseDisk(d *disk) {
	d.sd.freeGB += d.consumedGB
	d.sd.usedGB -= d.consumedGB
	delete(inv.disks, d.id)
	d.vm = nil
}

func (inv *inventory) consume(sd *storageDomain, gb int64) {
	sd.freeGB -= gb
	sd.usedGB += gb
}
