package ovirtsim

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The scheduler follows SchedulingManager with the default cluster policy
// ("none", InternalClusterPolicies): the candidate hosts are the hosts of the
// VM's cluster that are up; the mandatory filters PinToHost, VM leases ready,
// HostDevice and MDevice (hostdevices.go),
// then the filters Memory, HugePages, VmAffinityGroups and
// VmToHostsAffinityGroups run in that order (the policy's order; the other
// filters of the policy have nothing to filter here); the remaining hosts are
// ranked. When no host remains, the answer is the engine's validation
// messages, composed and translated the way the engine composes them.

// ---- the engine's messages

// engineTexts are the AppErrors.properties texts the simulator uses
// (frontend/.../AppErrors.properties, which the backend ships since 4.2).
var engineTexts = map[string]string{
	"VAR__ACTION__RUN":                                        "$action run",
	"VAR__ACTION__MIGRATE":                                    "$action migrate",
	"VAR__ACTION__ADD":                                        "$action add",
	"VAR__ACTION__UPDATE":                                     "$action edit",
	"VAR__ACTION__REMOVE":                                     "$action remove",
	"VAR__TYPE__VM":                                           "$type VM",
	"VAR__TYPE__AFFINITY_GROUP":                               "$type Affinity Group",
	"VAR__FILTERTYPE__INTERNAL":                               "$filterType internal",
	"SCHEDULING_ALL_HOSTS_FILTERED_OUT":                       "Cannot ${action} ${type}. There is no host that satisfies current scheduling constraints. See below for details:",
	"SCHEDULING_NO_HOSTS":                                     "There are no hosts to use. Check that the cluster contains at least one host in Up state.",
	"SCHEDULING_HOST_FILTERED_REASON":                         "The host ${hostName} did not satisfy ${filterType} filter ${filterName}.",
	"SCHEDULING_HOST_FILTERED_REASON_WITH_DETAIL":             "The host ${hostName} did not satisfy ${filterType} filter ${filterName} because ${detailMessage}.",
	"VAR__DETAIL__AFFINITY_FAILED_NEGATIVE":                   "$detailMessage it matched negative affinity rules ${affinityRules}",
	"VAR__DETAIL__AFFINITY_FAILED_POSITIVE":                   "$detailMessage it did not match positive affinity rules ${affinityRules}",
	"VAR__DETAIL__NOT_ENOUGH_MEMORY":                          "$detailMessage its available memory is too low (${availableMem} MB) to run the VM",
	"ACTION_TYPE_FAILED_ATTRIBUTE_PATH":                       "Attribute: ${path}",
	"AFFINITY_GROUP_NAME_TOO_LONG":                            "Cannot ${action} ${type}. Name field input is too long.",
	"AFFINITY_GROUP_NAME_INVALID":                             "Cannot ${action} ${type}. Name field is invalid.",
	"AFFINITY_GROUP_DESCRIPTION_INVALID":                      "Cannot ${action} ${type}. Description field is invalid.",
	"ACTION_TYPE_FAILED_AFFINITY_GROUP_NAME_EXISTS":           "Cannot ${action} ${type}. Affinity Group name already exists.",
	"ACTION_TYPE_FAILED_INVALID_CLUSTER_FOR_AFFINITY_GROUP":   "Cannot ${action} ${type}. Provided Cluster is invalid.",
	"ACTION_TYPE_FAILED_INVALID_ENTITY_FOR_AFFINITY_GROUP":    "Cannot ${action} ${type}. Provided ${entity} is invalid (does not exist).",
	"ACTION_TYPE_FAILED_ENTITY_NOT_IN_AFFINITY_GROUP_CLUSTER": "Cannot ${action} ${type}. Provided ${entity} resides in another Cluster.",
	"ACTION_TYPE_FAILED_DUPLICATE_ENTITY_IN_AFFINITY_GROUP":   "Cannot ${action} ${type}. Duplicate ${entity}.",
	"ACTION_TYPE_FAILED_INVALID_AFFINITY_GROUP_ID":            "Cannot ${action} ${type}. No matching Affinity Group.",
	"ACTION_TYPE_FAILED_CANNOT_CHANGE_CLUSTER_ID":             "Cannot ${action} ${type}. Cannot change Cluster for Affinity Group.",
	"ACTION_TYPE_FAILED_VM_NOT_EXIST":                         "The selected VM does not exist.",
	"VALIDATION_TAGS_INVALID_TAG_NAME":                        "Invalid tag name. Only letters, numbers, '-', and '_' are valid characters.",
	"TAGS_SPECIFY_TAG_IS_IN_USE":                              "The specified Tag name already exists.",
	"TAGS_SPECIFIED_TAG_CANNOT_BE_THE_PARENT_OF_ITSELF":       "Operation canceled, recursive Tag hierarchy cannot be defined.",
	"TAGS_CANNOT_REMOVE_TAG_NOT_EXIST":                        "Cannot remove tag. Tag does not exist.",
	"CAN_DO_ACTION_GENERAL_FAILURE":                           "General command validation failure.",
}

