"""The filter's command-line tools (issue 3): `nxdns compile` reports on a file full of
real-world quirks, `nxdns update --offline --json` totals and per-source counts, and
`nxdns lookup` reading names from stdin."""

from __future__ import annotations

import json

from filterkit import lookup_cli, run_cli, start_nx

# Line numbers matter: the report keeps the first line numbers of each skip reason.
QUIRKS = [
    "\ufeff# header comment",              # 1  BOM + comment
    "! adblock comment",                    # 2  comment
    "",                                     # 3  blank
    "0.0.0.0 Ads.Example.COM.",             # 4  hosts, upper case, trailing dot
    "127.0.0.1 localhost",                  # 5  localhost: skipped
    "0.0.0.0 a.test b.test # inline",       # 6  two names + inline comment
    "plain.test # inline comment",          # 7  domain + inline comment
    "||abp.test^",                          # 8  ABP: list + wild
    "||mod.test^$third-party",              # 9  modifier: skipped
    "||path.test/ads",                      # 10 path: skipped
    "/regex/",                              # 11 regex: a side rule
    "@@||ok.abp.test^",                     # 12 exception (sub)
    "*.wild.test",                          # 13 wildcard
    "example.com##.ad",                     # 14 cosmetic: skipped
    "1.2.3.4",                              # 15 bare IP: skipped
    "bad_name!.test",                       # 16 invalid name: skipped
    "b\u00fccher.test",                     # 17 IDN -> punycode
    "PLAIN.test.",                          # 18 duplicate of line 7
    "@@|only.test^",                        # 19 exception (exact)
    "||mod2.test^$important",               # 20 $important: a side rule
    "0.0.0.0 broadcasthost",                # 21 localhost-type: skipped
]


def write_quirks(path):
    path.write_bytes(("\r\n".join(QUIRKS) + "\r\n").encode("utf-8"))


def test_compile_report_json(tmp_path):
    src = tmp_path / "mixed.txt"
    write_quirks(src)
    out = tmp_path / "out"
    out.mkdir()
    p = run_cli(["compile", "--json", str(src), str(out)])
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["name"] == "mixed" and rep["format"] == "auto"
    assert rep["lines"] == len(QUIRKS)
    assert rep["comments"] == 2 and rep["blank"] == 1
    assert rep["counts"] == {"list": 7, "wild": 3, "allow": 2, "allow_sub": 1,
                             "allow_exact": 1, "side": 0}, rep["counts"]
    assert rep["important_as_plain"] == 1
    skipped = {k: (v["count"], v["first_lines"]) for k, v in rep["skipped"].items()}
    assert skipped == {
        "localhost": (2, [5, 21]),
        "modifier": (1, [9]),
        "path": (1, [10]),
        "regex": (1, [11]),
        "cosmetic": (1, [14]),
        "ip_rule": (1, [15]),
        "invalid_name": (1, [16]),
    }, skipped
    assert rep["skipped_total"] == 8
    assert rep["input_bytes"] == src.stat().st_size
    # the bodies: sorted, unique, lower case, no trailing dot, punycode
    lst = (out / "mixed.list").read_text().splitlines()
    assert lst == ["a.test", "abp.test", "ads.example.com", "b.test", "mod2.test", "plain.test",
                   "xn--bcher-kva.test"], lst
    assert (out / "mixed.wild").read_text().splitlines() == ["abp.test", "mod2.test",
                                                             "wild.test"]
    assert (out / "mixed.allow").read_text().splitlines() == ["ok.abp.test\tsub",
                                                              "only.test\texact"]
    meta = json.loads((out / "mixed.meta").read_text())
    assert meta["bodies_sha256"] == rep["bodies_sha256"]
    assert meta["counts"] == rep["counts"]

    # The text report carries the same figures.
    p = run_cli(["compile", str(src), str(out)])
    assert p.returncode == 0, p.stderr
    assert "list 7, wild 3, allow 2" in p.stdout, p.stdout
    assert "skipped 8" in p.stdout


