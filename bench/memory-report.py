#!/usr/bin/env python3
"""memory-report.py DIR: the `memory` section of docs/benchmarks.md from what scripts/bench
(bench_memory) left in DIR:
  meta.json          run parameters, readiness, refresh timing, the commands
  phases.tsv         one row per dnsperf phase (phase, qps, sent, completed, lost, avg_ms, rcodes)
  status-boot.txt    "rss hwm anon file threads" (KiB) once serving
  status-steady.txt  the same after the idle period
  metrics-final.txt  /metrics at the end
  sample.json        metrics-sample.py output (gauge peaks during the load and the refresh)
  smaps.json         smaps-breakdown.py --json at the end
  memory-cli.txt     `nxdns memory --admin URL` output (or the error)
  perf-sym.txt, perf-dso.txt   perf report of the blocked phase (optional)
  update.json        `nxdns update --offline --json` (the prebuilt snapshot)
Prints Markdown on stdout.
"""
import json
import os
import re
import sys

D = sys.argv[1]
MiB = 1048576.0
BASE = {"rss": 238, "hwm": 358, "threads": 207, "entries": "2.85M"}
TARGET = {"rss": 48, "hwm": 96, "unexplained": 0.10}


def rd(name, default=""):
    p = os.path.join(D, name)
    return open(p).read() if os.path.exists(p) else default


def status(name):
    v = rd(name).split()
    if len(v) < 5:
        return None
    return dict(zip(("rss", "hwm", "anon", "file", "threads"), (int(x) for x in v[:5])))


def metrics(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)', line)
        if m:
            try:
                out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
            except ValueError:
                pass
    return out


def mib(kib):
    return f"{kib / 1024:.1f}"


def verdict(val, target, unit="MiB"):
    if val <= target:
        return f"met ({target - val:.1f} {unit} to spare)"
    return f"**missed by {val - target:.1f} {unit}**"


meta = json.loads(rd("meta.json", "{}"))
boot, steady = status("status-boot.txt"), status("status-steady.txt")
M = metrics(rd("metrics-final.txt"))
S = json.loads(rd("sample.json", "{}") or "{}")
SM = json.loads(rd("smaps.json", "{}") or "{}")
upd = json.loads(rd("update.json", "{}") or "{}")
workers = int(M.get("nxdns_workers", meta.get("workers", 0)))
owners = sorted(((k.split('"')[1], v) for k, v in M.items()
                 if k.startswith("nxdns_memory_owner_bytes{")), key=lambda kv: -kv[1])
allocs = {k.split('"')[1]: v for k, v in M.items() if k.startswith("nxdns_memory_owner_allocations{")}
ledger = sum(v for _, v in owners)
rss_b = steady["rss"] * 1024 if steady else 0
# The daemon's own definition (GET /api/memory, nxdns memory): RSS minus the heap owners, the
# snapshot's resident pages and code (executable + libraries, from smaps). Older builds without
# nxdns_process_code_bytes fall back to RSS minus the whole ledger.
owner_map = dict(owners)
if "nxdns_process_code_bytes" in M:
    snap_charge = owner_map.get("snapshot_map", 0)
    snap_res = M.get("nxdns_process_snapshot_resident_bytes", snap_charge)
    unexpl = rss_b - (ledger - snap_charge + snap_res + M["nxdns_process_code_bytes"])
else:
    unexpl = rss_b - ledger
share = unexpl / rss_b if rss_b else float("nan")
sg = S.get("gauges", {})
peak_rss_b = max((sg.get("proc_VmRSS", {}).get("max", 0), 0))

print(f"### Memory record: all {meta.get('sources', '?')} lists, load, forced refresh, idle\n")
print(f"Run {meta.get('date', '?')} on {meta.get('cores', '?')} cores ({meta.get('arch', '?')}), "
      f"nxdns `{meta.get('version', '?')}` ({meta.get('bin', '?')}). `make bench-memory` "
      f"(`scripts/bench memory`) does, in order:\n")
print(f"1. `nxdns update --config nxdns.yaml --offline --json`: compiles the {meta.get('sources', '?')} "
      f"list files of ../shared/data/lists (one source per file, format auto) and builds the snapshot "
      f"({int(upd.get('snapshot', {}).get('entries', 0)):,} entries, "
      f"{upd.get('snapshot', {}).get('bytes', 0) / MiB:.1f} MiB) in {meta.get('update_s', '?')} s "
      f"(peak RSS of that process {meta.get('update_maxrss_kib', 0) / 1024:.1f} MiB) — what a previous "
      f"run or `nxdns update` leaves on disk, so boot only maps it;")
