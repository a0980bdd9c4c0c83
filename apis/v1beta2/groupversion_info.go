package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of every kind in this package.
var GroupVersion = schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2"}

var (
	// schemeBuilder collects the functions that add this package's kinds to a scheme.
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds every kind of this package to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&OVirtProvider{}, &OVirtProviderList{},
		&OVirtCluster{}, &OVirtClusterList{},
		&OVirtMachine{}, &OVirtMachineList{},
		&OVirtMachineTemplate{}, &OVirtMachineTemplateList{},
		&OVirtClusterTemplate{}, &OVirtClusterTemplateList{},
		&OVirtHostDeviceClaim{}, &OVirtHostDeviceClaimList{},
		&OVirtRemediation{}, &OVirtRemediationList{},
		&OVirtRemediationTemplate{}, &OVirtRemediationTemplateList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
