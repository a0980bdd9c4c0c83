package controllers

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/diskalias"
	"github.com/capov/capov/pkg/ovirt"
)

// Event reasons of the VM contents.
const (
	eventDataDiskCreated   = "DataDiskCreated"
	eventDataDiskFailed    = "DataDiskCreateFailed"
	eventDataDiskMissing   = "DataDiskMissing"
	eventTagsAssigned      = "TagsAssigned"
	eventTagMissing        = "TagNotFound"
	eventTagCreated        = "TagCreated"
	dataDiskMarkerPrefix   = "capov datadisk="
	dataDiskProofPayloadV1 = "capov-datadisk-v1"
)

// dataDiskMarker is the ownership marker CAPOV writes into the description of each data disk it
// creates: the disk's name in spec.dataDisks, the id of the VM it was created for, and a proof
// (HMAC-SHA256 under the Cluster's ownership key, as the VM's marker) over both. A disk is this
// VM's own, and removed with it, only when its marker names this VM and its proof verifies: a
// copied or hand-written description proves nothing, and a disk without a marker (a CSI volume)
// blocks the deletion.
type dataDiskMarker struct {
	name, vmID, proof string
}

func (m dataDiskMarker) payload() []byte {
	return []byte(dataDiskProofPayloadV1 + "\n" + m.name + "\n" + m.vmID)
}

func (m dataDiskMarker) sign(key []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(m.payload())
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:proofLength])
}

