# CAPOV Makefile. `make help` lists the targets; README.md documents them.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

ROOT := $(CURDIR)
BIN := $(ROOT)/bin
TOOLS := $(BIN)/tools
# One build configuration for every compile outside the race run: the checks, CAPOV's test
# binaries, the black-box test packages, the images, helm and clusterctl all compile with
# CGO_ENABLED=0 and -trimpath (as the Dockerfiles do), so that a cold run compiles the product's
# dependencies once for them all instead of once per configuration (docs/development.md).
# -ldflags=-w links without DWARF (a quarter less link time for each of the suite's ~50 test and
# helper binaries; stack traces and profiles use the symbol tables, which stay); a build that
# passes its own -ldflags (make build, the images, hack/) is not affected.
export CGO_ENABLED ?= 0
export GOFLAGS ?= -buildvcs=false -trimpath -ldflags=-w

# Tool versions (built from the Go module proxy into bin/tools, keyed by version).
CONTROLLER_GEN_VERSION := v0.21.0
GOLANGCI_LINT_VERSION := v2.15.0
CONVERSION_GEN_VERSION := v0.36.3
# The code generators are built in CAPOV's module set (hack/go-install-tool.sh): "-modset".
CONTROLLER_GEN := $(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)-modset
CONVERSION_GEN := $(TOOLS)/conversion-gen-$(CONVERSION_GEN_VERSION)-modset
GOLANGCI_LINT := $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# Test knobs. RACE_FLAGS apply to the packages whose code under test runs in the test process;
# the black-box packages (BLACKBOX_PKGS) run processes, charts and images, where the race
# detector only watches the test's own waiting and doubles the time (docs/development.md).
TEST_TIMEOUT ?= 45m
TEST_FLAGS ?=
RACE_FLAGS ?= -race
BLACKBOX_PKGS := ./test/charts/... ./test/images/... ./test/release/... ./test/contract/... ./test/crdmigration/... ./test/upgrade/... \
	./test/integration/... ./test/conformance/... ./test/chaos/... ./test/demo/... ./test/capi/... ./test/e2e/...
# How many black-box test packages run at once. They spend much of their time waiting on API
# servers and processes (two cores were about 65% busy at go test's default of one package per
# core), so four at once fill the idle time: the warm unit phase went from 600 s to 400 s.
BLACKBOX_PARALLEL ?= 4
# CAPOV's binaries that the suites run as processes, built once per make run (the harness links
# them from CAPOV_TEST_BINARIES instead of building them in every test package).
TEST_BINARIES := $(BIN)/test
TEST_ENV = CAPOV_TEST_BINARIES=$(TEST_BINARIES) KUBEBUILDER_ASSETS=$$(hack/envtest-assets.sh)
FUZZTIME ?= 3s
# Extra flags of golangci-lint in make lint (.ci/run's prebuild, at nice 19, lifts the timeout).
LINT_FLAGS ?=
# Extra flags of the bench command, e.g. BENCH_ARGS='-run=n100-c10$$' for one scenario.
BENCH_ARGS ?=
export KUBEBUILDER_CONTROLPLANE_START_TIMEOUT ?= 90s

# The Go modules of the repository (go.work uses them all; each also builds with GOWORK=off):
# the product, its API types, and the benchmark (kept apart for its chart-rendering dependencies).
MODULES := . apis test/bench

# Version stamping into pkg/version (`--version`, the start-up log line, User-Agents). Override
# on the command line: make build VERSION=v0.4.0. LDFLAGS uses ${...} so that the Dockerfiles
# can carry the very same text, with these three as build args.
VERSION ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || echo v0.0.0-dev)
GIT_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -s -w -X github.com/capov/capov/pkg/version.gitVersion=${VERSION} -X github.com/capov/capov/pkg/version.gitCommit=${GIT_COMMIT} -X github.com/capov/capov/pkg/version.buildDate=${BUILD_DATE}
BUILD := CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)"

##@ Main

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

.PHONY: demo
demo: envtest ## Run the whole provider locally (control planes, oVirt simulator, webhook, manager, CAPI) until Ctrl-C; DEMO_REAL_NODES=1 (root) runs its cluster on real guests.
ifneq ($(DEMO_REAL_NODES),)
	CAPOV_KEEP_LOGS=1 hack/e2e.sh ./test/e2e/workload -run '^TestDemoRealNodes$$' -v -timeout 24h
else
	go run ./test/demo/cmd/demo
endif

.PHONY: test
test: ## Everything CI runs: verify, chart lint, all tests (unit, simulator, integration, conformance, charts, bench smoke, chaos short run), short unguided fuzz runs, lint; prints each phase's time.
	@MAKE="$(MAKE)" hack/phases.sh verify envtest charts-lint unit bench-smoke fuzz-smoke chaos-short lint

