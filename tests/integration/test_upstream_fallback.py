"""Upstream hardening over DNS against the real binary: EDNS fallback (Unbound's fwd_no_edns and
fwd_edns_bksec scenarios), fail-over at once on a malformed answer (fwd_malformed), and 0x20 case
randomisation with its fallback for a server that does not preserve case (fwd_capsid,
fwd_capsid_fallback). The fake upstream plays each scenario's server (fakeupstream.Rule)."""

import time

import dns.flags
import dns.rcode
import pytest

from fakeupstream import Rule
from harness import answers, make_query

REJ = "nxdns_upstream_rejected_total"
FALLBACK = "nxdns_upstream_edns_fallback_total"
THREE = [("A", "198.51.100.40"), ("A", "198.51.100.41"), ("A", "198.51.100.42")]
ONE_WORKER = {"listener": {"workers": 1}}  # one engine: "remembered" is then per process


@pytest.mark.parametrize("bare", [False, True], ids=["formerr", "bare_formerr"])
def test_no_edns_server_answers_dnssec_client(make_upstream, make_nxdns, bare):
    """fwd_no_edns: the server FORMERRs a query with EDNS and DO. A DO client still gets the
    three records (not SERVFAIL), with an OPT of its own in the reply and its own case in the
    question; the server is then remembered: the next name goes to it without OPT at once."""
    up = make_upstream()
    for name in ("www.example.com", "www2.example.com"):
        up.script[name] = Rule(formerr_edns=True, formerr_edns_do_only=True, formerr_bare=bare,
                               records=THREE)
    nx = make_nxdns([up], config=ONE_WORKER)
    before = nx.counter(FALLBACK)
    r = nx.udp(make_query("WwW.ExAmple.com", edns=0, want_dnssec=True), timeout=5)
    assert r.rcode() == dns.rcode.NOERROR
    assert sorted(answers(r)) == ["198.51.100.40", "198.51.100.41", "198.51.100.42"]
    assert r.edns == 0, "the client sent EDNS: the reply must carry an OPT"
    assert r.ednsflags & dns.flags.DO, "DO is echoed to the client"
    assert r.question[0].name.to_text() == "WwW.ExAmple.com."
    qs = up.queries("www.example.com", transport="udp")
    assert [q.edns for q in qs] == [0, -1], [(q.edns, q.do) for q in qs]
    assert qs[0].do
    assert nx.counter(FALLBACK) == before + 1
    r2 = nx.udp(make_query("www2.example.com", edns=0, want_dnssec=True), timeout=5)
    assert sorted(answers(r2)) == ["198.51.100.40", "198.51.100.41", "198.51.100.42"]
    assert [q.edns for q in up.queries("www2.example.com", transport="udp")] == [-1]
    assert nx.counter(FALLBACK) == before + 1


def test_edns_backoff_for_dnssec_name(make_upstream, make_nxdns):
    """fwd_edns_bksec: only the DNSSEC name's server path FORMERRs EDNS+DO; nasty.example.com is
    answered (198.51.100.77) and a plain client gets the same answer without an OPT."""
    up = make_upstream()
    up.script["nasty.example.com"] = Rule(formerr_edns=True, formerr_edns_do_only=True,
                                          records=[("A", "198.51.100.77")])
    nx = make_nxdns([up], config=ONE_WORKER)
    r = nx.udp(make_query("nasty.example.com", edns=0, want_dnssec=True), timeout=5)
    assert (r.rcode(), answers(r)) == (dns.rcode.NOERROR, ["198.51.100.77"])
    r = nx.udp(make_query("www.example.com"), timeout=5)
    assert (r.rcode(), answers(r)) == (dns.rcode.NOERROR, ["192.0.2.1"])
    assert r.edns == -1, "a client without EDNS gets no OPT"


def test_server_refusing_every_form_gives_servfail_fast(make_upstream, make_nxdns):
    """fwd_edns_probe: FORMERR to both forms: SERVFAIL long before the deadline (no hang), and
    the server is not marked EDNS-lame (the next query still carries EDNS)."""
    up = make_upstream()
    up.script["nasty.example.com"] = Rule(rcode="FORMERR")
    nx = make_nxdns([up], config={"listener": {"workers": 1},
                                  "upstream": {"timeout_ms": 4000}})
    t0 = time.monotonic()
    r = nx.udp(make_query("nasty.example.com", edns=0), timeout=6)
    assert r.rcode() == dns.rcode.SERVFAIL
    assert time.monotonic() - t0 < 2.0
    assert [q.edns for q in up.queries("nasty.example.com", transport="udp")] == [0, -1]
    assert answers(nx.udp(make_query("www.example.com", edns=0), timeout=5)) == ["192.0.2.1"]
    assert [q.edns for q in up.queries("www.example.com", transport="udp")] == [0]


