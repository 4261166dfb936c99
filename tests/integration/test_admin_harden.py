"""The admin API holds when it is reachable from the LAN (issue 12), against the real daemon:

- path sources added or changed through the API stay inside the config file's directory or
  state_dir/lists (400 path_not_allowed naming them; /etc/passwd and links out refused);
- the list status reports skipped lines per reason (count, first line numbers, words), the
  same figures the compile report has;
- many half-open connections neither lock the listener out nor stay forever: /healthz still
  answers, and the refusals and time-outs are counted in /metrics.
"""

import os
import socket
import time

import pytest

from adminkit import assert_error, logged_in, start_nx
from harness import wait_until


def _nx(make_nxdns, tmp_path, lines, config=None):
    lst = tmp_path / "ads.txt"
    lst.write_text("".join(l + "\n" for l in lines))
    cfg = {"filter": {"sources": [{"name": "ads", "path": str(lst), "format": "auto"}]}}
    cfg.update(config or {})
    return start_nx(make_nxdns, config=cfg)


def _sources(api):
    r = api.get("/api/filter/sources")
    assert r.status == 200, r
    return {s["name"]: s for s in r.json["sources"]}


# ------------------------------------------------------------------ path sources

def test_api_path_sources_are_fenced(make_nxdns, tmp_path):
    # state_dir outside the config's directory, so that each allowed directory counts alone
    nx = _nx(make_nxdns, tmp_path, ["ads.fence.test"],
             config={"state_dir": str(tmp_path / "state-elsewhere")})
    api = logged_in(nx)
    conf_dir = os.path.realpath(nx.config_path.parent)
    lists_dir = os.path.realpath(os.path.join(nx.config["state_dir"], "lists"))
    before = nx.config_path.read_text()
    link = nx.config_path.parent / "innocent.txt"
    link.symlink_to("/etc/passwd")
    for path in ["/etc/passwd", "../../etc/passwd", str(tmp_path / "ads.txt"), str(link),
                 "innocent.txt", lists_dir, str(tmp_path), lists_dir + "/../x.txt"]:
        r = api.post("/api/filter/sources", {"name": "evil", "path": path})
        assert_error(r, 400, "path_not_allowed", "path")
        assert conf_dir in r.json["message"] and lists_dir in r.json["message"], r.json
        assert r.json["allowed"] == [conf_dir, lists_dir], r.json
    r = api.put("/api/filter/sources/ads", {"path": "/etc/passwd"})
    assert_error(r, 400, "path_not_allowed", "path")
    assert nx.config_path.read_text() == before, "a refused edit changed the file"
    assert "evil" not in _sources(api)
    m = nx.metrics()
    assert m.get("nxdns_admin_http_responses_total", **{"class": "4xx"}) >= 9

    # Inside either directory: accepted, compiled, blocking.
    (nx.config_path.parent / "mine.txt").write_text("mine.fence.test\n")
    r = api.post("/api/filter/sources", {"name": "mine", "path": "mine.txt"})
    assert r.status == 201, r
    own = os.path.join(lists_dir, "own.txt")
    with open(own, "w") as f:
        f.write("own.fence.test\n")
    r = api.post("/api/filter/sources", {"name": "own", "path": own})
    assert r.status == 201, r
    assert wait_until(lambda: _sources(api)["own"]["list"] == 1
                      and _sources(api)["mine"]["list"] == 1, 10), _sources(api)


# ------------------------------------------------------------------ skip reasons

