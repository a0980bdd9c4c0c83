// Command capi-core runs Cluster API's core reconcilers (Cluster, Machine, MachineSet,
// MachineDeployment, ClusterClass and the managed topology ones) against a management cluster. The demo starts it next to the CAPOV
// binaries so that a MachineDeployment really turns into OVirtMachines and VMs.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/capov/capov/test/capi"
)

func main() {
	fs := flag.NewFlagSet("capi-core", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "Path to the management cluster kubeconfig (default: $KUBECONFIG or in-cluster).")
	filter := fs.String("watch-filter", "", "Only reconcile objects labelled cluster.x-k8s.io/watch-filter=<value>.")
	health := fs.String("health-probe-bind-address", "0", "Address of /healthz and /readyz; 0 disables.")
	concurrency := fs.Int("concurrency", 10, "Workers per reconciler.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	_ = fs.Parse(os.Args[1:])

	log := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(log)
	cfg, err := ctrl.GetConfig()
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "capi-core: loading kubeconfig: %v\n", err)
		os.Exit(1)
	}
	if err := capi.Run(ctrl.SetupSignalHandler(), cfg, log, capi.Options{
		WatchFilterValue: *filter, HealthProbeBindAddress: *health, Concurrency: *concurrency,
	}); err != nil {
		log.Error(err, "Cluster API core reconcilers stopped")
		os.Exit(1)
	}
}
