package ovirtsim

import (
	"encoding/xml"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	ovirtsdk "github.com/ovirt/go-ovirt"
)

// Performance settings of a VM (VmBase fields the REST layer maps in VmBaseMapper), its
// custom properties (customprops.go), its lease and storage error resume behaviour (ha.go),
// and the exit of its last run (ha.go).

// vmPerf is the VM's part of vm_static that this file and ha.go handle.
type vmPerf struct {
	props       []customProp   // custom_properties, in the order the Engine answers them
	lease       *storageDomain // lease.storage_domain (leaseStorageDomainId), nil: none
	resume      string         // storage_error_resume_behaviour
	passthrough bool           // cpu.mode host_passthrough (useHostCpuFlags)
	affinity    string         // placement_policy.affinity (migrationSupport)
	pinnedHosts []*host        // placement_policy.hosts (dedicatedVmForVdsList), in HashSet order
	cpuPinning  string         // cpu.cpu_tune as the Engine's string "0#1_1#2-3"
	pinPolicy   string         // cpuPinningPolicy: none, manual, resize_and_pin_numa, dedicated, isolate_threads
	ioThreads   int            // io.threads (numOfIoThreads)
	multiQueues bool           // multi_queues_enabled
	ballooning  bool           // memory_policy.ballooning (balloonEnabled)
	// exit of the last run (ha.go): recorded when the VM went down through an event the
	// simulator models (crash, guest shutdown, host failure); exitAt is v.stopTime then.
	exitStatus, exitReason string
	exitAt                 time.Time
	tried                  []*host   // the hosts the run started at triedRun was tried on (getRunVdssList)
	triedRun               time.Time // v.startTime of that run
	rerunning              bool      // scheduling a rerun: the tried hosts are excluded
}

// newVMPerf is VmBase's defaults, which the simulator's templates have, with the template's
// custom properties (VmMapper.map(VmTemplate)).
func newVMPerf(t *template) vmPerf {
	return vmPerf{props: t.customProps, resume: "auto_resume", affinity: "migratable", pinPolicy: "none",
		ioThreads: 1, multiQueues: true, ballooning: true}
}

// hostSpec is a placement_policy host of a request, by id or name.
type hostSpec struct{ id, name string }

// perfSpec is what a <vm> body (and the add request's auto_pinning_policy parameter) says about
// the settings of vmPerf; unset fields are left as they are.
type perfSpec struct {
	props       *string // the REST layer's custom properties string, nil: <custom_properties> not given
	leaseSet    bool
	leaseID     string // "" with leaseSet: no lease (no storage domain id)
	resume      string
	cpuMode     string
	topology    bool    // cpu.topology given
	cpuTune     *string // cpu.cpu_tune as the Engine's string
	cpuTuneBad  bool    // a vcpu_pin without vcpu: the Engine's mapper fails
	placement   bool    // placement_policy given: its hosts replace the pinned hosts
	affinity    string
	hosts       []hostSpec
	ioThreads   *int64
	multiQueues *bool
	ballooning  *bool
	autoPin     string // the add request's auto_pinning_policy parameter
	bodyAutoPin string // <auto_pinning_policy> (model 4.5; go-ovirt does not read it)
	bodyPolicy  string // <cpu_pinning_policy> (model 4.5; go-ovirt does not read it)

	// filled in by perfPre
	hostIDs      []string // the placement hosts' ids, in the Engine's HashSet order
	autoPinParam string   // the auto_pinning_policy parameter, once the REST layer took it
	validate     *string  // the properties string the command validates (after the mdev_type removal)
	mdevType     *string  // the mdev_type the command removed (4.5), nil: none (hostdevices.go)
}

var (
	cpuModes         = []string{"custom", "host_model", "host_passthrough"}
	vmAffinities     = []string{"migratable", "pinned", "user_migratable"}
	resumeBehaviours = []string{"auto_resume", "kill", "leave_paused"}
	autoPinPolicies  = []string{"adjust", "disabled", "existing"}
	cpuPinPolicies   = []string{"dedicated", "isolate_threads", "manual", "none", "resize_and_pin_numa"}
)

// invalidEnum is the REST layer's answer to an enum value its XML reader does not know
// (IOExceptionMapper: InvalidValueException → 400 "Invalid value"; the detail is approx.).
func invalidEnum(value, what string, allowed []string) *apiError {
	return &apiError{400, "Invalid value", fmt.Sprintf("'%s' is not a valid value for %s (%s).", value, what, strings.Join(allowed, ", "))}
}