print(f"2. `nxdns serve` ({workers} workers, cache.size {meta.get('cache_size')}, "
      f"query_budget.permits {meta.get('permits')}, knotd upstream on loopback); serving "
      f"(a blocked and a forwarded probe answered) {meta.get('ready_ms', '?')} ms after exec;")
print(f"3. dnsperf phases of {meta.get('dur')} s each (table below); during `refresh`, SIGUSR1 "
      f"{meta.get('usr1_after_s')} s into the load forces a refresh of every source (recompile all "
      f"{meta.get('sources')}, rebuild the snapshot, swap); the new snapshot was in place "
      f"{meta.get('refresh_s', '?')} s after the signal ({meta.get('refresh_log', '')});")
print(f"4. idle {meta.get('idle_s')} s, then /proc/PID/status, /metrics, `nxdns memory`, "
      f"/proc/PID/smaps. /metrics was also scraped every {S.get('interval_s', '?')} s throughout "
      f"({S.get('samples', 0)} samples) for the gauge peaks.\n")

print("| phase | load | QPS | completed | lost | avg ms | rcodes |")
print("|---|---|---:|---:|---:|---:|---|")
for line in rd("phases.tsv").splitlines()[1:]:
    f = line.split("\t")
    if len(f) < 8:
        continue
    print(f"| {f[0]} | {f[1]} | {float(f[2]):,.0f} | {int(f[4]):,} | {int(f[5]):,} | {f[6]} | {f[7]} |")
print()
print("QPS here is not a throughput claim (dnsperf shares the 2 cores with the daemon, and the "
      "`blocked` phase runs under `perf record`); see the peers section for that.\n")

print("#### Against the targets (issue 4) and the earlier nxdns\n")
print(f"| figure | nxdns now | earlier nxdns (2.85M entries) | target | verdict |")
print("|---|---:|---:|---|---|")
if steady and boot:
    print(f"| steady VmRSS (after load, refresh, {meta.get('idle_s')} s idle) | {mib(steady['rss'])} MiB "
          f"| {BASE['rss']} MiB | ≤ {TARGET['rss']} MiB | {verdict(steady['rss'] / 1024, TARGET['rss'])} |")
    print(f"| VmHWM (process lifetime: boot, all load phases, the forced refresh) | {mib(steady['hwm'])} MiB "
          f"| {BASE['hwm']} MiB | ≤ {TARGET['hwm']} MiB | {verdict(steady['hwm'] / 1024, TARGET['hwm'])} |")
    print(f"| VmRSS once serving, before load | {mib(boot['rss'])} MiB | | | |")
    print(f"| highest sampled VmRSS during the refresh | {peak_rss_b / MiB:.1f} MiB | | | |")
    print(f"| RssAnon / RssFile (steady) | {mib(steady['anon'])} / {mib(steady['file'])} MiB "
          f"| almost all anonymous | | |")
    qlog = "nxdns_querylog_writer_ok" in M or any(o == "querylog_queue" and v > 0 for o, v in owners)
    exp = workers + (2 if qlog else 1)
    tv = "met" if steady["threads"] == exp else f"**{steady['threads'] - exp:+d}**"
    what = ("workers + main + query-log writer" if qlog else
            "workers + main (the query-log writer, +1, is not running)")
    print(f"| threads | {steady['threads']} | {BASE['threads']} | workers + 2 fixed = {workers + 2} "
          f"({what}: {exp}) | {tv} |")
    sv = "met" if share <= TARGET["unexplained"] else \
        f"**missed by {(share - TARGET['unexplained']) * 100:.0f} points ({(unexpl - TARGET['unexplained'] * rss_b) / MiB:.1f} MiB)**"
    print(f"| unexplained remainder (VmRSS − heap owners − snapshot resident − code) | {unexpl / MiB:.1f} MiB = {share * 100:.0f}% "
          f"| not measurable | ≤ 10% of RSS | {sv} |")
    print(f"| snapshot | {int(M.get('nxdns_filter_snapshot_entries', 0)):,} entries, "
          f"{M.get('nxdns_filter_snapshot_bytes', 0) / MiB:.1f} MiB | {BASE['entries']} entries, 71 MiB | | |")
print()

print("#### The ledger at the end (`nxdns_memory_owner_bytes`), beside /proc\n")
print("| owner | bytes | MiB | allocations |")
print("|---|---:|---:|---:|")
for o, v in owners:
    if v == 0:
        continue
    print(f"| {o} | {int(v):,} | {v / MiB:.2f} | {int(allocs.get(o, 0)):,} |")
