"""Retransmission: a silent UDP query goes to the same server again (same id and port) after the
server's retransmission timeout, so a lost datagram costs that timeout, not the whole deadline."""

import dns.rcode

from fakeupstream import Rule
from harness import answers, make_query


def _resends(nx, up):
    return nx.metrics().get("nxdns_upstream_resends_total", server=up.addr)


def test_lost_query_is_recovered_by_a_resend(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["lossy.example"] = Rule(drop_first=True, records=[("A", "192.0.2.77")])
    nx = make_nxdns([up], config={"upstream": {"timeout_ms": 3000}})
    r = nx.udp(make_query("lossy.example", edns=0), timeout=8)
    assert r.rcode() == dns.rcode.NOERROR, "a lost first datagram must not cost the answer"
    assert answers(r) == ["192.0.2.77"]
    qs = up.queries("lossy.example")
    assert len(qs) == 2, f"upstream saw {len(qs)} datagrams, expected the query and one re-send"
    assert (qs[1].id, qs[1].src_port) == (qs[0].id, qs[0].src_port), "a re-send repeats the query"
    # the first answer-less server gets the initial timeout (400 ms), not the deadline
    gap = qs[1].time - qs[0].time
    assert 0.3 <= gap < 2.5, f"re-sent after {gap:.3f} s"
    assert len(up.exchanges("lossy.example")) == 1
    m = nx.metrics()
    assert m.get("nxdns_upstream_resends_total", server=up.addr) == 1
    assert m.get("nxdns_upstream_exchanges_total", server=up.addr, outcome="answer") == 1
    assert m.get("nxdns_upstream_exchanges_total", server=up.addr, outcome="timeout") == 0
    # no round-trip sample from a re-sent query (Karn); the doubled timeout holds until one
    assert m.get("nxdns_upstream_rto_seconds", server=up.addr) in (0.8, 1.0)


def test_silent_upstream_resends_are_bounded(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["*"] = Rule(drop=True)
    nx = make_nxdns([up], config={"upstream": {"timeout_ms": 2000}})
    r = nx.udp(make_query("silent.example", edns=0), timeout=8)
    assert r.rcode() == dns.rcode.SERVFAIL
    qs = up.queries("silent.example")
    assert len(qs) == 3, f"expected the query and two re-sends, upstream saw {len(qs)}"
    assert len({(q.id, q.src_port) for q in qs}) == 1
    assert nx.wait_counter("nxdns_upstream_resends_total", 2, server=up.addr) == 2
    assert _resends(nx, up) == 2, "no re-send after the deadline"


def test_timeout_follows_the_measured_round_trip(make_upstream, make_nxdns):
    """Before any answer the timeout is the initial 0.4 s; answers from a loopback server bring
    it down (to the 0.2 s floor unless the machine stalls one of them)."""
    up = make_upstream()
    nx = make_nxdns([up])
    assert nx.metrics().get("nxdns_upstream_rto_seconds", server=up.addr) == 0.4
    for i in range(5):
        r = nx.udp(make_query(f"fast{i}.example", edns=0))
        assert r.rcode() == dns.rcode.NOERROR
    m = nx.metrics()
    rto = m.get("nxdns_upstream_rto_seconds", server=up.addr)
    resends = m.get("nxdns_upstream_resends_total", server=up.addr)
    if resends == 0:  # a stalled machine may have re-sent one (and backed the timeout off)
        assert 0.2 <= rto < 0.4, f"timeout {rto} s after five loopback answers"

    assert len(up.queries()) == 5 + resends
    assert len(up.exchanges()) == 5
