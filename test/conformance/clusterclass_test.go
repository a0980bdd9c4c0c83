package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
)

// The shipped ClusterClass (templates/clusterclass-ovirt.yaml, what `clusterctl generate
// cluster --flavor topology` adds) run by CAPI's topology reconciler with every variable: its
// patches must produce objects that CAPOV brings up, static addresses from a real pool included.
const (
	shippedNS       = "clusterclass"
	shippedCluster  = "shipped"
	shippedEndpoint = "10.0.3.100"
	shippedKey      = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHx9conformance capov@example.org"
)

func shippedVariables() []clusterv1.ClusterVariable {
	v := func(name, raw string) clusterv1.ClusterVariable {
		return clusterv1.ClusterVariable{Name: name, Value: apiextensionsv1.JSON{Raw: []byte(raw)}}
	}
	// Every variable with every field: CAPI's Cluster webhook, which would apply the schema's
	// defaults, does not run here.
	return []clusterv1.ClusterVariable{
		v("provider", `"`+providerName+`"`),
		v("ovirtCluster", `"Default"`),
		v("template", `"rhcos-4.14"`),
		v("controlPlaneEndpoint", `{"host":"`+shippedEndpoint+`","port":6443}`),
		v("controlPlaneAntiAffinity", `"Soft"`),
		v("vnicProfile", `"ovirtmgmt"`),
		v("ipPool", `{"apiGroup":"ipam.cluster.x-k8s.io","kind":"InClusterIPPool","name":"shipped-nodes","nameservers":["10.31.0.53"]}`),
		v("controlPlaneMachine", `{"cpuSockets":1,"cpuCores":4,"memoryMB":8192,"osDiskSizeGB":30}`),
		v("workerMachine", `{"cpuSockets":1,"cpuCores":2,"memoryMB":5120,"osDiskSizeGB":25}`),
		v("sshAuthorizedKeys", `["`+shippedKey+`"]`),
		v("failureDomains", `[{"name":"fd-a","ovirtcluster":"Default"},{"name":"fd-b","ovirtcluster":"Secondary","controlPlane":false}]`),
	}
}

