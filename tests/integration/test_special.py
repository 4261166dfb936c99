"""Special-use names (issue 14, src/policy/special.c, the `special.*` keys) over DNS.

Each name: the answer, that the fake upstream was NOT asked, its counter
(`nxdns_special_names_total{reason}`), and where it applies the forward-zone exception; DDR with
and without DoT/DoH listeners (dnspython parses the SVCB records); `nxdns lookup` and the query
log naming each reason. Also the answer side of HTTPS/SVCB for an allowed name: private hints
are stripped (src/policy/README.md says why), a blocked TargetName still blocks.
"""

from __future__ import annotations

import dns.flags
import dns.rcode
import dns.rdatatype

from adminkit import logged_in, start_nx as start_admin_nx, wait_pushed_and_written
from fakeupstream import Rule
from filterkit import ede, lookup_cli, start_nx
from harness import answers, enc_listeners, make_query


def ask(nx, name: str, qtype: str = "A", tcp: bool = False):
    q = make_query(name, qtype, edns=0)
    return nx.tcp(q) if tcp else nx.udp(q)


def special(nx, reason: str) -> float:
    return nx.counter("nxdns_special_names_total", reason=reason)


def assert_not_asked(up, *names):
    for n in names:
        assert not up.queries(n), f"{n} reached the upstream: {up.queries(n)}"


def test_localhost(upstream, make_nxdns):
    nx = make_nxdns([upstream])
    r = ask(nx, "localhost")
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    assert answers(r) == ["127.0.0.1"]
    r = ask(nx, "app.LocalHost", "AAAA", tcp=True)
    assert answers(r) == ["::1"]
    r = ask(nx, "localhost", "MX")  # the name exists: NODATA for other types
    assert (r.rcode(), answers(r)) == (dns.rcode.NOERROR, [])
    assert_not_asked(upstream, "localhost", "app.localhost")
    assert special(nx, "special_localhost") == 3
    assert nx.counter("nxdns_answers_total", result="local") == 3


def test_domain_needed_and_single_label(upstream, make_nxdns):
    nx = make_nxdns([upstream])
    names = [("printer.local", "A"), ("local", "SOA"), ("x.invalid", "A"),
             ("router.home.arpa", "AAAA")]
    for name, t in names:
        r = ask(nx, name, t)
        assert r.rcode() == dns.rcode.NXDOMAIN and r.flags & dns.flags.AA, (name, t)
        assert not r.answer and ede(r) == [], (name, t)
    for t in ("A", "AAAA", "HTTPS"):
        r = ask(nx, "nas", t)
        assert r.rcode() == dns.rcode.NXDOMAIN, t
    assert_not_asked(upstream, "printer.local", "local", "x.invalid", "router.home.arpa", "nas")
    assert special(nx, "special_use_name") == 4
    assert special(nx, "single_label") == 3
    # what a validating stub needs from the real root still goes there
    ask(nx, "com", "DS")
    ask(nx, "org", "DNSKEY")
    assert [q.qtype for q in upstream.queries("com")] == ["DS"]
    assert [q.qtype for q in upstream.queries("org")] == ["DNSKEY"]
    assert special(nx, "single_label") == 3


PRIVATE_REVERSE = [
    "1.0.0.10.in-addr.arpa",
    "1.0.16.172.in-addr.arpa",
    "1.0.31.172.in-addr.arpa",
    "9.9.168.192.in-addr.arpa",
    "4.3.254.169.in-addr.arpa",
    "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.c.f.ip6.arpa",
    "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa",
    "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.e.f.ip6.arpa",
]


def test_bogus_priv(upstream, make_nxdns):
    nx = make_nxdns([upstream])
    for name in PRIVATE_REVERSE:
        r = ask(nx, name, "PTR")
        assert r.rcode() == dns.rcode.NXDOMAIN and not r.answer, name
    assert_not_asked(upstream, *PRIVATE_REVERSE)
    assert special(nx, "private_reverse") == len(PRIVATE_REVERSE)
    # public reverse names, 172.32/16 included, are forwarded
    for name in ("1.2.0.192.in-addr.arpa", "1.0.32.172.in-addr.arpa"):
        ask(nx, name, "PTR")
        assert len(upstream.queries(name)) == 1, name
    assert special(nx, "private_reverse") == len(PRIVATE_REVERSE)


