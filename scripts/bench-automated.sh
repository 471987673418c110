#!/usr/bin/env bash
# The automated path at production speed, with the real things: the demo system
# (`recover demo up`), a real Prometheus scraping it every SCRAPE with the shipped rules
# (deploy/prometheus/recover-rules.yaml), a real Alertmanager with the shipped route
# (deploy/alertmanager/recover-route.yaml, its URL and token pointed at this serve), and
# `recover serve --mode act` with the demo's serve.yaml. After a healthy warm-up it
# triggers the demo's outage and prints, in seconds after the trigger (polled every 1 s):
#   failing   first evaluation of namespace:recover_failing:bool at 1
#   firing    the stuck alert firing in Prometheus
#   posted    serve received the firing alert (Alertmanager's webhook)
#   run       serve launched the stuck-overload run
#   recovered the workers out of the retry loop (recover_demo_workers_in_retry_loop = 0)
#   done      the run ended (its outcome beside it)
#   not failing  namespace:recover_failing:bool back at 0 (the tail of its rate window)
# then the reference (120 s from trigger to recovered) and whether it was met. Exit 1 when
# the workers never recovered, or the self-healing outage raised the alert.
# With --self-heal it also runs, at the same time on ports from base+100 (a demo,
# Prometheus, Alertmanager and serve of its own), a 5 s outage that heals by itself (a
# demo with --heal-workers pollers, too few to keep the service stuck) and reports any
# alert for it: there must be none. --no-tail stops once the run is done and the workers
# recovered, without waiting for the failing flag to clear.
#
# usage: scripts/bench-automated.sh [--scrape 15s] [--eval 15s] [--base-port 28080]
#          [--bin PATH] [--self-heal] [--heal-workers 4] [--no-tail] [--keep]
# --bin skips the release build (e.g. target/debug/recover). --keep leaves the work
# directory (logs of every process) and prints its path.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

SCRAPE=15s
EVAL=""
BASE=28080
BIN=""
SELF_HEAL=0
HEAL_WORKERS=4
KEEP=0
TAIL=1
LIMIT=600
while (($#)); do
  case "$1" in
    --scrape) SCRAPE=$2; shift 2 ;;
    --eval) EVAL=$2; shift 2 ;;
    --base-port) BASE=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --self-heal) SELF_HEAL=1; shift ;;
    --heal-workers) HEAL_WORKERS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --no-tail) TAIL=0; shift ;;
    *) echo "unknown flag $1 (use --scrape, --eval, --base-port, --bin, --self-heal, --heal-workers, --no-tail, --keep)" >&2; exit 2 ;;
  esac
done
EVAL=${EVAL:-$SCRAPE}
for tool in prometheus prometheus-alertmanager curl jq; do
  command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install prometheus prometheus-alertmanager curl jq)" >&2; exit 3; }
done
if [ -z "$BIN" ]; then
  cargo build --release --locked --bin recover >&2
  BIN=target/release/recover
fi
BIN=$(realpath "$BIN")

WORK=$(mktemp -d)
PIDS=()
DEMO=""
HEAL_PID=""
# Stop this shell's demo and processes (the self-healing phase runs this in its own shell).
stop_mine() {
  [ -n "$DEMO" ] && "$BIN" demo down --dir "$DEMO" >/dev/null 2>&1 || true
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}
cleanup() {
  stop_mine
  [ -n "$HEAL_PID" ] && kill "$HEAL_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  if [ "$KEEP" = 1 ]; then echo "work directory kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s%N; }
# Whole seconds of a duration written as 15s or 1m.
secs() { case "$1" in *m) echo $((${1%m} * 60)) ;; *s) echo "${1%s}" ;; *) echo "$1" ;; esac; }
# Whole seconds (rounded) from nanosecond instant $1 to $2.
since() { echo $((($2 - $1 + 500000000) / 1000000000)); }
# One PromQL instant query's first value, or empty.
query() {
  curl -sf --max-time 5 "http://$PROM/api/v1/query" --data-urlencode "query=$1" |
    jq -r '.data.result[0].value[1] // empty' 2>/dev/null || true
}
# When the series $1 was first seen, in whole seconds after instant $2 (nanoseconds): its
# sample's own timestamp (the rule evaluation that wrote it), not when this loop polled,
# which lags by up to a poll and, under load, more. Empty while the series is absent.
seen_at() {
  local ts
  ts=$(query "timestamp($1)")
  if [ -n "$ts" ]; then awk -v a="$ts" -v t="$2" 'BEGIN { printf "%d\n", a - t / 1e9 + 0.5 }'; fi
}
# One sample from a /metrics page, or empty.
metric() {
  curl -sf --max-time 2 "$1" | awk -v m="$2" '$1 == m { print $2; exit }' || true
}
# A counter on a /metrics page that exists and is above 0.
nonzero() {
  local v
  v=$(metric "$1" "$2")
  [ -n "$v" ] && [ "$v" != 0 ]
}
wait_http() {
  for _ in $(seq 120); do curl -sf -o /dev/null --max-time 1 "$1" && return 0; sleep 0.5; done
  echo "$1 did not answer" >&2; exit 3
}

