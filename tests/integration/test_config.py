"""Config: check-config, `file:line:col: message` + exit 2, serve refusing a bad config,
SIGHUP reload (good and bad), clean exit on SIGTERM/SIGINT, version."""

import re
import signal
import time

import dns.rcode
import pytest

from harness import REPO, answers, make_query, nxdns_bin, run, to_yaml, wait_until

GOOD = """\
listener:
  dns: ["127.0.0.1:5399", "[::1]:5399"]
  workers: 2
  dns_max_connections: 16
upstream:
  servers: ["127.0.0.1:5398"]
  race: 2
  timeout_ms: 1500
  forward_zones:
    lan: ["127.0.0.1:5397"]
query_budget:
  permits: 32
access:
  allow: ["127.0.0.0/8", "::1/128", "192.168.0.0/16"]
  deny: ["192.168.66.0/24"]
state_dir: ./var
"""

# (name, file text, line, column, a word the message must contain). Lines and columns are
# 1-based; unknown keys point at the key (and the message names it), bad values at the value.
BAD = [
    ("unknown_key", "listener:\n  dns: [\"127.0.0.1:5399\"]\n  bogus_key: 1\n", 3, 3,
     "bogus_key"),
    ("unknown_top_level_key", "state_dir: ./var\nnope: 1\n", 2, 1, "nope"),
    ("wrong_type", "listener:\n  workers: many\n", 2, 12, ""),
    ("wrong_type_list", "listener:\n  dns: 5\n", 2, 8, ""),
    ("out_of_range", "upstream:\n  servers: [\"127.0.0.1:53\"]\n  timeout_ms: 99999999999\n",
     3, 15, ""),
    ("workers_out_of_range", "listener:\n  workers: 100000\n", 2, 12, ""),
    ("bad_address", "upstream:\n  servers:\n    - 127.0.0.1:53\n    - not-an-address\n", 4, 7,
     ""),
    ("bad_port", "listener:\n  dns:\n    - 127.0.0.1:99999\n", 3, 7, ""),
    ("bad_cidr", "access:\n  allow:\n    - 10.0.0.0/33\n", 3, 7, ""),
    ("bad_zone_server", "upstream:\n  forward_zones:\n    lan:\n      - nowhere\n", 4, 9, ""),
    # encrypted DNS: every refusal names its reason at the value
    ("tls_host_missing", "upstream:\n  servers: [\"tls://\"]\n", 2, 13, "host is missing"),
    ("https_path_missing", "upstream:\n  servers:\n    - \"https://dns.example\"\n", 3, 7,
     "path is missing"),
    ("unknown_scheme", "upstream:\n  servers: [\"quic://dns.example\"]\n", 2, 13,
     "unknown scheme 'quic'"),
    ("bad_pin", "upstream:\n  servers:\n    - url: \"tls://1.1.1.1\"\n"
     "      pin_sha256: [\"not-a-pin\"]\n", 4, 20, "base64"),
    ("unresolvable_host", "upstream:\n  servers: [\"tls://1.1.1.1\", \"tls://dns.example\"]\n",
     2, 30, "cannot be resolved"),
    ("admin_tls_cert_moved", "admin:\n  tls_cert: c.pem\n  tls_key: k.pem\n", 2, 3,
     "tls.cert"),
    ("tls_cert_without_key", "tls:\n  cert: c.pem\n", 2, 9, "tls.key"),
    ("bad_server_name", "tls:\n  server_name: \"dns home\"\n", 2, 16, "host name"),
    ("doh_max_streams_range", "listener:\n  doh_max_streams: 0\n", 2, 20, "1..1000"),
    ("dot_port_taken", "listener:\n  dns: [\"127.0.0.1:853\"]\n  dot: [\"127.0.0.1\"]\n", 3, 3,
     "also listener.dns"),
    ("bad_client_id", "clients:\n  - name: phone\n    ids: [\"id:Phone\"]\n", 3, 11,
     "client id"),
    # a prefix with host bits set is a typo, not a network: refused, naming the network
    ("cidr_host_bits", "access:\n  allow:\n    - 10.0.0.1/8\n", 3, 7, "10.0.0.0/8"),
    ("cidr_host_bits_v6", "access:\n  deny: [\"fd00::1/64\"]\n", 2, 10, "host bits"),
    ("client_cidr_host_bits", "clients:\n  - name: tv\n    ids: [192.168.1.9/24]\n", 3, 11,
     "192.168.1.0/24"),
]


def _check(path):
    return run([str(nxdns_bin()), "check-config", str(path)])