// engineErrorTypes are the EngineMessage error types (EngineMessage.java)
// as ErrorMessageHelper maps them to HTTP statuses; a message without one
// has none.
var engineErrorTypes = map[string]int{
	"SCHEDULING_ALL_HOSTS_FILTERED_OUT":                       409, // CONFLICT
	"ACTION_TYPE_FAILED_ATTRIBUTE_PATH":                       400, // BAD_PARAMETERS, as all below
	"AFFINITY_GROUP_NAME_TOO_LONG":                            400,
	"AFFINITY_GROUP_NAME_INVALID":                             400,
	"AFFINITY_GROUP_DESCRIPTION_INVALID":                      400,
	"ACTION_TYPE_FAILED_AFFINITY_GROUP_NAME_EXISTS":           400,
	"ACTION_TYPE_FAILED_INVALID_CLUSTER_FOR_AFFINITY_GROUP":   400,
	"ACTION_TYPE_FAILED_INVALID_ENTITY_FOR_AFFINITY_GROUP":    400,
	"ACTION_TYPE_FAILED_ENTITY_NOT_IN_AFFINITY_GROUP_CLUSTER": 400,
	"ACTION_TYPE_FAILED_DUPLICATE_ENTITY_IN_AFFINITY_GROUP":   400,
	"ACTION_TYPE_FAILED_INVALID_AFFINITY_GROUP_ID":            400,
	"ACTION_TYPE_FAILED_CANNOT_CHANGE_CLUSTER_ID":             400,
	"ACTION_TYPE_FAILED_VM_NOT_EXIST":                         400,
	"VALIDATION_TAGS_INVALID_TAG_NAME":                        400,
	"TAGS_CANNOT_REMOVE_TAG_NOT_EXIST":                        400,
	"TAGS_SPECIFY_TAG_IS_IN_USE":                              409, // CONFLICT
	"TAGS_SPECIFIED_TAG_CANNOT_BE_THE_PARENT_OF_ITSELF":       409, // CONFLICT
	"CAN_DO_ACTION_GENERAL_FAILURE":                           500, // INTERNAL_ERROR
}

// dynamicVariable is ErrorTranslatorImpl's startsWithVariableDefinitionPattern.
var dynamicVariable = regexp.MustCompile(`^\$[^{}\s]+ .*$`)

// engineFault turns validation messages (EngineMessage names and "$var
// value" lines) into the fault the REST API answers: the status
// ErrorMessageHelper.getErrorStatus picks (400 if any message is
// BAD_PARAMETERS-like or none has a type, else 409 if one is CONFLICT, else
// 500 if one is INTERNAL_ERROR), and the detail
// ErrorTranslatorImpl.translateErrorText makes, as a Java list's toString.
//
// Like ErrorTranslatorImpl.resolveMessages, the variables are global to the
// whole list and the first definition of a name wins: when several hosts
// are filtered out, every "The host ... did not satisfy ..." line shows the
// first host's name, filter and detail.
func engineFault(lines ...string) *apiError {
	types := map[int]bool{}
	for _, l := range lines {
		types[engineErrorTypes[l]] = true
	}
	status := 400
	switch {
	case types[400]:
	case types[409]:
		status = 409
	case types[500]:
		status = 500
	}
	vars := map[string]string{}
	var texts []string
	for _, l := range lines {
		t, ok := engineTexts[l]
		if !ok {
			t = l
			if !dynamicVariable.MatchString(l) {
				// A key without a text: ErrorTranslatorImpl lower-cases it and replaces '_' by ' '.
				t = strings.ReplaceAll(strings.ToLower(l), "_", " ")
			}
		}
		if dynamicVariable.MatchString(t) {
			name, value, _ := strings.Cut(t[1:], " ")
			if _, seen := vars[name]; !seen {
				vars[name] = value
			}
			continue
		}
		texts = append(texts, t)
	}
	for i, t := range texts {
		texts[i] = substitute(t, vars, 0)
	}
	return &apiError{status, reasonFailed, "[" + strings.Join(texts, ", ") + "]"}
}

