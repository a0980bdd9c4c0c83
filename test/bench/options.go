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
	OptionVGPU             = "vgpu"
	OptionPassthrough      = "passthrough"
)

// optionScenarioPrefix starts the name of every option scenario.
const optionScenarioPrefix = "option-"

// ContentOptions lists the options in the report's order.
var ContentOptions = []string{OptionNone, OptionDataDisk, OptionOSDisk, OptionTags, OptionCustomProperties, OptionHighAvailability, OptionPerformance,
	OptionVGPU, OptionPassthrough}

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
	case OptionVGPU:
		spec.GPUs = []infrav1.GPU{{Type: infrav1.GPUTypeVGPU, MdevType: benchMdevType, Count: 1}}
	case OptionPassthrough:
		spec.GPUs = []infrav1.GPU{{Type: infrav1.GPUTypePassthrough, VendorID: benchGPUVendor, DeviceID: benchGPUDevice, Count: 1}}
	}
}

// The GPUs of the bench's hosts for the GPU options: benchGPUsPerHost NVIDIA A100 (10de:20b5),
// each in its own IOMMU group with its audio function (10de:1aef) as real cards are, bound to
// vfio-pci for passthrough, and a vGPU card (a T4, bound to the nvidia driver) offering
// benchGPUsPerHost instances of nvidia-22. Enough for every machine of an option scenario on
// one host: the manager pins a Passthrough machine to the first host with a free GPU (most
// schedulable memory first), and the Engine's MDevice filter does not count the instances.
const (
	benchMdevType    = "nvidia-22"
	benchGPUVendor   = "10de"
	benchGPUDevice   = "20b5"
	benchGPUsPerHost = 20
)

// benchHostDevices are the devices of each of the bench's hosts for the GPU options.
func benchHostDevices() []ovirtsim.HostDeviceSeed {
	devs := make([]ovirtsim.HostDeviceSeed, 0, 2*benchGPUsPerHost+1)
	for i := range benchGPUsPerHost {
		bus, group := 0x10+i, 100+i
		devs = append(devs,
			ovirtsim.HostDeviceSeed{Name: fmt.Sprintf("pci_0000_%02x_00_0", bus), VendorID: benchGPUVendor, ProductID: benchGPUDevice,
				VendorName: "NVIDIA Corporation", ProductName: "GA100 [A100 PCIe 80GB]", IOMMUGroup: ptr.To(group), Driver: "vfio-pci"},
			ovirtsim.HostDeviceSeed{Name: fmt.Sprintf("pci_0000_%02x_00_1", bus), VendorID: benchGPUVendor, ProductID: "1aef",
				VendorName: "NVIDIA Corporation", ProductName: "GA100 High Definition Audio Controller", IOMMUGroup: ptr.To(group), Driver: "vfio-pci"})
	}
	return append(devs, ovirtsim.HostDeviceSeed{Name: "pci_0000_d8_00_0", VendorID: benchGPUVendor, ProductID: "1eb8",
		VendorName: "NVIDIA Corporation", ProductName: "TU104GL [Tesla T4]", IOMMUGroup: ptr.To(99), Driver: "nvidia",
		MDevTypes: []ovirtsim.MDevTypeSeed{{Name: benchMdevType, AvailableInstances: benchGPUsPerHost, HumanReadableName: "GRID T4-16Q"}}})
}

// prepareContents gives the simulator what the option needs: hosts with free hugepages for the
// performance profile, the hosts of the bench's oVirt cluster GPUs (benchHostDevices) and
// device passthrough for the GPU options (tags are created by the manager: the bench provider
// has spec.createMissingTags). What it gives stays for the scenarios after it, which do not use
// it.
func prepareContents(sim *ovirtsim.Simulator, option string) error {
	switch option {
	case OptionPerformance:
		for _, h := range sim.Hosts() {
			if err := sim.SetHostHugePages(h.Name, ovirtsim.HugePages{SizeKB: 2048, Count: 1 << 20}); err != nil {
				return fmt.Errorf("giving host %s hugepages: %w", h.Name, err)
			}
		}
	case OptionVGPU, OptionPassthrough:
		for _, h := range sim.Hosts() {
			if h.Cluster != benchOVirtCluster {
				continue
			}
			if err := sim.SetHostDevices(h.Name, true, benchHostDevices()...); err != nil {
				return fmt.Errorf("giving host %s GPUs: %w", h.Name, err)
			}
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
