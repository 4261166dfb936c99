#!/usr/bin/env python3
"""smaps-files.py PID [OUT.json]: resident memory per mapped file (RssFile by library).

Sums Rss, Pss and Anonymous (a library's written data and relocations: private dirty pages)
of /proc/PID/smaps over every mapping of each file, keyed by the file's base name; anonymous
mappings ([heap], [stack], unnamed) go under "[anon]". Adds /proc/PID/status's VmRSS,
RssAnon, RssFile, VmHWM and Threads (bytes; Threads a count). Writes JSON to OUT (or stdout).
Used by scripts/bench (memory-floor) to show which libraries a process pays for.
"""
import json
import os
import sys


def files(pid):
    out = {}
    cur = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if "-" in parts[0] and not parts[0].endswith(":"):
                path = " ".join(parts[5:]) if len(parts) > 5 else ""
                if path.startswith("/"):
                    key = os.path.basename(path.replace(" (deleted)", ""))
                else:
                    key = "[anon]" if path in ("", "[heap]", "[stack]") else path
                cur = out.setdefault(key, {"Rss": 0, "Pss": 0, "Anonymous": 0, "Size": 0})
                cur["Size"] += int(parts[0].split("-")[1], 16) - int(parts[0].split("-")[0], 16)
            elif cur is not None and parts[0].rstrip(":") in ("Rss", "Pss", "Anonymous"):
                cur[parts[0].rstrip(":")] += int(parts[1]) * 1024
    return out


def status(pid):
    d = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                d[k] = int(v.split()[0]) * 1024
            elif k == "Threads":
                d[k] = int(v)
    return d


def main():
    pid = int(sys.argv[1])
    doc = {"status": status(pid), "files": files(pid)}
    text = json.dumps(doc, indent=1, sort_keys=True)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
