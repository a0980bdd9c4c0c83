package sdk

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// createdVMAnswer is a real Engine's answer to POST /vms: the VM, image_locked.
const createdVMAnswer = `<vm href="/ovirt-engine/api/vms/vm-1" id="vm-1"><name>m1</name><status>image_locked</status>` +
	`<cluster id="cl-1"/><template id="00000000-0000-0000-0000-000000000000"/><original_template id="tpl-1"/></vm>`

func TestCreateVMSendsTheNewSpecFields(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
		if r.Method == "POST" && path == "/vms" {
			writeXML(w, 201, createdVMAnswer)
			return true
		}
		return false
	})
	_, c := front.client(t)
	front.reset() // the connection's GET /api

	spec := ovirt.VMSpec{Name: "m1", ClusterID: "cl-1", TemplateID: "tpl-1", Clone: true, MemoryBytes: 8 * gib,
		GuaranteedMemoryBytes: 4 * gib, CorrelationID: "create-m1",
		TemplateDisks: []ovirt.Disk{{ID: "td-1", Format: "cow", StorageDomainID: "sd-data"}},
		DiskFormat:    ovirt.DiskFormatRaw, DiskSparse: boolPtr(false),
		CustomProperties: []ovirt.CustomProperty{{Name: "sap_agent", Value: "true"}, {Name: "hugepages", Value: "1048576 & <more>"}},
		HighAvailability: &ovirt.HighAvailability{Enabled: true, Priority: 50, LeaseStorageDomainID: "sd-lease", ResumeBehaviour: "kill"},
		Performance: ovirt.Performance{CPUMode: ovirt.CPUModeHostPassthrough, AutoPinningPolicy: ovirt.AutoPinningExisting,
			IOThreads: 2, MultiQueues: boolPtr(true), Ballooning: boolPtr(false)}}
	_, err := c.CreateVM(ctx, spec)
	g.Expect(err).NotTo(HaveOccurred())

	reqs := front.requests()
	g.Expect(reqs).To(HaveLen(1))
	path, rawQuery, _ := strings.Cut(reqs[0], "?")
	g.Expect(path).To(Equal("POST /vms"))
	query, err := url.ParseQuery(rawQuery)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(query).To(Equal(url.Values{"clone": {"true"}, "auto_pinning_policy": {"existing"}, "correlation_id": {"create-m1"}}),
		"the auto pinning policy is a parameter of the add request")
	body := front.body("POST", "/vms")
	for _, part := range []string{
		// The template disk's override: its own domain (no StorageDomainID), the format and allocation asked for.
		`<disk_attachments><disk_attachment><disk id="td-1"><format>raw</format><sparse>false</sparse>` +
			`<storage_domains><storage_domain id="sd-data"></storage_domain></storage_domains></disk></disk_attachment></disk_attachments>`,
		`<custom_properties><custom_property><name>sap_agent</name><value>true</value></custom_property>` +
			`<custom_property><name>hugepages</name><value>1048576 &amp; &lt;more&gt;</value></custom_property></custom_properties>`,
		`<high_availability><enabled>true</enabled><priority>50</priority></high_availability>`,
		`<lease><storage_domain id="sd-lease"></storage_domain></lease>`,
		`<storage_error_resume_behaviour>kill</storage_error_resume_behaviour>`,
		`<cpu><mode>host_passthrough</mode></cpu>`,
		`<io><threads>2</threads></io>`,
		`<multi_queues_enabled>true</multi_queues_enabled>`,
		// Merged with the memory's policy.
		`<memory_policy><ballooning>false</ballooning><guaranteed>4294967296</guaranteed><max>8589934592</max></memory_policy>`,
	} {
		g.Expect(body).To(ContainSubstring(part))
	}
	g.Expect(body).NotTo(ContainSubstring("auto_pinning"), "not in the VM")

	// The zero values send none of it.
	front.reset()
	_, err = c.CreateVM(ctx, ovirt.VMSpec{Name: "m1", ClusterID: "cl-1", TemplateID: "tpl-1", Cores: 2,
		HighAvailability: &ovirt.HighAvailability{}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(front.requests()).To(Equal([]string{"POST /vms?clone=false"}))
	body = front.body("POST", "/vms")
	g.Expect(body).To(ContainSubstring(`<cpu><topology><cores>2</cores></topology></cpu>`))
	g.Expect(body).To(ContainSubstring(`<high_availability><enabled>false</enabled></high_availability>`), "HighAvailability set: sent")
	for _, absent := range []string{"disk_attachments", "custom_properties", "lease", "storage_error_resume_behaviour", "<mode>",
		"<io>", "multi_queues_enabled", "memory_policy", "priority"} {
		g.Expect(body).NotTo(ContainSubstring(absent))
	}
}

// TestDiskOverridesNameADomainForEveryTemplateDisk: with DiskFormat or DiskSparse every template
// disk of a cloned VM gets an override, with StorageDomainID or its own domain.
func TestDiskOverridesNameADomainForEveryTemplateDisk(t *testing.T) {
	tdisks := []ovirt.Disk{{ID: "td-1", Format: "cow", StorageDomainID: "sd-a"}, {ID: "td-2", Format: "raw", StorageDomainID: "sd-b"}}
	type override struct {
		id, sd string
		format ovirtsdk.DiskFormat
		sparse bool
	}
	tests := []struct {
		name   string
		change func(*ovirt.VMSpec)
		want   []override
	}{
		{"a format alone: the template disks' own domains, its allocation rule", func(s *ovirt.VMSpec) { s.DiskFormat = "raw" },
			[]override{{"td-1", "sd-a", "raw", false}, {"td-2", "sd-b", "raw", false}}},
		{"an allocation alone: the template disks' formats", func(s *ovirt.VMSpec) { s.DiskSparse = boolPtr(true) },
			[]override{{"td-1", "sd-a", "cow", true}, {"td-2", "sd-b", "raw", true}}},
		{"both, and a domain", func(s *ovirt.VMSpec) {
			s.StorageDomainID, s.DiskFormat, s.DiskSparse = "sd-x", "cow", boolPtr(true)
		}, []override{{"td-1", "sd-x", "cow", true}, {"td-2", "sd-x", "cow", true}}},
		{"a domain alone: as before", func(s *ovirt.VMSpec) { s.StorageDomainID = "sd-x" },
			[]override{{"td-1", "sd-x", "cow", true}, {"td-2", "sd-x", "raw", false}}},
		{"no clone: no override", func(s *ovirt.VMSpec) { s.Clone = false; s.DiskFormat = "raw"; s.StorageDomainID = "sd-x" }, nil},
		{"nothing to override", func(*ovirt.VMSpec) {}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := ovirt.VMSpec{Name: "m1", ClusterID: "c", TemplateID: "t", Clone: true, TemplateDisks: tdisks}
			tt.change(&spec)
			vm, err := buildVM("CreateVM", spec)
			g.Expect(err).NotTo(HaveOccurred())
			var got []override
			if atts, ok := vm.DiskAttachments(); ok {
				for _, a := range atts.Slice() {
					d, _ := a.Disk()
					var o override
					o.id, _ = d.Id()
					o.format, _ = d.Format()
					o.sparse, _ = d.Sparse()
					sds, _ := d.StorageDomains()
					g.Expect(sds.Slice()).To(HaveLen(1))
					o.sd, _ = sds.Slice()[0].Id()
					got = append(got, o)
				}
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestBuildVMRefusesBadNewFields(t *testing.T) {
	base := ovirt.VMSpec{Name: "m1", ClusterID: "c", TemplateID: "t"}
	tests := []struct {
		name   string
		change func(*ovirt.VMSpec)
		field  string
	}{
		{"an unknown disk format", func(s *ovirt.VMSpec) { s.DiskFormat = "qcow2" }, "DiskFormat"},
		{"a disk format without the template disks", func(s *ovirt.VMSpec) { s.Clone = true; s.DiskFormat = "raw" }, "TemplateDisks"},
		{"an allocation without the template disks", func(s *ovirt.VMSpec) { s.Clone = true; s.DiskSparse = boolPtr(true) }, "TemplateDisks"},
		{"a template disk without a domain and no StorageDomainID", func(s *ovirt.VMSpec) {
			s.Clone, s.DiskFormat, s.TemplateDisks = true, "raw", []ovirt.Disk{{ID: "td-1"}}
		}, "has no storage domain"},
		{"a custom property name with a space", func(s *ovirt.VMSpec) {
			s.CustomProperties = []ovirt.CustomProperty{{Name: "sap agent", Value: "x"}}
		}, "CustomProperties[0].Name"},
		{"an empty custom property name", func(s *ovirt.VMSpec) { s.CustomProperties = []ovirt.CustomProperty{{Value: "x"}} }, "CustomProperties[0].Name"},
		{"a custom property value with ';'", func(s *ovirt.VMSpec) {
			s.CustomProperties = []ovirt.CustomProperty{{Name: "a", Value: "1"}, {Name: "b", Value: "x;c=2"}}
		}, "CustomProperties[1].Value"},
		{"a custom property given twice", func(s *ovirt.VMSpec) {
			s.CustomProperties = []ovirt.CustomProperty{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}}
		}, "CustomProperties[1].Name"},
		{"a negative priority", func(s *ovirt.VMSpec) { s.HighAvailability = &ovirt.HighAvailability{Priority: -1} }, "HighAvailability.Priority"},
		{"an unknown resume behaviour", func(s *ovirt.VMSpec) {
			s.HighAvailability = &ovirt.HighAvailability{ResumeBehaviour: "pause"}
		}, "HighAvailability.ResumeBehaviour"},
		{"an unknown CPU mode", func(s *ovirt.VMSpec) { s.Performance.CPUMode = "passthrough" }, "Performance.CPUMode"},
		{"an unknown auto pinning policy", func(s *ovirt.VMSpec) { s.Performance.AutoPinningPolicy = "pin" }, "Performance.AutoPinningPolicy"},
		{"auto pinning with a topology", func(s *ovirt.VMSpec) { s.Performance.AutoPinningPolicy = "adjust"; s.Sockets = 2 }, "Performance.AutoPinningPolicy"},
		{"negative I/O threads", func(s *ovirt.VMSpec) { s.Performance.IOThreads = -1 }, "Performance.IOThreads"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := base
			tt.change(&spec)
			_, err := buildVM("CreateVM", spec)
			g.Expect(err).To(MatchError(ovirt.ErrInvalid))
			g.Expect(err.Error()).To(ContainSubstring(tt.field))
		})
	}
}

// TestCreateVMRefusedForItsDiskConfiguration: the Engine's 409 for a disk format and allocation
// the domain does not take is ErrInvalid (not a name in use, no lock).
func TestCreateVMRefusedForItsDiskConfiguration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	front.set(func(w http.ResponseWriter, r *http.Request, path, _ string) bool {
		if r.Method == "POST" && path == "/vms" {
			writeFault(w, 409, "[Cannot add VM. Disk configuration (RAW Sparse backup-None) is incompatible with the storage domain type.]")
			return true
		}
		return false
	})
	_, c := front.client(t)
	_, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "m1", ClusterID: "cl-1", TemplateID: "tpl-1", Clone: true,
		TemplateDisks: []ovirt.Disk{{ID: "td-1", StorageDomainID: "sd-1"}}, DiskFormat: "raw", DiskSparse: boolPtr(true)})
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	g.Expect(err).NotTo(MatchError(ovirt.ErrConflict))
	g.Expect(err.Error()).To(ContainSubstring("RAW Sparse"))
}

