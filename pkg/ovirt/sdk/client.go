package sdk

import (
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// client is the ovirt.Client of one session. It is a thin handle: reconcilers
// may keep it for one reconcile; a settings change closes it (ErrClosed).
type client struct {
	s *session
}

var _ ovirt.Client = (*client)(nil)

// Follow expressions: one GET returns the VM with what the lifecycle needs.
const (
	vmFollow       = "disk_attachments.disk,nics.reported_devices,tags"
	templateFollow = "disk_attachments.disk"
	clusterFollow  = "networks"
)

// searchValue quotes a name for the engine's search language. Quotes cannot
// be escaped there, so names containing one are refused; '*' (a wildcard)
// only widens the search and the exact-name post-filter removes the extras.
func searchValue(op, what, name string) (string, error) {
	if name == "" {
		return "", invalid(op, "%s name is empty", what)
	}
	if strings.ContainsAny(name, "\"\n") {
		return "", invalid(op, "%s name %q contains a character the engine's search cannot express", what, name)
	}
	return `"` + name + `"`, nil
}

// Ping implements ovirt.Client.
func (c *client) Ping(ctx context.Context) (ovirt.EngineInfo, error) {
	return invoke(ctx, c.s, "Ping", func(conn *ovirtsdk.Connection) (ovirt.EngineInfo, error) {
		resp, err := conn.SystemService().Get().Send()
		if err != nil {
			return ovirt.EngineInfo{}, err
		}
		var info ovirt.EngineInfo
		api, ok := resp.Api()
		if !ok {
			return info, nil
		}
		if pi, ok := api.ProductInfo(); ok {
			info.ProductName, _ = pi.Name()
			info.InstanceID, _ = pi.InstanceId()
			if v, ok := pi.Version(); ok {
				info.Version, _ = v.FullVersion()
				if info.Version == "" {
					major, _ := v.Major()
					minor, _ := v.Minor()
					info.Version = fmt.Sprintf("%d.%d", major, minor)
				}
			}
		}
		return info, nil
	})
}

// FindCluster implements ovirt.Client.
func (c *client) FindCluster(ctx context.Context, name string) (*ovirt.Cluster, error) {
	const op = "FindCluster"
	q, err := searchValue(op, "cluster", name)
	if err != nil {
		return nil, err
	}
	return cachedLookup(ctx, c.s.cache, "cluster\x00"+name, cloneCluster, func() (*ovirt.Cluster, error) {
		cl, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (*ovirt.Cluster, error) {
			resp, err := conn.SystemService().ClustersService().List().
				Search("name=" + q).CaseSensitive(true).Follow(clusterFollow).Send()
			if err != nil {
				return nil, err
			}
			if list, ok := resp.Clusters(); ok {
				for _, cl := range list.Slice() {
					if n, _ := cl.Name(); n == name {
						return toCluster(cl), nil
					}
				}
			}
			return nil, nil
		})
		if err != nil {
			return nil, err
		}
		if cl == nil {
			return nil, notFound(op, "no cluster named %q", name)
		}
		return c.completeCluster(ctx, cl)
	})
}

// GetCluster implements ovirt.Client with GET /clusters/{id}?follow=networks, cached like
// FindCluster.
func (c *client) GetCluster(ctx context.Context, id string) (*ovirt.Cluster, error) {
	const op = "GetCluster"
	if id == "" {
		return nil, invalid(op, "cluster id is empty")
	}
	return cachedLookup(ctx, c.s.cache, "clusterid\x00"+id, cloneCluster, func() (*ovirt.Cluster, error) {
		cl, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (*ovirt.Cluster, error) {
			resp, err := conn.SystemService().ClustersService().ClusterService(id).Get().Follow(clusterFollow).Send()
			if err != nil {
				return nil, err
			}
			got, ok := resp.Cluster()
			if !ok {
				return nil, fmt.Errorf("engine answered without the cluster")
			}
			return toCluster(got), nil
		})
		if err != nil {
			return nil, err
		}
		if cl.ID == "" {
			cl.ID = id
		}
		return c.completeCluster(ctx, cl)
	})
}

