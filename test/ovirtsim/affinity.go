package ovirtsim

import (
	"cmp"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	ovirtsdk "github.com/ovirt/go-ovirt"
)

// Affinity groups follow the engine's AffinityGroup entity, AffinityGroupMapper
// (REST <-> entity), the Add/Edit/RemoveAffinityGroup and
// Add/RemoveVmToAffinityGroup commands and the BackendAffinityGroup*
// resources of ovirt-engine 4.5.

type ruleKind int

// EntityAffinityRule.
const (
	ruleDisabled ruleKind = iota
	rulePositive
	ruleNegative
)

// priorityPrecision is AffinityGroup.PRIORITY_PRECISION: the engine stores
// the priority as a long, the API's decimal times 1e7.
const priorityPrecision = 1e7

// affinityGroupNameMax and affinityGroupDescriptionMax are the entity's
// @Size limits (BusinessEntitiesDefinitions GENERAL_NAME_SIZE, GENERAL_MAX_SIZE).
const (
	affinityGroupNameMax        = 255
	affinityGroupDescriptionMax = 4000
)

// i18nName is ValidationUtils.NO_SPECIAL_CHARACTERS_I18N (@ValidI18NName).
var i18nName = regexp.MustCompile(`^[\p{L}0-9._-]*$`)

type affinityGroup struct {
	id, name, description string
	cluster               *cluster
	vmRule                ruleKind
	vmEnforcing           bool
	hostRule              ruleKind
	hostEnforcing         bool
	priority              int64 // times priorityPrecision
	vms                   []*vm
	hosts                 []*host
}

// broken is AffinityGroupsQueryBase.checkBrokenGroups: the running VMs of
// the group break its rules now (enforcing or not).
func (g *affinityGroup) broken(now time.Time) bool {
	running := 0
	on := map[*host]bool{}
	for _, v := range g.vms {
		if h := v.runningOn(now); h != nil {
			running++
			on[h] = true
		}
	}
	hostRuleBroken := false
	for h := range on {
		in := slices.Contains(g.hosts, h)
		if (g.hostRule == rulePositive && !in) || (g.hostRule == ruleNegative && in) {
			hostRuleBroken = true
		}
	}
	return (g.vmRule == rulePositive && len(on) > 1) || (g.vmRule == ruleNegative && len(on) < running) || hostRuleBroken
}

func (inv *inventory) groupByID(id string) *affinityGroup {
	for _, g := range inv.groups {
		if g.id == id {
			return g
		}
	}
	return nil
}

func (inv *inventory) groupByName(name string) *affinityGroup {
	for _, g := range inv.groups {
		if g.name == name {
			return g
		}
	}
	return nil
}

// dropFromGroups removes a VM from every group (the removal of a VM cascades
// to affinity_group_members).
func (inv *inventory) dropFromGroups(v *vm) {
	for _, g := range inv.groups {
		g.vms = slices.DeleteFunc(g.vms, func(e *vm) bool { return e == v })
	}
}

// ---- the REST body, mapped like AffinityGroupMapper.map(AffinityGroup, entity)

// groupEntity is the engine entity being added or edited: ids, not objects,
// until validation resolves them.
type groupEntity struct {
	name          *string // nil: not set (@NotNull)
	description   string
	clusterID     string
	vmRule        ruleKind
	vmEnforcing   bool
	hostRule      ruleKind
	hostEnforcing bool
	priority      int64
	vmIDs         []string
	hostIDs       []string
}

func entityOf(g *affinityGroup) *groupEntity {
	name := g.name
	e := &groupEntity{name: &name, description: g.description, clusterID: g.cluster.id, vmRule: g.vmRule,
		vmEnforcing: g.vmEnforcing, hostRule: g.hostRule, hostEnforcing: g.hostEnforcing, priority: g.priority}
	for _, v := range g.vms {
		e.vmIDs = append(e.vmIDs, v.id)
	}
	for _, h := range g.hosts {
		e.hostIDs = append(e.hostIDs, h.id)
	}
	return e
}

// applyRule maps an <*_rule>: enabled=false disables it; otherwise a given
// positive sets the polarity, and enabled=true alone leaves the rule as it
// was (disabled for a new group). enforcing is taken when given.
func applyRule(r *ovirtsdk.AffinityRule, kind *ruleKind, enforcing *bool) {
	if en, ok := r.Enabled(); ok && !en {
		*kind = ruleDisabled
	} else if pos, ok := r.Positive(); ok {
		*kind = ruleNegative
		if pos {
			*kind = rulePositive
		}
	}
	if enf, ok := r.Enforcing(); ok {
		*enforcing = enf
	}
}

