#!/bin/sh
# Blocklist compiler + snapshot + matcher figures on the real lists in ../shared/data/lists.
#
#   bench/filter-bench.sh [BUILD_DIR]        (default: build; NX_SHARED_DIR overrides ../shared)
#
# Compiles every list (auto-detected format, one source per file, 37 sources), builds one
# snapshot, then prints: compile time, total entries, snapshot bytes and bytes/entry, build
# time and peak build memory, lookups/sec on one core over the dnsperf workload, and how each
# workload category was decided. Work files go to a temp dir that is removed at the end.
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

echo "== compile (one source per list file, format auto-detected per line)"
t0=$(ms)
sources=""
for f in "$lists"/*/*.txt; do
	fmt=$(basename "$(dirname "$f")")
	name=${fmt}_$(basename "$f" .txt)
	"$bench" compile --json --name "$name" "$f" "$work/lists" >"$work/$name.json"
	sources="$sources $work/lists/$name"
done
t1=$(ms)
python3 - "$work" <<'PY'
import json, glob, os, sys
rows = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(sys.argv[1], '*.json')))]
tot = lambda k: sum(r['counts'][k] for r in rows)
skipped = {}
for r in rows:
    for k, v in r['skipped'].items():
        skipped[k] = skipped.get(k, 0) + v['count']
print(f"sources {len(rows)}: lines {sum(r['lines'] for r in rows):,}, "
      f"list {tot('list'):,}, wild {tot('wild'):,}, allow {tot('allow'):,}; "
      f"max compile peak {max(r['peak_build_bytes'] for r in rows):,} B; "
      f"slowest {max(r['compile_ms'] for r in rows)} ms")
print("skipped by reason: " + ", ".join(f"{k} {v:,}" for k, v in sorted(skipped.items())))
PY
echo "compile time, all lists: $((t1 - t0)) ms (includes one process start per list)"

echo "== snapshot"
# shellcheck disable=SC2086
"$bench" snapshot-build "$work/all.nxs" $sources

echo "== lookups (queries-mixed.txt, all sources eligible)"
if [ -f "$workload/queries-mixed.txt" ]; then
	"$bench" lookups "$work/all.nxs" "$workload/queries-mixed.txt" \
		"$workload/queries-mixed.labels.tsv"
else
	echo "no workload in $workload"
fi
