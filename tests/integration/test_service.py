"""Issue 15, the service side of `nxdns serve`: the sd_notify messages (READY, RELOADING with
MONOTONIC_USEC, STOPPING, WATCHDOG) read from a unix datagram socket the test binds as
NOTIFY_SOCKET; the privilege drop as root (uid/gid and every capability set read from /proc,
files handed to the user); the first boot's loading state (/healthz 503 "loading", DNS silent,
progress per source in the log); the bind failure messages (a taken port naming its holder,
systemd-resolved's stub listener, a privileged port without the capability); journal records
(the native protocol, read from a socket the test binds) with NXDNS_CLIENT on the lines about
one client."""

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dns.exception
import pytest

from adminkit import Api, assert_error, password_hash
from filterkit import rewrite_config
from harness import Nxdns, base_config, free_port, make_query, merge, wait_until

ROOT = os.geteuid() == 0


class NotifySocket:
    """A unix datagram socket standing in for the service manager."""

    def __init__(self, path: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + path[1:] if path.startswith("@") else path)
        self.path = path
        self.messages = []

    def read_until(self, pred, timeout: float = 10.0) -> dict:
        """Datagrams until one (as a dict of its KEY=VALUE lines) satisfies pred."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                break
            msg = dict(line.split("=", 1) for line in data.decode().split("\n") if "=" in line)
            self.messages.append(msg)
            if pred(msg):
                return msg
        raise AssertionError(f"no matching notification; got {self.messages}")

    def close(self):
        self.sock.close()


def _daemon(tmp_path: Path, upstream, name="nxdns", config=None) -> Nxdns:
    cfg = base_config(tmp_path / name, [upstream.addr])
    if config:
        cfg = merge(cfg, config)
    return Nxdns(tmp_path / name, cfg, name=name)


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_notify_ready_reloading_stopping(tmp_path, upstream, abstract):
    path = f"@nxdns-test-{os.getpid()}-{time.monotonic_ns()}" if abstract \
        else str(tmp_path / "notify.sock")
    ns = NotifySocket(path)
    nx = _daemon(tmp_path, upstream)
    try:
        nx.start(wait=False, env={"NOTIFY_SOCKET": path})
        ready = ns.read_until(lambda m: m.get("READY") == "1")
        # READY comes only once DNS answers
        assert nx.udp(make_query("ready.example")).rcode() == 0
        assert ready.get("STATUS") == "serving"
        # the load announced itself before READY
        assert any(m.get("STATUS", "").startswith("loading") for m in ns.messages[:-1])

        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        nx.send_signal(signal.SIGHUP)
        rel = ns.read_until(lambda m: "RELOADING" in m)
        after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        assert rel["RELOADING"] == "1"
        # systemd orders the reload by this stamp: CLOCK_MONOTONIC in microseconds
        assert before <= int(rel["MONOTONIC_USEC"]) <= after
        again = ns.read_until(lambda m: m.get("READY") == "1")
        assert again["STATUS"].startswith("serving")
        wait_until(lambda: "generation 2 in effect" in nx.log(), 5)

        nx.send_signal(signal.SIGTERM)
        stop = ns.read_until(lambda m: "STOPPING" in m)
        assert stop["STOPPING"] == "1"
        assert nx.proc.wait(timeout=10) == 0
    finally:
        nx.stop()
        ns.close()


def test_notify_failed_reload_still_reports_ready(tmp_path, upstream):
    path = str(tmp_path / "notify.sock")
    ns = NotifySocket(path)
    nx = _daemon(tmp_path, upstream)
    try:
        nx.start(wait=False, env={"NOTIFY_SOCKET": path})
        ns.read_until(lambda m: m.get("READY") == "1")
        nx.write_config_text("listener: [unclosed\n")
        nx.send_signal(signal.SIGHUP)
        ns.read_until(lambda m: "RELOADING" in m)
        back = ns.read_until(lambda m: m.get("READY") == "1")
        assert "reload failed" in back["STATUS"]
        assert nx.udp(make_query("still.example")).rcode() == 0
    finally:
        nx.stop()
        ns.close()


def test_watchdog_pings(tmp_path, upstream):
    path = str(tmp_path / "notify.sock")
    ns = NotifySocket(path)
    nx = _daemon(tmp_path, upstream)
    try:
        # 400 ms: pinged at least every 200 ms
        nx.start(wait=False, env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000",
                                  "WATCHDOG_PID": "0"})
        # WATCHDOG_PID names another process: ours must not ping in its name
        ns.read_until(lambda m: m.get("READY") == "1")
        t0 = time.monotonic()
        with pytest.raises(AssertionError):
            ns.read_until(lambda m: "WATCHDOG" in m, timeout=1.0)
        assert time.monotonic() - t0 >= 0.9
    finally:
        nx.stop()
    ns2 = NotifySocket(str(tmp_path / "notify2.sock"))
    nx2 = _daemon(tmp_path, upstream, name="nxdns2")
    try:
        nx2.start(wait=False, env={"NOTIFY_SOCKET": ns2.path, "WATCHDOG_USEC": "400000"})
        ns2.read_until(lambda m: m.get("READY") == "1")
        t0 = time.monotonic()
        for _ in range(3):
            ns2.read_until(lambda m: m.get("WATCHDOG") == "1", timeout=1.0)
        # three pings at <= 200 ms apart (generous bound for a loaded machine)
        assert time.monotonic() - t0 < 2.0
    finally:
        nx2.stop()
        ns2.close()


@pytest.mark.skipif("NOTIFY_SOCKET" in os.environ, reason="the test run itself is supervised")
def test_not_supervised_without_notify_socket(tmp_path, upstream):
    """No NOTIFY_SOCKET (a terminal, `make run`): nothing is sent, nothing complains."""
    nx = _daemon(tmp_path, upstream)
    try:
        nx.start()
        assert "notif" not in nx.log().lower()
        assert nx.udp(make_query("plain.example")).rcode() == 0
    finally:
        nx.stop()


# ---------------------------------------------------------------- privilege drop

def _status(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


@pytest.fixture
def open_dir():
    """A directory every user can traverse (pytest's tmp dirs are root-only 0700)."""
    d = Path(tempfile.mkdtemp(prefix="nxdns-svc-"))
    d.chmod(0o711)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.skipif(not ROOT, reason="needs root (the drop starts as root)")
def test_root_start_drops_to_run_as_user(open_dir, upstream):
    nobody = pwd.getpwnam("nobody")
    # the config in a directory named nxdns: handed to the user so the API can save edits
    nx = _daemon(open_dir, upstream, name="nxdns",
                 config={"run_as": {"user": "nobody", "group": "nogroup"},
                         "logging": {"query_log": True},
                         "listener": {"workers": 2}})
    state = Path(nx.config["state_dir"])
    state.mkdir(parents=True)
    (state / "left-by-root").write_text("x")  # an old root-owned file is handed over too
    try:
        nx.start()
        assert nx.udp(make_query("drop.example")).rcode() == 0
        st = _status(nx.pid)
        assert st["Uid"].split() == [str(nobody.pw_uid)] * 4
        assert st["Gid"].split() == [str(nobody.pw_gid)] * 4
        assert st["Groups"] == ""
        for cap in ("CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd"):
            assert int(st[cap], 16) == 0, f"{cap} = {st[cap]}"
        assert st["NoNewPrivs"] == "1"
        # every thread, not only the main one (credentials are per thread)
        for tid in os.listdir(f"/proc/{nx.pid}/task"):
            tst = _status_task(nx.pid, tid)
            assert tst["Uid"].split()[0] == str(nobody.pw_uid)
            assert int(tst["CapEff"], 16) == 0 and int(tst["CapBnd"], 16) == 0
        assert "running as user nobody, group nogroup" in nx.log()
        wait_until(lambda: (state / "querylog.db").exists(), 5)
        for p in [state, state / "left-by-root", state / "querylog.db", state / "control.sock",
                  nx.config_path, nx.config_path.parent]:
            assert p.lstat().st_uid == nobody.pw_uid, f"{p} not handed over"
        # the user can write what it must: a SIGHUP reload and a state file both work
        nx.reload()
        wait_until(lambda: "generation 2 in effect" in nx.log(), 5)
    finally:
        nx.stop()


def _status_task(pid, tid) -> dict:
    out = {}
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


@pytest.mark.skipif(not ROOT, reason="needs root")
def test_config_outside_an_nxdns_directory_is_not_taken_over(open_dir, upstream):
    nx = _daemon(open_dir, upstream, name="elsewhere",
                 config={"run_as": {"user": "nobody"}})
    try:
        nx.start()
        assert nx.config_path.stat().st_uid == 0
        assert nx.config_path.parent.stat().st_uid == 0
        assert "the admin API's edits will fail to save" in nx.log()
    finally:
        nx.stop()


@pytest.mark.skipif(not ROOT, reason="needs root")
def test_unknown_run_as_user_is_a_config_error(tmp_path, upstream):
    nx = _daemon(tmp_path, upstream, config={"run_as": {"user": "nx-no-such-user"}})
    nx.start(wait=False)
    assert nx.proc.wait(timeout=10) == 2
    assert "run_as.user 'nx-no-such-user': no such user" in nx.log()


@pytest.mark.skipif(not ROOT, reason="needs root")
def test_state_dir_that_is_a_system_dir_is_refused(tmp_path, upstream):
    nx = _daemon(tmp_path, upstream, config={"run_as": {"user": "nobody"}, "state_dir": "/var"})
    nx.start(wait=False)
    assert nx.proc.wait(timeout=10) != 0
    assert "state_dir /var is a system directory" in nx.log()


@pytest.mark.skipif(not ROOT, reason="needs root")
def test_root_without_the_default_user_keeps_running_with_a_warning(tmp_path, upstream):
    try:
        pwd.getpwnam("nxdns")
        pytest.skip("a user nxdns exists here")
    except KeyError:
        pass
    nx = _daemon(tmp_path, upstream, config={"run_as": {"user": ""}})  # the default
    try:
        nx.start()
        assert "running as root: no user 'nxdns' to switch to" in nx.log()
        assert _status(nx.pid)["Uid"].split()[0] == "0"
        assert nx.udp(make_query("root.example")).rcode() == 0
    finally:
        nx.stop()


@pytest.mark.skipif(not ROOT, reason="needs root to start the daemon as another user")
def test_non_root_start_drops_the_bind_capability(open_dir, upstream):
    """The systemd shape: started as the user with CAP_NET_BIND_SERVICE ambient; the capability
    is gone once the sockets are bound."""
    nx = _daemon(open_dir, upstream, name="nxdns", config={"run_as": {"user": ""}})
    Path(nx.config["state_dir"]).mkdir(parents=True)
    shutil.chown(nx.config["state_dir"], "nobody", "nogroup")
    prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
              "--inh-caps=+net_bind_service", "--ambient-caps=+net_bind_service"]
    try:
        nx.start(prefix=prefix)
        st = _status(nx.pid)
        assert st["Uid"].split()[0] == str(pwd.getpwnam("nobody").pw_uid)
        for cap in ("CapEff", "CapPrm", "CapInh", "CapAmb"):
            assert int(st[cap], 16) == 0, f"{cap} = {st[cap]}"
        assert nx.udp(make_query("user.example")).rcode() == 0
        # issue 16: no user to switch to, so no user lookup, so glibc loads no NSS module
        # (libnss_systemd is 320 KiB resident, never unloaded)
        with open(f"/proc/{nx.pid}/maps") as f:
            nss = sorted({ln.split()[-1] for ln in f if "/libnss_" in ln})
        assert nss == [], f"NSS modules mapped without a user lookup: {nss}"
    finally:
        nx.stop()