// mapGroup applies a REST <affinity_group> onto e.
func mapGroup(m *ovirtsdk.AffinityGroup, e *groupEntity) {
	if n, ok := m.Name(); ok {
		e.name = &n
	}
	if d, ok := m.Description(); ok {
		e.description = d
	}
	if c, ok := m.Cluster(); ok {
		if id, ok := c.Id(); ok {
			e.clusterID = id
		}
	}
	if p, ok := m.Priority(); ok {
		e.priority = int64(math.Round(p * priorityPrecision))
	}
	if r, ok := m.HostsRule(); ok {
		applyRule(r, &e.hostRule, &e.hostEnforcing)
	}
	if r, ok := m.VmsRule(); ok {
		applyRule(r, &e.vmRule, &e.vmEnforcing)
	} else {
		// The deprecated top-level positive and enforcing (API v4 before
		// 4.3), used only without <vms_rule>.
		if pos, ok := m.Positive(); ok {
			e.vmRule = ruleNegative
			if pos {
				e.vmRule = rulePositive
			}
		}
		if enf, ok := m.Enforcing(); ok {
			e.vmEnforcing = enf
		}
	}
	if hs, ok := m.Hosts(); ok {
		e.hostIDs = nil
		for _, h := range hs.Slice() {
			if id, ok := h.Id(); ok {
				e.hostIDs = append(e.hostIDs, id)
			}
		}
	}
	if vs, ok := m.Vms(); ok {
		e.vmIDs = nil
		for _, v := range vs.Slice() {
			if id, ok := v.Id(); ok {
				e.vmIDs = append(e.vmIDs, id)
			}
		}
	}
}

// ---- validation, as the commands do it

// inputViolations is CommandBase.validateInputs on AffinityGroupCRUDParameters
// (@Valid affinityGroup): each violation is its message, the constraint's
// attributes (variables), ACTION_TYPE_FAILED_ATTRIBUTE_PATH and the path.
func inputViolations(e *groupEntity) []string {
	var out []string
	violation := func(msg, path string) {
		out = append(out, msg, "ACTION_TYPE_FAILED_ATTRIBUTE_PATH", "$path affinityGroup."+path)
	}
	if e.name == nil {
		// @NotNull without a message: Hibernate Validator 6's default text.
		violation("must not be null", "name")
	} else {
		if n := utf8.RuneCountInString(*e.name); n < 1 || n > affinityGroupNameMax {
			violation("AFFINITY_GROUP_NAME_TOO_LONG", "name")
		}
		if !i18nName.MatchString(*e.name) {
			violation("AFFINITY_GROUP_NAME_INVALID", "name")
		}
	}
	if utf8.RuneCountInString(e.description) > affinityGroupDescriptionMax {
		violation("AFFINITY_GROUP_DESCRIPTION_INVALID", "description")
	}
	return out
}

// resolveMembers is AffinityGroupCRUDCommand.validateParameters: the
// cluster, then every VM (exists, same cluster, not twice), then every host.
func (inv *inventory) resolveMembers(e *groupEntity) (*cluster, []*vm, []*host, []string) {
	cl := inv.cluster(e.clusterID)
	if cl == nil {
		return nil, nil, nil, []string{"ACTION_TYPE_FAILED_INVALID_CLUSTER_FOR_AFFINITY_GROUP"}
	}
	var vms []*vm
	for _, id := range e.vmIDs {
		v := inv.vms[id]
		switch {
		case v == nil:
			return nil, nil, nil, []string{"ACTION_TYPE_FAILED_INVALID_ENTITY_FOR_AFFINITY_GROUP", "$entity VM"}
		case v.cluster != cl:
			return nil, nil, nil, []string{"ACTION_TYPE_FAILED_ENTITY_NOT_IN_AFFINITY_GROUP_CLUSTER", "$entity VM"}
		case slices.Contains(vms, v):
			return nil, nil, nil, []string{"ACTION_TYPE_FAILED_DUPLICATE_ENTITY_IN_AFFINITY_GROUP", "$entity VM"}
		}
		vms = append(vms, v)
	}
	var hosts []*host
	for _, id := range e.hostIDs {
		h := inv.hostByID(id)
		switch {
		case h == nil:
			return nil, nil, nil, []string{"ACTION_TYPE_FAILED_INVALID_ENTITY_FOR_AFFINITY_GROUP", "$entity VDS"}
		case h.cluster != cl:
			return nil, nil, nil, []string{"ACTION_TYPE_FAILED_ENTITY_NOT_IN_AFFINITY_GROUP_CLUSTER", "$entity VDS"}
		case slices.Contains(hosts, h):
			return nil, nil, nil, []string{"ACTION_TYPE_FAILED_DUPLICATE_ENTITY_IN_AFFINITY_GROUP", "$entity VDS"}
		}
		hosts = append(hosts, h)
	}
	return cl, vms, hosts, nil
}

