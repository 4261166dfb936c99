"""Integration-test harness: start the real nxdns binary, talk to it, read its /metrics.

Everything here is bounded: every socket call has a timeout, every wait has a deadline, and the
process is killed at teardown (the fixtures in conftest.py own that).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import dns.flags
import dns.message
import dns.query
import dns.rcode

REPO = Path(__file__).resolve().parents[2]


def nxdns_bin() -> Path:
    """The binary under test: $NXDNS_BIN (relative paths are relative to the repo), default
    build/nxdns."""
    p = Path(os.environ.get("NXDNS_BIN", "build/nxdns"))
    return p if p.is_absolute() else REPO / p


# -------------------------------------------------------------------- ports

_handed_out: set = set()
_port_lock = threading.Lock()


def _bindable(family, kind, host, port) -> bool:
    s = socket.socket(family, kind)
    try:
        if kind == socket.SOCK_STREAM:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port(v6: bool = True, udp: bool = True) -> int:
    """A port free for TCP (and UDP) on 127.0.0.1 (and ::1), not handed out before in this run."""
    with _port_lock:
        for _ in range(200):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if udp else socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            if port in _handed_out:
                continue
            checks = [(socket.AF_INET, socket.SOCK_STREAM, "127.0.0.1")]
            if udp:
                checks.append((socket.AF_INET, socket.SOCK_DGRAM, "127.0.0.1"))
            if v6:
                checks.append((socket.AF_INET6, socket.SOCK_STREAM, "::1"))
                if udp:
                    checks.append((socket.AF_INET6, socket.SOCK_DGRAM, "::1"))
            if all(_bindable(f, k, h, port) for f, k, h in checks):
                _handed_out.add(port)
                return port
        raise RuntimeError("no free loopback port")


def closed_port() -> int:
    """A loopback port with nothing listening on UDP or TCP (an unreachable upstream)."""
    return free_port(v6=False)


# -------------------------------------------------------------------- config

def _scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return json.dumps(str(v))  # a JSON string is a valid YAML double-quoted scalar


def to_yaml(obj: dict, indent: int = 0) -> str:
    """Block-style YAML for nested dicts whose leaves are scalars or lists of scalars."""
    pad = "  " * indent
    out = []
    for k, v in obj.items():
        key = k if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) else json.dumps(k)
        if isinstance(v, dict):
            if not v:
                out.append(f"{pad}{key}: {{}}")
            else:
                out.append(f"{pad}{key}:")
                out.append(to_yaml(v, indent + 1).rstrip("\n"))
        elif isinstance(v, (list, tuple)):
            out.append(f"{pad}{key}: [" + ", ".join(_scalar(x) for x in v) + "]")
        else:
            out.append(f"{pad}{key}: {_scalar(v)}")
    return "\n".join(out) + "\n"


def merge(base: dict, over: dict) -> dict:
    """Deep-merge `over` into a copy of `base`; a value of None deletes the key."""
    out = dict(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


# -------------------------------------------------------------------- metrics

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Metrics:
    """Parsed Prometheus text exposition: {(name, frozenset(labels)): value}."""

    def __init__(self, text: str):
        self.text = text
        self.series: Dict[Tuple[str, frozenset], float] = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = _LINE.match(line)
            if not m:
                continue
            labels = frozenset(_LABEL.findall(m.group(2) or ""))
            try:
                self.series[(m.group(1), labels)] = float(m.group(3))
            except ValueError:
                pass

    def has(self, name: str, **labels) -> bool:
        return (name, frozenset((k, str(v)) for k, v in labels.items())) in self.series

    def get(self, name: str, **labels) -> float:
        """The exact series (all labels given), 0.0 when absent."""
        return self.series.get((name, frozenset((k, str(v)) for k, v in labels.items())), 0.0)

    def sum(self, name: str, **labels) -> float:
        """Sum of every series of `name` whose labels include the given ones."""
        want = {(k, str(v)) for k, v in labels.items()}
        return sum(v for (n, ls), v in self.series.items() if n == name and want <= ls)

    def names(self) -> List[str]:
        return sorted({n for n, _ in self.series})


# -------------------------------------------------------------------- clients

def udp_query(q, port: int, host: str = "127.0.0.1", timeout: float = 3.0) -> dns.message.Message:
    return dns.query.udp(q, host, port=port, timeout=timeout)


def tcp_query(q, port: int, host: str = "127.0.0.1", timeout: float = 3.0) -> dns.message.Message:
    return dns.query.tcp(q, host, port=port, timeout=timeout)


def make_query(name: str, rdtype: str = "A", edns: Optional[int] = None, payload: int = 1232,
               want_dnssec: bool = False, id: Optional[int] = None) -> dns.message.Message:
    if edns is None:
        q = dns.message.make_query(name, rdtype, use_edns=False)
    else:
        q = dns.message.make_query(name, rdtype, use_edns=edns, payload=payload,
                                   want_dnssec=want_dnssec)
    if id is not None:
        q.id = id
    return q


def raw_udp(wire: bytes, port: int, host: str = "127.0.0.1",
            timeout: float = 2.0) -> Optional[bytes]:
    """Send one datagram, return the first reply or None when none arrives within timeout."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(wire, (host, port))
        try:
            return s.recvfrom(65535)[0]
        except socket.timeout:
            return None