// pinningPolicyXML reads the 4.5 model's <auto_pinning_policy> and <cpu_pinning_policy> of a
// <vm>, which go-ovirt's model lacks.
type pinningPolicyXML struct {
	AutoPinningPolicy *string `xml:"auto_pinning_policy"`
	CPUPinningPolicy  *string `xml:"cpu_pinning_policy"`
}

// perfSpecOf reads the performance, lease and custom property fields of a <vm> as the Engine's
// XML reader and VmBaseMapper read them: an unknown enum value is a 400 there.
func perfSpecOf(v *ovirtsdk.Vm, raw []byte) (perfSpec, *apiError) {
	var sp perfSpec
	if sl, ok := v.CustomProperties(); ok {
		s := customPropsString(sl)
		sp.props = &s
	}
	if l, ok := v.Lease(); ok {
		sp.leaseSet = true
		if sd, ok := l.StorageDomain(); ok {
			sp.leaseID, _ = sd.Id() // StorageDomainLeaseMapper: the id only; a name alone is no lease
		}
	}
	if r, ok := v.StorageErrorResumeBehaviour(); ok {
		if !slices.Contains(resumeBehaviours, string(r)) {
			return sp, invalidEnum(string(r), "VmStorageErrorResumeBehaviour", resumeBehaviours)
		}
		sp.resume = string(r)
	}
	if cpu, ok := v.Cpu(); ok {
		if m, ok := cpu.Mode(); ok {
			if !slices.Contains(cpuModes, string(m)) {
				return sp, invalidEnum(string(m), "CpuMode", cpuModes)
			}
			sp.cpuMode = string(m)
		}
		_, sp.topology = cpu.Topology()
		if tune, ok := cpu.CpuTune(); ok {
			s, bad, aerr := cpuTuneString(tune)
			if aerr != nil {
				return sp, aerr
			}
			sp.cpuTune, sp.cpuTuneBad = &s, bad
		}
	}
	if pp, ok := v.PlacementPolicy(); ok {
		sp.placement = true
		if a, ok := pp.Affinity(); ok {
			if !slices.Contains(vmAffinities, string(a)) {
				return sp, invalidEnum(string(a), "VmAffinity", vmAffinities)
			}
			sp.affinity = string(a)
		}
		if hs, ok := pp.Hosts(); ok {
			for _, h := range hs.Slice() {
				var hsp hostSpec
				hsp.id, _ = h.Id()
				hsp.name, _ = h.Name()
				sp.hosts = append(sp.hosts, hsp)
			}
		}
	}
	if io, ok := v.Io(); ok {
		if n, ok := io.Threads(); ok {
			if n > math.MaxInt32 {
				// IntegerParser.parseInt, in the Engine's XML reader.
				return sp, &apiError{400, "Invalid value", fmt.Sprintf("Value %d is greater than maximum integer %d", n, math.MaxInt32)}
			}
			sp.ioThreads = &n
		}
	}
	if on, ok := v.MultiQueuesEnabled(); ok {
		sp.multiQueues = &on
	}
	if mp, ok := v.MemoryPolicy(); ok {
		if on, ok := mp.Ballooning(); ok {
			sp.ballooning = &on
		}
	}
	var px pinningPolicyXML
	if xml.Unmarshal(raw, &px) == nil {
		// Checked by perfPre: only the 4.5 model has them (4.4's reader skips them).
		if px.AutoPinningPolicy != nil {
			sp.bodyAutoPin = strings.TrimSpace(*px.AutoPinningPolicy)
		}
		if px.CPUPinningPolicy != nil {
			sp.bodyPolicy = strings.TrimSpace(*px.CPUPinningPolicy)
		}
	}
	return sp, nil
}

// checkBodyPolicies is the 4.5 XML reader's enum check of <auto_pinning_policy> and
// <cpu_pinning_policy>; a 4.4 engine does not know them and ignores them.
func (sp *perfSpec) checkBodyPolicies(v engineVersion) *apiError {
	if v.minor <= 4 {
		sp.bodyAutoPin, sp.bodyPolicy = "", ""
		return nil
	}
	if sp.bodyAutoPin != "" && !slices.Contains(autoPinPolicies, sp.bodyAutoPin) {
		return invalidEnum(sp.bodyAutoPin, "AutoPinningPolicy", autoPinPolicies)
	}
	if sp.bodyPolicy != "" && !slices.Contains(cpuPinPolicies, sp.bodyPolicy) {
		return invalidEnum(sp.bodyPolicy, "CpuPinningPolicy", cpuPinPolicies)
	}
	return nil
}

