"""Encrypted upstreams: nxdns forwarding over DNS over TLS (RFC 7858) and DNS over HTTPS
(RFC 8484) to real servers on loopback (tlsservers.py: Debian's unbound and Knot Resolver,
serving only local names, with a certificate made by `nxdns cert --self-signed`).

The `test_fixture_*` tests need no nxdns daemon: they prove each server, the relay and the dead
ports with kdig and Python's ssl, so that in the rest only nxdns is unproven.

Trust. The configuration has no CA-file key: a server's certificate is verified against the
system store (Debian's ca-certificates) or against `pin_sha256`. With the stock system store a
self-signed certificate is never trusted, so the answering tests pin it. To prove verification
by name as well, test_trusted_by_name_* run nxdns in a private mount namespace whose system
bundle (/etc/ssl/certs/ca-certificates.crt, bind-mounted) also holds the test certificate.

Every server and client socket is on 127.0.0.1; each test is bounded by its alarm.
"""

from __future__ import annotations

import socket
import ssl
import time
from pathlib import Path
from typing import Dict, List, Optional

import dns.query
import dns.rcode
import pytest

from adminkit import MountNS
from filterkit import start_nx
from harness import answers, closed_port, make_query, parallel, run, wait_until
from tlsservers import KDIG, kdig, kdig_rdata, kdig_status

EXCH = "nxdns_upstream_exchanges_total"
LATENCY_COUNT = "nxdns_upstream_latency_seconds_count"
HANDSHAKES = "nxdns_tls_handshakes_total"
TLS_ERRORS = "nxdns_tls_errors_total"
OUTCOMES = ("answer", "timeout", "cancelled", "error")
SYSTEM_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")

# "A handful" of client handshakes for a run of sequential queries: one connection per worker
# (the base config has 2) and room for one reconnect each. A client that handshakes per query
# would show 50.
FEW_HANDSHAKES = 4


def recs(prefix: str, n: int, base: int = 100) -> Dict[str, list]:
    """n names prefix-0.example ... with A 192.0.2.(base+i)."""
    return {f"{prefix}-{i}.example": [("A", f"192.0.2.{base + i}")] for i in range(n)}


def pinned(url: str, *pins: str, name: Optional[str] = None) -> dict:
    m = {"url": url, "pin_sha256": list(pins)}
    if name:
        m["name"] = name
    return m


def start(make_nxdns, servers: list, upstream: Optional[dict] = None, config: Optional[dict] = None,
          **kw):
    """nxdns forwarding to `servers` (URL strings or mappings); written as JSON, since the
    mapping form is a list of mappings."""
    cfg = {"upstream": {"servers": servers, **(upstream or {})}}
    if config:
        cfg.update(config)
    return start_nx(make_nxdns, [], cfg, **kw)


def ask(nx, name: str, rdtype: str = "A", timeout: float = 5.0):
    """(reply, seconds) for one UDP query to nxdns."""
    t0 = time.monotonic()
    r = nx.udp(make_query(name, rdtype, edns=0), timeout=timeout)
    return r, time.monotonic() - t0


def outcomes(nx, server: str) -> Dict[str, float]:
    m = nx.metrics()
    return {o: m.get(EXCH, server=server, outcome=o) for o in OUTCOMES}


def client_handshakes(nx) -> float:
    return nx.counter(HANDSHAKES, side="client")


def verify_errors(nx) -> float:
    return nx.counter(TLS_ERRORS, side="client", reason="verify")


@pytest.fixture(params=["unbound", "kresd"])
def make_server(request, make_unbound, make_kresd):
    """The two server implementations behind one factory: make_server(records, cert=None)."""
    return make_unbound if request.param == "unbound" else make_kresd


# ==================================================================== the fixtures, by kdig

