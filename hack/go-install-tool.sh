#!/usr/bin/env bash
# go-install-tool.sh <target-path> <package> <version> [<module>]
# Builds a Go tool at a pinned version from the module proxy into <target-path> (idempotent).
# The tool is kept in the user's cache as well (hack/lib/cache.sh), under its path below bin/.
#
# Without <module>: `go install <package>@<version>`, with the tool's own requirements (the
# linters: they share little with CAPOV). With <module> (the module of <package>, at
# <version>): the tool is built in a module that starts from CAPOV's own build list
# (hack/lib/modset.sh), so that what it shares with CAPOV (apimachinery, the apiextensions and
# apiserver packages of the code generators) compiles once for both; its own code is exactly
# <version>, its dependencies may be raised to CAPOV's versions (Go's minimal version selection).
# `make verify` proves that the generators' output is the committed one.
set -euo pipefail
target="$1" pkg="$2" version="$3" module="${4:-}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "${root}/hack/lib/cache.sh"
# shellcheck source=lib/fetch.sh
source "${root}/hack/lib/fetch.sh"
# shellcheck source=lib/modset.sh
source "${root}/hack/lib/modset.sh"
entry=""
[[ "${target}" == "${root}/bin/"* ]] && entry="${target#"${root}/bin/"}"
if [[ -x "${target}" ]] || { [[ -n "${entry}" ]] && cache_restore "${entry}" && [[ -x "${target}" ]]; }; then
  [[ -n "${entry}" ]] && cache_save "${entry}"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
suffix=""
[[ -n "${module}" ]] && suffix=" (in the module set of CAPOV)"
echo "installing ${pkg}@${version}${suffix}" >&2
if [[ -z "${module}" ]]; then
  GOBIN="${tmp}" GOWORK=off GOFLAGS=-trimpath CGO_ENABLED=0 go_fetch_install "${pkg}@${version}" || true
  GOBIN="${tmp}" GOWORK=off GOFLAGS=-trimpath CGO_ENABLED=0 go install "${pkg}@${version}"
  built="${tmp}/$(basename "${pkg}")"
else
  # The product's build configuration (CGO_ENABLED=0, -trimpath): the same cache entries.
  export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
  modset_init "${tmp}/mod" "capov.local/tool-$(basename "${pkg}")"
  (cd "${tmp}/mod" && go mod edit -require="${module}@${version}" && go_fetch "${pkg}" &&
    go build -trimpath -ldflags=-s -o "${tmp}/bin/$(basename "${pkg}")" "${pkg}" >&2)
  built="${tmp}/bin/$(basename "${pkg}")"
fi
mkdir -p "$(dirname "${target}")"
mv "${built}" "${target}"
[[ -n "${entry}" ]] && cache_save "${entry}"
exit 0
