"""The DNS cache seen from a client (issue 4): hits answered with the remaining TTL, the key
(case-insensitive name, type, DO bit), min_ttl / max_ttl clamps, negative caching from the SOA
(RFC 2308), and serve-stale (RFC 8767) with EDE 3 instead of SERVFAIL."""

from __future__ import annotations

import time

import dns.flags
import dns.rcode
import dns.rdatatype
import pytest

from fakeupstream import Rule
from filterkit import XRule, XUpstream, ede, soa, start_nx
from harness import answers, make_query

EDE_STALE = 3


def cached_config(**cache) -> dict:
    c = {"size": 1000}
    c.update(cache)
    return {"cache": c, "upstream": {"timeout_ms": 800}}


def delta(before, after, name, **labels):
    return after.get(name, **labels) - before.get(name, **labels)


def test_hits_decay_ttl_clamps_and_negative_caching(make_upstream_cls, make_nxdns):
    up = make_upstream_cls(XUpstream)
    up.script["dec.example"] = Rule(records=[("A", "192.0.2.10")], ttl=90)
    up.script["lo.example"] = Rule(records=[("A", "192.0.2.11")], ttl=1)
    up.script["hi.example"] = Rule(records=[("A", "192.0.2.12")], ttl=86400)
    up.script["neg.example"] = XRule(rcode="NXDOMAIN", authority=[soa("example.", 40)],
                                     auth_ttl=120)
    up.script["nodata.example"] = XRule(records=[], authority=[soa("example.", 40)],
                                        auth_ttl=30)
    up.script["nosoa.example"] = Rule(rcode="NXDOMAIN")
    nx = start_nx(make_nxdns, [up], cached_config(min_ttl=5, max_ttl=100))
    m0 = nx.metrics()
    assert m0.get("nxdns_cache_max_entries") == 1000
    assert m0.get("nxdns_cache_max_bytes") == max(256 * 1000, 65535)

    first = {}
    for name in ("dec.example", "lo.example", "hi.example"):
        r = nx.udp(make_query(name, edns=0))
        assert r.rcode() == dns.rcode.NOERROR
        first[name] = r.answer[0].ttl
    r = nx.udp(make_query("neg.example", edns=0))
    assert r.rcode() == dns.rcode.NXDOMAIN
    assert r.authority and r.authority[0].rdtype == dns.rdatatype.SOA, r.authority
    r = nx.udp(make_query("nodata.example", edns=0))
    assert r.rcode() == dns.rcode.NOERROR and not r.answer
    r = nx.udp(make_query("nosoa.example", edns=0))
    assert r.rcode() == dns.rcode.NXDOMAIN
    assert first["dec.example"] == 90

    time.sleep(2.1)
    m1 = nx.metrics()
    # A hit: the same records, the TTL lowered by the time spent in the cache.
    r = nx.udp(make_query("DEC.Example", edns=0))
    assert answers(r) == ["192.0.2.10"]
    assert r.question[0].name.to_text() == "DEC.Example.", "the question's case is the client's"
    assert 85 <= r.answer[0].ttl <= 88, f"TTL after 2 s in the cache: {r.answer[0].ttl}"
    assert r.flags & dns.flags.RA
    # TTL 1 clamped up to min_ttl 5: still cached after 2 s, answered with the rest of 5 s.
    r = nx.udp(make_query("lo.example", edns=0))
    assert answers(r) == ["192.0.2.11"]
    assert 1 <= r.answer[0].ttl <= 3, f"min_ttl 5 after 2 s: TTL {r.answer[0].ttl}"
    # TTL 86400 clamped down to max_ttl 100.
    r = nx.udp(make_query("hi.example", edns=0))
    assert answers(r) == ["192.0.2.12"]
    assert 95 <= r.answer[0].ttl <= 98, f"max_ttl 100 after 2 s: TTL {r.answer[0].ttl}"
    # Negative answers with an SOA are cached for min(SOA TTL, SOA minimum) = 40 s (RFC 2308).
    r = nx.udp(make_query("neg.example", edns=0))
    assert r.rcode() == dns.rcode.NXDOMAIN and not r.answer
    assert r.authority and r.authority[0].rdtype == dns.rdatatype.SOA
    assert 35 <= r.authority[0].ttl <= 38, f"negative TTL after 2 s: {r.authority[0].ttl}"
    r = nx.udp(make_query("nodata.example", edns=0))
    assert r.rcode() == dns.rcode.NOERROR and not r.answer
    assert r.authority and 25 <= r.authority[0].ttl <= 28, r.authority
    # Without an SOA a negative answer is not cached.
    r = nx.udp(make_query("nosoa.example", edns=0))
    assert r.rcode() == dns.rcode.NXDOMAIN
    m2 = nx.metrics()

    for name in ("dec.example", "lo.example", "hi.example", "neg.example", "nodata.example"):
        assert len(up.queries(name)) == 1, f"{name}: upstream saw {len(up.queries(name))}"
    assert len(up.queries("nosoa.example")) == 2
    assert delta(m1, m2, "nxdns_answers_total", result="cached") == 5
    assert delta(m1, m2, "nxdns_cache_hits_total") == 5
    assert delta(m1, m2, "nxdns_answers_total", result="forwarded") == 1
    assert m2.get("nxdns_cache_entries") == 5
    assert 0 < m2.get("nxdns_cache_response_bytes") <= m2.get("nxdns_cache_max_bytes")
    assert m2.get("nxdns_cache_uncacheable_total") >= 1

    # The DO bit is part of the key: a DO query is a miss once, then a hit.
    for _ in range(2):
        r = nx.udp(make_query("dec.example", edns=0, want_dnssec=True))
        assert answers(r) == ["192.0.2.10"]
    assert len(up.queries("dec.example")) == 2
    assert up.queries("dec.example")[1].do
    # ... and so is the type.
    r = nx.udp(make_query("dec.example", "AAAA", edns=0))
    assert len(up.queries("dec.example")) == 3
    # TCP reads the same cache.
    r = nx.tcp(make_query("dec.example", edns=0))
    assert answers(r) == ["192.0.2.10"] and len(up.queries("dec.example")) == 3


