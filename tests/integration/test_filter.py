"""Filtering over DNS (issue 3): a deterministic corpus of list sources in every format, user
rules, local records, groups and clients, block modes, CNAME cloaking and the blocked
counters; every probe is cross-checked against `nxdns lookup` on the same config.

The corpus (sources in config order, so index order = the order sources are walked):
  0 hosts  (hosts)    ads / track / multi / v6 .hosts.test, ads.hosts.test again in doms
  1 doms   (domains)  plain.test, sub.wild.test (exact under a wildcard), excepted.test,
                      ads.hosts.test (overlap with hosts)
  2 abp    (adblock)  ||abp.test^, |exact.abp2.test^, @@||ok.abp.test^, @@|onlyexact.abp.test^,
                      @@||excepted.test^ (exception for a name doms blocks), ||allowwild.test^;
                      groups default + kids
  3 wild   (wildcard) *.wild.test, *.nest.test, *.deep.nest.test (nested)
  4 mixed  (auto)     both.test + *.both.test (x with *.x), a hosts line and an ABP line
  5 kidsonly (domains) games.test; groups kids only
User rules: deny denied.test, *.denywild.test, /^ad[0-9]+[.]rx[.]test$/, both.rule.test;
allow allowed.abp.test, *.allowwild.test, /^safe[0-9]+[.]abp[.]test$/, both.rule.test.
Clients: 127.0.0.2 -> kids (abp + kidsonly), 127.0.0.3 -> guests (filtering off).
"""

from __future__ import annotations

import signal

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import pytest

from filterkit import XRule, XUpstream, ede, lookup_cli, query_from, start_nx
from harness import answers, make_query, wait_until

EDE_BLOCKED = 15

SOURCES = {
    "hosts": ("hosts", """# a hosts file\r
0.0.0.0 ads.hosts.test\r
127.0.0.1 track.hosts.test multi.hosts.test   # two names on one line\r
:: v6.hosts.test\r
0.0.0.0 localhost\r
"""),
    "doms": ("domains", """! plain names
plain.test
sub.wild.test
excepted.test
ads.hosts.test
"""),
    "abp": ("adblock", """[Adblock Plus 2.0]
! Title: test
||abp.test^
|exact.abp2.test^
@@||ok.abp.test^
@@|onlyexact.abp.test^
@@||excepted.test^
||allowwild.test^
||script.test^$script
"""),
    "wild": ("wildcard", """*.wild.test
*.nest.test
*.deep.nest.test
"""),
    "mixed": ("auto", """both.test
*.both.test
0.0.0.0 hostsline.mixed.test
||abpline.mixed.test^
"""),
    "kidsonly": ("domains", "games.test\n"),
}

LOCAL_RECORDS = [
    {"name": "nas.lan", "type": "A", "value": "192.168.1.10"},
    {"name": "nas.lan", "type": "AAAA", "value": "fd00::10", "ttl": 60},
    {"name": "files.lan", "type": "CNAME", "value": "nas.lan"},
    {"name": "info.lan", "type": "TXT", "value": "hello world"},
    {"name": "10.1.168.192.in-addr.arpa", "type": "PTR", "value": "nas.lan"},
    {"name": "local.abp.test", "type": "A", "value": "192.168.1.20"},
]

DENY = ["denied.test", "*.denywild.test", "/^ad[0-9]+[.]rx[.]test$/", "both.rule.test"]
ALLOW = ["allowed.abp.test", "*.allowwild.test", "/^safe[0-9]+[.]abp[.]test$/",
         "both.rule.test"]

KID = "127.0.0.2"
GUEST = "127.0.0.3"

