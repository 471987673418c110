#!/usr/bin/env bash
# Rehearse scenarios drawn from the space users have, not the four shipped ones, and print
# side by side: time to recover against the true lower bound, k estimated / true, the
# simulator's prediction / measured, relapses, and what was unknown and why.
#
#   scripts/rehearse-grid.sh [--sample N] [--seed S] [extra `recover rehearse` flags...]
#
# The scenarios come from `recover simulate --grid --write` (the axes and what follows
# from the model are in recover::rehearse::grid::draw's doc), the same draw as `scripts/bench-rehearse.sh --sample`. The
# seed is printed (a new one each run unless given).
# Needs: cargo, python3. BENCH_PROFILE=release builds release (default: debug, the
# rehearsal's time is mostly real clocks). A benchmark prints figures; it asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
N=4
SEED=""
while [ $# -gt 0 ]; do
  case "$1" in
    --sample) N="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    *) break ;;
  esac
done
SEED="${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
OUT="${BENCH_DIR:-target/rehearse-grid}/$(date -u +%Y%m%dT%H%M%SZ)-seed$SEED"
mkdir -p "$OUT"
PROFILE="${BENCH_PROFILE:-debug}"
. scripts/lib/recover_bin.sh
BIN=$(recover_bin "$PROFILE")
echo "seed $SEED, $N scenario(s), runs under $OUT" >&2

"$BIN" simulate --grid --points "$N" --seed "$SEED" --write "$OUT"

for i in $(seq 1 "$N"); do
  sc="$OUT/grid-$i.yaml"
  echo "grid-$i ..." >&2
  code=0
  "$BIN" rehearse --output json --report-dir "$OUT/grid-$i" --scenario "$sc" "$@" \
    >"$OUT/grid-$i.json" 2>"$OUT/grid-$i.log" || code=$?
  echo "$code" >"$OUT/grid-$i.exit"
done

python3 - "$OUT" "$N" "$SEED" <<'PY'
import json, os, sys
out, n, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3]
f = lambda v, fmt="{:.1f}": "-" if v is None else fmt.format(v)
print(f"seed {seed}")
print("| scenario | cold / k / replicas / conc / header / late | exit | ttr | bound (path) | ratio | k est / true | k err | pred / measured | pred err | relapses | unknown |")
print("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")
for i in range(1, n + 1):
    import re
    y = open(os.path.join(out, f"grid-{i}.yaml")).read()
    g = lambda key: (re.search(rf"{key}: (\S+)", y) or [None, "-"])[1]
    desc = f"{g('cold_factor')} / {g('overload_factor')} / {g('replicas')} / {g('concurrency')} / {g('attempt_header')} / {'60s' if 'attach_after' in y else 'no'}"
    code = open(os.path.join(out, f"grid-{i}.exit")).read().strip()
    p = os.path.join(out, f"grid-{i}.json")
    try:
        r = json.load(open(p))
    except Exception:
        print(f"| grid-{i} | {desc} | {code} | no report (see {out}/grid-{i}.log) |||||||||")
        continue
    ttr, lb = r.get("time_to_recover_s"), r.get("lower_bound_s")
    path = (r.get("lower_bound") or {}).get("lowest", "-")
    ratio = ttr / lb if ttr is not None and lb else None
    k, kt = r.get("k"), r.get("k_true")
    kerr = 100 * (k - kt) / kt if k is not None and kt else None
    pred = r.get("predicted_time_to_recover_s")
    perr = 100 * (pred - ttr) / ttr if pred is not None and ttr else None
    unknown = "; ".join(x for x in [r.get("k_unknown") and "k: " + r["k_unknown"],
                                    r.get("predicted_unknown") and "prediction: " + r["predicted_unknown"],
                                    r.get("under_lower_bound"), r.get("failure")] if x)
    print(f"| grid-{i} | {desc} | {code} | {f(ttr)} | {f(lb)} ({path}) | {f(ratio, '{:.2f}x')} | "
          f"{f(k, '{:.2f}')} / {f(kt, '{:.2f}')} | {f(kerr, '{:+.0f}%')} | {f(pred)} / {f(ttr)} | "
          f"{f(perr, '{:+.0f}%')} | {r.get('relapses', '-')} | {unknown or '-'} |")
PY
