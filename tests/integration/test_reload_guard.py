"""A reload never silently resets the box (issue 12).

- A config file without settings (zero bytes, whitespace, comments only) is refused by
  check-config, at start and on SIGHUP like any other bad config: a truncated file must not
  turn into the defaults (public upstreams, no lists, no admin password).
- A reload whose config lost admin.password_hash while the running one has it is refused
  (logged, nxdns_config_reloads_total{result="failed"}): the setup token never comes back.
  `nxdns passwd` (a new hash) followed by SIGHUP is the way to change it.
"""

import re
import signal

import dns.rcode
import pytest

from adminkit import PASSWORD, Api, assert_error, logged_in, passwd, start_nx
from harness import answers, make_query, nxdns_bin, run, wait_until

ADS = ["ads.guard.test", "track.guard.test"]
EMPTY_TEXTS = [("zero_bytes", ""), ("whitespace", "  \n\n\t\n"),
               ("comments_only", "# nxdns.yaml\n# listener:\n#   dns: [\"127.0.0.1:53\"]\n"),
               ("null_document", "---\n")]


def _nx(make_nxdns, tmp_path, up):
    lst = tmp_path / "ads.txt"
    lst.write_text("".join(n + "\n" for n in ADS))
    cfg = {"filter": {"sources": [{"name": "ads", "path": str(lst), "format": "domains"}]}}
    return start_nx(make_nxdns, [up], config=cfg)


def _blocked(nx, name) -> bool:
    r = nx.udp(make_query(name))
    return r.rcode() == dns.rcode.NOERROR and answers(r) == ["0.0.0.0"]


def _failed_reload(nx, log_len: int, before: float) -> str:
    nx.send_signal(signal.SIGHUP)
    assert nx.wait_counter("nxdns_config_reloads_total", before + 1, timeout=8,
                           result="failed") >= before + 1, nx.log()[log_len:]
    assert wait_until(lambda: "reload failed" in nx.log()[log_len:], 5), nx.log()[log_len:]
    return nx.log()[log_len:]


def _box_unchanged(nx, up_answer: str):
    """Still filtering with its list, still forwarding to its upstream, still locked."""
    assert nx.alive()
    assert _blocked(nx, ADS[0]) and _blocked(nx, ADS[1])
    r = nx.udp(make_query("fine.guard.test"))
    assert r.rcode() == dns.rcode.NOERROR and answers(r) == [up_answer]
    st = Api(nx).get("/api/auth/status")
    assert st.status == 200 and st.json["setup_required"] is False, st
    assert_error(Api(nx).post("/api/auth/setup", {"token": "x" * 43, "password": "p" * 12}),
                 409, "already_set")
    assert "admin setup token" not in nx.log(), "the setup token reappeared"
    assert logged_in(nx).get("/api/settings").status == 200


@pytest.mark.parametrize("name,text", EMPTY_TEXTS, ids=[e[0] for e in EMPTY_TEXTS])
def test_check_config_refuses_a_file_without_settings(tmp_path, name, text):
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    out = run([str(nxdns_bin()), "check-config", str(p)])
    assert out.returncode == 2, out
    assert re.search(rf"^{re.escape(str(p))}:1:1: .*no settings", out.stderr, re.M), out.stderr


def test_check_config_accepts_explicit_defaults(tmp_path):
    p = tmp_path / "defaults.yaml"
    p.write_text("{}\n")
    out = run([str(nxdns_bin()), "check-config", str(p)])
    assert out.returncode == 0, out.stderr


def test_serve_refuses_an_empty_config(make_nxdns):
    nx = make_nxdns(start=False)
    nx.write_config_text("")
    nx.start(wait=False)
    code = nx.proc.wait(timeout=10)
    nx.stop()
    assert code == 2, nx.log()
    assert re.search(rf"^{re.escape(str(nx.config_path))}:1:1: .*no settings", nx.log(), re.M), \
        nx.log()
    assert "serving" not in nx.log()
    assert "admin setup token" not in nx.log()


@pytest.mark.parametrize("name,text", EMPTY_TEXTS[:2], ids=[e[0] for e in EMPTY_TEXTS[:2]])
def test_sighup_with_a_truncated_file_keeps_the_box(make_upstream, make_nxdns, tmp_path, name,
                                                    text):
    up = make_upstream(default_a="192.0.2.44")
    nx = _nx(make_nxdns, tmp_path, up)
    assert wait_until(lambda: _blocked(nx, ADS[0]), 10)
    good = nx.config_path.read_text()
    gen = nx.metrics().get("nxdns_config_generation")
    before = nx.counter("nxdns_config_reloads_total", result="failed")
    log_len = len(nx.log())
    nx.write_config_text(text)  # what a full disk or an interrupted editor leaves
    new_log = _failed_reload(nx, log_len, before)
    assert f"{nx.config_path}:1:1:" in new_log and "no settings" in new_log, new_log
    assert nx.metrics().get("nxdns_config_generation") == gen
    _box_unchanged(nx, "192.0.2.44")
    # Restoring the file and reloading works as before.
    nx.write_config_text(good)
    ok = nx.counter("nxdns_config_reloads_total", result="ok")
    nx.send_signal(signal.SIGHUP)
    assert nx.wait_counter("nxdns_config_reloads_total", ok + 1, timeout=8, result="ok") >= ok + 1


def test_reload_that_drops_the_password_is_refused(make_upstream, make_nxdns, tmp_path):
    up = make_upstream(default_a="192.0.2.45")
    nx = _nx(make_nxdns, tmp_path, up)
    assert wait_until(lambda: _blocked(nx, ADS[0]), 10)
    session = logged_in(nx)
    good = nx.config_path.read_text()
    assert "password_hash" in good
    dropped = "\n".join(l for l in good.splitlines() if "password_hash" not in l) + "\n"
    before = nx.counter("nxdns_config_reloads_total", result="failed")
    log_len = len(nx.log())
    nx.write_config_text(dropped)
    new_log = _failed_reload(nx, log_len, before)
    assert "admin.password_hash is gone" in new_log and "nxdns passwd" in new_log, new_log
    _box_unchanged(nx, "192.0.2.45")
    # The session survived: nothing changed.
    assert session.get("/api/settings").status == 200
    # The same edit with a password_hash: "" (explicitly empty) is refused too.
    nx.write_config_text(re.sub(r"password_hash:.*", 'password_hash: ""', good))
    _failed_reload(nx, len(nx.log()), before + 1)
    assert "setup token" not in nx.log()
    # The escape hatch: a new password with `nxdns passwd`, then a reload, is accepted.
    nx.write_config_text(good)
    p = passwd(nx.config_path, "another long passphrase")
    assert p.returncode == 0, p.stderr
    ok = nx.counter("nxdns_config_reloads_total", result="ok")
    nx.send_signal(signal.SIGHUP)
    assert nx.wait_counter("nxdns_config_reloads_total", ok + 1, timeout=8, result="ok") >= ok + 1
    fresh = Api(nx)
    assert_error(fresh.post("/api/auth/login", {"password": PASSWORD}), 401, "invalid_password")
    assert fresh.login("another long passphrase").status == 200
