package ovirtsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string such as "1h30m" or "250ms". Reading also accepts a JSON number of
// nanoseconds.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string ("30s") or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("duration: %w", err)
		}
		if s == "" {
			*d = 0
			return nil
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string such as \"30s\" or integer nanoseconds: %w", b, err)
	}
	*d = Duration(n)
	return nil
}

// Cluster is an oVirt cluster in the seed inventory.
type Cluster struct {
	// Name is the cluster name, unique in the engine.
	Name string `json:"name"`
	// DataCenter is the name of the data center the cluster belongs to. Default "Default".
	DataCenter string `json:"data_center,omitempty"`
	// Networks lists the logical networks attached to the cluster. Default ["ovirtmgmt"].
	Networks []string `json:"networks,omitempty"`
	// Hosts are the hypervisors of the cluster. Empty means three default
	// hosts, "<cluster>-host1" to "<cluster>-host3" (the cluster name in lower
	// case), 2 TiB each and up, unless NoHosts is set.
	Hosts []Host `json:"hosts,omitempty"`
	// NoHosts makes a cluster without any host: no VM of it can start until
	// a host is added (AddHost, POST /sim/hosts).
	NoHosts bool `json:"no_hosts,omitempty"`
	// Version is the cluster compatibility level, "4.2" to the engine's highest ("4.6" on a
	// 4.4 engine, "4.7" from 4.5), which is the default. It decides what needs a level (reset
	// needs 4.6).
	Version string `json:"version,omitempty"`
}

// Host is a hypervisor host of a cluster in the seed inventory.
type Host struct {
	// Name is the host name, unique in the engine.
	Name string `json:"name"`
	// MemoryGB is the physical memory in GiB that VMs may use. Default 2048.
	MemoryGB int64 `json:"memory_gb,omitempty"`
	// Status is the host status: "up" (default), "maintenance",
	// "non_responsive", "down", ... (the API model's HostStatus values).
	Status string `json:"status,omitempty"`
	// HugePages are the host's static huge pages (default none): a VM backed by huge pages
	// (its hugepages custom property) starts only where enough of its size are free.
	HugePages []HugePages `json:"hugepages,omitempty"`
	// DevicePassthrough is the host's device passthrough support (IOMMU enabled in the kernel):
	// a VM with PCI host devices starts only on such a host.
	DevicePassthrough bool `json:"device_passthrough,omitempty"`
	// Devices are the host's devices as VDSM reports them (hostdev.list_by_caps), in this order.
	Devices []HostDeviceSeed `json:"devices,omitempty"`
}

// HostDeviceSeed is a device of a host (a row of the Engine's host_device table).
type HostDeviceSeed struct {
	// Name is the libvirt device name, unique on the host, e.g. "pci_0000_3b_00_0".
	Name string `json:"name"`
	// Capability is "pci" (default), "scsi", "usb_device", ...
	Capability string `json:"capability,omitempty"`
	// VendorID and ProductID are the 4 hex digits of the PCI ids ("10de"); the API shows
	// them as the Engine stores them, "0x10de".
	VendorID  string `json:"vendor_id,omitempty"`
	ProductID string `json:"product_id,omitempty"`
	// VendorName and ProductName are the names lspci would show.
	VendorName  string `json:"vendor_name,omitempty"`
	ProductName string `json:"product_name,omitempty"`
	// IOMMUGroup is the device's IOMMU group (nil: none). A PCI device is attached to a VM
	// with every other device of its group.
	IOMMUGroup *int `json:"iommu_group,omitempty"`
	// Parent is the name of the parent device. Default "computer".
	Parent string `json:"parent,omitempty"`
	// Driver is the kernel driver bound to the device ("nvidia", "vfio-pci", ...).
	Driver string `json:"driver,omitempty"`
	// MDevTypes are the mediated device (vGPU) types the device offers.
	MDevTypes []MDevTypeSeed `json:"mdev_types,omitempty"`
}

// MDevTypeSeed is a mediated device type of a host device.
type MDevTypeSeed struct {
	// Name is the type name, e.g. "nvidia-22".
	Name string `json:"name"`
	// AvailableInstances is how many instances of the type the device offers when no VM
	// uses it.
	AvailableInstances int `json:"available_instances"`
	// HumanReadableName and Description are what the driver says about the type.
	HumanReadableName string `json:"human_readable_name,omitempty"`
	Description       string `json:"description,omitempty"`
}

