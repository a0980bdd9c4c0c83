//go:build linux

package workload_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// applyYAML creates every object of a multi-document YAML in ns (objects without a namespace
// of their own get ns).
func (wd *world) applyYAML(ctx context.Context, ns string, data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		if err := capiDefaults(ctx, wd.mgmt.Scheme(), u); err != nil {
			return out, err
		}
		if err := labPreflight(u); err != nil {
			return out, err
		}
		if err := wd.mgmt.Create(ctx, u); err != nil {
			return out, fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		out = append(out, u)
	}
}

// workloadClient reaches a workload cluster through the kubeconfig Secret CAPI wrote.
func (wd *world) workloadClient(ctx context.Context, ns, cluster string) (kubernetes.Interface, *rest.Config, error) {
	s := &corev1.Secret{}
	if err := wd.mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster + "-kubeconfig"}, s); err != nil {
		return nil, nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["value"])
	if err != nil {
		return nil, nil, err
	}
	cfg.Timeout = 30 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	return cs, cfg, err
}

// eventually polls check every interval until it returns nil or timeout passes; the last error
// is reported, with what progress said.
func eventually(t *testing.T, ctx context.Context, what string, timeout, interval time.Duration, check func(context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	start := time.Now()
	var last error
	for {
		if last = check(ctx); last == nil {
			logf("%s after %s", what, time.Since(start).Round(time.Second))
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			wd := w
			wd.dumpGuests(t)
			wd.dumpMachines(t)
			t.Fatalf("%s: not within %s: %v", what, timeout, last)
		}
		time.Sleep(interval)
	}
}

// dumpMachines writes what `kubectl get machines,capovm -A -o yaml` would tell an operator about
// each Machine and OVirtMachine: deletion, finalizers and the conditions that are not True.
func (wd *world) dumpMachines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, gvk := range []schema.GroupVersionKind{
		clusterv1.GroupVersion.WithKind("MachineList"),
		{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "OVirtMachineList"},
	} {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk)
		if err := wd.mgmt.List(ctx, l); err != nil {
			t.Logf("=== %s: %v", gvk.Kind, err)
			continue
		}
		for _, o := range l.Items {
			var b strings.Builder
			fmt.Fprintf(&b, "=== %s %s/%s", strings.TrimSuffix(gvk.Kind, "List"), o.GetNamespace(), o.GetName())
			if d := o.GetDeletionTimestamp(); d != nil {
				fmt.Fprintf(&b, " deleting since %s", d.UTC().Format(time.RFC3339))
			}
			fmt.Fprintf(&b, " finalizers %v", o.GetFinalizers())
			if phase, _, _ := unstructured.NestedString(o.Object, "status", "phase"); phase != "" {
				fmt.Fprintf(&b, " phase %s", phase)
			}
			conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["status"] != "True" {
					fmt.Fprintf(&b, "\n    %v=%v %v: %v", m["type"], m["status"], m["reason"], m["message"])
				}
			}
			t.Log(b.String())
		}
	}
}

// dumpGuests writes each guest's console and the tail of its logs to the test log.
func (wd *world) dumpGuests(t *testing.T) {
	vms, _ := os.ReadDir(wd.vmsDir)
	for _, vm := range vms {
		dir := filepath.Join(wd.vmsDir, vm.Name())
		b, _ := os.ReadFile(filepath.Join(dir, "console.log"))
		t.Logf("=== console of VM %s\n%s", vm.Name(), tail(string(b), 60))
		logs, _ := filepath.Glob(filepath.Join(dir, "disk/root-upper/var/log/guest-init/*.log"))
		logs = append(logs, filepath.Join(dir, "disk/root-upper/var/log/cloud-init-output.log"))
		for _, l := range logs {
			b, err := os.ReadFile(l)
			if err == nil {
				t.Logf("=== %s\n%s", strings.TrimPrefix(l, dir+"/"), tail(string(b), 40))
			}
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// conditionTrue reports whether a v1beta2 condition of a CAPI object is True.
func conditionTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// clusterAvailable checks the Cluster's Available condition.
func (wd *world) clusterAvailable(ns, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		c := &clusterv1.Cluster{}
		if err := wd.mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		if !conditionTrue(c.Status.Conditions, clusterv1.AvailableCondition) {
			for _, cond := range c.Status.Conditions {
				if cond.Type == clusterv1.AvailableCondition {
					return fmt.Errorf("Cluster %s/%s Available=%s %s: %s", ns, name, cond.Status, cond.Reason, cond.Message)
				}
			}
			return fmt.Errorf("Cluster %s/%s has no Available condition yet", ns, name)
		}
		return nil
	}
}

// machines lists a cluster's Machines.
func (wd *world) machines(ctx context.Context, ns, cluster string) ([]clusterv1.Machine, error) {
	l := &clusterv1.MachineList{}
	if err := wd.mgmt.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// ignoreNotFound turns NotFound into nil.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
