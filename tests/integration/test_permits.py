"""Query permits bound in-flight upstream work: UDP without a permit is dropped (dropped_no_slot);
a stream query without one pauses its connection until a permit frees (backpressure), and only
when that wait outlasts listener.permit_wait_ms is the connection closed (dropped_no_permit),
after the answers already in flight."""

import socket

import dns.exception
import dns.message
import pytest

from fakeupstream import Rule
from harness import (answers, make_query, raw_udp, tcp_connect, tcp_frame, tcp_read_msg,
                     wait_closed, wait_until)

DROP = "nxdns_dropped_total"


@pytest.fixture
def one_permit(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["hold.example"] = Rule(delay_ms=2000, records=[("A", "192.0.2.50")])
    up.script["second.example"] = Rule(delay_ms=2000)
    nx = make_nxdns([up], config={"query_budget": {"permits": 1},
                                  "upstream": {"timeout_ms": 5000}})
    return nx, up


def _hold_the_permit(nx, up):
    """Send a UDP query the upstream answers after 2 s; returns its socket once the upstream
    has it (so the only permit is in use)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    q = make_query("hold.example", edns=0, id=0x5151)
    s.sendto(q.to_wire(), ("127.0.0.1", nx.port))
    assert up.wait_for("hold.example"), "the first query never reached the upstream"
    assert wait_until(lambda: nx.counter("nxdns_query_permits_in_use") == 1), \
        "gauge nxdns_query_permits_in_use should read 1"
    return s


def _first_answer(s):
    s.settimeout(6)
    r = dns.message.from_wire(s.recvfrom(65535)[0])
    s.close()
    assert r.id == 0x5151 and answers(r) == ["192.0.2.50"]


def test_udp_without_permit_dropped_and_counted(one_permit):
    nx, up = one_permit
    before = nx.counter(DROP, reason="dropped_no_slot")
    s = _hold_the_permit(nx, up)
    assert raw_udp(make_query("second.example", edns=0).to_wire(), nx.port, timeout=1.0) is None, \
        "a UDP query found no permit but was answered"
    assert nx.wait_counter(DROP, before + 1, reason="dropped_no_slot") >= before + 1
    assert not up.queries("second.example"), "the dropped query reached the upstream"
    _first_answer(s)
    # The permit comes back: the next query is served.
    assert wait_until(lambda: nx.counter("nxdns_query_permits_in_use") == 0)
    assert answers(nx.udp(make_query("after.example", edns=0))) == ["192.0.2.1"]


def test_tcp_query_waits_for_a_permit(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["hold.example"] = Rule(delay_ms=700, records=[("A", "192.0.2.50")])
    nx = make_nxdns([up], config={"query_budget": {"permits": 1}})
    s = _hold_the_permit(nx, up)
    with tcp_connect(nx.port) as t:
        t.sendall(tcp_frame(make_query("second.example", id=7, edns=0).to_wire()))
        assert nx.wait_counter("nxdns_stream_permit_waits_total", 1) >= 1
        # Answered once the first operation gives its permit back, on the same connection.
        wire = tcp_read_msg(t, 5.0)
        assert wire is not None, "the waiting TCP query's connection was closed"
        r = dns.message.from_wire(wire)
        assert r.id == 7 and answers(r) == ["192.0.2.1"]
    _first_answer(s)
    assert nx.counter(DROP, reason="dropped_no_permit") == 0


def test_tcp_gives_up_after_the_permit_wait(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["hold.example"] = Rule(delay_ms=4000, records=[("A", "192.0.2.50")])
    nx = make_nxdns([up], config={"query_budget": {"permits": 1},
                                  "upstream": {"timeout_ms": 6000}})
    before = nx.counter(DROP, reason="dropped_no_permit")
    s = _hold_the_permit(nx, up)
    with tcp_connect(nx.port) as t:
        t.sendall(tcp_frame(make_query("second.example", edns=0).to_wire()))
        assert wait_closed(t, 4.0), "a TCP query that waited past the permit wait stayed open"
    assert nx.wait_counter(DROP, before + 1, reason="dropped_no_permit") >= before + 1
    assert not up.queries("second.example")
    _first_answer(s)
    assert wait_until(lambda: nx.counter("nxdns_query_permits_in_use") == 0)
    assert answers(nx.tcp(make_query("after-tcp.example", edns=0))) == ["192.0.2.1"]


def test_keepalive_connection_holds_no_permit(make_upstream, make_nxdns):
    up = make_upstream()
    nx = make_nxdns([up], config={"query_budget": {"permits": 1},
                                  "listener": {"tcp_idle_timeout_ms": 20000}})
    with tcp_connect(nx.port) as t:
        t.sendall(tcp_frame(make_query("ka1.example", id=1).to_wire()))
        assert answers(dns.message.from_wire(tcp_read_msg(t, 5))) == ["192.0.2.1"]
        # The connection stays open and idle; the single permit must be free for UDP.
        assert wait_until(lambda: nx.counter("nxdns_query_permits_in_use") == 0)
        for i in range(3):
            assert answers(nx.udp(make_query(f"ka-udp{i}.example"))) == ["192.0.2.1"]
        t.sendall(tcp_frame(make_query("ka2.example", id=2).to_wire()))
        assert answers(dns.message.from_wire(tcp_read_msg(t, 5))) == ["192.0.2.1"]
    assert nx.counter(DROP, reason="dropped_no_slot") == 0


def test_answered_client_never_finds_the_permit_held(make_upstream, make_nxdns):
    """A client that has its answer may ask again at once: the permit of the finished operation
    must already be free, whichever worker the next query lands on (SO_REUSEPORT spreads a
    client's fresh sockets over both). Releasing it only after the reply went out let the next
    query find it taken and be dropped: the cause of an intermittent failure under load."""
    up = make_upstream()
    nx = make_nxdns([up], config={"query_budget": {"permits": 1}})
    lost = []
    for i in range(300):
        name = f"seq{i}.example"
        try:
            if answers(nx.udp(make_query(name), timeout=2.0)) != ["192.0.2.1"]:
                lost.append(name)
        except dns.exception.Timeout:
            lost.append(name)
    assert nx.counter(DROP, reason="dropped_no_slot") == 0
    assert not lost, f"{len(lost)} of 300 sequential queries unanswered, first {lost[:3]}"