def test_forward_zone_exception(make_upstream, make_nxdns):
    public, lan = make_upstream(), make_upstream(default_a="192.168.1.2")
    nx = start_nx(make_nxdns, [public], {"upstream": {"forward_zones": {
        "home.arpa": [lan.addr], "168.192.in-addr.arpa": [lan.addr], "nas": [lan.addr],
        "local": [lan.addr]}}})
    # a forward zone covering a special-use name gets it (and rebinding protection exempts it)
    assert answers(ask(nx, "router.home.arpa")) == ["192.168.1.2"]
    assert answers(ask(nx, "nas")) == ["192.168.1.2"]
    assert answers(ask(nx, "tv.local")) == ["192.168.1.2"]
    ask(nx, "2.1.168.192.in-addr.arpa", "PTR")
    for n in ("router.home.arpa", "nas", "tv.local", "2.1.168.192.in-addr.arpa"):
        assert len(lan.queries(n)) == 1, n
    # names the zones do not cover stay local, and the public upstream sees none of them
    assert ask(nx, "x.invalid").rcode() == dns.rcode.NXDOMAIN
    assert ask(nx, "1.0.0.10.in-addr.arpa", "PTR").rcode() == dns.rcode.NXDOMAIN
    assert ask(nx, "printer").rcode() == dns.rcode.NXDOMAIN
    assert not public.queries()
    m = nx.metrics()
    assert m.get("nxdns_special_names_total", reason="special_use_name") == 1
    assert m.get("nxdns_special_names_total", reason="private_reverse") == 1
    assert m.get("nxdns_special_names_total", reason="single_label") == 1


def test_firefox_canary(upstream, make_nxdns):
    nx = make_nxdns([upstream])
    r = ask(nx, "use-application-dns.net")
    assert r.rcode() == dns.rcode.NXDOMAIN and not r.answer
    assert ede(r) == [(15, "special.firefox_canary")]
    assert ask(nx, "use-application-dns.net", "AAAA").rcode() == dns.rcode.NXDOMAIN
    assert_not_asked(upstream, "use-application-dns.net")
    assert special(nx, "firefox_canary") == 2
    off = make_nxdns([upstream], config={"special": {"firefox_canary": False}})
    assert answers(ask(off, "use-application-dns.net")) == ["192.0.2.1"]
    assert len(upstream.queries("use-application-dns.net")) == 1


def test_android_probe_never_blocked(upstream, make_nxdns):
    nx = start_nx(make_nxdns, [upstream], {"filter": {"deny": ["*.gstatic.com"]}})
    probe = "a1b2c3d4-dnsotls-ds.metric.gstatic.com"
    assert answers(ask(nx, probe)) == ["192.0.2.1"]
    assert len(upstream.queries(probe)) == 1
    assert special(nx, "android_probe") == 1
    # the rule still blocks everything else under it
    assert answers(ask(nx, "www.gstatic.com")) == ["0.0.0.0"]
    assert answers(ask(nx, "x.y-dnsotls-ds.metric.gstatic.com")) == ["0.0.0.0"]
    assert special(nx, "android_probe") == 1


def test_private_relay(upstream, make_nxdns):
    nx = make_nxdns([upstream])
    assert answers(ask(nx, "mask.icloud.com")) == ["192.0.2.1"]  # off by default
    assert special(nx, "private_relay") == 0
    on = make_nxdns([upstream], config={"special": {"block_private_relay": True}})
    for name, t in (("mask.icloud.com", "A"), ("mask-h2.icloud.com", "AAAA"),
                    ("mask.icloud.com", "HTTPS")):
        r = ask(on, name, t)
        assert r.rcode() == dns.rcode.NXDOMAIN and not r.answer, (name, t)
        assert ede(r) == [(15, "special.block_private_relay")]
    assert len(upstream.queries("mask.icloud.com")) == 1 and not upstream.queries(
        "mask-h2.icloud.com")
    assert special(on, "private_relay") == 3


def svcb_texts(r) -> list:
    return [rd.to_text() for rs in r.answer if rs.rdtype == dns.rdatatype.SVCB for rd in rs]


def test_ddr_with_listeners(upstream, make_nxdns):
    nx = make_nxdns([upstream], config=enc_listeners())
    dot, doh = nx.dot_port, nx.doh_port
    r = ask(nx, "_dns.resolver.arpa", "SVCB")
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    # one record per listener address, DoT first; the hint is the listener's own address;
    # dohpath (key 7, RFC 9461) is printed by its number by dnspython 2.3
    assert svcb_texts(r) == [
        f'1 . alpn="dot" port="{dot}" ipv4hint="127.0.0.1"',
        f'2 . alpn="dot" port="{dot}" ipv6hint="::1"',
        f'3 . alpn="h2" port="{doh}" ipv4hint="127.0.0.1" key7="/dns-query{{?dns}}"',
        f'4 . alpn="h2" port="{doh}" ipv6hint="::1" key7="/dns-query{{?dns}}"',
    ]
    # over TCP too, and other types of the name are NODATA
    assert len(svcb_texts(ask(nx, "_dns.resolver.arpa", "SVCB", tcp=True))) == 4
    r = ask(nx, "_dns.resolver.arpa", "A")
    assert (r.rcode(), r.answer) == (dns.rcode.NOERROR, [])
    assert ask(nx, "other.resolver.arpa", "SVCB").rcode() == dns.rcode.NXDOMAIN
    assert_not_asked(upstream, "_dns.resolver.arpa", "other.resolver.arpa")
    assert special(nx, "ddr") == 4
    # the name a DoT client verifies, when the operator has one
    named = make_nxdns([upstream], config=dict(enc_listeners(doh=False),
                                               tls={"server_name": "dns.home.example"}))
    texts = svcb_texts(ask(named, "_dns.resolver.arpa", "SVCB"))
    assert [t.split()[1] for t in texts] == ["dns.home.example.", "dns.home.example."]


