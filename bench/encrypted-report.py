#!/usr/bin/env python3
"""Render bench/encrypted.sh's OUTDIR as the `encrypted` section of docs/benchmarks.md.

    bench/encrypted-report.py OUTDIR

Medians over rounds per (transport, workload, server): QPS, queries per server CPU-second
(completed / (utime+stime)), lost; ratios nxdns / best peer in the same run. A run that lost
more than 1% of what it sent is not a throughput figure: it is shown, flagged, and left out
of "best peer".
"""
import csv
import json
import os
import statistics
import sys

d = sys.argv[1]
meta = json.load(open(os.path.join(d, "meta.json")))
rows = list(csv.DictReader(open(os.path.join(d, "runs.tsv")), delimiter="\t"))
GOAL = 1.3
T_NAME = {"dot": "DoT (dnsperf -m dot)", "doh-get": "DoH GET (h2load)", "doh-post": "DoH POST (h2load)",
          "dnsperf-doh": "DoH GET (dnsperf -m doh)"}


def fmt(x, nd=0):
    if x is None:
        return "—"
    return f"{x:,.{nd}f}"


def agg(t, w, s):
    rs = [r for r in rows if r["transport"] == t and r["workload"] == w and r["server"] == s]
    if not rs:
        return None
    qps = [float(r["qps"]) for r in rs]
    cpq = [int(r["completed"]) / float(r["cpu_s"]) if float(r["cpu_s"]) > 0 else 0 for r in rs]
    lost = [int(r["lost"]) / max(1, int(r["sent"])) for r in rs]
    return {"qps": statistics.median(qps), "cpq": statistics.median(cpq), "lost": max(lost),
            "n": len(rs), "rc": rs[0]["rcodes"], "lat": statistics.median(float(r["avg_ms"]) for r in rs)}


out = []
p = out.append
servers = meta["servers"]
peers = [s for s in servers if s != "nxdns"]
pv = meta["peer_versions"]
p("### Encrypted transports: DoT and DoH beside Unbound, Knot Resolver and dnsdist")
p("")
p(f"Run {meta['date']} on a shared {meta['cores']}-core box ({meta['arch']}; other engineers' builds and tests ran "
  f"at the same time, so compare the ratios within this run). nxdns `{meta['version']}`; Unbound {pv['unbound']}, "
  f"Knot Resolver {pv['kresd']}, dnsdist {pv['dnsdist']} (Debian 12), dnsperf {pv['dnsperf']}, h2load (nghttp2). "
  f"`scripts/bench encrypted` (bench/encrypted.sh, bench/encrypted-report.py); medians of {meta['rounds']} "
  f"interleaved rounds of {meta['dur']} s, the server order rotated each round.")
p("")
p(f"Set-up: every server on CPU {meta['srv_cpu']} (`taskset`, all its threads) with one worker — nxdns "
  "`listener.workers: 1`, Unbound `num-threads: 1`, one kresd process, dnsdist `setMaxTCPClientThreads(1)` "
  "(its DoH front end is one more h2o thread, on the same CPU) — and the load generator (dnsperf `-T 1` or "
  f"h2load `-t 1`) and the knotd upstream on CPU {meta['cli_cpu']}. So a QPS figure is one server core "
  "against one client core, and where the client saturates first the servers' QPS converge and the "
  "discriminating figure is **queries per server CPU-second** (completed queries / utime+stime of the "
  "server process from /proc/PID/stat over the run). All share one ECDSA P-256 certificate "
  f"(`nxdns cert --self-signed`). Lists: the same {meta['names']:,} names (prep-lists.sh's {meta['size']} "
  "subset of all the shared lists) in each server the way its users load them — nxdns `||name^`, Unbound "
  "`local-zone: always_nxdomain`, kresd RPZ (name + `*.name`), dnsdist a `SuffixMatchNode` answering "
  "NXDOMAIN — so `blocked` (prep-lists' blocked.q: listed names and names under them) is filtered by all "
  "four; `hits` (1000 popular names not listed) is answered from each server's cache (dnsdist: its packet "
  "cache) after a warm-up pass. nxdns answers blocked names with 0.0.0.0 (the default `filter.block_mode`), "
  "the peers with NXDOMAIN. dnsdist's DoH is built in (`dnsdist --version`: "
  "`dns-over-tls(openssl) dns-over-https(DOH)`); Unbound's https-port works (`unbound -V`: "
  "`--with-libnghttp2`).")
p("")
p("Load: DoT `dnsperf -m dot -c 8 -q 200 -T 1` (8 connections, 200 queries outstanding). DoH with "
  "`h2load -c 8 -m 25 -t 1` (8 connections × 25 streams = 200 outstanding): GET with one URI per "
  "workload name (the first 50,000, `?dns=` base64url, id 0), POST with the workload's first name as "
  "the body of every request (h2load sends one body). Not `dnsperf -m doh`: dnsperf 2.10's DoH client "
  "(src/net_doh.c) keeps one DNS message buffer per connection and hands back at most one answer per "
  "TLS read, so a server that packs several HTTP/2 answers into one write — nxdns (its corked TLS "
  "records) and dnsdist (h2o) — has nearly all its answers counted lost; Unbound and kresd write one "
  "answer per record and are unaffected. The table at the end shows it.")
