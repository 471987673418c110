#!/usr/bin/env bash
# How long the gate takes to put a new limit in force while its data plane is saturated,
# as a recovery needs it to: a real gate (release) in front of a real demo replica,
# wrk driving more than the gate's workers can serve, optionally CPU hogs beside it (the
# shared machine a recovery runs on), and the admin API timed the way the engine calls it
# (scripts/lib/admin_latency.py: PUT alone, GET alone, the engine's exchange). Loopback only.
#
# --writer adds a process writing 256 MB files without pause beside it in the gate's
# directory (as builds linking binaries do), which is what makes an fsync wait.
#
# usage: scripts/bench-gate-admin.sh [--hogs N] [--writer] [--connections 256] [--rounds 40]
# env: RECOVER_BIN=path (measure that binary, no build)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/recover_bin.sh

HOGS=0
WRITER=0
CONNS=256
ROUNDS=40
while (($#)); do
  case "$1" in
    --hogs) HOGS=$2; shift 2 ;;
    --writer) WRITER=1; shift ;;
    --connections) CONNS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) echo "unknown flag $1 (use --hogs, --writer, --connections, --rounds)" >&2; exit 2 ;;
  esac
done
command -v wrk >/dev/null || { echo "wrk is needed" >&2; exit 3; }
BIN=$(recover_bin)
DIR=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
UP=127.0.0.1:$(port); GATE=127.0.0.1:$(port); ADMIN=127.0.0.1:$(port)
openssl rand -hex 16 > "$DIR/token"
# The state file as a deployed gate keeps it; NO_STATE=1 leaves it out (what it costs).
STATE=(--state-file "$DIR/state.json")
[ -n "${NO_STATE:-}" ] && STATE=()
"$BIN" demo config-service --listen "$UP" --concurrency 64 --service-time 2ms \
  >"$DIR/replica.log" 2>&1 & PIDS+=($!)
"$BIN" gate --upstream "http://$UP" --listen "$GATE" --admin-listen "$ADMIN" \
  --admin-token-file "$DIR/token" "${STATE[@]}" >"$DIR/gate.log" 2>&1 & PIDS+=($!)
for _ in $(seq 100); do curl -fs "http://$ADMIN/healthz" >/dev/null && break; sleep 0.1; done
curl -fs "http://$ADMIN/healthz" >/dev/null || { cat "$DIR/gate.log" >&2; exit 3; }
for _ in $(seq "$HOGS"); do python3 -c 'while True: pass' & PIDS+=($!); done
if [ "$WRITER" = 1 ]; then
  (while :; do dd if=/dev/zero of="$DIR/ballast" bs=1M count=256 status=none; rm -f "$DIR/ballast"; done) &
  PIDS+=($!)
fi
wrk -t2 -c"$CONNS" -d600s "http://$GATE/" >/dev/null 2>&1 & PIDS+=($!)
sleep 2
echo "gate: $BIN; data plane: wrk $CONNS connections; CPU hogs: $HOGS; writer: $WRITER; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 scripts/lib/admin_latency.py "$ADMIN" "$DIR/token" "$ROUNDS"
