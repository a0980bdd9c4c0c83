//go:build linux

package workload_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// flavorRun is quick_start for one more flavor: one control plane and one worker from the
// flavor's file, the CNI from the ClusterResourceSet, both Nodes Ready with CAPOV's
// providerIDs, then cluster_deletion's check that no guest is left.
type flavorRun struct {
	ns, name, flavor string
	vars             map[string]string
	// endpoint checks the workload cluster's kubeconfig (where its API server is reached).
	endpoint func(cfg *rest.Config) error
	// ready runs once every Node is Ready, before the cluster is deleted.
	ready func(ctx context.Context, t *testing.T, cs kubernetes.Interface)
}

func (f flavorRun) run(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := w.namespace(ctx, f.ns); err != nil {
		t.Fatal(err)
	}
	crs, err := os.ReadFile(filepath.Join("testdata", "cni-flannel.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.applyYAML(ctx, f.ns, crs); err != nil {
		t.Fatal(err)
	}
	manifest, err := w.generateCluster(ctx, f.name, f.ns, f.flavor, 1, 1, f.vars)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := w.applyYAML(ctx, f.ns, manifest); err != nil {
		t.Fatal(err)
	}
	var cs kubernetes.Interface
	eventually(t, ctx, "the workload API server answers", 15*time.Minute, 5*time.Second, func(ctx context.Context) error {
		c, cfg, err := w.workloadClient(ctx, f.ns, f.name)
		if err != nil {
			return err
		}
		if f.endpoint != nil {
			if err := f.endpoint(cfg); err != nil {
				return err
			}
		}
		cs = c
		return labKubeProxy(ctx, cs)
	})
	eventually(t, ctx, "every Node is Ready", 15*time.Minute, 5*time.Second, w.converged(f.ns, f.name, cs, 1, 1))
	logf("%s flavor: all Nodes Ready %s after apply", f.flavor, time.Since(start).Round(time.Second))
	if f.ready != nil {
		f.ready(ctx, t, cs)
	}

	cl := &clusterv1.Cluster{}
	if err := w.mgmt.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: f.name}, cl); err != nil {
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

// TestKubeVipFlavor follows quick_start with the kube-vip flavor: no load balancer, the
// control-plane endpoint is a free lab address that kube-vip (a static pod the flavor writes)
// holds on the control-plane VM with ARP. The workload API server answers on that address,
// both Nodes become Ready with CAPOV's providerIDs, and the deleted cluster leaves no guest.
func TestKubeVipFlavor(t *testing.T) {
	vars := w.flavorVars()
	// Outside the lab's DHCP range (.10-.250), on the guests' subnet.
	vars["OVIRT_CONTROL_PLANE_ENDPOINT_HOST"] = w.lab.Prefix() + ".254"
	vars["KUBE_VIP_INTERFACE"] = "eth0"
	flavorRun{ns: "kube-vip", name: "kv", flavor: "kube-vip", vars: vars,
		endpoint: func(cfg *rest.Config) error {
			if want := "https://" + vars["OVIRT_CONTROL_PLANE_ENDPOINT_HOST"] + ":6443"; cfg.Host != want {
				return fmt.Errorf("the kubeconfig names %s, want kube-vip's %s", cfg.Host, want)
			}
			return nil
		}}.run(t)
}

// TestIgnitionFlavor follows quick_start with the ignition flavor on an Ignition template
// (OS type rhcos_x64): CABPK renders Ignition (format: ignition), CAPOV hands it to the Engine
// as the VM's custom script, the Engine merges its host-name entry in and puts it on the config
// drive, and the guest's Ignition writes the files, the user and kubeadm.service on the first
// boot; kubeadm init and join run from that unit. No guest runs cloud-init.
func TestIgnitionFlavor(t *testing.T) {
	vars := w.flavorVars()
	vars["OVIRT_TEMPLATE_NAME"] = ignitionTemplate
	flavorRun{ns: "ignition", name: "ign", flavor: "ignition", vars: vars,
		ready: func(ctx context.Context, t *testing.T, _ kubernetes.Interface) {
			machines, err := w.machines(ctx, "ignition", "ign")
			if err != nil {
				t.Fatal(err)
			}
			for i := range machines {
				id := vmID(&machines[i])
				console, err := os.ReadFile(filepath.Join(w.vmsDir, id, "console.log"))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(console), "Ignition: config applied") {
					t.Errorf("Machine %s: its guest did not run Ignition:\n%s", machines[i].Name, tail(string(console), 20))
				}
				upper := filepath.Join(w.vmsDir, id, "disk", "root-upper")
				if _, err := os.Stat(filepath.Join(upper, "var/lib/cloud/instance")); err == nil {
					t.Errorf("Machine %s: cloud-init ran on an Ignition guest", machines[i].Name)
				}
				if _, err := os.Stat(filepath.Join(upper, "etc/systemd/system/kubeadm.service")); err != nil {
					t.Errorf("Machine %s: CABPK's kubeadm.service is not on the disk: %v", machines[i].Name, err)
				}
			}
		}}.run(t)
}
