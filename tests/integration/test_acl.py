"""Access control: access.allow / access.deny; refused clients get REFUSED and are counted."""

import dns.rcode
import pytest

from harness import answers, make_query


def _refused(nx, upstream, proto, v6, name):
    before = nx.metrics()
    q = make_query(name, edns=0)
    r = getattr(nx, proto)(q, v6=v6)
    assert r.id == q.id
    assert r.rcode() == dns.rcode.REFUSED, f"expected REFUSED, got {dns.rcode.to_text(r.rcode())}"
    assert r.question[0].name == q.question[0].name
    assert not r.answer
    assert not upstream.queries(name), "a refused query must not reach the upstream"
    after = nx.metrics()
    assert after.get("nxdns_acl_refused_total") - before.get("nxdns_acl_refused_total") == 1
    assert after.get("nxdns_answers_total", result="refused") \
        - before.get("nxdns_answers_total", result="refused") == 1


def _served(nx, proto, v6, name):
    r = getattr(nx, proto)(make_query(name, edns=0), v6=v6)
    assert r.rcode() == dns.rcode.NOERROR
    assert answers(r) == ["192.0.2.1"]


@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_allow_list_excluding_loopback_refuses(make_upstream, make_nxdns, proto):
    up = make_upstream()
    nx = make_nxdns([up], config={"access": {"allow": ["10.0.0.0/8", "fd12::/16"]}})
    _refused(nx, up, proto, False, "acl-v4.example")
    _refused(nx, up, proto, True, "acl-v6.example")


@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_deny_beats_default_and_is_specific(make_upstream, make_nxdns, proto):
    up = make_upstream()
    nx = make_nxdns([up], config={"access": {"deny": ["127.0.0.1/32"]}})
    _refused(nx, up, proto, False, "deny-v4.example")
    _served(nx, proto, True, "deny-v6-ok.example")  # ::1 is not denied: default allows it


def test_deny_checked_before_allow(make_upstream, make_nxdns):
    up = make_upstream()
    nx = make_nxdns([up], config={"access": {"allow": ["127.0.0.0/8", "::1/128"],
                                             "deny": ["::1/128"]}})
    _served(nx, "udp", False, "both-v4.example")
    _refused(nx, up, "udp", True, "both-v6.example")


def test_allow_single_host(make_upstream, make_nxdns):
    up = make_upstream()
    nx = make_nxdns([up], config={"access": {"allow": ["127.0.0.1"]}})
    _served(nx, "udp", False, "host-v4.example")
    _refused(nx, up, "udp", True, "host-v6.example")


def test_default_serves_loopback(nxdns):
    _served(nxdns, "udp", False, "default-v4.example")
    _served(nxdns, "tcp", True, "default-v6.example")
