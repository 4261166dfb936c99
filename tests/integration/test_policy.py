"""The policy module over the wire (issue 13): one ladder for DNS and `nxdns lookup`, and local
DNS that a stub resolver accepts.

- `test_workload_daemon_and_lookup_agree`: every (name, type) of ../shared/data/workload through
  the daemon over DNS and through `nxdns lookup` on the same daemon's state, the same verdict
  for each (skipped, reported, without NX_SHARED_DIR).
- Local DNS: CNAME chains to a local target and to an upstream target (cache included, NXDOMAIN
  kept), MX/SRV/CAA, generated PTR, NODATA instead of forwarding, a forward zone's other names
  not shadowed by local records.
- User rules limited to groups, in the config file and through the API; client tags.
- The HTTPS TargetName check of upstream answers.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from pathlib import Path
from typing import Dict, List, Tuple

import dns.flags
import dns.rcode
import dns.rdatatype
import pytest

from filterkit import FastUpstream, XRule, XUpstream, query_from, run_cli, soa, start_nx
from harness import answers, make_query


def _shared() -> Path:
    return Path(os.environ.get("NX_SHARED_DIR",
                               Path(__file__).resolve().parents[3] / "shared"))


# ------------------------------------------------------------------ the workload, both ways

# A handful of the shared lists, one per syntax, with the allowlist whose exceptions the
# workload labels: enough for every level to decide some names, small enough to compile in a
# fraction of a second.
LISTS = [
    ("facebook", "lists/hosts/lightswitch05_facebook-extended.txt"),
    ("gambling", "lists/adblock/hagezi_gambling_2023.txt"),
    ("allow", "lists/adblock/hagezi_allowlist_2023.txt"),
    ("onehosts", "lists/domains/1hosts_pro_2021.txt"),
    ("wild", "lists/wildcard/hagezi_light_2022.txt"),
]

TYPES = {"A": 1, "AAAA": 28}


def _workload(shared: Path) -> Tuple[List[Tuple[str, str]], Dict[str, Tuple[str, str]]]:
    """Distinct (name, qtype) pairs in file order, and each name's (category, evidence)."""
    pairs, seen, label = [], set(), {}
    with open(shared / "data/workload/queries-mixed.labels.tsv") as f:
        for line in f:
            if line.startswith("#"):
                continue
            name, qtype, cat, ev = line.rstrip("\n").split("\t")
            if (name, qtype) not in seen:
                seen.add((name, qtype))
                pairs.append((name, qtype))
            label[name] = (cat, ev)
    return pairs, label


def _badfilter_picks(label: Dict[str, Tuple[str, str]]) -> List[Tuple[str, str]]:
    """User rules `||x^$badfilter` for names the gambling list (adblock) blocks, `|x^$badfilter`
    for names 1hosts (domains, exact entries) blocks, `@@||x^$badfilter` for names the
    allowlist excepts: (rule, name), eight of each, in workload order."""
    picks = [("||{}^$badfilter", "blocked_exact_popular", "lists/adblock/hagezi_gambling_2023.txt"),
             ("|{}^$badfilter", "blocked_exact_popular", "lists/domains/1hosts_pro_2021.txt"),
             ("@@||{}^$badfilter", "allowlisted_exception",
              "allow:lists/adblock/hagezi_allowlist_2023.txt block:lists/domains/1hosts_pro_2021.txt")]
    out = []
    for form, cat, ev in picks:
        names = [n for n, (c, e) in label.items() if c == cat and e == ev][:8]
        out += [(form.format(n), n) for n in names]
    return out


def _query_bytes(qid: int, name: str, qtype: int) -> bytes:
    wire = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".") if p) + b"\0"
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + wire + struct.pack("!HH", qtype, 1)


