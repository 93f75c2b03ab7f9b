# Shared settings and helpers of the testbed's scripts (sourced, not run).
# One testbed cluster per machine: its network namespaces, loopback port and
# runtime folder are machine-wide names.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TOOL=$REPO/hack/tool.sh
NETNS=${TESTBED_NETNS:-mcop-testbed}
# Sockets and containerd's state: short paths (unix socket paths are limited
# to 108 bytes) outside the work tree.
RUN_DIR=/run/memcached-operator-testbed
TB_DIR=${TESTBED_DIR:-$REPO/_output/testbed}
# cluster-down.sh stops the cluster that runs, whichever clone started it:
# cluster-up.sh records its folder here.
if [[ ${TESTBED_USE_RUNNING:-} == 1 && -r $RUN_DIR/testbed-dir ]]; then
  TB_DIR=$(<"$RUN_DIR/testbed-dir")
fi
NODE_NAME=testbed
NODE_IP=10.250.0.1
NODE_PREFIX=24
# An address on the node's subnet that nobody has: the default route points
# at it, so anything not for the node, a pod or a Service fails right there.
NOWHERE=10.250.0.254
CLUSTER_CIDR=10.244.0.0/16
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
DNS_IP=$NODE_IP
APISERVER_HOST_ADDR=127.0.0.1:${TESTBED_APISERVER_PORT:-16443}
CONTAINERD_SOCK=$RUN_DIR/containerd.sock
# The OCI registry (cluster-up.sh WITH_REGISTRY=1): a process of node 1, on
# the node address only, so every node reaches it and nothing outside does.
REGISTRY_HOST=$NODE_IP:5000

# containerd runs in a pids cgroup of its own: the runc shims it forks stay
# there (they outlive containerd and record their PID nowhere), so the
# teardown finds exactly them. Pods live under the kubelet's kubepods cgroup.
TRACK_CG=/sys/fs/cgroup/pids/memcached-operator-testbed
PODS_CG=/sys/fs/cgroup/pids/kubepods

PKI=$TB_DIR/pki
LOGS=$TB_DIR/logs
PIDS=$TB_DIR/pids
ETC=$TB_DIR/etc
BIN=$TB_DIR/bin

log() { printf '[testbed %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

in_ns() { nsenter --net="/run/netns/$NETNS" "$@"; }

# pid_alive NAME: the recorded process still runs (same PID and start time).
pid_alive() {
  local f=$PIDS/$1.pid pid start
  [[ -r $f ]] || return 1
  read -r pid start <"$f"
  [[ -r /proc/$pid/stat ]] || return 1
  [[ $(proc_start "$pid") == "$start" ]]
}

# proc_start PID: the process's start time in clock ticks since boot
# (field 22 of /proc/PID/stat), which tells a reused PID from ours.
proc_start() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  # shellcheck disable=SC2086
  set -- $stat
  printf '%s\n' "${20}"
}

# ---- nodes
# Node 1 ("testbed") is today's node: the control plane runs in its network
# namespace, beside its own kubelet, containerd and kube-proxy. Nodes 2..N
# (testbed-2, ...) each get a kubelet, containerd and kube-proxy of their own,
# in a network namespace and a mount namespace of their own, with their own
# cgroup root: separate machines as far as Kubernetes can tell.
# With several nodes, every node namespace is joined to a bridge that lives in
# a namespace of its own ($BRIDGE_NETNS), which has no route anywhere either.
BRIDGE_NETNS=$NETNS-net
MAX_NODES=9
# Persistent mount namespaces of nodes 2..N: bind mounts of /proc/PID/ns/mnt
# here (a private mount, so they do not propagate into the namespaces).
MNTNS_DIR=$RUN_DIR/mntns
# Fixed paths that kubelet, libcni, the shim and runc use whatever their
# configuration says: each node 2..N mounts a folder of its own over them.
NODE_FIXED_PATHS=(/var/lib/kubelet /var/lib/cni /run/containerd /var/log/pods /var/log/containers)

