"""The local control socket (issue 12: "on the box itself, `nxdns memory` works for root and
the service user without a hand-made API token"), against the real daemon:

- `nxdns memory --config CFG` with no token reads the ledger over state_dir/control.sock
  (the same owners /metrics names), while the admin API still wants a token for it;
- the socket is mode 0660, a stale one from a crashed run is replaced, it goes at stop, and it
  exists without the admin listener too;
- another uid is refused: by the file mode (no access), and by SO_PEERCRED when a group lets
  it reach the file (a 403, logged and counted);
- oversized and slow requests are cut and counted, and so are connections over the cap.
"""

import json
import os
import shutil
import socket
import stat
import tempfile
import time
from pathlib import Path

import pytest

from filterkit import run_cli
from harness import wait_until

NOBODY = 65534
READ_TIMEOUT_S = 2.0  # NX_ADMIN_CONTROL_READ_TIMEOUT_MS
MAX_CONNECTIONS = 4  # NX_ADMIN_CONTROL_MAX_CONNECTIONS
REQUEST_MAX = 1024  # NX_ADMIN_CONTROL_REQUEST_MAX


def sock_path(nx) -> Path:
    return Path(nx.config["state_dir"]) / "control.sock"


def ctl_request(path, raw: bytes, timeout: float = 5.0) -> bytes:
    """Send raw bytes, read the answer until the server closes."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(str(path))
    try:
        s.sendall(raw)
    except (BrokenPipeError, ConnectionResetError):
        pass
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        out += chunk
    s.close()
    return out


def ctl_get(path, route: str):
    raw = ctl_request(path, f"GET {route} HTTP/1.0\r\n\r\n".encode())
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, body.decode()


def refused(nx, reason: str) -> float:
    return nx.counter("nxdns_control_refused_total", reason=reason)


def no_token_env():
    env = dict(os.environ)
    env.pop("NXDNS_TOKEN", None)
    return env


def test_memory_cli_over_the_socket_without_token(upstream, make_nxdns, monkeypatch):
    monkeypatch.delenv("NXDNS_TOKEN", raising=False)
    nx = make_nxdns([upstream])
    p = sock_path(nx)
    st = os.lstat(p)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o660

    r = run_cli(["memory", "--config", str(nx.config_path), "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    owners = {o["owner"]: o for o in doc["owners"]}
    # the ledger the admin API and /metrics report: every owner, with live figures
    exported = {dict(ls)["owner"] for (n, ls) in nx.metrics().series
                if n == "nxdns_memory_owner_bytes"}
    assert set(owners) == exported
    assert doc["ledger_bytes"] == sum(o["bytes"] for o in doc["owners"]) > 0
    assert owners["worker_buffers"]["bytes"] > 0
    assert doc["process"]["vmrss"] > 0

    table = run_cli(["memory", "--config", str(nx.config_path)])
    assert table.returncode == 0, table.stderr
    assert "ledger total" in table.stdout and "worker_buffers" in table.stdout

    # the admin API still wants credentials for the same report
    code, _ = nx.http_get("/api/memory")
    assert code == 401

    # the other read-only routes answer what the admin listener answers
    status, body = ctl_get(p, "/healthz")
    assert (status, body) == (200, "ok\n")
    status, body = ctl_get(p, "/metrics")
    assert status == 200 and "nxdns_control_requests_total" in body
    assert "nxdns_memory_owner_bytes" in body
    status, body = ctl_get(p, "/api/settings")
    assert status == 404 and json.loads(body)["error"] == "not_found"
    raw = ctl_request(p, b"POST /api/memory HTTP/1.0\r\n\r\n")
    assert raw.startswith(b"HTTP/1.0 405 ")
    assert nx.counter("nxdns_control_requests_total") >= 4
    assert refused(nx, "bad_request") == 2


def test_socket_lifecycle_stale_replaced_removed_at_stop(upstream, make_nxdns):
    nx = make_nxdns([upstream], start=False, config={"admin": {"enabled": False}})
    p = sock_path(nx)
    p.parent.mkdir(parents=True, exist_ok=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(p))  # bound, never listening: what a crashed run leaves
    stale.close()
    assert stat.S_ISSOCK(os.lstat(p).st_mode)
    nx.start()
    assert "replaced the stale socket" in nx.log()
    # without the admin listener the socket still serves the report
    r = run_cli(["memory", "--config", str(nx.config_path), "--json"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ledger_bytes"] > 0
    status, body = ctl_get(p, "/metrics")
    assert status == 200 and 'nxdns_control_refused_total{reason="peer_uid"} 0' in body
    assert nx.stop() == 0
    assert not p.exists()
    # with no daemon, the CLI says where it looked
    r = run_cli(["memory", "--config", str(nx.config_path)])
    assert r.returncode == 1 and str(p) in r.stderr and "running" in r.stderr


def test_a_file_that_is_not_a_socket_is_left_alone(upstream, make_nxdns):
    nx = make_nxdns([upstream], start=False)
    p = sock_path(nx)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("not mine\n")
    nx.start()  # DNS and the admin listener serve; the control socket is off, said so
    assert "is not a socket: not replaced" in nx.log()
    assert p.read_text() == "not mine\n"
    assert nx.http_get("/healthz")[0] == 200


@pytest.fixture
def shared_dir(request):
    """A directory other uids can traverse (pytest's tmp dirs are 0700)."""
    d = Path(tempfile.mkdtemp(prefix="nxctl-"))
    os.chmod(d, 0o755)
    request.addfinalizer(lambda: shutil.rmtree(d, ignore_errors=True))
    return d


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root and setpriv to run a client as nobody")
def test_other_uid_is_refused(upstream, make_nxdns, shared_dir):
    nx = make_nxdns([upstream], config={"state_dir": str(shared_dir / "state")})
    p = sock_path(nx)
    # the client reads the config for state_dir: a copy it can read
    cfg = shared_dir / "nxdns.yaml"
    cfg.write_text(nx.config_path.read_text())
    os.chmod(cfg, 0o644)
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}"]

    # 1. the file mode: nobody is neither owner nor group of the 0660 socket
    r = run_cli_as(as_nobody + ["--clear-groups"], ["memory", "--config", str(cfg)])
    assert r.returncode == 1
    assert "Permission denied" in r.stderr and "--admin" in r.stderr
    assert refused(nx, "peer_uid") == 0  # never reached the daemon

    # 2. the peer uid: a group opens the file, SO_PEERCRED still refuses
    os.chown(p, 0, 0)
    r = run_cli_as(as_nobody + ["--groups=0"], ["memory", "--config", str(cfg)])
    assert r.returncode == 1
    assert "403" in r.stderr and "forbidden" in r.stderr, r.stderr
    assert refused(nx, "peer_uid") == 1
    assert f"refused uid {NOBODY}" in nx.log()

    # root (the daemon's own uid here) is still served
    r = run_cli(["memory", "--config", str(cfg), "--json"])
    assert r.returncode == 0, r.stderr


