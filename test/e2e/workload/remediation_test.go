//go:build linux

package workload_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// testRebootRemediation: the workers' MachineHealthCheck is given an OVirtRemediationTemplate
// (remediation by reboot, as the gpu flavors do); the worker's kubelet is stopped on the VM; its
// Node goes NotReady, Cluster API's MachineHealthCheck creates an OVirtRemediation, CAPOV reboots
// the VM through the Engine, the kubelet comes back with the boot, the MachineHealthCheck
// deletes the request, and the Machine, its VM and its Node are the same: nothing was replaced.
func testRebootRemediation(t *testing.T, ctx context.Context, c *workloadCluster) {
	// What an earlier step left must be healthy first (a Node still Unknown after its reboots):
	// the MachineHealthCheck would otherwise ask for a reboot as soon as it has the template, for
	// that Node, and the reboot starts again the kubelet this step stops, so that no request
	// follows (a CI run saw it).
	eventually(t, ctx, "the cluster converged and every Machine passes its health check", 5*time.Minute, 2*time.Second, func(ctx context.Context) error {
		if err := w.converged(c.ns, c.name, c.cs, 1, 1)(ctx); err != nil {
			return err
		}
		machines, err := w.machines(ctx, c.ns, c.name)
		if err != nil {
			return err
		}
		for _, m := range machines {
			if !meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition) {
				return fmt.Errorf("Machine %s: %s is not True", m.Name, clusterv1.MachineHealthCheckSucceededCondition)
			}
		}
		return nil
	})
	ws, err := w.workers(ctx, c.ns, c.name)
	if err != nil || len(ws) != 1 {
		t.Fatalf("want one worker: %v, %v", ws, err)
	}
	m := ws[0]
	id := vmID(&m)
	rt := &infrav1.OVirtRemediationTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name + "-reboot"},
		Spec: infrav1.OVirtRemediationTemplateSpec{Template: infrav1.OVirtRemediationTemplateResource{Spec: infrav1.OVirtRemediationSpec{
			Strategy: &infrav1.RemediationStrategy{Type: infrav1.RemediationStrategyReboot, RetryLimit: ptr.To[int32](1), Timeout: &metav1.Duration{Duration: 5 * time.Minute}},
		}}}}
	if err := w.mgmt.Create(ctx, rt); err != nil {
		t.Fatal(err)
	}
	mhc := &clusterv1.MachineHealthCheck{}
	if err := w.mgmt.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: c.name + "-md-0"}, mhc); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(mhc.DeepCopy())
	mhc.Spec.Remediation.TemplateRef = clusterv1.MachineHealthCheckRemediationTemplateReference{
		APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtRemediationTemplate", Name: rt.Name}
	if err := w.mgmt.Patch(ctx, mhc, patch); err != nil {
		t.Fatal(err)
	}
	boots := w.powerOns(id)
	if err := guestSystemctl(ctx, id, "stop", "kubelet"); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the MachineHealthCheck asked CAPOV to reboot the worker", 5*time.Minute, 2*time.Second, func(ctx context.Context) error {
		rem := &infrav1.OVirtRemediation{}
		if err := w.mgmt.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: m.Name}, rem); err != nil {
			return err
		}
		if len(rem.Status.Attempts) == 0 || rem.Status.Attempts[0].Action != infrav1.RemediationActionReboot {
			return fmt.Errorf("no reboot attempt yet: %+v", rem.Status)
		}
		return nil
	})
	eventually(t, ctx, "the worker's guest booted again", 5*time.Minute, 2*time.Second, func(context.Context) error {
		if n := w.powerOns(id); n <= boots {
			return fmt.Errorf("%d boots, want more than %d", n, boots)
		}
		return nil
	})
	eventually(t, ctx, "the Node is Ready again and the request deleted, with the same Machine", 10*time.Minute, 3*time.Second, func(ctx context.Context) error {
		err := w.mgmt.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: m.Name}, &infrav1.OVirtRemediation{})
		if err == nil {
			return fmt.Errorf("OVirtRemediation %s still exists", m.Name)
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		if err := w.converged(c.ns, c.name, c.cs, 1, 1)(ctx); err != nil {
			return err
		}
		now, err := w.workers(ctx, c.ns, c.name)
		if err != nil {
			return err
		}
		if len(now) != 1 || now[0].UID != m.UID || vmID(&now[0]) != id {
			return fmt.Errorf("the worker was replaced: %s (%s), was %s (%s)", now[0].Name, vmID(&now[0]), m.Name, id)
		}
		return nil
	})
}
