package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// ClusterNameLabel is the label CAPI puts on every object of a cluster.
const ClusterNameLabel = clusterv1.ClusterNameLabel

// Namespace returns a namespace object.
func Namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// CredentialsSecret is an OVirtProvider credentials Secret.
func CredentialsSecret(namespace, name, username, password string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"username": username, "password": password},
	}
}

// Provider is an OVirtProvider for engineURL whose credentials are in secretName, trusting
// caPEM (base64-encoded into spec.tls.certs) when given.
func Provider(name, engineURL, secretName string, caPEM []byte) *infrav1.OVirtProvider {
	p := &infrav1.OVirtProvider{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       infrav1.OVirtProviderSpec{Engine: engineURL, CredentialsSecretName: secretName},
	}
	if len(caPEM) > 0 {
		p.Spec.TLS = &infrav1.OVirtProviderTLS{Certs: b64(caPEM)}
	}
	return p
}

// Cluster is a CAPI Cluster whose infrastructure is an OVirtCluster of the same name.
func Cluster(namespace, name string) *clusterv1.Cluster {
	return &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "OVirtCluster", Name: name,
			},
		},
	}
}

// OVirtCluster is the OVirtCluster of a Cluster, owned by it.
func OVirtCluster(cluster *clusterv1.Cluster, endpointHost string, port int32) *infrav1.OVirtCluster {
	oc := &infrav1.OVirtCluster{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cluster.Namespace, Name: cluster.Name,
			Labels: map[string]string{ClusterNameLabel: cluster.Name},
		},
	}
	oc.Spec.ControlPlaneEndpoint.Host = endpointHost
	oc.Spec.ControlPlaneEndpoint.Port = port
	if cluster.UID != "" {
		oc.OwnerReferences = []metav1.OwnerReference{ownerRef(cluster, "Cluster")}
	}
	return oc
}

// SetInfrastructureProvisioned marks the Cluster's infrastructure provisioned, as CAPI's Cluster
// controller does once the OVirtCluster is ready.
func SetInfrastructureProvisioned(ctx context.Context, c client.Client, cluster *clusterv1.Cluster) error {
	base := cluster.DeepCopy()
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	return c.Status().Patch(ctx, cluster, client.MergeFrom(base))
}

// KubeconfigSecret is the `<cluster>-kubeconfig` Secret CAPI's ClusterCache reads to reach the
// workload cluster.
func KubeconfigSecret(cluster *clusterv1.Cluster, kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cluster.Namespace, Name: cluster.Name + "-kubeconfig",
			Labels: map[string]string{ClusterNameLabel: cluster.Name},
		},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{"value": kubeconfig},
	}
}

// BootstrapSecret is a bootstrap data Secret as a bootstrap provider writes it.
func BootstrapSecret(namespace, name, cluster, value, format string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{ClusterNameLabel: cluster}},
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{"value": []byte(value), "format": []byte(format)},
	}
}

// Machine is a CAPI Machine of cluster whose infrastructure is the OVirtMachine of the same
// name. bootstrapSecret may be empty (bootstrap data not ready yet).
func Machine(cluster *clusterv1.Cluster, name, bootstrapSecret string) *clusterv1.Machine {
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cluster.Namespace, Name: name,
			Labels: map[string]string{ClusterNameLabel: cluster.Name},
		},
		Spec: clusterv1.MachineSpec{
			ClusterName: cluster.Name,
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "OVirtMachine", Name: name,
			},
		},
	}
	if bootstrapSecret != "" {
		m.Spec.Bootstrap.DataSecretName = ptr.To(bootstrapSecret)
	} else {
		// A bootstrap provider is still working on it.
		m.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{
			APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: name,
		}
	}
	return m
}

// OVirtMachine is the OVirtMachine of a Machine, owned by it as CAPI sets it up.
func OVirtMachine(machine *clusterv1.Machine, spec infrav1.OVirtVMSpec) *infrav1.OVirtMachine {
	om := &infrav1.OVirtMachine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: machine.Namespace, Name: machine.Name,
			Labels: map[string]string{ClusterNameLabel: machine.Spec.ClusterName},
		},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: spec},
	}
	if machine.UID != "" {
		om.OwnerReferences = []metav1.OwnerReference{ownerRef(machine, "Machine")}
	}
	return om
}

func ownerRef(obj client.Object, kind string) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: clusterv1.GroupVersion.String(), Kind: kind, Name: obj.GetName(), UID: obj.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

// DefaultKubeletVersion is the version a registered Node's kubelet reports when the test
// names none.
const DefaultKubeletVersion = "v1.36.3"

