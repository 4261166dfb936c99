#!/usr/bin/env python3
"""peers-report.py OUT_DIR META.json: the `peers` section of docs/benchmarks.md from what
../shared/bench/measure-qps.sh wrote in OUT_DIR (runs.tsv, memory.tsv, commands.txt) plus
OUT_DIR/ready.txt (its "ready:" lines: memory of each server once its list answered).
Medians over rounds; ratios against the best peer (dnsmasq, Unbound, Knot Resolver: not nxdns,
not the ceiling) and against the ceiling responder. Prints Markdown on stdout.
"""
import csv
import json
import os
import re
import statistics
import sys

out, meta = sys.argv[1], json.load(open(sys.argv[2]))
SUT = "nxdns"
BIG = f"nxdns-cache{meta['big_cache']}" if meta.get("big_cache") else None
PEERS = meta.get("peers", ["unbound", "dnsmasq", "kresd"])
SUTS = [SUT] + ([BIG] if BIG else [])
NAMES = {"unbound": "Unbound", "dnsmasq": "dnsmasq", "kresd": "Knot Resolver (kresd, 1 process)",
         "kresd2": "Knot Resolver (kresd × cores)", "pdns": "PowerDNS Recursor",
         "ceiling": "ceiling (recvmmsg responder)", SUT: "**nxdns**"}
if BIG:
    NAMES[BIG] = f"**nxdns, cache.size {meta['big_cache']:,}**"
rows = list(csv.DictReader(open(os.path.join(out, "runs.tsv")), delimiter="\t"))


