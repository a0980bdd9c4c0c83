package ovirt

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Client is the oVirt access reconcilers use. Every method takes the context
// first, honours its cancellation and is bounded in time even when the
// context has no deadline. Errors are *Error values (or *BreakerOpenError)
// matched with errors.Is against the sentinels of this package.
type Client interface {
	// Ping checks connectivity and credentials (GET /api).
	Ping(ctx context.Context) (EngineInfo, error)

	// EngineInfo returns what Ping returns, read once per connection (a
	// change of URL, credentials or TLS settings is a new connection): the
	// identity of the Engine the client talks to, at no cost per call.
	EngineInfo(ctx context.Context) (EngineInfo, error)

	// FindCluster returns the cluster with exactly this name, with its
	// network ids. ErrNotFound if there is none.
	FindCluster(ctx context.Context, name string) (*Cluster, error)

	// FindTemplate returns the template with exactly this name and status ok,
	// optionally restricted to the oVirt cluster named clusterName ("" for any);
	// among several versions the highest version_number wins. Disks included.
	FindTemplate(ctx context.Context, name, clusterName string) (*Template, error)

	// FindStorageDomain returns the storage domain with exactly this name.
	FindStorageDomain(ctx context.Context, name string) (*StorageDomain, error)

	// FindVnicProfile returns the vNIC profile with this name whose network
	// is one of the cluster's networks.
	FindVnicProfile(ctx context.Context, cluster *Cluster, name string) (*VnicProfile, error)

	// GetVM returns the VM with its disks, NICs and reported devices, in
	// one engine call when the engine honours follow (else one more per
	// collection it left out). ErrNotFound if it does not exist.
	GetVM(ctx context.Context, id string) (*VM, error)

	// ListDiskAttachments reads the VM's disks from its own disk-attachments
	// collection (GET /vms/{id}/diskattachments), never from an inline
	// collection: decisions about data safety (which disks a removal would
	// delete) rest on it. ErrNotFound if the VM does not exist.
	ListDiskAttachments(ctx context.Context, vmID string) ([]Disk, error)

	// FindVMsByName returns the VMs named exactly name (normally zero or
	// one), without disks, NICs or addresses.
	FindVMsByName(ctx context.Context, name string) ([]VM, error)

	// ListVMs returns one page of the VMs whose comment contains
	// q.CommentContains, ordered by name, with their disks, NICs, reported
	// devices and host names inline (GET /vms?search=...&max=...&follow=...):
	// one engine call per page, plus one per host not seen before on this
	// connection. When the engine leaves the collections out (it ignores
	// follow), the page says so (Complete false) instead of reading them VM
	// by VM. A VM created or removed between two calls shifts the later
	// pages. ErrInvalid, before any call, for an empty or unsearchable filter
	// (see VMQuery), a page below 1 or a page size outside 1..MaxVMPageSize.
	ListVMs(ctx context.Context, q VMQuery) (VMPage, error)

	// CreateVM creates a VM from a template and returns it as the engine
	// reported it (usually image_locked).
	CreateVM(ctx context.Context, spec VMSpec) (*VM, error)

	// UpdateDisk grows and/or renames a VM's disk in one call. The engine
	// refuses a shrink with ErrInvalid; callers check sizes first.
	UpdateDisk(ctx context.Context, vmID, diskID string, u DiskUpdate) error

	// AddDisk creates a new disk and attaches it to the VM in one request (POST
	// /vms/{id}/diskattachments with a disk that has no id) and returns it: its id as the Engine
	// reported it, the fields the Engine's answer leaves out (a real Engine returns only a
	// reference to the disk, whose image is then locked while it is created) from the spec, and
	// Status empty unless reported; GetVM reads its status. The Engine's refusal of a disk
	// configuration (cow preallocated, raw and sparse on a block domain) is ErrInvalid with its
	// message (HTTP 409); a VM that does not exist is ErrNotFound, a VM being created ErrLocked,
	// low space ErrConflict. ErrInvalid before any call for an empty VM id, alias or storage
	// domain, a size below 1, or an unknown interface or format.
	AddDisk(ctx context.Context, vmID string, spec DiskSpec) (*Disk, error)

	// DetachDisk detaches a disk from a VM without deleting it.
	DetachDisk(ctx context.Context, vmID, diskID string) error

	// AddNIC adds a virtio NIC on the vNIC profile.
	AddNIC(ctx context.Context, vmID, name, vnicProfileID string) (*NIC, error)

	// UpdateNIC moves a NIC to another vNIC profile.
	UpdateNIC(ctx context.Context, vmID, nicID, vnicProfileID string) error

	// RemoveNIC removes a NIC.
	RemoveNIC(ctx context.Context, vmID, nicID string) error

	// Power starts, shuts down, stops, reboots or resets a VM (POST /vms/{id}/start, /shutdown,
	// /stop, /reboot, /reset: one call). It returns once the engine accepted the action; callers
	// poll GetVM for the resulting status. The Engine refuses a reboot or a reset of a VM that does
	// not run (ErrConflict, "... because the VM is in Down status.") and a reset on a cluster level
	// below 4.6 (ErrInvalid with its message).
	Power(ctx context.Context, vmID string, action PowerAction) error

	// RunOnce starts a VM with "run once" (POST /vms/{id}/start with a <vm> and volatile): the
	// initialization custom script given applies to this run only and is never stored on the
	// VM; the Engine builds a payload from it only while the VM has never been up (the rest of
	// the initialization, the host name, is the VM's own). volatile makes a reboot of this run
	// a cold one, back to the VM's stored configuration. ErrInvalid, before any call, for an
	// empty VM id. The script is a secret: never logged.
	RunOnce(ctx context.Context, vmID string, customScript string) error

	// RemoveVM deletes the VM and every disk still attached to it.
	RemoveVM(ctx context.Context, vmID string) error

	// UpdateVM changes the VM's comment (where the owner marker lives),
	// replaces or clears its initialization's custom script (the bootstrap
	// data) and/or replaces its initialization's network configuration
	// (nic_configurations, dns_servers, dns_search), in one request; the rest
	// of the initialization stays. The Engine applies all of them on a VM in
	// any status, without a next-run configuration, and gives the
	// initialization to the guest at its first run only; it refuses while the
	// VM is being created (ErrLocked). An invalid network configuration, or
	// CustomScript with ClearCustomScript, is ErrInvalid before any call.
	UpdateVM(ctx context.Context, vmID string, u VMUpdate) error

	// GetCluster returns the cluster with this id (what FindCluster returns). ErrNotFound if
	// there is none.
	GetCluster(ctx context.Context, id string) (*Cluster, error)

	// ListAffinityGroups returns the affinity groups of the cluster with their member VMs
	// (GET /clusters/{id}/affinitygroups). ErrNotFound if the cluster does not exist.
	ListAffinityGroups(ctx context.Context, clusterID string) ([]AffinityGroup, error)

	// CreateAffinityGroup creates a VM affinity group (its VM rule enabled, no host rule) and
	// returns it as the Engine reported it. ErrConflict when the cluster already has a group of
	// that name.
	CreateAffinityGroup(ctx context.Context, spec AffinityGroupSpec) (*AffinityGroup, error)

	// UpdateAffinityGroup changes whether the group's VM rule is enforcing.
	UpdateAffinityGroup(ctx context.Context, clusterID, groupID string, enforcing bool) error

	// RemoveAffinityGroup deletes the group; its VMs are not touched. ErrNotFound if it does not
	// exist.
	RemoveAffinityGroup(ctx context.Context, clusterID, groupID string) error

	// AddVMToAffinityGroup adds the VM to the group. A VM that is already a member is not an
	// error.
	AddVMToAffinityGroup(ctx context.Context, clusterID, groupID, vmID string) error

	// RemoveVMFromAffinityGroup removes the VM from the group. A VM that is not a member, or a
	// group that does not exist, is not an error.
	RemoveVMFromAffinityGroup(ctx context.Context, clusterID, groupID, vmID string) error

	// FindTag returns the tag with exactly this name (GET /tags). ErrNotFound if there is none.
	FindTag(ctx context.Context, name string) (*Tag, error)
	// GetTag returns the tag with this id (GET /tags/{id}). ErrNotFound if it does not exist.
	GetTag(ctx context.Context, id string) (*Tag, error)
	// CreateTag creates a tag under the root tag and returns it as the Engine reported it.
	// ErrConflict when a tag of that name exists (the Engine's 409 "The specified Tag name
	// already exists."); ErrInvalid for a name the Engine refuses.
	CreateTag(ctx context.Context, name, description string) (*Tag, error)
	// AssignTag assigns the tag to the VM (POST /vms/{id}/tags). A tag already assigned is not
	// an error; ErrNotFound when the VM or the tag does not exist (the Engine answers those with
	// a 400 "Internal Engine Error": the client then reads the tag and the VM to tell).
	AssignTag(ctx context.Context, vmID, tagID string) error
	// UpdateTagDescription replaces the tag's description (PUT /tags/{id}). ErrNotFound if the
	// tag does not exist.
	UpdateTagDescription(ctx context.Context, id, description string) error

	// ListHosts returns the hosts of the oVirt cluster named clusterName (GET
	// /hosts?search=cluster=<name>), every status. One call, plus FindCluster's (cached) to know
	// the cluster's id: the hosts of other clusters a wildcard in the name would match are left
	// out. ErrNotFound if there is no such cluster; ErrInvalid before any call for an empty name.
	// The Engine shows a user only the hosts it has a permission on.
	ListHosts(ctx context.Context, clusterName string) ([]Host, error)
	// ListHostDevices returns the devices of the host (GET /hosts/{id}/devices), one call. A
	// device's VMID is the VM running with it; devices configured on a stopped VM look free (the
	// Engine does not say). ErrNotFound if the host does not exist (an empty answer costs one
	// more call, GET /hosts/{id}, to tell). The Engine answers it to administrator roles only: a
	// user role gets its 400 "Query execution failed due to insufficient permissions."
	// (ErrInvalid).
	ListHostDevices(ctx context.Context, hostID string) ([]HostDevice, error)
	// ListVMHostDevices returns the host devices configured on the VM (GET /vms/{id}/hostdevices),
	// placeholders included, each with the VM as its VMID: one call, and GET /vms/{id} when the
	// answer is empty (the Engine does not look the VM up). ErrNotFound if the VM does not exist.
	ListVMHostDevices(ctx context.Context, vmID string) ([]HostDevice, error)
	// AttachHostDevice attaches the host device named deviceName to the VM (POST
	// /vms/{id}/hostdevices with <host_device><name/></host_device>, one call); the Engine adds
	// its whole IOMMU group (the others as placeholders) and accepts a PCI device configured on
	// another VM (only a start tells). The Engine's refusals (VM not down, not pinned to exactly
	// one host, device not on that host) are ErrInvalid with its message; a VM being created
	// ErrLocked; the VM missing ErrNotFound. ErrInvalid before any call for empty arguments.
	// Fenced (a write).
	AttachHostDevice(ctx context.Context, vmID, deviceName string) error
	// DetachHostDevice removes the VM's host device with this name (DELETE
	// /vms/{id}/hostdevices/{id}, the id being the hex of the name: one call); the Engine drops
	// the device's IOMMU group when only placeholders remain. A device not attached (the Engine's
	// 404) is not an error, nor a VM that does not exist. The Engine's refusal for a VM not down
	// is ErrInvalid with its message. ErrInvalid before any call for empty arguments. Fenced.
	DetachHostDevice(ctx context.Context, vmID, deviceName string) error
	// PinVM pins the VM to one host (PUT /vms/{id} with placement_policy affinity pinned, hosts
	// [hostID]: one call); the Engine drops the VM's host devices when the pinned host changes.
	// A host that does not exist or is in another cluster is ErrInvalid with the Engine's
	// message, a VM that does not exist ErrNotFound, a VM being created ErrLocked. ErrInvalid
	// before any call for empty arguments. Fenced.
	PinVM(ctx context.Context, vmID, hostID string) error
}

