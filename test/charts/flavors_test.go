package charts

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ipamv1 "sigs.k8s.io/cluster-api-ipam-provider-in-cluster/api/v1alpha2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/envtest"
)

// ipamModule is Cluster API's in-cluster IPAM provider: its InClusterIPPool type decodes the
// pool of the static-ip flavor, its CRDs validate it on the API server.
const ipamModule = "sigs.k8s.io/cluster-api-ipam-provider-in-cluster"

// flavorVars sets every variable of every flavor and of the ClusterClass, the optional ones to
// values other than their defaults, so that a variable a template mistypes or forgets to use
// shows up in the output. CLUSTER_NAME and NAMESPACE come from clusterctl's arguments.
var flavorVars = map[string]string{
	"OVIRT_PROVIDER":                         "ovirt-prod",
	"OVIRT_CLUSTER_NAME":                     "Default",
	"OVIRT_TEMPLATE_NAME":                    "ubuntu-22.04",
	"OVIRT_CONTROL_PLANE_ENDPOINT_HOST":      "10.0.1.100",
	"OVIRT_CONTROL_PLANE_ENDPOINT_PORT":      "8443",
	"OVIRT_STORAGE_DOMAIN":                   "fast-ssd",
	"OVIRT_SSH_AUTHORIZED_KEY":               testSSHKey,
	"OVIRT_SSH_USER":                         "ops",
	"OVIRT_VM_TYPE":                          "high_performance",
	"OVIRT_VNIC_PROFILE":                     "prod-net",
	"OVIRT_CONTROL_PLANE_CPU_SOCKETS":        "2",
	"OVIRT_CONTROL_PLANE_CPU_CORES":          "6",
	"OVIRT_CONTROL_PLANE_MEMORY_MB":          "16384",
	"OVIRT_CONTROL_PLANE_DISK_SIZE_GB":       "60",
	"OVIRT_WORKER_CPU_SOCKETS":               "2",
	"OVIRT_WORKER_CPU_CORES":                 "8",
	"OVIRT_WORKER_MEMORY_MB":                 "32768",
	"OVIRT_WORKER_DISK_SIZE_GB":              "120",
	"OVIRT_NODE_STARTUP_TIMEOUT_SECONDS":     "900",
	"OVIRT_UNHEALTHY_NODE_TIMEOUT_SECONDS":   "240",
	"OVIRT_WORKER_MAX_UNHEALTHY":             "2",
	"OVIRT_NODE_IP_ADDRESSES":                "10.0.1.10-10.0.1.50, 10.0.1.60",
	"OVIRT_NODE_IP_PREFIX":                   "23",
	"OVIRT_NODE_GATEWAY":                     "10.0.1.1",
	"OVIRT_NODE_NAMESERVERS":                 "10.0.0.53, 10.0.0.54",
	"OVIRT_CONTROL_PLANE_ENDPOINT_POOL":      "vips",
	"OVIRT_CONTROL_PLANE_ENDPOINT_POOL_KIND": "GlobalInClusterIPPool",
	"OVIRT_CONTROL_PLANE_ANTI_AFFINITY":      "Hard",
	"KUBE_VIP_IMAGE":                         "registry.example.com/kube-vip/kube-vip",
	"KUBE_VIP_VERSION":                       "v0.9.1",
	"KUBE_VIP_INTERFACE":                     "ens3",
	"POD_CIDR":                               "172.20.0.0/16",
	"CNI":                                    "calico",
	"SERVICE_CIDR":                           "10.96.0.0/12",
	// clusterctl finds the class's file by this name (clusterclass-ovirt.yaml).
	"CLUSTER_CLASS_NAME": "ovirt",
	// data-disks and high-performance.
	"OVIRT_ETCD_DISK_SIZE_GB": "40",
	"OVIRT_HUGEPAGES_KIB":     "1048576",
	// gpu and gpu-passthrough (the GPU pool), and the ClusterClass's reboot-worker.
	"OVIRT_GPU_WORKER_MACHINE_COUNT": "4",
	"OVIRT_GPU_MDEV_TYPE":            "nvidia-63",
	"OVIRT_GPU_VENDOR_ID":            "1002",
	"OVIRT_GPU_DEVICE_ID":            "740f",
	"OVIRT_GPU_COUNT":                "2",
	"OVIRT_GPU_RESOURCE_NAME":        "amd.com/gpu",
	"OVIRT_REMEDIATION_RETRY_LIMIT":  "3",
	"OVIRT_REMEDIATION_TIMEOUT":      "10m",
	"OVIRT_WORKER_CLASS":             "reboot-worker",
}

// flavorTemplateNames are the oVirt templates the flavors need: Ignition needs an rhcos_x64 one.
var flavorTemplateNames = map[string]string{"ignition": "flatcar-4152"}

var (
	// The flavor tests get a control plane of their own, with every CRD the rendered objects
	// need (CAPOV's, Cluster API core, kubeadm bootstrap and control plane, in-cluster IPAM),
	// apart from the shared one that the Helm tests install the CAPOV CRDs into.
	flavorEnvOnce sync.Once
	flavorEnv     *envtest.Environment
	flavorEnvErr  error
)

// startFlavorEnv returns the flavor tests' control plane (stopped by TestMain).
func startFlavorEnv(t *testing.T) *envtest.Environment {
	t.Helper()
	flavorEnvOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		var capiDir, ipamDir string
		if capiDir, flavorEnvErr = envtest.ModuleDir(ctx, "sigs.k8s.io/cluster-api"); flavorEnvErr != nil {
			return
		}
		if ipamDir, flavorEnvErr = envtest.ModuleDir(ctx, ipamModule); flavorEnvErr != nil {
			return
		}
		flavorEnv, flavorEnvErr = envtest.Start(ctx, envtest.Options{ExtraCRDPaths: []string{
			filepath.Join(capiDir, "bootstrap", "kubeadm", "config", "crd", "bases"),
			filepath.Join(capiDir, "controlplane", "kubeadm", "config", "crd", "bases"),
			filepath.Join(ipamDir, "config", "crd", "bases"),
		}})
	})
	if flavorEnvErr != nil {
		t.Fatalf("starting envtest for the flavors: %v", flavorEnvErr)
	}
	return flavorEnv
}

