#!/usr/bin/env bash
# cluster-down.sh — stops what cluster-up.sh started, by recorded PID (never
# by name) and by the pids cgroups it made, for any number of nodes; unmounts
# everything under the testbed's folders (nodes 2..N's mounts go with their
# mount namespaces), deletes the network namespaces and the files that
# kubelet, libcni and the runc shim keep at fixed paths. Safe to run twice
# and after a crash.
set -uo pipefail
TESTBED_USE_RUNNING=1
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $(id -u) == 0 ]] || die "run as root"

# stop NAME...: SIGTERM to each recorded process at once, then wait for
# them; SIGKILL whatever is left after 10s.
stop() {
  local name pid t=$SECONDS
  for name in "$@"; do
    if pid_alive "$name"; then read -r pid _ <"$PIDS/$name.pid"; kill -TERM "$pid" 2>/dev/null; fi
  done
  for name in "$@"; do
    while pid_alive "$name" && ((SECONDS - t < 10)); do sleep 0.1; done
    if pid_alive "$name"; then
      read -r pid _ <"$PIDS/$name.pid"
      log "$name ($pid) ignored SIGTERM: SIGKILL"
      kill -KILL "$pid" 2>/dev/null
      for _ in $(seq 50); do pid_alive "$name" || break; sleep 0.1; done
    fi
    rm -f "$PIDS/$name.pid"
  done
}

T0=$SECONDS
phase() { log "$* ($((SECONDS - T0))s)"; }

NODES=$(cluster_nodes)
# 1. No new pods: the kubelets first, then containerd; the containers and
# their shims by the PIDs recorded in containerd's state folder (the whole
# containerd root is thrown away, so nothing needs deleting through its API).
names=()
for ((i = 1; i <= NODES; i++)); do node_env "$i"; names+=("kubelet$N_SFX"); done
stop "${names[@]}"
names=()
for ((i = 1; i <= NODES; i++)); do node_env "$i"; names+=("containerd$N_SFX"); done
stop "${names[@]}"
if [[ -d $RUN_DIR/containerd ]]; then
  mapfile -t inits < <(find "$RUN_DIR/containerd" -name init.pid 2>/dev/null)
  kill_recorded "${inits[@]}"
fi
# Whatever else runs in the pods' cgroups, then the shims in containerd's;
# nodes 2..N: everything in the node's cgroup (daemons, shims and pods).
kill_cgroup "$PODS_CG"
kill_cgroup "$TRACK_CG"
for ((i = 2; i <= NODES; i++)); do node_env "$i"; kill_cgroup "$N_CG"; done
phase "containers stopped"
names=()
for ((i = 1; i <= NODES; i++)); do node_env "$i"; names+=("kube-proxy$N_SFX" "kube-network-policies$N_SFX"); done
stop "${names[@]}"
stop coredns registry kube-scheduler kube-controller-manager
stop forward kube-apiserver
stop etcd
# Anything still recorded (a name from a newer cluster-up.sh).
if [[ -d $PIDS ]]; then
  for f in "$PIDS"/*.pid; do [[ -e $f ]] && stop "$(basename "$f" .pid)"; done
fi
phase "processes stopped"

# 2. Mounts: everything under our folders, deepest first.
unmount_under() {
  local root=$1 m
  [[ -n $root ]] || return 0
  for _ in 1 2 3; do
    mapfile -t ms < <(awk -v r="$root" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/self/mounts | sort -r)
    ((${#ms[@]})) || return 0
    for m in "${ms[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  done
}
unmount_under "$TB_DIR"
unmount_under "$RUN_DIR"
unmount_under /run/containerd/s

phase "unmounted"

# 3. The network namespaces (with them the veth pairs, the bridge, cni0 and
# every iptables rule).
for f in /run/netns/"$NETNS" /run/netns/"$NETNS"-[2-9] /run/netns/"$BRIDGE_NETNS"; do
  if [[ -e $f ]]; then
    ip netns delete "${f##*/}" 2>/dev/null || { umount "$f" 2>/dev/null; rm -f "$f"; }
  fi
done
# `ip netns add` made /run/netns a mount point of its own: undo it once empty.
if [[ -d /run/netns && -z $(ls -A /run/netns) ]]; then
  mountpoint -q /run/netns && umount /run/netns 2>/dev/null
  rmdir /run/netns 2>/dev/null
fi

# 4. Files at paths fixed by kubelet, libcni and the shim; the testbed's data.
# rmdir_empty DIR: DIR and the empty folders under it, if nothing else is left.
rmdir_empty() { [[ -d $1 ]] && find "$1" -depth -type d -empty -delete 2>/dev/null; true; }
# libcni caches results per network: ours ("testbed") and containerd's loopback one.
rm -rf /var/lib/cni/results/testbed-* /var/lib/cni/results/cni-loopback-* /var/lib/cni/networks/testbed
rmdir_empty /var/lib/cni
rm -rf /var/lib/kubelet/device-plugins /var/lib/kubelet/plugins /var/lib/kubelet/plugins_registry /var/lib/kubelet/pod-resources
rmdir_empty /var/lib/kubelet
rm -rf /var/log/containers
rmdir_empty /var/log/pods
# The shim's sockets; runc's state of the (now dead) k8s.io containers.
rm -rf /run/containerd/s /run/containerd/runc/k8s.io
# Node 1's link for the kubelet's cAdvisor (cluster-up.sh), never a real socket.
[[ $(readlink /run/containerd/containerd.sock 2>/dev/null) == "$RUN_DIR"/* ]] && rm -f /run/containerd/containerd.sock
rmdir_empty /run/containerd
rm -rf "$RUN_DIR"
if [[ -d $TB_DIR ]]; then
  rm -rf "${TB_DIR:?}"/{etcd,containerd,kubelet,cni,pod-logs,pids,shim-path,pki,etc,nodes,registry} "$TB_DIR/kubeconfig" "$TB_DIR/cluster.env" \
    "$TB_DIR/registry.env" "$TB_DIR/registry-pushed.tmp" "$TB_DIR/bin/kubectl" "$TB_DIR/bin/helm" "$TB_DIR/bin/helm4" "$TB_DIR/bin/helm-netns"
fi

# 5. Empty cgroups the kubelet and containerd made (cgroup v1: one tree per controller).
for tree in /sys/fs/cgroup/*/; do
  for d in "$tree"{kubepods,kubepods.slice,k8s.io,system.slice/containerd.service} "$tree"mcop-"$NODE_NAME"-[2-9]; do
    [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
done
true
log "testbed down in $((SECONDS - T0))s (logs kept in $LOGS)"
