package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// Event reasons of OVirtMachine about addressing.
const (
	eventIPAddressClaimed    = "IPAddressClaimed"
	eventIPAddressClaimGone  = "IPAddressClaimDeleted"
	eventIPAddressesReleased = "IPAddressesReleased"
	eventNetworkConfigured   = "NetworkConfigured"
)

// allocatedAddress is an address an IPAM provider allocated to one NIC of a machine.
type allocatedAddress struct {
	addr    netip.Addr
	prefix  int
	gateway string
	claim   string
}

// hasAddressing reports whether any NIC of the machine asks for an explicit network
// configuration.
func hasAddressing(om *infrav1.OVirtMachine) bool {
	return slices.ContainsFunc(om.Spec.NICs, infrav1.NIC.HasNetworkConfig)
}

// hasPools reports whether any NIC of the machine claims addresses from IPAM pools.
func hasPools(om *infrav1.OVirtMachine) bool {
	return slices.ContainsFunc(om.Spec.NICs, func(n infrav1.NIC) bool { return len(n.AddressesFromPools) > 0 })
}

// ipClaimName is the name of the IPAddressClaim of NIC nic and pool pool of a machine:
// <machine>-<nic>-<pool>, shortened with a hash when the machine name is too long for it.
func ipClaimName(machine string, nic, pool int) string {
	suffix := fmt.Sprintf("-%d-%d", nic, pool)
	if len(machine)+len(suffix) <= 253 {
		return machine + suffix
	}
	sum := sha256.Sum256([]byte(machine))
	return machine[:253-len(suffix)-9] + "-" + hex.EncodeToString(sum[:4]) + suffix
}

// machineLabelValue is the machine name as a label value: names longer than 63 characters are
// shortened with a hash (the owner reference, not the label, proves whose a claim is).
func machineLabelValue(name string) string {
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:54] + "-" + hex.EncodeToString(sum[:4])
}

// networkConfigured reports whether the machine's network configuration was given to its VM.
func networkConfigured(om *infrav1.OVirtMachine) bool {
	return v1beta1conditions.IsTrue(om, infrav1.MachineNetworkSetCondition)
}

// networkGiven reports whether the machine's record says that its VM got its network: the
// NetworkSet condition, or the annotation that survives a move or a restore.
func networkGiven(om *infrav1.OVirtMachine) bool {
	return networkConfigured(om) || om.Annotations[networkSetAnnotation] != ""
}

// reconcileIPAddresses claims the addresses of the NICs from their IPAM pools (one
// IPAddressClaim per NIC and pool, owned by the OVirtMachine) and waits for them before the VM
// is created: a VM is never created without the addresses it is to boot with. The allocated
// addresses become the machine's addresses at once. Once the VM got its configuration, a
// missing claim is reported and not claimed again (the VM keeps its address). For a machine
// with a VM whose network its record does not show as given (status lost in a move or a
// restore, or a VM created and not yet configured), the addresses are decided after the VM is
// read (reconcileVMAddresses): a VM that ever ran keeps what it has.
func (r *OVirtMachineReconciler) reconcileIPAddresses(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	om := s.om
	if !hasPools(om) || vmIDOf(om) != "" && !networkGiven(om) {
		return next()
	}
	return r.claimAddresses(ctx, s, networkGiven(om))
}

// reconcileVMAddresses is reconcileIPAddresses for a machine whose VM was read before its
// addresses were decided: a VM that is not down has run, with whatever addresses its guest
// configured, and no claim is made for it again (a missing one is reported); a down VM whose
// network was never given gets its claims as before its creation.
func (r *OVirtMachineReconciler) reconcileVMAddresses(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	if !hasPools(s.om) || s.allocated != nil || s.vm == nil {
		return next()
	}
	return r.claimAddresses(ctx, s, networkGiven(s.om) || s.vm.Status != ovirt.VMStatusDown)
}

