"""A scripted authoritative DNS responder on loopback that the integration tests own.

One FakeUpstream listens on 127.0.0.1:<port> over UDP and TCP (same port), answers every query
from a per-test script and records every query it receives. Threads only; everything stops with
stop() (the `upstream` fixture calls it at teardown), and every socket operation is bounded.

Script: a dict from query name (case-insensitive, trailing dot optional; "*" is the fallback)
to a Rule. Without a matching rule the responder answers the default Rule() (an A/AAAA/TXT
answer made from `default_a` / `default_aaaa`).

    up = FakeUpstream(default_a="192.0.2.1")
    up.script["slow.example"] = Rule(delay_ms=800)
    up.script["big.example"] = Rule(txt_count=40)          # many TXT records
    up.script["tc.example"] = Rule(tc_udp=True)            # TC over UDP, full answer over TCP
    up.script["dead.example"] = Rule(drop=True)            # never answers
    up.script["lossy.example"] = Rule(drop_first=True)     # answers only re-sent queries
    up.script["spoof.example"] = Rule(spoof=["wrong_id"], delay_ms=300)

Queries are recorded as Query objects in `up.log` (see Query for the fields); `up.queries(name)`
filters by name, case-insensitively; `up.exchanges(name)` counts a re-sent UDP query once.
"""

from __future__ import annotations

import dataclasses
import random
import select
import socket
import struct
import threading
import time
from typing import Dict, List, Optional

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset


@dataclasses.dataclass
class Rule:
    """How to answer one name. All fields optional; see the module docstring."""

    # Records to answer with, as (type, rdata text) pairs, e.g. [("A", "192.0.2.7")]. When None,
    # the answer is made from the responder's defaults for A, AAAA and TXT (other types: empty).
    records: Optional[List[tuple]] = None
    ttl: int = 300
    delay_ms: int = 0  # wait before sending the (real) reply
    drop: bool = False  # never reply
    # UDP: drop the first datagram of each exchange (id and source port), answer its re-sends:
    # a lost query, as nxdns's retransmission must recover it
    drop_first: bool = False
    rcode: str = "NOERROR"  # e.g. "NXDOMAIN", "SERVFAIL"
    tc_udp: bool = False  # over UDP reply with TC and no records; TCP gets the full answer
    txt_count: int = 0  # answer with this many TXT records of txt_size bytes (big answers)
    txt_size: int = 40
    # Spoofed replies sent immediately, before the real reply (which honours delay_ms):
    #   "wrong_id"       right source, wrong transaction id, bogus answer
    #   "wrong_port"     right id, sent from another UDP port of 127.0.0.1
    #   "wrong_addr"     right id, sent from 127.0.0.2 with the upstream's own port
    #   "wrong_question" right id and source, different question name
    spoof: List[str] = dataclasses.field(default_factory=list)
    spoof_a: str = "6.6.6.6"  # the A record in spoofed replies
    only_spoof: bool = False  # send the spoofs but never the real reply
    # A server without EDNS (Unbound's fwd_no_edns): a UDP query carrying OPT gets FORMERR
    # (question echoed, no OPT), a plain one the answer. With formerr_edns_do_only, only a query
    # with the DO bit set is refused (the scenario's "MATCH ... DO").
    formerr_edns: bool = False
    formerr_edns_do_only: bool = False
    formerr_bare: bool = False  # the FORMERR is a bare 12-byte header (no question section)
    # A broken answer with the query's id over UDP: "garbage" (the question, then an answer
    # count that overruns the message), "bad_question" (QDCOUNT 1, a name that does not parse)
    malformed: str = ""
    # Over UDP, answer with the question name's letters upper-cased (a server that does not
    # preserve the 0x20 case of the query; Unbound's fwd_capsid_fallback)
    case_upper: bool = False


@dataclasses.dataclass
class Query:
    """One query as the fake upstream received it."""

    time: float  # time.monotonic() at receipt
    transport: str  # "udp" or "tcp"
    id: int
    src_addr: str
    src_port: int
    qname: str  # as received (0x20 case preserved), with trailing dot
    qtype: str  # e.g. "A"
    edns: int  # EDNS version, -1 without OPT
    payload: int  # EDNS UDP payload size (0 without OPT)
    do: bool  # DO bit
    flags: int  # header flags as received
    wire: bytes


def _norm(name: str) -> str:
    name = name.lower()
    return name if name.endswith(".") else name + "."


