"""Unbound's forwarder scenarios (NLnetLabs/unbound testdata/fwd_*.tdir, shared/suites/
unbound-fwd-upstreams): each scenario's own fake upstream file runs under Debian's ldns-testns
(package ldnsutils) as nxdns's only upstream, and the test expects what Unbound's test expects
of its forwarder (index.tsv, column pass_criterion_for_a_forwarder). The scenarios that test
something a forwarder without a validator does not do are listed in NOT_APPLICABLE with why;
test_every_scenario_accounted_for keeps the two lists equal to the suite's index.

ldns-testns binds the any-address, so each test runs it, nxdns and the client inside a private
network namespace that holds only a loopback interface (netns.NetNS; root only, skipped and
reported otherwise). Skipped and reported when ../shared (NX_SHARED_DIR) is absent.

nxdns randomises the query name's case (0x20) and ldns-testns answers in the file's case
unless the entry says copy_query, so the first query to such a server reaches it twice (the
case mismatch pauses 0x20 for that server, and the query is asked again unrandomised; the
other queries already sent are then accepted in the server's case): the tests count
transports, not queries.

Config: the harness's listeners and admin (for the counters) and these keys only:
  upstream.servers      the scenario's ldns-testns (it is the only upstream, as in Unbound's test)
  cache, timeout_ms     the harness's test values are removed: the shipped defaults apply
  upstream.timeout_ms   raised, named in the tests whose upstream answers one query after
                        another with a 1-2 s sleep each (ldns-testns serves serially), as
                        Unbound's own test waits for them; the client retries as `dig` does
                        (6 s, 3 tries, the suite README's advice), so it waits 18 s in all.
                        SLOW (10 s) for the 1-s upstreams; SLOWER (16 s) for the 2-s ones,
                        whose last answer cannot come within 10 s: 3-4 queries at 2 s each,
                        one more for the 0x20 fallback (Unbound does not randomise case by
                        default), and the 2 re-sends (at 0.4 and 1.2 s, the timeout doubling)
                        that a server silent since the first query gets before its first answer
                        at 2 s: (4 + 1 + 2) x 2 s = 14 s for fwd_udptmout. 16 s stays under the
                        client's 18 s, so a failure still reaches it as SERVFAIL.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from harness import free_port, parallel, wait_until
from netns import NetNS

SHARED = Path(os.environ.get("NX_SHARED_DIR", Path(__file__).resolve().parents[3] / "shared"))
SUITE = SHARED / "suites" / "unbound-fwd-upstreams"

pytestmark = [
    pytest.mark.skipif(not SUITE.is_dir(), reason=f"{SUITE} absent (NX_SHARED_DIR): "
                       "Unbound's forwarder scenarios skipped"),
    pytest.mark.skipif(shutil.which("ldns-testns") is None,
                       reason="ldns-testns missing (apt-get install ldnsutils)"),
]

# Scenarios that check what only a validating resolver or Unbound's own plumbing does.
NOT_APPLICABLE = {
    "fwd_bogus": "DNSSEC validation: Unbound holds a trust anchor for example.com and must "
                 "answer SERVFAIL (bogus) and cache that for at most 60 s; nxdns does not "
                 "validate (it relays AD and DO for the client's validator), so Unbound's "
                 "expectation cannot hold. The relay itself is fwd_udp's test.",
}

# upstream.timeout_ms for the scenarios whose upstream sleeps 1 s (SLOW) or 2 s (SLOWER) per
# query, serially (the module docstring has the arithmetic)
SLOW = {"upstream": {"timeout_ms": 10000}}
SLOWER = {"upstream": {"timeout_ms": 16000}}

WWW3 = ["10.20.30.40", "10.20.30.41", "10.20.30.42"]


def index():
    rows = {}
    with open(SUITE / "index.tsv") as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            cells = dict(zip(head, line.rstrip("\n").split("\t")))
            rows[cells["file"]] = cells
    return rows


class Testns:
    """One ldns-testns on port `port` of 127.0.0.1 (or ::1 with v6) inside the namespace, its
    verbose log (every query it received) in `log_path`."""

    def __init__(self, scenario: str, workdir: Path, v6: bool = False):
        self.file = SUITE / f"{scenario}.testns"
        self.port = free_port()
        self.v6 = v6
        self.log_path = workdir / f"{scenario}.testns.log"
        self.proc = None

    @property
    def addr(self) -> str:
        return f"[::1]:{self.port}" if self.v6 else f"127.0.0.1:{self.port}"

    def start(self):
        """Inside the namespace: start and wait for 'Listening on port'."""
        self._log = open(self.log_path, "wb")
        cmd = ["stdbuf", "-oL", "ldns-testns", "-v", "-p", str(self.port)]
        if self.v6:
            cmd.append("-6")
        self.proc = subprocess.Popen(cmd + [str(self.file)], stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        if not wait_until(lambda: "Listening on port" in self.log() or self.proc.poll() is not None,
                          10):
            raise RuntimeError("ldns-testns did not start:\n" + self.log())
        if self.proc.poll() is not None:
            raise RuntimeError(f"ldns-testns exited with {self.proc.returncode}:\n" + self.log())

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def received(self, name: str) -> list:
        """'UDP'/'TCP' per query for `name` that it received, in order."""
        out = []
        for line in self.log().splitlines():
            if line.startswith("query ") and f" {name.lower()}." in line.lower():
                out.append(line.split(": ")[2].split()[0])
        return out

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
        if self.proc:
            self._log.close()


@pytest.fixture
def scenario(request, make_nxdns, tmp_path):
    """scenario(name, body, config=None, v6_upstream=False, timeout=60): run body(nx, testns)
    inside a private network namespace with the scenario's upstream running; returns its
    result. The daemon is the fixture's (stopped and checked at teardown)."""
    started = []

    def run(name, body, config=None, v6_upstream=False, timeout=60):
        ns = NetNS()
        if ns.why:
            pytest.skip(ns.why)
        started.append(ns)
        tns = Testns(name, tmp_path, v6=v6_upstream)
        started.append(tns)
        # Unbound's scripted upstreams answer with RFC 1918 addresses (10.20.30.40): rebinding
        # protection would strip them from every answer, so these scenarios turn it off
        cfg = {"upstream": {"servers": [tns.addr], "timeout_ms": None}, "cache": None,
               "filter": {"rebinding_protection": False}}
        nx = make_nxdns([tns.addr], config=cfg, start=False)
        if config:
            nx.write_config(_merge(nx.config, config))

        def inside():
            tns.start()
            nx.start()
            return body(nx, tns)

        try:
            return ns.call(inside, timeout=timeout)
        except BaseException:
            print(f"--- ldns-testns log ({name}) ---\n{tns.log()[-8000:]}")
            raise

    yield run
    for x in reversed(started):
        if isinstance(x, Testns):
            x.stop()
    request.addfinalizer(lambda: [x.close() for x in started if isinstance(x, NetNS)])


