package sdk

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
)

// What real Engines answer to the affinity-group, host and scheduling requests, sent by an
// engineFront in front of the simulator (texts from ovirt-engine's AppErrors.properties; shapes
// from its restapi resources and mappers, per version).

const (
	groupsPath = "/clusters/cl-1/affinitygroups"
	groupPath  = groupsPath + "/ag-1"
	membersOf  = groupPath + "/vms"
	memberPath = membersOf + "/vm-1"
)

func TestCreateAffinityGroupSendsTheVMRuleInBothModels(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	front.set(func(w http.ResponseWriter, r *http.Request, path, body string) bool {
		if r.Method != "POST" || path != groupsPath {
			return false
		}
		// The Engine's answer: the group as stored, members inline, rules in both models.
		writeXML(w, 201, `<affinity_group href="/ovirt-engine/api/clusters/cl-1/affinitygroups/ag-1" id="ag-1">
  <name>capov-cp</name><description>owner a &amp; b</description>
  <link href="/ovirt-engine/api/clusters/cl-1/affinitygroups/ag-1/vms" rel="vms"/>
  <broken>false</broken><enforcing>true</enforcing>
  <hosts_rule><enabled>false</enabled><enforcing>false</enforcing><positive>false</positive></hosts_rule>
  <positive>false</positive><priority>1</priority>
  <vms_rule><enabled>true</enabled><enforcing>true</enforcing><positive>false</positive></vms_rule>
  <cluster href="/ovirt-engine/api/clusters/cl-1" id="cl-1"/><hosts/><vms/>
</affinity_group>`)
		return true
	})
	e, c := front.client(t)

	ag, err := c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: "cl-1", Name: "capov-cp",
		Description: "owner a & b", Positive: false, Enforcing: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*ag).To(Equal(ovirt.AffinityGroup{ID: "ag-1", Name: "capov-cp", Description: "owner a & b",
		ClusterID: "cl-1", Positive: false, Enforcing: true}))
	// The VM rule enabled in vms_rule (4.1+), the same values in the deprecated top-level fields
	// (the only ones a 4.0 Engine reads; ignored by later ones when vms_rule is there), no host
	// rule, no members, no cluster (the path names it).
	g.Expect(front.body("POST", groupsPath)).To(Equal(`<affinity_group><description>owner a &amp; b</description>` +
		`<enforcing>true</enforcing><hosts_rule><enabled>false</enabled><enforcing>false</enforcing></hosts_rule>` +
		`<name>capov-cp</name><positive>false</positive>` +
		`<vms_rule><enabled>true</enabled><enforcing>true</enforcing><positive>false</positive></vms_rule></affinity_group>`))
	g.Expect(counterValue(e, "requests_total", "CreateAffinityGroup", "2xx")).To(Equal(1.0))

	_, err = c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: "cl-1"})
	g.Expect(err).To(MatchError(ovirt.ErrInvalid), "a name is required")
}

func TestCreateAffinityGroupRefusals(t *testing.T) {
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	tests := []struct {
		name     string
		status   int
		detail   string
		kinds    []error
		notKinds []error
	}{
		// ACTION_TYPE_FAILED_AFFINITY_GROUP_NAME_EXISTS is BAD_PARAMETERS: 400, for a name used
		// in any cluster of the Engine.
		{"a name taken is ErrConflict, though the Engine answers 400", 400,
			"[Cannot add Affinity Group. Affinity Group name already exists.]",
			[]error{ovirt.ErrConflict}, []error{ovirt.ErrInvalid, ovirt.ErrLocked}},
		{"an unknown cluster is ErrNotFound", 400, "[Cannot add Affinity Group. Provided Cluster is invalid.]",
			[]error{ovirt.ErrNotFound}, []error{ovirt.ErrInvalid}},
		{"a name too long stays ErrInvalid", 400, "[Cannot add Affinity Group. Name field input is too long.]",
			[]error{ovirt.ErrInvalid}, []error{ovirt.ErrConflict}},
		{"colliding rules are ErrConflict", 409,
			"[Cannot add Affinity Group. Affinity group rules collision: VM to VM affinity rules collide.]",
			[]error{ovirt.ErrConflict}, []error{ovirt.ErrLocked, ovirt.ErrInvalid}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
				if r.Method == "POST" && path == groupsPath {
					writeFault(w, tt.status, tt.detail)
					return true
				}
				return false
			})
			_, c := front.client(t)
			_, err := c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: "cl-1", Name: "capov-cp", Enforcing: true})
			var oe *ovirt.Error
			g.Expect(errors.As(err, &oe)).To(BeTrue())
			g.Expect(oe.Op).To(Equal("CreateAffinityGroup"))
			g.Expect(oe.Status).To(Equal(tt.status))
			g.Expect(oe.Detail).To(ContainSubstring(strings.Trim(tt.detail, "[]")))
			for _, k := range tt.kinds {
				g.Expect(err).To(MatchError(k))
			}
			for _, k := range tt.notKinds {
				g.Expect(err).NotTo(MatchError(k))
			}
		})
	}
}

