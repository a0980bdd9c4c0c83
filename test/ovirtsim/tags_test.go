package ovirtsim_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

const rootTagID = "00000000-0000-0000-0000-000000000000"

// tagDo sends a raw API request (basic authentication) and returns the status and body.
func tagDo(g Gomega, sim *ovirtsim.Simulator, method, path, body string, header ...string) (int, string) {
	req, err := newAuthedRequest(sim, method, path, body)
	g.Expect(err).NotTo(HaveOccurred())
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpsClient(sim).Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, readAll(resp)
}

// faultDetail returns the fault detail of an SDK error with this HTTP status.
func faultDetail(g Gomega, err error, status string) string {
	g.Expect(err).To(HaveOccurred())
	s := err.Error()
	i, j := strings.Index(s, `Fault detail is "`), strings.Index(s, `". HTTP response code is "`+status+`"`)
	g.Expect(i).To(BeNumerically(">=", 0), s)
	g.Expect(j).To(BeNumerically(">", i), "want a %s: %s", status, s)
	return s[i+len(`Fault detail is "`) : j]
}

func addTag(g Gomega, conn *ovirtsdk.Connection, b *ovirtsdk.TagBuilder) (*ovirtsdk.Tag, error) {
	r, err := conn.SystemService().TagsService().Add().Tag(b.MustBuild()).Send()
	if err != nil {
		return nil, err
	}
	t, ok := r.Tag()
	g.Expect(ok).To(BeTrue(), "the answer is the tag")
	return t, nil
}

func listTags(g Gomega, conn *ovirtsdk.Connection) []*ovirtsdk.Tag {
	r, err := conn.SystemService().TagsService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	return r.MustTags().Slice()
}

func TestRootTagAlwaysExists(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)

	tags := listTags(g, conn)
	g.Expect(tags).To(HaveLen(1))
	root := tags[0]
	g.Expect(root.MustId()).To(Equal(rootTagID))
	g.Expect(root.MustName()).To(Equal("root"))
	g.Expect(root.MustDescription()).To(Equal("root"))
	_, hasParent := root.Parent()
	g.Expect(hasParent).To(BeFalse(), "the root has no parent")

	st, body := tagDo(g, sim, "GET", "/tags/"+rootTagID, "")
	g.Expect(st).To(Equal(200))
	g.Expect(body).To(Equal(`<tag id="` + rootTagID + `" href="/ovirt-engine/api/tags/` + rootTagID + `">` +
		`<description>root</description><name>root</name></tag>`))
	g.Expect(sim.Tags()).To(BeEmpty(), "Tags leaves the root out")

	sim.Reset()
	g.Expect(listTags(g, connect(t, sim))).To(HaveLen(1), "a reset keeps the root")
}

func TestCreateTagUnderTheRoot(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)

	// go-ovirt writes element text as it is given: the caller escapes it.
	created, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("capov-hb-0123456789abcdef").Description("writer=a &amp; &lt;b&gt;"))
	g.Expect(err).NotTo(HaveOccurred())
	id := created.MustId()
	g.Expect(id).NotTo(BeEmpty())
	g.Expect(created.MustName()).To(Equal("capov-hb-0123456789abcdef"))
	g.Expect(created.MustDescription()).To(Equal("writer=a & <b>"))
	g.Expect(created.MustParent().MustId()).To(Equal(rootTagID), "the root is the default parent")

	st, body := tagDo(g, sim, "GET", "/tags/"+id, "")
	g.Expect(st).To(Equal(200))
	g.Expect(body).To(Equal(`<tag id="` + id + `" href="/ovirt-engine/api/tags/` + id + `">` +
		`<description>writer=a &amp; &lt;b&gt;</description><name>capov-hb-0123456789abcdef</name>` +
		`<parent id="` + rootTagID + `" href="/ovirt-engine/api/tags/` + rootTagID + `"></parent></tag>`))

	st, body = tagDo(g, sim, "POST", "/tags", `<tag><name>bare</name></tag>`)
	g.Expect(st).To(Equal(http.StatusCreated))
	g.Expect(body).NotTo(ContainSubstring("<description>"), "no description given, none answered (TagMapper maps a null)")
	g.Expect(body).To(ContainSubstring(`<parent id="` + rootTagID + `" href="/ovirt-engine/api/tags/` + rootTagID + `"`))

	tags := listTags(g, conn)
	g.Expect(tags).To(HaveLen(3))
	g.Expect(tags[2].MustId()).To(Equal(rootTagID), "the root comes last")
	g.Expect(sim.Tags()).To(ConsistOf(
		ovirtsim.TagState{ID: id, Name: "capov-hb-0123456789abcdef", Description: "writer=a & <b>", Parent: rootTagID},
		HaveField("Name", "bare")))
	g.Expect(sim.Tags()[0].ID).To(Equal(id), "in creation order")
}

