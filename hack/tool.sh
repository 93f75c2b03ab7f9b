#!/usr/bin/env bash
# tool.sh NAME... — makes sure each pinned binary is in the per-user store and
# prints its path. Nothing here downloads a release: every binary is built from
# the Go module proxy, once per version, and reused by every clone on the
# machine (the store lives outside the work tree, like setup-envtest's).
#
#   STORE   where binaries live (default ${XDG_DATA_HOME:-~/.local/share}/memcached-operator)
#
# Names: etcd kube-apiserver kubectl kube-controller-manager kube-scheduler
#        kubelet kube-proxy controller-gen golangci-lint helm helm4 helm-docs
#        containerd ctr containerd-shim-runc-v2 coredns kwok
#        cert-manager-controller cert-manager-webhook cert-manager-cainjector
#        promtool (rule checks and rule unit tests of the chart's PrometheusRule)
#        kube-network-policies (the testbed's NetworkPolicy enforcer, NETPOL=1;
#          hack/build/kube-network-policies)
#        registry (the testbed's OCI registry, REGISTRY=1: CNCF distribution v3 with
#          the filesystem driver and htpasswd auth only, hack/build/registry)
#        prometheus prometheus-operator prometheus-config-reloader (the testbed's
#          monitoring stack, hack/build/prometheus{,-operator}; CRDs: prometheus-operator-crds)
#        metrics-server (the testbed's resource metrics API for autoscaling,
#          beside the monitoring stack; hack/build/metrics-server)
#        image-pause image-memcached image-memcached-next image-cert-manager-{controller,webhook,cainjector}
#        image-prometheus image-prometheus-operator image-prometheus-config-reloader image-metrics-server
#          (/bin/<name>, UID 65534)
#          (OCI image archives for the testbed, test/testbed/tbctl; the image
#          name is the archive's io.containerd.image.name, see image_name)
#        envtest (a folder with etcd, kube-apiserver and kubectl, for KUBEBUILDER_ASSETS)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$HERE/versions.env"
STORE=${STORE:-${XDG_DATA_HOME:-$HOME/.local/share}/memcached-operator}
# One cgo setting and the Makefile's build flags: tests, host binaries and
# image binaries then share a single build cache instead of compiling
# Kubernetes twice.
export CGO_ENABLED=0
export GOFLAGS=${GOFLAGS:--buildvcs=false -trimpath -gcflags=all=-dwarf=false}
# This script only builds: the compiler and linker collect garbage less
# often, for memory a build machine has to spare.
export GOGC=${GOGC:-400}