// substitute replaces ${name} with its value, resolving variables inside
// values too (as commons-lang StrSubstitutor does); unknown names stay.
func substitute(s string, vars map[string]string, depth int) string {
	if depth > 8 {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		name := s[i+2 : i+j]
		if v, ok := vars[name]; ok {
			b.WriteString(substitute(v, vars, depth+1))
		} else {
			b.WriteString(s[i : i+j+1])
		}
		s = s[i+j+1:]
	}
}

// ---- Java HashMap order

// javaHash is HashMap.hash(Guid): Guid.hashCode is UUID.hashCode (the two
// halves of most^least XOR-ed), spread by HashMap (h ^ h>>>16).
func javaHash(id string) uint32 {
	b, err := hex.DecodeString(strings.ReplaceAll(id, "-", ""))
	if err != nil || len(b) != 16 {
		return 0
	}
	var msb, lsb uint64
	for i := range 8 {
		msb = msb<<8 | uint64(b[i])
		lsb = lsb<<8 | uint64(b[8+i])
	}
	hilo := msb ^ lsb
	h := uint32(hilo>>32) ^ uint32(hilo)
	return h ^ h>>16
}

// javaHashMapOrder returns the indices of ids (keys inserted in that order)
// in the iteration order of a java.util.HashMap holding them: by bucket
// (the table grows from 16 while size > 0.75 capacity), then insertion
// order (resizes keep the relative order within a bucket).
func javaHashMapOrder(ids []string) []int {
	capacity := uint32(16)
	for float64(len(ids)) > 0.75*float64(capacity) {
		capacity *= 2
	}
	idx := make([]int, len(ids))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Compare(javaHash(ids[a])&(capacity-1), javaHash(ids[b])&(capacity-1))
	})
	return idx
}

// ---- scheduling

// schedRun collects what SchedulingManager.runFilters records: the reason
// each host was filtered out (SchedulingResult.addReason) and the detail
// messages of the filters (PerHostMessages).
type schedRun struct {
	reasons []*host // in the order the filters removed them
	filter  map[*host]string
	details map[*host][]string
}

func (r *schedRun) addReason(h *host, filter string) {
	if _, seen := r.filter[h]; !seen {
		r.reasons = append(r.reasons, h)
	}
	r.filter[h] = filter
}

func (r *schedRun) addDetail(h *host, lines ...string) {
	r.details[h] = append(r.details[h], lines...)
}

// runFilter runs one filter and records the hosts it removed.
func (r *schedRun) runFilter(name string, hosts []*host, f func([]*host) []*host) []*host {
	if len(hosts) == 0 {
		return hosts
	}
	kept := f(hosts)
	for _, h := range hosts {
		if !slices.Contains(kept, h) {
			r.addReason(h, name)
		}
	}
	return kept
}

// fault is SchedulingResult.getReasonMessages after SCHEDULING_ALL_HOSTS_FILTERED_OUT.
func (r *schedRun) fault(action string) *apiError {
	lines := []string{action, "VAR__TYPE__VM", "SCHEDULING_ALL_HOSTS_FILTERED_OUT"}
	ids := make([]string, len(r.reasons))
	for i, h := range r.reasons {
		ids[i] = h.id
	}
	for _, i := range javaHashMapOrder(ids) {
		h := r.reasons[i]
		lines = append(lines, "VAR__FILTERTYPE__INTERNAL", "$hostName "+h.name, "$filterName "+r.filter[h])
		if d := r.details[h]; len(d) > 0 {
			lines = append(lines, d...)
			lines = append(lines, "SCHEDULING_HOST_FILTERED_REASON_WITH_DETAIL")
		} else {
			lines = append(lines, "SCHEDULING_HOST_FILTERED_REASON")
		}
	}
	return engineFault(lines...)
}