# (name, client or None, action, reason, matched, source)
B, A, L = "block", "allow", "local"
PROBES = [
    ("ads.hosts.test", None, B, "blocklist_domain", "ads.hosts.test", "hosts"),
    ("track.hosts.test", None, B, "blocklist_domain", "track.hosts.test", "hosts"),
    ("multi.hosts.test", None, B, "blocklist_domain", "multi.hosts.test", "hosts"),
    ("v6.hosts.test", None, B, "blocklist_domain", "v6.hosts.test", "hosts"),
    ("sub.ads.hosts.test", None, A, "none", "", ""),
    # the hosts file's "0.0.0.0 localhost" line is no entry; the name is special.localhost's
    ("localhost", None, L, "special_localhost", "localhost", "special.localhost"),
    ("plain.test", None, B, "blocklist_domain", "plain.test", "doms"),
    ("www.plain.test", None, A, "none", "", ""),
    ("abp.test", None, B, "blocklist_domain", "abp.test", "abp"),
    ("a.b.abp.test", None, B, "blocklist_wildcard", "abp.test", "abp"),
    ("ok.abp.test", None, A, "blocklist_exception", "ok.abp.test", "abp"),
    ("deep.ok.abp.test", None, A, "blocklist_exception", "ok.abp.test", "abp"),
    ("onlyexact.abp.test", None, A, "blocklist_exception", "onlyexact.abp.test", "abp"),
    ("x.onlyexact.abp.test", None, B, "blocklist_wildcard", "abp.test", "abp"),
    ("exact.abp2.test", None, B, "blocklist_domain", "exact.abp2.test", "abp"),
    ("sub.exact.abp2.test", None, A, "none", "", ""),
    ("excepted.test", None, A, "blocklist_exception", "excepted.test", "abp"),
    ("script.test", None, A, "none", "", ""),  # $script: skipped, never widened
    ("wild.test", None, A, "none", "", ""),
    ("a.wild.test", None, B, "blocklist_wildcard", "wild.test", "wild"),
    ("sub.wild.test", None, B, "blocklist_domain", "sub.wild.test", "doms"),
    ("x.sub.wild.test", None, B, "blocklist_wildcard", "wild.test", "wild"),
    ("nest.test", None, A, "none", "", ""),
    ("b.nest.test", None, B, "blocklist_wildcard", "nest.test", "wild"),
    ("deep.nest.test", None, B, "blocklist_wildcard", "nest.test", "wild"),
    ("a.deep.nest.test", None, B, "blocklist_wildcard", "deep.nest.test", "wild"),
    ("both.test", None, B, "blocklist_domain", "both.test", "mixed"),
    ("a.both.test", None, B, "blocklist_wildcard", "both.test", "mixed"),
    ("hostsline.mixed.test", None, B, "blocklist_domain", "hostsline.mixed.test", "mixed"),
    ("x.abpline.mixed.test", None, B, "blocklist_wildcard", "abpline.mixed.test", "mixed"),
    ("denied.test", None, B, "user_deny", "denied.test", "denied.test"),
    ("sub.denied.test", None, A, "none", "", ""),
    ("x.denywild.test", None, B, "user_deny", "denywild.test", "*.denywild.test"),
    ("denywild.test", None, A, "none", "", ""),
    ("ad7.rx.test", None, B, "user_deny", "ad7.rx.test", "/^ad[0-9]+[.]rx[.]test$/"),
    ("adx.rx.test", None, A, "none", "", ""),
    ("allowed.abp.test", None, A, "user_allow", "allowed.abp.test", "allowed.abp.test"),
    ("y.allowwild.test", None, A, "user_allow", "allowwild.test", "*.allowwild.test"),
    ("allowwild.test", None, B, "blocklist_domain", "allowwild.test", "abp"),
    ("safe12.abp.test", None, A, "user_allow", "safe12.abp.test",
     "/^safe[0-9]+[.]abp[.]test$/"),
    ("both.rule.test", None, A, "user_allow", "both.rule.test", "both.rule.test"),
    ("local.abp.test", None, L, "local_record", "local.abp.test", ""),
    ("nas.lan", None, L, "local_record", "nas.lan", ""),
    ("games.test", None, A, "none", "", ""),
    ("games.test", KID, B, "blocklist_domain", "games.test", "kidsonly"),
    ("ads.hosts.test", KID, A, "none", "", ""),
    ("abp.test", KID, B, "blocklist_domain", "abp.test", "abp"),
    ("denied.test", KID, B, "user_deny", "denied.test", "denied.test"),
    ("abp.test", GUEST, A, "none", "", ""),
    ("denied.test", GUEST, A, "none", "", ""),
    ("nas.lan", GUEST, L, "local_record", "nas.lan", ""),
]


