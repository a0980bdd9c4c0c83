#!/usr/bin/env bash
# clusterctl.sh: builds clusterctl from the sigs.k8s.io/cluster-api module that go.mod pins
# and prints the binary's path on stdout.
#
#   CLUSTERCTL=$(hack/clusterctl.sh) && "${CLUSTERCTL}" version
#
# `go install sigs.k8s.io/cluster-api/cmd/clusterctl@<v>` does not work (the module has replace
# directives), so it is built inside our module, which requires both cluster-api modules. The
# version ldflags are those of cluster-api's hack/scripts/release/version.sh: without them
# `clusterctl version` is empty and the version check treats the binary as a dev build.
# Cached in bin/tools/ and the user's cache (hack/lib/cache.sh): clusterctl-<version>; progress goes to stderr.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
# shellcheck source=lib/cache.sh
source "${root}/hack/lib/cache.sh"
# shellcheck source=lib/fetch.sh
source "${root}/hack/lib/fetch.sh"

version="$(go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)" # vX.Y.Z
entry="tools/clusterctl-${version}"
out="${root}/bin/${entry}"
# One build at a time (.ci/run's prebuild, make, a test that asks for it): a second caller waits
# for the first one's build and takes its result.
mkdir -p "${root}/bin"
exec 9>"${root}/bin/.clusterctl.lock"
flock 9
if [[ -x "${out}" ]] || { cache_restore "${entry}" && [[ -x "${out}" ]]; }; then
  cache_save "${entry}"
  echo "${out}"
  exit 0
fi
mkdir -p "$(dirname "${out}")"
echo "clusterctl.sh: building clusterctl ${version}; about 5 minutes cold" >&2
major="$(echo "${version#v}" | cut -d. -f1)"
minor="$(echo "${version#v}" | cut -d. -f2)"
pkg=sigs.k8s.io/cluster-api/version
ld="-s -w -X ${pkg}.gitVersion=${version} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
ld="${ld} -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
CGO_ENABLED=0 go_fetch sigs.k8s.io/cluster-api/cmd/clusterctl
CGO_ENABLED=0 go build -trimpath -ldflags "${ld}" -o "${out}.tmp.$$" sigs.k8s.io/cluster-api/cmd/clusterctl
mv "${out}.tmp.$$" "${out}"
cache_save "${entry}"
echo "${out}"