// cpuTuneString is VmBaseMapper.cpuTuneToString: "vcpu#cpuset" joined by '_' (a missing cpu
// set is Java's "null"); bad reports a pin without vcpu (a NullPointerException there). The
// vcpu is a Java int: above its range the XML reader refuses it (IntegerParser), below it wraps.
func cpuTuneString(tune *ovirtsdk.CpuTune) (string, bool, *apiError) {
	pins, ok := tune.VcpuPins()
	if !ok {
		return "", false, nil
	}
	var parts []string
	for _, p := range pins.Slice() {
		n, ok := p.Vcpu()
		if !ok {
			return "", true, nil
		}
		if n > math.MaxInt32 {
			return "", false, &apiError{400, "Invalid value", fmt.Sprintf("Value %d is greater than maximum integer %d", n, math.MaxInt32)}
		}
		set, ok := p.CpuSet()
		if !ok {
			set = "null"
		}
		parts = append(parts, strconv.Itoa(int(int32(n)))+"#"+set) // below the int range it wraps (BigInteger.intValue)
	}
	return strings.Join(parts, "_"), false, nil
}

// mapPolicies applies the pinning policy fields of a body as VmBaseMapper and
// BackendVmsResource.updateCpuPinningFields do (model 4.5): <auto_pinning_policy> (adjust is
// resize_and_pin_numa, anything else none), then <cpu_pinning_policy> over it; a pinning string
// with policy none becomes manual; a removed string of a manual VM becomes none.
func (sp *perfSpec) mapPolicies(p *vmPerf, previous string, v engineVersion) {
	if v.minor <= 4 {
		return // the 4.4 model has neither field; a VM has no pinning policy there
	}
	switch sp.bodyAutoPin {
	case "adjust":
		p.pinPolicy = "resize_and_pin_numa"
	case "":
	default:
		p.pinPolicy = "none"
	}
	if sp.bodyPolicy != "" {
		p.pinPolicy = sp.bodyPolicy
	}
	if p.cpuPinning != "" && p.pinPolicy == "none" {
		p.pinPolicy = "manual"
	}
	if p.cpuPinning == "" && p.pinPolicy == "manual" && previous == "manual" {
		p.pinPolicy = "none"
	}
}

// autoPinningParam is BackendVmsResource.addAutoPinningPolicy: the add request's
// auto_pinning_policy parameter, unless the body has <auto_pinning_policy> or
// <cpu_pinning_policy>; with a CPU topology or a cpu_tune in the body it is a 409; an unknown
// value a 400. It returns the policy the parameter asks for ("" for none).
func (sp *perfSpec) autoPinningParam() (string, *apiError) {
	if sp.autoPin == "" || sp.bodyAutoPin != "" || sp.bodyPolicy != "" {
		return "", nil
	}
	if sp.topology || sp.cpuTune != nil {
		return "", &apiError{409, reasonFailed, "Attempt to automatically configure CPU topology or pinning while CPU topology or pinning is also specified."}
	}
	if !slices.Contains(autoPinPolicies, sp.autoPin) {
		return "", &apiError{400, reasonFailed, "Invalid value"}
	}
	return sp.autoPin, nil
}

// resolveHosts is BackendVmsResource.validateAndUpdateHostsInPlacementPolicy: each host needs
// an id or a name (400), a name is looked up in the whole engine (404); the ids are kept as
// given and checked by the command. op is the public resource method (add, update), as the
// REST layer names it in its message.
func (inv *inventory) resolveHosts(sp *perfSpec) ([]string, *apiError) {
	var ids []string
	for _, h := range sp.hosts {
		switch {
		case h.id != "":
			ids = append(ids, h.id)
		case h.name != "":
			o := inv.hostByName[h.name]
			if o == nil {
				return nil, notFound(h.name)
			}
			ids = append(ids, o.id)
		default:
			return nil, incomplete("Host", []string{"id|name"}, "validateAndUpdateHostsInPlacementPolicy")
		}
	}
	// A HashSet<Guid> (VmStatic.dedicatedVmForVdsList is filled from it): duplicates go, the
	// order is the set's.
	var uniq []string
	for _, id := range ids {
		if !slices.Contains(uniq, id) {
			uniq = append(uniq, id)
		}
	}
	out := make([]string, 0, len(uniq))
	for _, i := range javaHashMapOrder(uniq) {
		out = append(out, uniq[i])
	}
	return out, nil
}

