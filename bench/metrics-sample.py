#!/usr/bin/env python3
"""metrics-sample.py URL OUT.json STOPFILE [INTERVAL_S] [PID]

Scrapes nxdns's /metrics every INTERVAL_S (default 0.25) until STOPFILE exists (or PID is gone),
then writes
OUT.json with, per gauge series: min, max, last and the time of the max; the VmRSS series
(time, bytes); and the ledger (nxdns_memory_owner_bytes by owner) at the sample where VmRSS was
highest (as of the last successful scrape before it). With PID, /proc/PID/status (VmRSS, VmHWM,
RssAnon, RssFile, Threads) is also read every 0.1 s on its own thread, so the record does not
depend on the daemon's own gauges nor on the admin endpoint answering; scrapes that fail or take
over 1 s are listed (time, seconds waited).
Used by scripts/bench (memory section) to record "the peaks of every gauge" across a load and
a forced refresh. Only loopback URLs are expected; nothing is written until the end.
"""
import json
import os
import re
import sys
import threading
import time
import urllib.request

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')


def scrape(url):
    with urllib.request.urlopen(url, timeout=1) as r:
        text = r.read().decode()
    types, vals = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(None, 3)
            types[name] = typ.strip()
        elif line and not line.startswith("#"):
            m = LINE.match(line)
            if m:
                try:
                    vals[m.group(1) + (m.group(2) or "")] = float(m.group(3))
                except ValueError:
                    pass
    return types, vals


def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"):
                    n = int(v.split()[0])
                    out[k] = n if k == "Threads" else n * 1024
    except OSError:
        pass
    return out


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    url, out, stop = sys.argv[1], sys.argv[2], sys.argv[3]
    interval = float(sys.argv[4]) if len(sys.argv) > 4 else 0.25
    pid = sys.argv[5] if len(sys.argv) > 5 else None
    t0 = time.monotonic()
    running = lambda: not os.path.exists(stop) and (pid is None or os.path.exists(f"/proc/{pid}"))
    types = {}
    series = {}
    lock = threading.Lock()
    rss = []
    owners_at_max = {}
    last_owners = {}
    max_rss = [-1]
    fails = []
    samples = 0

    def put(k, v, t):
        s = series.get(k)
        if s is None:
            series[k] = {"min": v, "max": v, "last": v, "t_max": t}
        else:
            if v > s["max"]:
                s["max"], s["t_max"] = v, t
            s["min"] = min(s["min"], v)
            s["last"] = v

    def proc_loop():
        # /proc is read on its own thread every 0.1 s: it keeps going while the admin
        # endpoint is slow (e.g. while the control loop compiles during a refresh).
        while running():
            t = time.monotonic() - t0
            ps = proc_status(pid)
            with lock:
                for k, v in ps.items():
                    put(f"proc_{k}", float(v), t)
                if "VmRSS" in ps:
                    rss.append([round(t, 2), ps["VmRSS"]])
                    if ps["VmRSS"] > max_rss[0]:
                        max_rss[0] = ps["VmRSS"]
                        owners_at_max.clear()
                        owners_at_max.update(last_owners)
                        owners_at_max["_t"] = t
                        owners_at_max["_status"] = ps
                        owners_at_max["_owners_age_s"] = t - last_owners.get("_t", t)
            time.sleep(0.1)

    th = None
    if pid:
        th = threading.Thread(target=proc_loop, daemon=True)
        th.start()
    while running():
        t = time.monotonic() - t0
        t_start = time.monotonic()
        try:
            ty, vals = scrape(url)
            types.update(ty)
        except Exception:
            fails.append([round(t, 2), round(time.monotonic() - t_start, 2)])
            vals = {}
        with lock:
            if vals:
                samples += 1
                last_owners.clear()
                last_owners.update({k: v for k, v in vals.items()
                                    if k.startswith("nxdns_memory_owner_bytes")})
                last_owners["_t"] = t
            for k, v in vals.items():
                put(k, v, t)
        time.sleep(interval)
    if th:
        th.join(1)
    gauges = {}
    for k, s in series.items():
        fam = k.split("{")[0]
        if fam.startswith("proc_") or types.get(fam) == "gauge":
            gauges[k] = s
    json.dump({"interval_s": interval, "samples": samples, "errors": len(fails),
               "failed_scrapes": fails, "duration_s": time.monotonic() - t0, "gauges": gauges,
               "rss": rss, "owners_at_max_rss": owners_at_max}, open(out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
