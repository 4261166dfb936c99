"""The unit under a real systemd as PID 1 (issue 15): systemd-nspawn boots this machine's own
root as a throw-away container (`--volatile=overlay`: every write lands in a tmpfs and is gone
at exit; `--private-network`: loopback only), with the built binary at /usr/sbin/nxdns and the
unit the package installs (dist/nxdns.service.in with the package's paths). A probe unit ordered
after nxdns.service checks what only a real service manager shows: the unit active with the
daemon's own READY/STATUS, the process as the nxdns user with no capability, a blocked answer
over DNS, `systemctl reload` (SIGHUP) acknowledged, journal records with nxdns's fields; then
it powers the container off. Root and systemd-nspawn (package systemd-container, or
$NXDNS_NSPAWN) are needed, else the test is skipped and says why.

Where systemd-nspawn comes from in CI: scripts/bootstrap installs systemd-container pinned to
the installed systemd's exact version (`systemd-container=$(dpkg-query -W systemd)`). The
package depends on libsystemd-shared (= its own version), so a plain `apt-get install` takes
the archive's newest and upgrades the machine's whole systemd set (252.38 -> 252.39 on the CI
image); pinned, it adds one package and leaves systemd as found. It is a real dpkg install, so
its binary links the installed libsystemd-shared by construction, which an extracted private
copy of another version would not (plan (b), not taken); upgrading systemd (plan (c)) was not
needed while the archive keeps that version. When it has dropped it, bootstrap upgrades systemd
and systemd-container together (a stable update; PID 1 on the CI machine is not systemd) rather
than letting CI skip this test; NXDNS_NO_NSPAWN=1 opts out and the test skips. Measured here: the
container boots, is probed and powers off in ~3 s (~4 s for the test)."""
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UID = 64990  # the nxdns user inside the container only (a passwd file bound over the host's)

CONFIG = """listener:
  dns: ["127.0.0.1:53"]
  workers: 1
upstream:
  servers: ["127.0.0.1:5399"]
  timeout_ms: 500
admin:
  enabled: true
  listen: "127.0.0.1:8080"
state_dir: /var/lib/nxdns
filter:
  deny: ["blocked.test"]
logging:
  query_log: false
"""

PROBE = r"""#!/bin/sh
# runs inside the container after nxdns.service started (or failed)
exec > /out/probe.txt 2>&1
systemctl show -p ActiveState -p SubState -p StatusText -p NRestarts nxdns
pid=$(systemctl show -p MainPID --value nxdns)
echo "MainPID=$pid"
grep -E '^(Uid|Gid|CapEff|CapPrm|CapAmb):' /proc/$pid/status | tr '\t' ' ' | sed 's/: */=/'
echo "dig=$(dig +time=2 +tries=1 +short @127.0.0.1 -p 53 blocked.test A)"
systemctl reload nxdns
echo "reload_rc=$?"
systemctl show -p StatusText nxdns | sed 's/^/after_reload_/'
journalctl -u nxdns -o verbose --no-pager | grep -c 'NXDNS_SUBSYSTEM=daemon' | sed 's/^/journal_daemon=/'
journalctl -u nxdns -o cat --no-pager | sed 's/^/log: /'
"""

PROBE_UNIT = """[Unit]
Description=probe nxdns, then power the container off
After=nxdns.service
Wants=nxdns.service
[Service]
Type=oneshot
ExecStart=/bin/sh /out/probe.sh
ExecStopPost=/bin/systemctl --no-block poweroff
"""

TARGET = """[Unit]
Description=nxdns under systemd, probed
Wants=nxdns.service nxdns-probe.service
"""


def nspawn_binary():
    return os.environ.get("NXDNS_NSPAWN") or shutil.which("systemd-nspawn")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a container, mounts)")
@pytest.mark.skipif(not nspawn_binary(), reason="systemd-nspawn not installed "
                    "(scripts/bootstrap installs systemd-container pinned to the installed "
                    "systemd; or set NXDNS_NSPAWN)")
