package ovirtsim

import (
	"fmt"
	"log"
	"net/http"
	"slices"
	"strings"
	"time"
)

// High availability: the VM lease, the storage error resume behaviour, how a VM's run ends
// (exit status and reason, as VDSM reports them and VmAnalyzer.proceedDownVm reads them) and
// what the Engine does then: a VM whose process died with ExitStatus.Error while it was being
// started is run again on another host (RunVmCommandBase.rerun), a highly available one that
// died later is started again (HaAutoStartVmsRunner, RunVm on any host); a VM that went down
// with ExitStatus.Normal (a stop or shutdown through the API, a shutdown from inside the guest)
// is never restarted (HaAutoStartVmsRunner.vmNeedsToBeAutoStarted wants ExitStatus.Error).

// Exit statuses and reasons (VmExitStatus, VmExitReason).
const (
	exitNormal = "normal"
	exitError  = "error"

	exitAdminShutdown = "AdminShutdown"      // a stop or shutdown the Engine asked for
	exitUserShutdown  = "UserShutdown"       // the guest powered itself off
	exitLostQEMU      = "LostQEMUConnection" // the qemu process died
	exitHostFenced    = "HostFenced"         // the host failed (SetVmStatus Down, Error; no VDSM reason)
)

// maxRerunVMOnVdsCount is MaxRerunVmOnVdsCount (0000_config.sql): a run is tried on at most
// three hosts.
const maxRerunVMOnVdsCount = 3

// recordExit notes how the VM's run ended; v.stopTime must be set already.
func (v *vm) recordExit(status, reason string) {
	v.perf.exitStatus, v.perf.exitReason, v.perf.exitAt = status, reason, v.stopTime
}

// exit reports how the last run of a down VM ended: what an event recorded, else a stop or
// shutdown through the API (Normal, AdminShutdown). Empty unless the VM is down after a run.
func (v *vm) exit(now time.Time) (status, reason string) {
	if v.status(now) != "down" || v.stopTime.IsZero() {
		return "", ""
	}
	if !v.perf.exitAt.IsZero() && v.perf.exitAt.Equal(v.stopTime) {
		return v.perf.exitStatus, v.perf.exitReason
	}
	return exitNormal, exitAdminShutdown
}

// blacklisted reports whether the rerun being scheduled must avoid h (RunVmCommand's
// getRunVdssList, the hosts this run was tried on).
func (p *vmPerf) blacklisted(h *host) bool {
	return p.rerunning && slices.Contains(p.tried, h)
}

// vmExited takes a running VM down because its process ended, and does what the Engine does
// next (see above). killGuest also kills a real guest (the event did not come from it).
// Call with the write lock.
func (s *Simulator) vmExited(v *vm, now time.Time, status, reason string, killGuest bool) {
	st := v.status(now)
	h := v.host
	v.power, v.phaseAt, v.stopTime = phaseDown, now, now
	v.leaveHost()
	v.recordExit(status, reason)
	s.inv.vmWentDown(v, h, now, now)
	if killGuest {
		s.inv.guestOp(v, guestPowerOff)
	}
	if status != exitError {
		return
	}
	if st == "wait_for_launch" || st == "powering_up" {
		// Still in the async running list (VmAnalyzer: setRerunFlag): RunVmCommand reruns on a
		// host it has not tried, at most MaxRerunVmOnVdsCount hosts in all; then it gives up and
		// the VM stays down, highly available or not.
		if v.perf.triedRun != v.startTime {
			v.perf.tried, v.perf.triedRun = nil, v.startTime
		}
		if h != nil && !slices.Contains(v.perf.tried, h) {
			v.perf.tried = append(v.perf.tried, h)
		}
		if len(v.perf.tried) >= maxRerunVMOnVdsCount {
			return
		}
		v.perf.rerunning = true
		dst, aerr := s.inv.scheduleVM(v, now, nil, "VAR__ACTION__RUN")
		v.perf.rerunning = false
		if aerr == nil {
			s.relaunch(v, dst, now)
		}
		return
	}
	if !v.ha {
		return
	}
	// HaAutoStartVmsRunner (every AutoStartVmsRunnerIntervalInSeconds, 1 s; the simulator at
	// once): RunVm with no host excluded, so the same host may take it again. A start that
	// fails leaves the VM down (the runner's retries every 30 s are not modelled).
	if dst, aerr := s.inv.scheduleVM(v, now, nil, "VAR__ACTION__RUN"); aerr == nil {
		s.launch(v, dst, now)
	}
}

