"""URL blocklist sources against a local HTTP server (issue 3, "Refresh"; issue 15, the first
boot): a source with no list on disk is downloaded before DNS answers (a query asked meanwhile
is answered only after the load, blocked), a failed or timed-out first download is reported and
the others go on, HTTP errors, garbage and empty bodies keep the last good list and are counted,
a hung server does not stop DNS, a conditional GET that gets 304 rebuilds nothing, and a restart
maps the existing snapshot without waiting on the network.

A first boot that downloaded every URL source schedules the next round a refresh_interval later
(>= 1 min, too long here); a boot with lists on disk downloads 3 s after it starts serving.
Later rounds are forced with SIGUSR1 (which also forces a rebuild, so the generation check of
the 304 path uses the boot-time round of a second daemon instead).
"""

from __future__ import annotations

import json
import random
import select
import signal
import socket
import time

import dns.message
import dns.rcode
import pytest

from filterkit import ede, start_nx, wait_log
from harness import answers, make_query, wait_until
from listserver import ListServer

N_GOOD = 150  # >= 100: an empty compile afterwards is "suspicious" and refused


@pytest.fixture
def listserver():
    srv = ListServer().start()
    yield srv
    srv.stop()


def good_list(prefix: str, n: int = N_GOOD) -> bytes:
    lines = ["# a good list", "||wild-%s.refresh.test^" % prefix]
    lines += [f"0.0.0.0 {prefix}{i}.refresh.test" for i in range(n)]
    return ("\n".join(lines) + "\n").encode()


