#!/usr/bin/env bash
# fuzz.sh <duration>: runs every FuzzXxx target of the repository for <duration> each.
# The seed corpora (testdata/fuzz) always run as part of `go test`; this explores beyond them.
set -euo pipefail
fuzztime="${1:-3s}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mapfile -t files < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' || true)
for f in "${files[@]}"; do
  dir="./$(dirname "${f}")"
  for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "${f}" | sed 's/^func //'); do
    echo "fuzz: ${dir} ${target} (${fuzztime})" >&2
    (cd "$(dirname "${f}")" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "${fuzztime}" .)
  done
done