def _ask_all(port: int, pairs: List[Tuple[str, str]], window: int = 128,
             deadline_s: float = 120.0) -> List[int]:
    """Send every query over UDP, `window` in flight; returns each reply's rcode (or -1: no
    reply after three tries). Replies are matched by id and question bytes."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.connect(("127.0.0.1", port))
    s.settimeout(2.0)
    out = [-1] * len(pairs)
    end = time.monotonic() + deadline_s
    todo = list(range(len(pairs)))
    for attempt in range(3):
        missing = []
        for start in range(0, len(todo), window):
            batch = todo[start:start + window]
            pending = {}
            for k, i in enumerate(batch):
                qid = (k + attempt * window) & 0xFFFF
                q = _query_bytes(qid, pairs[i][0], TYPES[pairs[i][1]])
                pending[qid] = (i, q[12:])
                s.send(q)
            while pending and time.monotonic() < end:
                try:
                    r = s.recv(4096)
                except socket.timeout:
                    break
                if len(r) < 12:
                    continue
                qid = struct.unpack("!H", r[:2])[0]
                hit = pending.get(qid)
                if hit and r[12:12 + len(hit[1])] == hit[1]:
                    out[hit[0]] = r[3] & 0x0F
                    del pending[qid]
            missing += [i for i, _ in pending.values()]
        todo = missing
        if not todo:
            break
    s.close()
    return out


@pytest.mark.nx_timeout(180)
def test_workload_daemon_and_lookup_agree(make_nxdns, tmp_path):
    shared = _shared()
    if not (shared / "data/workload/queries-mixed.labels.tsv").exists():
        pytest.skip(f"NX_SHARED_DIR {shared} absent: the shared workload is not available")
    pairs, label = _workload(shared)
    cancelled = _badfilter_picks(label)
    up = FastUpstream().start()
    try:
        cfg = {
            "filter": {
                "sources": [{"name": n, "path": str(shared / "data" / p)} for n, p in LISTS],
                # refused: a blocked answer is told by its rcode alone, parsed from the raw bytes
                "block_mode": "refused",
                # and user $badfilter rules that turn list entries off (badfilter.c)
                "deny": ["*.doubleclick.net", "/^ads?[0-9]*[.]/"] + [r for r, _ in cancelled],
                "allow": ["*.facebook.com"],
            },
            "local_records": [{"name": "nas.lan", "type": "A", "value": "192.168.1.10"}],
            "log": {"level": "info"},
            "logging": {"query_log": False},
            "cache": {"size": 16 << 20},
            "query_budget": {"permits": 256},
        }
        nx = start_nx(make_nxdns, [up.addr], cfg)
        pairs.append(("nas.lan", "A"))
        t0 = time.monotonic()
        rcodes = _ask_all(nx.port, pairs)
        t_dns = time.monotonic() - t0
        assert rcodes.count(-1) == 0, f"{rcodes.count(-1)} queries unanswered"

        verdict = {}
        for qtype in TYPES:
            names = [n for n, t in pairs if t == qtype]
            p = run_cli(["lookup", "--config", str(nx.config_path), "--type", qtype, "-"],
                        stdin="".join(n + "\n" for n in names), timeout=120)
            assert p.returncode == 0, p.stderr[-2000:]
            rows = [json.loads(ln) for ln in p.stdout.splitlines()]
            assert len(rows) == len(names)
            for n, row in zip(names, rows):
                verdict[(n, qtype)] = row

        want_rcode = {"block": dns.rcode.REFUSED, "allow": dns.rcode.NOERROR,
                      "local": dns.rcode.NOERROR}
        # special-use names nxdns answers NXDOMAIN itself (the workload's random single-label
        # names are Chrome's intranet-redirect probes: special.domain_needed's)
        special_nx = {"special_use_name", "single_label", "private_reverse", "firefox_canary",
                      "private_relay"}
        bad = []
        counts: Dict[str, int] = {}
        for (name, qtype), rc in zip(pairs, rcodes):
            row = verdict[(name, qtype)]
            counts[row["action"]] = counts.get(row["action"], 0) + 1
            want = dns.rcode.NXDOMAIN if row["reason"] in special_nx else \
                want_rcode[row["action"]]
            if rc != want:
                bad.append(f"{name} {qtype}: DNS {dns.rcode.to_text(rc)}, lookup {row}")
        assert not bad, f"{len(bad)} of {len(pairs)} differ, e.g. " + "; ".join(bad[:10])
        # Every level decided something, and names the workload labels as blocked by one of
        # these lists are blocked (the labels come from the lists, not from nxdns).
        reasons = {r["reason"] for r in verdict.values()}
        assert {"blocklist_domain", "blocklist_wildcard", "blocklist_exception", "user_allow",
                "user_deny", "local_record", "none"} <= reasons, reasons
        ours = {"lists/" + p.split("lists/", 1)[1] for _, p in LISTS}
        off = {n for _, n in cancelled}
        for (name, qtype), row in verdict.items():
            cat, ev = label.get(name, ("", ""))
            if cat.startswith("blocked") and ev in ours and name not in off and \
                    row["reason"] not in ("user_allow", "blocklist_exception"):
                assert row["action"] == "block", (name, cat, ev, row)
        # the $badfilter rules turned some listed names off (answered normally), both ways
        seen = {n: row for (n, _), row in verdict.items()}
        gone = [n for r, n in cancelled if not r.startswith("@@") and n in seen
                and seen[n]["reason"] == "none"]
        assert gone, [(r, seen.get(n)) for r, n in cancelled]
        print(f"\n{len(pairs)} (name, type) pairs: {counts}; over DNS in {t_dns:.1f} s; "
              f"{len(gone)} of {len(cancelled)} $badfilter picks answered normally")
    finally:
        up.stop()


# ------------------------------------------------------------------ local DNS

LOCALS = [
    {"name": "nas.lan", "type": "A", "value": "192.168.1.10"},
    {"name": "nas.lan", "type": "AAAA", "value": "fd00::10"},
    {"name": "alias.lan", "type": "CNAME", "value": "nas.lan"},
    {"name": "chain.lan", "type": "CNAME", "value": "alias.lan"},
    {"name": "ext.lan", "type": "CNAME", "value": "www.example.net"},
    {"name": "gone.lan", "type": "CNAME", "value": "missing.example.net"},
    {"name": "neg.lan", "type": "CNAME", "value": "nosuch.example.org"},
    {"name": "lan", "type": "MX", "value": "10 mail.lan"},
    {"name": "lan", "type": "MX", "value": "20 backup.lan"},
    {"name": "_sip._udp.lan", "type": "SRV", "value": "10 5 5060 sip.lan"},
    {"name": "lan", "type": "CAA", "value": '0 issue "letsencrypt.org"'},
    {"name": "printer.lan", "type": "A", "value": "192.168.1.20"},
    {"name": "10.1.168.192.in-addr.arpa", "type": "PTR", "value": "given.lan"},
    {"name": "zoned.corp.example", "type": "A", "value": "192.168.7.7"},
]


def _local_nx(make_nxdns, make_upstream_cls):
    up = make_upstream_cls(XUpstream)
    up.script["www.example.net"] = XRule(records=[("CNAME", "edge.example.net.")],
                                         chain=[("edge.example.net.", "A", "192.0.2.80")])
    up.script["missing.example.net"] = XRule(rcode="NXDOMAIN", records=[])
    # a compressed SOA, TTL 300 above its MINIMUM 60: the negative TTL is 60 (RFC 2308 5)
    up.script["nosuch.example.org"] = XRule(rcode="NXDOMAIN", records=[],
                                            authority=[soa("example.org.", minimum=60)],
                                            auth_ttl=300)
    zone = make_upstream_cls(XUpstream, default_a="198.51.100.7")
    cfg = {"local_records": LOCALS,
           "upstream": {"forward_zones": {"corp.example": [zone.addr]}},
           "cache": {"size": 1 << 20}}
    return start_nx(make_nxdns, [up], cfg), up, zone


def _ask(nx, name, rdtype):
    return nx.udp(make_query(name, rdtype))


def _records(r) -> List[Tuple[str, str, str]]:
    return [(rs.name.to_text().lower(), dns.rdatatype.to_text(rs.rdtype), rd.to_text())
            for rs in r.answer for rd in rs]


def test_local_cname_chains(make_nxdns, make_upstream_cls):
    nx, up, _ = _local_nx(make_nxdns, make_upstream_cls)
    # to a local target, through two local CNAMEs: the target's records follow, authoritative
    r = _ask(nx, "chain.lan", "AAAA")
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    assert _records(r) == [("chain.lan.", "CNAME", "alias.lan."),
                           ("alias.lan.", "CNAME", "nas.lan."),
                           ("nas.lan.", "AAAA", "fd00::10")], _records(r)
    # to an upstream target: resolved through the forwarding path and appended
    for _ in range(2):
        r = _ask(nx, "Ext.LAN", "A")
        assert r.rcode() == dns.rcode.NOERROR, dns.rcode.to_text(r.rcode())
        assert r.question[0].name.to_text() == "Ext.LAN."
        assert _records(r) == [("ext.lan.", "CNAME", "www.example.net."),
                               ("www.example.net.", "CNAME", "edge.example.net."),
                               ("edge.example.net.", "A", "192.0.2.80")], _records(r)
        assert not r.flags & dns.flags.AA, "the tail is upstream's data"
    assert len(up.queries("www.example.net")) == 1, "the second answer came from the cache"
    assert not up.queries("ext.lan"), "the local name itself never goes upstream"
    # an upstream NXDOMAIN for the target stays NXDOMAIN, with the local CNAME (RFC 6604)
    r = _ask(nx, "gone.lan", "A")
    assert r.rcode() == dns.rcode.NXDOMAIN
    assert _records(r) == [("gone.lan.", "CNAME", "missing.example.net.")]
    assert nx.metrics().get("nxdns_answers_total", result="local") == 4


def test_local_cname_to_an_nxdomain_target_carries_the_soa(make_nxdns, make_upstream_cls):
    """A stub gets what a recursive would send for the chain: NXDOMAIN, the local CNAME in the
    answer, and upstream's SOA in the authority section with the negative TTL (RFC 2308)."""
    nx, up, _ = _local_nx(make_nxdns, make_upstream_cls)
    for attempt in range(2):  # the second through the cache
        r = _ask(nx, "neg.lan", "A")
        assert r.rcode() == dns.rcode.NXDOMAIN, dns.rcode.to_text(r.rcode())
        assert _records(r) == [("neg.lan.", "CNAME", "nosuch.example.org.")]
        assert len(r.authority) == 1, r.authority
        rs = r.authority[0]
        assert rs.rdtype == dns.rdatatype.SOA and rs.name.to_text() == "example.org."
        assert rs[0].mname.to_text() == "ns.example.org." and rs[0].minimum == 60
        assert 0 < rs.ttl <= 60, rs.ttl
        assert not r.flags & dns.flags.AA
    assert len(up.queries("nosuch.example.org")) == 1