# node_env I: node I's settings (1-based) in N_* variables.
node_env() {
  local i=$1
  [[ $i =~ ^[1-9]$ ]] || die "node index $i out of range 1..$MAX_NODES"
  N_IP=10.250.0.$i
  N_POD_CIDR=10.244.$((i - 1)).0/24
  # Two zones, alternating: testbed, testbed-3, ... in zone-a; testbed-2,
  # testbed-4, ... in zone-b.
  if ((i % 2)); then N_ZONE=zone-a; else N_ZONE=zone-b; fi
  if ((i == 1)); then
    N_NAME=$NODE_NAME N_SFX="" N_NETNS=$NETNS
    N_DIR=$TB_DIR N_ETC=$ETC N_RUN=$RUN_DIR N_SOCK=$CONTAINERD_SOCK
    N_KUBECONFIG=$PKI/kubelet.kubeconfig
    # Node 1 keeps the host's mount namespace and the root cgroup (kubepods).
    N_MNTNS="" N_CG="" N_CGROUP_ROOT=/
  else
    N_NAME=$NODE_NAME-$i N_SFX=-$NODE_NAME-$i N_NETNS=$NETNS-$i
    N_DIR=$TB_DIR/nodes/$N_NAME N_ETC=$TB_DIR/nodes/$N_NAME/etc N_RUN=$RUN_DIR/$N_NAME
    N_SOCK=$RUN_DIR/$N_NAME/containerd.sock
    N_KUBECONFIG=$PKI/kubelet-$N_NAME.kubeconfig
    N_MNTNS=$MNTNS_DIR/$N_NAME
    # Everything of the node (its daemons, the shims containerd forks and the
    # pods) runs under this pids cgroup: stopping the node or the cluster
    # kills exactly that, and nothing else.
    N_CGROUP_ROOT=/mcop-$N_NAME N_CG=/sys/fs/cgroup/pids/mcop-$N_NAME
  fi
}

# node_index NAME: the index of node NAME (testbed -> 1, testbed-3 -> 3).
node_index() {
  case $1 in
    "$NODE_NAME") echo 1 ;;
    "$NODE_NAME"-[2-9]) echo "${1##*-}" ;;
    *) return 1 ;;
  esac
}

# cluster_nodes: how many nodes the running (or half-stopped) cluster has:
# what cluster-up.sh recorded, or what is left of nodes it started.
cluster_nodes() {
  local n=1 i f
  if [[ -r $RUN_DIR/nodes ]]; then n=$(<"$RUN_DIR/nodes"); fi
  for f in /run/netns/"$NETNS"-[2-9] "$TB_DIR"/nodes/"$NODE_NAME"-[2-9] "$PIDS"/*-"$NODE_NAME"-[2-9].pid; do
    [[ -e $f ]] || continue
    f=${f%.pid}
    i=${f##*-}
    ((i > n)) && n=$i
  done
  echo "$n"
}

# import_into_nodes ARCHIVE...: imports image archives into the containerd
# of every running node of the cluster (a node that is down keeps its store
# and gets them at the next cluster-up).
import_into_nodes() {
  local i nodes ctr a out
  ctr=$("$TOOL" ctr)
  nodes=$(cluster_nodes)
  for ((i = 1; i <= nodes; i++)); do
    node_env "$i"
    [[ -S $N_SOCK ]] && pid_alive "containerd$N_SFX" || continue
    for a; do
      # Quiet unless it fails: containerd warns about cgroup v1 on every call.
      out=$("$ctr" --address "$N_SOCK" -n k8s.io images import --local "$a" 2>&1) ||
        { printf '%s\n' "$out" >&2; return 1; }
    done
    log "imported ${*##*/} into the running testbed ($N_NAME)"
  done
}

# monitoring_images: builds (once) the monitoring stack's image archives (and
# metrics-server's) into
# MON_ARCHIVES and their images.env lines into MON_ENV.
monitoring_images() {
  local n
  MON_ARCHIVES=() MON_ENV=()
  for n in prometheus prometheus-operator prometheus-config-reloader metrics-server; do
    MON_ARCHIVES+=("$("$TOOL" "image-$n")")
    MON_ENV+=("$(tr a-z- A-Z_ <<<"$n")_IMAGE=$("$TOOL" "image-name-$n")")
  done
}

