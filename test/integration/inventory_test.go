package integration

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// The inventory (docs/architecture.md, "The inventory"): a manager of its own, with a short
// --inventory-interval and a management-cluster id of its own, on a provider whose requests the
// test observes VM by VM.
const (
	inventoryFilter    = "inventory"
	inventoryProvider  = "sim-inventory"
	inventoryInterval  = 2 * time.Second
	inventoryClusterID = "it-inventory"
)

// observedRequests records the requests of the inventory provider, per VM.
type observedRequests struct {
	mu   sync.Mutex
	reqs []ovirtsim.ObservedRequest
}

func (o *observedRequests) add(r ovirtsim.ObservedRequest) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reqs = append(o.reqs, r)
}

// count returns the requests since since with this method and path template, for the VM vmID
// ("" for any).
func (o *observedRequests) count(since time.Time, method, template, vmID string) int {
	return o.countUntil(since, time.Now().Add(time.Hour), method, template, vmID)
}

// countUntil is count for the requests that arrived before until.
func (o *observedRequests) countUntil(since, until time.Time, method, template, vmID string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, r := range o.reqs {
		if !r.Time.Before(since) && r.Time.Before(until) && r.Method == method && r.Template == template &&
			(vmID == "" || strings.EqualFold(r.VMID, vmID)) {
			n++
		}
	}
	return n
}

// first returns the first request since since matching method, template and VM, and whether
// there was one.
func (o *observedRequests) first(since time.Time, method, template, vmID string) (ovirtsim.ObservedRequest, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.reqs {
		if !r.Time.Before(since) && r.Method == method && r.Template == template && strings.EqualFold(r.VMID, vmID) {
			return r, true
		}
	}
	return ovirtsim.ObservedRequest{}, false
}

// waitInventories waits until n more inventories (list requests) reached the provider.
func (o *observedRequests) waitInventories(t *testing.T, n int) {
	t.Helper()
	since := time.Now()
	NewWithT(t).Eventually(func() int { return o.count(since, "GET", "/vms", "") }, timeout, interval).Should(BeNumerically(">=", n))
}

func inventoryVMSpec() infrav1.OVirtVMSpec {
	s := vmSpec()
	s.Provider = inventoryProvider
	return s
}

// inventoryManager is the manager of the inventory tests and what its provider was asked.
type inventoryManager struct {
	obs *observedRequests
	mgr *harness.Process
}

// startInventoryManager creates the observed provider and starts its manager. Its sync period is
// short: without the inventory every Ready machine would read its VM that often.
func startInventoryManager(t *testing.T) *inventoryManager {
	t.Helper()
	g := NewWithT(t)
	im := &inventoryManager{obs: &observedRequests{}}
	url, err := sim.ServeObserved(im.obs.add)
	g.Expect(err).NotTo(HaveOccurred())
	p := harness.Provider(inventoryProvider, url, credentialsSecret, sim.CAPEM())
	p.Labels = filterLabels(inventoryFilter)
	g.Expect(k8s.Create(context.Background(), p)).To(Succeed())
	im.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of the inventory manager log:\n%s", harness.Tail(im.mgr.Logs(), 80))
		}
		im.mgr.Kill()
	})
	return im
}

func (im *inventoryManager) start(t *testing.T) {
	t.Helper()
	mgr, err := startManager("inventory", inventoryFilter, "--inventory-interval="+inventoryInterval.String(),
		"--sync-period=3s", "--management-cluster-id="+inventoryClusterID)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	im.mgr = mgr
}

// restart stops the manager gracefully and starts it again.
func (im *inventoryManager) restart(t *testing.T) {
	t.Helper()
	NewWithT(t).Expect(im.mgr.Stop(30 * time.Second)).To(Succeed())
	im.start(t)
}

// readyInventoryMachine creates a machine on the inventory provider and waits until it is Ready
// with its addresses.
func readyInventoryMachine(t *testing.T, tc *testCluster) (*infrav1.OVirtMachine, ovirtsim.VMState) {
	t.Helper()
	_, om := tc.newMachine(t, inventoryVMSpec(), ignitionConfig)
	registerNode(t, om)
	om = eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
		g.Expect(provisioned(om)).To(BeTrue())
		g.Expect(om.Status.Addresses).NotTo(BeEmpty())
		g.Expect(om.Status.BootstrapDataCleared).NotTo(BeNil())
	})
	vm, ok := sim.VM(om.Status.VMID)
	NewWithT(t).Expect(ok).To(BeTrue())
	return om, vm
}

