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


def _served(port):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
            return t.getpeercert(binary_form=True)


def test_admin_certificate_swapped_on_sighup(make_nxdns, tmp_path):
    """tls.cert and tls.key are read again on SIGHUP for the admin's HTTPS too: connections
    from then on get the new certificate, the listener and its sessions stay; a broken pair
    keeps the old one and the log says why."""
    from harness import self_signed_pair
    import shutil
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    cert_a, key_a = self_signed_pair(a_dir)
    cert_b, key_b = self_signed_pair(b_dir)
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(cert_a, live / "cert.pem")
    shutil.copy(key_a, live / "key.pem")
    admin = free_port(v6=False, udp=False)
    nx = start_nx(make_nxdns, start=False, config={
        "admin": {"listen": f"127.0.0.1:{admin}", "tls": True},
        "tls": {"cert": str(live / "cert.pem"), "key": str(live / "key.pem")}})
    nx.start(wait=False)
    _wait_https(nx, admin, live / "cert.pem")
    der_a = ssl.PEM_cert_to_DER_cert(cert_a.read_text())
    der_b = ssl.PEM_cert_to_DER_cert(cert_b.read_text())
    assert _served(admin) == der_a
    st, h, body = _https(admin, cert_a, "POST", "/api/auth/login", {"password": PASSWORD})
    assert st == 200, body
    cookie = h["set-cookie"].split(";", 1)[0]
    shutil.copy(cert_b, live / "cert.pem")
    shutil.copy(key_b, live / "key.pem")
    nx.reload()
    end = time.monotonic() + 10
    while time.monotonic() < end and _served(admin) != der_b:
        time.sleep(0.1)
    assert _served(admin) == der_b, nx.log()
    assert "HTTPS certificate reloaded" in nx.log()
    # the session made before the swap still works over a connection with the new certificate
    ctx = ssl.create_default_context(cafile=str(cert_b))
    c = http.client.HTTPSConnection("127.0.0.1", admin, context=ctx, timeout=5)
    c.request("GET", "/api/auth/status", headers={"Cookie": cookie})
    r = c.getresponse()
    status = json.loads(r.read())
    c.close()
    assert r.status == 200 and status.get("authenticated") is True, status
    # a broken pair: the running certificate stays
    (live / "cert.pem").write_text("not a certificate\n")
    nx.reload()
    end = time.monotonic() + 10
    while time.monotonic() < end and "keeping the HTTPS certificate in use" not in nx.log():
        time.sleep(0.1)
    assert "keeping the HTTPS certificate in use" in nx.log()
    assert _served(admin) == der_b
