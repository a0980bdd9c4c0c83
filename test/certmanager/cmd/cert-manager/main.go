// Command cert-manager runs the tests' cert-manager stand-in (package
// github.com/capov/capov/test/certmanager) against a cluster: it issues Certificates from
// selfSigned and ca Issuers and injects CA bundles as cainjector does. It is not cert-manager.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/capov/capov/test/certmanager"
)

func main() {
	fs := flag.NewFlagSet("cert-manager", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "Path to the cluster's kubeconfig (default: $KUBECONFIG or in-cluster).")
	ns := fs.String("cluster-resource-namespace", certmanager.Namespace, "Namespace of the CA Secrets of ClusterIssuers.")
	health := fs.String("health-probe-bind-address", "0", "Address of /healthz and /readyz; 0 disables.")
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
		fmt.Fprintf(os.Stderr, "cert-manager stand-in: loading kubeconfig: %v\n", err)
		os.Exit(1)
	}
	if err := certmanager.Run(ctrl.SetupSignalHandler(), cfg, log, certmanager.Options{
		ClusterResourceNamespace: *ns, HealthProbeBindAddress: *health,
	}); err != nil {
		log.Error(err, "Cert-manager stand-in stopped")
		os.Exit(1)
	}
}