##@ Build

.PHONY: build
build: ## Build bin/manager and bin/webhook (static, version-stamped, as in the Dockerfiles).
	$(BUILD) -o $(BIN)/manager ./cmd/manager
	$(BUILD) -o $(BIN)/webhook ./cmd/webhook

.PHONY: images
images: ## Build the manager, webhook and simulator OCI images (linux/amd64+arm64, with SBOMs) into out/ without Docker.
	go run ./test/images/cmd/images --out=out --version=$(VERSION) --git-commit=$(GIT_COMMIT) --build-date=$(BUILD_DATE) $(IMAGES_ARGS)

# controller-gen has no marker for matchConditions: the awk step adds
# config/webhook/match_conditions.yaml.in to every webhook of config/webhook/manifests.yaml.
.PHONY: generate
generate: $(CONTROLLER_GEN) $(CONVERSION_GEN) ## Generate deepcopy, v1beta1<->v1beta2 conversion, CRDs, RBAC and webhook manifests; sync chart CRDs.
	cd apis && $(CONTROLLER_GEN) object:headerFile=$(ROOT)/hack/boilerplate.go.txt paths=./...
	cd apis && $(CONVERSION_GEN) --go-header-file=$(ROOT)/hack/boilerplate.go.txt --output-file=zz_generated.conversion.go ./v1beta1
	cd apis && $(CONTROLLER_GEN) crd paths=./... output:crd:artifacts:config=$(ROOT)/config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./pkg/controllers/... paths=./pkg/app/manager/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=webhook-role paths=./pkg/app/webhook/... output:rbac:artifacts:config=config/rbac/webhook
	$(CONTROLLER_GEN) webhook paths=./pkg/webhooks/... output:webhook:artifacts:config=config/webhook
	awk 'FNR == NR { if ($$0 !~ /^#/) mc = mc $$0 "\n"; next } { print } /^  failurePolicy: / { printf "%s", mc }' \
		config/webhook/match_conditions.yaml.in config/webhook/manifests.yaml >config/webhook/manifests.yaml.tmp
	mv config/webhook/manifests.yaml.tmp config/webhook/manifests.yaml
	hack/sync-chart-crds.sh

# The go command downloads at most GOMAXPROCS modules at a time: tidy, which downloads and compiles
# nothing, runs with more (hack/lib/fetch.sh), before anything else needs the modules.
.PHONY: tidy
tidy: ## go mod tidy in every module (., apis, test/bench) without the workspace, GO_FETCH_PARALLEL downloads at a time.
	for m in $(MODULES); do (cd $$m && GOMAXPROCS=$${GO_FETCH_PARALLEL:-32} GOWORK=off go mod tidy) || exit 1; done

.PHONY: verify
verify: tidy generate ## Tidy, regenerate, and fail on any diff; check every module builds without the workspace.
	for m in $(MODULES); do (cd $$m && GOWORK=off go build ./...) || exit 1; done
	@if [ -n "$$(git status --porcelain -- . ':!bin')" ]; then \
		echo "verify: generated files or go.mod/go.sum are out of date; run 'make generate' and 'go mod tidy', then commit:"; \
		git status --porcelain -- . ':!bin'; git --no-pager diff --stat; exit 1; fi

.PHONY: lint
lint: ## Run golangci-lint on every module (one run at a time: .ci/run's prebuild warms its cache meanwhile).
	@mkdir -p $(BIN)
	flock $(BIN)/.lint.lock sh -c 'hack/go-install-tool.sh $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint $(GOLANGCI_LINT_VERSION) && \
		for m in $(MODULES); do (cd $$m && $(GOLANGCI_LINT) run $(LINT_FLAGS) ./...) || exit 1; done'

##@ Test

.PHONY: envtest
envtest: ## Build (once) the kube-apiserver and etcd binaries for envtest into bin/envtest, and kube-controller-manager (the chaos world's garbage collector) into bin/envtest-gc.
	hack/envtest-assets.sh >/dev/null
	hack/gc-assets.sh >/dev/null

.PHONY: test-binaries
test-binaries: ## Build the manager, webhook, simulator and capi-core binaries the suites run into bin/test (once per make run).
	go build -o $(TEST_BINARIES)/ ./cmd/manager ./cmd/webhook ./test/ovirtsim/cmd/ovirtsim ./test/capi/cmd/capi-core

