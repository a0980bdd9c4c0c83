// Package fake is an in-memory ovirt.Client and ovirt.Factory for reconciler
// unit tests.
//
// Every Client method has a function field (PingFunc, CreateVMFunc, ...):
// when set it replaces the method's behaviour, which makes error injection a
// one-liner. When unset, the method works on a small in-memory inventory
// (clusters, templates, storage domains, vNIC profiles, VMs, affinity groups, tags)
// that tests seed with the Add* helpers. Status changes are immediate: a
// created VM is down, a started one is up on a host. All methods are safe for
// concurrent use.
//
// Hosts: every cluster has as many hosts as needed unless SetHostCount limits
// them. Starting a VM places it on a host the way the Engine's scheduler would
// for VM affinity groups: never with a member of one of its enforcing negative
// groups, always with the running members of its enforcing positive groups,
// and, among the hosts left, the first that breaks the fewest non-enforcing
// rules. When no host is left, Power(start) fails like the Engine (ErrNoHost,
// which also matches ErrConflict).
//
// Hosts with devices (PCI passthrough) are seeded with AddHost: they replace the
// cluster's implicit hosts, and the Engine's pinning and HostDevice filters apply
// (see hostdevices.go).
package fake

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/capov/capov/pkg/ovirt"
)

// Client is the in-memory ovirt.Client.
type Client struct {
	PingFunc                func(ctx context.Context) (ovirt.EngineInfo, error)
	FindClusterFunc         func(ctx context.Context, name string) (*ovirt.Cluster, error)
	FindTemplateFunc        func(ctx context.Context, name, clusterName string) (*ovirt.Template, error)
	FindStorageDomainFunc   func(ctx context.Context, name string) (*ovirt.StorageDomain, error)
	FindVnicProfileFunc     func(ctx context.Context, cluster *ovirt.Cluster, name string) (*ovirt.VnicProfile, error)
	GetVMFunc               func(ctx context.Context, id string) (*ovirt.VM, error)
	ListDiskAttachmentsFunc func(ctx context.Context, vmID string) ([]ovirt.Disk, error)
	FindVMsByNameFunc       func(ctx context.Context, name string) ([]ovirt.VM, error)
	ListVMsFunc             func(ctx context.Context, q ovirt.VMQuery) (ovirt.VMPage, error)
	CreateVMFunc            func(ctx context.Context, spec ovirt.VMSpec) (*ovirt.VM, error)
	UpdateDiskFunc          func(ctx context.Context, vmID, diskID string, u ovirt.DiskUpdate) error
	AddDiskFunc             func(ctx context.Context, vmID string, spec ovirt.DiskSpec) (*ovirt.Disk, error)
	DetachDiskFunc          func(ctx context.Context, vmID, diskID string) error
	AddNICFunc              func(ctx context.Context, vmID, name, vnicProfileID string) (*ovirt.NIC, error)
	UpdateNICFunc           func(ctx context.Context, vmID, nicID, vnicProfileID string) error
	RemoveNICFunc           func(ctx context.Context, vmID, nicID string) error
	PowerFunc               func(ctx context.Context, vmID string, action ovirt.PowerAction) error
	RunOnceFunc             func(ctx context.Context, vmID, customScript string) error
	RemoveVMFunc            func(ctx context.Context, vmID string) error
	UpdateVMFunc            func(ctx context.Context, vmID string, u ovirt.VMUpdate) error

	GetClusterFunc                func(ctx context.Context, id string) (*ovirt.Cluster, error)
	ListAffinityGroupsFunc        func(ctx context.Context, clusterID string) ([]ovirt.AffinityGroup, error)
	CreateAffinityGroupFunc       func(ctx context.Context, spec ovirt.AffinityGroupSpec) (*ovirt.AffinityGroup, error)
	UpdateAffinityGroupFunc       func(ctx context.Context, clusterID, groupID string, enforcing bool) error
	RemoveAffinityGroupFunc       func(ctx context.Context, clusterID, groupID string) error
	AddVMToAffinityGroupFunc      func(ctx context.Context, clusterID, groupID, vmID string) error
	RemoveVMFromAffinityGroupFunc func(ctx context.Context, clusterID, groupID, vmID string) error

	FindTagFunc              func(ctx context.Context, name string) (*ovirt.Tag, error)
	GetTagFunc               func(ctx context.Context, id string) (*ovirt.Tag, error)
	CreateTagFunc            func(ctx context.Context, name, description string) (*ovirt.Tag, error)
	AssignTagFunc            func(ctx context.Context, vmID, tagID string) error
	UpdateTagDescriptionFunc func(ctx context.Context, id, description string) error

	ListHostsFunc         func(ctx context.Context, clusterName string) ([]ovirt.Host, error)
	ListHostDevicesFunc   func(ctx context.Context, hostID string) ([]ovirt.HostDevice, error)
	ListVMHostDevicesFunc func(ctx context.Context, vmID string) ([]ovirt.HostDevice, error)
	AttachHostDeviceFunc  func(ctx context.Context, vmID, deviceName string) error
	DetachHostDeviceFunc  func(ctx context.Context, vmID, deviceName string) error
	PinVMFunc             func(ctx context.Context, vmID, hostID string) error

	mu             sync.Mutex
	nextID         int
	calls          []string
	clusters       []ovirt.Cluster
	templates      []ovirt.Template
	storageDomains []ovirt.StorageDomain
	vnicProfiles   []ovirt.VnicProfile
	vms            map[string]*ovirt.VM
	specs          map[string]ovirt.VMSpec
	// networks and scripts are the network configurations and custom scripts UpdateVM set, by
	// VM id.
	networks map[string]*ovirt.NetworkConfig
	scripts  map[string]string
	runOnce  map[string]string // the custom script of each VM's last RunOnce
	// groups are the affinity groups in creation order; hostCounts the clusters whose hosts
	// SetHostCount limited.
	groups     []*ovirt.AffinityGroup
	hostCounts map[string]int
	// tags are the Engine's tags other than the root, in creation order.
	tags []*ovirt.Tag
	// sdTypes are the storage types SetStorageDomainType gave storage domains, by id; diskSpecs
	// the specs AddDisk created disks with, by disk id.
	sdTypes   map[string]string
	diskSpecs map[string]ovirt.DiskSpec
	// hosts are the hosts AddHost seeded, in seeding order; hostDevices their devices by host id;
	// vmHostDevices the host devices configured on each VM, by VM id; clusterLevels the
	// compatibility versions SetClusterLevel set, by cluster id; powerActions the power actions
	// accepted, by VM id.
	hosts         []*ovirt.Host
	hostDevices   map[string][]*ovirt.HostDevice
	vmHostDevices map[string][]vmHostDevice
	clusterLevels map[string][2]int
	powerActions  map[string][]ovirt.PowerAction
}