log() { printf '[tool %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# built DEST: a binary is built when executable, an image archive (never
# executable) when not empty; moved into place whole, so either is complete.
built() { [[ -x $1 || ($1 == *.tar && -s $1) ]]; }

# build NAME DEST CMD... runs CMD with $OUT set to a temporary file under the
# store and moves it into place, so a running copy is never overwritten and a
# half-written binary is never seen. One machine-wide lock serialises builds:
# on two cores, two Kubernetes builds at once only make both slower, and a
# parallel caller waiting for the same binary then finds it built.
build() {
  local name=$1 dest=$2; shift 2
  built "$dest" && return 0
  mkdir -p "$(dirname "$dest")" "$STORE"
  exec {lock}>"$STORE/.build.lock"
  flock "$lock"
  if ! built "$dest"; then
    local start=$SECONDS
    log "building $name -> $dest (first time only)"
    OUT="$dest.tmp.$$" "$@"
    mv -f "$dest.tmp.$$" "$dest"
    log "built $name in $((SECONDS - start))s"
  fi
  exec {lock}>&-
}

k8s_ldflags() {
  local v=$K8S_VERSION minor
  minor=${v#v1.}; minor=${minor%%.*}
  local x=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  printf '%s' "-s -w$x"
}

go_k8s() { (cd "$HERE/build/kubernetes" && go build -ldflags "$(k8s_ldflags)" -o "$OUT" "k8s.io/kubernetes/cmd/$1"); }
# The kubelet, built against a patched copy of the module that
# patch-kubelet.sh makes from the module cache: it reads a restarted
# container's memory usage from its running instance, not a stopped one.
go_kubelet() {
  local dir=$HERE/build/kubernetes tmp rc=0
  tmp=$(mktemp -d)
  "$dir/patch-kubelet.sh" "$tmp" >/dev/null || rc=$?
  if ((rc == 0)); then
    (cd "$dir" && go build -modfile "$tmp/go.mod" -ldflags "$(k8s_ldflags)" -o "$OUT" k8s.io/kubernetes/cmd/kubelet) || rc=$?
  fi
  rm -rf "$tmp"
  return "$rc"
}
go_coredns() { (cd "$HERE/build/coredns" && go build -ldflags "-s -w" -o "$OUT" ./cmd/coredns); }
# cert-manager's mains live in modules the proxy cannot serve; hack/build/cert-manager
# has small mains over the cert-manager module's packages (CA and self-signed
# issuers only: the testbed needs no other, and ACME's DNS providers and Vault
# were most of the controller's build).
go_cert_manager() {
  (cd "$HERE/build/cert-manager" && go build \
    -ldflags "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$CERT_MANAGER_VERSION -X github.com/cert-manager/cert-manager/pkg/util.AppGitCommit=release" \
    -o "$OUT" "./cmd/$1")
}
# Images: OCI archives made by test/testbed/tbctl with go-containerregistry.
tbctl() { (cd "$HERE/.." && go run ./test/testbed/tbctl "$@"); }
img_pause() {
  local tmp; tmp=$(mktemp -d)
  gcc -static -Os -s -o "$tmp/pause" "$HERE/../test/testbed/images/pause.c"
  tbctl image -out "$OUT" -name "$(image_name pause)" -file "$tmp/pause:/pause" -entrypoint /pause -user 65535:65535
  rm -rf "$tmp"
}
# Debian's memcached and the shared libraries ldd lists, at their own paths;
# no passwd entry and nothing writable needed (pods run it as UID 11211).
img_memcached() {
  local args=() lib
  for lib in $(ldd /usr/bin/memcached | grep -o '/[^ ]*'); do args+=(-file "$lib"); done
  tbctl image -out "$OUT" -name "$(image_name "$1")" -file /usr/bin/memcached "${args[@]}" \
    -entrypoint /usr/bin/memcached -user 11211:11211
}
img_cert_manager() {
  tbctl image -out "$OUT" -name "$(image_name "cert-manager-$1")" -nonroot-base -user 65532:65532 \
    -file "$2:/$1" -entrypoint "/$1"
}
# The monitoring images: one static binary at /bin/<name> (where the upstream
# images keep theirs, so prometheus-operator's generated pods find them).
img_static() {
  tbctl image -out "$OUT" -name "$(image_name "$1")" -nonroot-base -user 65534:65534 \
    -file "$2:/bin/$1" -entrypoint "/bin/$1"
}
# image_name NAME: the reference an image archive is imported under.
image_name() {
  case $1 in
    pause) printf 'localhost/pause:%s' "$PAUSE_VERSION" ;;
    memcached) printf 'localhost/memcached:%s' "$(memcached_tag)" ;;
    memcached-next) printf 'localhost/memcached:%s-next' "$(memcached_tag)" ;;
    cert-manager-*) printf 'localhost/%s:%s' "$1" "$CERT_MANAGER_VERSION" ;;
    prometheus) printf 'localhost/prometheus:v%s' "$PROMETHEUS_RELEASE" ;;
    prometheus-operator|prometheus-config-reloader) printf 'localhost/%s:%s' "$1" "$PROMETHEUS_OPERATOR_VERSION" ;;
    metrics-server) printf 'localhost/metrics-server:%s-%s' "$METRICS_SERVER_VERSION" "$METRICS_SERVER_BUILD" ;;
  esac
}
# Debian's package version as an image tag ('+' is not allowed in tags).
memcached_tag() { dpkg-query -W -f='${Version}' memcached | tr -c 'A-Za-z0-9_.\n-' '_'; }

