package controllers

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// mdevTypeProperty is the oVirt custom property that asks for mediated devices (vGPUs).
const mdevTypeProperty = "mdev_type"

// hostDeviceHolderLabel carries the UID of the OVirtMachine an OVirtHostDeviceClaim is held for.
const hostDeviceHolderLabel = "infrastructure.cluster.x-k8s.io/host-device-holder"

// Event reasons of OVirtMachine about GPUs.
const (
	eventHostDevicesClaimed      = "HostDevicesClaimed"
	eventHostDeviceAttached      = "HostDeviceAttached"
	eventNoHostWithFreeDevice    = "NoHostWithFreeDevice"
	eventHostDeviceClaimReleased = "HostDeviceClaimReleased"
	eventHostDeviceClaimConflict = "HostDeviceClaimConflict"
	eventHostDeviceAttachFailed  = "HostDeviceAttachFailed"
)

// mdevTypeValue returns the value of the mdev_type custom property for the VGPU entries of
// spec.gpus ("" for none): each type once per instance asked for (the Engine asks for one
// mediated device per item), headed by nodisplay unless an entry asks for a display (the Engine
// honours nodisplay only as the first item: MDevTypesUtils).
func mdevTypeValue(gpus []infrav1.GPU) string {
	var items []string
	display := false
	for _, g := range gpus {
		if g.Type != infrav1.GPUTypeVGPU {
			continue
		}
		if g.Display != nil && *g.Display {
			display = true
		}
		for range g.GPUCount() {
			items = append(items, g.MdevType)
		}
	}
	if len(items) == 0 {
		return ""
	}
	if !display {
		items = append([]string{"nodisplay"}, items...)
	}
	return strings.Join(items, ",")
}

// deviceUnit is what the Engine attaches as one: the devices of one IOMMU group of a host, or a
// device without a group.
type deviceUnit struct {
	key     string // "iommu-<n>" or the device name
	group   int
	devices []ovirt.HostDevice
	// wanted is, per passthrough entry of spec.gpus, how many of the unit's devices it matches.
	wanted map[int]int
	// why the unit cannot be used ("" when it can).
	taken string
}

// passthroughEntries returns the indexes of the Passthrough entries of spec.gpus.
func passthroughEntries(gpus []infrav1.GPU) []int {
	var out []int
	for i, g := range gpus {
		if g.Type == infrav1.GPUTypePassthrough {
			out = append(out, i)
		}
	}
	return out
}

// pciSlot returns the device name without its PCI function (pci_0000_3b_00_1 → pci_0000_3b_00).
func pciSlot(name string) string {
	if i := strings.LastIndexByte(name, '_'); i > 0 {
		return name[:i]
	}
	return name
}

// deviceUnits groups a host's devices into the units the Engine attaches whole, keeping those that
// hold a wanted device. A unit is usable when every device in it is a wanted one or another
// function of a wanted device's slot (a GPU's audio function), none runs with a VM, and no
// claim of another machine holds it.
func deviceUnits(devs []ovirt.HostDevice, gpus []infrav1.GPU) []*deviceUnit {
	entries := passthroughEntries(gpus)
	byKey := map[string]*deviceUnit{}
	var order []string
	for _, d := range devs {
		key := d.Name
		if d.IOMMUGroup >= 0 {
			key = "iommu-" + strconv.Itoa(d.IOMMUGroup)
		}
		u := byKey[key]
		if u == nil {
			u = &deviceUnit{key: key, group: d.IOMMUGroup, wanted: map[int]int{}}
			byKey[key] = u
			order = append(order, key)
		}
		u.devices = append(u.devices, d)
	}
	var out []*deviceUnit
	for _, key := range order {
		u := byKey[key]
		slots := map[string]bool{}
		for _, d := range u.devices {
			for _, e := range entries {
				g := gpus[e]
				if strings.EqualFold(d.VendorID, g.VendorID) && strings.EqualFold(d.ProductID, g.DeviceID) {
					u.wanted[e]++
					slots[pciSlot(d.Name)] = true
				}
			}
		}
		if len(u.wanted) == 0 {
			continue
		}
		for _, d := range u.devices {
			switch {
			case d.VMID != "":
				u.taken = "in use by a running VM"
			case !slots[pciSlot(d.Name)]:
				u.taken = fmt.Sprintf("its IOMMU group %d also holds %s, which is not a wanted device", u.group, d.Name)
			}
		}
		out = append(out, u)
	}
	return out
}

