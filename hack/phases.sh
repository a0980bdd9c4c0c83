#!/usr/bin/env bash
# phases.sh <target>...: runs `make <target>` for each target in turn, printing how long each
# took, and a summary at the end (also when one fails, which stops the run). `make test` and
# .ci/run use it so that every run says where its time went.
#
# PHASES_DONE_DIR=<dir>: each phase that passes touches <dir>/<target>, so that a caller can
# start other work once a phase is behind (.ci/run starts the real-guest suite after `unit`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
summary=()
report() {
  local rc=$?
  if [[ ${#summary[@]} -gt 0 ]]; then
    echo "phases: ${summary[*]}"
  fi
  exit "${rc}"
}
trap report EXIT
for target in "$@"; do
  start=$(date +%s)
  echo "phase ${target}: started $(date -u +%FT%TZ)"
  rc=0
  "${MAKE:-make}" --no-print-directory "${target}" || rc=$?
  took=$(( $(date +%s) - start ))
  summary+=("${target}=${took}s")
  if [[ ${rc} -ne 0 ]]; then
    echo "phase ${target}: FAILED after ${took}s"
    exit "${rc}"
  fi
  echo "phase ${target}: took ${took}s"
  if [[ -n "${PHASES_DONE_DIR:-}" ]]; then
    mkdir -p "${PHASES_DONE_DIR}"
    touch "${PHASES_DONE_DIR}/${target}"
  fi
done
