package ovirtsim_test

import (
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// tagNames returns the names of tags, sorted.
func tagNames(tags []*ovirtsdk.Tag) []string {
	out := names(tags)
	slices.Sort(out)
	return out
}

func vmTags(g Gomega, conn *ovirtsdk.Connection, vmID string) []*ovirtsdk.Tag {
	r, err := conn.SystemService().VmsService().VmService(vmID).TagsService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	return r.MustTags().Slice()
}

func TestVMTagsAreAssignedListedAndRemovedLikeTheEngine(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	ha, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("capov-ha").Description("highly available"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = addTag(g, conn, ovirtsdk.NewTagBuilder().Name("capov-worker"))
	g.Expect(err).NotTo(HaveOccurred())
	id := createVM(t, conn, "tagged", false)
	tags := conn.SystemService().VmsService().VmService(id).TagsService()

	// By id: 201 with the tag as TagsDirector holds it (its description), the VM and a Location.
	r, err := tags.Add().Tag(ovirtsdk.NewTagBuilder().Id(ha.MustId()).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustTag().MustName()).To(Equal("capov-ha"))
	g.Expect(r.MustTag().MustDescription()).To(Equal("highly available"))
	g.Expect(r.MustTag().MustVm().MustId()).To(Equal(id))
	status, body := tagDo(g, sim, "POST", "/vms/"+id+"/tags", `<tag id="`+ha.MustId()+`"/>`)
	g.Expect(status).To(Equal(201), "assigning twice is no error (USER_ATTACH_TAG_TO_VM_EXISTS)")
	g.Expect(body).To(ContainSubstring(`<tag id="` + ha.MustId() + `" href="/ovirt-engine/api/vms/` + id + `/tags/` + ha.MustId() + `">`))
	// By name.
	_, err = tags.Add().Tag(ovirtsdk.NewTagBuilder().Name("capov-worker").MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())

	// The list comes from tags_vm_map_view: no description, the parent and the VM.
	list := vmTags(g, conn, id)
	g.Expect(tagNames(list)).To(Equal([]string{"capov-ha", "capov-worker"}), "each tag once")
	for _, tg := range list {
		g.Expect(tg.MustDescription()).To(BeEmpty())
		g.Expect(tg.MustParent().MustId()).To(Equal(rootTagID))
		g.Expect(tg.MustVm().MustId()).To(Equal(id))
	}
	one, err := tags.TagService(ha.MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(one.MustTag().MustName()).To(Equal("capov-ha"))

	// follow=tags on the VM and on the list, as the SDK reads Vm.Tags().
	g.Expect(tagNames(getVM(t, conn, id, "tags").MustTags().Slice())).To(Equal([]string{"capov-ha", "capov-worker"}))
	lr, err := conn.SystemService().VmsService().List().Search("name=tagged").Follow("disk_attachments,tags").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tagNames(lr.MustVms().Slice()[0].MustTags().Slice())).To(Equal([]string{"capov-ha", "capov-worker"}))
	_, inline := getVM(t, conn, id, "").Tags()
	g.Expect(inline).To(BeTrue(), "without follow only the link")
	g.Expect(getVM(t, conn, id, "").MustTags().Slice()).To(BeEmpty())
	st, _ := sim.VM(id)
	g.Expect(st.Tags).To(Equal([]string{"capov-ha", "capov-worker"}))

	// DELETE /vms/{id}/tags/{tag}, then it is a 404.
	_, err = tags.TagService(ha.MustId()).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = tags.TagService(ha.MustId()).Remove().Send()
	_, nf := errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(nf).To(BeTrue(), "got %T %v", err, err)
	_, err = tags.TagService(ha.MustId()).Get().Send()
	_, nf = errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(nf).To(BeTrue())
	g.Expect(tagNames(vmTags(g, conn, id))).To(Equal([]string{"capov-worker"}))
	g.Expect(sim.Tags()).To(HaveLen(2), "the tags themselves stay")
}

func TestAssigningATagThatIsNotThere(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "lonely", false)
	tg, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("real"))
	g.Expect(err).NotTo(HaveOccurred())
	const missingVM = "00000000-0000-0000-0000-00000000beef"
	const missingTag = "00000000-0000-0000-0000-00000000cafe"

	for _, c := range []struct {
		name, path, body string
		status           int
		detail           string
	}{
		{"an unknown name", "/vms/" + id + "/tags", `<tag><name>nope</name></tag>`, 404, "<detail>Entity not found: nope</detail>"},
		{"an unknown id breaks tags_vm_map's foreign key", "/vms/" + id + "/tags", `<tag id="` + missingTag + `"/>`, 400, "<detail>[Internal Engine Error]</detail>"},
		{"the root tag is no database row", "/vms/" + id + "/tags", `<tag id="` + rootTagID + `"/>`, 400, "<detail>[Internal Engine Error]</detail>"},
		{"an unknown VM", "/vms/" + missingVM + "/tags", `<tag id="` + tg.MustId() + `"/>`, 400, "<detail>[Internal Engine Error]</detail>"},
		{"a malformed id", "/vms/" + id + "/tags", `<tag id="not-a-uuid"/>`, 400, "<detail>Invalid UUID string: not-a-uuid</detail><reason>Operation failed</reason>"},
		{"neither id nor name", "/vms/" + id + "/tags", `<tag><description>x</description></tag>`, 400, "<detail>Tag [id|name] required for add</detail>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			status, body := tagDo(g, sim, "POST", c.path, c.body)
			g.Expect(status).To(Equal(c.status), body)
			g.Expect(body).To(ContainSubstring(c.detail))
		})
	}
	g.Expect(vmTags(g, conn, id)).To(BeEmpty())

	// GetTagsByVmId does not look for the VM: an unknown one has no tags; a malformed id is 404.
	status, body := tagDo(g, sim, "GET", "/vms/"+missingVM+"/tags", "")
	g.Expect(status).To(Equal(200))
	g.Expect(body).To(Equal("<tags></tags>"))
	status, _ = tagDo(g, sim, "GET", "/vms/garbage/tags", "")
	g.Expect(status).To(Equal(404))
	status, body = tagDo(g, sim, "DELETE", "/vms/"+id+"/tags/"+tg.MustId(), "")
	g.Expect(status).To(Equal(404), "not assigned: BackendVmTagResource.get")
	g.Expect(body).To(BeEmpty())
	// An id in the Engine's loose UUID form is the same tag.
	loose := strings.TrimLeft(tg.MustId(), "0")
	status, body = tagDo(g, sim, "POST", "/vms/"+id+"/tags", `<tag id="`+loose+`"/>`)
	g.Expect(status).To(Equal(201), body)
	g.Expect(tagNames(vmTags(g, conn, id))).To(Equal([]string{"real"}))
}