// dedicatedHosts is VmHandler.validateDedicatedVdsExistOnSameCluster (409 for a host that does
// not exist or is in another cluster).
func (inv *inventory) dedicatedHosts(ids []string, cl *cluster, action string) ([]*host, *apiError) {
	var out []*host
	for _, id := range ids {
		h := inv.hostByID(id)
		if h == nil {
			return nil, engineFault(action, "VAR__TYPE__VM", "ACTION_TYPE_FAILED_DEDICATED_VDS_DOES_NOT_EXIST")
		}
		if h.cluster != cl {
			return nil, engineFault(action, "VAR__TYPE__VM", "ACTION_TYPE_FAILED_DEDICATED_VDS_NOT_IN_SAME_CLUSTER")
		}
		out = append(out, h)
	}
	return out, nil
}

// cpuPinningSyntax is CpuPinningValidator.cpuPinningPattern.
var cpuPinningSyntax = regexp.MustCompile(`^\d+#(\^\d+|\d+-\d+|\d+)(,(\^\d+|\d+-\d+|\d+))*(_\d+#(\^\d+|\d+-\d+|\d+)(,(\^\d+|\d+-\d+|\d+))*)*$`)

// errGeneralFailure is a RuntimeException in a command's validate (CommandBase.internalValidate).
func errGeneralFailure() *apiError { return engineFault("CAN_DO_ACTION_GENERAL_FAILURE") }

// checkCPUPinning is CpuPinningValidator.isCpuPinningValid for the VM's pinning string.
func checkCPUPinning(p *vmPerf, vcpus int, v engineVersion, action string) *apiError {
	if p.cpuPinning == "" {
		return nil
	}
	fail := func(msg string) *apiError { return engineFault(action, "VAR__TYPE__VM", msg) }
	if v.minor > 4 && p.pinPolicy != "manual" { // 4.4 has no pinning policy
		return fail("ACTION_TYPE_FAILED_VM_MANUAL_PINNING_POLICY_NOT_SELECTED")
	}
	if !cpuPinningSyntax.MatchString(p.cpuPinning) {
		return fail("VM_PINNING_FORMAT_INVALID")
	}
	if len(p.pinnedHosts) == 0 {
		return fail("ACTION_TYPE_FAILED_VM_CANNOT_BE_PINNED_TO_CPU_WITH_UNDEFINED_HOST")
	}
	seen := map[int64]bool{}
	for _, rule := range strings.Split(p.cpuPinning, "_") {
		vs, set, _ := strings.Cut(rule, "#")
		vcpu, err := strconv.ParseInt(vs, 10, 32)
		if err != nil {
			return errGeneralFailure() // Integer.parseInt throws inside validate
		}
		if vcpu >= int64(vcpus) {
			return fail("VM_PINNING_VCPU_DOES_NOT_EXIST")
		}
		if seen[vcpu] {
			return fail("VM_PINNING_DUPLICATE_DEFINITION")
		}
		seen[vcpu] = true
		if len(pinnedPCPUs(set)) == 0 {
			return fail("VM_PINNING_PINNED_TO_NO_CPU")
		}
	}
	return nil
}

// pinnedPCPUs is CpuPinningHelper.parsePCpuPinningNumbers: the included CPUs minus the
// excluded ones; a bad range or number gives none.
func pinnedPCPUs(set string) map[int]bool {
	include, exclude := map[int]bool{}, map[int]bool{}
	for _, sec := range strings.Split(set, ",") {
		switch lo, hi, isRange := strings.Cut(sec, "-"); {
		case strings.HasPrefix(sec, "^"):
			n, err := strconv.ParseInt(sec[1:], 10, 32)
			if err != nil {
				return nil
			}
			exclude[int(n)] = true
		case isRange:
			a, err1 := strconv.ParseInt(lo, 10, 32)
			b, err2 := strconv.ParseInt(hi, 10, 32)
			if err1 != nil || err2 != nil || a < 0 || a >= b || b-a > 1<<16 {
				return nil
			}
			for i := a; i <= b; i++ {
				include[int(i)] = true
			}
		default:
			n, err := strconv.ParseInt(sec, 10, 32)
			if err != nil {
				return nil
			}
			include[int(n)] = true
		}
	}
	for n := range exclude {
		delete(include, n)
	}
	return include
}

