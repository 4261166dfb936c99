"""The AdGuard rule language over DNS (issue 13): list rules with modifiers ($client, $ctag,
$dnstype, $dnsrewrite, $important, $denyallow, $badfilter), regex rules, and hosts lines whose
address is the answer, decided by the daemon's policy ladder and by `nxdns lookup` alike. The
default upstream answers 192.0.2.1 for every A query, so "allow" is that answer and "block" the
null answer 0.0.0.0 (filter.block_mode's default)."""

from __future__ import annotations

import time

import dns.name
import dns.rcode
import dns.rdatatype

from adminkit import qlog_rows, wait_written
from filterkit import lookup_cli, query_from, run_cli, start_nx, wait_log
from harness import answers, make_query
from listserver import ListServer

# Three clients on loopback addresses: the tagged "kid" (127.0.0.3), the named laptop
# (127.0.0.4), and everyone else (127.0.0.1 / 127.0.0.2) unnamed and untagged.
KID = "127.0.0.3"
FRANK = "127.0.0.4"

LIST = r"""! AdGuard DNS rules, one per feature under test
||client4.test^$client=127.0.0.2
||clientcidr.test^$client=127.0.0.0/30
||clientname.test^$client='Frank\'s laptop'
||notclient.test^$client=~127.0.0.2
||ctag.test^$ctag=kids
||notctag.test^$ctag=~kids
||dnstype.test^$dnstype=AAAA
||notdnstype.test^$dnstype=~AAAA
||rw-a.test^$dnsrewrite=192.0.2.44
||rw-aaaa.test^$dnsrewrite=NOERROR;AAAA;2001:db8::44
||rw-cname.test^$dnsrewrite=NOERROR;CNAME;rw-a.test
||rw-txt.test^$dnsrewrite=NOERROR;TXT;hello rules
||rw-nx.test^$dnsrewrite=NXDOMAIN;;
||rw-refused.test^$dnsrewrite=REFUSED;;
@@||imp.test^
||imp.test^$important
@@||plainex.test^
||plainex.test^$dnstype=A
||denyallow.test^$denyallow=ok.denyallow.test
||bad.test^
||bad.test^$badfilter
||badside.test^$dnstype=A
||badside.test^$dnstype=A,badfilter
/^re[0-9]+\.rx\.test$/
192.0.2.55 hostsans.test
0.0.0.0 hostsnull.test
"""

URL_LIST = "192.0.2.66 urlhosts.test\n"

# Reason codes of the query log (filter/result.h order).
R_RULE, R_REWRITE, R_HOSTS = 8, 9, 10


def verdict(r):
    a = answers(r)
    if r.rcode() != dns.rcode.NOERROR:
        return dns.rcode.to_text(r.rcode())
    return "block" if a == ["0.0.0.0"] else "allow" if a == ["192.0.2.1"] else f"other {a}"


def ask(nx, name, src=None, rdtype="A"):
    q = make_query(name, rdtype, edns=0)
    return query_from(nx, q, src=src) if src else nx.udp(q)


def config(tmp_path, url=None, url_hosts=None):
    lst = tmp_path / "rules.txt"
    lst.write_text(LIST)
    sources = [{"name": "rules", "path": str(lst)}]
    if url:
        s = {"name": "remote", "url": url}
        if url_hosts:
            s["hosts_answers"] = url_hosts
        sources.append(s)
    return {
        "filter": {"sources": sources},
        "clients": [{"name": "kid", "ids": [f"{KID}/32"], "tags": ["kids"]},
                    {"name": "Frank's laptop", "ids": [f"{FRANK}/32"]}],
    }