def _merge(base, over):
    from harness import merge
    return merge(base, over)


def ask(nx, name, proto="udp", v6=False, timeout=6.0, tries=3, do=False, edns=0):
    """As `dig` asks: EDNS 0 (1232), RD; UDP tries `tries` times, `timeout` s each."""
    q = dns.message.make_query(name, "A", use_edns=edns, payload=1232, want_dnssec=do)
    host = "::1" if v6 else "127.0.0.1"
    if proto == "tcp":
        return dns.query.tcp(q, host, port=nx.port, timeout=timeout)
    for i in range(tries):
        try:
            return dns.query.udp(q, host, port=nx.port, timeout=timeout)
        except dns.exception.Timeout:
            if i == tries - 1:
                raise


def noerror(r):
    return r.rcode() == dns.rcode.NOERROR


def addrs(r):
    """Sorted A rdata of the answer (a DO answer also carries the scenario's RRSIGs)."""
    return sorted(rd.to_text() for rs in r.answer if rs.rdtype == dns.rdatatype.A for rd in rs)


# ------------------------------------------------------------------ the scenario list


def test_every_scenario_accounted_for():
    """Every file of the suite's index has a test here or a NOT_APPLICABLE line."""
    tested = {n[len("test_"):] for n in globals() if n.startswith("test_fwd_")}
    assert set(index()) == tested | set(NOT_APPLICABLE), \
        (set(index()) ^ (tested | set(NOT_APPLICABLE)))
    assert not tested & set(NOT_APPLICABLE)


