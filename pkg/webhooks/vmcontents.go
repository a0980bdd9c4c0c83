package webhooks

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

var (
	// dataDiskName is the pattern of spec.dataDisks[].name (a DNS label, at most 40 characters).
	dataDiskName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// tagName is what the Engine accepts as a tag name (its ValidI18NName: letters, digits, '.',
	// '_' and '-').
	tagName = regexp.MustCompile(`^[\p{L}0-9._-]+$`)
	// customPropertyName is the Engine's key syntax (CustomPropertiesUtils.KEY_REGEX).
	customPropertyName = regexp.MustCompile(`^[a-zA-Z0-9_]+$`)
)

// hugepagesProperty is the oVirt custom property behind spec.performance.hugePagesKiB.
const hugepagesProperty = "hugepages"

// validateVMContents checks what can be decided offline about the VM contents: data disks, OS
// disk allocation, tags, custom properties, high availability and the performance profile.
// Combinations only the Engine can judge (raw and thin on a block storage domain, a property
// name its configuration does not know, hugepages no host has free) are left to it: the manager
// reports its answer in a condition.
func validateVMContents(spec *infrav1.OVirtVMSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateOSDisk(spec, path.Child("osDisk"))...)
	errs = append(errs, validateDataDisks(spec.DataDisks, path.Child("dataDisks"))...)
	errs = append(errs, ValidateTags(spec.Tags, path.Child("tags"))...)
	errs = append(errs, validateCustomProperties(spec, path.Child("customProperties"))...)
	errs = append(errs, validateHighAvailability(spec.HighAvailability, path.Child("highAvailability"))...)
	errs = append(errs, validatePerformance(spec, path.Child("performance"))...)
	errs = append(errs, validateGPUs(spec, path)...)
	return errs
}

// preallocatedCow is oVirt's refusal of a preallocated qcow2 image
// (ImagesHandler.checkImageConfiguration: COW with Preallocated needs incremental backup).
func preallocatedCow(format infrav1.DiskFormat, preallocated bool) bool {
	return preallocated && format == infrav1.DiskFormatCow
}

func validateOSDisk(spec *infrav1.OVirtVMSpec, path *field.Path) field.ErrorList {
	d := spec.OSDisk
	if d == nil {
		return nil
	}
	var errs field.ErrorList
	if d.Format != "" && d.Format != infrav1.DiskFormatCow && d.Format != infrav1.DiskFormatRaw {
		errs = append(errs, field.NotSupported(path.Child("format"), d.Format, []string{string(infrav1.DiskFormatCow), string(infrav1.DiskFormatRaw)}))
	}
	preallocated := ptr.Deref(d.Preallocated, false)
	if preallocatedCow(d.Format, preallocated) {
		errs = append(errs, field.Invalid(path.Child("format"), d.Format,
			"oVirt refuses a preallocated cow (qcow2) disk: use format raw, or omit format (raw when preallocated)"))
	}
	if spec.DiskClone != nil && !*spec.DiskClone && (preallocated || d.Format != "") {
		errs = append(errs, field.Invalid(path, "diskclone: false",
			"needs cloned disks: with diskclone false the VM's disks are thin overlays on the template's, whose format and allocation cannot change; set diskclone: true, or remove osDisk"))
	}
	return errs
}

func validateDataDisks(disks []infrav1.DataDisk, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(disks) > infrav1.MaxDataDisks {
		errs = append(errs, field.TooMany(path, len(disks), infrav1.MaxDataDisks))
	}
	seen := map[string]bool{}
	for i, d := range disks {
		p := path.Index(i)
		switch {
		case d.Name == "":
			errs = append(errs, field.Required(p.Child("name"), "name the disk, e.g. name: etcd (it goes into the disk's alias in oVirt)"))
		case len(d.Name) > 40 || !dataDiskName.MatchString(d.Name):
			errs = append(errs, field.Invalid(p.Child("name"), d.Name,
				"must be at most 40 lower-case letters, digits and '-', starting and ending with a letter or digit, e.g. etcd or data-1"))
		case seen[d.Name]:
			errs = append(errs, field.Duplicate(p.Child("name"), d.Name))
		}
		seen[d.Name] = true
		if d.SizeGB < 1 || d.SizeGB > infrav1.MaxDataDiskSizeGB {
			errs = append(errs, field.Invalid(p.Child("sizeGB"), d.SizeGB, fmt.Sprintf("must be between 1 and %d (GiB)", infrav1.MaxDataDiskSizeGB)))
		}
		if d.Interface != "" && d.Interface != infrav1.DiskInterfaceVirtioSCSI && d.Interface != infrav1.DiskInterfaceVirtio {
			errs = append(errs, field.NotSupported(p.Child("interface"), d.Interface,
				[]string{string(infrav1.DiskInterfaceVirtioSCSI), string(infrav1.DiskInterfaceVirtio)}))
		}
		if d.Format != "" && d.Format != infrav1.DiskFormatCow && d.Format != infrav1.DiskFormatRaw {
			errs = append(errs, field.NotSupported(p.Child("format"), d.Format, []string{string(infrav1.DiskFormatCow), string(infrav1.DiskFormatRaw)}))
		}
		if preallocatedCow(d.Format, d.Preallocated) {
			errs = append(errs, field.Invalid(p.Child("format"), d.Format,
				"oVirt refuses a preallocated cow (qcow2) disk: use format raw, or omit format (raw when preallocated)"))
		}
	}
	return errs
}

