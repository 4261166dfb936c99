#!/usr/bin/env python3
"""memory-floor-report.py DIR: the `memory-floor` section of docs/benchmarks.md from what
scripts/bench (bench_memory_floor) left in DIR:
  meta.json                      run facts (before label, idle seconds, workers, subsets, synth)
  none-before.json, none.json    smaps-files.py of the before binary and this one, no lists
  url-loaded.json, url.json      this one with one URL source: just after its download (libcurl
                                 loaded), and after the fetcher's linger (unloaded)
  all.json, sub-N.json, synth.json   this one with all 37 lists, N names of them, synthetic names
  NAME/update.json               `nxdns update --offline --json` of each (snapshot entries, bytes)
  commands.txt                   the commands
Prints Markdown on stdout.
"""
import json
import os
import sys

D = sys.argv[1]
MiB = 1048576.0
KiB = 1024.0
GOAL_FIXED = 10 * MiB
GOAL_SLOPE = 5.5
GOAL_10M = 70 * MiB

# who in nxdns calls each library (the fixed cost's owners)
WHO = {
    "nxdns": "the executable",
    "libc.so.6": "everything", "ld-linux-x86-64.so.2": "the dynamic loader",
    "libm.so.6": "libc's math (via libarchive/ICU, GnuTLS)", "libpthread.so.0": "libc (stub)",
    "libsqlite3.so.0.8.6": "query log (src/querylog), import of gravity.db",
    "libgnutls.so.30.34.3": "TLS: DoT, DoH, admin HTTPS, DoT/DoH upstreams, certificates",
    "libp11-kit.so.0.3.0": "GnuTLS (PKCS#11 trust modules, initialised at load)",
    "libnettle.so.8.6": "GnuTLS", "libhogweed.so.6.6": "GnuTLS", "libgmp.so.10.4.1": "GnuTLS",
    "libtasn1.so.6.6.3": "GnuTLS", "libunistring.so.2.2.0": "libidn2", "libffi.so.8.1.2": "p11-kit",
    "libidn2.so.0.3.8": "list names to punycode (src/filter)",
    "libfyaml.so.0.0.0": "config loader (src/conf), AdGuard Home import",
    "libsodium.so.23.3.0": "argon2id admin passwords, randomness",
    "libuv.so.1.0.0": "every event loop",
    "libmicrohttpd.so.12.60.0": "admin HTTP API (src/admin)",
    "libnghttp2.so.14.24.1": "DoH listener and upstreams",
    "libpcre2-8.so.0.11.2": "AdGuard /regex/ rules (src/filter/side.c)",
    "libxxhash.so.0.8.1": "snapshot fingerprints", "libjansson.so.4.14.0": "JSON (API, meta files)",
    "libfstrm.so.0.1.0": "dnstap export (only when configured)",
    "libprotobuf-c.so.1.0.0": "dnstap export (only when configured)",
    "libarchive.so.13.6.2": "import (Pi-hole zip), backup/restore (CLI and /api/backup)",
    "libxml2.so.2.9.14": "libarchive (xar format)", "libicuuc.so.72.1": "libxml2",
    "libicudata.so.72.1": "libxml2 (ICU data)", "libstdc++.so.6.0.30": "ICU",
    "libgcc_s.so.1": "libstdc++, thread cancellation", "liblzma.so.5.4.1": "libarchive, libxml2",
    "liblz4.so.1.9.4": "libarchive", "libbz2.so.1.0.4": "libarchive", "libacl.so.1.1.2301": "libarchive",
    "libzstd.so.1.5.4": "libarchive (was also libcurl)", "libz.so.1.2.13": "libarchive, GnuTLS, libxml2",
    "libnss_systemd.so.2": "glibc NSS (user/group lookups: the service user)",
    "libcap.so.2.66": "libnss_systemd",
    "[anon]": "heap, stacks, anonymous mappings (ledger owners)",
}
CURL_ONLY = ("libcurl", "libssh2", "libcrypto", "libldap", "liblber", "librtmp", "libgssapi",
             "libkrb5", "libk5crypto", "libcom_err", "libkeyutils", "libsasl2", "libpsl",
             "libbrotli", "libresolv")


def load(name):
    p = os.path.join(D, name)
    return json.load(open(p)) if os.path.exists(p) else None


