//go:build linux

package workload_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestKubeVipFlavor follows quick_start with the kube-vip flavor: no load balancer, the
// control-plane endpoint is a free lab address that kube-vip (a static pod the flavor writes)
// holds on the control-plane VM with ARP. The workload API server answers on that address,
// both Nodes become Ready with CAPOV's providerIDs, and the deleted cluster leaves no guest.
func TestKubeVipFlavor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const ns, name = "kube-vip", "kv"
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
	vars := w.flavorVars()
	// Outside the lab's DHCP range (.10-.250), on the guests' subnet.
	vars["OVIRT_CONTROL_PLANE_ENDPOINT_HOST"] = w.lab.Prefix() + ".254"
	vars["KUBE_VIP_INTERFACE"] = "eth0"
	manifest, err := w.generateCluster(ctx, name, ns, "kube-vip", 1, 1, vars)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := w.applyYAML(ctx, ns, manifest); err != nil {
		t.Fatal(err)
	}
	c := &workloadCluster{ns: ns, name: name}
	eventually(t, ctx, "the workload API server answers on kube-vip's address", 15*time.Minute, 5*time.Second, func(ctx context.Context) error {
		cs, cfg, err := w.workloadClient(ctx, ns, name)
		if err != nil {
			return err
		}
		if cfg.Host != "https://"+vars["OVIRT_CONTROL_PLANE_ENDPOINT_HOST"]+":6443" {
			return errors.New("the kubeconfig names " + cfg.Host)
		}
		c.cs = cs
		return labKubeProxy(ctx, cs)
	})
	eventually(t, ctx, "every Node is Ready", 15*time.Minute, 5*time.Second, w.converged(ns, name, c.cs, 1, 1))
	logf("kube-vip flavor: all Nodes Ready %s after apply", time.Since(start).Round(time.Second))

	cl := &clusterv1.Cluster{}
	if err := w.mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err != nil {
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
}
