#!/usr/bin/env python3
"""querylog-writer.py QLOG_BENCH OUT.json [--profiles burst,household] [--lo R] [--hi R]
                      [--secs S] [--confirm-secs S] [--resolution R] [--grid R,R,...]

The query-log writer's throughput sustained without drops, per profile: bisects the offered
rate between --lo and --hi (records/s, multiples of --resolution) with one `qlog_bench` run of
--secs seconds per rate (records = rate x secs: the producers are paced, so a run lasts that
long), then confirms the best zero-drop rate with one longer run (--confirm-secs). A failed
confirmation steps the rate down by --resolution and confirms again (at most 3 times). Then one
run at each --grid rate the search did not visit, for the shape (drops against the offered rate):
drops come from occasional pauses, so the zero-drop boundary moves from run to run.

qlog_bench pushes through the real writer (2 producer threads, default queue of 2048 records,
the real SQLite file in $TMPDIR, deleted after each run) and prints written/s, drops and the
writer thread's CPU; every run is recorded in OUT.json with its exact command line.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time


def parse(out):
    """The figures of one qlog_bench report."""
    num = r"([0-9.]+)"
    pats = {
        "elapsed_s": r"elapsed " + num + " s",
        "pushed": r"pushed " + num,
        "written": r"written " + num,
        "dropped": r"dropped " + num,
        "batches": r"batches " + num,
        "written_per_s": r"written/s " + num,
        "writer_cpu_s": r"writer cpu " + num + " s",
        "writer_cpu_pct": r"\(" + num + "% of a core",
        "us_per_record": r"cpu/record " + num + " us",
        "syscr_per_record": r"read [0-9]+ \(" + num + "/record",
        "syscw_per_record": r"write [0-9]+ \(" + num + "/record",
        "db_kib": r"db " + num + " KiB",
        "queue_peak": r"queue_peak " + num,
    }
    r = {}
    for k, p in pats.items():
        m = re.search(p, out)
        r[k] = float(m.group(1)) if m else None
    return r


def run(exe, profile, rate, secs, log):
    records = int(rate * secs)
    cmd = [exe, "--profile", profile, "--records", str(records), "--rate", str(rate)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 130)
    r = parse(p.stdout)
    r.update(profile=profile, rate=rate, records=records, rc=p.returncode,
             wall_s=round(time.monotonic() - t0, 2),
             cmd="qlog_bench " + " ".join(cmd[1:]), load1=os.getloadavg()[0])
    if p.returncode != 0 or r["dropped"] is None:
        r["error"] = (p.stdout + p.stderr).strip()[-400:]
    ok = p.returncode == 0 and r["dropped"] == 0
    r["ok"] = ok
    log.append(r)
    print(f"  {profile} {rate:>7}/s x {secs}s: written/s {r['written_per_s']}, dropped "
          f"{r['dropped']}, writer cpu {r['writer_cpu_pct']}%, {r['us_per_record']} us/record",
          file=sys.stderr, flush=True)
    return ok


def search(exe, profile, a, log):
    res = a.resolution
    lo, hi = None, None
    if run(exe, profile, a.lo, a.secs, log):
        lo = a.lo
    else:
        return {"profile": profile, "best": None, "note": f"drops already at {a.lo}/s"}
    if run(exe, profile, a.hi, a.secs, log):
        lo = a.hi
    else:
        hi = a.hi
    while hi is not None and hi - lo > res:
        mid = (lo + hi) // 2 // res * res
        if mid <= lo:
            mid = lo + res
        if mid >= hi:
            break
        if run(exe, profile, mid, a.secs, log):
            lo = mid
        else:
            hi = mid
    best, confirmed = lo, None
    for _ in range(3):
        if run(exe, profile, best, a.confirm_secs, log):
            confirmed = log[-1]
            break
        hi = best
        best -= res
        if best < a.lo:
            break
    return {"profile": profile, "best": best if confirmed else None, "first_drop": hi,
            "confirm": confirmed,
            "first_drop_run": next((r for r in reversed(log) if r["profile"] == profile
                                    and r["rate"] == hi and not r["ok"]), None)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("out")
    ap.add_argument("--profiles", default="burst,household")
    ap.add_argument("--lo", type=int, default=20000)
    ap.add_argument("--hi", type=int, default=300000)
    ap.add_argument("--secs", type=int, default=4)
    ap.add_argument("--confirm-secs", type=int, default=10)
    ap.add_argument("--resolution", type=int, default=10000)
    ap.add_argument("--grid", default="50000,100000,150000,200000,250000")
    a = ap.parse_args()
    if a.secs > 10 or a.confirm_secs > 10:
        sys.exit("querylog-writer: runs are bounded to 10 s")
    log, results = [], []
    grid = [int(x) for x in a.grid.split(",") if x]
    for prof in a.profiles.split(","):
        results.append(search(a.exe, prof, a, log))
        # the shape: drops at a fixed set of rates (one run each, skipped when the search ran it)
        for rate in grid:
            if not any(r["profile"] == prof and r["rate"] == rate and r["records"] == rate * a.secs
                       for r in log):
                run(a.exe, prof, rate, a.secs, log)
    json.dump({"params": vars(a), "results": results, "runs": log}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
