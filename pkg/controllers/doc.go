// Package controllers holds the CAPOV reconcilers: OVirtProvider (connectivity),
// OVirtCluster (infrastructure readiness), OVirtMachine (the VM lifecycle) and
// OVirtMachineTemplate (capacity for autoscaling from zero).
//
// Reconcilers never block: oVirt work is polled with RequeueAfter, every reconcile patches the
// status once in a deferred call, and the conditions are derived in one place per kind.
package controllers
