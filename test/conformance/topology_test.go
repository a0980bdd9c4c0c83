package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
)

// The topology spec runs in its own namespace, with its own Cluster, so that it neither sees nor
// disturbs the objects of the other specs, in whatever order Ginkgo runs them.
const (
	topoNS             = "topology"
	topoCluster        = "topo"
	topoClass          = "ovirt"
	topoMD             = "md-0"
	topoVersion        = "v1.31.0"
	topoEndpoint       = "10.0.2.100"
	topoWorkerMemoryMB = 6144
	// classMemoryMB is the memory of both OVirtMachineTemplates of the class (testdata).
	classMemoryMB = 4096
)

var (
	kcpGVK           = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"}
	kubeadmConfigGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}
)

var _ = Describe("CAPI's topology reconciler creates a cluster from the ClusterClass and scales a machine deployment topology", Ordered, func() {
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: topoCluster},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			ClassRef:     clusterv1.ClusterClassRef{Name: topoClass},
			Version:      topoVersion,
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{
				{Class: "workers", Name: topoMD, Replicas: ptr.To[int32](1)},
			}},
			// Every variable explicitly: CAPI's Cluster webhook, which would default them, does
			// not run here (the topology reconciler validates them again itself).
			Variables: []clusterv1.ClusterVariable{
				{Name: "endpointHost", Value: apiextensionsv1.JSON{Raw: []byte(`"` + topoEndpoint + `"`)}},
				{Name: "workerMemoryMB", Value: apiextensionsv1.JSON{Raw: fmt.Appendf(nil, "%d", topoWorkerMemoryMB)}},
			},
		}},
	}

	BeforeAll(func(ctx SpecContext) {
		Expect(installKubeadmCRDs(ctx)).To(Succeed())
		Expect(mgmt.Create(ctx, harness.Namespace(topoNS))).To(Succeed())
		objs, err := readObjects(filepath.Join("testdata", "clusterclass.yaml"))
		Expect(err).NotTo(HaveOccurred())
		for _, obj := range objs {
			obj.SetNamespace(topoNS)
			Expect(mgmt.Create(ctx, obj)).To(Succeed(), "creating %s %s", obj.GetKind(), obj.GetName())
		}
		bootstrapCtx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			playBootstrapProvider(bootstrapCtx, topoNS)
		}()
		DeferCleanup(func() {
			stop()
			<-done
		})
	})

	ReportAfterEach(func(report SpecReport) {
		if report.Failed() && stack != nil {
			AddReportEntry("topology state", topologyState(context.Background()))
		}
	})

	It("reconciles the ClusterClass and creates the OVirtCluster from its template with the patched endpoint, which CAPOV provisions", func(ctx SpecContext) {
		cc := expectClassReady(ctx, topoNS, topoClass)
		Expect(cc.Status.Variables).To(ConsistOf(HaveField("Name", "endpointHost"), HaveField("Name", "workerMemoryMB")))

		Expect(mgmt.Create(ctx, cluster)).To(Succeed())
		// The kubeconfig Secret is KubeadmControlPlane's to write; written now, CAPI's
		// ClusterCache connects at its first try instead of retrying 30 s later.
		Expect(mgmt.Create(ctx, harness.KubeconfigSecret(cluster, stack.WorkloadKubeconfig))).To(Succeed())
		oc := &infrav1.OVirtCluster{}
		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
			g.Expect(c.Spec.InfrastructureRef.Kind).To(Equal("OVirtCluster"))
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: topoNS, Name: c.Spec.InfrastructureRef.Name}, oc)).To(Succeed())
			g.Expect(oc.Status.Initialization.Provisioned).To(HaveValue(BeTrue()), "CAPOV provisioned the OVirtCluster")
			g.Expect(c.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()))
			g.Expect(c.Spec.ControlPlaneEndpoint.Host).To(Equal(topoEndpoint), "CAPI copied the patched endpoint to the Cluster")
		}, wait, poll).Should(Succeed())
		Expect(oc.Spec.ControlPlaneEndpoint.Host).To(Equal(topoEndpoint), "the endpoint patch set the variable's value")
		Expect(oc.Spec.ControlPlaneEndpoint.Port).To(BeEquivalentTo(6443))
		Expect(oc.Spec.Provider).To(Equal(providerName), "the rest comes from the OVirtClusterTemplate")
		Expect(oc.Labels).To(HaveKey(clusterv1.ClusterTopologyOwnedLabel))
		Expect(oc.Annotations).To(HaveKeyWithValue(clusterv1.TemplateClonedFromNameAnnotation, topoClass))
		Expect(oc.Finalizers).To(ContainElement(infrav1.ClusterFinalizer))
	})

	It("creates the control plane from its template, and the workers wait until it is initialized", func(ctx SpecContext) {
		kcp := &unstructured.Unstructured{}
		kcp.SetGroupVersionKind(kcpGVK)
		var machine clusterv1.Machine
		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
			g.Expect(c.Spec.ControlPlaneRef.Kind).To(Equal(kcpGVK.Kind))
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: topoNS, Name: c.Spec.ControlPlaneRef.Name}, kcp)).To(Succeed())
			// The topology reconciler created the MachineDeployment in the same pass as the
			// control plane (a control plane it has not created yet counts as stable), and
			// MachineSet its Machine.
			machines := topologyMachines(ctx)
			g.Expect(machines).To(HaveLen(1))
			machine = machines[0]
		}, wait, poll).Should(Succeed())
		version, _, _ := unstructured.NestedString(kcp.Object, "spec", "version")
		Expect(version).To(Equal(topoVersion))
		replicas, _, _ := unstructured.NestedInt64(kcp.Object, "spec", "replicas")
		Expect(replicas).To(BeEquivalentTo(1))
		infraKind, _, _ := unstructured.NestedString(kcp.Object, "spec", "machineTemplate", "spec", "infrastructureRef", "kind")
		infraName, _, _ := unstructured.NestedString(kcp.Object, "spec", "machineTemplate", "spec", "infrastructureRef", "name")
		Expect(infraKind).To(Equal("OVirtMachineTemplate"))
		cpTemplate := &infrav1.OVirtMachineTemplate{}
		Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: topoNS, Name: infraName}, cpTemplate)).To(Succeed())
		Expect(cpTemplate.Annotations).To(HaveKeyWithValue(clusterv1.TemplateClonedFromNameAnnotation, "ovirt-control-plane"))
		Expect(cpTemplate.Spec.Template.Spec.Memory.SizeMB).To(BeEquivalentTo(classMemoryMB), "the memory patch selects the workers' template only")
		Expect(cpTemplate.Spec.Template.Spec.CPU.Cores).To(BeEquivalentTo(4))

		// Until the control plane is initialized the bootstrap provider (playBootstrapProvider,
		// as CABPK) has no join data for the worker, and CAPOV creates no VM without it.
		Expect(machine.Spec.Bootstrap.ConfigRef.Kind).To(Equal(kubeadmConfigGVK.Kind))
		Expect(machine.Spec.Bootstrap.DataSecretName).To(BeNil())
		Expect(topologyVMs()).To(BeEmpty())

		playControlPlaneProvider(ctx, kcp)
		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
			g.Expect(c.Status.Initialization.ControlPlaneInitialized).To(HaveValue(BeTrue()), "CAPI read the control plane's status.initialization")
			init := findCondition(c.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition)
			g.Expect(init).NotTo(BeNil())
			g.Expect(init.Status).To(Equal(metav1.ConditionTrue))
		}, wait, poll).Should(Succeed())
	})

	It("creates the MachineDeployment of the topology on a patched clone of the workers' OVirtMachineTemplate, and its VM comes up", func(ctx SpecContext) {
		var md clusterv1.MachineDeployment
		Eventually(func(g Gomega) {
			mds := topologyMachineDeployments(ctx)
			g.Expect(mds).To(HaveLen(1))
			md = mds[0]
		}, wait, poll).Should(Succeed())
		Expect(md.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
		Expect(md.Spec.Template.Spec.Version).To(Equal(topoVersion))
		Expect(md.Spec.Template.Spec.Bootstrap.ConfigRef.Kind).To(Equal("KubeadmConfigTemplate"))
		Expect(md.Spec.Template.Spec.InfrastructureRef.Kind).To(Equal("OVirtMachineTemplate"))
		tpl := &infrav1.OVirtMachineTemplate{}
		Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: topoNS, Name: md.Spec.Template.Spec.InfrastructureRef.Name}, tpl)).To(Succeed())
		Expect(tpl.Annotations).To(HaveKeyWithValue(clusterv1.TemplateClonedFromNameAnnotation, "ovirt-worker"))
		Expect(tpl.Spec.Template.Spec.Memory.SizeMB).To(BeEquivalentTo(topoWorkerMemoryMB), "the worker-memory patch set the variable's value")
		Expect(tpl.Spec.Template.Spec.CPU.Cores).To(BeEquivalentTo(2))

		expectTopologyVMs(ctx, 1)
		expectTopologyReconciled(ctx, cluster)
	})

	It("scales the MachineDeployment topology from 1 to 2 replicas", func(ctx SpecContext) {
		Eventually(func() error {
			c := &clusterv1.Cluster{}
			if err := mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), c); err != nil {
				return err
			}
			base := c.DeepCopy()
			c.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To[int32](2)
			return mgmt.Patch(ctx, c, client.MergeFrom(base))
		}, wait, poll).Should(Succeed())
		Eventually(func(g Gomega) {
			mds := topologyMachineDeployments(ctx)
			g.Expect(mds).To(HaveLen(1))
			g.Expect(mds[0].Spec.Replicas).To(HaveValue(BeEquivalentTo(2)), "the topology reconciler scaled the MachineDeployment")
		}, wait, poll).Should(Succeed())
		expectTopologyVMs(ctx, 2)
	})

	It("deletes every VM and CAPOV object of the Cluster with it", func(ctx SpecContext) {
		Expect(mgmt.Delete(ctx, cluster)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{}))
		}, wait, poll).Should(BeTrue())
		Expect(topologyVMs()).To(BeEmpty())
		oms := &infrav1.OVirtMachineList{}
		Expect(mgmt.List(ctx, oms, client.InNamespace(topoNS))).To(Succeed())
		Expect(oms.Items).To(BeEmpty())
		ocs := &infrav1.OVirtClusterList{}
		Expect(mgmt.List(ctx, ocs, client.InNamespace(topoNS))).To(Succeed())
		Expect(ocs.Items).To(BeEmpty())
		kcps := &unstructured.UnstructuredList{}
		kcps.SetGroupVersionKind(kcpGVK.GroupVersion().WithKind(kcpGVK.Kind + "List"))
		Expect(mgmt.List(ctx, kcps, client.InNamespace(topoNS))).To(Succeed())
		Expect(kcps.Items).To(BeEmpty())
		// CAPI's topology reconcilers delete the templates of the MachineDeployments and
		// MachineSets they delete. The control plane's clone is left to the garbage collector of
		// kube-controller-manager (which envtest does not run), through its owner, the Cluster.
		Eventually(func(g Gomega) {
			tpls := &infrav1.OVirtMachineTemplateList{}
			g.Expect(mgmt.List(ctx, tpls, client.InNamespace(topoNS))).To(Succeed())
			var workerClones []string
			for _, t := range tpls.Items {
				switch t.Annotations[clusterv1.TemplateClonedFromNameAnnotation] {
				case "ovirt-worker":
					workerClones = append(workerClones, t.Name)
				case "ovirt-control-plane":
					g.Expect(t.OwnerReferences).To(ContainElement(And(HaveField("Kind", "Cluster"), HaveField("Name", topoCluster))))
				}
			}
			g.Expect(workerClones).To(BeEmpty(), "the workers' template clones are deleted")
		}, wait, poll).Should(Succeed())
		for _, g := range stack.Sim.AffinityGroups("") {
			Expect(g.Name).NotTo(HavePrefix("capov-"+topoNS+"-"), "the cluster's affinity groups are deleted with it")
		}
	})
})

