package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

const baselineName = "baseline"

// Scenarios returns every scenario in run order, the fault-free baseline first (it measures
// the reference rates of I6 and the footprint of I8).
func Scenarios() []Scenario {
	return []Scenario{
		{Name: baselineName, Fault: "none: the fault-free reference of I6 and I8", Short: true, Run: runBaseline},
		{Name: "engine-errors", Fault: "10-30% Engine errors (500 or 503) on every write path (POST/PUT/DELETE under /vms and /disks)", Short: true,
			Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, engineErrors) }},
		{Name: "engine-hangs", Fault: "10% of all oVirt calls hang past the manager's --ovirt-timeout (then the Engine does the work)",
			Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, engineHangs) }},
		{Name: "execute-then-fail", Fault: "the Engine creates the VM, updates the disk or removes the VM, then answers 503 or drops the connection (30-60%)", Short: true,
			Defects: []int{4}, Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, executeThenFail) }},
		{Name: "manager-sigkill", Fault: "the manager is killed (SIGKILL) while a create, then a delete, is in flight, and restarted", Short: true,
			Defects: []int{4}, Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, managerSignal(syscall.SIGKILL)) }},
		{Name: "manager-sigterm", Fault: "the manager is stopped (SIGTERM) while a create, then a delete, is in flight, and restarted",
			Defects: []int{4}, Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, managerSignal(syscall.SIGTERM)) }},
		{Name: "leader-loss", Fault: "two managers with leader election; the leader is frozen (SIGSTOP) past its lease, then resumed (SIGCONT)", Defects: []int{4},
			Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, leaderLoss) }},
		{Name: "status-patch-errors", Fault: "the management API server answers 500 or 429 to 20-40% of the manager's PATCH .../status (a proxy)",
			Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, statusPatchErrors) }},
		{Name: "webhook-down", Fault: "the admission webhook is stopped mid-create and mid-delete", Short: true, Defects: []int{7},
			Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, webhookDown) }},
		{Name: "engine-restart", Fault: "the Engine restarts three times: every SSO token becomes invalid",
			Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, engineRestart) }},
		{Name: "password-rotation", Fault: "the Engine password is rotated; the Secret gets the new one 3-6 s later", Defects: []int{8},
			Run: runPasswordRotation},
		{Name: "secret-deleted", Fault: "the credentials Secret is deleted and recreated 3-6 s later", Defects: []int{8},
			Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, secretDeleted) }},
		{Name: "provider-deleted", Fault: "the OVirtProvider is deleted while machines use it", Defects: []int{3},
			Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, providerDeleted) }},
		{Name: "vm-deleted-out-of-band", Fault: "VMs of Ready machines are removed in oVirt behind the manager's back", Defects: []int{5},
			Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, vmDeletedOutOfBand) }},
		{Name: "disk-attached-out-of-band", Fault: "a CSI disk is attached to VMs of Ready machines, which are then deleted", Short: true, Defects: []int{2},
			Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, diskAttachedOutOfBand) }},
		{Name: "vm-powered-off-out-of-band", Fault: "VMs are powered off in oVirt; one also gets a CSI disk and loses its status (a restore)", Defects: []int{2},
			Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, vmPoweredOffOutOfBand) }},
		{Name: "clusterctl-move", Fault: "clusterctl move to a second management cluster sharing the Engine, then deletion there", Defects: []int{1, 3},
			Run: runMove},
		{Name: "clusterctl-move-target-late", Fault: "clusterctl move with spec.orphanedVMs: Delete while the target's manager is frozen past the source's grace period (one moved VM down)",
			Run: runMoveTargetLate},
		{Name: "clusterctl-move-half-way", Fault: "clusterctl move of static-IP workers with spec.orphanedVMs: Delete fails half-way (the target refuses to unpause the Cluster) while the target's provider cannot reach the Engine, past the source's grace period (one moved VM down)",
			Run: runMoveHalfWay},
		{Name: "restore-static-ip", Fault: "a running static-IP Ignition worker restored as a backup restore leaves it: the Cluster paused, the OVirtMachine's status and its IPAddressClaim lost, the Cluster unpaused",
			Run: runRestoreStaticIP},
		{Name: "hostile-management-cluster", Fault: "a second management cluster on the Engine creates a Cluster of the same name, objects named like the victims with their providerIDs, a worker that wants their group and one that names it, then deletes them",
			Run: runHostileManagement},
		{Name: "cluster-paused-mid-delete", Fault: "the Cluster is paused while its machines are being deleted, then unpaused", Short: true,
			Run: runPausedMidDelete},
		{Name: "foreign-vms", Fault: "foreign VMs: one named like a machine, one named by a crafted providerID, a copied object with another machine's providerID", Defects: []int{1},
			Run: runForeignVMs},
		{Name: "owner-machine-gone", Fault: "the owner Machine disappears (finalizer removed by hand) before its OVirtMachine is deleted", Defects: []int{5},
			Run: runOwnerMachineGone},
		{Name: "engine-switched", Fault: "the OVirtProvider is pointed at another Engine (another simulator) while its machines are deleted, then back", Defects: []int{11},
			Run: runEngineSwitched},
		{Name: "vm-never-stops", Fault: "a VM being deleted ignores the shutdown and every stop fails: CAPOV must back off and say so", Defects: []int{9},
			Run: runVMNeverStops},
		{Name: "mixed", Fault: "a seeded mix of the faults above, one every 2-4 s", Defects: []int{2, 4, 7, 8},
			Run: func(ctx context.Context, r *Run) error { return r.Standard(ctx, mixed) }},
	}
}

