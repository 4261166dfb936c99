"""The Debian package end to end (issue 15): `scripts/make-deb` builds it with debhelper,
lintian finds no errors, `dpkg -i` creates the nxdns user and directories and seeds
/etc/nxdns/nxdns.yaml (not a conffile), the installed unit verifies and scores <= 2.0, the
installed binary started as root on a loopback test config drops to nxdns by itself and
answers a query, and purge removes its state.

The packaged production config is never started (it binds :53 and asks public upstreams).
Nothing starts the service either: with systemd as PID 1 dpkg would, so a policy-rc.d that
refuses (exit 101) is in place for the install. The machine is left as found, on failure
too: the package purged, the user and group removed, policy-rc.d removed when we made it.
Needs root and dpkg (a disposable test machine); skipped otherwise."""
import grp
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from fakeupstream import FakeUpstream
from harness import make_query, to_yaml, udp_query, free_port

ROOT = Path(__file__).resolve().parents[2]
POLICY = Path("/usr/sbin/policy-rc.d")

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="installs a package: needs root"),
    pytest.mark.skipif(shutil.which("dpkg-buildpackage") is None, reason="no dpkg-dev"),
]


def sh(*cmd, timeout=120, check=True, **kw):
    p = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def installed() -> bool:
    p = sh("dpkg-query", "-W", "-f=${Status}", "nxdns", check=False)
    return "install ok installed" in p.stdout or "config-files" in p.stdout


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    out = tmp_path_factory.mktemp("deb")
    # the unit tests already ran in this make test: nocheck keeps the package build short
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck")
    p = sh(str(ROOT / "scripts" / "make-deb"), str(out), timeout=1500, env=env)
    path = Path(p.stdout.strip().splitlines()[-1])
    version = sh("dpkg-parsechangelog", "-l", str(ROOT / "debian/changelog"), "-S",
                 "Version").stdout.strip()
    arch = sh("dpkg", "--print-architecture").stdout.strip()
    assert path == out / f"nxdns_{version}_{arch}.deb" and path.exists()
    return path


@pytest.fixture
def machine():
    """Install-time guards and the cleanup that restores the machine."""
    if installed():
        pytest.skip("nxdns is installed on this machine: the test would remove it")
    for p in ("/etc/nxdns", "/var/lib/nxdns"):
        if os.path.exists(p):
            pytest.skip(f"{p} exists: the test would remove it")
    had_user = _exists(pwd.getpwnam, "nxdns")
    had_group = _exists(grp.getgrnam, "nxdns")
    made_policy = not POLICY.exists()
    if made_policy:
        POLICY.write_text("#!/bin/sh\n# nxdns package test: no service starts\nexit 101\n")
        POLICY.chmod(0o755)
    try:
        yield
    finally:
        problems = []
        if installed():
            p = sh("dpkg", "--purge", "nxdns", check=False, timeout=120)
            if p.returncode != 0:
                problems.append(p.stdout + p.stderr)
        if not had_user and _exists(pwd.getpwnam, "nxdns"):
            sh("userdel", "nxdns", check=False)
        if not had_group and _exists(grp.getgrnam, "nxdns"):
            sh("groupdel", "nxdns", check=False)
        for p in ("/etc/nxdns", "/var/lib/nxdns"):
            shutil.rmtree(p, ignore_errors=True)
        if made_policy:
            POLICY.unlink(missing_ok=True)
        assert not problems, problems
        assert not installed()
        assert _exists(pwd.getpwnam, "nxdns") == had_user


def _exists(fn, name) -> bool:
    try:
        fn(name)
        return True
    except KeyError:
        return False


def test_lintian_finds_no_errors(deb):
    p = sh("lintian", "--no-tag-display-limit", str(deb), check=False, timeout=300)
    errors = [ln for ln in p.stdout.splitlines() if ln.startswith("E:")]
    assert not errors, p.stdout
    assert p.returncode in (0, 1), p.stderr  # 1: warnings only (none are errors)
    print(p.stdout or "lintian: clean")


def test_package_contents(deb):
    listing = sh("dpkg-deb", "-c", str(deb)).stdout
    files = {ln.split()[-1] for ln in listing.splitlines()}
    for want in ["./usr/sbin/nxdns", "./lib/systemd/system/nxdns.service",
                 "./usr/share/man/man8/nxdns.8.gz", "./usr/share/nxdns/nxdns.yaml"]:
        assert want in files, listing
    # the live config is seeded by postinst, not shipped (a conffile would prompt on upgrades)
    assert not any(f.startswith("./etc/") for f in files), listing
    arch = sh("dpkg-deb", "-f", str(deb), "Architecture").stdout.strip()
    assert arch == sh("dpkg", "--print-architecture").stdout.strip()
    shown = sh("dpkg-deb", "-f", str(deb), "Depends").stdout
    assert "adduser" in shown and "libuv1" in shown


