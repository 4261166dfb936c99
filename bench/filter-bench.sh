#!/bin/sh
# Blocklist compiler + snapshot + matcher figures on the real lists in ../shared/data/lists.
#
#   bench/filter-bench.sh [BUILD_DIR]        (default: build; NX_SHARED_DIR overrides ../shared)
#
# Compiles every list (auto-detected format, one source per file, 37 sources) twice, without
# and with the side structure, builds a snapshot of each, then prints: compile time, total
# entries, skipped lines by reason, side rules per source, snapshot bytes and bytes/entry,
# build time and peak build memory, the side structure's size, lookups/sec on one core over
# the dnsperf workload (snapshot matcher alone, then nx_filter_lists_decide), how each
# workload category was decided, and both matchers against nx_filter_lists_decide in one
# process (filter_bench compare: ratios in the same run, thread CPU time). Work files go to a
# temp dir that is removed at the end.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$here/$build ;; esac
shared=${NX_SHARED_DIR:-$here/../shared}
lists=$shared/data/lists
workload=$shared/data/workload
if [ ! -d "$lists" ]; then
	echo "filter-bench: no $lists (set NX_SHARED_DIR); nothing to measure" >&2
	exit 0
fi

ninja -C "$build" tests/unit/filter/filter_bench >/dev/null
bench=$build/tests/unit/filter/filter_bench
work=$(mktemp -d "${TMPDIR:-/tmp}/nxfilter-bench-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$work/lists"

ms() { date +%s%3N; }

# Two passes over the same lists: "before" compiles as nxdns did without the side structure
# (modifier, regex and pattern lines skipped, $important as a plain rule); "after" compiles
# with --side (what the daemon does once the side structure is wired): those rules go to
# NAME.side. Hosts answers stay null (every shared list is a URL source).
for pass in before after; do
	echo "== compile, $pass (one source per list file, format auto-detected per line)"
	mkdir -p "$work/$pass"
	flag=""
	[ "$pass" = after ] && flag=--side
	t0=$(ms)
	sources=""
	for f in "$lists"/*/*.txt; do
		fmt=$(basename "$(dirname "$f")")
		name=${fmt}_$(basename "$f" .txt)
		# shellcheck disable=SC2086
		"$bench" compile --json $flag --name "$name" "$f" "$work/$pass" >"$work/$pass/$name.json"
		sources="$sources $work/$pass/$name"
		names="${names:-} $name"
	done
	t1=$(ms)
	python3 - "$work/$pass" <<'PY'
import json, glob, os, sys
rows = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(sys.argv[1], '*.json')))]
tot = lambda k: sum(r['counts'].get(k, 0) for r in rows)
skipped = {}
for r in rows:
    for k, v in r['skipped'].items():
        skipped[k] = skipped.get(k, 0) + v['count']
print(f"sources {len(rows)}: lines {sum(r['lines'] for r in rows):,}, "
      f"list {tot('list'):,}, wild {tot('wild'):,}, allow {tot('allow'):,}, "
      f"side {tot('side'):,}; "
      f"max compile peak {max(r['peak_build_bytes'] for r in rows):,} B; "
      f"slowest {max(r['compile_ms'] for r in rows)} ms")
print(f"skipped by reason ({sum(skipped.values()):,}): " +
      ", ".join(f"{k} {v:,}" for k, v in sorted(skipped.items())))
for r in rows:
    if r['counts'].get('side', 0):
        print(f"  {r['name']}: {r['counts']['side']:,} side rules, "
              f"{r['skipped_total']:,} lines still skipped")
PY
	echo "compile time, all lists: $((t1 - t0)) ms (includes one process start per list)"
	echo "== snapshot, $pass"
	# shellcheck disable=SC2086
	"$bench" snapshot-build "$work/$pass/all.nxs" $sources
	eval "sources_$pass=\"\$sources\""
done

names=""
for f in "$lists"/*/*.txt; do
	names="$names $(basename "$(dirname "$f")")_$(basename "$f" .txt)"
done
if [ -f "$workload/queries-mixed.txt" ]; then
	echo "== lookups before: snapshot matcher alone (queries-mixed.txt, all sources eligible)"
	"$bench" lookups "$work/before/all.nxs" "$workload/queries-mixed.txt" \
		"$workload/queries-mixed.labels.tsv"
	echo "== lookups after: nx_filter_lists_decide, snapshot + side structure"
	# shellcheck disable=SC2086
	"$bench" lookups "$work/after/all.nxs" "$workload/queries-mixed.txt" \
		"$workload/queries-mixed.labels.tsv" --side "$work/after" $names
	echo "== the side structure's cost, one process: snapshot text / wire matcher vs" \
		"nx_filter_lists_decide (3 rounds, thread CPU time; pin it: taskset -c 1)"
	# shellcheck disable=SC2086
	"$bench" compare "$work/after/all.nxs" "$workload/queries-mixed.txt" 3 \
		--side "$work/after" $names
else
	echo "no workload in $workload"
fi
