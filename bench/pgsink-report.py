#!/usr/bin/env python3
"""Render bench/pgsink-ab.sh's OUTDIR (runs.tsv, meta.txt, commands.txt) as the pgsink section
of docs/benchmarks.md: blocked names answered per nxdns CPU-second with logging.postgresql off
and on, per round and the medians, and the rows per second the sink sustained with the CPU it
and PostgreSQL spent per row."""
import statistics
import sys

d = sys.argv[1]
rows = [line.rstrip("\n").split("\t") for line in open(f"{d}/runs.tsv")][1:]
meta = {}
for line in open(f"{d}/meta.txt"):
    for kv in line.split():
        k, _, v = kv.partition("=")
        meta[k] = v
per = {"off": [], "on": []}
rates, sink_us, pg_us = [], [], []
print("### PostgreSQL sink: its cost on the DNS path and its sustained rate")
print()
print(f"Run {meta.get('date', '?')} on {meta.get('cores', '?')} cores ({meta.get('arch', '?')}), "
      f"PostgreSQL {meta.get('postgres', '?')} on the same box (fsync off), "
      f"{meta.get('rounds', '?')} interleaved rounds of {meta.get('dur', '?')} s of dnsperf over "
      "50,000 blocked names against two nxdns side by side (2 workers each, cache 10000, query "
      "log on as by default), one with `logging.postgresql` set (defaults: batch 1000, flush "
      "1 s, queue 4096). nxdns CPU is the whole daemon's (utime + stime from /proc, so the "
      "sink's thread is counted); the sink thread's own and PostgreSQL's (postmaster + "
      "backends) are apart. Rows/s: rows committed over the run plus 2 s of catching up.")
print()
print("| round | sink | answered | nxdns CPU (s) | answers / CPU-s | QPS | sink thread CPU (s) | PostgreSQL CPU (s) | rows | rows/s | dropped |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    rnd, mode, answered, cpu, qps = r[:5]
    a, c = int(answered), float(cpu)
    rate = a / c if c > 0 else 0.0
    per[mode].append(rate)
    if mode == "on":
        scpu, gcpu, n, drop, wall = (float(x) for x in r[5:10])
        rps = n / wall if wall > 0 else 0.0
        rates.append(rps)
        if n > 0:
            sink_us.append(scpu / n * 1e6)
            pg_us.append(gcpu / n * 1e6)
        print(f"| {rnd} | on | {a:,} | {c:.2f} | {rate:,.0f} | {int(qps):,} | {scpu:.2f} | "
              f"{gcpu:.2f} | {int(n):,} | {rps:,.0f} | {int(drop):,} |")
    else:
        print(f"| {rnd} | off | {a:,} | {c:.2f} | {rate:,.0f} | {int(qps):,} | | | | | |")
off, on = statistics.median(per["off"]), statistics.median(per["on"])
print()
print(f"Median blocked answers per nxdns CPU-second: off **{off:,.0f}**, on **{on:,.0f}** "
      f"(on / off **{on / off:.2f}**, about {1e6 / on - 1e6 / off:+.2f} µs of nxdns CPU per "
      f"answer). Under that full-speed load the sink committed a median "
      f"**{statistics.median(rates):,.0f} rows/s** (with drops: it did not keep up), the sink thread "
      f"{statistics.median(sink_us):.2f} µs and PostgreSQL {statistics.median(pg_us):.2f} µs "
      f"of CPU per row, so by CPU alone one core would carry about "
      f"{1e6 / statistics.median(sink_us):,.0f} rows/s on nxdns's side and "
      f"{1e6 / statistics.median(pg_us):,.0f} on PostgreSQL's. Totals: sent "
      f"{int(float(meta.get('sent', 0))):,}, rows in the table {meta.get('rows', '?')}, "
      f"dropped {meta.get('dropped', '?')}, reconnects {meta.get('reconnects', '?')}. The "
      "machine is shared: compare the two modes within a round, not across runs.")
paced = [line.rstrip("\n").split("\t") for line in open(f"{d}/paced.tsv")][1:]
print()
print("Sustained rate: the sink's daemon alone, dnsperf paced at each rate (`-Q`) for the same "
      "duration, then 2 s to catch up:")
print()
print("| offered q/s | answered | rows | dropped | rows/s | sink thread CPU / row | PostgreSQL CPU / row |")
print("|---:|---:|---:|---:|---:|---:|---:|")
best = 0.0
for rate, answered, n, drop, scpu, gcpu, wall in paced:
    n, drop, scpu, gcpu, wall = float(n), float(drop), float(scpu), float(gcpu), float(wall)
    rps = n / float(meta.get("dur", 10)) if n else 0.0
    if drop == 0:
        best = max(best, rps)
    per_s = f"{scpu / n * 1e6:.2f} µs" if n else "-"
    per_g = f"{gcpu / n * 1e6:.2f} µs" if n else "-"
    print(f"| {int(rate):,} | {int(answered):,} | {int(n):,} | {int(drop):,} | {rps:,.0f} | "
          f"{per_s} | {per_g} |")
print()
print(f"Sustained without a drop: **{best:,.0f} rows/s** (rows over the dnsperf duration) with "
      "PostgreSQL on the same two cores as the load generator and both daemons.")
print()
print("Commands (`scripts/bench pgsink`):")
print()
print("```")
print(f"bench/pgsink-ab.sh build/nxdns OUTDIR   # DUR={meta.get('dur')} ROUNDS={meta.get('rounds')}")
for line in open(f"{d}/commands.txt"):
    print(line.rstrip())
print("postgres -D pg -p PGPORT -c listen_addresses=127.0.0.1 -c fsync=off -c shared_buffers=64MB   # as nobody")
print("```")
