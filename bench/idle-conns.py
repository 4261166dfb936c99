#!/usr/bin/env python3
"""Open N idle DoT connections, then N idle DoH connections, to one server; report its memory.

    bench/idle-conns.py --pid PID --dot HOST:PORT --doh HOST:PORT [-n 1000] [--settle 3]
                        [--metrics URL] [--name NAME] [--query]

Idle DoT: TCP + TLS handshake done, then nothing (--query: one A query answered, then
nothing). Idle DoH: TLS with ALPN h2, the HTTP/2 client preface and an empty SETTINGS frame,
the server's SETTINGS read and acknowledged, then nothing. Connections are opened one after
the other (bounded: each handshake has a 5 s timeout) and held while the server's /proc/PID
status (VmRSS, RssAnon) and, with --metrics, nxdns's ledger owners are read before, after the
DoT set and after the DoH set; then a check counts how many of each set the server still holds
open, and everything is closed. Prints one JSON object (per-connection figures are deltas of
the sample before the set over the connections still open). Loopback only.
"""
import argparse
import json
import os
import select
import socket
import ssl
import struct
import sys
import time

OWNERS = ("tls", "doh_sessions", "tcp_conns", "tcp_writes")
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def status(pid):
    d = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "Threads"):
                d[k] = int(v.split()[0]) * (1024 if k != "Threads" else 1)
    return d


def ledger(url):
    if not url:
        return {}
    import urllib.request
    out = {}
    with urllib.request.urlopen(url, timeout=5) as r:
        for line in r.read().decode().splitlines():
            for o in OWNERS:
                if line.startswith(f'nxdns_memory_owner_bytes{{owner="{o}"}} '):
                    out[o] = int(float(line.split()[1]))
            if line.startswith("nxdns_tcp_server_connections "):
                out["connections"] = int(float(line.split()[1]))
    return out


def sample(pid, url):
    s = status(pid)
    s.update({"ledger_" + k: v for k, v in ledger(url).items()})
    return s


def addr(s):
    h, _, p = s.rpartition(":")
    return h, int(p)


def tls_connect(ctx, target):
    raw = socket.create_connection(target, timeout=5)
    # as DoH/DoT clients do: without it our preface waits behind Nagle for the server's
    # delayed ACK (40 ms) whenever the server sends nothing after its handshake
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = ctx.wrap_socket(raw, server_hostname=None)
    return t


def drain(t):
    """Read whatever the server sent after the handshake (TLS 1.3 tickets, HTTP/2 frames)."""
    t.setblocking(False)
    got = b""
    while True:
        try:
            b = t.recv(65536)
        except (ssl.SSLWantReadError, BlockingIOError):
            return got, True
        except (ssl.SSLError, OSError):
            return got, False
        if not b:
            return got, False
        got += b


def dns_query(qid):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in (b"example", b"com"):
        q += bytes([len(label)]) + label
    return q + b"\x00" + struct.pack(">HH", 1, 1)


def open_dot(target, n, query):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    conns, errors = [], 0
    for i in range(n):
        try:
            t = tls_connect(ctx, target)
            if query:
                m = dns_query(i & 0xFFFF)
                t.sendall(struct.pack(">H", len(m)) + m)
                ln = struct.unpack(">H", t.recv(2))[0]
                while ln > 0:
                    ln -= len(t.recv(ln))
            drain(t)
            conns.append(t)
        except (OSError, ssl.SSLError):
            errors += 1
    return conns, errors


def open_doh(target, n):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    conns, errors = [], 0
    for _ in range(n):
        try:
            t = tls_connect(ctx, target)
            if t.selected_alpn_protocol() != "h2":
                raise OSError("no h2")
            t.sendall(H2_PREFACE + struct.pack(">I", 0)[1:] + bytes([4, 0]) + struct.pack(">I", 0))
            # the server's SETTINGS (type 4, no ACK flag), then our ACK of it
            buf, deadline = b"", time.monotonic() + 5
            while True:
                while len(buf) >= 9:
                    ln = int.from_bytes(buf[0:3], "big")
                    if len(buf) < 9 + ln:
                        break
                    ftype, flags = buf[3], buf[4]
                    buf = buf[9 + ln:]
                    if ftype == 4 and not flags & 1:
                        t.sendall(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")
                        raise StopIteration
                t.settimeout(max(0.1, deadline - time.monotonic()))
                b = t.recv(65536)
                if not b:
                    raise OSError("closed before SETTINGS")
                buf += b
        except StopIteration:
            time.sleep(0)
            drain(t)
            conns.append(t)
        except (OSError, ssl.SSLError):
            errors += 1
    return conns, errors


def still_open(conns):
    n = 0
    for t in conns:
        _, ok = drain(t)
        n += ok
    return n


def per_conn(a, b, n):
    if n <= 0:
        return {}
    keys = set(a) & set(b)
    return {k: (b[k] - a[k]) / n for k in sorted(keys) if k != "Threads"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--dot")
    ap.add_argument("--doh")
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--metrics")
    ap.add_argument("--name", default="")
    ap.add_argument("--query", action="store_true", help="DoT: one query per connection first")
    a = ap.parse_args()
    if a.n > 5000:
        sys.exit("idle-conns: at most 5000 connections a set")
    res = {"name": a.name, "n": a.n, "dot_query": a.query}
    time.sleep(a.settle)
    s0 = sample(a.pid, a.metrics)
    res["before"] = s0
    dot, doh = [], []
    t0 = time.monotonic()
    if a.dot:
        dot, res["dot_errors"] = open_dot(addr(a.dot), a.n, a.query)
        res["dot_open_s"] = round(time.monotonic() - t0, 2)
        time.sleep(a.settle)
        res["dot_held"] = still_open(dot)
        s1 = sample(a.pid, a.metrics)
        res["after_dot"] = s1
        res["dot_per_conn"] = per_conn(s0, s1, res["dot_held"])
    else:
        s1 = s0
    t0 = time.monotonic()
    if a.doh:
        doh, res["doh_errors"] = open_doh(addr(a.doh), a.n)
        res["doh_open_s"] = round(time.monotonic() - t0, 2)
        time.sleep(a.settle)
        res["doh_held"] = still_open(doh)
        res["dot_held_at_end"] = still_open(dot)
        s2 = sample(a.pid, a.metrics)
        res["after_doh"] = s2
        res["doh_per_conn"] = per_conn(s1, s2, res["doh_held"])
    for t in dot + doh:
        try:
            t.close()
        except OSError:
            pass
    time.sleep(a.settle)
    res["after_close"] = sample(a.pid, a.metrics)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
