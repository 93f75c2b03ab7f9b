#!/usr/bin/env bash
# patch-kubelet.sh DIR — makes DIR/go.mod, a copy of this wrapper module's
# go.mod (for `go build -modfile`) that replaces k8s.io/kubernetes with a
# patched copy of the module in DIR/src, made from the module cache at build
# time (nothing of theirs is kept in this repository). Prints the go.mod's
# path. Only the kubelet is built with it.
#
# Why: before lowering a container's memory limit in place, the kubelet reads
# the container's memory usage (criStatsProvider.PodCPUAndMemoryStats). It
# asks containerd for the stats of every container of the pod's sandbox,
# which include the stopped instance the kubelet keeps of a restarted
# container (no metrics, so no memory), and matches them to containers by
# name. When that instance comes after the running one, its empty stats fail
# the check ("missing container memory usage") and the limit is never
# lowered; a warm fleet's pods have restarted in place before a shrink. The
# patch skips stats of any instance but the newest of each name, as the
# kubelet's pod stats listing already does. Everything else is upstream's.
set -euo pipefail
out=${1:?usage: patch-kubelet.sh DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod=$(cd "$here" && go mod download -json k8s.io/kubernetes | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
file=pkg/kubelet/stats/cri_stats_provider.go
[[ -r $mod/$file ]] || { echo "patch-kubelet.sh: k8s.io/kubernetes not found in the module cache ($mod)" >&2; exit 1; }
mkdir -p "$out"
rm -rf "$out/src"
cp -r "$mod" "$out/src"
chmod -R u+w "$out/src"
sed -i -e '/^\t\tcontainerStatus := podStatus.FindContainerStatusByName(stats.Attributes.Metadata.Name)$/{n;s|^\t\tif containerStatus == nil {$|\t\tif containerStatus != nil \&\& containerStatus.ID.ID != stats.Attributes.Id {\n\t\t\tcontinue // a stopped instance of the container: not the one running\n\t\t}\n&|}' \
  "$out/src/$file"
# The rewrite must have hit once: a new upstream version that moved it fails
# here rather than building a kubelet that keeps the bug.
[[ $(grep -c 'containerStatus.ID.ID != stats.Attributes.Id' "$out/src/$file" || true) == 1 ]] ||
  { echo "patch-kubelet.sh: $file is not v1.37.2's: the rewrite did not apply" >&2; exit 1; }
cp "$here/go.mod" "$here/go.sum" "$out/"
(cd "$here" && go mod edit -modfile "$out/go.mod" -replace "k8s.io/kubernetes=$out/src")
echo "$out/go.mod"