func TestRemovingATagOrAVMDropsTheAssignments(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	parent, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("parent"))
	g.Expect(err).NotTo(HaveOccurred())
	child, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("child").ParentBuilder(ovirtsdk.NewTagBuilder().Id(parent.MustId())))
	g.Expect(err).NotTo(HaveOccurred())
	other, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("other"))
	g.Expect(err).NotTo(HaveOccurred())
	a := createVM(t, conn, "a", false)
	b := createVM(t, conn, "b", false)
	for _, vm := range []string{a, b} {
		for _, tg := range []*ovirtsdk.Tag{parent, child, other} {
			_, err = conn.SystemService().VmsService().VmService(vm).TagsService().Add().Tag(ovirtsdk.NewTagBuilder().Id(tg.MustId()).MustBuild()).Send()
			g.Expect(err).NotTo(HaveOccurred())
		}
	}

	// Deletetags deletes the rows of the tag and of its descendants.
	_, err = conn.SystemService().TagsService().TagService(parent.MustId()).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tagNames(vmTags(g, conn, a))).To(Equal([]string{"other"}))
	g.Expect(tagNames(vmTags(g, conn, b))).To(Equal([]string{"other"}))

	// A removed VM loses its rows (tags_vm_map_vm ON DELETE CASCADE); the others keep theirs.
	_, err = conn.SystemService().VmsService().VmService(a).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmTags(g, conn, a)).To(BeEmpty())
	st, _ := sim.VM(b)
	g.Expect(st.Tags).To(Equal([]string{"other"}))

	// By hand, as an operator in the UI (or the API's DELETE).
	g.Expect(sim.UntagVM(b, "other")).To(Succeed())
	g.Expect(sim.UntagVM(b, "other")).To(MatchError(ovirtsim.ErrNotFound))
	_, err = conn.SystemService().VmsService().VmService(b).TagsService().Add().Tag(ovirtsdk.NewTagBuilder().Id(other.MustId()).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	status, body := admin(t, sim, "DELETE", "/sim/vms/"+b+"/tags/other", "")
	g.Expect(status).To(Equal(200), body)
	g.Expect(vmTags(g, conn, b)).To(BeEmpty())
	status, _ = admin(t, sim, "DELETE", "/sim/vms/"+b+"/tags/other", "")
	g.Expect(status).To(Equal(404))
}

