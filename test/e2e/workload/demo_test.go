//go:build linux

package workload_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capov/capov/test/envtest"
)

// TestDemoRealNodes is `DEMO_REAL_NODES=1 make demo`: the demo's cluster on real guests. It
// builds a cluster of one control plane and two workers from the default flavor, prints how to
// reach both API servers from the host (they live in the lab's network namespace), and keeps
// everything running until Ctrl-C (or, with DEMO_EXIT_WHEN_READY=1, returns once every Node
// is Ready). Skipped unless DEMO_REAL_NODES is set.
func TestDemoRealNodes(t *testing.T) {
	if os.Getenv("DEMO_REAL_NODES") == "" {
		t.Skip("DEMO_REAL_NODES=1 make demo runs it")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("DEMO_DIR")
	if dir == "" {
		dir = filepath.Join(".demo", "real-nodes-"+time.Now().Format("20060102-150405"))
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const ns, name = "demo", "demo"
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
	manifest, err := w.generateCluster(ctx, name, ns, "", 1, 2, w.flavorVars())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := w.applyYAML(ctx, ns, manifest); err != nil {
		t.Fatal(err)
	}
	logf("applied %s/cluster.yaml (clusterctl generate cluster %s, the default flavor, 1 control plane + 2 workers); waiting for every Node", dir, name)
	c := &workloadCluster{ns: ns, name: name}
	eventually(t, ctx, "the first control-plane Node is Ready", 15*time.Minute, 5*time.Second, func(ctx context.Context) error {
		cs, _, err := w.workloadClient(ctx, ns, name)
		if err != nil {
			return err
		}
		c.cs = cs
		return labKubeProxy(ctx, cs)
	})
	eventually(t, ctx, "every Node is Ready", 15*time.Minute, 5*time.Second, w.converged(ns, name, c.cs, 1, 2))

	mgmt := filepath.Join(dir, "management.kubeconfig")
	if b, err := os.ReadFile(filepath.Join(w.work, "stack", "kubeconfig")); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(mgmt, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{}
	if err := w.mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-kubeconfig"}, s); err != nil {
		t.Fatal(err)
	}
	wl := filepath.Join(dir, "workload.kubeconfig")
	if err := os.WriteFile(wl, s.Data["value"], 0o600); err != nil {
		t.Fatal(err)
	}
	enter := fmt.Sprintf("nsenter -t %d -n", os.Getpid())
	fmt.Printf(`
Every Node of the workload cluster %[1]s/%[2]s is Ready: real kubelets on the guests of CAPOV's VMs.
The API servers live in the lab's network namespace; from another shell on this host (as root):

  %[3]s kubectl --kubeconfig %[4]s get clusters,machines,capovm -A
  %[3]s kubectl --kubeconfig %[5]s get nodes -o wide
  %[3]s kubectl --kubeconfig %[5]s get pods -A
  %[3]s kubectl --kubeconfig %[4]s -n %[1]s scale machinedeployment %[2]s-md-0 --replicas=3

Each guest's console, cloud-init and service logs: %[6]s/<vm id>/ (console.log, disk/root-upper/var/log/).
Ctrl-C stops everything.
`, ns, name, enter, mgmt, wl, w.vmsDir)
	if os.Getenv("DEMO_EXIT_WHEN_READY") != "" {
		return
	}
	<-ctx.Done()
	logf("stopping")
}