// renderFlavor runs the real clusterctl against the local repository, with flavorVars, into
// namespace ns, and returns the objects of its output.
func renderFlavor(t *testing.T, config, version, flavor, ns string) []*unstructured.Unstructured {
	t.Helper()
	return renderFlavorWith(t, config, version, flavor, ns, nil)
}

// renderFlavorWith is renderFlavor with only the variables of flavorVars that only names (all
// when only is nil).
func renderFlavorWith(t *testing.T, config, version, flavor, ns string, only map[string]bool) []*unstructured.Unstructured {
	t.Helper()
	vars := map[string]string{}
	for k, v := range flavorVars {
		if only == nil || only[k] {
			vars[k] = v
		}
	}
	if name, ok := flavorTemplateNames[flavor]; ok && vars["OVIRT_TEMPLATE_NAME"] != "" {
		vars["OVIRT_TEMPLATE_NAME"] = name
	}
	args := []string{"generate", "cluster", "prod-a", "--infrastructure", "ovirt:" + version, "--config", config,
		"--target-namespace", ns, "--kubernetes-version", "v1.34.1", "--control-plane-machine-count", "3", "--worker-machine-count", "2"}
	if flavor != "" {
		args = append(args, "--flavor", flavor)
	}
	out, err := clusterctl(t, vars, args...)
	if err != nil {
		t.Fatalf("clusterctl generate cluster --flavor %q: %v\n%s", flavor, err, out)
	}
	if strings.Contains(out, "${") {
		t.Fatalf("flavor %q: a variable is left in the output:\n%s", flavor, out)
	}
	objs, err := parseYAMLDocs([]byte(out))
	if err != nil {
		t.Fatalf("flavor %q: %v", flavor, err)
	}
	return objs
}

func TestEveryFlavorSetsEveryVariable(t *testing.T) {
	g := NewWithT(t)
	files := []string{}
	for _, f := range clusterTemplates {
		files = append(files, f)
	}
	for _, f := range clusterClasses {
		files = append(files, f)
	}
	for _, f := range files {
		raw := string(mustRead(t, f))
		for v := range variables(raw) {
			if v == "CLUSTER_NAME" || v == "NAMESPACE" || v == "KUBERNETES_VERSION" || v == "CONTROL_PLANE_MACHINE_COUNT" || v == "WORKER_MACHINE_COUNT" {
				continue // clusterctl's arguments
			}
			g.Expect(flavorVars).To(HaveKey(v), "%s uses %s: give it a value in flavorVars (and document it in docs/operations.md)", f, v)
		}
	}
	docs := string(mustRead(t, "docs/operations.md"))
	var undocumented []string
	for v := range flavorVars {
		if !strings.Contains(docs, "`"+v+"`") {
			undocumented = append(undocumented, v)
		}
	}
	g.Expect(undocumented).To(BeEmpty(), "docs/operations.md documents every template variable as `NAME`")
}