func (m dataDiskMarker) verifies(key []byte) bool {
	if m.proof == "" || key == nil {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(m.proof)
	if err != nil || len(got) != proofLength {
		return false
	}
	want, _ := base64.RawURLEncoding.DecodeString(m.sign(key))
	return hmac.Equal(got, want)
}

// String renders the marker as it is written into the disk's description.
func (m dataDiskMarker) String() string {
	return fmt.Sprintf("%s%s vm=%s proof=%s", dataDiskMarkerPrefix, m.name, m.vmID, m.proof)
}

// parseDataDiskMarker reads the marker at the start of a disk's description.
func parseDataDiskMarker(desc string) (dataDiskMarker, bool) {
	if !strings.HasPrefix(desc, dataDiskMarkerPrefix) {
		return dataDiskMarker{}, false
	}
	fields := strings.Fields(strings.TrimPrefix(desc, dataDiskMarkerPrefix))
	if len(fields) < 3 || !strings.HasPrefix(fields[1], "vm=") || !strings.HasPrefix(fields[2], "proof=") {
		return dataDiskMarker{}, false
	}
	m := dataDiskMarker{name: fields[0], vmID: strings.TrimPrefix(fields[1], "vm="), proof: strings.TrimPrefix(fields[2], "proof=")}
	if m.name == "" || m.vmID == "" || m.proof == "" {
		return dataDiskMarker{}, false
	}
	return m, true
}

// ownDataDisks returns the disks of the VM that are provably its own data disks (disk id ->
// name): a marker for this VM whose proof verifies under key. A name claimed by two attached
// disks proves neither (one of them carries a copied description).
func ownDataDisks(disks []ovirt.Disk, vmID string, key []byte) map[string]string {
	if key == nil {
		return nil
	}
	byName := map[string][]string{}
	for _, d := range disks {
		m, ok := parseDataDiskMarker(d.Description)
		if !ok || m.vmID != vmID || !m.verifies(key) {
			continue
		}
		byName[m.name] = append(byName[m.name], d.ID)
	}
	own := map[string]string{}
	for name, ids := range byName {
		if len(ids) == 1 {
			own[ids[0]] = name
		}
	}
	return own
}

// dataDiskClaims returns the disks whose description carries a data-disk marker for this VM,
// proven or not, by the name they claim.
func dataDiskClaims(disks []ovirt.Disk, vmID string) map[string][]string {
	claims := map[string][]string{}
	for _, d := range disks {
		if m, ok := parseDataDiskMarker(d.Description); ok && m.vmID == vmID {
			claims[m.name] = append(claims[m.name], d.ID)
		}
	}
	return claims
}

// recordDataDisk records a data disk in status.dataDisks (name -> id).
func recordDataDisk(om *infrav1.OVirtMachine, name, id string) {
	for i := range om.Status.DataDisks {
		if om.Status.DataDisks[i].Name == name {
			om.Status.DataDisks[i].ID = id
			return
		}
	}
	om.Status.DataDisks = append(om.Status.DataDisks, infrav1.DataDiskStatus{Name: name, ID: id})
}

// dataDiskFormat is the format and allocation of a data disk: format empty is raw when
// preallocated, else cow.
func dataDiskFormat(format infrav1.DiskFormat, preallocated bool) (string, bool) {
	switch {
	case format != "":
		return string(format), !preallocated
	case preallocated:
		return ovirt.DiskFormatRaw, false
	}
	return ovirt.DiskFormatCow, true
}

// reconcileDataDisks creates the machine's data disks (spec.dataDisks) that its VM does not have
// yet, before its first start, each with its ownership marker in its description, and waits
// until oVirt has created them. It runs within the disk step (MachineDiskResized).
func (r *OVirtMachineReconciler) reconcileDataDisks(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	om, vm := s.om, s.vm
	if len(om.Spec.DataDisks) == 0 {
		return next()
	}
	if s.cluster == nil {
		return stop(ctrl.Result{}, fmt.Errorf("creating the data disks of VM %s: the machine's Cluster is not known", vm.ID))
	}
	key, err := ensureOwnershipKey(ctx, r.Client, r.APIReader, s.cluster)
	if err != nil {
		return stop(ctrl.Result{}, err)
	}
	own := ownDataDisks(vm.Disks, vm.ID, key)
	present := map[string]ovirt.Disk{}
	for _, d := range vm.Disks {
		if name, ok := own[d.ID]; ok {
			present[name] = d
			recordDataDisk(om, name, d.ID)
		}
	}
	resized := func(reason string, severity clusterv1.ConditionSeverity, format string, args ...any) {
		v1beta1conditions.MarkFalse(om, infrav1.MachineDiskResizedCondition, reason, severity, format, args...)
	}
	claims := dataDiskClaims(vm.Disks, vm.ID)
	var created, missing []string
	for _, dd := range om.Spec.DataDisks {
		if _, ok := present[dd.Name]; ok {
			continue
		}
		if ids := claims[dd.Name]; len(ids) > 0 {
			// A disk says it is this data disk without proving it (a copied or edited
			// description, or two disks claiming one name): another disk of that name would
			// only add to the confusion, and none of them is removed with the VM.
			msg := fmt.Sprintf("data disk %s of spec.dataDisks is claimed by disk(s) %s of VM %s whose ownership marker does not prove it (a copied or edited description, or two disks claiming one name): "+
				"CAPOV neither creates another nor removes them with the VM; detach the disk(s) that are not this VM's own", dd.Name, strings.Join(ids, ", "), vm.ID)
			if vm.Status != ovirt.VMStatusDown {
				r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventDataDiskMissing, "CheckDataDisks", "%s", msg)
				continue
			}
			if v1beta1conditions.GetReason(om, infrav1.MachineDiskResizedCondition) != infrav1.DataDiskCreateFailedReason {
				r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventDataDiskFailed, "CreateDataDisk", "%s", msg)
			}
			resized(infrav1.DataDiskCreateFailedReason, clusterv1.ConditionSeverityWarning, "%s", msg)
			return stop(r.retryLater(), nil)
		}
		if vm.Status != ovirt.VMStatusDown {
			// Data disks are created before the first start only: a running VM without one
			// lost it by hand (or was adopted so), and an empty disk in its place would hide that.
			missing = append(missing, dd.Name)
			continue
		}
		sdID, problem, err := r.dataDiskDomain(ctx, s, dd)
		if err != nil {
			return stop(ctrl.Result{}, err)
		}
		if problem != "" {
			resized(infrav1.StorageDomainNotFoundReason, clusterv1.ConditionSeverityWarning, "%s", problem)
			return stop(r.retryLater(), nil)
		}
		format, sparse := dataDiskFormat(dd.Format, dd.Preallocated)
		marker := dataDiskMarker{name: dd.Name, vmID: vm.ID}
		marker.proof = marker.sign(key)
		spec := ovirt.DiskSpec{
			Alias: diskalias.ForDataDisk(r.Gates, vm.Name, dd.Name), Description: marker.String(),
			SizeBytes: dd.SizeGB * GiB, StorageDomainID: sdID, Interface: string(dd.Interface),
			Format: format, Sparse: sparse, WipeAfterDelete: dd.WipeAfterDelete,
			CorrelationID: "capov-" + string(om.UID),
		}
		d, err := s.ovirt.AddDisk(ctx, vm.ID, spec)
		if err != nil {
			switch {
			case errors.Is(err, ovirt.ErrLocked):
				resized(infrav1.DataDiskCreatingReason, clusterv1.ConditionSeverityInfo, "VM %s is locked by oVirt; creating data disk %s when it is not", vm.ID, dd.Name)
				return stop(r.waitFor(om, infrav1.MachineDiskResizedCondition), nil)
			case engineRefused(err):
				msg := fmt.Sprintf("oVirt refused to create data disk %s (spec.dataDisks, %d GiB, format %s, preallocated %t): %v",
					dd.Name, dd.SizeGB, format, !sparse, err)
				if v1beta1conditions.GetReason(om, infrav1.MachineDiskResizedCondition) != infrav1.DataDiskCreateFailedReason {
					r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventDataDiskFailed, "CreateDataDisk", "%s", msg)
				}
				resized(infrav1.DataDiskCreateFailedReason, clusterv1.ConditionSeverityWarning, "%s", msg)
				return stop(r.retryLater(), nil)
			}
			return stop(ctrl.Result{}, fmt.Errorf("creating data disk %s of VM %s: %w", dd.Name, vm.ID, err))
		}
		recordDataDisk(om, dd.Name, d.ID)
		present[dd.Name] = *d
		created = append(created, fmt.Sprintf("%s (%d GiB)", spec.Alias, dd.SizeGB))
		s.log.Info("Created data disk", "vmID", vm.ID, "disk", dd.Name, "diskID", d.ID, "sizeGB", dd.SizeGB, "format", format, "sparse", sparse)
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("VM %s runs without data disk(s) %s of spec.dataDisks (removed by hand, or the VM was adopted without them): CAPOV creates data disks only before the first start; delete the Machine so that Cluster API replaces it",
			vm.ID, strings.Join(missing, ", "))
		r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventDataDiskMissing, "CheckDataDisks", "%s", msg)
		s.log.Info("Data disks missing from a running VM", "vmID", vm.ID, "disks", missing)
	}
	if len(created) > 0 {
		r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventDataDiskCreated, "CreateDataDisk", "Created data disks: %s", strings.Join(created, ", "))
		resized(infrav1.DataDiskCreatingReason, clusterv1.ConditionSeverityInfo, "oVirt is creating data disks %s", strings.Join(created, ", "))
		r.waits.began(om, infrav1.MachineDiskResizedCondition, infrav1.DataDiskCreatingReason, r.Now())
		return stop(r.waitFor(om, infrav1.MachineDiskResizedCondition), nil)
	}
	for _, dd := range om.Spec.DataDisks {
		if d, ok := present[dd.Name]; ok && d.Status != ovirt.DiskStatusOK && d.Status != "" {
			if d.Status == ovirt.DiskStatusIllegal {
				msg := fmt.Sprintf("data disk %s (%s) of VM %s is illegal in oVirt: its creation failed; remove the disk in oVirt so that CAPOV creates it again, or delete the Machine", dd.Name, d.ID, vm.ID)
				resized(infrav1.DataDiskCreateFailedReason, clusterv1.ConditionSeverityWarning, "%s", msg)
				return stop(r.retryLater(), nil)
			}
			resized(infrav1.DataDiskCreatingReason, clusterv1.ConditionSeverityInfo, "oVirt is creating data disk %s", dd.Name)
			return stop(r.waitFor(om, infrav1.MachineDiskResizedCondition), nil)
		}
	}
	r.waits.finished(om, infrav1.MachineDiskResizedCondition, infrav1.DataDiskCreatingReason, r.Now())
	return next()
}