// StorageDomain is an oVirt storage domain in the seed inventory.
type StorageDomain struct {
	// Name is the storage domain name, unique in the engine.
	Name string `json:"name"`
	// DataCenter is the data center the domain is attached to. Default "Default".
	DataCenter string `json:"data_center,omitempty"`
	// FreeGB is the free space in GiB. Cloned disks consume it. Zero means full.
	FreeGB int64 `json:"free_gb"`
	// Type is the domain type: "data" (default), "iso" or "export". Only data domains hold VM disks.
	Type string `json:"type,omitempty"`
	// Status is "active" (default); anything else ("maintenance", "inactive", ...) makes the domain unusable.
	Status string `json:"status,omitempty"`
	// StorageType is the storage behind the domain: "nfs" (default), "glusterfs", "posixfs" or
	// "localfs" (file domains), "iscsi" or "fcp" (block domains, which refuse raw sparse disks).
	StorageType string `json:"storage_type,omitempty"`
	// WipeAfterDelete is the domain's wipe_after_delete: new disks that do not say otherwise
	// get it (AddDiskCommand).
	WipeAfterDelete bool `json:"wipe_after_delete,omitempty"`
}

// TemplateDisk is one disk of a template.
type TemplateDisk struct {
	// Alias is the disk alias; VMs created from the template inherit it.
	Alias string `json:"alias"`
	// SizeGB is the provisioned size in GiB. Required.
	SizeGB int64 `json:"size_gb"`
	// Format is "cow" (default) or "raw".
	Format string `json:"format,omitempty"`
	// StorageDomain is the name of the domain holding the disk. Default: the first active data domain of the template's data center.
	StorageDomain string `json:"storage_domain,omitempty"`
	// StorageDomains names further domains that hold a copy of the disk
	// (the engine's "copy template disk"). A VM may be created on any of them.
	StorageDomains []string `json:"storage_domains,omitempty"`
	// Bootable marks the OS disk.
	Bootable bool `json:"bootable,omitempty"`
	// Interface is the attachment interface: "virtio_scsi" (default), "virtio", "ide" or "sata".
	Interface string `json:"interface,omitempty"`
}

// Template is an oVirt template in the seed inventory.
type Template struct {
	// Name is the template name. Several versions may share one name.
	Name string `json:"name"`
	// Cluster is the name of the cluster the template was created in. Default: the first cluster.
	Cluster string `json:"cluster,omitempty"`
	// Version is the template version number. Default 1.
	Version int `json:"version,omitempty"`
	// OSType is the operating system type, e.g. "rhcos_x64" or "other_linux". Default "other_linux".
	OSType string `json:"os_type,omitempty"`
	// Sockets is the number of CPU sockets. Default 1.
	Sockets int `json:"sockets,omitempty"`
	// Cores is the number of cores per socket. Default 1.
	Cores int `json:"cores,omitempty"`
	// Threads is the number of threads per core. Default 1.
	Threads int `json:"threads,omitempty"`
	// MemoryMB is the memory in MiB. Default 1024.
	MemoryMB int64 `json:"memory_mb,omitempty"`
	// Disks are the template disks, copied into every VM created from the template.
	Disks []TemplateDisk `json:"disks,omitempty"`
	// Status is "ok" (default), "locked" or "illegal".
	Status string `json:"status,omitempty"`
	// NoGuestAgent means the image has no qemu-guest-agent: VMs created
	// from it report no devices and stay powering_up for NoAgentPoweringUp.
	NoGuestAgent bool `json:"no_guest_agent,omitempty"`
	// CustomProperties are the template's custom properties (validated like a VM's); a VM
	// created without custom_properties gets them.
	CustomProperties []CustomProperty `json:"custom_properties,omitempty"`
}