// RegisterNode creates a Node as kubelet registers it without a cloud provider: empty
// providerID, the VM id as SMBIOS system UUID (upper-case, as dmidecode prints it), Ready,
// running DefaultKubeletVersion.
func RegisterNode(ctx context.Context, c client.Client, name, vmID string, addresses []string) (*corev1.Node, error) {
	return RegisterNodeAt(ctx, c, name, vmID, addresses, DefaultKubeletVersion)
}

// RegisterNodeAt is RegisterNode with the kubelet's version: the guest's image carries the
// Kubernetes version its Machine was built for, and Cluster API compares the two (a
// MachineDeployment with a Machine whose kubelet differs is still upgrading).
func RegisterNodeAt(ctx context.Context, c client.Client, name, vmID string, addresses []string, kubeletVersion string) (*corev1.Node, error) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	if err := c.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating Node %s: %w", name, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return nil, err
	}
	base := node.DeepCopy()
	// What a kubeadm node's kubelet reports besides: its software, capacity and images (the
	// larger part of a real Node, which a cache of Nodes holds for every node).
	node.Status.NodeInfo = corev1.NodeSystemInfo{SystemUUID: strings.ToUpper(vmID), MachineID: strings.ReplaceAll(vmID, "-", ""),
		BootID: "6c1f1d2e-1b8f-4d6e-9f43-" + fmt.Sprintf("%012d", len(name)), KernelVersion: "6.1.0-27-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)",
		ContainerRuntimeVersion: "containerd://1.7.24", KubeletVersion: kubeletVersion, OperatingSystem: "linux", Architecture: "amd64"}
	resources := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8148204Ki"),
		corev1.ResourceEphemeralStorage: resource.MustParse("81854Mi"), corev1.ResourcePods: resource.MustParse("110"),
		"hugepages-1Gi": resource.MustParse("0"), "hugepages-2Mi": resource.MustParse("0")}
	node.Status.Capacity, node.Status.Allocatable = resources, resources.DeepCopy()
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	for i, img := range []string{"registry.k8s.io/kube-proxy:v1.36.3", "registry.k8s.io/pause:3.10", "registry.k8s.io/coredns/coredns:v1.12.1",
		"docker.io/calico/node:v3.29.1", "docker.io/calico/cni:v3.29.1", "docker.io/calico/kube-controllers:v3.29.1",
		"docker.io/calico/pod2daemon-flexvol:v3.29.1", "docker.io/calico/typha:v3.29.1", "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.12.0",
		"quay.io/ovirt/csi-driver:v4.4.3", "registry.k8s.io/metrics-server/metrics-server:v0.7.2", "quay.io/prometheus/node-exporter:v1.8.2"} {
		repo, _, _ := strings.Cut(img, ":")
		digest := fmt.Sprintf("%064x", i*7919+len(img))
		node.Status.Images = append(node.Status.Images, corev1.ContainerImage{Names: []string{repo + "@sha256:" + digest, img}, SizeBytes: int64(10_000_000 + i*3_000_000)})
	}
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastHeartbeatTime: now, LastTransitionTime: now},
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
	for _, a := range addresses {
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	if err := c.Status().Patch(ctx, node, client.MergeFrom(base)); err != nil {
		return nil, fmt.Errorf("setting status of Node %s: %w", name, err)
	}
	return node, nil
}

// VMInfo is what the Kubelet needs to know about a VM.
type VMInfo struct {
	ID, Name, Status string
	IPs              []string
}

// Kubelet registers a Node in the workload cluster for every VM that is up, as the kubelet of
// a booted node would.
type Kubelet struct {
	// Workload is the workload cluster client.
	Workload client.Client
	// VMs lists the VMs of the simulator.
	VMs func() []VMInfo
	// Filter selects the VMs that belong to this workload cluster (nil: all).
	Filter func(VMInfo) bool
	// Interval is the poll interval (default 200ms).
	Interval time.Duration
	// KubeletVersion returns the version the VM's kubelet runs (nil: DefaultKubeletVersion).
	// An error leaves the VM for the next poll.
	KubeletVersion func(ctx context.Context, vm VMInfo) (string, error)
}

// Run registers Nodes until ctx ends.
func (k *Kubelet) Run(ctx context.Context) {
	interval := k.Interval
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	registered := map[string]bool{}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, vm := range k.VMs() {
			if vm.Status != "up" || registered[vm.ID] || (k.Filter != nil && !k.Filter(vm)) {
				continue
			}
			version := DefaultKubeletVersion
			if k.KubeletVersion != nil {
				v, err := k.KubeletVersion(ctx, vm)
				if err != nil {
					continue
				}
				version = v
			}
			if _, err := RegisterNodeAt(ctx, k.Workload, vm.Name, vm.ID, vm.IPs, version); err == nil {
				registered[vm.ID] = true
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
