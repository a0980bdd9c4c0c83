#!/usr/bin/env bash
# Builds the envtest control-plane binaries (kube-apiserver, etcd) from Go modules, because
# setup-envtest cannot download them on this network. Binaries are cached in
# bin/envtest/<k8s-version>/ and in the user's cache (hack/lib/cache.sh: a fresh clone on a
# used machine copies them from there), and the script prints that directory on stdout, so
# callers can do: export KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh)
#
# Idempotent: when the binaries exist it returns in milliseconds. An existing
# KUBEBUILDER_ASSETS that holds both binaries is honoured and printed as is.
# Progress goes to stderr. Both are built in a module that starts from CAPOV's own build list
# (hack/lib/modset.sh), so the packages they share with CAPOV are compiled once: after CAPOV's
# own build (make verify), kube-apiserver takes about 3.5 minutes on 2 cores, etcd 20 seconds;
# from empty Go caches about 6.5 minutes.
set -euo pipefail

K8S_VERSION="${ENVTEST_K8S_VERSION:-1.36.3}"
# etcd at the version kubeadm 1.36 deploys (DefaultEtcdVersion 3.6.8-0): the same binary is the
# etcd image of the real guests (test/guest).
ETCD_VERSION="${ENVTEST_ETCD_VERSION:-3.6.8}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "${root}/hack/lib/cache.sh"
# shellcheck source=lib/fetch.sh
source "${root}/hack/lib/fetch.sh"
# shellcheck source=lib/modset.sh
source "${root}/hack/lib/modset.sh"
log() { echo "envtest-assets: $*" >&2; }

if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "${KUBEBUILDER_ASSETS}/kube-apiserver" && -x "${KUBEBUILDER_ASSETS}/etcd" ]]; then
  echo "${KUBEBUILDER_ASSETS}"
  exit 0
fi

# "-modset": built in the module set of hack/lib/modset.sh (entries built before it are not reused).
entry="envtest/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}-modset"
out="${root}/bin/${entry}"
complete() { [[ -x "${out}/kube-apiserver" && -x "${out}/etcd" ]]; }
# One build at a time (.ci/run's prebuild, make, a test that asks for them): a second caller
# waits for the first one's build and takes its result.
mkdir -p "${root}/bin"
exec 9>"${root}/bin/.envtest-assets.lock"
flock 9
if complete || { cache_restore "${entry}" && complete; }; then
  cache_save "${entry}"
  echo "${out}"
  exit 0
fi
mkdir -p "${out}"

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
export CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=mod

build_etcd() {
  [[ -x "${out}/etcd" ]] && return 0
  log "building etcd v${ETCD_VERSION}"
  local d="${work}/etcd"
  mkdir -p "${d}"
  cat >"${d}/main.go" <<'GO'
// Command etcd is the etcd server, built from its Go module for envtest.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  modset_init "${d}" capov.local/envtest-etcd
  # etcd's own modules at exactly ETCD_VERSION (CAPOV's build list has a newer etcd client, which
  # would raise the server with it); everything else etcd shares with CAPOV stays shared.
  local m edits=(-require="go.etcd.io/etcd/server/v3@v${ETCD_VERSION}")
  for m in api/v3 client/pkg/v3 client/v3 pkg/v3 server/v3; do
    edits+=(-replace="go.etcd.io/etcd/${m}=go.etcd.io/etcd/${m}@v${ETCD_VERSION}")
  done
  (cd "${d}" && go mod edit "${edits[@]}" && go_fetch . && go build -trimpath -o "${out}/etcd.tmp" . >&2)
  mv "${out}/etcd.tmp" "${out}/etcd"
  log "etcd ready"
}

build_apiserver() {
  [[ -x "${out}/kube-apiserver" ]] && return 0
  log "building kube-apiserver v${K8S_VERSION} (about 3.5 minutes cold after CAPOV's build)"
  local d="${work}/apiserver"
  mkdir -p "${d}"
  modset_kubernetes "${d}" capov.local/envtest-apiserver "${K8S_VERSION}"
  cat >"${d}/main.go" <<'GO'
// Command kube-apiserver is the Kubernetes API server, built from its Go module for envtest.
package main

import (
	"os"

	_ "time/tzdata"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
GO
  local minor="${K8S_VERSION#*.}"; minor="${minor%%.*}"
  local ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="${ld} -X ${p}.gitVersion=v${K8S_VERSION} -X ${p}.gitMajor=1 -X ${p}.gitMinor=${minor}"
  done
  (cd "${d}" && go_fetch . && go build -trimpath -ldflags "${ld}" -o "${out}/kube-apiserver.tmp" . >&2)
  mv "${out}/kube-apiserver.tmp" "${out}/kube-apiserver"
  log "kube-apiserver ready"
}

build_etcd
build_apiserver
cache_save "${entry}"
echo "${out}"