def test_source_status_reports_skips_by_reason(make_nxdns, tmp_path):
    lines = ["good.skip.test",
             "127.0.0.1 localhost",           # 2: localhost
             "||x.skip.test^$third-party",    # 3: modifier
             "example.com##.ad",              # 4: cosmetic
             "bad..name",                     # 5: invalid_name
             "also.skip.test",
             "example.org##.banner",          # 7: cosmetic
             "||p.skip.test/ads.js"]          # 8: path (a regex is a side rule now)
    nx = _nx(make_nxdns, tmp_path, lines)
    api = logged_in(nx)
    assert wait_until(lambda: _sources(api)["ads"]["compiled_at"] > 0, 10)
    ads = _sources(api)["ads"]
    assert ads["list"] == 2 and ads["skipped"] == 6, ads
    by = ads["skipped_by_reason"]
    assert {k: v["count"] for k, v in by.items()} == \
        {"localhost": 1, "modifier": 1, "cosmetic": 2, "invalid_name": 1, "path": 1}, by
    assert by["cosmetic"]["first_lines"] == [4, 7]
    assert by["localhost"]["first_lines"] == [2]
    assert sum(v["count"] for v in by.values()) == ads["skipped"]
    assert "cosmetic" in by["cosmetic"]["help"]
    # A source that never compiled (its file is missing) has no reasons, not stale ones.
    r = api.post("/api/filter/sources", {"name": "later", "path": "later.txt"})
    assert r.status == 201, r
    later = _sources(api)["later"]
    assert later["skipped_by_reason"] == {} and later["skipped"] == 0, later


# ------------------------------------------------------------------ half-open connections

def _raw(nx, src, timeout=3.0):
    host, port = nx.admin.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout, source_address=(src, 0))
    return s


def _closed_by_peer(s, timeout=0.2) -> bool:
    s.settimeout(timeout)
    try:
        return s.recv(4096) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def _refused(nx, reason, src="127.0.0.3") -> float:
    """nxdns_admin_http_refused_total{reason} scraped from another address than the flood."""
    from adminkit import Api
    from harness import Metrics
    r = Api(nx, source=src).get("/metrics", timeout=3)
    assert r.status == 200, r
    return Metrics(r.body.decode()).get("nxdns_admin_http_refused_total", reason=reason)


def _healthz(nx, src):
    from adminkit import Api
    return Api(nx, source=src).get("/healthz", timeout=3)


@pytest.mark.nx_timeout(60)
def test_half_open_connections_do_not_lock_the_admin_out(make_nxdns, tmp_path):
    nx = _nx(make_nxdns, tmp_path, ["ads.halfopen.test"])
    refused0 = nx.counter("nxdns_admin_http_refused_total", reason="per_address_cap")
    timeouts0 = nx.counter("nxdns_admin_http_refused_total", reason="header_timeout")
    # A keep-alive client that finished a request: it keeps the longer idle time-out.
    keep = _raw(nx, "127.0.0.4")
    keep.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    keep.settimeout(3)
    assert b" 200 " in keep.recv(4096).split(b"\r\n", 1)[0] + b" "
    # 40 connections from one address, more than the server's 32 slots: some send nothing,
    # some the start of a request that never ends.
    held = []
    for i in range(40):
        try:
            s = _raw(nx, "127.0.0.1")
        except OSError:
            continue
        if i % 2:
            try:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                pass
        held.append(s)
    try:
        # Another address still gets in, while those are held open.
        t0 = time.monotonic()
        r = _healthz(nx, "127.0.0.2")
        assert r.status == 200, r
        assert time.monotonic() - t0 < 2.5
        # At most the per-address cap was admitted from 127.0.0.1; the rest were refused.
        assert wait_until(lambda: _refused(nx, "per_address_cap") - refused0 >= 30, 5), \
            _refused(nx, "per_address_cap")
        # The half-open ones are closed after the header time-out (10 s of silence) ...
        start = time.monotonic()
        assert wait_until(lambda: all(_closed_by_peer(s, 0.01) for s in held), 20, 0.5), \
            "half-open connections were never closed"
        waited = time.monotonic() - start
        assert waited > 5, f"closed after {waited:.1f} s: that is not the header time-out"
        assert wait_until(lambda: _refused(nx, "header_timeout") - timeouts0 >= 10, 5), \
            _refused(nx, "header_timeout")
        # ... while the idle keep-alive connection (30 s) is still open and usable.
        assert not _closed_by_peer(keep)
        keep.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b" 200 " in keep.recv(4096)
        # The flooding address is welcome again once its connections are gone.
        r = _healthz(nx, "127.0.0.1")
        assert r.status == 200, r
    finally:
        for s in held:
            s.close()
        keep.close()
