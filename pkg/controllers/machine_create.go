package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/featuregates"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/storagerule"
)

// Bootstrap data formats (the "format" key of a CAPI bootstrap data Secret).
const (
	formatCloudConfig = "cloud-config"
	formatIgnition    = "ignition"
	// osTypeIgnition is the oVirt OS type for which the Engine builds an ignition config drive.
	osTypeIgnition = "rhcos_x64"
)

// ResolveStorageDomain returns the storage domain for the disks of a new VM: the
// OVirtMachine's, else the OVirtProvider's, else "" (the template's).
func ResolveStorageDomain(machine, provider string) string {
	if machine != "" {
		return machine
	}
	return provider
}

// bootstrapData is the payload for oVirt's initialization.custom_script.
type bootstrapData struct {
	value  string
	format string
}

// bootstrapInvalidError is a bootstrap data Secret that exists but cannot be used.
type bootstrapInvalidError struct{ msg string }

func (e *bootstrapInvalidError) Error() string { return e.msg }

// readBootstrapData reads the Machine's bootstrap data Secret directly from the API server (it
// is read once per VM; caching every Secret of the cluster would cost memory for nothing).
func (r *OVirtMachineReconciler) readBootstrapData(ctx context.Context, s *machineScope) (*bootstrapData, error) {
	name := ptr.Deref(s.machine.Spec.Bootstrap.DataSecretName, "")
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.machine.Namespace, Name: name}, secret); err != nil {
		return nil, err
	}
	value, ok := secret.Data["value"]
	if !ok || len(value) == 0 {
		return nil, &bootstrapInvalidError{fmt.Sprintf("bootstrap data Secret %s/%s has no key \"value\"", secret.Namespace, name)}
	}
	format := string(secret.Data["format"])
	if format == "" {
		format = formatCloudConfig
	}
	if format != formatCloudConfig && format != formatIgnition {
		return nil, &bootstrapInvalidError{fmt.Sprintf("bootstrap data Secret %s/%s has format %q; CAPOV supports cloud-config and ignition", secret.Namespace, name, format)}
	}
	if format == formatIgnition && !isIgnitionConfig(value) {
		// The Engine would create the VM and then refuse every start ("Failed to build
		// ignition data").
		return nil, &bootstrapInvalidError{fmt.Sprintf("bootstrap data Secret %s/%s has format ignition but its value is not a JSON Ignition config (an object with ignition.version); oVirt cannot build the config drive from it", secret.Namespace, name)}
	}
	return &bootstrapData{value: string(value), format: format}, nil
}

// bootstrapScript is the initialization custom script of bootstrap data: an Ignition config as
// it is, cloud-config rendered for the Engine's cloud-init user data.
func bootstrapScript(boot *bootstrapData, hostName string) (string, error) {
	if boot.format == formatIgnition {
		return boot.value, nil
	}
	return renderCloudConfigTemplate(boot.value, hostName)
}

// isIgnitionConfig reports whether data is a JSON object with an ignition.version, the least the
// Engine needs to build an Ignition config drive.
func isIgnitionConfig(data []byte) bool {
	var cfg struct {
		Ignition struct {
			Version string `json:"version"`
		} `json:"ignition"`
	}
	return json.Unmarshal(data, &cfg) == nil && cfg.Ignition.Version != ""
}

// bootstrapMismatch returns why the bootstrap data cannot work with the template's OS type, ""
// when it can. For OS type rhcos_x64 the Engine treats the custom script as an Ignition config
// and refuses to start the VM otherwise; for every other OS type it composes cloud-init
// user-data around the script, which an Ignition guest never reads.
func bootstrapMismatch(boot *bootstrapData, tpl *ovirt.Template, secretName *string) string {
	isIgnitionOS := tpl.OSType == osTypeIgnition
	switch {
	case boot.format == formatIgnition && !isIgnitionOS:
		return fmt.Sprintf("bootstrap data Secret %s has format ignition but template %q has OS type %q, for which oVirt gives the guest cloud-init: use a template with OS type %s (an Ignition image) or a cloud-init bootstrap provider",
			ptr.Deref(secretName, ""), tpl.Name, tpl.OSType, osTypeIgnition)
	case boot.format != formatIgnition && isIgnitionOS:
		return fmt.Sprintf("bootstrap data Secret %s has format %s but template %q has OS type %s, for which oVirt requires an Ignition config and refuses to start the VM otherwise: use an Ignition bootstrap provider (format: ignition) or a cloud-init template",
			ptr.Deref(secretName, ""), boot.format, tpl.Name, tpl.OSType)
	}
	return ""
}