// completeCluster reads the networks the engine did not inline and remembers the cluster's data
// center for FindTemplate.
func (c *client) completeCluster(ctx context.Context, cl *ovirt.Cluster) (*ovirt.Cluster, error) {
	if cl.DataCenterID != "" {
		c.s.clusterDCs.put(cl.ID, cl.DataCenterID)
	}
	if len(cl.NetworkIDs) > 0 {
		return cl, nil
	}
	// The engine did not follow the networks link (or the cluster really has none, which a
	// second call confirms cheaply).
	ids, err := invoke(ctx, c.s, "ListClusterNetworks", func(conn *ovirtsdk.Connection) ([]string, error) {
		resp, err := conn.SystemService().ClustersService().ClusterService(cl.ID).NetworksService().List().Send()
		if err != nil {
			return nil, err
		}
		if nets, ok := resp.Networks(); ok {
			return networkIDs(nets), nil
		}
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	cl.NetworkIDs = ids
	return cl, nil
}

// FindTemplate implements ovirt.Client.
func (c *client) FindTemplate(ctx context.Context, name, clusterName string) (*ovirt.Template, error) {
	const op = "FindTemplate"
	q, err := searchValue(op, "template", name)
	if err != nil {
		return nil, err
	}
	search := "name=" + q
	if clusterName != "" {
		cq, err := searchValue(op, "cluster", clusterName)
		if err != nil {
			return nil, err
		}
		search += " and cluster=" + cq
	}
	return cachedLookup(ctx, c.s.cache, "template\x00"+name+"\x00"+clusterName, cloneTemplate, func() (*ovirt.Template, error) {
		type found struct {
			tpl    *ovirt.Template
			locked bool
		}
		res, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (found, error) {
			resp, err := conn.SystemService().TemplatesService().List().
				Search(search).CaseSensitive(true).Follow(templateFollow).Send()
			if err != nil {
				return found{}, err
			}
			list, ok := resp.Templates()
			if !ok {
				return found{}, nil
			}
			// Several versions can share a name: take the highest usable one.
			var best *ovirtsdk.Template
			var locked bool
			for _, t := range list.Slice() {
				if n, _ := t.Name(); n != name {
					continue
				}
				switch status, _ := t.Status(); status {
				case ovirtsdk.TEMPLATESTATUS_OK:
					if best == nil || templateVersion(t) > templateVersion(best) {
						best = t
					}
				case ovirtsdk.TEMPLATESTATUS_LOCKED:
					locked = true
				}
			}
			if best == nil {
				return found{locked: locked}, nil
			}
			return found{tpl: toTemplate(best)}, nil
		})
		if err != nil {
			return nil, err
		}
		if res.tpl == nil {
			if res.locked {
				return nil, &ovirt.Error{Op: op, Detail: fmt.Sprintf("template %q is locked", name), Kinds: []error{ovirt.ErrLocked}}
			}
			where := ""
			if clusterName != "" {
				where = fmt.Sprintf(" in cluster %q", clusterName)
			}
			return nil, notFound(op, "no template named %q with status ok%s", name, where)
		}
		tpl := res.tpl
		if len(tpl.Disks) == 0 || tpl.Disks[0].Alias == "" {
			// The engine did not follow disk_attachments.disk: ask for them.
			disks, err := invoke(ctx, c.s, "ListTemplateDisks", func(conn *ovirtsdk.Connection) ([]ovirt.Disk, error) {
				resp, err := conn.SystemService().TemplatesService().TemplateService(tpl.ID).
					DiskAttachmentsService().List().Follow("disk").Send()
				if err != nil {
					return nil, err
				}
				if atts, ok := resp.Attachments(); ok {
					return toDisks(atts), nil
				}
				return nil, nil
			})
			if err != nil {
				return nil, err
			}
			tpl.Disks = disks
		}
		dc, err := c.clusterDataCenter(ctx, tpl.ClusterID)
		if err != nil {
			return nil, err
		}
		tpl.DataCenterID = dc
		return tpl, nil
	})
}

// FindStorageDomain implements ovirt.Client. The top-level collection
// leaves the status of a domain attached to a data center empty; its real
// status (active, maintenance, inactive, ...) is only under the data center
// (GET /datacenters/{dc}/storagedomains/{sd}), so it is read there: a domain
// in maintenance is reported before POST /vms, not as a late 409.
func (c *client) FindStorageDomain(ctx context.Context, name string) (*ovirt.StorageDomain, error) {
	const op = "FindStorageDomain"
	q, err := searchValue(op, "storage domain", name)
	if err != nil {
		return nil, err
	}
	type found struct {
		sd *ovirtsdk.StorageDomain
		dc string
	}
	return cachedLookup(ctx, c.s.cache, "storagedomain\x00"+name, cloneStorageDomain, func() (*ovirt.StorageDomain, error) {
		f, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (found, error) {
			resp, err := conn.SystemService().StorageDomainsService().List().
				Search("name=" + q).CaseSensitive(true).Send()
			if err != nil {
				return found{}, err
			}
			if list, ok := resp.StorageDomains(); ok {
				for _, sd := range list.Slice() {
					if n, _ := sd.Name(); n == name {
						return found{sd: sd, dc: dataCenterOf(sd)}, nil
					}
				}
			}
			return found{}, nil
		})
		if err != nil {
			return nil, err
		}
		if f.sd == nil {
			return nil, notFound(op, "no storage domain named %q", name)
		}
		if f.dc == "" {
			// Unattached: the top-level status is the real one.
			return toStorageDomain(f.sd, ""), nil
		}
		id, _ := f.sd.Id()
		status, err := invoke(ctx, c.s, "GetAttachedStorageDomain", func(conn *ovirtsdk.Connection) (ovirtsdk.StorageDomainStatus, error) {
			resp, err := conn.SystemService().DataCentersService().DataCenterService(f.dc).StorageDomainsService().
				StorageDomainService(id).Get().Send()
			if err != nil {
				return "", err
			}
			attached, ok := resp.StorageDomain()
			if !ok {
				return "", fmt.Errorf("engine answered without the storage domain")
			}
			st, _ := attached.Status()
			return st, nil
		})
		if err != nil {
			return nil, err
		}
		return toStorageDomain(f.sd, status), nil
	})
}

// dataCenterOf returns the id of the data center a storage domain is attached to, "" if none.
func dataCenterOf(sd *ovirtsdk.StorageDomain) string {
	if dcs, ok := sd.DataCenters(); ok {
		for _, dc := range dcs.Slice() {
			if id, ok := dc.Id(); ok && id != "" {
				return id
			}
		}
	}
	if dc, ok := sd.DataCenter(); ok {
		if id, ok := dc.Id(); ok {
			return id
		}
	}
	return ""
}

