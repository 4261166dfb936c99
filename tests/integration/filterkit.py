"""Helpers for the filter, cache, metrics and memory integration tests (issues 3 and 4).

- Configs with lists of mappings (filter.sources, clients, local_records) cannot be written by
  harness.to_yaml, so `start_nx` / `rewrite_config` write the merged config as JSON (JSON is
  YAML: the loader accepts flow style).
- `XUpstream` is a FakeUpstream whose rules (`XRule`) may add records for other owners (CNAME
  chains) and an authority section (SOA for negative answers).
- `FastUpstream` answers A queries from raw bytes (no dnspython on the hot path) for bursts.
- `query_from` sends from another loopback address (127.0.0.2, ...) to exercise `clients`.
- `ede` returns the Extended DNS Errors of a reply as (code, text) pairs.
- `lookup_cli` runs `nxdns lookup` on a daemon's config and returns its JSON lines.
- `proc_status` reads /proc/PID/status figures in bytes.

Everything is bounded: sockets have timeouts, threads stop with their owner.
"""

from __future__ import annotations

import dataclasses
import json
import select
import socket
import struct
import subprocess
import threading
import time
from typing import Dict, List, Optional, Tuple

import dns.edns
import dns.message
import dns.query
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from fakeupstream import FakeUpstream, Rule
from harness import Nxdns, nxdns_bin, wait_until


# ------------------------------------------------------------------ config as JSON

def rewrite_config(nx: Nxdns, cfg: dict):
    """Replace the daemon's config file with `cfg` (JSON text) without signalling it."""
    nx.config = cfg
    nx.write_config_text(json.dumps(cfg, indent=1) + "\n")


def start_nx(make_nxdns, upstreams, config: dict, start: bool = True,
             name: Optional[str] = None) -> Nxdns:
    """make_nxdns for configs with lists of mappings: the base config deep-merged with
    `config`, written as JSON, then started (unless start=False)."""
    nx = make_nxdns(upstreams, config=config, start=False, name=name)
    rewrite_config(nx, nx.config)
    if start:
        nx.start()
    return nx


def wait_log(nx: Nxdns, text: str, count: int = 1, timeout: float = 10.0) -> bool:
    """Wait until `text` appears at least `count` times in the daemon's log."""
    return bool(wait_until(lambda: nx.log().count(text) >= count, timeout))


def wait_reloads(nx: Nxdns, n: int, timeout: float = 10.0) -> float:
    return nx.wait_counter("nxdns_config_reloads_total", n, timeout=timeout, result="ok")


# ------------------------------------------------------------------ queries

def query_from(nx: Nxdns, q, src: str = "127.0.0.2", proto: str = "udp",
               timeout: float = 3.0) -> dns.message.Message:
    """Send q to the daemon's IPv4 listener from the loopback address `src`."""
    if proto == "udp":
        return dns.query.udp(q, "127.0.0.1", port=nx.port, timeout=timeout, source=src)
    return dns.query.tcp(q, "127.0.0.1", port=nx.port, timeout=timeout, source=src)


def ede(msg: dns.message.Message) -> List[Tuple[int, str]]:
    """Extended DNS Errors (RFC 8914) as (info-code, extra-text) pairs."""
    out = []
    for opt in (msg.options if msg.edns >= 0 else []):
        if isinstance(opt, dns.edns.EDEOption):
            out.append((int(opt.code), opt.text or ""))
        elif opt.otype == dns.edns.OptionType.EDE:
            wire = opt.to_wire()
            out.append((struct.unpack("!H", wire[:2])[0], wire[2:].decode("utf-8", "replace")))
    return out


# ------------------------------------------------------------------ the CLI

def run_cli(args: List[str], stdin: Optional[str] = None, timeout: float = 30.0,
            cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(nxdns_bin())] + args, input=stdin, capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def lookup_cli(config_path, names: List[str], client: Optional[str] = None,
               stdin: bool = False) -> List[dict]:
    """`nxdns lookup --config F [--client IP] NAME...` (or names on stdin with `-`)."""
    args = ["lookup", "--config", str(config_path)]
    if client:
        args += ["--client", client]
    if stdin:
        p = run_cli(args + ["-"], stdin="".join(n + "\n" for n in names))
    else:
        p = run_cli(args + list(names))
    assert p.returncode == 0, f"nxdns lookup exited {p.returncode}: {p.stderr}"
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    assert len(rows) == len(names), f"lookup printed {len(rows)} lines for {len(names)} names"
    return rows


# ------------------------------------------------------------------ /proc

def sanitized_binary() -> bool:
    """True when the binary under test is built with ASan (its memory figures then measure
    the sanitizer's allocator, quarantine and shadow, not glibc's)."""
    try:
        with open(nxdns_bin(), "rb") as f:
            data = f.read()
    except OSError:
        return False
    return b"AddressSanitizer" in data or b"__asan_init" in data


def proc_status(pid: int) -> Dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile (bytes) and Threads of a process."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            parts = v.split()
            if not parts:
                continue
            if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem") and parts[-1] == "kB":
                out[k] = int(parts[0]) * 1024
            elif k == "Threads":
                out[k] = int(parts[0])
    return out


# ------------------------------------------------------------------ a richer fake upstream

