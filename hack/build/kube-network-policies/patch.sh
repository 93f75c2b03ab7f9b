#!/usr/bin/env bash
# patch.sh DIR — makes DIR/go.mod, a copy of this wrapper module's go.mod
# (for `go build -modfile`) that replaces kube-network-policies with a patched
# copy of the module in DIR/src, made from the module cache at build time
# (nothing of theirs is kept in this repository; `go build -overlay` cannot
# replace files in the module cache). Prints the go.mod's path.
#
# Why: the controller sends the first packet of each connection to an nfqueue
# with nftables' native `queue` expression. This VM's kernel is built without
# it (# CONFIG_NFT_QUEUE is not set): the kernel answers ENOENT, the whole
# ruleset is refused, and the controller runs enforcing nothing. The kernel
# has nft_compat and the xtables NFQUEUE target (CONFIG_NFT_COMPAT=y,
# CONFIG_NETFILTER_XT_TARGET_NFQUEUE=y), which hand packets to the same
# nfnetlink queue: the patch builds that target (nfqueuext.Target) instead.
# Second: with NRI off (containerd's NRI socket is machine-wide, so the
# testbed turns it off) the controller looks an address that is no pod's
# (a node's, the API server's) up in its nil NRI plugin and dies of a nil
# pointer dereference on the first such packet it is asked about; the
# patch answers "no pod" there instead, as the apiserver-only path means to.
# Everything else — the rules, the sets, the verdicts — is upstream's.
set -euo pipefail
out=${1:?usage: patch.sh DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod=$(cd "$here" && go mod download -json sigs.k8s.io/kube-network-policies | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -r $mod/pkg/networkpolicy/controller.go ]] || { echo "patch.sh: kube-network-policies not found in the module cache ($mod)" >&2; exit 1; }
mkdir -p "$out"
rm -rf "$out/src"
cp -r "$mod" "$out/src"
chmod -R u+w "$out/src"
file=$out/src/pkg/networkpolicy/controller.go
sed -i -e 's|^\tqueue := &expr\.Queue{Num: uint16(c\.config\.QueueID)}$|\tqueue := nfqueuext.Target(uint16(c.config.QueueID), false)|' \
  -e 's|^\t\tqueue\.Flag = expr\.QueueFlagBypass$|\t\tqueue = nfqueuext.Target(uint16(c.config.QueueID), true)|' \
  -e 's|^\t"github\.com/google/nftables/expr"$|&\n\t"memcached-operator.local/build/kube-network-policies/nfqueuext"|' \
  -e 's|^\t\t\tpodKey := c\.nriPlugin\.GetPodFromIP(podIP)$|\t\t\tif c.nriPlugin == nil {\n\t\t\t\treturn nil\n\t\t\t}\n&|' \
  "$file"
# Each rewrite must have hit (two queue rules, one import, one NRI lookup): a
# new upstream version that moved them fails here rather than building rules
# this kernel refuses or a daemon that dies.
count() { grep -c -- "$1" "$file" || true; }
if [[ $(count 'nfqueuext\.Target(uint16(c\.config\.QueueID), false)') != 2 ||
  $(count 'nfqueuext\.Target(uint16(c\.config\.QueueID), true)') != 2 ||
  $(count '"memcached-operator.local/build/kube-network-policies/nfqueuext"') != 1 ||
  $(count 'expr\.Queue') != 0 || $(count 'if c\.nriPlugin == nil {') != 1 ]]; then
  echo "patch.sh: $file is not v0.8.0's: not every rewrite applied" >&2
  exit 1
fi
cp "$here/go.mod" "$here/go.sum" "$out/"
(cd "$here" && go mod edit -modfile "$out/go.mod" -replace "sigs.k8s.io/kube-network-policies=$out/src")
echo "$out/go.mod"