// createVM creates the VM of the machine from its template and records its id at once.
func (r *OVirtMachineReconciler) createVM(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	om := s.om
	created := func(reason string, severity clusterv1.ConditionSeverity, format string, args ...any) {
		v1beta1conditions.MarkFalse(om, infrav1.MachineCreatedCondition, reason, severity, format, args...)
	}
	if s.machine.Spec.Bootstrap.DataSecretName == nil {
		created(infrav1.WaitingForBootstrapDataReason, clusterv1.ConditionSeverityInfo, "waiting for the bootstrap provider to create the bootstrap data")
		// The Machine watch reconciles again once dataSecretName is set.
		return stop(ctrl.Result{}, nil)
	}
	boot, err := r.readBootstrapData(ctx, s)
	if err != nil {
		if apierrors.IsNotFound(err) {
			created(infrav1.WaitingForBootstrapDataReason, clusterv1.ConditionSeverityInfo, "waiting for bootstrap data Secret %s", *s.machine.Spec.Bootstrap.DataSecretName)
			return stop(r.waitFor(s.om, infrav1.MachineCreatedCondition), nil)
		}
		var invalid *bootstrapInvalidError
		if errors.As(err, &invalid) {
			created(infrav1.BootstrapDataInvalidReason, clusterv1.ConditionSeverityWarning, "%v", err)
			return stop(r.retryLater(), nil)
		}
		return stop(ctrl.Result{}, fmt.Errorf("reading bootstrap data: %w", err))
	}

	place, miss, err := r.resolvePlacement(ctx, s)
	if err != nil {
		return stop(ctrl.Result{}, err)
	}
	var ocl *ovirt.Cluster
	var tpl *ovirt.Template
	if miss == nil {
		ocl, tpl, miss, err = findClusterAndTemplate(ctx, s.ovirt, place.ovirtCluster, om.Spec.Template, place.failureDomain)
		if err != nil {
			return stop(ctrl.Result{}, err)
		}
	}
	if miss != nil {
		created(miss.reason, clusterv1.ConditionSeverityWarning, "%s", miss.message)
		return stop(r.retryLater(), nil)
	}

	if msg := bootstrapMismatch(boot, tpl, s.machine.Spec.Bootstrap.DataSecretName); msg != "" {
		if v1beta1conditions.GetReason(om, infrav1.MachineCreatedCondition) != infrav1.BootstrapFormatMismatchReason {
			r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventCreateFailed, "CreateVM", "%s", msg)
		}
		created(infrav1.BootstrapFormatMismatchReason, clusterv1.ConditionSeverityWarning, "%s", msg)
		return stop(r.retryLater(), nil)
	}

	clone := *storagerule.Clone(om.Spec.DiskClone, s.provider.Spec.DiskClone, true, r.Gates.DiskClone)
	vmName := VMNameFor(om.Namespace, om.Name)
	// The owner marker carries the ownership proof from the start: the key exists before the VM
	// (ownership_proof.go), and the proof costs no Engine call of its own.
	if s.cluster == nil {
		return stop(ctrl.Result{}, fmt.Errorf("creating VM %q: the machine's Cluster is not known", vmName))
	}
	key, err := ensureOwnershipKey(ctx, r.Client, r.APIReader, s.cluster)
	if err != nil {
		return stop(ctrl.Result{}, err)
	}
	marker := ownerFor(om, r.ManagementClusterID, s.cluster.Name, vmName)
	marker.proof = marker.sign(key)
	spec := ovirt.VMSpec{
		Name: vmName, ClusterID: ocl.ID, TemplateID: tpl.ID, Clone: clone,
		Type: ovirt.VMType(om.Spec.VMType), Comment: marker.String(),
		Description: truncateText(fmt.Sprintf("Cluster API machine %s/%s of cluster %s, managed by CAPOV",
			s.machine.Namespace, s.machine.Name, s.cluster.Name), maxDescriptionLength),
		// The Engine takes at most 50 characters of [0-9a-zA-Z_-]: "capov-" and the 36 of a UID.
		CorrelationID: "capov-" + string(om.UID),
	}
	// The guest's host name, which kubeadm takes as the Node's name: cloud-init sets it from the
	// config drive's meta data; for an Ignition guest the Engine merges an /etc/hostname entry
	// into the config (IgnitionHandler.handleHostname), only when the VM has a host name.
	spec.HostName = hostNameFor(om.Namespace, om.Name)
	if boot.format == formatIgnition {
		// The Engine builds an ignition config drive only for this OS type (the template's).
		spec.OSType = osTypeIgnition
	}
	// The script is checked now; it goes to the VM's first run (run once, reconcilePower),
	// or, with --keep-bootstrap-data, is stored on the VM.
	script, err := bootstrapScript(boot, spec.HostName)
	if err != nil {
		created(infrav1.BootstrapDataInvalidReason, clusterv1.ConditionSeverityWarning, "bootstrap data Secret %s/%s: %v",
			s.machine.Namespace, ptr.Deref(s.machine.Spec.Bootstrap.DataSecretName, ""), err)
		return stop(r.retryLater(), nil)
	}
	if r.KeepBootstrapData {
		spec.CustomScript = script
	}
	if c := om.Spec.CPU; c != nil {
		spec.Sockets, spec.Cores, spec.Threads = int(c.Sockets), int(c.Cores), int(c.Threads)
	}
	if m := om.Spec.Memory; m != nil {
		spec.MemoryBytes = m.SizeMB << 20
		spec.GuaranteedMemoryBytes = m.GuaranteedMB << 20
	}
	sdName := ResolveStorageDomain(om.Spec.StorageDomainName, s.provider.Spec.StorageDomainName)
	if place.storageDomain != "" {
		sdName = place.storageDomain
	}
	if sdName != "" {
		sd, err := s.ovirt.FindStorageDomain(ctx, sdName)
		if err != nil && !errors.Is(err, ovirt.ErrNotFound) {
			return stop(ctrl.Result{}, fmt.Errorf("finding storage domain %q: %w", sdName, err))
		}
		switch {
		case sd == nil:
			created(infrav1.StorageDomainNotFoundReason, clusterv1.ConditionSeverityWarning,
				"storage domain %q (spec.storagedomainname or the OVirtProvider's) is not found in oVirt", sdName)
			return stop(r.retryLater(), nil)
		case !sd.Usable:
			status := sd.Status
			if status == "" {
				status = "unknown"
			}
			created(infrav1.StorageDomainNotFoundReason, clusterv1.ConditionSeverityWarning,
				"storage domain %q (spec.storagedomainname or the OVirtProvider's) cannot host disks: its status in its data center is %s, not active (activate it in oVirt or choose another)", sdName, status)
			return stop(r.retryLater(), nil)
		}
		// A template's disk may have copies on several storage domains: any of them is valid
		// without cloning.
		onTemplateDomain := len(tpl.Disks) > 0
		for _, d := range tpl.Disks {
			onTemplateDomain = onTemplateDomain && (d.StorageDomainID == sd.ID || slices.Contains(d.StorageDomainIDs, sd.ID))
		}
		// The rule admission applies too, here with the Engine's facts (storagerule).
		if storagerule.Decide(sdName, &clone, &onTemplateDomain) == storagerule.RequiresClone {
			created(infrav1.StorageDomainRequiresCloneReason, clusterv1.ConditionSeverityWarning,
				"storage domain %q differs from the template's and disks are not cloned: %s", sdName, featuregates.EnableDiskCloneHint(s.provider.Name))
			return stop(r.retryLater(), nil)
		}
		if clone {
			spec.StorageDomainID = sd.ID
			spec.TemplateDisks = tpl.Disks
		}
	}

	if reason, problem, err := r.vmContents(ctx, s, &spec, tpl, clone); err != nil || problem != "" {
		if err != nil {
			return stop(ctrl.Result{}, err)
		}
		if v1beta1conditions.GetReason(om, infrav1.MachineCreatedCondition) != reason {
			r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventCreateFailed, "CreateVM", "%s", problem)
		}
		created(reason, clusterv1.ConditionSeverityWarning, "%s", problem)
		return stop(r.retryLater(), nil)
	}
	if om.Spec.HasPassthrough() {
		// The devices are chosen and claimed before the VM exists: it is created pinned to their
		// host (the Engine attaches host devices only to a VM pinned to exactly one host).
		hostID, reason, problem, err := r.reserveHostDevices(ctx, s, place.ovirtCluster)
		if err != nil {
			return stop(ctrl.Result{}, err)
		}
		if problem != "" {
			if reason == infrav1.HostDeviceClaimConflictReason {
				created(reason, clusterv1.ConditionSeverityInfo, "%s", problem)
				return stop(ctrl.Result{RequeueAfter: r.Intervals.VMPoll}, nil)
			}
			if v1beta1conditions.GetReason(om, infrav1.MachineCreatedCondition) != reason {
				r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventNoHostWithFreeDevice, "CreateVM", "%s", problem)
			}
			created(reason, clusterv1.ConditionSeverityWarning, "%s", problem)
			return stop(r.retryLater(), nil)
		}
		spec.PinnedHostID = hostID
	}
	if err := r.persistCreateRequested(ctx, om, vmName); err != nil {
		return stop(ctrl.Result{}, err)
	}
	vm, err := s.ovirt.CreateVM(ctx, spec)
	if err != nil && errors.Is(err, ovirt.ErrConflict) && !errors.Is(err, ovirt.ErrLocked) {
		// The name is in use (the first create of an object does not look it up first): the
		// lookup says whose VM it is, and adopts this object's own, which this create did not
		// make (an earlier release's, whose create was not recorded): its disks may not all be
		// the template's.
		if found, cont, res, lerr := r.adoptByName(ctx, s, false); found {
			return cont, res, lerr
		}
	}
	if err != nil {
		switch {
		case errors.Is(err, ovirt.ErrNotFound):
			created(infrav1.TemplateNotFoundReason, clusterv1.ConditionSeverityWarning, "oVirt refused to create the VM: %v", err)
			return stop(r.retryLater(), nil)
		case ovirt.PermissionDenied(err):
			msg := fmt.Sprintf("oVirt refused to create the VM: %v; %s", err, missingPermission("CREATE_VM on oVirt cluster "+ocl.Name+" and on template "+tpl.Name+
				" (and CREATE_DISK on the storage domain when cloning to storagedomainname)"))
			created(infrav1.VMCreateFailedReason, clusterv1.ConditionSeverityWarning, "%s", msg)
			r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventCreateFailed, "CreateVM", "%s", msg)
			return stop(r.retryLater(), nil)
		case errors.Is(err, ovirt.ErrInvalid), errors.Is(err, ovirt.ErrConflict):
			created(infrav1.VMCreateFailedReason, clusterv1.ConditionSeverityWarning, "oVirt refused to create the VM: %v", err)
			r.Recorder.Eventf(om, nil, corev1.EventTypeWarning, eventCreateFailed, "CreateVM", "oVirt refused to create the VM: %v", err)
			return stop(r.retryLater(), nil)
		}
		return stop(ctrl.Result{}, fmt.Errorf("creating VM %q: %w", vmName, err))
	}
	// Persist the id now (the deferred patch right after this return): nothing else talks to
	// oVirt before it, and a crash before it is covered by the name + owner marker lookup.
	om.Status.VMID = vm.ID
	om.Status.VMName = vmName
	om.Spec.ProviderID = infrav1.ProviderIDPrefix + vm.ID
	om.Status.DiskClone = ptr.To(clone)
	om.Status.FailureDomain = place.failureDomain
	om.Status.SystemDiskIDs = nil
	om.Status.SystemDisksPending = ptr.To(true)
	r.recordEngine(ctx, s)
	s.vm = vm
	s.log.Info("Created VM", "vmID", vm.ID, "vmName", vmName, "template", tpl.Name, "clone", clone,
		"ovirtCluster", place.ovirtCluster, "failureDomain", place.failureDomain)
	r.Recorder.Eventf(om, nil, corev1.EventTypeNormal, eventVMCreated, "CreateVM", "Created VM %s from template %s (clone=%t)", vm.ID, tpl.Name, clone)
	created(infrav1.VMCreatingReason, clusterv1.ConditionSeverityInfo, "oVirt is creating VM %s from template %s", vm.ID, tpl.Name)
	r.waits.began(om, infrav1.MachineCreatedCondition, infrav1.VMCreatingReason, r.Now())
	return stop(r.waitFor(s.om, infrav1.MachineCreatedCondition), nil)
}