// FindVnicProfile implements ovirt.Client. Profiles cannot be searched and
// their names repeat across data centers (every network gets a profile named
// after it), so the list is filtered by name and by the cluster's networks.
func (c *client) FindVnicProfile(ctx context.Context, cluster *ovirt.Cluster, name string) (*ovirt.VnicProfile, error) {
	const op = "FindVnicProfile"
	if cluster == nil || cluster.ID == "" {
		return nil, invalid(op, "cluster is required")
	}
	if name == "" {
		return nil, invalid(op, "vNIC profile name is empty")
	}
	return cachedLookup(ctx, c.s.cache, "vnicprofile\x00"+cluster.ID+"\x00"+name, cloneVnicProfile, func() (*ovirt.VnicProfile, error) {
		profiles, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) ([]*ovirt.VnicProfile, error) {
			resp, err := conn.SystemService().VnicProfilesService().List().Send()
			if err != nil {
				return nil, err
			}
			var out []*ovirt.VnicProfile
			if list, ok := resp.Profiles(); ok {
				for _, p := range list.Slice() {
					if n, _ := p.Name(); n == name {
						out = append(out, toVnicProfile(p))
					}
				}
			}
			return out, nil
		})
		if err != nil {
			return nil, err
		}
		var matches []*ovirt.VnicProfile
		for _, p := range profiles {
			if slices.Contains(cluster.NetworkIDs, p.NetworkID) {
				matches = append(matches, p)
			}
		}
		if len(matches) == 0 {
			return nil, notFound(op, "no vNIC profile named %q on the networks of cluster %q", name, cluster.Name)
		}
		// Deterministic when two networks of the cluster have a profile of
		// that name.
		return slices.MinFunc(matches, func(a, b *ovirt.VnicProfile) int { return cmp.Compare(a.ID, b.ID) }), nil
	})
}

// GetVM implements ovirt.Client. The Engine returns the initialization's
// custom script (bootstrap data, a secret) in every VM answer, with or without
// all_content: the conversion never copies it out of the SDK's VM.
//
// An engine or proxy may ignore follow and return only <link> elements, for
// which go-ovirt yields empty collections: an empty inline disk list is never
// taken as a fact. The disks and NICs are then read from their own
// endpoints, and the reported devices from the VM's collection, so that no
// decision (resize, NIC reconciliation, addresses) rests on a missing list.
// When follow is honoured it is one call.
//
// Reads of VMs that wait for the same rate-limit token share one call (vmReads).
//
// The host's name costs one GET /hosts/{id} per host and session (hostName).
func (c *client) GetVM(ctx context.Context, id string) (*ovirt.VM, error) {
	const op = "GetVM"
	if id == "" {
		return nil, invalid(op, "VM id is empty")
	}
	if !isUUID(id) {
		// Not something a search can name (the Engine's ids are UUIDs): read it on its own.
		return c.getVM(ctx, id)
	}
	return c.s.p.reads.get(ctx, c, id)
}

// getVM reads one VM with one GET /vms/{id}.
func (c *client) getVM(ctx context.Context, id string) (*ovirt.VM, error) {
	vm, err := invoke(ctx, c.s, "GetVM", func(conn *ovirtsdk.Connection) (*ovirt.VM, error) {
		return readVM(conn, id)
	})
	if err != nil {
		return nil, err
	}
	return c.completeVM(ctx, id, vm)
}

// readVM is the SDK call of GetVM.
func readVM(conn *ovirtsdk.Connection, id string) (*ovirt.VM, error) {
	resp, err := conn.SystemService().VmsService().VmService(id).Get().Follow(vmFollow).Send()
	if err != nil {
		return nil, err
	}
	vm, ok := resp.Vm()
	if !ok {
		return nil, fmt.Errorf("engine answered without a VM")
	}
	return toFollowedVM(vm), nil
}

// completeVM reads what an answer that ignored follow left out, and names the VM's host.
func (c *client) completeVM(ctx context.Context, id string, vm *ovirt.VM) (*ovirt.VM, error) {
	var err error
	// A VM made from a template always has disk attachments: none inline means
	// the engine did not follow the links, so the NICs inline are not a fact
	// either. (A VM without NICs is normal before the NIC phase; with its disks
	// inline that costs nothing more.)
	if len(vm.Disks) == 0 {
		if vm.Disks, err = c.ListDiskAttachments(ctx, id); err != nil {
			return nil, err
		}
		if len(vm.NICs) == 0 {
			if vm.NICs, vm.ReportedDevices, err = c.listNICs(ctx, id); err != nil {
				return nil, err
			}
		}
	}
	if err := c.fillHostName(ctx, vm); err != nil {
		return nil, err
	}
	return vm, nil
}

// ListDiskAttachments implements ovirt.Client. The attachment id is the
// disk id, and bootable lives on the attachment, so the ids are complete for
// the system-disk check whatever the engine does with follow=disk. When it
// ignores follow, each disk (alias, size, status) is read on its own
// (GET /disks/{id}): a size of 0 would be taken for a disk to grow.
func (c *client) ListDiskAttachments(ctx context.Context, vmID string) ([]ovirt.Disk, error) {
	const op = "ListDiskAttachments"
	if vmID == "" {
		return nil, invalid(op, "VM id is empty")
	}
	disks, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) ([]ovirt.Disk, error) {
		resp, err := conn.SystemService().VmsService().VmService(vmID).DiskAttachmentsService().List().Follow("disk").Send()
		if err != nil {
			return nil, err
		}
		disks := []ovirt.Disk{}
		if atts, ok := resp.Attachments(); ok {
			disks = append(disks, toDisks(atts)...)
		}
		return disks, nil
	})
	if err != nil {
		return nil, err
	}
	for i, d := range disks {
		if d.ProvisionedSize != 0 || d.Status != "" {
			continue
		}
		full, err := invoke(ctx, c.s, "GetDisk", func(conn *ovirtsdk.Connection) (*ovirtsdk.Disk, error) {
			resp, err := conn.SystemService().DisksService().DiskService(d.ID).Get().Send()
			if err != nil {
				return nil, err
			}
			disk, ok := resp.Disk()
			if !ok {
				return nil, fmt.Errorf("engine answered without the disk")
			}
			return disk, nil
		})
		if err != nil {
			return nil, err
		}
		disks[i] = mergeDisk(d, full)
	}
	return disks, nil
}

