//go:build deps

// Package deps pins modules that the tree needs before code imports them.
package deps

import (
	_ "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	_ "github.com/go-logr/logr"
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "github.com/ovirt/go-ovirt"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "golang.org/x/time/rate"
	_ "helm.sh/helm/v3/cmd/helm/require"
	_ "helm.sh/helm/v3/pkg/action"
	_ "helm.sh/helm/v3/pkg/chart/loader"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/runtime"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/klog/v2"
	_ "sigs.k8s.io/cluster-api/api/core/v1beta1"
	_ "sigs.k8s.io/cluster-api/api/core/v1beta2"
	_ "sigs.k8s.io/cluster-api/cmd/clusterctl/cmd"
	_ "sigs.k8s.io/cluster-api/controllers/clustercache"
	_ "sigs.k8s.io/cluster-api/util/deprecated/v1beta1/patch"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/controller-runtime/pkg/metrics"
)
