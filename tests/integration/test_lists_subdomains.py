"""Per-source `subdomains` over DNS (issue 13): a plain-domain list read as Blocky reads it (the
name and everything under it) when the source says so, as Pi-hole reads it (the name only)
otherwise; flipping the key and reloading recompiles the same input with the new reading. The
default upstream answers 192.0.2.1 for everything, so "allow" is that answer and "block" the
null answer."""

from __future__ import annotations

import copy

from filterkit import rewrite_config, run_cli, start_nx, wait_reloads
from harness import answers, make_query

LIST = "ads.example\n0.0.0.0 tracker.example\n"


def verdict(nx, name):
    a = answers(nx.udp(make_query(name, "A", edns=0)))
    return "block" if a == ["0.0.0.0"] else "allow" if a == ["192.0.2.1"] else f"other {a}"


def config(path, subdomains=None):
    src = {"name": "doms", "path": str(path), "format": "auto"}
    if subdomains is not None:
        src["subdomains"] = subdomains
    return {"filter": {"sources": [src]}}


def flip(nx, subdomains):
    """The running config (the harness's base included) with only `subdomains` changed."""
    cfg = copy.deepcopy(nx.config)
    cfg["filter"]["sources"][0]["subdomains"] = subdomains
    rewrite_config(nx, cfg)
    nx.reload()


def test_subdomains_true_covers_every_name_under_an_entry(make_upstream, make_nxdns, tmp_path):
    lst = tmp_path / "doms.txt"
    lst.write_text(LIST)
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], config(lst, True))
    for name in ("ads.example", "x.ads.example", "a.b.ads.example", "tracker.example",
                 "cdn.tracker.example"):
        assert verdict(nx, name) == "block", name
    for name in ("notads.example", "ads.example.org"):
        assert verdict(nx, name) == "allow", name
    # the entries' parent is not covered either; as a single-label name it is answered by the
    # special-use level (special.domain_needed), never by the list
    assert verdict(nx, "example") == "other []", "example"


def test_subdomains_default_is_exact_and_a_flip_recompiles(make_upstream, make_nxdns, tmp_path):
    lst = tmp_path / "doms.txt"
    lst.write_text(LIST)
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], config(lst))
    assert verdict(nx, "ads.example") == "block"
    assert verdict(nx, "x.ads.example") == "allow", "plain entries are exact by default"
    # same list bytes, new reading: the reload must recompile, not keep the old bodies
    flip(nx, True)
    wait_reloads(nx, 1)
    assert verdict(nx, "x.ads.example") == "block"
    assert verdict(nx, "ads.example") == "block"
    flip(nx, False)
    wait_reloads(nx, 2)
    assert verdict(nx, "x.ads.example") == "allow"
    assert verdict(nx, "ads.example") == "block"


def test_bad_subdomains_value_fails_the_config(make_upstream, make_nxdns, tmp_path):
    lst = tmp_path / "doms.txt"
    lst.write_text(LIST)
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], config(lst, "yes"), start=False)
    r = run_cli(["check-config", str(nx.config_path)])
    assert r.returncode != 0
    assert "filter.sources[0].subdomains: expected true or false" in r.stderr + r.stdout
