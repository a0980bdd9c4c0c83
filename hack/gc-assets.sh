#!/usr/bin/env bash
# Builds kube-controller-manager from k8s.io/kubernetes at the envtest version, for the test
# stacks that run the real garbage collector beside envtest's API server (test/harness
# StackOptions.GarbageCollector): every real cluster deletes the dependents of a deleted owner
# (an OVirtMachine whose Machine went, an IPAddressClaim whose OVirtMachine went), and a stand-in
# without it shows leaks no user ever has and hides what the collector does to CAPOV's objects.
# The recipe is hack/envtest-assets.sh's (the module set of hack/lib/modset.sh, version
# ldflags). Cached in bin/envtest-gc/k8s-<version>-modset/ and in the user's cache
# (hack/lib/cache.sh); the script prints that directory: GC_ASSETS=$(hack/gc-assets.sh). When the
# binary exists it returns at once; an existing GC_ASSETS that holds it is honoured as is. About
# 75 s on 2 cores after the envtest binaries were built (they share most packages).
set -euo pipefail

K8S_VERSION="${ENVTEST_K8S_VERSION:-1.36.3}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "${root}/hack/lib/cache.sh"
# shellcheck source=lib/fetch.sh
source "${root}/hack/lib/fetch.sh"
# shellcheck source=lib/modset.sh
source "${root}/hack/lib/modset.sh"
log() { echo "gc-assets: $*" >&2; }

if [[ -n "${GC_ASSETS:-}" && -x "${GC_ASSETS}/kube-controller-manager" ]]; then
  echo "${GC_ASSETS}"
  exit 0
fi

entry="envtest-gc/k8s-${K8S_VERSION}-modset"
out="${root}/bin/${entry}"
complete() { [[ -x "${out}/kube-controller-manager" ]]; }
# One build at a time: a second caller waits for the first one's build and takes its result.
mkdir -p "${root}/bin"
exec 9>"${root}/bin/.gc-assets.lock"
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

log "building kube-controller-manager v${K8S_VERSION}"
d="${work}/kcm"
mkdir -p "${d}"
modset_kubernetes "${d}" capov.local/envtest-gc "${K8S_VERSION}"
minor="${K8S_VERSION#*.}"
minor="${minor%%.*}"
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="${ld} -X ${p}.gitVersion=v${K8S_VERSION} -X ${p}.gitMajor=1 -X ${p}.gitMinor=${minor}"
done
(cd "${d}" && go_fetch k8s.io/kubernetes/cmd/kube-controller-manager &&
  go build -trimpath -ldflags "${ld}" -o "${out}/kube-controller-manager.tmp" k8s.io/kubernetes/cmd/kube-controller-manager >&2)
mv "${out}/kube-controller-manager.tmp" "${out}/kube-controller-manager"
log "kube-controller-manager ready"
cache_save "${entry}"
echo "${out}"