def junk_lines(n: int, seed: int = 7) -> list:
    """Binary lines that can never be a rule: each starts with 0xff (never valid UTF-8) and
    holds no NUL (a NUL inside a non-ASCII line is test_cli_filter's
    test_compile_nul_byte_never_truncates_a_line)."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        b = b"\xff" + bytes(rnd.randrange(1, 0x100) for _ in range(rnd.randrange(5, 60)))
        out.append(b.replace(b"\n", b"\xfe").replace(b"\r", b"\xfe"))
    return out


def url_config(url: str) -> dict:
    return {"filter": {"sources": [{"name": "remote", "url": url}]},
            "upstream": {"timeout_ms": 1000}}


def blocked(nx, name: str) -> bool:
    r = nx.udp(make_query(name, edns=0), timeout=3)
    assert r.rcode() == dns.rcode.NOERROR, f"{name}: {dns.rcode.to_text(r.rcode())}"
    if answers(r) == ["0.0.0.0"]:
        assert ede(r) == [(15, "blocked by list remote")], ede(r)
        return True
    assert answers(r) == ["192.0.2.1"], f"{name}: {answers(r)}"
    return False


def metric(nx, name, **labels):
    return nx.metrics().get(name, **labels)


def wait_downloads(nx, result: str, n: int, timeout: float = 10.0):
    got = nx.wait_counter("nxdns_filter_downloads_total", n, timeout=timeout, result=result)
    assert got >= n, f"nxdns_filter_downloads_total{{result={result}}} is {got}, waited for {n}"


def refresh(nx, srv, path, nreq):
    """SIGUSR1, then wait until the server saw request number nreq."""
    nx.send_signal(signal.SIGUSR1)
    rs = srv.wait_requests(path, nreq)
    assert len(rs) >= nreq, f"no download after SIGUSR1 ({len(rs)} requests)"


@pytest.mark.nx_timeout(60)
def test_download_errors_keep_the_last_good_list(listserver, make_upstream, make_nxdns):
    srv = listserver
    srv.serve("/list.txt", good_list("n"), etag='"v1"')
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], url_config(srv.url("/list.txt")))
    # Nothing on disk: the first download happens before DNS answers, so the first answer
    # is already filtered.
    assert blocked(nx, "n1.refresh.test")
    wait_downloads(nx, "ok", 1)
    (first,) = srv.requests("/list.txt")
    assert "if-none-match" not in first.headers, "nothing on disk yet: no conditional GET"
    assert blocked(nx, f"n{N_GOOD - 1}.refresh.test")
    assert blocked(nx, "a.wild-n.refresh.test")
    m = nx.metrics()
    assert m.get("nxdns_filter_source_names", source="remote", body="list") == N_GOOD + 1
    assert m.get("nxdns_filter_source_errors_total", source="remote") == 0
    state = nx.workdir / "state" / "lists" / "remote"
    meta = json.loads((state / "remote.meta").read_text())
    assert meta["fetch"]["etag"] == '"v1"', meta.get("fetch")

    # 404: counted as an error, the list stays.
    srv.fail("/list.txt", 404)
    refresh(nx, srv, "/list.txt", 2)
    wait_downloads(nx, "error", 1)
    assert metric(nx, "nxdns_filter_source_errors_total", source="remote") == 1
    assert blocked(nx, "n1.refresh.test"), "a 404 must keep the last good list"
    assert wait_log(nx, "download failed", 1)

    # Binary junk only: compiles to nothing while the last good list had >= 100 entries.
    srv.serve("/list.txt", b"\n".join(junk_lines(200)) + b"\n", etag='"junk"')
    refresh(nx, srv, "/list.txt", 3)
    wait_downloads(nx, "ok", 2)
    assert wait_until(lambda: metric(nx, "nxdns_filter_source_errors_total",
                                     source="remote") == 2, 5), \
        "a body that compiles to nothing must be counted as a source error"
    assert blocked(nx, "n1.refresh.test") and blocked(nx, "x.wild-n.refresh.test"), \
        "a junk body must keep the last good list"
    assert metric(nx, "nxdns_filter_source_names", source="remote", body="list") == N_GOOD + 1

    # An empty body: the same.
    srv.serve("/list.txt", b"", etag='"empty"')
    refresh(nx, srv, "/list.txt", 4)
    wait_downloads(nx, "ok", 3)
    assert wait_until(lambda: metric(nx, "nxdns_filter_source_errors_total",
                                     source="remote") == 3, 5)
    assert blocked(nx, "n2.refresh.test"), "an empty body must keep the last good list"

    # Junk mixed with a new list: the junk lines are skipped and counted, the new names rule.
    junk = junk_lines(40, seed=11)
    body = good_list("m", 120).splitlines()
    mixed = []
    for i, line in enumerate(body):
        mixed.append(line)
        if i < len(junk):
            mixed.append(junk[i])
    srv.serve("/list.txt", b"\n".join(mixed) + b"\n", etag='"v2"')
    gen = metric(nx, "nxdns_filter_snapshot_generation")
    refresh(nx, srv, "/list.txt", 5)
    wait_downloads(nx, "ok", 4)
    assert wait_until(lambda: metric(nx, "nxdns_filter_snapshot_generation") > gen, 5)
    assert wait_until(lambda: blocked(nx, "m1.refresh.test"), timeout=10)
    assert blocked(nx, "a.wild-m.refresh.test")
    assert not blocked(nx, "n1.refresh.test"), "the new good list replaces the old one"
    meta = json.loads((state / "remote.meta").read_text())
    assert meta["skipped_total"] == len(junk), meta["skipped"]
    assert meta["counts"]["list"] == 121
    # the error count does not move on success
    assert metric(nx, "nxdns_filter_source_errors_total", source="remote") == 3

    # The next conditional GET carries the validator of the body now on disk.
    srv.fail("/list.txt", 404)
    refresh(nx, srv, "/list.txt", 6)
    nxt = srv.requests("/list.txt")[5]
    assert nxt.headers.get("if-none-match") == '"v2"', \
        f"conditional GET with a stale validator: {nxt.headers.get('if-none-match')}"
    meta = json.loads((state / "remote.meta").read_text())
    assert meta["fetch"]["etag"] == '"v2"', f"meta records {meta['fetch']} for the v2 body"


@pytest.mark.nx_timeout(60)
def test_hung_list_server_does_not_stop_dns(listserver, make_upstream, make_nxdns):
    srv = listserver
    srv.serve("/h.txt", good_list("h"), etag='"h1"')
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], url_config(srv.url("/h.txt")))
    wait_downloads(nx, "ok", 1)
    # The download is counted before its list is compiled and swapped in: wait for that.
    assert wait_until(lambda: blocked(nx, "h3.refresh.test"), timeout=10)
    # The download now hangs (its timeout is 120 s); DNS answers meanwhile, from the old list.
    srv.hang("/h.txt")
    refresh(nx, srv, "/h.txt", 2)
    t = time.monotonic()
    i = 0
    while time.monotonic() - t < 1.0:
        assert blocked(nx, "h3.refresh.test")
        assert not blocked(nx, f"free{i}.example")
        i += 1
    m = nx.metrics()  # the admin server (same control loop as the fetch) answers too
    assert m.get("nxdns_filter_downloads_total", result="ok") == 1
    assert m.get("nxdns_filter_downloads_total", result="error") == 0
    # A second SIGUSR1 while the round runs is not a second download.
    nx.send_signal(signal.SIGUSR1)
    time.sleep(0.3)
    assert len(srv.requests("/h.txt")) == 2
    assert blocked(nx, "h4.refresh.test")
    # SIGTERM with a download in flight: a prompt, clean exit.
    t = time.monotonic()
    code = nx.stop()
    assert code == 0, f"exit code {code} with a download in flight"
    assert time.monotonic() - t < 5, "shutdown waited for the hung download"


@pytest.mark.nx_timeout(60)
def test_not_modified_rebuilds_nothing_and_restart_maps(listserver, make_upstream, make_nxdns):
    srv = listserver
    srv.serve("/l.txt", good_list("k"), etag='"e1"',
              last_modified="Mon, 30 Nov 2026 07:00:00 GMT")
    up = make_upstream()
    nx1 = start_nx(make_nxdns, [up], url_config(srv.url("/l.txt")), name="first")
    wait_downloads(nx1, "ok", 1)
    # The download is counted before its list is compiled and swapped in: wait for that.
    assert wait_until(lambda: blocked(nx1, "k5.refresh.test"), timeout=10)
    assert "snapshot built" in nx1.log()
    assert nx1.stop() == 0

    # Same state_dir: boot maps the snapshot on disk, then the scheduled round asks with
    # If-None-Match, gets 304, and nothing is rebuilt or remapped.
    cfg = url_config(srv.url("/l.txt"))
    cfg["state_dir"] = str(nx1.workdir / "state")
    nx2 = start_nx(make_nxdns, [up], cfg, name="second")
    assert "mapped snapshot" in nx2.log(), nx2.log()
    assert "snapshot built" not in nx2.log()
    assert blocked(nx2, "k5.refresh.test"), "the mapped snapshot blocks before any download"
    gen = metric(nx2, "nxdns_filter_snapshot_generation")
    wait_downloads(nx2, "not_modified", 1)
    second = srv.requests("/l.txt")[1]
    assert second.headers.get("if-none-match") == '"e1"', second.headers
    assert second.status == 304
    m = nx2.metrics()
    assert m.get("nxdns_filter_downloads_total", result="ok") == 0
    assert m.get("nxdns_filter_snapshot_generation") == gen, "a 304 must not rebuild or remap"
    assert m.get("nxdns_filter_source_errors_total", source="remote") == 0
    assert "snapshot built" not in nx2.log()
    assert blocked(nx2, "k5.refresh.test")


# ---------------------------------------------------------------- first boot

def blocked_by(nx, name: str, source: str) -> bool:
    r = nx.udp(make_query(name, edns=0), timeout=3)
    assert r.rcode() == dns.rcode.NOERROR, f"{name}: {dns.rcode.to_text(r.rcode())}"
    if answers(r) == ["0.0.0.0"]:
        assert ede(r) == [(15, f"blocked by list {source}")], ede(r)
        return True
    assert answers(r) == ["192.0.2.1"], f"{name}: {answers(r)}"
    return False


@pytest.mark.nx_timeout(60)
def test_first_boot_waits_for_the_first_download(listserver, make_upstream, make_nxdns):
    """Nothing on disk: DNS answers only after the download and the load. A query asked
    during the wait gets nothing then (the socket is bound, nobody reads it) and is answered,
    blocked, once the list is in; the admin answers meanwhile and says where the start is."""
    srv = listserver
    srv.serve("/first.txt", good_list("f"), etag='"f1"', held=True)
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], url_config(srv.url("/first.txt")), start=False)
    nx.start(wait=False)
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rs = srv.wait_requests("/first.txt", 1, timeout=20)
        assert len(rs) == 1, "no first download before DNS answers:\n" + nx.log()
        assert "if-none-match" not in rs[0].headers
        # the server holds its answer: the daemon is inside the start's download
        assert nx.http_get("/healthz") == (503, "loading\n")
        m = nx.metrics()
        assert m.get("nxdns_lists_first_load") == 1
        assert m.get("nxdns_lists_first_load_downloads") == 1
        assert wait_log(nx, "first boot: downloading 1 source with no list on disk before "
                        "DNS answers (at most 60 s): remote")
        client.sendto(make_query("f1.refresh.test", edns=0).to_wire(), ("127.0.0.1", nx.port))
        ready, _, _ = select.select([client], [], [], 0.5)
        assert not ready, "an answer during the first download: it cannot be filtered yet"
        assert "serving DNS" not in nx.log()
        srv.proceed()
        nx.wait_ready(30)
        # the datagram waited in the bound socket and is answered after the load, blocked
        client.settimeout(10)
        r = dns.message.from_wire(client.recv(65535))
        assert answers(r) == ["0.0.0.0"], r
        assert ede(r) == [(15, "blocked by list remote")]
    finally:
        client.close()
    assert nx.http_get("/healthz") == (200, "ok\n")
    assert blocked(nx, f"f{N_GOOD - 1}.refresh.test")
    assert not blocked(nx, "free.example")
    m = nx.metrics()
    assert m.get("nxdns_filter_downloads_total", result="ok") == 1
    assert m.get("nxdns_lists_first_load_downloads") == 0
    assert m.get("nxdns_lists_first_boot_unloaded_total", reason="timeout") == 0
    assert m.get("nxdns_lists_first_boot_unloaded_total", reason="download_failed") == 0
    log = nx.log()
    assert "first boot: source remote downloaded" in log
    assert log.index("first boot: 1 of 1 downloads done") < log.index("source remote compiled") \
        < log.index("serving DNS on")
    meta = json.loads((nx.workdir / "state" / "lists" / "remote" / "remote.meta").read_text())
    assert meta["fetch"]["etag"] == '"f1"', "the first download's validator is kept"


@pytest.mark.nx_timeout(90)
def test_first_boot_goes_on_without_failed_and_hung_sources(listserver, make_upstream,
                                                             make_nxdns):
    """One source downloads, one answers 404, one never answers: after
    filter.first_boot_timeout DNS starts with the one that came, the two others reported,
    logged and counted by reason. A second start with that list on disk does not wait on the
    network at all, even with the server hung."""
    srv = listserver
    srv.serve("/good.txt", good_list("g"), etag='"g1"')
    srv.fail("/gone.txt", 404)
    srv.hang("/hung.txt")
    up = make_upstream()
    cfg = {"filter": {"first_boot_timeout": "2s", "sources": [
        {"name": "good", "url": srv.url("/good.txt")},
        {"name": "gone", "url": srv.url("/gone.txt")},
        {"name": "hung", "url": srv.url("/hung.txt")}]},
        "upstream": {"timeout_ms": 1000}}
    nx = start_nx(make_nxdns, [up], cfg, start=False)
    nx.start(wait=False)
    nx.wait_ready(30)
    assert blocked_by(nx, "g1.refresh.test", "good")
    assert not blocked_by(nx, "h1.refresh.test", "hung")
    m = nx.metrics()
    assert m.get("nxdns_lists_first_boot_unloaded_total", reason="timeout") == 1
    assert m.get("nxdns_lists_first_boot_unloaded_total", reason="download_failed") == 1
    assert m.get("nxdns_filter_downloads_total", result="ok") == 1
    assert m.get("nxdns_filter_source_errors_total", source="gone") == 1
    assert m.get("nxdns_filter_source_errors_total", source="hung") == 1
    log = nx.log()
    assert "first boot: source gone: first download failed (http_error)" in log, log
    assert ("first boot: source hung: first download still running after "
            "filter.first_boot_timeout (2 s)") in log, log
    assert "first boot: 2 of 3 sources could not be downloaded" in log
    assert "DNS answers WITHOUT them" in log
    assert log.index("first boot: 2 of 3") < log.index("serving DNS on")
    assert nx.stop() == 0

    # Second start, the good list on disk, the server now hung for it too, no bound to speak
    # of (a wait would outlast start_nx's 20 s): DNS answers from the bodies on disk.
    srv.hang("/good.txt")
    cfg2 = {"filter": {"first_boot_timeout": "600s", "sources": [
        {"name": "good", "url": srv.url("/good.txt")}]},
        "upstream": {"timeout_ms": 1000}, "state_dir": str(nx.workdir / "state")}
    nx2 = start_nx(make_nxdns, [up], cfg2, name="second")
    log2 = nx2.log()
    assert "first boot" not in log2, log2
    assert blocked_by(nx2, "g1.refresh.test", "good")
