"""dnstap export (issue 17): every answer becomes a CLIENT_QUERY and a CLIENT_RESPONSE frame
sent to a Frame Streams collector. The collector is Debian's `fstrm_capture` (fstrm-bin),
capturing to a file; the frames are decoded by `dnstap-ldns` (its YAML output), an
implementation that shares no code with ours. dnstap-ldns does not print `Dnstap.extra`
(where nxdns puts the block decision: the schema Debian ships has no Policy message), so the
test reads that one field itself from the capture file (Frame Streams + protobuf, a few lines
below).

The collector is also down at start, comes back, goes away and comes back again: frames
resume, the queue's drops are counted, and every DNS query is answered throughout."""

from __future__ import annotations

import errno
import itertools
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from typing import Dict, List, Optional

import dns.message
import dns.query
import dns.rcode
import pytest

from adminkit import udp_burst
from harness import answers, enc_listeners, free_port, make_query, merge, nxdns_bin, wait_until

pytestmark = pytest.mark.skipif(
    not (shutil.which("fstrm_capture") and shutil.which("dnstap-ldns")),
    reason="fstrm_capture (fstrm-bin) and dnstap-ldns are needed (scripts/bootstrap)")

CONTENT_TYPE = "protobuf:dnstap.Dnstap"


class Collector:
    """fstrm_capture on a Unix socket or a TCP port, writing every frame to a file."""

    def __init__(self, workdir: str, name: str, unix: Optional[str] = None,
                 tcp_port: Optional[int] = None):
        self.path = os.path.join(workdir, name + ".fstrm")
        self.log_path = os.path.join(workdir, name + ".log")
        args = ["fstrm_capture", "-t", CONTENT_TYPE, "-w", self.path]
        if unix:
            args += ["-u", unix]
        else:
            args += ["-a", "127.0.0.1", "-p", str(tcp_port)]
        self.unix, self.tcp_port = unix, tcp_port
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        assert wait_until(self._listening, 5.0), self.logtext()

    def _listening(self) -> bool:
        if self.proc.poll() is not None:
            return False
        if self.unix:
            return os.path.exists(self.unix)
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.tcp_port)) == 0

    def logtext(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self) -> None:
        """SIGTERM by PID: fstrm_capture closes its file with every frame it read."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        if self.unix and os.path.exists(self.unix):
            os.unlink(self.unix)

    def frames(self) -> List[Dict[str, str]]:
        """The capture decoded by dnstap-ldns -y: one dict per message (top-level and
        message fields flattened, query_message/response_message as their text)."""
        out = subprocess.run(["dnstap-ldns", "-y", "-r", self.path], capture_output=True,
                             timeout=30, check=True, text=True).stdout
        frames = []
        for doc in out.split("\n---"):
            f: Dict[str, str] = {}
            block = None
            for line in doc.splitlines():
                m = re.match(r"^\s*(\w+): (.*)$", line)
                if m and not line.startswith("    "):
                    key, val = m.group(1), m.group(2).strip().strip('"')
                    block = key if val == "|" else None
                    f[key] = "" if val == "|" else val
                elif block:
                    f[block] += line.strip() + "\n"
            if f.get("type"):
                frames.append(f)
        return frames

    def raw(self) -> Dict[tuple, tuple]:
        """Every data frame read by this test itself (Frame Streams, then protobuf): (Dnstap
        fields, Message fields) keyed by (Message.type, DNS id of its query_message or
        response_message)."""
        with open(self.path, "rb") as fh:
            data = fh.read()
        out, pos = {}, 0
        while pos + 4 <= len(data):
            (n,) = struct.unpack_from("!I", data, pos)
            pos += 4
            if n == 0:  # escape: a control frame follows
                (clen,) = struct.unpack_from("!I", data, pos)
                pos += 4 + clen
                continue
            df = pb_fields(data[pos:pos + n])
            mf = pb_fields(df.get(14, [b""])[0])
            wire = (mf.get(10) or mf.get(14))[0]
            key = (mf[1][0], struct.unpack("!H", wire[:2])[0])
            assert key not in out, f"two frames of type {key[0]} for id {key[1]}"
            out[key] = (df, mf)
            pos += n
        return out

    def extras(self) -> Dict[tuple, bytes]:
        """Dnstap.extra (field 3), b"" when absent, keyed as raw()."""
        return {k: df.get(3, [b""])[0] for k, (df, _) in self.raw().items()}


def pb_varint(buf: bytes, pos: int):
    v, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, pos


def pb_fields(buf: bytes) -> Dict[int, list]:
    """A protobuf message's fields: number -> values (ints, or bytes when length-delimited)."""
    out: Dict[int, list] = {}
    pos = 0
    while pos < len(buf):
        key, pos = pb_varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = pb_varint(buf, pos)
        elif wt == 1:
            v, pos = buf[pos:pos + 8], pos + 8
        elif wt == 5:
            v, pos = buf[pos:pos + 4], pos + 4
        elif wt == 2:
            n, pos = pb_varint(buf, pos)
            v, pos = buf[pos:pos + n], pos + n
        else:
            raise AssertionError(f"wire type {wt} in a Dnstap message")
        out.setdefault(num, []).append(v)
    return out


