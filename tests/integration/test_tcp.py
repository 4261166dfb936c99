"""DNS over TCP per RFC 7766: pipelining out of order, idle and read timeouts, connection cap."""

import select
import time

import dns.message
import dns.rcode
import pytest

from fakeupstream import Rule
from harness import (answers, make_query, tcp_connect, tcp_frame, tcp_read_msg, wait_closed,
                     wait_until)


def _ask(s, name, id, timeout=5.0):
    s.sendall(tcp_frame(make_query(name, id=id).to_wire()))
    wire = tcp_read_msg(s, timeout)
    assert wire is not None, f"connection closed instead of answering {name}"
    r = dns.message.from_wire(wire)
    assert r.id == id
    return r


def test_pipelined_answers_out_of_order(nxdns, upstream):
    upstream.script["slow.example"] = Rule(delay_ms=1000, records=[("A", "192.0.2.20")])
    upstream.script["fast.example"] = Rule(records=[("A", "192.0.2.21")])
    with tcp_connect(nxdns.port) as s:
        slow, fast = make_query("slow.example", id=0x1111), make_query("fast.example", id=0x2222)
        s.sendall(tcp_frame(slow.to_wire()) + tcp_frame(fast.to_wire()))
        first = dns.message.from_wire(tcp_read_msg(s, 5.0))
        second = dns.message.from_wire(tcp_read_msg(s, 5.0))
    assert first.id == 0x2222, "the fast answer must not wait behind the slow one"
    assert answers(first) == ["192.0.2.21"]
    assert second.id == 0x1111
    assert answers(second) == ["192.0.2.20"]


def test_many_pipelined_queries_each_answered_with_its_id(nxdns, upstream):
    names = {}
    for i in range(16):
        name = f"p{i}.example"
        upstream.script[name] = Rule(delay_ms=(i * 37) % 300, records=[("A", f"192.0.2.{100 + i}")])
        names[0x4000 + i] = (name, f"192.0.2.{100 + i}")
    with tcp_connect(nxdns.port) as s:
        s.sendall(b"".join(tcp_frame(make_query(n, id=i).to_wire()) for i, (n, _) in names.items()))
        got = {}
        for _ in names:
            wire = tcp_read_msg(s, 5.0)
            assert wire is not None, f"closed after {len(got)} answers"
            r = dns.message.from_wire(wire)
            got[r.id] = (r.question[0].name.to_text(omit_final_dot=True), answers(r))
    assert got == {i: (n, [a]) for i, (n, a) in names.items()}


def test_sequential_queries_on_one_connection(nxdns):
    with tcp_connect(nxdns.port) as s:
        for i in range(5):
            assert answers(_ask(s, f"seq{i}.example", 0x100 + i)) == ["192.0.2.1"]


@pytest.mark.parametrize("v6", [False, True], ids=["v4", "v6"])
def test_idle_connection_closed(make_upstream, make_nxdns, v6):
    nx = make_nxdns([make_upstream()], config={"listener": {"tcp_idle_timeout_ms": 500}})
    before = nx.counter("nxdns_tcp_idle_closed_total")
    with tcp_connect(nx.port, "::1" if v6 else "127.0.0.1") as s:
        assert answers(_ask(s, "idle.example", 7)) == ["192.0.2.1"]
        t0 = time.monotonic()
        assert wait_closed(s, 6.0), "idle connection still open 6 s after a 500 ms idle timeout"
        assert time.monotonic() - t0 >= 0.2, "closed right after the answer, not after idling"
    assert nx.wait_counter("nxdns_tcp_idle_closed_total", before + 1) >= before + 1


def test_connection_without_any_query_is_closed(make_upstream, make_nxdns):
    nx = make_nxdns([make_upstream()], config={"listener": {"tcp_idle_timeout_ms": 500}})
    with tcp_connect(nx.port) as s:
        assert wait_closed(s, 6.0)


def test_slowloris_read_timeout(make_upstream, make_nxdns):
    """A message trickling in one byte at a time is cut off by the read timeout, even though
    every byte arrives well inside the (long) idle timeout."""
    nx = make_nxdns([make_upstream()], config={
        "listener": {"tcp_read_timeout_ms": 500, "tcp_idle_timeout_ms": 20000}})
    before = nx.counter("nxdns_dropped_total", reason="tcp_read_timeout")
    frame = tcp_frame(make_query("slowloris.example", edns=0).to_wire())
    with tcp_connect(nx.port) as s:
        s.sendall(frame[:3])
        closed = False
        end = time.monotonic() + 6.0
        i = 3
        while time.monotonic() < end and i < len(frame) - 1:  # never send the last byte
            r, _, _ = select.select([s], [], [], 0.2)
            if r:
                try:
                    data = s.recv(65535)
                except (ConnectionResetError, BrokenPipeError):
                    data = b""
                assert not data, "the server answered a message that never completed"
                closed = True
                break
            try:
                s.send(frame[i:i + 1])
            except (ConnectionResetError, BrokenPipeError):
                closed = True
                break
            i += 1
        if not closed:
            closed = wait_closed(s, max(0.1, end - time.monotonic()))
    assert closed, "a message trickled byte by byte was never cut off"
    assert nx.wait_counter("nxdns_dropped_total", before + 1, reason="tcp_read_timeout") \
        >= before + 1


