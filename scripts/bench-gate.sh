#!/usr/bin/env bash
# Gate overhead, side by side with nginx on the same machine and the same upstream:
# pass-through throughput and added p50/p99 latency over a direct call, and the cost of
# rejecting (a rate limit that refuses nearly everything: `recover gate --rate 1` vs
# nginx `limit_req rate=1r/s`). Loopback only; every case is bounded (--duration).
#
# usage: scripts/bench-gate.sh [--duration 10s] [--rounds 1] [--connections 32] [--threads 2]
# With --rounds N the cases run interleaved N times and the table shows the median of each
# figure: on a shared 2-core machine one round is at the mercy of whatever else runs.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=10s
CONNS=32
THREADS=2
ROUNDS=1
while (($#)); do
  case "$1" in
    --duration) DURATION=$2; shift 2 ;;
    --connections) CONNS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) echo "unknown flag $1 (use --duration, --rounds, --connections, --threads)" >&2; exit 2 ;;
  esac
done

source scripts/lib/install_missing.sh
need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
install_missing ${need[@]+"${need[@]}"}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

cargo build --release --locked --bin recover >&2
RECOVER=target/release/recover

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

UP=$(free_port); EDGE=$(free_port); EDGE_LIMIT=$(free_port)
GATE=$(free_port); GATE_ADMIN=$(free_port); GATE_LIMIT=$(free_port); GATE_LIMIT_ADMIN=$(free_port)

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
# The reference edge: nginx proxy_pass with upstream keep-alive, as one would deploy it,
# and the same with limit_req refusing all but 1 req/s.
cat >"$WORK/edge/nginx.conf" <<CONF
worker_processes auto;
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
"$NGINX" -p "$WORK/up" -c "$WORK/up/nginx.conf" -g 'daemon off;' 2>>"$WORK/up/stderr" & PIDS+=($!)
UP_PID=$!
"$NGINX" -p "$WORK/edge" -c "$WORK/edge/nginx.conf" -g 'daemon off;' 2>>"$WORK/edge/stderr" & PIDS+=($!)
EDGE_PID=$!
RUST_LOG=warn "$RECOVER" gate --listen "127.0.0.1:$GATE" --admin-listen "127.0.0.1:$GATE_ADMIN" \
  --upstream "http://127.0.0.1:$UP" 2>"$WORK/gate.log" & PIDS+=($!)
GATE_PID=$!
RUST_LOG=warn "$RECOVER" gate --listen "127.0.0.1:$GATE_LIMIT" --admin-listen "127.0.0.1:$GATE_LIMIT_ADMIN" \
  --upstream "http://127.0.0.1:$UP" --rate 1 --burst 1 2>"$WORK/gate-limit.log" & PIDS+=($!)
GATE_LIMIT_PID=$!
for p in $UP $EDGE $EDGE_LIMIT $GATE $GATE_LIMIT; do wait_port "$p"; done

# wrk prints latency as 812.00us / 1.20ms / 2.00s: normalise to microseconds.
to_us() {
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u);
    if (u == "us") m = 1; else if (u == "ms") m = 1000; else if (u == "s") m = 1000000; else m = 1;
    printf "%.0f", n * m }'
}

declare -A RPS P50 P99 REJ CPU
CASES=(direct gate nginx gate_reject nginx_reject)
declare -A URL=(
  [direct]="http://127.0.0.1:$UP/" [gate]="http://127.0.0.1:$GATE/" [nginx]="http://127.0.0.1:$EDGE/"
  [gate_reject]="http://127.0.0.1:$GATE_LIMIT/" [nginx_reject]="http://127.0.0.1:$EDGE_LIMIT/"
)
# Whose CPU time a case costs: the proxy's (all its threads, or nginx's master and workers);
# for the direct case, the upstream's own.
declare -A CPU_PID=([direct]=$UP_PID [gate]=$GATE_PID [nginx]=$EDGE_PID
  [gate_reject]=$GATE_LIMIT_PID [nginx_reject]=$EDGE_PID)
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

for round in $(seq "$ROUNDS"); do
  for c in "${CASES[@]}"; do run_case "$c" "$round"; done
done
declare -A M_RPS M_P50 M_P99 M_CPU
for c in "${CASES[@]}"; do
  M_RPS[$c]=$(median "${RPS[$c]}"); M_P50[$c]=$(median "${P50[$c]}"); M_P99[$c]=$(median "${P99[$c]}")
  M_CPU[$c]=$(tr ' ' '\n' <<<"${CPU[$c]}" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : 0)}')
done

echo
echo "wrk -t$THREADS -c$CONNS -d$DURATION --latency, median of $ROUNDS round(s), loopback,"
echo "$(nproc) cores shared by wrk, both proxies and the upstream (nginx return 200, 1 worker)"
echo "cpu_us/req: CPU time of the proxy (for direct: of the upstream) per request answered"
printf '%-28s %10s %10s %10s %10s %10s %10s\n' case req/s p50_us p99_us +p50_us +p99_us cpu_us/req
row() { # name label
  local n=$1
  printf '%-28s %10s %10s %10s %10s %10s %10s\n' "$2" "${M_RPS[$n]}" "${M_P50[$n]}" "${M_P99[$n]}" \
    "$((M_P50[$n] - M_P50[direct]))" "$((M_P99[$n] - M_P99[direct]))" "${M_CPU[$n]}"
}
row direct "direct (no proxy)"
row gate "recover gate pass-through"
row nginx "nginx proxy_pass"
row gate_reject "recover gate --rate 1"
row nginx_reject "nginx limit_req 1r/s"
echo "rejected responses per round: recover gate ${REJ[gate_reject]}| nginx ${REJ[nginx_reject]}"
echo "per-round req/s: gate ${RPS[gate]}| nginx ${RPS[nginx]}| direct ${RPS[direct]}"
echo "per-round cpu_us/req: gate ${CPU[gate]}| nginx ${CPU[nginx]}"
