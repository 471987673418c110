#!/usr/bin/env python3
"""Time the gate's admin API the way the engine's gate client calls it (one kept-alive
connection, as reqwest's pool keeps it): `PUT /admin/limit` alone, `GET /admin/limit`
alone, and the engine's whole `gate.set_limit` exchange as it stood (PUT, a GET to
confirm, a GET for the journal's `after`). Prints median, p90 and max in ms of each.

usage: admin_latency.py ADMIN_ADDR TOKEN_FILE [ROUNDS]"""
import http.client, json, statistics, sys, time

addr, token_file = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 40
host, port = addr.rsplit(":", 1)
token = open(token_file).read().strip()
conn = http.client.HTTPConnection(host, int(port), timeout=10)
auth = {"authorization": f"Bearer {token}", "content-type": "application/json"}


def call(method, body=None):
    t = time.monotonic()
    conn.request(method, "/admin/limit", body=body, headers=auth)
    r = conn.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f"{method} /admin/limit: HTTP {r.status}")
    return (time.monotonic() - t) * 1000


def limit(i):
    return json.dumps({"rate_per_s": 50.0 + (i % 2) * 25.0, "burst": 25})


put, get, exchange = [], [], []
call("GET")  # the connection, as the engine's `before` read opens it
for i in range(rounds):
    put.append(call("PUT", limit(i)))
    get.append(call("GET"))
    t = time.monotonic()
    call("PUT", limit(i + 1))
    call("GET")
    call("GET")
    exchange.append((time.monotonic() - t) * 1000)
    time.sleep(0.1)


def row(name, xs):
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    print(f"{name:28s} median {statistics.median(xs):7.1f}  p90 {p90:7.1f}  max {xs[-1]:7.1f} ms")


row("PUT /admin/limit", put)
row("GET /admin/limit", get)
row("PUT + GET + GET (engine, old)", exchange)
