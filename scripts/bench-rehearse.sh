#!/usr/bin/env bash
# Run the rehearsal scenarios N times each (release build) and print, per run and as the
# median per scenario: time to recover against the lower bound, k estimated against the
# scenario's true overload factor, the simulator's prediction, relapses and wall time.
#
#   scripts/bench-rehearse.sh [--busy] [N] [extra `recover rehearse` flags...]
#
# Without `--scenario` among the extra flags it runs every file under
# examples/scenarios/rehearse/ (laptop, overload-4, outage-12s, replicas-3); with it, that
# scenario alone. `--busy` keeps one core busy with a CPU hog for the whole benchmark (a
# laptop doing something else). Needs: cargo, python3. Runs go under
# ${BENCH_DIR:-target/bench-rehearse}/<timestamp>/. BENCH_PROFILE=debug uses the debug
# build (the rehearsal's time is mostly waiting on real clocks; useful when a release
# build does not fit). A benchmark prints figures; nothing here asserts on them.
set -euo pipefail
cd "$(dirname "$0")/.."
BUSY=0
if [ "${1:-}" = "--busy" ]; then BUSY=1; shift; fi
N="${1:-3}"
shift || true
OUT="${BENCH_DIR:-target/bench-rehearse}/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
PROFILE="${BENCH_PROFILE:-release}"
if [ "$PROFILE" = release ]; then cargo build --release --quiet; BIN=./target/release/recover
else cargo build --quiet; BIN=./target/debug/recover; fi

SCENARIOS=()
case " $* " in
  *" --scenario "*) SCENARIOS=("") ;;
  *) for f in examples/scenarios/rehearse/*.yaml; do SCENARIOS+=("$f"); done ;;
esac

HOG=""
cleanup() { if [ -n "$HOG" ]; then kill "$HOG" 2>/dev/null || true; fi; }
trap cleanup EXIT
if [ "$BUSY" = 1 ]; then
  # One process spinning: on a 2-core machine, one core is gone for the whole benchmark.
  python3 -c 'while True: pass' &
  HOG=$!
  echo "busy: CPU hog pid $HOG" >&2
fi

for sc in "${SCENARIOS[@]}"; do
  name=$(basename "${sc:-given}" .yaml)
  for i in $(seq 1 "$N"); do
    echo "$name run $i/$N ..." >&2
    dir="$OUT/$name-$i"
    args=()
    if [ -n "$sc" ]; then args+=(--scenario "$sc"); fi
    # Exit 1 (not recovered) and 4 (not stuck) are results to report, not reasons to stop.
    code=0
    "$BIN" rehearse --output json --report-dir "$dir" "${args[@]}" "$@" \
      >"$dir.json" 2>"$dir.log" || code=$?
    echo "$code" >"$dir.exit"
  done
done

python3 - "$OUT" "$N" "$BUSY" "${SCENARIOS[@]}" <<'PY'
import json, os, statistics, sys
out, n, busy, scenarios = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4:]
def f(v, fmt="{:.1f}"):
    return "-" if v is None else fmt.format(v)
med = lambda v: statistics.median(v) if v else None
print(f"{'scenario':<12} {'run':>3} {'exit':>4} {'ttr_s':>6} {'lower_s':>7} {'ratio':>6} {'k_est':>5} {'k_true':>6} "
      f"{'k_err':>6} {'pred_s':>6} {'pred_err':>8} {'relapses':>8} {'stepbacks':>9} {'wall_s':>6}")
summary = []
for sc in scenarios:
    name = os.path.basename(sc or "given").removesuffix(".yaml")
    rows = []
    for i in range(1, n + 1):
        p = os.path.join(out, f"{name}-{i}", "report.json")
        code = open(os.path.join(out, f"{name}-{i}.exit")).read().strip()
        if not os.path.exists(p):
            print(f"{name:<12} {i:>3} {code:>4} no report (see {out}/{name}-{i}.log)")
            continue
        r = json.load(open(p))
        ttr, lb = r.get("time_to_recover_s"), r.get("lower_bound_s")
        ratio = ttr / lb if ttr is not None and lb else None
        k, kt = r.get("k"), r.get("k_true")
        kerr = (k - kt) / kt if k is not None and kt else None
        pred = r.get("predicted_time_to_recover_s")
        perr = (pred - ttr) / ttr if pred is not None and ttr else None
        rows.append(dict(ttr=ttr, lb=lb, ratio=ratio, k=k, kt=kt, kerr=kerr, pred=pred, perr=perr,
                         rel=r["relapses"], sb=r.get("ramp_step_backs", 0), wall=r["wall_time_s"],
                         ok=r["recovered"]))
        print(f"{name:<12} {i:>3} {code:>4} {f(ttr):>6} {f(lb):>7} {f(ratio, '{:.2f}x'):>6} {f(k, '{:.2f}'):>5} "
              f"{f(kt, '{:.1f}'):>6} {f(kerr and 100 * kerr + 0.0, '{:+.0f}%'):>6} {f(pred):>6} "
              f"{f(perr and 100 * perr, '{:+.0f}%'):>8} {r['relapses']:>8} {r.get('ramp_step_backs', 0):>9} {f(r['wall_time_s'], '{:.0f}'):>6}")
    col = lambda key: med([x[key] for x in rows if x[key] is not None])
    summary.append((name, len(rows), sum(1 for x in rows if x["ok"]), col("ttr"), col("lb"), col("ratio"),
                    col("k"), col("kt"), col("kerr"), col("pred"), col("perr"),
                    max([x["rel"] for x in rows], default=None), col("wall")))
print()
print(f"medians over {n} run(s) per scenario{' (busy: one core taken by a CPU hog)' if busy else ''}:")
print("| scenario | recovered | time to recover | lower bound | ratio | k estimated / true | k error | predicted | prediction error | relapses (max) | wall |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (name, runs, ok, ttr, lb, ratio, k, kt, kerr, pred, perr, rel, wall) in summary:
    print(f"| {name} | {ok}/{runs} | {f(ttr)} s | {f(lb)} s | {f(ratio, '{:.2f}x')} | {f(k, '{:.2f}')} / {f(kt, '{:.0f}')} | "
          f"{f(kerr and 100 * kerr + 0.0, '{:+.0f}%')} | {f(pred)} s | {f(perr and 100 * perr, '{:+.0f}%')} | {f(rel, '{}')} | {f(wall, '{:.0f}')} s |")
PY