// dataDiskDomain returns the id of the storage domain of a data disk: its storageDomain, else
// the domain of the VM's OS disk. problem says why there is none that can take it.
func (r *OVirtMachineReconciler) dataDiskDomain(ctx context.Context, s *machineScope, dd infrav1.DataDisk) (id, problem string, err error) {
	if dd.StorageDomain == "" {
		for _, d := range s.vm.Disks {
			if d.Bootable && d.StorageDomainID != "" {
				return d.StorageDomainID, "", nil
			}
		}
		for _, d := range s.vm.Disks {
			if slices.Contains(s.om.Status.SystemDiskIDs, d.ID) && d.StorageDomainID != "" {
				return d.StorageDomainID, "", nil
			}
		}
		return "", fmt.Sprintf("data disk %s has no storageDomain and VM %s has no OS disk whose storage domain it could share: set spec.dataDisks[].storageDomain", dd.Name, s.vm.ID), nil
	}
	sd, err := s.ovirt.FindStorageDomain(ctx, dd.StorageDomain)
	if err != nil && !errors.Is(err, ovirt.ErrNotFound) {
		return "", "", fmt.Errorf("finding storage domain %q: %w", dd.StorageDomain, err)
	}
	switch {
	case sd == nil:
		return "", fmt.Sprintf("storage domain %q of data disk %s (spec.dataDisks[].storageDomain) is not found in oVirt", dd.StorageDomain, dd.Name), nil
	case !sd.Usable:
		return "", fmt.Sprintf("storage domain %q of data disk %s cannot host disks: its status in its data center is %s, not active (activate it in oVirt or choose another)",
			dd.StorageDomain, dd.Name, cmpOr(sd.Status, "unknown")), nil
	}
	return sd.ID, "", nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// withoutOwnDataDisks drops from disks the machine's provable data disks (ownDataDisks): what
// remains is what must block its deletion. The key is read only when there is something to drop.
func (r *OVirtMachineReconciler) withoutOwnDataDisks(ctx context.Context, s *machineScope, vmID string, all, disks []ovirt.Disk) ([]ovirt.Disk, error) {
	if len(disks) == 0 {
		return disks, nil
	}
	key, err := readOwnershipKey(ctx, r.APIReader, s.om.Namespace, clusterOf(s))
	if err != nil {
		return nil, err
	}
	own := ownDataDisks(all, vmID, key)
	return slices.DeleteFunc(slices.Clone(disks), func(d ovirt.Disk) bool {
		_, ok := own[d.ID]
		return ok
	}), nil
}

// isDataDiskOf reports whether the disk carries a data-disk marker for this VM (proof not
// checked): the template's disks never do, so such a disk is never taken for one of them.
func isDataDiskOf(d ovirt.Disk, vmID string) bool {
	m, ok := parseDataDiskMarker(d.Description)
	return ok && m.vmID == vmID
}

// tagCache keeps the ids of the Engine's tags by provider and name, so that a machine's tags cost
// no lookup once a machine of the provider resolved them.
type tagCache struct {
	mu  sync.Mutex
	ids map[string]map[string]string
}

func (c *tagCache) get(provider, name string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.ids[provider][name]
	return id, ok
}

func (c *tagCache) put(provider, name, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[string]map[string]string{}
	}
	if c.ids[provider] == nil {
		c.ids[provider] = map[string]string{}
	}
	c.ids[provider][name] = id
}