def corpus_config(tmp_path, **filter_over) -> dict:
    lists = tmp_path / "lists-src"
    lists.mkdir(exist_ok=True)
    sources = []
    for name, (fmt, body) in SOURCES.items():
        p = lists / f"{name}.txt"
        p.write_bytes(body.encode())
        s = {"name": name, "path": str(p), "format": fmt}
        if name == "abp":
            s["groups"] = ["default", "kids"]
        if name == "kidsonly":
            s["groups"] = ["kids"]
        sources.append(s)
    flt = {"sources": sources, "deny": DENY, "allow": ALLOW, "block_ttl": 42}
    flt.update(filter_over)
    return {
        "filter": flt,
        "groups": {"kids": {"sources": ["kidsonly"]}, "guests": {"filtering": False}},
        "clients": [{"name": "kid", "ids": [f"{KID}/32"], "groups": ["kids"]},
                    {"name": "guest", "ids": [GUEST], "groups": ["guests"]}],
        "local_records": LOCAL_RECORDS,
    }


def ask(nx, name, client=None, rdtype="A", proto="udp"):
    q = make_query(name, rdtype, edns=0)
    if client:
        return query_from(nx, q, src=client, proto=proto)
    return getattr(nx, proto)(q)


def check_dns(nx, up, probe, r, seen_before=0):
    """The DNS answer agrees with the probe's expected decision (seen_before: upstream queries
    for the name before this probe)."""
    name, client, action, reason, matched, source = probe
    who = f"{name} from {client or '127.0.0.1'}"
    if action == B:
        assert r.rcode() == dns.rcode.NOERROR, f"{who}: {dns.rcode.to_text(r.rcode())}"
        assert answers(r) == ["0.0.0.0"], f"{who}: blocked answer {answers(r)}"
        assert r.answer[0].ttl == 42, f"{who}: block_ttl 42 expected, got {r.answer[0].ttl}"
        kind = "rule" if reason == "user_deny" else "list"
        assert ede(r) == [(EDE_BLOCKED, f"blocked by {kind} {source}")], f"{who}: {ede(r)}"
        assert len(up.queries(name)) == seen_before, f"{who}: a blocked name reached the upstream"
    elif action == A:
        assert r.rcode() == dns.rcode.NOERROR, f"{who}: {dns.rcode.to_text(r.rcode())}"
        assert answers(r) == ["192.0.2.1"], f"{who}: expected the upstream's answer"
        assert not any(c == EDE_BLOCKED for c, _ in ede(r)), f"{who}: EDE 15 on an allowed name"
    else:
        assert r.flags & dns.flags.AA, f"{who}: a local answer is authoritative"
        assert len(up.queries(name)) == seen_before, f"{who}: a local name reached the upstream"


def test_corpus_over_dns_matches_expectations_and_lookup(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], corpus_config(tmp_path))
    before = nx.metrics()
    counts = {"user_deny": 0, "blocklist_domain": 0, "blocklist_wildcard": 0}
    for probe in PROBES:
        seen = len(up.queries(probe[0]))
        r = ask(nx, probe[0], probe[1])
        check_dns(nx, up, probe, r, seen)
        if probe[2] == B:
            counts[probe[3]] += 1
    after = nx.metrics()
    for reason, n in counts.items():
        got = after.get("nxdns_blocked_total", reason=reason) - \
            before.get("nxdns_blocked_total", reason=reason)
        assert got == n, f"nxdns_blocked_total{{reason={reason}}} rose by {got}, expected {n}"
    nblocked = sum(counts.values())
    assert after.get("nxdns_answers_total", result="blocked") - \
        before.get("nxdns_answers_total", result="blocked") == nblocked
    nlocal = sum(1 for p in PROBES if p[2] == L)
    assert after.get("nxdns_answers_total", result="local") - \
        before.get("nxdns_answers_total", result="local") == nlocal

    # The same decisions from `nxdns lookup` on the same config and state_dir.
    for client in (None, KID, GUEST):
        mine = [p for p in PROBES if p[1] == client]
        rows = lookup_cli(nx.config_path, [p[0] for p in mine], client=client)
        for p, row in zip(mine, rows):
            want = {"name": p[0], "action": p[2], "reason": p[3], "matched": p[4],
                    "source": p[5]}
            assert row == want, f"lookup {p[0]} (client {client}): {row} != {want}"