@pytest.fixture
def workdir():
    # A short directory: a Unix socket path must fit in 108 bytes.
    d = tempfile.mkdtemp(prefix="nxdt-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def dnstap_config(workdir: str, tcp_port: Optional[int] = None, **extra) -> dict:
    dt = {"address": f"127.0.0.1:{tcp_port}"} if tcp_port else \
        {"socket": os.path.join(workdir, "dt.sock")}
    dt.update(extra)
    return {"dnstap": dt, "cache": {"size": 1000}, "filter": {"deny": ["blocked.example"]},
            "upstream": {"timeout_ms": 800}}


def by_id(frames, qid: int, kind: str):
    """The frames of type `kind` (CLIENT_QUERY / CLIENT_RESPONSE) whose message has id qid."""
    return [f for f in frames if f.get("type") == kind and
            re.search(rf"id: {qid}\b", f.get("query_message", "") + f.get("response_message", ""))]


_ids = itertools.count(1000)


def ask(nx, name: str, proto: str):
    """A query from a known source port, so the frames' query_port can be checked, with an id
    of its own in the test, so frames can be matched to it. Returns (query, answer, port)."""
    q = make_query(name, edns=0)
    q.id = next(_ids)
    for attempt in range(5):
        # a port found free may be taken by another process before we bind it: take another
        port = free_port(v6=False, udp=proto == "udp")
        try:
            if proto == "udp":
                r = dns.query.udp(q, "127.0.0.1", port=nx.port, source_port=port, timeout=3)
            else:
                r = dns.query.tcp(q, "127.0.0.1", port=nx.port, source_port=port, timeout=3)
            return q, r, port
        except OSError as e:
            if e.errno != errno.EADDRINUSE or attempt == 4:
                raise
    raise AssertionError("unreachable")


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_frames_for_allowed_blocked_and_cached(make_upstream, make_nxdns, workdir, transport):
    up = make_upstream(default_a="192.0.2.7")
    tcp_port = free_port(v6=False, udp=False) if transport == "tcp" else None
    col = Collector(workdir, "cap", unix=None if tcp_port else os.path.join(workdir, "dt.sock"),
                    tcp_port=tcp_port)
    try:
        nx = make_nxdns([up], config=dnstap_config(workdir, tcp_port, identity="box-1"))
        assert wait_until(lambda: "dnstap: connected" in nx.log(), 10), nx.log()[-2000:]
        sent = []  # (proto, kind, query, response, source port)
        for proto in ("udp", "tcp"):
            for kind, name in (("allowed", f"fwd-{proto}.example"),
                               ("cached", f"fwd-{proto}.example"),
                               ("blocked", "blocked.example")):
                q, r, sport = ask(nx, name, proto)
                sent.append((proto, kind, q, r, sport))
        for proto, kind, q, r, _ in sent:
            assert answers(r) == (["0.0.0.0"] if kind == "blocked" else ["192.0.2.7"]), kind
        assert len(up.queries("fwd-udp.example")) == 1, "the second one comes from the cache"
        nx.wait_counter("nxdns_dnstap_sent_total", 2 * len(sent), timeout=10)
        m = nx.metrics()
        assert m.get("nxdns_dnstap_sent_total") == 2 * len(sent)
        assert m.get("nxdns_dnstap_dropped_total", reason="queue_full") == 0
    finally:
        col.stop()

    assert m.get("nxdns_dnstap_forwarder_sent_total") == 0, "dnstap.forwarder is off"
    frames = col.frames()
    assert len(frames) == 2 * len(sent), frames
    for f in frames:
        assert f["identity"] == "box-1" and f["version"].startswith("nxdns "), f
        assert f["socket_family"] == "INET" and f["query_address"] == "127.0.0.1", f
        # the responder: the listener address and port the client asked
        assert f["response_address"] == "127.0.0.1", f
        assert f["response_port"] == str(nx.port), f
    for proto, kind, q, r, sport in sent:
        cq = by_id(frames, q.id, "CLIENT_QUERY")
        cr = by_id(frames, q.id, "CLIENT_RESPONSE")
        assert len(cq) == 1 and len(cr) == 1, (kind, proto, cq, cr)
        cq, cr = cq[0], cr[0]
        for f in (cq, cr):
            assert f["socket_protocol"] == proto.upper(), f
            assert f["query_port"] == str(sport), (f, sport)
            assert f["query_time"] == cq["query_time"]
        qname = q.question[0].name.to_text()
        assert re.search(rf"^;{re.escape(qname)}\s+IN\s+A$", cq["query_message"], re.M), cq
        assert "flags: rd" in cq["query_message"], cq
        addr = "0.0.0.0" if kind == "blocked" else "192.0.2.7"
        assert re.search(rf"^{re.escape(qname)}\s+\d+\s+IN\s+A\s+{re.escape(addr)}$",
                         cr["response_message"], re.M), cr
        assert cr["response_time"] >= cr["query_time"], cr

    extras = {k: e.decode() for k, e in col.extras().items()}
    assert len(extras) == len(frames)
    CQ, CR = 5, 6  # Message.Type
    by_kind = {}
    for proto, kind, q, _, _ in sent:
        assert extras[(CQ, q.id)] == "", "the decision goes on the response only"
        by_kind[(proto, kind)] = extras[(CR, q.id)]
    for proto in ("udp", "tcp"):
        assert by_kind[(proto, "blocked")] == \
            "nxdns action=block reason=user_deny rule=blocked.example source=blocked.example", \
            by_kind
        assert by_kind[(proto, "allowed")] == "nxdns action=none reason=none", by_kind
        assert by_kind[(proto, "cached")] == "nxdns action=none reason=none cached=true", \
            by_kind


def test_dot_doh_and_ipv6_clients(make_upstream, make_nxdns, workdir):
    up = make_upstream(default_a="192.0.2.7")
    col = Collector(workdir, "cap", unix=os.path.join(workdir, "dt.sock"))
    try:
        nx = make_nxdns([up], config=merge(enc_listeners(), dnstap_config(workdir)))
        assert wait_until(lambda: "dnstap: connected" in nx.log(), 10), nx.log()[-2000:]
        sent = []
        for proto, v6 in (("DOT", False), ("DOH", False), ("UDP", True), ("DOH", True)):
            q = make_query("blocked.example", edns=0)
            q.id = next(_ids)
            r = nx.dot(q, v6=v6) if proto == "DOT" else nx.doh(q, v6=v6) if proto == "DOH" \
                else nx.udp(q, v6=v6)
            assert answers(r) == ["0.0.0.0"], (proto, v6)
            sent.append((proto, v6, q))
        nx.wait_counter("nxdns_dnstap_sent_total", 2 * len(sent), timeout=10)
    finally:
        col.stop()
    # Debian's dnstap-ldns (0.2.1) predates SocketProtocol DOT and DOH and refuses such frames
    # ("print_dnstap_frame() failed"); the schema Debian ships has them, so nxdns sends them
    # and this test reads the frames itself.
    raw = col.raw()
    assert len(raw) == 2 * len(sent)
    protos = {"UDP": 1, "TCP": 2, "DOT": 3, "DOH": 4}
    for proto, v6, q in sent:
        for kind in (5, 6):  # CLIENT_QUERY, CLIENT_RESPONSE
            df, mf = raw[(kind, q.id)]
            assert mf[3] == [protos[proto]], (proto, mf)
            assert mf[2] == [2 if v6 else 1], (proto, v6, mf)  # INET6 / INET
            assert mf[4] == [socket.inet_pton(socket.AF_INET6 if v6 else socket.AF_INET,
                                              "::1" if v6 else "127.0.0.1")]
            assert mf[6][0] > 0  # query_port
            # response_address and _port: the listener of that protocol and family
            assert mf[5] == mf[4], (proto, v6, mf)
            key = "dot" if proto == "DOT" else "doh" if proto == "DOH" else "dns"
            assert mf[7] == [int(nx.config["listener"][key][1 if v6 else 0].rsplit(":", 1)[1])]
        assert raw[(6, q.id)][0][3][0].startswith(b"nxdns action=block reason=user_deny ")
        assert b"blocked" in raw[(5, q.id)][1][10][0]  # the rebuilt query's question


@pytest.mark.nx_timeout(120)
def test_collector_down_at_start_then_back_then_gone_and_back(make_upstream, make_nxdns,
                                                               workdir):
    up = make_upstream(default_a="192.0.2.7")
    sock = os.path.join(workdir, "dt.sock")
    cfg = dnstap_config(workdir, queue_bytes=1048576)
    cfg["filter"]["deny"] = ["*.burst.test", "blocked.example"]
    cfg["listener"] = {"workers": 1}
    nx = make_nxdns([up], config=cfg)

    # Down at start: every answer is served, connects are retried and counted, the 1 MiB
    # ring keeps the newest events and drops the oldest.
    names = [f"q{i}.burst.test" for i in range(12000)]
    answered, worst = udp_burst(nx.port, names, window=16, timeout=60)
    assert answered == len(names), f"{answered} of {len(names)} answered, collector down"
    assert worst < 1.0, worst
    m = nx.metrics()
    assert m.get("nxdns_dnstap_sent_total") == 0
    assert m.get("nxdns_dnstap_reconnects_total") >= 1
    dropped = m.get("nxdns_dnstap_dropped_total", reason="queue_full")
    assert 0 < dropped < len(names), dropped

    # Back: the queued (newest) events are delivered, then live ones.
    col = Collector(workdir, "first", unix=sock)
    try:
        kept = len(names) - dropped
        nx.wait_counter("nxdns_dnstap_sent_total", 2 * kept, timeout=20)
        q, r, _ = ask(nx, "after.example", "udp")
        assert answers(r) == ["192.0.2.7"]
        nx.wait_counter("nxdns_dnstap_sent_total", 2 * kept + 2, timeout=10)
    finally:
        col.stop()
    frames = col.frames()
    burst = [f for f in frames if f["type"] == "CLIENT_QUERY" and ".burst.test." in
             f.get("query_message", "")]
    assert len(burst) == kept, (len(burst), kept)
    # udp_burst sends from the end of the list: q0 is the newest, the highest the oldest.
    text = "".join(f["query_message"] for f in burst)
    assert ";q0.burst.test." in text, "the newest event survives drop-oldest"
    assert f";q{len(names) - 1}.burst.test." not in text, "the oldest were dropped"
    assert by_id(frames, q.id, "CLIENT_RESPONSE"), "a live answer after the backlog"

    # Gone again: answers go on, the writer notices at its next write and reconnects.
    m0 = nx.metrics()
    reconnects = m0.get("nxdns_dnstap_reconnects_total")
    sent0, lost0 = m0.get("nxdns_dnstap_sent_total"), \
        m0.get("nxdns_dnstap_dropped_total", reason="write_error")
    gone = []
    for i in range(20):
        qg, r, _ = ask(nx, "blocked.example", "tcp" if i % 2 else "udp")
        assert answers(r) == ["0.0.0.0"]
        gone.append(qg)
    assert wait_until(lambda: nx.metrics().get("nxdns_dnstap_reconnects_total") > reconnects,
                      10)
    # Back again: new answers arrive in the new capture.
    col2 = Collector(workdir, "second", unix=sock)
    try:
        assert wait_until(lambda: nx.log().count("dnstap: connected") >= 2, 15), \
            nx.log()[-3000:]
        q2, r2, _ = ask(nx, "again.example", "tcp")
        assert answers(r2) == ["192.0.2.7"]
        # every answer since the first capture ended is sent, or counted lost with the write
        # that found the collector gone
        def settled():
            m = nx.metrics()
            lost = m.get("nxdns_dnstap_dropped_total", reason="write_error") - lost0
            return m.get("nxdns_dnstap_sent_total") - sent0 == 2 * (len(gone) + 1 - lost)
        assert wait_until(settled, 10), nx.metrics().get("nxdns_dnstap_sent_total")
        lost = nx.metrics().get("nxdns_dnstap_dropped_total", reason="write_error") - lost0
    finally:
        col2.stop()
    frames2 = col2.frames()
    assert by_id(frames2, q2.id, "CLIENT_QUERY") and by_id(frames2, q2.id, "CLIENT_RESPONSE")
    # the answers made while the collector was away reach the new one (but those in the write
    # that failed), oldest first lost
    resumed = [qg for qg in gone if by_id(frames2, qg.id, "CLIENT_RESPONSE")]
    assert 1 <= lost <= len(gone) and len(resumed) == len(gone) - lost, (lost, len(resumed))
    assert resumed == gone[len(gone) - len(resumed):], "the newest are the ones kept"
    assert nx.metrics().get("nxdns_dnstap_dropped_total", reason="too_large") == 0


def test_config_refuses_two_destinations_and_a_bad_address(tmp_path):
    cases = {
        "dnstap: {socket: /tmp/x.sock, address: '127.0.0.1:6000'}\n":
            "give dnstap.socket or dnstap.address, not both",
        "dnstap: {address: '127.0.0.1'}\n": "dnstap.address: bad address",
        "dnstap: {address: 'collector.lan:6000'}\n": "dnstap.address: bad address",
    }
    for text, want in cases.items():
        p = tmp_path / "c.yaml"
        p.write_text(text)
        r = subprocess.run([str(nxdns_bin()), "check-config", str(p)], capture_output=True, text=True,
                           timeout=10)
        assert r.returncode != 0 and want in r.stderr + r.stdout, (text, r.stderr, r.stdout)


class StallingCollector:
    """A Frame Streams collector on a Unix socket that completes the bidirectional handshake
    (READY -> ACCEPT, START) and then never reads again, as a collector stuck on its own
    output would. Runs in a thread; every socket has a timeout."""

    ACCEPT, START, READY = 1, 2, 4

    def __init__(self, path: str):
        self.path = path
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(4)
        self.srv.settimeout(0.2)
        self.conns: List[socket.socket] = []
        self.handshakes = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _read_control(self, c: socket.socket) -> int:
        def exact(n):
            b = b""
            while len(b) < n:
                chunk = c.recv(n - len(b))
                if not chunk:
                    raise ConnectionError("closed")
                b += chunk
            return b
        esc, n = struct.unpack("!II", exact(8))
        assert esc == 0, "a control frame starts with the escape"
        return struct.unpack("!I", exact(n)[:4])[0]

    def _run(self):
        while not self.done.is_set():
            try:
                c, _ = self.srv.accept()
            except socket.timeout:
                continue
            c.settimeout(3)
            try:
                assert self._read_control(c) == self.READY
                ct = CONTENT_TYPE.encode()
                body = struct.pack("!III", self.ACCEPT, 1, len(ct)) + ct
                c.sendall(struct.pack("!II", 0, len(body)) + body)
                assert self._read_control(c) == self.START
                self.handshakes += 1
            except (OSError, ConnectionError, AssertionError):
                c.close()
                continue
            self.conns.append(c)  # held open, never read

    def close(self):
        self.done.set()
        self.thread.join(5)
        for c in self.conns:
            c.close()
        self.srv.close()
        os.unlink(self.path)


@pytest.mark.nx_timeout(90)
def test_stalled_collector_costs_reconnects_not_answers(make_upstream, make_nxdns, workdir):
    up = make_upstream(default_a="192.0.2.7")
    col = StallingCollector(os.path.join(workdir, "dt.sock"))
    try:
        cfg = dnstap_config(workdir)
        cfg["filter"]["deny"] = ["*.stall.test"]
        nx = make_nxdns([up], config=cfg)
        assert wait_until(lambda: col.handshakes >= 1, 10), nx.log()[-2000:]
        # Enough answers to fill the socket's buffer several times: the writer blocks in its
        # bounded wait, gives up after 2 s, counts the batch lost and reconnects.
        names = [f"s{i}.stall.test" for i in range(6000)]
        t = time.monotonic()
        answered, worst = udp_burst(nx.port, names, window=16, timeout=60)
        assert answered == len(names) and worst < 1.0, (answered, worst)
        assert wait_until(lambda: nx.metrics().get("nxdns_dnstap_reconnects_total") >= 1
                          and col.handshakes >= 2, 15), \
            (nx.metrics().get("nxdns_dnstap_reconnects_total"), col.handshakes)
        m = nx.metrics()
        assert m.get("nxdns_dnstap_dropped_total", reason="write_error") >= 1
        # what waits is in the fixed rings: the owner holds dnstap.queue_bytes (4 MiB) and the
        # writer's two buffers, no more
        owned = m.get("nxdns_memory_owner_bytes", owner="dnstap_queue")
        assert 4 * 1024 * 1024 < owned < 5 * 1024 * 1024, owned
        # a stop with the collector still stalled is bounded by the I/O timeout
        t = time.monotonic()
        assert nx.stop() == 0, nx.log()[-3000:]
        assert time.monotonic() - t < 8, "stop waited on the stalled collector"
    finally:
        col.close()


def test_response_address_on_a_wildcard_listener(make_upstream, make_nxdns, workdir):
    """On a wildcard bind the response address is the one the datagram (or connection) was
    addressed to, not 0.0.0.0: 127.0.0.2 is a loopback address like 127.0.0.1."""
    up = make_upstream(default_a="192.0.2.7")
    col = Collector(workdir, "cap", unix=os.path.join(workdir, "dt.sock"))
    port = free_port(v6=False, udp=True)
    try:
        nx = make_nxdns([up], config=merge(dnstap_config(workdir),
                                           {"listener": {"dns": [f"0.0.0.0:{port}"]}}))
        assert wait_until(lambda: "dnstap: connected" in nx.log(), 10), nx.log()[-2000:]
        sent = []
        for dest in ("127.0.0.2", "127.0.0.1"):
            for proto in ("udp", "tcp"):
                q = make_query("blocked.example", edns=0)
                q.id = next(_ids)
                fn = dns.query.udp if proto == "udp" else dns.query.tcp
                assert answers(fn(q, dest, port=port, timeout=3)) == ["0.0.0.0"]
                sent.append((dest, proto, q))
        nx.wait_counter("nxdns_dnstap_sent_total", 2 * len(sent), timeout=10)
    finally:
        col.stop()
    frames = col.frames()
    for dest, proto, q in sent:
        for kind in ("CLIENT_QUERY", "CLIENT_RESPONSE"):
            (f,) = by_id(frames, q.id, kind)
            assert f["socket_protocol"] == proto.upper(), f
            # (the client's source is the route's, 127.0.0.1, either way)
            assert f["response_address"] == dest, (dest, f)
            assert f["response_port"] == str(port), f


def test_forwarder_messages(make_upstream, make_nxdns, workdir):
    """dnstap.forwarder: a FORWARDER_QUERY for each query sent upstream and a
    FORWARDER_RESPONSE for each answer taken, with the upstream's address and port as the
    responder and the protocol of the exchange: UDP, then TCP after a truncated answer."""
    from fakeupstream import Rule
    up = make_upstream(default_a="192.0.2.7")
    up.script["tc.example"] = Rule(tc_udp=True, records=[("A", "192.0.2.30")])
    col = Collector(workdir, "cap", unix=os.path.join(workdir, "dt.sock"))
    try:
        nx = make_nxdns([up], config=dnstap_config(workdir, forwarder=True))
        assert wait_until(lambda: "dnstap: connected" in nx.log(), 10), nx.log()[-2000:]
        _, r1, _ = ask(nx, "fwd.example", "udp")
        _, r2, _ = ask(nx, "fwd.example", "udp")  # cached: no upstream exchange
        _, r3, _ = ask(nx, "blocked.example", "tcp")  # blocked: none either
        _, r4, _ = ask(nx, "tc.example", "udp")  # UDP (truncated), then TCP
        assert answers(r1) == answers(r2) == ["192.0.2.7"] and answers(r4) == ["192.0.2.30"]
        assert answers(r3) == ["0.0.0.0"]
        # 4 answers (2 frames each) and at least 6 forwarder frames: fwd (2), tc over UDP (2)
        # and TCP (2); a datagram re-sent on a slow machine is one FORWARDER_QUERY more
        nx.wait_counter("nxdns_dnstap_sent_total", 4 * 2 + 6, timeout=10)
        time.sleep(0.2)  # nothing more may come
        m = nx.metrics()
    finally:
        col.stop()
    frames = col.frames()
    fwd = [f for f in frames if f["type"].startswith("FORWARDER_")]
    assert m.get("nxdns_dnstap_forwarder_sent_total") == len(fwd), (m, fwd)
    assert m.get("nxdns_dnstap_sent_total") == 4 * 2 + len(fwd)
    for f in fwd:
        assert f["socket_family"] == "INET" and f["response_address"] == "127.0.0.1", f
        assert f["response_port"] == str(up.port), f
        assert "query_address" not in f, "nxdns's own end of the exchange is not exported"

    def what(f):
        text = f.get("query_message", "") + f.get("response_message", "")
        name = re.search(r";(\S+)\s+IN\s+A$", text, re.M).group(1).lower()
        return f["type"], f["socket_protocol"], name, int(re.search(r"id: (\d+)", text).group(1))
    got = [what(f) for f in fwd]
    # every query the upstream received was exported as sent, with its id and protocol
    assert sorted((p, n, i) for t, p, n, i in got if t == "FORWARDER_QUERY") == \
        sorted((q.transport.upper(), q.qname.lower(), q.id) for q in up.log), (got, up.log)
    # one answer taken per exchange, with the id of a query sent
    answers_taken = sorted((p, n) for t, p, n, _ in got if t == "FORWARDER_RESPONSE")
    assert answers_taken == [("TCP", "tc.example."), ("UDP", "fwd.example."),
                             ("UDP", "tc.example.")], got
    ids = {i for t, _, _, i in got if t == "FORWARDER_QUERY"}
    assert all(i in ids for t, _, _, i in got if t == "FORWARDER_RESPONSE"), got
    for f in fwd:
        if f["type"] == "FORWARDER_RESPONSE":
            assert f["response_time"] >= f["query_time"], f
    fr_fwd = [f for f in fwd if f["type"] == "FORWARDER_RESPONSE" and "fwd.example" in
              f["response_message"].lower()][0]
    assert re.search(r"IN\s+A\s+192\.0\.2\.7$", fr_fwd["response_message"], re.M), fr_fwd


def test_reload_moves_the_export_and_turns_it_off_and_on(make_upstream, make_nxdns, workdir):
    """SIGHUP applies dnstap.socket/address/identity/forwarder without a restart: the export
    moves to the new collector, turns off (its writer thread ends) and on again;
    dnstap.queue_bytes is a restart key and the reload says so."""
    up = make_upstream(default_a="192.0.2.7")
    first = Collector(workdir, "first", unix=os.path.join(workdir, "dt.sock"))
    tcp_port = free_port(v6=False, udp=False)
    second = Collector(workdir, "second", tcp_port=tcp_port)
    third = None
    try:
        nx = make_nxdns([up], config=dnstap_config(workdir, identity="before"))
        assert wait_until(lambda: "dnstap: connected" in nx.log(), 10), nx.log()[-2000:]
        cfg = nx.config
        threads_on = nx.threads()
        q1, _, _ = ask(nx, "one.example", "udp")
        nx.wait_counter("nxdns_dnstap_sent_total", 2, timeout=10)

        # moved: TCP collector, a new identity, forwarder frames on
        reloads = nx.counter("nxdns_config_reloads_total", result="ok")
        cfg = merge(cfg, {"dnstap": {"socket": "", "address": f"127.0.0.1:{tcp_port}",
                                     "identity": "after", "forwarder": True}})
        nx.reload(cfg)
        assert wait_until(lambda: nx.log().count("dnstap: connected") >= 2, 10), \
            nx.log()[-3000:]
        q2, _, _ = ask(nx, "two.example", "udp")
        nx.wait_counter("nxdns_dnstap_sent_total", 2 + 4, timeout=10)
        assert nx.counter("nxdns_dnstap_forwarder_sent_total") == 2

        # off: no more frames, one thread fewer, DNS answers
        cfg = merge(cfg, {"dnstap": {"address": "", "forwarder": False}})
        nx.reload(cfg)
        assert wait_until(lambda: "dnstap: reload: export off" in nx.log(), 10), \
            nx.log()[-3000:]
        assert wait_until(lambda: nx.threads() == threads_on - 1, 10), nx.threads()
        q3, r3, _ = ask(nx, "three.example", "tcp")
        assert answers(r3) == ["192.0.2.7"]

        # on again, at a third collector; a queue size change waits for a restart
        third = Collector(workdir, "third", unix=os.path.join(workdir, "dt3.sock"))
        cfg = merge(cfg, {"dnstap": {"socket": os.path.join(workdir, "dt3.sock"),
                                     "queue_bytes": 2097152}})
        nx.reload(cfg)
        assert wait_until(lambda: nx.log().count("dnstap: connected") >= 3, 10), \
            nx.log()[-3000:]
        assert wait_until(lambda: nx.threads() == threads_on, 10), nx.threads()
        q4, _, _ = ask(nx, "four.example", "udp")
        nx.wait_counter("nxdns_dnstap_sent_total", 2 + 4 + 2, timeout=10)
        assert nx.counter("nxdns_dnstap_sent_total") == 8, "nothing was sent while off"
        assert re.search(r"reload: dnstap\.queue_bytes change takes effect after a restart",
                         nx.log()), nx.log()[-3000:]
        assert nx.counter("nxdns_config_reloads_total", result="ok") == reloads + 3
    finally:
        for c in (first, second, third):
            if c:
                c.stop()
    f1, f2, f3 = first.frames(), second.frames(), third.frames()
    assert len(f1) == 2 and by_id(f1, q1.id, "CLIENT_RESPONSE"), f1
    assert {f["identity"] for f in f1} == {"before"}
    assert len(f2) == 4 and by_id(f2, q2.id, "CLIENT_RESPONSE"), f2
    assert {f["identity"] for f in f2} == {"after"}
    assert sorted(f["type"] for f in f2) == ["CLIENT_QUERY", "CLIENT_RESPONSE",
                                             "FORWARDER_QUERY", "FORWARDER_RESPONSE"]
    assert len(f3) == 2 and by_id(f3, q4.id, "CLIENT_RESPONSE"), f3
    assert not by_id(f1 + f2 + f3, q3.id, "CLIENT_QUERY"), "an answer while off is not sent"
