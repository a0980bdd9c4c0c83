package ovirtsim_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func TestAffinityGroupCRUD(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	cid := clusterID(t, conn, "Default")
	groups := conn.SystemService().ClustersService().ClusterService(cid).AffinityGroupsService()
	a := createVM(t, conn, "worker-a", false)
	b := createVM(t, conn, "worker-b", false)

	add, err := groups.Add().Group(ovirtsdk.NewAffinityGroupBuilder().Name("workers").Description("spread").
		VmsRuleBuilder(ovirtsdk.NewAffinityRuleBuilder().Enabled(true).Positive(false).Enforcing(true)).
		VmsOfAny(ovirtsdk.NewVmBuilder().Id(a).MustBuild()).MustBuild()).Query("correlation_id", "ag-1").Send()
	g.Expect(err).NotTo(HaveOccurred())
	ag := add.MustGroup()
	id := ag.MustId()
	g.Expect(ag.MustHref()).To(Equal("/ovirt-engine/api/clusters/" + cid + "/affinitygroups/" + id))
	g.Expect(ag.MustName()).To(Equal("workers"))
	g.Expect(ag.MustDescription()).To(Equal("spread"))
	g.Expect(ag.MustCluster().MustId()).To(Equal(cid))
	g.Expect(ag.MustPriority()).To(Equal(1.0), "the engine's default priority")
	g.Expect(ag.MustVmsRule()).To(Equal(ovirtsdk.NewAffinityRuleBuilder().Enabled(true).Enforcing(true).Positive(false).MustBuild()))
	g.Expect(ag.MustHostsRule().MustEnabled()).To(BeFalse())
	g.Expect(ag.MustPositive()).To(BeFalse(), "the deprecated flags mirror the VM rule")
	g.Expect(ag.MustEnforcing()).To(BeTrue())
	vms := ag.MustVms()
	g.Expect(vms.Slice()).To(HaveLen(1))
	g.Expect(vms.Slice()[0].MustId()).To(Equal(a))
	g.Expect(vms.Slice()[0].MustHref()).To(Equal("/ovirt-engine/api/vms/" + a))
	_, named := vms.Slice()[0].Name()
	g.Expect(named).To(BeFalse(), "members are references without follow")
	href, _ := vms.Href()
	g.Expect(href).To(Equal("/ovirt-engine/api/clusters/" + cid + "/affinitygroups/" + id + "/vms"))
	jobs, err := conn.SystemService().JobsService().List().Search("correlation_id=ag-1").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobs.MustJobs().Slice()).To(HaveLen(1))

	// The members sub-collection: add, list (with names), refuse a second add, remove.
	members := groups.GroupService(id).VmsService()
	echo, err := members.Add().Vm(ovirtsdk.NewVmBuilder().Id(b).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(echo.MustVm().MustId()).To(Equal(b), "the engine answers with the VM it was sent")
	list, err := members.List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, v := range list.MustVms().Slice() {
		names = append(names, v.MustName())
	}
	g.Expect(names).To(ConsistOf("worker-a", "worker-b"))
	_, err = members.Add().Vm(ovirtsdk.NewVmBuilder().Id(b).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring(`Fault detail is "[Cannot edit Affinity Group. Duplicate VM.]". HTTP response code is "400"`)))
	_, err = members.VmService(b).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = members.VmService(b).Remove().Send()
	g.Expect(err).To(MatchError(ContainSubstring(`Fault detail is "[Cannot edit Affinity Group. Provided VM is invalid (does not exist).]". HTTP response code is "400"`)))

	// Update: rename, soften the rule, replace the members.
	up, err := groups.GroupService(id).Update().Group(ovirtsdk.NewAffinityGroupBuilder().Name("workers-2").
		VmsRuleBuilder(ovirtsdk.NewAffinityRuleBuilder().Enforcing(false)).
		VmsOfAny(ovirtsdk.NewVmBuilder().Id(b).MustBuild()).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(up.MustGroup().MustName()).To(Equal("workers-2"))
	g.Expect(up.MustGroup().MustVmsRule()).To(Equal(ovirtsdk.NewAffinityRuleBuilder().Enabled(true).Enforcing(false).Positive(false).MustBuild()),
		"a rule without enabled and positive keeps its polarity")
	g.Expect(up.MustGroup().MustVms().Slice()).To(HaveLen(1))
	g.Expect(sim.AffinityGroups("Default")).To(ConsistOf(And(HaveField("Name", "workers-2"), HaveField("VMs", []string{"worker-b"}),
		HaveField("VMRule", "negative"), HaveField("VMEnforcing", false))))

	got, err := groups.List().Follow("vms").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.MustGroups().Slice()).To(HaveLen(1))
	g.Expect(got.MustGroups().Slice()[0].MustVms().Slice()[0].MustName()).To(Equal("worker-b"), "follow=vms lists the members by name")

	// Delete: the group goes, its VMs stay.
	_, err = groups.GroupService(id).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = groups.GroupService(id).Get().Send()
	nf, ok := errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
	g.Expect(nf.Error()).NotTo(ContainSubstring("Fault detail"), "a bare 404")
	_, err = groups.GroupService(id).Remove().Send()
	_, ok = errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
	_, found := sim.VM(b)
	g.Expect(found).To(BeTrue())
	empty, err := groups.List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(empty.MustGroups().Slice()).To(BeEmpty())
}

