package fake

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"unicode/utf16"

	"github.com/capov/capov/pkg/ovirt"
)

// Tags of the fake Client. Errors carry the status, sentinels and Engine texts the SDK client
// reports for the same refusal against a real Engine (see pkg/ovirt/sdk/tags.go and
// test/ovirtsim/tags.go for where they come from).

// RootTagID is the id of the Engine's root tag, a pseudo-tag every Engine has (TagsDirector):
// named and described "root", the parent of the tags created without one, and read-only.
const RootTagID = "00000000-0000-0000-0000-000000000000"

// The Engine's rules for a tag (Tags.java): a name of 1 to 50 characters (UTF-16 units, as Java
// counts them) of letters, digits, '.', '_' and '-', and a description of at most 4000.
const (
	tagNameMax        = 50
	tagDescriptionMax = 4000
)

var tagNameRE = regexp.MustCompile(`^[\p{L}0-9._-]*$`)

func rootTag() *ovirt.Tag {
	return &ovirt.Tag{ID: RootTagID, Name: "root", Description: "root"}
}

// javaLen is the length of s as Java's String.length counts it (UTF-16 code units).
func javaLen(s string) int {
	n := 0
	for _, r := range s {
		n += max(utf16.RuneLen(r), 1)
	}
	return n
}

// AddTag seeds a tag as is (an empty ID is generated), e.g. one left by an earlier manager or
// made by hand. It does not check the name: the Engine's rules apply to CreateTag only.
func (c *Client) AddTag(t ovirt.Tag) ovirt.Tag {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.ID == "" {
		t.ID = c.newID("tag")
	}
	c.tags = append(c.tags, &t)
	return t
}

// Tags returns copies of the tags, in creation order, without the root tag.
func (c *Client) Tags() []ovirt.Tag {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ovirt.Tag, 0, len(c.tags))
	for _, t := range c.tags {
		out = append(out, *t)
	}
	return out
}

// TagByName returns a copy of the tag with this name, the root tag included.
func (c *Client) TagByName(name string) (ovirt.Tag, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.tagByName(name); t != nil {
		return *t, true
	}
	return ovirt.Tag{}, false
}

// DeleteTag removes a tag out of band, as an operator would in the Engine; false if there was
// none with this id (the root tag cannot be removed).
func (c *Client) DeleteTag(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.tags)
	c.tags = slices.DeleteFunc(c.tags, func(t *ovirt.Tag) bool { return t.ID == id })
	if len(c.tags) == n {
		return false
	}
	// RemoveTagCommand detaches the tag from its VMs first.
	for _, vm := range c.vms {
		vm.TagIDs = slices.DeleteFunc(vm.TagIDs, func(t string) bool { return t == id })
	}
	return true
}

// tagByName finds a tag by exact name: the created tags first, then the root, the order in which
// GET /tags lists them. Called with c.mu held.
func (c *Client) tagByName(name string) *ovirt.Tag {
	for _, t := range c.tags {
		if t.Name == name {
			return t
		}
	}
	if name == "root" {
		return rootTag()
	}
	return nil
}