p("")

verdicts = []
for t in [x for x in meta["transports"] if x != "dnsperf-doh"]:
    p(f"#### {T_NAME.get(t, t)}")
    p("")
    p("| workload | server | QPS | queries / server CPU-s | lost | avg latency ms | answers |")
    p("|---|---|---:|---:|---:|---:|---|")
    for w in meta["workloads"]:
        for s in servers:
            a = agg(t, w, s)
            if not a:
                continue
            flag = " ⚠" if a["lost"] > 0.01 else ""
            p(f"| {w} | {s} | {fmt(a['qps'])}{flag} | {fmt(a['cpq'])} | {a['lost'] * 100:.1f}% | {a['lat']:.2f} | {a['rc']} |")
    p("")
    for w in meta["workloads"]:
        nx = agg(t, w, "nxdns")
        cands = [(s, agg(t, w, s)) for s in peers]
        cands = [(s, a) for s, a in cands if a and a["lost"] <= 0.01]
        if not nx or not cands:
            continue
        bq = max(cands, key=lambda x: x[1]["qps"])
        bc = max(cands, key=lambda x: x[1]["cpq"])
        rq, rc = nx["qps"] / bq[1]["qps"], nx["cpq"] / bc[1]["cpq"]
        excl = [s for s in peers if agg(t, w, s) and agg(t, w, s)["lost"] > 0.01]
        verdicts.append((t, w, rq, bq[0], rc, bc[0], excl))
    p("")

p("#### nxdns / best peer, per transport (the goal: ≥ 1.3× the best peer's QPS)")
p("")
p("| transport | workload | QPS ratio (best peer) | CPU-second ratio (best peer) | goal |")
p("|---|---|---:|---:|---|")
for t, w, rq, bq, rc, bc, excl in verdicts:
    note = f" ({', '.join(excl)} left out: lost > 1%)" if excl else ""
    p(f"| {T_NAME.get(t, t)} | {w} | **{rq:.2f}×** ({bq}) | {rc:.2f}× ({bc}) | {'met' if rq >= GOAL else 'not met'}{note} |")
p("")

# perf
pt = [t for t in meta["transports"] if os.path.exists(os.path.join(d, f"perf-{t}-sym.txt"))]
if pt:
    p("Where nxdns's CPU goes (`perf record -F 999 -g -p PID` during one extra `hits` run per transport, "
      "`perf report --no-children --sort dso` and `--sort dso,sym`, self time):")
    p("")
    for t in pt:
        st = open(os.path.join(d, f"perf-{t}.stats")).read().split("\t")
        p(f"{T_NAME.get(t, t)}, {int(st[0]):,} QPS during the recording:")
        p("")
        p("```")
        for f in (f"perf-{t}-dso.txt", f"perf-{t}-sym.txt"):
            p(open(os.path.join(d, f)).read().rstrip())
            p("")
        out[-1] = "```"
        p("")

# dnsperf doh evidence
ev = [(s, agg("dnsperf-doh", "hits", s)) for s in servers]
ev = [(s, a) for s, a in ev if a]
if ev:
    p("`dnsperf -m doh` (GET, `-c 8 -q 200 -T 1`, hits, round 1) against the same servers — the client "
      "limitation above, not a server figure:")
    p("")
    p("| server | QPS | lost | answers |")
    p("|---|---:|---:|---|")
    for s, a in ev:
        p(f"| {s} | {fmt(a['qps'])} | {a['lost'] * 100:.1f}% | {a['rc']} |")
    p("")

# idle
idle = []
if os.path.exists(os.path.join(d, "idle.jsonl")):
    idle = [json.loads(x) for x in open(os.path.join(d, "idle.jsonl")) if x.strip()]
floor = {}
if os.path.exists(os.path.join(d, "floor.txt")):
    for line in open(os.path.join(d, "floor.txt")):
        k, _, v = line.strip().partition(" ")
        floor[k] = v
