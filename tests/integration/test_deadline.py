"""One whole-operation deadline: no reachable upstream -> SERVFAIL + EDE 22, never a hang."""

import re
import socket
import time

import dns.message
import dns.rcode
import pytest

from fakeupstream import Rule
from harness import closed_port, ede_codes, make_query, parallel, run

TIMEOUT_MS = 1000
MARGIN_S = 2.5  # generous: loaded 2-core box, sanitizer builds


@pytest.fixture
def blackhole(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["*"] = Rule(drop=True)
    nx = make_nxdns([up], config={"upstream": {"timeout_ms": TIMEOUT_MS}})
    return nx, up


@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_blackholed_upstream_servfail_with_ede22(blackhole, proto):
    nx, up = blackhole
    before = nx.metrics()
    t0 = time.monotonic()
    r = getattr(nx, proto)(make_query("deadline.example", edns=0), timeout=TIMEOUT_MS / 1000 + 5)
    elapsed = time.monotonic() - t0
    assert r.rcode() == dns.rcode.SERVFAIL
    assert 22 in ede_codes(r), f"EDE codes {ede_codes(r)}, expected 22 (No Reachable Authority)"
    assert elapsed < TIMEOUT_MS / 1000 + MARGIN_S, f"SERVFAIL after {elapsed:.2f}s"
    assert up.queries("deadline.example"), "the upstream was never asked"
    after = nx.metrics()
    assert after.get("nxdns_answers_total", result="servfail") \
        - before.get("nxdns_answers_total", result="servfail") == 1
    assert nx.wait_counter("nxdns_upstream_exchanges_total", 1, server=up.addr,
                           outcome="timeout") >= 1


def test_servfail_without_opt_for_a_client_without_edns(blackhole):
    nx, _ = blackhole
    r = nx.udp(make_query("noedns-deadline.example"), timeout=TIMEOUT_MS / 1000 + 5)
    assert r.rcode() == dns.rcode.SERVFAIL
    assert r.edns == -1, "no OPT (and so no EDE) to a client that sent none"


@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_unreachable_port_servfail_within_deadline(make_nxdns, proto):
    nx = make_nxdns([f"127.0.0.1:{closed_port()}"], config={"upstream": {"timeout_ms": TIMEOUT_MS}})
    t0 = time.monotonic()
    r = getattr(nx, proto)(make_query("closed.example", edns=0), timeout=TIMEOUT_MS / 1000 + 5)
    assert r.rcode() == dns.rcode.SERVFAIL
    assert ede_codes(r), "SERVFAIL from nxdns should say why (Extended DNS Error)"
    assert time.monotonic() - t0 < TIMEOUT_MS / 1000 + MARGIN_S


def test_two_dead_upstreams_one_deadline(make_upstream, make_nxdns):
    """Racing two dead servers does not add their timeouts: one deadline for the operation."""
    a, b = make_upstream(), make_upstream()
    a.script["*"] = b.script["*"] = Rule(drop=True)
    nx = make_nxdns([a, b], config={
        "upstream": {"timeout_ms": TIMEOUT_MS, "race": 2, "stagger_ms": 100}})
    t0 = time.monotonic()
    r = nx.udp(make_query("twodead.example", edns=0), timeout=TIMEOUT_MS / 1000 + 5)
    assert r.rcode() == dns.rcode.SERVFAIL
    assert time.monotonic() - t0 < TIMEOUT_MS / 1000 + MARGIN_S


def test_many_concurrent_queries_all_get_servfail(blackhole):
    nx, _ = blackhole
    t0 = time.monotonic()
    results = parallel([lambda i=i: nx.udp(make_query(f"c{i}.deadline.example", edns=0),
                                           timeout=TIMEOUT_MS / 1000 + 5) for i in range(20)])
    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, f"{len(errors)} of 20 queries got no answer: {errors[0]!r}"
    assert all(r.rcode() == dns.rcode.SERVFAIL for r in results)
    assert time.monotonic() - t0 < TIMEOUT_MS / 1000 + MARGIN_S + 2


def test_dig_gets_servfail_within_deadline(blackhole):
    nx, _ = blackhole
    t0 = time.monotonic()
    out = run(["dig", "@127.0.0.1", "-p", str(nx.port), "+tries=1", "+time=5", "example.com"])
    assert time.monotonic() - t0 < TIMEOUT_MS / 1000 + MARGIN_S + 1
    assert "status: SERVFAIL" in out.stdout, out.stdout + out.stderr
    assert re.search(r"EDE: 22", out.stdout), out.stdout


def test_service_recovers_after_deadlines(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["dead.example"] = Rule(drop=True)
    nx = make_nxdns([up], config={"upstream": {"timeout_ms": TIMEOUT_MS}})
    r = nx.udp(make_query("dead.example", edns=0), timeout=TIMEOUT_MS / 1000 + 5)
    assert r.rcode() == dns.rcode.SERVFAIL
    r = nx.udp(make_query("alive.example", edns=0))
    assert r.rcode() == dns.rcode.NOERROR


def test_stop_answers_queries_in_flight(make_upstream, make_nxdns):
    """SIGTERM while queries wait on a silent upstream: each client still gets its SERVFAIL
    before the sockets close (UDP answers are queued per loop turn; the stop flushes them)."""
    up = make_upstream()
    up.script["*"] = Rule(drop=True)
    nx = make_nxdns([up], config={"upstream": {"timeout_ms": 20000}})
    socks = []
    for i in range(4):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(8)
        s.sendto(make_query(f"inflight{i}.example", edns=0).to_wire(), ("127.0.0.1", nx.port))
        socks.append(s)
    for i in range(4):
        assert up.wait_for(f"inflight{i}.example"), "the upstream never got the query"
    assert nx.stop() == 0
    for s in socks:
        r = dns.message.from_wire(s.recvfrom(65535)[0])
        s.close()
        assert r.rcode() == dns.rcode.SERVFAIL
