package integration

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/controllers"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// What a real oVirt Engine says, as the simulator now says it by default (see
// ../shared/reference/ovirt-engine-behaviour.md and docs/ovirtsim.md "Fidelity"). Each test
// failed on the provider before it was fixed for that behaviour.

// A real Engine reports every guest interface for every NIC: lo, cni0, flannel.1, docker0 and
// kube-ipvs0 with one address per Service (the simulator's default: 100). Merging them all put
// CNI and Service IPs on the Machine and overflowed status.addresses (MaxItems 64): the status
// patch failed and the machine never got Ready.
func TestAddressesComeOnlyFromTheVMNICs(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.Template = "ubuntu-22.04"
	spec.OSDiskSizeGB = 0
	spec.NICs = []infrav1.NIC{{VnicProfile: "ovirtmgmt"}, {VnicProfile: "storage"}}
	_, om := tc.newMachine(t, spec, cloudConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) {
		g.Expect(vm.Status).To(Equal("up"))
		g.Expect(vm.IPs).To(HaveLen(2))
	})
	registerNode(t, om)
	got := eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) { g.Expect(provisioned(om)).To(BeTrue()) })

	// Exactly the IPv4 of nic1 then nic2: no loopback, link-local, CNI, docker or Service IP.
	g.Expect(got.Status.Addresses).To(Equal([]clusterv1.MachineAddress{
		{Type: clusterv1.MachineInternalIP, Address: vm.IPs[0]},
		{Type: clusterv1.MachineInternalIP, Address: vm.IPs[1]},
	}))
	g.Expect(v1beta1conditions.GetReason(got, infrav1.MachineOnCondition)).To(BeEmpty(), "the guest agent reported addresses")
	deleteAndWait(t, om)
}

// An image without qemu-guest-agent reports nothing, and VDSM keeps it powering_up for a
// while. The machine still becomes Ready once its Node registers, with the Node's addresses,
// and says so.
func TestMachineWithoutGuestAgentBecomesReady(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.Template = noAgentTemplate
	spec.OSDiskSizeGB = 0
	_, om := tc.newMachine(t, spec, cloudConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) {
		g.Expect(vm.Status).To(Equal("up"))
		g.Expect(vm.IPs).To(BeEmpty(), "no guest agent, nothing reported")
	})
	eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: corev1.ConditionTrue,
		Reason: infrav1.NoGuestAddressesReason, Message: "qemu-guest-agent"})

	node, err := harness.RegisterNode(context.Background(), k8s, om.Name, vm.ID, []string{"10.50.0.7"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	// The Node's addresses come with its status, written after the Node itself: a reconcile may
	// see the Node first, and the next one its addresses.
	got := eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(provisioned(om)).To(BeTrue())
		g.Expect(om.Status.Addresses).To(Equal([]clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: "10.50.0.7"}}))
	})
	g.Expect(v1beta1conditions.GetMessage(got, infrav1.MachineOnCondition)).To(ContainSubstring("Node " + node.Name))
	g.Expect(v1beta1conditions.IsTrue(got, clusterv1.ReadyV1Beta1Condition)).To(BeTrue())
	deleteAndWait(t, om)
}

// The Engine refuses VM names over 64 characters; MachineDeployment machine names often pass
// that. The VM gets a derived name (prefix + hash), recorded in status and used as host name.
func TestLongMachineNameGetsADerivedVMName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	name := tc.ns + "-md-0-workers-with-a-rather-long-machine-deployment-name-7d9f8c6b5d-k2j4q"
	g.Expect(len(name)).To(BeNumerically(">", 64))
	g.Expect(k8s.Create(ctx, harness.BootstrapSecret(tc.ns, name+"-bootstrap", tc.cluster.Name, cloudConfig, "cloud-config"))).To(Succeed())
	m := harness.Machine(tc.cluster, name, name+"-bootstrap")
	for k, v := range filterLabels(tc.filter) {
		m.Labels[k] = v
	}
	g.Expect(k8s.Create(ctx, m)).To(Succeed())
	spec := vmSpec()
	spec.Template = "ubuntu-22.04"
	om := harness.OVirtMachine(m, spec)
	for k, v := range filterLabels(tc.filter) {
		om.Labels[k] = v
	}
	g.Expect(k8s.Create(ctx, om)).To(Succeed())

	vmName := controllers.VMNameFor(tc.ns, name)
	g.Expect(len(vmName)).To(BeNumerically("<=", 64))
	vm := eventuallyVM(t, vmName, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	g.Expect(vm.HostName).To(Equal(vmName), "the host name is the short VM name")
	g.Expect(len(vm.Description)).To(BeNumerically("<=", 255))
	g.Expect(vm.Comment).To(ContainSubstring("ovirtmachine=" + tc.ns + "/" + name))
	got := eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) { g.Expect(om.Status.VMName).To(Equal(vmName)) })
	g.Expect(got.Status.VMID).To(Equal(vm.ID))
	deleteAndWait(t, om)
	_, exists := sim.VM(vm.ID)
	g.Expect(exists).To(BeFalse())
}

