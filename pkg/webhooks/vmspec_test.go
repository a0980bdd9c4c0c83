package webhooks

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/featuregates"
)

func TestResolveDiskClone(t *testing.T) {
	on, off := featuregates.Gates{DiskClone: true}, featuregates.Gates{}
	withClone := func(v bool) *infrav1.OVirtProvider {
		return provider("p", func(p *infrav1.OVirtProvider) { p.Spec.DiskClone = ptr.To(v) })
	}
	tests := []struct {
		name     string
		machine  *bool
		provider *infrav1.OVirtProvider
		gates    featuregates.Gates
		want     bool
	}{
		{"the machine's true wins over a provider false and the gate off", ptr.To(true), withClone(false), off, true},
		{"the machine's false wins over a provider true and the gate on", ptr.To(false), withClone(true), on, false},
		{"the provider's true applies when the machine leaves it empty", nil, withClone(true), off, true},
		{"the provider's false wins over the gate", nil, withClone(false), on, false},
		{"the gate applies when the provider leaves it empty", nil, provider("p"), on, true},
		{"everything empty is false, the gate's default", nil, provider("p"), featuregates.Defaults(), false},
		{"the machine's value applies when the provider does not exist", ptr.To(false), nil, on, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(ResolveDiskClone(tt.machine, tt.provider, tt.gates)).To(HaveValue(Equal(tt.want)))
		})
	}
	t.Run("an empty value stays unresolved while the provider does not exist, whatever the gate", func(t *testing.T) {
		NewWithT(t).Expect(ResolveDiskClone(nil, nil, on)).To(BeNil())
		NewWithT(t).Expect(ResolveDiskClone(nil, nil, off)).To(BeNil())
	})
}

func TestDefaultVMSpec(t *testing.T) {
	sd := func(p *infrav1.OVirtProvider) { p.Spec.StorageDomainName = "fast-ssd" }
	clone := func(v bool) func(*infrav1.OVirtProvider) {
		return func(p *infrav1.OVirtProvider) { p.Spec.DiskClone = ptr.To(v) }
	}
	tests := []struct {
		name      string
		spec      func(*infrav1.OVirtVMSpec)
		provider  *infrav1.OVirtProvider
		gates     featuregates.Gates
		wantClone bool
		wantSD    string
	}{
		{"an empty diskclone gets the provider's value", nil, provider("p", clone(true)), featuregates.Gates{}, true, ""},
		{"an empty diskclone gets the gate when the provider has none", nil, provider("p"), featuregates.Gates{DiskClone: true}, true, ""},
		{"an explicit diskclone is kept", func(s *infrav1.OVirtVMSpec) { s.DiskClone = ptr.To(false) }, provider("p", clone(true)), featuregates.Gates{}, false, ""},
		{"the provider's storage domain is copied when cloning resolves to true", nil, provider("p", clone(true), sd), featuregates.Gates{}, true, "fast-ssd"},
		{"the provider's storage domain is not copied when cloning resolves to false", nil, provider("p", sd), featuregates.Gates{}, false, ""},
		{"the provider's storage domain is not copied over the machine's", func(s *infrav1.OVirtVMSpec) { s.StorageDomainName = "mine" }, provider("p", clone(true), sd), featuregates.Gates{}, true, "mine"},
		{"the provider's storage domain is copied when the machine clones explicitly", func(s *infrav1.OVirtVMSpec) { s.DiskClone = ptr.To(true) }, provider("p", sd), featuregates.Gates{}, true, "fast-ssd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := vmSpec()
			if tt.spec != nil {
				tt.spec(&spec)
			}
			DefaultVMSpec(&spec, tt.provider, tt.gates)
			g.Expect(spec.DiskClone).To(HaveValue(Equal(tt.wantClone)))
			g.Expect(spec.StorageDomainName).To(Equal(tt.wantSD))
		})
	}
	// Issue 33 (3): a machine admitted before its provider exists is not given the gate's value
	// for good: the manager resolves machine -> provider -> gate when it creates the VM.
	t.Run("nothing is defaulted while the provider does not exist", func(t *testing.T) {
		g := NewWithT(t)
		spec := vmSpec()
		DefaultVMSpec(&spec, nil, featuregates.Gates{DiskClone: true})
		g.Expect(spec.DiskClone).To(BeNil())
		g.Expect(spec.StorageDomainName).To(BeEmpty())
	})
}

