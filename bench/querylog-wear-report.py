#!/usr/bin/env python3
"""querylog-wear-report.py DIR: the markdown of scripts/bench wear from DIR/r-*.json (one
bench/querylog-wear.py run each), DIR/meta.json and DIR/commands.txt."""
import json
import sys
from pathlib import Path

d = Path(sys.argv[1])
runs = [json.loads(p.read_text()) for p in sorted(d.glob("r-*.json"))]
runs.sort(key=lambda r: (r["rate"], 0 if r["commit_interval"] == 0 else 1))
meta = json.loads((d / "meta.json").read_text()) if (d / "meta.json").exists() else {}
print("Bytes written per logged query (issue 16, \"Longevity on a Pi's SD card\"), "
      "`bench/querylog-wear.py`: one `nxdns serve`, a household mix (300 names, skewed; one in "
      "five denied by a rule, the rest forwarded to a fake upstream or cached) over UDP at a "
      "fixed rate without pause. The window runs from one commit to the first commit a minute "
      "or more later (steady state); the bench checkpoints the WAL itself at both ends, so the "
      "window also pays for copying every page it appended back into the database (an upper "
      "bound: the daemon's own checkpoint, every ~1000 WAL pages, writes a page changed by many "
      "commits once). **write_bytes** is `/proc/PID/io` (+ the checkpoint's, same field of the "
      "bench process); on this kernel the page cache accounts a whole folio when it dirties one, "
      "so it can exceed what was written. **SQLite wrote** is the `wchar` of the writer thread "
      "(`/proc/PID/task/TID/io`: its WAL frames and any checkpoint) + the checkpoint's: the "
      "bytes handed to the kernel. The last column is the whole process, start to exit (wait4's "
      "ru_oublock x 512: schema creation, its own checkpoints, the final commit) over every "
      "query sent: the start's writes (which dominate at 5 q/s) but not the pages the bench's "
      "own checkpoints copied, so it is no total. "
      "`commit_interval: 0` is the writer before batching (a commit at every 250 ms drain), "
      "same binary.")
print()
print("| rate | logging.commit_interval | records in window | window | write_bytes / query | "
      "SQLite wrote / query | of which checkpoint | whole process (ru_oublock) / query sent |")
print("|---|---|---|---|---|---|---|---|")
for r in runs:
    ci = r["commit_interval"]
    ci = "60 (default)" if ci is None else str(ci)
    n = max(1, r["logged"])
    print(f"| {r['rate']:g} q/s | {ci} | {r['logged']} | {r['window_s']} s | "
          f"**{r['bytes_per_query']:.0f} B** | **{r['wchar_per_query']:.0f} B** | "
          f"{r['checkpoint_wchar'] / n:.0f} B | {r['total_bytes_per_query']:.0f} B |")
print()
print("Commands (" + meta.get("when", "") + ", build/nxdns of this tree):")
print()
print("```")
print((d / "commands.txt").read_text().rstrip())
print("```")
