"""The DoH client id in the query log: kdig asks over /dns-query/phone; the row carries
client_id "phone" in /api/queries (and its filter), both for a forwarded answer (the waiter's
copy of the id) and an immediate one (blocked); a plain query carries none."""

from adminkit import logged_in, start_nx, wait_written
from fakeupstream import Rule
from harness import free_port, make_query, run


def test_doh_client_id_logged(make_nxdns, upstream):
    upstream.script["cid.example"] = Rule(records=[("A", "192.0.2.77")])
    upstream.script["plain.example"] = Rule(records=[("A", "192.0.2.78")])
    doh = free_port(v6=False, udp=False)
    nx = start_nx(make_nxdns, [upstream], config={
        "listener": {"doh": [f"127.0.0.1:{doh}"]},
        "clients": [{"name": "Phone", "ids": ["id:phone"]}],
        "filter": {"deny": ["blocked.example"]},
    })
    out = run(["kdig", "@127.0.0.1", "-p", str(doh), "+https=/dns-query/phone", "+timeout=3",
               "+retry=0", "cid.example", "A"])
    assert "192.0.2.77" in out.stdout, out.stdout + out.stderr
    out = run(["kdig", "@127.0.0.1", "-p", str(doh), "+https=/dns-query/phone", "+timeout=3",
               "+retry=0", "blocked.example", "A"])
    assert "0.0.0.0" in out.stdout, out.stdout + out.stderr
    nx.udp(make_query("plain.example"))
    wait_written(nx, 3)
    api = logged_in(nx)
    rows = api.ok("GET", "/api/queries?client_id=phone")["items"]
    assert [r["name"] for r in rows] == ["blocked.example", "cid.example"], rows
    assert all(r["proto"] == "doh" and r["client_id"] == "phone" for r in rows), rows
    assert rows[0]["action"] == "block"
    plain = api.ok("GET", "/api/queries?name=plain.example")["items"]
    assert len(plain) == 1 and plain[0]["client_id"] == "" and plain[0]["proto"] == "udp"
    assert api.ok("GET", "/api/queries?client_id=tablet")["items"] == []