// For OS type rhcos_x64 the Engine treats the custom script as Ignition and refuses to start
// the VM otherwise; other OS types get cloud-init. A mismatch is reported before any VM exists.
func TestBootstrapFormatMismatchIsReportedBeforeCreating(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	posts := sim.RequestCount("POST", "/vms")

	_, om := tc.newMachine(t, vmSpec(), cloudConfig) // rhcos-4.14 with cloud-config
	got := eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.BootstrapFormatMismatchReason, Severity: clusterv1.ConditionSeverityWarning, Message: "rhcos_x64"})
	g.Expect(v1beta1conditions.GetMessage(got, infrav1.MachineCreatedCondition)).To(And(ContainSubstring("cloud-config"), ContainSubstring("rhcos-4.14")))
	eventuallyEvent(t, om, "VMCreateFailed")

	spec := vmSpec()
	spec.Template = "ubuntu-22.04"
	_, om2 := tc.newMachine(t, spec, ignitionConfig) // cloud-init template with Ignition
	eventuallyCondition(t, om2, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.BootstrapFormatMismatchReason, Message: "ubuntu-22.04"})

	// Ignition that is not JSON never reaches the Engine either.
	_, om3 := tc.newMachineWithFormat(t, vmSpec(), "variant: fcos\nversion: 1.4.0\n", "ignition")
	eventuallyCondition(t, om3, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.BootstrapDataInvalidReason, Message: "not a JSON Ignition config"})

	g.Expect(sim.RequestCount("POST", "/vms")).To(Equal(posts), "no VM was created")
	for _, o := range []*infrav1.OVirtMachine{om, om2, om3} {
		deleteAndWait(t, o)
	}
}

// Realistic pairs work: cloud-config on a cloud-init template reaches the guest as the
// Engine's composed user-data, Ignition JSON on rhcos_x64 as the Ignition config.
func TestRealisticBootstrapPairsBoot(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.Template = "ubuntu-22.04"
	spec.OSDiskSizeGB = 0
	_, om := tc.newMachine(t, spec, cloudConfig)
	_, om2 := tc.newMachine(t, vmSpec(), ignitionConfig)
	for _, o := range []*infrav1.OVirtMachine{om, om2} {
		eventuallyCondition(t, o, condition{Type: infrav1.MachineOnCondition, Status: corev1.ConditionTrue})
	}
	vm, _ := sim.VMByName(om.Name)
	init, err := sim.Initialization(vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(init.Format).To(Equal("cloud-init"))
	g.Expect(init.UserData).To(HavePrefix("#cloud-config\n"))
	g.Expect(init.UserData).To(ContainSubstring("runcmd: [kubeadm join]"))
	vm2, _ := sim.VMByName(om2.Name)
	init2, err := sim.Initialization(vm2.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(init2.Format).To(Equal("ignition"))
	// The config as CAPOV sent it, with the Engine's /etc/hostname entry for the VM's host name
	// (the Machine's name) merged into storage.files (IgnitionHandler.handleHostname).
	var got, sent map[string]any
	g.Expect(json.Unmarshal([]byte(init2.UserData), &got)).To(Succeed())
	g.Expect(json.Unmarshal([]byte(ignitionConfig), &sent)).To(Succeed())
	files := got["storage"].(map[string]any)["files"].([]any)
	g.Expect(files[len(files)-1]).To(Equal(map[string]any{"filesystem": "root", "path": "/etc/hostname", "mode": float64(420),
		"contents": map[string]any{"source": "data:," + om2.Name}}))
	g.Expect(got["ignition"]).To(Equal(sent["ignition"]))
	g.Expect(got["passwd"]).To(Equal(sent["passwd"]))
	for _, o := range []*infrav1.OVirtMachine{om, om2} {
		deleteAndWait(t, o)
	}
}

// The top-level /storagedomains list leaves the status of attached domains empty; a domain in
// maintenance is reported from its data center's view before POST /vms, not as a late 409.
func TestStorageDomainInMaintenanceIsReportedBeforeCreating(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	posts := sim.RequestCount("POST", "/vms")
	spec := vmSpec()
	spec.StorageDomainName = "offline"
	spec.DiskClone = ptr.To(true)
	_, om := tc.newMachine(t, spec, ignitionConfig)
	eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.StorageDomainNotFoundReason, Severity: clusterv1.ConditionSeverityWarning, Message: "maintenance"})
	g.Expect(sim.RequestCount("POST", "/vms")).To(Equal(posts), "no create was attempted")
	deleteAndWait(t, om)
}

