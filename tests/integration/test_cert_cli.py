"""`nxdns cert --self-signed DIR`: the key and certificate it writes are read by independent
tools (OpenSSL through Python's ssl module, GnuTLS's certtool), serve a real TLS handshake to an
OpenSSL client that trusts the certificate, and the printed pin is the SPKI SHA-256 that
certtool and a DER walk here compute. Existing files are kept without --force; an unwritable
directory and a bad name are clear errors."""

from __future__ import annotations

import base64
import datetime
import hashlib
import os
import re
import shutil
import socket
import ssl
import stat
import tempfile
import threading
from pathlib import Path

import pytest

from harness import nxdns_bin, run

CERTTOOL = shutil.which("certtool")  # gnutls-bin (scripts/bootstrap)


def cert_cli(*args, **kw):
    return run([str(nxdns_bin()), "cert", *map(str, args)], **kw)


def printed_pin(out: str) -> str:
    m = re.fullmatch(r"pin-sha256: ([A-Za-z0-9+/]{43}=)\n", out)
    assert m, out
    return m.group(1)


def _tlv(der: bytes, at: int):
    """(tag, start of value, end of value) of the DER element at `at`."""
    tag, n = der[at], der[at + 1]
    at += 2
    if n & 0x80:
        k = n & 0x7F
        n = int.from_bytes(der[at:at + k], "big")
        at += k
    return tag, at, at + n


def spki_pin(cert_pem: str) -> str:
    """SHA-256 of the certificate's SubjectPublicKeyInfo, base64: RFC 7469 by hand."""
    der = ssl.PEM_cert_to_DER_cert(cert_pem)
    _, cert_body, _ = _tlv(der, 0)         # Certificate
    _, at, _ = _tlv(der, cert_body)        # tbsCertificate
    fields = []
    while len(fields) < 7:
        tag, start, end = _tlv(der, at)
        hdr = at
        fields.append((tag, hdr, end))
        at = end
    if fields[0][0] == 0xA0:               # [0] version present: skip it
        fields = fields[1:]
    # serial, signature, issuer, validity, subject, subjectPublicKeyInfo
    tag, start, end = fields[5]
    assert tag == 0x30
    return base64.b64encode(hashlib.sha256(der[start:end]).digest()).decode()


def test_writes_key_cert_and_pin(tmp_path):
    d = tmp_path / "tls"  # made by the command
    r = cert_cli("--self-signed", d, "--name", "DNS.Test", "--name", "192.0.2.53")
    assert r.returncode == 0, r.stderr
    pin = printed_pin(r.stdout)
    key, cert = d / "key.pem", d / "cert.pem"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(cert.stat().st_mode) == 0o644
    assert str(cert) in r.stderr and str(key) in r.stderr
    assert not [p for p in d.iterdir() if p.name.startswith(".")]  # no temp files left

    # OpenSSL's reading of it: names, validity ~10 years, self-issued.
    info = ssl._ssl._test_decode_cert(str(cert))
    assert sorted(info["subjectAltName"]) == sorted([
        ("DNS", "dns.test"), ("IP Address", "192.0.2.53"), ("IP Address", "127.0.0.1"),
        ("IP Address", "0:0:0:0:0:0:0:1")])
    assert info["subject"] == info["issuer"] == ((("commonName", "dns.test"),),)
    fmt = "%b %d %H:%M:%S %Y %Z"
    before = datetime.datetime.strptime(info["notBefore"], fmt)
    after = datetime.datetime.strptime(info["notAfter"], fmt)
    now = datetime.datetime.utcnow()
    assert before <= now <= before + datetime.timedelta(days=2)
    assert 3640 <= (after - before).days <= 3660

    # The pin: a DER walk here, and GnuTLS's certtool on both files.
    assert pin == spki_pin(cert.read_text())
    if CERTTOOL:
        for args in (["--certificate-info", "--infile", cert], ["--key-info", "--infile", key]):
            out = run([CERTTOOL, *map(str, args)]).stdout
            assert f"pin-sha256:{pin}" in out
            if "--certificate-info" in args:
                assert "Certificate Authority (CA): FALSE" in out
                assert "TLS WWW Server" in out
                assert "ECDSA-SHA256" in out