// hostDeviceClaimName is the name of the claim of a unit: the same for every manager of the same
// Engine, so that creating it is the test-and-set.
func hostDeviceClaimName(engine, hostID, unit string) string {
	sum := sha256.Sum256([]byte(engine + "/" + hostID + "/" + unit))
	return "hdc-" + hex.EncodeToString(sum[:])[:40]
}

// engineIdentity identifies the Engine for claims: its instance id, else its URL.
func engineIdentity(ctx context.Context, s *machineScope) (string, error) {
	info, err := s.ovirt.EngineInfo(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the Engine's identity: %w", err)
	}
	if info.InstanceID != "" {
		return info.InstanceID, nil
	}
	return "url:" + s.provider.Spec.Engine, nil
}

// ownClaims returns the claims held for this OVirtMachine (by its UID), read from the API server:
// after a restart they say which devices it had reserved before its VM existed.
func (r *OVirtMachineReconciler) ownClaims(ctx context.Context, om *infrav1.OVirtMachine) ([]infrav1.OVirtHostDeviceClaim, error) {
	reader := client.Reader(r.Client)
	if r.APIReader != nil {
		reader = r.APIReader
	}
	list := &infrav1.OVirtHostDeviceClaimList{}
	if err := reader.List(ctx, list, client.MatchingLabels{hostDeviceHolderLabel: string(om.UID)}); err != nil {
		return nil, fmt.Errorf("listing the OVirtHostDeviceClaims of %s: %w", om.Name, err)
	}
	return list.Items, nil
}

// excludedHosts returns the hosts a machine of an enforcing (Hard) CAPOV anti-affinity group must
// not be pinned to, with why: those where a peer of its group runs, or is pinned by its own
// devices even while down. The Engine's enforcing filter counts only running VMs: without this, a
// machine pinned beside a stopped peer would start and leave the peer unable to start ever.
func (r *OVirtMachineReconciler) excludedHosts(ctx context.Context, s *machineScope) (map[string]string, error) {
	oc, err := r.ovirtCluster(ctx, s)
	if err != nil || oc == nil {
		return nil, err
	}
	role, policy := affinityRole(s.om, oc)
	if role == "" || policy != infrav1.AntiAffinityHard {
		return nil, nil
	}
	peers := &infrav1.OVirtMachineList{}
	if err := r.Client.List(ctx, peers, client.InNamespace(s.om.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterOf(s)}); err != nil {
		return nil, fmt.Errorf("listing the machines of cluster %s: %w", clusterOf(s), err)
	}
	out := map[string]string{}
	for i := range peers.Items {
		p := &peers.Items[i]
		if p.UID == s.om.UID {
			continue
		}
		if pr, _ := affinityRole(p, oc); pr != role {
			continue
		}
		if p.Status.Host != "" {
			out[p.Status.Host] = fmt.Sprintf("%s of its Hard anti-affinity group runs there", p.Name)
		}
		for _, d := range p.Status.HostDevices {
			out[d.Host] = fmt.Sprintf("%s of its Hard anti-affinity group is pinned there", p.Name)
		}
	}
	return out, nil
}

