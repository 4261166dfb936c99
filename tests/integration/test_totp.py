"""The admin login's optional second factor (issue 15): TOTP per RFC 6238 (HMAC-SHA-1, 30 s
steps, 6 digits, one step of skew either way, each code accepted once).

The codes are computed here from the secret the enrolment shows, with Python's own hmac, so
the test checks nxdns against an independent implementation: enrolment (secret shown once,
stored only after a confirming code), login without and with the code, a wrong code, a
replayed code refused, a reload that lost the secret refused, removal with a code.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import signal
import struct
import time

from adminkit import PASSWORD, Api, assert_error, logged_in, start_nx
from harness import wait_until


def totp(secret_b32: str, step: int) -> str:
    key = base64.b32decode(secret_b32 + "=" * (-len(secret_b32) % 8))
    mac = hmac.new(key, struct.pack(">Q", step), hashlib.sha1).digest()
    off = mac[-1] & 0x0F
    return "%06d" % ((struct.unpack(">I", mac[off:off + 4])[0] & 0x7FFFFFFF) % 1000000)


def now_step() -> int:
    return int(time.time()) // 30


def stored_secret(nx):
    m = re.search(r'totp_secret:\s*"?([A-Za-z0-9]*)"?', nx.config_path.read_text())
    return m.group(1) if m else None


def login(nx, code=None, source=None):
    api = Api(nx, source=source)
    body = {"password": PASSWORD}
    if code is not None:
        body["totp"] = code
    r = api.post("/api/auth/login", body, auth=False)
    return api, r


def test_totp_enrol_login_replay_remove(make_nxdns):
    nx = start_nx(make_nxdns)
    api = logged_in(nx)
    assert api.get("/api/auth/status").json["totp"] is False

    # enrolment: the secret is shown once and not stored until a code confirms it
    r = api.post("/api/auth/totp", {})
    assert r.status == 201, r
    secret = r.json["secret"]
    assert re.fullmatch(r"[A-Z2-7]{32}", secret)           # 160 bits
    assert r.json["uri"].startswith(f"otpauth://totp/nxdns:admin?secret={secret}&")
    assert stored_secret(nx) is None
    now = now_step()
    wrong = next(c for c in ("000000", "999999", "111111")
                 if c not in [totp(secret, now + d) for d in (-1, 0, 1, 2)])
    assert_error(api.post("/api/auth/totp/confirm", {"code": wrong}), 400, "invalid_totp", "code")
    assert stored_secret(nx) is None
    # Every code below is within one step of the current one, so the rest runs inside one
    # 30 s step: start with at least 15 s of it left (the rest takes ~2 s).
    wait_until(lambda: 30 - time.time() % 30 >= 15 or None, timeout=16, interval=0.2)
    step = now_step()
    r = api.post("/api/auth/totp/confirm", {"code": totp(secret, step - 1)})
    assert r.status == 200 and r.json == {"totp": True}, r
    assert stored_secret(nx) == secret
    assert api.get("/api/auth/status").json["totp"] is True
    assert_error(api.post("/api/auth/totp", {}), 409, "totp_enrolled")

    # login: the password alone is not enough, a wrong code neither
    _, r = login(nx)
    assert_error(r, 401, "totp_required", "totp")
    wrong = next(c for c in ("123456", "654321", "111111")
                 if c not in [totp(secret, step + d) for d in (-1, 0, 1)])
    _, r = login(nx, wrong)
    assert_error(r, 401, "invalid_totp", "totp")
    # the confirming code (the step before: one step of skew) was used: replayed, refused
    _, r = login(nx, totp(secret, step - 1))
    assert_error(r, 401, "totp_replayed", "totp")
    # the current step's code logs in, once
    code = totp(secret, step)
    _, r = login(nx, code)
    assert r.status == 200, r
    _, r = login(nx, code)
    assert_error(r, 401, "totp_replayed", "totp")
    m = nx.metrics()
    assert m.get("nxdns_admin_totp_refused_total", reason="missing") == 1
    assert m.get("nxdns_admin_totp_refused_total", reason="invalid") == 2  # confirm + login
    assert m.get("nxdns_admin_totp_refused_total", reason="replayed") == 2

    # a reload whose file lost the secret is refused: the second factor stays
    text = nx.config_path.read_text()
    nx.config_path.write_text(re.sub(r".*totp_secret:.*\n", "", text))
    nx.proc.send_signal(signal.SIGHUP)
    assert wait_until(lambda: "admin.totp_secret is gone" in nx.log(), timeout=5)
    _, r = login(nx, source="127.0.0.2")
    assert_error(r, 401, "totp_required", "totp")
    nx.config_path.write_text(text)

    # removal needs a code too; it writes "off", which a reload accepts
    assert_error(api.delete("/api/auth/totp", {"code": "12345"}), 400, "invalid_totp", "code")
    r = api.delete("/api/auth/totp", {"code": totp(secret, step + 1)})  # not used yet
    assert r.status == 200 and r.json == {"totp": False}, r
    assert 'totp_secret: "off"' in nx.config_path.read_text()
    _, r = login(nx, source="127.0.0.2")
    assert r.status == 200, r
    assert_error(api.delete("/api/auth/totp", {"code": "123456"}), 404, "not_enrolled")


def test_totp_routes_need_session_and_csrf(make_nxdns):
    nx = start_nx(make_nxdns)
    anon = Api(nx)
    for method, path in [("POST", "/api/auth/totp"), ("POST", "/api/auth/totp/confirm"),
                         ("DELETE", "/api/auth/totp")]:
        assert_error(anon.req(method, path, body={}), 401, "unauthorized")
    api = logged_in(nx)
    api_nocsrf = Api(nx)
    api_nocsrf.cookie = api.cookie
    assert api_nocsrf.post("/api/auth/totp", {}).status == 403
    # confirming without an enrolment, and a malformed body
    assert_error(api.post("/api/auth/totp/confirm", {"code": "123456"}), 409, "no_enrolment")
    assert_error(api.post("/api/auth/totp/confirm", {}), 400, "bad_request", "code")
