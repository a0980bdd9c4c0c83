package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// These tests check the suite's own machinery without a stack; they run in every `go test`.

func TestMarkerOwnerReadsTheManagersMarker(t *testing.T) {
	for _, tc := range []struct{ comment, owner, uid string }{
		{"capov ovirtmachine=ns1/worker-a uid=1234-abcd", "ns1/worker-a", "1234-abcd"},
		{"prefix capov ovirtmachine=ns/m.x uid= suffix", "ns/m.x", ""},
		{"the database team's VM", "", ""},
		{"capov ovirtmachine=nonamespace uid=1", "", ""},
		{"", "", ""},
	} {
		g := NewWithT(t)
		g.Expect(MarkerOwner(tc.comment)).To(Equal(tc.owner), tc.comment)
		g.Expect(MarkerUID(tc.comment)).To(Equal(tc.uid), tc.comment)
	}
}

func TestPathRatesCountTheBusiestWindowOfEachPath(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var log []ovirtsim.RequestRecord
	add := func(at time.Duration, method, path string) {
		log = append(log, ovirtsim.RequestRecord{Start: t0.Add(at), Method: method, Path: path})
	}
	for i := range 5 {
		add(time.Duration(i)*time.Second, "GET", "/vms/{id}")
	}
	for i := range 3 {
		add(12*time.Second+time.Duration(i)*time.Second, "GET", "/vms/{id}")
	}
	add(time.Second, "POST", "/vms")
	add(-time.Second, "POST", "/vms")       // before the window
	add(time.Minute, "DELETE", "/vms/{id}") // after it
	rates := PathRates(log, t0, t0.Add(30*time.Second), 10*time.Second)
	g.Expect(rates).To(Equal(map[string]int{"GET /vms/{id}": 5, "POST /vms": 1}))
}

func TestFromEnvRefusesBadValuesNamingTheVariable(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"CHAOS", "medium", `CHAOS="medium"`},
		{"CHAOS_SEED", "-1", "CHAOS_SEED"},
		{"CHAOS_SEEDS", "0", "CHAOS_SEEDS"},
		{"CHAOS_DURATION", "ten", "CHAOS_DURATION"},
		{"CHAOS_MACHINES", "x", "CHAOS_MACHINES"},
		{"CHAOS_BOUND", "-5s", "CHAOS_BOUND"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv("CHAOS", "short")
			t.Setenv(tc.name, tc.value)
			_, _, err := FromEnv()
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

func TestFromEnvDefaults(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("CHAOS", "")
	_, ok, err := FromEnv()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "without CHAOS the suite does not run")

	t.Setenv("CHAOS", "long")
	cfg, ok, err := FromEnv()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(cfg.Seeds).To(Equal([]uint64{1, 2, 3}))

	t.Setenv("CHAOS_SEED", "42")
	cfg, _, err = FromEnv()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Seeds).To(Equal([]uint64{42}), "CHAOS_SEED alone reproduces one seed")

	t.Setenv("CHAOS_SEEDS", "2")
	t.Setenv("CHAOS_DURATION", "12s")
	cfg, _, err = FromEnv()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Seeds).To(Equal([]uint64{42, 43}))
	g.Expect(cfg.Duration).To(Equal(12 * time.Second))
}

func TestScenarioNamesAreUniqueAndTheShortRunHasASubset(t *testing.T) {
	g := NewWithT(t)
	names := map[string]bool{}
	short := 0
	for _, s := range Scenarios() {
		g.Expect(names[s.Name]).To(BeFalse(), "duplicate %s", s.Name)
		names[s.Name] = true
		g.Expect(s.Name).To(MatchRegexp(`^[a-z0-9-]+$`))
		g.Expect(s.Fault).NotTo(BeEmpty())
		g.Expect(s.Run).NotTo(BeNil())
		if s.Short {
			short++
		}
	}
	g.Expect(Scenarios()[0].Name).To(Equal(baselineName), "the baseline runs first")
	g.Expect(short).To(BeNumerically(">", 2))
	g.Expect(short).To(BeNumerically("<", len(names)))
}

