package fake

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/capov/capov/pkg/ovirt"
)

// Affinity groups, hosts and GetCluster of the fake Client. Errors carry the status, sentinels and
// Engine texts the SDK client reports for the same refusal (see pkg/ovirt/sdk/affinity.go).

// AddAffinityGroup seeds an affinity group as is (an empty ID is generated), e.g. one an operator
// made by hand or one left by an earlier manager.
func (c *Client) AddAffinityGroup(g ovirt.AffinityGroup) ovirt.AffinityGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g.ID == "" {
		g.ID = c.newID("affinitygroup")
	}
	g.VMIDs = slices.Clone(g.VMIDs)
	c.groups = append(c.groups, &g)
	return cloneGroup(&g)
}

// AffinityGroups returns copies of the cluster's affinity groups, in creation order.
func (c *Client) AffinityGroups(clusterID string) []ovirt.AffinityGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ovirt.AffinityGroup
	for _, g := range c.groups {
		if g.ClusterID == clusterID {
			out = append(out, cloneGroup(g))
		}
	}
	return out
}

// AffinityGroupByName returns a copy of the group with this name (names are unique in an
// Engine, whatever the cluster).
func (c *Client) AffinityGroupByName(name string) (ovirt.AffinityGroup, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.groups {
		if g.Name == name {
			return cloneGroup(g), true
		}
	}
	return ovirt.AffinityGroup{}, false
}

// SetHostCount gives the cluster n hosts that are up (0: none, so no VM can start); a negative n
// restores the default, as many hosts as needed. VMs already running keep their hosts.
func (c *Client) SetHostCount(clusterID string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n < 0 {
		delete(c.hostCounts, clusterID)
		return
	}
	c.hostCounts[clusterID] = n
}

// HostOf returns the id and name of the host the fake placed a VM on ("" while it is down).
func (c *Client) HostOf(vmID string) (id, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if vm, ok := c.vms[vmID]; ok {
		return vm.HostID, vm.HostName
	}
	return "", ""
}

func cloneGroup(g *ovirt.AffinityGroup) ovirt.AffinityGroup {
	out := *g
	out.VMIDs = slices.Clone(g.VMIDs)
	return out
}

// fakeHost names the i-th host (from 1) of a cluster.
func (c *Client) fakeHost(clusterID string, i int) (id, name string) {
	label := clusterID
	for _, cl := range c.clusters {
		if cl.ID == clusterID && cl.Name != "" {
			label = cl.Name
		}
	}
	return fmt.Sprintf("%s-host-%d", clusterID, i), fmt.Sprintf("%s-host-%d", strings.ToLower(label), i)
}

