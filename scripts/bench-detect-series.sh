#!/usr/bin/env bash
# `recover detect` against one /metrics page with many series, served by a real HTTP
# server on 127.0.0.1 (python3 http.server), with the built-in signals and their default
# window. Three pages, each under the 16 MiB body cap (the script stops if one is not):
#   unread: SERIES series of a metric no signal reads, beside the gate's own metrics
#   mixed:  45,000 of them of recover_gate_admissions_total (under the 50,000 series cap on
#           what the signals read), the rest of the unread metric
#   read:   SERIES series of recover_gate_admissions_total, a metric the signals read
# For each: wall and CPU seconds, peak memory, the exit code, and the verdict's summary.
# With --before BIN the same runs with an older build side by side (each bounded by
# --limit; a run killed there shows as "killed").
#
# usage: scripts/bench-detect-series.sh [--series 300000] [--before PATH] [--limit 120]
set -euo pipefail
cd "$(dirname "$0")/.."

SERIES=300000
BEFORE=""
LIMIT=120
while (($#)); do
  case "$1" in
    --series) SERIES=$2; shift 2 ;;
    --before) BEFORE=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    *) echo "unknown flag $1 (use --series, --before, --limit)" >&2; exit 2 ;;
  esac
done

. scripts/lib/recover_bin.sh
AFTER=$(recover_bin)

WORK=$(mktemp -d)
SERVER=""
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# The gate's own lines, so the page reads like a real gate's beside the extra series.
GATE_LINES='# TYPE recover_gate_requests_total counter
recover_gate_requests_total{outcome="admitted"} 1000
recover_gate_requests_total{outcome="rejected_rate"} 10
# TYPE recover_gate_admissions_total counter
recover_gate_admissions_total{decision="admitted"} 1000
recover_gate_admissions_total{decision="rejected_rate"} 10
# TYPE recover_gate_in_flight gauge
recover_gate_in_flight 3'
mkdir -p "$WORK/www"
awk -v n="$SERIES" -v head="$GATE_LINES" 'BEGIN {
  print head
  print "# TYPE http_server_requests_total counter"
  for (i = 0; i < n; i++) printf "http_server_requests_total{route=\"/r%d\"} %d\n", i, i
}' >"$WORK/www/unread"
awk -v n="$SERIES" -v head="$GATE_LINES" 'BEGIN {
  print head
  for (i = 0; i < n; i++) printf "recover_gate_admissions_total{route=\"/r%d\"} %d\n", i, i
}' >"$WORK/www/read"
awk -v n="$SERIES" -v head="$GATE_LINES" 'BEGIN {
  print head
  for (i = 0; i < n; i++) {
    if (i < 45000) printf "recover_gate_admissions_total{route=\"/r%d\"} %d\n", i, i
    else printf "http_server_requests_total{route=\"/r%d\"} %d\n", i, i
  }
}' >"$WORK/www/mixed"

for f in unread mixed read; do
  size=$(wc -c <"$WORK/www/$f")
  if [ "$size" -ge $((16 * 1024 * 1024)) ]; then
    echo "the $f page is $size bytes, over the 16 MiB body cap: use fewer --series" >&2
    exit 2
  fi
done

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$WORK/www" >/dev/null 2>&1 &
SERVER=$!
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$PORT/unread" && break
  sleep 0.1
done

# One run: prints "wall cpu peak_MiB exit window" and keeps the summary in $WORK/$2.summary.
run() { # run BIN NAME PAGE
  local out="$WORK/$2.json" t="$WORK/$2.time" code=0
  /usr/bin/time -f '%e %U %S %M' -o "$t" timeout -s KILL "$LIMIT" \
    "$1" detect --output json --metrics-url "gate=http://127.0.0.1:$PORT/$3" \
    --metrics-url "service=http://127.0.0.1:$PORT/$3" --metrics-url "clients=http://127.0.0.1:$PORT/$3" \
    >"$out" 2>"$WORK/$2.err" || code=$?
  local window=-
  if [ "$code" = 137 ]; then
    echo "killed at ${LIMIT}s" >"$WORK/$2.summary"
  else
    python3 -c 'import json,re,sys
s = json.load(open(sys.argv[1]))["summary"]
m = re.search(r"\S+ target \S+ is down: [^;(]*", s)
print(m.group(0) if m else s[:150])' "$out" \
      >"$WORK/$2.summary" 2>/dev/null || head -c 170 "$WORK/$2.err" >"$WORK/$2.summary"
    window=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["windows"]["span_s"])' \
      "$out" 2>/dev/null || echo -)
  fi
  # GNU time puts "Command exited with non-zero status N" first: the figures are last.
  # A killed run's CPU and memory are not accounted to anyone: shown as -.
  tail -n1 "$t" | awk -v c="$code" -v w="$window" '{
    if (c == 137) printf "%.1f - - killed %s", $1, w
    else printf "%.1f %.1f %.0f %s %s", $1, $2 + $3, $4 / 1024, c, w }'
}

printf 'pages of %s series (unread: %s bytes, mixed: %s, read: %s) as the gate, service and\n' \
  "$SERIES" "$(wc -c <"$WORK/www/unread")" "$(wc -c <"$WORK/www/mixed")" "$(wc -c <"$WORK/www/read")"
printf 'clients targets; built-in signals, default window; %s cores\n' "$(nproc)"
printf '%-7s %-7s %7s %7s %8s %5s %8s  %s\n' page build wall_s cpu_s peak_MiB exit window_s summary
for page in unread mixed read; do
  builds=(after)
  [ -n "$BEFORE" ] && builds=(before after)
  for b in "${builds[@]}"; do
    bin=$AFTER
    [ "$b" = before ] && bin=$BEFORE
    read -r wall cpu peak code window <<<"$(run "$bin" "$page.$b" "$page")"
    printf '%-7s %-7s %7s %7s %8s %5s %8s  %s\n' "$page" "$b" "$wall" "$cpu" "$peak" "$code" \
      "$window" "$(cat "$WORK/$page.$b.summary")"
  done
done