func TestUpdateAffinityGroupSendsOnlyEnforcing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	var gone atomic.Bool
	front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
		if r.Method != "PUT" || path != groupPath {
			return false
		}
		if gone.Load() {
			writeEmpty(w, 404) // performUpdate reads the group first
			return true
		}
		writeXML(w, 200, `<affinity_group id="ag-1"><name>capov-cp</name><enforcing>false</enforcing>`+
			`<vms_rule><enabled>true</enabled><enforcing>false</enforcing><positive>false</positive></vms_rule></affinity_group>`)
		return true
	})
	_, c := front.client(t)
	g.Expect(c.UpdateAffinityGroup(ctx, "cl-1", "ag-1", false)).To(Succeed())
	// The Engine maps what is sent onto the stored group: without positive, enabled or vms,
	// the polarity and the members stay.
	g.Expect(front.body("PUT", groupPath)).To(Equal(
		`<affinity_group><enforcing>false</enforcing><vms_rule><enforcing>false</enforcing></vms_rule></affinity_group>`))
	gone.Store(true)
	g.Expect(c.UpdateAffinityGroup(ctx, "cl-1", "ag-1", true)).To(MatchError(ovirt.ErrNotFound))
}

func TestAffinityGroupMembershipAcrossEngineVersions(t *testing.T) {
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	action := `<action><status>complete</status></action>`
	tests := []struct {
		name   string
		method string // POST: AddVMToAffinityGroup, DELETE: RemoveVMFromAffinityGroup
		answer func(w http.ResponseWriter)
		want   error // nil: success
		status int   // of the error
	}{
		{"4.4.5.8+ answers an add with the VM", "POST", func(w http.ResponseWriter) { writeXML(w, 201, `<vm id="vm-1"/>`) }, nil, 0},
		{"older Engines answer an add with the action (BZ 1931932)", "POST", func(w http.ResponseWriter) { writeXML(w, 200, action) }, nil, 0},
		{"a member already there is no error", "POST", func(w http.ResponseWriter) {
			writeFault(w, 400, "[Cannot edit Affinity Group. Duplicate VM.]")
		}, nil, 0},
		{"adding to a group that is gone (4.4.8+) is ErrNotFound", "POST", func(w http.ResponseWriter) {
			writeFault(w, 400, "[Cannot edit Affinity Group. No matching Affinity Group.]")
		}, ovirt.ErrNotFound, 400},
		{"adding to a group that is gone (older) is ErrNotFound", "POST", func(w http.ResponseWriter) { writeEmpty(w, 404) }, ovirt.ErrNotFound, 404},
		{"adding a VM that is gone (4.4.8+) is ErrNotFound", "POST", func(w http.ResponseWriter) {
			writeFault(w, 400, "[The selected VM does not exist.]")
		}, ovirt.ErrNotFound, 400},
		{"adding a VM that is gone (older) is ErrNotFound", "POST", func(w http.ResponseWriter) {
			writeFault(w, 400, "[Cannot edit Affinity Group. Provided VM is invalid (does not exist).]")
		}, ovirt.ErrNotFound, 400},
		{"adding a VM of another cluster is ErrInvalid", "POST", func(w http.ResponseWriter) {
			writeFault(w, 400, "[Cannot edit Affinity Group. Provided VM resides in another Cluster.]")
		}, ovirt.ErrInvalid, 400},

		{"a removal answers the action", "DELETE", func(w http.ResponseWriter) { writeXML(w, 200, action) }, nil, 0},
		{"removing a non-member (older: 404) is no error", "DELETE", func(w http.ResponseWriter) { writeEmpty(w, 404) }, nil, 0},
		{"removing a non-member (4.4.8+) is no error", "DELETE", func(w http.ResponseWriter) {
			writeFault(w, 400, "[Cannot edit Affinity Group. Provided VM is invalid (does not exist).]")
		}, nil, 0},
		{"removing from a group that is gone (4.4.8+) is no error", "DELETE", func(w http.ResponseWriter) {
			writeFault(w, 400, "[Cannot edit Affinity Group. No matching Affinity Group.]")
		}, nil, 0},
		{"removing a VM that is gone is no error", "DELETE", func(w http.ResponseWriter) {
			writeFault(w, 400, "[The selected VM does not exist.]")
		}, nil, 0},
		{"an HTML 404 from a proxy is not taken for a non-member", "DELETE", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(404)
			_, _ = w.Write([]byte("<html><body>Not Found</body></html>"))
		}, errors.New("any"), 404},
		{"a 500 is an error", "DELETE", func(w http.ResponseWriter) { writeFault(w, 500, "boom") }, errors.New("any"), 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
				if (r.Method == "POST" && path == membersOf) || (r.Method == "DELETE" && path == memberPath) {
					tt.answer(w)
					return true
				}
				return false
			})
			e, c := front.client(t)
			front.reset()
			var err error
			op := "AddVMToAffinityGroup"
			if tt.method == "POST" {
				err = c.AddVMToAffinityGroup(ctx, "cl-1", "ag-1", "vm-1")
				g.Expect(front.body("POST", membersOf)).To(Equal(`<vm id="vm-1"></vm>`))
			} else {
				op = "RemoveVMFromAffinityGroup"
				err = c.RemoveVMFromAffinityGroup(ctx, "cl-1", "ag-1", "vm-1")
			}
			g.Expect(front.requests()).To(HaveLen(1), "one request, no probe of the token: %v", front.requests())
			if tt.want == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			var oe *ovirt.Error
			g.Expect(errors.As(err, &oe)).To(BeTrue(), "%v", err)
			g.Expect(oe.Op).To(Equal(op))
			g.Expect(oe.Status).To(Equal(tt.status))
			if tt.want.Error() != "any" {
				g.Expect(err).To(MatchError(tt.want))
			}
			g.Expect(counterValue(e, "requests_total", op, itoa(tt.status))).To(Equal(1.0))
		})
	}
}

