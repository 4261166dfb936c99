"""GET/PUT /api/settings (issue 5) against the running daemon: a change is written into the YAML
file (comments and every other byte kept, the previous file kept as .bak) and applied by a
reload (nxdns_config_generation + the change's effect on DNS); a refused change answers 400
with the field and leaves the file byte-identical.
"""

from __future__ import annotations

import difflib

from adminkit import (assert_error, logged_in, qlog_rows, start_nx, wait_pushed_and_written,
                      yaml_text)
from harness import answers, make_query, wait_until

HEADER = "# nxdns for the settings test\n# this comment must survive every API edit\n\n"


def _commented(nx):
    """The daemon's config with comment lines and an end-of-line comment."""
    text = HEADER + yaml_text(nx.config)
    text = text.replace("upstream:\n", "# where queries go\nupstream:\n", 1)
    text = text.replace("  timeout_ms: 2000\n", "  timeout_ms: 2000  # per query, ms\n", 1)
    assert "# per query, ms" in text
    nx.write_config_text(text)
    return text


def _gen(nx):
    return nx.metrics().get("nxdns_config_generation")


def test_put_rewrites_file_keeps_comments_and_reloads(make_upstream, make_nxdns):
    up1 = make_upstream(default_a="192.0.2.1")
    up2 = make_upstream(default_a="192.0.2.2")
    nx = start_nx(make_nxdns, [up1], start=False)
    text0 = _commented(nx)
    nx.start()
    api = logged_in(nx)
    s = api.ok("GET", "/api/settings")["settings"]
    assert s["upstream.timeout_ms"] == 2000 and s["upstream.servers"] == [up1.addr], s
    assert s["logging.privacy"] == 0 and s["cache.size"] == 0 and s["log.level"] == "debug"
    for key in ("access.allow", "filter.enabled", "logging.retention_days",
                "logging.live_max_subscribers"):
        assert key in s
    # of admin.* only the HTTPS switch; never the password, tokens, TOTP secret or sessions
    assert [k for k in s if k.startswith("admin.")] == ["admin.tls"], "admin.* is not exposed here"
    assert _gen(nx) == 1

    # one key
    r = api.put("/api/settings", {"key": "upstream.timeout_ms", "value": 1500})
    assert r.status == 200, r
    assert r.json["settings"]["upstream.timeout_ms"] == 1500
    text1 = nx.config_path.read_text()
    bak = nx.config_path.with_name(nx.config_path.name + ".bak")
    assert bak.read_text() == text0, ".bak is the file as it was before the change"
    diff = [ln for ln in difflib.unified_diff(text0.splitlines(), text1.splitlines(),
                                              lineterm="", n=0)
            if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert diff == ["-  timeout_ms: 2000  # per query, ms",
                    "+  timeout_ms: 1500  # per query, ms"], diff
    assert _gen(nx) == 2
    assert api.ok("GET", "/api/settings")["settings"]["upstream.timeout_ms"] == 1500

    # several keys in one change, in the GET shape; the effect shows in what DNS does
    assert answers(nx.udp(make_query("before.example"))) == ["192.0.2.1"]
    wait_pushed_and_written(nx)  # privacy applies to records drained after a change
    r = api.put("/api/settings", {"settings": {"upstream.servers": [up2.addr],
                                               "logging.privacy": 1}})
    assert r.status == 200, r
    assert r.json["settings"]["upstream.servers"] == [up2.addr]
    assert _gen(nx) == 3
    assert answers(nx.udp(make_query("after.example"))) == ["192.0.2.2"]
    assert up2.queries("after.example") and not up1.queries("after.example")
    text2 = nx.config_path.read_text()
    assert bak.read_text() == text1
    for line in HEADER.splitlines() + ["# where queries go", "  timeout_ms: 1500  # per query, ms"]:
        assert line in text2.splitlines(), f"lost: {line!r}\n{text2}"
    assert up2.addr in text2 and "privacy: 1" in text2
    wait_pushed_and_written(nx)
    rows = qlog_rows(nx)
    assert {r["name"] for r in rows} == {"before.example", "hidden"}, \
        "privacy 1 applies to records after the change"


def test_refused_change_is_400_with_field_and_file_unchanged(make_upstream, make_nxdns):
    up = make_upstream()
    nx = start_nx(make_nxdns, [up], start=False)
    _commented(nx)
    nx.start()
    api = logged_in(nx)
    before = nx.config_path.read_bytes()
    bak = nx.config_path.with_name(nx.config_path.name + ".bak")
    cases = [
        ({"key": "upstream.timeout_ms", "value": "1500"}, "invalid_setting",
         "upstream.timeout_ms"),
        ({"key": "upstream.timeout_ms", "value": 10}, "invalid_setting", "upstream.timeout_ms"),
        ({"key": "logging.privacy", "value": 4}, "invalid_setting", "logging.privacy"),
        ({"key": "upstream.servers", "value": ["not an address"]}, "invalid_setting",
         "upstream.servers"),
        ({"key": "log.level", "value": "loud"}, "invalid_setting", "log.level"),
        ({"key": "nosuch.key", "value": 1}, "invalid_setting", "nosuch.key"),
        ({"key": "admin.password_hash", "value": "x"}, "invalid_setting",
         "admin.password_hash"),
        # one bad key refuses the whole change, naming the bad one
        ({"settings": {"upstream.timeout_ms": 900, "cache.max_ttl": 0}}, "invalid_setting",
         "cache.max_ttl"),
        ({"key": "upstream.timeout_ms"}, "bad_request", None),
        ({"key": "upstream.timeout_ms", "value": 900, "settings": {}}, "bad_request", None),
        ({"settings": {}}, "bad_request", "settings"),
        ({"settings": [1]}, "bad_request", "settings"),
        ({"value": 1}, "bad_request", None),
    ]
    for body, error, field in cases:
        r = api.put("/api/settings", body)
        assert_error(r, 400, error, field)
        assert nx.config_path.read_bytes() == before, f"{body} changed the file"
    assert not bak.exists(), "nothing was written, not even a .bak"
    assert_error(api.put("/api/settings", raw=b"{broken"), 400, "bad_request")
    assert _gen(nx) == 1, "no reload for refused changes"
    s = api.ok("GET", "/api/settings")["settings"]
    assert s["upstream.timeout_ms"] == 2000 and s["logging.privacy"] == 0
    # and the same session can still change it right
    assert api.put("/api/settings", {"key": "upstream.timeout_ms", "value": 900}).status == 200
    assert _gen(nx) == 2


def test_restart_key_answers_restart_required_and_waits(make_upstream, make_nxdns):
    """cache.size is read at start: the API says so, the reload names it in the log, and the
    running daemon keeps serving without a cache until it restarts."""
    up = make_upstream(default_a="192.0.2.1")
    nx = start_nx(make_nxdns, [up])
    api = logged_in(nx)
    assert api.ok("GET", "/api/settings")["settings"]["cache.size"] == 0
    r = api.put("/api/settings", {"settings": {"cache.size": 1000, "upstream.timeout_ms": 1500}})
    assert r.status == 200, r
    assert r.json["restart_required"] == ["cache.size"], r.json
    assert r.json["settings"]["cache.size"] == 1000, "the file holds the new value"
    assert _gen(nx) == 2
    assert wait_until(lambda: "cache.size change takes effect after a restart" in nx.log(),
                      timeout=5), nx.log()
    assert "upstream.timeout_ms" not in [ln for ln in nx.log().splitlines()
                                         if "after a restart" in ln][0]
    # still no cache: both queries reach the upstream
    for _ in range(2):
        assert answers(nx.udp(make_query("twice.example"))) == ["192.0.2.1"]
    assert len(up.queries("twice.example")) == 2
    # the running value is still the one the process started with: a second edit, even one
    # that sends back what the file has, still needs the restart, and GET says so too
    r = api.put("/api/settings", {"key": "cache.size", "value": 1000})
    assert r.status == 200 and r.json["restart_required"] == ["cache.size"], r
    r = api.put("/api/settings", {"key": "cache.size", "value": 2000})
    assert r.status == 200 and r.json["restart_required"] == ["cache.size"], r
    assert api.ok("GET", "/api/settings")["restart_pending"] == ["cache.size"]
    # back to the boot value: nothing waits for a restart any more
    r = api.put("/api/settings", {"key": "cache.size", "value": 0})
    assert r.status == 200 and r.json["restart_required"] == [], r
    assert api.ok("GET", "/api/settings")["restart_pending"] == []


def test_live_key_applies_block_mode_custom(make_upstream, make_nxdns):
    """block_mode custom with its addresses, chosen through the API, answers blocked names
    with those addresses at once; the schema says the two keys are live and editable."""
    up = make_upstream(default_a="192.0.2.1")
    nx = start_nx(make_nxdns, [up], config={"filter": {"deny": ["blocked.example"]}})
    api = logged_in(nx)
    rows = {k["path"]: k for k in api.ok("GET", "/api/schema")["keys"]}
    for key in ("filter.block_mode", "filter.block_addresses"):
        assert rows[key]["editable"] is True and rows[key]["apply"] == "live", rows[key]
    assert rows["cache.size"]["apply"] == "restart"
    assert rows["tls.cert"]["apply"] == "reload" and rows["tls.cert"]["editable"] is False
    assert answers(nx.udp(make_query("blocked.example"))) == ["0.0.0.0"]

    # custom alone is refused at the field, and so is an address with a port
    assert_error(api.put("/api/settings", {"key": "filter.block_mode", "value": "custom"}),
                 400, "invalid_setting", "filter.block_mode")
    assert_error(api.put("/api/settings", {"settings": {
        "filter.block_mode": "custom", "filter.block_addresses": ["192.0.2.99:53"]}}),
        400, "invalid_setting", "filter.block_addresses")
    assert _gen(nx) == 1

    r = api.put("/api/settings", {"settings": {"filter.block_mode": "custom",
                                               "filter.block_addresses": ["192.0.2.99"]}})
    assert r.status == 200, r
    assert r.json["restart_required"] == []
    assert r.json["settings"]["filter.block_addresses"] == ["192.0.2.99"]
    assert answers(nx.udp(make_query("blocked.example"))) == ["192.0.2.99"]
    assert not up.queries("blocked.example")
    assert "after a restart" not in nx.log()


def test_admin_tls_is_a_restart_setting(make_upstream, make_nxdns):
    """admin.tls through the settings API: written to the file, named in restart_required, and
    the running admin keeps speaking plain HTTP (the listener is set up at start)."""
    up = make_upstream(default_a="192.0.2.1")
    nx = start_nx(make_nxdns, [up])
    api = logged_in(nx)
    assert api.ok("GET", "/api/settings")["settings"]["admin.tls"] is False
    r = api.put("/api/settings", {"settings": {"admin.tls": True}})
    assert r.status == 200, r
    assert r.json["restart_required"] == ["admin.tls"], r.json
    assert r.json["settings"]["admin.tls"] is True
    assert "tls: true" in nx.config_path.read_text().replace('"', "")
    assert api.ok("GET", "/api/settings")["settings"]["admin.tls"] is True  # still over HTTP
    assert_error(api.put("/api/settings", {"settings": {"admin.tls": "yes"}}), 400)
