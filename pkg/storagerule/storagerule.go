// Package storagerule is the one rule for where the disks of a new VM may go, and with which
// clone mode, used by both admission (which knows the Kubernetes objects only) and the manager
// (which knows the Engine's facts): product doc §6, "Clone disk".
//
//   - The clone mode is the group's (the OVirtMachine's or its template's spec.diskclone), else
//     the OVirtProvider's spec.diskclone, else the disk-clone feature gate. While the provider
//     does not exist, an empty group value cannot be resolved: it stays empty, and the manager
//     resolves it when it creates the VM (GitOps applies objects in any order).
//   - Without cloning, the disks stay where the template's disks are: a storage domain is
//     possible only if it holds a copy of every template disk. Only the Engine knows that, so
//     admission never refuses a storage domain on this account; it warns, and the manager
//     decides.
package storagerule

// Verdict is what the rule says about a storage domain for the disks of a new VM.
type Verdict int

const (
	// Allowed means the disks may go there.
	Allowed Verdict = iota
	// Undecided means a fact the rule needs is not known (the clone mode without the OVirtProvider,
	// the template's disk copies without the Engine). Admission admits with a warning; the
	// manager, which has every fact, never gets this verdict.
	Undecided
	// RequiresClone means the storage domain holds no copy of every template disk and the disks are
	// not cloned.
	RequiresClone
)

// Clone resolves the clone mode of a new VM: the group's value, else the provider's, else the
// gate. providerKnown is false while the OVirtProvider does not exist: then an empty group value
// stays unresolved (nil).
func Clone(group, provider *bool, providerKnown, gate bool) *bool {
	switch {
	case group != nil:
		return group
	case !providerKnown:
		return nil
	case provider != nil:
		return provider
	default:
		return &gate
	}
}

// Decide applies the rule to storageDomain ("" keeps the template's), the resolved clone mode
// (nil: not resolved yet) and whether every template disk has a copy on that storage domain
// (nil: not known without the Engine).
func Decide(storageDomain string, clone, onTemplateDomain *bool) Verdict {
	switch {
	case storageDomain == "":
		return Allowed
	case clone == nil:
		return Undecided
	case *clone:
		return Allowed
	case onTemplateDomain == nil:
		return Undecided
	case *onTemplateDomain:
		return Allowed
	default:
		return RequiresClone
	}
}