// installKubeadmCRDs installs the CRDs of CAPI's kubeadm control-plane and bootstrap providers,
// which the ClusterClass references (the stack installs only CAPI core's), with the contract
// label that `clusterctl init` gets from their kustomization: CAPI reads it to know the
// contract version of a referenced kind.
func installKubeadmCRDs(ctx context.Context) error {
	dir, err := envtest.ModuleDir(ctx, "sigs.k8s.io/cluster-api")
	if err != nil {
		return err
	}
	opts := crenvtest.CRDInstallOptions{ErrorIfPathMissing: true, Paths: []string{
		filepath.Join(dir, "controlplane", "kubeadm", "config", "crd", "bases"),
		filepath.Join(dir, "bootstrap", "kubeadm", "config", "crd", "bases"),
	}}
	if err := crenvtest.ReadCRDFiles(&opts); err != nil {
		return fmt.Errorf("reading the kubeadm CRDs: %w", err)
	}
	for _, crd := range opts.CRDs {
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels["cluster.x-k8s.io/v1beta2"] = "v1beta2"
	}
	if _, err := crenvtest.InstallCRDs(stack.Mgmt.Config, crenvtest.CRDInstallOptions{CRDs: opts.CRDs}); err != nil {
		return fmt.Errorf("installing the kubeadm CRDs: %w", err)
	}
	return nil
}