def test_modifiers_over_dns_and_lookup(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], config(tmp_path))
    # (name, client address or None, qtype, expected verdict)
    cases = [
        ("client4.test", "127.0.0.2", "A", "block"),
        ("client4.test", "127.0.0.1", "A", "allow"),
        ("sub.client4.test", "127.0.0.2", "A", "block"),
        ("clientcidr.test", "127.0.0.2", "A", "block"),
        ("clientcidr.test", FRANK, "A", "allow"),
        ("clientname.test", FRANK, "A", "block"),
        ("clientname.test", KID, "A", "allow"),
        ("notclient.test", "127.0.0.2", "A", "allow"),
        ("notclient.test", "127.0.0.1", "A", "block"),
        ("ctag.test", KID, "A", "block"),
        ("ctag.test", FRANK, "A", "allow"),
        ("notctag.test", KID, "A", "allow"),
        ("notctag.test", FRANK, "A", "block"),
        ("notdnstype.test", None, "A", "block"),
        ("imp.test", None, "A", "block"),  # $important beats @@
        ("plainex.test", None, "A", "allow"),  # @@ beats a block with a modifier
        ("denyallow.test", None, "A", "block"),
        ("x.denyallow.test", None, "A", "block"),
        ("ok.denyallow.test", None, "A", "allow"),
        ("a.ok.denyallow.test", None, "A", "allow"),
        ("bad.test", None, "A", "allow"),  # cancelled by $badfilter
        ("badside.test", None, "A", "allow"),
        ("re42.rx.test", None, "A", "block"),
        ("rex.rx.test", None, "A", "allow"),
        ("hostsnull.test", None, "A", "block"),
    ]
    for name, src, qt, want in cases:
        assert verdict(ask(nx, name, src, qt)) == want, (name, src, qt)
    for name, src, qt, want in cases:
        (row,) = lookup_cli(nx.config_path, [name], client=src or "127.0.0.1")
        assert row["action"] == want, (name, src, row)
    # $dnstype: AAAA blocked (the null AAAA answer), A resolved
    r = ask(nx, "dnstype.test", rdtype="AAAA")
    assert answers(r) == ["::"], answers(r)
    assert verdict(ask(nx, "dnstype.test")) == "allow"
    r = ask(nx, "notdnstype.test", rdtype="AAAA")
    assert answers(r) != ["::"], "~AAAA must not block AAAA"
    # nothing blocked reached the upstream
    for name in ("imp.test", "re42.rx.test", "denyallow.test"):
        assert not up.queries(name), name


def test_dnsrewrite_answers(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], config(tmp_path))
    r = ask(nx, "rw-a.test")
    assert r.rcode() == dns.rcode.NOERROR and answers(r) == ["192.0.2.44"]
    r = ask(nx, "rw-a.test", rdtype="AAAA")
    assert r.rcode() == dns.rcode.NOERROR and answers(r) == [], "NODATA for another type"
    r = ask(nx, "rw-aaaa.test", rdtype="AAAA")
    assert answers(r) == ["2001:db8::44"]
    r = ask(nx, "rw-cname.test")
    assert [rs.rdtype for rs in r.answer][:1] == [dns.rdatatype.CNAME], r
    assert "rw-a.test." in [rd.to_text() for rs in r.answer for rd in rs]
    r = ask(nx, "rw-txt.test", rdtype="TXT")
    assert answers(r) == ['"hello rules"']
    assert ask(nx, "rw-nx.test").rcode() == dns.rcode.NXDOMAIN
    assert ask(nx, "rw-refused.test").rcode() == dns.rcode.REFUSED
    for name in ("rw-a.test", "rw-aaaa.test", "rw-cname.test", "rw-txt.test", "rw-nx.test",
                 "rw-refused.test"):
        assert not up.queries(name), f"{name}: a rewritten name reached the upstream"
    assert nx.counter("nxdns_filter_rewrite_answers_total") == 7
    # the hosts line of a path source answers with its address (hosts_answers: listed)
    r = ask(nx, "hostsans.test")
    assert answers(r) == ["192.0.2.55"]
    (row,) = lookup_cli(nx.config_path, ["rw-a.test"])
    assert (row["action"], row["reason"]) == ("block", "blocklist_rewrite"), row
    (row,) = lookup_cli(nx.config_path, ["hostsans.test"])
    assert row["reason"] == "blocklist_hosts", row
    # the query log: reason and matched name of the rewrite, hosts and rule verdicts
    ask(nx, "re7.rx.test")
    wait_written(nx, 9)
    rows = {r["name"]: r for r in qlog_rows(nx)}
    assert rows["rw-a.test"]["reason"] == R_REWRITE, rows["rw-a.test"]
    assert rows["rw-a.test"]["matched"] == "rw-a.test"
    assert rows["rw-a.test"]["source"] == "rules"
    assert rows["hostsans.test"]["reason"] == R_HOSTS, rows["hostsans.test"]
    assert rows["re7.rx.test"]["reason"] == R_RULE, rows["re7.rx.test"]