// VnicProfile is a vNIC profile in the seed inventory.
type VnicProfile struct {
	// Name is the profile name; the same name may exist in several data centers.
	Name string `json:"name"`
	// Network is the name of the logical network of the profile.
	Network string `json:"network"`
	// DataCenter is the data center of the network. Default "Default".
	DataCenter string `json:"data_center,omitempty"`
	// Private: the Engine's group Everyone has no VnicProfileUser role on the profile (its
	// network was created without "public"), so a user needs one of their own to use it.
	Private bool `json:"private,omitempty"`
}

// Timings are the simulated durations of the engine's asynchronous work.
// All default to zero: transitions then happen on the next read.
type Timings struct {
	// ImageLock is how long a new VM stays image_locked with locked disks (clone=true takes CloneFactor times as long).
	ImageLock time.Duration
	// CloneFactor multiplies ImageLock for clone=true. Default 1.
	CloneFactor float64
	// DiskLock is how long a disk stays locked after any update (alias-only too) or its creation;
	// a new size shows only when the lock ends.
	DiskLock time.Duration
	// WaitForLaunch is how long a started VM stays in wait_for_launch.
	WaitForLaunch time.Duration
	// PoweringUp is how long it then stays in powering_up before up.
	PoweringUp time.Duration
	// PoweringDown is how long a shut-down VM stays in powering_down (stop is immediate).
	PoweringDown time.Duration
	// GuestAgentDelay is how long after up the guest agent starts reporting IPs.
	GuestAgentDelay time.Duration
	// NoAgentPoweringUp replaces PoweringUp for a VM without a guest agent:
	// VDSM keeps such a VM powering_up until its timeout. Zero means 60s.
	NoAgentPoweringUp time.Duration
}

type timingsJSON struct {
	ImageLock       Duration `json:"image_lock,omitempty"`
	CloneFactor     float64  `json:"clone_factor,omitempty"`
	DiskLock        Duration `json:"disk_lock,omitempty"`
	WaitForLaunch   Duration `json:"wait_for_launch,omitempty"`
	PoweringUp      Duration `json:"powering_up,omitempty"`
	PoweringDown    Duration `json:"powering_down,omitempty"`
	GuestAgentDelay Duration `json:"guest_agent_delay,omitempty"`
	NoAgentPU       Duration `json:"no_agent_powering_up,omitempty"`
}

