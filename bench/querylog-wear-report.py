#!/usr/bin/env python3
"""querylog-wear-report.py DIR: the markdown of scripts/bench wear from DIR/*.json (one
bench/querylog-wear.py run each) and DIR/commands.txt."""
import json
import sys
from pathlib import Path

d = Path(sys.argv[1])
runs = [json.loads(p.read_text()) for p in sorted(d.glob("r-*.json"))]
runs.sort(key=lambda r: (r["rate"], 0 if r["commit_interval"] == 0 else 1))
meta = json.loads((d / "meta.json").read_text()) if (d / "meta.json").exists() else {}
print("Bytes written to disk per logged query (issue 16, \"Longevity\"): `write_bytes` of "
      "`/proc/PID/io` from the first query sent until every query sent is in the database "
      "(so the window holds their commits and any checkpoint in it), divided by the queries; "
      "\"with start and exit\" is the whole process (wait4's ru_oublock x 512: schema creation, "
      "final commit, last checkpoint) over the same queries. Household mix: 300 names (skewed), "
      "one in five denied by a rule, the rest forwarded to a fake upstream or cached; UDP from "
      "one client at a fixed rate; `commit_interval: 0` is the writer's behaviour before "
      "batching (a commit at every 250 ms drain), measured by the same binary.")
print()
print("| rate | logging.commit_interval | queries | window | written in window | per query | "
      "with start and exit, per query | database after | WAL after exit |")
print("|---|---|---|---|---|---|---|---|---|")
for r in runs:
    ci = r["commit_interval"]
    ci = "60 (default)" if ci is None else str(ci)
    print(f"| {r['rate']:g} q/s | {ci} | {r['sent'] - 1} | {r['window_s']} s | "
          f"{r['write_bytes'] / 1024:.0f} KiB | **{r['bytes_per_query']:.0f} B** | "
          f"{r['total_bytes_per_query']:.0f} B | {r['db_bytes'] / 1024:.0f} KiB | "
          f"{r['wal_bytes_after'] / 1024:.0f} KiB |")
print()
print("Commands (" + meta.get("when", "") + "):")
print()
print("```")
print((d / "commands.txt").read_text().rstrip())
print("```")
