package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/yaml"

	ipamv1 "sigs.k8s.io/cluster-api-ipam-provider-in-cluster/api/v1alpha2"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// clusterTemplates are the flavors in templates/ ("" is the default flavor).
var clusterTemplates = map[string]string{
	"":                 "templates/cluster-template.yaml",
	"storage-domain":   "templates/cluster-template-storage-domain.yaml",
	"static-ip":        "templates/cluster-template-static-ip.yaml",
	"kube-vip":         "templates/cluster-template-kube-vip.yaml",
	"kube-vip-pool":    "templates/cluster-template-kube-vip-pool.yaml",
	"ignition":         "templates/cluster-template-ignition.yaml",
	"topology":         "templates/cluster-template-topology.yaml",
	"data-disks":       "templates/cluster-template-data-disks.yaml",
	"high-performance": "templates/cluster-template-high-performance.yaml",
	"gpu":              "templates/cluster-template-gpu.yaml",
	"gpu-passthrough":  "templates/cluster-template-gpu-passthrough.yaml",
}

// gpuFlavors are the flavors that add a pool of GPU workers (<name>-md-gpu) to the default one.
var gpuFlavors = []string{"gpu", "gpu-passthrough"}

// clusterClasses are the ClusterClass files in templates/, by class name: clusterctl looks
// for clusterclass-<name>.yaml in the provider's repository when a template's Cluster names
// the class in spec.topology.classRef.
var clusterClasses = map[string]string{
	"ovirt": "templates/clusterclass-ovirt.yaml",
}

// classicFlavors are the flavors that render the objects of a cluster themselves (all but
// topology, whose Cluster leaves them to a ClusterClass).
func classicFlavors() map[string]string {
	out := map[string]string{}
	for flavor, file := range clusterTemplates {
		if flavor != "topology" {
			out[flavor] = file
		}
	}
	return out
}

// templateVars are values for every variable without a default, as a user would set them.
var templateVars = map[string]string{
	"CLUSTER_NAME":                      "prod-a",
	"NAMESPACE":                         "default",
	"KUBERNETES_VERSION":                "v1.34.1",
	"CONTROL_PLANE_MACHINE_COUNT":       "3",
	"WORKER_MACHINE_COUNT":              "2",
	"OVIRT_PROVIDER":                    "ovirt-prod",
	"OVIRT_CLUSTER_NAME":                "Default",
	"OVIRT_TEMPLATE_NAME":               "ubuntu-22.04",
	"OVIRT_CONTROL_PLANE_ENDPOINT_HOST": "10.0.1.100",
	"OVIRT_STORAGE_DOMAIN":              "fast-ssd",
	"OVIRT_SSH_AUTHORIZED_KEY":          testSSHKey,
	"OVIRT_NODE_IP_ADDRESSES":           "10.0.1.10-10.0.1.50",
	"OVIRT_NODE_GATEWAY":                "10.0.1.1",
	"OVIRT_NODE_NAMESERVERS":            "10.0.0.53",
	"OVIRT_CONTROL_PLANE_ENDPOINT_POOL": "vips",
	"OVIRT_GPU_DEVICE_ID":               "20b5",
}

// testSSHKey is the public key the tests give OVIRT_SSH_AUTHORIZED_KEY.
const testSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRlbW8ta2V5LWZvci1jYXBvdi10ZXN0cw ops@example.com"

