#!/usr/bin/env bash
# nxdns as a "system under test" for ../shared/bench (measure-qps.sh, measure-memory.sh):
#
#   --sut 'nxdns=bench/nxdns-sut.sh {port} {upstream_port} {blockdir} {rundir}'
#
# Writes RUNDIR/nxdns.yaml and execs `nxdns serve` (so the PID the shared scripts record is the
# daemon's). The blocklist is the one the peers load: BLOCKDIR/domains (prep-lists.sh's
# normalized union, one name a line), written once as `||name^` so that nxdns blocks each name
# and every name below it, as dnsmasq address=/x/, Unbound always_nxdomain and RPZ x + *.x do.
# (A name with both flags is stored once in the snapshot, so this costs what an exact list costs.)
#
# Environment (defaults in brackets):
#   NXDNS_BIN          the daemon                               [build/nxdns of this tree]
#   NXDNS_WORKERS      listener.workers                         [nproc]
#   NXDNS_PERMITS      query_budget.permits                     [1024]
#   NXDNS_CACHE_SIZE   cache.size (entries)                     [10000]
#   NXDNS_ADMIN_PORT   admin.listen port on 127.0.0.1, 0 = off  [0]
#   NXDNS_LOG_LEVEL    log.level                                [warn]
#   NXDNS_QUERY_LOG    logging.query_log (true/false)           [true, the product default]
#
# Why permits: the default budget (32 forwarding operations in flight, process-wide) is sized for
# a household. dnsperf keeps 200 queries outstanding, so with 32 permits most forwarded misses
# would be dropped by design (nxdns_dropped_total{reason="dropped_no_permit"}) and counted as
# lost. Load tests raise it; the peers' equivalents (dnsmasq dns-forward-max=1000, Unbound and
# Knot Resolver defaults) are of the same order.
set -euo pipefail
[[ $# -eq 4 ]] || { echo "usage: $0 PORT UPSTREAM_PORT BLOCKDIR RUNDIR" >&2; exit 2; }
port=$1 up=$2 blockdir=$3 rundir=$4
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${NXDNS_BIN:-$here/build/nxdns}
[[ -x "$bin" ]] || { echo "nxdns-sut: no executable $bin (set NXDNS_BIN)" >&2; exit 1; }
mkdir -p "$rundir"
rundir=$(cd "$rundir" && pwd)

list=$rundir/blocklist.txt
if [[ -s "$blockdir/domains" ]]; then
	LC_ALL=C awk '{print "||" $0 "^"}' "$blockdir/domains" >"$list"
else
	: >"$list"
fi

admin_port=${NXDNS_ADMIN_PORT:-0}
{
	echo "listener:"
	echo "  dns: [\"127.0.0.1:$port\"]"
	echo "  workers: ${NXDNS_WORKERS:-$(nproc)}"
	echo "upstream:"
	echo "  servers: [\"127.0.0.1:$up\"]"
	echo "  timeout_ms: 2000"
	echo "query_budget:"
	echo "  permits: ${NXDNS_PERMITS:-1024}"
	echo "access:"
	echo "  rate_limit: {qps: 0}   # off: dnsperf is one client (127.0.0.1) asking far beyond a household device's rate"
	echo "cache:"
	echo "  size: ${NXDNS_CACHE_SIZE:-10000}"
	echo "filter:"
	echo "  sources:"
	echo "    - {name: bench, path: \"$list\", format: adblock}"
	if [[ $admin_port != 0 ]]; then
		echo "admin:"
		echo "  enabled: true"
		echo "  listen: \"127.0.0.1:$admin_port\""
	else
		echo "admin:"
		echo "  enabled: false"
	fi
	echo "state_dir: $rundir/state"
	echo "log:"
	echo "  level: ${NXDNS_LOG_LEVEL:-warn}"
	if [[ -n ${NXDNS_QUERY_LOG:-} ]]; then
		echo "logging:"
		echo "  query_log: $NXDNS_QUERY_LOG"
	fi
} >"$rundir/nxdns.yaml"

exec "$bin" serve --config "$rundir/nxdns.yaml"