// listNICs reads the VM's NICs from their own collection and the guest's
// reported devices from the VM's collection (which holds every guest
// interface, as each NIC's does).
func (c *client) listNICs(ctx context.Context, vmID string) ([]ovirt.NIC, []ovirt.ReportedDevice, error) {
	type nicsAndDevices struct {
		nics []ovirt.NIC
		devs []ovirt.ReportedDevice
	}
	got, err := invoke(ctx, c.s, "ListNICs", func(conn *ovirtsdk.Connection) (nicsAndDevices, error) {
		resp, err := conn.SystemService().VmsService().VmService(vmID).NicsService().List().Follow("reported_devices").Send()
		if err != nil {
			return nicsAndDevices{}, err
		}
		var out nicsAndDevices
		if list, ok := resp.Nics(); ok {
			out.nics, out.devs = toNICs(list, nil)
		}
		return out, nil
	})
	nics, devs := got.nics, got.devs
	if err != nil || len(nics) == 0 || len(devs) > 0 {
		return nics, devs, err
	}
	devs, err = invoke(ctx, c.s, "ListReportedDevices", func(conn *ovirtsdk.Connection) ([]ovirt.ReportedDevice, error) {
		resp, err := conn.SystemService().VmsService().VmService(vmID).ReportedDevicesService().List().Send()
		if err != nil {
			return nil, err
		}
		var devs []ovirt.ReportedDevice
		if list, ok := resp.ReportedDevice(); ok {
			devs = appendDevices(devs, list)
		}
		return devs, nil
	})
	return nics, devs, err
}

// FindVMsByName implements ovirt.Client.
func (c *client) FindVMsByName(ctx context.Context, name string) ([]ovirt.VM, error) {
	const op = "FindVMsByName"
	q, err := searchValue(op, "VM", name)
	if err != nil {
		return nil, err
	}
	return invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) ([]ovirt.VM, error) {
		resp, err := conn.SystemService().VmsService().List().Search("name=" + q).CaseSensitive(true).Send()
		if err != nil {
			return nil, err
		}
		var out []ovirt.VM
		if list, ok := resp.Vms(); ok {
			for _, v := range list.Slice() {
				if n, _ := v.Name(); n == name {
					out = append(out, *toVM(v))
				}
			}
		}
		return out, nil
	})
}

// CreateVM implements ovirt.Client: POST /vms?clone=true|false[&auto_pinning_policy=...]
// [&correlation_id=...] with the VM buildVM makes.
func (c *client) CreateVM(ctx context.Context, spec ovirt.VMSpec) (*ovirt.VM, error) {
	const op = "CreateVM"
	vm, err := buildVM(op, spec)
	if err != nil {
		return nil, err
	}
	created, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (*ovirt.VM, error) {
		req := conn.SystemService().VmsService().Add().Vm(vm).Clone(spec.Clone)
		if p := spec.Performance.AutoPinningPolicy; p != "" {
			req.AutoPinningPolicy(ovirtsdk.AutoPinningPolicy(p))
		}
		if spec.CorrelationID != "" {
			req.Query("correlation_id", spec.CorrelationID)
		}
		resp, err := req.Send()
		if err != nil {
			return nil, err
		}
		v, ok := resp.Vm()
		if !ok {
			return nil, fmt.Errorf("engine answered without the created VM")
		}
		return toVM(v), nil
	})
	if engineSays(err, phraseDiskConfiguration, phraseDedicatedHost) {
		// A disk format and allocation the target domain does not take, or a pinned host that
		// does not exist or is in another cluster: no lock, no name in use, and the same request
		// will always be refused.
		return nil, withKinds(err, ovirt.ErrInvalid)
	}
	c.dropLookupsIfNotFound(err)
	if errors.Is(err, ovirt.ErrConflict) {
		// Low space or an illegal storage-domain status: the cached domain
		// status is stale; the retry reads it again.
		c.s.cache.clear()
	}
	return created, err
}

// phraseDiskConfiguration is ACTION_TYPE_FAILED_DISK_CONFIGURATION_NOT_SUPPORTED's text, in lower
// case: "Cannot add Virtual Disk. Disk configuration (COW Preallocated backup-None) is
// incompatible with the storage domain type." (ImagesHandler.checkImageConfiguration, CONFLICT:
// 409): cow preallocated anywhere (without incremental backup), raw sparse on block storage.
const phraseDiskConfiguration = "is incompatible with the storage domain type"

// customPropertyName is what the Engine takes as a custom property's name
// (CustomPropertiesUtils.LEGITIMATE_CHARACTER_FOR_KEY); a value may hold anything but ';'.
var customPropertyName = regexp.MustCompile(`^[a-zA-Z0-9_]+$`)

