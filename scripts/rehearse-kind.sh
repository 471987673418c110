#!/usr/bin/env bash
# The Kubernetes rehearsal: a real stuck overload on a local kind cluster, recovered by the
# `stuck-overload` runbook running in-cluster as a Job with least-privilege RBAC.
#
# Needs: docker (running), kind (v0.27.0, the version kind-config.yaml's node image was
# built for; NetworkPolicies are enforced from v0.24), kubectl, openssl, curl. Not run on
# the development machines (no Docker engine there); written for a laptop. Usage:
#   scripts/rehearse-kind.sh           # create the cluster, build, deploy, trigger, recover
#   scripts/rehearse-kind.sh --keep    # leave a cluster it created up afterwards
# A cluster that already existed (CLUSTER, default "recover") is used and never deleted.
# Exit: 0 recovered, 1 not recovered or a step failed (a metric that cannot be read is a
# failure, never a zero), 2 missing tool or bad usage, 3 the system never got stuck (so
# there was nothing to recover).
set -euo pipefail

CLUSTER=${CLUSTER:-recover}
NS=recover-demo
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# The manifests pin the image to the crate's version.
IMAGE=recover:$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n1)
KIND_VERSION=v0.27.0
STEADY_S=${STEADY_S:-40}       # steady state before the trigger
STUCK_S=${STUCK_S:-60}         # how long it must stay stuck on its own before we act
JOB_TIMEOUT_S=${JOB_TIMEOUT_S:-600}
KEEP=${KEEP_CLUSTER:-0}

for arg in "$@"; do
  case "$arg" in
    --keep) KEEP=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) printf 'unknown argument: %s (try --help)\n' "$arg" >&2; exit 2 ;;
  esac
done

