#!/usr/bin/env bash
# Pictures of a long trace: generates an N-event training trace (memplay gen), then times
# `memplay plot` (SVG and HTML, one and two allocators, with and without the segment map at the
# peak) and the Perfetto and CSV exports, and prints a table of seconds (the fastest of --repeat
# runs: the machine may be shared) and file sizes. The replay itself is part of each time.
#
# usage: tools/bench_plot.sh [--build DIR] [--events N] [--repeat R]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build events=1000000 repeat=3
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --events) events=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_plot: unknown option '$1'" >&2; exit 2 ;;
  esac
done
memplay="$PWD/$build/memplay"
[ -x "$memplay" ] || { echo "bench_plot: no '$memplay': build first (cmake --build $build)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export MEMPLAY_DB="$work/bench.db"
"$memplay" gen --events "$events" --name long >/dev/null

# best SECONDS of REPEAT runs of the command
best() {
  local b="" t0 t1 ns
  for _ in $(seq "$repeat"); do
    t0=$(date +%s%N)
    "$@" >/dev/null
    t1=$(date +%s%N)
    ns=$((t1 - t0))
    if [ -z "$b" ] || [ "$ns" -lt "$b" ]; then b=$ns; fi
  done
  awk -v n="$b" 'BEGIN { printf "%.2f", n / 1e9 }'
}

printf '%-58s %8s %10s\n' "command (a $events-event generated trace)" seconds size
row() {
  local label=$1 out=$2
  shift 2
  local s
  s=$(best "$@")
  printf '%-58s %8s %10s\n' "$label" "$s" "$(du -k "$out" | cut -f1) KiB"
}
row "plot -o a.svg (torch)" "$work/a.svg" "$memplay" plot long --allocator torch -o "$work/a.svg"
row "plot -o a.html (torch)" "$work/a.html" "$memplay" plot long --allocator torch -o "$work/a.html"
row "plot -o b.html --at peak (torch)" "$work/b.html" "$memplay" plot long --allocator torch --at peak -o "$work/b.html"
row "plot -o c.html (torch and bfc)" "$work/c.html" "$memplay" plot long --allocator torch --allocator bfc -o "$work/c.html"
row "replay --no-save (torch, with the time model), to compare" /dev/null "$memplay" replay long --allocator torch --no-save
row "export --format perfetto (torch)" "$work/p.json" "$memplay" export long --format perfetto --allocator torch -o "$work/p.json"
row "export --format csv (torch)" "$work/p.csv" "$memplay" export long --format csv --allocator torch -o "$work/p.csv"