# Start demo, Prometheus, Alertmanager and serve in $WORK/$1 on ports from $2, with
# workers $3 (empty: the demo's default). Sets DEMO, PROM, AM, SERVE.
start_all() {
  local name=$1 base=$2 workers=$3
  DEMO=$WORK/$name
  PROM=127.0.0.1:$((base + 6))
  AM=127.0.0.1:$((base + 7))
  SERVE=127.0.0.1:$((base + 5))
  "$BIN" demo up --dir "$DEMO" --base-port "$base" ${workers:+--workers "$workers"} >"$WORK/$name-up.log"
  # demo up writes the whole path: prometheus.yml (targets in namespace "demo", the shipped
  # rules, alerting to Alertmanager at +7), alertmanager.yml (the shipped route, its
  # webhook at serve on +5) and serve.yaml (its check reads Prometheus at +6). Only the
  # scrape and evaluation intervals change here.
  sed -e "s/scrape_interval: 1s/scrape_interval: $SCRAPE/" \
    -e "s/evaluation_interval: 1s/evaluation_interval: $EVAL/" \
    "$DEMO/prometheus.yml" >"$DEMO/prometheus-bench.yml"
  grep -q "rule_files: \[recover-rules.yaml\]" "$DEMO/prometheus-bench.yml" && grep -q "'$AM'" "$DEMO/prometheus-bench.yml" ||
    { echo "demo up's prometheus.yml lost its rules or Alertmanager: update this script" >&2; exit 3; }
  grep -q "http://$SERVE/alerts" "$DEMO/alertmanager.yml" || { echo "demo up's alertmanager.yml does not post to $SERVE: update this script" >&2; exit 3; }
  prometheus --config.file="$DEMO/prometheus-bench.yml" --web.listen-address="$PROM" \
    --storage.tsdb.path="$DEMO/prom-data" --log.level=warn >"$WORK/$name-prometheus.log" 2>&1 &
  PIDS+=($!)
  prometheus-alertmanager --config.file="$DEMO/alertmanager.yml" --web.listen-address="$AM" \
    --storage.path="$DEMO/am-data" --cluster.listen-address= --log.level=warn >"$WORK/$name-alertmanager.log" 2>&1 &
  PIDS+=($!)
  (cd "$DEMO" && exec "$BIN" serve --listen "$SERVE" --config "$DEMO/serve.yaml" --mode act) >"$WORK/$name-serve.log" 2>&1 &
  PIDS+=($!)
  wait_http "http://$PROM/-/ready"
  wait_http "http://$AM/-/ready"
  wait_http "http://$SERVE/healthz"
}

# Healthy warm-up: the rules need the scrape interval measured and a full rate window of
# healthy data (no failing, no trigger) before the trigger.
warm_up() {
  local t0 since_ok=""
  t0=$(now)
  echo "warming up (healthy for a whole rate window)..." >&2
  while :; do
    local w f tr
    w=$(query 'namespace:recover_rate_window:seconds')
    f=$(query 'namespace:recover_failing:bool')
    tr=$(query 'namespace:recover_trigger_active:bool')
    if [ -n "$w" ] && [ "$f" = 0 ] && [ "$tr" = 0 ]; then since_ok=${since_ok:-$(now)}; else since_ok=""; fi
    [ -n "$since_ok" ] && [ "$(since "$since_ok" "$(now)")" -ge "${w%.*}" ] && return 0
    if [ "$(since "$t0" "$(now)")" -gt "$LIMIT" ]; then
      echo "not healthy within ${LIMIT}s (rate window '$w', failing '$f', trigger '$tr')" >&2; exit 1
    fi
    sleep 1
  done
}

stop_all() {
  "$BIN" demo down --dir "$DEMO" >/dev/null 2>&1 || true
  DEMO=""
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  PIDS=()
}

echo "# scrape $SCRAPE, rules evaluated every $EVAL; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

