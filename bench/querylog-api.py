#!/usr/bin/env python3
"""querylog-api.py ADMIN_URL PASSWORD_FILE DB OUT.json [--pid PID] [--n N] [--budget S]

Latency of the admin API's query-log routes on a running nxdns whose querylog.db is DB (read
here, read-only, only to pick realistic filter values and a mid-log cursor). Logs in with
POST /api/auth/login (the password is the first line of PASSWORD_FILE) and sends every request
with the session cookie over one keep-alive connection (reopened if the server closes it).

Per case: 2 untimed warm-up requests, then N timed ones (fewer when the case has used --budget
seconds, at least 5); reports median, p95 and max wall time from sending the request to the
last body byte, the answer's size and item count, and the daemon's CPU per request (utime +
stime of --pid over the timed requests).
"""
import argparse
import http.client
import json
import os
import sqlite3
import sys
import time
import urllib.parse


class Client:
    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port
        self.cookie = None
        self.c = None

    def req(self, method, path, body=None):
        h = {}
        if self.cookie:
            h["Cookie"] = "nxdns_session=" + self.cookie
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        for attempt in (0, 1):
            if self.c is None:
                self.c = http.client.HTTPConnection(self.host, self.port, timeout=60)
            try:
                t0 = time.perf_counter()
                self.c.request(method, path, body=data, headers=h)
                r = self.c.getresponse()
                raw = r.read()
                dt = time.perf_counter() - t0
                if r.getheader("Connection", "").lower() == "close":
                    self.c.close()
                    self.c = None
                return r, raw, dt
            except (http.client.HTTPException, ConnectionError, BrokenPipeError):
                self.c.close()
                self.c = None
                if attempt:
                    raise

    def login(self, password):
        r, raw, _ = self.req("POST", "/api/auth/login", {"password": password})
        if r.status != 200:
            sys.exit(f"querylog-api: login failed: {r.status} {raw[:200]!r}")
        for k, v in r.getheaders():
            if k.lower() == "set-cookie" and v.startswith("nxdns_session="):
                self.cookie = v.split(";", 1)[0].split("=", 1)[1]
        if not self.cookie:
            sys.exit("querylog-api: login answered 200 without a session cookie")


def cpu_ticks(pid):
    if not pid:
        return 0
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    return int(v[11]) + int(v[12])  # utime, stime: fields 14 and 15


def pct(sorted_v, p):
    if not sorted_v:
        return None
    i = min(len(sorted_v) - 1, max(0, int(round(p / 100.0 * len(sorted_v) + 0.5)) - 1))
    return sorted_v[i]


