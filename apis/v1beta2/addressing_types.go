package v1beta2

// Addressing: static IP addresses from Cluster API IPAM pools (docs/operations.md, "Static IP
// addresses").

// IPPoolReference names an IPAM pool (an object of an IPAM provider, for example the in-cluster
// provider's InClusterIPPool or GlobalInClusterIPPool) that an IPAddressClaim asks for an
// address.
type IPPoolReference struct {
	// apiGroup is the API group of the pool, for example "ipam.cluster.x-k8s.io".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup"`

	// kind is the kind of the pool, for example "InClusterIPPool".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// name is the name of the pool. A namespaced pool is in the namespace of the machine (or
	// of the cluster, for the control-plane endpoint).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// MaxPoolsPerNIC is the most IPAM pools one NIC claims addresses from.
const MaxPoolsPerNIC = 4

// Labels and annotations of the IPAddressClaims the manager creates.
const (
	// IPAddressClaimNICLabel is the index of the NIC (spec.nics[i]) an IPAddressClaim is for.
	IPAddressClaimNICLabel = "infrastructure.cluster.x-k8s.io/ovirt-nic"
	// IPAddressClaimMachineLabel is the OVirtMachine an IPAddressClaim is for.
	IPAddressClaimMachineLabel = "infrastructure.cluster.x-k8s.io/ovirt-machine"
	// IPAddressClaimEndpointLabel marks the IPAddressClaim of an OVirtCluster's control-plane
	// endpoint; its value is the OVirtCluster's name.
	IPAddressClaimEndpointLabel = "infrastructure.cluster.x-k8s.io/ovirt-endpoint"
	// IPAddressInUseFinalizer is on every IPAddress allocated to a CAPOV claim from the moment
	// CAPOV reads it until the VM that was given it is gone (for a machine) or the cluster's last
	// machine is gone (for the control-plane endpoint). A claim deleted early (namespace
	// deletion, a foreground deletion of the OVirtMachine, a hand deletion) makes the IPAM
	// provider delete its IPAddress, but the IPAddress stays, being deleted, and its pool keeps
	// counting the address as taken: it is never given to another machine while a VM still uses it.
	IPAddressInUseFinalizer = "capov.infrastructure.cluster.x-k8s.io/ip-address-in-use"
)

// Reasons about addressing.
const (
	// WaitingForIPAddressReason (MachineCreated on OVirtMachine, ClusterReady on OVirtCluster):
	// an IPAddressClaim waits for its IPAM provider to allocate the address.
	WaitingForIPAddressReason = "WaitingForIPAddress"
	// IPAddressInvalidReason (MachineCreated): an allocated address cannot be given to the VM
	// (an unparsable address or prefix, or two addresses of one family on one NIC of a
	// cloud-init template, which oVirt cannot configure).
	IPAddressInvalidReason = "IPAddressInvalid"
)