def test_fixture_unbound_by_kdig(make_unbound, make_cert):
    """unbound answers its local names over DoT and DoH to kdig with the pin, or with the
    certificate as CA and its name; refuses a wrong pin and a wrong name; answers NXDOMAIN for
    any other name (no recursion); counts DoT and DoH queries apart."""
    u = make_unbound({"enc-fix.example": [("A", "192.0.2.71")]})
    other = make_cert("other")
    assert u.dot_queries() == 0 and u.doh_queries() == 0
    assert kdig_rdata(kdig(u.dot_port, "enc-fix.example", pin=u.pin)) == ["192.0.2.71"]
    assert kdig_rdata(kdig(u.doh_port, "enc-fix.example", https=True, pin=u.pin)) == \
        ["192.0.2.71"]
    r = kdig(u.dot_port, "enc-fix.example", ca=u.cert.cert, hostname="enc.test")
    assert kdig_rdata(r) == ["192.0.2.71"], r.stdout
    for r in (kdig(u.dot_port, "enc-fix.example", pin=other.pin),
              kdig(u.dot_port, "enc-fix.example", ca=u.cert.cert, hostname="wrong.test"),
              kdig(u.doh_port, "enc-fix.example", https=True, pin=other.pin)):
        assert kdig_status(r) is None and kdig_rdata(r) == [], r.stdout
    assert kdig_status(kdig(u.dot_port, "not-local.example", pin=u.pin)) == "NXDOMAIN"
    assert u.dot_queries() == 3  # two for enc-fix (pin, CA), one for not-local
    assert u.doh_queries() == 1
    assert u.logged_queries("enc-fix.example") == 3


def test_fixture_kresd_by_kdig(make_kresd, make_cert):
    """Knot Resolver answers its names over DoT and DoH (NODATA for a type it has none of),
    refuses a wrong pin, and DENYs every other name without iterating."""
    k = make_kresd({"enc-kfix.example": [("A", "192.0.2.81"), ("AAAA", "2001:db8::81")]})
    other = make_cert("other")
    before = k.queries()
    assert kdig_rdata(kdig(k.dot_port, "enc-kfix.example", pin=k.pin)) == ["192.0.2.81"]
    r = kdig(k.doh_port, "enc-kfix.example", "AAAA", https=True, pin=k.pin)
    assert kdig_rdata(r, "AAAA") == ["2001:db8::81"], r.stdout
    r = kdig(k.dot_port, "enc-kfix.example", "TXT", pin=k.pin)
    assert kdig_status(r) == "NOERROR" and kdig_rdata(r, "TXT") == []
    r = kdig(k.dot_port, "enc-kfix.example", pin=other.pin)
    assert kdig_status(r) is None, r.stdout
    assert kdig_status(kdig(k.dot_port, "not-local.example", pin=k.pin)) == "NXDOMAIN"
    assert k.queries() - before == 4


def test_fixture_relay_counts_connections(make_unbound, make_relay):
    """The relay passes TLS through (the pin and the IP SAN still verify) and counts one
    connection per kdig run, and one for several queries on a kept-open connection."""
    u = make_unbound(recs("enc-rel", 3))
    rl = make_relay(u.dot_port)
    for i in range(2):
        r = kdig(rl.port, f"enc-rel-{i}.example", pin=u.pin)
        assert kdig_rdata(r) == [f"192.0.2.{100 + i}"], r.stdout
    assert wait_until(lambda: rl.accepted == 2, 2)
    # kdig +keepopen: three queries, one connection
    r = run([KDIG, "@127.0.0.1", "-p", str(rl.port), "+tls", f"+tls-pin={u.pin}", "+keepopen",
             "+time=2", "+retry=0", "+short"] + [f"enc-rel-{i}.example" for i in range(3)])
    assert r.stdout.split() == ["192.0.2.100", "192.0.2.101", "192.0.2.102"], r.stdout
    assert wait_until(lambda: rl.accepted == 3, 2)
    assert u.dot_queries() == 5


