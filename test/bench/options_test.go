package bench

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/ovirtsim"
)

// TestGPUOptionsHaveTheirDevices checks the GPU options' machines and hosts without running
// them: one GPU per machine, and every host of the bench's cluster with a free A100 (in its
// own IOMMU group with its audio function) and an nvidia-22 instance for each machine.
func TestGPUOptionsHaveTheirDevices(t *testing.T) {
	g := NewWithT(t)
	for _, opt := range []string{OptionVGPU, OptionPassthrough} {
		spec := benchVMSpec(false)
		applyContents(&spec, opt)
		g.Expect(spec.GPUs).To(HaveLen(1), opt)
		g.Expect(spec.GPUs[0].GPUCount()).To(BeEquivalentTo(1), opt)
	}
	spec := benchVMSpec(false)
	applyContents(&spec, OptionPassthrough)
	g.Expect(spec.GPUs[0].Type).To(Equal(infrav1.GPUTypePassthrough))

	machines := optionScenario(OptionPassthrough).Machines
	groups := map[int][]string{}
	instances := 0
	for _, d := range benchHostDevices() {
		g.Expect(d.IOMMUGroup).NotTo(BeNil(), d.Name)
		groups[*d.IOMMUGroup] = append(groups[*d.IOMMUGroup], d.Name)
		for _, mt := range d.MDevTypes {
			if mt.Name == benchMdevType {
				instances += mt.AvailableInstances
			}
		}
	}
	gpus := 0
	for _, d := range benchHostDevices() {
		if d.VendorID != benchGPUVendor || d.ProductID != benchGPUDevice {
			continue
		}
		gpus++
		slot := strings.TrimSuffix(d.Name, "_0")
		g.Expect(groups[*d.IOMMUGroup]).To(ConsistOf(d.Name, slot+"_1"), "a GPU's group is its own functions")
	}
	g.Expect(gpus).To(BeNumerically(">=", machines))
	g.Expect(instances).To(BeNumerically(">=", machines))

	sim, err := ovirtsim.NewBuilder().WithSeed(ovirtsim.DemoSeed()).Build()
	g.Expect(err).NotTo(HaveOccurred())
	defer sim.Close()
	g.Expect(prepareContents(sim, OptionVGPU)).To(Succeed())
	g.Expect(prepareContents(sim, OptionPassthrough)).To(Succeed(), "again for the next option")
}
