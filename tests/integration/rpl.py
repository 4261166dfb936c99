"""A reader and replayer of Deckard scenarios (.rpl) for a forwarder, without Deckard.

Deckard (CZ-NIC/deckard) is not packaged; its scenario format is small. This reads the part a
forwarder's scenario uses and refuses the rest by name (RplError), so a scenario is never
replayed half-understood:

  CONFIG ... CONFIG_END    `key: value` lines; `forward-addr` names the one upstream address
  SCENARIO_BEGIN / _END    the title
  RANGE_BEGIN a b          entries answering upstream queries while the step number is in
    ADDRESS x              [a, b], from address x (served here on a loopback port)
    ENTRY_BEGIN ... _END
  STEP n QUERY             one entry: the query sent to the server under test
  STEP n CHECK_ANSWER      one entry: what the last answer must match (its MATCH line)
  STEP n TIME_PASSES ELAPSE s

An entry is MATCH fields, REPLY flags and rcode, ADJUST copy_id / copy_query, and SECTION
QUESTION / ANSWER / AUTHORITY / ADDITIONAL records in zone-file syntax ($ORIGIN/$TTL kept).
CHECK_ANSWER compares as Deckard does: `all` is opcode, qtype, qname, flags, rcode, answer,
authority and additional; records are compared as RRsets (TTLs not compared, except that the
answer's must not exceed the scenario's).

`RplUpstream(scenario)` answers from the RANGE entries on 127.0.0.1 (UDP and TCP) in threads,
records what it was asked, and stops with stop(). `replay(scenario, ask)` runs the steps with
`ask(message) -> reply` and raises AssertionError naming the step that differs.
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

SECTIONS = ("QUESTION", "ANSWER", "AUTHORITY", "ADDITIONAL")
FLAG_WORDS = {"QR", "AA", "TC", "RD", "RA", "AD", "CD"}
MATCH_ALL = ["opcode", "qtype", "qname", "flags", "rcode", "answer", "authority", "additional"]
MATCH_KNOWN = set(MATCH_ALL) | {"all", "question", "subdomain"}


class RplError(ValueError):
    pass


@dataclasses.dataclass
class Entry:
    match: List[str] = dataclasses.field(default_factory=list)
    flags: List[str] = dataclasses.field(default_factory=list)
    rcode: str = "NOERROR"
    adjust: List[str] = dataclasses.field(default_factory=list)
    # section name -> list of (name, ttl or None, class, type, rdata text)
    sections: Dict[str, list] = dataclasses.field(
        default_factory=lambda: {s: [] for s in SECTIONS})
    line: int = 0

    def fields(self) -> List[str]:
        out = []
        for m in self.match:
            out += MATCH_ALL if m == "all" else [m]
        return out

    def question(self):
        q = self.sections["QUESTION"]
        if len(q) != 1:
            raise RplError(f"entry at line {self.line}: one question expected")
        return q[0]

    def message(self, qid: int = 0) -> dns.message.Message:
        """The entry as a DNS message (a query or an answer, by its flags)."""
        name, _, cls, typ, _ = self.question()
        m = dns.message.Message(id=qid)
        m.flags = 0
        for f in self.flags:
            m.flags |= dns.flags.from_text(f)
        m.set_rcode(dns.rcode.from_text(self.rcode))
        m.question = [dns.rrset.RRset(dns.name.from_text(name), dns.rdataclass.from_text(cls),
                                      dns.rdatatype.from_text(typ))]
        for sec, target in (("ANSWER", m.answer), ("AUTHORITY", m.authority),
                            ("ADDITIONAL", m.additional)):
            for owner, ttl, c, t, rdata in self.sections[sec]:
                rs = dns.rrset.from_text(owner, ttl if ttl is not None else 3600, c, t, rdata)
                for old in target:
                    if old.name == rs.name and old.rdtype == rs.rdtype:
                        old.update(rs)
                        break
                else:
                    target.append(rs)
        return m


@dataclasses.dataclass
class Range:
    first: int
    last: int
    addresses: List[str]
    entries: List[Entry]


@dataclasses.dataclass
class Step:
    number: int
    kind: str  # QUERY, CHECK_ANSWER, TIME_PASSES
    entry: Optional[Entry] = None
    elapse: float = 0.0


@dataclasses.dataclass
class Scenario:
    path: Path
    title: str
    config: Dict[str, str]
    ranges: List[Range]
    steps: List[Step]


def _rr(tokens: List[str], origin: str, ttl: Optional[int], question: bool, line: int):
    """Zone-file record tokens -> (name, ttl, class, type, rdata)."""
    name = tokens[0]
    if name == "@":
        name = origin
    elif not name.endswith("."):
        name = f"{name}.{origin}" if origin else name
    rest = tokens[1:]
    rttl = ttl
    if rest and rest[0].isdigit():
        rttl = int(rest.pop(0))
    cls = "IN"
    if rest and rest[0].upper() in ("IN", "CH", "HS"):
        cls = rest.pop(0).upper()
    if not rest:
        raise RplError(f"line {line}: record without a type")
    typ = rest.pop(0).upper()
    if question:
        return (name, None, cls, typ, "")
    return (name, rttl, cls, typ, " ".join(rest))


def parse(path: Path) -> Scenario:
    lines = Path(path).read_text().splitlines()
    config: Dict[str, str] = {}
    ranges: List[Range] = []
    steps: List[Step] = []
    title = ""
    origin, ttl = "", None
    i = 0
    in_config = True
    cur_range: Optional[Range] = None
    pending_step: Optional[Step] = None

    def read_entry(start: int):
        nonlocal origin, ttl
        e = Entry(line=start + 1)
        sec = None
        j = start + 1
        while j < len(lines):
            raw = lines[j].split(";", 1)[0].strip()
            j += 1
            if not raw:
                continue
            tok = raw.split()
            key = tok[0]
            if key == "ENTRY_END":
                return e, j
            if key == "MATCH":
                for m in tok[1:]:
                    if m not in MATCH_KNOWN:
                        raise RplError(f"{path}:{j}: MATCH {m} is not supported here")
                e.match += tok[1:]
            elif key == "REPLY":
                for w in tok[1:]:
                    if w in FLAG_WORDS:
                        e.flags.append(w)
                    else:
                        try:
                            dns.rcode.from_text(w)
                        except dns.rcode.UnknownRcode:
                            raise RplError(f"{path}:{j}: REPLY {w} is not supported here")
                        e.rcode = w
            elif key == "ADJUST":
                for a in tok[1:]:
                    if a not in ("copy_id", "copy_query"):
                        raise RplError(f"{path}:{j}: ADJUST {a} is not supported here")
                e.adjust += tok[1:]
            elif key == "SECTION":
                sec = tok[1].upper()
                if sec not in SECTIONS:
                    raise RplError(f"{path}:{j}: SECTION {tok[1]}")
            elif key == "$ORIGIN":
                origin = tok[1]
            elif key == "$TTL":
                ttl = int(tok[1])
            else:
                if sec is None:
                    raise RplError(f"{path}:{j}: {key} is not supported here")
                e.sections[sec].append(_rr(tok, origin, ttl, sec == "QUESTION", j))
        raise RplError(f"{path}: ENTRY at line {start + 1} has no ENTRY_END")

    while i < len(lines):
        raw = lines[i].split(";", 1)[0].strip()
        if not raw:
            i += 1
            continue
        tok = raw.split()
        key = tok[0]
        if in_config:
            if key == "CONFIG_END":
                in_config = False
            elif ":" in raw:
                k, v = raw.split(":", 1)
                config[k.strip()] = v.strip()
            else:
                raise RplError(f"{path}:{i + 1}: not a config line: {raw}")
            i += 1
            continue
        if key == "SCENARIO_BEGIN":
            title = raw[len("SCENARIO_BEGIN"):].strip()
        elif key == "SCENARIO_END":
            break
        elif key == "RANGE_BEGIN":
            cur_range = Range(int(tok[1]), int(tok[2]), [], [])
        elif key == "ADDRESS":
            if cur_range is None:
                raise RplError(f"{path}:{i + 1}: ADDRESS outside a RANGE")
            cur_range.addresses.append(tok[1])
        elif key == "RANGE_END":
            ranges.append(cur_range)
            cur_range = None
        elif key == "STEP":
            kind = tok[2]
            if kind not in ("QUERY", "CHECK_ANSWER", "TIME_PASSES"):
                raise RplError(f"{path}:{i + 1}: STEP {kind} is not supported here")
            st = Step(int(tok[1]), kind)
            if kind == "TIME_PASSES":
                if len(tok) < 5 or tok[3] != "ELAPSE":
                    raise RplError(f"{path}:{i + 1}: TIME_PASSES ELAPSE n expected")
                st.elapse = float(tok[4])
                steps.append(st)
            else:
                pending_step = st
        elif key == "ENTRY_BEGIN":
            e, i = read_entry(i)
            if cur_range is not None:
                cur_range.entries.append(e)
            elif pending_step is not None:
                pending_step.entry = e
                steps.append(pending_step)
                pending_step = None
            else:
                raise RplError(f"{path}:{e.line}: ENTRY outside a RANGE or STEP")
            continue
        else:
            raise RplError(f"{path}:{i + 1}: {key} is not supported here")
        i += 1
    for k in config:
        if k not in ("forward-addr", "do-ip6", "do-ip4", "query-minimization", "stub-addr"):
            raise RplError(f"{path}: config key {k} is not supported here")
    return Scenario(Path(path), title, config, ranges, steps)


# ---------------------------------------------------------------- the upstream side


def _matches(e: Entry, q: dns.message.Message) -> bool:
    name, _, cls, typ, _ = e.question()
    for f in e.fields():
        if f == "opcode" and q.opcode() != dns.opcode.QUERY:
            return False
        if f == "qtype" and (not q.question or
                             q.question[0].rdtype != dns.rdatatype.from_text(typ)):
            return False
        if f == "qname" and (not q.question or
                             q.question[0].name != dns.name.from_text(name)):
            return False
        if f == "subdomain" and (not q.question or
                                 not q.question[0].name.is_subdomain(dns.name.from_text(name))):
            return False
    return True


class RplUpstream:
    """The scenario's RANGE entries, served on 127.0.0.1:port over UDP and TCP."""

    def __init__(self, sc: Scenario):
        self.sc = sc
        self.step = 0  # the replay sets it, so RANGE a..b applies
        self.log: List[str] = []
        self._stop = threading.Event()
        # the UDP port is the kernel's pick; the same TCP port may be taken by someone else's
        # connection, so pick again until both are free (bounded)
        for attempt in range(50):
            self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.udp.bind(("127.0.0.1", 0))
            self.port = self.udp.getsockname()[1]
            self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                self.tcp.bind(("127.0.0.1", self.port))
                break
            except OSError:
                self.udp.close()
                self.tcp.close()
                if attempt == 49:
                    raise
        self.tcp.listen(8)
        self.udp.settimeout(0.2)
        self.tcp.settimeout(0.2)
        self.threads = [threading.Thread(target=self._udp_loop, daemon=True),
                        threading.Thread(target=self._tcp_loop, daemon=True)]

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "RplUpstream":
        for t in self.threads:
            t.start()
        return self

    def stop(self):
        self._stop.set()
        for t in self.threads:
            t.join(timeout=2)
        self.udp.close()
        self.tcp.close()

    def answer(self, wire: bytes) -> Optional[bytes]:
        try:
            q = dns.message.from_wire(wire)
        except Exception as e:  # a broken query is logged, not answered
            self.log.append(f"unparsable query: {e}")
            return None
        self.log.append(f"step {self.step}: {q.question[0].name} "
                        f"{dns.rdatatype.to_text(q.question[0].rdtype)}" if q.question else "?")
        for r in self.sc.ranges:
            if not r.first <= self.step <= r.last:
                continue
            for e in r.entries:
                if _matches(e, q):
                    m = e.message(qid=q.id if "copy_id" in e.adjust else 0)
                    if "copy_query" in e.adjust:
                        m.question = q.question
                    return m.to_wire(max_size=65535)
        self.log.append("  no entry matches")
        return None

    def _udp_loop(self):
        while not self._stop.is_set():
            try:
                wire, src = self.udp.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError:
                return
            out = self.answer(wire)
            if out is not None:
                self.udp.sendto(out[:65507], src)

    def _tcp_loop(self):
        while not self._stop.is_set():
            try:
                c, _ = self.tcp.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._tcp_conn, args=(c,), daemon=True).start()

    def _tcp_conn(self, c):
        c.settimeout(3)
        with c:
            try:
                while True:
                    hdr = c.recv(2)
                    if len(hdr) < 2:
                        return
                    n = struct.unpack("!H", hdr)[0]
                    wire = b""
                    while len(wire) < n:
                        chunk = c.recv(n - len(wire))
                        if not chunk:
                            return
                        wire += chunk
                    out = self.answer(wire)
                    if out is not None:
                        c.sendall(struct.pack("!H", len(out)) + out)
            except OSError:
                return