def test_snapshot_counts_in_metrics(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], corpus_config(tmp_path))
    m = nx.metrics()
    # hosts 4, doms 4, abp: abp.test, exact.abp2.test, allowwild.test + 3 exceptions,
    # wild 3, mixed 3 names (both.test and abpline once each with two flags), kidsonly 1
    assert m.get("nxdns_filter_source_names", source="hosts", body="list") == 4
    assert m.get("nxdns_filter_source_names", source="abp", body="allow") == 3
    assert m.get("nxdns_filter_source_names", source="abp", body="wild") == 2
    assert m.get("nxdns_filter_source_names", source="wild", body="wild") == 3
    assert m.get("nxdns_filter_source_names", source="wild", body="list") == 0
    assert m.get("nxdns_filter_source_names", source="mixed", body="list") == 3
    assert m.get("nxdns_filter_source_names", source="mixed", body="wild") == 2
    assert m.get("nxdns_filter_snapshot_entries") == 4 + 4 + 6 + 3 + 3 + 1
    assert m.get("nxdns_filter_snapshot_bytes") > 0
    assert "snapshot built" in nx.log()


def test_local_records_all_types(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], corpus_config(tmp_path))
    cases = [
        ("nas.lan", "A", ["192.168.1.10"], 300),
        ("nas.lan", "AAAA", ["fd00::10"], 60),
        ("info.lan", "TXT", ['"hello world"'], 300),
        ("10.1.168.192.in-addr.arpa", "PTR", ["nas.lan."], 300),
        ("local.abp.test", "A", ["192.168.1.20"], 300),
    ]
    for proto in ("udp", "tcp"):
        for name, t, want, ttl in cases:
            r = ask(nx, name.upper(), rdtype=t, proto=proto)
            assert r.rcode() == dns.rcode.NOERROR, (name, t)
            assert r.flags & dns.flags.AA, (name, t)
            assert answers(r) == want, (name, t, answers(r))
            assert r.answer[0].ttl == ttl, (name, t, r.answer[0].ttl)
            assert r.answer[0].rdtype == dns.rdatatype.from_text(t)
    # A CNAME name answers every type with the CNAME, then the local target's records.
    r = ask(nx, "files.lan", rdtype="A")
    assert r.flags & dns.flags.AA and r.rcode() == dns.rcode.NOERROR
    assert r.answer and r.answer[0].rdtype == dns.rdatatype.CNAME, r.answer
    assert [rd.to_text() for rs in r.answer for rd in rs] == ["nas.lan.", "192.168.1.10"]
    # A missing type of an existing local name: NODATA (NOERROR, empty, authoritative).
    for name, t in (("info.lan", "A"), ("nas.lan", "TXT"), ("nas.lan", "MX")):
        r = ask(nx, name, rdtype=t)
        assert r.rcode() == dns.rcode.NOERROR, (name, t, dns.rcode.to_text(r.rcode()))
        assert r.flags & dns.flags.AA, (name, t)
        assert not r.answer, (name, t, r.answer)
    assert not up.queries(), "local names must never reach the upstream"


