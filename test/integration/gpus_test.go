package integration

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/ovirtsim"
)

// gpuCluster is the oVirt cluster of the GPU tests: gpu-h1 has two NVIDIA GPUs (each with its
// audio function in its IOMMU group) and offers the vGPU type nvidia-22 on a third; gpu-h2 has
// one GPU; gpu-h3 has one but no passthrough support.
const gpuCluster = "GPU"

func gpuClusters() []ovirtsim.Cluster {
	group := func(n int) *int { return &n }
	gpu := func(bus string, g int) []ovirtsim.HostDeviceSeed {
		return []ovirtsim.HostDeviceSeed{
			{Name: "pci_0000_" + bus + "_00_0", VendorID: "10de", ProductID: "20b5", VendorName: "NVIDIA Corporation", ProductName: "GA100 [A100 PCIe 80GB]", IOMMUGroup: group(g), Driver: "vfio-pci"},
			{Name: "pci_0000_" + bus + "_00_1", VendorID: "10de", ProductID: "1aef", VendorName: "NVIDIA Corporation", ProductName: "HD Audio", IOMMUGroup: group(g), Driver: "vfio-pci"},
		}
	}
	h1 := append(gpu("3b", 12), gpu("5e", 13)...)
	h1 = append(h1, ovirtsim.HostDeviceSeed{Name: "pci_0000_af_00_0", VendorID: "10de", ProductID: "1eb8", ProductName: "TU104GL [Tesla T4]", IOMMUGroup: group(40), Driver: "nvidia",
		MDevTypes: []ovirtsim.MDevTypeSeed{{Name: "nvidia-22", AvailableInstances: 4, HumanReadableName: "GRID T4-4Q"}}})
	return []ovirtsim.Cluster{{Name: gpuCluster, Networks: []string{"ovirtmgmt"}, Hosts: []ovirtsim.Host{
		{Name: "gpu-h1", MemoryGB: 512, DevicePassthrough: true, Devices: h1},
		{Name: "gpu-h2", MemoryGB: 256, DevicePassthrough: true, Devices: gpu("3b", 7)},
		{Name: "gpu-h3", MemoryGB: 256, Devices: gpu("3b", 7)},
	}}}
}

func gpuSpec(gpus ...infrav1.GPU) infrav1.OVirtVMSpec {
	spec := vmSpec()
	spec.OVirtCluster = gpuCluster
	spec.GPUs = gpus
	return spec
}

var oneGPU = infrav1.GPU{Type: infrav1.GPUTypePassthrough, VendorID: "10de", DeviceID: "20b5"}

// TestVGPUIsPlacedAndRefusedByTheEngine: a vGPU machine asks the Engine for the mediated device
// (mdev_type, nodisplay) and runs where the type is offered; a type no host offers is the Engine's
// scheduling refusal, reported on MachineOn with its message, and no VM runs.
func TestVGPUIsPlacedAndRefusedByTheEngine(t *testing.T) {
	tc := newTestCluster(t, mainFilter)
	t.Run("placed", func(t *testing.T) {
		_, om := tc.newMachine(t, gpuSpec(infrav1.GPU{Type: infrav1.GPUTypeVGPU, MdevType: "nvidia-22"}), ignitionConfig)
		vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
		NewWithT(t).Expect(vm.Host).To(Equal("gpu-h1"), "the only host offering nvidia-22")
		deleteAndWait(t, om)
	})
	t.Run("refused", func(t *testing.T) {
		_, om := tc.newMachine(t, gpuSpec(infrav1.GPU{Type: infrav1.GPUTypeVGPU, MdevType: "nvidia-99"}), ignitionConfig)
		eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: corev1.ConditionFalse,
			Reason: infrav1.NoHostWithFreeMediatedDeviceReason, Severity: clusterv1.ConditionSeverityWarning, Message: "MDevice"})
		vm, _ := sim.VMByName(om.Name)
		NewWithT(t).Expect(vm.Status).To(Equal("down"))
		deleteAndWait(t, om)
	})
}

// TestPassthroughMachinesNeverShareADevice: four machines created at once for three free GPUs
// (two on gpu-h1, one on gpu-h2; gpu-h3 cannot pass through): three are pinned to a host and get
// a GPU of their own, with its audio function, before their first start; the fourth says what it
// saw. Deleting one frees its GPU for the fourth.
func TestPassthroughMachinesNeverShareADevice(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	oms := make([]*infrav1.OVirtMachine, 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range oms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, om := tc.newMachine(t, gpuSpec(oneGPU), ignitionConfig)
			mu.Lock()
			oms[i] = om
			mu.Unlock()
		}()
	}
	wg.Wait()

	var waiting *infrav1.OVirtMachine
	used := map[string]string{}
	g.Eventually(func(g Gomega) {
		waiting = nil
		used = map[string]string{}
		up := 0
		for _, om := range oms {
			got := getOM(g, om)
			if v1beta1conditions.GetReason(got, infrav1.MachineCreatedCondition) == infrav1.NoHostWithFreeDeviceReason {
				waiting = got
				continue
			}
			vm, ok := sim.VMByName(om.Name)
			g.Expect(ok).To(BeTrue())
			g.Expect(vm.Status).To(Equal("up"))
			up++
			g.Expect(got.Status.HostDevices).To(HaveLen(2))
			for _, d := range got.Status.HostDevices {
				key := d.Host + "/" + d.Name
				g.Expect(used).NotTo(HaveKey(key), "two machines got %s", key)
				used[key] = om.Name
			}
		}
		g.Expect(up).To(Equal(3))
		g.Expect(waiting).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())

	for _, om := range oms {
		if om.Name == waiting.Name {
			continue
		}
		got := getOM(g, om)
		devs, err := ovirtClient(t).ListVMHostDevices(ctx, got.Status.VMID)
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, d := range devs {
			names = append(names, d.HostID+"/"+d.Name)
			g.Expect(d.HostID).To(Equal(got.Status.HostDevices[0].HostID), "the devices of the host it is pinned to")
		}
		g.Expect(names).To(HaveLen(2), "the GPU and its audio function: %v", names)
		vm, _ := sim.VMByName(om.Name)
		g.Expect(vm.Host).To(Equal(got.Status.HostDevices[0].Host), "runs on the host of its devices")
	}
	msg := v1beta1conditions.GetMessage(waiting, infrav1.MachineCreatedCondition)
	g.Expect(msg).To(ContainSubstring("gpu-h3: device passthrough disabled"))
	g.Expect(msg).To(ContainSubstring("gpu-h1: 0 of 2 10de:20b5 free"))
	// The taken GPUs are claimed by the other machines and, once their VMs run, in use: the
	// message says which it saw first.
	g.Expect(msg).To(Or(ContainSubstring("claimed by"), ContainSubstring("in use by a running VM")))
	_, exists := sim.VMByName(waiting.Name)
	g.Expect(exists).To(BeFalse(), "no VM without its devices")

	// Deleting a machine releases its GPU: the waiting one takes it.
	var victim *infrav1.OVirtMachine
	for _, om := range oms {
		if om.Name != waiting.Name {
			victim = om
			break
		}
	}
	deleteAndWait(t, victim)
	eventuallyVM(t, waiting.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	for _, om := range oms {
		if om.Name != victim.Name {
			deleteAndWait(t, om)
		}
	}
	claims := &infrav1.OVirtHostDeviceClaimList{}
	g.Expect(k8s.List(ctx, claims)).To(Succeed())
	g.Expect(claims.Items).To(BeEmpty(), "every claim released with its machine")
}
