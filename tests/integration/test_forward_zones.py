"""Conditional forwarding: names under a zone go to that zone's servers, the rest to the default."""

import dns.rcode
import pytest

from harness import answers, make_query


@pytest.fixture
def zones(make_upstream, make_nxdns):
    default = make_upstream(default_a="192.0.2.1")
    lan = make_upstream(default_a="10.0.0.1")
    example = make_upstream(default_a="10.0.0.2")
    sub = make_upstream(default_a="10.0.0.3")
    nx = make_nxdns([default], config={"upstream": {"forward_zones": {
        "lan": [lan.addr], "example.org": [example.addr], "sub.example.org": [sub.addr]}}})
    return nx, {"default": default, "lan": lan, "example": example, "sub": sub}


CASES = [
    ("host.lan", "lan"),
    ("lan", "lan"),  # the zone apex itself
    ("a.b.c.lan", "lan"),
    ("CaSe.LaN", "lan"),  # zone match is case-insensitive
    # label boundary: "notlan" is not under "lan" (two labels: a single-label A query is
    # special.domain_needed's, answered NXDOMAIN without asking anyone)
    ("host.notlan", "default"),
    ("lan.com", "default"),
    ("www.example.org", "example"),
    ("x.sub.example.org", "sub"),  # the longest matching zone wins
    ("sub.example.org", "sub"),
    ("xsub.example.org", "example"),
    ("example.com", "default"),
]


@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_names_routed_to_their_zone(zones, proto):
    nx, ups = zones
    for name, want in CASES:
        r = getattr(nx, proto)(make_query(name, edns=0))
        assert r.rcode() == dns.rcode.NOERROR, name
        assert answers(r) == [ups[want].default_a], f"{name} should go to {want}"
        asked = [k for k, up in ups.items() if up.queries(name)]
        assert asked == [want], f"{name}: asked {asked}, expected only {want}"
        for up in ups.values():
            up.clear()