def test_compile_forced_format_counts_mismatch(tmp_path):
    src = tmp_path / "doms.txt"
    src.write_text("one.test\n||two.test^\n0.0.0.0 three.test\n*.four.test\nfive.test\n")
    out = tmp_path / "out"
    out.mkdir()
    p = run_cli(["compile", "--json", "--format", "domains", str(src), str(out)])
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["format"] == "domains"
    assert rep["counts"]["list"] == 2 and rep["counts"]["wild"] == 0, rep["counts"]
    assert rep["skipped"]["format_mismatch"]["count"] == 3, rep["skipped"]
    assert rep["skipped"]["format_mismatch"]["first_lines"] == [2, 3, 4]
    p = run_cli(["compile", "--format", "nosuch", str(src), str(out)])
    assert p.returncode == 2


def test_compile_nul_byte_never_truncates_a_line(tmp_path):
    """A line with a NUL byte is not the name before the NUL: it is skipped, ASCII or not
    (binary junk served as a list must not turn into rules it did not say)."""
    src = tmp_path / "nul.txt"
    src.write_bytes(b"ads.test\x00x\n"
                    b"b\xc3\xbccher.test\x00.example.org\n"
                    b"\xc3\x80\x00\x85\n"
                    b"ok.test\n")
    out = tmp_path / "out"
    out.mkdir()
    p = run_cli(["compile", "--json", str(src), str(out)])
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    lst = (out / "nul.list").read_text().splitlines()
    assert lst == ["ok.test"], f"lines with a NUL byte became rules: {lst}"
    assert rep["skipped_total"] == 3, rep["skipped"]


def test_compile_missing_outdir_is_created_or_named(tmp_path):
    """OUTDIR that does not exist: either it is created, or the error names OUTDIR (not the
    input file, which exists)."""
    src = tmp_path / "l.txt"
    src.write_text("x.test\n")
    out = tmp_path / "no" / "such" / "dir"
    p = run_cli(["compile", str(src), str(out)])
    if p.returncode == 0:
        assert (out / "l.list").read_text().split() == ["x.test"]
    else:
        assert p.returncode == 1
        assert str(out) in p.stderr, \
            f"the error blames the wrong path: {p.stderr.strip()!r} (OUTDIR is {out})"


def update_config(tmp_path, disabled: bool = False) -> str:
    a = tmp_path / "a.txt"
    write_quirks(a)
    b = tmp_path / "b.txt"
    b.write_text("||b1.test^\n||b2.test^\nplain-b.test\nabp.test\n")
    cfg = {"state_dir": str(tmp_path / "state"),
           "filter": {"sources": [{"name": "a", "path": str(a)},
                                  {"name": "b", "path": str(b), "format": "adblock"}]}}
    if disabled:
        cfg["filter"]["sources"].append({"name": "off", "path": str(b), "enabled": False})
    path = tmp_path / "nxdns.yaml"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_update_offline_json(tmp_path):
    cfg = update_config(tmp_path)
    p = run_cli(["update", "--config", cfg, "--offline", "--json"])
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["result"] == "ok"
    srcs = {s["name"]: s for s in doc["sources"]}
    assert set(srcs) == {"a", "b"}
    a, b = srcs["a"], srcs["b"]
    assert (a["status"], a["changed"], a["list"], a["wild"], a["allow"], a["skipped"]) == \
        ("ok", True, 6, 2, 2, 7), a
    assert (b["status"], b["changed"], b["list"], b["wild"], b["allow"], b["skipped"]) == \
        ("ok", True, 4, 2, 0, 0), b
    snap = doc["snapshot"]
    # a: 6 list names (abp.test also wild: one entry) + wild.test + 2 exceptions = 9 (the
    # regex and the $important rule are side rules, outside the snapshot);
    # b: 4 names (b1, b2 in both bodies); abp.test is in both sources: sources never merge
    assert snap["entries"] == 9 + 4, snap
    assert snap["rebuilt"] is True
    assert isinstance(snap["build_ms"], int) and snap["build_ms"] >= 0
    assert snap["bytes"] > 0
    snap_file = tmp_path / "state" / "snapshot.nxs"
    assert snap_file.stat().st_size == snap["bytes"]
    for name in ("a", "b"):
        d = tmp_path / "state" / "lists" / name
        assert (d / f"{name}.meta").exists() and (d / f"{name}.list").exists()

    # Again, nothing changed: no rebuild, and the same counts are reported.
    p = run_cli(["update", "--config", cfg, "--offline", "--json"])
    assert p.returncode == 0, p.stderr
    doc2 = json.loads(p.stdout)
    assert doc2["snapshot"]["rebuilt"] is False
    assert doc2["snapshot"]["entries"] == snap["entries"]
    assert doc2["snapshot"]["bytes"] == snap["bytes"]
    for s in doc2["sources"]:
        s1 = srcs[s["name"]]
        assert s["changed"] is False
        for k in ("status", "list", "wild", "allow", "skipped"):
            assert s[k] == s1[k], \
                f"source {s['name']}: {k} is {s[k]} on an unchanged update, {s1[k]} before"

    # The text form.
    p = run_cli(["update", "--config", cfg, "--offline"])
    assert p.returncode == 0, p.stderr
    assert "snapshot: 13 entries" in p.stdout and "(unchanged)" in p.stdout, p.stdout


