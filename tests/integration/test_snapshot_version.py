"""A snapshot file of another format version (an earlier nxdns wrote it) is refused by the
loader and rebuilt from the compiled bodies at boot; decisions do not change.

The older file is simulated by rewriting the version field of a current one (the loader
checks the version right after the magic, before any checksum, so this is the path a real
version-1 file takes)."""
from __future__ import annotations

import struct
import subprocess

from filterkit import start_nx
from harness import nxdns_bin
from test_filter import PROBES, corpus_config, decisions

VERSION_OFF = 8  # after the 8-byte magic, u32 native (little-endian here)


def snapshot_version(path) -> int:
    with open(path, "rb") as f:
        head = f.read(12)
    assert head[:8] == b"NXSNAP\x01\n", head
    return struct.unpack_from("<I", head, VERSION_OFF)[0]


def test_old_snapshot_version_is_rebuilt_at_boot(make_upstream, make_nxdns, tmp_path):
    up = make_upstream()
    cfg = corpus_config(tmp_path)
    nx1 = start_nx(make_nxdns, [up], cfg, name="first")
    names = [p[0] for p in PROBES if p[1] is None]
    want = decisions(nx1, names)
    assert "block" in want and "allow" in want
    assert nx1.stop() == 0

    snap = nx1.workdir / "state" / "snapshot.nxs"
    current = snapshot_version(snap)
    assert current >= 2
    data = bytearray(snap.read_bytes())
    struct.pack_into("<I", data, VERSION_OFF, 1)
    snap.write_bytes(bytes(data))
    # the CLI refuses it and says what to do
    r = subprocess.run([str(nxdns_bin()), "lookup-snapshot", str(snap), "abp.test"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "another snapshot format version" in r.stderr, r

    cfg = dict(cfg, state_dir=str(nx1.workdir / "state"))
    nx2 = start_nx(make_nxdns, [up], cfg, name="second")
    log = nx2.log()
    assert "another snapshot format" in log and "rebuilding it" in log, log
    assert "snapshot built" in log and "mapped snapshot" not in log, log
    assert snapshot_version(snap) == current
    assert decisions(nx2, names) == want
    assert nx2.stop() == 0

    # the rebuilt file is current: the next boot maps it
    nx3 = start_nx(make_nxdns, [up], cfg, name="third")
    log = nx3.log()
    assert "mapped snapshot" in log and "snapshot built" not in log, log
    assert decisions(nx3, names) == want
