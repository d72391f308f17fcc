#!/usr/bin/env bash
# bench-store.sh: how fast a trace goes into the store and replays out of it, as processes, and in how much memory.
#
#   tools/bench-store.sh [--memplay PATH] [--events N] [--big N] [--runs R] [--keep DIR]
#
# Generates a trace of N events (default 1,000,000; `memplay gen` records an H100, so a replay
# runs the time model on its profile) into a fresh store, then times `memplay replay TRACE
# --allocator ideal|torch --no-save` as a process: CPU seconds (user + system, the best of R
# runs, default 3: the machine may be shared, CPU time is what the process itself spent) and the
# largest resident memory, and the same replays of a copy of the trace that records no device (no
# time model). Prints each figure beside issue 17's goal. --big N also generates N
# events (100000000 for the memory goal: about 7 GB of disk) and reports one replay's memory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
memplay="$here/../build/memplay"
events=1000000
big=""
runs=3
keep=""
while [ $# -gt 0 ]; do
  case "$1" in
  --memplay) memplay=$2; shift 2 ;;
  --events) events=$2; shift 2 ;;
  --big) big=$2; shift 2 ;;
  --runs) runs=$2; shift 2 ;;
  --keep) keep=$2; shift 2 ;;
  -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench-store.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$memplay" ] || { echo "bench-store.sh: no memplay at '$memplay' (build it, or give --memplay)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-store.sh: needs /usr/bin/time (Debian package time)" >&2; exit 1; }
if [ -n "$keep" ]; then
  dir=$keep
  mkdir -p "$dir"
else
  dir=$(mktemp -d "${TMPDIR:-/tmp}/memplay-bench-store.XXXXXX")
  trap 'rm -rf "$dir"' EXIT
fi

# measure COMMAND...: runs it once; prints "cpu_seconds max_rss_kib". The CPU time is perf's
# task-clock when perf is installed (to the microsecond), else time's user + system (to 10 ms).
measure() {
  if command -v perf >/dev/null; then
    /usr/bin/time -f "%M" -o "$dir/time" perf stat -x, -e task-clock -o "$dir/perf" "$@" >/dev/null 2>"$dir/err" ||
      { cat "$dir/err" >&2; exit 1; }
    awk -F, '/task-clock/ { ms = $1 } END { printf "%.4f ", ms / 1000 }' "$dir/perf"
    cat "$dir/time"
  else
    /usr/bin/time -f "%U %S %M" -o "$dir/time" "$@" >/dev/null 2>"$dir/err" || { cat "$dir/err" >&2; exit 1; }
    awk '{ printf "%.4f %d\n", $1 + $2, $3 }' "$dir/time"
  fi
}

# best CPU of R runs, and the largest memory among them
best_of() {
  local best="" rss=0 c r
  for _ in $(seq "$runs"); do
    read -r c r < <(measure "$@")
    if [ -z "$best" ] || awk -v a="$c" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$c; fi
    [ "$r" -gt "$rss" ] && rss=$r
  done
  echo "$best $rss"
}

row() { # stage events cpu rss goal_events_per_s
  awk -v s="$1" -v n="$2" -v c="$3" -v r="$4" -v g="$5" 'BEGIN {
    eps = c > 0 ? n / c : 0
    goal = g > 0 ? sprintf(">= %d M: %s", g / 1e6, eps >= g ? "met" : "NOT met") : ""
    printf "%-34s %12d %10.3f %14.1f %10.0f  %s\n", s, n, c, eps / 1e6, r / 1024, goal }'
}

db="$dir/store.db"
rm -f "$db" "$db-wal" "$db-shm"
read -r gen_cpu gen_rss < <(measure "$memplay" --db "$db" gen --events "$events" --seed 1 --name bench)
echo "memplay bench-store: $events events (memplay gen --seed 1), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
echo "CPU seconds of the process (user + system), best of $runs; memory: the largest resident set"
echo
printf "%-34s %12s %10s %14s %10s  %s\n" "stage" "events" "CPU s" "M events/s" "max MiB" "goal (issue 17)"
row "gen into the store (generator too)" "$events" "$gen_cpu" "$gen_rss" 2000000
for alloc in ideal torch; do
  goal=20000000
  [ "$alloc" = torch ] && goal=12000000
  read -r cpu rss < <(best_of "$memplay" --db "$db" replay bench --allocator "$alloc" --no-save)
  row "replay from the store: $alloc" "$events" "$cpu" "$rss" "$goal"
done
# The same replays without the time model (the trace's recorded device taken away, so that no
# profile matches it): what reading the store and the allocator model cost on their own.
cp "$db" "$dir/nodev.db"
sqlite3 "$dir/nodev.db" "UPDATE traces SET device_name = NULL, device_memory = NULL"
for alloc in ideal torch; do
  read -r cpu rss < <(best_of "$memplay" --db "$dir/nodev.db" replay bench --allocator "$alloc" --no-save)
  row "  the same, no time model: $alloc" "$events" "$cpu" "$rss" 0
done
rm -f "$dir/nodev.db"
if [ -n "$big" ]; then
  bdb="$dir/big.db"
  rm -f "$bdb" "$bdb-wal" "$bdb-shm"
  read -r cpu rss < <(measure "$memplay" --db "$bdb" gen --events "$big" --seed 1 --name big)
  row "gen into the store (big)" "$big" "$cpu" "$rss" 0
  read -r cpu rss < <(measure "$memplay" --db "$bdb" replay big --allocator ideal --no-save)
  row "replay from the store: ideal (big)" "$big" "$cpu" "$rss" 0
  awk -v r="$rss" 'BEGIN { printf "\nbig replay: %.0f MiB resident at most (goal < 1024 MiB): %s\n", r / 1024, r < 1048576 ? "met" : "NOT met" }'
  echo "store file: $(du -h "$bdb" | cut -f1)"
  rm -f "$bdb" "$bdb-wal" "$bdb-shm"
fi