// runBaseline runs the driver without faults and records the reference rates and footprint.
func runBaseline(ctx context.Context, r *Run) error {
	if err := r.Standard(ctx, nil); err != nil {
		return err
	}
	w := r.W
	w.Baseline.PathRate = PathRates(w.Sim.RequestLog(), r.Start, time.Now(), w.Cfg.RateWindow)
	// Let the last deletions' goroutines end before taking the footprint.
	sleep(ctx, 3*time.Second)
	m, err := w.ManagerMetrics(ctx)
	if err != nil {
		return err
	}
	g, _ := MetricValue(m, "go_goroutines")
	w.Baseline.Goroutines = int(g)
	if w.Baseline.FDs, err = OpenFDs(w.Stack.Manager.PID()); err != nil {
		return err
	}
	r.Note("baseline footprint: %d goroutines, %d open file descriptors", w.Baseline.Goroutines, w.Baseline.FDs)
	return nil
}

func engineErrors(_ context.Context, r *Run) (func(context.Context) error, error) {
	rate := 0.1 + 0.2*r.Rnd.Float64()
	status := []int{500, 503}[r.Rnd.IntN(2)]
	var rules []ovirtsim.FaultRule
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		for _, p := range []string{"/vms*", "/disks*"} {
			rules = append(rules, ovirtsim.FaultRule{Method: m, Path: p, Status: status, Rate: rate})
		}
	}
	r.W.Sim.SetFaults(rules...)
	r.Note("Engine answers %d to %.0f%% of POST/PUT/DELETE under /vms and /disks", status, rate*100)
	return healFaults(r), nil
}

func healFaults(r *Run) func(context.Context) error {
	return func(context.Context) error {
		r.W.Sim.SetFaults()
		r.Healed = time.Now()
		return nil
	}
}

func engineHangs(_ context.Context, r *Run) (func(context.Context) error, error) {
	hang := OVirtTimeout + 2*time.Second
	r.W.Sim.SetFaults(ovirtsim.FaultRule{Path: "*", Rate: 0.1, Hang: hang})
	r.Note("10%% of all calls (SSO included) hang %s, past --ovirt-timeout=%s", hang, OVirtTimeout)
	return healFaults(r), nil
}

func executeThenFail(_ context.Context, r *Run) (func(context.Context) error, error) {
	rate := 0.3 + 0.3*r.Rnd.Float64()
	r.W.Sim.SetFaults(
		ovirtsim.FaultRule{Method: "POST", Path: "/vms", Status: 503, Rate: rate, After: true},
		ovirtsim.FaultRule{Method: "PUT", Path: "/vms/{id}/diskattachments/{id}", Rate: rate, After: true, Mode: ovirtsim.FaultModeDrop},
		ovirtsim.FaultRule{Method: "PUT", Path: "/disks/{id}", Rate: rate, After: true, Mode: ovirtsim.FaultModeDrop},
		ovirtsim.FaultRule{Method: "DELETE", Path: "/vms/{id}", Status: 503, Rate: rate, After: true},
	)
	r.Note("%.0f%% of creates and removes are done, then answered 503; of disk updates done, then the connection dropped", rate*100)
	return healFaults(r), nil
}

// isCreate and isDelete match the requests that create a VM and that power off or remove one.
func isCreate(o ovirtsim.ObservedRequest) bool { return o.Method == "POST" && o.Template == "/vms" }

func isDelete(o ovirtsim.ObservedRequest) bool {
	return (o.Method == "DELETE" && o.Template == "/vms/{id}") ||
		(o.Method == "POST" && (o.Template == "/vms/{id}/shutdown" || o.Template == "/vms/{id}/stop"))
}

// background runs f in a goroutine until the returned stop is called.
func background(ctx context.Context, f func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// managerSignal kills or stops the manager when the observed listener sees a create, then a
// delete, and so on (four times at most), restarting it after 0.5-2 s.
func managerSignal(sig syscall.Signal) Fault {
	return func(ctx context.Context, r *Run) (func(context.Context) error, error) {
		w := r.W
		stop := background(ctx, func(ctx context.Context) {
			for i := range 4 {
				what, match := "create", isCreate
				if i%2 == 1 {
					what, match = "delete", isDelete
				}
				select {
				case o := <-w.Watcher.Next(match):
					m := w.Stack.Manager
					if err := Signal(m, sig); err != nil {
						r.Note("%v", err)
						return
					}
					_ = WaitExited(ctx, m, 20*time.Second)
					r.Note("%s sent to %s during a %s (%s %s)", signalName(sig), m.Name, what, o.Method, o.Path)
					if what == "create" {
						deleteUnrecorded(ctx, r)
					}
				case <-ctx.Done():
					return
				}
				sleep(ctx, time.Duration(500+r.Rnd.IntN(1500))*time.Millisecond)
				if err := w.ReplaceManager(context.WithoutCancel(ctx)); err != nil {
					r.Note("restarting the manager: %v", err)
					return
				}
			}
		})
		return func(ctx context.Context) error {
			stop()
			r.Healed = time.Now()
			return w.Restore(ctx)
		}, nil
	}
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGSTOP:
		return "SIGSTOP"
	case syscall.SIGCONT:
		return "SIGCONT"
	}
	return sig.String()
}

