#!/usr/bin/env python3
"""querylog-wear.py NXDNS_BIN WORKDIR --rate QPS [--secs S] [--base PORT] [--json OUT]
                   [--commit-interval S]

Bytes written to disk per logged query (issue 16, "Longevity on a Pi's SD card"): one `nxdns
serve` on 127.0.0.1 (DNS on --base, a fake upstream on --base+1 that answers every A query
with TTL 300), a household mix of 300 names (skewed; one in five denied by a filter.deny rule,
the rest forwarded or answered from the cache) sent over UDP at a fixed rate, without pause.
The window runs from one commit (SUM(n) of log_blocks changes, read by a read-only connection
of this process, whose reads and writes are not the daemon's) to the first commit --secs or
more later: write_bytes of the daemon's /proc/PID/io over it, plus the bytes of a PASSIVE
checkpoint this process runs at the end (it checkpoints at the start too), so the window pays
for copying every page it appended back into the database, an upper bound of the daemon's own
checkpoints (one per ~1000 WAL pages, which writes a page changed by many commits once).
bytes per query = (daemon + checkpoint) / records committed in the window. "total" is
wait4's ru_oublock x 512 over the whole process (schema creation, exit) / queries sent.
--commit-interval sets logging.commit_interval (omitted: the default). Loopback only.
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


def io_field(path, field):
    with open(path) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in {path}")


def write_bytes(pid):
    return io_field(f"/proc/{pid}/io", "write_bytes")


def writer_tid(pid):
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/comm") as f:
            if f.read().strip() == "nx-qlog":
                return t
    raise RuntimeError("no nx-qlog thread")


def writer_wchar(pid, tid):
    """Bytes the query-log writer thread handed to write system calls (WAL frames, database
    pages at its checkpoints): what SQLite wrote, before the page cache's accounting."""
    return io_field(f"/proc/{pid}/task/{tid}/io", "wchar")


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


def checkpoint(db):
    """PRAGMA wal_checkpoint(PASSIVE) from this process: (write_bytes, wchar) it caused."""
    w0, c0 = write_bytes(os.getpid()), io_field("/proc/thread-self/io", "wchar")
    c = sqlite3.connect(str(db), timeout=10)
    try:
        c.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        c.close()
    return write_bytes(os.getpid()) - w0, io_field("/proc/thread-self/io", "wchar") - c0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("workdir")
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--secs", type=float, default=60)
    ap.add_argument("--base", type=int, default=5700)
    ap.add_argument("--json")
    ap.add_argument("--commit-interval", type=int)
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
    t_start = time.monotonic()
    c.setblocking(False)
    answered = 0
    # Steady state: the window runs from one commit (the stored count changes) to the first
    # commit --secs or more later, the sender never pausing; the WAL is checkpointed by this
    # process at both ends (its own write_bytes), so the window also pays the checkpoint of
    # every page it appended, as a later checkpoint would (an upper bound: in the daemon one
    # checkpoint per ~1000 WAL pages writes a page changed by many commits once).
    phase, last, wb0 = 0, logged(db), None
    i = 0
    deadline = t_start + a.secs * 3 + 3 * (a.commit_interval or 60) + 60
    while time.monotonic() < deadline:
        due = t_start + i / a.rate
        while True:
            try:
                c.recvfrom(4096)
                answered += 1
            except (BlockingIOError, ConnectionRefusedError):
                break
        d = due - time.monotonic()
        if d > 0:
            time.sleep(d)
        c.sendto(dns.message.make_query(rnd.choices(names, weights)[0], "A").to_wire(),
                 ("127.0.0.1", port))
        sent += 1
        i += 1
        if i % max(1, int(a.rate / 4)):
            continue
        now_logged = logged(db)
        if now_logged == last:
            continue
        last = now_logged
        if phase == 0:
            ck0 = checkpoint(db)
            tid = writer_tid(p.pid)
            wb0, n0, t0 = write_bytes(p.pid), now_logged, time.monotonic()
            wc0 = writer_wchar(p.pid, tid)
            phase = 1
        elif time.monotonic() - t0 >= a.secs - 1:
            wb1, n1, t1 = write_bytes(p.pid), now_logged, time.monotonic()
            wc1 = writer_wchar(p.pid, tid)
            phase = 2
            break
    if phase != 2:
        sys.exit("no commit boundary in time")
    ck_bytes, ck_wchar = checkpoint(db)
    got = n1 - n0
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
        "write_bytes": wb1 - wb0,
        "checkpoint_bytes": ck_bytes,
        "bytes_per_query": round((wb1 - wb0 + ck_bytes) / max(1, got), 1),
        "daemon_bytes_per_query": round((wb1 - wb0) / max(1, got), 1),
        "writer_wchar": wc1 - wc0,
        "checkpoint_wchar": ck_wchar,
        "wchar_per_query": round((wc1 - wc0 + ck_wchar) / max(1, got), 1),
        "total_with_exit_bytes": ru.ru_oublock * 512,
        "db_bytes": db.stat().st_size,
        "wal_bytes_after": wal.stat().st_size if wal.exists() else 0,
        "exit_status": status,
    }
    r["total_bytes_per_query"] = round(r["total_with_exit_bytes"] / max(1, sent), 1)
    print(json.dumps(r))
    if a.json:
        Path(a.json).write_text(json.dumps(r, indent=1) + "\n")


if __name__ == "__main__":
    main()