// reserveHostDevices chooses, claims and records the host devices of the machine's Passthrough
// GPUs before its VM is created, and returns the host to pin the VM to. reason and problem say
// why it cannot (no host has enough, a claim race); the caller reports them on MachineCreated.
func (r *OVirtMachineReconciler) reserveHostDevices(ctx context.Context, s *machineScope, ovirtCluster string) (hostID, reason, problem string, err error) {
	om := s.om
	own, err := r.ownClaims(ctx, om)
	if err != nil {
		return "", "", "", err
	}
	if len(own) > 0 {
		// Reserved before (the create did not happen yet, or its answer was lost).
		if len(om.Status.HostDevices) == 0 {
			if err := r.recordClaimedDevices(ctx, s, own); err != nil {
				return "", "", "", err
			}
		}
		return own[0].Spec.HostID, "", "", nil
	}
	engine, err := engineIdentity(ctx, s)
	if err != nil {
		return "", "", "", err
	}
	hosts, err := s.ovirt.ListHosts(ctx, ovirtCluster)
	if err != nil {
		return "", "", "", fmt.Errorf("listing the hosts of oVirt cluster %s: %w", ovirtCluster, err)
	}
	excluded, err := r.excludedHosts(ctx, s)
	if err != nil {
		return "", "", "", err
	}
	claims := &infrav1.OVirtHostDeviceClaimList{}
	if err := r.Client.List(ctx, claims); err != nil {
		return "", "", "", fmt.Errorf("listing OVirtHostDeviceClaims: %w", err)
	}
	claimed := map[string]*infrav1.OVirtHostDeviceClaim{}
	for i := range claims.Items {
		c := &claims.Items[i]
		claimed[c.Name] = c
	}
	slices.SortFunc(hosts, func(a, b ovirt.Host) int {
		return cmp.Or(cmp.Compare(b.MaxSchedulingMemoryBytes, a.MaxSchedulingMemoryBytes), cmp.Compare(a.Name, b.Name))
	})
	entries := passthroughEntries(om.Spec.GPUs)
	var seen []string
	for _, h := range hosts {
		switch {
		case h.Status != "up":
			seen = append(seen, fmt.Sprintf("%s: %s", h.Name, h.Status))
			continue
		case !h.PassthroughEnabled:
			seen = append(seen, h.Name+": device passthrough disabled")
			continue
		case excluded[h.Name] != "":
			seen = append(seen, fmt.Sprintf("%s: excluded, %s", h.Name, excluded[h.Name]))
			continue
		}
		devs, err := s.ovirt.ListHostDevices(ctx, h.ID)
		if err != nil {
			if errors.Is(err, ovirt.ErrNotFound) {
				continue
			}
			return "", "", "", fmt.Errorf("listing the devices of host %s: %w", h.Name, err)
		}
		units := deviceUnits(devs, om.Spec.GPUs)
		for _, u := range units {
			if u.taken != "" {
				continue
			}
			if c := claimed[hostDeviceClaimName(engine, h.ID, u.key)]; c != nil && c.Spec.Holder.UID != string(om.UID) {
				if stale, err := r.staleClaim(ctx, c); err != nil {
					return "", "", "", err
				} else if !stale {
					u.taken = fmt.Sprintf("claimed by %s/%s", c.Spec.Holder.Namespace, c.Spec.Holder.Name)
				}
			}
		}
		chosen, summary := chooseUnits(spreadUnits(units, string(om.UID)), om.Spec.GPUs, entries)
		if chosen == nil {
			seen = append(seen, h.Name+": "+summary)
			continue
		}
		ok, err := r.claimUnits(ctx, s, engine, h, chosen)
		if err != nil {
			return "", "", "", err
		}
		if !ok {
			return "", infrav1.HostDeviceClaimConflictReason, fmt.Sprintf("another machine claimed a device of host %s first; choosing again", h.Name), nil
		}
		return h.ID, "", "", nil
	}
	if len(hosts) == 0 {
		seen = append(seen, "no host")
	}
	return "", infrav1.NoHostWithFreeDeviceReason, fmt.Sprintf("no host of oVirt cluster %s has the free host devices of spec.gpus (%s): %s; retrying",
		ovirtCluster, describePassthrough(om.Spec.GPUs), strings.Join(seen, "; ")), nil
}

// describePassthrough says what the Passthrough entries ask for: "2 × 10de:20b5".
func describePassthrough(gpus []infrav1.GPU) string {
	var parts []string
	for _, e := range passthroughEntries(gpus) {
		g := gpus[e]
		parts = append(parts, fmt.Sprintf("%d × %s:%s", g.GPUCount(), strings.ToLower(g.VendorID), strings.ToLower(g.DeviceID)))
	}
	return strings.Join(parts, ", ")
}

// spreadUnits orders a host's units by a hash of the machine and the unit: machines created
// together try different units first instead of racing for the same claim.
func spreadUnits(units []*deviceUnit, machine string) []*deviceUnit {
	out := slices.Clone(units)
	key := func(u *deviceUnit) uint64 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(machine + "/" + u.key))
		return h.Sum64()
	}
	slices.SortStableFunc(out, func(a, b *deviceUnit) int { return cmp.Compare(key(a), key(b)) })
	return out
}