class FakeUpstream:
    def __init__(self, default_a: str = "192.0.2.1", default_aaaa: str = "2001:db8::1",
                 default_txt: str = "fake upstream", host: str = "127.0.0.1"):
        self.default_a = default_a
        self.default_aaaa = default_aaaa
        self.default_txt = default_txt
        self.host = host
        self.script: Dict[str, Rule] = {}
        self.log: List[Query] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []
        self._timers: List[threading.Timer] = []
        self._tcp_conns: List[socket.socket] = []
        self.family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.udp, self.tcp, self.port = self._bind()
        # Spoof senders: another port on the same address, and the same port on 127.0.0.2.
        self.spoof_port_sock = socket.socket(self.family, socket.SOCK_DGRAM)
        self.spoof_port_sock.bind((host, 0))
        self.spoof_addr_sock = None
        try:
            if self.family == socket.AF_INET:
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind(("127.0.0.2", self.port))
                self.spoof_addr_sock = s
        except OSError:
            pass

    # ---------------------------------------------------------------- lifecycle

    def _bind(self):
        for _ in range(50):
            u = socket.socket(self.family, socket.SOCK_DGRAM)
            u.bind((self.host, 0))
            port = u.getsockname()[1]
            t = socket.socket(self.family, socket.SOCK_STREAM)
            t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                t.bind((self.host, port))
            except OSError:
                u.close()
                t.close()
                continue
            t.listen(64)
            return u, t, port
        raise RuntimeError("fake upstream: no free port")

    @property
    def addr(self) -> str:
        """The "addr:port" string for the nxdns config ("[addr]:port" for IPv6)."""
        if self.family == socket.AF_INET6:
            return f"[{self.host}]:{self.port}"
        return f"{self.host}:{self.port}"

    def start(self) -> "FakeUpstream":
        for target in (self._udp_loop, self._tcp_accept_loop):
            th = threading.Thread(target=target, daemon=True, name=f"fakeup-{self.port}")
            th.start()
            self._threads.append(th)
        return self

    def stop(self):
        self._stop.set()
        with self._lock:
            timers = list(self._timers)
            conns = list(self._tcp_conns)
        for t in timers:
            t.cancel()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for th in self._threads:
            th.join(timeout=2)
        for s in (self.udp, self.tcp, self.spoof_port_sock, self.spoof_addr_sock, *conns):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass

    # ---------------------------------------------------------------- inspection

    def queries(self, name: Optional[str] = None, transport: Optional[str] = None) -> List[Query]:
        with self._lock:
            out = list(self.log)
        if name is not None:
            out = [q for q in out if _norm(q.qname) == _norm(name)]
        if transport is not None:
            out = [q for q in out if q.transport == transport]
        return out

    def exchanges(self, name: Optional[str] = None,
                  transport: Optional[str] = None) -> List[Query]:
        """The first datagram of each exchange: nxdns re-sends a silent UDP query with the same
        id from the same port, so count these to count the queries nxdns meant to ask."""
        seen, out = set(), []
        for q in self.queries(name, transport):
            key = (q.transport, q.src_addr, q.src_port, q.id, _norm(q.qname))
            if q.transport == "tcp" or key not in seen:
                seen.add(key)
                out.append(q)
        return out

    def _first_of_exchange(self, rec: Query) -> bool:
        with self._lock:
            return not any(q is not rec and q.transport == rec.transport and q.id == rec.id
                           and q.src_port == rec.src_port and q.src_addr == rec.src_addr
                           for q in self.log)

    def wait_for(self, name: str, count: int = 1, timeout: float = 5.0) -> List[Query]:
        """Wait until `count` queries for name were received; returns them (maybe fewer)."""
        end = time.monotonic() + timeout
        while True:
            qs = self.queries(name)
            if len(qs) >= count or time.monotonic() >= end:
                return qs
            time.sleep(0.01)

    def clear(self):
        with self._lock:
            self.log.clear()

    # ---------------------------------------------------------------- serving

    def _rule(self, qname: str) -> Rule:
        want = _norm(qname)
        for key, rule in list(self.script.items()):
            if key != "*" and _norm(key) == want:
                return rule
        return self.script.get("*") or Rule()

    def _record(self, transport, wire, msg, src):
        q = msg.question[0] if msg.question else None
        rec = Query(
            time=time.monotonic(), transport=transport, id=msg.id, src_addr=src[0],
            src_port=src[1], qname=q.name.to_text() if q is not None else "",
            qtype=dns.rdatatype.to_text(q.rdtype) if q is not None else "", edns=msg.edns,
            payload=msg.payload if msg.edns >= 0 else 0,
            do=bool(msg.ednsflags & dns.flags.DO), flags=msg.flags, wire=wire)
        with self._lock:
            self.log.append(rec)
        return rec

    def _answer(self, query: dns.message.Message, rule: Rule) -> dns.message.Message:
        resp = dns.message.make_response(query)
        resp.flags |= dns.flags.AA
        resp.set_rcode(dns.rcode.from_text(rule.rcode))
        if rule.rcode != "NOERROR" or not query.question:
            return resp
        q = query.question[0]
        recs = rule.records
        if rule.txt_count:
            recs = [("TXT", '"%s"' % (("%03d" % i) + "x" * (rule.txt_size - 3)))
                    for i in range(rule.txt_count)]
        if recs is None:
            if q.rdtype == dns.rdatatype.A:
                recs = [("A", self.default_a)]
            elif q.rdtype == dns.rdatatype.AAAA:
                recs = [("AAAA", self.default_aaaa)]
            elif q.rdtype == dns.rdatatype.TXT:
                recs = [("TXT", '"%s"' % self.default_txt)]
            else:
                recs = []
        by_type: Dict[int, dns.rrset.RRset] = {}
        for rtype, text in recs:
            t = dns.rdatatype.from_text(rtype)
            rs = by_type.get(t)
            if rs is None:
                rs = dns.rrset.RRset(q.name, dns.rdataclass.IN, t)
                rs.update_ttl(rule.ttl)
                by_type[t] = rs
                resp.answer.append(rs)
            rs.add(dns.rdata.from_text(dns.rdataclass.IN, t, text), rule.ttl)
        return resp

    def expected(self, qname: str, qtype: str = "A") -> dns.message.Message:
        """The reply this responder would send for (qname, qtype): for comparisons in tests."""
        q = dns.message.make_query(qname, qtype)
        return self._answer(q, self._rule(qname))

    def _udp_wire(self, query, resp) -> bytes:
        limit = query.payload if query.edns >= 0 else 512
        try:
            return resp.to_wire(max_size=max(limit, 512))
        except dns.exception.TooBig:
            tc = dns.message.make_response(query)
            tc.flags |= dns.flags.TC | dns.flags.AA
            return tc.to_wire()

    def _later(self, delay_ms: int, fn):
        if delay_ms <= 0:
            fn()
            return
        t = threading.Timer(delay_ms / 1000.0, fn)
        t.daemon = True
        with self._lock:
            self._timers.append(t)
        t.start()

    def _send_spoofs(self, query, rule, send_right_source):
        for kind in rule.spoof:
            bogus = dns.message.make_response(query)
            q = query.question[0]
            rs = dns.rrset.from_text(q.name, rule.ttl, "IN", "A", rule.spoof_a)
            bogus.answer.append(rs)
            if kind == "wrong_id":
                bogus.id = (query.id + 1 + random.randrange(0xfffe)) & 0xffff
                send_right_source(bogus.to_wire())
            elif kind == "wrong_question":
                bogus.question[0] = dns.rrset.RRset(
                    dns.name.from_text("spoofed-" + str(random.randrange(1 << 30)), q.name.parent()
                                       if len(q.name) > 1 else dns.name.root),
                    q.rdclass, q.rdtype)
                bogus.answer[0] = dns.rrset.from_text(bogus.question[0].name, rule.ttl, "IN", "A",
                                                      rule.spoof_a)
                send_right_source(bogus.to_wire())
            elif kind in ("wrong_port", "wrong_addr"):
                # Only meaningful for UDP; the caller passes the client's address.
                yield kind, bogus.to_wire()
            else:
                raise ValueError(f"unknown spoof kind {kind!r}")

    def _udp_loop(self):
        self.udp.settimeout(0.1)
        while not self._stop.is_set():
            try:
                wire, src = self.udp.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                query = dns.message.from_wire(wire)
            except Exception:
                continue
            if query.flags & dns.flags.QR:
                continue
            rec = self._record("udp", wire, query, src)
            rule = self._rule(query.question[0].name.to_text()) if query.question else Rule()
            if rule.drop:
                continue
            if rule.drop_first and self._first_of_exchange(rec):
                continue

            def right_source(data, src=src):
                self._sendto(self.udp, data, src)

            for kind, data in self._send_spoofs(query, rule, right_source):
                sock = self.spoof_port_sock if kind == "wrong_port" else self.spoof_addr_sock
                if sock is None:
                    raise RuntimeError("127.0.0.2 not bindable: cannot spoof an address")
                self._sendto(sock, data, src)
            if rule.only_spoof:
                continue
            special = self._udp_special(query, rule, wire)
            if special is not None:
                self._later(rule.delay_ms,
                            lambda data=special, src=src: self._sendto(self.udp, data, src))
                continue
            if rule.tc_udp:
                resp = dns.message.make_response(query)
                resp.flags |= dns.flags.TC | dns.flags.AA
                data = resp.to_wire()
            else:
                data = self._udp_wire(query, self._answer(query, rule))
            self._later(rule.delay_ms, lambda data=data, src=src: self._sendto(self.udp, data, src))

    def _sendto(self, sock, data, dst):
        if self._stop.is_set():
            return
        try:
            sock.sendto(data, dst)
        except OSError:
            pass

    def _tcp_accept_loop(self):
        self.tcp.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, src = self.tcp.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self._tcp_conns.append(conn)
            th = threading.Thread(target=self._tcp_conn, args=(conn, src), daemon=True)
            th.start()
            self._threads.append(th)

    def _tcp_conn(self, conn: socket.socket, src):
        wlock = threading.Lock()

        def send(data):
            if self._stop.is_set():
                return
            with wlock:
                try:
                    conn.sendall(struct.pack("!H", len(data)) + data)
                except OSError:
                    pass

        buf = b""
        deadline = time.monotonic() + 30  # no connection outlives a test
        while not self._stop.is_set() and time.monotonic() < deadline:
            r, _, _ = select.select([conn], [], [], 0.1)
            if not r:
                continue
            try:
                chunk = conn.recv(65535)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            while len(buf) >= 2:
                n = struct.unpack("!H", buf[:2])[0]
                if len(buf) < 2 + n:
                    break
                wire, buf = buf[2:2 + n], buf[2 + n:]
                try:
                    query = dns.message.from_wire(wire)
                except Exception:
                    continue
                self._record("tcp", wire, query, src)
                rule = self._rule(query.question[0].name.to_text()) if query.question else Rule()
                if rule.drop or rule.only_spoof:
                    continue
                list(self._send_spoofs(query, rule, send))  # wrong_id / wrong_question only
                data = self._answer(query, rule).to_wire(max_size=65535)
                self._later(rule.delay_ms, lambda data=data: send(data))
        try:
            conn.close()
        except OSError:
            pass