def test_ddr_without_listeners(upstream, make_nxdns):
    nx = make_nxdns([upstream])
    r = ask(nx, "_dns.resolver.arpa", "SVCB")
    assert (r.rcode(), r.answer) == (dns.rcode.NOERROR, [])
    assert r.flags & dns.flags.AA
    # special.ddr off: NODATA even with listeners, and still never forwarded
    off = make_nxdns([upstream], config=dict(enc_listeners(), special={"ddr": False}))
    r = ask(off, "_dns.resolver.arpa", "SVCB")
    assert (r.rcode(), r.answer) == (dns.rcode.NOERROR, [])
    assert_not_asked(upstream, "_dns.resolver.arpa")
    assert special(nx, "ddr") == 1 and special(off, "ddr") == 1


REASONS = [
    ("localhost", "special_localhost", "special.localhost", "local"),
    ("printer.local", "special_use_name", "special.domain_needed", "local"),
    ("nas", "single_label", "special.domain_needed", "local"),
    ("1.0.0.10.in-addr.arpa", "private_reverse", "special.bogus_priv", "local"),
    ("use-application-dns.net", "firefox_canary", "special.firefox_canary", "local"),
    ("a1-dnsotls-ds.metric.gstatic.com", "android_probe", "special.android_probes", "allow"),
    ("mask.icloud.com", "private_relay", "special.block_private_relay", "local"),
    ("_dns.resolver.arpa", "ddr", "special.ddr", "local"),
]


def test_lookup_and_query_log_reasons(upstream, make_nxdns):
    nx = start_admin_nx(make_nxdns, [upstream], config={
        "special": {"block_private_relay": True}})
    rows = lookup_cli(nx.config_path, [n for n, *_ in REASONS])
    got = [(r["name"], r["reason"], r["source"], r["action"]) for r in rows]
    assert got == REASONS
    for name, *_ in REASONS:
        ask(nx, name, "SVCB" if name.startswith("_dns.") else "A")
    wait_pushed_and_written(nx)
    api = logged_in(nx)
    items = api.ok("GET", "/api/queries?limit=50")["items"]
    logged = {it["name"]: (it["reason"], it["action"]) for it in items}
    for name, reason, _, action in REASONS:
        assert logged.get(name) == (reason, action), (name, logged.get(name))
    # of all these, only the Android probe is forwarded
    assert [q.qname.lower() for q in upstream.queries()] == ["a1-dnsotls-ds.metric.gstatic.com."]


# ------------------------------------------------------------------ HTTPS/SVCB answer side

def test_https_hints_of_an_allowed_name_stripped(upstream, make_nxdns):
    nx = start_nx(make_nxdns, [upstream], {"filter": {"allow": ["svc.example"],
                                                      "deny": ["cdn.blocked.example"]}})
    upstream.script["svc.example"] = Rule(records=[
        ("HTTPS", '1 . alpn="h2" ipv4hint="192.168.1.5,192.0.2.7" ipv6hint="fd00::5"')])
    upstream.script["www.other.example"] = Rule(records=[
        ("HTTPS", '1 cdn.blocked.example. alpn="h2" ipv4hint="10.0.0.1"')])
    # a user allow rule does not exempt a name from rebinding protection: the record stays,
    # without its private hints
    r = ask(nx, "svc.example", "HTTPS")
    assert r.rcode() == dns.rcode.NOERROR
    assert answers(r) == ['1 . alpn="h2" ipv4hint="192.0.2.7"']
    assert nx.counter("nxdns_rebinding_addresses_stripped_total") == 2
    # an answer whose TargetName is blocked is still blocked after its hints are stripped
    r = ask(nx, "www.other.example", "HTTPS")
    assert answers(r) == [] and ede(r) == [(15, "blocked by rule cdn.blocked.example")]
    assert nx.counter("nxdns_blocked_total", reason="cname") == 1
