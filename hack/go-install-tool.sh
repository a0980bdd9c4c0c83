#!/usr/bin/env bash
# go-install-tool.sh <target-path> <package> <version>
# Builds a Go tool at a pinned version from the module proxy into <target-path> (idempotent).
# The tool is kept in the user's cache as well (hack/lib/cache.sh), under its path below bin/.
set -euo pipefail
target="$1" pkg="$2" version="$3"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "${root}/hack/lib/cache.sh"
# shellcheck source=lib/fetch.sh
source "${root}/hack/lib/fetch.sh"
entry=""
[[ "${target}" == "${root}/bin/"* ]] && entry="${target#"${root}/bin/"}"
if [[ -x "${target}" ]] || { [[ -n "${entry}" ]] && cache_restore "${entry}" && [[ -x "${target}" ]]; }; then
  [[ -n "${entry}" ]] && cache_save "${entry}"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
echo "installing ${pkg}@${version}" >&2
GOBIN="${tmp}" GOWORK=off GOFLAGS=-trimpath CGO_ENABLED=0 go_fetch_install "${pkg}@${version}" || true
GOBIN="${tmp}" GOWORK=off GOFLAGS=-trimpath CGO_ENABLED=0 go install "${pkg}@${version}"
mkdir -p "$(dirname "${target}")"
mv "${tmp}/$(basename "${pkg}")" "${target}"
[[ -n "${entry}" ]] && cache_save "${entry}"
exit 0