def _bare_header(qid: int, rcode: int, qdcount: int = 0) -> bytes:
    """A 12-byte response header: QR and RD set, the given rcode and QDCOUNT, no records."""
    return struct.pack("!HHHHHH", qid, 0x8100 | rcode, qdcount, 0, 0, 0)


def _udp_special_impl(up: "FakeUpstream", query: dns.message.Message, rule: Rule,
                      wire: bytes) -> Optional[bytes]:
    """The UDP reply for the Rule options formerr_edns, malformed and case_upper, or None when
    none of them applies (the normal answer path then runs)."""
    if rule.formerr_edns and query.edns >= 0 and (
            not rule.formerr_edns_do_only or query.ednsflags & dns.flags.DO):
        if rule.formerr_bare:
            return _bare_header(query.id, dns.rcode.FORMERR)
        resp = dns.message.make_response(query)
        resp.use_edns(False)
        resp.set_rcode(dns.rcode.FORMERR)
        return resp.to_wire()
    if rule.malformed == "garbage":
        good = up._udp_wire(query, up._answer(query, rule))
        return good[:6] + struct.pack("!H", 9) + good[8:]  # ANCOUNT 9, far fewer present
    if rule.malformed == "bad_question":
        return _bare_header(query.id, 0, qdcount=1) + bytes([63]) + b"a" * 11
    if rule.malformed:
        raise ValueError(f"unknown malformed kind {rule.malformed!r}")
    if rule.case_upper:
        data = bytearray(up._udp_wire(query, up._answer(query, rule)))
        qlen = len(query.question[0].name.to_wire())
        data[12:12 + qlen] = bytes(data[12:12 + qlen]).upper()  # label lengths are < 0x41
        return bytes(data)
    return None


FakeUpstream._udp_special = _udp_special_impl
