#!/usr/bin/env python3
"""speed-report.py OUT_DIR META.json: the `speed` section of docs/benchmarks.md (issue 16) from
what ../shared/bench/measure-qps.sh wrote in OUT_DIR (runs.tsv, commands.txt).

Two tables, every figure from the same run:
  1. blocked names and cache hits: queries per server CPU-second (QPS / server cores from
     /proc/PID/stat) of nxdns before, nxdns after and the ceiling responder; the ratio to the
     ceiling is taken within each round (the servers ran seconds apart) and its median shown.
  2. forwarded misses: nxdns's queries per server CPU-second against each peer's, per round.
The before/after pair ran alternately (measure-qps rotates the order every round).
Prints Markdown on stdout.
"""
import csv
import json
import os
import statistics
import sys

out, meta = sys.argv[1], json.load(open(sys.argv[2]))
BEFORE, AFTER = meta["before"], meta["after"]
PEERS = meta["peers"]
NAMES = {"unbound": "Unbound", "dnsmasq": "dnsmasq", "kresd": "Knot Resolver (kresd, 1 process)",
         "pdns": "PowerDNS Recursor", "ceiling": "ceiling (recvmmsg responder)",
         BEFORE: f"nxdns before ({meta['before_label']})", AFTER: f"**nxdns after ({meta['after_label']})**"}
rows = list(csv.DictReader(open(os.path.join(out, "runs.tsv")), delimiter="\t"))


def qpc(r):
    try:
        q, c = float(r["qps"]), float(r["srv_cores"])
    except (TypeError, ValueError):
        return None
    return q / c if c > 0 else None


by = {}  # (workload, server) -> {round: row}
for r in rows:
    by.setdefault((r["workload"], r["peer"]), {})[r["round"]] = r


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def f0(x):
    return "–" if x is None else f"{x:,.0f}"


def f2(x):
    return "–" if x is None else f"{x:.2f}"


def pct(x):
    return "–" if x is None else f"{100 * x:.1f}%"


def paired(w, a, b, wb=None):
    """a's q/CPU-s over b's (in workload wb, default w), per round where both ran;
    (median, min, max, n)."""
    ra, rb = by.get((w, a), {}), by.get((wb or w, b), {})
    xs = []
    for k in ra:
        if k in rb:
            x, y = qpc(ra[k]), qpc(rb[k])
            if x and y:
                xs.append(x / y)
    if not xs:
        return None, None, None, 0
    return statistics.median(xs), min(xs), max(xs), len(xs)


def qpcs(w, p):
    return [qpc(r) for r in by.get((w, p), {}).values()]


print(f"Run {meta['date']} on {meta['cores']} cores; {meta['rounds']} rounds of {meta['dur']} s per "
      f"server and workload, order rotated each round; {meta['names']:,} names loaded in every server "
      f"(prep-lists.sh subset `{meta['size']}`); nxdns: {meta['workers']} workers, cache.size 10000, "
      "query_budget.permits 1024, **query log on as shipped** (no `logging:` block); all forward to "
      "one knotd on loopback. Queries per server CPU-second = QPS ÷ the server's cores (utime + "
      "stime of every thread, the query-log writer included). Ratios are paired within a round.")
print()
print("#### Blocked names and cache hits against the ceiling (target: ≥ 90%)")
print()
print("| workload | server | QPS (median) | server cores | queries / CPU-s (median) | min–max | ÷ ceiling's (blocked run of the round), paired (median, min–max) |")
print("|---|---|---:|---:|---:|---:|---:|")
for w in ("blocked", "hits"):
    for p in (BEFORE, AFTER, "ceiling"):
        g = list(by.get((w, p), {}).values())
        if not g:
            continue
        q = qpcs(w, p)
        qq = [x for x in q if x]
        # measure-qps runs the ceiling in the blocked workload only; it answers every query
        # alike (QR flipped), so a hit is held against its blocked figure of the same round
        m, lo, hi, n = paired(w, p, "ceiling", "blocked") if p != "ceiling" else (None, None, None, 0)
        rat = f"{pct(m)} ({pct(lo)}–{pct(hi)})" if n else "–"
        print(f"| {w} | {NAMES[p]} | {f0(med([float(r['qps']) for r in g]))} | "
              f"{f2(med([float(r['srv_cores']) for r in g]))} | {f0(med(q))} | "
              f"{f0(min(qq)) if qq else '–'}–{f0(max(qq)) if qq else '–'} | {rat} |")
print()
for w in ("blocked", "hits"):
    m, lo, hi, n = paired(w, AFTER, BEFORE)
    if n:
        won = sum(1 for k, r in by.get((w, AFTER), {}).items()
                  if k in by.get((w, BEFORE), {}) and (qpc(r) or 0) > (qpc(by[(w, BEFORE)][k]) or 0))
        print(f"- {w}: after ÷ before, queries per CPU-second, paired: median {m:.3f} "
              f"(min–max {lo:.3f}–{hi:.3f}); after higher in {won} of {n} rounds.")
print()
print("#### Forwarded misses against each peer (queries per server CPU-second)")
print()
print("| server | QPS (median) | server cores | queries / CPU-s (median) | nxdns after ÷ this, paired (median, min–max) |")
print("|---|---:|---:|---:|---:|")
for p in [AFTER, BEFORE] + PEERS:
    g = list(by.get(("miss", p), {}).values())
    if not g:
        print(f"| {NAMES.get(p, p)} | (did not run) | | | |")
        continue
    m, lo, hi, n = paired("miss", AFTER, p) if p != AFTER else (None, None, None, 0)
    rat = f"{m:.2f}× ({lo:.2f}–{hi:.2f})" if n else "–"
    print(f"| {NAMES.get(p, p)} | {f0(med([float(r['qps']) for r in g]))} | "
          f"{f2(med([float(r['srv_cores']) for r in g]))} | {f0(med(qpcs('miss', p)))} | {rat} |")
print()
lost = sum(int(r["lost"] or 0) for r in rows)
print(f"Lost over all {len(rows)} runs: {lost:,}.")
print()