// checkPinningPolicy is VmHandler.validateCpuPinningPolicy (4.5; the simulator's clusters are
// 4.7, where dedicated is supported, and its hosts have 24 cores per socket, so
// resize_and_pin_numa is never refused), and, on 4.4, VmHandler.validateAutoPinningPolicy for
// the add request's auto_pinning_policy parameter.
func checkPinningPolicy(p *vmPerf, autoPin44 string, v engineVersion, action string) *apiError {
	fail := func(msg string) *apiError { return engineFault(action, "VAR__TYPE__VM", msg) }
	if v.minor <= 4 {
		switch {
		case autoPin44 == "existing":
			return fail("ACTION_TYPE_AUTO_PIN_EXISTING_NOT_SUPPORTED")
		case autoPin44 == "adjust" && len(p.pinnedHosts) == 0:
			return fail("ACTION_TYPE_CANNOT_PIN_WITHOUT_HOST")
		}
		return nil
	}
	if p.pinPolicy == "manual" && strings.TrimSpace(p.cpuPinning) == "" {
		return fail("ACTION_TYPE_CANNOT_SET_MANUAL_PINNING")
	}
	return nil
}

// checkIOThreads is the @SizeFromConfigValue(maxConfig = MaxIoThreadsPerVm, min = 0) of
// VmBase.numOfIoThreads, checked by CommandBase.validateInputs before validate
// (MaxIoThreadsPerVm is 127 in 0000_config.sql). A value below Java's int range wraps
// (BigInteger.intValue), as the REST layer's IntegerParser does.
func checkIOThreads(n int64, action string) (int, *apiError) {
	t := int(int32(n))
	if t < 0 || t > maxIOThreadsPerVM {
		return 0, engineFault(action, "VAR__TYPE__VM", "ACTION_TYPE_FAILED_NUM_OF_IOTHREADS_INCORRECT",
			"ACTION_TYPE_FAILED_ATTRIBUTE_PATH", "$path vmStatic.numOfIoThreads")
	}
	return t, nil
}

// maxIOThreadsPerVM is MaxIoThreadsPerVm.
const maxIOThreadsPerVM = 127

