#!/usr/bin/env bash
# Gate overhead, side by side with nginx and HAProxy on the same machine and the same
# upstream: pass-through throughput and added p50/p99 latency over a direct call, and the
# cost of refusing (a rate limit that refuses nearly everything: `recover gate --rate 1`
# vs nginx `limit_req rate=1r/s` vs an HAProxy stick-table at 1 req/s). Loopback only;
# every case is bounded (--duration). The cases run interleaved, round after round, and
# the table shows the median of each figure: on a shared 2-core machine one round is at
# the mercy of whatever else runs.
#
# The gate's shadow case runs the refusing case's limit (--rate 1 --burst 1) with --shadow:
# every request is decided by it and counted as one it would refuse, and all are
# forwarded. Its throughput is meant to be pass-through's: the row prints its ratio.
#
# Beside the clock figures, an instruction count per request for the gate's two paths
# (valgrind --tool=callgrind, the whole process: parsing, admission, the runtime, the
# system call wrappers): it does not move with the load on the machine, so a regression
# shows where req/s and p99 are noise. The count is the difference between a run of N
# and one of 2N requests (scripts/lib/http_requests.py, a fixed count) divided by N, so
# start-up and shutdown cancel out. --callgrind-only skips the clock figures. The gate
# runs one worker under callgrind (--callgrind-workers): valgrind runs one thread at a
# time, and with two the count moved by ~10% from run to run with how the requests fell
# between the workers' wake-ups. --workers sets the clock cases' gates (default: the
# gate's own, one per CPU, each bound to its CPU). --bind-references binds nginx's and
# HAProxy's workers the same way (`worker_cpu_affinity auto`, `cpu-map auto:1/1-N 0-(N-1)`);
# by default they run as their packages configure them, unbound.
#
# usage: scripts/bench-gate.sh [--duration 10s] [--rounds 3] [--connections 32] [--threads 2]
#          [--workers N] [--callgrind-requests 20000] [--callgrind-workers 1] [--no-callgrind]
#          [--callgrind-only] [--bind-references]
# env: RECOVER_BIN=path (measure that binary, no build); CALLGRIND_OUT=path (where the
# refusing gate's two profiles are kept, default /tmp/bench-gate-reject.callgrind.{n,2n};
# scripts/lib/callgrind_per_request.sh turns them into instructions per request by function).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=10s
CONNS=32
THREADS=2
ROUNDS=3
CG_REQUESTS=20000
CG_WORKERS=1
BIND_REFS=0
WORKERS=()
CALLGRIND=1
CLOCK=1
while (($#)); do
  case "$1" in
    --duration) DURATION=$2; shift 2 ;;
    --connections) CONNS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --callgrind-requests) CG_REQUESTS=$2; shift 2 ;;
    --callgrind-workers) CG_WORKERS=$2; shift 2 ;;
    --workers) WORKERS=(--workers "$2"); shift 2 ;;
    --no-callgrind) CALLGRIND=0; shift ;;
    --bind-references) BIND_REFS=1; shift ;;
    --callgrind-only) CLOCK=0; shift ;;
    *) echo "unknown flag $1 (use --duration, --rounds, --connections, --threads, --workers, --callgrind-requests, --callgrind-workers, --no-callgrind, --bind-references, --callgrind-only)" >&2; exit 2 ;;
  esac
done

source scripts/lib/install_missing.sh
need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
((CALLGRIND)) && { command -v valgrind >/dev/null 2>&1 || need+=(valgrind); }
install_missing ${need[@]+"${need[@]}"}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)

# RECOVER_BIN=path measures that binary instead of building this tree's (a build from
# another commit, to compare).
. scripts/lib/recover_bin.sh
RECOVER=$(recover_bin)

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_port() { # wait until something answers HTTP on port $1
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0
    sleep 0.1
  done
  echo "nothing answers on port $1" >&2
  exit 1
}

UP=$(free_port); EDGE=$(free_port); EDGE_LIMIT=$(free_port); HA=$(free_port); HA_LIMIT=$(free_port)
GATE=$(free_port); GATE_ADMIN=$(free_port); GATE_LIMIT=$(free_port); GATE_LIMIT_ADMIN=$(free_port)
GATE_SHADOW=$(free_port); GATE_SHADOW_ADMIN=$(free_port)