func (c *tagCache) drop(provider, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ids[provider], name)
}

// wantedTags are the tags of the machine's VM: its spec.tags and its OVirtCluster's, sorted,
// each once.
func (r *OVirtMachineReconciler) wantedTags(ctx context.Context, s *machineScope) ([]string, error) {
	tags := slices.Clone(s.om.Spec.Tags)
	oc, err := r.ovirtCluster(ctx, s)
	if err != nil {
		return nil, err
	}
	if oc != nil {
		tags = append(tags, oc.Spec.Tags...)
	}
	slices.Sort(tags)
	return slices.Compact(tags), nil
}

// resolveTags returns the ids of the tags by name, creating the missing ones when the provider
// allows it. missing names the tags that do not exist (and were not created).
func (r *OVirtMachineReconciler) resolveTags(ctx context.Context, s *machineScope, names []string) (ids map[string]string, missing []string, err error) {
	provider := s.provider.Name
	ids = map[string]string{}
	for _, name := range names {
		if id, ok := r.tags.get(provider, name); ok {
			ids[name] = id
			continue
		}
		tag, err := s.ovirt.FindTag(ctx, name)
		if errors.Is(err, ovirt.ErrNotFound) && ptr.Deref(s.provider.Spec.CreateMissingTags, false) {
			tag, err = s.ovirt.CreateTag(ctx, name, "Created by CAPOV for spec.tags")
			if errors.Is(err, ovirt.ErrConflict) {
				// Created meanwhile by another machine.
				tag, err = s.ovirt.FindTag(ctx, name)
			} else if err == nil {
				s.log.Info("Created oVirt tag", "tag", name, "tagID", tag.ID)
				r.Recorder.Eventf(s.om, nil, corev1.EventTypeNormal, eventTagCreated, "CreateTag", "Created oVirt tag %s (the OVirtProvider's spec.createMissingTags)", name)
			}
		}
		switch {
		case errors.Is(err, ovirt.ErrNotFound):
			missing = append(missing, name)
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("finding oVirt tag %q: %w", name, err)
		}
		r.tags.put(provider, name, tag.ID)
		ids[name] = tag.ID
	}
	return ids, missing, nil
}

