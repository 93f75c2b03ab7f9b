#!/usr/bin/env bash
# cluster-up.sh — a real Kubernetes of TESTBED_NODES nodes (default 1) inside
# network namespaces with no route out: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and CoreDNS (node processes of node
# 1), and on every node containerd + runc, kubelet, kube-proxy (iptables),
# bridge CNI; then cert-manager from its own Helm chart, and with
# WITH_MONITORING=1 prometheus-operator and a Prometheus (monitoring/install.sh).
# With WITH_NETPOL=1 every node also runs a NetworkPolicy enforcer,
# kube-network-policies (hack/build/kube-network-policies), beside kube-proxy.
# With WITH_REGISTRY=1 node 1 also runs an OCI registry (CNCF distribution,
# hack/build/registry) on 10.250.0.1:5000 with TLS from the testbed's CA and
# per-cluster htpasswd credentials; every node's containerd trusts it through
# its hosts dir, and the operator and memcached images are pushed to it
# ($TB_DIR/registry.env).
# Nodes 2..N live in network and mount namespaces of their own (lib.sh,
# node_env); node.sh stops and starts one node.
# Every process is started here, recorded in $TB_DIR/pids and stopped by
# cluster-down.sh. Run as root. Binaries and images come from `make
# cluster-binaries images` (hack/tool.sh's store).
#
#   kubeconfig on the host:  $TB_DIR/kubeconfig (apiserver on 127.0.0.1:16443)
#   wrappers:                $TB_DIR/bin/kubectl, $TB_DIR/bin/helm, $TB_DIR/bin/helm4
#   image names:             $TB_DIR/images.env
#   registry (REGISTRY=1):   $TB_DIR/registry.env, $TB_DIR/bin/helm-netns
#   logs:                    $TB_DIR/logs/<component>.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $(id -u) == 0 ]] || die "run as root (network namespaces, mounts, cgroups)"
START=$SECONDS
WITH_CERT_MANAGER=${WITH_CERT_MANAGER:-1}
WITH_MONITORING=${WITH_MONITORING:-0}
WITH_NETPOL=${WITH_NETPOL:-0}
WITH_REGISTRY=${WITH_REGISTRY:-0}
NODES=${TESTBED_NODES:-1}
[[ $NODES =~ ^[1-9]$ ]] || die "TESTBED_NODES=$NODES: from 1 to $MAX_NODES nodes"
MONITORING_INSTALL=$(dirname "${BASH_SOURCE[0]}")/monitoring/install.sh

KUBECTL_BIN=$("$TOOL" kubectl)

# Already up and healthy: nothing to do (idempotent).
if [[ -e /run/netns/$NETNS ]] && pid_alive kube-apiserver && pid_alive kubelet && pid_alive forward &&
  KUBECONFIG=$TB_DIR/kubeconfig "$KUBECTL_BIN" get --raw /readyz >/dev/null 2>&1; then
  running=$(cluster_nodes)
  ((running == NODES)) || die "the running testbed has $running node(s), not $NODES: make cluster-down first"
  if [[ $WITH_NETPOL == 1 ]] && ! netpol_enabled; then
    die "the running testbed enforces no NetworkPolicy: make cluster-down first, then cluster-up NETPOL=1"
  fi
  if [[ $WITH_REGISTRY == 1 ]] && ! pid_alive registry; then
    die "the running testbed has no registry: make cluster-down first, then cluster-up REGISTRY=1"
  fi
  log "already up ($running node(s)): KUBECONFIG=$TB_DIR/kubeconfig (cluster-down.sh to stop)"
  if [[ $WITH_MONITORING == 1 ]]; then "$MONITORING_INSTALL"; fi
  exit 0
fi
# Anything left from a failed or crashed run goes first.
if [[ -e /run/netns/$NETNS || -e /run/netns/$BRIDGE_NETNS || -d $RUN_DIR || -d $PIDS ]]; then
  log "cleaning up a previous testbed first"
  "$(dirname "${BASH_SOURCE[0]}")/cluster-down.sh"