// MarshalJSON writes the durations as strings with lower_snake keys.
func (t Timings) MarshalJSON() ([]byte, error) {
	return json.Marshal(timingsJSON{
		ImageLock: Duration(t.ImageLock), CloneFactor: t.CloneFactor, DiskLock: Duration(t.DiskLock),
		WaitForLaunch: Duration(t.WaitForLaunch), PoweringUp: Duration(t.PoweringUp),
		PoweringDown: Duration(t.PoweringDown), GuestAgentDelay: Duration(t.GuestAgentDelay),
		NoAgentPU: Duration(t.NoAgentPoweringUp),
	})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (t *Timings) UnmarshalJSON(b []byte) error {
	var j timingsJSON
	if err := strictUnmarshal(b, &j); err != nil {
		return fmt.Errorf("timings: %w", err)
	}
	*t = Timings{
		ImageLock: j.ImageLock.Std(), CloneFactor: j.CloneFactor, DiskLock: j.DiskLock.Std(),
		WaitForLaunch: j.WaitForLaunch.Std(), PoweringUp: j.PoweringUp.Std(),
		PoweringDown: j.PoweringDown.Std(), GuestAgentDelay: j.GuestAgentDelay.Std(),
		NoAgentPoweringUp: j.NoAgentPU.Std(),
	}
	return nil
}

// LatencyRule adds a delay to matching requests. The first matching rule wins.
type LatencyRule struct {
	// Method is the HTTP method to match; "" matches any.
	Method string
	// Path is the path template relative to /ovirt-engine/api, e.g. "/vms/{id}"; "" matches any.
	// The API root is "/", the SSO token endpoint is "/sso/oauth/token".
	Path string
	// Min and Max bound the delay; it is uniform in [Min, Max] and deterministic from the random seed.
	Min, Max time.Duration
}

type latencyJSON struct {
	Method string   `json:"method,omitempty"`
	Path   string   `json:"path,omitempty"`
	Min    Duration `json:"min,omitempty"`
	Max    Duration `json:"max,omitempty"`
}

// MarshalJSON writes the durations as strings with lower_snake keys.
func (l LatencyRule) MarshalJSON() ([]byte, error) {
	return json.Marshal(latencyJSON{Method: l.Method, Path: l.Path, Min: Duration(l.Min), Max: Duration(l.Max)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (l *LatencyRule) UnmarshalJSON(b []byte) error {
	var j latencyJSON
	if err := strictUnmarshal(b, &j); err != nil {
		return fmt.Errorf("latency rule: %w", err)
	}
	*l = LatencyRule{Method: j.Method, Path: j.Path, Min: j.Min.Std(), Max: j.Max.Std()}
	return nil
}

// FaultRule makes matching requests fail, or hang. Rules are tried in order;
// the first one that fires decides the answer.
type FaultRule struct {
	// Method is the HTTP method to match; "" matches any.
	Method string
	// Path is the path template (see LatencyRule.Path); "" matches any.
	Path string
	// Status is the HTTP status to answer with, e.g. 500, 503, 409 or 401 (401 answers like an expired token).
	// With Hang > 0, Status 0 means "answer normally after the hang".
	Status int
	// Rate is the probability in (0, 1] that a matching request fires the rule; 0 means 1 (always).
	// Decisions are deterministic from the random seed and the rule's sequence of matching requests.
	Rate float64
	// Count limits how many times the rule fires; 0 means unlimited.
	Count int
	// Hang holds the request this long (or until the client goes away) before answering.
	Hang time.Duration
	// Detail is the fault detail text; a default is used when empty.
	Detail string
	// After makes the engine do the work first (execute-then-fail): the request
	// is served normally, then the answer is replaced as Mode says. Without
	// After the fault comes instead of the work (except a bare hang, which
	// delays it).
	After bool
	// Mode is what the client gets: FaultModeStatus (the Status fault, after
	// Hang if set), FaultModeHang (held for Hang, then the Status fault or, with
	// Status 0, the normal answer) or FaultModeDrop (after Hang if set, the
	// connection is closed without an answer). "" infers status from a
	// Status, else hang.
	Mode string
}

// Fault modes, see FaultRule.Mode.
const (
	FaultModeStatus = "status"
	FaultModeHang   = "hang"
	FaultModeDrop   = "drop"
)

// mode is the effective mode of a validated rule.
func (f FaultRule) mode() string {
	switch {
	case f.Mode != "":
		return f.Mode
	case f.Status != 0:
		return FaultModeStatus
	default:
		return FaultModeHang
	}
}

type faultJSON struct {
	Method string   `json:"method,omitempty"`
	Path   string   `json:"path,omitempty"`
	Status int      `json:"status,omitempty"`
	Rate   float64  `json:"rate,omitempty"`
	Count  int      `json:"count,omitempty"`
	Hang   Duration `json:"hang,omitempty"`
	Detail string   `json:"detail,omitempty"`
	After  bool     `json:"after,omitempty"`
	Mode   string   `json:"mode,omitempty"`
}

// MarshalJSON writes the hang duration as a string with lower_snake keys.
func (f FaultRule) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultJSON{Method: f.Method, Path: f.Path, Status: f.Status, Rate: f.Rate,
		Count: f.Count, Hang: Duration(f.Hang), Detail: f.Detail, After: f.After, Mode: f.Mode})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *FaultRule) UnmarshalJSON(b []byte) error {
	var j faultJSON
	if err := strictUnmarshal(b, &j); err != nil {
		return fmt.Errorf("fault rule: %w", err)
	}
	*f = FaultRule{Method: j.Method, Path: j.Path, Status: j.Status, Rate: j.Rate, Count: j.Count,
		Hang: j.Hang.Std(), Detail: j.Detail, After: j.After, Mode: j.Mode}
	return nil
}

// Seed is the complete configuration of a simulator: inventory, credentials,
// timings, latency, faults and the random seed. It is also the JSON seed-file
// format (see docs/ovirtsim.md).
type Seed struct {
	// Clusters are the oVirt clusters.
	Clusters []Cluster `json:"clusters,omitempty"`
	// StorageDomains are the storage domains.
	StorageDomains []StorageDomain `json:"storage_domains,omitempty"`
	// Templates are the VM templates (the Blank template always exists in addition).
	Templates []Template `json:"templates,omitempty"`
	// VnicProfiles are the vNIC profiles.
	VnicProfiles []VnicProfile `json:"vnic_profiles,omitempty"`
	// Username is the SSO user name. Default "admin@internal".
	Username string `json:"username,omitempty"`
	// Password is the SSO password. Default "secret".
	Password string `json:"password,omitempty"`
	// Users are further Engine accounts, with their permissions (permissions.go); the
	// account above is SuperUser on the system.
	Users []User `json:"users,omitempty"`
	// TokenTTL is how long an SSO token stays valid. Default 1h; negative means forever.
	TokenTTL Duration `json:"token_ttl,omitempty"`
	// Timings are the durations of asynchronous engine work.
	Timings Timings `json:"timings,omitzero"`
	// Latency rules delay matching requests.
	Latency []LatencyRule `json:"latency,omitempty"`
	// Faults rules make matching requests fail or hang.
	Faults []FaultRule `json:"faults,omitempty"`
	// RandomSeed seeds ids, MAC addresses, fault decisions and latencies. Default 1.
	RandomSeed int64 `json:"random_seed,omitempty"`
	// NoGuestAgent disables the guest agent of every VM: running VMs report no devices.
	NoGuestAgent bool `json:"no_guest_agent,omitempty"`
	// GuestInterfaces configures the interfaces guest agents report. Nil
	// means DefaultGuestInterfaces(): a Kubernetes node with 100 Service IPs.
	GuestInterfaces *GuestInterfaces `json:"guest_interfaces,omitempty"`
	// IgnoreFollow makes the simulator ignore follow=, like a proxy or an
	// older engine: entities then carry only <link> elements.
	IgnoreFollow bool `json:"ignore_follow,omitempty"`
	// MaxVMNameLength is the engine's MaxVmNameLength: longer VM names are refused. 0 means 64.
	MaxVMNameLength int `json:"max_vm_name_length,omitempty"`
	// Version is the engine version, "major.minor[.build]", reported by GET /api and deciding
	// version-dependent limits (MaxNumOfVmCpus: 384 on 4.4, 512 from 4.5). Default "4.5.5".
	Version string `json:"version,omitempty"`
	// PredefinedVMProperties is the Engine's PredefinedVMProperties configuration value,
	// "name=regex;name=regex": the VM custom properties the Engine accepts. Empty means the
	// Engine's default for the version (DefaultPredefinedVMProperties).
	PredefinedVMProperties string `json:"predefined_vm_properties,omitempty"`
	// UserDefinedVMProperties is the Engine's UserDefinedVMProperties (engine-config -s), in the
	// same format. Default empty.
	UserDefinedVMProperties string `json:"user_defined_vm_properties,omitempty"`
}

// LoadSeed reads a JSON seed file. Unknown fields are an error, so typos do
// not go unnoticed. Defaults are applied later, by Build.
func LoadSeed(path string) (*Seed, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading seed: %w", err)
	}
	var s Seed
	if err := strictUnmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parsing seed %s: %w", path, err)
	}
	return &s, nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return nil
}

