package ovirtsim

import (
	"fmt"
	"time"
)

// Resetting a VM (ResetVmCommand, POST /vms/{id}/reset) and hung guests.
//
// The simulator counts the boots of every VM's guest (a start, a rerun, a reboot the guest
// performed, a reset). A hung guest (SetGuestHung) answers nothing: it ignores an ACPI shutdown
// (the VM goes powering_down and back to up, as with SetVMIgnoresACPI) and a warm reboot (the
// Engine shows reboot_in_progress and then up again, but the guest did not restart: its boot
// count stays). A reset (VDSM's virDomainReset) and a stop work on any guest; the hang ends with
// the guest's next boot.

// resetVM is ResetVmCommand.validate and perform: cluster level 4.6 or higher
// (FeatureSupported.isVMResetSupported), then a running VM (VMStatus.isRunning, not
// WaitForLaunch); the guest restarts at once, in the same run and on the same host.
func (inv *inventory) resetVM(v *vm, now time.Time) *apiError {
	fail := func(msgs ...string) *apiError {
		return engineFault(append([]string{"VAR__ACTION__RESET", "VAR__TYPE__VM"}, msgs...)...)
	}
	if v.cluster.level < 6 {
		return fail("ACTION_TYPE_FAILED_RESET_VM_IS_NOT_SUPPORTED")
	}
	switch st := v.status(now); st {
	case "up", "powering_up", "powering_down", "reboot_in_progress":
	default:
		return fail("ACTION_TYPE_FAILED_VM_STATUS_ILLEGAL", "$vmStatus "+localizedVMStatus(st))
	}
	v.boots, v.hung = v.boots+1, false
	inv.rebootGuest(v)
	return nil
}

func hReset(s *Simulator, rq *apiReq) {
	s.vmAction(rq, ActionResetVM, func(v *vm, now time.Time, _ Timings) (*apiError, string, time.Time) {
		return s.inv.resetVM(v, now), "Resetting VM " + v.name, now
	})
}

// vmByIDOrName finds a VM by id, else by exact name.
func (s *Simulator) vmByIDOrName(ref string) (*vm, error) {
	if v := s.inv.vms[ref]; v != nil {
		return v, nil
	}
	if v := s.inv.vmByExactName(ref); v != nil {
		return v, nil
	}
	return nil, fmt.Errorf("VM %s: %w", ref, ErrNotFound)
}

// SetGuestHung makes the guest of a VM (by id or name) hang, or recover: a hung guest ignores
// ACPI shutdowns and warm reboots until its next boot (a reset, or a stop and a start). It fails
// with ErrNotFound for an unknown VM.
func (s *Simulator) SetGuestHung(vmRef string, hung bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.vmByIDOrName(vmRef)
	if err != nil {
		return err
	}
	v.hung = hung
	return nil
}

// GuestState is what a VM's guest did so far.
type GuestState struct {
	// Boots counts the boots of the guest: starts, reruns, reboots the guest performed, resets.
	Boots int `json:"boots"`
	// Hung is set while the guest hangs (SetGuestHung).
	Hung bool `json:"hung"`
}

// Guest returns the guest state of a VM (by id or name); it fails with ErrNotFound for an
// unknown VM.
func (s *Simulator) Guest(vmRef string) (GuestState, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, err := s.vmByIDOrName(vmRef)
	if err != nil {
		return GuestState{}, err
	}
	return GuestState{Boots: v.boots, Hung: v.hung}, nil
}

func init() {
	for k, t := range map[string]struct {
		text   string
		status int
	}{
		"VAR__ACTION__RESET":                           {"$action reset", 0},
		"ACTION_TYPE_FAILED_RESET_VM_IS_NOT_SUPPORTED": {"Cannot ${action} ${type}. Reset VM requires cluster compatibility version 4.6 or higher.", 400}, // NOT_SUPPORTED
	} {
		engineTexts[k] = t.text
		if t.status != 0 {
			engineErrorTypes[k] = t.status
		}
	}
}
