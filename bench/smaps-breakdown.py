#!/usr/bin/env python3
"""smaps-breakdown.py PID [--json]: where a process's resident memory is, by mapping kind.

Reads /proc/PID/smaps and groups every mapping's Rss / Pss / Anonymous into:
  snapshot file      mappings of *.nxs (the blocklist snapshot, file-backed, read-only)
  executable         the process's own binary
  shared libraries   *.so* files (code and their data pages); the largest are listed
  heap (brk)         [heap]: glibc's main arena
  malloc arenas      anonymous rw mappings that, with the PROT_NONE tail after them, span one
                     64 MiB-aligned glibc arena (per-thread arenas)
  thread stacks      anonymous rw mappings directly above a PROT_NONE guard page
  main stack         [stack]
  other anonymous    every other anonymous mapping (large malloc()s served by mmap, libuv, ...)
  other              vdso, vvar, other files
The thread-stack and arena groups are a heuristic from the layout glibc uses; the totals are exact.
Used by scripts/bench (memory section) to say which mappings hold what the ledger does not count.
"""
import json
import os
import sys

ARENA = 64 << 20


def parse(pid):
    maps = []
    cur = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if "-" in parts[0] and not parts[0].endswith(":"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                cur = {"lo": lo, "hi": hi, "perms": parts[1],
                       "path": " ".join(parts[5:]) if len(parts) > 5 else "",
                       "Rss": 0, "Pss": 0, "Anonymous": 0}
                maps.append(cur)
            elif cur is not None and parts[0].rstrip(":") in ("Rss", "Pss", "Anonymous"):
                cur[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return maps


def classify(pid, maps):
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        exe = ""
    groups = {}
    libs = {}
    for i, m in enumerate(maps):
        p = m["path"]
        prev = maps[i - 1] if i > 0 else None
        nxt = maps[i + 1] if i + 1 < len(maps) else None
        if p.endswith(".nxs") or ".nxs" in p:
            g = "snapshot file"
        elif p and p == exe:
            g = "executable"
        elif ".so" in os.path.basename(p):
            g = "shared libraries"
            libs.setdefault(os.path.basename(p), [0, 0])
            libs[os.path.basename(p)][0] += m["Rss"]
            libs[os.path.basename(p)][1] += m["Pss"]
        elif p == "[heap]":
            g = "heap (brk)"
        elif p == "[stack]":
            g = "main stack"
        elif p == "":
            g = "other anonymous"
            if m["perms"].startswith("rw"):
                if (nxt is not None and nxt["path"] == "" and nxt["perms"].startswith("---")
                        and nxt["lo"] == m["hi"] and nxt["hi"] - m["lo"] == ARENA
                        and m["lo"] % ARENA == 0):
                    g = "malloc arenas"
                elif (m["lo"] % ARENA == 0 and m["hi"] - m["lo"] == ARENA):
                    g = "malloc arenas"
                elif (prev is not None and prev["path"] == "" and prev["perms"].startswith("---")
                        and prev["hi"] == m["lo"] and prev["hi"] - prev["lo"] <= (64 << 10)):
                    g = "thread stacks"
        else:
            g = "other"
        s = groups.setdefault(g, {"rss": 0, "pss": 0, "anon": 0, "mappings": 0})
        s["rss"] += m["Rss"]
        s["pss"] += m["Pss"]
        s["anon"] += m["Anonymous"]
        s["mappings"] += 1
    top = sorted(libs.items(), key=lambda kv: -kv[1][0])[:8]
    return {
        "groups": groups,
        "total_rss": sum(m["Rss"] for m in maps),
        "total_pss": sum(m["Pss"] for m in maps),
        "top_libraries": [{"name": k, "rss": v[0], "pss": v[1]} for k, v in top],
        "libraries": len(libs),
    }


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    pid = sys.argv[1]
    r = classify(pid, parse(pid))
    if "--json" in sys.argv:
        json.dump(r, sys.stdout, indent=1)
        print()
        return 0
    mib = lambda b: f"{b / 1048576:.2f}"
    print("| mappings | Rss MiB | Pss MiB | anonymous MiB | count |")
    print("|---|---:|---:|---:|---:|")
    for g, s in sorted(r["groups"].items(), key=lambda kv: -kv[1]["rss"]):
        print(f"| {g} | {mib(s['rss'])} | {mib(s['pss'])} | {mib(s['anon'])} | {s['mappings']} |")
    print(f"| **total** | {mib(r['total_rss'])} | {mib(r['total_pss'])} | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
