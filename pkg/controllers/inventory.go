package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/provideraccess"
)

// Event reasons of the inventory (on OVirtProviders).
const (
	eventOrphanedVMs       = "OrphanedVMsFound"
	eventOrphanedVMRemoved = "OrphanedVMRemoved"
	eventOrphanNotDeleted  = "OrphanedVMNotDeletable"
)

// DefaultInventoryPageSize is the number of VMs per inventory request. A page is parsed whole
// (about 200 KB allocated per VM with a Kubernetes node's guest interfaces), so smaller pages
// keep the manager smaller; but a full page costs one more request to learn that nothing
// follows, so below 120 a fleet of 100 to 119 machines would pay more than 0.1 Engine calls per
// machine and hour at the default 10-minute interval (two requests per inventory).
const DefaultInventoryPageSize = 150

// maxOrphanNames is how many orphaned VMs the OrphanedVMs condition names.
const maxOrphanNames = 10

// maxInventoryPages bounds the pages of one inventory (a million VMs in pages of 100): an Engine
// that kept answering new VMs past it would otherwise never let the inventory end.
const maxInventoryPages = 10000

// eventOddMarker reports a VM whose owner marker names this management cluster but that the
// inventory cannot judge: a name no object can have, or an object this manager cannot read.
const eventOddMarker = "OddOwnerMarker"

// vmObservation is what the inventory knows about one VM.
type vmObservation int

const (
	// vmUnknown: the VM was never seen by a finished inventory of its provider (created since,
	// or the inventory is off): the machine reads it itself.
	vmUnknown vmObservation = iota
	// vmPending: the provider's first inventory since the manager started has not finished:
	// the machine waits for it instead of reading its VM.
	vmPending
	// vmPresent: the last inventory listed the VM.
	vmPresent
	// vmMissingOnce: the VM was missing from the last inventory only (a page boundary moved,
	// an Engine hiccup): nothing is concluded yet.
	vmMissingOnce
	// vmMissing: the VM was missing from two inventories in a row: the machine confirms with one
	// targeted read before it counts as gone.
	vmMissing
)

// Inventory lists, per OVirtProvider, the VMs that carry this management cluster's owner marker
// in bulk, one paginated search (ovirt.Client.ListVMs) per Interval, so that Ready machines read
// their VM from it instead of calling the Engine one by one. It enqueues a machine whose VM
// changed (status, host, disks, NICs, addresses) or went missing twice, so that out-of-band
// changes are seen within one interval, and it reports orphaned VMs (a marker of this management
// cluster, no OVirtMachine) on the OVirtProvider, removing them when spec.orphanedVMs is Delete.
// It runs on the leader only, like the controllers.
type Inventory struct {
	// Client reads OVirtProviders and OVirtMachines (cached) and patches OVirtProvider status.
	Client client.Client
	// APIReader confirms that an OVirtMachine does not exist before its VM counts as an orphan.
	APIReader client.Reader
	// Connector hands out oVirt clients per OVirtProvider.
	Connector *Connector
	// Recorder emits events on OVirtProviders.
	Recorder events.EventRecorder
	// ManagementClusterID is the id in the owner markers of this management cluster's VMs.
	ManagementClusterID string
	// Interval is the time between two inventories of a provider.
	Interval time.Duration
	// Retry is the wait after a failed inventory.
	Retry time.Duration
	// PageSize is the number of VMs per request (DefaultInventoryPageSize when 0).
	PageSize int
	// GracePeriodOverride, when positive, replaces every provider's spec.orphanedVMsGracePeriod
	// (the manager's --test-orphaned-vms-grace-period, for tests only).
	GracePeriodOverride time.Duration
	// WatchFilterValue limits the machines enqueued to the labelled ones.
	WatchFilterValue string
	// Metrics are the inventory gauges; nil for none.
	Metrics *InventoryMetrics
	// Log is the inventory's logger.
	Log logr.Logger
	// Now returns the time; tests may fix it.
	Now func() time.Time

	mu        sync.Mutex
	started   time.Time
	providers map[string]*providerInventory
	wake      chan event.GenericEvent
	// heartbeatWriter names this manager process in the heartbeat tag; heartbeats are what each
	// provider's inventories know of it (inventory_heartbeat.go).
	heartbeatWriter string
	heartbeats      map[string]*heartbeatState
}

// providerInventory is the last inventory of one provider.
type providerInventory struct {
	// done is set once an inventory finished since the manager started.
	done bool
	// at is when the last inventory finished; next when the next is due.
	at, next time.Time
	// running is set while an inventory of the provider runs.
	running bool
	// complete is false when the Engine left the disks, NICs and devices out (follow ignored).
	complete bool
	vms      map[string]*inventoryVM
	// orphans are the orphaned VMs reported last, by id.
	orphans map[string]bool
	// odd are the VMs reported with an odd owner marker (eventOddMarker), by id.
	odd map[string]bool
}