@pytest.mark.parametrize("stale", [True, False], ids=["serve_stale", "no_stale"])
def test_serve_stale_when_upstream_fails(make_upstream, make_nxdns, stale):
    up = make_upstream()
    up.script["stale.example"] = Rule(records=[("A", "192.0.2.77")], ttl=1)
    nx = start_nx(make_nxdns, [up], {"cache": {"size": 100, "serve_stale": stale},
                                     "upstream": {"timeout_ms": 500}})
    r = nx.udp(make_query("stale.example", edns=0))
    assert answers(r) == ["192.0.2.77"] and not ede(r)
    up.script["stale.example"] = Rule(drop=True)  # the upstream stops answering
    time.sleep(1.6)  # past the TTL
    before = nx.metrics()
    t = time.monotonic()
    r = nx.udp(make_query("stale.example", edns=0), timeout=5)
    took = time.monotonic() - t
    after = nx.metrics()
    assert len(up.exchanges("stale.example")) == 2, "an expired entry must be refreshed first"
    assert took < 0.5 + 1.0, f"the answer took {took:.2f} s with timeout_ms 500"
    if stale:
        assert r.rcode() == dns.rcode.NOERROR, dns.rcode.to_text(r.rcode())
        assert answers(r) == ["192.0.2.77"]
        assert r.answer[0].ttl == 30, f"stale answers carry TTL 30 (RFC 8767): {r.answer[0].ttl}"
        assert [c for c, _ in ede(r)] == [EDE_STALE], ede(r)
        assert delta(before, after, "nxdns_cache_stale_hits_total") == 1
    else:
        assert r.rcode() == dns.rcode.SERVFAIL, dns.rcode.to_text(r.rcode())
        assert not r.answer
        assert delta(before, after, "nxdns_cache_stale_hits_total") == 0


def test_scan_does_not_flush_the_working_set(make_upstream, make_nxdns):
    """A burst of names asked for once (a scan, 5x the cache) passes through the cache's
    probation and leaves the answers asked for again alone (S3-FIFO); plain CLOCK would have
    evicted every one of them."""
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], cached_config(size=200))
    hot = [f"hot{i}.example" for i in range(50)]
    for name in hot:
        for _ in range(2):  # a miss that stores it, then a hit while on probation
            r = nx.udp(make_query(name, edns=0))
            assert answers(r) == ["192.0.2.1"]
    for i in range(1000):
        r = nx.udp(make_query(f"scan{i}.example", edns=0))
        assert r.rcode() == dns.rcode.NOERROR
    before = nx.metrics()
    assert before.get("nxdns_cache_entries") == 200
    assert before.get("nxdns_cache_evictions_total") >= 800
    for name in hot:
        r = nx.udp(make_query(name, edns=0))
        assert answers(r) == ["192.0.2.1"]
    after = nx.metrics()
    assert delta(before, after, "nxdns_cache_hits_total") == 50, "a hot answer was evicted"
    assert delta(before, after, "nxdns_cache_misses_total") == 0
    assert all(len(up.exchanges(name)) == 1 for name in hot)
    assert after.get("nxdns_cache_promoted_total") >= 50
