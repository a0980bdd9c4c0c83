package ovirtsim_test

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/test/ovirtsim"
)

var update = flag.Bool("update", false, "rewrite seeds/demo.json from DemoSeed()")

func TestDemoSeedFileEqualsDemoSeed(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join("seeds", "demo.json")
	if *update {
		b, err := json.MarshalIndent(ovirtsim.DemoSeed(), "", "  ")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.WriteFile(path, append(b, '\n'), 0o644)).To(Succeed())
	}
	s, err := ovirtsim.LoadSeed(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(Equal(ovirtsim.DemoSeed()), "run go test ./test/ovirtsim -run TestDemoSeedFile -update")
}

func TestSeedJSONRoundTripsDurationsAsStrings(t *testing.T) {
	g := NewWithT(t)
	in := &ovirtsim.Seed{
		TokenTTL: ovirtsim.Duration(90 * time.Second),
		Timings:  ovirtsim.Timings{ImageLock: 2 * time.Second, CloneFactor: 3, GuestAgentDelay: 5 * time.Second},
		Latency:  []ovirtsim.LatencyRule{{Method: "GET", Path: "/vms/{id}", Min: time.Millisecond, Max: 3 * time.Millisecond}},
		Faults: []ovirtsim.FaultRule{{Method: "POST", Path: "/vms", Status: 500, Rate: 0.5, Count: 2, Hang: time.Second, Detail: "boom"},
			{Method: "PUT", Path: "/vms/{id}/diskattachments/{id}", After: true, Mode: ovirtsim.FaultModeDrop}},
		MaxVMNameLength: 40,
		Version:         "4.4.10",
	}
	in.Timings.NoAgentPoweringUp = 7 * time.Second
	in.Templates = []ovirtsim.Template{{Name: "t", NoGuestAgent: true, Disks: []ovirtsim.TemplateDisk{
		{SizeGB: 1, StorageDomain: "a", StorageDomains: []string{"b", "c"}}}}}
	in.GuestInterfaces = &ovirtsim.GuestInterfaces{Kubernetes: false, ServiceIPs: 5,
		Extra: []ovirtsim.GuestInterface{{Name: "cali0", MAC: "ee:ee:ee:ee:ee:ee", IPs: []string{"192.168.1.1"}}}}
	in.IgnoreFollow = true
	b, err := json.Marshal(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring(`"token_ttl":"1m30s"`))
	g.Expect(string(b)).To(ContainSubstring(`"image_lock":"2s"`))
	g.Expect(string(b)).To(ContainSubstring(`"hang":"1s"`))
	g.Expect(string(b)).To(ContainSubstring(`"min":"1ms"`))
	g.Expect(string(b)).To(ContainSubstring(`"no_agent_powering_up":"7s"`))
	g.Expect(string(b)).To(ContainSubstring(`"no_guest_agent":true`))
	g.Expect(string(b)).To(ContainSubstring(`"storage_domains":["b","c"]`))
	g.Expect(string(b)).To(ContainSubstring(`"guest_interfaces":{"kubernetes":false,"service_ips":5,"extra":[{"name":"cali0","mac":"ee:ee:ee:ee:ee:ee","ips":["192.168.1.1"]}]}`))
	g.Expect(string(b)).To(ContainSubstring(`"ignore_follow":true`))
	g.Expect(string(b)).To(ContainSubstring(`"after":true,"mode":"drop"`))
	g.Expect(string(b)).To(ContainSubstring(`"max_vm_name_length":40`))
	g.Expect(string(b)).To(ContainSubstring(`"version":"4.4.10"`))
	var out ovirtsim.Seed
	g.Expect(json.Unmarshal(b, &out)).To(Succeed())
	g.Expect(&out).To(Equal(in))

	// Numbers of nanoseconds are accepted too.
	var d ovirtsim.Duration
	g.Expect(json.Unmarshal([]byte(`1500000000`), &d)).To(Succeed())
	g.Expect(d.Std()).To(Equal(1500 * time.Millisecond))
}

func TestLoadSeedRejectsUnknownFieldsAndMissingFiles(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.json")
	g.Expect(os.WriteFile(p, []byte(`{"clusters":[{"name":"a","datacentre":"x"}]}`), 0o644)).To(Succeed())
	_, err := ovirtsim.LoadSeed(p)
	g.Expect(err).To(MatchError(ContainSubstring(`unknown field "datacentre"`)))
	_, err = ovirtsim.LoadSeed(filepath.Join(dir, "missing.json"))
	g.Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue())
}

