#!/usr/bin/env bash
# node.sh — one node of the running testbed dies or comes back, for node-loss
# tests (make node-stop NODE=..., make node-start NODE=...).
#
#   node.sh stop NAME    SIGKILL to the node's kubelet, containerd, kube-proxy,
#                        NetworkPolicy enforcer (NETPOL=1), runc shims and
#                        containers, as a machine that loses power; its
#                        network namespace, address and state on disk stay,
#                        so the API server sees it go silent.
#   node.sh start NAME   starts its containerd, kubelet, kube-proxy (and
#                        enforcer) again from the configuration cluster-up.sh
#                        wrote; returns once the node posts Ready after the
#                        restart and its enforcer has loaded its rules.
#   node.sh status       every node: its processes and its Ready condition.
#   node.sh tag-image SRC DST
#                        every node's containerd gets DST as another name of
#                        the image SRC: a second operator "version" for the
#                        upgrade tests, with nothing rebuilt.
#
# NAME is testbed, testbed-2, ... (stopping testbed, node 1, leaves the
# control plane and CoreDNS running: they are not kubelet-managed).
set -euo pipefail
TESTBED_USE_RUNNING=1
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() { echo "usage: $0 stop|start NAME | status | tag-image SRC DST" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
[[ $(id -u) == 0 ]] || die "run as root"
if [[ ! -e /run/netns/$NETNS ]] || ! pid_alive kube-apiserver; then die "no testbed runs: make cluster-up NODES=..."; fi
K=("$BIN/kubectl")
NODES=$(cluster_nodes)

# ready_condition NAME: the node's Ready status and its last heartbeat.
ready_condition() {
  "${K[@]}" get node "$1" -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status} {.lastHeartbeatTime}{end}'
}

# node_processes I: "name=up|down" for the node's daemons.
node_processes() {
  local name out=() daemons
  read -ra daemons <<<"$(node_daemons "$1")"
  node_env "$1"
  for name in "${daemons[@]}"; do
    if pid_alive "$name"; then out+=("${name%"$N_SFX"}=up"); else out+=("${name%"$N_SFX"}=down"); fi
  done
  echo "${out[*]}"
}

cmd=$1
if [[ $cmd == status ]]; then
  for ((i = 1; i <= NODES; i++)); do
    node_env "$i"
    printf '%-10s %-11s %-7s %-40s Ready=%s\n' "$N_NAME" "$N_IP" "$N_ZONE" "$(node_processes "$i")" \
      "$(ready_condition "$N_NAME" 2>/dev/null || echo '?')"
  done
  exit 0
fi
if [[ $cmd == tag-image ]]; then
  [[ $# == 3 ]] || usage
  CTR=$("$TOOL" ctr)
  for ((i = 1; i <= NODES; i++)); do
    node_env "$i"
    # tag --force: a second run retags without complaint.
    "$CTR" --address "$N_SOCK" -n k8s.io images tag --force "$2" "$3" >/dev/null
  done
  log "$2 is also $3 on $NODES node(s)"
  exit 0
fi

[[ $# == 2 ]] || usage
name=$2
i=$(node_index "$name") || die "no node named $name (testbed, testbed-2, ...)"
((i <= NODES)) || die "the testbed has $NODES node(s): no $name"
node_env "$i"

case $cmd in
  stop)
    kill_node "$i"
    log "node $name stopped (SIGKILL: kubelet, containerd, kube-proxy, enforcer, shims, containers)"
    ;;
  start)
    running=1
    for d in $(node_daemons "$i"); do pid_alive "$d" || running=0; done
    if ((running)); then
      log "node $name already runs"
      exit 0
    fi
    # Half a node (one daemon died) is stopped whole first: a clean restart.
    kill_node "$i"
    # containerd finds its shim through PATH (as cluster-up.sh set it).
    export PATH=$TB_DIR/shim-path:$PATH
    since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    t0=$SECONDS
    start_node_runtime "$i"
    start_node_agents "$i"
    # Ready may still be the last status before the stop: wait for a heartbeat
    # of the new kubelet (RFC 3339 times in UTC compare as strings).
    ready_again() {
      local status beat
      read -r status beat < <(ready_condition "$1"; echo)
      [[ $status == True && ! $beat < $since ]]
    }
    wait_for "kubelet$N_SFX" 120 ready_again "$name"
    if netpol_enabled; then wait_for "kube-network-policies$N_SFX" 60 netpol_ready "$i"; fi
    log "node $name started, Ready in $((SECONDS - t0))s"
    ;;
  *) usage ;;
esac