@pytest.mark.parametrize("proto", ["dot", "doh"])
def test_fixture_unbound_keeps_one_connection(make_unbound, make_relay, proto):
    """unbound serves 50 queries on one DoT connection and on one HTTP/2 connection (a
    dnspython client, trusting the certificate as its CA by the IP SAN): the reuse tests'
    bounds are nxdns's to meet, not limits of the server."""
    u = make_unbound(recs("enc-one", 50))
    rl = make_relay(u.dot_port if proto == "dot" else u.doh_port)
    ctx = ssl.create_default_context(cafile=str(u.cert.cert))
    if proto == "dot":
        with socket.create_connection(("127.0.0.1", rl.port), timeout=3) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                for i in range(50):
                    r = dns.query.tls(make_query(f"enc-one-{i}.example", edns=0), "127.0.0.1",
                                      port=rl.port, sock=s, timeout=3)
                    assert answers(r) == [f"192.0.2.{100 + i}"]
    else:
        httpx = pytest.importorskip("httpx")
        with httpx.Client(http2=True, verify=ctx, timeout=3) as client:
            for i in range(50):
                r = dns.query.https(make_query(f"enc-one-{i}.example", edns=0),
                                    f"https://127.0.0.1:{rl.port}/dns-query", session=client,
                                    timeout=3)
                assert answers(r) == [f"192.0.2.{100 + i}"]
    assert rl.accepted == 1
    assert u.served(proto) == 50