zero = [o for o, v in owners if v == 0]
print(f"| **ledger total** | {int(ledger):,} | {ledger / MiB:.2f} | |")
if steady:
    print(f"| VmRSS (/proc) | {steady['rss'] * 1024:,} | {steady['rss'] / 1024:.2f} | |")
    what = ("VmRSS − heap owners − snapshot resident − code" if "nxdns_process_code_bytes" in M
            else "VmRSS − ledger")
    print(f"| unexplained ({what}) | {int(unexpl):,} | {unexpl / MiB:.2f} | |")
print(f"| glibc heap in use / free kept (mallinfo2) | {int(M.get('nxdns_heap_in_use_bytes', 0)):,} / "
      f"{int(M.get('nxdns_heap_free_bytes', 0)):,} | | |")
print()
if zero:
    print(f"Owners at zero: {', '.join(zero)}.\n")

if SM.get("groups"):
    print("Where the resident pages are (/proc/PID/smaps at the end, `bench/smaps-breakdown.py PID`):\n")
    print("| mappings | Rss MiB | Pss MiB | anonymous MiB | in the ledger as |")
    print("|---|---:|---:|---:|---|")
    led = {"snapshot file": "snapshot_map", "heap (brk)": "heap owners (part)",
           "malloc arenas": "heap owners (part)", "other anonymous": "large owners (mmap'd)"}
    for g, s in sorted(SM["groups"].items(), key=lambda kv: -kv[1]["rss"]):
        print(f"| {g} | {s['rss'] / MiB:.2f} | {s['pss'] / MiB:.2f} | {s['anon'] / MiB:.2f} | {led.get(g, '— (not an owner)')} |")
    print(f"| total | {SM['total_rss'] / MiB:.2f} | {SM['total_pss'] / MiB:.2f} | | |")
    print()
    libs = ", ".join(f"{l['name']} {l['rss'] / MiB:.1f}" for l in SM.get("top_libraries", [])[:6])
    print(f"Largest of the {SM.get('libraries')} shared libraries (Rss MiB): {libs}.\n")
    g = SM["groups"]
    code = g.get("shared libraries", {}).get("rss", 0) + g.get("executable", {}).get("rss", 0)
    stacks = g.get("thread stacks", {}).get("rss", 0) + g.get("main stack", {}).get("rss", 0)
    if steady:
        code_counted = "nxdns_process_code_bytes" in M
        if code_counted:
            # unexpl already excludes code (the daemon's definition): what is left is stacks
            # and heap pages resident beyond the owners' bytes.
            rest = unexpl - stacks
            print(f"**Who holds the unexplained {unexpl / MiB:.1f} MiB:** it is what remains after the "
                  f"heap owners, the snapshot's resident pages and code (executable and "
                  f"{SM.get('libraries')} shared libraries, {code / MiB:.1f} MiB resident, "
                  f"{(g.get('shared libraries', {}).get('pss', 0) + g.get('executable', {}).get('pss', 0)) / MiB:.1f} MiB "
                  f"proportional, read from smaps: mapped and partly touched whether or not nxdns uses "
                  f"them). Of it, thread and main stacks are {stacks / MiB:.2f} MiB; the other "
                  f"{rest / MiB:.2f} MiB is heap pages resident beyond the bytes the owners hold "
                  f"(allocator headers, rounding and fragmentation; glibc reports "
                  f"{M.get('nxdns_heap_free_bytes', 0) / MiB:.2f} MiB free-but-retained, most of it no "
                  f"longer resident). None of these is a ledger owner.\n")
        else:
            rest = unexpl - code - stacks
            print(f"**Who holds the unexplained {unexpl / MiB:.1f} MiB:** code pages of the executable and "
                  f"the shared libraries, {code / MiB:.1f} MiB resident; stacks {stacks / MiB:.2f} MiB; "
                  f"the remaining {rest / MiB:.1f} MiB is heap pages resident beyond what the owners "
                  f"account for. Counting code as an owner would leave {(unexpl - code) / MiB:.1f} MiB = "
                  f"{(unexpl - code) / rss_b * 100:.0f}% of RSS unexplained.\n")

print("#### Peaks of every gauge (sampled during load and refresh; `*_peak` from /metrics at the end)\n")
print("| gauge | at the end | highest sampled | lowest sampled |")
print("|---|---:|---:|---:|")
keys = sorted(k for k in sg if not k.startswith("nxdns_filter_source_names"))
for k in keys:
    s = sg[k]
    if s["max"] == s["min"] == 0:
        continue
    end = M.get(k, s["last"])
    fmt = (lambda v: f"{v / MiB:.2f} MiB") if ("bytes" in k or k in ("proc_VmRSS", "proc_VmHWM", "proc_RssAnon", "proc_RssFile")) else (lambda v: f"{v:,.0f}")
    print(f"| `{k}` | {fmt(end)} | {fmt(s['max'])} | {fmt(s['min'])} |")
