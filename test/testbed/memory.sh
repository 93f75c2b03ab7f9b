#!/usr/bin/env bash
# memory.sh — resident memory of the running testbed: every process
# cluster-up.sh recorded, plus every process in the testbed's pids cgroups
# (runc shims, containers, and on nodes 2..N everything of the node), each
# counted once. Prints one line per component and the total (VmRSS, MiB).
# Shared pages (the same binary mapped by three kubelets) count once per
# process, as `ps` counts them: an upper bound of what the cluster costs.
set -euo pipefail
TESTBED_USE_RUNNING=1
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ -d $PIDS ]] || die "no testbed runs"

declare -A seen
total=0 count=0
# rss PID: VmRSS in KiB (0 for a process gone or a kernel thread).
rss() { awk '/^VmRSS:/ {print $2; found=1} END {if (!found) print 0}' "/proc/$1/status" 2>/dev/null || echo 0; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
# add LABEL PID...: one line for LABEL, summing the PIDs not counted yet.
add() {
  local label=$1 pid kib=0 n=0; shift
  for pid in "$@"; do
    [[ -n ${seen[$pid]:-} ]] && continue
    seen[$pid]=1
    kib=$((kib + $(rss "$pid"))) n=$((n + 1))
  done
  ((n)) || return 0
  total=$((total + kib)) count=$((count + n))
  printf '%-32s %3d proc %7.1f MiB\n' "$label" "$n" "$(mib "$kib")"
}
# cgroup_pids DIR: every PID in the cgroup DIR and below.
cgroup_pids() { [[ -d $1 ]] && find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null; true; }

for f in "$PIDS"/*.pid; do
  name=$(basename "$f" .pid)
  pid_alive "$name" || continue
  read -r pid _ <"$f"
  add "$name" "$pid"
done
NODES=$(cluster_nodes)
mapfile -t ps < <(cgroup_pids "$TRACK_CG")
add "runc shims ($NODE_NAME)" "${ps[@]}"
mapfile -t ps < <(cgroup_pids "$PODS_CG")
add "containers ($NODE_NAME)" "${ps[@]}"
for ((i = 2; i <= NODES; i++)); do
  node_env "$i"
  mapfile -t ps < <(cgroup_pids "$N_CG")
  add "shims and containers ($N_NAME)" "${ps[@]}"
done
printf '%-32s %3d proc %7.1f MiB\n' "total ($NODES node(s))" "$count" "$(mib "$total")"