// TestCreateVMNewFieldsAgainstTheSimulator: what the simulator stores of the new VMSpec fields,
// read back with a separate SDK connection.
func TestCreateVMNewFieldsAgainstTheSimulator(t *testing.T) {
	ctx := context.Background()
	sim := newSim(t, withBlockDomain)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := c.FindCluster(ctx, "Default")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	if err != nil {
		t.Fatal(err)
	}
	fast, err := c.FindStorageDomain(ctx, "fast")
	if err != nil {
		t.Fatal(err)
	}
	block, err := c.FindStorageDomain(ctx, "block")
	if err != nil {
		t.Fatal(err)
	}
	spec := func(name string) ovirt.VMSpec {
		return ovirt.VMSpec{Name: name, ClusterID: cluster.ID, TemplateID: tpl.ID, Clone: true, TemplateDisks: tpl.Disks}
	}

	t.Run("disk format and allocation, in the template disk's own domain", func(t *testing.T) {
		g := NewWithT(t)
		s := spec("fmt-1")
		s.DiskFormat, s.DiskSparse = ovirt.DiskFormatRaw, boolPtr(false)
		vm, err := c.CreateVM(ctx, s)
		g.Expect(err).NotTo(HaveOccurred())
		st, _ := sim.VM(vm.ID)
		g.Expect(st.Disks).To(HaveLen(1))
		g.Expect(st.Disks[0].StorageDomain).To(Equal("data"), "the template disk's domain")
		g.Expect(st.Disks[0].Format).To(Equal("raw"))
		g.Expect(st.Disks[0].Sparse).To(BeFalse())

		s = spec("fmt-2")
		s.StorageDomainID, s.DiskSparse = fast.ID, boolPtr(true)
		vm, err = c.CreateVM(ctx, s)
		g.Expect(err).NotTo(HaveOccurred())
		st, _ = sim.VM(vm.ID)
		g.Expect(st.Disks[0].StorageDomain).To(Equal("fast"))
		g.Expect(st.Disks[0].Format).To(Equal("cow"), "the template disk's format")
		g.Expect(st.Disks[0].Sparse).To(BeTrue())
	})

	t.Run("disk configurations the domain does not take", func(t *testing.T) {
		g := NewWithT(t)
		s := spec("fmt-bad-1")
		s.DiskFormat, s.DiskSparse = ovirt.DiskFormatCow, boolPtr(false)
		_, err := c.CreateVM(ctx, s)
		if err == nil {
			t.Skip("the simulator does not apply ImagesHandler.checkImageConfiguration to cloned disks yet")
		}
		g.Expect(err).To(MatchError(ovirt.ErrInvalid), "cow preallocated: %v", err)
		g.Expect(err).NotTo(MatchError(ovirt.ErrConflict))
		s = spec("fmt-bad-2")
		s.StorageDomainID, s.DiskFormat, s.DiskSparse = block.ID, ovirt.DiskFormatRaw, boolPtr(true)
		_, err = c.CreateVM(ctx, s)
		g.Expect(err).To(MatchError(ovirt.ErrInvalid), "raw sparse on block storage: %v", err)
		_, found := sim.VMByName("fmt-bad-2")
		g.Expect(found).To(BeFalse())
	})

	t.Run("custom properties, high availability, performance", func(t *testing.T) {
		g := NewWithT(t)
		s := spec("perf-1")
		s.CustomProperties = []ovirt.CustomProperty{{Name: "sap_agent", Value: "true"}}
		s.HighAvailability = &ovirt.HighAvailability{Enabled: true, Priority: 50, LeaseStorageDomainID: fast.ID, ResumeBehaviour: "kill"}
		s.Performance = ovirt.Performance{CPUMode: ovirt.CPUModeHostPassthrough, AutoPinningPolicy: ovirt.AutoPinningDisabled,
			IOThreads: 2, MultiQueues: boolPtr(false), Ballooning: boolPtr(false)}
		s.MemoryBytes = 8 * gib
		vm, err := c.CreateVM(ctx, s)
		if err != nil && strings.Contains(err.Error(), "custom") {
			t.Skipf("the simulator refuses the custom property: %v", err)
		}
		g.Expect(err).NotTo(HaveOccurred())
		got := engineVM(t, sim, vm.ID)
		var missing []string
		check := func(what string, ok bool, f func()) {
			if !ok {
				missing = append(missing, what)
				return
			}
			f()
		}
		ha, ok := got.HighAvailability()
		check("high_availability", ok, func() {
			enabled, _ := ha.Enabled()
			g.Expect(enabled).To(BeTrue())
			priority, _ := ha.Priority()
			g.Expect(priority).To(Equal(int64(50)))
		})
		props, ok := got.CustomProperties()
		check("custom_properties", ok && len(props.Slice()) > 0, func() {
			g.Expect(props.Slice()).To(HaveLen(1))
			name, _ := props.Slice()[0].Name()
			g.Expect(name).To(Equal("sap_agent"))
			value, _ := props.Slice()[0].Value()
			g.Expect(value).To(Equal("true"))
		})
		lease, ok := got.Lease()
		check("lease", ok, func() {
			sd, ok := lease.StorageDomain()
			g.Expect(ok).To(BeTrue())
			id, _ := sd.Id()
			g.Expect(id).To(Equal(fast.ID))
		})
		rb, ok := got.StorageErrorResumeBehaviour()
		check("storage_error_resume_behaviour", ok, func() { g.Expect(string(rb)).To(Equal("kill")) })
		var mode ovirtsdk.CpuMode
		if cpu, ok := got.Cpu(); ok {
			mode, _ = cpu.Mode()
		}
		check("cpu.mode", mode != "", func() { g.Expect(string(mode)).To(Equal("host_passthrough")) })
		var threads int64
		if io, ok := got.Io(); ok {
			threads, _ = io.Threads()
		}
		check("io.threads", threads > 0, func() { g.Expect(threads).To(Equal(int64(2))) })
		mq, ok := got.MultiQueuesEnabled()
		check("multi_queues_enabled", ok, func() { g.Expect(mq).To(BeFalse()) })
		mp, ok := got.MemoryPolicy()
		var balloon bool
		if ok {
			balloon, ok = mp.Ballooning()
		}
		check("memory_policy.ballooning", ok, func() {
			g.Expect(balloon).To(BeFalse())
			maxMem, _ := mp.Max()
			g.Expect(maxMem).To(Equal(8*gib), "merged with the memory's policy")
		})
		if len(missing) > 0 {
			t.Skipf("the simulator does not render %s yet", strings.Join(missing, ", "))
		}
	})

	t.Run("auto pinning with a topology is refused before any call", func(t *testing.T) {
		g := NewWithT(t)
		s := spec("pin-1")
		s.Performance.AutoPinningPolicy, s.Cores = ovirt.AutoPinningAdjust, 2
		sim.ResetCounters()
		_, err := c.CreateVM(ctx, s)
		g.Expect(err).To(MatchError(ovirt.ErrInvalid))
		g.Expect(sim.TotalRequests()).To(BeZero())
	})
}