// chooseUnits picks free units of one host that give every Passthrough entry its count, or nil
// and what the host has.
func chooseUnits(units []*deviceUnit, gpus []infrav1.GPU, entries []int) ([]*deviceUnit, string) {
	used := map[*deviceUnit]bool{}
	var chosen []*deviceUnit
	var short []string
	for _, e := range entries {
		need, free, total := gpus[e].GPUCount(), 0, 0
		var why []string
		for _, u := range units {
			n := u.wanted[e]
			if n == 0 {
				continue
			}
			total += n
			switch {
			case u.taken != "":
				why = append(why, fmt.Sprintf("%d %s", n, u.taken))
			case used[u]:
			default:
				if free < need {
					chosen = append(chosen, u)
					used[u] = true
				}
				free += n
			}
		}
		if free < need {
			desc := fmt.Sprintf("%d of %d %s:%s free", free, total, strings.ToLower(gpus[e].VendorID), strings.ToLower(gpus[e].DeviceID))
			if len(why) > 0 {
				desc += " (" + strings.Join(why, ", ") + ")"
			}
			short = append(short, desc)
		}
	}
	if len(short) > 0 {
		return nil, strings.Join(short, ", ")
	}
	return chosen, ""
}

// staleClaim reports whether a claim's holder is gone (no OVirtMachine of that name and UID) and
// deletes it then: a machine removed without its finalizer would otherwise hold its devices for
// ever. A claim whose holder exists is never touched.
func (r *OVirtMachineReconciler) staleClaim(ctx context.Context, c *infrav1.OVirtHostDeviceClaim) (bool, error) {
	reader := client.Reader(r.Client)
	if r.APIReader != nil {
		reader = r.APIReader
	}
	holder := &infrav1.OVirtMachine{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: c.Spec.Holder.Namespace, Name: c.Spec.Holder.Name}, holder)
	switch {
	case err == nil && string(holder.UID) == c.Spec.Holder.UID:
		return false, nil
	case err != nil && !apierrors.IsNotFound(err):
		return false, fmt.Errorf("reading the holder of OVirtHostDeviceClaim %s: %w", c.Name, err)
	}
	if err := r.Client.Delete(ctx, c, client.Preconditions{UID: &c.UID}); err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("deleting the stale OVirtHostDeviceClaim %s: %w", c.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted an OVirtHostDeviceClaim whose machine is gone", "claim", c.Name, "holder", c.Spec.Holder.Namespace+"/"+c.Spec.Holder.Name)
	return true, nil
}

// claimUnits creates the claims of the chosen units (the API server's create is the
// test-and-set) and records the devices in status.hostDevices. false when another machine was
// first: the claims made here are deleted again.
func (r *OVirtMachineReconciler) claimUnits(ctx context.Context, s *machineScope, engine string, h ovirt.Host, units []*deviceUnit) (bool, error) {
	om := s.om
	var made []*infrav1.OVirtHostDeviceClaim
	release := func() {
		for _, c := range made {
			if err := r.Client.Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) {
				s.log.Error(err, "Cannot release an OVirtHostDeviceClaim after a lost race; it is released with the machine", "claim", c.Name)
			}
		}
	}
	for _, u := range units {
		c := &infrav1.OVirtHostDeviceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: hostDeviceClaimName(engine, h.ID, u.key), Labels: map[string]string{
				hostDeviceHolderLabel:      string(om.UID),
				clusterv1.ClusterNameLabel: clusterOf(s),
			}},
			Spec: infrav1.OVirtHostDeviceClaimSpec{EngineInstanceID: engine, HostID: h.ID, Host: h.Name,
				Holder: infrav1.HostDeviceClaimHolder{Namespace: om.Namespace, Name: om.Name, UID: string(om.UID)}, VMID: om.Status.VMID},
		}
		if u.group >= 0 {
			c.Spec.IOMMUGroup = ptrInt32(u.group)
		}
		for _, d := range u.devices {
			c.Spec.Devices = append(c.Spec.Devices, d.Name)
		}
		if err := r.Client.Create(ctx, c); err != nil {
			if apierrors.IsAlreadyExists(err) {
				release()
				return false, nil
			}
			release()
			return false, fmt.Errorf("creating OVirtHostDeviceClaim %s: %w", c.Name, err)
		}
		made = append(made, c)
	}
	om.Status.HostDevices = nil
	var names []string
	for i, u := range units {
		for _, d := range u.devices {
			om.Status.HostDevices = append(om.Status.HostDevices, hostDeviceStatus(h, d, made[i].Name))
			names = append(names, d.Name)
		}
	}
	r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventHostDevicesClaimed, "ClaimHostDevices",
		"Claimed host devices %s of host %s for spec.gpus; the VM is pinned to the host", strings.Join(names, ", "), h.Name)
	return true, nil
}

