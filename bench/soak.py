#!/usr/bin/python3
"""Load-and-faults soak of one nxdns binary (make bench, section `soak`; not make test).

    bench/soak.py --bin build/nxdns --shared ../shared --out REPORT.md [--minutes 30] [--base 7300]

For MINUTES (default 30) nxdns serves a household's mixed load while everything that goes wrong
in a home network happens around it, and the figures that must stay flat are sampled every
minute:
  load       dnsperf over shared/data/workload/queries-mixed.txt at 40 queries/s (a busy
             household), in one-minute runs, plus a 5 s burst at 1,500 queries/s every 5 minutes
  upstreams  knotd (a wildcard root zone) twice: straight, and behind a relay here that flaps
             (90 s forwarding, 30 s silent); the relay is listed first, so every flap is a
             fail-over
  lists      a list source over HTTP from a server here (a real list from shared/data/lists),
             its refresh forced through the admin API every 4 minutes
  reloads    SIGHUP every 3 minutes
  garbage    20 random datagrams a second to the DNS port, and a TCP connection a second that
             writes random bytes and closes
  rate limit when the binary accepts access.rate_limit (nxdns check-config says so: the key
             exists only once that feature has landed), 127.0.0.2 asks 200 queries/s over a
             20 qps limit while 127.0.0.1 (the measured load) is exempt; its drops are the
             deliberate ones, reported apart. Without the key the row says "not available".
Reported (a markdown table into --out, and the exit status): queries lost by dnsperf outside
the deliberate drops (< 0.1%), RSS per minute (after a 5-minute warm-up, within +-10% of its
mean), the thread count (the same at every sample), and every drop, refusal and rejection
counter of /metrics at the end. Everything runs on 127.0.0.1 and stops by PID.
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

TOKEN = "nxdns_soak-token-0123456789abcdefghijklmnopqrstuvwxyz"
RATE = 40
BURST_RATE, BURST_S, BURST_EVERY = 1500, 5, 300
RELOAD_EVERY, REFRESH_EVERY = 180, 240
FLAP_ON, FLAP_OFF = 90, 30
WARMUP_MIN = 5


def log(msg):
    print(f"soak: {time.strftime('%H:%M:%S')} {msg}", flush=True)


class Flapper:
    """UDP relay 127.0.0.1:port -> the upstream, silent for FLAP_OFF s after each FLAP_ON s."""

    def __init__(self, port, upstream):
        self.up = ("127.0.0.1", upstream)
        self.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.s.bind(("127.0.0.1", port))
        self.s.settimeout(0.2)
        self.stop = threading.Event()
        self.t0 = time.monotonic()
        self.flaps = 0
        self.pending = {}  # (id, upstream socket) -> client addr
        self.u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.u.settimeout(0.2)

    def on(self):
        return (time.monotonic() - self.t0) % (FLAP_ON + FLAP_OFF) < FLAP_ON

    def run(self):
        threading.Thread(target=self._back, daemon=True).start()
        was = True
        while not self.stop.is_set():
            now_on = self.on()
            if was and not now_on:
                self.flaps += 1
            was = now_on
            try:
                data, src = self.s.recvfrom(65535)
            except socket.timeout:
                continue
            if len(data) >= 2 and now_on:
                self.pending[data[:2]] = src
                self.u.sendto(data, self.up)

    def _back(self):
        while not self.stop.is_set():
            try:
                data, _ = self.u.recvfrom(65535)
            except socket.timeout:
                continue
            src = self.pending.pop(data[:2], None)
            if src and self.on():
                self.s.sendto(data, src)


def garbage(port, stop):
    rnd = random.Random(7)
    n = 0
    while not stop.is_set():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _ in range(20):
                s.sendto(rnd.randbytes(rnd.randint(0, 600)), ("127.0.0.1", port))
                n += 1
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                c.sendall(rnd.randbytes(rnd.randint(1, 300)))
        except OSError:
            pass
        stop.wait(1)
    return n


def metrics(admin):
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            try:
                out[k] = float(v)
            except ValueError:
                pass
    return out


def proc_status(pid):
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, threads


def dnsperf(port, qfile, rate, secs, src="127.0.0.1", outstanding=100):
    """(sent, lost) of one dnsperf run. `outstanding` (-q) must exceed rate x the 3 s timeout
    when most queries go unanswered (the over-limit client), or dnsperf, not the rate, caps it."""
    cmd = ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", str(qfile), "-Q", str(rate),
           "-l", str(secs), "-c", "4", "-t", "3", "-q", str(outstanding), "-a", src]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 30)
    sent = re.search(r"Queries sent:\s+(\d+)", r.stdout)
    lost = re.search(r"Queries lost:\s+(\d+)", r.stdout)
    if not sent or not lost:
        raise RuntimeError(f"dnsperf output not understood:\n{r.stdout}\n{r.stderr}")
    return int(sent.group(1)), int(lost.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=int, default=30)
    ap.add_argument("--base", type=int, default=7300)
    # --scale 0.1: every fault interval a tenth as long (a smoke run of the script itself)
    ap.add_argument("--scale", type=float, default=1.0)
    a = ap.parse_args()
    global RELOAD_EVERY, REFRESH_EVERY, BURST_EVERY, FLAP_ON, FLAP_OFF, WARMUP_MIN
    RELOAD_EVERY, REFRESH_EVERY, BURST_EVERY = (max(5, int(x * a.scale)) for x in
                                                (RELOAD_EVERY, REFRESH_EVERY, BURST_EVERY))
    FLAP_ON, FLAP_OFF = max(3, int(FLAP_ON * a.scale)), max(1, int(FLAP_OFF * a.scale))
    WARMUP_MIN = min(WARMUP_MIN, a.minutes // 3)
    shared = Path(a.shared)
    bin_ = Path(a.bin).resolve()
    qfile = shared / "data" / "workload" / "queries-mixed.txt"
    listfile = shared / "data" / "lists" / "domains" / "shadowwhisperer_malware.txt"
    for p in (qfile, listfile):
        if not p.exists():
            sys.exit(f"soak: {p} missing (needs ../shared)")
    for tool in ("dnsperf", "knotd"):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            sys.exit(f"soak: {tool} missing (scripts/bootstrap --bench)")
    knot_port, relay_port, nx_port, admin_port, http_port = (a.base + i for i in range(5))
    work = Path(tempfile.mkdtemp(prefix="nxdns-soak."))
    procs = []
    stop = threading.Event()

    def cleanup():
        stop.set()
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(work, ignore_errors=True)

    try:
        # knotd, a wildcard root zone as the peers' benchmarks use
        (work / "root.zone").write_text(
            "$ORIGIN .\n$TTL 3600\n@ IN SOA ns.upstream.invalid. hostmaster.upstream.invalid. "
            "1 3600 600 86400 3600\n@ IN NS ns.upstream.invalid.\n* IN A 192.0.2.1\n"
            "* IN AAAA 2001:db8::1\n")
        (work / "knot.conf").write_text(
            f'server:\n  rundir: "{work}"\n  listen: 127.0.0.1@{knot_port}\n'
            "  udp-workers: 1\n  tcp-workers: 1\n  background-workers: 1\n"
            "log:\n  - target: stderr\n    any: warning\n"
            f'database:\n  storage: "{work}/db"\n'
            f'template:\n  - id: default\n    storage: "{work}"\n    semantic-checks: off\n'
            "zone:\n  - domain: .\n    file: root.zone\n")
        knotd = shutil.which("knotd") or "/usr/sbin/knotd"
        procs.append(subprocess.Popen([knotd, "-c", str(work / "knot.conf")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        flap = Flapper(relay_port, knot_port)
        threading.Thread(target=flap.run, daemon=True).start()

        # the list server
        (work / "www").mkdir()
        shutil.copy(listfile, work / "www" / "list.txt")
        www = str(work / "www")

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *x, **kw):
                super().__init__(*x, directory=www, **kw)

            def log_message(self, *x):
                pass
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", http_port), Quiet)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()

        token_hash = hashlib.sha256(TOKEN.encode()).hexdigest()
        base_cfg = (
            f'listener:\n  dns: ["127.0.0.1:{nx_port}"]\n'
            f'upstream:\n  servers: ["127.0.0.1:{relay_port}", "127.0.0.1:{knot_port}"]\n'
            f'admin:\n  enabled: true\n  listen: "127.0.0.1:{admin_port}"\n'
            f'  tokens:\n    - {{name: soak, hash: "{token_hash}", created: 1700000000}}\n'
            f'filter:\n  sources:\n    - {{name: soak, url: "http://127.0.0.1:{http_port}/list.txt", '
            f"format: domains}}\n"
            f'state_dir: "{work}/state"\nlog:\n  level: warn\n')
        rl_cfg = ("access:\n  rate_limit: {qps: 20, burst: 40}\n"
                  '  rate_limit_exempt: ["127.0.0.1/32"]\n')
        (work / "probe.yaml").write_text(base_cfg + rl_cfg)
        chk = subprocess.run([str(bin_), "check-config", str(work / "probe.yaml")],
                             capture_output=True, text=True, timeout=30)
        rate_limit = chk.returncode == 0
        log(f"access.rate_limit {'accepted' if rate_limit else 'not accepted'} by check-config"
            + ("" if rate_limit else f": {chk.stderr.strip().splitlines()[-1:]}"))
        cfg = work / "nxdns.yaml"
        cfg.write_text(base_cfg + (rl_cfg if rate_limit else ""))
        nx = subprocess.Popen([str(bin_), "serve", "--config", str(cfg)],
                              stdout=open(work / "nxdns.log", "wb"), stderr=subprocess.STDOUT)
        procs.append(nx)
        for _ in range(300):
            try:
                metrics(f"127.0.0.1:{admin_port}")
                break
            except OSError:
                time.sleep(0.1)
        admin = f"127.0.0.1:{admin_port}"

        gthread = threading.Thread(target=garbage, args=(nx_port, stop), daemon=True)
        gthread.start()
        limited = {"sent": 0, "lost": 0}
        if rate_limit:
            def over_limit():
                while not stop.is_set():
                    s, l_ = dnsperf(nx_port, qfile, 200, 60, src="127.0.0.2",
                                    outstanding=1000)
                    limited["sent"] += s
                    limited["lost"] += l_
            threading.Thread(target=over_limit, daemon=True).start()

        def refresh():
            req = urllib.request.Request(f"http://{admin}/api/filter/sources/refresh",
                                         method="POST", data=b"",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status

        samples, sent, lost = [], 0, 0
        reloads = refreshes = bursts = 0
        t0 = time.monotonic()
        next_reload, next_refresh, next_burst = RELOAD_EVERY, REFRESH_EVERY, BURST_EVERY
        for minute in range(1, a.minutes + 1):
            # one minute of load, the scheduled faults fired from a side thread meanwhile
            def faults():
                nonlocal next_reload, next_refresh, reloads, refreshes
                end = t0 + minute * 60
                while time.monotonic() < end and not stop.is_set():
                    el = time.monotonic() - t0
                    if el >= next_reload:
                        nx.send_signal(signal.SIGHUP)
                        reloads += 1
                        next_reload += RELOAD_EVERY
                    if el >= next_refresh:
                        try:
                            refresh()
                            refreshes += 1
                        except OSError as e:
                            log(f"refresh failed: {e}")
                        next_refresh += REFRESH_EVERY
                    time.sleep(0.5)
            ft = threading.Thread(target=faults, daemon=True)
            ft.start()
            secs = 60
            if time.monotonic() - t0 + 60 >= next_burst:
                s, l_ = dnsperf(nx_port, qfile, BURST_RATE, BURST_S)
                sent, lost, bursts = sent + s, lost + l_, bursts + 1
                next_burst += BURST_EVERY
                secs -= BURST_S
            s, l_ = dnsperf(nx_port, qfile, RATE, secs)
            sent, lost = sent + s, lost + l_
            ft.join(timeout=90)
            rss, threads = proc_status(nx.pid)
            samples.append((minute, rss, threads, sent, lost))
            log(f"minute {minute}: rss {rss} KiB, {threads} threads, sent {sent}, lost {lost}")
            if nx.poll() is not None:
                raise RuntimeError(f"nxdns exited with {nx.returncode}")
        m = metrics(admin)
        stop.set()
        gsent = "20/s + 1 TCP/s"

        after = [r for (mi, r, _, _, _) in samples if mi > WARMUP_MIN] or [samples[-1][1]]
        mean = sum(after) / len(after)
        rss_ok = all(abs(r - mean) <= 0.10 * mean for r in after)
        thr = {t for (_, _, t, _, _) in samples}
        loss = lost / sent if sent else 1.0
        loss_ok = loss < 0.001
        counters = {k: v for k, v in sorted(m.items())
                    if re.search(r"dropped|refused|rejected|rate_limited|evict|failures", k)}
        ok = rss_ok and len(thr) == 1 and loss_ok
        with open(a.out, "w") as f:
            f.write(f"Soak: {a.minutes} min, `{bin_.name}`; load {RATE} q/s of the mixed "
                    f"workload with a {BURST_S} s burst at {BURST_RATE} q/s every "
                    f"{BURST_EVERY} s; {reloads} SIGHUP reloads, {refreshes} forced "
                    f"list refreshes, {flap.flaps} upstream flaps ({FLAP_ON} s up, {FLAP_OFF} s "
                    f"silent, the flapping relay listed first), garbage {gsent}; rate-limited "
                    f"client: " + (f"127.0.0.2 at 200 q/s over qps 20, {limited['sent']} sent, "
                                   f"{limited['lost']} unanswered (deliberate)"
                                   if rate_limit else "not available (access.rate_limit not "
                                   "accepted by this binary)") + ".\n\n")
            f.write("| check | figure | bound | result |\n|---|---|---|---|\n")
            f.write(f"| lost queries (dnsperf, measured load) | {lost} of {sent} "
                    f"({100 * loss:.3f}%) | < 0.1% | {'pass' if loss_ok else 'FAIL'} |\n")
            f.write(f"| RSS after {WARMUP_MIN} min warm-up | {min(after)}-{max(after)} KiB, mean "
                    f"{mean:.0f} | +-10% of the mean | {'pass' if rss_ok else 'FAIL'} |\n")
            f.write(f"| threads | {sorted(thr)} | one value | "
                    f"{'pass' if len(thr) == 1 else 'FAIL'} |\n\n")
            f.write("| minute | RSS KiB | threads | sent | lost |\n|---:|---:|---:|---:|---:|\n")
            for mi, r, t, s, l_ in samples:
                f.write(f"| {mi} | {r} | {t} | {s} | {l_} |\n")
            f.write("\nDrop, refusal and rejection counters at the end (every series of /metrics "
                    "whose name says dropped, refused, rejected, rate_limited, evict or "
                    "failures):\n\n| series | value |\n|---|---:|\n")
            for k, v in counters.items():
                if v:
                    f.write(f"| `{k}` | {v:.0f} |\n")
            zero = [k for k, v in counters.items() if not v]
            f.write(f"\nThe other {len(zero)} such series are 0: "
                    + ", ".join(f"`{k}`" for k in zero) + ".\n")
        log(f"{'pass' if ok else 'FAIL'}: report in {a.out}")
        return 0 if ok else 1
    finally:
        cleanup()


if __name__ == "__main__":
    sys.exit(main())