# The upstream: nginx answering 200 from memory (no disk, no logging).
mkdir -p "$WORK/up" "$WORK/edge"
cat >"$WORK/up/nginx.conf" <<CONF
worker_processes 1;
pid $WORK/up/nginx.pid;
error_log $WORK/up/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$UP; location / { return 200 "ok\n"; } }
}
CONF
NGINX_AFFINITY=""; HA_CPUMAP=""
if ((BIND_REFS)); then
  NGINX_AFFINITY="worker_cpu_affinity auto;"
  HA_CPUMAP="  nbthread $(nproc)
  cpu-map auto:1/1-$(nproc) 0-$(($(nproc) - 1))"
fi
# The reference edge: nginx proxy_pass with upstream keep-alive, as one would deploy it,
# and the same with limit_req refusing all but 1 req/s.
cat >"$WORK/edge/nginx.conf" <<CONF
worker_processes auto;
$NGINX_AFFINITY
pid $WORK/edge/nginx.pid;
error_log $WORK/edge/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  upstream backend { server 127.0.0.1:$UP; keepalive 64; }
  limit_req_zone \$binary_remote_addr zone=all:1m rate=1r/s; # one client address on loopback: a global limit
  server {
    listen 127.0.0.1:$EDGE;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen 127.0.0.1:$EDGE_LIMIT;
    location / {
      limit_req zone=all; limit_req_status 429;
      proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection "";
    }
  }
}
CONF
# HAProxy as one would deploy it: a thread per core, upstream keep-alive (http-reuse), and
# the same with a stick-table counting every request under one key (a global limit, as
# the gate's and nginx's on loopback) denying with 429 past 1 req/s.
mkdir -p "$WORK/ha"
cat >"$WORK/ha/haproxy.cfg" <<CONF
global
  maxconn 4096
  pidfile $WORK/ha/haproxy.pid
$HA_CPUMAP
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  option http-keep-alive
  http-reuse always
frontend pass
  bind 127.0.0.1:$HA
  default_backend up
frontend limited
  bind 127.0.0.1:$HA_LIMIT
  stick-table type integer size 1 expire 10s store http_req_rate(1s)
  http-request track-sc0 int(1)
  http-request deny deny_status 429 if { sc_http_req_rate(0) gt 1 }
  default_backend up
backend up
  server up 127.0.0.1:$UP maxconn 1000
CONF
"$NGINX" -p "$WORK/up" -c "$WORK/up/nginx.conf" -g 'daemon off;' 2>>"$WORK/up/stderr" & PIDS+=($!)
UP_PID=$!
"$NGINX" -p "$WORK/edge" -c "$WORK/edge/nginx.conf" -g 'daemon off;' 2>>"$WORK/edge/stderr" & PIDS+=($!)
EDGE_PID=$!
"$HAPROXY" -f "$WORK/ha/haproxy.cfg" -db 2>>"$WORK/ha/stderr" & PIDS+=($!)
HA_PID=$!
RUST_LOG=warn "$RECOVER" gate --listen "127.0.0.1:$GATE" --admin-listen "127.0.0.1:$GATE_ADMIN" \
  --upstream "http://127.0.0.1:$UP" ${WORKERS[@]+"${WORKERS[@]}"} 2>"$WORK/gate.log" & PIDS+=($!)
GATE_PID=$!
RUST_LOG=warn "$RECOVER" gate --listen "127.0.0.1:$GATE_LIMIT" --admin-listen "127.0.0.1:$GATE_LIMIT_ADMIN" \
  --upstream "http://127.0.0.1:$UP" --rate 1 --burst 1 ${WORKERS[@]+"${WORKERS[@]}"} 2>"$WORK/gate-limit.log" & PIDS+=($!)
GATE_LIMIT_PID=$!
RUST_LOG=warn "$RECOVER" gate --listen "127.0.0.1:$GATE_SHADOW" --admin-listen "127.0.0.1:$GATE_SHADOW_ADMIN" \
  --upstream "http://127.0.0.1:$UP" --rate 1 --burst 1 --shadow ${WORKERS[@]+"${WORKERS[@]}"} 2>"$WORK/gate-shadow.log" & PIDS+=($!)
GATE_SHADOW_PID=$!
for p in $UP $EDGE $EDGE_LIMIT $HA $HA_LIMIT $GATE $GATE_LIMIT $GATE_SHADOW; do wait_port "$p"; done