// claimAddresses is the work of reconcileIPAddresses; configured says that the VM has its
// network (or has run): missing claims are then reported, never made again.
func (r *OVirtMachineReconciler) claimAddresses(ctx context.Context, s *machineScope, configured bool) (bool, ctrl.Result, error) {
	om := s.om
	cond := clusterv1.ConditionType(infrav1.MachineCreatedCondition)
	if vmIDOf(om) != "" {
		cond = infrav1.MachineNetworkSetCondition
	}
	allocated := make([][]allocatedAddress, len(om.Spec.NICs))
	var waiting []string
	for i, nic := range om.Spec.NICs {
		for j, pool := range nic.AddressesFromPools {
			name := ipClaimName(om.Name, i, j)
			claim := &ipamv1.IPAddressClaim{}
			err := r.Client.Get(ctx, client.ObjectKey{Namespace: om.Namespace, Name: name}, claim)
			switch {
			case apierrors.IsNotFound(err) && configured:
				r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventIPAddressClaimGone, "ClaimIPAddress",
					"IPAddressClaim %s of spec.nics[%d] is gone while VM %s uses its address; the address may be given to another machine", name, i, om.Status.VMID)
				continue
			case apierrors.IsNotFound(err):
				if err := r.createIPClaim(ctx, s, name, i, pool); errors.Is(err, errMachineLeaving) {
					// The deletion (or the object's removal) is news this reconcile has not
					// seen yet; the event of it reconciles again.
					s.log.Info("Not claiming an IP address: the OVirtMachine is being deleted", "ipAddressClaim", klog.KRef(om.Namespace, name))
					return stop(ctrl.Result{}, nil)
				} else if err != nil {
					return stop(ctrl.Result{}, err)
				}
				waiting = append(waiting, fmt.Sprintf("%s (spec.nics[%d], %s %s)", name, i, pool.Kind, pool.Name))
				continue
			case err != nil:
				return stop(ctrl.Result{}, fmt.Errorf("reading IPAddressClaim %s: %w", name, err))
			}
			if !metav1.IsControlledBy(claim, om) {
				v1beta1conditions.MarkFalse(om, cond, infrav1.IPAddressInvalidReason, clusterv1.ConditionSeverityWarning,
					"IPAddressClaim %s exists but is not owned by this OVirtMachine: remove it or rename the machine", name)
				return stop(r.retryLater(), nil)
			}
			a, why, err := claimedAddress(ctx, r.Client, claim, infrav1.IPAddressClaimMachineLabel, machineLabelValue(om.Name))
			if err != nil {
				return stop(ctrl.Result{}, err)
			}
			if why != "" {
				if configured {
					continue
				}
				waiting = append(waiting, fmt.Sprintf("%s (spec.nics[%d], %s %s: %s)", name, i, pool.Kind, pool.Name, why))
				continue
			}
			allocated[i] = append(allocated[i], *a)
		}
	}
	if len(waiting) > 0 {
		v1beta1conditions.MarkFalse(om, cond, infrav1.WaitingForIPAddressReason, clusterv1.ConditionSeverityInfo,
			"waiting for the IPAM provider to allocate IPAddressClaim %s", strings.Join(waiting, ", "))
		// The IPAddressClaim watch reconciles again once an address is allocated.
		return stop(ctrl.Result{RequeueAfter: r.Intervals.Retry}, nil)
	}
	s.allocated = allocated
	if len(om.Status.Addresses) == 0 || om.Status.VMState != string(ovirt.VMStatusUp) {
		om.Status.Addresses = withAllocated(allocated, nil)
	}
	return next()
}

// errMachineLeaving: the OVirtMachine in the API server is being deleted, or gone, or lacks the
// finalizer, while this reconcile's copy (from the cache) says otherwise.
var errMachineLeaving = errors.New("the OVirtMachine is being deleted")

