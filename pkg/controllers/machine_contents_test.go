package controllers

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// TestADataDiskIsOwnOnlyWithAProofForThisVM: the data-disk marker proves a disk is this VM's own
// only with a proof under the Cluster's key for this VM and name; a copied description, a marker
// for another VM, a forged proof, another key, no marker, and a name two disks claim prove
// nothing (such disks block the deletion).
func TestADataDiskIsOwnOnlyWithAProofForThisVM(t *testing.T) {
	g := NewWithT(t)
	key := []byte(strings.Repeat("k", 32))
	other := []byte(strings.Repeat("o", 32))
	marker := func(name, vmID string, key []byte) string {
		m := dataDiskMarker{name: name, vmID: vmID}
		m.proof = m.sign(key)
		return m.String()
	}
	disks := []ovirt.Disk{
		{ID: "os", Bootable: true},
		{ID: "etcd", Description: marker("etcd", "vm-1", key)},
		{ID: "copied-from-vm-2", Description: marker("data", "vm-2", key)},
		{ID: "other-key", Description: marker("logs", "vm-1", other)},
		{ID: "forged", Description: "capov datadisk=scratch vm=vm-1 proof=AAAAAAAAAAAAAAAAAAAAAA"},
		{ID: "csi", Description: "pvc-0123"},
		{ID: "twin-1", Description: marker("twin", "vm-1", key)},
		{ID: "twin-2", Description: marker("twin", "vm-1", key)},
	}
	g.Expect(ownDataDisks(disks, "vm-1", key)).To(Equal(map[string]string{"etcd": "etcd"}))
	g.Expect(ownDataDisks(disks, "vm-1", nil)).To(BeEmpty(), "without the key nothing is proven")

	parsed, ok := parseDataDiskMarker(marker("etcd", "vm-1", key))
	g.Expect(ok).To(BeTrue())
	g.Expect(parsed.name).To(Equal("etcd"))
	g.Expect(parsed.vmID).To(Equal("vm-1"))
	for _, bad := range []string{"", "capov datadisk=", "capov datadisk=etcd", "capov datadisk=etcd vm= proof=x", "x capov datadisk=etcd vm=a proof=b"} {
		_, ok := parseDataDiskMarker(bad)
		g.Expect(ok).To(BeFalse(), bad)
	}
	g.Expect(isDataDiskOf(disks[1], "vm-1")).To(BeTrue())
	g.Expect(isDataDiskOf(disks[1], "vm-2")).To(BeFalse())
}

func TestDataDiskFormatFollowsPreallocation(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		format       infrav1.DiskFormat
		preallocated bool
		wantFormat   string
		wantSparse   bool
	}{
		{"", false, "cow", true},
		{"", true, "raw", false},
		{infrav1.DiskFormatRaw, false, "raw", true},
		{infrav1.DiskFormatRaw, true, "raw", false},
		{infrav1.DiskFormatCow, false, "cow", true},
	} {
		f, sparse := dataDiskFormat(tc.format, tc.preallocated)
		g.Expect(f).To(Equal(tc.wantFormat), "%+v", tc)
		g.Expect(sparse).To(Equal(tc.wantSparse), "%+v", tc)
	}
}