def test_hosts_answers_of_a_url_source(make_upstream, make_nxdns, tmp_path):
    ls = ListServer().start()
    try:
        ls.serve("/hosts.txt", URL_LIST.encode())
        up = make_upstream()
        # default for a URL source: null, the listed address is not an answer (the name blocks)
        nx = start_nx(make_nxdns, [up], config(tmp_path, url=ls.url("/hosts.txt")),
                      name="null")
        assert wait_log(nx, "source remote compiled", timeout=20)
        r = None
        for _ in range(50):
            r = ask(nx, "urlhosts.test")
            if verdict(r) != "allow":
                break
            time.sleep(0.1)
        assert verdict(r) == "block", answers(r)
        (row,) = lookup_cli(nx.config_path, ["urlhosts.test"])
        assert row["action"] == "block" and row["reason"] != "blocklist_hosts", row
        nx.stop()
        # the override: hosts_answers: listed
        other = tmp_path / "listed"
        other.mkdir()
        nx2 = start_nx(make_nxdns, [up],
                       config(other, url=ls.url("/hosts.txt"), url_hosts="listed"),
                       name="listed")
        assert wait_log(nx2, "source remote compiled", timeout=20)
        for _ in range(50):
            r = ask(nx2, "urlhosts.test")
            if answers(r) == ["192.0.2.66"]:
                break
            time.sleep(0.1)
        assert answers(r) == ["192.0.2.66"]
        (row,) = lookup_cli(nx2.config_path, ["urlhosts.test"])
        assert row["reason"] == "blocklist_hosts", row
    finally:
        ls.stop()


def test_user_rules_speak_the_same_language(make_upstream, make_nxdns, tmp_path):
    cfg = config(tmp_path)
    cfg["filter"]["deny"] = ["/^u[0-9]+\\.userrx\\.test$/", "||umod.test^$client=127.0.0.2",
                             "||urw.test^$dnsrewrite=192.0.2.77", "plain-user.test"]
    cfg["filter"]["allow"] = ["@@||client4.test^$ctag=kids", "||imp.test^$client=" + FRANK]
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], cfg)
    cases = [
        ("u12.userrx.test", None, "block"),  # a user regex (PCRE2)
        ("ux.userrx.test", None, "allow"),
        ("umod.test", "127.0.0.2", "block"),
        ("umod.test", "127.0.0.1", "allow"),
        ("plain-user.test", None, "block"),
        ("client4.test", "127.0.0.2", "block"),  # the list's $client rule
        ("imp.test", FRANK, "allow"),  # a user allow beats a list's $important
        ("imp.test", KID, "block"),
    ]
    for name, src, want in cases:
        assert verdict(ask(nx, name, src)) == want, (name, src)
        (row,) = lookup_cli(nx.config_path, [name], client=src or "127.0.0.1")
        assert row["action"] == want, (name, src, row)
    (row,) = lookup_cli(nx.config_path, ["u12.userrx.test"])
    assert (row["reason"], row["source"], row["matched"]) == \
        ("user_deny", "/^u[0-9]+\\.userrx\\.test$/", "u12.userrx.test"), row
    r = ask(nx, "urw.test")
    assert answers(r) == ["192.0.2.77"], "a user $dnsrewrite answers with its record"
    ask(nx, "umod.test", "127.0.0.2")
    wait_written(nx, len(cases) + 2)
    rows = [r for r in qlog_rows(nx) if r["name"] == "umod.test" and r["action"] == 2]
    assert rows and rows[-1]["source"] == "||umod.test^$client=127.0.0.2", rows
    assert rows[-1]["reason"] == 4, rows[-1]  # user_deny


def test_a_bad_user_rule_is_refused_with_the_parsers_message(make_upstream, make_nxdns,
                                                             tmp_path):
    cfg = config(tmp_path)
    cfg["filter"]["deny"] = ["ok.test", "||x.test^$dnstype=NONE"]
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], cfg, start=False)
    r = run_cli(["check-config", str(nx.config_path)])
    assert r.returncode != 0
    assert "filter.deny[1]: '||x.test^$dnstype=NONE': $dnstype: unknown type 'NONE'" in \
        r.stderr + r.stdout, r.stderr