@dataclasses.dataclass
class XRule(Rule):
    """A Rule that may also carry answer records of other owners and an authority section.

    chain:     [(owner, type, rdata), ...] appended to the answer after `records`
               (e.g. a CNAME chain: ("cdn.example.", "CNAME", "ads.example."))
    authority: [(owner, type, rdata), ...] for the authority section (e.g. an SOA)
    auth_ttl:  TTL of the authority records
    """

    chain: List[tuple] = dataclasses.field(default_factory=list)
    authority: List[tuple] = dataclasses.field(default_factory=list)
    auth_ttl: int = 300


class XUpstream(FakeUpstream):
    def _answer(self, query, rule):
        resp = super()._answer(query, rule)
        if not isinstance(rule, XRule) or not query.question:
            return resp
        if resp.rcode() == 0:
            for owner, rtype, text in rule.chain:
                t = dns.rdatatype.from_text(rtype)
                resp.answer.append(dns.rrset.from_text(owner, rule.ttl, "IN", t, text))
        for owner, rtype, text in rule.authority:
            t = dns.rdatatype.from_text(rtype)
            resp.authority.append(dns.rrset.from_text(owner, rule.auth_ttl, "IN", t, text))
        return resp


def soa(zone: str, minimum: int = 60) -> Tuple[str, str, str]:
    return (zone, "SOA", f"ns.{zone} hostmaster.{zone} 1 3600 600 86400 {minimum}")


# ------------------------------------------------------------------ a fast upstream for bursts

class FastUpstream:
    """UDP-only responder that answers every query with one A record (192.0.2.99, TTL 300),
    built from the query's bytes without parsing it as a message: thousands of queries per
    second from Python. Counts what it answered."""

    def __init__(self, ttl: int = 300, addr: bytes = bytes([192, 0, 2, 99])):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.rr = struct.pack("!HHHIH", 0xC00C, 1, 1, ttl, 4) + addr
        self.count = 0
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._loop, daemon=True, name="fastup")

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "FastUpstream":
        self._th.start()
        return self

    def stop(self):
        self._stop.set()
        self._th.join(timeout=2)
        self.sock.close()

    def _reply(self, q: bytes) -> Optional[bytes]:
        if len(q) < 17 or q[2] & 0x80:
            return None
        # question end: walk the name
        i = 12
        while i < len(q) and q[i] != 0:
            i += 1 + q[i]
        i += 5
        if i > len(q):
            return None
        flags = struct.pack("!BB", 0x84 | (q[2] & 0x01), 0x80)
        hdr = q[:2] + flags + struct.pack("!HHHH", 1, 1, 0, 0)
        return hdr + q[12:i] + self.rr

    def _loop(self):
        self.sock.setblocking(False)
        while not self._stop.is_set():
            r, _, _ = select.select([self.sock], [], [], 0.1)
            if not r:
                continue
            for _ in range(256):
                try:
                    q, src = self.sock.recvfrom(4096)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    return
                out = self._reply(q)
                if out is None:
                    continue
                try:
                    self.sock.sendto(out, src)
                    self.count += 1
                except OSError:
                    pass


def wire_query(name: str, qid: int, qtype: int = 1) -> bytes:
    """A minimal RD query in wire form (no EDNS)."""
    out = struct.pack("!HHHHHH", qid & 0xFFFF, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\x00" + struct.pack("!HH", qtype, 1)


def udp_burst(port: int, names: List[str], window: int = 64, sockets: int = 4,
              timeout: float = 20.0, host: str = "127.0.0.1") -> Dict[str, int]:
    """Send every name once over UDP from `sockets` sockets, at most `window` outstanding
    per socket; returns counts of answered / lost (no reply within 2 s of the last send)."""
    socks = []
    for _ in range(sockets):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.setblocking(False)
        s.connect((host, port))
        socks.append(s)
    per = [names[i::sockets] for i in range(sockets)]
    nxt = [0] * sockets
    outstanding = [0] * sockets
    answered = 0
    rcodes: Dict[int, int] = {}
    end = time.monotonic() + timeout
    last_progress = time.monotonic()
    try:
        while time.monotonic() < end:
            for k, s in enumerate(socks):
                while outstanding[k] < window and nxt[k] < len(per[k]):
                    qid = (k << 14) | (nxt[k] & 0x3FFF)
                    try:
                        s.send(wire_query(per[k][nxt[k]], qid))
                    except BlockingIOError:
                        break
                    nxt[k] += 1
                    outstanding[k] += 1
            r, _, _ = select.select(socks, [], [], 0.05)
            for s in r:
                k = socks.index(s)
                while True:
                    try:
                        data = s.recv(4096)
                    except (BlockingIOError, InterruptedError):
                        break
                    except ConnectionRefusedError:
                        break
                    answered += 1
                    outstanding[k] = max(0, outstanding[k] - 1)
                    rc = data[3] & 0x0F if len(data) >= 4 else -1
                    rcodes[rc] = rcodes.get(rc, 0) + 1
                    last_progress = time.monotonic()
            if all(nxt[k] >= len(per[k]) for k in range(sockets)):
                if sum(outstanding) == 0 or time.monotonic() - last_progress > 2.0:
                    break
            elif time.monotonic() - last_progress > 2.0:
                # replies lost: free the window and go on
                outstanding = [0] * sockets
                last_progress = time.monotonic()
    finally:
        for s in socks:
            s.close()
    return {"sent": sum(nxt), "answered": answered, "lost": sum(nxt) - answered,
            "rcodes": rcodes}
