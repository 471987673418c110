#!/usr/bin/env bash
# The Kubernetes rehearsal: a real stuck overload on a local kind cluster, recovered by the
# `stuck-overload` runbook running in-cluster as a Job with least-privilege RBAC.
#
# Needs: docker (running), kind, kubectl, openssl, curl. Not run on the development
# machines (no Docker engine there); written for a laptop. Usage:
#   scripts/rehearse-kind.sh            # create cluster, build, deploy, trigger, recover
#   KEEP_CLUSTER=1 scripts/rehearse-kind.sh   # leave the cluster up afterwards
# Exit: 0 recovered, 1 not recovered or a step failed, 2 missing tool.
set -euo pipefail

CLUSTER=${CLUSTER:-recover}
NS=recover-demo
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# The manifests pin the image to the crate's version.
IMAGE=recover:$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n1)
STEADY_S=${STEADY_S:-40}       # steady state before the trigger
STUCK_S=${STUCK_S:-60}         # how long it must stay stuck on its own before we act
JOB_TIMEOUT=${JOB_TIMEOUT:-600s}

log() { printf '[rehearse-kind %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

for tool in docker kind kubectl openssl curl; do
  command -v "$tool" >/dev/null || { log "missing tool: $tool"; exit 2; }
done
docker info >/dev/null 2>&1 || { log "docker is installed but no engine is running"; exit 2; }

cleanup() {
  if [[ "${KEEP_CLUSTER:-0}" != 1 ]]; then
    log "deleting kind cluster $CLUSTER (KEEP_CLUSTER=1 keeps it)"
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
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
metric() { # selector port name -> first sample value (0 if absent)
  pod_metrics "$1" "$2" | awk -v n="$3" '$1 == n || index($1, n"{") == 1 { print $2; found=1; exit } END { if (!found) print 0 }'
}
in_retry_loop() { metric app.kubernetes.io/name=workers 9100 recover_demo_workers_in_retry_loop; }

if ! kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  log "creating kind cluster $CLUSTER"
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
awk -v s="$stuck" 'BEGIN { exit !(s > 0) }' || log "warning: not stuck; the runbook should then find nothing to do"

job="recover-$(date +%s)"
log "running the stuck-overload runbook in-cluster as job/$job"
sed "s/name: recover-stuck-overload/name: $job/" "$ROOT/manifests/job-runbook.yaml" | kubectl apply -f -
if ! kubectl -n "$NS" wait --for=condition=complete "job/$job" --timeout="$JOB_TIMEOUT"; then
  kubectl -n "$NS" logs "job/$job" || true
  log "the run's journal is mirrored in the recover-journal ConfigMap; resume it with:"
  log "  recover resume RUN_ID --target kube --namespace $NS --deployment config-service"
  die "the runbook job did not complete"
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