fi

declare -A B
for n in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy \
  containerd ctr containerd-shim-runc-v2 coredns helm; do
  B[$n]=$("$TOOL" "$n")
done
B[kubectl]=$KUBECTL_BIN
for c in runc iptables conntrack nsenter; do
  command -v "$c" >/dev/null || die "$c is missing: run 'make cluster-deps' (apt-get install runc iptables conntrack util-linux)"
done
if [[ $WITH_NETPOL == 1 ]]; then
  B[kube-network-policies]=$("$TOOL" kube-network-policies)
  # nft only checks that the enforcer's ruleset loaded (netpol_ready).
  command -v nft >/dev/null || die "nft is missing: run 'make cluster-deps NETPOL=1' (apt-get install nftables)"
fi
if [[ $WITH_REGISTRY == 1 ]]; then B[registry]=$("$TOOL" registry); fi
[[ -x /usr/lib/cni/bridge ]] || die "CNI plugins missing: run 'make cluster-deps' (containernetworking-plugins)"
[[ -r $TB_DIR/images.env ]] || die "no images: run 'make images' first"
TBCTL=$TB_DIR/bin/tbctl
[[ -x $TBCTL ]] || die "no $TBCTL: run 'make images' first"
# shellcheck source=/dev/null
source "$TB_DIR/images.env"
# shellcheck source=../../hack/versions.env
source "$REPO/hack/versions.env"

