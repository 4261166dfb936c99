#!/usr/bin/env python3
"""Markdown report of bench/transport-ab.sh runs: before vs after, per workload.

    bench/transport-report.py OUT [OUT...]

Each OUT is a transport-ab.sh output directory (runs.tsv, starts.tsv, meta.json). Several OUTs
(repeated runs) get one table each and a pooled line per workload. Figures per binary: the
median over rounds, the min-max, and the relative median absolute deviation (MAD / median);
per workload: the ratio of the medians (after / before), the per-round paired ratios (after of
round r / before of round r: the two runs next to each other in time, so the fairest single
comparisons on a shared machine) with a distribution-free confidence interval of their median
(order statistics, about 95%), and a two-sided sign test over the rounds (how many the after
binary won): a difference is called noise unless p < 0.05.
"""
import csv
import json
import math
import os
import statistics
import sys

WORKLOADS = [
    ("blocked", "blocked names (the 130k blocked queries of queries-mixed.labels.tsv, 37 list files loaded)"),
    ("hits", "cache hits (1000 allowed popular names, type A, each forwarded once to knotd in a warm-up)"),
]
METRICS = [("q_per_cpu_s", "queries / server CPU-s"), ("qps", "QPS"), ("srv_cores", "server cores")]


def load(out):
    with open(os.path.join(out, "runs.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for r in rows:
        for k in ("qps", "completed", "lost", "sent"):
            r[k] = int(r[k])
        for k in ("run_s", "srv_cpu_s", "q_per_cpu_s", "dnsperf_cores"):
            r[k] = float(r[k])
        r["round"] = int(r["round"])
        r["srv_cores"] = r["srv_cpu_s"] / r["run_s"] if r["run_s"] > 0 else 0.0
    starts = []
    p = os.path.join(out, "starts.tsv")
    if os.path.exists(p):
        with open(p) as f:
            starts = list(csv.DictReader(f, delimiter="\t"))
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    return rows, starts, meta


def rel_mad(xs):
    m = statistics.median(xs)
    return statistics.median([abs(x - m) for x in xs]) / m if m else 0.0


def fmt(v, key):
    if key == "srv_cores":
        return f"{v:.2f}"
    return f"{v:,.0f}"


def spread(xs, key):
    return f"{fmt(min(xs), key)}–{fmt(max(xs), key)}"


def paired(rows, w, key):
    by = {}
    for r in rows:
        if r["workload"] == w:
            by.setdefault(r["round"], {})[r["bin"]] = r[key]
    return [v["after"] / v["before"] for _, v in sorted(by.items()) if "before" in v and "after" in v and v["before"]]


def sign_p(k, n):
    """Two-sided sign test: the chance of a split at least this uneven if each round were a coin."""
    m = min(k, n - k)
    tail = sum(math.comb(n, i) for i in range(m + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def median_ci(xs):
    """(low, high, coverage) of the median from order statistics: the narrowest j-th smallest to
    j-th largest whose binomial coverage is still >= 95% (the full range when n is too small)."""
    x, n = sorted(xs), len(xs)
    best = (x[0], x[-1], 1.0 - 2 / 2 ** n)
    for j in range(2, n // 2 + 1):
        cov = 1.0 - 2 * sum(math.comb(n, i) for i in range(j)) / 2 ** n
        if cov < 0.95:
            break
        best = (x[j - 1], x[n - j], cov)
    return best


def verdict(ratio, pr, mad_b, mad_a):
    if not pr:
        return "no paired rounds"
    lo, hi = min(pr), max(pr)
    noise = max(mad_b, mad_a)
    k, n = sum(1 for x in pr if x > 1.0), len(pr)
    ci = median_ci(pr)
    facts = (f"medians {(ratio - 1) * 100:+.1f}% against a spread (larger rel. MAD) of {noise * 100:.1f}%; "
             f"paired ratios {lo:.3f}–{hi:.3f}, their median {statistics.median(pr):.3f} with a {ci[2] * 100:.0f}% "
             f"confidence interval of {ci[0]:.3f}–{ci[1]:.3f}; after higher in {k} of {n} rounds (sign test, two-sided p = {sign_p(k, n):.2f})")
    p = sign_p(k, n)
    if n < 5:
        # even 5 of 5 rounds won gives p = 0.06: fewer rounds cannot show a difference at all
        return f"too few rounds ({n}) to tell a difference from noise: {facts}"
    if p >= 0.05:
        return f"not distinguishable from noise: {facts}"
    word = "higher" if k > n - k else "lower"
    return f"after is {word} by {abs(ratio - 1) * 100:.1f}% (medians), more often than noise explains: {facts}"


def workload_table(rows, w, meta):
    sel = [r for r in rows if r["workload"] == w]
    b = [r for r in sel if r["bin"] == "before"]
    a = [r for r in sel if r["bin"] == "after"]
    if not b or not a:
        return [f"(no {w} runs)"], None
    out = [f"| {w} | {meta['before']} median | min–max | rel. MAD | {meta['after']} median | min–max | rel. MAD "
           f"| after / before (medians) | paired per-round ratios: median (min–max) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    res = None
    for key, name in METRICS:
        xb, xa = [r[key] for r in b], [r[key] for r in a]
        mb, ma = statistics.median(xb), statistics.median(xa)
        pr = paired(rows, w, key)
        ratio = ma / mb if mb else 0.0
        out.append(f"| {name} | {fmt(mb, key)} | {spread(xb, key)} | {rel_mad(xb) * 100:.1f}% | {fmt(ma, key)} | "
                   f"{spread(xa, key)} | {rel_mad(xa) * 100:.1f}% | **{ratio:.3f}** | "
                   f"{statistics.median(pr):.3f} ({min(pr):.3f}–{max(pr):.3f}) |")
        if key == "q_per_cpu_s":
            res = (ratio, pr, rel_mad(xb), rel_mad(xa))
    lost = sum(r["lost"] for r in sel)
    sent = sum(r["sent"] for r in sel)
    rcodes = sorted({r["rcodes"].split("(")[0].rstrip("0123456789") for r in sel})
    out.append("")
    out.append(f"Lost: {lost:,} of {sent:,} queries sent over these {len(sel)} runs; rcodes seen: {', '.join(rcodes)}. "
               f"dnsperf used {statistics.median([r['dnsperf_cores'] for r in sel]):.2f} cores (median).")
    return out, res


def main():
    outs = sys.argv[1:]
    if not outs:
        print(__doc__, file=sys.stderr)
        return 2
    runs = [load(o) for o in outs]
    meta0 = runs[0][2]
    print("### UDP fast path: before and after the one-entry pipeline (reply handle)")
    print()
    print(f"{meta0['before']} (before) against {meta0['after']} (after), run alternately on one port with one config: "
          f"nxdns with all {meta0['sources']} list files of ../shared/data/lists (one source per file, as the memory "
          f"section), {meta0['workers']} workers, cache.size 10000, query_budget.permits 1024, admin off, "
          "**query log on (the shipped default: no `logging:` block)**, knotd on loopback as upstream. "
          f"Each round starts `before`, runs `blocked` (after one unmeasured pass of the file) then `hits` (after a 2-pass warm-up) for {meta0['dur']} s each, "
          "stops it, then does the same with `after`; every start maps a fresh copy of the snapshot that binary "
          "compiled. Server CPU is utime + stime of the daemon (all threads, query-log writer included) from "
          "/proc/PID/stat around each dnsperf run; queries / server CPU-s = completed queries ÷ that. "
          f"The machine ({meta0['cores']} cores, {meta0['arch']}) was shared with other engineers building code during "
          "the runs, and dnsperf runs on the same cores: absolute figures move from round to round; the interleaving "
          "(A B A B …) puts both binaries under the same drift, which is what makes the ratio fair. "
          "QPS is what dnsperf and the other jobs leave the server (near the box's ceiling, dnsperf itself is the cap), "
          "so queries / server CPU-s is the figure that shows a costlier fast path; it is not load-free either "
          "(at lower rates each recvmmsg batch carries fewer queries, so more system calls per query), which the "
          "pairing again shares between the two binaries.")
    print()
    print("How to read the tables: *rel. MAD* is the median absolute deviation of a binary's rounds divided by "
          "their median (its own noise); *after / before (medians)* compares the two medians; a *paired ratio* is "
          "after ÷ before within one round (two runs a few seconds apart, under nearly the same load), and the confidence interval of their median "
          "(distribution-free, from order statistics) bounds the change these rounds can rule out. The verdict "
          "line's sign test asks how likely so uneven a split of rounds won would be if the two binaries cost the "
          "same; below p = 0.05 it reports a difference, otherwise the difference is not distinguishable from noise.")
    print()
    pooled = {w: [] for w, _ in WORKLOADS}
    for i, (rows, starts, meta) in enumerate(runs):
        title = f"Run {i + 1} of {len(runs)}: " if len(runs) > 1 else ""
        print(f"#### {title}{meta['date']}–{meta.get('date_end', '?')}, {meta['rounds']} rounds of {meta['dur']} s per "
              f"workload and binary; load average {meta['load_start']} at the start, {meta.get('load_end', '?')} at the end")
        print()
        for w, desc in WORKLOADS:
            print(f"**{w}**: {desc}")
            print()
            lines, res = workload_table(rows, w, meta)
            print("\n".join(lines))
            if res:
                print(f"Queries per server CPU-second: {verdict(*res)}.")
                pooled[w].append(rows)
            print()
        print("<details><summary>every run (round, binary, workload)</summary>")
        print()
        print("| round | binary | workload | QPS | completed | lost | server CPU-s | server cores | queries / CPU-s | dnsperf cores | load1 |")
        print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['round']} | {meta[r['bin']]} | {r['workload']} | {r['qps']:,} | {r['completed']:,} | {r['lost']} | "
                  f"{r['srv_cpu_s']:.2f} | {r['srv_cores']:.2f} | {r['q_per_cpu_s']:,.0f} | {r['dnsperf_cores']:.2f} | {r['load1']} |")
        if starts:
            ms = {b: statistics.median([int(s["ready_ms"]) for s in starts if s["bin"] == b]) for b in ("before", "after")}
            print()
            print(f"Start to serving (a blocked and an allowed probe answered), median: {meta['before']} {ms['before']:.0f} ms, "
                  f"{meta['after']} {ms['after']:.0f} ms.")
        print()
        print("</details>")
        print()
    if len(runs) > 1:
        print("#### All runs pooled (every round of every run; paired ratios within each round)")
        print()
        for w, _ in WORKLOADS:
            allrows = []
            for k, rows in enumerate(pooled[w]):
                for r in rows:
                    if r["workload"] == w:
                        allrows.append(dict(r, round=k * 1000 + r["round"]))
            if not allrows:
                continue
            lines, res = workload_table(allrows, w, meta0)
            print(f"**{w}**")
            print()
            print("\n".join(lines))
            if res:
                print(f"Queries per server CPU-second: {verdict(*res)}.")
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
