#!/usr/bin/env bash
# The PostgreSQL sink's cost on the DNS path and its sustained rate: blocked names answered per
# server CPU-second with logging.postgresql off and on, the two daemons side by side in one run:
#
#   bench/pgsink-ab.sh BIN OUTDIR [BASE]
#
# Starts a throwaway PostgreSQL 15 (initdb as nobody in a temp dir, unix socket there, TCP on
# 127.0.0.1:BASE+4, fsync off), then two nxdns (2 workers, cache 10000, the query log on as by
# default, a 50,000-name blocklist): "off" on BASE, "on" on BASE+1 with logging.postgresql
# set, their admins on BASE+2 / BASE+3 for /metrics. ROUNDS interleaved rounds of dnsperf -l DUR
# over the blocked names against each; per run it records the answers, the daemon's CPU time
# (utime + stime of the whole process, so the sink's thread is counted), the sink thread's own
# CPU (nx-pgsink's /proc task stat), the rows the sink committed (nxdns_pgsink_sent_total) and
# dropped, and PostgreSQL's CPU (the postmaster and its backends). Writes OUTDIR/runs.tsv,
# OUTDIR/meta.txt and OUTDIR/commands.txt. Everything runs on 127.0.0.1 and stops by PID.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 BIN OUTDIR [BASE]" >&2; exit 2; }
bin=$1 out=$2 base=${3:-6800}
DUR=${DUR:-10} ROUNDS=${ROUNDS:-3}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
[[ $DUR -le 10 ]] || { echo "pgsink-ab: DUR=$DUR: keep dnsperf runs to 10 s or less" >&2; exit 2; }
[[ -x $PG_BIN/postgres ]] || { echo "pgsink-ab: $PG_BIN/postgres missing (Debian postgresql)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/nxdns-pgsink-ab.XXXXXX)
pgroot=$work/pgroot # PostgreSQL's data and socket, owned by nobody (initdb refuses root)
mkdir "$pgroot"
chown nobody:nogroup "$pgroot"
chmod 711 "$work"
pids=()
pgpid=
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [[ -n $pgpid ]]; then kill -INT "$pgpid" 2>/dev/null || true; wait "$pgpid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
tick=$(getconf CLK_TCK)
cpu_s() { awk -v t="$tick" '{printf "%.3f", ($14 + $15) / t}' "/proc/$1/stat"; }
# the postmaster and every backend it forked (children's CPU of exited ones is in $16 + $17)
pg_cpu_s() {
	local sum=0 p
	for p in $pgpid $(pgrep -P "$pgpid" || true); do
		sum=$(awk -v t="$tick" -v s="$sum" '{printf "%.3f", s + ($14 + $15 + $16 + $17) / t}' "/proc/$p/stat" 2>/dev/null || echo "$sum")
	done
	echo "$sum"
}
task_cpu_s() { # PID THREADNAME
	local t
	for t in /proc/$1/task/*; do
		if [[ $(cat "$t/comm") == "$2" ]]; then cpu_s "$1/task/${t##*/}"; return; fi
	done
	echo 0
}
as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
"${as_nobody[@]}" "$PG_BIN/initdb" -D "$pgroot/data" -U bench -A trust -E UTF8 --no-sync --no-instructions >"$pgroot/initdb.log" 2>&1
pgport=$((base + 4))
"${as_nobody[@]}" "$PG_BIN/postgres" -D "$pgroot/data" -k "$pgroot" -p "$pgport" -c listen_addresses=127.0.0.1 \
	-c fsync=off -c shared_buffers=64MB >"$pgroot/pg.log" 2>&1 &
pgpid=$!
for _ in $(seq 100); do "$PG_BIN/pg_isready" -q -h "$pgroot" -p "$pgport" && break; sleep 0.1; done
psql_() { "$PG_BIN/psql" -X -q -At -h "$pgroot" -p "$pgport" -U bench -d postgres -c "$1"; }

awk 'BEGIN { for (i = 0; i < 50000; i++) printf "b%d.pgsink-bench.test\n", i }' >"$work/list.txt"
awk '{print $1 " A"}' "$work/list.txt" >"$work/blocked.q"

