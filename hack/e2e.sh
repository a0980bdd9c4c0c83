#!/usr/bin/env bash
# e2e.sh: runs Go end-to-end tests against a real single-node cluster (test/e2e/node) inside
# private Linux namespaces, so that nothing changes on the host.
#
#   hack/e2e.sh [PACKAGES] [-run REGEXP] [-v] [-count N] [-timeout D] [-- other test binary flags]
#   hack/e2e.sh                                 # ./test/e2e/node ./test/e2e/operator
#   hack/e2e.sh ./test/e2e/node -run TestNode
#   E2E_PARALLEL=1 hack/e2e.sh ./test/guest ./test/e2e/workload@TestA ./test/e2e/workload@'TestB|TestC'
#
# A package argument <package>@<regexp> runs only those tests of it, in a test process of its
# own; with E2E_PARALLEL=1 the test processes run side by side (each in its own namespaces),
# their outputs printed as each ends.
#
# It needs root and Linux namespaces. It installs the Debian packages when missing
# (hack/e2e-prereqs.sh), builds the binaries (hack/envtest-assets.sh, hack/node-assets.sh, both
# cached in bin/), compiles each test package (`go test -c`) outside the namespaces, and runs
# each test binary under `unshare --net --mount --propagation private --fork` with
# CAPOV_E2E=1, KUBEBUILDER_ASSETS and NODE_ASSETS set. The tests (node.Up) then make the mounts,
# interfaces and sysctls of the node inside those namespaces only. When a test binary ends,
# however it ended, whatever it left in its cgroup subtree (capov-e2e-<pid>) is killed and
# the subtree removed; the namespaces die with their last process.
#
# Environment: E2E_WORKDIR keeps the node's work directory (certificates, configs, component
# and pod logs) there instead of a temporary one; E2E_TIMEOUT is the test timeout (30m).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { echo "e2e: $*" >&2; }

# alive <pid>: the process exists and is not a zombie (a killed process whose parent is gone
# stays a zombie until init reaps it, and kill -0 still finds it).
alive() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [[ "${stat:0:1}" != Z ]]
}