// inventoryVM is one VM of an inventory.
type inventoryVM struct {
	vm     ovirt.VM
	owner  vmOwner
	digest string
	// missing counts the inventories in a row that did not list the VM.
	missing int
	// orphanSince is when the VM was first found without its OVirtMachine (zero: not an orphan).
	orphanSince time.Time
	// downOrphanSince is when the orphan was first seen down, since when it has been down at
	// every inventory (zero: not an orphan, or not down). Removal counts the grace period from it.
	downOrphanSince time.Time
}

// InventoryMetrics are the gauges of the inventory, per provider.
type InventoryMetrics struct {
	orphaned *prometheus.GaugeVec
	vms      *prometheus.GaugeVec
	last     *prometheus.GaugeVec
}

// NewInventoryMetrics registers capov_orphaned_vms, capov_inventory_vms and
// capov_inventory_last_success_timestamp_seconds with reg.
func NewInventoryMetrics(reg prometheus.Registerer) *InventoryMetrics {
	m := &InventoryMetrics{
		orphaned: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "capov_orphaned_vms",
			Help: "VMs with this management cluster's owner marker whose OVirtMachine does not exist, at the last inventory."}, []string{"provider"}),
		vms: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "capov_inventory_vms",
			Help: "VMs with this management cluster's owner marker at the last inventory."}, []string{"provider"}),
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "capov_inventory_last_success_timestamp_seconds",
			Help: "When the last inventory of the provider's Engine finished (Unix time)."}, []string{"provider"}),
	}
	if reg != nil {
		reg.MustRegister(m.orphaned, m.vms, m.last)
	}
	return m
}

func (m *InventoryMetrics) set(provider string, vms, orphans int, at time.Time) {
	if m == nil {
		return
	}
	m.orphaned.WithLabelValues(provider).Set(float64(orphans))
	m.vms.WithLabelValues(provider).Set(float64(vms))
	m.last.WithLabelValues(provider).Set(float64(at.Unix()))
}

func (m *InventoryMetrics) forget(provider string) {
	if m == nil {
		return
	}
	m.orphaned.DeleteLabelValues(provider)
	m.vms.DeleteLabelValues(provider)
	m.last.DeleteLabelValues(provider)
}

func (inv *Inventory) now() time.Time {
	if inv.Now == nil {
		return time.Now()
	}
	return inv.Now()
}

func (inv *Inventory) pageSize() int {
	if inv.PageSize <= 0 {
		return DefaultInventoryPageSize
	}
	return min(inv.PageSize, ovirt.MaxVMPageSize)
}

func (inv *Inventory) init() {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.providers == nil {
		inv.providers = map[string]*providerInventory{}
	}
	if inv.wake == nil {
		inv.wake = make(chan event.GenericEvent, 1024)
	}
	if inv.heartbeats == nil {
		inv.heartbeats = map[string]*heartbeatState{}
	}
	if inv.heartbeatWriter == "" {
		inv.heartbeatWriter = newHeartbeatWriter()
	}
}

// Source is what the OVirtMachine controller watches: the machines the inventory wakes. They
// are queued at low priority: after a restart the first inventory wakes every machine whose VM it
// had not seen yet, and a machine created meanwhile (a new object's event, at the default
// priority) must not wait behind thousands of them.
func (inv *Inventory) Source() source.Source {
	inv.init()
	return source.Channel(inv.wake, handler.Funcs{
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)}
			if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
				pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req)
				return
			}
			q.Add(req)
		},
	})
}

// NeedLeaderElection makes the inventory run on the leader only.
func (inv *Inventory) NeedLeaderElection() bool { return true }

