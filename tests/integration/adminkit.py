"""Helpers for the query-log, admin API and live-stream integration tests (issue 5).

- `start_nx(make_nxdns, upstreams, config, password=True)`: a daemon whose config is written as
  block YAML with flow-style (JSON) leaves, so lists of mappings (filter.sources, clients,
  local_records) fit; `password=True` puts the hash of `PASSWORD` in admin.password_hash (made
  once per run by `nxdns passwd`, the real CLI). `header` adds comment lines.
- `Api(nx)`: an HTTP client for the admin listener (no keep-alive, bounded timeouts) with an
  optional session (cookie + CSRF token, `login()`) or bearer token; `req()` returns a `Resp`
  (status, lower-cased headers, body, `.json`).
- `qlog_rows(nx)`: rows of `querylog.db` read with python's sqlite3 in read-only mode;
  `wait_written(nx, n)` waits for nxdns_querylog_written_total.
- `udp_burst(port, names)`: many queries over a few UDP sockets with a window; returns the
  number answered (a DNS-path liveness probe that does not depend on dnspython's speed).
- `SSE`: a raw-socket Server-Sent Events client (chunked transfer decoded), with an optional
  small SO_RCVBUF for a subscriber that does not read.
- `MountNS`: a private mount namespace holding a small tmpfs (root only): the daemon runs in
  it (nsenter), the test fills it up or remounts it read-only from outside.

Everything is bounded: sockets have timeouts, loops have deadlines, processes we start are
stopped by the fixture (daemons) or by `MountNS.close()`.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import socket
import sqlite3
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from harness import Nxdns, closed_port, nxdns_bin, wait_until

PASSWORD = "correct horse battery staple"

# ------------------------------------------------------------------ config

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def yaml_text(obj: dict, indent: int = 0) -> str:
    """Block mappings; every other value (scalars, lists, lists of mappings) as JSON, which is
    YAML flow style."""
    pad = "  " * indent
    out = []
    for k, v in obj.items():
        key = k if _KEY.fullmatch(k) else json.dumps(k)
        if isinstance(v, dict) and v:
            out.append(f"{pad}{key}:")
            out.append(yaml_text(v, indent + 1).rstrip("\n"))
        else:
            out.append(f"{pad}{key}: {json.dumps(v)}")
    return "\n".join(out) + "\n"


def write_config(nx: Nxdns, cfg: dict, header: str = ""):
    nx.config = cfg
    nx.write_config_text(header + yaml_text(cfg))


def run_cli(args: List[str], stdin: Optional[str] = None, timeout: float = 30.0):
    return subprocess.run([str(nxdns_bin())] + args, input=stdin, capture_output=True,
                          text=True, timeout=timeout)


_hash_cache: Dict[str, str] = {}


def passwd(config_path, password: str) -> subprocess.CompletedProcess:
    """`nxdns passwd --config FILE` with the password on stdin."""
    return run_cli(["passwd", "--config", str(config_path)], stdin=password + "\n")


def read_password_hash(config_path) -> Optional[str]:
    m = re.search(r'password_hash:\s*"?([^"\s]+)"?', Path(config_path).read_text())
    return m.group(1) if m else None


def password_hash(password: str = PASSWORD) -> str:
    """admin.password_hash for `password`, made once per run by the real `nxdns passwd`."""
    if password not in _hash_cache:
        with tempfile.TemporaryDirectory(prefix="nx-passwd-") as d:
            cfg = Path(d) / "c.yaml"
            cfg.write_text(yaml_text({"admin": {"enabled": True, "listen": "127.0.0.1:1"},
                                      "state_dir": d}))
            p = passwd(cfg, password)
            assert p.returncode == 0, f"nxdns passwd failed: {p.stderr}"
            h = read_password_hash(cfg)
            assert h and h.startswith("$argon2id$"), f"no argon2id hash in {cfg.read_text()}"
            _hash_cache[password] = h
    return _hash_cache[password]


def start_nx(make_nxdns, upstreams=(), config: Optional[dict] = None, password=True,
             start: bool = True, name: Optional[str] = None, header: str = "") -> Nxdns:
    """make_nxdns with our YAML writer; password=True sets admin.password_hash (PASSWORD),
    a string sets that password, False leaves none (setup-token mode). Without upstreams a
    closed loopback port stands in (the API tests need none)."""
    if not upstreams:
        upstreams = [f"127.0.0.1:{closed_port()}"]
    nx = make_nxdns(upstreams, config=config, start=False, name=name)
    cfg = nx.config
    if password:
        pw = PASSWORD if password is True else password
        cfg = dict(cfg)
        cfg["admin"] = dict(cfg["admin"], password_hash=password_hash(pw))
    write_config(nx, cfg, header)
    if start:
        nx.start()
    return nx


def db_path(nx: Nxdns) -> Path:
    return Path(nx.config["state_dir"]) / "querylog.db"


# ------------------------------------------------------------------ HTTP

class Resp:
    def __init__(self, status: int, headers: List[Tuple[str, str]], body: bytes):
        self.status = status
        self.header_list = headers
        self.headers = {k.lower(): v for k, v in headers}
        self.body = body

    @property
    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def all(self, name: str) -> List[str]:
        return [v for k, v in self.header_list if k.lower() == name.lower()]

    def __repr__(self):
        return f"<{self.status} {self.body[:300]!r}>"


def cookie_of(resp: Resp, name: str = "nxdns_session") -> Optional[str]:
    for v in resp.all("Set-Cookie"):
        first = v.split(";", 1)[0]
        if first.startswith(name + "="):
            return first[len(name) + 1:]
    return None


class Api:
    """Admin HTTP client. `cookie`/`csrf` (a session) or `token` (bearer) when set."""

    def __init__(self, nx: Nxdns, source: Optional[str] = None):
        host, port = nx.admin.rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.source = source  # bind to this local address (the login limiter is per address)
        self.cookie: Optional[str] = None
        self.csrf: Optional[str] = None
        self.token: Optional[str] = None

    def req(self, method: str, path: str, body=None, headers: Optional[dict] = None,
            auth: bool = True, raw: Optional[bytes] = None, timeout: float = 10.0) -> Resp:
        h = {}
        if auth and self.cookie:
            h["Cookie"] = f"nxdns_session={self.cookie}"
        if auth and self.csrf and method not in ("GET", "HEAD"):
            h["X-CSRF-Token"] = self.csrf
        if auth and self.token:
            h["Authorization"] = f"Bearer {self.token}"
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        if headers:
            for k, v in headers.items():
                if v is None:
                    h.pop(k, None)
                else:
                    h[k] = v
        src = (self.source, 0) if self.source else None
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout, source_address=src)
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return Resp(r.status, r.getheaders(), r.read())
        finally:
            c.close()

    def get(self, path, **kw) -> Resp:
        return self.req("GET", path, **kw)

    def post(self, path, body=None, **kw) -> Resp:
        return self.req("POST", path, body=body, **kw)

    def put(self, path, body=None, **kw) -> Resp:
        return self.req("PUT", path, body=body, **kw)

    def delete(self, path, body=None, **kw) -> Resp:
        return self.req("DELETE", path, body=body, **kw)

    def login(self, password: str = PASSWORD) -> Resp:
        r = self.post("/api/auth/login", {"password": password}, auth=False)
        if r.status == 200:
            self.cookie = cookie_of(r)
            self.csrf = r.json["csrf"]
        return r

    def ok(self, method: str, path: str, body=None, status=(200, 201, 202)) -> dict:
        """A request that must succeed; returns the JSON answer."""
        r = self.req(method, path, body=body)
        want = (status,) if isinstance(status, int) else status
        assert r.status in want, f"{method} {path} {body!r}: {r.status} {r.body[:500]!r}"
        return r.json


def logged_in(nx: Nxdns) -> Api:
    api = Api(nx)
    r = api.login()
    assert r.status == 200, f"login failed: {r}"
    return api


def assert_error(r: Resp, status: int, error: Optional[str] = None, field=Ellipsis):
    """An API error answer: the status, JSON {error, message, field?}."""
    assert r.status == status, f"expected {status}, got {r}"
    assert r.headers.get("content-type", "").startswith("application/json"), r.headers
    j = r.json
    assert isinstance(j.get("error"), str) and isinstance(j.get("message"), str), j
    if error is not None:
        assert j["error"] == error, j
    if field is not Ellipsis:
        assert j.get("field") == field, j
    return j


# ------------------------------------------------------------------ the query log

_READ_SCRIPT = """
import json, sqlite3, sys
con = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=5)
con.row_factory = sqlite3.Row
rows = [dict(r) for r in con.execute(sys.argv[2], json.loads(sys.argv[3])).fetchall()]
print(json.dumps(rows))
"""


def db_query(nx: Nxdns, sql: str, args=()) -> List[dict]:
    """Run a read-only query on querylog.db. A daemon in a MountNS (attribute `ns`) sees another
    file system: the query then runs inside that namespace (SQLite resolves the /proc/PID/root
    symlink, so that path cannot be opened from here)."""
    ns = getattr(nx, "ns", None)
    if ns is not None:
        p = ns.run("/usr/bin/python3", "-c", _READ_SCRIPT, str(db_path(nx)), sql,
                   json.dumps(list(args)))
        return json.loads(p.stdout)
    con = sqlite3.connect(f"file:{db_path(nx)}?mode=ro", uri=True, timeout=5)
    try:
        con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute(sql, args).fetchall()]
    finally:
        con.close()


def qlog_rows(nx: Nxdns, where: str = "", args=()) -> List[dict]:
    """Rows of the queries table (read-only connection), in id order."""
    return db_query(nx, f"SELECT * FROM queries {where} ORDER BY id", args)


def db_scalar(nx: Nxdns, sql: str, args=()):
    rows = db_query(nx, sql, args)
    return next(iter(rows[0].values())) if rows else None


def written(nx: Nxdns) -> float:
    return nx.counter("nxdns_querylog_written_total")


def wait_written(nx: Nxdns, at_least: float, timeout: float = 8.0) -> float:
    v = nx.wait_counter("nxdns_querylog_written_total", at_least, timeout=timeout)
    assert v >= at_least, (f"nxdns_querylog_written_total stayed at {v} (< {at_least}) for "
                           f"{timeout}s")
    return v


def wait_pushed_and_written(nx: Nxdns, timeout: float = 8.0, allow_drops: bool = False) -> float:
    """Wait until every pushed record is written; with allow_drops, written or dropped-and-counted
    (the rings drop the oldest under a burst)."""
    def done():
        m = nx.metrics()
        p = m.get("nxdns_querylog_pushed_total")
        w = m.get("nxdns_querylog_written_total")
        if allow_drops:
            w += m.get("nxdns_querylog_dropped_total", reason="oldest")
        return p if p > 0 and w >= p else None
    v = wait_until(done, timeout, 0.05)
    assert v, f"query log not caught up within {timeout}s"
    return v


# Codes stored in the queries table (src/querylog/querylog.h, src/filter/result.h).
ACTION = {"none": 0, "allow": 1, "block": 2, "local": 3}
REASON = {n: i for i, n in enumerate(["none", "paused", "local_record", "user_allow",
                                      "user_deny", "blocklist_exception", "blocklist_domain",
                                      "blocklist_wildcard"])}
PROTO = {"udp": 0, "tcp": 1, "dot": 2, "doh": 3}


# ------------------------------------------------------------------ DNS bursts

def wire_query(name: str, qid: int, qtype: int = 1) -> bytes:
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\x00" + struct.pack("!HH", qtype, 1)


def udp_burst(port: int, names: List[str], window: int = 32, sockets: int = 2,
              timeout: float = 10.0, host: str = "127.0.0.1") -> Tuple[int, float]:
    """Send every name once (A), at most `window` outstanding per socket. Returns (answered,
    worst seconds between a send and its answer). Unanswered queries are given up after 1 s."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(sockets)]
    for s in socks:
        s.setblocking(False)
        s.connect((host, port))
    pending: Dict[Tuple[int, int], float] = {}
    todo = list(enumerate(names))
    answered = 0
    worst = 0.0
    end = time.monotonic() + timeout
    qid = 0
    try:
        while (todo or pending) and time.monotonic() < end:
            for si, s in enumerate(socks):
                while todo and sum(1 for k in pending if k[0] == si) < window:
                    _, name = todo.pop()
                    qid = (qid + 1) & 0xFFFF
                    try:
                        s.send(wire_query(name, qid))
                    except BlockingIOError:
                        todo.append((0, name))
                        break
                    pending[(si, qid)] = time.monotonic()
            r, _, _ = select.select(socks, [], [], 0.05)
            now = time.monotonic()
            for s in r:
                si = socks.index(s)
                while True:
                    try:
                        data = s.recv(4096)
                    except (BlockingIOError, ConnectionRefusedError):
                        break
                    if len(data) >= 2:
                        t0 = pending.pop((si, struct.unpack("!H", data[:2])[0]), None)
                        if t0 is not None:
                            answered += 1
                            worst = max(worst, now - t0)
            for k, t0 in list(pending.items()):
                if now - t0 > 1.0:
                    pending.pop(k)
                    worst = max(worst, now - t0)
    finally:
        for s in socks:
            s.close()
    return answered, worst


