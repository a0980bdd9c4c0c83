#!/usr/bin/env bash
# Builds the node binaries of the e2e cluster (test/e2e/node) and of the real guests (test/guest)
# from Go modules, because no release can be downloaded on this network: kubelet, kubeadm,
# kube-controller-manager, kube-scheduler and kube-proxy from k8s.io/kubernetes at the envtest version (the recipe of hack/envtest-assets.sh:
# the staging repos replaced by their published releases, version ldflags), CoreDNS from its
# module with the plugins a cluster DNS needs, and the pause program of the sandbox image.
# kube-apiserver and etcd are the envtest binaries (hack/envtest-assets.sh).
#
# The binaries are cached in bin/node/k8s-<version>-coredns-<version>/ and in the user's cache
# (hack/lib/cache.sh), and the script prints that
# directory on stdout: NODE_ASSETS=$(hack/node-assets.sh). When they exist it returns at once.
# An existing NODE_ASSETS that holds them all is honoured and printed as is. Progress goes to
# stderr. Every binary but flanneld (cgo) and the flannel CNI plugin is built in a module that
# starts from CAPOV's own build list (hack/lib/modset.sh), so what they share with CAPOV and with
# the envtest binaries is compiled once: after those, about 6.5 minutes on 2 cores (kubelet
# 94 s, kube-controller-manager 73 s, flanneld 118 s, the rest seconds each).
set -euo pipefail

K8S_VERSION="${ENVTEST_K8S_VERSION:-1.36.3}"
# CoreDNS at the version kubeadm 1.36 deploys (CoreDNSVersion v1.14.2), for the real guests.
COREDNS_VERSION="${COREDNS_VERSION:-1.14.2}"
# The CNI of the real guests' clusters (test/e2e/workload): flanneld, and the flannel CNI plugin
# of containernetworking/plugins (its last release with it; the Go module proxy does not serve
# its successor, flannel-io/cni-plugin).
FLANNEL_VERSION="${FLANNEL_VERSION:-0.28.10}"
CNI_PLUGINS_FLANNEL_VERSION=0.9.1
# kube-vip at the version the kube-vip flavors default to (KUBE_VIP_VERSION there).
KUBE_VIP_VERSION="${KUBE_VIP_VERSION:-0.9.2}"
BINARIES=(kubelet kubeadm kube-controller-manager kube-scheduler kube-proxy coredns pause flanneld flannel kube-vip)

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "${root}/hack/lib/cache.sh"
# shellcheck source=lib/fetch.sh
source "${root}/hack/lib/fetch.sh"
# shellcheck source=lib/modset.sh
source "${root}/hack/lib/modset.sh"
log() { echo "node-assets: $*" >&2; }

complete() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$1/${b}" ]] || return 1; done
}

if [[ -n "${NODE_ASSETS:-}" ]] && complete "${NODE_ASSETS}"; then
  echo "${NODE_ASSETS}"
  exit 0
fi
# COREDNS_PLUGINS names the plugin set below: change it with the set, so that cached binaries
# built with another set are not reused.
COREDNS_PLUGINS=kubeadm
# "-modset": built in the module set of hack/lib/modset.sh (entries built before it are not reused).
entry="node/k8s-${K8S_VERSION}-coredns-${COREDNS_VERSION}-${COREDNS_PLUGINS}-flannel-${FLANNEL_VERSION}-kube-vip-${KUBE_VIP_VERSION}-modset"
out="${root}/bin/${entry}"
# One build at a time (.ci/run's prebuild, make, a test that asks for them): a second caller
# waits for the first one's build and takes its result.
mkdir -p "${root}/bin"
exec 9>"${root}/bin/.node-assets.lock"
flock 9
if complete "${out}" || { cache_restore "${entry}" && complete "${out}"; }; then
  cache_save "${entry}"
  echo "${out}"
  exit 0
fi
mkdir -p "${out}"

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
export CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=mod

# build <dir> <output name> <package> [ldflags]: go build into out/ through a temporary name, so
# that an interrupted build never leaves a binary the cache check would take as complete.
build() {
  local dir="$1" name="$2" pkg="$3" ld="${4:--s -w}" start=${SECONDS}
  [[ -x "${out}/${name}" ]] && return 0
  log "building ${name}"
  (cd "${dir}" && go_fetch "${pkg}" && go build -trimpath -ldflags "${ld}" -o "${out}/${name}.tmp.$$" "${pkg}" >&2)
  mv "${out}/${name}.tmp.$$" "${out}/${name}"
  log "${name} ready ($((SECONDS - start)) s)"
}

