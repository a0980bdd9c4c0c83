#!/usr/bin/env bash
# ci-prebuild.sh: builds, at the lowest CPU priority, what `make e2e` needs after `make test`,
# while `make test` runs. .ci/run starts it in the background and waits for it before
# `make e2e`. The test phases leave part of the two cores idle (the suites wait on API servers
# and processes: docs/development.md "Timings"); a nice 19 build takes those idle cycles and
# yields the CPU to the tests whenever they want it, so a cold run hides most of the node
# binaries' build behind the tests. On a warm machine every step returns at once.
#
# It first installs the Debian packages of the real node (network-bound), then waits until
# `make test` has built the envtest binaries (kube-apiserver shares most of its packages with
# the node binaries: building both at once would compile those packages twice), then builds
# the node binaries. Everything it builds is what `make e2e` would build itself (the same
# scripts, the same caches), so a failure here is repeated, and reported, by `make e2e`.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
log() { echo "ci-prebuild: $* ($(date -u +%T))"; }

log "installing the Debian packages of the real node"
"${root}/hack/e2e-prereqs.sh" || log "the Debian packages failed; make e2e will try again"

log "waiting for make test to build the envtest binaries"
k8s="${ENVTEST_K8S_VERSION:-1.36.3}"
until compgen -G "${root}/bin/envtest/k8s-${k8s}-etcd-*/kube-apiserver" >/dev/null; do
  sleep 5
done

log "building the node binaries at nice 19"
if nice -n 19 "${root}/hack/node-assets.sh" >/dev/null; then
  log "node binaries ready"
else
  log "the node binaries failed; make e2e will try again"
fi
