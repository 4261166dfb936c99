"""Real DNS-over-TLS and DNS-over-HTTPS servers on loopback, for the encrypted-upstream tests.

nxdns's own DoT/DoH client is what the tests prove; everything else they lean on is an
independent implementation, checked by kdig in test_upstream_encrypted.py's fixture tests:

- `Cert`: a key pair written by `nxdns cert --self-signed DIR` (SANs: the names, 127.0.0.1, ::1)
  and the `pin-sha256:` it prints (base64 SHA-256 of the SPKI, as `kdig +tls-pin` takes it).
- `Unbound`: Debian's unbound answering only local data (`local-zone: "." static`, so no name
  ever reaches the iterator and nothing leaves loopback), DoT on `dot_port`, DoH (HTTP/2,
  `/dns-query`) on `doh_port`, plain DNS on `plain_port`; `log-queries` into its log, and
  `stats()` through unbound-control on a control socket in the tmp dir (`dot_queries()`,
  `doh_queries()` from its num.query.tls / num.query.https counters).
- `Kresd`: Knot Resolver 5.6 as a second implementation: `net.listen` kinds `tls` and `doh2`,
  names answered by `policy.ANSWER` (NODATA for other types), every other query DENYed (that
  includes its own priming queries: it never iterates); `queries()` through its control socket.
- `SilentTcp`: a "dead" DoT server: accepts TCP connections, reads and discards, never speaks.
  For a server that refuses, use `harness.closed_port()`.
- `TcpRelay`: a byte-for-byte TCP relay in front of a server that counts the connections
  through it: an independent witness of connection reuse (TLS is end to end through it, and
  it listens on 127.0.0.1 as well, so the certificate's IP SAN still matches).

Every server runs on free 127.0.0.1 ports, as the current user, with its files and log in the
test's tmp dir, and is stopped by its own PID (Popen) at teardown. Every wait has a deadline.
The fixtures at the end (`make_cert`, `make_unbound`, `make_kresd`, `silent_tcp`, `make_relay`)
own the teardown; conftest.py loads this file as a plugin, so every test module has them.
"""

from __future__ import annotations

import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from harness import free_port, nxdns_bin, run, wait_until

UNBOUND = shutil.which("unbound") or "/usr/sbin/unbound"
UNBOUND_CONTROL = shutil.which("unbound-control") or "/usr/sbin/unbound-control"
KRESD = shutil.which("kresd") or "/usr/sbin/kresd"
KDIG = shutil.which("kdig") or "/usr/bin/kdig"

# A record set per name: [(type, rdata text), ...]
Records = Dict[str, List[Tuple[str, str]]]


def _need(binary: str, package: str):
    if not Path(binary).exists():
        pytest.skip(f"{binary} not installed (Debian package {package}: scripts/bootstrap)")


def _port() -> int:
    # IPv4 only (the servers listen on 127.0.0.1), free for TCP and UDP: unbound opens both on
    # every interface line.
    return free_port(v6=False)


