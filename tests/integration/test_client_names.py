"""Clients by name in the admin API (issue 12): a client the config names is shown under that
name (`client_name`) in /api/queries rows, in the live stream's events and in the top clients,
and `client=<name>` filters the log to its rows; an address no client claims has
`client_name: null`, and a name no client has answers an empty page.
"""

from adminkit import SSE, logged_in, start_nx, wait_written
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
