package sdk

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// MaxVMReadBatch bounds the VMs of one shared read (vmReads): the search names each (44
// characters per id), and a list of 25 VMs with their disks and NICs inline is an eighth of an
// inventory page.
const MaxVMReadBatch = 25

// vmReads coalesces the GetVM calls of one provider that wait for the same rate-limit token.
//
// The first read to arrive leads a batch and waits for a token as any call does; reads of
// other VMs that arrive while it waits join its batch instead of waiting for tokens of their
// own. When the token comes, a batch of one VM is read as always (GET /vms/{id}), a larger one
// with one search that names every VM by id:
//
//	GET /vms?search=id=<a> or id=<b> ...&max=<n>&follow=disk_attachments.disk,nics.reported_devices,tags,host
//
// The Engine's VM search takes ID (VmConditionFieldAutoCompleter: vm_guid) and OR, and its
// list answers carry what GET /vms/{id} carries (BackendVmsResource.mapCollection fills the
// initialization of each VM; follow is honoured per VM). So under a saturated rate limit the
// reads of many machines cost one call, and the tokens go to the writes that make progress;
// with tokens to spare, every read has its own at once and nothing changes.
//
// A VM missing from a shared answer is read again on its own: only a GET /vms/{id} answering
// 404 says that a VM is gone. A batch whose leader gave up (its context ended) is read again by
// the reads that joined it.
type vmReads struct {
	mu      sync.Mutex
	pending *vmBatch
}

// vmBatch is one shared read. ids changes only while the batch is pending (under vmReads.mu);
// vms and err are written before done is closed.
type vmBatch struct {
	ids   []string
	done  chan struct{}
	vms   map[string]*ovirt.VM
	err   error
	retry bool
}

// get reads the VM id, sharing a call with the reads that wait for the same token.
func (r *vmReads) get(ctx context.Context, c *client, id string) (*ovirt.VM, error) {
	for ctx.Err() == nil {
		b, leader := r.join(id)
		switch {
		case b == nil:
			// The pending batch reads this VM already (two reconciles of one machine): a
			// read of its own keeps the two answers apart.
			return c.getVM(ctx, id)
		case leader:
			return r.lead(ctx, c, b, id)
		}
		select {
		case <-b.done:
		case <-ctx.Done():
			return nil, mapError("GetVM", ctx.Err())
		}
		if b.retry {
			continue // the leader gave up waiting: read again (perhaps as a leader)
		}
		if b.err != nil {
			return nil, b.err
		}
		vm, ok := b.vms[id]
		if !ok {
			return c.getVM(ctx, id)
		}
		return c.completeVM(ctx, id, vm)
	}
	return nil, mapError("GetVM", ctx.Err())
}

// join adds id to the pending batch, or opens a new one led by this read. It returns nil when
// the pending batch has id already.
func (r *vmReads) join(id string) (b *vmBatch, leader bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.pending; b != nil {
		if slices.Contains(b.ids, id) {
			return nil, false
		}
		b.ids = append(b.ids, id)
		if len(b.ids) == MaxVMReadBatch {
			r.pending = nil // full: the next read opens a new batch
		}
		return b, false
	}
	b = &vmBatch{ids: []string{id}, done: make(chan struct{})}
	r.pending = b
	return b, true
}

// take closes b to new reads and returns its VMs.
func (r *vmReads) take(b *vmBatch) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == b {
		r.pending = nil
	}
	return b.ids
}

// lead reads the batch b once its call has a token, hands the answer to the reads that joined,
// and returns the VM id.
func (r *vmReads) lead(ctx context.Context, c *client, b *vmBatch, id string) (*ovirt.VM, error) {
	vms, err := invoke(ctx, c.s, "GetVM", func(conn *ovirtsdk.Connection) (map[string]*ovirt.VM, error) {
		ids := r.take(b)
		if len(ids) == 1 {
			vm, err := readVM(conn, ids[0])
			if err != nil {
				return nil, err
			}
			return map[string]*ovirt.VM{ids[0]: vm}, nil
		}
		return readVMs(conn, ids)
	})
	if ids := r.take(b); len(ids) > 1 {
		c.s.logger(ctx).V(4).Info("Read VMs in one call", "vms", len(ids))
	}
	b.vms, b.err = vms, err
	b.retry = err != nil && (ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
	close(b.done)
	if err != nil {
		return nil, err
	}
	vm, ok := vms[id]
	if !ok {
		return c.getVM(ctx, id)
	}
	return c.completeVM(ctx, id, vm)
}

// readVMs reads the VMs ids with one search.
func readVMs(conn *ovirtsdk.Connection, ids []string) (map[string]*ovirt.VM, error) {
	terms := make([]string, len(ids))
	for i, id := range ids {
		terms[i] = "id=" + id
	}
	resp, err := conn.SystemService().VmsService().List().Search(strings.Join(terms, " or ")).
		Max(int64(len(ids))).Follow(vmListFollow).Send()
	if err != nil {
		return nil, err
	}
	out := make(map[string]*ovirt.VM, len(ids))
	list, ok := resp.Vms()
	if !ok {
		return out, nil
	}
	for _, v := range list.Slice() {
		vm := toFollowedVM(v)
		if i := slices.IndexFunc(ids, func(id string) bool { return strings.EqualFold(id, vm.ID) }); i >= 0 {
			out[ids[i]] = vm
		}
	}
	return out, nil
}

// isUUID tells whether s has the form of an Engine id (8-4-4-4-12 hexadecimal digits), the only
// form a search may name.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}
