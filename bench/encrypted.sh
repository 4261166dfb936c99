#!/usr/bin/env bash
# DoT and DoH on loopback: nxdns beside Unbound, Knot Resolver and dnsdist serving the same
# transports with one shared certificate, then 1,000 idle DoT and 1,000 idle DoH connections.
#
#   bench/encrypted.sh OUTDIR      (scripts/bench encrypted calls it and renders OUTDIR)
#
# Writes OUTDIR/runs.tsv (one dnsperf run a line), OUTDIR/idle.json, OUTDIR/floor.txt,
# OUTDIR/perf-*.txt, OUTDIR/commands.txt and OUTDIR/meta.json for bench/encrypted-report.py.
#
# How the 2 cores are split: every server runs on CPU 1 (taskset, all its threads) with one
# worker (nxdns listener.workers 1, Unbound num-threads 1, one kresd process, dnsdist one TCP
# worker thread; its DoH front end is an h2o thread of its own on the same CPU); dnsperf
# (-T 1) or h2load (-t 1) and the knotd upstream run on CPU 0. So QPS compares one server core against one
# client core, and queries per server CPU-second is read from /proc/PID/stat (utime+stime).
#
# Lists: prep-lists.sh's SIZE-name subset of all the shared lists (default 100000, so the
# peers load in seconds), given to each server the way its users load a list: nxdns `||name^`,
# Unbound local-zone always_nxdomain, kresd RPZ (name + *.name), dnsdist a SuffixMatchNode
# answering NXDOMAIN. Workloads: `blocked` (prep-lists' blocked.q: listed names and names
# under them) and `hits` (1000 popular names not listed, answered from each server's cache
# after a warm-up pass).
#
# Environment: NX_SHARED_DIR (../shared), NXDNS_BIN (build/nxdns), DUR (s per dnsperf run, <= 10),
# ROUNDS (interleaved rounds), BASE (first port; uses BASE..BASE+20), SIZE (list subset),
# SERVERS ("nxdns unbound kresd dnsdist"), TRANSPORTS ("dot doh-get doh-post dnsperf-doh"),
# WORKLOADS ("blocked hits"), IDLE_N (idle connections per transport, 1000; 0 = skip),
# PERF (1: perf record nxdns during one extra run per transport).
set -euo pipefail
OUT=${1:?usage: bench/encrypted.sh OUTDIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${NX_SHARED_DIR:-$(cd "$ROOT/.." && pwd)/shared}
NX=${NXDNS_BIN:-$ROOT/build/nxdns}
[[ $NX == /* ]] || NX=$ROOT/${NX#./}
DUR=${DUR:-10}
ROUNDS=${ROUNDS:-3}
BASE=${BASE:-5800}
SIZE=${SIZE:-100000}
SERVERS=${SERVERS:-nxdns unbound kresd dnsdist}
TRANSPORTS=${TRANSPORTS:-dot doh-get doh-post dnsperf-doh}
WORKLOADS=${WORKLOADS:-blocked hits}
IDLE_N=${IDLE_N:-1000}
PERF=${PERF:-1}
PY=/usr/bin/python3
SRV_CPU=1 CLI_CPU=0
[[ $DUR -le 10 ]] || { echo "encrypted: DUR=$DUR: keep dnsperf runs to 10 s or less" >&2; exit 2; }
[[ $(nproc) -ge 2 ]] || { echo "encrypted: needs 2 CPUs (servers on CPU 1, client on CPU 0)" >&2; exit 2; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export THREADS=1
source "$SHARED/bench/lib/common.sh"
source "$SHARED/bench/lib/peers.sh"
trap stop_all_started EXIT
CMDS=$OUT/commands.txt
: >"$CMDS"
cmd() { echo "$*" >>"$CMDS"; }

# --- ports: each server a plain port (readiness probes), a DoT port and a DoH port ----------
UP=$BASE
declare -A PLAIN DOT DOH PIDS
i=1
for s in nxdns unbound kresd dnsdist; do
	PLAIN[$s]=$((BASE + i)) DOT[$s]=$((BASE + i + 1)) DOH[$s]=$((BASE + i + 2))
	i=$((i + 3))
done

# --- lists, certificate, upstream ----------------------------------------------------------
head -n 1401 "$SHARED/data/toplists/tranco_top10k_2025-06.csv" >"$OUT/top1400.csv"
cmd "head -n 1401 ../shared/data/toplists/tranco_top10k_2025-06.csv >top1400.csv"
cmd "../shared/bench/prep-lists.sh ../shared/data/lists/*/*.txt -o lists -s $SIZE -t top1400.csv"
"$SHARED/bench/prep-lists.sh" "$SHARED"/data/lists/*/*.txt -o "$OUT/lists" -s "$SIZE" -t "$OUT/top1400.csv" >"$OUT/prep.txt"
BL=$OUT/lists/$SIZE
cmd "nxdns cert --self-signed cert   # one ECDSA P-256 key + certificate for every server"
"$NX" cert --self-signed "$OUT/cert" >/dev/null
CERT=$OUT/cert/cert.pem KEY=$OUT/cert/key.pem
SPAWN_PREFIX="taskset -c $CLI_CPU"
upstream_start knot "$UP" "$OUT"
PIDS[knotd]=$SPAWNED_PID
SPAWN_PREFIX="taskset -c $SRV_CPU"
for _ in $(seq 100); do [[ $(dns_status "$UP" probe.upstream.test) == NOERROR ]] && break; sleep 0.1; done

# --- the servers ---------------------------------------------------------------------------
start_nxdns() {
	local d=$OUT/nxdns
	mkdir -p "$d"
	LC_ALL=C awk '{print "||" $0 "^"}' "$BL/domains" >"$d/blocklist.txt"
	cat >"$d/nxdns.yaml" <<-CONF
	listener:
	  dns: ["127.0.0.1:${PLAIN[nxdns]}"]
	  dot: ["127.0.0.1:${DOT[nxdns]}"]
	  doh: ["127.0.0.1:${DOH[nxdns]}"]
	  workers: 1
	  dns_max_connections: 4096
	  tcp_idle_timeout_ms: 600000
	upstream:
	  servers: ["127.0.0.1:$UP"]
	  timeout_ms: 2000
	query_budget:
	  permits: 1024
	# rate limit off: dnsperf is one client (127.0.0.1) asking far beyond a household device's rate
	access:
	  rate_limit: {qps: 0}
	cache:
	  size: 10000
	tls:
	  cert: "$CERT"
	  key: "$KEY"
	filter:
	  sources:
	    - {name: bench, path: "$d/blocklist.txt", format: adblock}
	admin:
	  enabled: true
	  listen: "127.0.0.1:$((BASE + 20))"
	state_dir: "$d/state"
	log:
	  level: warn
	CONF
	cmd "taskset -c $SRV_CPU nxdns serve --config nxdns.yaml   # workers 1, dns_max_connections 4096 (idle timeout stays whole below half of it), tcp_idle_timeout_ms 600000, cache 10000, permits 1024, query log on (default)"
	spawn nxdns "$OUT" "$NX" serve --config "$d/nxdns.yaml"
	PIDS[nxdns]=$SPAWNED_PID
}
start_unbound() {
	local d=$OUT/unbound
	mkdir -p "$d"
	cat >"$d/unbound.conf" <<-CONF
	server:
	  interface: 127.0.0.1@${PLAIN[unbound]}
	  interface: 127.0.0.1@${DOT[unbound]}
	  interface: 127.0.0.1@${DOH[unbound]}
	  port: ${PLAIN[unbound]}
	  tls-port: ${DOT[unbound]}
	  https-port: ${DOH[unbound]}
	  tls-service-key: "$KEY"
	  tls-service-pem: "$CERT"
	  http-endpoint: "/dns-query"
	  incoming-num-tcp: 4096
	  tcp-idle-timeout: 600000
	  do-ip6: no
	  num-threads: 1
	  so-reuseport: yes
	  username: ""
	  chroot: ""
	  directory: "$d"
	  pidfile: "$d/unbound.pid"
	  use-syslog: no
	  verbosity: 0
	  module-config: "iterator"
	  access-control: 127.0.0.0/8 allow
	  do-not-query-localhost: no
	  harden-referral-path: no
	  include: "$BL/unbound.conf"
	forward-zone:
	  name: "."
	  forward-addr: 127.0.0.1@$UP
	remote-control:
	  control-enable: no
	CONF
	cmd "taskset -c $SRV_CPU unbound -d -p -c unbound.conf   # num-threads 1, tls-port, https-port (libnghttp2), http-endpoint /dns-query, incoming-num-tcp 4096, tcp-idle-timeout 600000, include lists/$SIZE/unbound.conf"
	spawn unbound "$OUT" unbound -d -p -c "$d/unbound.conf"
	PIDS[unbound]=$SPAWNED_PID
}
start_kresd() {
	local d=$OUT/kresd
	mkdir -p "$d/run"
	cat >"$d/kresd.conf" <<-CONF
	net.listen('127.0.0.1', ${PLAIN[kresd]}, { kind = 'dns' })
	net.listen('127.0.0.1', ${DOT[kresd]}, { kind = 'tls' })
	net.listen('127.0.0.1', ${DOH[kresd]}, { kind = 'doh2' })
	net.tls('$CERT', '$KEY')
	trust_anchors.remove('.')
	cache.open(100 * MB, 'lmdb://$d/cache')
	policy.add(policy.rpz(policy.DENY, '$BL/blocked.rpz', false))
	policy.add(policy.all(policy.FORWARD({'127.0.0.1@$UP'})))
	CONF
	cmd "taskset -c $SRV_CPU kresd -n -q -c kresd.conf run   # one process; net.listen kind 'tls' and 'doh2' (path /dns-query), net.tls(cert, key), RPZ lists/$SIZE/blocked.rpz"
	spawn kresd "$OUT" kresd -n -q -c "$d/kresd.conf" "$d/run"
	PIDS[kresd]=$SPAWNED_PID
}
start_dnsdist() {
	local d=$OUT/dnsdist
	mkdir -p "$d"
	cat >"$d/dnsdist.conf" <<-CONF
	setLocal('127.0.0.1:${PLAIN[dnsdist]}')
	addTLSLocal('127.0.0.1:${DOT[dnsdist]}', '$CERT', '$KEY', { provider = 'openssl' })
	addDOHLocal('127.0.0.1:${DOH[dnsdist]}', '$CERT', '$KEY', '/dns-query', { idleTimeout = 600 })
	setACL({'127.0.0.0/8'})
	newServer({ address = '127.0.0.1:$UP' })
	pc = newPacketCache(10000, {})
	getPool(''):setCache(pc)
	setMaxTCPClientThreads(1)
	setTCPRecvTimeout(600)
	setMaxTCPConnectionDuration(0)
	setMaxTCPQueriesPerConnection(0)
	smn = newSuffixMatchNode()
	for l in io.lines('$BL/domains') do smn:add(newDNSName(l)) end
	addAction(SuffixMatchNodeRule(smn), RCodeAction(DNSRCode.NXDOMAIN))
	CONF
	cmd "taskset -c $SRV_CPU dnsdist --supervised --disable-syslog -C dnsdist.conf   # addTLSLocal (OpenSSL), addDOHLocal /dns-query (h2o), packet cache 10000, setMaxTCPClientThreads(1), SuffixMatchNode of lists/$SIZE/domains -> NXDOMAIN, backend knotd"
	spawn dnsdist "$OUT" dnsdist --supervised --disable-syslog -C "$d/dnsdist.conf"
	PIDS[dnsdist]=$SPAWNED_PID
}

probe=$(head -n1 "$BL/probe" | awk '{print $1}')
need_free_port $((BASE + 20))   # nxdns's admin listener (/metrics for the ledger)
for s in $SERVERS; do
	for p in "${PLAIN[$s]}" "${DOT[$s]}" "${DOH[$s]}"; do need_free_port "$p"; done
	"start_$s"
done
for s in $SERVERS; do
	wait_blocked "${PLAIN[$s]}" "$probe" 120 "${PIDS[$s]}" ||
		{ tail -5 "$OUT/$s/log" >&2; die "$s not serving blocked names after 120 s (see $OUT/$s/log)"; }
	echo "encrypted: $s ready (pid ${PIDS[$s]}, plain ${PLAIN[$s]}, dot ${DOT[$s]}, doh ${DOH[$s]})" >&2
done
SPAWN_PREFIX=""

# --- 1. idle connections, on freshly started servers ---------------------------------------
if [[ $IDLE_N -gt 0 ]]; then
	ulimit -n 20000 2>/dev/null || true
	: >"$OUT/idle.jsonl"
	for s in $SERVERS; do
		local_metrics=""
		[[ $s == nxdns ]] && local_metrics="--metrics http://127.0.0.1:$((BASE + 20))/metrics"
		cmd "bench/idle-conns.py --pid PID --dot 127.0.0.1:DOT_PORT --doh 127.0.0.1:DOH_PORT -n $IDLE_N --settle 3 ${local_metrics:+--metrics http://127.0.0.1:ADMIN/metrics}   # $s"
		"$PY" "$ROOT/bench/idle-conns.py" --name "$s" --pid "${PIDS[$s]}" --dot "127.0.0.1:${DOT[$s]}" \
			--doh "127.0.0.1:${DOH[$s]}" -n "$IDLE_N" --settle 3 $local_metrics >>"$OUT/idle.jsonl" ||
			echo "{\"name\": \"$s\", \"error\": \"idle-conns.py failed\"}" >>"$OUT/idle.jsonl"
	done
fi
# the library floor, measured outside nxdns
if cc -O1 -o "$OUT/enc-floor" "$ROOT/bench/enc-floor.c" $(pkg-config --cflags --libs gnutls libnghttp2) 2>"$OUT/floor.cc.log"; then
	cmd "cc -O1 -o enc-floor bench/enc-floor.c \$(pkg-config --cflags --libs gnutls libnghttp2) && ./enc-floor cert.pem key.pem"
	"$OUT/enc-floor" "$CERT" "$KEY" >"$OUT/floor.txt" 2>&1 || true
fi

# --- 2. throughput, interleaved ------------------------------------------------------------
# warm the caches: every hit name once over UDP (the cache is shared by all transports)
for s in $SERVERS; do
	taskset -c $CLI_CPU dnsperf -s 127.0.0.1 -p "${PLAIN[$s]}" -d "$OUT/lists/hits.q" -n 2 -c 4 -q 50 -t 2 >/dev/null 2>&1 || true
done
cmd "dnsperf -s 127.0.0.1 -p PLAIN_PORT -d hits.q -n 2 -c 4 -q 50 -t 2   # warm-up of each cache, UDP"
DP_COMMON=(-c 8 -q 200 -T 1 -t 2 -l "$DUR")
# DoT: dnsperf -m dot. DoH: h2load (nghttp2), not dnsperf -m doh: dnsperf 2.10's DoH client
# keeps one DNS message buffer per connection and hands back one answer per TLS read, so a
# server that packs several HTTP/2 answers into one write (nxdns's corked records, dnsdist's
# h2o) sees its answers dropped as lost; the `dnsperf-doh` transport (round 1) records that.
# doh-get: every name of the workload as its own GET URI (RFC 8484 id 0); doh-post: the
# workload's first name, POSTed each time (h2load sends one body).
mode_args() { # TRANSPORT SERVER
	case $1 in
	dot) echo "-m dot -p ${DOT[$2]:-PORT}" ;;
	dnsperf-doh) echo "-m doh -p ${DOH[$2]:-PORT} -O doh-uri=https://127.0.0.1:${DOH[$2]:-PORT}/dns-query -O doh-method=GET" ;;
	esac
}
wl_file() { [[ $1 == blocked ]] && echo "$BL/blocked.q" || echo "$OUT/lists/hits.q"; }
# DoH inputs: URI lists with a PORT placeholder, and one POST body per workload
"$PY" - "$BL/blocked.q" "$OUT/lists/hits.q" "$OUT" <<'PYEOF'
import base64, struct, sys
def wire(name, qtype):
    m = struct.pack(">HHHHHH", 0, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        m += bytes([len(label)]) + label.encode()
    return m + b"\x00" + struct.pack(">HH", {"A": 1, "AAAA": 28}.get(qtype, 1), 1)
for wl, path in (("blocked", sys.argv[1]), ("hits", sys.argv[2])):
    with open(path) as f, open(f"{sys.argv[3]}/{wl}.uris", "w") as out:
        for i, line in enumerate(f):
            if i == 50000:
                break
            name, qtype = line.split()[:2]
            if i == 0:
                open(f"{sys.argv[3]}/{wl}.post", "wb").write(wire(name, qtype))
            b64 = base64.urlsafe_b64encode(wire(name, qtype)).decode().rstrip("=")
            out.write(f"https://127.0.0.1:PORT/dns-query?dns={b64}\n")
PYEOF
H2_COMMON=(-c 8 -m 25 -t 1 -D "$DUR")
# run_load TRANSPORT WORKLOAD SERVER OUTFILE -> the stats columns (qps sent completed lost avg_ms rcodes)
run_load() {
	local t=$1 w=$2 s=$3 f=$4
	case $t in
	dot | dnsperf-doh)
		# shellcheck disable=SC2046
		taskset -c $CLI_CPU dnsperf -s 127.0.0.1 $(mode_args "$t" "$s") -d "$(wl_file "$w")" "${DP_COMMON[@]}" >"$f" 2>&1 || true
		awk '/Queries sent:/ {s = $3} /Queries completed:/ {c = $3} /Queries lost:/ {l = $3}
			/Queries per second:/ {q = $4} /Average Latency/ {a = $4 * 1000}
			/Response codes:/ {sub(/.*Response codes: */, ""); gsub(/ /, ""); rc = $0}
			END {printf "%.0f\t%d\t%d\t%d\t%.3f\t%s\n", q, s, c, l, a, (rc == "" ? "-" : rc)}' "$f" ;;
	doh-get | doh-post)
		if [[ $t == doh-get ]]; then
			sed "s/PORT/${DOH[$s]}/" "$OUT/$w.uris" >"$OUT/cur.uris"
			taskset -c $CLI_CPU h2load -i "$OUT/cur.uris" "${H2_COMMON[@]}" >"$f" 2>&1 || true
		else
			taskset -c $CLI_CPU h2load -d "$OUT/$w.post" -H 'content-type: application/dns-message' \
				"${H2_COMMON[@]}" "https://127.0.0.1:${DOH[$s]}/dns-query" >"$f" 2>&1 || true
		fi
		awk '/^finished in/ {q = $4} /^requests:/ {st = $4; ok = $8}
			/^status codes:/ {rc = "2xx:" $3 ",4xx:" $7 ",5xx:" $9}
			/^time for request:/ {v = $4; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
				a = (u == "us") ? v / 1000 : (u == "s") ? v * 1000 : v}
			END {printf "%.0f\t%d\t%d\t%d\t%.3f\t%s\n", q, st, ok, st - ok, a, (rc == "" ? "-" : rc)}' "$f" ;;
	esac
}
printf 'round\ttransport\tworkload\tserver\tqps\tsent\tcompleted\tlost\tavg_ms\trcodes\tcpu_s\twall_s\n' >"$OUT/runs.tsv"
read -ra srv_list <<<"$SERVERS"
nsrv=${#srv_list[@]}
for r in $(seq "$ROUNDS"); do
	for t in $TRANSPORTS; do
		# dnsperf's DoH client is recorded once (round 1, cache hits): the evidence, not a figure
		[[ $t == dnsperf-doh && $r != 1 ]] && continue
		for w in $WORKLOADS; do
			[[ $t == dnsperf-doh && $w != hits ]] && continue
			# rotate the order each round so no server always runs first or last
			for k in $(seq 0 $((nsrv - 1))); do
				s=${srv_list[$(((k + r) % nsrv))]}
				f=$OUT/load-$r-$t-$w-$s.txt
				c0=$(cpu_ticks "${PIDS[$s]}") t0=$(now_ns)
				stats=$(run_load "$t" "$w" "$s" "$f")
				c1=$(cpu_ticks "${PIDS[$s]}") t1=$(now_ns)
				alive "${PIDS[$s]}" || die "$s died during $t/$w (see $OUT/$s/log)"
				printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$t" "$w" "$s" "$stats" \
					"$(awk -v a="$c0" -v b="$c1" -v h="$CLK_TCK" 'BEGIN {printf "%.2f", (b - a) / h}')" \
					"$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", (b - a) / 1e9}')" >>"$OUT/runs.tsv"
			done
		done
	done
done
cmd "taskset -c $CLI_CPU dnsperf -s 127.0.0.1 -m dot -p PORT -d blocked.q|hits.q ${DP_COMMON[*]}   # dot, every server, $ROUNDS rounds"
cmd "taskset -c $CLI_CPU h2load -i blocked.uris|hits.uris ${H2_COMMON[*]}   # doh-get: one GET URI per name (first 50000), every server, $ROUNDS rounds"
cmd "taskset -c $CLI_CPU h2load -d blocked.post|hits.post -H 'content-type: application/dns-message' ${H2_COMMON[*]} https://127.0.0.1:PORT/dns-query   # doh-post, the workload's first name"
cmd "taskset -c $CLI_CPU dnsperf -s 127.0.0.1 $(mode_args dnsperf-doh X) -d hits.q ${DP_COMMON[*]}   # dnsperf-doh, round 1 only"

# --- 3. where nxdns's CPU goes, per transport (one extra hits run under perf) ---------------
if [[ $PERF == 1 ]] && command -v perf >/dev/null && [[ " $SERVERS " == *" nxdns "* ]]; then
	for t in $TRANSPORTS; do
		[[ $t == dnsperf-doh ]] && continue
		ps=$((DUR > 3 ? DUR - 2 : 1))
		(sleep 1; perf record -q -F 999 -g -p "${PIDS[nxdns]}" -o "$OUT/perf-$t.data" -- sleep "$ps" >/dev/null 2>&1) &
		pj=$!
		run_load "$t" hits nxdns "$OUT/load-perf-$t.txt" >"$OUT/perf-$t.stats"
		wait "$pj" || true
		if [[ -s "$OUT/perf-$t.data" ]]; then
			perf report -i "$OUT/perf-$t.data" --stdio --no-children --sort dso --percent-limit 2 -g none 2>/dev/null |
				grep -v '^#' | sed '/^$/d' | head -n 10 >"$OUT/perf-$t-dso.txt" || true
			perf report -i "$OUT/perf-$t.data" --stdio --no-children --sort dso,sym --percent-limit 1.5 -g none 2>/dev/null |
				grep -v '^#' | sed '/^$/d' | head -n 18 >"$OUT/perf-$t-sym.txt" || true
			rm -f "$OUT/perf-$t.data"
		fi
	done
	cmd "perf record -F 999 -g -p PID -- sleep $ps   # nxdns, during one extra hits run per transport; perf report --no-children --sort dso / dso,sym"
fi

threads=""
for s in $SERVERS; do threads+="\"$s\": $(awk '/^Threads:/ {print $2}' "/proc/${PIDS[$s]}/status"), "; done
stop_all_started
"$PY" - "$OUT/meta.json" <<PYEOF
import json, sys
json.dump({"date": "$(date -u +%Y-%m-%dT%H:%MZ)", "cores": $(nproc), "arch": "$(uname -m)",
           "dur": $DUR, "rounds": $ROUNDS, "size": "$SIZE", "names": $(wc -l <"$BL/domains"),
           "servers": "$SERVERS".split(), "transports": "$TRANSPORTS".split(),
           "workloads": "$WORKLOADS".split(), "idle_n": $IDLE_N, "threads": {${threads%, }},
           "version": "$("$NX" version 2>/dev/null | head -n1)",
           "peer_versions": {"unbound": "$(unbound -V 2>/dev/null | awk 'NR == 1 {print $2}')",
                             "kresd": "$(kresd --version 2>/dev/null | awk '{print $NF}')",
                             "dnsdist": "$(dnsdist --version 2>/dev/null | awk 'NR == 1 {print $2}')",
                             "dnsperf": "$(dnsperf -h 2>&1 | awk '/^Version/ {print $2}')"},
           "dnsdist_features": "$(dnsdist --version 2>/dev/null | sed -n 's/^Enabled features: //p')",
           "srv_cpu": $SRV_CPU, "cli_cpu": $CLI_CPU}, open(sys.argv[1], "w"), indent=1)
PYEOF
echo "encrypted: results in $OUT" >&2
