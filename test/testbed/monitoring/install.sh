#!/usr/bin/env bash
# install.sh — the testbed's monitoring stack, on a running testbed: the
# prometheus-operator CRDs (server-side: they are too large for a client-side
# apply's annotation), its ClusterRoles from the same module, then stack.yaml,
# and metrics-server (metrics-server.yaml) for the HorizontalPodAutoscaler.
# Returns once Prometheus answers /-/ready through the API server's proxy and
# the resource metrics API serves node metrics.
# Called by cluster-up.sh with WITH_MONITORING=1, or on a cluster already up
# (`make monitoring-up`); safe to run again.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=/dev/null
source "$TB_DIR/images.env"
if [[ -z ${PROMETHEUS_IMAGE:-} || -z ${METRICS_SERVER_IMAGE:-} ]]; then
  # A cluster started without the stack (`make monitoring-up`, as `make
  # test-e2e` does once the suites run): build its images, import them into
  # every node and record their names.
  monitoring_images
  import_into_nodes "${MON_ARCHIVES[@]}"
  printf '%s\n' "${MON_ENV[@]}" >>"$TB_DIR/images.env"
  # shellcheck source=/dev/null
  source "$TB_DIR/images.env"
fi
K=("$BIN/kubectl")
START=$SECONDS

crds=$("$TOOL" prometheus-operator-crds)
rbac=$crds/../rbac
"${K[@]}" apply --server-side --force-conflicts -f "$crds" >/dev/null
"${K[@]}" wait --for=condition=Established crd --all --timeout=60s >/dev/null
"${K[@]}" apply -f "$rbac/prometheus-operator/prometheus-operator-cluster-role.yaml" \
  -f "$rbac/prometheus/prometheus-cluster-role.yaml" >/dev/null
repo=${PROMETHEUS_IMAGE%:*} tag=${PROMETHEUS_IMAGE##*:}
sed -e "s|\${PROMETHEUS_IMAGE}|$PROMETHEUS_IMAGE|; s|\${PROMETHEUS_OPERATOR_IMAGE}|$PROMETHEUS_OPERATOR_IMAGE|" \
  -e "s|\${PROMETHEUS_CONFIG_RELOADER_IMAGE}|$PROMETHEUS_CONFIG_RELOADER_IMAGE|" \
  -e "s|\${PROMETHEUS_IMAGE_REPO}|$repo|; s|\${PROMETHEUS_VERSION_TAG}|$tag|" \
  "$(dirname "${BASH_SOURCE[0]}")/stack.yaml" | "${K[@]}" apply -f - >/dev/null

sed -e "s|\${METRICS_SERVER_IMAGE}|$METRICS_SERVER_IMAGE|" "$(dirname "${BASH_SOURCE[0]}")/metrics-server.yaml" |
  "${K[@]}" apply -f - >/dev/null

prometheus_ready() {
  "${K[@]}" get --raw /api/v1/namespaces/monitoring/services/prometheus-operated:9090/proxy/-/ready >/dev/null 2>&1
}
deadline=$((SECONDS + 180))
until prometheus_ready; do
  if ((SECONDS > deadline)); then
    "${K[@]}" -n monitoring get pods -o wide >&2 || true
    "${K[@]}" -n monitoring logs deploy/prometheus-operator --tail=20 >&2 || true
    die "Prometheus not ready after 180s"
  fi
  sleep 2
done
# The resource metrics API answers once metrics-server's first scrape is in.
deadline=$((SECONDS + 120))
until "${K[@]}" get --raw /apis/metrics.k8s.io/v1beta1/nodes 2>/dev/null | grep -q '"usage"'; do
  if ((SECONDS > deadline)); then
    "${K[@]}" -n kube-system get pods -l app.kubernetes.io/name=metrics-server -o wide >&2 || true
    "${K[@]}" -n kube-system logs deploy/metrics-server --tail=20 >&2 || true
    die "metrics.k8s.io serves no node metrics after 120s"
  fi
  sleep 2
done
log "monitoring ready: prometheus-operator $PROMETHEUS_OPERATOR_IMAGE, Prometheus $PROMETHEUS_IMAGE, metrics-server $METRICS_SERVER_IMAGE ($((SECONDS - START))s)"
