package sdk

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/fake"
	"github.com/capov/capov/test/ovirtsim"
)

// marker is what the manager lists by: the start of every owner marker.
const marker = "capov ovirtmachine="

// createOwnedVMs creates thin VMs from rhcos-4.14 in Default, in the order given, with an owner
// marker in their comments, and returns their ids by name.
func createOwnedVMs(t *testing.T, c ovirt.Client, names ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	cluster, err := c.FindCluster(ctx, "Default")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, n := range names {
		vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: n, ClusterID: cluster.ID, TemplateID: tpl.ID,
			Comment: fmt.Sprintf("%sdefault/%s uid=%s-uid", marker, n, n)})
		if err != nil {
			t.Fatalf("creating %s: %v", n, err)
		}
		ids[n] = vm.ID
	}
	return ids
}

// listClient returns a simulator like newSim's and a connected client of a new Factory.
func listClient(t *testing.T) (*ovirtsim.Simulator, *env, ovirt.Client) {
	t.Helper()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(context.Background(), e.cfg)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	return sim, e, c
}

// requestsSince returns the requests the simulator logged that arrived after mark, as
// "METHOD /path". The simulator logs a request once its handler returned, just after the client
// got the answer: poll it (Eventually) rather than reading it once.
func requestsSince(sim *ovirtsim.Simulator, mark time.Time) []string {
	out := []string{}
	for _, r := range sim.RequestLog() {
		if r.Start.After(mark) {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

func vmNames(vms []ovirt.VM) []string {
	out := []string{}
	for _, v := range vms {
		out = append(out, v.Name)
	}
	return out
}

func TestListVMsPagesThroughTheOwnedVMsInNameOrder(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim, e, c := listClient(t)
	createOwnedVMs(t, c, "w-3", "w-1", "w-5", "w-2", "w-4")
	cluster, _ := c.FindCluster(ctx, "Default")
	tpl, _ := c.FindTemplate(ctx, "rhcos-4.14", "")
	for name, comment := range map[string]string{"a-unowned": "someone else's", "a-shouting": "CAPOV OVIRTMACHINE=default/x uid=y"} {
		_, err := c.CreateVM(ctx, ovirt.VMSpec{Name: name, ClusterID: cluster.ID, TemplateID: tpl.ID, Comment: comment})
		g.Expect(err).NotTo(HaveOccurred())
	}

	mark := time.Now()
	var got []string
	var sizes []int
	for page := 1; ; page++ {
		p, err := c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: page, PageSize: 2})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Complete).To(BeTrue())
		for _, vm := range p.VMs {
			g.Expect(vm.Comment).To(HavePrefix(marker))
			g.Expect(vm.Disks).To(HaveLen(1), "%s: disks inline", vm.Name)
			g.Expect(vm.Disks[0].Alias).To(Equal("rhcos-4.14_Disk1"))
			g.Expect(vm.Disks[0].ProvisionedSize).To(Equal(16 * gib))
			g.Expect(vm.NICs).NotTo(BeEmpty(), "%s: NICs inline", vm.Name)
			g.Expect(vm.NICs[0].MAC).NotTo(BeEmpty())
			g.Expect(vm.ClusterID).To(Equal(cluster.ID))
		}
		got = append(got, vmNames(p.VMs)...)
		sizes = append(sizes, len(p.VMs))
		if len(p.VMs) < 2 {
			break
		}
	}
	g.Expect(got).To(Equal([]string{"w-1", "w-2", "w-3", "w-4", "w-5"}), "each owned VM once, in name order")
	g.Expect(sizes).To(Equal([]int{2, 2, 1}))
	g.Eventually(func() []string { return requestsSince(sim, mark) }).
		Should(Equal([]string{"GET /vms", "GET /vms", "GET /vms"}), "one engine call per page")
	g.Expect(counterValue(e, "requests_total", "ListVMs", "2xx")).To(Equal(3.0))

	past, err := c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: 4, PageSize: 2})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(past.VMs).To(BeEmpty())
	g.Expect(past.VMs).NotTo(BeNil())
	g.Expect(past.Complete).To(BeTrue())

	one, err := c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker + "default/w-4 ", Page: 1, PageSize: ovirt.MaxVMPageSize})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmNames(one.VMs)).To(Equal([]string{"w-4"}), "a marker's '/', '=' and spaces are plain text")
}