def test_unit_under_systemd_as_pid1(build_dir, tmp_path):
    d = tmp_path
    (d / "root").mkdir()
    (d / "out").mkdir()
    (d / "etc" / "nxdns").mkdir(parents=True)
    (d / "etc" / "nxdns" / "nxdns.yaml").write_text(CONFIG)
    unit = (ROOT / "dist" / "nxdns.service.in").read_text()
    (d / "nxdns.service").write_text(unit.replace("@sbindir@", "/usr/sbin")
                                     .replace("@sysconfdir@", "/etc"))
    (d / "nxdns-probe.service").write_text(PROBE_UNIT)
    (d / "probe.target").write_text(TARGET)
    (d / "out" / "probe.sh").write_text(PROBE)
    (d / "passwd").write_text(Path("/etc/passwd").read_text()
                              + f"nxdns:x:{UID}:{UID}:nxdns:/var/lib/nxdns:/usr/sbin/nologin\n")
    (d / "group").write_text(Path("/etc/group").read_text() + f"nxdns:x:{UID}:\n")
    binds = [("--bind-ro", build_dir / "nxdns", "/usr/sbin/nxdns"),
             ("--bind-ro", d / "nxdns.service", "/etc/systemd/system/nxdns.service"),
             ("--bind-ro", d / "nxdns-probe.service",
              "/etc/systemd/system/nxdns-probe.service"),
             ("--bind-ro", d / "probe.target", "/etc/systemd/system/probe.target"),
             ("--bind-ro", d / "passwd", "/etc/passwd"), ("--bind-ro", d / "group", "/etc/group"),
             ("--bind", d / "etc" / "nxdns", "/etc/nxdns"), ("--bind", d / "out", "/out")]
    args = [nspawn_binary(), "-D", str(d / "root"), "--volatile=overlay", "--private-network",
            "--register=no", "--keep-unit", "--link-journal=no", "--console=pipe",
            f"--uuid={uuid.uuid4().hex}", "-M", "nxdns-probe"]
    args += [f"{opt}={src}:{dst}" for opt, src, dst in binds]
    args += ["-b", "systemd.unit=probe.target"]
    # nspawn refuses "/" itself: the host root without its submounts, bound in a private mount
    # namespace of our own, is the container's lower layer
    script = f"mount --make-rprivate / && mount --bind / {d / 'root'} && exec \"$@\""
    had_nspawn_run = Path("/run/systemd/nspawn").exists()
    t0 = time.monotonic()
    try:
        p = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", *args],
                           capture_output=True, text=True, timeout=120)
    finally:
        if not had_nspawn_run:  # nspawn's empty lock and propagation directories
            for sub in ("locks", "propagate", ""):
                try:
                    os.rmdir(f"/run/systemd/nspawn/{sub}".rstrip("/"))
                except OSError:
                    pass
    took = time.monotonic() - t0
    out = (d / "out" / "probe.txt")
    assert out.exists(), \
        f"the probe never ran ({took:.1f} s):\n{p.stdout[-3000:]}{p.stderr[-3000:]}"
    text = out.read_text()
    kv = dict(ln.split("=", 1) for ln in text.splitlines()
              if "=" in ln and not ln.startswith("log: "))
    print(f"container boot, probe and poweroff: {took:.1f} s\n{text}")
    assert kv.get("ActiveState") == "active" and kv.get("SubState") == "running", text
    assert kv.get("StatusText") == "serving", text  # READY=1 with STATUS, from the daemon
    assert kv.get("NRestarts") == "0", text
    assert kv["Uid"].split() == [str(UID)] * 4 and kv["Gid"].split() == [str(UID)] * 4, text
    assert int(kv["CapEff"], 16) == 0 and int(kv["CapPrm"], 16) == 0, text
    assert int(kv["CapAmb"], 16) == 0, text
    assert kv.get("dig") == "0.0.0.0", text
    assert kv.get("reload_rc") == "0", text
    assert kv.get("after_reload_StatusText") == "serving (reloaded)", text
    assert int(kv.get("journal_daemon", "0")) >= 1, text
    assert "log: serving DNS on 127.0.0.1:53" in text
    assert p.returncode == 0, p.stderr[-2000:]