var _ = Describe("The shipped ClusterClass builds a cluster with static addresses through CAPI's topology reconciler", Ordered, func() {
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: shippedNS, Name: shippedCluster},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			ClassRef:     clusterv1.ClusterClassRef{Name: "ovirt"},
			Version:      topoVersion,
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{
				{Class: "default-worker", Name: "md-0", Replicas: ptr.To[int32](2)},
			}},
			Variables: shippedVariables(),
		}},
	}
	machines := func(g Gomega) []clusterv1.Machine {
		list := &clusterv1.MachineList{}
		g.Expect(mgmt.List(context.Background(), list, client.InNamespace(shippedNS), client.MatchingLabels{clusterv1.ClusterNameLabel: shippedCluster})).To(Succeed())
		return list.Items
	}

	BeforeAll(func(ctx SpecContext) {
		Expect(installKubeadmCRDs(ctx)).To(Succeed())
		Expect(mgmt.Create(ctx, harness.Namespace(shippedNS))).To(Succeed())
		root, err := envtest.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		raw, err := os.ReadFile(filepath.Join(root, "templates", "clusterclass-ovirt.yaml"))
		Expect(err).NotTo(HaveOccurred())
		// clusterctl's own variable processor, as `clusterctl generate cluster` renders the file.
		rendered, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
			if name == "NAMESPACE" {
				return shippedNS, nil
			}
			return "", fmt.Errorf("variable %s is not set", name)
		})
		Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(GinkgoT().TempDir(), "clusterclass.yaml")
		Expect(os.WriteFile(path, rendered, 0o600)).To(Succeed())
		objs, err := readObjects(path)
		Expect(err).NotTo(HaveOccurred())
		for _, obj := range objs {
			Expect(mgmt.Create(ctx, obj)).To(Succeed(), "creating %s %s", obj.GetKind(), obj.GetName())
		}
		pool := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
			"metadata": map[string]any{"namespace": shippedNS, "name": "shipped-nodes"},
			"spec":     map[string]any{"addresses": []any{"10.31.0.10-10.31.0.19"}, "prefix": int64(24), "gateway": "10.31.0.1"},
		}}
		Expect(mgmt.Create(ctx, pool)).To(Succeed())
		bootstrapCtx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			playBootstrapProvider(bootstrapCtx, shippedNS)
		}()
		DeferCleanup(func() {
			stop()
			<-done
		})
	})

	It("accepts every variable and patches the OVirtCluster, which CAPOV provisions", func(ctx SpecContext) {
		expectClassReady(ctx, shippedNS, "ovirt")
		Expect(mgmt.Create(ctx, cluster)).To(Succeed())
		Expect(mgmt.Create(ctx, harness.KubeconfigSecret(cluster, stack.WorkloadKubeconfig))).To(Succeed())
		oc := &infrav1.OVirtCluster{}
		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
			g.Expect(c.Spec.InfrastructureRef.Name).NotTo(BeEmpty(), "topology: %+v", c.Status.Conditions)
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: shippedNS, Name: c.Spec.InfrastructureRef.Name}, oc)).To(Succeed())
			g.Expect(oc.Status.Initialization.Provisioned).To(HaveValue(BeTrue()))
			g.Expect(c.Spec.ControlPlaneEndpoint.Host).To(Equal(shippedEndpoint))
		}, wait, poll).Should(Succeed())
		Expect(oc.Spec.Provider).To(Equal(providerName))
		Expect(oc.Spec.ControlPlaneAntiAffinity).To(Equal(infrav1.AntiAffinitySoft))
		Expect(oc.Spec.FailureDomains).To(Equal([]infrav1.OVirtFailureDomain{
			{Name: "fd-a", OVirtCluster: "Default"}, {Name: "fd-b", OVirtCluster: "Secondary", ControlPlane: ptr.To(false)},
		}), "the failure-domains patch")
		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
			g.Expect(c.Status.FailureDomains).To(ConsistOf(HaveField("Name", "fd-a"), HaveField("Name", "fd-b")), "Cluster API copied the published failure domains")
		}, wait, poll).Should(Succeed())

		kcp := &unstructured.Unstructured{}
		kcp.SetGroupVersionKind(kcpGVK)
		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: shippedNS, Name: c.Spec.ControlPlaneRef.Name}, kcp)).To(Succeed())
		}, wait, poll).Should(Succeed())
		keys, _, _ := unstructured.NestedSlice(kcp.Object, "spec", "kubeadmConfigSpec", "users")
		Expect(fmt.Sprint(keys)).To(ContainSubstring(shippedKey), "the ssh-authorized-keys patch reached the control plane")
		infraName, _, _ := unstructured.NestedString(kcp.Object, "spec", "machineTemplate", "spec", "infrastructureRef", "name")
		cpTemplate := &infrav1.OVirtMachineTemplate{}
		Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: shippedNS, Name: infraName}, cpTemplate)).To(Succeed())
		spec := cpTemplate.Spec.Template.Spec
		Expect(spec.Provider).To(Equal(providerName))
		Expect(spec.Template).To(Equal("rhcos-4.14"))
		Expect(spec.Memory).To(HaveValue(HaveField("SizeMB", BeEquivalentTo(8192))))
		Expect(spec.OSDiskSizeGB).To(BeEquivalentTo(30))
		playControlPlaneProvider(ctx, kcp)
	})

	It("creates the workers from the patched template with addresses from the pool, and they come up", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			ms := machines(g)
			g.Expect(ms).To(HaveLen(2), "machines of the cluster; %s", topologyConditions(cluster))
			for _, m := range ms {
				g.Expect(m.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)), "Machine %s", m.Name)
				// The guest's kubelet is the version the Machine was built for: CAPI's topology
				// reconciler reads another as a MachineDeployment still upgrading.
				g.Expect(m.Status.NodeInfo).NotTo(BeNil(), "Machine %s: CAPI copies the Node's info", m.Name)
				g.Expect(m.Status.NodeInfo.KubeletVersion).To(Equal(topoVersion), "Machine %s", m.Name)
			}
		}, wait, poll).Should(Succeed())
		seen := map[string]bool{}
		for _, m := range machines(Default) {
			om := &infrav1.OVirtMachine{}
			Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: shippedNS, Name: m.Spec.InfrastructureRef.Name}, om)).To(Succeed())
			spec := om.Spec.OVirtVMSpec
			Expect(spec.Template).To(Equal("rhcos-4.14"))
			Expect(spec.CPU).To(HaveValue(HaveField("Cores", BeEquivalentTo(2))))
			Expect(spec.Memory).To(HaveValue(HaveField("SizeMB", BeEquivalentTo(5120))))
			Expect(spec.OSDiskSizeGB).To(BeEquivalentTo(25))
			Expect(spec.NICs).To(HaveLen(1))
			Expect(spec.NICs[0].VnicProfile).To(Equal("ovirtmgmt"))
			Expect(spec.NICs[0].AddressesFromPools).To(Equal([]infrav1.IPPoolReference{{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "shipped-nodes"}}))
			Expect(spec.NICs[0].Nameservers).To(Equal([]string{"10.31.0.53"}))
			ip := om.Status.Addresses[0].Address
			Expect(ip).To(HavePrefix("10.31.0."), "an address of the pool")
			Expect(seen).NotTo(HaveKey(ip))
			seen[ip] = true
			vm, ok := stack.Sim.VM(om.Status.VMID)
			Expect(ok).To(BeTrue())
			Expect(vm.Status).To(Equal("up"))
			Expect(vm.MemoryMB).To(BeEquivalentTo(5120))
			in, err := stack.Sim.Initialization(om.Status.VMID)
			Expect(err).NotTo(HaveOccurred())
			Expect(in.Network).To(HaveLen(1))
			Expect(in.Network[0].Addresses).To(Equal([]string{ip + "/24"}))
			Expect(in.Network[0].DNSServers).To(Equal([]string{"10.31.0.53"}))
		}
		expectTopologyReconciled(ctx, cluster)
	})

	It("deletes the VMs and releases the addresses with the Cluster", func(ctx SpecContext) {
		Expect(mgmt.Delete(ctx, cluster)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(apierrors.IsNotFound(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{}))).To(BeTrue())
			claims := &ipamv1.IPAddressClaimList{}
			g.Expect(mgmt.List(ctx, claims, client.InNamespace(shippedNS))).To(Succeed())
			g.Expect(claims.Items).To(BeEmpty())
		}, wait, poll).Should(Succeed())
		for name := range vmNames() {
			Expect(strings.HasPrefix(name, shippedCluster+"-")).To(BeFalse(), "VM %s outlived the cluster", name)
		}
	})
})

// topologyConditions describes the Cluster's conditions and its MachineDeployments, for a
// failure message.
func topologyConditions(cluster *clusterv1.Cluster) string {
	var b strings.Builder
	c := &clusterv1.Cluster{}
	if err := mgmt.Get(context.Background(), client.ObjectKeyFromObject(cluster), c); err == nil {
		for _, cond := range c.Status.Conditions {
			fmt.Fprintf(&b, "%s=%s %s: %s; ", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	mds := &clusterv1.MachineDeploymentList{}
	_ = mgmt.List(context.Background(), mds, client.InNamespace(cluster.Namespace))
	for _, md := range mds.Items {
		fmt.Fprintf(&b, "MachineDeployment %s replicas=%d; ", md.Name, ptr.Deref(md.Spec.Replicas, 0))
		for _, cond := range md.Status.Conditions {
			fmt.Fprintf(&b, "  %s=%s %s: %s; ", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	return b.String()
}
