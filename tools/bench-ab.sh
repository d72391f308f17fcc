#!/usr/bin/env bash
# bench-ab.sh: the same memplay command as processes under two (or more) builds and stores, run in
# turn so that each sees the machine in the same minutes; prints the least, the 20th percentile and
# the median CPU time (perf stat's task-clock) of each. The least is the figure to compare on a
# machine whose speed varies; the others say how often it is reached (docs/performance.md).
#
#   tools/bench-ab.sh ROUNDS LABEL=MEMPLAY:STORE [LABEL=MEMPLAY:STORE ...] -- ARGS...
#   e.g. tools/bench-ab.sh 80 old=../old/build/memplay:old.db new=build/memplay:new.db -- replay big --no-save
#
# Run it under `chrt -f 50` (as root) to keep other work off the measured process.
set -euo pipefail
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 3 ] || usage
rounds=$1
shift
case $rounds in '' | *[!0-9]*) usage ;; esac
cfgs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do cfgs+=("$1"); shift; done
[ $# -gt 0 ] && [ ${#cfgs[@]} -gt 0 ] || usage
shift
command -v perf >/dev/null || { echo "bench-ab.sh: needs perf (linux-perf)" >&2; exit 1; }
for ((i = 0; i < rounds; i++)); do
  for c in "${cfgs[@]}"; do
    label=${c%%=*} rest=${c#*=}
    bin=${rest%%:*} db=${rest#*:}
    perf stat -x, -e task-clock "$bin" --db "$db" "$@" 2>&1 >/dev/null | awk -F, -v w="$label" '/task-clock/ { print w, $1 }'
  done
done | python3 -c '
import collections, sys
runs = collections.defaultdict(list)
for line in sys.stdin:
    label, ms = line.split()
    runs[label].append(float(ms))
print("%-12s %10s %10s %10s %6s" % ("build", "least ms", "p20 ms", "median ms", "runs"))
for label, v in runs.items():
    v.sort()
    print("%-12s %10.1f %10.1f %10.1f %6d" % (label, v[0], v[len(v) // 5], v[len(v) // 2], len(v)))'
