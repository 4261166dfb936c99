"""/metrics before and after a scripted load (issue 4): the whole exposition passes the strict
parser (scripts/promparse.py: TYPE and HELP for every family, no duplicate series), counters
rise by exactly the load's amounts, every peak gauge rises, the thread count is workers + 2
and every memory-ledger owner is present."""

from __future__ import annotations

import re
import sys
import time

import dns.message
import dns.rcode
import pytest

from fakeupstream import Rule
from filterkit import sanitized_binary, start_nx
from harness import (REPO, answers, make_query, parallel, tcp_connect, tcp_frame, tcp_read_msg)

sys.path.insert(0, str(REPO / "scripts"))
import promparse  # noqa: E402

WORKERS = 2
N_SLOW_UDP = 6
N_TCP_CONNS = 6
SLOW_MS = 700


def ledger_owners() -> list:
    text = (REPO / "src" / "base" / "ledger.h").read_text()
    return re.findall(r"^\s*X\((\w+),", text, re.M)


def scrape(nx):
    code, body = nx.http_get("/metrics")
    assert code == 200
    fams = promparse.parse(body)  # raises on any violation
    return fams


def v(fams, name, **labels):
    got = promparse.value(fams, name, **labels)
    assert got is not None, f"{name}{labels} missing from /metrics"
    return got


def d(before, after, name, **labels):
    return v(after, name, **labels) - v(before, name, **labels)


