"""Issue 17: a replica that follows a primary (sync.primary). Two nxdns on loopback: the
primary's admin over HTTPS with its own self-signed certificate, the replica pinned to its key
with a read-only token. Rules, path-source content and filter settings travel; host keys stay;
the replica refuses local edits of synced keys (409), a read token cannot write, and a bad
export keeps the replica on its last good config with the error in its status."""

import hashlib
import http.client
import json
import re
import signal
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dns.rcode
import pytest
from pathlib import Path

from adminkit import PASSWORD, Api, assert_error, logged_in, start_nx
from harness import free_port, make_query
from tlsservers import Cert

TOKEN = "nxdns_replica-test-token-0123456789abcdefghijklmn"
INTERVAL = 1  # seconds: the test's sync.interval


class HttpsApi(Api):
    """Api over HTTPS, trusting the primary's own certificate file."""

    def __init__(self, nx, cafile):
        super().__init__(nx)
        self.ctx = ssl.create_default_context(cafile=str(cafile))

    def req(self, method, path, body=None, headers=None, auth=True, raw=None, timeout=10.0):
        h = {}
        if auth and self.cookie:
            h["Cookie"] = f"nxdns_session={self.cookie}"
        if auth and self.csrf and method not in ("GET", "HEAD"):
            h["X-CSRF-Token"] = self.csrf
        if auth and self.token:
            h["Authorization"] = f"Bearer {self.token}"
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            from adminkit import Resp
            return Resp(r.status, r.getheaders(), r.read())
        finally:
            c.close()


def _wait(pred, what, timeout=15.0, nx=()):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for n in nx:
            assert n.alive(), n.log()
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}:\n" + "\n".join(n.log()[-3000:] for n in nx))


def _a(nx, name):
    r = nx.udp(make_query(name, "A"))
    return r.rcode(), [rr.to_text() for s in r.answer for rr in s]


def _blocked(nx, name):
    rc, ans = _a(nx, name)
    return rc == dns.rcode.NOERROR and ans == ["0.0.0.0"]


def _start_primary(make_nxdns, tmp_path, up):
    cert = Cert(tmp_path / "primary-cert", ["127.0.0.1"])
    listfile = tmp_path / "primary-lists" / "house.txt"
    listfile.parent.mkdir()
    listfile.write_text("# kept by hand on the primary\npathlisted.example\n")
    admin = free_port(v6=False, udp=False)
    token_hash = hashlib.sha256(TOKEN.encode()).hexdigest()
    nx = start_nx(make_nxdns, [up], name="primary", start=False, config={
        "admin": {"listen": f"127.0.0.1:{admin}", "tls": True,
                  "tokens": [{"name": "replica1", "hash": token_hash, "created": 1,
                              "scope": "read"}]},
        "tls": {"cert": str(cert.cert), "key": str(cert.key)},
        "filter": {"sources": [{"name": "house", "path": str(listfile)}],
                   "block_ttl": 77},
    })
    nx.start(wait=False)
    api = HttpsApi(nx, cert.cert)
    _wait(lambda: "serving" in nx.log(), "the primary serving", nx=[nx])

    def healthy():
        try:
            return api.get("/healthz", auth=False).status == 200
        except (OSError, ssl.SSLError):
            return False
    _wait(healthy, "the primary's admin over HTTPS", nx=[nx])
    assert api.login().status == 200
    return nx, api, cert, listfile


def _start_replica(make_nxdns, up, primary_admin, pin):
    return start_nx(make_nxdns, [up], name="replica", config={
        "sync": {"primary": f"https://{primary_admin}", "token": TOKEN,
                 "interval": f"{INTERVAL}s", "pin": pin},
        "cache": {"size": 0},
    })


def _https_counter(api, name):
    text = api.get("/metrics").body.decode()
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def _status(api):
    r = api.get("/api/sync/status")
    assert r.status == 200, r
    return r.json


