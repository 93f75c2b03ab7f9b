#!/usr/bin/env bash
# cluster-up.sh — a real single-node Kubernetes inside a network namespace
# with no route out: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, containerd + runc, kubelet, kube-proxy (iptables), CoreDNS
# as a node process, bridge CNI; then cert-manager from its own Helm chart,
# and with WITH_MONITORING=1 prometheus-operator and a Prometheus
# (monitoring/install.sh).
# Every process is started here, recorded in $TB_DIR/pids and stopped by
# cluster-down.sh. Run as root. Binaries and images come from `make
# cluster-binaries images` (hack/tool.sh's store).
#
#   kubeconfig on the host:  $TB_DIR/kubeconfig (apiserver on 127.0.0.1:16443)
#   wrappers:                $TB_DIR/bin/kubectl, $TB_DIR/bin/helm
#   image names:             $TB_DIR/images.env
#   logs:                    $TB_DIR/logs/<component>.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $(id -u) == 0 ]] || die "run as root (network namespaces, mounts, cgroups)"
START=$SECONDS
WITH_CERT_MANAGER=${WITH_CERT_MANAGER:-1}
WITH_MONITORING=${WITH_MONITORING:-0}
MONITORING_INSTALL=$(dirname "${BASH_SOURCE[0]}")/monitoring/install.sh

KUBECTL_BIN=$("$TOOL" kubectl)

# Already up and healthy: nothing to do (idempotent).
if [[ -e /run/netns/$NETNS ]] && pid_alive kube-apiserver && pid_alive kubelet && pid_alive forward &&
  KUBECONFIG=$TB_DIR/kubeconfig "$KUBECTL_BIN" get --raw /readyz >/dev/null 2>&1; then
  log "already up: KUBECONFIG=$TB_DIR/kubeconfig (cluster-down.sh to stop)"
  if [[ $WITH_MONITORING == 1 ]]; then "$MONITORING_INSTALL"; fi
  exit 0
