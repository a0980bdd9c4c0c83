package ovirtsim

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	ovirtsdk "github.com/ovirt/go-ovirt"
)

// A VM's tags (/vms/{id}/tags, the API's AssignedTagsService), as ovirt-engine 4.4/4.5 serve them
// (read at ovirt-engine-4.5.7): AbstractBackendAssignedTagsResource, BackendVmTagsResource and
// BackendVmTagResource; AttachVmsToTagCommand and DetachVmFromTagCommand (TagsCommandBase:
// TAG_MANAGEMENT on the system, no validate(), not monitored: no job); TagDaoImpl and tags_sp.sql
// (tags_vm_map, tags_vm_map_view, GetTagsByVmId).
//
// The assignments are rows of tags_vm_map: v.tags. They are read from the database, not from
// TagsDirector: a VM's tags are the rows of tags_vm_map_view, which has no description column
// (TagDaoImpl's row mapper falls back to ""), in no stable order (SELECT DISTINCT). Nothing checks
// that the VM or the tag exists before the insert: tags_vm_map's foreign keys do, and the
// Engine's answer to the broken insert is 400 "[Internal Engine Error]" (EngineError.ENGINE, no
// error type). A tag removed (Deletetags) or a VM removed (tags_vm_map_vm ON DELETE CASCADE)
// takes its rows along.

// internalEngineError is an execution failure the Engine reports as EngineError.ENGINE
// (VdsmErrors.properties: "Internal Engine Error"), which has no error type: 400.
func internalEngineError() *apiError {
	return &apiError{400, reasonFailed, "[Internal Engine Error]"}
}

// parseGUID reads an id as the Engine's Guid does (java.util.UUID.fromString): five dash-separated
// hex fields, each masked to its width, so "1-2-3-4-5" is 00000001-0002-0003-0004-000000000005;
// "" is Guid.Empty. ok is false when Java would throw (the text of its exception is approximated).
func parseGUID(s string) (string, bool) {
	if s == "" {
		return rootTagID, true // new Guid(""): Guid.Empty
	}
	parts := strings.Split(s, "-")
	if len(s) > 36 || len(parts) != 5 {
		return "", false
	}
	var v [5]uint64
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 16, 64)
		if err != nil || p == "" || strings.HasPrefix(p, "+") {
			return "", false
		}
		v[i] = uint64(n)
	}
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", v[0]&0xffffffff, v[1]&0xffff, v[2]&0xffff, v[3]&0xffff,
		v[4]&0xffffffffffff), true
}

// malformedID is MalformedIdExceptionMapper's answer to an id in a body that is not a UUID.
func malformedID(id string) *apiError {
	return &apiError{400, "Operation failed", "Invalid UUID string: " + id}
}

// vmTagNames returns the names of the VM's tags, sorted.
func vmTagNames(v *vm) []string {
	out := []string{}
	for _, t := range v.tags {
		out = append(out, t.name)
	}
	slices.Sort(out)
	return out
}

// dropVMTags is tags_vm_map_vm's ON DELETE CASCADE: a removed VM's rows go.
func (inv *inventory) dropVMTags(v *vm) { v.tags = nil }

// detachTags is Deletetags for the removed tags: their rows of tags_vm_map go.
func (inv *inventory) detachTags(gone []*tag) {
	for _, v := range inv.vms {
		if len(v.tags) > 0 {
			v.tags = slices.DeleteFunc(v.tags, func(t *tag) bool { return slices.Contains(gone, t) })
		}
	}
}

// renderAssignedTag is TagMapper.map of a tags_vm_map_view row: name, an empty description (the
// view has none), the parent id, and the VM (addParents).
func renderAssignedTag(t *tag, vmID string) *ovirtsdk.Tag {
	o := &ovirtsdk.Tag{}
	o.SetId(t.id)
	o.SetName(esc(t.name))
	o.SetDescription("")
	if t.parent != "" {
		p := &ovirtsdk.Tag{}
		p.SetId(t.parent)
		o.SetParent(p)
	}
	o.SetVm(vmRef(vmID))
	return o
}

// renderVMTags lists a VM's tags as GET /vms/{id}/tags does, also for follow=tags (LinkFollower
// fetches that sub-collection): shuffled per request, deterministic per seed.
func renderVMTags(v *vm, rc *renderCtx) *ovirtsdk.TagSlice {
	out := make([]*ovirtsdk.Tag, 0, len(v.tags))
	for _, t := range v.tags {
		out = append(out, renderAssignedTag(t, v.id))
	}
	rc.shuffler().Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	sl := &ovirtsdk.TagSlice{}
	sl.SetSlice(out)
	return sl
}