// validateVMSpec refuses what buildVM cannot send as asked, or what the Engine would refuse
// whatever its state, naming the field.
func validateVMSpec(op string, spec ovirt.VMSpec) error {
	overrides := spec.StorageDomainID != "" || spec.DiskFormat != "" || spec.DiskSparse != nil
	perf := spec.Performance
	switch {
	case spec.Name == "":
		return invalid(op, "VM name is empty")
	case spec.ClusterID == "":
		return invalid(op, "cluster id is empty")
	case spec.TemplateID == "":
		return invalid(op, "template id is empty")
	case spec.Sockets < 0 || spec.Cores < 0 || spec.Threads < 0 || spec.MemoryBytes < 0 || spec.GuaranteedMemoryBytes < 0:
		return invalid(op, "CPU and memory values must not be negative")
	case spec.MemoryBytes > 0 && spec.GuaranteedMemoryBytes > spec.MemoryBytes:
		// The engine refuses it too ("Physical Memory Guaranteed cannot
		// exceed Memory Size"); saying so here saves a call.
		return invalid(op, "guaranteed memory %d exceeds memory %d", spec.GuaranteedMemoryBytes, spec.MemoryBytes)
	case spec.DiskFormat != "" && spec.DiskFormat != ovirt.DiskFormatCow && spec.DiskFormat != ovirt.DiskFormatRaw:
		return invalid(op, "DiskFormat %q is neither %q nor %q", spec.DiskFormat, ovirt.DiskFormatCow, ovirt.DiskFormatRaw)
	case spec.Clone && overrides && len(spec.TemplateDisks) == 0:
		return invalid(op, "a disk override (StorageDomainID, DiskFormat, DiskSparse) needs the template's disks (TemplateDisks)")
	case perf.CPUMode != "" && !slices.Contains([]string{ovirt.CPUModeHostPassthrough, ovirt.CPUModeHostModel, ovirt.CPUModeCustom}, perf.CPUMode):
		return invalid(op, "Performance.CPUMode %q is not one of host_passthrough, host_model, custom", perf.CPUMode)
	case perf.AutoPinningPolicy != "" && !slices.Contains([]string{ovirt.AutoPinningDisabled, ovirt.AutoPinningExisting, ovirt.AutoPinningAdjust}, perf.AutoPinningPolicy):
		return invalid(op, "Performance.AutoPinningPolicy %q is not one of disabled, existing, adjust", perf.AutoPinningPolicy)
	case perf.AutoPinningPolicy != "" && (spec.Sockets > 0 || spec.Cores > 0 || spec.Threads > 0):
		// BackendVmsResource.addAutoPinningPolicy answers 409 "Attempt to automatically
		// configure CPU topology or pinning while CPU topology or pinning is also specified."
		return invalid(op, "Performance.AutoPinningPolicy %q cannot be combined with a CPU topology (Sockets, Cores, Threads): the Engine refuses both at once", perf.AutoPinningPolicy)
	case perf.IOThreads < 0:
		return invalid(op, "Performance.IOThreads %d is negative", perf.IOThreads)
	}
	if ha := spec.HighAvailability; ha != nil {
		switch {
		case ha.Priority < 0:
			return invalid(op, "HighAvailability.Priority %d is negative", ha.Priority)
		case ha.ResumeBehaviour != "" && !slices.Contains([]string{string(ovirtsdk.VMSTORAGEERRORRESUMEBEHAVIOUR_AUTO_RESUME),
			string(ovirtsdk.VMSTORAGEERRORRESUMEBEHAVIOUR_LEAVE_PAUSED), string(ovirtsdk.VMSTORAGEERRORRESUMEBEHAVIOUR_KILL)}, ha.ResumeBehaviour):
			return invalid(op, "HighAvailability.ResumeBehaviour %q is not one of auto_resume, leave_paused, kill", ha.ResumeBehaviour)
		}
	}
	seen := map[string]bool{}
	for i, p := range spec.CustomProperties {
		switch {
		case !customPropertyName.MatchString(p.Name):
			return invalid(op, "CustomProperties[%d].Name %q is not a custom property name (letters, digits, '_')", i, p.Name)
		case strings.Contains(p.Value, ";"):
			return invalid(op, "CustomProperties[%d].Value of %q holds a ';' (the Engine's separator)", i, p.Name)
		case seen[p.Name]:
			return invalid(op, "CustomProperties[%d].Name %q is given twice", i, p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// buildVM translates a VMSpec into the engine's VM; unset fields are left
// out so the engine inherits them from the template. The auto pinning policy is a parameter of
// the add request, not part of the VM (CreateVM).
func buildVM(op string, spec ovirt.VMSpec) (*ovirtsdk.Vm, error) {
	if err := validateVMSpec(op, spec); err != nil {
		return nil, err
	}
	perf := spec.Performance

	b := ovirtsdk.NewVmBuilder().
		Name(xmlText(spec.Name)).
		ClusterBuilder(ovirtsdk.NewClusterBuilder().Id(spec.ClusterID)).
		TemplateBuilder(ovirtsdk.NewTemplateBuilder().Id(spec.TemplateID))
	if spec.Comment != "" {
		b.Comment(xmlText(spec.Comment))
	}
	if spec.Description != "" {
		b.Description(xmlText(spec.Description))
	}
	if spec.Type != "" {
		b.Type(ovirtsdk.VmType(spec.Type))
	}
	if spec.Sockets > 0 || spec.Cores > 0 || spec.Threads > 0 || perf.CPUMode != "" {
		cb := ovirtsdk.NewCpuBuilder()
		if spec.Sockets > 0 || spec.Cores > 0 || spec.Threads > 0 {
			// The engine maps each topology field only when it is present, so
			// the others keep the template's values.
			tb := ovirtsdk.NewCpuTopologyBuilder()
			if spec.Sockets > 0 {
				tb.Sockets(int64(spec.Sockets))
			}
			if spec.Cores > 0 {
				tb.Cores(int64(spec.Cores))
			}
			if spec.Threads > 0 {
				tb.Threads(int64(spec.Threads))
			}
			cb.TopologyBuilder(tb)
		}
		if perf.CPUMode != "" {
			cb.Mode(ovirtsdk.CpuMode(perf.CPUMode))
		}
		b.CpuBuilder(cb)
	}
	if spec.MemoryBytes > 0 || spec.GuaranteedMemoryBytes > 0 || perf.Ballooning != nil {
		mp := ovirtsdk.NewMemoryPolicyBuilder()
		if spec.MemoryBytes > 0 {
			b.Memory(spec.MemoryBytes)
			// The hot-plug ceiling would otherwise stay the template's,
			// which may be below the new memory size.
			mp.Max(spec.MemoryBytes)
		}
		if spec.GuaranteedMemoryBytes > 0 {
			mp.Guaranteed(spec.GuaranteedMemoryBytes)
		}
		if perf.Ballooning != nil {
			mp.Ballooning(*perf.Ballooning)
		}
		b.MemoryPolicyBuilder(mp)
	}
	if perf.IOThreads > 0 {
		b.IoBuilder(ovirtsdk.NewIoBuilder().Threads(int64(perf.IOThreads)))
	}
	if perf.MultiQueues != nil {
		b.MultiQueuesEnabled(*perf.MultiQueues)
	}
	if ha := spec.HighAvailability; ha != nil {
		hb := ovirtsdk.NewHighAvailabilityBuilder().Enabled(ha.Enabled)
		if ha.Priority > 0 {
			hb.Priority(int64(ha.Priority))
		}
		b.HighAvailabilityBuilder(hb)
		if ha.LeaseStorageDomainID != "" {
			b.LeaseBuilder(ovirtsdk.NewStorageDomainLeaseBuilder().
				StorageDomainBuilder(ovirtsdk.NewStorageDomainBuilder().Id(ha.LeaseStorageDomainID)))
		}
		if ha.ResumeBehaviour != "" {
			b.StorageErrorResumeBehaviour(ovirtsdk.VmStorageErrorResumeBehaviour(ha.ResumeBehaviour))
		}
	}
	for _, p := range spec.CustomProperties {
		b.CustomPropertiesBuilderOfAny(*ovirtsdk.NewCustomPropertyBuilder().Name(p.Name).Value(xmlText(p.Value)))
	}
	if spec.CustomScript != "" || spec.HostName != "" {
		ib := ovirtsdk.NewInitializationBuilder()
		if spec.CustomScript != "" {
			ib.CustomScript(xmlText(spec.CustomScript))
		}
		if spec.HostName != "" {
			ib.HostName(xmlText(spec.HostName))
		}
		b.InitializationBuilder(ib)
	}
	if spec.OSType != "" {
		b.OsBuilder(ovirtsdk.NewOperatingSystemBuilder().Type(spec.OSType))
	}
	if spec.PinnedHostID != "" {
		b.PlacementPolicyBuilder(pinnedPlacement(spec.PinnedHostID))
	}
	if err := addDiskOverrides(op, b, spec); err != nil {
		return nil, err
	}
	vm, err := b.Build()
	if err != nil {
		return nil, invalid(op, "building the VM: %v", err)
	}
	return vm, nil
}

// addDiskOverrides adds one disk_attachment per template disk of a cloned VM when the spec
// overrides the disks' storage domain, format or allocation. Thin (non-cloned) disks are
// overlays on the template's images: they stay in its storage domain, in its format, hence the
// overrides only with Clone.
//
// Every override names its storage domain: StorageDomainID, else the template disk's own (the
// first domain holding it, as the Engine lists them). The Engine's REST layer maps the override
// onto the template disk (DiskMapper), so one without a domain would keep every domain holding a
// copy and AddVmCommand.validateProvidedDestinations would clone to the first of them, checked
// active; the Engine's own choice without any override (fillImagesMapBasedOnTemplate) is the
// first *active* domain with a copy. Naming it makes the destination what CAPOV read, not an
// accident of the Engine's version.
func addDiskOverrides(op string, b *ovirtsdk.VmBuilder, spec ovirt.VMSpec) error {
	if !spec.Clone || (spec.StorageDomainID == "" && spec.DiskFormat == "" && spec.DiskSparse == nil) {
		return nil
	}
	for _, td := range spec.TemplateDisks {
		if td.ID == "" {
			return invalid(op, "template disk without id")
		}
		sdID := cmp.Or(spec.StorageDomainID, td.StorageDomainID)
		if sdID == "" {
			return invalid(op, "template disk %s has no storage domain and StorageDomainID is empty: a disk override must name one", td.ID)
		}
		format := ovirtsdk.DISKFORMAT_COW
		if td.Format == string(ovirtsdk.DISKFORMAT_RAW) {
			format = ovirtsdk.DISKFORMAT_RAW
		}
		if spec.DiskFormat != "" {
			format = ovirtsdk.DiskFormat(spec.DiskFormat)
		}
		// By default cow is sparse and raw preallocated: raw+sparse is refused on block storage,
		// cow preallocated everywhere.
		sparse := format == ovirtsdk.DISKFORMAT_COW
		if spec.DiskSparse != nil {
			sparse = *spec.DiskSparse
		}
		sd, err := ovirtsdk.NewStorageDomainBuilder().Id(sdID).Build()
		if err != nil {
			return invalid(op, "storage domain: %v", err)
		}
		disk := ovirtsdk.NewDiskBuilder().Id(td.ID).Format(format).Sparse(sparse).StorageDomainsOfAny(sd)
		att, err := ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(disk).Build()
		if err != nil {
			return invalid(op, "disk attachment: %v", err)
		}
		b.DiskAttachmentsOfAny(att)
	}
	return nil
}

// UpdateDisk implements ovirt.Client. It uses the disk attachment PUT,
// which every supported engine accepts for size and alias alike.
func (c *client) UpdateDisk(ctx context.Context, vmID, diskID string, u ovirt.DiskUpdate) error {
	const op = "UpdateDisk"
	switch {
	case vmID == "" || diskID == "":
		return invalid(op, "VM id and disk id are required")
	case u.ProvisionedSize < 0:
		return invalid(op, "negative disk size %d", u.ProvisionedSize)
	case u.ProvisionedSize == 0 && u.Alias == "":
		return nil
	}
	db := ovirtsdk.NewDiskBuilder()
	if u.ProvisionedSize > 0 {
		db.ProvisionedSize(u.ProvisionedSize)
	}
	if u.Alias != "" {
		db.Alias(xmlText(u.Alias))
	}
	att, err := ovirtsdk.NewDiskAttachmentBuilder().DiskBuilder(db).Build()
	if err != nil {
		return invalid(op, "building the disk attachment: %v", err)
	}
	_, err = invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().VmsService().VmService(vmID).DiskAttachmentsService().
			AttachmentService(diskID).Update().DiskAttachment(att).Send()
		return struct{}{}, err
	})
	return err
}

// DetachDisk implements ovirt.Client. detach_only keeps the disk: this is
// how CSI volumes are saved before a VM is removed.
func (c *client) DetachDisk(ctx context.Context, vmID, diskID string) error {
	const op = "DetachDisk"
	if vmID == "" || diskID == "" {
		return invalid(op, "VM id and disk id are required")
	}
	_, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().VmsService().VmService(vmID).DiskAttachmentsService().
			AttachmentService(diskID).Remove().DetachOnly(true).Send()
		return struct{}{}, err
	})
	return err
}