// createIPClaim creates the IPAddressClaim of one NIC and pool, owned by the machine. It first
// reads the OVirtMachine from the API server: a claim may only be created while the machine
// holds CAPOV's finalizer and is not being deleted, because only the deletion path (which the
// finalizer guarantees, and which lists the claims from the API server) gives the address back.
// A copy from the cache can be older than a deletion that found no claim, or than the removal
// of an object whose finalizer was never written: a claim created then, owned by a machine
// that is gone, would hold its address for good where no garbage collector runs, and until one
// runs elsewhere (the chaos suite's I4, seen in its fault-free baseline).
func (r *OVirtMachineReconciler) createIPClaim(ctx context.Context, s *machineScope, name string, nic int, pool infrav1.IPPoolReference) error {
	om := s.om
	cur := &infrav1.OVirtMachine{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(om), cur); err != nil {
		if apierrors.IsNotFound(err) {
			return errMachineLeaving
		}
		return fmt.Errorf("reading the OVirtMachine before claiming an address: %w", err)
	}
	if cur.UID != om.UID || !cur.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(cur, infrav1.MachineFinalizer) {
		return errMachineLeaving
	}
	claim := &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: om.Namespace,
			Labels: map[string]string{
				infrav1.IPAddressClaimMachineLabel: machineLabelValue(om.Name),
				infrav1.IPAddressClaimNICLabel:     strconv.Itoa(nic),
			},
		},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: pool.APIGroup, Kind: pool.Kind, Name: pool.Name}},
	}
	if v, ok := om.Labels[clusterv1.WatchLabel]; ok {
		// The manager's --watch-filter applies to the claims' watch too.
		claim.Labels[clusterv1.WatchLabel] = v
	}
	if s.cluster != nil {
		claim.Labels[clusterv1.ClusterNameLabel] = s.cluster.Name
		claim.Spec.ClusterName = s.cluster.Name
	}
	if err := controllerutil.SetControllerReference(om, claim, r.Client.Scheme()); err != nil {
		return fmt.Errorf("owning IPAddressClaim %s: %w", name, err)
	}
	if err := r.Client.Create(ctx, claim); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("creating IPAddressClaim %s: %w", name, err)
	}
	s.log.Info("Claimed an IP address", "ipAddressClaim", klog.KRef(om.Namespace, name), "pool", pool.Kind+"/"+pool.Name, "nic", nic)
	r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventIPAddressClaimed, "ClaimIPAddress",
		"Created IPAddressClaim %s for spec.nics[%d] from %s %s", name, nic, pool.Kind, pool.Name)
	return nil
}

// claimedAddress returns the address allocated to a claim, or why there is none yet (the
// pool's message when the provider reports one). Before it returns an address, the IPAddress
// holds infrav1.IPAddressInUseFinalizer and the label (key, value) of its owner: from then on
// the address stays taken in its pool, even if the claim is deleted early, until the owner
// releases it (releaseHeldAddresses).
func claimedAddress(ctx context.Context, c client.Client, claim *ipamv1.IPAddressClaim, key, value string) (*allocatedAddress, string, error) {
	if claim.Status.AddressRef.Name == "" {
		why := "no address yet"
		for _, c := range claim.Status.Conditions {
			if c.Type == ipamv1.IPAddressClaimReadyCondition && c.Status == metav1.ConditionFalse && c.Message != "" {
				why = c.Reason + ": " + c.Message
			}
		}
		return nil, why, nil
	}
	ip := &ipamv1.IPAddress{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Status.AddressRef.Name}, ip); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("IPAddress %s not found yet", claim.Status.AddressRef.Name), nil
		}
		return nil, "", fmt.Errorf("reading IPAddress %s: %w", claim.Status.AddressRef.Name, err)
	}
	addr, perr := netip.ParseAddr(strings.TrimSpace(ip.Spec.Address))
	if perr != nil || addr.Zone() != "" {
		// Not an error of the manager: the provider wrote it; the condition names it.
		return nil, fmt.Sprintf("IPAddress %s has an unusable address %q", ip.Name, ip.Spec.Address), nil //nolint:nilerr // reported in the condition
	}
	prefix := addr.BitLen()
	if ip.Spec.Prefix != nil {
		prefix = int(*ip.Spec.Prefix)
	}
	if prefix < 1 || prefix > addr.BitLen() {
		return nil, fmt.Sprintf("IPAddress %s has an unusable prefix %d", ip.Name, prefix), nil
	}
	if !controllerutil.ContainsFinalizer(ip, infrav1.IPAddressInUseFinalizer) || ip.Labels[key] != value {
		if !ip.DeletionTimestamp.IsZero() {
			// Released (its claim is being deleted) before CAPOV held it: not to be used.
			return nil, fmt.Sprintf("IPAddress %s is being deleted", ip.Name), nil
		}
		held := ip.DeepCopy()
		controllerutil.AddFinalizer(held, infrav1.IPAddressInUseFinalizer)
		if held.Labels == nil {
			held.Labels = map[string]string{}
		}
		held.Labels[key] = value
		// The optimistic lock keeps the IPAM provider's finalizers: a merge patch replaces the list.
		if err := c.Patch(ctx, held, client.MergeFromWithOptions(ip, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return nil, fmt.Sprintf("IPAddress %s changed while CAPOV held it; trying again", ip.Name), nil
			}
			return nil, "", fmt.Errorf("holding IPAddress %s (finalizer %s): %w", ip.Name, infrav1.IPAddressInUseFinalizer, err)
		}
	}
	return &allocatedAddress{addr: addr, prefix: prefix, gateway: strings.TrimSpace(ip.Spec.Gateway), claim: claim.Name}, "", nil
}

