// Package conversion converts the CAPOV kinds between v1beta1 (spoke) and v1beta2 (hub, the
// storage version). The field mapping is generated in apis/v1beta1 (conversion-gen plus the
// hand-written status mapping); this package adds what only the webhook can do and registers the
// converters with controller-runtime's hub/spoke converter, served at /convert by the webhook
// binary.
//
// Down-conversion (hub to v1beta1) of OVirtCluster, OVirtMachine and OVirtMachineTemplate stores
// the hub object, without its metadata, in the annotation cluster.x-k8s.io/conversion-data of the
// v1beta1 object; up-conversion restores from it what v1beta1 cannot express and drops the
// annotation, so it is never stored (the storage version is the hub). An OVirtProvider's
// annotation holds only what v1beta1 lacks, spec.allowedNamespaces, and only when it is set:
// its spec may hold a password and CA bundles up to 1 MiB (the annotation limit is 256 KiB),
// which never go into an annotation.
package conversion

import (
	"context"
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilconversion "sigs.k8s.io/cluster-api/util/conversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// DataAnnotation is the annotation that carries the hub object on v1beta1 objects.
const DataAnnotation = utilconversion.DataAnnotation

// OVirtMachineConverter returns the hub/spoke converter of OVirtMachine.
func OVirtMachineConverter() func(*runtime.Scheme) (ctrlconversion.Converter, error) {
	return ctrlconversion.NewHubSpokeConverter(&infrav1.OVirtMachine{},
		ctrlconversion.NewSpokeConverter(&infrav1beta1.OVirtMachine{}, ConvertOVirtMachineHubToSpoke, ConvertOVirtMachineSpokeToHub))
}

// OVirtClusterConverter returns the hub/spoke converter of OVirtCluster.
func OVirtClusterConverter() func(*runtime.Scheme) (ctrlconversion.Converter, error) {
	return ctrlconversion.NewHubSpokeConverter(&infrav1.OVirtCluster{},
		ctrlconversion.NewSpokeConverter(&infrav1beta1.OVirtCluster{}, ConvertOVirtClusterHubToSpoke, ConvertOVirtClusterSpokeToHub))
}

// OVirtMachineTemplateConverter returns the hub/spoke converter of OVirtMachineTemplate.
func OVirtMachineTemplateConverter() func(*runtime.Scheme) (ctrlconversion.Converter, error) {
	return ctrlconversion.NewHubSpokeConverter(&infrav1.OVirtMachineTemplate{},
		ctrlconversion.NewSpokeConverter(&infrav1beta1.OVirtMachineTemplate{}, ConvertOVirtMachineTemplateHubToSpoke, ConvertOVirtMachineTemplateSpokeToHub))
}

// OVirtProviderConverter returns the hub/spoke converter of OVirtProvider.
func OVirtProviderConverter() func(*runtime.Scheme) (ctrlconversion.Converter, error) {
	return ctrlconversion.NewHubSpokeConverter(&infrav1.OVirtProvider{},
		ctrlconversion.NewSpokeConverter(&infrav1beta1.OVirtProvider{}, ConvertOVirtProviderHubToSpoke, ConvertOVirtProviderSpokeToHub))
}

// ConvertOVirtMachineSpokeToHub converts a v1beta1 OVirtMachine to v1beta2.
func ConvertOVirtMachineSpokeToHub(_ context.Context, src *infrav1beta1.OVirtMachine, dst *infrav1.OVirtMachine) error {
	if err := infrav1beta1.Convert_v1beta1_OVirtMachine_To_v1beta2_OVirtMachine(src, dst, nil); err != nil {
		return fmt.Errorf("converting OVirtMachine %s/%s to v1beta2: %w", src.Namespace, src.Name, err)
	}
	restored := &infrav1.OVirtMachine{}
	ok, err := utilconversion.UnmarshalData(dst, restored)
	if err != nil {
		return fmt.Errorf("reading the %s annotation of OVirtMachine %s/%s: %w", DataAnnotation, src.Namespace, src.Name, err)
	}
	restoreProvisioned(src.Status.Ready, ok, restored.Status.Initialization.Provisioned, &dst.Status.Initialization.Provisioned)
	if ok {
		// Spec fields v1beta1 has no place for (placement).
		restoreVMSpec(&dst.Spec.OVirtVMSpec, &restored.Spec.OVirtVMSpec)
		dst.Spec.FailureDomain = restored.Spec.FailureDomain
		// Status fields v1beta1 has no place for.
		dst.Status.SystemDisksPending = restored.Status.SystemDisksPending
		dst.Status.EngineInstanceID = restored.Status.EngineInstanceID
		dst.Status.BootstrapDataCleared = restored.Status.BootstrapDataCleared
		dst.Status.FailureDomain = restored.Status.FailureDomain
		dst.Status.Host = restored.Status.Host
		dst.Status.AffinityGroups = restored.Status.AffinityGroups
		dst.Status.DataDisks = restored.Status.DataDisks
		dst.Status.HostDevices = restored.Status.HostDevices
	}
	return nil
}

// restoreVMSpec copies the fields of the VM spec that v1beta1 has no place for (antiAffinity,
// affinityGroups, the VM contents, the NICs' addressing) from the hub object of the
// conversion-data annotation into dst.
func restoreVMSpec(dst, restored *infrav1.OVirtVMSpec) {
	dst.AntiAffinity = restored.AntiAffinity
	dst.AffinityGroups = restored.AffinityGroups
	dst.OSDisk = restored.OSDisk
	dst.DataDisks = restored.DataDisks
	dst.Tags = restored.Tags
	dst.CustomProperties = restored.CustomProperties
	dst.HighAvailability = restored.HighAvailability
	dst.Performance = restored.Performance
	dst.GPUs = restored.GPUs
	// The NICs' addressing, when the v1beta1 object still has the same NICs (a v1beta1 client
	// that changed the NICs meant the ones it wrote).
	if len(dst.NICs) != len(restored.NICs) {
		return
	}
	for i := range dst.NICs {
		if dst.NICs[i].VnicProfile != restored.NICs[i].VnicProfile {
			return
		}
	}
	for i := range dst.NICs {
		dst.NICs[i] = restored.NICs[i]
	}
}

// ConvertOVirtMachineHubToSpoke converts a v1beta2 OVirtMachine to v1beta1.
func ConvertOVirtMachineHubToSpoke(_ context.Context, src *infrav1.OVirtMachine, dst *infrav1beta1.OVirtMachine) error {
	if err := infrav1beta1.Convert_v1beta2_OVirtMachine_To_v1beta1_OVirtMachine(src, dst, nil); err != nil {
		return fmt.Errorf("converting OVirtMachine %s/%s to v1beta1: %w", src.Namespace, src.Name, err)
	}
	return marshalHub(src, dst)
}

// ConvertOVirtClusterSpokeToHub converts a v1beta1 OVirtCluster to v1beta2.
func ConvertOVirtClusterSpokeToHub(_ context.Context, src *infrav1beta1.OVirtCluster, dst *infrav1.OVirtCluster) error {
	if err := infrav1beta1.Convert_v1beta1_OVirtCluster_To_v1beta2_OVirtCluster(src, dst, nil); err != nil {
		return fmt.Errorf("converting OVirtCluster %s/%s to v1beta2: %w", src.Namespace, src.Name, err)
	}
	restored := &infrav1.OVirtCluster{}
	ok, err := utilconversion.UnmarshalData(dst, restored)
	if err != nil {
		return fmt.Errorf("reading the %s annotation of OVirtCluster %s/%s: %w", DataAnnotation, src.Namespace, src.Name, err)
	}
	restoreProvisioned(src.Status.Ready, ok, restored.Status.Initialization.Provisioned, &dst.Status.Initialization.Provisioned)
	if ok {
		// Placement fields v1beta1 has no place for. Without an annotation (an object written
		// by a v1beta1 client only) they stay unset: an empty controlPlaneAntiAffinity is Soft,
		// which the CRD default also gives the stored object when it is read.
		dst.Spec.Provider = restored.Spec.Provider
		dst.Spec.FailureDomains = restored.Spec.FailureDomains
		dst.Spec.ControlPlaneAntiAffinity = restored.Spec.ControlPlaneAntiAffinity
		dst.Spec.ControlPlaneEndpointFromPool = restored.Spec.ControlPlaneEndpointFromPool
		dst.Spec.Tags = restored.Spec.Tags
		dst.Status.FailureDomains = restored.Status.FailureDomains
		dst.Status.AffinityGroups = restored.Status.AffinityGroups
	}
	return nil
}

// ConvertOVirtClusterHubToSpoke converts a v1beta2 OVirtCluster to v1beta1.
func ConvertOVirtClusterHubToSpoke(_ context.Context, src *infrav1.OVirtCluster, dst *infrav1beta1.OVirtCluster) error {
	if err := infrav1beta1.Convert_v1beta2_OVirtCluster_To_v1beta1_OVirtCluster(src, dst, nil); err != nil {
		return fmt.Errorf("converting OVirtCluster %s/%s to v1beta1: %w", src.Namespace, src.Name, err)
	}
	return marshalHub(src, dst)
}

// ConvertOVirtMachineTemplateSpokeToHub converts a v1beta1 OVirtMachineTemplate to v1beta2.
func ConvertOVirtMachineTemplateSpokeToHub(_ context.Context, src *infrav1beta1.OVirtMachineTemplate, dst *infrav1.OVirtMachineTemplate) error {
	if err := infrav1beta1.Convert_v1beta1_OVirtMachineTemplate_To_v1beta2_OVirtMachineTemplate(src, dst, nil); err != nil {
		return fmt.Errorf("converting OVirtMachineTemplate %s/%s to v1beta2: %w", src.Namespace, src.Name, err)
	}
	restored := &infrav1.OVirtMachineTemplate{}
	ok, err := utilconversion.UnmarshalData(dst, restored)
	if err != nil {
		return fmt.Errorf("reading the %s annotation of OVirtMachineTemplate %s/%s: %w", DataAnnotation, src.Namespace, src.Name, err)
	}
	if ok {
		// Spec fields v1beta1 has no place for (placement).
		restoreVMSpec(&dst.Spec.Template.Spec, &restored.Spec.Template.Spec)
	}
	return nil
}

// ConvertOVirtMachineTemplateHubToSpoke converts a v1beta2 OVirtMachineTemplate to v1beta1.
func ConvertOVirtMachineTemplateHubToSpoke(_ context.Context, src *infrav1.OVirtMachineTemplate, dst *infrav1beta1.OVirtMachineTemplate) error {
	if err := infrav1beta1.Convert_v1beta2_OVirtMachineTemplate_To_v1beta1_OVirtMachineTemplate(src, dst, nil); err != nil {
		return fmt.Errorf("converting OVirtMachineTemplate %s/%s to v1beta1: %w", src.Namespace, src.Name, err)
	}
	return marshalHub(src, dst)
}

// ConvertOVirtProviderSpokeToHub converts a v1beta1 OVirtProvider to v1beta2, restoring
// spec.allowedNamespaces, spec.orphanedVMs, spec.orphanedVMsGracePeriod and
// spec.allowedAffinityGroups and spec.createMissingTags from the conversion-data annotation (and
// dropping it).
func ConvertOVirtProviderSpokeToHub(_ context.Context, src *infrav1beta1.OVirtProvider, dst *infrav1.OVirtProvider) error {
	if err := infrav1beta1.Convert_v1beta1_OVirtProvider_To_v1beta2_OVirtProvider(src, dst, nil); err != nil {
		return fmt.Errorf("converting OVirtProvider %s to v1beta2: %w", src.Name, err)
	}
	// The generated conversion shares the annotation map with src; UnmarshalData deletes from it.
	dst.SetAnnotations(maps.Clone(dst.GetAnnotations()))
	restored := &infrav1.OVirtProvider{}
	ok, err := utilconversion.UnmarshalData(dst, restored)
	if err != nil {
		return fmt.Errorf("reading the %s annotation of OVirtProvider %s: %w", DataAnnotation, src.Name, err)
	}
	if ok {
		dst.Spec.AllowedNamespaces = restored.Spec.AllowedNamespaces
		dst.Spec.OrphanedVMs = restored.Spec.OrphanedVMs
		dst.Spec.OrphanedVMsGracePeriod = restored.Spec.OrphanedVMsGracePeriod
		dst.Spec.AllowedAffinityGroups = restored.Spec.AllowedAffinityGroups
		dst.Spec.CreateMissingTags = restored.Spec.CreateMissingTags
	}
	return nil
}

// ConvertOVirtProviderHubToSpoke converts a v1beta2 OVirtProvider to v1beta1. When
// spec.allowedNamespaces, spec.orphanedVMs, spec.orphanedVMsGracePeriod or
// spec.allowedAffinityGroups or spec.createMissingTags is set, a hub object
// holding only those fields goes into the conversion-data annotation; the rest of the spec
// (password, CA bundles) never does.
func ConvertOVirtProviderHubToSpoke(_ context.Context, src *infrav1.OVirtProvider, dst *infrav1beta1.OVirtProvider) error {
	if err := infrav1beta1.Convert_v1beta2_OVirtProvider_To_v1beta1_OVirtProvider(src, dst, nil); err != nil {
		return fmt.Errorf("converting OVirtProvider %s to v1beta1: %w", src.Name, err)
	}
	// status.inventory is not carried: only the manager writes the status, in v1beta2, and it
	// rewrites it at every inventory; a v1beta1 view of a provider without v1beta2-only spec
	// fields stays without the annotation.
	if src.Spec.AllowedNamespaces == nil && src.Spec.OrphanedVMs == "" && src.Spec.OrphanedVMsGracePeriod == nil && len(src.Spec.AllowedAffinityGroups) == 0 &&
		src.Spec.CreateMissingTags == nil {
		return nil
	}
	only := &infrav1.OVirtProvider{Spec: infrav1.OVirtProviderSpec{
		AllowedNamespaces:      src.Spec.AllowedNamespaces.DeepCopy(),
		OrphanedVMs:            src.Spec.OrphanedVMs,
		OrphanedVMsGracePeriod: src.Spec.OrphanedVMsGracePeriod.DeepCopy(),
		AllowedAffinityGroups:  slices.Clone(src.Spec.AllowedAffinityGroups),
		CreateMissingTags:      src.Spec.CreateMissingTags,
	}}
	return marshalHub(only, dst)
}

// marshalHub stores a copy of src (MarshalDataUnsafeNoCopy clears the metadata of what it is
// given) in dst's conversion-data annotation.
func marshalHub(src client.Object, dst metav1.Object) error {
	cp, ok := src.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("copying %s/%s: unexpected type %T", src.GetNamespace(), src.GetName(), src)
	}
	// The generated conversion shares the annotation map with src; give dst its own.
	dst.SetAnnotations(maps.Clone(dst.GetAnnotations()))
	if err := utilconversion.MarshalDataUnsafeNoCopy(cp, dst); err != nil {
		return fmt.Errorf("writing the %s annotation of %s/%s: %w", DataAnnotation, src.GetNamespace(), src.GetName(), err)
	}
	return nil
}

// restoreProvisioned sets the hub's initialization.provisioned from the v1beta1 ready: true
// is true; false is "unset" unless the annotation says it was an explicit false.
func restoreProvisioned(ready, hasRestored bool, restored *bool, dst **bool) {
	if ready {
		t := true
		*dst = &t
		return
	}
	*dst = nil
	if hasRestored && restored != nil && !*restored {
		f := false
		*dst = &f
	}
}
