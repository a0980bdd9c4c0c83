package controllers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// The heartbeat: two live management clusters with one id (an etcd restore running beside the
// original, a cloned control-plane VM, an id reused on purpose while the old cluster still runs)
// would each take the other's VMs for orphans and, with spec.orphanedVMs Delete, remove them.
// Each inventory reads and rewrites a tag in the Engine named after the management cluster id;
// its description names the writing manager process. A write by another process with the same id
// seen since this manager's own last write means another live cluster with this id (a restart or
// a new leader starts with no write of its own, so it never counts one): orphan removal then
// waits until heartbeatWindow inventories in a row saw none, and two such writes within the
// window are reported as a conflict (condition reason and event) until then.
const (
	// heartbeatTagPrefix starts the name of the heartbeat tag, followed by 16 hex digits of the
	// SHA-256 of the management cluster id (the id itself may be longer than a tag name may be).
	heartbeatTagPrefix = "capov-hb-"
	// heartbeatWindow is the number of inventories a foreign write is remembered for.
	heartbeatWindow = 10
	// heartbeatConflictWrites is the number of foreign writes within the window that make a
	// conflict (one alone may be a manager of this cluster that lost its lease while writing).
	heartbeatConflictWrites = 2
)

// Event reasons of the heartbeat, on OVirtProviders.
const (
	eventManagementClusterIDConflict      = "ManagementClusterIDConflict"
	eventManagementClusterIDConflictEnded = "ManagementClusterIDConflictEnded"
)

// heartbeatState is what one provider's inventories know of the heartbeat tag in its Engine.
type heartbeatState struct {
	// tagID is the tag's id, once found or created.
	tagID string
	// written is the description this process wrote last ("" before its first write).
	written string
	// seq counts this process's writes.
	seq int
	// foreign records, for the last inventories (oldest first), whether another writer's
	// description was found in place of this process's last one.
	foreign []bool
	// seen is the other writer's description found last.
	seen string
	// conflict is set while heartbeatConflictWrites foreign writes are within the window.
	conflict bool
}

// heartbeatVerdict is what a heartbeat says about orphan removal.
type heartbeatVerdict struct {
	// hold, when set, says why no orphan may be removed now.
	hold string
	// conflict, when set, is the condition message of an established conflict.
	conflict string
}

// heartbeatTagName is the name of the heartbeat tag of a management cluster id and watch filter
// (managers of one management cluster with different --watch-filter values act on different
// providers: each keeps its own heartbeat).
func heartbeatTagName(id, watchFilter string) string {
	sum := sha256.Sum256([]byte(id + "\x00" + watchFilter))
	return heartbeatTagPrefix + hex.EncodeToString(sum[:8])
}

func (inv *Inventory) heartbeatTag() string {
	return heartbeatTagName(inv.ManagementClusterID, inv.WatchFilterValue)
}

// newHeartbeatWriter is a random name for this manager process in the heartbeat.
func newHeartbeatWriter() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// heartbeatWriterOf returns the writer a heartbeat description names ("" if none).
func heartbeatWriterOf(desc string) string {
	for _, f := range strings.Fields(desc) {
		if v, ok := strings.CutPrefix(f, "writer="); ok {
			return v
		}
	}
	return ""
}

// heartbeat reads the provider's Engine's heartbeat tag of this management cluster, counts a
// write by another process found in place of this process's last one, and writes it again. It
// is called once per inventory of every provider (a provider that only reports orphans must
// still be seen by one that removes them).
func (inv *Inventory) heartbeat(ctx context.Context, log logr.Logger, p *infrav1.OVirtProvider, cl ovirt.Client) heartbeatVerdict {
	name := inv.heartbeatTag()
	inv.mu.Lock()
	st := inv.heartbeats[p.Name]
	if st == nil {
		st = &heartbeatState{}
		inv.heartbeats[p.Name] = st
	}
	inv.mu.Unlock()

	// The line matters to a provider that removes orphans; one that only reports them gets it
	// at V(2), not on every inventory.
	failLog := log
	if p.Spec.OrphanedVMs != infrav1.OrphanedVMsDelete {
		failLog = log.V(2)
	}
	tag, err := inv.readHeartbeat(ctx, cl, st, name)
	if err != nil {
		failLog.Info("Cannot read the heartbeat tag in the Engine; orphans are not removed until it can be kept", "tag", name, "error", err.Error())
		return inv.heartbeatVerdict(p, st, false, fmt.Sprintf("the heartbeat tag %s cannot be read in the Engine (%v): orphans are removed only while it can be kept", name, err))
	}
	foreign := inv.foreignHeartbeat(st, tag)
	if foreign {
		log.Info("Another manager with this management cluster id wrote the heartbeat tag since this one's last inventory",
			"tag", name, "found", tag.Description, "managementClusterID", inv.ManagementClusterID)
	}

	st.seq++
	desc := fmt.Sprintf("capov heartbeat management-cluster=%s watch-filter=%s writer=%s seq=%d at=%s", inv.ManagementClusterID, inv.WatchFilterValue,
		inv.heartbeatWriter, st.seq, inv.now().UTC().Format(time.RFC3339))
	if err := inv.writeHeartbeat(ctx, cl, st, tag, name, desc); err != nil {
		failLog.Info("Cannot write the heartbeat tag in the Engine; orphans are not removed until it can be kept", "tag", name, "error", err.Error())
		return inv.heartbeatVerdict(p, st, foreign, fmt.Sprintf("the heartbeat tag %s cannot be written in the Engine (%v): orphans are removed only while it can be kept "+
			"(the Engine account needs permission to create and edit tags)", name, err))
	}
	st.written = desc
	return inv.heartbeatVerdict(p, st, foreign, "")
}