// withAllocated returns the allocated addresses (NIC by NIC, as InternalIP) followed by the
// reported ones that are not among them, at most maxAddresses.
func withAllocated(allocated [][]allocatedAddress, reported []clusterv1.MachineAddress) []clusterv1.MachineAddress {
	var out []clusterv1.MachineAddress
	seen := map[string]bool{}
	for _, nic := range allocated {
		for _, a := range nic {
			if s := a.addr.String(); !seen[s] {
				seen[s] = true
				out = append(out, clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: s})
			}
		}
	}
	for _, a := range reported {
		if !seen[a.Address] {
			seen[a.Address] = true
			out = append(out, a)
		}
	}
	if len(out) > maxAddresses {
		out = out[:maxAddresses]
	}
	return out
}

// releaseIPAddresses deletes the machine's IPAddressClaims once its VM is gone, so that the IPAM
// provider gives the addresses back to their pools. Kubernetes' garbage collector would delete
// them too (they are owned by the OVirtMachine), but only after the OVirtMachine is gone and
// only where a garbage collector runs: the finalizer must not drop before every claim is
// deleted. A claim marked for deletion is released: its IPAM provider returns the address
// without the OVirtMachine.
func (r *OVirtMachineReconciler) releaseIPAddresses(ctx context.Context, s *machineScope) error {
	om := s.om
	if !hasPools(om) {
		return nil
	}
	claims, err := r.machineClaims(ctx, om)
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, claim := range claims {
		names[claim.Name] = true
	}
	for i, nic := range om.Spec.NICs {
		for j := range nic.AddressesFromPools {
			names[ipClaimName(om.Name, i, j)] = true
		}
	}
	if err := releaseHeldAddresses(ctx, r.APIReader, r.Client, om.Namespace, infrav1.IPAddressClaimMachineLabel, machineLabelValue(om.Name), names); err != nil {
		return err
	}
	var released []string
	for _, claim := range claims {
		if !claim.DeletionTimestamp.IsZero() {
			continue
		}
		// The UID precondition leaves alone a claim of the same name created since the read.
		if err := r.Client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting IPAddressClaim %s: %w", claim.Name, err)
		}
		released = append(released, claim.Name)
	}
	if len(released) > 0 {
		s.log.Info("Released the IP addresses of the machine", "ipAddressClaims", released)
		r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventIPAddressesReleased, "ReleaseIPAddresses",
			"VM is gone: deleted IPAddressClaim %s", strings.Join(released, ", "))
	}
	return nil
}

// releaseHeldAddresses removes infrav1.IPAddressInUseFinalizer from the IPAddresses of one owner
// (its label key=value) whose claims are among claims: their pools may give the addresses to
// others once their claims are deleted (or at once, for a claim deleted early). Listed from the
// API server: an IPAddress held in the reconcile right before may not be in the cache yet.
func releaseHeldAddresses(ctx context.Context, r client.Reader, w client.Writer, namespace, key, value string, claims map[string]bool) error {
	list := &ipamv1.IPAddressList{}
	if err := r.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{key: value}); err != nil {
		return fmt.Errorf("listing the IPAddresses held for %s=%s: %w", key, value, err)
	}
	for i := range list.Items {
		ip := &list.Items[i]
		if !claims[ip.Spec.ClaimRef.Name] || !controllerutil.ContainsFinalizer(ip, infrav1.IPAddressInUseFinalizer) {
			continue
		}
		released := ip.DeepCopy()
		controllerutil.RemoveFinalizer(released, infrav1.IPAddressInUseFinalizer)
		if err := w.Patch(ctx, released, client.MergeFromWithOptions(ip, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing IPAddress %s (finalizer %s): %w", ip.Name, infrav1.IPAddressInUseFinalizer, err)
		}
	}
	return nil
}