def _wait_tcp(port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def _stop_proc(proc: Optional[subprocess.Popen], timeout: float = 5.0) -> Optional[int]:
    """SIGTERM by PID, then SIGKILL after timeout; returns the exit code."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    return proc.returncode


# -------------------------------------------------------------------- certificates

class Cert:
    """DIR/cert.pem + DIR/key.pem from `nxdns cert --self-signed DIR [--name N]...`."""

    def __init__(self, directory: Path, names: Sequence[str] = ()):
        self.dir = Path(directory)
        self.names = list(names)
        self.dir.parent.mkdir(parents=True, exist_ok=True)  # nxdns cert makes DIR, not its parents
        args = [str(nxdns_bin()), "cert", "--self-signed", str(self.dir)]
        for n in names:
            args += ["--name", n]
        r = run(args)
        if r.returncode != 0:
            raise RuntimeError(f"nxdns cert failed ({r.returncode}): {r.stderr}")
        m = re.fullmatch(r"pin-sha256: ([A-Za-z0-9+/]{43}=)\n", r.stdout)
        if not m:
            raise RuntimeError(f"nxdns cert printed no pin: {r.stdout!r}")
        self.pin = m.group(1)
        self.cert = self.dir / "cert.pem"
        self.key = self.dir / "key.pem"


# -------------------------------------------------------------------- kdig, the reference client

def kdig(port: int, name: str, rdtype: str = "A", https: bool = False, pin: Optional[str] = None,
         ca: Optional[Path] = None, system_ca: bool = False, hostname: Optional[str] = None,
         timeout: float = 10.0, prefix: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """kdig over TLS (DoH with https=True, POST to /dns-query) to 127.0.0.1:port. Trust: a pin,
    a CA file, or the system store (system_ca); hostname is checked against the certificate.
    `prefix` runs it under another command (nsenter into a namespace)."""
    args = [KDIG, "@127.0.0.1", "-p", str(port), "+tls", "+time=2", "+retry=0", "+nocookie"]
    if https:
        args.append("+https=/dns-query")
    if pin:
        args.append(f"+tls-pin={pin}")
    if ca:
        args.append(f"+tls-ca={ca}")
    if system_ca:
        args.append("+tls-ca")
    if hostname:
        args.append(f"+tls-hostname={hostname}")
    return run(list(prefix) + args + [name, rdtype], timeout=timeout)


def kdig_rdata(r: subprocess.CompletedProcess, rdtype: str = "A") -> List[str]:
    """The rdata of the answer records of type rdtype in kdig's output (sorted)."""
    out = []
    in_answer = False
    for line in r.stdout.splitlines():
        if line.startswith(";; ANSWER SECTION"):
            in_answer = True
            continue
        if in_answer:
            if not line.strip() or line.startswith(";;"):
                in_answer = False
                continue
            f = line.split()
            if len(f) >= 5 and f[3] == rdtype:
                out.append(" ".join(f[4:]))
    return sorted(out)


def kdig_status(r: subprocess.CompletedProcess) -> Optional[str]:
    m = re.search(r"status: ([A-Z]+)", r.stdout)
    return m.group(1) if m else None


# -------------------------------------------------------------------- unbound

class Unbound:
    """Debian's unbound serving only `records`, over DoT, DoH and plain DNS on 127.0.0.1."""

    def __init__(self, workdir: Path, cert: Cert, records: Records):
        _need(UNBOUND, "unbound")
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cert = cert
        self.records = {k.rstrip(".").lower(): list(v) for k, v in records.items()}
        self.dot_port = _port()
        self.doh_port = _port()
        self.plain_port = _port()
        self.conf = self.dir / "unbound.conf"
        self.log_path = self.dir / "unbound.log"
        self.ctl = self.dir / "control.sock"
        self.proc: Optional[subprocess.Popen] = None
        self.conf.write_text(self._config())

    @property
    def pin(self) -> str:
        return self.cert.pin

    def _config(self) -> str:
        local = "".join(f'    local-data: "{n}. 300 IN {t} {d}"\n'
                        for n, rs in self.records.items() for t, d in rs)
        return f"""server:
    username: ""
    chroot: ""
    directory: "{self.dir}"
    pidfile: "{self.dir}/unbound.pid"
    logfile: "{self.log_path}"
    use-syslog: no
    verbosity: 1
    log-queries: yes
    extended-statistics: yes
    num-threads: 1
    so-reuseport: no
    interface-automatic: no
    do-ip6: no
    interface: 127.0.0.1@{self.plain_port}
    interface: 127.0.0.1@{self.dot_port}
    interface: 127.0.0.1@{self.doh_port}
    port: {self.plain_port}
    tls-port: {self.dot_port}
    https-port: {self.doh_port}
    http-endpoint: "/dns-query"
    http-notls-downstream: no
    tls-service-key: "{self.cert.key}"
    tls-service-pem: "{self.cert.cert}"
    incoming-num-tcp: 64
    tcp-idle-timeout: 30000
    access-control: 127.0.0.0/8 allow
    # No recursion: every name is answered from local data, anything else NXDOMAIN by the
    # static root zone, so the iterator never runs and nothing leaves loopback.
    module-config: "iterator"
    do-not-query-localhost: yes
    local-zone: "." static
{local}remote-control:
    control-enable: yes
    control-interface: "{self.ctl}"
    control-use-cert: no
"""

    def start(self, timeout: float = 10.0) -> "Unbound":
        self._out = open(self.dir / "unbound.stderr", "ab")
        self.proc = subprocess.Popen([UNBOUND, "-d", "-c", str(self.conf)],
                                     stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=self._out, cwd=self.dir)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"unbound exited with {self.proc.returncode}:\n{self.log()}")
            if "start of service" in self.log():
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"unbound did not start within {timeout}s:\n{self.log()}")
        # All listeners are open before "start of service"; probe only the plain port (a bare
        # TCP connection to a TLS port would log a failed handshake).
        if not _wait_tcp(self.plain_port, end):
            raise RuntimeError(f"unbound is not listening on {self.plain_port}:\n{self.log()}")
        return self

    def stop(self) -> Optional[int]:
        code = _stop_proc(self.proc)
        if self.proc is not None:
            self._out.close()
            self.proc = None
        return code

    def log(self) -> str:
        text = ""
        for p in (self.log_path, self.dir / "unbound.stderr"):
            try:
                text += p.read_text(errors="replace")
            except FileNotFoundError:
                pass
        return text

    def logged_queries(self, name: str) -> int:
        """Queries for name in unbound's log (log-queries: one line per query received)."""
        n = name.rstrip(".").lower() + "."
        return sum(1 for line in self.log().splitlines()
                   if " info: 127.0.0.1 " in line and f" {n} " in line.lower())

    def stats(self) -> Dict[str, float]:
        """unbound-control stats_noreset as {key: value}."""
        r = run([UNBOUND_CONTROL, "-c", str(self.conf), "stats_noreset"], timeout=10)
        if r.returncode != 0:
            raise RuntimeError(f"unbound-control failed: {r.stdout} {r.stderr}")
        out = {}
        for line in r.stdout.splitlines():
            k, _, v = line.partition("=")
            try:
                out[k] = float(v)
            except ValueError:
                pass
        return out

    def dot_queries(self) -> int:
        # unbound counts DoH queries in num.query.tls as well
        s = self.stats()
        return int(s.get("num.query.tls", 0) - s.get("num.query.https", 0))

    def doh_queries(self) -> int:
        return int(self.stats().get("num.query.https", 0))

    def served(self, proto: str) -> int:
        """Queries received over proto ("dot" or "doh")."""
        return self.dot_queries() if proto == "dot" else self.doh_queries()

    # nxdns upstream entries for this server
    def dot_url(self, name: Optional[str] = None, port: Optional[int] = None) -> str:
        return f"tls://127.0.0.1:{port or self.dot_port}" + (f"#{name}" if name else "")

    def doh_url(self, name: Optional[str] = None, port: Optional[int] = None) -> str:
        return (f"https://127.0.0.1:{port or self.doh_port}/dns-query"
                + (f"#{name}" if name else ""))