// tagByID finds a tag by id, the root included. Called with c.mu held.
func (c *Client) tagByID(id string) *ovirt.Tag {
	if id == RootTagID {
		return rootTag()
	}
	for _, t := range c.tags {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// tagInputError is the Engine's validateInputs refusal of a tag's name or description (400).
func tagInputError(op, name, description string) error {
	if n := javaLen(name); n < 1 || n > tagNameMax {
		return invalid(op, "Operation Failed: [size must be between 1 and %d, Attribute: _tag.name]", tagNameMax)
	}
	if !tagNameRE.MatchString(name) {
		return invalid(op, "Operation Failed: [Invalid tag name. Only letters, numbers, '-', and '_' are valid characters., Attribute: _tag.name]")
	}
	if javaLen(description) > tagDescriptionMax {
		return invalid(op, "Operation Failed: [size must be between 0 and %d, Attribute: _tag.description]", tagDescriptionMax)
	}
	return nil
}

// FindTag implements ovirt.Client.
func (c *Client) FindTag(ctx context.Context, name string) (*ovirt.Tag, error) {
	c.mu.Lock()
	c.record("FindTag")
	c.mu.Unlock()
	if c.FindTagFunc != nil {
		return c.FindTagFunc(ctx, name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if name == "" {
		return nil, invalid("FindTag", "tag name is empty")
	}
	t := c.tagByName(name)
	if t == nil {
		return nil, notFound("FindTag", "no tag named %q", name)
	}
	out := *t
	return &out, nil
}

// GetTag implements ovirt.Client.
func (c *Client) GetTag(ctx context.Context, id string) (*ovirt.Tag, error) {
	c.mu.Lock()
	c.record("GetTag")
	c.mu.Unlock()
	if c.GetTagFunc != nil {
		return c.GetTagFunc(ctx, id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tagByID(id)
	if t == nil {
		return nil, notFound("GetTag", "no tag with id %q", id)
	}
	out := *t
	return &out, nil
}

// CreateTag implements ovirt.Client. Like the Engine it refuses a name another tag has (409,
// ErrConflict) and an invalid name or description (400, ErrInvalid); a tag named "root" is
// accepted, as the Engine's check does not see the root tag.
func (c *Client) CreateTag(ctx context.Context, name, description string) (*ovirt.Tag, error) {
	c.mu.Lock()
	c.record("CreateTag")
	c.mu.Unlock()
	if c.CreateTagFunc != nil {
		return c.CreateTagFunc(ctx, name, description)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	const op = "CreateTag"
	if name == "" {
		return nil, invalid(op, "tag name is empty")
	}
	if err := tagInputError(op, name, description); err != nil {
		return nil, err
	}
	for _, t := range c.tags {
		if t.Name == name {
			return nil, &ovirt.Error{Op: op, Status: 409, Detail: "Operation Failed: [The specified Tag name already exists.]",
				Kinds: []error{ovirt.ErrConflict}}
		}
	}
	t := &ovirt.Tag{ID: c.newID("tag"), Name: name, Description: description}
	c.tags = append(c.tags, t)
	out := *t
	return &out, nil
}

// UpdateTagDescription implements ovirt.Client. The root tag cannot be edited: the Engine
// answers 500 "General command validation failure." (its check dereferences the root tag's
// missing database row), an error of no kind.
func (c *Client) UpdateTagDescription(ctx context.Context, id, description string) error {
	c.mu.Lock()
	c.record("UpdateTagDescription")
	c.mu.Unlock()
	if c.UpdateTagDescriptionFunc != nil {
		return c.UpdateTagDescriptionFunc(ctx, id, description)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	const op = "UpdateTagDescription"
	t := c.tagByID(id)
	if t == nil {
		return notFound(op, "no tag with id %q", id)
	}
	if err := tagInputError(op, t.Name, description); err != nil {
		return err
	}
	if id == RootTagID {
		return &ovirt.Error{Op: op, Status: 500, Detail: "Operation Failed: [General command validation failure.]"}
	}
	t.Description = description
	return nil
}

// AssignTag implements ovirt.Client: the tag joins the VM's TagIDs (GetVM and ListVMs report
// them, with TagsKnown). A tag assigned already is no error, as with the Engine. An unknown VM or
// tag is ErrNotFound (how the SDK client reports the Engine's 400 "Internal Engine Error" for
// them), the root tag the Engine's 400 (ErrInvalid): it is no database row.
func (c *Client) AssignTag(ctx context.Context, vmID, tagID string) error {
	c.mu.Lock()
	c.record("AssignTag")
	c.mu.Unlock()
	if c.AssignTagFunc != nil {
		return c.AssignTagFunc(ctx, vmID, tagID)
	}
	const op = "AssignTag"
	switch {
	case vmID == "":
		return invalid(op, "VM id is empty")
	case tagID == "":
		return invalid(op, "tag id is empty")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	const engineError = "Operation Failed: [Internal Engine Error]"
	vm, ok := c.vms[vmID]
	switch {
	case c.tagByID(tagID) == nil:
		return &ovirt.Error{Op: op, Status: 400, Kinds: []error{ovirt.ErrNotFound},
			Detail: fmt.Sprintf("tag %s does not exist (the Engine answered: %s)", tagID, engineError)}
	case !ok:
		return &ovirt.Error{Op: op, Status: 400, Kinds: []error{ovirt.ErrNotFound},
			Detail: fmt.Sprintf("VM %s does not exist (the Engine answered: %s)", vmID, engineError)}
	case tagID == RootTagID:
		return invalid(op, engineError)
	}
	if !slices.Contains(vm.TagIDs, tagID) {
		vm.TagIDs = append(vm.TagIDs, tagID)
	}
	return nil
}
