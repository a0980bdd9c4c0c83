package webhooks

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/featuregates"
	"github.com/capov/capov/pkg/storagerule"
)

// Bounds of the VM spec that the API package does not name.
const (
	// MaxMemoryMB is the largest memory.sizemb (64 TiB), the CRD's maximum.
	MaxMemoryMB = 67108864
	// MaxNICs is the largest number of spec.nics, the CRD's maximum.
	MaxNICs = 32
)

// vmTypes are the values of spec.vmtype besides empty (the template's type).
var vmTypes = []string{string(infrav1.VMTypeServer), string(infrav1.VMTypeDesktop), string(infrav1.VMTypeHighPerformance)}

// ResolveDiskClone decides whether the template disks of a new VM are cloned, in the order of
// product doc §6 (storagerule.Clone): the machine's (or template's) diskclone, else the
// OVirtProvider's, else the disk-clone gate. nil while the provider does not exist and the
// machine leaves diskclone empty: the manager resolves it when it creates the VM, so that the
// order holds whatever order the objects are applied in.
func ResolveDiskClone(machine *bool, provider *infrav1.OVirtProvider, gates featuregates.Gates) *bool {
	var fromProvider *bool
	if provider != nil {
		fromProvider = provider.Spec.DiskClone
	}
	return storagerule.Clone(machine, fromProvider, provider != nil, gates.DiskClone)
}

// DefaultVMSpec fills the create-time defaults of an OVirtMachine spec: spec.diskclone gets the
// resolved clone mode when it is empty, and spec.storagedomainname gets the provider's storage
// domain when it is empty, the provider names one and the resolved clone mode is true. provider
// is nil when the OVirtProvider does not exist (yet): then nothing is defaulted, and the manager
// resolves both from the provider when it creates the VM. It runs when the machine is created,
// which is when its node is created: an OVirtMachineTemplate is never defaulted, so that a group
// left at Default follows the provider and the gate in force when each of its machines is
// created (product doc §6).
//
// A provider storage domain is not copied when cloning is off: without cloning the disks stay
// where the template's are. The manager still resolves the provider's domain for such a machine
// and reports StorageDomainRequiresClone unless the template's disks have a copy there; the
// validator warns about it.
func DefaultVMSpec(spec *infrav1.OVirtVMSpec, provider *infrav1.OVirtProvider, gates featuregates.Gates) {
	clone := ResolveDiskClone(spec.DiskClone, provider, gates)
	if spec.DiskClone == nil && clone != nil {
		spec.DiskClone = ptr.To(*clone)
	}
	if spec.StorageDomainName == "" && ptr.Deref(clone, false) && provider != nil && provider.Spec.StorageDomainName != "" {
		spec.StorageDomainName = provider.Spec.StorageDomainName
	}
}

// storageDomainWarnings are the findings of storagerule about spec.storagedomainname that
// admission cannot decide (path is the spec's): without cloning, a storage domain works only if
// it holds a copy of every template disk, which only the Engine knows; the manager decides.
func storageDomainWarnings(spec *infrav1.OVirtVMSpec, path *field.Path, clone *bool) admission.Warnings {
	if spec.StorageDomainName == "" || clone == nil || storagerule.Decide(spec.StorageDomainName, clone, nil) != storagerule.Undecided {
		return nil
	}
	return admission.Warnings{fmt.Sprintf("%s %s: diskclone resolves to false, so the disks stay where the template's are: "+
		"the VM can be created only if %s holds a copy of every template disk (the manager checks it in oVirt; otherwise MachineCreated reports StorageDomainRequiresClone); "+
		"to place the disks in %s whatever the template, %s; or remove storagedomainname",
		path.Child("storagedomainname"), spec.StorageDomainName, spec.StorageDomainName, spec.StorageDomainName, featuregates.EnableDiskCloneHint(spec.Provider))}
}

// KeepCreateDefaults carries the values DefaultVMSpec wrote at create time (for templates: wrote
// under the older rules, which defaulted templates too) into an update that leaves them empty. The spec is immutable, and a client that re-applies its original manifest
// (server-side apply drops fields the manifest no longer names, a PUT sends only what the
// client has) must not be refused for the defaults it never wrote.
func KeepCreateDefaults(newSpec, oldSpec *infrav1.OVirtVMSpec) {
	if newSpec.DiskClone == nil && oldSpec.DiskClone != nil {
		newSpec.DiskClone = ptr.To(*oldSpec.DiskClone)
	}
	if newSpec.StorageDomainName == "" && oldSpec.StorageDomainName != "" {
		newSpec.StorageDomainName = oldSpec.StorageDomainName
	}
}

