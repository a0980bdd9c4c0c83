package conformance

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/collections"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/cluster-api/util/failuredomains"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/harness"
)

// poolVMs counts the simulator's VMs of a MachineDeployment (MachineSet names InfraMachines
// after their Machine, which starts with the MachineDeployment's name).
func poolVMs(md string) map[string]string {
	out := map[string]string{}
	for name, id := range vmNames() {
		if strings.HasPrefix(name, md+"-") {
			out[name] = id
		}
	}
	return out
}

var _ = Describe("Cluster API drives CAPOV", Ordered, func() {
	cluster := harness.Cluster(ns, clusterName)

	It("provisions the cluster infrastructure and copies the control-plane endpoint", func(ctx SpecContext) {
		Expect(mgmt.Create(ctx, cluster)).To(Succeed())
		oc := harness.OVirtCluster(cluster, endpointHost, 6443)
		Expect(mgmt.Create(ctx, oc)).To(Succeed())
		Expect(mgmt.Create(ctx, harness.KubeconfigSecret(cluster, stack.WorkloadKubeconfig))).To(Succeed())
		Expect(mgmt.Create(ctx, harness.BootstrapSecret(ns, "bootstrap-data", clusterName, `{"ignition":{"version":"3.2.0"}}`, "ignition"))).To(Succeed())

		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
			g.Expect(c.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()))
			g.Expect(c.Spec.ControlPlaneEndpoint.Host).To(Equal(endpointHost))
			g.Expect(c.Spec.ControlPlaneEndpoint.Port).To(BeEquivalentTo(6443))
			ready := findCondition(c.Status.Conditions, clusterv1.InfrastructureReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		}, wait, poll).Should(Succeed())
		got := &infrav1.OVirtCluster{}
		Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(oc), got)).To(Succeed())
		Expect(got.Finalizers).To(ContainElement(infrav1.ClusterFinalizer))
		Expect(got.OwnerReferences).To(ContainElement(HaveField("Kind", "Cluster")), "CAPI adopted the OVirtCluster")
	})

	It("brings up a control-plane Machine and initializes the control plane", func(ctx SpecContext) {
		// A machine-based control plane (no control-plane provider runs here): CAPI marks the
		// control plane initialized once a control-plane Machine has a Node.
		m := harness.Machine(cluster, "cp-0", "bootstrap-data")
		m.Labels[clusterv1.MachineControlPlaneLabel] = ""
		m.Spec.Version = "v1.31.0"
		tpl := machineTemplate("unused", "rhcos-4.14", 4).Spec.Template.Spec
		Expect(mgmt.Create(ctx, harness.OVirtMachine(m, tpl))).To(Succeed())
		Expect(mgmt.Create(ctx, m)).To(Succeed())
		Eventually(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)))
			g.Expect(got.Status.NodeRef.Name).To(Equal("cp-0"))
			c := &clusterv1.Cluster{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
			init := findCondition(c.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition)
			g.Expect(init).NotTo(BeNil())
			g.Expect(init.Status).To(Equal(metav1.ConditionTrue))
		}, wait, poll).Should(Succeed())
		vm, ok := stack.Sim.VMByName("cp-0")
		Expect(ok).To(BeTrue())
		Expect(vm.Cores).To(Equal(4))
	})

	It("scales a MachineDeployment with a data disk and tags 0 -> 3 -> 5 -> 1 -> 0 with VMs following in oVirt", func(ctx SpecContext) {
		tpl := machineTemplate("workers-a", "rhcos-4.14", 2)
		tpl.Spec.Template.Spec.DataDisks = []infrav1.DataDisk{{Name: "data", SizeGB: 2}}
		tpl.Spec.Template.Spec.Tags = []string{"conformance-workers"}
		Expect(mgmt.Create(ctx, tpl)).To(Succeed())
		Expect(mgmt.Create(ctx, machineDeployment("workers", "workers-a", 0))).To(Succeed())
		for _, n := range []int{3, 5, 1, 0} {
			By(fmt.Sprintf("scaling to %d", n))
			scale(ctx, "workers", int32(n))
			expectRunning(ctx, "workers", n)
			Eventually(func() int { return len(poolVMs("workers")) }, wait, poll).Should(Equal(n))
			for name := range poolVMs("workers") {
				vm, _ := stack.Sim.VMByName(name)
				Expect(vm.Tags).To(ConsistOf("conformance-workers"), name)
				Expect(vm.Disks).To(ContainElement(HaveField("Description", HavePrefix("capov datadisk=data vm="+vm.ID+" "))), name)
			}
			// The data disks of the VMs scaled away went with them.
			for _, d := range stack.Sim.Dump().FloatingDisks {
				Expect(d.Description).NotTo(HavePrefix("capov datadisk="), "a data disk outlived its VM: %s", d.Alias)
			}
			// CAPI deletes the Node of each Machine it scales away.
			Eventually(func(g Gomega) int {
				nodes := &corev1.NodeList{}
				g.Expect(stack.Workload.Client.List(ctx, nodes)).To(Succeed())
				count := 0
				for _, n := range nodes.Items {
					if strings.HasPrefix(n.Name, "workers-") {
						count++
					}
				}
				return count
			}, wait, poll).Should(Equal(n))
		}
	})

	It("rolls out a new OVirtMachineTemplate", func(ctx SpecContext) {
		scale(ctx, "workers", 2)
		expectRunning(ctx, "workers", 2)
		before := poolVMs("workers")
		Expect(mgmt.Create(ctx, machineTemplate("workers-b", "rhcos-4.14", 4))).To(Succeed())
		Eventually(func() error {
			md := &clusterv1.MachineDeployment{}
			if err := mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: "workers"}, md); err != nil {
				return err
			}
			base := md.DeepCopy()
			md.Spec.Template.Spec.InfrastructureRef.Name = "workers-b"
			return mgmt.Patch(ctx, md, client.MergeFrom(base))
		}, wait, poll).Should(Succeed())

		Eventually(func(g Gomega) {
			vms := poolVMs("workers")
			g.Expect(vms).To(HaveLen(2))
			for name := range vms {
				g.Expect(before).NotTo(HaveKey(name), "every old VM was replaced")
				vm, _ := stack.Sim.VMByName(name)
				g.Expect(vm.Cores).To(Equal(4))
			}
		}, wait, poll).Should(Succeed())
		expectRunning(ctx, "workers", 2)
	})

	It("changes Clone disk of a running group in place: nothing rolls out, new nodes use it (product doc §6)", func(ctx SpecContext) {
		expectRunning(ctx, "workers", 2)
		before := poolVMs("workers")
		for name := range before {
			vm, _ := stack.Sim.VMByName(name)
			Expect(vm.Clone).To(BeFalse(), "the group is at Default and neither the provider nor the gate clones")
		}
		// The group's Clone disk = Yes, set on its InfraMachineTemplate as an operator does.
		out, err := kubectl(ctx, "patch", "capovmt", "workers-b", "-n", ns, "--type=merge",
			"-p", `{"spec":{"template":{"spec":{"diskclone":true}}}}`)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("spec.template.spec.diskclone changed in place"), "kubectl prints the webhook's warning")
		Expect(out).To(ContainSubstring("ovirtmachinetemplate.infrastructure.cluster.x-k8s.io/workers-b patched"))
		// Cluster API rolls nothing out: the MachineDeployment's template reference is unchanged.
		Consistently(func() map[string]string { return poolVMs("workers") }, "5s", poll).Should(Equal(before))

		scale(ctx, "workers", 3)
		expectRunning(ctx, "workers", 3)
		Eventually(func(g Gomega) {
			vms := poolVMs("workers")
			g.Expect(vms).To(HaveLen(3))
			for name := range vms {
				vm, _ := stack.Sim.VMByName(name)
				_, existed := before[name]
				g.Expect(vm.Clone).To(Equal(!existed), "VM %s: existing VMs are not changed, the new node clones", name)
			}
		}, wait, poll).Should(Succeed())
		scale(ctx, "workers", 2)
		expectRunning(ctx, "workers", 2)
	})

	It("shows CAPOV's reason on the CAPI Machine when a machine fails", func(ctx SpecContext) {
		Expect(mgmt.Create(ctx, machineTemplate("broken", "no-such-template", 2))).To(Succeed())
		Expect(mgmt.Create(ctx, machineDeployment("broken", "broken", 1))).To(Succeed())
		Eventually(func(g Gomega) {
			machines := machinesOf(ctx, "broken")
			g.Expect(machines).To(HaveLen(1))
			c := findCondition(machines[0].Status.Conditions, clusterv1.InfrastructureReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(infrav1.TemplateNotFoundReason))
			g.Expect(c.Message).To(ContainSubstring("no-such-template"))
		}, wait, poll).Should(Succeed())
		Expect(poolVMs("broken")).To(BeEmpty())
		Expect(mgmt.Delete(ctx, &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken"}})).To(Succeed())
		Eventually(func() []clusterv1.Machine { return machinesOf(ctx, "broken") }, wait, poll).Should(BeEmpty())
	})

	It("reads only status.initialization.provisioned of a v1beta2 OVirtMachine: status.ready alone leaves the Machine waiting", func(ctx SpecContext) {
		// The OVirtMachine carries the paused annotation, so that CAPOV's manager leaves it
		// alone (util/paused) while CAPI's Machine controller, whose Machine is not paused,
		// reads it when it reconciles the Machine: the status is what this test writes.
		m := harness.Machine(cluster, "contract-probe", "bootstrap-data")
		om := harness.OVirtMachine(m, machineTemplate("unused", "rhcos-4.14", 2).Spec.Template.Spec)
		om.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
		om.Spec.ProviderID = "ovirt://c0471ac7-0000-4000-8000-000000000001"
		Expect(mgmt.Create(ctx, om)).To(Succeed())
		Expect(mgmt.Create(ctx, m)).To(Succeed())

		// A v1beta1-style status.ready: true is not part of the v1beta2 schema: pruned.
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(infrav1.GroupVersion.WithKind("OVirtMachine"))
		u.SetNamespace(ns)
		u.SetName(om.Name)
		Expect(mgmt.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"status":{"ready":true}}`)))).To(Succeed())
		Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
		_, found, err := unstructured.NestedFieldNoCopy(u.Object, "status", "ready")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeFalse(), "status.ready is pruned by the v1beta2 schema")
		// CAPI's watch of infrastructure machines skips paused objects: make it read the
		// OVirtMachine again through its Machine.
		nudge := func(n string) {
			Expect(mgmt.Patch(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.Name}},
				client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test.capov.io/nudge":"`+n+`"}}}`)))).To(Succeed())
		}
		nudge("1")
		Consistently(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			g.Expect(ptr.Deref(got.Status.Initialization.InfrastructureProvisioned, false)).To(BeFalse())
			g.Expect(got.Spec.ProviderID).To(BeEmpty())
			if c := findCondition(got.Status.Conditions, clusterv1.InfrastructureReadyCondition); c != nil {
				g.Expect(c.Status).NotTo(Equal(metav1.ConditionTrue))
			}
		}, "3s", poll).Should(Succeed())

		// status.initialization.provisioned: true (with a Ready condition) lets it progress.
		Expect(mgmt.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"status":{"initialization":{"provisioned":true},`+
			`"conditions":[{"type":"Ready","status":"True","reason":"Ready","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}],`+
			`"addresses":[{"type":"InternalIP","address":"10.0.9.9"}]}}`)))).To(Succeed())
		nudge("2")
		Eventually(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			g.Expect(got.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()))
			g.Expect(got.Spec.ProviderID).To(Equal("ovirt://c0471ac7-0000-4000-8000-000000000001"))
			g.Expect(got.Status.Addresses).To(ContainElement(HaveField("Address", "10.0.9.9")))
			c := findCondition(got.Status.Conditions, clusterv1.InfrastructureReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}, wait, poll).Should(Succeed())

		Expect(mgmt.Delete(ctx, m)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(mgmt.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{}))
		}, wait, poll).Should(BeTrue())
	})

	It("changes nothing in oVirt while the Cluster is paused", func(ctx SpecContext) {
		setClusterPaused(ctx, true)
		scale(ctx, "workers", 3)
		Consistently(func() int { return len(poolVMs("workers")) }, "5s", poll).Should(Equal(2))
		setClusterPaused(ctx, false)
		expectRunning(ctx, "workers", 3)
	})

	It("blocks deleting a Machine whose VM has a CSI disk until the disk is detached", func(ctx SpecContext) {
		machines := machinesOf(ctx, "workers")
		Expect(machines).NotTo(BeEmpty())
		victim := machines[0]
		vmName := victim.Spec.InfrastructureRef.Name
		vm, ok := stack.Sim.VMByName(vmName)
		Expect(ok).To(BeTrue())
		diskID, err := stack.Sim.AttachCSIDisk(vm.ID, 10)
		Expect(err).NotTo(HaveOccurred())
		Expect(mgmt.Delete(ctx, &victim)).To(Succeed())

		Eventually(func(g Gomega) {
			om := &infrav1.OVirtMachine{}
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: vmName}, om)).To(Succeed())
			c := v1beta1conditions.Get(om, infrav1.MachineDeletedCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(infrav1.VMHasNonSystemDiskReason))
			g.Expect(c.Severity).To(Equal(clusterv1.ConditionSeverityWarning))
			g.Expect(c.Message).To(Equal("VM has non system disk, cannot delete"))
		}, wait, poll).Should(Succeed())
		Consistently(func() error {
			return mgmt.Get(ctx, client.ObjectKeyFromObject(&victim), &clusterv1.Machine{})
		}, "3s", poll).Should(Succeed(), "the Machine waits for its VM")
		state, _ := stack.Sim.VM(vm.ID)
		Expect(state.Disks).To(HaveLen(2), "the user's disk is still attached, not deleted")

		Expect(stack.Sim.DetachDisk(vm.ID, diskID)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(mgmt.Get(ctx, client.ObjectKeyFromObject(&victim), &clusterv1.Machine{}))
		}, wait, poll).Should(BeTrue())
		_, exists := stack.Sim.VM(vm.ID)
		Expect(exists).To(BeFalse())
		expectRunning(ctx, "workers", 3)
	})

	It("rejects bad manifests at admission through the API server", func(ctx SpecContext) {
		bad := machineTemplate("bad-group", "rhcos-4.14", 2)
		bad.Spec.Template.Spec.AffinityGroups = []string{"capov-other-cluster-control-plane-Default"}
		err := mgmt.Create(ctx, bad)
		Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("affinityGroups"))

		// A storage domain with cloning off is not refused (only the Engine knows whether the
		// template's disks are there: pkg/storagerule); it is admitted with a warning.
		warned := machineTemplate("warned-sd", "rhcos-4.14", 2)
		warned.Spec.Template.Spec.StorageDomainName = "fast"
		warned.Spec.Template.Spec.DiskClone = ptr.To(false)
		Expect(mgmt.Create(ctx, warned)).To(Succeed())
		Expect(mgmt.Delete(ctx, warned)).To(Succeed())

		bad = machineTemplate("bad-mem", "rhcos-4.14", 2)
		bad.Spec.Template.Spec.Memory = &infrav1.Memory{SizeMB: 1024, GuaranteedMB: 2048}
		err = mgmt.Create(ctx, bad)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("guaranteedmb"))

		tpl := &infrav1.OVirtMachineTemplate{}
		Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: "workers-b"}, tpl)).To(Succeed())
		base := tpl.DeepCopy()
		tpl.Spec.Template.Spec.OSDiskSizeGB = 200
		err = mgmt.Patch(ctx, tpl, client.MergeFrom(base))
		Expect(err).To(HaveOccurred(), "OVirtMachineTemplate spec is immutable")

		p := &infrav1.OVirtProvider{}
		Expect(mgmt.Get(ctx, client.ObjectKey{Name: providerName}, p)).To(Succeed())
		pBase := p.DeepCopy()
		p.Spec.CredentialsSecretName = ""
		p.Spec.User, p.Spec.Pass = "admin@internal", "x"
		err = mgmt.Patch(ctx, p, client.MergeFrom(pBase))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("credentialsSecretName"))
	})

	It("clears a terminal failure with the product doc's kubectl patch as written, and with the v1beta1 patch converted by the API server", func(ctx SpecContext) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(mgmt.Get(ctx, client.ObjectKey{Name: "ovirtmachines." + infrav1.GroupVersion.Group}, crd)).To(Succeed())
		Expect(crd.Spec.Conversion).NotTo(BeNil(), "the stack's CRDs convert through the webhook binary")
		Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.WebhookConverter))
		// A provider without the Engine's CA: TLSError, critical for a machine not provisioned yet.
		p := harness.Provider("tls-probe", stack.SimURL, "sim-credentials", nil)
		Expect(mgmt.Create(ctx, p)).To(Succeed())
		m := harness.Machine(cluster, "clear-probe", "bootstrap-data")
		spec := machineTemplate("unused", "rhcos-4.14", 2).Spec.Template.Spec
		spec.Provider = p.Name
		om := harness.OVirtMachine(m, spec)
		Expect(mgmt.Create(ctx, om)).To(Succeed())
		Expect(mgmt.Create(ctx, m)).To(Succeed())

		// A v1beta1 reader sees what it always saw: status.failureReason, ready=false, and the
		// v1beta1 Ready condition with severity Error.
		v1 := &unstructured.Unstructured{}
		v1.SetAPIVersion(infrav1.GroupVersion.Group + "/v1beta1")
		v1.SetKind("OVirtMachine")
		Eventually(func(g Gomega) {
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(om), v1)).To(Succeed())
			reason, _, _ := unstructured.NestedString(v1.Object, "status", "failureReason")
			g.Expect(reason).To(Equal(infrav1.OVirtEngineConnectionCriticalFailure))
			ready, _, _ := unstructured.NestedBool(v1.Object, "status", "ready")
			g.Expect(ready).To(BeFalse())
			conds, _, _ := unstructured.NestedSlice(v1.Object, "status", "conditions")
			g.Expect(conds).To(ContainElement(And(HaveKeyWithValue("type", "Ready"), HaveKeyWithValue("severity", "Error"),
				HaveKeyWithValue("reason", infrav1.OVirtEngineConnectionCriticalFailure))))
		}, wait, poll).Should(Succeed())

		// Product doc §4.3, typed as written: kubectl sends it to v1beta2, its preferred version.
		// The provider is still broken, so the manager clears the failure, tries again and
		// fails again: one more ConnectionFailed. Before, kubectl answered "patched (no change)"
		// and nothing happened.
		// Events are written asynchronously: wait for the failure's own before counting.
		Eventually(func() int32 { return eventCount(ctx, om, "ConnectionFailed") }, wait, poll).Should(BeNumerically(">=", 1))
		failedBefore := eventCount(ctx, om, "ConnectionFailed")
		out, err := kubectl(ctx, "patch", "capovm", om.Name, "-n", om.Namespace, "--type=merge",
			"-p", `{"status":{"failureReason":null,"failureMessage":null}}`)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(Equal("ovirtmachine.infrastructure.cluster.x-k8s.io/" + om.Name + " patched\n"))
		Eventually(func(g Gomega) {
			g.Expect(eventCount(ctx, om, "ConnectionFailed")).To(BeNumerically(">", failedBefore), "the manager tried again")
		}, wait, poll).Should(Succeed())

		// The same in v1beta1, converted by the API server (a v1beta1 client's patch of the
		// status subresource clears at once).
		Eventually(func(g Gomega) {
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(om), v1)).To(Succeed())
			reason, _, _ := unstructured.NestedString(v1.Object, "status", "failureReason")
			g.Expect(reason).To(Equal(infrav1.OVirtEngineConnectionCriticalFailure))
		}, wait, poll).Should(Succeed())
		Expect(mgmt.Status().Patch(ctx, v1, client.RawPatch(types.MergePatchType, []byte(`{"status":{"failureReason":null,"failureMessage":null}}`)))).To(Succeed())
		// The answer to the patch is the object right after it (the manager, still failing to
		// connect, may set the failure again at any moment after).
		_, found, _ := unstructured.NestedString(v1.Object, "status", "failureReason")
		Expect(found).To(BeFalse(), "the v1beta1 status patch cleared the failure: %v", v1.Object["status"])

		// Fixed, the provider becomes Ready, and the machine goes on by itself.
		base := p.DeepCopy()
		p.Spec.TLS = &infrav1.OVirtProviderTLS{Insecure: true}
		Expect(mgmt.Patch(ctx, p, client.MergeFrom(base))).To(Succeed())
		Eventually(func(g Gomega) {
			got := &infrav1.OVirtMachine{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(om), got)).To(Succeed())
			g.Expect(got.Status.Deprecated == nil || got.Status.Deprecated.V1Beta1 == nil || got.Status.Deprecated.V1Beta1.FailureReason == nil).To(BeTrue())
			g.Expect(got.Status.FailureReason).To(BeNil()) //nolint:staticcheck // the v1beta2 mirror the reset removes
			g.Expect(v1beta1conditions.IsTrue(got, infrav1.MachineCreatedCondition)).To(BeTrue())
		}, wait, poll).Should(Succeed())

		Expect(mgmt.Delete(ctx, m)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(mgmt.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{}))
		}, wait, poll).Should(BeTrue())
		Expect(mgmt.Delete(ctx, p)).To(Succeed())
	})

	It("spreads control-plane Machines over three failure domains with Cluster API's picker, and pins a MachineDeployment to one", func(ctx SpecContext) {
		domains := map[string]string{"fd-1": "Default", "fd-2": "Secondary", "fd-3": "Tertiary"}
		Eventually(func() error {
			oc := &infrav1.OVirtCluster{}
			if err := mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, oc); err != nil {
				return err
			}
			oc.Spec.Provider = providerName
			oc.Spec.FailureDomains = nil
			for _, name := range []string{"fd-1", "fd-2", "fd-3"} {
				oc.Spec.FailureDomains = append(oc.Spec.FailureDomains, infrav1.OVirtFailureDomain{Name: name, OVirtCluster: domains[name]})
			}
			return mgmt.Update(ctx, oc)
		}, wait, poll).Should(Succeed())
		// Cluster API's Cluster controller copies the OVirtCluster's status.failureDomains.
		c := &clusterv1.Cluster{}
		Eventually(func(g Gomega) {
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
			g.Expect(c.Status.FailureDomains).To(HaveLen(3))
		}, wait, poll).Should(Succeed())

		// What KubeadmControlPlane does for each new control-plane Machine: the failure domain
		// with the fewest control-plane machines, by Cluster API's own picker.
		for i := range 3 {
			all := &clusterv1.MachineList{}
			Expect(mgmt.List(ctx, all, client.InNamespace(ns), client.HasLabels{clusterv1.MachineControlPlaneLabel})).To(Succeed())
			machines := collections.FromMachineList(all)
			fd := failuredomains.PickFewest(ctx, c.Status.FailureDomains, machines, machines)
			Expect(fd).NotTo(BeEmpty())
			name := fmt.Sprintf("cp-fd-%d", i+1)
			m := harness.Machine(cluster, name, "bootstrap-data")
			m.Labels[clusterv1.MachineControlPlaneLabel] = ""
			m.Spec.Version = "v1.31.0"
			m.Spec.FailureDomain = fd
			om := harness.OVirtMachine(m, machineTemplate("unused", "rhcos-4.14", 2).Spec.Template.Spec)
			om.Labels[clusterv1.MachineControlPlaneLabel] = ""
			Expect(mgmt.Create(ctx, om)).To(Succeed())
			Expect(mgmt.Create(ctx, m)).To(Succeed())
			Eventually(func(g Gomega) {
				got := &clusterv1.Machine{}
				g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
				g.Expect(got.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)))
			}, wait, poll).Should(Succeed())
		}
		clusters := map[string]string{}
		for i := range 3 {
			name := fmt.Sprintf("cp-fd-%d", i+1)
			vm, ok := stack.Sim.VMByName(name)
			Expect(ok).To(BeTrue())
			om := &infrav1.OVirtMachine{}
			Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, om)).To(Succeed())
			Expect(vm.Cluster).To(Equal(domains[om.Status.FailureDomain]), "the VM is in its failure domain's oVirt cluster")
			clusters[vm.Cluster] = name
			// The host label goes from the Machine to the Node.
			Eventually(func(g Gomega) {
				g.Expect(workloadNode(ctx, name).Labels).To(HaveKeyWithValue(infrav1.HostLabel, om.Status.Host))
			}, wait, poll).Should(Succeed())
		}
		Expect(clusters).To(HaveLen(3), "one control-plane VM per failure domain: %v", clusters)
		oc := &infrav1.OVirtCluster{}
		Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, oc)).To(Succeed())
		Expect(oc.Status.AffinityGroups).To(ContainElements(
			HaveField("OVirtCluster", "Secondary"), HaveField("OVirtCluster", "Tertiary")), "a control-plane group per oVirt cluster")

		By("a MachineDeployment with failureDomain fd-2")
		Expect(mgmt.Create(ctx, machineTemplate("zoned", "rhcos-4.14", 2))).To(Succeed())
		md := machineDeployment("zoned", "zoned", 2)
		md.Spec.Template.Spec.FailureDomain = "fd-2"
		Expect(mgmt.Create(ctx, md)).To(Succeed())
		expectRunning(ctx, "zoned", 2)
		for name := range poolVMs("zoned") {
			vm, ok := stack.Sim.VMByName(name)
			Expect(ok).To(BeTrue())
			Expect(vm.Cluster).To(Equal("Secondary"), "every VM of the MachineDeployment in fd-2's oVirt cluster")
		}
		scale(ctx, "zoned", 0)
		expectRunning(ctx, "zoned", 0)
	})

	It("gives MachineDeployment machines static addresses from the in-cluster IPAM provider's pool and releases them", func(ctx SpecContext) {
		// A real InClusterIPPool, served by the real in-cluster IPAM provider.
		pool := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
			"metadata": map[string]any{"namespace": ns, "name": "nodes"},
			"spec":     map[string]any{"addresses": []any{"10.30.0.10-10.30.0.19"}, "prefix": int64(24), "gateway": "10.30.0.1"},
		}}
		Expect(mgmt.Create(ctx, pool)).To(Succeed())
		tpl := machineTemplate("static-a", "rhcos-4.14", 2)
		tpl.Spec.Template.Spec.NICs[0].AddressesFromPools = []infrav1.IPPoolReference{{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "nodes"}}
		tpl.Spec.Template.Spec.NICs[0].Nameservers = []string{"10.30.0.53"}
		Expect(mgmt.Create(ctx, tpl)).To(Succeed())
		Expect(mgmt.Create(ctx, machineDeployment("static", "static-a", 3))).To(Succeed())
		expectRunning(ctx, "static", 3)

		claims := func(g Gomega) []ipamv1.IPAddressClaim {
			list := &ipamv1.IPAddressClaimList{}
			g.Expect(mgmt.List(ctx, list, client.InNamespace(ns), client.HasLabels{infrav1.IPAddressClaimMachineLabel})).To(Succeed())
			return list.Items
		}
		addresses := func(g Gomega) []ipamv1.IPAddress {
			list := &ipamv1.IPAddressList{}
			g.Expect(mgmt.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			var out []ipamv1.IPAddress
			for _, a := range list.Items {
				if a.Spec.PoolRef.Name == "nodes" {
					out = append(out, a)
				}
			}
			return out
		}
		seen := map[string]bool{}
		for _, m := range machinesOf(ctx, "static") {
			om := &infrav1.OVirtMachine{}
			Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.InfrastructureRef.Name}, om)).To(Succeed())
			Expect(om.Status.Addresses).NotTo(BeEmpty())
			ip := om.Status.Addresses[0].Address
			Expect(ip).To(MatchRegexp(`^10\.30\.0\.1[0-9]$`), "an address of the pool's range")
			Expect(seen).NotTo(HaveKey(ip), "every machine has its own address")
			seen[ip] = true
			Expect(m.Status.Addresses[0].Address).To(Equal(ip), "Cluster API copied the allocated address to the Machine")
			in, err := stack.Sim.Initialization(om.Status.VMID)
			Expect(err).NotTo(HaveOccurred())
			Expect(in.Network).To(HaveLen(1))
			Expect(in.Network[0].Addresses).To(Equal([]string{ip + "/24"}), "the guest configured the allocated address")
			Expect(in.Network[0].Gateways).To(Equal([]string{"10.30.0.1"}), "with the pool's gateway")
		}
		Expect(addresses(Default)).To(HaveLen(3))

		By("scaling down: the addresses go back to the pool once the VMs are gone")
		scale(ctx, "static", 1)
		expectRunning(ctx, "static", 1)
		Eventually(func(g Gomega) {
			g.Expect(claims(g)).To(HaveLen(1))
			g.Expect(addresses(g)).To(HaveLen(1))
		}, wait, poll).Should(Succeed())

		By("a claim deleted while its VM runs (a namespace or foreground deletion) does not give the VM's address to another claim")
		running := claims(Default)[0]
		inUse := addresses(Default)[0]
		Expect(inUse.Finalizers).To(ContainElement(infrav1.IPAddressInUseFinalizer), "CAPOV holds the address its VM uses")
		Expect(mgmt.Delete(ctx, &running)).To(Succeed())
		Eventually(func(g Gomega) {
			err := mgmt.Get(ctx, client.ObjectKeyFromObject(&running), &ipamv1.IPAddressClaim{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the IPAM provider released the claim")
		}, wait, poll).Should(Succeed())
		// Claim the whole pool: nine addresses are free, the tenth is the running VM's.
		var probes []*ipamv1.IPAddressClaim
		for i := range 10 {
			p := &ipamv1.IPAddressClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("probe-%d", i)},
				Spec:       ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "nodes"}},
			}
			Expect(mgmt.Create(ctx, p)).To(Succeed())
			probes = append(probes, p)
		}
		allocated := func(g Gomega) []string {
			var out []string
			for _, a := range addresses(g) {
				if strings.HasPrefix(a.Spec.ClaimRef.Name, "probe-") {
					out = append(out, a.Spec.Address)
				}
			}
			return out
		}
		Eventually(allocated, wait, poll).Should(HaveLen(9))
		Consistently(allocated, 3*time.Second, poll).Should(And(HaveLen(9), Not(ContainElement(inUse.Spec.Address))),
			"the running VM's address stays taken")
		for _, p := range probes {
			Expect(mgmt.Delete(ctx, p)).To(Succeed())
		}
		Eventually(allocated, wait, poll).Should(BeEmpty())
		scale(ctx, "static", 0)
		expectRunning(ctx, "static", 0)
		Eventually(func(g Gomega) {
			g.Expect(claims(g)).To(BeEmpty(), "no IPAddressClaim outlives its machine")
			g.Expect(addresses(g)).To(BeEmpty())
		}, wait, poll).Should(Succeed())
	})

	It("claims a cluster's control-plane endpoint from a GlobalInClusterIPPool and Cluster API copies it", func(ctx SpecContext) {
		vips := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "GlobalInClusterIPPool",
			"metadata": map[string]any{"name": "conformance-vips"},
			"spec":     map[string]any{"addresses": []any{"10.30.9.100"}, "prefix": int64(24), "gateway": "10.30.9.1"},
		}}
		Expect(mgmt.Create(ctx, vips)).To(Succeed())
		vc := harness.Cluster(ns, "vip")
		Expect(mgmt.Create(ctx, vc)).To(Succeed())
		oc := harness.OVirtCluster(vc, "", 0)
		oc.Spec.ControlPlaneEndpointFromPool = &infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "GlobalInClusterIPPool", Name: "conformance-vips"}
		Expect(mgmt.Create(ctx, oc)).To(Succeed())
		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(vc), c)).To(Succeed())
			g.Expect(c.Spec.ControlPlaneEndpoint.Host).To(Equal("10.30.9.100"), "Cluster API copied the claimed endpoint")
			g.Expect(c.Spec.ControlPlaneEndpoint.Port).To(BeEquivalentTo(6443))
		}, wait, poll).Should(Succeed())
		Expect(mgmt.Delete(ctx, vc)).To(Succeed())
		Eventually(func(g Gomega) {
			list := &ipamv1.IPAddressList{}
			g.Expect(mgmt.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			for _, a := range list.Items {
				g.Expect(a.Spec.PoolRef.Name).NotTo(Equal("conformance-vips"), "the endpoint's address is released with the cluster")
			}
			g.Expect(apierrors.IsNotFound(mgmt.Get(ctx, client.ObjectKeyFromObject(vc), &clusterv1.Cluster{}))).To(BeTrue())
		}, wait, poll).Should(Succeed())
	})

	It("reboots an unhealthy worker through an OVirtRemediation from a MachineHealthCheck, and replaces nothing", func(ctx SpecContext) {
		remediationByReboot(ctx)
	})

	It("removes every VM and finalizer when the Cluster is deleted", func(ctx SpecContext) {
		Expect(mgmt.Delete(ctx, cluster)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{}))
		}, wait, poll).Should(BeTrue())
		Expect(vmNames()).To(BeEmpty())
		oms := &infrav1.OVirtMachineList{}
		Expect(mgmt.List(ctx, oms, client.InNamespace(ns))).To(Succeed())
		Expect(oms.Items).To(BeEmpty())
		ocs := &infrav1.OVirtClusterList{}
		Expect(mgmt.List(ctx, ocs, client.InNamespace(ns))).To(Succeed())
		Expect(ocs.Items).To(BeEmpty())
		for _, g := range stack.Sim.AffinityGroups("") {
			Expect(g.Name).NotTo(HavePrefix("capov-"+ns+"-"), "the cluster's affinity groups are deleted with it")
		}
	})
})

func setClusterPaused(ctx context.Context, paused bool) {
	Eventually(func() error {
		c := &clusterv1.Cluster{}
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, c); err != nil {
			return err
		}
		base := c.DeepCopy()
		c.Spec.Paused = ptr.To(paused)
		return mgmt.Patch(ctx, c, client.MergeFrom(base))
	}, wait, poll).Should(Succeed())
}
