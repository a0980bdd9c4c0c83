// Package featuregates defines CAPOV's feature gates and the parser of the --feature-gates flag
// shared by the manager and the webhook binaries.
//
// The product contract (product doc §6) is that unknown keys and invalid values are ignored.
// Ignored is not silent: Parse returns a warning for each, and both binaries log them next to
// the resolved set, in one start-up line that contains "feature gates".
package featuregates

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Gate is the name of a feature gate as written in --feature-gates.
type Gate string

// The gates CAPOV knows.
const (
	// DiskKeepTemplateName keeps the template part of disk aliases when DiskAddVMName renames
	// them ("<template>_<vm>_Disk1"); when false the alias becomes "<vm>_Disk1".
	DiskKeepTemplateName Gate = "disk-keep-template-name"
	// DiskAddVMName puts the VM name into the aliases of the disks a VM gets from its template,
	// so that disks are recognisable in Storage -> Disks.
	DiskAddVMName Gate = "disk-add-vm-name"
	// DiskClone is the default of diskclone when neither the OVirtMachine nor its OVirtProvider
	// sets it: true clones template disks, false creates thin disks.
	DiskClone Gate = "disk-clone"
)

// Known lists every gate with its default, in the order they are documented.
var known = []struct {
	gate Gate
	def  bool
}{
	{DiskKeepTemplateName, true},
	{DiskAddVMName, false},
	{DiskClone, false},
}

// Gates is a resolved set of feature gates.
type Gates struct {
	// DiskKeepTemplateName is the value of disk-keep-template-name.
	DiskKeepTemplateName bool
	// DiskAddVMName is the value of disk-add-vm-name.
	DiskAddVMName bool
	// DiskClone is the value of disk-clone.
	DiskClone bool
}

// Defaults returns the gates with their default values.
func Defaults() Gates {
	g := Gates{}
	for _, k := range known {
		g.set(k.gate, k.def)
	}
	return g
}

func (g *Gates) set(name Gate, v bool) bool {
	switch name {
	case DiskKeepTemplateName:
		g.DiskKeepTemplateName = v
	case DiskAddVMName:
		g.DiskAddVMName = v
	case DiskClone:
		g.DiskClone = v
	default:
		return false
	}
	return true
}

// Enabled reports the value of one gate; unknown gates are false.
func (g Gates) Enabled(name Gate) bool {
	switch name {
	case DiskKeepTemplateName:
		return g.DiskKeepTemplateName
	case DiskAddVMName:
		return g.DiskAddVMName
	case DiskClone:
		return g.DiskClone
	}
	return false
}

// String renders the gates as a --feature-gates value, sorted by name, e.g.
// "disk-add-vm-name=false,disk-clone=false,disk-keep-template-name=true".
func (g Gates) String() string {
	names := make([]string, 0, len(known))
	for _, k := range known {
		names = append(names, string(k.gate))
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+"="+strconv.FormatBool(g.Enabled(Gate(n))))
	}
	return strings.Join(parts, ",")
}

// Parse resolves a --feature-gates value ("k=v,k=v") on top of the defaults. It never fails:
// as the product documents, unknown keys and invalid values are ignored, and each one is
// described in the returned warnings so that the binaries can log it. Keys are case-sensitive
// and surrounding spaces are trimmed; values are anything strconv.ParseBool accepts. A key given
// twice takes its last valid value.
func Parse(value string) (Gates, []string) {
	g := Defaults()
	var warnings []string
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, val, found := strings.Cut(item, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !found {
			warnings = append(warnings, fmt.Sprintf("ignoring feature gate %q: expected key=true|false", item))
			continue
		}
		b, err := strconv.ParseBool(val)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("ignoring feature gate %q: invalid value %q, expected true or false", key, val))
			continue
		}
		if !g.set(Gate(key), b) {
			warnings = append(warnings, fmt.Sprintf("ignoring unknown feature gate %q (known: %s)", key, strings.Join(Names(), ", ")))
		}
	}
	return g, warnings
}

// Names returns the names of all known gates, sorted.
func Names() []string {
	out := make([]string, 0, len(known))
	for _, k := range known {
		out = append(out, string(k.gate))
	}
	sort.Strings(out)
	return out
}

// Flag is a pflag.Value / flag.Value for --feature-gates that keeps the raw string; call
// Resolve after flags are parsed.
type Flag struct {
	raw string
}

// String returns the raw flag value.
func (f *Flag) String() string { return f.raw }

// Set stores the raw flag value; validation happens in Resolve, because invalid gates must not
// stop the binary.
func (f *Flag) Set(v string) error {
	if f.raw != "" && v != "" {
		f.raw += "," + v
		return nil
	}
	if v != "" {
		f.raw = v
	}
	return nil
}

// Type names the flag type for pflag help output.
func (f *Flag) Type() string { return "mapStringBool" }

// Resolve parses the raw value.
func (f *Flag) Resolve() (Gates, []string) { return Parse(f.raw) }

// Usage is the help text of --feature-gates.
func Usage() string {
	parts := make([]string, 0, len(known))
	for _, k := range known {
		parts = append(parts, fmt.Sprintf("%s=true|false (default %t)", k.gate, k.def))
	}
	return "Comma-separated feature gates, key=value. Unknown keys and invalid values are ignored with a warning. Gates: " +
		strings.Join(parts, ", ")
}

// EnableDiskCloneHint names the three ways to turn disk cloning on (product doc §6), for the
// OVirtProvider providerName; messages about another storage domain end with it.
func EnableDiskCloneHint(providerName string) string {
	return fmt.Sprintf("set spec.diskclone: true on the OVirtMachine/OVirtMachineTemplate (the node group's Clone disk = Yes), "+
		"set spec.diskclone: true on OVirtProvider %s, or enable the disk-clone feature gate of shturval-capov "+
		"(customvalues.featureGates.disk-clone: true)", providerName)
}
