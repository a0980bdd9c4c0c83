package webhooks

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// mdevTypeProperty is the oVirt custom property behind the VGPU entries of spec.gpus.
const mdevTypeProperty = "mdev_type"

// validateGPUs checks spec.gpus beyond the CRD's rules: the entries' kinds and fields, one
// display setting for every VGPU entry (the Engine's mdev_type property has one nodisplay flag
// for the whole VM), and mdev_type not also given as a custom property.
func validateGPUs(spec *infrav1.OVirtVMSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	path := specPath.Child("gpus")
	gpus := spec.GPUs
	if len(gpus) > infrav1.MaxGPUEntries {
		errs = append(errs, field.TooMany(path, len(gpus), infrav1.MaxGPUEntries))
	}
	total, vgpus := 0, 0
	var display *bool
	displayAt := -1
	for i, g := range gpus {
		p := path.Index(i)
		if g.Count < 0 || g.Count > infrav1.MaxGPUCount {
			errs = append(errs, field.Invalid(p.Child("count"), g.Count, fmt.Sprintf("must be 1 to %d", infrav1.MaxGPUCount)))
		}
		total += g.GPUCount()
		switch g.Type {
		case infrav1.GPUTypeVGPU:
			vgpus++
			if g.MdevType == "" {
				errs = append(errs, field.Required(p.Child("mdevType"), "a VGPU needs the mediated device type its hosts offer, e.g. nvidia-22 (the Engine lists them under each host's devices)"))
			}
			if g.VendorID != "" || g.DeviceID != "" {
				errs = append(errs, field.Forbidden(p.Child("vendorID"), "vendorID and deviceID are for type Passthrough; a VGPU is chosen by mdevType"))
			}
			if g.Display != nil {
				if display != nil && *display != *g.Display {
					errs = append(errs, field.Invalid(p.Child("display"), *g.Display, fmt.Sprintf(
						"differs from %s: oVirt has one display setting for all the vGPUs of a VM; give every VGPU entry the same display", path.Index(displayAt).Child("display"))))
				} else if display == nil {
					display, displayAt = g.Display, i
				}
			}
		case infrav1.GPUTypePassthrough:
			if g.VendorID == "" {
				errs = append(errs, field.Required(p.Child("vendorID"), "a Passthrough GPU needs the PCI vendor id, four hex digits (10de for NVIDIA)"))
			}
			if g.DeviceID == "" {
				errs = append(errs, field.Required(p.Child("deviceID"), "a Passthrough GPU needs the PCI device id, four hex digits (lspci -nn shows [vendor:device])"))
			}
			if g.MdevType != "" || g.Display != nil {
				errs = append(errs, field.Forbidden(p.Child("mdevType"), "mdevType and display are for type VGPU; a Passthrough GPU is chosen by vendorID and deviceID"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("type"), g.Type, []string{string(infrav1.GPUTypeVGPU), string(infrav1.GPUTypePassthrough)}))
		}
		for j := range i {
			o := gpus[j]
			if o.Type == g.Type && g.Type == infrav1.GPUTypePassthrough && strings.EqualFold(o.VendorID, g.VendorID) && strings.EqualFold(o.DeviceID, g.DeviceID) {
				errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s:%s", g.VendorID, g.DeviceID)))
			}
		}
	}
	if total > infrav1.MaxGPUsPerMachine {
		errs = append(errs, field.Invalid(path, total, fmt.Sprintf("a machine has at most %d GPUs (the sum of the counts)", infrav1.MaxGPUsPerMachine)))
	}
	if vgpus > 0 {
		for i, cp := range spec.CustomProperties {
			if cp.Name == mdevTypeProperty {
				errs = append(errs, field.Invalid(specPath.Child("customProperties").Index(i).Child("name"), cp.Name,
					"the manager sets the mdev_type custom property from spec.gpus: remove it here and describe the vGPUs only in spec.gpus"))
			}
		}
	}
	return errs
}

// gpuWarnings warns of what the Engine accepts but users may not expect: an mdev_type custom
// property (spec.gpus says the same and counts in the template's capacity), and high
// availability of a VM pinned to one host by its passthrough devices (the Engine can restart it
// only there).
func gpuWarnings(spec *infrav1.OVirtVMSpec, path *field.Path) admission.Warnings {
	var out admission.Warnings
	if len(spec.GPUs) == 0 {
		for i, cp := range spec.CustomProperties {
			if cp.Name == mdevTypeProperty {
				out = append(out, fmt.Sprintf("%s: prefer spec.gpus with type VGPU to the mdev_type custom property: the manager then reports the Engine's vGPU scheduling refusals and the OVirtMachineTemplate's capacity counts the GPUs",
					path.Child("customProperties").Index(i)))
			}
		}
	}
	if spec.HasPassthrough() && spec.HighAvailability != nil && spec.HighAvailability.Enabled {
		out = append(out, fmt.Sprintf("%s: a VM with Passthrough GPUs is pinned to the host that has them: the Engine can restart it only on that host", path.Child("highAvailability", "enabled")))
	}
	return out
}