func TestRemoveAffinityGroup(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	var removed atomic.Bool
	front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
		if r.Method != "DELETE" || path != groupPath {
			return false
		}
		if removed.Swap(true) {
			writeEmpty(w, 404) // the Engine reads the group before removing it
		} else {
			writeXML(w, 200, `<action><status>complete</status></action>`)
		}
		return true
	})
	_, c := front.client(t)
	g.Expect(c.RemoveAffinityGroup(ctx, "cl-1", "ag-1")).To(Succeed())
	g.Expect(c.RemoveAffinityGroup(ctx, "cl-1", "ag-1")).To(MatchError(ovirt.ErrNotFound))
	g.Expect(c.RemoveAffinityGroup(ctx, "", "ag-1")).To(MatchError(ovirt.ErrInvalid))
}

func TestListAffinityGroupsReadsWhatTheEngineLeftOut(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	front := newEngineFront(t, sim)
	front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
		switch {
		case r.Method == "GET" && path == groupsPath:
			// ag-1: members inline and the 4.1+ rules; ag-2: only the deprecated top-level
			// fields (4.0) and a link for its members; ag-3: a disabled VM rule; ag-4: removed
			// between the list and the read of its members.
			writeXML(w, 200, `<affinity_groups>
<affinity_group id="ag-1"><name>cp</name><link href="/ovirt-engine/api/clusters/cl-1/affinitygroups/ag-1/vms" rel="vms"/>
  <enforcing>true</enforcing><positive>false</positive>
  <vms_rule><enabled>true</enabled><enforcing>true</enforcing><positive>false</positive></vms_rule>
  <cluster id="cl-1"/><vms><vm id="vm-a"/><vm id="vm-b"/></vms></affinity_group>
<affinity_group id="ag-2"><name>old</name><link href="/ovirt-engine/api/clusters/cl-1/affinitygroups/ag-2/vms" rel="vms"/>
  <enforcing>false</enforcing><positive>true</positive><cluster id="cl-1"/></affinity_group>
<affinity_group id="ag-3"><name>off</name><enforcing>true</enforcing>
  <vms_rule><enabled>false</enabled><enforcing>true</enforcing><positive>false</positive></vms_rule>
  <cluster id="cl-1"/><vms><vm id="vm-c"/></vms></affinity_group>
<affinity_group id="ag-4"><name>gone</name><link href="/ovirt-engine/api/clusters/cl-1/affinitygroups/ag-4/vms" rel="vms"/></affinity_group>
</affinity_groups>`)
		case r.Method == "GET" && path == groupsPath+"/ag-2/vms":
			writeXML(w, 200, `<vms><vm href="/ovirt-engine/api/vms/vm-c" id="vm-c"><name>c</name></vm></vms>`)
		case r.Method == "GET" && path == groupsPath+"/ag-4/vms":
			writeEmpty(w, 404)
		case r.Method == "GET" && strings.HasSuffix(path, "/affinitygroups"):
			// Any other cluster: the Engine lists an unknown cluster's groups as none.
			writeXML(w, 200, `<affinity_groups/>`)
		default:
			return false
		}
		return true
	})
	_, c := front.client(t)

	groups, err := c.ListAffinityGroups(ctx, "cl-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups).To(Equal([]ovirt.AffinityGroup{
		{ID: "ag-1", Name: "cp", ClusterID: "cl-1", Positive: false, Enforcing: true, VMIDs: []string{"vm-a", "vm-b"}},
		{ID: "ag-2", Name: "old", ClusterID: "cl-1", Positive: true, Enforcing: false, VMIDs: []string{"vm-c"}},
		{ID: "ag-3", Name: "off", ClusterID: "cl-1", Positive: false, Enforcing: false, VMIDs: []string{"vm-c"}},
	}))
	g.Expect(front.requests()).To(ContainElement("GET "+groupsPath+"?follow=vms"), "members asked inline")
	g.Expect(front.count("GET", groupsPath+"/ag-1/vms")).To(BeZero(), "inline members are taken")
	g.Expect(front.count("GET", groupsPath+"/ag-2/vms")).To(Equal(1))
	g.Expect(front.count("GET", groupsPath+"/ag-4/vms")).To(Equal(1))

	// An empty list is checked against the cluster.
	cl, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	groups, err = c.ListAffinityGroups(ctx, cl.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups).To(BeEmpty())
	_, err = c.ListAffinityGroups(ctx, "no-such-cluster")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	var oe *ovirt.Error
	g.Expect(errors.As(err, &oe)).To(BeTrue())
	g.Expect(oe.Op).To(Equal("ListAffinityGroups"))
	_, err = c.ListAffinityGroups(ctx, "")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
}

