package ovirtsim_test

import (
	"fmt"
	"net/url"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"
)

// markerSearch is the search CAPOV's inventory sends: every VM whose comment holds the owner
// marker, in name order.
const markerSearch = `comment="*capov ovirtmachine=*" sortby name asc`

// createMarkedVMs creates thin VMs from rhcos-4.14 with the owner marker in their comments, in
// the order given (not the name order), and returns their names sorted.
func createMarkedVMs(t *testing.T, conn *ovirtsdk.Connection, names ...string) []string {
	t.Helper()
	for _, n := range names {
		vm := vmBuilder(n, "rhcos-4.14", "Default").
			Comment(fmt.Sprintf("capov ovirtmachine=default/%s uid=%s-uid", n, n)).MustBuild()
		if _, err := conn.SystemService().VmsService().Add().Vm(vm).Send(); err != nil {
			t.Fatalf("creating VM %s: %v", n, err)
		}
	}
	return slices.Sorted(slices.Values(names))
}

// listVMs sends one VM list request; max < 0 sends no max.
func listVMs(g *WithT, conn *ovirtsdk.Connection, search string, max int64, follow string) []*ovirtsdk.Vm {
	req := conn.SystemService().VmsService().List().Search(search)
	if max >= 0 {
		req.Max(max)
	}
	if follow != "" {
		req.Follow(follow)
	}
	r, err := req.Send()
	g.Expect(err).NotTo(HaveOccurred(), "search %q", search)
	vms, ok := r.Vms()
	g.Expect(ok).To(BeTrue())
	return vms.Slice()
}

func TestSearchPagesCoverEveryVMOnceInNameOrder(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	want := createMarkedVMs(t, conn, "m-5", "m-1", "m-7", "m-3", "m-2", "m-6", "m-4")
	createVM(t, conn, "m-0-unowned", false) // no marker: never on a page

	var got []string
	sizes := []int{}
	for page := 1; ; page++ {
		vms := listVMs(g, conn, fmt.Sprintf("%s page %d", markerSearch, page), 3, "")
		got = append(got, names(vms)...)
		sizes = append(sizes, len(vms))
		if len(vms) < 3 {
			break
		}
	}
	g.Expect(got).To(Equal(want), "every marked VM once, in name order")
	g.Expect(sizes).To(Equal([]int{3, 3, 1}), "the last page is short")
	g.Expect(listVMs(g, conn, markerSearch+" page 4", 3, "")).To(BeEmpty(), "past the end")

	// A page size that divides the count: the page after the last full one is empty.
	g.Expect(names(listVMs(g, conn, markerSearch+" page 7", 1, ""))).To(Equal([]string{"m-7"}))
	g.Expect(listVMs(g, conn, markerSearch+" page 8", 1, "")).To(BeEmpty())

	// The Engine's order is its default (vm_name ASC) without sortby too, and desc pages backwards.
	g.Expect(names(listVMs(g, conn, `comment="*capov ovirtmachine=*" page 2`, 3, ""))).To(Equal([]string{"m-4", "m-5", "m-6"}))
	g.Expect(names(listVMs(g, conn, `comment="*capov ovirtmachine=*" sortby name desc page 1`, 3, ""))).
		To(Equal([]string{"m-7", "m-6", "m-5"}))
	// A page alone pages the whole collection.
	g.Expect(names(listVMs(g, conn, "page 1", 2, ""))).To(Equal([]string{"m-0-unowned", "m-1"}))
}

func TestSearchPageWithoutMaxIsTheWholeResultThenNothing(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	want := createMarkedVMs(t, conn, "b", "a", "c")

	// Without max the Engine pages by Integer.MAX_VALUE rows.
	g.Expect(names(listVMs(g, conn, markerSearch+" page 1", -1, ""))).To(Equal(want))
	g.Expect(listVMs(g, conn, markerSearch+" page 2", -1, "")).To(BeEmpty())
	// And max without page is the first page.
	g.Expect(names(listVMs(g, conn, markerSearch, 2, ""))).To(Equal(want[:2]))
}

