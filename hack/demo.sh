#!/usr/bin/env bash
# demo.sh — the README's "run it": on a bare machine with this repository,
# build what is missing, bring the testbed cluster up, install cert-manager and
# the chart, and show the operator at work. Leaves the cluster running for you
# to explore; `make cluster-down` removes it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

TESTBED_DIR=${TESTBED_DIR:-$PWD/_output/testbed}
export TESTBED_DIR
NS=memcached-operator-system
APPS=demo
KUBECTL=$TESTBED_DIR/bin/kubectl
HELM=$TESTBED_DIR/bin/helm
DEMO_START=$SECONDS

step_start=0
step() { step_start=$SECONDS; printf '\n\033[1m==> %s\033[0m\n' "$*"; }
done_step() { printf '\033[32m    done in %ss\033[0m\n' "$((SECONDS - step_start))"; }
show() { printf '\033[36m$ %s\033[0m\n' "$*"; "$@"; }

step "Bring up the testbed cluster (builds binaries and images on first run; cert-manager included; MONITORING=1 adds Prometheus)"
make --no-print-directory cluster-up
done_step
# shellcheck source=/dev/null
source "$TESTBED_DIR/images.env"

step "Install the operator with Helm (webhook certificates from cert-manager)"
for ns in "$NS" "$APPS"; do
  "$KUBECTL" create namespace "$ns" --dry-run=client -o yaml | "$KUBECTL" label --local -f - -o yaml \
    pod-security.kubernetes.io/enforce=restricted | "$KUBECTL" apply -f - >/dev/null
done
monitoring=()
if [[ ${WITH_MONITORING:-0} == 1 ]]; then
  monitoring=(--set metrics.serviceMonitor.enabled=true --set metrics.serviceMonitor.interval=5s --set prometheusRule.enabled=true)
fi
show "$HELM" upgrade --install memcached-operator charts/memcached-operator -n "$NS" --wait --timeout 5m \
  --set operator.defaultImage="$MEMCACHED_IMAGE" --set test.memcached=true --set test.namespace="$APPS" "${monitoring[@]}"
done_step

step "Apply the tutorial's sample (size 3) and wait until it is Available"
show "$KUBECTL" apply -n "$APPS" -f docs/samples/cache_v1alpha1_memcached.yaml
show "$KUBECTL" wait -n "$APPS" --for=condition=Available memcached/memcached-sample --timeout=3m
show "$KUBECTL" get -n "$APPS" memcached,deploy,pods
show "$KUBECTL" get -n "$APPS" memcached memcached-sample -o jsonpath='{"status.nodes: "}{.status.nodes}{"\nstatus.effective: "}{.status.effective}{"\n"}'
done_step

step "Resize as the tutorial does: kubectl patch to 5"
show "$KUBECTL" patch -n "$APPS" memcached memcached-sample -p '{"spec":{"size": 5}}' --type=merge
# Ready (kstatus) waits for the new pods to be available, minReadySeconds included.
show "$KUBECTL" wait -n "$APPS" --for=condition=Ready memcached/memcached-sample --timeout=3m
show "$KUBECTL" get -n "$APPS" mc memcached-sample -o wide
done_step

step "A Memcached that gives only its size is stored with every default filled in"
printf 'apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: defaulted}\nspec: {size: 1}\n' |
  show "$KUBECTL" apply -n "$APPS" --dry-run=server -o jsonpath='{.spec}{"\n"}' -f -
done_step

step "A Memcached above the operator's --max-size is rejected with its field path"
printf 'apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: too-big}\nspec: {size: 500}\n' |
  { show "$KUBECTL" apply -n "$APPS" -f - && { echo "expected a rejection" >&2; exit 1; } || true; }
done_step

step "An extraArgs option that a field owns is rejected in any spelling memcached reads"
printf 'apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: sneaky}\nspec: {size: 1, extraArgs: ["-C", "-m2048"]}\n' |
  { show "$KUBECTL" apply -n "$APPS" -f - && { echo "expected a rejection" >&2; exit 1; } || true; }
done_step

if [[ ${WITH_MONITORING:-0} == 1 ]]; then
  step "Monitoring (MONITORING=1): the exporter sidecar and a ServiceMonitor; Prometheus scrapes every pod"
  show "$KUBECTL" patch -n "$APPS" memcached memcached-sample --type=merge \
    -p '{"spec":{"monitoring":{"exporter":{"enabled":true},"serviceMonitor":{"enabled":true,"interval":"10s"}}}}'
  show "$KUBECTL" wait -n "$APPS" --for=condition=Ready memcached/memcached-sample --timeout=3m
  query=/api/v1/namespaces/monitoring/services/prometheus-operated:9090/proxy/api/v1/query
  printf 'waiting for Prometheus to scrape the exporters'
  for _ in $(seq 90); do
    up=$("$KUBECTL" get --raw "$query?query=sum(memcached_up%7Bnamespace%3D%22$APPS%22%7D)" | grep -o '"[0-9.]*"\]' | tr -d '"]' || true)
    [[ ${up:-0} == 5 ]] && break
    printf '.'; sleep 2
  done
  printf '\n'
  show "$KUBECTL" get --raw "$query?query=memcached_up%7Bnamespace%3D%22$APPS%22%7D"; echo
  done_step
fi

step "helm test: admission, defaults, rejection, and a real memcached set/get"
show "$HELM" test memcached-operator -n "$NS" --logs --timeout 5m
done_step

cat <<MSG

Demo finished in $((SECONDS - DEMO_START))s. The cluster is still up:
  export KUBECONFIG=$TESTBED_DIR/kubeconfig      # or use the wrappers:
  $KUBECTL get memcached -A
  $HELM list -A
Tear it down with:  make cluster-down
MSG
