#!/usr/bin/env bash
# Run rehearsals (release build) and print, per run and as medians: time to recover against
# the true lower bound on the recorder's scrape grid (the fluid bound beside it), k
# estimated against the scenario's true overload factor, the simulator's prediction against
# the measured time, relapses and wall time.
#
#   scripts/bench-rehearse.sh [--busy] [N] [extra `recover rehearse` flags...]
#   scripts/bench-rehearse.sh --sample N [--seed S] [--busy] [extra flags...]
#
# The first form runs every file under examples/scenarios/rehearse/ (laptop, overload-4,
# outage-12s, replicas-3) N times each; with `--scenario` among the extra flags, that
# scenario alone. The second draws N scenarios from the grid (`recover simulate --grid
# --write`, the one generator: cold factor 1.5-4, overload 1.5-5, replicas 1-4,
# concurrency 4-16, with and without attempt headers, attached at the trigger or 60 s
# later) with a printed seed (a new one each run unless given) and runs each once. `--busy` keeps one core busy with a CPU hog for
# the whole benchmark (a laptop doing something else). Needs: cargo, python3. Runs go under
# ${BENCH_DIR:-target/bench-rehearse}/<timestamp>/. BENCH_PROFILE=debug uses the debug
# build (the rehearsal's time is mostly waiting on real clocks; useful when a release
# build does not fit); RECOVER_BIN=path runs that binary without building. A benchmark
# prints figures; nothing here asserts on them.
set -euo pipefail
cd "$(dirname "$0")/.."
BUSY=0
SAMPLE=""
SEED=""
N=3
while [ $# -gt 0 ]; do
  case "$1" in
    --busy) BUSY=1; shift ;;
    --sample) SAMPLE="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    [0-9]*) N="$1"; shift ;;
    *) break ;;
  esac
done
OUT="${BENCH_DIR:-target/bench-rehearse}/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
PROFILE="${BENCH_PROFILE:-release}"
. scripts/lib/recover_bin.sh
BIN=$(recover_bin "$PROFILE")

SCENARIOS=()
if [ -n "$SAMPLE" ]; then
  SEED="${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
  echo "seed $SEED: $SAMPLE scenario(s) drawn from the grid, runs under $OUT" >&2
  mkdir -p "$OUT/scenarios"
  "$BIN" simulate --grid --points "$SAMPLE" --seed "$SEED" --write "$OUT/scenarios"
  for i in $(seq 1 "$SAMPLE"); do SCENARIOS+=("$OUT/scenarios/grid-$i.yaml"); done
  N=1
