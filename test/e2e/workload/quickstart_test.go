//go:build linux

package workload_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// testSSHKey is the public key the flavors' OVIRT_SSH_AUTHORIZED_KEY asks for (nobody logs in).
const testSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl capov-e2e"

// flavorVars are the variables of the default flavor for the lab.
func (wd *world) flavorVars() map[string]string {
	return map[string]string{
		"OVIRT_PROVIDER":                    providerName,
		"OVIRT_CLUSTER_NAME":                "Default",
		"OVIRT_TEMPLATE_NAME":               ovirtTemplate,
		"OVIRT_CONTROL_PLANE_ENDPOINT_HOST": wd.lab.Address(),
		"OVIRT_SSH_AUTHORIZED_KEY":          testSSHKey,
		"OVIRT_CONTROL_PLANE_MEMORY_MB":     "4096",
		"OVIRT_WORKER_MEMORY_MB":            "4096",
		"CNI":                               "flannel",
		// mhc_remediations: one worker of one may be replaced, soon after its Node is lost.
		"OVIRT_WORKER_MAX_UNHEALTHY":           "100%",
		"OVIRT_UNHEALTHY_NODE_TIMEOUT_SECONDS": "60",
	}
}

// workloadCluster is the cluster the scenarios of TestWorkloadCluster share, in order.
type workloadCluster struct {
	ns, name string
	cs       kubernetes.Interface
}

// TestWorkloadCluster builds one workload cluster from the default flavor and takes it through
// Cluster API's end-to-end specs in turn (each a subtest named after the spec it follows):
// quick_start, md_scale, mhc_remediations, a reboot and a stop of a worker through the Engine,
// remediation by reboot (an OVirtRemediation from the MachineHealthCheck), the KCP rollout,
// cluster_deletion. A failed step
// stops the ones after it (they need its result).
func TestWorkloadCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	c := &workloadCluster{ns: "quick-start", name: "qs"}
	for _, step := range []struct {
		name string
		run  func(*testing.T, context.Context, *workloadCluster)
	}{
		{"quick_start", testQuickStart},
		{"md_scale", testMDScale},
		{"mhc_remediations", testMHCRemediation},
		{"reboot", testReboot},
		{"mhc_reboot_remediation", testRebootRemediation},
		{"kcp_rollout", testKCPRollout},
		{"cluster_deletion", testClusterDeletion},
	} {
		start := time.Now()
		ok := t.Run(step.name, func(t *testing.T) { step.run(t, ctx, c) })
		logf("%s: %s in %s", step.name, map[bool]string{true: "passed", false: "FAILED"}[ok], time.Since(start).Round(time.Second))
		if !ok {
			w.dumpGuests(t)
			t.FailNow()
		}
	}
}

// testQuickStart follows Cluster API's quick_start spec: a cluster of one control-plane machine
// and one worker from the default flavor, rendered by clusterctl; kubeadm init and join succeed
// on CAPOV's VMs, both Nodes become Ready with CAPOV's providerIDs (matched by the SMBIOS UUID
// the kubelet reads), the Cluster, KubeadmControlPlane and MachineDeployment are Ready, and a
// pod on the worker answers through the workload API server.
func testQuickStart(t *testing.T, ctx context.Context, c *workloadCluster) {
	ns, name := c.ns, c.name
	if err := w.namespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	crs, err := os.ReadFile(filepath.Join("testdata", "cni-flannel.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.applyYAML(ctx, ns, crs); err != nil {
		t.Fatal(err)
	}
	manifest, err := w.generateCluster(ctx, name, ns, "", 1, 1, w.flavorVars())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := w.applyYAML(ctx, ns, manifest); err != nil {
		t.Fatal(err)
	}
	var cs kubernetes.Interface
	eventually(t, ctx, "the first control-plane Node is Ready", 15*time.Minute, 5*time.Second, func(ctx context.Context) error {
		if cs == nil {
			wc, _, err := w.workloadClient(ctx, ns, name)
			if err != nil {
				return err
			}
			cs = wc
		}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if nodeReady(&n) {
				return nil
			}
		}
		return fmt.Errorf("%d control-plane Nodes, none Ready", len(nodes.Items))
	})
	firstCP := time.Since(start)
	eventually(t, ctx, "kube-proxy leaves the host's conntrack table size alone", 5*time.Minute, 3*time.Second, func(ctx context.Context) error {
		return labKubeProxy(ctx, cs)
	})
	eventually(t, ctx, "every Node is Ready", 15*time.Minute, 5*time.Second, func(ctx context.Context) error {
		return allNodesReady(ctx, cs, 2)
	})
	allReady := time.Since(start)
	c.cs = cs
	eventually(t, ctx, "the Cluster is Available", 10*time.Minute, 5*time.Second, w.clusterAvailable(ns, name))
	logf("quick start: first control-plane Node Ready %s, all Nodes Ready %s after apply", firstCP.Round(time.Second), allReady.Round(time.Second))

	// Every Node is its Machine's VM: providerID set by CAPOV, system UUID read by the kubelet
	// from the firmware the Engine gave the VM.
	machines, err := w.machines(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]corev1.Node{}
	for _, n := range nodes.Items {
		byName[n.Name] = n
	}
	for _, m := range machines {
		if m.Status.NodeRef.Name == "" {
			t.Fatalf("Machine %s has no nodeRef", m.Name)
		}
		n, ok := byName[m.Status.NodeRef.Name]
		if !ok {
			t.Fatalf("Machine %s names Node %s, which does not exist", m.Name, m.Status.NodeRef.Name)
		}
		vmID := strings.TrimPrefix(m.Spec.ProviderID, "ovirt://")
		if m.Spec.ProviderID == "" || n.Spec.ProviderID != m.Spec.ProviderID || n.Status.NodeInfo.SystemUUID != vmID {
			t.Fatalf("Machine %s (providerID %q) and Node %s (providerID %q, systemUUID %q) do not match",
				m.Name, m.Spec.ProviderID, n.Name, n.Spec.ProviderID, n.Status.NodeInfo.SystemUUID)
		}
	}

	// A server pod on the worker, behind a Service; a client pod on the control-plane node
	// reaches it by the Service's DNS name: CoreDNS, kube-proxy's Service rules and flannel's
	// overlay between the two Nodes. Both outputs are read through the workload API server
	// (the kubelets serve the logs).
	worker, cp := "", ""
	for _, n := range nodes.Items {
		if _, isCP := n.Labels["node-role.kubernetes.io/control-plane"]; isCP {
			cp = n.Name
		} else {
			worker = n.Name
		}
	}
	for _, m := range machines {
		rss, cache := guestMemory(vmID(&m))
		logf("memory of the guest of %s: %d MiB resident, %d MiB page cache", m.Name, rss, cache)
	}
	if err := runAcrossNodes(ctx, cs, worker, cp); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "a pod on the control-plane node reached a pod on the worker", 5*time.Minute, 3*time.Second, func(ctx context.Context) error {
		return podsTalked(ctx, cs)
	})
}

