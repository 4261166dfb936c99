#!/usr/bin/env bash
# The cache's eviction policy on the shared mixed workload, one nxdns binary at a time:
#
#   bench/cache-ab.sh BIN CACHE_SIZE BLOCKDIR [BASE]
#
# Starts knotd (the peers' wildcard root zone) on BASE and nxdns (bench/nxdns-sut.sh, 2
# workers) on BASE+1 with its admin on BASE+2, then runs dnsperf over
# ../shared/data/workload/queries-mixed.txt twice, then 400,000 names asked once each (a
# scan, as the peers section's `miss` workload), then the mixed workload again; after each
# phase it prints dnsperf's QPS and the cache counters from /metrics. The hit rate of a phase
# is its hits delta over hits + misses. BLOCKDIR is a prep-lists.sh output directory (its
# `domains` file). Everything runs on 127.0.0.1 and stops by PID; each dnsperf run is one
# pass of its file (-n 1), at most 6 s.
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: $0 BIN CACHE_SIZE BLOCKDIR [BASE]" >&2; exit 2; }
bin=$1 size=$2 blockdir=$3 base=${4:-6600}
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${NX_SHARED_DIR:-$(cd "$here/.." && pwd)/shared}
mixed=$shared/data/workload/queries-mixed.txt
[[ -f $mixed ]] || { echo "cache-ab: $mixed not found (needs ../shared)" >&2; exit 1; }
work=$(mktemp -d /tmp/nxdns-cache-ab.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cat >"$work/root.zone" <<'ZONE'
$ORIGIN .
$TTL 3600
@ IN SOA ns.upstream.invalid. hostmaster.upstream.invalid. 1 3600 600 86400 3600
@ IN NS ns.upstream.invalid.
* IN A 192.0.2.1
* IN AAAA 2001:db8::1
ZONE
cat >"$work/knot.conf" <<CONF
server:
  rundir: "$work"
  listen: 127.0.0.1@$base
  udp-workers: 2
  tcp-workers: 1
  background-workers: 1
log:
  - target: stderr
    any: warning
database:
  storage: "$work/db"
template:
  - id: default
    storage: "$work"
    semantic-checks: off
zone:
  - domain: .
    file: root.zone
CONF
knotd -c "$work/knot.conf" >"$work/knot.log" 2>&1 &
pids+=($!)
awk 'BEGIN { for (i = 0; i < 400000; i++) printf "m%d.scan%d.example A\n", i, i % 97 }' >"$work/scan.txt"
mkdir "$work/nx"
NXDNS_BIN=$bin NXDNS_CACHE_SIZE=$size NXDNS_WORKERS=2 NXDNS_ADMIN_PORT=$((base + 2)) \
	"$here/bench/nxdns-sut.sh" $((base + 1)) "$base" "$blockdir" "$work/nx" >"$work/nx.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do
	dig +short +time=1 +tries=1 -p $((base + 1)) @127.0.0.1 probe.example >/dev/null 2>&1 && break
	sleep 0.2
done
counters() {
	curl -s "http://127.0.0.1:$((base + 2))/metrics" |
		awk '/^nxdns_cache_(hits|misses|promoted|readmitted|evictions)_total /{printf "%s=%s ", substr($1, 13), $2}'
}
echo "binary $bin, cache.size $size"
for phase in mixed mixed scan mixed; do
	f=$mixed
	[[ $phase == scan ]] && f=$work/scan.txt
	qps=$(dnsperf -s 127.0.0.1 -p $((base + 1)) -d "$f" -c 8 -T 1 -q 200 -l 6 -n 1 2>&1 |
		awk '/Queries per second/{print $4}')
	echo "$phase qps=$qps $(counters)"
done