@pytest.mark.nx_timeout(120)
def test_replica_follows_primary(make_upstream, make_nxdns, tmp_path):
    up_primary = make_upstream(default_a="192.0.2.1")
    up_replica = make_upstream(default_a="192.0.2.2")
    primary, papi, cert, listfile = _start_primary(make_nxdns, tmp_path, up_primary)
    replica = _start_replica(make_nxdns, up_replica, primary.admin, cert.pin)
    rapi = logged_in(replica)

    # the first pull applies: the path source's content arrived and blocks over DNS
    st = _wait(lambda: _status(rapi)["result"] == "applied" and _status(rapi),
               "the first sync", nx=[primary, replica])
    assert st["replica"] is True and st["primary"] == f"https://{primary.admin}"
    assert re.fullmatch(r"[0-9a-f]{16}", st["generation"])
    _wait(lambda: _blocked(replica, "pathlisted.example"), "the path source's name blocked",
          nx=[replica])
    sync_dir = Path(replica.config["state_dir"]) / "sync"
    synced_files = list(sync_dir.glob("house-*.list"))
    assert len(synced_files) == 1
    assert "pathlisted.example" in synced_files[0].read_text()
    rcfg = replica.config_path.read_text()
    assert "block_ttl: 77" in rcfg or "block_ttl: 77" in rcfg.replace('"', "")

    # host keys stay: its own upstream answers, its sync and admin settings are in place
    assert _a(replica, "other.example") == (dns.rcode.NOERROR, ["192.0.2.2"])
    assert f"https://{primary.admin}" in rcfg and replica.admin in rcfg

    # a rule added on the primary is enforced by the replica within the interval
    assert not _blocked(replica, "ads.example")
    papi.ok("POST", "/api/filter/rules", {"list": "deny", "rule": "ads.example"})
    t0 = time.monotonic()
    _wait(lambda: _blocked(replica, "ads.example"), "the primary's rule on the replica",
          timeout=INTERVAL * 3 + 10, nx=[primary, replica])
    assert time.monotonic() - t0 < INTERVAL * 3 + 10
    gen2 = _status(rapi)["generation"]
    assert gen2 != st["generation"]

    # the path source's content changes on the primary: it travels again, the old copy goes
    listfile.write_text("pathlisted.example\nsecond.example\n")
    primary.send_signal(signal.SIGHUP)
    _wait(lambda: _blocked(replica, "second.example"), "the new path-source content",
          timeout=INTERVAL * 3 + 10, nx=[primary, replica])
    now = list(sync_dir.glob("house-*.list"))
    assert len(now) == 1 and now != synced_files

    # unchanged primary: 304s, counted, status says not_modified
    _wait(lambda: replica.counter("nxdns_sync_pulls_total", result="not_modified") >= 2,
          "not-modified pulls", nx=[replica])

    # the replica refuses local edits of synced keys, naming the primary; host keys still edit
    for method, path, body in [
        ("POST", "/api/filter/rules", {"list": "deny", "rule": "local.example"}),
        ("DELETE", "/api/filter/rules/deny/ads.example", None),
        ("POST", "/api/groups", {"name": "kids"}),
        ("POST", "/api/local-records", {"name": "nas.lan", "type": "A", "value": "192.168.1.2"}),
        ("PUT", "/api/settings", {"key": "filter.block_ttl", "value": 5}),
        ("PUT", "/api/settings", {"settings": {"cache.size": 10, "filter.enabled": False}}),
    ]:
        r = rapi.req(method, path, body=body)
        assert_error(r, 409, "synced_from_primary", field=Ellipsis)
        assert primary.admin in r.json["message"], r
    assert replica.counter("nxdns_admin_sync_refused_total") == 6
    # a restore replaces the synced keys too: refused like the edits (a valid archive, the
    # replica's own backup), from its headers, so its body is never stored; nothing changes
    archive = rapi.get("/api/backup")
    assert archive.status == 200 and archive.body[:2] == b"\x1f\x8b", archive
    before = replica.config_path.read_text()
    r = rapi.req("POST", "/api/restore", raw=archive.body)
    assert_error(r, 409, "synced_from_primary", field=Ellipsis)
    assert "restore" in r.json["message"] and primary.admin in r.json["message"], r
    assert replica.config_path.read_text() == before
    assert not list(Path(replica.config["state_dir"]).glob(".upload-*"))
    assert replica.counter("nxdns_admin_sync_refused_total") == 7
    rapi.ok("PUT", "/api/settings", {"key": "cache.size", "value": 10})
    assert _blocked(replica, "ads.example")
    # a refresh is no edit
    assert rapi.post("/api/filter/sources/refresh").status != 409
    # a synced key edited by hand on the replica (and SIGHUP) is put back at the next pull,
    # not kept by a 304
    drifted = replica.config_path.read_text().replace('"ads.example"', '"drift.example"')
    assert "drift.example" in drifted
    applied = replica.counter("nxdns_sync_pulls_total", result="applied")
    replica.write_config_text(drifted)
    replica.send_signal(signal.SIGHUP)
    _wait(lambda: replica.counter("nxdns_sync_pulls_total", result="applied") > applied
          and "drift.example" not in replica.config_path.read_text(),
          "the primary's rule written back", timeout=INTERVAL * 3 + 10, nx=[replica])
    assert _blocked(replica, "ads.example") and not _blocked(replica, "drift.example")

    # the read-only token: exports, and cannot write anywhere on the primary
    tapi = HttpsApi(primary, cert.cert)
    tapi.token = TOKEN
    r = tapi.get("/api/sync/export")
    assert r.status == 200 and r.headers["etag"].startswith('"')
    doc = r.json
    assert doc["format"] == 1 and "pathlisted.example" in __import__("base64").b64decode(
        doc["files"]["house"]).decode()
    assert set(doc["keys"]) >= {"filter.sources", "filter.deny", "groups", "clients",
                                "local_records", "filter.block_ttl"}
    assert not any(k.startswith(("upstream", "listener", "admin", "sync", "tls"))
                   for k in doc["keys"])
    r304 = tapi.get("/api/sync/export", headers={"If-None-Match": r.headers["etag"]})
    assert r304.status == 304 and r304.body == b""
    for method, path, body in [("POST", "/api/filter/rules", {"list": "deny", "rule": "x.example"}),
                               ("PUT", "/api/settings", {"key": "cache.size", "value": 1}),
                               ("POST", "/api/auth/tokens", {"name": "evil"}),
                               ("DELETE", "/api/filter/rules/deny/ads.example", None)]:
        assert_error(tapi.req(method, path, body=body), 403, "read_only_token", field=Ellipsis)
    assert _https_counter(papi, "nxdns_admin_read_only_refused_total") == 4
    assert "x.example" not in primary.config_path.read_text()

    # the primary lists its replica: token name, address, when
    reps = papi.ok("GET", "/api/sync/replicas")["replicas"]
    mine = [x for x in reps if x["token"] == "replica1" and x["address"] == "127.0.0.1"]
    assert len(mine) == 1 and mine[0]["pulls"] >= 3
    assert abs(mine[0]["last_sync"] / 1000 - time.time()) < 30

    # on demand
    r = rapi.post("/api/sync/now")
    assert r.status in (202, 409), r
    # the primary is no replica
    assert papi.ok("GET", "/api/sync/status")["replica"] is False
    assert_error(papi.post("/api/sync/now"), 404, "not_configured", field=Ellipsis)


