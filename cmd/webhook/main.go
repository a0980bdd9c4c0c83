// Command webhook is the CAPOV admission webhook server: it defaults and validates OVirtProvider,
// OVirtCluster, OVirtMachine and OVirtMachineTemplate objects, and never talks to oVirt. Run it
// with --help for its flags.
package main

import (
	"os"

	"github.com/capov/capov/pkg/app/webhook"
)

func main() {
	os.Exit(webhook.Main(os.Args[1:], os.Stdout, os.Stderr))
}