# ---------------------------------------------------------------- the steps


def _rrsets(section) -> set:
    return {(rs.name, rs.rdclass, rs.rdtype, frozenset(rd.to_text() for rd in rs))
            for rs in section}


def check(step: Step, got: dns.message.Message):
    want = step.entry.message(qid=got.id)
    where = f"STEP {step.number} CHECK_ANSWER (line {step.entry.line})"
    for f in step.entry.fields():
        if f == "opcode":
            assert got.opcode() == want.opcode(), f"{where}: opcode {got.opcode()}"
        elif f in ("qtype", "qname", "question"):
            assert got.question and got.question[0].name == want.question[0].name and \
                got.question[0].rdtype == want.question[0].rdtype, \
                f"{where}: question {got.question}"
        elif f == "flags":
            mask = 0
            for w in FLAG_WORDS:
                mask |= dns.flags.from_text(w)
            assert got.flags & mask == want.flags & mask, \
                f"{where}: flags {dns.flags.to_text(got.flags & mask)!r}, " \
                f"want {dns.flags.to_text(want.flags & mask)!r}"
        elif f == "rcode":
            assert got.rcode() == want.rcode(), \
                f"{where}: rcode {dns.rcode.to_text(got.rcode())}"
        elif f in ("answer", "authority", "additional"):
            g, w = getattr(got, f), getattr(want, f)
            assert _rrsets(g) == _rrsets(w), f"{where}: {f} section\n{g}\nwant\n{w}"
            for rs in g:
                for ws in w:
                    if ws.name == rs.name and ws.rdtype == rs.rdtype:
                        assert rs.ttl <= ws.ttl, f"{where}: TTL {rs.ttl} above {ws.ttl}"


def replay(sc: Scenario, upstream: RplUpstream, ask) -> int:
    """Run the steps: QUERY sends through ask(msg) -> reply, CHECK_ANSWER checks the last
    reply. Returns the number of checks made."""
    last = None
    checks = 0
    for st in sorted(sc.steps, key=lambda s: s.number):
        upstream.step = st.number
        if st.kind == "QUERY":
            last = ask(st.entry.message(qid=0x2000 + st.number))
        elif st.kind == "CHECK_ANSWER":
            assert last is not None, f"STEP {st.number}: CHECK_ANSWER without a query before"
            check(st, last)
            checks += 1
        elif st.kind == "TIME_PASSES":
            time.sleep(st.elapse)
    return checks