// clusterctlRepo lays out a local clusterctl repository with this tree's assets:
// <dir>/infrastructure-ovirt/v<appVersion>/{infrastructure-components,metadata,cluster-template*}.yaml
// and a clusterctl configuration naming only our provider. It returns the configuration path
// and the version.
func clusterctlRepo(t *testing.T) (configPath, version string) {
	t.Helper()
	dir := t.TempDir()
	version = "v" + loadChart(t, "capov").Metadata.AppVersion
	rel := filepath.Join(dir, "infrastructure-ovirt", version)
	if err := os.MkdirAll(rel, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"infrastructure-components.yaml": kustomize(t)}
	assets := []string{"metadata.yaml"}
	for _, f := range clusterTemplates {
		assets = append(assets, f)
	}
	for _, f := range clusterClasses {
		assets = append(assets, f)
	}
	for _, f := range assets {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(f)] = b
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(rel, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	configPath = filepath.Join(dir, "clusterctl.yaml")
	config := "providers:\n" +
		"  - name: ovirt\n" +
		"    url: " + filepath.Join(rel, "infrastructure-components.yaml") + "\n" +
		"    type: InfrastructureProvider\n"
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return configPath, version
}

// clusterctl runs the clusterctl built from our module offline: no version check against
// GitHub, a throw-away home (clusterctl writes ~/.cluster-api), only our provider configured.
// listVariables runs `clusterctl generate cluster --list-variables` for a flavor ("" is the
// default) of the repository at config.
func listVariables(t *testing.T, config, version, flavor string) (string, error) {
	t.Helper()
	args := []string{"generate", "cluster", "prod-a", "--infrastructure", "ovirt:" + version, "--config", config,
		"--target-namespace", "default", "--list-variables"}
	if flavor != "" {
		args = append(args, "--flavor", flavor)
	}
	return clusterctl(t, nil, args...)
}

func clusterctl(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	bin := tool(t, "CLUSTERCTL", "clusterctl.sh")
	vars := []string{"CLUSTERCTL_DISABLE_VERSIONCHECK=true", "HOME=" + t.TempDir(), "GITHUB_TOKEN="}
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	return run(t, vars, bin, args...)
}

func TestClusterctlGeneratesTheProviderOffline(t *testing.T) {
	config, version := clusterctlRepo(t)

	t.Run("describe: variables, images, namespace", func(t *testing.T) {
		g := NewWithT(t)
		out, err := clusterctl(t, nil, "generate", "provider", "--infrastructure", "ovirt:"+version, "--config", config, "--describe")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("Version:            " + version))
		g.Expect(out).To(ContainSubstring("TargetNamespace:    capov-system"))
		g.Expect(out).To(ContainSubstring("OVIRT_FEATURE_GATES"))
		g.Expect(out).To(ContainSubstring("OVIRT_LOG_VERBOSITY"))
		g.Expect(out).To(ContainSubstring("ghcr.io/capov/capov-manager:" + strings.TrimPrefix(version, "v")))
		g.Expect(out).To(ContainSubstring("ghcr.io/capov/capov-webhook:" + strings.TrimPrefix(version, "v")))
	})

	t.Run("components with variables substituted", func(t *testing.T) {
		g := NewWithT(t)
		out, err := clusterctl(t, map[string]string{"OVIRT_FEATURE_GATES": "disk-clone=true"},
			"generate", "provider", "--infrastructure", "ovirt:"+version, "--config", config)
		g.Expect(err).NotTo(HaveOccurred(), out)
		objs, err := parseYAMLDocs([]byte(out))
		g.Expect(err).NotTo(HaveOccurred())
		var managers int
		for _, o := range objs {
			// clusterctl labels every component; move and delete find them by these labels.
			g.Expect(o.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/provider", "infrastructure-ovirt"))
			g.Expect(o.GetLabels()).To(HaveKey("clusterctl.cluster.x-k8s.io"))
			if o.GetKind() == "Deployment" && o.GetName() == managerDeployment {
				managers++
				g.Expect(containerNames(o)).To(ContainElement("manager"), "clusterctl requires a container named manager")
			}
		}
		g.Expect(managers).To(Equal(1))
		expectConversionThrough(g, objs, "capov-system")
		g.Expect(out).To(ContainSubstring("--feature-gates=disk-clone=true"))
		g.Expect(out).NotTo(ContainSubstring("${"))
	})

	t.Run("another target namespace rewrites the webhook and certificate references", func(t *testing.T) {
		g := NewWithT(t)
		out, err := clusterctl(t, nil, "generate", "provider", "--infrastructure", "ovirt:"+version,
			"--config", config, "--target-namespace", "capov-test")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("cert-manager.io/inject-ca-from: capov-test/capov-serving-cert"))
		g.Expect(out).To(ContainSubstring("capov-webhook-service.capov-test.svc"))
		objs, err := parseYAMLDocs([]byte(out))
		g.Expect(err).NotTo(HaveOccurred())
		expectConversionThrough(g, objs, "capov-test")
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				continue // the descriptions mention the default namespace
			}
			if o.GetKind() == "MutatingWebhookConfiguration" || o.GetKind() == "ValidatingWebhookConfiguration" {
				// The manager's exemption is CEL naming its user as config/default renders it;
				// clusterctl rewrites no CEL, so here the manager is not exempt and admission of
				// its writes fails closed as without the condition (docs/webhook.md, Limits).
				webhooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
				for i := range webhooks {
					w := webhooks[i].(map[string]any)
					g.Expect(fmt.Sprint(w["matchConditions"])).To(ContainSubstring("system:serviceaccount:capov-system:capov-manager"))
					delete(w, "matchConditions")
				}
				g.Expect(unstructured.SetNestedSlice(o.Object, webhooks, "webhooks")).To(Succeed())
			}
			b, err := yaml.Marshal(o.Object)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(b)).NotTo(ContainSubstring("capov-system"), o.GetKind()+"/"+o.GetName())
		}
	})
}