func TestAffinityGroupValidation(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	cid := clusterID(t, conn, "Default")
	other := clusterID(t, conn, "Secondary")
	groups := conn.SystemService().ClustersService().ClusterService(cid).AffinityGroupsService()
	mine := createVM(t, conn, "mine", false)
	theirs := createVMIn(t, conn, "theirs", "Secondary", false)
	detail := func(err error) string {
		t.Helper()
		g.Expect(err).To(HaveOccurred())
		s := err.Error()
		i, j := strings.Index(s, `Fault detail is "`), strings.Index(s, `". HTTP response code is "400"`)
		g.Expect(i).To(BeNumerically(">=", 0), s)
		g.Expect(j).To(BeNumerically(">", i), "want a 400: %s", s)
		return s[i+len(`Fault detail is "`) : j]
	}
	add := func(cluster string, b *ovirtsdk.AffinityGroupBuilder) error {
		_, err := conn.SystemService().ClustersService().ClusterService(cluster).AffinityGroupsService().Add().Group(b.MustBuild()).Send()
		return err
	}
	named := func(n string) *ovirtsdk.AffinityGroupBuilder { return ovirtsdk.NewAffinityGroupBuilder().Name(n) }

	g.Expect(add(cid, named("taken"))).To(Succeed())
	g.Expect(detail(add(cid, named("taken")))).To(Equal("[Cannot add Affinity Group. Affinity Group name already exists.]"))
	g.Expect(detail(add(other, named("taken")))).To(Equal("[Cannot add Affinity Group. Affinity Group name already exists.]"),
		"AffinityGroupDao.getByName is engine-wide: the name is taken in every cluster")
	g.Expect(detail(add(cid, named("")))).To(Equal("[Cannot add Affinity Group. Name field input is too long., Attribute: affinityGroup.name]"),
		"@Size(min = 1) carries AFFINITY_GROUP_NAME_TOO_LONG")
	g.Expect(detail(add(cid, ovirtsdk.NewAffinityGroupBuilder().Description("no name")))).To(Equal("[must not be null, Attribute: affinityGroup.name]"))
	g.Expect(detail(add(cid, named("a b")))).To(Equal("[Cannot add Affinity Group. Name field is invalid., Attribute: affinityGroup.name]"))
	g.Expect(detail(add(cid, named(strings.Repeat("n", 256))))).To(Equal("[Cannot add Affinity Group. Name field input is too long., Attribute: affinityGroup.name]"))
	g.Expect(detail(add(cid, named("cross").VmsOfAny(ovirtsdk.NewVmBuilder().Id(theirs).MustBuild())))).
		To(Equal("[Cannot add Affinity Group. Provided VM resides in another Cluster.]"))
	g.Expect(detail(add(cid, named("ghost").VmsOfAny(ovirtsdk.NewVmBuilder().Id("00000000-0000-0000-0000-00000000dead").MustBuild())))).
		To(Equal("[Cannot add Affinity Group. Provided VM is invalid (does not exist).]"))
	g.Expect(detail(add(cid, named("twice").VmsOfAny(ovirtsdk.NewVmBuilder().Id(mine).MustBuild(), ovirtsdk.NewVmBuilder().Id(mine).MustBuild())))).
		To(Equal("[Cannot add Affinity Group. Duplicate VM.]"))
	g.Expect(detail(add("00000000-0000-0000-0000-00000000beef", named("nowhere")))).To(Equal("[Cannot add Affinity Group. Provided Cluster is invalid.]"))

	id := addGroup(t, conn, cid, "members", false, true)
	members := groups.GroupService(id).VmsService()
	_, err := members.Add().Vm(ovirtsdk.NewVmBuilder().Id("00000000-0000-0000-0000-00000000dead").MustBuild()).Send()
	g.Expect(detail(err)).To(Equal("[The selected VM does not exist.]"))
	_, err = groups.GroupService("00000000-0000-0000-0000-00000000feed").VmsService().Add().Vm(ovirtsdk.NewVmBuilder().Id(mine).MustBuild()).Send()
	g.Expect(detail(err)).To(Equal("[Cannot edit Affinity Group. No matching Affinity Group.]"))
	_, err = members.Add().Vm(ovirtsdk.NewVmBuilder().Id(theirs).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred(), "AddVmToAffinityGroupCommand does not check the VM's cluster")
	_, err = groups.GroupService("00000000-0000-0000-0000-00000000feed").VmsService().List().Send()
	_, ok := errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue(), "got %v", err)

	_, err = groups.GroupService(id).Update().Group(named("taken").MustBuild()).Send()
	g.Expect(detail(err)).To(Equal("[Cannot edit Affinity Group. Affinity Group name already exists.]"))
	_, err = groups.GroupService(id).Update().Group(ovirtsdk.NewAffinityGroupBuilder().ClusterBuilder(ovirtsdk.NewClusterBuilder().Id(other)).MustBuild()).Send()
	g.Expect(detail(err)).To(Equal("[Cannot edit Affinity Group. Cannot change Cluster for Affinity Group.]"))
	_, err = groups.GroupService("00000000-0000-0000-0000-00000000feed").Update().Group(named("x").MustBuild()).Send()
	_, ok = errAs[*ovirtsdk.NotFoundError](err)
	g.Expect(ok).To(BeTrue(), "got %v", err)
}

