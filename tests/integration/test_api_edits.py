"""The admin API's one-request forms (issue 12), against the running daemon and checked over
DNS: a pause until resumed (no end, shown as such, the old forms unchanged); a user rule's
text, list and groups changed by one PUT (a refused new rule leaves the old one, the file
unchanged); a local record changed by one PUT, named by name, type and value; /api/lookup
with a record type and a DoH/DoT client id, agreeing with
`nxdns lookup --type`.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.parse
from pathlib import Path

import dns.rcode
import pytest

from adminkit import assert_error, logged_in, run_cli, start_nx
from harness import answers, make_query, wait_until

ADS = ["ads.example.test", "track.example.test"]


def _nx(make_nxdns, tmp_path, up, **over):
    lst = tmp_path / "ads.txt"
    lst.write_text("".join(n + "\n" for n in ADS))
    cfg = {
        "filter": {"sources": [{"name": "ads", "path": str(lst), "format": "domains"}],
                   "deny": ["old.rule.test"]},
        "groups": {"guests": {"filtering": False}},
        "clients": [{"name": "guest", "ids": ["127.0.0.2"], "groups": ["guests"]},
                    {"name": "phone", "ids": ["id:kid-phone"], "groups": ["guests"]}],
        "local_records": [{"name": "nas.lan", "type": "A", "value": "192.168.1.10"}],
    }
    cfg.update(over)
    return start_nx(make_nxdns, [up], config=cfg)


def _control_get(nx, route: str):
    """One GET over the local control socket (src/admin/control.c): (status, JSON)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(str(Path(nx.config["state_dir"]) / "control.sock"))
    s.sendall(f"GET {route} HTTP/1.0\r\n\r\n".encode())
    raw = b""
    while chunk := s.recv(65536):
        raw += chunk
    s.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def _blocked(nx, name) -> bool:
    r = nx.udp(make_query(name, "A"))
    return r.rcode() == dns.rcode.NOERROR and answers(r) == ["0.0.0.0"]


def _wait_blocked(nx, name, want: bool, timeout=10.0):
    ok = wait_until(lambda: _blocked(nx, name) == want, timeout, 0.1)
    assert ok, f"{name}: expected {'blocked' if want else 'resolved'}"


# ------------------------------------------------------------------ pause until resumed

