package ovirtsim

import (
	"net/http"
	"slices"
	"unicode/utf16"

	ovirtsdk "github.com/ovirt/go-ovirt"
)

// Tags (/tags) follow ovirt-engine 4.4/4.5 (unchanged from 4.4.0 to 4.5.7): the Tags entity,
// TagMapper, BackendTagsResource and BackendTagResource, the Add/Update/Move/RemoveTag commands,
// TagDaoImpl and tags_sp.sql, and TagsDirector, the in-memory tree every tag query reads.
//
// Two stores answer, as in the Engine, and they do not always agree:
//   - the database (TagDao): every tag added, not the root. The commands' checks read it: a name
//     is "in use" when another database row has it, the root tag is not a row (so "root" can be
//     added as a name, and editing the root dereferences a missing row);
//   - TagsDirector: the root (built in memory at start) and the tags hung under it. GET /tags,
//     GET /tags/{id} and every lookup by name read it. A tag added under a parent it does not
//     know is saved but never shown (until an Engine restart, not modelled).
//
// TagsDirector's by-name map is reproduced with its quirks: adding, editing or moving a tag puts
// the name of the tag and of each of its ancestors (addTagToHash walks up to the root), and a
// removal deletes the removed tags' names whatever tag they point to.

// rootTagID is TagsDirector.ROOT_TAG_ID (Guid.Empty).
const rootTagID = "00000000-0000-0000-0000-000000000000"

// Tags.java: @Size(min = 1, max = BusinessEntitiesDefinitions.TAG_NAME_SIZE) and
// @Pattern(ValidationUtils.NO_SPECIAL_CHARACTERS_I18N) on the name (i18nName, shared with
// affinity groups), @Size(max = GENERAL_MAX_SIZE) on the description.
const (
	tagNameMax        = 50
	tagDescriptionMax = 4000
)

type tag struct {
	id, name string
	// description is nil when it was never given: TagMapper then leaves <description> out.
	description *string
	// parent is the parent's id, "" for the root only (the mapper gives every other tag one,
	// Guid.Empty by default). It may name no tag: PUT takes any id.
	parent string
	// listed is false for a tag TagsDirector does not hold (added under an unknown parent).
	listed bool
}

func (t *tag) desc() string {
	if t.description == nil {
		return ""
	}
	return *t.description
}

func newRootTag() *tag {
	d := "root"
	return &tag{id: rootTagID, name: "root", description: &d, listed: true}
}

// ---- the two stores

// tagByID is TagsDirector.getTagById: the root and the listed tags.
func (inv *inventory) tagByID(id string) *tag {
	if id == rootTagID {
		return inv.rootTag
	}
	for _, t := range inv.tags {
		if t.id == id && t.listed {
			return t
		}
	}
	return nil
}

// dbTagByName is TagDao.getByName (GettagsBytag_name: an exact, case-sensitive match on the
// database rows, which the root is not).
func (inv *inventory) dbTagByName(name string) *tag {
	for _, t := range inv.tags {
		if t.name == name {
			return t
		}
	}
	return nil
}

// hashTag is TagsDirector.addTagToHash: the tag's name, then its ancestors' up to the root.
func (inv *inventory) hashTag(t *tag) {
	for seen := 0; t != nil && seen <= len(inv.tags); seen++ {
		inv.tagNames[t.name] = t
		if t.parent == "" {
			return
		}
		t = inv.tagByID(t.parent)
	}
}

