"""Clients by name in the admin API (issue 12): a client the config names is shown under that
name (`client_name`) in /api/queries rows, in the live stream's events and in the top clients,
and `client=<name>` filters the log to its rows; an address no client claims has
`client_name: null`, and a name no client has answers an empty page. Names also come from
PTR lookups through the forward zones (cached, negative answers too; nothing asked for an
address outside the zones).
"""

import time

from adminkit import SSE, logged_in, start_nx, wait_written
from fakeupstream import Rule
from harness import make_query


def test_config_client_name_in_rows_live_top_and_filter(make_upstream, make_nxdns):
    up = make_upstream(default_a="192.0.2.5")
    nx = start_nx(make_nxdns, [up], config={
        "clients": [{"name": "Laptop", "ids": ["127.0.0.0/8"]},
                    {"name": "Lab box", "ids": ["127.0.0.1"]}],  # longer prefix wins
        "filter": {"deny": ["*.blocked.test"]},
    })
    for name in ("a.example", "x.blocked.test"):
        nx.udp(make_query(name))
    nx.udp(make_query("v6.example"), v6=True)  # ::1: no client claims it
    wait_written(nx, 3)
    api = logged_in(nx)

    rows = api.ok("GET", "/api/queries")["items"]
    by = {r["name"]: r for r in rows}
    assert by["a.example"]["client"] == "127.0.0.1"
    assert by["a.example"]["client_name"] == "Lab box", by["a.example"]
    assert by["x.blocked.test"]["client_name"] == "Lab box"
    assert by["v6.example"]["client"] == "::1" and by["v6.example"]["client_name"] is None

    named = api.ok("GET", "/api/queries?client=Lab%20box")["items"]
    assert sorted(r["name"] for r in named) == ["a.example", "x.blocked.test"], named
    assert api.ok("GET", "/api/queries?client=Laptop")["items"] == []  # 127.0.0.1 is Lab box's
    r = api.ok("GET", "/api/queries?client=Nobody")
    assert r == {"items": [], "next_cursor": None}, r
    assert len(api.ok("GET", "/api/queries?client=127.0.0.1")["items"]) == 2

    top = {i["key"]: i for i in api.ok("GET", "/api/stats/top?kind=clients")["items"]}
    assert top["127.0.0.1"]["client_name"] == "Lab box" and top["127.0.0.1"]["count"] == 2
    assert top["::1"]["client_name"] is None

    s = SSE(api).connect()
    try:
        assert s.status == 200, s.error_body
        s.events(0.3)
        nx.udp(make_query("live.example"))
        ev, seen = s.wait_for(lambda d: d.get("name") == "live.example", 5.0)
        assert ev is not None, seen
        assert ev["client_name"] == "Lab box", ev
    finally:
        s.close()


def _zone_nx(make_upstream, make_nxdns, zone_up, zones):
    up = make_upstream(default_a="192.0.2.5")
    return start_nx(make_nxdns, [up], config={
        "upstream": {"forward_zones": {z: [zone_up.addr] for z in zones}}}), up


def _ptr_queries(up, name):
    return [q for q in up.queries(name) if q.qtype == "PTR" or str(q.qtype) in ("12", "PTR")]


def _name_of(api, client, timeout=5.0):
    """The client_name the log shows for client; the first read may start the lookup."""
    end = time.monotonic() + timeout
    while True:
        rows = [r for r in api.ok("GET", "/api/queries")["items"] if r["client"] == client]
        assert rows, client
        if rows[0]["client_name"] is not None or time.monotonic() > end:
            return rows[0]["client_name"]
        time.sleep(0.1)


def test_ptr_name_from_the_forward_zone(make_upstream, make_nxdns):
    """127.0.0.1's reverse name is in the forward zone 127.in-addr.arpa: its PTR is asked there
    (off the DNS path) and shown in rows, top clients and the filter; the answer is cached."""
    router = make_upstream()
    router.script["1.0.0.127.in-addr.arpa"] = Rule(records=[("PTR", "laptop.lan.")], ttl=600)
    nx, _ = _zone_nx(make_upstream, make_nxdns, router, ["127.in-addr.arpa"])
    nx.udp(make_query("a.example"))
    wait_written(nx, 1)
    api = logged_in(nx)
    assert _name_of(api, "127.0.0.1") == "laptop.lan"
    top = {i["key"]: i for i in api.ok("GET", "/api/stats/top?kind=clients")["items"]}
    assert top["127.0.0.1"]["client_name"] == "laptop.lan"
    assert [r["name"] for r in api.ok("GET", "/api/queries?client=laptop.lan")["items"]] == \
        ["a.example"]
    for _ in range(3):
        api.ok("GET", "/api/queries")
    assert len(_ptr_queries(router, "1.0.0.127.in-addr.arpa")) == 1, "cached, asked once"
    assert nx.metrics().get("nxdns_client_names_lookups_total", result="name") == 1


def test_ptr_negative_answer_cached(make_upstream, make_nxdns):
    router = make_upstream()
    router.script["1.0.0.127.in-addr.arpa"] = Rule(rcode="NXDOMAIN")
    nx, _ = _zone_nx(make_upstream, make_nxdns, router, ["127.in-addr.arpa"])
    nx.udp(make_query("b.example"))
    wait_written(nx, 1)
    api = logged_in(nx)
    assert _name_of(api, "127.0.0.1", timeout=1.0) is None
    assert nx.wait_counter("nxdns_client_names_lookups_total", 1, result="none") >= 1
    for _ in range(5):
        rows = api.ok("GET", "/api/queries")["items"]
        assert rows[0]["client_name"] is None
    assert len(_ptr_queries(router, "1.0.0.127.in-addr.arpa")) == 1, "the NXDOMAIN is cached"
    assert api.ok("GET", "/api/queries?client=laptop.lan")["items"] == []


def test_no_lookup_outside_the_zones(make_upstream, make_nxdns):
    """::1 is in no forward zone (only 127.in-addr.arpa is): nothing is asked for it, of the
    zone's server or the default upstream."""
    router = make_upstream()
    nx, default = _zone_nx(make_upstream, make_nxdns, router, ["127.in-addr.arpa"])
    nx.udp(make_query("c.example"), v6=True)
    wait_written(nx, 1)
    api = logged_in(nx)
    for _ in range(3):
        rows = api.ok("GET", "/api/queries")["items"]
        assert rows[0]["client"] == "::1" and rows[0]["client_name"] is None
    time.sleep(0.5)
    assert not [q for q in router.queries() if "arpa" in str(q.qname)], router.queries()
    assert not [q for q in default.queries() if "arpa" in str(q.qname)]
    assert nx.metrics().sum("nxdns_client_names_lookups_total") == 0
