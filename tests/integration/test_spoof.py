"""Anti-spoofing: replies with a wrong id, source or question are ignored; ids and source ports
of upstream exchanges are random."""

import dns.rcode
import pytest

from fakeupstream import Rule
from harness import answers, make_query

REJ = "nxdns_upstream_rejected_total"


@pytest.mark.parametrize("kind", ["wrong_id", "wrong_port", "wrong_addr", "wrong_question"])
def test_spoofed_reply_ignored_real_answer_wins(nxdns, upstream, kind):
    if kind == "wrong_addr" and upstream.spoof_addr_sock is None:
        pytest.skip("127.0.0.2 not bindable here")
    upstream.script["spoof.example"] = Rule(spoof=[kind], delay_ms=300,
                                            records=[("A", "192.0.2.40")])
    r = nxdns.udp(make_query("spoof.example", edns=0), timeout=5)
    assert r.rcode() == dns.rcode.NOERROR
    assert answers(r) == ["192.0.2.40"], f"{kind}: the spoofed answer 6.6.6.6 was accepted"


@pytest.mark.parametrize("kind,reason", [("wrong_id", "wrong_id"),
                                         ("wrong_question", "wrong_question")])
def test_spoofed_reply_counted(nxdns, upstream, kind, reason):
    upstream.script["count.example"] = Rule(spoof=[kind], delay_ms=300)
    before = nxdns.counter(REJ, reason=reason)
    assert answers(nxdns.udp(make_query("count.example", edns=0), timeout=5)) == ["192.0.2.1"]
    assert nxdns.wait_counter(REJ, before + 1, reason=reason) >= before + 1


@pytest.mark.parametrize("kind", ["wrong_port", "wrong_addr"])
def test_wrong_source_never_reaches_nxdns(nxdns, upstream, kind):
    """Upstream sockets are connect()ed to their server (as Unbound's udp-connect): the kernel
    drops a datagram from another address or port before nxdns reads it, so the spoof is neither
    accepted nor counted, and the real answer wins."""
    if kind == "wrong_addr" and upstream.spoof_addr_sock is None:
        pytest.skip("127.0.0.2 not bindable here")
    upstream.script["src.example"] = Rule(spoof=[kind], delay_ms=300)
    before = nxdns.counter(REJ, reason="wrong_source")
    assert answers(nxdns.udp(make_query("src.example", edns=0), timeout=5)) == ["192.0.2.1"]
    assert nxdns.counter(REJ, reason="wrong_source") == before


def test_only_spoofed_replies_give_servfail(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["nothing-real.example"] = Rule(spoof=["wrong_id", "wrong_question"],
                                             only_spoof=True)
    nx = make_nxdns([up], config={"upstream": {"timeout_ms": 1000}})
    r = nx.udp(make_query("nothing-real.example", edns=0), timeout=6)
    assert r.rcode() == dns.rcode.SERVFAIL
    assert "6.6.6.6" not in answers(r)


def test_wrong_id_over_tcp_never_accepted(nxdns, upstream):
    """After TC, on the TCP connection a wrong-id reply precedes the real one. The wrong one must
    never be used; nxdns may wait for the real one or give the attempt up (SERVFAIL), since on
    TCP a wrong id can only come from a broken server."""
    upstream.script["tcpspoof.example"] = Rule(tc_udp=True, spoof=["wrong_id"], delay_ms=200,
                                               records=[("A", "192.0.2.41")])
    r = nxdns.udp(make_query("tcpspoof.example", edns=0), timeout=5)
    assert "6.6.6.6" not in answers(r)
    assert (r.rcode(), answers(r)) in [(dns.rcode.NOERROR, ["192.0.2.41"]),
                                       (dns.rcode.SERVFAIL, [])]
    assert upstream.queries("tcpspoof.example", transport="tcp")


def test_upstream_ids_and_ports_are_random(nxdns, upstream):
    n = 20
    for i in range(n):
        q = make_query(f"rnd{i}.example", edns=0, id=0x1234)
        assert answers(nxdns.udp(q)) == ["192.0.2.1"]
    qs = []
    for i in range(n):
        got = upstream.queries(f"rnd{i}.example", transport="udp")
        assert got, f"rnd{i}.example never reached the upstream over UDP"
        qs.append(got[0])
    ids = [q.id for q in qs]
    ports = [q.src_port for q in qs]
    assert sum(1 for i in ids if i == 0x1234) <= 1, "the client's id is reused upstream"
    assert len(set(ids)) >= n - 2, f"upstream ids repeat: {ids}"
    assert len({(b - a) & 0xFFFF for a, b in zip(ids, ids[1:])}) > 1, f"ids sequential: {ids}"
    # Source ports come from pools of random-port sockets (16 per address family and worker, a
    # socket retired after 32 exchanges or 10 s): spread over several ports, none carrying more
    # than 32 exchanges, and an id never repeats on one port.
    assert len(set(ports)) >= 4, f"source ports not spread over the pool: {ports}"
    assert max(ports.count(p) for p in ports) <= 32
    assert all(p >= 1024 for p in ports), f"a privileged source port: {ports}"
    assert len(set(zip(ports, ids))) == n, f"an id repeats on one port: {list(zip(ports, ids))}"
    assert len({(b - a) & 0xFFFF for a, b in zip(ports, ports[1:])}) > 1, \
        f"source ports sequential: {ports}"