func groupFault(action string, lines ...string) *apiError {
	return engineFault(append([]string{"VAR__TYPE__AFFINITY_GROUP", action}, lines...)...)
}

// addGroup is AddAffinityGroupCommand: input validation, the name (unique
// in the whole engine: AffinityGroupDao.getByName has no cluster), the
// cluster and the members.
func (inv *inventory) addGroup(e *groupEntity) (*affinityGroup, *apiError) {
	const action = "VAR__ACTION__ADD"
	if v := inputViolations(e); len(v) > 0 {
		return nil, groupFault(action, v...)
	}
	if inv.groupByName(*e.name) != nil {
		return nil, groupFault(action, "ACTION_TYPE_FAILED_AFFINITY_GROUP_NAME_EXISTS")
	}
	cl, vms, hosts, bad := inv.resolveMembers(e)
	if bad != nil {
		return nil, groupFault(action, bad...)
	}
	g := &affinityGroup{id: inv.newID(), cluster: cl}
	g.set(e, vms, hosts)
	inv.groups = append(inv.groups, g)
	return g, nil
}

func (g *affinityGroup) set(e *groupEntity, vms []*vm, hosts []*host) {
	g.name, g.description = *e.name, e.description
	g.vmRule, g.vmEnforcing, g.hostRule, g.hostEnforcing = e.vmRule, e.vmEnforcing, e.hostRule, e.hostEnforcing
	g.priority, g.vms, g.hosts = e.priority, vms, hosts
}

// editGroup is EditAffinityGroupCommand.
func (inv *inventory) editGroup(g *affinityGroup, e *groupEntity) *apiError {
	const action = "VAR__ACTION__UPDATE"
	if v := inputViolations(e); len(v) > 0 {
		return groupFault(action, v...)
	}
	if e.clusterID != g.cluster.id {
		return groupFault(action, "ACTION_TYPE_FAILED_CANNOT_CHANGE_CLUSTER_ID")
	}
	if *e.name != g.name && inv.groupByName(*e.name) != nil {
		return groupFault(action, "ACTION_TYPE_FAILED_AFFINITY_GROUP_NAME_EXISTS")
	}
	_, vms, hosts, bad := inv.resolveMembers(e)
	if bad != nil {
		return groupFault(action, bad...)
	}
	g.set(e, vms, hosts)
	return nil
}

// groupVMAction is the action of the member commands' faults.
const groupVMAction = "VAR__ACTION__UPDATE"

// groupAndVM is the validation the member commands share: the group, then the VM.
func (inv *inventory) groupAndVM(groupID, vmID string) (*affinityGroup, *vm, *apiError) {
	g := inv.groupByID(groupID)
	if g == nil {
		return nil, nil, groupFault(groupVMAction, "ACTION_TYPE_FAILED_INVALID_AFFINITY_GROUP_ID")
	}
	v := inv.vms[vmID]
	if v == nil {
		return nil, nil, groupFault(groupVMAction, "ACTION_TYPE_FAILED_VM_NOT_EXIST")
	}
	return g, v, nil
}

// addGroupVM is AddVmToAffinityGroupCommand. Unlike a group's add or edit
// it does not check the VM's cluster (the command overrides validate()).
func (inv *inventory) addGroupVM(groupID, vmID string) *apiError {
	g, v, aerr := inv.groupAndVM(groupID, vmID)
	if aerr != nil {
		return aerr
	}
	if slices.Contains(g.vms, v) {
		return groupFault(groupVMAction, "ACTION_TYPE_FAILED_DUPLICATE_ENTITY_IN_AFFINITY_GROUP", "$entity VM")
	}
	g.vms = append(g.vms, v)
	return nil
}