# -------------------------------------------------------------------- knot resolver

class Kresd:
    """Knot Resolver 5.6 serving only `records` (A/AAAA) over DoT and DoH (doh2) on 127.0.0.1."""

    def __init__(self, workdir: Path, cert: Cert, records: Records):
        _need(KRESD, "knot-resolver")
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cert = cert
        self.records = {k.rstrip(".").lower(): list(v) for k, v in records.items()}
        self.dot_port = _port()
        self.doh_port = _port()
        self.conf = self.dir / "kresd.conf"
        self.log_path = self.dir / "kresd.log"
        self.proc: Optional[subprocess.Popen] = None
        self.conf.write_text(self._config())

    @property
    def pin(self) -> str:
        return self.cert.pin

    def _config(self) -> str:
        rules = []
        for n, rs in self.records.items():
            table = {}
            for t, d in rs:
                table.setdefault(t, []).append(d)
            entries = ", ".join(
                f"[kres.type.{t}] = {{ rdata = {{ "
                + ", ".join(f"kres.str2ip('{d}')" for d in ds) + " }, ttl = 300 }"
                for t, ds in table.items())
            rules.append(f"policy.add(policy.domains(policy.ANSWER({{ {entries} }}, true), "
                         f"policy.todnames({{'{n}.'}})))")
        rules_text = "\n".join(rules)
        return f"""-- No network: the modules that query the root on their own are off, and every query the
-- ANSWER rules do not answer is DENYed before the iterator could send it anywhere.
modules.unload('ta_update')
modules.unload('detect_time_skew')
modules.unload('detect_time_jump')
modules.unload('priming')
trust_anchors.remove('.')
cache.size = 1 * MB
net.listen('127.0.0.1', {self.dot_port}, {{ kind = 'tls' }})
net.listen('127.0.0.1', {self.doh_port}, {{ kind = 'doh2' }})
net.tls('{self.cert.cert}', '{self.cert.key}')
{rules_text}
policy.add(policy.all(policy.DENY))
"""

    def start(self, timeout: float = 10.0) -> "Kresd":
        self._out = open(self.log_path, "ab")
        self.proc = subprocess.Popen([KRESD, "-n", "-c", str(self.conf), str(self.dir)],
                                     stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=self._out, cwd=self.dir)
        end = time.monotonic() + timeout
        for p in (self.dot_port, self.doh_port):
            if not _wait_tcp(p, end):
                raise RuntimeError(f"kresd is not listening on {p}:\n{self.log()}")
        ok = wait_until(lambda: self.proc.poll() is None and self._control().exists(),
                        max(0.1, end - time.monotonic()))
        if not ok:
            raise RuntimeError(f"kresd has no control socket:\n{self.log()}")
        return self

    def _control(self) -> Path:
        return self.dir / "control" / str(self.proc.pid)

    def stop(self) -> Optional[int]:
        code = _stop_proc(self.proc)
        if self.proc is not None:
            self._out.close()
            self.proc = None
        return code

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def eval(self, expr: str, timeout: float = 3.0) -> str:
        """One Lua expression through the control socket (binary mode: length-prefixed)."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(timeout)
            s.connect(str(self._control()))
            s.sendall(b"__binary\n")
            s.sendall(expr.encode() + b"\n")
            buf = b""
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                buf += s.recv(65536)
                # the interactive prompt may precede the switch to binary mode
                data = buf[2:] if buf.startswith(b"> ") else buf
                if len(data) >= 4:
                    n = struct.unpack("!I", data[:4])[0]
                    if len(data) >= 4 + n:
                        return data[4:4 + n].decode(errors="replace")
            raise TimeoutError(f"kresd control: no reply to {expr!r}")

    def queries(self) -> int:
        """Requests kresd answered (worker.stats().queries), all transports."""
        return int(float(self.eval("worker.stats().queries").strip("'\"")))

    def served(self, proto: str) -> int:
        """Queries received; kresd's worker counters do not split DoT from DoH, so all."""
        return self.queries()

    def dot_url(self, name: Optional[str] = None, port: Optional[int] = None) -> str:
        return f"tls://127.0.0.1:{port or self.dot_port}" + (f"#{name}" if name else "")

    def doh_url(self, name: Optional[str] = None, port: Optional[int] = None) -> str:
        return (f"https://127.0.0.1:{port or self.doh_port}/dns-query"
                + (f"#{name}" if name else ""))


