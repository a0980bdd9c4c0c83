package webhooks

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// TestVMContentsAdmission: what admission refuses offline about the VM contents, each error on
// the field with its fix, and what it leaves to the Engine.
func TestVMContentsAdmission(t *testing.T) {
	base := func(mut func(*infrav1.OVirtVMSpec)) *infrav1.OVirtVMSpec {
		s := &infrav1.OVirtVMSpec{Provider: "p", OVirtCluster: "Default", Template: "t"}
		mut(s)
		return s
	}
	tests := []specCase{
		{"an etcd disk, preallocated, format left to the manager", base(func(s *infrav1.OVirtVMSpec) {
			s.DataDisks = []infrav1.DataDisk{{Name: "etcd", SizeGB: 20, Preallocated: true}}
		}), "", ""},
		{"raw and thin is the Engine's to judge (file domains take it)", base(func(s *infrav1.OVirtVMSpec) {
			s.DataDisks = []infrav1.DataDisk{{Name: "scratch", SizeGB: 20, Format: infrav1.DiskFormatRaw}}
		}), "", ""},
		{"a preallocated cow data disk", base(func(s *infrav1.OVirtVMSpec) {
			s.DataDisks = []infrav1.DataDisk{{Name: "etcd", SizeGB: 20, Format: infrav1.DiskFormatCow, Preallocated: true}}
		}), "spec.dataDisks[0].format", "use format raw"},
		{"two data disks of one name", base(func(s *infrav1.OVirtVMSpec) {
			s.DataDisks = []infrav1.DataDisk{{Name: "d", SizeGB: 1}, {Name: "d", SizeGB: 2}}
		}), "spec.dataDisks[1].name", "Duplicate"},
		{"a data disk name that is no DNS label", base(func(s *infrav1.OVirtVMSpec) {
			s.DataDisks = []infrav1.DataDisk{{Name: "Etcd_1", SizeGB: 1}}
		}), "spec.dataDisks[0].name", "lower-case"},
		{"a data disk of no size", base(func(s *infrav1.OVirtVMSpec) { s.DataDisks = []infrav1.DataDisk{{Name: "d"}} }),
			"spec.dataDisks[0].sizeGB", "between 1 and 65536"},
		{"a data disk on an unknown interface", base(func(s *infrav1.OVirtVMSpec) {
			s.DataDisks = []infrav1.DataDisk{{Name: "d", SizeGB: 1, Interface: "ide"}}
		}), "spec.dataDisks[0].interface", "virtio_scsi"},
		{"a preallocated OS disk with the machine's own diskclone false", base(func(s *infrav1.OVirtVMSpec) {
			s.DiskClone = ptr.To(false)
			s.OSDisk = &infrav1.OSDisk{Preallocated: ptr.To(true)}
		}), "spec.osDisk", "set diskclone: true"},
		{"a preallocated cow OS disk", base(func(s *infrav1.OVirtVMSpec) {
			s.DiskClone = ptr.To(true)
			s.OSDisk = &infrav1.OSDisk{Format: infrav1.DiskFormatCow, Preallocated: ptr.To(true)}
		}), "spec.osDisk.format", "use format raw"},
		{"a preallocated OS disk, cloned", base(func(s *infrav1.OVirtVMSpec) {
			s.DiskClone = ptr.To(true)
			s.OSDisk = &infrav1.OSDisk{Preallocated: ptr.To(true)}
		}), "", ""},
		{"a tag with a space", base(func(s *infrav1.OVirtVMSpec) { s.Tags = []string{"daily backup"} }), "spec.tags[0]", "letters, digits"},
		{"a tag longer than the Engine's 50", base(func(s *infrav1.OVirtVMSpec) { s.Tags = []string{strings.Repeat("a", 51)} }), "spec.tags[0]", "1 to 50"},
		{"a custom property value with the separator", base(func(s *infrav1.OVirtVMSpec) {
			s.CustomProperties = []infrav1.CustomProperty{{Name: "viodiskcache", Value: "a;b"}}
		}), "spec.customProperties[0].value", "';'"},
		{"hugepages as a custom property", base(func(s *infrav1.OVirtVMSpec) {
			s.CustomProperties = []infrav1.CustomProperty{{Name: "hugepages", Value: "2048"}}
		}), "spec.customProperties[0].name", "performance.hugePagesKiB"},
		{"an unknown custom property is the Engine's to judge", base(func(s *infrav1.OVirtVMSpec) {
			s.CustomProperties = []infrav1.CustomProperty{{Name: "my_hook", Value: "on"}}
		}), "", ""},
		{"a lease without high availability", base(func(s *infrav1.OVirtVMSpec) {
			s.HighAvailability = &infrav1.HighAvailability{LeaseStorageDomain: "data"}
		}), "spec.highAvailability.leaseStorageDomain", "enabled: true"},
		{"a lease with a resume behaviour oVirt overrides", base(func(s *infrav1.OVirtVMSpec) {
			s.HighAvailability = &infrav1.HighAvailability{Enabled: true, LeaseStorageDomain: "data", ResumeBehaviour: infrav1.ResumeBehaviourAutoResume}
		}), "spec.highAvailability.resumeBehaviour", "use Kill"},
		{"ballooning hugepage-backed memory", base(func(s *infrav1.OVirtVMSpec) {
			s.Performance = &infrav1.Performance{HugePagesKiB: infrav1.HugePages2Mi, Ballooning: ptr.To(true)}
		}), "spec.performance.ballooning", "ballooning: false"},
		{"a hugepage size oVirt does not offer", base(func(s *infrav1.OVirtVMSpec) {
			s.Performance = &infrav1.Performance{HugePagesKiB: 4}
		}), "spec.performance.hugePagesKiB", "2048"},
		{"auto pinning with a CPU topology", base(func(s *infrav1.OVirtVMSpec) {
			s.CPU = &infrav1.CPU{Sockets: 1, Cores: 4, Threads: 1}
			s.Performance = &infrav1.Performance{AutoPinning: infrav1.AutoPinningAdjust}
		}), "spec.performance.autoPinning", "remove spec.cpu"},
		{"a full high-performance profile", base(func(s *infrav1.OVirtVMSpec) {
			s.VMType = infrav1.VMTypeHighPerformance
			s.Memory = &infrav1.Memory{SizeMB: 8192}
			s.Performance = &infrav1.Performance{CPUMode: infrav1.CPUModeHostPassthrough, AutoPinning: infrav1.AutoPinningAdjust,
				HugePagesKiB: infrav1.HugePages1Gi, IOThreads: 1, MultiQueues: ptr.To(true), Ballooning: ptr.To(false)}
		}), "", ""},
	}
	runSpecCases(t, tests)
}