def test_update_with_a_disabled_source_does_not_rebuild_twice(tmp_path):
    """A disabled source is an empty slot in the snapshot; an update that changes nothing
    must still find the snapshot current (and so must a daemon's boot)."""
    cfg = update_config(tmp_path, disabled=True)
    p = run_cli(["update", "--config", cfg, "--offline", "--json"])
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert {s["name"]: s["enabled"] for s in doc["sources"]} == \
        {"a": True, "b": True, "off": False}
    assert doc["snapshot"]["rebuilt"] is True and doc["snapshot"]["entries"] == 13
    p = run_cli(["update", "--config", cfg, "--offline", "--json"])
    assert p.returncode == 0, p.stderr
    doc2 = json.loads(p.stdout)
    assert doc2["snapshot"]["rebuilt"] is False, \
        "nothing changed, but the snapshot was rebuilt (the disabled source's slot)"


def test_update_reports_a_missing_path_source(tmp_path):
    cfg = {"state_dir": str(tmp_path / "state"),
           "filter": {"sources": [{"name": "gone", "path": str(tmp_path / "nope.txt")}]}}
    path = tmp_path / "nxdns.yaml"
    path.write_text(json.dumps(cfg))
    p = run_cli(["update", "--config", str(path), "--offline", "--json"])
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    doc = json.loads(p.stdout)
    (s,) = doc["sources"]
    assert s["status"] == "error" and s["error"], s


def test_lookup_stdin_and_client(tmp_path, make_upstream, make_nxdns):
    # `nxdns lookup` decides on a running daemon's state: start one on the same sources
    sources = json.loads(open(update_config(tmp_path)).read())["filter"]["sources"]
    nx = start_nx(make_nxdns, [make_upstream()], {"filter": {"sources": sources}})
    cfg = str(nx.config_path)
    names = ["ads.example.com", "x.abp.test", "ok.abp.test", "abp.test", "nothing.test",
             "xn--bcher-kva.test",
             "sub.wild.test", "wild.test", "only.test", "a.only.test"]
    rows = lookup_cli(cfg, names, stdin=True)
    got = [(r["name"], r["action"], r["reason"], r["matched"], r["source"]) for r in rows]
    assert got == [
        ("ads.example.com", "block", "blocklist_domain", "ads.example.com", "a"),
        ("x.abp.test", "block", "blocklist_wildcard", "abp.test", "a"),
        ("ok.abp.test", "allow", "blocklist_exception", "ok.abp.test", "a"),
        ("abp.test", "block", "blocklist_domain", "abp.test", "a"),
        ("nothing.test", "allow", "none", "", ""),
        ("xn--bcher-kva.test", "block", "blocklist_domain", "xn--bcher-kva.test", "a"),
        ("sub.wild.test", "block", "blocklist_wildcard", "wild.test", "a"),
        ("wild.test", "allow", "none", "", ""),
        ("only.test", "allow", "blocklist_exception", "only.test", "a"),
        ("a.only.test", "allow", "none", "", ""),
    ], got
    # the same names as arguments give the same lines
    assert lookup_cli(cfg, names) == rows
    # an invalid name: an error line, exit 1, the other names still answered
    p = run_cli(["lookup", "--config", cfg, "-"], stdin="b1.test\nbad..name\nplain-b.test\n")
    assert p.returncode == 1
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [x["action"] for x in lines] == ["block", "error", "block"], lines
    assert lines[0]["source"] == "b"


