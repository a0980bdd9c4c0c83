package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// TestTheCacheKeepsWhatTheManagerReads: Machines keep metadata and spec, Nodes their identity,
// providerID and addresses; what is dropped is what Cluster API and kubelets write all the time.
func TestTheCacheKeepsWhatTheManagerReads(t *testing.T) {
	g := NewWithT(t)
	tr := CacheTransform()
	managed := []metav1.ManagedFieldsEntry{{Manager: "capi"}}

	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "w-1", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}, ManagedFields: managed},
		Spec: clusterv1.MachineSpec{ClusterName: "c1", FailureDomain: "fd-a", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("w-1-bootstrap")}},
		Status: clusterv1.MachineStatus{Phase: "Running", Addresses: clusterv1.MachineAddresses{{Type: clusterv1.MachineExternalIP, Address: "10.0.0.1"}},
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}}}
	out, err := tr(m.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	got := out.(*clusterv1.Machine)
	g.Expect(got.Spec).To(Equal(m.Spec))
	g.Expect(got.Labels).To(Equal(m.Labels))
	g.Expect(got.ManagedFields).To(BeNil())
	g.Expect(got.Status).To(Equal(clusterv1.MachineStatus{}))

	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w-1", UID: "u-1", ResourceVersion: "42", ManagedFields: managed,
		Labels:      map[string]string{"kubernetes.io/hostname": "w-1", "node-role.kubernetes.io/control-plane": ""},
		Annotations: map[string]string{"kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock"}},
		Spec: corev1.NodeSpec{ProviderID: "ovirt://abc", PodCIDR: "10.244.1.0/24", Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			NodeInfo:     corev1.NodeSystemInfo{SystemUUID: "ABC", KubeletVersion: "v1.36.0"},
			Addresses:    []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			Images:       []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 1}},
			Conditions:   []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Capacity:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			VolumesInUse: []corev1.UniqueVolumeName{"v"},
		}}
	out, err = tr(n.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	node := out.(*corev1.Node)
	g.Expect(node.Spec).To(Equal(corev1.NodeSpec{ProviderID: "ovirt://abc"}))
	g.Expect(node.ObjectMeta).To(Equal(metav1.ObjectMeta{Name: "w-1", UID: "u-1", ResourceVersion: "42"}), "identity only: no labels, annotations or managedFields")
	g.Expect(node.Status).To(Equal(corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{SystemUUID: "ABC"}, Addresses: n.Status.Addresses}))
	g.Expect(node.ManagedFields).To(BeNil())

	om := &infrav1.OVirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "w-1", ManagedFields: managed}, Status: infrav1.OVirtMachineStatus{VMID: "abc"}}
	out, err = tr(om.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*infrav1.OVirtMachine).Status.VMID).To(Equal("abc"), "other kinds keep their status")
	g.Expect(out.(*infrav1.OVirtMachine).ManagedFields).To(BeNil())
}