var _ ovirt.Client = (*Client)(nil)

// NewClient returns an empty fake Client.
func NewClient() *Client {
	return &Client{vms: map[string]*ovirt.VM{}, specs: map[string]ovirt.VMSpec{},
		networks: map[string]*ovirt.NetworkConfig{}, scripts: map[string]string{}, hostCounts: map[string]int{}}
}

// NewDefaultClient returns a fake Client seeded like the simulator's default
// inventory: cluster "Default" (data center "dc-default") with network "ovirtmgmt", storage domain
// "data", template "rhcos-4.14" with a 16 GiB bootable disk, vNIC profile
// "ovirtmgmt".
func NewDefaultClient() *Client {
	c := NewClient()
	cl := c.AddCluster(ovirt.Cluster{Name: "Default", DataCenterID: "dc-default", NetworkIDs: []string{"net-ovirtmgmt"}})
	sd := c.AddStorageDomain(ovirt.StorageDomain{Name: "data", Available: 1000 << 30, Status: "active", Usable: true})
	c.AddTemplate(ovirt.Template{Name: "rhcos-4.14", Version: 1, ClusterID: cl.ID, OSType: "rhcos_x64",
		Disks: []ovirt.Disk{{Alias: "rhcos-4.14_Disk1", ProvisionedSize: 16 << 30, Bootable: true,
			Interface: "virtio_scsi", Status: ovirt.DiskStatusOK, StorageDomainID: sd.ID, Format: "cow"}}})
	c.AddVnicProfile(ovirt.VnicProfile{Name: "ovirtmgmt", NetworkID: "net-ovirtmgmt"})
	return c
}

func (c *Client) newID(kind string) string {
	c.nextID++
	if kind == "vm" {
		// VM ids become providerIDs, which must be UUIDs, as the Engine's are.
		return fmt.Sprintf("00000000-0000-4000-8000-%012d", c.nextID)
	}
	return fmt.Sprintf("%s-%d", kind, c.nextID)
}

func (c *Client) record(op string) {
	c.calls = append(c.calls, op)
}

// Calls returns the names of the methods called so far, in order (hooked
// calls included).
func (c *Client) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// CallCount returns how often the method named op was called.
func (c *Client) CallCount(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, call := range c.calls {
		if call == op {
			n++
		}
	}
	return n
}

// AddCluster seeds a cluster; an empty ID is generated.
func (c *Client) AddCluster(cl ovirt.Cluster) ovirt.Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl.ID == "" {
		cl.ID = c.newID("cluster")
	}
	c.clusters = append(c.clusters, cl)
	return cl
}

