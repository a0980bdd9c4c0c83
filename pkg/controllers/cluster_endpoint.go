package controllers

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// Event reasons of OVirtCluster about its endpoint.
const (
	eventEndpointClaimed  = "ControlPlaneEndpointClaimed"
	eventEndpointReleased = "ControlPlaneEndpointReleased"
)

// defaultAPIServerPort is the port of a claimed endpoint without controlPlaneEndpoint.port.
const defaultAPIServerPort = 6443

// endpointClaimSuffix ends the name of an OVirtCluster's endpoint claim.
const endpointClaimSuffix = "-control-plane-endpoint"

// endpointClaimName is the IPAddressClaim of an OVirtCluster's control-plane endpoint.
func endpointClaimName(oc *infrav1.OVirtCluster) string {
	name := oc.Name
	if len(name)+len(endpointClaimSuffix) > 253 {
		name = name[:253-len(endpointClaimSuffix)]
	}
	return name + endpointClaimSuffix
}

// clusterOfEndpointClaim is the OVirtCluster an endpoint claim is named for (endpointClaimName).
func clusterOfEndpointClaim(claim string) (string, bool) {
	return strings.CutSuffix(claim, endpointClaimSuffix)
}

// heldAddressToCluster maps an endpoint's IPAddress left held for a deleted OVirtCluster to it.
var heldAddressToCluster = heldAddressToHolder(infrav1.IPAddressClaimEndpointLabel, clusterOfEndpointClaim)

// claimEndpoint claims the control-plane endpoint's address from spec.controlPlaneEndpointFromPool
// and sets spec.controlPlaneEndpoint from it. It reports false while the address is not
// allocated yet (ClusterReady False, WaitingForIPAddress): the cluster is not provisioned
// without its endpoint.
func (r *OVirtClusterReconciler) claimEndpoint(ctx context.Context, oc *infrav1.OVirtCluster, clusterName string) (bool, error) {
	pool := oc.Spec.ControlPlaneEndpointFromPool
	name := endpointClaimName(oc)
	wait := func(format string, args ...any) (bool, error) {
		v1beta1conditions.MarkFalse(oc, infrav1.ClusterReadyCondition, infrav1.WaitingForIPAddressReason, clusterv1.ConditionSeverityInfo, format, args...)
		return false, nil
	}
	claim := &ipamv1.IPAddressClaim{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: oc.Namespace, Name: name}, claim)
	switch {
	case apierrors.IsNotFound(err):
		claim = &ipamv1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: oc.Namespace,
				Labels: map[string]string{infrav1.IPAddressClaimEndpointLabel: machineLabelValue(oc.Name)}},
			Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: pool.APIGroup, Kind: pool.Kind, Name: pool.Name}},
		}
		if v, ok := oc.Labels[clusterv1.WatchLabel]; ok {
			claim.Labels[clusterv1.WatchLabel] = v
		}
		if clusterName != "" {
			claim.Labels[clusterv1.ClusterNameLabel] = clusterName
			claim.Spec.ClusterName = clusterName
		}
		if err := controllerutil.SetControllerReference(oc, claim, r.Client.Scheme()); err != nil {
			return false, fmt.Errorf("owning IPAddressClaim %s: %w", name, err)
		}
		if err := r.Client.Create(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating IPAddressClaim %s: %w", name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Claimed the control-plane endpoint's address", "ipAddressClaim", name, "pool", pool.Kind+"/"+pool.Name)
		return wait("waiting for the IPAM provider to allocate IPAddressClaim %s (%s %s) for the control-plane endpoint", name, pool.Kind, pool.Name)
	case err != nil:
		return false, fmt.Errorf("reading IPAddressClaim %s: %w", name, err)
	}
	if !metav1.IsControlledBy(claim, oc) {
		v1beta1conditions.MarkFalse(oc, infrav1.ClusterReadyCondition, infrav1.IPAddressInvalidReason, clusterv1.ConditionSeverityWarning,
			"IPAddressClaim %s exists but is not owned by this OVirtCluster: remove it, or set spec.controlPlaneEndpoint.host", name)
		return false, nil
	}
	a, why, err := claimedAddress(ctx, r.Client, claim, infrav1.IPAddressClaimEndpointLabel, machineLabelValue(oc.Name))
	if err != nil {
		return false, err
	}
	if why != "" {
		return wait("waiting for the IPAM provider to allocate IPAddressClaim %s (%s %s) for the control-plane endpoint: %s", name, pool.Kind, pool.Name, why)
	}
	oc.Spec.ControlPlaneEndpoint.Host = a.addr.String()
	if oc.Spec.ControlPlaneEndpoint.Port == 0 {
		oc.Spec.ControlPlaneEndpoint.Port = defaultAPIServerPort
	}
	r.Recorder.Eventf(oc, nil, corev1.EventTypeNormal, eventEndpointClaimed, "ClaimEndpoint",
		"The control-plane endpoint is %s:%d, from IPAddressClaim %s (%s %s)", a.addr, oc.Spec.ControlPlaneEndpoint.Port, name, pool.Kind, pool.Name)
	return true, nil
}

// releaseEndpoint deletes the endpoint's IPAddressClaim when the cluster is deleted (its
// machines are gone by then: Cluster API deletes the infrastructure cluster last). The claim is
// read from the API server, not the cache: one created just before the deletion may not be in
// the cache yet, and the finalizer must not drop while it exists.
func (r *OVirtClusterReconciler) releaseEndpoint(ctx context.Context, oc *infrav1.OVirtCluster) error {
	claim := &ipamv1.IPAddressClaim{}
	name := endpointClaimName(oc)
	if err := releaseHeldAddresses(ctx, r.APIReader, r.Client, oc.Namespace, infrav1.IPAddressClaimEndpointLabel, machineLabelValue(oc.Name), map[string]bool{name: true}); err != nil {
		return err
	}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: oc.Namespace, Name: name}, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading IPAddressClaim %s: %w", name, err)
	}
	if !metav1.IsControlledBy(claim, oc) || !claim.DeletionTimestamp.IsZero() {
		return nil
	}
	// The UID precondition leaves alone a claim of the same name created since the read.
	if err := r.Client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting IPAddressClaim %s: %w", name, err)
	}
	r.Recorder.Eventf(oc, nil, corev1.EventTypeNormal, eventEndpointReleased, "ReleaseEndpoint", "Deleted IPAddressClaim %s of the control-plane endpoint", name)
	return nil
}