// tagProblem reports whether MachineCreated is False because of the machine's tags (the VM
// exists): only reconcileTags sets it True again.
func tagProblem(om *infrav1.OVirtMachine) bool {
	reason := v1beta1conditions.GetReason(om, infrav1.MachineCreatedCondition)
	return v1beta1conditions.IsFalse(om, infrav1.MachineCreatedCondition) &&
		(reason == infrav1.TagNotFoundReason || reason == infrav1.TagAssignFailedReason)
}

// reconcileTags assigns the machine's tags (spec.tags and the OVirtCluster's) to its VM, at
// creation and whenever one was removed by hand. The VM's assigned tags come with its read (or
// the inventory's listing), and tag ids are resolved once per provider, so a machine whose tags
// are all there costs no call. Before the first start a tag that cannot be assigned holds the
// machine (MachineCreated False); afterwards it is reported in an event only, so that a tag
// deleted in oVirt never makes a running machine unready.
func (r *OVirtMachineReconciler) reconcileTags(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	om, vm := s.om, s.vm
	if s.vmFromStatus {
		return next()
	}
	names, err := r.wantedTags(ctx, s)
	if err != nil {
		return stop(ctrl.Result{}, err)
	}
	done := func() (bool, ctrl.Result, error) {
		if tagProblem(om) {
			v1beta1conditions.MarkTrue(om, infrav1.MachineCreatedCondition)
		}
		return next()
	}
	if len(names) == 0 || !vm.TagsKnown {
		// Nothing to assign, or the Engine left the VM's tags out of the read: nothing can be
		// decided from it.
		return done()
	}
	problem := func(reason, event, msg string) (bool, ctrl.Result, error) {
		if provisioned(om) {
			r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, event, "AssignTags", "%s", msg)
			s.log.Info("Cannot put the machine's tags back on its VM", "vmID", vm.ID, "why", msg)
			return done()
		}
		if v1beta1conditions.GetReason(om, infrav1.MachineCreatedCondition) != reason {
			r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, event, "AssignTags", "%s", msg)
		}
		v1beta1conditions.MarkFalse(om, infrav1.MachineCreatedCondition, reason, clusterv1.ConditionSeverityWarning, "%s", msg)
		return stop(r.retryLater(), nil)
	}
	ids, missing, err := r.resolveTags(ctx, s, names)
	if err != nil {
		return stop(ctrl.Result{}, err)
	}
	if len(missing) > 0 {
		return problem(infrav1.TagNotFoundReason, eventTagMissing, missingTagsMessage(missing, s.provider.Name))
	}
	var assigned []string
	for _, name := range names {
		id := ids[name]
		if slices.Contains(vm.TagIDs, id) {
			continue
		}
		if err := s.ovirt.AssignTag(ctx, vm.ID, id); err != nil {
			switch {
			case errors.Is(err, ovirt.ErrNotFound):
				// The tag went away (or was recreated with another id): look it up again.
				r.tags.drop(s.provider.Name, name)
				return stop(ctrl.Result{RequeueAfter: r.recentRead()}, nil)
			case engineRefused(err):
				return problem(infrav1.TagAssignFailedReason, eventTagMissing, fmt.Sprintf("oVirt refused to assign tag %s to VM %s: %v", name, vm.ID, err))
			}
			return stop(ctrl.Result{}, fmt.Errorf("assigning tag %s to VM %s: %w", name, vm.ID, err))
		}
		vm.TagIDs = append(vm.TagIDs, id)
		assigned = append(assigned, name)
	}
	if len(assigned) > 0 {
		s.log.Info("Assigned tags to the VM", "vmID", vm.ID, "tags", assigned)
		r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventTagsAssigned, "AssignTags", "Assigned tags %s to VM %s", strings.Join(assigned, ", "), vm.ID)
	}
	return done()
}

// missingTagsMessage says which tags oVirt lacks and how to fix it.
func missingTagsMessage(missing []string, provider string) string {
	return fmt.Sprintf("oVirt has no tag %s (spec.tags or the OVirtCluster's spec.tags): create it in oVirt, or set spec.createMissingTags: true on OVirtProvider %s",
		strings.Join(missing, ", "), provider)
}

