package featuregates

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name         string
		in           string
		want         Gates
		wantWarnings int
	}{
		{"an empty value gives the defaults", "", Gates{DiskKeepTemplateName: true}, 0},
		{"the product doc example is applied", "disk-keep-template-name=true,disk-add-vm-name=false", Gates{DiskKeepTemplateName: true}, 0},
		{"every gate can be flipped", "disk-keep-template-name=false,disk-add-vm-name=true,disk-clone=true", Gates{DiskAddVMName: true, DiskClone: true}, 0},
		{"spaces and empty items are tolerated", " disk-clone = true ,, ", Gates{DiskKeepTemplateName: true, DiskClone: true}, 0},
		{"an unknown key is ignored with a warning", "disk-clone=true,disk-magic=true", Gates{DiskKeepTemplateName: true, DiskClone: true}, 1},
		{"an invalid value is ignored with a warning", "disk-clone=yes-please", Gates{DiskKeepTemplateName: true}, 1},
		{"a key without a value is ignored with a warning", "disk-clone", Gates{DiskKeepTemplateName: true}, 1},
		{"the last valid value of a repeated key wins", "disk-clone=true,disk-clone=false", Gates{DiskKeepTemplateName: true}, 0},
		{"keys are case-sensitive", "Disk-Clone=true", Gates{DiskKeepTemplateName: true}, 1},
		{"strconv spellings of booleans are accepted", "disk-clone=1,disk-add-vm-name=T", Gates{DiskKeepTemplateName: true, DiskClone: true, DiskAddVMName: true}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, warnings := Parse(tt.in)
			g.Expect(got).To(Equal(tt.want))
			g.Expect(warnings).To(HaveLen(tt.wantWarnings))
		})
	}
}

func TestWarningsNameTheOffendingKey(t *testing.T) {
	g := NewWithT(t)
	_, warnings := Parse("disk-magic=true,disk-clone=maybe")
	g.Expect(warnings).To(HaveLen(2))
	g.Expect(warnings[0]).To(ContainSubstring(`"disk-magic"`))
	g.Expect(warnings[0]).To(ContainSubstring("disk-clone, disk-keep-template-name"))
	g.Expect(warnings[1]).To(ContainSubstring(`"maybe"`))
}

func TestStringIsSortedAndRoundTrips(t *testing.T) {
	g := NewWithT(t)
	gates := Gates{DiskAddVMName: true, DiskClone: false, DiskKeepTemplateName: true}
	g.Expect(gates.String()).To(Equal("disk-add-vm-name=true,disk-clone=false,disk-keep-template-name=true"))
	back, warnings := Parse(gates.String())
	g.Expect(warnings).To(BeEmpty())
	g.Expect(back).To(Equal(gates))
}

func TestFlagAccumulatesRepeatedFlags(t *testing.T) {
	g := NewWithT(t)
	var f Flag
	g.Expect(f.Set("disk-clone=true")).To(Succeed())
	g.Expect(f.Set("disk-add-vm-name=true")).To(Succeed())
	got, warnings := f.Resolve()
	g.Expect(warnings).To(BeEmpty())
	g.Expect(got).To(Equal(Gates{DiskKeepTemplateName: true, DiskClone: true, DiskAddVMName: true}))
	g.Expect(f.Type()).To(Equal("mapStringBool"))
	g.Expect(Usage()).To(ContainSubstring("disk-clone=true|false (default false)"))
}

func TestEnabledOfUnknownGateIsFalse(t *testing.T) {
	NewWithT(t).Expect(Defaults().Enabled("nope")).To(BeFalse())
}
