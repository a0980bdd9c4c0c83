package diskalias

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/featuregates"
)

func TestFor(t *testing.T) {
	const vm = "worker-abc123"
	tests := []struct {
		name      string
		keep, add bool
		current   string
		index     int
		want      string
		changed   bool
	}{
		{"the defaults rename nothing", true, false, "rhcos-4.14_Disk1", 1, "rhcos-4.14_Disk1", false},
		{"keep and add insert the VM name before the suffix", true, true, "rhcos-4.14_Disk1", 1, "rhcos-4.14_worker-abc123_Disk1", true},
		{"add without keep drops the template part", false, true, "rhcos-4.14_Disk1", 1, "worker-abc123_Disk1", true},
		{"neither keep nor add renames nothing", false, false, "rhcos-4.14_Disk1", 1, "rhcos-4.14_Disk1", false},
		{"an alias that already names the VM is not renamed again", true, true, "rhcos-4.14_worker-abc123_Disk1", 1, "rhcos-4.14_worker-abc123_Disk1", false},
		{"without keep an alias that names the VM is not renamed", false, true, "rhcos-4.14_worker-abc123_Disk1", 1, "rhcos-4.14_worker-abc123_Disk1", false},
		{"a second disk keeps its number", true, true, "rhcos-4.14_Disk2", 2, "rhcos-4.14_worker-abc123_Disk2", true},
		{"keep appends the VM name to an alias without suffix", true, true, "root", 1, "root_worker-abc123", true},
		{"without keep an alias without suffix gets the disk index", false, true, "root", 3, "worker-abc123_Disk3", true},
		{"a bare _Disk suffix is kept", false, true, "tpl_Disk", 1, "worker-abc123_Disk", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			gates := featuregates.Gates{DiskKeepTemplateName: tt.keep, DiskAddVMName: tt.add}
			got, changed := For(gates, vm, tt.current, tt.index)
			g.Expect(got).To(Equal(tt.want))
			g.Expect(changed).To(Equal(tt.changed))
		})
	}
}

func TestForKeepsAliasesWithinTheEngineLimit(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("t", 250) + "_Disk1"
	got, changed := For(featuregates.Gates{DiskKeepTemplateName: true, DiskAddVMName: true}, "vm-1", long, 1)
	g.Expect(changed).To(BeTrue())
	g.Expect(len(got)).To(Equal(MaxLength))
	g.Expect(got).To(HaveSuffix("_vm-1_Disk1"))
}

func FuzzFor(f *testing.F) {
	f.Add("worker-1", "rhcos_Disk1", 1, true, true)
	f.Add("", "", 0, false, true)
	f.Fuzz(func(t *testing.T, vm, current string, index int, keep, add bool) {
		gates := featuregates.Gates{DiskKeepTemplateName: keep, DiskAddVMName: add}
		got, changed := For(gates, vm, current, index)
		if changed && len(got) > MaxLength {
			t.Fatalf("alias longer than %d: %q", MaxLength, got)
		}
		// Idempotent: renaming the result again changes nothing.
		if again, ch := For(gates, vm, got, index); changed && ch && len(got) < MaxLength {
			t.Fatalf("not idempotent: %q -> %q -> %q", current, got, again)
		}
	})
}

func TestForDataDisk(t *testing.T) {
	if got := ForDataDisk(featuregates.Gates{DiskAddVMName: true}, "worker-abc", "etcd"); got != "worker-abc_etcd" {
		t.Errorf("with disk-add-vm-name: %q, want worker-abc_etcd", got)
	}
	if got := ForDataDisk(featuregates.Gates{}, "worker-abc", "etcd"); got != "etcd" {
		t.Errorf("without disk-add-vm-name: %q, want etcd", got)
	}
}
