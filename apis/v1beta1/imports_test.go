package v1beta1

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSpokeOutlivesClusterAPIV1Beta1 keeps the v1beta1 package free of Cluster API's v1beta1
// API (sigs.k8s.io/cluster-api/api/core/v1beta1 and everything else under api/*/v1beta1),
// which Cluster API removes after v1.16: this package must keep building then, so that
// v1beta1 objects can still be converted.
func TestSpokeOutlivesClusterAPIV1Beta1(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "sigs.k8s.io/cluster-api") && strings.HasSuffix(dep, "/v1beta1") {
			t.Errorf("apis/v1beta1 depends on %s; use the local copies in capi_types.go", dep)
		}
		if strings.HasPrefix(dep, "sigs.k8s.io/controller-runtime") {
			t.Errorf("apis/v1beta1 depends on %s; API packages never import controller-runtime", dep)
		}
	}
}
