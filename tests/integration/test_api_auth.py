"""Admin API authentication (issue 5) against the running daemon: every route of the route table
(src/admin/routes.c, parsed here so a new route is covered without editing this file) with and
without credentials, the CSRF token on state-changing requests, login (ok, wrong, rate limit,
cookie attributes), logout, password change, API tokens, the first-run setup token and
admin.metrics_auth.

Passwords are argon2id (~0.1-0.3 s per check on the control thread), so the tests keep the
number of logins small.
"""

from __future__ import annotations

import hashlib
import re
import signal
import time

import pytest

from adminkit import (PASSWORD, Api, assert_error, cookie_of, logged_in, passwd,
                      read_password_hash, route_sample, routes, start_nx)
from harness import wait_until

PROTECTED = ("SESSION", "CSRF")


def _table():
    rows = routes()
    paths = {(m, p) for m, p, _, _ in rows}
    # the parse must see the table: a few rows every version has
    for must in [("GET", "/api/stats/summary"), ("POST", "/api/auth/login"),
                 ("PUT", "/api/settings"), ("GET", "/api/queries/live"),
                 ("DELETE", "/api/local-records/")]:
        assert must in paths, f"route {must} not found in src/admin/routes.c (parse failed?)"
    assert len(rows) >= 40, f"only {len(rows)} routes parsed"
    return rows


def _counter(nx, reason):
    return nx.metrics().get("nxdns_admin_auth_refused_total", reason=reason)


# ------------------------------------------------------------------ every route

def test_every_route_without_and_with_credentials(make_nxdns):
    nx = start_nx(make_nxdns)
    table = _table()
    anon = Api(nx)
    forged = Api(nx)
    forged.cookie = "A" * 43  # the right form, no such session
    bad_bearer = Api(nx)
    bad_bearer.token = "nxdns_" + "B" * 43
    n_protected = 0
    for method, path, match, auth in table:
        url = route_sample(method, path, match)
        body = {} if method in ("POST", "PUT", "DELETE") else None
        r = anon.req(method, url, body=body)
        if auth in PROTECTED:
            n_protected += 1
            assert_error(r, 401, "unauthorized")
            assert_error(forged.req(method, url, body=body), 401, "unauthorized")
            assert_error(bad_bearer.req(method, url, body=body), 401, "unauthorized")
        elif auth == "METRICS":
            assert r.status == 200, f"{method} {url} is open without admin.metrics_auth: {r}"
        else:
            assert r.status not in (401, 403), f"{method} {url} ({auth}) needs no auth: {r}"
    m = nx.metrics()
    assert m.get("nxdns_admin_auth_refused_total", reason="no_credentials") >= n_protected
    assert m.get("nxdns_admin_auth_refused_total", reason="bad_session") >= n_protected
    assert m.get("nxdns_admin_auth_refused_total", reason="bad_token") >= n_protected

    # Logged in: GET routes answer (not 401/403); every other method needs the CSRF token:
    # refused with none, with a wrong one and with another session's one, before the handler.
    api = logged_in(nx)
    other = logged_in(nx)
    assert other.csrf != api.csrf
    csrf_before = _counter(nx, "csrf")
    n_csrf = 0
    for method, path, match, auth in table:
        if auth not in PROTECTED:
            continue
        url = route_sample(method, path, match)
        if method == "GET":
            if url == "/api/queries/live":
                continue  # a stream: test_live.py
            r = api.get(url)
            assert r.status not in (401, 403) and r.status < 500, f"GET {url}: {r}"
            continue
        n_csrf += 3
        body = {}
        assert_error(api.req(method, url, body=body, headers={"X-CSRF-Token": None}), 403,
                     "csrf_required")
        assert_error(api.req(method, url, body=body, headers={"X-CSRF-Token": "x" * 43}), 403,
                     "csrf_invalid")
        assert_error(api.req(method, url, body=body, headers={"X-CSRF-Token": other.csrf}),
                     403, "csrf_invalid")
    assert _counter(nx, "csrf") - csrf_before == n_csrf
    # the refusals changed nothing: both sessions still work
    assert api.get("/api/auth/status").json["authenticated"] is True
    assert other.get("/api/settings").status == 200
    # and with the right token a state-changing request goes through
    assert api.post("/api/filter/pause", {"seconds": 0}).status == 200