// Start runs inventories until ctx ends: each provider's first at once, then one per Interval
// (Retry after a failure).
func (inv *Inventory) Start(ctx context.Context) error {
	inv.init()
	inv.mu.Lock()
	inv.started = inv.now()
	inv.mu.Unlock()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		inv.runDue(ctx, &wg)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// runDue starts the inventories that are due, one goroutine per provider.
func (inv *Inventory) runDue(ctx context.Context, wg *sync.WaitGroup) {
	list := &infrav1.OVirtProviderList{}
	if err := inv.Client.List(ctx, list); err != nil {
		inv.Log.Error(err, "Listing OVirtProviders for the inventory")
		return
	}
	now := inv.now()
	names := map[string]bool{}
	for i := range list.Items {
		p := &list.Items[i]
		names[p.Name] = true
		if !conditions.IsTrue(p, infrav1.ReadyCondition) {
			// The provider's check says the Engine cannot be used: an inventory would only add
			// failed logins (and feed the login breaker). Its machines wait for it to be Ready.
			continue
		}
		inv.mu.Lock()
		pi := inv.providers[p.Name]
		if pi == nil {
			pi = &providerInventory{vms: map[string]*inventoryVM{}}
			inv.providers[p.Name] = pi
		}
		due := !pi.running && !now.Before(pi.next)
		inv.mu.Unlock()
		if !due || !inv.mayUse(ctx, p) {
			continue
		}
		inv.mu.Lock()
		pi.running = true
		inv.mu.Unlock()
		wg.Go(func() {
			ok := inv.RunOnce(ctx, p)
			inv.mu.Lock()
			defer inv.mu.Unlock()
			pi.running = false
			pi.next = inv.now().Add(inv.Interval)
			if !ok {
				pi.next = inv.now().Add(min(inv.Retry, inv.Interval))
			}
		})
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for name, pi := range inv.providers {
		if !names[name] && !pi.running {
			delete(inv.providers, name)
			inv.Metrics.forget(name)
		}
	}
}

// mayUse tells whether this manager takes the inventory of provider p: every provider without a
// watch filter; with one, a provider that carries the filter's label (the manager reports on it)
// or that one of the manager's machines names. Several managers, each with its watch filter,
// then do not all list the VMs of every provider.
func (inv *Inventory) mayUse(ctx context.Context, p *infrav1.OVirtProvider) bool {
	if inv.WatchFilterValue == "" || p.Labels[clusterv1.WatchLabel] == inv.WatchFilterValue {
		return true
	}
	machines := &infrav1.OVirtMachineList{}
	if err := inv.Client.List(ctx, machines, client.MatchingFields{providerIndex: p.Name},
		client.MatchingLabels{clusterv1.WatchLabel: inv.WatchFilterValue}, client.UnsafeDisableDeepCopy); err != nil {
		inv.Log.Error(err, "Listing the machines of an OVirtProvider for the inventory", "OVirtProvider", klog.KObj(p))
		return true // when in doubt, the inventory is taken as before
	}
	return len(machines.Items) > 0
}

// markerSearch is the text every VM of this management cluster has in its comment.
func (inv *Inventory) markerSearch() string {
	return markerClusterField + inv.ManagementClusterID
}

// RunOnce takes one inventory of the provider, compares it with the last one, wakes the machines
// whose VM changed, reports the orphans and removes those due for removal. It reports whether
// the inventory was taken.
func (inv *Inventory) RunOnce(ctx context.Context, p *infrav1.OVirtProvider) bool {
	inv.init()
	log := inv.Log.WithValues("OVirtProvider", klog.KObj(p))
	// Every call is logged (--debug) with the provider and the inventory's name.
	ctx = ctrl.LoggerInto(ctx, log)
	cl, _, err := inv.Connector.Connect(ctx, p)
	if err != nil {
		log.V(2).Info("Cannot take the inventory: the provider does not connect", "reason", err.Error())
		return false
	}
	var vms []ovirt.VM
	complete := true
	seen := map[string]bool{}
	for page := 1; ; page++ {
		pg, err := cl.ListVMs(ctx, ovirt.VMQuery{CommentContains: inv.markerSearch(), Page: page, PageSize: inv.pageSize()})
		if err != nil {
			log.Info("The inventory of the Engine failed; keeping the previous one", "page", page, "error", err.Error())
			return false
		}
		complete = complete && pg.Complete
		added := 0
		for _, vm := range pg.VMs {
			// A VM created or removed during the inventory shifts the pages: one may show twice.
			if !seen[vm.ID] {
				seen[vm.ID] = true
				// Pruned at once: a page's VMs carry every guest interface (kube-ipvs0 with
				// an address per Service) until then, and the pass keeps every page's VMs.
				vms = append(vms, prunedVM(vm))
				added++
			}
		}
		if len(pg.VMs) < inv.pageSize() {
			break
		}
		if added == 0 || page >= maxInventoryPages {
			// A full page of VMs listed already: the Engine (or a proxy before it) ignores the
			// page parameter and would answer the same page forever. What was listed is kept;
			// the VMs beyond it are read by their machines (missing from the inventory).
			log.Info("The Engine answered a full page with VMs already listed: it ignores paging; the inventory keeps the VMs listed so far",
				"page", page, "vms", len(vms))
			break
		}
	}
	inv.apply(ctx, log, p, cl, vms, complete)
	return true
}

// apply records an inventory and acts on what changed.
func (inv *Inventory) apply(ctx context.Context, log logr.Logger, p *infrav1.OVirtProvider, cl ovirt.Client, vms []ovirt.VM, complete bool) {
	now := inv.now()
	var wake []vmOwner
	inv.mu.Lock()
	pi := inv.providers[p.Name]
	if pi == nil {
		pi = &providerInventory{vms: map[string]*inventoryVM{}}
		inv.providers[p.Name] = pi
	}
	first := !pi.done
	listed := map[string]bool{}
	var odd []oddVM
	for i := range vms {
		vm := vms[i]
		owner, ok := parseOwnerMarker(vm.Comment)
		if !ok || owner.cluster != inv.ManagementClusterID {
			continue // the Engine's match is a LIKE: only the exact field counts
		}
		if owner.provider != "" && owner.provider != p.Name {
			continue // created through another OVirtProvider of this Engine: its inventory's
		}
		if why := invalidOwner(owner); why != "" {
			// No object can have that name: not an orphan of anything, never acted on.
			odd = append(odd, oddVM{id: vm.ID, what: fmt.Sprintf("VM %s (%s): %s", vm.Name, vm.ID, why)})
			continue
		}
		id := strings.ToLower(vm.ID)
		listed[id] = true
		digest := vmDigest(&vm)
		old := pi.vms[id]
		if old == nil {
			pi.vms[id] = &inventoryVM{vm: vm, owner: owner, digest: digest}
			continue
		}
		if old.digest != digest || old.missing > 0 {
			wake = append(wake, owner)
		}
		old.vm, old.owner, old.digest, old.missing = vm, owner, digest, 0
	}
	for id, e := range pi.vms {
		if listed[id] {
			continue
		}
		e.missing++
		switch {
		case e.missing == 2:
			// Gone twice in a row: the machine confirms with one read of its own.
			wake = append(wake, e.owner)
		case e.missing > 10:
			delete(pi.vms, id)
		}
	}
	pi.done, pi.at, pi.complete = true, now, complete
	inv.mu.Unlock()

	if first {
		// Machines that waited for the first inventory since the start.
		machines := &infrav1.OVirtMachineList{}
		if err := inv.Client.List(ctx, machines, client.MatchingFields{providerIndex: p.Name}); err != nil {
			log.Error(err, "Listing the OVirtMachines of the provider after its first inventory")
		}
		for i := range machines.Items {
			inv.wakeMachine(ctx, &machines.Items[i])
		}
	} else {
		for _, o := range wake {
			om := &infrav1.OVirtMachine{}
			if err := inv.Client.Get(ctx, types.NamespacedName{Namespace: o.namespace, Name: o.name}, om); err == nil {
				inv.wakeMachine(ctx, om)
			}
		}
	}
	if inv.WatchFilterValue == "" || p.Labels[clusterv1.WatchLabel] == inv.WatchFilterValue {
		// Every manager takes the inventory of every provider its machines may use; only the
		// provider's own manager (its watch filter) reports on it and acts on its orphans.
		inv.reportOrphans(ctx, log, p, cl, len(listed), odd)
	}
}

// wakeMachine enqueues a machine of this manager (its watch filter).
func (inv *Inventory) wakeMachine(ctx context.Context, om *infrav1.OVirtMachine) {
	if inv.WatchFilterValue != "" && om.Labels[clusterv1.WatchLabel] != inv.WatchFilterValue {
		return
	}
	select {
	case inv.wake <- event.GenericEvent{Object: om}:
	case <-ctx.Done():
	}
}

// lookup returns what the inventory of provider knows about the VM with this id.
func (inv *Inventory) lookup(provider, vmID string) (*ovirt.VM, bool, vmObservation) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	pi := inv.providers[provider]
	if pi == nil || !pi.done {
		// Not yet: wait for the first inventory, unless it keeps failing (after two intervals the
		// machines read their VMs themselves, as without an inventory).
		if !inv.started.IsZero() && inv.now().Sub(inv.started) < 2*inv.Interval {
			return nil, false, vmPending
		}
		return nil, false, vmUnknown
	}
	e := pi.vms[strings.ToLower(vmID)]
	switch {
	case e == nil:
		return nil, false, vmUnknown
	case e.missing == 1:
		return nil, false, vmMissingOnce
	case e.missing > 1:
		return nil, false, vmMissing
	}
	vm := e.vm
	vm.Disks, vm.NICs, vm.ReportedDevices = slices.Clone(vm.Disks), slices.Clone(vm.NICs), slices.Clone(vm.ReportedDevices)
	return &vm, pi.complete, vmPresent
}

// pendingWait is how long a machine waits for the first inventory before it looks again (the
// inventory wakes it as soon as it finished).
func (inv *Inventory) pendingWait() time.Duration {
	return max(inv.Interval/2, time.Second)
}

// prunedVM keeps of a listed VM what the reconcilers use: the reported devices only for the
// VM's own NICs (a guest reports every interface, kube-ipvs0 with one address per Service, for
// every NIC), to keep the memory of 5,000 VMs small.
func prunedVM(vm ovirt.VM) ovirt.VM {
	macs := map[string]bool{}
	for _, n := range vm.NICs {
		macs[strings.ToLower(strings.TrimSpace(n.MAC))] = true
	}
	var devs []ovirt.ReportedDevice
	for _, d := range vm.ReportedDevices {
		if m := strings.ToLower(strings.TrimSpace(d.MAC)); macs[m] && m != zeroMAC {
			devs = append(devs, d)
		}
	}
	vm.ReportedDevices = devs
	vm.Description = ""
	// Disk descriptions (the data disks' ownership markers) are read by the disk step and the
	// deletion, each from a read of its own. Each VM's disks are a slice of its own, made by the
	// conversion of its page.
	for i := range vm.Disks {
		vm.Disks[i].Description = ""
	}
	return vm
}

// vmDigest sums up what a change of wakes the machine: status, host, disks, NICs and the
// addresses of its NICs.
func vmDigest(vm *ovirt.VM) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%s|", vm.Status, vm.HostID, vm.Comment)
	for _, d := range vm.Disks {
		fmt.Fprintf(&b, "d:%s:%d:%s:%t;", d.ID, d.ProvisionedSize, d.Status, d.Bootable)
	}
	for _, n := range vm.NICs {
		fmt.Fprintf(&b, "n:%s:%s:%s;", n.ID, strings.ToLower(n.MAC), n.VnicProfileID)
	}
	devs := slices.Clone(vm.ReportedDevices)
	slices.SortFunc(devs, func(a, b ovirt.ReportedDevice) int { return strings.Compare(a.Name+a.MAC, b.Name+b.MAC) })
	for _, d := range devs {
		ips := slices.Clone(d.IPs)
		slices.Sort(ips)
		fmt.Fprintf(&b, "r:%s:%s:%s;", d.Name, strings.ToLower(d.MAC), strings.Join(ips, ","))
	}
	// A tag removed by hand wakes the machine, which puts it back (reconcileTags).
	tags := slices.Clone(vm.TagIDs)
	slices.Sort(tags)
	fmt.Fprintf(&b, "t:%t:%s;", vm.TagsKnown, strings.Join(tags, ","))
	return b.String()
}