func TestInventory(t *testing.T) {
	im := startInventoryManager(t)
	obs := im.obs
	tc := newTestCluster(t, inventoryFilter)

	t.Run("the owner marker names the management cluster", func(t *testing.T) {
		om, vm := readyInventoryMachine(t, tc)
		g := NewWithT(t)
		g.Expect(vm.Comment).To(ContainSubstring("uid=" + string(om.UID) + " management-cluster=" + inventoryClusterID + " provider=" + om.Spec.Provider + " "))
		g.Expect(vm.Comment).To(MatchRegexp(` vm=`+regexp.QuoteMeta(vm.Name)+` proof=[A-Za-z0-9_-]{22}$`), "signed with the cluster's ownership key")
	})

	t.Run("Ready machines read their VMs from the inventory only", func(t *testing.T) {
		g := NewWithT(t)
		a, vmA := readyInventoryMachine(t, tc)
		_, vmB := readyInventoryMachine(t, tc)
		// Let the machines settle, then wake them up with updates that cost no oVirt call.
		obs.waitInventories(t, 2)
		since := time.Now()
		for i := range 3 {
			cur := getOM(g, a)
			base := cur.DeepCopy()
			cur.Annotations["test/poke"] = time.Now().Format(time.RFC3339Nano) + string(rune('a'+i))
			g.Expect(k8s.Patch(context.Background(), cur, client.MergeFrom(base))).To(Succeed())
			time.Sleep(inventoryInterval)
		}
		time.Sleep(2 * inventoryInterval)
		for _, id := range []string{vmA.ID, vmB.ID} {
			g.Expect(obs.count(since, "GET", "/vms/{id}", id)).To(BeZero(), "a Ready machine does not read its VM")
		}
		g.Expect(obs.count(since, "GET", "/vms", "")).To(BeNumerically(">=", 3), "one inventory per interval")
	})

	t.Run("a restart reads no VM one by one", func(t *testing.T) {
		g := NewWithT(t)
		_, vmA := readyInventoryMachine(t, tc)
		_, vmB := readyInventoryMachine(t, tc)
		obs.waitInventories(t, 2)
		since := time.Now()
		im.restart(t)
		// The first inventory, then time for every machine to be reconciled several times.
		g.Eventually(func() int { return obs.count(since, "GET", "/vms", "") }, timeout, interval).Should(BeNumerically(">=", 1))
		time.Sleep(3 * inventoryInterval)
		for _, id := range []string{vmA.ID, vmB.ID} {
			g.Expect(obs.count(since, "GET", "/vms/{id}", id)).To(BeZero(), "machines wait for the first inventory instead of reading their VMs")
		}
	})

	t.Run("a VM changed out of band is noticed within one interval", func(t *testing.T) {
		g := NewWithT(t)
		om, vm := readyInventoryMachine(t, tc)
		obs.waitInventories(t, 2)
		stopped := time.Now()
		g.Expect(sim.SetVMGuestAgent(vm.ID, false)).To(Succeed())
		t.Cleanup(func() { _ = sim.SetVMGuestAgent(vm.ID, true) })
		// The guest agent stopped reporting: the next inventory sees the addresses gone and wakes
		// the machine, which says so in MachineOn (its recorded addresses stay).
		eventuallyCondition(t, om, condition{Type: infrav1.MachineOnCondition, Status: corev1.ConditionTrue, Reason: infrav1.NoGuestAddressesReason})
		g.Expect(time.Since(stopped)).To(BeNumerically("<", 2*inventoryInterval+5*time.Second), "within one interval (and the machine's reconcile)")
		g.Expect(obs.count(stopped, "GET", "/vms/{id}", vm.ID)).To(BeZero(), "the listing was enough: the VM is still up")
	})

	t.Run("a tag removed by hand is put back from the listing, with no read of the VM", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		_, err := ovirtClient(t).CreateTag(ctx, "inventory-backup", "")
		if err != nil {
			g.Expect(err).To(MatchError(ovirt.ErrConflict))
		}
		spec := inventoryVMSpec()
		spec.Tags = []string{"inventory-backup"}
		_, om := tc.newMachine(t, spec, ignitionConfig)
		registerNode(t, om)
		eventuallyCondition(t, om, condition{Type: clusterv1.ReadyV1Beta1Condition, Status: corev1.ConditionTrue})
		vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Tags).To(ConsistOf("inventory-backup")) })
		obs.waitInventories(t, 2)
		removed := time.Now()
		g.Expect(sim.UntagVM(vm.ID, "inventory-backup")).To(Succeed())
		eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Tags).To(ConsistOf("inventory-backup")) })
		g.Expect(time.Since(removed)).To(BeNumerically("<", 2*inventoryInterval+5*time.Second), "within one interval (and the machine's reconcile)")
		g.Expect(obs.count(removed, "GET", "/vms/{id}", vm.ID)).To(BeZero(), "the listing showed the tag missing: no read of its own")
		g.Expect(obs.count(removed, "POST", "/vms/{id}/tags", vm.ID)).To(Equal(1), "one assignment")
		eventuallyEvent(t, om, "TagsAssigned")
	})

	t.Run("a VM missing from two inventories is confirmed by one read before it counts as gone", func(t *testing.T) {
		g := NewWithT(t)
		om, vm := readyInventoryMachine(t, tc)
		obs.waitInventories(t, 2) // listed: known to the inventory
		removed := time.Now()
		g.Expect(sim.DeleteVM(vm.ID)).To(Succeed())
		eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
			reason, _ := failureOf(om)
			g.Expect(reason).NotTo(BeNil())
			g.Expect(*reason).To(Equal(infrav1.VMDeletedOutOfBandFailure))
		})
		read, ok := obs.first(removed, "GET", "/vms/{id}", vm.ID)
		g.Expect(ok).To(BeTrue(), "the machine read its VM itself before declaring it gone")
		g.Expect(read.VMExists).To(BeFalse())
		// One read decides; a reconcile on a cache that does not hold the failure yet may read once
		// more, never the inventory.
		g.Expect(obs.count(removed, "GET", "/vms/{id}", vm.ID)).To(BeNumerically("<=", 2))
		g.Expect(obs.countUntil(removed, read.Time, "GET", "/vms", "")).To(BeNumerically(">=", 2), "only after two inventories without it")
		eventuallyEvent(t, om, "VMDeletedOutOfBand")
	})

	t.Run("orphaned VMs are reported, and removed without touching CSI disks when opted in", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		orphanA, vmA := readyInventoryMachine(t, tc)
		orphanB, vmB := readyInventoryMachine(t, tc)
		csiDisk, err := sim.AttachCSIDisk(vmB.ID, 5)
		g.Expect(err).NotTo(HaveOccurred())
		obs.waitInventories(t, 2)
		// Their objects go without the manager: paused (so that it does not put the finalizer
		// back), the finalizer removed by hand, deleted.
		for _, om := range []*infrav1.OVirtMachine{orphanA, orphanB} {
			cur := getOM(g, om)
			base := cur.DeepCopy()
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations[clusterv1.PausedAnnotation] = "true"
			cur.Finalizers = nil
			g.Expect(k8s.Patch(ctx, cur, client.MergeFrom(base))).To(Succeed())
			g.Expect(k8s.Delete(ctx, cur)).To(Succeed())
			g.Eventually(func() bool {
				return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(cur), &infrav1.OVirtMachine{}))
			}, timeout, interval).Should(BeTrue())
		}
		lost := time.Now()
		p := &infrav1.OVirtProvider{}
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: inventoryProvider}, p)).To(Succeed())
			g.Expect(p.Status.Inventory).NotTo(BeNil())
			g.Expect(p.Status.Inventory.OrphanedVMs).NotTo(BeNil())
			g.Expect(*p.Status.Inventory.OrphanedVMs).To(BeEquivalentTo(2))
		}, timeout, interval).Should(Succeed())
		g.Expect(time.Since(lost)).To(BeNumerically("<", 2*inventoryInterval+5*time.Second), "reported within one interval")
		c := conditions.Get(p, infrav1.OrphanedVMsCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(infrav1.OrphanedVMsFoundReason))
		g.Expect(c.Message).To(ContainSubstring(vmA.ID))
		g.Expect(c.Message).To(ContainSubstring(vmB.ID))
		eventuallyEvent(t, p, "OrphanedVMsFound")
		time.Sleep(2 * inventoryInterval)
		_, existsA := sim.VM(vmA.ID)
		g.Expect(existsA).To(BeTrue(), "Report (the default) never removes a VM")

		// Opted in, with a grace period the webhook would refuse (the suite runs no webhook).
		base := p.DeepCopy()
		p.Spec.OrphanedVMs = infrav1.OrphanedVMsDelete
		p.Spec.OrphanedVMsGracePeriod = &metav1.Duration{Duration: time.Second}
		g.Expect(k8s.Patch(ctx, p, client.MergeFrom(base))).To(Succeed())
		// Both run: CAPOV never stops an orphan, it says so.
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: inventoryProvider}, p)).To(Succeed())
			g.Expect(conditions.GetReason(p, infrav1.OrphanedVMsCondition)).To(Equal(infrav1.OrphanedVMsNotDeletableReason))
			g.Expect(conditions.GetMessage(p, infrav1.OrphanedVMsCondition)).To(ContainSubstring("is not down"))
		}, timeout, interval).Should(Succeed())
		time.Sleep(2 * inventoryInterval)
		for _, vm := range []ovirtsim.VMState{vmA, vmB} {
			now, ok := sim.VM(vm.ID)
			g.Expect(ok).To(BeTrue())
			g.Expect(now.Status).To(Equal("up"), "a running orphan is never stopped")
		}
		// The admin stops them in oVirt: down for the grace period, the one without a CSI disk goes.
		for _, vm := range []ovirtsim.VMState{vmA, vmB} {
			g.Expect(ovirtClient(t).Power(ctx, vm.ID, ovirt.PowerStop)).To(Succeed())
		}
		g.Eventually(func() bool { _, ok := sim.VM(vmA.ID); return ok }, timeout, interval).Should(BeFalse(), "down for the grace period: removed")
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: inventoryProvider}, p)).To(Succeed())
			g.Expect(conditions.GetReason(p, infrav1.OrphanedVMsCondition)).To(Equal(infrav1.OrphanedVMsNotDeletableReason))
			g.Expect(*p.Status.Inventory.OrphanedVMs).To(BeEquivalentTo(1))
		}, timeout, interval).Should(Succeed())
		vmBNow, existsB := sim.VM(vmB.ID)
		g.Expect(existsB).To(BeTrue(), "a VM with a CSI disk attached is never removed")
		var ids []string
		for _, d := range vmBNow.Disks {
			ids = append(ids, d.ID)
		}
		g.Expect(ids).To(ContainElement(csiDisk))
		eventuallyEvent(t, p, "OrphanedVMRemoved")

		// The admin detaches the CSI disk: then it goes too, and the report is clear.
		g.Expect(sim.DetachDisk(vmB.ID, csiDisk)).To(Succeed())
		g.Eventually(func() bool { _, ok := sim.VM(vmB.ID); return ok }, timeout, interval).Should(BeFalse())
		var floating []string
		for _, d := range sim.Dump().FloatingDisks {
			floating = append(floating, d.ID)
		}
		g.Expect(floating).To(ContainElement(csiDisk), "the CSI disk survives")
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: inventoryProvider}, p)).To(Succeed())
			g.Expect(conditions.GetReason(p, infrav1.OrphanedVMsCondition)).To(Equal(infrav1.NoOrphanedVMsReason))
		}, timeout, interval).Should(Succeed())
	})

	t.Run("the VMs of another management cluster are not orphans", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		// The main manager (another management-cluster id) has a VM on the same Engine.
		main := newTestCluster(t, mainFilter)
		_, om := main.newMachine(t, vmSpec(), ignitionConfig)
		om = eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) { g.Expect(om.Status.VMID).NotTo(BeEmpty()) })
		time.Sleep(2 * inventoryInterval)
		p := &infrav1.OVirtProvider{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: inventoryProvider}, p)).To(Succeed())
		g.Expect(conditions.GetMessage(p, infrav1.OrphanedVMsCondition)).NotTo(ContainSubstring(om.Status.VMID))
		deleteAndWait(t, om)
	})
}
