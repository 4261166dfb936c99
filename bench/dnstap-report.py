#!/usr/bin/env python3
"""Render bench/dnstap-ab.sh's OUTDIR (runs.tsv, meta.txt, commands.txt) as the dnstap section of
docs/benchmarks.md: blocked names answered per nxdns CPU-second, dnstap off vs on, per round and
the medians."""
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
print("### dnstap: the export's cost on the DNS path")
print()
print(f"Run {meta.get('date', '?')} on {meta.get('cores', '?')} cores ({meta.get('arch', '?')}), "
      f"{meta.get('rounds', '?')} interleaved rounds of {meta.get('dur', '?')} s of dnsperf over "
      "50,000 blocked names against two nxdns side by side (2 workers each, cache 10000, query "
      "log on as by default), one with `dnstap.socket` set to an `fstrm_capture` writing to "
      "/dev/null. CPU is the whole daemon's (utime + stime from /proc, so the dnstap writer "
      "thread is counted); the collector's is apart.")
print()
print("| round | dnstap | answered | nxdns CPU (s) | answers / CPU-s | QPS | collector CPU (s) |")
print("|---:|---|---:|---:|---:|---:|---:|")
for r, mode, answered, cpu, qps, ccpu in rows:
    a, c = int(answered), float(cpu)
    rate = a / c if c > 0 else 0.0
    per[mode].append(rate)
    print(f"| {r} | {mode} | {a:,} | {c:.2f} | {rate:,.0f} | {int(qps):,} | "
          f"{float(ccpu):.2f} |" if mode == "on" else
          f"| {r} | {mode} | {a:,} | {c:.2f} | {rate:,.0f} | {int(qps):,} | |")
off, on = statistics.median(per["off"]), statistics.median(per["on"])
print()
print(f"Median blocked answers per nxdns CPU-second: off **{off:,.0f}**, on **{on:,.0f}** "
      f"(on / off **{on / off:.2f}**, about {1e6 / on - 1e6 / off:+.2f} µs of CPU per answer). "
      f"Frames sent by the dnstap daemon: {int(float(meta.get('sent', 0))):,} (two per answer), "
      f"dropped (queue full): {meta.get('dropped_queue_full', '?')}, reconnects: "
      f"{meta.get('reconnects', '?')}. The machine is shared: compare the two modes within a "
      "round, not across runs.")
print()
print("Commands (`scripts/bench dnstap`):")
print()
print("```")
print(f"bench/dnstap-ab.sh build/nxdns OUTDIR   # DUR={meta.get('dur')} ROUNDS={meta.get('rounds')}")
for line in open(f"{d}/commands.txt"):
    print(line.rstrip())
print("fstrm_capture -t protobuf:dnstap.Dnstap -u dt.sock -w /dev/null")
print("```")