// readObjects decodes the objects of a multi-document YAML file.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// playControlPlaneProvider reports on the control plane object what KubeadmControlPlane's
// controller would once its first machine is up, which is all CAPI reads of it here: no
// control-plane provider runs in this stack (KCP would create control-plane Machines; the
// spec is about the workers).
//   - status.initialization.controlPlaneInitialized: CAPI's Cluster controller sets the Cluster's
//     ControlPlaneInitialized from it; then the bootstrap provider generates the workers' join
//     data (playBootstrapProvider waits for it, as CABPK does) and CAPI's Machine controller
//     watches the workload cluster's Nodes for nodeRefs.
//   - status.version at spec.version: the topology reconciler's "control plane provisioned and
//     not upgrading" test (contract IsProvisioning / IsUpgrading), which it needs to create
//     MachineDeployments added later or to roll out a version upgrade.
//   - the replica counters, as KCP reports them for 1 ready replica.
//
// The `<cluster>-kubeconfig` Secret, KCP's too, is written with the Cluster.
func playControlPlaneProvider(ctx context.Context, kcp *unstructured.Unstructured) {
	status := fmt.Sprintf(`{"status":{"version":%q,"initialization":{"controlPlaneInitialized":true},`+
		`"replicas":1,"readyReplicas":1,"availableReplicas":1,"upToDateReplicas":1,"observedGeneration":%d}}`, topoVersion, kcp.GetGeneration())
	Expect(mgmt.Status().Patch(ctx, kcp, client.RawPatch(types.MergePatchType, []byte(status)))).To(Succeed())
}