# in_node I CMD...: runs CMD in node I's network (and mount) namespace.
in_node() {
  node_env "$1"; shift
  local ns=(nsenter --net="/run/netns/$N_NETNS")
  [[ -n $N_MNTNS ]] && ns+=(--mount="$N_MNTNS")
  "${ns[@]}" "$@"
}

# start NAME [--host | --node I] CMD...: runs CMD detached (own session)
# inside node 1's namespace (or the host's, or node I's namespaces and pids
# cgroup), logs to $LOGS/NAME.log, records "PID start-time". With --node it
# leaves node I's settings in N_*.
start() {
  local name=$1; shift
  local ns=(nsenter --net="/run/netns/$NETNS")
  if [[ $1 == --host ]]; then
    ns=(); shift
  elif [[ $1 == --node ]]; then
    node_env "$2"; shift 2
    ns=(nsenter --net="/run/netns/$N_NETNS")
    if [[ -n $N_CG ]]; then
      # Joins the node's cgroup before exec, so not even a first child escapes.
      # shellcheck disable=SC2016 # expanded by that sh
      ns=(sh -c 'echo $$ >"$0" && exec "$@"' "$N_CG/daemons/cgroup.procs" "${ns[@]}" --mount="$N_MNTNS")
    fi
  fi
  setsid "${ns[@]}" "$@" </dev/null >>"$LOGS/$name.log" 2>&1 &
  local pid=$!
  # The start time survives the exec chain setsid -> (sh ->) nsenter -> daemon.
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

# node_cgroups I: node I's cgroup root in every v1 hierarchy (the kubelet
# refuses a cgroupRoot that misses one) and the pids cgroup of its daemons.
node_cgroups() {
  node_env "$1"
  [[ -n $N_CG ]] || return 0
  local tree
  for tree in /sys/fs/cgroup/*/; do
    [[ -e ${tree}cgroup.procs && ! -e ${tree}cgroup.controllers ]] || continue
    mkdir -p "$tree${N_CGROUP_ROOT#/}"
    # A new cpuset cgroup starts with no CPUs and no memory nodes.
    if [[ -e ${tree}cpuset.cpus ]]; then
      cat "${tree}cpuset.cpus" >"$tree${N_CGROUP_ROOT#/}/cpuset.cpus"
      cat "${tree}cpuset.mems" >"$tree${N_CGROUP_ROOT#/}/cpuset.mems"
    fi
  done
  mkdir -p "$N_CG/daemons"
}

# start_node_runtime I: node I's containerd (its configuration written by
# cluster-up.sh); returns once it answers.
start_node_runtime() {
  local i=$1 pid
  node_cgroups "$i"
  node_env "$i"
  start "containerd$N_SFX" --node "$i" "$("$TOOL" containerd)" --config "$N_ETC/containerd.toml" --log-level warn
  if [[ -z $N_CG ]]; then
    if mkdir -p "$TRACK_CG" 2>/dev/null; then
      read -r pid _ <"$PIDS/containerd.pid"
      echo "$pid" >"$TRACK_CG/cgroup.procs"
    else
      log "warning: no pids cgroup: cluster-down cannot find runc shims that outlive containerd"
    fi
  fi
  wait_for "containerd$N_SFX" 30 "$("$TOOL" ctr)" --address "$N_SOCK" version
}

# ---- NetworkPolicy enforcement (cluster-up.sh WITH_NETPOL=1): a
# kube-network-policies daemon on every node, beside kube-proxy. cluster-up.sh
# leaves NETPOL_MARK so that node.sh restarts it with the node's other daemons.
NETPOL_MARK=$RUN_DIR/netpol
NETPOL_TABLE=kube-network-policies
netpol_enabled() { [[ -e $NETPOL_MARK ]]; }

# node_daemons I: the recorded names of node I's daemons.
node_daemons() {
  node_env "$1"
  local names=("containerd$N_SFX" "kubelet$N_SFX" "kube-proxy$N_SFX")
  if netpol_enabled; then names+=("kube-network-policies$N_SFX"); fi
  echo "${names[*]}"
}

# netpol_ready I: node I's enforcer has loaded its ruleset (its nftables
# table exists: the kernel took the whole batch, queue target included).
netpol_ready() { in_node "$1" nft list table inet "$NETPOL_TABLE"; }

# start_node_agents I: node I's kubelet and kube-proxy (and its enforcer).
start_node_agents() {
  local i=$1
  node_env "$i"
  start "kubelet$N_SFX" --node "$i" "$("$TOOL" kubelet)" --config "$N_ETC/kubelet.yaml" \
    --kubeconfig "$N_KUBECONFIG" --root-dir "$N_DIR/kubelet" --cert-dir "$N_DIR/kubelet/pki" \
    --hostname-override "$N_NAME" --node-ip "$N_IP" \
    --node-labels "topology.kubernetes.io/zone=$N_ZONE" --v 1
  start "kube-proxy$N_SFX" --node "$i" "$("$TOOL" kube-proxy)" --config "$N_ETC/kube-proxy.yaml"
  if netpol_enabled; then
    # A killed enforcer leaves its table behind (as a machine's kernel would
    # not after a power loss): gone, so that netpol_ready waits for the new one.
    in_node "$i" nft delete table inet "$NETPOL_TABLE" 2>/dev/null || true
    start "kube-network-policies$N_SFX" --node "$i" "$("$TOOL" kube-network-policies)" \
      --kubeconfig "$PKI/kube-network-policies.kubeconfig" --hostname-override "$N_NAME" \
      --metrics-bind-address 127.0.0.1:9080
  fi
}

# kill_recorded FILE...: SIGKILL to PIDs that runc and the shim recorded
# (init.pid under containerd's state folder), then wait for them.
kill_recorded() {
  local f pid pids=()
  for f in "$@"; do
    pid=$(<"$f") 2>/dev/null || continue
    [[ $pid =~ ^[0-9]+$ ]] && kill -KILL "$pid" 2>/dev/null && pids+=("$pid")
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do [[ -e /proc/$pid ]] || break; sleep 0.1; done
  done
}

# kill_cgroup DIR: SIGKILL every process in the cgroup DIR and below (the
# kernel's own record of what was started there), wait, remove the folders.
kill_cgroup() {
  local dir=$1 f pid
  [[ -d $dir ]] || return 0
  for _ in $(seq 50); do
    local left=0
    while IFS= read -r f; do
      while read -r pid; do kill -KILL "$pid" 2>/dev/null; left=1; done <"$f"
    done < <(find "$dir" -name cgroup.procs)
    ((left)) || break
    sleep 0.1
  done
  find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null
  true
}

# kill_node I: node I dies at once, as a machine that loses power: SIGKILL to
# its kubelet, containerd, kube-proxy, enforcer, the shims and every
# container. Its folders, namespaces and configuration stay for
# start_node_* to reuse.
kill_node() {
  local i=$1 name pid
  node_env "$i"
  local daemons=("kubelet$N_SFX" "containerd$N_SFX" "kube-proxy$N_SFX" "kube-network-policies$N_SFX")
  for name in "${daemons[@]}"; do
    if pid_alive "$name"; then read -r pid _ <"$PIDS/$name.pid"; kill -KILL "$pid" 2>/dev/null; fi
  done
  if [[ -n $N_CG ]]; then
    kill_cgroup "$N_CG"
  else
    if [[ -d $RUN_DIR/containerd ]]; then
      mapfile -t inits < <(find "$RUN_DIR/containerd" -name init.pid 2>/dev/null)
      kill_recorded "${inits[@]}"
    fi
    kill_cgroup "$PODS_CG"
    kill_cgroup "$TRACK_CG"
  fi
  for name in "${daemons[@]}"; do
    for _ in $(seq 50); do pid_alive "$name" || break; sleep 0.1; done
    pid_alive "$name" && die "$name survived SIGKILL"
    rm -f "$PIDS/$name.pid"
  done
}
