#!/usr/bin/env bash
# go-install-tool.sh <target-path> <package> <version>
# Builds a Go tool at a pinned version from the module proxy into <target-path> (idempotent).
set -euo pipefail
target="$1" pkg="$2" version="$3"
[[ -x "${target}" ]] && exit 0
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
echo "installing ${pkg}@${version}" >&2
GOBIN="${tmp}" GOWORK=off GOFLAGS= CGO_ENABLED=0 go install "${pkg}@${version}"
mkdir -p "$(dirname "${target}")"
mv "${tmp}/$(basename "${pkg}")" "${target}"