// deleteUnrecorded deletes, while no manager runs, the machines whose VM exists in oVirt but
// whose OVirtMachine does not record it yet: the create whose answer the dead manager never
// persisted. The next manager must still remove that VM (defect 4), else I4 sees it left.
func deleteUnrecorded(ctx context.Context, r *Run) {
	sleep(ctx, 300*time.Millisecond) // the Engine finishes the create the client gave up on
	oms, err := r.Cluster.OVirtMachines(ctx)
	if err != nil {
		return
	}
	owned := map[string]string{}
	for _, vm := range r.W.Sim.VMs() {
		owned[MarkerOwner(vm.Comment)] = vm.ID
	}
	for i := range oms {
		om := &oms[i]
		id := owned[om.Namespace+"/"+om.Name]
		if id == "" || om.Status.VMID != "" || om.Spec.ProviderID != "" || !om.DeletionTimestamp.IsZero() {
			continue
		}
		r.Driver.Forget(ownerName(om))
		if err := r.Cluster.DeleteMachineOf(ctx, om); err == nil {
			r.Note("deleted %s, whose VM %s the killed manager created but did not record", om.Name, id)
		}
	}
}

// leaderLoss replaces the manager by two with leader election, freezes the leader past its
// lease and resumes it: the old leader must not act once the other one leads.
func leaderLoss(ctx context.Context, r *Run) (func(context.Context) error, error) {
	w := r.W
	if err := w.Stack.Manager.Stop(20 * time.Second); err != nil {
		r.Note("stopping the manager: %v", err)
	}
	const lease = 4 * time.Second
	args := []string{"--leader-elect", fmt.Sprintf("--leader-election-id=chaos-%d", w.Seed), "--leader-election-namespace=" + CredentialsNamespace,
		"--leader-elect-lease-duration=" + lease.String(), "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}
	var ms []*harness.Process
	for range 2 {
		p, _, err := w.StartManager(ctx, args...)
		if err != nil {
			return nil, err
		}
		w.addExtra(p)
		ms = append(ms, p)
	}
	leads := func(p *harness.Process) bool {
		return p.LogContains("successfully acquired lease") || p.LogContains("Successfully acquired lease")
	}
	var leader, follower *harness.Process
	if err := poll(ctx, 30*time.Second, 100*time.Millisecond, func() (bool, error) {
		for i, p := range ms {
			if leads(p) {
				leader, follower = p, ms[1-i]
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return nil, fmt.Errorf("no manager acquired the lease: %w", err)
	}
	stop := background(ctx, func(ctx context.Context) {
		sleep(ctx, r.W.Cfg.Duration/3)
		if ctx.Err() != nil {
			return
		}
		if err := Signal(leader, syscall.SIGSTOP); err != nil {
			r.Note("%v", err)
			return
		}
		frozen := time.Now()
		r.Note("leader %s frozen (SIGSTOP)", leader.Name)
		sleep(context.WithoutCancel(ctx), 2*lease)
		took := poll(context.WithoutCancel(ctx), 20*time.Second, 100*time.Millisecond, func() (bool, error) { return leads(follower), nil })
		resumed := time.Now()
		if err := Signal(leader, syscall.SIGCONT); err != nil {
			r.Note("%v", err)
		}
		ctx = context.WithoutCancel(ctx)
		if took != nil {
			r.Violate("leader-takeover", "leader election: the follower takes over a frozen leader",
				fmt.Sprintf("%s did not acquire the lease within %s of %s freezing", follower.Name, 2*lease+20*time.Second, leader.Name), "process "+follower.Name)
			return
		}
		r.Note("%s took over %s after the freeze", follower.Name, time.Since(frozen).Round(100*time.Millisecond))
		if err := WaitExited(ctx, leader, 20*time.Second); err != nil {
			r.Violate("old-leader", "leader election: a leader that lost its lease stops",
				fmt.Sprintf("the resumed old leader %s did not exit within 20s of SIGCONT", leader.Name), "process "+leader.Name)
		} else {
			r.Note("the resumed old leader %s exited (lost lease)", leader.Name)
		}
		// A write that was in flight when the leader froze started before the follower led;
		// one that starts after the resume is a stale leader's write (its lease lapsed while
		// frozen): the write fence must stop every one.
		if writes := oVirtWritesStartedAfter(leader.Logs(), resumed); len(writes) > 0 {
			r.Violate("stale-leader-writes", "leader election: a leader whose lease lapsed starts no oVirt write",
				fmt.Sprintf("after SIGCONT and before it noticed the lost lease, the old leader %s started %d oVirt writes (%s) while %s led",
					leader.Name, len(writes), strings.Join(writes, ", "), follower.Name), "process "+leader.Name)
		} else {
			r.Note("the resumed old leader %s started no oVirt write", leader.Name)
		}
	})
	return func(ctx context.Context) error {
		stop()
		r.Healed = time.Now()
		for _, p := range ms {
			_ = Signal(p, syscall.SIGCONT)
			_ = p.Stop(20 * time.Second)
		}
		return w.ReplaceManager(ctx)
	}, nil
}

// oVirtWrites lists the oVirt calls that change something in a --debug manager log ("Called
// oVirt" lines), as "operation code".
func oVirtWrites(logs string) []string {
	return oVirtWritesStartedAfter(logs, time.Time{})
}

// oVirtWritesStartedAfter lists the writes of oVirtWrites that started after t: the line's klog
// time (when the call returned) minus its duration.
func oVirtWritesStartedAfter(logs string, t time.Time) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, `"Called oVirt"`) {
			continue
		}
		op := between(l, `operation="`, `"`)
		if op == "" || strings.HasPrefix(op, "Get") || strings.HasPrefix(op, "Find") || strings.HasPrefix(op, "List") || op == "Ping" || op == "EngineInfo" {
			continue
		}
		if !t.IsZero() {
			ended, ok := klogTime(l, t.Year())
			d, err := time.ParseDuration(between(l, `duration="`, `"`))
			if ok && err == nil && !ended.Add(-d).After(t) {
				continue
			}
		}
		out = append(out, op+" "+between(l, `code="`, `"`))
	}
	return out
}

// klogTime reads the time of a klog text line ("I1205 02:30:00.123456 ..."), in the local time
// zone klog writes it in, in year.
func klogTime(line string, year int) (time.Time, bool) {
	if len(line) < 21 {
		return time.Time{}, false
	}
	ts, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	return ts.AddDate(year, 0, 0), true
}

func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, to)
	return v
}