// TestSearchPageValuesAreReadLikeTheEngine follows SyntaxChecker (states PAGE and PAGE_VALUE,
// getPagePhrase): what it refuses does not fail the request, SearchQuery answers an empty list.
func TestSearchPageValuesAreReadLikeTheEngine(t *testing.T) {
	sim := startSim(t)
	conn := connect(t, sim)
	all := createMarkedVMs(t, conn, "p-1", "p-2", "p-3", "p-4", "p-5")
	createVM(t, conn, "page-vm", false)

	cases := []struct {
		name   string
		search string
		want   []string
	}{
		{"page 0 selects no row", markerSearch + " page 0", nil},
		{"a negative page is an invalid character", markerSearch + " page -1", nil},
		{"a page that is not a number is an invalid character", markerSearch + " page two", nil},
		{"a page keyword without a number is an invalid search", `comment="*capov ovirtmachine=*" page`, nil},
		{"nothing may follow the page value", markerSearch + " page 2 name=p-3", nil},
		{"page must follow a sort direction, not a sort field", `comment="*capov ovirtmachine=*" sortby name page 2`, nil},
		{"page after and is free text twice", `comment="*capov ovirtmachine=*" and page 2`, nil},
		{"the page keyword may be in any case", markerSearch + " PAGE 2", all[2:4]},
		{"leading zeros are read as a number", markerSearch + " page 002", all[2:4]},
		{"the keyword needs no space before the number", markerSearch + " page3", all[4:]},
		{"a page keyword without a number after a direction is page 1", markerSearch + " page", all[:2]},
		{"a character after the digits makes the page 1", markerSearch + " page 3x", all[:2]},
		{"a page beyond int is page 1", markerSearch + " page 99999999999", all[:2]},
		{"a value is never the keyword", `name=page-vm sortby name asc page 1`, []string{"page-vm"}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(names(listVMs(g, conn, tt.search, 2, ""))).To(Equal(orEmpty(tt.want)))
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestSearchCommentMatchesInsideAQuotedValueWithSpaces(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	createMarkedVMs(t, conn, "lower")
	shout := vmBuilder("upper", "rhcos-4.14", "Default").Comment("CAPOV OVIRTMACHINE=default/upper uid=u").MustBuild()
	_, err := conn.SystemService().VmsService().Add().Vm(shout).Send()
	g.Expect(err).NotTo(HaveOccurred())

	// ILIKE by default, LIKE with case_sensitive=true (BaseConditionFieldAutoCompleter.getLikeSyntax).
	g.Expect(names(listVMs(g, conn, markerSearch+" page 1", 10, ""))).To(Equal([]string{"lower", "upper"}))
	r, err := conn.SystemService().VmsService().List().Search(markerSearch + " page 1").Max(10).CaseSensitive(true).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(r.MustVms().Slice())).To(Equal([]string{"lower"}))
	// The '/' and the second '=' of the marker are plain characters inside the quotes.
	g.Expect(names(listVMs(g, conn, `comment="*ovirtmachine=default/lower uid=*"`, -1, ""))).To(Equal([]string{"lower"}))
}

func TestSearchPageListFollowsLinksUnlessFollowIsIgnored(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	createMarkedVMs(t, conn, "f-1", "f-2", "f-3")
	running, ok := sim.VMByName("f-2")
	g.Expect(ok).To(BeTrue())
	_, err := conn.SystemService().VmsService().VmService(running.ID).Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string { st, _ := sim.VM(running.ID); return st.Status }).Should(Equal("up"))

	const follow = "disk_attachments.disk,nics.reported_devices"
	vms := listVMs(g, conn, markerSearch+" page 1", 2, follow)
	g.Expect(names(vms)).To(Equal([]string{"f-1", "f-2"}))
	for _, v := range vms {
		atts := v.MustDiskAttachments().Slice()
		g.Expect(atts).To(HaveLen(1), "%s: disks inline", v.MustName())
		g.Expect(atts[0].MustDisk().MustAlias()).To(Equal("rhcos-4.14_Disk1"))
		g.Expect(v.MustNics().Slice()).NotTo(BeEmpty(), "%s: NICs inline", v.MustName())
	}
	g.Expect(vms[1].MustNics().Slice()[0].MustReportedDevices().Slice()).NotTo(BeEmpty(), "the running VM's guest reports")
	_, hasHost := vms[1].Host()
	g.Expect(hasHost).To(BeTrue(), "a running VM names its host")

	sim.SetIgnoreFollow(true)
	vms = listVMs(g, conn, markerSearch+" page 1", 2, follow)
	g.Expect(names(vms)).To(Equal([]string{"f-1", "f-2"}), "the page is the same")
	for _, v := range vms {
		atts, ok := v.DiskAttachments()
		g.Expect(ok).To(BeTrue())
		g.Expect(atts.Slice()).To(BeEmpty(), "only a link")
		href, ok := atts.Href()
		g.Expect(ok).To(BeTrue())
		g.Expect(href).To(HaveSuffix("/diskattachments"))
		g.Expect(v.MustNics().Slice()).To(BeEmpty())
	}
}

// TestVMSearchByIDsWithOr: the Engine's VM search takes ID (a UUID, the vm_guid column) and OR
// groups (VmConditionFieldAutoCompleter, SyntaxChecker): the answer is exactly the VMs named, an
// unknown id matches nothing, and follow brings their disks inline. The SDK client reads the VMs
// that wait for one rate-limit token this way.
func TestVMSearchByIDsWithOr(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	createMarkedVMs(t, conn, "i-1", "i-2", "i-3")
	first, ok := sim.VMByName("i-1")
	g.Expect(ok).To(BeTrue())
	third, ok := sim.VMByName("i-3")
	g.Expect(ok).To(BeTrue())
	const unknown = "00000000-0000-0000-0000-000000000001"
	vms := listVMs(g, conn, "id="+first.ID+" or id="+unknown+" or id="+third.ID, 3, "disk_attachments.disk")
	g.Expect(names(vms)).To(Equal([]string{"i-1", "i-3"}))
	for _, v := range vms {
		g.Expect(v.MustDiskAttachments().Slice()).To(HaveLen(1), "%s: disks inline", v.MustName())
	}
}

func TestSearchPageOnlyOnVMs(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	p := newInProcess(t, sim)
	rec := p.do("GET", "/templates?search="+url.QueryEscape("name=rhcos* page 1"), "")
	g.Expect(rec.Code).To(Equal(400), "the simulator pages VMs only: %s", rec.Body)
	g.Expect(rec.Body.String()).To(ContainSubstring("page is simulated on Vms only"))
}