// specCase is a VM spec and what admission says of it: accepted (wantField ""), or one error on
// wantField whose text contains wantText.
type specCase struct {
	name      string
	spec      *infrav1.OVirtVMSpec
	wantField string
	wantText  string
}

// runSpecCases checks each case against ValidateVMSpec.
func runSpecCases(t *testing.T, tests []specCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			errs := ValidateVMSpec(tt.spec, field.NewPath("spec"))
			if tt.wantField == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs).To(HaveLen(1), "%v", errs)
			g.Expect(errs[0].Field).To(Equal(tt.wantField))
			g.Expect(errs[0].Error()).To(ContainSubstring(tt.wantText))
		})
	}
}

// TestOSDiskWarnsWhenTheProviderMakesItThin: a machine that leaves diskclone empty while the
// provider resolves it to false is admitted with a warning naming what the manager will do.
func TestOSDiskWarnsWhenTheProviderMakesItThin(t *testing.T) {
	g := NewWithT(t)
	spec := &infrav1.OVirtVMSpec{OSDisk: &infrav1.OSDisk{Preallocated: ptr.To(true)}}
	g.Expect(contentsWarnings(spec, field.NewPath("spec"), ptr.To(false))).To(ConsistOf(ContainSubstring("OSDiskNeedsClone")))
	g.Expect(contentsWarnings(spec, field.NewPath("spec"), ptr.To(true))).To(BeEmpty())
	spec.DiskClone = ptr.To(true)
	g.Expect(contentsWarnings(spec, field.NewPath("spec"), ptr.To(true))).To(BeEmpty())
}

// TestMemoryThatIsNoMultipleOfTheHugepageSizeIsAWarning: the Engine reserves whole pages (it
// does not refuse it): admitted, with a warning that says what is lost.
func TestMemoryThatIsNoMultipleOfTheHugepageSizeIsAWarning(t *testing.T) {
	g := NewWithT(t)
	spec := &infrav1.OVirtVMSpec{Provider: "p", OVirtCluster: "Default", Template: "t", Memory: &infrav1.Memory{SizeMB: 3000},
		Performance: &infrav1.Performance{HugePagesKiB: infrav1.HugePages1Gi}}
	g.Expect(ValidateVMSpec(spec, field.NewPath("spec"))).To(BeEmpty())
	g.Expect(contentsWarnings(spec, field.NewPath("spec"), nil)).To(ConsistOf(ContainSubstring("oVirt reserves 3 pages (3072 MiB)")))
}
