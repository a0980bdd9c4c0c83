package sdk

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
)

func TestAssignTagSendsTheTagIDAndTakesAnAssignedTagAsDone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	// A real Engine answers 201 with the tag whether it attached it now or the VM had it
	// (AttachVmsToTagCommand only logs USER_ATTACH_TAG_TO_VM_EXISTS).
	front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
		if r.Method == "POST" && path == "/vms/vm-1/tags" {
			writeXML(w, 201, `<tag href="/ovirt-engine/api/vms/vm-1/tags/t-1" id="t-1"><name>capov-ha</name>`+
				`<parent href="/ovirt-engine/api/tags/00000000-0000-0000-0000-000000000000" id="00000000-0000-0000-0000-000000000000"/>`+
				`<vm href="/ovirt-engine/api/vms/vm-1" id="vm-1"/></tag>`)
			return true
		}
		return false
	})
	e, c := front.client(t)
	front.reset() // the connection's GET /api
	g.Expect(c.AssignTag(ctx, "vm-1", "t-1")).To(Succeed())
	g.Expect(front.body("POST", "/vms/vm-1/tags")).To(Equal(`<tag id="t-1"></tag>`))
	g.Expect(c.AssignTag(ctx, "vm-1", "t-1")).To(Succeed(), "assigned already")
	g.Expect(front.requests()).To(Equal([]string{"POST /vms/vm-1/tags", "POST /vms/vm-1/tags"}), "nothing else is asked")
	g.Expect(counterValue(e, "requests_total", "AssignTag", "2xx")).To(Equal(2.0))

	front.reset()
	g.Expect(c.AssignTag(ctx, "", "t-1")).To(MatchError(ovirt.ErrInvalid))
	g.Expect(c.AssignTag(ctx, "vm-1", "")).To(MatchError(ovirt.ErrInvalid))
	g.Expect(front.requests()).To(BeEmpty(), "refused before any call")
}

// TestAssignTagTellsAMissingVMOrTag: the Engine checks neither (the insert breaks a foreign key
// of tags_vm_map: 400 "[Internal Engine Error]"); the client asks which one is missing.
func TestAssignTagTellsAMissingVMOrTag(t *testing.T) {
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	const engineError = "[Internal Engine Error]"
	tests := []struct {
		name           string
		tagOK, vmOK    bool
		assignStatus   int
		kinds          []error
		notKinds       []error
		detail         string
		probesExpected bool
	}{
		{"a tag that does not exist", false, true, 400, []error{ovirt.ErrNotFound}, []error{ovirt.ErrInvalid},
			"tag t-1 does not exist (the Engine answered: Operation Failed: [Internal Engine Error])", true},
		{"a VM that does not exist", true, false, 400, []error{ovirt.ErrNotFound}, []error{ovirt.ErrInvalid},
			"VM vm-1 does not exist (the Engine answered: Operation Failed: [Internal Engine Error])", true},
		{"both exist: the Engine's answer stands (the root tag)", true, true, 400, []error{ovirt.ErrInvalid}, []error{ovirt.ErrNotFound},
			"Operation Failed: [Internal Engine Error]", true},
		{"a 403 is not looked into", false, false, 403, []error{ovirt.ErrAuth}, []error{ovirt.ErrNotFound},
			"Operation Failed: User is not authorized to perform this action.", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
				switch {
				case r.Method == "POST" && path == "/vms/vm-1/tags":
					if tt.assignStatus == 403 {
						writeFault(w, 403, "User is not authorized to perform this action.")
					} else {
						writeFault(w, tt.assignStatus, engineError)
					}
				case r.Method == "GET" && path == "/tags/t-1" && tt.tagOK:
					writeXML(w, 200, `<tag id="t-1"><name>capov-ha</name></tag>`)
				case r.Method == "GET" && path == "/vms/vm-1" && tt.vmOK:
					writeXML(w, 200, vmAnswer("vm-1", ""))
				case r.Method == "GET" && (path == "/tags/t-1" || path == "/vms/vm-1"):
					writeEmpty(w, 404)
				default:
					return false
				}
				return true
			})
			_, c := front.client(t)
			front.reset()
			err := c.AssignTag(ctx, "vm-1", "t-1")
			var oe *ovirt.Error
			g.Expect(errors.As(err, &oe)).To(BeTrue())
			g.Expect(oe.Op).To(Equal("AssignTag"))
			g.Expect(oe.Status).To(Equal(tt.assignStatus))
			g.Expect(oe.Detail).To(Equal(tt.detail))
			for _, k := range tt.kinds {
				g.Expect(err).To(MatchError(k))
			}
			for _, k := range tt.notKinds {
				g.Expect(err).NotTo(MatchError(k))
			}
			if tt.probesExpected {
				g.Expect(front.requests()).To(ContainElement("GET /tags/t-1"))
			} else {
				g.Expect(front.requests()).To(Equal([]string{"POST /vms/vm-1/tags"}))
			}
		})
	}
}

// vmWithTags is GET /vms/{id}?follow=... of a real Engine: disks inline, the tags inline when
// follow named them (the LinkFollower keeps the link next to them), or only their link.
func vmWithTags(id string, followed bool, tagIDs ...string) string {
	tags := ""
	if followed {
		tags = "<tags>"
		for _, t := range tagIDs {
			tags += fmt.Sprintf(`<tag href="/ovirt-engine/api/tags/%[1]s" id="%[1]s"><name>n-%[1]s</name></tag>`, t)
		}
		tags += "</tags>"
	}
	disks := `<disk_attachments><disk_attachment id="d-1"><bootable>true</bootable><disk id="d-1"><alias>os</alias>` +
		`<provisioned_size>1073741824</provisioned_size><status>ok</status></disk></disk_attachment></disk_attachments>`
	if !followed {
		disks = `<link href="/ovirt-engine/api/vms/` + id + `/diskattachments" rel="diskattachments"/>`
	}
	return fmt.Sprintf(`<vm href="/ovirt-engine/api/vms/%[1]s" id="%[1]s"><name>%[1]s</name>`+
		`<link href="/ovirt-engine/api/vms/%[1]s/tags" rel="tags"/>%[2]s<status>down</status><cluster id="cl-1"/>%[3]s<nics/></vm>`,
		id, disks, tags)
}

