"""The live query stream, GET /api/queries/live (issue 5), against the running daemon: an SSE
client receives the records of queries sent after it subscribed; logging.live_max_subscribers
caps the subscribers with a distinct 429 too_many_subscribers (a freed slot is reusable, 0
turns the stream off); a subscriber that does not read (small SO_RCVBUF) while a burst flows is
cut off and counted nxdns_sse_dropped_total{reason="slow_subscriber"}, while one that reads
keeps its stream.
"""

from __future__ import annotations

import threading
import time

import pytest

from adminkit import (SSE, Api, logged_in, start_nx, udp_burst, wait_pushed_and_written,
                      wait_written)
from harness import make_query, wait_until


def _nx(make_nxdns, up, **over):
    cfg = {"filter": {"deny": ["*.blocked.test", "*.slow.test"]},
           "local_records": [{"name": "nas.lan", "type": "A", "value": "192.168.1.10"}]}
    cfg.update(over)
    return start_nx(make_nxdns, [up], config=cfg)


def _subs(nx):
    return nx.metrics().get("nxdns_sse_subscribers")


def _wait_released(nx, want: int, timeout: float = 10.0) -> bool:
    """A subscriber that closed while its stream was idle is noticed when the server next
    writes to it (a record, or the 15 s keepalive): keep records flowing until it is."""
    def poll():
        nx.udp(make_query("wake.blocked.test"))
        time.sleep(0.1)
        return _subs(nx) == want
    return bool(wait_until(poll, timeout, 0.1))


def test_subscriber_receives_records_sent_after_subscribing(make_upstream, make_nxdns):
    up = make_upstream(default_a="192.0.2.9")
    nx = _nx(make_nxdns, up)
    api = logged_in(nx)
    nx.udp(make_query("before.example"))
    wait_written(nx, 1)

    anon = SSE(Api(nx)).connect()
    assert anon.status == 401 and anon.error_json["error"] == "unauthorized"
    anon.close()

    s = SSE(api).connect()
    try:
        assert s.status == 200, s.error_body
        assert s.headers["content-type"].startswith("text/event-stream"), s.headers
        assert s.headers.get("cache-control") == "no-store"
        assert s.headers.get("transfer-encoding") == "chunked"
        first = s.events(1.0)
        assert first and first[0].get("retry") == "3000", first
        assert wait_until(lambda: _subs(nx) == 1, 3)

        nx.udp(make_query("x.blocked.test"))
        nx.udp(make_query("fwd.example"))
        nx.tcp(make_query("nas.lan"))
        got = {}
        end = time.monotonic() + 5
        while len(got) < 3 and time.monotonic() < end:
            for ev in s.events(0.3):
                if "data" in ev:
                    got[ev["data"]["name"]] = ev["data"]
        assert set(got) == {"x.blocked.test", "fwd.example", "nas.lan"}, got
        b = got["x.blocked.test"]
        assert (b["action"], b["reason"], b["matched"], b["source"], b["client"], b["proto"],
                b["qtype"]) == ("block", "user_deny", "blocked.test", "*.blocked.test",
                                "127.0.0.1", "udp", "A"), b
        f = got["fwd.example"]
        assert (f["action"], f["reason"], f["cached"], f["rcode"]) == \
            ("none", "none", False, "NOERROR"), f
        assert "192.0.2.9" in f["answer"] and f["upstream"], f
        loc = got["nas.lan"]
        assert (loc["action"], loc["reason"], loc["proto"]) == ("local", "local_record", "tcp")
        assert "before.example" not in got, "the stream is live: no history"
    finally:
        s.close()
    assert _wait_released(nx, 0), "the closed subscriber was not released"


def test_live_record_matches_query_log_record(make_upstream, make_nxdns):
    """The stream and /api/queries render the same record the same way (here: the upstream
    used, which the query log stores by server name)."""
    up = make_upstream()
    nx = _nx(make_nxdns, up)
    api = logged_in(nx)
    s = SSE(api).connect()
    try:
        assert s.status == 200
        nx.udp(make_query("same.example"))
        ev, seen = s.wait_for(lambda d: d["name"] == "same.example", 5)
        assert ev, seen
    finally:
        s.close()
    wait_pushed_and_written(nx)
    (item,) = api.ok("GET", "/api/queries?name=same.example")["items"]
    assert item["upstream"] == up.addr
    for k in ("name", "client", "proto", "qtype", "rcode", "action", "reason", "matched",
              "source", "answer", "cached", "ts"):
        assert ev[k] == item[k], (k, ev[k], item[k])
    assert ev["upstream"] == item["upstream"], \
        f"live stream upstream {ev['upstream']!r}, query log {item['upstream']!r}"


