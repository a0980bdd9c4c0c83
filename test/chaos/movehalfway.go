package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// unreachableEngine is the Engine URL the target's OVirtProvider has while it is not Ready in
// runMoveHalfWay: nothing listens there (the target cannot reach the Engine yet).
const unreachableEngine = "https://127.0.0.1:1/ovirt-engine/api"

// movedAddresses is the invariant of a moved static-IP machine.
const movedAddresses = "a moved static-IP machine keeps its address, and no other machine gets it"

// noUnpause is the name of the target's admission policy that refuses to unpause a Cluster.
const noUnpause = "chaos-move-half-way"

// runMoveHalfWay moves a cluster whose workers have static addresses with clusterctl while the
// source's OVirtProvider has spec.orphanedVMs: Delete, and the move fails half-way: the target's
// API server refuses clusterctl's last step, unpausing the Cluster, so that the objects are gone
// from the source while the target's Cluster stays paused (its IPAM provider re-allocates
// nothing, its manager adopts nothing); the target's OVirtProvider cannot reach the Engine (not
// Ready); one moved VM is down. All of it lasts several times the source's grace period. Nothing
// may be removed or stopped (issue 32, defect 1). Then the target is mended as an operator
// would (the Cluster unpaused, the provider pointed at the Engine): it adopts every VM, and
// each machine keeps its address.
func runMoveHalfWay(ctx context.Context, r *Run) error {
	if err := r.NewCluster(ctx); err != nil {
		return err
	}
	w := r.W
	ns := r.Namespace()
	restore, err := removeOrphansSoon(ctx, r)
	defer restore()
	if err != nil {
		return err
	}
	mv, err := beginMove(ctx, r, true)
	if mv == nil {
		return err
	}
	defer mv.done()
	// Two more workers of the MachineDeployment, whose NICs take pool addresses.
	if err := r.Driver.scaleBy(ctx, 2); err != nil {
		return err
	}
	if _, err := r.Driver.WaitConverged(ctx, w.Cfg.Bound); err != nil {
		r.Violate("converge", Converge, fmt.Sprintf("not converged before the move: %v", err), "namespace "+ns)
		return r.Finish(ctx)
	}
	if err := waitMovable(ctx, r); err != nil {
		return err
	}
	mv.before = vmsOf(w, ns)
	before, target, from, to := mv.before, mv.target, mv.from, mv.to
	addresses, err := staticAddresses(ctx, r, before)
	if err != nil {
		return err
	}
	tc := &Cluster{NS: ns, Name: r.Cluster.Name, MD: r.Cluster.MD, C: target.Env.Client, w: w}
	if err := refuseUnpause(ctx, tc.C); err != nil {
		return err
	}

	// The move, with the target's OVirtProvider unable to reach the Engine; it retries the
	// refused unpause until it is given up below.
	moveCtx, stopMove := context.WithCancel(ctx)
	defer stopMove()
	moveErr := make(chan error, 1)
	moved := time.Now()
	go func() {
		moveErr <- from.ObjectMover().Move(moveCtx, ns, to, false, func(u *unstructured.Unstructured) error {
			if u.GetKind() == "OVirtProvider" {
				return unstructured.SetNestedField(u.Object, unreachableEngine, "spec", "engine")
			}
			return nil
		})
	}()
	// Half-way: every object has left the source.
	if err := poll(ctx, w.Cfg.Bound, 250*time.Millisecond, func() (bool, error) {
		oms := &infrav1.OVirtMachineList{}
		if err := w.C.List(ctx, oms, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return len(oms.Items) == 0, nil
	}); err != nil {
		stopMove()
		return fmt.Errorf("the objects did not leave the source: %w (clusterctl move: %w)", err, <-moveErr)
	}
	r.Note("clusterctl move deleted the source's objects %s after it started; the target refuses to unpause the Cluster", time.Since(moved).Round(100*time.Millisecond))
	if err := powerOffOne(ctx, r, before); err != nil {
		return err
	}
	halfWay := time.Now()
	sleep(ctx, moveLateWait)
	stopMove()
	if err := <-moveErr; err == nil {
		r.Violate("move-half-way", "the scenario's premise", "clusterctl move succeeded although the target refused to unpause the Cluster", "namespace "+ns)
	} else {
		r.Note("clusterctl move failed half-way, as intended: %s", firstLine(err))
	}
	checkHalfWay(ctx, r, tc, before, halfWay)

	// The operator mends the target: the Cluster unpaused, the provider pointed at the Engine.
	if err := tc.C.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: noUnpause}}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := tc.C.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: noUnpause}}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	checkMovedSecret(ctx, r, tc.C)
	if err := poll(ctx, time.Minute, 250*time.Millisecond, func() (bool, error) {
		p := &infrav1.OVirtProvider{}
		if err := tc.C.Get(ctx, client.ObjectKey{Name: ProviderName}, p); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		base := p.DeepCopy()
		p.Spec.Engine = w.EngineURL
		return tc.C.Patch(ctx, p, client.MergeFrom(base)) == nil, nil
	}); err != nil {
		return fmt.Errorf("pointing the target's OVirtProvider at the Engine: %w", err)
	}
	// The unpause is retried until the policy's removal reached the API server's admission.
	if err := tc.SetPaused(ctx, false); err != nil {
		return fmt.Errorf("unpausing the Cluster in the target: %w", err)
	}
	r.Healed = time.Now()
	if err := poll(ctx, w.Cfg.Bound, 250*time.Millisecond, func() (bool, error) {
		ready, err := tc.ReadyMachines(ctx)
		return err == nil && len(ready) == len(before), err
	}); err != nil {
		r.Violate("move-half-way-target", Converge, fmt.Sprintf("the target did not bring the %d moved machines to Ready within %s once mended: %v",
			len(before), w.Cfg.Bound, err), "namespace "+ns)
	} else {
		r.res.Converge = time.Since(r.Healed)
		checkAddressesKept(ctx, r, tc, addresses)
	}
	clean, err := tc.Delete(ctx, w.Cfg.Bound)
	r.res.Clean = clean
	w.Watcher.ScanLogs()
	w.Watcher.ScanEventsAndMetrics(ctx)
	return err
}

