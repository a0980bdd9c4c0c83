//go:build linux

package guest

import (
	"context"
	"sync"
	"time"

	"github.com/capov/capov/test/ovirtsim"
)

// SimRuntime is the ovirtsim.GuestRuntime of a Host: the simulator's VMs boot, stop and lose
// their guests through it, and its guest agent reports what the guests' interfaces carry.
type SimRuntime struct {
	host *Host

	mu   sync.Mutex
	sim  *ovirtsim.Simulator
	runs map[string]int                       // the run of each VM's guest
	ifs  map[string][]ovirtsim.GuestInterface // the agent's last report per VM
	// quiet marks the VMs whose running guest the simulator itself ends (a reboot, a
	// power-off, a removal): that end is not news to the simulator, and reporting it late
	// could stop the VM's next boot.
	quiet map[string]bool
	stop  chan struct{}
}

// NewSimRuntime makes the Host of o and a runtime around it; Attach gives it the simulator.
func NewSimRuntime(o HostOptions) (*SimRuntime, error) {
	r := &SimRuntime{runs: map[string]int{}, ifs: map[string][]ovirtsim.GuestInterface{}, quiet: map[string]bool{},
		stop: make(chan struct{})}
	o.OnExit = r.exited
	h, err := NewHost(o)
	if err != nil {
		return nil, err
	}
	r.host = h
	go r.poll()
	return r, nil
}

// Host is the runtime's Host.
func (r *SimRuntime) Host() *Host { return r.host }

// Attach connects the runtime to the simulator whose VMs it runs.
func (r *SimRuntime) Attach(sim *ovirtsim.Simulator) {
	r.mu.Lock()
	r.sim = sim
	r.mu.Unlock()
	sim.SetGuestRuntime(r)
}

// Boot implements ovirtsim.GuestRuntime.
func (r *SimRuntime) Boot(req ovirtsim.GuestBoot) error {
	nics := make([]NIC, 0, len(req.MACs))
	for _, m := range req.MACs {
		nics = append(nics, NIC{MAC: m})
	}
	r.mu.Lock()
	r.runs[req.VMID] = req.Run
	delete(r.ifs, req.VMID)
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return r.host.Boot(ctx, BootRequest{VMID: req.VMID, NICs: nics, ConfigDrive: req.ConfigDrive,
		Ignition: ovirtsim.IsIgnitionOSType(req.OSType)})
}

// Reboot implements ovirtsim.GuestRuntime: the guest gets a clean shutdown (its stop
// timeout, then a power-off), and boots again from the same disk with the same drive; the
// end of the old boot is not reported as the VM's exit.
func (r *SimRuntime) Reboot(req ovirtsim.GuestBoot) error {
	if r.quieten(req.VMID) {
		r.host.Shutdown(req.VMID, 2*r.host.o.StopTimeout+10*time.Second)
	}
	return r.Boot(req)
}

// quieten marks the end of the VM's running guest as the simulator's own; false when no
// guest runs.
func (r *SimRuntime) quieten(vmID string) bool {
	if !r.host.Running(vmID) {
		return false
	}
	r.mu.Lock()
	r.quiet[vmID] = true
	r.mu.Unlock()
	return true
}

// Shutdown implements ovirtsim.GuestRuntime: the guest gets the power button and its stop
// timeout; one that is still up after twice that is powered off.
func (r *SimRuntime) Shutdown(vmID string) {
	go r.host.Shutdown(vmID, 2*r.host.o.StopTimeout+10*time.Second)
}

// PowerOff implements ovirtsim.GuestRuntime.
func (r *SimRuntime) PowerOff(vmID string) {
	if r.quieten(vmID) {
		r.host.PowerOff(vmID)
	}
}

// Remove implements ovirtsim.GuestRuntime.
func (r *SimRuntime) Remove(vmID string) {
	r.quieten(vmID)
	if err := r.host.Remove(vmID); err != nil {
		r.host.logf("removing the disk of VM %s: %v", vmID, err)
	}
	r.mu.Lock()
	delete(r.ifs, vmID)
	delete(r.runs, vmID)
	r.mu.Unlock()
}

// Interfaces implements ovirtsim.GuestRuntime: the last report of the guest's agent.
func (r *SimRuntime) Interfaces(vmID string) []ovirtsim.GuestInterface {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ifs[vmID]
}

// Close powers every guest off.
func (r *SimRuntime) Close() {
	close(r.stop)
	r.host.Close()
}

// exited tells the simulator that a guest ended.
func (r *SimRuntime) exited(vmID string, err error) {
	r.mu.Lock()
	if r.quiet[vmID] {
		delete(r.quiet, vmID)
		r.mu.Unlock()
		return
	}
	sim, run := r.sim, r.runs[vmID]
	delete(r.ifs, vmID)
	r.mu.Unlock()
	if sim != nil {
		sim.GuestExited(vmID, run, err)
	}
}

// agentInterval is how often the guest agents report, as VDSM polls the qemu guest agent.
const agentInterval = 2 * time.Second

// poll reads every running guest's interfaces, as VDSM polls the guest agents.
func (r *SimRuntime) poll() {
	t := time.NewTicker(agentInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		for _, id := range r.host.runningIDs() {
			ifs, err := r.host.Interfaces(id)
			if err != nil {
				continue
			}
			out := make([]ovirtsim.GuestInterface, 0, len(ifs))
			for _, i := range ifs {
				out = append(out, ovirtsim.GuestInterface{Name: i.Name, MAC: i.MAC, IPs: i.IPs})
			}
			r.mu.Lock()
			r.ifs[id] = out
			r.mu.Unlock()
		}
	}
}