// testWorld is a World without a stack, enough for the watcher's checks.
func testWorld(t *testing.T) *World {
	w := &World{Cfg: Config{RateFactor: 3, RateFloor: 30, RateWindow: 10 * time.Second}, logf: t.Logf}
	w.Watcher = newWatcher(w)
	w.Watcher.Begin("unit")
	return w
}

func TestObserveFlagsWritesToVMsThatAreNotOurs(t *testing.T) {
	g := NewWithT(t)
	w := testWorld(t)
	wa := w.Watcher
	wa.AddNamespace("chaos-1-x")
	wa.AddForeignVM("vm-planted", "planted by the test")
	wa.AddForeignMarker("chaos-1-x/ghost")
	req := func(method, tmpl, id, comment string, exists bool) ovirtsim.ObservedRequest {
		return ovirtsim.ObservedRequest{Time: time.Now(), Method: method, Template: tmpl, Path: strings.ReplaceAll(tmpl, "{id}", id), VMID: id,
			VM: ovirtsim.VMState{ID: id, Name: id, Comment: comment}, VMExists: exists}
	}
	ours := "capov ovirtmachine=chaos-1-x/m1 uid=u1"
	wa.observe(req("POST", "/vms/{id}/stop", "vm-ours", ours, true))
	wa.observe(req("GET", "/vms/{id}", "vm-foreign", "", true))
	wa.observe(req("DELETE", "/vms/{id}", "vm-gone", "", false))
	g.Expect(wa.Violations("unit")).To(BeEmpty(), "our VM, a read, and a VM that does not exist are fine")

	wa.observe(req("POST", "/vms/{id}/shutdown", "vm-foreign", "the database team's VM", true))
	wa.observe(req("DELETE", "/vms/{id}", "vm-planted", ours, true))
	wa.observe(req("PUT", "/vms/{id}", "vm-ghost", "capov ovirtmachine=chaos-1-x/ghost uid=0", true))
	wa.observe(req("PUT", "/vms/{id}", "vm-other", "capov ovirtmachine=elsewhere/m uid=0", true))
	wa.observe(req("POST", "/vms/{id}/shutdown", "vm-foreign", "the database team's VM", true)) // reported once
	vs := wa.Violations("unit")
	g.Expect(vs).To(HaveLen(4))
	for _, v := range vs {
		g.Expect(v.Invariant).To(Equal(I2))
	}
	g.Expect(vs[0].Message).To(ContainSubstring("without an owner marker"))
	g.Expect(vs[1].Message).To(ContainSubstring("planted as foreign"))
	g.Expect(vs[2].Message).To(ContainSubstring("which no OVirtMachine ever was"))
	g.Expect(vs[3].Message).To(ContainSubstring("outside the suite's namespaces"))
	g.Expect(wa.Writes(time.Time{})).To(HaveLen(7), "every write is recorded for the scenarios' own checks")
}

func TestNextFiresOnceOnTheMatchingRequest(t *testing.T) {
	g := NewWithT(t)
	wa := testWorld(t).Watcher
	ch := wa.Next(isDelete)
	wa.observe(ovirtsim.ObservedRequest{Method: "POST", Template: "/vms"})
	g.Expect(ch).NotTo(Receive())
	wa.observe(ovirtsim.ObservedRequest{Method: "POST", Template: "/vms/{id}/shutdown", VMID: "x"})
	g.Expect(ch).To(Receive(HaveField("Template", "/vms/{id}/shutdown")))
	wa.observe(ovirtsim.ObservedRequest{Method: "DELETE", Template: "/vms/{id}", VMID: "x"})
	g.Expect(ch).NotTo(Receive())
}

