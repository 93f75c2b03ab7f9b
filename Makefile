# memcached-operator — `make help` lists the targets.
#
# Every tool is pinned in hack/versions.env and built once from the Go module
# proxy into a per-user store (hack/tool.sh); bin/ holds links to them.

VERSION ?= 0.1.0
IMAGE_TAG_BASE ?= example.com/memcached-operator
IMG ?= $(IMAGE_TAG_BASE):$(VERSION)
CONTAINER_TOOL ?= docker

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

# One cgo setting and one set of build flags for tests, vet, lint, tools and
# images: they then share one build cache. -trimpath because the image is
# built with it (Dockerfile); without it everywhere, the operator's whole
# dependency tree was compiled twice in a cold CI run (once for the bench's
# -trimpath build, once for everything else). No DWARF: every binary is
# linked without it (-w) or only run, and the compiler does less work.
export CGO_ENABLED := 0
export GOFLAGS ?= -buildvcs=false -trimpath -gcflags=all=-dwarf=false

STORE ?= $(or $(XDG_DATA_HOME),$(HOME)/.local/share)/memcached-operator
export STORE
TOOL := hack/tool.sh
LOCALBIN := $(CURDIR)/bin

CHART := charts/memcached-operator
GO_TEST_FLAGS ?=

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-22s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate the CRD into the chart's crds/ (v1alpha1 stored, v1beta1 served with the same schema) and the RBAC rules from kubebuilder markers.
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=$(CHART)/crds
	go run ./hack/crdversions $(CHART)/crds/cache.example.com_memcacheds.yaml v1beta1
	$(CONTROLLER_GEN) rbac:roleName=memcached-operator paths=./internal/... output:rbac:artifacts:config=$(CHART)/generated

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object paths=./apis/...

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -s -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet (the e2e suite's files included).
	go vet -tags e2e ./...

.PHONY: lint
lint: golangci-lint ## Run golangci-lint.
	$(GOLANGCI_LINT) run ./...

# VERIFY_LINT: what verify lints with: lint (golangci-lint, go vet's
# analyzers included) or vet (go vet alone). CI runs vet: golangci-lint is
# built from source, and a cold run has no time for it.
VERIFY_LINT ?= lint
.PHONY: verify
verify: manifests generate ## Fail when generated files are stale, code is unformatted, the linter complains (VERIFY_LINT: lint, golangci-lint; vet, go vet), or the chart README is stale.
	@git diff --exit-code -- apis $(CHART)/crds $(CHART)/generated || { echo 'generated files are stale: run make manifests generate and commit'; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- apis $(CHART)/crds $(CHART)/generated); [ -z "$$untracked" ] || { echo "generated files not committed: $$untracked"; exit 1; }
	@out=$$(gofmt -s -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed: $$out"; exit 1; }
	@# golangci-lint runs go vet's analyzers (govet): a separate go vet
	@# would analyse every package and its dependencies a second time.
	$(MAKE) $(VERIFY_LINT) verify-chart

##@ Test

# TEST_VET: the go vet checks go test runs first (go test's -vet). Off:
# make verify runs go vet with every check, and go test's smaller set would
# analyse every dependency a second time.
TEST_VET ?= off

.PHONY: test
test: manifests generate envtest helm-lint promtool ## Unit tests, envtest suites (real etcd + kube-apiserver, real TLS admission), chart render/lint/dry-run tests, promtool rule tests.
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" PROMTOOL="$(PROMTOOL)" go test ./... -count=1 -vet=$(TEST_VET) -timeout 30m -v -coverprofile cover.out $(GO_TEST_FLAGS)

FUZZTIME ?= 60s
.PHONY: fuzz
fuzz: ## Run every Go fuzzer for FUZZTIME each (default 60s); a finding is saved under the package's testdata/fuzz.
	@set -e; for file in $$(git grep -l '^func Fuzz' -- '*_test.go'); do \
	  pkg=./$$(dirname $$file); \
	  for fz in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
	    echo "go test $$pkg -run '^$$' -fuzz '^$$fz\$$' -fuzztime $(FUZZTIME)"; \
	    go test $$pkg -run '^$$' -fuzz "^$$fz\$$" -fuzztime $(FUZZTIME); \
	  done; \
	done

.PHONY: demo
demo: ## Bring up the project's own cluster, install cert-manager and the chart, and show the operator at work.
	hack/demo.sh

E2E_FLAGS ?=
.PHONY: test-e2e
# E2E_NODES: the nodes of the cluster test-e2e starts; the availability
# suite (drain, node loss, spread over zones) needs 3.
E2E_NODES ?= 3
# The monitoring stack's build (its first is the testbed's longest after
# Kubernetes) and install run beside the first suites, which do not use it;
# its suite runs after them.
# E2E_PREBUILD: make targets run at the lowest CPU priority while the suites
# run, which mostly wait on the cluster, once the monitoring stack is up: CI
# builds what verify, test and the bench need this way (prebuild-checks
# bench-binaries). A build of the same
# tool in the foreground waits for it (hack/tool.sh's lock), and test-e2e
# returns only once they have ended, so the stages after it compile nothing
# twice at once. Their output: _output/e2e-prebuild.log; _output/e2e-prebuild.done
# appears when they have ended.
E2E_PREBUILD ?=
# E2E_PREBUILD_EARLY: likewise, but started before cluster-up, for builds that
# take no lock of hack/tool.sh's store (prebuild-tests): they fill the cores
# the component builds leave idle, and E2E_PREBUILD starts once they end.
E2E_PREBUILD_EARLY ?=
test-e2e: ## Real-cluster tier: cluster of E2E_NODES (3) nodes up with NetworkPolicy enforcement and an OCI registry, the monitoring stack built and installed beside the first suites, smoke, operator, availability, network-policy, OCI and cache suites, then the monitoring suite, then the lifecycle with Helm 4, cluster down (KEEP_CLUSTER=1 keeps it).
	@mkdir -p _output && rm -f _output/e2e-prebuild.done _output/e2e-monitoring.rc
	@$(if $(E2E_PREBUILD_EARLY),(hack/lowprio.sh 19 flock -o _output/e2e-prebuild.lock $(MAKE) --no-print-directory $(E2E_PREBUILD_EARLY) > _output/e2e-prebuild-early.log 2>&1 &),:)
	@$(MAKE) --no-print-directory cluster-up NETPOL=1 REGISTRY=1 NODES=$(E2E_NODES)
	@( hack/lowprio.sh 10 $(MAKE) --no-print-directory monitoring-up > _output/e2e-monitoring.log 2>&1; echo $$? > _output/e2e-monitoring.rc; \
	  $(if $(E2E_PREBUILD),hack/lowprio.sh 19 flock -o _output/e2e-prebuild.lock $(MAKE) --no-print-directory $(E2E_PREBUILD) > _output/e2e-prebuild.log 2>&1; touch _output/e2e-prebuild.done,:) ) & bg=$$!; \
	  rc=0; $(MAKE) --no-print-directory e2e E2E_FLAGS='$(E2E_FLAGS) -ginkgo.label-filter=!monitoring' || rc=$$?; \
	  start=$$SECONDS; while [ ! -e _output/e2e-monitoring.rc ]; do sleep 2; done; \
	  echo "test-e2e: waited $$((SECONDS - start))s for the monitoring stack"; cat _output/e2e-monitoring.log; \
	  if [ $$rc = 0 ] && [ "$$(cat _output/e2e-monitoring.rc)" != 0 ]; then echo "test-e2e: make monitoring-up failed"; rc=1; fi; \
	  if [ $$rc = 0 ]; then $(MAKE) --no-print-directory e2e E2E_FLAGS='$(E2E_FLAGS) -ginkgo.label-filter=monitoring' || rc=$$?; fi; \
	  if [ $$rc = 0 ]; then $(MAKE) --no-print-directory e2e E2E_HELM=helm4 E2E_FLAGS=-ginkgo.label-filter=lifecycle || rc=$$?; fi; \
	  if [ -z "$(KEEP_CLUSTER)" ]; then $(MAKE) --no-print-directory cluster-down; fi; \
	  start=$$SECONDS; wait $$bg; $(if $(E2E_PREBUILD),echo "test-e2e: waited $$((SECONDS - start))s for E2E_PREBUILD to end";) exit $$rc

# Commands that only build (hack/tool.sh's too) run with this GOGC: the
# compiler and linker collect garbage less often, for memory a build
# machine has to spare. Tests run with the default.
BUILD_GOGC ?= 400

# What verify and test would otherwise build cold: their tools, and the Go
# and golangci-lint caches of lint and every test binary (compiled with
# test's flags, none run). Nothing is judged here; verify and test judge.
.PHONY: prebuild-checks
prebuild-checks: ## Build the tools of verify and test and fill their build caches without running a check (CI's E2E_PREBUILD; the test binaries are prebuild-tests').
	@# prebuild-tests is no prerequisite: CI starts it earlier (E2E_PREBUILD_EARLY),
	@# and make would run it again here, linking every test binary a second time.
	$(TOOL) helm4 controller-gen helm-docs helm promtool envtest >/dev/null
	GOGC=$(BUILD_GOGC) GOOS=linux GOARCH=arm64 go build ./cmd/...
	$(if $(filter lint,$(VERIFY_LINT)),-GOGC=$(BUILD_GOGC) $$($(TOOL) golangci-lint) run ./... >/dev/null,-go vet -tags e2e ./... >/dev/null)

.PHONY: prebuild-tests
prebuild-tests: ## Compile every test binary, the e2e suite's too, with test's flags and run none (CI's E2E_PREBUILD_EARLY).
	@mkdir -p _output
	@# The e2e suite's first: its suites need it as soon as the cluster is up
	@# (at the lowest priority beside the component builds it may not be done by then).
	-GOGC=$(BUILD_GOGC) go test -tags e2e ./test/e2e/ -count=1 -vet=$(TEST_VET) -run '^$$' >/dev/null
	-GOGC=$(BUILD_GOGC) go test ./... -count=1 -vet=$(TEST_VET) -coverprofile=_output/prebuild-cover.out -run '^$$' >/dev/null

.PHONY: e2e
e2e: ## Run the e2e suites against the running testbed cluster (E2E_HELM=helm4: with Helm 4; E2E_FLAGS: Ginkgo flags).
	TESTBED_DIR=$(TESTBED_DIR) KUBECONFIG=$(TESTBED_DIR)/kubeconfig E2E_HELM=$(E2E_HELM) \
	  go test -tags e2e ./test/e2e/ -count=1 -vet=$(TEST_VET) -timeout 40m -v $(E2E_FLAGS)

##@ Build

.PHONY: build
build: ## Build the operator binaries into bin/.
	go build -ldflags "-s -w" -o bin/ ./cmd/...

.PHONY: run
run: manifests generate ## Run the operator against the current kubeconfig's cluster, webhooks off (the seed's `make install run`).
	go run ./cmd/memcached-operator --enable-webhooks=false --leader-elect=false --metrics-bind-address=0 $(ARGS)

IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_ARCHIVE ?= _output/image/memcached-operator.tar
.PHONY: image
image: ## Build the operator image for IMAGE_PLATFORMS (linux/amd64 linux/arm64) as one OCI image index in IMAGE_ARCHIVE, without a container engine.
	@mkdir -p $(dir $(IMAGE_ARCHIVE))
	IMG=$(IMG) IMAGE_PLATFORMS="$(IMAGE_PLATFORMS)" hack/image.sh $(IMAGE_ARCHIVE)

.PHONY: docker-build
docker-build: ## Build the operator image with a container engine (not available on the testbed machines).
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the operator image.
	$(CONTAINER_TOOL) push $(IMG)

##@ Deployment

KUBECTL ?= kubectl

.PHONY: install
install: manifests ## Install the CRD into the current kubeconfig's cluster.
	$(KUBECTL) apply --server-side -f $(CHART)/crds/

.PHONY: uninstall
uninstall: ## Remove the CRD (and with it every Memcached) from the current kubeconfig's cluster.
	$(KUBECTL) delete --ignore-not-found -f $(CHART)/crds/

##@ Tools

.PHONY: envtest
envtest: ## Build (once) etcd, kube-apiserver and kubectl for envtest from the module proxy.
	$(eval ENVTEST_ASSETS := $(shell $(TOOL) envtest))

.PHONY: controller-gen
controller-gen: ## Build (once) the pinned controller-gen.
	$(eval CONTROLLER_GEN := $(shell $(TOOL) controller-gen))

.PHONY: golangci-lint
golangci-lint: ## Build (once) the pinned golangci-lint.
	$(eval GOLANGCI_LINT := $(shell $(TOOL) golangci-lint))

.PHONY: promtool
promtool: ## Build (once) the pinned promtool (checks and unit-tests the chart's alerts).
	$(eval PROMTOOL := $(shell $(TOOL) promtool))

.PHONY: helm
helm: ## Build (once) the pinned helm CLI.
	$(eval HELM := $(shell $(TOOL) helm))

.PHONY: helm4
helm4: ## Build (once) the pinned Helm 4 CLI (lint, and the e2e lifecycle specs).
	$(eval HELM4 := $(shell $(TOOL) helm4))

# Targets of the chart and of the real-cluster testbed live beside them.
-include hack/make/*.mk
