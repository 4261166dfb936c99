#!/usr/bin/env bash
# The dnstap export's cost on the DNS path: blocked names answered per server CPU-second with
# dnstap off and on, the two daemons side by side in one run:
#
#   bench/dnstap-ab.sh BIN OUTDIR [BASE]
#
# Starts fstrm_capture (fstrm-bin) on a Unix socket writing to /dev/null, then two nxdns (2
# workers, cache 10000, the query log on as by default, a 50,000-name blocklist): "off" on
# BASE, "on" on BASE+1 with dnstap.socket set, their admins on BASE+2 / BASE+3 for /metrics.
# ROUNDS interleaved rounds of dnsperf -l DUR over the blocked names against each; per run it
# records the answers (dnsperf's completed queries) and the daemon's CPU time (utime + stime
# of the whole process from /proc/PID/stat, so the dnstap writer thread is counted), and the
# collector's CPU apart. Writes OUTDIR/runs.tsv, OUTDIR/meta.txt and OUTDIR/commands.txt.
# Everything runs on 127.0.0.1 and stops by PID.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 BIN OUTDIR [BASE]" >&2; exit 2; }
bin=$1 out=$2 base=${3:-6700}
DUR=${DUR:-10} ROUNDS=${ROUNDS:-3}
[[ $DUR -le 10 ]] || { echo "dnstap-ab: DUR=$DUR: keep dnsperf runs to 10 s or less" >&2; exit 2; }
command -v fstrm_capture >/dev/null || { echo "dnstap-ab: fstrm_capture (fstrm-bin) missing" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/nxdns-dnstap-ab.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
tick=$(getconf CLK_TCK)
cpu_s() { awk -v t="$tick" '{printf "%.3f", ($14 + $15) / t}' "/proc/$1/stat"; }

awk 'BEGIN { for (i = 0; i < 50000; i++) printf "b%d.dnstap-bench.test\n", i }' >"$work/list.txt"
awk '{print $1 " A"}' "$work/list.txt" >"$work/blocked.q"

fstrm_capture -t protobuf:dnstap.Dnstap -u "$work/dt.sock" -w /dev/null >"$work/capture.log" 2>&1 &
cap=$!
pids+=("$cap")
for _ in $(seq 50); do [[ -S $work/dt.sock ]] && break; sleep 0.1; done

start_nx() { # NAME PORT ADMIN_PORT DNSTAP(yes/no) -> PID in $nxpid
	local name=$1 port=$2 aport=$3 dt=$4
	mkdir -p "$work/$name"
	{
		echo "listener: {dns: [\"127.0.0.1:$port\"], workers: 2}"
		echo "upstream: {servers: [\"127.0.0.1:9\"], timeout_ms: 500}"
		echo "query_budget: {permits: 1024}"
		echo "access: {rate_limit: {qps: 0}}"
		echo "cache: {size: 10000}"
		echo "filter: {sources: [{name: bench, path: \"$work/list.txt\", format: domains}]}"
		echo "admin: {enabled: true, listen: \"127.0.0.1:$aport\"}"
		echo "state_dir: $work/$name/state"
		echo "log: {level: warn}"
		[[ $dt == yes ]] && echo "dnstap: {socket: \"$work/dt.sock\"}"
	} >"$work/$name/nxdns.yaml"
	"$bin" serve --config "$work/$name/nxdns.yaml" >"$work/$name/log" 2>&1 &
	nxpid=$!
	pids+=("$nxpid")
	for _ in $(seq 100); do
		[[ $(dig +short +time=1 +tries=1 -p "$port" @127.0.0.1 b1.dnstap-bench.test 2>/dev/null) == 0.0.0.0 ]] && return
		sleep 0.1
	done
	echo "dnstap-ab: nxdns $name did not answer (see $work/$name/log)" >&2
	exit 1
}
start_nx off "$base" $((base + 2)) no
off_pid=$nxpid
start_nx on $((base + 1)) $((base + 3)) yes
on_pid=$nxpid

echo "dnsperf -s 127.0.0.1 -p PORT -d blocked.q -l $DUR -c 8 -q 200 -t 2   # PORT $base (off), $((base + 1)) (on), alternating" >"$out/commands.txt"
printf 'round\tmode\tanswered\tcpu_s\tqps\tcollector_cpu_s\n' >"$out/runs.tsv"
for r in $(seq "$ROUNDS"); do
	for mode in off on; do
		port=$base pid=$off_pid
		[[ $mode == on ]] && port=$((base + 1)) pid=$on_pid
		c0=$(cpu_s "$pid") k0=$(cpu_s "$cap")
		res=$(dnsperf -s 127.0.0.1 -p "$port" -d "$work/blocked.q" -l "$DUR" -c 8 -q 200 -t 2 2>&1)
		c1=$(cpu_s "$pid") k1=$(cpu_s "$cap")
		done_q=$(awk '/Queries completed:/ {print $3}' <<<"$res")
		qps=$(awk '/Queries per second:/ {printf "%.0f", $4}' <<<"$res")
		printf '%s\t%s\t%s\t%.3f\t%s\t%.3f\n' "$r" "$mode" "$done_q" "$(awk -v a="$c0" -v b="$c1" 'BEGIN {print b - a}')" \
			"$qps" "$(awk -v a="$k0" -v b="$k1" 'BEGIN {print b - a}')" >>"$out/runs.tsv"
	done
done
metric() { curl -fsS --max-time 2 "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {print $2; exit}'; }
{
	echo "sent=$(metric $((base + 3)) nxdns_dnstap_sent_total)"
	echo "dropped_queue_full=$(metric $((base + 3)) 'nxdns_dnstap_dropped_total{reason="queue_full"}')"
	echo "reconnects=$(metric $((base + 3)) nxdns_dnstap_reconnects_total)"
	echo "date=$(date -u +%Y-%m-%dT%H:%MZ) cores=$(nproc) arch=$(uname -m) rounds=$ROUNDS dur=$DUR"
	echo "version=$("$bin" version | head -n1)"
} >"$out/meta.txt"
cat "$out/runs.tsv" "$out/meta.txt"
