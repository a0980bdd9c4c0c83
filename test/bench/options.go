package bench

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/utils/ptr"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/ovirtsim"
)

// The VM contents the option scenarios measure, each alone on the bench's machine
// (docs/operations.md, "What goes into a VM"); OptionNone is the same machine without any.
const (
	OptionNone             = "none"
	OptionDataDisk         = "data-disk"
	OptionOSDisk           = "os-disk"
	OptionTags             = "tags"
	OptionCustomProperties = "custom-properties"
	OptionHighAvailability = "high-availability"
	OptionPerformance      = "performance"
)

// optionScenarioPrefix starts the name of every option scenario.
const optionScenarioPrefix = "option-"

// ContentOptions lists the options in the report's order.
var ContentOptions = []string{OptionNone, OptionDataDisk, OptionOSDisk, OptionTags, OptionCustomProperties, OptionHighAvailability, OptionPerformance}

// optionScenario measures the Engine calls of one option on 20 machines without latency.
func optionScenario(option string) Scenario {
	return Scenario{Name: optionScenarioPrefix + option, Machines: 20, Concurrency: 10, Clone: option == OptionOSDisk,
		SyncPeriod: 30 * time.Second, ProviderCheck: 30 * time.Second, Contents: option}
}

// applyContents adds the option's contents to the bench's machine.
func applyContents(spec *infrav1.OVirtVMSpec, option string) {
	switch option {
	case OptionDataDisk:
		spec.DataDisks = []infrav1.DataDisk{{Name: "etcd", SizeGB: 10, Preallocated: true}}
	case OptionOSDisk:
		spec.DiskClone = ptr.To(true)
		spec.OSDisk = &infrav1.OSDisk{Preallocated: ptr.To(true)}
	case OptionTags:
		spec.Tags = []string{"bench-backup", "bench-team"}
	case OptionCustomProperties:
		spec.CustomProperties = []infrav1.CustomProperty{{Name: "viodiskcache", Value: "writeback"}}
	case OptionHighAvailability:
		spec.HighAvailability = &infrav1.HighAvailability{Enabled: true, Priority: 50, LeaseStorageDomain: "data"}
	case OptionPerformance:
		spec.Performance = &infrav1.Performance{CPUMode: infrav1.CPUModeHostPassthrough, HugePagesKiB: infrav1.HugePages2Mi,
			IOThreads: 1, MultiQueues: ptr.To(true), Ballooning: ptr.To(false)}
	}
}

// prepareContents gives the simulator what the option needs: hosts with free hugepages for the
// performance profile (tags are created by the manager: the bench provider has
// spec.createMissingTags).
func prepareContents(sim *ovirtsim.Simulator, option string) error {
	if option != OptionPerformance {
		return nil
	}
	for _, h := range sim.Hosts() {
		if err := sim.SetHostHugePages(h.Name, ovirtsim.HugePages{SizeKB: 2048, Count: 1 << 20}); err != nil {
			return fmt.Errorf("giving host %s hugepages: %w", h.Name, err)
		}
	}
	return nil
}

// optionsMarkdown is the report's table of Engine calls per option: each option's calls per
// created machine and per deleted machine, and which requests it adds to the machine without
// contents.
func (rep *Report) optionsMarkdown() string {
	base := rep.find(optionScenarioPrefix + OptionNone)
	if base == nil {
		return ""
	}
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("\n### Engine calls per option\n\n")
	w("Each option of the VM contents alone on the bench's machine (%d machines, concurrency %d, no latency; `os-disk` clones its disks, and so does its row's own baseline only in the clone mode), against the same machine without contents (`none`): the oVirt calls per machine until all were Ready and for the deletion, and the requests by which the option differs (per machine; + more, − fewer).\n\n",
		base.Machines, base.Concurrency)
	w("| option | calls / machine (create) | vs none | calls / machine (delete) | requests that differ |\n|---|---|---|---|---|\n")
	for _, opt := range ContentOptions {
		r := rep.find(optionScenarioPrefix + opt)
		if r == nil {
			continue
		}
		w("| %s | %.2f | %+.2f | %.2f | %s |\n", opt, r.CreateCallsPerMachine(), r.CreateCallsPerMachine()-base.CreateCallsPerMachine(), r.DeleteCalls, callDiff(base.CreateCalls, r.CreateCalls))
	}
	return b.String()
}

// callDiff lists the requests whose count per machine differs by at least 0.05 between base and
// r, "none" when none does.
func callDiff(base, r map[string]float64) string {
	keys := map[string]bool{}
	for k := range base {
		keys[k] = true
	}
	for k := range r {
		keys[k] = true
	}
	var out []string
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		if d := r[k] - base[k]; d >= 0.05 || d <= -0.05 {
			out = append(out, fmt.Sprintf("`%s` %+.2f", k, d))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
