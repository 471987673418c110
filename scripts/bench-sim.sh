#!/usr/bin/env bash
# Simulator speed: simulated client-seconds per wall second, printed beside the goal (at
# least 1,000,000 on one core: 10,000 clients for 100 s in at most 1 s).
# The model is single-threaded; taskset pins it to one core when available.
#
# REFERENCE=/path/to/recover runs the same cases with that binary right after this one's,
# in the same session, for a before/after on the same machine (build it from the commit to
# compare against, with `cargo build --release`). RECOVER_BIN=/path measures that binary
# instead of building this tree's.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-5}
. scripts/lib/recover_bin.sh
RECOVER=$(recover_bin)
pin=()
command -v taskset >/dev/null 2>&1 && pin=(taskset -c 0)

# Each case names the figure docs/benchmarks.md records for it (client-s per wall s,
# median, release build on the 2-core build machine), printed beside this run's.
bench() {
  echo "== $1"
  echo "   recorded in docs/benchmarks.md: $2 client-s per wall s"
  shift 2
  "${pin[@]}" "$RECOVER" simulate "$@" --bench-runs "$runs"
  if [ -n "${REFERENCE:-}" ]; then
    echo "-- reference: $REFERENCE"
    "${pin[@]}" "$REFERENCE" simulate "$@" --bench-runs "$runs"
  fi
  echo
}

# config-deploy scaled 20x (10,000 workers, 4,000 req/s): stuck, every client in the
# 3-second retry loop for most of the run; the heaviest case.
bench "config-deploy x20, stuck (10,000 clients, 100 s)" "187 M" \
  --scenario config-deploy --set clients=10000 --set capacity=4000 --set duration=100s
# The same with shedding: it recovers, so clients go back to polling every 30 s.
bench "config-deploy x20, shedding (10,000 clients, 100 s)" "540 M" \
  --scenario config-deploy --set clients=10000 --set capacity=4000 --set duration=100s --set shedding=true
# Ten times larger, with exponential backoff and full jitter: RNG draws, a larger clock.
# (Spelt as the two switches so an older binary runs it too; what "jitter" draws is the
# binary's own.)
bench "config-deploy x200, backoff + jitter (100,000 clients, 100 s)" "712 M (uniform 1-2x jitter then)" \
  --scenario config-deploy --set backoff=true --set jitter=true --set clients=100000 --set capacity=40000 --set duration=100s
echo "goal: >= 1000000 simulated client-seconds per wall second on one core"