// AddNIC implements ovirt.Client.
func (c *client) AddNIC(ctx context.Context, vmID, name, vnicProfileID string) (*ovirt.NIC, error) {
	const op = "AddNIC"
	if vmID == "" || name == "" || vnicProfileID == "" {
		return nil, invalid(op, "VM id, NIC name and vNIC profile id are required")
	}
	nic, err := ovirtsdk.NewNicBuilder().Name(xmlText(name)).Interface(ovirtsdk.NICINTERFACE_VIRTIO).
		VnicProfileBuilder(ovirtsdk.NewVnicProfileBuilder().Id(vnicProfileID)).Build()
	if err != nil {
		return nil, invalid(op, "building the NIC: %v", err)
	}
	added, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (*ovirt.NIC, error) {
		resp, err := conn.SystemService().VmsService().VmService(vmID).NicsService().Add().Nic(nic).Send()
		if err != nil {
			return nil, err
		}
		n, ok := resp.Nic()
		if !ok {
			return nil, fmt.Errorf("engine answered without the created NIC")
		}
		out := toNIC(n)
		return &out, nil
	})
	c.dropLookupsIfNotFound(err)
	return added, err
}

// UpdateNIC implements ovirt.Client.
func (c *client) UpdateNIC(ctx context.Context, vmID, nicID, vnicProfileID string) error {
	const op = "UpdateNIC"
	if vmID == "" || nicID == "" || vnicProfileID == "" {
		return invalid(op, "VM id, NIC id and vNIC profile id are required")
	}
	nic, err := ovirtsdk.NewNicBuilder().VnicProfileBuilder(ovirtsdk.NewVnicProfileBuilder().Id(vnicProfileID)).Build()
	if err != nil {
		return invalid(op, "building the NIC: %v", err)
	}
	_, err = invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().VmsService().VmService(vmID).NicsService().NicService(nicID).Update().Nic(nic).Send()
		return struct{}{}, err
	})
	c.dropLookupsIfNotFound(err)
	return err
}