// subtree returns t and its listed descendants (TagsDirector's children lists).
func (inv *inventory) subtree(t *tag) []*tag {
	out := []*tag{t}
	for i := 0; i < len(out); i++ {
		for _, c := range inv.tags {
			if c.listed && c.parent == out[i].id && !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// ---- validation, as the commands do it

// javaLen is the length Java's String.length gives (UTF-16 units), which @Size checks.
func javaLen(s string) int {
	n := 0
	for _, r := range s {
		n += max(utf16.RuneLen(r), 1)
	}
	return n
}

// tagInputViolations is CommandBase.validateInputs on TagsOperationParameters (@Valid _tag).
// The default @Size message is Hibernate Validator 6's text; the order of several violations
// (a HashSet in the Engine) is the simulator's.
func tagInputViolations(name, description string) []string {
	var out []string
	violation := func(msg, path string) {
		out = append(out, msg, "ACTION_TYPE_FAILED_ATTRIBUTE_PATH", "$path _tag."+path)
	}
	if n := javaLen(name); n < 1 || n > tagNameMax {
		violation("size must be between 1 and 50", "name")
	}
	if !i18nName.MatchString(name) {
		violation("VALIDATION_TAGS_INVALID_TAG_NAME", "name")
	}
	if javaLen(description) > tagDescriptionMax {
		violation("size must be between 0 and 4000", "description")
	}
	return out
}

// tagEntity is a Tags entity mapped from a REST <tag> (TagMapper.map(Tag, Tags)).
type tagEntity struct {
	name        string
	description *string
	parent      string
}

// addTag is AddTagCommand and TagsDirector.addTag; the tag is listed when its parent is.
func (inv *inventory) addTag(e *tagEntity) (*tag, *apiError) {
	if v := tagInputViolations(e.name, e.desc()); len(v) > 0 {
		return nil, engineFault(v...)
	}
	if inv.dbTagByName(e.name) != nil {
		return nil, engineFault("TAGS_SPECIFY_TAG_IS_IN_USE")
	}
	t := &tag{id: inv.newID(), name: e.name, description: e.description, parent: e.parent}
	inv.tags = append(inv.tags, t)
	if inv.tagByID(t.parent) != nil {
		t.listed = true
		inv.hashTag(t)
	}
	return t, nil
}

func (e *tagEntity) desc() string {
	if e.description == nil {
		return ""
	}
	return *e.description
}

// moveTag is MoveTagCommand and TagsDirector.moveTag: refused when the new parent is the tag or
// one of its descendants; a parent TagsDirector does not hold moves nothing.
func (inv *inventory) moveTag(t *tag, parentID string) *apiError {
	for _, d := range inv.subtree(t) {
		if d.id == parentID {
			return engineFault("TAGS_SPECIFIED_TAG_CANNOT_BE_THE_PARENT_OF_ITSELF")
		}
	}
	if p := inv.tagByID(parentID); p != nil {
		t.parent = parentID
		inv.hashTag(p)
		inv.hashTag(t)
	}
	return nil
}

// updateTag is UpdateTagCommand and TagsDirector.updateTag.
func (inv *inventory) updateTag(t *tag, e *tagEntity) *apiError {
	if v := tagInputViolations(e.name, e.desc()); len(v) > 0 {
		return engineFault(v...)
	}
	if o := inv.dbTagByName(e.name); o != nil && o != t {
		return engineFault("TAGS_SPECIFY_TAG_IS_IN_USE")
	}
	if t == inv.rootTag {
		// validate() reads the tag's database row for its readonly flag: the root has none, the
		// NullPointerException is CAN_DO_ACTION_GENERAL_FAILURE (INTERNAL_ERROR, 500), not
		// TAGS_CANNOT_EDIT_READONLY_TAG.
		return engineFault("CAN_DO_ACTION_GENERAL_FAILURE")
	}
	if e.name != t.name {
		delete(inv.tagNames, t.name)
	}
	t.name, t.description, t.parent = e.name, e.description, e.parent
	inv.hashTag(t)
	return nil
}

// removeTag is RemoveTagCommand and TagsDirector.removeTag: the tag and its descendants go.
func (inv *inventory) removeTag(t *tag) *apiError {
	if t == inv.rootTag {
		return engineFault("TAGS_CANNOT_REMOVE_TAG_NOT_EXIST") // validate() reads the database
	}
	gone := inv.subtree(t)
	for _, d := range gone {
		delete(inv.tagNames, d.name)
	}
	inv.detachTags(gone) // Deletetags deletes their tags_vm_map rows (vmtags.go)
	inv.tags = slices.DeleteFunc(inv.tags, func(o *tag) bool { return slices.Contains(gone, o) })
	if p := inv.tagByID(t.parent); p != nil {
		inv.hashTag(p)
	}
	return nil
}

// ---- rendering, as TagMapper.map(Tags, Tag)

func renderTag(t *tag) *ovirtsdk.Tag {
	o := &ovirtsdk.Tag{}
	o.SetId(t.id)
	o.SetName(esc(t.name))
	if t.description != nil {
		o.SetDescription(esc(*t.description))
	}
	if t.parent != "" {
		p := &ovirtsdk.Tag{}
		p.SetId(t.parent)
		o.SetParent(p)
	}
	return o
}

// ---- handlers

// hTags is BackendTagsResource.list: TagsDirector's tags in its hash map's order (none the
// client can rely on: shuffled per request, deterministic per seed), then the root. No search,
// no max.
func hTags(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	rc, aerr := s.renderCtx(rq)
	var out []*ovirtsdk.Tag
	if aerr == nil {
		for _, t := range s.inv.tags {
			if t.listed {
				out = append(out, renderTag(t))
			}
		}
		rc.shuffler().Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		out = append(out, renderTag(s.inv.rootTag))
	}
	s.mu.RUnlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	sl := &ovirtsdk.TagSlice{}
	sl.SetSlice(out)
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLTagWriteMany(w, sl, "", "") })
}

// hTag is BackendTagResource.get: a bare 404 when TagsDirector does not hold the id.
func hTag(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	var o *ovirtsdk.Tag
	if t := s.inv.tagByID(rq.ids[0]); t != nil {
		o = renderTag(t)
	}
	s.mu.RUnlock()
	if o == nil {
		rq.fault(&apiError{404, "", ""})
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLTagWriteOne)
}

// parentOf resolves a <parent><name> through TagsDirector, as BackendTagsResource.getParentId
// does (a 404 fault "Entity not found: <name>" when there is none); a <parent id> is taken as
// is. ok is false when the body names no parent.
func (inv *inventory) parentOf(body *ovirtsdk.Tag) (id string, ok bool, aerr *apiError) {
	p, set := body.Parent()
	if !set {
		return "", false, nil
	}
	if name, has := p.Name(); has {
		t := inv.tagNames[name]
		if t == nil {
			return "", false, notFound(name)
		}
		return t.id, true, nil
	}
	id, ok = p.Id()
	return id, ok, nil
}

// hAddTag is BackendTagsResource.add: the name is required, the parent defaults to the root, the
// answer is the tag TagsDirector finds by the name afterwards (TagNameResolver).
func hAddTag(s *Simulator, rq *apiReq) {
	body, aerr := parseBody(rq, "tag", ovirtsdk.XMLTagReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	name, ok := body.Name()
	if !ok {
		rq.fault(incomplete("Tag", []string{"name"}, "add"))
		return
	}
	e := &tagEntity{name: name, parent: rootTagID}
	if d, ok := body.Description(); ok {
		e.description = &d
	}
	s.mu.Lock()
	var o *ovirtsdk.Tag
	parent, given, aerr := s.inv.parentOf(body)
	if aerr == nil {
		aerr = s.authorize(rq, tagNeed())
	}
	if aerr == nil {
		if given {
			e.parent = parent
		}
		if _, aerr = s.inv.addTag(e); aerr == nil {
			if t := s.inv.tagNames[name]; t != nil {
				o = renderTag(t)
			} else {
				aerr = notFound(name) // saved, but not under a tag TagsDirector holds
			}
		}
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.w.Header().Set("Location", apiPrefix+"/tags/"+o.MustId())
	writeOne(rq, http.StatusCreated, o, ovirtsdk.XMLTagWriteOne)
}

// hUpdateTag is BackendTagResource.update: a parent by name, the tag (a bare 404 when missing),
// a MoveTag when the parent id changes, then UpdateTag with the body mapped onto the tag.
func hUpdateTag(s *Simulator, rq *apiReq) {
	body, aerr := parseBody(rq, "tag", ovirtsdk.XMLTagReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.Lock()
	var o *ovirtsdk.Tag
	if s.inv.tagByID(rq.ids[0]) != nil {
		aerr = s.authorize(rq, tagNeed())
	}
	if aerr == nil {
		aerr = s.inv.putTag(rq.ids[0], body)
	}
	if aerr == nil {
		o = renderTag(s.inv.tagByID(rq.ids[0]))
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLTagWriteOne)
}

func (inv *inventory) putTag(id string, body *ovirtsdk.Tag) *apiError {
	parent, given, aerr := inv.parentOf(body)
	if aerr != nil {
		return aerr
	}
	t := inv.tagByID(id)
	if t == nil {
		return &apiError{404, "", ""}
	}
	if given && parent != t.parent {
		if aerr := inv.moveTag(t, parent); aerr != nil {
			return aerr
		}
	}
	// TagMapper.map(Tag, Tags) onto the stored tag: a parent only when given (Guid.Empty for the
	// root, which has none), a name and a description when given.
	e := &tagEntity{name: t.name, description: t.description, parent: t.parent}
	if e.parent == "" {
		e.parent = rootTagID
	}
	if given {
		e.parent = parent
	}
	if n, ok := body.Name(); ok {
		e.name = n
	}
	if d, ok := body.Description(); ok {
		e.description = &d
	}
	return inv.updateTag(t, e)
}

// hRemoveTag is BackendTagResource.remove: the tag (a bare 404 when missing), then RemoveTag.
func hRemoveTag(s *Simulator, rq *apiReq) {
	s.mu.Lock()
	var aerr *apiError
	if t := s.inv.tagByID(rq.ids[0]); t == nil {
		aerr = &apiError{404, "", ""}
	} else if aerr = s.authorize(rq, tagNeed()); aerr == nil {
		aerr = s.inv.removeTag(t)
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.removed()
}

// ---- introspection

// TagState is a snapshot of one tag.
type TagState struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parent is the parent tag's id (the root's, 00000000-0000-0000-0000-000000000000, unless
	// another was given).
	Parent string `json:"parent"`
	// Hidden is true for a tag the Engine stored but does not show: it was added under a parent
	// that did not exist. Its name is still taken.
	Hidden bool `json:"hidden,omitempty"`
}

func tagState(t *tag) TagState {
	return TagState{ID: t.id, Name: t.name, Description: t.desc(), Parent: t.parent, Hidden: !t.listed}
}

// Tags returns the Engine's tags in creation order, without the root tag (which every Engine
// has: id 00000000-0000-0000-0000-000000000000, name and description "root").
func (s *Simulator) Tags() []TagState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tagStates()
}

func (s *Simulator) tagStates() []TagState {
	out := []TagState{}
	for _, t := range s.inv.tags {
		out = append(out, tagState(t))
	}
	return out
}
