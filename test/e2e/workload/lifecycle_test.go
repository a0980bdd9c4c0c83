//go:build linux

package workload_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ovirtsdk "github.com/ovirt/go-ovirt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// vmID is the oVirt VM id of a Machine, from its providerID.
func vmID(m *clusterv1.Machine) string { return strings.TrimPrefix(m.Spec.ProviderID, "ovirt://") }

// guests lists the VMs that have a guest disk on the lab host (the simulator wipes it when it
// removes the VM).
func (wd *world) guests() map[string]bool {
	out := map[string]bool{}
	entries, _ := os.ReadDir(wd.vmsDir)
	for _, e := range entries {
		out[e.Name()] = true
	}
	return out
}

// guestTree is the cgroup tree of this suite's guests: capov-guests-<pid> of the simulator
// process that boots them. Another suite on the machine (make e2e runs beside make
// e2e-workload in .ci/run) has its own simulator, seeded like this one: its VMs have the same
// ids, so a guest is looked up in this tree only, never by id alone.
func guestTree() string { return fmt.Sprintf("capov-guests-%d", w.stack.SimProcess.PID()) }

// guestProcesses lists the processes of a guest of this suite (its cgroup subtree in any
// hierarchy there is).
func guestProcesses(id string) []string {
	var pids []string
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", guestTree(), id))
	if len(dirs) == 0 {
		return nil
	}
	_ = filepath.WalkDir(dirs[0], func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "cgroup.procs" {
			b, _ := os.ReadFile(p)
			pids = append(pids, strings.Fields(string(b))...)
		}
		return nil
	})
	return pids
}

// guestSystemctl runs the guest's own systemctl inside the guest (its mount and network
// namespaces), as an operator on the VM's console would.
func guestSystemctl(ctx context.Context, id string, args ...string) error {
	for _, pid := range guestProcesses(id) {
		comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
		if strings.TrimSpace(string(comm)) != "containerd" {
			continue
		}
		cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", pid, "-m", "-n", "--", "/usr/bin/systemctl"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("systemctl %s in guest %s: %w: %s", strings.Join(args, " "), id, err, out)
		}
		return nil
	}
	return fmt.Errorf("guest %s has no containerd process to enter", id)
}

// nodesByName lists the workload cluster's Nodes.
func nodesByName(ctx context.Context, cs kubernetes.Interface) (map[string]corev1.Node, error) {
	l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Node{}
	for _, n := range l.Items {
		out[n.Name] = n
	}
	return out, nil
}

// converged checks that the cluster has exactly cp control-plane and workers worker Machines,
// each Running with a Ready Node that carries its providerID and the VM's SMBIOS UUID, one
// guest per Machine and no other, and no other Node.
func (wd *world) converged(ns, name string, cs kubernetes.Interface, cp, workers int) func(context.Context) error {
	return func(ctx context.Context) error {
		machines, err := wd.machines(ctx, ns, name)
		if err != nil {
			return err
		}
		nodes, err := nodesByName(ctx, cs)
		if err != nil {
			return err
		}
		gotCP, gotW := 0, 0
		want := map[string]bool{}
		for i := range machines {
			m := &machines[i]
			if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
				gotCP++
			} else {
				gotW++
			}
			if m.DeletionTimestamp != nil {
				return fmt.Errorf("Machine %s is being deleted", m.Name)
			}
			if m.Status.Phase != string(clusterv1.MachinePhaseRunning) {
				return fmt.Errorf("Machine %s is %s", m.Name, m.Status.Phase)
			}
			n, ok := nodes[m.Status.NodeRef.Name]
			if !ok || !nodeReady(&n) {
				return fmt.Errorf("Machine %s: Node %q not Ready", m.Name, m.Status.NodeRef.Name)
			}
			if n.Spec.ProviderID != m.Spec.ProviderID || n.Status.NodeInfo.SystemUUID != vmID(m) {
				return fmt.Errorf("Machine %s (providerID %q) and Node %s (providerID %q, systemUUID %q) do not match",
					m.Name, m.Spec.ProviderID, n.Name, n.Spec.ProviderID, n.Status.NodeInfo.SystemUUID)
			}
			want[vmID(m)] = true
		}
		if gotCP != cp || gotW != workers {
			return fmt.Errorf("%d control-plane and %d worker Machines, want %d and %d", gotCP, gotW, cp, workers)
		}
		if len(nodes) != cp+workers {
			return fmt.Errorf("%d Nodes, want %d", len(nodes), cp+workers)
		}
		got := wd.guests()
		for id := range got {
			if !want[id] {
				return fmt.Errorf("guest %s belongs to no Machine (its VM was not removed)", id)
			}
		}
		return nil
	}
}