// RemoveNIC implements ovirt.Client.
func (c *client) RemoveNIC(ctx context.Context, vmID, nicID string) error {
	const op = "RemoveNIC"
	if vmID == "" || nicID == "" {
		return invalid(op, "VM id and NIC id are required")
	}
	_, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().VmsService().VmService(vmID).NicsService().NicService(nicID).Remove().Send()
		return struct{}{}, err
	})
	return err
}

// Power implements ovirt.Client: one action request, POST /vms/{id}/start, /shutdown, /stop,
// /reboot or /reset, counted under its own operation (StartVM, ShutdownVM, StopVM, RebootVM,
// ResetVM).
func (c *client) Power(ctx context.Context, vmID string, action ovirt.PowerAction) error {
	var op string
	var send func(*ovirtsdk.VmService) error
	switch action {
	case ovirt.PowerStart:
		op = "StartVM"
		send = func(s *ovirtsdk.VmService) error { _, err := s.Start().Send(); return err }
	case ovirt.PowerShutdown:
		op = "ShutdownVM"
		send = func(s *ovirtsdk.VmService) error { _, err := s.Shutdown().Send(); return err }
	case ovirt.PowerStop:
		op = "StopVM"
		send = func(s *ovirtsdk.VmService) error { _, err := s.Stop().Send(); return err }
	case ovirt.PowerReboot:
		op = "RebootVM"
		send = func(s *ovirtsdk.VmService) error { _, err := s.Reboot().Send(); return err }
	case ovirt.PowerReset:
		// Below cluster level 4.6 the Engine answers 400 "Cannot reset VM. Reset VM requires
		// cluster compatibility version 4.6 or higher." (ACTION_TYPE_FAILED_RESET_VM_IS_NOT_SUPPORTED,
		// NOT_SUPPORTED): ErrInvalid, as every other 400.
		op = "ResetVM"
		send = func(s *ovirtsdk.VmService) error { _, err := s.Reset().Send(); return err }
	default:
		return invalid("Power", "unknown power action %q", action)
	}
	if vmID == "" {
		return invalid(op, "VM id is empty")
	}
	_, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (struct{}, error) {
		return struct{}{}, send(conn.SystemService().VmsService().VmService(vmID))
	})
	return err
}