// Engine names of the API's enums.
var (
	resumeBehaviours = map[infrav1.ResumeBehaviour]string{infrav1.ResumeBehaviourAutoResume: "auto_resume",
		infrav1.ResumeBehaviourLeavePaused: "leave_paused", infrav1.ResumeBehaviourKill: "kill"}
	cpuModes = map[infrav1.CPUMode]string{infrav1.CPUModeHostPassthrough: ovirt.CPUModeHostPassthrough,
		infrav1.CPUModeHostModel: ovirt.CPUModeHostModel, infrav1.CPUModeCustom: ovirt.CPUModeCustom}
	autoPinnings = map[infrav1.AutoPinning]string{infrav1.AutoPinningDisabled: ovirt.AutoPinningDisabled,
		infrav1.AutoPinningExisting: ovirt.AutoPinningExisting, infrav1.AutoPinningAdjust: ovirt.AutoPinningAdjust}
)

// hugepagesProperty is the oVirt custom property behind spec.performance.hugePagesKiB.
const hugepagesProperty = "hugepages"

// vmContents completes the create request with the VM contents of the spec that go with it:
// the allocation of the cloned disks, custom properties, high availability and the performance
// profile. problem (with its reason) says why the VM cannot be created as asked; none of it
// costs an Engine call but the lease's storage domain lookup.
func (r *OVirtMachineReconciler) vmContents(ctx context.Context, s *machineScope, spec *ovirt.VMSpec, tpl *ovirt.Template, clone bool) (reason, problem string, err error) {
	om := s.om
	if od := om.Spec.OSDisk; od != nil {
		if !clone {
			return infrav1.OSDiskNeedsCloneReason, fmt.Sprintf("spec.osDisk asks for format %q, preallocated %t, but the disks are not cloned "+
				"(diskclone resolves to false from OVirtProvider %s or the disk-clone gate): a thin overlay on the template keeps the template's allocation; set spec.diskclone: true in the OVirtMachineTemplate",
				od.Format, ptr.Deref(od.Preallocated, false), s.provider.Name), nil
		}
		spec.DiskFormat = string(od.Format)
		if od.Preallocated != nil {
			spec.DiskSparse = ptr.To(!*od.Preallocated)
			if *od.Preallocated && spec.DiskFormat == "" {
				spec.DiskFormat = ovirt.DiskFormatRaw
			}
		}
		spec.TemplateDisks = tpl.Disks
	}
	for _, cp := range om.Spec.CustomProperties {
		spec.CustomProperties = append(spec.CustomProperties, ovirt.CustomProperty{Name: cp.Name, Value: cp.Value})
	}
	if v := mdevTypeValue(om.Spec.GPUs); v != "" {
		spec.CustomProperties = append(spec.CustomProperties, ovirt.CustomProperty{Name: mdevTypeProperty, Value: v})
	}
	if p := om.Spec.Performance; p != nil {
		if p.HugePagesKiB > 0 {
			spec.CustomProperties = append(spec.CustomProperties, ovirt.CustomProperty{Name: hugepagesProperty, Value: fmt.Sprint(p.HugePagesKiB)})
		}
		spec.Performance = ovirt.Performance{CPUMode: cpuModes[p.CPUMode], AutoPinningPolicy: autoPinnings[p.AutoPinning],
			IOThreads: int(p.IOThreads), MultiQueues: p.MultiQueues, Ballooning: p.Ballooning}
	}
	if ha := om.Spec.HighAvailability; ha != nil {
		spec.HighAvailability = &ovirt.HighAvailability{Enabled: ha.Enabled, Priority: int(ha.Priority), ResumeBehaviour: resumeBehaviours[ha.ResumeBehaviour]}
		if ha.LeaseStorageDomain != "" {
			sd, err := s.ovirt.FindStorageDomain(ctx, ha.LeaseStorageDomain)
			if err != nil && !errors.Is(err, ovirt.ErrNotFound) {
				return "", "", fmt.Errorf("finding storage domain %q: %w", ha.LeaseStorageDomain, err)
			}
			if sd == nil {
				return infrav1.StorageDomainNotFoundReason, fmt.Sprintf("storage domain %q of spec.highAvailability.leaseStorageDomain is not found in oVirt", ha.LeaseStorageDomain), nil
			}
			spec.HighAvailability.LeaseStorageDomainID = sd.ID
		}
	}
	names, err := r.wantedTags(ctx, s)
	if err != nil {
		return "", "", err
	}
	if len(names) > 0 {
		// Resolved (and created, if the provider allows) before the VM exists: a missing tag
		// holds the creation, not a half-made VM.
		_, missing, err := r.resolveTags(ctx, s, names)
		if err != nil {
			return "", "", err
		}
		if len(missing) > 0 {
			return infrav1.TagNotFoundReason, missingTagsMessage(missing, s.provider.Name), nil
		}
	}
	return "", "", nil
}
