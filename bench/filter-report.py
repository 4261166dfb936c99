#!/usr/bin/env python3
"""filter-report.py DIR META.json: the `filter` section of docs/benchmarks.md from what
scripts/bench (bench_filter) left in DIR: update.json (`nxdns update --offline --json`),
update.time ("wall_s maxrss_kib" from /usr/bin/time), filter-bench.txt (bench/filter-bench.sh
output) and lookups.txt (`filter_bench lookups` pinned to one core). Markdown on stdout."""
import json
import os
import re
import sys

D, meta = sys.argv[1], json.load(open(sys.argv[2]))
MiB = 1048576.0


def rd(n):
    p = os.path.join(D, n)
    return open(p).read() if os.path.exists(p) else ""


u = json.loads(rd("update.json") or "{}")
wall, maxrss = (rd("update.time").split() + ["0", "0"])[:2]
wall, maxrss = float(wall), int(maxrss)
snap = u.get("snapshot", {})
src = u.get("sources", [])
entries, nbytes, build_ms = int(snap.get("entries", 0)), int(snap.get("bytes", 0)), int(snap.get("build_ms", 0))
bpe = nbytes / entries if entries else float("nan")
tot = {k: sum(int(s.get(k, 0)) for s in src) for k in ("list", "wild", "allow", "skipped")}
ok = sum(1 for s in src if s.get("status") == "ok")
lk = rd("lookups.txt")
m = re.search(r"lookups (\d+) in ([\d.]+) s: (\d+) lookups/s on one core \((\d+) ns each\), blocked ([\d.]+)%", lk)
fb = rd("filter-bench.txt")

print("### Blocklist compiler, snapshot and matcher (all lists)\n")
print(f"Run {meta['date']} on {meta['cores']} cores ({meta['arch']}). Input: every file in "
      f"../shared/data/lists ({meta['lists']} files, 2,844,013 entries as written, 62.8 MiB), one "
      f"source per file, format auto-detected (../shared/data/lists-b is the held-out second set and "
      f"is not loaded). Earlier nxdns: 71 MiB resident for 2.85M entries (≈ 26 B/entry), +120 MiB "
      f"during a refresh. Budget (issue 3): ≤ 10 snapshot bytes per stored (source, name) entry.\n")
print("| figure | value | command |")
print("|---|---:|---|")
print(f"| sources compiled | {ok} of {len(src)} ok | `nxdns update --config all-lists.yaml --offline --json` |")
print(f"| exact / wildcard / exception names (summed over sources) | {tot['list']:,} / {tot['wild']:,} / {tot['allow']:,} | same |")
print(f"| lines skipped (counted by reason) | {tot['skipped']:,} | same |")
print(f"| compile + snapshot build, wall | {wall:.2f} s | same, under `/usr/bin/time` |")
print(f"| of which snapshot build (`build_ms`) | {build_ms / 1000:.2f} s | same |")
print(f"| so compiling all {len(src)} sources | ≈ {wall - build_ms / 1000:.2f} s | (wall − build_ms; includes config load) |")
print(f"| peak RSS of that process | {maxrss / 1024:.1f} MiB | same (`%M`) |")
print(f"| snapshot entries ((source, name) pairs; a name in .list and .wild of one source counts once) | {entries:,} | same |")
print(f"| snapshot file | {nbytes:,} B = {nbytes / MiB:.1f} MiB | same |")
v = "met" if bpe <= 10 else f"**missed by {bpe - 10:.2f} B**"
print(f"| **bytes per entry** | **{bpe:.2f}** (budget ≤ 10: {v}; earlier nxdns ≈ {71 * MiB / 2.85e6:.1f}) | same |")
print(f"| snapshot vs the earlier nxdns's 71 MiB | {nbytes / MiB / 71 * 100:.0f}% | |")
if m:
    print(f"| **lookups per second, one core** (every name of queries-mixed.txt against all sources, name and parents hashed) "
          f"| **{int(m.group(3)):,}** ({m.group(4)} ns each; {m.group(5)}% blocked) "
          f"| `taskset -c {meta.get('cpu', 1)} filter_bench lookups SNAPSHOT queries-mixed.txt queries-mixed.labels.tsv` |")
# bench/filter-bench.sh: the same lists without and with the side structure (AdGuard rules the
# snapshot cannot hold), the snapshot matcher against nx_filter_lists_decide in one run
fl = re.findall(r"lookups \d+ in [\d.]+ s: (\d+) lookups/s on one core \((\d+) ns each\).*\[(.*)\]", fb)
sk = re.findall(r"skipped by reason \(([\d,]+)\)", fb)
sd = re.search(r"side structure: (\d+) rules \((\d+) by name, (\d+) regex/pattern.*?; (\d+) B counted, (\d+) B on", fb)
bp = re.findall(r"snapshot \S+: \d+ sources, (\d+) entries, (\d+) bytes \(([\d.]+) B/entry\)", fb)
if len(sk) == 2:
    print(f"| lines skipped, without / with the side structure (`filter-bench.sh`) | {sk[0]} / {sk[1]} | `bench/filter-bench.sh` |")
if len(bp) == 2:
    print(f"| snapshot bytes per entry, without / with the side structure | {bp[0][2]} / {bp[1][2]} ({int(bp[0][0]):,} / {int(bp[1][0]):,} entries) | same |")
if sd:
    print(f"| side structure (all lists) | {int(sd.group(1)):,} rules: {sd.group(2)} by name, {sd.group(3)} regex/pattern; {int(sd.group(5)):,} B on `filter_side` | same |")
if len(fl) == 2:
    print(f"| matcher cost per query, same run: snapshot matcher / `nx_filter_lists_decide` | {fl[0][1]} ns / {fl[1][1]} ns | same |")
print()
cats = [l for l in lk.splitlines() if l.startswith("category") or l.startswith("snapshot")]
if cats:
    print("Decisions per workload category (the labels say what each category must get; "
          "`allowed_popular` names under an `@@` rule come out `allow`):\n")
    print("```")
    print("\n".join(cats))
    print("```\n")
if fb.strip():
    print("`bench/filter-bench.sh` (the library path: one `filter_bench compile` process per list, "
          "then `snapshot-build`; skipped lines by reason, per-source compile peak):\n")
    print("```")
    print("\n".join(l for l in fb.splitlines() if not l.startswith("category")).strip())
    print("```\n")
print("Commands:\n")
print("```")
print(rd("commands.txt").rstrip())
print("```")