// statusPatchErrors puts the fault proxy between the manager and the API server.
func statusPatchErrors(ctx context.Context, r *Run) (func(context.Context) error, error) {
	w := r.W
	// The proxy forwards as the manager's ServiceAccount, so that the manager keeps its identity.
	proxy, err := harness.StartAPIFaultProxy(w.managerConfig, w.Seed)
	if err != nil {
		return nil, err
	}
	kc, err := proxy.Kubeconfig("chaos-proxy")
	if err != nil {
		proxy.Close()
		return nil, err
	}
	path := filepath.Join(w.WorkDir, "kubeconfig-proxy")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		proxy.Close()
		return nil, err
	}
	r500, r429 := 0.1+0.1*r.Rnd.Float64(), 0.1+0.1*r.Rnd.Float64()
	proxy.SetRules(
		harness.APIFaultRule{Method: "PATCH", PathSuffix: "/status", Status: 500, Rate: r500},
		harness.APIFaultRule{Method: "PATCH", PathSuffix: "/status", Status: 429, Rate: r429 / (1 - r500)},
	)
	if err := w.ReplaceManager(ctx, "--kubeconfig="+path); err != nil {
		proxy.Close()
		return nil, err
	}
	r.Note("the manager talks to the API server through a proxy failing %.0f%% of PATCH .../status with 500 and %.0f%% with 429", r500*100, r429*100)
	return func(ctx context.Context) error {
		proxy.SetRules()
		r.Healed = time.Now()
		r.Note("the proxy failed %v (status: count) and passed %d requests", proxy.Injected(), proxy.Passed())
		err := w.ReplaceManager(ctx)
		proxy.Close()
		return err
	}, nil
}

// webhookDown stops the webhook when a create is in flight and starts it again; then it
// deletes a Ready machine, stops the webhook as soon as the manager powers its VM off (mid-
// delete), and waits for the deletion to finish while the webhook is down: CAPOV's own
// finalizer removal must not need it (defect 7).
func webhookDown(ctx context.Context, r *Run) (func(context.Context) error, error) {
	w := r.W
	stop := background(ctx, func(ctx context.Context) {
		select {
		case <-w.Watcher.Next(isCreate):
		case <-ctx.Done():
			return
		}
		if err := w.StopWebhook(); err != nil {
			r.Note("stopping the webhook: %v", err)
		}
		r.Note("webhook stopped mid-create")
		sleep(ctx, time.Duration(2000+r.Rnd.IntN(2000))*time.Millisecond)
		ctx = context.WithoutCancel(ctx)
		if err := w.StartWebhook(ctx); err != nil {
			r.Note("starting the webhook: %v", err)
			return
		}
		ready, err := waitReady(ctx, r, 1, w.Cfg.Bound)
		if err != nil {
			r.Note("no Ready machine to delete while the webhook is down: %v", err)
			return
		}
		om := ready[r.Rnd.IntN(len(ready))]
		vmID := om.Status.VMID
		midDelete := w.Watcher.Next(func(o ovirtsim.ObservedRequest) bool { return isDelete(o) && o.VMID == vmID })
		r.Driver.Forget(ownerName(&om))
		if err := r.Cluster.DeleteMachineOf(ctx, &om); err != nil {
			r.Note("deleting the Machine of %s: %v", om.Name, err)
			return
		}
		select {
		case o := <-midDelete:
			if err := w.StopWebhook(); err != nil {
				r.Note("stopping the webhook: %v", err)
			}
			r.Note("webhook stopped mid-delete of %s (%s %s)", om.Name, o.Method, o.Template)
		case <-time.After(w.Cfg.Bound):
			r.Note("the VM of %s was not powered off within %s of deleting its Machine", om.Name, w.Cfg.Bound)
			return
		}
		defer func() {
			if err := w.StartWebhook(ctx); err != nil {
				r.Note("starting the webhook: %v", err)
			}
		}()
		gone := poll(ctx, 20*time.Second, 250*time.Millisecond, func() (bool, error) {
			err := w.C.Get(ctx, client.ObjectKeyFromObject(&om), &infrav1.OVirtMachine{})
			return apierrors.IsNotFound(err), nil
		})
		if gone != nil {
			cur := &infrav1.OVirtMachine{}
			_ = w.C.Get(ctx, client.ObjectKeyFromObject(&om), cur)
			r.Violate("webhook-down-delete", "deletion works with the webhook down (defect 7)",
				fmt.Sprintf("OVirtMachine %s/%s was not deleted within 20s while the webhook was down (finalizers %v, %s); the manager logged: %s",
					om.Namespace, om.Name, cur.Finalizers, deletedReason(cur), w.LastLogLine(om.Name, "error")), "OVirtMachine "+om.Namespace+"/"+om.Name, "VM "+vmID)
			return
		}
		r.Note("OVirtMachine %s deleted while the webhook was down", om.Name)
	})
	return func(ctx context.Context) error {
		stop()
		r.Healed = time.Now()
		return w.Restore(ctx)
	}, nil
}

