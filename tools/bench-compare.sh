#!/usr/bin/env bash
# bench-compare.sh: the speed of `memplay compare`: cells and events per second on every core against
# one core's speed times the cores, and the fixed cost of a cell. Prints a table (docs/performance.md).
#
# usage: tools/bench-compare.sh [MEMPLAY]         (default build/memplay)
# environment: TRACES (100) traces of EVENTS (100000) generated events, 4 policies each;
#              SMALL_CELLS (1000) cells of a SMALL_EVENTS (100) event trace for the fixed cost;
#              JOBS (the cores) threads for the parallel run.
set -euo pipefail
M=$(realpath "${1:-build/memplay}")
TRACES=${TRACES:-100}
EVENTS=${EVENTS:-100000}
SMALL_CELLS=${SMALL_CELLS:-1000}
SMALL_EVENTS=${SMALL_EVENTS:-100}
JOBS=${JOBS:-$(nproc)}
dir=$(mktemp -d "${TMPDIR:-/tmp}/memplay-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
db=$dir/bench.db
policies=(--policy torch --policy 'torch:expandable_segments:True' --policy 'bfc:allow_growth=true' --policy async)
npol=4

echo "generating $TRACES traces of $EVENTS events and $((SMALL_CELLS / npol)) of $SMALL_EVENTS ..." >&2
for s in $(seq 1 "$TRACES"); do "$M" --db "$db" gen --events "$EVENTS" --seed "$s" --name "big-$s" >/dev/null; done
for s in $(seq 1 $((SMALL_CELLS / npol))); do
  "$M" --db "$db" gen --events "$SMALL_EVENTS" --seed "$s" --name "small-$s" >/dev/null
done

# run PATTERN JOBS: the wall-clock and CPU (user + system) seconds of one comparison (results not stored, as a CI check runs it
# with --no-save or a shard; storing adds one transaction per cell).
run() {
  local TIMEFORMAT='%R %U %S'
  { time "$M" --db "$db" compare "$1" "${policies[@]}" --jobs "$2" --no-save --quiet --no-fail --json \
      >"$dir/out.json"; } 2>&1
}

big_cells=$((TRACES * npol))
big_events=$((big_cells * EVENTS))
read -r t1 u1 s1 < <(run 'big-*' 1)
read -r tn un sn < <(run 'big-*' "$JOBS")
read -r ts us ss < <(run 'small-*' 1)
small_cells=$(((SMALL_CELLS / npol) * npol))

awk -v t1="$t1" -v tn="$tn" -v ts="$ts" -v c1="$(echo "$u1 $s1" | awk '{print $1 + $2}')" \
  -v cn="$(echo "$un $sn" | awk '{print $1 + $2}')" -v cs="$(echo "$us $ss" | awk '{print $1 + $2}')" -v cells="$big_cells" -v ev="$big_events" -v jobs="$JOBS" \
  -v sc="$small_cells" -v se="$SMALL_EVENTS" -v n="$TRACES" -v e="$EVENTS" 'BEGIN {
  printf "%-44s %9s %9s %11s %11s\n", "run", "wall s", "CPU s", "cells/s", "M events/s"
  printf "%-44s %9.2f %9.2f %11.1f %11.2f\n", sprintf("%d traces x 4 policies, %d events, --jobs 1", n, e), t1, c1, cells / t1, ev / t1 / 1e6
  printf "%-44s %9.2f %9.2f %11.1f %11.2f\n", sprintf("the same, --jobs %d", jobs), tn, cn, cells / tn, ev / tn / 1e6
  printf "%-44s %9.2f %9.2f %11.1f %11.2f\n", sprintf("%d cells of %d events, --jobs 1", sc, se), ts, cs, sc / ts, sc * se / ts / 1e6
  printf "\nparallel efficiency: %.0f%% of linear by the clock (%d jobs: %.2f M events/s against %.2f x %d);\n",
    100 * (ev / tn) / (jobs * ev / t1), jobs, ev / tn / 1e6, ev / t1 / 1e6, jobs
  printf "  by CPU time %.0f%% (the work the threads add: %.2f CPU s against %.2f)\n", 100 * c1 / cn, cn, c1
  getline load < "/proc/loadavg"
  split(load, l, " ")
  printf "load average during the runs: %s (other work on the cores lowers the parallel figures)\n", l[1]
  printf "fixed cost per cell: %.0f us by the clock, %.0f us of CPU (a %d-event cell; process start and trace listing included)\n",
    1e6 * ts / sc, 1e6 * cs / sc, se
}'