def test_fixture_dead_ports(silent_tcp):
    """The silent port accepts and reads a ClientHello but never answers it (a handshake
    times out); a closed port refuses."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", silent_tcp.port), timeout=3) as raw:
        raw.settimeout(0.5)
        with pytest.raises((socket.timeout, TimeoutError)):
            ctx.wrap_socket(raw, server_hostname="enc.test")
    assert wait_until(lambda: silent_tcp.accepted == 1 and silent_tcp.received > 0, 2)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", closed_port()), timeout=3).close()


# ==================================================================== answers

@pytest.mark.parametrize("proto", ["dot", "doh"])
def test_answers_pinned(make_nxdns, make_server, proto):
    """A pinned DoT / DoH upstream (unbound and Knot Resolver): the answer is the server's, it
    arrived over that protocol, the client side did a TLS handshake, and the per-server row of
    /metrics (labelled with the URL as written) counts the answer."""
    srv = make_server({"enc-a.example": [("A", "192.0.2.71")],
                       "enc-b.example": [("AAAA", "2001:db8::72")]})
    url = srv.dot_url() if proto == "dot" else srv.doh_url()
    nx = start(make_nxdns, [pinned(url, srv.pin)])
    before = srv.served(proto)
    r, secs = ask(nx, "enc-a.example")
    assert r.rcode() == dns.rcode.NOERROR
    assert answers(r) == ["192.0.2.71"]
    r, _ = ask(nx, "enc-b.example", "AAAA")
    assert answers(r) == ["2001:db8::72"]
    assert srv.served(proto) - before == 2
    assert client_handshakes(nx) >= 1
    assert nx.wait_counter(EXCH, 2, server=url, outcome="answer") == 2
    assert verify_errors(nx) == 0


# ==================================================================== connection reuse

def _reuse(make_nxdns, make_unbound, make_relay, proto: str, n: int = 50):
    u = make_unbound(recs("enc-r", n))
    rl = make_relay(u.dot_port if proto == "dot" else u.doh_port)
    url = u.dot_url(port=rl.port) if proto == "dot" else u.doh_url(port=rl.port)
    nx = start(make_nxdns, [pinned(url, u.pin)])
    for i in range(n):
        r, _ = ask(nx, f"enc-r-{i}.example")
        assert answers(r) == [f"192.0.2.{100 + i}"], f"query {i}"
    assert u.served(proto) >= n
    assert nx.wait_counter(EXCH, n, server=url, outcome="answer") >= n
    hs = client_handshakes(nx)
    assert 1 <= hs <= FEW_HANDSHAKES, f"{hs} client handshakes for {n} queries"
    # the relay is a witness independent of nxdns's own counters
    assert 1 <= rl.accepted <= FEW_HANDSHAKES, f"{rl.accepted} connections for {n} queries"
    return u, rl, nx, url


@pytest.mark.nx_timeout(40)
def test_dot_reuses_connections(make_nxdns, make_unbound, make_relay):
    """50 sequential distinct queries over DoT: 50 right answers through a handful of TLS
    connections (nxdns's handshake counter and the relay's connection count agree on it)."""
    _reuse(make_nxdns, make_unbound, make_relay, "dot")


@pytest.mark.nx_timeout(40)
def test_doh_reuses_and_multiplexes(make_nxdns, make_unbound, make_relay):
    """DoH: 50 sequential queries on a handful of HTTP/2 connections, then 40 concurrent ones
    multiplexed as streams on them: no new connection is needed."""
    u, rl, nx, url = _reuse(make_nxdns, make_unbound, make_relay, "doh")
    conns = rl.accepted
    hs = client_handshakes(nx)
    res = parallel([lambda i=i: ask(nx, f"enc-r-{i}.example")[0] for i in range(40)])
    for i, r in enumerate(res):
        assert not isinstance(r, Exception), f"query {i}: {r!r}"
        assert answers(r) == [f"192.0.2.{100 + i}"], f"query {i}"
    assert nx.wait_counter(EXCH, 90, server=url, outcome="answer") >= 90
    assert u.doh_queries() >= 90
    assert rl.accepted - conns <= 2, f"{rl.accepted - conns} new connections for 40 streams"
    assert client_handshakes(nx) - hs <= 2


# ==================================================================== refusals

DEADLINE_MS = 1500
SLACK_S = 1.0  # reply-time allowance past the deadline on a loaded 2-core machine


def _refused(nx, srv, proto: str, name: str = "enc-a.example"):
    """The query gets SERVFAIL within the deadline, the client side counts a verify error,
    and the server never saw the query (nothing is sent over an unverified connection)."""
    r, secs = ask(nx, name)
    assert r.rcode() == dns.rcode.SERVFAIL
    assert answers(r) == []
    assert secs <= DEADLINE_MS / 1000 + SLACK_S, f"SERVFAIL after {secs:.2f}s"
    assert nx.wait_counter(TLS_ERRORS, 1, side="client", reason="verify") >= 1
    assert srv.served(proto) == 0


@pytest.mark.parametrize("proto", ["dot", "doh"])
def test_wrong_pin_refused(make_nxdns, make_unbound, make_cert, proto):
    """Pinned to another key: the server's certificate is refused (and the system store, the
    pin's fallback, does not hold a self-signed one either)."""
    u = make_unbound({"enc-a.example": [("A", "192.0.2.71")]})
    other = make_cert("other", "enc.test")
    assert other.pin != u.pin
    url = u.dot_url() if proto == "dot" else u.doh_url()
    nx = start(make_nxdns, [pinned(url, other.pin)], {"timeout_ms": DEADLINE_MS})
    _refused(nx, u, proto)
    assert outcomes(nx, url)["answer"] == 0


@pytest.mark.parametrize("proto", ["dot", "doh"])
def test_name_without_trust_refused(make_nxdns, make_unbound, proto):
    """By name and no pin (`#enc.test`, the name the certificate does carry): verified against
    the system store, which does not trust a self-signed certificate: refused."""
    u = make_unbound({"enc-a.example": [("A", "192.0.2.71")]})
    url = u.dot_url("enc.test") if proto == "dot" else u.doh_url("enc.test")
    nx = start(make_nxdns, [url], {"timeout_ms": DEADLINE_MS})
    _refused(nx, u, proto)


def test_ip_without_name_or_pin_refused(make_nxdns, make_unbound):
    """`tls://127.0.0.1:PORT`, no name and no pin: the certificate must carry the address as an
    IP SAN, which `nxdns cert` puts in (127.0.0.1), but the chain must also verify against the
    system store, and a self-signed certificate is not in it: refused.
    (test_trusted_by_name_and_address shows the same URL accepted once the store trusts it.)"""
    u = make_unbound({"enc-a.example": [("A", "192.0.2.71")]})
    nx = start(make_nxdns, [u.dot_url()], {"timeout_ms": DEADLINE_MS})
    _refused(nx, u, "dot")


