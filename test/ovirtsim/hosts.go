package ovirtsim

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	ovirtsdk "github.com/ovirt/go-ovirt"
)

const (
	// defaultHostMemoryGB is the memory of a host whose seed gives none:
	// big enough that memory only limits placement when a test says so.
	defaultHostMemoryGB = 2048
	// defaultHostsPerCluster is how many hosts a cluster without Hosts gets.
	defaultHostsPerCluster = 3
)

// hostStatuses are the API model's HostStatus values.
var hostStatuses = []string{"connecting", "down", "error", "initializing", "install_failed", "installing",
	"installing_os", "kdumping", "maintenance", "non_operational", "non_responsive", "pending_approval",
	"preparing_for_maintenance", "reboot", "unassigned", "up"}

// host is a hypervisor (a VDS) of a cluster.
type host struct {
	id, name  string
	cluster   *cluster
	memory    int64 // bytes the VMs may use (physical memory at 100% over-commit)
	status    string
	vms       map[*vm]struct{} // VMs placed here; one that went down since is skipped (vm.runningOn)
	hugePages []HugePages      // static huge pages (ha.go)
	// passthrough is device_passthrough.enabled, devices the host_device rows (hostdevices.go),
	// refreshAt the pending refreshes of their available_instances.
	passthrough bool
	devices     []*hostDevice
	refreshAt   []time.Time
}

// runningVMs lists the VMs running on h now, by name.
func (h *host) runningVMs(now time.Time) []*vm {
	var out []*vm
	for v := range h.vms {
		if v.runningOn(now) == h {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b *vm) int { return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.id, b.id)) })
	return out
}

// committed is the memory of the VMs running on h now.
func (h *host) committed(now time.Time) int64 {
	var n int64
	for v := range h.vms {
		if v.runningOn(now) == h {
			n += v.ordinaryMemory() // a VM backed by huge pages takes none (performance.go)
		}
	}
	return n
}

// free is what the memory filter sees: the host memory minus the memory of
// its running VMs (max_scheduling_memory, without the engine's overheads).
func (h *host) free(now time.Time) int64 { return h.memory - h.committed(now) }

// place records that v runs on h from now on.
func (h *host) place(v *vm) {
	if v.host != nil && v.host != h {
		delete(v.host.vms, v)
	}
	v.host = h
	h.vms[v] = struct{}{}
}

// prune forgets the VMs that no longer run on h; call with the write lock.
func (h *host) prune(now time.Time) {
	for v := range h.vms {
		if v.runningOn(now) != h {
			delete(h.vms, v)
		}
	}
}

func validHostStatus(s string) bool { return slices.Contains(hostStatuses, s) }

// addSeedHosts creates the hosts of a seed cluster: the given ones, or the
// default three.
func (inv *inventory) addSeedHosts(cl *cluster, c Cluster) error {
	hosts := c.Hosts
	switch {
	case c.NoHosts && len(hosts) > 0:
		return invalidf("cluster %q: no_hosts with hosts", c.Name)
	case c.NoHosts:
		return nil
	case len(hosts) == 0:
		for i := 1; i <= defaultHostsPerCluster; i++ {
			hosts = append(hosts, Host{Name: fmt.Sprintf("%s-host%d", strings.ToLower(c.Name), i)})
		}
	}
	for _, h := range hosts {
		if _, err := inv.addHost(cl, h); err != nil {
			return err
		}
	}
	return nil
}

// addHost adds a host to a cluster; it fails with ErrInvalid on a bad name,
// memory or status and with ErrConflict on a name in use.
func (inv *inventory) addHost(cl *cluster, h Host) (*host, error) {
	if !validName(h.Name) {
		return nil, invalidf("host name %q: want letters, digits, '_', '-' and '.'", h.Name)
	}
	if _, dup := inv.hostByName[h.Name]; dup {
		return nil, fmt.Errorf("host %q already exists: %w", h.Name, ErrConflict)
	}
	if h.MemoryGB < 0 {
		return nil, invalidf("host %q: negative memory_gb", h.Name)
	}
	if h.MemoryGB == 0 {
		h.MemoryGB = defaultHostMemoryGB
	}
	if h.Status == "" {
		h.Status = "up"
	}
	if !validHostStatus(h.Status) {
		return nil, invalidf("host %q: unknown status %q (%s)", h.Name, h.Status, strings.Join(hostStatuses, ", "))
	}
	if err := checkHugePages(h.Name, h.HugePages); err != nil {
		return nil, err
	}
	devs, err := newHostDevices(h)
	if err != nil {
		return nil, err
	}
	o := &host{id: uuid4(inv.hostRng), name: h.Name, cluster: cl, memory: h.MemoryGB * gib, status: h.Status,
		vms: map[*vm]struct{}{}, hugePages: append([]HugePages(nil), h.HugePages...),
		passthrough: h.DevicePassthrough, devices: devs}
	inv.hosts = append(inv.hosts, o)
	inv.hostByName[o.name] = o
	inv.byID[o.id] = o
	return o, nil
}