// readHeartbeat returns the heartbeat tag (nil if there is none), by its id once known.
func (inv *Inventory) readHeartbeat(ctx context.Context, cl ovirt.Client, st *heartbeatState, name string) (*ovirt.Tag, error) {
	if st.tagID != "" {
		tag, err := cl.GetTag(ctx, st.tagID)
		if err == nil && tag.Name == name {
			return tag, nil
		}
		if err != nil && !errors.Is(err, ovirt.ErrNotFound) {
			return nil, err
		}
		st.tagID = "" // removed (or renamed) in the Engine: look it up by name
	}
	tag, err := cl.FindTag(ctx, name)
	if errors.Is(err, ovirt.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st.tagID = tag.ID
	return tag, nil
}

// writeHeartbeat writes desc into the heartbeat tag, creating it if there is none.
func (inv *Inventory) writeHeartbeat(ctx context.Context, cl ovirt.Client, st *heartbeatState, tag *ovirt.Tag, name, desc string) error {
	if tag == nil {
		created, err := cl.CreateTag(ctx, name, desc)
		if err == nil {
			st.tagID = created.ID
			return nil
		}
		if !errors.Is(err, ovirt.ErrConflict) {
			return err
		}
		// Created meanwhile by another writer: rewrite it.
		if tag, err = cl.FindTag(ctx, name); err != nil {
			return err
		}
		st.tagID = tag.ID
	}
	return cl.UpdateTagDescription(ctx, tag.ID, desc)
}

// foreignHeartbeat reports whether tag holds another process's write in place of this
// process's last one.
func (inv *Inventory) foreignHeartbeat(st *heartbeatState, tag *ovirt.Tag) bool {
	if tag == nil || st.written == "" || tag.Description == st.written || heartbeatWriterOf(tag.Description) == inv.heartbeatWriter {
		return false
	}
	st.seen = tag.Description
	return true
}

// confirmHeartbeat reads the heartbeat tag again right before an orphan is removed: another
// writer's description in place of the one this inventory wrote is a foreign write too (two
// clusters whose inventories run close together), and holds the removal.
func (inv *Inventory) confirmHeartbeat(ctx context.Context, p *infrav1.OVirtProvider, cl ovirt.Client) string {
	name := inv.heartbeatTag()
	inv.mu.Lock()
	st := inv.heartbeats[p.Name]
	inv.mu.Unlock()
	if st == nil || st.tagID == "" || st.written == "" {
		return fmt.Sprintf("the heartbeat tag %s is not written yet: orphans are removed once it is", name)
	}
	tag, err := cl.GetTag(ctx, st.tagID)
	if err != nil {
		return fmt.Sprintf("the heartbeat tag %s cannot be read in the Engine (%v): orphans are removed only while it can be kept", name, err)
	}
	if !inv.foreignHeartbeat(st, tag) {
		return ""
	}
	inv.mu.Lock()
	if n := len(st.foreign); n > 0 {
		st.foreign[n-1] = true
	}
	inv.mu.Unlock()
	return inv.holdMessage(name, st)
}

// heartbeatVerdict records this inventory's sighting and says what it means for orphan removal;
// failed, when set, is why the heartbeat could not be kept (removal holds).
func (inv *Inventory) heartbeatVerdict(p *infrav1.OVirtProvider, st *heartbeatState, foreign bool, failed string) heartbeatVerdict {
	name := inv.heartbeatTag()
	inv.mu.Lock()
	st.foreign = append(st.foreign, foreign)
	if len(st.foreign) > heartbeatWindow {
		st.foreign = st.foreign[len(st.foreign)-heartbeatWindow:]
	}
	n := 0
	for _, f := range st.foreign {
		if f {
			n++
		}
	}
	was := st.conflict
	st.conflict = n >= heartbeatConflictWrites
	now := st.conflict
	seen := st.seen
	inv.mu.Unlock()

	var v heartbeatVerdict
	switch {
	case failed != "":
		v.hold = failed
	case n > 0:
		v.hold = inv.holdMessage(name, st)
	}
	if now {
		v.conflict = fmt.Sprintf("another live management cluster uses this management cluster's id %q: the heartbeat tag %s in the Engine was written by "+
			"another manager %d times within the last %d inventories (last: %q); orphaned VMs are not removed (each cluster would take the other's VMs "+
			"for orphans) until %d inventories in a row see none: give one of the clusters its own --management-cluster-id (docs/operations.md \"The management cluster id\")",
			inv.ManagementClusterID, name, n, heartbeatWindow, seen, heartbeatWindow)
	}
	switch {
	case now && !was:
		inv.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventManagementClusterIDConflict, "Inventory", "%s", v.conflict)
	case was && !now:
		inv.Recorder.Eventf(p, nil, corev1.EventTypeNormal, eventManagementClusterIDConflictEnded, "Inventory",
			"No other manager wrote the heartbeat tag %s within the last %d inventories: orphaned VMs may be removed again", name, heartbeatWindow)
	}
	return v
}

// holdMessage says why orphans are held after a foreign write.
func (inv *Inventory) holdMessage(name string, st *heartbeatState) string {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	last := 0
	for i, f := range st.foreign {
		if f {
			last = i
		}
	}
	left := heartbeatWindow - (len(st.foreign) - 1 - last)
	return fmt.Sprintf("another manager with this management cluster's id wrote the heartbeat tag %s in the Engine (%q): orphans are not removed for %d more inventories",
		name, st.seen, left)
}