// hugePageKiB is HugePageUtils.getHugePageSize: the "hugepages" custom property as a Java int,
// 0 when absent or not a number; the VM is backed by huge pages when it is positive.
func (p *vmPerf) hugePageKiB() int64 {
	s, ok := propValue(p.props, "hugepages")
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// hugePages is HugePageUtils.getHugePages: the page size and how many pages the VM's memory
// takes (rounded up); size 0 when it has none.
func (v *vm) hugePages() (sizeKiB, count int64) {
	size := v.perf.hugePageKiB()
	if size == 0 {
		return 0, 0
	}
	kib := 1024 * (v.memory / mib)
	return size, (kib + size - 1) / size
}

// ordinaryMemory is the memory a running VM takes from its host outside huge pages
// (HugePageUtils.getRequiredMemoryWithoutHugePages: none for a VM backed by huge pages).
func (v *vm) ordinaryMemory() int64 {
	if v.perf.hugePageKiB() > 0 {
		return 0
	}
	return v.memory
}

// memoryNeed is what the Memory filter asks of a host for v (MemoryPolicyUnit): its memory, or
// for a VM backed by huge pages the memory of the pages the host's free static ones do not
// cover (they would be allocated dynamically), in whole MiB.
func (v *vm) memoryNeed(h *host, now time.Time) int64 {
	size, count := v.hugePages()
	if size == 0 {
		return v.memory
	}
	missing := count - h.freeHugePages(size, now)
	if missing <= 0 {
		return 0
	}
	mibs := (missing*size + 1023) / 1024
	if mibs > math.MaxInt64/mib {
		return math.MaxInt64
	}
	return mibs * mib
}

// ---- rendering

// renderPerf adds what VmBaseMapper answers of vmPerf to a rendered VM.
func renderPerf(o *ovirtsdk.Vm, v *vm) {
	p := &v.perf
	if sl := renderCustomProps(p.props); sl != nil {
		o.SetCustomProperties(sl)
	}
	if p.lease != nil {
		l := &ovirtsdk.StorageDomainLease{}
		l.SetStorageDomain(sdRef(p.lease.id))
		o.SetLease(l)
	}
	o.SetStorageErrorResumeBehaviour(ovirtsdk.VmStorageErrorResumeBehaviour(p.resume))
	if cpu, ok := o.Cpu(); ok {
		if p.passthrough {
			cpu.SetMode(ovirtsdk.CPUMODE_HOST_PASSTHROUGH) // host_model and custom are not kept
		}
		if tune := renderCPUTune(p.cpuPinning); tune != nil {
			cpu.SetCpuTune(tune)
		}
	}
	pp := &ovirtsdk.VmPlacementPolicy{}
	pp.SetAffinity(ovirtsdk.VmAffinity(p.affinity))
	if len(p.pinnedHosts) > 0 {
		refs := make([]*ovirtsdk.Host, 0, len(p.pinnedHosts))
		for _, h := range p.pinnedHosts {
			refs = append(refs, hostRef(h.id))
		}
		hs := &ovirtsdk.HostSlice{}
		hs.SetSlice(refs)
		pp.SetHosts(hs)
	}
	o.SetPlacementPolicy(pp)
	io := &ovirtsdk.Io{}
	io.SetThreads(int64(p.ioThreads))
	o.SetIo(io)
	o.SetMultiQueuesEnabled(p.multiQueues)
	if mp, ok := o.MemoryPolicy(); ok {
		mp.SetBallooning(p.ballooning)
	}
}

// renderCPUTune is VmBaseMapper.stringToCpuTune (nil for no pinning).
func renderCPUTune(pinning string) *ovirtsdk.CpuTune {
	if pinning == "" {
		return nil
	}
	var pins []*ovirtsdk.VcpuPin
	for _, rule := range strings.Split(pinning, "_") {
		vs, set, _ := strings.Cut(rule, "#")
		n, err := strconv.ParseInt(vs, 10, 64)
		if err != nil {
			continue
		}
		pin := &ovirtsdk.VcpuPin{}
		pin.SetVcpu(n)
		pin.SetCpuSet(esc(set))
		pins = append(pins, pin)
	}
	sl := &ovirtsdk.VcpuPinSlice{}
	sl.SetSlice(pins)
	t := &ovirtsdk.CpuTune{}
	t.SetVcpuPins(sl)
	return t
}

// autoPinningPolicyOf is VmMapper.map(CpuPinningPolicy, AutoPinningPolicy).
func autoPinningPolicyOf(policy string) string {
	if policy == "resize_and_pin_numa" {
		return "adjust"
	}
	return "disabled"
}

// vmExtraXML is what a VM answer carries beyond go-ovirt's model (4.4.3): the 4.5 model's
// <auto_pinning_policy> and <cpu_pinning_policy> (VmBaseMapper.mapVmBaseEntityToModel); none on
// a 4.4 engine.
func vmExtraXML(v *vm, ver engineVersion) string {
	if ver.minor <= 4 {
		return ""
	}
	return "<auto_pinning_policy>" + autoPinningPolicyOf(v.perf.pinPolicy) + "</auto_pinning_policy>" +
		"<cpu_pinning_policy>" + v.perf.pinPolicy + "</cpu_pinning_policy>"
}

// addVMExtras makes the answer carry vmExtraXML for the given VMs; call it with the lock held
// (the extras are computed now, the answer is written after). Other extras stay.
func (s *Simulator) addVMExtras(rq *apiReq, vms ...*vm) {
	if len(vms) == 0 {
		return
	}
	extras := make(map[string]string, len(vms))
	for _, v := range vms {
		extras[v.id] = vmExtraXML(v, s.inv.version)
	}
	prev := rq.extraFor
	rq.extraFor = func(kind, id string) string {
		out := ""
		if prev != nil {
			out = prev(kind, id)
		}
		if kind == "vm" {
			out += extras[id]
		}
		return out
	}
}

// ---- creating and updating VMs

// perfPre is what happens before the command validates (in this order): the REST layer
// resolves the placement hosts by name and reads the add request's auto_pinning_policy
// parameter; the command's init removes mdev_type (4.5) and validateInputs checks the io
// threads. The results are kept in sp.
func (inv *inventory) perfPre(sp *perfSpec, add bool, action string) *apiError {
	if aerr := sp.checkBodyPolicies(inv.version); aerr != nil {
		return aerr
	}
	if sp.placement {
		ids, aerr := inv.resolveHosts(sp)
		if aerr != nil {
			return aerr
		}
		sp.hostIDs = ids
	}
	if add {
		p, aerr := sp.autoPinningParam()
		if aerr != nil {
			return aerr
		}
		sp.autoPinParam = p
	}
	if sp.props != nil {
		s, aerr := customPropsOf(*sp.props, inv.version)
		if aerr != nil {
			return aerr
		}
		sp.validate = &s
		if inv.version.minor > 4 {
			props, _ := convertProps(*sp.props) // customPropsOf split it already
			for _, p := range props {
				if p.name == mdevTypeProperty {
					sp.mdevType = &p.value
				}
			}
		}
	}
	if sp.ioThreads != nil {
		if _, aerr := checkIOThreads(*sp.ioThreads, action); aerr != nil {
			return aerr
		}
	}
	return nil
}

// perfProps is the part of canAddVm (and UpdateVmCommand.validate) before the storage checks:
// the custom properties (VmManagementCommandBase.validateCustomProperties; without any in the
// request the VM's or template's are validated again) and the dedicated hosts
// (validateDedicatedVdsExistOnSameCluster). It updates n.
func (inv *inventory) perfProps(v *vm, n *vmPerf, sp *perfSpec, action string) *apiError {
	s := propsString(n.props)
	if sp.validate != nil {
		s = *sp.validate
	}
	if msgs := inv.vmProps.validateProps(s); msgs != nil {
		return customPropsFault(action, msgs)
	}
	n.props = inv.vmProps.stored(s)
	if sp.placement {
		hosts, aerr := inv.dedicatedHosts(sp.hostIDs, v.cluster, action)
		if aerr != nil {
			return aerr
		}
		n.pinnedHosts = hosts
		if sp.affinity != "" {
			n.affinity = sp.affinity
		}
	}
	return nil
}

// perfRest is the rest of the commands' validate for vmPerf, in their order: the CPU pinning
// (CpuPinningValidator), the lease (ha.go), the huge pages hot set (update), the CPU pinning
// policy; then VmHandler.autoSelectResumeBehavior. old is the VM's vmPerf before (for a new VM,
// the template's); ha and memory are the VM's new values. It updates n.
func (inv *inventory) perfRest(v *vm, old, n *vmPerf, sp *perfSpec, ha bool, memory int64, now time.Time, action string) *apiError {
	if sp.cpuMode != "" {
		n.passthrough = sp.cpuMode == "host_passthrough"
	}
	if sp.cpuTuneBad {
		// VmBaseMapper.cpuTuneToString: pin.getVcpu().toString() on a null (approx. detail).
		return &apiError{500, reasonFailed, "java.lang.NullPointerException: a vcpu_pin without vcpu"}
	}
	if sp.cpuTune != nil {
		n.cpuPinning = *sp.cpuTune
	}
	sp.mapPolicies(n, old.pinPolicy, inv.version)
	if sp.autoPinParam != "" && inv.version.minor > 4 {
		n.pinPolicy = "none" // VmMapper.map(AutoPinningPolicy): existing and disabled are none
		if sp.autoPinParam == "adjust" {
			n.pinPolicy = "resize_and_pin_numa"
		}
	}
	if aerr := checkCPUPinning(n, v.sockets*v.cores*v.thr, inv.version, action); aerr != nil {
		return aerr
	}
	if h := v.runningOn(now); action == actionUpdate && h != nil && n.affinity == "pinned" &&
		len(n.pinnedHosts) > 0 && !slices.Contains(n.pinnedHosts, h) {
		// VmValidator.isPinnedVmRunningOnDedicatedHost (UpdateVmCommand.validate).
		return engineFault(action, "VAR__TYPE__VM", "ACTION_TYPE_FAILED_PINNED_VM_NOT_RUNNING_ON_DEDICATED_HOST", "$hostName "+h.name)
	}
	if sp.ioThreads != nil {
		n.ioThreads, _ = checkIOThreads(*sp.ioThreads, action)
	}
	if sp.multiQueues != nil {
		n.multiQueues = *sp.multiQueues
	}
	if sp.ballooning != nil {
		n.ballooning = *sp.ballooning
	}
	if sp.resume != "" {
		n.resume = sp.resume
	}
	if aerr := inv.leaseCommand(v, old, n, sp, ha, now, action); aerr != nil {
		return aerr
	}
	if action == actionUpdate && memory > v.memory && v.running(now) && old.hugePageKiB() > 0 {
		// UpdateVmCommand.validate: a memory hot plug of a VM backed by huge pages.
		return engineFault(action, "VAR__TYPE__VM", "ACTION_TYPE_FAILED_MEMORY_HOT_SET_NOT_SUPPORTED_FOR_HUGE_PAGES")
	}
	if aerr := checkPinningPolicy(n, sp.autoPinParam, inv.version, action); aerr != nil {
		return aerr
	}
	// VmHandler.autoSelectResumeBehavior (AddVmCommand and UpdateVmCommand): "since 4.2 the only
	// supported resume behavior for HA vms with lease is kill".
	if ha && n.lease != nil {
		n.resume = "kill"
	}
	return nil
}

const (
	actionAdd    = "VAR__ACTION__ADD"
	actionUpdate = "VAR__ACTION__UPDATE"
)

// addPerfPre, addPerfProps and addPerfRest are the three steps of a create (createVM calls them
// where the Engine runs them): they build v.perf.
func (inv *inventory) addPerfPre(sp *vmSpec) *apiError {
	return inv.perfPre(&sp.perf, true, actionAdd)
}

func (inv *inventory) addPerfProps(v *vm, sp *vmSpec) *apiError {
	v.perf = newVMPerf(v.template)
	return inv.perfProps(v, &v.perf, &sp.perf, actionAdd)
}

func (inv *inventory) addPerfRest(v *vm, sp *vmSpec, now time.Time) *apiError {
	base := newVMPerf(v.template)
	return inv.perfRest(v, &base, &v.perf, &sp.perf, v.ha, v.memory, now, actionAdd)
}

// updateVMPerf validates PUT /vms/{id} for vmPerf and returns the VM's new vmPerf; n is the
// updated VM before the commit (its memory is the new one).
func (inv *inventory) updateVMPerf(v, n *vm, u *vmUpdate, now time.Time) (vmPerf, *apiError) {
	p := v.perf
	if aerr := inv.perfPre(&u.perf, false, actionUpdate); aerr != nil {
		return p, aerr
	}
	if aerr := inv.perfProps(v, &p, &u.perf, actionUpdate); aerr != nil {
		return p, aerr
	}
	ha := v.ha
	if u.ha != nil {
		ha = *u.ha
	}
	if aerr := inv.perfRest(v, &v.perf, &p, &u.perf, ha, n.memory, now, actionUpdate); aerr != nil {
		return p, aerr
	}
	return p, nil
}

func init() {
	for k, t := range map[string]struct {
		text   string
		status int
	}{
		"ACTION_TYPE_FAILED_DEDICATED_VDS_DOES_NOT_EXIST":                   {"Cannot ${action} ${type}. VM is pinned to a specific host. The required host doesn't exist.", 409},
		"ACTION_TYPE_FAILED_DEDICATED_VDS_NOT_IN_SAME_CLUSTER":              {"Cannot ${action} ${type}. VM is pinned to a specific host. The host's cluster must be the same as the selected VM cluster.", 409},
		"ACTION_TYPE_FAILED_VM_MANUAL_PINNING_POLICY_NOT_SELECTED":          {"Cannot ${action} ${type}. Manual CPU pinning string is defined but the CPU Pinning Policy is not set to Manual", 400},
		"VM_PINNING_FORMAT_INVALID":                                         {"CPU pinning format invalid.", 400},
		"ACTION_TYPE_FAILED_VM_CANNOT_BE_PINNED_TO_CPU_WITH_UNDEFINED_HOST": {"Cannot set host CPU pinning when a host is not selected", 400},
		"VM_PINNING_VCPU_DOES_NOT_EXIST":                                    {"CPU pinning validation failed - virtual CPU does not exist in vm.", 400},
		"VM_PINNING_DUPLICATE_DEFINITION":                                   {"Cannot configure CPU pinning twice to the same vCPU.", 400},
		"VM_PINNING_PINNED_TO_NO_CPU":                                       {"Cannot pin a vCPU to no pCPU.", 400},
		"ACTION_TYPE_CANNOT_SET_MANUAL_PINNING":                             {"Cannot ${action} ${type}. The CPU Pinning policy is set to 'Manual' but no cpu pinning string is provided.", 400},
		"ACTION_TYPE_AUTO_PIN_EXISTING_NOT_SUPPORTED":                       {"Cannot ${action} ${type}. The Auto Pinning policy Existing is currently unsupported.", 400},
		"ACTION_TYPE_CANNOT_PIN_WITHOUT_HOST":                               {"Cannot ${action} ${type}. Can not pin CPU and NUMA without a dedicated host.", 400},
		"ACTION_TYPE_FAILED_NUM_OF_IOTHREADS_INCORRECT":                     {"Cannot ${action} ${type}. Num of IO Threads is not in supported limit.", 400},
		"ACTION_TYPE_FAILED_PINNED_VM_NOT_RUNNING_ON_DEDICATED_HOST":        {"Cannot ${action} ${type}. Running VM is hosted on ${hostName}. Include ${hostName} in dedicated hosts, or migrate VM to dedicated host prior to pinning.", 409},
		"ACTION_TYPE_FAILED_MEMORY_HOT_SET_NOT_SUPPORTED_FOR_HUGE_PAGES":    {"Cannot ${action} ${type}. Memory hot set is not supported for virtual machines with huge pages.", 409},
		"VAR__DETAIL__NOT_ENOUGH_HUGE_PAGES":                                {"$detailMessage there are not enough free huge pages to run the VM", 0},
		"VAR__DETAIL__NOT_PINNED_TO_HOST":                                   {"$detailMessage the host is not present in the pinning list.", 0},
	} {
		engineTexts[k] = t.text
		if t.status != 0 {
			engineErrorTypes[k] = t.status
		}
	}
}