def run_cli_as(prefix, args):
    import subprocess

    from harness import nxdns_bin
    return subprocess.run(prefix + [str(nxdns_bin())] + args, capture_output=True, text=True,
                          timeout=30, env=no_token_env())


@pytest.mark.nx_timeout(40)
def test_oversized_slow_and_excess_connections_are_cut_and_counted(upstream, make_nxdns):
    nx = make_nxdns([upstream])
    p = sock_path(nx)

    # oversized: more than the bound without the end of a request
    raw = ctl_request(p, b"GET /" + b"a" * (2 * REQUEST_MAX))
    assert raw.startswith(b"HTTP/1.0 431 ")
    assert refused(nx, "oversized") == 1

    # slow: half a request line, then silence; cut after the read time-out
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(READ_TIMEOUT_S * 4)
    s.connect(str(p))
    s.sendall(b"GET /api/mem")
    t0 = time.monotonic()
    assert s.recv(100) == b""
    waited = time.monotonic() - t0
    s.close()
    assert READ_TIMEOUT_S * 0.8 <= waited <= READ_TIMEOUT_S * 3, waited
    assert wait_until(lambda: refused(nx, "read_timeout") == 1)

    # the cap: MAX_CONNECTIONS silent clients hold every slot, the next one is told so
    held = []
    for _ in range(MAX_CONNECTIONS):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(READ_TIMEOUT_S * 4)
        c.connect(str(p))
        held.append(c)
    assert wait_until(lambda: nx.metrics().get("nxdns_control_connections") == MAX_CONNECTIONS)
    raw = ctl_request(p, b"GET /api/memory HTTP/1.0\r\n\r\n")
    assert raw.startswith(b"HTTP/1.0 503 ") and b"busy" in raw
    assert refused(nx, "connection_cap") == 1
    # they are cut by the same time-out; then the socket serves again
    for c in held:
        assert c.recv(100) == b""
        c.close()
    assert wait_until(lambda: refused(nx, "read_timeout") == 1 + MAX_CONNECTIONS)
    status, body = ctl_get(p, "/api/memory")
    assert status == 200 and json.loads(body)["ledger_bytes"] > 0