@pytest.mark.parametrize("proto", ["dot", "doh"])
def test_pin_accepted_without_ca_or_name(make_nxdns, make_unbound, make_cert, proto):
    """A matching pin is enough (as kdig +tls-pin; net/tls.h: with a matching pin the CA and
    name checks are not required): accepted although the configured name is not the
    certificate's and no CA trusts it, and one matching pin among several suffices."""
    u = make_unbound({"enc-a.example": [("A", "192.0.2.71")]})
    other = make_cert("other")
    url = u.dot_url() if proto == "dot" else u.doh_url()
    nx = start(make_nxdns, [pinned(url, other.pin, u.pin, name="not-the-cert.test")])
    r, _ = ask(nx, "enc-a.example")
    assert answers(r) == ["192.0.2.71"]
    assert u.served(proto) == 1
    assert verify_errors(nx) == 0


# ==================================================================== dead servers

@pytest.mark.parametrize("dead_kind", ["silent", "refused"])
def test_dead_dot_beside_live(make_nxdns, make_unbound, silent_tcp, dead_kind):
    """A dead DoT server first in the list (a port that accepts and never speaks TLS, or one
    that refuses) and a live one second, upstream.race 2: every query is answered by the live
    one well within the deadline, and the dead one never answers."""
    u = make_unbound(recs("enc-d", 5))
    dead_port = silent_tcp.port if dead_kind == "silent" else closed_port()
    dead = f"tls://127.0.0.1:{dead_port}"
    live = u.dot_url()
    nx = start(make_nxdns, [pinned(dead, u.pin), pinned(live, u.pin)],
               {"race": 2, "stagger_ms": 100, "timeout_ms": 2000})
    for i in range(5):
        r, secs = ask(nx, f"enc-d-{i}.example")
        assert answers(r) == [f"192.0.2.{100 + i}"], f"query {i}"
        assert secs < 1.5, f"query {i} answered after {secs:.2f}s"
    assert nx.wait_counter(EXCH, 5, server=live, outcome="answer") >= 5
    o = outcomes(nx, dead)
    assert o["answer"] == 0
    assert sum(o.values()) >= 1, "the dead server was never tried"
    if dead_kind == "silent":
        assert silent_tcp.accepted >= 1


def test_only_dead_dot_servfails_within_deadline(make_nxdns, make_cert, silent_tcp):
    """Only a silent DoT server: SERVFAIL by the one deadline (or sooner, should a handshake
    timeout end the attempt first), and the attempt is counted as not answered."""
    cert = make_cert("c")
    dead = f"tls://127.0.0.1:{silent_tcp.port}"
    nx = start(make_nxdns, [pinned(dead, cert.pin)], {"timeout_ms": 1000})
    r, secs = ask(nx, "enc-x.example")
    assert r.rcode() == dns.rcode.SERVFAIL
    assert secs <= 1.0 + SLACK_S, f"SERVFAIL after {secs:.2f}s"
    assert silent_tcp.accepted >= 1
    assert wait_until(lambda: sum(outcomes(nx, dead).values()) >= 1, 3)
    assert outcomes(nx, dead)["answer"] == 0


# ==================================================================== per-server stats