def test_privacy_applies_to_the_stream(make_upstream, make_nxdns):
    up = make_upstream()
    nx = _nx(make_nxdns, up, logging={"privacy": 2})
    api = logged_in(nx)
    s = SSE(api).connect()
    try:
        assert s.status == 200
        nx.udp(make_query("secret.blocked.test"))
        ev, seen = s.wait_for(lambda d: True, 5)
        assert ev, seen
        assert ev["name"] == "hidden" and ev["client"] == "hidden" and ev["matched"] == "hidden"
        assert "secret" not in repr(seen)
    finally:
        s.close()


def test_too_many_subscribers_is_distinct_and_slots_are_reusable(make_upstream, make_nxdns):
    up = make_upstream()
    nx = _nx(make_nxdns, up, logging={"live_max_subscribers": 2})
    api = logged_in(nx)
    a = SSE(api).connect()
    b = SSE(api).connect()
    try:
        assert (a.status, b.status) == (200, 200)
        c = SSE(api).connect()
        assert c.status == 429, (c.status, c.error_body)
        assert c.error_json["error"] == "too_many_subscribers", c.error_json
        assert int(c.headers["retry-after"]) >= 1
        c.close()
        m = nx.metrics()
        assert m.get("nxdns_sse_dropped_total", reason="too_many_subscribers") == 1
        assert m.get("nxdns_sse_subscribers") == 2 and m.get("nxdns_sse_subscribers_peak") == 2

        # the first two still stream
        nx.udp(make_query("both.blocked.test"))
        for s in (a, b):
            ev, seen = s.wait_for(lambda d: d["name"] == "both.blocked.test", 5)
            assert ev, seen

        # a slot freed is a slot again
        a.close()
        assert _wait_released(nx, 1), "closed subscriber not released"
        d = SSE(api).connect()
        assert d.status == 200
        d.close()
    finally:
        a.close()
        b.close()

    # 0 subscribers allowed: the stream is off, with its own answer
    assert api.put("/api/settings", {"key": "logging.live_max_subscribers", "value": 0}).status \
        == 200
    e = SSE(api).connect()
    assert e.status == 503 and e.error_json["error"] == "live_disabled", e.error_body
    e.close()


class _Reader(threading.Thread):
    """Reads a stream as fast as it can, counting events, until stop."""

    def __init__(self, s: SSE):
        super().__init__(daemon=True)
        self.s = s
        self.names = set()
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set() and not self.s.eof:
            for ev in self.s.events(0.1):
                if "data" in ev:
                    self.names.add(ev["data"]["name"])


@pytest.mark.nx_timeout(60)
def test_slow_subscriber_is_cut_off_and_counted(make_upstream, make_nxdns):
    up = make_upstream()
    nx = _nx(make_nxdns, up)
    api = logged_in(nx)
    slow = SSE(api, rcvbuf=2048).connect()
    fast = SSE(api).connect()
    reader = _Reader(fast)
    try:
        assert slow.status == 200 and fast.status == 200
        reader.start()
        assert wait_until(lambda: _subs(nx) == 2, 3)
        # ~3000 records of ~300 bytes: far beyond the 64 KiB ring plus the socket buffers of
        # a client that never reads
        names = [f"n{i}.slow.test" for i in range(3000)]
        answered, worst = udp_burst(nx.port, names, window=32, timeout=20)
        assert answered == len(names), f"DNS answered {answered} of {len(names)}"
        cut = wait_until(lambda: nx.metrics().get("nxdns_sse_dropped_total",
                                                  reason="slow_subscriber") >= 1, 10)
        if not cut:
            m = nx.metrics()
            to_hub = len(names) - m.get("nxdns_sse_dropped_total", reason="handoff_full")
            pytest.fail(f"the subscriber that does not read was not cut off: {to_hub:.0f} "
                        f"records (~{to_hub * 300 / 1024:.0f} KiB) reached the hub for it, "
                        f"its ring is 64 KiB, it read none")
        m = nx.metrics()
        assert m.get("nxdns_sse_dropped_total", reason="slow_subscriber") == 1, \
            "only the slow subscriber is cut off"
        assert wait_until(lambda: _subs(nx) == 1, 5)
        # the server ends the slow stream: reading now drains what was buffered, then EOF
        assert slow.wait_closed(15), "the cut-off connection was not closed"
        # the reading subscriber kept its stream and got the burst (bar hub handoff drops)
        wait_pushed_and_written(nx, timeout=15, allow_drops=True)
        nx.udp(make_query("final.blocked.test"))
        assert wait_until(lambda: "final.blocked.test" in reader.names, 5), \
            "the subscriber that reads lost its stream"
        # every record either reached the reader or was dropped and counted on the way: by the
        # query-log rings (drop oldest) before the tap, or at the hub's handoff
        m = nx.metrics()
        lost = (m.get("nxdns_sse_dropped_total", reason="handoff_full") +
                m.get("nxdns_querylog_dropped_total", reason="oldest"))
        assert len(reader.names & set(names)) + lost >= len(names), \
            (len(reader.names & set(names)), lost)
    finally:
        reader.stop.set()
        reader.join(5)
        slow.close()
        fast.close()
