package ovirtsim

import (
	"log"
	"sync"
	"time"
)

// GuestRuntime boots real guests for the simulator's VMs (test/guest implements it): with one
// set (Simulator.SetGuestRuntime, the command's --guests-dir), a VM that powers on boots a real
// guest from the config drive the Engine would attach, a shutdown asks the guest to power off
// and the VM goes down when it has, a stop kills it, a removal wipes its disk, and the guest
// agent reports the guest's real interfaces. Calls come one at a time, in the order of the
// VMs' power changes; none may block on the simulator.
type GuestRuntime interface {
	// Boot starts the guest of a VM that powers on.
	Boot(req GuestBoot) error
	// Shutdown asks the guest to power off (ACPI) and returns at once; the runtime calls
	// Simulator.GuestExited when it has.
	Shutdown(vmID string)
	// Reboot restarts the guest of a running VM (its qemu process stays: the disk and the
	// config drive of the run stay attached) and returns when the new boot has started; the
	// old boot's end is not an exit of the VM.
	Reboot(req GuestBoot) error
	// PowerOff kills the guest and returns when it is gone.
	PowerOff(vmID string)
	// Remove kills the guest if it runs and wipes the VM's disk.
	Remove(vmID string)
	// Interfaces are the guest's interfaces as its agent reports them; nil when unknown.
	Interfaces(vmID string) []GuestInterface
}

// GuestBoot is one power-on of a VM.
type GuestBoot struct {
	VMID string
	// Run numbers the VM's power-ons; GuestExited names the run that ended.
	Run int
	// MACs are the VM's plugged NICs, in order (eth0, eth1, ...).
	MACs []string
	// ConfigDrive are the files of the config drive attached at this start (the Engine's
	// payload, on the first run only), by path relative to the drive's root; nil: none.
	ConfigDrive map[string]string
	// OSType is the VM's operating system type (from its template): IsIgnitionOSType tells
	// whether its image is an Ignition one (the Engine writes it an Ignition config).
	OSType string
}

// IsIgnitionOSType reports whether the Engine gives VMs of this OS type an Ignition config
// (osinfo's vmInitType) instead of cloud-init data.
func IsIgnitionOSType(osType string) bool {
	_, ok := ignitionOSTypes[osType]
	return ok
}

// guestShutdownLimit is how long a VM with a real guest stays powering_down after a shutdown
// if its guest never powers off (the Engine waits on the guest; a guest that ignores ACPI keeps
// its VM up).
const guestShutdownLimit = 10 * time.Minute

// guest operations, in the order the VMs' power changed.
type guestOpKind int

const (
	guestBoot guestOpKind = iota
	guestShutdown
	guestPowerOff
	guestRemove
	guestReboot
)

type guestOp struct {
	kind guestOpKind
	boot GuestBoot
}

// guestQueue hands the power changes made under the simulator's lock to the runtime, in order,
// outside the lock.
type guestQueue struct {
	rt    GuestRuntime
	onErr func(vmID string, run int, err error)
	mu    sync.Mutex
	ops   []guestOp
	wake  chan struct{}
	done  chan struct{}
}

