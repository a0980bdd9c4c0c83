package conformance

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// setNodeReady sets the Ready condition of a workload Node, as its kubelet would post it (the
// kubelet stand-in registers Nodes and posts nothing after).
func setNodeReady(ctx context.Context, name string, status corev1.ConditionStatus) {
	Eventually(func() error {
		node := workloadNode(ctx, name)
		now := metav1.Now()
		for i := range node.Status.Conditions {
			if node.Status.Conditions[i].Type == corev1.NodeReady {
				node.Status.Conditions[i].Status, node.Status.Conditions[i].LastTransitionTime, node.Status.Conditions[i].LastHeartbeatTime = status, now, now
			}
		}
		return stack.Workload.Client.Status().Update(ctx, node)
	}, wait, poll).Should(Succeed())
}

// remediationByReboot: a MachineHealthCheck whose remediation template is an
// OVirtRemediationTemplate, run by Cluster API's own reconciler, asks CAPOV to remediate a
// worker whose Node went NotReady; CAPOV reboots its VM through the Engine; once the Node is
// Ready again the MachineHealthCheck deletes the request, and the Machine and its VM are the same
// as before: nothing was replaced.
func remediationByReboot(ctx context.Context) {
	Expect(mgmt.Create(ctx, machineTemplate("reboot-a", "rhcos-4.14", 2))).To(Succeed())
	Expect(mgmt.Create(ctx, &infrav1.OVirtRemediationTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reboot"},
		Spec: infrav1.OVirtRemediationTemplateSpec{Template: infrav1.OVirtRemediationTemplateResource{Spec: infrav1.OVirtRemediationSpec{
			Strategy: &infrav1.RemediationStrategy{Type: infrav1.RemediationStrategyReboot, RetryLimit: ptr.To[int32](1), Timeout: &metav1.Duration{Duration: 5 * time.Minute}},
		}}},
	})).To(Succeed())
	Expect(mgmt.Create(ctx, machineDeployment("rebooted", "reboot-a", 1))).To(Succeed())
	Expect(mgmt.Create(ctx, &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rebooted"},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: clusterName,
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"pool": "rebooted"}},
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](1)},
			}},
			Remediation: clusterv1.MachineHealthCheckRemediation{TemplateRef: clusterv1.MachineHealthCheckRemediationTemplateReference{
				APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtRemediationTemplate", Name: "reboot",
			}},
		},
	})).To(Succeed())
	expectRunning(ctx, "rebooted", 1)
	m := machinesOf(ctx, "rebooted")[0]
	vmID := strings.TrimPrefix(m.Spec.ProviderID, "ovirt://")
	before, err := stack.Sim.Guest(vmID)
	Expect(err).NotTo(HaveOccurred())

	By("the Node going NotReady")
	setNodeReady(ctx, m.Status.NodeRef.Name, corev1.ConditionFalse)
	rem := &infrav1.OVirtRemediation{}
	Eventually(func(g Gomega) {
		g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Name}, rem)).To(Succeed(), "the MachineHealthCheck creates the request")
		g.Expect(rem.Status.Attempts).NotTo(BeEmpty())
		g.Expect(rem.Status.Attempts[0].Action).To(Equal(infrav1.RemediationActionReboot))
	}, wait, poll).Should(Succeed())
	Expect(rem.OwnerReferences).To(ContainElement(HaveField("UID", m.UID)), "Cluster API owns it through the Machine")
	Eventually(func(g Gomega) {
		guest, err := stack.Sim.Guest(vmID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(guest.Boots).To(BeNumerically(">", before.Boots), "the guest restarted")
	}, wait, poll).Should(Succeed())

	By("the kubelet answering again after the reboot")
	setNodeReady(ctx, m.Status.NodeRef.Name, corev1.ConditionTrue)
	Eventually(func(g Gomega) {
		err := mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Name}, &infrav1.OVirtRemediation{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the MachineHealthCheck deletes the request of a healthy Machine: %v", err)
	}, wait, poll).Should(Succeed())
	after := machinesOf(ctx, "rebooted")
	Expect(after).To(HaveLen(1))
	Expect(after[0].UID).To(Equal(m.UID), "the Machine was not replaced")
	Expect(after[0].DeletionTimestamp.IsZero()).To(BeTrue())
	Expect(after[0].Spec.ProviderID).To(Equal(m.Spec.ProviderID), "nor its VM")
	Expect(poolVMs("rebooted")).To(HaveLen(1))

	scale(ctx, "rebooted", 0)
	expectRunning(ctx, "rebooted", 0)
}