// place chooses a host for vm the way the Engine's VM affinity filter and weight do, or refuses
// like the Engine's scheduler. Called with c.mu held.
func (c *Client) place(vm *ovirt.VM) (hostID, hostName string, err error) {
	// Where the other VMs of the cluster run.
	runsOn := map[string]string{} // VM id -> host id
	used := map[string]string{}   // host id -> name
	for _, o := range c.vms {
		if o.ID != vm.ID && o.HostID != "" && o.ClusterID == vm.ClusterID {
			runsOn[o.ID] = o.HostID
			used[o.HostID] = o.HostName
		}
	}
	// The candidate hosts, in order: the seeded hosts that are up (only the pinned one for a
	// pinned VM), or else the cluster's n hosts, or (unlimited) enough hosts for one to be free,
	// then hosts a test put VMs on by hand.
	candidates, seeded := c.seededCandidates(vm)
	n, limited := c.hostCounts[vm.ClusterID]
	if !limited {
		n = len(used) + 1
	}
	for i := 1; i <= n && !seeded; i++ {
		id, name := c.fakeHost(vm.ClusterID, i)
		candidates = append(candidates, [2]string{id, name})
	}
	if !limited && !seeded {
		var seeded []string
		for id := range used {
			if !slices.ContainsFunc(candidates, func(h [2]string) bool { return h[0] == id }) {
				seeded = append(seeded, id)
			}
		}
		slices.Sort(seeded)
		for _, id := range seeded {
			candidates = append(candidates, [2]string{id, used[id]})
		}
	}
	if len(candidates) == 0 {
		return "", "", &ovirt.Error{Op: "Power", Status: 400,
			Detail: "Operation Failed: [There are no hosts to use. Check that the cluster contains at least one host in Up state.]",
			Kinds:  []error{ovirt.ErrConflict, ovirt.ErrNoHost}}
	}

	// For each host: not the pinned host or without the VM's host devices (it is out, the
	// Engine's PinToHost and HostDevice filters), the enforcing rules it breaks (it is out) and the
	// others (it is less good).
	best, bestSoft := -1, 0
	var reasons []string
	for i, h := range candidates {
		if line := pinFilter(vm, h[0], h[1]); line != "" {
			reasons = append(reasons, line)
			continue
		}
		if why := c.hostDeviceFilter(vm, h[0]); why != "" {
			reasons = append(reasons, fmt.Sprintf("The host %s did not satisfy internal filter HostDevice because %s.", h[1], why))
			continue
		}
		var negative, positive []string
		soft := 0
		for _, g := range c.groups {
			if g.ClusterID != vm.ClusterID || !slices.Contains(g.VMIDs, vm.ID) {
				continue
			}
			breaks := false
			for _, member := range g.VMIDs {
				on, running := runsOn[member]
				if member == vm.ID || !running {
					continue
				}
				if (g.Positive && on != h[0]) || (!g.Positive && on == h[0]) {
					breaks = true
				}
			}
			switch {
			case !breaks:
			case !g.Enforcing:
				soft++
			case g.Positive:
				positive = append(positive, g.Name)
			default:
				negative = append(negative, g.Name)
			}
		}
		if len(negative) > 0 || len(positive) > 0 {
			// The Engine names no group here (VmAffinityFilterPolicyUnit passes an empty
			// $affinityRules), and only the first of several details counts.
			because := "it matched negative affinity rules "
			if len(negative) == 0 {
				because = "it did not match positive affinity rules "
			}
			reasons = append(reasons, fmt.Sprintf("The host %s did not satisfy internal filter VmAffinityGroups because %s.", h[1], because))
			continue
		}
		if best < 0 || soft < bestSoft {
			best, bestSoft = i, soft
		}
	}
	if best < 0 {
		// The Engine's translator resolves the $hostName and $detailMessage variables once for
		// the whole message list, the first definition winning: every line repeats the first
		// host's.
		for i := range reasons {
			reasons[i] = reasons[0]
		}
		return "", "", &ovirt.Error{Op: "Power", Status: 409,
			Detail: "Operation Failed: [Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:, " +
				strings.Join(reasons, ", ") + "]",
			Kinds: []error{ovirt.ErrConflict, ovirt.ErrNoHost}}
	}
	return candidates[best][0], candidates[best][1], nil
}

// findGroup returns the group with this id in the cluster. Called with c.mu held.
func (c *Client) findGroup(clusterID, groupID string) *ovirt.AffinityGroup {
	for _, g := range c.groups {
		if g.ID == groupID && g.ClusterID == clusterID {
			return g
		}
	}
	return nil
}

func (c *Client) clusterByID(id string) (ovirt.Cluster, bool) {
	for _, cl := range c.clusters {
		if cl.ID == id {
			return cl, true
		}
	}
	return ovirt.Cluster{}, false
}