def test_unknown_path_404_and_wrong_method_405(make_nxdns):
    nx = start_nx(make_nxdns)
    api = Api(nx)
    assert_error(api.get("/api/nosuch"), 404, "not_found")
    r = api.req("PATCH", "/api/settings", body={})
    assert_error(r, 405, "method_not_allowed")
    assert set(re.split(r",\s*", r.headers["allow"])) == {"GET", "HEAD", "PUT"}, r.headers


# ------------------------------------------------------------------ login

def test_login_ok_wrong_and_cookie_attributes(make_nxdns):
    nx = start_nx(make_nxdns, config={"admin": {"session_ttl": "1h"}})
    api = Api(nx)
    st = api.get("/api/auth/status").json
    assert st == {"setup_required": False, "authenticated": False, "tls": False,
                  "totp": False}

    assert_error(api.post("/api/auth/login", {"password": "wrong password"}), 401,
                 "invalid_password", "password")
    assert_error(api.post("/api/auth/login", {"password": 12345678}), 400, "bad_request",
                 "password")
    assert_error(api.post("/api/auth/login", raw=b"{not json"), 400, "bad_request")
    assert_error(api.post("/api/auth/login", {"password": PASSWORD, "user": "x"}), 400,
                 "bad_request", "user")

    r = api.post("/api/auth/login", {"password": PASSWORD})
    assert r.status == 200, r
    j = r.json
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", j["csrf"]), j
    assert j["expires_in"] == 3600
    (cookie,) = r.all("Set-Cookie")
    attrs = [a.strip() for a in cookie.split(";")]
    assert re.fullmatch(r"nxdns_session=[A-Za-z0-9_-]{43}", attrs[0]), cookie
    flags = {a.split("=")[0].lower(): (a.split("=", 1)[1] if "=" in a else True)
             for a in attrs[1:]}
    assert flags.get("httponly") is True, cookie
    assert flags.get("samesite") == "Strict", cookie
    assert flags.get("path") == "/", cookie
    assert flags.get("max-age") == "3600", cookie
    assert "secure" not in flags, "no Secure flag over plain HTTP"
    assert r.headers.get("cache-control") == "no-store"
    assert j["csrf"] not in cookie, "the CSRF token is not the session id"

    api.cookie, api.csrf = cookie_of(r), j["csrf"]
    st = api.get("/api/auth/status").json
    assert st["authenticated"] is True and st["csrf"] == j["csrf"]
    assert api.get("/api/settings").status == 200
    m = nx.metrics()
    assert m.get("nxdns_admin_logins_total") == 1
    assert m.get("nxdns_admin_login_failures_total") == 1


@pytest.mark.nx_timeout(60)
def test_login_rate_limit_per_address(make_nxdns):
    nx = start_nx(make_nxdns)
    api = Api(nx)
    for i in range(5):
        assert_error(api.post("/api/auth/login", {"password": f"wrong-{i}-password"}), 401,
                     "invalid_password")
    r = api.post("/api/auth/login", {"password": "wrong-again-password"})
    assert_error(r, 429, "rate_limited")
    assert 1 <= int(r.headers["retry-after"]) <= 60, r.headers
    # while limited even the right password is refused, without being checked
    assert_error(api.post("/api/auth/login", {"password": PASSWORD}), 429, "rate_limited")
    m = nx.metrics()
    assert m.get("nxdns_admin_login_failures_total") == 5
    assert m.get("nxdns_admin_login_rate_limited_total") == 2
    assert m.get("nxdns_admin_logins_total") == 0
    # the limit is per address: another loopback address logs in
    other = Api(nx, source="127.0.0.2")
    assert other.login().status == 200
    assert other.get("/api/settings").status == 200
    assert nx.metrics().get("nxdns_admin_logins_total") == 1
    # ... and the limited address stays limited
    assert_error(api.post("/api/auth/login", {"password": PASSWORD}), 429, "rate_limited")


# ------------------------------------------------------------------ CSRF