func (inv *inventory) hostByID(id string) *host {
	h, _ := inv.byID[id].(*host)
	return h
}

// spm reports whether h is the SPM of its data center: the first host of
// the data center that is up.
func (inv *inventory) spm(h *host) bool {
	for _, o := range inv.hosts {
		if o.cluster.dc == h.cluster.dc && o.status == "up" {
			return o == h
		}
	}
	return false
}

// ---- Go API

// HostState is a snapshot of one host, for assertions in tests.
type HostState struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Cluster is the cluster name.
	Cluster string `json:"cluster"`
	// Status is the host status: up, maintenance, non_responsive, ...
	Status string `json:"status"`
	// MemoryBytes is the memory VMs may use.
	MemoryBytes int64 `json:"memory_bytes"`
	// FreeMemoryBytes is MemoryBytes minus the memory of the running VMs
	// (what the memory filter and max_scheduling_memory see).
	FreeMemoryBytes int64 `json:"free_memory_bytes"`
	// VMs are the names of the VMs running on the host now, sorted.
	VMs []string `json:"vms"`
	// HugePages are the host's static huge pages, with how many are free now.
	HugePages []HugePagesState `json:"hugepages,omitempty"`
}

func hostState(h *host, now time.Time) HostState {
	st := HostState{ID: h.id, Name: h.name, Cluster: h.cluster.name, Status: h.status,
		MemoryBytes: h.memory, FreeMemoryBytes: h.free(now), VMs: []string{}, HugePages: hugePagesStates(h, now)}
	for _, v := range h.runningVMs(now) {
		st.VMs = append(st.VMs, v.name)
	}
	return st
}

// Hosts returns the state of every host, in creation order (seed order,
// then AddHost).
func (s *Simulator) Hosts() []HostState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	now := time.Now()
	out := make([]HostState, 0, len(s.inv.hosts))
	for _, h := range s.inv.hosts {
		out = append(out, hostState(h, now))
	}
	return out
}

// Host returns the state of a host by name.
func (s *Simulator) Host(name string) (HostState, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := s.inv.hostByName[name]
	if h == nil {
		return HostState{}, false
	}
	return hostState(h, time.Now()), true
}

// VMHost returns the name of the host a VM runs on now; false when the VM
// is unknown or not running (down, image_locked).
func (s *Simulator) VMHost(vmID string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := s.inv.vms[vmID]
	if v == nil {
		return "", false
	}
	if h := v.runningOn(time.Now()); h != nil {
		return h.name, true
	}
	return "", false
}