// ValidateTags checks oVirt tag names (a machine's, a template's or an OVirtCluster's
// spec.tags): 1 to 50 characters the Engine accepts, each once.
func ValidateTags(tags []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(tags) > infrav1.MaxTags {
		errs = append(errs, field.TooMany(path, len(tags), infrav1.MaxTags))
	}
	seen := map[string]bool{}
	for i, t := range tags {
		p := path.Index(i)
		switch {
		case utf8.RuneCountInString(t) < 1 || utf8.RuneCountInString(t) > infrav1.MaxTagNameLength:
			errs = append(errs, field.Invalid(p, t, fmt.Sprintf("must be 1 to %d characters, as oVirt's tag names", infrav1.MaxTagNameLength)))
		case !tagName.MatchString(t):
			errs = append(errs, field.Invalid(p, t, "oVirt tag names take letters, digits, '.', '_' and '-' only, e.g. backup-daily"))
		case seen[t]:
			errs = append(errs, field.Duplicate(p, t))
		}
		seen[t] = true
	}
	return errs
}

func validateCustomProperties(spec *infrav1.OVirtVMSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	props := spec.CustomProperties
	if len(props) > infrav1.MaxCustomProperties {
		errs = append(errs, field.TooMany(path, len(props), infrav1.MaxCustomProperties))
	}
	seen := map[string]bool{}
	for i, cp := range props {
		p := path.Index(i)
		switch {
		case cp.Name == "" || !customPropertyName.MatchString(cp.Name):
			errs = append(errs, field.Invalid(p.Child("name"), cp.Name,
				"oVirt custom property names take letters, digits and '_' only, e.g. viodiskcache"))
		case seen[cp.Name]:
			errs = append(errs, field.Duplicate(p.Child("name"), cp.Name))
		case cp.Name == hugepagesProperty:
			errs = append(errs, field.Invalid(p.Child("name"), cp.Name,
				"set spec.performance.hugePagesKiB (2048 or 1048576) instead of the hugepages custom property: the manager sets the property from it and checks the memory size"))
		}
		seen[cp.Name] = true
		if strings.Contains(cp.Value, ";") {
			errs = append(errs, field.Invalid(p.Child("value"), cp.Value,
				"cannot contain ';', oVirt's separator of custom properties"))
		}
	}
	return errs
}

// Resume behaviours, as the API names them.
var resumeBehaviours = []string{string(infrav1.ResumeBehaviourAutoResume), string(infrav1.ResumeBehaviourLeavePaused), string(infrav1.ResumeBehaviourKill)}

func validateHighAvailability(ha *infrav1.HighAvailability, path *field.Path) field.ErrorList {
	if ha == nil {
		return nil
	}
	var errs field.ErrorList
	if ha.Priority < 0 || ha.Priority > 100 {
		errs = append(errs, field.Invalid(path.Child("priority"), ha.Priority, "must be between 0 and 100 (oVirt: 1 low, 50 medium, 100 high)"))
	}
	if ha.ResumeBehaviour != "" && !contains(resumeBehaviours, string(ha.ResumeBehaviour)) {
		errs = append(errs, field.NotSupported(path.Child("resumeBehaviour"), ha.ResumeBehaviour, resumeBehaviours))
	}
	if !ha.Enabled && ha.LeaseStorageDomain != "" {
		errs = append(errs, field.Invalid(path.Child("leaseStorageDomain"), ha.LeaseStorageDomain,
			"a VM lease serves oVirt's high availability only: set highAvailability.enabled: true, or remove leaseStorageDomain"))
	}
	if ha.LeaseStorageDomain != "" && ha.ResumeBehaviour != "" && ha.ResumeBehaviour != infrav1.ResumeBehaviourKill {
		errs = append(errs, field.Invalid(path.Child("resumeBehaviour"), ha.ResumeBehaviour,
			"a highly available VM with a lease can only be killed after a storage error (oVirt restarts it elsewhere): use Kill, or omit resumeBehaviour"))
	}
	return errs
}

