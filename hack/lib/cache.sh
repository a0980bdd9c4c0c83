# shellcheck shell=bash
# cache.sh: the binaries the hack/ scripts build from Go modules (envtest, node, tools, the IPAM
# provider) are kept per version in bin/ and, outside the clone, in CAPOV_CACHE_DIR
# (default ${XDG_CACHE_HOME:-~/.cache}/capov, the way setup-envtest keeps its binaries in the
# user's cache directory), so that a fresh clone on a used machine builds none of them again.
# Entries are named as under bin/ (envtest/k8s-1.36.3-etcd-3.6.8, tools/helm-v3.20.2, ...) and
# written once, complete, by a rename: an interrupted build never leaves one.
#
#   source hack/lib/cache.sh   # needs ${root}, the repository
#   cache_restore envtest/k8s-1.36.3-etcd-3.6.8 && echo "restored into bin/"
#   cache_save envtest/k8s-1.36.3-etcd-3.6.8     # after a build into bin/
CAPOV_CACHE_DIR="${CAPOV_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/capov}"

# cache_restore <entry>: copies (hard links where it can) the cached entry into bin/<entry>,
# replacing what is there; fails when the cache has no such entry.
cache_restore() {
  local src="${CAPOV_CACHE_DIR}/$1" dst="${root}/bin/$1"
  [[ -e "${src}" ]] || return 1
  mkdir -p "$(dirname "${dst}")"
  local tmp="${dst}.restore.$$"
  rm -rf "${tmp}"
  cp -al "${src}" "${tmp}" 2>/dev/null || { rm -rf "${tmp}"; cp -a "${src}" "${tmp}"; }
  rm -rf "${dst}"
  mv "${tmp}" "${dst}"
  echo "cache: ${1} from ${CAPOV_CACHE_DIR}" >&2
}

# cache_save <entry>: copies bin/<entry> into the cache unless it is there already. A cache
# that cannot be written (read-only home) is only reported: bin/ still has the binaries.
cache_save() {
  local src="${root}/bin/$1" dst="${CAPOV_CACHE_DIR}/$1"
  [[ -e "${dst}" ]] && return 0
  [[ -e "${src}" ]] || return 0
  local tmp="${dst}.save.$$"
  if mkdir -p "$(dirname "${dst}")" 2>/dev/null && rm -rf "${tmp}" &&
    { cp -al "${src}" "${tmp}" 2>/dev/null || { rm -rf "${tmp}"; cp -a "${src}" "${tmp}"; }; } &&
    mv -T "${tmp}" "${dst}" 2>/dev/null; then
    return 0
  fi
  rm -rf "${tmp}"
  [[ -e "${dst}" ]] || echo "cache: could not write ${dst}; the binaries stay in bin/ only" >&2
  return 0
}