def fl(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


G = {}
order_w = []
for r in rows:
    G.setdefault((r["workload"], r["peer"]), []).append(r)
    if r["workload"] not in order_w:
        order_w.append(r["workload"])


def stat(w, p):
    g = G.get((w, p))
    if not g:
        return None
    q = [fl(x["qps"]) for x in g]
    qpc = [fl(x["qps"]) / fl(x["srv_cores"]) for x in g
           if fl(x["srv_cores"]) not in (None, 0.0) and fl(x["qps"]) is not None]
    return {"n": len(g), "qps": med(q), "min": min(q), "max": max(q), "qpc": med(qpc),
            "cores": med(fl(x["srv_cores"]) for x in g), "dcores": med(fl(x["dnsperf_cores"]) for x in g),
            "ucores": med(fl(x["upstream_cores"]) for x in g),
            "p50": med(fl(x["p50_ms"]) for x in g), "p99": med(fl(x["p99_ms"]) for x in g),
            "avg": med(fl(x["avg_ms"]) for x in g), "lost": med(fl(x["lost"]) for x in g),
            "sent": med(fl(x["sent"]) for x in g), "rc": g[-1]["rcodes"]}


def f0(v):
    return "–" if v is None else f"{v:,.0f}"


def f2(v):
    return "–" if v is None else f"{v:.2f}"


W = {"blocked": "all-blocked names (random names of the loaded list, type A)",
     "hits": "cache hits (1000 allowed names, cache warmed just before)",
     "mixed": "the shared mixed workload (queries-mixed.txt: 500k queries, 183k names; blocked, popular, exceptions, nonexistent)",
     "miss": "forwarded misses (2M unique names per round, answered by the knotd upstream)"}
print(f"### Side by side: nxdns and the peers on loopback\n")
print(f"Run {meta['date']} on {meta['cores']} cores ({meta['arch']}); {meta['rounds']} interleaved rounds "
      f"of {meta['dur']} s per server and workload (order rotated each round), medians. Every server "
      f"holds the same {meta['names']:,} names (../shared/bench/prep-lists.sh over all "
      f"{meta['lists']} list files: the normalized union) and blocks each name and every name below "
      f"it, loaded the way its users load it: dnsmasq `address=/x/`, Unbound "
      f"`local-zone: \"x.\" always_nxdomain` ({meta['threads']} threads), Knot Resolver RPZ "
      f"`x CNAME .` + `*.x CNAME .` (one process), nxdns one source of `||x^` lines "
      f"(bench/nxdns-sut.sh: {meta['workers']} workers, cache.size {meta['cache_size']}, "
      f"query_budget.permits {meta['permits']} — the default 32 would drop forwarded misses by "
      f"design under dnsperf's 200 outstanding queries; query log {meta.get('query_log', 'on, the default')})"
      + (f", and a second nxdns, the same but cache.size {meta['big_cache']:,}: enough for the mixed "
         f"workload's ~111k distinct (name, type) answers, as Knot Resolver's default 100 MB cache "
         f"holds them. " if BIG else ". ") +
      f"All forward to one knotd on loopback. "
      f"The ceiling is a recvmmsg/sendmmsg responder that flips QR ({meta['threads']} threads): "
      f"the most this box and dnsperf can do for an answer from memory. dnsperf (`-c 8 -T 1 -q 200 -v`) "
      f"runs on the same 2 cores and uses about one of them, so QPS is capped by the generator; "
      f"queries per server CPU-second (QPS ÷ server cores used, from /proc/PID/stat) is the "
      f"efficiency figure.\n")

for w in order_w:
    present = [p for p in PEERS + SUTS + ["ceiling"] if (w, p) in G]
    best = None
    for p in PEERS:
        s = stat(w, p)
        if s and (best is None or (s["qps"] or 0) > (best[1]["qps"] or 0)):
            best = (p, s)
    bestq = None
    for p in PEERS:
        s = stat(w, p)
        if s and s["qpc"] and (bestq is None or s["qpc"] > bestq[1]["qpc"]):
            bestq = (p, s)
    ceil = stat("blocked", "ceiling")
    print(f"#### {w}: {W.get(w, w)}\n")
    print("| server | QPS | min–max | % of ceiling | × best peer QPS | server cores | queries / CPU-s | × best peer q/CPU-s | p50 ms | p99 ms | lost | rcodes (last run) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for p in present:
        s = stat(w, p)
        pc = f"{100 * s['qps'] / ceil['qps']:.0f}%" if ceil and ceil["qps"] else "–"
        rb = f"{s['qps'] / best[1]['qps']:.2f}" if best and p != "ceiling" else "–"
        rq = f"{s['qpc'] / bestq[1]['qpc']:.2f}" if bestq and s["qpc"] and p != "ceiling" else "–"
        print(f"| {NAMES.get(p, p)} | {f0(s['qps'])} | {f0(s['min'])}–{f0(s['max'])} | {pc} | {rb} | {f2(s['cores'])} "
              f"| {f0(s['qpc'])} | {rq} | {f2(s['p50'])} | {f2(s['p99'])} | {f0(s['lost'])} | {s['rc']} |")
    if best:
        print(f"\nBest peer here: {NAMES.get(best[0])} by QPS"
              + (f", {NAMES.get(bestq[0])} by queries per CPU-second." if bestq else "."))
    d = stat(w, SUT)
    if d:
        print(f" dnsperf used {f2(d['dcores'])} cores and the upstream {f2(d['ucores'])} during the nxdns runs.")
    print()

# memory
ready = {}
rp = os.path.join(out, "ready.txt")
if os.path.exists(rp):
    for line in open(rp):
        m = re.match(r"ready: (\S+) on port \d+ \(pids [^)]*\): (\d+) (\d+) (\d+) (\d+) (\d+)", line)
        if m:
            ready[m.group(1)] = [int(x) for x in m.groups()[1:]]
mem = {r["peer"]: r for r in csv.DictReader(open(os.path.join(out, "memory.tsv")), delimiter="\t")}
print("#### Memory of each server (same names loaded)\n")
print("| server | processes | VmRSS once the list answered | VmRSS after all runs | VmHWM | RssAnon | RssFile | threads | VmRSS × nxdns |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
nx = float(mem[SUT]["rss_kib"]) if SUT in mem else None
for p in PEERS + SUTS + ["ceiling"]:
    if p not in mem:
        continue
    r = mem[p]
    m = lambda k: f"{float(r[k]) / 1024:.1f} MiB"
    rd = f"{ready[p][0] / 1024:.1f} MiB" if p in ready else "–"
    x = f"{float(r['rss_kib']) / nx:.1f}" if nx else "–"
    print(f"| {NAMES.get(p, p)} | {r['procs']} | {rd} | {m('rss_kib')} | {m('hwm_kib')} | {m('anon_kib')} | {m('file_kib')} | {r['threads']} | {x} |")
print()

# targets
b, c = stat("blocked", SUT), stat("blocked", "ceiling")
print("#### Targets (issue 4)\n")
print("| target | measured | verdict |")
print("|---|---|---|")
if b and c:
    v = b["qps"] / c["qps"]
    print(f"| blocked-name QPS ≥ 95% of the ceiling's | {b['qps']:,.0f} / {c['qps']:,.0f} = {100 * v:.0f}% "
          f"| {'met' if v >= 0.95 else f'**missed by {100 * (0.95 - v):.0f} points**'} |")
bq = None
for p in PEERS:
    s = stat("blocked", p)
    if s and s["qpc"] and (bq is None or s["qpc"] > bq[1]):
        bq = (p, s["qpc"])
if b and bq and b["qpc"]:
    v = b["qpc"] / bq[1]
    print(f"| blocked queries per server CPU-second ≥ 1.3× the best peer's | nxdns {b['qpc']:,.0f} vs "
          f"{NAMES.get(bq[0])} {bq[1]:,.0f} = {v:.2f}× | {'met' if v >= 1.3 else f'**missed: {v:.2f}× of 1.3×**'} |")
mx, mk = stat("mixed", SUT), stat("mixed", "kresd")
if mx and mk:
    v = mx["qps"] / mk["qps"]
    print(f"| mixed-workload QPS ≥ 1.2× Knot Resolver's | {mx['qps']:,.0f} vs {mk['qps']:,.0f} = {v:.2f}× "
          f"| {'met' if v >= 1.2 else f'**missed: {v:.2f}× of 1.2×**'} |")
mb = stat("mixed", BIG) if BIG else None
if mb and mk:
    v = mb["qps"] / mk["qps"]
    r = mem.get(BIG)
    rss = f", VmRSS {float(r['rss_kib']) / 1024:.1f} MiB after all runs" if r else ""
    print(f"| (the same, nxdns with cache.size {meta['big_cache']:,}{rss}) | {mb['qps']:,.0f} vs "
          f"{mk['qps']:,.0f} = {v:.2f}× | {'met' if v >= 1.2 else f'missed: {v:.2f}×'} with that cache |")
if SUT in mem:
    r = mem[SUT]
    print(f"| (memory, this load: {meta['names']:,} names in one source) | VmRSS {float(r['rss_kib']) / 1024:.1f} MiB, "
          f"VmHWM {float(r['hwm_kib']) / 1024:.1f} MiB, {r['threads']} threads | see the memory section for the 37-source record |")
print()
