// Package ovirtsim is an oVirt Engine REST API simulator for tests, the demo
// and benchmarks: the real go-ovirt SDK talks HTTPS to it and cannot tell the
// difference for the operations CAPOV uses.
//
// Start one with the fluent builder:
//
//	sim, err := ovirtsim.NewBuilder().
//		WithSeed(ovirtsim.DemoSeed()).
//		WithTimings(ovirtsim.Timings{ImageLock: 2 * time.Second}).
//		Build()
//	defer sim.Close()
//	conn, err := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).
//		Username(sim.Username()).Password(sim.Password()).
//		CertPool(x509.NewCertPool()).CACert(sim.CAPEM()).Build()
//
// The simulator models SSO tokens, clusters with their hosts, storage
// domains with free space, template versions, networks and vNIC profiles, VM
// creation from templates (clone or thin), disk attachments, NICs, the power
// state machine, guest-agent reporting of every guest interface (VM-wide, in
// no stable order), affinity groups and jobs, all in memory with lazily
// computed state transitions. A start goes through a scheduler like the
// engine's (hosts that are up, the Memory, VmAffinityGroups and
// VmToHostsAffinityGroups filters, soft rules as preferences) and is refused
// with the engine's composed 409 fault when no host fits; a failed host
// (SetHostStatus) takes its VMs down and restarts the highly available ones
// elsewhere. Simplified: no memory overheads or over-commit, no other
// filters, ranks ordered lexicographically instead of summed, migration and
// fencing instantaneous, no HA retries. It
// answers like an engine: hrefs and links on every entity, the engine's
// status codes (409 conflicts, bare 404s, 202 Accepted on create), storage
// domain status per data center. Faults, latency and hangs can be injected deterministically.
// Admin endpoints under /sim/ control it over HTTP; cmd/ovirtsim runs it as a
// process. See docs/ovirtsim.md.
package ovirtsim