def entries(name):
    p = os.path.join(D, name, "update.json")
    if not os.path.exists(p):
        return None, None
    j = json.load(open(p))
    s = j.get("snapshot", {})
    return s.get("entries"), s.get("bytes")


def rss(doc, f):
    return doc["files"].get(f, {}).get("Rss", 0) if doc else 0


def mib(b):
    return f"{b / MiB:.2f}"


def kib(b):
    return f"{b / KiB:,.0f}" if b else "—"


meta = json.load(open(os.path.join(D, "meta.json")))
before, now = load("none-before.json"), load("none.json")
url_loaded, url = load("url-loaded.json"), load("url.json")

print("### Memory floor: RssFile by library, and steady VmRSS against entries (issue 16)")
print()
print(f"Run {meta.get('date')} on {meta.get('cores')} cores ({meta.get('arch')}), "
      f"{meta.get('workers')} workers, admin on, query log on, knotd upstream on loopback. "
      f"Each figure: `nxdns serve`, 3 s of the mixed workload (dnsperf), {meta.get('idle_s')} s "
      f"idle, then `/proc/PID/smaps` summed per mapped file (`bench/smaps-files.py`). "
      f"Before = {meta.get('before')} (libcurl linked), built the same way.")
print()
print("#### RssFile by library (no lists)")
print()
print("| mapped file | before KiB | now KiB | now, one URL source: just downloaded | now, after the download (linger over) | who calls it |")
print("|---|---:|---:|---:|---:|---|")
docs = [before, now, url_loaded, url]
keys = set()
for doc in docs:
    if doc:
        keys |= set(doc["files"])
keys = sorted(keys, key=lambda k: (-max(rss(d, k) for d in docs), k))
small = [0, 0, 0, 0]
for k in keys:
    vals = [rss(d, k) for d in docs]
    if k.startswith("[v") or k.endswith(".db-shm") or k.endswith(".nxs"):
        continue
    if max(vals) < 48 * 1024:
        small = [a + b for a, b in zip(small, vals)]
        continue
    who = WHO.get(k, "libcurl only" if k.startswith(CURL_ONLY) else "")
    if k.startswith(CURL_ONLY):
        who = "libcurl-gnutls only (URL downloads)" if not k.startswith("libcurl") else "URL downloads (src/filter/fetch.c)"
    print(f"| {k} | {kib(vals[0])} | {kib(vals[1])} | {kib(vals[2])} | {kib(vals[3])} | {who} |")
print(f"| (every other file, < 48 KiB each) | {kib(small[0])} | {kib(small[1])} | {kib(small[2])} | {kib(small[3])} | |")
for key, label in (("VmRSS", "**VmRSS**"), ("RssFile", "RssFile"), ("RssAnon", "RssAnon")):
    vals = [d["status"].get(key, 0) if d else 0 for d in docs]
    print(f"| {label} | {kib(vals[0])} | {kib(vals[1])} | {kib(vals[2])} | {kib(vals[3])} | |")
print()
if before and now:
    cb = sum(v["Rss"] for k, v in before["files"].items() if k.startswith(CURL_ONLY))
    cn = sum(v["Rss"] for k, v in now["files"].items() if k.startswith(CURL_ONLY))
    print(f"libcurl-gnutls and the libraries only it brings: {mib(cb)} MiB resident before, "
          f"{mib(cn)} MiB now; VmRSS {mib(before['status']['VmRSS'])} → "
          f"{mib(now['status']['VmRSS'])} MiB.", end=" ")
    if url:
        cu = sum(v["Rss"] for k, v in url["files"].items() if k.startswith(CURL_ONLY))
        left = sorted(k for k in url["files"] if k.startswith(CURL_ONLY))
        print(f"After a URL download and the fetcher's 2 s linger: {mib(cu)} MiB "
              f"({', '.join(left) or 'nothing'} still mapped).", end="")
    print()
    print()

# ---- entries
pts = []
rows = [("none", 0)]
for n in str(meta.get("subsets", "")).split():
    rows.append((f"sub-{n}", None))
