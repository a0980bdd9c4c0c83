package sdk

import (
	"context"
	"fmt"
	"strings"

	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// commentSearchRefused are the characters ListVMs does not put in a search. The search language
// cannot quote '"'; the Engine's SyntaxChecker refuses ' and ; anywhere (DISALLOWED_CHARS) and
// SqlInjectionChecker.enforceEscapeCharacters escapes '\' unevenly, and the Engine answers such
// a failed search with an empty list, not an error: the page would look empty. '*' is a
// wildcard: the filter would drop what it adds, and a page would come back short although more
// pages follow.
const commentSearchRefused = "\"';\\*"

// vmListFollow is what a VM of a page brings inline: what GetVM follows, and the host it runs on
// (its name: without it, an inventory after a start would read every host once).
const vmListFollow = vmFollow + ",host"

// ListVMs implements ovirt.Client with one engine call per page:
//
//	GET /vms?search=comment="*<text>*" sortby name asc page <n>&max=<size>&case_sensitive=true&follow=disk_attachments.disk,nics.reported_devices,tags,host
//
// The Engine pages its ordered result itself (ROW_NUMBER() BETWEEN (n-1)*max+1 AND n*max). With
// case_sensitive the match is LIKE '%<text>%' with '_' and '%' escaped: exactly "contains", so
// the client-side filter drops nothing from an Engine, and a short page is the last one. The
// filter stays for anything else that answers (a proxy, an older Engine ignoring
// case_sensitive): a VM is only ever reported because its comment holds the text.
//
// A VM made from a template always has disk attachments. A VM of the page without any inline
// means the Engine (or a proxy) ignored follow: the page is then not Complete and no VM of it
// keeps disks, NICs or reported devices, so that nothing half read is taken as a fact (the
// caller reads those VMs with GetVM). Host names come from the session's cache: a host costs
// one GET /hosts/{id} per session.
func (c *client) ListVMs(ctx context.Context, q ovirt.VMQuery) (ovirt.VMPage, error) {
	const op = "ListVMs"
	search, err := vmPageSearch(op, q)
	if err != nil {
		return ovirt.VMPage{}, err
	}
	page, err := invoke(ctx, c.s, op, func(conn *ovirtsdk.Connection) (ovirt.VMPage, error) {
		resp, err := conn.SystemService().VmsService().List().Search(search).CaseSensitive(true).
			Max(int64(q.PageSize)).Follow(vmListFollow).Send()
		if err != nil {
			return ovirt.VMPage{}, err
		}
		return toVMPage(resp, q.CommentContains), nil
	})
	if err != nil {
		return ovirt.VMPage{}, err
	}
	for i := range page.VMs {
		if err := c.fillHostName(ctx, &page.VMs[i]); err != nil {
			return ovirt.VMPage{}, err
		}
	}
	return page, nil
}

// vmPageSearch validates q and returns the search of its page.
func vmPageSearch(op string, q ovirt.VMQuery) (string, error) {
	switch {
	case q.CommentContains == "":
		return "", invalid(op, "CommentContains is empty")
	case strings.ContainsAny(q.CommentContains, commentSearchRefused):
		return "", invalid(op, "CommentContains %q holds a character the engine's search cannot take (one of \" ' ; \\ *)", q.CommentContains)
	case q.Page < 1:
		return "", invalid(op, "Page %d is below 1", q.Page)
	case q.PageSize < 1 || q.PageSize > ovirt.MaxVMPageSize:
		return "", invalid(op, "PageSize %d is outside 1..%d", q.PageSize, ovirt.MaxVMPageSize)
	}
	return fmt.Sprintf(`comment="*%s*" sortby name asc page %d`, q.CommentContains, q.Page), nil
}

// toVMPage converts a page of VMs, keeping those whose comment contains text.
func toVMPage(resp *ovirtsdk.VmsServiceListResponse, text string) ovirt.VMPage {
	page := ovirt.VMPage{VMs: []ovirt.VM{}, Complete: true}
	list, ok := resp.Vms()
	if !ok {
		return page
	}
	for _, v := range list.Slice() {
		vm := toFollowedVM(v)
		if !strings.Contains(vm.Comment, text) {
			continue
		}
		page.Complete = page.Complete && len(vm.Disks) > 0
		page.VMs = append(page.VMs, *vm)
	}
	if !page.Complete {
		for i := range page.VMs {
			vm := &page.VMs[i]
			vm.Disks, vm.NICs, vm.ReportedDevices = nil, nil, nil
			vm.TagIDs, vm.TagsKnown = nil, false
		}
	}
	return page
}

// fillHostName names the host a VM runs on: an inline name is the freshest and is remembered, a
// reference is resolved through the session's cache (hostName).
func (c *client) fillHostName(ctx context.Context, vm *ovirt.VM) error {
	switch {
	case vm.HostID != "" && vm.HostName != "":
		c.s.hostNames.put(vm.HostID, vm.HostName)
	case vm.HostID != "":
		name, err := c.hostName(ctx, vm.HostID)
		if err != nil {
			return err
		}
		vm.HostName = name
	}
	return nil
}
