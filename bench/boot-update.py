#!/usr/bin/python3
"""Boot and list-build speed (issue 16), all of $NX_SHARED_DIR/data/lists/*/* as path sources
(copied to a work directory, so one can be changed):

  update    `nxdns update --offline` from an empty state directory (compile all + snapshot)
  noop      `nxdns update --offline` again, nothing changed
  one       one source changed (a name appended to the largest list), `nxdns update --offline`
  boot      `nxdns serve` with the compiled state: exec to the first answered DNS query
            (a UDP query for a listed name every 2 ms; the answer must be the block)

Each row: wall seconds, user+sys CPU seconds of the child, peak RSS. ROUNDS rounds, interleaved
(update, noop, boot, boot, one; the boots come before the change: a list
changed less than 2 s ago is hashed at boot, see NX_FILTER_STAT_SETTLE_NS). Prints a Markdown table and the load average.

usage: bench/boot-update.py [BINARY] [ROUNDS]      (default build/nxdns, 3)
"""
import json
import os
import re
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NX_SHARED_DIR", ROOT.parent / "shared"))


def free_port(kind):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv):
    c0, t0 = child_cpu(), time.monotonic()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"{argv} exited {p.returncode}:\n{p.stderr.decode()[-3000:]}")
    return wall, child_cpu() - c0, json.loads(p.stdout)


def query(name, qid):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\x00" + struct.pack(">HH", 1, 1)


def boot(binary, conf, dns_port, name):
    """Seconds from exec to the first DNS answer (checked: NXDOMAIN or 0.0.0.0 for name)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.002)
    t0 = time.monotonic()
    p = subprocess.Popen([binary, "serve", "--config", str(conf)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    qid = 0
    try:
        while time.monotonic() - t0 < 60:
            qid = (qid + 1) & 0xFFFF
            try:
                s.sendto(query(name, qid), ("127.0.0.1", dns_port))
                while True:
                    data = s.recv(4096)
                    if struct.unpack(">H", data[:2])[0] == qid:
                        wall = time.monotonic() - t0
                        rcode = data[3] & 0xF
                        ancount = struct.unpack(">H", data[6:8])[0]
                        # blocked: NXDOMAIN (3) or an answer of the null address
                        if rcode == 3 or (rcode == 0 and ancount and data.endswith(b"\0\0\0\0")):
                            return wall
                        sys.exit(f"{name} answered rcode {rcode}, not blocked")
            except (socket.timeout, ConnectionRefusedError):
                pass
            if p.poll() is not None:
                sys.exit(f"nxdns serve exited {p.returncode}")
        sys.exit("no DNS answer within 60 s")
    finally:
        p.terminate()
        p.wait(timeout=30)
        s.close()


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build/nxdns")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    src_root = SHARED / "data/lists"
    work = Path(tempfile.mkdtemp(prefix="nxdns-bootupdate-"))
    try:
        lists = work / "lists"
        shutil.copytree(src_root, lists)
        files = sorted(p for p in lists.glob("*/*") if p.is_file())
        if not files:
            sys.exit(f"no lists under {src_root} (set NX_SHARED_DIR)")
        # settle the copies' timestamps as a list that was not just written would be
        old = time.time() - 60
        for f in files:
            os.utime(f, (old, old))
        biggest = max(files, key=lambda p: p.stat().st_size)
        size = sum(p.stat().st_size for p in files)
        dns_port = free_port(socket.SOCK_DGRAM)

        def source(p):
            return {"name": re.sub(r"[^a-z0-9-]", "-",
                                   f"{p.parent.name}-{p.stem}".lower())[:60], "path": str(p)}

        conf = work / "nxdns.yaml"
        conf.write_text(json.dumps({
            "listener": {"dns": [f"127.0.0.1:{dns_port}"]},
            "upstream": {"servers": ["127.0.0.1:9"]},
            "admin": {"listen": f"127.0.0.1:{free_port(socket.SOCK_STREAM)}"},
            "filter": {"sources": [source(p) for p in files]},
            "logging": {"query_log": False},
            "state_dir": str(work / "state"),
        }))
        upd = [binary, "update", "--config", str(conf), "--offline", "--json"]
        rows = {k: [] for k in ("update", "noop", "one", "boot", "boot2")}
        entries = None
        for r in range(rounds):
            shutil.rmtree(work / "state", ignore_errors=True)
            w, c, j = timed(upd)
            entries = j["snapshot"]["entries"]
            rows["update"].append((w, c, j["snapshot"]["build_ms"]))
            w, c, j = timed(upd)
            if j["snapshot"]["rebuilt"]:
                sys.exit("the no-change update rebuilt the snapshot")
            rows["noop"].append((w, c, j["snapshot"]["build_ms"]))
            rows["boot"].append((boot(binary, conf, dns_port, "doubleclick.net"), None, None))
            rows["boot2"].append((boot(binary, conf, dns_port, "doubleclick.net"), None, None))
            with open(biggest, "a") as f:
                f.write(f"\nboot-update-{r}.example\n")
            w, c, j = timed(upd)
            changed = [s["name"] for s in j["sources"] if s["changed"]]
            if len(changed) != 1 or not j["snapshot"]["rebuilt"]:
                sys.exit(f"one changed source: {changed} recompiled")
            rows["one"].append((w, c, j["snapshot"]["build_ms"]))
        load = os.getloadavg()
        print(f"{len(files)} lists as path sources, {size / 2**20:.1f} MiB, {entries} entries, "
              f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
              f"at the end; {rounds} rounds\n")
        print("| step | wall (s), each round | median wall (s) | CPU user+sys (s), median | "
              "snapshot build_ms, median |")
        print("|---|---|---:|---:|---:|")
        label = {"update": "`nxdns update` from an empty state dir",
                 "noop": "`nxdns update`, nothing changed",
                 "one": "`nxdns update`, one source changed",
                 "boot": "boot: exec to the first answered query (compiled state)",
                 "boot2": "boot again"}
        med = lambda v: sorted(v)[len(v) // 2]
        for k, v in rows.items():
            walls = [x[0] for x in v]
            cpu = med([x[1] for x in v]) if v[0][1] is not None else None
            bms = med([x[2] for x in v]) if v[0][2] is not None else None
            print(f"| {label[k]} | {' '.join(f'{x:.3f}' for x in walls)} | {med(walls):.3f} | "
                  f"{'' if cpu is None else f'{cpu:.2f}'} | {'' if bms is None else bms} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


main()
