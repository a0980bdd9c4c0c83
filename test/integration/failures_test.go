package integration

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// Each test is one line of product doc §4.3: the condition, its reason and severity, and what
// did (not) happen in oVirt.

func TestMissingTemplateIsReportedAndRetried(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.Template = "centos-9-" + tc.ns
	_, om := tc.newMachine(t, spec, cloudConfig)
	got := eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.TemplateNotFoundReason, Severity: clusterv1.ConditionSeverityWarning, Message: spec.Template})
	g.Expect(v1beta1conditions.GetReason(got, clusterv1.ReadyV1Beta1Condition)).To(Equal(infrav1.TemplateNotFoundReason))
	_, exists := sim.VMByName(om.Name)
	g.Expect(exists).To(BeFalse())

	// The template gets imported: the retry (every --retry-interval) creates the VM.
	g.Expect(sim.AddTemplate(ovirtsim.Template{Name: spec.Template, Cluster: "Default", OSType: "other_linux", Sockets: 1, Cores: 1, Threads: 1, MemoryMB: 1024,
		Disks: []ovirtsim.TemplateDisk{{Alias: spec.Template + "_Disk1", SizeGB: 10, Format: "cow", StorageDomain: "data", Bootable: true}}})).To(Succeed())
	eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionTrue})
	deleteAndWait(t, om)
}

func TestMissingOVirtClusterIsReported(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.OVirtCluster = "Nowhere"
	spec.Template = "rhcos-4.14"
	_, om := tc.newMachine(t, spec, ignitionConfig)
	// The template lookup is scoped to the cluster; a wrong cluster must not read as a missing
	// template (product doc §4.3 lists them as two causes).
	got := eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.OVirtClusterNotFoundReason, Severity: clusterv1.ConditionSeverityWarning, Message: `oVirt cluster "Nowhere" (spec.ovirtcluster) not found`})
	g.Expect(v1beta1conditions.GetReason(got, clusterv1.ReadyV1Beta1Condition)).To(Equal(infrav1.OVirtClusterNotFoundReason))
	_, exists := sim.VMByName(om.Name)
	g.Expect(exists).To(BeFalse())
	deleteAndWait(t, om)
}

func TestTemplateOfAnotherOVirtClusterIsNamed(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.OVirtCluster = "Secondary" // rhcos-4.14 exists only in the oVirt cluster Default
	_, om := tc.newMachine(t, spec, ignitionConfig)
	got := eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.TemplateNotFoundReason, Severity: clusterv1.ConditionSeverityWarning,
		Message: `template "rhcos-4.14" (spec.template) exists in another oVirt cluster`})
	g.Expect(v1beta1conditions.GetMessage(got, infrav1.MachineCreatedCondition)).To(ContainSubstring(`but not in oVirt cluster "Secondary" (spec.ovirtcluster)`))
	_, exists := sim.VMByName(om.Name)
	g.Expect(exists).To(BeFalse())
	deleteAndWait(t, om)
}

func TestMissingStorageDomainIsReported(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	for _, sd := range []string{"nosuch", "offline"} {
		spec := vmSpec()
		spec.StorageDomainName = sd
		spec.DiskClone = ptr.To(true)
		_, om := tc.newMachine(t, spec, ignitionConfig)
		eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
			Reason: infrav1.StorageDomainNotFoundReason, Severity: clusterv1.ConditionSeverityWarning, Message: sd})
		_, exists := sim.VMByName(om.Name)
		g.Expect(exists).To(BeFalse())
		deleteAndWait(t, om)
	}
}

func TestBootstrapDataNotReadyWaitsWithoutCreating(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)
	m, om := tc.newMachine(t, vmSpec(), "")
	eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.WaitingForBootstrapDataReason, Severity: clusterv1.ConditionSeverityInfo})
	_, exists := sim.VMByName(om.Name)
	g.Expect(exists).To(BeFalse())

	// The bootstrap provider finishes: the Machine watch resumes creation at once.
	g.Expect(k8s.Create(ctx, harness.BootstrapSecret(tc.ns, m.Name+"-boot", tc.cluster.Name, "{\"ignition\":{\"version\":\"3.2.0\"}}", "ignition"))).To(Succeed())
	base := m.DeepCopy()
	m.Spec.Bootstrap.DataSecretName = ptr.To(m.Name + "-boot")
	g.Expect(k8s.Patch(ctx, m, client.MergeFrom(base))).To(Succeed())
	vm := eventuallyVM(t, om.Name, nil)
	// Ignition needs the rhcos_x64 OS type for the Engine to build its config drive.
	g.Expect(vm.OSType).To(Equal("rhcos_x64"))
	g.Eventually(func() string { in, _ := sim.Initialization(vm.ID); return in.UserData }, timeout, interval).Should(ContainSubstring("ignition"),
		"the first run's payload")
	deleteAndWait(t, om)
}