# ------------------------------------------------------------------ Server-Sent Events

class SSE:
    """GET /api/queries/live over a raw socket. `status`, `headers` after connect(); `events()`
    decodes the chunked body into SSE events ("data" JSON-decoded)."""

    def __init__(self, api: Api, rcvbuf: Optional[int] = None, path: str = "/api/queries/live"):
        self.api = api
        self.path = path
        self.rcvbuf = rcvbuf
        self.sock: Optional[socket.socket] = None
        self.status = 0
        self.headers: Dict[str, str] = {}
        self.body_prefix = b""
        self._raw = b""      # undecoded chunked bytes
        self._text = b""     # decoded body not yet parsed into events
        self.chunked = False
        self.eof = False
        self.error_body = b""

    def connect(self, timeout: float = 5.0) -> "SSE":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if self.rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.rcvbuf)
        s.settimeout(timeout)
        s.connect((self.api.host, self.api.port))
        h = [f"GET {self.path} HTTP/1.1", f"Host: {self.api.host}:{self.api.port}",
             "Accept: text/event-stream"]
        if self.api.cookie:
            h.append(f"Cookie: nxdns_session={self.api.cookie}")
        if self.api.token:
            h.append(f"Authorization: Bearer {self.api.token}")
        s.sendall(("\r\n".join(h) + "\r\n\r\n").encode())
        self.sock = s
        buf = b""
        end = time.monotonic() + timeout
        while b"\r\n\r\n" not in buf:
            if time.monotonic() > end:
                raise TimeoutError("no response headers")
            chunk = s.recv(4096)
            if not chunk:
                raise ConnectionError(f"closed before the headers: {buf!r}")
            buf += chunk
        head, rest = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        if self.status != 200:
            n = int(self.headers.get("content-length", "0") or 0)
            while len(rest) < n and time.monotonic() < end:
                c = s.recv(4096)
                if not c:
                    break
                rest += c
            self.error_body = rest
        else:
            self._raw = rest
            self._decode()
        return self

    @property
    def error_json(self):
        return json.loads(self.error_body.decode())

    def _decode(self):
        if not self.chunked:
            self._text += self._raw
            self._raw = b""
            return
        while True:
            i = self._raw.find(b"\r\n")
            if i < 0:
                return
            size = int(self._raw[:i].split(b";")[0] or b"0", 16)
            if size == 0:
                self.eof = True
                self._raw = b""
                return
            if len(self._raw) < i + 2 + size + 2:
                return
            self._text += self._raw[i + 2:i + 2 + size]
            self._raw = self._raw[i + 2 + size + 2:]

    def read_some(self, timeout: float) -> bool:
        """Read what arrives within timeout; False at EOF/reset."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return True
        except (ConnectionResetError, BrokenPipeError):
            self.eof = True
            return False
        if not data:
            self.eof = True
            return False
        self._raw += data
        self._decode()
        return True

    def _parse(self) -> List[dict]:
        out = []
        while b"\n\n" in self._text:
            block, self._text = self._text.split(b"\n\n", 1)
            ev: dict = {}
            for line in block.decode("utf-8", "replace").split("\n"):
                if line.startswith(":"):
                    ev.setdefault("comment", line[1:].strip())
                    continue
                k, _, v = line.partition(":")
                v = v[1:] if v.startswith(" ") else v
                if k == "data":
                    ev["data"] = json.loads(v)
                else:
                    ev[k] = v
            out.append(ev)
        return out

    def events(self, timeout: float) -> List[dict]:
        """Events that arrive within timeout (returns early at EOF)."""
        end = time.monotonic() + timeout
        out = self._parse()
        while time.monotonic() < end and not self.eof:
            self.read_some(max(0.01, min(0.2, end - time.monotonic())))
            out += self._parse()
        return out

    def wait_for(self, pred, timeout: float) -> Tuple[Optional[dict], List[dict]]:
        """Read events until pred(data) holds for one; returns (it, every event seen)."""
        seen: List[dict] = []
        end = time.monotonic() + timeout
        while time.monotonic() < end and not self.eof:
            self.read_some(max(0.01, min(0.2, end - time.monotonic())))
            for ev in self._parse():
                seen.append(ev)
                if "data" in ev and pred(ev["data"]):
                    return ev["data"], seen
        return None, seen

    def wait_closed(self, timeout: float) -> bool:
        """Drain until the server closes the connection (True) or timeout (False)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.read_some(max(0.01, min(0.2, end - time.monotonic()))):
                return True
            if self.eof:
                return True
        return False

    def close(self):
        if self.sock:
            self.sock.close()
            self.sock = None