// Low disk space, a NIC name in use, a network not in the cluster are 409s that are no lock:
// the disk and NIC phases turn them into a condition with the Engine's message and retry.
func TestEngineRefusalsInDiskAndNICPhasesAreConditions(t *testing.T) {
	tc := newTestCluster(t, mainFilter)
	t.Cleanup(func() { sim.SetFaults() })

	// Both refusals happen a few times, then stop (space freed, network attached).
	sim.SetFaults(
		ovirtsim.FaultRule{Method: "PUT", Path: "/vms/{id}/diskattachments/{id}", Status: 409, Count: 3,
			Detail: "[Cannot edit Virtual Disk. Low disk space on Storage Domain data.]"},
		ovirtsim.FaultRule{Method: "POST", Path: "/vms/{id}/nics", Status: 409, Count: 3,
			Detail: "[Cannot add Interface. The Network is not attached to the VM's Cluster.]"},
	)
	spec := vmSpec()
	spec.NICs = []infrav1.NIC{{VnicProfile: "ovirtmgmt"}, {VnicProfile: "storage"}} // nic2 is added
	_, om := tc.newMachine(t, spec, ignitionConfig)
	eventuallyCondition(t, om, condition{Type: infrav1.MachineDiskResizedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.DiskUpdateFailedReason, Severity: clusterv1.ConditionSeverityWarning, Message: "Low disk space on Storage Domain data"})
	eventuallyCondition(t, om, condition{Type: infrav1.MachineNetworkSetCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.NetworkSetupFailedReason, Severity: clusterv1.ConditionSeverityWarning, Message: "not attached to the VM's Cluster"})

	// The refusals end: the retries finish the machine.
	eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: corev1.ConditionTrue})
	deleteAndWait(t, om)
}

// An Engine or proxy that ignores follow= returns only <link>s: go-ovirt yields empty
// collections. The VM's disks and NICs are then read from their own endpoints, and before a
// removal the attached disks always are: a CSI disk must never be deleted because it was not
// seen.
func TestFollowIgnoredNeverHidesDisksOrNICs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	sim.SetIgnoreFollow(true)
	t.Cleanup(func() { sim.SetIgnoreFollow(false); sim.SetFaults() })

	_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	g.Expect(vm.NICs).To(HaveLen(1), "nic1 was added once, not again for want of an inline list")
	g.Expect(vm.Disks[0].SizeGB).To(BeEquivalentTo(80))
	registerNode(t, om)
	got := eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) { g.Expect(provisioned(om)).To(BeTrue()) })
	g.Expect(got.Status.Addresses).To(Equal([]clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: vm.IPs[0]}}))

	// A CSI volume is attached; the machine is deleted.
	diskID, err := sim.AttachCSIDisk(vm.ID, 5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8s.Delete(ctx, om)).To(Succeed())
	eventuallyCondition(t, om, condition{Type: infrav1.MachineDeletedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.VMHasNonSystemDiskReason})
	state, ok := sim.VM(vm.ID)
	g.Expect(ok).To(BeTrue(), "the VM and its CSI disk are kept")
	g.Expect(state.Disks).To(HaveLen(2))

	// When the attachments cannot be read, the removal is refused, not guessed — even when
	// the inline list of the VM read just before shows no other disk.
	sim.SetIgnoreFollow(false)
	g.Expect(sim.DetachDisk(vm.ID, diskID)).To(Succeed())
	sim.SetFaults(ovirtsim.FaultRule{Method: "GET", Path: "/vms/{id}/diskattachments", Status: 500, Detail: "Internal Server Error"})
	eventuallyCondition(t, om, condition{Type: infrav1.MachineDeletedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.VMDeleteFailedReason, Message: "cannot confirm which disks are attached"})
	_, ok = sim.VM(vm.ID)
	g.Expect(ok).To(BeTrue())
	sim.SetFaults()
	deleteAndWait(t, om)
	_, ok = sim.VM(vm.ID)
	g.Expect(ok).To(BeFalse())
}