// DemoSeed returns the inventory used by the demo and by `go run
// ./test/ovirtsim/cmd/ovirtsim` without --seed. The same content is committed
// as test/ovirtsim/seeds/demo.json.
func DemoSeed() *Seed {
	return &Seed{
		Clusters: []Cluster{
			{Name: "Default", DataCenter: "Default", Networks: []string{"ovirtmgmt"}, Hosts: []Host{
				{Name: "host1", MemoryGB: 2048, Status: "up"},
				{Name: "host2", MemoryGB: 2048, Status: "up"},
				{Name: "host3", MemoryGB: 2048, Status: "up"},
			}},
			{Name: "Secondary", DataCenter: "Default", Networks: []string{"ovirtmgmt"}, Hosts: []Host{
				{Name: "host4", MemoryGB: 2048, Status: "up"},
				{Name: "host5", MemoryGB: 2048, Status: "up"},
			}},
		},
		StorageDomains: []StorageDomain{
			{Name: "data", DataCenter: "Default", FreeGB: 1000, Type: "data", Status: "active"},
			{Name: "fast", DataCenter: "Default", FreeGB: 500, Type: "data", Status: "active"},
		},
		Templates: []Template{
			{
				Name: "rhcos-4.14", Cluster: "Default", Version: 1, OSType: "rhcos_x64",
				Sockets: 1, Cores: 4, Threads: 1, MemoryMB: 8192, Status: "ok",
				Disks: []TemplateDisk{{Alias: "rhcos-4.14_Disk1", SizeGB: 16, Format: "cow",
					StorageDomain: "data", Bootable: true, Interface: "virtio_scsi"}},
			},
			{
				Name: "ubuntu-22.04", Cluster: "Default", Version: 1, OSType: "other_linux",
				Sockets: 1, Cores: 2, Threads: 1, MemoryMB: 4096, Status: "ok", NoGuestAgent: true,
				Disks: []TemplateDisk{{Alias: "ubuntu-22.04_Disk1", SizeGB: 10, Format: "cow",
					StorageDomain: "data", Bootable: true, Interface: "virtio_scsi"}},
			},
		},
		VnicProfiles: []VnicProfile{{Name: "ovirtmgmt", Network: "ovirtmgmt", DataCenter: "Default"}},
		Username:     "admin@internal",
		Password:     "secret",
		TokenTTL:     Duration(time.Hour),
		// The ubuntu image has no guest agent; 20s instead of VDSM's 60s keeps the demo fast.
		Timings:    Timings{NoAgentPoweringUp: 20 * time.Second},
		RandomSeed: 1,
	}
}