def test_local_mx_srv_caa_ptr_nodata(make_nxdns, make_upstream_cls):
    nx, up, zone = _local_nx(make_nxdns, make_upstream_cls)
    r = _ask(nx, "lan", "MX")
    assert r.flags & dns.flags.AA and answers(r) == ["10 mail.lan.", "20 backup.lan."]
    r = _ask(nx, "_sip._udp.lan", "SRV")
    assert answers(r) == ["10 5 5060 sip.lan."]
    r = _ask(nx, "lan", "CAA")
    assert answers(r) == ['0 issue "letsencrypt.org"']
    # PTR generated from a local A record; a given PTR wins; IPv6 reverse names too
    r = _ask(nx, "20.1.168.192.in-addr.arpa", "PTR")
    assert r.flags & dns.flags.AA and answers(r) == ["printer.lan."]
    r = _ask(nx, "10.1.168.192.in-addr.arpa", "PTR")
    assert answers(r) == ["given.lan."]
    r = _ask(nx, "0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa",
             "PTR")
    assert answers(r) == ["nas.lan."]
    # a type a local name lacks: NODATA, authoritative, never forwarded
    for name, t in (("nas.lan", "TXT"), ("lan", "A"), ("20.1.168.192.in-addr.arpa", "A"),
                    ("_sip._udp.lan", "TXT")):
        r = _ask(nx, name, t)
        assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA, (name, t)
        assert not r.answer, (name, t, r.answer)
    # a public reverse name of no local address is forwarded as before (a private one is
    # special.bogus_priv's: test_special.py)
    _ask(nx, "99.2.0.192.in-addr.arpa", "PTR")
    assert not up.queries("lan") and not up.queries("nas.lan") and not up.queries("_sip._udp.lan")
    assert len(up.queries("99.2.0.192.in-addr.arpa")) == 1
    assert not up.queries("20.1.168.192.in-addr.arpa")