# -------------------------------------------------------------------- dead servers and a relay

class SilentTcp:
    """Accepts TCP connections on 127.0.0.1:port and never sends a byte (a DoT server that
    hangs in the handshake). What arrives is read and discarded; `accepted` counts connections,
    `received` the bytes (a TLS client sends its ClientHello)."""

    def __init__(self):
        self.port = free_port(v6=False, udp=False)
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", self.port))
        self.lsock.listen(64)
        self.accepted = 0
        self.received = 0
        self._conns: List[socket.socket] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _loop(self):
        while not self._stop.is_set():
            socks = [self.lsock] + self._conns
            try:
                r, _, _ = select.select(socks, [], [], 0.1)
            except (OSError, ValueError):
                r = []
            for s in r:
                if s is self.lsock:
                    try:
                        c, _ = self.lsock.accept()
                    except OSError:
                        continue
                    self._conns.append(c)
                    self.accepted += 1
                    continue
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if data:
                    self.received += len(data)
                else:
                    s.close()
                    self._conns.remove(s)

    def url(self) -> str:
        return f"tls://127.0.0.1:{self.port}"

    def stop(self):
        self._stop.set()
        self._t.join(5)
        for c in self._conns:
            c.close()
        self._conns = []
        self.lsock.close()


class TcpRelay:
    """127.0.0.1:port relayed byte for byte to 127.0.0.1:target; `accepted` counts the
    connections (each one a TLS handshake of the client through it)."""

    def __init__(self, target: int):
        self.target = target
        self.port = free_port(v6=False, udp=False)
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", self.port))
        self.lsock.listen(64)
        self.accepted = 0
        self._pairs: Dict[socket.socket, socket.socket] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _close(self, s: socket.socket):
        peer = self._pairs.pop(s, None)
        if peer is not None:
            self._pairs.pop(peer, None)
            peer.close()
        s.close()

    def _loop(self):
        while not self._stop.is_set():
            socks = [self.lsock] + list(self._pairs)
            try:
                r, _, _ = select.select(socks, [], [], 0.1)
            except (OSError, ValueError):
                r = []
            for s in r:
                if s is self.lsock:
                    try:
                        c, _ = self.lsock.accept()
                        up = socket.create_connection(("127.0.0.1", self.target), timeout=3)
                    except OSError:
                        continue
                    self.accepted += 1
                    self._pairs[c] = up
                    self._pairs[up] = c
                    continue
                if s not in self._pairs:
                    continue  # closed as the peer of one handled earlier in this round
                try:
                    data = s.recv(65536)
                    if data:
                        self._pairs[s].sendall(data)
                        continue
                except OSError:
                    pass
                self._close(s)

    def stop(self):
        self._stop.set()
        self._t.join(5)
        for s in list(self._pairs):
            s.close()
        self._pairs = {}
        self.lsock.close()


