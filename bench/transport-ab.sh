#!/usr/bin/env bash
# UDP fast path, before/after: two nxdns binaries, same config, run alternately on loopback.
#
#   bench/transport-ab.sh BIN_BEFORE BIN_AFTER
#
# For each of ROUNDS rounds, BIN_BEFORE then BIN_AFTER (one at a time, same port, same config
# file, a fresh copy of the snapshot each binary compiled itself) is started, answers two
# dnsperf runs of DUR seconds, and is stopped:
#   blocked  the blocked names of ../shared/data/workload/queries-mixed.labels.tsv (exact
#            popular, exact tail, wildcard subdomains: 130k queries), against all 37 list files
#            of ../shared/data/lists, one source per file, as `scripts/bench memory` loads them;
#            one unmeasured pass of the file first (-n 1) faults in the snapshot's pages;
#   hits     1000 allowed popular names of the same labels (type A), asked twice first so that
#            each is forwarded once to the local knotd and cached, then asked for DUR seconds.
# Per run it records dnsperf's QPS, lost and rcodes, and the server's CPU seconds (utime +
# stime of the process from /proc/PID/stat before and after the run, every thread, the
# query-log writer included), so queries per server CPU-second. Why alternate: the machine is
# shared and its load drifts over minutes; A B A B puts both binaries under the same drift, so
# the ratio is fair even when the absolute figures move. Why CPU-seconds: dnsperf runs on the
# same 2 cores and is the limit of QPS near the box's ceiling, so QPS alone hides a server
# that spends more CPU per answer.
#
# Config (the peers section's load settings, bench/nxdns-sut.sh): THREADS workers (nproc),
# query_budget.permits 1024, cache.size 10000, admin off, log warn, and no `logging:` block, so
# the query log is on as shipped.
#
# Environment (defaults in brackets):
#   ROUNDS   interleaved rounds, at least 5 for the report's noise figures          [5]
#   DUR      seconds per dnsperf run, at most 10                                      [8]
#   BASE     knotd on 127.0.0.1:BASE, nxdns on 127.0.0.1:BASE+1                       [6700]
#   OUT      directory for runs.tsv, meta.json, commands.txt, logs (kept)   [a temp dir, removed]
#   BEFORE_LABEL / AFTER_LABEL  names of the binaries in the output    [before / after]
#   THREADS  listener.workers of nxdns and udp-workers of knotd                      [nproc]
# Output: runs.tsv (one row per dnsperf run) in OUT, and the report of
# bench/transport-report.py on stdout. Everything stays on 127.0.0.1 and is stopped by PID;
# each dnsperf run is bounded by -l DUR (the warm-ups also by -n).
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 BIN_BEFORE BIN_AFTER" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${NX_SHARED_DIR:-$(cd "$here/.." && pwd)/shared}
if [[ -z ${NX_SHARED_DIR:-} && ! -d $shared ]]; then
	# a linked worktree: ../shared sits beside the main checkout
	common=$(git -C "$here" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
	[[ -n $common ]] && shared=$(cd "$common/../.." && pwd)/shared
fi
[[ -d $shared/bench/lib && -d $shared/data ]] || { echo "transport-ab: $shared not found (needs ../shared)" >&2; exit 1; }
abs() { [[ $1 == /* ]] && echo "$1" || echo "$PWD/$1"; }
declare -A BIN
BIN[before]=$(abs "$1") BIN[after]=$(abs "$2")
for b in before after; do
	[[ -x ${BIN[$b]} ]] || { echo "transport-ab: no executable ${BIN[$b]}" >&2; exit 1; }
done
ROUNDS=${ROUNDS:-5} DUR=${DUR:-8} BASE=${BASE:-6700}
[[ $DUR -ge 1 && $DUR -le 10 ]] || { echo "transport-ab: DUR=$DUR: keep dnsperf runs to 1..10 s (shared machine)" >&2; exit 2; }
[[ $ROUNDS -ge 1 ]] || { echo "transport-ab: ROUNDS=$ROUNDS" >&2; exit 2; }
for t in dnsperf knotd kdig python3; do
	command -v "$t" >/dev/null || { echo "transport-ab: $t not installed (scripts/bootstrap --bench)" >&2; exit 1; }
done

export THREADS=${THREADS:-$(nproc)}   # knotd udp-workers (lib/peers.sh)
source "$shared/bench/lib/common.sh"
source "$shared/bench/lib/peers.sh"

keep=1
if [[ -z ${OUT:-} ]]; then OUT=$(mktemp -d /tmp/nxdns-transport-ab.XXXXXX); keep=0; fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
work=$OUT/work
rm -rf "$work"
mkdir -p "$work"
cleanup() {
	stop_all_started
	rm -rf "$work/state" "$work/master-before" "$work/master-after"
	[[ $keep == 1 ]] || rm -rf "$OUT"
}
trap cleanup EXIT

up=$BASE port=$((BASE + 1))
labels=$shared/data/workload/queries-mixed.labels.tsv
awk -F'\t' '$3 ~ /^blocked_/ {print $1, $2}' "$labels" >"$work/blocked.q"
awk -F'\t' '$3 == "allowed_popular" && $2 == "A" && !seen[$1]++ {print $1, $2; if (++n == 1000) exit}' \
	"$labels" >"$work/hits.q"
[[ $(wc -l <"$work/blocked.q") -gt 1000 && $(wc -l <"$work/hits.q") -eq 1000 ]] ||
	die "workload files too small (labels: $labels)"
probe_blocked=$(awk 'NR == 1 {print $1}' "$work/blocked.q")
probe_allowed=$(awk 'NR == 1 {print $1}' "$work/hits.q")

# config NAME STATE_DIR: the one config both binaries run (only the snapshot's compile step
# uses another state_dir, the binary's master copy)
config() {
	local f n
	echo "listener:"
	echo "  dns: [\"127.0.0.1:$port\"]"
	echo "  workers: $THREADS"
	echo "upstream:"
	echo "  servers: [\"127.0.0.1:$up\"]"
	echo "  timeout_ms: 2000"
	echo "query_budget:"
	echo "  permits: 1024"
	echo "access:"
	echo "  rate_limit: {qps: 0}   # off: dnsperf is one client (127.0.0.1) asking far beyond a household device's rate"
	echo "cache:"
	echo "  size: 10000"
	echo "filter:"
	echo "  sources:"
	for f in "$shared"/data/lists/*/*.txt; do
		n=$(basename "$(dirname "$f")")_$(basename "$f" .txt)
		n=$(tr 'A-Z.' 'a-z_' <<<"$n" | cut -c1-64)
		echo "    - {name: $n, path: \"$f\"}"
	done
	echo "admin:"
	echo "  enabled: false"
	echo "state_dir: $1"
	echo "log:"
	echo "  level: warn"
}
config "$work/state" >"$work/nxdns.yaml"
: >"$OUT/commands.txt"

need_free_port "$port"
upstream_start knot "$up" "$work"
up_pid=$SPAWNED_PID
for _ in $(seq 100); do [[ $(dns_status "$up" probe.upstream.test) == NOERROR ]] && break; sleep 0.1; done
[[ $(dns_status "$up" probe.upstream.test) == NOERROR ]] || die "knotd not answering on $up (see $work/upstream-knot)"

# Each binary compiles the lists into its own snapshot once; every start maps a fresh copy of
# it, so no run inherits the previous run's query log or cache file.
for b in before after; do
	config "$work/master-$b" >"$work/update-$b.yaml"
	echo "${BIN[$b]} update --config update-$b.yaml --offline --json   # nxdns.yaml with state_dir master-$b" >>"$OUT/commands.txt"
	"${BIN[$b]}" update --config "$work/update-$b.yaml" --offline --json >"$work/update-$b.json" 2>"$work/update-$b.log" ||
		die "${BIN[$b]} update failed (see $work/update-$b.log)"
	[[ -s $work/master-$b/snapshot.nxs ]] || die "${BIN[$b]} update left no snapshot in $work/master-$b"
done

dp=(-c 8 -T 1 -q 200 -t 2)
echo "nxdns serve --config nxdns.yaml   # listener 127.0.0.1:$port, $THREADS workers, knotd 127.0.0.1:$up; before, then after, each round" >>"$OUT/commands.txt"
echo "dnsperf -s 127.0.0.1 -p $port -d blocked.q ${dp[*]} -n 1 -l $DUR   # blocked warm-up (not measured)" >>"$OUT/commands.txt"
echo "dnsperf -s 127.0.0.1 -p $port -d blocked.q ${dp[*]} -l $DUR   # blocked" >>"$OUT/commands.txt"
echo "dnsperf -s 127.0.0.1 -p $port -d hits.q -c 8 -T 1 -q 50 -t 2 -n 2   # hits warm-up (not measured)" >>"$OUT/commands.txt"
echo "dnsperf -s 127.0.0.1 -p $port -d hits.q ${dp[*]} -l $DUR   # hits" >>"$OUT/commands.txt"

# measure ROUND BIN WORKLOAD FILE PID: one bounded dnsperf run, the server's CPU around it
measure() {
	local r=$1 b=$2 w=$3 file=$4 pid=$5 out=$work/dnsperf-$1-$2-$3.txt
	local load t0 t1 c0 c1
	load=$(cut -d' ' -f1 /proc/loadavg)
	c0=$(cpu_ticks "$pid")
	t0=$(now_ns)
	/usr/bin/time -o "$work/dnsperf.time" -f '%U %S' \
		dnsperf -s 127.0.0.1 -p "$port" -d "$file" "${dp[@]}" -l "$DUR" >"$out" 2>&1 || true
	t1=$(now_ns)
	c1=$(cpu_ticks "$pid")
	alive "$pid" || die "${BIN[$b]} exited during $w (see $work/nxdns-$b/log)"
	awk -v r="$r" -v b="$b" -v w="$w" -v c0="$c0" -v c1="$c1" -v hz="$CLK_TCK" -v load="$load" \
		-v wall="$(( (t1 - t0) / 1000000 ))" -v dt="$(cat "$work/dnsperf.time")" '
		/Queries sent:/ {s = $3} /Queries completed:/ {c = $3} /Queries lost:/ {l = $3}
		/Queries per second:/ {q = $4} /Run time \(s\):/ {rt = $4}
		/Response codes:/ {sub(/.*Response codes: */, ""); gsub(/ /, ""); rc = $0}
		END {
			split(dt, d, " "); cpu = (c1 - c0) / hz
			printf "%s\t%s\t%s\t%.0f\t%d\t%d\t%d\t%.3f\t%.2f\t%.0f\t%.2f\t%s\t%s\n", r, b, w, q, s, c, l, rt,
				cpu, (cpu > 0 ? c / cpu : 0), (rt > 0 ? (d[1] + d[2]) / rt : 0), load, rc
		}' "$out" >>"$OUT/runs.tsv"
	tail -n1 "$OUT/runs.tsv"
}

printf 'round\tbin\tworkload\tqps\tsent\tcompleted\tlost\trun_s\tsrv_cpu_s\tq_per_cpu_s\tdnsperf_cores\tload1\trcodes\n' >"$OUT/runs.tsv"
printf 'round\tbin\tready_ms\tthreads\trss_kib\n' >"$OUT/starts.tsv"
python3 - "$OUT/meta.json" <<PYEOF
import json, sys
json.dump({"date": "$(date -u +%Y-%m-%dT%H:%MZ)", "cores": $(nproc), "arch": "$(uname -m)",
           "rounds": $ROUNDS, "dur": $DUR, "base": $BASE, "workers": $THREADS,
           "before": "${BEFORE_LABEL:-before}", "after": "${AFTER_LABEL:-after}",
           "bin_before": "${BIN[before]}", "bin_after": "${BIN[after]}",
           "blocked_queries": $(wc -l <"$work/blocked.q"), "hits_names": $(wc -l <"$work/hits.q"),
           "sources": $(find "$shared/data/lists" -mindepth 2 -maxdepth 2 -name '*.txt' | wc -l),
           "load_start": "$(cut -d' ' -f1-3 /proc/loadavg)"}, open(sys.argv[1], "w"), indent=1)
PYEOF

for r in $(seq "$ROUNDS"); do
	for b in before after; do
		rm -rf "$work/state"
		cp -a "$work/master-$b" "$work/state"
		need_free_port "$port"
		t0=$(now_ns)
		spawn "nxdns-$b" "$work" "${BIN[$b]}" serve --config "$work/nxdns.yaml"
		pid=$SPAWNED_PID ready=0
		for _ in $(seq 600); do
			alive "$pid" || { tail -5 "$work/nxdns-$b/log" >&2; die "${BIN[$b]} exited at start"; }
			if is_blocked "$port" "$probe_blocked" && [[ $(dns_status "$port" "$probe_allowed") == NOERROR ]]; then
				ready=1; break
			fi
			sleep 0.05
		done
		[[ $ready == 1 ]] || die "${BIN[$b]} not serving after 30 s"
		printf '%s\t%s\t%s\t%s\n' "$r" "$b" "$(( ($(now_ns) - t0) / 1000000 ))" \
			"$(mem_line "$pid" | awk '{print $5 "\t" $1}')" >>"$OUT/starts.tsv"
		sleep 1   # let the boot's last work (first query-log transaction, page faults) settle
		# one pass of the blocked names first (not measured): it faults in the snapshot pages
		# the lookups touch, which the first run after a start would otherwise pay for
		dnsperf -s 127.0.0.1 -p "$port" -d "$work/blocked.q" "${dp[@]}" -n 1 -l "$DUR" >"$work/warm-blocked-$r-$b.txt" 2>&1 || true
		measure "$r" "$b" blocked "$work/blocked.q" "$pid"
		dnsperf -s 127.0.0.1 -p "$port" -d "$work/hits.q" -c 8 -T 1 -q 50 -t 2 -n 2 >"$work/warm-$r-$b.txt" 2>&1 || true
		grep -q 'Queries lost: *0 ' "$work/warm-$r-$b.txt" || echo "transport-ab: warm-up lost queries (round $r, $b)" >&2
		measure "$r" "$b" hits "$work/hits.q" "$pid"
		stop_pid "$pid"
	done
done
stop_pid "$up_pid"
python3 - "$OUT/meta.json" <<PYEOF
import json, sys
m = json.load(open(sys.argv[1])); m["load_end"] = "$(cut -d' ' -f1-3 /proc/loadavg)"; m["date_end"] = "$(date -u +%Y-%m-%dT%H:%MZ)"
json.dump(m, open(sys.argv[1], "w"), indent=1)
PYEOF
python3 "$here/bench/transport-report.py" "$OUT"