func newGuestQueue(rt GuestRuntime, onErr func(string, int, error)) *guestQueue {
	q := &guestQueue{rt: rt, onErr: onErr, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

func (q *guestQueue) enqueue(op guestOp) {
	if q == nil {
		return
	}
	q.mu.Lock()
	q.ops = append(q.ops, op)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *guestQueue) run() {
	for {
		select {
		case <-q.done:
			return
		case <-q.wake:
		}
		for {
			q.mu.Lock()
			if len(q.ops) == 0 {
				q.mu.Unlock()
				break
			}
			op := q.ops[0]
			q.ops = q.ops[1:]
			q.mu.Unlock()
			switch op.kind {
			case guestBoot:
				if err := q.rt.Boot(op.boot); err != nil {
					log.Printf("ovirtsim: booting the guest of VM %s: %v", op.boot.VMID, err)
					q.onErr(op.boot.VMID, op.boot.Run, err)
				}
			case guestReboot:
				if err := q.rt.Reboot(op.boot); err != nil {
					log.Printf("ovirtsim: rebooting the guest of VM %s: %v", op.boot.VMID, err)
					q.onErr(op.boot.VMID, op.boot.Run, err)
				}
			case guestShutdown:
				q.rt.Shutdown(op.boot.VMID)
			case guestPowerOff:
				q.rt.PowerOff(op.boot.VMID)
			case guestRemove:
				q.rt.Remove(op.boot.VMID)
			}
		}
	}
}

func (q *guestQueue) close() {
	if q != nil {
		close(q.done)
	}
}

// SetGuestRuntime makes the VMs boot real guests (see GuestRuntime). Set it before any VM runs.
func (s *Simulator) SetGuestRuntime(rt GuestRuntime) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inv.guests = newGuestQueue(rt, s.GuestExited)
	s.inv.guestRuntime = rt
}

// GuestExited tells the simulator that the guest of a VM's run has ended (it powered off,
// crashed, or failed to boot): the VM is down, as the Engine sees a VM whose qemu ended. A nil
// err is a guest that powered itself off (ExitStatus.Normal: never restarted); an error is a
// crash (ExitStatus.Error: rerun while starting, restarted when highly available, see
// CrashVM). The exit of an earlier run is ignored.
func (s *Simulator) GuestExited(vmID string, run int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.inv.vms[vmID]
	if v == nil || v.guestRun != run || v.power == phaseDown {
		return
	}
	// The exit decides what follows (ha.go): a crash of a VM being started is rerun elsewhere,
	// of a highly available one restarted; a guest that powered itself off stays down.
	s.guestExited(v, time.Now(), err)
}

// bootGuest queues the boot of v's guest for a start at now with the config drive of payload,
// if any (for the whole run: a reboot keeps it, unless the run is a volatile run once).
func (inv *inventory) bootGuest(v *vm, payload *VMInitialization) {
	v.boots, v.hung = v.boots+1, false
	if inv.guests == nil {
		return
	}
	v.runDrive = nil
	if payload != nil {
		v.runDrive = map[string]string{}
		for _, f := range payload.ConfigDrive() {
			v.runDrive[f.Path] = f.Data
		}
	}
	inv.guests.enqueue(guestOp{kind: guestBoot, boot: inv.nextBoot(v)})
}

// rebootGuest queues the reboot of v's guest: a new boot of the same run's disk and drive.
func (inv *inventory) rebootGuest(v *vm) {
	if inv.guests == nil {
		return
	}
	inv.guests.enqueue(guestOp{kind: guestReboot, boot: inv.nextBoot(v)})
}

// nextBoot numbers a new boot of v's guest.
func (inv *inventory) nextBoot(v *vm) GuestBoot {
	v.guestRun++
	b := GuestBoot{VMID: v.id, Run: v.guestRun, ConfigDrive: v.runDrive, OSType: v.osType}
	for _, n := range v.nics {
		if n.plugged {
			b.MACs = append(b.MACs, n.mac)
		}
	}
	return b
}

// guestOp queues a shutdown, power-off or removal of v's guest.
func (inv *inventory) guestOp(v *vm, kind guestOpKind) {
	if inv.guests == nil {
		return
	}
	inv.guests.enqueue(guestOp{kind: kind, boot: GuestBoot{VMID: v.id, Run: v.guestRun}})
}

// realGuestIfaces are the interfaces of v's real guest as a guestIface list, nil when the
// simulator runs no guests.
func (inv *inventory) realGuestIfaces(v *vm) ([]guestIface, bool) {
	if inv.guestRuntime == nil {
		return nil, false
	}
	var out []guestIface
	for _, i := range inv.guestRuntime.Interfaces(v.id) {
		out = append(out, guestIface{id: derivedID(v.id, i.Name), name: i.Name, mac: i.MAC, ips: i.IPs})
	}
	return out, true
}