// AddHost adds a host, up, to a cluster at run time (Reset removes it
// again). memoryBytes 0 means the default 2 TiB. It returns the host id; it
// fails with ErrNotFound for an unknown cluster, ErrConflict for a host name
// in use and ErrInvalid for a bad name or a negative memory. A new host runs
// nothing by itself.
func (s *Simulator) AddHost(clusterName, hostName string, memoryBytes int64) (string, error) {
	if memoryBytes < 0 {
		return "", invalidf("host %q: negative memory", hostName)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cl := s.inv.clusterByName[clusterName]
	if cl == nil {
		return "", fmt.Errorf("cluster %q: %w", clusterName, ErrNotFound)
	}
	gb := ceilGiB(memoryBytes)
	h, err := s.inv.addHost(cl, Host{Name: hostName, MemoryGB: gb})
	if err != nil {
		return "", err
	}
	if memoryBytes > 0 {
		h.memory = memoryBytes
	}
	return h.id, nil
}

// SetHostUp sets a host up, or non_responsive (see SetHostStatus).
func (s *Simulator) SetHostUp(name string, up bool) error {
	if up {
		return s.SetHostStatus(name, "up")
	}
	return s.SetHostStatus(name, "non_responsive")
}

// SetHostStatus changes the status of a host, as the engine would after
// the host's monitoring or an administrator changed it:
//   - "up": the host takes VMs again; it starts nothing by itself.
//   - "maintenance" (or "preparing_for_maintenance"): the running VMs are
//     migrated to other hosts of the cluster through the scheduler (at once;
//     the VM keeps its status). When one of them fits nowhere nothing
//     changes and the error (ErrConflict) carries the scheduler's message.
//   - any other status (non_responsive, down, error, non_operational, ...):
//     the host failed. Its VMs go down at once, and the highly available
//     ones (high_availability.enabled) are started again on another host
//     through the scheduler, highest high_availability.priority first; one
//     that fits nowhere stays down.
//
// It fails with ErrNotFound for an unknown host and ErrInvalid for a status
// that is not a HostStatus value.
func (s *Simulator) SetHostStatus(name, status string) error {
	if !validHostStatus(status) {
		return invalidf("host status %q (%s)", status, strings.Join(hostStatuses, ", "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.inv.hostByName[name]
	if h == nil {
		return fmt.Errorf("host %q: %w", name, ErrNotFound)
	}
	now := time.Now()
	h.prune(now)
	switch status {
	case "up", h.status:
		h.status = status
		if status == "up" {
			s.inv.refreshHostDevices(h, now) // the host's monitoring reports its devices again
		}
		return nil
	case "maintenance", "preparing_for_maintenance":
		return s.evacuate(h, status, now)
	}
	h.status = status
	victims := h.runningVMs(now)
	for _, v := range victims {
		v.power, v.phaseAt, v.stopTime = phaseDown, now, now
		v.recordExit(exitError, exitHostFenced) // RestartVdsVmsOperation: Down, ExitStatus.Error
		delete(h.vms, v)
		v.host = nil
		s.inv.guestOp(v, guestPowerOff)
		s.inv.vmWentDown(v, h, now, now)
	}
	// HaAutoStartVmsRunner restarts the highly available VMs, by priority.
	slices.SortStableFunc(victims, func(a, b *vm) int { return cmp.Compare(b.haPriority, a.haPriority) })
	for _, v := range victims {
		if !v.ha {
			continue
		}
		dst, aerr := s.inv.scheduleVM(v, now, nil, "VAR__ACTION__RUN")
		if aerr != nil {
			continue // no host fits: the VM stays down
		}
		s.launch(v, dst, now)
	}
	return nil
}

// evacuate migrates the running VMs of h away before it goes to maintenance.
func (s *Simulator) evacuate(h *host, status string, now time.Time) error {
	if msg := nonMigratable(h, now); msg != "" {
		return fmt.Errorf("%s: %w", msg, ErrConflict)
	}
	moved := map[*vm]*host{}
	for _, v := range h.runningVMs(now) {
		dst, aerr := s.inv.scheduleVM(v, now, h, "VAR__ACTION__MIGRATE")
		if aerr != nil {
			for m := range moved {
				h.place(m)
			}
			return fmt.Errorf("host %s cannot go to %s: VM %s: %s: %w", h.name, status, v.name, aerr.detail, ErrConflict)
		}
		moved[v] = dst
		dst.place(v)
	}
	h.status = status
	return nil
}

// launch starts v on h with the current timings, as a start does.
func (s *Simulator) launch(v *vm, h *host, now time.Time) {
	tm := s.timings
	if !s.guestAgent || v.noAgent {
		tm.PoweringUp = tm.NoAgentPoweringUp
	}
	v.power, v.phaseAt = phaseStarting, now
	v.wfl, v.pu, v.gaDelay = tm.WaitForLaunch, tm.PoweringUp, tm.GuestAgentDelay
	v.startTime = now
	v.runOnce, v.volatileRun = false, false
	h.place(v)
	s.inv.bootGuest(v, nil)
	s.afterLaunch(v, h, now)
}

// ---- REST

func hostRef(id string) *ovirtsdk.Host {
	h := &ovirtsdk.Host{}
	h.SetId(id)
	return h
}

// hostAddress is the address the host was added with.
func hostAddress(h *host) string {
	if strings.Contains(h.name, ".") {
		return h.name
	}
	return h.name + ".example.com"
}

// renderHost renders a host like BackendHostResource (the fields the
// simulator knows; no statistics, NICs or hardware details).
func renderHost(inv *inventory, h *host, now time.Time) *ovirtsdk.Host {
	o := &ovirtsdk.Host{}
	o.SetId(h.id)
	o.SetName(esc(h.name))
	o.SetAddress(esc(hostAddress(h)))
	o.SetStatus(ovirtsdk.HostStatus(h.status))
	o.SetCluster(clusterRef(h.cluster.id))
	o.SetMemory(h.memory)
	o.SetMaxSchedulingMemory(max(h.free(now), 0))
	o.SetType(ovirtsdk.HOSTTYPE_RHEL)
	o.SetPort(54321)
	o.SetProtocol(ovirtsdk.HOSTPROTOCOL_STOMP)
	o.SetExternalStatus(ovirtsdk.EXTERNALSTATUS_OK)
	o.SetKdumpStatus(ovirtsdk.KDUMPSTATUS_DISABLED)
	o.SetUpdateAvailable(false)
	spm := &ovirtsdk.Spm{}
	spm.SetPriority(5)
	if inv.spm(h) {
		spm.SetStatus(ovirtsdk.SPMSTATUS_SPM)
	} else {
		spm.SetStatus(ovirtsdk.SPMSTATUS_NONE)
	}
	o.SetSpm(spm)
	pm := &ovirtsdk.PowerManagement{}
	pm.SetEnabled(false)
	o.SetPowerManagement(pm)
	dp := &ovirtsdk.HostDevicePassthrough{}
	dp.SetEnabled(h.passthrough) // HostMapper: isHostDevicePassthroughEnabled
	o.SetDevicePassthrough(dp)
	cpu := &ovirtsdk.Cpu{}
	cpu.SetName("Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz")
	tp := &ovirtsdk.CpuTopology{}
	tp.SetSockets(2)
	tp.SetCores(24)
	tp.SetThreads(2)
	cpu.SetTopology(tp)
	o.SetCpu(cpu)
	ver := &ovirtsdk.Version{}
	ver.SetMajor(4)
	ver.SetMinor(50)
	ver.SetBuild(5)
	ver.SetRevision(1)
	ver.SetFullVersion("vdsm-4.50.5.1-1.el8")
	o.SetVersion(ver)
	running := int64(len(h.runningVMs(now)))
	sum := &ovirtsdk.VmSummary{}
	sum.SetActive(running)
	sum.SetMigrating(0)
	sum.SetTotal(running)
	o.SetSummary(sum)
	return o
}

var hostFields = []string{"name", "status", "cluster", "datacenter", "address"}

func hHosts(s *Simulator, rq *apiReq) {
	sq, cs, aerr := rq.search("Hosts", hostFields)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	mx, aerr := rq.maxParam()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.RLock()
	now := time.Now()
	var hs []*host
	for _, h := range s.inv.hosts {
		get := func(f string) string {
			switch f {
			case "name":
				return h.name
			case "status":
				return h.status
			case "cluster":
				return h.cluster.name
			case "datacenter":
				return h.cluster.dc.name
			case "address":
				return hostAddress(h)
			}
			return ""
		}
		if sq.match(get, cs) {
			hs = append(hs, h)
		}
	}
	sortByName(hs, func(h *host) string { return h.name }, func(h *host) string { return h.id }, sq != nil && sq.sortDesc)
	hs = limit(hs, mx)
	out := make([]*ovirtsdk.Host, 0, len(hs))
	for _, h := range hs {
		out = append(out, renderHost(s.inv, h, now))
	}
	s.mu.RUnlock()
	sl := &ovirtsdk.HostSlice{}
	sl.SetSlice(out)
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLHostWriteMany(w, sl, "", "") })
}

func hHost(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	h := s.inv.hostByID(rq.ids[0])
	var o *ovirtsdk.Host
	if h != nil {
		o = renderHost(s.inv, h, time.Now())
	}
	s.mu.RUnlock()
	if o == nil {
		rq.fault(notFound(rq.ids[0]))
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLHostWriteOne)
}
