#!/usr/bin/env python3
"""Draw rehearsal scenarios from the space users have, not the four shipped ones.

    grid_scenarios.py OUT_DIR N SEED

Writes OUT_DIR/grid-1.yaml .. grid-N.yaml. Each draws: cold factor 1.5-4, overload factor
(true k) 1.5-5, replicas 1-4, concurrency 4-16, clients with or without attempt headers,
attached at the trigger or 60 s after it. The rest follows from the model
(docs/design/arithmetic.md), never from a shipped scenario, with the 1.5x margin of
`rehearse::harsher` over each threshold (a timeout plus a retry delay is 2 s):
capacity C = replicas x concurrency / 40 ms. Stuck: the retry loop W / 2 s must be 1.5x
the overloaded warm capacity C / k, W >= 3 C / k. Trigger: the outage must catch 1.5x
what the cold service answers in 2 s, D x outage >= 3 C / cold, and it catches no more
than the workers there are, so also W >= 3 C / cold: W = 3 C / min(k, cold) (+1). Demand D
is 80% of C / (cold x k), so the plan's first admit rate lets it through, and the outage
is what that demand needs, 3.75 k s (+1), within 3-15 s. Past k = 3.7 the 15 s cap would
catch too few (these points never got stuck, so no late-attach point with a high k was
ever stuck before anyone looked): there demand rises to 3 C / (cold x 14 s) instead,
above the first admit rate by up to 7% (the ramp lets the rest through), still a fifth of
the cold capacity.
"""
import math
import os
import random
import sys


def draw(rng):
    cold = round(rng.uniform(1.5, 4.0), 2)
    k = round(rng.uniform(1.5, 5.0), 2)
    replicas = rng.randint(1, 4)
    conc = rng.randint(4, 16)
    header = rng.choice(["x-attempt", "none"])
    late = rng.choice([False, True])
    cap = replicas * conc / 0.040
    workers = math.ceil(3 * cap / min(k, cold)) + 1
    outage = min(15.0, max(3.0, 3.75 * k + 1.0))
    demand = max(0.8 * cap / (cold * k), 3 * cap / (cold * (outage - 1.0)))
    interval = workers / demand
    return dict(cold=cold, k=k, replicas=replicas, conc=conc, header=header, late=late,
                workers=workers, interval=interval, outage=outage)


def main():
    out, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    for i in range(1, n + 1):
        d = draw(rng)
        with open(os.path.join(out, f"grid-{i}.yaml"), "w") as f:
            f.write(
                f"name: grid-{i}\nreplicas: {d['replicas']}\nservice:\n"
                f"  concurrency: {d['conc']}\n  cold_factor: {d['cold']}\n"
                f"  overload_factor: {d['k']}\nworkers:\n  count: {d['workers']}\n"
                f"  interval: {int(d['interval'] * 1000)}ms\n  attempt_header: {d['header']}\n"
                f"outage: {int(d['outage'] * 1000)}ms\n"
                + ("attach_after: 60s\n" if d["late"] else ""))


if __name__ == "__main__":
    main()