log() { printf '[rehearse-kind %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

for tool in docker kind kubectl openssl curl; do
  command -v "$tool" >/dev/null || { log "missing tool: $tool"; exit 2; }
done
docker info >/dev/null 2>&1 || { log "docker is installed but no engine is running"; exit 2; }
have_kind=$(kind version 2>/dev/null | awk '{print $2}')
if [[ "$have_kind" != "$KIND_VERSION" ]]; then
  log "kind $have_kind found; this script and kind-config.yaml's node image are for kind $KIND_VERSION"
  exit 2
fi

# Delete the cluster on exit only if this run created it, and not with --keep.
CREATED=0
cleanup() {
  if [[ "$CREATED" == 1 && "$KEEP" != 1 ]]; then
    log "deleting kind cluster $CLUSTER (created by this run; --keep keeps it)"
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  elif [[ "$CREATED" == 1 ]]; then
    log "kept kind cluster $CLUSTER (kind delete cluster --name $CLUSTER removes it)"
  fi
}
trap cleanup EXIT

# A pod's /metrics through a port-forward: the NetworkPolicies let only the controller and
# serve reach the metrics ports, and a port-forward enters the pod's own network.
pod_metrics() { # selector port
  local pod lport pf
  pod=$(kubectl -n "$NS" get pods -l "$1" --field-selector=status.phase=Running \
    -o jsonpath='{.items[0].metadata.name}')
  lport=$((20000 + RANDOM % 20000))
  kubectl -n "$NS" port-forward "pod/$pod" "$lport:$2" >/dev/null 2>&1 &
  pf=$!
  for _ in $(seq 50); do
    curl -fsS "http://127.0.0.1:$lport/metrics" 2>/dev/null && break
    sleep 0.1
  done
  kill "$pf" 2>/dev/null || true
}
metric() { # selector port name -> first sample value; fails if it cannot be read
  local page value
  page=$(pod_metrics "$1" "$2") || true
  [[ -n "$page" ]] || die "could not read /metrics of $1 on port $2 (port-forward failed?)"
  value=$(printf '%s\n' "$page" | awk -v n="$3" '$1 == n || index($1, n"{") == 1 { print $2; exit }')
  [[ -n "$value" ]] || die "no sample of $3 in /metrics of $1"
  printf '%s\n' "$value"
}
in_retry_loop() { metric app.kubernetes.io/name=workers 9100 recover_demo_workers_in_retry_loop; }

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  log "using the existing kind cluster $CLUSTER (it is not deleted at the end)"
else
  log "creating kind cluster $CLUSTER"
  CREATED=1
  kind create cluster --name "$CLUSTER" --config "$ROOT/kind-config.yaml" --wait 120s
fi
kubectl config use-context "kind-$CLUSTER" >/dev/null

log "building $IMAGE"
docker build -t "$IMAGE" "$ROOT"
kind load docker-image "$IMAGE" --name "$CLUSTER"

log "applying manifests/ (the namespace first, then the Secrets, which are never committed)"
kubectl apply -f "$ROOT/manifests/namespace.yaml"
kubectl -n "$NS" get secret recover-gate-admin-token >/dev/null 2>&1 \
  || kubectl -n "$NS" create secret generic recover-gate-admin-token \
       --from-literal=token="$(openssl rand -hex 24)"
kubectl -n "$NS" get secret recover-serve >/dev/null 2>&1 \
  || kubectl -n "$NS" create secret generic recover-serve \
       --from-literal=token="$(openssl rand -hex 24)" --from-literal=admin-token="$(openssl rand -hex 24)"
kubectl apply -k "$ROOT/manifests"
for d in config-service recover-gate workers recover-serve; do
  kubectl -n "$NS" rollout status "deployment/$d" --timeout=180s
done

log "steady state for ${STEADY_S}s"
sleep "$STEADY_S"
before=$(in_retry_loop)
log "workers in a retry loop before the trigger: $before"

log "trigger: rolling the config service (each new pod is unavailable for its startup delay)"
kubectl -n "$NS" rollout restart deployment/config-service
kubectl -n "$NS" rollout status deployment/config-service --timeout=300s

log "waiting ${STUCK_S}s: a metastable failure stays down after the trigger is gone"
sleep "$STUCK_S"
stuck=$(in_retry_loop)
log "workers in a retry loop ${STUCK_S}s after the rollout finished: $stuck"
if ! awk -v s="$stuck" 'BEGIN { exit !(s > 0) }'; then
  log "not stuck: the system recovered on its own, so there is nothing to rehearse"
  exit 3
fi

job="recover-$(date +%s)"
log "running the stuck-overload runbook in-cluster as job/$job"
sed "s/name: recover-stuck-overload/name: $job/" "$ROOT/manifests/job-runbook.yaml" | kubectl apply -f -
# Wait for the Job to finish either way: a run that refuses (exit 3) or fails ends the
# Job at once, and must not be waited on for the whole timeout.
outcome=""
for _ in $(seq "$((JOB_TIMEOUT_S / 5))"); do
  outcome=$(kubectl -n "$NS" get "job/$job" \
    -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}')
  [[ "$outcome" == *Complete* || "$outcome" == *Failed* ]] && break
  sleep 5
done
if [[ "$outcome" != *Complete* ]]; then
  kubectl -n "$NS" logs "job/$job" || true
  log "the run's journal is mirrored in the recover-journal ConfigMap; resume it with:"
  log "  recover resume RUN_ID --target kube --namespace $NS --deployment config-service"
  if [[ "$CREATED" == 1 && "$KEEP" != 1 ]]; then
    log "(this cluster is deleted on exit; run with --keep to resume in it)"
  fi
  die "the runbook job did not complete (${outcome:-still running after ${JOB_TIMEOUT_S}s})"
fi

log "report (the runbook's JSON output):"
kubectl -n "$NS" logs "job/$job"
log "events on the target:"
kubectl -n "$NS" get events --field-selector involvedObject.name=config-service \
  --sort-by=.lastTimestamp | tail -n 20

sleep 10
after=$(in_retry_loop)
rejected=$(metric app.kubernetes.io/name=recover-gate 8081 'recover_gate_requests_total{outcome="rejected_rate"}')
peers=$(metric app.kubernetes.io/name=recover-gate 8081 recover_gate_limit_peers)
log "gate replicas sharing the limit: $peers"
awk -v p="$peers" 'BEGIN { exit !(p == 2) }' || die "the gates do not share the limit (peers $peers, expected 2)"
log "after recovery: workers in a retry loop = $after (before trigger $before, stuck $stuck)"
awk -v a="$after" 'BEGIN { exit !(a == 0) }' || die "workers still in a retry loop: not recovered"
log "recovered (gate rejected_rate total so far: $rejected)"
