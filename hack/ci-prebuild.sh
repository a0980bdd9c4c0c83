#!/usr/bin/env bash
# ci-prebuild.sh: builds, at the lowest CPU priority, what `make e2e` needs after `make test`
# (and tools make test asks for later than it starts), while `make test` runs. .ci/run starts it in the background and waits for it before
# `make e2e`. The test phases leave part of the two cores idle (the suites wait on API servers
# and processes: docs/development.md "Timings"); a nice 19 build takes those idle cycles and
# yields the CPU to the tests whenever they want it, so a cold run hides most of the node
# binaries' build behind the tests. On a warm machine every step returns at once.
#
# It installs the Debian packages of the real node (network-bound) and, meanwhile, builds helm
# and clusterctl (the first things make test's charts-lint and unit phases ask for), then
# golangci-lint and fills its analysis cache (`make lint`, which takes a lock: the lint phase
# that ends `make test` waits for this run and then finds every result cached). Then it builds
# the in-cluster IPAM provider that the unit phase's conformance and chaos tests run. Then it waits
# until `make test` has built the envtest binaries (the node binaries share most of their
# packages with kube-apiserver: building both at once would compile those packages twice), and
# builds the node binaries; then what make e2e's tests build. Everything it builds is what
# `make test` and `make e2e` would build themselves (the same scripts, the same caches), so a
# failure here is repeated, and reported, by them.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
log() { echo "ci-prebuild: $* ($(date -u +%T))"; }

log "installing the Debian packages of the real node; meanwhile helm, clusterctl, then golangci-lint at nice 19"
"${root}/hack/e2e-prereqs.sh" >"${root}/bin/ci-prebuild-apt.log" 2>&1 &
apt=$!
# helm and clusterctl first: make test's charts-lint and unit phases begin by asking for them
# (hack/helm.sh and hack/clusterctl.sh take a lock: they wait for this build, not repeat it).
for tool in helm clusterctl; do
  if nice -n 19 "${root}/hack/${tool}.sh" >/dev/null 2>>"${root}/bin/ci-prebuild-tools.log"; then
    log "${tool} built"
  else
    log "${tool} failed here (bin/ci-prebuild-tools.log); make test builds it again"
  fi
done
# At nice 19 it may take longer than the configured timeout while make test compiles: no timeout.
if nice -n 19 make --no-print-directory lint LINT_FLAGS=--timeout=3h >"${root}/bin/ci-prebuild-lint.log" 2>&1; then
  log "golangci-lint built, its cache warm"
else
  log "make lint failed here (bin/ci-prebuild-lint.log); the lint phase of make test reports it"
fi
if wait "${apt}"; then
  log "Debian packages installed"
else
  cat "${root}/bin/ci-prebuild-apt.log"
  log "the Debian packages failed; make e2e will try again"
fi

# The in-cluster IPAM provider (its own module set: it does not build against CAPOV's
# controller-runtime) is needed by test/conformance and test/chaos late in the unit phase; built
# there, on demand, it held the last black-box package for minutes while the other cores had
# little left to do (the cold run of 2026-12-05). Built here, it is ready before they ask.
log "building the in-cluster IPAM provider at nice 19"
if nice -n 19 "${root}/hack/ipam-provider.sh" >/dev/null 2>"${root}/bin/ci-prebuild-ipam.log"; then
  log "in-cluster IPAM provider ready"
else
  log "the in-cluster IPAM provider failed (bin/ci-prebuild-ipam.log); the tests that need it report it"
fi

log "waiting for make test to build the envtest binaries"
k8s="${ENVTEST_K8S_VERSION:-1.36.3}"
until compgen -G "${root}/bin/envtest/k8s-${k8s}-etcd-*/kube-apiserver" >/dev/null; do
  sleep 5
done

log "building the node binaries at nice 19"
if nice -n 19 "${root}/hack/node-assets.sh" >/dev/null; then
  log "node binaries ready"
else
  log "the node binaries failed; make e2e will try again"
fi
# .ci/run starts make e2e-workload once this marker exists (or this script has ended) and make
# test has passed unit: what follows is needed only by make e2e, after make test.
mkdir -p "${root}/bin/ci"
touch "${root}/bin/ci/prebuild-node-ready"

# What make e2e's tests build before their nodes start: the previous release's binaries
# (harness.CacheDir), the images' binaries with the images' build flags, Cluster API's managers,
# the cert-manager stand-in, clusterctl (test/e2e/operator/cmd/e2e-prebuild); and the
# end-to-end test binaries' packages (hack/e2e.sh then only links them). Cold, it kept the
# upgrade scenarios waiting minutes for compilers after make test.
# The real-guest suite's test packages first: make e2e-workload starts as soon as make test has
# passed unit, often before this is done (a cold run of 2026-12-06 compiled them twice, here
# and there, at once).
log "building what make e2e-workload's and make e2e's tests build at nice 19"
tmp="$(mktemp -d)"
if nice -n 19 go test -c -o "${tmp}/" ./test/guest ./test/e2e/workload &&
  nice -n 19 go test -c -o "${tmp}/" ./test/e2e/node ./test/e2e/operator &&
  nice -n 19 go run ./test/e2e/operator/cmd/e2e-prebuild; then
  log "make e2e's builds cached"
else
  log "make e2e's builds failed here; make e2e will try again"
fi
rm -rf "${tmp}"