fi
# Anything left from a failed or crashed run goes first.
if [[ -e /run/netns/$NETNS || -d $RUN_DIR || -d $PIDS ]]; then
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
rm -f "$LOGS"/*.log
# containerd finds its shim through PATH: ours first (Debian may have a 1.x one).
ln -sfn "${B[containerd-shim-runc-v2]}" "$TB_DIR/shim-path/containerd-shim-runc-v2"
export PATH=$TB_DIR/shim-path:$PATH

# start NAME [--host] CMD...: runs CMD detached (own session) inside the
# namespace, logs to $LOGS/NAME.log, records "PID start-time".
start() {
  local name=$1; shift
  local ns=(nsenter --net="/run/netns/$NETNS")
  if [[ $1 == --host ]]; then ns=(); shift; fi
  setsid "${ns[@]}" "$@" </dev/null >>"$LOGS/$name.log" 2>&1 &
  local pid=$!
  # The start time survives the exec chain setsid -> nsenter -> daemon.
  local st
  st=$(proc_start "$pid") || { tail -n 30 "$LOGS/$name.log" >&2; die "$name exited at once"; }
  printf '%s %s\n' "$pid" "$st" >"$PIDS/$name.pid"
}

# wait_for NAME TIMEOUT CMD...: polls CMD until it succeeds; fails loudly with
# the component's log tail when it times out or the component died.
wait_for() {
  local name=$1 timeout=$2; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if [[ -r $PIDS/$name.pid ]] && ! pid_alive "$name"; then
      log "---- last lines of $LOGS/$name.log"; tail -n 40 "$LOGS/$name.log" >&2 || true
      die "$name died (log: $LOGS/$name.log)"
    fi
    if ((SECONDS > deadline)); then
      log "---- last lines of $LOGS/$name.log"; tail -n 40 "$LOGS/$name.log" >&2 || true
      die "$name not ready after ${timeout}s (log: $LOGS/$name.log)"
    fi
    sleep 0.5
  done
}

# ---- network namespace: node address and a default route that cannot leave
log "network namespace $NETNS ($NODE_IP/$NODE_PREFIX, no route out)"
modprobe br_netfilter 2>/dev/null || true
ip netns add "$NETNS"
# Both ends of the veth pair live inside the namespace: the node gets an
# interface with an address, and nothing connects it to the host.
ip -n "$NETNS" link add tb-node type veth peer name tb-peer
ip -n "$NETNS" addr add "$NODE_IP/$NODE_PREFIX" dev tb-node
ip -n "$NETNS" link set lo up
ip -n "$NETNS" link set tb-peer up
ip -n "$NETNS" link set tb-node up
ip -n "$NETNS" route add default via "$NOWHERE" dev tb-node
in_ns sysctl -qw net.ipv4.ip_forward=1
if [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]]; then
  in_ns sysctl -qw net.bridge.bridge-nf-call-iptables=1
else
  log "warning: br_netfilter not available: pod-to-ClusterIP traffic within the bridge may not be NATed"
fi

# ---- PKI, kubeconfigs
"$TBCTL" pki -dir "$PKI" -node-name "$NODE_NAME" -node-ip "$NODE_IP" -service-ip "$SERVICE_IP" \
  -internal-server "https://$NODE_IP:6443" -external-server "https://$APISERVER_HOST_ADDR"
cp "$PKI/admin.kubeconfig" "$TB_DIR/kubeconfig"
export KUBECONFIG=$TB_DIR/kubeconfig
K=("${B[kubectl]}" --kubeconfig "$TB_DIR/kubeconfig")

# ---- containerd (started early: image import overlaps the control plane start)
mkdir -p "$ETC/cni/net.d" "$TB_DIR/containerd" "$TB_DIR/cni"
cat >"$ETC/containerd.toml" <<TOML
version = 4
root = "$TB_DIR/containerd"
state = "$RUN_DIR/containerd"

[plugins."io.containerd.server.v1.grpc"]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.server.v1.ttrpc"]
  address = "$CONTAINERD_SOCK.ttrpc"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"

[plugins."io.containerd.cri.v1.runtime"]
  # No CAP_SYS_RESOURCE on these VMs: never try to lower oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$ETC/cni/net.d"
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
TOML
start containerd "${B[containerd]}" --config "$ETC/containerd.toml" --log-level warn
if mkdir -p "$TRACK_CG" 2>/dev/null; then
  read -r pid _ <"$PIDS/containerd.pid"
  echo "$pid" >"$TRACK_CG/cgroup.procs"
else
  log "warning: no pids cgroup: cluster-down cannot find runc shims that outlive containerd"
fi
CTR=("${B[ctr]}" --address "$CONTAINERD_SOCK" -n k8s.io)
wait_for containerd 30 "${CTR[@]}" version
(
  for img in $IMAGE_ARCHIVES; do
    "${CTR[@]}" images import --local "$img" >/dev/null || { echo "import of $img failed" >&2; exit 1; }
  done
) >>"$LOGS/image-import.log" 2>&1 &
IMPORT_PID=$!

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

start kube-controller-manager "${B[kube-controller-manager]}" \
  --kubeconfig "$PKI/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$PKI/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$PKI/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --root-ca-file "$PKI/ca.crt" --service-account-private-key-file "$PKI/sa.key" \
  --use-service-account-credentials=true \
  --allocate-node-cidrs=true --cluster-cidr "$CLUSTER_CIDR" --node-cidr-mask-size 24 \
  --service-cluster-ip-range "$SERVICE_CIDR"
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

# ---- CNI: one bridge, host-local IPAM on the node's pod CIDR
cat >"$ETC/cni/net.d/10-testbed.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "testbed",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$TB_DIR/cni/networks",
        "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON

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

# ---- kubelet
printf 'nameserver %s\n' "$DNS_IP" >"$ETC/resolv.conf"
cat >"$ETC/kubelet.yaml" <<YAML
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
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
# No CAP_SYS_RESOURCE: the kubelet may not lower its own oom_score_adj.
oomScoreAdj: 0
clusterDNS: ["$DNS_IP"]
clusterDomain: cluster.local
resolvConf: "$ETC/resolv.conf"
podLogsDir: "$TB_DIR/pod-logs"
failSwapOn: false
address: "$NODE_IP"
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
mkdir -p "$TB_DIR/kubelet" "$TB_DIR/pod-logs"
start kubelet "${B[kubelet]}" --config "$ETC/kubelet.yaml" \
  --kubeconfig "$PKI/kubelet.kubeconfig" --root-dir "$TB_DIR/kubelet" --cert-dir "$TB_DIR/kubelet/pki" \
  --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v 1

# ---- kube-proxy (iptables mode)
cat >"$ETC/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$PKI/kube-proxy.kubeconfig"}
mode: iptables
clusterCIDR: "$CLUSTER_CIDR"
hostnameOverride: "$NODE_NAME"
bindAddress: "$NODE_IP"
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
oomScoreAdj: 0
# Leave conntrack sysctls alone (they are global, not per namespace).
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
start kube-proxy "${B[kube-proxy]}" --config "$ETC/kube-proxy.yaml"

wait "$IMPORT_PID" || { tail -n 20 "$LOGS/image-import.log" >&2; die "image import failed (log: $LOGS/image-import.log)"; }
log "images imported ($((SECONDS - START))s)"
wait_for kubelet 120 "${K[@]}" wait --for=condition=Ready "node/$NODE_NAME" --timeout=2s
log "node $NODE_NAME Ready ($((SECONDS - START))s)"
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
chmod +x "$BIN/kubectl" "$BIN/helm"

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
cat >&2 <<EOM
  kubeconfig: $TB_DIR/kubeconfig   (apiserver https://$APISERVER_HOST_ADDR, loopback only)
  wrappers:   $BIN/kubectl  $BIN/helm
  images:     $TB_DIR/images.env
  logs:       $LOGS/
  stop:       make cluster-down
EOM
