package controllers

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// The ownership proof (docs/proposals/2026-12-05-keyed-ownership-proof.md): the owner marker in
// a VM's comment carries an HMAC over its fields under a key that only the management cluster
// holding the workload cluster has. Anybody who can read the VM can read the marker; nobody
// without the key can write one that verifies, and a marker copied onto another VM does not
// verify there (it names the VM it was written for).

// OwnershipKeySecretSuffix ends the name of the Secret that holds a cluster's ownership key:
// "<cluster>-capov-ownership" in the cluster's namespace, owned by the Cluster (clusterctl move
// and a backup of the namespace carry it; deleting the Cluster deletes it).
const OwnershipKeySecretSuffix = "-capov-ownership"

// ownershipKeyField is the Secret's data key.
const ownershipKeyField = "key"

// proofLength is the number of bytes of the HMAC-SHA256 the marker keeps (128 bits).
const proofLength = 16

// markerFields are the keys an owner marker may carry after its ovirtmachine field, in the order
// CAPOV writes them. A token with another key ends the marker.
var markerFields = []string{"uid=", markerClusterField, "provider=", "cluster=", "vm=", "proof="}

// ownershipKeyName is the name of the Secret with the ownership key of a cluster.
func ownershipKeyName(cluster string) string { return cluster + OwnershipKeySecretSuffix }

// readOwnershipKey returns the ownership key of cluster in namespace ns, or nil when the cluster
// has none (the Secret is missing or holds no usable key).
func readOwnershipKey(ctx context.Context, r client.Reader, ns, cluster string) ([]byte, error) {
	if cluster == "" {
		return nil, nil
	}
	s := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: ownershipKeyName(cluster)}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the ownership key Secret %s/%s: %w", ns, ownershipKeyName(cluster), err)
	}
	if k := s.Data[ownershipKeyField]; len(k) >= 32 {
		return k, nil
	}
	return nil, nil
}

// ensureOwnershipKey returns the ownership key of the Cluster, creating its Secret (32 random
// bytes, owned by the Cluster) when it has none yet.
func ensureOwnershipKey(ctx context.Context, c client.Client, r client.Reader, cluster *clusterv1.Cluster) ([]byte, error) {
	key, err := readOwnershipKey(ctx, r, cluster.Namespace, cluster.Name)
	if err != nil || key != nil {
		return key, err
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generating an ownership key: %w", err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cluster.Namespace,
			Name:      ownershipKeyName(cluster.Name),
			Labels:    map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{ownershipKeyField: key},
	}
	if err := c.Create(ctx, s); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Another machine of the cluster created it first: take that one.
			return readOwnershipKey(ctx, r, cluster.Namespace, cluster.Name)
		}
		return nil, fmt.Errorf("creating the ownership key Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return key, nil
}

// proofPayload is what the proof signs: every field of the marker but the proof, one per line.
func (o vmOwner) proofPayload() []byte {
	return []byte(strings.Join([]string{"capov-owner-marker-v2", o.namespace + "/" + o.name, o.uid, o.cluster, o.provider, o.workloadCluster, o.vm}, "\n"))
}

// sign returns the proof of o's fields under key.
func (o vmOwner) sign(key []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(o.proofPayload())
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:proofLength])
}

// verifies reports whether o's proof was made with key over o's fields.
func (o vmOwner) verifies(key []byte) bool {
	if o.proof == "" || key == nil {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(o.proof)
	if err != nil || len(got) != proofLength {
		return false
	}
	want, _ := base64.RawURLEncoding.DecodeString(o.sign(key))
	return hmac.Equal(got, want)
}

// provenFor reports whether o, the owner marker read on the VM named vmName, carries a proof
// that verifies under key for om's provider and the Cluster named cluster: what a marker of
// another object (or management cluster) must show before CAPOV writes to the VM
// (proveOwnership), and what the remediation asks of every marker before it power-cycles a VM.
func (o vmOwner) provenFor(om *infrav1.OVirtMachine, cluster, vmName string, key []byte) bool {
	return o.workloadCluster == cluster && o.provider == om.Spec.Provider && o.vm == vmName && o.verifies(key)
}

// ownershipProven reports whether vm carries om's current owner marker (markerCurrent: this
// object, this management cluster mc, its provider and Cluster, the VM's own name) with a proof
// that verifies under key, the Cluster's ownership key. It reads nothing and writes nothing.
func ownershipProven(vm *ovirt.VM, om *infrav1.OVirtMachine, mc, cluster string, key []byte) bool {
	if !markerCurrent(vm, om, mc, cluster) {
		return false
	}
	o, _ := parseOwnerMarker(vm.Comment)
	return o.provenFor(om, cluster, vm.Name, key)
}

// clusterOf is the name of the Cluster a machine belongs to: its scope's Cluster, else its
// cluster-name label.
func clusterOf(s *machineScope) string {
	if s.cluster != nil {
		return s.cluster.Name
	}
	return s.om.Labels[clusterv1.ClusterNameLabel]
}

// ownerFor is the marker CAPOV writes for om on the VM named vmName (without its proof).
func ownerFor(om *infrav1.OVirtMachine, mc, cluster, vmName string) vmOwner {
	return vmOwner{namespace: om.Namespace, name: om.Name, uid: string(om.UID), cluster: mc,
		provider: om.Spec.Provider, workloadCluster: cluster, vm: vmName}
}

// String renders the marker as it is written into a VM's comment.
func (o vmOwner) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s/%s uid=%s", markerPrefix, o.namespace, o.name, o.uid)
	for _, f := range []struct{ key, value string }{
		{markerClusterField, o.cluster}, {"provider=", o.provider}, {"cluster=", o.workloadCluster}, {"vm=", o.vm}, {"proof=", o.proof},
	} {
		if f.value != "" {
			b.WriteString(" " + f.key + f.value)
		}
	}
	return b.String()
}