// orphan is an orphaned VM of the last inventory.
type orphan struct {
	vm    ovirt.VM
	owner vmOwner
	since time.Time
	// downSince is when it was first seen down, down ever since (zero: not down).
	downSince time.Time
}

// reportOrphans finds the VMs of the inventory whose OVirtMachine does not exist and that no
// OVirtMachine names by VM id, reports them on the provider and, with spec.orphanedVMs Delete,
// removes those that have been down for their whole grace period. A VM whose object it cannot
// check is skipped and reported (odd, with the VMs whose marker names no possible object).
func (inv *Inventory) reportOrphans(ctx context.Context, log logr.Logger, p *infrav1.OVirtProvider, cl ovirt.Client, total int, odd []oddVM) {
	hb := inv.heartbeat(ctx, log, p, cl)
	now := inv.now()
	inv.mu.Lock()
	pi := inv.providers[p.Name]
	type candidate struct {
		id string
		e  inventoryVM
	}
	var candidates []candidate
	for id, e := range pi.vms {
		if e.missing == 0 {
			candidates = append(candidates, candidate{id, *e})
		}
	}
	inv.mu.Unlock()

	var orphans []orphan
	for _, c := range candidates {
		gone, err := inv.machineGone(ctx, c.e.owner)
		if err == nil && gone {
			var referenced bool
			referenced, err = inv.referenced(ctx, c.id)
			gone = !referenced
		}
		if err == nil && gone {
			// A provider reports and acts only on VMs in namespaces it allows: another
			// provider's tenants are not its business.
			var allowed bool
			allowed, _, err = provideraccess.Allowed(ctx, inv.APIReader, p, c.e.owner.namespace)
			if err == nil && !allowed {
				continue
			}
		}
		if err != nil {
			odd = append(odd, oddVM{id: c.e.vm.ID, what: fmt.Sprintf("VM %s (%s): cannot read OVirtMachine %s/%s: %v",
				c.e.vm.Name, c.e.vm.ID, c.e.owner.namespace, c.e.owner.name, err)})
			gone = false
		}
		inv.mu.Lock()
		e := pi.vms[c.id]
		if e != nil {
			switch {
			case !gone:
				e.orphanSince, e.downOrphanSince = time.Time{}, time.Time{}
			case e.orphanSince.IsZero():
				e.orphanSince = now
			}
			switch {
			case !gone || e.vm.Status != ovirt.VMStatusDown:
				e.downOrphanSince = time.Time{}
			case e.downOrphanSince.IsZero():
				e.downOrphanSince = now
			}
			if gone {
				orphans = append(orphans, orphan{vm: e.vm, owner: e.owner, since: e.orphanSince, downSince: e.downOrphanSince})
			}
		}
		inv.mu.Unlock()
	}
	inv.reportOdd(log, p, pi, odd)
	slices.SortFunc(orphans, func(a, b orphan) int { return strings.Compare(a.vm.Name, b.vm.Name) })

	var removed, blocked []string
	if p.Spec.OrphanedVMs == infrav1.OrphanedVMsDelete {
		grace := infrav1.DefaultOrphanedVMsGracePeriod
		if p.Spec.OrphanedVMsGracePeriod != nil {
			// Admission refuses less than MinOrphanedVMsGracePeriod; what is stored is honoured.
			grace = p.Spec.OrphanedVMsGracePeriod.Duration
		}
		if inv.GracePeriodOverride > 0 {
			grace = inv.GracePeriodOverride
		}
		var serverRefs map[string]bool // listed once, before the first removal of this pass
		var refsErr error
		held := hb.hold // another live cluster with this id: nothing is removed
		confirmed := false
		for _, o := range orphans {
			if now.Sub(o.since) < grace {
				continue
			}
			if o.downSince.IsZero() {
				// A running orphan is never stopped: the VM may be moving to another management
				// cluster whose manager is late, or somebody's who took it over in oVirt.
				blocked = append(blocked, fmt.Sprintf("VM %s (%s) is not down (%s): an orphan is removed only once it has been down for "+
					"spec.orphanedVMsGracePeriod; CAPOV never stops it: stop it in oVirt to let it be removed", o.vm.Name, o.vm.ID, o.vm.Status))
				continue
			}
			if now.Sub(o.downSince) < grace {
				continue
			}
			if !confirmed && held == "" {
				// Right before the first removal: has another writer replaced this pass's
				// heartbeat meanwhile?
				held, confirmed = inv.confirmHeartbeat(ctx, p, cl), true
			}
			if held != "" {
				if !slices.Contains(blocked, held) {
					blocked = append(blocked, held)
				}
				continue
			}
			if serverRefs == nil {
				if serverRefs, refsErr = inv.referencedOnServer(ctx); refsErr != nil {
					log.Info("Cannot list the OVirtMachines to check whether one names an orphan; retrying at the next inventory", "error", refsErr.Error())
					break
				}
			}
			done, why := inv.removeOrphan(ctx, log, p, cl, o, serverRefs)
			switch {
			case done:
				removed = append(removed, o.vm.ID)
			case why != "":
				blocked = append(blocked, why)
			}
		}
	}
	inv.mu.Lock()
	newOrphans := false
	current := map[string]bool{}
	for _, o := range orphans {
		if slices.Contains(removed, o.vm.ID) {
			continue
		}
		current[o.vm.ID] = true
		if !pi.orphans[o.vm.ID] {
			newOrphans = true
		}
	}
	pi.orphans = current
	at := pi.at
	inv.mu.Unlock()

	var left []orphan
	for _, o := range orphans {
		if current[o.vm.ID] {
			left = append(left, o)
		}
	}
	inv.Metrics.set(p.Name, total-len(removed), len(left), at)
	if newOrphans {
		inv.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventOrphanedVMs, "Inventory", "%s", orphansMessage(p, left, now))
		log.Info("Found orphaned VMs: their OVirtMachines do not exist", "count", len(left), "policy", orphanPolicy(p))
	}
	if err := inv.patchProvider(ctx, p, total-len(removed), left, blocked, hb.conflict, at, now); err != nil {
		log.Error(err, "Recording the inventory in the OVirtProvider status")
	}
}

