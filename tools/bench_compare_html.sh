#!/usr/bin/env bash
# The cost of a comparison's HTML report: generates T traces of N events (memplay gen), then times
# `memplay compare` over 3 policies (torch, torch:expandable_segments:True, bfc) without and with
# --html, with --jobs 1 and 2, and prints a table of seconds (the fastest of --repeat runs: the
# machine may be shared) and the page's size. The report adds each cell's series observer and a
# second pass to its peak for the segment map.
#
# usage: tools/bench_compare_html.sh [--build DIR] [--traces T] [--events N] [--repeat R]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build traces=4 events=250000 repeat=2
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --traces) traces=$2; shift 2 ;;
    --events) events=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_compare_html: unknown option '$1'" >&2; exit 2 ;;
  esac
done
memplay="$PWD/$build/memplay"
[ -x "$memplay" ] || { echo "bench_compare_html: no '$memplay': build first (cmake --build $build)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export MEMPLAY_DB="$work/bench.db"
for i in $(seq "$traces"); do "$memplay" gen --events "$events" --seed "$i" --name "t$i" >/dev/null; done
P=(--policy torch --policy torch:expandable_segments:True --policy bfc)

# best SECONDS of REPEAT runs of the command
best() {
  local b="" t0 t1 ns
  for _ in $(seq "$repeat"); do
    t0=$(date +%s%N)
    "$@" >/dev/null || [ $? = 3 ]
    t1=$(date +%s%N)
    ns=$((t1 - t0))
    if [ -z "$b" ] || [ "$ns" -lt "$b" ]; then b=$ns; fi
  done
  awk -v n="$b" 'BEGIN { printf "%.2f", n / 1e9 }'
}

printf '%-52s %8s %10s\n' "compare 't*' ($traces traces x 3 policies, $events events each)" seconds size
row() {
  local label=$1 out=$2 s
  shift 2
  s=$(best "$@")
  printf '%-52s %8s %10s\n' "$label" "$s" "$([ -f "$out" ] && du -k "$out" | cut -f1 || echo 0) KiB"
}
for j in 1 2; do
  row "--jobs $j (the table only)" /dev/null "$memplay" compare 't*' "${P[@]}" --no-save --quiet --jobs $j
  row "--jobs $j --html" "$work/r$j.html" "$memplay" compare 't*' "${P[@]}" --no-save --quiet --jobs $j --html "$work/r$j.html"
done
cmp -s "$work/r1.html" "$work/r2.html" && echo "the pages of --jobs 1 and --jobs 2 are identical" ||
  echo "the pages of --jobs 1 and --jobs 2 DIFFER"