// playBootstrapProvider does what CABPK does for every KubeadmConfig of the namespace, in the
// part CAPI and CAPOV read, until ctx ends: once the Cluster's control plane is initialized
// (CABPK has no join data before), it writes a bootstrap data Secret (ignition, as the other
// specs' Secret) and reports it in status.dataSecretName and
// status.initialization.dataSecretCreated, from which CAPI's Machine controller sets the
// Machine's spec.bootstrap.dataSecretName. MachineSet creates a KubeadmConfig for each Machine
// of the topology's MachineDeployment from the class's KubeadmConfigTemplate.
func playBootstrapProvider(ctx context.Context, namespace string) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(kubeadmConfigGVK.GroupVersion().WithKind(kubeadmConfigGVK.Kind + "List"))
		if err := mgmt.List(ctx, list, client.InNamespace(namespace)); err == nil {
			for i := range list.Items {
				// A failure is retried on the next tick, as a controller would.
				_ = provideBootstrapData(ctx, &list.Items[i])
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func provideBootstrapData(ctx context.Context, config *unstructured.Unstructured) error {
	if name, _, _ := unstructured.NestedString(config.Object, "status", "dataSecretName"); name != "" || !config.GetDeletionTimestamp().IsZero() {
		return nil
	}
	c := &clusterv1.Cluster{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: config.GetNamespace(), Name: config.GetLabels()[clusterv1.ClusterNameLabel]}, c); err != nil {
		return err
	}
	if !ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false) {
		return nil
	}
	s := harness.BootstrapSecret(c.Namespace, config.GetName(), c.Name, `{"ignition":{"version":"3.2.0"}}`, "ignition")
	if err := mgmt.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	status := fmt.Sprintf(`{"status":{"dataSecretName":%q,"initialization":{"dataSecretCreated":true}}}`, s.Name)
	return mgmt.Status().Patch(ctx, config, client.RawPatch(types.MergePatchType, []byte(status)))
}

