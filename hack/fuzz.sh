#!/usr/bin/env bash
# fuzz.sh [--unguided] <duration>: runs every FuzzXxx target of the repository for <duration>
# each. The seed corpora (testdata/fuzz) always run as part of `go test`; this explores beyond
# them.
#
# By default the test binaries are instrumented for coverage-guided fuzzing (`go test -c
# -fuzz`): Go then compiles every dependency of a fuzzed package once more, instrumented, which
# is a build configuration of its own (about 300 CPU-seconds for the admission packages on an
# empty cache). --unguided runs the same targets from the plain test binaries, whose
# dependencies the other tests have compiled already: Go's fuzzer then mutates the corpus
# without coverage feedback (`make fuzz-smoke`, part of `make test`; `make fuzz` is guided).
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline exceeded" just as
# the -fuzztime duration ends, under CPU contention (golang/go#75804, fixed in Go 1.27): no
# input failed and nothing is written to testdata/fuzz. Such a run is repeated (twice at most).
# Any failure that wrote a reproducer, panicked or said anything else fails at once. A count
# (-fuzztime 1000x) has no such race, but the targets run at 2 to 12,000 executions a second.
set -euo pipefail
instrument=(-fuzz=.)
if [[ "${1:-}" == --unguided ]]; then
  instrument=()
  shift
fi
fuzztime="${1:-3s}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
log="$(mktemp)"

# deadline_flake <log>: the run failed with nothing but the coordinator's deadline error.
deadline_flake() {
  grep -q '^    context deadline exceeded$' "$1" &&
    ! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$1"
}

# Each package's test binary is built once (instrumented unless --unguided) and runs each of
# its targets in turn: what `go test -fuzz` does per target, without relinking the binary for
# every target. The corpus cache is where `go test -fuzz` keeps it.
bins="$(mktemp -d)"
trap 'rm -f "${log}"; rm -rf "${bins}"' EXIT
cache="$(go env GOCACHE)/fuzz"
mapfile -t files < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' || true)
for f in "${files[@]}"; do
  dir="$(dirname "${f}")"
  importpath="$(cd "${dir}" && go list -f '{{.ImportPath}}' .)"
  bin="${bins}/$(tr / _ <<<"${importpath}").test"
  if [[ ! -x "${bin}" ]]; then
    echo "fuzz: building ${importpath}${instrument[*]:+ instrumented}" >&2
    (cd "${dir}" && go test -c "${instrument[@]}" -o "${bin}" .)
  fi
  for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "${f}" | sed 's/^func //'); do
    for attempt in 1 2 3; do
      echo "fuzz: ./${dir} ${target} (${fuzztime})" >&2
      if (cd "${dir}" && "${bin}" -test.run='^$' -test.fuzz="^${target}\$" -test.fuzztime="${fuzztime}" \
        -test.fuzzcachedir="${cache}/${importpath}" -test.timeout=10m -test.paniconexit0) >"${log}" 2>&1; then
        cat "${log}"
        break
      fi
      cat "${log}"
      if [[ ${attempt} -lt 3 ]] && deadline_flake "${log}"; then
        echo "fuzz: ${target}: only the fuzz coordinator's deadline error (golang/go#75804), no failing input: running it again" >&2
        continue
      fi
      exit 1
    done
  done
done
