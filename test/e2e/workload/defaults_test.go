//go:build linux

package workload_test

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	cabpkadmission "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/admission"
	kcpadmission "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/admission"
	coreadmission "sigs.k8s.io/cluster-api/core/webhooks/admission"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// capiDefaults applies to u what Cluster API's defaulting webhooks do on create, by calling
// their own Default methods: a management cluster runs those webhooks (clusterctl init installs
// them with cert-manager), and CAPI's reconcilers rely on their defaults (a MachineDeployment
// without a rollout strategy is refused: "unexpected deployment strategy type"). The lab's
// control plane serves no webhooks, so the test applies them on the way in. Kinds without a
// defaulting webhook are returned unchanged.
func capiDefaults(ctx context.Context, scheme *runtime.Scheme, u *unstructured.Unstructured) error {
	ctx = admission.NewContextWithRequest(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create}})
	gvk := u.GroupVersionKind()
	var (
		obj           runtime.Object
		applyDefaults func() error
	)
	switch gvk {
	case clusterv1.GroupVersion.WithKind("MachineDeployment"):
		md := &clusterv1.MachineDeployment{}
		obj, applyDefaults = md, func() error { return (&coreadmission.MachineDeployment{}).Default(ctx, md) }
	case clusterv1.GroupVersion.WithKind("MachineHealthCheck"):
		mhc := &clusterv1.MachineHealthCheck{}
		obj, applyDefaults = mhc, func() error { return (&coreadmission.MachineHealthCheck{}).Default(ctx, mhc) }
	case controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"):
		kcp := &controlplanev1.KubeadmControlPlane{}
		obj, applyDefaults = kcp, func() error { return (&kcpadmission.KubeadmControlPlane{}).Default(ctx, kcp) }
	case bootstrapv1.GroupVersion.WithKind("KubeadmConfigTemplate"):
		t := &bootstrapv1.KubeadmConfigTemplate{}
		obj, applyDefaults = t, func() error { return (&cabpkadmission.KubeadmConfigTemplate{}).Default(ctx, t) }
	default:
		return nil
	}
	if err := scheme.Convert(u, obj, nil); err != nil {
		return fmt.Errorf("reading %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	if err := applyDefaults(); err != nil {
		return fmt.Errorf("defaulting %s %s as Cluster API's webhook does: %w", gvk.Kind, u.GetName(), err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u.Object = m
	u.SetGroupVersionKind(gvk)
	return nil
}

// labPreflight makes kubeadm skip its SystemVerification preflight check on the lab's guests,
// as an operator patches a rendered flavor (kustomize) for hosts kubeadm would refuse: the
// guests share the lab host's kernel, which still runs cgroup v1 (kubeadm 1.35 and newer stop
// there; the template starts the kubelet with --fail-cgroupv1=false). A real VM with a cgroup
// v2 kernel needs none of it, and the flavors carry none of it (an empty list is not a valid
// value of the field, so a flavor variable could not default to "nothing").
func labPreflight(u *unstructured.Unstructured) error {
	var paths [][]string
	switch u.GroupVersionKind() {
	case controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"):
		paths = [][]string{{"spec", "kubeadmConfigSpec", "initConfiguration"}, {"spec", "kubeadmConfigSpec", "joinConfiguration"}}
	case bootstrapv1.GroupVersion.WithKind("KubeadmConfigTemplate"):
		paths = [][]string{{"spec", "template", "spec", "joinConfiguration"}}
	}
	for _, p := range paths {
		field := append(append([]string{}, p...), "nodeRegistration", "ignorePreflightErrors")
		if err := unstructured.SetNestedStringSlice(u.Object, []string{"SystemVerification"}, field...); err != nil {
			return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}
