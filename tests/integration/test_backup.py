"""`nxdns backup` / `nxdns restore` (issue 15): the configuration, the list state and the query
log in one archive (layout: src/cli/backup.c), restored only after the whole archive checked
out, and a bad archive leaving everything as it was.

Round trip: a running server with a local blocklist, a local record and logged queries is
backed up (the query log copied consistently under its running writer), its state is then
damaged, each bad archive is refused with nothing changed (configuration bytes, every file
under state_dir, no staging left behind), the good one restores, and the restarted server
blocks, answers and lists its old queries as before.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import tarfile
from pathlib import Path

import dns.rcode
import pytest

from adminkit import (Api, assert_error, db_scalar, logged_in, run_cli, start_nx,
                      wait_written)
from harness import wait_until
from harness import answers, make_query


def tree(root: Path) -> dict:
    """Every file below root (control.sock aside) with its content's hash."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_socket() and p.name != "control.sock":
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def members(path: Path) -> list:
    with tarfile.open(path, "r:gz") as t:
        return t.getnames()


def tar_gz(path: Path, items: list):
    """items: (name, bytes | None for a directory | ("symlink", target))."""
    with tarfile.open(path, "w:gz") as t:
        for name, data in items:
            ti = tarfile.TarInfo(name)
            if data is None:
                ti.type = tarfile.DIRTYPE
                t.addfile(ti)
            elif isinstance(data, tuple):
                ti.type = tarfile.SYMTYPE
                ti.linkname = data[1]
                t.addfile(ti)
            else:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))


MANIFEST = b'{"format": "nxdns-backup", "version": 1, "querylog": false}'


