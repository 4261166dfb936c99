"""What the web admin costs the daemon's memory (issue 12: "the daemon's RSS grows by <= 1 MiB
with the UI embedded and a live stream open"): a daemon that has answered DNS and the API for
a while is measured (VmRSS, RssAnon, RssFile), then a browser's worth of requests fetches the
page and every asset (gzip and identity), the dashboard's reads run, a live stream is opened
and read while a light query load (20 queries/s for 10 s, some blocked) flows through it;
then the same figures again. The growth must stay within 1 MiB. The test prints the figures
(docs/benchmarks.md quotes them). A build without the UI (-Dui=disabled, no Node.js) skips it.
"""

from __future__ import annotations

import re
import time

import pytest

from adminkit import SSE, logged_in, start_nx, wait_written
from filterkit import proc_status, sanitized_binary
from harness import make_query

MiB = 1024 * 1024
BOUND = 1 * MiB
RATE, SECONDS = 20, 10


def _assets(api):
    """The page and every file it names (scripts, styles, icons) as the browser asks them."""
    r = api.get("/", headers={"Accept-Encoding": "gzip"})
    if r.status == 404 and b"ui_not_built" in r.body:
        pytest.skip("this nxdns was built without the web admin (-Dui=disabled)")
    assert r.status == 200, r
    html = api.get("/").body.decode()
    paths = sorted(set(re.findall(r'(?:src|href)="(/[^"]+)"', html)))
    assert paths, html[:500]
    got = 0
    for p in paths:
        for enc in ("gzip", None):
            a = api.get(p, headers={"Accept-Encoding": enc})
            assert a.status == 200, (p, a.status)
            got += len(a.body)
    return paths, got


def _owner(nx, name):
    return nx.metrics().get("nxdns_memory_owner_bytes", owner=name) or 0


@pytest.mark.skipif(sanitized_binary(), reason="ASan's allocator: RSS is not glibc's heap")
def test_ui_and_live_stream_grow_rss_by_at_most_1_mib(make_upstream, make_nxdns):
    up = make_upstream(default_a="192.0.2.7")
    nx = start_nx(make_nxdns, [up], config={"filter": {"deny": ["*.blocked.test"]}})
    api = logged_in(nx)
    # the daemon at work before the UI: DNS, the query log's first transactions, API reads
    for i in range(200):
        nx.udp(make_query(f"warm{i}.example" if i % 4 else f"w{i}.blocked.test"))
    wait_written(nx, 200)
    for path in ("/api/stats/summary", "/api/stats/top?kind=domains", "/api/queries?limit=50",
                 "/api/memory"):
        api.ok("GET", path)
    time.sleep(1.0)
    s0 = proc_status(nx.pid)
    rings0 = _owner(nx, "sse_rings")

    paths, body_bytes = _assets(api)
    for path in ("/api/stats/summary", "/api/stats/history?step=1800",
                 "/api/stats/top?kind=domains", "/api/stats/top?kind=blocked",
                 "/api/stats/top?kind=clients", "/api/queries?limit=100", "/api/memory"):
        api.ok("GET", path)
    s = SSE(api).connect()
    try:
        assert s.status == 200, s.error_body
        seen = 0
        t_end = time.monotonic() + SECONDS
        i = 0
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            for _ in range(RATE // 10):
                name = f"live{i}.blocked.test" if i % 5 == 0 else f"live{i}.example"
                nx.udp(make_query(name))
                i += 1
            seen += sum(1 for e in s.events(0.05) if e.get("data"))
            time.sleep(max(0.0, 0.1 - (time.monotonic() - t0)))
        seen += sum(1 for e in s.events(1.0) if e.get("data"))
        s1 = proc_status(nx.pid)
        rings1 = _owner(nx, "sse_rings")
    finally:
        s.close()
    grow = s1["VmRSS"] - s0["VmRSS"]
    print(f"UI: {len(paths)} files, {body_bytes} B served (gzip and identity); live stream: "
          f"{seen} events of {i} queries at {RATE}/s for {SECONDS} s")
    print(f"VmRSS {s0['VmRSS'] / MiB:.2f} -> {s1['VmRSS'] / MiB:.2f} MiB "
          f"(+{grow / 1024:.0f} KiB): RssAnon +{(s1['RssAnon'] - s0['RssAnon']) / 1024:.0f} KiB, "
          f"RssFile +{(s1['RssFile'] - s0['RssFile']) / 1024:.0f} KiB; ledger sse_rings "
          f"{rings0 / 1024:.0f} -> {rings1 / 1024:.0f} KiB")
    assert seen >= 0.9 * i, f"the stream carried {seen} of {i} queries"
    assert rings1 > rings0, "the open stream's ring is charged to sse_rings"
    assert grow <= BOUND, f"VmRSS grew by {grow / 1024:.0f} KiB (bound {BOUND // 1024} KiB)"