// expectConversionThrough checks that the components hold the webhook Service in ns and that
// every CAPOV CRD converts through it (/convert) with the CA of the serving certificate in ns.
func expectConversionThrough(g Gomega, objs []*unstructured.Unstructured, ns string) {
	var services, crds int
	for _, o := range objs {
		switch {
		case o.GetKind() == "Service" && o.GetName() == "capov-webhook-service":
			services++
			g.Expect(o.GetNamespace()).To(Equal(ns))
		case o.GetKind() == "CustomResourceDefinition":
			crds++
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd)).To(Succeed())
			g.Expect(crd.Spec.Conversion).To(Equal(wantConversion(ns, "capov-webhook-service")), crd.Name)
			g.Expect(crd.Annotations).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", ns+"/capov-serving-cert"), crd.Name)
		}
	}
	g.Expect(services).To(Equal(1), "the webhook Service")
	g.Expect(crds).To(Equal(8), "ovirtproviders, ovirtclusters, ovirtmachines, ovirtmachinetemplates, ovirtclustertemplates, ovirthostdeviceclaims, ovirtremediations, ovirtremediationtemplates")
}

// containerNames lists the container names of a Deployment.
func containerNames(o *unstructured.Unstructured) []string {
	var names []string
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok {
			names = append(names, fmt.Sprint(m["name"]))
		}
	}
	return names
}