func TestDiskSmallerThanTemplateStopsWithoutRetryStorm(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.OSDiskSizeGB = 10 // the template disk is 16 GiB
	_, om := tc.newMachine(t, spec, ignitionConfig)
	got := eventuallyCondition(t, om, condition{Type: infrav1.MachineDiskResizedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.DiskSmallerThanTemplateReason, Severity: clusterv1.ConditionSeverityWarning, Message: "16 GiB"})
	g.Expect(v1beta1conditions.GetMessage(got, infrav1.MachineDiskResizedCondition)).To(ContainSubstring("osdisksizegb >= 16"))
	eventuallyEvent(t, om, "DiskSmallerThanTemplate")
	// Product doc §5.4: a terminal failure, in both versions' places, and Ready says so.
	failed := eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		reason, message := failureOf(om)
		g.Expect(reason).To(HaveValue(Equal(infrav1.DiskSmallerThanTemplateFailure)))
		g.Expect(message).To(HaveValue(ContainSubstring("osdisksizegb >= 16")))
	})
	g.Expect(failed.Status.FailureReason).To(HaveValue(Equal(infrav1.DiskSmallerThanTemplateFailure))) //nolint:staticcheck // the v1beta2 mirror
	g.Expect(conditions.GetReason(failed, infrav1.ReadyCondition)).To(Equal(infrav1.DiskSmallerThanTemplateFailure))
	vm, _ := sim.VMByName(om.Name)
	g.Expect(vm.Status).To(Equal("down"), "the VM is not started with the wrong disk")
	g.Expect(vm.Disks[0].SizeGB).To(BeEquivalentTo(16))

	// No retry storm: no disk update is attempted and the VM is not read again and again.
	before := settledRequestCount(t, "GET", "/vms/{id}")
	puts := sim.RequestCount("PUT", "/vms/{id}/diskattachments/{id}")
	g.Consistently(func() int { return sim.RequestCount("GET", "/vms/{id}") - before }, "3s", "500ms").Should(BeNumerically("<=", 1))
	g.Expect(sim.RequestCount("PUT", "/vms/{id}/diskattachments/{id}")).To(Equal(puts))
	deleteAndWait(t, om)
}

func TestMissingVnicProfileIsReportedByName(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.NICs = []infrav1.NIC{{VnicProfile: "ovirtmgmt"}, {VnicProfile: "backup-" + tc.ns}}
	_, om := tc.newMachine(t, spec, ignitionConfig)
	eventuallyCondition(t, om, condition{Type: infrav1.MachineNetworkSetCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.VnicProfileNotFoundReason, Severity: clusterv1.ConditionSeverityWarning, Message: `"backup-` + tc.ns + `" (spec.nics[1].vnicprofile)`})
	vm, _ := sim.VMByName(om.Name)
	g.Expect(vm.Status).To(Equal("down"), "the VM does not start without its networks")

	// The network team creates the profile: the machine continues.
	g.Expect(sim.AddVnicProfile(ovirtsim.VnicProfile{Name: "backup-" + tc.ns, Network: "storage"})).To(Succeed())
	eventuallyCondition(t, om, condition{Type: infrav1.MachineNetworkSetCondition, Status: corev1.ConditionTrue})
	vm = eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.NICs).To(HaveLen(2)) })
	g.Expect(vm.NICs[1].VnicProfile).To(Equal("backup-" + tc.ns))
	deleteAndWait(t, om)
}

func TestTwoNICsAndATemplateWithTwoDisks(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	spec := vmSpec()
	spec.Template = "ubuntu-22.04"
	spec.OSDiskSizeGB = 20
	spec.NICs = []infrav1.NIC{{VnicProfile: "ovirtmgmt"}, {VnicProfile: "storage"}}
	_, om := tc.newMachine(t, spec, cloudConfig)
	eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: corev1.ConditionTrue})
	vm, _ := sim.VMByName(om.Name)
	g.Expect(vm.NICs).To(HaveLen(2))
	g.Expect([]string{vm.NICs[0].VnicProfile, vm.NICs[1].VnicProfile}).To(Equal([]string{"ovirtmgmt", "storage"}))
	g.Expect(vm.Disks).To(HaveLen(2))
	for _, d := range vm.Disks {
		if d.Bootable {
			g.Expect(d.SizeGB).To(BeEquivalentTo(20), "only the OS disk grows")
		} else {
			g.Expect(d.SizeGB).To(BeEquivalentTo(5))
		}
	}
	g.Expect(vm.HostName).To(Equal(om.Name), "cloud-init gets the machine name as host name")
	got := getOM(g, om)
	g.Expect(got.Status.SystemDiskIDs).To(HaveLen(2), "both template disks are system disks")
	// The second template disk is not bootable, yet it does not block deletion.
	deleteAndWait(t, om)
}

func TestNodeNotYetRegisteredKeepsTheMachineUnready(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	eventuallyCondition(t, om, condition{Type: infrav1.K8sProviderIDSetupCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.WaitingForNodeReason, Severity: clusterv1.ConditionSeverityInfo, Message: "register as a Node"})
	g.Consistently(func(g Gomega) { g.Expect(provisioned(getOM(g, om))).To(BeFalse()) }, "1s", "200ms").Should(Succeed())
	deleteAndWait(t, om)
}

func TestVMDeletedOutOfBandIsAFailure(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t, mainFilter)
	_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	g.Expect(sim.DeleteVM(vm.ID)).To(Succeed())
	eventuallyCondition(t, om, condition{Type: clusterv1.ReadyV1Beta1Condition, Status: corev1.ConditionFalse,
		Reason: infrav1.VMDeletedOutOfBandFailure, Severity: clusterv1.ConditionSeverityError})
	eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		reason, message := failureOf(om)
		g.Expect(reason).To(HaveValue(Equal(infrav1.VMDeletedOutOfBandFailure)))
		g.Expect(message).To(HaveValue(ContainSubstring("no longer exists in oVirt")))
		// The VM was up and provisioned before: provisioned stays true, Ready says it is gone.
		g.Expect(conditions.Get(om, infrav1.ReadyCondition)).To(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", infrav1.VMDeletedOutOfBandFailure), HaveField("Message", HaveValue(ContainSubstring("no longer exists in oVirt")))))
	})
	eventuallyEvent(t, om, "VMDeletedOutOfBand")
	// Deleting the machine finishes at once: the VM is already gone.
	deleteAndWait(t, om)
}