# ------------------------------------------------------------------ plain forwarding


def test_fwd_udp(scenario):
    """Forward an UDP packet and return reply: 10.20.30.40, with RA from the forwarder."""
    def body(nx, tns):
        r = ask(nx, "www.example.com")
        assert noerror(r) and addrs(r) == ["10.20.30.40"]
        assert r.flags & dns.flags.RA and r.flags & dns.flags.QR
        assert set(tns.received("www.example.com")) == {"UDP"}
        assert nx.counter("nxdns_answers_total", result="forwarded") == 1
    scenario("fwd_udp", body)


def test_fwd_tcp(scenario):
    """Forward a TCP packet and return reply (dig +vc): answered over TCP."""
    def body(nx, tns):
        r = ask(nx, "www.example.com", proto="tcp")
        assert noerror(r) and addrs(r) == ["10.20.30.40"]
        assert nx.counter("nxdns_queries_total", proto="tcp") == 1
    scenario("fwd_tcp", body)


def test_fwd_ancil(scenario):
    """ip6 ancillary data: the ::1 listener answers over UDP and TCP, the upstream on ::1."""
    def body(nx, tns):
        for proto in ("udp", "tcp"):
            r = ask(nx, "www.example.com", proto=proto, v6=True)
            assert noerror(r) and addrs(r) == ["10.20.30.40"], proto
    scenario("fwd_ancil", body, v6_upstream=True)


def test_fwd_zero(scenario):
    """Zero-byte UDP datagram regression: a 0-byte datagram to the listener gets no answer and
    breaks nothing; the next query is answered 10.20.30.40."""
    def body(nx, tns):
        for host, fam in (("127.0.0.1", socket.AF_INET), ("::1", socket.AF_INET6)):
            with socket.socket(fam, socket.SOCK_DGRAM) as s:
                s.settimeout(0.5)
                s.sendto(b"", (host, nx.port))
                with pytest.raises(socket.timeout):
                    s.recvfrom(512)
        r = ask(nx, "www.example.com")
        assert noerror(r) and addrs(r) == ["10.20.30.40"]
        assert nx.alive()
    scenario("fwd_zero", body)


def test_fwd_ttlexpire(scenario):
    """TTL expires in the cache: the record has TTL 2; asked again 4 s later it is fetched
    again (the upstream sees a second query) and still answered 10.20.30.40, never with a
    negative or stale-forever result. The shipped cache is on."""
    def body(nx, tns):
        r = ask(nx, "www.example.com")
        assert noerror(r) and addrs(r) == ["10.20.30.40"]
        assert 0 < r.answer[0].ttl <= 2
        first = len(tns.received("www.example.com"))
        assert first >= 1
        assert ask(nx, "www.example.com").answer[0].ttl <= 2
        assert len(tns.received("www.example.com")) == first, "not answered from the cache"
        time.sleep(4)
        r = ask(nx, "www.example.com")
        assert noerror(r) and addrs(r) == ["10.20.30.40"]
        assert 0 < r.answer[0].ttl <= 2
        assert wait_until(lambda: len(tns.received("www.example.com")) > first, 5), \
            tns.received("www.example.com")
    scenario("fwd_ttlexpire", body)


def test_fwd_compress_c00c(scenario):
    """Compression of the answer to the query name: the answer's owner is the pointer 0xc00c
    (to the question) and the message is no larger than the compressed form."""
    def body(nx, tns):
        q = dns.message.make_query("overeinder.net", "A", use_edns=False)
        with socket.create_connection(("127.0.0.1", nx.port), timeout=5) as s:
            w = q.to_wire()
            s.sendall(struct.pack("!H", len(w)) + w)
            n = struct.unpack("!H", _recv(s, 2))[0]
            wire = _recv(s, n)
        r = dns.message.from_wire(wire)
        assert noerror(r) and addrs(r) == ["80.56.223.205"]
        qend = 12 + len(q.question[0].name.to_wire()) + 4
        assert wire[qend:qend + 2] == b"\xc0\x0c", wire[qend:qend + 2].hex()
        # the same content, compressed by dnspython: the relayed wire is not larger
        assert len(wire) <= len(r.to_wire())
    scenario("fwd_compress_c00c", body)