// releaseAddressesOfGoneHolder releases what is still held for an OVirtMachine or OVirtCluster
// that no longer exists (the IPAddresses labelled key=machineLabelValue(holder.Name)): an
// IPAddress being deleted with infrav1.IPAddressInUseFinalizer on it. The holder's deletion
// released it before deleting its claim, but an IPAM provider that then removes its own
// finalizer with a patch computed from a copy older than that release (the in-cluster provider
// does, from its cache) writes CAPOV's finalizer back, and deletes the address: without this it
// never went back to its pool. No finalizer can be added to an object being deleted, so what is
// released here stays released. Read from the cache: the reconcile runs on the address's
// deletion (heldAddressToHolder) or the holder's removal.
func releaseAddressesOfGoneHolder(ctx context.Context, c client.Client, key string, holder client.ObjectKey) error {
	list := &ipamv1.IPAddressList{}
	if err := c.List(ctx, list, client.InNamespace(holder.Namespace), client.MatchingLabels{key: machineLabelValue(holder.Name)}); err != nil {
		return fmt.Errorf("listing the IPAddresses held for %s: %w", holder.Name, err)
	}
	for i := range list.Items {
		ip := &list.Items[i]
		if ip.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(ip, infrav1.IPAddressInUseFinalizer) {
			continue
		}
		released := ip.DeepCopy()
		controllerutil.RemoveFinalizer(released, infrav1.IPAddressInUseFinalizer)
		if err := c.Patch(ctx, released, client.MergeFromWithOptions(ip, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("releasing IPAddress %s of deleted %s (finalizer %s): %w", ip.Name, holder.Name, infrav1.IPAddressInUseFinalizer, err)
		}
		ctrl.LoggerFrom(ctx).Info("Released an IPAddress still held after its holder was deleted", "ipAddress", klog.KObj(ip), "address", ip.Spec.Address)
	}
	return nil
}

// heldAddressToHolder returns a map function from an IPAddress being deleted that CAPOV still
// holds for the label key to its holder (an OVirtMachine or an OVirtCluster), named by the
// address's claim through holderOf; the holder's reconcile releases it once the holder is gone
// (releaseAddressesOfGoneHolder).
func heldAddressToHolder(key string, holderOf func(claim string) (string, bool)) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		ip, ok := o.(*ipamv1.IPAddress)
		if !ok || ip.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(ip, infrav1.IPAddressInUseFinalizer) {
			return nil
		}
		label, ok := ip.Labels[key]
		if !ok {
			return nil
		}
		name, ok := holderOf(ip.Spec.ClaimRef.Name)
		if !ok || name == "" || machineLabelValue(name) != label {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ip.Namespace, Name: name}}}
	}
}

// machineOfClaim is the machine a claim is named for (ipClaimName: <machine>-<nic>-<pool>).
func machineOfClaim(claim string) (string, bool) {
	name := claim
	for range 2 {
		i := strings.LastIndexByte(name, '-')
		if i < 0 {
			return "", false
		}
		if _, err := strconv.Atoi(name[i+1:]); err != nil {
			return "", false
		}
		name = name[:i]
	}
	return name, true
}

// heldAddressToMachine maps an IPAddress left held for a deleted machine to that machine.
var heldAddressToMachine = heldAddressToHolder(infrav1.IPAddressClaimMachineLabel, machineOfClaim)

// machineClaims returns the IPAddressClaims the machine controls, read from the API server
// rather than the cache: the reconcile right before the deletion may have created a claim that
// the cache has not seen yet (its informer is not the OVirtMachines'), and a claim missed here
// would keep its address for good. They are the claims labelled with the machine's name and
// those with the names reconcileIPAddresses gives them (a claim whose label was edited away).
func (r *OVirtMachineReconciler) machineClaims(ctx context.Context, om *infrav1.OVirtMachine) ([]*ipamv1.IPAddressClaim, error) {
	list := &ipamv1.IPAddressClaimList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(om.Namespace),
		client.MatchingLabels{infrav1.IPAddressClaimMachineLabel: machineLabelValue(om.Name)}); err != nil {
		return nil, fmt.Errorf("listing the IPAddressClaims of the machine: %w", err)
	}
	var claims []*ipamv1.IPAddressClaim
	listed := map[string]bool{}
	for i := range list.Items {
		listed[list.Items[i].Name] = true
		if metav1.IsControlledBy(&list.Items[i], om) {
			claims = append(claims, &list.Items[i])
		}
	}
	for i, nic := range om.Spec.NICs {
		for j := range nic.AddressesFromPools {
			name := ipClaimName(om.Name, i, j)
			if listed[name] {
				continue
			}
			claim := &ipamv1.IPAddressClaim{}
			if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: om.Namespace, Name: name}, claim); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("reading IPAddressClaim %s: %w", name, err)
			}
			if metav1.IsControlledBy(claim, om) {
				claims = append(claims, claim)
			}
		}
	}
	return claims, nil
}