// scaleMachineDeployment sets a MachineDeployment's replicas.
func (wd *world) scaleMachineDeployment(ctx context.Context, ns, name string, replicas int32) error {
	md := &clusterv1.MachineDeployment{}
	if err := wd.mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, md); err != nil {
		return err
	}
	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Replicas = ptr.To(replicas)
	return wd.mgmt.Patch(ctx, md, patch)
}

// workers lists the cluster's worker Machines.
func (wd *world) workers(ctx context.Context, ns, name string) ([]clusterv1.Machine, error) {
	ms, err := wd.machines(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	var out []clusterv1.Machine
	for _, m := range ms {
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; !cp {
			out = append(out, m)
		}
	}
	return out, nil
}

// gone checks that a Machine and its guest no longer exist.
func (wd *world) gone(ns string, m clusterv1.Machine) func(context.Context) error {
	return func(ctx context.Context) error {
		err := wd.mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Name}, &clusterv1.Machine{})
		if err == nil {
			return fmt.Errorf("Machine %s still exists", m.Name)
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		if wd.guests()[vmID(&m)] {
			return fmt.Errorf("the guest of VM %s (Machine %s) is still there", vmID(&m), m.Name)
		}
		if p := guestProcesses(vmID(&m)); len(p) > 0 {
			return fmt.Errorf("VM %s (Machine %s) still has processes %v", vmID(&m), m.Name, p)
		}
		return nil
	}
}

// apiProbe polls the workload API server through the control-plane endpoint every second and
// records the longest run of failures.
type apiProbe struct {
	mu      sync.Mutex
	longest time.Duration
	since   time.Time
	fails   int
	stop    chan struct{}
	done    chan struct{}
}

func startAPIProbe(cs kubernetes.Interface) *apiProbe {
	p := &apiProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			cancel()
			p.mu.Lock()
			if err != nil {
				p.fails++
				if p.since.IsZero() {
					p.since = time.Now()
				}
				if d := time.Since(p.since); d > p.longest {
					p.longest = d
				}
			} else {
				p.since = time.Time{}
			}
			p.mu.Unlock()
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *apiProbe) Stop() (longest time.Duration, fails int) {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.longest, p.fails
}

// testMDScale follows Cluster API's md_scale spec: the MachineDeployment scaled 1 → 2 → 1;
// the new Machine's VM boots, joins and is removed again, guest and all.
func testMDScale(t *testing.T, ctx context.Context, c *workloadCluster) {
	if err := w.scaleMachineDeployment(ctx, c.ns, c.name+"-md-0", 2); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "two workers joined", 10*time.Minute, 5*time.Second, w.converged(c.ns, c.name, c.cs, 1, 2))
	if err := w.scaleMachineDeployment(ctx, c.ns, c.name+"-md-0", 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "back to one worker, the other's VM removed", 10*time.Minute, 5*time.Second, w.converged(c.ns, c.name, c.cs, 1, 1))
}

// testMHCRemediation follows Cluster API's mhc_remediations spec: the worker's kubelet is
// stopped on the VM; its Node goes NotReady, the MachineHealthCheck marks the Machine, which
// is deleted (CAPOV removes the VM, its guest goes away), and a new VM boots and joins.
func testMHCRemediation(t *testing.T, ctx context.Context, c *workloadCluster) {
	ws, err := w.workers(ctx, c.ns, c.name)
	if err != nil || len(ws) != 1 {
		t.Fatalf("want one worker: %v, %v", ws, err)
	}
	old := ws[0]
	if err := guestSystemctl(ctx, vmID(&old), "stop", "kubelet"); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the MachineHealthCheck replaced the worker", 10*time.Minute, 5*time.Second, w.gone(c.ns, old))
	eventually(t, ctx, "a new worker joined", 10*time.Minute, 5*time.Second, w.converged(c.ns, c.name, c.cs, 1, 1))
}