@pytest.mark.nx_timeout(60)
def test_metrics_before_and_after_load(make_upstream, make_nxdns, tmp_path):
    lst = tmp_path / "block.txt"
    lst.write_text("".join(f"0.0.0.0 b{i}.block.test\n" for i in range(50))
                   + "||wild.test^\n")
    up = make_upstream()
    for i in range(N_SLOW_UDP + N_TCP_CONNS):
        up.script[f"slow{i}.example"] = Rule(records=[("A", "192.0.2.9")], delay_ms=SLOW_MS)
    nx = start_nx(make_nxdns, [up], {
        "listener": {"workers": WORKERS},
        "filter": {"sources": [{"name": "lst", "path": str(lst)}],
                   "deny": ["*.denied.test"]},
        "upstream": {"timeout_ms": 3000},
    })
    before = scrape(nx)
    peaks = ["nxdns_dns_in_flight_peak", "nxdns_tcp_server_connections_peak",
             "nxdns_query_permits_in_use_peak", "nxdns_querylog_queue_peak"]
    peak0 = {p: v(before, p) for p in peaks}

    # ---- the load: 300 queries with known outcomes
    plan = []  # (name, proto, outcome)
    for i in range(40):
        plan.append((f"b{i}.block.test", "udp", "blocklist_domain"))
    for i in range(30):
        plan.append((f"x{i}.wild.test", "udp", "blocklist_wildcard"))
    for i in range(20):
        plan.append((f"u{i}.denied.test", "udp", "user_deny"))
    for i in range(110 - N_SLOW_UDP):
        plan.append((f"fwd{i}.example", "udp", "forwarded"))
    for i in range(10):
        plan.append((f"b{40 + i}.block.test", "tcp", "blocklist_domain"))
    for i in range(90 - N_TCP_CONNS):
        plan.append((f"tfwd{i}.example", "tcp", "forwarded"))
    for name, proto, outcome in plan:
        r = getattr(nx, proto)(make_query(name, edns=0))
        assert r.rcode() == dns.rcode.NOERROR
        want = ["0.0.0.0"] if outcome != "forwarded" else ["192.0.2.1"]
        assert answers(r) == want, (name, proto, answers(r))

    # Slow UDP queries at once (in flight together) ...
    res = parallel([lambda i=i: nx.udp(make_query(f"slow{i}.example", edns=0), timeout=5)
                    for i in range(N_SLOW_UDP)], timeout=20)
    assert all(not isinstance(r, Exception) and answers(r) == ["192.0.2.9"] for r in res), res
    # ... and slow queries on concurrent TCP connections, scraped while they wait.
    conns = [tcp_connect(nx.port) for _ in range(N_TCP_CONNS)]
    try:
        for i, s in enumerate(conns):
            s.sendall(tcp_frame(make_query(f"slow{N_SLOW_UDP + i}.example", edns=0).to_wire()))
        time.sleep(SLOW_MS / 3000)
        during = scrape(nx)
        assert v(during, "nxdns_tcp_server_connections") == N_TCP_CONNS
        assert v(during, "nxdns_dns_in_flight") >= N_TCP_CONNS
        assert v(during, "nxdns_query_permits_in_use") >= N_TCP_CONNS
        for s in conns:
            wire = tcp_read_msg(s, timeout=5)
            assert wire is not None
            assert answers(dns.message.from_wire(wire)) == ["192.0.2.9"]
    finally:
        for s in conns:
            s.close()
    n_udp = sum(1 for p in plan if p[1] == "udp") + N_SLOW_UDP
    n_tcp = sum(1 for p in plan if p[1] == "tcp") + N_TCP_CONNS
    assert n_udp + n_tcp == 300

    # the query log drains; the TCP connections are gone
    time.sleep(0.5)
    after = scrape(nx)

    # ---- exact counters
    assert d(before, after, "nxdns_queries_total", proto="udp") == n_udp
    assert d(before, after, "nxdns_queries_total", proto="tcp") == n_tcp
    for reason in ("blocklist_domain", "blocklist_wildcard", "user_deny"):
        want = sum(1 for p in plan if p[2] == reason)
        assert d(before, after, "nxdns_blocked_total", reason=reason) == want, reason
    assert d(before, after, "nxdns_blocked_total", reason="cname") == 0
    n_blocked = sum(1 for p in plan if p[2] != "forwarded")
    assert d(before, after, "nxdns_answers_total", result="blocked") == n_blocked
    assert d(before, after, "nxdns_answers_total", result="forwarded") == 300 - n_blocked
    assert d(before, after, "nxdns_answers_total", result="servfail") == 0
    assert d(before, after, "nxdns_tcp_accepted_total") == n_tcp, \
        "dnspython opens one connection per TCP query"
    ups = promparse.value(after, "nxdns_upstream_exchanges_total", server=up.addr,
                          outcome="answer")
    assert ups is not None and ups - (promparse.value(
        before, "nxdns_upstream_exchanges_total", server=up.addr, outcome="answer") or 0) \
        == 300 - n_blocked
    assert d(before, after, "nxdns_querylog_pushed_total") == 300

    # ---- every peak gauge rose
    for p in peaks:
        assert v(after, p) > peak0[p], f"{p} did not rise: {peak0[p]} -> {v(after, p)}"
    assert v(after, "nxdns_dns_in_flight_peak") >= max(2, N_TCP_CONNS)
    assert v(after, "nxdns_tcp_server_connections_peak") >= N_TCP_CONNS
    assert v(after, "nxdns_query_permits_in_use_peak") >= N_TCP_CONNS
    assert v(after, "nxdns_querylog_queue_peak") > 0
    assert v(after, "nxdns_tcp_server_connections") == 0
    assert v(after, "nxdns_query_permits_in_use") == 0
    assert v(after, "nxdns_dns_in_flight") == 0

    # ---- process figures and the ledger
    assert v(after, "nxdns_process_threads") == WORKERS + 2 == nx.threads()
    assert v(after, "nxdns_workers") == WORKERS
    rss = v(after, "nxdns_process_vmrss_bytes")
    assert 0 < rss <= v(after, "nxdns_process_vmhwm_bytes")
    assert v(after, "nxdns_process_rssanon_bytes") + v(after, "nxdns_process_rssfile_bytes") \
        <= rss + 4096 * 64
    owners = ledger_owners()
    assert len(owners) >= 10
    for o in owners:
        b = promparse.value(after, "nxdns_memory_owner_bytes", owner=o)
        assert b is not None and b >= 0, f"ledger owner {o} missing or negative: {b}"
        assert promparse.value(after, "nxdns_memory_owner_allocations", owner=o) is not None
    got = {lab["owner"] for _, lab, _, _ in after["nxdns_memory_owner_bytes"].samples}
    assert got == set(owners), f"owners in /metrics but not in ledger.h: {got - set(owners)}"
    for o in ("worker_buffers", "config", "snapshot_map", "querylog_queue"):
        assert v(after, "nxdns_memory_owner_bytes", owner=o) > 0, o
    assert v(after, "nxdns_filter_snapshot_entries") == 51
    if not sanitized_binary():  # ASan replaces malloc: mallinfo2 reads zeros there
        assert v(after, "nxdns_heap_in_use_bytes") > 0

    # ---- families with their types
    want_types = {"nxdns_queries_total": "counter", "nxdns_dns_in_flight_peak": "gauge",
                  "nxdns_upstream_latency_seconds": "histogram",
                  "nxdns_memory_owner_bytes": "gauge", "nxdns_cache_hits_total": "counter",
                  "nxdns_filter_downloads_total": "counter"}
    for fam, t in want_types.items():
        assert after[fam].type == t, (fam, after[fam].type)
        assert after[fam].help, f"{fam} has an empty HELP"


def test_metrics_scrapes_do_not_count_as_queries(make_upstream, make_nxdns):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], {})
    a = scrape(nx)
    for _ in range(5):
        scrape(nx)
    b = scrape(nx)
    for proto in ("udp", "tcp"):
        assert d(a, b, "nxdns_queries_total", proto=proto) == 0
    code, body = nx.http_get("/healthz")
    assert code == 200
