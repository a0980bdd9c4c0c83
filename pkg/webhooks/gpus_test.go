package webhooks

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// TestGPUsAdmission: what admission refuses about spec.gpus, each on its field with the fix.
func TestGPUsAdmission(t *testing.T) {
	base := func(mut func(*infrav1.OVirtVMSpec)) *infrav1.OVirtVMSpec {
		s := &infrav1.OVirtVMSpec{Provider: "p", OVirtCluster: "Default", Template: "t"}
		mut(s)
		return s
	}
	vgpu := func(t string, display *bool) infrav1.GPU {
		return infrav1.GPU{Type: infrav1.GPUTypeVGPU, MdevType: t, Display: display}
	}
	tests := []specCase{
		{"a vGPU", base(func(s *infrav1.OVirtVMSpec) { s.GPUs = []infrav1.GPU{vgpu("nvidia-22", nil)} }), "", ""},
		{"two passthrough GPUs and a vGPU", base(func(s *infrav1.OVirtVMSpec) {
			s.GPUs = []infrav1.GPU{{Type: infrav1.GPUTypePassthrough, VendorID: "10de", DeviceID: "20B5", Count: 2}, vgpu("nvidia-22", ptr.To(false))}
		}), "", ""},
		{"a vGPU without its type", base(func(s *infrav1.OVirtVMSpec) { s.GPUs = []infrav1.GPU{vgpu("", nil)} }), "spec.gpus[0].mdevType", "nvidia-22"},
		{"a vGPU with PCI ids", base(func(s *infrav1.OVirtVMSpec) {
			g := vgpu("nvidia-22", nil)
			g.VendorID = "10de"
			s.GPUs = []infrav1.GPU{g}
		}), "spec.gpus[0].vendorID", "type Passthrough"},
		{"a passthrough GPU without a device id", base(func(s *infrav1.OVirtVMSpec) {
			s.GPUs = []infrav1.GPU{{Type: infrav1.GPUTypePassthrough, VendorID: "10de"}}
		}), "spec.gpus[0].deviceID", "lspci -nn"},
		{"a passthrough GPU with a mediated type", base(func(s *infrav1.OVirtVMSpec) {
			s.GPUs = []infrav1.GPU{{Type: infrav1.GPUTypePassthrough, VendorID: "10de", DeviceID: "20b5", MdevType: "nvidia-22"}}
		}), "spec.gpus[0].mdevType", "type VGPU"},
		{"vGPUs that disagree on the display", base(func(s *infrav1.OVirtVMSpec) {
			s.GPUs = []infrav1.GPU{vgpu("nvidia-22", ptr.To(true)), vgpu("nvidia-23", ptr.To(false))}
		}), "spec.gpus[1].display", "one display setting"},
		{"one passthrough device twice", base(func(s *infrav1.OVirtVMSpec) {
			s.GPUs = []infrav1.GPU{{Type: infrav1.GPUTypePassthrough, VendorID: "10de", DeviceID: "20b5"}, {Type: infrav1.GPUTypePassthrough, VendorID: "10DE", DeviceID: "20b5"}}
		}), "spec.gpus[1]", "Duplicate"},
		{"more than 16 GPUs", base(func(s *infrav1.OVirtVMSpec) {
			s.GPUs = []infrav1.GPU{{Type: infrav1.GPUTypePassthrough, VendorID: "10de", DeviceID: "20b5", Count: 8},
				{Type: infrav1.GPUTypePassthrough, VendorID: "10de", DeviceID: "20b6", Count: 8}, vgpu("nvidia-22", nil)}
		}), "spec.gpus", "at most 16"},
		{"mdev_type also as a custom property", base(func(s *infrav1.OVirtVMSpec) {
			s.GPUs = []infrav1.GPU{vgpu("nvidia-22", nil)}
			s.CustomProperties = []infrav1.CustomProperty{{Name: "mdev_type", Value: "nvidia-22"}}
		}), "spec.customProperties[0].name", "only in spec.gpus"},
		{"mdev_type as a custom property beside a passthrough GPU", base(func(s *infrav1.OVirtVMSpec) {
			s.GPUs = []infrav1.GPU{{Type: infrav1.GPUTypePassthrough, VendorID: "10de", DeviceID: "20b5"}}
			s.CustomProperties = []infrav1.CustomProperty{{Name: "mdev_type", Value: "nvidia-22"}}
		}), "", ""},
	}
	runSpecCases(t, tests)
}

// TestGPUWarnings: an mdev_type custom property without spec.gpus, and high availability of a
// VM pinned by its passthrough devices, are admitted with a warning that says why.
func TestGPUWarnings(t *testing.T) {
	g := NewWithT(t)
	spec := &infrav1.OVirtVMSpec{CustomProperties: []infrav1.CustomProperty{{Name: "mdev_type", Value: "nvidia-22"}}}
	g.Expect(contentsWarnings(spec, field.NewPath("spec"), nil)).To(ConsistOf(ContainSubstring("prefer spec.gpus")))
	spec = &infrav1.OVirtVMSpec{
		GPUs:             []infrav1.GPU{{Type: infrav1.GPUTypePassthrough, VendorID: "10de", DeviceID: "20b5"}},
		HighAvailability: &infrav1.HighAvailability{Enabled: true},
	}
	g.Expect(contentsWarnings(spec, field.NewPath("spec"), nil)).To(ConsistOf(ContainSubstring("only on that host")))
	spec.HighAvailability.Enabled = false
	g.Expect(contentsWarnings(spec, field.NewPath("spec"), nil)).To(BeEmpty())
}

// TestTemplateCapacityCountsGPUs: the autoscaler's scale from zero sees the GPUs of a machine
// under each entry's resource name, summed.
func TestTemplateCapacityCountsGPUs(t *testing.T) {
	g := NewWithT(t)
	spec := &infrav1.OVirtVMSpec{GPUs: []infrav1.GPU{
		{Type: infrav1.GPUTypePassthrough, VendorID: "10de", DeviceID: "20b5", Count: 2},
		{Type: infrav1.GPUTypeVGPU, MdevType: "nvidia-22"},
		{Type: infrav1.GPUTypePassthrough, VendorID: "1002", DeviceID: "740f", ResourceName: "amd.com/gpu"},
	}}
	c := spec.Capacity()
	g.Expect(c).To(HaveLen(2))
	nv, amd := c[corev1.ResourceName("nvidia.com/gpu")], c[corev1.ResourceName("amd.com/gpu")]
	g.Expect(nv.Cmp(resource.MustParse("3"))).To(BeZero(), "nvidia.com/gpu %s", nv.String())
	g.Expect(amd.Cmp(resource.MustParse("1"))).To(BeZero(), "amd.com/gpu %s", amd.String())
}
