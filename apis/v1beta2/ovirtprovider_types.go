package v1beta2

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// OVirtProviderSpec holds the connection parameters of one oVirt Engine.
type OVirtProviderSpec struct {
	// engine is the URL of the oVirt Engine REST API, for example
	// "https://ovirt.example.com/ovirt-engine/api" (no trailing slash). It must be https: an
	// http URL would carry the oVirt password in clear text and is refused, also with
	// tls.insecure.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	Engine string `json:"engine"`

	// credentialsSecretName is the name of a Secret in the operator namespace (capov-system)
	// with the keys "username" and "password" of the oVirt service account.
	// When it is empty or the Secret does not exist, spec.user and spec.pass are used.
	// Updates of an OVirtProvider that leave it empty are refused at admission.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	CredentialsSecretName string `json:"credentialsSecretName,omitempty"`

	// user is the oVirt user name, for example "admin@internal".
	// Deprecated: store the credentials in the Secret named by spec.credentialsSecretName.
	// It is used only when that Secret is not set or not found, and will be removed.
	// +optional
	User string `json:"user,omitempty"`

	// pass is the oVirt password in clear text.
	// Deprecated: store the credentials in the Secret named by spec.credentialsSecretName.
	// It is used only when that Secret is not set or not found, and will be removed.
	// +optional
	Pass string `json:"pass,omitempty"`

	// tls selects how the Engine certificate is verified. Without it the system CA pool is used.
	// +optional
	TLS *OVirtProviderTLS `json:"tls,omitempty"`

	// diskclone is the provider-wide default for cloning the template disks of new VMs:
	// true clones them (independent disks, needed for another storage domain), false creates
	// thin disks that depend on the template. OVirtMachine spec.diskclone takes precedence;
	// when both are empty the disk-clone feature gate decides. Existing VMs are not changed.
	// +optional
	DiskClone *bool `json:"diskclone,omitempty"`

	// storagedomainname is the provider-wide default storage domain for the disks of new VMs
	// when an OVirtMachine does not name one. A storage domain other than the template's
	// requires cloning (diskclone true on the machine, on this provider, or the disk-clone gate).
	// +optional
	// +kubebuilder:validation:MaxLength=255
	StorageDomainName string `json:"storagedomainname,omitempty"`

	// allowedNamespaces limits the namespaces whose OVirtMachines and OVirtMachineTemplates may
	// use this provider. Without it, or when it sets neither a non-empty list nor a selector,
	// every namespace may (the behaviour of providers created before the field existed). When
	// both list and selector are set, a namespace is allowed if it is in the list OR its labels
	// match the selector. Admission refuses OVirtMachines and OVirtMachineTemplates naming this
	// provider in any other namespace, and the manager does not act on such machines. This
	// field exists only in v1beta2; a v1beta1 client keeps it through the
	// cluster.x-k8s.io/conversion-data annotation.
	// +optional
	AllowedNamespaces *OVirtProviderAllowedNamespaces `json:"allowedNamespaces,omitempty"`

	// orphanedVMs says what the manager does with an orphaned VM of this Engine: a VM whose
	// CAPOV owner marker names this management cluster but whose OVirtMachine does not exist
	// (deleted with its finalizer removed by hand, a failed clusterctl move, a restore that
	// lost it). Report (the default) only reports it: status.inventory.orphanedVMs, the
	// OrphanedVMs condition, the capov_orphaned_vms metric and a Warning event. Delete also
	// removes it once it has been an orphan for spec.orphanedVMsGracePeriod, with the data
	// safety rules of a machine deletion: a VM with a disk that is not bootable (a CSI volume)
	// attached is never removed, only reported. VMs of other management clusters sharing the
	// Engine are never orphans here. This field exists only in v1beta2; a v1beta1 client keeps
	// it through the cluster.x-k8s.io/conversion-data annotation.
	// +optional
	OrphanedVMs OrphanedVMsPolicy `json:"orphanedVMs,omitempty"`

	// orphanedVMsGracePeriod is how long a VM must stay an orphan before orphanedVMs: Delete
	// removes it, for example "24h" (default 1h, at least 10m): long enough for a clusterctl
	// move to finish, after which the target management cluster rewrites the owner markers.
	// +optional
	OrphanedVMsGracePeriod *metav1.Duration `json:"orphanedVMsGracePeriod,omitempty"`

	// allowedAffinityGroups names the existing oVirt affinity groups that machines using this
	// provider may join through spec.affinityGroups: exact names, or a prefix followed by "*"
	// ("team-a-*"; "*" alone allows every group). Without it no group may be joined by name (the
	// machine reports AffinityGroupNotAllowed and does not start). CAPOV's own groups (the
	// anti-affinity groups it creates, "capov ovirtcluster=..." in their description) are never
	// joined by name, whatever this says. This field exists only in v1beta2; a v1beta1 client
	// keeps it through the cluster.x-k8s.io/conversion-data annotation.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=255
	AllowedAffinityGroups []string `json:"allowedAffinityGroups,omitempty"`

	// createMissingTags lets the manager create the oVirt tags that machines name in spec.tags
	// (or their OVirtCluster's) and that do not exist, at the root of the Engine's tag tree.
	// Default false: a missing tag is reported in the machine's MachineCreated condition and the
	// VM waits until an oVirt administrator creates it.
	// +optional
	CreateMissingTags *bool `json:"createMissingTags,omitempty"`
}

