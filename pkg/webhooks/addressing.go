package webhooks

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// ValidateIPPoolReference checks a reference to an IPAM pool: an API group, a kind and a name,
// each a valid Kubernetes name.
func ValidateIPPoolReference(ref infrav1.IPPoolReference, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	example := "e.g. {apiGroup: ipam.cluster.x-k8s.io, kind: InClusterIPPool, name: nodes}"
	switch {
	case ref.APIGroup == "":
		errs = append(errs, field.Required(path.Child("apiGroup"), "set the API group of the IPAM pool, "+example))
	case len(validation.IsDNS1123Subdomain(ref.APIGroup)) > 0:
		errs = append(errs, field.Invalid(path.Child("apiGroup"), ref.APIGroup, "must be an API group such as ipam.cluster.x-k8s.io"))
	}
	switch {
	case ref.Kind == "":
		errs = append(errs, field.Required(path.Child("kind"), "set the kind of the IPAM pool, "+example))
	case strings.ContainsAny(ref.Kind, " ./") || len(ref.Kind) > 63:
		errs = append(errs, field.Invalid(path.Child("kind"), ref.Kind, "must be a kind such as InClusterIPPool or GlobalInClusterIPPool"))
	}
	switch {
	case ref.Name == "":
		errs = append(errs, field.Required(path.Child("name"), "set the name of the IPAM pool, "+example))
	case len(validation.IsDNS1123Subdomain(ref.Name)) > 0:
		errs = append(errs, field.Invalid(path.Child("name"), ref.Name, "must be the name of an IPAM pool object (lower case, e.g. nodes)"))
	}
	return errs
}

// validateNICAddressing checks the addressing fields of one NIC.
func validateNICAddressing(nic infrav1.NIC, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	pools := path.Child("addressesFromPools")
	if len(nic.AddressesFromPools) > infrav1.MaxPoolsPerNIC {
		errs = append(errs, field.TooMany(pools, len(nic.AddressesFromPools), infrav1.MaxPoolsPerNIC))
	}
	seen := map[infrav1.IPPoolReference]bool{}
	for i, ref := range nic.AddressesFromPools {
		errs = append(errs, ValidateIPPoolReference(ref, pools.Index(i))...)
		if seen[ref] {
			errs = append(errs, field.Duplicate(pools.Index(i), fmt.Sprintf("%s %s", ref.Kind, ref.Name)))
		}
		seen[ref] = true
	}
	if nic.Gateway != "" {
		if a, err := netip.ParseAddr(nic.Gateway); err != nil || a.Zone() != "" {
			errs = append(errs, field.Invalid(path.Child("gateway"), nic.Gateway,
				"must be an IPv4 or IPv6 address without prefix, e.g. 10.0.0.1; omit it to use the pool's gateway"))
		}
	}
	for i, ns := range nic.Nameservers {
		if a, err := netip.ParseAddr(ns); err != nil || a.Zone() != "" {
			errs = append(errs, field.Invalid(path.Child("nameservers").Index(i), ns,
				"must be the IP address of a DNS server, e.g. 10.0.0.53"))
		}
	}
	for i, d := range nic.SearchDomains {
		if len(validation.IsDNS1123Subdomain(strings.ToLower(d))) > 0 {
			errs = append(errs, field.Invalid(path.Child("searchDomains").Index(i), d,
				"must be a DNS domain such as example.org"))
		}
	}
	if nic.DeviceName != "" && (len(nic.DeviceName) > 15 || strings.ContainsAny(nic.DeviceName, " /:")) {
		errs = append(errs, field.Invalid(path.Child("deviceName"), nic.DeviceName,
			"must be a Linux interface name of at most 15 characters, e.g. eth0 or ens3; omit it for eth0, eth1, ... by NIC order"))
	}
	if len(nic.AddressesFromPools) == 0 && nic.DHCP4 != nil && !*nic.DHCP4 && (nic.DHCP6 == nil || !*nic.DHCP6) {
		errs = append(errs, field.Invalid(path.Child("dhcp4"), false,
			"the NIC would get no address: with dhcp4: false (and dhcp6 off) set addressesFromPools, or turn DHCP on"))
	}
	return errs
}

// validateNICsAddressing checks the addressing of every NIC and that the guest interface names
// are unique.
func validateNICsAddressing(nics []infrav1.NIC, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]int{}
	for i, nic := range nics {
		p := path.Index(i)
		errs = append(errs, validateNICAddressing(nic, p)...)
		name := nic.DeviceName
		if name == "" {
			name = fmt.Sprintf("eth%d", i)
		}
		if j, ok := names[name]; ok {
			errs = append(errs, field.Duplicate(p.Child("deviceName"),
				fmt.Sprintf("%s (also the guest interface of nics[%d]; unset deviceName means eth<index>)", name, j)))
		}
		names[name] = i
	}
	return errs
}

// ValidateOVirtClusterAddressing checks spec.controlPlaneEndpointFromPool: a valid pool
// reference. The manager claims from it only while controlPlaneEndpoint.host is empty.
func ValidateOVirtClusterAddressing(spec *infrav1.OVirtClusterSpec, path *field.Path) field.ErrorList {
	ref := spec.ControlPlaneEndpointFromPool
	if ref == nil {
		return nil
	}
	return ValidateIPPoolReference(*ref, path.Child("controlPlaneEndpointFromPool"))
}

// ValidateOVirtClusterSpec checks an OVirtCluster spec as at creation: the endpoint (an empty
// host is fine when controlPlaneEndpointFromPool claims it), the endpoint pool and the
// placement fields. The OVirtClusterTemplate webhook checks its spec.template.spec with it.
func ValidateOVirtClusterSpec(spec *infrav1.OVirtClusterSpec, path *field.Path) (field.ErrorList, []string) {
	ep := spec.ControlPlaneEndpoint
	var errs field.ErrorList
	if spec.ControlPlaneEndpointFromPool != nil && ep.Host == "" {
		if ep.Port != 0 && (ep.Port < 1 || ep.Port > 65535) {
			errs = append(errs, field.Invalid(path.Child("controlPlaneEndpoint", "port"), ep.Port,
				"must be a TCP port between 1 and 65535, usually 6443"))
		}
	} else {
		errs = append(errs, ValidateControlPlaneEndpoint(ep, path.Child("controlPlaneEndpoint"))...)
	}
	errs = append(errs, ValidateOVirtClusterAddressing(spec, path)...)
	placement, warnings := ValidateOVirtClusterPlacement(spec, path)
	errs = append(errs, ValidateTags(spec.Tags, path.Child("tags"))...)
	return append(errs, placement...), warnings
}
