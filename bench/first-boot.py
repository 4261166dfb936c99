#!/usr/bin/python3
"""First boot with every shared list (issue 15): how long `nxdns serve` takes from exec to
answering DNS with an empty state directory (every source compiled, the snapshot built), and
the second start with the state kept (the snapshot only mapped). Each run: a fresh config on
loopback ports with all of $NX_SHARED_DIR/data/lists/*/* as path sources, no upstream needed
(DNS readiness is read from the log and /healthz). Prints a Markdown table.

With --url the same files are `url` sources served by a local HTTP server on 127.0.0.1 (a
packaged first boot: nothing on disk, every list downloaded before DNS answers); the table
then also has the downloads' time from the log ("first boot: N of N downloads done in MS").

usage: bench/first-boot.py [BINARY] [ROUNDS] [--url]      (default build/nxdns, 3)
"""
import functools
import http.server
import threading
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NX_SHARED_DIR", ROOT.parent / "shared"))


def free_port(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def healthz(admin):
    try:
        with urllib.request.urlopen(f"http://{admin}/healthz", timeout=1) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def start(binary, conf, log):
    """Seconds to the first /healthz answer (admin up) and to 200 (DNS serving); VmHWM."""
    admin = json.loads(conf.read_text())["admin"]["listen"]
    t0 = time.monotonic()
    with open(log, "wb") as lf:
        p = subprocess.Popen([binary, "serve", "--config", str(conf)], stdout=lf, stderr=lf,
                             stdin=subprocess.DEVNULL)
    admin_up = None
    hwm = 0
    try:
        while time.monotonic() - t0 < 1200:
            if p.poll() is not None:
                sys.exit(f"nxdns exited {p.returncode}:\n{log.read_text()[-3000:]}")
            code = healthz(admin)
            if code is not None and admin_up is None:
                admin_up = time.monotonic() - t0
            try:
                st = Path(f"/proc/{p.pid}/status").read_text()
                hwm = int(re.search(r"VmHWM:\s+(\d+)", st).group(1))
            except (OSError, AttributeError):
                pass
            if code == 200:
                return admin_up, time.monotonic() - t0, hwm
            time.sleep(0.02)
        sys.exit("no 200 from /healthz within 20 minutes")
    finally:
        p.terminate()
        p.wait(timeout=60)


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass


def list_server(root: Path):
    """An HTTP server on 127.0.0.1 serving root's files (a thread; stopped with the process)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                            functools.partial(Quiet, directory=str(root)))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}"


def main():
    args = [a for a in sys.argv[1:] if a != "--url"]
    url_mode = "--url" in sys.argv[1:]
    binary = args[0] if args else str(ROOT / "build/nxdns")
    rounds = int(args[1]) if len(args) > 1 else 3
    root = SHARED / "data/lists"
    lists = sorted(p for p in root.glob("*/*") if p.is_file())
    if not lists:
        sys.exit(f"no lists under {SHARED}/data/lists (set NX_SHARED_DIR)")
    size = sum(p.stat().st_size for p in lists)
    base = list_server(root) if url_mode else None

    def source(p):
        s = {"name": re.sub(r"[^a-z0-9-]", "-", f"{p.parent.name}-{p.stem}".lower())[:60]}
        if url_mode:
            s["url"] = f"{base}/{p.relative_to(root).as_posix()}"
        else:
            s["path"] = str(p)
        return s

    rows = []
    for r in range(rounds):
        work = Path(tempfile.mkdtemp(prefix="nxdns-firstboot-"))
        try:
            conf = work / "nxdns.json.yaml"
            conf.write_text(json.dumps({
                "listener": {"dns": [f"127.0.0.1:{free_port(socket.SOCK_DGRAM)}"]},
                "upstream": {"servers": ["127.0.0.1:9"]},
                "admin": {"listen": f"127.0.0.1:{free_port()}"},
                "filter": {"sources": [source(p) for p in lists]},
                "logging": {"query_log": False},
                "state_dir": str(work / "state"),
            }))
            cold = start(binary, conf, work / "cold.log")
            cold_log = (work / "cold.log").read_text()
            loaded = re.search(r"lists loaded in (\d+) ms: (\d+) entries", cold_log)
            fetched = re.search(r"first boot: (\d+) of (\d+) downloads done in (\d+) ms",
                                cold_log)
            if url_mode and not fetched:
                sys.exit("the first boot did not download every list:\n" + cold_log[-3000:])
            warm = start(binary, conf, work / "warm.log")
            if "first boot" in (work / "warm.log").read_text():
                sys.exit("the second start waited on the network")
            rows.append((r + 1, cold, warm, loaded, fetched))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()
    print(f"{len(lists)} lists{' as url sources' if url_mode else ''}, {size / 2**20:.1f} MiB, "
          f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"at the end\n")
    dl = " downloads in the log (ms) |" if url_mode else ""
    print(f"| round | admin up (s) |{dl} first boot: DNS serving (s) | list load in the log "
          "(ms) | entries | VmHWM (MiB) | second start: DNS serving (s) | VmHWM (MiB) |")
    print("|---:|---:|" + ("---:|" if url_mode else "") + "---:|---:|---:|---:|---:|---:|")
    for r, cold, warm, loaded, fetched in rows:
        d = f" {fetched.group(3)} |" if url_mode else ""
        print(f"| {r} | {cold[0]:.2f} |{d} {cold[1]:.2f} | "
              f"{loaded.group(1) if loaded else '?'} | {loaded.group(2) if loaded else '?'} | "
              f"{cold[2] / 1024:.0f} | {warm[1]:.2f} | {warm[2] / 1024:.0f} |")


main()
