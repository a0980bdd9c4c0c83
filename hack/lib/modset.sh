# shellcheck shell=bash
# modset.sh: the build modules of the binaries the hack/ scripts build from the Go module proxy
# (kube-apiserver, etcd, the node binaries, CoreDNS, flanneld, kube-vip, the IPAM provider) start
# from the product's own build list, so that each package they share with CAPOV (client-go,
# apimachinery, the API types, grpc, controller-runtime, Cluster API, ...) is the same package at
# the same version, in the same build configuration, and Go's build cache compiles it once for
# them all. A binary's own requirements raise a version only where it needs a newer one (Go's
# minimal version selection); a cold run then compiles client-go once instead of once per binary
# (docs/development.md "One module set").
#
#   source hack/lib/modset.sh        # needs ${root}, the repository
#   modset_init <dir> <module path>  # <dir>/go.mod: the module, the product's go version,
#                                    # a requirement on every module of the product's build list
#   (cd <dir> && go mod edit -require=<module>@<version>)   # the binary's own module
#
# Build with GOFLAGS=-mod=mod (the go command completes go.mod and go.sum on the way) and
# GOWORK=off.

# modset_list prints the product's build list once per script run: "path version" per line,
# and "path version => path version" for a replaced module (the workspace's replacements).
modset_list() {
  if [[ -z "${_modset_list:-}" ]]; then
    _modset_list="$(cd "${root}" && GOWORK="${root}/go.work" GOFLAGS= go list -m \
      -f '{{if not .Main}}{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}} {{.Version}}{{end}}{{end}}' all)"
  fi
  printf '%s\n' "${_modset_list}"
}

# modset_init <dir> <module path>: writes <dir>/go.mod for a binary built from the module proxy.
modset_init() {
  local dir="$1" module="$2" goversion list
  goversion="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "${root}/go.mod" | head -1)"
  list="$(modset_list)" || return 1
  mkdir -p "${dir}"
  {
    echo "module ${module}"
    echo
    echo "go ${goversion}"
    echo
    echo "require ("
    awk 'NF >= 2 && $2 != "" {print "\t" $1 " " $2}' <<<"${list}"
    echo ")"
    awk '$3 == "=>" {print "replace " $1 " " $2 " => " $4 " " $5}' <<<"${list}"
  } >"${dir}/go.mod"
}

# modset_kubernetes <dir> <module path> <kubernetes version>: modset_init, and k8s.io/kubernetes
# at that version with every staging repository it requires at v0.0.0 replaced by its published
# release (k8s.io/api v0.36.3 for Kubernetes 1.36.3).
modset_kubernetes() {
  local dir="$1" module="$2" version="$3" gomod
  modset_init "${dir}" "${module}" || return 1
  gomod="$(go mod download -json "k8s.io/kubernetes@v${version}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  [[ -f "${gomod}" ]] || { echo "modset: cannot download k8s.io/kubernetes v${version}" >&2; return 1; }
  {
    echo
    echo "require k8s.io/kubernetes v${version}"
    echo
    grep -E '^\s+k8s\.io/[a-z0-9-]+ v0\.0\.0$' "${gomod}" | awk -v v="${version#1.}" \
      '{print "replace " $1 " => " $1 " v0." v}'
  } >>"${dir}/go.mod"
}