def _serve_once(ctx: ssl.SSLContext, lsock: socket.socket, results: list):
    """Accept TLS connections until the listener closes, answering 'pong' to 'ping'."""
    while True:
        try:
            conn, _ = lsock.accept()
        except OSError:
            return
        conn.settimeout(5)
        try:
            with ctx.wrap_socket(conn, server_side=True) as s:
                if s.recv(4) == b"ping":
                    s.sendall(b"pong")
                    results.append("ok")
        except (ssl.SSLError, OSError) as e:
            results.append(repr(e))


def test_openssl_client_trusts_it(tmp_path):
    """An OpenSSL server on the written pair, an OpenSSL client trusting cert.pem: the
    handshake works by name and by loopback IP, and a wrong name is refused."""
    r = cert_cli("--self-signed", tmp_path, "--name", "dns.test")
    assert r.returncode == 0, r.stderr
    srv = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    srv.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")  # the key matches
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    lsock.settimeout(10)
    port = lsock.getsockname()[1]
    results: list = []
    t = threading.Thread(target=_serve_once, args=(srv, lsock, results), daemon=True)
    t.start()
    try:
        cli = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
        for name in ("dns.test", "127.0.0.1"):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                with cli.wrap_socket(raw, server_hostname=name) as s:
                    s.sendall(b"ping")
                    assert s.recv(4) == b"pong"
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with pytest.raises(ssl.SSLCertVerificationError):
                cli.wrap_socket(raw, server_hostname="wrong.test")
    finally:
        lsock.close()
        t.join(10)
    assert results[:2] == ["ok", "ok"]


def test_keeps_existing_files_without_force(tmp_path):
    r = cert_cli("--self-signed", tmp_path)
    assert r.returncode == 0, r.stderr
    first = printed_pin(r.stdout)
    before = (tmp_path / "key.pem").read_bytes()
    r = cert_cli("--self-signed", tmp_path)
    assert r.returncode == 1
    assert "already exists" in r.stderr and "--force" in r.stderr
    assert r.stdout == ""
    assert (tmp_path / "key.pem").read_bytes() == before
    r = cert_cli("--self-signed", tmp_path, "--force")
    assert r.returncode == 0, r.stderr
    assert printed_pin(r.stdout) != first
    assert (tmp_path / "key.pem").read_bytes() != before


def test_unwritable_dir_is_a_clear_error(tmp_path):
    if os.geteuid() == 0:
        # root writes anywhere: run the command as nobody on a root-owned 0755 directory that
        # nobody can reach (pytest's own tmp dirs are 0700)
        d = Path(tempfile.mkdtemp(prefix="nx-cert-ro-"))
        os.chmod(d, 0o755)
        kw = {"user": 65534}
    else:
        d = tmp_path / "ro"
        d.mkdir(mode=0o500)
        kw = {}
    try:
        r = cert_cli("--self-signed", d, **kw)
        assert r.returncode == 1
        assert f"cannot create a file in {d}: Permission denied" in r.stderr, r.stderr
        assert r.stdout == ""
        assert list(d.iterdir()) == []
    finally:
        os.chmod(d, 0o755)
        if os.geteuid() == 0:
            shutil.rmtree(d)


def test_bad_name_and_usage(tmp_path):
    r = cert_cli("--self-signed", tmp_path, "--name", "bad_name!.test")
    assert r.returncode == 2
    assert "'bad_name!.test' is neither a host name nor an IP address" in r.stderr
    assert list(tmp_path.iterdir()) == []
    r = cert_cli()
    assert r.returncode == 2 and "usage: nxdns cert" in r.stderr
    r = cert_cli("--self-signed", tmp_path, "extra")
    assert r.returncode == 2