func mustRead(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := readRepoFile(rel)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// flavorObjects indexes the typed objects of a rendered flavor.
type flavorObjects struct {
	all        []*unstructured.Unstructured
	kinds      map[string]int
	cluster    *clusterv1.Cluster
	class      *clusterv1.ClusterClass
	ovc        *infrav1.OVirtCluster
	kcp        *controlplanev1.KubeadmControlPlane
	md         *clusterv1.MachineDeployment // <name>-md-0
	mds        map[string]*clusterv1.MachineDeployment
	kct        *bootstrapv1.KubeadmConfigTemplate // md-0's
	mhcs       []*clusterv1.MachineHealthCheck
	rts        map[string]*infrav1.OVirtRemediationTemplate
	templates  map[string]*infrav1.OVirtMachineTemplate
	pools      map[string]*ipamv1.InClusterIPPool
	kcpts      map[string]*controlplanev1.KubeadmControlPlaneTemplate
	kcts       map[string]*bootstrapv1.KubeadmConfigTemplate
	ovcts      map[string]*infrav1.OVirtClusterTemplate
	namespaces map[string]bool
}

func indexFlavor(t *testing.T, flavor string, objs []*unstructured.Unstructured) *flavorObjects {
	t.Helper()
	f := &flavorObjects{all: objs, kinds: map[string]int{}, templates: map[string]*infrav1.OVirtMachineTemplate{},
		pools: map[string]*ipamv1.InClusterIPPool{}, kcpts: map[string]*controlplanev1.KubeadmControlPlaneTemplate{},
		kcts: map[string]*bootstrapv1.KubeadmConfigTemplate{}, ovcts: map[string]*infrav1.OVirtClusterTemplate{}, namespaces: map[string]bool{},
		mds: map[string]*clusterv1.MachineDeployment{}, rts: map[string]*infrav1.OVirtRemediationTemplate{}}
	for _, u := range objs {
		f.kinds[u.GetKind()]++
		f.namespaces[u.GetNamespace()] = true
		switch o := typedObject(t, "flavor "+flavor, u).(type) {
		case *clusterv1.Cluster:
			f.cluster = o
		case *clusterv1.ClusterClass:
			f.class = o
		case *infrav1.OVirtCluster:
			f.ovc = o
		case *controlplanev1.KubeadmControlPlane:
			f.kcp = o
		case *clusterv1.MachineDeployment:
			f.mds[o.Name] = o
			if f.md == nil || strings.HasSuffix(o.Name, "-md-0") {
				f.md = o
			}
		case *bootstrapv1.KubeadmConfigTemplate:
			f.kcts[o.Name] = o
		case *infrav1.OVirtRemediationTemplate:
			f.rts[o.Name] = o
		case *clusterv1.MachineHealthCheck:
			f.mhcs = append(f.mhcs, o)
		case *infrav1.OVirtMachineTemplate:
			f.templates[o.Name] = o
		case *ipamv1.InClusterIPPool:
			f.pools[o.Name] = o
		case *controlplanev1.KubeadmControlPlaneTemplate:
			f.kcpts[o.Name] = o
		case *infrav1.OVirtClusterTemplate:
			f.ovcts[o.Name] = o
		}
	}
	if f.md != nil {
		f.kct = f.kcts[f.md.Spec.Template.Spec.Bootstrap.ConfigRef.Name]
	} else if len(f.kcts) == 1 {
		for _, kct := range f.kcts {
			f.kct = kct
		}
	}
	return f
}

// TestEveryFlavorIsAcceptedByTheAPIServer renders every flavor with the real clusterctl and
// every variable set, decodes each object strictly into its Go type, checks what users of the
// flavor rely on, and creates the objects on a real API server that validates them against the
// CRDs (OpenAPI schemas and CEL rules, unknown fields refused): Cluster API's core, kubeadm
// bootstrap (CABPK) and control plane (KCP), the in-cluster IPAM provider's and CAPOV's
// (startFlavorEnv). Each flavor is also checked against docs/operations.md: every variable
// clusterctl lists for it is documented for it, exactly the documented "required" ones are
// required, and rendered with only those (every other at its default) its objects pass a
// server-side dry-run. No webhook runs: CAPOV's admission rules are unit-tested in pkg/webhooks.
func TestEveryFlavorIsAcceptedByTheAPIServer(t *testing.T) {
	config, version := clusterctlRepo(t)
	e := startFlavorEnv(t)
	w := &warnings{}
	cfg := rest.CopyConfig(e.Config)
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	for flavor := range clusterTemplates {
		t.Run("flavor "+flavor, func(t *testing.T) {
			g := NewWithT(t)
			ns := "flavor-" + flavor
			if flavor == "" {
				ns = "flavor-default"
			}
			objs := renderFlavor(t, config, version, flavor, ns)
			f := indexFlavor(t, flavor, objs)
			g.Expect(f.namespaces).To(Equal(map[string]bool{ns: true}), "every object goes into the target namespace")

			if flavor == "topology" {
				expectTopology(t, f)
			} else {
				expectClassicFlavor(t, flavor, f)
			}

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
			w.take()
			for _, o := range objs {
				err := c.Create(ctx, o.DeepCopy(), client.FieldValidation("Strict"))
				g.Expect(err).NotTo(HaveOccurred(), "%s %s rejected by the API server", o.GetKind(), o.GetName())
			}
			g.Expect(w.take()).To(BeEmpty())
		})

		// What docs/operations.md documents for the flavor is what it uses, and its required
		// variables alone (every other one at its default) render objects the API server accepts.
		t.Run("flavor "+flavor+" with only its documented required variables", func(t *testing.T) {
			g := NewWithT(t)
			doc := documentedFlavorVariables(t, flavor)
			out, err := listVariables(t, config, version, flavor)
			g.Expect(err).NotTo(HaveOccurred(), out)
			required, all := listedVariables(out)
			g.Expect(all).To(HaveEach(BeKeyOf(doc.all)), "every variable the flavor uses is documented for it in docs/operations.md: %v", sortedKeys(doc.all))
			g.Expect(required).To(Equal(sortedKeys(doc.required)), "docs/operations.md marks exactly the flavor's required variables \"required\"")

			ns := "flavor-docs-default"
			if flavor != "" {
				ns = "flavor-docs-" + flavor
			}
			objs := renderFlavorWith(t, config, version, flavor, ns, doc.required)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
			w.take()
			for _, o := range objs {
				err := c.Create(ctx, o.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict"))
				g.Expect(err).NotTo(HaveOccurred(), "%s %s, rendered with the defaults, rejected by the API server (dry-run)", o.GetKind(), o.GetName())
			}
			g.Expect(w.take()).To(BeEmpty())
		})
	}

	t.Run("the control: the API server holds the GPU and remediation rules", func(t *testing.T) {
		g := NewWithT(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		objs := renderFlavor(t, config, version, "gpu", "flavor-gpu-control")
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flavor-gpu-control"}})).To(Succeed())
		var checked int
		for _, o := range objs {
			o = o.DeepCopy()
			switch {
			case o.GetKind() == "OVirtMachineTemplate" && o.GetName() == "prod-a-md-gpu":
				gpus, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "gpus")
				gpus[0].(map[string]any)["vendorID"] = "10de"
				g.Expect(unstructured.SetNestedSlice(o.Object, gpus, "spec", "template", "spec", "gpus")).To(Succeed())
				g.Expect(c.Create(ctx, o)).To(MatchError(ContainSubstring("a VGPU needs mdevType and takes neither vendorID nor deviceID")))
				checked++
			case o.GetKind() == "OVirtRemediationTemplate":
				g.Expect(unstructured.SetNestedField(o.Object, "2h", "spec", "template", "spec", "strategy", "timeout")).To(Succeed())
				g.Expect(c.Create(ctx, o)).To(MatchError(ContainSubstring("timeout must be between 10s and 1h")))
				checked++
			}
		}
		g.Expect(checked).To(Equal(2))
	})

	t.Run("the control: the API server validates the CRDs' schemas", func(t *testing.T) {
		g := NewWithT(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		objs := renderFlavor(t, config, version, "static-ip", "flavor-control")
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flavor-control"}})).To(Succeed())
		for _, o := range objs {
			o = o.DeepCopy()
			switch o.GetKind() {
			case "OVirtMachineTemplate":
				g.Expect(unstructured.SetNestedField(o.Object, int64(0), "spec", "template", "spec", "cpu", "sockets")).To(Succeed())
				g.Expect(c.Create(ctx, o)).To(MatchError(ContainSubstring("spec.template.spec.cpu.sockets")))
			case "InClusterIPPool":
				g.Expect(unstructured.SetNestedField(o.Object, int64(200), "spec", "prefix")).To(Succeed())
				g.Expect(c.Create(ctx, o)).To(MatchError(ContainSubstring("spec.prefix")))
			case "MachineHealthCheck":
				g.Expect(unstructured.SetNestedField(o.Object, "soon", "spec", "checks", "nodeStartupTimeoutSeconds")).To(Succeed())
				g.Expect(c.Create(ctx, o)).To(MatchError(ContainSubstring("nodeStartupTimeoutSeconds")))
			}
		}
	})
}

// expectClassicFlavor checks a flavor that renders the cluster's objects itself.
func expectClassicFlavor(t *testing.T, flavor string, f *flavorObjects) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(f.cluster).NotTo(BeNil())
	g.Expect(f.ovc).NotTo(BeNil())
	g.Expect(f.kcp).NotTo(BeNil())
	g.Expect(f.md).NotTo(BeNil())
	g.Expect(f.kct).NotTo(BeNil())
	if slices.Contains(gpuFlavors, flavor) {
		g.Expect(f.templates).To(HaveLen(3), "control plane, md-0 and the GPU pool")
		g.Expect(f.mds).To(HaveLen(2))
	} else {
		g.Expect(f.templates).To(HaveLen(2))
		g.Expect(f.mds).To(HaveLen(1))
		g.Expect(f.rts).To(BeEmpty(), "the flavor's MachineHealthChecks leave remediation to the owners")
	}
	g.Expect(f.cluster.Spec.ClusterNetwork.Pods.CIDRBlocks).To(Equal([]string{"172.20.0.0/16"}))

	// Every value of flavorVars reaches the objects.
	for name, tpl := range f.templates {
		s := tpl.Spec.Template.Spec
		g.Expect(s.Provider).To(Equal("ovirt-prod"), name)
		g.Expect(s.OVirtCluster).To(Equal("Default"), name)
		if want, ok := flavorTemplateNames[flavor]; ok {
			g.Expect(s.Template).To(Equal(want), name)
		} else {
			g.Expect(s.Template).To(Equal("ubuntu-22.04"), name)
		}
		g.Expect(s.VMType).To(Equal(infrav1.VMTypeHighPerformance), name)
		g.Expect(s.NICs).To(HaveLen(1), name)
		g.Expect(s.NICs[0].VnicProfile).To(Equal("prod-net"), name)
	}
	cp := f.templates[f.kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name]
	g.Expect(cp).NotTo(BeNil())
	g.Expect(*cp.Spec.Template.Spec.CPU).To(Equal(infrav1.CPU{Sockets: 2, Cores: 6, Threads: 1}))
	g.Expect(cp.Spec.Template.Spec.Memory.SizeMB).To(BeEquivalentTo(16384))
	g.Expect(cp.Spec.Template.Spec.OSDiskSizeGB).To(BeEquivalentTo(60))
	worker := f.templates[f.md.Spec.Template.Spec.InfrastructureRef.Name]
	g.Expect(worker).NotTo(BeNil())
	g.Expect(*worker.Spec.Template.Spec.CPU).To(Equal(infrav1.CPU{Sockets: 2, Cores: 8, Threads: 1}))
	g.Expect(worker.Spec.Template.Spec.Memory.SizeMB).To(BeEquivalentTo(32768))
	g.Expect(worker.Spec.Template.Spec.OSDiskSizeGB).To(BeEquivalentTo(120))
	g.Expect(f.ovc.Spec.ControlPlaneEndpoint.Port).To(BeEquivalentTo(8443))

	// The ssh login on every node.
	wantUser := bootstrapv1.User{Name: "ops", Sudo: "ALL=(ALL) NOPASSWD:ALL", SSHAuthorizedKeys: []string{testSSHKey}}
	g.Expect(f.kcp.Spec.KubeadmConfigSpec.Users).To(Equal([]bootstrapv1.User{wantUser}), "control-plane users")
	g.Expect(f.kct.Spec.Template.Spec.Users).To(Equal([]bootstrapv1.User{wantUser}), "worker users")

	// MachineHealthChecks for the control plane and for the workers.
	expectMachineHealthChecks(g, f)

	switch flavor {
	case "storage-domain":
		for name, tpl := range f.templates {
			g.Expect(tpl.Spec.Template.Spec.StorageDomainName).To(Equal("fast-ssd"), name)
			g.Expect(tpl.Spec.Template.Spec.DiskClone).To(HaveValue(BeTrue()), name)
		}
	case "static-ip":
		pool := f.pools["prod-a-nodes"]
		g.Expect(pool).NotTo(BeNil(), "the static-ip flavor defines the pool its NICs claim from")
		g.Expect(pool.Spec.Addresses).To(Equal([]string{"10.0.1.10-10.0.1.50", "10.0.1.60"}))
		g.Expect(pool.Spec.Prefix).To(Equal(23))
		g.Expect(pool.Spec.Gateway).To(Equal("10.0.1.1"))
		for name, tpl := range f.templates {
			for i, nic := range tpl.Spec.Template.Spec.NICs {
				g.Expect(nic.AddressesFromPools).To(Equal([]infrav1.IPPoolReference{{
					APIGroup: ipamv1.GroupVersion.Group, Kind: "InClusterIPPool", Name: pool.Name,
				}}), "%s nics[%d]", name, i)
				g.Expect(nic.Nameservers).To(Equal([]string{"10.0.0.53", "10.0.0.54"}), "%s nics[%d]", name, i)
			}
		}
	case "data-disks":
		cp := f.templates[f.kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name]
		g.Expect(cp.Spec.Template.Spec.DataDisks).To(Equal([]infrav1.DataDisk{{Name: "etcd", SizeGB: 40, Preallocated: true}}))
		g.Expect(f.kcp.Spec.KubeadmConfigSpec.DiskSetup.Filesystems).To(ConsistOf(HaveField("Device", "/dev/sdb")))
		g.Expect(f.kcp.Spec.KubeadmConfigSpec.Mounts).To(ConsistOf(ConsistOf("LABEL=etcd_disk", "/var/lib/etcd")))
		g.Expect(f.templates[f.md.Spec.Template.Spec.InfrastructureRef.Name].Spec.Template.Spec.DataDisks).To(BeEmpty(), "workers keep no etcd")
	case "high-performance":
		for name, tpl := range f.templates {
			s := tpl.Spec.Template.Spec
			g.Expect(s.VMType).To(Equal(infrav1.VMTypeHighPerformance), name)
			g.Expect(s.Performance).To(Equal(&infrav1.Performance{CPUMode: infrav1.CPUModeHostPassthrough, HugePagesKiB: infrav1.HugePages1Gi,
				IOThreads: 1, MultiQueues: ptr.To(true), Ballooning: ptr.To(false)}), name)
		}
	case "gpu", "gpu-passthrough":
		expectGPUPool(t, flavor, f)
	case "kube-vip", "kube-vip-pool":
		expectKubeVIP(t, flavor, f)
	case "ignition":
		g.Expect(f.kcp.Spec.KubeadmConfigSpec.Format).To(Equal(bootstrapv1.Ignition))
		g.Expect(f.kct.Spec.Template.Spec.Format).To(Equal(bootstrapv1.Ignition))
		raw, err := yaml.Marshal(f.kcp.Spec.KubeadmConfigSpec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(raw)).NotTo(ContainSubstring("local_hostname"), "cloud-init's Jinja does not exist in Ignition")
	default:
		g.Expect(f.kcp.Spec.KubeadmConfigSpec.Format).To(Equal(bootstrapv1.CloudConfig))
	}
	if flavor != "static-ip" {
		g.Expect(f.pools).To(BeEmpty())
		for name, tpl := range f.templates {
			g.Expect(tpl.Spec.Template.Spec.NICs[0].AddressesFromPools).To(BeEmpty(), "%s takes its address from DHCP", name)
		}
	}
}

// expectMachineHealthChecks checks that one MachineHealthCheck selects the control-plane
// machines and one the MachineDeployment's, with the timeouts of flavorVars.
func expectMachineHealthChecks(g Gomega, f *flavorObjects) {
	var controlPlane, workers int
	for _, mhc := range f.mhcs {
		g.Expect(mhc.Spec.ClusterName).To(Equal(f.cluster.Name), mhc.Name)
		g.Expect(mhc.Spec.Checks.NodeStartupTimeoutSeconds).To(HaveValue(BeEquivalentTo(900)), mhc.Name)
		g.Expect(mhc.Spec.Checks.UnhealthyNodeConditions).To(ConsistOf(
			clusterv1.UnhealthyNodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: ptr.To[int32](240)},
			clusterv1.UnhealthyNodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](240)},
		), mhc.Name)
		sel, err := metav1.LabelSelectorAsSelector(&mhc.Spec.Selector)
		g.Expect(err).NotTo(HaveOccurred())
		if sel.Matches(labels.Set{clusterv1.MachineControlPlaneLabel: "", clusterv1.ClusterNameLabel: f.cluster.Name}) {
			controlPlane++
		}
		if sel.Matches(labels.Set(f.md.Spec.Template.Labels)) {
			workers++
			// OVIRT_WORKER_MAX_UNHEALTHY: 40 % of one worker rounds down to none.
			g.Expect(mhc.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo).To(HaveValue(Equal(intstr.FromInt32(2))), mhc.Name)
		}
	}
	g.Expect(controlPlane).To(Equal(1), "one MachineHealthCheck selects the control-plane machines")
	g.Expect(workers).To(Equal(1), "one MachineHealthCheck selects the workers of %s", f.md.Name)
}