func TestBuildRejectsInconsistentInventory(t *testing.T) {
	cases := []struct {
		name string
		b    *ovirtsim.Builder
		want string
	}{
		{"a template in an unknown cluster", ovirtsim.NewBuilder().WithCluster(ovirtsim.Cluster{Name: "c"}).
			WithStorageDomain(ovirtsim.StorageDomain{Name: "d", FreeGB: 10}).
			WithTemplate(ovirtsim.Template{Name: "t", Cluster: "nope"}), `unknown cluster "nope"`},
		{"a template disk on an unknown domain", ovirtsim.NewBuilder().WithCluster(ovirtsim.Cluster{Name: "c"}).
			WithTemplate(ovirtsim.Template{Name: "t", Disks: []ovirtsim.TemplateDisk{{SizeGB: 1, StorageDomain: "x"}}}), `unknown storage domain "x"`},
		{"a template disk without size", ovirtsim.NewBuilder().WithCluster(ovirtsim.Cluster{Name: "c"}).
			WithStorageDomain(ovirtsim.StorageDomain{Name: "d"}).
			WithTemplate(ovirtsim.Template{Name: "t", Disks: []ovirtsim.TemplateDisk{{Alias: "a"}}}), "size_gb must be positive"},
		{"two clusters with one name", ovirtsim.NewBuilder().WithCluster(ovirtsim.Cluster{Name: "c"}).WithCluster(ovirtsim.Cluster{Name: "c"}), `duplicate cluster "c"`},
		{"one host name in two clusters", ovirtsim.NewBuilder().WithCluster(ovirtsim.Cluster{Name: "a", Hosts: []ovirtsim.Host{{Name: "h"}}}).
			WithCluster(ovirtsim.Cluster{Name: "b", Hosts: []ovirtsim.Host{{Name: "h"}}}), `host "h" already exists`},
		{"a host with an unknown status", ovirtsim.NewBuilder().WithCluster(ovirtsim.Cluster{Name: "a", Hosts: []ovirtsim.Host{{Name: "h", Status: "asleep"}}}),
			`unknown status "asleep"`},
		{"a host with negative memory", ovirtsim.NewBuilder().WithCluster(ovirtsim.Cluster{Name: "a", Hosts: []ovirtsim.Host{{Name: "h", MemoryGB: -1}}}),
			"negative memory_gb"},
		{"no_hosts with hosts", ovirtsim.NewBuilder().WithCluster(ovirtsim.Cluster{Name: "a", NoHosts: true, Hosts: []ovirtsim.Host{{Name: "h"}}}),
			"no_hosts with hosts"},
		{"a fault rule without status or hang", ovirtsim.NewBuilder().WithFault(ovirtsim.FaultRule{Path: "/vms"}), "needs a status or a hang"},
		{"a fault rule with an unknown mode", ovirtsim.NewBuilder().WithFault(ovirtsim.FaultRule{Status: 500, Mode: "explode"}), `unknown mode "explode"`},
		{"a drop with a status", ovirtsim.NewBuilder().WithFault(ovirtsim.FaultRule{Status: 500, Mode: "drop"}), "mode drop sends no status"},
		{"a hang mode without a hang", ovirtsim.NewBuilder().WithFault(ovirtsim.FaultRule{After: true, Mode: "hang"}), "mode hang needs a hang duration"},
		{"a negative name length", ovirtsim.NewBuilder().WithMaxVMNameLength(-1), "negative max_vm_name_length"},
		{"an engine version 3.6", ovirtsim.NewBuilder().WithVersion("3.6"), "only 4.x is simulated"},
		{"an inverted latency range", ovirtsim.NewBuilder().WithLatency(ovirtsim.LatencyRule{Min: time.Second, Max: time.Millisecond}), "max 1ms < min 1s"},
		{"a bad listen address", ovirtsim.NewBuilder().WithListenAddress("nonsense"), "listen address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sim, err := tc.b.Build()
			if sim != nil {
				sim.Close()
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

func TestParseFaultRuleAndLatency(t *testing.T) {
	g := NewWithT(t)
	f, err := ovirtsim.ParseFaultRule("POST:/vms:500:0.1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f).To(Equal(ovirtsim.FaultRule{Method: "POST", Path: "/vms", Status: 500, Rate: 0.1}))
	f, err = ovirtsim.ParseFaultRule("*:*:0:1:2:30s")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f).To(Equal(ovirtsim.FaultRule{Path: "*", Rate: 1, Count: 2, Hang: 30 * time.Second}))
	f, err = ovirtsim.ParseFaultRule("POST:/vms:503:1:1::after")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f).To(Equal(ovirtsim.FaultRule{Method: "POST", Path: "/vms", Status: 503, Rate: 1, Count: 1, After: true}))
	f, err = ovirtsim.ParseFaultRule("PUT:/vms/{id}/diskattachments/{id}:0::::after-drop")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f).To(Equal(ovirtsim.FaultRule{Method: "PUT", Path: "/vms/{id}/diskattachments/{id}", After: true, Mode: "drop"}))
	f, err = ovirtsim.ParseFaultRule("DELETE:/vms/{id}:0:1:1:30s:after-hang")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f).To(Equal(ovirtsim.FaultRule{Method: "DELETE", Path: "/vms/{id}", Rate: 1, Count: 1, Hang: 30 * time.Second, After: true, Mode: "hang"}))
	f, err = ovirtsim.ParseFaultRule("GET:/clusters:0::::drop")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f).To(Equal(ovirtsim.FaultRule{Method: "GET", Path: "/clusters", Mode: "drop"}))
	for _, bad := range []string{"POST:/vms", "POST:/vms:abc", "GET:/:500:2", "GET:/:0", "GET:/:500:0.1:x", "GET:/:500:0.1:1:forever",
		"GET:/:500::::drop", "GET:/:0::::after-hang", "GET:/:500::::before", "GET:/:500:1:1:1s:after:x"} {
		_, err := ovirtsim.ParseFaultRule(bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
	l, err := ovirtsim.ParseLatency("10ms-30ms")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l).To(Equal(ovirtsim.LatencyRule{Min: 10 * time.Millisecond, Max: 30 * time.Millisecond}))
	l, err = ovirtsim.ParseLatency("20ms")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l).To(Equal(ovirtsim.LatencyRule{Min: 20 * time.Millisecond, Max: 20 * time.Millisecond}))
	_, err = ovirtsim.ParseLatency("30ms-10ms")
	g.Expect(err).To(HaveOccurred())
}

