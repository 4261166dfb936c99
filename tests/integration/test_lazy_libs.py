"""Code nxdns does not call is not mapped (issue 16, "Memory"): nxdns does not link libcurl,
which would pull libssh2, OpenSSL's libcrypto, libldap, librtmp and Kerberos into every
process, nor libarchive, which pulls libxml2, ICU and libstdc++. A daemon with only path
sources never maps any of them (its first scheduled refresh round included); a URL source's
download loads libcurl, and the library is unmapped again once the round is over
(NX_FETCH_LINGER_MS later), and loaded again by the next round; GET /api/backup loads
libarchive for the archive's life only.
"""

from __future__ import annotations

import signal

import pytest

from adminkit import logged_in
from adminkit import start_nx as start_admin
from filterkit import start_nx, wait_log
from harness import answers, make_query, wait_until
from listserver import ListServer

# libcurl-gnutls and what it alone brings (nxdns itself links GnuTLS, nghttp2, libidn2, zlib...)
CURL_ONLY = ("libcurl", "libssh2", "libcrypto.so", "libldap", "liblber", "librtmp",
             "libgssapi_krb5", "libkrb5.so", "libpsl", "libsasl2", "libbrotlidec")


ARCHIVE_ONLY = ("libarchive", "libxml2", "libicuuc", "libicudata", "liblz4", "libbz2",
                "libacl")


def mapped(pid: int) -> set:
    out = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6:
                out.add(parts[5].strip().rsplit("/", 1)[-1])
    return out


def curl_libs(pid: int) -> list:
    return sorted(m for m in mapped(pid) if any(m.startswith(c) for c in CURL_ONLY))


def blocked(nx, name: str) -> bool:
    return answers(nx.udp(make_query(name), timeout=3)) == ["0.0.0.0"]


@pytest.mark.nx_timeout(40)
def test_path_sources_map_no_libcurl(tmp_path, make_upstream, make_nxdns):
    lst = tmp_path / "local.txt"
    lst.write_text("".join(f"0.0.0.0 p{i}.lazy.test\n" for i in range(20)))
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], {"filter": {"sources": [{"name": "local",
                                                             "path": str(lst)}]}})
    assert blocked(nx, "p3.lazy.test")
    # the first scheduled refresh round (3 s after boot) runs, with nothing to download
    assert wait_log(nx, "refresh done", 1, timeout=15), nx.log()[-2000:]
    assert blocked(nx, "p4.lazy.test")
    assert curl_libs(nx.pid) == [], f"mapped without a URL source: {curl_libs(nx.pid)}"
    arch = sorted(m for m in mapped(nx.pid) if m.startswith(ARCHIVE_ONLY))
    assert arch == [], f"mapped without an archive: {arch}"


@pytest.mark.nx_timeout(40)
def test_api_backup_maps_libarchive_only_while_it_runs(tmp_path, make_upstream, make_nxdns):
    lst = tmp_path / "household.txt"
    lst.write_text("0.0.0.0 ads.example.com\n")
    up = make_upstream()
    nx = start_admin(make_nxdns, [up], config={
        "filter": {"sources": [{"name": "household", "path": str(lst)}]}})
    arch = lambda: sorted(m for m in mapped(nx.pid) if m.startswith(ARCHIVE_ONLY))
    assert arch() == []
    api = logged_in(nx)
    for _ in range(2):
        r = api.get("/api/backup")
        assert r.status == 200, r
        assert r.body[:2] == b"\x1f\x8b", "a gzip stream"
        assert arch() == [], f"still mapped after the archive was sent: {arch()}"


@pytest.mark.nx_timeout(60)
def test_url_refresh_loads_libcurl_only_while_it_runs(make_upstream, make_nxdns):
    srv = ListServer().start()
    try:
        body = "".join(f"0.0.0.0 u{i}.lazy.test\n" for i in range(150)).encode()
        srv.serve("/l.txt", body, etag='"a"')
        up = make_upstream()
        nx = start_nx(make_nxdns, [up], {"filter": {"sources": [
            {"name": "remote", "url": srv.url("/l.txt")}]}, "upstream": {"timeout_ms": 1000}})
        # the source has no list on disk: first boot downloads it before DNS starts, so the
        # first round is over by now (a daemon without URL sources maps none: the test above)
        got = nx.wait_counter("nxdns_filter_downloads_total", 1, timeout=15, result="ok")
        assert got >= 1
        assert wait_until(lambda: blocked(nx, "u7.lazy.test"), timeout=10)
        # the round is over: the fetcher lingers NX_FETCH_LINGER_MS (2 s), then unloads
        assert wait_until(lambda: not any(m.startswith("libcurl") for m in mapped(nx.pid)),
                          timeout=15), f"still mapped: {curl_libs(nx.pid)}"
        left = curl_libs(nx.pid)
        # libcrypto (libssh2's) is linked -z nodelete: the only one allowed to stay
        assert all(m.startswith("libcrypto.so") for m in left), left
        # the next round loads it again and works
        nx.send_signal(signal.SIGUSR1)
        assert len(srv.wait_requests("/l.txt", 2)) >= 2
        got = nx.wait_counter("nxdns_filter_downloads_total", 1, timeout=15,
                              result="not_modified")
        assert got >= 1, nx.log()[-2000:]
        assert wait_until(lambda: not any(m.startswith("libcurl") for m in mapped(nx.pid)),
                          timeout=15), f"still mapped: {curl_libs(nx.pid)}"
        assert blocked(nx, "u9.lazy.test")
    finally:
        srv.stop()
