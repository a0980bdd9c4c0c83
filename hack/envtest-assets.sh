#!/usr/bin/env bash
# Builds the envtest control-plane binaries (kube-apiserver, etcd) from Go modules, because
# setup-envtest cannot download them on this network. Binaries are cached in
# bin/envtest/<k8s-version>/ and in the user's cache (hack/lib/cache.sh: a fresh clone on a
# used machine copies them from there), and the script prints that directory on stdout, so
# callers can do: export KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh)
#
# Idempotent: when the binaries exist it returns in milliseconds. An existing
# KUBEBUILDER_ASSETS that holds both binaries is honoured and printed as is.
# Progress goes to stderr. A cold build takes 10-35 minutes on 2 cores.
set -euo pipefail

K8S_VERSION="${ENVTEST_K8S_VERSION:-1.36.3}"
# etcd at the version kubeadm 1.36 deploys (DefaultEtcdVersion 3.6.8-0): the same binary is the
# etcd image of the real guests (test/guest).
ETCD_VERSION="${ENVTEST_ETCD_VERSION:-3.6.8}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "${root}/hack/lib/cache.sh"
log() { echo "envtest-assets: $*" >&2; }

if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "${KUBEBUILDER_ASSETS}/kube-apiserver" && -x "${KUBEBUILDER_ASSETS}/etcd" ]]; then
  echo "${KUBEBUILDER_ASSETS}"
  exit 0
fi

entry="envtest/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}"
out="${root}/bin/${entry}"
complete() { [[ -x "${out}/kube-apiserver" && -x "${out}/etcd" ]]; }
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
  log "building etcd v${ETCD_VERSION} (about 2 minutes cold)"
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
  (cd "${d}" && go mod init capov.local/envtest-etcd >/dev/null 2>&1 &&
    go get "go.etcd.io/etcd/server/v3@v${ETCD_VERSION}" >&2 &&
    go mod tidy >&2 &&
    go build -trimpath -o "${out}/etcd.tmp" . >&2)
  mv "${out}/etcd.tmp" "${out}/etcd"
  log "etcd ready"
}

build_apiserver() {
  [[ -x "${out}/kube-apiserver" ]] && return 0
  log "building kube-apiserver v${K8S_VERSION} (10-35 minutes cold)"
  local d="${work}/apiserver"
  mkdir -p "${d}"
  local modjson gomod
  modjson="$(go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}")"
  gomod="$(printf '%s' "${modjson}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  [[ -f "${gomod}" ]] || { log "cannot find go.mod of k8s.io/kubernetes"; exit 1; }
  local goversion
  goversion="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "${gomod}" | head -1)"
  {
    echo "module capov.local/envtest-apiserver"
    echo
    echo "go ${goversion}"
    echo
    echo "require k8s.io/kubernetes v${K8S_VERSION}"
    echo
    # Every staging repo required at v0.0.0 is replaced by its published release.
    grep -E '^\s+k8s\.io/[a-z0-9-]+ v0\.0\.0$' "${gomod}" | awk -v v="${K8S_VERSION#1.}" \
      '{print "replace " $1 " => " $1 " v0." v}'
  } >"${d}/go.mod"
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
  (cd "${d}" && go mod tidy >&2 && go build -trimpath -ldflags "${ld}" -o "${out}/kube-apiserver.tmp" . >&2)
  mv "${out}/kube-apiserver.tmp" "${out}/kube-apiserver"
  log "kube-apiserver ready"
}

build_etcd
build_apiserver
cache_save "${entry}"
echo "${out}"