// relaunch runs v again on h within the same run (a rerun): the run's start time, run-once
// flags and config drive stay.
func (s *Simulator) relaunch(v *vm, h *host, now time.Time) {
	tm := s.timings
	if !s.guestAgent || v.noAgent {
		tm.PoweringUp = tm.NoAgentPoweringUp
	}
	v.power, v.phaseAt = phaseStarting, now
	v.wfl, v.pu, v.gaDelay = tm.WaitForLaunch, tm.PoweringUp, tm.GuestAgentDelay
	h.place(v)
	v.boots, v.hung = v.boots+1, false
	if s.inv.guests != nil {
		s.inv.guests.enqueue(guestOp{kind: guestBoot, boot: s.inv.nextBoot(v)})
	}
	s.afterLaunch(v, h, now)
}

// CrashVM makes the process of a running VM die abnormally (VDSM reports it down with
// ExitStatus.Error, LostQEMUConnection). A VM that was still starting (wait_for_launch,
// powering_up) is run again on a host this run has not tried (at most three hosts); a highly
// available VM that was up is started again through the scheduler, on the same host or
// another; any other VM stays down. It fails with ErrNotFound for an unknown VM and ErrConflict
// for a VM that is not running.
func (s *Simulator) CrashVM(vmID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.inv.vms[vmID]
	if v == nil {
		return fmt.Errorf("VM %q: %w", vmID, ErrNotFound)
	}
	now := time.Now()
	if !v.running(now) {
		return fmt.Errorf("VM %q is %s, not running: %w", v.name, v.status(now), ErrConflict)
	}
	s.vmExited(v, now, exitError, exitLostQEMU, true)
	return nil
}

// ShutdownVMFromGuest powers a running VM off from inside its guest (VDSM: ExitStatus.Normal,
// UserShutdown): the VM goes down and is not restarted, highly available or not. It fails like
// CrashVM.
func (s *Simulator) ShutdownVMFromGuest(vmID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.inv.vms[vmID]
	if v == nil {
		return fmt.Errorf("VM %q: %w", vmID, ErrNotFound)
	}
	now := time.Now()
	if !v.running(now) {
		return fmt.Errorf("VM %q is %s, not running: %w", v.name, v.status(now), ErrConflict)
	}
	s.vmExited(v, now, exitNormal, exitUserShutdown, true)
	return nil
}

// guestExited is GuestExited's decision: the guest ending during a shutdown the API asked for
// is that shutdown; a guest that powered itself off is a UserShutdown; one that ended with an
// error (crashed, failed to boot) is an Error.
func (s *Simulator) guestExited(v *vm, now time.Time, err error) {
	status, reason := exitNormal, exitUserShutdown
	switch {
	case v.power == phaseStopping:
		reason = exitAdminShutdown
	case err != nil:
		log.Printf("ovirtsim: the guest of VM %s ended: %v", v.id, err)
		status, reason = exitError, exitLostQEMU
	}
	s.vmExited(v, now, status, reason, false)
}

// ---- the lease