def test_local_records_do_not_shadow_a_forward_zone(make_nxdns, make_upstream_cls):
    nx, up, zone = _local_nx(make_nxdns, make_upstream_cls)
    r = _ask(nx, "zoned.corp.example", "A")
    assert r.flags & dns.flags.AA and answers(r) == ["192.168.7.7"]
    r = _ask(nx, "other.corp.example", "A")
    assert r.rcode() == dns.rcode.NOERROR and answers(r) == ["198.51.100.7"]
    assert len(zone.queries("other.corp.example")) == 1
    assert not zone.queries("zoned.corp.example") and not up.queries("other.corp.example")


# ------------------------------------------------------------------ user rules limited to groups

def _blocked_from(nx, name, src) -> bool:
    r = query_from(nx, make_query(name, "A"), src=src)
    return r.rcode() == dns.rcode.NOERROR and answers(r) == ["0.0.0.0"]


def test_user_rules_limited_to_groups(make_upstream, make_nxdns):
    import adminkit
    from harness import wait_until
    up = make_upstream()
    cfg = {
        "groups": {"kids": {}, "teachers": {}},
        "clients": [{"name": "kid", "ids": ["127.0.0.2"], "groups": ["kids"]},
                    {"name": "teacher", "ids": ["127.0.0.3"], "groups": ["kids", "teachers"]}],
        "filter": {"deny": ["everyone.test", {"rule": "homework.test", "groups": ["kids"]}],
                   "allow": [{"rule": "homework.test", "groups": ["teachers"]}]},
    }
    nx = adminkit.start_nx(make_nxdns, [up], config=cfg)
    # the config form: a default client, a kid, a teacher (kids + teachers: the allow wins)
    assert _blocked_from(nx, "everyone.test", "127.0.0.1")
    assert not _blocked_from(nx, "homework.test", "127.0.0.1")
    assert _blocked_from(nx, "homework.test", "127.0.0.2")
    assert not _blocked_from(nx, "homework.test", "127.0.0.3")
    api = adminkit.logged_in(nx)
    view = api.ok("GET", "/api/filter/rules")
    assert view["deny"] == ["everyone.test", "homework.test"]
    assert view["rules"] == [
        {"list": "allow", "rule": "homework.test", "groups": ["teachers"]},
        {"list": "deny", "rule": "everyone.test", "groups": []},
        {"list": "deny", "rule": "homework.test", "groups": ["kids"]},
    ], view["rules"]
    for client, action in (("127.0.0.1", "allow"), ("127.0.0.2", "block"),
                           ("127.0.0.3", "allow")):
        lk = api.ok("GET", f"/api/lookup?name=homework.test&client={client}")
        assert lk["action"] == action, (client, lk)
    # the API form: a deny rule for the kids group only, written back with its groups
    r = api.post("/api/filter/rules", {"list": "deny", "rule": "games.test",
                                       "groups": ["kids"]})
    assert r.status == 201, r
    assert {"list": "deny", "rule": "games.test", "groups": ["kids"]} in r.json["rules"]
    text = nx.config_path.read_text()
    assert "games.test" in text and text.count("kids") >= 3, text
    assert wait_until(lambda: _blocked_from(nx, "games.test", "127.0.0.2"), 10)
    assert not _blocked_from(nx, "games.test", "127.0.0.1")
    # a plain rule added after it keeps the earlier rules' groups
    assert api.post("/api/filter/rules", {"list": "deny", "rule": "plain.test"}).status == 201
    assert {"list": "deny", "rule": "homework.test", "groups": ["kids"]} in \
        api.ok("GET", "/api/filter/rules")["rules"]
    assert wait_until(lambda: _blocked_from(nx, "plain.test", "127.0.0.1"), 10)
    assert _blocked_from(nx, "homework.test", "127.0.0.2")
    assert not _blocked_from(nx, "homework.test", "127.0.0.1")
    # refused: an unknown group (the loader's message), an empty or malformed groups list
    before = nx.config_path.read_text()
    r = api.post("/api/filter/rules", {"list": "deny", "rule": "x.test", "groups": ["kid"]})
    adminkit.assert_error(r, 400, "invalid_setting")
    assert "unknown group 'kid'" in r.json["message"], r.json
    adminkit.assert_error(api.post("/api/filter/rules", {"list": "deny", "rule": "x.test",
                                                         "groups": []}),
                          400, "bad_request", "groups")
    adminkit.assert_error(api.post("/api/filter/rules", {"list": "deny", "rule": "x.test",
                                                         "groups": [1]}),
                          400, "bad_request", "groups")
    assert nx.config_path.read_text() == before
    # deleting a rule limited to groups
    r = api.delete("/api/filter/rules/deny/games.test")
    assert r.status == 200 and "games.test" not in r.json["deny"], r
    assert wait_until(lambda: not _blocked_from(nx, "games.test", "127.0.0.2"), 10)