mkdir -p "$RUN_DIR" "$LOGS" "$PIDS" "$ETC" "$BIN" "$TB_DIR/shim-path"
printf '%s\n' "$TB_DIR" >"$RUN_DIR/testbed-dir"
echo "$NODES" >"$RUN_DIR/nodes"
if [[ $WITH_NETPOL == 1 ]]; then touch "$NETPOL_MARK"; fi
rm -f "$LOGS"/*.log
# containerd finds its shim through PATH: ours first (Debian may have a 1.x one).
ln -sfn "${B[containerd-shim-runc-v2]}" "$TB_DIR/shim-path/containerd-shim-runc-v2"
export PATH=$TB_DIR/shim-path:$PATH

# ---- network namespaces: node addresses and a default route that cannot leave
log "network: $NODES node(s) on 10.250.0.0/$NODE_PREFIX, pod CIDRs 10.244.<i-1>.0/24, no route out"
modprobe br_netfilter 2>/dev/null || true
if ((NODES > 1)); then
  # The bridge joining the nodes sits in a namespace of its own, so no host
  # interface is ever part of the testbed's network.
  ip netns add "$BRIDGE_NETNS"
  ip -n "$BRIDGE_NETNS" link set lo up
  ip -n "$BRIDGE_NETNS" link add tb-bridge type bridge
  ip -n "$BRIDGE_NETNS" link set tb-bridge up
fi
for ((i = 1; i <= NODES; i++)); do
  node_env "$i"
  ip netns add "$N_NETNS"
  if ((NODES == 1)); then
    # Both ends of the veth pair live inside the namespace: the node gets an
    # interface with an address, and nothing connects it to the host.
    ip -n "$N_NETNS" link add tb-node type veth peer name tb-peer
    ip -n "$N_NETNS" link set tb-peer up
  else
    ip -n "$N_NETNS" link add tb-node type veth peer name "tb-port$i" netns "$BRIDGE_NETNS"
    ip -n "$BRIDGE_NETNS" link set "tb-port$i" master tb-bridge up
  fi
  ip -n "$N_NETNS" addr add "$N_IP/$NODE_PREFIX" dev tb-node
  ip -n "$N_NETNS" link set lo up
  ip -n "$N_NETNS" link set tb-node up
  ip -n "$N_NETNS" route add default via "$NOWHERE" dev tb-node
  # The other nodes' pods are behind their node's address (what a cloud's
  # route table or an overlay would do).
  for ((j = 1; j <= NODES; j++)); do
    ((j == i)) && continue
    ip -n "$N_NETNS" route add "10.244.$((j - 1)).0/24" via "10.250.0.$j" dev tb-node
  done
  nsenter --net="/run/netns/$N_NETNS" sysctl -qw net.ipv4.ip_forward=1
  if [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]]; then
    nsenter --net="/run/netns/$N_NETNS" sysctl -qw net.bridge.bridge-nf-call-iptables=1
  else
    log "warning: br_netfilter not available: pod-to-ClusterIP traffic within the bridge may not be NATed"
  fi
done

# ---- mount namespaces of nodes 2..N: kubelet, libcni, the shim and runc keep
# state at fixed paths (NODE_FIXED_PATHS) that two nodes must not share. Each
# node's namespace is persistent (bound to a file), so it outlives any of the
# node's processes: node.sh stops and restarts them in the same one.
if ((NODES > 1)); then
  mkdir -p "$MNTNS_DIR"
  mount --bind "$MNTNS_DIR" "$MNTNS_DIR"
  mount --make-private "$MNTNS_DIR"
fi
for ((i = 2; i <= NODES; i++)); do
  node_env "$i"
  touch "$N_MNTNS"
  unshare --mount="$N_MNTNS" --propagation private true
  binds=()
  for p in "${NODE_FIXED_PATHS[@]}"; do
    mkdir -p "$p" "$N_RUN/fixed$p"
    binds+=("$N_RUN/fixed$p" "$p")
  done
  # The copies of the network namespaces' and other nodes' mount namespace
  # files would keep those alive after cluster-down: drop them in here.
  # shellcheck disable=SC2016 # expanded by that sh
  nsenter --mount="$N_MNTNS" sh -c '
    for m in /run/netns "$0"; do mountpoint -q "$m" && umount -R "$m"; done
    while [ $# -gt 1 ]; do mount --bind "$1" "$2" || exit 1; shift 2; done' "$MNTNS_DIR" "${binds[@]}" ||
    die "mount namespace of $N_NAME"
done

# ---- PKI, kubeconfigs
extra_nodes=()
for ((i = 2; i <= NODES; i++)); do node_env "$i"; extra_nodes+=("$N_NAME"); done
registry_pki=()
if [[ $WITH_REGISTRY == 1 ]]; then registry_pki=(-registry-ip "$NODE_IP"); fi
"$TBCTL" pki -dir "$PKI" -node-name "$NODE_NAME" -extra-nodes "$(IFS=,; echo "${extra_nodes[*]}")" \
  -node-ip "$NODE_IP" -service-ip "$SERVICE_IP" -internal-server "https://$NODE_IP:6443" -external-server "https://$APISERVER_HOST_ADDR" \
  "${registry_pki[@]}"
cp "$PKI/admin.kubeconfig" "$TB_DIR/kubeconfig"
# What the e2e suite expects to find (beside the kubeconfig, like images.env).
{
  echo "# The testbed's nodes (written by cluster-up.sh)."
  echo "NODES=$NODES"
  echo "NODE_NAMES=\"$NODE_NAME ${extra_nodes[*]}\""
  echo "NETPOL=$WITH_NETPOL"
  echo "REGISTRY=$WITH_REGISTRY"
} >"$TB_DIR/cluster.env"
export KUBECONFIG=$TB_DIR/kubeconfig
K=("${B[kubectl]}" --kubeconfig "$TB_DIR/kubeconfig")

# ---- every node's configuration: containerd, CNI, kubelet, kube-proxy
# write_node_config I: node I's files under $N_ETC (node 1's are where the
# single-node testbed always had them).
write_node_config() {
  node_env "$1"
  mkdir -p "$N_ETC/cni/net.d" "$N_DIR/containerd" "$N_DIR/cni" "$N_DIR/kubelet" "$N_DIR/pod-logs" "$N_RUN"
  # The kubelet's cAdvisor looks for containerd only at its default socket.
  # Without it a restarted container's stats have no memory usage, and the
  # kubelet then never lowers that container's memory limit in place.
  local fixed_run=/run/containerd
  [[ -n $N_MNTNS ]] && fixed_run=$N_RUN/fixed/run/containerd
  mkdir -p "$fixed_run"
  if [[ -e $fixed_run/containerd.sock && ! -L $fixed_run/containerd.sock ]]; then
    die "$fixed_run/containerd.sock is another containerd's socket"
  fi
  ln -sfn "$N_SOCK" "$fixed_run/containerd.sock"
  # The registry (WITH_REGISTRY=1) through containerd's hosts dir: one
  # hosts.toml per registry host, trusting the testbed's CA; no insecure flag.
  local registry_config=""
  if [[ $WITH_REGISTRY == 1 ]]; then
    registry_config="  [plugins.\"io.containerd.cri.v1.images\".registry]
    config_path = \"$N_ETC/certs.d\""
    mkdir -p "$N_ETC/certs.d/$REGISTRY_HOST"
    cat >"$N_ETC/certs.d/$REGISTRY_HOST/hosts.toml" <<TOML
# The testbed's registry (written by cluster-up.sh): TLS verified against the
# testbed's CA; credentials come from each pod's imagePullSecrets.
server = "https://$REGISTRY_HOST"

[host."https://$REGISTRY_HOST"]
  capabilities = ["pull", "resolve"]
  ca = "$PKI/ca.crt"
TOML
  fi
  cat >"$N_ETC/containerd.toml" <<TOML
version = 4
root = "$N_DIR/containerd"
state = "$N_RUN/containerd"

[plugins."io.containerd.server.v1.grpc"]
  address = "$N_SOCK"
[plugins."io.containerd.server.v1.ttrpc"]
  address = "$N_SOCK.ttrpc"

# NRI is unused, and its socket path (/run/nri) is fixed and machine-wide.
[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"
$registry_config

[plugins."io.containerd.cri.v1.runtime"]
  # No CAP_SYS_RESOURCE on these VMs: never try to lower oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$N_ETC/cni/net.d"
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
TOML

  # CNI: one bridge per node, host-local IPAM on the node's pod CIDR.
  cat >"$N_ETC/cni/net.d/10-testbed.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "testbed",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$N_DIR/cni/networks",
        "ranges": [[{"subnet": "$N_POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON

  printf 'nameserver %s\n' "$DNS_IP" >"$N_ETC/resolv.conf"
  local cgroup_root=""
  # Nodes 2..N: a cgroup root each, or every kubelet would manage /kubepods.
  [[ $N_CGROUP_ROOT != / ]] && cgroup_root="cgroupRoot: $N_CGROUP_ROOT"
  cat >"$N_ETC/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: Webhook}
# This VM has cgroup v1 only (a hybrid that cannot be switched).
failCgroupV1: false
cgroupDriver: cgroupfs
$cgroup_root
containerRuntimeEndpoint: unix://$N_SOCK
# No CAP_SYS_RESOURCE: the kubelet may not lower its own oom_score_adj.
oomScoreAdj: 0
clusterDNS: ["$DNS_IP"]
clusterDomain: cluster.local
resolvConf: "$N_ETC/resolv.conf"
podLogsDir: "$N_DIR/pod-logs"
failSwapOn: false
address: "$N_IP"
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
serializeImagePulls: false
# Secret and ConfigMap volumes are refreshed on a pod's sync: every 10 s here
# instead of every minute, so a configuration prometheus-operator writes (or a
# renewed certificate) reaches its pod within seconds, not a minute.
syncFrequency: 10s
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
YAML

  cat >"$N_ETC/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$PKI/kube-proxy.kubeconfig"}
mode: iptables
clusterCIDR: "$CLUSTER_CIDR"
hostnameOverride: "$N_NAME"
bindAddress: "$N_IP"
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
oomScoreAdj: 0
# Leave conntrack sysctls alone (they are global, not per namespace).
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
}
for ((i = 1; i <= NODES; i++)); do write_node_config "$i"; done

# ---- containerd on every node (started early: image import overlaps the
# control plane start). Each node has an image store of its own.
IMPORT_PIDS=()
for ((i = 1; i <= NODES; i++)); do
  start_node_runtime "$i"
  (
    for img in $IMAGE_ARCHIVES; do
      "${B[ctr]}" --address "$N_SOCK" -n k8s.io images import --local "$img" >/dev/null ||
        { echo "import of $img into $N_NAME failed" >&2; exit 1; }
    done
  ) >>"$LOGS/image-import$N_SFX.log" 2>&1 &
  IMPORT_PIDS+=("$!")
done

# ---- the OCI registry (WITH_REGISTRY=1): node 1's address only, TLS from the
# testbed's CA, htpasswd credentials made for this cluster. The images are
# pushed in the background while the control plane starts.
PUSH_PID=""
if [[ $WITH_REGISTRY == 1 ]]; then
  REGISTRY_USER=testbed
  "$TBCTL" htpasswd -out "$PKI/registry.htpasswd" -user "$REGISTRY_USER" -password-file "$PKI/registry.password"
  mkdir -p "$TB_DIR/registry"
  cat >"$ETC/registry.yml" <<YAML
version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: $TB_DIR/registry
http:
  addr: $REGISTRY_HOST
  secret: $(tr -dc A-Za-z0-9 </dev/urandom | head -c 32)
  tls:
    certificate: $PKI/registry.crt
    key: $PKI/registry.key
auth:
  htpasswd:
    realm: testbed-registry
    path: $PKI/registry.htpasswd
YAML
  # No tracing exporter: the default one would dial an OTLP collector.
  start registry env OTEL_TRACES_EXPORTER=none "${B[registry]}" serve "$ETC/registry.yml"
  registry_listening() { in_ns bash -c "exec 3<>/dev/tcp/${REGISTRY_HOST%:*}/${REGISTRY_HOST#*:}"; }
  wait_for registry 30 registry_listening
  log "registry listening on https://$REGISTRY_HOST ($((SECONDS - START))s)"
  # push NAME ARCHIVE REPOSITORY TAG: prints NAME=HOST/REPOSITORY@DIGEST.
  push() {
    local ref
    ref=$(in_ns "$TBCTL" push -archive "$2" -ref "$REGISTRY_HOST/$3:$4" -ca "$PKI/ca.crt" \
      -user "$REGISTRY_USER" -password-file "$PKI/registry.password") || return 1
    printf '%s=%s\n' "$1" "$ref"
  }
  # The archives images.sh listed (the same files every node imports).
  mc_archive=""
  for a in $IMAGE_ARCHIVES; do [[ ${a##*/} == memcached-*.tar && ${a##*/} != memcached-next-* ]] && mc_archive=$a; done
  [[ -n $mc_archive ]] || die "images.env lists no memcached archive: run 'make images'"
  (
    push REGISTRY_MEMCACHED_IMAGE "$mc_archive" testbed/memcached "${MEMCACHED_IMAGE##*:}"
    if [[ -n $OPERATOR_IMAGE ]]; then
      push REGISTRY_OPERATOR_IMAGE "$TB_DIR/images/operator.tar" testbed/memcached-operator "${OPERATOR_IMAGE##*:}"
    fi
  ) >"$TB_DIR/registry-pushed.tmp" 2>>"$LOGS/registry-push.log" &
  PUSH_PID=$!
fi

# ---- etcd
start etcd "${B[etcd]}" --name testbed --data-dir "$TB_DIR/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster testbed=http://127.0.0.1:2380 --unsafe-no-fsync --log-level warn

# ---- kube-apiserver (inside the namespace: it reaches pod and Service IPs)
start kube-apiserver "${B[kube-apiserver]}" \
  --advertise-address "$NODE_IP" --bind-address 0.0.0.0 --secure-port 6443 \
  --etcd-servers http://127.0.0.1:2379 \
  --service-cluster-ip-range "$SERVICE_CIDR" \
  --authorization-mode Node,RBAC \
  --enable-admission-plugins NodeRestriction,PodSecurity,OwnerReferencesPermissionEnforcement \
  --allow-privileged=true \
  --client-ca-file "$PKI/ca.crt" \
  --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types InternalIP \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --requestheader-client-ca-file "$PKI/front-proxy-ca.crt" \
  --requestheader-allowed-names front-proxy-client \
  --requestheader-extra-headers-prefix X-Remote-Extra- \
  --requestheader-group-headers X-Remote-Group \
  --requestheader-username-headers X-Remote-User \
  --proxy-client-cert-file "$PKI/front-proxy-client.crt" \
  --proxy-client-key-file "$PKI/front-proxy-client.key" \
  --enable-aggregator-routing=true

# The host reaches the apiserver through a loopback-only port forwarded into
# the namespace (no interface or route joins the host and the namespace).
start forward --host "$TBCTL" forward -netns "/run/netns/$NETNS" -listen "$APISERVER_HOST_ADDR" -target "$NODE_IP:6443"
wait_for kube-apiserver 90 "${K[@]}" get --raw /readyz
log "kube-apiserver ready ($((SECONDS - START))s)"

# A node monitor grace period of 30 s (50 s by default) still outlasts two
# missed lease renewals (every 10 s), and the node-loss spec waits for it.
# Autoscalers are evaluated every 5 s (15 s by default): the autoscaling spec
# waits for two evaluations.
start kube-controller-manager "${B[kube-controller-manager]}" \
  --kubeconfig "$PKI/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$PKI/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$PKI/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --root-ca-file "$PKI/ca.crt" --service-account-private-key-file "$PKI/sa.key" \
  --use-service-account-credentials=true \
  --allocate-node-cidrs=true --cluster-cidr "$CLUSTER_CIDR" --node-cidr-mask-size 24 \
  --service-cluster-ip-range "$SERVICE_CIDR" --node-monitor-grace-period 30s \
  --horizontal-pod-autoscaler-sync-period 5s
start kube-scheduler "${B[kube-scheduler]}" \
  --kubeconfig "$PKI/scheduler.kubeconfig" \
  --authentication-kubeconfig "$PKI/scheduler.kubeconfig" \
  --authorization-kubeconfig "$PKI/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false

# CoreDNS reads Services and EndpointSlices as system:coredns.
"${K[@]}" apply -f - >/dev/null <<'YAML'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:coredns"}
YAML

# ---- CoreDNS on the node address; no forward plugin: names outside the
# cluster fail locally instead of leaving the machine.
cat >"$ETC/Corefile" <<COREFILE
.:53 {
    errors
    health 127.0.0.1:8080
    ready 127.0.0.1:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $PKI/coredns.kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
    loadbalance
}
COREFILE
start coredns "${B[coredns]}" -conf "$ETC/Corefile"

# ---- every node's kubelet and kube-proxy (iptables mode). The Node objects
# are made first with their pod CIDR and zone, so node i always gets
# 10.244.<i-1>.0/24 (the CNI range and the routes above) whichever kubelet
# registers first; the controller-manager's allocator keeps CIDRs it finds set.
for ((i = 1; i <= NODES; i++)); do
  node_env "$i"
  "${K[@]}" create -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata:
  name: $N_NAME
  labels: {kubernetes.io/hostname: $N_NAME, topology.kubernetes.io/zone: $N_ZONE}
spec:
  podCIDR: $N_POD_CIDR
  podCIDRs: [$N_POD_CIDR]
YAML
done
# The enforcers read policies, pods and namespaces as
# system:kube-network-policies (one client certificate for every node, like
# kube-proxy's): list and watch, nothing else. Nodes are read only for admin
# network policies, which the testbed does not serve; the controller records
# no events.
if [[ $WITH_NETPOL == 1 ]]; then
  "${K[@]}" apply -f - >/dev/null <<'YAML'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:kube-network-policies"}
rules:
- apiGroups: [""]
  resources: [pods, namespaces]
  verbs: [list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:kube-network-policies"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kube-network-policies"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:kube-network-policies"}
YAML
fi
for ((i = 1; i <= NODES; i++)); do start_node_agents "$i"; done

for ((i = 1; i <= NODES; i++)); do
  node_env "$i"
  wait "${IMPORT_PIDS[i - 1]}" ||
    { tail -n 20 "$LOGS/image-import$N_SFX.log" >&2; die "image import failed (log: $LOGS/image-import$N_SFX.log)"; }
done
log "images imported ($((SECONDS - START))s)"
for ((i = 1; i <= NODES; i++)); do
  node_env "$i"
  wait_for "kubelet$N_SFX" 120 "${K[@]}" wait --for=condition=Ready "node/$N_NAME" --timeout=2s
  log "node $N_NAME Ready ($((SECONDS - START))s)"
done
if [[ $WITH_NETPOL == 1 ]]; then
  for ((i = 1; i <= NODES; i++)); do
    node_env "$i"
    wait_for "kube-network-policies$N_SFX" 60 netpol_ready "$i"
  done
  log "NetworkPolicy enforcers loaded on every node ($((SECONDS - START))s)"
fi
coredns_ready() { in_ns bash -c 'exec 3<>/dev/tcp/127.0.0.1/8181 && printf "GET /ready HTTP/1.0\r\n\r\n" >&3 && grep -q "200 OK" <&3'; }
wait_for coredns 60 coredns_ready

# ---- wrappers for host tools
cat >"$BIN/kubectl" <<SH
#!/bin/sh
# kubectl for the testbed cluster (written by cluster-up.sh)
KUBECONFIG="$TB_DIR/kubeconfig" exec "${B[kubectl]}" "\$@"
SH
cat >"$BIN/helm" <<SH
#!/bin/sh
# helm for the testbed cluster (written by cluster-up.sh)
KUBECONFIG="$TB_DIR/kubeconfig" exec "${B[helm]}" "\$@"
SH
# Helm 4 for the lifecycle specs, built from the module proxy on first use.
cat >"$BIN/helm4" <<SH
#!/bin/sh
# helm 4 for the testbed cluster (written by cluster-up.sh)
HELM4=\$("$TOOL" helm4) || exit 1
KUBECONFIG="$TB_DIR/kubeconfig" exec "\$HELM4" "\$@"
SH
chmod +x "$BIN/kubectl" "$BIN/helm" "$BIN/helm4"

# ---- the registry's images and what a client needs to use it
if [[ $WITH_REGISTRY == 1 ]]; then
  wait "$PUSH_PID" || { tail -n 20 "$LOGS/registry-push.log" >&2; die "pushing the images to the registry failed (log: $LOGS/registry-push.log)"; }
  {
    echo "# The testbed's OCI registry (written by cluster-up.sh, REGISTRY=1). It listens on"
    echo "# node 1's address only: use it from inside the testbed's network namespace"
    echo "# (nsenter --net=/run/netns/$NETNS, or $BIN/helm-netns)."
    echo "REGISTRY_HOST=$REGISTRY_HOST"
    echo "REGISTRY_USER=$REGISTRY_USER"
    echo "REGISTRY_PASSWORD=$(<"$PKI/registry.password")"
    echo "REGISTRY_CA=$PKI/ca.crt"
    echo "# Pushed by tbctl push: distinct from the archives imported into the nodes."
    cat "$TB_DIR/registry-pushed.tmp"
  } >"$TB_DIR/registry.env"
  chmod 600 "$TB_DIR/registry.env"   # it holds the password
  rm -f "$TB_DIR/registry-pushed.tmp"
  cat >"$BIN/helm-netns" <<SH
#!/bin/sh
# helm inside the testbed's network namespace, where the registry
# (https://$REGISTRY_HOST) is (written by cluster-up.sh, REGISTRY=1; as root).
# It reaches the apiserver at https://$NODE_IP:6443.
KUBECONFIG="$PKI/admin-internal.kubeconfig" exec nsenter --net="/run/netns/$NETNS" "${B[helm]}" "\$@"
SH
  chmod +x "$BIN/helm-netns"
  log "registry: images pushed ($((SECONDS - START))s): $TB_DIR/registry.env"
fi

# ---- cert-manager from the chart inside its own Go module, with local images
if [[ $WITH_CERT_MANAGER == 1 ]]; then
  CM_CHART=$(cd "$REPO/hack/build/cert-manager" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)/deploy/charts/cert-manager
  log "installing cert-manager $CERT_MANAGER_VERSION from $CM_CHART"
  "$BIN/helm" upgrade --install cert-manager "$CM_CHART" -n cert-manager --create-namespace \
    --set crds.enabled=true \
    --set image.repository="${CERT_MANAGER_CONTROLLER_IMAGE%:*}" --set image.tag="${CERT_MANAGER_CONTROLLER_IMAGE##*:}" \
    --set webhook.image.repository="${CERT_MANAGER_WEBHOOK_IMAGE%:*}" --set webhook.image.tag="${CERT_MANAGER_WEBHOOK_IMAGE##*:}" \
    --set cainjector.image.repository="${CERT_MANAGER_CAINJECTOR_IMAGE%:*}" --set cainjector.image.tag="${CERT_MANAGER_CAINJECTOR_IMAGE##*:}" \
    --set startupapicheck.enabled=false \
    --wait --timeout 3m >>"$LOGS/cert-manager-install.log" 2>&1 ||
    { tail -n 20 "$LOGS/cert-manager-install.log" >&2; "${K[@]}" -n cert-manager get pods -o wide >&2 || true; die "cert-manager install failed"; }
  # Ready means its webhook answers the apiserver (caBundle injected, serving).
  cm_webhook_ready() {
    "${K[@]}" apply --dry-run=server -f - <<'YAML'
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: readiness-probe, namespace: default}
spec: {selfSigned: {}}
YAML
  }
  wait_for cert-manager 90 cm_webhook_ready
  log "cert-manager ready ($((SECONDS - START))s)"
fi

if [[ $WITH_MONITORING == 1 ]]; then "$MONITORING_INSTALL"; fi

log "cluster up in $((SECONDS - START))s"
for ((i = 1; i <= NODES; i++)); do
  node_env "$i"
  printf '  node %-10s %-11s pods %-14s %s  netns %s\n' "$N_NAME" "$N_IP" "$N_POD_CIDR" "$N_ZONE" "$N_NETNS" >&2
done
cat >&2 <<EOM
  kubeconfig: $TB_DIR/kubeconfig   (apiserver https://$APISERVER_HOST_ADDR, loopback only)
  wrappers:   $BIN/kubectl  $BIN/helm  $BIN/helm4
  images:     $TB_DIR/images.env$([[ $WITH_REGISTRY == 1 ]] && printf '\n  registry:   https://%s (inside the testbed network): %s' "$REGISTRY_HOST" "$TB_DIR/registry.env")
  logs:       $LOGS/
  stop:       make cluster-down    (one node: test/testbed/node.sh stop|start NAME)
EOM