// The deprecated top-level positive/enforcing, and a rule enabled without a polarity.
func TestAffinityGroupRuleMapping(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	cid := clusterID(t, conn, "Default")
	groups := conn.SystemService().ClustersService().ClusterService(cid).AffinityGroupsService()

	r, err := groups.Add().Group(ovirtsdk.NewAffinityGroupBuilder().Name("old-style").Positive(false).Enforcing(true).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustGroup().MustVmsRule()).To(Equal(ovirtsdk.NewAffinityRuleBuilder().Enabled(true).Enforcing(true).Positive(false).MustBuild()),
		"without <vms_rule> the top-level flags make the VM rule")

	r, err = groups.Add().Group(ovirtsdk.NewAffinityGroupBuilder().Name("no-polarity").
		VmsRuleBuilder(ovirtsdk.NewAffinityRuleBuilder().Enabled(true).Enforcing(true)).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	ag := r.MustGroup()
	g.Expect(ag.MustVmsRule().MustEnabled()).To(BeFalse(), "enabled=true without positive leaves a new group's rule disabled")
	g.Expect(ag.MustVmsRule().MustEnforcing()).To(BeTrue())
	_, has := ag.Positive()
	g.Expect(has).To(BeFalse(), "positive is left out while the VM rule is disabled")

	r, err = groups.Add().Group(ovirtsdk.NewAffinityGroupBuilder().Name("both").Positive(true).
		VmsRuleBuilder(ovirtsdk.NewAffinityRuleBuilder().Positive(false)).Priority(2.5).
		HostsRuleBuilder(ovirtsdk.NewAffinityRuleBuilder().Positive(true).Enforcing(true)).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	ag = r.MustGroup()
	g.Expect(ag.MustVmsRule().MustPositive()).To(BeFalse(), "with <vms_rule> the top-level positive is ignored")
	g.Expect(ag.MustHostsRule()).To(Equal(ovirtsdk.NewAffinityRuleBuilder().Enabled(true).Enforcing(true).Positive(true).MustBuild()))
	g.Expect(ag.MustPriority()).To(Equal(2.5))

	c := httpsClient(sim)
	req, err := newAuthedRequest(sim, "GET", "/clusters/"+cid+"/affinitygroups/"+ag.MustId(), "")
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := c.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	body := readAll(resp)
	g.Expect(body).To(ContainSubstring("<broken>false</broken><priority>2.5</priority>"), "as the engine writes them")
	g.Expect(body).To(ContainSubstring(`<link href="/ovirt-engine/api/clusters/` + cid + `/affinitygroups/` + ag.MustId() + `/vms" rel="vms"/>`))
}

func TestRemovedVMLeavesItsGroups(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	cid := clusterID(t, conn, "Default")
	a := createVM(t, conn, "leaver", false)
	b := createVM(t, conn, "stayer", false)
	one := addGroup(t, conn, cid, "one", false, true, a, b)
	two := addGroup(t, conn, cid, "two", true, false, a)
	_, err := conn.SystemService().VmsService().VmService(a).Remove().Send()
	g.Expect(err).NotTo(HaveOccurred())
	groups := conn.SystemService().ClustersService().ClusterService(cid).AffinityGroupsService()
	for id, want := range map[string][]string{one: {b}, two: {}} {
		r, err := groups.GroupService(id).Get().Send()
		g.Expect(err).NotTo(HaveOccurred())
		var ids []string
		for _, v := range r.MustGroup().MustVms().Slice() {
			ids = append(ids, v.MustId())
		}
		g.Expect(ids).To(ConsistOf(want), "membership cascades with the VM")
	}
	g.Expect(sim.DeleteVM(b)).To(Succeed())
	g.Expect(sim.AffinityGroups("Default")[0].VMs).To(BeEmpty(), "out of band too")
}

// The conventions of the other endpoints hold for the new ones: counters and the request
// log by path template, fault rules with templates, 405 and 404, correlation ids.
func TestAffinityEndpointsFollowTheConventions(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	cid := clusterID(t, conn, "Default")
	id := addGroup(t, conn, cid, "conventions", false, true)
	vm := createVM(t, conn, "member", false)
	members := conn.SystemService().ClustersService().ClusterService(cid).AffinityGroupsService().GroupService(id).VmsService()

	rule, err := ovirtsim.ParseFaultRule("POST:/clusters/{id}/affinitygroups/{id}/vms:503:1:1")
	g.Expect(err).NotTo(HaveOccurred())
	sim.SetFaults(rule)
	_, err = members.Add().Vm(ovirtsdk.NewVmBuilder().Id(vm).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "503"`)))
	g.Expect(sim.AffinityGroups("")[0].VMs).To(BeEmpty(), "the fault replaced the work")
	sim.SetFaults(ovirtsim.FaultRule{Path: "/clusters/{id}/affinitygroups/{id}/vms", Method: "POST", Status: 502, After: true, Count: 1})
	_, err = members.Add().Vm(ovirtsdk.NewVmBuilder().Id(vm).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "502"`)))
	g.Expect(sim.AffinityGroups("")[0].VMs).To(Equal([]string{"member"}), "execute-then-fail did the work")
	sim.SetFaults()
	g.Eventually(sim.Requests).WithTimeout(10 * time.Second).Should(And(
		HaveKeyWithValue(ovirtsim.RequestKey{Method: "POST", Path: "/clusters/{id}/affinitygroups/{id}/vms", Status: 503}, 1),
		HaveKeyWithValue(ovirtsim.RequestKey{Method: "POST", Path: "/clusters/{id}/affinitygroups/{id}/vms", Status: 502}, 1),
		HaveKeyWithValue(ovirtsim.RequestKey{Method: "POST", Path: "/clusters/{id}/affinitygroups", Status: 201}, 1)))

	c := httpsClient(sim)
	do := func(method, path, body string, header ...string) (int, string) {
		req, err := newAuthedRequest(sim, method, path, body)
		g.Expect(err).NotTo(HaveOccurred())
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := c.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, readAll(resp)
	}
	base := "/clusters/" + cid + "/affinitygroups/" + id
	st, _ := do("GET", base+"/vms/"+vm, "")
	g.Expect(st).To(Equal(http.StatusMethodNotAllowed), "a group's VM can only be removed")
	st, _ = do("PATCH", base, "")
	g.Expect(st).To(Equal(http.StatusMethodNotAllowed))
	st, b := do("GET", "/clusters/"+cid+"/affinitygroups/00000000-0000-0000-0000-00000000feed", "")
	g.Expect(st).To(Equal(404))
	g.Expect(b).To(BeEmpty())
	st, b = do("GET", "/clusters/00000000-0000-0000-0000-00000000beef/affinitygroups", "")
	g.Expect(st).To(Equal(200), "GetAffinityGroupsByClusterId of an unknown cluster is an empty list")
	g.Expect(b).To(Equal("<affinity_groups></affinity_groups>"))
	st, b = do("GET", "/clusters/00000000-0000-0000-0000-00000000beef/affinitygroups/"+id, "")
	g.Expect(st).To(Equal(200), "a group is found by its id alone")
	g.Expect(b).To(ContainSubstring(`href="/ovirt-engine/api/clusters/`+cid+`/affinitygroups/`+id+`"`), "under its own cluster")
	st, b = do("POST", base+"/vms", `<vm id="`+vm+`"/>`, "Correlation-Id", strings.Repeat("x", 51))
	g.Expect(st).To(Equal(400))
	g.Expect(b).To(ContainSubstring("Invalid correlation ID"))
	st, b = do("DELETE", base+"/vms/"+vm, "", "Correlation-Id", "leave-1")
	g.Expect(st).To(Equal(200))
	g.Expect(b).To(Equal("<action><status>complete</status></action>"))
	st, b = do("POST", base+"/vms", `<vm><name>member</name></vm>`)
	g.Expect(st).To(Equal(500), "the engine takes only the id (asGuid(null) throws)")
	g.Expect(b).To(ContainSubstring("<fault>"))
	st, b = do("POST", base+"/vms", `<vm id="`+vm+`"/>`)
	g.Expect(st).To(Equal(200))
	g.Expect(b).To(Equal(`<vm id="`+vm+`"></vm>`), "the posted VM, as it came")
	jobs, err := conn.SystemService().JobsService().List().Search("correlation_id=leave-1").Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobs.MustJobs().Slice()).To(HaveLen(1))
	var logged bool
	for _, r := range sim.RequestLog() {
		if r.Method == "DELETE" && r.Path == "/clusters/{id}/affinitygroups/{id}/vms/{id}" {
			logged = true
		}
	}
	g.Expect(logged).To(BeTrue(), "the request log has the template")
	g.Expect(sim.RequestCount("", "/clusters/{id}/affinitygroups/{id}")).To(BeNumerically(">=", 3))
}