// vmAnswer is a running VM as GET /vms/{id}?follow=... returns it (disks inline).
func vmAnswer(id, host string) string {
	hostElem := ""
	status := "down"
	if host != "" {
		hostElem = fmt.Sprintf(`<host href="/ovirt-engine/api/hosts/%s" id="%s"/>`, host, host)
		status = "up"
	}
	return fmt.Sprintf(`<vm href="/ovirt-engine/api/vms/%[1]s" id="%[1]s"><name>%[1]s</name><status>%[2]s</status>%[3]s`+
		`<cluster id="cl-1"/><template id="tpl-1"/>`+
		`<disk_attachments><disk_attachment id="d-%[1]s"><bootable>true</bootable><interface>virtio_scsi</interface>`+
		`<disk id="d-%[1]s"><alias>os</alias><provisioned_size>1073741824</provisioned_size><status>ok</status></disk>`+
		`</disk_attachment></disk_attachments><nics/></vm>`, id, status, hostElem)
}

func TestGetVMNamesItsHostOncePerConnection(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	var mu sync.Mutex
	hostFails := true
	vmHost := map[string]string{"vm-1": "h-1", "vm-2": "h-1", "vm-gone": "h-gone", "vm-hidden": "h-hidden",
		"vm-down": "", "vm-flaky": "h-flaky"}
	front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
		mu.Lock()
		defer mu.Unlock()
		if id, ok := strings.CutPrefix(path, "/vms/"); ok && r.Method == "GET" {
			if host, known := vmHost[id]; known {
				writeXML(w, 200, vmAnswer(id, host))
				return true
			}
		}
		switch path {
		case "/hosts/h-1":
			writeXML(w, 200, `<host href="/ovirt-engine/api/hosts/h-1" id="h-1"><name>host1.example.com</name>`+
				`<address>192.0.2.1</address><status>up</status></host>`)
		case "/hosts/h-gone":
			writeEmpty(w, 404)
		case "/hosts/h-hidden":
			writeFault(w, 403, "User is not authorized to perform this action.")
		case "/hosts/h-flaky":
			if hostFails {
				writeFault(w, 500, "boom")
			} else {
				writeXML(w, 200, `<host id="h-flaky"><name>flaky.example.com</name></host>`)
			}
		default:
			return false
		}
		return true
	})
	e, c := front.client(t)

	vm, err := c.GetVM(ctx, "vm-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.HostID).To(Equal("h-1"))
	g.Expect(vm.HostName).To(Equal("host1.example.com"))
	g.Expect(front.requests()).To(ContainElement("GET /hosts/h-1"))
	vm, err = c.GetVM(ctx, "vm-2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.HostName).To(Equal("host1.example.com"))
	g.Expect(front.count("GET", "/hosts/h-1")).To(Equal(1), "read once per connection")
	g.Expect(counterValue(e, "requests_total", "GetHost", "2xx")).To(Equal(1.0))

	down, err := c.GetVM(ctx, "vm-down")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(down.HostID).To(BeEmpty())
	g.Expect(down.HostName).To(BeEmpty())

	for _, id := range []string{"vm-gone", "vm-hidden"} {
		for range 2 {
			vm, err := c.GetVM(ctx, id)
			g.Expect(err).NotTo(HaveOccurred(), "a host the Engine does not show is no error of GetVM")
			g.Expect(vm.HostID).NotTo(BeEmpty())
			g.Expect(vm.HostName).To(BeEmpty())
		}
	}
	g.Expect(front.count("GET", "/hosts/h-gone")).To(Equal(1), "not asked again")
	g.Expect(front.count("GET", "/hosts/h-hidden")).To(Equal(1), "not asked again")

	_, err = c.GetVM(ctx, "vm-flaky")
	g.Expect(err).To(HaveOccurred(), "the Engine failing is an error")
	var oe *ovirt.Error
	g.Expect(errors.As(err, &oe)).To(BeTrue())
	g.Expect(oe.Op).To(Equal("GetHost"))
	mu.Lock()
	hostFails = false
	mu.Unlock()
	vm, err = c.GetVM(ctx, "vm-flaky")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.HostName).To(Equal("flaky.example.com"), "a failure is not kept")

	// A new connection reads the names again.
	_, c2 := front.client(t)
	front.reset()
	_, err = c2.GetVM(ctx, "vm-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(front.count("GET", "/hosts/h-1")).To(Equal(1))
}

func TestConcurrentGetVMsShareOneHostRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	release := make(chan struct{})
	front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
		switch {
		case strings.HasPrefix(path, "/vms/vm-"):
			writeXML(w, 200, vmAnswer(strings.TrimPrefix(path, "/vms/"), "h-1"))
		case path == "/hosts/h-1":
			<-release
			writeXML(w, 200, `<host id="h-1"><name>host1</name></host>`)
		default:
			return false
		}
		return true
	})
	_, c := front.client(t)
	var wg sync.WaitGroup
	names := make([]string, 10)
	for i := range names {
		wg.Go(func() {
			vm, err := c.GetVM(ctx, fmt.Sprintf("vm-%d", i))
			if err == nil {
				names[i] = vm.HostName
			}
		})
	}
	g.Eventually(func() int { return front.count("GET", "/hosts/h-1") }).Should(Equal(1))
	close(release)
	wg.Wait()
	g.Expect(names).To(HaveEach("host1"))
	g.Expect(front.count("GET", "/hosts/h-1")).To(Equal(1), "one read for ten callers")
}