// vmOfPath resolves the VM id of a /vms/{id}/tags path as BackendVmResource does
// (AbstractBackendSubResource: a malformed id is a bare 404); the VM may not exist (nil).
func (s *Simulator) vmOfPath(rq *apiReq) (id string, v *vm, aerr *apiError) {
	id, ok := parseGUID(rq.ids[0])
	if !ok || rq.ids[0] == "" {
		return "", nil, &apiError{404, "", ""}
	}
	return id, s.inv.vms[id], nil
}

// assignedTag is BackendVmTagResource.get: the VM's tag of the path (bare 404s).
func (s *Simulator) assignedTag(rq *apiReq) (*vm, *tag, *apiError) {
	_, v, aerr := s.vmOfPath(rq)
	if aerr != nil {
		return nil, nil, aerr
	}
	tid, ok := parseGUID(rq.ids[1])
	if !ok || rq.ids[1] == "" || v == nil {
		return nil, nil, &apiError{404, "", ""}
	}
	for _, t := range v.tags {
		if t.id == tid {
			return v, t, nil
		}
	}
	return nil, nil, &apiError{404, "", ""}
}

// hVMTags is BackendVmTagsResource.list (GetTagsByVmId): an unknown VM has no tags (200).
func hVMTags(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	mx, aerr := rq.maxParam()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.RLock()
	rc, aerr := s.renderCtx(rq)
	var sl *ovirtsdk.TagSlice
	if aerr == nil {
		var v *vm
		if _, v, aerr = s.vmOfPath(rq); aerr == nil {
			if v == nil {
				v = &vm{}
			}
			sl = renderVMTags(v, rc)
			sl.SetSlice(limit(sl.Slice(), mx))
		}
	}
	s.mu.RUnlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLTagWriteMany(w, sl, "", "") })
}

// hVMTag is BackendVmTagResource.get.
func hVMTag(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	s.mu.RLock()
	var o *ovirtsdk.Tag
	v, t, aerr := s.assignedTag(rq)
	if aerr == nil {
		o = renderAssignedTag(t, v.id)
	}
	s.mu.RUnlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLTagWriteOne)
}