func TestScanLogsFindsSentinelsAlsoAcrossReads(t *testing.T) {
	g := NewWithT(t)
	w := testWorld(t)
	dir := t.TempDir()
	p, err := harness.Start("manager", "/bin/sh", []string{"-c", "printf 'I1201 first line\\nI1201 token=abcdefgh'; sleep 0.3; printf 'ijkl more\\n'"}, nil, filepath.Join(dir, "m.log"))
	g.Expect(err).NotTo(HaveOccurred())
	w.processes = []*harness.Process{p}
	w.Watcher.AddSentinel("abcdefghijkl", "an SSO token")
	w.Watcher.AddSentinel("short", "too short to plant") // ignored
	time.Sleep(100 * time.Millisecond)
	w.Watcher.ScanLogs()
	g.Expect(w.Watcher.Violations("unit")).To(BeEmpty(), "only half of the token is written yet")
	g.Eventually(func() bool { done, _ := p.Exited(); return done }, 5*time.Second, 50*time.Millisecond).Should(BeTrue())
	w.Watcher.ScanLogs()
	vs := w.Watcher.Violations("unit")
	g.Expect(vs).To(HaveLen(1))
	g.Expect(vs[0].Invariant).To(Equal(I7))
	g.Expect(vs[0].Message).To(ContainSubstring("an SSO token appears in the log of manager"))
	w.Watcher.ScanLogs()
	g.Expect(w.Watcher.Violations("unit")).To(HaveLen(1), "reported once")
}

func TestScanTextFindsSentinelsInStatusesAndMetrics(t *testing.T) {
	g := NewWithT(t)
	w := testWorld(t)
	w.Watcher.AddSentinel("chaos-engine-pw-1-deadbeef", "the Engine password")
	w.Watcher.scanText("metrics", "the manager's /metrics", "go_goroutines 12\ncapov_x{provider=\"p\"} 1\n", "process manager")
	g.Expect(w.Watcher.Violations("unit")).To(BeEmpty())
	w.Watcher.scanText("status|OVirtMachine", "the status of OVirtMachine ns/m", `{"message":"login with chaos-engine-pw-1-deadbeef refused"}`, "OVirtMachine ns/m")
	vs := w.Watcher.Violations("unit")
	g.Expect(vs).To(HaveLen(1))
	g.Expect(vs[0].Message).To(ContainSubstring("the Engine password appears in the status of OVirtMachine ns/m"))
}

func TestReportRendersTheMatrixAndUpdatesOnlyItsSection(t *testing.T) {
	g := NewWithT(t)
	rep := &Report{Mode: ModeLong, Seeds: []uint64{1, 2}, Duration: 30 * time.Second, Machines: 5, Bound: 90 * time.Second,
		RateFactor: 3, RateFloor: 30, RateWindow: 10 * time.Second, Started: time.Now(), Elapsed: time.Minute}
	rep.Results = []*Result{
		{Seed: 1, Scenario: "engine-errors", Fault: "errors", Converge: 2 * time.Second, Clean: 5 * time.Second, Machines: 4, Calls: 100},
		{Seed: 2, Scenario: "engine-errors", Fault: "errors", Converge: 4 * time.Second, Clean: 7 * time.Second, Machines: 5, Calls: 150,
			Violations: []Violation{{Invariant: I3, Message: "disk d1 | gone"}}},
	}
	md := rep.Markdown()
	g.Expect(md).To(ContainSubstring("| `engine-errors` | errors | — | 2 | 1 | 1 (I3×1) | 4s / 4s | 7s | 27.5 |"))
	rep.Results = append(rep.Results, &Result{Seed: 1, Scenario: "webhook-down", Fault: "down", Machines: 1,
		Violations: []Violation{{Invariant: "deletion works with the webhook down (defect 7)"}, {Invariant: Converge}, {Invariant: SecretKept}}})
	g.Expect(rep.Markdown()).To(ContainSubstring("| 3 (Secret×1, check×1, converge×1) |"))
	rep.Results = rep.Results[:2]
	md = rep.Markdown()
	g.Expect(md).To(ContainSubstring("2 runs, 1 invariant violations."))
	g.Expect(md).To(ContainSubstring(`disk d1 \| gone`), "pipes in messages do not break the table")

	doc := filepath.Join(t.TempDir(), "reliability.md")
	g.Expect(os.WriteFile(doc, []byte("# Reliability\n\nHand-written intro.\n\n## How to run\n\nmake chaos\n"), 0o644)).To(Succeed())
	g.Expect(UpdateDoc(doc, md)).To(Succeed())
	first, _ := os.ReadFile(doc)
	g.Expect(UpdateDoc(doc, md)).To(Succeed())
	second, _ := os.ReadFile(doc)
	g.Expect(string(second)).To(Equal(string(first)), "idempotent")
	g.Expect(string(second)).To(ContainSubstring("Hand-written intro."))
	g.Expect(string(second)).To(ContainSubstring("## How to run\n\nmake chaos\n"))
	g.Expect(strings.Count(string(second), docSection.Begin)).To(Equal(1))

	saved := filepath.Join(t.TempDir(), "r.json")
	g.Expect(rep.Save(saved)).To(Succeed())
	back, err := LoadReport(saved)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Markdown()).To(Equal(md))
}