// testKCPRollout follows Cluster API's KCP rollout (kcp_upgrade, with rolloutAfter): a new
// control-plane machine joins etcd, the old one is removed with its etcd member, and the API
// server stays reachable through the control-plane endpoint.
func testKCPRollout(t *testing.T, ctx context.Context, c *workloadCluster) {
	ms, err := w.machines(ctx, c.ns, c.name)
	if err != nil {
		t.Fatal(err)
	}
	var old clusterv1.Machine
	for _, m := range ms {
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp {
			old = m
		}
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := w.mgmt.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: c.name + "-control-plane"}, kcp); err != nil {
		t.Fatal(err)
	}
	probe := startAPIProbe(c.cs)
	patch := client.MergeFrom(kcp.DeepCopy())
	kcp.Spec.Rollout.After = metav1.Now()
	if err := w.mgmt.Patch(ctx, kcp, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the old control-plane machine is gone", 15*time.Minute, 5*time.Second, w.gone(c.ns, old))
	eventually(t, ctx, "the new control plane serves alone", 10*time.Minute, 5*time.Second, func(ctx context.Context) error {
		if err := w.converged(c.ns, c.name, c.cs, 1, 1)(ctx); err != nil {
			return err
		}
		k := &controlplanev1.KubeadmControlPlane{}
		if err := w.mgmt.Get(ctx, client.ObjectKeyFromObject(kcp), k); err != nil {
			return err
		}
		// KCP compares etcd's members with its Machines: healthy with one Machine means the
		// old member was removed.
		for _, cond := range []string{controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition, controlplanev1.KubeadmControlPlaneAvailableCondition} {
			if !conditionTrue(k.Status.Conditions, cond) {
				return fmt.Errorf("KubeadmControlPlane %s is not %s: %v", k.Name, cond, k.Status.Conditions)
			}
		}
		if ptr.Deref(k.Status.UpToDateReplicas, 0) != 1 || ptr.Deref(k.Status.Replicas, 0) != 1 {
			return fmt.Errorf("KubeadmControlPlane %s: %d replicas, %d up to date", k.Name, ptr.Deref(k.Status.Replicas, 0), ptr.Deref(k.Status.UpToDateReplicas, 0))
		}
		return nil
	})
	longest, fails := probe.Stop()
	logf("kcp rollout: the workload API failed %d probes, for at most %s in a row", fails, longest.Round(time.Second))
	if longest > 30*time.Second {
		t.Errorf("the workload API server was unreachable for %s during the rollout", longest)
	}
}

// testClusterDeletion follows Cluster API's cluster_deletion spec: the Cluster deleted,
// every Machine, VM and guest goes, nothing of the guests is left on the lab host.
func testClusterDeletion(t *testing.T, ctx context.Context, c *workloadCluster) {
	cl := &clusterv1.Cluster{}
	if err := w.mgmt.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: c.name}, cl); err != nil {
		t.Fatal(err)
	}
	if err := w.mgmt.Delete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the Cluster is gone", 10*time.Minute, 5*time.Second, func(ctx context.Context) error {
		err := w.mgmt.Get(ctx, client.ObjectKeyFromObject(cl), &clusterv1.Cluster{})
		if err == nil {
			return errors.New("the Cluster still exists")
		}
		return ignoreNotFound(err)
	})
	if g := w.guests(); len(g) > 0 {
		t.Errorf("guests left after the cluster was deleted: %v", g)
	}
	// This world's guests: the cgroup trees of its simulator (other test processes may run
	// their own guests beside it).
	trees, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", guestTree(), "*"))
	for _, tr := range trees {
		if fi, err := os.Stat(tr); err == nil && fi.IsDir() {
			t.Errorf("guest cgroup left after the cluster was deleted: %s", tr)
		}
	}
}

// ovirtVM is the Engine API's service of a VM, reached as an operator's script reaches it.
func (wd *world) ovirtVM(t *testing.T, id string) *ovirtsdk.VmService {
	t.Helper()
	conn, err := ovirtsdk.NewConnectionBuilder().URL(wd.stack.SimURL).Username(wd.stack.SimUsername).
		Password(wd.stack.SimPassword).CACert(wd.stack.SimCAPEM).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn.SystemService().VmsService().VmService(id)
}