def test_csrf_required_on_state_changing_requests(make_nxdns):
    nx = start_nx(make_nxdns)
    api = logged_in(nx)
    before = nx.config_path.read_bytes()
    rule = {"list": "deny", "rule": "csrf.example"}
    assert_error(api.post("/api/filter/rules", rule, headers={"X-CSRF-Token": None}), 403,
                 "csrf_required")
    assert_error(api.post("/api/filter/rules", rule, headers={"X-CSRF-Token": api.csrf[::-1]}),
                 403, "csrf_invalid")
    assert_error(api.put("/api/settings", {"key": "upstream.timeout_ms", "value": 900},
                         headers={"X-CSRF-Token": None}), 403, "csrf_required")
    assert nx.config_path.read_bytes() == before, "a refused request changed the config"
    assert nx.metrics().get("nxdns_config_generation") == 1
    r = api.post("/api/filter/rules", rule)
    assert r.status == 201, r
    assert "csrf.example" in r.json["deny"]
    assert "csrf.example" in nx.config_path.read_text()


# ------------------------------------------------------------------ logout, password change

def test_logout_revokes_the_session(make_nxdns):
    nx = start_nx(make_nxdns)
    a = logged_in(nx)
    b = logged_in(nx)
    assert_error(a.post("/api/auth/logout", headers={"X-CSRF-Token": None}), 403,
                 "csrf_required")
    assert a.get("/api/settings").status == 200
    r = a.post("/api/auth/logout")
    assert r.status == 200 and r.json == {"logged_out": True}, r
    (cookie,) = r.all("Set-Cookie")
    assert cookie.startswith("nxdns_session=;") and "Max-Age=0" in cookie, cookie
    assert_error(a.get("/api/settings"), 401, "unauthorized")
    assert_error(a.post("/api/auth/logout"), 401, "unauthorized")
    assert a.get("/api/auth/status").json["authenticated"] is False
    # the other session is untouched
    assert b.get("/api/settings").status == 200


@pytest.mark.nx_timeout(60)
def test_password_change_with_cli_ends_sessions(make_nxdns):
    nx = start_nx(make_nxdns)
    a = logged_in(nx)
    old_hash = read_password_hash(nx.config_path)
    p = passwd(nx.config_path, "a brand new passphrase")
    assert p.returncode == 0, p.stderr
    new_hash = read_password_hash(nx.config_path)
    assert new_hash != old_hash and new_hash.startswith("$argon2id$")
    assert "a brand new passphrase" not in nx.config_path.read_text()
    gen = nx.metrics().get("nxdns_config_generation")
    nx.send_signal(signal.SIGHUP)
    assert wait_until(lambda: nx.metrics().get("nxdns_config_generation") > gen, 10)
    assert_error(a.get("/api/settings"), 401, "unauthorized")
    fresh = Api(nx)
    assert_error(fresh.post("/api/auth/login", {"password": PASSWORD}), 401, "invalid_password")
    assert fresh.login("a brand new passphrase").status == 200
    assert fresh.get("/api/settings").status == 200
    # too short: refused by the CLI, file unchanged
    before = nx.config_path.read_bytes()
    p = passwd(nx.config_path, "short")
    assert p.returncode == 2 and nx.config_path.read_bytes() == before, p


# ------------------------------------------------------------------ API tokens

def test_bearer_token_create_use_revoke(make_nxdns):
    nx = start_nx(make_nxdns)
    api = logged_in(nx)
    r = api.post("/api/auth/tokens", {"name": "backup-script"})
    assert r.status == 201, r
    tok = r.json["token"]
    assert r.json["name"] == "backup-script" and re.fullmatch(r"nxdns_[A-Za-z0-9_-]{43}", tok)
    text = nx.config_path.read_text()
    assert tok not in text, "the token itself must never be stored"
    assert hashlib.sha256(tok.encode()).hexdigest() in text, "its SHA-256 is stored"
    listed = api.get("/api/auth/tokens").json["tokens"]
    assert [t["name"] for t in listed] == ["backup-script"] and "token" not in listed[0]
    assert abs(listed[0]["created"] - time.time()) < 120

    assert_error(api.post("/api/auth/tokens", {"name": "backup-script"}), 409, "exists", "name")
    assert_error(api.post("/api/auth/tokens", {"name": "Bad Name!"}), 400, "bad_request", "name")

    script = Api(nx)
    script.token = tok
    assert script.get("/api/stats/summary").status == 200
    assert script.get("/api/auth/tokens").status == 200
    # a bearer token needs no CSRF token (no cookie: nothing a browser sends by itself)
    r = script.post("/api/filter/pause", {"seconds": 30})
    assert r.status == 200 and r.json["paused"] is True, r
    assert script.post("/api/filter/pause", {"resume": True}).json["paused"] is False
    # the wrong token, or one letter off, is refused
    script2 = Api(nx)
    script2.token = tok[:-1] + ("A" if tok[-1] != "A" else "B")
    assert_error(script2.get("/api/stats/summary"), 401, "unauthorized")

    r = api.delete("/api/auth/tokens/backup-script")
    assert r.status == 200 and r.json == {"deleted": "backup-script"}, r
    assert_error(script.get("/api/stats/summary"), 401, "unauthorized")
    assert api.get("/api/auth/tokens").json["tokens"] == []
    assert hashlib.sha256(tok.encode()).hexdigest() not in nx.config_path.read_text()
    assert_error(api.delete("/api/auth/tokens/backup-script"), 404, "not_found")