// AddTemplate seeds a template; empty template and disk IDs are generated.
func (c *Client) AddTemplate(t ovirt.Template) ovirt.Template {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.ID == "" {
		t.ID = c.newID("template")
	}
	t.Disks = slices.Clone(t.Disks)
	for i := range t.Disks {
		if t.Disks[i].ID == "" {
			t.Disks[i].ID = c.newID("template-disk")
		}
	}
	c.templates = append(c.templates, t)
	return t
}

// AddStorageDomain seeds a storage domain; an empty ID is generated.
func (c *Client) AddStorageDomain(sd ovirt.StorageDomain) ovirt.StorageDomain {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sd.ID == "" {
		sd.ID = c.newID("sd")
	}
	c.storageDomains = append(c.storageDomains, sd)
	return sd
}

// AddVnicProfile seeds a vNIC profile; an empty ID is generated.
func (c *Client) AddVnicProfile(p ovirt.VnicProfile) ovirt.VnicProfile {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.ID == "" {
		p.ID = c.newID("vnicprofile")
	}
	c.vnicProfiles = append(c.vnicProfiles, p)
	return p
}

// PutVM stores (or replaces) a VM as is, e.g. to seed an existing machine or
// to move one to another status; an empty ID is generated.
func (c *Client) PutVM(vm ovirt.VM) ovirt.VM {
	c.mu.Lock()
	defer c.mu.Unlock()
	if vm.ID == "" {
		vm.ID = c.newID("vm")
	}
	c.vms[vm.ID] = cloneVM(&vm)
	return vm
}

// VM returns a copy of the stored VM.
func (c *Client) VM(id string) (ovirt.VM, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[id]
	if !ok {
		return ovirt.VM{}, false
	}
	return *cloneVM(vm), true
}