// leaseCommand is VmManagementCommandBase.canAddLease with the lease parts of AddVmCommand and
// UpdateVmCommand.validate: a lease is checked only when it is new (shouldAddLease: on update,
// a storage domain other than the current one); it needs high availability (409), a storage
// domain of the VM's data center (400 "doesn't exist" otherwise), active (409) and a data domain
// (400); a running VM's lease cannot be swapped for another (409). <lease/> without a storage
// domain id removes it (StorageDomainLeaseMapper maps only the id). The Engine does not check
// the storage format here (VmLeasesSupported went in 4.3). It updates n.
func (inv *inventory) leaseCommand(v *vm, old, n *vmPerf, sp *perfSpec, ha bool, now time.Time, action string) *apiError {
	if !sp.leaseSet {
		return nil
	}
	if sp.leaseID == "" {
		n.lease = nil
		return nil
	}
	if old.lease != nil && old.lease.id == sp.leaseID {
		return nil
	}
	fail := func(msg string, vars ...string) *apiError {
		return engineFault(append([]string{action, "VAR__TYPE__VM", msg}, vars...)...)
	}
	if !ha {
		return fail("ACTION_TYPE_FAILED_VM_LEASES_ARE_NOT_SUPPORTED_WITH_HA_OFF")
	}
	sd := inv.storageDomain(sp.leaseID)
	if sd == nil || sd.dc != v.cluster.dc { // storageDomainDao.getForStoragePool
		return fail("ACTION_TYPE_FAILED_STORAGE_DOMAIN_NOT_EXIST")
	}
	if sd.status != "active" {
		return fail("ACTION_TYPE_FAILED_STORAGE_DOMAIN_STATUS_ILLEGAL2", "$status "+javaEnumName(sd.status))
	}
	if sd.typ != "data" {
		return fail("ACTION_TYPE_FAILED_ACTION_IS_SUPPORTED_ONLY_FOR_DATA_DOMAINS")
	}
	if action == actionUpdate && v.status(now) != "down" && old.lease != nil {
		return fail("ACTION_TYPE_FAILED_HOT_SWAPPING_VM_LEASES_NOT_SUPPORTED")
	}
	n.lease = sd
	return nil
}

// javaEnumName turns an API status ("preparing_for_maintenance") into the Engine's enum name
// ("PreparingForMaintenance"), as StorageDomainStatus.name() reads in messages.
func javaEnumName(s string) string {
	var b strings.Builder
	for _, w := range strings.Split(s, "_") {
		b.WriteString(capitalise(w))
	}
	return b.String()
}

// ---- scheduling

// pinToHostFilter is PinToHostPolicyUnit (a mandatory filter, run before the policy's): a
// pinned VM runs only on its placement hosts; pinned without hosts, anywhere while down.
func pinToHostFilter(v *vm, hosts []*host, run *schedRun, now time.Time) []*host {
	if v.perf.affinity != "pinned" {
		return hosts
	}
	var kept []*host
	for _, h := range hosts {
		switch {
		case len(v.perf.pinnedHosts) > 0 && slices.Contains(v.perf.pinnedHosts, h),
			len(v.perf.pinnedHosts) == 0 && v.runningOn(now) == nil:
			kept = append(kept, h)
		default:
			run.addDetail(h, "VAR__DETAIL__NOT_PINNED_TO_HOST")
		}
	}
	return kept
}

// leasesReadyFilter is VmLeasesReadyFilterPolicyUnit (mandatory): a VM with a lease runs only on
// hosts that hold its lease domain, which no host does while the domain is not active.
func leasesReadyFilter(v *vm, hosts []*host, run *schedRun) []*host {
	if v.perf.lease == nil || v.perf.lease.status == "active" {
		return hosts
	}
	for _, h := range hosts {
		run.addDetail(h, "ACTION_TYPE_FAILED_VM_LEASE_IS_NOT_READY_FOR_HOST")
	}
	return nil
}

// hugePagesFilter is HugePagesFilterPolicyUnit: a VM backed by huge pages needs that many free
// pages of its size on the host.
func hugePagesFilter(v *vm, hosts []*host, run *schedRun, now time.Time) []*host {
	size, count := v.hugePages()
	if size == 0 {
		return hosts
	}
	var kept []*host
	for _, h := range hosts {
		if h.freeHugePages(size, now) < count {
			run.addDetail(h, "VAR__DETAIL__NOT_ENOUGH_HUGE_PAGES")
			continue
		}
		kept = append(kept, h)
	}
	return kept
}