// runAcrossNodes starts e2eapp's server on one Node behind the Service "echo", and its client
// on another.
func runAcrossNodes(ctx context.Context, cs kubernetes.Interface, serverNode, clientNode string) error {
	labels := map[string]string{"app": "echo"}
	tolerate := []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	objs := []func() error{
		func() error {
			_, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "echo-server", Namespace: "default", Labels: labels},
				Spec: corev1.PodSpec{NodeName: serverNode, Hostname: "echo-server", Containers: []corev1.Container{{
					Name: "serve", Image: appImageRef, ImagePullPolicy: corev1.PullNever,
					Args:  []string{"serve", "-addr", ":8080", "-secret", "/etc/hostname"},
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
				Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 8080}}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "echo-client", Namespace: "default"},
				Spec: corev1.PodSpec{NodeName: clientNode, RestartPolicy: corev1.RestartPolicyOnFailure, Tolerations: tolerate,
					Containers: []corev1.Container{{Name: "get", Image: appImageRef, ImagePullPolicy: corev1.PullNever,
						Args: []string{"get", "http://echo.default.svc.cluster.local:8080/"}}}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil {
			return err
		}
	}
	return nil
}

// podsTalked checks that the client printed the server's answer and the server logged its
// start, both read through the API server.
func podsTalked(ctx context.Context, cs kubernetes.Interface) error {
	p, err := cs.CoreV1().Pods("default").Get(ctx, "echo-client", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if p.Status.Phase != corev1.PodSucceeded {
		return fmt.Errorf("pod echo-client is %s", p.Status.Phase)
	}
	out, err := cs.CoreV1().Pods("default").GetLogs("echo-client", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return err
	}
	if !strings.Contains(string(out), "host=echo-server") {
		return fmt.Errorf("echo-client printed %q", out)
	}
	out, err = cs.CoreV1().Pods("default").GetLogs("echo-server", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return err
	}
	if !strings.Contains(string(out), "serving on :8080") {
		return fmt.Errorf("echo-server printed %q", out)
	}
	return nil
}

// labKubeProxy makes kube-proxy leave net.netfilter.nf_conntrack_max alone, as an operator
// changes a setting of a new cluster: the lab's guests share the host's kernel, which lets only
// the host's own network namespace write that global sysctl, and kube-proxy with kubeadm's
// defaults (32768 per CPU, at least 131072) exits when the write is refused. A real VM has a
// kernel of its own: the flavors carry none of this. It edits the ConfigMap kubeadm wrote
// (conntrack.maxPerCore 0, as kind does) and restarts kube-proxy's pods.
func labKubeProxy(ctx context.Context, cs kubernetes.Interface) error {
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return err
	}
	conf := cm.Data["config.conf"]
	if !strings.Contains(conf, "maxPerCore: 0") {
		if !strings.Contains(conf, "maxPerCore: null") {
			return fmt.Errorf("kube-proxy's configuration has no conntrack.maxPerCore to set:\n%s", conf)
		}
		cm.Data["config.conf"] = strings.Replace(conf, "maxPerCore: null", "maxPerCore: 0", 1)
		if _, err := cs.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return err
		}
		logf("kube-proxy: conntrack.maxPerCore set to 0 for the lab's shared kernel")
	}
	return cs.CoreV1().Pods("kube-system").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy"})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func allNodesReady(ctx context.Context, cs kubernetes.Interface, want int) error {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := 0
	var not []string
	for _, n := range nodes.Items {
		if nodeReady(&n) {
			ready++
		} else {
			not = append(not, n.Name)
		}
	}
	if ready != want || len(nodes.Items) != want {
		return fmt.Errorf("%d of %d Nodes Ready (want %d); not Ready: %v", ready, len(nodes.Items), want, not)
	}
	return nil
}