// ownerName returns the name of the Machine that owns an OVirtMachine.
func ownerName(om *infrav1.OVirtMachine) string {
	for _, ref := range om.OwnerReferences {
		if ref.Kind == "Machine" {
			return ref.Name
		}
	}
	return om.Name
}

func engineRestart(ctx context.Context, r *Run) (func(context.Context) error, error) {
	w := r.W
	stop := background(ctx, func(ctx context.Context) {
		for i := range 3 {
			sleep(ctx, time.Duration(float64(w.Cfg.Duration)/4*(0.5+r.Rnd.Float64())))
			if ctx.Err() != nil {
				return
			}
			w.Sim.RestartEngine()
			r.Note("Engine restart %d: every token invalid", i+1)
		}
	})
	return func(context.Context) error {
		stop()
		r.Healed = time.Now()
		return nil
	}, nil
}

// runPasswordRotation rotates the Engine password and updates the Secret late. A machine
// created meanwhile may get failureReason OVirtEngineConnectionCritical; once the Secret is
// right the manager must clear it itself (defect 8), and never set it on a machine with a VM.
func runPasswordRotation(ctx context.Context, r *Run) error {
	if err := r.NewCluster(ctx); err != nil {
		return err
	}
	w := r.W
	stopCheck := background(ctx, func(ctx context.Context) { watchCriticalWithVM(ctx, r) })
	defer stopCheck()
	return r.Standard(ctx, func(ctx context.Context, r *Run) (func(context.Context) error, error) {
		stop := background(ctx, func(ctx context.Context) {
			sleep(ctx, time.Duration(500+r.Rnd.IntN(1500))*time.Millisecond)
			pw := w.RotatePassword(r.Rnd)
			late := time.Duration(3000+r.Rnd.IntN(3000)) * time.Millisecond
			r.Note("Engine password rotated; the Secret follows %s later", late)
			sleep(context.WithoutCancel(ctx), late)
			if err := w.UpdateSecretPassword(context.WithoutCancel(ctx), pw); err != nil {
				r.Note("updating the Secret: %v", err)
			}
		})
		return func(ctx context.Context) error {
			stop()
			r.Healed = time.Now()
			return w.UpdateSecretPassword(ctx, w.Password)
		}, nil
	})
}

// watchCriticalWithVM records a violation when a machine that has a VM gets failureReason
// OVirtEngineConnectionCritical (defect 8: never on a machine that already has a VM).
func watchCriticalWithVM(ctx context.Context, r *Run) {
	for ctx.Err() == nil {
		oms, err := r.Cluster.OVirtMachines(ctx)
		if err == nil {
			for _, om := range oms {
				d := om.Status.Deprecated
				if d != nil && d.V1Beta1 != nil && d.V1Beta1.FailureReason != nil && *d.V1Beta1.FailureReason == "OVirtEngineConnectionCritical" && om.Status.VMID != "" {
					r.Violate("critical-with-vm|"+om.Name, "no connection failure on a machine with a VM (defect 8)",
						fmt.Sprintf("OVirtMachine %s/%s has VM %s and failureReason OVirtEngineConnectionCritical", om.Namespace, om.Name, om.Status.VMID),
						"OVirtMachine "+om.Namespace+"/"+om.Name, "VM "+om.Status.VMID)
				}
			}
		}
		sleep(ctx, 300*time.Millisecond)
	}
}

func secretDeleted(ctx context.Context, r *Run) (func(context.Context) error, error) {
	w := r.W
	stop := background(ctx, func(ctx context.Context) {
		sleep(ctx, time.Duration(500+r.Rnd.IntN(1500))*time.Millisecond)
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: CredentialsNamespace, Name: SecretName}}
		if err := w.C.Delete(context.WithoutCancel(ctx), sec); err != nil {
			r.Note("deleting the Secret: %v", err)
			return
		}
		late := time.Duration(3000+r.Rnd.IntN(3000)) * time.Millisecond
		r.Note("credentials Secret deleted; recreated %s later", late)
		sleep(context.WithoutCancel(ctx), late)
		if err := w.UpdateSecretPassword(context.WithoutCancel(ctx), w.Password); err != nil {
			r.Note("recreating the Secret: %v", err)
		}
	})
	stopCheck := background(ctx, func(ctx context.Context) { watchCriticalWithVM(ctx, r) })
	return func(ctx context.Context) error {
		stop()
		stopCheck()
		r.Healed = time.Now()
		return w.UpdateSecretPassword(ctx, w.Password)
	}, nil
}

// providerDeleted deletes the OVirtProvider while machines use it. Deletion must be refused
// or held until they are gone, and the credentials Secret must survive (defect 3): the world's
// garbage collector deletes a Secret all of whose owners are gone, and the check is that rule
// too, so that it holds the moment it is made, before the collector got to it.
func providerDeleted(ctx context.Context, r *Run) (func(context.Context) error, error) {
	w := r.W
	stop := background(ctx, func(ctx context.Context) {
		if _, err := waitReady(ctx, r, 1, w.Cfg.Duration/2); err != nil {
			r.Note("no Ready machine before deleting the provider: %v", err)
		}
		p := &infrav1.OVirtProvider{ObjectMeta: metav1.ObjectMeta{Name: ProviderName}}
		err := w.C.Delete(context.WithoutCancel(ctx), p)
		switch {
		case err != nil:
			r.Note("deleting the OVirtProvider was refused: %v", err)
			return
		default:
			r.Note("the API server accepted the deletion of the OVirtProvider")
		}
		sleep(context.WithoutCancel(ctx), time.Second)
		got := &infrav1.OVirtProvider{}
		err = w.C.Get(context.WithoutCancel(ctx), client.ObjectKey{Name: ProviderName}, got)
		switch {
		case apierrors.IsNotFound(err):
			r.Violate("provider-gone", "an OVirtProvider in use is not deleted (defect 3)",
				"the OVirtProvider was deleted at once although machines use it", "OVirtProvider "+ProviderName)
		case err == nil:
			r.Note("the OVirtProvider waits for its machines (finalizers %v)", got.Finalizers)
		}
		checkSecretKept(context.WithoutCancel(ctx), r)
	})
	return func(ctx context.Context) error {
		stop()
		r.Healed = time.Now()
		checkSecretKept(ctx, r)
		return w.EnsureProvider(ctx)
	}, nil
}

