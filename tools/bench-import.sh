#!/usr/bin/env bash
# bench-import.sh: the imports' wall clock under two (or more) builds, run in turn so that each sees
# the machine (and its disk) in the same minutes: `memplay bench`'s two import rows, and as
# processes `memplay gen` and `memplay import` of a JSON Lines file, each into a new store. Prints
# the least and the median seconds of each, and the events a second of the least
# (docs/performance.md).
#
#   tools/bench-import.sh ROUNDS LABEL=MEMPLAY [LABEL=MEMPLAY ...] [-- EVENTS]
#   e.g. tools/bench-import.sh 8 old=../old/build/memplay new=build/memplay -- 1000000
set -euo pipefail
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
rounds=$1
shift
case $rounds in '' | *[!0-9]*) usage ;; esac
cfgs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do cfgs+=("$1"); shift; done
[ ${#cfgs[@]} -gt 0 ] || usage
events=1000000
[ $# -gt 1 ] && events=$2
case $events in '' | *[!0-9]*) usage ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
first=${cfgs[0]#*=}
"$first" gen --events "$events" --seed 1 --db "$work/src.db" >/dev/null
"$first" export "gen-1-$events" --db "$work/src.db" -o "$work/trace.jsonl"
rm -f "$work"/src.db*
wall() { # seconds of one command's wall clock
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null
  t1=$(date +%s%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) / 1e9 }'
}
for ((i = 0; i < rounds; i++)); do
  for c in "${cfgs[@]}"; do
    label=${c%%=*} bin=${c#*=}
    "$bin" bench --events "$events" --allocators ideal 2>&1 |
      awk -v w="$label" '/^import: / { for (k = 2; k <= NF; k++) if ($k == "wall") s = $(k - 1)
                                        print w, ($2 == "jsonl" ? "bench:jsonl" : "bench:generate"), s }'
    echo "$label process:gen $(wall "$bin" gen --events "$events" --seed 1 --db "$work/new.db")"
    rm -f "$work"/new.db*
    echo "$label process:import-jsonl $(wall "$bin" import "$work/trace.jsonl" --db "$work/new.db")"
    rm -f "$work"/new.db*
  done
done | python3 -c '
import collections, sys
events = int(sys.argv[1])
runs = collections.defaultdict(list)
for line in sys.stdin:
    label, what, s = line.split()
    runs[(what, label)].append(float(s))
print("%-22s %-10s %9s %9s %12s %5s" % ("import", "build", "least s", "median s", "M events/s", "runs"))
for (what, label), v in sorted(runs.items()):
    v.sort()
    print("%-22s %-10s %9.3f %9.3f %12.2f %5d" % (what, label, v[0], v[len(v) // 2], events / v[0] / 1e6, len(v)))' "$events"