// expectGPUPool checks the GPU pool of the gpu flavors: its MachineDeployment, the GPUs of its
// OVirtMachineTemplate, the autoscaler's GPU label on its nodes, and its MachineHealthCheck,
// which reboots through the pool's OVirtRemediationTemplate (the values of flavorVars) while the
// control plane's and md-0's leave remediation to KubeadmControlPlane and the MachineSet.
func expectGPUPool(t *testing.T, flavor string, f *flavorObjects) {
	t.Helper()
	g := NewWithT(t)
	md := f.mds["prod-a-md-gpu"]
	g.Expect(md).NotTo(BeNil(), "the GPU MachineDeployment")
	g.Expect(md.Spec.ClusterName).To(Equal(f.cluster.Name))
	g.Expect(md.Spec.Replicas).To(HaveValue(BeEquivalentTo(4)), "OVIRT_GPU_WORKER_MACHINE_COUNT")
	g.Expect(md.Spec.Template.Labels).To(HaveKeyWithValue(clusterv1.MachineDeploymentNameLabel, md.Name))

	wantGPU := infrav1.GPU{Type: infrav1.GPUTypeVGPU, MdevType: "nvidia-63", Count: 2, ResourceName: "amd.com/gpu"}
	accelerator := "cluster-api/accelerator=nvidia-63"
	if flavor == "gpu-passthrough" {
		wantGPU = infrav1.GPU{Type: infrav1.GPUTypePassthrough, VendorID: "1002", DeviceID: "740f", Count: 2, ResourceName: "amd.com/gpu"}
		accelerator = "cluster-api/accelerator=1002-740f"
	}
	tpl := f.templates[md.Spec.Template.Spec.InfrastructureRef.Name]
	g.Expect(tpl).NotTo(BeNil())
	g.Expect(tpl.Spec.Template.Spec.GPUs).To(Equal([]infrav1.GPU{wantGPU}))
	worker := f.templates[f.md.Spec.Template.Spec.InfrastructureRef.Name]
	g.Expect(worker.Spec.Template.Spec.GPUs).To(BeEmpty(), "md-0 has no GPU")
	g.Expect(f.templates[f.kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name].Spec.Template.Spec.GPUs).To(BeEmpty())
	want := worker.Spec.Template.Spec.DeepCopy()
	want.GPUs = []infrav1.GPU{wantGPU}
	g.Expect(tpl.Spec.Template.Spec).To(Equal(*want), "the GPU workers are md-0's workers plus the GPUs")

	// The cluster autoscaler's GPU label: on the Nodes through the kubelet, on the nodes of a
	// scale from zero through the annotation.
	kct := f.kcts[md.Spec.Template.Spec.Bootstrap.ConfigRef.Name]
	g.Expect(kct).NotTo(BeNil())
	g.Expect(kct.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs).To(Equal([]bootstrapv1.Arg{
		{Name: "node-labels", Value: ptr.To(accelerator)}}))
	g.Expect(md.Annotations).To(HaveKeyWithValue("capacity.cluster-autoscaler.kubernetes.io/labels", accelerator))
	g.Expect(kct.Spec.Template.Spec.Users).To(Equal(f.kct.Spec.Template.Spec.Users), "the GPU nodes have the ssh user too")

	// Remediation: the GPU pool's MachineHealthCheck reboots first, the others never.
	var gpuMHC *clusterv1.MachineHealthCheck
	for _, mhc := range f.mhcs {
		sel, err := metav1.LabelSelectorAsSelector(&mhc.Spec.Selector)
		g.Expect(err).NotTo(HaveOccurred())
		if sel.Matches(labels.Set(md.Spec.Template.Labels)) {
			g.Expect(gpuMHC).To(BeNil(), "one MachineHealthCheck selects the GPU workers")
			gpuMHC = mhc
			continue
		}
		g.Expect(mhc.Spec.Remediation.TemplateRef.IsDefined()).To(BeFalse(), "%s: the control plane and md-0 keep their owners' remediation", mhc.Name)
	}
	g.Expect(gpuMHC).NotTo(BeNil())
	g.Expect(gpuMHC.Spec.Checks.UnhealthyNodeConditions).NotTo(BeEmpty())
	ref := gpuMHC.Spec.Remediation.TemplateRef
	g.Expect(ref).To(Equal(clusterv1.MachineHealthCheckRemediationTemplateReference{
		APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtRemediationTemplate", Name: "prod-a-md-gpu"}))
	g.Expect(f.rts).To(HaveLen(1))
	rt := f.rts[ref.Name]
	g.Expect(rt).NotTo(BeNil(), "the MachineHealthCheck's remediation template is in the output")
	g.Expect(rt.Spec.Template.Spec.Strategy).To(Equal(&infrav1.RemediationStrategy{Type: infrav1.RemediationStrategyReboot,
		RetryLimit: ptr.To[int32](3), Timeout: &metav1.Duration{Duration: 10 * time.Minute}}), "OVIRT_REMEDIATION_RETRY_LIMIT, OVIRT_REMEDIATION_TIMEOUT")
}

// expectKubeVIP checks the kube-vip static pod of the KubeadmControlPlane.
func expectKubeVIP(t *testing.T, flavor string, f *flavorObjects) {
	t.Helper()
	g := NewWithT(t)
	spec := f.kcp.Spec.KubeadmConfigSpec
	var manifest *bootstrapv1.File
	for i := range spec.Files {
		if spec.Files[i].Path == "/etc/kubernetes/manifests/kube-vip.yaml" {
			manifest = &spec.Files[i]
		}
	}
	g.Expect(manifest).NotTo(BeNil(), "KubeadmControlPlane writes the kube-vip static pod")
	pod := &corev1.Pod{}
	g.Expect(yaml.UnmarshalStrict([]byte(manifest.Content), pod)).To(Succeed())
	g.Expect(pod.Namespace).To(Equal("kube-system"))
	g.Expect(pod.Spec.HostNetwork).To(BeTrue())
	g.Expect(pod.Spec.Containers).To(HaveLen(1))
	kv := pod.Spec.Containers[0]
	g.Expect(kv.Image).To(Equal("registry.example.com/kube-vip/kube-vip:v0.9.1"))
	env := map[string]string{}
	for _, e := range kv.Env {
		env[e.Name] = e.Value
	}
	g.Expect(env).To(HaveKeyWithValue("vip_arp", "true"), "ARP mode")
	g.Expect(env).To(HaveKeyWithValue("cp_enable", "true"))
	g.Expect(env).To(HaveKeyWithValue("port", "8443"))
	g.Expect(env).To(HaveKeyWithValue("vip_interface", "ens3"))
	g.Expect(kv.SecurityContext.Capabilities.Add).To(ContainElements(corev1.Capability("NET_ADMIN"), corev1.Capability("NET_RAW")))
	g.Expect(pod.Spec.Volumes).To(HaveLen(1))
	g.Expect(pod.Spec.Volumes[0].HostPath.Path).To(Equal("/etc/kubernetes/admin.conf"))

	// kubeadm >= 1.29: super-admin.conf on the first control-plane machine, admin.conf after.
	g.Expect(spec.PreKubeadmCommands).To(ContainElement(And(
		ContainSubstring("/run/kubeadm/kubeadm.yaml"), ContainSubstring("path: /etc/kubernetes/super-admin.conf#'"))))
	g.Expect(spec.PostKubeadmCommands).To(ContainElement(And(
		ContainSubstring("/run/kubeadm/kubeadm.yaml"), ContainSubstring("path: /etc/kubernetes/admin.conf#'"))))

	if flavor == "kube-vip" {
		g.Expect(env).To(HaveKeyWithValue("address", "10.0.1.100"), "the VIP is the control-plane endpoint")
		g.Expect(f.ovc.Spec.ControlPlaneEndpoint.Host).To(Equal("10.0.1.100"))
		g.Expect(f.ovc.Spec.ControlPlaneEndpointFromPool).To(BeNil())
		return
	}
	// kube-vip-pool: the VIP is the endpoint host in the kubeadm configuration (the address
	// CAPOV claimed from the pool); a script reads it into the manifest before kubeadm runs.
	g.Expect(f.ovc.Spec.ControlPlaneEndpoint.Host).To(BeEmpty())
	g.Expect(f.ovc.Spec.ControlPlaneEndpointFromPool).To(HaveValue(Equal(infrav1.IPPoolReference{
		APIGroup: "ipam.cluster.x-k8s.io", Kind: "GlobalInClusterIPPool", Name: "vips"})))
	placeholder := env["address"]
	g.Expect(placeholder).To(Equal("KUBE_VIP_ADDRESS_FROM_ENDPOINT"))
	var script *bootstrapv1.File
	for i := range spec.Files {
		if spec.Files[i].Path == "/etc/kubernetes/capov-kube-vip-address.sh" {
			script = &spec.Files[i]
		}
	}
	g.Expect(script).NotTo(BeNil(), "the script that reads the VIP from the kubeadm configuration")
	g.Expect(script.Content).To(And(ContainSubstring(placeholder), ContainSubstring("/run/kubeadm/kubeadm*.yaml"),
		ContainSubstring("controlPlaneEndpoint"), ContainSubstring("apiServerEndpoint")))
	g.Expect(script.Content).NotTo(ContainSubstring("$"), "clusterctl would substitute it")
	for _, file := range spec.Files {
		g.Expect(file.ContentFrom.Secret.Name).To(BeEmpty(), "no Secret is needed: CAPOV writes none")
	}
	g.Expect(spec.PreKubeadmCommands[0]).To(ContainSubstring(script.Path), "the first command fills in the VIP")
	g.Expect(vipFromKubeadmConfig(t, script.Content, "10.30.9.100")).To(Equal("10.30.9.100"))
}

// vipFromKubeadmConfig runs the flavor's script (with /run/kubeadm and the manifest moved to a
// temporary directory) on the kubeadm configuration the bootstrap provider writes for a join,
// and returns the address it put into the kube-vip manifest.
func vipFromKubeadmConfig(t *testing.T, script, endpoint string) string {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(dir, "run", "kubeadm"), 0o755)).To(Succeed())
	join := "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: " + endpoint + ":6443\n    token: abc.def\n"
	g.Expect(os.WriteFile(filepath.Join(dir, "run", "kubeadm", "kubeadm-join-config.yaml"), []byte(join), 0o600)).To(Succeed())
	manifest := filepath.Join(dir, "kube-vip.yaml")
	g.Expect(os.WriteFile(manifest, []byte("value: \"KUBE_VIP_ADDRESS_FROM_ENDPOINT\"\n"), 0o600)).To(Succeed())
	local := strings.NewReplacer("/run/kubeadm", filepath.Join(dir, "run", "kubeadm"), "/etc/kubernetes/manifests/kube-vip.yaml", manifest).Replace(script)
	out, err := exec.Command("/bin/sh", "-c", local).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	b, err := os.ReadFile(manifest)
	g.Expect(err).NotTo(HaveOccurred())
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(b)), `value: "`), `"`)
}