def test_api_rules_in_the_adguard_language(make_upstream, make_nxdns, tmp_path):
    import adminkit
    from adminkit import assert_error, logged_in
    from harness import wait_until
    up = make_upstream()
    nx = adminkit.start_nx(make_nxdns, [up], config=config(tmp_path))
    api = logged_in(nx)
    rule = "||apirule.test^$client='Frank\\'s laptop'"
    r = api.post("/api/filter/rules", {"list": "deny", "rule": rule})
    assert r.status == 201 and r.json["deny"] == [rule], r  # kept as written (case, quotes)
    assert wait_until(lambda: verdict(ask(nx, "apirule.test", FRANK)) == "block", 10, 0.1)
    assert verdict(ask(nx, "apirule.test", KID)) == "allow"
    lk = api.ok("GET", "/api/lookup?name=apirule.test&client=" + FRANK)
    assert (lk["action"], lk["reason"], lk["source"]) == ("block", "user_deny", rule), lk
    j = assert_error(api.post("/api/filter/rules", {"list": "deny",
                                                    "rule": "||x.test^$third-party"}),
                     400, "invalid_setting", "rule")
    assert "unknown modifier 'third-party'" in j["message"], j


def test_a_cname_target_with_a_rewrite_answers_the_rewrite(make_upstream_cls, make_nxdns,
                                                          tmp_path):
    """An upstream answer whose CNAME target a $dnsrewrite rule decides answers with the
    rewrite, as AdGuard Home does (not with the block answer); a plain rule on the target
    still blocks (CNAME cloaking)."""
    from filterkit import XRule, XUpstream
    up = make_upstream_cls(XUpstream)
    up.script["cloak-rw.example"] = XRule(records=[("CNAME", "edge.rw-a.test.")],
                                          chain=[("edge.rw-a.test.", "A", "192.0.2.60")])
    up.script["cloak-nx.example"] = XRule(records=[("CNAME", "rw-nx.test.")],
                                          chain=[("rw-nx.test.", "A", "192.0.2.61")])
    up.script["cloak-re.example"] = XRule(records=[("CNAME", "re5.rx.test.")],
                                          chain=[("re5.rx.test.", "A", "192.0.2.62")])
    nx = start_nx(make_nxdns, [up], config(tmp_path))
    before = nx.counter("nxdns_filter_rewrite_answers_total")
    r = ask(nx, "cloak-rw.example")
    assert r.rcode() == dns.rcode.NOERROR and answers(r) == ["192.0.2.44"], r
    assert r.answer[0].name == dns.name.from_text("cloak-rw.example")
    assert ask(nx, "cloak-nx.example").rcode() == dns.rcode.NXDOMAIN
    assert answers(ask(nx, "cloak-re.example")) == ["0.0.0.0"], "a plain rule still blocks"
    assert nx.counter("nxdns_filter_rewrite_answers_total") - before == 2


def test_adguard_user_rules_limited_to_groups(make_upstream, make_nxdns, tmp_path):
    """An AdGuard-language user rule written {rule: ..., groups: [...]} applies only to the
    clients of those groups (as a plain name rule does), over DNS and in `nxdns lookup`."""
    cfg = config(tmp_path)
    cfg["groups"] = {"kids": {}}
    cfg["clients"][0]["groups"] = ["kids"]  # the kid (127.0.0.3)
    cfg["filter"]["deny"] = [{"rule": "||grp.test^$dnstype=A", "groups": ["kids"]},
                             {"rule": "/^grx[0-9]\\.test$/", "groups": ["kids"]}]
    cfg["filter"]["allow"] = [{"rule": "@@||rw-a.test^", "groups": ["kids"]}]
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], cfg)
    cases = [
        ("x.grp.test", KID, "block"),
        ("x.grp.test", "127.0.0.2", "allow"),
        ("grx1.test", KID, "block"),
        ("grx1.test", "127.0.0.2", "allow"),
        ("rw-a.test", KID, "allow"),  # the kids' exception beats the list's $dnsrewrite
    ]
    for name, src, want in cases:
        assert verdict(ask(nx, name, src)) == want, (name, src)
        (row,) = lookup_cli(nx.config_path, [name], client=src)
        assert row["action"] == want, (name, src, row)
    assert answers(ask(nx, "rw-a.test", "127.0.0.2")) == ["192.0.2.44"], "others: the rewrite"