// Performance enums, as the API names them.
var (
	cpuModes     = []string{string(infrav1.CPUModeHostPassthrough), string(infrav1.CPUModeHostModel), string(infrav1.CPUModeCustom)}
	autoPinnings = []string{string(infrav1.AutoPinningDisabled), string(infrav1.AutoPinningExisting), string(infrav1.AutoPinningAdjust)}
)

func validatePerformance(spec *infrav1.OVirtVMSpec, path *field.Path) field.ErrorList {
	perf := spec.Performance
	if perf == nil {
		return nil
	}
	var errs field.ErrorList
	if perf.CPUMode != "" && !contains(cpuModes, string(perf.CPUMode)) {
		errs = append(errs, field.NotSupported(path.Child("cpuMode"), perf.CPUMode, cpuModes))
	}
	if perf.AutoPinning != "" && !contains(autoPinnings, string(perf.AutoPinning)) {
		errs = append(errs, field.NotSupported(path.Child("autoPinning"), perf.AutoPinning, autoPinnings))
	}
	if perf.AutoPinning != "" && spec.CPU != nil {
		// BackendVmsResource.addAutoPinningPolicy: 409 "CPU_UPDATE_NOT_PERMITTED" for a policy
		// together with a topology, the policy sets it.
		errs = append(errs, field.Invalid(path.Child("autoPinning"), perf.AutoPinning,
			"oVirt sets the CPU topology itself with an auto-pinning policy and refuses one given with it: remove spec.cpu (the VM starts from the template's topology), or remove autoPinning"))
	}
	if perf.IOThreads < 0 || perf.IOThreads > 64 {
		errs = append(errs, field.Invalid(path.Child("ioThreads"), perf.IOThreads, "must be between 0 and 64; omit it to keep the template's"))
	}
	switch perf.HugePagesKiB {
	case 0:
	case infrav1.HugePages2Mi, infrav1.HugePages1Gi:
		if ptr.Deref(perf.Ballooning, false) {
			errs = append(errs, field.Invalid(path.Child("ballooning"), true,
				"memory backed by hugepages cannot be ballooned: set ballooning: false, or remove hugePagesKiB"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("hugePagesKiB"), perf.HugePagesKiB, []string{"2048", "1048576"}))
	}
	return errs
}

// contentsWarnings are the findings about the VM contents that must not block: spec.osDisk with
// a clone mode that resolves to false because of the provider or the gate (a machine's own
// diskclone: false is refused; the manager reports it), and a memory size that is no multiple
// of the hugepage size (the Engine reserves whole pages: the rest of the last one is lost).
func contentsWarnings(spec *infrav1.OVirtVMSpec, path *field.Path, clone *bool) admission.Warnings {
	out := gpuWarnings(spec, path)
	if p, m := spec.Performance, spec.Memory; p != nil && m != nil && p.HugePagesKiB > 0 && (m.SizeMB*1024)%p.HugePagesKiB != 0 {
		pageMB := p.HugePagesKiB / 1024
		out = append(out, fmt.Sprintf("%s: memory.sizemb (%d MiB) is not a multiple of the hugepage size (%d MiB): oVirt reserves %d pages (%d MiB) for the VM; use %d MiB to use them all",
			path.Child("performance", "hugePagesKiB"), m.SizeMB, pageMB, roundUp(m.SizeMB, pageMB)/pageMB, roundUp(m.SizeMB, pageMB), roundUp(m.SizeMB, pageMB)))
	}
	if spec.OSDisk == nil || spec.DiskClone != nil || clone == nil || *clone {
		return out
	}
	return append(out, fmt.Sprintf("%s: diskclone resolves to false (the OVirtProvider's diskclone or the disk-clone gate), so the disks will be thin overlays on the template's "+
		"and cannot get this format or allocation: the manager refuses to create the VM (MachineCreated reports OSDiskNeedsClone); set diskclone: true", path.Child("osDisk")))
}

func roundUp(v, unit int64) int64 { return (v + unit - 1) / unit * unit }

func contains(list []string, v string) bool {
	for _, e := range list {
		if e == v {
			return true
		}
	}
	return false
}