func TestCreateTagAnswers201WithALocation(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	req, err := newAuthedRequest(sim, "POST", "/tags", `<tag><name>located</name><description>d</description></tag>`)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := httpsClient(sim).Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	body := readAll(resp)
	g.Expect(resp.StatusCode).To(Equal(http.StatusCreated))
	id := sim.Tags()[0].ID
	g.Expect(resp.Header.Get("Location")).To(Equal("/ovirt-engine/api/tags/" + id))
	g.Expect(body).To(HavePrefix(`<tag id="` + id + `" href="/ovirt-engine/api/tags/` + id + `">`))
}

func TestTagNamesAreUniqueInTheEngine(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)

	_, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("taken"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = addTag(g, conn, ovirtsdk.NewTagBuilder().Name("taken").Description("again"))
	g.Expect(faultDetail(g, err, "409")).To(Equal("[The specified Tag name already exists.]"))
	g.Expect(err).To(MatchError(ContainSubstring(`Fault reason is "Operation Failed"`)))
	_, conflict := errAs[*ovirtsdk.ConflictError](err)
	g.Expect(conflict).To(BeTrue(), "TAGS_SPECIFY_TAG_IS_IN_USE is CONFLICT: go-ovirt's typed 409")
	g.Expect(sim.Tags()).To(HaveLen(1))

	_, err = addTag(g, conn, ovirtsdk.NewTagBuilder().Name("TAKEN"))
	g.Expect(err).NotTo(HaveOccurred(), "GettagsBytag_name compares case and all")

	// The name check reads the database, where the root is not: "root" can be added. Adding puts
	// the new tag's name, then its parent's, in TagsDirector's by-name map, so the answer (the
	// tag found by name afterwards) is the root tag itself; both are listed.
	st, body := tagDo(g, sim, "POST", "/tags", `<tag><name>root</name><description>mine</description></tag>`)
	g.Expect(st).To(Equal(http.StatusCreated))
	g.Expect(body).To(ContainSubstring(`id="` + rootTagID + `"`))
	g.Expect(body).To(ContainSubstring(`<description>root</description>`))
	var roots []string
	for _, tg := range listTags(g, conn) {
		if tg.MustName() == "root" {
			roots = append(roots, tg.MustDescription())
		}
	}
	g.Expect(roots).To(ConsistOf("root", "mine"))
}