func TestClusterctlListsTheTemplateVariablesOffline(t *testing.T) {
	config, version := clusterctlRepo(t)
	base := []string{"KUBERNETES_VERSION", "OVIRT_CLUSTER_NAME", "OVIRT_CONTROL_PLANE_ENDPOINT_HOST", "OVIRT_PROVIDER", "OVIRT_SSH_AUTHORIZED_KEY", "OVIRT_TEMPLATE_NAME"}
	with := func(add ...string) []string {
		out := append(append([]string{}, base...), add...)
		sort.Strings(out)
		return out
	}
	required := map[string][]string{
		"":                 base,
		"storage-domain":   with("OVIRT_STORAGE_DOMAIN"),
		"static-ip":        with("OVIRT_NODE_GATEWAY", "OVIRT_NODE_IP_ADDRESSES", "OVIRT_NODE_NAMESERVERS"),
		"kube-vip":         base,
		"ignition":         base,
		"topology":         base,
		"data-disks":       base,
		"high-performance": base,
		"gpu":              base,
		"gpu-passthrough":  with("OVIRT_GPU_DEVICE_ID"),
		// The endpoint comes from the pool: its host is no variable.
		"kube-vip-pool": {"KUBERNETES_VERSION", "OVIRT_CLUSTER_NAME", "OVIRT_CONTROL_PLANE_ENDPOINT_POOL", "OVIRT_PROVIDER", "OVIRT_SSH_AUTHORIZED_KEY", "OVIRT_TEMPLATE_NAME"},
	}

	for flavor, file := range clusterTemplates {
		t.Run("flavor "+flavor, func(t *testing.T) {
			g := NewWithT(t)
			out, err := listVariables(t, config, version, flavor)
			g.Expect(err).NotTo(HaveOccurred(), out)
			req := strings.SplitN(strings.SplitN(out, "Optional Variables:", 2)[0], "Required Variables:", 2)[1]
			g.Expect(strings.Fields(strings.ReplaceAll(req, "-", ""))).To(Equal(required[flavor]), out)
			g.Expect(required).To(HaveKey(flavor), "every flavor lists its required variables here")
			for _, v := range []string{"CLUSTER_NAME", "NAMESPACE", "CONTROL_PLANE_MACHINE_COUNT", "WORKER_MACHINE_COUNT",
				"OVIRT_VNIC_PROFILE", "OVIRT_CONTROL_PLANE_ENDPOINT_PORT", "OVIRT_CONTROL_PLANE_CPU_CORES"} {
				g.Expect(out).To(ContainSubstring(v))
			}

			// The file form, as in `clusterctl generate cluster --from`.
			out, err = clusterctl(t, nil, "generate", "cluster", "prod-a", "--from", filepath.Join(root, file),
				"--target-namespace", "default", "--list-variables")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("Required Variables:"))
		})
	}

	t.Run("a full generate substitutes every variable", func(t *testing.T) {
		g := NewWithT(t)
		out, err := clusterctl(t, templateVars, "generate", "cluster", "prod-a", "--infrastructure", "ovirt:"+version,
			"--config", config, "--target-namespace", "default", "--kubernetes-version", "v1.34.1",
			"--control-plane-machine-count", "3", "--worker-machine-count", "2")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).NotTo(ContainSubstring("${"))
		objs, err := parseYAMLDocs([]byte(out))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(objs).To(HaveLen(9))
	})
}

// generatedCluster substitutes a cluster template like clusterctl and decodes every object
// strictly into the Go type of its kind (CAPOV's own types for OVirt* objects).
func generatedCluster(t *testing.T, file string) []runtime.Object {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseYAMLDocs([]byte(envsubst(t, string(b), templateVars)))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []runtime.Object
	for _, u := range objs {
		out = append(out, typedObject(t, file, u))
	}
	return out
}

// typedObject decodes u strictly into the Go type of its kind: CAPOV's own types for OVirt*
// objects, Cluster API's v1beta2 types, the in-cluster IPAM provider's pool.
func typedObject(t *testing.T, file string, u *unstructured.Unstructured) runtime.Object {
	t.Helper()
	var obj runtime.Object
	switch u.GetKind() {
	case "Cluster":
		obj = &clusterv1.Cluster{}
	case "ClusterClass":
		obj = &clusterv1.ClusterClass{}
	case "MachineDeployment":
		obj = &clusterv1.MachineDeployment{}
	case "MachineHealthCheck":
		obj = &clusterv1.MachineHealthCheck{}
	case "KubeadmControlPlane":
		obj = &controlplanev1.KubeadmControlPlane{}
	case "KubeadmControlPlaneTemplate":
		obj = &controlplanev1.KubeadmControlPlaneTemplate{}
	case "KubeadmConfigTemplate":
		obj = &bootstrapv1.KubeadmConfigTemplate{}
	case "OVirtCluster":
		obj = &infrav1.OVirtCluster{}
	case "OVirtClusterTemplate":
		obj = &infrav1.OVirtClusterTemplate{}
	case "OVirtMachineTemplate":
		obj = &infrav1.OVirtMachineTemplate{}
	case "OVirtRemediationTemplate":
		obj = &infrav1.OVirtRemediationTemplate{}
	case "InClusterIPPool":
		obj = &ipamv1.InClusterIPPool{}
	default:
		t.Fatalf("%s: unexpected kind %s", file, u.GetKind())
	}
	decodeStrict(t, u, obj)
	return obj
}