MODES = {
    "null": ({}, {"A": (dns.rcode.NOERROR, ["0.0.0.0"]), "AAAA": (dns.rcode.NOERROR, ["::"]),
                  "TXT": (dns.rcode.NOERROR, []), "MX": (dns.rcode.NOERROR, [])}),
    "nxdomain": ({}, {t: (dns.rcode.NXDOMAIN, []) for t in ("A", "AAAA", "TXT")}),
    "refused": ({}, {t: (dns.rcode.REFUSED, []) for t in ("A", "AAAA", "TXT")}),
    "custom": ({"block_addresses": ["192.0.2.66", "2001:db8::66"]},
               {"A": (dns.rcode.NOERROR, ["192.0.2.66"]),
                "AAAA": (dns.rcode.NOERROR, ["2001:db8::66"]),
                "TXT": (dns.rcode.NOERROR, [])}),
    "custom_v4_only": ({"block_addresses": ["192.0.2.67"]},
                       {"A": (dns.rcode.NOERROR, ["192.0.2.67"]),
                        "AAAA": (dns.rcode.NOERROR, [])}),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_block_modes(make_upstream, make_nxdns, tmp_path, mode):
    extra, table = MODES[mode]
    up = make_upstream()
    cfg = corpus_config(tmp_path, block_mode=mode.split("_")[0], block_ttl=77, **extra)
    nx = start_nx(make_nxdns, [up], cfg)
    for name, text in (("a.b.abp.test", "blocked by list abp"),
                       ("v6.hosts.test", "blocked by list hosts"),
                       ("x.denywild.test", "blocked by rule *.denywild.test")):
        for t, (rcode, want) in table.items():
            for proto in ("udp", "tcp"):
                r = ask(nx, name, rdtype=t, proto=proto)
                what = f"{mode} {name} {t} {proto}"
                assert r.rcode() == rcode, f"{what}: {dns.rcode.to_text(r.rcode())}"
                assert answers(r) == want, f"{what}: {answers(r)}"
                for rs in r.answer:
                    assert rs.ttl == 77, f"{what}: ttl {rs.ttl}"
                    assert rs.name == dns.name.from_text(name)
                assert ede(r) == [(EDE_BLOCKED, text)], f"{what}: {ede(r)}"
                assert r.question[0].name == dns.name.from_text(name)
    assert not up.queries()


def test_groups_and_clients_tcp(make_upstream, make_nxdns, tmp_path):
    """The client's source address picks its groups over TCP too."""
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], corpus_config(tmp_path))
    r = ask(nx, "games.test", KID, proto="tcp")
    assert answers(r) == ["0.0.0.0"] and ede(r) == [(EDE_BLOCKED, "blocked by list kidsonly")]
    r = ask(nx, "games.test", None, proto="tcp")
    assert answers(r) == ["192.0.2.1"]
    r = ask(nx, "plain.test", GUEST, proto="tcp")
    assert answers(r) == ["192.0.2.1"], "guests do not filter"
    r = ask(nx, "plain.test", "127.0.0.9", proto="tcp")
    assert answers(r) == ["0.0.0.0"], "an unknown client is in the default group"