def test_per_server_metrics(make_nxdns, make_unbound):
    """DoT and DoH servers side by side (one forward zone each): each one's /metrics rows, under
    its URL as written, count exactly its own answers and their latencies, and unbound saw the
    same split."""
    u = make_unbound({**{f"q{i}.dot.example": [("A", f"192.0.2.{10 + i}")] for i in range(4)},
                      **{f"q{i}.doh.example": [("A", f"192.0.2.{20 + i}")] for i in range(6)}})
    dot, doh = u.dot_url(), u.doh_url()
    nx = start(make_nxdns, [pinned(dot, u.pin)],
               {"forward_zones": {"dot.example": [pinned(dot, u.pin)],
                                  "doh.example": [pinned(doh, u.pin)]}})
    for i in range(4):
        assert answers(ask(nx, f"q{i}.dot.example")[0]) == [f"192.0.2.{10 + i}"]
    for i in range(6):
        assert answers(ask(nx, f"q{i}.doh.example")[0]) == [f"192.0.2.{20 + i}"]
    assert nx.wait_counter(EXCH, 6, server=doh, outcome="answer") == 6
    m = nx.metrics()
    assert m.get(EXCH, server=dot, outcome="answer") == 4
    assert m.get(LATENCY_COUNT, server=dot) == 4
    assert m.get(LATENCY_COUNT, server=doh) == 6
    assert u.dot_queries() == 4 and u.doh_queries() == 6


# ==================================================================== verification by name

@pytest.fixture
def trusting_ns(tmp_path, make_unbound):
    """(ns, unbound): a private mount namespace whose system CA bundle also trusts unbound's
    certificate (enc.test, 127.0.0.1). Root only."""
    u = make_unbound({"enc-a.example": [("A", "192.0.2.71")],
                      "enc-b.example": [("A", "192.0.2.72")],
                      "enc-c.example": [("A", "192.0.2.73")],
                      "enc-d.example": [("A", "192.0.2.74")]})
    ns = MountNS(tmp_path / "ns")
    if not ns.ok:
        pytest.skip(ns.why)
    try:
        bundle = tmp_path / "ca-bundle.crt"
        bundle.write_text(SYSTEM_BUNDLE.read_text() + "\n" + u.cert.cert.read_text())
        ns.run("mount", "--bind", str(bundle), str(SYSTEM_BUNDLE))
        yield ns, u
    finally:
        ns.close()


def _prefix(ns) -> List[str]:
    return ["nsenter", "-t", str(ns.holder.pid), "-m", "--"]


@pytest.mark.nx_timeout(40)
def test_trusted_by_name_and_address(make_nxdns, trusting_ns):
    """With the certificate in the system store (in a namespace): `#enc.test` over DoT and DoH
    and the bare address (its IP SAN) are accepted with no pin; a name the certificate does not
    carry is refused and counted. kdig, in and out of the namespace, shows the store is what
    changed."""
    ns, u = trusting_ns
    r = kdig(u.dot_port, "enc-a.example", system_ca=True, hostname="enc.test",
             prefix=_prefix(ns))
    assert kdig_rdata(r) == ["192.0.2.71"], r.stdout
    r = kdig(u.dot_port, "enc-a.example", system_ca=True, hostname="enc.test")
    assert kdig_rdata(r) == [], r.stdout  # outside: the stock store does not trust it
    base = u.dot_queries() + u.doh_queries()

    nx = start(make_nxdns, [u.dot_url("enc.test")],
               {"timeout_ms": DEADLINE_MS,
                "forward_zones": {"enc-b.example": [u.doh_url("enc.test")],
                                  "enc-c.example": [u.dot_url()],
                                  "enc-d.example": [u.dot_url("wrong.test")]}},
               start=False)
    ns.start_daemon(nx)
    assert answers(ask(nx, "enc-a.example")[0]) == ["192.0.2.71"]   # DoT by name
    assert answers(ask(nx, "enc-b.example")[0]) == ["192.0.2.72"]   # DoH by name
    assert answers(ask(nx, "enc-c.example")[0]) == ["192.0.2.73"]   # DoT by IP SAN
    assert verify_errors(nx) == 0
    r, secs = ask(nx, "enc-d.example")                               # name mismatch
    assert r.rcode() == dns.rcode.SERVFAIL
    assert secs <= DEADLINE_MS / 1000 + SLACK_S
    assert nx.wait_counter(TLS_ERRORS, 1, side="client", reason="verify") >= 1
    assert u.dot_queries() + u.doh_queries() - base == 3
    assert u.logged_queries("enc-d.example") == 0