# ------------------------------------------------------------------ first run: setup token

@pytest.mark.nx_timeout(60)
def test_setup_token_flow(make_nxdns):
    nx = start_nx(make_nxdns, password=False)
    m = re.search(r"admin setup token: ([A-Za-z0-9_-]{43})", nx.log())
    assert m, "no setup token in the log:\n" + nx.log()
    token = m.group(1)
    api = Api(nx)
    assert api.get("/api/auth/status").json["setup_required"] is True
    for method, path, match, auth in _table():
        if auth in PROTECTED:
            body = {} if method != "GET" else None
            assert_error(api.req(method, route_sample(method, path, match), body=body), 401,
                         "setup_required")
    assert_error(api.post("/api/auth/login", {"password": PASSWORD}), 409, "setup_required")

    wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert_error(api.post("/api/auth/setup", {"token": wrong, "password": PASSWORD}), 401,
                 "invalid_token", "token")
    assert_error(api.post("/api/auth/setup", {"token": token, "password": "short"}), 400,
                 "bad_request", "password")
    assert "password_hash" not in nx.config_path.read_text()

    before = nx.config_path.read_bytes()
    r = api.post("/api/auth/setup", {"token": token, "password": PASSWORD})
    assert r.status == 200, r
    api.cookie, api.csrf = cookie_of(r), r.json["csrf"]
    assert api.get("/api/settings").status == 200, "setup opens a session"
    h = read_password_hash(nx.config_path)
    assert h and h.startswith("$argon2id$") and PASSWORD not in nx.config_path.read_text()
    assert nx.config_path.with_name(nx.config_path.name + ".bak").read_bytes() == before
    assert "admin password set through the setup token" in nx.log()

    # one time only: the token is spent, the password is what counts now
    assert_error(Api(nx).post("/api/auth/setup", {"token": token, "password": "another pw 1"}),
                 409, "already_set")
    assert Api(nx).get("/api/auth/status").json["setup_required"] is False
    assert logged_in(nx).get("/api/settings").status == 200


# ------------------------------------------------------------------ metrics_auth

def test_metrics_auth_closes_metrics_and_healthz(make_nxdns):
    nx = start_nx(make_nxdns)
    api = logged_in(nx)
    tok = api.post("/api/auth/tokens", {"name": "prometheus"}).json["token"]
    gen = nx.metrics().get("nxdns_config_generation")
    # edit the file as the API left it (it holds the token's hash): one line added
    text = nx.config_path.read_text()
    assert "metrics_auth:" not in text
    nx.write_config_text(text.replace("admin:\n", "admin:\n  metrics_auth: true\n", 1))
    nx.send_signal(signal.SIGHUP)
    anon = Api(nx)
    assert wait_until(lambda: anon.get("/metrics").status == 401, 10), nx.log()[-2000:]
    assert_error(anon.get("/healthz"), 401, "unauthorized")
    bearer = Api(nx)
    bearer.token = tok
    r = bearer.get("/metrics")
    assert r.status == 200 and b"nxdns_config_generation" in r.body
    g = [ln for ln in r.body.decode().splitlines() if ln.startswith("nxdns_config_generation ")]
    assert float(g[0].split()[1]) == gen + 1
    assert api.get("/healthz").status == 200, "a session also opens /metrics and /healthz"