// guestDeviceName is the guest interface name of spec.nics[i].
func guestDeviceName(nic infrav1.NIC, i int) string {
	if nic.DeviceName != "" {
		return nic.DeviceName
	}
	return fmt.Sprintf("eth%d", i)
}

// nicNetwork is the resolved configuration of one NIC.
type nicNetwork struct {
	name       string
	mac        string
	v4, v6     []allocatedAddress
	gw4, gw6   string
	dhcp4      bool
	dhcp6      bool
	configured bool
}

// resolveNetwork resolves the configuration of every NIC from the spec and the allocated
// addresses: the NIC's gateway replaces the pool's of its family; DHCP for IPv4 is on when the
// NIC has no IPv4 address and dhcp4 is not false.
func resolveNetwork(om *infrav1.OVirtMachine, allocated [][]allocatedAddress, macs []string) []nicNetwork {
	out := make([]nicNetwork, len(om.Spec.NICs))
	for i, nic := range om.Spec.NICs {
		n := nicNetwork{name: guestDeviceName(nic, i), configured: nic.HasNetworkConfig()}
		if i < len(macs) {
			n.mac = macs[i]
		}
		if i < len(allocated) {
			for _, a := range allocated[i] {
				if a.addr.Is4() {
					n.v4 = append(n.v4, a)
					if n.gw4 == "" {
						n.gw4 = a.gateway
					}
				} else {
					n.v6 = append(n.v6, a)
					if n.gw6 == "" {
						n.gw6 = a.gateway
					}
				}
			}
		}
		if gw, err := netip.ParseAddr(nic.Gateway); err == nil {
			if gw.Is4() {
				n.gw4 = gw.String()
			} else {
				n.gw6 = gw.String()
			}
		}
		n.dhcp4 = len(n.v4) == 0 && (nic.DHCP4 == nil || *nic.DHCP4)
		n.dhcp6 = nic.DHCP6 != nil && *nic.DHCP6
		out[i] = n
	}
	return out
}

// dnsOf returns the nameservers and search domains of all NICs, in order, without duplicates.
func dnsOf(om *infrav1.OVirtMachine) (servers, search []string) {
	for _, nic := range om.Spec.NICs {
		for _, s := range nic.Nameservers {
			if !slices.Contains(servers, s) {
				servers = append(servers, s)
			}
		}
		for _, d := range nic.SearchDomains {
			if !slices.Contains(search, d) {
				search = append(search, d)
			}
		}
	}
	return servers, search
}

// errNetworkInvalid is a configuration oVirt cannot give the guest; its message names the fix.
type errNetworkInvalid struct{ msg string }

func (e *errNetworkInvalid) Error() string { return e.msg }

// cloudInitNetwork is the initialization oVirt turns into the network data of a cloud-init
// guest: one nic_configuration per NIC, which takes one address per IP family.
func cloudInitNetwork(om *infrav1.OVirtMachine, nets []nicNetwork) (*ovirt.NetworkConfig, error) {
	cfg := &ovirt.NetworkConfig{}
	cfg.DNSServers, cfg.DNSSearch = dnsOf(om)
	for i, n := range nets {
		if len(n.v4) > 1 || len(n.v6) > 1 {
			return nil, &errNetworkInvalid{fmt.Sprintf(
				"spec.nics[%d] got %d IPv4 and %d IPv6 addresses, but oVirt configures at most one of each family per NIC of a cloud-init template: keep one pool per family in spec.nics[%d].addressesFromPools",
				i, len(n.v4), len(n.v6), i)}
		}
		c := ovirt.NICConfiguration{Name: n.name, IPv4Boot: ovirt.BootProtocolNone, IPv6Boot: ovirt.BootProtocolNone}
		switch {
		case len(n.v4) == 1:
			c.IPv4Boot = ovirt.BootProtocolStatic
			c.IPv4 = &ovirt.IPConfig{Address: n.v4[0].addr.String(), Prefix: n.v4[0].prefix, Gateway: n.gw4}
		case n.dhcp4:
			c.IPv4Boot = ovirt.BootProtocolDHCP
		}
		switch {
		case len(n.v6) == 1:
			c.IPv6Boot = ovirt.BootProtocolStatic
			c.IPv6 = &ovirt.IPConfig{Address: n.v6[0].addr.String(), Prefix: n.v6[0].prefix, Gateway: n.gw6}
		case n.dhcp6:
			c.IPv6Boot = ovirt.BootProtocolDHCP
		}
		cfg.NICs = append(cfg.NICs, c)
	}
	return cfg, nil
}