build_kubernetes() {
  local d="${work}/kubernetes"
  log "downloading k8s.io/kubernetes v${K8S_VERSION} (about 800 MB cold)"
  modset_kubernetes "${d}" capov.local/node-assets "${K8S_VERSION}"
  local minor="${K8S_VERSION#*.}" ld="-s -w" p c
  minor="${minor%%.*}"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="${ld} -X ${p}.gitVersion=v${K8S_VERSION} -X ${p}.gitMajor=1 -X ${p}.gitMinor=${minor}"
  done
  # The upstream main packages are built as they are (-mod=mod completes go.mod on the way).
  for c in kubelet kubeadm kube-controller-manager kube-scheduler kube-proxy; do
    build "${d}" "${c}" "k8s.io/kubernetes/cmd/${c}" "${ld}"
  done
}

build_coredns() {
  [[ -x "${out}/coredns" ]] && return 0
  local d="${work}/coredns"
  mkdir -p "${d}"
  # Only the plugins of a cluster DNS (the upstream main links every plugin, clouds included,
  # which triples the download and the build): those of the Corefile kubeadm deploys (errors,
  # health, ready, kubernetes, prometheus, forward, cache, loop, reload, loadbalance) and log.
  # The order of the plugins in a server block is fixed by CoreDNS itself (core/dnsserver),
  # not by these imports.
  cat >"${d}/main.go" <<'GO'
// Command coredns is CoreDNS with the plugins of kubeadm's Corefile.
package main

import (
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"

	"github.com/coredns/coredns/coremain"
)

func main() { coremain.Run() }
GO
  modset_init "${d}" capov.local/node-coredns
  (cd "${d}" && go mod edit -require="github.com/coredns/coredns@v${COREDNS_VERSION}")
  build "${d}" coredns .
}

build_pause() {
  [[ -x "${out}/pause" ]] && return 0
  local d="${work}/pause"
  mkdir -p "${d}"
  cat >"${d}/main.go" <<'GO'
// Command pause holds a pod sandbox: it waits for SIGTERM or SIGINT and exits 0.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
GO
  (cd "${d}" && go mod init capov.local/node-pause >/dev/null 2>&1)
  build "${d}" pause .
}

# flanneld's UDP backend is cgo on amd64 (the upstream image builds it so too); the binary is
# dynamically linked and test/guest's image carries its libraries.
build_flannel() {
  [[ -x "${out}/flanneld" && -x "${out}/flannel" ]] && return 0
  # Two modules: flannel requires a newer containernetworking/plugins, without the plugin.
  local d="${work}/flannel" p="${work}/cni-flannel"
  mkdir -p "${d}" "${p}"
  # flanneld links every backend; the Tencent Cloud one needs an SDK release the Go module
  # proxy refuses (403), so an older one the proxy serves stands in (that backend is unused).
  (cd "${d}" && go mod init capov.local/node-flannel >/dev/null 2>&1 &&
    go mod edit -replace "github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc=github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc@v1.0.1100" &&
    GOMAXPROCS="${GO_FETCH_PARALLEL:-32}" go get "github.com/flannel-io/flannel@v${FLANNEL_VERSION}" >&2)
  (cd "${p}" && go mod init capov.local/node-cni-flannel >/dev/null 2>&1 &&
    GOMAXPROCS="${GO_FETCH_PARALLEL:-32}" go get "github.com/containernetworking/plugins@v${CNI_PLUGINS_FLANNEL_VERSION}" >&2)
  local ld="-s -w -X github.com/flannel-io/flannel/pkg/version.Version=v${FLANNEL_VERSION}"
  CGO_ENABLED=1 build "${d}" flanneld github.com/flannel-io/flannel "${ld}"
  build "${p}" flannel github.com/containernetworking/plugins/plugins/meta/flannel
}

build_kube_vip() {
  [[ -x "${out}/kube-vip" ]] && return 0
  local d="${work}/kube-vip"
  mkdir -p "${d}"
  modset_init "${d}" capov.local/node-kube-vip
  (cd "${d}" && go mod edit -require="github.com/kube-vip/kube-vip@v${KUBE_VIP_VERSION}")
  build "${d}" kube-vip github.com/kube-vip/kube-vip
}

build_pause
build_kubernetes
build_coredns
build_flannel
build_kube_vip
complete "${out}" || { log "some binaries are missing in ${out}"; exit 1; }
cache_save "${entry}"
echo "${out}"