// clone returns a deep copy of s.
func (s *Seed) clone() *Seed {
	c := *s
	c.Clusters = make([]Cluster, len(s.Clusters))
	for i, cl := range s.Clusters {
		c.Clusters[i] = cloneCluster(cl)
	}
	c.StorageDomains = append([]StorageDomain(nil), s.StorageDomains...)
	c.Templates = make([]Template, len(s.Templates))
	for i, t := range s.Templates {
		t.Disks = cloneTemplateDisks(t.Disks)
		c.Templates[i] = t
	}
	c.VnicProfiles = append([]VnicProfile(nil), s.VnicProfiles...)
	if s.GuestInterfaces != nil {
		g := *s.GuestInterfaces
		g.Extra = cloneGuestInterfaces(g.Extra)
		c.GuestInterfaces = &g
	}
	c.Latency = append([]LatencyRule(nil), s.Latency...)
	c.Faults = append([]FaultRule(nil), s.Faults...)
	c.Users = make([]User, len(s.Users))
	for i, u := range s.Users {
		u.Grants = append([]Grant(nil), u.Grants...)
		c.Users[i] = u
	}
	return &c
}

func cloneCluster(c Cluster) Cluster {
	c.Networks = append([]string(nil), c.Networks...)
	c.Hosts = append([]Host(nil), c.Hosts...)
	for i := range c.Hosts {
		c.Hosts[i].HugePages = append([]HugePages(nil), c.Hosts[i].HugePages...)
		c.Hosts[i].Devices = cloneHostDevices(c.Hosts[i].Devices)
	}
	return c
}

func cloneHostDevices(ds []HostDeviceSeed) []HostDeviceSeed {
	if ds == nil {
		return nil
	}
	out := make([]HostDeviceSeed, len(ds))
	for i, d := range ds {
		if d.IOMMUGroup != nil {
			g := *d.IOMMUGroup
			d.IOMMUGroup = &g
		}
		d.MDevTypes = append([]MDevTypeSeed(nil), d.MDevTypes...)
		out[i] = d
	}
	return out
}

func cloneTemplateDisks(ds []TemplateDisk) []TemplateDisk {
	if ds == nil {
		return nil
	}
	out := make([]TemplateDisk, len(ds))
	for i, d := range ds {
		d.StorageDomains = append([]string(nil), d.StorageDomains...)
		out[i] = d
	}
	return out
}

func cloneGuestInterfaces(l []GuestInterface) []GuestInterface {
	if l == nil {
		return nil
	}
	out := make([]GuestInterface, len(l))
	for i, e := range l {
		e.IPs = append([]string(nil), e.IPs...)
		out[i] = e
	}
	return out
}