func TestTagValidation(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	add := func(b *ovirtsdk.TagBuilder) error {
		_, err := addTag(g, conn, b)
		return err
	}
	named := func(n string) *ovirtsdk.TagBuilder { return ovirtsdk.NewTagBuilder().Name(n) }

	const invalidName = "[Invalid tag name. Only letters, numbers, '-', and '_' are valid characters., Attribute: _tag.name]"
	for _, bad := range []string{"with space", "semi;colon", "slash/", "star*", "quote'", "emoji😀"} {
		g.Expect(faultDetail(g, add(named(bad)), "400")).To(Equal(invalidName), "%q", bad)
	}
	g.Expect(faultDetail(g, add(named("")), "400")).To(Equal("[size must be between 1 and 50, Attribute: _tag.name]"))
	g.Expect(faultDetail(g, add(named(strings.Repeat("n", 51))), "400")).To(Equal("[size must be between 1 and 50, Attribute: _tag.name]"))
	g.Expect(faultDetail(g, add(named(strings.Repeat("𝒜", 26))), "400")).To(Equal("[size must be between 1 and 50, Attribute: _tag.name]"),
		"@Size counts UTF-16 units: 26 letters outside the BMP are 52")
	g.Expect(faultDetail(g, add(named(strings.Repeat("x", 51)+" ")), "400")).To(Equal(
		"[size must be between 1 and 50, Attribute: _tag.name, Invalid tag name. Only letters, numbers, '-', and '_' are valid characters., Attribute: _tag.name]"),
		"every violation is listed")
	g.Expect(faultDetail(g, add(named("desc").Description(strings.Repeat("d", 4001))), "400")).To(
		Equal("[size must be between 0 and 4000, Attribute: _tag.description]"))

	for _, good := range []string{strings.Repeat("n", 50), "a", "capov-hb-0123456789abcdef", "dots.and_under-scores", "ÄÖÜ-élan", "数字9"} {
		g.Expect(add(named(good))).To(Succeed(), "%q", good)
	}
	g.Expect(add(named("long-desc").Description(strings.Repeat("d", 4000)))).To(Succeed())

	err := add(ovirtsdk.NewTagBuilder().Description("no name"))
	g.Expect(err).To(MatchError(ContainSubstring(`Fault reason is "Incomplete parameters"`)))
	g.Expect(faultDetail(g, err, "400")).To(Equal("Tag [name] required for add"))
	st, body := tagDo(g, sim, "POST", "/tags", "not xml")
	g.Expect(st).To(Equal(400))
	g.Expect(body).To(ContainSubstring("Request syntactically incorrect."))
	g.Expect(sim.Tags()).To(HaveLen(7))
}

func TestTagParents(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	tags := conn.SystemService().TagsService()

	parent, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("parent"))
	g.Expect(err).NotTo(HaveOccurred())
	byName, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("by-name").ParentBuilder(ovirtsdk.NewTagBuilder().Name("parent")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byName.MustParent().MustId()).To(Equal(parent.MustId()))
	byID, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("by-id").ParentBuilder(ovirtsdk.NewTagBuilder().Id(byName.MustId())))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byID.MustParent().MustId()).To(Equal(byName.MustId()))

	_, err = addTag(g, conn, ovirtsdk.NewTagBuilder().Name("orphan").ParentBuilder(ovirtsdk.NewTagBuilder().Name("nobody")))
	g.Expect(faultDetail(g, err, "404")).To(Equal("Entity not found: nobody"))
	g.Expect(sim.Tags()).To(HaveLen(3), "nothing added")

	// A parent id TagsDirector does not hold: the tag is saved (the name is taken) but never
	// shown, and the answer cannot find it by name.
	_, err = addTag(g, conn, ovirtsdk.NewTagBuilder().Name("hidden").ParentBuilder(ovirtsdk.NewTagBuilder().Id("00000000-0000-0000-0000-00000000dead")))
	g.Expect(faultDetail(g, err, "404")).To(Equal("Entity not found: hidden"))
	g.Expect(listTags(g, conn)).To(HaveLen(4), "root, parent, by-name, by-id")
	hidden := sim.Tags()[3]
	g.Expect(hidden.Hidden).To(BeTrue())
	_, err = tags.TagService(hidden.ID).Get().Send()
	_, notFound := errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(notFound).To(BeTrue(), "%v", err)
	_, err = addTag(g, conn, ovirtsdk.NewTagBuilder().Name("hidden"))
	g.Expect(faultDetail(g, err, "409")).To(Equal("[The specified Tag name already exists.]"))

	// Moving: not under itself nor under a descendant (MoveTag), the root nowhere.
	_, err = tags.TagService(parent.MustId()).Update().Tag(ovirtsdk.NewTagBuilder().ParentBuilder(ovirtsdk.NewTagBuilder().Id(byID.MustId())).MustBuild()).Send()
	g.Expect(faultDetail(g, err, "409")).To(Equal("[Operation canceled, recursive Tag hierarchy cannot be defined.]"))
	_, err = tags.TagService(rootTagID).Update().Tag(ovirtsdk.NewTagBuilder().ParentBuilder(ovirtsdk.NewTagBuilder().Id(parent.MustId())).MustBuild()).Send()
	g.Expect(faultDetail(g, err, "409")).To(Equal("[Operation canceled, recursive Tag hierarchy cannot be defined.]"))
	r, err := tags.TagService(byID.MustId()).Update().Tag(ovirtsdk.NewTagBuilder().ParentBuilder(ovirtsdk.NewTagBuilder().Name("root")).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustTag().MustParent().MustId()).To(Equal(rootTagID))

	// Removing a tag removes its descendants (RemoveTagCommand deletes the ids TagsDirector lists).
	_, err = tags.TagService(parent.MustId()).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	var left []string
	for _, tg := range sim.Tags() {
		left = append(left, tg.Name)
	}
	g.Expect(left).To(ConsistOf("by-id", "hidden"), "by-name went with its parent")
}

