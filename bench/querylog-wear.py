#!/usr/bin/env python3
"""querylog-wear.py NXDNS_BIN WORKDIR --rate QPS [--secs S] [--base PORT] [--json OUT]
                   [--commit-interval S]

Bytes written to disk per logged query (issue 16, "Longevity on a Pi's SD card"): one `nxdns
serve` on 127.0.0.1 (DNS on --base, a fake upstream on --base+1 that answers every A query
with TTL 300), a household mix of 300 names (skewed; one in five denied by a filter.deny rule,
the rest forwarded or answered from the cache) sent over UDP at a fixed rate for --secs
seconds. write_bytes of /proc/PID/io is read when the sender starts and again once every
query sent is in the database (SUM(n) of log_blocks, read with a read-only connection from
this process, so its reads are not the daemon's); bytes per query = the difference / queries.
The window therefore holds every commit and checkpoint of those queries. Then SIGTERM; the
figure including the shutdown (final commit, last checkpoint) comes from wait4's ru_oublock.
--commit-interval sets logging.commit_interval (omitted: the default). Network: loopback only.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import dns.message
import dns.rrset


def write_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    raise RuntimeError("no write_bytes")


def upstream(sock, stop):
    sock.settimeout(0.2)
    while not stop.is_set():
        try:
            data, addr = sock.recvfrom(4096)
        except socket.timeout:
            continue
        try:
            q = dns.message.from_wire(data)
            r = dns.message.make_response(q)
            qn = q.question[0].name
            r.answer.append(dns.rrset.from_text(qn, 300, "IN", "A", "192.0.2.10"))
            sock.sendto(r.to_wire(), addr)
        except Exception:
            pass


def logged(db):
    try:
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return c.execute("SELECT COALESCE(SUM(n), 0) FROM log_blocks").fetchone()[0]
        finally:
            c.close()
    except sqlite3.Error:
        return -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("workdir")
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--secs", type=float, default=60)
    ap.add_argument("--base", type=int, default=5700)
    ap.add_argument("--json")
    ap.add_argument("--commit-interval", type=int)
    ap.add_argument("--wait", type=float, default=120, help="longest wait for the last commit")
    a = ap.parse_args()

    wd = Path(a.workdir)
    wd.mkdir(parents=True, exist_ok=True)
    state = wd / "state"
    shutil.rmtree(state, ignore_errors=True)
    port, up = a.base, a.base + 1
    rnd = random.Random(16)
    names = [f"site{i}.household.test" for i in range(300)]
    denied = names[::5]
    weights = [1.0 / (i + 1) for i in range(len(names))]
    rnd.shuffle(weights)
    cfg = [
        "listener:",
        f'  dns: ["127.0.0.1:{port}"]',
        "  workers: 2",
        "upstream:",
        f'  servers: ["127.0.0.1:{up}"]',
        "access:",
        "  rate_limit: {qps: 0}",
        "filter:",
        "  deny: [" + ", ".join(f'"{n}"' for n in denied) + "]",
        "admin:",
        "  enabled: false",
        f'state_dir: "{state}"',
        "logging:",
        "  query_log: true",
    ]
    if a.commit_interval is not None:
        cfg.append(f"  commit_interval: {a.commit_interval}")
    cfg += ["log:", "  level: warn", ""]
    (wd / "nxdns.yaml").write_text("\n".join(cfg))

    usock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    usock.bind(("127.0.0.1", up))
    stop = threading.Event()
    ut = threading.Thread(target=upstream, args=(usock, stop), daemon=True)
    ut.start()

    log = open(wd / "nxdns.log", "w")
    p = subprocess.Popen([a.bin, "serve", "--config", str(wd / "nxdns.yaml")], stdout=log,
                         stderr=subprocess.STDOUT)
    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    c.settimeout(0.5)
    probe = dns.message.make_query("probe.household.test", "A").to_wire()
    for _ in range(100):
        if p.poll() is not None:
            sys.exit(f"nxdns exited; see {wd / 'nxdns.log'}")
        try:
            c.sendto(probe, ("127.0.0.1", port))
            c.recvfrom(4096)
            break
        except (socket.timeout, ConnectionRefusedError):
            time.sleep(0.1)
    else:
        sys.exit("nxdns does not answer")
    sent = 1
    time.sleep(1)  # startup writes (schema, first open) settle before the window

    db = state / "querylog.db"
    wb0 = write_bytes(p.pid)
    t0 = time.monotonic()
    c.setblocking(False)
    n = int(a.rate * a.secs)
    answered = 0
    for i in range(n):
        due = t0 + i / a.rate
        while True:
            try:
                c.recvfrom(4096)
                answered += 1
            except (BlockingIOError, ConnectionRefusedError):
                break
        d = due - time.monotonic()
        if d > 0:
            time.sleep(d)
        name = rnd.choices(names, weights)[0]
        c.sendto(dns.message.make_query(name, "A").to_wire(), ("127.0.0.1", port))
        sent += 1
    t_sent = time.monotonic()
    c.settimeout(0.5)
    try:
        while True:
            c.recvfrom(4096)
            answered += 1
    except (socket.timeout, BlockingIOError, ConnectionRefusedError):
        pass
    deadline = time.monotonic() + a.wait
    got = logged(db)
    while got < sent and time.monotonic() < deadline:
        time.sleep(0.5)
        got = logged(db)
    t1 = time.monotonic()
    wb1 = write_bytes(p.pid)
    p.send_signal(signal.SIGTERM)
    _, status, ru = os.wait4(p.pid, 0)
    stop.set()
    wal = state / "querylog.db-wal"
    r = {
        "rate": a.rate,
        "secs": a.secs,
        "commit_interval": a.commit_interval,
        "sent": sent,
        "answered": answered + 1,
        "logged": got,
        "window_s": round(t1 - t0, 1),
        "commit_wait_s": round(t1 - t_sent, 1),
        "write_bytes": wb1 - wb0,
        "bytes_per_query": round((wb1 - wb0) / max(1, n), 1),
        "total_with_exit_bytes": ru.ru_oublock * 512,
        "db_bytes": db.stat().st_size,
        "wal_bytes_after": wal.stat().st_size if wal.exists() else 0,
        "exit_status": status,
    }
    r["total_bytes_per_query"] = round(r["total_with_exit_bytes"] / max(1, sent), 1)
    print(json.dumps(r))
    if a.json:
        Path(a.json).write_text(json.dumps(r, indent=1) + "\n")
    if got < sent:
        sys.exit(f"only {got} of {sent} queries reached the database in {a.wait}s")


if __name__ == "__main__":
    main()
