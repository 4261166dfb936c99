"""Apple profiles: GET /api/apple/{doh,dot}.mobileconfig fetched with a session and with a token,
parsed with python's plistlib, every field checked; 401 without auth; 404 without the listener;
the self-signed certificate embedded is the one the DoH listener serves."""

import base64
import plistlib
import re
import ssl
import socket

from adminkit import Api, assert_error, logged_in, start_nx
from harness import free_port


def _profile(r, kind):
    assert r.status == 200, r
    assert r.headers["content-type"] == "application/x-apple-aspen-config"
    assert r.headers["content-disposition"] == f'attachment; filename="nxdns-{kind}.mobileconfig"'
    return plistlib.loads(r.body)


def _served_der(port):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        with ctx.wrap_socket(s, server_hostname="dns.test") as t:
            return t.getpeercert(binary_form=True)


def test_profiles(make_nxdns):
    doh, dot = free_port(v6=False, udp=False), free_port(v6=False, udp=False)
    nx = start_nx(make_nxdns, config={
        "listener": {"doh": [f"127.0.0.1:{doh}"], "dot": [f"0.0.0.0:{dot}"]},
        "tls": {"server_name": "dns.test"},
    })
    anon = Api(nx)
    for kind in ("doh", "dot"):
        assert_error(anon.get(f"/api/apple/{kind}.mobileconfig"), 401)
    api = logged_in(nx)
    p = _profile(api.get("/api/apple/doh.mobileconfig"), "doh")
    assert p["PayloadType"] == "Configuration" and p["PayloadVersion"] == 1
    assert p["PayloadIdentifier"] == "org.nxdns.doh.dns.test"
    assert p["PayloadRemovalDisallowed"] is False
    uuid = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{4}-8[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$")
    assert uuid.match(p["PayloadUUID"]), p["PayloadUUID"]
    dns, root = p["PayloadContent"]
    assert dns["PayloadType"] == "com.apple.dnsSettings.managed"
    assert dns["PayloadIdentifier"] == "org.nxdns.doh.dns.test.dns"
    assert dns["DNSSettings"] == {"DNSProtocol": "HTTPS",
                                  "ServerURL": f"https://dns.test:{doh}/dns-query",
                                  "ServerAddresses": ["127.0.0.1"]}
    assert root["PayloadType"] == "com.apple.security.root"
    assert root["PayloadCertificateFileName"] == "nxdns.cer"
    # the embedded certificate is the one the listener presents, and the generated file
    assert root["PayloadContent"] == _served_der(doh)
    pem = (nx.workdir / "state" / "tls" / "cert.pem").read_text()
    assert root["PayloadContent"] == ssl.PEM_cert_to_DER_cert(pem)
    assert len({p["PayloadUUID"], dns["PayloadUUID"], root["PayloadUUID"]}) == 3
    # stable: a second download is the same document (replaces, not duplicates, on a device)
    assert api.get("/api/apple/doh.mobileconfig").body == api.get("/api/apple/doh.mobileconfig").body

    # a token works too; DoT with a client id in the SNI; the wildcard became 127.0.0.1
    tok = api.ok("POST", "/api/auth/tokens", {"name": "apple"})["token"]
    bearer = Api(nx)
    bearer.token = tok
    r = bearer.get("/api/apple/dot.mobileconfig?client_id=phone")
    assert r.headers["content-disposition"] == 'attachment; filename="nxdns-dot-phone.mobileconfig"'
    p2 = plistlib.loads(r.body)
    d2 = p2["PayloadContent"][0]
    assert d2["DNSSettings"] == {"DNSProtocol": "TLS", "ServerName": "phone.dns.test",
                                 "ServerAddresses": ["127.0.0.1"]}
    assert "forward 853" in p2["PayloadDescription"]
    assert p2["PayloadIdentifier"] == "org.nxdns.dot.dns.test.phone"
    assert p2["PayloadUUID"] != p["PayloadUUID"]
    assert_error(bearer.get("/api/apple/dot.mobileconfig?client_id=No_Such"), 400, "bad_request",
                 "client_id")


def test_not_configured(make_nxdns):
    nx = start_nx(make_nxdns)
    api = logged_in(nx)
    for kind in ("doh", "dot"):
        r = api.get(f"/api/apple/{kind}.mobileconfig")
        assert_error(r, 404, "not_configured")
        assert f"listener.{kind}" in r.json["message"]


def test_configured_certificate_not_embedded(make_nxdns, tmp_path):
    # tls.cert given: the device is expected to trust it already; no server name: the address
    first = start_nx(make_nxdns, name="gen", config={
        "listener": {"doh": [f"127.0.0.1:{free_port(v6=False, udp=False)}"]}})
    tls = first.workdir / "state" / "tls"
    first.stop()
    doh = free_port(v6=False, udp=False)
    nx = start_nx(make_nxdns, name="cfg", config={
        "listener": {"doh": [f"127.0.0.1:{doh}"]},
        "tls": {"cert": str(tls / "cert.pem"), "key": str(tls / "key.pem")},
    })
    p = _profile(logged_in(nx).get("/api/apple/doh.mobileconfig"), "doh")
    assert len(p["PayloadContent"]) == 1
    assert p["PayloadContent"][0]["DNSSettings"]["ServerURL"] == f"https://127.0.0.1:{doh}/dns-query"
