package ovirt

import (
	"context"
)

// Fence says whether a write may start now: nil when it may, an error saying why not otherwise.
// The manager's fence is its leader-election lease (pkg/app/manager): a leader frozen past its
// lease (a paused process, a long GC or I/O stall, a partitioned node) must not write to oVirt
// once another manager may lead.
type Fence func() error

// FencedFactory wraps f: every Client it hands out checks fence before each call that changes
// something in oVirt and, when the fence refuses, returns an *Error of kind ErrFenced without
// sending it. Reads are not fenced.
func FencedFactory(f Factory, fence Fence) Factory {
	if fence == nil {
		return f
	}
	return &fencedFactory{Factory: f, fence: fence}
}

type fencedFactory struct {
	Factory
	fence Fence
}

func (f *fencedFactory) ForProvider(ctx context.Context, cfg Config) (Client, error) {
	c, err := f.Factory.ForProvider(ctx, cfg)
	if err != nil || c == nil {
		return c, err
	}
	return &fencedClient{Client: c, fence: f.fence}, nil
}

// fencedClient fences the write methods of Client; the embedded Client serves the reads.
type fencedClient struct {
	Client
	fence Fence
}

// check marks ctx as carrying a write under the fence and checks the fence once now (the SDK
// checks it again right before it sends the request).
func (c *fencedClient) check(ctx context.Context, op string) (context.Context, error) {
	ctx = context.WithValue(ctx, fenceKey{}, c.fence)
	return ctx, CheckFence(ctx, op)
}

type fenceKey struct{}

// CheckFence runs the write fence ctx carries (the ctx of a fenced Client's write): nil when ctx
// carries none or the fence allows the write, an *Error of kind ErrFenced otherwise. A Client
// implementation calls it right before it sends a request, after any wait of its own (its rate
// limiter), so that no write starts after the fence closed.
func CheckFence(ctx context.Context, op string) error {
	fence, _ := ctx.Value(fenceKey{}).(Fence)
	if fence == nil {
		return nil
	}
	if err := fence(); err != nil {
		return &Error{Op: op, Detail: err.Error(), Kinds: []error{ErrFenced}, Err: err}
	}
	return nil
}

func (c *fencedClient) CreateVM(ctx context.Context, spec VMSpec) (*VM, error) {
	ctx, err := c.check(ctx, "CreateVM")
	if err != nil {
		return nil, err
	}
	return c.Client.CreateVM(ctx, spec)
}

func (c *fencedClient) UpdateDisk(ctx context.Context, vmID, diskID string, u DiskUpdate) error {
	ctx, err := c.check(ctx, "UpdateDisk")
	if err != nil {
		return err
	}
	return c.Client.UpdateDisk(ctx, vmID, diskID, u)
}

func (c *fencedClient) AddDisk(ctx context.Context, vmID string, spec DiskSpec) (*Disk, error) {
	ctx, err := c.check(ctx, "AddDisk")
	if err != nil {
		return nil, err
	}
	return c.Client.AddDisk(ctx, vmID, spec)
}

func (c *fencedClient) DetachDisk(ctx context.Context, vmID, diskID string) error {
	ctx, err := c.check(ctx, "DetachDisk")
	if err != nil {
		return err
	}
	return c.Client.DetachDisk(ctx, vmID, diskID)
}

func (c *fencedClient) AddNIC(ctx context.Context, vmID, name, vnicProfileID string) (*NIC, error) {
	ctx, err := c.check(ctx, "AddNIC")
	if err != nil {
		return nil, err
	}
	return c.Client.AddNIC(ctx, vmID, name, vnicProfileID)
}

func (c *fencedClient) UpdateNIC(ctx context.Context, vmID, nicID, vnicProfileID string) error {
	ctx, err := c.check(ctx, "UpdateNIC")
	if err != nil {
		return err
	}
	return c.Client.UpdateNIC(ctx, vmID, nicID, vnicProfileID)
}

func (c *fencedClient) RemoveNIC(ctx context.Context, vmID, nicID string) error {
	ctx, err := c.check(ctx, "RemoveNIC")
	if err != nil {
		return err
	}
	return c.Client.RemoveNIC(ctx, vmID, nicID)
}