def _recv(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed early"
        buf += chunk
    return buf


# ------------------------------------------------------------------ TC and TCP


def test_fwd_tcp_tc(scenario):
    """Forward retry in TCP mode: TC over UDP, so the forwarder retries over TCP and returns
    all 3 records."""
    def body(nx, tns):
        r = ask(nx, "www.example.com")
        assert noerror(r) and addrs(r) == WWW3
        assert not r.flags & dns.flags.TC
        assert tns.received("www.example.com")[-1] == "TCP"
    scenario("fwd_tcp_tc", body)


def test_fwd_tcp_tc6(scenario):
    """fwd_tcp_tc over IPv6: client and upstream on ::1."""
    def body(nx, tns):
        r = ask(nx, "www.example.com", v6=True)
        assert noerror(r) and addrs(r) == WWW3
        assert tns.received("www.example.com")[-1] == "TCP"
    scenario("fwd_tcp_tc6", body, v6_upstream=True)


def test_fwd_udp_with_tcp_upstream(scenario):
    """UDP upstream without UDP downstream: a client over TCP, the forwarder asks the
    upstream over UDP (the scenario answers udp.example.com only over UDP): 10.20.30.80."""
    def body(nx, tns):
        r = ask(nx, "udp.example.com", proto="tcp")
        assert noerror(r) and addrs(r) == ["10.20.30.80"]
        assert tns.received("udp.example.com")[0] == "UDP"
    scenario("fwd_udp_with_tcp_upstream", body)


# ------------------------------------------------------------------ EDNS


def test_fwd_no_edns(scenario):
    """Retry with no EDNS: the upstream FORMERRs EDNS queries with DO; a DO client still gets
    the 3 records (the forwarder retried without EDNS)."""
    def body(nx, tns):
        r = ask(nx, "www.example.com", do=True)
        assert noerror(r) and addrs(r) == WWW3
        assert nx.counter("nxdns_upstream_edns_fallback_total") >= 1
    scenario("fwd_no_edns", body)


def test_fwd_edns_bksec(scenario):
    """EDNS backoff for a DNSSEC domain: nasty.example.com's server FORMERRs EDNS+DO; the
    forwarder backs off and answers 10.20.30.77; www.example.com is still answered."""
    def body(nx, tns):
        r = ask(nx, "nasty.example.com", do=True)
        assert noerror(r) and addrs(r) == ["10.20.30.77"]
        r = ask(nx, "www.example.com", do=True)
        assert noerror(r) and addrs(r) == ["10.20.30.40"]
    scenario("fwd_edns_bksec", body)


def test_fwd_edns_probe(scenario):
    """EDNS probing: nasty.example.com is FORMERRed in every form: SERVFAIL (not a hang, not
    a crash), well within the client's first try; then www.example.com (which the scenario
    answers to a DO query: a validating client's) is answered."""
    def body(nx, tns):
        t0 = time.monotonic()
        r = ask(nx, "nasty.example.com", tries=1)
        assert r.rcode() == dns.rcode.SERVFAIL
        assert time.monotonic() - t0 < 3.0
        r = ask(nx, "www.example.com", do=True)
        assert noerror(r) and addrs(r) == WWW3
        assert nx.alive()
    scenario("fwd_edns_probe", body)


def test_fwd_malformed(scenario):
    """An authority that returns malformed packets: SERVFAIL, counted as rejected, and the
    garbage is not cached (asked again: SERVFAIL again, not an answer)."""
    def body(nx, tns):
        for _ in range(2):
            r = ask(nx, "www.example.com", tries=1)
            assert r.rcode() == dns.rcode.SERVFAIL and not r.answer
        assert nx.metrics().sum("nxdns_upstream_rejected_total") >= 1
        assert nx.alive()
    scenario("fwd_malformed", body)


# ------------------------------------------------------------------ 0x20


def test_fwd_capsid(scenario):
    """0x20: the upstream echoes the query's case (copy_query); the answer is accepted and the
    client gets its own case back."""
    def body(nx, tns):
        r = ask(nx, "www.example.com")
        assert noerror(r) and addrs(r) == ["10.20.30.40"]
        assert r.question[0].name.to_text() == "www.example.com."
    scenario("fwd_capsid", body)


def _fallback_body(nx, tns):
    qname = "wwwabcdefghijklmnopqrstuvwxyzwww.example.com"
    r = ask(nx, qname)
    assert noerror(r) and addrs(r) == ["10.20.30.40"]
    assert r.question[0].name.to_text() == qname + "."


def test_fwd_capsid_fallback(scenario):
    """0x20 fallback: the upstream answers in a fixed case that is not the query's: the
    forwarder falls back and still answers 10.20.30.40."""
    scenario("fwd_capsid_fallback", _fallback_body)


def test_fwd_capsid_strip(scenario):
    """0x20 fallback whose answer needs stripping (the upstream's extra sections): still
    10.20.30.40."""
    scenario("fwd_capsid_strip", _fallback_body)


def test_fwd_capsid_white(scenario):
    """0x20 exempt-list case: Unbound exempts the domain by config; nxdns has no such list
    and reaches the same answer through its fallback: in 10.20.30.0/24."""
    def body(nx, tns):
        qname = "wwwabcdefghijklmnopqrstuvwxyzwww.example.com"
        r = ask(nx, qname)
        assert noerror(r)
        assert addrs(r) and all(a.startswith("10.20.30.") for a in addrs(r))
    scenario("fwd_capsid_white", body)


# ------------------------------------------------------------------ concurrency, slow upstream


def _parallel_body(names_ips, proto="udp", most=None):
    """All answered; with `most`, the upstream received at most that many queries in all:
    each once, one 0x20 fallback, and the paced re-sends of a silent server (0.4, 1.2, 2.8,
    6 s ...; before the pacing and the single fallback, fwd_three_service's upstream got 19
    in 10 s and no answer came in time)."""
    def body(nx, tns):
        rs = parallel([lambda n=n: ask(nx, n, proto=proto) for n, _ in names_ips], timeout=40)
        for (n, ip), r in zip(names_ips, rs):
            assert not isinstance(r, Exception), f"{n}: {r!r}"
            assert noerror(r) and addrs(r) == [ip], (n, r.rcode(), addrs(r))
        got = sum(len(tns.received(n)) for n, _ in names_ips)
        print(f"upstream received {got} queries for {len(names_ips)} names")
        if most is not None:
            assert got <= most, tns.log()
    return body


WWW1_4 = [("www1.example.com", "10.20.30.40"), ("www2.example.com", "10.20.30.50"),
          ("www3.example.com", "10.20.30.60"), ("www4.example.com", "10.20.30.70")]


def test_fwd_three(scenario):
    """Three queries at once: all answered."""
    scenario("fwd_three", _parallel_body(
        [("www1.example.com", "10.20.30.40"), ("www2.example.com", "10.20.30.50"),
         ("www3.example.com", "10.20.30.60")]))


@pytest.mark.nx_timeout(90)
def test_fwd_three_service(scenario):
    """Three queries at once to an upstream that sleeps 2 s per answer, serially: all three
    answered (timeout_ms raised: see the module docstring), and the upstream is not flooded:
    each query once, one unrandomised retry, at most the two re-sends of a silent server."""
    scenario("fwd_three_service", _parallel_body(
        [("www1.example.com", "10.20.30.40"), ("www2.example.com", "10.20.30.50"),
         ("www3.example.com", "10.20.30.60")], most=8), config=SLOWER, timeout=80)


@pytest.mark.nx_timeout(90)
def test_fwd_oneport(scenario):
    """Four queries at once over few sockets, 1 s per answer: all answered correctly."""
    scenario("fwd_oneport", _parallel_body(WWW1_4, most=10), config=SLOW, timeout=80)


@pytest.mark.nx_timeout(90)
def test_fwd_udptmout(scenario):
    """Four queries at once, 2 s per answer: timeouts and retransmissions lose no answer."""
    scenario("fwd_udptmout", _parallel_body(WWW1_4, most=10), config=SLOWER, timeout=80)


@pytest.mark.nx_timeout(90)
def test_fwd_waitudp(scenario):
    """Three queries that Unbound must queue for its one socket: all answered."""
    scenario("fwd_waitudp", _parallel_body(
        [("www1.example.com", "10.20.30.40"), ("www2.example.com", "10.20.30.50"),
         ("www3.example.com", "10.20.30.60")], most=8), config=SLOW, timeout=80)
