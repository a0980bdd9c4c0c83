package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// CacheTransform is what the manager keeps of each object it caches: never the managedFields,
// and of the objects it only reads a part of, only that part (memory at 5,000 machines, see
// docs/benchmarks.md):
//   - Cluster API Machines: metadata and spec (the bootstrap Secret's name, the failure domain,
//     labels); their status (conditions, addresses, node info), written by Cluster API, is never
//     read;
//   - workload clusters' Nodes: their identity (name, uid, resourceVersion, timestamps),
//     spec.providerID, status.nodeInfo.systemUUID and status.addresses; labels, annotations,
//     taints, pod CIDRs, a kubelet's image list, conditions, capacity and volumes are never read
//     (their metadata was 16 MB of the live heap at 5,000 machines over 50 clusters).
//
// Writes stay correct: the manager patches these objects with merge patches computed from two
// copies of the same transformed object (a label of a Machine, a Node's providerID), which
// never name a field that was left out.
func CacheTransform() toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(in any) (any, error) {
		out, err := strip(in)
		if err != nil {
			return out, err
		}
		switch o := out.(type) {
		case *clusterv1.Machine:
			o.Status = clusterv1.MachineStatus{}
		case *corev1.Node:
			o.ObjectMeta = metav1.ObjectMeta{Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion,
				CreationTimestamp: o.CreationTimestamp, DeletionTimestamp: o.DeletionTimestamp}
			o.Spec = corev1.NodeSpec{ProviderID: o.Spec.ProviderID}
			o.Status = corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{SystemUUID: o.Status.NodeInfo.SystemUUID}, Addresses: o.Status.Addresses}
		}
		return out, nil
	}
}
