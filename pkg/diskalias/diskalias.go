// Package diskalias computes the aliases CAPOV gives the disks a VM inherits from its template,
// following the disk-keep-template-name and disk-add-vm-name feature gates (product doc §6).
//
// oVirt copies template disk aliases verbatim, so every VM of a template has disks called
// "rhcos-4.14_Disk1". With disk-add-vm-name the VM name is put into the alias:
//
//	keep=true,  add=false  rhcos-4.14_Disk1               (default: nothing is renamed)
//	keep=true,  add=true   rhcos-4.14_worker-abc123_Disk1
//	keep=false, add=true   worker-abc123_Disk1
//	keep=false, add=false  rhcos-4.14_Disk1               (nothing is renamed)
package diskalias

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/capov/capov/pkg/featuregates"
)

// MaxLength is the longest alias the oVirt Engine stores.
const MaxLength = 255

// diskSuffix matches the "_Disk<n>" suffix oVirt gives template disks.
var diskSuffix = regexp.MustCompile(`_Disk\d*$`)

// For returns the alias the disk should have, and whether it differs from current. index is
// the 1-based position of the disk among the VM's template disks; it numbers an alias that has
// no "_Disk<n>" suffix when the template part is dropped.
func For(gates featuregates.Gates, vmName, current string, index int) (string, bool) {
	if !gates.DiskAddVMName || vmName == "" {
		return current, false
	}
	// Renaming is idempotent: an alias that already names the VM is left alone, whatever
	// the gates (a rename done under other gates is not undone either).
	if strings.Contains(current, vmName) {
		return current, false
	}
	suffix := diskSuffix.FindString(current)
	prefix := strings.TrimSuffix(current, suffix)
	var out string
	switch {
	case gates.DiskKeepTemplateName && suffix != "":
		out = prefix + "_" + vmName + suffix
	case gates.DiskKeepTemplateName:
		out = current + "_" + vmName
	case suffix != "":
		out = vmName + suffix
	default:
		out = vmName + "_Disk" + strconv.Itoa(index)
	}
	if len(out) > MaxLength {
		// Keep the distinguishing end (VM name and suffix) when the alias is too long.
		out = out[len(out)-MaxLength:]
	}
	return out, out != current
}

// ForDataDisk returns the alias of the data disk called name (spec.dataDisks[].name) of the VM:
// with disk-add-vm-name "<vm name>_<name>", so that it can be told from the data disks of other
// VMs in oVirt's disk list, else name alone.
func ForDataDisk(gates featuregates.Gates, vmName, name string) string {
	out := name
	if gates.DiskAddVMName && vmName != "" {
		out = vmName + "_" + name
	}
	if len(out) > MaxLength {
		out = out[len(out)-MaxLength:]
	}
	return out
}