rows += [("all", None), ("synth", None)]
print("#### Steady VmRSS against entries")
print()
print("| lists | snapshot entries | snapshot MiB | VmRSS MiB | RssAnon MiB | RssFile MiB | snapshot resident MiB |")
print("|---|---:|---:|---:|---:|---:|---:|")
label = {"none": "none", "all": "all 37 shared lists", "synth": "synthetic names, one source"}
for name, e0 in rows:
    doc = load(name + ".json")
    if not doc:
        continue
    e, b = entries(name)
    if name == "none":
        e, b = 0, 0
    snap_rss = sum(v["Rss"] for k, v in doc["files"].items() if k.endswith(".nxs"))
    st = doc["status"]
    lab = label.get(name, f"{name[4:]} random names of them, one source")
    print(f"| {lab} | {e:,} | {mib(b or 0)} | {mib(st['VmRSS'])} | {mib(st['RssAnon'])} | "
          f"{mib(st['RssFile'])} | {mib(snap_rss)} |")
    pts.append((name, e, st["VmRSS"]))
print()


def ledger(name):
    """nxdns_memory_owner_bytes by owner from NAME.metrics (scraped just before the smaps)."""
    p = os.path.join(D, name + ".metrics")
    if not os.path.exists(p):
        return None
    out = {}
    for line in open(p):
        if line.startswith("nxdns_memory_owner_bytes{owner=\""):
            owner = line.split('"')[1]
            out[owner] = float(line.rsplit(None, 1)[-1])
    return out


brk = []
for name, _ in rows:
    doc, led = load(name + ".json"), ledger(name)
    if doc and led is not None:
        brk.append((name, doc, led))
if brk:
    print("Where the steady VmRSS goes (the ledger scraped from /metrics just before the smaps; "
          "heap owners are every owner but the mapped snapshot (`snapshot_map`, counted in "
          "RssFile), charged bytes whether touched or not; anonymous memory not in the ledger is "
          "RssAnon − heap owners):")
    print()
    print("| lists | VmRSS MiB | snapshot resident | code and other files (RssFile − snapshot) | "
          "heap owners | anonymous not in the ledger | largest heap owners (MiB) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, doc, led in brk:
        st = doc["status"]
        snap = sum(v["Rss"] for k, v in doc["files"].items() if k.endswith(".nxs"))
        heap = {k: v for k, v in led.items() if k != "snapshot_map"}
        tot = sum(heap.values())
        top = ", ".join(f"{k} {v / MiB:.2f}" for k, v in
                        sorted(heap.items(), key=lambda kv: -kv[1])[:5] if v > 0)
        print(f"| {label.get(name, name)} | {mib(st['VmRSS'])} | {mib(snap)} | "
              f"{mib(st['RssFile'] - snap)} | {mib(tot)} | {mib(st['RssAnon'] - tot)} | {top} |")
    print()


def fit(points):
    n = len(points)
    sx = sum(p[1] for p in points)
    sy = sum(p[2] for p in points)
    sxx = sum(p[1] * p[1] for p in points)
    sxy = sum(p[1] * p[2] for p in points)
    den = n * sxx - sx * sx
    if n < 2 or den == 0:
        return None, None
    b = (n * sxy - sx * sy) / den
    a = (sy - b * sx) / n
    return a, b


a, b = fit(pts)
ar, br = fit([p for p in pts if p[0] != "synth"])
if a is not None:
    syn = next((p for p in pts if p[0] == "synth"), None)
    print("| figure | measured | goal | verdict |")
    print("|---|---:|---:|---|")
    print(f"| fixed cost (least-squares intercept, all {len(pts)} points) | {mib(a)} MiB | ≤ 10 MiB | "
          f"{'met' if a <= GOAL_FIXED else 'not met'} |")
    print(f"| bytes per entry (slope, all points) | {b:.2f} B | ≤ 5.5 B | "
          f"{'met' if b <= GOAL_SLOPE else 'not met'} |")
    if ar is not None:
        print(f"| fixed / slope over the real lists only (0 … all) | {mib(ar)} MiB / {br:.2f} B | | |")
    print(f"| VmRSS with no lists (measured) | {mib(pts[0][2])} MiB | ≤ 10 MiB | "
          f"{'met' if pts[0][2] <= GOAL_FIXED else 'not met'} |")
    if syn:
        print(f"| {syn[1]:,} entries serving | {mib(syn[2])} MiB | ≤ 70 MiB | "
              f"{'met' if syn[2] <= GOAL_10M else 'not met'} |")
    print()
print("Commands (`scripts/bench memory-floor`):")
print()
print("```")
print(open(os.path.join(D, "commands.txt")).read().rstrip())
print("```")
