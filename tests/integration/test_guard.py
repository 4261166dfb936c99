"""Guard (issue 14): per-client rate limiting and DNS rebinding protection, over DNS, each with
its counters.

The harness turns rate limiting off (every test client is 127.0.0.1); the tests here turn it on
with small numbers of their own. Clients other than 127.0.0.1 are other loopback addresses
(127.0.0.2, 127.1.x.y), which Linux routes to lo without configuration. Rebinding protection
is at its default (on) everywhere.
"""

from __future__ import annotations

import socket
import struct
import time

import dns.message
import dns.rcode
import dns.rdatatype
import pytest

from fakeupstream import Rule
from filterkit import ede, query_from, start_nx, wait_reloads
from harness import answers, enc_listeners, make_query, merge, wait_until

REBIND_TEXT = "rebinding protection: private addresses removed from the answer"


# Bursts of up to 40 distinct names at once: more permits than the default 32, so that no query
# is dropped for want of one (only the rate limit may drop).
PERMITS = {"query_budget": {"permits": 128}}


def rl_config(qps: int, burst: int, **more) -> dict:
    return merge(PERMITS, {"access": {"rate_limit": dict({"qps": qps, "burst": burst}, **more)}})


def udp_burst(nx, n: int, name: str = "rl.example", src: str = "127.0.0.1",
              wait: float = 1.0) -> int:
    """Send n queries (distinct names under `name`) at once from one socket, then collect replies
    for `wait` seconds; returns how many were answered."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((src, 0))
        s.settimeout(0.1)
        for i in range(n):
            q = make_query(f"q{i}.{name}", id=i + 1)  # distinct: no coalescing cap
            s.sendto(q.to_wire(), ("127.0.0.1", nx.port))
        got = set()
        end = time.monotonic() + wait
        while time.monotonic() < end and len(got) < n:
            try:
                data = s.recv(4096)
            except socket.timeout:
                continue
            got.add(struct.unpack("!H", data[:2])[0])
        return len(got)
    finally:
        s.close()


def owner_bytes(nx, owner: str) -> float:
    return nx.metrics().get("nxdns_memory_owner_bytes", owner=owner)


# ------------------------------------------------------------------ rate limiting

def test_rate_limit_reached_and_reset(upstream, make_nxdns):
    nx = make_nxdns([upstream], config=PERMITS)
    # off (the harness's qps 0): no table at all
    assert owner_bytes(nx, "rate_limit") == 0
    assert udp_burst(nx, 40, wait=2.0) == 40
    # turned on by a reload: the table appears, and the limit holds
    nx.reload(merge(nx.config, rl_config(5, 10)))
    wait_reloads(nx, 1)
    assert owner_bytes(nx, "rate_limit") > 96 * 1024 - 1
    limited0 = nx.counter("nxdns_rate_limited_total", proto="udp")
    answered = udp_burst(nx, 40)
    # the burst (10) plus what refilled at 5 qps while the datagrams went out
    assert 10 <= answered <= 13, answered
    # every query not answered was dropped by the limit and counted: nothing else lost
    assert nx.counter("nxdns_rate_limited_total", proto="udp") - limited0 == 40 - answered
    assert nx.log().count("rate limit: client 127.0.0.1 (prefix 127.0.0.1/32) over 5 "
                          "queries/s") == 1
    # reset: idle for the burst's refill time (10 / 5 qps = 2 s), the full burst passes again
    time.sleep(2.2)
    assert udp_burst(nx, 10) == 10
    # another client has a limit of its own; IPv6 too
    assert udp_burst(nx, 10, src="127.0.0.2") == 10
    r = nx.udp(make_query("v6.example"), v6=True)
    assert r.rcode() == dns.rcode.NOERROR
    # still logged once within the minute for 127.0.0.1
    udp_burst(nx, 20, wait=0.5)
    assert nx.log().count("rate limit: client 127.0.0.1 (prefix") == 1


def test_rate_limit_streams_refused(upstream, make_nxdns):
    nx = make_nxdns([upstream], config=rl_config(1, 3))
    rcodes = [nx.tcp(make_query(f"t{i}.example")).rcode() for i in range(6)]
    assert rcodes[:3] == [dns.rcode.NOERROR] * 3
    assert rcodes[3:] == [dns.rcode.REFUSED] * 3
    assert nx.counter("nxdns_rate_limited_total", proto="tcp") == 3
    assert nx.counter("nxdns_rate_limited_total", proto="udp") == 0
    # the refused ones never reached the upstream
    assert len(upstream.queries()) == 3


@pytest.mark.parametrize("proto", ["dot", "doh"])
def test_rate_limit_encrypted_refused(upstream, make_nxdns, proto):
    nx = make_nxdns([upstream], config=merge(rl_config(1, 2), enc_listeners()))
    rcodes = [getattr(nx, proto)(make_query(f"e{i}.example")).rcode() for i in range(4)]
    assert rcodes == [dns.rcode.NOERROR] * 2 + [dns.rcode.REFUSED] * 2
    assert nx.counter("nxdns_rate_limited_total", proto=proto) == 2


def test_rate_limit_exempt_client(upstream, make_nxdns):
    nx = make_nxdns([upstream], config=merge(rl_config(1, 2),
                                             {"access": {"rate_limit_exempt": ["127.0.0.2"]}}))
    assert udp_burst(nx, 30, src="127.0.0.2", wait=2.0) == 30
    assert nx.counter("nxdns_rate_limited_total", proto="udp") == 0
    # a neighbour outside the exempt list is limited
    assert udp_burst(nx, 10, src="127.0.0.3") == 2
    assert nx.counter("nxdns_rate_limited_total", proto="udp") == 8


def test_rate_limit_prefix_groups_clients(upstream, make_nxdns):
    nx = make_nxdns([upstream], config=rl_config(1, 4, ipv4_prefix=24))
    assert udp_burst(nx, 2, src="127.0.5.1") == 2
    assert udp_burst(nx, 4, src="127.0.5.2") == 2  # same /24: shares what is left
    assert udp_burst(nx, 4, src="127.0.6.1") == 4  # another /24
    assert "(prefix 127.0.5.0/24)" in nx.log()


@pytest.mark.nx_timeout(120)
def test_spoofed_source_flood_does_not_grow(upstream, make_nxdns):
    """Many distinct sources (127.1.x.y: a spoofed-source flood as the table sees it): the
    table's bytes stay constant, live entries are recycled and counted, a real client keeps
    being served."""
    # the query log off: its SQLite pages grow with the queries logged, and this test wants every
    # ledger owner flat
    nx = make_nxdns([upstream], config=merge(rl_config(1, 100), {
        "cache": {"size": 1000}, "logging": {"query_log": False}}))
    nx.udp(make_query("flood.example"))  # cached: the flood is answered without the upstream
    before = owner_bytes(nx, "rate_limit")
    assert before >= 96 * 1024
    m0 = nx.metrics()
    wire = make_query("flood.example").to_wire()
    sources = 0
    udp0 = m0.get("nxdns_queries_total", proto="udp")

    def received():
        return nx.metrics().get("nxdns_queries_total", proto="udp") - udp0

    for x in range(1, 40):
        for y in range(1, 201):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                s.bind((f"127.1.{x}.{y}", 0))
                for _ in range(5):  # 5 queries: each entry holds state for 5 s
                    s.sendto(wire, ("127.0.0.1", nx.port))
            finally:
                s.close()
            sources += 1
        # pace by batches of 1000 datagrams so the listener's socket buffer does not overflow
        # (a loss would be the kernel's, not ours); the whole flood stays within the 5 s
        wait_until(lambda: received() >= sources * 5, 2)
    assert sources > 4096 + 3000
    n = sources * 5
    wait_until(lambda: received() >= n, 5)
    assert received() >= n * 0.99
    m = nx.metrics()
    assert m.get("nxdns_memory_owner_bytes", owner="rate_limit") == before
    evicted = m.get("nxdns_rate_limit_evictions_total")
    # 7800 live prefixes through 4096 slots: at least the excess is recycled
    assert evicted >= sources - 4096 - 200, evicted
    assert evicted <= sources
    # nothing else grew with the number of sources either (the table is the only per-client
    # state; a few KiB of pools may move)
    grew = {ls: v - m0.series.get((n, ls), 0) for (n, ls), v in m.series.items()
            if n == "nxdns_memory_owner_bytes"}
    assert sum(grew.values()) < 256 * 1024, grew
    # the flood was answered, not limited (5 queries each, burst 100), and a real client works
    assert m.get("nxdns_rate_limited_total", proto="udp") == 0
    r = query_from(nx, make_query("after.example"), src="127.0.0.9")
    assert r.rcode() == dns.rcode.NOERROR


# ------------------------------------------------------------------ rebinding protection

def test_rebinding_stripped_and_mixed(upstream, make_nxdns):
    nx = make_nxdns([upstream])
    upstream.script["mixed.example"] = Rule(records=[
        ("A", "192.0.2.5"), ("A", "10.1.2.3"), ("A", "198.51.100.6"), ("A", "192.168.1.1"),
        ("A", "203.0.113.7"), ("A", "100.64.0.1"), ("A", "127.0.0.1"), ("A", "169.254.9.9"),
        ("A", "172.16.0.1"), ("A", "0.0.0.0")])
    upstream.script["mixed6.example"] = Rule(records=[
        ("AAAA", "2001:db8::5"), ("AAAA", "fd00::1"), ("AAAA", "fe80::1"), ("AAAA", "::1"),
        ("AAAA", "::"), ("AAAA", "::ffff:10.0.0.1"), ("AAAA", "::ffff:192.0.2.9")])
    upstream.script["lan.example"] = Rule(records=[("A", "192.168.1.10")])
    r = nx.udp(make_query("mixed.example", edns=0))
    assert r.rcode() == dns.rcode.NOERROR
    # only the private records go; the documentation ranges stay
    assert answers(r) == ["192.0.2.5", "198.51.100.6", "203.0.113.7"]
    assert ede(r) == []
    r = nx.udp(make_query("mixed6.example", "AAAA", edns=0))
    assert answers(r) == ["2001:db8::5", "::ffff:192.0.2.9"]
    m = nx.metrics()
    assert m.get("nxdns_rebinding_total", result="stripped") == 2
    assert m.get("nxdns_rebinding_addresses_stripped_total") == 7 + 5
    # all private: NOERROR without data, EDE 15 saying why (with EDNS), plain NODATA without
    r = nx.udp(make_query("lan.example", edns=0))
    assert r.rcode() == dns.rcode.NOERROR
    assert answers(r) == []
    assert ede(r) == [(15, REBIND_TEXT)]
    r = nx.tcp(make_query("lan.example"))
    assert (r.rcode(), answers(r)) == (dns.rcode.NOERROR, [])
    assert nx.counter("nxdns_rebinding_total", result="emptied") == 2
    # public answers are untouched and not counted
    r = nx.udp(make_query("public.example"))
    assert answers(r) == ["192.0.2.1"]
    assert nx.metrics().sum("nxdns_rebinding_total") == 4


def test_rebinding_cname_to_private(make_upstream, make_nxdns):
    from filterkit import XRule, XUpstream  # CNAME chains with records for other owners
    up = XUpstream().start()
    try:
        up.script["alias.example"] = XRule(records=[], chain=[
            ("alias.example.", "CNAME", "inside.example."), ("inside.example.", "A", "10.9.8.7")])
        nx = make_nxdns([up])
        r = nx.udp(make_query("alias.example", edns=0))
        assert r.rcode() == dns.rcode.NOERROR
        # the CNAME stays (it is not an address); no address of the asked type is left
        assert [rs.rdtype for rs in r.answer] == [dns.rdatatype.CNAME]
        assert ede(r) == [(15, REBIND_TEXT)]
        assert nx.counter("nxdns_rebinding_total", result="emptied") == 1
    finally:
        up.stop()


def test_rebinding_https_hints(upstream, make_nxdns):
    nx = make_nxdns([upstream])
    upstream.script["svc.example"] = Rule(records=[
        ("HTTPS", '1 . alpn="h2" ipv4hint="10.0.0.1,192.0.2.1" ipv6hint="fe80::1,2001:db8::1"'),
        ("HTTPS", '2 . alpn="h3" ipv4hint="192.168.0.1"')])
    r = nx.udp(make_query("svc.example", "HTTPS", edns=0))
    assert r.rcode() == dns.rcode.NOERROR
    texts = sorted(rd.to_text() for rs in r.answer for rd in rs)
    assert texts == ['1 . alpn="h2" ipv4hint="192.0.2.1" ipv6hint="2001:db8::1"',
                     '2 . alpn="h3"']
    assert nx.counter("nxdns_rebinding_addresses_stripped_total") == 3
    assert nx.counter("nxdns_rebinding_total", result="stripped") == 1


def test_rebinding_exempt_forward_zone_local_and_block(make_upstream, make_nxdns):
    default = make_upstream()
    lan = make_upstream(default_a="192.168.1.2")
    default.script["wrong.home"] = Rule(records=[("A", "192.168.1.3")])
    nx = start_nx(make_nxdns, [default], {
        "upstream": {"forward_zones": {"lan": [lan.addr]}},
        "local_records": [{"name": "nas.home", "type": "A", "value": "192.168.1.20"}],
        "filter": {"deny": ["ads.example"]},
    })
    # a forward zone is where LAN names live: kept
    assert answers(nx.udp(make_query("printer.lan"))) == ["192.168.1.2"]
    # local records and the block answer (0.0.0.0 in the null mode) never pass through it
    assert answers(nx.udp(make_query("nas.home"))) == ["192.168.1.20"]
    assert answers(nx.udp(make_query("ads.example"))) == ["0.0.0.0"]
    assert nx.metrics().sum("nxdns_rebinding_total") == 0
    # the same kind of address from the public upstream is stripped
    assert answers(nx.udp(make_query("wrong.home"))) == []
    assert nx.counter("nxdns_rebinding_total", result="emptied") == 1


def test_rebinding_allow(upstream, make_nxdns):
    nx = make_nxdns([upstream])
    upstream.script["192-168-1-4.abc123.plex.direct"] = Rule(records=[("A", "192.168.1.4")])
    upstream.script["fritz.box"] = Rule(records=[("A", "192.168.178.1")])
    upstream.script["nas.mine.example"] = Rule(records=[("A", "10.0.0.5")])
    # the shipped list: plex.direct and fritz.box resolve privately
    assert answers(nx.udp(make_query("192-168-1-4.abc123.plex.direct"))) == ["192.168.1.4"]
    assert answers(nx.udp(make_query("fritz.box"))) == ["192.168.178.1"]
    assert nx.counter("nxdns_rebinding_total", result="allowed") == 2
    assert answers(nx.udp(make_query("nas.mine.example"))) == []
    # a list of one's own replaces it
    nx.reload(merge(nx.config, {"filter": {"rebinding_allow": ["mine.example"]}}))
    wait_reloads(nx, 1)
    assert answers(nx.udp(make_query("nas.mine.example"))) == ["10.0.0.5"]
    assert answers(nx.udp(make_query("fritz.box"))) == []
    # and the switch turns it all off
    nx.reload(merge(nx.config, {"filter": {"rebinding_protection": False}}))
    wait_reloads(nx, 2)
    assert answers(nx.udp(make_query("fritz.box"))) == ["192.168.178.1"]


def test_rebinding_cache_hit_stripped(upstream, make_nxdns):
    nx = make_nxdns([upstream], config={"cache": {"size": 1000}})
    upstream.script["cached.example"] = Rule(records=[("A", "192.0.2.44"), ("A", "10.0.0.44")],
                                             ttl=300)
    for proto in ("udp", "tcp", "udp"):
        r = getattr(nx, proto)(make_query("cached.example", edns=0))
        assert answers(r) == ["192.0.2.44"], proto
    assert len(upstream.queries("cached.example")) == 1
    assert nx.counter("nxdns_answers_total", result="cached") == 2
    # stripped once, before the cache insert; the hits were already clean
    assert nx.counter("nxdns_rebinding_total", result="stripped") == 1