// keyfilePath is where the NetworkManager keyfile of a NIC goes in an Ignition config.
func keyfilePath(n nicNetwork) string {
	return "/etc/NetworkManager/system-connections/capov-" + n.name + ".nmconnection"
}

// keyfile is the NetworkManager connection of one NIC, matched by its MAC address.
func keyfile(n nicNetwork, servers, search []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[connection]\nid=capov-%s\ntype=ethernet\nautoconnect=true\nautoconnect-priority=100\n\n", n.name)
	fmt.Fprintf(&b, "[ethernet]\nmac-address=%s\n\n", strings.ToUpper(n.mac))
	family := func(section string, addrs []allocatedAddress, gw string, dhcp bool, off string) {
		fmt.Fprintf(&b, "[%s]\n", section)
		switch {
		case len(addrs) > 0:
			b.WriteString("method=manual\n")
			for k, a := range addrs {
				fmt.Fprintf(&b, "address%d=%s/%d\n", k+1, a.addr, a.prefix)
			}
			if gw != "" {
				fmt.Fprintf(&b, "gateway=%s\n", gw)
			}
		case dhcp:
			b.WriteString("method=auto\n")
		default:
			fmt.Fprintf(&b, "method=%s\n", off)
		}
		var dns []string
		for _, s := range servers {
			if a, err := netip.ParseAddr(s); err == nil && a.Is4() == (section == "ipv4") {
				dns = append(dns, s)
			}
		}
		if len(dns) > 0 && (len(addrs) > 0 || dhcp) {
			fmt.Fprintf(&b, "dns=%s;\n", strings.Join(dns, ";"))
		}
		if len(search) > 0 && section == "ipv4" && (len(addrs) > 0 || dhcp) {
			fmt.Fprintf(&b, "dns-search=%s;\n", strings.Join(search, ";"))
		}
		b.WriteString("\n")
	}
	family("ipv4", n.v4, n.gw4, n.dhcp4, "disabled")
	family("ipv6", n.v6, n.gw6, n.dhcp6, "disabled")
	return b.String()
}

// ignitionWithKeyfiles merges one NetworkManager keyfile per NIC into an Ignition config (the
// Engine gives Ignition guests no network data of its own). The keyfiles replace files at the
// same paths; the rest of the config is kept as it is.
func ignitionWithKeyfiles(om *infrav1.OVirtMachine, config string, nets []nicNetwork) (string, error) {
	var cfg map[string]any
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		return "", &errNetworkInvalid{fmt.Sprintf("the bootstrap data is not a JSON Ignition config: %v", err)}
	}
	version := ""
	if ign, ok := cfg["ignition"].(map[string]any); ok {
		version, _ = ign["version"].(string)
	}
	storage, _ := cfg["storage"].(map[string]any)
	if storage == nil {
		storage = map[string]any{}
	}
	files, _ := storage["files"].([]any)
	servers, search := dnsOf(om)
	for i, n := range nets {
		if n.mac == "" {
			return "", &errNetworkInvalid{fmt.Sprintf("spec.nics[%d] has no MAC address in oVirt yet", i)}
		}
		path := keyfilePath(n)
		files = slices.DeleteFunc(files, func(f any) bool {
			m, ok := f.(map[string]any)
			return ok && m["path"] == path
		})
		f := map[string]any{
			"path": path, "mode": 0o600,
			"contents": map[string]any{"source": "data:," + url.PathEscape(keyfile(n, servers, search))},
		}
		if strings.HasPrefix(version, "2.") {
			f["filesystem"] = "root"
		} else {
			f["overwrite"] = true
		}
		files = append(files, f)
	}
	storage["files"] = files
	cfg["storage"] = storage
	out, err := json.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("encoding the Ignition config: %w", err)
	}
	return string(out), nil
}