func TestGetTag(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	created, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("got").Description("d"))
	g.Expect(err).NotTo(HaveOccurred())

	r, err := conn.SystemService().TagsService().TagService(created.MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustTag().MustName()).To(Equal("got"))
	g.Expect(r.MustTag().MustDescription()).To(Equal("d"))

	st, body := tagDo(g, sim, "GET", "/tags/00000000-0000-0000-0000-00000000feed", "")
	g.Expect(st).To(Equal(404))
	g.Expect(body).To(BeEmpty(), "a missing entity is a bare 404")
	_, err = conn.SystemService().TagsService().TagService("00000000-0000-0000-0000-00000000feed").Get().Send()
	_, notFound := errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(notFound).To(BeTrue(), "%v", err)
}

func TestUpdateTag(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	tags := conn.SystemService().TagsService()
	hb, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("capov-hb-0123456789abcdef").Description("seq=1"))
	g.Expect(err).NotTo(HaveOccurred())
	other, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("other"))
	g.Expect(err).NotTo(HaveOccurred())
	update := func(id string, b *ovirtsdk.TagBuilder) (*ovirtsdk.Tag, error) {
		r, err := tags.TagService(id).Update().Tag(b.MustBuild()).Send()
		if err != nil {
			return nil, err
		}
		return r.MustTag(), nil
	}

	got, err := update(hb.MustId(), ovirtsdk.NewTagBuilder().Description("seq=2 &amp; more"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.MustDescription()).To(Equal("seq=2 & more"))
	g.Expect(got.MustName()).To(Equal("capov-hb-0123456789abcdef"), "what the body leaves out stays")
	g.Expect(got.MustParent().MustId()).To(Equal(rootTagID))
	r, err := tags.TagService(hb.MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustTag().MustDescription()).To(Equal("seq=2 & more"))

	st, body := tagDo(g, sim, "PUT", "/tags/"+hb.MustId(), `<tag><description></description></tag>`)
	g.Expect(st).To(Equal(200))
	g.Expect(body).To(ContainSubstring("<description></description>"), "an empty description is set, not left out")

	got, err = update(other.MustId(), ovirtsdk.NewTagBuilder().Name("renamed"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.MustName()).To(Equal("renamed"))
	_, err = update(other.MustId(), ovirtsdk.NewTagBuilder().Name("capov-hb-0123456789abcdef"))
	g.Expect(faultDetail(g, err, "409")).To(Equal("[The specified Tag name already exists.]"), "UpdateTagCommand: a name another tag has")
	_, err = update(other.MustId(), ovirtsdk.NewTagBuilder().Name("renamed").Description("same name is fine"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = update(other.MustId(), ovirtsdk.NewTagBuilder().Name("bad name"))
	g.Expect(faultDetail(g, err, "400")).To(Equal("[Invalid tag name. Only letters, numbers, '-', and '_' are valid characters., Attribute: _tag.name]"))
	_, err = update(other.MustId(), ovirtsdk.NewTagBuilder().Description(strings.Repeat("d", 4001)))
	g.Expect(faultDetail(g, err, "400")).To(Equal("[size must be between 0 and 4000, Attribute: _tag.description]"))

	st, body = tagDo(g, sim, "PUT", "/tags/00000000-0000-0000-0000-00000000feed", `<tag><description>x</description></tag>`)
	g.Expect(st).To(Equal(404))
	g.Expect(body).To(BeEmpty(), "BackendTagResource.update gets the tag first")
	_, err = update("00000000-0000-0000-0000-00000000feed", ovirtsdk.NewTagBuilder().Description("x"))
	_, notFound := errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(notFound).To(BeTrue(), "%v", err)
}

// The root tag is read-only: not through TAGS_CANNOT_EDIT_READONLY_TAG, which UpdateTagCommand
// only reaches with the tag's database row in hand, but because the root has no row.
func TestRootTagIsReadOnly(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	root := conn.SystemService().TagsService().TagService(rootTagID)
	_, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("existing"))
	g.Expect(err).NotTo(HaveOccurred())

	_, err = root.Update().Tag(ovirtsdk.NewTagBuilder().Description("mine").MustBuild()).Send()
	g.Expect(faultDetail(g, err, "500")).To(Equal("[General command validation failure.]"), "CAN_DO_ACTION_GENERAL_FAILURE is INTERNAL_ERROR")
	_, err = root.Update().Tag(ovirtsdk.NewTagBuilder().Name("renamed-root").MustBuild()).Send()
	g.Expect(faultDetail(g, err, "500")).To(Equal("[General command validation failure.]"))
	_, err = root.Update().Tag(ovirtsdk.NewTagBuilder().Name("existing").MustBuild()).Send()
	g.Expect(faultDetail(g, err, "409")).To(Equal("[The specified Tag name already exists.]"), "the name check comes first")
	_, err = root.Remove().Send()
	g.Expect(faultDetail(g, err, "400")).To(Equal("[Cannot remove tag. Tag does not exist.]"), "RemoveTagCommand reads the database too")

	r, err := root.Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustTag().MustName()).To(Equal("root"))
	g.Expect(r.MustTag().MustDescription()).To(Equal("root"))
}

func TestRemoveTag(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	created, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("doomed"))
	g.Expect(err).NotTo(HaveOccurred())

	st, body := tagDo(g, sim, "DELETE", "/tags/"+created.MustId(), "")
	g.Expect(st).To(Equal(200))
	g.Expect(body).To(Equal("<action><status>complete</status></action>"))
	g.Expect(sim.Tags()).To(BeEmpty())
	st, body = tagDo(g, sim, "DELETE", "/tags/"+created.MustId(), "")
	g.Expect(st).To(Equal(404))
	g.Expect(body).To(BeEmpty(), "BackendTagResource.remove gets the tag first")
	_, err = addTag(g, conn, ovirtsdk.NewTagBuilder().Name("doomed"))
	g.Expect(err).NotTo(HaveOccurred(), "the name is free again")
}

