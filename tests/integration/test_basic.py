"""Forwarding over UDP and TCP, IPv4 and IPv6, with dnspython, kdig and dig as clients."""

import re

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import pytest

from fakeupstream import Rule
from harness import answers, make_query, run

PROTOS = ["udp", "tcp"]


@pytest.mark.parametrize("v6", [False, True], ids=["v4", "v6"])
@pytest.mark.parametrize("proto", PROTOS)
def test_forwarded_answer_equals_upstreams(nxdns, upstream, proto, v6):
    upstream.script["www.example.com"] = Rule(
        records=[("A", "192.0.2.10"), ("A", "192.0.2.11")], ttl=1234)
    before = nxdns.metrics()
    q = make_query("www.example.com", edns=0)
    r = getattr(nxdns, proto)(q, v6=v6)
    assert r.id == q.id
    assert r.flags & dns.flags.QR
    assert r.rcode() == dns.rcode.NOERROR
    assert r.answer == upstream.expected("www.example.com").answer
    assert answers(r) == ["192.0.2.10", "192.0.2.11"]
    assert 0 < r.answer[0].ttl <= 1234
    assert len(upstream.queries("www.example.com")) >= 1
    after = nxdns.metrics()
    assert after.get("nxdns_queries_total", proto=proto) \
        - before.get("nxdns_queries_total", proto=proto) == 1
    assert after.get("nxdns_answers_total", result="forwarded") \
        - before.get("nxdns_answers_total", result="forwarded") == 1


@pytest.mark.parametrize("rdtype,expected", [("AAAA", ["2001:db8::1"]),
                                             ("TXT", ['"fake upstream"'])])
def test_other_types_forwarded(nxdns, rdtype, expected):
    r = nxdns.udp(make_query("types.example", rdtype, edns=0))
    assert r.rcode() == dns.rcode.NOERROR
    assert answers(r) == expected


@pytest.mark.parametrize("proto", PROTOS)
def test_nxdomain_forwarded(nxdns, upstream, proto):
    upstream.script["missing.example"] = Rule(rcode="NXDOMAIN")
    r = getattr(nxdns, proto)(make_query("missing.example", edns=0))
    assert r.rcode() == dns.rcode.NXDOMAIN
    assert not r.answer


@pytest.mark.parametrize("proto", PROTOS)
def test_0x20_case_preserved_in_reply_question(nxdns, proto):
    name = "WwW.eXaMpLe.CoM."
    r = getattr(nxdns, proto)(make_query(name, edns=0))
    assert r.question[0].name.to_text() == name
    assert answers(r) == ["192.0.2.1"]


@pytest.mark.parametrize("proto", PROTOS)
def test_edns_echoed_only_when_asked(nxdns, proto):
    r = getattr(nxdns, proto)(make_query("edns.example", edns=0, payload=1232))
    assert r.edns == 0, "a query with OPT must get OPT back"
    assert r.payload >= 512
    r = getattr(nxdns, proto)(make_query("edns.example"))
    assert r.edns == -1, "a query without OPT must not get OPT (RFC 6891 7)"
    assert answers(r) == ["192.0.2.1"]


def test_rd_flag_copied(nxdns):
    q = make_query("rd.example", edns=0)
    assert q.flags & dns.flags.RD
    r = nxdns.udp(q)
    assert r.flags & dns.flags.RD
    q.flags &= ~dns.flags.RD
    r = nxdns.udp(q)
    assert not r.flags & dns.flags.RD


def _kdig(port, host, *args):
    return run(["kdig", f"@{host}", "-p", str(port), "+timeout=3", "+retry=0", *args])


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_kdig_tcp(nxdns, upstream, host):
    upstream.script["kdig-tcp.example"] = Rule(records=[("A", "192.0.2.55")], ttl=600)
    before = nxdns.counter("nxdns_queries_total", proto="tcp")
    out = _kdig(nxdns.port, host, "+tcp", "kdig-tcp.example", "A")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "status: NOERROR" in out.stdout
    assert re.search(r"^kdig-tcp\.example\.\s+\d+\s+IN\s+A\s+192\.0\.2\.55$", out.stdout, re.M), \
        out.stdout
    assert "(TCP)" in out.stdout
    assert nxdns.counter("nxdns_queries_total", proto="tcp") - before == 1


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_kdig_udp(nxdns, upstream, host):
    upstream.script["kdig-udp.example"] = Rule(records=[("AAAA", "2001:db8::55")])
    before = nxdns.counter("nxdns_queries_total", proto="udp")
    out = _kdig(nxdns.port, host, "+notcp", "kdig-udp.example", "AAAA")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "status: NOERROR" in out.stdout
    assert re.search(r"^kdig-udp\.example\.\s+\d+\s+IN\s+AAAA\s+2001:db8::55$", out.stdout,
                     re.M), out.stdout
    assert "(UDP)" in out.stdout
    assert nxdns.counter("nxdns_queries_total", proto="udp") - before == 1


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_dig(nxdns, upstream, host):
    upstream.script["dig.example"] = Rule(records=[("A", "192.0.2.66")])
    out = run(["dig", f"@{host}", "-p", str(nxdns.port), "+tries=1", "+time=3",
               "dig.example", "A"])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "status: NOERROR" in out.stdout
    assert re.search(r"^dig\.example\.\s+\d+\s+IN\s+A\s+192\.0\.2\.66$", out.stdout, re.M), \
        out.stdout


def test_do_bit_forwarded_and_echoed(nxdns, upstream):
    r = nxdns.udp(make_query("do.example", edns=0, want_dnssec=True))
    assert r.edns == 0 and r.ednsflags & dns.flags.DO, "DO must be echoed (RFC 3225)"
    assert answers(r) == ["192.0.2.1"]
    assert upstream.queries("do.example")[0].do, "DO must be passed on to the upstream"


def test_unknown_edns_option_tolerated(nxdns):
    q = dns.message.make_query("opt.example", "A", use_edns=0, options=[
        dns.edns.GenericOption(65001, b"abc"), dns.edns.GenericOption(10, b"12345678")])
    r = nxdns.udp(q)
    assert r.rcode() == dns.rcode.NOERROR
    assert answers(r) == ["192.0.2.1"]
    assert r.edns == 0


def test_edns_version_1_gets_badvers(nxdns, upstream):
    """RFC 6891 6.1.3: a query with an EDNS version the responder does not implement gets
    BADVERS, with an OPT of the version it does implement."""
    q = make_query("v1.example")
    # dnspython 2.3's make_query(use_edns=1) sends version 0: set the version explicitly.
    q.use_edns(edns=1, payload=1232)
    assert q.edns == 1
    formerr = nxdns.counter("nxdns_answers_total", result="formerr")
    r = nxdns.udp(q)
    assert r.rcode() == dns.rcode.BADVERS, dns.rcode.to_text(r.rcode())
    assert r.edns == 0
    assert not upstream.queries("v1.example")
    # Counted as what it is, not as a FORMERR.
    assert nxdns.wait_counter("nxdns_answers_total", 1, result="badvers") == 1
    assert nxdns.counter("nxdns_answers_total", result="formerr") == formerr