def test_local_mx_srv_caa_round_trip_the_api(make_upstream, make_nxdns):
    """The local-records API rewrites the whole list: MX, SRV and CAA records written by hand
    must survive an API edit, and the API can add them."""
    import adminkit
    from harness import wait_until
    up = make_upstream()
    nx = adminkit.start_nx(make_nxdns, [up], config={"local_records": [
        {"name": "lan", "type": "MX", "value": "10 mail.lan"},
        {"name": "_sip._udp.lan", "type": "SRV", "value": "10 5 5060 sip.lan"},
        {"name": "lan", "type": "CAA", "value": "0 issue letsencrypt.org"}]})
    api = adminkit.logged_in(nx)
    got = [(r["name"], r["type"], r["value"]) for r in
           api.ok("GET", "/api/local-records")["local_records"]]
    assert got == [("lan", "MX", "10 mail.lan"), ("lan", "CAA", '0 issue "letsencrypt.org"'),
                   ("_sip._udp.lan", "SRV", "10 5 5060 sip.lan")], got
    r = api.post("/api/local-records", {"name": "lan", "type": "MX", "value": "20 backup.lan"})
    assert r.status == 201, r
    assert wait_until(lambda: answers(_ask(nx, "lan", "MX")) == ["10 mail.lan.",
                                                                  "20 backup.lan."], 10)
    assert answers(_ask(nx, "_sip._udp.lan", "SRV")) == ["10 5 5060 sip.lan."]
    assert answers(_ask(nx, "lan", "CAA")) == ['0 issue "letsencrypt.org"']
    r = api.delete("/api/local-records?name=lan&type=MX&value=10%20mail.lan")
    assert r.status == 200, r
    assert wait_until(lambda: answers(_ask(nx, "lan", "MX")) == ["20 backup.lan."], 10)