// machineGone reports whether the OVirtMachine a marker names is gone: not in the cache and not
// in the API server (the cache may lag behind a machine just created). An object with the same
// name but another UID is not gone: it was recreated (clusterctl move, a restore) and rewrites
// the marker at its next read.
func (inv *Inventory) machineGone(ctx context.Context, o vmOwner) (bool, error) {
	key := types.NamespacedName{Namespace: o.namespace, Name: o.name}
	om := &infrav1.OVirtMachine{}
	err := inv.Client.Get(ctx, key, om)
	if err == nil {
		return false, nil
	}
	if !apierrors.IsNotFound(err) {
		return false, err
	}
	err = inv.APIReader.Get(ctx, key, om)
	if err == nil {
		return false, nil
	}
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// referenced reports whether an OVirtMachine of the cache names the VM by id (status.vmID or
// spec.providerID): a VM after a move or a restore, whose marker still names the old object.
func (inv *Inventory) referenced(ctx context.Context, vmID string) (bool, error) {
	list := &infrav1.OVirtMachineList{}
	if err := inv.Client.List(ctx, list, client.MatchingFields{vmIDIndex: strings.ToLower(vmID)}); err != nil {
		return false, err
	}
	return len(list.Items) > 0, nil
}

// referencedOnServer lists every OVirtMachine of the API server itself (not the cache, which may
// lag behind an object just created or restored) and returns the VM ids they name: the last check
// before a removal. One list serves every removal of an inventory pass.
func (inv *Inventory) referencedOnServer(ctx context.Context) (map[string]bool, error) {
	ids := map[string]bool{}
	opts := []client.ListOption{client.Limit(500)}
	for {
		list := &infrav1.OVirtMachineList{}
		if err := inv.APIReader.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			for _, id := range machineVMIDs(&list.Items[i]) {
				ids[id] = true
			}
		}
		if list.Continue == "" {
			return ids, nil
		}
		opts = []client.ListOption{client.Limit(500), client.Continue(list.Continue)}
	}
}

