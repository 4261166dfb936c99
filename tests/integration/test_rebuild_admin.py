"""A list rebuild runs on the control loop, which also serves the admin HTTP side (issue 4):
while a big list compiles and its snapshot builds, /metrics and /healthz keep answering (the
build's progress hook serves them), scrapes show nxdns_lists_rebuilding 1 and the transient
filter_build ledger owner, and DNS keeps answering on the workers. Before the hook, a forced
rebuild left /metrics unanswered for its whole length (about 5 s with all the shared lists).
Changes during a rebuild answer 503 (tests/unit/admin/test_api.c busy_refuses_changes)."""

from __future__ import annotations

import signal
import time

import pytest

from filterkit import start_nx
from harness import answers, make_query, wait_until

NAMES = 1_000_000  # about a second of compile and build here; longer under ASan


@pytest.mark.nx_timeout(150)
def test_metrics_answer_during_a_rebuild(make_upstream, make_nxdns, tmp_path):
    lst = tmp_path / "big.txt"
    with open(lst, "w") as f:
        f.writelines(f"n{i}.rebuild.test\n" for i in range(NAMES))
    up = make_upstream(default_a="192.0.2.5")
    nx = start_nx(make_nxdns, [up], {
        "filter": {"sources": [{"name": "big", "path": str(lst), "format": "domains"}]},
    })
    m0 = nx.metrics()
    gen = m0.get("nxdns_filter_snapshot_generation")
    assert "\nnxdns_lists_rebuilding 0\n" in m0.text
    assert nx.log().count("source big compiled") == 1  # at boot

    nx.send_signal(signal.SIGUSR1)  # recompile every source, rebuild the snapshot
    during, in_build, healthz, build_bytes = 0, 0, False, 0.0
    t_end = time.monotonic() + 90
    while time.monotonic() < t_end:
        m = nx.metrics()  # asserts 200
        if m.get("nxdns_filter_snapshot_generation") == gen + 1:
            break
        if m.get("nxdns_lists_rebuilding") == 1:
            during += 1
            build_bytes = max(build_bytes,
                              m.get("nxdns_memory_owner_bytes", owner="filter_build"))
            # the compile is logged when it ends: after that, the snapshot build runs
            in_build += nx.log().count("source big compiled") >= 2
            if not healthz:
                code, body = nx.http_get("/healthz")
                assert code == 200, body
                healthz = True
        time.sleep(0.002)
    assert wait_until(lambda: nx.metrics().get("nxdns_filter_snapshot_generation") == gen + 1,
                      30), "SIGUSR1 did not rebuild the snapshot"
    print(f"scrapes during the rebuild: {during} ({in_build} in the snapshot build), "
          f"filter_build peak seen {build_bytes:.0f} B")
    assert during >= 3, f"only {during} scrapes were answered while the lists rebuilt"
    assert in_build >= 1, "no scrape was answered while the snapshot built"
    assert build_bytes > 0, "the rebuild's filter_build owner never showed in a scrape"
    assert nx.metrics().get("nxdns_lists_rebuilding") == 0
    # the rebuilt snapshot decides as before
    assert answers(nx.udp(make_query("n123.rebuild.test"))) == ["0.0.0.0"]
    assert answers(nx.udp(make_query("other.example"))) == ["192.0.2.5"]


@pytest.mark.nx_timeout(150)
def test_refresh_button_returns_before_its_rebuild(make_upstream, make_nxdns, tmp_path):
    """POST /api/filter/sources/refresh with a changed local list answers 202 at once; the
    rebuild runs on a loop turn of its own, so scrapes answer during it and a change meanwhile
    answers 503 busy with Retry-After."""
    from adminkit import logged_in, start_nx as start_admin_nx

    lst = tmp_path / "big.txt"
    with open(lst, "w") as f:
        f.writelines(f"n{i}.rebuild.test\n" for i in range(NAMES))
    up = make_upstream(default_a="192.0.2.5")
    nx = start_admin_nx(make_nxdns, [up], config={
        "filter": {"sources": [{"name": "big", "path": str(lst), "format": "domains"}]},
    })
    api = logged_in(nx)
    gen = nx.metrics().get("nxdns_filter_snapshot_generation")
    with open(lst, "a") as f:
        f.write("added.rebuild.test\n")

    r = api.post("/api/filter/sources/refresh")
    assert r.status == 202, r
    during, busy = 0, None
    t_end = time.monotonic() + 90
    while time.monotonic() < t_end:
        m = nx.metrics()
        if m.get("nxdns_filter_snapshot_generation") == gen + 1:
            break
        if m.get("nxdns_lists_rebuilding") == 1:
            during += 1
            if busy is None:
                p = api.post("/api/filter/pause", {"seconds": 60})
                if p.status == 503:
                    busy = p
        time.sleep(0.002)
    assert wait_until(lambda: nx.metrics().get("nxdns_filter_snapshot_generation") == gen + 1,
                      30), "the refresh did not rebuild the snapshot"
    assert during >= 3, f"only {during} scrapes were answered while the refresh rebuilt"
    assert busy is not None, "no change was refused while the lists rebuilt"
    assert busy.json["error"] == "busy", busy
    assert busy.headers.get("retry-after") == "1", busy.headers
    assert answers(nx.udp(make_query("added.rebuild.test"))) == ["0.0.0.0"]
    assert api.post("/api/filter/pause", {"seconds": 60}).status == 200