func (c *fencedClient) Power(ctx context.Context, vmID string, action PowerAction) error {
	ctx, err := c.check(ctx, "Power")
	if err != nil {
		return err
	}
	return c.Client.Power(ctx, vmID, action)
}

func (c *fencedClient) RunOnce(ctx context.Context, vmID string, customScript string) error {
	ctx, err := c.check(ctx, "RunOnce")
	if err != nil {
		return err
	}
	return c.Client.RunOnce(ctx, vmID, customScript)
}

func (c *fencedClient) RemoveVM(ctx context.Context, vmID string) error {
	ctx, err := c.check(ctx, "RemoveVM")
	if err != nil {
		return err
	}
	return c.Client.RemoveVM(ctx, vmID)
}

func (c *fencedClient) UpdateVM(ctx context.Context, vmID string, u VMUpdate) error {
	ctx, err := c.check(ctx, "UpdateVM")
	if err != nil {
		return err
	}
	return c.Client.UpdateVM(ctx, vmID, u)
}

func (c *fencedClient) CreateAffinityGroup(ctx context.Context, spec AffinityGroupSpec) (*AffinityGroup, error) {
	ctx, err := c.check(ctx, "CreateAffinityGroup")
	if err != nil {
		return nil, err
	}
	return c.Client.CreateAffinityGroup(ctx, spec)
}

func (c *fencedClient) UpdateAffinityGroup(ctx context.Context, clusterID, groupID string, enforcing bool) error {
	ctx, err := c.check(ctx, "UpdateAffinityGroup")
	if err != nil {
		return err
	}
	return c.Client.UpdateAffinityGroup(ctx, clusterID, groupID, enforcing)
}

func (c *fencedClient) RemoveAffinityGroup(ctx context.Context, clusterID, groupID string) error {
	ctx, err := c.check(ctx, "RemoveAffinityGroup")
	if err != nil {
		return err
	}
	return c.Client.RemoveAffinityGroup(ctx, clusterID, groupID)
}

func (c *fencedClient) AddVMToAffinityGroup(ctx context.Context, clusterID, groupID, vmID string) error {
	ctx, err := c.check(ctx, "AddVMToAffinityGroup")
	if err != nil {
		return err
	}
	return c.Client.AddVMToAffinityGroup(ctx, clusterID, groupID, vmID)
}

func (c *fencedClient) RemoveVMFromAffinityGroup(ctx context.Context, clusterID, groupID, vmID string) error {
	ctx, err := c.check(ctx, "RemoveVMFromAffinityGroup")
	if err != nil {
		return err
	}
	return c.Client.RemoveVMFromAffinityGroup(ctx, clusterID, groupID, vmID)
}

func (c *fencedClient) CreateTag(ctx context.Context, name, description string) (*Tag, error) {
	ctx, err := c.check(ctx, "CreateTag")
	if err != nil {
		return nil, err
	}
	return c.Client.CreateTag(ctx, name, description)
}

func (c *fencedClient) AssignTag(ctx context.Context, vmID, tagID string) error {
	ctx, err := c.check(ctx, "AssignTag")
	if err != nil {
		return err
	}
	return c.Client.AssignTag(ctx, vmID, tagID)
}

func (c *fencedClient) UpdateTagDescription(ctx context.Context, id, description string) error {
	ctx, err := c.check(ctx, "UpdateTagDescription")
	if err != nil {
		return err
	}
	return c.Client.UpdateTagDescription(ctx, id, description)
}

func (c *fencedClient) AttachHostDevice(ctx context.Context, vmID, deviceName string) error {
	ctx, err := c.check(ctx, "AttachHostDevice")
	if err != nil {
		return err
	}
	return c.Client.AttachHostDevice(ctx, vmID, deviceName)
}

func (c *fencedClient) DetachHostDevice(ctx context.Context, vmID, deviceName string) error {
	ctx, err := c.check(ctx, "DetachHostDevice")
	if err != nil {
		return err
	}
	return c.Client.DetachHostDevice(ctx, vmID, deviceName)
}

func (c *fencedClient) PinVM(ctx context.Context, vmID, hostID string) error {
	ctx, err := c.check(ctx, "PinVM")
	if err != nil {
		return err
	}
	return c.Client.PinVM(ctx, vmID, hostID)
}