# -------------------------------------------------------------------- fixtures

@pytest.fixture
def make_cert(tmp_path):
    """make_cert(label, *names) -> Cert in tmp/certs/label."""

    def make(label: str = "server", *names: str) -> Cert:
        return Cert(tmp_path / "certs" / label, names)

    return make


def _server_fixture(tmp_path, cls, kind: str):
    servers = []

    def make(records: Records, cert: Optional[Cert] = None, start: bool = True):
        label = f"{kind}{len(servers)}"
        c = cert or Cert(tmp_path / "certs" / label, ("enc.test",))
        srv = cls(tmp_path / label, c, records)
        servers.append(srv)
        if start:
            srv.start()
        return srv

    return make, servers


@pytest.fixture
def make_unbound(request, tmp_path):
    """make_unbound(records, cert=None) -> a started Unbound (certificate for enc.test made
    with nxdns cert unless given); stopped at teardown, its log in the failure report."""
    make, servers = _server_fixture(tmp_path, Unbound, "unbound")
    request.node.__dict__.setdefault("_tls_servers", []).append(servers)
    yield make
    for s in servers:
        s.stop()


@pytest.fixture
def make_kresd(request, tmp_path):
    """make_kresd(records, cert=None) -> a started Kresd; stopped at teardown."""
    make, servers = _server_fixture(tmp_path, Kresd, "kresd")
    request.node.__dict__.setdefault("_tls_servers", []).append(servers)
    yield make
    for s in servers:
        s.stop()


@pytest.fixture
def silent_tcp():
    s = SilentTcp()
    yield s
    s.stop()


@pytest.fixture
def make_relay():
    relays = []

    def make(target: int) -> TcpRelay:
        r = TcpRelay(target)
        relays.append(r)
        return r

    yield make
    for r in relays:
        r.stop()


def tls_server_sections(item):
    """Report sections for a failed test: the log of every TLS server it started (conftest's
    report hook adds them beside the daemons' logs)."""
    out = []
    for group in getattr(item, "_tls_servers", []):
        for s in group:
            out.append((f"{type(s).__name__} log ({s.dir})", s.log()[-20000:]))
    return out