def test_lookup_without_a_daemon_says_so(tmp_path):
    """No daemon runs this config: `nxdns lookup` says it cannot read the daemon's state and
    exits 1, from any working directory (it never reads a ./var of its own)."""
    cfg = update_config(tmp_path)
    for cwd in (tmp_path, "/"):
        p = run_cli(["lookup", "--config", cfg, "ads.example.com"], cwd=cwd)
        assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
        assert p.stdout == ""
        assert "cannot read the daemon's pause state" in p.stderr, p.stderr
        assert "control.sock" in p.stderr and "is nxdns running" in p.stderr, p.stderr
    assert not (tmp_path / "var").exists() and not (tmp_path / "state").exists()


def test_lookup_refuses_a_snapshot_of_other_sources(tmp_path, make_upstream, make_nxdns):
    """The config lists sources the running daemon did not build (edited, not reloaded): the
    snapshot's source indexes would mean other lists, so lookup refuses instead of guessing."""
    sources = json.loads(open(update_config(tmp_path)).read())["filter"]["sources"]
    nx = start_nx(make_nxdns, [make_upstream()], {"filter": {"sources": sources}})
    cfg = json.loads(nx.config_path.read_text())
    cfg["filter"]["sources"] = list(reversed(cfg["filter"]["sources"]))
    other = tmp_path / "edited.yaml"
    other.write_text(json.dumps(cfg))
    p = run_cli(["lookup", "--config", str(other), "ads.example.com"])
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "was built for other sources" in p.stderr, p.stderr


def test_lookup_never_decides_on_a_stray_relative_state_dir(tmp_path):
    """state_dir: ./var with compiled lists there but no daemon running: lookup refuses (it
    used to answer from that snapshot, which need not be any daemon's), and says the relative
    state_dir was looked for in the working directory."""
    cfg = json.loads(open(update_config(tmp_path)).read())
    cfg["state_dir"] = "./var"
    path = tmp_path / "rel.yaml"
    path.write_text(json.dumps(cfg))
    p = run_cli(["update", "--config", str(path), "--offline"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "var" / "snapshot.nxs").exists()
    p = run_cli(["lookup", "--config", str(path), "ads.example.com"], cwd=tmp_path)
    assert p.returncode == 1 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert "state_dir is relative, so it was looked for in " + str(tmp_path) in p.stderr, \
        p.stderr


def test_compile_side_writes_the_rules_the_bodies_cannot_hold(tmp_path):
    """`nxdns compile --side`: /regex/ and $important leave the bodies for <name>.side; what
    the side parser refuses ($third-party, a real URL path) stays skipped by its reason."""
    src = tmp_path / "mixed.txt"
    write_quirks(src)
    out = tmp_path / "out"
    out.mkdir()
    p = run_cli(["compile", "--json", "--side", str(src), str(out)])
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["counts"]["side"] == 2, rep["counts"]
    assert (out / "mixed.side").read_text().splitlines() == ["/regex/",
                                                             "||mod2.test^$important"]
    assert rep["important_as_plain"] == 0
    skipped = {k: v["count"] for k, v in rep["skipped"].items()}
    assert skipped["modifier"] == 1 and skipped["path"] == 1 and "regex" not in skipped
    assert "mod2.test" not in (out / "mixed.list").read_text().splitlines()
    assert json.loads((out / "mixed.meta").read_text())["options"] == {
        "side": True, "hosts_listed": False, "subdomains": False}
    # without side rules there is no .side, and a stale one goes away
    plain = tmp_path / "plain.txt"
    plain.write_text("ads.test\n")
    (out / "plain.side").write_text("stale\n")
    p = run_cli(["compile", "--json", "--side", str(plain), str(out)])
    assert p.returncode == 0, p.stderr
    assert not (out / "plain.side").exists()