// ValidateVMSpec checks the VM part of an OVirtMachine (path "spec") or OVirtMachineTemplate
// (path "spec.template.spec"), what can be decided without the Engine (storagedomainname is not:
// storageDomainWarnings). Each error carries the full path and how to fix the value.
func ValidateVMSpec(spec *infrav1.OVirtVMSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(spec.Provider) == "" {
		errs = append(errs, field.Required(path.Child("provider"),
			"set the name of the cluster-scoped OVirtProvider that connects to the oVirt Engine, e.g. provider: ovirt-prod (see kubectl get capovp)"))
	}
	if strings.TrimSpace(spec.OVirtCluster) == "" {
		errs = append(errs, field.Required(path.Child("ovirtcluster"),
			"set the oVirt cluster to create the VM in, e.g. ovirtcluster: Default"))
	}
	if strings.TrimSpace(spec.Template) == "" {
		errs = append(errs, field.Required(path.Child("template"),
			"set the oVirt VM template to create the VM from, e.g. template: rhcos-4.14"))
	}
	if spec.OSDiskSizeGB < 0 || spec.OSDiskSizeGB > infrav1.MaxOSDiskSizeGB {
		errs = append(errs, field.Invalid(path.Child("osdisksizegb"), spec.OSDiskSizeGB,
			fmt.Sprintf("must be between 1 and %d (GiB); omit it to keep the template's disk size", infrav1.MaxOSDiskSizeGB)))
	}
	if spec.VMType != "" && !isVMType(spec.VMType) {
		errs = append(errs, field.Invalid(path.Child("vmtype"), string(spec.VMType),
			fmt.Sprintf("must be one of %s; omit it to keep the template's type", strings.Join(vmTypes, ", "))))
	}
	if c := spec.CPU; c != nil {
		cpuPath := path.Child("cpu")
		errs = append(errs, inRange(cpuPath.Child("sockets"), int64(c.Sockets), 1, infrav1.MaxSockets, "oVirt's MaxNumOfVmSockets")...)
		errs = append(errs, inRange(cpuPath.Child("cores"), int64(c.Cores), 1, infrav1.MaxCoresPerSock, "oVirt's MaxNumOfCpuPerSocket")...)
		errs = append(errs, inRange(cpuPath.Child("threads"), int64(c.Threads), 1, infrav1.MaxThreadsPerCPU, "oVirt's MaxNumOfThreadsPerCpu")...)
	}
	if m := spec.Memory; m != nil {
		memPath := path.Child("memory")
		if m.SizeMB < 1 || m.SizeMB > MaxMemoryMB {
			errs = append(errs, field.Invalid(memPath.Child("sizemb"), m.SizeMB,
				fmt.Sprintf("must be between 1 and %d (MiB); omit memory to keep the template's memory", MaxMemoryMB)))
		}
		switch {
		case m.GuaranteedMB < 0:
			errs = append(errs, field.Invalid(memPath.Child("guaranteedmb"), m.GuaranteedMB,
				"must not be negative; omit it to use oVirt's default"))
		case m.GuaranteedMB > m.SizeMB:
			errs = append(errs, field.Invalid(memPath.Child("guaranteedmb"), m.GuaranteedMB,
				fmt.Sprintf("must not exceed memory.sizemb (%d): lower memory.guaranteedmb or raise memory.sizemb", m.SizeMB)))
		}
	}
	if len(spec.NICs) > MaxNICs {
		errs = append(errs, field.TooMany(path.Child("nics"), len(spec.NICs), MaxNICs))
	}
	for i, nic := range spec.NICs {
		if strings.TrimSpace(nic.VnicProfile) == "" {
			errs = append(errs, field.Required(path.Child("nics").Index(i).Child("vnicprofile"),
				"set the name of the oVirt vNIC profile to connect the interface to, e.g. vnicprofile: ovirtmgmt, or remove the entry"))
		}
	}
	errs = append(errs, validateNICsAddressing(spec.NICs, path.Child("nics"))...)
	errs = append(errs, validateAntiAffinity(path.Child("antiAffinity"), spec.AntiAffinity,
		"no anti-affinity group (control-plane machines follow the OVirtCluster's spec.controlPlaneAntiAffinity)")...)
	errs = append(errs, validateAffinityGroups(path.Child("affinityGroups"), spec.AffinityGroups)...)
	errs = append(errs, validateVMContents(spec, path)...)
	return errs
}

// inRange checks lo <= v <= hi for a CPU count and names the oVirt limit in the message.
func inRange(path *field.Path, v, lo, hi int64, limit string) field.ErrorList {
	if v >= lo && v <= hi {
		return nil
	}
	return field.ErrorList{field.Invalid(path, v,
		fmt.Sprintf("must be between %d and %d (%s); the VM gets sockets x cores x threads vCPUs, omit cpu to keep the template's topology", lo, hi, limit))}
}

func isVMType(t infrav1.VMType) bool {
	for _, v := range vmTypes {
		if string(t) == v {
			return true
		}
	}
	return false
}