// expectTopology checks the topology flavor: the Cluster names the class clusterctl added, sets
// every required variable and only variables the class declares, and the class's templates
// are in the output.
func expectTopology(t *testing.T, f *flavorObjects) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(f.cluster).NotTo(BeNil())
	g.Expect(f.class).NotTo(BeNil(), "clusterctl adds clusterclass-ovirt.yaml from the repository")
	g.Expect(f.ovc).To(BeNil(), "the topology controller creates the OVirtCluster")
	g.Expect(f.kcp).To(BeNil())
	g.Expect(f.md).To(BeNil())
	topo := f.cluster.Spec.Topology
	g.Expect(topo.ClassRef.Name).To(Equal(f.class.Name))
	g.Expect(topo.Version).To(Equal("v1.34.1"))
	g.Expect(topo.ControlPlane.Replicas).To(HaveValue(BeEquivalentTo(3)))
	g.Expect(topo.Workers.MachineDeployments).To(HaveLen(1))
	g.Expect(topo.Workers.MachineDeployments[0].Class).To(Equal("reboot-worker"), "OVIRT_WORKER_CLASS")
	g.Expect(topo.Workers.MachineDeployments[0].Replicas).To(HaveValue(BeEquivalentTo(2)))

	values := map[string]any{}
	for _, v := range topo.Variables {
		var value any
		g.Expect(yaml.Unmarshal(v.Value.Raw, &value)).To(Succeed(), v.Name)
		values[v.Name] = value
	}
	declared := map[string]clusterv1.ClusterClassVariable{}
	for _, v := range f.class.Spec.Variables {
		declared[v.Name] = v
		if v.Required != nil && *v.Required {
			g.Expect(values).To(HaveKey(v.Name), "the Cluster sets the required class variable %s", v.Name)
		}
	}
	for name := range values {
		g.Expect(declared).To(HaveKey(name), "the class declares the variable %s", name)
	}
	g.Expect(values).To(HaveKeyWithValue("sshAuthorizedKeys", []any{testSSHKey}))
	g.Expect(values).To(HaveKeyWithValue("controlPlaneEndpoint", map[string]any{"host": "10.0.1.100", "port": float64(8443)}))
	g.Expect(values).To(HaveKeyWithValue("controlPlaneAntiAffinity", "Hard"))
	g.Expect(values).To(HaveKeyWithValue("workerMachine", map[string]any{
		"cpuSockets": float64(2), "cpuCores": float64(8), "memoryMB": float64(32768), "osDiskSizeGB": float64(120)}))

	expectClusterClass(t, f, declared)
}

