#!/usr/bin/env bash
# images.sh — the testbed's OCI image archives and $TB_DIR/images.env.
# pause, memcached and cert-manager's images are built once into the store
# (hack/tool.sh image-*); the operator image is rebuilt every run from
# whatever ./cmd/... holds, by hack/image.sh (`make image`) for this
# machine's platform: a non-root base (UID 65532) with each static binary at
# /<name>, entrypoint /memcached-operator.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=../../hack/versions.env
source "$REPO/hack/versions.env"
IMG=${IMG:-example.com/memcached-operator:0.1.0}
export CGO_ENABLED=0
export GOGC=${GOGC:-400} # builds only, as hack/tool.sh

mkdir -p "$BIN" "$TB_DIR/images"
# tbctl itself (PKI, port forward, image writer) for cluster-up.sh.
(cd "$REPO" && go build -o "$BIN/tbctl.tmp" ./test/testbed/tbctl) && mv -f "$BIN/tbctl.tmp" "$BIN/tbctl"

archives=()
for n in pause memcached memcached-next cert-manager-controller cert-manager-webhook cert-manager-cainjector; do
  archives+=("$("$TOOL" "image-$n")")
done
# The monitoring stack only when asked for (WITH_MONITORING=1, `make cluster-up
# MONITORING=1`): its first build is the longest of the testbed's.
MON_ENV=()
if [[ ${WITH_MONITORING:-0} == 1 ]]; then
  monitoring_images
  archives+=("${MON_ARCHIVES[@]}")
fi

# The smoke tests' in-cluster client/server (no busybox can be pulled).
mkdir -p "$TB_DIR/probe-rootfs"
(cd "$REPO" && go build -ldflags "-s -w" -o "$TB_DIR/probe-rootfs/probe" ./test/testbed/probe)
"$BIN/tbctl" image -out "$TB_DIR/images/probe.tar" -name localhost/testbed-probe:1 -nonroot-base \
  -user 65532:65532 -file "$TB_DIR/probe-rootfs/probe:/probe" -entrypoint /probe
archives+=("$TB_DIR/images/probe.tar")

op_archive=""
if compgen -G "$REPO/cmd/*/*.go" >/dev/null; then
  # `make image`'s builder, for this machine's platform only.
  op_archive=$TB_DIR/images/operator.tar
  IMG=$IMG IMAGE_PLATFORMS="linux/$(go env GOARCH)" "$REPO/hack/image.sh" "$op_archive"
  archives+=("$op_archive")
else
  log "no ./cmd/*: operator image skipped"
fi

cat >"$TB_DIR/images.env.tmp" <<ENV
# Images of the testbed cluster (written by test/testbed/images.sh); all are
# imported into containerd's k8s.io namespace by cluster-up.sh: use
# imagePullPolicy IfNotPresent (or Never).
PAUSE_IMAGE=$("$TOOL" image-name-pause)
MEMCACHED_IMAGE=$("$TOOL" image-name-memcached)
MEMCACHED_NEXT_IMAGE=$("$TOOL" image-name-memcached-next)
CERT_MANAGER_CONTROLLER_IMAGE=$("$TOOL" image-name-cert-manager-controller)
CERT_MANAGER_WEBHOOK_IMAGE=$("$TOOL" image-name-cert-manager-webhook)
CERT_MANAGER_CAINJECTOR_IMAGE=$("$TOOL" image-name-cert-manager-cainjector)
PROBE_IMAGE=localhost/testbed-probe:1
OPERATOR_IMAGE=${op_archive:+$IMG}
IMAGE_ARCHIVES="${archives[*]}"
ENV
printf '%s\n' "${MON_ENV[@]}" >>"$TB_DIR/images.env.tmp"
mv -f "$TB_DIR/images.env.tmp" "$TB_DIR/images.env"
for a in "${archives[@]}"; do log "image $(du -h "$a" | cut -f1)  $a"; done
# A running cluster gets the fresh operator image right away, on every node.
if [[ -n $op_archive ]]; then import_into_nodes "$op_archive"; fi