// removeGroupVM is RemoveVmFromAffinityGroupCommand.
func (inv *inventory) removeGroupVM(groupID, vmID string) *apiError {
	g, v, aerr := inv.groupAndVM(groupID, vmID)
	if aerr != nil {
		return aerr
	}
	if !slices.Contains(g.vms, v) {
		return groupFault(groupVMAction, "ACTION_TYPE_FAILED_INVALID_ENTITY_FOR_AFFINITY_GROUP", "$entity VM")
	}
	g.vms = slices.DeleteFunc(g.vms, func(e *vm) bool { return e == v })
	return nil
}

// ---- rendering, as AffinityGroupMapper.map(entity, model)

func affinityRule(kind ruleKind, enforcing bool) *ovirtsdk.AffinityRule {
	r := &ovirtsdk.AffinityRule{}
	r.SetEnabled(kind != ruleDisabled)
	r.SetEnforcing(enforcing)
	r.SetPositive(kind == rulePositive)
	return r
}

// formatPriority writes the priority as the engine's BigDecimal does ("1", "0.5").
func formatPriority(p int64) string {
	return strconv.FormatFloat(float64(p)/priorityPrecision, 'f', -1, 64)
}

// groupExtra is what go-ovirt cannot write: broken (not in its model) and the
// priority in the engine's plain decimal form (its writer writes "1.000e+00").
func groupExtra(g *affinityGroup, now time.Time) string {
	return "<broken>" + strconv.FormatBool(g.broken(now)) + "</broken><priority>" + formatPriority(g.priority) + "</priority>"
}

// renderGroup renders a group; follow "vms" and "hosts" embed the members
// as the sub-collections list them (id and name), else they are references.
func renderGroup(g *affinityGroup, rc *renderCtx) *ovirtsdk.AffinityGroup {
	o := &ovirtsdk.AffinityGroup{}
	o.SetId(g.id)
	o.SetName(esc(g.name))
	if g.description != "" {
		o.SetDescription(esc(g.description))
	}
	o.SetCluster(clusterRef(g.cluster.id))
	// Kept for version 4 of the API: positive only while the VM rule is enabled.
	if g.vmRule != ruleDisabled {
		o.SetPositive(g.vmRule == rulePositive)
	}
	o.SetEnforcing(g.vmEnforcing)
	o.SetHostsRule(affinityRule(g.hostRule, g.hostEnforcing))
	o.SetVmsRule(affinityRule(g.vmRule, g.vmEnforcing))
	hosts := make([]*ovirtsdk.Host, 0, len(g.hosts))
	for _, h := range g.hosts {
		r := hostRef(h.id)
		if rc.follows("hosts") {
			r.SetName(esc(h.name))
		}
		hosts = append(hosts, r)
	}
	hs := &ovirtsdk.HostSlice{}
	hs.SetSlice(hosts)
	o.SetHosts(hs)
	o.SetVms(groupVMs(g, rc.follows("vms")))
	o.SetVmLabels(&ovirtsdk.AffinityLabelSlice{})
	o.SetHostLabels(&ovirtsdk.AffinityLabelSlice{})
	return o
}

// groupVMs lists the VMs of a group: with names as BackendAffinityGroupVmsResource
// lists them, or as the mapper's references.
func groupVMs(g *affinityGroup, names bool) *ovirtsdk.VmSlice {
	vms := make([]*ovirtsdk.Vm, 0, len(g.vms))
	for _, v := range g.vms {
		r := vmRef(v.id)
		if names {
			r.SetName(esc(v.name))
		}
		vms = append(vms, r)
	}
	vs := &ovirtsdk.VmSlice{}
	vs.SetSlice(vms)
	return vs
}

// ---- handlers

// groupOwner makes hrefs under the group's own cluster: LinkHelper takes the
// parent from the entity's cluster, whatever cluster id the path had.
func groupOwner(g *affinityGroup) linkOwner {
	return linkOwner{apiPrefix + "/clusters/" + g.cluster.id, "cluster"}
}

// hGroups lists a cluster's groups (GetAffinityGroupsByClusterId: an unknown
// cluster has none, the engine answers an empty list).
func hGroups(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/clusters/" + rq.ids[0], "cluster"}
	s.mu.RLock()
	rc, aerr := s.renderCtx(rq)
	var out []*ovirtsdk.AffinityGroup
	extras := map[string]string{}
	if aerr == nil {
		for _, g := range s.inv.groups {
			if g.cluster.id == rq.ids[0] {
				out = append(out, renderGroup(g, rc))
				extras[g.id] = groupExtra(g, rc.now)
			}
		}
	}
	s.mu.RUnlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.extraFor = func(kind, id string) string {
		if kind == "affinity_group" {
			return extras[id]
		}
		return ""
	}
	sl := &ovirtsdk.AffinityGroupSlice{}
	sl.SetSlice(out)
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLAffinityGroupWriteMany(w, sl, "", "") })
}

