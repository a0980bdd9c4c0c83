#!/usr/bin/env bash
# helm.sh: builds the helm CLI from the helm.sh/helm/v3 module that go.mod pins (no download
# from get.helm.sh, which is not reachable here) and prints the binary's path on stdout.
#
#   HELM=$(hack/helm.sh) && "${HELM}" lint --strict charts/capov
#
# The binary is cached in bin/tools/helm-<version> and the user's cache (hack/lib/cache.sh); a second run returns at once. The version
# ldflags are the ones helm's own Makefile sets: without them `helm version` prints no patch
# level and helm assumes Kubernetes v1.20, so kubeVersion constraints and lint's deprecation
# checks would test against the wrong release. Progress goes to stderr.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
# shellcheck source=lib/cache.sh
source "${root}/hack/lib/cache.sh"
# shellcheck source=lib/fetch.sh
source "${root}/hack/lib/fetch.sh"

# The pinned versions come from the root module's build list, so go.mod stays the one source.
version="$(go list -m -f '{{.Version}}' helm.sh/helm/v3)"
k8s="$(go list -m -f '{{.Version}}' k8s.io/client-go)" # v0.<minor>.<patch>
k8s_minor="$(echo "${k8s}" | cut -d. -f2)"

entry="tools/helm-${version}"
out="${root}/bin/${entry}"
# One build at a time (.ci/run's prebuild, make, a test that asks for it): a second caller waits
# for the first one's build and takes its result.
mkdir -p "${root}/bin"
exec 9>"${root}/bin/.helm.lock"
flock 9
if [[ -x "${out}" ]] || { cache_restore "${entry}" && [[ -x "${out}" ]]; }; then
  cache_save "${entry}"
  echo "${out}"
  exit 0
fi
mkdir -p "$(dirname "${out}")"
echo "helm.sh: building helm ${version} (Kubernetes 1.${k8s_minor}); about 5 minutes cold" >&2
ld="-s -w -X helm.sh/helm/v3/internal/version.version=${version} -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for p in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ld="${ld} -X ${p}.k8sVersionMajor=1 -X ${p}.k8sVersionMinor=${k8s_minor}"
done
CGO_ENABLED=0 go_fetch helm.sh/helm/v3/cmd/helm
CGO_ENABLED=0 go build -trimpath -ldflags "${ld}" -o "${out}.tmp.$$" helm.sh/helm/v3/cmd/helm
mv "${out}.tmp.$$" "${out}"
cache_save "${entry}"
echo "${out}"