func TestKeepCreateDefaults(t *testing.T) {
	g := NewWithT(t)
	old := vmSpec()
	old.DiskClone, old.StorageDomainName = ptr.To(true), "fast-ssd"

	reapplied := vmSpec()
	KeepCreateDefaults(&reapplied, &old)
	g.Expect(reapplied).To(Equal(old), "a re-applied manifest without the defaults gets them back")

	changed := vmSpec()
	changed.DiskClone, changed.StorageDomainName = ptr.To(false), "other"
	KeepCreateDefaults(&changed, &old)
	g.Expect(*changed.DiskClone).To(BeFalse(), "explicit values are left for the immutability check")
	g.Expect(changed.StorageDomainName).To(Equal("other"))
}

func TestValidateVMSpec(t *testing.T) {
	path := field.NewPath("spec")
	tests := []struct {
		name    string
		mutate  func(*infrav1.OVirtVMSpec)
		wantErr []string // substrings, one per expected error, in order
	}{
		{"the product doc example is valid", nil, nil},
		{"a storage domain is not decided here: only the Engine knows whether it holds the template's disks (storagerule)",
			func(s *infrav1.OVirtVMSpec) { s.StorageDomainName = "fast-ssd" }, nil},
		{"an empty provider is required", func(s *infrav1.OVirtVMSpec) { s.Provider = "" }, []string{"spec.provider: Required value: set the name of the cluster-scoped OVirtProvider"}},
		{"a blank provider is required", func(s *infrav1.OVirtVMSpec) { s.Provider = "  " }, []string{"spec.provider: Required value"}},
		{"an empty oVirt cluster is required", func(s *infrav1.OVirtVMSpec) { s.OVirtCluster = "" }, []string{"spec.ovirtcluster: Required value: set the oVirt cluster"}},
		{"an empty template is required", func(s *infrav1.OVirtVMSpec) { s.Template = "" }, []string{"spec.template: Required value: set the oVirt VM template"}},
		{"an omitted OS disk size keeps the template's", func(s *infrav1.OVirtVMSpec) { s.OSDiskSizeGB = 0 }, nil},
		{"an OS disk of 1 GiB is valid", func(s *infrav1.OVirtVMSpec) { s.OSDiskSizeGB = 1 }, nil},
		{"an OS disk of 65536 GiB is valid", func(s *infrav1.OVirtVMSpec) { s.OSDiskSizeGB = 65536 }, nil},
		{"an OS disk of 65537 GiB is refused", func(s *infrav1.OVirtVMSpec) { s.OSDiskSizeGB = 65537 }, []string{"spec.osdisksizegb: Invalid value: 65537: must be between 1 and 65536 (GiB)"}},
		{"a negative OS disk size is refused", func(s *infrav1.OVirtVMSpec) { s.OSDiskSizeGB = -1 }, []string{"spec.osdisksizegb: Invalid value: -1"}},
		{"zero sockets are refused", func(s *infrav1.OVirtVMSpec) { s.CPU.Sockets = 0 }, []string{"spec.cpu.sockets: Invalid value: 0: must be between 1 and 16 (oVirt's MaxNumOfVmSockets)"}},
		{"17 sockets are refused", func(s *infrav1.OVirtVMSpec) { s.CPU.Sockets = 17 }, []string{"spec.cpu.sockets: Invalid value: 17"}},
		{"zero cores are refused", func(s *infrav1.OVirtVMSpec) { s.CPU.Cores = 0 }, []string{"spec.cpu.cores: Invalid value: 0: must be between 1 and 254"}},
		{"255 cores are refused", func(s *infrav1.OVirtVMSpec) { s.CPU.Cores = 255 }, []string{"spec.cpu.cores: Invalid value: 255"}},
		{"zero threads are refused", func(s *infrav1.OVirtVMSpec) { s.CPU.Threads = 0 }, []string{"spec.cpu.threads: Invalid value: 0: must be between 1 and 8"}},
		{"9 threads are refused", func(s *infrav1.OVirtVMSpec) { s.CPU.Threads = 9 }, []string{"spec.cpu.threads: Invalid value: 9"}},
		{"the largest topology is valid", func(s *infrav1.OVirtVMSpec) { s.CPU = &infrav1.CPU{Sockets: 16, Cores: 254, Threads: 8} }, nil},
		{"an omitted cpu keeps the template's", func(s *infrav1.OVirtVMSpec) { s.CPU = nil }, nil},
		{"guaranteed memory above the size is refused", func(s *infrav1.OVirtVMSpec) { s.Memory.GuaranteedMB = 8193 },
			[]string{"spec.memory.guaranteedmb: Invalid value: 8193: must not exceed memory.sizemb (8192): lower memory.guaranteedmb or raise memory.sizemb"}},
		{"guaranteed memory equal to the size is valid", func(s *infrav1.OVirtVMSpec) { s.Memory.GuaranteedMB = 8192 }, nil},
		{"negative guaranteed memory is refused", func(s *infrav1.OVirtVMSpec) { s.Memory.GuaranteedMB = -1 }, []string{"spec.memory.guaranteedmb: Invalid value: -1: must not be negative"}},
		{"a zero memory size is refused", func(s *infrav1.OVirtVMSpec) { s.Memory = &infrav1.Memory{SizeMB: 0} }, []string{"spec.memory.sizemb: Invalid value: 0: must be between 1 and 67108864"}},
		{"an unknown VM type is refused", func(s *infrav1.OVirtVMSpec) { s.VMType = "workstation" },
			[]string{`spec.vmtype: Invalid value: "workstation": must be one of server, desktop, high_performance`}},
		{"every VM type of oVirt is valid", func(s *infrav1.OVirtVMSpec) { s.VMType = infrav1.VMTypeHighPerformance }, nil},
		{"an empty vNIC profile is refused with its index", func(s *infrav1.OVirtVMSpec) { s.NICs = append(s.NICs, infrav1.NIC{}) },
			[]string{"spec.nics[1].vnicprofile: Required value: set the name of the oVirt vNIC profile"}},
		{"a blank vNIC profile is refused", func(s *infrav1.OVirtVMSpec) { s.NICs[0].VnicProfile = " " }, []string{"spec.nics[0].vnicprofile: Required value"}},
		{"33 NICs are refused", func(s *infrav1.OVirtVMSpec) {
			s.NICs = make([]infrav1.NIC, 33)
			for i := range s.NICs {
				s.NICs[i].VnicProfile = "ovirtmgmt"
			}
		}, []string{"spec.nics: Too many: 33: must have at most 32 items"}},
		{"every anti-affinity policy is valid", func(s *infrav1.OVirtVMSpec) { s.AntiAffinity = infrav1.AntiAffinityHard }, nil},
		{"an omitted anti-affinity is valid", func(s *infrav1.OVirtVMSpec) { s.AntiAffinity = "" }, nil},
		{"an anti-affinity in the wrong case is refused with the valid values", func(s *infrav1.OVirtVMSpec) { s.AntiAffinity = "hard" },
			[]string{`spec.antiAffinity: Invalid value: "hard": must be one of None, Soft, Hard (case-sensitive); ` +
				"omit it for no anti-affinity group (control-plane machines follow the OVirtCluster's spec.controlPlaneAntiAffinity)"}},
		{"affinity groups are valid", func(s *infrav1.OVirtVMSpec) { s.AffinityGroups = []string{"db-spread", "rack-a"} }, nil},
		{"an empty affinity group is refused with its index", func(s *infrav1.OVirtVMSpec) { s.AffinityGroups = []string{"db-spread", ""} },
			[]string{"spec.affinityGroups[1]: Required value: set the name of an existing oVirt affinity group of the VM's oVirt cluster, e.g. affinityGroups: [db-spread], or remove the entry"}},
		{"a blank affinity group is refused", func(s *infrav1.OVirtVMSpec) { s.AffinityGroups = []string{" "} }, []string{"spec.affinityGroups[0]: Required value"}},
		{"a repeated affinity group is refused", func(s *infrav1.OVirtVMSpec) { s.AffinityGroups = []string{"db-spread", "rack-a", "db-spread"} },
			[]string{`spec.affinityGroups[2]: Duplicate value: "db-spread": each affinity group is listed once: remove the repeated entry`}},
		{"an affinity group name longer than oVirt's is refused", func(s *infrav1.OVirtVMSpec) { s.AffinityGroups = []string{strings.Repeat("g", 256)} },
			[]string{"spec.affinityGroups[0]: Too long: may not be more than 255"}},
		{"17 affinity groups are refused", func(s *infrav1.OVirtVMSpec) {
			for i := range 17 {
				s.AffinityGroups = append(s.AffinityGroups, fmt.Sprintf("g-%d", i))
			}
		}, []string{"spec.affinityGroups: Too many: 17: must have at most 16 items"}},
		{"several mistakes are all reported", func(s *infrav1.OVirtVMSpec) {
			s.Template, s.OSDiskSizeGB, s.CPU.Cores = "", 70000, 0
		}, []string{"spec.template", "spec.osdisksizegb", "spec.cpu.cores"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := vmSpec()
			if tt.mutate != nil {
				tt.mutate(&spec)
			}
			errs := ValidateVMSpec(&spec, path)
			g.Expect(errs).To(HaveLen(len(tt.wantErr)), "%v", errs)
			for i, want := range tt.wantErr {
				g.Expect(errs[i].Error()).To(ContainSubstring(want))
			}
		})
	}
}