// A template may have copies of its disks on several storage domains: an override to any of
// them is valid without cloning.
func TestTemplateDiskCopiesOnSeveralDomainsNeedNoClone(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.Template = "rhcos-4.14-replicated"
	spec.StorageDomainName = "fast"
	spec.DiskClone = ptr.To(false)
	_, om := tc.newMachine(t, spec, ignitionConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	g.Expect(vm.Clone).To(BeFalse())
	got := getOM(g, om)
	g.Expect(v1beta1conditions.GetReason(got, infrav1.MachineCreatedCondition)).NotTo(Equal(infrav1.StorageDomainRequiresCloneReason))
	deleteAndWait(t, om)
}

// newMachineWithFormat is newMachine with an explicit bootstrap format.
func (tc *testCluster) newMachineWithFormat(t *testing.T, spec infrav1.OVirtVMSpec, bootstrap, format string) (*clusterv1.Machine, *infrav1.OVirtMachine) {
	t.Helper()
	m, om := tc.newMachine(t, spec, "")
	g := NewWithT(t)
	ctx := context.Background()
	secret := m.Name + "-bootstrap"
	g.Expect(k8s.Create(ctx, harness.BootstrapSecret(tc.ns, secret, tc.cluster.Name, bootstrap, format))).To(Succeed())
	base := m.DeepCopy()
	m.Spec.Bootstrap.DataSecretName = ptr.To(secret)
	g.Expect(k8s.Patch(ctx, m, client.MergeFrom(base))).To(Succeed())
	return m, om
}

// Execute-then-fail: the Engine did the work, then the client got a 5xx, a dropped connection or
// no answer in time. The next reconcile finds what the Engine did and goes on from there: one VM,
// one disk extension, and a removal that counts as done.
func TestEngineWorkThatFailedOnTheWireIsNotRepeated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	t.Cleanup(func() { sim.SetFaults() })
	sim.SetFaults(
		ovirtsim.FaultRule{Method: "POST", Path: "/vms", Status: 503, Count: 1, After: true, Mode: ovirtsim.FaultModeStatus},
		ovirtsim.FaultRule{Method: "PUT", Path: "/vms/{id}/diskattachments/{id}", Count: 1, After: true, Mode: ovirtsim.FaultModeDrop},
	)
	posts := sim.RequestCount("POST", "/vms")
	_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	eventuallyEvent(t, om, "VMAdopted")
	g.Expect(sim.RequestCount("POST", "/vms")-posts).To(Equal(1), "the VM the Engine created is adopted, not created again")
	g.Expect(vm.Disks[0].SizeGB).To(BeEquivalentTo(80))
	n := 0
	for _, v := range sim.VMs() {
		if v.Name == om.Name {
			n++
		}
	}
	g.Expect(n).To(Equal(1))

	// The removal happens, the answer never arrives: the read after it finds the VM gone.
	sim.SetFaults(ovirtsim.FaultRule{Method: "DELETE", Path: "/vms/{id}", Count: 1, After: true, Mode: ovirtsim.FaultModeDrop})
	g.Expect(k8s.Delete(ctx, om)).To(Succeed())
	deleteAndWait(t, om)
	_, exists := sim.VM(vm.ID)
	g.Expect(exists).To(BeFalse())
}

// A guest that ignores ACPI goes back to Up after a shutdown request: deletion powers it off
// after --vm-shutdown-timeout.
func TestDeletionStopsAGuestThatIgnoresACPI(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	g.Expect(sim.SetVMIgnoresACPI(vm.ID, true)).To(Succeed())
	g.Expect(k8s.Delete(context.Background(), om)).To(Succeed())
	eventuallyEvent(t, om, "VMStopped")
	deleteAndWait(t, om)
	_, exists := sim.VM(vm.ID)
	g.Expect(exists).To(BeFalse())
}