// checkSecretKept records SecretKept when the credentials Secret is gone or would be
// garbage-collected (every owner it names is gone).
func checkSecretKept(ctx context.Context, r *Run) {
	w := r.W
	sec := &corev1.Secret{}
	if err := w.C.Get(ctx, client.ObjectKey{Namespace: CredentialsNamespace, Name: SecretName}, sec); err != nil {
		r.Violate("secret", SecretKept, fmt.Sprintf("the credentials Secret cannot be read: %v", err), "Secret "+CredentialsNamespace+"/"+SecretName)
		return
	}
	if len(sec.OwnerReferences) == 0 {
		return
	}
	alive := false
	for _, ref := range sec.OwnerReferences {
		if ref.Kind != "OVirtProvider" {
			alive = true // not one of ours: assume it exists
			continue
		}
		p := &infrav1.OVirtProvider{}
		if err := w.C.Get(ctx, client.ObjectKey{Name: ref.Name}, p); err == nil && p.UID == ref.UID && p.DeletionTimestamp.IsZero() {
			alive = true
		}
	}
	if !alive {
		r.Violate("secret-gc", SecretKept, fmt.Sprintf("every owner of the credentials Secret is gone or being deleted (ownerReferences %v): Kubernetes' garbage collector deletes it", sec.OwnerReferences),
			"Secret "+CredentialsNamespace+"/"+SecretName, "OVirtProvider "+ProviderName)
	}
}

// EnsureProvider recreates the OVirtProvider (and its Secret) when a scenario deleted it: a
// provider that is being deleted (held for its machines) is waited for, at most a minute, and
// then created again.
func (w *World) EnsureProvider(ctx context.Context) error {
	if err := w.UpdateSecretPassword(ctx, w.Password); err != nil {
		return err
	}
	var p *infrav1.OVirtProvider
	err := poll(ctx, time.Minute, 250*time.Millisecond, func() (bool, error) {
		p = &infrav1.OVirtProvider{}
		err := w.C.Get(ctx, client.ObjectKey{Name: ProviderName}, p)
		if apierrors.IsNotFound(err) {
			p = nil
			return true, nil
		}
		return err == nil && p.DeletionTimestamp.IsZero(), err
	})
	if err != nil {
		return fmt.Errorf("the deleted OVirtProvider did not go: %w", err)
	}
	want := harness.Provider(ProviderName, w.EngineURL, SecretName, w.Sim.CAPEM())
	if p == nil {
		return createRetrying(ctx, w.C, want)
	}
	if p.Spec.Engine == want.Spec.Engine && p.Spec.TLS != nil && p.Spec.TLS.Certs == want.Spec.TLS.Certs {
		return nil
	}
	// A scenario pointed it elsewhere: point it back at the Engine.
	return pointProvider(ctx, w.C, want.Spec.Engine, w.Sim.CAPEM())
}

// pointProvider sets the OVirtProvider's Engine URL and trusted CA.
func pointProvider(ctx context.Context, c client.Client, engineURL string, caPEM []byte) error {
	return poll(ctx, 30*time.Second, 200*time.Millisecond, func() (bool, error) {
		p := &infrav1.OVirtProvider{}
		if err := c.Get(ctx, client.ObjectKey{Name: ProviderName}, p); err != nil {
			return false, err
		}
		base := p.DeepCopy()
		p.Spec.Engine = engineURL
		p.Spec.TLS = harness.Provider(ProviderName, engineURL, SecretName, caPEM).Spec.TLS
		err := c.Patch(ctx, p, client.MergeFrom(base))
		return err == nil, err
	})
}

// waitReady waits until the scenario's cluster has at least n Ready machines.
func waitReady(ctx context.Context, r *Run, n int, d time.Duration) ([]infrav1.OVirtMachine, error) {
	var ready []infrav1.OVirtMachine
	err := poll(ctx, d, 250*time.Millisecond, func() (bool, error) {
		var err error
		ready, err = r.Cluster.ReadyMachines(ctx)
		return len(ready) >= n, err
	})
	return ready, err
}