// groupsOf lists the affinity groups of v's cluster that contain v.
func (inv *inventory) groupsOf(v *vm) []*affinityGroup {
	var out []*affinityGroup
	for _, g := range inv.groups {
		if g.cluster == v.cluster && slices.Contains(g.vms, v) {
			out = append(out, g)
		}
	}
	return out
}

// scheduleVM picks the host v starts on (or migrates to, when skip is its
// current host), or answers the engine's fault. action is the message of
// the operation (VAR__ACTION__RUN, VAR__ACTION__MIGRATE). Call with the
// write lock.
func (inv *inventory) scheduleVM(v *vm, now time.Time, skip *host, action string) (*host, *apiError) {
	var hosts []*host
	for _, h := range inv.hosts {
		if h.cluster == v.cluster && h.status == "up" && h != skip && !v.perf.blacklisted(h) {
			h.prune(now)
			inv.settleHost(h, now)
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return nil, engineFault(action, "VAR__TYPE__VM", "SCHEDULING_NO_HOSTS")
	}
	run := &schedRun{filter: map[*host]string{}, details: map[*host][]string{}}
	groups := inv.groupsOf(v)
	// The mandatory filters run first (SchedulingManager.splitFilters; their own order is a
	// HashSet's): PinToHost and VM leases ready (ha.go).
	hosts = run.runFilter("PinToHost", hosts, func(hs []*host) []*host { return pinToHostFilter(v, hs, run, now) })
	hosts = run.runFilter("VM leases ready", hosts, func(hs []*host) []*host { return leasesReadyFilter(v, hs, run) })
	// HostDevice and MDevice (hostdevices.go) are mandatory too.
	hosts = run.runFilter("HostDevice", hosts, func(hs []*host) []*host { return hostDeviceFilter(v, hs, run, now) })
	hosts = run.runFilter("MDevice", hosts, func(hs []*host) []*host { return inv.mdevFilter(v, hs, run) })
	hosts = run.runFilter("Memory", hosts, func(hs []*host) []*host {
		var kept []*host
		for _, h := range hs {
			if free := h.free(now); v.memoryNeed(h, now) > free {
				run.addDetail(h, fmt.Sprintf("$availableMem %d", max(free, 0)/mib), "VAR__DETAIL__NOT_ENOUGH_MEMORY")
				continue
			}
			kept = append(kept, h)
		}
		return kept
	})
	hosts = run.runFilter("HugePages", hosts, func(hs []*host) []*host { return hugePagesFilter(v, hs, run, now) })
	hosts = run.runFilter("VmAffinityGroups", hosts, func(hs []*host) []*host {
		return inv.vmAffinityFilter(v, groups, hs, run, now)
	})
	hosts = run.runFilter("VmToHostsAffinityGroups", hosts, func(hs []*host) []*host {
		return vmToHostAffinityFilter(groups, hs, run)
	})
	if len(hosts) == 0 {
		return nil, run.fault(action)
	}
	return inv.bestHost(v, groups, hosts, now), nil
}

// vmAffinityFilter is VmAffinityFilterPolicyUnit for one VM: the enforcing
// VM rules of its groups.
func (inv *inventory) vmAffinityFilter(v *vm, groups []*affinityGroup, hosts []*host, run *schedRun, now time.Time) []*host {
	var positive, negative []*vm
	for _, g := range groups {
		if g.vmRule == ruleDisabled || !g.vmEnforcing {
			continue
		}
		for _, o := range g.vms {
			if o == v {
				continue
			}
			if g.vmRule == rulePositive {
				positive = append(positive, o)
			} else {
				negative = append(negative, o)
			}
		}
	}
	if len(positive) == 0 && len(negative) == 0 {
		return hosts
	}
	acceptable := map[*host]bool{}
	for _, o := range positive {
		if h := o.runningOn(now); h != nil {
			acceptable[h] = true
		}
	}
	if len(acceptable) == 0 {
		// No VM of a positive group runs: every host is acceptable.
		for _, h := range hosts {
			acceptable[h] = true
		}
	}
	for _, h := range hosts {
		if !acceptable[h] {
			run.addDetail(h, "$affinityRules ", "VAR__DETAIL__AFFINITY_FAILED_POSITIVE")
		}
	}
	for _, o := range negative {
		if h := o.runningOn(now); h != nil && acceptable[h] {
			delete(acceptable, h)
			run.addDetail(h, "$affinityRules ", "VAR__DETAIL__AFFINITY_FAILED_NEGATIVE")
		}
	}
	var kept []*host
	for _, h := range hosts {
		if acceptable[h] {
			kept = append(kept, h)
		}
	}
	return kept
}

// vmToHostAffinityFilter is VmToHostAffinityFilterPolicyUnit: the enforcing
// host rules of the VM's groups.
func vmToHostAffinityFilter(groups []*affinityGroup, hosts []*host, run *schedRun) []*host {
	bad := map[*host]bool{}
	for _, g := range groups {
		if g.hostRule == ruleDisabled || !g.hostEnforcing {
			continue
		}
		for _, h := range hosts {
			in := slices.Contains(g.hosts, h)
			switch {
			case g.hostRule == rulePositive && !in:
				run.addDetail(h, "$affinityRules ", "VAR__DETAIL__AFFINITY_FAILED_POSITIVE")
				bad[h] = true
			case g.hostRule == ruleNegative && in:
				run.addDetail(h, "$affinityRules ", "VAR__DETAIL__AFFINITY_FAILED_NEGATIVE")
				bad[h] = true
			}
		}
	}
	var kept []*host
	for _, h := range hosts {
		if !bad[h] {
			kept = append(kept, h)
		}
	}
	return kept
}

// hostRank is what bestHost orders the remaining hosts by.
type hostRank struct {
	h          *host
	brokenHost []int64 // priorities of the host rules the host breaks, highest first
	brokenVM   []int64 // priorities of the VM rules the host breaks, highest first
	together   int     // VMs of the VM's positive groups running there
	free       int64
}

// bestHost ranks the hosts that passed the filters: first the host rules
// of the VM's groups (VmToHostAffinityWeightPolicyUnit, factor 20), then its
// VM rules (VmAffinityWeightPolicyUnit: the priorities of the groups a host
// would break, compared lexicographically, then the number of positive-group
// VMs already there), then the free memory (EvenDistributionMemory), then
// the host name. The engine sums the weighted ranks of every weight unit
// instead (RankSelectorPolicyUnit); the order here is the same whenever the
// affinity preferences decide.
func (inv *inventory) bestHost(v *vm, groups []*affinityGroup, hosts []*host, now time.Time) *host {
	ranks := make([]hostRank, len(hosts))
	for i, h := range hosts {
		ranks[i] = hostRank{h: h, free: h.free(now)}
	}
	for _, g := range groups {
		if g.hostRule != ruleDisabled {
			for i := range ranks {
				in := slices.Contains(g.hosts, ranks[i].h)
				if (g.hostRule == rulePositive) != in {
					ranks[i].brokenHost = append(ranks[i].brokenHost, g.priority)
				}
			}
		}
		if g.vmRule == ruleDisabled {
			continue
		}
		on := map[*host]int{}
		for _, o := range g.vms {
			if o == v {
				continue
			}
			if h := o.runningOn(now); h != nil {
				on[h]++
			}
		}
		for i := range ranks {
			n := on[ranks[i].h]
			if g.vmRule == rulePositive {
				ranks[i].together += n
				if n == 0 {
					ranks[i].brokenVM = append(ranks[i].brokenVM, g.priority)
				}
			} else if n > 0 {
				ranks[i].brokenVM = append(ranks[i].brokenVM, g.priority)
			}
		}
	}
	desc := func(a, b int64) int { return cmp.Compare(b, a) }
	for i := range ranks {
		slices.SortFunc(ranks[i].brokenHost, desc)
		slices.SortFunc(ranks[i].brokenVM, desc)
	}
	slices.SortStableFunc(ranks, func(a, b hostRank) int {
		return cmp.Or(slices.Compare(a.brokenHost, b.brokenHost), slices.Compare(a.brokenVM, b.brokenVM),
			cmp.Compare(b.together, a.together), cmp.Compare(b.free, a.free), strings.Compare(a.h.name, b.h.name))
	})
	return ranks[0].h
}
