package conformance

import (
	"bytes"
	"context"
	"os/exec"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

const (
	wait = 3 * time.Minute
	poll = 250 * time.Millisecond
)

// machineTemplate is an OVirtMachineTemplate of the product doc's shape.
func machineTemplate(name, ovirtTemplate string, cores int32) *infrav1.OVirtMachineTemplate {
	return &infrav1.OVirtMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.OVirtMachineTemplateSpec{Template: infrav1.OVirtMachineTemplateResource{
			Spec: infrav1.OVirtVMSpec{
				Provider: providerName, OVirtCluster: "Default", Template: ovirtTemplate,
				VMType:       infrav1.VMTypeServer,
				CPU:          &infrav1.CPU{Sockets: 1, Cores: cores, Threads: 1},
				Memory:       &infrav1.Memory{SizeMB: 4096, GuaranteedMB: 2048},
				OSDiskSizeGB: 20,
				NICs:         []infrav1.NIC{{VnicProfile: "ovirtmgmt"}},
			},
		}},
	}
}

// machineDeployment is a MachineDeployment of the conformance cluster on an OVirtMachineTemplate,
// with bootstrap data from a Secret (no bootstrap provider runs here).
func machineDeployment(name, template string, replicas int32) *clusterv1.MachineDeployment {
	labels := map[string]string{clusterv1.ClusterNameLabel: clusterName, "pool": name}
	return &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: clusterName}},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: clusterName,
			Replicas:    ptr.To(replicas),
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			// What CAPI's defaulting webhook would set (its webhooks do not run here).
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{
					ClusterName: clusterName,
					Version:     "v1.31.0",
					Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap-data")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: "OVirtMachineTemplate", Name: template,
					},
				},
			},
		},
	}
}

func scale(ctx context.Context, name string, replicas int32) {
	Eventually(func() error {
		md := &clusterv1.MachineDeployment{}
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, md); err != nil {
			return err
		}
		base := md.DeepCopy()
		md.Spec.Replicas = ptr.To(replicas)
		return mgmt.Patch(ctx, md, client.MergeFrom(base))
	}, wait, poll).Should(Succeed())
}

// machinesOf lists the Machines of a MachineDeployment.
func machinesOf(ctx context.Context, md string) []clusterv1.Machine {
	list := &clusterv1.MachineList{}
	Expect(mgmt.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"pool": md})).To(Succeed())
	return list.Items
}

// vmsOf returns the simulator VMs whose names are the Machines' infrastructure names.
func vmNames() map[string]string {
	out := map[string]string{}
	for _, vm := range stack.Sim.VMs() {
		out[vm.Name] = vm.ID
	}
	return out
}

// expectRunning waits until the MachineDeployment has n Machines Running with a nodeRef, the
// providerID of their Node and the addresses of their VM, and n VMs in oVirt.
func expectRunning(ctx context.Context, md string, n int) {
	Eventually(func(g Gomega) {
		machines := machinesOf(ctx, md)
		running := 0
		for _, m := range machines {
			if m.DeletionTimestamp.IsZero() && m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef.Name != "" {
				running++
			}
		}
		g.Expect(running).To(Equal(n), "running machines of %s", md)
		g.Expect(machines).To(HaveLen(n), "machines of %s (none left deleting)", md)
	}, wait, poll).Should(Succeed())

	vms := vmNames()
	for _, m := range machinesOf(ctx, md) {
		om := &infrav1.OVirtMachine{}
		Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.InfrastructureRef.Name}, om)).To(Succeed())
		Expect(om.Status.Initialization.Provisioned).To(HaveValue(BeTrue()))
		Expect(conditions.IsTrue(om, infrav1.ReadyCondition)).To(BeTrue())
		id, ok := vms[om.Name]
		Expect(ok).To(BeTrue(), "VM %s in oVirt", om.Name)
		Expect(m.Spec.ProviderID).To(Equal("ovirt://" + id))
		node := workloadNode(ctx, m.Status.NodeRef.Name)
		Expect(node.Spec.ProviderID).To(Equal(m.Spec.ProviderID), "CAPI's providerID is the Node's")
		Expect(m.Status.Addresses).NotTo(BeEmpty(), "CAPI copied the VM's addresses")
		for _, a := range m.Status.Addresses {
			Expect(a.Address).NotTo(Equal(endpointHost))
		}
		Expect(m.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()), "CAPI read status.initialization.provisioned")
		ready := findCondition(m.Status.Conditions, clusterv1.InfrastructureReadyCondition)
		Expect(ready).NotTo(BeNil())
		Expect(ready.Status).To(Equal(metav1.ConditionTrue), "InfrastructureReady mirrors our Ready")
	}
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

func workloadNode(ctx context.Context, name string) *corev1.Node {
	node := &corev1.Node{}
	Expect(stack.Workload.Client.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
	return node
}

// kubectl runs kubectl against the management cluster as an operator types it and returns what
// it printed (stdout and stderr). The spec is skipped where kubectl is not installed.
func kubectl(ctx context.Context, args ...string) (string, error) {
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		Skip("kubectl is not installed")
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig=" + stack.KubeconfigPath}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// eventCount is how many times events of reason were emitted about obj: an event series counts
// its occurrences (the API holds a series' count as of its last update).
func eventCount(ctx context.Context, obj client.Object, reason string) int32 {
	list := &eventsv1.EventList{}
	Expect(mgmt.List(ctx, list, client.InNamespace(obj.GetNamespace()))).To(Succeed())
	var n int32
	for _, e := range list.Items {
		if e.Regarding.Name != obj.GetName() || e.Reason != reason {
			continue
		}
		if e.Series != nil {
			n += e.Series.Count
		} else {
			n++
		}
	}
	return n
}