// VMs returns copies of all stored VMs, sorted by name.
func (c *Client) VMs() []ovirt.VM {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ovirt.VM, 0, len(c.vms))
	for _, vm := range c.vms {
		out = append(out, *cloneVM(vm))
	}
	slices.SortFunc(out, func(a, b ovirt.VM) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Spec returns a copy of the VMSpec a VM was created with (custom script, disk format and
// allocation, custom properties, high availability and performance included: what the SDK client
// sends the Engine). Its CustomScript follows UpdateVM: a CustomScript update replaces it,
// ClearCustomScript empties it.
func (c *Client) Spec(vmID string) (ovirt.VMSpec, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.specs[vmID]
	return cloneSpec(s), ok
}

// CustomScript returns the VM's initialization custom script as the Engine would store it: the
// last one UpdateVM set or cleared, else the one it was created with; false when neither
// CreateVM nor UpdateVM gave the VM one.
func (c *Client) CustomScript(vmID string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.scripts[vmID]; ok {
		return s, true
	}
	s, ok := c.specs[vmID]
	return s.CustomScript, ok
}

// Network returns a copy of the network configuration the last UpdateVM with a Network set
// for the VM, nil when none did.
func (c *Client) Network(vmID string) *ovirt.NetworkConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cloneNetwork(c.networks[vmID])
}

// cloneNetwork deep-copies a network configuration (nil stays nil).
func cloneNetwork(n *ovirt.NetworkConfig) *ovirt.NetworkConfig {
	if n == nil {
		return nil
	}
	out := &ovirt.NetworkConfig{NICs: make([]ovirt.NICConfiguration, len(n.NICs)),
		DNSServers: slices.Clone(n.DNSServers), DNSSearch: slices.Clone(n.DNSSearch)}
	for i, nic := range n.NICs {
		out.NICs[i] = nic
		if nic.IPv4 != nil {
			ip := *nic.IPv4
			out.NICs[i].IPv4 = &ip
		}
		if nic.IPv6 != nil {
			ip := *nic.IPv6
			out.NICs[i].IPv6 = &ip
		}
	}
	return out
}

func notFound(op, format string, args ...any) error {
	return &ovirt.Error{Op: op, Status: 404, Detail: fmt.Sprintf(format, args...), Kinds: []error{ovirt.ErrNotFound}}
}

func invalid(op, format string, args ...any) error {
	return &ovirt.Error{Op: op, Status: 400, Detail: fmt.Sprintf(format, args...), Kinds: []error{ovirt.ErrInvalid}}
}

func cloneVM(vm *ovirt.VM) *ovirt.VM {
	out := *vm
	out.Disks = slices.Clone(vm.Disks)
	for i := range out.Disks {
		out.Disks[i] = cloneDisk(out.Disks[i])
	}
	out.TagIDs = slices.Clone(vm.TagIDs)
	out.NICs = slices.Clone(vm.NICs)
	out.ReportedDevices = slices.Clone(vm.ReportedDevices)
	out.PinnedHostIDs = slices.Clone(vm.PinnedHostIDs)
	return &out
}

// Ping implements ovirt.Client.
func (c *Client) Ping(ctx context.Context) (ovirt.EngineInfo, error) {
	c.mu.Lock()
	c.record("Ping")
	c.mu.Unlock()
	if c.PingFunc != nil {
		return c.PingFunc(ctx)
	}
	return ovirt.EngineInfo{ProductName: "oVirt Engine (fake)", Version: "4.5.0", InstanceID: FakeEngineInstanceID}, nil
}

// EngineInfo implements ovirt.Client: what Ping answers (recorded as its own call).
func (c *Client) EngineInfo(ctx context.Context) (ovirt.EngineInfo, error) {
	c.mu.Lock()
	c.record("EngineInfo")
	c.mu.Unlock()
	if c.PingFunc != nil {
		return c.PingFunc(ctx)
	}
	return ovirt.EngineInfo{ProductName: "oVirt Engine (fake)", Version: "4.5.0", InstanceID: FakeEngineInstanceID}, nil
}

// FakeEngineInstanceID is the product_info.instance_id of the fake Engine.
const FakeEngineInstanceID = "00000000-0000-4000-8000-00000000fa4e"

// UpdateVM implements ovirt.Client.
func (c *Client) UpdateVM(ctx context.Context, vmID string, u ovirt.VMUpdate) error {
	c.mu.Lock()
	c.record("UpdateVM")
	c.mu.Unlock()
	if c.UpdateVMFunc != nil {
		return c.UpdateVMFunc(ctx, vmID, u)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[vmID]
	if !ok {
		return notFound("UpdateVM", "no VM with id %q", vmID)
	}
	if u.ClearCustomScript && u.CustomScript != nil {
		// As the SDK client refuses it before any call.
		return invalid("UpdateVM", "CustomScript and ClearCustomScript are exclusive")
	}
	if u.Comment != nil {
		vm.Comment = *u.Comment
	}
	if u.ClearCustomScript || u.CustomScript != nil {
		script := ""
		if u.CustomScript != nil {
			script = *u.CustomScript
		}
		c.scripts[vmID] = script
		vm.CustomScriptStored = script != ""
		// A VM seeded with PutVM has no spec: it gets none (CustomScript reads scripts).
		if spec, ok := c.specs[vmID]; ok {
			spec.CustomScript = script
			c.specs[vmID] = spec
		}
	}
	if u.Network != nil {
		c.networks[vmID] = cloneNetwork(u.Network)
	}
	return nil
}

// FindCluster implements ovirt.Client.
func (c *Client) FindCluster(ctx context.Context, name string) (*ovirt.Cluster, error) {
	c.mu.Lock()
	c.record("FindCluster")
	c.mu.Unlock()
	if c.FindClusterFunc != nil {
		return c.FindClusterFunc(ctx, name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.clusters {
		if cl.Name == name {
			cl.NetworkIDs = slices.Clone(cl.NetworkIDs)
			return &cl, nil
		}
	}
	return nil, notFound("FindCluster", "no cluster named %q", name)
}

// FindTemplate implements ovirt.Client.
func (c *Client) FindTemplate(ctx context.Context, name, clusterName string) (*ovirt.Template, error) {
	c.mu.Lock()
	c.record("FindTemplate")
	c.mu.Unlock()
	if c.FindTemplateFunc != nil {
		return c.FindTemplateFunc(ctx, name, clusterName)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	clusterID := ""
	if clusterName != "" {
		for _, cl := range c.clusters {
			if cl.Name == clusterName {
				clusterID = cl.ID
			}
		}
		if clusterID == "" {
			return nil, notFound("FindTemplate", "no template named %q in cluster %q", name, clusterName)
		}
	}
	var best *ovirt.Template
	for i := range c.templates {
		t := &c.templates[i]
		if t.Name != name || (clusterID != "" && t.ClusterID != clusterID) {
			continue
		}
		if best == nil || t.Version > best.Version {
			best = t
		}
	}
	if best == nil {
		return nil, notFound("FindTemplate", "no template named %q", name)
	}
	out := *best
	out.Disks = slices.Clone(best.Disks)
	if out.DataCenterID == "" {
		// The data center of the template's cluster, as the SDK client reads it.
		for _, cl := range c.clusters {
			if cl.ID == out.ClusterID {
				out.DataCenterID = cl.DataCenterID
			}
		}
	}
	return &out, nil
}

// FindStorageDomain implements ovirt.Client.
func (c *Client) FindStorageDomain(ctx context.Context, name string) (*ovirt.StorageDomain, error) {
	c.mu.Lock()
	c.record("FindStorageDomain")
	c.mu.Unlock()
	if c.FindStorageDomainFunc != nil {
		return c.FindStorageDomainFunc(ctx, name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sd := range c.storageDomains {
		if sd.Name == name {
			return &sd, nil
		}
	}
	return nil, notFound("FindStorageDomain", "no storage domain named %q", name)
}

// FindVnicProfile implements ovirt.Client.
func (c *Client) FindVnicProfile(ctx context.Context, cluster *ovirt.Cluster, name string) (*ovirt.VnicProfile, error) {
	c.mu.Lock()
	c.record("FindVnicProfile")
	c.mu.Unlock()
	if c.FindVnicProfileFunc != nil {
		return c.FindVnicProfileFunc(ctx, cluster, name)
	}
	if cluster == nil {
		return nil, invalid("FindVnicProfile", "cluster is required")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.vnicProfiles {
		if p.Name == name && slices.Contains(cluster.NetworkIDs, p.NetworkID) {
			return &p, nil
		}
	}
	return nil, notFound("FindVnicProfile", "no vNIC profile named %q on the networks of cluster %q", name, cluster.Name)
}

// GetVM implements ovirt.Client.
func (c *Client) GetVM(ctx context.Context, id string) (*ovirt.VM, error) {
	c.mu.Lock()
	c.record("GetVM")
	c.mu.Unlock()
	if c.GetVMFunc != nil {
		return c.GetVMFunc(ctx, id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[id]
	if !ok {
		return nil, notFound("GetVM", "no VM with id %q", id)
	}
	out := cloneVM(vm)
	out.TagsKnown = true // the fake always follows the tags
	return out, nil
}

// ListDiskAttachments implements ovirt.Client.
func (c *Client) ListDiskAttachments(ctx context.Context, vmID string) ([]ovirt.Disk, error) {
	c.mu.Lock()
	c.record("ListDiskAttachments")
	c.mu.Unlock()
	if c.ListDiskAttachmentsFunc != nil {
		return c.ListDiskAttachmentsFunc(ctx, vmID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[vmID]
	if !ok {
		return nil, notFound("ListDiskAttachments", "no VM with id %q", vmID)
	}
	return append([]ovirt.Disk{}, vm.Disks...), nil
}

// FindVMsByName implements ovirt.Client. Like the engine's list, it returns
// VMs without disks, NICs and addresses.
func (c *Client) FindVMsByName(ctx context.Context, name string) ([]ovirt.VM, error) {
	c.mu.Lock()
	c.record("FindVMsByName")
	c.mu.Unlock()
	if c.FindVMsByNameFunc != nil {
		return c.FindVMsByNameFunc(ctx, name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ovirt.VM
	for _, vm := range c.vms {
		if vm.Name == name {
			v := *vm
			v.Disks, v.NICs, v.ReportedDevices = nil, nil, nil
			v.TagIDs, v.TagsKnown = nil, false
			v.HostName = ""
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b ovirt.VM) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// ListVMs implements ovirt.Client: one page of the stored VMs whose comment contains
// q.CommentContains (exactly, as the SDK client reports them), ordered by name, with their
// disks, NICs, reported devices and host names; always Complete. It refuses the queries the SDK
// client refuses before any call, with the same texts.
func (c *Client) ListVMs(ctx context.Context, q ovirt.VMQuery) (ovirt.VMPage, error) {
	c.mu.Lock()
	c.record("ListVMs")
	c.mu.Unlock()
	if c.ListVMsFunc != nil {
		return c.ListVMsFunc(ctx, q)
	}
	if err := checkVMQuery(q); err != nil {
		return ovirt.VMPage{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var matching []ovirt.VM
	for _, vm := range c.vms {
		if strings.Contains(vm.Comment, q.CommentContains) {
			v := cloneVM(vm)
			v.TagsKnown = true
			matching = append(matching, *v)
		}
	}
	slices.SortFunc(matching, func(a, b ovirt.VM) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
	lo := len(matching) // past the end (and no overflow for a huge page)
	if skip := q.Page - 1; skip <= len(matching)/q.PageSize {
		lo = skip * q.PageSize
	}
	hi := min(lo+q.PageSize, len(matching))
	return ovirt.VMPage{VMs: append([]ovirt.VM{}, matching[lo:hi]...), Complete: true}, nil
}

// checkVMQuery refuses the queries the SDK client refuses (pkg/ovirt/sdk vmPageSearch).
func checkVMQuery(q ovirt.VMQuery) error {
	const op = "ListVMs"
	if q.CommentContains == "" {
		return invalid(op, "CommentContains is empty")
	}
	if strings.ContainsAny(q.CommentContains, "\"';\\*") {
		return invalid(op, "CommentContains %q holds a character the engine's search cannot take (one of \" ' ; \\ *)", q.CommentContains)
	}
	if q.Page < 1 {
		return invalid(op, "Page %d is below 1", q.Page)
	}
	if q.PageSize < 1 || q.PageSize > ovirt.MaxVMPageSize {
		return invalid(op, "PageSize %d is outside 1..%d", q.PageSize, ovirt.MaxVMPageSize)
	}
	return nil
}

// CreateVM implements ovirt.Client. The VM is created down (no image lock),
// with copies of the template's disks (in the override storage domain when
// cloning with one) and without NICs.
func (c *Client) CreateVM(ctx context.Context, spec ovirt.VMSpec) (*ovirt.VM, error) {
	c.mu.Lock()
	c.record("CreateVM")
	c.mu.Unlock()
	if c.CreateVMFunc != nil {
		return c.CreateVMFunc(ctx, spec)
	}
	if err := checkVMSpec("CreateVM", spec); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if spec.MemoryBytes > 0 && spec.GuaranteedMemoryBytes > spec.MemoryBytes {
		return nil, invalid("CreateVM", "Physical Memory Guaranteed cannot exceed Memory Size")
	}
	for _, vm := range c.vms {
		if vm.Name == spec.Name {
			// As the Engine answers it: 409, CONFLICT (ACTION_TYPE_FAILED_NAME_ALREADY_USED).
			return nil, &ovirt.Error{Op: "CreateVM", Status: 409, Kinds: []error{ovirt.ErrConflict},
				Detail: "Operation Failed: [Cannot add VM. The VM name is already in use, please choose a unique name and try again.]"}
		}
	}
	var tpl *ovirt.Template
	for i := range c.templates {
		if c.templates[i].ID == spec.TemplateID {
			tpl = &c.templates[i]
		}
	}
	if tpl == nil {
		return nil, notFound("CreateVM", "no template with id %q", spec.TemplateID)
	}
	if spec.PinnedHostID != "" {
		if err := c.pinError("CreateVM", "add", spec.ClusterID, spec.PinnedHostID); err != nil {
			return nil, err
		}
	}
	vm := &ovirt.VM{
		ID:          c.newID("vm"),
		Name:        spec.Name,
		Comment:     spec.Comment,
		Description: spec.Description,
		Status:      ovirt.VMStatusDown,
		ClusterID:   spec.ClusterID,
		TemplateID:  spec.TemplateID,
		OSType:      cmp.Or(spec.OSType, tpl.OSType),
		// The Engine's default placement; a template's own is not modelled.
		PlacementAffinity: AffinityMigratable,
	}
	if spec.PinnedHostID != "" {
		vm.PinnedHostIDs, vm.PlacementAffinity = []string{spec.PinnedHostID}, AffinityPinned
	}
	if spec.Clone {
		vm.TemplateID = "00000000-0000-0000-0000-000000000000"
		vm.OriginalTemplateID = spec.TemplateID
	}
	for _, d := range tpl.Disks {
		d = cloneDisk(d)
		if spec.Clone {
			// As the SDK client overrides them (pkg/ovirt/sdk addDiskOverrides).
			if spec.StorageDomainID != "" {
				d.StorageDomainID, d.StorageDomainIDs = spec.StorageDomainID, []string{spec.StorageDomainID}
			}
			if spec.StorageDomainID != "" || spec.DiskFormat != "" || spec.DiskSparse != nil {
				if d.Format != ovirt.DiskFormatRaw {
					d.Format = ovirt.DiskFormatCow
				}
				d.Format = cmp.Or(spec.DiskFormat, d.Format)
				d.Sparse = d.Format == ovirt.DiskFormatCow
				if spec.DiskSparse != nil {
					d.Sparse = *spec.DiskSparse
				}
				if err := c.diskConfigurationError("CreateVM", "VM", d.Format, d.Sparse, d.StorageDomainID); err != nil {
					return nil, err
				}
			}
		}
		d.ID = c.newID("disk")
		d.Status = ovirt.DiskStatusOK
		vm.Disks = append(vm.Disks, d)
	}
	c.vms[vm.ID] = vm
	c.specs[vm.ID] = cloneSpec(spec)
	vm.CustomScriptStored = spec.CustomScript != ""
	return cloneVM(vm), nil
}

// UpdateDisk implements ovirt.Client; like the engine it refuses a shrink.
func (c *Client) UpdateDisk(ctx context.Context, vmID, diskID string, u ovirt.DiskUpdate) error {
	c.mu.Lock()
	c.record("UpdateDisk")
	c.mu.Unlock()
	if c.UpdateDiskFunc != nil {
		return c.UpdateDiskFunc(ctx, vmID, diskID, u)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[vmID]
	if !ok {
		return notFound("UpdateDisk", "no VM with id %q", vmID)
	}
	for i := range vm.Disks {
		d := &vm.Disks[i]
		if d.ID != diskID {
			continue
		}
		if u.ProvisionedSize > 0 && u.ProvisionedSize < d.ProvisionedSize {
			return invalid("UpdateDisk", "Cannot edit Virtual Disk. New disk size cannot be smaller than the current.")
		}
		if u.ProvisionedSize > 0 {
			d.ProvisionedSize = u.ProvisionedSize
		}
		if u.Alias != "" {
			d.Alias = u.Alias
		}
		return nil
	}
	return notFound("UpdateDisk", "no disk %q on VM %q", diskID, vmID)
}

// DetachDisk implements ovirt.Client.
func (c *Client) DetachDisk(ctx context.Context, vmID, diskID string) error {
	c.mu.Lock()
	c.record("DetachDisk")
	c.mu.Unlock()
	if c.DetachDiskFunc != nil {
		return c.DetachDiskFunc(ctx, vmID, diskID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[vmID]
	if !ok {
		return notFound("DetachDisk", "no VM with id %q", vmID)
	}
	n := len(vm.Disks)
	vm.Disks = slices.DeleteFunc(vm.Disks, func(d ovirt.Disk) bool { return d.ID == diskID })
	if len(vm.Disks) == n {
		return notFound("DetachDisk", "no disk %q on VM %q", diskID, vmID)
	}
	return nil
}

// AddNIC implements ovirt.Client.
func (c *Client) AddNIC(ctx context.Context, vmID, name, vnicProfileID string) (*ovirt.NIC, error) {
	c.mu.Lock()
	c.record("AddNIC")
	c.mu.Unlock()
	if c.AddNICFunc != nil {
		return c.AddNICFunc(ctx, vmID, name, vnicProfileID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[vmID]
	if !ok {
		return nil, notFound("AddNIC", "no VM with id %q", vmID)
	}
	n := ovirt.NIC{ID: c.newID("nic"), Name: name, VnicProfileID: vnicProfileID,
		MAC: fmt.Sprintf("56:6f:00:00:00:%02x", c.nextID%256)}
	vm.NICs = append(vm.NICs, n)
	return &n, nil
}

// UpdateNIC implements ovirt.Client.
func (c *Client) UpdateNIC(ctx context.Context, vmID, nicID, vnicProfileID string) error {
	c.mu.Lock()
	c.record("UpdateNIC")
	c.mu.Unlock()
	if c.UpdateNICFunc != nil {
		return c.UpdateNICFunc(ctx, vmID, nicID, vnicProfileID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[vmID]
	if !ok {
		return notFound("UpdateNIC", "no VM with id %q", vmID)
	}
	for i := range vm.NICs {
		if vm.NICs[i].ID == nicID {
			vm.NICs[i].VnicProfileID = vnicProfileID
			return nil
		}
	}
	return notFound("UpdateNIC", "no NIC %q on VM %q", nicID, vmID)
}

// RemoveNIC implements ovirt.Client.
func (c *Client) RemoveNIC(ctx context.Context, vmID, nicID string) error {
	c.mu.Lock()
	c.record("RemoveNIC")
	c.mu.Unlock()
	if c.RemoveNICFunc != nil {
		return c.RemoveNICFunc(ctx, vmID, nicID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[vmID]
	if !ok {
		return notFound("RemoveNIC", "no VM with id %q", vmID)
	}
	n := len(vm.NICs)
	vm.NICs = slices.DeleteFunc(vm.NICs, func(nic ovirt.NIC) bool { return nic.ID == nicID })
	if len(vm.NICs) == n {
		return notFound("RemoveNIC", "no NIC %q on VM %q", nicID, vmID)
	}
	return nil
}

// Power implements ovirt.Client: start makes the VM up at once on a host (holding its host
// devices), shutdown and stop make it down (freeing them); reboot and reset keep it up on its host,
// refused as the Engine refuses them (a VM not running: 409 ErrConflict; reset below cluster level
// 4.6, SetClusterLevel: 400 ErrInvalid). PowerActions lists the accepted actions.
func (c *Client) Power(ctx context.Context, vmID string, action ovirt.PowerAction) error {
	c.mu.Lock()
	c.record("Power")
	c.mu.Unlock()
	if c.PowerFunc != nil {
		return c.PowerFunc(ctx, vmID, action)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[vmID]
	if !ok {
		return notFound("Power", "no VM with id %q", vmID)
	}
	var err error
	switch action {
	case ovirt.PowerStart:
		err = c.start(vm)
	case ovirt.PowerShutdown, ovirt.PowerStop:
		vm.Status = ovirt.VMStatusDown
		vm.HostID, vm.HostName = "", ""
		c.releaseDevices(vmID)
	case ovirt.PowerReboot:
		err = c.reboot(vm)
	case ovirt.PowerReset:
		err = c.reset(vm)
	default:
		return invalid("Power", "unknown power action %q", action)
	}
	if err != nil {
		return err
	}
	c.recordPower(vmID, action)
	return nil
}

// recordPower notes an accepted power action. Called with c.mu held.
func (c *Client) recordPower(vmID string, action ovirt.PowerAction) {
	if c.powerActions == nil {
		c.powerActions = map[string][]ovirt.PowerAction{}
	}
	c.powerActions[vmID] = append(c.powerActions[vmID], action)
}

// RunOnce implements ovirt.Client: it starts the VM as Power start does and records the
// script of that run (RunOnceScript); nothing is stored on the VM.
func (c *Client) RunOnce(ctx context.Context, vmID string, customScript string) error {
	c.mu.Lock()
	c.record("RunOnce")
	c.mu.Unlock()
	if c.RunOnceFunc != nil {
		return c.RunOnceFunc(ctx, vmID, customScript)
	}
	if vmID == "" {
		return invalid("RunOnce", "VM id is empty")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[vmID]
	if !ok {
		return notFound("RunOnce", "no VM with id %q", vmID)
	}
	if err := c.start(vm); err != nil {
		return err
	}
	if c.runOnce == nil {
		c.runOnce = map[string]string{}
	}
	c.runOnce[vmID] = customScript
	c.recordPower(vmID, ovirt.PowerStart)
	return nil
}

// start places a VM on a host, if it has none, and makes it up, holding its host devices. c.mu
// is held.
func (c *Client) start(vm *ovirt.VM) error {
	if vm.HostID == "" {
		id, name, err := c.place(vm)
		if err != nil {
			return err
		}
		vm.HostID, vm.HostName = id, name
	}
	vm.Status = ovirt.VMStatusUp
	c.holdDevices(vm.ID)
	return nil
}

// RunOnceScript returns the custom script of the VM's last RunOnce; false when none.
func (c *Client) RunOnceScript(vmID string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.runOnce[vmID]
	return s, ok
}

// RemoveVM implements ovirt.Client.
func (c *Client) RemoveVM(ctx context.Context, vmID string) error {
	c.mu.Lock()
	c.record("RemoveVM")
	c.mu.Unlock()
	if c.RemoveVMFunc != nil {
		return c.RemoveVMFunc(ctx, vmID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.vms[vmID]; !ok {
		return notFound("RemoveVM", "no VM with id %q", vmID)
	}
	delete(c.vms, vmID)
	delete(c.specs, vmID)
	delete(c.networks, vmID)
	delete(c.scripts, vmID)
	delete(c.vmHostDevices, vmID)
	c.releaseDevices(vmID)
	// As the Engine's database does, the VM leaves its affinity groups.
	for _, g := range c.groups {
		g.VMIDs = slices.DeleteFunc(g.VMIDs, func(id string) bool { return id == vmID })
	}
	return nil
}

// Factory is the fake ovirt.Factory. By default every provider gets Client;
// ForProviderFunc overrides that (e.g. to return ErrAuth).
type Factory struct {
	// Client is returned for every provider unless ForProviderFunc is set.
	Client *Client
	// ForProviderFunc, when set, replaces ForProvider.
	ForProviderFunc func(ctx context.Context, cfg ovirt.Config) (ovirt.Client, error)

	mu       sync.Mutex
	configs  map[string]ovirt.Config
	forgot   []string
	isClosed bool
}

var _ ovirt.Factory = (*Factory)(nil)

// NewFactory returns a fake Factory handing out client.
func NewFactory(client *Client) *Factory {
	return &Factory{Client: client, configs: map[string]ovirt.Config{}}
}

// ForProvider implements ovirt.Factory and records cfg.
func (f *Factory) ForProvider(ctx context.Context, cfg ovirt.Config) (ovirt.Client, error) {
	f.mu.Lock()
	if f.configs == nil {
		f.configs = map[string]ovirt.Config{}
	}
	f.configs[cfg.Provider] = cfg
	f.mu.Unlock()
	if f.ForProviderFunc != nil {
		return f.ForProviderFunc(ctx, cfg)
	}
	if f.Client == nil {
		return nil, &ovirt.Error{Op: "Connect", Detail: "fake factory has no client", Kinds: []error{ovirt.ErrUnreachable}}
	}
	return f.Client, nil
}

// Config returns the last Config passed for provider.
func (f *Factory) Config(provider string) (ovirt.Config, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cfg, ok := f.configs[provider]
	return cfg, ok
}

// Forget implements ovirt.Factory and records the call.
func (f *Factory) Forget(provider string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.configs, provider)
	f.forgot = append(f.forgot, provider)
}

// Forgotten returns the providers passed to Forget, in order.
func (f *Factory) Forgotten() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.forgot)
}

// Close implements ovirt.Factory.
func (f *Factory) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.isClosed = true
}

// Closed reports whether Close was called.
func (f *Factory) Closed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.isClosed
}
