// Package ovirt is the oVirt access layer that reconcilers depend on.
//
// It defines a narrow, ctx-first Client interface, the domain types that cross
// it (VM, Disk, NIC, Template, ...), the Factory that hands out Clients per
// OVirtProvider, and the sentinel errors callers match with errors.Is.
//
// The package deliberately imports neither Kubernetes types nor the oVirt SDK:
// controllers see only these types, the SDK-backed implementation lives in
// pkg/ovirt/sdk (the only importer of github.com/ovirt/go-ovirt) and an
// in-memory implementation for unit tests lives in pkg/ovirt/fake.
package ovirt