def tcp_connect(port: int, host: str = "127.0.0.1", timeout: float = 3.0) -> socket.socket:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect((host, port))
    return s


def tcp_frame(wire: bytes) -> bytes:
    return struct.pack("!H", len(wire)) + wire


def _recv_exact(s: socket.socket, n: int) -> Optional[bytes]:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def tcp_read_msg(s: socket.socket, timeout: float = 3.0) -> Optional[bytes]:
    """One length-prefixed message; None when the peer closed (EOF or reset).
    Raises socket.timeout when nothing arrives in time."""
    s.settimeout(timeout)
    try:
        hdr = _recv_exact(s, 2)
        if hdr is None:
            return None
        return _recv_exact(s, struct.unpack("!H", hdr)[0])
    except (ConnectionResetError, BrokenPipeError):
        return None


def wait_closed(s: socket.socket, timeout: float) -> bool:
    """True when the peer closes (EOF/reset) within timeout; data that arrives is discarded."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        s.settimeout(max(0.01, end - time.monotonic()))
        try:
            if not s.recv(65535):
                return True
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


def header(wire: bytes) -> dict:
    """Decode the 12-byte DNS header of a raw message."""
    mid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", wire[:12])
    return dict(id=mid, qr=bool(flags & 0x8000), opcode=(flags >> 11) & 0xF,
                aa=bool(flags & 0x400), tc=bool(flags & 0x200), rd=bool(flags & 0x100),
                ra=bool(flags & 0x80), rcode=flags & 0xF, qdcount=qd, ancount=an, nscount=ns,
                arcount=ar)


def ede_codes(msg: dns.message.Message) -> List[int]:
    """Extended DNS Error codes (RFC 8914) in a reply."""
    out = []
    for opt in msg.options if msg.edns >= 0 else []:
        if opt.otype == 15:
            out.append(int(opt.code) if hasattr(opt, "code") else
                       struct.unpack("!H", opt.to_wire()[:2])[0])
    return out


def run(cmd: List[str], timeout: float = 15.0, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def wait_until(pred, timeout: float = 5.0, interval: float = 0.05):
    """Poll pred() until it returns a truthy value (returned) or the timeout (returns the last
    value)."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= end:
            return v
        time.sleep(interval)


# -------------------------------------------------------------------- the daemon

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "ERROR: ThreadSanitizer", "SUMMARY: UndefinedBehaviorSanitizer",
                     "WARNING: ThreadSanitizer")