// expectClusterClass checks the class: its templates are in the output with the kinds it
// names, it has health checks for the control plane and the worker class, and its patches use
// declared variables only, on paths that exist in the templates' Go types.
func expectClusterClass(t *testing.T, f *flavorObjects, declared map[string]clusterv1.ClusterClassVariable) {
	t.Helper()
	g := NewWithT(t)
	cc := f.class.Spec
	g.Expect(f.ovcts).To(HaveKey(cc.Infrastructure.TemplateRef.Name))
	g.Expect(cc.Infrastructure.TemplateRef.Kind).To(Equal("OVirtClusterTemplate"))
	g.Expect(cc.Infrastructure.TemplateRef.APIVersion).To(Equal(infrav1.GroupVersion.String()))
	g.Expect(f.kcpts).To(HaveKey(cc.ControlPlane.TemplateRef.Name))
	g.Expect(cc.ControlPlane.TemplateRef.Kind).To(Equal("KubeadmControlPlaneTemplate"))
	g.Expect(f.templates).To(HaveKey(cc.ControlPlane.MachineInfrastructure.TemplateRef.Name))
	g.Expect(cc.ControlPlane.MachineInfrastructure.TemplateRef.Kind).To(Equal("OVirtMachineTemplate"))
	g.Expect(cc.Workers.MachineDeployments).To(HaveLen(2))
	mdc := cc.Workers.MachineDeployments[0]
	g.Expect(mdc.Class).To(Equal("default-worker"))
	g.Expect(f.kcts).To(HaveKey(mdc.Bootstrap.TemplateRef.Name))
	g.Expect(mdc.Bootstrap.TemplateRef.Kind).To(Equal("KubeadmConfigTemplate"))
	g.Expect(f.templates).To(HaveKey(mdc.Infrastructure.TemplateRef.Name))
	g.Expect(mdc.Infrastructure.TemplateRef.Kind).To(Equal("OVirtMachineTemplate"))

	// MachineHealthChecks of the class, for the control plane and for default-worker.
	g.Expect(cc.ControlPlane.HealthCheck.Checks.UnhealthyNodeConditions).NotTo(BeEmpty())
	g.Expect(cc.ControlPlane.HealthCheck.Checks.NodeStartupTimeoutSeconds).NotTo(BeNil())
	g.Expect(cc.ControlPlane.HealthCheck.Remediation.TemplateRef.IsDefined()).To(BeFalse(), "KubeadmControlPlane remediates the control plane")
	g.Expect(mdc.HealthCheck.Checks.UnhealthyNodeConditions).NotTo(BeEmpty())
	g.Expect(mdc.HealthCheck.Checks.NodeStartupTimeoutSeconds).NotTo(BeNil())
	g.Expect(mdc.HealthCheck.Remediation.TemplateRef.IsDefined()).To(BeFalse(), "default-worker: the MachineSet replaces")

	// reboot-worker: default-worker whose MachineHealthCheck reboots first, through the class's
	// OVirtRemediationTemplate (the values of flavorVars).
	reboot := cc.Workers.MachineDeployments[1]
	g.Expect(reboot.Class).To(Equal("reboot-worker"))
	ref := reboot.HealthCheck.Remediation.TemplateRef
	g.Expect(ref.APIVersion).To(Equal(infrav1.GroupVersion.String()))
	g.Expect(ref.Kind).To(Equal("OVirtRemediationTemplate"))
	g.Expect(f.rts).To(HaveKey(ref.Name), "the class's remediation template is in the output")
	g.Expect(f.rts[ref.Name].Spec.Template.Spec.Strategy).To(Equal(&infrav1.RemediationStrategy{Type: infrav1.RemediationStrategyReboot,
		RetryLimit: ptr.To[int32](3), Timeout: &metav1.Duration{Duration: 10 * time.Minute}}))
	same := reboot.DeepCopy()
	same.Class = mdc.Class
	same.HealthCheck.Remediation.TemplateRef = clusterv1.MachineHealthCheckRemediationTemplateReference{}
	g.Expect(*same).To(Equal(mdc), "reboot-worker differs from default-worker only in its remediation template")
	for _, p := range cc.Patches {
		for _, d := range p.Definitions {
			if names := d.Selector.MatchResources.MachineDeploymentClass; names != nil && len(names.Names) > 0 {
				g.Expect(names.Names).To(ConsistOf("default-worker", "reboot-worker"), "patch %s patches both worker classes", p.Name)
			}
		}
	}

	for _, want := range []string{"provider", "ovirtCluster", "template", "controlPlaneEndpoint", "vnicProfile", "ipPool",
		"failureDomains", "controlPlaneAntiAffinity", "sshAuthorizedKeys", "controlPlaneMachine", "workerMachine"} {
		g.Expect(declared).To(HaveKey(want), "the class declares %s", want)
	}

	targets := map[string]runtime.Object{
		"OVirtClusterTemplate":        &infrav1.OVirtClusterTemplate{},
		"OVirtMachineTemplate":        &infrav1.OVirtMachineTemplate{},
		"KubeadmControlPlaneTemplate": &controlplanev1.KubeadmControlPlaneTemplate{},
		"KubeadmConfigTemplate":       &bootstrapv1.KubeadmConfigTemplate{},
	}
	for _, p := range cc.Patches {
		for _, d := range p.Definitions {
			_, ok := targets[d.Selector.Kind]
			g.Expect(ok).To(BeTrue(), "patch %s selects %s", p.Name, d.Selector.Kind)
			for _, jp := range d.JSONPatches {
				g.Expect(jp.Op).To(BeElementOf("add", "replace"), "patch %s %s", p.Name, jp.Path)
				g.Expect(jp.Path).To(HavePrefix("/spec/template/spec/"), "patch %s", p.Name)
				g.Expect(jsonPathInType(d.Selector.Kind, jp.Path)).To(BeTrue(), "patch %s: %s has no field %s", p.Name, d.Selector.Kind, jp.Path)
				if jp.ValueFrom != nil && jp.ValueFrom.Variable != "" {
					root, _, _ := strings.Cut(jp.ValueFrom.Variable, ".")
					g.Expect(declared).To(HaveKey(root), "patch %s uses variable %s", p.Name, jp.ValueFrom.Variable)
				}
				if jp.ValueFrom != nil && jp.ValueFrom.Template != "" {
					for _, m := range templateVariablePattern.FindAllStringSubmatch(jp.ValueFrom.Template, -1) {
						g.Expect(declared).To(HaveKey(m[1]), "patch %s uses variable %s", p.Name, m[1])
					}
				}
			}
		}
	}
}

