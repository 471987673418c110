#!/usr/bin/env bash
# Simulator speed: simulated client-seconds per wall second, printed beside the goal (at
# least 1,000,000 on one core: 10,000 clients for 100 s in at most 1 s).
# The model is single-threaded; taskset pins it to one core when available.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-5}
cargo build --release --locked --bin recover >&2
bin=target/release/recover
pin=()
command -v taskset >/dev/null 2>&1 && pin=(taskset -c 0)

bench() {
  echo "== $1"
  shift
  "${pin[@]}" "$bin" simulate "$@" --bench-runs "$runs"
  echo
}

# config-deploy scaled 20x (10,000 workers, 4,000 req/s): stuck, every client in the
# 3-second retry loop for most of the run; the heaviest case.
bench "config-deploy x20, stuck (10,000 clients, 100 s)" \
  --scenario config-deploy --set clients=10000 --set capacity=4000 --set duration=100s
# The same with shedding: it recovers, so clients go back to polling every 30 s.
bench "config-deploy x20, shedding (10,000 clients, 100 s)" \
  --scenario config-deploy --set clients=10000 --set capacity=4000 --set duration=100s --set shedding=true
# Ten times larger, with jittered exponential backoff: more RNG draws, a larger wheel.
bench "config-deploy x200, backoff-jitter (100,000 clients, 100 s)" \
  --scenario config-deploy --policy backoff-jitter --set clients=100000 --set capacity=40000 --set duration=100s
echo "goal: >= 1000000 simulated client-seconds per wall second on one core"