func hostDeviceStatus(h ovirt.Host, d ovirt.HostDevice, claim string) infrav1.HostDeviceStatus {
	st := infrav1.HostDeviceStatus{Host: h.Name, HostID: h.ID, Name: d.Name, VendorID: d.VendorID, DeviceID: d.ProductID, Claim: claim}
	if d.IOMMUGroup >= 0 {
		st.IOMMUGroup = ptrInt32(d.IOMMUGroup)
	}
	return st
}

// recordClaimedDevices fills status.hostDevices from the machine's claims (lost with a status
// patch that did not happen).
func (r *OVirtMachineReconciler) recordClaimedDevices(ctx context.Context, s *machineScope, own []infrav1.OVirtHostDeviceClaim) error {
	devs, err := s.ovirt.ListHostDevices(ctx, own[0].Spec.HostID)
	if err != nil {
		return fmt.Errorf("listing the devices of host %s: %w", own[0].Spec.Host, err)
	}
	h := ovirt.Host{ID: own[0].Spec.HostID, Name: own[0].Spec.Host}
	for _, c := range own {
		for _, d := range devs {
			if slices.Contains(c.Spec.Devices, d.Name) {
				s.om.Status.HostDevices = append(s.om.Status.HostDevices, hostDeviceStatus(h, d, c.Name))
			}
		}
	}
	return nil
}

// ensureHostDeviceClaims re-creates the claims of a machine whose VM has its devices but whose
// claims are missing (after clusterctl move, or a restore): a cache read per reconcile, a create
// only when missing. A claim another machine took meanwhile is reported, never detached.
func (r *OVirtMachineReconciler) ensureHostDeviceClaims(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	om := s.om
	if len(om.Status.HostDevices) == 0 || om.Status.VMID == "" {
		return next()
	}
	byClaim := map[string][]infrav1.HostDeviceStatus{}
	var order []string
	for _, d := range om.Status.HostDevices {
		if d.Claim == "" {
			continue
		}
		if _, ok := byClaim[d.Claim]; !ok {
			order = append(order, d.Claim)
		}
		byClaim[d.Claim] = append(byClaim[d.Claim], d)
	}
	for _, name := range order {
		c := &infrav1.OVirtHostDeviceClaim{}
		err := r.Client.Get(ctx, client.ObjectKey{Name: name}, c)
		switch {
		case err == nil:
			if c.Spec.Holder.UID != string(om.UID) {
				r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventHostDeviceClaimConflict, "ClaimHostDevices",
					"OVirtHostDeviceClaim %s of the VM's devices is held by %s/%s: two machines may share a device; the VM keeps its devices", name, c.Spec.Holder.Namespace, c.Spec.Holder.Name)
			}
			continue
		case !apierrors.IsNotFound(err):
			return stop(ctrl.Result{}, fmt.Errorf("reading OVirtHostDeviceClaim %s: %w", name, err))
		}
		devs := byClaim[name]
		c = &infrav1.OVirtHostDeviceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hostDeviceHolderLabel: string(om.UID), clusterv1.ClusterNameLabel: clusterOf(s)}},
			Spec: infrav1.OVirtHostDeviceClaimSpec{EngineInstanceID: om.Status.EngineInstanceID, HostID: devs[0].HostID, Host: devs[0].Host,
				IOMMUGroup: devs[0].IOMMUGroup, Holder: infrav1.HostDeviceClaimHolder{Namespace: om.Namespace, Name: om.Name, UID: string(om.UID)}, VMID: om.Status.VMID},
		}
		if c.Spec.EngineInstanceID == "" {
			c.Spec.EngineInstanceID = "url:" + s.provider.Spec.Engine
		}
		for _, d := range devs {
			c.Spec.Devices = append(c.Spec.Devices, d.Name)
		}
		if err := r.Client.Create(ctx, c); err != nil && !apierrors.IsAlreadyExists(err) {
			return stop(ctrl.Result{}, fmt.Errorf("re-creating OVirtHostDeviceClaim %s: %w", name, err))
		}
	}
	return next()
}