start_nx() { # NAME PORT ADMIN_PORT SINK(yes/no) -> PID in $nxpid
	local name=$1 port=$2 aport=$3 sink=$4
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
		[[ $sink == yes ]] && echo "logging: {postgresql: {dsn: \"host=127.0.0.1 port=$pgport user=bench dbname=postgres\", hostname: bench}}"
	} >"$work/$name/nxdns.yaml"
	"$bin" serve --config "$work/$name/nxdns.yaml" >"$work/$name/log" 2>&1 &
	nxpid=$!
	pids+=("$nxpid")
	for _ in $(seq 100); do
		[[ $(dig +short +time=1 +tries=1 -p "$port" @127.0.0.1 b1.pgsink-bench.test 2>/dev/null) == 0.0.0.0 ]] && return
		sleep 0.1
	done
	echo "pgsink-ab: nxdns $name did not answer (see $work/$name/log)" >&2
	exit 1
}
start_nx off "$base" $((base + 2)) no
off_pid=$nxpid
start_nx on $((base + 1)) $((base + 3)) yes
on_pid=$nxpid
metric() { curl -fsS --max-time 2 "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {v = $2} END {print v + 0}'; }
dropped() { curl -fsS --max-time 2 "http://127.0.0.1:$1/metrics" | awk '$1 ~ /^nxdns_pgsink_dropped_total/ {s += $2} END {print s + 0}'; }
# wait until the sink has written the start-up probe: connected, schema made
for _ in $(seq 100); do [[ $(metric $((base + 3)) nxdns_pgsink_sent_total) != 0 ]] && break; sleep 0.1; done

echo "dnsperf -s 127.0.0.1 -p PORT -d blocked.q -l $DUR -c 8 -q 200 -t 2   # PORT $base (off), $((base + 1)) (on), alternating" >"$out/commands.txt"
printf 'round\tmode\tanswered\tcpu_s\tqps\tsink_cpu_s\tpg_cpu_s\trows\tdropped\twall_s\n' >"$out/runs.tsv"
for r in $(seq "$ROUNDS"); do
	for mode in off on; do
		port=$base pid=$off_pid
		[[ $mode == on ]] && port=$((base + 1)) pid=$on_pid
		c0=$(cpu_s "$pid") s0=$(task_cpu_s "$on_pid" nx-pgsink) g0=$(pg_cpu_s)
		n0=$(metric $((base + 3)) nxdns_pgsink_sent_total) d0=$(dropped $((base + 3)))
		t0=$(date +%s.%N)
		res=$(dnsperf -s 127.0.0.1 -p "$port" -d "$work/blocked.q" -l "$DUR" -c 8 -q 200 -t 2 2>&1)
		# the sink trails the answers by its flush interval (1 s): let it catch up before
		# its rows are counted (its CPU and PostgreSQL's keep counting meanwhile)
		[[ $mode == on ]] && sleep 2
		t1=$(date +%s.%N)
		c1=$(cpu_s "$pid") s1=$(task_cpu_s "$on_pid" nx-pgsink) g1=$(pg_cpu_s)
		n1=$(metric $((base + 3)) nxdns_pgsink_sent_total) d1=$(dropped $((base + 3)))
		done_q=$(awk '/Queries completed:/ {print $3}' <<<"$res")
		qps=$(awk '/Queries per second:/ {printf "%.0f", $4}' <<<"$res")
		sub() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }
		if [[ $mode == on ]]; then
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$mode" "$done_q" "$(sub "$c0" "$c1")" "$qps" \
				"$(sub "$s0" "$s1")" "$(sub "$g0" "$g1")" "$(sub "$n0" "$n1")" "$(sub "$d0" "$d1")" \
				"$(sub "$t0" "$t1")" >>"$out/runs.tsv"
		else
			printf '%s\t%s\t%s\t%s\t%s\t\t\t\t\t%s\n' "$r" "$mode" "$done_q" "$(sub "$c0" "$c1")" "$qps" \
				"$(sub "$t0" "$t1")" >>"$out/runs.tsv"
		fi
	done
done
# Sustained: the "on" daemon alone at paced rates (dnsperf -Q), the rows the sink committed
# and dropped at each; the highest rate without drops is what it sustains on this box.
echo "dnsperf -s 127.0.0.1 -p $((base + 1)) -d blocked.q -l $DUR -c 8 -q 200 -t 2 -Q RATE   # RATE in ${RATES:-5000 10000 20000 40000}" >>"$out/commands.txt"
printf 'rate	answered	rows	dropped	sink_cpu_s	pg_cpu_s	wall_s
' >"$out/paced.tsv"
for rate in ${RATES:-5000 10000 20000 40000}; do
	s0=$(task_cpu_s "$on_pid" nx-pgsink) g0=$(pg_cpu_s)
	n0=$(metric $((base + 3)) nxdns_pgsink_sent_total) d0=$(dropped $((base + 3)))
	t0=$(date +%s.%N)
	res=$(dnsperf -s 127.0.0.1 -p $((base + 1)) -d "$work/blocked.q" -l "$DUR" -c 8 -q 200 -t 2 -Q "$rate" 2>&1)
	sleep 2
	t1=$(date +%s.%N)
	s1=$(task_cpu_s "$on_pid" nx-pgsink) g1=$(pg_cpu_s)
	n1=$(metric $((base + 3)) nxdns_pgsink_sent_total) d1=$(dropped $((base + 3)))
	done_q=$(awk '/Queries completed:/ {print $3}' <<<"$res")
	sub() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rate" "$done_q" "$(sub "$n0" "$n1")" "$(sub "$d0" "$d1")" \
		"$(sub "$s0" "$s1")" "$(sub "$g0" "$g1")" "$(sub "$t0" "$t1")" >>"$out/paced.tsv"
done
{
	echo "sent=$(metric $((base + 3)) nxdns_pgsink_sent_total)"
	echo "dropped=$(dropped $((base + 3)))"
	echo "reconnects=$(metric $((base + 3)) nxdns_pgsink_reconnects_total)"
	echo "rows=$(psql_ 'SELECT count(*) FROM log_entries')"
	echo "date=$(date -u +%Y-%m-%dT%H:%MZ) cores=$(nproc) arch=$(uname -m) rounds=$ROUNDS dur=$DUR"
	echo "version=$("$bin" version | head -n1) postgres=$("$PG_BIN/postgres" --version | awk '{print $3}')"
} >"$out/meta.txt"
cat "$out/runs.tsv" "$out/paced.tsv" "$out/meta.txt"
