"""The query log (issue 5) against the running daemon: every answered query becomes one row of
state_dir/querylog.db with its decision; the bounded queue drops its oldest records (counted)
while the writer is stuck, and DNS keeps answering; a full or read-only disk is counted and the
writer recovers; retention deletes old rows; privacy levels 1-3.

The database is read with python's sqlite3 in read-only mode after waiting for
nxdns_querylog_written_total, never through the daemon's API (test_api_routes.py does that).
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time

import dns.rcode
import pytest

from adminkit import (ACTION, PROTO, REASON, MountNS, db_path, db_query, db_scalar, logged_in,
                      qlog_rows, start_nx, udp_burst, wait_written, write_config, written)
from harness import answers, enc_listeners, make_query, merge, wait_until

BLOCKED = ["ads.example.test", "track.example.test"]


def _list_file(tmp_path, names=BLOCKED):
    p = tmp_path / "ads.txt"
    p.write_text("".join(n + "\n" for n in names))
    return str(p)


def _restart(nx):
    """Stop (exit 0) and start again on the same config."""
    assert nx.stop() == 0, nx.log()[-3000:]
    nx.start()
    nx.exit_code = None


# ------------------------------------------------------------------ decisions

def test_rows_carry_the_decision(make_upstream, make_nxdns, tmp_path):
    up = make_upstream(default_a="192.0.2.7")
    nx = start_nx(make_nxdns, [up], password=False, config={
        "cache": {"size": 1000},
        "access": {"deny": ["::1"]},
        "filter": {"sources": [{"name": "ads", "path": _list_file(tmp_path),
                                "format": "domains"}],
                   "deny": ["denied.example"]},
        "local_records": [{"name": "nas.lan", "type": "A", "value": "192.168.1.10"}],
    })
    t0 = time.time() * 1000

    r = nx.udp(make_query("ads.example.test"))
    assert r.rcode() == dns.rcode.NOERROR and answers(r) == ["0.0.0.0"]
    r = nx.udp(make_query("Fwd.Example"))
    assert answers(r) == ["192.0.2.7"]
    r = nx.udp(make_query("fwd.example"))  # second time: from the cache
    assert answers(r) == ["192.0.2.7"]
    assert len(up.queries("fwd.example")) == 1, "the second query must come from the cache"
    r = nx.tcp(make_query("nas.lan"))
    assert answers(r) == ["192.168.1.10"]
    r = nx.udp(make_query("denied.example", "AAAA"))
    r6 = nx.udp(make_query("refused.example"), v6=True)
    assert r6.rcode() == dns.rcode.REFUSED
    wait_written(nx, 6)

    rows = qlog_rows(nx)
    t1 = time.time() * 1000
    assert len(rows) == 6, rows
    by = {}
    for row in rows:
        by.setdefault(row["name"], []).append(row)
        assert t0 - 1000 <= row["ts"] <= t1 + 1000, row
        assert row["duration_us"] >= 0
    assert set(by) == {"ads.example.test", "fwd.example", "nas.lan", "denied.example",
                       "refused.example"}, rows

    (b,) = by["ads.example.test"]
    assert (b["action"], b["reason"], b["matched"], b["source"]) == \
        (ACTION["block"], REASON["blocklist_domain"], "ads.example.test", "ads"), b
    assert b["rcode"] == 0 and b["upstream"] is None and b["cached"] == 0
    assert b["client"] == "127.0.0.1" and b["proto"] == PROTO["udp"] and b["qtype"] == 1

    # two workers' rings: row order is not arrival order; the cached flag tells them apart
    f1, f2 = sorted(by["fwd.example"], key=lambda r: r["cached"])
    assert (f1["action"], f1["reason"], f1["cached"]) == (ACTION["none"], REASON["none"], 0), f1
    assert f1["upstream"] == up.addr, f"upstream used: {f1['upstream']!r}, expected {up.addr}"
    assert f1["answer"] and "192.0.2.7" in f1["answer"], f1
    assert f1["matched"] is None and f1["source"] is None
    assert f2["cached"] == 1 and f2["upstream"] is None, f2
    assert "192.0.2.7" in (f2["answer"] or ""), f2

    (loc,) = by["nas.lan"]
    assert (loc["action"], loc["reason"], loc["proto"]) == \
        (ACTION["local"], REASON["local_record"], PROTO["tcp"]), loc
    assert "192.168.1.10" in (loc["answer"] or ""), loc

    (d,) = by["denied.example"]
    assert (d["action"], d["reason"], d["qtype"]) == \
        (ACTION["block"], REASON["user_deny"], 28), d
    assert d["source"] == "denied.example" and d["matched"] == "denied.example", d

    (ref,) = by["refused.example"]
    assert ref["rcode"] == dns.rcode.REFUSED and ref["client"] == "::1", ref
    assert ref["upstream"] is None and ref["cached"] == 0
    assert not up.queries("refused.example")

    # per-minute aggregates are kept by the writer with the rows
    agg = db_scalar(nx, "SELECT SUM(queries) || '/' || SUM(blocked) || '/' || SUM(cached) || "
                        "'/' || SUM(local) FROM agg_minute")
    assert agg == "6/2/1/1", agg


def test_refused_query_is_not_counted_forwarded(make_upstream, make_nxdns):
    """An ACL-refused query never reaches an upstream: the per-minute `forwarded` counter (and
    /api/queries?status=forwarded, same definition) must not count it."""
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], password=False, config={"access": {"deny": ["::1"]}})
    assert nx.udp(make_query("refused.example"), v6=True).rcode() == dns.rcode.REFUSED
    assert nx.udp(make_query("forwarded.example")).rcode() == dns.rcode.NOERROR
    wait_written(nx, 2)
    assert not up.queries("refused.example")
    agg = db_query(nx, "SELECT SUM(queries) AS q, SUM(forwarded) AS f FROM agg_minute")[0]
    assert agg == {"q": 2, "f": 1}, \
        f"agg_minute after one forwarded and one REFUSED query: {agg} (expected forwarded 1)"


# ------------------------------------------------------------------ queue full: drop oldest

def _hold_write_lock(path, seconds: float, started: threading.Event, err: list):
    try:
        con = sqlite3.connect(str(path), timeout=5, isolation_level=None)
        con.execute("BEGIN EXCLUSIVE")
        started.set()
        time.sleep(seconds)
        con.execute("COMMIT")
        con.close()
    except Exception as e:  # reported by the test
        err.append(e)
        started.set()


@pytest.mark.nx_timeout(60)
def test_queue_full_drops_oldest_while_dns_answers(make_upstream, make_nxdns):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], password=False, config={
        "logging": {"query_log_buffer_max": 64},
        "filter": {"deny": ["*.burst.test"]},
    })
    assert nx.counter("nxdns_querylog_queue_capacity") == 64
    nx.udp(make_query("warm.example"))
    wait_written(nx, 1)

    started, err = threading.Event(), []
    holder = threading.Thread(target=_hold_write_lock, args=(db_path(nx), 3.5, started, err))
    holder.start()
    try:
        assert started.wait(5) and not err, err
        names = [f"q{i}.burst.test" for i in range(600)]
        t = time.monotonic()
        answered, worst = udp_burst(nx.port, names, window=16, timeout=15)
        took = time.monotonic() - t
        # the writer's next tick meets the lock (busy after its 50 ms busy timeout)
        busy = wait_until(lambda: nx.metrics().get("nxdns_querylog_write_errors_total",
                                                   kind="busy") >= 1, 2.0)
        m = nx.metrics()
        assert holder.is_alive(), "the lock was released before the checks: burst too slow"
    finally:
        holder.join(10)
    assert not err, err
    assert answered == len(names), f"only {answered} of {len(names)} answered while the " \
                                   f"database was locked"
    assert worst < 1.0, f"an answer took {worst:.3f}s while the writer was blocked"
    dropped = m.get("nxdns_querylog_dropped_total", reason="oldest")
    assert dropped >= len(names) - 64 - 256 - 1, \
        f"dropped_total{{reason=oldest}} = {dropped} after {len(names)} records into a queue " \
        f"of 64 with the writer locked out ({took:.2f}s burst)"
    assert busy, "a locked database is counted as write error kind busy"
    assert m.get("nxdns_querylog_queue_peak") <= 64
    assert m.get("nxdns_querylog_pushed_total") >= len(names) + 1

    # The lock is gone: the writer recovers and stores what the queue kept, which is the
    # NEWEST records (the oldest were overwritten).
    def caught_up():
        mm = nx.metrics()
        return mm.get("nxdns_querylog_written_total") + \
            mm.get("nxdns_querylog_dropped_total", reason="oldest") >= \
            mm.get("nxdns_querylog_pushed_total")
    assert wait_until(caught_up, 15), "writer did not catch up after the lock was released"
    rows = qlog_rows(nx, "WHERE name LIKE '%.burst.test'")
    assert 0 < len(rows) < len(names)
    ids = sorted(int(r["name"].split(".")[0][1:]) for r in rows)
    # the burst sent the names in reverse order (todo.pop()): the last sent is q0
    assert 0 in ids, "the newest record (q0, sent last) must survive a drop-oldest queue"
    assert nx.metrics().get("nxdns_querylog_writer_ok") == 1


# ------------------------------------------------------------------ disk full, read-only

@pytest.fixture
def mountns(tmp_path):
    ns = MountNS(tmp_path / "state", size="2m")
    if not ns.ok:
        pytest.skip(ns.why)
    yield ns
    ns.close()


@pytest.mark.nx_timeout(60)
def test_full_disk_is_counted_and_dns_keeps_answering(make_upstream, make_nxdns, mountns):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], password=False, start=False, config={
        "state_dir": str(mountns.path),
        "filter": {"deny": ["*.full.test"]},
    })
    mountns.start_daemon(nx)
    nx.udp(make_query("before.full.test"))
    wait_written(nx, 1)

    mountns.fill()
    assert mountns.run("df", "-k", str(mountns.path)).stdout
    names = [f"n{i}.full.test" for i in range(400)]
    answered, worst = udp_burst(nx.port, names, window=16, timeout=15)
    assert answered == len(names) and worst < 1.0, (answered, worst)
    # a record is written per batch: fill the WAL until SQLite hits ENOSPC
    ok = wait_until(lambda: nx.metrics().get("nxdns_querylog_write_errors_total",
                                             kind="full") >= 1, 10)
    m = nx.metrics()
    assert ok, "no write error of kind full on a full disk: " + \
        str({k: m.get("nxdns_querylog_write_errors_total", kind=k)
             for k in ("full", "readonly", "busy", "ioerr", "cantopen", "other")})
    r = nx.udp(make_query("during.full.test"))
    assert r.rcode() == dns.rcode.NOERROR

    # Space again: the writer's retries (backoff) store new records.
    mountns.run("rm", "-f", f"{mountns.path}/filler")
    nx.udp(make_query("after.full.test"))
    assert wait_until(lambda: qlog_rows(nx, "WHERE name = 'after.full.test'"), 15), \
        "the writer did not recover after space was freed"
    assert nx.metrics().get("nxdns_querylog_writer_ok") == 1
    assert "query-log write failed (full" in nx.log()


@pytest.mark.nx_timeout(60)
def test_read_only_database_does_not_stop_dns(make_upstream, make_nxdns, mountns):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], password=False, start=False, config={
        "state_dir": str(mountns.path),
        "filter": {"deny": ["*.ro.test"]},
    })
    mountns.start_daemon(nx)
    nx.udp(make_query("first.ro.test"))
    wait_written(nx, 1)
    assert nx.stop() == 0

    # The database exists; the file system under it is now read-only (for root too).
    mountns.run("mount", "-o", "remount,ro", str(mountns.path))
    mountns.start_daemon(nx)
    names = [f"r{i}.ro.test" for i in range(50)]
    answered, worst = udp_burst(nx.port, names, window=8)
    assert answered == len(names) and worst < 1.0, (answered, worst)
    r = nx.udp(make_query("forwarded.example"))
    assert answers(r) == ["192.0.2.1"]

    kinds = ("readonly", "cantopen", "ioerr", "other", "full", "busy")

    def errors():
        m = nx.metrics()
        return {k: m.get("nxdns_querylog_write_errors_total", kind=k) for k in kinds}
    assert wait_until(lambda: sum(errors().values()) >= 1, 10), errors()
    e = errors()
    assert e["readonly"] + e["cantopen"] + e["ioerr"] >= 1, e
    m = nx.metrics()
    assert m.get("nxdns_querylog_writer_ok") == 0 and m.get("nxdns_querylog_written_total") == 0

    # Writable again: the writer reopens and stores the queued records.
    mountns.run("mount", "-o", "remount,rw", str(mountns.path))
    wait_written(nx, len(names) + 1, timeout=20)
    got = {r["name"] for r in qlog_rows(nx)}
    assert set(names) <= got and "forwarded.example" in got
    assert nx.metrics().get("nxdns_querylog_writer_ok") == 1


# ------------------------------------------------------------------ retention

def _insert_rows(path, rows):
    con = sqlite3.connect(str(path), timeout=5)
    with con:
        con.executemany(
            "INSERT INTO queries(ts, duration_us, client, proto, qtype, rcode, action, reason,"
            " cached, upstream, name, matched, source, answer)"
            " VALUES (?, 100, '192.0.2.9', 0, 1, 0, 0, 0, 0, NULL, ?, NULL, NULL, NULL)", rows)
        con.executemany("INSERT OR REPLACE INTO agg_minute(minute, queries, blocked, cached,"
                        " forwarded, local) VALUES (?, 1, 0, 0, 1, 0)",
                        [(ts // 60000,) for ts, _ in rows])
    con.close()


@pytest.mark.nx_timeout(60)
def test_retention_deletes_old_rows_at_start_and_on_reload(make_upstream, make_nxdns):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], password=False,
                  config={"logging": {"retention_days": 0}})
    nx.udp(make_query("fresh.example"))
    wait_written(nx, 1)
    now = int(time.time() * 1000)
    day = 86400 * 1000
    # 2500 rows older than a day: more than one retention statement (1000 rows each)
    old = [(now - 2 * day - i * 1000, f"old{i}.example") for i in range(2500)]
    recent = [(now - day // 2, "recent.example")]
    _insert_rows(db_path(nx), old + recent)

    # retention_days 0 keeps everything, even across a restart
    _restart(nx)
    time.sleep(0.5)
    assert db_scalar(nx, "SELECT COUNT(*) FROM queries") == 2502
    assert nx.counter("nxdns_querylog_retention_deleted_total") == 0

    # retention_days 1 by reload: the job runs at once (it is scheduled every 10 minutes)
    cfg = dict(nx.config)
    cfg["logging"] = dict(cfg.get("logging", {}), retention_days=1)
    write_config(nx, cfg)
    nx.send_signal(signal.SIGHUP)
    assert wait_until(lambda: nx.counter("nxdns_querylog_retention_deleted_total") >= 2500, 10), \
        f"retention deleted {nx.counter('nxdns_querylog_retention_deleted_total')} rows"
    names = {r["name"] for r in qlog_rows(nx)}
    assert names == {"fresh.example", "recent.example"}, sorted(names)[:10]
    assert db_scalar(nx, "SELECT COUNT(*) FROM agg_minute WHERE minute < ?",
                     ((now - day) // 60000,)) == 0

    # and at start: old rows written while it was stopped are gone once it runs again
    assert nx.stop() == 0
    _insert_rows(db_path(nx), [(now - 3 * day, "older.example")])
    nx.start()
    nx.exit_code = None
    assert wait_until(lambda: not qlog_rows(nx, "WHERE name = 'older.example'"), 10)
    assert {r["name"] for r in qlog_rows(nx)} == {"fresh.example", "recent.example"}


# ------------------------------------------------------------------ privacy

@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_privacy_levels(make_upstream, make_nxdns, tmp_path, level):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], password=False, config={
        "logging": {"privacy": level},
        "filter": {"sources": [{"name": "ads", "path": _list_file(tmp_path),
                                "format": "domains"}]},
    })
    nx.udp(make_query("secret-name.example"))
    nx.udp(make_query("ads.example.test"))
    wait_written(nx, 2)
    rows = qlog_rows(nx)
    aggs = db_scalar(nx, "SELECT COALESCE(SUM(queries), 0) FROM agg_minute")
    assert aggs == 2, "per-minute counters are kept at every privacy level"
    keys = {r["kind"]: r["n"] for r in
            db_query(nx, "SELECT kind, COUNT(*) AS n FROM agg_top GROUP BY kind")}
    if level == 3:
        assert rows == [], "privacy 3 keeps no per-query rows"
        assert not keys, f"privacy 3 keeps no name/client aggregates: {keys}"
        return
    assert len(rows) == 2
    text = repr(rows)
    # agg_top kinds: 0 names, 1 blocked names, 2 clients
    want_kinds = {0: {0, 1, 2}, 1: {2}, 2: set()}[level]
    assert set(keys) == want_kinds, f"privacy {level}: aggregate kinds {keys}"
    if level == 0:
        assert {r["name"] for r in rows} == {"secret-name.example", "ads.example.test"}
        assert {r["client"] for r in rows} == {"127.0.0.1"}
        return
    assert "secret-name" not in text and "ads.example.test" not in text, text
    assert "192.0.2.1" not in text, "answers name addresses: hidden too"
    assert {r["name"] for r in rows} == {"hidden"}
    blocked = [r for r in rows if r["action"] == ACTION["block"]]
    assert len(blocked) == 1 and blocked[0]["source"] == "ads", blocked
    assert blocked[0]["reason"] == REASON["blocklist_domain"]
    if level == 1:
        assert {r["client"] for r in rows} == {"127.0.0.1"}
    else:
        assert {r["client"] for r in rows} == {"hidden"}, rows


# ------------------------------------------------------------------ protocols in the statistics

def test_summary_counts_queries_by_protocol(make_upstream, make_nxdns):
    """Each transport's queries land in /api/stats/summary's "protocols" (the per-minute
    aggregates), exactly, over the same span as "queries"."""
    up = make_upstream(default_a="192.0.2.7")
    nx = start_nx(make_nxdns, [up], config=merge(enc_listeners(), {"cache": {"size": 1000}}))
    want = {"udp": 5, "tcp": 3, "dot": 2, "doh": 4}
    for i in range(want["udp"]):
        assert answers(nx.udp(make_query(f"u{i}.example"))) == ["192.0.2.7"]
    for i in range(want["tcp"]):
        assert answers(nx.tcp(make_query(f"t{i}.example"))) == ["192.0.2.7"]
    for i in range(want["dot"]):
        assert answers(nx.dot(make_query(f"d{i}.example"))) == ["192.0.2.7"]
    for i in range(want["doh"]):
        assert answers(nx.doh(make_query(f"h{i}.example"), post=i % 2 == 0)) == ["192.0.2.7"]
    total = sum(want.values())
    wait_written(nx, total)

    api = logged_in(nx)
    # the writer upserts the aggregates at most once a second: poll until they hold them all
    s = wait_until(lambda: (lambda x: x if x["queries"] >= total else None)(
        api.ok("GET", "/api/stats/summary")), 8.0)
    assert s is not None, api.ok("GET", "/api/stats/summary")
    assert s["queries"] == total, s
    assert s["protocols"] == want, s
    # the same span as the other figures: a window before the queries holds none of them
    old = api.ok("GET", f"/api/stats/summary?from={s['from'] - 3600_000}&to={s['from']}")
    assert (old["queries"], old["protocols"]) == (0, dict.fromkeys(want, 0)), old
    # history: the buckets add up to the summary
    h = api.ok("GET", f"/api/stats/history?from={s['from']}&to={s['to'] + 60_000}&step=3600")
    sums = dict.fromkeys(want, 0)
    for p in h["points"]:
        for k in want:
            sums[k] += p["protocols"][k]
    assert sums == want, h


# ------------------------------------------------------------------ batched commits, kill -9

def _names_in_db(nx, prefix):
    return {r["name"] for r in qlog_rows(nx, "WHERE name LIKE ?", (prefix + "%",))}


def test_querylog_batching_kill9_loses_only_the_held_window(make_upstream, make_nxdns):
    """logging.commit_interval (default 60 s): records wait in the writer's memory and reach
    the database in one transaction a minute, or when the API reads the log. A kill -9 loses
    the records held (those of the last interval), never the database's integrity nor a
    committed record; the next start logs again."""
    up = make_upstream(default_a="192.0.2.9")
    nx = start_nx(make_nxdns, [up], config={"logging": {"commit_interval": 60}})
    api = logged_in(nx)
    first = [f"c{i}.kill9.test" for i in range(20)]
    for n in first:
        assert answers(nx.udp(make_query(n))) == ["192.0.2.9"]
    assert wait_until(lambda: nx.counter("nxdns_querylog_pushed_total") >= len(first), 5)
    # held: drained, not committed (the interval is a minute; this runs in seconds)
    assert written(nx) == 0
    assert not _names_in_db(nx, "c")
    # the API's read commits what is held and shows it
    r = api.get("/api/queries?limit=100&name=kill9")
    assert r.status == 200, r
    assert {it["name"] for it in r.json["items"]} == set(first)
    assert _names_in_db(nx, "c") == set(first)
    assert written(nx) == len(first)
    # the next ones are held again: a kill -9 now loses them (sent within the window)
    held = [f"h{i}.kill9.test" for i in range(20)]
    t_held = time.time()
    for n in held:
        assert answers(nx.udp(make_query(n))) == ["192.0.2.9"]
    assert wait_until(lambda: nx.counter("nxdns_querylog_pushed_total") >= len(first) + len(held),
                      5)
    t_kill = time.time()
    nx.stop(sig=signal.SIGKILL)
    assert t_kill - t_held < 60, "the held records must still be inside the interval"
    db = sqlite3.connect(f"file:{db_path(nx)}?mode=ro", uri=True)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        names = {r[0] for r in db.execute("SELECT name FROM queries WHERE name LIKE '%kill9%'")}
    finally:
        db.close()
    # every committed record survived; what was lost is exactly what the window held (no
    # interval passed and nothing read the log since they were sent: none was committed)
    assert set(first) <= names
    assert not names & set(held)
    nx.start()
    nx.exit_code = None
    api = logged_in(nx)
    assert answers(nx.udp(make_query("after.kill9.test"))) == ["192.0.2.9"]
    assert wait_until(lambda: nx.counter("nxdns_querylog_pushed_total") >= 1, 5)
    r = api.get("/api/queries?limit=100&name=after.kill9")
    assert [it["name"] for it in r.json["items"]] == ["after.kill9.test"]


def test_querylog_batching_interval_commits_without_a_reader(make_upstream, make_nxdns):
    """With a short interval the records are committed by the interval alone: none are
    visible before the first drain-and-hold, all after one interval, in one transaction."""
    up = make_upstream(default_a="192.0.2.9")
    nx = start_nx(make_nxdns, [up], password=False, config={"logging": {"commit_interval": 1}})
    names = [f"i{i}.interval.test" for i in range(30)]
    for n in names:
        nx.udp(make_query(n))
    wait_written(nx, len(names))
    assert _names_in_db(nx, "i") == set(names)
    assert nx.counter("nxdns_querylog_batches_total") <= 3