// topologyMachineDeployments lists the MachineDeployments the topology reconciler created for
// the spec's machine deployment topology.
func topologyMachineDeployments(ctx context.Context) []clusterv1.MachineDeployment {
	list := &clusterv1.MachineDeploymentList{}
	Expect(mgmt.List(ctx, list, client.InNamespace(topoNS), client.MatchingLabels{
		clusterv1.ClusterNameLabel: topoCluster, clusterv1.ClusterTopologyMachineDeploymentNameLabel: topoMD,
	})).To(Succeed())
	return list.Items
}

// topologyMachines lists the Machines of the topology's Cluster (all workers: no control-plane
// provider creates control-plane Machines here).
func topologyMachines(ctx context.Context) []clusterv1.Machine {
	list := &clusterv1.MachineList{}
	Expect(mgmt.List(ctx, list, client.InNamespace(topoNS), client.MatchingLabels{clusterv1.ClusterNameLabel: topoCluster})).To(Succeed())
	return list.Items
}

// topologyVMs returns the simulator's VMs of the topology's Cluster, by name (InfraMachines,
// hence VMs, are named after their Machines, whose names start with the Cluster's).
func topologyVMs() map[string]string {
	out := map[string]string{}
	for name, id := range vmNames() {
		if strings.HasPrefix(name, topoCluster+"-") {
			out[name] = id
		}
	}
	return out
}

// expectTopologyVMs waits until the topology's Cluster has n worker Machines Running with a
// Node, each with a provisioned OVirtMachine whose VM is up in oVirt with the patched memory.
func expectTopologyVMs(ctx context.Context, n int) {
	Eventually(func(g Gomega) {
		machines := topologyMachines(ctx)
		g.Expect(machines).To(HaveLen(n))
		for _, m := range machines {
			g.Expect(m.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)), "Machine %s", m.Name)
			g.Expect(m.Status.NodeRef.Name).NotTo(BeEmpty(), "Machine %s", m.Name)
			// The guest's kubelet is the version the Machine was built for (CAPI's topology
			// reconciler reads a different one as a MachineDeployment still upgrading).
			g.Expect(m.Status.NodeInfo).NotTo(BeNil(), "Machine %s: CAPI copies the Node's info", m.Name)
			g.Expect(m.Status.NodeInfo.KubeletVersion).To(Equal(topoVersion), "Machine %s", m.Name)
			om := &infrav1.OVirtMachine{}
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: topoNS, Name: m.Spec.InfrastructureRef.Name}, om)).To(Succeed())
			g.Expect(om.Status.Initialization.Provisioned).To(HaveValue(BeTrue()))
			vm, ok := stack.Sim.VM(om.Status.VMID)
			g.Expect(ok).To(BeTrue(), "VM of %s in oVirt", om.Name)
			g.Expect(vm.Status).To(Equal("up"))
			g.Expect(vm.MemoryMB).To(BeEquivalentTo(topoWorkerMemoryMB))
			g.Expect(m.Spec.ProviderID).To(Equal("ovirt://" + vm.ID))
		}
		g.Expect(topologyVMs()).To(HaveLen(n))
	}, wait, poll).Should(Succeed())
}