class _FakePrimary:
    """An HTTPS server with the primary's certificate answering /api/sync/export with
    whatever the test sets (a corrupted or refused document)."""

    def __init__(self, cert, body):
        self.body = body
        self.hits = 0
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits += 1
                data = outer.body
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
        self.srv.socket = ctx.wrap_socket(self.srv.socket, server_side=True)
        self.port = self.srv.server_address[1]
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.t.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.mark.nx_timeout(120)
def test_bad_export_keeps_last_good(make_upstream, make_nxdns, tmp_path):
    up = make_upstream(default_a="192.0.2.2")
    primary, papi, cert, listfile = _start_primary(make_nxdns, tmp_path, up)
    papi.ok("POST", "/api/filter/rules", {"list": "deny", "rule": "ads.example"})
    replica = _start_replica(make_nxdns, up, primary.admin, cert.pin)
    rapi = logged_in(replica)
    _wait(lambda: _blocked(replica, "ads.example"), "the first sync", nx=[primary, replica])
    good = replica.config_path.read_text()
    good_gen = _status(rapi)["generation"]

    # a wrong pin: the primary's key is refused, nothing is applied
    wrong = "A" * 43 + "="
    replica.config_path.write_text(good.replace(cert.pin, wrong))
    replica.send_signal(signal.SIGHUP)
    _wait(lambda: _status(rapi)["result"] == "fetch_failed", "a refused pin", nx=[replica])
    assert replica.counter("nxdns_sync_pulls_total", result="fetch_failed") >= 1
    assert _blocked(replica, "ads.example")
    replica.config_path.write_text(good)
    replica.send_signal(signal.SIGHUP)
    _wait(lambda: _status(rapi)["result"] in ("applied", "not_modified"), "the pin back",
          nx=[replica])

    # a change the primary takes but cannot hand on: its path list grows past the 1 MiB a
    # path source may carry (it blocks there; the replica reports the refused export)
    with open(listfile, "w") as fp:
        for i in range(1024 * 1024 // 24 + 10):
            fp.write(f"host-{i:012d}.example\n")
    primary.send_signal(signal.SIGHUP)
    st = _wait(lambda: (s := _status(rapi))["result"] == "fetch_failed" and s,
               "the refused export", timeout=30, nx=[primary, replica])
    assert "HTTP 500" in st["error"], st
    _wait(lambda: _blocked(primary, "host-000000000007.example"), "the big list on the primary",
          timeout=30, nx=[primary])
    assert _blocked(replica, "ads.example") and not _blocked(replica, "host-000000000007.example")
    listfile.write_text("pathlisted.example\n")
    primary.send_signal(signal.SIGHUP)
    _wait(lambda: _status(rapi)["result"] == "applied", "the primary exporting again",
          timeout=30, nx=[primary, replica])

    # a real export the replica's loader refuses, then a corrupted one, from a fake primary
    doc = papi.ok("GET", "/api/sync/export")
    doc["keys"]["filter.block_ttl"] = "99999999999"
    fake = _FakePrimary(cert, json.dumps(doc).encode())
    try:
        url = f"https://{primary.admin}"
        text = good.replace(url, f"https://127.0.0.1:{fake.port}")
        assert text != good
        replica.config_path.write_text(text)
        replica.send_signal(signal.SIGHUP)
        st = _wait(lambda: (s := _status(rapi))["result"] == "invalid" and s,
                   "a refused export", nx=[replica])
        assert "filter.block_ttl" in st["error"], st
        assert st["generation"] is None or st["generation"] != ""
        before = replica.counter("nxdns_sync_pulls_total", result="invalid")
        fake.body = b'{"format": 1, "keys": {"filter.sources": '  # cut short
        _wait(lambda: "not JSON" in (_status(rapi).get("error") or ""), "a corrupted export",
              nx=[replica])
        assert replica.counter("nxdns_sync_pulls_total", result="invalid") > before
        # still serving the last good config: the primary's rule, its own upstream
        assert _blocked(replica, "ads.example")
        assert _a(replica, "fine.example") == (dns.rcode.NOERROR, ["192.0.2.2"])
        cfg = replica.config_path.read_text()
        assert "ads.example" in cfg and "99999999999" not in cfg
        assert fake.hits >= 2
        assert replica.counter("nxdns_sync_pulls_total", result="applied") >= 1
        assert good_gen
    finally:
        fake.close()
