"""DNS over HTTPS (RFC 8484, HTTP/2) against the real listener: GET and POST through dnspython
(httpx + h2) and kdig; streams multiplexed on one connection and answered out of order;
cache-control max-age; every HTTP error status; HTTP/1.1 refused with 505; the client id in the
path; and the bounds: connection cap, permit exhaustion (REFUSED_STREAM, connection kept),
garbage prefaces, oversized dns=, stream floods. Each asserts the counters in /metrics too."""

from __future__ import annotations

import socket
import ssl
import time

import dns.message
import dns.rcode
import dns.rrset
import pytest

from fakeupstream import FakeUpstream, Rule
from filterkit import soa, start_nx, XRule, XUpstream
from harness import (H2Client, answers, b64url, enc_listeners, make_query, merge, run,
                     tcp_connect, tls_connect, wait_closed, wait_until)

CT = "application/dns-message"
REFUSED_STREAM = 7  # RFC 9113 7


def doh_cfg(**over) -> dict:
    """A DoH listener on fresh free ports, merged with `over`."""
    return merge(enc_listeners(dot=False), over)


def delta(before, after, name, **labels):
    return after.get(name, **labels) - before.get(name, **labels)


def qwire(name, id=0, rdtype="A") -> bytes:
    # RFC 8484 4.1: id 0 makes GET requests cache-friendly; the tests use it unless told.
    return make_query(name, rdtype, id=id).to_wire()


def dns_of(rec) -> dns.message.Message:
    assert rec["status"] == 200, f"HTTP {rec['status']}: {rec['body'][:200]!r}"
    assert rec["headers"].get("content-type") == CT
    assert int(rec["headers"]["content-length"]) == len(rec["body"])
    return dns.message.from_wire(rec["body"])


def kdig(*args, timeout=10.0):
    return run(["kdig", "+time=3", "+retry=0", *args], timeout=timeout)


# ------------------------------------------------------------------ answers