.PHONY: unit
unit: envtest test-binaries ## Run all Go tests of the product and API modules (unit, simulator, envtest integration); the bench module's are bench-smoke.
	black="$$(go list $(BLACKBOX_PKGS) | sort)"; \
	race="$$(go list ./... ./apis/... | sort | comm -23 - <(echo "$${black}"))"; \
	export $(TEST_ENV) HELM=$$(hack/helm.sh) CLUSTERCTL=$$(hack/clusterctl.sh); \
	rc=0; $(if $(RACE_FLAGS),CGO_ENABLED=1) go test $(RACE_FLAGS) $(TEST_FLAGS) -timeout $(TEST_TIMEOUT) $${race} || rc=$$?; \
	go test -p $(BLACKBOX_PARALLEL) $(TEST_FLAGS) -timeout $(TEST_TIMEOUT) $${black} || rc=$$?; exit $${rc}

.PHONY: conformance
conformance: envtest test-binaries ## Run the CAPI conformance suite only (CAPI core reconcilers drive CAPOV).
	$(TEST_ENV) go test -count=1 -timeout 20m ./test/conformance/... -ginkgo.v

.PHONY: integration
integration: envtest test-binaries ## Run the manager integration tests only (manager binary + envtest + simulator).
	$(TEST_ENV) go test -count=1 -timeout 20m ./test/integration/...

.PHONY: clusterctl-upgrade
clusterctl-upgrade: ## Run the clusterctl install and upgrade scenario only, on a real node (part of make e2e): v0.2.0 by clusterctl init with Cluster API's managers and the cert-manager stand-in as pods, a cluster until Ready, clusterctl upgrade apply to this release, clusterctl move to a second management cluster. Needs root.
	hack/e2e.sh ./test/e2e/operator -v -run 'TestInstalledAndUpgradedWithClusterctl'

.PHONY: bench
bench: envtest ## Run the provisioning benchmark (100-5,000 machines, ~70 min); rewrites docs/benchmarks.md and docs/bench/*.png.
	go -C test/bench run ./cmd/bench -set=full $(BENCH_ARGS)

.PHONY: bench-smoke
bench-smoke: envtest test-binaries ## Run the seconds-long benchmark (also part of make test) and check its economy targets: the tests of the bench module.
	$(TEST_ENV) go -C test/bench test $(TEST_FLAGS) -count=1 -timeout $(TEST_TIMEOUT) -v ./...

.PHONY: chaos
chaos: envtest ## Run every chaos scenario for CHAOS_SEEDS (default 3) seeds, about an hour; rewrites the matrix in docs/reliability.md.
	KUBEBUILDER_ASSETS=$$(hack/envtest-assets.sh) CHAOS=long CHAOS_DOC=docs/reliability.md \
		go test -count=1 -timeout 240m -v -run '^TestChaos$$' ./test/chaos/

.PHONY: chaos-short
chaos-short: envtest test-binaries ## Run the chaos suite's short run (one seed, the short scenarios; also part of make test).
	$(TEST_ENV) CHAOS=short \
		go test -count=1 -timeout 20m -v -run '^TestChaos$$' ./test/chaos/

.PHONY: fuzz
fuzz: ## Run every Go fuzz target for FUZZTIME (default 3s) each, coverage-guided (instrumented test binaries).
	hack/fuzz.sh $(FUZZTIME)

.PHONY: fuzz-smoke
fuzz-smoke: ## Run every Go fuzz target for FUZZTIME each from the plain test binaries, unguided (part of make test).
	hack/fuzz.sh --unguided $(FUZZTIME)

##@ End-to-end

# The package(s) and -run pattern of make e2e: make e2e E2E_PKG=./test/e2e/node E2E_RUN=TestNode.
# Without either, make e2e runs E2E_JOBS: the node's smoke test, then each operator test in a
# test process (and on a node) of its own.
E2E_PKG ?=
E2E_RUN ?=
E2E_JOBS = ./test/e2e/node ./test/e2e/operator@TestInstalledAsUsersInstallIt ./test/e2e/operator@TestInstalledAndUpgradedWithClusterctl
# The -run pattern of make e2e-workload: make e2e-workload WORKLOAD_RUN=TestQuickStart
WORKLOAD_RUN ?=
# Without WORKLOAD_RUN, make e2e-workload runs these test processes side by side, each with its
# own lab, simulator and management cluster (hack/e2e.sh, E2E_PARALLEL).
WORKLOAD_JOBS = ./test/guest ./test/e2e/workload@TestWorkloadCluster './test/e2e/workload@TestKubeVipFlavor|TestIgnitionFlavor'


.PHONY: e2e
e2e: ## Real single-node clusters (kubelet, containerd) in private namespaces: the previous release installed with Helm and with clusterctl, upgraded to this release, as users run them. Needs root.
	hack/e2e.sh $(or $(E2E_PKG),$(if $(E2E_RUN),./test/e2e/node ./test/e2e/operator,$(E2E_JOBS))) -v $(if $(E2E_RUN),-run '$(E2E_RUN)')