// attachHostDevices attaches the recorded host devices the VM does not have yet; called while the
// VM is down, before it is started. done is false when the start must wait.
func (r *OVirtMachineReconciler) attachHostDevices(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	om, vm := s.om, s.vm
	if len(om.Status.HostDevices) == 0 {
		return next()
	}
	have, err := s.ovirt.ListVMHostDevices(ctx, vm.ID)
	if err != nil {
		return stop(ctrl.Result{}, fmt.Errorf("listing the host devices of VM %s: %w", vm.ID, err))
	}
	present := map[string]bool{}
	for _, h := range have {
		present[h.Name] = true
	}
	// One attach per unit (an IOMMU group, one claim): the Engine adds the rest of the group
	// with it, so the VM's devices need not be read again.
	for _, d := range om.Status.HostDevices {
		if present[d.Name] {
			continue
		}
		if err := s.ovirt.AttachHostDevice(ctx, vm.ID, d.Name); err != nil {
			if errors.Is(err, ovirt.ErrLocked) {
				return stop(r.waitFor(om, infrav1.MachineOnCondition), nil)
			}
			if engineRefused(err) || errors.Is(err, ovirt.ErrNotFound) {
				msg := fmt.Sprintf("oVirt refused to attach host device %s of host %s to VM %s: %v; retrying", d.Name, d.Host, vm.ID, err)
				if v1beta1conditions.GetReason(om, infrav1.MachineOnCondition) != infrav1.HostDeviceAttachFailedReason {
					r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventHostDeviceAttachFailed, "AttachHostDevice", "%s", msg)
				}
				v1beta1conditions.MarkFalse(om, infrav1.MachineOnCondition, infrav1.HostDeviceAttachFailedReason, clusterv1.ConditionSeverityWarning, "%s", msg)
				return stop(r.retryLater(), nil)
			}
			return stop(ctrl.Result{}, fmt.Errorf("attaching host device %s to VM %s: %w", d.Name, vm.ID, err))
		}
		r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventHostDeviceAttached, "AttachHostDevice", "Attached host device %s of host %s to VM %s", d.Name, d.Host, vm.ID)
		for _, o := range om.Status.HostDevices {
			if o.Claim == d.Claim && (d.Claim != "" || o.Name == d.Name) {
				present[o.Name] = true
			}
		}
	}
	return next()
}

// releaseHostDeviceClaims deletes the machine's claims once its VM is gone (or was never made).
func (r *OVirtMachineReconciler) releaseHostDeviceClaims(ctx context.Context, s *machineScope) error {
	own, err := r.ownClaims(ctx, s.om)
	if err != nil {
		return err
	}
	for i := range own {
		c := &own[i]
		if err := r.Client.Delete(ctx, c, client.Preconditions{UID: &c.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing OVirtHostDeviceClaim %s: %w", c.Name, err)
		}
		r.Recorder.Eventf(s.om, nil, corev1.EventTypeNormal, eventHostDeviceClaimReleased, "ReleaseHostDevices",
			"Released host devices %s of host %s", strings.Join(c.Spec.Devices, ", "), c.Spec.Host)
	}
	return nil
}

// startRefusal tells the Engine's scheduling refusals of a GPU machine apart by the filter that
// refused (the Engine's message names it: "... did not satisfy internal filter MDevice because
// ..."): reason and what to say, or "" for the others.
func startRefusal(err error) (reason, what string) {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "filter MDevice"):
		return infrav1.NoHostWithFreeMediatedDeviceReason, "no host has a free mediated device of the type spec.gpus asks for"
	case strings.Contains(msg, "filter HostDevice"):
		return infrav1.HostDeviceUnavailableReason, "a host device of the VM is in use by another running VM, or its host cannot pass it through"
	}
	return "", ""
}