// GetCluster implements ovirt.Client.
func (c *Client) GetCluster(ctx context.Context, id string) (*ovirt.Cluster, error) {
	c.mu.Lock()
	c.record("GetCluster")
	c.mu.Unlock()
	if c.GetClusterFunc != nil {
		return c.GetClusterFunc(ctx, id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, ok := c.clusterByID(id)
	if !ok {
		return nil, notFound("GetCluster", "no cluster with id %q", id)
	}
	cl.NetworkIDs = slices.Clone(cl.NetworkIDs)
	return &cl, nil
}

// ListAffinityGroups implements ovirt.Client.
func (c *Client) ListAffinityGroups(ctx context.Context, clusterID string) ([]ovirt.AffinityGroup, error) {
	c.mu.Lock()
	c.record("ListAffinityGroups")
	c.mu.Unlock()
	if c.ListAffinityGroupsFunc != nil {
		return c.ListAffinityGroupsFunc(ctx, clusterID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.clusterByID(clusterID); !ok {
		return nil, notFound("ListAffinityGroups", "no cluster with id %q", clusterID)
	}
	var out []ovirt.AffinityGroup
	for _, g := range c.groups {
		if g.ClusterID == clusterID {
			out = append(out, cloneGroup(g))
		}
	}
	return out, nil
}

// CreateAffinityGroup implements ovirt.Client. Like the Engine it refuses a name used by any
// group, in any cluster (400 matching ErrConflict).
func (c *Client) CreateAffinityGroup(ctx context.Context, spec ovirt.AffinityGroupSpec) (*ovirt.AffinityGroup, error) {
	c.mu.Lock()
	c.record("CreateAffinityGroup")
	c.mu.Unlock()
	if c.CreateAffinityGroupFunc != nil {
		return c.CreateAffinityGroupFunc(ctx, spec)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	const op = "CreateAffinityGroup"
	if spec.Name == "" {
		return nil, invalid(op, "Cannot add Affinity Group. Name field is invalid.")
	}
	for _, g := range c.groups {
		if g.Name == spec.Name {
			return nil, &ovirt.Error{Op: op, Status: 400,
				Detail: "Operation Failed: [Cannot add Affinity Group. Affinity Group name already exists.]",
				Kinds:  []error{ovirt.ErrConflict}}
		}
	}
	if _, ok := c.clusterByID(spec.ClusterID); !ok {
		return nil, &ovirt.Error{Op: op, Status: 400,
			Detail: "Operation Failed: [Cannot add Affinity Group. Provided Cluster is invalid.]",
			Kinds:  []error{ovirt.ErrNotFound}}
	}
	g := &ovirt.AffinityGroup{ID: c.newID("affinitygroup"), Name: spec.Name, Description: spec.Description,
		ClusterID: spec.ClusterID, Positive: spec.Positive, Enforcing: spec.Enforcing}
	c.groups = append(c.groups, g)
	out := cloneGroup(g)
	return &out, nil
}

// UpdateAffinityGroup implements ovirt.Client.
func (c *Client) UpdateAffinityGroup(ctx context.Context, clusterID, groupID string, enforcing bool) error {
	c.mu.Lock()
	c.record("UpdateAffinityGroup")
	c.mu.Unlock()
	if c.UpdateAffinityGroupFunc != nil {
		return c.UpdateAffinityGroupFunc(ctx, clusterID, groupID, enforcing)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.findGroup(clusterID, groupID)
	if g == nil {
		return notFound("UpdateAffinityGroup", "no affinity group %q in cluster %q", groupID, clusterID)
	}
	g.Enforcing = enforcing
	return nil
}

// RemoveAffinityGroup implements ovirt.Client; the group's VMs are not touched.
func (c *Client) RemoveAffinityGroup(ctx context.Context, clusterID, groupID string) error {
	c.mu.Lock()
	c.record("RemoveAffinityGroup")
	c.mu.Unlock()
	if c.RemoveAffinityGroupFunc != nil {
		return c.RemoveAffinityGroupFunc(ctx, clusterID, groupID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.findGroup(clusterID, groupID)
	if g == nil {
		return notFound("RemoveAffinityGroup", "no affinity group %q in cluster %q", groupID, clusterID)
	}
	c.groups = slices.DeleteFunc(c.groups, func(o *ovirt.AffinityGroup) bool { return o == g })
	return nil
}

// AddVMToAffinityGroup implements ovirt.Client: a member already there is not an error; a VM of
// another cluster is refused as the Engine does (ErrInvalid). Adding a running VM is allowed
// even when it breaks the group's rule (the Engine then reports the group broken).
func (c *Client) AddVMToAffinityGroup(ctx context.Context, clusterID, groupID, vmID string) error {
	c.mu.Lock()
	c.record("AddVMToAffinityGroup")
	c.mu.Unlock()
	if c.AddVMToAffinityGroupFunc != nil {
		return c.AddVMToAffinityGroupFunc(ctx, clusterID, groupID, vmID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	const op = "AddVMToAffinityGroup"
	g := c.findGroup(clusterID, groupID)
	if g == nil {
		return &ovirt.Error{Op: op, Status: 400, Detail: "Operation Failed: [Cannot edit Affinity Group. No matching Affinity Group.]",
			Kinds: []error{ovirt.ErrNotFound}}
	}
	vm, ok := c.vms[vmID]
	if !ok {
		return &ovirt.Error{Op: op, Status: 400, Detail: "Operation Failed: [The selected VM does not exist.]",
			Kinds: []error{ovirt.ErrNotFound}}
	}
	if vm.ClusterID != "" && vm.ClusterID != g.ClusterID {
		return invalid(op, "Cannot edit Affinity Group. Provided VM resides in another Cluster.")
	}
	if !slices.Contains(g.VMIDs, vmID) {
		g.VMIDs = append(g.VMIDs, vmID)
	}
	return nil
}

// RemoveVMFromAffinityGroup implements ovirt.Client: a VM that is not a member, or a group that
// does not exist, is not an error.
func (c *Client) RemoveVMFromAffinityGroup(ctx context.Context, clusterID, groupID, vmID string) error {
	c.mu.Lock()
	c.record("RemoveVMFromAffinityGroup")
	c.mu.Unlock()
	if c.RemoveVMFromAffinityGroupFunc != nil {
		return c.RemoveVMFromAffinityGroupFunc(ctx, clusterID, groupID, vmID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.findGroup(clusterID, groupID); g != nil {
		g.VMIDs = slices.DeleteFunc(g.VMIDs, func(id string) bool { return id == vmID })
	}
	return nil
}