# wrk prints latency as 812.00us / 1.20ms / 2.00s: normalise to microseconds.
to_us() {
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u);
    if (u == "us") m = 1; else if (u == "ms") m = 1000; else if (u == "s") m = 1000000; else m = 1;
    printf "%.0f", n * m }'
}

declare -A RPS P50 P99 REJ CPU
CASES=(direct gate gate_shadow nginx haproxy gate_reject nginx_reject haproxy_reject)
declare -A URL=(
  [direct]="http://127.0.0.1:$UP/" [gate]="http://127.0.0.1:$GATE/" [nginx]="http://127.0.0.1:$EDGE/"
  [haproxy]="http://127.0.0.1:$HA/" [gate_reject]="http://127.0.0.1:$GATE_LIMIT/"
  [gate_shadow]="http://127.0.0.1:$GATE_SHADOW/"
  [nginx_reject]="http://127.0.0.1:$EDGE_LIMIT/" [haproxy_reject]="http://127.0.0.1:$HA_LIMIT/"
)
# Whose CPU time a case costs: the proxy's (all its threads, or nginx's master and workers);
# for the direct case, the upstream's own.
declare -A CPU_PID=([direct]=$UP_PID [gate]=$GATE_PID [nginx]=$EDGE_PID [haproxy]=$HA_PID
  [gate_reject]=$GATE_LIMIT_PID [gate_shadow]=$GATE_SHADOW_PID [nginx_reject]=$EDGE_PID [haproxy_reject]=$HA_PID)
TICK=$(getconf CLK_TCK)
cpu_ticks() { # user+system clock ticks of process $1 and its children
  local t=0 q
  for q in "$1" $(pgrep -P "$1" || true); do
    [ -r "/proc/$q/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$q/stat")))
  done
  echo "$t"
}
run_case() { # name round
  local name=$1 round=$2 out
  wrk -t"$THREADS" -c"$CONNS" -d2s "${URL[$name]}" >/dev/null 2>&1 || true # warm pools
  local before; before=$(cpu_ticks "${CPU_PID[$name]}")
  out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency "${URL[$name]}")
  local ticks=$(($(cpu_ticks "${CPU_PID[$name]}") - before))
  CPU[$name]+="$(awk -v t="$ticks" -v hz="$TICK" '/ requests in / {printf "%.1f", t / hz * 1e6 / $1}' <<<"$out") "
  echo "$out" >"$WORK/$name.$round.wrk"
  RPS[$name]+="$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' <<<"$out") "
  P50[$name]+="$(to_us "$(awk '$1 == "50%" {print $2}' <<<"$out")") "
  P99[$name]+="$(to_us "$(awk '$1 == "99%" {print $2}' <<<"$out")") "
  REJ[$name]+="$(awk '/Non-2xx/ {print $NF}' <<<"$out") "
  echo "round $round $name: $(awk '/^Requests\/sec:/ {print $2}' <<<"$out") req/s" >&2
}
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : 0)}'; }

# Instructions per request of one gate path under callgrind: the gate (started with the
# flags given) answers N requests in one run and 2N in another; the difference over N.
callgrind_ir() { # N gate-flags...
  local n=$1; shift
  local counts=() k
  for k in 1 2; do
    local port admin out pid
    port=$(free_port); admin=$(free_port); out="$WORK/callgrind.$port"
    RUST_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$out" \
      "$RECOVER" gate --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" \
      --upstream "http://127.0.0.1:$UP" --workers "$CG_WORKERS" "$@" 2>"$out.log" &
    pid=$!
    for _ in $(seq 600); do
      curl -s -o /dev/null "http://127.0.0.1:$admin/healthz" && break
      sleep 0.1
    done
    echo "callgrind: $((k * n)) requests to recover gate $*: $(python3 scripts/lib/http_requests.py 127.0.0.1 "$port" 4 $((k * n)))" >&2
    kill -TERM "$pid"; wait "$pid" || true
    counts+=("$(awk '/^(summary|totals):/ {print $2; exit}' "$out")")
    cp "$out" "$WORK/last-callgrind.$k"
  done
  awk -v a="${counts[0]}" -v b="${counts[1]}" -v n="$n" 'BEGIN {printf "%.0f", (b - a) / n}'
}