@pytest.mark.parametrize("kind,reason", [("garbage", "malformed"),
                                         ("bad_question", "malformed_question")])
def test_malformed_answer_fails_over_at_once(make_upstream, make_nxdns, kind, reason):
    """fwd_malformed: the first server answers with the right id but bytes that do not parse.
    Its attempt fails at once: the second server is asked long before the 1.5 s stagger and
    answers; the broken reply is counted by reason."""
    bad, good = make_upstream(), make_upstream(default_a="192.0.2.9")
    bad.script["*"] = Rule(malformed=kind)
    nx = make_nxdns([bad, good], config={
        "upstream": {"race": 1, "stagger_ms": 1500, "timeout_ms": 4000}})
    before = nx.counter(REJ, reason=reason)
    t0 = time.monotonic()
    r = nx.udp(make_query("www.example.com", edns=0), timeout=6)
    took = time.monotonic() - t0
    assert (r.rcode(), answers(r)) == (dns.rcode.NOERROR, ["192.0.2.9"])
    assert took < 1.0, f"took {took:.2f} s: waited for the stagger instead of failing over"
    assert bad.queries("www.example.com") and good.queries("www.example.com")
    assert nx.wait_counter(REJ, before + 1, reason=reason) >= before + 1


def test_malformed_only_server_servfail_before_deadline(make_upstream, make_nxdns):
    up = make_upstream()
    up.script["*"] = Rule(malformed="garbage")
    nx = make_nxdns([up], config={"upstream": {"timeout_ms": 4000}})
    t0 = time.monotonic()
    r = nx.udp(make_query("www.example.com", edns=0), timeout=6)
    assert r.rcode() == dns.rcode.SERVFAIL
    assert time.monotonic() - t0 < 2.0


def test_0x20_random_case_upstream_client_case_kept(nxdns, upstream):
    """fwd_capsid: the upstream sees the name in random letter case, echoes it, and the client
    gets its own case back; nothing is counted as a case mismatch."""
    before = nxdns.counter(REJ, reason="wrong_case")
    seen = set()
    for i in range(6):
        name = f"WwWabcdefghijklmnopq{i}.ExAmPle.com"
        r = nxdns.udp(make_query(name, edns=0), timeout=5)
        assert answers(r) == ["192.0.2.1"]
        assert r.question[0].name.to_text() == name + "."
        q = upstream.queries(name, transport="udp")
        assert len(q) == 1
        seen.add(q[0].qname.replace(str(i), ""))
    assert len(seen) >= 2, f"the upstream saw one case pattern only: {seen}"
    assert nxdns.counter(REJ, reason="wrong_case") == before


def test_0x20_fallback_for_server_not_preserving_case(make_upstream, make_nxdns):
    """fwd_capsid_fallback: a server that upper-cases the question. The query is still answered
    (the mismatch counted, the query asked once more unrandomised, not again in a new case),
    the pause is counted, and later queries go unrandomised at once."""
    up = make_upstream(default_a="198.51.100.40")
    up.script["*"] = Rule(case_upper=True)
    nx = make_nxdns([up], config=ONE_WORKER)
    name = "wwwabcdefghijklmnopqrstuvwxyzwww.example.com"
    r = nx.udp(make_query(name, edns=0), timeout=5)
    assert (r.rcode(), answers(r)) == (dns.rcode.NOERROR, ["198.51.100.40"])
    assert r.question[0].name.to_text() == name + "."
    got = up.queries(name, transport="udp")
    assert len(got) == 2
    assert got[1].qname == name + "."  # the client's case, unrandomised
    assert nx.counter(REJ, reason="wrong_case") == 1
    assert nx.counter("nxdns_upstream_caps_fallback_total") == 1
    r = nx.udp(make_query("again." + name, edns=0), timeout=5)
    assert answers(r) == ["198.51.100.40"]
    got = up.queries("again." + name, transport="udp")
    assert [q.qname for q in got] == ["again." + name + "."]
