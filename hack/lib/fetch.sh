# shellcheck shell=bash
# fetch.sh: download the modules a build needs many at a time, before the build.
#
# The go command downloads at most GOMAXPROCS modules at once. On a 2-core machine with an empty
# module cache that is two requests in flight, latency-bound: `go mod download` of the product's
# workspace filled 0.9 GB in 306 s, while the 231 MB that `go mod tidy` of its three modules
# needs came in 15 s with 32 at once (docs/development.md "Timings"). go_fetch and
# go_fetch_install load the packages (which downloads their modules) without compiling
# anything, with GOMAXPROCS=${GO_FETCH_PARALLEL:-32} for that go command only: the build that
# follows keeps its own parallelism, and so do the tests.
#
#   source hack/lib/fetch.sh
#   go_fetch [go list flags] <packages>      # in the module the build runs in, same env
#   go_fetch_install <package>@<version>     # before `go install <package>@<version>`

go_fetch() {
  GOMAXPROCS="${GO_FETCH_PARALLEL:-32}" go list -deps -f '{{.ImportPath}}' "$@" >/dev/null
}

go_fetch_install() {
  GOMAXPROCS="${GO_FETCH_PARALLEL:-32}" go install -n "$@" >/dev/null 2>&1
}