@pytest.mark.parametrize("cache_size", [0, 1000], ids=["nocache", "cache"])
def test_cname_cloaking(make_upstream_cls, make_nxdns, tmp_path, cache_size):
    up = make_upstream_cls(XUpstream)
    # cloak.example -> cdn.cloak.example -> x.abp.test (blocked by ||abp.test^)
    up.script["cloak.example"] = XRule(
        records=[("CNAME", "cdn.cloak.example.")], ttl=300,
        chain=[("cdn.cloak.example.", "CNAME", "x.abp.test."),
               ("x.abp.test.", "A", "192.0.2.50")])
    # an excepted name whose answer points at a blocked one: not checked (allowed by list)
    up.script["ok.abp.test"] = XRule(records=[("CNAME", "ads.hosts.test.")],
                                     chain=[("ads.hosts.test.", "A", "192.0.2.51")])
    up.script["clean.example"] = XRule(records=[("CNAME", "cdn.clean.example.")],
                                       chain=[("cdn.clean.example.", "A", "192.0.2.52")])
    cfg = corpus_config(tmp_path)
    cfg["cache"] = {"size": cache_size}
    nx = start_nx(make_nxdns, [up], cfg)
    before = nx.metrics()
    rounds = 2
    for i in range(rounds):
        r = ask(nx, "cloak.example")
        assert r.rcode() == dns.rcode.NOERROR, f"round {i}"
        assert answers(r) == ["0.0.0.0"], f"round {i}: cloaked CNAME not blocked: {r.answer}"
        assert ede(r) == [(EDE_BLOCKED, "blocked by list abp")], f"round {i}: {ede(r)}"
        assert r.answer[0].name == dns.name.from_text("cloak.example")
        assert r.answer[0].ttl == 42
        # guests are not filtered: the chain goes out as the upstream sent it
        r = ask(nx, "cloak.example", GUEST)
        assert "192.0.2.50" in answers(r) and not ede(r), f"round {i}: guest {r.answer}"
        r = ask(nx, "ok.abp.test")
        assert "192.0.2.51" in answers(r), f"round {i}: excepted name's CNAME was checked"
        r = ask(nx, "clean.example")
        assert "192.0.2.52" in answers(r)
    after = nx.metrics()
    assert after.get("nxdns_blocked_total", reason="cname") - \
        before.get("nxdns_blocked_total", reason="cname") == rounds
    nq = len(up.queries("cloak.example"))
    if cache_size:
        # one upstream exchange for the default group; the guest's identical query may
        # be served from the same cached entry
        assert nq == 1, f"with the cache on, upstream saw {nq} queries for cloak.example"
        assert after.get("nxdns_cache_hits_total") - before.get("nxdns_cache_hits_total") >= 3
    else:
        assert nq == 2 * rounds


def decisions(nx, names):
    out = []
    for n in names:
        r = ask(nx, n)
        a = answers(r)
        out.append("block" if a == ["0.0.0.0"] else "allow" if a == ["192.0.2.1"] else
                   f"other {a}")
    return out


@pytest.mark.parametrize("disabled", [False, True], ids=["all_enabled", "one_disabled"])
def test_restart_maps_the_snapshot_and_sigusr1_rebuilds(make_upstream, make_nxdns, tmp_path,
                                                        disabled):
    up = make_upstream()
    cfg = corpus_config(tmp_path)
    if disabled:
        off = tmp_path / "off.txt"
        off.write_text("off.test\n")
        cfg["filter"]["sources"].append({"name": "off", "path": str(off), "enabled": False})
    nx1 = start_nx(make_nxdns, [up], cfg, name="first")
    assert nx1.log().count("snapshot built") == 1
    names = [p[0] for p in PROBES if p[1] is None] + ["off.test"]
    want = decisions(nx1, names)
    assert want[-1] == "allow", "a disabled source blocks nothing"
    assert nx1.stop() == 0

    cfg = dict(cfg, state_dir=str(nx1.workdir / "state"))
    nx2 = start_nx(make_nxdns, [up], cfg, name="second")
    log = nx2.log()
    assert "mapped snapshot" in log and "snapshot built" not in log, \
        "a restart with unchanged sources must map the snapshot on disk, not rebuild it:\n" + log
    assert decisions(nx2, names) == want
    gen = nx2.metrics().get("nxdns_filter_snapshot_generation")
    # SIGHUP without changes: nothing rebuilt.
    nx2.reload()
    nx2.wait_counter("nxdns_config_reloads_total", 1, result="ok")
    assert nx2.metrics().get("nxdns_filter_snapshot_generation") == gen
    assert "snapshot built" not in nx2.log()
    # SIGUSR1: a forced rebuild, same decisions.
    nx2.send_signal(signal.SIGUSR1)
    assert wait_until(lambda: nx2.metrics().get("nxdns_filter_snapshot_generation") == gen + 1,
                      10), "SIGUSR1 did not rebuild the snapshot"
    assert nx2.log().count("snapshot built") == 1
    assert decisions(nx2, names) == want