// TestListVMsAsksTheEngineForOneCaseSensitivePage checks the request on the wire, and that the
// client-side filter keeps only VMs whose comment holds the text when the answer has more (an
// engine or proxy that ignores case_sensitive).
func TestListVMsAsksTheEngineForOneCaseSensitivePage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	front := newEngineFront(t, sim)
	_, c := front.client(t)
	createOwnedVMs(t, c, "v-1", "v-2")
	cluster, _ := c.FindCluster(ctx, "Default")
	tpl, _ := c.FindTemplate(ctx, "rhcos-4.14", "")
	_, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "v-0", ClusterID: cluster.ID, TemplateID: tpl.ID,
		Comment: "CAPOV OVIRTMACHINE=default/v-0 uid=z"})
	g.Expect(err).NotTo(HaveOccurred())

	front.reset()
	p, err := c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: 1, PageSize: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmNames(p.VMs)).To(Equal([]string{"v-1", "v-2"}))
	reqs := front.requests()
	g.Expect(reqs).To(HaveLen(1))
	path, rawQuery, _ := strings.Cut(reqs[0], "?")
	g.Expect(path).To(Equal("GET /vms"))
	query, err := url.ParseQuery(rawQuery)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(query).To(Equal(url.Values{
		"search":         {`comment="*capov ovirtmachine=*" sortby name asc page 1`},
		"max":            {"10"},
		"case_sensitive": {"true"},
		"follow":         {"disk_attachments.disk,nics.reported_devices,tags,host"},
	}))

	// An engine that ignores case_sensitive matches v-0 too (ILIKE): the client drops it.
	front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
		if r.Method != http.MethodGet || path != "/vms" {
			return false
		}
		q := r.URL.Query()
		q.Del("case_sensitive")
		r.URL.RawQuery = q.Encode()
		sim.Handler().ServeHTTP(w, r)
		return true
	})
	p, err = c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: 1, PageSize: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmNames(p.VMs)).To(Equal([]string{"v-1", "v-2"}), "v-0's comment does not hold the text")
}

func TestListVMsWithFollowIgnoredIsIncompleteAndCarriesNoCollections(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim, _, c := listClient(t)
	ids := createOwnedVMs(t, c, "i-1", "i-2")
	g.Expect(c.Power(ctx, ids["i-1"], ovirt.PowerStart)).To(Succeed())

	full, err := c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: 1, PageSize: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(full.Complete).To(BeTrue())
	g.Expect(full.VMs[0].ReportedDevices).NotTo(BeEmpty(), "the running VM's guest agent reports, inline")

	sim.SetIgnoreFollow(true)
	mark := time.Now()
	p, err := c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: 1, PageSize: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Complete).To(BeFalse())
	g.Expect(vmNames(p.VMs)).To(Equal([]string{"i-1", "i-2"}))
	for _, vm := range p.VMs {
		g.Expect(vm.Disks).To(BeEmpty())
		g.Expect(vm.NICs).To(BeEmpty())
		g.Expect(vm.ReportedDevices).To(BeEmpty())
		g.Expect(vm.ID).To(Equal(ids[vm.Name]))
		g.Expect(vm.Comment).To(HavePrefix(marker))
	}
	g.Expect(p.VMs[0].Status).To(Equal(ovirt.VMStatusUp))
	g.Expect(p.VMs[0].HostID).NotTo(BeEmpty(), "the host is a fact without follow")
	g.Eventually(func() []string { return requestsSince(sim, mark) }).
		Should(Equal([]string{"GET /vms"}), "no per-VM fallback: the caller decides what to read")

	// A page where only one VM came without disks (a proxy that dropped one) is incomplete too,
	// and no VM of it keeps its collections.
	sim.SetIgnoreFollow(false)
	g.Expect(sim.DetachDisk(ids["i-2"], full.VMs[1].Disks[0].ID)).To(Succeed())
	p, err = c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: 1, PageSize: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Complete).To(BeFalse())
	g.Expect(p.VMs[0].Disks).To(BeEmpty())
	g.Expect(p.VMs[0].NICs).To(BeEmpty())
	g.Expect(p.VMs[0].ReportedDevices).To(BeEmpty())
}

