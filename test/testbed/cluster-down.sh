#!/usr/bin/env bash
# cluster-down.sh — stops what cluster-up.sh started, by recorded PID (never
# by name), removes the containers through containerd, unmounts everything
# under the testbed's folders, deletes the network namespace and the files
# that kubelet, libcni and the runc shim keep at fixed paths. Safe to run
# twice and after a crash.
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

T0=$SECONDS
phase() { log "$* ($((SECONDS - T0))s)"; }

# 1. No new pods: the kubelet first, then containerd; the containers and
# their shims by the PIDs recorded in containerd's state folder (the whole
# containerd root is thrown away, so nothing needs deleting through its API).
stop kubelet
stop containerd
if [[ -d $RUN_DIR/containerd ]]; then
  mapfile -t inits < <(find "$RUN_DIR/containerd" -name init.pid 2>/dev/null)
  kill_recorded "${inits[@]}"
fi
# Whatever else runs in the pods' cgroups, then the shims in containerd's.
kill_cgroup "$PODS_CG"
kill_cgroup "$TRACK_CG"
phase "containers stopped"
stop kube-proxy coredns kube-scheduler kube-controller-manager
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

# 3. The network namespace (with it the veth pair, cni0 and every iptables rule).
if [[ -e /run/netns/$NETNS ]]; then
  ip netns delete "$NETNS" 2>/dev/null || { umount "/run/netns/$NETNS" 2>/dev/null; rm -f "/run/netns/$NETNS"; }
fi
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
# The shim's sockets; runc's state of the (now dead) k8s.io containers.
rm -rf /run/containerd/s /run/containerd/runc/k8s.io
rmdir_empty /run/containerd
rm -rf "$RUN_DIR"
if [[ -d $TB_DIR ]]; then
  rm -rf "$TB_DIR"/{etcd,containerd,kubelet,cni,pod-logs,pids,shim-path,pki,etc} "$TB_DIR/kubeconfig" "$TB_DIR/bin/kubectl" "$TB_DIR/bin/helm"
fi

# 5. Empty cgroups the kubelet and containerd made (cgroup v1: one tree per controller).
for tree in /sys/fs/cgroup/*/; do
  for d in kubepods kubepods.slice k8s.io system.slice/containerd.service; do
    [[ -d $tree$d ]] && find "$tree$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
done
true
log "testbed down in $((SECONDS - T0))s (logs kept in $LOGS)"