// schedulingRefusal is the detail of SCHEDULING_ALL_HOSTS_FILTERED_OUT for hosts hosts whose
// every one runs a member of the negative group, as a 4.5 Engine writes it: the filter names no
// group (VmAffinityFilterPolicyUnit passes an empty $affinityRules), and ErrorTranslatorImpl
// resolves $hostName once for the whole list, so every line names the first host.
func schedulingRefusal(hosts int) string {
	parts := []string{"Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:"}
	for range hosts {
		parts = append(parts, "The host host01.example.com did not satisfy internal filter VmAffinityGroups "+
			"because it matched negative affinity rules .")
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func TestStartRefusedByTheScheduler(t *testing.T) {
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	tests := []struct {
		name   string
		status int
		body   string
		detail string
	}{
		{"every host filtered out (409)", 409, "", schedulingRefusal(3)},
		{"as an action fault", 409, "action", schedulingRefusal(3)},
		{"the whole explanation of forty hosts is kept", 409, "", schedulingRefusal(40)},
		{"no host up (400)", 400, "", "[There are no hosts to use. Check that the cluster contains at least one host in Up state.]"},
		{"an older Engine without a running host (409)", 409, "", "[Cannot run VM. There are no available running Hosts in the Host Cluster.]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
				if r.Method != "POST" || path != "/vms/vm-1/start" {
					return false
				}
				if tt.body == "action" {
					var b strings.Builder
					b.WriteString(`<action><fault><reason>Operation Failed</reason><detail>`)
					b.WriteString(tt.detail)
					b.WriteString(`</detail></fault><status>failed</status></action>`)
					writeXML(w, tt.status, b.String())
				} else {
					writeFault(w, tt.status, tt.detail)
				}
				return true
			})
			e, c := front.client(t)
			front.reset()
			err := c.Power(ctx, "vm-1", ovirt.PowerStart)
			g.Expect(err).To(MatchError(ovirt.ErrNoHost))
			g.Expect(err).To(MatchError(ovirt.ErrConflict))
			g.Expect(err).NotTo(MatchError(ovirt.ErrLocked), "nothing to wait out: the constraints must change")
			g.Expect(err).NotTo(MatchError(ovirt.ErrInvalid))
			var oe *ovirt.Error
			g.Expect(errors.As(err, &oe)).To(BeTrue())
			g.Expect(oe.Op).To(Equal("StartVM"))
			g.Expect(oe.Status).To(Equal(tt.status))
			g.Expect(oe.Detail).To(Equal("Operation Failed: "+tt.detail), "the Engine's whole explanation")
			g.Expect(front.requests()).To(Equal([]string{"POST /vms/vm-1/start"}))
			g.Expect(counterValue(e, "requests_total", "StartVM", itoa(tt.status))).To(Equal(1.0))
		})
	}
}