// oddVM is a VM whose owner marker names this management cluster but that the inventory cannot
// judge, and why.
type oddVM struct {
	id, what string
}

// reportOdd reports, once per VM while it stays odd, the VMs the inventory cannot judge; they are
// never counted as orphans nor acted on.
func (inv *Inventory) reportOdd(log logr.Logger, p *infrav1.OVirtProvider, pi *providerInventory, odd []oddVM) {
	current := map[string]bool{}
	var fresh []oddVM
	inv.mu.Lock()
	for _, o := range odd {
		current[o.id] = true
		if !pi.odd[o.id] {
			fresh = append(fresh, o)
		}
	}
	pi.odd = current
	inv.mu.Unlock()
	for _, o := range fresh {
		log.Info("A VM carries this management cluster's owner marker but cannot be judged; it is left alone", "vm", o.what)
		inv.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventOddMarker, "Inventory",
			"Leaving alone %s: fix or remove its owner marker in oVirt (the VM's comment)", o.what)
	}
}

// removeOrphan removes an orphan that has been down for its whole grace period, with the
// data-safety rules of a machine deletion: the VM is read again and must still be down and carry
// this management cluster's marker for an OVirtMachine that still does not exist, and the API
// server itself (not the cache) must know no OVirtMachine that names the VM by id; a VM with a
// disk that is not bootable (a CSI volume, a data disk: nothing recorded it as a system disk)
// attached is left alone. CAPOV never stops an orphan. It returns whether the VM is gone, or why
// it is left.
func (inv *Inventory) removeOrphan(ctx context.Context, log logr.Logger, p *infrav1.OVirtProvider, cl ovirt.Client, o orphan, serverRefs map[string]bool) (bool, string) {
	log = log.WithValues("vmID", o.vm.ID, "vmName", o.vm.Name, "markedFor", o.owner.namespace+"/"+o.owner.name)
	vm, err := cl.GetVM(ctx, o.vm.ID)
	if err != nil {
		if ovirtNotFound(err) {
			return true, ""
		}
		log.Info("Cannot read the orphaned VM; retrying at the next inventory", "error", err.Error())
		return false, ""
	}
	owner, ok := parseOwnerMarker(vm.Comment)
	if !ok || owner != o.owner {
		log.Info("The orphaned VM's owner marker changed; not removing it")
		return false, ""
	}
	if why := inv.removable(ctx, vm, owner); why != "" {
		return false, why
	}
	if gone, err := inv.machineGone(ctx, owner); err != nil || !gone {
		return false, ""
	}
	if vm.Status != ovirt.VMStatusDown {
		// Started again since the inventory: it is no longer due (the grace period starts over
		// once it is seen down).
		return false, ""
	}
	if serverRefs[strings.ToLower(vm.ID)] {
		return false, ""
	}
	disks, err := cl.ListDiskAttachments(ctx, vm.ID)
	if err != nil {
		log.Info("Cannot read the orphaned VM's disks; retrying at the next inventory", "error", err.Error())
		return false, ""
	}
	var other []string
	for _, d := range disks {
		if !d.Bootable {
			other = append(other, d.Alias)
		}
	}
	if len(other) > 0 {
		why := fmt.Sprintf("VM %s (%s) has disks that are not system disks attached (%s): detach them to let it be removed", vm.Name, vm.ID, strings.Join(other, ", "))
		inv.mu.Lock()
		reported := inv.providers[p.Name].orphans[vm.ID]
		inv.mu.Unlock()
		if !reported || conditions.GetReason(p, infrav1.OrphanedVMsCondition) != infrav1.OrphanedVMsNotDeletableReason {
			inv.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventOrphanNotDeleted, "RemoveOrphanedVM", "Not removing orphaned %s", why)
		}
		return false, why
	}
	if err := cl.RemoveVM(ctx, vm.ID); err != nil {
		if ovirtNotFound(err) {
			return true, ""
		}
		log.Info("Cannot remove the orphaned VM; retrying at the next inventory", "error", err.Error())
		return false, ""
	}
	log.Info("Removed the orphaned VM (spec.orphanedVMs: Delete)")
	inv.Recorder.Eventf(p, nil, corev1.EventTypeNormal, eventOrphanedVMRemoved, "RemoveOrphanedVM",
		"Removed orphaned VM %s (%s): its OVirtMachine %s/%s does not exist (orphan since %s)", vm.Name, vm.ID,
		owner.namespace, owner.name, o.since.UTC().Format(time.RFC3339))
	inv.mu.Lock()
	delete(inv.providers[p.Name].vms, strings.ToLower(vm.ID))
	inv.mu.Unlock()
	return true, ""
}

