"""Identical concurrent queries share one upstream exchange; each client gets its own id/case."""

import socket

import dns.message
import pytest

from fakeupstream import Rule
from harness import answers, make_query, parallel, tcp_connect, tcp_frame, tcp_read_msg

COAL = "nxdns_coalesced_total"


def _send_udp(port, q):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(q.to_wire(), ("127.0.0.1", port))
    return s


def _recv_udp(s, timeout=5.0):
    s.settimeout(timeout)
    try:
        return dns.message.from_wire(s.recvfrom(65535)[0])
    except socket.timeout:
        return None
    finally:
        s.close()


@pytest.fixture
def one_worker(make_upstream, make_nxdns):
    """One worker: every client lands on the same loop (the mechanics, deterministically)."""
    up = make_upstream()
    return make_nxdns([up], config={"listener": {"workers": 1}}), up


def test_identical_queries_share_one_exchange(one_worker):
    nxdns, upstream = one_worker
    upstream.script["same.example"] = Rule(delay_ms=800, records=[("A", "192.0.2.60")])
    cases = ["same.example", "SAME.example", "Same.Example", "sAmE.eXaMpLe"]
    before = nxdns.counter(COAL)
    qs = [make_query(name, edns=0, id=0x700 + i) for i, name in enumerate(cases)]
    socks = [_send_udp(nxdns.port, q) for q in qs]
    replies = [_recv_udp(s) for s in socks]
    for q, r, name in zip(qs, replies, cases):
        assert r is not None, f"no answer for {name}"
        assert r.id == q.id
        assert r.question[0].name.to_text() == name + ".", "each client gets its own case"
        assert answers(r) == ["192.0.2.60"]
    assert len(upstream.exchanges("same.example")) == 1, "identical queries were not coalesced"
    assert nxdns.counter(COAL) - before == len(cases) - 1


def test_identical_queries_across_workers_share_one_exchange(make_upstream, make_nxdns):
    """With several workers, SO_REUSEPORT spreads 8 clients over the loops; identical
    concurrent queries must still make one upstream exchange (the issue: "identical concurrent
    queries share one upstream exchange", not "per worker")."""
    up = make_upstream()
    up.script["spread.example"] = Rule(delay_ms=800)
    nx = make_nxdns([up], config={"listener": {"workers": 4}})
    qs = [make_query("spread.example", edns=0, id=0x900 + i) for i in range(8)]
    socks = [_send_udp(nx.port, q) for q in qs]
    replies = [_recv_udp(s) for s in socks]
    assert all(r is not None and answers(r) == ["192.0.2.1"] for r in replies)
    n = len(up.exchanges("spread.example"))
    assert n == 1, f"8 identical concurrent queries made {n} upstream exchanges"


def test_udp_and_tcp_clients_coalesce(one_worker):
    nxdns, upstream = one_worker
    upstream.script["mixed.example"] = Rule(delay_ms=800)
    u = _send_udp(nxdns.port, make_query("mixed.example", edns=0, id=1))
    with tcp_connect(nxdns.port) as t:
        t.sendall(tcp_frame(make_query("Mixed.Example", edns=0, id=2).to_wire()))
        rt = dns.message.from_wire(tcp_read_msg(t, 5))
    ru = _recv_udp(u)
    assert ru is not None and ru.id == 1 and answers(ru) == ["192.0.2.1"]
    assert rt.id == 2 and rt.question[0].name.to_text() == "Mixed.Example."
    assert answers(rt) == ["192.0.2.1"]
    assert len(upstream.exchanges("mixed.example")) == 1


@pytest.mark.parametrize("a,b", [
    (dict(rdtype="A"), dict(rdtype="AAAA")),
    (dict(rdtype="A", want_dnssec=False), dict(rdtype="A", want_dnssec=True)),
], ids=["type", "do_bit"])
def test_different_keys_not_coalesced(one_worker, a, b):
    nxdns, upstream = one_worker
    upstream.script["keys.example"] = Rule(delay_ms=600)
    qa = make_query("keys.example", edns=0, id=1, **a)
    qb = make_query("keys.example", edns=0, id=2, **b)
    sa, sb = _send_udp(nxdns.port, qa), _send_udp(nxdns.port, qb)
    ra, rb = _recv_udp(sa), _recv_udp(sb)
    assert ra is not None and rb is not None
    assert ra.question[0].rdtype == qa.question[0].rdtype
    assert rb.question[0].rdtype == qb.question[0].rdtype
    assert len(upstream.exchanges("keys.example")) == 2


def test_waiter_bound_counted(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["crowd.example"] = Rule(delay_ms=1000)
    nx = make_nxdns([up], config={"query_budget": {"coalesce_max_waiters": 2},
                                  "listener": {"workers": 1}})
    before = nx.counter("nxdns_dropped_total", reason="coalesce_waiters_full")
    socks = [_send_udp(nx.port, make_query("crowd.example", edns=0, id=i)) for i in range(8)]
    replies = parallel([lambda s=s: _recv_udp(s, 4) for s in socks])
    got = [r for r in replies if r is not None and not isinstance(r, Exception)]
    assert got, "nobody got an answer"
    assert all(answers(r) == ["192.0.2.1"] for r in got)
    assert nx.wait_counter("nxdns_dropped_total", before + 1, reason="coalesce_waiters_full") \
        >= before + 1, "8 identical queries with coalesce_max_waiters 2: the bound was never hit"
    assert up.queries("crowd.example")
