#!/usr/bin/env bash
# Builds Cluster API's in-cluster IPAM provider (sigs.k8s.io/cluster-api-ipam-provider-in-cluster)
# from its Go module, with the dependency versions of its own go.mod (it does not build against
# CAPOV's newer controller-runtime), and copies its CRDs next to it. The conformance suite runs
# it beside Cluster API's reconcilers, with real InClusterIPPools. Cached in
# bin/ipam/<version>/ and the user's cache (hack/lib/cache.sh); the script prints that directory on stdout:
#   bin/ipam/<version>/manager        the provider
#   bin/ipam/<version>/crds/*.yaml    its CRDs (InClusterIPPool, GlobalInClusterIPPool, ...)
#
# Idempotent: when the binary exists it returns at once. A cold build takes 2-4 minutes.
set -euo pipefail

VERSION="${IPAM_PROVIDER_VERSION:-v1.1.0}"
MODULE=sigs.k8s.io/cluster-api-ipam-provider-in-cluster

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "${root}/hack/lib/cache.sh"
# shellcheck source=lib/fetch.sh
source "${root}/hack/lib/fetch.sh"
log() { echo "ipam-provider: $*" >&2; }

entry="ipam/${VERSION}"
out="${root}/bin/${entry}"
complete() { [[ -x "${out}/manager" && -d "${out}/crds" ]]; }
# Test packages that run at once (conformance, chaos) may both ask for it: one builds, the other
# waits for that build instead of compiling the same packages beside it.
mkdir -p "${root}/bin"
exec 9>"${root}/bin/.ipam-provider.lock"
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

log "building ${MODULE}@${VERSION}"
cd "${work}"
# The proxy serves this module by exact version only (no version list), so go install
# pkg@version cannot be used; a throw-away module with the provider's own requirements builds it.
modfile="$(go mod download -json "${MODULE}@${VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
srcdir="$(go mod download -json "${MODULE}@${VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "${modfile}" || -z "${srcdir}" ]]; then
  log "cannot download ${MODULE}@${VERSION}"
  exit 1
fi
sed "s#^module .*#module capov.local/ipamprovider#" "${modfile}" > go.mod
printf '\nrequire %s %s\n' "${MODULE}" "${VERSION}" >> go.mod
cat > tools.go <<'GO'
//go:build tools

// Package tools pins the in-cluster IPAM provider for the build.
package tools

import _ "sigs.k8s.io/cluster-api-ipam-provider-in-cluster"
GO
go_fetch "${MODULE}"
go build -trimpath -o "${out}/manager.tmp" "${MODULE}"
mkdir -p "${out}/crds"
cp "${srcdir}"/config/crd/bases/*.yaml "${out}/crds/"
chmod u+w "${out}"/crds/*.yaml
mv "${out}/manager.tmp" "${out}/manager"
cache_save "${entry}"
log "ready: ${out}"
echo "${out}"