BF_LIST = """||bfgone.test^
||bfkind.test^
||bfparent.test^
||ads.bfparent.test^
||bfexc.test^
@@||bfexc.test^
||bfboth.test^
||bfkept.test^
||bflater.test^
||bfgrp.test^
"""
BF_LIST2 = "||bfboth.test^\nbfkept.test\n"


def test_a_user_badfilter_cancels_a_list_entry(make_upstream, make_nxdns, tmp_path):
    """A user `||x^$badfilter` (and `|x^`, `@@||x^`) turns the same rule off in every list's
    snapshot entries, as in AdGuard Home: the name is answered normally, while another list's
    entry of another form or a parent's entry still blocks; over DNS, in `nxdns lookup` and
    in /api/lookup alike, and for a rule added through the API (a new config generation)."""
    import adminkit
    from adminkit import logged_in
    from harness import wait_until
    cfg = config(tmp_path)
    (tmp_path / "bf.txt").write_text(BF_LIST)
    (tmp_path / "bf2.txt").write_text(BF_LIST2)
    cfg["filter"]["sources"] += [{"name": "bf", "path": str(tmp_path / "bf.txt")},
                                 {"name": "bf2", "path": str(tmp_path / "bf2.txt")}]
    cfg["groups"] = {"kids": {}}
    cfg["clients"][0]["groups"] = ["default", "kids"]  # the kid (127.0.0.3)
    cfg["filter"]["deny"] = ["||bfgone.test^$badfilter", "|bfkind.test^$badfilter",
                             "||ads.bfparent.test^$badfilter", "@@||bfexc.test^$badfilter",
                             "||bfboth.test^$badfilter", "||bfkept.test^$badfilter",
                             {"rule": "||bfgrp.test^$badfilter", "groups": ["kids"]}]
    up = make_upstream()
    nx = adminkit.start_nx(make_nxdns, [up], config=cfg)
    # (name, client, verdict, reason, source) -- the reason and source as `nxdns lookup` says
    cases = [
        ("bfgone.test", None, "allow", "none", ""),
        ("a.bfgone.test", None, "allow", "none", ""),
        ("bfkind.test", None, "block", "blocklist_domain", "bf"),  # |x^ does not cancel ||x^
        ("ads.bfparent.test", None, "block", "blocklist_wildcard", "bf"),  # the parent's
        ("bfexc.test", None, "block", "blocklist_domain", "bf"),  # the exception is gone
        ("bfboth.test", None, "allow", "none", ""),  # in both lists: cancelled in both
        ("bfkept.test", None, "block", "blocklist_domain", "bf2"),  # bf2's exact entry
        ("a.bfkept.test", None, "allow", "none", ""),
        ("bfgrp.test", KID, "allow", "none", ""),  # the kids' badfilter
        ("bfgrp.test", "127.0.0.2", "block", "blocklist_domain", "bf"),
        ("bad.test", None, "allow", "none", ""),  # the list's own $badfilter still works
    ]
    for name, src, want, _, _ in cases:
        assert verdict(ask(nx, name, src)) == want, (name, src)
    for name, src, want, reason, source in cases:
        (row,) = lookup_cli(nx.config_path, [name], client=src or "127.0.0.1")
        assert (row["action"], row["reason"], row["source"]) == (want, reason, source), \
            (name, src, row)
    assert up.queries("bfgone.test") and up.queries("bfexc.test") == [], \
        "a cancelled entry's name went upstream, a blocked one did not"
    api = logged_in(nx)
    lk = api.ok("GET", "/api/lookup?name=ads.bfparent.test&client=127.0.0.1")
    assert (lk["action"], lk["reason"], lk["matched"]) == \
        ("block", "blocklist_wildcard", "bfparent.test"), lk
    # a rule added at run time: blocked before, answered normally after
    assert verdict(ask(nx, "bflater.test")) == "block"
    r = api.post("/api/filter/rules", {"list": "deny", "rule": "||bflater.test^$badfilter"})
    assert r.status == 201, r
    assert wait_until(lambda: verdict(ask(nx, "bflater.test")) == "allow", 10, 0.1)
    assert answers(ask(nx, "sub.bflater.test")) == ["192.0.2.1"]
    lk = api.ok("GET", "/api/lookup?name=bflater.test&client=127.0.0.1")
    assert (lk["action"], lk["reason"]) == ("allow", "none"), lk
    (row,) = lookup_cli(nx.config_path, ["bflater.test"])
    assert row["action"] == "allow", row