# The monitoring stack, from wrapper modules (hack/build/prometheus,
# hack/build/prometheus-operator), each building its mains with one set of
# tags so that they share every compiled package. Service discovery is cut to
# Kubernetes (what prometheus-operator configures): the cloud SDKs were most
# of Prometheus' build time.
PROM_TAGS=remove_all_sd,enable_kubernetes_sd
go_prometheus() {
  (cd "$HERE/build/$1" && go build -tags "$PROM_TAGS" \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$3" -o "$OUT" "$2")
}
# kube-network-policies' controller with a main for a node daemon, built
# against a patched copy of the module that patch.sh makes from the module
# cache: its nft queue expression becomes the xtables NFQUEUE target (this
# kernel has no nft queue).
go_kube_network_policies() {
  local dir=$HERE/build/kube-network-policies tmp v
  v=$(cd "$dir" && go list -m -f '{{.Version}}' sigs.k8s.io/kube-network-policies)
  [[ $v == "$KUBE_NETWORK_POLICIES_VERSION" ]] ||
    { log "hack/build/kube-network-policies requires $v, versions.env pins $KUBE_NETWORK_POLICIES_VERSION"; return 1; }
  tmp=$(mktemp -d)
  local rc=0
  "$dir/patch.sh" "$tmp" >/dev/null || rc=$?
  if ((rc == 0)); then
    (cd "$dir" && go build -modfile "$tmp/go.mod" -ldflags "-s -w" -o "$OUT" ./cmd/kube-network-policies) || rc=$?
  fi
  rm -rf "$tmp"
  return "$rc"
}
# The CNCF distribution registry from a main of our own (hack/build/registry):
# upstream's links every cloud storage driver; the testbed needs the
# filesystem driver and htpasswd auth.
go_registry() {
  local dir=$HERE/build/registry v
  v=$(cd "$dir" && go list -m -f '{{.Version}}' github.com/distribution/distribution/v3)
  [[ $v == "$REGISTRY_VERSION" ]] ||
    { log "hack/build/registry requires $v, versions.env pins $REGISTRY_VERSION"; return 1; }
  (cd "$dir" && go build \
    -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=$REGISTRY_VERSION" \
    -o "$OUT" ./cmd/registry)
}
go_etcd() { (cd "$HERE/build/etcd" && go build -ldflags "-s -w" -o "$OUT" ./cmd/etcd); }
# go_wrapper DIR MODULE VERSION PKG [LDFLAGS] builds PKG from the wrapper
# module hack/build/DIR, which must require MODULE at the pinned VERSION.
go_wrapper() {
  local dir=$HERE/build/$1 module=$2 want=$3 pkg=$4 ldflags=${5:-} v
  v=$(cd "$dir" && go list -m -f '{{.Version}}' "$module")
  [[ $v == "$want" ]] || { log "hack/build/$1 requires $module $v, versions.env pins $want"; return 1; }
  (cd "$dir" && go build ${TAGS:+-tags "$TAGS"} -ldflags "-s -w $ldflags" -o "$OUT" "$pkg")
}
go_install() {
  local pkg=$1 ldflags=${2:-} tmp
  tmp=$(mktemp -d "$STORE/.gobin.XXXXXX")
  GOBIN=$tmp go install ${TAGS:+-tags "$TAGS"} -ldflags "-s -w $ldflags" "$pkg"
  mv -f "$tmp"/* "$OUT"
  rmdir "$tmp"
}

path_of() {
  local name=$1
  case $name in
    etcd) local d="$STORE/etcd/$ETCD_VERSION/etcd"; build etcd "$d" go_etcd ;;
    kube-apiserver|kubectl|kube-controller-manager|kube-scheduler|kube-proxy)
      local d="$STORE/kubernetes/$K8S_VERSION/$name"; build "$name" "$d" go_k8s "$name" ;;
    kubelet)
      # Keyed by the patch script's content: a changed patch is a new build.
      local patch; patch=$(sha256sum "$HERE/build/kubernetes/patch-kubelet.sh" | cut -c1-12)
      local d="$STORE/kubernetes/$K8S_VERSION-kubelet-$patch/kubelet"; build kubelet "$d" go_kubelet ;;
    controller-gen)
      local d="$STORE/tools/controller-gen-$CONTROLLER_GEN_VERSION"
      build "$name" "$d" go_install "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN_VERSION" ;;
    golangci-lint)
      local d="$STORE/tools/golangci-lint-$GOLANGCI_LINT_VERSION"
      build "$name" "$d" go_install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION" ;;
    helm)
      local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
      local d="$STORE/tools/helm-$HELM_VERSION"
      # Without the Kubernetes version stamped in, offline rendering assumes 1.20.
      build "$name" "$d" go_wrapper helm helm.sh/helm/v3 "$HELM_VERSION" helm.sh/helm/v3/cmd/helm \
        "-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" ;;
    containerd|ctr|containerd-shim-runc-v2)
      # btrfs support needs cgo; everything else builds static.
      local d="$STORE/containerd/$CONTAINERD_VERSION/$name"
      TAGS=no_btrfs build "$name" "$d" go_wrapper containerd github.com/containerd/containerd/v2 "$CONTAINERD_VERSION" "github.com/containerd/containerd/v2/cmd/$name" \
        "-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" ;;
    coredns)
      local d="$STORE/coredns/$COREDNS_VERSION/coredns"; build coredns "$d" go_coredns ;;
    cert-manager-controller|cert-manager-webhook|cert-manager-cainjector)
      local d="$STORE/cert-manager/$CERT_MANAGER_VERSION-$CERT_MANAGER_BUILD/${name#cert-manager-}"
      build "$name" "$d" go_cert_manager "${name#cert-manager-}" ;;
    image-pause)
      local d="$STORE/images/pause-$PAUSE_VERSION.tar"; build "$name" "$d" img_pause ;;
    image-memcached|image-memcached-next)
      # memcached-next: the same binary under another tag, an image upgrade
      # within one memcached release for the e2e suite.
      command -v memcached >/dev/null || { log "memcached is not installed (apt-get install memcached)"; return 1; }
      local d; d="$STORE/images/${name#image-}-$(memcached_tag).tar"; build "$name" "$d" img_memcached "${name#image-}" ;;
    image-cert-manager-controller|image-cert-manager-webhook|image-cert-manager-cainjector)
      local c=${name#image-cert-manager-} bin
      bin=$(path_of "cert-manager-$c")
      local d="$STORE/images/cert-manager-$c-$CERT_MANAGER_VERSION-$CERT_MANAGER_BUILD.tar"
      build "$name" "$d" img_cert_manager "$c" "$bin" ;;
    image-prometheus|image-prometheus-operator|image-prometheus-config-reloader|image-metrics-server)
      local c=${name#image-} bin v=$PROMETHEUS_OPERATOR_VERSION
      [[ $c == prometheus ]] && v=$PROMETHEUS_VERSION
      [[ $c == metrics-server ]] && v=$METRICS_SERVER_VERSION-$METRICS_SERVER_BUILD
      bin=$(path_of "$c")
      local d="$STORE/images/$c-$v.tar"
      build "$name" "$d" img_static "$c" "$bin" ;;
    image-name-*) image_name "${name#image-name-}"; printf '\n'; return ;;
    kwok)
      # Simulated nodes and pods for the bench (test/bench); no kubelet, no containers.
      local d="$STORE/tools/kwok-$KWOK_VERSION"
      build "$name" "$d" go_wrapper kwok sigs.k8s.io/kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok \
        "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" ;;
    kube-network-policies)
      local d="$STORE/kube-network-policies/$KUBE_NETWORK_POLICIES_VERSION-$KUBE_NETWORK_POLICIES_BUILD/kube-network-policies"
      build "$name" "$d" go_kube_network_policies ;;
    helm4)
      # Helm 4 beside Helm 3 (one wrapper module): the e2e suite's lifecycle
      # specs run with both majors. It reads the Kubernetes version it assumes
      # offline from the client-go in its build info, so only its own version
      # is stamped.
      local d="$STORE/tools/helm-$HELM4_VERSION"
      build "$name" "$d" go_wrapper helm helm.sh/helm/v4 "$HELM4_VERSION" helm.sh/helm/v4/cmd/helm \
        "-X helm.sh/helm/v4/internal/version.version=$HELM4_VERSION" ;;
    registry)
      local d="$STORE/registry/$REGISTRY_VERSION-$REGISTRY_BUILD/registry"
      build "$name" "$d" go_registry ;;
    helm-docs)
      local d="$STORE/tools/helm-docs-$HELM_DOCS_VERSION"
      build "$name" "$d" go_install "github.com/norwoodj/helm-docs/cmd/helm-docs@$HELM_DOCS_VERSION" ;;
    prometheus|promtool)
      local d="$STORE/prometheus/$PROMETHEUS_VERSION/$name"
      build "$name" "$d" go_prometheus prometheus "github.com/prometheus/prometheus/cmd/$name" "$PROMETHEUS_RELEASE" ;;
    prometheus-operator|prometheus-config-reloader)
      local pkg=operator; [[ $name == prometheus-operator ]] || pkg=$name
      local d="$STORE/prometheus-operator/$PROMETHEUS_OPERATOR_VERSION/$name"
      build "$name" "$d" go_prometheus prometheus-operator "github.com/prometheus-operator/prometheus-operator/cmd/$pkg" "${PROMETHEUS_OPERATOR_VERSION#v}" ;;
    metrics-server)
      local d="$STORE/metrics-server/$METRICS_SERVER_VERSION-$METRICS_SERVER_BUILD/metrics-server"
      build "$name" "$d" go_wrapper metrics-server sigs.k8s.io/metrics-server "$METRICS_SERVER_VERSION" \
        ./cmd/metrics-server \
        "-X k8s.io/component-base/version.gitVersion=$METRICS_SERVER_VERSION -X k8s.io/client-go/pkg/version.gitVersion=$METRICS_SERVER_VERSION" ;;
    prometheus-operator-crds)
      # The CRDs of the same module version (the module cache holds them once
      # the wrapper module has been built or downloaded).
      local d
      d=$(cd "$HERE/build/prometheus-operator" && go list -m -f '{{.Dir}}' github.com/prometheus-operator/prometheus-operator)/example/prometheus-operator-crd
      [[ -d $d ]] || { log "prometheus-operator CRDs not found at $d"; return 1; }
      printf '%s\n' "$d"; return ;;
    envtest)
      local d="$STORE/envtest/$K8S_VERSION"
      mkdir -p "$d"
      for b in etcd kube-apiserver kubectl; do ln -sfn "$(path_of "$b")" "$d/$b"; done
      printf '%s\n' "$d"; return ;;
    *) log "unknown tool $name"; return 2 ;;
  esac
  printf '%s\n' "$d"
}

for n in "$@"; do path_of "$n"; done