// AffinityGroupAllowed reports whether spec.allowedAffinityGroups lets machines join the group
// of this name (exact, or by a prefix pattern ending in "*").
func (s *OVirtProviderSpec) AffinityGroupAllowed(name string) bool {
	for _, a := range s.AllowedAffinityGroups {
		if a == name || strings.HasSuffix(a, "*") && strings.HasPrefix(name, strings.TrimSuffix(a, "*")) {
			return true
		}
	}
	return false
}

// OrphanedVMsPolicy is what the manager does with orphaned VMs.
// +kubebuilder:validation:Enum=Report;Delete
type OrphanedVMsPolicy string

// Orphaned VM policies.
const (
	// OrphanedVMsReport reports orphaned VMs and leaves them alone (the default).
	OrphanedVMsReport OrphanedVMsPolicy = "Report"
	// OrphanedVMsDelete removes orphaned VMs after the grace period, as a machine deletion
	// would.
	OrphanedVMsDelete OrphanedVMsPolicy = "Delete"
)

// DefaultOrphanedVMsGracePeriod and MinOrphanedVMsGracePeriod bound
// spec.orphanedVMsGracePeriod.
const (
	DefaultOrphanedVMsGracePeriod = time.Hour
	MinOrphanedVMsGracePeriod     = 10 * time.Minute
)

