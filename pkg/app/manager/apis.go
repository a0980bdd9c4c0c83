package manager

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// requiredAPI is a group version whose kinds the manager watches, and what to install when the
// API server does not serve them.
type requiredAPI struct {
	groupVersion string
	kinds        []string
	install      string
}

var requiredAPIs = []requiredAPI{
	{
		groupVersion: clusterv1.GroupVersion.String(),
		kinds:        []string{"Cluster", "Machine"},
		install:      "install Cluster API core v1.11 or newer first (clusterctl init, or the Cluster API module of your platform)",
	},
	{
		groupVersion: infrav1.GroupVersion.String(),
		kinds:        []string{"OVirtProvider", "OVirtCluster", "OVirtMachine", "OVirtMachineTemplate"},
		install:      "install or upgrade the capov-crds chart (Shturval: shturval-capov-crds) to this release first",
	},
}

// checkRequiredAPIs asks the API server whether it serves every kind the manager watches.
// Without it the manager would start, wait 2 minutes for caches that never sync ("timed out
// waiting for cache to be synced for Kind *v1beta2.Cluster") and crash-loop with no word of
// what is missing.
func checkRequiredAPIs(ctx context.Context, cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the discovery client: %w", err)
	}
	var problems []string
	for _, api := range requiredAPIs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		served := map[string]bool{}
		list, err := dc.ServerResourcesForGroupVersion(api.groupVersion)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("asking the API server whether it serves %s: %w", api.groupVersion, err)
		default:
			for _, r := range list.APIResources {
				if !strings.Contains(r.Name, "/") {
					served[r.Kind] = true
				}
			}
		}
		var missing []string
		for _, k := range api.kinds {
			if !served[k] {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			problems = append(problems, fmt.Sprintf("%s %s not served: %s", api.groupVersion, strings.Join(missing, ", "), api.install))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the API server lacks APIs the manager watches: %s", strings.Join(problems, "; "))
	}
	return nil
}
