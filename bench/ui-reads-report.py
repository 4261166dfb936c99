#!/usr/bin/env python3
"""ui-reads-report.py DIR: the markdown of `scripts/bench ui-reads` from its work directory.

DIR holds fill.json and reads.json (qlog_ui_bench), api.json (querylog-api.py), writer-*.txt
(qlog_bench), meta.json, commands.txt; with UI_READS_BEFORE also fill-before.json,
reads-before.json and writer-before-*.txt.
"""
import json
import os
import re
import sys

TARGET_MS = 50.0


def load(path):
    return json.load(open(path)) if os.path.exists(path) else None


def writer(path):
    """qlog_bench's text: cpu/record (us), written/s, dropped, db KiB."""
    if not os.path.exists(path):
        return None
    t = open(path).read()
    num = lambda pat: float(re.search(pat, t).group(1)) if re.search(pat, t) else None
    return {"us": num(r"cpu/record ([\d.]+) us"), "written_s": num(r"written/s (\d+)"),
            "dropped": num(r"dropped (\d+)"), "db_kib": num(r"db (\d+) KiB"),
            "wal_kib": num(r"wal (\d+) KiB"), "records": num(r"records=(\d+)")}


def ms(v):
    return "" if v is None else f"{v:,.2f}"


def main():
    d = sys.argv[1]
    meta = load(f"{d}/meta.json") or {}
    fill, fill_b = load(f"{d}/fill.json"), load(f"{d}/fill-before.json")
    reads, reads_b = load(f"{d}/reads.json") or [], load(f"{d}/reads-before.json") or []
    api = load(f"{d}/api.json") or {"cases": []}
    before = {r["case"]: r for r in reads_b if "median_ms" in r}

    print("### The web admin's reads on a 1M-record day")
    print()
    print(f"{meta.get('date', '?')}, {meta.get('cores', '?')} cores ({meta.get('arch', '?')}), "
          f"load {meta.get('load_start', '?')} at the start, {meta.get('bin', '?')}. "
          "The day goes in through the real writer (`qlog_ui_bench fill`: "
          f"{fill['written']:,} records over {fill['hours']:.0f} h ending a minute ago, one "
          f"transaction per {fill['window_ms']} ms of record time as a household's ~12 queries/s "
          f"make them: {fill['transactions']:,} blocks; 13 clients, 180,000 names with a skewed "
          "popularity, 26% blocked, 0.5% local, 3% TCP, 2% DoH), so the file is the daemon's "
          f"own: **{fill['db_bytes']:,} B, {fill['bytes_per_record']:.0f} B per record**"
          + (f" ({fill_b['db_bytes']:,} B, {fill_b['bytes_per_record']:.0f} B per record "
             "before)" if fill_b else "") + ".")
    print()
    print(f"Target: every read ≤ {TARGET_MS:.0f} ms. The querylog's share (`qlog_ui_bench "
          "reads`: the reader API on one connection, 2 untimed then 20 timed calls):")
    print()
    hdr = "| read | median ms | p95 ms | max ms | items |"
    if before:
        hdr += " before: median ms |"
    print(hdr)
    print("|---|---:|---:|---:|---:|" + ("---:|" if before else ""))
    for r in reads:
        if "median_ms" not in r:
            continue
        flag = "**" if r["p95_ms"] > TARGET_MS else ""
        line = (f"| {r['case']} | {flag}{ms(r['median_ms'])}{flag} | {ms(r['p95_ms'])} | "
                f"{ms(r['max_ms'])} | {r['items']} |")
        if before:
            b = before.get(r["case"])
            line += f" {ms(b['median_ms']) if b else ''} |"
        print(line)
    checks = [r for r in reads if "ok" in r]
    if checks:
        print()
        print("Checks: " + "; ".join(f"{c['case']}: {'yes' if c['ok'] else '**NO**'}"
                                     for c in checks) + ".")
    print()
    print("Over HTTP from `nxdns serve` on that file (`bench/querylog-api.py`: session cookie, "
          "one keep-alive connection, time from the request to the last body byte; the "
          "daemon's CPU per request is the control thread's, which answers /metrics too):")
    print()
    print("| request | median ms | p95 ms | max ms | items | bytes | daemon CPU ms | note |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for c in api["cases"]:
        flag = "**" if c["p95_ms"] > TARGET_MS else ""
        print(f"| {c['case']}: `{c['path']}` | {flag}{ms(c['median_ms'])}{flag} | "
              f"{ms(c['p95_ms'])} | {ms(c['max_ms'])} | {'' if c['items'] is None else c['items']}"
              f" | {c['bytes']:,} | {ms(c['server_cpu_ms_per_req'])} | {c['note']} |")
    print()
    print("What the reads cost the writer: qlog_bench (2 producers through the real writer into "
          "a fresh file, 300,000 records at 50,000/s; household: 300 names, 10 clients; "
          "burst: 200,000 distinct blocked names) — writer thread CPU per record and the file "
          "after the run:")
    print()
    print("| profile | tree | writer CPU µs / record | written/s | dropped | file KiB (db + wal) |")
    print("|---|---|---:|---:|---:|---:|")
    for p in ("household", "burst"):
        for tree in ("before", "after"):
            w = writer(f"{d}/writer-{tree}-{p}.txt")
            if w:
                print(f"| {p} | {tree} | {w['us']:.2f} | {w['written_s']:,.0f} | "
                      f"{w['dropped']:,.0f} | {w['db_kib'] + w['wal_kib']:,.0f} |")
    if fill:
        print()
        print(f"The fill itself (a flush per {fill['window_ms']} ms window, each forcing the "
              f"aggregates out, so a transaction per ~3 records): writer "
              f"{fill['writer_cpu_us_per_record']:.1f} µs per record"
              + (f" ({fill_b['writer_cpu_us_per_record']:.1f} before)" if fill_b else "")
              + "; the daemon writes aggregates at most once a second, which the qlog_bench "
              "rows measure.")
    print()
    print("Commands (`scripts/bench ui-reads`" + (", `UI_READS_BEFORE=DIR` for the before rows"
                                                  if fill_b else "") + "):")
    print()
    print("```")
    for line in open(f"{d}/commands.txt"):
        print(line.rstrip())
    print("```")


if __name__ == "__main__":
    main()