@pytest.mark.nx_timeout(60)
def test_pause_until_resumed(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = _nx(make_nxdns, tmp_path, up)
    api = logged_in(nx)
    assert _blocked(nx, "ads.example.test")
    r = api.ok("POST", "/api/filter/pause", {"until_resumed": True})
    assert r == {"paused": True, "until_ms": None, "until_resumed": True}, r
    assert not _blocked(nx, "ads.example.test"), "paused: a listed name resolves"
    # no end: still paused a while later, and GET says so
    time.sleep(1.5)
    assert not _blocked(nx, "ads.example.test")
    assert api.ok("GET", "/api/filter/pause") == r
    assert "paused until resumed" in nx.log()
    # the lookup sees the pause too, and `nxdns lookup` (which reads it over the control socket)
    assert api.ok("GET", "/api/lookup?name=ads.example.test")["reason"] == "paused"
    p = run_cli(["lookup", "--config", str(nx.config_path), "ads.example.test"])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["reason"] == "paused", p.stdout
    # the control socket's view is GET's
    assert _control_get(nx, "/api/filter/pause") == (200, r)
    # a timed pause replaces it, and {seconds: 0} still resumes as it always did
    t = api.ok("POST", "/api/filter/pause", {"seconds": 600})
    assert t["until_resumed"] is False and t["until_ms"] > time.time() * 1000
    api.ok("POST", "/api/filter/pause", {"until_resumed": True})
    r = api.ok("POST", "/api/filter/pause", {"seconds": 0})
    assert r == {"paused": False, "until_ms": 0, "until_resumed": False}, r
    assert _blocked(nx, "ads.example.test")
    api.ok("POST", "/api/filter/pause", {"until_resumed": True})
    assert api.ok("POST", "/api/filter/pause", {"resume": True})["paused"] is False
    assert _blocked(nx, "ads.example.test")
    for body, field in [({"until_resumed": False}, "until_resumed"),
                        ({"until_resumed": 1}, "until_resumed"),
                        ({"until_resumed": True, "seconds": 60}, "seconds"),
                        ({"until_resumed": True, "resume": True}, "resume")]:
        assert_error(api.post("/api/filter/pause", body), 400, "bad_request", field)
    assert api.ok("GET", "/api/filter/pause")["paused"] is False


# ------------------------------------------------------------------ rules: one PUT

@pytest.mark.nx_timeout(90)
def test_rule_edit_in_one_request(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = _nx(make_nxdns, tmp_path, up)
    api = logged_in(nx)
    assert _blocked(nx, "old.rule.test")
    r = api.ok("PUT", "/api/filter/rules",
               {"list": "deny", "rule": "old.rule.test", "new_rule": "New.Rule.Test."})
    assert r["deny"] == ["new.rule.test"], r
    _wait_blocked(nx, "new.rule.test", True)
    _wait_blocked(nx, "old.rule.test", False)

    # refused: the old rule stays, in effect and in the file
    before = nx.config_path.read_text()
    for body, status, error, field in [
            ({"list": "deny", "rule": "new.rule.test", "new_rule": "bad..name"}, 400,
             "invalid_setting", "rule"),
            ({"list": "deny", "rule": "new.rule.test", "groups": ["nosuch"]}, 400,
             "invalid_setting", "rule"),
            ({"list": "deny", "rule": "missing.test", "new_rule": "x.test"}, 404, "not_found",
             "rule"),
            ({"list": "deny", "rule": "new.rule.test", "new_list": "block"}, 400, "bad_request",
             "list"),
            ({"list": "deny", "rule": "new.rule.test", "groups": []}, 400, "bad_request",
             "groups")]:
        assert_error(api.put("/api/filter/rules", body), status, error, field)
    assert nx.config_path.read_text() == before
    assert _blocked(nx, "new.rule.test")

    # limited to a group: the default group's clients stop seeing it
    r = api.ok("PUT", "/api/filter/rules",
               {"list": "deny", "rule": "new.rule.test", "groups": ["guests"]})
    assert r["rules"] == [{"list": "deny", "rule": "new.rule.test", "groups": ["guests"]}], r
    _wait_blocked(nx, "new.rule.test", False)
    # to the allow list, every client: it now unblocks a listed name
    api.ok("PUT", "/api/filter/rules", {"list": "deny", "rule": "new.rule.test",
                                       "new_rule": "ads.example.test", "new_list": "allow",
                                       "groups": None})
    r = api.ok("GET", "/api/filter/rules")
    assert (r["allow"], r["deny"]) == (["ads.example.test"], []), r
    _wait_blocked(nx, "ads.example.test", False)
    assert _blocked(nx, "track.example.test")
    # an existing rule of the target list: 409, nothing changes
    api.ok("POST", "/api/filter/rules", {"list": "deny", "rule": "track.example.test"})
    assert_error(api.put("/api/filter/rules", {"list": "deny", "rule": "track.example.test",
                                               "new_list": "allow",
                                               "new_rule": "ADS.example.test"}),
                 409, "exists", "rule")
    assert _blocked(nx, "track.example.test")


# ------------------------------------------------------------------ lookup: type, client id

@pytest.mark.nx_timeout(90)
def test_lookup_type_and_client_id(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = _nx(make_nxdns, tmp_path, up)
    api = logged_in(nx)
    names = ["ads.example.test", "nas.lan", "old.rule.test", "free.example"]
    for rdtype in ("A", "AAAA", "HTTPS", "MX", "28"):
        p = run_cli(["lookup", "--config", str(nx.config_path), "--type", rdtype] + names)
        assert p.returncode == 0, p.stderr
        cli = [json.loads(ln) for ln in p.stdout.splitlines() if ln.strip()]
        assert len(cli) == len(names)
        for want in cli:
            got = api.ok("GET", "/api/lookup?name=" + urllib.parse.quote(want["name"]) +
                         "&type=" + rdtype.lower())
            assert got == want, f"type {rdtype}: API {got} != CLI {want}"
    # No verdict depends on the type yet (list modifiers such as $dnstype are skipped at
    # compile time): agreeing with the CLI for each type is what this can check here; the
    # unit test (tests/unit/admin/test_api.c lookup) sees the type reach the hook.
    assert api.ok("GET", "/api/lookup?name=nas.lan&type=AAAA")["action"] == "local"

    # a client id puts the query in that client's groups (guests: not filtered)
    assert api.ok("GET", "/api/lookup?name=ads.example.test")["action"] == "block"
    by_id = api.ok("GET", "/api/lookup?name=ads.example.test&client_id=kid-phone")
    assert by_id["action"] == "allow", by_id
    assert api.ok("GET", "/api/lookup?name=ads.example.test&client_id=someone-else")[
        "action"] == "block"
    by_addr = api.ok("GET", "/api/lookup?name=ads.example.test&client=127.0.0.2")
    assert by_addr["action"] == "allow", by_addr

    for q, field in [("type=BOGUS", "type"), ("type=0", "type"), ("type=70000", "type"),
                     ("client_id=" + "a" * 65, "client_id"), ("client=nope", "client")]:
        assert_error(api.get("/api/lookup?name=ads.example.test&" + q), 400, "bad_request",
                     field)


# ------------------------------------------------------------------ local records: one PUT

@pytest.mark.nx_timeout(90)
def test_local_record_edit_in_one_request(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    nx = _nx(make_nxdns, tmp_path, up)
    api = logged_in(nx)

    def a_of(name):
        r = nx.udp(make_query(name, "A"))
        return r.rcode(), answers(r)

    assert a_of("nas.lan") == (dns.rcode.NOERROR, ["192.168.1.10"])
    r = api.ok("PUT", "/api/local-records?name=nas.lan&type=A&value=192.168.1.10",
               {"value": "192.168.1.20", "ttl": 120})
    assert [(x["name"], x["value"], x["ttl"]) for x in r["local_records"]] == \
        [("nas.lan", "192.168.1.20", 120)], r
    assert wait_until(lambda: a_of("nas.lan") == (dns.rcode.NOERROR, ["192.168.1.20"]), 10)

    # refused: the old record keeps answering, the file is unchanged
    before = nx.config_path.read_text()
    assert_error(api.put("/api/local-records?name=nas.lan&type=A",
                         {"value": "192.168.1.999"}), 400, "invalid_setting", "local_records")
    assert_error(api.put("/api/local-records?name=nope.lan&type=A", {"ttl": 5}), 404,
                 "not_found")
    assert_error(api.put("/api/local-records?name=nas.lan&type=A&value=10.9.9.9",
                         {"ttl": 5}), 404, "not_found")
    assert_error(api.put("/api/local-records?name=nas.lan", {"ttl": 5}), 400, "bad_request",
                 "type")
    assert nx.config_path.read_text() == before
    assert a_of("nas.lan") == (dns.rcode.NOERROR, ["192.168.1.20"])

    # rename: the new name answers, the old one goes upstream again
    api.ok("PUT", "/api/local-records?name=NAS.lan.&type=a", {"name": "files.lan"})
    assert wait_until(lambda: a_of("files.lan") == (dns.rcode.NOERROR, ["192.168.1.20"]), 10)
    assert a_of("nas.lan") == (dns.rcode.NOERROR, ["192.0.2.1"])