class Nxdns:
    """One nxdns process on free loopback ports, its config in `workdir`."""

    def __init__(self, workdir: Path, config: dict, name: str = "nxdns"):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.config = config
        self.config_path = self.workdir / f"{name}.yaml"
        self.log_path = self.workdir / f"{name}.log"
        self.proc: Optional[subprocess.Popen] = None
        self.exit_code: Optional[int] = None
        self.write_config(config)

    # ------------------------------------------------------------ ports from the config

    @property
    def port(self) -> int:
        return int(self.config["listener"]["dns"][0].rsplit(":", 1)[1])

    @property
    def admin(self) -> str:
        return self.config["admin"]["listen"]

    # ------------------------------------------------------------ lifecycle

    def write_config(self, config: dict):
        self.config = config
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(to_yaml(config))
        os.replace(tmp, self.config_path)

    def write_config_text(self, text: str):
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.config_path)

    def start(self, wait: bool = True, timeout: float = 20.0, env: Optional[dict] = None,
              prefix: Optional[List[str]] = None) -> "Nxdns":
        """env: extra environment variables; prefix: a command the binary runs under
        (e.g. setpriv to start it as another user)."""
        binary = nxdns_bin()
        if not binary.exists():
            raise RuntimeError(f"nxdns binary not found: {binary} (set NXDNS_BIN)")
        self._logf = open(self.log_path, "ab")
        full_env = dict(os.environ, **env) if env else None
        self.proc = subprocess.Popen(list(prefix or []) +
                                     [str(binary.resolve()), "serve", "--config",
                                      str(self.config_path)],
                                     stdin=subprocess.DEVNULL, stdout=self._logf,
                                     stderr=self._logf, cwd=self.workdir, env=full_env)
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 20.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nxdns exited with {self.proc.returncode} before serving:\n"
                                   + self.log())
            if "serving" in self.log():
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"nxdns did not log 'serving' within {timeout}s:\n" + self.log())
        if self.config.get("admin", {}).get("enabled"):
            while time.monotonic() < end:
                try:
                    if self.http_get("/healthz", timeout=1)[0] == 200:
                        return
                except (OSError, urllib.error.URLError):
                    pass
                time.sleep(0.05)
            raise RuntimeError("admin /healthz did not return 200:\n" + self.log())

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout: float = 10.0) -> Optional[int]:
        """Signal and wait; returns the exit code (None if it had to be SIGKILLed)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
                self.exit_code = None
                self._logf.close()
                return None
        self.exit_code = self.proc.returncode
        self._logf.close()
        return self.exit_code

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def sanitizer_report(self) -> Optional[str]:
        text = self.log()
        for m in SANITIZER_MARKERS:
            if m in text:
                return text
        return None

    def reload(self, config: Optional[dict] = None):
        if config is not None:
            self.write_config(config)
        self.proc.send_signal(signal.SIGHUP)

    # ------------------------------------------------------------ admin

    def http_get(self, path: str, timeout: float = 3.0) -> Tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://{self.admin}{path}", timeout=timeout) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")

    def metrics(self) -> Metrics:
        code, body = self.http_get("/metrics")
        assert code == 200, f"/metrics returned {code}"
        return Metrics(body)

    def counter(self, name: str, **labels) -> float:
        return self.metrics().get(name, **labels)

    def wait_counter(self, name: str, at_least: float, timeout: float = 5.0, **labels) -> float:
        """Poll a series until it reaches at_least; returns its last value."""
        v = wait_until(lambda: (lambda x: x if x >= at_least else None)(
            self.counter(name, **labels)), timeout)
        return v if v is not None else self.counter(name, **labels)

    # ------------------------------------------------------------ /proc

    def threads(self) -> int:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
        raise RuntimeError("no Threads line")

    # ------------------------------------------------------------ queries

    def udp(self, q, v6: bool = False, timeout: float = 3.0) -> dns.message.Message:
        return udp_query(q, self.port, "::1" if v6 else "127.0.0.1", timeout)

    def tcp(self, q, v6: bool = False, timeout: float = 3.0) -> dns.message.Message:
        return tcp_query(q, self.port, "::1" if v6 else "127.0.0.1", timeout)


def base_config(workdir: Path, upstreams: List[str], port: Optional[int] = None,
                admin_port: Optional[int] = None) -> dict:
    port = port or free_port()
    admin_port = admin_port or free_port(v6=False, udp=False)
    return {
        "listener": {"dns": [f"127.0.0.1:{port}", f"[::1]:{port}"], "workers": 2},
        "upstream": {"servers": list(upstreams), "timeout_ms": 2000},
        "admin": {"enabled": True, "listen": f"127.0.0.1:{admin_port}"},
        # No cache: every query takes the forwarding path these tests exercise (a repeated
        # name must reach the fake upstream again). Cache tests turn it back on.
        "cache": {"size": 0},
        # Rate limiting off: every test client is 127.0.0.1 or ::1 and many tests send more
        # than the shipped 20 queries a second (burst 1000) on purpose; test_guard.py turns it
        # on with numbers of its own.
        "access": {"rate_limit": {"qps": 0}},
        "state_dir": str(Path(workdir) / "state"),
        # Records committed within a quarter of a second, as these tests read the database
        # and nxdns_querylog_written_total right after the queries; the default minute of
        # batching is tested on its own (test_querylog.py, test_querylog_batching_*).
        "logging": {"commit_interval": 0},
        "log": {"level": "debug"},
        # Whoever runs the tests stays the daemon's user: on a machine with an `nxdns` user
        # a root start would otherwise switch to it, and pytest's 0700 tmp dirs are root's.
        "run_as": {"user": pwd.getpwuid(os.geteuid()).pw_name},
    }


# -------------------------------------------------------------------- small assertions helpers

def answers(msg: dns.message.Message) -> List[str]:
    """Sorted rdata texts of every answer RRset."""
    return sorted(rd.to_text() for rs in msg.answer for rd in rs)


def parallel(fns, timeout: float = 15.0) -> list:
    """Run callables concurrently in threads; returns their results (an exception object in
    place of a result that raised). Bounded by timeout."""
    from concurrent.futures import ThreadPoolExecutor, wait as fwait
    with ThreadPoolExecutor(max_workers=max(1, len(fns))) as ex:
        futs = [ex.submit(f) for f in fns]
        done, not_done = fwait(futs, timeout=timeout)
        if not_done:
            raise TimeoutError(f"{len(not_done)} of {len(fns)} calls still running after {timeout}s")
        out = []
        for f in futs:
            e = f.exception()
            out.append(e if e is not None else f.result())
        return out


# -------------------------------------------------------------------- DoT and DoH listeners

def enc_listeners(dot: bool = True, doh: bool = True) -> dict:
    """A config fragment (for make_nxdns's `config`) with a DoT and/or a DoH listener, each on a
    free port of 127.0.0.1 and [::1] (the same port for both families, as `listener.dns`)."""
    lst = {}
    if dot:
        p = free_port(udp=False)
        lst["dot"] = [f"127.0.0.1:{p}", f"[::1]:{p}"]
    if doh:
        p = free_port(udp=False)
        lst["doh"] = [f"127.0.0.1:{p}", f"[::1]:{p}"]
    return {"listener": lst}


def _listener_port(config: dict, key: str) -> int:
    addrs = config.get("listener", {}).get(key) or []
    if not addrs:
        raise KeyError(f"the config has no listener.{key}")
    return int(addrs[0].rsplit(":", 1)[1])


def _nx_dot_port(self) -> int:
    """Port of the first listener.dot address."""
    return _listener_port(self.config, "dot")


def _nx_doh_port(self) -> int:
    """Port of the first listener.doh address."""
    return _listener_port(self.config, "doh")


def _nx_cert_path(self) -> Path:
    """The certificate the DoT/DoH listeners serve: tls.cert, else the generated one."""
    cert = self.config.get("tls", {}).get("cert")
    if cert:
        p = Path(cert)
        return p if p.is_absolute() else self.config_path.parent / p
    return Path(self.config["state_dir"]) / "tls" / "cert.pem"


def _nx_logged_pins(self) -> List[str]:
    """Every `pin-sha256: ...` the daemon logged for its certificate, oldest first."""
    return re.findall(r"pin-sha256: ([A-Za-z0-9+/]{43}=)", self.log())


def _nx_dot(self, q, v6: bool = False, timeout: float = 3.0, sni: Optional[str] = None,
            source: Optional[str] = None) -> dns.message.Message:
    """One query over DoT (dnspython), the certificate not verified (see tls_context)."""
    return dns.query.tls(q, "::1" if v6 else "127.0.0.1", port=self.dot_port, timeout=timeout,
                         ssl_context=tls_context(alpn=["dot"]), server_hostname=sni,
                         source=source)


def _nx_doh(self, q, post: bool = True, v6: bool = False, timeout: float = 3.0,
            path: str = "/dns-query") -> dns.message.Message:
    """One query over DoH (dnspython + httpx, HTTP/2), verified against the served cert."""
    host = "[::1]" if v6 else "127.0.0.1"
    return dns.query.https(q, f"https://{host}:{self.doh_port}{path}", timeout=timeout,
                           post=post, verify=str(self.cert_path))


Nxdns.dot_port = property(_nx_dot_port)
Nxdns.doh_port = property(_nx_doh_port)
Nxdns.cert_path = property(_nx_cert_path)
Nxdns.logged_pins = _nx_logged_pins
Nxdns.dot = _nx_dot
Nxdns.doh = _nx_doh


def tls_context(cafile: Optional[str] = None, alpn: Optional[List[str]] = None,
                server_name_check: bool = False):
    """A TLS 1.2+ client context. Without cafile the certificate is not verified (the tests
    that care compare the served certificate with the file instead); with it, the chain is
    verified and, when server_name_check, the name too."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cafile:
        ctx.load_verify_locations(cafile=str(cafile))
        ctx.check_hostname = server_name_check
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def tls_connect(port: int, host: str = "127.0.0.1", alpn: Optional[List[str]] = None,
                sni: Optional[str] = None, cafile: Optional[str] = None,
                source: Optional[str] = None, timeout: float = 3.0):
    """A TLS connection (handshake done) to host:port; the caller closes it."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    raw = socket.socket(fam, socket.SOCK_STREAM)
    raw.settimeout(timeout)
    try:
        if source:
            raw.bind((source, 0))
        raw.connect((host, port))
        return tls_context(cafile, alpn).wrap_socket(raw, server_hostname=sni)
    except BaseException:
        raw.close()
        raise


def served_cert(port: int, host: str = "127.0.0.1", alpn: Optional[List[str]] = None) -> bytes:
    """DER of the certificate a TLS listener serves to a new connection."""
    with tls_connect(port, host, alpn=alpn) as s:
        return s.getpeercert(binary_form=True)


def pem_der(path) -> bytes:
    """DER of the first certificate in a PEM file."""
    import ssl
    text = Path(path).read_text()
    m = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", text, re.S)
    if not m:
        raise ValueError(f"{path}: no PEM certificate")
    return ssl.PEM_cert_to_DER_cert(m.group(0))


def self_signed_pair(directory, *names: str) -> Tuple[Path, Path]:
    """`nxdns cert --self-signed DIR [--name N]...`: returns (cert.pem, key.pem)."""
    args = [str(nxdns_bin()), "cert", "--self-signed", str(directory)]
    for n in names:
        args += ["--name", n]
    r = run(args)
    if r.returncode != 0:
        raise RuntimeError(f"nxdns cert failed ({r.returncode}): {r.stderr}")
    return Path(directory) / "cert.pem", Path(directory) / "key.pem"


class H2Client:
    """An HTTP/2 client connection over TLS (ALPN h2) with the `h2` library, for the DoH tests
    that need to control frames: several streams at once, the order answers complete in, resets.
    Every read is bounded by `timeout`."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 3.0,
                 sni: Optional[str] = None):
        import h2.config
        import h2.connection
        self.sock = tls_connect(port, host, alpn=["h2"], sni=sni, timeout=timeout)
        if self.sock.selected_alpn_protocol() != "h2":
            self.sock.close()
            raise RuntimeError(f"ALPN chose {self.sock.selected_alpn_protocol()!r}, not h2")
        self.authority = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
        self.timeout = timeout
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.streams: Dict[int, dict] = {}
        self.done: List[int] = []  # stream ids in the order they ended (answer or reset)
        self.terminated = None     # the ConnectionTerminated event, once received
        self.remote_settings: Dict[int, int] = {}
        self.closed = False
        self.protocol_error: Optional[str] = None  # the server broke HTTP/2 (h2's verdict)
        self._flush()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def _flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, method: str, path: str, body: Optional[bytes] = None,
                headers: Optional[List[Tuple[str, str]]] = None, end: bool = True) -> int:
        """Open a stream with one request; returns its id. Sent at once."""
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", method), (":scheme", "https"), (":authority", self.authority),
                (":path", path)] + list(headers or [])
        if body is not None:
            hdrs.append(("content-length", str(len(body))))
        self.conn.send_headers(sid, hdrs, end_stream=end and body is None)
        self.streams[sid] = {"status": None, "headers": {}, "body": b"", "reset": None,
                             "ended": False}
        if body is not None:
            self._send_body(sid, body, end)
        self._flush()
        return sid

    def _send_body(self, sid: int, body: bytes, end: bool):
        # Within the peer's flow-control window and frame size; the rest waits for
        # WINDOW_UPDATE frames (read here, bounded).
        deadline = time.monotonic() + self.timeout
        while body:
            room = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
            if room <= 0:
                self._flush()
                if time.monotonic() > deadline or not self._read_once(deadline):
                    raise TimeoutError("the peer's flow-control window never opened")
                if self.streams[sid]["reset"] is not None:
                    return
                continue
            chunk, body = body[:room], body[room:]
            self.conn.send_data(sid, chunk, end_stream=end and not body)

    def get(self, path: str, headers=None) -> int:
        return self.request("GET", path, headers=headers)

    def post(self, path: str, body: bytes, ctype: str = "application/dns-message",
             headers=None) -> int:
        hdrs = ([("content-type", ctype)] if ctype else []) + list(headers or [])
        return self.request("POST", path, body=body, headers=hdrs)

    def _read_once(self, deadline: float) -> bool:
        """Read and process one chunk; False on EOF/timeout."""
        import h2.events
        self.sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = self.sock.recv(65535)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError, OSError):
            data = b""
        if not data:
            self.closed = True
            return False
        import h2.exceptions
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            # What the server sent breaks HTTP/2 (RFC 9113/9110): kept for the test to report.
            self.protocol_error = f"{type(e).__name__}: {e}"
            self.closed = True
            return False
        for ev in events:
            st = self.streams.get(getattr(ev, "stream_id", None) or -1)
            if isinstance(ev, h2.events.ResponseReceived) and st is not None:
                st["headers"] = {k: v for k, v in ev.headers}
                st["status"] = int(st["headers"].get(":status", 0))
            elif isinstance(ev, h2.events.DataReceived):
                if st is not None:
                    st["body"] += ev.data
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded) and st is not None:
                st["ended"] = True
                self.done.append(ev.stream_id)
            elif isinstance(ev, h2.events.StreamReset) and st is not None:
                st["reset"] = int(ev.error_code)
                self.done.append(ev.stream_id)
            elif isinstance(ev, h2.events.RemoteSettingsChanged):
                for k, v in ev.changed_settings.items():
                    self.remote_settings[int(k)] = v.new_value
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.terminated = ev
        self._flush()
        return True

    def wait(self, sids, timeout: Optional[float] = None) -> Dict[int, dict]:
        """Read until every stream in `sids` has ended or been reset; returns their records
        (status, headers, body, reset error code or None). Raises TimeoutError otherwise."""
        sids = [sids] if isinstance(sids, int) else list(sids)
        deadline = time.monotonic() + (timeout or self.timeout)
        while not all(s in self.done for s in sids):
            if time.monotonic() >= deadline or self.closed or self.terminated:
                missing = [s for s in sids if s not in self.done]
                raise TimeoutError(f"streams {missing} unfinished (closed={self.closed}, "
                                   f"goaway={self.terminated}, "
                                   f"protocol error={self.protocol_error})")
            self._read_once(deadline)
        return {s: self.streams[s] for s in sids}

    def wait_settings(self, timeout: Optional[float] = None) -> Dict[int, int]:
        """Read until the server's SETTINGS frame has arrived; returns what it set."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not self.remote_settings and time.monotonic() < deadline and not self.closed:
            self._read_once(deadline)
        return self.remote_settings


def b64url(wire: bytes) -> str:
    """Unpadded base64url (RFC 8484 4.1) of a DNS message, for `?dns=`."""
    import base64
    return base64.urlsafe_b64encode(wire).decode().rstrip("=")