func TestListVMsRefusesInvalidQueriesBeforeAnyRequest(t *testing.T) {
	ctx := context.Background()
	sim, _, c := listClient(t)

	cases := []struct {
		name  string
		q     ovirt.VMQuery
		field string
	}{
		{"an empty filter", ovirt.VMQuery{Page: 1, PageSize: 10}, "CommentContains"},
		{"a double quote the search cannot quote", ovirt.VMQuery{CommentContains: `a"b`, Page: 1, PageSize: 10}, "CommentContains"},
		{"a single quote the engine refuses", ovirt.VMQuery{CommentContains: "a'b", Page: 1, PageSize: 10}, "CommentContains"},
		{"a semicolon the engine refuses", ovirt.VMQuery{CommentContains: "a;b", Page: 1, PageSize: 10}, "CommentContains"},
		{"a backslash the engine escapes unevenly", ovirt.VMQuery{CommentContains: `a\`, Page: 1, PageSize: 10}, "CommentContains"},
		{"a wildcard", ovirt.VMQuery{CommentContains: "capov*", Page: 1, PageSize: 10}, "CommentContains"},
		{"page 0", ovirt.VMQuery{CommentContains: marker, Page: 0, PageSize: 10}, "Page"},
		{"a negative page", ovirt.VMQuery{CommentContains: marker, Page: -1, PageSize: 10}, "Page"},
		{"a page size of 0", ovirt.VMQuery{CommentContains: marker, Page: 1}, "PageSize"},
		{"a page size above the maximum", ovirt.VMQuery{CommentContains: marker, Page: 1, PageSize: ovirt.MaxVMPageSize + 1}, "PageSize"},
	}
	for _, tt := range cases {
		t.Run(tt.name+" is refused without a request", func(t *testing.T) {
			g := NewWithT(t)
			mark := time.Now()
			_, err := c.ListVMs(ctx, tt.q)
			g.Expect(err).To(MatchError(ovirt.ErrInvalid))
			g.Expect(err.Error()).To(ContainSubstring(tt.field + " "))
			var oe *ovirt.Error
			g.Expect(errors.As(err, &oe)).To(BeTrue())
			g.Expect(oe.Op).To(Equal("ListVMs"))
			g.Consistently(func() []string { return requestsSince(sim, mark) }).WithTimeout(20 * time.Millisecond).Should(BeEmpty())
			// Reconciler tests see the same refusal from the fake.
			_, fakeErr := fake.NewClient().ListVMs(ctx, tt.q)
			var fe *ovirt.Error
			g.Expect(errors.As(fakeErr, &fe)).To(BeTrue())
			g.Expect(fe.Detail).To(Equal(oe.Detail))
		})
	}
}

// TestListVMsNamesHostsInlineOrOncePerSession: the page follows the host links, so an inventory
// after a start reads no host; an Engine that ignores follow costs one GET per host and session.
func TestListVMsNamesHostsInlineOrOncePerSession(t *testing.T) {
	for _, ignoreFollow := range []bool{false, true} {
		t.Run(fmt.Sprintf("follow ignored %t", ignoreFollow), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			sim, _, c := listClient(t)
			ids := createOwnedVMs(t, c, "h-1", "h-2", "h-3", "h-4", "h-5")
			hosts := map[string]bool{}
			for _, id := range ids {
				g.Expect(c.Power(ctx, id, ovirt.PowerStart)).To(Succeed())
			}
			for _, id := range ids {
				h, running := sim.VMHost(id)
				g.Expect(running).To(BeTrue())
				hosts[h] = true
			}
			g.Expect(len(hosts)).To(BeNumerically("<", len(ids)), "some VMs share a host")
			sim.SetIgnoreFollow(ignoreFollow)

			mark := time.Now()
			p, err := c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: 1, PageSize: 10})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.VMs).To(HaveLen(len(ids)))
			for _, vm := range p.VMs {
				h, _ := sim.VMHost(vm.ID)
				g.Expect(vm.HostName).To(Equal(h), vm.Name)
				g.Expect(vm.HostID).NotTo(BeEmpty())
			}
			hostGets := func() int {
				n := 0
				for _, r := range requestsSince(sim, mark) {
					if r == "GET /hosts/{id}" {
						n++
					}
				}
				return n
			}
			if ignoreFollow {
				g.Eventually(hostGets).Should(Equal(len(hosts)), "one GET per host, not per VM")
			} else {
				g.Consistently(hostGets).WithTimeout(200*time.Millisecond).Should(BeZero(), "the hosts come inline")
			}

			mark = time.Now()
			_, err = c.ListVMs(ctx, ovirt.VMQuery{CommentContains: marker, Page: 1, PageSize: 10})
			g.Expect(err).NotTo(HaveOccurred())
			got, err := c.GetVM(ctx, ids["h-1"])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.HostName).NotTo(BeEmpty())
			g.Consistently(hostGets).WithTimeout(100*time.Millisecond).Should(BeZero(), "the session's cache, shared with GetVM")
		})
	}
}