else
  case " $* " in
    *" --scenario "*) SCENARIOS=("") ;;
    *) for f in examples/scenarios/rehearse/*.yaml; do SCENARIOS+=("$f"); done ;;
  esac
fi

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

python3 - "$OUT" "$N" "$BUSY" "$SEED" "${SCENARIOS[@]}" <<'PY'
import json, os, re, statistics, sys
out, n, busy, seed, scenarios = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4], sys.argv[5:]
def f(v, fmt="{:.1f}"):
    return "-" if v is None else fmt.format(v)
med = lambda v: statistics.median(v) if v else None
print(f"{'scenario':<12} {'run':>3} {'exit':>4} {'ttr_s':>6} {'lower_s':>7} {'fluid_s':>7} {'ratio':>6} {'k_est':>5} {'k_true':>6} "
      f"{'k_err':>6} {'pred_s':>6} {'pred_err':>8} {'relapses':>8} {'stepbacks':>9} {'wall_s':>6}")
summary = []
every = []
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
        # The bound on the scrape grid (what a measured time is compared with); the fluid
        # bound beside it (absent from reports written before the grid bound).
        fl = (r.get("lower_bound") or {}).get("fluid_s")
        ratio = ttr / lb if ttr is not None and lb else None
        k, kt = r.get("k"), r.get("k_true")
        kerr = (k - kt) / kt if k is not None and kt else None
        pred = r.get("predicted_time_to_recover_s")
        perr = (pred - ttr) / ttr if pred is not None and ttr else None
        rows.append(dict(ttr=ttr, lb=lb, fl=fl, ratio=ratio, k=k, kt=kt, kerr=kerr, pred=pred, perr=perr,
                         rel=r["relapses"], sb=r.get("ramp_step_backs", 0), wall=r["wall_time_s"],
                         ok=r["recovered"]))
        why = "; ".join(x for x in [r.get("k_unknown") and "k: " + r["k_unknown"],
                                    r.get("predicted_unknown") and "prediction: " + r["predicted_unknown"],
                                    r.get("under_lower_bound"), r.get("failure")] if x)
        every.append(dict(rows[-1], name=name, sc=sc, code=code, why=why,
                          path=(r.get("lower_bound") or {}).get("lowest", "-")))
        print(f"{name:<12} {i:>3} {code:>4} {f(ttr):>6} {f(lb):>7} {f(fl):>7} {f(ratio, '{:.2f}x'):>6} {f(k, '{:.2f}'):>5} "
              f"{f(kt, '{:.1f}'):>6} {f(kerr and 100 * kerr + 0.0, '{:+.0f}%'):>6} {f(pred):>6} "
              f"{f(perr and 100 * perr, '{:+.0f}%'):>8} {r['relapses']:>8} {r.get('ramp_step_backs', 0):>9} {f(r['wall_time_s'], '{:.0f}'):>6}")
    col = lambda key: med([x[key] for x in rows if x[key] is not None])
    summary.append((name, len(rows), sum(1 for x in rows if x["ok"]), col("ttr"), col("lb"), col("ratio"),
                    col("k"), col("kt"), col("kerr"), col("pred"), col("perr"),
                    max([x["rel"] for x in rows], default=None), col("wall")))
print()
print(f"medians over {n} run(s) per scenario{' (busy: one core taken by a CPU hog)' if busy else ''}:")
print("| scenario | recovered | time to recover | lower bound (on the scrape grid) | ratio | k estimated / true | k error | predicted | prediction error | relapses (max) | wall |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (name, runs, ok, ttr, lb, ratio, k, kt, kerr, pred, perr, rel, wall) in summary:
    print(f"| {name} | {ok}/{runs} | {f(ttr)} s | {f(lb)} s | {f(ratio, '{:.2f}x')} | {f(k, '{:.2f}')} / {f(kt, '{:.0f}')} | "
          f"{f(kerr and 100 * kerr + 0.0, '{:+.0f}%')} | {f(pred)} s | {f(perr and 100 * perr, '{:+.0f}%')} | {f(rel, '{}')} | {f(wall, '{:.0f}')} s |")
if seed:
    print()
    print(f"seed {seed}: {len(scenarios)} scenario(s) drawn from the grid, one run each"
          f"{' (busy: one core taken by a CPU hog)' if busy else ''}")
    print("| scenario | cold / k / replicas / conc / header / attached | exit | time to recover | bound on the grid / fluid (path) | ratio | k est / true | predicted / measured | relapses | unknown or failed, why |")
    print("|---|---|---:|---:|---|---:|---:|---:|---:|---|")
    for x in every:
        y = open(x["sc"]).read()
        g = lambda key: (re.search(rf"{key}: (\S+)", y) or [None, "-"])[1]
        desc = (f"{g('cold_factor')} / {g('overload_factor')} / {g('replicas')} / {g('concurrency')} / "
                f"{g('attempt_header')} / {'60 s late' if 'attach_after' in y else 'at trigger'}")
        print(f"| {x['name']} | {desc} | {x['code']} | {f(x['ttr'])} s | {f(x['lb'], '{:.2f}')} / {f(x['fl'], '{:.2f}')} s ({x['path']}) | "
              f"{f(x['ratio'], '{:.2f}x')} | {f(x['k'], '{:.2f}')} / {f(x['kt'], '{:.2f}')} ({f(x['kerr'] and 100 * x['kerr'] + 0.0, '{:+.0f}%')}) | "
              f"{f(x['pred'])} / {f(x['ttr'])} s ({f(x['perr'] and 100 * x['perr'], '{:+.0f}%')}) | {x['rel']} | {x['why'] or '-'} |")
    ratios = [x["ratio"] for x in every if x["ratio"] is not None]
    within = lambda key, lim: sum(1 for x in every if x[key] is not None and abs(x[key]) <= lim)
    print()
    print(f"summary: median ratio {f(med(ratios), '{:.2f}x')}; ratio in 1.0-1.5x: "
          f"{sum(1 for r in ratios if 1.0 <= r <= 1.5)}/{len(every)}; under 1.0x: {sum(1 for r in ratios if r < 1.0)}; "
          f"k within 15%: {within('kerr', 0.15)}/{len(every)}; prediction within 20%: {within('perr', 0.20)}/{len(every)}; "
          f"recovered: {sum(1 for x in every if x['ok'])}/{len(every)}; relapses: {sum(x['rel'] for x in every)}")
PY