# reap <pid>: kill what is left in the cgroup subtree of the test process <pid>, and in the
# guest trees (capov-guests-<pid>, test/guest) of processes that are gone, then remove them.
reap() {
  local name="capov-e2e-$1" dirs=() d i
  for d in /sys/fs/cgroup/*/"${name}" /sys/fs/cgroup/"${name}"; do
    [[ -d "${d}" ]] && dirs+=("${d}")
  done
  for d in /sys/fs/cgroup/*/capov-e2e-run-* /sys/fs/cgroup/capov-e2e-run-*; do
    [[ -d "${d}" ]] || continue
    alive "${d##*capov-e2e-run-}" || dirs+=("${d}")
  done
  for d in /sys/fs/cgroup/*/capov-guests-*; do
    [[ -d "${d}" ]] || continue
    alive "${d##*capov-guests-}" || dirs+=("${d}")
  done
  [[ ${#dirs[@]} -eq 0 ]] && return 0
  log "removing what the test left in cgroup ${name}"
  for i in $(seq 1 100); do
    local pids
    pids="$(find "${dirs[@]}" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)"
    [[ -z "${pids}" ]] && break
    # shellcheck disable=SC2086
    kill -9 ${pids} 2>/dev/null || true
    sleep 0.1
  done
  for i in $(seq 1 50); do
    find "${dirs[@]}" -depth -type d -exec rmdir {} + 2>/dev/null || true
    local left=0
    for d in "${dirs[@]}"; do [[ -d "${d}" ]] && left=1; done
    [[ ${left} -eq 0 ]] && return 0
    sleep 0.1
  done
  log "could not remove the cgroups everywhere: ${dirs[*]}"
  return 1
}

# Inside the namespaces: run one test binary, then reap what it left.
if [[ "${1:-}" == "--inside" ]]; then
  shift
  dir="$1" bin="$2"
  shift 2
  cd "${dir}"
  # Everything the test binary starts is born in a cgroup of this run (one hierarchy is
  # enough to find them): processes it did not move into a tree of its own (envtest's
  # kube-apiserver and etcd, the simulator, the managers) die with the run too, however the
  # binary ended; then the guest trees of the simulator, now gone, are reaped.
  run_cg=""
  for h in /sys/fs/cgroup/pids /sys/fs/cgroup/unified /sys/fs/cgroup; do
    if [[ -f "${h}/cgroup.procs" ]] && mkdir -p "${h}/capov-e2e-run-$$" 2>/dev/null; then
      run_cg="${h}/capov-e2e-run-$$"
      break
    fi
  done
  if [[ -n "${run_cg}" ]]; then
    ( echo "${BASHPID}" >"${run_cg}/cgroup.procs" && exec "${bin}" "$@" ) &
  else
    "${bin}" "$@" &
  fi
  child=$!
  trap 'kill -INT "${child}" 2>/dev/null || true' INT TERM
  rc=0
  while true; do
    wait "${child}" && rc=0 || rc=$?
    kill -0 "${child}" 2>/dev/null || break
  done
  if [[ -n "${run_cg}" ]]; then
    for i in $(seq 1 100); do
      pids="$(cat "${run_cg}/cgroup.procs" 2>/dev/null)"
      [[ -z "${pids}" ]] && break
      # shellcheck disable=SC2086
      kill -9 ${pids} 2>/dev/null || true
      sleep 0.1
    done
    rmdir "${run_cg}" 2>/dev/null || log "could not remove cgroup ${run_cg}"
  fi
  reap "${child}" || rc=1
  exit "${rc}"
fi

if [[ "$(uname -s)" != Linux ]]; then
  log "needs Linux (network and mount namespaces); this is $(uname -s)"
  exit 1
fi
if [[ "$(id -u)" != 0 ]]; then
  log "needs root: it builds a real node (containerd, kubelet, iptables) inside Linux namespaces made with unshare; run: sudo make e2e (or sudo hack/e2e.sh $*)"
  exit 1
fi
if ! command -v unshare >/dev/null || ! unshare --net --mount --propagation private --fork true 2>/dev/null; then
  log "needs Linux namespaces: 'unshare --net --mount --propagation private --fork true' failed (util-linux missing, or namespaces disabled in this container/kernel)"
  exit 1
fi

# Arguments: packages first, then go-test-like flags, translated for the test binary.
pkgs=()
while [[ $# -gt 0 && "$1" != -* ]]; do pkgs+=("$1"); shift; done
[[ ${#pkgs[@]} -eq 0 ]] && pkgs=(./test/e2e/node ./test/e2e/operator)
timeout="${E2E_TIMEOUT:-30m}"
targs=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -run | -count | -timeout | -parallel)
      [[ $# -ge 2 ]] || { log "$1 needs a value"; exit 2; }
      if [[ "$1" == -timeout ]]; then timeout="$2"; else targs+=("-test.${1#-}=$2"); fi
      shift 2 ;;
    -run=* | -count=* | -parallel=*) targs+=("-test.${1#-}"); shift ;;
    -timeout=*) timeout="${1#-timeout=}"; shift ;;
    -v) targs+=(-test.v); shift ;;
    --) shift; targs+=("$@"); break ;;
    *) targs+=("$1"); shift ;;
  esac
done
targs+=("-test.timeout=${timeout}")

cd "${root}"
"${root}/hack/e2e-prereqs.sh"
KUBEBUILDER_ASSETS="$("${root}/hack/envtest-assets.sh")"
NODE_ASSETS="$("${root}/hack/node-assets.sh")"
# The operator scenario (test/e2e/operator) installs the charts with Helm.
HELM="$("${root}/hack/helm.sh")"
# The workload clusters (test/e2e/workload) are rendered by clusterctl, as users render them.
CLUSTERCTL="$("${root}/hack/clusterctl.sh")"
export KUBEBUILDER_ASSETS NODE_ASSETS HELM CLUSTERCTL CAPOV_E2E=1

# One directory per run: runs of the same work tree may overlap.
mkdir -p "${root}/bin/e2e"
out="$(mktemp -d "${root}/bin/e2e/run.XXXXXX")"
trap 'rm -rf "${out}"' EXIT
# A package argument may name a subset of its tests: <package>@<-run regexp>; the same package
# may be given several times (each subset runs in a test process, and a world, of its own).
args=() runs=()
for p in "${pkgs[@]}"; do
  if [[ "${p}" == *@* ]]; then args+=("${p%%@*}") runs+=("${p#*@}"); else args+=("${p}") runs+=(""); fi
done
declare -A dirs=() bins=()
while read -r pkg dir; do
  [[ -n "${pkg}" ]] && dirs["${pkg}"]="${dir}"
done < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "${args[@]}")
[[ ${#dirs[@]} -gt 0 ]] || { log "no test package in ${pkgs[*]}"; exit 1; }
jobs=()
for i in "${!args[@]}"; do
  pkg="$(cd "${root}" && go list "${args[i]}")"
  [[ -n "${dirs[${pkg}]:-}" ]] || continue
  if [[ -z "${bins[${pkg}]:-}" ]]; then
    bins["${pkg}"]="${out}/$(echo "${pkg}" | tr '/' '_').test"
    log "building ${pkg}"
    go test -c -o "${bins[${pkg}]}" "${pkg}"
  fi
  jobs+=("${pkg}|${runs[i]}")
done

# desc <pkg|run>: how a job is named in the log.
desc() { if [[ -n "${1#*|}" ]]; then echo "${1%%|*} (-run ${1#*|})"; else echo "${1%%|*}"; fi; }

# run_job <pkg|run>: one test process in private namespaces.
run_job() {
  local pkg="${1%%|*}" run="${1#*|}" extra=()
  [[ -n "${run}" ]] && extra=("-test.run=${run}")
  unshare --net --mount --propagation private --fork -- "${root}/hack/e2e.sh" --inside "${dirs[${pkg}]}" "${bins[${pkg}]}" "${targs[@]}" "${extra[@]}"
}

rc=0
if [[ "${E2E_PARALLEL:-}" == 1 && ${#jobs[@]} -gt 1 ]]; then
  # Side by side: each process has its own network, mount and PID namespaces and cgroups.
  # Their outputs are printed one after the other as they end, in the order given.
  pids=()
  for i in "${!jobs[@]}"; do
    log "running $(desc "${jobs[i]}") in private namespaces, beside the others"
    run_job "${jobs[i]}" >"${out}/job-${i}.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!jobs[@]}"; do
    jrc=0
    wait "${pids[i]}" || jrc=$?
    log "=== $(desc "${jobs[i]}"): exit ${jrc}"
    cat "${out}/job-${i}.log"
    [[ ${jrc} -eq 0 ]] || rc=${jrc}
  done
else
  for j in "${jobs[@]}"; do
    log "running $(desc "${j}") in private namespaces"
    run_job "${j}" || rc=$?
  done
fi
exit "${rc}"