func TestSearchVMsByTag(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	team, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("team"))
	g.Expect(err).NotTo(HaveOccurred())
	sub, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("team-a").ParentBuilder(ovirtsdk.NewTagBuilder().Id(team.MustId())))
	g.Expect(err).NotTo(HaveOccurred())
	solo, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("Solo"))
	g.Expect(err).NotTo(HaveOccurred())
	assign := func(vm string, tg *ovirtsdk.Tag) {
		_, err := conn.SystemService().VmsService().VmService(vm).TagsService().Add().Tag(ovirtsdk.NewTagBuilder().Id(tg.MustId()).MustBuild()).Send()
		g.Expect(err).NotTo(HaveOccurred())
	}
	assign(createVM(t, conn, "v1", false), team)
	assign(createVM(t, conn, "v2", false), sub)
	assign(createVM(t, conn, "v3", false), solo)
	createVM(t, conn, "v4", false)
	search := func(q string) []string {
		r, err := conn.SystemService().VmsService().List().Search(q).Send()
		g.Expect(err).NotTo(HaveOccurred())
		return names(r.MustVms().Slice())
	}
	g.Expect(search("tag=team")).To(Equal([]string{"v1", "v2"}), "a tag and its descendants")
	g.Expect(search("tag=team-a")).To(Equal([]string{"v2"}))
	g.Expect(search("tag=team*")).To(Equal([]string{"v1", "v2"}))
	g.Expect(search("tag=Solo")).To(Equal([]string{"v3"}))
	g.Expect(search("tag=solo")).To(BeEmpty(), "TagsDirector's regular expression is case-sensitive")
	g.Expect(search("tag=team-a or tag=Solo")).To(Equal([]string{"v2", "v3"}))
	g.Expect(search("tag=team and name=v1")).To(Equal([]string{"v1"}))
	g.Expect(search("tag=nothing")).To(BeEmpty())
	_, err = conn.SystemService().VmsService().List().Search("tag!=team").Send()
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "400"`)))
}

func TestTagAssignmentsNeedTagManagement(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithUser(ovirtsim.User{Username: "vmmgr@internal", Password: "pw",
			Grants: []ovirtsim.Grant{{Role: "UserVmManager", Cluster: "Default"}}})
		b.WithUser(ovirtsim.User{Username: "tagger@internal", Password: "pw",
			Grants: []ovirtsim.Grant{{Role: "TagManager"}}})
	})
	conn := connect(t, sim)
	id := createVM(t, conn, "guarded", false)
	tg, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("guard"))
	g.Expect(err).NotTo(HaveOccurred())
	body := `<tag id="` + tg.MustId() + `"/>`

	// TagsCommandBase: TAG_MANAGEMENT on the system, whatever the user holds on the VM.
	status, out := asUser(g, sim, "vmmgr@internal", "pw", "POST", "/vms/"+id+"/tags", body)
	g.Expect(status).To(Equal(403), out)
	g.Expect(out).To(ContainSubstring("[User is not authorized to perform this action.]"))
	status, out = asUser(g, sim, "tagger@internal", "pw", "POST", "/vms/"+id+"/tags", body)
	g.Expect(status).To(Equal(201), out)
	status, _ = asUser(g, sim, "vmmgr@internal", "pw", "GET", "/vms/"+id+"/tags", "")
	g.Expect(status).To(Equal(200), "reads are not checked")
	status, _ = asUser(g, sim, "vmmgr@internal", "pw", "DELETE", "/vms/"+id+"/tags/"+tg.MustId(), "")
	g.Expect(status).To(Equal(403))
	status, _ = asUser(g, sim, "tagger@internal", "pw", "DELETE", "/vms/"+id+"/tags/"+tg.MustId(), "")
	g.Expect(status).To(Equal(200))
}

func TestVMTagRequestsAreCountedPerVM(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "counted", false)
	tg, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("counted"))
	g.Expect(err).NotTo(HaveOccurred())
	sim.ResetCounters()
	tags := conn.SystemService().VmsService().VmService(id).TagsService()
	_, err = tags.Add().Tag(ovirtsdk.NewTagBuilder().Id(tg.MustId()).MustBuild()).Query("correlation_id", "tag-1").Send()
	g.Expect(err).NotTo(HaveOccurred())
	vmTags(g, conn, id)
	_, err = tags.TagService(tg.MustId()).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.Requests()).To(Equal(map[ovirtsim.RequestKey]int{
		{Method: "POST", Path: "/vms/{id}/tags", Status: 201}:        1,
		{Method: "GET", Path: "/vms/{id}/tags", Status: 200}:         1,
		{Method: "DELETE", Path: "/vms/{id}/tags/{id}", Status: 200}: 1,
	}))
	for _, rec := range sim.RequestLog() {
		g.Expect(rec.ID).To(Equal(id), "counted against the VM")
	}
	g.Expect(sim.Dump().Jobs).To(BeEmpty(), "AttachVmsToTag and DetachVmFromTag are not monitored")
	status, _ := tagDo(g, sim, "PUT", "/vms/"+id+"/tags", "<tag/>")
	g.Expect(status).To(Equal(405))
}
