"""PostgreSQL query-log sink (issue 17): `logging.postgresql` writes every answer as a row of
Blocky's `log_entries` (plus nxdns's columns) into a real PostgreSQL 15, started here in a
temporary directory as `nobody` (initdb refuses root) on a unix socket in that directory and a
random loopback port, and stopped by its PID. One server per module; each test has its own
database.

Checked: the rows and their columns in Blocky's vocabulary; libpq mapped only with the sink
on; the schema created, migrated from version 1 and an old day partition dropped; a foreign
`log_entries` refused with DNS serving; the database stopped and restarted mid-load (every DNS
answer served, every record either written or counted as dropped, the queue's memory
unchanged); and every SQL query of the committed Grafana dashboard against a known load of
two instances."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List

import pytest

from adminkit import udp_burst
from harness import answers, closed_port, free_port, make_query, wait_until

PG_BIN = Path(os.environ.get("NX_PG_BIN", "/usr/lib/postgresql/15/bin"))
LIBPQ = [p for p in ("/usr/lib/x86_64-linux-gnu/libpq.so.5", "/usr/lib/aarch64-linux-gnu/libpq.so.5",
                     "/usr/lib/libpq.so.5") if os.path.exists(p)]
# initdb refuses root: as root the cluster runs as nobody; as anyone else, as that user
AS_ROOT = os.geteuid() == 0
NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"] if AS_ROOT else []
REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "dist" / "grafana" / "nxdns-postgresql.json"

pytestmark = pytest.mark.skipif(
    not ((PG_BIN / "initdb").exists() and (PG_BIN / "postgres").exists() and LIBPQ
         and (shutil.which("setpriv") or not AS_ROOT)),
    reason=f"PostgreSQL 15 ({PG_BIN}/initdb, postgres: Debian `postgresql`) and libpq5 are "
           "needed (scripts/bootstrap)")


class Postgres:
    """A throwaway cluster owned by nobody; psql (as superuser `nxtest`) over its unix socket."""

    def __init__(self, root: Path):
        self.root = root
        self.data = root / "data"
        self.port = free_port(v6=False, udp=False)
        self.log_path = root / "postgres.log"
        self.proc = None
        if AS_ROOT:
            os.chown(root, 65534, 65534)
        subprocess.run(NOBODY + [str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "nxtest",
                                 "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)

    def start(self):
        self.logf = open(self.log_path, "ab")
        # fsync off: a test cluster; a few connections and little memory
        self.proc = subprocess.Popen(
            NOBODY + [str(PG_BIN / "postgres"), "-D", str(self.data), "-k", str(self.root),
                      "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
                      "-c", "fsync=off", "-c", "full_page_writes=off",
                      "-c", "shared_buffers=16MB", "-c", "max_connections=20"],
            stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf)
        assert wait_until(self.ready, 15.0, 0.1), self.log()

    def ready(self) -> bool:
        r = subprocess.run([str(PG_BIN / "pg_isready"), "-h", str(self.root), "-p",
                            str(self.port), "-U", "nxtest", "-d", "postgres"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return r.returncode == 0

    def stop(self):
        """Fast shutdown (SIGINT to the postmaster's PID): sessions are cut, as when the
        database host goes away."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=30)
        self.proc = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def psql(self, sql: str, db: str = "postgres") -> List[List[str]]:
        r = subprocess.run([str(PG_BIN / "psql"), "-h", str(self.root), "-p", str(self.port),
                            "-U", "nxtest", "-d", db, "-X", "-q", "-At", "-F", "\t",
                            "-v", "ON_ERROR_STOP=1", "-c", sql],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"psql failed: {r.stderr}\n{sql}"
        return [line.split("\t") for line in r.stdout.splitlines()]

    def scalar(self, sql: str, db: str) -> str:
        rows = self.psql(sql, db)
        return rows[0][0] if rows else ""

    def createdb(self, name: str) -> str:
        self.psql(f"CREATE DATABASE {name}")
        return name

    def dsn(self, db: str) -> str:
        return f"host=127.0.0.1 port={self.port} user=nxtest dbname={db}"


@pytest.fixture(scope="module")
def pg():
    root = Path(tempfile.mkdtemp(prefix="nx-pg-"))
    srv = Postgres(root)
    srv.start()
    yield srv
    srv.stop()
    shutil.rmtree(root, ignore_errors=True)


def sink(pg: Postgres, db: str, **kw) -> dict:
    conf = {"dsn": pg.dsn(db), "flush_interval_ms": 50}
    conf.update(kw)
    return {"logging": {"postgresql": conf}}


def merge_cfg(*parts) -> dict:
    out: dict = {}
    for p in parts:
        for k, v in p.items():
            if isinstance(v, dict) and isinstance(out.get(k), dict):
                out[k] = merge_cfg(out[k], v)
            else:
                out[k] = v
    return out


def rows_count(pg: Postgres, db: str) -> int:
    try:
        return int(pg.scalar("SELECT count(*) FROM log_entries", db))
    except AssertionError:
        return -1  # not created yet


def mapped_libs(pid: int) -> set:
    with open(f"/proc/{pid}/maps") as f:
        return {os.path.basename(line.split()[-1]) for line in f if ".so" in line}


def ldd(path) -> set:
    """The files (as /proc/PID/maps names them) of the libraries `path` loads."""
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, timeout=10).stdout
    return {os.path.basename(os.path.realpath(line.split()[2])) for line in out.splitlines()
            if " => /" in line}


def libpq_only() -> set:
    """libpq and the libraries only it brings (those the nxdns binary does not link)."""
    from harness import nxdns_bin
    return {os.path.basename(os.path.realpath(LIBPQ[0]))} | (ldd(LIBPQ[0]) - ldd(nxdns_bin()))


def dropped(nx) -> float:
    return nx.metrics().sum("nxdns_pgsink_dropped_total")


def test_rows_arrive_with_blocky_columns(pg, make_upstream, make_nxdns):
    db = pg.createdb("rows")
    up = make_upstream()
    plain = make_nxdns([up], config={"listener": {"workers": 2}})
    only = libpq_only()
    assert not only & mapped_libs(plain.pid), "libpq's libraries mapped without the sink"
    base_threads = plain.threads()  # control + 2 workers + query-log writer (TSan adds its own)

    nx = make_nxdns([up], config=merge_cfg(
        {"listener": {"workers": 2}, "cache": {"size": 1000},
         "filter": {"deny": ["blocked.example"]}},
        sink(pg, db, hostname="nx-a")))
    assert only <= mapped_libs(nx.pid), f"{only - mapped_libs(nx.pid)} not mapped with the sink"
    assert nx.threads() == base_threads + 1, "the sink adds exactly one thread"

    assert answers(nx.udp(make_query("a.example"))) == ["192.0.2.1"]
    assert answers(nx.udp(make_query("a.example"))) == ["192.0.2.1"]  # cached
    # an exact user rule: a subdomain is not blocked
    assert answers(nx.tcp(make_query("www.blocked.example"))) == ["192.0.2.1"]
    r = nx.udp(make_query("blocked.example"))
    assert answers(r) == ["0.0.0.0"]
    assert nx.wait_counter("nxdns_pgsink_sent_total", 4, timeout=10) == 4, nx.log()

    assert pg.scalar("SELECT version FROM nxdns_schema_version", db) == "2"
    cols = ("client_ip, client_name, reason, response_type, question_type, question_name, "
            "effective_tldp, answer, response_code, hostname, matched_rule, source_list, "
            "protocol, nxdns_reason, duration_ms >= 0, "
            "abs(extract(epoch from now() - request_ts)) < 120, tableoid::regclass::text")
    got = pg.psql(f"SELECT {cols} FROM log_entries ORDER BY request_ts", db)
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d")
    for row in got:
        assert row[0] == "127.0.0.1" and row[1] == "127.0.0.1", row
        assert row[4] == "A" and row[9] == "nx-a" and row[14] == "t" and row[15] == "t", row
        assert row[16] == f"log_entries_p{today}", "a row outside today's partition"
    by_name = {}
    for row in got:
        by_name.setdefault(row[5], []).append(row)
    first, second = by_name["a.example"]
    assert first[2].startswith("RESOLVED (") and first[3] == "RESOLVED", first
    assert first[7] == "A (192.0.2.1)" and first[8] == "NOERROR" and first[12] == "udp", first
    assert first[6] == "a.example"
    assert second[2] == "CACHED" and second[3] == "CACHED", second
    (sub,) = by_name["www.blocked.example"]
    assert sub[3] == "RESOLVED" and sub[12] == "tcp" and sub[6] == "blocked.example", sub
    (blk,) = by_name["blocked.example"]
    assert blk[2] == "BLOCKED (blocked.example)" and blk[3] == "BLOCKED", blk
    assert blk[7] == "A (0.0.0.0)" and blk[10] == "blocked.example", blk
    assert blk[11] == "blocked.example" and blk[13] == "user_deny", blk
    # the upstream column names the server that answered
    ups = pg.psql("SELECT DISTINCT upstream FROM log_entries WHERE response_type = 'RESOLVED'", db)
    assert ups == [[up.addr]] or ups[0][0].endswith(up.addr.rsplit(":", 1)[1]), ups
    # partitions: yesterday .. two days ahead, and the default one
    parts = {r[0] for r in pg.psql(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'log_entries'::regclass", db)}
    assert f"log_entries_p{today}" in parts and "log_entries_default" in parts and len(parts) == 5
    assert nx.metrics().get("nxdns_memory_owner_bytes", owner="pgsink_queue") > 4096 * 744


V1 = """
CREATE TABLE nxdns_schema_version (version integer NOT NULL);
INSERT INTO nxdns_schema_version VALUES (1);
CREATE TABLE log_entries (request_ts timestamptz NOT NULL, client_ip text, client_name text,
  duration_ms bigint, reason text, response_type text, question_type text, question_name text,
  effective_tldp text, answer text, response_code text, hostname text)
  PARTITION BY RANGE (request_ts);
CREATE INDEX idx_log_entries_request_ts ON log_entries (request_ts);
CREATE INDEX idx_log_entries_client_name ON log_entries (client_name);
CREATE INDEX idx_log_entries_response_type ON log_entries (response_type);
CREATE TABLE log_entries_default PARTITION OF log_entries DEFAULT;
CREATE TABLE log_entries_p20200101 PARTITION OF log_entries
  FOR VALUES FROM ('2020-01-01 00:00:00+00') TO ('2020-01-02 00:00:00+00');
INSERT INTO log_entries (request_ts, question_name, response_type, hostname)
  VALUES ('2020-01-01 12:00:00+00', 'old.example', 'RESOLVED', 'old');
INSERT INTO log_entries (request_ts, question_name, response_type, hostname)
  VALUES (now() - interval '1 hour', 'kept.example', 'RESOLVED', 'old');
"""


def test_schema_migrated_and_old_days_dropped(pg, make_upstream, make_nxdns):
    """A version-1 database (Blocky's columns only) with a day of 2020: nxdns migrates it to
    version 2 (its own columns added, the rows kept) and retention drops the 2020 partition."""
    db = pg.createdb("migrate")
    pg.psql(V1, db)
    nx = make_nxdns([make_upstream()], config=sink(pg, db, retention_days=7, hostname="nx-m"))
    assert answers(nx.udp(make_query("new.example"))) == ["192.0.2.1"]
    nx.wait_counter("nxdns_pgsink_sent_total", 1, timeout=10)
    assert pg.scalar("SELECT version FROM nxdns_schema_version", db) == "2"
    assert pg.scalar("SELECT count(*) FROM nxdns_schema_version", db) == "1"
    got = pg.psql("SELECT question_name, hostname, protocol FROM log_entries ORDER BY request_ts", db)
    assert got == [["kept.example", "old", ""], ["new.example", "nx-m", "udp"]], got
    assert pg.scalar("SELECT to_regclass('log_entries_p20200101') IS NULL", db) == "t"
    assert "retention: dropped 1 day partition" in nx.log()


def test_foreign_log_entries_refused_dns_serves(pg, make_upstream, make_nxdns):
    db = pg.createdb("foreign_table")
    pg.psql("CREATE TABLE log_entries (id bigserial primary key, request_ts timestamptz)", db)
    nx = make_nxdns([make_upstream()], config=sink(pg, db))
    assert answers(nx.udp(make_query("a.example"))) == ["192.0.2.1"]
    assert wait_until(lambda: "nxdns did not make" in nx.log(), 10.0), nx.log()
    assert nx.counter("nxdns_pgsink_errors_total") >= 1
    assert nx.counter("nxdns_pgsink_sent_total") == 0
    assert pg.scalar("SELECT count(*) FROM log_entries", db) == "0"


def test_database_restart_mid_load(pg, make_upstream, make_nxdns):
    """The database stops under load and comes back: every DNS query is answered, every
    record is either in the table or counted as dropped (the queue of 256 holds the newest),
    reconnects are counted, and the queue's memory is what it was."""
    db = pg.createdb("restart")
    nx = make_nxdns([make_upstream()], config=merge_cfg(
        {"listener": {"workers": 2}}, sink(pg, db, queue_size=256, batch_size=100)))
    mem0 = nx.metrics().get("nxdns_memory_owner_bytes", owner="pgsink_queue")
    total = 0

    def burst(prefix: str, n: int):
        nonlocal total
        names = [f"{prefix}{i}.load.example" for i in range(n)]
        answered, _ = udp_burst(nx.port, names, window=16)
        assert answered == n, f"{n - answered} of {n} DNS queries unanswered"
        total += n

    burst("a", 100)  # fits the queue: all written
    assert nx.wait_counter("nxdns_pgsink_sent_total", 100, timeout=10) == 100
    pg.stop()
    try:
        burst("b", 1000)
        assert nx.wait_counter("nxdns_pgsink_reconnects_total", 1, timeout=10) >= 1
    finally:
        pg.start()
    assert wait_until(lambda: nx.log().count("pgsink: connected") == 2, 15.0, 0.1), nx.log()
    burst("c", 100)

    def settled():
        m = nx.metrics()
        return m.get("nxdns_pgsink_sent_total") + m.sum("nxdns_pgsink_dropped_total") >= total
    assert wait_until(settled, 20.0, 0.2), nx.log()[-3000:]
    m = nx.metrics()
    sent = m.get("nxdns_pgsink_sent_total")
    drops = m.sum("nxdns_pgsink_dropped_total")
    assert sent + drops == total
    assert rows_count(pg, db) == sent, "rows and nxdns_pgsink_sent_total disagree"
    # bounded: at most the outage's records beyond the queue are lost, all of them counted
    assert drops <= 1000 and m.get("nxdns_pgsink_dropped_total", reason="queue_full") == drops
    # the newest of the outage were kept (at least one worker's ring of 128)
    assert sent >= 100 + 100 + 128, "the newest records of the outage were not kept"
    assert int(pg.scalar("SELECT count(*) FROM log_entries WHERE question_name LIKE 'c%'", db)) == 100
    assert m.get("nxdns_memory_owner_bytes", owner="pgsink_queue") == mem0


def grafana_sql(sql: str, t_from: str, t_to: str, hosts: List[str]) -> str:
    """The Grafana PostgreSQL macros the dashboard uses, expanded as Grafana expands them:
    $__timeFilter(c) -> c BETWEEN from AND to; $__timeGroupAlias(c, $__interval) ->
    floor(extract(epoch from c)/60)*60 AS "time" (a 1-minute interval); $hostname (multi-value,
    All) -> the quoted instances joined by commas."""
    out = re.sub(r"\$__timeFilter\((\w+)\)", rf"\1 BETWEEN '{t_from}' AND '{t_to}'", sql)
    out = re.sub(r"\$__timeGroupAlias\((\w+),\s*\$__interval\)",
                 r'floor(extract(epoch from \1)/60)*60 AS "time"', out)
    out = out.replace("$hostname", ",".join(f"'{h}'" for h in hosts))
    assert "$" not in out, f"a macro the test does not expand: {out}"
    return out


def test_grafana_dashboard_queries(pg, make_upstream, make_nxdns):
    """Two instances write into one database; every SQL query of the committed dashboard
    runs against it and returns the counts of the known load."""
    db = pg.createdb("grafana")
    up = make_upstream()
    base = {"filter": {"deny": ["ads.example", "track.example"]}, "cache": {"size": 0}}
    a = make_nxdns([up], config=merge_cfg(base, sink(pg, db, hostname="nx-a")))
    b = make_nxdns([up], config=merge_cfg(base, sink(pg, db, hostname="nx-b")))
    # nx-a: 6 allowed (4 UDP, 2 TCP), 4 blocked (ads x3, track x1); nx-b: 3 allowed, 1 blocked
    for i in range(4):
        a.udp(make_query(f"ok{i}.example"))
    a.tcp(make_query("ok0.example"))
    a.tcp(make_query("ok1.example"))
    for name in ("ads.example", "ads.example", "ads.example", "track.example"):
        a.udp(make_query(name))
    for i in range(3):
        b.udp(make_query(f"ok{i}.example"))
    b.tcp(make_query("ads.example"))
    assert a.wait_counter("nxdns_pgsink_sent_total", 10, timeout=10) == 10
    assert b.wait_counter("nxdns_pgsink_sent_total", 4, timeout=10) == 4

    dash = json.loads(DASHBOARD.read_text())
    now = datetime.datetime.now(datetime.timezone.utc)
    t_from = (now - datetime.timedelta(hours=1)).isoformat()
    t_to = (now + datetime.timedelta(minutes=5)).isoformat()

    var = dash["templating"]["list"][0]
    assert var["name"] == "hostname"
    hosts = [r[0] for r in pg.psql(grafana_sql(var["query"], t_from, t_to, []), db)]
    assert hosts == ["nx-a", "nx-b"]

    queries = {p["title"]: p["targets"][0]["rawSql"] for p in dash["panels"]}
    assert len(queries) == len(dash["panels"]) >= 8

    def run(title, hs=("nx-a", "nx-b")):
        return pg.psql(grafana_sql(queries[title], t_from, t_to, list(hs)), db)

    assert run("Queries") == [["14"]]
    assert run("Queries", ["nx-b"]) == [["4"]]
    assert run("Blocked %") == [["35.71"]]  # 5 of 14
    assert run("Blocked % by instance") == [["nx-a", "10", "4", "40.00"],
                                            ["nx-b", "4", "1", "25.00"]]
    over = run("Queries over time by instance")
    assert {r[1] for r in over} == {"nx-a", "nx-b"} and sum(int(r[2]) for r in over) == 14
    assert all(float(r[0]) % 60 == 0 for r in over)
    blocked_over = run("Blocked over time by instance")
    assert sum(int(r[2]) for r in blocked_over) == 5
    assert run("Top blocked domains") == [["ads.example", "4"], ["track.example", "1"]]
    assert run("Top blocked domains", ["nx-b"]) == [["ads.example", "1"]]
    assert run("Top clients") == [["127.0.0.1", "14"]]
    assert run("Response types") == [["RESOLVED", "9"], ["BLOCKED", "5"]]
    assert run("By protocol") == [["udp", "11"], ["tcp", "3"]]
    top = run("Top queried domains")
    assert top[0] == ["ads.example", "4"] and sum(int(r[1]) for r in top) == 14
    for title in queries:
        run(title)  # every panel's query runs
    # Blocky's own dashboard names the list from `reason` ("BLOCKED (list)") and groups by
    # effective_tldp: the same expressions over nxdns's rows
    assert pg.psql("SELECT split_part(split_part(reason, '(', -1), ')', 1), count(*) "
                   "FROM log_entries WHERE response_type = 'BLOCKED' GROUP BY 1 ORDER BY 1",
                   db) == [["ads.example", "4"], ["track.example", "1"]]
    assert pg.psql("SELECT effective_tldp, count(*) FROM log_entries GROUP BY 1 ORDER BY 2 DESC, 1 "
                   "LIMIT 2", db) == [["ads.example", "4"], ["ok0.example", "3"]]


def test_check_config_names_a_bad_dsn(tmp_path):
    from harness import nxdns_bin
    cases = {
        "logging: {postgresql: {dsn: nonsense}}\n":
            "c.yaml:1:29: logging.postgresql.dsn: 'nonsense' is not a libpq connection string",
        "logging: {postgresql: {dsn: 'host=db', batch_size: 0}}\n": "logging.postgresql.batch_size",
        "logging: {postgresql: {dsn: 'postgresql://u@db/x', queue_size: 10}}\n":
            "logging.postgresql.queue_size",
    }
    for text, want in cases.items():
        p = tmp_path / "c.yaml"
        p.write_text(text)
        r = subprocess.run([str(nxdns_bin()), "check-config", str(p)], capture_output=True,
                           text=True, timeout=10)
        assert r.returncode != 0 and want in r.stderr + r.stdout, (text, r.stderr, r.stdout)
    p.write_text("logging: {postgresql: {dsn: 'postgresql://u@db/x', hostname: Resolver-1}}\n")
    r = subprocess.run([str(nxdns_bin()), "check-config", str(p)], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 0, r.stderr + r.stdout
