#!/usr/bin/env python3
"""querylog-db.py DB LABELS.tsv [--rows N] [--hours H] [--end-ms T] [--seed S] [--json OUT]

Fills an nxdns query-log database with N realistic rows over the H hours before T (default: a
1,000,000-row day ending a minute ago), in one transaction, then the per-minute aggregates
(agg_minute, agg_top) from those rows as the writer would have counted them, so that
/api/stats/* agree with /api/queries.

DB must already carry the daemon's schema (start `nxdns serve` on the state_dir once: it
migrates querylog.db); this script checks the version and the columns and refuses anything else.
Its rows must be empty (a fresh file).

Rows are stored the way the writer stores them (schema 3, src/querylog/block.c): one log_blocks
row per writer transaction and minute, its records a JSON array. At a household rate the writer
commits every flush tick (250 ms), so rows are grouped by 250 ms window (at most 1024 a block).

Rows: names, query types and decisions come from ../shared/data/workload's labelled mixed
workload (queries-mixed.labels.tsv: allowed_popular, blocked_exact_popular/_tail,
blocked_wildcard_subdomain, allowlisted_exception, nonexistent), read in order and repeated;
12 IPv4 clients and one IPv6 client with a skewed share; timestamps follow a day's curve (quiet
at night, busy in the evening) with ms resolution; about 55% of the resolved answers come from
the cache, the rest from one of two upstreams; 0.5% local records; 3% TCP, 2% DoH.
Deterministic for a given seed and end time.
"""
import argparse
import json
import math
import os
import random
import sqlite3
import sys
import time

SCHEMA_VERSION = 3
COLUMNS = ["id", "ts", "duration_us", "client", "proto", "qtype", "rcode", "action", "reason",
           "cached", "upstream", "name", "matched", "source", "answer"]
QTYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "MX": 15, "TXT": 16, "AAAA": 28,
          "SRV": 33, "HTTPS": 65, "SVCB": 64}
# enum nx_qlog_action / nx_filter_reason values (querylog/querylog.h, filter/result.h)
ACT_NONE, ACT_ALLOW, ACT_BLOCK, ACT_LOCAL = 0, 1, 2, 3
R_NONE, R_LOCAL, R_EXCEPTION, R_DOMAIN, R_WILDCARD = 0, 2, 5, 6, 7
AGG_NAME, AGG_BLOCKED, AGG_CLIENT = 0, 1, 2
AGG_KEYS_MAX = 4096  # NX_QLOG_AGG_KEYS_MAX: per kind and minute, more fold into "(other)"
UPSTREAMS = ["9.9.9.9:53", "1.1.1.1:53"]
LOCALS = ["nas.home.arpa", "printer.home.arpa", "router.home.arpa"]


def clients():
    """13 clients, shares roughly 1/k (a laptop and two phones do most of the asking)."""
    addrs = [f"192.168.1.{10 + i}" for i in range(12)] + ["fd00::1:2"]
    w = [1.0 / (k + 1) for k in range(len(addrs))]
    return addrs, w