# ---------------------------------------------------------------- bind failures

def _start_fails(nx: Nxdns, prefix=None) -> str:
    nx.start(wait=False, prefix=prefix)
    assert nx.proc.wait(timeout=15) != 0
    nx.stop()
    return nx.log()


def test_port_taken_names_the_holder(tmp_path, upstream):
    nx = _daemon(tmp_path, upstream)
    port = nx.port
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    holder.bind(("127.0.0.1", port))
    try:
        log = _start_fails(nx)
    finally:
        holder.close()
    me = Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    assert f"cannot listen on 127.0.0.1:{port}" in log
    assert f"port {port} is held by {me} (pid {os.getpid()})" in log


def test_admin_port_taken_names_the_holder(tmp_path, upstream):
    nx = _daemon(tmp_path, upstream)
    port = int(nx.admin.rsplit(":", 1)[1])
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", port))
    holder.listen(1)
    try:
        log = _start_fails(nx)
    finally:
        holder.close()
    me = Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    assert f"cannot start the admin listener on 127.0.0.1:{port}" in log
    assert f"port {port} is held by {me} (pid {os.getpid()})" in log


@pytest.mark.skipif(not ROOT, reason="another user's sockets are visible to root only")
def test_port_taken_by_systemd_resolved_gets_its_advice(tmp_path, upstream):
    # A stand-in named like systemd-resolved (its comm is cut to "systemd-resolve").
    fake = tmp_path / "systemd-resolved"
    shutil.copy(sys.executable, fake)
    port = free_port()
    code = ("import socket,sys,time;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
            f"s.bind(('127.0.0.1',{port}));print('up',flush=True);time.sleep(30)")
    p = subprocess.Popen([str(fake), "-c", code], stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"up"
        nx = _daemon(tmp_path, upstream, config={"listener": {"dns": [f"127.0.0.1:{port}"]}})
        log = _start_fails(nx)
    finally:
        p.kill()
        p.wait()
    assert f"port {port} is held by systemd-resolved's stub listener (pid {p.pid})" in log
    assert "DNSStubListener=no" in log


@pytest.mark.skipif(not ROOT, reason="needs root to start the daemon as another user")
def test_privileged_port_without_capability_says_how_to_fix(tmp_path, upstream):
    with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as f:
        if int(f.read()) <= 1:
            pytest.skip("every port is unprivileged here")
    d = Path(tempfile.mkdtemp(prefix="nxdns-svc-"))
    d.chmod(0o777)
    try:
        nx = _daemon(d, upstream, config={"listener": {"dns": ["127.0.0.1:1"]}})
        nx.workdir.chmod(0o777)
        log = _start_fails(nx, prefix=["setpriv", "--reuid=nobody", "--regid=nogroup",
                                       "--clear-groups", "--inh-caps=-all"])
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert "cannot listen on 127.0.0.1:1: Permission denied: port 1 is privileged" in log
    assert "CAP_NET_BIND_SERVICE" in log and "a port above 1023" in log


# ---------------------------------------------------------------- first boot

@pytest.mark.nx_timeout(120)
def test_first_boot_admin_loading_while_lists_compile(tmp_path, upstream):
    """Listeners wait for the first list load (never unfiltered); the admin answers meanwhile
    with /healthz 503 "loading", and the log says how far the load is per source."""
    lists = tmp_path / "lists"
    lists.mkdir()
    big = lists / "big.txt"
    with open(big, "w") as f:
        for i in range(600000):
            f.write(f"0.0.0.0 host{i}.big-list.example\n")
    small = lists / "small.txt"
    small.write_text("ads.small.example\n")
    nx = _daemon(tmp_path, upstream, config={"filter": {"sources": [
        {"name": "big", "path": str(big)}, {"name": "small", "path": str(small)}]}})
    rewrite_config(nx, nx.config)  # lists of mappings: written as JSON
    nx.start(wait=False)
    try:
        seen = wait_until(lambda: _healthz(nx), 20, interval=0.01)
        assert seen is not None, nx.log()
        code, body = seen
        if code == 200:
            pytest.fail("the list load ended before /healthz could be read: make the list "
                        "bigger\n" + nx.log())
        assert (code, body) == (503, "loading\n")
        # a reload or refresh signal during the load neither kills it nor is needed
        nx.send_signal(signal.SIGHUP)
        nx.send_signal(signal.SIGUSR1)
        # /metrics answers meanwhile and says where the load is
        m = nx.metrics()
        assert m.get("nxdns_lists_first_load") == 1
        assert m.get("nxdns_lists_first_load_steps") == 3  # two sources + the snapshot
        assert 1 <= m.get("nxdns_lists_first_load_step") <= 3
        # DNS is bound but silent: no answer, and never an unfiltered one
        with pytest.raises(dns.exception.Timeout):
            nx.udp(make_query("host5.big-list.example"), timeout=0.3)
        nx.wait_ready(60)
        assert nx.http_get("/healthz") == (200, "ok\n")
        assert nx.metrics().get("nxdns_lists_first_load") == 0
        r = nx.udp(make_query("host5.big-list.example"))
        assert r.answer and "0.0.0.0" in r.answer[0].to_text()
        log = nx.log()
        assert "loading lists: source 1 of 2 (big)" in log
        assert "loading lists: source 2 of 2 (small)" in log
        assert "loading lists: building the snapshot of 2 sources" in log
        assert log.index("loading lists: source 1 of 2") < log.index("serving DNS on")
        assert re.search(r"lists loaded in \d+ ms: \d+ entries", log)
    finally:
        nx.stop()


def _healthz(nx):
    try:
        return nx.http_get("/healthz", timeout=0.5)
    except OSError:
        return None


# ---------------------------------------------------------------- the journal

@pytest.mark.nx_timeout(60)
def test_journal_records_name_their_client(tmp_path, upstream):
    """Under the journal (JOURNAL_STREAM names stderr), every line is a native-protocol record
    with PRIORITY and NXDNS_SUBSYSTEM; the lines about one client (over its rate limit, refused
    at the admin login) carry NXDNS_CLIENT, and the message still names the client."""
    jpath = str(tmp_path / "journal.sock")
    journal = NotifySocket(jpath)  # the same KEY=VALUE datagrams
    nx = _daemon(tmp_path, upstream, config={
        "access": {"rate_limit": {"qps": 1, "burst": 1}},
        "query_budget": {"permits": 128},
        "admin": {"password_hash": password_hash()}})
    nx.log_path.parent.mkdir(parents=True, exist_ok=True)
    nx.log_path.touch()
    st = os.stat(nx.log_path)  # stderr is this file: the journal's check is its dev:inode
    try:
        nx.start(wait=False, env={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}",
                                  "NXDNS_JOURNAL_SOCKET": jpath})
        journal.read_until(lambda m: m.get("MESSAGE", "").startswith("serving DNS on"), 30)
        assert wait_until(lambda: nx.http_get("/healthz") == (200, "ok\n"), 10)
        # over the rate limit: 10 queries at once from 127.0.0.2 (burst 1)
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            c.bind(("127.0.0.2", 0))
            for i in range(10):
                c.sendto(make_query(f"q{i}.rl.example").to_wire(), ("127.0.0.1", nx.port))
        finally:
            c.close()
        rl = journal.read_until(lambda m: m.get("MESSAGE", "").startswith("rate limit:"))
        assert rl["NXDNS_CLIENT"] == "127.0.0.2", rl
        assert rl["NXDNS_SUBSYSTEM"] == "guard" and rl["PRIORITY"] == "4", rl
        assert rl["SYSLOG_IDENTIFIER"] == "nxdns"
        assert rl["MESSAGE"].startswith("rate limit: client 127.0.0.2 (prefix 127.0.0.2/32) "
                                        "over 1 queries/s"), rl
        # refused at the admin login after 5 wrong passwords, once
        api = Api(nx, source="127.0.0.3")
        for i in range(5):
            assert_error(api.post("/api/auth/login", {"password": f"wrong-{i}-password"}), 401)
        assert_error(api.post("/api/auth/login", {"password": "wrong-again"}), 429)
        lg = journal.read_until(lambda m: m.get("MESSAGE", "").startswith("login: client"))
        assert lg["NXDNS_CLIENT"] == "127.0.0.3", lg
        assert lg["NXDNS_SUBSYSTEM"] == "admin" and lg["PRIORITY"] == "4", lg
        assert lg["MESSAGE"] == "login: client 127.0.0.3 refused after 5 wrong passwords, " \
            "for up to 60 s", lg
        # lines about no one client have no such field
        serving = [m for m in journal.messages if m.get("MESSAGE", "").startswith("serving")]
        assert serving and "NXDNS_CLIENT" not in serving[0]
        assert nx.log() == "", "a record went to stderr instead of the journal"
    finally:
        nx.stop()
        journal.close()