func TestGuestInterfacesJSONDefaultsKubernetesToTrue(t *testing.T) {
	g := NewWithT(t)
	var s ovirtsim.Seed
	g.Expect(json.Unmarshal([]byte(`{"guest_interfaces":{"service_ips":3}}`), &s)).To(Succeed())
	g.Expect(*s.GuestInterfaces).To(Equal(ovirtsim.GuestInterfaces{Kubernetes: true, ServiceIPs: 3}))
	g.Expect(json.Unmarshal([]byte(`{"guest_interfaces":{"kubernetes":false}}`), &s)).To(Succeed())
	g.Expect(s.GuestInterfaces.Kubernetes).To(BeFalse())
	g.Expect(json.Unmarshal([]byte(`{"guest_interfaces":{"kubernetez":false}}`), &s)).To(MatchError(ContainSubstring("unknown field")))
}

func TestSeedFilesLoadAndBuild(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("seeds", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			g := NewWithT(t)
			s, err := ovirtsim.LoadSeed(f)
			g.Expect(err).NotTo(HaveOccurred())
			sim, err := ovirtsim.NewBuilder().WithSeed(s).Build()
			g.Expect(err).NotTo(HaveOccurred())
			sim.Close()
		})
	}
}

// The "seed with everything" of docs/ovirtsim.md loads and builds.
func TestDocumentedSeedWithEverythingBuilds(t *testing.T) {
	g := NewWithT(t)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ovirtsim.md"))
	g.Expect(err).NotTo(HaveOccurred())
	_, rest, ok := strings.Cut(string(doc), "A seed with everything:\n\n```json\n")
	g.Expect(ok).To(BeTrue())
	js, _, ok := strings.Cut(rest, "```")
	g.Expect(ok).To(BeTrue())
	p := filepath.Join(t.TempDir(), "everything.json")
	g.Expect(os.WriteFile(p, []byte(js), 0o644)).To(Succeed())
	s, err := ovirtsim.LoadSeed(p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.GuestInterfaces.Extra).To(HaveLen(1))
	g.Expect(s.Templates[0].Disks[0].StorageDomains).To(Equal([]string{"data2"}))
	sim, err := ovirtsim.NewBuilder().WithSeed(s).Build()
	g.Expect(err).NotTo(HaveOccurred())
	sim.Close()
}