// hAddVMTag is AbstractBackendAssignedTagsResource.add: <tag id="..."/> or <tag><name>; a name
// is looked up among TagsDirector's tags (GetAllTags: not the root), 404 "Entity not found:
// <name>" when none has it. Then AttachVmsToTag, which inserts the row unless the VM has the tag
// already (no error either way), and the answer 201 is the tag as TagsDirector holds it
// (TagIdResolver: GetTagByTagId), with its description: a bare 404 for a tag TagsDirector does
// not hold (the row is made all the same).
func hAddVMTag(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	body, aerr := parseBody(rq, "tag", ovirtsdk.XMLTagReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rawID, hasID := body.Id()
	name, hasName := body.Name()
	if !hasID && !hasName {
		rq.fault(incomplete("Tag", []string{"id|name"}, "add"))
		return
	}
	s.mu.Lock()
	var o *ovirtsdk.Tag
	var tid string
	vmID, v, aerr := s.vmOfPath(rq)
	if aerr == nil {
		tid, aerr = s.inv.tagToAssign(rawID, hasID, name)
	}
	if aerr == nil {
		aerr = s.authorize(rq, tagNeed())
	}
	if aerr == nil {
		aerr = s.inv.assignTag(v, tid)
	}
	if aerr == nil {
		if t := s.inv.tagByID(tid); t != nil {
			o = renderTag(t)
			o.SetVm(vmRef(vmID))
		} else {
			aerr = &apiError{404, "", ""}
		}
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.w.Header().Set("Location", apiPrefix+"/vms/"+vmID+"/tags/"+tid)
	writeOne(rq, http.StatusCreated, o, ovirtsdk.XMLTagWriteOne)
}

// tagToAssign resolves the <tag> of a POST /vms/{id}/tags to a tag id: the id as given (a
// malformed one is MalformedIdExceptionMapper's 400), or the id of the TagsDirector tag of that
// name.
func (inv *inventory) tagToAssign(rawID string, hasID bool, name string) (string, *apiError) {
	if hasID {
		id, ok := parseGUID(rawID)
		if !ok {
			return "", malformedID(rawID)
		}
		return id, nil
	}
	for _, t := range inv.tags {
		if t.listed && t.name == name {
			return t.id, nil
		}
	}
	return "", notFound(name)
}

// assignTag is AttachVmsToTagCommand.executeCommand: the row unless it exists; a VM or a tag
// without a database row (the root tag is none) breaks a foreign key.
func (inv *inventory) assignTag(v *vm, tagID string) *apiError {
	var t *tag
	for _, e := range inv.tags {
		if e.id == tagID {
			t = e
		}
	}
	if v == nil || t == nil {
		return internalEngineError()
	}
	if !slices.Contains(v.tags, t) {
		v.tags = append(v.tags, t)
	}
	return nil
}

// hRemoveVMTag is BackendVmTagResource.remove: get() (bare 404s), then DetachVmFromTag.
func hRemoveVMTag(s *Simulator, rq *apiReq) {
	s.mu.Lock()
	v, t, aerr := s.assignedTag(rq)
	if aerr == nil {
		aerr = s.authorize(rq, tagNeed())
	}
	if aerr == nil {
		v.tags = slices.DeleteFunc(v.tags, func(e *tag) bool { return e == t })
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.removed()
}

// ---- search: tag=NAME on /vms

// vmMatcher is the VM search's match, with tag clauses: `tag=x` is turned by
// BaseConditionFieldAutoCompleter.formatValue (the relation is ILIKE or LIKE, a string field)
// into `tag_name IN (...)` of the names TagsDirector.getTagNamesAndChildrenNamesByRegExp finds:
// walking down from the root, a tag whose name matches the regular expression ^x$ (with * as .*,
// case-sensitive whatever case_sensitive says) counts with all its descendants, and the search of
// the others goes on in their children. A VM matches when one of its tags has one of those names.
// `tag!=x` is refused (400): the Engine's NOT ILIKE over the VM-tag join is not simulated.
func (inv *inventory) vmMatcher(sq *searchQuery, cs bool, now time.Time) (func(v *vm) bool, *apiError) {
	var values []string
	if sq != nil {
		for _, g := range sq.groups {
			for _, c := range g {
				if c.field != "tag" {
					continue
				}
				if c.neg {
					return nil, &apiError{400, reasonFailed, "[Cannot search Vms. tag!= is not supported by the simulator.]"}
				}
				values = append(values, c.value)
			}
		}
	}
	if len(values) == 0 {
		return func(v *vm) bool {
			return sq.match(func(f string) string { return vmField(v, f, now) }, cs)
		}, nil
	}
	names := map[string]map[string]bool{}
	for _, val := range values {
		names[val] = inv.tagNamesByRegExp(val)
	}
	return func(v *vm) bool {
		return sq.matchWith(func(f string) string { return vmField(v, f, now) }, func(c clause) (bool, bool) {
			if c.field != "tag" {
				return false, false
			}
			for _, t := range v.tags {
				if names[c.value][t.name] {
					return true, true
				}
			}
			return false, true
		}, cs)
	}, nil
}

// tagNamesByRegExp is TagsDirector.getTagNamesAndChildrenNamesByRegExp (Go's regexp stands for
// Java's; a value that is not a valid expression matches nothing).
func (inv *inventory) tagNamesByRegExp(value string) map[string]bool {
	out := map[string]bool{}
	re, err := regexp.Compile("^" + strings.ReplaceAll(value, "*", ".*") + "$")
	if err != nil {
		return out
	}
	seen := map[string]bool{}
	var walk func(parent string)
	walk = func(parent string) {
		for _, c := range inv.tags {
			if !c.listed || c.parent != parent || seen[c.id] {
				continue
			}
			seen[c.id] = true
			if re.MatchString(c.name) {
				for _, d := range inv.subtree(c) {
					out[d.name] = true
				}
			} else {
				walk(c.id)
			}
		}
	}
	walk(rootTagID)
	return out
}

// ---- out of band

// UntagVM removes a tag from a VM the way an administrator does in the UI, whatever the
// permissions; tagRef is the tag's id or name. The API's DELETE /vms/{id}/tags/{tag} does the same
// for a client with TAG_MANAGEMENT.
func (s *Simulator) UntagVM(vmID, tagRef string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.lookupVM(vmID)
	if err != nil {
		return err
	}
	n := len(v.tags)
	v.tags = slices.DeleteFunc(v.tags, func(t *tag) bool { return t.id == tagRef || t.name == tagRef })
	if len(v.tags) == n {
		return fmt.Errorf("tag %q of VM %s: %w", tagRef, vmID, ErrNotFound)
	}
	return nil
}