def test_connection_cap_evicts_the_oldest_idle_connection(make_upstream, make_nxdns):
    # One worker: eviction looks at the connections of the worker that accepts.
    nx = make_nxdns([make_upstream()], config={
        "listener": {"dns_max_connections": 2, "tcp_idle_timeout_ms": 30000, "workers": 1}})
    before = nx.counter("nxdns_stream_evicted_total")
    a, b = tcp_connect(nx.port), tcp_connect(nx.port)
    try:
        assert answers(_ask(a, "cap-a.example", 1)) == ["192.0.2.1"]
        assert answers(_ask(b, "cap-b.example", 2)) == ["192.0.2.1"]
        assert wait_until(lambda: nx.counter("nxdns_tcp_server_connections") == 2), \
            "gauge nxdns_tcp_server_connections should read 2"
        # A third client at the cap: `a`, idle longest, makes room; `b` stays.
        with tcp_connect(nx.port) as c:
            assert answers(_ask(c, "cap-c.example", 3)) == ["192.0.2.1"]
            assert wait_closed(a, 3.0), "the oldest idle connection was not closed at the cap"
            assert nx.wait_counter("nxdns_stream_evicted_total", before + 1) >= before + 1
            assert answers(_ask(b, "cap-b2.example", 4)) == ["192.0.2.1"]
    finally:
        a.close()
        b.close()
    assert nx.metrics().get("nxdns_tcp_server_connections_peak") >= 2


def test_connection_cap_refuses_when_no_connection_is_idle(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["busy-a.example"] = Rule(delay_ms=1500, records=[("A", "192.0.2.31")])
    up.script["busy-b.example"] = Rule(delay_ms=1500, records=[("A", "192.0.2.32")])
    nx = make_nxdns([up], config={
        "listener": {"dns_max_connections": 2, "tcp_idle_timeout_ms": 30000, "workers": 1}})
    before = nx.counter("nxdns_dropped_total", reason="connection_cap")
    a, b = tcp_connect(nx.port), tcp_connect(nx.port)
    try:
        a.sendall(tcp_frame(make_query("busy-a.example", id=1).to_wire()))
        b.sendall(tcp_frame(make_query("busy-b.example", id=2).to_wire()))
        assert wait_until(lambda: len(up.queries("busy-b.example")) > 0 and
                          len(up.queries("busy-a.example")) > 0)
        try:
            c = tcp_connect(nx.port)
        except ConnectionResetError:
            c = None  # reset while connect() completed: refused right away, as it should be
        if c is not None:
            with c:
                try:
                    c.sendall(tcp_frame(make_query("cap-c.example", id=3).to_wire()))
                except (ConnectionResetError, BrokenPipeError):
                    pass
                assert wait_closed(c, 3.0), "a connection beyond the cap of 2 stayed open"
        assert nx.wait_counter("nxdns_dropped_total", before + 1, reason="connection_cap") \
            >= before + 1
        # The cap is per listener: the IPv6 listener still accepts.
        with tcp_connect(nx.port, "::1") as v6:
            assert answers(_ask(v6, "cap-v6.example", 4)) == ["192.0.2.1"]
        # The busy connections were not sacrificed: both get their answers.
        assert answers(dns.message.from_wire(tcp_read_msg(a, 5.0))) == ["192.0.2.31"]
        assert answers(dns.message.from_wire(tcp_read_msg(b, 5.0))) == ["192.0.2.32"]
    finally:
        a.close()
        b.close()


def test_empty_frames_are_not_activity(make_upstream, make_nxdns):
    nx = make_nxdns([make_upstream()], config={"listener": {"tcp_idle_timeout_ms": 600}})
    with tcp_connect(nx.port) as s:
        assert answers(_ask(s, "before-empty.example", 1)) == ["192.0.2.1"]
        t0 = time.monotonic()
        closed = False
        while time.monotonic() - t0 < 4.0 and not closed:
            try:
                s.sendall(b"\x00\x00")  # an empty frame every 150 ms
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            closed = wait_closed(s, 0.15)
        assert closed, "empty frames kept an idle connection open"
        assert time.monotonic() - t0 < 3.0


def test_more_pipelined_queries_than_permits_all_answered(make_upstream, make_nxdns):
    """100 uncached queries pipelined on one connection with 4 permits: the connection stops
    reading while it waits (backpressure) and every query is answered; none is lost."""
    up = make_upstream()
    nx = make_nxdns([up], config={"query_budget": {"permits": 4}, "cache": {"size": 0}})
    for i in range(100):
        up.script[f"p{i}.example"] = Rule(delay_ms=20, records=[("A", f"192.0.2.{i + 1}")])
    with tcp_connect(nx.port) as s:
        s.sendall(b"".join(tcp_frame(make_query(f"p{i}.example", id=1000 + i).to_wire())
                           for i in range(100)))
        got = {}
        for _ in range(100):
            wire = tcp_read_msg(s, 10.0)
            assert wire is not None, f"connection closed after {len(got)} answers"
            r = dns.message.from_wire(wire)
            got[r.id] = answers(r)
    assert sorted(got) == [1000 + i for i in range(100)]
    assert all(got[1000 + i] == [f"192.0.2.{i + 1}"] for i in range(100))
    assert nx.counter("nxdns_stream_permit_waits_total") >= 1
    assert nx.counter("nxdns_dropped_total", reason="dropped_no_permit") == 0


def test_tcp_servfail_when_upstream_fails(nxdns, upstream):
    upstream.script["sf.example"] = Rule(rcode="SERVFAIL")
    with tcp_connect(nxdns.port) as s:
        r = _ask(s, "sf.example", 9)
    assert r.rcode() == dns.rcode.SERVFAIL