def _expect_error(out, path, line, col, word):
    assert out.returncode == 2, f"exit {out.returncode}, stderr: {out.stderr!r}"
    m = re.search(rf"^{re.escape(str(path))}:(\d+):(\d+): (.+)$", out.stderr, re.M)
    assert m, f"no '{path}:line:col: message' on stderr: {out.stderr!r}"
    assert (int(m.group(1)), int(m.group(2))) == (line, col), \
        f"position {m.group(1)}:{m.group(2)}, expected {line}:{col}: {m.group(0)!r}"
    assert word.lower() in m.group(3).lower(), m.group(0)


def test_version():
    out = run([str(nxdns_bin()), "version"])
    assert out.returncode == 0
    assert "nxdns" in out.stdout.lower()
    assert re.search(r"\d+\.\d+", out.stdout), out.stdout


def test_check_config_good(tmp_path):
    p = tmp_path / "good.yaml"
    p.write_text(GOOD)
    out = _check(p)
    assert out.returncode == 0, out.stderr


def test_check_config_shipped_dev_config():
    out = _check(REPO / "etc" / "nxdns-dev.yaml")
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("name,text,line,col,word", BAD, ids=[b[0] for b in BAD])
def test_check_config_bad(tmp_path, name, text, line, col, word):
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    _expect_error(_check(p), p, line, col, word)


def test_check_config_yaml_syntax_error(tmp_path):
    p = tmp_path / "syntax.yaml"
    p.write_text("listener:\n  dns: [\"127.0.0.1:5399\"\nupstream:\n  servers: []\n")
    out = _check(p)
    assert out.returncode == 2
    assert re.search(rf"^{re.escape(str(p))}:\d+:\d+: .+$", out.stderr, re.M), out.stderr


def test_check_config_missing_file(tmp_path):
    p = tmp_path / "does-not-exist.yaml"
    out = _check(p)
    assert out.returncode != 0
    assert str(p) in out.stderr


def test_serve_refuses_bad_config(make_nxdns):
    nx = make_nxdns(start=False)
    nx.write_config_text("listener:\n  dns: [\"127.0.0.1:5399\"]\n  bogus_key: 1\n")
    nx.start(wait=False)
    code = nx.proc.wait(timeout=10)
    nx.stop()
    assert code == 2
    assert re.search(rf"^{re.escape(str(nx.config_path))}:3:3: .*bogus_key", nx.log(), re.M), \
        nx.log()
    assert "serving" not in nx.log()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_clean_exit_on_signal(nxdns, sig):
    assert answers(nxdns.udp(make_query("bye.example"))) == ["192.0.2.1"]
    t0 = time.monotonic()
    assert nxdns.stop(sig, timeout=10) == 0
    assert time.monotonic() - t0 < 10


def test_sighup_reload_switches_upstream(make_upstream, make_nxdns):
    one = make_upstream(default_a="192.0.2.1")
    two = make_upstream(default_a="192.0.2.2")
    nx = make_nxdns([one])
    assert answers(nx.udp(make_query("r0.example"))) == ["192.0.2.1"]
    before = nx.counter("nxdns_config_reloads_total", result="ok")
    cfg = dict(nx.config)
    cfg["upstream"] = dict(cfg["upstream"], servers=[two.addr])
    nx.reload(cfg)
    n = [0]

    def switched():
        n[0] += 1
        return answers(nx.udp(make_query(f"r{n[0]}.example"))) == ["192.0.2.2"]

    assert wait_until(switched, timeout=8, interval=0.2), "the new upstream never took effect"
    assert nx.counter("nxdns_config_reloads_total", result="ok") >= before + 1
    assert nx.alive()


def test_sighup_reload_applies_access_lists(make_upstream, make_nxdns):
    up = make_upstream()
    nx = make_nxdns([up])
    assert nx.udp(make_query("acl0.example")).rcode() == dns.rcode.NOERROR
    cfg = dict(nx.config)
    cfg["access"] = {"deny": ["127.0.0.0/8"]}
    nx.reload(cfg)
    n = [0]

    def refused():
        n[0] += 1
        return nx.udp(make_query(f"acl{n[0]}.example")).rcode() == dns.rcode.REFUSED

    assert wait_until(refused, timeout=8, interval=0.2), "access.deny from the reload ignored"
    assert nx.udp(make_query("acl-v6.example"), v6=True).rcode() == dns.rcode.NOERROR