// TLS selects how the engine's certificate is verified. With neither field
// set the system CA pool is used.
type TLS struct {
	// Insecure skips certificate verification (development only). It wins
	// over CAPEM.
	Insecure bool
	// CAPEM is a PEM bundle of CA certificates trusted for this engine, and
	// the only ones: it gets its own pool and is never added to the system
	// pool.
	CAPEM []byte
}

// Credentials are the engine account used for SSO.
type Credentials struct {
	Username string
	Password string
}

// Config is what the Factory needs to reach one OVirtProvider's engine. It
// holds no Kubernetes types: the manager resolves the Secret beforehand.
type Config struct {
	// Provider is the OVirtProvider name: the cache key, the metrics label
	// and the rate limiter key.
	Provider string
	// URL is the API entry point, e.g. https://engine.example.com/ovirt-engine/api.
	URL         string
	Credentials Credentials
	TLS         TLS
}

// Fingerprint identifies the connection settings (URL, username, password,
// TLS) without revealing the password: a change of any of them means a new
// connection. It is safe to log.
func (c Config) Fingerprint() string {
	h := sha256.New()
	insecure := "0"
	if c.TLS.Insecure {
		insecure = "1"
	}
	// Length-prefix every field so that no two configs share a fingerprint by
	// shifting bytes between adjacent fields.
	for _, part := range []string{c.URL, c.Credentials.Username, c.Credentials.Password, insecure, string(c.TLS.CAPEM)} {
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(part))))
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Factory hands out Clients, one shared connection per provider. It is
// injected into reconcilers so tests can substitute a fake.
type Factory interface {
	// ForProvider returns a connected Client for the provider, reusing the
	// cached connection when cfg is unchanged. A changed URL, credential or
	// TLS setting for the same Provider closes and replaces the old
	// connection. The error tells whether the engine is reachable and the
	// credentials work (ErrUnreachable, ErrTLS, ErrAuth, *BreakerOpenError).
	ForProvider(ctx context.Context, cfg Config) (Client, error)
	// Forget closes the provider's connection and drops its state (the
	// OVirtProvider was deleted).
	Forget(provider string)
	// Close closes every connection; the Factory must not be used afterwards.
	Close()
}
