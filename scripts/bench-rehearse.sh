#!/usr/bin/env bash
# Run the default rehearsal N times (release build) and print, per run and as medians:
# time to recover against the lower bound, and detection latency against its goal
# (stuck said within two scrape intervals after the persist window).
#
#   scripts/bench-rehearse.sh [N] [extra `recover rehearse` flags...]
#
# Needs: cargo, python3. Writes runs under ${BENCH_DIR:-target/bench-rehearse}/.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-5}"
shift || true
OUT="${BENCH_DIR:-target/bench-rehearse}/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
cargo build --release --quiet
for i in $(seq 1 "$N"); do
  echo "run $i/$N ..." >&2
  # Exit 1 (not recovered) is a result to report, not a reason to stop.
  ./target/release/recover rehearse --output json --report-dir "$OUT/run-$i" \
    "$@" >"$OUT/run-$i.json" 2>"$OUT/run-$i.log" || true
done
python3 - "$OUT" "$N" <<'PY'
import json, os, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
rows = []
for i in range(1, n + 1):
    p = os.path.join(out, f"run-{i}", "report.json")
    if not os.path.exists(p):
        print(f"run {i}: no report (see {out}/run-{i}.log)")
        continue
    rows.append(json.load(open(p)))
def f(v, fmt="{:.1f}"):
    return "-" if v is None else fmt.format(v)
print(f"{'run':>3} {'recovered':>9} {'ttr_s':>7} {'lower_s':>7} {'ratio':>6} {'goal':>5} "
      f"{'detect_s':>8} {'after_persist_s':>15} {'goal':>5} {'relapses':>8} {'stepbacks':>9} {'predicted_s':>11} {'wall_s':>6}")
ratios, detects, lates = [], [], []
for i, r in enumerate(rows, 1):
    ttr, lb = r.get("time_to_recover_s"), r.get("lower_bound_s")
    ratio = ttr / lb if ttr is not None and lb else None
    d = r.get("detected_stuck_s")
    late = (r.get("detection") or {}).get("after_persist_s")
    interval = (r.get("detection") or {}).get("scrape_interval_s") or 0.5
    if ratio is not None: ratios.append(ratio)
    if d is not None: detects.append(d)
    if late is not None: lates.append(late)
    print(f"{i:>3} {str(r['recovered']):>9} {f(ttr):>7} {f(lb):>7} {f(ratio, '{:.1f}x'):>6} "
          f"{('ok' if ratio is not None and ratio <= 2 else 'MISS'):>5} {f(d):>8} {f(late):>15} "
          f"{('ok' if late is not None and late <= 2 * interval else 'MISS'):>5} {r['relapses']:>8} "
          f"{r.get('ramp_step_backs', 0):>9} {f(r.get('predicted_time_to_recover_s')):>11} {f(r['wall_time_s'], '{:.0f}'):>6}")
med = lambda v: statistics.median(v) if v else None
print(f"median: time to recover / lower bound {f(med(ratios), '{:.1f}x')} (goal <= 2x); "
      f"detection {f(med(detects))} s after the trigger ended, {f(med(lates))} s after the persist window "
      f"(goal <= 2 scrape intervals); recovered {sum(1 for r in rows if r['recovered'])}/{len(rows)}")
PY