// groupAnswer renders g under the lock and returns what writes it after.
func groupAnswer(rq *apiReq, g *affinityGroup, rc *renderCtx, status int) func() {
	o, extra, owner := renderGroup(g, rc), groupExtra(g, rc.now), groupOwner(g)
	return func() {
		rq.owner = owner
		rq.extraFor = func(kind, id string) string {
			if kind == "affinity_group" && id == o.MustId() {
				return extra
			}
			return ""
		}
		if status == http.StatusCreated {
			rq.w.Header().Set("Location", owner.href+"/affinitygroups/"+o.MustId())
		}
		writeOne(rq, status, o, ovirtsdk.XMLAffinityGroupWriteOne)
	}
}

// hGroup is GET of one group: GetAffinityGroupById, by the group id alone.
func hGroup(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	rc, aerr := s.renderCtx(rq)
	g := s.inv.groupByID(rq.ids[1])
	var write func()
	if g != nil && aerr == nil {
		write = groupAnswer(rq, g, rc, 200)
	}
	s.mu.RUnlock()
	switch {
	case aerr != nil:
		rq.fault(aerr)
	case write == nil:
		rq.fault(&apiError{404, "", ""})
	default:
		write()
	}
}

func hAddGroup(s *Simulator, rq *apiReq) {
	body, aerr := parseBody(rq, "affinity_group", ovirtsdk.XMLAffinityGroupReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	// A new entity, then the body, then the cluster of the path
	// (BackendAffinityGroupsResource.add overrides any cluster given).
	e := &groupEntity{priority: int64(priorityPrecision)}
	mapGroup(body, e)
	e.clusterID = rq.ids[0]
	s.mu.Lock()
	rc, aerr := s.renderCtx(rq)
	var g *affinityGroup
	if aerr == nil {
		aerr = s.authorizeGroups(rq, s.inv.cluster(e.clusterID))
	}
	if aerr == nil {
		if g, aerr = s.inv.addGroup(e); aerr == nil {
			s.inv.addJob(rq.corr, "Adding Affinity Group "+g.name, rc.now, rc.now)
		}
	}
	var write func()
	if aerr == nil {
		write = groupAnswer(rq, g, rc, http.StatusCreated)
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	write()
}

// hUpdateGroup is BackendAffinityGroupResource.update: the group (by id, a
// bare 404 when missing), the body mapped onto it, EditAffinityGroup.
func hUpdateGroup(s *Simulator, rq *apiReq) {
	body, aerr := parseBody(rq, "affinity_group", ovirtsdk.XMLAffinityGroupReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.Lock()
	rc, aerr := s.renderCtx(rq)
	g := s.inv.groupByID(rq.ids[1])
	if aerr == nil && g == nil {
		aerr = &apiError{404, "", ""}
	}
	if aerr == nil {
		aerr = s.authorizeGroups(rq, g.cluster)
	}
	var write func()
	if aerr == nil {
		e := entityOf(g)
		mapGroup(body, e)
		if aerr = s.inv.editGroup(g, e); aerr == nil {
			s.inv.addJob(rq.corr, "Editing Affinity Group "+g.name, rc.now, rc.now)
			write = groupAnswer(rq, g, rc, 200)
		}
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	write()
}

// hRemoveGroup removes a group; its VMs stay as they are.
func hRemoveGroup(s *Simulator, rq *apiReq) {
	s.mu.Lock()
	now := time.Now()
	g := s.inv.groupByID(rq.ids[1])
	var aerr *apiError
	if g == nil {
		aerr = &apiError{404, "", ""} // BackendAffinityGroupResource.remove calls get() first
	} else if aerr = s.authorizeGroups(rq, g.cluster); aerr == nil {
		s.inv.groups = slices.DeleteFunc(s.inv.groups, func(e *affinityGroup) bool { return e == g })
		s.inv.addJob(rq.corr, "Removing Affinity Group "+g.name, now, now)
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.removed()
}

// hGroupVMs lists the VMs of a group, with their names.
func hGroupVMs(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	g := s.inv.groupByID(rq.ids[1])
	var sl *ovirtsdk.VmSlice
	if g != nil {
		sl = groupVMs(g, true)
	}
	s.mu.RUnlock()
	if sl == nil {
		rq.fault(&apiError{404, "", ""})
		return
	}
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLVmWriteMany(w, sl, "", "") })
}

// hAddGroupVM is BackendAffinityGroupVmsResource.add: AddVmToAffinityGroup
// with the VM's id, then 200 with the VM as it was sent.
func hAddGroupVM(s *Simulator, rq *apiReq) {
	body, aerr := parseBody(rq, "vm", ovirtsdk.XMLVmReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	id, ok := body.Id()
	if !ok {
		// asGuid(vm.getId()) with no id: new Guid(null) throws a NullPointerException (approx. answer).
		rq.fault(&apiError{500, reasonFailed, "candidate can not be null please use static method createGuidFromString"})
		return
	}
	s.mu.Lock()
	now := time.Now()
	if g := s.inv.groupByID(rq.ids[1]); g != nil {
		aerr = s.authorizeGroups(rq, g.cluster)
	}
	if aerr == nil {
		aerr = s.inv.addGroupVM(rq.ids[1], id)
	}
	if aerr == nil {
		s.inv.addJob(rq.corr, "Adding VM to Affinity Group", now, now)
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	echo := vmRef(id) // the writer escapes attributes itself
	if n, ok := body.Name(); ok {
		echo.SetName(esc(n))
	}
	rq.plain = true // the posted entity goes back as it came, without hrefs
	writeOne(rq, 200, echo, ovirtsdk.XMLVmWriteOne)
}

// hRemoveGroupVM is RemoveVmFromAffinityGroup.
func hRemoveGroupVM(s *Simulator, rq *apiReq) {
	s.mu.Lock()
	now := time.Now()
	var aerr *apiError
	if g := s.inv.groupByID(rq.ids[1]); g != nil {
		aerr = s.authorizeGroups(rq, g.cluster)
	}
	if aerr == nil {
		aerr = s.inv.removeGroupVM(rq.ids[1], rq.ids[2])
	}
	if aerr == nil {
		s.inv.addJob(rq.corr, "Removing VM from Affinity Group", now, now)
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.removed()
}

// ---- introspection

// AffinityGroupState is a snapshot of one affinity group.
type AffinityGroupState struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Cluster string `json:"cluster"`
	// VMRule and HostRule are "disabled", "positive" or "negative".
	VMRule        string   `json:"vm_rule"`
	VMEnforcing   bool     `json:"vm_enforcing"`
	HostRule      string   `json:"host_rule"`
	HostEnforcing bool     `json:"host_enforcing"`
	Priority      float64  `json:"priority"`
	Broken        bool     `json:"broken"`
	VMs           []string `json:"vms"`   // VM names, in membership order
	Hosts         []string `json:"hosts"` // host names
}

func (k ruleKind) String() string {
	switch k {
	case rulePositive:
		return "positive"
	case ruleNegative:
		return "negative"
	}
	return "disabled"
}

func groupState(g *affinityGroup, now time.Time) AffinityGroupState {
	st := AffinityGroupState{ID: g.id, Name: g.name, Cluster: g.cluster.name, VMRule: g.vmRule.String(),
		VMEnforcing: g.vmEnforcing, HostRule: g.hostRule.String(), HostEnforcing: g.hostEnforcing,
		Priority: float64(g.priority) / priorityPrecision, Broken: g.broken(now), VMs: []string{}, Hosts: []string{}}
	for _, v := range g.vms {
		st.VMs = append(st.VMs, v.name)
	}
	for _, h := range g.hosts {
		st.Hosts = append(st.Hosts, h.name)
	}
	return st
}

// AffinityGroups returns the affinity groups of a cluster ("" for every
// cluster), by cluster then creation order.
func (s *Simulator) AffinityGroups(clusterName string) []AffinityGroupState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.groupStates(clusterName, time.Now())
}

func (s *Simulator) groupStates(clusterName string, now time.Time) []AffinityGroupState {
	out := []AffinityGroupState{}
	for _, g := range s.inv.groups {
		if clusterName == "" || g.cluster.name == clusterName {
			out = append(out, groupState(g, now))
		}
	}
	slices.SortStableFunc(out, func(a, b AffinityGroupState) int { return cmp.Compare(a.Cluster, b.Cluster) })
	return out
}