// nonMigratable is MaintenanceNumberOfVdssCommand's check before a host goes to maintenance:
// a running VM pinned to the host (placement_policy affinity pinned) cannot be migrated away
// (user_migratable VMs are, by an administrator's request). It answers the Engine's message, ""
// when none.
func nonMigratable(h *host, now time.Time) string {
	var names []string
	for _, v := range h.runningVMs(now) {
		if v.perf.affinity == "pinned" {
			names = append(names, v.name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("Cannot switch the following Hosts to Maintenance mode: %s.\nOne or more running VMs are indicated as non-migratable. The non-migratable VMs are: %s.",
		h.name, strings.Join(names, " , "))
}

// ---- host huge pages

// HugePages is a host's static huge pages of one size.
type HugePages struct {
	// SizeKB is the page size in KiB (2048, 1048576).
	SizeKB int64 `json:"size_kb"`
	// Count is how many pages of that size the host has.
	Count int64 `json:"count"`
}

// HugePagesState is a host's huge pages of one size and how many are free now.
type HugePagesState struct {
	SizeKB int64 `json:"size_kb"`
	Count  int64 `json:"count"`
	Free   int64 `json:"free"`
}

func checkHugePages(hostName string, pages []HugePages) error {
	for _, p := range pages {
		if p.SizeKB <= 0 || p.Count < 0 {
			return invalidf("host %q: huge pages need a positive size_kb and a count >= 0 (got %+v)", hostName, p)
		}
	}
	return nil
}

// freeHugePages is the host's free pages of a size: its pages minus those of the VMs running
// there (VDSM reports the free ones).
func (h *host) freeHugePages(sizeKiB int64, now time.Time) int64 {
	var n int64
	for _, p := range h.hugePages {
		if p.SizeKB == sizeKiB {
			n += p.Count
		}
	}
	for v := range h.vms {
		if v.runningOn(now) == h {
			if size, count := v.hugePages(); size == sizeKiB {
				n -= count
			}
		}
	}
	return max(n, 0)
}

func hugePagesStates(h *host, now time.Time) []HugePagesState {
	var out []HugePagesState
	for _, p := range h.hugePages {
		out = append(out, HugePagesState{SizeKB: p.SizeKB, Count: p.Count, Free: h.freeHugePages(p.SizeKB, now)})
	}
	return out
}

// SetHostHugePages replaces the static huge pages of a host (none: no page at all). It fails
// with ErrNotFound for an unknown host and ErrInvalid for a size or count out of range.
func (s *Simulator) SetHostHugePages(name string, pages ...HugePages) error {
	if err := checkHugePages(name, pages); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.inv.hostByName[name]
	if h == nil {
		return fmt.Errorf("host %q: %w", name, ErrNotFound)
	}
	h.hugePages = append([]HugePages(nil), pages...)
	return nil
}

// ---- VM state

// VMSettings are the VM's performance and high availability settings (part of VMState).
type VMSettings struct {
	// HAPriority is high_availability.priority.
	HAPriority int64 `json:"ha_priority,omitempty"`
	// CustomProperties are the stored custom properties, in the order the Engine answers them.
	CustomProperties []CustomProperty `json:"custom_properties,omitempty"`
	// Lease is the name of the lease's storage domain (empty: no lease).
	Lease string `json:"lease,omitempty"`
	// StorageErrorResumeBehaviour is auto_resume, leave_paused or kill.
	StorageErrorResumeBehaviour string `json:"storage_error_resume_behaviour"`
	// CPUMode is host_passthrough or empty (the Engine keeps no other mode).
	CPUMode string `json:"cpu_mode,omitempty"`
	// PlacementAffinity is migratable, user_migratable or pinned.
	PlacementAffinity string `json:"placement_affinity"`
	// PinnedHosts are the names of the placement policy's hosts, in the Engine's order.
	PinnedHosts []string `json:"pinned_hosts,omitempty"`
	// CPUPinning is the Engine's pinning string ("0#1_1#2-3"), from cpu.cpu_tune.
	CPUPinning string `json:"cpu_pinning,omitempty"`
	// CPUPinningPolicy is none, manual, resize_and_pin_numa, dedicated or isolate_threads
	// (always none on a 4.4 engine).
	CPUPinningPolicy string `json:"cpu_pinning_policy"`
	IOThreads        int    `json:"io_threads"`
	MultiQueues      bool   `json:"multi_queues_enabled"`
	Ballooning       bool   `json:"ballooning"`
	// HugePagesKB is the huge page size of a VM backed by huge pages (its hugepages custom
	// property), 0 otherwise.
	HugePagesKB int64 `json:"hugepages_kb,omitempty"`
	// ExitStatus (normal, error) and ExitReason (AdminShutdown, UserShutdown,
	// LostQEMUConnection, HostFenced) of the last run, while the VM is down.
	ExitStatus string `json:"exit_status,omitempty"`
	ExitReason string `json:"exit_reason,omitempty"`
}

func vmSettings(v *vm, now time.Time) VMSettings {
	p := &v.perf
	st := VMSettings{HAPriority: v.haPriority, StorageErrorResumeBehaviour: p.resume, PlacementAffinity: p.affinity,
		CPUPinning: p.cpuPinning, CPUPinningPolicy: p.pinPolicy, IOThreads: p.ioThreads, MultiQueues: p.multiQueues,
		Ballooning: p.ballooning, HugePagesKB: p.hugePageKiB()}
	for _, c := range p.props {
		st.CustomProperties = append(st.CustomProperties, CustomProperty{Name: c.name, Value: c.value})
	}
	if p.lease != nil {
		st.Lease = p.lease.name
	}
	if p.passthrough {
		st.CPUMode = "host_passthrough"
	}
	for _, h := range p.pinnedHosts {
		st.PinnedHosts = append(st.PinnedHosts, h.name)
	}
	st.ExitStatus, st.ExitReason = v.exit(now)
	return st
}

// ---- admin

// serveAdminHA serves the admin endpoints of this file; false when the route is not one.
func (s *Simulator) serveAdminHA(w http.ResponseWriter, r *http.Request, route string, segs []string) bool {
	ok := func(v any) { writeJSON(w, http.StatusOK, v) }
	switch route {
	case "POST vms/{id}/crash":
		if err := s.CrashVM(segs[1]); err != nil {
			writeAdminError(w, err)
		} else if st, found := s.VM(segs[1]); found {
			ok(st)
		}
	case "POST vms/{id}/guest-shutdown":
		if err := s.ShutdownVMFromGuest(segs[1]); err != nil {
			writeAdminError(w, err)
		} else if st, found := s.VM(segs[1]); found {
			ok(st)
		}
	case "PUT hosts/{name}/hugepages":
		var pages []HugePages
		if err := decodeJSON(r, &pages); err != nil {
			writeAdminError(w, err)
		} else if err := s.SetHostHugePages(segs[1], pages...); err != nil {
			writeAdminError(w, err)
		} else if h, found := s.Host(segs[1]); found {
			ok(h)
		}
	default:
		return false
	}
	return true
}

func init() {
	for k, t := range map[string]struct {
		text   string
		status int
	}{
		"ACTION_TYPE_FAILED_VM_LEASES_ARE_NOT_SUPPORTED_WITH_HA_OFF":   {"Cannot ${action} ${type}. A VM lease was defined but high availability option is set to false.", 409},
		"ACTION_TYPE_FAILED_HOT_SWAPPING_VM_LEASES_NOT_SUPPORTED":      {"Cannot ${action} ${type}. Hot swapping of VM leases is not supported, please remove the current lease and then set a new one.", 409},
		"ACTION_TYPE_FAILED_STORAGE_DOMAIN_NOT_EXIST":                  {"Cannot ${action} ${type}. Storage Domain doesn't exist.", 400},
		"ACTION_TYPE_FAILED_STORAGE_DOMAIN_STATUS_ILLEGAL2":            {"Cannot ${action} ${type}. The relevant Storage Domain's status is ${status}.", 409},
		"ACTION_TYPE_FAILED_ACTION_IS_SUPPORTED_ONLY_FOR_DATA_DOMAINS": {"Cannot ${action} ${type}. Action is only applicable for Data domains.", 400},
		"ACTION_TYPE_FAILED_VM_LEASE_IS_NOT_READY_FOR_HOST":            {"$detailMessage VM lease is not ready yet", 409},
	} {
		engineTexts[k] = t.text
		engineErrorTypes[k] = t.status
	}
}