.PHONY: e2e-workload
e2e-workload: ## Real workload clusters: simulator VMs boot real nodes, kubeadm through Cluster API's KCP and CABPK, MHC remediation, rollouts, scaling, reboots. Needs root.
	$(if $(WORKLOAD_RUN),hack/e2e.sh ./test/guest ./test/e2e/workload -v -timeout 45m -run '$(WORKLOAD_RUN)',E2E_PARALLEL=1 hack/e2e.sh $(WORKLOAD_JOBS) -v -timeout 45m)

.PHONY: node-assets
node-assets: ## Build (once) kubelet, kube-controller-manager, kube-scheduler, kube-proxy, CoreDNS and pause into bin/node.
	hack/node-assets.sh >/dev/null

##@ Charts and release

.PHONY: charts-lint
charts-lint: ## helm lint --strict both charts (helm built from the pinned module).
	helm="$$(hack/helm.sh)"; for c in charts/capov-crds charts/capov; do "$$helm" lint --strict "$$c"; done

.PHONY: charts-test
charts-test: envtest test-binaries ## Chart, clusterctl and envtest-install tests only.
	$(TEST_ENV) HELM=$$(hack/helm.sh) CLUSTERCTL=$$(hack/clusterctl.sh) \
		go test $(TEST_FLAGS) -count=1 -timeout $(TEST_TIMEOUT) ./test/charts/...

.PHONY: release-manifests
release-manifests: ## Write the clusterctl release assets (infrastructure-components.yaml, metadata, templates) to out/.
	mkdir -p out
	kubectl kustomize config/default > out/infrastructure-components.yaml
	cp metadata.yaml templates/cluster-template*.yaml templates/clusterclass-*.yaml out/

# make release: the registry and namespace of the release's images (the charts' values pull
# from ghcr.io/capov), and more flags of test/release/cmd/release (e.g. --platforms).
REGISTRY ?= ghcr.io/capov
RELEASE_ARGS ?=
RELEASE := go run ./test/release/cmd/release --version=$(VERSION) --registry=$(REGISTRY) $(RELEASE_ARGS)

.PHONY: release
release: ## Build release VERSION=vX.Y.Z into out/release/<VERSION>/: images (OCI archives, SBOMs), components pinned by digest, metadata, templates, both charts, notes, checksums; reproducible.
	@case "$(origin VERSION)" in "command line"|environment) ;; *) echo "make release needs VERSION=vX.Y.Z (docs/releasing.md)" >&2; exit 2;; esac
	$(RELEASE) --out=out/release

.PHONY: release-verify
release-verify: ## Build release VERSION twice (out/release-verify/{a,b}) and fail unless both checksums.txt are identical: reproducibility, images included.
	@case "$(origin VERSION)" in "command line"|environment) ;; *) echo "make release-verify needs VERSION=vX.Y.Z" >&2; exit 2;; esac
	rm -rf out/release-verify
	$(RELEASE) --out=out/release-verify/a >/dev/null
	$(RELEASE) --out=out/release-verify/b >/dev/null
	diff -u out/release-verify/a/$(VERSION)/checksums.txt out/release-verify/b/$(VERSION)/checksums.txt
	@echo "release-verify: two builds of $(VERSION) have identical checksums ($$(wc -l <out/release-verify/a/$(VERSION)/checksums.txt) files)"

##@ Tools

$(CONTROLLER_GEN):
	hack/go-install-tool.sh $@ sigs.k8s.io/controller-tools/cmd/controller-gen $(CONTROLLER_GEN_VERSION) sigs.k8s.io/controller-tools

$(CONVERSION_GEN):
	hack/go-install-tool.sh $@ k8s.io/code-generator/cmd/conversion-gen $(CONVERSION_GEN_VERSION) k8s.io/code-generator

$(GOLANGCI_LINT):
	hack/go-install-tool.sh $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint $(GOLANGCI_LINT_VERSION)

.PHONY: tools
tools: $(CONTROLLER_GEN) $(CONVERSION_GEN) $(GOLANGCI_LINT) helm clusterctl ## Build the pinned tools into bin/tools.

.PHONY: helm clusterctl
helm: ## Build helm from the pinned module into bin/tools and print its path.
	@hack/helm.sh
clusterctl: ## Build clusterctl from the pinned module into bin/tools and print its path.
	@hack/clusterctl.sh

.PHONY: clean
clean: ## Remove built binaries (keeps the cached envtest assets and tools).
	rm -f $(BIN)/manager $(BIN)/webhook
