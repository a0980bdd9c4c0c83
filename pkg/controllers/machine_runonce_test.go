package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// TestAVMStartsWithItsBootstrapDataForThatRunOnly: the bootstrap data goes to the VM's start
// (run once) and never onto the VM, so there is nothing to clear later; a VM that stores a
// script of its own, a machine whose Node registered, and --keep-bootstrap-data start plainly.
func TestAVMStartsWithItsBootstrapDataForThatRunOnly(t *testing.T) {
	ctx := context.Background()
	scope := func(f *machineFixture, vm ovirt.VM) *machineScope {
		machine := &clusterv1.Machine{}
		NewWithT(t).Expect(f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w-1"}, machine)).To(Succeed())
		stored := f.ov.PutVM(vm)
		return &machineScope{log: ctrl.Log, om: f.get(t), machine: machine, ovirt: f.ov, vm: &stored}
	}
	t.Run("not registered yet: run once with the data", func(t *testing.T) {
		g := NewWithT(t)
		f := newMachineFixture(t)
		s := scope(f, ovirt.VM{ID: "vm-1", Status: ovirt.VMStatusDown})
		done, _, err := f.r.reconcilePower(ctx, s)
		g.Expect(done, err).To(BeFalse())
		script, ok := f.ov.RunOnceScript("vm-1")
		g.Expect(ok).To(BeTrue())
		sec := &corev1.Secret{}
		g.Expect(f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w-1-bootstrap"}, sec)).To(Succeed())
		g.Expect(script).To(ContainSubstring(string(sec.Data["value"])[len("#cloud-config\n"):]), "the bootstrap data, as rendered for the Engine")
		g.Expect(f.ov.CallCount("Power")).To(BeZero())
		g.Expect(s.om.Status.BootstrapDataCleared).To(HaveValue(BeTrue()), "nothing stored: nothing to clear")
		g.Expect(f.events()).NotTo(ContainElement(ContainSubstring(script)), "the data is never in an event")
	})
	for _, tc := range []struct {
		name  string
		vm    ovirt.VM
		setup func(*machineFixture, *machineScope)
	}{
		{"the VM stores a script of its own", ovirt.VM{ID: "vm-1", Status: ovirt.VMStatusDown, CustomScriptStored: true}, nil},
		{"the Node registered", ovirt.VM{ID: "vm-1", Status: ovirt.VMStatusDown}, func(_ *machineFixture, s *machineScope) {
			v1beta1conditions.MarkTrue(s.om, infrav1.K8sProviderIDSetupCondition)
		}},
		{"provisioned", ovirt.VM{ID: "vm-1", Status: ovirt.VMStatusDown}, func(_ *machineFixture, s *machineScope) {
			s.om.Status.Initialization.Provisioned = ptr.To(true)
		}},
		{"--keep-bootstrap-data", ovirt.VM{ID: "vm-1", Status: ovirt.VMStatusDown}, func(f *machineFixture, _ *machineScope) {
			f.r.KeepBootstrapData = true
		}},
	} {
		t.Run(tc.name+": a plain start", func(t *testing.T) {
			g := NewWithT(t)
			f := newMachineFixture(t)
			s := scope(f, tc.vm)
			if tc.setup != nil {
				tc.setup(f, s)
			}
			done, _, err := f.r.reconcilePower(ctx, s)
			g.Expect(done, err).To(BeFalse())
			g.Expect(f.ov.CallCount("Power")).To(Equal(1))
			g.Expect(f.ov.CallCount("RunOnce")).To(BeZero())
			g.Expect(s.om.Status.BootstrapDataCleared).To(BeNil())
		})
	}
	t.Run("the bootstrap Secret is gone before the first start: a condition, no start", func(t *testing.T) {
		g := NewWithT(t)
		f := newMachineFixture(t)
		s := scope(f, ovirt.VM{ID: "vm-1", Status: ovirt.VMStatusDown})
		sec := &corev1.Secret{}
		g.Expect(f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w-1-bootstrap"}, sec)).To(Succeed())
		g.Expect(f.c.Delete(ctx, sec)).To(Succeed())
		done, res, err := f.r.reconcilePower(ctx, s)
		g.Expect(done, err).To(BeFalse())
		g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
		g.Expect(f.ov.CallCount("Power") + f.ov.CallCount("RunOnce")).To(BeZero())
		g.Expect(v1beta1conditions.GetReason(s.om, infrav1.MachineOnCondition)).To(Equal(infrav1.WaitingForBootstrapDataReason))
	})
}

// TestKeepBootstrapDataStoresItOnTheVM: with --keep-bootstrap-data the data goes onto the VM at
// creation, as before run once.
func TestKeepBootstrapDataStoresItOnTheVM(t *testing.T) {
	g := NewWithT(t)
	f := newMachineFixture(t)
	f.r.KeepBootstrapData = true
	var sent *ovirt.VMSpec
	f.ov.CreateVMFunc = func(ctx context.Context, spec ovirt.VMSpec) (*ovirt.VM, error) {
		sent = &spec
		f.ov.CreateVMFunc = nil
		return f.ov.CreateVM(ctx, spec)
	}
	for range 5 {
		if sent != nil {
			break
		}
		_, err := f.reconcile(t)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(sent).NotTo(BeNil())
	g.Expect(sent.CustomScript).NotTo(BeEmpty())
}

// TestAnEventRacingTheStatusOfAReadCostsNoSecondRead: the VM read that finds it up is followed
// at once by another event (its Node registering) whose reconcile still sees the status from
// before that read (the cache has not caught up): it waits for the status instead of reading
// the VM again.
func TestAnEventRacingTheStatusOfAReadCostsNoSecondRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	for range 20 {
		if f.ov.CallCount("RunOnce") > 0 {
			break
		}
		res, err := f.reconcile(t)
		if err != nil && !strings.Contains(err.Error(), errNoNodeStep) {
			t.Fatal(err)
		}
		f.now = f.now.Add(max(res.RequeueAfter, time.Second))
	}
	g.Expect(f.ov.CallCount("RunOnce")).To(Equal(1))
	stale := f.get(t)
	g.Expect(v1beta1conditions.GetReason(stale, infrav1.MachineOnCondition)).To(Equal(infrav1.VMPoweringUpReason))

	// The scheduled read finds the VM up.
	_, err := f.reconcile(t)
	g.Expect(err == nil || strings.Contains(err.Error(), errNoNodeStep)).To(BeTrue())
	reads := f.ov.CallCount("GetVM")
	g.Expect(v1beta1conditions.IsTrue(f.get(t), infrav1.MachineOnCondition)).To(BeTrue())

	// An event right after, on the status from before the read.
	cur := f.get(t)
	stale.ResourceVersion = cur.ResourceVersion
	g.Expect(f.c.Status().Update(ctx, stale)).To(Succeed())
	f.now = f.now.Add(100 * time.Millisecond)
	res, err := f.reconcile(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.ov.CallCount("GetVM")).To(Equal(reads), "no second read")
	g.Expect(res.RequeueAfter).To(And(BeNumerically(">", 0), BeNumerically("<=", time.Second)))
}