def load_labels(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            p = line.rstrip("\n").split("\t")
            if len(p) < 3:
                continue
            ev = p[3] if len(p) > 3 else "-"
            rows.append((p[0].lower().rstrip("."), QTYPES.get(p[1].upper(), 1), p[2], ev))
    if not rows:
        sys.exit(f"querylog-db: no labelled queries in {path}")
    return rows


def source_of(evidence):
    """lists/hosts/oisd_basic_2021.txt -> hosts_oisd_basic_2021 (how scripts/bench names them)."""
    if evidence in ("", "-"):
        return "bench"
    parts = evidence.split("/")
    base = parts[-1].rsplit(".", 1)[0]
    return (parts[-2] + "_" + base if len(parts) >= 2 else base).lower().replace(".", "_")[:64]


def minute_weights(n_min, end_ms):
    """A household day: low 01:00-06:00, rising through the day, highest around 20:00."""
    w = []
    for m in range(n_min):
        t = end_ms - (n_min - m) * 60000
        h = (t / 3600000.0) % 24
        w.append(0.25 + 0.75 * (0.5 - 0.5 * math.cos(2 * math.pi * (h - 4) / 24)) ** 1.5)
    return w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("labels")
    ap.add_argument("--rows", type=int, default=1000000)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--end-ms", type=int, default=0)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    end_ms = a.end_ms or (int(time.time() * 1000) - 60000)
    n_min = max(1, int(a.hours * 60))
    start_ms = (end_ms - n_min * 60000) // 60000 * 60000

    con = sqlite3.connect(a.db, isolation_level=None)
    ver = con.execute("PRAGMA user_version").fetchone()[0]
    cols = [r[1] for r in con.execute("PRAGMA table_info(queries)")]
    if ver != SCHEMA_VERSION or cols != COLUMNS:
        sys.exit(f"querylog-db: {a.db}: schema version {ver}, columns {cols}: this script "
                 f"writes version {SCHEMA_VERSION} ({', '.join(COLUMNS)}); update it")
    if con.execute("SELECT COUNT(*) FROM queries").fetchone()[0]:
        sys.exit(f"querylog-db: {a.db} already has rows; give it a fresh file")

    labels = load_labels(a.labels)
    addrs, cw = clients()
    # rows per minute: the day's curve, rounded, the remainder on the busiest minutes
    w = minute_weights(n_min, start_ms + n_min * 60000)
    tot = sum(w)
    per_min = [int(a.rows * x / tot) for x in w]
    short = a.rows - sum(per_min)
    for i in sorted(range(n_min), key=lambda i: -w[i])[:short]:
        per_min[i] += 1

    t0 = time.monotonic()
    con.execute("BEGIN")
    ins = ("INSERT INTO log_blocks(ts_min, ts_max, n, blocked, clients, records)"
           " VALUES (?,?,?,?,?,?)")

    def blocks(rows):
        """log_blocks rows of rows (sorted by ts): one per 250 ms flush window, <= 1024 each."""
        out, cur = [], []
        for r in rows + [None]:
            if cur and (r is None or r[0] // 250 != cur[0][0] // 250 or len(cur) == 1024):
                cl = sorted({c[2] for c in cur})
                out.append((min(c[0] for c in cur), max(c[0] for c in cur), len(cur),
                            sum(c[6] == ACT_BLOCK for c in cur),
                            json.dumps(cl, separators=(",", ":")) if len(cl) <= 16 else None,
                            json.dumps([list(c) for c in cur], separators=(",", ":"),
                                       ensure_ascii=False)))
                cur = []
            if r is not None:
                cur.append(r)
        return out
    k = 0
    cats = {}
    buf = []
    for m in range(n_min):
        base = start_ms + m * 60000
        for off in sorted(rnd.randrange(60000) for _ in range(per_min[m])):
            name, qtype, cat, ev = labels[k % len(labels)]
            k += 1
            client = rnd.choices(addrs, cw)[0]
            u = rnd.random()
            proto = 1 if u < 0.03 else 3 if u < 0.05 else 0
            rcode, action, reason, cached, upstream = 0, ACT_NONE, R_NONE, 0, None
            matched = source = None
            answer = ""
            if rnd.random() < 0.005:
                cat, name, qtype = "local", rnd.choice(LOCALS), 1
            if cat == "local":
                action, reason = ACT_LOCAL, R_LOCAL
                matched, answer = name, "A 192.168.1.%d" % (2 + LOCALS.index(name))
                dur = 40 + rnd.randrange(60)
            elif cat.startswith("blocked_"):
                action = ACT_BLOCK
                reason = R_WILDCARD if cat == "blocked_wildcard_subdomain" else R_DOMAIN
                matched = name.split(".", 1)[1] if reason == R_WILDCARD and "." in name else name
                source = source_of(ev)
                answer = "AAAA ::" if qtype == 28 else "A 0.0.0.0"
                dur = 30 + rnd.randrange(90)
            else:
                if cat == "allowlisted_exception":
                    action, reason, matched, source = ACT_ALLOW, R_EXCEPTION, name, "bench"
                if rnd.random() < 0.55:
                    cached, dur = 1, 25 + rnd.randrange(80)
                else:
                    upstream, dur = UPSTREAMS[rnd.random() < 0.3], 4000 + int(rnd.expovariate(1 / 18000.0))
                if cat == "nonexistent":
                    rcode, answer = 3, ""
                elif qtype == 28:
                    answer = "AAAA 2001:db8::%x" % (k % 4093)
                elif qtype == 1:
                    answer = "A 192.0.2.%d" % (k % 250)
                else:
                    answer = "CNAME edge.%s" % name[-40:]
            cats[cat] = cats.get(cat, 0) + 1
            # the writer stores an empty text as null
            buf.append((base + off, dur, client, proto, qtype, rcode, action, reason, cached,
                        upstream, name, matched or None, source or None, answer or None))
        con.executemany(ins, blocks(buf))
        buf.clear()
    t_rows = time.monotonic() - t0

    # The aggregates, as agg.c counts them: minute = ts / 60000; forwarded = an upstream
    # produced the answer; at most AGG_KEYS_MAX keys per kind and minute (the rest "(other)",
    # never reached at this rate but kept so the tables match the writer's bound).
    con.execute(
        "INSERT INTO agg_minute(minute, queries, blocked, cached, forwarded, local)"
        " SELECT ts / 60000, COUNT(*), SUM(action = 2), SUM(cached = 1),"
        " SUM(action NOT IN (2, 3) AND cached = 0 AND upstream IS NOT NULL), SUM(action = 3)"
        " FROM queries GROUP BY ts / 60000")
    for kind, col, where in ((AGG_NAME, "name", ""), (AGG_BLOCKED, "name", "WHERE action = 2"),
                             (AGG_CLIENT, "client", "")):
        con.execute(
            f"INSERT INTO agg_top(kind, minute, key, n)"
            f" SELECT {kind}, mi, key, n FROM ("
            f"  SELECT mi, key, n, ROW_NUMBER() OVER (PARTITION BY mi ORDER BY n DESC) AS r"
            f"  FROM (SELECT ts / 60000 AS mi, {col} AS key, COUNT(*) AS n FROM queries {where}"
            f"        GROUP BY mi, key))"
            f" WHERE r <= {AGG_KEYS_MAX}")
        con.execute(
            f"INSERT INTO agg_top(kind, minute, key, n)"
            f" SELECT {kind}, mi, '(other)', SUM(n) FROM ("
            f"  SELECT mi, n, ROW_NUMBER() OVER (PARTITION BY mi ORDER BY n DESC) AS r"
            f"  FROM (SELECT ts / 60000 AS mi, {col} AS key, COUNT(*) AS n FROM queries {where}"
            f"        GROUP BY mi, key))"
            f" WHERE r > {AGG_KEYS_MAX} GROUP BY mi")
    con.execute("COMMIT")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    t_all = time.monotonic() - t0

    info = {
        "rows": con.execute("SELECT COUNT(*) FROM queries").fetchone()[0],
        "blocks": con.execute("SELECT COUNT(*) FROM log_blocks").fetchone()[0],
        "distinct_names": con.execute("SELECT COUNT(DISTINCT name) FROM queries").fetchone()[0],
        "clients": len(addrs),
        "first_ts": con.execute("SELECT MIN(ts) FROM queries").fetchone()[0],
        "last_ts": con.execute("SELECT MAX(ts) FROM queries").fetchone()[0],
        "blocked": con.execute("SELECT COUNT(*) FROM queries WHERE action = 2").fetchone()[0],
        "agg_minute_rows": con.execute("SELECT COUNT(*) FROM agg_minute").fetchone()[0],
        "agg_top_rows": con.execute("SELECT COUNT(*) FROM agg_top").fetchone()[0],
        "peak_minute_rows": max(per_min),
        "categories": cats,
        "insert_s": round(t_rows, 1),
        "total_s": round(t_all, 1),
        "page_size": con.execute("PRAGMA page_size").fetchone()[0],
        "journal_mode": con.execute("PRAGMA journal_mode").fetchone()[0],
    }
    con.close()
    info["db_bytes"] = os.path.getsize(a.db)
    wal = a.db + "-wal"
    info["wal_bytes"] = os.path.getsize(wal) if os.path.exists(wal) else 0
    text = json.dumps(info, indent=1)
    if a.json:
        open(a.json, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