// vmDeletedOutOfBand removes the VMs of up to two Ready machines in oVirt; the machines must
// report it, and their deletion (by the "user") must finish.
func vmDeletedOutOfBand(ctx context.Context, r *Run) (func(context.Context) error, error) {
	w := r.W
	var mu sync.Mutex
	var victims []infrav1.OVirtMachine
	stop := background(ctx, func(ctx context.Context) {
		ready, err := waitReady(ctx, r, 1, w.Cfg.Duration*2/3)
		if err != nil {
			r.Note("no Ready machine to remove out of band: %v", err)
			return
		}
		for i, om := range ready {
			if i == 2 {
				break
			}
			for _, d := range w.Watcher.CSIDisksOf(om.Status.VMID) {
				w.Watcher.ForgetCSIDisk(d)
			}
			if err := w.Sim.DeleteVM(om.Status.VMID); err != nil {
				r.Note("removing VM %s: %v", om.Status.VMID, err)
				continue
			}
			r.Note("VM %s of %s removed out of band", om.Status.VMID, om.Name)
			mu.Lock()
			victims = append(victims, om)
			mu.Unlock()
		}
	})
	return func(ctx context.Context) error {
		stop()
		r.Healed = time.Now()
		mu.Lock()
		defer mu.Unlock()
		for i := range victims {
			om := &victims[i]
			reported := poll(ctx, 20*time.Second, 250*time.Millisecond, func() (bool, error) {
				cur := &infrav1.OVirtMachine{}
				if err := w.C.Get(ctx, client.ObjectKeyFromObject(om), cur); err != nil {
					return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
				}
				c := conditions.Get(cur, infrav1.ReadyCondition)
				return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Reason+c.Message, "VM"), nil
			})
			if reported != nil {
				r.Note("%s did not report its VM missing within 20s: %v", om.Name, reported)
			}
			// What a user or a MachineHealthCheck does: delete the Machine; CAPI replaces it.
			r.Driver.Forget(ownerName(om))
			if err := r.Cluster.DeleteMachineOf(ctx, om); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// diskAttachedOutOfBand attaches a CSI disk to up to two Ready machines' VMs and deletes those
// machines: the deletion must wait (VMHasNonSystemDisk) and the disk survive; once it is
// detached the deletion finishes.
func diskAttachedOutOfBand(ctx context.Context, r *Run) (func(context.Context) error, error) {
	w := r.W
	type attached struct{ om, vm, disk string }
	var mu sync.Mutex
	var disks []attached
	stop := background(ctx, func(ctx context.Context) {
		ready, err := waitReady(ctx, r, 1, w.Cfg.Duration*2/3)
		if err != nil {
			r.Note("no Ready machine to attach a disk to: %v", err)
			return
		}
		for i, om := range ready {
			if i == 2 {
				break
			}
			d, err := w.Sim.AttachCSIDisk(om.Status.VMID, 1)
			if err != nil {
				r.Note("attaching a CSI disk to %s: %v", om.Status.VMID, err)
				continue
			}
			w.Watcher.TrackCSIDisk(d, om.Status.VMID)
			mu.Lock()
			disks = append(disks, attached{om.Namespace + "/" + om.Name, om.Status.VMID, d})
			mu.Unlock()
			r.Driver.Forget(ownerName(&om))
			if err := r.Cluster.DeleteMachineOf(ctx, &om); err != nil {
				r.Note("deleting the Machine of %s: %v", om.Name, err)
			}
			r.Note("CSI disk %s attached to VM %s of %s, then the Machine deleted", d, om.Status.VMID, om.Name)
		}
	})
	return func(ctx context.Context) error {
		stop()
		mu.Lock()
		defer mu.Unlock()
		for _, a := range disks {
			ns, name, _ := strings.Cut(a.om, "/")
			blocked := poll(ctx, 20*time.Second, 250*time.Millisecond, func() (bool, error) {
				cur := &infrav1.OVirtMachine{}
				if err := w.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cur); err != nil {
					return false, err
				}
				c := conditions.Get(cur, infrav1.MachineDeletedCondition)
				return c != nil && c.Status == metav1.ConditionFalse && c.Reason == infrav1.VMHasNonSystemDiskReason, nil
			})
			if blocked != nil {
				r.Note("%s did not report %s within 20s: %v", a.om, infrav1.VMHasNonSystemDiskReason, blocked)
			}
			if _, ok := w.Sim.VM(a.vm); !ok {
				r.Violate("csi-vm|"+a.vm, I3, fmt.Sprintf("VM %s was removed with CSI disk %s attached", a.vm, a.disk), "OVirtMachine "+a.om, "VM "+a.vm, "disk "+a.disk)
				continue
			}
			// The CSI driver detaches the volume once the PV is released.
			if err := w.Sim.DetachDisk(a.vm, a.disk); err != nil {
				r.Note("detaching %s: %v", a.disk, err)
			}
		}
		r.Healed = time.Now()
		return nil
	}, nil
}

// vmPoweredOffOutOfBand powers off one Ready machine's VM in oVirt, and a second one that also
// gets a CSI disk and loses its status (as after a restore or a move): its deletion must
// not take the CSI disk (defect 2).
func vmPoweredOffOutOfBand(ctx context.Context, r *Run) (func(context.Context) error, error) {
	w := r.W
	type restored struct{ om, vm, disk string }
	var mu sync.Mutex
	var lost []restored
	stop := background(ctx, func(ctx context.Context) {
		ready, err := waitReady(ctx, r, 2, w.Cfg.Duration*2/3)
		if len(ready) == 0 {
			r.Note("no Ready machine to power off: %v", err)
			return
		}
		oob, closeOOB, err := w.OutOfBand(ctx)
		if err != nil {
			r.Note("%v", err)
			return
		}
		defer closeOOB()
		for i, om := range ready {
			if i == 2 {
				break
			}
			if err := oob.Power(ctx, om.Status.VMID, ovirt.PowerStop); err != nil {
				r.Note("powering off %s out of band: %v", om.Status.VMID, err)
				continue
			}
			r.Note("VM %s of %s powered off out of band", om.Status.VMID, om.Name)
			if i == 0 {
				continue
			}
			d, err := w.Sim.AttachCSIDisk(om.Status.VMID, 1)
			if err != nil {
				r.Note("attaching a CSI disk to %s: %v", om.Status.VMID, err)
				continue
			}
			w.Watcher.TrackCSIDisk(d, om.Status.VMID)
			if err := wipeStatus(ctx, w.C, &om); err != nil {
				r.Note("wiping the status of %s: %v", om.Name, err)
			}
			r.Note("CSI disk %s attached to the powered-off VM %s, and the status of %s wiped (a restore)", d, om.Status.VMID, om.Name)
			mu.Lock()
			lost = append(lost, restored{om.Namespace + "/" + om.Name, om.Status.VMID, d})
			mu.Unlock()
			sleep(ctx, 2*time.Second)
			r.Driver.Forget(ownerName(&om))
			if err := r.Cluster.DeleteMachineOf(ctx, &om); err != nil {
				r.Note("deleting the Machine of %s: %v", om.Name, err)
			}
		}
	})
	return func(ctx context.Context) error {
		stop()
		mu.Lock()
		defer mu.Unlock()
		for _, a := range lost {
			// Give the deletion the time to (wrongly) remove the VM with the disk.
			sleep(ctx, 3*time.Second)
			if _, ok := w.Sim.VM(a.vm); !ok {
				continue // I3 has seen the disk go if it went with the VM
			}
			if err := w.Sim.DetachDisk(a.vm, a.disk); err != nil {
				r.Note("detaching %s: %v", a.disk, err)
			}
		}
		r.Healed = time.Now()
		return nil
	}, nil
}

// wipeStatus empties an OVirtMachine's status, as a restore from a backup without status (or
// clusterctl move) leaves it: only spec.providerID still names the VM.
func wipeStatus(ctx context.Context, c client.Client, om *infrav1.OVirtMachine) error {
	return poll(ctx, 10*time.Second, 100*time.Millisecond, func() (bool, error) {
		cur := &infrav1.OVirtMachine{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(om), cur); err != nil {
			return false, err
		}
		cur.Status = infrav1.OVirtMachineStatus{}
		return c.Status().Update(ctx, cur) == nil, nil
	})
}

// mixed applies a seeded sequence of faults, one every 2-4 s, and heals them all at the end.
func mixed(ctx context.Context, r *Run) (func(context.Context) error, error) {
	w := r.W
	var mu sync.Mutex
	type csiDisk struct{ vm, disk string }
	var disks []csiDisk
	stop := background(ctx, func(ctx context.Context) {
		for ctx.Err() == nil {
			sleep(ctx, time.Duration(2000+r.Rnd.IntN(2000))*time.Millisecond)
			if ctx.Err() != nil {
				return
			}
			switch k := r.Rnd.IntN(6); k {
			case 0:
				rate := 0.1 + 0.2*r.Rnd.Float64()
				w.Sim.SetFaults(ovirtsim.FaultRule{Method: "POST", Path: "/vms*", Status: 503, Rate: rate},
					ovirtsim.FaultRule{Method: "PUT", Path: "/vms*", Status: 500, Rate: rate},
					ovirtsim.FaultRule{Method: "DELETE", Path: "/vms*", Status: 503, Rate: rate, After: true})
				r.Note("Engine errors on (%.0f%%)", rate*100)
			case 1:
				w.Sim.SetFaults()
				w.Sim.RestartEngine()
				r.Note("Engine errors off; Engine restarted")
			case 2:
				m := w.Stack.Manager
				_ = Signal(m, syscall.SIGKILL)
				_ = WaitExited(ctx, m, 10*time.Second)
				if err := w.ReplaceManager(context.WithoutCancel(ctx)); err != nil {
					r.Note("restarting the manager: %v", err)
				}
				r.Note("manager killed and restarted")
			case 3:
				if err := w.StopWebhook(); err == nil {
					sleep(ctx, time.Second)
				}
				if err := w.StartWebhook(context.WithoutCancel(ctx)); err != nil {
					r.Note("starting the webhook: %v", err)
				}
				r.Note("webhook bounced")
			case 4:
				ready, _ := r.Cluster.ReadyMachines(ctx)
				if len(ready) == 0 {
					continue
				}
				om := ready[r.Rnd.IntN(len(ready))]
				d, err := w.Sim.AttachCSIDisk(om.Status.VMID, 1)
				if err != nil {
					continue
				}
				w.Watcher.TrackCSIDisk(d, om.Status.VMID)
				mu.Lock()
				disks = append(disks, csiDisk{om.Status.VMID, d})
				mu.Unlock()
				r.Note("CSI disk %s attached to %s", d, om.Name)
			case 5:
				ready, _ := r.Cluster.ReadyMachines(ctx)
				if len(ready) == 0 {
					continue
				}
				om := ready[r.Rnd.IntN(len(ready))]
				oob, closeOOB, err := w.OutOfBand(ctx)
				if err != nil {
					continue
				}
				if err := oob.Power(ctx, om.Status.VMID, ovirt.PowerStop); err == nil {
					r.Note("VM of %s powered off out of band", om.Name)
				}
				closeOOB()
			}
		}
	})
	return func(ctx context.Context) error {
		stop()
		w.Sim.SetFaults()
		r.Healed = time.Now()
		if err := w.Restore(ctx); err != nil {
			return err
		}
		// The CSI driver detaches every volume (the PVs are released).
		mu.Lock()
		defer mu.Unlock()
		for _, d := range disks {
			if _, ok := w.Sim.VM(d.vm); ok {
				_ = w.Sim.DetachDisk(d.vm, d.disk)
			}
		}
		return nil
	}, nil
}