// OVirtProviderAllowedNamespaces selects the namespaces that may use an OVirtProvider: those
// named in list, and those whose labels match selector (the union of both).
type OVirtProviderAllowedNamespaces struct {
	// list names the namespaces that may use the provider, for example ["team-a", "team-b"].
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	List []string `json:"list,omitempty"`

	// selector selects the namespaces that may use the provider by their labels, for example
	// {matchLabels: {capov.infrastructure.cluster.x-k8s.io/ovirt-prod: "true"}}. An empty selector
	// ({}) matches every namespace.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// OVirtProviderTLS selects one of three ways to verify the oVirt Engine certificate.
type OVirtProviderTLS struct {
	// insecure disables certificate verification. For development and diagnosis only: anyone on
	// the network path could pose as the Engine and receive the password. Admission warns about
	// it, and the provider reports TLSVerified=False with reason InsecureSkipVerify.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// cert, when true, verifies the Engine certificate against the system CA pool
	// (a publicly trusted certificate). This is also what happens when no certs are given.
	// +optional
	Cert bool `json:"cert,omitempty"`

	// certs is the base64-encoded PEM of the CA certificate(s) that signed the Engine
	// certificate (an own CA). Only these CAs are trusted: they are not added to the system pool.
	// When set, it takes precedence over cert.
	// +optional
	// +kubebuilder:validation:MaxLength=1048576
	Certs string `json:"certs,omitempty"`
}

// OVirtProviderStatus is the observed state of an OVirtProvider.
type OVirtProviderStatus struct {
	// conditions describe the connection to the Engine: CanConnectToOVirt (its reason says why
	// the Engine cannot be used) and the Ready summary; TLSVerified (whether the Engine
	// certificate is verified) and, during a deletion that waits, Deleting.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// engineVersion is the oVirt Engine version reported at the last successful check.
	// +optional
	EngineVersion string `json:"engineVersion,omitempty"`

	// lastCheckTime is when connectivity was last checked.
	// +optional
	LastCheckTime *metav1.Time `json:"lastCheckTime,omitempty"`

	// observedGeneration is the spec generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// inventory is what the last inventory of the Engine found: the manager lists the VMs that
	// carry this management cluster's owner marker in bulk once per --inventory-interval (Ready
	// machines read their VM from it instead of from the Engine). This field exists only in
	// v1beta2.
	// +optional
	Inventory *OVirtProviderInventoryStatus `json:"inventory,omitempty"`

	// deprecated groups the fields of the v1beta1 API version.
	// +optional
	Deprecated *OVirtProviderDeprecatedStatus `json:"deprecated,omitempty"`
}

// OVirtProviderInventoryStatus is the result of the last inventory of an Engine.
type OVirtProviderInventoryStatus struct {
	// lastTime is when the last inventory finished.
	// +optional
	LastTime *metav1.Time `json:"lastTime,omitempty"`

	// vms is the number of VMs carrying this management cluster's owner marker.
	// +optional
	VMs *int32 `json:"vms,omitempty"`

	// orphanedVMs is the number of those VMs whose OVirtMachine does not exist; the
	// OrphanedVMs condition names the first of them.
	// +optional
	OrphanedVMs *int32 `json:"orphanedVMs,omitempty"`
}

// OVirtProviderDeprecatedStatus groups the deprecated status fields of OVirtProvider.
type OVirtProviderDeprecatedStatus struct {
	// v1beta1 holds the status fields of the v1beta1 API version.
	// +optional
	V1Beta1 *OVirtProviderV1Beta1DeprecatedStatus `json:"v1beta1,omitempty"`
}

// OVirtProviderV1Beta1DeprecatedStatus holds the OVirtProvider status fields of v1beta1 that
// v1beta2 replaced with the Ready condition.
type OVirtProviderV1Beta1DeprecatedStatus struct {
	// ready is the v1beta1 status.ready: true when the Engine answered with the configured
	// credentials at the last check (the Ready condition in v1beta2).
	// +optional
	Ready bool `json:"ready,omitempty"`

	// conditions are the conditions in the Cluster API v1beta1 format (with a severity).
	// +optional
	Conditions clusterv1.Conditions `json:"conditions,omitempty"`

	// failureReason is the v1beta1 status.failureReason.
	// +optional
	FailureReason *string `json:"failureReason,omitempty"`

	// failureMessage explains failureReason for a human.
	// +optional
	// +kubebuilder:validation:MaxLength=10240
	FailureMessage *string `json:"failureMessage,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ovirtproviders,scope=Cluster,shortName=capovp,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-ovirt"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io/move-hierarchy="
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status",description="Engine reachable with the configured credentials"
// +kubebuilder:printcolumn:name="Engine",type="string",JSONPath=".spec.engine",description="oVirt Engine API URL"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".status.engineVersion",description="oVirt Engine version"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='CanConnectToOVirt')].reason",description="Why the Engine cannot be used"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="VMs",type="integer",priority=1,JSONPath=".status.inventory.vms",description="VMs with this management cluster's owner marker at the last inventory"
// +kubebuilder:printcolumn:name="Orphans",type="integer",priority=1,JSONPath=".status.inventory.orphanedVMs",description="VMs whose OVirtMachine does not exist"

// OVirtProvider stores the connection parameters of one oVirt Engine. It is cluster-scoped:
// OVirtMachines of any namespace reference it by name in spec.provider.
type OVirtProvider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired connection configuration.
	// +required
	Spec OVirtProviderSpec `json:"spec"`
	// status is the observed connection state.
	// +optional
	Status OVirtProviderStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions (metav1.Condition).
func (p *OVirtProvider) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions replaces the conditions.
func (p *OVirtProvider) SetConditions(conds []metav1.Condition) { p.Status.Conditions = conds }

// GetV1Beta1Conditions returns the deprecated v1beta1 conditions.
func (p *OVirtProvider) GetV1Beta1Conditions() clusterv1.Conditions {
	if p.Status.Deprecated == nil || p.Status.Deprecated.V1Beta1 == nil {
		return nil
	}
	return p.Status.Deprecated.V1Beta1.Conditions
}

// SetV1Beta1Conditions replaces the deprecated v1beta1 conditions.
func (p *OVirtProvider) SetV1Beta1Conditions(conds clusterv1.Conditions) {
	if p.Status.Deprecated == nil {
		p.Status.Deprecated = &OVirtProviderDeprecatedStatus{}
	}
	if p.Status.Deprecated.V1Beta1 == nil {
		p.Status.Deprecated.V1Beta1 = &OVirtProviderV1Beta1DeprecatedStatus{}
	}
	p.Status.Deprecated.V1Beta1.Conditions = conds
}

// Hub marks v1beta2 as the conversion hub.
func (*OVirtProvider) Hub() {}

// +kubebuilder:object:root=true

// OVirtProviderList is a list of OVirtProviders.
type OVirtProviderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the OVirtProviders.
	Items []OVirtProvider `json:"items"`
}