// powerOns counts the boots of a VM's guest (its console log marks each).
func (wd *world) powerOns(id string) int {
	b, _ := os.ReadFile(filepath.Join(wd.vmsDir, id, "console.log"))
	return strings.Count(string(b), "=== power on ")
}

// machineNames lists the cluster's Machines by name and providerID.
func (wd *world) machineNames(ctx context.Context, ns, name string) (map[string]string, error) {
	ms, err := wd.machines(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range ms {
		out[m.Name] = m.Spec.ProviderID
	}
	return out, nil
}

// testReboot: a worker rebooted through the Engine, and one stopped and started through the
// Engine, comes back as the same Node with no new Machine, its kubelet renewing the
// Node's lease after the new boot, and kubeadm join has run once (cloud-init's instance did not
// change: nothing that must run once runs again).
func testReboot(t *testing.T, ctx context.Context, c *workloadCluster) {
	ws, err := w.workers(ctx, c.ns, c.name)
	if err != nil || len(ws) != 1 {
		t.Fatalf("want one worker: %v, %v", ws, err)
	}
	m := ws[0]
	id, nodeName := vmID(&m), m.Status.NodeRef.Name
	before, err := w.machineNames(ctx, c.ns, c.name)
	if err != nil {
		t.Fatal(err)
	}
	vm := w.ovirtVM(t, id)
	for _, how := range []struct {
		name string
		do   func() error
	}{
		{"rebooted through the Engine", func() error { _, err := vm.Reboot().Send(); return err }},
		{"stopped and started through the Engine", func() error {
			if _, err := vm.Stop().Send(); err != nil {
				return err
			}
			deadline := time.Now().Add(time.Minute)
			for {
				r, err := vm.Get().Send()
				if err != nil {
					return err
				}
				if r.MustVm().MustStatus() == ovirtsdk.VMSTATUS_DOWN {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("VM %s is still %s a minute after the stop", id, r.MustVm().MustStatus())
				}
				time.Sleep(time.Second)
			}
			_, err := vm.Start().Send()
			return err
		}},
	} {
		boots := w.powerOns(id)
		if err := how.do(); err != nil {
			t.Fatalf("%s: %v", how.name, err)
		}
		var booted time.Time
		eventually(t, ctx, "the worker's guest "+how.name+" booted again", 5*time.Minute, 2*time.Second, func(context.Context) error {
			if n := w.powerOns(id); n != boots+1 {
				return fmt.Errorf("%d boots, want %d", n, boots+1)
			}
			booted = time.Now()
			return nil
		})
		eventually(t, ctx, "the same Node is back after the worker was "+how.name, 5*time.Minute, 3*time.Second, func(ctx context.Context) error {
			lease, err := c.cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(booted) {
				return fmt.Errorf("Node %s's lease not renewed since the new boot (%v)", nodeName, lease.Spec.RenewTime)
			}
			if err := w.converged(c.ns, c.name, c.cs, 1, 1)(ctx); err != nil {
				return err
			}
			after, err := w.machineNames(ctx, c.ns, c.name)
			if err != nil {
				return err
			}
			if fmt.Sprint(after) != fmt.Sprint(before) {
				return fmt.Errorf("the Machines changed: %v, were %v", after, before)
			}
			return nil
		})
	}
	out, err := os.ReadFile(filepath.Join(w.vmsDir, id, "disk", "root-upper", "var", "log", "cloud-init-output.log"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "This node has joined the cluster"); n != 1 {
		t.Errorf("kubeadm join ran %d times on the worker, want once", n)
	}
}

// guestMemory is the memory a guest's cgroup holds (cgroup v1 memory.stat: total_rss and
// total_cache), in MiB, for the numbers of docs/benchmarks.md.
func guestMemory(id string) (rss, cache int) {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/memory", guestTree(), id, "memory.stat"))
	if len(dirs) == 0 {
		return -1, -1
	}
	b, err := os.ReadFile(dirs[0])
	if err != nil {
		return -1, -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		var v int
		if _, err := fmt.Sscanf(l, "total_rss %d", &v); err == nil {
			rss = v >> 20
		}
		if _, err := fmt.Sscanf(l, "total_cache %d", &v); err == nil {
			cache = v >> 20
		}
	}
	return rss, cache
}