func TestValidateVMSpecUsesTheTemplatePath(t *testing.T) {
	g := NewWithT(t)
	spec := vmSpec()
	spec.CPU.Sockets = 0
	errs := ValidateVMSpec(&spec, field.NewPath("spec", "template", "spec"))
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Field).To(Equal("spec.template.spec.cpu.sockets"))
}

func TestEveryDenialSaysHowToFixIt(t *testing.T) {
	// A message that only says what is wrong leaves users guessing; each one carries a fix.
	spec := infrav1.OVirtVMSpec{
		StorageDomainName: "x", OSDiskSizeGB: -1, VMType: "x",
		CPU: &infrav1.CPU{}, Memory: &infrav1.Memory{SizeMB: 1, GuaranteedMB: 2}, NICs: []infrav1.NIC{{}},
		AntiAffinity: "x", AffinityGroups: []string{"", "a", "a"},
	}
	for _, e := range ValidateVMSpec(&spec, field.NewPath("spec")) {
		if e.Type == field.ErrorTypeTooMany || e.Type == field.ErrorTypeTooLong {
			continue // "must have at most N items" / "may not be more than N bytes" is the fix
		}
		NewWithT(t).Expect(containsAny(e.Detail, "set ", "omit", "remove", "lower", "raise", "must be")).
			To(BeTrue(), "%s has no fix: %q", e.Field, e.Detail)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestChangedFields(t *testing.T) {
	g := NewWithT(t)
	old := infrav1.OVirtMachineSpec{OVirtVMSpec: vmSpec()}
	changed := *old.DeepCopy()
	changed.Template, changed.ProviderID, changed.NICs = "other", "ovirt://1", []infrav1.NIC{{VnicProfile: "x"}}
	paths := changedFields(field.NewPath("spec"), &old, &changed)
	g.Expect(paths).To(HaveLen(3))
	g.Expect([]string{paths[0].String(), paths[1].String(), paths[2].String()}).
		To(Equal([]string{"spec.template", "spec.nics", "spec.providerID"}), "inline fields are flattened like JSON")
	g.Expect(changedFields(field.NewPath("spec"), &old, old.DeepCopy())).To(BeEmpty())
	g.Expect(changedFields(field.NewPath("spec"), (*infrav1.OVirtMachineSpec)(nil), &old)).To(HaveLen(1), "a nil side is a change, not a panic")
	g.Expect(changedFields(field.NewPath("spec"), (*infrav1.OVirtMachineSpec)(nil), (*infrav1.OVirtMachineSpec)(nil))).To(BeEmpty())
}