@pytest.mark.nx_timeout(120)
def test_backup_restore_round_trip_and_bad_archives(tmp_path, make_upstream, make_nxdns):
    lst = tmp_path / "household.txt"
    lst.write_text("0.0.0.0 ads.example.com\n0.0.0.0 tracker.example.net\n")
    up = make_upstream(default_a="192.0.2.7")
    nx = start_nx(make_nxdns, [up], config={
        "filter": {"sources": [{"name": "household", "path": str(lst)}]},
        "local_records": [{"name": "nas.lan", "type": "A", "value": "192.168.1.10"}],
    })
    state = Path(nx.config["state_dir"])
    cfg = nx.config_path
    assert answers(nx.udp(make_query("ads.example.com"))) == ["0.0.0.0"]
    assert answers(nx.udp(make_query("nas.lan"))) == ["192.168.1.10"]
    assert answers(nx.udp(make_query("www.example.org"))) == ["192.0.2.7"]
    wait_written(nx, 3)
    rows = db_scalar(nx, "SELECT count(*) FROM queries")
    assert rows >= 3

    # backup while the server runs
    b = tmp_path / "box.nxbackup.tar.gz"
    p = run_cli(["backup", str(b), "--config", str(cfg), "--with-querylog"])
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(b.stat().st_mode) == 0o600
    names = members(b)
    assert names[0] == "nxdns-backup/manifest.json" and names[1] == "nxdns-backup/config.yaml"
    assert any(n.startswith("nxdns-backup/state/lists/household/") for n in names)
    assert "nxdns-backup/state/querylog.db" in names
    assert all(n.startswith("nxdns-backup/") for n in names)
    p = run_cli(["backup", str(b), "--config", str(cfg)])
    assert p.returncode == 2 and "--force" in p.stderr  # never over an existing file
    cfg_orig = cfg.read_bytes()
    lists_orig = tree(state / "lists")
    assert lists_orig

    # the query log is not replaced under a running writer
    before = tree(state)
    p = run_cli(["restore", str(b), "--config", str(cfg), "--with-querylog"])
    assert p.returncode == 1 and "stop it first" in p.stderr, p.stderr
    assert tree(state) == before and cfg.read_bytes() == cfg_orig

    assert nx.stop() == 0
    # the box loses its state and its config changes
    shutil.rmtree(state / "lists")
    (state / "snapshot.nxs").unlink()
    for f in state.glob("querylog.db*"):
        f.unlink()
    cfg.write_text(cfg_orig.decode().replace("192.168.1.10", "192.168.1.99"))
    damaged_cfg = cfg.read_bytes()
    damaged = tree(state)

    good = b.read_bytes()
    bad = {
        "not gzip": b"this is not an archive at all" * 10,
        "truncated": good[: len(good) // 2],
    }
    for name, data in bad.items():
        (tmp_path / "bad.tar.gz").write_bytes(data)
        _refused(tmp_path / "bad.tar.gz", cfg, state, damaged_cfg, damaged, name)
    cfg_text = cfg_orig
    crafted = {
        "no manifest": [("nxdns-backup/config.yaml", cfg_text)],
        "wrong format": [("nxdns-backup/manifest.json", b'{"format": "other", "version": 1}'),
                         ("nxdns-backup/config.yaml", cfg_text)],
        "newer version": [("nxdns-backup/manifest.json",
                           b'{"format": "nxdns-backup", "version": 2}'),
                          ("nxdns-backup/config.yaml", cfg_text)],
        "no config": [("nxdns-backup/manifest.json", MANIFEST)],
        "config does not load": [("nxdns-backup/manifest.json", MANIFEST),
                                 ("nxdns-backup/config.yaml", b"cache:\n  sise: 10\n")],
        "dot-dot": [("nxdns-backup/manifest.json", MANIFEST),
                    ("nxdns-backup/config.yaml", cfg_text),
                    ("nxdns-backup/state/lists/../../../evil", b"x")],
        "outside the layout": [("nxdns-backup/manifest.json", MANIFEST),
                               ("nxdns-backup/config.yaml", cfg_text),
                               ("nxdns-backup/state/passwd", b"x")],
        "outside the prefix": [("nxdns-backup/manifest.json", MANIFEST),
                               ("nxdns-backup/config.yaml", cfg_text),
                               ("etc/cron.d/evil", b"x")],
        "symlink": [("nxdns-backup/manifest.json", MANIFEST),
                    ("nxdns-backup/config.yaml", cfg_text),
                    ("nxdns-backup/state/lists/x/body", ("symlink", "/etc/shadow"))],
        # a good start and a bad member at the end: the lists read so far are not applied
        "bad after good": [("nxdns-backup/manifest.json", MANIFEST),
                           ("nxdns-backup/config.yaml", cfg_text),
                           ("nxdns-backup/state/lists/household/household.download", b"x"),
                           ("nxdns-backup/state/../oops", b"x")],
    }
    for name, items in crafted.items():
        tar_gz(tmp_path / "bad.tar.gz", items)
        _refused(tmp_path / "bad.tar.gz", cfg, state, damaged_cfg, damaged, name)
    p = run_cli(["restore", str(tmp_path / "missing.tar.gz"), "--config", str(cfg)])
    assert p.returncode == 1 and cfg.read_bytes() == damaged_cfg

    # the good archive
    p = run_cli(["restore", str(b), "--config", str(cfg), "--with-querylog"])
    assert p.returncode == 0, p.stderr
    assert cfg.read_bytes() == cfg_orig
    assert Path(str(cfg) + ".bak").read_bytes() == damaged_cfg
    assert tree(state / "lists") == lists_orig
    assert not list(state.glob(".restore-*")) and not list(cfg.parent.glob("*.restore-*"))

    nx.start()
    assert answers(nx.udp(make_query("ads.example.com"))) == ["0.0.0.0"]
    assert answers(nx.udp(make_query("nas.lan"))) == ["192.168.1.10"]
    assert db_scalar(nx, "SELECT count(*) FROM queries WHERE name = 'ads.example.com'") >= 1
    assert db_scalar(nx, "SELECT count(*) FROM queries") >= rows


def _refused(archive, cfg, state, cfg_bytes, files, what):
    p = run_cli(["restore", str(archive), "--config", str(cfg), "--with-querylog"])
    assert p.returncode == 1, f"{what}: {p.returncode} {p.stdout} {p.stderr}"
    assert "nothing was changed" in p.stderr, f"{what}: {p.stderr}"
    assert cfg.read_bytes() == cfg_bytes, what
    assert tree(state) == files, what
    assert not list(state.glob(".restore-*")), what
    assert not list(cfg.parent.glob("*.restore-*")), what
    assert not (state.parent / "evil").exists() and not (state / "oops").exists()


def test_restore_without_querylog_keeps_it(tmp_path, make_upstream, make_nxdns):
    """Without --with-querylog the archive's log is left in it and the live one stays."""
    up = make_upstream(default_a="192.0.2.7")
    nx = start_nx(make_nxdns, [up])
    nx.udp(make_query("one.example"))
    wait_written(nx, 1)
    b = tmp_path / "b.tar.gz"
    assert run_cli(["backup", str(b), "--config", str(nx.config_path),
                    "--with-querylog"]).returncode == 0
    nx.udp(make_query("two.example"))
    wait_written(nx, 2)
    p = run_cli(["restore", str(b), "--config", str(nx.config_path)])
    assert p.returncode == 0, p.stderr
    assert "query log" not in p.stdout
    assert db_scalar(nx, "SELECT count(*) FROM queries WHERE name = 'two.example'") == 1


@pytest.mark.nx_timeout(90)
def test_api_backup_and_restore(tmp_path, make_upstream, make_nxdns):
    """GET /api/backup downloads the archive; POST /api/restore (CSRF) takes it back as the
    body, refuses a bad one or one without the admin password with nothing changed, and
    reloads after a good one."""
    lst = tmp_path / "household.txt"
    lst.write_text("0.0.0.0 ads.example.com\n")
    up = make_upstream(default_a="192.0.2.7")
    nx = start_nx(make_nxdns, [up], config={
        "filter": {"sources": [{"name": "household", "path": str(lst)}]},
        "local_records": [{"name": "nas.lan", "type": "A", "value": "192.168.1.10"}],
    })
    state = Path(nx.config["state_dir"])
    cfg = nx.config_path
    assert_error(Api(nx).get("/api/backup"), 401, "unauthorized")
    api = logged_in(nx)
    r = api.get("/api/backup")
    assert r.status == 200, r
    assert r.headers["content-type"] == "application/gzip"
    assert r.headers["content-disposition"].startswith('attachment; filename="nxdns-backup-')
    archive = tmp_path / "api.tar.gz"
    archive.write_bytes(r.body)
    names = members(archive)
    assert names[:2] == ["nxdns-backup/manifest.json", "nxdns-backup/config.yaml"]
    assert any(n.startswith("nxdns-backup/state/lists/household/") for n in names)
    assert "nxdns-backup/state/querylog.db" not in names
    assert not list(state.glob(".backup-api-*"))  # the file is gone once sent
    r = api.get("/api/backup?querylog=true")
    assert r.status == 200 and "-querylog" in r.headers["content-disposition"]
    assert_error(api.get("/api/backup?querylog=maybe"), 400, "bad_request", "querylog")

    cfg_orig = cfg.read_bytes()
    # the box's config changes (as an edit would)
    cfg.write_text(cfg_orig.decode().replace("192.168.1.10", "192.168.1.99"))
    nx.reload()
    assert wait_until(lambda: answers(nx.udp(make_query("nas.lan"))) == ["192.168.1.99"]
                      or None, timeout=5)
    changed = cfg.read_bytes()
    files = tree(state)

    # the restore route: CSRF, a body, a good archive
    nocsrf = Api(nx)
    nocsrf.cookie = api.cookie
    assert nocsrf.req("POST", "/api/restore", raw=archive.read_bytes()).status == 403
    assert_error(api.req("POST", "/api/restore", raw=b"not an archive"), 400, "bad_archive")
    assert_error(api.req("POST", "/api/restore", raw=b""), 400, "bad_archive")
    nopw = tmp_path / "nopw.tar.gz"
    text = "\n".join(l for l in cfg_orig.decode().splitlines() if "password_hash" not in l)
    tar_gz(nopw, [("nxdns-backup/manifest.json", MANIFEST),
                  ("nxdns-backup/config.yaml", text.encode() + b"\n")])
    r = api.req("POST", "/api/restore", raw=nopw.read_bytes())
    assert_error(r, 400, "bad_archive")
    assert "no admin password" in r.json["message"]
    assert cfg.read_bytes() == changed and tree(state) == files
    assert not list(state.glob(".upload-*")) and not list(state.glob(".restore-*"))

    r = api.req("POST", "/api/restore", raw=archive.read_bytes(),
                headers={"Content-Type": "application/gzip"})
    assert r.status == 200, r
    assert r.json["config"] is True and r.json["lists"] is True and r.json["querylog"] is False
    assert cfg.read_bytes() == cfg_orig
    assert answers(nx.udp(make_query("nas.lan"))) == ["192.168.1.10"]  # reloaded
    assert answers(nx.udp(make_query("ads.example.com"))) == ["0.0.0.0"]
    assert not list(state.glob(".upload-*"))


def _raw_upload_status(api, headers: str) -> int:
    import socket
    with socket.create_connection((api.host, api.port), timeout=5) as s:
        s.sendall(f"POST /api/restore HTTP/1.1\r\nHost: nxdns\r\n{headers}\r\n".encode())
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ", 2)[1])


def test_restore_upload_refused_from_its_headers(make_nxdns):
    """The restore's body is refused from its headers, before any byte is stored: without
    credentials (401) and over the upload limit (413)."""
    nx = start_nx(make_nxdns)
    state = Path(nx.config["state_dir"])
    api = logged_in(nx)
    assert _raw_upload_status(api, "Content-Length: 1000\r\n") == 401
    auth = f"Cookie: nxdns_session={api.cookie}\r\nX-CSRF-Token: {api.csrf}\r\n"
    assert _raw_upload_status(api, auth + "Content-Length: 5000000000\r\n") == 413
    assert _raw_upload_status(api, f"Cookie: nxdns_session={api.cookie}\r\n"
                              "Content-Length: 1000\r\n") == 403  # no CSRF token
    assert not list(state.glob(".upload-*"))
    assert nx.metrics().get("nxdns_admin_http_refused_total", reason="body_too_large") == 1