peaks = sorted(k for k in M if k.split("{")[0].endswith("_peak"))
zeros = [k for k in keys if sg[k]["max"] == sg[k]["min"] == 0]
print()
print("`*_peak` gauges at the end: " + ", ".join(f"`{k}` {M[k]:,.0f}" for k in peaks) + ".")
if zeros:
    print(f" Gauges that stayed 0 throughout: {', '.join('`' + z + '`' for z in zeros)}.")
print()
fails = S.get("failed_scrapes", [])
if fails:
    print(f"The admin endpoint did not answer a /metrics scrape within 1 s {len(fails)} times, between "
          f"t={fails[0][0]:.1f} s and t={fails[-1][0] + fails[-1][1]:.1f} s of the sampling (SIGUSR1 at "
          f"t≈{meta.get('usr1_at_s', '?')} s): the forced refresh compiles and builds on the control loop, which "
          f"also serves /metrics, so gauges are not scraped while it runs (the transient owners of the "
          f"refresh, `filter_build` and the second `snapshot_map`, never show in a scrape); /proc was "
          f"read every 0.1 s throughout.\n")
oam = S.get("owners_at_max_rss", {})
if oam:
    items = sorted(((k.split('"')[1], v) for k, v in oam.items() if k.startswith("nxdns_memory_owner")),
                   key=lambda kv: -kv[1])
    st = oam.get("_status", {})
    print(f"Ledger at the highest sampled VmRSS ({st.get('VmRSS', 0) / MiB:.1f} MiB at t={oam.get('_t', 0):.1f} s; "
          f"RssAnon {st.get('RssAnon', 0) / MiB:.1f}, RssFile {st.get('RssFile', 0) / MiB:.1f} MiB), as of the last "
          f"scrape that answered, {oam.get('_owners_age_s', 0):.1f} s earlier: "
          + ", ".join(f"{o} {v / MiB:.2f} MiB" for o, v in items if v >= 65536) + ".\n")

sym = rd("perf-sym.txt").strip()
dso = rd("perf-dso.txt").strip()
if sym:
    print(f"#### Where a blocked query's CPU goes (`perf record -g -p PID` for {meta.get('perf_s')} s of the `blocked` phase)\n")
    print("Share of samples by object (`perf report --no-children --sort dso`):\n")
    print("```")
    print(dso)
    print("```\n")
    st = rd("perf-stat.csv")
    qq = rd("perf-stat.queries").split()
    cnt = {}
    for line in st.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[0].strip().isdigit():
            cnt[f[2]] = int(f[0])
    if cnt and len(qq) == 2 and float(qq[1]) > float(qq[0]):
        nq = float(qq[1]) - float(qq[0])
        sc, cs = cnt.get("raw_syscalls:sys_enter", 0), cnt.get("context-switches", 0)
        print(f"Over the same {meta.get('perf_s')} s (`perf stat -e raw_syscalls:sys_enter,context-switches -p PID`): "
              f"{nq:,.0f} UDP queries, {sc:,} system calls = **{sc / nq:.2f} per query**, {cs:,} context switches = "
              f"**{cs / nq:.3f} per query** (recvmmsg/sendmmsg batches of up to 32: at this rate each wake-up finds "
              f"about {nq / max(cs, 1):.1f} queries).\n")
    print("Top symbols, self time (`perf report --no-children --sort dso,sym --percent-limit 1.5`):\n")
    print("```")
    print(sym)
    print("```\n")

cli = rd("memory-cli.txt").rstrip()
if str(meta.get("api_memory_http")) == "200" and "unauthorized" not in cli:
    print("`nxdns memory --admin URL` at the end:\n")
    print("```")
    print(cli)
    print("```\n")
else:
    print(f"`GET /api/memory` answered HTTP {meta.get('api_memory_http', '?')} (the admin API now "
          f"requires a login or an API token), so `nxdns memory --admin URL` could not be used; the "
          f"ledger above is `nxdns_memory_owner_bytes` from /metrics, which carries the same owners, "
          f"and the /proc and mallinfo2 figures come from /proc/PID/status and `nxdns_heap_*`.\n")
print("Commands:\n")
print("```")
print(rd("commands.txt").rstrip())
print("```")