def test_get_and_post_with_dnspython_and_kdig(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["get.example"] = Rule(records=[("A", "192.0.2.60")])
    up.script["post.example"] = Rule(records=[("A", "192.0.2.61")])
    nx = make_nxdns([up], config=doh_cfg(filter={"deny": ["blocked.example"]}))
    m0 = nx.metrics()
    assert answers(nx.doh(make_query("get.example"), post=False)) == ["192.0.2.60"]
    assert answers(nx.doh(make_query("post.example"), post=True)) == ["192.0.2.61"]
    assert answers(nx.doh(make_query("post.example"), post=True, v6=True)) == ["192.0.2.61"]
    assert answers(nx.doh(make_query("blocked.example"))) == ["0.0.0.0"]
    for mode in ("+https", "+https-get"):
        k = kdig("@127.0.0.1", "-p", str(nx.doh_port), mode, "+short", "get.example")
        assert k.returncode == 0 and k.stdout.split() == ["192.0.2.60"], mode + k.stdout + k.stderr
    m1 = nx.metrics()
    assert delta(m0, m1, "nxdns_queries_total", proto="doh") == 6
    assert delta(m0, m1, "nxdns_queries_total", proto="udp") == 0
    assert delta(m0, m1, "nxdns_answers_total", result="forwarded") == 5
    assert delta(m0, m1, "nxdns_answers_total", result="blocked") == 1
    assert m1.sum("nxdns_doh_http_errors_total") == 0
    assert m1.get("nxdns_doh_server_connections_peak") >= 1
    assert len(up.queries("get.example")) == 3 and not up.queries("blocked.example")
    assert wait_until(lambda: nx.counter("nxdns_doh_server_connections") == 0)


def test_streams_multiplexed_and_answered_out_of_order(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["slow.example"] = Rule(delay_ms=1000, records=[("A", "192.0.2.20")])
    for i in range(4):
        up.script[f"fast{i}.example"] = Rule(delay_ms=50 * i, records=[("A", f"192.0.2.{30 + i}")])
    nx = make_nxdns([up], config=doh_cfg())
    with H2Client(nx.doh_port) as h:
        slow = h.post("/dns-query", qwire("slow.example", id=1))
        fast = [h.get("/dns-query?dns=" + b64url(qwire(f"fast{i}.example"))) if i % 2 else
                h.post("/dns-query", qwire(f"fast{i}.example", id=10 + i)) for i in range(4)]
        got = h.wait([slow] + fast, timeout=5.0)
        assert h.done[-1] == slow, f"the slow stream did not finish last: {h.done}"
        assert set(h.done[:4]) == set(fast)
        assert answers(dns_of(got[slow])) == ["192.0.2.20"]
        for i, sid in enumerate(fast):
            assert answers(dns_of(got[sid])) == [f"192.0.2.{30 + i}"]
        assert nx.counter("nxdns_doh_server_connections") == 1
    m = nx.metrics()
    assert m.get("nxdns_queries_total", proto="doh") == 5
    assert m.get("nxdns_doh_server_connections_peak") == 1
    assert m.get("nxdns_tls_handshakes_total", side="server") == 1


class TtlUpstream(XUpstream):
    """Answers `multi.example` A with a CNAME (TTL 300), then A records with TTL 45 and 120."""

    def _answer(self, query, rule):
        resp = super()._answer(query, rule)
        if query.question and query.question[0].name.to_text().lower() == "multi.example.":
            resp.answer = [
                dns.rrset.from_text("multi.example.", 300, "IN", "CNAME", "t.multi.example."),
                dns.rrset.from_text("t.multi.example.", 45, "IN", "A", "192.0.2.71"),
                dns.rrset.from_text("t.multi.example.", 45, "IN", "A", "192.0.2.72"),
                dns.rrset.from_text("t.multi.example.", 120, "IN", "AAAA", "2001:db8::1"),
            ]
        return resp


def test_cache_control_max_age_is_the_smallest_ttl(make_upstream_cls, make_nxdns):
    up = make_upstream_cls(TtlUpstream)
    up.script["one.example"] = Rule(ttl=77, records=[("A", "192.0.2.77")])
    up.script["gone.example"] = XRule(rcode="NXDOMAIN", authority=[soa("example.", minimum=33)],
                                      auth_ttl=600)
    nx = make_nxdns([up], config=doh_cfg())
    with H2Client(nx.doh_port) as h:
        cases = {"one.example": 77, "multi.example": 45, "gone.example": 33}
        sids = {n: h.get("/dns-query?dns=" + b64url(qwire(n))) for n in cases}
        got = h.wait(list(sids.values()))
        for name, ttl in cases.items():
            rec = got[sids[name]]
            r = dns_of(rec)
            assert rec["headers"].get("cache-control") == f"max-age={ttl}", \
                f"{name}: cache-control {rec['headers'].get('cache-control')!r}, want {ttl}"
            if r.answer:
                assert min(rs.ttl for rs in r.answer) == ttl
        assert dns_of(got[sids["gone.example"]]).rcode() == dns.rcode.NXDOMAIN


# ------------------------------------------------------------------ HTTP errors


def _status(h, sid):
    try:
        rec = h.wait(sid)[sid]
    except TimeoutError:
        assert h.protocol_error is None, f"the server's answer breaks HTTP: {h.protocol_error}"
        raise
    assert rec["reset"] is None, f"stream reset ({rec['reset']}) instead of an HTTP answer"
    return rec


ERRORS = [
    # (id, method, path, body, content-type, status)
    ("get-no-dns", "GET", "/dns-query", None, None, 400),
    ("get-other-param", "GET", "/dns-query?name=a.example", None, None, 400),
    ("get-padded", "GET", "/dns-query?dns=" + b64url(qwire("a.example")) + "==", None, None, 400),
    ("get-bad-char", "GET", "/dns-query?dns=AAAA*AAAA", None, None, 400),
    ("get-bad-len", "GET", "/dns-query?dns=AAAAA", None, None, 400),
    ("get-two-dns", "GET", "/dns-query?dns=" + b64url(qwire("a.example")) + "&dns="
     + b64url(qwire("b.example")), None, None, 400),
    ("get-short", "GET", "/dns-query?dns=" + b64url(b"\x00\x01\x02"), None, None, 400),
    ("post-short", "POST", "/dns-query", b"\x12\x34\x00", CT, 400),
    ("post-response", "POST", "/dns-query",
     dns.message.make_response(make_query("resp.example")).to_wire(), CT, 400),
    ("wrong-path", "GET", "/resolve?dns=" + b64url(qwire("a.example")), None, None, 404),
    ("bad-client-id", "GET", "/dns-query/no_underscore?dns=" + b64url(qwire("a.example")),
     None, None, 404),
    ("put", "PUT", "/dns-query", qwire("a.example"), CT, 405),
    ("head", "HEAD", "/dns-query?dns=" + b64url(qwire("a.example")), None, None, 405),
    ("delete", "DELETE", "/dns-query", None, None, 405),
    ("post-huge", "POST", "/dns-query", b"\x00" * 65536, CT, 413),
    ("post-text", "POST", "/dns-query", qwire("a.example"), "text/plain", 415),
    ("post-no-ctype", "POST", "/dns-query", qwire("a.example"), "", 415),
    ("get-oversized-dns", "GET", "/dns-query?dns=" + b64url(b"\x00" * 2000), None, None, 414),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_http_errors(make_upstream, make_nxdns, case):
    _, method, path, body, ctype, status = case
    up = make_upstream()
    nx = make_nxdns([up], config=doh_cfg())
    m0 = nx.metrics()
    with H2Client(nx.doh_port) as h:
        hdrs = [("content-type", ctype)] if ctype else []
        rec = _status(h, h.request(method, path, body=body, headers=hdrs))
        assert rec["status"] == status, f"{method} {path[:60]}: HTTP {rec['status']}, want {status}"
        assert rec["headers"].get("content-type", "").startswith("text/plain")
        if method != "HEAD":
            assert rec["body"], "an HTTP error without a body"
        if status == 405:
            assert rec["headers"].get("allow") == "GET, POST"
        # The connection stays usable after an HTTP error.
        ok = h.wait(h.post("/dns-query", qwire("after-error.example")))
        assert answers(dns_of(list(ok.values())[0])) == ["192.0.2.1"]
    m1 = nx.metrics()
    assert delta(m0, m1, "nxdns_doh_http_errors_total", status=str(status)) == 1
    assert m1.sum("nxdns_doh_http_errors_total") - m0.sum("nxdns_doh_http_errors_total") == 1
    # A QR=1 message is a DNS message but not a query: the pipeline sees it and drops it.
    assert delta(m0, m1, "nxdns_queries_total", proto="doh") == \
        (2 if case[0] == "post-response" else 1)
    assert delta(m0, m1, "nxdns_dropped_total", reason="bad_frame") == \
        (1 if case[0] == "post-response" else 0)
    assert [q.qname.lower().rstrip(".") for q in up.queries()] == ["after-error.example"]


def _http1_request(port, alpn):
    with tls_connect(port, alpn=alpn) as s:
        assert s.selected_alpn_protocol() in (None, "http/1.1", "h2")
        s.sendall(b"GET /dns-query?dns=" + b64url(qwire("h1.example")).encode() +
                  b" HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/dns-message\r\n\r\n")
        data = b""
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            s.settimeout(max(0.01, end - time.monotonic()))
            try:
                chunk = s.recv(65535)
            except (socket.timeout, ssl.SSLError, ConnectionResetError):
                break
            if not chunk:
                break
            data += chunk
        return data


@pytest.mark.parametrize("alpn", [None, ["http/1.1", "h2"]], ids=["no-alpn", "alpn-both"])
def test_http1_request_gets_505_with_a_body(make_upstream, make_nxdns, alpn):
    up = make_upstream()
    nx = make_nxdns([up], config=doh_cfg())
    d0 = nx.counter("nxdns_doh_dropped_total", reason="http1")
    data = _http1_request(nx.doh_port, alpn)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 505 "), f"not a 505: {data[:200]!r}"
    lines = {ln.split(b":", 1)[0].lower(): ln.split(b":", 1)[1].strip()
             for ln in head.split(b"\r\n")[1:] if b":" in ln}
    assert int(lines[b"content-length"]) == len(body) > 0
    assert b"HTTP/2" in body
    assert nx.wait_counter("nxdns_doh_dropped_total", d0 + 1, reason="http1") == d0 + 1
    assert not up.queries("h1.example")
    assert nx.counter("nxdns_queries_total", proto="doh") == 0
    assert answers(nx.doh(make_query("after-h1.example"))) == ["192.0.2.1"]


# ------------------------------------------------------------------ client id in the path


def test_path_client_id_selects_the_clients_policy(make_upstream, make_nxdns):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], doh_cfg(
        filter={"deny": ["denied.example"]}, groups={"open": {"filtering": False}},
        clients=[{"name": "phone", "ids": ["id:phone"], "groups": ["open"]}]))
    m0 = nx.metrics()
    q = make_query("denied.example")
    for path in ("/dns-query", "/dns-query/", "/dns-query/tablet"):
        assert answers(nx.doh(q, path=path)) == ["0.0.0.0"], f"{path}: expected blocked"
    for path, post in (("/dns-query/phone", True), ("/dns-query/PHONE", False)):
        assert answers(nx.doh(q, path=path, post=post)) == ["192.0.2.1"], \
            f"{path}: the phone's policy was not applied"
    m1 = nx.metrics()
    assert delta(m0, m1, "nxdns_answers_total", result="blocked") == 3
    assert delta(m0, m1, "nxdns_answers_total", result="forwarded") == 2
    assert len(up.queries("denied.example")) == 2


def test_path_client_id_does_not_widen_access(make_upstream, make_nxdns):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], doh_cfg(
        access={"allow": ["127.0.0.2"], "admit_client_ids": False},
        clients=[{"name": "phone", "ids": ["id:phone"]}]))
    a0 = nx.counter("nxdns_acl_refused_total")
    r = nx.doh(make_query("outside.example"), path="/dns-query/phone")
    assert r.rcode() == dns.rcode.REFUSED, "a client id in the path widened access"
    assert nx.counter("nxdns_acl_refused_total") == a0 + 1
    assert not up.queries("outside.example")


