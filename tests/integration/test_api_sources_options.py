"""Per-source `hosts_answers` and `subdomains` through /api/filter/sources (issue 13): GET shows
each source's effective values (the loader's defaults when the file says nothing), POST and PUT
take them and write them to the file, the config loader refuses a bad value with the field
named, and DNS follows a `subdomains` edit.
"""

from __future__ import annotations

import dns.rcode
import pytest

from adminkit import assert_error, logged_in, start_nx
from harness import answers, make_query, wait_until


def _a(nx, name):
    r = nx.udp(make_query(name, "A"))
    return r.rcode(), answers(r)


@pytest.mark.nx_timeout(60)
def test_sources_hosts_answers_and_subdomains(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    lst = tmp_path / "ads.txt"
    lst.write_text("ads.options.test\n")
    nx = start_nx(make_nxdns, [up], config={
        "filter": {"sources": [{"name": "ads", "path": str(lst), "format": "domains"}]}})
    api = logged_in(nx)

    (ads,) = api.ok("GET", "/api/filter/sources")["sources"]
    # a path source's default is `listed`; plain entries are exact by default
    assert (ads["hosts_answers"], ads["subdomains"]) == ("listed", False), ads
    assert _a(nx, "x.ads.options.test")[1] != ["0.0.0.0"]

    r = api.put("/api/filter/sources/ads", {"subdomains": True})
    assert r.status == 200, r
    (ads,) = r.json["sources"]
    assert ads["subdomains"] is True, ads
    assert '"subdomains": true' in nx.config_path.read_text()
    ok = wait_until(lambda: _a(nx, "x.ads.options.test") == (dns.rcode.NOERROR, ["0.0.0.0"]),
                    10, 0.1)
    assert ok, "subdomains: true did not block a name under the entry"

    # hosts_answers round-trips through the file; its effect on DNS is the list compile's
    # (test_cli_filter / the filter unit tests), not this route's
    hosts = nx.config_path.parent / "hosts.txt"  # API-added paths live beside the config
    hosts.write_text("192.0.2.7 redirect.options.test\n")
    r = api.post("/api/filter/sources", {"name": "hosts", "path": str(hosts), "format": "hosts",
                                         "hosts_answers": None})
    assert r.status == 201, r
    srcs = {s["name"]: s for s in r.json["sources"]}
    assert srcs["hosts"]["hosts_answers"] == "null", srcs["hosts"]
    assert '"hosts_answers": null' in nx.config_path.read_text()
    r = api.put("/api/filter/sources/hosts", {"hosts_answers": "listed"})
    assert r.status == 200, r
    assert {s["name"]: s for s in r.json["sources"]}["hosts"]["hosts_answers"] == "listed"
    assert '"hosts_answers": "listed"' in nx.config_path.read_text()

    # refusals: the loader's words, the field named; nothing written
    before = nx.config_path.read_text()
    j = assert_error(api.put("/api/filter/sources/hosts", {"hosts_answers": "sometimes"}), 400)
    assert "hosts_answers" in j["message"] and "null, listed" in j["message"], j
    assert_error(api.put("/api/filter/sources/hosts", {"subdomains": "yes"}), 400, "bad_request",
                 "subdomains")
    assert nx.config_path.read_text() == before