// configureNetwork gives the VM its network configuration before it first starts: oVirt's
// initialization (nic_configurations, DNS) for a cloud-init template, NetworkManager keyfiles in
// the Ignition config for an Ignition one. macs are the MAC addresses of spec.nics, in order.
func (r *OVirtMachineReconciler) configureNetwork(ctx context.Context, s *machineScope, macs []string) (bool, ctrl.Result, error) {
	om, vm := s.om, s.vm
	if !hasAddressing(om) {
		return next()
	}
	fail := func(reason string, severity clusterv1.ConditionSeverity, format string, args ...any) (bool, ctrl.Result, error) {
		v1beta1conditions.MarkFalse(om, infrav1.MachineNetworkSetCondition, reason, severity, format, args...)
		return stop(r.retryLater(), nil)
	}
	if s.machine == nil || s.machine.Spec.Bootstrap.DataSecretName == nil {
		return fail(infrav1.WaitingForBootstrapDataReason, clusterv1.ConditionSeverityInfo, "waiting for the bootstrap data to configure the network")
	}
	boot, err := r.readBootstrapData(ctx, s)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fail(infrav1.WaitingForBootstrapDataReason, clusterv1.ConditionSeverityInfo, "waiting for bootstrap data Secret %s", *s.machine.Spec.Bootstrap.DataSecretName)
		}
		var invalid *bootstrapInvalidError
		if errors.As(err, &invalid) {
			return fail(infrav1.BootstrapDataInvalidReason, clusterv1.ConditionSeverityWarning, "%v", err)
		}
		return stop(ctrl.Result{}, fmt.Errorf("reading bootstrap data: %w", err))
	}
	nets := resolveNetwork(om, s.allocated, macs)
	update := ovirt.VMUpdate{}
	kind := "cloud-init network data"
	if boot.format == formatIgnition {
		kind = "NetworkManager keyfiles in the Ignition config"
		script, err := ignitionWithKeyfiles(om, boot.value, nets)
		if err != nil {
			var bad *errNetworkInvalid
			if errors.As(err, &bad) {
				return fail(infrav1.IPAddressInvalidReason, clusterv1.ConditionSeverityWarning, "%s", bad.msg)
			}
			return stop(ctrl.Result{}, err)
		}
		update.CustomScript = &script
	} else {
		cfg, err := cloudInitNetwork(om, nets)
		if err != nil {
			var bad *errNetworkInvalid
			if errors.As(err, &bad) {
				return fail(infrav1.IPAddressInvalidReason, clusterv1.ConditionSeverityWarning, "%s", bad.msg)
			}
			return stop(ctrl.Result{}, err)
		}
		update.Network = cfg
	}
	if err := s.ovirt.UpdateVM(ctx, vm.ID, update); err != nil {
		if errors.Is(err, ovirt.ErrLocked) {
			v1beta1conditions.MarkFalse(om, infrav1.MachineNetworkSetCondition, infrav1.NetworkSetupFailedReason, clusterv1.ConditionSeverityInfo,
				"configuring the network: VM %s is locked by oVirt; retrying", vm.ID)
			return stop(r.waitFor(s.om, infrav1.MachineNetworkSetCondition), nil)
		}
		if engineRefused(err) {
			return fail(infrav1.NetworkSetupFailedReason, clusterv1.ConditionSeverityWarning, "oVirt refused the network configuration of VM %s: %v", vm.ID, err)
		}
		return stop(ctrl.Result{}, fmt.Errorf("configuring the network of VM %s: %w", vm.ID, err))
	}
	if update.CustomScript != nil {
		// The VM stores the Ignition config now: its first start uses that one (runOnceScript).
		vm.CustomScriptStored = true
	}
	var summary []string
	for _, n := range nets {
		var parts []string
		for _, a := range append(slices.Clone(n.v4), n.v6...) {
			parts = append(parts, fmt.Sprintf("%s/%d", a.addr, a.prefix))
		}
		if n.dhcp4 {
			parts = append(parts, "dhcp4")
		}
		if n.dhcp6 {
			parts = append(parts, "dhcp6")
		}
		if len(parts) == 0 {
			parts = append(parts, "no address")
		}
		summary = append(summary, n.name+"="+strings.Join(parts, ","))
	}
	s.log.Info("Configured the VM's network", "vmID", vm.ID, "as", kind, "nics", summary)
	r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventNetworkConfigured, "ConfigureNetwork",
		"Gave VM %s its network configuration (%s): %s", vm.ID, kind, strings.Join(summary, " "))
	return next()
}