def measure(cl, label, path, a, note=""):
    for _ in range(2):
        r, raw, _ = cl.req("GET", path)
        if r.status != 200:
            sys.exit(f"querylog-api: GET {path}: {r.status} {raw[:300]!r}")
    ts = []
    hz = os.sysconf("SC_CLK_TCK")
    c0 = cpu_ticks(a.pid)
    t_start = time.monotonic()
    body = b""
    while len(ts) < a.n and (len(ts) < 5 or time.monotonic() - t_start < a.budget):
        r, body, dt = cl.req("GET", path)
        if r.status != 200:
            sys.exit(f"querylog-api: GET {path}: {r.status} {body[:300]!r}")
        ts.append(dt * 1000.0)
    c1 = cpu_ticks(a.pid)
    j = json.loads(body)
    items = len(j["items"]) if isinstance(j.get("items"), list) else None
    s = sorted(ts)
    res = {"case": label, "path": path, "n": len(ts), "median_ms": round(pct(s, 50), 2),
           "p95_ms": round(pct(s, 95), 2), "max_ms": round(s[-1], 2), "bytes": len(body),
           "items": items, "note": note,
           "server_cpu_ms_per_req": round((c1 - c0) * 1000.0 / hz / len(ts), 2) if a.pid else None}
    print(f"  {label:<44} n={res['n']:<3} median {res['median_ms']:>8} ms  p95 "
          f"{res['p95_ms']:>8} ms  {res['bytes']} B", file=sys.stderr, flush=True)
    return res, j


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("password_file")
    ap.add_argument("db")
    ap.add_argument("out")
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--budget", type=float, default=15.0)
    a = ap.parse_args()
    password = open(a.password_file).readline().rstrip("\n")

    # realistic filter values from the log itself
    con = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True, timeout=5)
    rows = con.execute("SELECT COUNT(*) FROM queries").fetchone()[0]
    top_client, top_n = con.execute(
        "SELECT client, COUNT(*) c FROM queries GROUP BY client ORDER BY c DESC LIMIT 1").fetchone()
    low_client, low_n = con.execute(
        "SELECT client, COUNT(*) c FROM queries GROUP BY client ORDER BY c LIMIT 1").fetchone()
    mid = con.execute("SELECT ts, id FROM queries ORDER BY ts DESC, id DESC LIMIT 1 OFFSET ?",
                      (rows // 2,)).fetchone()
    first_ts, last_ts = con.execute("SELECT MIN(ts), MAX(ts) FROM queries").fetchone()
    common = "google"
    common_n = con.execute("SELECT COUNT(*) FROM queries WHERE instr(name, ?) > 0",
                           (common,)).fetchone()[0]
    rare = "no-such-label-anywhere"
    counts = dict(con.execute("SELECT action, COUNT(*) FROM queries GROUP BY action").fetchall())
    con.close()

    cl = Client(a.url)
    t_login = time.monotonic()
    cl.login(password)
    login_ms = (time.monotonic() - t_login) * 1000.0

    q = urllib.parse.quote
    out = []
    out.append(measure(cl, "first page (limit=100)", "/api/queries?limit=100", a)[0])
    _, raw, _ = cl.req("GET", "/api/queries?limit=100")
    p2 = json.loads(raw)["next_cursor"]
    out.append(measure(cl, "page 2 (cursor)", f"/api/queries?limit=100&cursor={p2}", a)[0])
    # walk 10 pages, then time the 11th
    cur = None
    for _ in range(10):
        _, raw, _ = cl.req("GET", "/api/queries?limit=100" + (f"&cursor={cur}" if cur else ""))
        cur = json.loads(raw)["next_cursor"]
    out.append(measure(cl, "page 11 by cursor (after walking 10 pages)",
                       f"/api/queries?limit=100&cursor={cur}", a,
                       "rows 1,001-1,100 from the newest")[0])
    mc = f"{mid[0]}.{mid[1]}"
    out.append(measure(cl, "page at the middle of the log (cursor)",
                       f"/api/queries?limit=100&cursor={mc}", a,
                       f"cursor {mc}: row {rows // 2 + 1:,} from the newest")[0])
    out.append(measure(cl, "client filter, most active client",
                       f"/api/queries?limit=100&client={q(top_client)}", a,
                       f"{top_client}: {top_n:,} rows")[0])
    out.append(measure(cl, "client filter, least active client",
                       f"/api/queries?limit=100&client={q(low_client)}", a,
                       f"{low_client}: {low_n:,} rows")[0])
    out.append(measure(cl, "status=blocked", "/api/queries?limit=100&status=blocked", a,
                       f"{counts.get(2, 0) * 100.0 / rows:.1f}% of rows")[0])
    out.append(measure(cl, "status=local", "/api/queries?limit=100&status=local", a,
                       f"{counts.get(3, 0) * 100.0 / rows:.1f}% of rows")[0])
    out.append(measure(cl, "proto=tcp", "/api/queries?limit=100&proto=tcp", a)[0])
    h1_to = last_ts - 12 * 3600000
    out.append(measure(cl, "1-hour window 12 h ago (from, to)",
                       f"/api/queries?limit=100&from={h1_to - 3600000}&to={h1_to}", a)[0])
    out.append(measure(cl, f"name substring, common (\"{common}\")",
                       f"/api/queries?limit=100&name={common}", a,
                       f"{common_n:,} matching rows")[0])
    out.append(measure(cl, "name substring, no match (walks the whole log)",
                       f"/api/queries?limit=100&name={rare}", a, "0 matching rows")[0])
    out.append(measure(cl, "/api/stats/summary (last 24 h)", "/api/stats/summary", a)[0])
    for kind in ("domains", "blocked", "clients"):
        out.append(measure(cl, f"/api/stats/top?kind={kind} (last 24 h)",
                           f"/api/stats/top?kind={kind}", a)[0])
    out.append(measure(cl, "/api/stats/history (last 24 h, 1 h steps)",
                       "/api/stats/history?step=3600", a)[0])
    # minutes whose start lies in [from, to): from the first row's minute start
    _, summ = measure(cl, "(summary over the whole log, check)",
                      f"/api/stats/summary?from={first_ts // 60000 * 60000}&to={last_ts + 1}", a)
    json.dump({"rows": rows, "login_ms": round(login_ms, 1), "n": a.n, "budget_s": a.budget,
               "summary_whole_log": summ, "cases": out}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
