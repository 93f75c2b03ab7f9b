#!/usr/bin/env bash
# image.sh ARCHIVE — the operator image as an OCI image archive, without a
# container engine or a registry: every binary of ./cmd/... built static for
# each of IMAGE_PLATFORMS, on the Dockerfile's layout (each binary at /<name>,
# entrypoint /memcached-operator, UID 65532 with a passwd entry).
#
#   IMG              the reference the archive names (io.containerd.image.name)
#   IMAGE_PLATFORMS  space-separated linux/ARCH (default: linux/amd64 linux/arm64);
#                    two or more make one OCI image index with an image each,
#                    one makes a single image (the testbed's, which its
#                    nodes import and its registry serves)
#
# `ctr images import ARCHIVE` loads it; an OCI tool (skopeo, crane, oras)
# copies it to a registry (tbctl push takes single-platform archives only).
set -euo pipefail
out=$(realpath -m "${1:?usage: hack/image.sh ARCHIVE}")
cd "$(dirname "${BASH_SOURCE[0]}")/.."
IMG=${IMG:-example.com/memcached-operator:0.1.0}
IMAGE_PLATFORMS=${IMAGE_PLATFORMS:-linux/amd64 linux/arm64}
export CGO_ENABLED=0
export GOFLAGS=${GOFLAGS:--buildvcs=false -trimpath -gcflags=all=-dwarf=false}
export GOGC=${GOGC:-400} # builds only, as hack/tool.sh

work=$(mktemp -d "$(dirname "$out")/.image-XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/tbctl" ./test/testbed/tbctl

read -r -a platforms <<<"$IMAGE_PLATFORMS"
args=()
for p in "${platforms[@]}"; do
  [[ $p == linux/* && $p != */*/* ]] || { echo "image.sh: platform $p: want linux/ARCH" >&2; exit 1; }
  arch=${p#linux/}
  mkdir -p "$work/$arch"
  GOOS=linux GOARCH=$arch go build -ldflags "-s -w" -o "$work/$arch/" ./cmd/...
  [[ -f $work/$arch/memcached-operator ]] || { echo "image.sh: ./cmd/... built no memcached-operator for $p" >&2; exit 1; }
  args+=(-arch "$arch=$work/$arch:/")
done
"$work/tbctl" image -out "$out" -name "$IMG" -nonroot-base -user 65532:65532 \
  "${args[@]}" -entrypoint /memcached-operator