# The self-healing outage, on its own system: run in a shell of its own, alongside the
# stuck overload. Prints its line; exits 1 when it raised the alert or did not heal.
self_heal() {
  trap 'stop_mine; wait 2>/dev/null || true' EXIT
  trap 'exit 130' INT TERM
  start_all self-heal "$1" "$HEAL_WORKERS"
  warm_up
  local T FAILING="" FIRED="" HEAL_WAIT RETRY
  T=$(now)
  # Past the outage's rate window (4 scrapes) and a persist after it (5 more), with room.
  HEAL_WAIT=$((10 * $(secs "$SCRAPE") + 60))
  echo "self-healing outage: triggered; watching for $HEAL_WAIT s" >&2
  "$BIN" demo trigger --dir "$DEMO" --outage 5s >/dev/null
  while [ "$(since "$T" "$(now)")" -lt "$HEAL_WAIT" ]; do
    [ -z "$FAILING" ] && FAILING=$(seen_at 'namespace:recover_failing:bool == 1' "$T")
    [ -z "$FIRED" ] && FIRED=$(seen_at 'ALERTS{alertname="RecoverStuckOverload"}' "$T")
    sleep 1
  done
  RETRY=$(metric "http://127.0.0.1:$(($1 + 2))/metrics" recover_demo_workers_in_retry_loop)
  echo "self-healing 5 s outage ($HEAL_WORKERS workers): failing ${FAILING:-never}, alert ${FIRED:-none} (pending or firing) in ${HEAL_WAIT} s; workers in the retry loop at the end: ${RETRY:-unknown}"
  if [ -n "$FIRED" ]; then echo "the self-healing outage raised the stuck alert" >&2; exit 1; fi
  if [ "${RETRY:-1}" != 0 ]; then echo "the outage did not heal by itself with $HEAL_WORKERS workers: not a self-healing case" >&2; exit 1; fi
}

if [ "$SELF_HEAL" = 1 ]; then
  self_heal $((BASE + 100)) >"$WORK/self-heal.out" 2>"$WORK/self-heal.err" &
  HEAL_PID=$!
fi

start_all stuck "$BASE" ""
warm_up
WORKERS_METRICS="http://127.0.0.1:$((BASE + 2))/metrics"
SERVE_METRICS="http://$SERVE/metrics"
T=$(now)
echo "stuck overload: triggered" >&2
"$BIN" demo trigger --dir "$DEMO" >/dev/null
FAILING="" FIRING="" POSTED="" RUN="" RECOVERED="" DONE="" OUTCOME=""
while [ -z "$DONE" ] || [ -z "$RECOVERED" ]; do
  t=$(since "$T" "$(now)")
  [ "$t" -gt "$LIMIT" ] && break
  [ -z "$FAILING" ] && FAILING=$(seen_at 'namespace:recover_failing:bool == 1' "$T")
  [ -z "$FIRING" ] && FIRING=$(seen_at 'ALERTS{alertname="RecoverStuckOverload", alertstate="firing"}' "$T")
  [ -z "$POSTED" ] && nonzero "$SERVE_METRICS" 'recover_serve_alerts_received_total{status="firing"}' && POSTED=$t
  [ -z "$RUN" ] && nonzero "$SERVE_METRICS" 'recover_serve_decisions_total{decision="launched"}' && RUN=$t
  if [ -n "$RUN" ] && [ -z "$RECOVERED" ] && [ "$(metric "$WORKERS_METRICS" recover_demo_workers_in_retry_loop)" = 0 ]; then
    RECOVERED=$t
  fi
  if [ -n "$RUN" ] && [ -z "$DONE" ]; then
    for o in succeeded failed aborted refused; do
      if nonzero "$SERVE_METRICS" "recover_serve_runs_total{outcome=\"$o\"}"; then DONE=$t OUTCOME=$o; fi
    done
  fi
  sleep 1
done
CLEARED=""
if [ -n "$DONE" ] && [ "$TAIL" = 1 ]; then
  # How long the failing flag outlives the run (its rate window's tail).
  while [ "$(since "$T" "$(now)")" -lt $((${DONE%.*} + 600)) ]; do
    [ "$(query 'namespace:recover_failing:bool')" = 0 ] && { CLEARED=$(since "$T" "$(now)"); break; }
    sleep 1
  done
fi
printf '%-10s %s\n' event "seconds after trigger (scrape $SCRAPE)" \
  failing "${FAILING:--}" firing "${FIRING:--}" posted "${POSTED:--}" run "${RUN:--}" \
  recovered "${RECOVERED:--}" done "${DONE:--} ${OUTCOME}" "not failing" "${CLEARED:--}"
HEAL_RC=0
if [ -n "$HEAL_PID" ]; then
  wait "$HEAL_PID" || HEAL_RC=$?
  HEAL_PID=""
  sed 's/^/[self-heal] /' "$WORK/self-heal.err" >&2
  cat "$WORK/self-heal.out"
fi
if [ -z "$RECOVERED" ]; then
  echo "not recovered within ${LIMIT} s of the trigger" >&2
  exit 1
elif [ "$RECOVERED" -le 120 ]; then
  echo "reference: recovered within 120 s of the trigger: met (${RECOVERED} s)"
else
  echo "reference: recovered within 120 s of the trigger: not met (${RECOVERED} s)"
fi
exit "$HEAL_RC"