func TestTagListOrderIsNotStable(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	for _, n := range []string{"t1", "t2", "t3", "t4", "t5", "t6"} {
		_, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name(n))
		g.Expect(err).NotTo(HaveOccurred())
	}
	orders := map[string]bool{}
	for range 10 {
		var names []string
		for _, tg := range listTags(g, conn) {
			names = append(names, tg.MustName())
		}
		g.Expect(names).To(HaveLen(7))
		g.Expect(names[6]).To(Equal("root"), "BackendTagsResource.list adds the root after the others")
		orders[strings.Join(names, ",")] = true
	}
	g.Expect(len(orders)).To(BeNumerically(">", 1), "TagsDirector's hash map has no order a client could rely on")
}

// The conventions of the other endpoints hold for /tags: counters and the request log by path
// template, fault rules, 405, correlation ids, the admin endpoint and the state dump.
func TestTagEndpointsFollowTheConventions(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	tags := conn.SystemService().TagsService()

	sim.SetFaults(ovirtsim.FaultRule{Method: "POST", Path: "/tags", Status: 503, Count: 1})
	_, err := addTag(g, conn, ovirtsdk.NewTagBuilder().Name("faulted"))
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "503"`)))
	g.Expect(sim.Tags()).To(BeEmpty(), "the fault replaced the work")
	sim.SetFaults(ovirtsim.FaultRule{Method: "POST", Path: "/tags", Status: 502, After: true, Count: 1})
	_, err = addTag(g, conn, ovirtsdk.NewTagBuilder().Name("faulted"))
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "502"`)))
	g.Expect(sim.Tags()).To(HaveLen(1), "execute-then-fail did the work")
	id := sim.Tags()[0].ID
	rule, err := ovirtsim.ParseFaultRule("PUT:/tags/{id}:500:1:1")
	g.Expect(err).NotTo(HaveOccurred())
	sim.SetFaults(rule)
	_, err = tags.TagService(id).Update().Tag(ovirtsdk.NewTagBuilder().Description("x").MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "500"`)))
	sim.SetFaults()
	_, err = tags.TagService(id).Update().Tag(ovirtsdk.NewTagBuilder().Description("y").MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = tags.TagService(id).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	listTags(g, conn)

	g.Eventually(sim.Requests).WithTimeout(10 * time.Second).Should(And(
		HaveKeyWithValue(ovirtsim.RequestKey{Method: "POST", Path: "/tags", Status: 503}, 1),
		HaveKeyWithValue(ovirtsim.RequestKey{Method: "POST", Path: "/tags", Status: 502}, 1),
		HaveKeyWithValue(ovirtsim.RequestKey{Method: "PUT", Path: "/tags/{id}", Status: 500}, 1),
		HaveKeyWithValue(ovirtsim.RequestKey{Method: "PUT", Path: "/tags/{id}", Status: 200}, 1),
		HaveKeyWithValue(ovirtsim.RequestKey{Method: "GET", Path: "/tags/{id}", Status: 200}, 1),
		HaveKeyWithValue(ovirtsim.RequestKey{Method: "GET", Path: "/tags", Status: 200}, 1)))
	g.Expect(sim.RequestCount("PUT", "/tags/{id}")).To(Equal(2))
	var logged bool
	for _, r := range sim.RequestLog() {
		if r.Method == "PUT" && r.Path == "/tags/{id}" && r.Status == 200 {
			logged = true
		}
	}
	g.Expect(logged).To(BeTrue(), "the request log has the template")

	st, _ := tagDo(g, sim, "PATCH", "/tags/"+id, "")
	g.Expect(st).To(Equal(http.StatusMethodNotAllowed))
	st, _ = tagDo(g, sim, "DELETE", "/tags", "")
	g.Expect(st).To(Equal(http.StatusMethodNotAllowed))
	st, body := tagDo(g, sim, "POST", "/tags", `<tag><name>c</name></tag>`, "Correlation-Id", strings.Repeat("x", 51))
	g.Expect(st).To(Equal(400))
	g.Expect(body).To(ContainSubstring("Invalid correlation ID"))
	st, _ = tagDo(g, sim, "POST", "/tags", `<tag><name>c</name></tag>`, "Correlation-Id", "tag-1")
	g.Expect(st).To(Equal(http.StatusCreated))
	jobs, err := conn.SystemService().JobsService().List().Search("correlation_id=tag-1").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobs.MustJobs().Slice()).To(BeEmpty(), "AddTag is not a monitored action: no job")

	st, b := admin(t, sim, "GET", "/sim/tags", "")
	g.Expect(st).To(Equal(200))
	var listed []ovirtsim.TagState
	g.Expect(json.Unmarshal([]byte(b), &listed)).To(Succeed())
	g.Expect(listed).To(Equal(sim.Tags()))
	g.Expect(sim.Dump().Tags).To(Equal(sim.Tags()))
}