func TestGetVMReadsTheTagsInline(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	var mu sync.Mutex
	answers := map[string]string{
		"/vms/vm-tagged":   vmWithTags("vm-tagged", true, "t-1", "t-2", "t-1"),
		"/vms/vm-untagged": vmWithTags("vm-untagged", true),
		"/vms/vm-links":    vmWithTags("vm-links", false),
	}
	front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
		mu.Lock()
		defer mu.Unlock()
		if a, ok := answers[path]; ok && r.Method == "GET" {
			writeXML(w, 200, a)
			return true
		}
		switch {
		case r.Method == "GET" && path == "/vms/vm-links/diskattachments":
			writeXML(w, 200, `<disk_attachments><disk_attachment id="d-1"><bootable>true</bootable>`+
				`<disk id="d-1"><alias>os</alias><provisioned_size>1</provisioned_size><status>ok</status></disk></disk_attachment></disk_attachments>`)
			return true
		case r.Method == "GET" && path == "/vms/vm-links/nics":
			writeXML(w, 200, `<nics/>`)
			return true
		}
		return false
	})
	_, c := front.client(t)

	vm, err := c.GetVM(ctx, "vm-tagged")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.TagIDs).To(Equal([]string{"t-1", "t-2"}), "ids only, once each")
	g.Expect(vm.TagsKnown).To(BeTrue())
	g.Expect(cap(vm.TagIDs)).To(Equal(2), "no spare capacity kept per VM")
	g.Expect(front.requests()).To(ContainElement("GET /vms/vm-tagged?follow=disk_attachments.disk%2Cnics.reported_devices%2Ctags"))

	vm, err = c.GetVM(ctx, "vm-untagged")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.TagIDs).To(BeNil())
	g.Expect(vm.TagsKnown).To(BeTrue(), "the disks came inline: so did the (no) tags")

	vm, err = c.GetVM(ctx, "vm-links")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.Disks).NotTo(BeEmpty(), "read on their own")
	g.Expect(vm.TagIDs).To(BeNil())
	g.Expect(vm.TagsKnown).To(BeFalse(), "follow was ignored: the tags are not known")
}

func TestAssignTagAgainstTheSimulator(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim, _, c := listClient(t)
	ids := createOwnedVMs(t, c, "t-a", "t-b")
	ha, err := c.CreateTag(ctx, "capov-ha", "")
	g.Expect(err).NotTo(HaveOccurred())
	other, err := c.CreateTag(ctx, "capov-other", "")
	g.Expect(err).NotTo(HaveOccurred())

	sim.ResetCounters()
	err = c.AssignTag(ctx, ids["t-a"], ha.ID)
	if err != nil && sim.RequestCount("POST", "/vms/{id}/tags") == 0 {
		t.Skipf("the simulator has no POST /vms/{id}/tags yet: %v", err)
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.AssignTag(ctx, ids["t-a"], ha.ID)).To(Succeed(), "assigning twice is no error")
	g.Expect(c.AssignTag(ctx, ids["t-a"], other.ID)).To(Succeed())
	g.Expect(sim.RequestCount("POST", "/vms/{id}/tags")).To(Equal(3))

	vm, err := c.GetVM(ctx, ids["t-a"])
	g.Expect(err).NotTo(HaveOccurred())
	if !vm.TagsKnown {
		t.Skip("the simulator does not follow a VM's tags yet (follow=tags)")
	}
	g.Expect(vm.TagIDs).To(ConsistOf(ha.ID, other.ID), "once each")
	vm, err = c.GetVM(ctx, ids["t-b"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.TagsKnown).To(BeTrue())
	g.Expect(vm.TagIDs).To(BeEmpty())

	page, err := c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: 1, PageSize: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Complete).To(BeTrue())
	g.Expect(page.VMs).To(HaveLen(2))
	g.Expect(page.VMs[0].TagsKnown).To(BeTrue())
	g.Expect(page.VMs[0].TagIDs).To(ConsistOf(ha.ID, other.ID))
	g.Expect(page.VMs[1].TagIDs).To(BeEmpty())

	// Missing tag, missing VM.
	err = c.AssignTag(ctx, ids["t-b"], "00000000-0000-0000-0000-00000000beef")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound), "%v", err)
	err = c.AssignTag(ctx, "00000000-0000-0000-0000-00000000dead", ha.ID)
	g.Expect(err).To(MatchError(ovirt.ErrNotFound), "%v", err)

	// An Engine that ignores follow: the tags are not known, neither in GetVM nor in a page.
	sim.SetIgnoreFollow(true)
	vm, err = c.GetVM(ctx, ids["t-a"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.TagsKnown).To(BeFalse())
	g.Expect(vm.TagIDs).To(BeNil())
	page, err = c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: 1, PageSize: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Complete).To(BeFalse())
	for _, v := range page.VMs {
		g.Expect(v.TagsKnown).To(BeFalse())
		g.Expect(v.TagIDs).To(BeNil())
	}
}