# ------------------------------------------------------------------ a private mount namespace

class MountNS:
    """A process holding a private mount namespace with a tmpfs of `size` on `path`. Run the
    daemon inside it (`popen_in`), change the mount from outside (`run`). Root only; `ok` is
    False (with `why`) when the machine does not allow it."""

    def __init__(self, path: Path, size: str = "4m"):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.ok = False
        self.why = ""
        self.holder: Optional[subprocess.Popen] = None
        if os.geteuid() != 0:
            self.why = "needs root (mount namespace + tmpfs)"
            return
        try:
            self.holder = subprocess.Popen(
                ["unshare", "-m", "--propagation", "private", "sh", "-c",
                 f"mount -t tmpfs -o size={size},mode=0755 tmpfs '{self.path}' && echo ready "
                 f"&& exec sleep 300"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as e:
            self.why = f"unshare: {e}"
            return
        r, _, _ = select.select([self.holder.stdout], [], [], 5)
        line = self.holder.stdout.readline() if r else ""
        if line.strip() != "ready":
            self.why = f"cannot mount a tmpfs in a private namespace: {self.holder.stderr.read()}"
            self.close()
            return
        self.ok = True

    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run(["nsenter", "-t", str(self.holder.pid), "-m", "--"] + list(cmd),
                           capture_output=True, text=True, timeout=15)
        if check:
            assert p.returncode == 0, f"{cmd}: {p.returncode} {p.stderr}"
        return p

    def start_daemon(self, nx: Nxdns, timeout: float = 20.0):
        """Start nx (as Nxdns.start does) inside the namespace: nsenter execs nxdns, so the
        process is the daemon itself (signals and exit code as usual)."""
        nx._logf = open(nx.log_path, "ab")
        nx.proc = subprocess.Popen(
            ["nsenter", "-t", str(self.holder.pid), "-m", "--", str(nxdns_bin()), "serve",
             "--config", str(nx.config_path)],
            stdin=subprocess.DEVNULL, stdout=nx._logf, stderr=nx._logf, cwd=nx.workdir)
        nx.exit_code = None
        nx.ns = self  # db_query reads its database inside the namespace
        nx.wait_ready(timeout)

    def fill(self, name: str = "filler") -> None:
        """Fill the tmpfs until ENOSPC."""
        self.run("sh", "-c", f"dd if=/dev/zero of='{self.path}/{name}' bs=64k 2>/dev/null; "
                             f"sync; true")

    def close(self):
        if self.holder and self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait(timeout=5)
        if self.holder:
            for f in (self.holder.stdout, self.holder.stderr):
                if f:
                    f.close()
        self.holder = None


# ------------------------------------------------------------------ the route table

_ROUTE = re.compile(r'\{\s*"(GET|POST|PUT|DELETE)",\s*"([^"]+)",\s*NX_ADMIN_(EXACT|PREFIX),\s*'
                    r'NX_ADMIN_AUTH_(\w+)')


def routes() -> List[Tuple[str, str, str, str]]:
    """(method, path, EXACT|PREFIX, auth) for every row of src/admin/routes.c."""
    from harness import REPO
    text = (REPO / "src" / "admin" / "routes.c").read_text()
    return [m.groups() for m in _ROUTE.finditer(text)]


def route_sample(method: str, path: str, match: str) -> str:
    """A concrete path a route row serves (PREFIX rows get a name after the prefix)."""
    if match == "EXACT":
        return path
    if path == "/api/filter/sources/" and method == "POST":
        return path + "nosuch/refresh"
    return path + "nosuch"
