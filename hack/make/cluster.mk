# Real Kubernetes testbed of one or more nodes (test/testbed/README.md), included by the Makefile.

TESTBED_DIR ?= $(CURDIR)/_output/testbed
export TESTBED_DIR
export IMG
TESTBED_KUBECONFIG := $(TESTBED_DIR)/kubeconfig
# MONITORING=1: the testbed also runs prometheus-operator, a Prometheus and metrics-server
# (test/testbed/monitoring); `make test-e2e` installs it with monitoring-up
# once the cluster is up.
MONITORING ?= 0
export WITH_MONITORING = $(MONITORING)
# NODES=N: the testbed has N nodes (1 to 9): node 1 runs the control plane and
# is schedulable, nodes 2..N are workers, each in network and mount
# namespaces of its own. `make test-e2e NODES=3` passes it on.
NODES ?= 1
export TESTBED_NODES = $(NODES)
# NETPOL=1: every node also runs a NetworkPolicy enforcer (kube-network-policies,
# hack/build/kube-network-policies); `make test-e2e` always asks for it.
NETPOL ?= 0
export WITH_NETPOL = $(NETPOL)
# REGISTRY=1: node 1 also runs an OCI registry (CNCF distribution,
# hack/build/registry) with TLS and htpasswd auth, which every node's
# containerd trusts; the operator and memcached images are pushed to it
# ($(TESTBED_DIR)/registry.env). `make test-e2e` asks for it (label oci).
REGISTRY ?= 0
export WITH_REGISTRY = $(REGISTRY)
# NODE=name for node-stop and node-start (testbed, testbed-2, ...).
NODE ?=
# Debian packages the testbed needs (runc, CNI plugins, iptables, conntrack,
# memcached for its image, gcc and libc6-dev for the static pause binary).
TESTBED_DEBS := runc containernetworking-plugins iptables conntrack memcached gcc libc6-dev util-linux iproute2 kmod
# nft tells cluster-up that each enforcer's ruleset is loaded.
ifeq ($(NETPOL),1)
TESTBED_DEBS += nftables
endif

##@ Cluster

.PHONY: cluster-deps
# One apt at a time: CI runs this beside test-e2e, whose cluster-up needs it too.
cluster-deps: ## Install the Debian packages the testbed needs (apt-get, only what is missing).
	@exec 9>/run/lock/memcached-operator-apt.lock; flock 9; \
	missing=$$(for p in $(TESTBED_DEBS); do dpkg-query -W -f='$${db:Status-Status}\n' $$p 2>/dev/null | grep -qx installed || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

.PHONY: cluster-binaries
cluster-binaries: ## Build (once, into $(STORE)) etcd, Kubernetes, containerd, CoreDNS, helm and cert-manager (NETPOL=1: and kube-network-policies; REGISTRY=1: and the registry).
	$(TOOL) etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl \
	  containerd ctr containerd-shim-runc-v2 coredns helm \
	  cert-manager-controller cert-manager-webhook cert-manager-cainjector \
	  $(if $(filter 1,$(NETPOL)),kube-network-policies) $(if $(filter 1,$(REGISTRY)),registry) >/dev/null

.PHONY: images
images: cluster-deps ## Build the testbed's OCI image archives (operator image every time, the others once).
	test/testbed/images.sh

.PHONY: cluster-up
cluster-up: cluster-binaries cluster-deps images ## Start the testbed cluster of NODES nodes (default 1) + cert-manager (MONITORING=1: + prometheus-operator and Prometheus; NETPOL=1: + NetworkPolicy enforcement; REGISTRY=1: + an OCI registry); kubeconfig in $(TESTBED_DIR)/kubeconfig.
	test/testbed/cluster-up.sh

.PHONY: monitoring-up
monitoring-up: ## Build (once) and install prometheus-operator, a Prometheus and metrics-server on the running testbed (what cluster-up MONITORING=1 does at start).
	test/testbed/monitoring/install.sh

.PHONY: node-stop
node-stop: ## Kill one node of the running testbed at once (NODE=testbed-2): kubelet, containerd, kube-proxy, enforcer, shims, containers.
	@[ -n "$(NODE)" ] || { echo 'NODE=<name> is required (testbed, testbed-2, ...)'; exit 2; }
	test/testbed/node.sh stop $(NODE)

.PHONY: node-start
node-start: ## Start a stopped node again (NODE=testbed-2); returns once it is Ready.
	@[ -n "$(NODE)" ] || { echo 'NODE=<name> is required (testbed, testbed-2, ...)'; exit 2; }
	test/testbed/node.sh start $(NODE)

.PHONY: cluster-status
cluster-status: ## Every node of the running testbed: its processes and Ready condition; the cluster's resident memory.
	@test/testbed/node.sh status
	@test/testbed/memory.sh

.PHONY: cluster-down
cluster-down: ## Stop the testbed cluster and remove everything it left (safe twice, after a crash).
	test/testbed/cluster-down.sh

.PHONY: test-cluster-smoke
test-cluster-smoke: ## Smoke test of the running testbed (pods, Services, DNS from every node, memcached, cert-manager).
	KUBECONFIG=$(TESTBED_KUBECONFIG) TESTBED_DIR=$(TESTBED_DIR) \
	  go test -tags e2e ./test/e2e/ -count=1 -vet=$(TEST_VET) -timeout 15m -v -args -ginkgo.label-filter=cluster-smoke -ginkgo.v
