"""The systemd unit and the man page, from the build tree (no package needed): the unit has
what issue 15 asks of it, `systemd-analyze verify` passes and `security --offline=yes`
scores <= 2.0; nxdns(8) renders without warnings and names every command and config key."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

MAX_EXPOSURE = 2.0

REQUIRED = [
    "Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "User=nxdns",
    "AmbientCapabilities=CAP_NET_BIND_SERVICE", "CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
    "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
    "PrivateDevices=yes", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK",
    "SystemCallFilter=@system-service", "MemoryDenyWriteExecute=yes", "LockPersonality=yes",
    "RestrictNamespaces=yes", "WatchdogSec=", "StateDirectory=nxdns",
]


def unit_lines(path: Path):
    return [ln.strip() for ln in path.read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]


def exposure(unit: Path) -> float:
    p = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(unit)],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", p.stdout)
    assert m, p.stdout + p.stderr
    return float(m.group(1))


@pytest.fixture
def runnable_unit(build_dir, tmp_path):
    """The built unit with ExecStart on the built binary and nxdns(8) on MANPATH: what
    verify checks (executables exist, the Documentation= page resolves)."""
    man = tmp_path / "man" / "man8"
    man.mkdir(parents=True)
    shutil.copy(build_dir / "dist" / "nxdns.8", man)
    text = (build_dir / "dist" / "nxdns.service").read_text()
    sbin = re.search(r"^ExecStart=(\S+)/nxdns ", text, re.M).group(1)
    unit = tmp_path / "nxdns.service"
    unit.write_text(text.replace(f"{sbin}/nxdns", str(build_dir / "nxdns")))
    return unit, tmp_path / "man"


def test_unit_has_the_required_settings(build_dir):
    lines = unit_lines(build_dir / "dist" / "nxdns.service")
    for want in REQUIRED:
        assert any(ln.startswith(want) for ln in lines), f"missing {want}"
    # nothing but the bind capability, and no setuid-root style escape
    assert not any(ln.startswith("AmbientCapabilities=") and ln != REQUIRED[3] for ln in lines)


def test_unit_verifies(runnable_unit):
    unit, man = runnable_unit
    p = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True,
                       timeout=60, env={"MANPATH": str(man), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stderr.strip() == "", p.stderr


def test_unit_verify_catches_a_broken_unit(runnable_unit, tmp_path):
    """The check above can fail: a typo'd directive and a missing binary are reported."""
    unit, man = runnable_unit
    bad = tmp_path / "bad" / "nxdns.service"
    bad.parent.mkdir()
    bad.write_text(unit.read_text().replace("ExecStart=", "ExecStart=/nonexistent/x ", 1)
                   .replace("NoNewPrivileges=yes", "NoNewPrivileges=yes\nProtectSytem=strict"))
    p = subprocess.run(["systemd-analyze", "verify", str(bad)], capture_output=True, text=True,
                       timeout=60, env={"MANPATH": str(man), "PATH": "/usr/bin:/bin"})
    assert p.returncode != 0 or p.stderr.strip()
    assert "ProtectSytem" in p.stderr


def test_unit_security_score(build_dir):
    score = exposure(build_dir / "dist" / "nxdns.service")
    print(f"systemd-analyze security --offline=yes: {score}")
    assert score <= MAX_EXPOSURE


def test_security_score_would_catch_a_weaker_unit(build_dir, tmp_path):
    """Only the issue's minimum list: the analyzer scores it above the bar."""
    keep = ("Type=", "Exec", "User=", "Group=", "StateDirectory", "ReadWritePaths",
            "AmbientCapabilities", "NoNewPrivileges", "ProtectSystem", "ProtectHome",
            "PrivateTmp", "PrivateDevices", "RestrictAddressFamilies", "SystemCallFilter=@",
            "MemoryDenyWriteExecute", "LockPersonality", "RestrictNamespaces", "[", "Description")
    text = "\n".join(ln for ln in (build_dir / "dist" / "nxdns.service").read_text().splitlines()
                     if ln.startswith(keep))
    weak = tmp_path / "nxdns.service"
    weak.write_text(text + "\n")
    assert exposure(weak) > MAX_EXPOSURE


def test_man_page(build_dir):
    page = build_dir / "dist" / "nxdns.8"
    p = subprocess.run(["man", "--warnings", "-l", str(page)], capture_output=True, text=True,
                       timeout=30, env={"MANWIDTH": "100", "PATH": "/usr/bin:/bin",
                                        "MAN_KEEP_FORMATTING": ""})
    assert p.returncode == 0 and p.stderr.strip() == "", p.stderr
    text = p.stdout.replace("\u2010\n", "").replace("-\n", "")
    helptext = subprocess.run([str(build_dir / "nxdns"), "--help"], capture_output=True,
                              text=True).stdout
    cmds = re.findall(r"^  (\S+)\s", helptext, re.M)
    assert len(cmds) >= 8
    for c in cmds:
        assert re.search(rf"^\s+{re.escape(c)}\b", text, re.M), f"command {c} missing"
    docs = subprocess.run([str(build_dir / "nxdns"), "config-docs"], capture_output=True,
                          text=True).stdout
    keys = re.findall(r"^### `([^`]+)`", docs, re.M)
    assert "run_as.user" in keys and "listener.dns" in keys
    for k in keys:
        assert k in text, f"config key {k} missing from nxdns(8)"
