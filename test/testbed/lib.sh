# Shared settings of cluster-up.sh and cluster-down.sh (sourced, not run).
# One testbed cluster per machine: its network namespace, loopback port and
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