// removable tells why an orphan whose OVirtMachine is gone must still not be removed ("" when it
// may be): its marker must carry an ownership proof that verifies under the key of the Cluster it
// names, written for this VM, and that Cluster must exist here, not paused, not being deleted
// and not leaving through clusterctl move. A VM whose Cluster left (moved, deleted) or whose
// marker cannot be verified (written before the proof, edited, copied) is never removed.
func (inv *Inventory) removable(ctx context.Context, vm *ovirt.VM, owner vmOwner) string {
	what := fmt.Sprintf("VM %s (%s)", vm.Name, vm.ID)
	if owner.proof == "" || owner.workloadCluster == "" {
		return what + " carries an owner marker without an ownership proof (written before CAPOV signed its markers, or by hand): " +
			"CAPOV never removes it; remove it in oVirt if nobody needs it"
	}
	if owner.vm != vm.Name {
		return fmt.Sprintf("%s carries an owner marker written for VM %q (copied, or the VM was renamed): CAPOV never removes it", what, owner.vm)
	}
	cluster := &clusterv1.Cluster{}
	if err := inv.APIReader.Get(ctx, types.NamespacedName{Namespace: owner.namespace, Name: owner.workloadCluster}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("%s belongs to Cluster %s/%s, which is not in this management cluster (moved away or deleted): "+
				"CAPOV never removes it; remove it in oVirt if nobody needs it", what, owner.namespace, owner.workloadCluster)
		}
		return fmt.Sprintf("%s: cannot read its Cluster %s/%s: %v", what, owner.namespace, owner.workloadCluster, err)
	}
	_, moving := cluster.Annotations[deleteForMoveAnnotation]
	switch {
	case moving:
		return fmt.Sprintf("%s belongs to Cluster %s/%s, which clusterctl is moving to another management cluster: not removed", what, owner.namespace, owner.workloadCluster)
	case !cluster.DeletionTimestamp.IsZero():
		return fmt.Sprintf("%s belongs to Cluster %s/%s, which is being deleted: not removed as an orphan", what, owner.namespace, owner.workloadCluster)
	case ptr.Deref(cluster.Spec.Paused, false) || annotations.HasPaused(cluster):
		return fmt.Sprintf("%s belongs to Cluster %s/%s, which is paused (clusterctl move pauses it): not removed while it is", what, owner.namespace, owner.workloadCluster)
	}
	key, err := readOwnershipKey(ctx, inv.APIReader, owner.namespace, owner.workloadCluster)
	if err != nil {
		return fmt.Sprintf("%s: %v", what, err)
	}
	if !owner.verifies(key) {
		return fmt.Sprintf("%s carries an owner marker whose ownership proof does not verify under the key of Cluster %s/%s "+
			"(edited or copied): CAPOV never removes it", what, owner.namespace, owner.workloadCluster)
	}
	return ""
}

