package controllers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

const (
	// eventSecretRestored: the credentials Secret was missing and was recreated from the move copy
	// that came with the provider (clusterctl move).
	eventSecretRestored = "CredentialsSecretRestored"
	// eventMoveCopyNameTaken: a Secret that is not a move copy of this provider has the copy's name.
	eventMoveCopyNameTaken = "CredentialsMoveCopyNameTaken"
)

// moveCopyName is the name of the move copy of p's credentials Secret in the credentials
// namespace: capovp-<provider>-move, shortened with a hash when that is longer than a Secret name
// may be.
func moveCopyName(p *infrav1.OVirtProvider) string {
	name := "capovp-" + p.Name + "-move"
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(p.Name))
	return "capovp-" + p.Name[:validation.DNS1123SubdomainMaxLength-len("capovp--move")-17] + "-" + hex.EncodeToString(sum[:8]) + "-move"
}

// isMoveCopyOf reports whether s is a move copy that p owns (by UID).
func isMoveCopyOf(s *corev1.Secret, p *infrav1.OVirtProvider) bool {
	if _, ok := s.Labels[infrav1.CredentialsMoveCopyLabel]; !ok {
		return false
	}
	for _, ref := range s.OwnerReferences {
		if ownedByProvider(ref, p) {
			return true
		}
	}
	return false
}

// syncMoveCopy keeps the move copy of p's credentials Secret (infrav1.CredentialsMoveCopyLabel):
//   - the Secret exists: the copy exists, p owns it, and it has the Secret's type and data;
//   - the Secret is missing and the copy was carried here with p (its owner reference names p's
//     UID, its CredentialsCopiedForAnnotation another one: clusterctl move rewrote the first):
//     the Secret is recreated from it, once;
//   - the Secret is missing otherwise (deleted here): the copy is deleted too, so that no stale
//     credential outlives the one an operator removed.
//
// A Secret of the copy's name that is not p's copy is never touched. The provider must not be
// being deleted: the garbage collector removes the copy once the provider is gone.
func (r *OVirtProviderReconciler) syncMoveCopy(ctx context.Context, p *infrav1.OVirtProvider) error {
	name := p.Spec.CredentialsSecretName
	if name == "" || p.UID == "" {
		return nil
	}
	ns := r.Connector.Namespace
	log := ctrl.LoggerFrom(ctx)
	src := &corev1.Secret{}
	srcErr := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, src)
	if srcErr != nil && !apierrors.IsNotFound(srcErr) {
		return fmt.Errorf("reading credentials Secret %s/%s: %w", ns, name, srcErr)
	}
	cp := &corev1.Secret{}
	cpKey := client.ObjectKey{Namespace: ns, Name: moveCopyName(p)}
	cpErr := r.Client.Get(ctx, cpKey, cp)
	if cpErr != nil && !apierrors.IsNotFound(cpErr) {
		return fmt.Errorf("reading the move copy %s of the credentials: %w", cpKey, cpErr)
	}
	cpExists := cpErr == nil
	if cpExists {
		if _, ok := cp.Labels[infrav1.CredentialsMoveCopyLabel]; !ok {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventMoveCopyNameTaken, "SyncMoveCopy",
				"Secret %s is not a move copy of this provider's credentials (no label %s): clusterctl move will not carry the credentials; rename that Secret",
				klog.KObj(cp), infrav1.CredentialsMoveCopyLabel)
			return nil
		}
	}

	if apierrors.IsNotFound(srcErr) {
		if !cpExists || !isMoveCopyOf(cp, p) {
			return nil
		}
		if cp.Annotations[infrav1.CredentialsCopiedForAnnotation] == string(p.UID) || cp.Annotations[infrav1.CredentialsCopyOfAnnotation] != name {
			// Written here for this provider (the Secret was deleted here, on purpose), or a copy of
			// a Secret the provider no longer names.
			if err := r.Client.Delete(ctx, cp, client.Preconditions{UID: &cp.UID, ResourceVersion: &cp.ResourceVersion}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting the move copy %s of the deleted credentials Secret: %w", cpKey, err)
			}
			log.Info("Deleted the move copy of a credentials Secret that was deleted", "Secret", klog.KObj(cp))
			return nil
		}
		restored := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Type:       cp.Type,
			Data:       maps.Clone(cp.Data),
		}
		if err := r.Client.Create(ctx, restored); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Created meanwhile (by an operator, a replicator), not yet in the cache: it is
				// kept, and its watch event brings the copy in line with it.
				return nil
			}
			return fmt.Errorf("recreating credentials Secret %s/%s from its move copy: %w", ns, name, err)
		}
		log.Info("Recreated the credentials Secret from the move copy that came with the provider", "Secret", klog.KObj(restored))
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, eventSecretRestored, "RestoreSecret",
			"Recreated credentials Secret %s from %s, the copy that came with this provider (clusterctl move)", klog.KObj(restored), klog.KObj(cp))
		// The copy is this provider's now: a later deletion of the Secret here is deliberate.
		return r.writeMoveCopy(ctx, p, cp, restored)
	}

	if cpExists && isMoveCopyOf(cp, p) && cp.Type == src.Type && equalData(cp.Data, src.Data) &&
		cp.Annotations[infrav1.CredentialsCopyOfAnnotation] == name &&
		cp.Annotations[infrav1.CredentialsCopiedForAnnotation] == string(p.UID) && len(cp.OwnerReferences) == 1 {
		return nil
	}
	if !cpExists {
		cp = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cpKey.Name}}
	}
	return r.writeMoveCopy(ctx, p, cp, src)
}

// writeMoveCopy creates or updates cp (an existing copy has a resourceVersion) as the move copy
// of src owned by p alone.
func (r *OVirtProviderReconciler) writeMoveCopy(ctx context.Context, p *infrav1.OVirtProvider, cp, src *corev1.Secret) error {
	if cp.Labels == nil {
		cp.Labels = map[string]string{}
	}
	cp.Labels[infrav1.CredentialsMoveCopyLabel] = ""
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[infrav1.CredentialsCopyOfAnnotation] = src.Name
	cp.Annotations[infrav1.CredentialsCopiedForAnnotation] = string(p.UID)
	// Not a controller reference: nothing about the copy is reconciled from its owner but this.
	cp.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtProvider", Name: p.Name, UID: p.UID,
	}}
	cp.Type = src.Type
	cp.Data = maps.Clone(src.Data)
	if cp.ResourceVersion == "" {
		if err := r.Client.Create(ctx, cp); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil // the next reconcile compares it
			}
			return fmt.Errorf("creating the move copy %s of credentials Secret %s: %w", klog.KObj(cp), src.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Created the move copy of the credentials Secret", "Secret", klog.KObj(cp))
		return nil
	}
	if err := r.Client.Update(ctx, cp); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // changed meanwhile: its watch event reconciles the provider again
		}
		return fmt.Errorf("updating the move copy %s of credentials Secret %s: %w", klog.KObj(cp), src.Name, err)
	}
	return nil
}

func equalData(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, bytes.Equal)
}