declare -A IR=([gate]=- [gate_reject]=- [gate_shadow]=-)
if ((CALLGRIND)); then
  IR[gate]=$(callgrind_ir "$CG_REQUESTS")
  IR[gate_shadow]=$(callgrind_ir "$CG_REQUESTS" --rate 1 --burst 1 --shadow)
  IR[gate_reject]=$(callgrind_ir "$CG_REQUESTS" --rate 1 --burst 1)
  keep=${CALLGRIND_OUT:-/tmp/bench-gate-reject.callgrind}
  cp "$WORK/last-callgrind.1" "$keep.n"; cp "$WORK/last-callgrind.2" "$keep.2n"
  echo "callgrind profiles of the refusing gate ($CG_REQUESTS and $((2 * CG_REQUESTS)) requests) kept in" \
    "$keep.n and $keep.2n: scripts/lib/callgrind_per_request.sh $keep.n $keep.2n $CG_REQUESTS" >&2
fi

if ! ((CLOCK)); then
  echo
  echo "instructions per request (callgrind, $CG_REQUESTS vs $((2 * CG_REQUESTS)) requests, 4 connections, $CG_WORKERS worker(s)):"
  echo "recover gate pass-through ${IR[gate]} | --rate 1 --shadow ${IR[gate_shadow]} | --rate 1 ${IR[gate_reject]}"
  exit 0
fi

for round in $(seq "$ROUNDS"); do
  for c in "${CASES[@]}"; do run_case "$c" "$round"; done
done
declare -A M_RPS M_P50 M_P99 M_CPU
for c in "${CASES[@]}"; do
  M_RPS[$c]=$(median "${RPS[$c]}"); M_P50[$c]=$(median "${P50[$c]}"); M_P99[$c]=$(median "${P99[$c]}")
  M_CPU[$c]=$(tr ' ' '\n' <<<"${CPU[$c]}" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : 0)}')
done

echo
echo "wrk -t$THREADS -c$CONNS -d$DURATION --latency, median of $ROUNDS interleaved round(s), loopback,"
echo "$(nproc) cores shared by wrk, the proxies and the upstream (nginx return 200, 1 worker)"
echo "cpu_us/req: CPU time of the proxy (for direct: of the upstream) per request answered"
((CALLGRIND)) && echo "instr/req: callgrind instructions per request ($CG_REQUESTS vs $((2 * CG_REQUESTS)) requests, 4 connections, $CG_WORKERS worker(s))"
printf '%-28s %10s %10s %10s %10s %10s %10s %10s\n' case req/s p50_us p99_us +p50_us +p99_us cpu_us/req instr/req
row() { # name label
  local n=$1
  printf '%-28s %10s %10s %10s %10s %10s %10s %10s\n' "$2" "${M_RPS[$n]}" "${M_P50[$n]}" "${M_P99[$n]}" \
    "$((M_P50[$n] - M_P50[direct]))" "$((M_P99[$n] - M_P99[direct]))" "${M_CPU[$n]}" "${IR[$n]:--}"
}
row direct "direct (no proxy)"
row gate "recover gate pass-through"
row gate_shadow "recover gate --rate 1 shadow"
row nginx "nginx proxy_pass"
row haproxy "haproxy http-reuse"
row gate_reject "recover gate --rate 1"
row nginx_reject "nginx limit_req 1r/s"
row haproxy_reject "haproxy stick-table 1/s"
echo "refused responses per round: recover gate ${REJ[gate_reject]}| nginx ${REJ[nginx_reject]}| haproxy ${REJ[haproxy_reject]}| recover gate shadow ${REJ[gate_shadow]:-none}"
echo "shadow vs pass-through: req/s $(awk -v s="${M_RPS[gate_shadow]}" -v p="${M_RPS[gate]}" 'BEGIN {printf "%.1f%%", 100 * s / p}')" \
  "(median of rounds; per round: $(paste -d/ <(tr ' ' '\n' <<<"${RPS[gate_shadow]}" | grep -v '^$') <(tr ' ' '\n' <<<"${RPS[gate]}" | grep -v '^$') | awk -F/ '{printf "%.1f%% ", 100 * $1 / $2}'))"
echo "shadow refusals counted by the shadow gate: $(curl -s "http://127.0.0.1:$GATE_SHADOW_ADMIN/metrics" | awk '/^recover_gate_shadow_refusals_total\{reason="rate"\}/ {print $2}')"
for c in "${CASES[@]}"; do
  echo "per-round $c: req/s ${RPS[$c]}| p99_us ${P99[$c]}| cpu_us/req ${CPU[$c]}"
done
