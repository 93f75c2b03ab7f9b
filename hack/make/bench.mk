# The performance bench (test/bench/README.md), included by the Makefile.
# Its control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok with simulated nodes) listens on loopback only, inside
# a network namespace of its own that has nothing but a loopback interface.

BENCH_DIR ?= $(CURDIR)/_output/bench
# Network namespace the bench runs in; empty runs it on the host's loopback.
BENCH_NETNS ?= memcached-bench
BENCH_N ?= 100
# BENCH_WORKERS: the operator's --max-concurrent-reconciles and the
# reference's workers; empty keeps the bench's default, the operator's own.
BENCH_WORKERS ?=
BENCH_NODES ?= 50
BENCH_IDLE ?= 10m
# More flags for `bench run` (go run ./test/bench run -h), e.g.
# BENCH_ARGS='-sweep-workers 1,2,4,8,16 -sweep-n 50,100,200,400 -sweep-qps 10,50,0'.
BENCH_ARGS ?=
# BENCH_KEEP=1 leaves the bench cluster running after make bench.
BENCH_KEEP ?=
BENCH_TOOLS := etcd kube-apiserver kube-controller-manager kube-scheduler kwok
BENCH_BIN := $(BENCH_DIR)/bin/bench
BENCH_EXEC = $(if $(BENCH_NETNS),nsenter --net=/run/netns/$(BENCH_NETNS)) $(BENCH_BIN)
BENCH_RUN_FLAGS = -out $(BENCH_DIR) -bin-dir $(BENCH_DIR)/bin -n $(BENCH_N) $(if $(BENCH_WORKERS),-workers $(BENCH_WORKERS)) -idle $(BENCH_IDLE) $(BENCH_ARGS)

##@ Bench

# The operator is built as the Dockerfile builds it (-trimpath, stripped), so
# its RSS is the shipped binary's.

.PHONY: bench
bench: ## Run the bench (cluster up, scenarios, cluster down): table on stdout, $(BENCH_DIR)/results.json and plots. BENCH_N, BENCH_WORKERS, BENCH_IDLE, BENCH_ARGS.
	@$(MAKE) --no-print-directory bench-cluster-up
	@rc=0; $(MAKE) --no-print-directory bench-run || rc=$$?; \
	  if [ -z "$(BENCH_KEEP)" ]; then $(MAKE) --no-print-directory bench-cluster-down; fi; exit $$rc

.PHONY: bench-ci
bench-ci: ## CI-sized bench: N=50, short idle window, checks only the bench's correctness (every fleet converges, 0 idle and restart writes, 0 admission errors).
	@$(MAKE) --no-print-directory bench BENCH_N=50 BENCH_IDLE=20s \
	  BENCH_ARGS='-ci -order reference-first -churn-rounds 1 -admission-rates 50,200,1000 -admission-duration 2s -profile-seconds 0 $(BENCH_ARGS)'

.PHONY: bench-run
bench-run: bench-binaries ## Run the bench's scenarios against the running bench cluster.
	$(BENCH_EXEC) run $(BENCH_RUN_FLAGS) 2>&1 | tee $(BENCH_DIR)/bench-run.log

.PHONY: bench-cluster-up
bench-cluster-up: bench-binaries bench-netns ## Start the bench's control plane with $(BENCH_NODES) kwok nodes (loopback only; kubeconfigs in $(BENCH_DIR)/cluster).
	$(BENCH_EXEC) up -out $(BENCH_DIR) -bin-dir $(BENCH_DIR)/bin -nodes $(BENCH_NODES)

.PHONY: bench-cluster-down
bench-cluster-down: ## Stop the bench's control plane (by the PIDs it recorded) and remove its data and network namespace; safe twice.
	@mkdir -p $(BENCH_DIR)/bin
	go build -o $(BENCH_BIN) ./test/bench
	$(BENCH_BIN) down -out $(BENCH_DIR)
	@if [ -n "$(BENCH_NETNS)" ] && ip netns list | awk '{print $$1}' | grep -qx '$(BENCH_NETNS)'; then \
	  pids=$$(ip netns pids $(BENCH_NETNS)); \
	  if [ -n "$$pids" ]; then echo "processes left in netns $(BENCH_NETNS): $$pids (not removing it)"; exit 1; fi; \
	  ip netns delete $(BENCH_NETNS); fi

.PHONY: bench-binaries
bench-binaries: ## Build (once, into $(STORE)) the bench's components, link them into $(BENCH_DIR)/bin, build the operator and the bench.
	@mkdir -p $(BENCH_DIR)/bin
	@for t in $(BENCH_TOOLS); do ln -sfn "$$($(TOOL) $$t)" $(BENCH_DIR)/bin/$$t; done
	@# One build at a time here: test-e2e's E2E_PREBUILD may still be running this.
	GOGC=$(BUILD_GOGC) flock $(BENCH_DIR)/.build.lock sh -c 'go build -trimpath -ldflags "-s -w" -o $(BENCH_DIR)/bin/memcached-operator.tmp ./cmd/memcached-operator && \
	  mv -f $(BENCH_DIR)/bin/memcached-operator.tmp $(BENCH_DIR)/bin/memcached-operator && \
	  go build -o $(BENCH_BIN).tmp ./test/bench && mv -f $(BENCH_BIN).tmp $(BENCH_BIN)'

.PHONY: bench-netns
bench-netns:
	@if [ -n "$(BENCH_NETNS)" ]; then \
	  ip netns list | awk '{print $$1}' | grep -qx '$(BENCH_NETNS)' || ip netns add $(BENCH_NETNS); \
	  ip -n $(BENCH_NETNS) link set lo up; fi

.PHONY: bench-docs
bench-docs: ## Copy the last run's table, results.json and plots into docs/bench/n$(BENCH_N)/ (docs/performance.md cites the runs it shows).
	@mkdir -p docs/bench/n$(BENCH_N)
	cp $(BENCH_DIR)/results.md $(BENCH_DIR)/results.json $(BENCH_DIR)/*.png docs/bench/n$(BENCH_N)/