func TestClusterTemplatesDecodeIntoTheAPITypes(t *testing.T) {
	for flavor, file := range classicFlavors() {
		t.Run("flavor "+flavor, func(t *testing.T) {
			g := NewWithT(t)
			raw, err := os.ReadFile(filepath.Join(root, file))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(withoutComments(string(raw))).NotTo(ContainSubstring("cloud-provider"),
				"there is no oVirt cloud-controller-manager: CAPOV sets the providerID itself")
			vars := variables(string(raw))
			for _, v := range []string{"CLUSTER_NAME", "NAMESPACE", "KUBERNETES_VERSION", "CONTROL_PLANE_MACHINE_COUNT", "WORKER_MACHINE_COUNT"} {
				g.Expect(vars).To(HaveKey(v), "clusterctl's common variable %s", v)
			}
			for v := range vars {
				switch {
				case slices.Contains([]string{"CLUSTER_NAME", "NAMESPACE", "KUBERNETES_VERSION", "CONTROL_PLANE_MACHINE_COUNT", "WORKER_MACHINE_COUNT", "POD_CIDR", "SERVICE_CIDR"}, v):
				case v == "CNI":
					// the cluster's CNI label, as in Cluster API's own templates: not oVirt's.
				case strings.HasPrefix(v, "KUBE_VIP_"):
					// kube-vip's own settings, the same in every provider's kube-vip template.
				default:
					g.Expect(v).To(HavePrefix("OVIRT_"), "provider variables carry the provider name")
				}
			}

			objs := generatedCluster(t, file)
			kinds := map[string]int{}
			var cluster *clusterv1.Cluster
			var ovc *infrav1.OVirtCluster
			var kcp *controlplanev1.KubeadmControlPlane
			var md *clusterv1.MachineDeployment
			templates := map[string]*infrav1.OVirtMachineTemplate{}
			for _, o := range objs {
				switch o := o.(type) {
				case *clusterv1.Cluster:
					cluster = o
				case *infrav1.OVirtCluster:
					ovc = o
				case *controlplanev1.KubeadmControlPlane:
					kcp = o
				case *clusterv1.MachineDeployment:
					if strings.HasSuffix(o.Name, "-md-0") {
						md = o
					}
				case *infrav1.OVirtMachineTemplate:
					templates[o.Name] = o
				}
				kinds[o.GetObjectKind().GroupVersionKind().Kind]++
			}
			wantKinds := map[string]int{
				"Cluster": 1, "OVirtCluster": 1, "KubeadmControlPlane": 1, "MachineDeployment": 1,
				"KubeadmConfigTemplate": 1, "OVirtMachineTemplate": 2, "MachineHealthCheck": 2,
			}
			if flavor == "static-ip" {
				wantKinds["InClusterIPPool"] = 1
			}
			if slices.Contains(gpuFlavors, flavor) {
				// The GPU pool: its MachineDeployment, bootstrap and machine templates, health
				// check and remediation template.
				wantKinds["MachineDeployment"]++
				wantKinds["KubeadmConfigTemplate"]++
				wantKinds["OVirtMachineTemplate"]++
				wantKinds["MachineHealthCheck"]++
				wantKinds["OVirtRemediationTemplate"] = 1
			}
			g.Expect(kinds).To(Equal(wantKinds))

			// The references resolve to the objects of the template.
			g.Expect(cluster.Spec.InfrastructureRef.Name).To(Equal(ovc.Name))
			g.Expect(cluster.Spec.InfrastructureRef.APIGroup).To(Equal(infrav1.GroupVersion.Group))
			g.Expect(cluster.Spec.ControlPlaneRef.Name).To(Equal(kcp.Name))
			if flavor == "kube-vip-pool" {
				g.Expect(ovc.Spec.ControlPlaneEndpoint.Host).To(BeEmpty(), "CAPOV claims the host from the pool")
				g.Expect(ovc.Spec.ControlPlaneEndpointFromPool).To(HaveValue(Equal(infrav1.IPPoolReference{
					APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "vips"})))
			} else {
				g.Expect(ovc.Spec.ControlPlaneEndpoint.Host).To(Equal("10.0.1.100"))
				g.Expect(ovc.Spec.ControlPlaneEndpointFromPool).To(BeNil())
			}
			g.Expect(ovc.Spec.ControlPlaneEndpoint.Port).To(BeEquivalentTo(6443))
			g.Expect(kcp.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
			g.Expect(kcp.Spec.Version).To(Equal("v1.34.1"))
			g.Expect(templates).To(HaveKey(kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name))
			g.Expect(md.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
			g.Expect(md.Spec.ClusterName).To(Equal(cluster.Name))
			g.Expect(templates).To(HaveKey(md.Spec.Template.Spec.InfrastructureRef.Name))
			g.Expect(md.Spec.Template.Spec.Bootstrap.ConfigRef.Kind).To(Equal("KubeadmConfigTemplate"))

			for name, tpl := range templates {
				s := tpl.Spec.Template.Spec
				g.Expect(s.Provider).To(Equal("ovirt-prod"), name)
				g.Expect(s.OVirtCluster).To(Equal("Default"), name)
				g.Expect(s.Template).To(Equal(templateVars["OVIRT_TEMPLATE_NAME"]), name)
				g.Expect(s.NICs).To(HaveLen(1), name)
				g.Expect(s.NICs[0].VnicProfile).To(Equal("ovirtmgmt"), name)
				g.Expect(s.CPU.Cores).To(BeEquivalentTo(4), name)
				if flavor == "storage-domain" {
					g.Expect(s.StorageDomainName).To(Equal("fast-ssd"), name)
					g.Expect(s.DiskClone).To(HaveValue(BeTrue()), "another storage domain needs cloned disks")
				} else {
					g.Expect(s.StorageDomainName).To(BeEmpty(), name)
					g.Expect(s.DiskClone).To(BeNil(), name)
				}
			}
		})
	}
}

// withoutComments drops the comment lines of a YAML file.
func withoutComments(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestStorageDomainFlavorOnlyAddsTheStorageDomain keeps the two flavors from drifting apart.
func TestStorageDomainFlavorOnlyAddsTheStorageDomain(t *testing.T) {
	g := NewWithT(t)
	base, err := os.ReadFile(filepath.Join(root, clusterTemplates[""]))
	g.Expect(err).NotTo(HaveOccurred())
	flavor, err := os.ReadFile(filepath.Join(root, clusterTemplates["storage-domain"]))
	g.Expect(err).NotTo(HaveOccurred())
	var kept []string
	for _, line := range strings.Split(withoutComments(string(flavor)), "\n") {
		switch strings.TrimSpace(line) {
		case `storagedomainname: "${OVIRT_STORAGE_DOMAIN}"`, "diskclone: true":
		default:
			kept = append(kept, line)
		}
	}
	g.Expect(strings.Join(kept, "\n")).To(Equal(withoutComments(string(base))),
		"cluster-template-storage-domain.yaml must equal cluster-template.yaml plus storagedomainname and diskclone")
}

// TestVMContentsFlavorsOnlyAddTheirLines keeps the data-disks and high-performance flavors from
// drifting away from the default one: each is the default plus its own lines.
func TestVMContentsFlavorsOnlyAddTheirLines(t *testing.T) {
	g := NewWithT(t)
	base, err := os.ReadFile(filepath.Join(root, clusterTemplates[""]))
	g.Expect(err).NotTo(HaveOccurred())
	added := map[string][]string{
		"data-disks": {"diskSetup:", "filesystems:", "- device: /dev/sdb", "filesystem: ext4", "label: etcd_disk", "overwrite: false",
			"mounts:", "- - LABEL=etcd_disk", "- /var/lib/etcd", "dataDisks:", "- name: etcd", "sizeGB: ${OVIRT_ETCD_DISK_SIZE_GB:=20}", "preallocated: true"},
		"high-performance": {"performance:", "cpuMode: HostPassthrough", "hugePagesKiB: ${OVIRT_HUGEPAGES_KIB:=2048}", "ioThreads: 1",
			"multiQueues: true", "ballooning: false"},
	}
	for flavor, lines := range added {
		content, err := os.ReadFile(filepath.Join(root, clusterTemplates[flavor]))
		g.Expect(err).NotTo(HaveOccurred())
		var kept []string
		for _, line := range strings.Split(withoutComments(string(content)), "\n") {
			if !slices.Contains(lines, strings.TrimSpace(line)) {
				kept = append(kept, line)
			}
		}
		want := withoutComments(string(base))
		if flavor == "high-performance" {
			want = strings.ReplaceAll(want, `vmtype: "${OVIRT_VM_TYPE:=server}"`, "vmtype: high_performance")
		}
		g.Expect(strings.Join(kept, "\n")).To(Equal(want), "%s must equal cluster-template.yaml plus its own lines", clusterTemplates[flavor])
	}
}

// TestGPUFlavorsAreTheDefaultPlusAGPUPool keeps the gpu flavors from drifting away from the
// default one: each is cluster-template.yaml unchanged, then the GPU pool, whose
// MachineDeployment, KubeadmConfigTemplate, OVirtMachineTemplate and MachineHealthCheck are those
// of md-0 renamed to md-gpu with only the pool's own changes, and its OVirtRemediationTemplate.
func TestGPUFlavorsAreTheDefaultPlusAGPUPool(t *testing.T) {
	split := func(s string) []string {
		var out []string
		for _, d := range strings.Split(withoutComments(s), "\n---\n") {
			if strings.TrimSpace(d) != "" {
				out = append(out, strings.TrimSpace(d))
			}
		}
		return out
	}
	parse := func(t *testing.T, doc string) map[string]any {
		t.Helper()
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		return m
	}
	base := split(string(mustRead(t, clusterTemplates[""])))
	// md-0's objects, in the order of the file: MachineDeployment, KubeadmConfigTemplate,
	// OVirtMachineTemplate, MachineHealthCheck.
	var workers []string
	for _, d := range base {
		if strings.Contains(d, "${CLUSTER_NAME}-md-0") {
			workers = append(workers, strings.ReplaceAll(d, "${CLUSTER_NAME}-md-0", "${CLUSTER_NAME}-md-gpu"))
		}
	}
	if len(workers) != 4 {
		t.Fatalf("the default flavor's md-0 has %d objects, want 4", len(workers))
	}

	accelerator := map[string]string{
		"gpu":             "cluster-api/accelerator=${OVIRT_GPU_MDEV_TYPE:=nvidia-22}",
		"gpu-passthrough": "cluster-api/accelerator=${OVIRT_GPU_VENDOR_ID:=10de}-${OVIRT_GPU_DEVICE_ID}",
	}
	gpus := map[string]map[string]any{
		"gpu": {"type": "VGPU", "mdevType": "${OVIRT_GPU_MDEV_TYPE:=nvidia-22}"},
		"gpu-passthrough": {"type": "Passthrough", "vendorID": "${OVIRT_GPU_VENDOR_ID:=10de}",
			"deviceID": "${OVIRT_GPU_DEVICE_ID}"},
	}
	for _, flavor := range gpuFlavors {
		t.Run(flavor, func(t *testing.T) {
			g := NewWithT(t)
			docs := split(string(mustRead(t, clusterTemplates[flavor])))
			g.Expect(len(docs)).To(BeNumerically(">", len(base)))
			g.Expect(docs[:len(base)]).To(Equal(base), "%s begins with cluster-template.yaml, unchanged", clusterTemplates[flavor])
			pool := docs[len(base):]
			kinds := []string{}
			for _, d := range pool {
				kinds = append(kinds, fmt.Sprint(parse(t, d)["kind"]))
			}
			g.Expect(kinds).To(Equal([]string{"MachineDeployment", "KubeadmConfigTemplate", "OVirtMachineTemplate",
				"OVirtRemediationTemplate", "MachineHealthCheck"}))

			// The pool's objects are md-0's with these changes.
			md := parse(t, workers[0])
			g.Expect(unstructured.SetNestedField(md, map[string]any{
				"capacity.cluster-autoscaler.kubernetes.io/labels": accelerator[flavor]}, "metadata", "annotations")).To(Succeed())
			g.Expect(unstructured.SetNestedField(md, "${OVIRT_GPU_WORKER_MACHINE_COUNT:=1}", "spec", "replicas")).To(Succeed())
			g.Expect(parse(t, pool[0])).To(Equal(md), "the GPU MachineDeployment is md-0's plus its autoscaler annotation")

			kct := parse(t, workers[1])
			g.Expect(unstructured.SetNestedSlice(kct, []any{map[string]any{"name": "node-labels", "value": accelerator[flavor]}},
				"spec", "template", "spec", "joinConfiguration", "nodeRegistration", "kubeletExtraArgs")).To(Succeed())
			g.Expect(parse(t, pool[1])).To(Equal(kct), "the GPU KubeadmConfigTemplate is md-0's plus the kubelet's node label")

			omt := parse(t, workers[2])
			gpu := map[string]any{"count": "${OVIRT_GPU_COUNT:=1}", "resourceName": "${OVIRT_GPU_RESOURCE_NAME:=nvidia.com/gpu}"}
			for k, v := range gpus[flavor] {
				gpu[k] = v
			}
			g.Expect(unstructured.SetNestedSlice(omt, []any{gpu}, "spec", "template", "spec", "gpus")).To(Succeed())
			g.Expect(parse(t, pool[2])).To(Equal(omt), "the GPU OVirtMachineTemplate is md-0's plus gpus")

			mhc := parse(t, workers[3])
			g.Expect(unstructured.SetNestedMap(mhc, map[string]any{"templateRef": map[string]any{
				"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "OVirtRemediationTemplate", "name": "${CLUSTER_NAME}-md-gpu",
			}}, "spec", "remediation")).To(Succeed())
			g.Expect(parse(t, pool[4])).To(Equal(mhc),
				"the GPU MachineHealthCheck is md-0's with the remediation template instead of triggerIf")

			ort := parse(t, pool[3])
			g.Expect(ort["metadata"]).To(Equal(map[string]any{"name": "${CLUSTER_NAME}-md-gpu", "namespace": "${NAMESPACE}"}))
			g.Expect(ort["spec"]).To(Equal(map[string]any{"template": map[string]any{"spec": map[string]any{"strategy": map[string]any{
				"type": "Reboot", "retryLimit": "${OVIRT_REMEDIATION_RETRY_LIMIT:=1}", "timeout": "${OVIRT_REMEDIATION_TIMEOUT:=5m}"}}}}))
		})
	}

	t.Run("the two gpu flavors differ only in the kind of GPU", func(t *testing.T) {
		g := NewWithT(t)
		vgpu := strings.ReplaceAll(withoutComments(string(mustRead(t, clusterTemplates["gpu"]))), accelerator["gpu"], accelerator["gpu-passthrough"])
		pass := withoutComments(string(mustRead(t, clusterTemplates["gpu-passthrough"])))
		var kept []string
		for _, line := range strings.Split(pass, "\n") {
			switch strings.TrimSpace(line) {
			case "- type: Passthrough", `vendorID: "${OVIRT_GPU_VENDOR_ID:=10de}"`, `deviceID: "${OVIRT_GPU_DEVICE_ID}"`:
			default:
				kept = append(kept, line)
			}
		}
		var want []string
		for _, line := range strings.Split(vgpu, "\n") {
			switch strings.TrimSpace(line) {
			case "- type: VGPU", `mdevType: "${OVIRT_GPU_MDEV_TYPE:=nvidia-22}"`:
			default:
				want = append(want, line)
			}
		}
		g.Expect(kept).To(Equal(want))
	})
}