def _wait_log(path: Path, text: str, proc, timeout: float) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        log = path.read_text(errors="replace") if path.exists() else ""
        if text in log:
            return log
        if proc.poll() is not None:
            raise AssertionError(f"nxdns exited {proc.returncode}:\n{log}")
        time.sleep(0.05)
    raise AssertionError(f"no '{text}' within {timeout}s:\n{path.read_text(errors='replace')}")


def test_install_run_as_nxdns_and_purge(deb, machine):
    p = sh("dpkg", "-i", str(deb), timeout=300,
           env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    assert "web admin is at http://" in p.stdout + p.stderr

    # the user and its directories
    u = pwd.getpwnam("nxdns")
    assert u.pw_uid < 1000 and u.pw_shell in ("/usr/sbin/nologin", "/bin/false")
    assert grp.getgrgid(u.pw_gid).gr_name == "nxdns"
    for d in ("/var/lib/nxdns", "/etc/nxdns"):
        st = os.stat(d)
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (u.pw_uid, u.pw_gid, 0o750), d
    cfg = Path("/etc/nxdns/nxdns.yaml")
    st = cfg.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (u.pw_uid, 0o640)
    assert cfg.read_text() == Path("/usr/share/nxdns/nxdns.yaml").read_text()
    assert sh("dpkg-query", "-W", "-f=${Conffiles}", "nxdns").stdout.strip() == ""
    sh("/usr/sbin/nxdns", "check-config", str(cfg))  # checked, never served
    assert sh("man", "-w", "nxdns").stdout.strip() == "/usr/share/man/man8/nxdns.8.gz"

    # the installed unit: verify and the security score
    unit = "/lib/systemd/system/nxdns.service"
    v = sh("systemd-analyze", "verify", unit, check=False)
    assert v.returncode == 0 and not v.stderr.strip(), v.stderr
    s = sh("systemd-analyze", "security", "--offline=yes", unit, check=False)
    score = float(re.search(r"Overall exposure level for \S+: (\d+\.\d+)", s.stdout).group(1))
    assert score <= 2.0, s.stdout

    # the installed binary on a loopback config: started as root, it becomes nxdns
    up = FakeUpstream(default_a="192.0.2.53").start()
    work = Path(tempfile.mkdtemp(prefix="nxdns-pkg-"))
    work.chmod(0o711)
    proc = None
    try:
        port = free_port()
        conf_dir = work / "nxdns"
        conf_dir.mkdir()
        conf = conf_dir / "test.yaml"
        conf.write_text(to_yaml({
            "listener": {"dns": [f"127.0.0.1:{port}", f"[::1]:{port}"], "workers": 1},
            "upstream": {"servers": [up.addr], "timeout_ms": 2000},
            "admin": {"enabled": True, "listen": f"127.0.0.1:{free_port(v6=False, udp=False)}"},
            "state_dir": str(work / "state"),
        }))
        log = work / "nxdns.log"
        with open(log, "wb") as lf:
            proc = subprocess.Popen(["/usr/sbin/nxdns", "serve", "--config", str(conf)],
                                    stdout=lf, stderr=lf, stdin=subprocess.DEVNULL)
        text = _wait_log(log, "serving DNS on", proc, 30)
        assert "running as user nxdns, group nxdns" in text
        status = Path(f"/proc/{proc.pid}/status").read_text()
        assert re.search(rf"^Uid:\s+{u.pw_uid}\s+{u.pw_uid}\s+{u.pw_uid}\s+{u.pw_uid}$",
                         status, re.M), status
        assert re.search(r"^CapEff:\s+0+$", status, re.M)
        r = udp_query(make_query("pkg.example"), port)
        assert r.rcode() == 0 and "192.0.2.53" in r.answer[0].to_text()
        assert (work / "state").stat().st_uid == u.pw_uid
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        proc = None
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        up.stop()
        shutil.rmtree(work, ignore_errors=True)

    # purge removes the state and the seeded config
    Path("/var/lib/nxdns/lists").mkdir(exist_ok=True)  # as a running service leaves it
    sh("dpkg", "--purge", "nxdns", timeout=120)
    assert not installed()
    for gone in ("/var/lib/nxdns", "/etc/nxdns", "/usr/sbin/nxdns", unit):
        assert not os.path.exists(gone), gone