// templateVariablePattern finds the variables a patch's Go template reads ({{ .name... }}).
var templateVariablePattern = regexp.MustCompile(`\{\{-?\s*(?:if\s+)?\.([A-Za-z0-9_]+)`)

// jsonPathInType reports whether a JSON patch path (with list indices) names a field of the
// Go type of kind: the path becomes a JSON document with a null at its end, which must decode
// strictly into the type.
func jsonPathInType(kind, path string) bool {
	var build func(parts []string) any
	build = func(parts []string) any {
		if len(parts) == 0 {
			return nil
		}
		if _, err := strconv.Atoi(parts[0]); err == nil {
			return []any{build(parts[1:])}
		}
		return map[string]any{parts[0]: build(parts[1:])}
	}
	b, err := json.Marshal(build(strings.Split(strings.TrimPrefix(path, "/"), "/")))
	if err != nil {
		return false
	}
	var into any
	switch kind {
	case "OVirtClusterTemplate":
		into = &infrav1.OVirtClusterTemplate{}
	case "OVirtMachineTemplate":
		into = &infrav1.OVirtMachineTemplate{}
	case "KubeadmControlPlaneTemplate":
		into = &controlplanev1.KubeadmControlPlaneTemplate{}
	case "KubeadmConfigTemplate":
		into = &bootstrapv1.KubeadmConfigTemplate{}
	default:
		return false
	}
	return yaml.UnmarshalStrict(b, into) == nil
}

// readRepoFile reads a file of the repository.
func readRepoFile(rel string) ([]byte, error) {
	return os.ReadFile(filepath.Join(root, rel))
}

func TestJSONPathInTypeCatchesAWrongPatchPath(t *testing.T) {
	g := NewWithT(t)
	g.Expect(jsonPathInType("OVirtMachineTemplate", "/spec/template/spec/nics/0/addressesFromPools")).To(BeTrue())
	g.Expect(jsonPathInType("KubeadmConfigTemplate", "/spec/template/spec/users/0/sshAuthorizedKeys")).To(BeTrue())
	g.Expect(jsonPathInType("OVirtMachineTemplate", "/spec/template/spec/nics/0/addressFromPools")).To(BeFalse())
	g.Expect(jsonPathInType("OVirtClusterTemplate", "/spec/template/spec/failureDomain")).To(BeFalse())
	g.Expect(jsonPathInType("KubeadmControlPlaneTemplate", "/spec/template/spec/users")).To(BeFalse(), "users are under kubeadmConfigSpec")
}
