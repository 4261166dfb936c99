#!/usr/bin/env bash
# thread-cpu.sh [-o FILE] PID -- COMMAND...: CPU used by each thread of PID while COMMAND runs
# (e.g. a dnsperf load), from /proc/PID/task/*/stat (utime + stime) and the thread names (comm).
# Prints one line per thread: name, tid, CPU seconds, cores (CPU s / wall s), share of the
# process's CPU; then the total. COMMAND's output is left alone; the table goes after it on
# stdout, or to FILE with -o. Reads /proc only.
set -euo pipefail
out=/dev/stdout
[[ ${1:-} == -o ]] && { out=$2; shift 2; }
[[ $# -ge 3 && $2 == -- ]] || { echo "usage: $0 [-o FILE] PID -- COMMAND..." >&2; exit 2; }
pid=$1; shift 2
hz=$(getconf CLK_TCK)
snap() { local t; for t in /proc/"$pid"/task/*; do
	printf '%s %s %s\n' "${t##*/}" "$(awk '{print $14 + $15}' "$t/stat" 2>/dev/null || echo 0)" "$(tr ' ' '_' <"$t/comm" 2>/dev/null || echo '?')"
done; }
a=$(snap); t0=$(date +%s%N)
"$@" || true
b=$(snap); t1=$(date +%s%N)
awk -v hz="$hz" -v wall="$(( (t1 - t0) / 1000000 ))" '
	NR == FNR {a[$1] = $2; next}
	{d = $2 - a[$1]; if (d < 0) d = 0; n[$1] = $3; c[$1] = d; tot += d}
	END {
		w = wall / 1000
		for (k in c) printf "%-14s tid %-8s %7.2f CPU s  %5.2f cores  %5.1f%%\n", n[k], k, c[k] / hz, c[k] / hz / w, tot ? 100 * c[k] / tot : 0
		printf "%-14s %-12s %7.2f CPU s  %5.2f cores over %.1f s\n", "total", "", tot / hz, tot / hz / w, w
	}' <(echo "$a") <(echo "$b") >"$out"
