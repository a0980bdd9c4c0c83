// Command manager is the CAPOV controller manager: it reconciles OVirtProvider, OVirtCluster and
// OVirtMachine objects against oVirt. Run it with --help for its flags.
package main

import (
	"os"

	"github.com/capov/capov/pkg/app/manager"
)

func main() {
	os.Exit(manager.Main(os.Args[1:], os.Stdout, os.Stderr))
}
