package sdk

import (
	"context"
	"errors"
	"fmt"

	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// Tags (/tags).
//
// What the Engine answers (ovirt-engine 4.4 and 4.5 alike: BackendTagsResource,
// BackendTagResource, TagMapper, the Add/UpdateTag commands):
//   - GET /tags lists every tag and the root tag (id 00000000-0000-0000-0000-000000000000, name
//     and description "root"), in no stable order; it takes no search, so a lookup by name reads
//     the whole list. Tags are few (an operator's labels), so that is cheap.
//   - POST /tags answers 201 with the tag, under the root unless a parent is given. A name in use
//     is 409 "[The specified Tag name already exists.]" (TAGS_SPECIFY_TAG_IS_IN_USE, CONFLICT);
//     an invalid name (1 to 50 letters, digits, '.', '_', '-') or a description over 4000
//     characters is 400.
//   - GET, PUT and DELETE of /tags/{id} answer a bare 404 for a tag that does not exist. PUT maps
//     only what the body has onto the tag.
//
// Nothing is cached: the heartbeat this exists for must see other writers' changes.

// phraseTagNameTaken is TAGS_SPECIFY_TAG_IS_IN_USE's text, in lower case. It is a 409 already;
// the phrase makes the conflict explicit should an Engine or a proxy answer it otherwise.
const phraseTagNameTaken = "the specified tag name already exists"

func toTag(t *ovirtsdk.Tag) *ovirt.Tag {
	out := &ovirt.Tag{}
	out.ID, _ = t.Id()
	out.Name, _ = t.Name()
	out.Description, _ = t.Description()
	return out
}

// FindTag implements ovirt.Client with GET /tags and an exact match on the name (case and all).
// Should several tags share the name (only "root" can: the Engine's uniqueness check does not
// see the root tag), the first listed wins; the Engine lists the root tag last.
func (c *client) FindTag(ctx context.Context, name string) (*ovirt.Tag, error) {
	const op = "FindTag"
	if name == "" {
		return nil, invalid(op, "tag name is empty")
	}
	tag, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (*ovirt.Tag, error) {
		resp, err := conn.SystemService().TagsService().List().Send()
		if err != nil {
			return nil, err
		}
		if list, ok := resp.Tags(); ok {
			for _, t := range list.Slice() {
				if n, _ := t.Name(); n == name {
					return toTag(t), nil
				}
			}
		}
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	if tag == nil {
		return nil, notFound(op, "no tag named %q", name)
	}
	return tag, nil
}

// GetTag implements ovirt.Client with GET /tags/{id}.
func (c *client) GetTag(ctx context.Context, id string) (*ovirt.Tag, error) {
	const op = "GetTag"
	if id == "" {
		return nil, invalid(op, "tag id is empty")
	}
	return invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (*ovirt.Tag, error) {
		resp, err := conn.SystemService().TagsService().TagService(id).Get().Send()
		if err != nil {
			return nil, err
		}
		t, ok := resp.Tag()
		if !ok {
			return nil, fmt.Errorf("engine answered without the tag")
		}
		out := toTag(t)
		if out.ID == "" {
			out.ID = id
		}
		return out, nil
	})
}

// CreateTag implements ovirt.Client with POST /tags. No parent is sent: the Engine puts the tag
// under the root tag.
func (c *client) CreateTag(ctx context.Context, name, description string) (*ovirt.Tag, error) {
	const op = "CreateTag"
	if name == "" {
		return nil, invalid(op, "tag name is empty")
	}
	b := ovirtsdk.NewTagBuilder().Name(xmlText(name))
	if description != "" {
		b.Description(xmlText(description))
	}
	tag, err := b.Build()
	if err != nil {
		return nil, invalid(op, "building the tag: %v", err)
	}
	created, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (*ovirt.Tag, error) {
		resp, err := conn.SystemService().TagsService().Add().Tag(tag).Send()
		if err != nil {
			return nil, err
		}
		t, ok := resp.Tag()
		if !ok {
			return nil, fmt.Errorf("engine answered without the created tag")
		}
		return toTag(t), nil
	})
	if engineSays(err, phraseTagNameTaken) {
		return nil, withKinds(err, ovirt.ErrConflict)
	}
	return created, err
}

// UpdateTagDescription implements ovirt.Client with PUT /tags/{id} <tag><description/></tag>:
// the Engine maps only the description onto the tag; an empty one is sent as an empty element
// and empties it.
func (c *client) UpdateTagDescription(ctx context.Context, id, description string) error {
	const op = "UpdateTagDescription"
	if id == "" {
		return invalid(op, "tag id is empty")
	}
	tag, err := ovirtsdk.NewTagBuilder().Description(xmlText(description)).Build()
	if err != nil {
		return invalid(op, "building the tag: %v", err)
	}
	_, err = invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().TagsService().TagService(id).Update().Tag(tag).Send()
		return struct{}{}, err
	})
	return err
}

// AssignTag implements ovirt.Client with POST /vms/{id}/tags <tag id=""/>.
//
// What the Engine does (AbstractBackendAssignedTagsResource.add, AttachVmsToTagCommand, 4.4 and
// 4.5 alike): it attaches the tag unless the VM has it already, and answers 201 with the tag
// either way (an assigned tag is only logged, USER_ATTACH_TAG_TO_VM_EXISTS): assigning twice is
// no error, with nothing to tolerate here. Neither the REST layer nor the command checks that
// the VM or the tag exists: the insert then breaks a foreign key of tags_vm_map and the Engine
// answers 400 "[Internal Engine Error]" (EngineError.ENGINE, no error type). So an answer that
// is neither a success nor a 404 is followed by GET /tags/{id} and GET /vms/{id}: a 404 of
// either makes the error ErrNotFound; otherwise the Engine's answer stands (the root tag, which
// is not a database row, is such a 400).
func (c *client) AssignTag(ctx context.Context, vmID, tagID string) error {
	const op = "AssignTag"
	switch {
	case vmID == "":
		return invalid(op, "VM id is empty")
	case tagID == "":
		return invalid(op, "tag id is empty")
	}
	tag, err := ovirtsdk.NewTagBuilder().Id(tagID).Build()
	if err != nil {
		return invalid(op, "building the tag: %v", err)
	}
	_, err = invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().VmsService().VmService(vmID).TagsService().Add().Tag(tag).Send()
		return struct{}{}, err
	})
	var e *ovirt.Error
	if err == nil || errors.Is(err, ovirt.ErrNotFound) || !errors.As(err, &e) || (e.Status != 400 && e.Status != 500) {
		return err
	}
	if what := c.missingForAssign(ctx, vmID, tagID); what != "" {
		out := *e
		out.Detail = fmt.Sprintf("%s (the Engine answered: %s)", what, e.Detail)
		out.Kinds = []error{ovirt.ErrNotFound}
		return &out
	}
	return err
}

// missingForAssign says which of the VM and the tag does not exist ("" when both do, or when
// asking failed: the caller keeps the Engine's own answer then).
func (c *client) missingForAssign(ctx context.Context, vmID, tagID string) string {
	if _, err := c.GetTag(ctx, tagID); errors.Is(err, ovirt.ErrNotFound) {
		return fmt.Sprintf("tag %s does not exist", tagID)
	}
	_, err := invoke(ctx, c.s, "GetVM", func(conn *ovirtsdk.Connection) (struct{}, error) {
		_, err := conn.SystemService().VmsService().VmService(vmID).Get().Send()
		return struct{}{}, err
	})
	if errors.Is(err, ovirt.ErrNotFound) {
		return fmt.Sprintf("VM %s does not exist", vmID)
	}
	return ""
}