// staticAddresses returns the pool address of every moved machine, VM id -> address; at least
// one machine must have one (the scenario is about static addresses).
func staticAddresses(ctx context.Context, r *Run, before map[string]string) (map[string]string, error) {
	oms, err := r.Cluster.OVirtMachines(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, om := range oms {
		if _, ok := before[om.Status.VMID]; !ok {
			continue
		}
		for _, a := range om.Status.Addresses {
			if strings.HasPrefix(a.Address, "10.50.0.") {
				out[om.Status.VMID] = a.Address
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no moved machine has a static address from the pool")
	}
	r.Note("%d of the %d moved machines have static addresses", len(out), len(before))
	return out, nil
}

// refuseUnpause makes the target's API server refuse to unpause a Cluster (as a move that fails
// at its last step leaves it), until the policy is deleted.
func refuseUnpause(ctx context.Context, c client.Client) error {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: noUnpause},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{clusterv1.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"clusters"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!(has(oldObject.spec.paused) && oldObject.spec.paused) || (has(object.spec.paused) && object.spec.paused)",
				Message:    "the chaos scenario keeps this Cluster paused (a clusterctl move failed half-way)",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: noUnpause},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: noUnpause, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := createRetrying(ctx, c, o); err != nil {
			return fmt.Errorf("creating the target's admission policy: %w", err)
		}
	}
	// The API server loads a policy asynchronously; clusterctl reaches the unpause only after
	// pausing, waiting for the move to be unblocked and creating every object, but let it settle.
	sleep(ctx, 2*time.Second)
	return nil
}

// checkHalfWay checks what the half-way state must be (the target's Cluster paused, its
// provider not Ready) and that nothing removed or stopped a moved VM since the move started.
func checkHalfWay(ctx context.Context, r *Run, tc *Cluster, before map[string]string, since time.Time) {
	w := r.W
	c := &clusterv1.Cluster{}
	if err := tc.C.Get(ctx, client.ObjectKey{Namespace: tc.NS, Name: tc.Name}, c); err != nil || !ptr.Deref(c.Spec.Paused, false) {
		r.Violate("move-half-way-paused", "the scenario's premise", fmt.Sprintf("the target's Cluster is not paused half-way (err %v)", err), "Cluster "+tc.NS+"/"+tc.Name)
	}
	p := &infrav1.OVirtProvider{}
	if err := tc.C.Get(ctx, client.ObjectKey{Name: ProviderName}, p); err != nil || conditions.IsTrue(p, infrav1.ReadyCondition) {
		r.Violate("move-half-way-provider", "the scenario's premise", fmt.Sprintf("the target's OVirtProvider is Ready or missing half-way (err %v)", err), "OVirtProvider "+ProviderName)
	} else {
		r.Note("the target's OVirtProvider is not Ready half-way: %s", conditions.GetReason(p, infrav1.ReadyCondition))
	}
	for _, wr := range w.Watcher.Writes(since) {
		if _, ok := before[wr.VMID]; !ok {
			continue
		}
		t := wr.Method + " " + wr.Template
		if wr.Method == "DELETE" || strings.HasSuffix(t, "/stop") || strings.HasSuffix(t, "/shutdown") {
			r.Violate("move-half-way|"+wr.VMID, I2, fmt.Sprintf("while the move was half-way, %s removed or stopped moved VM %s (%s)", t, wr.VMID, before[wr.VMID]), "VM "+wr.VMID)
		}
	}
	for id, name := range before {
		if _, ok := w.Sim.VM(id); !ok {
			r.Violate("move-half-way-lost|"+id, "clusterctl move keeps every VM", fmt.Sprintf("VM %s (%s) was removed while the move was half-way", id, name), "VM "+id)
		}
	}
	src := &infrav1.OVirtProvider{}
	if err := w.C.Get(ctx, client.ObjectKey{Name: ProviderName}, src); err == nil {
		r.Note("the source's OrphanedVMs condition half-way: %s: %s", conditions.GetReason(src, infrav1.OrphanedVMsCondition),
			firstLine(errors.New(conditions.GetMessage(src, infrav1.OrphanedVMsCondition))))
	}
}

// checkAddressesKept checks that every adopted machine has the address its VM had before the
// move, and no other machine has it.
func checkAddressesKept(ctx context.Context, r *Run, tc *Cluster, addresses map[string]string) {
	ready, err := tc.ReadyMachines(ctx)
	if err != nil {
		r.Note("listing the target's machines: %v", err)
		return
	}
	holders := map[string][]string{}
	for _, om := range ready {
		for _, a := range om.Status.Addresses {
			if strings.HasPrefix(a.Address, "10.50.0.") {
				holders[a.Address] = append(holders[a.Address], om.Name)
			}
		}
		want, ok := addresses[om.Status.VMID]
		if ok && !slices.ContainsFunc(om.Status.Addresses, func(a clusterv1.MachineAddress) bool { return a.Address == want }) {
			r.Violate("move-half-way-address|"+om.Name, movedAddresses, fmt.Sprintf("moved machine %s lost its address %s: addresses %v", om.Name, want, om.Status.Addresses),
				"OVirtMachine "+tc.NS+"/"+om.Name)
		}
	}
	for addr, names := range holders {
		if len(names) > 1 {
			r.Violate("move-half-way-conflict|"+addr, movedAddresses, fmt.Sprintf("machines %v share the address %s after the move", names, addr), "namespace "+tc.NS)
		}
	}
	r.Note("the target adopted all %d VMs; the %d static addresses stayed with their machines", len(ready), len(addresses))
}

// firstLine is an error's first line (clusterctl's wrap chains are long).
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