# ------------------------------------------------------------------ bounds and bad input


def test_connection_cap_evicts_idle_then_refuses(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["busy-a.example"] = Rule(delay_ms=1500, records=[("A", "192.0.2.31")])
    up.script["busy-b.example"] = Rule(delay_ms=1500, records=[("A", "192.0.2.32")])
    nx = make_nxdns([up], config=doh_cfg(listener={"dns_max_connections": 2, "workers": 1,
                                                   "tcp_idle_timeout_ms": 30000}))
    ev0 = nx.counter("nxdns_stream_evicted_total")
    cap0 = nx.counter("nxdns_dropped_total", reason="connection_cap")
    idle, busy = H2Client(nx.doh_port), H2Client(nx.doh_port)
    try:
        assert answers(dns_of(idle.wait(idle.post("/dns-query", qwire("i.example")))[1])) == \
            ["192.0.2.1"]
        sb = busy.post("/dns-query", qwire("busy-b.example"))
        assert up.wait_for("busy-b.example")
        # At the cap: the idle connection makes room for a third.
        with H2Client(nx.doh_port) as third:
            sa = third.post("/dns-query", qwire("busy-a.example"))
            assert up.wait_for("busy-a.example")
            assert wait_closed(idle.sock, 3.0), "the idle DoH connection was not evicted"
            assert nx.wait_counter("nxdns_stream_evicted_total", ev0 + 1) == ev0 + 1
            # Both remaining connections have a stream in flight: a fourth is refused.
            with pytest.raises((ConnectionError, ssl.SSLError, socket.timeout, OSError,
                                RuntimeError, TimeoutError)):
                with H2Client(nx.doh_port, timeout=2.0) as fourth:
                    fourth.wait(fourth.post("/dns-query", qwire("refused.example")), 2.0)
            assert nx.wait_counter("nxdns_dropped_total", cap0 + 1, reason="connection_cap") \
                == cap0 + 1
            assert answers(dns_of(third.wait(sa, 5.0)[sa])) == ["192.0.2.31"]
        assert answers(dns_of(busy.wait(sb, 5.0)[sb])) == ["192.0.2.32"]
    finally:
        idle.close()
        busy.close()
    assert not up.queries("refused.example")
    assert nx.counter("nxdns_doh_server_connections_peak") == 2


def test_no_permit_refuses_the_stream_and_keeps_the_connection(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["hold.example"] = Rule(delay_ms=1500, records=[("A", "192.0.2.50")])
    nx = make_nxdns([up], config=doh_cfg(query_budget={"permits": 1},
                                         listener={"permit_wait_ms": 200}))
    d0 = nx.counter("nxdns_dropped_total", reason="dropped_no_permit")
    w0 = nx.counter("nxdns_stream_permit_waits_total")
    with H2Client(nx.doh_port) as h:
        hold = h.post("/dns-query", qwire("hold.example"))
        assert up.wait_for("hold.example")
        assert wait_until(lambda: nx.counter("nxdns_query_permits_in_use") == 1)
        t0 = time.monotonic()
        waiter = h.post("/dns-query", qwire("waiter.example"))
        rec = h.wait(waiter, 3.0)[waiter]
        took = time.monotonic() - t0
        assert rec["reset"] == REFUSED_STREAM, f"expected RST_STREAM REFUSED_STREAM, got {rec}"
        assert 0.15 <= took < 1.4, f"refused after {took:.2f}s with permit_wait_ms 200"
        assert nx.counter("nxdns_dropped_total", reason="dropped_no_permit") == d0 + 1
        assert nx.counter("nxdns_stream_permit_waits_total") >= w0 + 1
        assert not up.queries("waiter.example")
        # The held query is answered, and the same connection serves a retry.
        assert answers(dns_of(h.wait(hold, 3.0)[hold])) == ["192.0.2.50"]
        assert wait_until(lambda: nx.counter("nxdns_query_permits_in_use") == 0)
        retry = h.post("/dns-query", qwire("waiter.example"))
        assert answers(dns_of(h.wait(retry)[retry])) == ["192.0.2.1"]
        assert not h.closed and h.terminated is None


def test_query_waits_for_a_permit_within_the_wait(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["hold.example"] = Rule(delay_ms=500, records=[("A", "192.0.2.50")])
    nx = make_nxdns([up], config=doh_cfg(query_budget={"permits": 1},
                                         listener={"permit_wait_ms": 3000}))
    with H2Client(nx.doh_port) as h:
        hold = h.post("/dns-query", qwire("hold.example"))
        assert up.wait_for("hold.example")
        waiter = h.get("/dns-query?dns=" + b64url(qwire("waiter.example")))
        got = h.wait([hold, waiter], 5.0)
        assert answers(dns_of(got[waiter])) == ["192.0.2.1"]
        assert answers(dns_of(got[hold])) == ["192.0.2.50"]
    assert nx.counter("nxdns_stream_permit_waits_total") >= 1
    assert nx.counter("nxdns_dropped_total", reason="dropped_no_permit") == 0


@pytest.mark.parametrize("preface", [
    b"PR\x00\x01" + b"\x00" * 40,  # starts like the preface, then is not it (nor HTTP/1)
    bytes(range(64)),
], ids=["almost-preface", "bytes"])
def test_garbage_preface_counted_and_closed(make_upstream, make_nxdns, preface):
    nx = make_nxdns([make_upstream()], config=doh_cfg())
    m0 = nx.metrics()
    with tls_connect(nx.doh_port, alpn=["h2"]) as s:
        assert s.selected_alpn_protocol() == "h2"
        s.sendall(preface)
        assert wait_closed(s, 3.0), "a garbage HTTP/2 preface left the connection open"
    assert wait_until(lambda: nx.metrics().sum("nxdns_doh_dropped_total") >
                      m0.sum("nxdns_doh_dropped_total"))
    m1 = nx.metrics()
    assert delta(m0, m1, "nxdns_doh_dropped_total", reason="bad_preface") == 1
    assert m1.sum("nxdns_doh_dropped_total") - m0.sum("nxdns_doh_dropped_total") == 1
    assert m1.get("nxdns_queries_total", proto="doh") == 0
    assert answers(nx.doh(make_query("after-preface.example"))) == ["192.0.2.1"]


def test_protocol_error_gets_goaway_and_is_counted(make_upstream, make_nxdns):
    """A valid preface, then a DATA frame on stream 0 (RFC 9113 6.1: a connection error of
    type PROTOCOL_ERROR): the server says GOAWAY(PROTOCOL_ERROR) and closes."""
    nx = make_nxdns([make_upstream()], config=doh_cfg())
    d0 = nx.counter("nxdns_doh_dropped_total", reason="protocol_error")
    with tls_connect(nx.doh_port, alpn=["h2"]) as s:
        settings = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # empty SETTINGS
        data0 = b"\x00\x00\x04\x00\x00\x00\x00\x00\x00" + b"junk"  # DATA on stream 0
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + settings + data0)
        got = b""
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            s.settimeout(max(0.01, end - time.monotonic()))
            try:
                chunk = s.recv(65535)
            except (socket.timeout, ssl.SSLError, ConnectionResetError):
                break
            if not chunk:
                break
            got += chunk
    frames, at = [], 0
    while at + 9 <= len(got):
        n = int.from_bytes(got[at:at + 3], "big")
        frames.append((got[at + 3], got[at + 9:at + 9 + n]))
        at += 9 + n
    goaways = [payload for ftype, payload in frames if ftype == 0x7]
    assert goaways, f"no GOAWAY before the close; frames {[f for f, _ in frames]}"
    assert int.from_bytes(goaways[0][4:8], "big") == 0x1, "GOAWAY is not PROTOCOL_ERROR"
    assert nx.wait_counter("nxdns_doh_dropped_total", d0 + 1, reason="protocol_error") == d0 + 1
    assert answers(nx.doh(make_query("after-goaway.example"))) == ["192.0.2.1"]


def test_garbage_tls_handshake_and_stall_on_doh(make_upstream, make_nxdns):
    nx = make_nxdns([make_upstream()], config=doh_cfg(listener={"tls_handshake_timeout_ms": 300}))
    e0 = nx.metrics().sum("nxdns_tls_errors_total", side="server")
    t0 = nx.counter("nxdns_dropped_total", reason="tls_handshake_timeout")
    with tcp_connect(nx.doh_port) as s:
        s.sendall(bytes(range(256)) * 4)
        assert wait_closed(s, 3.0)
    assert wait_until(lambda: nx.metrics().sum("nxdns_tls_errors_total", side="server") == e0 + 1)
    with tcp_connect(nx.doh_port) as s:
        assert wait_closed(s, 3.0), "a silent client kept its DoH connection past the timeout"
    assert nx.wait_counter("nxdns_dropped_total", t0 + 1, reason="tls_handshake_timeout") == t0 + 1
    assert answers(nx.doh(make_query("after.example"))) == ["192.0.2.1"]


def test_stream_flood_beyond_max_streams_refused(make_upstream, make_nxdns):
    up = make_upstream()
    for i in range(6):
        up.script[f"flood{i}.example"] = Rule(delay_ms=600, records=[("A", f"192.0.2.{80 + i}")])
    nx = make_nxdns([up], config=doh_cfg(listener={"doh_max_streams": 2}))
    c0 = nx.counter("nxdns_doh_dropped_total", reason="stream_cap")
    with H2Client(nx.doh_port) as h:
        # Six streams at once, before the server's SETTINGS can have been read: the client does
        # not know the limit yet, as a flooding peer would not care about it.
        sids = [h.post("/dns-query", qwire(f"flood{i}.example")) for i in range(6)]
        got = h.wait(sids, 5.0)
        assert h.remote_settings.get(3) == 2, \
            f"SETTINGS_MAX_CONCURRENT_STREAMS {h.remote_settings.get(3)}, want 2"
        served = [s for s in sids if got[s]["reset"] is None]
        refused = [s for s in sids if got[s]["reset"] == REFUSED_STREAM]
        assert len(served) == 2 and len(refused) == 4, \
            f"served {served}, refused {refused}: {[got[s]['reset'] for s in sids]}"
        for s in served:
            i = sids.index(s)
            assert answers(dns_of(got[s])) == [f"192.0.2.{80 + i}"]
        assert nx.counter("nxdns_doh_dropped_total", reason="stream_cap") == c0 + 4
        assert sum(len(up.exchanges(f"flood{i}.example")) for i in range(6)) == 2
        # Within the limit, the same connection goes on serving.
        again = [h.post("/dns-query", qwire(f"flood{sids.index(s)}.example")) for s in refused[:2]]
        got = h.wait(again, 5.0)
        assert all(got[s]["status"] == 200 for s in again)
    assert nx.counter("nxdns_queries_total", proto="doh") == 4