def test_bad_reload_keeps_running_config(make_upstream, make_nxdns):
    up = make_upstream(default_a="192.0.2.1")
    nx = make_nxdns([up])
    assert answers(nx.udp(make_query("pre.example"))) == ["192.0.2.1"]
    before = nx.counter("nxdns_config_reloads_total", result="failed")
    good_text = nx.config_path.read_text()
    log_len = len(nx.log())
    bad = good_text + "bogus_key: 1\n"
    bad_line = bad.count("\n")
    nx.write_config_text(bad)
    nx.send_signal(signal.SIGHUP)
    assert wait_until(lambda: "reload" in nx.log()[log_len:].lower(), timeout=8), \
        "nothing about the failed reload in the log"
    new_log = nx.log()[log_len:]
    assert re.search(rf"{re.escape(str(nx.config_path))}:{bad_line}:1:", new_log), \
        f"the log should say why (file:line:col): {new_log!r}"
    assert nx.wait_counter("nxdns_config_reloads_total", before + 1, result="failed") \
        >= before + 1
    assert nx.alive()
    for i in range(3):
        r = nx.udp(make_query(f"post{i}.example"))
        assert r.rcode() == dns.rcode.NOERROR and answers(r) == ["192.0.2.1"]
    # A later good reload still works.
    nx.write_config_text(good_text)
    ok_before = nx.counter("nxdns_config_reloads_total", result="ok")
    nx.send_signal(signal.SIGHUP)
    assert nx.wait_counter("nxdns_config_reloads_total", ok_before + 1, timeout=8, result="ok") \
        >= ok_before + 1


def test_harness_config_passes_check_config(make_nxdns):
    """The harness's own config (what every test writes) passes check-config."""
    nx = make_nxdns(["127.0.0.1:5398"], start=False)
    out = _check(nx.config_path)
    assert out.returncode == 0, out.stderr + "\n" + to_yaml(nx.config)


ENCRYPTED = """\
listener:
  dns: ["127.0.0.1:5399"]
  dot: ["127.0.0.1:5853"]
  doh: ["127.0.0.1:5443"]
  tls_handshake_timeout_ms: 3000
  doh_max_streams: 50
  permit_wait_ms: 500
tls:
  cert: cert.pem
  key: key.pem
  server_name: dns.home.example
upstream:
  servers:
    - "127.0.0.1:5398"
    - "tcp://127.0.0.1:5397"
    - "tls://dns.quad9.net#dns.quad9.net"
    - url: "https://127.0.0.1/dns-query"
      name: doh.example
      pin_sha256: ["ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLs="]
  bootstrap: ["127.0.0.1:5398"]
access:
  admit_client_ids: true
clients:
  - name: phone
    ids: ["id:phone-anna", "192.168.1.30"]
admin:
  tls: true
state_dir: ./var
"""


def test_check_config_encrypted_dns(tmp_path):
    """Every key of the encrypted-DNS side together passes check-config, without any network
    (the host-named upstream is only resolved when serving)."""
    p = tmp_path / "enc.yaml"
    p.write_text(ENCRYPTED)
    out = _check(p)
    assert out.returncode == 0, out.stderr


def test_a_dot_upstream_is_never_sent_plain_dns(make_upstream, make_nxdns):
    """A tls:// server that only speaks plain DNS (here: a plain fake upstream) fails its TLS
    handshake and is never sent a DNS message in the clear; the plain server answers; and
    tcp:// to the same fake is spoken to over TCP only."""
    up = make_upstream(default_a="192.0.2.7")
    dot = make_upstream(default_a="192.0.2.66")
    dot_port = dot.addr.rsplit(":", 1)[1]
    nx = make_nxdns([f"tls://127.0.0.1:{dot_port}", up],
                    config={"upstream": {"race": 2, "stagger_ms": 10}})
    for i in range(3):
        r = nx.udp(make_query(f"enc{i}.example"))
        assert answers(r) == ["192.0.2.7"]
    assert not dot.queries(), "a DoT server was sent plain DNS"
    # The fake takes the ClientHello for the start of a DNS frame and waits: the handshake
    # times out (3 s), counted.
    assert wait_until(lambda: nx.counter("nxdns_upstream_stream_failures_total",
                                         reason="timeout") >= 1, timeout=6)
    assert not dot.queries(), "a DoT server was sent plain DNS"
    nx2 = make_nxdns([f"tcp://127.0.0.1:{dot_port}"])
    assert answers(nx2.udp(make_query("enc-tcp.example"))) == ["192.0.2.66"]
    assert dot.queries("enc-tcp.example")
    assert all(q.transport == "tcp" for q in dot.queries("enc-tcp.example"))