if idle:
    n = meta["idle_n"]
    p(f"#### {n:,} idle DoT and {n:,} idle DoH connections")
    p("")
    p(f"`bench/idle-conns.py` against each freshly started server (before the load above): {n:,} DoT "
      "connections opened one after the other (TCP + TLS 1.3 handshake, then nothing), held, then "
      f"{n:,} DoH connections (TLS with ALPN h2, client preface + empty SETTINGS, the server's SETTINGS "
      "acknowledged, then nothing), held beside them; VmRSS from /proc/PID/status 3 s after each set, "
      "nxdns's ledger from /metrics (`nxdns_memory_owner_bytes`). Per connection = the growth over the "
      "set / the connections the server still held open (a check at the end of each set). nxdns: "
      "`listener.dns_max_connections: 4096` (the idle timeout stays whole below half the cap) and "
      "`tcp_idle_timeout_ms: 600000`; Unbound `incoming-num-tcp: 4096`, `tcp-idle-timeout: 600000`; "
      "dnsdist `setTCPRecvTimeout(600)`, DoH `idleTimeout = 600`; kresd defaults.")
    p("")
    p("| server | DoT held | RSS / DoT conn | DoH held | RSS / DoH conn | ledger / DoT conn | ledger / DoH conn | s to open DoT / DoH |")
    p("|---|---:|---:|---:|---:|---|---|---:|")
    for r in idle:
        if "error" in r:
            p(f"| {r['name']} | {r['error']} | | | | | | |")
            continue
        dc, hc = r.get("dot_per_conn", {}), r.get("doh_per_conn", {})
        def led(x):
            if "ledger_tls" not in x:
                return "—"
            parts = [f"{k[7:]} {x[k]:,.0f}" for k in ("ledger_tls", "ledger_doh_sessions", "ledger_tcp_conns") if x.get(k)]
            return ", ".join(parts) + f" = {sum(x.get(k, 0) for k in ('ledger_tls', 'ledger_doh_sessions', 'ledger_tcp_conns')):,.0f} B"
        dh, hh, de = r.get("dot_held", 0), r.get("doh_held", 0), r.get("dot_held_at_end", r.get("dot_held", 0))
        # a set the server closed while it was measured is no per-connection figure
        dot_rss = f"{dc.get('VmRSS', 0) / 1024:.1f} KiB" if dh >= 0.9 * n else "—"
        doh_ok = hh >= 0.9 * n and de >= 0.9 * dh
        doh_rss = f"{hc.get('VmRSS', 0) / 1024:.1f} KiB" if doh_ok else "— (connections closed during the set)"
        held_note = "" if de == dh else f" ({de:,} still open after the DoH set)"
        p(f"| {r['name']} | {dh:,}{held_note} | {dot_rss} | {hh:,} | {doh_rss} | {led(dc)} | {led(hc) if doh_ok else '—'} | "
          f"{r.get('dot_open_s', 0):.1f} / {r.get('doh_open_s', 0):.1f} |")
    p("")
    nxr = next((r for r in idle if r["name"] == "nxdns" and "error" not in r), None)
    if nxr and floor:
        tf = int(floor.get("tls_server_session_idle_bytes", 0))
        hf = int(floor.get("h2_server_session_idle_bytes", 0))
        dot_rss = nxr["dot_per_conn"]["VmRSS"]
        doh_rss = nxr["doh_per_conn"]["VmRSS"]
        p(f"Library floor, measured outside nxdns (`bench/enc-floor.c`, GnuTLS {floor.get('gnutls', '?').replace(' nghttp2 ', ', nghttp2 ')}: "
          "glibc heap released by freeing the object, median of 16): an idle GnuTLS server session after a "
          f"TLS 1.3 handshake and one record each way, priority cache shared: **{tf:,} B**; "
          f"`nghttp2_session_server_new` after the preface exchange: **{hf:,} B**. Socket buffers are the "
          "kernel's and not in RSS. nxdns's own state per connection: `tcp_conns` "
          f"{nxr['dot_per_conn'].get('ledger_tcp_conns', 0):,.0f} B (struct nx_stream_conn with its "
          "uv_tcp_t and uv_timer_t); the ledger's `tls` figure is the charged estimate "
          "NX_TLS_SERVER_SESSION_BYTES (14 KiB), not a measurement, and `doh_sessions` is nghttp2's "
          "measured bytes plus nxdns's stream slots (`nx_h2_idle_bytes()`).")
        p("")
        p("| per idle connection | DoT | DoH |")
        p("|---|---:|---:|")
        p(f"| library floor (GnuTLS session; + nghttp2 session for DoH) | {tf / 1024:.1f} KiB | {(tf + hf) / 1024:.1f} KiB |")
        p(f"| goal: floor + 4 KiB of nxdns state | {tf / 1024 + 4:.1f} KiB | {(tf + hf) / 1024 + 4:.1f} KiB |")
        p(f"| nxdns, measured RSS growth | **{dot_rss / 1024:.1f} KiB** | **{doh_rss / 1024:.1f} KiB** |")
        p(f"| verdict | {'met' if dot_rss <= tf + 4096 else 'not met'} ({(dot_rss - tf) / 1024:+.1f} KiB over the floor) | "
          f"{'met' if doh_rss <= tf + hf + 4096 else 'not met'} ({(doh_rss - tf - hf) / 1024:+.1f} KiB over the floor) |")
        p("| dnsdist's published figures (GnuTLS DoT; DoH, and with buffers released) | 16 kB | 48 kB (15 kB) |")
        p("")

p("Commands (`scripts/bench encrypted`; bench/encrypted.sh starts every server and stops each by its PID):")
p("")
p("```")
p(open(os.path.join(d, "commands.txt")).read().rstrip())
p("```")
print("\n".join(out))
