"""The admin JSON API (issue 5) with a logged-in session, against the running daemon: statistics
and the query list agree with the queries the test sent; sources, rules, groups, clients and
local records round-trip through the YAML file and a reload and change what DNS answers; pause;
lookup agrees with `nxdns lookup`; bad input answers 400 with the field; big bodies 413.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.parse

import dns.query
import dns.rcode
import pytest

from adminkit import (assert_error, logged_in, qlog_rows, run_cli, start_nx,
                      wait_pushed_and_written, wait_written, yaml_text)
from harness import answers, make_query, wait_until

ADS = ["ads.example.test", "track.example.test", "pixel.example.test"]


def _nx(make_nxdns, tmp_path, up, **over):
    lst = tmp_path / "ads.txt"
    lst.write_text("".join(n + "\n" for n in ADS))
    cfg = {
        "filter": {"sources": [{"name": "ads", "path": str(lst), "format": "domains"}]},
        "local_records": [{"name": "nas.lan", "type": "A", "value": "192.168.1.10"}],
    }
    cfg.update(over)
    return start_nx(make_nxdns, [up], config=cfg)


def _q(nx, name, src=None, rdtype="A"):
    q = make_query(name, rdtype)
    if src:
        return dns.query.udp(q, "127.0.0.1", port=nx.port, timeout=3, source=src)
    return nx.udp(q)


def _blocked(nx, name, src=None) -> bool:
    r = _q(nx, name, src)
    return r.rcode() == dns.rcode.NOERROR and answers(r) == ["0.0.0.0"]


def _wait_blocked(nx, name, want: bool, src=None, timeout=10.0):
    ok = wait_until(lambda: _blocked(nx, name, src) == want, timeout, 0.1)
    assert ok, f"{name} from {src or '127.0.0.1'}: expected {'blocked' if want else 'resolved'}"


def _file(nx) -> str:
    return nx.config_path.read_text()


# ------------------------------------------------------------------ statistics

def test_stats_match_the_queries_sent(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = _nx(make_nxdns, tmp_path, up)
    api = logged_in(nx)
    for _ in range(3):
        _q(nx, "a.example")
    _q(nx, "b.example")
    _q(nx, "ads.example.test")
    _q(nx, "ads.example.test")
    _q(nx, "track.example.test")
    _q(nx, "nas.lan")
    _q(nx, "c.example", src="127.0.0.2")
    wait_written(nx, 9)

    s = api.ok("GET", "/api/stats/summary")
    assert (s["queries"], s["blocked"], s["local"], s["cached"], s["forwarded"],
            s["clients"]) == (9, 3, 1, 0, 5, 2), s
    assert s["blocked_percent"] == pytest.approx(33.33, abs=0.01)
    assert s["to"] - s["from"] == 24 * 3600 * 1000

    top = api.ok("GET", "/api/stats/top?kind=domains")
    assert top["kind"] == "domains"
    assert top["items"][:2] == [{"key": "a.example", "count": 3},
                                {"key": "ads.example.test", "count": 2}], top
    assert sum(i["count"] for i in top["items"]) == 9
    blk = api.ok("GET", "/api/stats/top?kind=blocked")
    assert blk["items"] == [{"key": "ads.example.test", "count": 2},
                            {"key": "track.example.test", "count": 1}], blk
    cl = api.ok("GET", "/api/stats/top?kind=clients")
    assert cl["items"] == [{"key": "127.0.0.1", "count": 8, "client_name": None},
                           {"key": "127.0.0.2", "count": 1, "client_name": None}], cl
    assert len(api.ok("GET", "/api/stats/top?kind=domains&limit=2")["items"]) == 2

    now = int(time.time() * 1000)
    h = api.ok("GET", f"/api/stats/history?from={now - 3600_000}&to={now + 60_000}&step=60")
    assert h["step"] == 60 and len(h["points"]) >= 60
    tot = {k: sum(p[k] for p in h["points"]) for k in ("queries", "blocked", "local",
                                                       "forwarded", "cached")}
    assert tot == {"queries": 9, "blocked": 3, "local": 1, "forwarded": 5, "cached": 0}, tot
    ts = [p["t"] for p in h["points"]]
    assert ts == sorted(ts) and all(b - a == 60_000 for a, b in zip(ts, ts[1:]))
    # a window before the queries holds nothing
    old = api.ok("GET", f"/api/stats/summary?from={now - 7200_000}&to={now - 3600_000}")
    assert old["queries"] == 0

    for url, field in [("/api/stats/top?kind=bogus", "kind"),
                       ("/api/stats/top?limit=0", "limit"),
                       ("/api/stats/top?limit=abc", "limit"),
                       ("/api/stats/history?step=61", "step"),
                       ("/api/stats/history?step=0", "step"),
                       (f"/api/stats/summary?from={now}&to={now - 1}", "from"),
                       ("/api/stats/summary?to=-5", "to")]:
        assert_error(api.get(url), 400, "bad_request", field)


# ------------------------------------------------------------------ the query list

def test_queries_pagination_and_filters(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = _nx(make_nxdns, tmp_path, up)
    api = logged_in(nx)
    sent = 0
    for i in range(14):
        _q(nx, f"page{i:02d}.example")
        sent += 1
    for n in ADS:
        _q(nx, n)
        sent += 1
    _q(nx, "nas.lan")
    for i in range(4):
        _q(nx, f"other{i}.example", src="127.0.0.2")
    sent += 5
    wait_written(nx, sent)
    db = {r["id"]: r for r in qlog_rows(nx)}
    assert len(db) == sent

    seen, pages, cursor = [], 0, None
    while True:
        url = "/api/queries?limit=4" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor
                                        else "")
        page = api.ok("GET", url)
        pages += 1
        assert len(page["items"]) <= 4
        seen += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert pages < 20, "pagination does not end"
    ids = [it["id"] for it in seen]
    assert sorted(ids) == sorted(db), "every row exactly once across the pages"
    assert len(ids) == len(set(ids))
    keys = [(it["ts"], it["id"]) for it in seen]
    assert keys == sorted(keys, reverse=True), "newest first (ts, id)"
    assert pages == (sent + 3) // 4
    one = next(it for it in seen if it["name"] == "ads.example.test")
    assert (one["action"], one["reason"], one["matched"], one["source"], one["client"],
            one["proto"], one["qtype"], one["rcode"]) == \
        ("block", "blocklist_domain", "ads.example.test", "ads", "127.0.0.1", "udp", "A",
         "NOERROR"), one
    fwd = next(it for it in seen if it["name"] == "page03.example")
    assert fwd["upstream"] == up.addr and fwd["cached"] is False, fwd

    def all_items(query):
        out, cur = [], None
        for _ in range(20):
            u = f"/api/queries?{query}&limit=3" + (f"&cursor={cur}" if cur else "")
            p = api.ok("GET", u)
            out += p["items"]
            cur = p["next_cursor"]
            if not cur:
                return out
        raise AssertionError("pagination does not end")

    c2 = all_items("client=127.0.0.2")
    assert sorted(it["name"] for it in c2) == [f"other{i}.example" for i in range(4)]
    named = all_items("name=page1")
    assert sorted(it["name"] for it in named) == [f"page1{i}.example" for i in range(4)]
    blocked = all_items("status=blocked")
    assert sorted(it["name"] for it in blocked) == sorted(ADS)
    local = all_items("status=local")
    assert [it["name"] for it in local] == ["nas.lan"]
    fw = all_items("status=forwarded")
    assert len(fw) == 18 and all(it["action"] == "none" for it in fw)
    assert len(all_items("status=allowed")) == sent - 3
    assert all_items("client=127.0.0.2&name=other1") and \
        [it["name"] for it in all_items("client=127.0.0.2&name=other1")] == ["other1.example"]
    newest = seen[0]["ts"]
    assert all(it["ts"] < newest for it in all_items(f"to={newest}"))

    for url, field in [("/api/queries?status=bogus", "status"),
                       ("/api/queries?cursor=garbage", "cursor"),
                       ("/api/queries?limit=1001", "limit"),
                       ("/api/queries?limit=0", "limit"),
                       ("/api/queries?from=-1", "from")]:
        assert_error(api.get(url), 400, "bad_request", field)


# ------------------------------------------------------------------ sources

def test_sources_add_refresh_edit_remove(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = _nx(make_nxdns, tmp_path, up)
    api = logged_in(nx)
    (ads,) = api.ok("GET", "/api/filter/sources")["sources"]
    assert (ads["name"], ads["list"], ads["format"]) == ("ads", 3, "domains"), ads
    assert ads["last_error"] == "" and ads["compiled_at"] > 0

    extra = nx.config_path.parent / "extra.txt"  # API-added paths live beside the config
    extra.write_text("extra-blocked.test\n*.wild-extra.test\n")
    assert not _blocked(nx, "extra-blocked.test")
    gen = nx.metrics().get("nxdns_config_generation")
    r = api.post("/api/filter/sources", {"name": "extra", "path": str(extra),
                                         "format": "auto"})
    assert r.status == 201, r
    assert [s["name"] for s in r.json["sources"]] == ["ads", "extra"]
    assert "extra" in _file(nx) and str(extra) in _file(nx)
    assert nx.metrics().get("nxdns_config_generation") == gen + 1
    _wait_blocked(nx, "extra-blocked.test", True)
    _wait_blocked(nx, "a.wild-extra.test", True)
    srcs = {s["name"]: s for s in api.ok("GET", "/api/filter/sources")["sources"]}
    assert (srcs["extra"]["list"], srcs["extra"]["wild"]) == (1, 1), srcs["extra"]

    def refresh(url):
        # 409: a round is running; 503 busy: its rebuild is (the previous refresh's, started
        # on a loop turn of its own after that request was answered)
        r = wait_until(lambda: (lambda x: x if x.status not in (409, 503) else None)(
            api.post(url)), 10)
        assert r is not None, "refresh stayed 409 refresh_running / 503 busy"
        return r
    r = refresh("/api/filter/sources/extra/refresh")
    assert r.status == 202 and r.json == {"refresh": "started", "source": "extra"}, r
    r = refresh("/api/filter/sources/refresh")
    assert r.status == 202 and r.json["refresh"] == "started", r
    assert_error(api.post("/api/filter/sources/nosuch/refresh"), 404, "not_found", "name")

    assert_error(api.post("/api/filter/sources", {"name": "extra", "path": str(extra)}), 409,
                 "exists", "name")
    assert_error(api.post("/api/filter/sources", {"name": "both", "path": str(extra),
                                                  "url": "http://127.0.0.1:1/x"}),
                 400, "bad_request", "url")
    assert_error(api.post("/api/filter/sources", {"name": "neither"}), 400, "bad_request", "url")
    assert_error(api.post("/api/filter/sources", {"name": "bad", "path": str(extra),
                                                  "format": "nosuchformat"}),
                 400, "invalid_setting")
    assert_error(api.put("/api/filter/sources/nosuch", {"enabled": False}), 404, "not_found")

    # disable a source: its names resolve again
    r = api.put("/api/filter/sources/ads", {"enabled": False})
    assert r.status == 200, r
    _wait_blocked(nx, "ads.example.test", False)
    r = api.delete("/api/filter/sources/extra")
    assert r.status == 200 and [s["name"] for s in r.json["sources"]] == ["ads"], r
    assert str(extra) not in _file(nx)
    _wait_blocked(nx, "extra-blocked.test", False)
    assert_error(api.delete("/api/filter/sources/extra"), 404, "not_found")


# ------------------------------------------------------------------ rules

def test_rules_add_remove_and_bad_regex(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = _nx(make_nxdns, tmp_path, up)
    api = logged_in(nx)
    assert api.ok("GET", "/api/filter/rules") == {"allow": [], "deny": [], "rules": []}
    assert not _blocked(nx, "deny-me.example")
    r = api.post("/api/filter/rules", {"list": "deny", "rule": "Deny-Me.Example."})
    # the view is the rule as the loader keeps it: lower case, no trailing dot
    assert r.status == 201 and r.json["deny"] == ["deny-me.example"], r
    assert "Deny-Me.Example." in _file(nx)
    _wait_blocked(nx, "deny-me.example", True)
    lk = api.ok("GET", "/api/lookup?name=deny-me.example")
    assert (lk["action"], lk["reason"]) == ("block", "user_deny"), lk

    r = api.post("/api/filter/rules", {"list": "allow", "rule": "ads.example.test"})
    assert r.status == 201
    _wait_blocked(nx, "ads.example.test", False)
    assert_error(api.post("/api/filter/rules", {"list": "deny", "rule": "deny-me.example"}),
                 409, "exists", "rule")

    before = _file(nx)
    assert_error(api.post("/api/filter/rules", {"list": "deny", "rule": "/([unclosed/"}), 400,
                 "invalid_setting", "rule")
    assert_error(api.post("/api/filter/rules", {"list": "maybe", "rule": "x.example"}), 400,
                 "bad_request", "list")
    assert_error(api.post("/api/filter/rules", {"list": "deny", "rule": ""}), 400,
                 "bad_request", "rule")
    assert_error(api.post("/api/filter/rules", {"list": "deny"}), 400, "bad_request", "rule")
    assert_error(api.post("/api/filter/rules", {"list": "deny", "rule": 5}), 400,
                 "bad_request", "rule")
    assert _file(nx) == before, "refused rule edits must not touch the file"

    r = api.delete("/api/filter/rules/deny/" + urllib.parse.quote("deny-me.example", safe=""))
    assert r.status == 200 and r.json["deny"] == [], r
    _wait_blocked(nx, "deny-me.example", False)
    r = api.delete("/api/filter/rules", {"list": "allow", "rule": "ads.example.test"})
    assert r.status == 200 and r.json["allow"] == [], r
    _wait_blocked(nx, "ads.example.test", True)
    assert_error(api.delete("/api/filter/rules/deny/nosuch.example"), 404, "not_found", "rule")


# ------------------------------------------------------------------ groups, clients, local records

def test_local_records_round_trip(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = _nx(make_nxdns, tmp_path, up)
    api = logged_in(nx)
    recs = api.ok("GET", "/api/local-records")["local_records"]
    assert recs == [{"name": "nas.lan", "type": "A", "value": "192.168.1.10", "ttl": 300,
                     "index": 0}], recs
    assert answers(_q(nx, "printer.lan")) == ["192.0.2.1"]  # from the upstream for now
    r = api.post("/api/local-records", {"name": "printer.lan", "type": "A",
                                        "value": "192.168.1.50", "ttl": 60})
    assert r.status == 201, r
    assert {(x["name"], x["value"]) for x in r.json["local_records"]} == \
        {("nas.lan", "192.168.1.10"), ("printer.lan", "192.168.1.50")}
    assert "printer.lan" in _file(nx)
    assert wait_until(lambda: answers(_q(nx, "printer.lan")) == ["192.168.1.50"], 5)
    ans = _q(nx, "printer.lan")
    assert ans.answer[0].ttl == 60
    r = api.post("/api/local-records", {"name": "files.lan", "type": "CNAME",
                                        "value": "nas.lan"})
    assert r.status == 201, r

    before = _file(nx)
    for body, field in [({"name": "bad.lan", "type": "A", "value": "not-an-address"},
                         "local_records"),
                        ({"name": "bad.lan", "type": "MX", "value": "x"}, "local_records"),
                        ({"name": "bad.lan", "type": "A"}, "value"),
                        ({"name": "bad.lan", "type": "A", "value": "10.0.0.1", "ttl": "x"},
                         "ttl")]:
        j = assert_error(api.post("/api/local-records", body), 400)
        assert j.get("field") == field, (body, j)
    assert _file(nx) == before

    r = api.delete("/api/local-records?name=printer.lan&type=A")
    assert r.status == 200, r
    assert "printer.lan" not in _file(nx)
    assert wait_until(lambda: answers(_q(nx, "printer.lan")) == ["192.0.2.1"], 5)
    idx = next(x["index"] for x in api.ok("GET", "/api/local-records")["local_records"]
               if x["name"] == "files.lan")
    assert api.delete(f"/api/local-records/{idx}").status == 200
    assert_error(api.delete("/api/local-records/99"), 404, "not_found", "index")
    assert_error(api.delete("/api/local-records?name=nosuch.lan&type=A"), 404, "not_found")
    assert_error(api.delete("/api/local-records?name=nas.lan&type=BOGUS"), 400,
                 "bad_request", "type")


def test_groups_and_clients_round_trip(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = _nx(make_nxdns, tmp_path, up)
    api = logged_in(nx)
    groups = api.ok("GET", "/api/groups")["groups"]
    assert [g["name"] for g in groups] == ["default"]
    assert _blocked(nx, "ads.example.test", src="127.0.0.2")

    r = api.post("/api/groups", {"name": "guests", "filtering": False})
    assert r.status == 201, r
    assert {g["name"]: g["filtering"] for g in r.json["groups"]} == \
        {"default": True, "guests": False}
    assert_error(api.post("/api/groups", {"name": "guests"}), 409, "exists", "name")

    before = _file(nx)
    j = assert_error(api.post("/api/clients", {"name": "tv", "ids": ["127.0.0.2"],
                                               "groups": ["nosuch"]}), 400, "invalid_setting")
    assert j.get("field") == "clients", j
    assert_error(api.post("/api/clients", {"name": "tv", "ids": ["not-an-ip"]}), 400,
                 "invalid_setting", "clients")
    assert_error(api.post("/api/clients", {"name": "tv"}), 400, "bad_request", "ids")
    assert _file(nx) == before

    r = api.post("/api/clients", {"name": "tv", "ids": ["127.0.0.2"], "groups": ["guests"]})
    assert r.status == 201, r
    assert r.json["clients"] == [{"name": "tv", "ids": ["127.0.0.2"], "groups": ["guests"]}]
    assert "tv" in _file(nx)
    _wait_blocked(nx, "ads.example.test", False, src="127.0.0.2")
    assert _blocked(nx, "ads.example.test"), "127.0.0.1 is still in default"
    assert_error(api.post("/api/clients", {"name": "tv", "ids": ["127.0.0.3"]}), 409, "exists")

    # filtering on, but a group uses only the sources it lists: still nothing blocked
    r = api.put("/api/groups/guests", {"filtering": True})
    assert r.status == 200, r
    time.sleep(0.3)
    assert not _blocked(nx, "ads.example.test", src="127.0.0.2")
    assert_error(api.put("/api/groups/guests", {"sources": ["nosuch"]}), 400,
                 "invalid_setting", "groups")
    r = api.put("/api/groups/guests", {"sources": ["ads"]})
    assert r.status == 200, r
    g = {x["name"]: x for x in r.json["groups"]}["guests"]
    assert g["sources"] == ["ads"] and g["effective_sources"] == ["ads"], g
    _wait_blocked(nx, "ads.example.test", True, src="127.0.0.2")
    assert_error(api.put("/api/groups/nosuch", {"filtering": True}), 404, "not_found")
    assert_error(api.delete("/api/groups/default"), 400, "bad_request", "name")

    r = api.put("/api/clients/tv", {"groups": ["default"]})
    assert r.status == 200 and r.json["clients"][0]["groups"] == ["default"], r
    assert api.delete("/api/clients/tv").status == 200
    assert api.ok("GET", "/api/clients") == {"clients": []}
    assert api.delete("/api/groups/guests").status == 200
    assert [g["name"] for g in api.ok("GET", "/api/groups")["groups"]] == ["default"]
    assert_error(api.delete("/api/clients/tv"), 404, "not_found")


# ------------------------------------------------------------------ pause

@pytest.mark.nx_timeout(60)
def test_pause_for_seconds_and_resume(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = _nx(make_nxdns, tmp_path, up)
    api = logged_in(nx)
    assert api.ok("GET", "/api/filter/pause") == {"paused": False, "until_ms": 0,
                                                "until_resumed": False}
    assert _blocked(nx, "ads.example.test")
    t = time.time()
    r = api.ok("POST", "/api/filter/pause", {"seconds": 2})
    assert r["paused"] is True and abs(r["until_ms"] / 1000 - (t + 2)) < 1.0, r
    assert not _blocked(nx, "ads.example.test"), "paused: a listed name resolves"
    assert answers(_q(nx, "ads.example.test")) == ["192.0.2.1"]
    assert api.ok("GET", "/api/filter/pause")["paused"] is True
    _wait_blocked(nx, "ads.example.test", True, timeout=6)
    assert time.time() - t >= 1.5, "blocked again before the pause ended"
    assert api.ok("GET", "/api/filter/pause")["paused"] is False

    api.ok("POST", "/api/filter/pause", {"seconds": 600})
    assert not _blocked(nx, "ads.example.test")
    r = api.ok("POST", "/api/filter/pause", {"resume": True})
    assert r == {"paused": False, "until_ms": 0, "until_resumed": False}, r
    assert _blocked(nx, "ads.example.test")
    wait_pushed_and_written(nx)
    reasons = {row["reason"] for row in qlog_rows(nx, "WHERE name = 'ads.example.test'")}
    assert 1 in reasons, "queries answered while paused are logged with reason paused"

    for body, field in [({"seconds": -1}, "seconds"), ({"seconds": 10 ** 9}, "seconds"),
                        ({"resume": False}, "resume"), ({"seconds": 5, "resume": True},
                                                        "seconds"),
                        ({"seconds": "10"}, "seconds"), ({}, "seconds")]:
        assert_error(api.post("/api/filter/pause", body), 400, "bad_request", field)


# ------------------------------------------------------------------ lookup

def test_lookup_matches_cli(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = _nx(make_nxdns, tmp_path, up,
             clients=[{"name": "kid", "ids": ["127.0.0.2"], "groups": ["kids"]}],
             groups={"kids": {"filtering": False}})
    nx.config["filter"]["deny"] = ["/^ad[0-9]+[.]rx[.]test$/", "*.denywild.test"]
    nx.config["filter"]["allow"] = ["track.example.test"]
    nx.write_config_text(yaml_text(nx.config))
    gen = nx.metrics().get("nxdns_config_generation")
    nx.send_signal(signal.SIGHUP)
    assert wait_until(lambda: nx.metrics().get("nxdns_config_generation") > gen, 10)
    api = logged_in(nx)
    # the CLI on the daemon's own config: it decides on the daemon's snapshot and pause state
    names = ["ads.example.test", "sub.ads.example.test", "track.example.test", "nas.lan",
             "ad7.rx.test", "x.denywild.test", "denywild.test", "free.example"]

    def same(paused: bool):
        for client in (None, "127.0.0.2"):
            args = ["lookup", "--config", str(nx.config_path)] + \
                (["--client", client] if client else [])
            p = run_cli(args + names)
            assert p.returncode == 0, p.stderr
            cli = [json.loads(ln) for ln in p.stdout.splitlines() if ln.strip()]
            assert len(cli) == len(names)
            for want in cli:
                url = "/api/lookup?name=" + urllib.parse.quote(want["name"])
                if client:
                    url += "&client=" + client
                got = api.ok("GET", url)
                assert got == want, f"client {client}: API {got} != CLI {want}"
                if paused and want["name"] != "nas.lan":
                    assert (want["action"], want["reason"]) == ("allow", "paused"), want
        return cli

    rows = same(False)
    assert rows[0]["action"] == "allow", "client 127.0.0.2's group does not filter"
    api.ok("POST", "/api/filter/pause", {"seconds": 600})
    rows = same(True)
    assert rows[3]["action"] == "local", "a pause keeps the LAN's own names"
    api.ok("POST", "/api/filter/pause", {"resume": True})
    same(False)
    assert api.ok("GET", "/api/lookup?name=ad7.rx.test")["reason"] == "user_deny"
    assert_error(api.get("/api/lookup"), 400, "bad_request", "name")
    assert_error(api.get("/api/lookup?name=" + "a" * 70 + ".example"), 400, "bad_request",
                 "name")
    assert_error(api.get("/api/lookup?name=x.example&client=not-an-ip"), 400, "bad_request",
                 "client")


# ------------------------------------------------------------------ limits and errors

def test_request_body_over_the_limit_is_413(make_nxdns):
    nx = start_nx(make_nxdns)
    api = logged_in(nx)
    before = nx.config_path.read_bytes()
    big = json.dumps({"list": "deny", "rule": "x" * (70 * 1024)}).encode()
    r = api.post("/api/filter/rules", raw=big, headers={"Content-Type": "application/json"})
    assert_error(r, 413, "body_too_large")
    r = api.put("/api/settings", raw=b" " * (65 * 1024) + b'{"key":"log.level","value":"info"}')
    assert_error(r, 413, "body_too_large")
    assert nx.metrics().get("nxdns_admin_http_refused_total", reason="body_too_large") == 2
    assert nx.config_path.read_bytes() == before
    # just under the limit is read (and refused for what it says, not for its size)
    ok = b'{"list": "deny", "rule": "' + b"a" * 1000 + b'"}' + b" " * (60 * 1024)
    assert_error(api.post("/api/filter/rules", raw=ok), 400, field="rule")
    assert api.get("/api/memory").status == 200