def test_client_tags_round_trip_the_api(make_upstream, make_nxdns):
    """clients[].tags ($ctag's input) load, show in /api/clients and survive an API edit."""
    import adminkit
    up = make_upstream()
    nx = adminkit.start_nx(make_nxdns, [up], config={"clients": [
        {"name": "tablet", "ids": ["127.0.0.2"], "tags": ["device_tablet", "user_child"]},
        {"name": "tv", "ids": ["127.0.0.3"]}]})
    api = adminkit.logged_in(nx)
    cl = {c["name"]: c for c in api.ok("GET", "/api/clients")["clients"]}
    assert cl["tablet"]["tags"] == ["device_tablet", "user_child"]
    assert "tags" not in cl["tv"]
    r = api.put("/api/clients/tv", {"tags": ["device_tv"]})
    assert r.status == 200, r
    cl = {c["name"]: c for c in r.json["clients"]}
    assert cl["tv"]["tags"] == ["device_tv"] and cl["tablet"]["tags"] == \
        ["device_tablet", "user_child"], cl
    r = api.put("/api/clients/tv", {"tags": ["Bad Tag"]})
    adminkit.assert_error(r, 400, "invalid_setting")


def test_https_target_name_is_checked(make_nxdns, make_upstream_cls, tmp_path):
    """An HTTPS record whose TargetName is a listed name blocks the answer, as a CNAME to it
    does; TargetName "." (the owner itself) is no target."""
    from filterkit import ede
    lst = tmp_path / "l.txt"
    lst.write_text("svc.tracker.example\n")
    up = make_upstream_cls(XUpstream)
    up.script["shop.test"] = XRule(records=[("HTTPS", "1 svc.tracker.example. alpn=h2")])
    up.script["self.test"] = XRule(records=[("HTTPS", "1 . alpn=h2")])
    nx = start_nx(make_nxdns, [up], {"filter": {"sources": [{"name": "l", "path": str(lst)}]}})
    r = nx.udp(make_query("shop.test", "HTTPS", edns=0))
    assert r.rcode() == dns.rcode.NOERROR and not r.answer, r
    assert (15, "blocked by list l") in ede(r), ede(r)
    r = nx.udp(make_query("self.test", "HTTPS"))
    assert answers(r) == ["1 . alpn=\"h2\""], answers(r)
    assert nx.metrics().get("nxdns_blocked_total", reason="cname") == 1