func orphanPolicy(p *infrav1.OVirtProvider) infrav1.OrphanedVMsPolicy {
	if p.Spec.OrphanedVMs == "" {
		return infrav1.OrphanedVMsReport
	}
	return p.Spec.OrphanedVMs
}

// orphansMessage counts the orphans and names the first ones.
func orphansMessage(p *infrav1.OVirtProvider, orphans []orphan, now time.Time) string {
	names := make([]string, 0, min(len(orphans), maxOrphanNames))
	for _, o := range orphans[:min(len(orphans), maxOrphanNames)] {
		names = append(names, fmt.Sprintf("%s (%s, for OVirtMachine %s/%s, since %s)", o.vm.Name, o.vm.ID, o.owner.namespace, o.owner.name,
			now.Sub(o.since).Truncate(time.Second)))
	}
	more := ""
	if len(orphans) > maxOrphanNames {
		more = fmt.Sprintf(" and %d more", len(orphans)-maxOrphanNames)
	}
	what := "they are only reported (spec.orphanedVMs: Report): remove them in oVirt, or set spec.orphanedVMs: Delete"
	if orphanPolicy(p) == infrav1.OrphanedVMsDelete {
		what = "spec.orphanedVMs is Delete: each is removed once it has been an orphan for spec.orphanedVMsGracePeriod"
	}
	return fmt.Sprintf("%d VMs carry this management cluster's owner marker but their OVirtMachine does not exist: %s%s; %s; see docs/operations.md \"Orphaned VMs\"",
		len(orphans), strings.Join(names, ", "), more, what)
}

// patchProvider writes the inventory into the provider's status and its OrphanedVMs condition.
func (inv *Inventory) patchProvider(ctx context.Context, p *infrav1.OVirtProvider, total int, orphans []orphan, blocked []string, conflict string, at, now time.Time) error {
	fresh := &infrav1.OVirtProvider{}
	if err := inv.Client.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	helper, err := patch.NewHelper(fresh, inv.Client)
	if err != nil {
		return err
	}
	t := metav1.NewTime(at)
	fresh.Status.Inventory = &infrav1.OVirtProviderInventoryStatus{LastTime: &t, VMs: ptrInt32(total), OrphanedVMs: ptrInt32(len(orphans))}
	c := metav1.Condition{Type: infrav1.OrphanedVMsCondition, ObservedGeneration: fresh.Generation}
	switch {
	case conflict != "":
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, infrav1.ManagementClusterIDConflictReason, conflict
		if len(orphans) > 0 {
			c.Status, c.Message = metav1.ConditionTrue, conflict+"; "+orphansMessage(fresh, orphans, now)
		}
	case len(orphans) == 0:
		c.Status, c.Reason = metav1.ConditionFalse, infrav1.NoOrphanedVMsReason
	case len(blocked) > 0:
		c.Status, c.Reason = metav1.ConditionTrue, infrav1.OrphanedVMsNotDeletableReason
		c.Message = orphansMessage(fresh, orphans, now) + "; not removed: " + strings.Join(blocked[:min(len(blocked), maxOrphanNames)], "; ")
	case orphanPolicy(fresh) == infrav1.OrphanedVMsDelete:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, infrav1.OrphanedVMsDeletingReason, orphansMessage(fresh, orphans, now)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, infrav1.OrphanedVMsFoundReason, orphansMessage(fresh, orphans, now)
	}
	if len(c.Message) > 10240 {
		c.Message = c.Message[:10240]
	}
	conditions.Set(fresh, c)
	return helper.Patch(ctx, fresh, patch.WithOwnedConditions{Conditions: []string{infrav1.OrphanedVMsCondition}})
}

func ptrInt32(n int) *int32 {
	v := int32(min(n, 1<<31-1))
	return &v
}

func ovirtNotFound(err error) bool {
	return errors.Is(err, ovirt.ErrNotFound)
}

// String names an observation in logs.
func (o vmObservation) String() string {
	switch o {
	case vmPending:
		return "pending"
	case vmPresent:
		return "present"
	case vmMissingOnce:
		return "missing-once"
	case vmMissing:
		return "missing"
	default:
		return "unknown"
	}
}
