"""DNS over TLS (RFC 7858) against the real listener: forwarded, blocked and cached answers;
pipelined queries answered out of order; ALPN "dot" or none; the generated self-signed
certificate and its logged pin; a configured certificate, swapped on SIGHUP (a broken one keeps
the old); the SNI client id picking a client's policy without widening access; the connection
cap (eviction, refusal), permit waits, handshakes of garbage or that stall. Each asserts the
counters in /metrics too."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import time

import dns.message
import dns.query
import dns.rcode
import pytest

from fakeupstream import Rule
from filterkit import start_nx, wait_log
from harness import (answers, enc_listeners, make_query, merge, pem_der, run, self_signed_pair,
                     served_cert, tcp_connect, tcp_frame, tcp_read_msg, tls_connect, wait_closed,
                     wait_until)


def dot_cfg(**over) -> dict:
    """A DoT listener on fresh free ports, merged with `over`."""
    return merge(enc_listeners(doh=False), over)


def ask(s, name, id, rdtype="A", timeout=5.0) -> dns.message.Message:
    """One query on an open DoT connection; its answer."""
    s.sendall(tcp_frame(make_query(name, rdtype, id=id).to_wire()))
    wire = tcp_read_msg(s, timeout)
    assert wire is not None, f"the DoT connection closed instead of answering {name}"
    r = dns.message.from_wire(wire)
    assert r.id == id
    return r


def kdig(*args, timeout=10.0):
    return run(["kdig", "+time=3", "+retry=0", *args], timeout=timeout)


def delta(before, after, name, **labels):
    return after.get(name, **labels) - before.get(name, **labels)


# ------------------------------------------------------------------ answers


def test_forwarded_blocked_and_cached(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["fwd.example"] = Rule(records=[("A", "192.0.2.40")])
    nx = make_nxdns([up], config=dot_cfg(cache={"size": 1000},
                                         filter={"deny": ["blocked.example"]}))
    m0 = nx.metrics()
    assert answers(nx.dot(make_query("fwd.example", edns=0))) == ["192.0.2.40"]
    assert answers(nx.dot(make_query("fwd.example", edns=0), v6=True)) == ["192.0.2.40"]
    r = nx.dot(make_query("blocked.example", edns=0))
    assert r.rcode() == dns.rcode.NOERROR and answers(r) == ["0.0.0.0"]
    # kdig as a second, independent DoT client.
    k = kdig(f"@127.0.0.1", "-p", str(nx.dot_port), "+tls", "+short", "fwd.example")
    assert k.returncode == 0 and k.stdout.split() == ["192.0.2.40"], k.stdout + k.stderr
    m1 = nx.metrics()
    assert len(up.queries("fwd.example")) == 1, "the cached answer went to the upstream again"
    assert not up.queries("blocked.example"), "a blocked name reached the upstream"
    assert delta(m0, m1, "nxdns_answers_total", result="forwarded") == 1
    assert delta(m0, m1, "nxdns_answers_total", result="cached") == 2
    assert delta(m0, m1, "nxdns_answers_total", result="blocked") == 1
    assert delta(m0, m1, "nxdns_queries_total", proto="dot") == 4
    assert delta(m0, m1, "nxdns_queries_total", proto="udp") == 0
    assert delta(m0, m1, "nxdns_queries_total", proto="tcp") == 0
    assert delta(m0, m1, "nxdns_tls_handshakes_total", side="server") == 4
    assert m1.get("nxdns_dot_server_connections_peak") >= 1
    assert wait_until(lambda: nx.counter("nxdns_dot_server_connections") == 0), \
        "the DoT connections gauge did not return to 0 after the clients closed"


def test_pipelined_queries_answered_out_of_order(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["slow.example"] = Rule(delay_ms=1000, records=[("A", "192.0.2.20")])
    up.script["fast.example"] = Rule(records=[("A", "192.0.2.21")])
    nx = make_nxdns([up], config=dot_cfg())
    with tls_connect(nx.dot_port, alpn=["dot"]) as s:
        s.sendall(tcp_frame(make_query("slow.example", id=0x1111).to_wire()) +
                  tcp_frame(make_query("fast.example", id=0x2222).to_wire()))
        first = dns.message.from_wire(tcp_read_msg(s, 5.0))
        second = dns.message.from_wire(tcp_read_msg(s, 5.0))
        assert wait_until(lambda: nx.counter("nxdns_dot_server_connections") == 1)
    assert first.id == 0x2222, "the fast answer waited behind the slow one"
    assert answers(first) == ["192.0.2.21"]
    assert second.id == 0x1111 and answers(second) == ["192.0.2.20"]
    assert nx.counter("nxdns_queries_total", proto="dot") == 2
    assert nx.counter("nxdns_dot_server_connections_peak") == 1


@pytest.mark.parametrize("alpn", [["dot"], None], ids=["alpn-dot", "no-alpn"])
def test_alpn_dot_or_none(make_upstream, make_nxdns, alpn):
    nx = make_nxdns([make_upstream()], config=dot_cfg())
    with tls_connect(nx.dot_port, alpn=alpn) as s:
        assert s.selected_alpn_protocol() == (alpn[0] if alpn else None)
        assert s.version() in ("TLSv1.2", "TLSv1.3")
        for i in range(3):
            assert answers(ask(s, f"alpn{i}.example", 10 + i)) == ["192.0.2.1"]
    assert nx.counter("nxdns_queries_total", proto="dot") == 3
    assert nx.counter("nxdns_tls_handshakes_total", side="server") == 1


# ------------------------------------------------------------------ certificates


def test_generated_certificate_and_its_logged_pin(make_upstream, make_nxdns):
    nx = make_nxdns([make_upstream()], config=dot_cfg(tls={"server_name": "dns.test"}))
    pins = nx.logged_pins()
    assert len(pins) == 1, nx.log()
    assert "self-signed certificate" in nx.log()
    cert = nx.cert_path
    assert cert.exists(), f"no generated certificate at {cert}"
    assert served_cert(nx.dot_port) == pem_der(cert), "served certificate is not the generated one"
    # kdig checks the pin against the served key (RFC 7858 out-of-band key-pinned profile).
    port = str(nx.dot_port)
    ok = kdig("@127.0.0.1", "-p", port, f"+tls-pin={pins[0]}", "+short", "pin.example")
    assert ok.returncode == 0 and ok.stdout.split() == ["192.0.2.1"], ok.stdout + ok.stderr
    wrong = pins[0][:-6] + ("AAAAA=" if not pins[0].endswith("AAAAA=") else "BBBBB=")
    bad = kdig("@127.0.0.1", "-p", port, f"+tls-pin={wrong}", "+short", "pin.example")
    assert bad.returncode != 0 and "192.0.2.1" not in bad.stdout, "a wrong pin was accepted"
    # The certificate names the server name and the loopback addresses: verifiable by each.
    ctx = ssl.create_default_context(cafile=str(cert))
    for host, name in (("127.0.0.1", "dns.test"), ("127.0.0.1", "127.0.0.1"), ("::1", "::1")):
        with socket.create_connection((host, nx.dot_port), timeout=3) as raw:
            with ctx.wrap_socket(raw, server_hostname=name) as s:
                assert answers(ask(s, "verified.example", 5)) == ["192.0.2.1"]
    # A restart reuses the generated certificate: same pin.
    assert nx.stop() == 0
    nx.start()
    assert nx.logged_pins()[-1] == pins[0]
    assert served_cert(nx.dot_port) == pem_der(cert)


def test_configured_certificate_is_served(make_upstream, make_nxdns, tmp_path):
    cert, key = self_signed_pair(tmp_path / "pair", "dns.test")
    nx = make_nxdns([make_upstream()], config=dot_cfg(tls={"cert": str(cert), "key": str(key)}))
    assert "configured certificate" in nx.log()
    assert served_cert(nx.dot_port) == pem_der(cert)
    assert not (tmp_path / "nxdns0" / "state" / "tls" / "cert.pem").exists(), \
        "a certificate was generated although tls.cert is set"
    ctx = ssl.create_default_context(cafile=str(cert))
    with socket.create_connection(("127.0.0.1", nx.dot_port), timeout=3) as raw:
        with ctx.wrap_socket(raw, server_hostname="dns.test") as s:
            assert answers(ask(s, "configured.example", 1)) == ["192.0.2.1"]
    k = kdig("@127.0.0.1", "-p", str(nx.dot_port), f"+tls-pin={nx.logged_pins()[0]}", "+short",
             "kpin.example")
    assert k.returncode == 0 and k.stdout.split() == ["192.0.2.1"], k.stdout + k.stderr


def _replace_pair(src_cert, src_key, cert, key):
    """Overwrite cert/key in place as an admin would (temp file + rename, key first)."""
    for src, dst in ((src_key, key), (src_cert, cert)):
        tmp = dst.with_suffix(".new")
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)


def test_certificate_swap_on_sighup(make_upstream, make_nxdns, tmp_path):
    cert, key = self_signed_pair(tmp_path / "live", "dns.test")
    new_cert, new_key = self_signed_pair(tmp_path / "next", "dns.test")
    old_der, new_der = pem_der(cert), pem_der(new_cert)
    assert old_der != new_der
    nx = make_nxdns([make_upstream()], config=dot_cfg(tls={"cert": str(cert), "key": str(key)}))
    ok0 = nx.counter("nxdns_config_reloads_total", result="ok")
    with tls_connect(nx.dot_port) as before:
        assert before.getpeercert(binary_form=True) == old_der
        assert answers(ask(before, "pre.example", 1)) == ["192.0.2.1"]
        _replace_pair(new_cert, new_key, cert, key)
        nx.reload()
        assert nx.wait_counter("nxdns_config_reloads_total", ok0 + 1, result="ok") >= ok0 + 1
        assert wait_until(lambda: len(nx.logged_pins()) == 2), "no pin logged for the new cert"
        # New connections get the new certificate; the listener kept running.
        assert served_cert(nx.dot_port) == new_der
        assert served_cert(nx.dot_port, "::1") == new_der
        assert answers(nx.dot(make_query("post.example"))) == ["192.0.2.1"]
        # The connection made before the swap keeps working.
        assert answers(ask(before, "during.example", 2)) == ["192.0.2.1"]
    assert nx.alive()
    assert nx.logged_pins()[0] != nx.logged_pins()[1]


def test_broken_certificate_on_sighup_keeps_the_old(make_upstream, make_nxdns, tmp_path):
    cert, key = self_signed_pair(tmp_path / "live", "dns.test")
    der = pem_der(cert)
    nx = make_nxdns([make_upstream()], config=dot_cfg(tls={"cert": str(cert), "key": str(key)}))
    with tls_connect(nx.dot_port) as before:
        assert answers(ask(before, "pre.example", 1)) == ["192.0.2.1"]
        cert.write_text("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n"
                        "-----END CERTIFICATE-----\n")
        nx.reload()
        assert wait_log(nx, "keeping the certificate in use"), \
            "the log does not say the broken certificate was refused"
        line = [ln for ln in nx.log().splitlines() if "keeping the certificate in use" in ln][0]
        assert str(cert) in line, f"the log line does not name the file: {line}"
        assert served_cert(nx.dot_port) == der, "a broken certificate replaced the good one"
        assert answers(nx.dot(make_query("post.example"))) == ["192.0.2.1"]
        assert answers(ask(before, "during.example", 2)) == ["192.0.2.1"]
    assert len(nx.logged_pins()) == 1
    assert nx.alive()


# ------------------------------------------------------------------ client ids


def _id_config(admit: bool = False, allow=None) -> dict:
    cfg = dot_cfg(tls={"server_name": "dns.test"},
                  filter={"deny": ["denied.example"]},
                  groups={"open": {"filtering": False}},
                  clients=[{"name": "phone", "ids": ["id:phone"], "groups": ["open"]}],
                  access={"admit_client_ids": admit})
    if allow is not None:
        cfg["access"]["allow"] = allow
    return cfg


def test_sni_client_id_selects_the_clients_policy(make_upstream, make_nxdns):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], _id_config())
    m0 = nx.metrics()
    q = make_query("denied.example", edns=0)
    # No SNI, the bare server name, an unknown id: the default group, which filters.
    for sni in (None, "dns.test", "tablet.dns.test", "phone.other.test"):
        r = nx.dot(q, sni=sni)
        assert answers(r) == ["0.0.0.0"], f"SNI {sni}: expected the blocked answer"
    # The phone's id in the SNI (in any case): its group does not filter.
    for sni in ("phone.dns.test", "PHONE.DNS.Test"):
        r = nx.dot(q, sni=sni)
        assert answers(r) == ["192.0.2.1"], f"SNI {sni}: the phone's policy was not applied"
    # kdig, with the id in its SNI, agrees.
    k = kdig("@127.0.0.1", "-p", str(nx.dot_port), "+tls", "+tls-sni=phone.dns.test", "+short",
             "denied.example")
    assert k.stdout.split() == ["192.0.2.1"], k.stdout + k.stderr
    m1 = nx.metrics()
    assert delta(m0, m1, "nxdns_answers_total", result="blocked") == 4
    assert delta(m0, m1, "nxdns_answers_total", result="forwarded") == 3
    assert len(up.queries("denied.example")) == 3


@pytest.mark.parametrize("admit", [False, True], ids=["admit-false", "admit-true"])
def test_client_id_and_access_allow(make_upstream, make_nxdns, admit):
    """127.0.0.1 is outside access.allow: with admit_client_ids false the phone's id does not
    let it in; with true it does. 127.0.0.2 is allowed either way."""
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], _id_config(admit=admit, allow=["127.0.0.2"]))
    m0 = nx.metrics()
    plain = nx.dot(make_query("a.example", edns=0))
    assert plain.rcode() == dns.rcode.REFUSED, "an address outside access.allow was answered"
    phone = nx.dot(make_query("b.example", edns=0), sni="phone.dns.test")
    if admit:
        assert phone.rcode() == dns.rcode.NOERROR and answers(phone) == ["192.0.2.1"]
    else:
        assert phone.rcode() == dns.rcode.REFUSED, "a client id widened access"
    inside = nx.dot(make_query("c.example", edns=0), source="127.0.0.2")
    assert answers(inside) == ["192.0.2.1"]
    m1 = nx.metrics()
    refused = 1 if admit else 2
    assert delta(m0, m1, "nxdns_acl_refused_total") == refused
    assert delta(m0, m1, "nxdns_answers_total", result="refused") == refused
    assert not up.queries("a.example")
    assert len(up.queries("b.example")) == (1 if admit else 0)


# ------------------------------------------------------------------ bounds and bad input


def test_connection_cap_evicts_the_oldest_idle(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["busy.example"] = Rule(delay_ms=1500, records=[("A", "192.0.2.31")])
    # One worker: eviction looks at the accepting worker's connections.
    nx = make_nxdns([up], config=dot_cfg(listener={"dns_max_connections": 2, "workers": 1,
                                                   "tcp_idle_timeout_ms": 30000}))
    ev0 = nx.counter("nxdns_stream_evicted_total")
    idle = tls_connect(nx.dot_port)
    busy = tls_connect(nx.dot_port)
    try:
        assert answers(ask(idle, "idle.example", 1)) == ["192.0.2.1"]
        busy.sendall(tcp_frame(make_query("busy.example", id=2).to_wire()))
        assert up.wait_for("busy.example")
        assert wait_until(lambda: nx.counter("nxdns_dot_server_connections") == 2)
        with tls_connect(nx.dot_port) as third:
            assert answers(ask(third, "third.example", 3)) == ["192.0.2.1"]
            assert wait_closed(idle, 3.0), "the idle connection was not evicted at the cap"
            assert nx.wait_counter("nxdns_stream_evicted_total", ev0 + 1) == ev0 + 1
            r = dns.message.from_wire(tcp_read_msg(busy, 5.0))
            assert r.id == 2 and answers(r) == ["192.0.2.31"], "the busy connection lost its answer"
        assert nx.counter("nxdns_dropped_total", reason="connection_cap") == 0
        assert nx.counter("nxdns_dot_server_connections_peak") == 2
    finally:
        idle.close()
        busy.close()


def test_connection_cap_refuses_when_none_is_idle(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["busy-a.example"] = Rule(delay_ms=1500, records=[("A", "192.0.2.31")])
    up.script["busy-b.example"] = Rule(delay_ms=1500, records=[("A", "192.0.2.32")])
    nx = make_nxdns([up], config=dot_cfg(listener={"dns_max_connections": 2, "workers": 1,
                                                   "tcp_idle_timeout_ms": 30000}))
    cap0 = nx.counter("nxdns_dropped_total", reason="connection_cap")
    a, b = tls_connect(nx.dot_port), tls_connect(nx.dot_port)
    try:
        a.sendall(tcp_frame(make_query("busy-a.example", id=1).to_wire()))
        b.sendall(tcp_frame(make_query("busy-b.example", id=2).to_wire()))
        assert up.wait_for("busy-a.example") and up.wait_for("busy-b.example")
        with pytest.raises((ConnectionError, ssl.SSLError, socket.timeout, OSError)):
            c = tls_connect(nx.dot_port, timeout=2.0)
            try:
                ask(c, "refused.example", 3, timeout=2.0)
            finally:
                c.close()
        assert nx.wait_counter("nxdns_dropped_total", cap0 + 1, reason="connection_cap") \
            == cap0 + 1
        assert not up.queries("refused.example")
        # The cap is per listener address: [::1] still accepts.
        assert answers(nx.dot(make_query("v6.example"), v6=True)) == ["192.0.2.1"]
        assert answers(dns.message.from_wire(tcp_read_msg(a, 5.0))) == ["192.0.2.31"]
        assert answers(dns.message.from_wire(tcp_read_msg(b, 5.0))) == ["192.0.2.32"]
    finally:
        a.close()
        b.close()
    assert nx.counter("nxdns_stream_evicted_total") == 0


def test_query_waits_for_a_permit(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["hold.example"] = Rule(delay_ms=800, records=[("A", "192.0.2.50")])
    nx = make_nxdns([up], config=dot_cfg(query_budget={"permits": 1}))
    w0 = nx.counter("nxdns_stream_permit_waits_total")
    with tls_connect(nx.dot_port) as s:
        hold = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            hold.sendto(make_query("hold.example", id=0x5151).to_wire(), ("127.0.0.1", nx.port))
            assert up.wait_for("hold.example")
            assert wait_until(lambda: nx.counter("nxdns_query_permits_in_use") == 1)
            t0 = time.monotonic()
            s.sendall(tcp_frame(make_query("waiter.example", id=7).to_wire()))
            assert nx.wait_counter("nxdns_stream_permit_waits_total", w0 + 1) >= w0 + 1
            wire = tcp_read_msg(s, 5.0)
            assert wire is not None, "the waiting DoT query's connection was closed"
            r = dns.message.from_wire(wire)
            assert r.id == 7 and answers(r) == ["192.0.2.1"]
            assert time.monotonic() - t0 >= 0.3, "answered before the permit could have freed"
            hold.settimeout(5)
            assert answers(dns.message.from_wire(hold.recvfrom(65535)[0])) == ["192.0.2.50"]
        finally:
            hold.close()
        # The connection is still usable.
        assert answers(ask(s, "after.example", 8)) == ["192.0.2.1"]
    assert nx.counter("nxdns_dropped_total", reason="dropped_no_permit") == 0


@pytest.mark.parametrize("garbage", [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    bytes(range(256)) * 4,
    b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00",  # a handshake record holding a bogus hello
], ids=["http", "bytes", "bad-hello"])
def test_garbage_handshake_counted(make_upstream, make_nxdns, garbage):
    nx = make_nxdns([make_upstream()], config=dot_cfg())
    e0 = nx.metrics().sum("nxdns_tls_errors_total", side="server")
    with tcp_connect(nx.dot_port) as s:
        s.sendall(garbage)
        assert wait_closed(s, 3.0), "a TLS handshake of garbage left the connection open"
    assert wait_until(lambda: nx.metrics().sum("nxdns_tls_errors_total", side="server") >= e0 + 1)
    assert nx.metrics().sum("nxdns_tls_errors_total", side="server") == e0 + 1
    # The listener is unharmed.
    assert answers(nx.dot(make_query("after-garbage.example"))) == ["192.0.2.1"]
    assert nx.counter("nxdns_tls_handshakes_total", side="server") == 1


def _client_hello() -> bytes:
    """The first flight of a real TLS client (Python's OpenSSL), from memory BIOs."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ssl.create_default_context().wrap_bio(inc, out, server_hostname="dns.test")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    hello = out.read()
    assert hello[:1] == b"\x16" and len(hello) > 100
    return hello


@pytest.mark.parametrize("sent", ["nothing", "half-hello"])
def test_stalled_handshake_closed_after_timeout(make_upstream, make_nxdns, sent):
    nx = make_nxdns([make_upstream()], config=dot_cfg(
        listener={"tls_handshake_timeout_ms": 300, "tcp_idle_timeout_ms": 20000,
                  "tcp_read_timeout_ms": 20000}))
    d0 = nx.counter("nxdns_dropped_total", reason="tls_handshake_timeout")
    hello = _client_hello()
    t0 = time.monotonic()
    with tcp_connect(nx.dot_port) as s:
        if sent == "half-hello":
            s.sendall(hello[:len(hello) // 2])
        assert wait_closed(s, 5.0), "a stalled handshake was never cut off"
        took = time.monotonic() - t0
    assert 0.25 <= took < 3.0, f"closed after {took:.2f}s, tls_handshake_timeout_ms is 300"
    assert nx.wait_counter("nxdns_dropped_total", d0 + 1, reason="tls_handshake_timeout") \
        == d0 + 1
    assert wait_until(lambda: nx.counter("nxdns_dot_server_connections") == 0)
    assert answers(nx.dot(make_query("after-stall.example"))) == ["192.0.2.1"]