func TestOVirtWritesPicksTheChangingCalls(t *testing.T) {
	g := NewWithT(t)
	logs := `I1201 18:46:26.397595    5952 call.go:97] "Called oVirt" controller="ovirtmachine" provider="chaos" operation="GetVM" duration="1ms" code="2xx"
I1201 18:46:26.536587    5952 call.go:97] "Called oVirt" controller="ovirtmachine" provider="chaos" operation="CreateVM" duration="9ms" code="2xx"
I1201 18:46:26.600000    5952 controller.go:477] "Reconciling" controller="ovirtmachine"
I1201 18:46:27.243434    5952 call.go:97] "Called oVirt" controller="ovirtmachine" provider="chaos" operation="StartVM" duration="2ms" code="409"
I1201 18:46:28.055416    5952 call.go:97] "Called oVirt" controller="ovirtprovider" provider="chaos" operation="Ping" duration="2ms" code="2xx"`
	g.Expect(oVirtWrites(logs)).To(Equal([]string{"CreateVM 2xx", "StartVM 409"}))
	resumed := time.Date(2026, 12, 1, 18, 46, 26, 520000000, time.Local)
	g.Expect(oVirtWritesStartedAfter(logs, resumed)).To(Equal([]string{"CreateVM 2xx", "StartVM 409"}))
	resumed = time.Date(2026, 12, 1, 18, 46, 26, 529000000, time.Local).Add(2 * time.Millisecond)
	g.Expect(oVirtWritesStartedAfter(logs, resumed)).To(Equal([]string{"StartVM 409"}), "CreateVM started at 26.527587, before")
	long := `I1201 18:46:40.000000    5952 call.go:97] "Called oVirt" controller="ovirtmachine" provider="chaos" operation="RemoveVM" duration="12s" code="2xx"`
	g.Expect(oVirtWritesStartedAfter(long, time.Date(2026, 12, 1, 18, 46, 30, 0, time.Local))).To(BeEmpty(), "in flight across the freeze: started before")
}

func TestObserveFlagsWritesToOutOfBandDisks(t *testing.T) {
	g := NewWithT(t)
	wa := testWorld(t).Watcher
	wa.AddNamespace("ns")
	wa.TrackCSIDisk("d-csi", "vm1")
	ours := ovirtsim.VMState{ID: "vm1", Comment: "capov ovirtmachine=ns/m uid=u"}
	wa.observe(ovirtsim.ObservedRequest{Method: "PUT", Template: "/vms/{id}/diskattachments/{id}", Path: "/vms/vm1/diskattachments/d-os", VMID: "vm1", VM: ours, VMExists: true})
	wa.observe(ovirtsim.ObservedRequest{Method: "GET", Template: "/disks/{id}", Path: "/disks/d-csi"})
	g.Expect(wa.Violations("unit")).To(BeEmpty(), "the OS disk may change; reading the CSI disk is fine")
	wa.observe(ovirtsim.ObservedRequest{Method: "DELETE", Template: "/vms/{id}/diskattachments/{id}", Path: "/vms/vm1/diskattachments/d-csi", VMID: "vm1", VM: ours, VMExists: true})
	wa.observe(ovirtsim.ObservedRequest{Method: "DELETE", Template: "/disks/{id}", Path: "/disks/d-csi"})
	vs := wa.Violations("unit")
	g.Expect(vs).To(HaveLen(2))
	g.Expect(vs[0].Invariant).To(Equal(I3))
	g.Expect(vs[0].Message).To(ContainSubstring("changes out-of-band disk d-csi"))
}