// RunOnce implements ovirt.Client: <action><vm><initialization><custom_script/></initialization>
// </vm><volatile>true</volatile></action>, no use_* switch (the Engine decides: a payload only
// while the VM has never been up, in the format of its OS type).
func (c *client) RunOnce(ctx context.Context, vmID string, customScript string) error {
	const op = "RunOnce"
	if vmID == "" {
		return invalid(op, "VM id is empty")
	}
	vm, err := ovirtsdk.NewVmBuilder().
		InitializationBuilder(ovirtsdk.NewInitializationBuilder().CustomScript(xmlText(customScript))).Build()
	if err != nil {
		return invalid(op, "building the run-once VM: %v", err)
	}
	_, err = invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().VmsService().VmService(vmID).Start().Vm(vm).Volatile(true).Send()
		return struct{}{}, err
	})
	return err
}

// RemoveVM implements ovirt.Client. Not detach_only: that would orphan the
// OS disk. Callers detach the disks they want to keep first.
func (c *client) RemoveVM(ctx context.Context, vmID string) error {
	const op = "RemoveVM"
	if vmID == "" {
		return invalid(op, "VM id is empty")
	}
	_, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().VmsService().VmService(vmID).Remove().Send()
		return struct{}{}, err
	})
	return err
}

// EngineInfo implements ovirt.Client: the session reads it once (a failed read is not kept).
func (c *client) EngineInfo(ctx context.Context) (ovirt.EngineInfo, error) {
	known := func() (ovirt.EngineInfo, bool) {
		c.s.mu.Lock()
		defer c.s.mu.Unlock()
		return c.s.engine, c.s.engineKnown
	}
	if info, ok := known(); ok {
		return info, nil
	}
	// One read for all who ask at once; the others take its answer (or, after a failure, try
	// in turn).
	c.s.engineRead.Lock()
	defer c.s.engineRead.Unlock()
	if info, ok := known(); ok {
		return info, nil
	}
	info, err := c.Ping(ctx)
	if err != nil {
		return ovirt.EngineInfo{}, err
	}
	c.s.mu.Lock()
	c.s.engine, c.s.engineKnown = info, true
	c.s.mu.Unlock()
	return info, nil
}

// UpdateVM implements ovirt.Client with PUT /vms/{id}. The Engine merges the initialization
// tags it is sent onto the stored ones, so <initialization><custom_script/></initialization>
// clears the script and keeps the host name (an empty <initialization/> would remove it all);
// likewise a Network update sends nic_configurations, dns_servers and dns_search (empty ones
// clear) and nothing else of the initialization. The custom script is never logged: the
// request is not, and no error built here quotes it.
func (c *client) UpdateVM(ctx context.Context, vmID string, u ovirt.VMUpdate) error {
	const op = "UpdateVM"
	if vmID == "" {
		return invalid(op, "VM id is empty")
	}
	if u.ClearCustomScript && u.CustomScript != nil {
		return invalid(op, "CustomScript and ClearCustomScript are exclusive")
	}
	if u.Comment == nil && !u.ClearCustomScript && u.CustomScript == nil && u.Network == nil {
		return nil
	}
	b := ovirtsdk.NewVmBuilder()
	if u.Comment != nil {
		b.Comment(xmlText(*u.Comment))
	}
	var ib *ovirtsdk.InitializationBuilder
	if u.ClearCustomScript || u.CustomScript != nil || u.Network != nil {
		ib = ovirtsdk.NewInitializationBuilder()
	}
	switch {
	case u.ClearCustomScript:
		ib.CustomScript("")
	case u.CustomScript != nil:
		ib.CustomScript(xmlText(*u.CustomScript))
	}
	if u.Network != nil {
		if err := buildNetwork(op, ib, u.Network); err != nil {
			return err
		}
	}
	if ib != nil {
		b.InitializationBuilder(ib)
	}
	vm, err := b.Build()
	if err != nil {
		return invalid(op, "building the VM update: %v", err)
	}
	_, err = invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().VmsService().VmService(vmID).Update().Vm(vm).Send()
		return struct{}{}, err
	})
	return err
}

// dropLookupsIfNotFound empties the lookup cache when the engine did not
// know an id that probably came from it (cluster, template, storage domain
// or vNIC profile deleted or recreated): the next lookup asks the engine.
// The engine reports unknown referenced ids as 404 ("Entity not found") or,
// for some, as a 400 ("The specified vNIC profile doesn't exist."), so any
// ErrNotFound or ErrInvalid counts; a needless refresh costs four GETs.
func (c *client) dropLookupsIfNotFound(err error) {
	if err != nil && (errors.Is(err, ovirt.ErrNotFound) || errors.Is(err, ovirt.ErrInvalid)) {
		c.s.cache.clear()
	}
}

// xmlText escapes free text for an XML element. The SDK's writer escapes attributes but writes
// element text verbatim, so a cloud-init script with "&&" or a heredoc ("<<EOF") would reach the
// Engine as malformed XML (400). The Engine's parser turns the entities back into the original
// characters.
func xmlText(s string) string {
	var b strings.Builder
	if err := xml.EscapeText(&b, []byte(s)); err != nil {
		// EscapeText fails only when the writer does; strings.Builder never does.
		return s
	}
	return b.String()
}