// topologyState describes the topology's objects for a failure report.
func topologyState(ctx context.Context) string {
	var b strings.Builder
	c := &clusterv1.Cluster{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: topoNS, Name: topoCluster}, c); err == nil {
		fmt.Fprintf(&b, "Cluster %s infrastructureRef=%s controlPlaneRef=%s deleting=%t\n", c.Name, c.Spec.InfrastructureRef.Name, c.Spec.ControlPlaneRef.Name, !c.DeletionTimestamp.IsZero())
		for _, cond := range c.Status.Conditions {
			fmt.Fprintf(&b, "    %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	mds := &clusterv1.MachineDeploymentList{}
	_ = mgmt.List(ctx, mds, client.InNamespace(topoNS))
	for _, md := range mds.Items {
		fmt.Fprintf(&b, "MachineDeployment %s replicas=%d ready=%d\n", md.Name, ptr.Deref(md.Spec.Replicas, 0), ptr.Deref(md.Status.ReadyReplicas, 0))
	}
	machines := &clusterv1.MachineList{}
	_ = mgmt.List(ctx, machines, client.InNamespace(topoNS))
	for _, m := range machines.Items {
		fmt.Fprintf(&b, "Machine %s phase=%s bootstrap=%q nodeRef=%q\n", m.Name, m.Status.Phase, ptr.Deref(m.Spec.Bootstrap.DataSecretName, ""), m.Status.NodeRef.Name)
		for _, cond := range m.Status.Conditions {
			fmt.Fprintf(&b, "    %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	oms := &infrav1.OVirtMachineList{}
	_ = mgmt.List(ctx, oms, client.InNamespace(topoNS))
	for _, om := range oms.Items {
		fmt.Fprintf(&b, "OVirtMachine %s provisioned=%t vmID=%s state=%s\n", om.Name, ptr.Deref(om.Status.Initialization.Provisioned, false), om.Status.VMID, om.Status.VMState)
	}
	for name, id := range topologyVMs() {
		fmt.Fprintf(&b, "VM %s %s\n", id, name)
	}
	return b.String()
}

// expectClassReady waits until CAPI's ClusterClass reconciler has reconciled the class and
// accepted its variables, and returns it.
func expectClassReady(ctx context.Context, namespace, name string) *clusterv1.ClusterClass {
	cc := &clusterv1.ClusterClass{}
	Eventually(func(g Gomega) {
		g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cc)).To(Succeed())
		g.Expect(cc.Status.ObservedGeneration).To(Equal(cc.Generation))
		ready := findCondition(cc.Status.Conditions, clusterv1.ClusterClassVariablesReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
	}, wait, poll).Should(Succeed())
	return cc
}

// expectTopologyReconciled waits until the Cluster's TopologyReconciled condition is True.
func expectTopologyReconciled(ctx context.Context, cluster *clusterv1.Cluster) {
	Eventually(func(g Gomega) {
		c := &clusterv1.Cluster{}
		g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
		rec := findCondition(c.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition)
		g.Expect(rec).NotTo(BeNil())
		g.Expect(rec.Status).To(Equal(metav1.ConditionTrue), rec.Message)
	}, wait, poll).Should(Succeed())
}
