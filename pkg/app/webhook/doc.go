// Package webhook wires the CAPOV admission webhook server: a controller-runtime manager that
// serves the mutating and validating webhooks of every OVirt* kind and nothing else (no
// controllers, no leader election, no oVirt client).
package webhook
