"""`make install` for other distributions: PREFIX and DESTDIR place the binary, nxdns(8), the
unit (with that prefix's paths) and the seed config; an existing config is never replaced."""
import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="module")
def restore_prefix(build_dir):
    """make install reconfigures the build's prefix; put back what the build had."""
    opts = json.loads(subprocess.run(["meson", "introspect", "--buildoptions", str(build_dir)],
                                     capture_output=True, text=True, check=True).stdout)
    keep = {o["name"]: o["value"] for o in opts if o["name"] in ("prefix", "sysconfdir")}
    yield
    subprocess.run(["meson", "configure", str(build_dir)] +
                   [f"-D{k}={v}" for k, v in keep.items()], capture_output=True, check=True)


def make_install(build_dir, destdir, prefix):
    p = subprocess.run(["make", "-C", str(ROOT), "install", f"BUILD={build_dir}",
                        f"PREFIX={prefix}", f"DESTDIR={destdir}"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr


def test_make_install_prefix_usr(build_dir, tmp_path):
    dest = tmp_path / "root"
    make_install(build_dir, dest, "/usr")
    for f in ["usr/sbin/nxdns", "usr/share/man/man8/nxdns.8", "usr/share/nxdns/nxdns.yaml",
              "usr/lib/systemd/system/nxdns.service", "etc/nxdns/nxdns.yaml"]:
        assert (dest / f).is_file(), f
    unit = (dest / "usr/lib/systemd/system/nxdns.service").read_text()
    assert "ExecStart=/usr/sbin/nxdns serve --config /etc/nxdns/nxdns.yaml" in unit
    assert "ReadWritePaths=/etc/nxdns\n" in unit
    assert (dest / "etc/nxdns/nxdns.yaml").read_text() == (ROOT / "dist/nxdns.yaml").read_text()
    assert (dest / "etc/nxdns/nxdns.yaml").stat().st_mode & 0o777 == 0o640


def test_make_install_keeps_an_existing_config_and_follows_prefix(build_dir, tmp_path):
    dest = tmp_path / "root"
    conf = dest / "opt/nx/etc/nxdns/nxdns.yaml"
    conf.parent.mkdir(parents=True)
    conf.write_text("# mine\nlistener: {dns: ['127.0.0.1:5300']}\n")
    make_install(build_dir, dest, "/opt/nx")
    assert conf.read_text().startswith("# mine")
    unit = (dest / "opt/nx/lib/systemd/system/nxdns.service").read_text()
    assert re.search(r"^ExecStart=/opt/nx/sbin/nxdns serve --config "
                     r"/opt/nx/etc/nxdns/nxdns.yaml$", unit, re.M)
    assert (dest / "opt/nx/sbin/nxdns").is_file()
