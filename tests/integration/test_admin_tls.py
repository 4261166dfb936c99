"""admin.tls: true without tls.cert: the admin serves the self-signed certificate generated in
state_dir/tls/ (the one DoT and DoH use), verified against that file."""

import http.client
import json
import socket
import ssl
import time

from adminkit import PASSWORD, start_nx
from harness import free_port


def _https(port, cafile, method, path, body=None, timeout=5):
    ctx = ssl.create_default_context(cafile=str(cafile))  # verifies chain and 127.0.0.1
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data,
                  headers={"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        c.close()


def _wait_https(nx, port, cafile, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert nx.alive(), nx.log()
        try:
            if cafile.exists() and _https(port, cafile, "GET", "/healthz", timeout=1)[0] == 200:
                return
        except (OSError, ssl.SSLError):
            pass
        time.sleep(0.1)
    raise AssertionError("admin HTTPS did not answer:\n" + nx.log())


def test_admin_https_with_generated_certificate(make_nxdns):
    admin = free_port(v6=False, udp=False)
    nx = start_nx(make_nxdns, start=False, config={
        "admin": {"listen": f"127.0.0.1:{admin}", "tls": True}})
    nx.start(wait=False)
    cert = nx.workdir / "state" / "tls" / "cert.pem"
    _wait_https(nx, admin, cert)
    assert (nx.workdir / "state" / "tls" / "key.pem").stat().st_mode & 0o777 == 0o600
    st, h, body = _https(admin, cert, "POST", "/api/auth/login", {"password": PASSWORD})
    assert st == 200, body
    assert "; Secure" in h["set-cookie"]
    # plain HTTP is not served on that port
    with socket.create_connection(("127.0.0.1", admin), timeout=3) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        s.settimeout(3)
        try:
            got = s.recv(100)
        except (socket.timeout, ConnectionResetError):
            got = b""
    assert not got.startswith(b"HTTP/1.1 200")
    # the same certificate after a restart, and shared with a DoH listener
    before = cert.read_bytes()
    nx.stop()
    doh = free_port(v6=False, udp=False)
    nx.config["listener"]["doh"] = [f"127.0.0.1:{doh}"]
    from adminkit import write_config
    write_config(nx, nx.config)
    nx.start(wait=False)
    _wait_https(nx, admin, cert)
    assert cert.read_bytes() == before
    ctx = ssl.create_default_context(cafile=str(cert))
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", doh), timeout=5) as s:
        with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
            assert t.getpeercert(binary_form=True) == ssl.PEM_cert_to_DER_cert(before.decode())
